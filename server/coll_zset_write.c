/*
 * coll_zset_write.c - the writes of a large sorted set (server/coll_zset_large.c's notes 3 to 6):
 * tree edits on the per-command node cache, point writes as one group, writing afresh (the
 * conversion and every whole write), and the rmw and convert entries coll_large.c hands over.
 */
#include "server/zset_large_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/latch.h"

/* ---------------- tree edits (note 4) ---------------- */

/* A new node (leaf: a listpack, else an inner node) into the cache. */
static int node_new(uint64_t id, const uint8_t *bytes, size_t len, bool leaf, size_t *out)
{
	struct zpart *n = zl_cache_add(&zl_nodes, id);
	if (!n || lp_buf_reserve(&n->b, len ? len : 1) < 0)
		return -ENOMEM;
	memcpy(n->b.p, bytes, len);
	n->b.len = len;
	n->lp = leaf;
	n->dirty = n->fresh = true;
	*out = zl_nodes.n - 1;
	return 0;
}

/* Split the node at level l of path p while it is past 2 x coll-record-max, up to a new root. */
static int split_up(struct zhead *z, struct zpath *p, uint64_t l, client *c)
{
	size_t offs[3], ri;
	char buf[LP_INTBUF_SIZE];
	int rc;
	for (;; l--) {
		struct zpart *n = &zl_nodes.v[p->node[l]];
		bool leaf = l == z->depth;
		/* 2 pairs or entries in each half at least: long members (full separators, ztree.c note
		 * 1) make a node of few entries big, which must not split into ever more levels */
		if (n->b.len <= 2 * (leaf ? ZPART_MAX : RECORD_MAX) ||
		    (leaf ? lp_count(n->b.p) < 4 : zt_inner_n(n->b.p) < 4))
			return 0;
		rc = leaf ? zt_leaf_split(n->b.p, &zl_two, offs) : zt_inner_split(n->b.p, n->b.len, &zl_two, offs);
		if (rc < 0)
			return rc;
		const uint8_t *right = zl_two.p + offs[1];
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
		memcpy(n->b.p, zl_two.p, offs[1]);
		n->b.len = offs[1];
		n->dirty = true;
		le.id = n->id;
		le.count = leaf ? lp_count(n->b.p) / 2 : zt_inner_total(n->b.p);
		le.sep = (zt_key){ re.sep.score, NULL, 0 };
		if ((rc = node_new(re.id, right, offs[2] - offs[1], leaf, &ri)) < 0)
			return rc;
		c->w->stats.coll_zset_node_splits++;
		if (l == 0) {   /* a new root above the two halves */
			zt_ent two[2] = { le, re };
			lp_buf nb = { 0 };
			if ((rc = zt_inner_build(&nb, two, 2)) == 0)
				rc = node_new(z->next, nb.p, nb.len, false, &ri);
			lp_buf_free(&nb);
			if (rc < 0)
				return rc;
			z->root = z->next++;
			z->depth++;
			return 0;
		}
		struct zpart *par = &zl_nodes.v[p->node[l - 1]];
		zt_inner_count_add(par->b.p, p->ent[l - 1], -(int64_t)re.count);
		if ((rc = zt_inner_insert(&par->b, p->ent[l - 1] + 1, &re)) < 0)
			return rc;
		par->dirty = true;
	}
}

static void path_count(const struct zhead *z, const struct zpath *p, int64_t d)
{
	for (uint64_t l = 0; l < z->depth; l++) {
		zt_inner_count_add(zl_nodes.v[p->node[l]].b.p, p->ent[l], d);
		zl_nodes.v[p->node[l]].dirty = true;
	}
}

static int tree_insert(client *c, struct zhead *z, const char *m, size_t mlen, double score)
{
	zt_bound b = { { score, m, mlen }, false, true };
	struct zpath p;
	int rc = zl_descend(c, z, &b, 0, &p);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *leaf = &zl_nodes.v[p.node[z->depth]];
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
	int rc = zl_descend(c, z, &b, 0, &p);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *leaf = &zl_nodes.v[p.node[z->depth]];
	const uint8_t *q = zs_find(leaf->b.p, m, mlen, NULL);
	if (!q)
		return SPW_E_CORRUPT;
	if ((rc = zs_delete(&leaf->b, lp_off(&leaf->b, q))) < 0)
		return rc;
	leaf->dirty = true;
	path_count(z, &p, -1);
	/* an emptied node leaves its parent, unless it is the parent's only child */
	for (uint64_t l = z->depth; l > 0; l--) {
		struct zpart *n = &zl_nodes.v[p.node[l]], *par = &zl_nodes.v[p.node[l - 1]];
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
	int rc = zl_bucket_load(c, z, m, mlen, &bi);
	if (rc != HLOG_OK)
		return rc;
	struct zpart *b = &zl_bkts.v[bi];
	const uint8_t *q = zs_find(b->b.p, m, mlen, NULL);
	if (q && (rc = zs_delete(&b->b, lp_off(&b->b, q))) < 0)
		return rc;
	if (score && (rc = zs_append(&b->b, m, mlen, *score, true)) < 0)
		return rc;
	b->dirty = true;
	return HLOG_OK;
}

/* Apply the edit's output out against its input zl_sub: removals first, then inserts. */
/* A score the edit left as it was: equal and of the same sign, since 0 and -0 compare equal but a
 * skiplist zset prints them apart (an update 0 -> 0.1 -> -0 in one ZADD ends at -0, as Redis's). */
static inline bool same_score(double a, double b) { return a == b && !signbit(a) == !signbit(b); }

static int apply_diff(client *c, struct zhead *z, const uint8_t *out, int64_t *delta)
{
	char buf[LP_INTBUF_SIZE];
	const uint8_t *p;
	size_t mlen;
	double os, ns;
	int rc;
	for (p = lp_first(zl_sub.p); p; p = lp_next(zl_sub.p, lp_next(zl_sub.p, p))) {
		const char *m = zs_member(p, buf, &mlen);
		os = zs_score(zl_sub.p, p);
		if (zs_find(out, m, mlen, &ns) && same_score(ns, os))
			continue;
		if ((rc = tree_delete(c, z, m, mlen, os)) != HLOG_OK ||
		    (rc = bucket_set(c, z, m, mlen, NULL)) != HLOG_OK)
			return rc;
		(*delta)--;
	}
	for (p = lp_first(out); p; p = lp_next(out, lp_next(out, p))) {
		const char *m = zs_member(p, buf, &mlen);
		ns = zs_score(out, p);
		if (zs_find(zl_sub.p, m, mlen, &os) && same_score(ns, os))
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
	for (size_t i = 0; i < zl_bkts.n; i++)
		big |= zl_bkts.v[i].dirty && zl_bkts.v[i].b.len > 2 * ZPART_MAX;
	if (!big)
		return HLOG_OK;
	uint64_t s = z->h.split, dst = s + (1ull << z->h.level);
	long i = zl_cache_find(&zl_bkts, s);
	if (i < 0) {
		uint8_t key[ZKEY_BYTES];
		hlog_key k;
		struct zpart *p = zl_cache_add(&zl_bkts, s);
		if (!p)
			return -ENOMEM;
		coll_bucket_key(key, z->h.cid, s);
		hlog_key_init_internal(&k, key, sizeof(key));
		int rc = hlog_read(c->w->sess, &k, zl_copy_cb, &p->b);
		p->lp = true;
		if (rc == HLOG_NOTFOUND) {
			rc = lp_buf_set(&p->b, zl_lp_empty, sizeof(zl_lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		} else if (rc == HLOG_OK && p->b.len == SIZE_MAX) {
			rc = -ENOMEM;
		} else if (rc == HLOG_OK) {
			zl_lp_trim(p);
			p->olen = p->b.len;
		}
		if (rc != HLOG_OK) {
			zl_bkts.n--;
			return rc;
		}
		i = (long)zl_bkts.n - 1;
	}
	size_t offs[3];
	int rc = coll_bucket_split(zl_bkts.v[i].b.p, 2, &z->h, &zl_two, offs);
	if (rc < 0)
		return rc;
	struct zpart *m = zl_cache_add(&zl_bkts, dst);
	if (!m || lp_buf_set(&m->b, zl_two.p + offs[1], offs[2] - offs[1]) < 0 ||
	    lp_buf_set(&zl_bkts.v[i].b, zl_two.p, offs[1]) < 0)
		return -ENOMEM;
	m->dirty = zl_bkts.v[i].dirty = true;
	coll_head_split_advance(&z->h);
	c->w->stats.coll_bucket_splits++;
	return HLOG_OK;
}

/* The changed parts of the caches into zl_parts (mbytes moved by their sizes); the count. */
static long parts_collect(client *c, struct zhead *z)
{
	size_t np = 0;
	if (zl_parts_reserve(zl_nodes.n + zl_bkts.n + 1) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < zl_nodes.n; i++) {
		struct zpart *n = &zl_nodes.v[i];
		if (!n->dirty && !n->dead)
			continue;
		if (n->dead && n->fresh)
			continue;
		zl_node_key(zl_keys[np], z->h.cid, n->id);
		zl_part_set(np++, ZKEY_BYTES, n->b.p, n->b.len, n->lp ? coll_part_cap(n->b.len, n->ocap) : 0, n->dead);
		z->h.mbytes = z->h.mbytes - n->olen + (n->dead ? 0 : n->b.len);
		c->w->stats.coll_zset_node_writes++;
	}
	for (size_t i = 0; i < zl_bkts.n; i++) {
		struct zpart *b = &zl_bkts.v[i];
		bool empty = lp_count(b->b.p) == 0;
		if (!b->dirty || (empty && !b->olen))
			continue;
		coll_bucket_key(zl_keys[np], z->h.cid, b->id);
		zl_part_set(np++, ZKEY_BYTES, b->b.p, b->b.len, coll_part_cap(b->b.len, b->ocap), empty);
		z->h.mbytes = z->h.mbytes - b->olen + (empty ? 0 : b->b.len);
	}
	return (long)np;
}

static int point_write(client *c, const hlog_key *k, coll_edit *e, struct zhead *z)
{
	int rc;
	if (e->zmode == COLL_ZE_MEMBERS) {
		rc = zl_members_sub(c, z, e->hint_first, e->hint_step > 0 ? e->hint_step : 1);
	} else {
		uint64_t n = e->zpop_n < 0 ? 0 : (uint64_t)e->zpop_n;
		n = n < z->h.count ? n : z->h.count;
		if (!n)
			rc = lp_buf_set(&zl_sub, zl_lp_empty, sizeof(zl_lp_empty)) < 0 ? -ENOMEM : HLOG_OK;
		else
			rc = zl_collect(c, z, e->zpop_max ? z->h.count - n : 0,
			             e->zpop_max ? z->h.count - 1 : n - 1, &zl_sub);
	}
	if (rc != HLOG_OK)
		return rc;
	coll_view view = { COLL_ZSET, z->h.enc, zl_sub.p, zl_sub.len, -1, &z->h };
	e->found = true;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	if ((rc = e->fn(e, &view)) < 0 || e->action == COLL_KEEP)
		return rc;
	if (e->patch)
		return SPW_E_CORRUPT;   /* zset edits build (cmd_zset.c) */
	const uint8_t *out = e->action == COLL_DELETE ? zl_lp_empty : e->out;
	int64_t delta = 0;
	if ((rc = apply_diff(c, z, out, &delta)) != HLOG_OK || (rc = bucket_split_maybe(c, z)) != HLOG_OK)
		return rc;
	struct head_plan hp = { z->raw, ZHEAD, NULL, 0, false };
	uint8_t expect[ZHEAD];
	memcpy(expect, z->raw, ZHEAD);
	hp.expect = expect;
	if ((int64_t)z->h.count + delta <= 0)
		return zl_head_write(c, k, &hp, 0);   /* empty: the head goes, the parts are garbage */
	z->h.count = (uint64_t)((int64_t)z->h.count + delta);
	long np = parts_collect(c, z);
	if (np < 0)
		return (int)np;
	zl_head_encode(z);
	hp.val = z->raw;
	hp.len = ZHEAD;
	if ((rc = zl_head_write(c, k, &hp, (size_t)np)) == HLOG_OK)
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
	size_t target = RECORD_MAX, cap = 64, n = 0, ri;   /* inner nodes; leaves ZPART_MAX */
	zt_ent *ents = malloc(cap * sizeof(*ents));
	char (*bufs)[LP_INTBUF_SIZE] = NULL;
	int rc = 0;
	uint64_t id = 1;
	if (!ents)
		return -ENOMEM;
	for (const uint8_t *p = lp_first(lp), *end; p; p = end) {
		unsigned long pairs;
		end = zt_chunk_end(lp, p, ZPART_MAX, &pairs);
		size_t bytes = (size_t)((end ? end : lp + lp_bytes(lp) - 1) - p);
		if (lp_buf_reserve(&zl_leaves, bytes + LP_EMPTY_BYTES) < 0 ||
		    (rc = node_new(id, zl_leaves.p, 0, true, &ri)) < 0)
			goto fail;
		struct zpart *leaf = &zl_nodes.v[ri];
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
			while (k < n && (k - j < 2 || bytes < target) && k - j < 65535)   /* 2 at least: n halves */
				bytes += ZT_ENT_FIXED + ents[k++].sep.mlen;
			lp_buf nb = { 0 };
			uint64_t total = 0;
			for (size_t q = j; q < k; q++)
				total += ents[q].count;
			if ((rc = zt_inner_build(&nb, ents + j, (uint32_t)(k - j))) == 0)
				rc = node_new(id, nb.p, nb.len, false, &ri);
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
		return expect ? zl_head_write(c, k, &p, 0) : HLOG_OK;
	if (!coll_zset_large_wanted(e->enc, len)) {
		size_t vlen = coll_value_len(len, 0);
		if (lp_buf_reserve(&zl_flat, vlen) < 0)
			return -ENOMEM;
		memset(zl_flat.p, 0, vlen);
		coll_hdr_write(zl_flat.p, COLL_ZSET, e->enc, len);
		memmove(zl_flat.p + COLL_HDR, out, len);
		p.val = zl_flat.p;
		p.len = vlen;
		return zl_head_write(c, k, &p, 0);
	}
	z.h = (coll_head){ COLL_ZSET, e->enc, zl_cid_new(), lp_count(out) / 2, 0, 0, 0 };
	coll_head_size(&z.h, coll_initial_buckets(len, ZPART_MAX));
	uint64_t nb = coll_bucket_count(&z.h);
	size_t *offs = malloc((nb + 1) * sizeof(*offs));
	if (!offs)
		return -ENOMEM;
	if ((rc = coll_lp_split(out, 2, &z.h, &zl_route, offs)) < 0 || (rc = tree_build(&z, out)) < 0 ||
	    (rc = zl_parts_reserve(nb + zl_nodes.n + 1)) < 0) {
		free(offs);
		return rc;
	}
	size_t np = 0;
	coll_registry_key(zl_keys[0], z.h.cid);
	zl_part_set(np++, COLL_REGISTRY_KEY_BYTES, k->ptr, k->len, 0, false);
	zl_parts[0].val = k->ptr;   /* the key "" is an empty value, not a delete */
	z.h.mbytes = k->len;
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *lp = zl_route.p + offs[b];
		if (!lp_first(lp))
			continue;
		coll_bucket_key(zl_keys[np], z.h.cid, b);
		zl_part_set(np, ZKEY_BYTES, lp, offs[b + 1] - offs[b], coll_part_cap(offs[b + 1] - offs[b], 0), false);
		z.h.mbytes += zl_parts[np++].len;
	}
	free(offs);
	for (size_t i = 0; i < zl_nodes.n; i++) {
		zl_node_key(zl_keys[np], z.h.cid, zl_nodes.v[i].id);
		zl_part_set(np, ZKEY_BYTES, zl_nodes.v[i].b.p, zl_nodes.v[i].b.len,
		            zl_nodes.v[i].lp ? coll_part_cap(zl_nodes.v[i].b.len, 0) : 0, false);
		z.h.mbytes += zl_parts[np++].len;
		c->w->stats.coll_zset_node_writes++;
	}
	zl_head_encode(&z);
	p.val = z.raw;
	p.len = ZHEAD;
	rc = zl_head_write(c, k, &p, np);
	if (rc == HLOG_OK && !was_large)
		c->w->stats.coll_large_conversions++;
	return rc;
}

static int whole_write(client *c, const hlog_key *k, coll_edit *e, struct zhead *z)
{
	int rc = zl_whole_read(c, z, &zl_small);
	if (rc != HLOG_OK)
		return rc;
	zl_cache_reset(&zl_nodes);
	coll_view view = { COLL_ZSET, z->h.enc, zl_small.p, zl_small.len, (int64_t)(2 * z->h.count), &z->h };
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
	const uint8_t *out = e->action == COLL_DELETE ? zl_lp_empty : e->out;
	return write_afresh(c, k, e, expect, ZHEAD, true, out, e->action == COLL_DELETE ? sizeof(zl_lp_empty) : e->out_len);
}

int coll_zset_large_rmw(client *c, const hlog_key *k, coll_edit *e)
{
	struct zhead z = { .copy = NULL };
	int rc;
	zl_bufs_enter();
	coll_latch_excl(k->hash);
	if ((rc = zl_head_read(c, k, &z)) != HLOG_OK || !z.large)
		rc = rc == HLOG_OK || rc == HLOG_NOTFOUND ? COLL_E_RESTART : rc;
	else if (e->type != COLL_ZSET)
		rc = SPW_E_WRONGTYPE;
	else if (e->zmode == COLL_ZE_MEMBERS || e->zmode == COLL_ZE_POP)
		rc = point_write(c, k, e, &z);
	else
		rc = whole_write(c, k, e, &z);
	if (rc == HLOG_OK)
		c->w->stats.coll_zset_node_reads += zl_run_node_reads;
	coll_latch_excl_release(k->hash);
	return rc;
}

/* The conversion: the small path's edit made a skiplist payload past coll-record-max. Run it
 * again on a copy of the small record under the exclusive latch and write the result afresh. */
int coll_zset_large_convert(client *c, const hlog_key *k, coll_edit *e)
{
	struct zhead z = { .copy = &zl_small };
	coll_view view;
	int rc;
	zl_bufs_enter();
	coll_latch_excl(k->hash);
	rc = zl_head_read(c, k, &z);
	if (rc == HLOG_PENDING || rc < 0 || z.large) {
		rc = z.large ? COLL_E_RESTART : rc;
		goto out;
	}
	bool found = rc == HLOG_OK;
	rc = HLOG_OK;
	if (found && z.hv.rtype == HLOG_T_STRING)
		rc = SPW_E_WRONGTYPE;
	else if (found && (z.hv.rtype != HLOG_T_HEAD || !coll_parse(zl_small.p, zl_small.len, &view)))
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
	const uint8_t *out = e->action == COLL_DELETE ? zl_lp_empty : e->out;
	rc = write_afresh(c, k, e, found ? zl_small.p : NULL, found ? zl_small.len : 0, false, out,
	                  e->action == COLL_DELETE ? sizeof(zl_lp_empty) : e->out_len);
out:
	coll_latch_excl_release(k->hash);
	return rc;
}
