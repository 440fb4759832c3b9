/*
 * cmd_string.c - the string commands (Redis's t_string.c): GET SET SETNX SETEX PSETEX GETSET GETDEL
 * GETEX MGET MSET MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE SUBSTR SETRANGE.
 *
 * Design notes:
 *  1. Replies and errors are byte-identical to redis-server 7.0 for the same input, including the
 *     order in which Redis checks things (options, then numbers, then the key), because clients and
 *     test suites match on the error text.
 *  2. Reads write the reply straight from the record inside the hlog_read callback (no copy of the
 *     value besides the one into the reply buffer). GET, SET, INCR and MGET allocate nothing.
 *  3. Every read-modify-write goes through hlog_rmw: plan() decides from the old value alone and
 *     may run more than once (a concurrent writer won the race), so it only writes outputs into its
 *     ctx, never accumulates. Anything the reply needs from the old value (SET ... GET, GETDEL,
 *     GETEX) is copied into the worker's scratch inside plan() and written after hlog_rmw returns:
 *     the record may not be touched once the store let go of it, and a reply written inside plan()
 *     could be written twice.
 *  4. fill() with in_place writes only the bytes that change (APPEND: the suffix; SETRANGE: the
 *     patch and any zero gap; GETEX: nothing). The store keeps the rest of the record.
 *  5. TTL rules follow Redis: SET (without KEEPTTL), GETSET and MSET drop the TTL; INCR*, APPEND
 *     and SETRANGE keep it.
 *  6. keyspace_hits/misses count the lookups Redis counts (lookupKeyRead: GET, MGET, GETRANGE,
 *     STRLEN, GETSET, GETDEL, GETEX, SET ... GET); write-only lookups (INCR, APPEND...) do not.
 *  7. Not atomic across worker threads in this version: MSET and MSETNX are one store operation
 *     per key, so another client may see some keys of an MSET written and not others, and a key
 *     created by another thread between MSETNX's checks and its writes is overwritten. Each single
 *     key command is atomic (one hlog_rmw).
 *  9. Types (docs/ARCHITECTURE.md "Collections"): a key holding a collection answers WRONGTYPE
 *     where Redis's checkType does, after the same earlier checks: every plan starts with
 *     old_not_string, and reads go through str_read. GET and MGET check in their callback (a
 *     wrong-type GET still counts a keyspace hit, as Redis's lookup does; MGET answers nil for it).
 *     SET without GET, MSET and SETNX overwrite or see any type, as in Redis.
 *  8. HLOG_PENDING (with --storage-tier: a record the command needs is on the device) parks the
 *     client (reply_store_failed -> reply_pending): the handler returns at once and the worker runs the
 *     same request again when the reads are done (park.c note 1). So no handler may change the
 *     store before an operation that can answer HLOG_PENDING. Single-key commands are one store
 *     operation, so that holds by construction, and they pay nothing extra in memory-only mode.
 *     MGET, MSET and MSETNX first prefetch every key (their reads go out together) and park if
 *     one is pending; should a key still be pending after that (evicted in between), MSET and
 *     MSETNX record in c->resume how far their writes went, so the re-run does not write twice or
 *     change its answer (MSETNX would see its own writes). A partial MGET reply is rolled back by
 *     command_dispatch.
 */
#include "server/server_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------- shared helpers ---------------- */

static void reply_err_expire(client *c, const char *cmd)
{
	reply_errorf(c, "ERR invalid expire time in '%s' command", cmd);
}

/* Redis's checkStringLength: size + append must fit proto-max-bulk-len (and not wrap). */
static bool string_length_ok(long long size, long long append)
{
	long long total = (long long)((uint64_t)size + (uint64_t)append);
	return !(total > (long long)g_cfg.proto_max_bulk_len || total < size || total < append);
}

/* ---------------- strings among the types (note 9) ---------------- */

static inline bool old_not_string(const hlog_value *old)
{
	return old && SPW_UNLIKELY(old->rtype != HLOG_T_STRING);
}

struct str_read_ctx {
	hlog_read_fn fn;
	void *ctx;
	bool wrong;
};

static void str_read_fn(void *ctx, const hlog_value *v)
{
	struct str_read_ctx *x = ctx;
	if (SPW_UNLIKELY(v->rtype != HLOG_T_STRING))
		x->wrong = true;
	else
		x->fn(x->ctx, v);
}

int str_read(client *c, const hlog_key *k, hlog_read_fn fn, void *ctx)
{
	struct str_read_ctx x = { fn, ctx, false };
	int rc = hlog_read(c->w->sess, k, str_read_fn, &x);
	return rc == HLOG_OK && x.wrong ? SPW_E_WRONGTYPE : rc;
}

static void read_noop(void *ctx, const hlog_value *v)
{
	(void)ctx;
	(void)v;
}

/* Copy the old value into the worker's scratch for the reply (note 3). 0 or -ENOMEM. */
static int scratch_keep(worker *w, const hlog_value *old, const uint8_t **p /* out */)
{
	uint8_t *s = worker_scratch(w, old->len ? old->len : 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, old->ptr, old->len);
	*p = s;
	return 0;
}

/* ---------------- GET, MGET, STRLEN, GETRANGE ---------------- */

static void read_reply_bulk(void *ctx, const hlog_value *v)
{
	if (SPW_UNLIKELY(v->rtype != HLOG_T_STRING))
		reply_err_wrongtype(ctx);
	else
		resp_write_bulk(&((client *)ctx)->out, v->ptr, v->len);
}

static void read_reply_bulk_or_nil(void *ctx, const hlog_value *v)
{
	if (SPW_UNLIKELY(v->rtype != HLOG_T_STRING))
		reply_null(ctx);
	else
		resp_write_bulk(&((client *)ctx)->out, v->ptr, v->len);
}

void cmd_get(client *c)
{
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_read(c->w->sess, &k, read_reply_bulk, c);
	if (SPW_LIKELY(rc == HLOG_OK)) {
		c->w->stats.keyspace_hits++;
	} else if (rc == HLOG_NOTFOUND) {
		c->w->stats.keyspace_misses++;
		reply_null(c);
	} else {
		reply_store_failed(c, rc);
	}
}

/* MGET never fails as a whole in Redis: a key that cannot be read (store error) answers nil, so
 * the array keeps the length it announced. */
void cmd_mget(client *c)
{
	keys_ahead a;
	hlog_key k;
	if (c->argc > 2 && reply_store_failed(c, command_keys_prefetch(c, 1, -1, 1)))
		return;
	resp_write_array_len(&c->out, c->argc - 1);
	keys_ahead_init(&a, c, 1, 1, c->argc - 1);
	for (int i = 1; i < c->argc; i++) {
		keys_ahead_next(&a, &k);
		int rc = hlog_read(c->w->sess, &k, read_reply_bulk_or_nil, c);
		if (SPW_UNLIKELY(rc == HLOG_PENDING)) {
			reply_pending(c);   /* evicted since the prefetch: the partial reply is rolled back */
			return;
		}
		count_lookup(c, rc == HLOG_OK);
		if (rc != HLOG_OK)
			reply_null(c);
	}
}

static void read_len(void *ctx, const hlog_value *v)
{
	*(size_t *)ctx = v->len;
}

void cmd_strlen(client *c)
{
	hlog_key k;
	size_t len = 0;
	key_from_arg(&k, &c->argv[1]);
	int rc = str_read(c, &k, read_len, &len);
	count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
	if (reply_store_failed(c, rc))
		return;
	reply_int(c, (long long)len);
}

struct range_ctx {
	client *c;
	long long start, end;
};

/* GETRANGE's index arithmetic as Redis does it, unsigned wrap included. */
static void read_range(void *ctx, const hlog_value *v)
{
	struct range_ctx *r = ctx;
	long long start = r->start, end = r->end;
	size_t len = v->len;

	if (start < 0 && end < 0 && start > end) {
		reply_bulk(r->c, "", 0);
		return;
	}
	if (start < 0)
		start = (long long)(len + (size_t)start);
	if (end < 0)
		end = (long long)(len + (size_t)end);
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if ((unsigned long long)end >= len)
		end = (long long)len - 1;
	if (start > end || len == 0)
		reply_bulk(r->c, "", 0);
	else
		reply_bulk(r->c, v->ptr + start, (size_t)(end - start + 1));
}

void cmd_getrange(client *c)
{
	struct range_ctx r = { .c = c };
	hlog_key k;

	if (!arg_ll(&c->argv[2], &r.start) || !arg_ll(&c->argv[3], &r.end)) {
		reply_err_not_int(c);
		return;
	}
	key_from_arg(&k, &c->argv[1]);
	int rc = str_read(c, &k, read_range, &r);
	count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
	if (reply_store_failed(c, rc))
		return;
	if (rc == HLOG_NOTFOUND)
		reply_bulk(c, "", 0);
}

void cmd_substr(client *c)
{
	cmd_getrange(c);
}

/* ---------------- SET and friends ---------------- */

/* Option bits of Redis's parseExtendedStringArgumentsOrReply. */
enum {
	SETF_NX = 1 << 0,
	SETF_XX = 1 << 1,
	SETF_GET = 1 << 2,
	SETF_KEEPTTL = 1 << 3,
	SETF_PERSIST = 1 << 4,
	SETF_EX = 1 << 5,
	SETF_PX = 1 << 6,
	SETF_EXAT = 1 << 7,
	SETF_PXAT = 1 << 8,
};
#define SETF_ANY_EXPIRE (SETF_EX | SETF_PX | SETF_EXAT | SETF_PXAT)

/*
 * Parse SET's (is_set) or GETEX's options from argv[first] on, with Redis's exact conflict rules:
 * an option that conflicts with one already seen is a syntax error, repeating EX (or PX...) is
 * allowed and the last one wins. false after replying.
 */
static bool ext_options_parse(client *c, int first, bool is_set, int *flags /* out */,
                              const resp_slice **expire /* out */)
{
	int f = 0;
	for (int j = first; j < c->argc; j++) {
		const resp_slice *o = &c->argv[j];
		bool has_next = j + 1 < c->argc;

		if (is_set && OPT_IS(o, "nx") && !(f & SETF_XX)) {
			f |= SETF_NX;
		} else if (is_set && OPT_IS(o, "xx") && !(f & SETF_NX)) {
			f |= SETF_XX;
		} else if (is_set && OPT_IS(o, "get")) {
			f |= SETF_GET;
		} else if (is_set && OPT_IS(o, "keepttl") && !(f & (SETF_PERSIST | SETF_ANY_EXPIRE))) {
			f |= SETF_KEEPTTL;
		} else if (!is_set && OPT_IS(o, "persist") && !(f & (SETF_ANY_EXPIRE | SETF_KEEPTTL))) {
			f |= SETF_PERSIST;
		} else if (OPT_IS(o, "ex") && has_next &&
		           !(f & (SETF_KEEPTTL | SETF_PERSIST | SETF_EXAT | SETF_PX | SETF_PXAT))) {
			f |= SETF_EX;
			*expire = &c->argv[++j];
		} else if (OPT_IS(o, "px") && has_next &&
		           !(f & (SETF_KEEPTTL | SETF_PERSIST | SETF_EX | SETF_EXAT | SETF_PXAT))) {
			f |= SETF_PX;
			*expire = &c->argv[++j];
		} else if (OPT_IS(o, "exat") && has_next &&
		           !(f & (SETF_KEEPTTL | SETF_PERSIST | SETF_EX | SETF_PX | SETF_PXAT))) {
			f |= SETF_EXAT;
			*expire = &c->argv[++j];
		} else if (OPT_IS(o, "pxat") && has_next &&
		           !(f & (SETF_KEEPTTL | SETF_PERSIST | SETF_EX | SETF_EXAT | SETF_PX))) {
			f |= SETF_PXAT;
			*expire = &c->argv[++j];
		} else {
			reply_err_syntax(c);
			return false;
		}
	}
	*flags = f;
	return true;
}

/*
 * Redis's getExpireMillisecondsOrReply: the absolute expiry in ms for EX/PX (relative to now) or
 * EXAT/PXAT. Non-positive inputs and overflow are "invalid expire time". 0, or -1 after the error
 * has been decided (*err_not_int tells which) without replying, so GETEX can reply nil instead
 * when the key is absent.
 */
static int expire_arg_parse(const client *c, const resp_slice *arg, int flags, long long *ms /* out */,
                            bool *err_not_int /* out */)
{
	long long v;
	bool seconds = flags & (SETF_EX | SETF_EXAT);

	*err_not_int = false;
	if (!arg_ll(arg, &v)) {
		*err_not_int = true;
		return -1;
	}
	if (v <= 0 || (seconds && v > LLONG_MAX / 1000))
		return -1;
	if (seconds)
		v *= 1000;
	if ((flags & (SETF_EX | SETF_PX)) && __builtin_add_overflow(v, (long long)c->w->now_ms, &v))
		return -1;
	if (v <= 0)
		return -1;
	*ms = v;
	return 0;
}

static bool expire_arg_or_reply(client *c, const resp_slice *arg, int flags, const char *cmd,
                                long long *ms /* out */)
{
	bool not_int;
	if (expire_arg_parse(c, arg, flags, ms, &not_int) == 0)
		return true;
	if (not_int)
		reply_err_not_int(c);
	else
		reply_err_expire(c, cmd);
	return false;
}

struct set_ctx {
	worker *w;
	const resp_slice *val;
	int flags;
	int64_t expire_ms;         /* HLOG_NO_EXPIRY unless EX/PX/EXAT/PXAT */
	/* outputs of plan, rewritten on every call */
	bool found;                /* a live old value existed */
	bool written;              /* NX/XX let the write happen */
	const uint8_t *old;        /* SETF_GET: copy of the old value in scratch */
	size_t old_len;
};

static int set_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct set_ctx *s = ctx;

	s->found = old != NULL;
	if ((s->flags & SETF_GET) && old_not_string(old))
		return SPW_E_WRONGTYPE;
	if ((s->flags & SETF_GET) && old) {
		if (scratch_keep(s->w, old, &s->old) < 0)
			return -ENOMEM;
		s->old_len = old->len;
	}
	if (((s->flags & SETF_NX) && old) || ((s->flags & SETF_XX) && !old)) {
		s->written = false;
		out->action = HLOG_RMW_KEEP;
		return 0;
	}
	s->written = true;
	out->action = HLOG_RMW_WRITE;
	out->rtype = HLOG_T_STRING;   /* SET replaces a value of any type */
	out->new_len = s->val->len;
	if (s->flags & SETF_KEEPTTL)
		out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	else
		out->expire_ms = s->expire_ms;
	return 0;
}

static void set_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct set_ctx *s = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, s->val->ptr, s->val->len);
}

static const hlog_rmw_ops set_ops = { set_plan, set_fill };

/*
 * Redis's setGenericCommand after option parsing. ok/abort are the replies for a write done or
 * refused by NX/XX (NULL: +OK and nil); with SETF_GET the reply is the old value instead.
 */
static void set_generic(client *c, int flags, const resp_slice *key, const resp_slice *val,
                        const resp_slice *expire, const char *cmd, const long long *ok,
                        const long long *abort)
{
	struct set_ctx s = { .w = c->w, .val = val, .flags = flags, .expire_ms = HLOG_NO_EXPIRY };
	hlog_key k;
	long long ms;
	int rc;

	if (expire) {
		if (!expire_arg_or_reply(c, expire, flags, cmd, &ms))
			return;
		s.expire_ms = ms;
	}
	key_from_arg(&k, key);
	if (!(flags & (SETF_NX | SETF_XX | SETF_GET | SETF_KEEPTTL))) {
		/* A blind write: no need to look at the old value. */
		rc = hlog_upsert(c->w->sess, &k, val->ptr, val->len, s.expire_ms);
		s.written = true;
	} else {
		rc = hlog_rmw(c->w->sess, &k, &set_ops, &s);
	}
	if (reply_store_failed(c, rc))
		return;

	if (flags & SETF_GET) {
		count_lookup(c, s.found);
		if (s.found)
			reply_bulk(c, s.old, s.old_len);
		else
			reply_null(c);
	} else if (s.written) {
		if (ok)
			reply_int(c, *ok);
		else
			reply_ok(c);
	} else {
		if (abort)
			reply_int(c, *abort);
		else
			reply_null(c);
	}
}

void cmd_set(client *c)
{
	const resp_slice *expire = NULL;
	int flags = 0;

	if (SPW_LIKELY(c->argc == 3)) {
		hlog_key k;
		key_from_arg(&k, &c->argv[1]);
		int rc = hlog_upsert(c->w->sess, &k, c->argv[2].ptr, c->argv[2].len, HLOG_NO_EXPIRY);
		if (!reply_store_failed(c, rc))
			reply_ok(c);
		return;
	}
	if (!ext_options_parse(c, 3, true, &flags, &expire))
		return;
	set_generic(c, flags, &c->argv[1], &c->argv[2], expire, "set", NULL, NULL);
}

static const long long k_one = 1, k_zero = 0;

void cmd_setnx(client *c)
{
	set_generic(c, SETF_NX, &c->argv[1], &c->argv[2], NULL, "setnx", &k_one, &k_zero);
}

void cmd_setex(client *c)
{
	set_generic(c, SETF_EX, &c->argv[1], &c->argv[3], &c->argv[2], "setex", NULL, NULL);
}

void cmd_psetex(client *c)
{
	set_generic(c, SETF_PX, &c->argv[1], &c->argv[3], &c->argv[2], "psetex", NULL, NULL);
}

/* GETSET is SET key value GET: the TTL goes. */
void cmd_getset(client *c)
{
	set_generic(c, SETF_GET, &c->argv[1], &c->argv[2], NULL, "getset", NULL, NULL);
}

/* ---------------- GETDEL, GETEX ---------------- */

struct getx_ctx {
	worker *w;
	int flags;                 /* SETF_EX.. or SETF_PERSIST; 0 for GETDEL */
	long long when;            /* new absolute expiry (EX/PX/EXAT/PXAT) */
	int64_t now_ms;
	bool del;                  /* GETDEL */
	/* outputs of plan */
	bool found;
	const uint8_t *val;
	size_t len;
};

static int getx_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct getx_ctx *g = ctx;

	g->found = old != NULL;
	out->action = HLOG_RMW_KEEP;
	if (!old)
		return 0;
	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (scratch_keep(g->w, old, &g->val) < 0)
		return -ENOMEM;
	g->len = old->len;

	if (g->del) {
		out->action = HLOG_RMW_DELETE;
	} else if (g->flags & SETF_ANY_EXPIRE) {
		/* An absolute time already past deletes the key, as Redis's checkAlreadyExpired. */
		if ((g->flags & (SETF_EXAT | SETF_PXAT)) && g->when <= g->now_ms) {
			out->action = HLOG_RMW_DELETE;
		} else {
			out->action = HLOG_RMW_WRITE;
			out->new_len = old->len;
			out->expire_ms = g->when;
		}
	} else if ((g->flags & SETF_PERSIST) && old->expire_ms != HLOG_NO_EXPIRY) {
		out->action = HLOG_RMW_WRITE;
		out->new_len = old->len;
		out->expire_ms = HLOG_NO_EXPIRY;
	}
	return 0;
}

/* Only the expiry changes: in place there is nothing to write. */
static void keep_value_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)ctx;
	if (!in_place)
		memcpy(dst, old->ptr, old->len);
}

static const hlog_rmw_ops getx_ops = { getx_plan, keep_value_fill };

static void getx_run(client *c, struct getx_ctx *g)
{
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &getx_ops, g);
	if (reply_store_failed(c, rc))
		return;
	count_lookup(c, g->found);
	if (g->found)
		reply_bulk(c, g->val, g->len);
	else
		reply_null(c);
}

void cmd_getdel(client *c)
{
	struct getx_ctx g = { .w = c->w, .del = true };
	getx_run(c, &g);
}

void cmd_getex(client *c)
{
	struct getx_ctx g = { .w = c->w, .now_ms = c->w->now_ms };
	const resp_slice *expire = NULL;
	bool not_int;

	if (!ext_options_parse(c, 2, false, &g.flags, &expire))
		return;
	if (!(g.flags & (SETF_ANY_EXPIRE | SETF_PERSIST))) {
		cmd_get(c);
		return;
	}
	if (expire && expire_arg_parse(c, expire, g.flags, &g.when, &not_int) < 0) {
		/* Redis looks the key up and checks its type before it validates the time: nil for a
		 * missing key, WRONGTYPE for a collection. */
		hlog_key k;
		key_from_arg(&k, &c->argv[1]);
		int rc = str_read(c, &k, read_noop, NULL);
		if (rc == HLOG_OK || rc == HLOG_NOTFOUND || rc == SPW_E_WRONGTYPE)
			count_lookup(c, rc != HLOG_NOTFOUND);
		if (reply_store_failed(c, rc))
			return;
		if (rc == HLOG_NOTFOUND)
			reply_null(c);
		else if (not_int)
			reply_err_not_int(c);
		else
			reply_err_expire(c, "getex");
		return;
	}
	getx_run(c, &g);
}

/* ---------------- MSET, MSETNX ---------------- */

static bool mset_args_ok(client *c)
{
	if ((c->argc % 2) == 0) {
		reply_err_arity(c);
		return false;
	}
	return true;
}

/* Write the pairs from argv[c->resume.idx] on (1 at first). 0, a negative error, or HLOG_PENDING
 * with c->resume.idx at the pair that parked, so that the re-run goes on from there (note 8). */
static int mset_write_all(client *c)
{
	hlog_key k;
	for (int j = c->resume.idx ? c->resume.idx : 1; j < c->argc; j += 2) {
		key_from_arg(&k, &c->argv[j]);
		int rc = hlog_upsert(c->w->sess, &k, c->argv[j + 1].ptr, c->argv[j + 1].len, HLOG_NO_EXPIRY);
		if (SPW_UNLIKELY(rc == HLOG_PENDING))
			c->resume.idx = j;
		if (rc < 0 || rc == HLOG_PENDING)
			return rc;
	}
	return 0;
}

void cmd_mset(client *c)
{
	if (!mset_args_ok(c))
		return;
	if (c->argc > 3 && !c->resume.idx && reply_store_failed(c, command_keys_prefetch(c, 1, -2, 2)))
		return;
	if (!reply_store_failed(c, mset_write_all(c)))
		reply_ok(c);
}

/* Not atomic across threads (note 7): the existence checks and the writes are separate steps.
 * c->resume.stage 1: the checks passed before the command parked in its writes (note 8). */
void cmd_msetnx(client *c)
{
	hlog_key k;

	if (!mset_args_ok(c))
		return;
	if (c->resume.stage == 0) {
		if (c->argc > 3 && reply_store_failed(c, command_keys_prefetch(c, 1, -2, 2)))
			return;
		for (int j = 1; j < c->argc; j += 2) {
			key_from_arg(&k, &c->argv[j]);
			int rc = hlog_read(c->w->sess, &k, read_noop, NULL);
			if (reply_store_failed(c, rc))
				return;
			if (rc == HLOG_OK) {
				reply_int(c, 0);
				return;
			}
		}
	}
	int rc = mset_write_all(c);
	if (rc == HLOG_PENDING)
		c->resume.stage = 1;
	if (!reply_store_failed(c, rc))
		reply_int(c, 1);
}

/* ---------------- INCR family ---------------- */

struct incr_ctx {
	long long incr;
	long long result;          /* output of plan */
	size_t len;
	char buf[24];
};

static int incr_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct incr_ctx *x = ctx;
	long long v = 0;

	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (old && !spw_parse_ll((const char *)old->ptr, old->len, &v))
		return SPW_E_NOT_INT;
	if ((x->incr < 0 && v < 0 && x->incr < LLONG_MIN - v) ||
	    (x->incr > 0 && v > 0 && x->incr > LLONG_MAX - v))
		return SPW_E_OVERFLOW;
	x->result = v + x->incr;
	x->len = spw_fmt_ll(x->buf, x->result);
	out->action = HLOG_RMW_WRITE;
	out->new_len = x->len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void incr_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct incr_ctx *x = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, x->buf, x->len);
}

static const hlog_rmw_ops incr_ops = { incr_plan, incr_fill };

static void incr_generic(client *c, long long incr)
{
	struct incr_ctx x = { .incr = incr };
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &incr_ops, &x);
	if (!reply_store_failed(c, rc))
		reply_int(c, x.result);
}

void cmd_incr(client *c)
{
	incr_generic(c, 1);
}

void cmd_decr(client *c)
{
	incr_generic(c, -1);
}

void cmd_incrby(client *c)
{
	long long incr;
	if (!arg_ll(&c->argv[2], &incr)) {
		reply_err_not_int(c);
		return;
	}
	incr_generic(c, incr);
}

void cmd_decrby(client *c)
{
	long long incr;
	if (!arg_ll(&c->argv[2], &incr)) {
		reply_err_not_int(c);
		return;
	}
	if (incr == LLONG_MIN) {
		reply_error(c, "ERR decrement would overflow");
		return;
	}
	incr_generic(c, -incr);
}

struct incrf_ctx {
	long double incr;
	bool bad_incr;             /* the increment is not a float: replied after the type check */
	size_t len;                /* output of plan */
	char buf[SPW_LD_MAX_CHARS];
};

static int incrf_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct incrf_ctx *x = ctx;
	long double v = 0;

	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (x->bad_incr || (old && !spw_parse_ld(old->ptr, old->len, &v)))
		return SPW_E_NOT_FLOAT;
	v += x->incr;
	if (isnan(v) || isinf(v))
		return SPW_E_NAN;
	x->len = spw_fmt_ld(x->buf, sizeof(x->buf), v);
	if (x->len == 0)
		return SPW_E_NOT_FLOAT;
	out->action = HLOG_RMW_WRITE;
	out->new_len = x->len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void incrf_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct incrf_ctx *x = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, x->buf, x->len);
}

static const hlog_rmw_ops incrf_ops = { incrf_plan, incrf_fill };

/* Redis checks the key's type, then the stored value, then the increment: the last two fail with
 * the same text, so the increment is parsed once, outside plan, and a bad one is answered by plan
 * after its type check (a hash with a bad increment is WRONGTYPE). */
void cmd_incrbyfloat(client *c)
{
	struct incrf_ctx x;
	hlog_key k;

	x.bad_incr = !spw_parse_ld(c->argv[2].ptr, c->argv[2].len, &x.incr);
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &incrf_ops, &x);
	if (!reply_store_failed(c, rc))
		reply_bulk(c, x.buf, x.len);
}

/* ---------------- APPEND, SETRANGE ---------------- */

struct patch_ctx {
	const resp_slice *val;
	size_t offset;             /* SETRANGE offset; APPEND: set by plan to the old length */
	/* outputs of plan */
	bool too_big;
	size_t result;             /* the string's length after the command */
};

static int append_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct patch_ctx *p = ctx;
	size_t olen = old ? old->len : 0;

	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	p->too_big = false;
	p->offset = olen;
	if (old && !string_length_ok((long long)olen, (long long)p->val->len)) {
		p->too_big = true;
		out->action = HLOG_RMW_KEEP;
		return 0;
	}
	p->result = olen + p->val->len;
	out->action = HLOG_RMW_WRITE;
	out->new_len = p->result;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static int setrange_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct patch_ctx *p = ctx;
	size_t olen = old ? old->len : 0;

	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	p->too_big = false;
	out->action = HLOG_RMW_KEEP;
	p->result = olen;
	if (p->val->len == 0)
		return 0;   /* nothing to set: the length as it is (0 when absent) */
	if (!string_length_ok((long long)p->offset, (long long)p->val->len)) {
		p->too_big = true;
		return 0;
	}
	p->result = SPW_MAX(olen, p->offset + p->val->len);
	out->action = HLOG_RMW_WRITE;
	out->new_len = p->result;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

/*
 * Write val at offset over the old bytes. In place, dst already holds the old value, so only the
 * zero gap between the old end and offset (if any) and the patch itself are written; the record
 * may have grown within its rounded size, so the gap is not known to be zero.
 */
static void patch_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct patch_ctx *p = ctx;
	size_t olen = old ? old->len : 0;

	if (!in_place && olen)
		memcpy(dst, old->ptr, olen);
	if (p->offset > olen)
		memset(dst + olen, 0, p->offset - olen);
	memcpy(dst + p->offset, p->val->ptr, p->val->len);
}

static const hlog_rmw_ops append_ops = { append_plan, patch_fill };
static const hlog_rmw_ops setrange_ops = { setrange_plan, patch_fill };

static void patch_run(client *c, const hlog_rmw_ops *ops, struct patch_ctx *p)
{
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, ops, p);
	if (reply_store_failed(c, rc))
		return;
	if (p->too_big)
		reply_error(c, "ERR string exceeds maximum allowed size (proto-max-bulk-len)");
	else
		reply_int(c, (long long)p->result);
}

void cmd_append(client *c)
{
	struct patch_ctx p = { .val = &c->argv[2] };
	patch_run(c, &append_ops, &p);
}

void cmd_setrange(client *c)
{
	struct patch_ctx p = { .val = &c->argv[3] };
	long long off;

	if (!arg_ll(&c->argv[2], &off)) {
		reply_err_not_int(c);
		return;
	}
	if (off < 0) {
		reply_error(c, "ERR offset is out of range");
		return;
	}
	p.offset = (size_t)off;
	patch_run(c, &setrange_ops, &p);
}
