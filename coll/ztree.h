/*
 * ztree.h - the counted B+tree of a large sorted set (docs/ARCHITECTURE.md "Large collections",
 * the zset row): pure functions on node bytes, no store. server/coll_zset_large.c keeps the nodes
 * as parts cid|t|<node id> (coll/bucket.h COLL_KIND_ZNODE).
 *
 * A leaf is a listpack of member, score pairs in (score, member) order, in the small layout's
 * format (coll/zset.h), so the leaves concatenated in order are the small payload. An inner node:
 *   +0 u8 'I', +1 u8 0, +2 u16 n (little-endian), then n entries
 *   u64 child id | u64 subtree count | f64 score | u32 mlen | member bytes  (the child's first
 *   pair as it was when the entry was made: a lower bound of the child's keys; entry 0's is
 *   never compared, entry 0 takes everything below entry 1's)
 *
 * Ownership: functions write into caller-owned lp_bufs (listpack.h), which they may move.
 */
#ifndef SPW_COLL_ZTREE_H
#define SPW_COLL_ZTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

#define ZT_INNER_HDR 4u
#define ZT_ENT_FIXED 28u
#define ZT_MAX_DEPTH 24

/* A pair's key in zset order: score, then member bytes (memcmp, shorter first). */
typedef struct zt_key {
	double score;
	const char *m;
	size_t mlen;
} zt_key;

/* A bound: the keys before it form a prefix of the order. by_score: compare scores only.
 * incl: a key equal to the bound is before it. */
typedef struct zt_bound {
	zt_key k;
	bool by_score, incl;
} zt_bound;

typedef struct zt_ent {
	uint64_t id, count;
	zt_key sep;
} zt_ent;

int zt_key_cmp(const zt_key *a, const zt_key *b);
bool zt_before(const zt_key *x, const zt_bound *b);
/* The key of the pair whose member entry is p in leaf lp (buf: LP_INTBUF_SIZE, holds an int
 * member's text). */
void zt_key_of(const uint8_t *lp, const uint8_t *p, char *buf, zt_key *out);

/* ---- inner nodes ---- */
/* Whether node (len bytes) is a well-formed inner node with at least one entry. */
bool zt_inner_valid(const uint8_t *node, size_t len);
static inline uint32_t zt_inner_n(const uint8_t *node) { return (uint32_t)node[2] | (uint32_t)node[3] << 8; }
/* The entry at byte offset off into *e; returns the next entry's offset. */
size_t zt_inner_ent(const uint8_t *node, size_t off, zt_ent *e);
/* Offset of entry i. */
size_t zt_inner_off(const uint8_t *node, uint32_t i);
/* An inner node of the n entries in b (b->len = its bytes). 0 or -ENOMEM / -E2BIG. */
int zt_inner_build(lp_buf *b, const zt_ent *ents, uint32_t n);
/* Insert e before entry i (i = n: at the end); remove entry i; add delta to entry i's count. */
int zt_inner_insert(lp_buf *b, uint32_t i, const zt_ent *e);
void zt_inner_remove(lp_buf *b, uint32_t i);
void zt_inner_count_add(uint8_t *node, uint32_t i, int64_t delta);
void zt_inner_count_set(uint8_t *node, uint32_t i, uint64_t count);
/* Sum of the entries' counts. */
uint64_t zt_inner_total(const uint8_t *node);
/* The child a bound descends into: the last entry i >= 1 whose separator is before b, else 0;
 * *skipped: the counts of the entries before it. */
uint32_t zt_inner_pick(const uint8_t *node, const zt_bound *b, uint64_t *skipped);
/* The child holding rank r (0-based, < the node's total; r past it: the last); *skipped as above. */
uint32_t zt_inner_rank(const uint8_t *node, uint64_t r, uint64_t *skipped);
/* Split an inner node of n >= 2 entries by bytes: out gets two inner nodes, the first at
 * out->p + offs[0] .. offs[1], the second at offs[1] .. offs[2]. 0 or an error. */
int zt_inner_split(const uint8_t *node, size_t len, lp_buf *out, size_t *offs);

/* ---- leaves ---- */
/* Pairs of the leaf before b. */
uint64_t zt_leaf_before(const uint8_t *lp, const zt_bound *b);
/* Split a leaf of >= 2 pairs by bytes into two listpacks (offs as zt_inner_split). */
int zt_leaf_split(const uint8_t *lp, lp_buf *out, size_t *offs);
/* The end of a chunk of pairs from member entry p of about target bytes (at least one pair):
 * the member entry after it, or NULL at the end; *pairs gets the chunk's pairs. */
const uint8_t *zt_chunk_end(const uint8_t *lp, const uint8_t *p, size_t target, unsigned long *pairs);

#endif
