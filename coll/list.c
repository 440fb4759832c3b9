/*
 * list.c - a Redis list as one listpack (list.h): Redis 7.0's t_list.c index rules and edits.
 *
 * Design notes:
 *  1. One listpack stands for Redis's whole quicklist (docs/ARCHITECTURE.md "Small collections"):
 *     the elements, their order and their encodings (an element string2ll takes is an int entry)
 *     are the ones redis-server holds; only its split into 8 KiB nodes is missing. So an edit costs
 *     O(size of the list) bytes moved, and the header's count saturates at 65535 (listpack.c note
 *     1), past which counting walks the entries.
 *  2. The arithmetic is Redis's, overflows included: LPOS's -rank of LONG_MIN stays LONG_MIN (every
 *     match then passes "matches >= rank"), LREM's -LONG_MIN never equals a removal count. The
 *     reply is what Redis 7.0.15 gives, so the wrap is computed on unsigned values, not left to
 *     undefined behaviour.
 *  3. Slices copy entry bytes as they are: an entry's backlen describes only itself, so any run of
 *     consecutive entries between a header and an end byte is a valid listpack. Pops and LTRIM
 *     build their results that way, in one copy, instead of a copy and a deletion.
 */
#include "coll/list.h"

#include <string.h>

static inline uint32_t hdr_count(const uint8_t *lp) { return (uint32_t)lp[4] | (uint32_t)lp[5] << 8; }

bool list_range(long llen, long start, long end, long *from, long *to)
{
	if (start < 0)
		start = llen + start;
	if (end < 0)
		end = llen + end;
	if (start < 0)
		start = 0;
	/* start >= 0 now, so an end still negative is caught by start > end. */
	if (start > end || start >= llen)
		return false;
	if (end >= llen)
		end = llen - 1;
	*from = start;
	*to = end;
	return true;
}

/* The entry at index i of n entries, walked from the nearer end even when the header's count is
 * unknown (lp_seek walks from the head for a positive index then). */
static const uint8_t *seek_near(const uint8_t *lp, long n, long i)
{
	return lp_seek(lp, i > n / 2 ? i - n : i);
}

size_t list_run(uint8_t *dst, const uint8_t *lp, const uint8_t *a, const uint8_t *end, uint32_t count)
{
	size_t body = (size_t)(end - a), len = LP_HDR_SIZE + body + 1;

	if (hdr_count(lp) == LP_COUNT_UNKNOWN || count > LP_COUNT_UNKNOWN)
		count = LP_COUNT_UNKNOWN;
	dst[0] = (uint8_t)len;
	dst[1] = (uint8_t)(len >> 8);
	dst[2] = (uint8_t)(len >> 16);
	dst[3] = (uint8_t)(len >> 24);
	dst[4] = (uint8_t)count;
	dst[5] = (uint8_t)(count >> 8);
	memcpy(dst + LP_HDR_SIZE, a, body);
	dst[len - 1] = LP_EOF;
	return len;
}

size_t list_slice(uint8_t *dst, const uint8_t *lp, long n, long from, long to)
{
	const uint8_t *a = seek_near(lp, n, from), *b = a, *next;

	if (to - from < 64)
		for (long i = from; i < to; i++)
			b = lp_next(lp, b);
	else
		b = seek_near(lp, n, to);
	next = lp_next(lp, b);
	return list_run(dst, lp, a, next ? next : lp + lp_bytes(lp) - 1, (uint32_t)(to - from + 1));
}

long list_rem(lp_buf *b, long count, const void *s, size_t len)
{
	unsigned long want = count < 0 ? 0UL - (unsigned long)count : (unsigned long)count;
	unsigned long removed = 0;

	if (count >= 0) {
		const uint8_t *p = lp_first(b->p);
		while (p && (p = lp_find(b->p, p, s, len, 0))) {
			size_t off = lp_off(b, p);
			lp_delete_range(b, off, 1);
			if (++removed == want)
				break;
			p = lp_at(b, off);
		}
		return (long)removed;
	}
	/* From the tail: a deletion moves only the bytes after it, so the previous entry stays put
	 * (and a deletion never reallocates). */
	for (const uint8_t *p = lp_last(b->p), *prev; p; p = prev) {
		prev = lp_prev(b->p, p);
		if (!lp_eq(p, s, len))
			continue;
		lp_delete_range(b, lp_off(b, p), 1);
		if (++removed == want)
			break;
	}
	return (long)removed;
}

int list_insert(lp_buf *b, int where, const void *pivot, size_t plen, const void *s, size_t len)
{
	const uint8_t *p = lp_find(b->p, lp_first(b->p), pivot, plen, 0);
	if (!p)
		return 0;
	int rc = lp_insert(b, lp_off(b, p), where, s, len, NULL);
	return rc < 0 ? rc : 1;
}

int list_set(lp_buf *b, long index, const void *s, size_t len)
{
	const uint8_t *p = lp_seek(b->p, index);
	if (!p)
		return 0;
	int rc = lp_replace(b, lp_off(b, p), s, len);
	return rc < 0 ? rc : 1;
}

long list_pos(const uint8_t *lp, const void *s, size_t len, long rank, long count, long maxlen,
	list_pos_fn fn, void *ctx)
{
	bool tail = rank < 0;
	long llen = 0, index = 0, found = 0;
	unsigned long matches = 0;

	if (tail) {
		rank = (long)(0UL - (unsigned long)rank);   /* note 2: LONG_MIN stays LONG_MIN */
		llen = (long)lp_count(lp);
	}
	for (const uint8_t *p = tail ? lp_last(lp) : lp_first(lp); p && (maxlen == 0 || index < maxlen);
	     p = tail ? lp_prev(lp, p) : lp_next(lp, p), index++) {
		if (!lp_eq(p, s, len))
			continue;
		matches++;
		if ((long)matches < rank)
			continue;
		if (fn)
			fn(ctx, tail ? llen - index - 1 : index);
		found++;
		/* Without COUNT the first one ends the search; with it Redis stops once
		 * matches - rank + 1 reaches count, computed with the wrap of note 2. */
		if (count < 0 || (count && (long)(matches - (unsigned long)rank + 1) >= count))
			break;
	}
	return found;
}
