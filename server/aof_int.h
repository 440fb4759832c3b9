/*
 * aof_int.h - what the AOF's two files share, private to server/: aof.c (writers, the sync thread,
 * the registry, pruning) and aof_read.c (readers, replay, the offline check). The layout is aof.h's.
 */
#ifndef SPW_AOF_INT_H
#define SPW_AOF_INT_H

#include <endian.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "server/aof.h"

#define AOF_MAGIC "SPWAOF01"
#define AOF_VERSION 1u
#define AOF_HDR_BYTES 40u          /* file header */
#define AOF_REC_HDR 16u            /* u32 len | u8 kind | u8 rtype | u8 flags | u8 0 | u64 xxh3 */
#define AOF_F_GROUP_MORE 0x01u     /* flags: more records of this group follow */
#define AOF_REC_FIXED 32u          /* payload before the key: seq, addr, expire, klen, vlen */
#define AOF_BUF_INIT (64u << 10)   /* a writer's buffer to start with and to shrink back to */
#define AOF_BUF_KEEP (1u << 20)    /* a buffer grown past this shrinks back after its flush */
#define AOF_READ_BUF (1u << 20)    /* replay's read size per file */
#define AOF_PATH (PATH_MAX + NAME_MAX + 2)   /* <dir>/appendonlydir/<name> */

typedef struct aof_file {
	char name[NAME_MAX + 1];
	uint64_t gen;
	int worker;
} aof_file;

static inline void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static inline uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }

/* The checksum of the record at p (header and payload contiguous, len = payload bytes). */
static inline uint64_t rec_hash(const uint8_t *p, uint32_t len)
{
	return XXH3_64bits_withSeed(p + AOF_REC_HDR, len, get64(p));
}

/* <dir>/appendonlydir into out (exists and is a folder: 0, else -errno). */
int aof_dir_path(char *out, size_t cap, const char *dir);
/* The AOF files in <dir>/appendonlydir, sorted by (gen, worker); *out is malloc'ed (NULL when
 * none). Returns the count, 0 when the folder is missing, or -errno. */
int aof_dir_list(const char *dir, bool with_replayed, aof_file **out);

#endif
