/*
 * listpack.c - Redis 7.0's listpack (listpack.h has the byte layout), read and written in place.
 *
 * Sections: encoding (ints, string headers, backlens), buffers, reading, validation, writing.
 *
 * Design notes:
 *  1. Byte compatibility is the point: a small hash, list, zset or set is stored as the listpack
 *     redis-server would hold, so that DUMP is a copy. So every choice Redis makes is made here
 *     the same way: the narrowest int encoding for any string string2ll takes (lpEncodeGetType),
 *     the backlen widths with Redis's strict upper bounds (an entry of 16383 bytes takes a 3-byte
 *     backlen, lpEncodeBacklen's "l < 16383"), the header count kept while below 65535 and left
 *     at 65535 ("unknown") once it gets there, even when deletions bring the count back down.
 *  2. Reading trusts the bytes: lp_next / lp_prev / lp_get do no bounds checks, as Redis's do
 *     not. Untrusted bytes (RESTORE, a record read back from disk) go through
 *     lp_validate(deep = true) first, which checks with offsets, not pointers, against the
 *     length it was given, so it never reads outside it and never forms an out-of-range pointer.
 *  3. Writes go through one splice (lp_splice): replace `del` bytes at an offset with one
 *     encoded entry (or none), grow the buffer first, move the tail, fix the header. Entries are
 *     named by offsets because the buffer may move; a caller's string that points into the
 *     buffer itself (moving an element inside one listpack) is copied before the move.
 *  4. The buffer never shrinks on deletion (Redis's lpShrinkToFit is an allocator detail: the
 *     bytes are the same); the record writer copies len bytes.
 *  5. Planned edits (lp_edit) are the same splices split in two halves, so that a collection
 *     record can be changed where it lies: the plan reads the old bytes and encodes the new
 *     entries (lp_entry_encode: ent_from_str's choice), the apply writes them, either as one copy
 *     of the old bytes with the change, or over the old bytes moving only the kept runs that
 *     shift. Two splices are enough for every edit at the ends (a push or pop: one; a rotation
 *     of one list: a removal at one end and an insertion at the other). The header's count moves
 *     per splice in the order the plan added them, as the sequence of lp_* writes would move it.
 */
#include "coll/listpack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"

/* ---- encoding ---- */

#define ENC_13BIT_INT 0xC0
#define ENC_12BIT_STR 0xE0
#define ENC_32BIT_STR 0xF0
#define ENC_16BIT_INT 0xF1
#define ENC_24BIT_INT 0xF2
#define ENC_32BIT_INT 0xF3
#define ENC_64BIT_INT 0xF4
/* An encoded int entry is at most 9 bytes, a string header 5, a backlen 5. */
#define ENC_MAX_HDR 9
#define BACKLEN_MAX 5

#define rd_u32 lp_u32
#define wr_u32 lp_u32_write

static inline uint32_t hdr_count(const uint8_t *lp) { return (uint32_t)lp[4] | (uint32_t)lp[5] << 8; }

static inline void set_hdr(uint8_t *lp, uint32_t bytes, uint32_t count)
{
	wr_u32(lp, bytes);
	lp[4] = (uint8_t)count;
	lp[5] = (uint8_t)(count >> 8);
}

/* The narrowest encoding of v (lpEncodeGetType's int branch), written at out; its length. */
static size_t enc_int(int64_t v, uint8_t *out)
{
	uint64_t u = (uint64_t)v;
	size_t n, i;

	if (v >= 0 && v <= 127) {
		out[0] = (uint8_t)v;
		return 1;
	}
	if (v >= -4096 && v <= 4095) {
		u &= 0x1FFF;
		out[0] = (uint8_t)(ENC_13BIT_INT | (u >> 8));
		out[1] = (uint8_t)u;
		return 2;
	}
	if (v >= -32768 && v <= 32767) {
		out[0] = ENC_16BIT_INT;
		n = 2;
	} else if (v >= -8388608 && v <= 8388607) {
		out[0] = ENC_24BIT_INT;
		n = 3;
	} else if (v >= INT32_MIN && v <= INT32_MAX) {
		out[0] = ENC_32BIT_INT;
		n = 4;
	} else {
		out[0] = ENC_64BIT_INT;
		n = 8;
	}
	for (i = 0; i < n; i++)
		out[1 + i] = (uint8_t)(u >> (8 * i));
	return 1 + n;
}

/* The header of a string entry of len bytes (lpEncodeString), written at out; its length. */
static size_t enc_str_hdr(size_t len, uint8_t *out)
{
	if (len < 64) {
		out[0] = (uint8_t)(0x80 | len);
		return 1;
	}
	if (len < 4096) {
		out[0] = (uint8_t)(ENC_12BIT_STR | (len >> 8));
		out[1] = (uint8_t)len;
		return 2;
	}
	out[0] = ENC_32BIT_STR;
	wr_u32(out + 1, (uint32_t)len);
	return 5;
}

/* Bytes of the backlen for an entry of l bytes (lpEncodeBacklen, bounds as Redis: note 1). */
static inline size_t backlen_size(uint64_t l)
{
	if (l <= 127)
		return 1;
	if (l < 16383)
		return 2;
	if (l < 2097151)
		return 3;
	if (l < 268435455)
		return 4;
	return 5;
}

/* Write l's backlen at out (n = backlen_size(l) bytes): the high 7-bit group at the lowest address,
 * every byte after it flagged with bit 7. */
static void backlen_write(uint8_t *out, uint64_t l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		out[n - 1 - i] = (uint8_t)((l & 127) | (i == n - 1 ? 0 : 128));
		l >>= 7;
	}
}

/* Decode the backlen whose last byte is at `last`, reading no lower than `floor`. UINT64_MAX when
 * it is malformed (over 5 bytes, or running past floor). Like lpDecodeBacklen it may read into
 * the entry's body when the flags say so (at most 5 bytes back from `last`, which after the
 * header's 6 bytes and the entry's first byte stays inside the listpack); Redis accepts such an
 * entry when the value still matches, and so does lp_validate. */
static uint64_t backlen_read(const uint8_t *last, const uint8_t *floor)
{
	uint64_t v = 0;
	unsigned shift = 0;

	for (;;) {
		v |= (uint64_t)(*last & 127) << shift;
		if (!(*last & 128))
			return v;
		shift += 7;
		if (shift > 28 || last == floor)
			return UINT64_MAX;
		last--;
	}
}

/* Bytes of an entry's encoding and length fields alone, from its first byte; 0 when invalid
 * (lpCurrentEncodedSizeBytes). 0xFF counts 1 as in Redis. */
static inline size_t enc_hdr_size(uint8_t b)
{
	if (b < 0xC0 || (b & 0xE0) == ENC_13BIT_INT || (b >= ENC_16BIT_INT && b <= ENC_64BIT_INT) || b == LP_EOF)
		return 1;
	if ((b & 0xF0) == ENC_12BIT_STR)
		return 2;
	if (b == ENC_32BIT_STR)
		return 5;
	return 0;
}

/* Bytes of the entry at p without its backlen (lpCurrentEncodedSizeUnsafe): reads up to
 * enc_hdr_size(p[0]) bytes. 0 for an invalid encoding. */
static uint64_t entry_size(const uint8_t *p)
{
	uint8_t b = p[0];

	if (b < 0x80)
		return 1;
	if (b < 0xC0)
		return 1 + (uint64_t)(b & 0x3F);
	if (b < 0xE0)
		return 2;
	if (b < 0xF0)
		return 2 + ((uint64_t)(b & 0x0F) << 8 | p[1]);
	switch (b) {
	case ENC_32BIT_STR: return 5 + (uint64_t)rd_u32(p + 1);
	case ENC_16BIT_INT: return 3;
	case ENC_24BIT_INT: return 4;
	case ENC_32BIT_INT: return 5;
	case ENC_64BIT_INT: return 9;
	case LP_EOF: return 1;
	default: return 0;
	}
}

static inline uint64_t entry_total(const uint8_t *p)
{
	uint64_t n = entry_size(p);
	return n + backlen_size(n);
}

/* ---- buffers ---- */

int lp_buf_reserve(lp_buf *b, size_t need)
{
	size_t cap;
	uint8_t *p;

	if (need <= b->cap)
		return 0;
	cap = b->cap + b->cap / 2;
	if (cap < need)
		cap = need;
	if (cap < 64)
		cap = 64;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int lp_buf_init(lp_buf *b)
{
	b->p = NULL;
	b->len = b->cap = 0;
	if (lp_buf_reserve(b, LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	set_hdr(b->p, LP_EMPTY_BYTES, 0);
	b->p[LP_HDR_SIZE] = LP_EOF;
	b->len = LP_EMPTY_BYTES;
	return 0;
}

int lp_buf_from(lp_buf *b, const uint8_t *bytes, size_t len)
{
	b->p = NULL;
	b->len = b->cap = 0;
	if (lp_buf_reserve(b, len ? len : 1) < 0)
		return -ENOMEM;
	memcpy(b->p, bytes, len);
	b->len = len;
	return 0;
}

int lp_buf_set(lp_buf *b, const uint8_t *bytes, size_t len)
{
	if (lp_buf_reserve(b, len ? len : 1) < 0)
		return -ENOMEM;
	memcpy(b->p, bytes, len);
	b->len = len;
	return 0;
}

void lp_buf_free(lp_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- reading (trusts the bytes: note 2) ---- */

uint32_t lp_bytes(const uint8_t *lp) { return rd_u32(lp); }

uint32_t lp_count(const uint8_t *lp)
{
	uint32_t n = hdr_count(lp);
	const uint8_t *p;

	if (n != LP_COUNT_UNKNOWN)
		return n;
	n = 0;
	for (p = lp_first(lp); p; p = lp_next(lp, p))
		n++;
	return n;
}

const uint8_t *lp_first(const uint8_t *lp)
{
	return lp[LP_HDR_SIZE] == LP_EOF ? NULL : lp + LP_HDR_SIZE;
}

const uint8_t *lp_next(const uint8_t *lp, const uint8_t *p)
{
	(void)lp;
	p += entry_total(p);
	return *p == LP_EOF ? NULL : p;
}

/* p may be the end marker (lp_last). */
const uint8_t *lp_prev(const uint8_t *lp, const uint8_t *p)
{
	uint64_t n;

	if (p - lp == LP_HDR_SIZE)
		return NULL;
	n = backlen_read(p - 1, lp);
	return p - (n + backlen_size(n));
}

const uint8_t *lp_last(const uint8_t *lp) { return lp_prev(lp, lp + rd_u32(lp) - 1); }

/* lpSeek: from whichever end is nearer when the count is known, else forward for index >= 0 and
 * backward for index < 0. */
const uint8_t *lp_seek(const uint8_t *lp, long index)
{
	uint32_t n = hdr_count(lp);
	bool forward = index >= 0;
	const uint8_t *p;

	if (n != LP_COUNT_UNKNOWN) {
		if (index < 0)
			index += (long)n;
		if (index < 0 || index >= (long)n)
			return NULL;
		forward = index <= (long)n / 2;
		if (!forward)
			index -= (long)n;
	}
	if (forward) {
		for (p = lp_first(lp); p && index > 0; index--)
			p = lp_next(lp, p);
	} else {
		for (p = lp_last(lp); p && index < -1; index++)
			p = lp_prev(lp, p);
	}
	return p;
}

void lp_get(const uint8_t *p, lp_val *out)
{
	uint8_t b = p[0];
	uint64_t u;
	unsigned bits;

	out->s = NULL;
	out->len = 0;
	out->is_int = true;
	if (b < 0x80) {
		out->v = b;
		return;
	}
	if (b < 0xC0 || (b & 0xF0) == ENC_12BIT_STR || b == ENC_32BIT_STR) {
		size_t h = enc_hdr_size(b);
		out->is_int = false;
		out->len = (uint32_t)(entry_size(p) - h);
		out->s = p + h;
		out->v = 0;
		return;
	}
	if (b < 0xE0) {
		u = (uint64_t)(b & 0x1F) << 8 | p[1];
		bits = 13;
	} else if (b >= ENC_16BIT_INT && b <= ENC_64BIT_INT) {
		static const unsigned width[] = { 16, 24, 32, 64 };
		bits = width[b - ENC_16BIT_INT];
		u = 0;
		for (unsigned i = 0; i < bits / 8; i++)
			u |= (uint64_t)p[1 + i] << (8 * i);
	} else {
		/* An invalid encoding: lpGet's marker value (never seen after lp_validate). */
		out->v = (int64_t)(12345678900000000ULL + b);
		return;
	}
	/* Sign-extend the bits-wide two's complement value. */
	if (bits < 64 && (u >> (bits - 1)) & 1)
		u |= ~0ULL << bits;
	out->v = (int64_t)u;
}

const char *lp_val_str(const lp_val *v, char *buf, size_t *len)
{
	if (!v->is_int) {
		*len = v->len;
		return (const char *)v->s;
	}
	*len = spw_fmt_ll(buf, v->v);
	return buf;
}

const char *lp_entry_str(const uint8_t *p, char *buf, size_t *len)
{
	lp_val v;
	lp_get(p, &v);
	return lp_val_str(&v, buf, len);
}

/* The comparison behind lp_eq and lp_find; sv/s_is_int is s parsed once by the caller. */
static bool entry_eq(const uint8_t *p, const void *s, size_t len, bool s_is_int, long long sv)
{
	lp_val v;

	lp_get(p, &v);
	if (v.is_int)
		return s_is_int && v.v == sv;
	return v.len == len && memcmp(v.s, s, len) == 0;
}

bool lp_eq(const uint8_t *p, const void *s, size_t len)
{
	long long sv = 0;
	bool is_int;

	if (p[0] == LP_EOF)
		return false;
	is_int = spw_parse_ll(s, len, &sv);
	return entry_eq(p, s, len, is_int, sv);
}

/* Whether the short string (6/12-bit) entry whose bytes are d, n equals s, len: the last byte and
 * the first before memcmp (members that share a prefix, "f:000001234", differ at the end). */
static inline bool str_eq(const uint8_t *d, size_t n, const uint8_t *s, size_t len)
{
	return n == len && (len == 0 || (d[len - 1] == s[len - 1] && d[0] == s[0] && memcmp(d, s, len) == 0));
}

/* The walk decodes the common encodings inline (7-bit and 13-bit ints, 6-bit and 12-bit strings:
 * every entry of a bucket of short members) and leaves the others to entry_eq; an int entry is
 * only decoded when s is an int. The same answer as entry_eq on every entry. */
const uint8_t *lp_find(const uint8_t *lp, const uint8_t *p, const void *s, size_t len, unsigned skip)
{
	long long sv = 0;
	bool is_int = spw_parse_ll(s, len, &sv);
	const uint8_t *sb = s;
	unsigned left = 0;
	uint64_t n;

	(void)lp;
	if (!p)
		return NULL;
	for (uint8_t b; (b = p[0]) != LP_EOF; p += n + (n < 128 ? 1 : backlen_size(n))) {
		if (b >= 0x80 && b < 0xC0) {   /* a 6-bit string: most members and values */
			n = 1 + (uint64_t)(b & 0x3F);
			if (!left && n - 1 == len && str_eq(p + 1, len, sb, len))
				return p;
		} else if (b < 0x80) {
			n = 1;
			if (!left && is_int && sv == b)
				return p;
		} else if (b < 0xE0) {
			n = 2;
			if (!left && is_int && entry_eq(p, s, len, is_int, sv))
				return p;
		} else if (b < 0xF0) {
			n = 2 + ((uint64_t)(b & 0x0F) << 8 | p[1]);
			if (!left && str_eq(p + 2, n - 2, sb, len))
				return p;
		} else {
			n = entry_size(p);
			if (!left && entry_eq(p, s, len, is_int, sv))
				return p;
		}
		left = left ? left - 1 : skip;
	}
	return NULL;
}

/* ---- validation (offsets only: note 2) ---- */

/* Check the entry at *pos (not the end marker, pos < len - 1) and move *pos past it
 * (lpValidateNext): its header and its body with backlen end before the last byte, and the
 * backlen says the body's size. */
static bool validate_entry(const uint8_t *lp, size_t len, size_t *pos)
{
	size_t at = *pos, h = enc_hdr_size(lp[at]), end = len - 1;
	uint64_t n, total;

	if (!h || h > end - at)
		return false;
	n = entry_size(lp + at);
	total = n + backlen_size(n);
	if (total > end - at)
		return false;
	if (backlen_read(lp + at + total - 1, lp) != n)
		return false;
	*pos = at + (size_t)total;
	return true;
}

bool lp_validate(const uint8_t *lp, size_t len, bool deep, lp_entry_cb entry_cb, void *arg)
{
	size_t pos = LP_HDR_SIZE;
	uint32_t count = 0, head;

	if (len < LP_EMPTY_BYTES || rd_u32(lp) != len || lp[len - 1] != LP_EOF)
		return false;
	if (!deep)
		return true;
	head = hdr_count(lp);
	while (lp[pos] != LP_EOF) {
		size_t at = pos;
		if (!validate_entry(lp, len, &pos))
			return false;
		if (entry_cb && !entry_cb(lp + at, head, arg))
			return false;
		count++;
	}
	if (pos != len - 1)
		return false;
	return head == LP_COUNT_UNKNOWN || head == count;
}

/* ---- writing ---- */

/* One encoded entry to write: hdr (the whole entry for an int), then data bytes. */
struct lp_ent {
	uint8_t hdr[ENC_MAX_HDR];
	size_t hlen;
	const void *data;
	size_t dlen;
};

static void ent_from_int(struct lp_ent *e, int64_t v)
{
	e->hlen = enc_int(v, e->hdr);
	e->data = NULL;
	e->dlen = 0;
}

/* s as Redis stores it: an int when string2ll takes it, else a string (lpEncodeGetType). */
static void ent_from_str(struct lp_ent *e, const void *s, size_t len)
{
	long long v;

	if (spw_parse_ll(s, len, &v)) {
		ent_from_int(e, v);
		return;
	}
	e->hlen = enc_str_hdr(len, e->hdr);
	e->data = s;
	e->dlen = len;
}

/* Replace del bytes at off with e (NULL: nothing), the header's count moving by dcount unless
 * it says unknown (note 1). Note 3. */
static int lp_splice(lp_buf *b, size_t off, size_t del, const struct lp_ent *e, int dcount)
{
	size_t body = e ? e->hlen + e->dlen : 0, bl = e ? backlen_size(body) : 0;
	size_t add = body + bl, old = b->len, nlen = old - del + add;
	uint8_t *copy = NULL;
	const void *data = e ? e->data : NULL;
	uint32_t count;

	if (nlen > LP_MAX_BYTES)
		return -E2BIG;
	if (data && e->dlen && (const uint8_t *)data >= b->p && (const uint8_t *)data < b->p + b->cap) {
		copy = malloc(e->dlen);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, data, e->dlen);
		data = copy;
	}
	if (lp_buf_reserve(b, nlen) < 0) {
		free(copy);
		return -ENOMEM;
	}
	memmove(b->p + off + add, b->p + off + del, old - off - del);
	if (e) {
		memcpy(b->p + off, e->hdr, e->hlen);
		if (e->dlen)
			memcpy(b->p + off + e->hlen, data, e->dlen);
		backlen_write(b->p + off + body, body, bl);
	}
	free(copy);
	count = hdr_count(b->p);
	if (count != LP_COUNT_UNKNOWN)
		count = (uint32_t)((int64_t)count + dcount);
	set_hdr(b->p, (uint32_t)nlen, count);
	b->len = nlen;
	return 0;
}

/* Insert e before / after the entry at off (off may be the end marker for LP_BEFORE). */
static int insert_ent(lp_buf *b, size_t off, int where, const struct lp_ent *e, size_t *newoff)
{
	int rc;

	if (where == LP_AFTER)
		off += (size_t)entry_total(b->p + off);
	rc = lp_splice(b, off, 0, e, 1);
	if (rc == 0 && newoff)
		*newoff = off;
	return rc;
}

int lp_append(lp_buf *b, const void *s, size_t len)
{
	struct lp_ent e;
	ent_from_str(&e, s, len);
	return insert_ent(b, b->len - 1, LP_BEFORE, &e, NULL);
}

int lp_prepend(lp_buf *b, const void *s, size_t len)
{
	struct lp_ent e;
	ent_from_str(&e, s, len);
	return insert_ent(b, LP_HDR_SIZE, LP_BEFORE, &e, NULL);
}

int lp_append_int(lp_buf *b, int64_t v)
{
	struct lp_ent e;
	ent_from_int(&e, v);
	return insert_ent(b, b->len - 1, LP_BEFORE, &e, NULL);
}

int lp_insert(lp_buf *b, size_t off, int where, const void *s, size_t len, size_t *newoff)
{
	struct lp_ent e;
	ent_from_str(&e, s, len);
	return insert_ent(b, off, where, &e, newoff);
}

int lp_insert_int(lp_buf *b, size_t off, int where, int64_t v, size_t *newoff)
{
	struct lp_ent e;
	ent_from_int(&e, v);
	return insert_ent(b, off, where, &e, newoff);
}

int lp_replace(lp_buf *b, size_t off, const void *s, size_t len)
{
	struct lp_ent e;
	ent_from_str(&e, s, len);
	return lp_splice(b, off, (size_t)entry_total(b->p + off), &e, 0);
}

int lp_replace_int(lp_buf *b, size_t off, int64_t v)
{
	struct lp_ent e;
	ent_from_int(&e, v);
	return lp_splice(b, off, (size_t)entry_total(b->p + off), &e, 0);
}

int lp_delete_range(lp_buf *b, size_t off, size_t count)
{
	size_t end = off;
	int n = 0;

	while ((size_t)n < count && b->p[end] != LP_EOF) {
		end += (size_t)entry_total(b->p + end);
		n++;
	}
	if (n == 0)
		return 0;
	lp_splice(b, off, end - off, NULL, -n);   /* shrinks: cannot fail */
	return n;
}

int lp_delete_range_index(lp_buf *b, long start, size_t count)
{
	const uint8_t *p = count ? lp_seek(b->p, start) : NULL;

	return p ? lp_delete_range(b, lp_off(b, p), count) : 0;
}

/* ---- planned edits (note 5) ---- */

size_t lp_entry_size(const uint8_t *p) { return (size_t)entry_total(p); }

size_t lp_entry_encode(uint8_t *out, const void *s, size_t len)
{
	struct lp_ent e;
	ent_from_str(&e, s, len);
	size_t body = e.hlen + e.dlen, bl = backlen_size(body);
	memcpy(out, e.hdr, e.hlen);
	if (e.dlen)
		memcpy(out + e.hlen, e.data, e.dlen);
	backlen_write(out + body, body, bl);
	return body + bl;
}

void lp_edit_init(lp_edit *e, const uint8_t *lp)
{
	e->n = 0;
	e->old_len = e->new_len = rd_u32(lp);
	e->count = hdr_count(lp);
}

int lp_edit_splice(lp_edit *e, size_t off, size_t del, const uint8_t *ins, size_t ins_len, long dcount)
{
	lp_span sp = { off, del, ins, ins_len };
	size_t nlen = e->new_len - del + ins_len;

	if (nlen > LP_MAX_BYTES)
		return -E2BIG;
	if (e->n == 1 && (off < e->s[0].off || (off == e->s[0].off && del == 0))) {
		e->s[1] = e->s[0];
		e->s[0] = sp;
	} else {
		e->s[e->n] = sp;
	}
	e->n++;
	e->new_len = nlen;
	if (e->count != LP_COUNT_UNKNOWN) {
		long c = (long)e->count + dcount;
		e->count = c >= (long)LP_COUNT_UNKNOWN ? LP_COUNT_UNKNOWN : (uint32_t)c;
	}
	return 0;
}

/* In place: the kept run [from, to) of the old bytes moves by shift. */
static inline void run_move(uint8_t *p, size_t from, size_t to, long shift)
{
	if (shift && to > from)
		memmove(p + (long)from + shift, p + from, to - from);
}

void lp_edit_apply(const lp_edit *e, const uint8_t *old, uint8_t *dst, bool in_place)
{
	const lp_span *a = &e->s[0], *b = &e->s[1];

	if (!in_place) {
		size_t pos = 0, at = 0;
		for (int i = 0; i < e->n; i++) {
			memcpy(dst + at, old + pos, e->s[i].off - pos);
			at += e->s[i].off - pos;
			if (e->s[i].ins_len)
				memcpy(dst + at, e->s[i].ins, e->s[i].ins_len);
			at += e->s[i].ins_len;
			pos = e->s[i].off + e->s[i].del;
		}
		memcpy(dst + at, old + pos, e->old_len - pos);
	} else if (e->n == 1) {
		run_move(dst, a->off + a->del, e->old_len, (long)a->ins_len - (long)a->del);
		if (a->ins_len)
			memcpy(dst + a->off, a->ins, a->ins_len);
	} else if (e->n == 2) {
		/* The run between the splices moves by d1, the run after both by d1 + d2. When the
		 * middle run moves right the last one goes first (its destination starts at
		 * b->off + d1 + b->ins_len > b->off, past the middle run's source); when it moves left
		 * (or stays) it goes first (its destination ends at b->off + d1 <= b->off, before the
		 * last run's source). */
		long d1 = (long)a->ins_len - (long)a->del, d2 = (long)b->ins_len - (long)b->del;
		if (d1 > 0) {
			run_move(dst, b->off + b->del, e->old_len, d1 + d2);
			run_move(dst, a->off + a->del, b->off, d1);
		} else {
			run_move(dst, a->off + a->del, b->off, d1);
			run_move(dst, b->off + b->del, e->old_len, d1 + d2);
		}
		if (a->ins_len)
			memcpy(dst + a->off, a->ins, a->ins_len);
		if (b->ins_len)
			memcpy(dst + (long)b->off + d1, b->ins, b->ins_len);
	}
	set_hdr(dst, (uint32_t)e->new_len, e->count);
}
