/*
 * coll_list_int.h - private to the large list layout: server/coll_list_large.c's use of
 * server/coll_list_elem.c (out-of-line elements, coll_list_elem.c's notes).
 */
#ifndef SPW_COLL_LIST_INT_H
#define SPW_COLL_LIST_INT_H

#include "server/server_int.h"

#include "coll/listpack.h"

/* One out-of-line element to write: position, bytes (pointing into the caller's memory). */
typedef struct le_part {
	uint64_t pos;
	const uint8_t *val;
	size_t len;
} le_part;

/* Elements longer than this are stored out of line (note 1). */
size_t le_threshold(void);
/* SPW_E_TOO_BIG when an element of len bytes cannot be one record (note 5), else 0. */
int le_fits(size_t len);
/* b's listpack with every reference replaced by its element (read, prefetched in one wave): b
 * itself when it holds none. HLOG_OK, HLOG_PENDING (nothing changed) or an error. */
int le_resolve(client *c, uint64_t cid, lp_buf *b);
/* The references in listpack lp: their count, and the sum of their elements' bytes in *bytes. */
size_t le_refs(const uint8_t *lp, uint64_t *bytes /* out */);
/* Listpack lp (its first entry at position lo) outlined into out: elements past le_threshold
 * become references, listed in *parts (*np of them; the array is the thread's, valid until the
 * next call); -ENOMEM or SPW_E_TOO_BIG (nothing listed). */
int le_outline(const uint8_t *lp, uint64_t lo, lp_buf *out, le_part **parts, size_t *np);
/* An element part a group cannot carry (a record over a page): written alone, before the group
 * (note 5). 1 when it was, 0 when the group takes it, HLOG_PENDING (2: NOT written, the key's
 * newest version is on the device: the caller must park and run again) or an error. */
int le_alone(client *c, uint64_t cid, uint64_t pos, const void *val, size_t len);
/* Group part p (its key in key, DQ_NODE_KEY_BYTES) for the element at pos: val NULL: a tombstone. */
void le_part_set(hlog_group_part *p, uint8_t *key, uint64_t cid, uint64_t pos, const uint8_t *val,
                 size_t len);
/* Tombstones for the references in lp into parts and keys (room for le_refs of them): the count. */
size_t le_drops(const uint8_t *lp, uint64_t cid, hlog_group_part *parts, uint8_t (*keys)[17]);
/* coll_list_fast.c: a push or pop within its end node as one hlog_rmw of the head; HLOG_OK with
 * *slow set when the general path must run (nothing written). */
int coll_list_fast_rmw(client *c, const hlog_key *k, coll_list_op *o, bool *slow);
void coll_list_fast_trim(size_t keep);
/* Free the thread's buffers (bufs: at exit) or those past keep bytes. */
void le_bufs_trim(size_t keep);

#endif
