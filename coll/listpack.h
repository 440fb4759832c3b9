/*
 * listpack.h - Redis 7.0's listpack, byte for byte, over a caller-owned growable buffer.
 *
 * Layout (all little-endian):
 *
 *   total bytes u32 | count u16 (65535 = unknown, count by walking) | entry ... | 0xFF
 *
 *   entry = encoding [data] backlen, where backlen is the size of "encoding [data]" written
 *   big-end first in 1..5 bytes of 7 bits each, every byte but the first-written (lowest address)
 *   having bit 7 set, so that it parses right to left from the next entry's first byte.
 *
 *   encoding byte            entry (without backlen)
 *   0xxxxxxx                 7-bit unsigned int, the value in the byte          1 byte
 *   10xxxxxx                 6-bit string length, then the bytes                1 + len
 *   110xxxxx yyyyyyyy        13-bit signed int (x high bits, y low)             2 bytes
 *   1110xxxx yyyyyyyy        12-bit string length, then the bytes               2 + len
 *   0xF0 len u32             32-bit string length, then the bytes               5 + len
 *   0xF1 / F2 / F3 / F4      16 / 24 / 32 / 64-bit signed int, little-endian    3 / 4 / 5 / 9
 *   0xF5 .. 0xFE             invalid; 0xFF is the end marker, never an entry
 *
 * A string that Redis's string2ll accepts (spw_parse_ll) is always stored as the narrowest int,
 * as lpAppend does, so that a sequence of operations builds the bytes redis-server builds.
 *
 * Ownership: read functions take the listpack's bytes (an lp_buf's p, a record's value) and
 * return pointers into them, valid until the bytes change; they assume a well-formed listpack
 * (built here, or accepted by lp_validate(..., deep = true)). Write functions take an lp_buf and
 * may move its bytes (realloc): entries are named by their byte offset from the start, which a
 * write keeps meaningful as documented beside each function.
 */
#ifndef SPW_COLL_LISTPACK_H
#define SPW_COLL_LISTPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LP_HDR_SIZE 6
#define LP_EOF 0xFF
#define LP_COUNT_UNKNOWN 65535u
#define LP_EMPTY_BYTES (LP_HDR_SIZE + 1)
#define LP_MAX_BYTES UINT32_MAX
/* Room for an int entry rendered as text: "-9223372036854775808" and a NUL. */
#define LP_INTBUF_SIZE 21

enum { LP_BEFORE = 0, LP_AFTER = 1 };

/* A little-endian u32 (the header's total bytes; coll/coll.h's fields too). */
static inline uint32_t lp_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void lp_u32_write(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* A growable buffer: p[0..len) is the structure (a listpack, or an intset: intset.h shares it),
 * cap the allocation. Owned by the caller; lp_buf_free releases p. */
typedef struct lp_buf {
	uint8_t *p;
	size_t len, cap;
} lp_buf;

/* An entry's value: a string pointing into the listpack, or an int. */
typedef struct lp_val {
	const uint8_t *s;  /* string bytes (NULL when is_int) */
	uint32_t len;      /* string length */
	int64_t v;         /* the int (when is_int) */
	bool is_int;
} lp_val;

/* Entry validation callback for lp_validate: p is the entry (already checked to lie inside the
 * listpack), head_count the header's count field. Nonzero accepts. */
typedef int (*lp_entry_cb)(const uint8_t *p, uint32_t head_count, void *arg);

/* ---- buffers ---- */

/* An empty listpack (7 bytes). 0 or -ENOMEM. */
int lp_buf_init(lp_buf *b);
/* A copy of len bytes (not checked: validate first if they are untrusted). 0 or -ENOMEM. */
int lp_buf_from(lp_buf *b, const uint8_t *bytes, size_t len);
/* The same into a buffer already in use (initialized or all zero), reusing its memory: what a
 * cached buffer takes, where lp_buf_from would drop (leak) the memory it holds. bytes must not lie
 * in b. 0 or -ENOMEM. */
int lp_buf_set(lp_buf *b, const uint8_t *bytes, size_t len);
/* Make room for need bytes in all (the contents are kept). 0 or -ENOMEM. */
int lp_buf_reserve(lp_buf *b, size_t need);
void lp_buf_free(lp_buf *b);

/* ---- read side ---- */

/* The header's total byte count. */
uint32_t lp_bytes(const uint8_t *lp);
/* Number of entries: the header's count, or a walk when it says 65535. */
uint32_t lp_count(const uint8_t *lp);
/* First / last entry, the next / previous one, or NULL past either end. */
const uint8_t *lp_first(const uint8_t *lp);
const uint8_t *lp_last(const uint8_t *lp);
const uint8_t *lp_next(const uint8_t *lp, const uint8_t *p);
const uint8_t *lp_prev(const uint8_t *lp, const uint8_t *p);
/* Entry at index (negative counts from the end, -1 the last, as lpSeek), or NULL out of range. */
const uint8_t *lp_seek(const uint8_t *lp, long index);
/* Decode the entry at p. */
void lp_get(const uint8_t *p, lp_val *out /* out */);
/* The value as bytes: a string's own, or an int rendered in base 10 into buf (LP_INTBUF_SIZE),
 * as Redis replies with it. Sets *len; returns the bytes. */
const char *lp_val_str(const lp_val *v, char *buf, size_t *len /* out */);
/* The same for the entry at p: lp_get, then lp_val_str. */
const char *lp_entry_str(const uint8_t *p, char *buf, size_t *len /* out */);
/* Whether the entry at p equals the len bytes at s as Redis's lpCompare: an int entry equals
 * its base-10 text. */
bool lp_eq(const uint8_t *p, const void *s, size_t len);
/* Redis's lpFind: from entry start, compare an entry, then skip `skip` entries, and so on (skip 1
 * visits the fields of a field, value listpack). The matching entry or NULL. */
const uint8_t *lp_find(const uint8_t *lp, const uint8_t *start, const void *s, size_t len, unsigned skip);

/* Redis's lpValidateIntegrity: the header (len >= 7, total bytes == len, last byte 0xFF) and,
 * when deep, every entry's encoding, bounds and backlen, the walk ending exactly at the 0xFF and
 * the count matching the header (unless 65535). entry_cb (may be NULL) sees each entry. Never
 * reads outside lp[0..len), whatever the bytes. */
bool lp_validate(const uint8_t *lp, size_t len, bool deep, lp_entry_cb entry_cb, void *arg);

/* ---- write side: 0 (or a count) on success, -ENOMEM, or -E2BIG past 4 GiB ---- */

/* The entry at byte offset off, or NULL when off is the end marker. */
static inline const uint8_t *lp_at(const lp_buf *b, size_t off)
{
	return b->p[off] == LP_EOF ? NULL : b->p + off;
}
static inline size_t lp_off(const lp_buf *b, const uint8_t *p) { return (size_t)(p - b->p); }

/* Add s (stored as an int when string2ll takes it) at the end / at the front. */
int lp_append(lp_buf *b, const void *s, size_t len);
int lp_prepend(lp_buf *b, const void *s, size_t len);
int lp_append_int(lp_buf *b, int64_t v);
/* Insert before or after (LP_BEFORE / LP_AFTER) the entry at off. *newoff (may be NULL) gets the
 * new entry's offset; entries before it keep their offsets. */
int lp_insert(lp_buf *b, size_t off, int where, const void *s, size_t len, size_t *newoff /* out */);
int lp_insert_int(lp_buf *b, size_t off, int where, int64_t v, size_t *newoff /* out */);
/* Replace the entry at off; the new entry is at off. */
int lp_replace(lp_buf *b, size_t off, const void *s, size_t len);
int lp_replace_int(lp_buf *b, size_t off, int64_t v);
/* Delete up to count entries from the one at off (lpDeleteRangeWithEntry): afterwards off names
 * the entry that followed them (or the end marker: lp_at returns NULL). Returns how many went. */
int lp_delete_range(lp_buf *b, size_t off, size_t count);
/* Delete up to count entries from index start (negative from the end, as lpDeleteRange); an
 * index out of range deletes nothing. Returns how many went. */
int lp_delete_range_index(lp_buf *b, long start, size_t count);

/* ---- planned edits: a change written from the old bytes, in place or as one copy ---- */

/*
 * An edit of up to two splices of a listpack (listpack.c note 5): each replaces del bytes at an
 * offset of the old listpack with ins_len bytes of encoded entries (lp_entry_encode). Planned from
 * the old bytes alone, then written by lp_edit_apply over them (in place) or into another buffer
 * (one copy), the result being the bytes the lp_* writes above build for the same change. ins
 * must not point into the old listpack (in place it is overwritten).
 */
typedef struct lp_span {
	size_t off, del;
	const uint8_t *ins;
	size_t ins_len;
} lp_span;
typedef struct lp_edit {
	lp_span s[2];           /* by offset; the second starts at or after the first's end */
	int n;
	size_t old_len, new_len;  /* total bytes before and after */
	uint32_t count;           /* the header's count after (65535: unknown) */
} lp_edit;

/* Bytes of the entry at p, backlen included. */
size_t lp_entry_size(const uint8_t *p);
/* Encode s as lp_append stores it (an int when string2ll takes it) at out, which needs
 * len + LP_ENTRY_EXTRA bytes; returns the bytes written. */
#define LP_ENTRY_EXTRA 10
size_t lp_entry_encode(uint8_t *out, const void *s, size_t len);
/* An edit that changes nothing yet, of the listpack lp. */
void lp_edit_init(lp_edit *e, const uint8_t *lp);
/* Add a splice at off (an offset of the old listpack) that adds dcount entries (negative:
 * removes), the header's count moving as the lp_* writes move it (sticky at 65535), in the order
 * of the calls. With two at one offset the pure insertion goes first. 0, or -E2BIG past 4 GiB. */
int lp_edit_splice(lp_edit *e, size_t off, size_t del, const uint8_t *ins, size_t ins_len, long dcount);
/* Write the edited listpack: from old into dst (not overlapping), or with in_place (dst == old)
 * by moving only what must move (an edit at the end moves the end marker alone). */
void lp_edit_apply(const lp_edit *e, const uint8_t *old, uint8_t *dst, bool in_place);

#endif
