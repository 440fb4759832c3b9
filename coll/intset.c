/*
 * intset.c - Redis's intset (intset.h has the layout), in an lp_buf.
 *
 * Design notes:
 *  1. The same operations as Redis's intset.c give the same bytes: an add that needs a wider
 *     encoding rewrites every int at the new width back to front, then puts the new int first
 *     (it is negative, so below all) or last (above all), as intsetUpgradeAndAdd; otherwise a
 *     binary search finds the slot and the tail moves up one int.
 *  2. Ints are read and written byte by byte, little-endian, so the code is the same on any
 *     host and never does an unaligned access (a record's value has no alignment promise).
 *  3. is_validate works on the length it is given, with 64-bit arithmetic for
 *     8 + length * encoding, so a hostile header cannot wrap the size check.
 */
#include "coll/intset.h"

#include <errno.h>
#include <string.h>

static inline uint32_t rd_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void wr_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t is_enc(const uint8_t *is) { return rd_u32(is); }

/* The width an int needs (_intsetValueEncoding). */
static inline uint32_t value_enc(int64_t v)
{
	if (v < INT32_MIN || v > INT32_MAX)
		return 8;
	if (v < INT16_MIN || v > INT16_MAX)
		return 4;
	return 2;
}

/* The int at index i stored at width enc (note 2). */
static int64_t get_enc(const uint8_t *is, uint32_t i, uint32_t enc)
{
	const uint8_t *p = is + IS_HDR_SIZE + (size_t)i * enc;
	uint64_t u = 0;

	for (uint32_t k = 0; k < enc; k++)
		u |= (uint64_t)p[k] << (8 * k);
	if (enc < 8 && (u >> (enc * 8 - 1)) & 1)
		u |= ~0ULL << (enc * 8);
	return (int64_t)u;
}

static void set_enc(uint8_t *is, uint32_t i, uint32_t enc, int64_t v)
{
	uint8_t *p = is + IS_HDR_SIZE + (size_t)i * enc;
	uint64_t u = (uint64_t)v;

	for (uint32_t k = 0; k < enc; k++)
		p[k] = (uint8_t)(u >> (8 * k));
}

/* intsetSearch: true and the index of v, or false and where it would go. */
static bool search(const uint8_t *is, int64_t v, uint32_t *pos /* out */)
{
	uint32_t n = is_len(is), enc = is_enc(is), lo = 0, hi = n;

	if (n == 0 || v > get_enc(is, n - 1, enc)) {
		*pos = n;
		return false;
	}
	if (v < get_enc(is, 0, enc)) {
		*pos = 0;
		return false;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int64_t cur = get_enc(is, mid, enc);
		if (cur == v) {
			*pos = mid;
			return true;
		}
		if (cur < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	*pos = lo;
	return false;
}

int is_init(lp_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
	if (lp_buf_reserve(b, IS_HDR_SIZE) < 0)
		return -ENOMEM;
	wr_u32(b->p, 2);
	wr_u32(b->p + 4, 0);
	b->len = IS_HDR_SIZE;
	return 0;
}

/* Note 1: rewrite at newenc back to front, leaving room first (v < 0) or last. */
static void upgrade_and_add(lp_buf *b, uint32_t newenc, int64_t v)
{
	uint32_t n = is_len(b->p), oldenc = is_enc(b->p), prepend = v < 0;

	for (uint32_t i = n; i-- > 0;)
		set_enc(b->p, i + prepend, newenc, get_enc(b->p, i, oldenc));
	set_enc(b->p, prepend ? 0 : n, newenc, v);
	wr_u32(b->p, newenc);
}

int is_add(lp_buf *b, int64_t v, bool *added)
{
	uint32_t n = is_len(b->p), enc = is_enc(b->p), venc = value_enc(v), pos = 0;
	uint64_t need;

	if (added)
		*added = false;
	if (venc <= enc && search(b->p, v, &pos))
		return 0;
	if (venc < enc)
		venc = enc;
	need = IS_HDR_SIZE + ((uint64_t)n + 1) * venc;
	if (n == UINT32_MAX || need > SIZE_MAX)
		return -E2BIG;
	if (lp_buf_reserve(b, (size_t)need) < 0)
		return -ENOMEM;
	if (venc > enc) {
		upgrade_and_add(b, venc, v);
	} else {
		uint8_t *at = b->p + IS_HDR_SIZE + (size_t)pos * enc;
		memmove(at + enc, at, (size_t)(n - pos) * enc);
		set_enc(b->p, pos, enc, v);
	}
	wr_u32(b->p + 4, n + 1);
	b->len = (size_t)need;
	if (added)
		*added = true;
	return 0;
}

int is_remove(lp_buf *b, int64_t v, bool *removed)
{
	uint32_t n = is_len(b->p), enc = is_enc(b->p), pos;
	uint8_t *at;

	if (removed)
		*removed = false;
	if (value_enc(v) > enc || !search(b->p, v, &pos))
		return 0;
	at = b->p + IS_HDR_SIZE + (size_t)pos * enc;
	memmove(at, at + enc, (size_t)(n - pos - 1) * enc);
	wr_u32(b->p + 4, n - 1);
	b->len -= enc;
	if (removed)
		*removed = true;
	return 0;
}

bool is_find(const uint8_t *is, int64_t v)
{
	uint32_t pos;
	return value_enc(v) <= is_enc(is) && search(is, v, &pos);
}

bool is_get(const uint8_t *is, uint32_t idx, int64_t *out)
{
	if (idx >= is_len(is))
		return false;
	*out = get_enc(is, idx, is_enc(is));
	return true;
}

uint32_t is_len(const uint8_t *is) { return rd_u32(is + 4); }

size_t is_bytes(const uint8_t *is) { return IS_HDR_SIZE + (size_t)is_len(is) * is_enc(is); }

bool is_validate(const uint8_t *is, size_t len, bool deep)
{
	uint32_t enc, n;
	int64_t prev;

	if (len < IS_HDR_SIZE)
		return false;
	enc = is_enc(is);
	if (enc != 2 && enc != 4 && enc != 8)
		return false;
	n = is_len(is);
	if ((uint64_t)IS_HDR_SIZE + (uint64_t)n * enc != (uint64_t)len || n == 0)
		return false;
	if (!deep)
		return true;
	prev = get_enc(is, 0, enc);
	for (uint32_t i = 1; i < n; i++) {
		int64_t cur = get_enc(is, i, enc);
		if (cur <= prev)
			return false;
		prev = cur;
	}
	return true;
}
