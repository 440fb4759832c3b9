/*
 * cmd_zset_ops.c - the sorted-set algebra (Redis 7.0's zunionInterDiffGenericCommand): ZUNION ZINTER
 * ZDIFF ZINTERCARD ZUNIONSTORE ZINTERSTORE ZDIFFSTORE, with WEIGHTS, AGGREGATE SUM|MIN|MAX,
 * WITHSCORES and LIMIT, over sorted sets and sets (a set member scores 1).
 *
 * Design notes:
 *  1. Order of checks as Redis: numkeys, then every key's type (WRONGTYPE before any option
 *     error), then the options, so the sources are read (copied out of their records) first.
 *  2. One algorithm for the three operations: every (member, weighted score, source) of every
 *     source goes into one array, sorted by member and then by source; a run of one member then
 *     holds its occurrences in source order. Union aggregates a whole run, intersection a run that
 *     has every source, difference a run that is only the first source's. The sources are put in
 *     Redis's order first (union and intersection: by cardinality, stably, as Redis's qsort; the
 *     difference keeps the first), so the sums are added in the order Redis adds them and give the
 *     same doubles. A weighted score that is NaN (0 * inf) is 0, a NaN sum is 0, as Redis.
 *  3. The result is sorted by (score, member), Redis's skiplist order, for the reply or the store;
 *     a STORE result gets zsetConvertToListpackIfNeeded's encoding and replaces the destination
 *     (TTL and type dropped), or deletes it when empty.
 *  4. Not atomic across worker threads in this version: the sources are read one store operation
 *     each, then the destination written (cmd_string.c note 7), also when the destination is one
 *     of the sources. The reads come first (prefetched together) and may park; nothing has changed
 *     before the destination's write.
 *  5. Memory: O(total members) for the copies and the array, allocated per command: these are
 *     O(N log N) commands over whole sets, not a hot path.
 */
#include "server/zset_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/intset.h"
#include "coll/numconv.h"

enum { OP_UNION, OP_INTER, OP_DIFF };
enum { AGG_SUM, AGG_MIN, AGG_MAX };

/* One source, copied out of its record. */
struct zsrc {
	uint8_t *p;               /* payload copy (NULL: the key is absent) */
	int type, enc;            /* COLL_ZSET or COLL_SET; CENC_* */
	unsigned long card;
	double weight;
	int argi;                 /* argv index of its key (Redis's order before sorting) */
};

struct zitem {
	const char *m;            /* member bytes, or NULL: in ib */
	uint32_t len;
	uint32_t src;
	double score;
	char ib[LP_INTBUF_SIZE];
};

static const char *item_str(const struct zitem *it) { return it->m ? it->m : it->ib; }

struct src_read {
	struct zsrc *s;
	int rc;
};

static void src_read_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct src_read *x = ctx;
	(void)hv;
	if (v->type != COLL_ZSET && v->type != COLL_SET) {
		x->rc = SPW_E_WRONGTYPE;
		return;
	}
	bool is_intset = v->type == COLL_SET && v->enc == CENC_INTSET;
	if (is_intset ? !is_validate(v->p, v->used, false) : !lp_validate(v->p, v->used, false, NULL, NULL)) {
		x->rc = SPW_E_CORRUPT;
		return;
	}
	if (!(x->s->p = malloc(v->used ? v->used : 1))) {
		x->rc = -ENOMEM;
		return;
	}
	memcpy(x->s->p, v->p, v->used);
	x->s->type = v->type;
	x->s->enc = v->enc;
	x->s->card = is_intset ? is_len(v->p) : v->type == COLL_ZSET ? zs_len(v->p) : lp_count(v->p);
}

static void srcs_free(struct zsrc *s, long n)
{
	for (long i = 0; i < n; i++)
		free(s[i].p);
	free(s);
}

/* Read the n keys from argv[first] (note 1). 0, or a store result (WRONGTYPE, a park...). */
static int srcs_read(client *c, struct zsrc *s, int first, long n, bool count)
{
	for (long i = 0; i < n; i++) {
		struct src_read x = { &s[i], 0 };
		s[i].weight = 1.0;
		s[i].argi = first + (int)i;
		int rc = coll_read(c, &c->argv[first + i], 0, src_read_cb, &x);
		if (rc == HLOG_OK && x.rc)
			rc = x.rc;
		if (count && rc != HLOG_PENDING)
			count_lookup(c, rc != HLOG_NOTFOUND);
		if ((rc < 0 && rc != HLOG_NOTFOUND) || rc == HLOG_PENDING)
			return rc;   /* a large source's parts may park after the heads' prefetch */
	}
	return 0;
}

/* Every member of every source into items (note 2). */
static size_t items_fill(const struct zsrc *s, long n, struct zitem *items)
{
	size_t k = 0;
	for (long i = 0; i < n; i++) {
		const uint8_t *lp = s[i].p, *p;
		if (!lp)
			continue;
		if (s[i].type == COLL_SET && s[i].enc == CENC_INTSET) {
			for (uint32_t j = 0; j < is_len(lp); j++, k++) {
				int64_t v;
				is_get(lp, j, &v);
				items[k].m = NULL;
				items[k].len = (uint32_t)spw_fmt_ll(items[k].ib, v);
				items[k].src = (uint32_t)i;
				items[k].score = s[i].weight;
			}
			continue;
		}
		bool zset = s[i].type == COLL_ZSET;
		for (p = lp_first(lp); p; p = lp_next(lp, p), k++) {
			size_t len;
			const char *m = zs_member(p, items[k].ib, &len);
			items[k].m = m == items[k].ib ? NULL : m;
			items[k].len = (uint32_t)len;
			items[k].src = (uint32_t)i;
			double sc = zset ? zs_score(lp, p) : 1.0;
			items[k].score = s[i].weight * sc;
			if (isnan(items[k].score))
				items[k].score = 0;
			if (zset)
				p = lp_next(lp, p);
		}
	}
	return k;
}

static int member_cmp(const struct zitem *a, const struct zitem *b)
{
	uint32_t n = a->len < b->len ? a->len : b->len;
	int cmp = memcmp(item_str(a), item_str(b), n);
	return cmp ? cmp : (a->len < b->len ? -1 : a->len > b->len);
}

static int by_member(const void *x, const void *y)
{
	const struct zitem *a = x, *b = y;
	int cmp = member_cmp(a, b);
	return cmp ? cmp : (a->src < b->src ? -1 : a->src > b->src);
}

static int by_score(const void *x, const void *y)
{
	const struct zitem *a = x, *b = y;
	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	return member_cmp(a, b);
}

static void aggregate(double *t, double v, int agg)
{
	if (agg == AGG_SUM) {
		*t += v;
		if (isnan(*t))
			*t = 0.0;
	} else if (agg == AGG_MIN) {
		*t = v < *t ? v : *t;
	} else {
		*t = v > *t ? v : *t;
	}
}

/* Reduce the member-sorted items to the result, in place; returns its length. */
static size_t items_reduce(struct zitem *it, size_t k, long n, int op, int agg)
{
	size_t out = 0;
	for (size_t i = 0, j; i < k; i = j) {
		for (j = i + 1; j < k && member_cmp(&it[i], &it[j]) == 0; j++)
			;
		size_t run = j - i;
		if (op == OP_INTER && run != (size_t)n)
			continue;
		if (op == OP_DIFF && (it[i].src != 0 || run != 1))
			continue;
		struct zitem r = it[i];
		for (size_t m = i + 1; m < j; m++)
			aggregate(&r.score, it[m].score, agg);
		it[out++] = r;
	}
	return out;
}

/* Sort the sources as Redis does before it runs the operation (note 2): stable by cardinality. */
static void srcs_order(struct zsrc *s, long n)
{
	for (long i = 1; i < n; i++) {
		struct zsrc t = s[i];
		long j = i;
		for (; j > 0 && s[j - 1].card > t.card; j--)
			s[j] = s[j - 1];
		s[j] = t;
	}
}

struct zops {
	int op, agg;
	bool withscores, card_only;
	long long limit;
	const resp_slice *dst;
	const char *name;
};

/* The options after the keys (Redis's order and errors). false after replying. */
static bool ops_parse(client *c, struct zops *o, struct zsrc *s, long n, int j)
{
	while (j < c->argc) {
		int left = c->argc - j;
		const resp_slice *a = &c->argv[j];
		if (o->op != OP_DIFF && !o->card_only && left >= n + 1 && OPT_IS(a, "weights")) {
			j++;
			for (long i = 0; i < n; i++, j++) {
				if (!coll_parse_double(c->argv[j].ptr, c->argv[j].len, &s[i].weight)) {
					reply_error(c, "ERR weight value is not a float");
					return false;
				}
			}
		} else if (o->op != OP_DIFF && !o->card_only && left >= 2 && OPT_IS(a, "aggregate")) {
			const resp_slice *v = &c->argv[j + 1];
			if (OPT_IS(v, "sum"))
				o->agg = AGG_SUM;
			else if (OPT_IS(v, "min"))
				o->agg = AGG_MIN;
			else if (OPT_IS(v, "max"))
				o->agg = AGG_MAX;
			else
				return reply_err_syntax(c), false;
			j += 2;
		} else if (!o->dst && !o->card_only && OPT_IS(a, "withscores")) {
			o->withscores = true;
			j++;
		} else if (o->card_only && left >= 2 && OPT_IS(a, "limit")) {
			const char *msg = "LIMIT can't be negative";
			if (!zs_arg_long(c, &c->argv[j + 1], &o->limit, msg))
				return false;
			if (o->limit < 0)
				return reply_errorf(c, "ERR %s", msg), false;
			j += 2;
		} else {
			reply_err_syntax(c);
			return false;
		}
	}
	return true;
}

/* Reply with, or store, the score-sorted result. */
static void ops_finish(client *c, const struct zops *o, struct zitem *it, size_t k)
{
	if (!o->dst) {
		bool resp2 = c->out.proto < 3;
		resp_write_array_len(&c->out, o->withscores && resp2 ? 2 * (long long)k : (long long)k);
		for (size_t i = 0; i < k; i++) {
			if (o->withscores && !resp2)
				resp_write_array_len(&c->out, 2);
			reply_bulk(c, item_str(&it[i]), it[i].len);
			if (o->withscores)
				resp_write_double(&c->out, it[i].score);
		}
		return;
	}
	lp_buf *b;
	size_t maxlen = 0;
	for (size_t i = 0; i < k; i++)
		maxlen = it[i].len > maxlen ? it[i].len : maxlen;
	int enc = zs_result_enc(k, maxlen), rc = coll_buf_load(NULL, &b);
	for (size_t i = 0; rc >= 0 && i < k; i++)
		rc = zs_append(b, item_str(&it[i]), it[i].len, it[i].score, enc == CENC_SKIPLIST);
	if (rc < 0) {
		reply_err_store(c, rc);
		return;
	}
	if (reply_store_failed(c, zs_store(c, o->dst, b->p, enc)))
		return;
	reply_int(c, (long long)k);
}

static void zops_generic(client *c, int nki, struct zops *o)
{
	long long n;
	struct zsrc *s = NULL;
	struct zitem *it = NULL;

	if (!zs_arg_long(c, &c->argv[nki], &n, NULL))
		return;
	if (n < 1) {
		reply_errorf(c, "ERR at least 1 input key is needed for '%s' command", o->name);
		return;
	}
	if (n > c->argc - (nki + 1)) {
		reply_err_syntax(c);
		return;
	}
	if (reply_store_failed(c, command_keys_prefetch(c, nki + 1, nki + (int)n, 1)))
		return;
	if (!(s = calloc((size_t)n, sizeof(*s)))) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	if (reply_store_failed(c, srcs_read(c, s, nki + 1, (long)n, !o->dst)))
		goto done;
	if (!ops_parse(c, o, s, (long)n, nki + 1 + (int)n))
		goto done;
	if (o->op != OP_DIFF)
		srcs_order(s, (long)n);
	size_t total = 0;
	for (long i = 0; i < n; i++)
		total += s[i].p ? s[i].card : 0;
	if (!(it = malloc((total ? total : 1) * sizeof(*it)))) {
		reply_err_store(c, -ENOMEM);
		goto done;
	}
	size_t k = items_fill(s, (long)n, it);
	qsort(it, k, sizeof(*it), by_member);
	k = items_reduce(it, k, (long)n, o->op, o->agg);
	if (o->card_only) {
		reply_int(c, o->limit && (long long)k > o->limit ? o->limit : (long long)k);
		goto done;
	}
	qsort(it, k, sizeof(*it), by_score);
	ops_finish(c, o, it, k);
done:
	free(it);
	srcs_free(s, (long)n);
}

#define ZOPS(fn, opname, nki, isdst, card)                                                  \
	void fn(client *c)                                                                       \
	{                                                                                        \
		struct zops o = { .op = opname, .card_only = card, .name = #fn + 4,                  \
		                  .dst = isdst ? &c->argv[1] : NULL };                               \
		zops_generic(c, nki, &o);                                                            \
	}

ZOPS(cmd_zunion, OP_UNION, 1, false, false)
ZOPS(cmd_zinter, OP_INTER, 1, false, false)
ZOPS(cmd_zdiff, OP_DIFF, 1, false, false)
ZOPS(cmd_zintercard, OP_INTER, 1, false, true)
ZOPS(cmd_zunionstore, OP_UNION, 2, true, false)
ZOPS(cmd_zinterstore, OP_INTER, 2, true, false)
ZOPS(cmd_zdiffstore, OP_DIFF, 2, true, false)
