/*
 * hash.h - a hash's listpack (Redis 7.0's small hash encoding): field, value, field, value ...
 * in insertion order. The operations Redis's t_hash.c makes on it (hashTypeSet / hashTypeDelete /
 * hashTypeGetValue on OBJ_ENCODING_LISTPACK), so that the same commands build the same bytes.
 *
 * Pointers returned point into the listpack's bytes and are valid until they change.
 */
#ifndef SPW_COLL_HASH_H
#define SPW_COLL_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

/* The entry holding field's value, or NULL when the hash has no such field. */
const uint8_t *hash_lp_value(const uint8_t *lp, const void *f, size_t flen);
/* Set field to value: an existing field's value is replaced where it stands (the pair keeps its
 * place, as Redis's lpReplace), a new pair goes at the end. 1 when the field was added, 0 when
 * updated, or -ENOMEM / -E2BIG (b unchanged). */
int hash_lp_set(lp_buf *b, const void *f, size_t flen, const void *v, size_t vlen);
/* Delete field and its value: 1 when it was there, 0 when not. */
int hash_lp_del(lp_buf *b, const void *f, size_t flen);
/* Number of fields (a walk only past 65534 entries: listpack.h's count rule). */
static inline uint32_t hash_lp_len(const uint8_t *lp) { return lp_count(lp) / 2; }

#endif
