/*
 * cmd_object.c - OBJECT (ENCODING FREQ IDLETIME REFCOUNT HELP) and MEMORY (USAGE HELP): what a
 * key's value looks like inside, as Redis's object.c answers, from the one record the key has.
 *
 * Design notes:
 *  1. OBJECT ENCODING answers what redis-server 7.0 would say for the same value: a collection's
 *     header keeps Redis's encoding byte (coll/coll.h; its type's code moves it by Redis's rules),
 *     and a string is "int" when Redis's tryObjectEncoding would make it one (a canonical 64-bit
 *     integer of at most 20 bytes), "embstr" up to 44 bytes, else "raw". A string Redis built by
 *     APPEND or SETRANGE is "raw" there whatever its length: we do not know how a string was built,
 *     so such short strings answer "embstr" here (a known difference).
 *  2. OBJECT REFCOUNT: Redis shares the integers 0..9999 (OBJ_SHARED_INTEGERS, INT_MAX references)
 *     unless an LRU/LFU maxmemory policy is set; every other value has one reference, as every
 *     record here has one owner.
 *  3. Access times and frequencies are not tracked (no per-key LRU/LFU clock: eviction goes by log
 *     segments, compact.c), so OBJECT FREQ and IDLETIME give Redis's error where Redis gives one
 *     (the policy does not track it) and an error saying so otherwise, never an invented number.
 *  4. MEMORY USAGE is what the key costs here: its record in the log (header, expiry, key, value
 *     with its capacity, padding to 8) plus its index entry (8 bytes). SAMPLES is parsed as Redis
 *     does and changes nothing: nothing is sampled, the record size is exact. A large collection
 *     (coll_large.c) costs its head's record plus the bytes of its parts' values (mbytes).
 */
#include "server/server_int.h"

#include <limits.h>
#include <string.h>

#include "coll/coll.h"

struct obj_read {
	char enc[16];
	long long refcount;
	size_t bytes;              /* the value's length (MEMORY USAGE) */
	uint64_t parts;            /* a large collection's part bytes (its head's mbytes) */
	bool has_expiry;
};

static void obj_read_fn(void *ctx, const struct coll_view *view, const hlog_value *v)
{
	struct obj_read *o = ctx;
	long long n;
	bool is_int = v->len <= 20 && spw_parse_ll((const char *)v->ptr, v->len, &n);
	o->bytes = v->len;
	o->parts = view->large ? view->large->mbytes : 0;
	o->has_expiry = v->expire_ms != HLOG_NO_EXPIRY;
	o->refcount = 1;
	if (view->type) {
		snprintf(o->enc, sizeof(o->enc), "%s", coll_enc_name(view->enc));
		return;
	}
	snprintf(o->enc, sizeof(o->enc), "%s", is_int ? "int" : v->len <= 44 ? "embstr" : "raw");
	int p = g_cfg.maxmemory_policy;
	bool lru_lfu = g_cfg.maxmemory && p != SPW_POLICY_VOLATILE_RANDOM && p != SPW_POLICY_VOLATILE_TTL &&
	               p != SPW_POLICY_ALLKEYS_RANDOM && p != SPW_POLICY_NOEVICTION;
	if (is_int && n >= 0 && n < 10000 && !lru_lfu)
		o->refcount = INT_MAX;
}

/* The key's value, or a nil reply (false) when it is absent or the read failed. */
static bool obj_lookup(client *c, const resp_slice *key, struct obj_read *o)
{
	/* a large collection: its head alone */
	static const coll_hint head = { .mode = COLL_HINT_HEAD, .first = 0, .step = 0 };
	int rc = coll_read_hint(c, key, 0, &head, obj_read_fn, o);
	if (reply_store_failed(c, rc))
		return false;
	if (rc == HLOG_NOTFOUND) {
		reply_null(c);
		return false;
	}
	return true;
}

static bool policy_is_lfu(void)
{
	return g_cfg.maxmemory_policy == SPW_POLICY_VOLATILE_LFU ||
	       g_cfg.maxmemory_policy == SPW_POLICY_ALLKEYS_LFU;
}

void cmd_object(client *c)
{
	static const char *const help[] = {
		"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"ENCODING <key>",
		"    Return the kind of internal representation used in order to store the value",
		"    associated with a <key>.",
		"FREQ <key>",
		"    Return the access frequency index of the <key>. The returned integer is",
		"    proportional to the logarithm of the recent access frequency of the key.",
		"IDLETIME <key>",
		"    Return the idle time of the <key>, that is the approximated number of",
		"    seconds elapsed since the last access to the key.",
		"REFCOUNT <key>",
		"    Return the number of references of the value associated with the specified",
		"    <key>.",
		"HELP",
		"    Prints this help.",
		NULL,
	};
	const resp_slice *sub = &c->argv[1];
	struct obj_read o;

	if (arg_eq(sub, "help")) {
		reply_help(c, help);
	} else if (arg_eq(sub, "encoding")) {
		if (obj_lookup(c, &c->argv[2], &o))
			reply_bulk(c, o.enc, strlen(o.enc));
	} else if (arg_eq(sub, "refcount")) {
		if (obj_lookup(c, &c->argv[2], &o))
			reply_int(c, o.refcount);
	} else if (arg_eq(sub, "freq")) {
		if (!obj_lookup(c, &c->argv[2], &o))
			return;
		if (!policy_is_lfu())
			reply_error(c, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
			               "Please note that when switching between policies at runtime LRU and LFU data "
			               "will take some time to adjust.");
		else
			reply_error(c, "ERR access frequency is not tracked by this server (no per-key LFU counters)");
	} else if (arg_eq(sub, "idletime")) {
		if (!obj_lookup(c, &c->argv[2], &o))
			return;
		if (policy_is_lfu())
			reply_error(c, "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note "
			               "that when switching between policies at runtime LRU and LFU data will take "
			               "some time to adjust.");
		else
			reply_error(c, "ERR idle time is not tracked by this server (no per-key access clock)");
	}
}

void cmd_memory(client *c)
{
	static const char *const help[] = {
		"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"USAGE <key> [SAMPLES <count>]",
		"    Return memory in bytes used by <key> and its value. Nested values are",
		"    sampled up to <count> times (default: 5, 0 means sample all).",
		"HELP",
		"    Prints this help.",
		NULL,
	};
	const resp_slice *sub = &c->argv[1];
	struct obj_read o;

	if (arg_eq(sub, "help")) {
		reply_help(c, help);
		return;
	}
	/* memory|usage: [SAMPLES count] as Redis parses it (note 4). */
	for (int j = 3; j < c->argc; j++) {
		long long n;
		if (arg_eq(&c->argv[j], "samples") && j + 1 < c->argc) {
			if (!arg_ll(&c->argv[j + 1], &n)) {
				reply_err_not_int(c);
				return;
			}
			j++;
		} else {
			reply_error(c, "ERR syntax error");
			return;
		}
	}
	if (obj_lookup(c, &c->argv[2], &o)) {
		uint64_t rec = hlog_record_bytes(c->argv[2].len, o.bytes, o.has_expiry);
		reply_int(c, (long long)(rec + o.parts) + 8);   /* + its index entry */
	}
}
