/*
 * dump_coll.c - the collection entries of dump_types[] (dump.h): how a hash, list, set or sorted
 * set decoded from a DUMP payload or an RDB file becomes a collection record (coll/coll.h), and
 * how one is DUMPed as redis-server 7.0 would DUMP it.
 *
 * Design notes:
 *  1. A value is rebuilt, never copied: every element the decoder hands over (rdb_value.c, whatever
 *     the encoding: listpack, ziplist, zipmap, quicklist nodes, plain RDB elements) is appended to
 *     a fresh listpack with lp_append, which stores an integer string as the narrowest int entry as
 *     lpAppend does. So the record holds exactly the bytes our commands would have built for the
 *     same content, and a listpack that redis-server wrote comes out byte for byte as it went in.
 *  2. Duplicates (hash fields, set and zset members) are refused as Redis 7.0 refuses them in
 *     RESTORE and in an RDB ("ERR Bad data format"): the fields' entries are remembered by (offset, length) in the new
 *     listpack and sorted once at the end, equal neighbours meaning a duplicate: O(n log n), no
 *     extra copy of the strings. Two entries are equal exactly when their bytes are, since an
 *     entry's encoding follows from its content alone (note 1).
 *  3. The encoding byte follows Redis 7.0's loading rules, as probed on redis-server 7.0.15: a
 *     listpack hash (type 16) becomes a hashtable only past hash-max-listpack-entries; a plain,
 *     ziplist or zipmap hash also when a field or value is longer than hash-max-listpack-value.
 *     A list is always "quicklist" (7.0 has no listpack lists). A set is an intset when every
 *     member is an integer and there are at most set-max-intset-entries of them, whatever it came
 *     as (an intset past the limit, a plain set of few integers), else a listpack of its members
 *     in the payload's order (coll/set.h's "hashtable").
 *  4. DUMP: a listpack-encoded hash is type 16 with its listpack as it is (redis-server's bytes for
 *     the same content); a hashtable-encoded one is type 4 (RDB_TYPE_HASH) with its pairs in our
 *     order, where Redis writes its dict's order (the same content, other bytes). A list is
 *     quicklist 2 with its elements cut into nodes as quicklistPushTail fills them under
 *     list-max-listpack-size (_quicklistNodeAllowInsert): the nodes of a list Redis built by RPUSH,
 *     so DUMP's bytes equal redis-server's for such a list; a list Redis built otherwise (LPUSH,
 *     LINSERT, deletions) splits elsewhere there, and RESTORE takes either. A set is type 11 with
 *     its intset as it is, or type 2 with its members in our order (Redis: its dict's).
 *  5. A sorted set's listpack is kept in (score, member) order (coll/zset.h), whatever order the
 *     pairs came in: a listpack or ziplist that redis-server wrote is already in it (one O(n) check,
 *     and the listpack is taken as built), a ZSET_2 from a skiplist comes highest first, a
 *     hand-made one in any order; those are sorted once (O(n log n)) into a new listpack. Members
 *     are checked for duplicates as note 2 (NaN scores the decoder refuses), on every encoding:
 *     Redis 7.0 refuses them in ZSET / ZSET_2 always and in a listpack with sanitize-dump-payload.
 *  6. The encoding byte follows rdbLoadObject: a listpack or ziplist zset becomes a skiplist only
 *     past zset-max-listpack-entries (a long member stays in the listpack); a ZSET / ZSET_2 one is a
 *     listpack when it is within both zset-max-listpack-entries and -value (and under listpack's
 *     1 GiB safety size). DUMP writes a listpack zset as type 17 with its listpack as it is, a
 *     skiplist one as ZSET_2 from the highest pair down with binary scores, as rdbSaveObject walks
 *     the skiplist from its tail: both are redis-server's bytes for the same content.
 */
#include "server/server_int.h"
#include "server/dump.h"
#include "server/zset_int.h"
#include "coll/coll.h"
#include "coll/list.h"
#include "coll/listpack.h"
#include "coll/intset.h"
#include "coll/set.h"
#include "coll/numconv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- building a record (notes 1-3) ---------------- */

typedef struct key_ent {
	uint32_t off, len;            /* an entry's bytes in the new listpack */
} key_ent;

typedef struct coll_build {
	int type;                     /* COLL_* */
	lp_buf lp;
	key_ent *keys;                /* fields (hash), for the duplicate check */
	size_t nkeys, kcap;
	size_t maxlen;                /* the longest field or value */
	uint64_t n;                   /* elements (pairs for a hash) */
	double *scores;               /* zsets: keys[i]'s score (until keys_have_dup sorts keys) */
	size_t scap;
	size_t total;                 /* zsets: the members' bytes */
} coll_build;

static int build_begin(void *ctx, int kind, int rdb_type, uint64_t hint)
{
	dump_build *b = ctx;
	(void)rdb_type;
	coll_build *cb = calloc(1, sizeof(*cb));
	if (!cb || lp_buf_init(&cb->lp) < 0) {
		free(cb);
		return -ENOMEM;
	}
	b->state = cb;
	cb->type = kind == RDB_KIND_HASH ? COLL_HASH : kind == RDB_KIND_LIST ? COLL_LIST :
		kind == RDB_KIND_SET ? COLL_SET : COLL_ZSET;
	/* a hint from a hostile payload is only trusted as far as a modest reservation */
	if (cb->type != COLL_LIST && hint) {
		cb->kcap = hint < 65536 ? hint : 65536;
		if (!(cb->keys = malloc(cb->kcap * sizeof(*cb->keys))))
			return -ENOMEM;
	}
	return 0;
}

static void build_fini(dump_build *b)
{
	coll_build *cb = b->state;
	if (!cb)
		return;
	lp_buf_free(&cb->lp);
	free(cb->keys);
	free(cb->scores);
	free(cb);
	b->state = NULL;
}

/* Append s, remembering its entry as a key when key is set (note 2). */
static int build_append(coll_build *cb, const uint8_t *s, size_t len, bool key)
{
	size_t off = cb->lp.len - 1;
	int rc = lp_append(&cb->lp, s, len);
	if (rc < 0)
		return rc;
	if (len > cb->maxlen)
		cb->maxlen = len;
	if (!key)
		return 0;
	if (cb->lp.len > UINT32_MAX)
		return -E2BIG;
	if (cb->nkeys == cb->kcap) {
		size_t cap = cb->kcap ? cb->kcap * 2 : 64;
		key_ent *k = realloc(cb->keys, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		cb->keys = k;
		cb->kcap = cap;
	}
	cb->keys[cb->nkeys++] = (key_ent){ (uint32_t)off, (uint32_t)(cb->lp.len - 1 - off) };
	return 0;
}

static int key_cmp(const void *a, const void *b, void *arg)
{
	const key_ent *x = a, *y = b;
	const uint8_t *lp = arg;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(lp + x->off, lp + y->off, x->len);
}

/* Whether two remembered keys are equal: sort, then compare neighbours. */
static bool keys_have_dup(coll_build *cb)
{
	if (cb->nkeys < 2)
		return false;
	qsort_r(cb->keys, cb->nkeys, sizeof(*cb->keys), key_cmp, cb->lp.p);
	for (size_t i = 1; i < cb->nkeys; i++)
		if (key_cmp(&cb->keys[i - 1], &cb->keys[i], cb->lp.p) == 0)
			return true;
	return false;
}

/* The record's value: the header, the listpack, and coll_value_len's spare capacity (zeroed). */
static int build_finish(dump_build *b, coll_build *cb, int enc)
{
	static const uint8_t zero[256];
	uint8_t hdr[COLL_HDR];
	size_t used = cb->lp.len, len = coll_value_len(used, 0);
	if (used > UINT32_MAX)
		return SPW_E_TOO_BIG;
	coll_hdr_write(hdr, cb->type, enc, used);
	b->val.len = 0;
	rdb_buf_put(&b->val, hdr, sizeof(hdr));
	rdb_buf_put(&b->val, cb->lp.p, used);
	for (size_t pad = len - COLL_HDR - used; pad; ) {
		size_t n = pad < sizeof(zero) ? pad : sizeof(zero);
		rdb_buf_put(&b->val, zero, n);
		pad -= n;
	}
	b->rtype = HLOG_T_HEAD;
	return b->val.oom ? -ENOMEM : 0;
}

/* ---------------- hashes ---------------- */

static int hash_field(void *ctx, const uint8_t *f, size_t flen, const uint8_t *v, size_t vlen)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	int rc = build_append(cb, f, flen, true);
	if (rc == 0)
		rc = build_append(cb, v, vlen, false);
	cb->n++;
	return rc;
}

static int hash_end(void *ctx)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	if (keys_have_dup(cb))
		return SPW_E_CORRUPT;
	bool ht = cb->n > g_cfg.hash_max_listpack_entries;
	if (b->rdb_type != RDB_TYPE_HASH_LISTPACK && cb->maxlen > g_cfg.hash_max_listpack_value)
		ht = true;   /* note 3 */
	return build_finish(b, cb, ht ? CENC_HASHTABLE : CENC_LISTPACK);
}

/* The payload's listpack, checked shallowly as the commands check it (cmd_hash.c note 8). */
static int coll_payload(const hlog_value *v, coll_view *cv)
{
	if (!coll_parse(v->ptr, v->len, cv) || !lp_validate(cv->p, cv->used, false, NULL, NULL))
		return SPW_E_CORRUPT;
	return 0;
}

static void write_entry(rdb_buf *out, const uint8_t *e)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s = lp_entry_str(e, buf, &len);
	rdb_write_string(out, s, len);
}

static int hash_dump(const hlog_value *v, rdb_buf *out)
{
	coll_view cv;
	int rc = coll_payload(v, &cv);
	if (rc < 0)
		return rc;
	if (cv.enc == CENC_LISTPACK) {
		rdb_dump_hash_listpack(out, cv.p, cv.used);
		return 0;
	}
	uint8_t t = RDB_TYPE_HASH;   /* note 4 */
	rdb_buf_put(out, &t, 1);
	rdb_write_len(out, lp_count(cv.p) / 2);
	for (const uint8_t *e = lp_first(cv.p); e; e = lp_next(cv.p, e))
		write_entry(out, e);
	return 0;
}

static const rdb_visitor hash_vis = { .begin = build_begin, .hash_field = hash_field, .end = hash_end };
const dump_type_ops dump_hash_ops = { .vis = &hash_vis, .fini = build_fini, .dump = hash_dump };

/* ---------------- lists ---------------- */

static int list_elem(void *ctx, const uint8_t *p, size_t len)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	cb->n++;
	return build_append(cb, p, len, false);
}

static int list_end(void *ctx)
{
	dump_build *b = ctx;
	return build_finish(b, b->state, CENC_QUICKLIST);
}

/* Redis 7.0's _quicklistNodeAllowInsert: whether an element of sz bytes (its string length, as
 * quicklistPush is given it) joins a node of node_sz bytes and count elements under fill. */
static bool node_allows(size_t node_sz, unsigned count, int fill, size_t sz)
{
	static const size_t level[] = { 4096, 8192, 16384, 32768, 65536 };
	size_t new_sz = node_sz + sz + 8;   /* SIZE_ESTIMATE_OVERHEAD */
	if (sz >= (1u << 30))               /* isLargeElement: a plain node of its own */
		return false;
	if (fill < 0 && (size_t)-(long)fill <= SPW_ARRAY_LEN(level))
		if (new_sz <= level[-(long)fill - 1])
			return true;
	if (new_sz > 8192)                  /* SIZE_SAFETY_LIMIT */
		return false;
	return (int)count < fill;
}

/* One node: the entries from a up to end, count of them, as a listpack with an exact count. */
static int node_write(rdb_buf *out, lp_buf *tmp, const uint8_t *lp, const uint8_t *a, const uint8_t *end,
	uint32_t count)
{
	if (lp_buf_reserve(tmp, LP_EMPTY_BYTES + (size_t)(end - a)) < 0)
		return -ENOMEM;
	tmp->len = list_run(tmp->p, lp, a, end, count);
	tmp->p[4] = (uint8_t)count;         /* list_run keeps lp's "unknown"; a node's is exact */
	tmp->p[5] = (uint8_t)(count >> 8);
	rdb_dump_list_node(out, tmp->p, tmp->len);
	return 0;
}

/* Walk lp cutting it into nodes as RPUSH would fill them (note 4): count them when out is NULL,
 * else write each. Returns the node count or -ENOMEM. */
static long list_nodes(const uint8_t *lp, int fill, rdb_buf *out)
{
	const uint8_t *start = NULL, *e = lp_first(lp);
	const uint8_t *lp_end = lp + lp_bytes(lp) - 1;
	size_t node_sz = 0;
	unsigned count = 0;
	long nodes = 0;
	lp_buf tmp = { 0 };
	int rc = 0;
	while (e && rc == 0) {
		const uint8_t *next = lp_next(lp, e), *stop = next ? next : lp_end;
		lp_val lv;
		char buf[LP_INTBUF_SIZE];
		size_t sz;
		lp_get(e, &lv);
		lp_val_str(&lv, buf, &sz);
		if (start && node_allows(node_sz, count, fill, sz)) {
			node_sz += (size_t)(stop - e);
			count++;
		} else {
			if (start && out)
				rc = node_write(out, &tmp, lp, start, e, count);
			start = e;
			node_sz = LP_EMPTY_BYTES + (size_t)(stop - e);
			count = 1;
			nodes++;
		}
		e = next;
	}
	if (start && out && rc == 0)
		rc = node_write(out, &tmp, lp, start, lp_end, count);
	lp_buf_free(&tmp);
	return rc < 0 ? rc : nodes;
}

static int list_dump(const hlog_value *v, rdb_buf *out)
{
	coll_view cv;
	int rc = coll_payload(v, &cv);
	if (rc < 0)
		return rc;
	int fill = g_cfg.list_max_listpack_size;
	long nodes = list_nodes(cv.p, fill, NULL);
	rdb_dump_list_begin(out, (uint64_t)nodes);
	nodes = list_nodes(cv.p, fill, out);
	return nodes < 0 ? (int)nodes : 0;
}

static const rdb_visitor list_vis = { .begin = build_begin, .list_elem = list_elem, .end = list_end };
const dump_type_ops dump_list_ops = { .vis = &list_vis, .fini = build_fini, .dump = list_dump };

/* ---------------- sets ---------------- */

static int set_member(void *ctx, const uint8_t *p, size_t len)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	cb->n++;
	return build_append(cb, p, len, true);
}

/* Whether every entry of lp is an int entry (lp_append made each integer string one). */
static bool lp_all_ints(const uint8_t *lp)
{
	for (const uint8_t *e = lp_first(lp); e; e = lp_next(lp, e)) {
		lp_val v;
		lp_get(e, &v);
		if (!v.is_int)
			return false;
	}
	return true;
}

static int set_end(void *ctx)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	int enc = CENC_HASHTABLE, rc;
	if (keys_have_dup(cb))
		return SPW_E_CORRUPT;
	/* note 3; cset_rebuild adds one by one, which is cheap only for an intset's few members */
	if (cb->n <= g_cfg.set_max_intset_entries && lp_all_ints(cb->lp.p) &&
	    (rc = cset_rebuild(&cb->lp, &enc, g_cfg.set_max_intset_entries)) < 0)
		return rc;
	return build_finish(b, cb, enc);
}

static int set_dump(const hlog_value *v, rdb_buf *out)
{
	coll_view cv;
	if (!coll_parse(v->ptr, v->len, &cv))
		return SPW_E_CORRUPT;
	if (cv.enc == CENC_INTSET) {
		if (!is_validate(cv.p, cv.used, false))
			return SPW_E_CORRUPT;
		rdb_dump_set_intset(out, cv.p, cv.used);
		return 0;
	}
	if (!lp_validate(cv.p, cv.used, false, NULL, NULL))
		return SPW_E_CORRUPT;
	rdb_dump_set_begin(out, lp_count(cv.p));
	for (const uint8_t *e = lp_first(cv.p); e; e = lp_next(cv.p, e))
		write_entry(out, e);
	return 0;
}

static const rdb_visitor set_vis = { .begin = build_begin, .set_member = set_member, .end = set_end };
const dump_type_ops dump_set_ops = { .vis = &set_vis, .fini = build_fini, .dump = set_dump };

/* ---------------- sorted sets (notes 5, 6) ---------------- */

static int zset_member(void *ctx, const uint8_t *p, size_t len, double score)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	int rc = build_append(cb, p, len, true);
	if (rc < 0)
		return rc;
	if (cb->scap < cb->kcap) {
		double *d = realloc(cb->scores, cb->kcap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		cb->scores = d;
		cb->scap = cb->kcap;
	}
	cb->scores[cb->nkeys - 1] = score;
	cb->total += len;
	cb->n++;
	return coll_lp_append_score(&cb->lp, score, false);
}

/* The pairs as they came: member entries at keys[i] of lp, scores[i]. */
typedef struct zpairs {
	const uint8_t *lp;
	const key_ent *keys;
	const double *scores;
} zpairs;

/* zslInsert's order: by score, then by member bytes (zs_member_cmp). */
static int zpair_cmp(const zpairs *z, size_t i, size_t j)
{
	double a = z->scores[i], b = z->scores[j];
	char buf[LP_INTBUF_SIZE];
	size_t len;
	if (a != b)
		return a < b ? -1 : 1;
	const char *s = zs_member(z->lp + z->keys[j].off, buf, &len);
	return zs_member_cmp(z->lp + z->keys[i].off, s, len);
}

static int zidx_cmp(const void *a, const void *b, void *arg)
{
	return zpair_cmp(arg, *(const uint32_t *)a, *(const uint32_t *)b);
}

/* The pairs of cb sorted into out, a new listpack (note 5). 0 or -ENOMEM / -E2BIG. */
static int zset_sort(coll_build *cb, const zpairs *z, lp_buf *out)
{
	uint32_t *idx = malloc(cb->nkeys * sizeof(*idx));
	int rc = idx ? lp_buf_init(out) : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < cb->nkeys; i++)
		idx[i] = (uint32_t)i;
	if (rc == 0)
		qsort_r(idx, cb->nkeys, sizeof(*idx), zidx_cmp, (void *)z);
	for (size_t i = 0; rc == 0 && i < cb->nkeys; i++) {
		char buf[LP_INTBUF_SIZE];
		size_t len;
		const char *s = zs_member(z->lp + z->keys[idx[i]].off, buf, &len);
		if ((rc = lp_append(out, s, len)) == 0)
			rc = coll_lp_append_score(out, z->scores[idx[i]], false);
	}
	free(idx);
	return rc;
}

static int zset_end(void *ctx)
{
	dump_build *b = ctx;
	coll_build *cb = b->state;
	zpairs z = { cb->lp.p, cb->keys, cb->scores };
	lp_buf sorted = { 0 };
	size_t i = 1;
	int rc;
	if (cb->nkeys > UINT32_MAX)
		return -E2BIG;
	while (i < cb->nkeys && zpair_cmp(&z, i - 1, i) < 0)
		i++;
	if (i < cb->nkeys && (rc = zset_sort(cb, &z, &sorted)) < 0) {
		lp_buf_free(&sorted);
		return rc;
	}
	if (keys_have_dup(cb)) {   /* on the listpack the keys point into */
		lp_buf_free(&sorted);
		return SPW_E_CORRUPT;
	}
	if (sorted.p) {
		lp_buf_free(&cb->lp);
		cb->lp = sorted;
	}
	int enc;   /* note 6 */
	if (b->rdb_type == RDB_TYPE_ZSET_LISTPACK || b->rdb_type == RDB_TYPE_ZSET_ZIPLIST)
		enc = cb->n > ZSET_MAX_LISTPACK_ENTRIES ? CENC_SKIPLIST : CENC_LISTPACK;
	else if (cb->total > (1u << 30))   /* lpSafeToAdd */
		enc = CENC_SKIPLIST;
	else
		enc = zs_result_enc(cb->n, cb->maxlen);
	return build_finish(b, cb, enc);
}

static int zset_dump(const hlog_value *v, rdb_buf *out)
{
	coll_view cv;
	int rc = coll_payload(v, &cv);
	if (rc < 0)
		return rc;
	if (cv.enc == CENC_LISTPACK) {
		rdb_dump_zset_listpack(out, cv.p, cv.used);
		return 0;
	}
	uint8_t t = RDB_TYPE_ZSET_2;   /* note 6: from the highest pair down, as rdbSaveObject */
	rdb_buf_put(out, &t, 1);
	rdb_write_len(out, zs_len(cv.p));
	for (const uint8_t *sc = lp_last(cv.p); sc; ) {
		const uint8_t *m = lp_prev(cv.p, sc);
		if (!m)
			return SPW_E_CORRUPT;
		write_entry(out, m);
		rdb_write_binary_double(out, zs_score(cv.p, m));
		sc = lp_prev(cv.p, m);
	}
	return 0;
}

static const rdb_visitor zset_vis = { .begin = build_begin, .zset_member = zset_member, .end = zset_end };
const dump_type_ops dump_zset_ops = {
	.vis = &zset_vis, .fini = build_fini, .dump = zset_dump
};
