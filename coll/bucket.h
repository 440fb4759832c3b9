/*
 * bucket.h - the large layout's buckets (docs/ARCHITECTURE.md "Large collections"): which bucket
 * a member lies in (linear hashing over the head's level and split pointer, coll/coll.h), the
 * internal keys of a collection's parts, and the listpack work of splitting a collection or a
 * bucket into buckets and assembling buckets into one listpack. Pure algorithms on bytes, no store.
 *
 * A bucket's value is a listpack of the small layout's entries (a hash's field, value pairs, a
 * set's members): entries are self-contained (their encoding and back length), so they are
 * copied between listpacks as they are.
 *
 * Ownership: functions write into caller-owned lp_bufs (listpack.h), which they may move.
 */
#ifndef SPW_COLL_BUCKET_H
#define SPW_COLL_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/listpack.h"

/* Internal keys: cid (8 bytes big-endian) | kind | suffix. */
#define COLL_KIND_BUCKET 'b'
#define COLL_KIND_REGISTRY 'R'
#define COLL_KIND_NODE 'n'      /* a large list's node (coll/deque.h) */
#define COLL_KIND_ELEM 'e'      /* a large list's out-of-line element (coll/deque.h) */
#define COLL_KIND_ZNODE 't'   /* a large zset's tree node (coll/ztree.h): suffix its node id */
#define COLL_BUCKET_KEY_BYTES 17u
#define COLL_REGISTRY_KEY_BYTES 9u

/* The key of bucket b of collection cid into out (COLL_BUCKET_KEY_BYTES). */
void coll_bucket_key(uint8_t *out, uint64_t cid, uint64_t b);
/* The key of cid's registry (value: the owner's user key) into out (COLL_REGISTRY_KEY_BYTES). */
void coll_registry_key(uint8_t *out, uint64_t cid);
/* Parse an internal key: true with *cid, *kind and (a bucket) *b when it is one of ours. */
bool coll_part_key_parse(const uint8_t *k, size_t len, uint64_t *cid, int *kind, uint64_t *b);

/* XXH3 of a member's bytes seeded by the cid; an int entry hashes as its base-10 text, so a
 * member hashes the same whichever way the listpack holds it. */
uint64_t coll_member_hash(uint64_t cid, const void *m, size_t len);
uint64_t coll_entry_hash(uint64_t cid, const uint8_t *entry);

/* Buckets of a head: 2^level + split. */
static inline uint64_t coll_bucket_count(const coll_head *h) { return (1ull << h->level) + h->split; }
/* The bucket of a member of hash h. */
static inline uint64_t coll_bucket_of(const coll_head *h, uint64_t hash)
{
	uint64_t b = hash & ((1ull << h->level) - 1);
	return b < h->split ? hash & ((2ull << h->level) - 1) : b;
}
/* Level and split pointer for n >= 1 buckets. */
void coll_head_size(coll_head *h, uint64_t n);
/* The bucket count of a collection converted from a payload of bytes: buckets hold about half of
 * record_max each (at least 1). */
uint64_t coll_initial_buckets(size_t bytes, size_t record_max);
/* Linear hashing's split, after the caller moved bucket h->split's entries: the split pointer
 * moves on; at 2^level it comes back to 0 and the level grows. */
void coll_head_split_advance(coll_head *h);

/* Route the entries of listpack lp (groups of per entries: 2 for a hash's pairs, 1 for a set;
 * the first of a group is the member hashed) into n listpacks: group -> route(arg, hash) < n.
 * out receives the n listpacks back to back, listpack j at out->p + offs[j] (offs: n + 1 slots,
 * offs[n] = out->len). 0, -ENOMEM, or -E2BIG (a listpack past LP_MAX_BYTES, a bad route). */
typedef uint64_t (*coll_route_fn)(void *arg, uint64_t hash);
int coll_lp_route(const uint8_t *lp, unsigned per, uint64_t cid, coll_route_fn route, void *arg,
                  size_t n, lp_buf *out, size_t *offs /* out */);
/* The n buckets of h (n = coll_bucket_count(h)) from lp: coll_lp_route by coll_bucket_of. */
int coll_lp_split(const uint8_t *lp, unsigned per, const coll_head *h, lp_buf *out, size_t *offs);
/* Split bucket h->split of h: into two listpacks, out's first the entries that stay, its second
 * those that move to bucket h->split + 2^level (offs: 3 slots). */
int coll_bucket_split(const uint8_t *lp, unsigned per, const coll_head *h, lp_buf *out, size_t *offs);

/* Assembling: begin an empty listpack in out, add listpacks' entries (copied as they are), end
 * (header: total bytes, count or LP_COUNT_UNKNOWN past 65534). 0, -ENOMEM or -E2BIG. */
int coll_lp_asm_begin(lp_buf *out);
int coll_lp_asm_add(lp_buf *out, const uint8_t *lp, size_t len);
void coll_lp_asm_end(lp_buf *out, uint64_t count);

#endif
