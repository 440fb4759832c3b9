/*
 * hash.c - field lookup, set and delete on a hash's listpack (hash.h).
 *
 * Design notes:
 *  1. Fields sit at even positions, values after them; a lookup compares only fields (lp_find
 *     with skip 1), so a value equal to a field name is never taken for it.
 *  2. An update replaces the value entry in place and an insertion appends the pair, as Redis's
 *     hashTypeSet does on a listpack: the order of HGETALL on a small hash is the order fields were
 *     first set, the same as redis-server's.
 *  3. Two appends for a new pair: when the second fails (-ENOMEM) the first is taken back, so a
 *     failed set leaves the same entries (the header count aside once it reached 65535).
 */
#include "coll/hash.h"

const uint8_t *hash_lp_value(const uint8_t *lp, const void *f, size_t flen)
{
	const uint8_t *p = lp_first(lp);
	if (p)
		p = lp_find(lp, p, f, flen, 1);
	return p ? lp_next(lp, p) : NULL;
}

int hash_lp_set(lp_buf *b, const void *f, size_t flen, const void *v, size_t vlen)
{
	const uint8_t *vp = hash_lp_value(b->p, f, flen);
	int rc;

	if (vp)
		return (rc = lp_replace(b, lp_off(b, vp), v, vlen)) < 0 ? rc : 0;
	size_t end = b->len - 1;   /* the end marker: where the field goes */
	if ((rc = lp_append(b, f, flen)) < 0)
		return rc;
	if ((rc = lp_append(b, v, vlen)) < 0) {
		lp_delete_range(b, end, 1);   /* note 3 */
		return rc;
	}
	return 1;
}

int hash_lp_del(lp_buf *b, const void *f, size_t flen)
{
	const uint8_t *p = lp_first(b->p);
	if (p)
		p = lp_find(b->p, p, f, flen, 1);
	if (!p)
		return 0;
	lp_delete_range(b, lp_off(b, p), 2);
	return 1;
}
