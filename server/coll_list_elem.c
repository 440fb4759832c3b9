/*
 * coll_list_elem.c - a large list's out-of-line elements (docs/ARCHITECTURE.md "Large
 * collections: what v1 builds (lists)"): an element longer than le_threshold is a part
 * cid | 'e' | position holding its bytes, and its node (or end node in the head) holds a
 * reference entry (coll/deque.h dq_is_ref). server/coll_list_large.c writes and drops them; this
 * file resolves references for reads and outlines a listpack for a fresh large list.
 *
 * Design notes:
 *  1. Threshold: coll-record-max / 4 (1 KiB by default, as ARCHITECTURE's table says). A node
 *     then holds at most C entries of at most 1 KiB (C <= 128: 128 KiB, under the smallest page
 *     a list with big elements can use) and usually about coll-record-max bytes, so a node or a
 *     head never outgrows a record because of its elements; an element read out of line costs one
 *     more record read, which is cheap next to sending 1 KiB or more.
 *  2. Identity: an element's part is named by its position, which never changes while the list
 *     keeps its cid (pushes take new positions, pops and LTRIM move lo and hi, whole writes make
 *     a new cid). A reference repeats the position and the length, to check what is read.
 *  3. Liveness (compaction, coll/deque.h dq_elem_live): a part is live iff its position lies in
 *     [lo, hi) of the head that has its cid. What drops a reference at a position still in range
 *     tombstones the part in the same group as the head: a pop (it reads what it pops) and an
 *     LSET that writes a short element over a long one (a long one over a long one overwrites the
 *     part in its group). LTRIM drops by position, unread. Left over: a position LTRIM dropped
 *     that a later push takes again with a short element keeps the stale part live until that
 *     position is popped or trimmed (space only: no reference names it, nothing reads it).
 *  4. Reads resolve references after the nodes are assembled: every part prefetched in one wave
 *     (a park when one is pending: nothing is held, the re-run finds them in the fetch cache).
 *  5. Limits: an element that cannot be one record (hlog_max_record_payload) fails with
 *     SPW_E_TOO_BIG before anything is written; a push's group past hlog_group_max_bytes fails
 *     the same way inside hlog_group_rmw, nothing written. A group's records must each fit a
 *     page, a plain record need not: an element part over a page is written alone just before
 *     the group (coll_list_large.c elem_alone). For a push its position is outside [lo, hi)
 *     until the head lands (dead if it does not); for an LSET the part changes before its
 *     reference's length does, so reads take the part's length as the truth (a crash between
 *     the two leaves the new element readable, as if the LSET had run). That upsert answers
 *     HLOG_PENDING, nothing written, when the key's newest version is on the device (an LSET's
 *     old part, or a stale one at a position LTRIM dropped and a push takes again): the command
 *     parks and runs again (le_alone's callers), never naming an element it did not write.
 *  6. A string of 16 bytes written with the 32-bit encoding (a listpack RESTOREd from elsewhere)
 *     would read as a reference: le_outline rewrites such an entry canonically, and every entry
 *     the large layout encodes itself is canonical (lp_entry_encode).
 */
#include "server/coll_list_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coll/deque.h"

static __thread lp_buf t_ext;
static __thread le_part *t_lparts;
static __thread size_t t_lcap;

size_t le_threshold(void)
{
	size_t m = (size_t)__atomic_load_n(&g_cfg.coll_record_max, __ATOMIC_RELAXED) / 4;
	return m < 64 ? 64 : m;
}

int le_fits(size_t len)
{
	return len + 64 > hlog_max_record_payload(g_srv.store) ? SPW_E_TOO_BIG : 0;
}

void le_bufs_trim(size_t keep)
{
	if (t_ext.cap > keep)
		lp_buf_free(&t_ext);
	if (!keep || t_lcap * sizeof(*t_lparts) > keep) {
		free(t_lparts);
		t_lparts = NULL;
		t_lcap = 0;
	}
}

size_t le_refs(const uint8_t *lp, uint64_t *bytes)
{
	size_t n = 0;
	uint64_t pos, len;
	*bytes = 0;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, p))
		if (dq_is_ref(p)) {
			dq_ref_parse(p, &pos, &len);
			*bytes += len;
			n++;
		}
	return n;
}

struct rd {
	uint8_t *dst;
	size_t room, wrote;
	uint64_t want;
	int err;
};

static void elem_cb(void *ctx, const hlog_value *v)
{
	struct rd *r = ctx;
	if (v->len + LP_ENTRY_EXTRA > r->room) {   /* the part's length is the truth (note 5) */
		r->err = SPW_E_CORRUPT;
		return;
	}
	r->wrote = lp_entry_encode(r->dst, v->ptr, v->len);
}

static void elem_hkey(hlog_key *k, uint8_t *kb, uint64_t cid, uint64_t pos)
{
	dq_elem_key(kb, cid, pos);
	hlog_key_init_internal(k, kb, DQ_NODE_KEY_BYTES);
}

int le_resolve(client *c, uint64_t cid, lp_buf *b)
{
	uint8_t kb[DQ_NODE_KEY_BYTES];
	hlog_key k;
	uint64_t pos, len, n = 0, bytes;
	bool pending = false;
	int rc;

	if (!le_refs(b->p, &bytes))
		return HLOG_OK;
	for (const uint8_t *p = lp_first(b->p); p; p = lp_next(b->p, p)) {
		if (!dq_is_ref(p))
			continue;
		dq_ref_parse(p, &pos, &len);
		elem_hkey(&k, kb, cid, pos);
		if ((rc = hlog_prefetch(c->w->sess, &k)) == HLOG_PENDING)
			pending = true;
		else if (rc < 0)
			return rc;
	}
	if (pending)
		return HLOG_PENDING;
	size_t need = lp_bytes(b->p) + bytes + 16 * (size_t)lp_count(b->p) + LP_ENTRY_EXTRA;
	if (lp_buf_reserve(&t_ext, need) < 0)
		return -ENOMEM;
	size_t at = LP_HDR_SIZE;
	for (const uint8_t *p = lp_first(b->p); p; p = lp_next(b->p, p), n++) {
		size_t sz = lp_entry_size(p);
		if (!dq_is_ref(p)) {
			memcpy(t_ext.p + at, p, sz);
			at += sz;
			continue;
		}
		dq_ref_parse(p, &pos, &len);
		elem_hkey(&k, kb, cid, pos);
		struct rd r = { t_ext.p + at, need - at, 0, len, 0 };
		rc = hlog_read(c->w->sess, &k, elem_cb, &r);
		if (rc == HLOG_NOTFOUND)
			return SPW_E_CORRUPT;
		if (rc != HLOG_OK || r.err)
			return rc != HLOG_OK ? rc : r.err;
		at += r.wrote;
		c->w->stats.coll_list_elem_reads++;
	}
	lp_u32_write(t_ext.p, (uint32_t)(at + 1));
	n = n > LP_COUNT_UNKNOWN ? LP_COUNT_UNKNOWN : n;
	t_ext.p[4] = (uint8_t)n;
	t_ext.p[5] = (uint8_t)(n >> 8);
	t_ext.p[at] = LP_EOF;
	t_ext.len = at + 1;
	lp_buf tmp = *b;   /* the resolved listpack takes b's place; b's buffer is the next t_ext */
	*b = t_ext;
	t_ext = tmp;
	return HLOG_OK;
}

int le_outline(const uint8_t *lp, uint64_t lo, lp_buf *out, le_part **parts, size_t *np)
{
	size_t min = le_threshold(), at = LP_HDR_SIZE, k = 0;
	uint64_t n = 0;
	lp_val v;
	int rc;

	*np = 0;
	if (lp_buf_reserve(out, lp_bytes(lp) + LP_ENTRY_EXTRA) < 0)
		return -ENOMEM;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, p), n++) {
		lp_get(p, &v);
		bool big = !v.is_int && v.len > min;
		if (big && (rc = le_fits(v.len)) < 0)
			return rc;
		if (big && k == t_lcap) {
			size_t cap = t_lcap ? 2 * t_lcap : 16;
			le_part *a = realloc(t_lparts, cap * sizeof(*a));
			if (!a)
				return -ENOMEM;
			t_lparts = a;
			t_lcap = cap;
		}
		if (big) {
			t_lparts[k++] = (le_part){ lo + n, v.s, v.len };
			at += dq_ref_encode(out->p + at, lo + n, v.len);
		} else if (dq_is_ref(p)) {   /* note 6 */
			at += lp_entry_encode(out->p + at, v.s, v.len);
		} else {
			size_t sz = lp_entry_size(p);
			memcpy(out->p + at, p, sz);
			at += sz;
		}
	}
	lp_u32_write(out->p, (uint32_t)(at + 1));
	n = n > LP_COUNT_UNKNOWN ? LP_COUNT_UNKNOWN : n;
	out->p[4] = (uint8_t)n;
	out->p[5] = (uint8_t)(n >> 8);
	out->p[at] = LP_EOF;
	out->len = at + 1;
	*parts = t_lparts;
	*np = k;
	return 0;
}

int le_alone(client *c, uint64_t cid, uint64_t pos, const void *val, size_t len)
{
	uint8_t kb[DQ_NODE_KEY_BYTES];
	hlog_key k;
	if (hlog_record_bytes(sizeof(kb), len, false) <= g_cfg.page_bytes)
		return 0;
	elem_hkey(&k, kb, cid, pos);
	int rc = hlog_upsert_typed(c->w->sess, &k, val, len, HLOG_NO_EXPIRY, HLOG_T_PART);
	c->w->stats.coll_list_elem_writes += rc == HLOG_OK;
	return rc == HLOG_OK ? 1 : rc;
}

void le_part_set(hlog_group_part *p, uint8_t *key, uint64_t cid, uint64_t pos, const uint8_t *val,
                 size_t len)
{
	dq_elem_key(key, cid, pos);
	hlog_key_init_internal(&p->key, key, DQ_NODE_KEY_BYTES);
	p->val = val;
	p->len = val ? len : 0;
	p->cap = 0;
	p->del = !val;
}

size_t le_drops(const uint8_t *lp, uint64_t cid, hlog_group_part *parts, uint8_t (*keys)[17])
{
	uint64_t pos, len;
	size_t n = 0;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, p))
		if (dq_is_ref(p)) {
			dq_ref_parse(p, &pos, &len);
			le_part_set(&parts[n], keys[n], cid, pos, NULL, 0);
			n++;
		}
	return n;
}
