/*
 * aof.h - the append-only file: each worker's redo records, written once per event-loop pass
 * (group commit), synced by --aof-fsync's rule, replayed after a checkpoint at start.
 *
 * Layout: <dir>/appendonlydir/spillway.<gen>.<worker>.aof, one file per worker and generation. A
 * worker's records are in increasing seq order (the store's redo seq, log/hlog.h), so replay merges
 * the files by seq. A file starts with a header and holds records; every part carries an XXH3-64.
 *
 *   header  "SPWAOF01" | u32 version (1) | u32 worker | u64 gen | i64 created unix ms | u64 xxh3 of
 *           the 32 bytes before it                                                  = 40 bytes
 *   record  u32 len (bytes of payload) | u8 kind (HLOG_REDO_*) | u8 rtype (a SET's record type,
 *           HLOG_T_*; a DEL's: HLOG_T_PART for a part's tombstone, else 0; 0 for FLUSHALL, and in
 *           files written before collections) | u8 flags (AOF_F_GROUP_MORE: more records of this
 *           group follow; 0 in files written before groups) | u8 0 | u64 xxh3 of the first 8
 *           bytes and the payload | payload: u64 seq | u64 addr | i64 expire_ms | u32 klen |
 *           u32 vlen | key | value
 *
 * A group (hlog_group_rmw: a collection's head and its parts, made visible together) is a run of
 * consecutive records of one file, all but the last with AOF_F_GROUP_MORE. Replay applies a group
 * only once its last record is read: a file that ends inside a group (a crash between the group's
 * write and its end, or a torn record in it) has its torn tail start at the group's first record,
 * so the cut group is dropped whole. A record of type HLOG_T_PART (SET or DEL) is a part: its key is
 * an internal key (hlog_key_init_internal), which no user key can read.
 *
 * Integers are little-endian. The record's checksum is XXH3_64bits_withSeed(payload, len, seed)
 * with seed = the record's first 8 bytes as a little-endian u64 (one pass over the payload; a change
 * in len, kind or the zero bytes changes the seed and so the hash).
 *
 * A record that runs past the end of the file, or fails its checksum and ends exactly at the end,
 * or a tail of zero bytes, is a torn tail: replay cuts it (and says how many bytes it dropped);
 * aof_check with fix truncates the file there. A bad record with more bytes after it is corruption
 * in the middle: replay refuses, naming the file and the offset.
 *
 * Threads: an aof_writer belongs to its worker; aof_redo and aof_writer_flush run on that thread.
 * With --aof-fsync everysec a background thread of aof.c fdatasyncs every writer's file once a
 * second. The registry of closed files (for aof_prune) is shared under a mutex.
 */
#ifndef SPW_AOF_H
#define SPW_AOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log/hlog.h"

#define AOF_DIR_NAME "appendonlydir"

enum { AOF_FSYNC_NO = 0, AOF_FSYNC_EVERYSEC = 1, AOF_FSYNC_ALWAYS = 2 };

typedef struct aof_writer aof_writer;

/* Create <dir>/appendonlydir if missing (and sync dir). 0 or -errno. */
int aof_dir_prepare(const char *dir);
/* Start the everysec sync thread (idempotent) / stop it. */
int aof_sync_thread_start(void);
void aof_sync_thread_stop(void);

/* A writer for worker `worker`, generation gen: creates and syncs the file (and the directory;
 * appendonlydir is made when missing). -EEXIST when that file exists already. */
int aof_writer_open(aof_writer **out, const char *dir, int worker, uint64_t gen, int fsync_mode);
/* Flush, sync, close; the file goes to the registry of closed files with its largest addr (a file
 * that got no record is removed instead). */
void aof_writer_close(aof_writer *w);
/* The hlog_redo_fn: append one record to the writer's buffer (arg is the aof_writer). */
void aof_redo(void *arg, const hlog_redo *r);
/* Whether records wait in the buffer. */
bool aof_writer_dirty(const aof_writer *w);
/* The bytes its buffer holds allocated (INFO mem_aof_buffer, the memory cap). */
size_t aof_writer_buffer_bytes(const aof_writer *w);
/* Write the buffer with one write(2), then fdatasync when the mode is always. 0 or -errno (the
 * records stay in the buffer; aof_writer_error says the last error for INFO). */
int aof_writer_flush(aof_writer *w);
/* Close the current file (as aof_writer_close) and open generation gen. 0 or -errno. */
int aof_writer_rotate(aof_writer *w, uint64_t gen);
int aof_writer_error(const aof_writer *w);      /* 0 or the last write/sync error */
void aof_writer_set_fsync(aof_writer *w, int fsync_mode);
uint64_t aof_writer_bytes(const aof_writer *w); /* bytes written to the current file */

/* Delete every closed file (registry) whose records all have addr < cut: a durable checkpoint with
 * that cut covers them. Returns the number of files removed. */
int aof_prune(const char *dir, uint64_t cut);
/* Delete (or, with keep_aside, rename to *.replayed, removing the *.replayed of an earlier start
 * first) every AOF file in dir: after recovery replayed them into a checkpoint. Returns the number
 * of files, or -errno. */
int aof_remove_all(const char *dir, bool keep_aside);
/* The largest generation present in dir (0 when none). */
uint64_t aof_max_gen(const char *dir);

/* One record as replay hands it over (pointers valid during the callback). */
typedef struct aof_rec {
	uint64_t seq, addr;
	int kind;                 /* HLOG_REDO_* */
	const uint8_t *key;
	uint32_t klen;
	const uint8_t *val;
	uint32_t vlen;
	int64_t expire_ms;
	uint8_t rtype;            /* the value's record type (HLOG_T_*); a DEL's: HLOG_T_PART or 0 */
	bool group_more;          /* more records of its group follow (aof.h's layout) */
} aof_rec;
/* The store's key of a record (not FLUSHALL): internal for a part (rtype HLOG_T_PART). */
static inline void aof_rec_key(hlog_key *k, const aof_rec *r)
{
	if (r->rtype == HLOG_T_PART)
		hlog_key_init_internal(k, r->key, r->klen);
	else
		hlog_key_init(k, r->key, r->klen);
}
/* Apply one record to the store on session s: hlog_upsert_typed, hlog_delete or hlog_flush_all
 * (a part under its internal key). Their result: 0 / HLOG_NOTFOUND / HLOG_PENDING (run it again
 * once the session's op is ready) / an error. */
int aof_rec_apply(hlog_session *s, const aof_rec *r);
typedef struct aof_replay_stats {
	uint64_t files, records, applied, skipped;   /* skipped: addr < cut (in the checkpoint) */
	uint64_t groups;          /* groups read whole (applied, or skipped below the cut) */
	uint64_t groups_cut;      /* groups a torn tail cut: dropped whole, none of their records applied */
	uint64_t torn_bytes;      /* dropped from torn tails */
	uint64_t max_seq;
	uint64_t bytes_total, bytes_done;   /* for progress */
} aof_replay_stats;
/* Replay every AOF file in dir in seq order, skipping records with addr < cut; apply returns 0 or
 * -errno (which stops replay). A group's records are applied one after another once the whole
 * group is read, in the merge's place of its first record (aof_read.c note 1). 0, or -errno / SPW_E_CORRUPT with why naming the file and offset.
 * stats (may be NULL) may be read (bytes_done) from another thread while it runs. Files of zero
 * length or with a torn header only count as torn tails. */
int aof_replay(const char *dir, uint64_t cut, int (*apply)(void *ctx, const aof_rec *r), void *ctx,
               aof_replay_stats *stats, char *why, size_t whylen);
/* Offline check of every AOF file in dir (spillway-check); with fix, truncate torn tails. Prints to
 * out; returns the number of problems left (a fixed torn tail is not one). */
int aof_check(const char *dir, bool fix, FILE *out);

#endif
