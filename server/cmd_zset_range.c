/*
 * cmd_zset_range.c - the sorted-set range commands (Redis 7.0's zrangeGenericCommand and kin):
 * ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES) ZRANGESTORE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE
 * ZRANGEBYLEX ZREVRANGEBYLEX ZCOUNT ZLEXCOUNT, and ZRANDMEMBER and ZSCAN (reads of the whole set).
 *
 * Design notes:
 *  1. One range is a run of consecutive pairs in the listpack (zs_run_find): a rank range, or the
 *     pairs from the first (REV: last) one in a score or lex range, after LIMIT's offset, while
 *     they stay in range and LIMIT's count lasts, exactly as genericZrangebyscoreCommand walks
 *     (a negative offset walks off the end: empty; a negative count is no limit).
 *  2. Replies: RESP2 flat (member, score as a bulk), RESP3 nested [member, double] pairs with
 *     WITHSCORES, as zrangeResultEmit*ToClient. Options are parsed in Redis's order, and the
 *     conflicts (LIMIT with a rank range unless its count is -1, WITHSCORES with BYLEX) answer
 *     Redis's texts before the range is parsed; the key is looked up last.
 *  3. ZRANGESTORE: the run is copied as bytes into a listpack of its own (the scores as stored,
 *     which are what zsetAdd would store again), with the encoding Redis's result would have; the
 *     destination is replaced (its TTL and type dropped), or deleted when the run is empty. When
 *     the source is the destination the command is one coll_rmw; otherwise a read of the source,
 *     then a write of the destination, not atomic across worker threads (cmd_string.c note 7).
 *  4. ZRANDMEMBER: a positive count below the size picks distinct members by selection sampling
 *     (in listpack order); a negative count picks with replacement through an index of member
 *     offsets in the worker's scratch; a count at or past the size answers the whole set, highest
 *     rank first, as Redis 7.0 does for both encodings.
 *  5. Pending reads: each command is one coll_read or coll_rmw (ZRANGESTORE: the read first,
 *     which may park, then the write), so a park happens before anything changed.
 */
#include "server/zset_int.h"
#include "coll/list.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll/numconv.h"

/* ---------------- runs (note 1) ---------------- */

const uint8_t *zs_step(const uint8_t *lp, const uint8_t *p, bool rev)
{
	if (!rev)
		return lp_next(lp, lp_next(lp, p));
	const uint8_t *q = lp_prev(lp, p);
	return q ? lp_prev(lp, q) : NULL;
}

static bool run_in_range(const uint8_t *lp, const uint8_t *p, const zs_rangeq *q)
{
	if (q->type == ZR_SCORE) {
		double s = zs_score(lp, p);
		return q->rev ? zs_gte_min(s, &q->score) : zs_lte_max(s, &q->score);
	}
	return q->rev ? zs_lex_gte_min(p, &q->lex) : zs_lex_lte_max(p, &q->lex);
}

void zs_run_find(const uint8_t *lp, const zs_rangeq *q, zs_run *out)
{
	long long llen = (long long)zs_len(lp), start = q->start, end = q->end;
	const uint8_t *p;

	out->first = NULL;
	out->n = 0;
	if (q->type == ZR_RANK) {
		long from, to;   /* Redis's rank arithmetic is LRANGE's (list_range; long is 64-bit here) */
		if (!list_range((long)llen, (long)start, (long)end, &from, &to))
			return;
		start = from;
		end = to;
		out->first = lp_seek(lp, q->rev ? -2 - 2 * start : 2 * start);
		out->n = (unsigned long)(end - start + 1);
		return;
	}
	if (q->type == ZR_SCORE)
		p = q->rev ? zs_last_in_range(lp, &q->score) : zs_first_in_range(lp, &q->score);
	else
		p = q->rev ? zs_last_in_lex(lp, &q->lex) : zs_first_in_lex(lp, &q->lex);
	for (long long off = q->offset; p && off; off--)
		p = off < 0 ? NULL : zs_step(lp, p, q->rev);
	out->first = p;
	for (long long lim = q->limit; p && lim; lim--) {
		if (!run_in_range(lp, p, q))
			break;
		out->n++;
		p = zs_step(lp, p, q->rev);
	}
	if (!out->n)
		out->first = NULL;
}

/* The run's lowest pair (where its bytes start) and its longest member. */
static const uint8_t *run_low(const uint8_t *lp, const zs_run *r, bool rev, size_t *maxlen)
{
	const uint8_t *p = r->first, *low = p;
	*maxlen = 0;
	for (unsigned long i = 0; i < r->n; i++, p = zs_step(lp, p, rev)) {
		char buf[LP_INTBUF_SIZE];
		size_t len;
		zs_member(p, buf, &len);
		if (len > *maxlen)
			*maxlen = len;
		low = p;
	}
	return rev ? low : r->first;
}

/* Copy the run into the thread's edit buffer as a listpack; *enc gets its encoding. */
/* Note 3's exception: a skiplist source keeps a score of -0 as the text "-0", but Redis's zsetAdd
 * into a listpack result stores 0 (zzlInsertAt writes the double as a number), so a listpack
 * result gets its "-0" scores rewritten as 0. */
static int run_unsign_zeros(lp_buf *b)
{
	char buf[LP_INTBUF_SIZE];
	const uint8_t *p;
	size_t mlen;
	bool any = false;
	for (p = lp_first(b->p); p && !any; p = lp_next(b->p, lp_next(b->p, p))) {
		double sc = zs_score(b->p, p);
		any = sc == 0 && signbit(sc);
	}
	if (!any)
		return 0;
	lp_buf t;
	int rc = lp_buf_init(&t);
	for (p = lp_first(b->p); p && rc >= 0; p = lp_next(b->p, lp_next(b->p, p))) {
		const char *m = zs_member(p, buf, &mlen);
		rc = zs_append(&t, m, mlen, zs_score(b->p, p), false);
	}
	if (rc >= 0 && (rc = lp_buf_reserve(b, t.len)) >= 0) {
		memcpy(b->p, t.p, t.len);
		b->len = t.len;
	}
	lp_buf_free(&t);
	return rc < 0 ? rc : 0;
}

static int run_copy(const uint8_t *lp, const zs_run *r, bool rev, lp_buf **out, int *enc)
{
	size_t maxlen;
	int rc;
	if ((rc = coll_buf_load(NULL, out)) < 0)
		return rc;
	if (!r->n)
		return 0;
	const uint8_t *low = run_low(lp, r, rev, &maxlen);
	size_t bytes = zs_run_len(lp, low, r->n);
	if ((rc = lp_buf_reserve(*out, bytes + LP_EMPTY_BYTES)) < 0)
		return rc;
	(*out)->len = zs_run_write((*out)->p, low, bytes, r->n);
	*enc = zs_result_enc(r->n, maxlen);
	return *enc == CENC_LISTPACK ? run_unsign_zeros(*out) : 0;
}

/* ---------------- ZRANGE and its kin ---------------- */

static void zrange_body(client *c, const coll_view *v, void *arg)
{
	const zs_rangeq *q = arg;
	zs_run r;
	const uint8_t *p;
	bool resp2 = c->out.proto < 3;
	if (q->large_exact) {   /* a large set's read collected exactly the run, in forward order */
		r.n = zs_len(v->p);
		r.first = !r.n ? NULL : q->rev ? lp_seek(v->p, -2) : lp_first(v->p);
	} else {
		zs_run_find(v->p, q, &r);
	}
	resp_write_array_len(&c->out, q->withscores && resp2 ? 2 * (long long)r.n : (long long)r.n);
	p = r.first;
	for (unsigned long i = 0; i < r.n; i++, p = zs_step(v->p, p, q->rev))
		zs_reply_pair(c, v->p, p, q->withscores, !resp2);
}

struct zstore_ctx {
	const zs_rangeq *q;
	lp_buf *b;
	unsigned long n;          /* members in the result */
	int enc, rc;
};

static void zstore_body(client *c, const coll_view *v, void *arg)
{
	struct zstore_ctx *x = arg;
	zs_run r;
	(void)c;
	zs_run_find(v->p, x->q, &r);
	x->n = r.n;
	x->rc = run_copy(v->p, &r, x->q->rev, &x->b, &x->enc);
}

static int zstore_edit(coll_edit *e, const coll_view *cur)
{
	struct zstore_ctx *x = e->arg;
	zs_run r;
	int rc;
	zs_run_find(cur->p, x->q, &r);
	x->n = r.n;
	if ((rc = run_copy(cur->p, &r, x->q->rev, &x->b, &x->enc)) < 0)
		return rc;
	if (lp_count(x->b->p) == 0) {
		e->action = COLL_DELETE;
		return 0;
	}
	e->action = COLL_WRITE;
	e->enc = x->enc;
	e->out = x->b->p;
	e->out_len = x->b->len;
	return 0;
}

/* ZRANGESTORE's lookup and write (note 3). */
static void zrangestore_run(client *c, const resp_slice *dst, const resp_slice *src, const zs_rangeq *q)
{
	struct zstore_ctx x = { .q = q, .enc = CENC_LISTPACK };
	int rc;

	if (dst->len == src->len && memcmp(dst->ptr, src->ptr, src->len) == 0) {
		coll_edit e = { .type = COLL_ZSET, .fn = zstore_edit, .arg = &x, .drop_ttl = true };
		rc = coll_rmw(c, dst, &e);
		if (rc != HLOG_PENDING)
			count_lookup(c, rc == HLOG_OK ? e.found : rc == SPW_E_WRONGTYPE);
		if (reply_store_failed(c, rc))
			return;
		reply_int(c, e.found ? (long long)x.n : 0);
		return;
	}
	rc = zs_lookup(c, src, true, zstore_body, &x);
	if (rc < 0)
		return;
	if (rc == 0 && (x.rc = coll_buf_load(NULL, &x.b)) == 0)
		x.enc = CENC_LISTPACK;
	if (x.rc < 0 || reply_store_failed(c, zs_store(c, dst, x.b->p, x.enc))) {
		if (x.rc < 0)
			reply_err_store(c, x.rc);
		return;
	}
	reply_int(c, (long long)x.n);
}

/* zrangeGenericCommand: key at argv[ks], the range after it, options after those. */
static void zrange_generic(client *c, int ks, bool store, int type, int rev)
{
	zs_rangeq q = { .type = type, .rev = rev == 1, .limit = -1 };
	int minidx = ks + 1, maxidx = ks + 2;
	bool rev_auto = rev < 0;

	for (int j = ks + 3; j < c->argc; j++) {
		const resp_slice *o = &c->argv[j];
		int left = c->argc - j - 1;
		if (!store && OPT_IS(o, "withscores")) {
			q.withscores = true;
		} else if (OPT_IS(o, "limit") && left >= 2) {
			if (!zs_arg_long(c, &c->argv[j + 1], &q.offset, NULL) ||
			    !zs_arg_long(c, &c->argv[j + 2], &q.limit, NULL))
				return;
			j += 2;
		} else if (rev_auto && OPT_IS(o, "rev")) {
			q.rev = true;
			rev_auto = false;
		} else if (q.type == ZR_AUTO && OPT_IS(o, "bylex")) {
			q.type = ZR_LEX;
		} else if (q.type == ZR_AUTO && OPT_IS(o, "byscore")) {
			q.type = ZR_SCORE;
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	if (q.type == ZR_AUTO)
		q.type = ZR_RANK;
	if (q.limit != -1 && q.type == ZR_RANK) {
		reply_error(c, "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
		return;
	}
	if (q.withscores && q.type == ZR_LEX) {
		reply_error(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
		return;
	}
	if (q.rev && q.type != ZR_RANK) {
		minidx = ks + 2;
		maxidx = ks + 1;
	}
	const resp_slice *a = &c->argv[minidx], *b = &c->argv[maxidx];
	if (q.type == ZR_RANK) {
		if (!zs_arg_long(c, a, &q.start, NULL) || !zs_arg_long(c, b, &q.end, NULL))
			return;
	} else if (q.type == ZR_SCORE) {
		if (!zs_range_parse(a->ptr, a->len, b->ptr, b->len, &q.score)) {
			reply_error(c, "ERR min or max is not a float");
			return;
		}
	} else if (!zs_lex_parse(a->ptr, a->len, b->ptr, b->len, &q.lex)) {
		reply_error(c, "ERR min or max not valid string range item");
		return;
	}
	if (store) {
		zrangestore_run(c, &c->argv[1], &c->argv[ks], &q);
		return;
	}
	coll_hint h = { .mode = q.type == ZR_LEX ? COLL_HINT_WHOLE : COLL_HINT_ZRANGE, .zq = &q };
	if (zs_lookup_hint(c, &c->argv[ks], true, &h, zrange_body, &q) == 0)
		resp_write_array_len(&c->out, 0);
}

void cmd_zrange(client *c) { zrange_generic(c, 1, false, ZR_AUTO, -1); }
void cmd_zrangestore(client *c) { zrange_generic(c, 2, true, ZR_AUTO, -1); }
void cmd_zrevrange(client *c) { zrange_generic(c, 1, false, ZR_RANK, 1); }
void cmd_zrangebyscore(client *c) { zrange_generic(c, 1, false, ZR_SCORE, 0); }
void cmd_zrevrangebyscore(client *c) { zrange_generic(c, 1, false, ZR_SCORE, 1); }
void cmd_zrangebylex(client *c) { zrange_generic(c, 1, false, ZR_LEX, 0); }
void cmd_zrevrangebylex(client *c) { zrange_generic(c, 1, false, ZR_LEX, 1); }

/* ---------------- ZCOUNT, ZLEXCOUNT ---------------- */

static void zcount_body(client *c, const coll_view *v, void *arg)
{
	zs_run r;
	const zs_rangeq *q = arg;
	if (q->large_exact) {
		reply_int(c, (long long)q->large_n);
		return;
	}
	zs_run_find(v->p, arg, &r);
	reply_int(c, (long long)r.n);
}

static void zcount_generic(client *c, int type)
{
	zs_rangeq q = { .type = type, .limit = -1 };
	const resp_slice *a = &c->argv[2], *b = &c->argv[3];
	if (type == ZR_SCORE && !zs_range_parse(a->ptr, a->len, b->ptr, b->len, &q.score)) {
		reply_error(c, "ERR min or max is not a float");
		return;
	}
	if (type == ZR_LEX && !zs_lex_parse(a->ptr, a->len, b->ptr, b->len, &q.lex)) {
		reply_error(c, "ERR min or max not valid string range item");
		return;
	}
	coll_hint h = { .mode = type == ZR_SCORE ? COLL_HINT_ZRANGE : COLL_HINT_WHOLE, .zq = &q };
	q.count_only = true;
	if (zs_lookup_hint(c, &c->argv[1], true, &h, zcount_body, &q) == 0)
		reply_int(c, 0);
}

void cmd_zcount(client *c) { zcount_generic(c, ZR_SCORE); }
void cmd_zlexcount(client *c) { zcount_generic(c, ZR_LEX); }

/* ---------------- ZRANDMEMBER (note 4) ---------------- */

struct zrand_ctx {
	long long count;
	bool withscores, with_count;
};

static void zrand_body(client *c, const coll_view *v, void *arg)
{
	const struct zrand_ctx *x = arg;
	const uint8_t *lp = v->p, *p;
	unsigned long size = zs_len(lp);
	bool uniq = x->count >= 0, resp2 = c->out.proto < 3;
	unsigned long long count = uniq ? (unsigned long long)x->count : (unsigned long long)-x->count;

	if (!x->with_count) {
		zs_reply_member(c, lp_seek(lp, 2 * (long)(rng_next() % size)));
		return;
	}
	if (count == 0) {
		resp_write_array_len(&c->out, 0);
		return;
	}
	if (!uniq || count == 1) {
		uint32_t *idx = (uint32_t *)worker_scratch(c->w, size * sizeof(uint32_t));
		if (!idx) {
			reply_err_store(c, -ENOMEM);
			return;
		}
		unsigned long i = 0;
		for (p = lp_first(lp); p; p = zs_step(lp, p, false))
			idx[i++] = (uint32_t)(p - lp);
		resp_write_array_len(&c->out, x->withscores && resp2 ? 2 * (long long)count : (long long)count);
		for (unsigned long long k = 0; k < count; k++)
			zs_reply_pair(c, lp, lp + idx[rng_next() % size], x->withscores, !resp2);
		return;
	}
	if (count >= size) {   /* the whole set, highest rank first, as Redis's CASE 2 */
		resp_write_array_len(&c->out, x->withscores && resp2 ? 2 * (long long)size : (long long)size);
		for (p = lp_seek(lp, -2); p; p = zs_step(lp, p, true))
			zs_reply_pair(c, lp, p, x->withscores, !resp2);
		return;
	}
	unsigned long long want = count, left = size;
	resp_write_array_len(&c->out, x->withscores && resp2 ? 2 * (long long)want : (long long)want);
	for (p = lp_first(lp); p && want; p = zs_step(lp, p, false), left--) {
		if (rng_next() % left < want) {   /* selection sampling: in listpack order */
			zs_reply_pair(c, lp, p, x->withscores, !resp2);
			want--;
		}
	}
}

void cmd_zrandmember(client *c)
{
	struct zrand_ctx x = { 0 };
	if (c->argc >= 3) {
		if (!zs_arg_long(c, &c->argv[2], &x.count, NULL))
			return;
		if (x.count == LLONG_MIN) {
			reply_error(c, "ERR value is out of range, value must between -9223372036854775807 and "
			               "9223372036854775807");
			return;
		}
		if (c->argc > 4 || (c->argc == 4 && !OPT_IS(&c->argv[3], "withscores"))) {
			reply_err_syntax(c);
			return;
		}
		if (c->argc == 4) {
			x.withscores = true;
			if (x.count < -LLONG_MAX / 2 || x.count > LLONG_MAX / 2) {
				reply_error(c, "ERR value is out of range");
				return;
			}
		}
		x.with_count = true;
	}
	if (zs_lookup(c, &c->argv[1], true, zrand_body, &x) != 0)
		return;
	if (x.with_count)
		resp_write_array_len(&c->out, 0);
	else
		reply_null(c);
}

/* ---------------- ZSCAN (cmd_zset.c note 5) ---------------- */

struct zscan_ctx {
	unsigned long long cursor;
	long long count;
	const char *pat;
	size_t plen;
	bool use_pat;
};

/* The options after the cursor, parsed once the key is found (Redis's order). NULL or an error. */
static const char *zscan_opts(client *c, struct zscan_ctx *x)
{
	coll_scan o;
	const char *err = coll_scan_opts(c, &o);
	x->count = o.count;
	x->pat = o.pat;
	x->plen = o.plen;
	x->use_pat = o.pat != NULL;
	return err;
}

static bool zscan_match(const struct zscan_ctx *x, const uint8_t *p)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *m;
	if (!x->use_pat)
		return true;
	m = zs_member(p, buf, &len);
	return spw_glob_match(x->pat, x->plen, m, len, 0);
}

/* A score as ZSCAN gives it: the stored entry's text (listpack), ld2string's "%.17Lg" (skiplist). */
static void zscan_score(client *c, const coll_view *v, const uint8_t *p)
{
	char buf[64];
	if (v->enc == CENC_LISTPACK) {
		zs_reply_member(c, lp_next(v->p, p));
		return;
	}
	double s = zs_score(v->p, p);
	int n = isinf(s) ? snprintf(buf, sizeof(buf), "%s", s > 0 ? "inf" : "-inf")
	                 : snprintf(buf, sizeof(buf), "%.17Lg", (long double)s);
	reply_bulk(c, buf, (size_t)n);
}

static void zscan_body(client *c, const coll_view *v, void *arg)
{
	struct zscan_ctx *x = arg;
	const uint8_t *lp = v->p, *first, *p;
	unsigned long long n = zs_len(lp), from = 0, to = n, next = 0, i, hits = 0;
	const char *err = zscan_opts(c, x);
	char cbuf[24];

	if (err) {
		reply_error(c, err);
		return;
	}
	if (v->enc != CENC_LISTPACK) {
		from = x->cursor < n ? x->cursor : n;
		to = n - from > (unsigned long long)x->count ? from + (unsigned long long)x->count : n;
		next = to < n ? to : 0;
	}
	first = from < n ? lp_seek(lp, (long)(2 * from)) : NULL;
	for (p = first, i = from; p && i < to; p = zs_step(lp, p, false), i++)
		hits += zscan_match(x, p);
	resp_write_array_len(&c->out, 2);
	reply_bulk(c, cbuf, spw_fmt_ll(cbuf, (long long)next));
	resp_write_array_len(&c->out, (long long)hits * 2);
	for (p = first, i = from; p && i < to; p = zs_step(lp, p, false), i++) {
		if (zscan_match(x, p)) {
			zs_reply_member(c, p);
			zscan_score(c, v, p);
		}
	}
}

void cmd_zscan(client *c)
{
	struct zscan_ctx x = { .count = 10 };
	if (!scan_cursor_parse(&c->argv[2], &x.cursor)) {
		reply_error(c, "ERR invalid cursor");
		return;
	}
	if (zs_lookup(c, &c->argv[1], true, zscan_body, &x) != 0)
		return;
	resp_write_array_len(&c->out, 2);   /* Redis's shared.emptyscan */
	reply_bulk(c, "0", 1);
	resp_write_array_len(&c->out, 0);
}
