/*
 * set.c - a set's payload (set.h): membership, iteration, add and remove over either encoding.
 *
 * Design notes:
 *  1. Encodings follow Redis 7.0's setTypeCreate / setTypeAdd, one way: an intset while every
 *     member is an integer (string2ll's rules: spw_parse_ll) and its length is at most
 *     set-max-intset-entries; the first non-integer member, or one past that length, turns it into
 *     a listpack of members, which OBJECT ENCODING reports as "hashtable" (7.0 has no listpack
 *     sets). A listpack set never turns back, whatever is removed, as in Redis.
 *  2. A listpack set is searched linearly (lp_find), so membership costs O(n) where Redis's dict
 *     is O(1): the price of keeping one small record per set (docs/ARCHITECTURE.md "Small
 *     collections"). An intset is searched by bisection.
 *  3. Members in a listpack keep their arrival order (appended at the end, removed in place), so
 *     replies from a "hashtable" set come in an order Redis's dict does not share; tests compare
 *     those sorted.
 */
#include "coll/set.h"

#include <errno.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/intset.h"
#include "common/spw.h"

void cset_it_init(cset_it *it, int enc, const uint8_t *p)
{
	it->p = p;
	it->enc = enc;
	it->i = 0;
	it->e = enc == CENC_INTSET ? NULL : lp_first(p);
}

bool cset_it_next(cset_it *it, lp_val *m)
{
	if (it->enc == CENC_INTSET) {
		int64_t v;
		if (!is_get(it->p, it->i, &v))
			return false;
		it->i++;
		m->s = NULL;
		m->len = 0;
		m->v = v;
		m->is_int = true;
		return true;
	}
	if (!it->e)
		return false;
	lp_get(it->e, m);
	it->e = lp_next(it->p, it->e);
	return true;
}

uint32_t cset_card(int enc, const uint8_t *p)
{
	return enc == CENC_INTSET ? is_len(p) : lp_count(p);
}

bool cset_has(int enc, const uint8_t *p, const void *s, size_t len)
{
	if (enc == CENC_INTSET) {
		long long v;
		return spw_parse_ll(s, len, &v) && is_find(p, v);
	}
	return lp_find(p, lp_first(p), s, len, 0) != NULL;
}

bool cset_has_val(int enc, const uint8_t *p, const lp_val *m)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s;

	if (m->is_int && enc == CENC_INTSET)
		return is_find(p, m->v);
	s = lp_val_str(m, buf, &len);
	return cset_has(enc, p, s, len);
}

void cset_get(int enc, const uint8_t *p, uint32_t idx, lp_val *m)
{
	if (enc == CENC_INTSET) {
		int64_t v = 0;
		is_get(p, idx, &v);
		m->s = NULL;
		m->len = 0;
		m->v = v;
		m->is_int = true;
	} else {
		lp_get(lp_seek(p, idx), m);
	}
}

int cset_load(lp_buf *b, const uint8_t *p, size_t len)
{
	if (lp_buf_reserve(b, len ? len : 1) < 0)
		return -ENOMEM;
	memcpy(b->p, p, len);
	b->len = len;
	return 0;
}

static const uint8_t empty_lp[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

int cset_lp_reset(lp_buf *b)
{
	return cset_load(b, empty_lp, sizeof(empty_lp));
}

int cset_lp_append(lp_buf *b, const lp_val *m)
{
	return m->is_int ? lp_append_int(b, m->v) : lp_append(b, m->s, m->len);
}

int cset_init(lp_buf *b, int *enc, const void *first, size_t first_len)
{
	long long v;
	bool ints = !first || spw_parse_ll(first, first_len, &v);
	static const uint8_t empty_is[IS_HDR_SIZE] = { 2, 0, 0, 0, 0, 0, 0, 0 };

	*enc = ints ? CENC_INTSET : CENC_HASHTABLE;
	return ints ? cset_load(b, empty_is, sizeof(empty_is)) : cset_lp_reset(b);
}

/* setTypeConvert: the intset in b becomes a listpack of the same ints, in ascending order. */
static int intset_to_listpack(lp_buf *b, int *enc)
{
	lp_buf lp = { 0 };
	uint32_t n = is_len(b->p);
	int rc = lp_buf_init(&lp);

	for (uint32_t i = 0; rc >= 0 && i < n; i++) {
		int64_t v;
		is_get(b->p, i, &v);
		rc = lp_append_int(&lp, v);
	}
	if (rc < 0) {
		lp_buf_free(&lp);
		return rc;
	}
	rc = cset_load(b, lp.p, lp.len);
	lp_buf_free(&lp);
	if (rc == 0)
		*enc = CENC_HASHTABLE;
	return rc;
}

int cset_add(lp_buf *b, int *enc, const void *s, size_t len, size_t max_intset, bool *added)
{
	long long v;
	int rc;

	*added = false;
	if (*enc == CENC_INTSET) {
		if (spw_parse_ll(s, len, &v)) {
			if ((rc = is_add(b, v, added)) < 0)
				return rc;
			if (*added && is_len(b->p) > max_intset)
				return intset_to_listpack(b, enc);
			return 0;
		}
		if ((rc = intset_to_listpack(b, enc)) < 0)
			return rc;
	} else if (lp_find(b->p, lp_first(b->p), s, len, 0)) {
		return 0;
	}
	if ((rc = lp_append(b, s, len)) < 0)
		return rc;
	*added = true;
	return 0;
}

int cset_add_val(lp_buf *b, int *enc, const lp_val *m, size_t max_intset, bool *added)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s = lp_val_str(m, buf, &len);
	return cset_add(b, enc, s, len, max_intset, added);
}

int cset_remove(lp_buf *b, int enc, const void *s, size_t len, bool *removed)
{
	const uint8_t *e;
	long long v;
	int rc;

	*removed = false;
	if (enc == CENC_INTSET)
		return spw_parse_ll(s, len, &v) ? is_remove(b, v, removed) : 0;
	if (!(e = lp_find(b->p, lp_first(b->p), s, len, 0)))
		return 0;
	if ((rc = lp_delete_range(b, lp_off(b, e), 1)) < 0)
		return rc;
	*removed = rc == 1;
	return 0;
}

/* An intset is at most set-max-intset-entries long, so removing the taken ints one by one costs
 * little; a listpack is rebuilt in one pass, since it may be long. */
int cset_take(lp_buf *b, int enc, const uint8_t *sel, lp_buf *taken)
{
	lp_buf kept = { 0 };
	cset_it it;
	lp_val m;
	int rc = enc == CENC_INTSET ? 0 : lp_buf_init(&kept);

	cset_it_init(&it, enc, b->p);
	for (uint32_t i = 0; rc >= 0 && cset_it_next(&it, &m); i++) {
		if (sel[i / 8] & (1u << (i % 8)))
			rc = cset_lp_append(taken, &m);
		else if (enc != CENC_INTSET)
			rc = cset_lp_append(&kept, &m);
	}
	if (rc >= 0 && enc == CENC_INTSET) {
		for (const uint8_t *e = lp_first(taken->p); e; e = lp_next(taken->p, e)) {
			lp_get(e, &m);
			is_remove(b, m.v, NULL);
		}
	} else if (rc >= 0) {
		rc = cset_load(b, kept.p, kept.len);
	}
	lp_buf_free(&kept);
	return rc < 0 ? rc : 0;
}

int cset_rebuild(lp_buf *b, int *enc, size_t max_intset)
{
	lp_buf old = *b, nb = { 0 };
	char buf[LP_INTBUF_SIZE];
	cset_it it;
	lp_val m;
	size_t len;
	bool added;
	int rc = 0, nenc = CENC_INTSET;

	cset_it_init(&it, *enc, old.p);
	for (bool first = true; rc >= 0 && cset_it_next(&it, &m); first = false) {
		const char *s = lp_val_str(&m, buf, &len);
		if (first)
			rc = cset_init(&nb, &nenc, s, len);
		if (rc >= 0)
			rc = cset_add(&nb, &nenc, s, len, max_intset, &added);
	}
	if (rc < 0) {
		lp_buf_free(&nb);
		return rc;
	}
	if (!nb.p)
		return 0;   /* empty: nothing to rebuild */
	lp_buf_free(&old);
	*b = nb;
	*enc = nenc;
	return 0;
}
