/*
 * ztree.c - a large sorted set's counted B+tree, node by node (coll/ztree.h).
 *
 * Design notes:
 *  1. Separators are lower bounds, never exact: an entry's key is its child's first pair when the
 *     entry was made (a split), and it stays valid as pairs come and go, since an insert descends
 *     to the last child whose separator is at or below the key and a delete removes keys only.
 *     Entry 0's separator is never compared (the first child takes every key below entry 1's), so
 *     no insert ever has to lower a separator. The price: a separator is the full member, not the
 *     shortest separating prefix (v1), so an inner node's size follows its members' lengths.
 *  2. Every descent is by a bound: a monotone "before" predicate over the order (a key, a score,
 *     inclusive or not). The child is the last entry whose separator is before the bound; the
 *     counts of the entries before it are the pairs skipped, so one descent gives a rank
 *     (ZRANK: keys before (score, member)), a score range's end (ZCOUNT: two descents) or the leaf
 *     to edit (a bound inclusive of the key itself).
 *  3. Splits cut by bytes at the pair (entry) nearest the middle, so both halves hold about half
 *     of a node past the limit; a leaf's halves are listpacks of the small layout's entries copied
 *     as they are (zset.c's zs_run_write).
 */
#include "coll/ztree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll/zset.h"

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static void u64_put(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

int zt_key_cmp(const zt_key *a, const zt_key *b)
{
	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	size_t n = a->mlen < b->mlen ? a->mlen : b->mlen;
	int c = n ? memcmp(a->m, b->m, n) : 0;
	return c ? c : (a->mlen < b->mlen ? -1 : a->mlen > b->mlen);
}

bool zt_before(const zt_key *x, const zt_bound *b)
{
	int c;
	if (b->by_score)
		c = x->score < b->k.score ? -1 : x->score > b->k.score;
	else
		c = zt_key_cmp(x, &b->k);
	return c < 0 || (c == 0 && b->incl);
}

void zt_key_of(const uint8_t *lp, const uint8_t *p, char *buf, zt_key *out)
{
	out->m = zs_member(p, buf, &out->mlen);
	out->score = zs_score(lp, p);
}

/* ---------------- inner nodes ---------------- */

bool zt_inner_valid(const uint8_t *node, size_t len)
{
	if (len < ZT_INNER_HDR || node[0] != 'I')
		return false;
	uint32_t n = zt_inner_n(node);
	size_t off = ZT_INNER_HDR;
	for (uint32_t i = 0; i < n; i++) {
		if (len - off < ZT_ENT_FIXED)
			return false;
		uint32_t ml = lp_u32(node + off + 24);
		if (len - off - ZT_ENT_FIXED < ml)
			return false;
		off += ZT_ENT_FIXED + ml;
	}
	return n >= 1 && off == len;
}

size_t zt_inner_ent(const uint8_t *node, size_t off, zt_ent *e)
{
	const uint8_t *p = node + off;
	e->id = u64_at(p);
	e->count = u64_at(p + 8);
	memcpy(&e->sep.score, p + 16, 8);
	e->sep.mlen = lp_u32(p + 24);
	e->sep.m = (const char *)p + ZT_ENT_FIXED;
	return off + ZT_ENT_FIXED + e->sep.mlen;
}

size_t zt_inner_off(const uint8_t *node, uint32_t i)
{
	size_t off = ZT_INNER_HDR;
	for (uint32_t j = 0; j < i; j++)
		off += ZT_ENT_FIXED + lp_u32(node + off + 24);
	return off;
}

static size_t ent_bytes(const zt_ent *e) { return ZT_ENT_FIXED + e->sep.mlen; }

static void ent_put(uint8_t *p, const zt_ent *e)
{
	u64_put(p, e->id);
	u64_put(p + 8, e->count);
	memcpy(p + 16, &e->sep.score, 8);
	lp_u32_write(p + 24, (uint32_t)e->sep.mlen);
	if (e->sep.mlen)
		memmove(p + ZT_ENT_FIXED, e->sep.m, e->sep.mlen);
}

static void n_put(uint8_t *node, uint32_t n)
{
	node[0] = 'I';
	node[1] = 0;
	node[2] = (uint8_t)n;
	node[3] = (uint8_t)(n >> 8);
}

int zt_inner_build(lp_buf *b, const zt_ent *ents, uint32_t n)
{
	size_t len = ZT_INNER_HDR;
	if (n > 65535)
		return -E2BIG;
	for (uint32_t i = 0; i < n; i++)
		len += ent_bytes(&ents[i]);
	if (lp_buf_reserve(b, len) < 0)
		return -ENOMEM;
	n_put(b->p, n);
	size_t off = ZT_INNER_HDR;
	for (uint32_t i = 0; i < n; i++) {
		ent_put(b->p + off, &ents[i]);
		off += ent_bytes(&ents[i]);
	}
	b->len = len;
	return 0;
}

int zt_inner_insert(lp_buf *b, uint32_t i, const zt_ent *e)
{
	uint32_t n = zt_inner_n(b->p);
	size_t add = ent_bytes(e);
	zt_ent c = *e;
	char *m = NULL;
	if (n == 65535)
		return -E2BIG;
	if (c.sep.mlen) {   /* e's member may point into b, which may move */
		if (!(m = malloc(c.sep.mlen)))
			return -ENOMEM;
		memcpy(m, c.sep.m, c.sep.mlen);
		c.sep.m = m;
	}
	if (lp_buf_reserve(b, b->len + add) < 0) {
		free(m);
		return -ENOMEM;
	}
	size_t off = zt_inner_off(b->p, i);
	memmove(b->p + off + add, b->p + off, b->len - off);
	ent_put(b->p + off, &c);
	b->len += add;
	n_put(b->p, n + 1);
	free(m);
	return 0;
}

void zt_inner_remove(lp_buf *b, uint32_t i)
{
	uint32_t n = zt_inner_n(b->p);
	size_t off = zt_inner_off(b->p, i), sz = ZT_ENT_FIXED + lp_u32(b->p + off + 24);
	memmove(b->p + off, b->p + off + sz, b->len - off - sz);
	b->len -= sz;
	n_put(b->p, n - 1);
}

void zt_inner_count_add(uint8_t *node, uint32_t i, int64_t delta)
{
	size_t off = zt_inner_off(node, i);
	u64_put(node + off + 8, (uint64_t)((int64_t)u64_at(node + off + 8) + delta));
}

void zt_inner_count_set(uint8_t *node, uint32_t i, uint64_t count)
{
	u64_put(node + zt_inner_off(node, i) + 8, count);
}

uint64_t zt_inner_total(const uint8_t *node)
{
	uint64_t t = 0;
	zt_ent e;
	size_t off = ZT_INNER_HDR;
	for (uint32_t i = 0, n = zt_inner_n(node); i < n; i++) {
		off = zt_inner_ent(node, off, &e);
		t += e.count;
	}
	return t;
}

uint32_t zt_inner_pick(const uint8_t *node, const zt_bound *b, uint64_t *skipped)
{
	uint32_t n = zt_inner_n(node), pick = 0;
	uint64_t sum = 0, at_pick = 0;
	size_t off = ZT_INNER_HDR;
	zt_ent e;
	for (uint32_t i = 0; i < n; i++) {
		off = zt_inner_ent(node, off, &e);
		if (i > 0 && !zt_before(&e.sep, b))
			break;
		pick = i;
		at_pick = sum;
		sum += e.count;
	}
	*skipped = at_pick;
	return pick;
}

uint32_t zt_inner_rank(const uint8_t *node, uint64_t r, uint64_t *skipped)
{
	uint32_t n = zt_inner_n(node);
	uint64_t sum = 0;
	size_t off = ZT_INNER_HDR;
	zt_ent e;
	for (uint32_t i = 0; i < n; i++) {
		off = zt_inner_ent(node, off, &e);
		if (r < sum + e.count || i + 1 == n) {
			*skipped = sum;
			return i;
		}
		sum += e.count;
	}
	*skipped = 0;
	return 0;
}

int zt_inner_split(const uint8_t *node, size_t len, lp_buf *out, size_t *offs)
{
	uint32_t n = zt_inner_n(node), cut = 1;
	size_t off = ZT_INNER_HDR, cut_off;
	if (n < 2)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {   /* the first entry past the middle, within [1, n-1] */
		off += ZT_ENT_FIXED + lp_u32(node + off + 24);
		cut = i + 1;
		if (off >= len / 2)
			break;
	}
	if (cut >= n)
		cut = n - 1;
	cut_off = zt_inner_off(node, cut);
	size_t l1 = cut_off, l2 = ZT_INNER_HDR + len - cut_off;
	if (lp_buf_reserve(out, l1 + l2) < 0)
		return -ENOMEM;
	memcpy(out->p, node, cut_off);
	n_put(out->p, cut);
	n_put(out->p + l1, n - cut);
	memcpy(out->p + l1 + ZT_INNER_HDR, node + cut_off, len - cut_off);
	out->len = l1 + l2;
	offs[0] = 0;
	offs[1] = l1;
	offs[2] = l1 + l2;
	return 0;
}

/* ---------------- leaves ---------------- */

uint64_t zt_leaf_before(const uint8_t *lp, const zt_bound *b)
{
	uint64_t n = 0;
	char buf[LP_INTBUF_SIZE];
	zt_key k;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p)), n++) {
		zt_key_of(lp, p, buf, &k);
		if (!zt_before(&k, b))
			break;
	}
	return n;
}

const uint8_t *zt_chunk_end(const uint8_t *lp, const uint8_t *p, size_t target, unsigned long *pairs)
{
	const uint8_t *start = p;
	unsigned long n = 0;
	while (p) {
		p = lp_next(lp, lp_next(lp, p));
		n++;
		if (p && (size_t)(p - start) >= target)
			break;
	}
	*pairs = n;
	return p;
}

int zt_leaf_split(const uint8_t *lp, lp_buf *out, size_t *offs)
{
	unsigned long total = lp_count(lp) / 2, n1;
	const uint8_t *first = lp_first(lp);
	if (total < 2 || !first)
		return -EINVAL;
	size_t body = lp_bytes(lp) - LP_EMPTY_BYTES;
	const uint8_t *mid = zt_chunk_end(lp, first, body / 2, &n1);
	if (!mid) {   /* one chunk took all: cut before the last pair */
		n1 = total - 1;
		mid = lp_seek(lp, (long)(2 * n1));
	}
	size_t b1 = (size_t)(mid - first), b2 = body - b1;
	if (lp_buf_reserve(out, b1 + b2 + 2 * LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	offs[0] = 0;
	offs[1] = zs_run_write(out->p, first, b1, n1);
	offs[2] = offs[1] + zs_run_write(out->p + offs[1], mid, b2, total - n1);
	out->len = offs[2];
	return 0;
}
