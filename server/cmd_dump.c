/*
 * cmd_dump.c - DUMP and RESTORE (Redis's cluster.c dumpCommand / restoreCommand), and the per-type
 * table that turns Redis-format values into records and back (dump.h), which --import-rdb shares.
 *
 * Design notes:
 *  1. dump_types[] has one entry per type (RDB_KIND_*). Strings are here; hashes, lists, sets, zsets
 *     in dump_coll.c, whose visitors build the record's value: a new type adds its entry (one
 *     line) and nothing else here changes. A kind without an entry is "not supported yet": RESTORE answers "ERR Bad data
 *     format", as Redis does for a payload it cannot load.
 *  2. RESTORE's checks come in Redis 7.0's order: options (IDLETIME and FREQ exclude each other:
 *     the second is a syntax error), BUSYKEY unless REPLACE, the TTL, the payload's version and
 *     CRC, then the value. IDLETIME and FREQ are checked and dropped (no LRU/LFU is kept).
 *  3. Nothing is changed before the last step, so a RESTORE that parks on the device (the BUSYKEY
 *     look-up, or the write) simply runs again (commands.c note 6). The write is one hlog_rmw that
 *     checks again that the key is absent without REPLACE (another worker may have written it
 *     since the look-up) and writes the value with its type and expiry.
 *  4. A TTL already past (ABSTTL in the past, or a relative one that lands before now cannot) stores
 *     nothing and deletes the old key under REPLACE, as Redis's checkAlreadyExpired.
 *  5. DUMP builds the payload in a malloc'd buffer inside the read's callback (the value's bytes are
 *     only valid there); DUMP is not a hot path.
 */
#include "server/server_int.h"
#include "server/dump.h"
#include "coll/coll.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- the type table ---------------- */

static int string_value(void *ctx, const uint8_t *p, size_t len)
{
	dump_build *b = ctx;
	b->val.len = 0;
	rdb_buf_put(&b->val, p, len);
	b->rtype = HLOG_T_STRING;
	return b->val.oom ? -ENOMEM : 0;
}

static int string_dump(const hlog_value *v, rdb_buf *out)
{
	rdb_dump_string(out, v->ptr, v->len);
	return 0;
}

static const rdb_visitor string_vis = { .string = string_value };
static const dump_type_ops string_ops = { .vis = &string_vis, .dump = string_dump };

const dump_type_ops *const dump_types[RDB_KINDS] = {
	[RDB_KIND_STRING] = &string_ops,
	[RDB_KIND_HASH] = &dump_hash_ops,
	[RDB_KIND_LIST] = &dump_list_ops,
	[RDB_KIND_SET] = &dump_set_ops,
	[RDB_KIND_ZSET] = &dump_zset_ops,
};

int dump_record_kind(const hlog_value *v)
{
	coll_view cv;
	if (v->rtype == HLOG_T_STRING)
		return RDB_KIND_STRING;
	if (v->rtype != HLOG_T_HEAD || !coll_parse(v->ptr, v->len, &cv))
		return RDB_KIND_UNKNOWN;
	switch (cv.type) {
	case COLL_HASH: return RDB_KIND_HASH;
	case COLL_LIST: return RDB_KIND_LIST;
	case COLL_SET: return RDB_KIND_SET;
	case COLL_ZSET: return RDB_KIND_ZSET;
	}
	return RDB_KIND_UNKNOWN;
}

const rdb_visitor *dump_build_begin(dump_build *b, int rdb_type)
{
	memset(b, 0, sizeof(*b));
	b->rdb_type = rdb_type;
	b->kind = rdb_type_kind(rdb_type);
	const dump_type_ops *ops = b->kind < RDB_KINDS ? dump_types[b->kind] : NULL;
	return ops ? ops->vis : NULL;
}

void dump_build_fini(dump_build *b)
{
	const dump_type_ops *ops = b->kind >= 0 && b->kind < RDB_KINDS ? dump_types[b->kind] : NULL;
	if (ops && ops->fini)
		ops->fini(b);
	rdb_buf_fini(&b->val);
}

int dump_payload_build(const void *p, size_t len, dump_build *b)
{
	const uint8_t *t = p;
	const rdb_visitor *vis = dump_build_begin(b, len ? t[0] : -1);
	int type;
	if (!vis)
		return RDB_E_UNSUPPORTED;
	return rdb_dump_decode(p, len, vis, b, &type);
}

typedef struct store_ctx {
	const dump_build *b;
	int64_t expire_ms;
	bool replace;
} store_ctx;

static int store_plan(void *arg, const hlog_value *old, hlog_rmw_plan *out)
{
	store_ctx *sc = arg;
	if (old && !sc->replace)
		return DUMP_E_BUSYKEY;
	out->action = HLOG_RMW_WRITE;
	out->new_len = sc->b->val.len;
	out->expire_ms = sc->expire_ms;
	out->rtype = sc->b->rtype;
	return 0;
}

static void store_fill(void *arg, const hlog_value *old, uint8_t *dst, bool in_place)
{
	store_ctx *sc = arg;
	(void)old, (void)in_place;
	memcpy(dst, sc->b->val.p, sc->b->val.len);
}

static const hlog_rmw_ops store_ops = { store_plan, store_fill };

int dump_build_store(hlog_session *s, const hlog_key *k, const dump_build *b, int64_t expire_ms, bool replace)
{
	store_ctx sc = { b, expire_ms, replace };
	return hlog_rmw(s, k, &store_ops, &sc);
}

/* ---------------- DUMP ---------------- */

typedef struct dump_ctx {
	rdb_buf out;
	int rc;
	bool large;                /* a large head: dumped from its small record (coll_large_flat) */
	int64_t expire_ms;
} dump_ctx;

static void dump_read(void *arg, const hlog_value *v)
{
	dump_ctx *d = arg;
	if (v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len)) {
		d->large = true;
		d->expire_ms = v->expire_ms;
		return;
	}
	int kind = dump_record_kind(v);
	const dump_type_ops *ops = kind < RDB_KINDS ? dump_types[kind] : NULL;
	if (!ops || !ops->dump) {
		d->rc = RDB_E_UNSUPPORTED;
		return;
	}
	d->rc = ops->dump(v, &d->out);
	if (d->rc == 0)
		d->rc = rdb_dump_finish(&d->out);
}

void cmd_dump(client *c)
{
	hlog_key k;
	dump_ctx d = { .rc = 0 };
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_read(c->w->sess, &k, dump_read, &d);
	for (int tries = 0; rc == HLOG_OK && d.large && tries < 64; tries++) {
		hlog_value fv = { .expire_ms = d.expire_ms, .rtype = HLOG_T_HEAD };
		d.large = false;
		rc = coll_large_flat(c, &k, &fv.ptr, &fv.len);
		if (rc == HLOG_OK)
			dump_read(&d, &fv);
		else if (rc == COLL_E_RESTART)
			rc = hlog_read(c->w->sess, &k, dump_read, &d);
	}
	if (rc == COLL_E_RESTART || (rc == HLOG_OK && d.large))
		rc = -EAGAIN;
	if (rc == HLOG_NOTFOUND) {
		count_lookup(c, false);
		reply_null(c);
	} else if (!reply_store_failed(c, rc)) {
		count_lookup(c, true);
		if (d.rc == RDB_E_UNSUPPORTED)
			reply_error(c, "ERR DUMP of this key's type is not supported yet");
		else if (d.rc < 0)
			reply_err_store(c, d.rc);
		else
			reply_bulk(c, d.out.p, d.out.len);
	}
	rdb_buf_fini(&d.out);
}

/* ---------------- RESTORE ---------------- */

typedef struct restore_opts {
	bool replace, absttl;
	long long idle, freq;         /* -1: not given */
} restore_opts;

/* RESTORE's options from argv[4] on (restoreCommand's loop). false with the reply written. */
static bool restore_opts_parse(client *c, restore_opts *o)
{
	*o = (restore_opts){ .idle = -1, .freq = -1 };
	for (int j = 4; j < c->argc; j++) {
		int more = c->argc - j - 1;
		const resp_slice *a = &c->argv[j];
		if (OPT_IS(a, "replace")) {
			o->replace = true;
		} else if (OPT_IS(a, "absttl")) {
			o->absttl = true;
		} else if (OPT_IS(a, "idletime") && more >= 1 && o->freq == -1) {
			if (!arg_ll(&c->argv[++j], &o->idle)) {
				reply_err_not_int(c);
				return false;
			}
			if (o->idle < 0) {
				reply_error(c, "ERR Invalid IDLETIME value, must be >= 0");
				return false;
			}
		} else if (OPT_IS(a, "freq") && more >= 1 && o->idle == -1) {
			if (!arg_ll(&c->argv[++j], &o->freq)) {
				reply_err_not_int(c);
				return false;
			}
			if (o->freq < 0 || o->freq > 255) {
				reply_error(c, "ERR Invalid FREQ value, must be >= 0 and <= 255");
				return false;
			}
		} else {
			reply_err_syntax(c);
			return false;
		}
	}
	return true;
}

static void read_noop(void *ctx, const hlog_value *v)
{
	(void)ctx, (void)v;
}

void cmd_restore(client *c)
{
	restore_opts o;
	long long ttl;
	hlog_key k;
	dump_build b;
	if (!restore_opts_parse(c, &o))
		return;
	key_from_arg(&k, &c->argv[1]);
	if (!o.replace) {
		int rc = hlog_read(c->w->sess, &k, read_noop, NULL);
		if (rc == HLOG_OK) {
			reply_error(c, "BUSYKEY Target key name already exists.");
			return;
		}
		if (rc != HLOG_NOTFOUND && reply_store_failed(c, rc))
			return;
	}
	if (!arg_ll(&c->argv[2], &ttl)) {
		reply_err_not_int(c);
		return;
	}
	if (ttl < 0) {
		reply_error(c, "ERR Invalid TTL value, must be >= 0");
		return;
	}
	const resp_slice *pl = &c->argv[3];
	if (rdb_dump_verify(pl->ptr, pl->len, NULL) < 0) {
		reply_error(c, "ERR DUMP payload version or checksum are wrong");
		return;
	}
	int rc = dump_payload_build(pl->ptr, pl->len, &b);
	if (rc < 0) {
		dump_build_fini(&b);
		if (rc == -ENOMEM)
			reply_err_store(c, rc);
		else
			reply_error(c, "ERR Bad data format");
		return;
	}
	int64_t now = c->w->now_ms;
	if (ttl && !o.absttl)
		ttl = ttl > INT64_MAX - now ? INT64_MAX : ttl + now;
	if (ttl && ttl <= now) {   /* note 4 */
		rc = o.replace ? hlog_delete(c->w->sess, &k) : HLOG_OK;
		if (rc == HLOG_NOTFOUND || !reply_store_failed(c, rc))
			reply_ok(c);
	} else {
		rc = dump_build_store(c->w->sess, &k, &b, ttl ? ttl : HLOG_NO_EXPIRY, o.replace);
		if (rc == DUMP_E_BUSYKEY)
			reply_error(c, "BUSYKEY Target key name already exists.");
		else if (!reply_store_failed(c, rc))
			reply_ok(c);
	}
	dump_build_fini(&b);
}
