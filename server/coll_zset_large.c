/*
 * coll_zset_large.c - the large layout of sorted sets (docs/ARCHITECTURE.md "Large collections",
 * the zset row): member -> score in linear-hashing buckets (coll/bucket.h, as a hash's, entries
 * (member, score) pairs), the order in a counted B+tree of nodes (coll/ztree.h) under parts
 * cid|t|<node id>. coll_large.c hands a large zset head here (read, rmw, convert).
 *
 * Design notes:
 *  1. The head: coll/coll.h's 48-byte prefix (count, mbytes, the buckets' level and split), then
 *     root node id +48, depth +56 (0: the root is a leaf), the next node id +64 (ZHEAD bytes). A
 *     zset becomes large when its payload is skiplist-encoded and past coll-record-max
 *     (coll_zset_large_wanted), and stays large until it is empty (no conversion back in v1).
 *  2. Reads (shared latch). ZSCORE ZMSCORE (COLL_HINT_MEMBERS): the command's own code gets a
 *     listpack of its members' pairs from their buckets. ZRANK ZREVRANK (COLL_HINT_ZRANK): the
 *     score from the bucket, the rank from one descent (keys before (score, member)). ZRANGE by
 *     rank or score, ZCOUNT (COLL_HINT_ZRANGE): one or two descents give the run's forward ranks
 *     [from, to] (LIMIT applied there), then the run is collected leaf by leaf, each leaf by a
 *     descent by rank through cached inner nodes, the leaves the run needs under the last inner
 *     node prefetched in one wave; the command gets exactly the run (zq->large_exact). ZCARD is
 *     the head's count (coll_large.c). Everything else is a whole read: the tree level by level,
 *     each level prefetched in one wave, the leaves concatenated in order, which is the small
 *     payload, so the command's own small code runs on it (and coll_large_flat: RENAME COPY DUMP).
 *  3. Point writes (exclusive latch): ZADD ZINCRBY ZREM (COLL_ZE_MEMBERS: the members' pairs from
 *     their buckets) and ZPOPMIN ZPOPMAX ZMPOP (COLL_ZE_POP: the first or last n pairs from the
 *     tree) run the command's small edit on that sub-listpack; its output against its input says
 *     which pairs went and came. Each change is a bucket edit plus a tree delete or insert (a
 *     descent, the leaf's pair, the counts on the path), all on a per-command cache of nodes and
 *     buckets; every part that changed and the new head are then ONE hlog_group_rmw whose head
 *     plan checks the head is still the bytes read (else COLL_E_RESTART). Every read a write
 *     needs happens before anything is written, so a park (HLOG_PENDING) changes nothing and the
 *     re-run finds the records in the session's fetch cache. Every other write reads the set
 *     whole, runs its small edit and writes the result afresh with a new cid (note 5).
 *  4. The tree: separators are lower bounds (ztree.c note 1). A node past 2 x coll-record-max
 *     splits in two by bytes (a new node id from the head), the parent getting an entry, up to a
 *     new root. A node emptied is removed from its parent and its part tombstoned in the same
 *     group, unless it is its parent's only child (then the chain stays, so no inner node is ever
 *     empty). No merges in v1 (a set drained by pops keeps its leaves' sizes, not their count).
 *     A node of fewer than 4 pairs or entries never splits, and an inner level built afresh
 *     puts 2 entries at least in a node: separators are whole members (ztree.c note 1), so long
 *     members make nodes of few entries that are big, and splitting those would only add
 *     levels (a build of 1-entry nodes would never end).
 *  5. Write afresh (conversion, and every whole write): a new cid, buckets as a hash's, leaves of
 *     about coll-record-max bytes cut from the sorted payload, inner nodes built bottom up, the
 *     registry cid|R, all one group with the head (bounded by hlog_group_max_bytes: a whole write
 *     of a set past it answers the store's too-big error). The old cid's parts die with its head
 *     (coll_part_live: the registry's owner no longer has that cid).
 *  6. Buckets split as a hash's (coll_large.c note 5): after a write, when a bucket it changed
 *     passes 2 x coll-record-max, the bucket at the split pointer splits (read if untouched).
 */
#include "server/zset_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coll/bucket.h"
#include "coll/latch.h"
#include "coll/list.h"
#include "coll/ztree.h"
#include "server/zset_large_int.h"

const uint8_t zl_lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };


__thread struct zcache zl_nodes, zl_bkts;
__thread lp_buf zl_sub, zl_two, zl_flat, zl_small, zl_route, zl_leaves;
__thread hlog_group_part *zl_parts;
__thread uint8_t (*zl_keys)[ZKEY_BYTES];
__thread uint64_t zl_run_node_reads;
static __thread size_t t_pcap;
static __thread uint64_t t_rng;

/* ---------------- small helpers ---------------- */

static void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

void zl_node_key(uint8_t *out, uint64_t cid, uint64_t id)
{
	be64_put(out, cid);
	out[8] = COLL_KIND_ZNODE;
	be64_put(out + 9, id);
}

uint64_t zl_cid_new(void)
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

void zl_cache_reset(struct zcache *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].b.cap > BUF_KEEP)
			lp_buf_free(&c->v[i].b);
	c->n = 0;
}

static __thread bool t_keyed;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static pthread_key_t bufs_key;

static void cache_destroy(struct zcache *c)
{
	for (size_t i = 0; i < c->cap; i++)
		lp_buf_free(&c->v[i].b);
	free(c->v);
	c->v = NULL;
	c->n = c->cap = 0;
}

/* The thread's buffers and caches go when it exits (the key's destructor runs on it). */
static void bufs_destroy(void *unused)
{
	lp_buf *all[] = { &zl_sub, &zl_two, &zl_flat, &zl_small, &zl_route, &zl_leaves };
	(void)unused;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		lp_buf_free(all[i]);
	cache_destroy(&zl_nodes);
	cache_destroy(&zl_bkts);
	free(zl_parts);
	free(zl_keys);
	zl_parts = NULL;
	zl_keys = NULL;
	t_pcap = 0;
}

static void bufs_key_create(void) { pthread_key_create(&bufs_key, bufs_destroy); }

void zl_bufs_enter(void)
{
	lp_buf *all[] = { &zl_sub, &zl_two, &zl_flat, &zl_small, &zl_route, &zl_leaves };
	if (!t_keyed) {
		pthread_once(&bufs_once, bufs_key_create);
		pthread_setspecific(bufs_key, &t_keyed);
		t_keyed = true;
	}
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i]->cap > BUF_KEEP)
			lp_buf_free(all[i]);
	zl_cache_reset(&zl_nodes);
	zl_cache_reset(&zl_bkts);
	zl_run_node_reads = 0;
}

/* A new slot of c (its buffer kept from earlier use), or NULL. */
struct zpart *zl_cache_add(struct zcache *c, uint64_t id)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16;
		struct zpart *v = realloc(c->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		memset(v + c->cap, 0, (cap - c->cap) * sizeof(*v));
		c->v = v;
		c->cap = cap;
	}
	struct zpart *z = &c->v[c->n++];
	z->id = id;
	z->b.len = 0;
	z->olen = z->ocap = 0;
	z->lp = false;
	z->dirty = z->dead = z->fresh = false;
	return z;
}

long zl_cache_find(const struct zcache *c, uint64_t id)
{
	for (size_t i = c->n; i-- > 0;)
		if (c->v[i].id == id)
			return (long)i;
	return -1;
}

int zl_parts_reserve(size_t n)
{
	if (n <= t_pcap)
		return 0;
	size_t cap = n * 2;
	hlog_group_part *pp = realloc(zl_parts, cap * sizeof(*pp));
	if (pp)
		zl_parts = pp;
	void *kk = realloc(zl_keys, cap * sizeof(*zl_keys));
	if (kk)
		zl_keys = kk;
	if (!pp || !kk)
		return -ENOMEM;
	t_pcap = cap;
	return 0;
}

void zl_part_set(size_t i, size_t klen, const uint8_t *val, size_t len, size_t cap, bool del)
{
	hlog_key_init_internal(&zl_parts[i].key, zl_keys[i], klen);
	zl_parts[i].val = del ? NULL : val;
	zl_parts[i].len = del ? 0 : len;
	zl_parts[i].cap = del ? 0 : cap;
	zl_parts[i].del = del;
}

void zl_lp_trim(struct zpart *p)
{
	hlog_value v = { .ptr = p->b.p, .len = p->b.len };
	p->lp = true;
	p->ocap = p->b.len;
	p->b.len = coll_part_lp_len(&v);
}

void zl_copy_cb(void *ctx, const hlog_value *v)
{
	lp_buf *b = ctx;
	if (lp_buf_reserve(b, v->len ? v->len : 1) == 0) {
		memcpy(b->p, v->ptr, v->len);
		b->len = v->len;
	} else {
		b->len = SIZE_MAX;
	}
}

/* ---------------- the head (note 1) ---------------- */

void zl_head_encode(struct zhead *z)
{
	coll_large_write(z->raw, &z->h);
	lp_u32_write(z->raw + 4, ZHEAD - COLL_HDR);
	coll_u64_write(z->raw + 48, z->root);
	coll_u64_write(z->raw + 56, z->depth);
	coll_u64_write(z->raw + 64, z->next);
}

static void zhead_cb(void *ctx, const hlog_value *v)
{
	struct zhead *z = ctx;
	z->hv = *v;
	z->large = v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len);
	if (z->large) {
		if (!coll_large_parse(v->ptr, v->len, &z->h) || v->len < ZHEAD ||
		    lp_u32(v->ptr + 4) < ZHEAD - COLL_HDR || z->h.type != COLL_ZSET) {
			z->err = SPW_E_CORRUPT;
			return;
		}
		memcpy(z->raw, v->ptr, ZHEAD);
		z->root = coll_u64(v->ptr + 48);
		z->depth = coll_u64(v->ptr + 56);
		z->next = coll_u64(v->ptr + 64);
		if (z->depth > ZT_MAX_DEPTH)
			z->err = SPW_E_CORRUPT;
		z->hv.ptr = z->raw;
		z->hv.len = ZHEAD;
	} else if (z->copy) {
		if (lp_buf_reserve(z->copy, v->len ? v->len : 1) < 0) {
			z->err = -ENOMEM;
			return;
		}
		memcpy(z->copy->p, v->ptr, v->len);
		z->copy->len = v->len;
		z->hv.ptr = z->copy->p;
	}
}

int zl_head_read(client *c, const hlog_key *k, struct zhead *z)
{
	z->err = 0;
	z->large = false;
	int rc = hlog_read(c->w->sess, k, zhead_cb, z);
	return rc == HLOG_OK && z->err ? z->err : rc;
}

int zl_head_write(client *c, const hlog_key *k, struct head_plan *p, size_t nparts)
{
	int rc = nparts ? coll_group_write(c, k, &coll_head_ops, p, zl_parts, nparts)
	                : hlog_rmw(c->w->sess, k, &coll_head_ops, p);
	if (rc == HLOG_OK && nparts)
		c->w->stats.coll_group_writes++;
	return rc;
}

/* ---------------- nodes and buckets ---------------- */

/* Node id of the tree into the cache (*out: its index). HLOG_OK, HLOG_PENDING or an error. */
int zl_node_load(client *c, const struct zhead *z, uint64_t id, bool inner, size_t *out)
{
	long i = zl_cache_find(&zl_nodes, id);
	uint8_t key[ZKEY_BYTES];
	hlog_key k;
	if (i >= 0) {
		*out = (size_t)i;
		return zl_nodes.v[i].dead ? SPW_E_CORRUPT : HLOG_OK;
	}
	struct zpart *n = zl_cache_add(&zl_nodes, id);
	if (!n)
		return -ENOMEM;
	zl_node_key(key, z->h.cid, id);
	hlog_key_init_internal(&k, key, sizeof(key));
	int rc = hlog_read(c->w->sess, &k, zl_copy_cb, &n->b);
	if (rc != HLOG_OK) {
		zl_nodes.n--;
		return rc == HLOG_NOTFOUND ? SPW_E_CORRUPT : rc;
	}
	zl_run_node_reads++;
	if (n->b.len == SIZE_MAX) {
		zl_nodes.n--;
		return -ENOMEM;
	}
	if (!inner)
		zl_lp_trim(n);
	n->olen = n->b.len;
	if (inner ? !zt_inner_valid(n->b.p, n->b.len)
	          : !lp_validate(n->b.p, n->b.len, false, NULL, NULL) || lp_count(n->b.p) % 2) {
		zl_nodes.n--;
		return SPW_E_CORRUPT;
	}
	*out = zl_nodes.n - 1;
	return HLOG_OK;
}

/* The bucket of member m into the cache (*out). An absent bucket is empty. */
int zl_bucket_load(client *c, const struct zhead *z, const void *m, size_t mlen, size_t *out)
{
	uint64_t b = coll_bucket_of(&z->h, coll_member_hash(z->h.cid, m, mlen));
	long i = zl_cache_find(&zl_bkts, b);
	uint8_t key[ZKEY_BYTES];
	hlog_key k;
	if (i >= 0) {
		*out = (size_t)i;
		return HLOG_OK;
	}
	struct zpart *p = zl_cache_add(&zl_bkts, b);
	if (!p)
		return -ENOMEM;
	coll_bucket_key(key, z->h.cid, b);
	hlog_key_init_internal(&k, key, sizeof(key));
	int rc = hlog_read(c->w->sess, &k, zl_copy_cb, &p->b);
	if (rc == HLOG_NOTFOUND) {
		rc = lp_buf_set(&p->b, zl_lp_empty, sizeof(zl_lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		p->olen = 0;
		p->lp = true;
	} else if (rc == HLOG_OK) {
		c->w->stats.coll_part_reads++;
		if (p->b.len != SIZE_MAX)
			zl_lp_trim(p);
		p->olen = p->b.len;
		if (p->b.len == SIZE_MAX || !lp_validate(p->b.p, p->b.len, false, NULL, NULL))
			rc = p->b.len == SIZE_MAX ? -ENOMEM : SPW_E_CORRUPT;
	}
	if (rc != HLOG_OK) {
		zl_bkts.n--;
		return rc;
	}
	*out = zl_bkts.n - 1;
	return HLOG_OK;
}


/* Descend by bound b (or, b NULL, to the leaf holding rank r). Note 2. */
int zl_descend(client *c, const struct zhead *z, const zt_bound *b, uint64_t r, struct zpath *p)
{
	uint64_t id = z->root, before = 0;
	for (uint64_t l = 0;; l++) {
		size_t i;
		int rc = zl_node_load(c, z, id, l < z->depth, &i);
		if (rc != HLOG_OK)
			return rc;
		p->node[l] = i;
		if (l == z->depth)
			break;
		const uint8_t *nd = zl_nodes.v[i].b.p;
		uint64_t sk;
		uint32_t e = b ? zt_inner_pick(nd, b, &sk) : zt_inner_rank(nd, r - before, &sk);
		zt_ent en;
		zt_inner_ent(nd, zt_inner_off(nd, e), &en);
		before += sk;
		p->ent[l] = e;
		id = en.id;
	}
	p->before = before;
	return HLOG_OK;
}

/* The pairs before bound b (a rank, a score range's end). */
static int count_before(client *c, const struct zhead *z, const zt_bound *b, uint64_t *out)
{
	struct zpath p;
	int rc = zl_descend(c, z, b, 0, &p);
	if (rc == HLOG_OK)
		*out = p.before + zt_leaf_before(zl_nodes.v[p.node[z->depth]].b.p, b);
	return rc;
}

/* The leaf ids under the last inner node of p after its entry, holding the next want pairs
 * past the leaf: prefetched in one wave (note 2). HLOG_OK or HLOG_PENDING. */
static int prefetch_next(client *c, const struct zhead *z, const struct zpath *p, uint64_t want)
{
	if (z->depth == 0)
		return HLOG_OK;
	const uint8_t *nd = zl_nodes.v[p->node[z->depth - 1]].b.p;
	uint32_t n = zt_inner_n(nd), e = p->ent[z->depth - 1] + 1;
	size_t off = zt_inner_off(nd, e);
	bool pending = false;
	for (uint64_t got = 0; e < n && got < want; e++) {
		zt_ent en;
		uint8_t key[ZKEY_BYTES];
		hlog_key k;
		off = zt_inner_ent(nd, off, &en);
		if (zl_cache_find(&zl_nodes, en.id) >= 0)
			continue;
		zl_node_key(key, z->h.cid, en.id);
		hlog_key_init_internal(&k, key, sizeof(key));
		int rc = hlog_prefetch(c->w->sess, &k);
		if (rc == HLOG_PENDING)
			pending = true;
		else if (rc < 0)
			return rc;
		got += en.count;
	}
	return pending ? HLOG_PENDING : HLOG_OK;
}

static int raw_append(lp_buf *out, const uint8_t *p, size_t len)
{
	if (lp_buf_reserve(out, out->len + len + 1) < 0)
		return -ENOMEM;
	memcpy(out->p + out->len, p, len);
	out->len += len;
	return 0;
}

/* The pairs of forward ranks [from, to] into out as one listpack (note 2). */
int zl_collect(client *c, const struct zhead *z, uint64_t from, uint64_t to, lp_buf *out)
{
	int rc;
	if (coll_lp_asm_begin(out) < 0)
		return -ENOMEM;
	for (uint64_t r = from; r <= to;) {
		struct zpath p;
		if ((rc = zl_descend(c, z, NULL, r, &p)) != HLOG_OK)
			return rc;
		size_t li = p.node[z->depth];
		const uint8_t *lp = zl_nodes.v[li].b.p;
		uint64_t have = lp_count(lp) / 2, at = r - p.before;
		if (at >= have)
			return SPW_E_CORRUPT;
		if (to - r + 1 > have - at && (rc = prefetch_next(c, z, &p, to - r + 1 - (have - at))) != HLOG_OK)
			return rc;
		uint64_t n = have - at < to - r + 1 ? have - at : to - r + 1;
		const uint8_t *q = lp_seek(lp, (long)(2 * at));
		if ((rc = raw_append(out, q, zs_run_len(lp, q, (unsigned long)n))) < 0)
			return rc;
		r += n;
		if (li == zl_nodes.n - 1 && z->depth > 0)
			zl_nodes.n--;   /* a leaf is read once: keep the cache to the inner nodes */
	}
	coll_lp_asm_end(out, 2 * (to - from + 1));
	return HLOG_OK;
}

/* ---------------- whole reads (note 2) ---------------- */

/* The tree level by level, each level prefetched in one wave; the leaves into out in order. */
int zl_whole_read(client *c, const struct zhead *z, lp_buf *out)
{
	uint64_t *ids = malloc(sizeof(uint64_t)), *next = NULL;
	size_t n = 1, nn;
	int rc = HLOG_OK;
	if (!ids)
		return -ENOMEM;
	ids[0] = z->root;
	for (uint64_t l = 0; l <= z->depth && rc == HLOG_OK; l++) {
		bool pending = false;
		for (size_t j = 0; j < n; j++) {
			uint8_t key[ZKEY_BYTES];
			hlog_key k;
			zl_node_key(key, z->h.cid, ids[j]);
			hlog_key_init_internal(&k, key, sizeof(key));
			if ((rc = hlog_prefetch(c->w->sess, &k)) == HLOG_PENDING)
				pending = true;
			else if (rc < 0)
				goto out;
		}
		if (pending) {
			rc = HLOG_PENDING;
			goto out;
		}
		if (l == z->depth)
			break;
		nn = 0;
		for (size_t j = 0; j < n; j++) {
			size_t i;
			if ((rc = zl_node_load(c, z, ids[j], true, &i)) != HLOG_OK)
				goto out;
			nn += zt_inner_n(zl_nodes.v[i].b.p);
		}
		free(next);
		if (!(next = malloc((nn ? nn : 1) * sizeof(uint64_t)))) {
			rc = -ENOMEM;
			goto out;
		}
		nn = 0;
		for (size_t j = 0; j < n; j++) {
			const uint8_t *nd = zl_nodes.v[zl_cache_find(&zl_nodes, ids[j])].b.p;
			size_t off = ZT_INNER_HDR;
			for (uint32_t e = 0, m = zt_inner_n(nd); e < m; e++) {
				zt_ent en;
				off = zt_inner_ent(nd, off, &en);
				next[nn++] = en.id;
			}
		}
		uint64_t *t = ids;
		ids = next;
		next = t;
		n = nn;
	}
	if (rc != HLOG_OK || (rc = coll_lp_asm_begin(out)) < 0)
		goto out;
	uint64_t entries = 0;
	for (size_t j = 0; j < n; j++) {
		size_t i;
		if ((rc = zl_node_load(c, z, ids[j], false, &i)) != HLOG_OK)
			goto out;
		const uint8_t *lp = zl_nodes.v[i].b.p;
		entries += lp_count(lp);
		if ((rc = coll_lp_asm_add(out, lp, lp_bytes(lp))) < 0)
			goto out;
		zl_nodes.n--;   /* leaves are not kept (i is the last slot) */
	}
	coll_lp_asm_end(out, entries);
	rc = HLOG_OK;
	c->w->stats.coll_whole_reads++;
out:
	free(ids);
	free(next);
	return rc;
}

/* ---------------- point reads (note 2) ---------------- */

/* The pairs of the members argv[first], argv[first + step], ... from their buckets into zl_sub
 * (each member once). */
int zl_members_sub(client *c, const struct zhead *z, int first, int step)
{
	if (coll_lp_asm_begin(&zl_sub) < 0)
		return -ENOMEM;
	uint64_t entries = 0;
	for (int i = first; i < c->argc; i += step) {
		const resp_slice *m = &c->argv[i];
		bool dup = false;
		for (int j = first; j < i && !dup; j += step)
			dup = c->argv[j].len == m->len && memcmp(c->argv[j].ptr, m->ptr, m->len) == 0;
		size_t bi;
		int rc;
		if (dup)
			continue;
		if ((rc = zl_bucket_load(c, z, m->ptr, m->len, &bi)) != HLOG_OK)
			return rc;
		const uint8_t *lp = zl_bkts.v[bi].b.p, *p = zs_find(lp, m->ptr, m->len, NULL);
		if (p && (rc = raw_append(&zl_sub, p, zs_run_len(lp, p, 1))) < 0)
			return rc;
		entries += p ? 2 : 0;
	}
	coll_lp_asm_end(&zl_sub, entries);
	return HLOG_OK;
}

/* ZRANK's rank of argv[first] (-1: absent). */
static int rank_of(client *c, const struct zhead *z, int first, long long *out)
{
	const resp_slice *m = &c->argv[first];
	size_t bi;
	double s;
	int rc = zl_bucket_load(c, z, m->ptr, m->len, &bi);
	if (rc != HLOG_OK)
		return rc;
	*out = -1;
	if (!zs_find(zl_bkts.v[bi].b.p, m->ptr, m->len, &s))
		return HLOG_OK;
	zt_bound b = { { s, (const char *)m->ptr, m->len }, false, false };
	uint64_t before;
	if ((rc = count_before(c, z, &b, &before)) == HLOG_OK)
		*out = (long long)before;
	return rc;
}

/* A range's forward ranks [*from, *to] (*from > *to: empty), LIMIT applied. */
static int range_ranks(client *c, const struct zhead *z, const zs_rangeq *q, int64_t *from, int64_t *to)
{
	int64_t count = (int64_t)z->h.count;
	int rc;
	*from = 0;
	*to = -1;
	if (q->type == ZR_RANK) {
		long f, t;
		if (!list_range((long)count, (long)q->start, (long)q->end, &f, &t))
			return HLOG_OK;
		*from = q->rev ? count - 1 - t : f;
		*to = q->rev ? count - 1 - f : t;
		return HLOG_OK;
	}
	zt_bound lo = { { q->score.min, NULL, 0 }, true, q->score.minex };
	zt_bound hi = { { q->score.max, NULL, 0 }, true, !q->score.maxex };
	uint64_t a, b;
	if ((rc = count_before(c, z, &lo, &a)) != HLOG_OK || (rc = count_before(c, z, &hi, &b)) != HLOG_OK)
		return rc;
	int64_t l = (int64_t)a, h = (int64_t)b - 1, off = q->offset, lim = q->limit;
	if (l > h || off < 0 || lim == 0 || off > h - l)
		return HLOG_OK;
	if (!q->rev) {
		*from = l + off;
		*to = lim < 0 || lim > h - *from ? h : *from + lim - 1;
	} else {
		*to = h - off;
		*from = lim < 0 || lim > *to - l ? l : *to - lim + 1;
	}
	return HLOG_OK;
}

static int range_read(client *c, const struct zhead *z, zs_rangeq *q)
{
	int64_t from, to;
	int rc = range_ranks(c, z, q, &from, &to);
	if (rc != HLOG_OK)
		return rc;
	q->large_exact = true;
	q->large_n = from <= to ? (unsigned long long)(to - from + 1) : 0;
	if (q->count_only || from > to)
		return lp_buf_set(&zl_sub, zl_lp_empty, sizeof(zl_lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
	return zl_collect(c, z, (uint64_t)from, (uint64_t)to, &zl_sub);
}

int coll_zset_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx)
{
	struct zhead z = { .copy = NULL };
	int rc, mode = hint ? hint->mode : COLL_HINT_WHOLE;

	zl_bufs_enter();
	coll_latch_shared(k->hash);
	if ((rc = zl_head_read(c, k, &z)) != HLOG_OK || !z.large) {
		rc = rc == HLOG_OK ? COLL_E_RESTART : rc;
		goto out;
	}
	if (type && type != COLL_ZSET) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	if (mode == COLL_HINT_MEMBERS)
		rc = zl_members_sub(c, &z, hint->first, hint->step);
	else if (mode == COLL_HINT_ZRANK)
		rc = rank_of(c, &z, hint->first, &((coll_hint *)hint)->zrank);
	else if (mode == COLL_HINT_ZRANGE)
		rc = range_read(c, &z, hint->zq);
	else
		rc = zl_whole_read(c, &z, &zl_sub);
	if (rc == HLOG_OK && mode == COLL_HINT_ZRANK)
		rc = lp_buf_set(&zl_sub, zl_lp_empty, sizeof(zl_lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
	if (rc != HLOG_OK)
		goto out;
	if (mode == COLL_HINT_MEMBERS || mode == COLL_HINT_ZRANK || mode == COLL_HINT_ZRANGE)
		c->w->stats.coll_zset_point_reads++;
	coll_view view = { COLL_ZSET, z.h.enc, zl_sub.p, zl_sub.len, -1, &z.h };
	fn(ctx, &view, &z.hv);
	c->w->stats.coll_zset_node_reads += zl_run_node_reads;   /* the run that answered */
out:
	coll_latch_shared_release(k->hash);
	return rc;
}
