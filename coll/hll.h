/*
 * hll.h - Redis 7.0's HyperLogLog, byte for byte: the string a PFADD leaves in Redis is the string
 * these functions leave, and the cardinality they estimate is the one PFCOUNT answers. Pure code: no
 * I/O, no allocation, no store; the caller owns every buffer (coll/hll.c has the design notes).
 *
 * Layout (all integers little-endian):
 *   bytes 0..3   "HYLL"
 *   byte  4      encoding: HLL_DENSE (0) or HLL_SPARSE (1)
 *   bytes 5..7   unused, zero
 *   bytes 8..15  the cached cardinality; bit 7 of byte 15 set = invalid (to be recomputed)
 *   bytes 16..   dense: 16384 registers of 6 bits, register i at bit 6i, LSB first (12288 bytes);
 *                sparse: run-length opcodes covering the 16384 registers in order:
 *                  ZERO   00xxxxxx           xxxxxx+1 registers (1..64) at 0
 *                  XZERO  01xxxxxx yyyyyyyy  (x<<8|y)+1 registers (1..16384) at 0
 *                  VAL    1vvvvvxx           xx+1 registers (1..4) at vvvvv+1 (1..32)
 * An empty HLL is sparse: the header and one XZERO of 16384 (18 bytes).
 */
#ifndef SPW_COLL_HLL_H
#define SPW_COLL_HLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HLL_P 14                                   /* register index bits */
#define HLL_Q (64 - HLL_P)                         /* bits left for the 000..1 pattern */
#define HLL_REGISTERS (1 << HLL_P)                 /* 16384 */
#define HLL_BITS 6
#define HLL_HDR_SIZE 16
#define HLL_DENSE_SIZE (HLL_HDR_SIZE + (HLL_REGISTERS * HLL_BITS + 7) / 8)   /* 12304 */
#define HLL_EMPTY_SIZE (HLL_HDR_SIZE + 2)          /* header + XZERO:16384 */
#define HLL_DENSE 0
#define HLL_SPARSE 1
#define HLL_SPARSE_VAL_MAX 32                      /* a larger register forces the dense encoding */
#define HLL_SPARSE_MAX_DEFAULT 3000                /* Redis's hll-sparse-max-bytes */
/* The most a sparse HLL can grow by through register sets: every split adds at most 3 bytes and
 * the opcodes can never outnumber the registers they cover (each covers at least one). */
#define HLL_SPARSE_GROWTH_MAX (2 * HLL_REGISTERS + HLL_HDR_SIZE)

/* Redis's MurmurHash64A (MurmurHash2, 64-bit, little-endian reads) and the seed PFADD uses. */
#define HLL_HASH_SEED 0xadc83b19ULL
uint64_t hll_murmur64a(const void *key, size_t len, uint64_t seed);
/* The register an element goes to and the length of its hash's 000..1 pattern (1..HLL_Q+1). */
int hll_pattern(const void *ele, size_t len, long *reg /* out */);

/* Redis's isHLLObjectOrReply on a string's bytes: the magic, a known encoding, and the exact size
 * for a dense one. A sparse one may still be corrupt (the operations below say -1 then). */
bool hll_valid(const uint8_t *p, size_t len);
static inline int hll_encoding(const uint8_t *p) { return p[4]; }
/* Write the empty HLL (HLL_EMPTY_SIZE bytes, cached cardinality 0 and valid). Returns its size. */
size_t hll_empty(uint8_t *dst);

/* The cached cardinality: true with *card when valid. put stores card and makes it valid. */
bool hll_cache_get(const uint8_t *p, uint64_t *card /* out */);
void hll_cache_put(uint8_t *p, uint64_t card);
static inline void hll_cache_invalidate(uint8_t *p) { p[15] |= 0x80; }

/* A dense register (regs = the bytes after the header); set raises it to count when count is
 * larger: 1 when it did, 0 when not. */
unsigned hll_dense_get(const uint8_t *regs, long i);
int hll_dense_set(uint8_t *regs, long i, uint8_t count);

/*
 * An HLL being changed in a caller's buffer. p/len is the HLL (sparse or dense), cap the room at p
 * (a sparse one grows in place). A sparse one that needs a register above 32, or would pass
 * sparse_max bytes (hll-sparse-max-bytes) or cap, is promoted: written dense into dense
 * (HLL_DENSE_SIZE bytes of the caller's), and p then points there. Size cap for a sparse one of
 * len bytes: len + min(sparse_max - len, HLL_SPARSE_GROWTH_MAX) (never promotes early).
 */
typedef struct hll_edit {
	uint8_t *p;
	size_t len, cap;
	uint8_t *dense;
	size_t sparse_max;
	bool promoted;              /* out: the last operations promoted it */
} hll_edit;

/* Redis's hllAdd: 1 when a register grew, 0 when none did, -1 when the sparse encoding is corrupt
 * (changes made before the corruption was met stay, as in Redis). */
int hll_edit_add(hll_edit *e, const void *ele, size_t len);
/* Redis's hllDenseSet / hllSparseSet by the encoding: raise register i to count. 1, 0 or -1. */
int hll_edit_set(hll_edit *e, long i, uint8_t count);
/* Redis's hllSparseToDense: 0 (also for one already dense), -1 when the sparse one is corrupt. */
int hll_edit_to_dense(hll_edit *e);

/* Redis's hllMerge: max[i] = MAX(max[i], register i) over a valid (hll_valid) HLL. 0, or -1 when
 * the sparse encoding is corrupt. */
int hll_merge(uint8_t max[HLL_REGISTERS], const uint8_t *p, size_t len);
/* Redis's hllCount on a valid HLL (the cache is not consulted): 0 with *card, -1 when the sparse
 * encoding is corrupt. */
int hll_count(const uint8_t *p, size_t len, uint64_t *card /* out */);
/* The same over one byte per register (PFCOUNT of several keys, after hll_merge). */
uint64_t hll_count_raw(const uint8_t max[HLL_REGISTERS]);

#endif
