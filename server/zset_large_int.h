/*
 * zset_large_int.h - what server/coll_zset_large.c (the head, the caches of nodes and buckets,
 * reads) shares with server/coll_zset_write.c (tree edits, point writes, writing afresh). Private
 * to those two files; docs in coll_zset_large.c's notes.
 */
#ifndef SPW_SERVER_ZSET_LARGE_INT_H
#define SPW_SERVER_ZSET_LARGE_INT_H

#include "server/zset_int.h"

#include "coll/bucket.h"
#include "coll/ztree.h"

#define ZHEAD 72u
#define RECORD_MAX ((size_t)__atomic_load_n(&g_cfg.coll_record_max, __ATOMIC_RELAXED))
/* A bucket's and a leaf's nominal size, a quarter of coll-record-max (256 bytes at least, or
 * coll-record-max below that: leaves of a few pairs make a whole read thousands of parts), as a
 * large hash's buckets (coll_large.c note 11): every write walks one of each linearly, and
 * copies them when they cannot change in place. Inner nodes keep coll-record-max: their fan-out
 * keeps a 10M-member tree at three levels. */
#define ZPART_MAX (RECORD_MAX / 4 > 256 ? RECORD_MAX / 4 : RECORD_MAX < 256 ? RECORD_MAX : (size_t)256)
#define BUF_KEEP (1u << 20)
#define ZKEY_BYTES COLL_BUCKET_KEY_BYTES

extern const uint8_t zl_lp_empty[LP_EMPTY_BYTES];

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
	size_t ocap;     /* its record's value length (spare capacity included; coll_part_cap) */
	bool lp;         /* a listpack (a leaf or a bucket), which may keep spare capacity */
	bool dirty, dead, fresh;
};

struct zcache {
	struct zpart *v;
	size_t n, cap;
};

/* A descent's path: the cached node at each level, the entry taken at each inner level, and
 * the pairs before the leaf. */
struct zpath {
	size_t node[ZT_MAX_DEPTH + 1];
	uint32_t ent[ZT_MAX_DEPTH];
	uint64_t before;
};

extern __thread struct zcache zl_nodes, zl_bkts;
extern __thread lp_buf zl_sub, zl_two, zl_flat, zl_small, zl_route, zl_leaves;
extern __thread hlog_group_part *zl_parts;
extern __thread uint8_t (*zl_keys)[ZKEY_BYTES];
/* Nodes read by this run of the command: INFO's coll_zset_node_reads counts the run that
 * completes (a run that parks reads again after the fetch). */
extern __thread uint64_t zl_run_node_reads;

void zl_node_key(uint8_t *out, uint64_t cid, uint64_t id);
uint64_t zl_cid_new(void);
void zl_cache_reset(struct zcache *c);
void zl_bufs_enter(void);
struct zpart *zl_cache_add(struct zcache *c, uint64_t id);
long zl_cache_find(const struct zcache *c, uint64_t id);
int zl_parts_reserve(size_t n);
void zl_part_set(size_t i, size_t klen, const uint8_t *val, size_t len, size_t cap, bool del);
/* A listpack part read by zl_copy_cb: ocap the record's length, b.len the listpack's own. */
void zl_lp_trim(struct zpart *p);
void zl_copy_cb(void *ctx, const hlog_value *v);
int zl_head_read(client *c, const hlog_key *k, struct zhead *z);
int zl_head_write(client *c, const hlog_key *k, struct head_plan *p, size_t nparts);
int zl_node_load(client *c, const struct zhead *z, uint64_t id, bool inner, size_t *out);
int zl_bucket_load(client *c, const struct zhead *z, const void *m, size_t mlen, size_t *out);
int zl_descend(client *c, const struct zhead *z, const zt_bound *b, uint64_t r, struct zpath *p);
int zl_collect(client *c, const struct zhead *z, uint64_t from, uint64_t to, lp_buf *out);
int zl_whole_read(client *c, const struct zhead *z, lp_buf *out);
int zl_members_sub(client *c, const struct zhead *z, int first, int step);
void zl_head_encode(struct zhead *z);

#endif
