/*
 * coll.h - the value of a collection record: an 8-byte header, then the collection in Redis's own
 * byte format (docs/ARCHITECTURE.md "Collections", "Small collections: one record"). The layer's
 * public header; coll/listpack.h and coll/intset.h are the formats.
 *
 *   +0  u8  type      COLL_HASH, COLL_LIST, COLL_SET, COLL_ZSET; bit 7 (COLL_LARGE): a large
 *                     head (below), which coll_parse refuses: callers test coll_is_large first
 *   +1  u8  enc       what OBJECT ENCODING answers (CENC_*), moved by Redis 7.0's rules
 *   +2  u8  flags     COLL_F_COUNT: a u32 entry count (little-endian) follows the payload, at
 *                     +8+used: a list keeps its length there once its listpack's count says
 *                     unknown (65535), so that LLEN and a push's reply need no walk
 *   +3  u8  0         reserved
 *   +4  u32 used      bytes of the payload in use (little-endian)
 *   +8  payload       hash, zset: a listpack (field, value / member, score pairs); list: one
 *                     listpack; set: an intset (CENC_INTSET) or a listpack of members
 *
 * The record's value may be longer than 8 + used: the rest is capacity, so that a change that
 * grows the collection a little stays in place in the mutable region (same rounded record size,
 * log/ops.c note 3). Everything past 8 + used (and the count, when the flag says so) is ignored.
 */
#ifndef SPW_COLL_H
#define SPW_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "coll/listpack.h"

enum { COLL_HASH = 1, COLL_LIST = 2, COLL_SET = 3, COLL_ZSET = 4 };
#define COLL_LARGE 0x80u
/* Redis's object encodings, as OBJECT ENCODING names them. */
enum { CENC_LISTPACK = 1, CENC_INTSET = 2, CENC_QUICKLIST = 3, CENC_HASHTABLE = 4, CENC_SKIPLIST = 5 };

#define COLL_HDR 8u
/* The large layout's head (docs/ARCHITECTURE.md "Large collections"): the header with type |
 * COLL_LARGE and used = 40, then (little-endian)
 *   +8  u64 cid       the collection id: its parts' internal keys start with it (coll/bucket.h)
 *   +16 u64 count     members (a hash's fields)
 *   +24 u64 mbytes    bytes of its parts' values
 *   +32 u8  level     linear hashing's i: a member goes to h mod 2^i, or to h mod 2^(i+1) when
 *                     that is below the split pointer (h: XXH3 of the member seeded by cid)
 *   +40 u64 split     the split pointer, below 2^level
 * A hash's or set's members live in bucket parts, each a listpack of the small layout's entries.
 * Every large head, whatever its type, starts with these 48 bytes (a list's level and split are
 * 0; a zset's are its member -> score buckets'); a list's or zset's own fields follow (used >
 * 40), so that TYPE, OBJECT ENCODING, MEMORY USAGE and compaction's liveness rule read any type. */
#define COLL_LARGE_HDR 48u
typedef struct coll_head {
	int type, enc;
	uint64_t cid, count, mbytes;
	unsigned level;
	uint64_t split;
} coll_head;
#define COLL_F_COUNT 0x01u
#define COLL_COUNT_BYTES 4u

typedef struct coll_view {
	int type;                 /* COLL_* */
	int enc;                  /* CENC_* */
	const uint8_t *p;         /* the payload */
	size_t used;
	int64_t count;            /* the entry count after the payload (COLL_F_COUNT), or -1 */
	const struct coll_head *large; /* a large collection's head (the payload: some or all of its
	                                * buckets assembled, server/coll_large.c), or NULL */
} coll_view;

/* Parse a collection record's value. false when it is not one (too short, bad type or encoding,
 * used past the value's end): the caller treats the record as corrupt. */
static inline bool coll_parse(const uint8_t *v, size_t len, coll_view *out)
{
	if (len < COLL_HDR)
		return false;
	uint32_t used = lp_u32(v + 4);
	if (v[0] < COLL_HASH || v[0] > COLL_ZSET || v[1] < CENC_LISTPACK || v[1] > CENC_SKIPLIST ||
	    used > len - COLL_HDR)
		return false;
	out->type = v[0];
	out->enc = v[1];
	out->p = v + COLL_HDR;
	out->used = used;
	out->count = -1;
	out->large = NULL;
	if (v[2] & COLL_F_COUNT) {
		if (len - COLL_HDR - used < COLL_COUNT_BYTES)
			return false;
		out->count = lp_u32(out->p + used);
	}
	return true;
}

static inline uint64_t coll_u64(const uint8_t *p)
{
	return (uint64_t)lp_u32(p) | (uint64_t)lp_u32(p + 4) << 32;
}

static inline void coll_u64_write(uint8_t *p, uint64_t v)
{
	lp_u32_write(p, (uint32_t)v);
	lp_u32_write(p + 4, (uint32_t)(v >> 32));
}

/* Whether a collection record's value is a large head (coll_large_parse reads it). */
static inline bool coll_is_large(const uint8_t *v, size_t len)
{
	return len >= 1 && (v[0] & COLL_LARGE);
}

/* Parse a large head. false when it is not one (short, bad type, level past 63, split pointer
 * at or past 2^level). */
static inline bool coll_large_parse(const uint8_t *v, size_t len, coll_head *h)
{
	if (len < COLL_LARGE_HDR || !(v[0] & COLL_LARGE) || lp_u32(v + 4) < COLL_LARGE_HDR - COLL_HDR)
		return false;
	h->type = v[0] & ~COLL_LARGE;
	h->enc = v[1];
	h->cid = coll_u64(v + 8);
	h->count = coll_u64(v + 16);
	h->mbytes = coll_u64(v + 24);
	h->level = v[32];
	h->split = coll_u64(v + 40);
	return h->type >= COLL_HASH && h->type <= COLL_ZSET && h->level < 63 &&
	       h->split < (1ull << h->level);
}

/* Write h as a large head into dst (COLL_LARGE_HDR bytes). */
static inline void coll_large_write(uint8_t *dst, const coll_head *h)
{
	memset(dst, 0, COLL_LARGE_HDR);
	dst[0] = (uint8_t)(h->type | COLL_LARGE);
	dst[1] = (uint8_t)h->enc;
	lp_u32_write(dst + 4, COLL_LARGE_HDR - COLL_HDR);
	coll_u64_write(dst + 8, h->cid);
	coll_u64_write(dst + 16, h->count);
	coll_u64_write(dst + 24, h->mbytes);
	dst[32] = (uint8_t)h->level;
	coll_u64_write(dst + 40, h->split);
}

static inline void coll_hdr_write(uint8_t *dst, int type, int enc, size_t used)
{
	dst[0] = (uint8_t)type;
	dst[1] = (uint8_t)enc;
	dst[2] = dst[3] = 0;
	lp_u32_write(dst + 4, (uint32_t)used);
}

/* The entries of a listpack payload (not an intset): the listpack's count while it is below
 * 65535, else the one after the payload (COLL_F_COUNT), else a walk of the entries. */
static inline uint32_t coll_lp_count(const coll_view *v)
{
	uint32_t n = (uint32_t)v->p[4] | (uint32_t)v->p[5] << 8;
	if (n != LP_COUNT_UNKNOWN)
		return n;
	return v->count >= 0 ? (uint32_t)v->count : lp_count(v->p);
}

/* The value length to write for a payload of used bytes (the count after it included), given the
 * current value length (0 when new): the current one while the payload fits and fills at least
 * half of it, else used plus a quarter, at least 64 bytes of payload. The quarter is room for
 * in-place changes: a record that keeps its length is rewritten where it lies while it is
 * mutable, so a collection growing by pushes is copied once per quarter of its size (amortized
 * four bytes copied per byte added) and changed in place in between. */
static inline size_t coll_value_len(size_t used, size_t cur_len)
{
	if (cur_len >= COLL_HDR && used <= cur_len - COLL_HDR && used * 2 >= cur_len - COLL_HDR)
		return cur_len;
	size_t cap = used + used / 4;
	return COLL_HDR + (cap < 64 ? 64 : cap);
}

/* TYPE's answer and OBJECT ENCODING's. */
const char *coll_type_name(int type);
const char *coll_enc_name(int enc);

#endif
