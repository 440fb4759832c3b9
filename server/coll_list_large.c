/*
 * coll_list_large.c - the large layout of lists (docs/ARCHITECTURE.md "Large collections: what v1
 * builds", lists): a head record holding the two end nodes and the deque's positions (coll/deque.h)
 * and full interior nodes as parts under cid | 'n' | node. coll_large.c hands a large list here
 * (reads after answering COLL_HINT_HEAD and COLL_HINT_COUNT, writes after its type check, both
 * with its latch released), and coll_large_convert hands over a list whose edit outgrew the small
 * record.
 *
 * Design notes:
 *  1. When: a list payload past 2 x coll-record-max bytes (8 KiB by default: Redis's quicklist
 *     node, list-max-listpack-size -2) becomes large (coll_list_large_wanted). Elements per node:
 *     c = coll-record-max / the mean entry size at conversion, 1..128, fixed for the list's life;
 *     positions start at the node boundary at or below 2^62.
 *  2. Point writes (the command says what it does through coll_edit.list_op, set by cmd_list.c):
 *     a push builds a window of its end node and the new elements, cuts it at node boundaries
 *     (dq_split) and writes the new end node into the head; the nodes it filled between the ends
 *     become parts, written with the head in one hlog_group_rmw (1 in c pushes of one element).
 *     A pop reads the nodes it empties (none while it stays within its end node), copies the node
 *     that becomes the end into the head and writes only the head: the parts it passed are dead
 *     by position (coll/deque.h dq_part_live), so pops and LTRIM write no tombstones. LSET
 *     rewrites its node (the head for an end node; else the part, with the head when mbytes
 *     moves). LTRIM moves lo and hi and copies the two new end nodes into the head.
 *  3. Point reads (coll_hint COLL_HINT_LIST, set by cmd_list.c): LINDEX reads the head and at
 *     most one node; LRANGE of k elements the nodes they span, prefetched in one wave (a park
 *     when any is pending: nothing is held, the re-run finds them in the session's fetch cache).
 *     The command's callback gets a view of just those elements (view->large set). LLEN is the
 *     head's count (coll_large.c answers COLL_HINT_COUNT).
 *  4. Every write runs under the collection's exclusive latch and writes the head with a plan
 *     that checks the head is still the bytes this command read (else COLL_E_RESTART: coll.c runs
 *     the command again); reads take the shared latch. Latches are never held across a park.
 *  5. Whole paths: every other write (LINSERT, LREM, an LMOVE within one list) runs the command's
 *     own small-layout edit on the whole list assembled in order (every node prefetched in one
 *     wave) and writes the result afresh: a new cid and new nodes when it is still past the limit,
 *     else a small record. Whole reads (LPOS, RENAME, COPY, DUMP through coll_large_flat) get the
 *     whole list in order. A large list stays large until it is emptied (pops) or a whole write
 *     makes it small: no conversion back on pops in v1.
 *  6. A fresh large list (conversion or whole write) writes its registry and interior nodes first,
 *     as plain upserts under the new cid, then the head in one hlog_rmw checking the old head's
 *     bytes: nothing reaches the new cid until the head does, so this is as atomic for readers as
 *     a group, and it has no bound on the list's size (a group is bounded by
 *     hlog_group_max_bytes). A crash or a lost race in between leaves parts that no head names:
 *     dead for compaction. Parts are never written by compaction's window (they are at the tail).
 *  7. mbytes is the bytes of the registry and the live node parts: exact for pushes, pops and
 *     LSET (they read or write what they change), an estimate after LTRIM (the nodes it drops
 *     unread count by their share of the interior).
 *  8. Two keys (LMOVE, RPOPLPUSH, LMPOP) are point operations on each key, not atomic across
 *     them (cmd_list.c note 4). An element past coll_list_elem.c's threshold is out of line
 *     (a part cid | 'e' | position, written in the group of the head that first names it; its
 *     entry a reference); one too big for one record fails with SPW_E_TOO_BIG, nothing written.
 *  9. The common push or pop stays within its end node (server/coll_list_fast.c): one hlog_rmw
 *     of the head planned from the head it is given, patched where it lies; a plan that finds
 *     the end node would fill or empty writes nothing and the general path runs (note 2).
 */
#include "server/coll_list_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coll/bucket.h"
#include "coll/coll.h"
#include "coll/deque.h"
#include "coll/latch.h"
#include "coll/list.h"
#include "coll/listpack.h"

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

#define RECORD_MAX ((size_t)__atomic_load_n(&g_cfg.coll_record_max, __ATOMIC_RELAXED))
#define BUF_KEEP (1u << 20)

/* ---------------- per-thread buffers ---------------- */

/* head: the head as read; win: nodes assembled; tmp: one part read, new elements; cut: a window's
 * nodes, a slice; nh: the new head; res: popped or read elements; set: an LSET's node; out: a
 * patched edit's output; r: LTRIM's right node. */
static __thread lp_buf t_head, t_win, t_tmp, t_cut, t_nh, t_res, t_set, t_out, t_r;
static __thread size_t *t_offs;
static __thread hlog_group_part *t_parts;
static __thread uint8_t (*t_keys)[DQ_NODE_KEY_BYTES];
static __thread size_t t_cap;
static __thread uint64_t t_rng;

static lp_buf *buf_of(int i)
{
	lp_buf *const all[] = { &t_head, &t_win, &t_tmp, &t_cut, &t_nh, &t_res, &t_set, &t_out, &t_r };
	return i < (int)(sizeof(all) / sizeof(all[0])) ? all[i] : NULL;
}

static __thread bool t_keyed;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static pthread_key_t bufs_key;

/* The thread's buffers go when it exits (the key's destructor runs on it). */
static void bufs_destroy(void *unused)
{
	(void)unused;
	for (int i = 0; buf_of(i); i++)
		lp_buf_free(buf_of(i));
	free(t_offs);
	free(t_parts);
	free(t_keys);
	le_bufs_trim(0);
	coll_list_fast_trim(0);
	t_offs = NULL;
	t_parts = NULL;
	t_keys = NULL;
	t_cap = 0;
}

static void bufs_key_create(void) { pthread_key_create(&bufs_key, bufs_destroy); }

/* At the start of every operation: the key set once per thread, and the buffers a big list grew
 * past BUF_KEEP freed (t_res keeps the last answer, which the caller may still read: it is trimmed
 * on the next call's entry). */
static void bufs_enter(void)
{
	if (!t_keyed) {
		pthread_once(&bufs_once, bufs_key_create);
		pthread_setspecific(bufs_key, &t_keyed);
		t_keyed = true;
	}
	for (int i = 0; buf_of(i); i++)
		if (buf_of(i)->cap > BUF_KEEP)
			lp_buf_free(buf_of(i));
	le_bufs_trim(BUF_KEEP);
	coll_list_fast_trim(BUF_KEEP);
}

/* Room for n parts, keys and offsets (plus two). 0 or -ENOMEM. */
static int arrays_reserve(size_t n)
{
	if (n + 2 <= t_cap)
		return 0;
	size_t cap = (n + 2) * 2;
	size_t *o = realloc(t_offs, cap * sizeof(*o));
	if (o)
		t_offs = o;
	hlog_group_part *p = realloc(t_parts, cap * sizeof(*p));
	if (p)
		t_parts = p;
	void *k = realloc(t_keys, cap * sizeof(*t_keys));
	if (k)
		t_keys = k;
	if (!o || !p || !k)
		return -ENOMEM;
	t_cap = cap;
	return 0;
}

/* A new collection id (coll_large.c's rule: random, never 0). */
static uint64_t cid_new(void)
{
	if (!t_rng && getrandom(&t_rng, sizeof(t_rng), 0) != (ssize_t)sizeof(t_rng))
		t_rng = (uint64_t)(uintptr_t)&t_rng ^ (uint64_t)spw_time_ms();
	for (;;) {
		uint64_t z = (t_rng += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		if (z)
			return z;
	}
}

/* b holds a copy of len bytes at p (which may lie in b). 0 or -ENOMEM. */
static int buf_set(lp_buf *b, const uint8_t *p, size_t len)
{
	if (lp_buf_reserve(b, len ? len : 1) < 0)
		return -ENOMEM;
	memmove(b->p, p, len);
	b->len = len;
	return 0;
}

/* count entries of lp from index from, as a listpack into dst. */
static int slice(lp_buf *dst, const uint8_t *lp, uint64_t from, uint64_t count)
{
	const uint8_t *eof = lp + lp_bytes(lp) - 1;
	const uint8_t *a = dq_skip(lp, lp_first(lp), from), *end;
	if (!a || !count)
		return buf_set(dst, lp_empty, sizeof(lp_empty));
	if (!(end = dq_skip(lp, a, count)))
		end = eof;
	if (lp_buf_reserve(dst, (size_t)(end - a) + LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	dst->len = dq_run(dst->p, a, end, count);
	return 0;
}

/* ---------------- the head ---------------- */

struct lhead {
	coll_head h;
	dq_head d;
	size_t len;               /* bytes of t_head */
	int rtype;
	int err;
	bool large;
};

/* A large head is kept to its used bytes (what the write plan compares), any other value whole
 * (the conversion compares a small record's every byte). */
static void head_copy_cb(void *ctx, const hlog_value *v)
{
	struct lhead *lh = ctx;
	size_t n = v->len;
	lh->rtype = v->rtype;
	lh->large = v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len);
	if (lh->large && n >= COLL_HDR && COLL_HDR + (size_t)lp_u32(v->ptr + 4) <= n)
		n = COLL_HDR + lp_u32(v->ptr + 4);
	if (buf_set(&t_head, v->ptr, n) < 0)
		lh->err = -ENOMEM;
	lh->len = n;
}

/* The head of k into t_head: HLOG_OK (a large list: lh parsed), HLOG_NOTFOUND, COLL_E_RESTART
 * (not large: coll.c runs the command again), SPW_E_WRONGTYPE, SPW_E_CORRUPT, HLOG_PENDING. */
static int lhead_read(client *c, const hlog_key *k, struct lhead *lh)
{
	lh->err = 0;
	lh->large = false;
	int rc = hlog_read(c->w->sess, k, head_copy_cb, lh);
	if (rc != HLOG_OK)
		return rc;
	if (lh->err)
		return lh->err;
	if (lh->rtype == HLOG_T_STRING)
		return SPW_E_WRONGTYPE;
	if (!lh->large)
		return COLL_E_RESTART;
	if (!coll_large_parse(t_head.p, lh->len, &lh->h))
		return SPW_E_CORRUPT;
	if (lh->h.type != COLL_LIST)
		return SPW_E_WRONGTYPE;
	return dq_parse(t_head.p, lh->len, &lh->d) ? HLOG_OK : SPW_E_CORRUPT;
}

struct lplan {
	const uint8_t *expect;    /* the old value's bytes as read, NULL: the key was absent */
	size_t elen;
	const uint8_t *val;       /* the new value, NULL: delete */
	size_t vlen, new_len;
};

/* Note 4: the head is still the bytes read (else COLL_E_RESTART); its expiry is kept. */
static int lplan_fn(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct lplan *p = ctx;
	if (p->expect ? !old || old->rtype != HLOG_T_HEAD || old->len < p->elen ||
	                memcmp(old->ptr, p->expect, p->elen) != 0
	              : old != NULL)
		return COLL_E_RESTART;
	if (!p->val) {
		out->action = HLOG_RMW_DELETE;
		return 0;
	}
	p->new_len = coll_value_len(p->vlen - COLL_HDR, old ? old->len : 0);
	out->action = HLOG_RMW_WRITE;
	out->rtype = HLOG_T_HEAD;
	out->new_len = p->new_len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void lfill_fn(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct lplan *p = ctx;
	(void)old;
	(void)in_place;
	memmove(dst, p->val, p->vlen);
	memset(dst + p->vlen, 0, p->new_len - p->vlen);
}

static const hlog_rmw_ops lplan_ops = { lplan_fn, lfill_fn };

/* Write the head (val NULL: delete it) over the bytes read in t_head, with nparts parts in t_parts
 * as one group (note 4). */
static int head_put(client *c, const hlog_key *k, const struct lhead *lh, const uint8_t *val,
                    size_t vlen, size_t nparts)
{
	struct lplan p = { t_head.p, lh->len, val, vlen, 0 };
	int rc = nparts ? hlog_group_rmw(c->w->sess, k, &lplan_ops, &p, t_parts, nparts)
	                : hlog_rmw(c->w->sess, k, &lplan_ops, &p);
	if (rc == HLOG_OK && nparts) {   /* the parts' kinds counted (coll_list_elem.c) */
		c->w->stats.coll_group_writes++;
		for (size_t i = 0; i < nparts; i++)
			if (t_parts[i].del)
				c->w->stats.coll_list_elem_drops++;
			else if (t_keys[i][8] == COLL_KIND_ELEM)
				c->w->stats.coll_list_elem_writes++;
			else
				c->w->stats.coll_list_node_writes++;
	}
	return rc;
}

/* A new head from lh's with positions lo, hi, end nodes l and r (NULL: one node), mbytes, written. */
static int head_compose(client *c, const hlog_key *k, const struct lhead *lh, uint64_t lo, uint64_t hi,
                        const uint8_t *l, size_t llen, const uint8_t *r, size_t rlen, uint64_t mbytes,
                        size_t nparts)
{
	coll_head h = lh->h;
	size_t need = COLL_HDR + dq_head_used(llen, r ? rlen : 0);
	if (lp_buf_reserve(&t_nh, need) < 0)
		return -ENOMEM;
	h.mbytes = mbytes;
	t_nh.len = dq_write(t_nh.p, &h, lo, hi, lh->d.c, l, llen, r, rlen);
	return head_put(c, k, lh, t_nh.p, t_nh.len, nparts);
}

/* ---------------- nodes ---------------- */

static void node_key(hlog_key *k, uint8_t *kb, uint64_t cid, uint64_t n)
{
	dq_node_key(kb, cid, n);
	hlog_key_init_internal(k, kb, DQ_NODE_KEY_BYTES);
}

static bool interior(const dq_head *d, uint64_t n)
{
	return n > dq_first_node(d) && n < dq_last_node(d);
}

/* Prefetch the interior nodes among a..b in one wave. HLOG_OK, HLOG_PENDING or an error. */
static int nodes_prefetch(client *c, const struct lhead *lh, uint64_t a, uint64_t b)
{
	uint8_t kb[DQ_NODE_KEY_BYTES];
	hlog_key k;
	bool pending = false;
	for (uint64_t n = a; n <= b; n++) {
		if (!interior(&lh->d, n))
			continue;
		node_key(&k, kb, lh->h.cid, n);
		int rc = hlog_prefetch(c->w->sess, &k);
		if (rc == HLOG_PENDING)
			pending = true;
		else if (rc < 0)
			return rc;
	}
	return pending ? HLOG_PENDING : HLOG_OK;
}

static void part_copy_cb(void *ctx, const hlog_value *v)
{
	int *err = ctx;
	if (buf_set(&t_tmp, v->ptr, v->len) < 0)
		*err = -ENOMEM;
}

/* Node n's listpack: an end node from the head, an interior one read into t_tmp (valid until the
 * next read). HLOG_OK, HLOG_PENDING or an error (a missing or short part: SPW_E_CORRUPT). */
static int node_get(client *c, const struct lhead *lh, uint64_t n, const uint8_t **p, size_t *len)
{
	uint8_t kb[DQ_NODE_KEY_BYTES];
	hlog_key k;
	int err = 0;
	if (n == dq_first_node(&lh->d)) {
		*p = lh->d.left;
		*len = lh->d.llen;
		return HLOG_OK;
	}
	if (n == dq_last_node(&lh->d)) {
		*p = lh->d.right;
		*len = lh->d.rlen;
		return HLOG_OK;
	}
	node_key(&k, kb, lh->h.cid, n);
	int rc = hlog_read(c->w->sess, &k, part_copy_cb, &err);
	if (rc == HLOG_NOTFOUND)
		return SPW_E_CORRUPT;
	if (rc != HLOG_OK)
		return rc;
	if (err)
		return err;
	c->w->stats.coll_list_node_reads++;
	if (t_tmp.len < LP_EMPTY_BYTES || lp_bytes(t_tmp.p) != t_tmp.len || lp_count(t_tmp.p) != lh->d.c)
		return SPW_E_CORRUPT;
	*p = t_tmp.p;
	*len = t_tmp.len;
	return HLOG_OK;
}

/* The entries of nodes a..b (first <= a <= b <= last node) into t_win in order, the interior
 * ones prefetched in one wave (note 3); *pbytes: the parts' value bytes read. Its first entry has
 * position max(lo, a * c). */
static int window_load(client *c, const struct lhead *lh, uint64_t a, uint64_t b, uint64_t *pbytes)
{
	const uint8_t *p;
	size_t len;
	uint64_t entries = 0;
	int rc;
	*pbytes = 0;
	if ((rc = nodes_prefetch(c, lh, a, b)) != HLOG_OK)
		return rc;
	if (coll_lp_asm_begin(&t_win) < 0)
		return -ENOMEM;
	for (uint64_t n = a; n <= b; n++) {
		if ((rc = node_get(c, lh, n, &p, &len)) != HLOG_OK)
			return rc;
		if (interior(&lh->d, n))
			*pbytes += len;
		entries += lp_count(p);
		if ((rc = coll_lp_asm_add(&t_win, p, len)) < 0)
			return rc;
	}
	coll_lp_asm_end(&t_win, entries);
	return HLOG_OK;
}

static uint64_t window_start(const struct lhead *lh, uint64_t a)
{
	uint64_t s = a * lh->d.c;
	return s < lh->d.lo ? lh->d.lo : s;
}

/* ---------------- point writes (note 2) ---------------- */

static void part_set(size_t i, uint64_t cid, uint64_t n, const uint8_t *val, size_t len)
{
	dq_node_key(t_keys[i], cid, n);
	hlog_key_init_internal(&t_parts[i].key, t_keys[i], DQ_NODE_KEY_BYTES);
	t_parts[i].val = val;
	t_parts[i].len = len;
	t_parts[i].cap = 0;      /* a node is full when written: no spare room (log/group.c note 9) */
	t_parts[i].del = false;
}

/* Part i: the element at pos out of line (val NULL: its tombstone, coll_list_elem.c note 3). */
static void elem_set(size_t i, uint64_t cid, uint64_t pos, const uint8_t *val, size_t len)
{
	le_part_set(&t_parts[i], t_keys[i], cid, pos, val, len);
}

/* Tombstones from part i on for the references in lp, their elements' bytes added to *bytes. */
static int elem_drops(size_t i, uint64_t cid, const uint8_t *lp, uint64_t *bytes, size_t *n)
{
	uint64_t b, nrefs = le_refs(lp, &b);
	*n = 0;
	if (nrefs && arrays_reserve(i + nrefs) < 0)
		return -ENOMEM;
	*n = le_drops(lp, cid, t_parts + i, t_keys + i);
	*bytes += b;
	return 0;
}

/* A push past its end node: the window cut into nodes, the filled ones written as parts (note 2). */
static int op_push(client *c, const hlog_key *k, const struct lhead *lh, coll_list_op *o)
{
	const dq_head *d = &lh->d;
	uint64_t n = (uint64_t)o->nelems, c_ = d->c;
	bool one = !d->right;
	int rc;

	size_t need = LP_EMPTY_BYTES, at = 0, ne = 0, min = le_threshold();
	uint64_t lo = o->left ? d->lo - n : d->lo, hi = o->left ? d->hi : d->hi + n, ebytes = 0;
	for (uint64_t i = 0; i < n; i++)
		need += o->elems[i].len > min ? DQ_REF_ENTRY_BYTES : o->elems[i].len + LP_ENTRY_EXTRA;
	if (lp_buf_reserve(&t_r, need) < 0 || lp_buf_reserve(&t_tmp, need) < 0 || arrays_reserve(n) < 0)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		/* LPUSH a b c leaves c b a at the head: the last argument is the first entry. */
		const resp_slice *a = &o->elems[o->left ? n - 1 - i : i];
		uint64_t pos = (o->left ? lo : d->hi) + i;
		if (a->len <= min) {
			at += lp_entry_encode(t_r.p + at, a->ptr, a->len);
			continue;
		}
		if ((rc = le_fits(a->len)) < 0)   /* coll_list_elem.c note 5 */
			return rc;
		at += dq_ref_encode(t_r.p + at, pos, a->len);
		ne++;
		ebytes += a->len;
	}
	t_tmp.len = dq_run(t_tmp.p, t_r.p, t_r.p + at, n);
	const uint8_t *end = o->left || one ? d->left : d->right;
	size_t elen = o->left || one ? d->llen : d->rlen;
	if (coll_lp_asm_begin(&t_win) < 0 ||
	    coll_lp_asm_add(&t_win, o->left ? t_tmp.p : end, o->left ? t_tmp.len : elen) < 0 ||
	    coll_lp_asm_add(&t_win, o->left ? end : t_tmp.p, o->left ? elen : t_tmp.len) < 0)
		return -ENOMEM;
	coll_lp_asm_end(&t_win, n + lp_count(end));
	uint64_t wlo = o->left ? lo : one ? d->lo : dq_last_node(d) * c_;
	uint64_t nodes = dq_split_nodes(wlo, n + lp_count(end), d->c);
	if ((rc = arrays_reserve(nodes + 1 + ne)) < 0)
		return rc;
	long nn = 1;
	if (nodes == 1) {   /* the common case: within the end node, no cut (no walk of its entries) */
		if (buf_set(&t_cut, t_win.p, t_win.len) < 0)
			return -ENOMEM;
		t_offs[0] = 0;
		t_offs[1] = t_win.len;
	} else if ((nn = dq_split(t_win.p, wlo, d->c, &t_cut, t_offs)) < 0) {
		return (int)nn;
	}
	uint64_t w0 = wlo / c_, nlo = lo / c_, nhi = (hi - 1) / c_, mbytes = lh->h.mbytes + ebytes;
	const uint8_t *l = d->left, *r = nhi == nlo ? NULL : d->right;
	size_t llen = d->llen, rlen = d->rlen, np = 0;
	for (uint64_t i = 0; ne && i < n; i++) {   /* the elements out of line, in the group */
		const resp_slice *a = &o->elems[o->left ? n - 1 - i : i];
		uint64_t pos = (o->left ? lo : d->hi) + i;
		if (a->len <= min)
			continue;
		if ((rc = le_alone(c, lh->h.cid, pos, a->ptr, a->len)) < 0 || rc == HLOG_PENDING)
			return rc;   /* pending: not written (its key is cold): park, the re-run writes it */
		if (!rc)
			elem_set(np++, lh->h.cid, pos, (const uint8_t *)a->ptr, a->len);
	}
	for (long j = 0; j < nn; j++) {
		uint64_t node = w0 + (uint64_t)j;
		const uint8_t *p = t_cut.p + t_offs[j];
		size_t len = t_offs[j + 1] - t_offs[j];
		if (node == nlo) {
			l = p;
			llen = len;
		} else if (node == nhi) {
			r = p;
			rlen = len;
		} else {
			part_set(np++, lh->h.cid, node, p, len);
			mbytes += len;
		}
	}
	rc = head_compose(c, k, lh, lo, hi, l, llen, r, rlen, mbytes, np);
	o->len = (long long)(hi - lo);
	return rc;
}

/* Pops read the nodes they empty and copy the new end node into the head (note 2). */
static int op_pop(client *c, const hlog_key *k, const struct lhead *lh, coll_list_op *o)
{
	const dq_head *d = &lh->d;
	uint64_t cnt = d->hi - d->lo, kk = o->a < 0 ? 0 : (uint64_t)o->a, pbytes, c_ = d->c;
	uint64_t lo = d->lo, hi = d->hi, a, b;
	int rc;

	o->n = 0;
	o->popped = lp_empty;
	if (kk > cnt)
		kk = cnt;
	if (kk == 0)
		return HLOG_OK;
	if (o->left) {
		lo += kk;
		a = dq_first_node(d);
		b = lo == hi ? dq_last_node(d) : lo / c_;
	} else {
		hi -= kk;
		b = dq_last_node(d);
		a = lo == hi ? dq_first_node(d) : (hi - 1) / c_;
	}
	if ((rc = window_load(c, lh, a, b, &pbytes)) != HLOG_OK)
		return rc;
	uint64_t ws = window_start(lh, a), we = (b + 1) * c_ < d->hi ? (b + 1) * c_ : d->hi, wn = we - ws;
	/* popped: the first kk (left) or last kk (right) entries of the window; rest: the others.
	 * The cut is found from the popped end, so a pop walks only what it pops. */
	const uint8_t *first = lp_first(t_win.p), *eof = t_win.p + t_win.len - 1, *cut;
	if (o->left) {
		cut = dq_skip(t_win.p, first, kk);
		cut = cut ? cut : eof;
	} else {
		cut = lp_last(t_win.p);
		for (uint64_t i = 1; i < kk && cut; i++)
			cut = lp_prev(t_win.p, cut);
		if (!cut)
			return SPW_E_CORRUPT;
	}
	const uint8_t *pa = o->left ? first : cut, *pe = o->left ? cut : eof;
	const uint8_t *ra = o->left ? cut : first, *re = o->left ? eof : cut;
	if (lp_buf_reserve(&t_res, (size_t)(pe - pa) + LP_EMPTY_BYTES) < 0 ||
	    lp_buf_reserve(&t_cut, (size_t)(re - ra) + LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	t_res.len = dq_run(t_res.p, pa, pe, kk);
	t_cut.len = dq_run(t_cut.p, ra, re, wn - kk);
	size_t ne = 0;   /* the popped references' tombstones, then the elements for the reply */
	if (lo != hi && (rc = elem_drops(0, lh->h.cid, t_res.p, &pbytes, &ne)) < 0)
		return rc;
	if ((rc = le_resolve(c, lh->h.cid, &t_res)) != HLOG_OK)
		return rc;
	uint64_t mbytes = lh->h.mbytes >= pbytes ? lh->h.mbytes - pbytes : 0;
	if (lo == hi)
		rc = head_put(c, k, lh, NULL, 0, 0);
	else if (o->left)
		rc = lo / c_ == dq_last_node(d)
		         ? head_compose(c, k, lh, lo, hi, t_cut.p, t_cut.len, NULL, 0, mbytes, ne)
		         : head_compose(c, k, lh, lo, hi, t_cut.p, t_cut.len, d->right, d->rlen, mbytes, ne);
	else
		rc = (hi - 1) / c_ == dq_first_node(d)
		         ? head_compose(c, k, lh, lo, hi, t_cut.p, t_cut.len, NULL, 0, mbytes, ne)
		         : head_compose(c, k, lh, lo, hi, d->left, d->llen, t_cut.p, t_cut.len, mbytes, ne);
	if (rc == HLOG_OK) {
		o->n = (long)kk;
		o->popped = t_res.p;
	}
	return rc;
}

/* LSET: the node of the index rewritten (note 2). */
static int op_set(client *c, const hlog_key *k, const struct lhead *lh, coll_list_op *o)
{
	const dq_head *d = &lh->d;
	long long cnt = (long long)(d->hi - d->lo), idx = o->a < 0 ? o->a + cnt : o->a;
	const uint8_t *p;
	size_t len;
	int rc;

	o->result = 0;
	if (idx < 0 || idx >= cnt)
		return HLOG_OK;
	uint64_t pos = d->lo + (uint64_t)idx, n = pos / d->c;
	if ((rc = nodes_prefetch(c, lh, n, n)) != HLOG_OK || (rc = node_get(c, lh, n, &p, &len)) != HLOG_OK)
		return rc;
	const uint8_t *at = dq_skip(p, lp_first(p), pos - window_start(lh, n));
	const resp_slice *v = o->val;
	bool big = v->len > le_threshold();   /* out of line (coll_list_elem.c note 3) */
	uint64_t mb = lh->h.mbytes, opos, olen;
	size_t np = 0, elen;
	if (!at)
		return SPW_E_CORRUPT;
	if (big && (rc = le_fits(v->len)) < 0)
		return rc;
	if (lp_buf_reserve(&t_r, v->len + LP_ENTRY_EXTRA + DQ_REF_ENTRY_BYTES) < 0 || arrays_reserve(3) < 0)
		return -ENOMEM;
	elen = big ? dq_ref_encode(t_r.p, pos, v->len) : lp_entry_encode(t_r.p, v->ptr, v->len);
	if (dq_is_ref(at)) {
		dq_ref_parse(at, &opos, &olen);
		mb -= olen;
		if (!big)
			elem_set(np++, lh->h.cid, pos, NULL, 0);
	}
	if (big && ((rc = le_alone(c, lh->h.cid, pos, v->ptr, v->len)) < 0 || rc == HLOG_PENDING))
		return rc;   /* pending: the old part is cold, nothing written: park and run again */
	if (big && !rc)
		elem_set(np++, lh->h.cid, pos, (const uint8_t *)v->ptr, v->len);
	mb += big ? v->len : 0;
	if (lp_buf_reserve(&t_set, len + elen) < 0)
		return -ENOMEM;
	t_set.len = dq_replace(t_set.p, p, at, t_r.p, elen);
	o->result = 1;
	if (n == dq_first_node(d))
		return head_compose(c, k, lh, d->lo, d->hi, t_set.p, t_set.len, d->right, d->rlen, mb, np);
	if (n == dq_last_node(d))
		return head_compose(c, k, lh, d->lo, d->hi, d->left, d->llen, t_set.p, t_set.len, mb, np);
	part_set(np, lh->h.cid, n, t_set.p, t_set.len);
	if (t_set.len == len && !np) {   /* the head unchanged: the part alone */
		rc = hlog_upsert_typed(c->w->sess, &t_parts[0].key, t_set.p, t_set.len, HLOG_NO_EXPIRY,
		                       HLOG_T_PART);
		c->w->stats.coll_list_node_writes += rc == HLOG_OK;
		return rc;
	}
	return head_compose(c, k, lh, d->lo, d->hi, d->left, d->llen, d->right, d->rlen,
	                    mb - len + t_set.len, np + 1);
}

/* LTRIM: lo and hi move, the two new end nodes are copied into the head (note 2; mbytes: note 7). */
static int op_trim(client *c, const hlog_key *k, const struct lhead *lh, coll_list_op *o)
{
	const dq_head *d = &lh->d;
	long from, to;
	const uint8_t *p;
	size_t len;
	int rc;

	if (!list_range((long)(d->hi - d->lo), (long)o->a, (long)o->b, &from, &to))
		return head_put(c, k, lh, NULL, 0, 0);
	uint64_t lo = d->lo + (uint64_t)from, hi = d->lo + (uint64_t)to + 1, a = lo / d->c, b = (hi - 1) / d->c;
	if (lo == d->lo && hi == d->hi)
		return HLOG_OK;
	int ra = nodes_prefetch(c, lh, a, a), rb = nodes_prefetch(c, lh, b, b);   /* one wave */
	if (ra != HLOG_OK || rb != HLOG_OK)
		return ra < 0 ? ra : rb < 0 ? rb : HLOG_PENDING;
	uint64_t aend = (a + 1) * d->c < hi ? (a + 1) * d->c : hi;
	if ((rc = node_get(c, lh, a, &p, &len)) != HLOG_OK ||
	    (rc = slice(&t_cut, p, lo - window_start(lh, a), aend - lo)) < 0)
		return rc;
	if (b != a && ((rc = node_get(c, lh, b, &p, &len)) != HLOG_OK ||
	               (rc = slice(&t_r, p, b * d->c - window_start(lh, b), hi - b * d->c)) < 0))
		return rc;
	uint64_t before = dq_last_node(d) - dq_first_node(d), after = b - a;
	before = before > 1 ? before - 1 : 0;
	after = after > 1 ? after - 1 : 0;
	uint64_t mbytes = before ? (uint64_t)((double)lh->h.mbytes * (double)after / (double)before) : 0;
	return head_compose(c, k, lh, lo, hi, t_cut.p, t_cut.len, b != a ? t_r.p : NULL,
	                    b != a ? t_r.len : 0, mbytes, 0);
}

/* ---------------- whole writes and the conversion (notes 5, 6) ---------------- */

bool coll_list_large_wanted(int enc, size_t used)
{
	(void)enc;
	return used > 2 * RECORD_MAX;
}

static void edit_reset(coll_edit *e, bool found)
{
	e->found = found;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	e->count = 0;
}

/* The edit's output: out, or its patch run on the view's payload into t_out. */
static int edit_output(coll_edit *e, const coll_view *view, const uint8_t **out, size_t *len)
{
	if (e->action == COLL_DELETE) {
		*out = lp_empty;
		*len = sizeof(lp_empty);
	} else if (e->patch) {
		if (lp_buf_reserve(&t_out, e->out_len) < 0)
			return -ENOMEM;
		e->patch(e->patch_arg, view ? view->p : NULL, t_out.p, false);
		t_out.len = e->out_len;
		*out = t_out.p;
		*len = e->out_len;
	} else {
		*out = e->out;
		*len = e->out_len;
	}
	return 0;
}

static int part_upsert(client *c, const uint8_t *key, size_t klen, const void *val, size_t len)
{
	hlog_key k;
	hlog_key_init_internal(&k, key, klen);
	return hlog_upsert_typed(c->w->sess, &k, val, len, HLOG_NO_EXPIRY, HLOG_T_PART);
}

/* Note 6: a new large list (new cid) from the listpack out over the old value lh (t_head: the
 * bytes read; lh->len 0: the key was absent). */
static int write_large(client *c, const hlog_key *k, const struct lhead *lh, const uint8_t *out)
{
	coll_head h = { COLL_LIST, CENC_QUICKLIST, cid_new(), 0, 0, 0, 0 };
	uint64_t n = lp_count(out);
	uint8_t rk[COLL_REGISTRY_KEY_BYTES], kb[DQ_NODE_KEY_BYTES];
	le_part *ep;
	size_t ne;
	int rc;

	/* C from the bytes with the long elements out of line: outline at a trial lo first. */
	if ((rc = le_outline(out, DQ_POS_START, &t_r, &ep, &ne)) < 0)
		return rc;
	uint32_t cc = dq_choose_c(t_r.len, n, RECORD_MAX);
	uint64_t lo = (DQ_POS_START / cc) * cc, nodes = dq_split_nodes(lo, n, cc);
	if (ne && (rc = le_outline(out, lo, &t_r, &ep, &ne)) < 0)
		return rc;
	if ((rc = arrays_reserve(nodes + 1)) < 0)
		return rc;
	long nn = dq_split(t_r.p, lo, cc, &t_cut, t_offs);
	if (nn < 0)
		return (int)nn;
	coll_registry_key(rk, h.cid);
	if ((rc = part_upsert(c, rk, sizeof(rk), k->ptr, k->len)) != HLOG_OK)
		return rc;
	h.mbytes = k->len;
	for (size_t j = 0; j < ne; j++) {   /* before the head, as the nodes (note 6) */
		dq_elem_key(kb, h.cid, ep[j].pos);
		if ((rc = part_upsert(c, kb, sizeof(kb), ep[j].val, ep[j].len)) != HLOG_OK)
			return rc;
		h.mbytes += ep[j].len;
		c->w->stats.coll_list_elem_writes++;
	}
	for (long j = 1; j + 1 < nn; j++) {
		size_t len = t_offs[j + 1] - t_offs[j];
		dq_node_key(kb, h.cid, lo / cc + (uint64_t)j);
		if ((rc = part_upsert(c, kb, sizeof(kb), t_cut.p + t_offs[j], len)) != HLOG_OK)
			return rc;
		h.mbytes += len;
		c->w->stats.coll_list_node_writes++;
	}
	size_t rlen = nn > 1 ? t_offs[nn] - t_offs[nn - 1] : 0;
	if (lp_buf_reserve(&t_nh, COLL_HDR + dq_head_used(t_offs[1], rlen)) < 0)
		return -ENOMEM;
	t_nh.len = dq_write(t_nh.p, &h, lo, lo + n, cc, t_cut.p, t_offs[1],
	                    nn > 1 ? t_cut.p + t_offs[nn - 1] : NULL, rlen);
	struct lplan p = { lh->len ? t_head.p : NULL, lh->len, t_nh.p, t_nh.len, 0 };
	return hlog_rmw(c->w->sess, k, &lplan_ops, &p);
}

/* Note 5: the edit's result (out, len) written afresh over lh: deleted when empty, a new large
 * list past the limit, else a small record (with its count, coll.c note 7). */
static int write_afresh(client *c, const hlog_key *k, coll_edit *e, const struct lhead *lh,
                        const uint8_t *out, size_t len)
{
	struct lplan p = { lh->len ? t_head.p : NULL, lh->len, NULL, 0, 0 };
	if (e->action == COLL_DELETE || !lp_first(out))
		return lh->len ? hlog_rmw(c->w->sess, k, &lplan_ops, &p) : HLOG_OK;
	if (coll_list_large_wanted(e->enc, len)) {
		int rc = write_large(c, k, lh, out);
		if (rc == HLOG_OK && !lh->large)
			c->w->stats.coll_large_conversions++;
		return rc;
	}
	uint32_t count = e->count ? e->count : lp_count(out);
	if (lp_buf_reserve(&t_nh, COLL_HDR + len + COLL_COUNT_BYTES) < 0)
		return -ENOMEM;
	coll_hdr_write(t_nh.p, COLL_LIST, CENC_QUICKLIST, len);
	t_nh.p[2] = COLL_F_COUNT;
	memmove(t_nh.p + COLL_HDR, out, len);
	lp_u32_write(t_nh.p + COLL_HDR + len, count);
	p.val = t_nh.p;
	p.vlen = COLL_HDR + len + COLL_COUNT_BYTES;
	return hlog_rmw(c->w->sess, k, &lplan_ops, &p);
}

/* Note 5: the command's own edit on the whole list assembled. */
static int whole_rmw(client *c, const hlog_key *k, const struct lhead *lh, coll_edit *e)
{
	const uint8_t *out;
	size_t len;
	uint64_t pbytes;
	int rc;
	if ((rc = window_load(c, lh, dq_first_node(&lh->d), dq_last_node(&lh->d), &pbytes)) != HLOG_OK ||
	    (rc = le_resolve(c, lh->h.cid, &t_win)) != HLOG_OK)
		return rc;
	coll_view view = { COLL_LIST, lh->h.enc, t_win.p, t_win.len, (int64_t)lh->h.count, NULL };
	c->w->stats.coll_list_whole++;
	edit_reset(e, true);
	if ((rc = e->fn(e, &view)) < 0 || e->action == COLL_KEEP)
		return rc;
	if ((rc = edit_output(e, &view, &out, &len)) < 0)
		return rc;
	return write_afresh(c, k, e, lh, out, len);
}

/* A write on a large list (coll_large_rmw handed it over): the op of e->list_op, else note 5. */
int coll_list_large_rmw(client *c, const hlog_key *k, coll_edit *e)
{
	struct lhead lh;
	coll_list_op *o = e->list_op;
	int rc;

	coll_latch_excl(k->hash);
	if (o && (o->op == COLL_LIST_PUSH || o->op == COLL_LIST_POP)) {
		bool slow = false;
		if (!t_keyed)   /* no trim: note 9's buffers hold at most DQ_C_MAX short entries */
			bufs_enter();
		rc = coll_list_fast_rmw(c, k, o, &slow);
		if (!slow) {
			e->found = rc == HLOG_OK;
			goto done;
		}
	}
	bufs_enter();
	rc = lhead_read(c, k, &lh);
	if (rc == HLOG_NOTFOUND)
		rc = COLL_E_RESTART;   /* gone since coll.c met it: run again on what is there */
	if (rc != HLOG_OK)
		goto out;
	e->found = true;
	switch (o ? o->op : 0) {
	case COLL_LIST_PUSH: rc = op_push(c, k, &lh, o); break;
	case COLL_LIST_POP: rc = op_pop(c, k, &lh, o); break;
	case COLL_LIST_SET: rc = op_set(c, k, &lh, o); break;
	case COLL_LIST_TRIM: rc = op_trim(c, k, &lh, o); break;
	case COLL_LIST_PROBE: rc = HLOG_OK; break;
	default: rc = whole_rmw(c, k, &lh, e); break;
	}
done:
	if (o && rc == HLOG_OK)
		o->done = true;
out:
	coll_latch_excl_release(k->hash);
	return rc;
}

/* The small path's edit made a list past the limit (COLL_E_CONVERT): run it again on a copy of
 * the small record under the latch and write the result afresh (note 6). */
int coll_list_large_convert(client *c, const hlog_key *k, coll_edit *e)
{
	struct lhead lh = { .len = 0 };
	coll_view view;
	const uint8_t *out;
	size_t len;
	int rc;

	bufs_enter();
	coll_latch_excl(k->hash);
	rc = hlog_read(c->w->sess, k, head_copy_cb, &lh);
	if (rc == HLOG_OK && lh.err)
		rc = lh.err;
	if (rc == HLOG_PENDING || rc < 0 || (rc == HLOG_OK && lh.large)) {
		rc = rc == HLOG_OK ? COLL_E_RESTART : rc;
		goto out;
	}
	bool found = rc == HLOG_OK;
	if (!found)
		lh.len = 0;
	if (found && lh.rtype == HLOG_T_STRING) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	if (found && (lh.rtype != HLOG_T_HEAD || !coll_parse(t_head.p, lh.len, &view))) {
		rc = SPW_E_CORRUPT;
		goto out;
	}
	if (found && view.type != COLL_LIST) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	rc = HLOG_OK;
	if (!found && !e->create)
		goto out;
	edit_reset(e, found);
	if ((rc = e->fn(e, found ? &view : NULL)) < 0 || e->action == COLL_KEEP)
		goto out;
	if ((rc = edit_output(e, found ? &view : NULL, &out, &len)) < 0)
		goto out;
	rc = write_afresh(c, k, e, &lh, out, len);
out:
	coll_latch_excl_release(k->hash);
	return rc;
}

/* ---------------- reads (note 3) ---------------- */

/* COLL_HINT_LIST: the element or range asked for into t_res. */
static int point_read(client *c, const struct lhead *lh, const coll_hint *hint)
{
	const dq_head *d = &lh->d;
	long long cnt = (long long)(d->hi - d->lo);
	uint64_t pbytes;
	const uint8_t *p;
	size_t len;
	long from, to;
	int rc;

	if (hint->list_index) {
		long long idx = hint->list_a < 0 ? hint->list_a + cnt : hint->list_a;
		if (idx < 0 || idx >= cnt)
			return buf_set(&t_res, lp_empty, sizeof(lp_empty));
		uint64_t pos = d->lo + (uint64_t)idx, n = pos / d->c;
		if ((rc = nodes_prefetch(c, lh, n, n)) != HLOG_OK || (rc = node_get(c, lh, n, &p, &len)) != HLOG_OK ||
		    (rc = slice(&t_res, p, pos - window_start(lh, n), 1)) < 0)
			return rc;
		return le_resolve(c, lh->h.cid, &t_res);
	}
	if (!list_range((long)cnt, (long)hint->list_a, (long)hint->list_b, &from, &to))
		return buf_set(&t_res, lp_empty, sizeof(lp_empty));
	uint64_t a = (d->lo + (uint64_t)from) / d->c, b = (d->lo + (uint64_t)to) / d->c;
	if ((rc = window_load(c, lh, a, b, &pbytes)) != HLOG_OK)
		return rc;
	if ((rc = slice(&t_res, t_win.p, d->lo + (uint64_t)from - window_start(lh, a),
	                (uint64_t)(to - from + 1))) < 0)
		return rc;
	return le_resolve(c, lh->h.cid, &t_res);
}

/* A read of a large list: COLL_HINT_LIST (note 3), else the whole list in order. */
int coll_list_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx)
{
	struct lhead lh;
	uint64_t pbytes;
	int rc;
	(void)type;

	bufs_enter();
	coll_latch_shared(k->hash);
	if ((rc = lhead_read(c, k, &lh)) != HLOG_OK) {
		rc = rc == HLOG_NOTFOUND ? COLL_E_RESTART : rc;
		goto out;
	}
	hlog_value hv = { 0 };
	hv.ptr = t_head.p;
	hv.len = lh.len;
	hv.rtype = HLOG_T_HEAD;
	if (hint && hint->mode == COLL_HINT_LIST) {
		if ((rc = point_read(c, &lh, hint)) != HLOG_OK)
			goto out;
		coll_view view = { COLL_LIST, lh.h.enc, t_res.p, t_res.len, -1, &lh.h };
		fn(ctx, &view, &hv);
		goto out;
	}
	if ((rc = window_load(c, &lh, dq_first_node(&lh.d), dq_last_node(&lh.d), &pbytes)) != HLOG_OK ||
	    (rc = le_resolve(c, lh.h.cid, &t_win)) != HLOG_OK)
		goto out;
	c->w->stats.coll_list_whole++;
	c->w->stats.coll_whole_reads++;
	coll_view view = { COLL_LIST, lh.h.enc, t_win.p, t_win.len, (int64_t)lh.h.count, NULL };
	fn(ctx, &view, &hv);
out:
	coll_latch_shared_release(k->hash);
	return rc;
}

/* ---------------- compaction's rule (coll/deque.h dq_part_live) ---------------- */

bool coll_list_part_live(const uint8_t *head, size_t len, int kind, uint64_t n)
{
	if (kind == COLL_KIND_ELEM)
		return dq_elem_live(head, len, n);
	return kind != COLL_KIND_NODE || dq_part_live(head, len, n);
}
