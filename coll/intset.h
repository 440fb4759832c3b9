/*
 * intset.h - Redis's intset, byte for byte: a sorted array of distinct ints of one width.
 *
 *   encoding u32 (2, 4 or 8: bytes per int) | length u32 | length ints, ascending, little-endian
 *
 * All fields little-endian. Adding an int wider than the encoding rewrites every int at the new
 * width first (intsetUpgradeAndAdd); nothing ever narrows it again, as in Redis.
 *
 * The bytes live in an lp_buf (listpack.h: the same growable buffer), len always the intset's
 * size. Read functions take the bytes and assume a well-formed intset (built here or accepted by
 * is_validate(..., deep = true)).
 */
#ifndef SPW_COLL_INTSET_H
#define SPW_COLL_INTSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

#define IS_HDR_SIZE 8

/* An empty intset (encoding 2, length 0: 8 bytes). 0 or -ENOMEM. */
int is_init(lp_buf *b);
/* Add v; *added (may be NULL) says whether it was new. 0 or -ENOMEM / -E2BIG. */
int is_add(lp_buf *b, int64_t v, bool *added /* out */);
/* Remove v; *removed (may be NULL) says whether it was there. 0. */
int is_remove(lp_buf *b, int64_t v, bool *removed /* out */);

bool is_find(const uint8_t *is, int64_t v);
/* The int at index idx (0 = smallest): true, or false when idx >= is_len. */
bool is_get(const uint8_t *is, uint32_t idx, int64_t *out /* out */);
uint32_t is_len(const uint8_t *is);
/* Bytes the intset takes: 8 + length * encoding. */
size_t is_bytes(const uint8_t *is);
/* Redis's intsetValidateIntegrity: len >= 8, encoding 2/4/8, 8 + length * encoding == len,
 * length > 0 (Redis never stores an empty set) and, when deep, strictly ascending. Never reads
 * outside is[0..len). */
bool is_validate(const uint8_t *is, size_t len, bool deep);

#endif
