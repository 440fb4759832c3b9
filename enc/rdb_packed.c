/*
 * rdb_packed.c - walks over the packed encodings an RDB value may hold: ziplist and zipmap (the old
 * formats, only read here, so parsed here), listpack and intset (coll/'s validation and iterators).
 *
 * Design notes:
 *  1. Input is hostile (a RESTORE payload is whatever a client sends): the header's byte count must
 *     equal the blob's, every entry's header and body must end before the terminator, and the
 *     walk must end exactly on it. A violation is SPW_E_CORRUPT; nothing is read out of bounds.
 *  2. The element counts in the headers are checked against the walk when they can be (a ziplist's
 *     and listpack's 16-bit count when below its saturation value, an intset's always), as Redis's
 *     deep integrity check does; the walk's own count is returned.
 *  3. Integer entries are handed to fn as their decimal text (what the commands see); a ziplist's
 *     prev lengths are checked against the entry before, as Redis's validation (coll/'s
 *     lp_validate checks a listpack's back lengths).
 */
#include "enc/rdb.h"
#include "common/spw.h"
#include "coll/intset.h"
#include "coll/listpack.h"

#include <string.h>

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int64_t sext(uint64_t v, int bits)
{
	uint64_t m = 1ULL << (bits - 1);
	if (bits == 64)
		return (int64_t)v;
	v &= (1ULL << bits) - 1;
	return (int64_t)((v ^ m) - m);
}

static int emit_int(rdb_elem_fn fn, void *ctx, int64_t v)
{
	char buf[24];
	size_t n = spw_fmt_ll(buf, v);
	return fn ? fn(ctx, (const uint8_t *)buf, n) : 0;
}

/* ---------------- ziplist ---------------- */

/* One ziplist entry at p (end = the terminator's address): its total size into *size, its
 * string or integer handed to fn. 0 or SPW_E_CORRUPT. */
static int zl_entry(const uint8_t *p, const uint8_t *end, uint32_t prev_size, rdb_elem_fn fn, void *ctx,
	size_t *size)
{
	size_t room = (size_t)(end - p), h;
	uint32_t prevlen;
	if (room < 2)
		return SPW_E_CORRUPT;
	if (p[0] < 254) {
		prevlen = p[0];
		h = 1;
	} else if (p[0] == 254 && room >= 5) {
		prevlen = (uint32_t)le(p + 1, 4);
		h = 5;
	} else {
		return SPW_E_CORRUPT;
	}
	if (prevlen != prev_size || room <= h)
		return SPW_E_CORRUPT;
	uint8_t e = p[h];
	size_t slen = 0, ilen = 0;
	int64_t v = 0;
	switch (e >> 6) {
	case 0: slen = e & 0x3f; h += 1; break;
	case 1:
		if (room < h + 2)
			return SPW_E_CORRUPT;
		slen = (size_t)(e & 0x3f) << 8 | p[h + 1];
		h += 2;
		break;
	case 2:
		if (e != 0x80 || room < h + 5)
			return SPW_E_CORRUPT;
		slen = (size_t)p[h + 1] << 24 | (size_t)p[h + 2] << 16 | (size_t)p[h + 3] << 8 | p[h + 4];
		h += 5;
		break;
	default:
		h += 1;
		if (e == 0xc0) ilen = 2;
		else if (e == 0xd0) ilen = 4;
		else if (e == 0xe0) ilen = 8;
		else if (e == 0xf0) ilen = 3;
		else if (e == 0xfe) ilen = 1;
		else if (e >= 0xf1 && e <= 0xfd) v = (e & 0x0f) - 1;
		else return SPW_E_CORRUPT;
		if (room < h + ilen)
			return SPW_E_CORRUPT;
		if (ilen)
			v = sext(le(p + h, (int)ilen), (int)ilen * 8);
		*size = h + ilen;
		return emit_int(fn, ctx, v);
	}
	if (room < h || slen > room - h)
		return SPW_E_CORRUPT;
	*size = h + slen;
	return fn ? fn(ctx, p + h, slen) : 0;
}

int rdb_ziplist_walk(const uint8_t *zl, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count)
{
	if (n < 11 || le(zl, 4) != n || zl[n - 1] != 0xff || le(zl + 4, 4) > n - 1)
		return SPW_E_CORRUPT;
	uint32_t zllen = (uint32_t)le(zl + 8, 2), prev = 0;
	const uint8_t *p = zl + 10, *end = zl + n - 1, *last = NULL;
	uint64_t k = 0;
	while (p < end) {
		size_t sz;
		int rc = zl_entry(p, end, prev, fn, ctx, &sz);
		if (rc < 0)
			return rc;
		last = p;
		prev = (uint32_t)sz;
		p += sz;
		k++;
	}
	if (p != end || (zllen != UINT16_MAX && zllen != k))
		return SPW_E_CORRUPT;
	if ((last ? (size_t)(last - zl) : 10) != le(zl + 4, 4))   /* zltail names the last entry */
		return SPW_E_CORRUPT;
	*count = k;
	return 0;
}

/* ---------------- zipmap ---------------- */

/* A zipmap length at *p: 0-253 in one byte, 254 then 4 bytes LE; 255 is the end. */
static int zm_len(const uint8_t **p, const uint8_t *end, size_t *len)
{
	if (*p >= end)
		return SPW_E_CORRUPT;
	if (**p < 254) {
		*len = *(*p)++;
		return 0;
	}
	if (**p == 255 || end - *p < 5)
		return SPW_E_CORRUPT;
	*len = (size_t)le(*p + 1, 4);
	*p += 5;
	return 0;
}

int rdb_zipmap_walk(const uint8_t *zm, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *pairs)
{
	if (n < 2 || zm[n - 1] != 0xff)
		return SPW_E_CORRUPT;
	const uint8_t *p = zm + 1, *end = zm + n - 1;
	uint64_t k = 0;
	int rc;
	while (p < end) {
		size_t klen, vlen;
		if ((rc = zm_len(&p, end, &klen)) < 0 || klen > (size_t)(end - p))
			return SPW_E_CORRUPT;
		if (fn && (rc = fn(ctx, p, klen)) < 0)
			return rc;
		p += klen;
		if ((rc = zm_len(&p, end, &vlen)) < 0 || p >= end)
			return SPW_E_CORRUPT;
		size_t fr = *p++;   /* the free bytes after the value */
		if (vlen > (size_t)(end - p) || fr > (size_t)(end - p) - vlen)
			return SPW_E_CORRUPT;
		if (fn && (rc = fn(ctx, p, vlen)) < 0)
			return rc;
		p += vlen + fr;
		k++;
	}
	if (zm[0] < 254 && zm[0] != k)
		return SPW_E_CORRUPT;
	*pairs = k;
	return 0;
}

/* ---------------- listpack and intset: coll/'s (validated deep first) ---------------- */

int rdb_listpack_walk(const uint8_t *lp, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count)
{
	if (!lp_validate(lp, n, true, NULL, NULL))
		return SPW_E_CORRUPT;
	uint64_t k = 0;
	for (const uint8_t *e = lp_first(lp); e; e = lp_next(lp, e), k++) {
		lp_val v;
		char buf[LP_INTBUF_SIZE];
		size_t len;
		lp_get(e, &v);
		const char *s = lp_val_str(&v, buf, &len);
		int rc = fn ? fn(ctx, (const uint8_t *)s, len) : 0;
		if (rc < 0)
			return rc;
	}
	*count = k;
	return 0;
}

/* is_validate refuses an empty intset, as Redis does: the caller's "empty key" is then corrupt. */
int rdb_intset_walk(const uint8_t *is, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count)
{
	if (!is_validate(is, n, true))
		return SPW_E_CORRUPT;
	uint32_t len = is_len(is);
	for (uint32_t i = 0; i < len; i++) {
		int64_t v;
		is_get(is, i, &v);
		int rc = emit_int(fn, ctx, v);
		if (rc < 0)
			return rc;
	}
	*count = len;
	return 0;
}
