/*
 * deque.h - the large layout of a list (docs/ARCHITECTURE.md "Large collections"): a deque by
 * position. Element p in [lo, hi) lies in node p / c (c elements per node, fixed when the list
 * became large); each node is a listpack of the small layout's entries (copied as they are). The
 * two end nodes, lo / c and (hi - 1) / c, live inside the head record; every node strictly between
 * them is a part under the internal key cid | 'n' | node (big-endian), always full (c entries).
 * Pure algorithms on bytes, no store (server/coll_list_large.c drives them).
 *
 * The head's value (little-endian), after coll/coll.h's 48-byte large prefix (type COLL_LIST |
 * COLL_LARGE, count = hi - lo, mbytes = bytes of the live node parts' values, level = split = 0):
 *   +48 u64 lo        the first element's position (starts at a node boundary near 2^62)
 *   +56 u64 hi        one past the last element's position
 *   +64 u32 c         elements per node, 1..DQ_C_MAX
 *   +68 u32 llen      bytes of the left end node's listpack (node lo / c), at +80
 *   +72 u32 rlen      bytes of the right end node's listpack (node (hi - 1) / c), after it; 0 when
 *                     both ends are one node (the left one holds the whole list then)
 *   +76 u32 0         reserved
 *   +80 left listpack, right listpack
 * The header's used is DQ_HEAD_BYTES - 8 + llen + rlen; bytes after it are capacity.
 *
 * Ownership: dq_parse's pointers point into the bytes it was given; functions that write take
 * caller-owned buffers.
 */
#ifndef SPW_COLL_DEQUE_H
#define SPW_COLL_DEQUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/listpack.h"

#define DQ_HEAD_BYTES 80u
#define DQ_C_MAX 128u
#define DQ_NODE_KEY_BYTES 17u
/* Where a list converted starts: the node boundary at or below 2^62, so that pushes on either
 * side have 2^62 positions before they could wrap. */
#define DQ_POS_START (1ull << 62)

typedef struct dq_head {
	uint64_t lo, hi;
	uint32_t c;
	const uint8_t *left, *right;  /* the end nodes' listpacks (right NULL: one node) */
	uint32_t llen, rlen;
} dq_head;

static inline uint64_t dq_node(uint64_t pos, uint32_t c) { return pos / c; }
static inline uint64_t dq_first_node(const dq_head *d) { return d->lo / d->c; }
static inline uint64_t dq_last_node(const dq_head *d) { return (d->hi - 1) / d->c; }

/* Parse a large list head (the whole value, len bytes): false when it is not a consistent one
 * (lengths, listpack sizes, each end node's count against lo, hi and c). */
bool dq_parse(const uint8_t *v, size_t len, dq_head *out /* out */);
/* The used length (after the 8-byte header) of a head with end nodes of llen and rlen bytes. */
static inline size_t dq_head_used(size_t llen, size_t rlen) { return DQ_HEAD_BYTES - COLL_HDR + llen + rlen; }
/* Write a head into dst (COLL_HDR + dq_head_used bytes): h's prefix (count set from hi - lo),
 * then lo, hi, c and the end nodes (r NULL or rlen 0: one node). Returns the bytes written. */
size_t dq_write(uint8_t *dst, coll_head *h, uint64_t lo, uint64_t hi, uint32_t c, const uint8_t *l,
                size_t llen, const uint8_t *r, size_t rlen);
/* The internal key of node n of collection cid (DQ_NODE_KEY_BYTES). */
void dq_node_key(uint8_t *out, uint64_t cid, uint64_t n);
/* Out-of-line elements (server/coll_list_large.c note 10): an element past the threshold is the
 * part cid | 'e' | position (big-endian; its value: the element's bytes) and its entry in a node
 * is a reference: a 16-byte string written with the 32-bit string encoding (0xF0), which
 * lp_entry_encode never gives a string that short, holding the position and the element's length
 * (u64 each, little-endian). DQ_REF_ENTRY_BYTES: the reference entry's bytes, backlen included. */
#define DQ_REF_ENTRY_BYTES 22u
#define DQ_REF_MARK 0xF0u
static inline bool dq_is_ref(const uint8_t *e)
{
	return e[0] == DQ_REF_MARK && e[1] == 16 && e[2] == 0 && e[3] == 0 && e[4] == 0;
}
/* The reference entry of the element at pos of len bytes into dst (DQ_REF_ENTRY_BYTES). */
size_t dq_ref_encode(uint8_t *dst, uint64_t pos, uint64_t len);
/* A reference entry's position and length. */
void dq_ref_parse(const uint8_t *e, uint64_t *pos /* out */, uint64_t *len /* out */);
/* The internal key of the element at pos of collection cid (DQ_NODE_KEY_BYTES). */
void dq_elem_key(uint8_t *out, uint64_t cid, uint64_t pos);
/* Compaction's rule for element parts: live iff its position lies in [lo, hi) (pops and LSET
 * tombstone the ones they drop; LTRIM's lie outside). */
bool dq_elem_live(const uint8_t *v, size_t len, uint64_t pos);
/* Listpack lp with the entry at `at` replaced by ent (elen bytes) into dst (lp_bytes(lp) + elen
 * bytes, not overlapping): same count. Returns its length. */
size_t dq_replace(uint8_t *dst, const uint8_t *lp, const uint8_t *at, const uint8_t *ent, size_t elen);
/* Compaction's rule for node parts: a node part is live iff its number lies strictly between the
 * head's end nodes (an end node lives in the head; one outside was popped or trimmed). v: the
 * owner's head value (already known to be large with the part's cid). */
bool dq_part_live(const uint8_t *v, size_t len, uint64_t n);
/* Elements per node for a list of count elements in bytes of listpack: about record_max bytes a
 * node, 1..DQ_C_MAX. */
uint32_t dq_choose_c(size_t bytes, uint64_t count, size_t record_max);
/* Cut listpack w, whose first entry has position wlo, at node boundaries: the node listpacks
 * back to back in out (node dq_node(wlo) + j at out->p + offs[j], offs[j + 1] its end; offs needs
 * dq_split_nodes + 1 slots), each with its exact count. Returns the node count, or -ENOMEM. */
long dq_split(const uint8_t *w, uint64_t wlo, uint32_t c, lp_buf *out, size_t *offs /* out */);
/* The nodes a window of n entries from wlo spans (0 when n is 0). */
static inline uint64_t dq_split_nodes(uint64_t wlo, uint64_t n, uint32_t c)
{
	return n ? (wlo + n - 1) / c - wlo / c + 1 : 0;
}
/* Write into dst the listpack of the count entries from a (end: one past the last one's bytes)
 * of some listpack, with an exact count (LP_COUNT_UNKNOWN past 65534). dst needs end - a +
 * LP_EMPTY_BYTES bytes and must not overlap. Returns its length. */
size_t dq_run(uint8_t *dst, const uint8_t *a, const uint8_t *end, uint64_t count);
/* The entry after the k-th from p on (walking k entries of lp); NULL past the last. */
const uint8_t *dq_skip(const uint8_t *lp, const uint8_t *p, uint64_t k);

/* An edit of one end node inside a head's bytes, planned from the head alone (dq_end_push,
 * dq_end_pop) and applied by dq_end_apply to the old head itself (in place: only the bytes after
 * the edit move, an RPUSH writes just its entries) or to a new record: pushes and pops that stay
 * within their end node (server/coll_list_large.c note 9). */
typedef struct dq_end_edit {
	size_t off, del;          /* value offset of the change, bytes removed there */
	const uint8_t *ins;       /* entries inserted there (ins_len bytes, lp_entry_encode's) */
	size_t ins_len;
	size_t old_end, new_end;  /* COLL_HDR + used, before and after */
	size_t node_off;          /* the edited node's listpack (its header rewritten) */
	uint32_t node_len, node_count, llen, rlen;
	uint64_t lo, hi;
} dq_end_edit;
/* n entries (ins, ins_len bytes) pushed at one end of head v (parsed as d): 0 planned, 1 when
 * they do not fit in that end node (the caller takes the general path). */
int dq_end_push(const uint8_t *v, const dq_head *d, bool left, const uint8_t *ins, size_t ins_len,
                uint32_t n, dq_end_edit *e /* out */);
/* k >= 1 entries popped at one end: 0 planned (*a .. *end: the popped entries' bytes in v), 1
 * when that would empty the end node (the caller takes the general path). */
int dq_end_pop(const uint8_t *v, const dq_head *d, bool left, uint64_t k, dq_end_edit *e /* out */,
               const uint8_t **a /* out */, const uint8_t **end /* out */);
void dq_end_apply(const dq_end_edit *e, const uint8_t *old, uint8_t *dst, bool in_place);

#endif
