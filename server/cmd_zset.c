/*
 * cmd_zset.c - the sorted-set commands on one member at a time (Redis 7.0's t_zset.c): ZADD ZINCRBY
 * ZREM ZCARD ZSCORE ZMSCORE ZRANK ZREVRANK ZPOPMIN ZPOPMAX ZMPOP ZREMRANGEBYRANK ZREMRANGEBYSCORE
 * ZREMRANGEBYLEX ZRANDMEMBER ZSCAN, and the helpers the other zset files share (zset_int.h).
 * Ranges are cmd_zset_range.c's, the multi-key algebra cmd_zset_ops.c's.
 *
 * Design notes:
 *  1. A sorted set is one collection record (server/coll.c): the header, then a listpack of member,
 *     score pairs in (score, member) order as Redis's zzl* functions keep it (coll/zset.h), whatever
 *     its size. Small layout only: every change copies and rewrites the whole listpack, so it costs
 *     O(size of the set) bytes moved, and a set is bounded by the log's largest record (a write
 *     past it answers the store's too-big error and changes nothing).
 *  2. Encoding, as OBJECT ENCODING reports it: the header's enc moves from listpack to skiplist by
 *     Redis 7.0's rules, one way: zsetAdd converts before adding a member longer than
 *     zset-max-listpack-value or one past zset-max-listpack-entries; removals never convert back.
 *     The STORE commands give their result the encoding zsetConvertToListpackIfNeeded would. The
 *     bytes stay a listpack: only what depends on the encoding in Redis follows it (ZSCAN, note 5).
 *  3. Order: a skiplist walks in the listpack's order, so every range reply is Redis's whatever
 *     the encoding; only dict order (ZSCAN, ZRANDMEMBER of a skiplist set) is not reproduced.
 *  4. Reads reply from the record inside coll_read's callback (zs_lookup). Writes rebuild the
 *     listpack from the current payload in the thread's edit buffer each time the edit runs
 *     (coll.c note 2), keep their reply's inputs in their context (the popped pairs copied into
 *     the worker's scratch) and reply after coll_rmw returns. Checks come in Redis's order:
 *     arguments, then the lookup (WRONGTYPE), then the stored values (ZADD INCR's NaN leaves the
 *     set as it was). keyspace hits and misses count as lookupKeyRead counts them.
 *  5. ZSCAN: a listpack set is answered whole with cursor 0, as Redis does, scores as stored. A
 *     skiplist one is walked by position (cursor = index of the next pair, COUNT pairs a call),
 *     scores formatted as Redis's ld2string; a walk while the set changes may miss or repeat
 *     members, weaker than Redis's dict cursor until the large layout brings buckets.
 *  6. Pending reads: each single-key command is one coll_read or coll_rmw, so HLOG_PENDING parks
 *     the client before anything changed (coll.c note 4). ZMPOP prefetches its keys, then tries
 *     one key after another; the keys before the popped one are unchanged, so a re-run after a
 *     park starts over safely. ZMPOP's keys are not one atomic step across worker threads (as
 *     MSET: cmd_string.c note 7); each key's pop is.
 *  7. The stored listpack is checked shallowly (lp_validate without deep) before it is walked;
 *     records come from this server and the log checks them.
 */
#include "server/zset_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll/numconv.h"

/* ---------------- shared helpers (zset_int.h) ---------------- */

struct zs_read {
	client *c;
	zs_body_fn *fn;
	void *arg;
	bool bad;
};

static void zs_read_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct zs_read *x = ctx;
	(void)hv;
	if (!lp_validate(v->p, v->used, false, NULL, NULL)) {
		x->bad = true;
		return;
	}
	x->fn(x->c, v, x->arg);
}

int zs_lookup(client *c, const resp_slice *key, bool count, zs_body_fn *fn, void *arg)
{
	return zs_lookup_hint(c, key, count, NULL, fn, arg);
}

int zs_lookup_hint(client *c, const resp_slice *key, bool count, coll_hint *h, zs_body_fn *fn, void *arg)
{
	struct zs_read x = { c, fn, arg, false };
	int rc = coll_read_hint(c, key, COLL_ZSET, h, zs_read_cb, &x);
	if (x.bad)
		rc = SPW_E_CORRUPT;
	if (count && rc != HLOG_PENDING)
		count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
	if (reply_store_failed(c, rc))
		return -1;
	return rc == HLOG_OK;
}

int zs_store(client *c, const resp_slice *dst, const uint8_t *lp, int enc)
{
	hlog_key k;
	key_from_arg(&k, dst);
	if (lp_count(lp) == 0) {
		int rc = hlog_delete(c->w->sess, &k);
		return rc == HLOG_NOTFOUND ? HLOG_OK : rc;
	}
	size_t used = lp_bytes(lp), len = coll_value_len(used, 0);
	if (used > UINT32_MAX)
		return SPW_E_TOO_BIG;
	uint8_t *v = worker_scratch(c->w, len);
	if (!v)
		return -ENOMEM;
	coll_hdr_write(v, COLL_ZSET, enc, used);
	memcpy(v + COLL_HDR, lp, used);
	memset(v + COLL_HDR + used, 0, len - COLL_HDR - used);
	return hlog_upsert_typed(c->w->sess, &k, v, len, HLOG_NO_EXPIRY, HLOG_T_HEAD);
}

void zs_reply_member(client *c, const uint8_t *p)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *m = zs_member(p, buf, &len);
	reply_bulk(c, m, len);
}

void zs_reply_pair(client *c, const uint8_t *lp, const uint8_t *p, bool withscores, bool nested)
{
	if (withscores && nested)
		resp_write_array_len(&c->out, 2);
	zs_reply_member(c, p);
	if (withscores)
		resp_write_double(&c->out, zs_score(lp, p));
}

bool zs_arg_long(client *c, const resp_slice *a, long long *out, const char *msg)
{
	if (arg_ll(a, out))
		return true;
	if (msg)
		reply_errorf(c, "ERR %s", msg);
	else
		reply_err_not_int(c);
	return false;
}

/* Finish an edit from the rebuilt listpack: delete the key when it is empty (Redis's dbDelete),
 * else write it with enc. */
static void zs_edit_done(coll_edit *e, const lp_buf *b, int enc)
{
	if (lp_count(b->p) == 0) {
		e->action = COLL_DELETE;
		return;
	}
	e->action = COLL_WRITE;
	e->enc = enc;
	e->out = b->p;
	e->out_len = b->len;
}

/* ---------------- ZADD, ZINCRBY ---------------- */

enum { ZA_NX = 1, ZA_XX = 2, ZA_GT = 4, ZA_LT = 8, ZA_INCR = 16, ZA_CH = 32 };

struct zadd_ctx {
	int flags;
	int first;                /* argv index of the first score */
	/* the reply's inputs, set by the edit */
	long long added, updated, processed;
	double score;
	bool nan;
};

/* zsetAdd for one pair on the listpack in b; *enc moves to skiplist before an add that needs it. */
static int zadd_one(struct zadd_ctx *x, lp_buf *b, int *enc, double score, const resp_slice *m)
{
	double cur;
	const uint8_t *p = zs_find(b->p, m->ptr, m->len, &cur);
	int f = x->flags, rc;

	if (p) {
		if (f & ZA_NX)
			return 0;
		if (f & ZA_INCR) {
			score += cur;
			if (isnan(score)) {
				x->nan = true;
				return 0;
			}
		}
		if (((f & ZA_LT) && score >= cur) || ((f & ZA_GT) && score <= cur))
			return 0;
		x->processed++;
		x->score = score;
		if (score == cur)
			return 0;
		if ((rc = zs_delete(b, lp_off(b, p))) < 0 ||
		    (rc = zs_insert(b, m->ptr, m->len, score, *enc == CENC_SKIPLIST)) < 0)
			return rc;
		x->updated++;
		return 0;
	}
	if (f & ZA_XX)
		return 0;
	if (*enc == CENC_LISTPACK &&
	    (zs_len(b->p) + 1 > ZSET_MAX_LISTPACK_ENTRIES || m->len > ZSET_MAX_LISTPACK_VALUE))
		*enc = CENC_SKIPLIST;
	if ((rc = zs_insert(b, m->ptr, m->len, score, *enc == CENC_SKIPLIST)) < 0)
		return rc;
	x->added++;
	x->processed++;
	x->score = score;
	return 0;
}

static int zadd_edit(coll_edit *e, const coll_view *cur)
{
	struct zadd_ctx *x = e->arg;
	client *c = e->c;
	lp_buf *b;
	int enc = cur ? cur->enc : CENC_LISTPACK, rc;

	x->added = x->updated = x->processed = 0;
	x->nan = false;
	e->action = COLL_KEEP;
	if (!cur && (x->flags & ZA_XX))
		return 0;   /* no key + XX: nothing to do, nothing created */
	if ((rc = coll_buf_load(cur, &b)) < 0)
		return rc;
	for (int j = x->first; j < c->argc; j += 2) {
		double score;
		coll_parse_double(c->argv[j].ptr, c->argv[j].len, &score);   /* checked before */
		if ((rc = zadd_one(x, b, &enc, score, &c->argv[j + 1])) < 0)
			return rc;
		if (x->nan)
			return 0;
	}
	if (x->added || x->updated || !cur)
		zs_edit_done(e, b, enc);
	return 0;
}

static void zadd_generic(client *c, int flags)
{
	struct zadd_ctx x = { .flags = flags, .first = 2 };
	int f;

	for (; x.first < c->argc; x.first++) {
		const resp_slice *o = &c->argv[x.first];
		if (OPT_IS(o, "nx"))
			x.flags |= ZA_NX;
		else if (OPT_IS(o, "xx"))
			x.flags |= ZA_XX;
		else if (OPT_IS(o, "ch"))
			x.flags |= ZA_CH;
		else if (OPT_IS(o, "incr"))
			x.flags |= ZA_INCR;
		else if (OPT_IS(o, "gt"))
			x.flags |= ZA_GT;
		else if (OPT_IS(o, "lt"))
			x.flags |= ZA_LT;
		else
			break;
	}
	int elements = c->argc - x.first;
	f = x.flags;
	if (elements % 2 || !elements) {
		reply_err_syntax(c);
		return;
	}
	if ((f & ZA_NX) && (f & ZA_XX)) {
		reply_error(c, "ERR XX and NX options at the same time are not compatible");
		return;
	}
	if (((f & ZA_GT) && (f & ZA_NX)) || ((f & ZA_LT) && (f & ZA_NX)) || ((f & ZA_GT) && (f & ZA_LT))) {
		reply_error(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
		return;
	}
	if ((f & ZA_INCR) && elements > 2) {
		reply_error(c, "ERR INCR option supports a single increment-element pair");
		return;
	}
	for (int j = x.first; j < c->argc; j += 2) {
		double d;
		if (!coll_parse_double(c->argv[j].ptr, c->argv[j].len, &d)) {
			reply_error(c, "ERR value is not a valid float");
			return;
		}
	}
	coll_edit e = { .type = COLL_ZSET, .create = true, .fn = zadd_edit, .arg = &x,
	                .zmode = COLL_ZE_MEMBERS, .hint_first = x.first + 1, .hint_step = 2 };
	if (reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		return;
	if (x.nan)
		reply_error(c, "ERR resulting score is not a number (NaN)");
	else if (f & ZA_INCR)
		x.processed ? resp_write_double(&c->out, x.score) : reply_null(c);
	else
		reply_int(c, (f & ZA_CH) ? x.added + x.updated : x.added);
}

void cmd_zadd(client *c) { zadd_generic(c, 0); }
void cmd_zincrby(client *c) { zadd_generic(c, ZA_INCR); }

/* ---------------- ZREM ---------------- */

struct zrem_ctx {
	long long deleted;
};

static int zrem_edit(coll_edit *e, const coll_view *cur)
{
	struct zrem_ctx *x = e->arg;
	client *c = e->c;
	lp_buf *b;
	int rc;

	x->deleted = 0;
	e->action = COLL_KEEP;
	if ((rc = coll_buf_load(cur, &b)) < 0)
		return rc;
	for (int j = 2; j < c->argc && lp_count(b->p); j++) {
		const uint8_t *p = zs_find(b->p, c->argv[j].ptr, c->argv[j].len, NULL);
		if (p) {
			if ((rc = zs_delete(b, lp_off(b, p))) < 0)
				return rc;
			x->deleted++;
		}
	}
	if (x->deleted)
		zs_edit_done(e, b, cur->enc);
	return 0;
}

void cmd_zrem(client *c)
{
	struct zrem_ctx x = { 0 };
	coll_edit e = { .type = COLL_ZSET, .fn = zrem_edit, .arg = &x,
	                .zmode = COLL_ZE_MEMBERS, .hint_first = 2, .hint_step = 1 };
	if (reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		return;
	reply_int(c, x.deleted);
}

/* ---------------- ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK ---------------- */

static void zcard_body(client *c, const coll_view *v, void *arg)
{
	(void)arg;
	reply_int(c, v->large ? (long long)v->large->count : (long long)zs_len(v->p));
}

void cmd_zcard(client *c)
{
	coll_hint h = { .mode = COLL_HINT_COUNT };
	if (zs_lookup_hint(c, &c->argv[1], true, &h, zcard_body, NULL) == 0)
		reply_int(c, 0);
}

/* ZSCORE and ZMSCORE: the scores of argv[first..], nil for a missing member. */
struct zscore_ctx {
	int first;
	bool array;
};

static void zscore_body(client *c, const coll_view *v, void *arg)
{
	struct zscore_ctx *x = arg;
	if (x->array)
		resp_write_array_len(&c->out, c->argc - x->first);
	for (int j = x->first; j < c->argc; j++) {
		double s;
		if (zs_find(v->p, c->argv[j].ptr, c->argv[j].len, &s))
			resp_write_double(&c->out, s);
		else
			reply_null(c);
	}
}

void cmd_zscore(client *c)
{
	struct zscore_ctx x = { 2, false };
	coll_hint h = { .mode = COLL_HINT_MEMBERS, .first = 2, .step = 1 };
	if (zs_lookup_hint(c, &c->argv[1], true, &h, zscore_body, &x) == 0)
		reply_null(c);
}

void cmd_zmscore(client *c)
{
	struct zscore_ctx x = { 2, true };
	coll_hint h = { .mode = COLL_HINT_MEMBERS, .first = 2, .step = 1 };
	if (zs_lookup_hint(c, &c->argv[1], true, &h, zscore_body, &x) != 0)
		return;
	resp_write_array_len(&c->out, c->argc - 2);
	for (int j = 2; j < c->argc; j++)
		reply_null(c);
}

/* ZRANK, ZREVRANK: a large set's rank comes from the read (hint->zrank). */
struct zrank_ctx {
	bool rev;
	coll_hint h;
};

static void zrank_body(client *c, const coll_view *v, void *arg)
{
	struct zrank_ctx *x = arg;
	bool rev = x->rev;
	const uint8_t *lp = v->p, *p;
	long long rank = 0;
	if (v->large) {
		if (x->h.zrank < 0)
			reply_null(c);
		else
			reply_int(c, rev ? (long long)v->large->count - 1 - x->h.zrank : x->h.zrank);
		return;
	}
	for (p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p)), rank++) {
		if (lp_eq(p, c->argv[2].ptr, c->argv[2].len)) {
			reply_int(c, rev ? (long long)zs_len(lp) - 1 - rank : rank);
			return;
		}
	}
	reply_null(c);
}

static void zrank_generic(client *c, bool rev)
{
	struct zrank_ctx x = { rev, { .mode = COLL_HINT_ZRANK, .first = 2, .step = 1 } };
	if (zs_lookup_hint(c, &c->argv[1], true, &x.h, zrank_body, &x) == 0)
		reply_null(c);
}

void cmd_zrank(client *c) { zrank_generic(c, false); }
void cmd_zrevrank(client *c) { zrank_generic(c, true); }

/* ---------------- ZPOPMIN, ZPOPMAX, ZMPOP ---------------- */

struct zpop_ctx {
	long long count;
	bool max;
	/* set by the edit: the popped pairs as a listpack in the worker's scratch */
	const uint8_t *popped;
};

static int zpop_edit(coll_edit *e, const coll_view *cur)
{
	struct zpop_ctx *x = e->arg;
	unsigned long len = zs_len(cur->p);
	unsigned long n = (unsigned long long)x->count < len ? (unsigned long)x->count : len;
	lp_buf *b;
	int rc;

	e->action = COLL_KEEP;
	x->popped = NULL;
	if (x->count == 0)
		return 0;
	const uint8_t *from = lp_seek(cur->p, x->max ? -(long)(2 * n) : 0);
	size_t bytes = zs_run_len(cur->p, from, n);
	uint8_t *dst = worker_scratch(e->c->w, bytes + LP_EMPTY_BYTES);
	if (!dst)
		return -ENOMEM;
	zs_run_write(dst, from, bytes, n);
	x->popped = dst;
	if ((rc = coll_buf_load(cur, &b)) < 0)
		return rc;
	if ((rc = lp_delete_range_index(b, x->max ? -(long)(2 * n) : 0, 2 * n)) < 0)
		return rc;
	zs_edit_done(e, b, cur->enc);
	return 0;
}

/* genericZpopCommand's reply from the popped pairs: flat, or nested pairs; ZMPOP's has the key. */
static void zpop_reply(client *c, const struct zpop_ctx *x, const resp_slice *key, bool nested)
{
	const uint8_t *lp = x->popped, *p;
	unsigned long n = lp ? zs_len(lp) : 0;
	if (key) {
		resp_write_array_len(&c->out, 2);
		reply_bulk(c, key->ptr, key->len);
		resp_write_array_len(&c->out, (long long)n);
	} else {
		resp_write_array_len(&c->out, nested ? (long long)n : (long long)n * 2);
	}
	if (!n)
		return;
	for (p = x->max ? lp_prev(lp, lp_last(lp)) : lp_first(lp); p; p = zs_step(lp, p, x->max))
		zs_reply_pair(c, lp, p, true, nested);
}

static void zpop_minmax(client *c, bool max)
{
	struct zpop_ctx x = { .count = -1, .max = max };
	if (c->argc > 3) {
		reply_err_syntax(c);
		return;
	}
	if (c->argc == 3) {
		const char *msg = "value is out of range, must be positive";   /* also for a non-number */
		if (!zs_arg_long(c, &c->argv[2], &x.count, msg))
			return;
		if (x.count < 0) {
			reply_errorf(c, "ERR %s", msg);
			return;
		}
	}
	bool nested = c->out.proto > 2 && x.count != -1;
	if (x.count == -1)
		x.count = 1;
	coll_edit e = { .type = COLL_ZSET, .fn = zpop_edit, .arg = &x, .zmode = COLL_ZE_POP,
	                .zpop_n = x.count, .zpop_max = max };
	if (reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		return;
	zpop_reply(c, &x, NULL, nested);
}

void cmd_zpopmin(client *c) { zpop_minmax(c, false); }
void cmd_zpopmax(client *c) { zpop_minmax(c, true); }

void cmd_zmpop(client *c)
{
	struct zpop_ctx x = { .count = -1 };
	long long numkeys;
	const char *nk = "numkeys should be greater than 0";

	if (!zs_arg_long(c, &c->argv[1], &numkeys, nk))
		return;
	if (numkeys < 1) {
		reply_errorf(c, "ERR %s", nk);
		return;
	}
	long long where = 2 + numkeys;
	if (where >= c->argc || !(OPT_IS(&c->argv[where], "min") || OPT_IS(&c->argv[where], "max"))) {
		reply_err_syntax(c);
		return;
	}
	x.max = OPT_IS(&c->argv[where], "max");
	for (long long j = where + 1; j < c->argc; j++) {
		if (x.count == -1 && OPT_IS(&c->argv[j], "count") && j + 1 < c->argc) {
			j++;
			if (!zs_arg_long(c, &c->argv[j], &x.count, "count should be greater than 0"))
				return;
			if (x.count < 1) {
				reply_error(c, "ERR count should be greater than 0");
				return;
			}
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	if (x.count == -1)
		x.count = 1;
	if (numkeys > 1 && reply_store_failed(c, command_keys_prefetch(c, 2, (int)where - 1, 1)))
		return;
	for (int j = 2; j < where; j++) {
		coll_edit e = { .type = COLL_ZSET, .fn = zpop_edit, .arg = &x, .zmode = COLL_ZE_POP,
		                .zpop_n = x.count, .zpop_max = x.max };
		if (reply_store_failed(c, coll_rmw(c, &c->argv[j], &e)))
			return;   /* a park before anything changed, or WRONGTYPE (note 6) */
		if (e.found) {
			zpop_reply(c, &x, &c->argv[j], true);
			return;
		}
	}
	resp_write_null_array(&c->out);
}

/* ---------------- ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX ---------------- */

struct zremr_ctx {
	zs_rangeq q;
	long long deleted;
};

static int zremr_edit(coll_edit *e, const coll_view *cur)
{
	struct zremr_ctx *x = e->arg;
	zs_run run;
	lp_buf *b;
	int rc;

	x->deleted = 0;
	e->action = COLL_KEEP;
	zs_run_find(cur->p, &x->q, &run);
	if (!run.n)
		return 0;
	if ((rc = coll_buf_load(cur, &b)) < 0)
		return rc;
	if ((rc = lp_delete_range(b, (size_t)(run.first - cur->p), 2 * run.n)) < 0)
		return rc;
	x->deleted = (long long)run.n;
	zs_edit_done(e, b, cur->enc);
	return 0;
}

static void zremrange_generic(client *c, int type)
{
	struct zremr_ctx x = { .q = { .type = type, .limit = -1 } };
	const resp_slice *a = &c->argv[2], *b = &c->argv[3];

	if (type == ZR_RANK) {
		if (!zs_arg_long(c, a, &x.q.start, NULL) || !zs_arg_long(c, b, &x.q.end, NULL))
			return;
	} else if (type == ZR_SCORE) {
		if (!zs_range_parse(a->ptr, a->len, b->ptr, b->len, &x.q.score)) {
			reply_error(c, "ERR min or max is not a float");
			return;
		}
	} else if (!zs_lex_parse(a->ptr, a->len, b->ptr, b->len, &x.q.lex)) {
		reply_error(c, "ERR min or max not valid string range item");
		return;
	}
	coll_edit e = { .type = COLL_ZSET, .fn = zremr_edit, .arg = &x };
	if (reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		return;
	reply_int(c, x.deleted);
}

void cmd_zremrangebyrank(client *c) { zremrange_generic(c, ZR_RANK); }
void cmd_zremrangebyscore(client *c) { zremrange_generic(c, ZR_SCORE); }
void cmd_zremrangebylex(client *c) { zremrange_generic(c, ZR_LEX); }
