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
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coll/bucket.h"
#include "coll/latch.h"
#include "coll/list.h"
#include "coll/ztree.h"

#define ZHEAD 72u
#define RECORD_MAX ((size_t)__atomic_load_n(&g_cfg.coll_record_max, __ATOMIC_RELAXED))
#define BUF_KEEP (1u << 20)
#define ZKEY_BYTES COLL_BUCKET_KEY_BYTES

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

struct zhead {
	coll_head h;
	uint64_t root, depth, next;
	uint8_t raw[ZHEAD];
	hlog_value hv;
	bool large;
	lp_buf *copy;    /* a small record: copied here */
	int err;
};

/* A cached node or bucket: its bytes, its old length (0: no record), what to write. */
struct zpart {
	uint64_t id;
	lp_buf b;
	size_t olen;
	bool dirty, dead, fresh;
};

struct zcache {
	struct zpart *v;
	size_t n, cap;
};

static __thread struct zcache t_nodes, t_bkts;
static __thread lp_buf t_sub, t_two, t_flat, t_small, t_route, t_leaves;
static __thread hlog_group_part *t_parts;
static __thread uint8_t (*t_keys)[ZKEY_BYTES];
static __thread size_t t_pcap;
static __thread uint64_t t_rng;

/* ---------------- small helpers ---------------- */

static void be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void node_key(uint8_t *out, uint64_t cid, uint64_t id)
{
	be64_put(out, cid);
	out[8] = COLL_KIND_ZNODE;
	be64_put(out + 9, id);
}

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

static void cache_reset(struct zcache *c)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].b.cap > BUF_KEEP)
			lp_buf_free(&c->v[i].b);
	c->n = 0;
}

static void bufs_enter(void)
{
	lp_buf *all[] = { &t_sub, &t_two, &t_flat, &t_small, &t_route, &t_leaves };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i]->cap > BUF_KEEP)
			lp_buf_free(all[i]);
	cache_reset(&t_nodes);
	cache_reset(&t_bkts);
}

/* A new slot of c (its buffer kept from earlier use), or NULL. */
static struct zpart *cache_add(struct zcache *c, uint64_t id)
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
	z->olen = 0;
	z->dirty = z->dead = z->fresh = false;
	return z;
}

static long cache_find(const struct zcache *c, uint64_t id)
{
	for (size_t i = c->n; i-- > 0;)
		if (c->v[i].id == id)
			return (long)i;
	return -1;
}

static int parts_reserve(size_t n)
{
	if (n <= t_pcap)
		return 0;
	size_t cap = n * 2;
	hlog_group_part *pp = realloc(t_parts, cap * sizeof(*pp));
	if (pp)
		t_parts = pp;
	void *kk = realloc(t_keys, cap * sizeof(*t_keys));
	if (kk)
		t_keys = kk;
	if (!pp || !kk)
		return -ENOMEM;
	t_pcap = cap;
	return 0;
}

static void part_set(size_t i, size_t klen, const uint8_t *val, size_t len, bool del)
{
	hlog_key_init_internal(&t_parts[i].key, t_keys[i], klen);
	t_parts[i].val = del ? NULL : val;
	t_parts[i].len = del ? 0 : len;
	t_parts[i].del = del;
}

static void copy_cb(void *ctx, const hlog_value *v)
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

static void zhead_encode(struct zhead *z)
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

static int zhead_read(client *c, const hlog_key *k, struct zhead *z)
{
	z->err = 0;
	z->large = false;
	int rc = hlog_read(c->w->sess, k, zhead_cb, z);
	return rc == HLOG_OK && z->err ? z->err : rc;
}

struct head_plan {
	const uint8_t *expect;
	size_t expect_len;
	const uint8_t *val;   /* NULL: delete */
	size_t len;
	bool drop_ttl;
};

static int head_plan_fn(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct head_plan *p = ctx;
	if (p->expect ? !old || old->rtype != HLOG_T_HEAD || old->len < p->expect_len ||
	                 memcmp(old->ptr, p->expect, p->expect_len) != 0
	              : old != NULL)
		return COLL_E_RESTART;
	if (!p->val) {
		out->action = HLOG_RMW_DELETE;
		return 0;
	}
	out->action = HLOG_RMW_WRITE;
	out->rtype = HLOG_T_HEAD;
	out->new_len = p->len;
	out->expire_ms = old && !p->drop_ttl ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void head_fill_fn(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct head_plan *p = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, p->val, p->len);
}

static const hlog_rmw_ops head_ops = { head_plan_fn, head_fill_fn };

static int head_write(client *c, const hlog_key *k, struct head_plan *p, size_t nparts)
{
	int rc = nparts ? hlog_group_rmw(c->w->sess, k, &head_ops, p, t_parts, nparts)
	                : hlog_rmw(c->w->sess, k, &head_ops, p);
	if (rc == HLOG_OK && nparts)
		c->w->stats.coll_group_writes++;
	return rc;
}

/* ---------------- nodes and buckets ---------------- */

/* Node id of the tree into the cache (*out: its index). HLOG_OK, HLOG_PENDING or an error. */
static int node_load(client *c, const struct zhead *z, uint64_t id, bool inner, size_t *out)
{
	long i = cache_find(&t_nodes, id);
	uint8_t key[ZKEY_BYTES];
	hlog_key k;
	if (i >= 0) {
		*out = (size_t)i;
		return t_nodes.v[i].dead ? SPW_E_CORRUPT : HLOG_OK;
	}
	struct zpart *n = cache_add(&t_nodes, id);
	if (!n)
		return -ENOMEM;
	node_key(key, z->h.cid, id);
	hlog_key_init_internal(&k, key, sizeof(key));
	int rc = hlog_read(c->w->sess, &k, copy_cb, &n->b);
	if (rc != HLOG_OK) {
		t_nodes.n--;
		return rc == HLOG_NOTFOUND ? SPW_E_CORRUPT : rc;
	}
	c->w->stats.coll_zset_node_reads++;
	if (n->b.len == SIZE_MAX) {
		t_nodes.n--;
		return -ENOMEM;
	}
	n->olen = n->b.len;
	if (inner ? !zt_inner_valid(n->b.p, n->b.len)
	          : !lp_validate(n->b.p, n->b.len, false, NULL, NULL) || lp_count(n->b.p) % 2) {
		t_nodes.n--;
		return SPW_E_CORRUPT;
	}
	*out = t_nodes.n - 1;
	return HLOG_OK;
}

/* The bucket of member m into the cache (*out). An absent bucket is empty. */
static int bucket_load(client *c, const struct zhead *z, const void *m, size_t mlen, size_t *out)
{
	uint64_t b = coll_bucket_of(&z->h, coll_member_hash(z->h.cid, m, mlen));
	long i = cache_find(&t_bkts, b);
	uint8_t key[ZKEY_BYTES];
	hlog_key k;
	if (i >= 0) {
		*out = (size_t)i;
		return HLOG_OK;
	}
	struct zpart *p = cache_add(&t_bkts, b);
	if (!p)
		return -ENOMEM;
	coll_bucket_key(key, z->h.cid, b);
	hlog_key_init_internal(&k, key, sizeof(key));
	int rc = hlog_read(c->w->sess, &k, copy_cb, &p->b);
	if (rc == HLOG_NOTFOUND) {
		rc = lp_buf_from(&p->b, lp_empty, sizeof(lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		p->olen = 0;
	} else if (rc == HLOG_OK) {
		c->w->stats.coll_part_reads++;
		p->olen = p->b.len;
		if (p->b.len == SIZE_MAX || !lp_validate(p->b.p, p->b.len, false, NULL, NULL))
			rc = p->b.len == SIZE_MAX ? -ENOMEM : SPW_E_CORRUPT;
	}
	if (rc != HLOG_OK) {
		t_bkts.n--;
		return rc;
	}
	*out = t_bkts.n - 1;
	return HLOG_OK;
}

/* A descent's path: the cached node at each level, the entry taken at each inner level, and
 * the pairs before the leaf. */
struct zpath {
	size_t node[ZT_MAX_DEPTH + 1];
	uint32_t ent[ZT_MAX_DEPTH];
	uint64_t before;
};

/* Descend by bound b (or, b NULL, to the leaf holding rank r). Note 2. */
static int descend(client *c, const struct zhead *z, const zt_bound *b, uint64_t r, struct zpath *p)
{
	uint64_t id = z->root, before = 0;
	for (uint64_t l = 0;; l++) {
		size_t i;
		int rc = node_load(c, z, id, l < z->depth, &i);
		if (rc != HLOG_OK)
			return rc;
		p->node[l] = i;
		if (l == z->depth)
			break;
		const uint8_t *nd = t_nodes.v[i].b.p;
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
	int rc = descend(c, z, b, 0, &p);
	if (rc == HLOG_OK)
		*out = p.before + zt_leaf_before(t_nodes.v[p.node[z->depth]].b.p, b);
	return rc;
}

/* The leaf ids under the last inner node of p after its entry, holding the next want pairs
 * past the leaf: prefetched in one wave (note 2). HLOG_OK or HLOG_PENDING. */
static int prefetch_next(client *c, const struct zhead *z, const struct zpath *p, uint64_t want)
{
	if (z->depth == 0)
		return HLOG_OK;
	const uint8_t *nd = t_nodes.v[p->node[z->depth - 1]].b.p;
	uint32_t n = zt_inner_n(nd), e = p->ent[z->depth - 1] + 1;
	size_t off = zt_inner_off(nd, e);
	bool pending = false;
	for (uint64_t got = 0; e < n && got < want; e++) {
		zt_ent en;
		uint8_t key[ZKEY_BYTES];
		hlog_key k;
		off = zt_inner_ent(nd, off, &en);
		if (cache_find(&t_nodes, en.id) >= 0)
			continue;
		node_key(key, z->h.cid, en.id);
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
static int collect(client *c, const struct zhead *z, uint64_t from, uint64_t to, lp_buf *out)
{
	int rc;
	if (coll_lp_asm_begin(out) < 0)
		return -ENOMEM;
	for (uint64_t r = from; r <= to;) {
		struct zpath p;
		if ((rc = descend(c, z, NULL, r, &p)) != HLOG_OK ||
		    (rc = prefetch_next(c, z, &p, to - r)) != HLOG_OK)
			return rc;
		size_t li = p.node[z->depth];
		const uint8_t *lp = t_nodes.v[li].b.p;
		uint64_t have = lp_count(lp) / 2, at = r - p.before;
		if (at >= have)
			return SPW_E_CORRUPT;
		uint64_t n = have - at < to - r + 1 ? have - at : to - r + 1;
		const uint8_t *q = lp_seek(lp, (long)(2 * at));
		if ((rc = raw_append(out, q, zs_run_len(lp, q, (unsigned long)n))) < 0)
			return rc;
		r += n;
		if (li == t_nodes.n - 1 && z->depth > 0)
			t_nodes.n--;   /* a leaf is read once: keep the cache to the inner nodes */
	}
	coll_lp_asm_end(out, 2 * (to - from + 1));
	return HLOG_OK;
}

/* ---------------- whole reads (note 2) ---------------- */

/* The tree level by level, each level prefetched in one wave; the leaves into out in order. */
static int whole_read(client *c, const struct zhead *z, lp_buf *out)
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
			node_key(key, z->h.cid, ids[j]);
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
			if ((rc = node_load(c, z, ids[j], true, &i)) != HLOG_OK)
				goto out;
			nn += zt_inner_n(t_nodes.v[i].b.p);
		}
		free(next);
		if (!(next = malloc((nn ? nn : 1) * sizeof(uint64_t)))) {
			rc = -ENOMEM;
			goto out;
		}
		nn = 0;
		for (size_t j = 0; j < n; j++) {
			const uint8_t *nd = t_nodes.v[cache_find(&t_nodes, ids[j])].b.p;
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
		if ((rc = node_load(c, z, ids[j], false, &i)) != HLOG_OK)
			goto out;
		const uint8_t *lp = t_nodes.v[i].b.p;
		entries += lp_count(lp);
		if ((rc = coll_lp_asm_add(out, lp, lp_bytes(lp))) < 0)
			goto out;
		t_nodes.n--;   /* leaves are not kept (i is the last slot) */
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

/* The pairs of the members argv[first], argv[first + step], ... from their buckets into t_sub
 * (each member once). */
static int members_sub(client *c, const struct zhead *z, int first, int step)
{
	if (coll_lp_asm_begin(&t_sub) < 0)
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
		if ((rc = bucket_load(c, z, m->ptr, m->len, &bi)) != HLOG_OK)
			return rc;
		const uint8_t *lp = t_bkts.v[bi].b.p, *p = zs_find(lp, m->ptr, m->len, NULL);
		if (p && (rc = raw_append(&t_sub, p, zs_run_len(lp, p, 1))) < 0)
			return rc;
		entries += p ? 2 : 0;
	}
	coll_lp_asm_end(&t_sub, entries);
	return HLOG_OK;
}

/* ZRANK's rank of argv[first] (-1: absent). */
static int rank_of(client *c, const struct zhead *z, int first, long long *out)
{
	const resp_slice *m = &c->argv[first];
	size_t bi;
	double s;
	int rc = bucket_load(c, z, m->ptr, m->len, &bi);
	if (rc != HLOG_OK)
		return rc;
	*out = -1;
	if (!zs_find(t_bkts.v[bi].b.p, m->ptr, m->len, &s))
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
		return lp_buf_from(&t_sub, lp_empty, sizeof(lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
	return collect(c, z, (uint64_t)from, (uint64_t)to, &t_sub);
}

int coll_zset_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx)
{
	struct zhead z = { .copy = NULL };
	int rc, mode = hint ? hint->mode : COLL_HINT_WHOLE;

	bufs_enter();
	coll_latch_shared(k->hash);
	if ((rc = zhead_read(c, k, &z)) != HLOG_OK || !z.large) {
		rc = rc == HLOG_OK ? COLL_E_RESTART : rc;
		goto out;
	}
	if (type && type != COLL_ZSET) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	if (mode == COLL_HINT_MEMBERS)
		rc = members_sub(c, &z, hint->first, hint->step);
	else if (mode == COLL_HINT_ZRANK)
		rc = rank_of(c, &z, hint->first, &((coll_hint *)hint)->zrank);
	else if (mode == COLL_HINT_ZRANGE)
		rc = range_read(c, &z, hint->zq);
	else
		rc = whole_read(c, &z, &t_sub);
	if (rc == HLOG_OK && mode == COLL_HINT_ZRANK)
		rc = lp_buf_from(&t_sub, lp_empty, sizeof(lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
	if (rc != HLOG_OK)
		goto out;
	if (mode == COLL_HINT_MEMBERS || mode == COLL_HINT_ZRANK || mode == COLL_HINT_ZRANGE)
		c->w->stats.coll_zset_point_reads++;
	coll_view view = { COLL_ZSET, z.h.enc, t_sub.p, t_sub.len, -1, &z.h };
	fn(ctx, &view, &z.hv);
out:
	coll_latch_shared_release(k->hash);
	return rc;
}


/* ---------------- tree edits (note 4) ---------------- */

static int node_new(uint64_t id, const uint8_t *bytes, size_t len, size_t *out)
{
	struct zpart *n = cache_add(&t_nodes, id);
	if (!n || lp_buf_reserve(&n->b, len ? len : 1) < 0)
		return -ENOMEM;
	memcpy(n->b.p, bytes, len);
	n->b.len = len;
	n->dirty = n->fresh = true;
	*out = t_nodes.n - 1;
	return 0;
}

/* Split the node at level l of path p while it is past 2 x coll-record-max, up to a new root. */
static int split_up(struct zhead *z, struct zpath *p, uint64_t l, client *c)
{
	size_t offs[3], ri;
	char buf[LP_INTBUF_SIZE];
	int rc;
	for (;; l--) {
		struct zpart *n = &t_nodes.v[p->node[l]];
		bool leaf = l == z->depth;
		if (n->b.len <= 2 * RECORD_MAX || (leaf ? lp_count(n->b.p) < 4 : zt_inner_n(n->b.p) < 2))
			return 0;
		rc = leaf ? zt_leaf_split(n->b.p, &t_two, offs) : zt_inner_split(n->b.p, n->b.len, &t_two, offs);
		if (rc < 0)
			return rc;
		const uint8_t *right = t_two.p + offs[1];
		zt_ent re = { z->next++, 0, { 0, NULL, 0 } }, le;
		if (leaf) {
			re.count = lp_count(right) / 2;
			zt_key_of(right, lp_first(right), buf, &re.sep);
		} else {
			zt_ent first;
			re.count = zt_inner_total(right);
			zt_inner_ent(right, ZT_INNER_HDR, &first);
			re.sep = first.sep;
		}
		memcpy(n->b.p, t_two.p, offs[1]);
		n->b.len = offs[1];
		n->dirty = true;
		le.id = n->id;
		le.count = leaf ? lp_count(n->b.p) / 2 : zt_inner_total(n->b.p);
		le.sep = (zt_key){ re.sep.score, NULL, 0 };
		if ((rc = node_new(re.id, right, offs[2] - offs[1], &ri)) < 0)
			return rc;
		c->w->stats.coll_zset_node_splits++;
		if (l == 0) {   /* a new root above the two halves */
			zt_ent two[2] = { le, re };
			lp_buf nb = { 0 };
			if ((rc = zt_inner_build(&nb, two, 2)) == 0)
				rc = node_new(z->next, nb.p, nb.len, &ri);
			lp_buf_free(&nb);
			if (rc < 0)
				return rc;
			z->root = z->next++;
			z->depth++;
			return 0;
		}
		struct zpart *par = &t_nodes.v[p->node[l - 1]];
		zt_inner_count_add(par->b.p, p->ent[l - 1], -(int64_t)re.count);
		if ((rc = zt_inner_insert(&par->b, p->ent[l - 1] + 1, &re)) < 0)
			return rc;
		par->dirty = true;
	}
}

static void path_count(const struct zhead *z, const struct zpath *p, int64_t d)
{
	for (uint64_t l = 0; l < z->depth; l++) {
		zt_inner_count_add(t_nodes.v[p->node[l]].b.p, p->ent[l], d);
		t_nodes.v[p->node[l]].dirty = true;
	}
}

static int tree_insert(client *c, struct zhead *z, const char *m, size_t mlen, double score)
{
	zt_bound b = { { score, m, mlen }, false, true };
	struct zpath p;
	int rc = descend(c, z, &b, 0, &p);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *leaf = &t_nodes.v[p.node[z->depth]];
	if ((rc = zs_insert(&leaf->b, m, mlen, score, true)) < 0)
		return rc;
	leaf->dirty = true;
	path_count(z, &p, 1);
	return split_up(z, &p, z->depth, c);
}

static int tree_delete(client *c, struct zhead *z, const char *m, size_t mlen, double score)
{
	zt_bound b = { { score, m, mlen }, false, true };
	struct zpath p;
	int rc = descend(c, z, &b, 0, &p);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *leaf = &t_nodes.v[p.node[z->depth]];
	const uint8_t *q = zs_find(leaf->b.p, m, mlen, NULL);
	if (!q)
		return SPW_E_CORRUPT;
	if ((rc = zs_delete(&leaf->b, lp_off(&leaf->b, q))) < 0)
		return rc;
	leaf->dirty = true;
	path_count(z, &p, -1);
	/* an emptied node leaves its parent, unless it is the parent's only child */
	for (uint64_t l = z->depth; l > 0; l--) {
		struct zpart *n = &t_nodes.v[p.node[l]], *par = &t_nodes.v[p.node[l - 1]];
		bool empty = l == z->depth ? lp_count(n->b.p) == 0 : zt_inner_n(n->b.p) == 0;
		if (!empty || zt_inner_n(par->b.p) == 1)
			break;
		zt_inner_remove(&par->b, p.ent[l - 1]);
		par->dirty = true;
		n->dead = true;
	}
	return HLOG_OK;
}

/* ---------------- point writes (note 3) ---------------- */

static int bucket_set(client *c, struct zhead *z, const char *m, size_t mlen, const double *score)
{
	size_t bi;
	int rc = bucket_load(c, z, m, mlen, &bi);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *b = &t_bkts.v[bi];
	const uint8_t *q = zs_find(b->b.p, m, mlen, NULL);
	if (q && (rc = zs_delete(&b->b, lp_off(&b->b, q))) < 0)
		return rc;
	if (score && (rc = zs_append(&b->b, m, mlen, *score, true)) < 0)
		return rc;
	b->dirty = true;
	return HLOG_OK;
}

/* Apply the edit's output out against its input t_sub: removals first, then inserts. */
static int apply_diff(client *c, struct zhead *z, const uint8_t *out, int64_t *delta)
{
	char buf[LP_INTBUF_SIZE];
	const uint8_t *p;
	size_t mlen;
	double os, ns;
	int rc;
	for (p = lp_first(t_sub.p); p; p = lp_next(t_sub.p, lp_next(t_sub.p, p))) {
		const char *m = zs_member(p, buf, &mlen);
		os = zs_score(t_sub.p, p);
		if (zs_find(out, m, mlen, &ns) && ns == os)
			continue;
		if ((rc = tree_delete(c, z, m, mlen, os)) != HLOG_OK ||
		    (rc = bucket_set(c, z, m, mlen, NULL)) != HLOG_OK)
			return rc;
		(*delta)--;
	}
	for (p = lp_first(out); p; p = lp_next(out, lp_next(out, p))) {
		const char *m = zs_member(p, buf, &mlen);
		ns = zs_score(out, p);
		if (zs_find(t_sub.p, m, mlen, &os) && ns == os)
			continue;
		if ((rc = tree_insert(c, z, m, mlen, ns)) != HLOG_OK ||
		    (rc = bucket_set(c, z, m, mlen, &ns)) != HLOG_OK)
			return rc;
		(*delta)++;
	}
	return HLOG_OK;
}

/* Note 6: split the bucket at the split pointer when a changed bucket passed the limit. */
static int bucket_split_maybe(client *c, struct zhead *z)
{
	bool big = false;
	for (size_t i = 0; i < t_bkts.n; i++)
		big |= t_bkts.v[i].dirty && t_bkts.v[i].b.len > 2 * RECORD_MAX;
	if (!big)
		return HLOG_OK;
	uint64_t s = z->h.split, dst = s + (1ull << z->h.level);
	long i = cache_find(&t_bkts, s);
	if (i < 0) {
		uint8_t key[ZKEY_BYTES];
		hlog_key k;
		struct zpart *p = cache_add(&t_bkts, s);
		if (!p)
			return -ENOMEM;
		coll_bucket_key(key, z->h.cid, s);
		hlog_key_init_internal(&k, key, sizeof(key));
		int rc = hlog_read(c->w->sess, &k, copy_cb, &p->b);
		if (rc == HLOG_NOTFOUND)
			rc = lp_buf_from(&p->b, lp_empty, sizeof(lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		else if (rc == HLOG_OK)
			p->olen = p->b.len;
		if (rc != HLOG_OK) {
			t_bkts.n--;
			return rc;
		}
		i = (long)t_bkts.n - 1;
	}
	size_t offs[3];
	int rc = coll_bucket_split(t_bkts.v[i].b.p, 2, &z->h, &t_two, offs);
	if (rc < 0)
		return rc;
	struct zpart *m = cache_add(&t_bkts, dst);
	if (!m || lp_buf_from(&m->b, t_two.p + offs[1], offs[2] - offs[1]) < 0 ||
	    lp_buf_from(&t_bkts.v[i].b, t_two.p, offs[1]) < 0)
		return -ENOMEM;
	m->dirty = t_bkts.v[i].dirty = true;
	coll_head_split_advance(&z->h);
	c->w->stats.coll_bucket_splits++;
	return HLOG_OK;
}

/* The changed parts of the caches into t_parts (mbytes moved by their sizes); the count. */
static long parts_collect(client *c, struct zhead *z)
{
	size_t np = 0;
	if (parts_reserve(t_nodes.n + t_bkts.n + 1) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < t_nodes.n; i++) {
		struct zpart *n = &t_nodes.v[i];
		if (!n->dirty && !n->dead)
			continue;
		if (n->dead && n->fresh)
			continue;
		node_key(t_keys[np], z->h.cid, n->id);
		part_set(np++, ZKEY_BYTES, n->b.p, n->b.len, n->dead);
		z->h.mbytes = z->h.mbytes - n->olen + (n->dead ? 0 : n->b.len);
		c->w->stats.coll_zset_node_writes++;
	}
	for (size_t i = 0; i < t_bkts.n; i++) {
		struct zpart *b = &t_bkts.v[i];
		bool empty = lp_count(b->b.p) == 0;
		if (!b->dirty || (empty && !b->olen))
			continue;
		coll_bucket_key(t_keys[np], z->h.cid, b->id);
		part_set(np++, ZKEY_BYTES, b->b.p, b->b.len, empty);
		z->h.mbytes = z->h.mbytes - b->olen + (empty ? 0 : b->b.len);
	}
	return (long)np;
}

static int point_write(client *c, const hlog_key *k, coll_edit *e, struct zhead *z)
{
	int rc;
	if (e->zmode == COLL_ZE_MEMBERS) {
		rc = members_sub(c, z, e->hint_first, e->hint_step > 0 ? e->hint_step : 1);
	} else {
		uint64_t n = e->zpop_n < 0 ? 0 : (uint64_t)e->zpop_n;
		n = n < z->h.count ? n : z->h.count;
		if (!n)
			rc = lp_buf_from(&t_sub, lp_empty, sizeof(lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		else
			rc = collect(c, z, e->zpop_max ? z->h.count - n : 0,
			             e->zpop_max ? z->h.count - 1 : n - 1, &t_sub);
	}
	if (rc != HLOG_OK)
		return rc;
	coll_view view = { COLL_ZSET, z->h.enc, t_sub.p, t_sub.len, -1, &z->h };
	e->found = true;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	if ((rc = e->fn(e, &view)) < 0 || e->action == COLL_KEEP)
		return rc;
	if (e->patch)
		return SPW_E_CORRUPT;   /* zset edits build (cmd_zset.c) */
	const uint8_t *out = e->action == COLL_DELETE ? lp_empty : e->out;
	int64_t delta = 0;
	if ((rc = apply_diff(c, z, out, &delta)) != HLOG_OK || (rc = bucket_split_maybe(c, z)) != HLOG_OK)
		return rc;
	struct head_plan hp = { z->raw, ZHEAD, NULL, 0, false };
	uint8_t expect[ZHEAD];
	memcpy(expect, z->raw, ZHEAD);
	hp.expect = expect;
	if ((int64_t)z->h.count + delta <= 0)
		return head_write(c, k, &hp, 0);   /* empty: the head goes, the parts are garbage */
	z->h.count = (uint64_t)((int64_t)z->h.count + delta);
	long np = parts_collect(c, z);
	if (np < 0)
		return (int)np;
	zhead_encode(z);
	hp.val = z->raw;
	hp.len = ZHEAD;
	if ((rc = head_write(c, k, &hp, (size_t)np)) == HLOG_OK)
		c->w->stats.coll_zset_point_writes++;
	return rc;
}

/* ---------------- writing afresh (note 5) ---------------- */

bool coll_zset_large_wanted(int enc, size_t used)
{
	return enc == CENC_SKIPLIST && used > RECORD_MAX;
}

/* Leaves cut from the sorted payload and inner levels built over them, as fresh cache nodes;
 * z's root, depth and next set. */
static int tree_build(struct zhead *z, const uint8_t *lp)
{
	size_t target = RECORD_MAX, cap = 64, n = 0, ri;
	zt_ent *ents = malloc(cap * sizeof(*ents));
	char (*bufs)[LP_INTBUF_SIZE] = NULL;
	int rc = 0;
	uint64_t id = 1;
	if (!ents)
		return -ENOMEM;
	for (const uint8_t *p = lp_first(lp), *end; p; p = end) {
		unsigned long pairs;
		end = zt_chunk_end(lp, p, target, &pairs);
		size_t bytes = (size_t)((end ? end : lp + lp_bytes(lp) - 1) - p);
		if (lp_buf_reserve(&t_leaves, bytes + LP_EMPTY_BYTES) < 0 ||
		    (rc = node_new(id, t_leaves.p, 0, &ri)) < 0)
			goto fail;
		struct zpart *leaf = &t_nodes.v[ri];
		if (lp_buf_reserve(&leaf->b, bytes + LP_EMPTY_BYTES) < 0)
			goto fail;
		leaf->b.len = zs_run_write(leaf->b.p, p, bytes, pairs);
		if (n == cap) {
			zt_ent *ne = realloc(ents, (cap *= 2) * sizeof(*ents));
			if (!ne)
				goto fail;
			ents = ne;
		}
		ents[n].id = id++;
		ents[n].count = pairs;
		ents[n].sep.score = zs_score(lp, p);
		ents[n].sep.m = NULL;   /* set below: members point into lp */
		ents[n].sep.mlen = (size_t)(uintptr_t)p;
		n++;
	}
	if (!(bufs = malloc((n ? n : 1) * sizeof(*bufs))))
		goto fail;
	for (size_t j = 0; j < n; j++) {
		const uint8_t *p = (const uint8_t *)(uintptr_t)ents[j].sep.mlen;
		ents[j].sep.m = zs_member(p, bufs[j], &ents[j].sep.mlen);
	}
	z->depth = 0;
	while (n > 1) {   /* one inner level: nodes of about target bytes */
		size_t out = 0;
		for (size_t j = 0; j < n;) {
			size_t k = j, bytes = ZT_INNER_HDR;
			while (k < n && (k == j || bytes < target) && k - j < 65535)
				bytes += ZT_ENT_FIXED + ents[k++].sep.mlen;
			lp_buf nb = { 0 };
			uint64_t total = 0;
			for (size_t q = j; q < k; q++)
				total += ents[q].count;
			if ((rc = zt_inner_build(&nb, ents + j, (uint32_t)(k - j))) == 0)
				rc = node_new(id, nb.p, nb.len, &ri);
			lp_buf_free(&nb);
			if (rc < 0)
				goto fail;
			zt_key sep = ents[j].sep;
			ents[out].id = id++;
			ents[out].count = total;
			ents[out].sep = sep;
			out++;
			j = k;
		}
		n = out;
		z->depth++;
	}
	z->root = id - 1;
	z->next = id;
	free(ents);
	free(bufs);
	return 0;
fail:
	free(ents);
	free(bufs);
	return rc < 0 ? rc : -ENOMEM;
}

/* Write the payload out (len bytes) over the old head expect (NULL: absent) by the rule of a new
 * collection: deleted when empty, a new large zset (new cid) or a small record. */
static int write_afresh(client *c, const hlog_key *k, coll_edit *e, const uint8_t *expect,
                        size_t expect_len, bool was_large, const uint8_t *out, size_t len)
{
	struct head_plan p = { expect, expect_len, NULL, 0, e->drop_ttl };
	struct zhead z = { .copy = NULL };
	int rc;
	if (e->action == COLL_DELETE || lp_first(out) == NULL)
		return expect ? head_write(c, k, &p, 0) : HLOG_OK;
	if (!coll_zset_large_wanted(e->enc, len)) {
		size_t vlen = coll_value_len(len, 0);
		if (lp_buf_reserve(&t_flat, vlen) < 0)
			return -ENOMEM;
		memset(t_flat.p, 0, vlen);
		coll_hdr_write(t_flat.p, COLL_ZSET, e->enc, len);
		memmove(t_flat.p + COLL_HDR, out, len);
		p.val = t_flat.p;
		p.len = vlen;
		return head_write(c, k, &p, 0);
	}
	z.h = (coll_head){ COLL_ZSET, e->enc, cid_new(), lp_count(out) / 2, 0, 0, 0 };
	coll_head_size(&z.h, coll_initial_buckets(len, RECORD_MAX));
	uint64_t nb = coll_bucket_count(&z.h);
	size_t *offs = malloc((nb + 1) * sizeof(*offs));
	if (!offs)
		return -ENOMEM;
	if ((rc = coll_lp_split(out, 2, &z.h, &t_route, offs)) < 0 || (rc = tree_build(&z, out)) < 0 ||
	    (rc = parts_reserve(nb + t_nodes.n + 1)) < 0) {
		free(offs);
		return rc;
	}
	size_t np = 0;
	coll_registry_key(t_keys[0], z.h.cid);
	part_set(np++, COLL_REGISTRY_KEY_BYTES, k->ptr, k->len, false);
	t_parts[0].val = k->ptr;   /* the key "" is an empty value, not a delete */
	z.h.mbytes = k->len;
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *lp = t_route.p + offs[b];
		if (!lp_first(lp))
			continue;
		coll_bucket_key(t_keys[np], z.h.cid, b);
		part_set(np, ZKEY_BYTES, lp, offs[b + 1] - offs[b], false);
		z.h.mbytes += t_parts[np++].len;
	}
	free(offs);
	for (size_t i = 0; i < t_nodes.n; i++) {
		node_key(t_keys[np], z.h.cid, t_nodes.v[i].id);
		part_set(np, ZKEY_BYTES, t_nodes.v[i].b.p, t_nodes.v[i].b.len, false);
		z.h.mbytes += t_parts[np++].len;
		c->w->stats.coll_zset_node_writes++;
	}
	zhead_encode(&z);
	p.val = z.raw;
	p.len = ZHEAD;
	rc = head_write(c, k, &p, np);
	if (rc == HLOG_OK && !was_large)
		c->w->stats.coll_large_conversions++;
	return rc;
}

static int whole_write(client *c, const hlog_key *k, coll_edit *e, struct zhead *z)
{
	int rc = whole_read(c, z, &t_small);
	if (rc != HLOG_OK)
		return rc;
	cache_reset(&t_nodes);
	coll_view view = { COLL_ZSET, z->h.enc, t_small.p, t_small.len, (int64_t)(2 * z->h.count), &z->h };
	e->found = true;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	if ((rc = e->fn(e, &view)) < 0 || e->action == COLL_KEEP)
		return rc;
	if (e->patch)
		return SPW_E_CORRUPT;
	uint8_t expect[ZHEAD];
	memcpy(expect, z->raw, ZHEAD);
	const uint8_t *out = e->action == COLL_DELETE ? lp_empty : e->out;
	return write_afresh(c, k, e, expect, ZHEAD, true, out, e->action == COLL_DELETE ? sizeof(lp_empty) : e->out_len);
}

int coll_zset_large_rmw(client *c, const hlog_key *k, coll_edit *e)
{
	struct zhead z = { .copy = NULL };
	int rc;
	bufs_enter();
	coll_latch_excl(k->hash);
	if ((rc = zhead_read(c, k, &z)) != HLOG_OK || !z.large)
		rc = rc == HLOG_OK || rc == HLOG_NOTFOUND ? COLL_E_RESTART : rc;
	else if (e->type != COLL_ZSET)
		rc = SPW_E_WRONGTYPE;
	else if (e->zmode == COLL_ZE_MEMBERS || e->zmode == COLL_ZE_POP)
		rc = point_write(c, k, e, &z);
	else
		rc = whole_write(c, k, e, &z);
	coll_latch_excl_release(k->hash);
	return rc;
}

/* The conversion: the small path's edit made a skiplist payload past coll-record-max. Run it
 * again on a copy of the small record under the exclusive latch and write the result afresh. */
int coll_zset_large_convert(client *c, const hlog_key *k, coll_edit *e)
{
	struct zhead z = { .copy = &t_small };
	coll_view view;
	int rc;
	bufs_enter();
	coll_latch_excl(k->hash);
	rc = zhead_read(c, k, &z);
	if (rc == HLOG_PENDING || rc < 0 || z.large) {
		rc = z.large ? COLL_E_RESTART : rc;
		goto out;
	}
	bool found = rc == HLOG_OK;
	rc = HLOG_OK;
	if (found && z.hv.rtype == HLOG_T_STRING)
		rc = SPW_E_WRONGTYPE;
	else if (found && (z.hv.rtype != HLOG_T_HEAD || !coll_parse(t_small.p, t_small.len, &view)))
		rc = SPW_E_CORRUPT;
	else if (found && view.type != COLL_ZSET)
		rc = SPW_E_WRONGTYPE;
	if (rc != HLOG_OK || (!found && !e->create))
		goto out;
	e->found = found;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	if ((rc = e->fn(e, found ? &view : NULL)) < 0 || e->action == COLL_KEEP)
		goto out;
	if (e->patch) {
		rc = SPW_E_CORRUPT;
		goto out;
	}
	const uint8_t *out = e->action == COLL_DELETE ? lp_empty : e->out;
	rc = write_afresh(c, k, e, found ? t_small.p : NULL, found ? t_small.len : 0, false, out,
	                  e->action == COLL_DELETE ? sizeof(lp_empty) : e->out_len);
out:
	coll_latch_excl_release(k->hash);
	return rc;
}
