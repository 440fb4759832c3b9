/*
 * bucket.c - linear hashing over a large collection's buckets (coll/bucket.h).
 *
 * Design notes:
 *  1. A member's bucket is decided by XXH3 of its text seeded by the cid: a collection converted
 *     again gets a new cid, so its members spread differently (no two collections share a
 *     pathological layout), and the hash is the same for "12" held as an int entry or as bytes.
 *  2. Linear hashing (Litwin): 2^level + split buckets. A member goes to h mod 2^level, or, when
 *     that is below the split pointer (that bucket was split already), to h mod 2^(level+1). A
 *     split moves only the entries of bucket `split` whose h mod 2^(level+1) is split + 2^level,
 *     so a split touches one bucket and makes one new one; the buckets split in order, never
 *     merge (v1 has no merges), so a member's bucket number only grows: a cursor over buckets in
 *     increasing order never misses a member present throughout (HSCAN).
 *  3. Routing writes every listpack once: one pass counts each target's bytes and entries, one
 *     copies, so splitting a payload of n bytes into buckets costs O(n) and one allocation.
 */
#include "coll/bucket.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void be64_write(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

void coll_bucket_key(uint8_t *out, uint64_t cid, uint64_t b)
{
	be64_write(out, cid);
	out[8] = COLL_KIND_BUCKET;
	be64_write(out + 9, b);
}

void coll_registry_key(uint8_t *out, uint64_t cid)
{
	be64_write(out, cid);
	out[8] = COLL_KIND_REGISTRY;
}

bool coll_part_key_parse(const uint8_t *k, size_t len, uint64_t *cid, int *kind, uint64_t *b)
{
	if (len < 9)
		return false;
	*cid = be64(k);
	*kind = k[8];
	*b = 0;
	if (k[8] == COLL_KIND_REGISTRY)
		return len == COLL_REGISTRY_KEY_BYTES;
	if ((k[8] == COLL_KIND_BUCKET || k[8] == COLL_KIND_NODE || k[8] == COLL_KIND_ELEM ||
	     k[8] == COLL_KIND_ZNODE) && len == COLL_BUCKET_KEY_BYTES) {
		*b = be64(k + 9);
		return true;
	}
	return false;
}

uint64_t coll_member_hash(uint64_t cid, const void *m, size_t len)
{
	return XXH3_64bits_withSeed(m, len, cid);
}

uint64_t coll_entry_hash(uint64_t cid, const uint8_t *entry)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s = lp_entry_str(entry, buf, &len);
	return coll_member_hash(cid, s, len);
}

void coll_head_size(coll_head *h, uint64_t n)
{
	unsigned level = 0;
	if (n < 1)
		n = 1;
	while (level < 62 && (2ull << level) <= n)
		level++;
	h->level = level;
	h->split = n - (1ull << level);
}

uint64_t coll_initial_buckets(size_t bytes, size_t record_max)
{
	size_t half = record_max / 2 ? record_max / 2 : 1;
	uint64_t n = (bytes + half - 1) / half;
	return n ? n : 1;
}

void coll_head_split_advance(coll_head *h)
{
	if (++h->split == (1ull << h->level)) {
		h->split = 0;
		h->level++;
	}
}

/* ---------------- routing (note 3) ---------------- */

/* The bytes of the group of per entries at p (0 at the end), the first entry's hash in *hash. */
static size_t group_size(const uint8_t *lp, const uint8_t *p, unsigned per, uint64_t cid,
	uint64_t *hash, const uint8_t **next)
{
	const uint8_t *q = p;
	*hash = coll_entry_hash(cid, p);
	for (unsigned i = 0; i < per && q; i++)
		q = lp_next(lp, q);
	*next = q;
	return q ? (size_t)(q - p) : (size_t)(lp + lp_bytes(lp) - 1 - p);
}

int coll_lp_route(const uint8_t *lp, unsigned per, uint64_t cid, coll_route_fn route, void *arg,
                  size_t n, lp_buf *out, size_t *offs)
{
	size_t *cur = calloc(n ? 2 * n : 1, sizeof(size_t)), *cnt = cur + n, total = 0;
	const uint8_t *p, *next;
	uint64_t hash;
	if (!cur)
		return -ENOMEM;
	for (p = lp_first(lp); p; p = next) {   /* pass 1: sizes and counts */
		size_t sz = group_size(lp, p, per, cid, &hash, &next);
		uint64_t j = route(arg, hash);
		if (j >= n)
			goto bad;
		cur[j] += sz;
		cnt[j] += per;
	}
	for (size_t j = 0; j < n; j++) {
		offs[j] = total;
		if (cur[j] + LP_EMPTY_BYTES > LP_MAX_BYTES)
			goto bad;
		total += cur[j] + LP_EMPTY_BYTES;
	}
	offs[n] = total;
	if (lp_buf_reserve(out, total) < 0) {
		free(cur);
		return -ENOMEM;
	}
	out->len = total;
	for (size_t j = 0; j < n; j++) {
		uint8_t *b = out->p + offs[j];
		size_t bytes = offs[j + 1] - offs[j];
		lp_u32_write(b, (uint32_t)bytes);
		b[4] = (uint8_t)(cnt[j] < LP_COUNT_UNKNOWN ? cnt[j] : LP_COUNT_UNKNOWN);
		b[5] = (uint8_t)((cnt[j] < LP_COUNT_UNKNOWN ? cnt[j] : LP_COUNT_UNKNOWN) >> 8);
		b[bytes - 1] = LP_EOF;
		cur[j] = offs[j] + LP_HDR_SIZE;
	}
	for (p = lp_first(lp); p; p = next) {   /* pass 2: copies */
		size_t sz = group_size(lp, p, per, cid, &hash, &next);
		uint64_t j = route(arg, hash);
		memcpy(out->p + cur[j], p, sz);
		cur[j] += sz;
	}
	free(cur);
	return 0;
bad:
	free(cur);
	return -E2BIG;
}

static uint64_t route_bucket(void *arg, uint64_t hash) { return coll_bucket_of(arg, hash); }

int coll_lp_split(const uint8_t *lp, unsigned per, const coll_head *h, lp_buf *out, size_t *offs)
{
	return coll_lp_route(lp, per, h->cid, route_bucket, (void *)h, coll_bucket_count(h), out, offs);
}

static uint64_t route_split(void *arg, uint64_t hash)
{
	const coll_head *h = arg;
	return (hash & ((2ull << h->level) - 1)) != h->split;
}

int coll_bucket_split(const uint8_t *lp, unsigned per, const coll_head *h, lp_buf *out, size_t *offs)
{
	return coll_lp_route(lp, per, h->cid, route_split, (void *)h, 2, out, offs);
}

/* ---------------- assembling ---------------- */

int coll_lp_asm_begin(lp_buf *out)
{
	if (lp_buf_reserve(out, LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	out->len = LP_HDR_SIZE;
	return 0;
}

int coll_lp_asm_add(lp_buf *out, const uint8_t *lp, size_t len)
{
	if (len < LP_EMPTY_BYTES)
		return 0;
	size_t n = len - LP_EMPTY_BYTES;
	if (out->len + n + 1 > LP_MAX_BYTES)
		return -E2BIG;
	if (lp_buf_reserve(out, out->len + n + 1) < 0)
		return -ENOMEM;
	memcpy(out->p + out->len, lp + LP_HDR_SIZE, n);
	out->len += n;
	return 0;
}

void coll_lp_asm_end(lp_buf *out, uint64_t count)
{
	uint64_t c = count < LP_COUNT_UNKNOWN ? count : LP_COUNT_UNKNOWN;
	out->p[out->len++] = LP_EOF;
	lp_u32_write(out->p, (uint32_t)out->len);
	out->p[4] = (uint8_t)c;
	out->p[5] = (uint8_t)(c >> 8);
}
