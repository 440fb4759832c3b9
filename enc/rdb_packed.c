/*
 * rdb_packed.c - walks over the packed encodings an RDB value may hold: ziplist and zipmap (the old
 * formats, only read here), listpack and intset (read here for decoding; coll/ owns writing them).
 *
 * Design notes:
 *  1. Input is hostile (a RESTORE payload is whatever a client sends): the header's byte count must
 *     equal the blob's, every entry's header and body must end before the terminator, and the
 *     walk must end exactly on it. A violation is SPW_E_CORRUPT; nothing is read out of bounds.
 *  2. The element counts in the headers are checked against the walk when they can be (a ziplist's
 *     and listpack's 16-bit count when below its saturation value, an intset's always), as Redis's
 *     deep integrity check does; the walk's own count is returned.
 *  3. Integer entries are handed to fn as their decimal text (what the commands see); a listpack's
 *     or ziplist's back/prev lengths are checked against the entry before, as Redis's validation.
 */
#include "enc/rdb.h"
#include "common/spw.h"

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

/* ---------------- listpack ---------------- */

static size_t lp_backlen_size(size_t l)
{
	return l < 128 ? 1 : l < 16384 ? 2 : l < 2097152 ? 3 : l < 268435456 ? 4 : 5;
}

/* The back length stored after an entry: 7 bits a byte, read from its last byte backwards. */
static uint64_t lp_backlen_decode(const uint8_t *p, size_t sz)
{
	uint64_t v = 0;
	for (size_t i = 0; i < sz; i++)
		v |= (uint64_t)(p[sz - 1 - i] & 127) << (7 * i);
	return v;
}

static int lp_entry(const uint8_t *p, size_t room, rdb_elem_fn fn, void *ctx, size_t *size)
{
	uint8_t e = p[0];
	size_t h = 1, slen = 0, ilen = 0;
	int64_t v = 0;
	bool is_str = false;
	if ((e & 0x80) == 0) {
		v = e & 0x7f;
	} else if ((e & 0xc0) == 0x80) {
		slen = e & 0x3f;
		is_str = true;
	} else if ((e & 0xe0) == 0xc0) {
		if (room < 2)
			return SPW_E_CORRUPT;
		v = sext((uint64_t)(e & 0x1f) << 8 | p[1], 13);
		h = 2;
	} else if ((e & 0xf0) == 0xe0) {
		if (room < 2)
			return SPW_E_CORRUPT;
		slen = (size_t)(e & 0x0f) << 8 | p[1];
		h = 2;
		is_str = true;
	} else if (e == 0xf0) {
		if (room < 5)
			return SPW_E_CORRUPT;
		slen = (size_t)le(p + 1, 4);
		h = 5;
		is_str = true;
	} else if (e >= 0xf1 && e <= 0xf4) {
		static const uint8_t w[] = { 2, 3, 4, 8 };
		ilen = w[e - 0xf1];
	} else {
		return SPW_E_CORRUPT;
	}
	if (room < h + ilen || (is_str && slen > room - h))
		return SPW_E_CORRUPT;
	if (ilen)
		v = sext(le(p + 1, (int)ilen), (int)ilen * 8);
	size_t body = h + (is_str ? slen : ilen), bl = lp_backlen_size(body);
	if (bl > room - body || lp_backlen_decode(p + body, bl) != body)
		return SPW_E_CORRUPT;
	*size = body + bl;
	if (is_str)
		return fn ? fn(ctx, p + h, slen) : 0;
	return emit_int(fn, ctx, v);
}

int rdb_listpack_walk(const uint8_t *lp, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count)
{
	if (n < 7 || le(lp, 4) != n || lp[n - 1] != 0xff)
		return SPW_E_CORRUPT;
	uint32_t num = (uint32_t)le(lp + 4, 2);
	const uint8_t *p = lp + 6, *end = lp + n - 1;
	uint64_t k = 0;
	while (p < end) {
		size_t sz;
		int rc = lp_entry(p, (size_t)(end - p), fn, ctx, &sz);
		if (rc < 0)
			return rc;
		p += sz;
		k++;
	}
	if (num != UINT16_MAX && num != k)
		return SPW_E_CORRUPT;
	*count = k;
	return 0;
}

/* ---------------- intset ---------------- */

int rdb_intset_walk(const uint8_t *is, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count)
{
	if (n < 8)
		return SPW_E_CORRUPT;
	uint32_t enc = (uint32_t)le(is, 4), len = (uint32_t)le(is + 4, 4);
	if ((enc != 2 && enc != 4 && enc != 8) || (uint64_t)len * enc + 8 != n)
		return SPW_E_CORRUPT;
	int64_t prev = 0;
	for (uint32_t i = 0; i < len; i++) {
		int64_t v = sext(le(is + 8 + (size_t)i * enc, (int)enc), (int)enc * 8);
		if (i && v <= prev)   /* sorted and unique, as intsetValidateIntegrity's deep check */
			return SPW_E_CORRUPT;
		prev = v;
		int rc = emit_int(fn, ctx, v);
		if (rc < 0)
			return rc;
	}
	*count = len;
	return 0;
}
