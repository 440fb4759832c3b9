/*
 * list.h - a Redis list held as one listpack (coll.h's small layout): the index arithmetic and the
 * edits of Redis 7.0's t_list.c on the listpack bytes, without commands, replies or the store.
 *
 * Ownership as in listpack.h: read functions take listpack bytes and return pointers into them;
 * write functions take an lp_buf whose capacity the caller sized (they never need more than the
 * bound given beside each, so a buffer over borrowed memory is never reallocated).
 */
#ifndef SPW_COLL_LIST_H
#define SPW_COLL_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

/* What one element can add to a listpack beyond its bytes: a string header of 5 and a backlen of
 * 5 (an int entry takes at most 10 bytes in all). A buffer with len + LIST_ENTRY_EXTRA + the
 * element's length free never grows while that element is added. */
#define LIST_ENTRY_EXTRA 11

/* Redis's range arithmetic (addListRangeReply, ltrimCommand): start and end as the command gave
 * them (negative counts from the end) over llen elements. true, with the inclusive range in
 * *from..*to, when it is not empty. */
bool list_range(long llen, long start, long end, long *from /* out */, long *to /* out */);

/* Write into dst the listpack of entries from..to (inclusive, 0 <= from <= to < n) of lp, which
 * holds n entries: their bytes copied as they are (list.c note 3), the header's count exact
 * unless lp's says unknown (65535), which it keeps, as Redis's deletions do. dst needs
 * lp_bytes(lp) bytes at most and must not overlap lp. Returns the new listpack's length. */
size_t list_slice(uint8_t *dst, const uint8_t *lp, long n, long from, long to);

/* The bytes of list_slice: the entries from a up to end (an entry or lp's end marker) of lp,
 * count of them, as a listpack in dst; the count is written as unknown when lp's is or when
 * it is 65535 or more. Returns the new listpack's length. */
size_t list_run(uint8_t *dst, const uint8_t *lp, const uint8_t *a, const uint8_t *end, uint32_t count);

/* LREM: delete up to |count| entries equal to s (0: all of them), from the head when count >= 0,
 * from the tail when negative. Returns how many went (never grows b). */
long list_rem(lp_buf *b, long count, const void *s, size_t len);

/* LINSERT: add s before or after (LP_BEFORE / LP_AFTER) the first entry equal to pivot. 1 when
 * added, 0 when no entry equals pivot, or a write error. Needs len + LIST_ENTRY_EXTRA free. */
int list_insert(lp_buf *b, int where, const void *pivot, size_t plen, const void *s, size_t len);

/* LSET: replace the entry at index (negative from the end) with s. 1, 0 when index is out of
 * range, or a write error. Needs len + LIST_ENTRY_EXTRA free. */
int list_set(lp_buf *b, long index, const void *s, size_t len);

/* LPOS's search (lposCommand): the 0-based indexes of the entries equal to s, from the rank-th
 * match on (rank > 0 from the head, < 0 from the tail; LONG_MIN behaves as Redis 7.0's), at most
 * count of them (0: all; -1: COUNT not given, the first one only), looking at no more than maxlen entries (0: all). fn (may be NULL: only
 * count) gets each index in order. Returns how many were found. */
typedef void (*list_pos_fn)(void *ctx, long index);
long list_pos(const uint8_t *lp, const void *s, size_t len, long rank, long count, long maxlen,
	list_pos_fn fn, void *ctx);

#endif
