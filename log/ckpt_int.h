/*
 * ckpt_int.h - what checkpoints (ckpt.c) and recovery (recover.c) share, private to log/: the
 * metadata file's layout, the file names, and the helpers that read and check them.
 *
 * Files of checkpoint n in the checkpoint folder (the server's --dir):
 *   checkpoint.<n>.index   the hash index image (index/hidx.h, "Index images": its own header,
 *                          zstd frame and checksums)
 *   checkpoint.<n>.meta    ckpt_meta below, little-endian as in memory, its last field the XXH3-64
 *                          of every byte before it
 * Each is written as <name>.tmp, fdatasync'ed, renamed, and the folder fsync'ed; the meta file goes
 * last, so a meta file that checks out names a complete checkpoint.
 */
#ifndef SPW_LOG_CKPT_INT_H
#define SPW_LOG_CKPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/hlog_int.h"

#define CKPT_MAGIC "SPWCKPT1"
#define CKPT_VERSION 1u
#define CKPT_KEEP 2                 /* checkpoints kept: the newest and the one before */
#define CKPT_NAME_MAX 64

typedef struct ckpt_meta {
	char magic[8];                  /* CKPT_MAGIC */
	uint32_t version;               /* CKPT_VERSION */
	uint32_t flags;                 /* 0 */
	uint64_t id;
	uint64_t begin, cut, scan_from; /* the log [begin, cut); repair the index from scan_from */
	uint64_t keys, expires, next_seq;
	uint64_t page_bytes, segment_bytes, buckets;   /* the geometry it needs again */
	uint64_t index_bytes, index_sum;               /* the index file's size and XXH3-64 */
	uint64_t cut_page_sum;          /* XXH3-64 of [ckpt_sum_from, cut): the partial last page */
	uint64_t cut_page_cont;         /* span_cont end of cut's page, when it continues a record */
	int64_t unix_ms;
	uint64_t duration_us, log_bytes;
	uint64_t reserved[8];
	uint64_t sum;                   /* XXH3-64 of everything above */
} ckpt_meta;

_Static_assert(sizeof(ckpt_meta) % 8 == 0, "no padding in the meta file");

/* snprintf for the why messages (paths in them may be long: a cut message is fine). */
void ckpt_why(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Where cut_page_sum starts: the cut's page, or Begin (sector-aligned) when it lies in that page;
 * the bytes below Begin are nobody's and need not be on the device. */
static inline uint64_t ckpt_sum_from(const ckpt_meta *m, uint32_t sector)
{
	uint64_t pstart = m->cut & ~(m->page_bytes - 1), b = m->begin & ~(uint64_t)(sector - 1);
	return b > pstart ? b : pstart;
}

void ckpt_name(char *buf, size_t len, uint64_t id, const char *ext);
/* The ids of the complete-looking checkpoints in dir (a .meta file), newest first; up to max.
 * Returns how many, or -errno. */
int ckpt_list(const char *dir, uint64_t *ids, int max);
/* Read and check checkpoint id's meta file: 0, or -errno / SPW_E_CORRUPT with why. */
int ckpt_meta_read(const char *dir, uint64_t id, ckpt_meta *m, char *why, size_t whylen);
/* XXH3-64 and size of a whole file. 0 or -errno. */
int ckpt_file_sum(const char *path, uint64_t *sum, uint64_t *bytes);
/* Whether every segment the log [begin, cut) needs is on the device and long enough: 0, or
 * -ENOENT with why naming the first missing or short segment file. */
int ckpt_segments_check(struct dev *d, uint64_t begin, uint64_t cut, char *why, size_t whylen);
/* Read or write len bytes at the device offset off (all sector-aligned), a few requests in flight,
 * waiting for them on the calling thread (dev_wait). 0 or -errno (-EIO: short). */
int ckpt_dev_io(struct dev_queue *q, bool write, uint64_t off, void *buf, uint64_t len);
/* Wait one epoch: every thread protected now has refreshed (s holds nothing). */
void ckpt_epoch_barrier(hlog_session *s);
/* fsync a folder. 0 or -errno. */
int ckpt_dir_sync(const char *dir);

#endif
