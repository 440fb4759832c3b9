/*
 * set.h - a set's payload, whatever its encoding, as Redis 7.0's t_set.c setType* functions see it:
 * an intset (CENC_INTSET) while every member is an integer and there are at most max_intset of
 * them, else a listpack of members (CENC_HASHTABLE: what Redis 7.0 would call it; the bytes stay
 * a listpack, members in the order they arrived). Pure algorithms on the bytes, no store.
 *
 * Ownership: read functions take the payload's bytes and return pointers into them (valid until
 * they change); write functions take an lp_buf (listpack.h) that the caller owns and may move.
 */
#ifndef SPW_COLL_SET_H
#define SPW_COLL_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

/* A member as iteration gives it: an int (intset, or an int entry of a listpack) or bytes. */
typedef struct cset_it {
	const uint8_t *p;      /* the payload */
	int enc;               /* CENC_INTSET or CENC_HASHTABLE */
	uint32_t i;            /* intset: next index */
	const uint8_t *e;      /* listpack: next entry */
} cset_it;

void cset_it_init(cset_it *it, int enc, const uint8_t *p);
/* The next member into *m, or false at the end. */
bool cset_it_next(cset_it *it, lp_val *m /* out */);

/* Number of members. */
uint32_t cset_card(int enc, const uint8_t *p);
/* Whether the len bytes at s are a member (setTypeIsMember). */
bool cset_has(int enc, const uint8_t *p, const void *s, size_t len);
/* The same for a member taken from another set. */
bool cset_has_val(int enc, const uint8_t *p, const lp_val *m);
/* The member at index idx < cset_card (intset: O(1); listpack: O(idx)). */
void cset_get(int enc, const uint8_t *p, uint32_t idx, lp_val *m /* out */);

/* A new empty set into b: an intset (createIntsetObject), or, when first is given and is not an
 * integer, a listpack (setTypeCreate). 0 or -ENOMEM. */
int cset_init(lp_buf *b, int *enc /* out */, const void *first, size_t first_len);
/* Copy len payload bytes into b (its allocation reused). 0 or -ENOMEM. */
int cset_load(lp_buf *b, const uint8_t *p, size_t len);
/* setTypeAdd: add the member; an intset turns into a listpack when a non-integer arrives or its
 * length passes max_intset (never back). *added says whether it was new. 0, -ENOMEM, -E2BIG. */
int cset_add(lp_buf *b, int *enc, const void *s, size_t len, size_t max_intset, bool *added /* out */);
int cset_add_val(lp_buf *b, int *enc, const lp_val *m, size_t max_intset, bool *added /* out */);
/* Move the members whose bit is set in sel (bit i of sel[i / 8]: the member at index i) out of
 * the set into the listpack taken (appended, in the set's order). 0 or -ENOMEM. */
int cset_take(lp_buf *b, int enc, const uint8_t *sel, lp_buf *taken);
/* Build the set in b afresh, as Redis's SPOP does when it keeps few members (setTypeCreate of
 * the first, then setTypeAdd of each): a listpack of integers only becomes an intset again, an
 * intset takes the narrowest width. 0, -ENOMEM, -E2BIG. */
int cset_rebuild(lp_buf *b, int *enc, size_t max_intset);
/* An empty listpack in b, its allocation reused. 0 or -ENOMEM. */
int cset_lp_reset(lp_buf *b);
/* Append a member to a listpack as it was (an int stays an int entry). 0 or -ENOMEM / -E2BIG. */
int cset_lp_append(lp_buf *b, const lp_val *m);
/* setTypeRemove. *removed says whether it was there. 0 or -ENOMEM. */
int cset_remove(lp_buf *b, int enc, const void *s, size_t len, bool *removed /* out */);

#endif
