/*
 * cmd_lcs.c - LCS (Redis 7.0's t_string.c lcsCommand): the longest common subsequence of two
 * strings, as the string itself, its LEN, or the matching ranges (IDX, MINMATCHLEN, WITHMATCHLEN).
 *
 * Design notes:
 *  1. Replies and errors are redis-server 7.0's byte for byte, in its order: both keys are looked
 *     up (a missing key is the empty string; a collection is refused with Redis's own "ERR The
 *     specified keys must contain string values", not WRONGTYPE) before the options are parsed;
 *     then IDX with LEN is refused, then the table's size is checked against proto-max-bulk-len.
 *  2. Both strings are needed at once, so the two reads copy them into the worker's scratch (the
 *     records may be evicted once a callback returns). The keys are prefetched first and the
 *     command parks while either is on the device (cmd_string.c note 8); LCS writes nothing, so a
 *     re-run simply reads again.
 *  3. The table is Redis's: (alen+1)*(blen+1) 32-bit cells, cell (i, j) the LCS length of the first
 *     i bytes of a and the first j of b. It is allocated for the command and freed after it; LEN
 *     alone needs two rows of it, but the limit is checked on the whole table, as Redis does, so
 *     that the same inputs are refused.
 *  4. The string and the ranges come from one walk back from (alen, blen), the same walk as
 *     Redis's so that ties pick the same path and ranges come out in the same order (from the
 *     end of the strings). IDX walks twice, first to count the ranges that pass MINMATCHLEN
 *     (the array's length is written before its elements), then to write them. The string is
 *     written backwards straight into the reply.
 */
#include "server/server_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Both strings, one after the other in the worker's scratch. */
struct lcs_read {
	worker *w;
	size_t used;
	uint8_t *buf;
	bool oom;
	bool wrongtype;            /* a key holds a collection */
};

static void read_lcs(void *ctx, const hlog_value *v)
{
	struct lcs_read *r = ctx;
	if (v->rtype != HLOG_T_STRING) {
		r->wrongtype = true;
		return;
	}
	uint8_t *b = worker_scratch(r->w, r->used + v->len + 1);
	if (!b) {
		r->oom = true;
		return;
	}
	memcpy(b + r->used, v->ptr, v->len);
	r->buf = b;
	r->used += v->len;
}

struct lcs_opts {
	bool len, idx, withlen;
	long long minlen;
};

/* LCS's options after the keys; false after replying. */
static bool lcs_opts_parse(client *c, struct lcs_opts *o)
{
	for (int j = 3; j < c->argc; j++) {
		const resp_slice *a = &c->argv[j];
		if (OPT_IS(a, "idx")) {
			o->idx = true;
		} else if (OPT_IS(a, "len")) {
			o->len = true;
		} else if (OPT_IS(a, "withmatchlen")) {
			o->withlen = true;
		} else if (OPT_IS(a, "minmatchlen") && j + 1 < c->argc) {
			if (!arg_ll(&c->argv[++j], &o->minlen)) {
				reply_err_not_int(c);
				return false;
			}
			if (o->minlen < 0)
				o->minlen = 0;
		} else {
			reply_err_syntax(c);
			return false;
		}
	}
	if (o->idx && o->len) {
		reply_error(c, "ERR If you want both the length and indexes, please just use IDX.");
		return false;
	}
	return true;
}

typedef struct lcs_table {
	const uint8_t *a, *b;
	uint32_t alen, blen;
	uint32_t *dp;
} lcs_table;

#define LCS_AT(t, i, j) ((t)->dp[(size_t)(j) + (size_t)(i) * ((size_t)(t)->blen + 1)])

static void lcs_table_build(lcs_table *t)
{
	for (uint32_t j = 0; j <= t->blen; j++)
		LCS_AT(t, 0, j) = 0;
	for (uint32_t i = 1; i <= t->alen; i++) {
		uint32_t *row = &LCS_AT(t, i, 0), *up = &LCS_AT(t, i - 1, 0);
		uint8_t ai = t->a[i - 1];
		row[0] = 0;
		for (uint32_t j = 1; j <= t->blen; j++)
			row[j] = ai == t->b[j - 1] ? up[j - 1] + 1 : SPW_MAX(up[j], row[j - 1]);
	}
}

/* LEN alone: the same recurrence over two rows (note 3). */
static uint32_t lcs_length(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen, uint32_t *rows)
{
	uint32_t *up = rows, *row = rows + blen + 1;
	memset(up, 0, ((size_t)blen + 1) * sizeof(*up));
	for (uint32_t i = 1; i <= alen; i++) {
		row[0] = 0;
		for (uint32_t j = 1; j <= blen; j++)
			row[j] = a[i - 1] == b[j - 1] ? up[j - 1] + 1 : SPW_MAX(up[j], row[j - 1]);
		uint32_t *t = up;
		up = row;
		row = t;
	}
	return up[blen];
}

/*
 * Walk back from (alen, blen) (note 4). A match extends the current range backwards; a step that
 * is not a match, or reaching the start of either string, ends it. Ranges of at least minlen
 * bytes are counted and, with c, written as [[a_start, a_end], [b_start, b_end](, len)]. With out,
 * the subsequence is written there (LCS_AT(alen, blen) bytes). Returns the ranges counted.
 */
static long long lcs_walk(const lcs_table *t, const struct lcs_opts *o, client *c, uint8_t *out)
{
	uint32_t i = t->alen, j = t->blen, k = LCS_AT(t, i, j);
	uint32_t as = 0, ae = 0, bs = 0, be = 0;
	bool open = false;
	long long n = 0;

	while (i > 0 && j > 0) {
		bool close = false;
		if (t->a[i - 1] == t->b[j - 1]) {
			if (out)
				out[k - 1] = t->a[i - 1];
			if (!open) {
				as = ae = i - 1;
				bs = be = j - 1;
				open = true;
			} else {
				as--;   /* the previous step matched at (i, j): contiguous */
				bs--;
			}
			close = as == 0 || bs == 0;
			k--;
			i--;
			j--;
		} else {
			if (LCS_AT(t, i - 1, j) > LCS_AT(t, i, j - 1))
				i--;
			else
				j--;
			close = open;
		}
		if (!close)
			continue;
		uint32_t mlen = ae - as + 1;
		if (o->minlen == 0 || mlen >= o->minlen) {
			n++;
			if (c) {
				resp_write_array_len(&c->out, 2 + o->withlen);
				resp_write_array_len(&c->out, 2);
				reply_int(c, as);
				reply_int(c, ae);
				resp_write_array_len(&c->out, 2);
				reply_int(c, bs);
				reply_int(c, be);
				if (o->withlen)
					reply_int(c, mlen);
			}
		}
		open = false;
	}
	return n;
}

/* Size the table, allocate it and reply; the strings are in place. */
static void lcs_reply(client *c, const struct lcs_opts *o, lcs_table *t)
{
	uint64_t cells = ((uint64_t)t->alen + 1) * ((uint64_t)t->blen + 1);

	if (cells * sizeof(uint32_t) > g_cfg.proto_max_bulk_len) {
		reply_error(c, "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
		return;
	}
	if (o->len) {
		uint32_t *rows = malloc(((size_t)t->blen + 1) * 2 * sizeof(uint32_t));
		if (!rows) {
			reply_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
			return;
		}
		reply_int(c, lcs_length(t->a, t->alen, t->b, t->blen, rows));
		free(rows);
		return;
	}
	t->dp = malloc((size_t)cells * sizeof(uint32_t));
	if (!t->dp) {
		reply_error(c, "ERR Insufficient memory, failed allocating transient memory for LCS");
		return;
	}
	lcs_table_build(t);
	uint32_t total = LCS_AT(t, t->alen, t->blen);
	if (o->idx) {
		resp_write_map_len(&c->out, 2);
		resp_write_bulk_cstr(&c->out, "matches");
		resp_write_array_len(&c->out, lcs_walk(t, o, NULL, NULL));
		lcs_walk(t, o, c, NULL);
		resp_write_bulk_cstr(&c->out, "len");
		reply_int(c, total);
	} else {
		uint8_t *dst = (uint8_t *)resp_write_bulk_fill(&c->out, total);
		if (dst)
			lcs_walk(t, o, NULL, dst);
		else
			reply_err_store(c, -ENOMEM);
	}
	free(t->dp);
}

void cmd_lcs(client *c)
{
	struct lcs_read r = { .w = c->w };
	struct lcs_opts o = { 0 };
	lcs_table t = { 0 };
	size_t alen = 0;
	hlog_key k;

	if (reply_store_failed(c, command_keys_prefetch(c, 1, 2, 1)))
		return;
	for (int j = 1; j <= 2; j++) {
		key_from_arg(&k, &c->argv[j]);
		int rc = hlog_read(c->w->sess, &k, read_lcs, &r);
		if (reply_store_failed(c, rc))
			return;
		count_lookup(c, rc == HLOG_OK);
		if (j == 1)
			alen = r.used;
	}
	if (r.wrongtype) {
		reply_error(c, "ERR The specified keys must contain string values");
		return;
	}
	if (r.oom) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	if (!lcs_opts_parse(c, &o))
		return;
	if (alen >= UINT32_MAX - 1 || r.used - alen >= UINT32_MAX - 1) {
		reply_error(c, "ERR String too long for LCS");
		return;
	}
	static const uint8_t empty[1];
	t.a = r.buf ? r.buf : empty;
	t.b = t.a + alen;
	t.alen = (uint32_t)alen;
	t.blen = (uint32_t)(r.used - alen);
	lcs_reply(c, &o, &t);
}
