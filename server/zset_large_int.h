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
void zl_part_set(size_t i, size_t klen, const uint8_t *val, size_t len, bool del);
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
