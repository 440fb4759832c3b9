/*
 * hlog.h - the store: a hybrid log of records addressed through the hash index.
 *
 * One 48-bit logical address space (first valid address 64; 0 = none). The in-memory part is a
 * circular buffer of --page sized frames within --memory:
 *
 *   BeginAddress <= HeadAddress <= SafeReadOnlyAddress <= ReadOnlyAddress <= TailAddress
 *   [ truncated ][ on device only ][ read-only in memory: RCU ][ mutable: in-place ]
 *
 * Without a device (hlog_config.dev NULL), HeadAddress only moves with BeginAddress (FLUSHALL) and a
 * full memory region makes writes fail with SPW_E_LOG_FULL; nothing stored is lost. With a device,
 * pages are written to it as they fall below ReadOnlyAddress and evicted when their frames are
 * needed; records below HeadAddress are read back through pending operations (below).
 *
 * Threads: each worker opens one hlog_session and calls hlog_session_protect() before a batch of
 * operations and hlog_session_unprotect() before it sleeps; the epoch makes sure no thread reads a
 * page frame that is being reused. All operations below need a protected session.
 *
 * Ownership: hlog_value pointers point into a log page and are valid only inside the callback that
 * receives them (the record's shared lock is held, the epoch is protected). Callbacks (read fn, plan,
 * fill, scan fn) may run with the record locked: they must not call back into the store.
 */
#ifndef SPW_HLOG_H
#define SPW_HLOG_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include "common/spw.h"
#include "index/hidx.h"

struct dev;

typedef struct hlog hlog;
typedef struct hlog_session hlog_session;
typedef struct hlog_value hlog_value;   /* below */

/* Positive "not an error" results. Errors are negative (-errno or SPW_E_*). */
enum {
	HLOG_OK = 0,
	HLOG_NOTFOUND = 1,
	HLOG_PENDING = 2,     /* on the device, or no frame yet: poll, wait for the ready callback, re-run */
};

#define HLOG_FIRST_ADDRESS 64ULL
#define HLOG_NO_EXPIRY (-1LL)

typedef struct hlog_config {
	uint64_t memory_bytes;    /* --memory: in-memory log region */
	uint64_t page_bytes;      /* --page: power of two */
	uint64_t index_bytes;     /* --index: where the index starts */
	uint64_t index_max_bytes; /* --index-max-size: the main array doubles up to this (at most
	                           * HIDX_GROW_MAX times); 0 or index_bytes = it never grows */
	int index_resize_pct;     /* --index-resize-threshold: it doubles once its overflow buckets pass
	                           * this percent of its main buckets (0 = 25) */
	void (*index_full_fn)(void *ctx);  /* called (short: a wake-up) when they do: the caller of
	                           * hlog_index_grow_step need not wait for its next look */
	void *index_full_ctx;
	int mutable_percent;      /* --mutable-percent, 0..100 */
	int max_sessions;         /* threads that may open sessions */
	/* Storage tier (NULL dev = memory only, as before). The log does not own the device. */
	struct dev *dev;          /* device/device.h; pages below ReadOnlyAddress are flushed to it */
	uint32_t initial_io_bytes;/* --initial-io-record-size: first read of a pending record (default 128) */
	bool no_read_merge;       /* true: every record read is its own device request, as issued (no
	                           * merging of neighbouring reads, no sharing of identical ones); for
	                           * tests and measurements */
	/* Whether a part (a record of type HLOG_T_PART that is its key's newest version) is still
	 * reachable: 1 live (copied as any live record), 0 dead (dropped, counted as garbage),
	 * HLOG_PENDING (a read the check made went to the device: the relocation parks and runs again
	 * once it is in), or < 0 (an error: treated as live). Called from compaction's relocation with
	 * compaction's own session s; NULL: every part is live. (compact.c note 8: s is protected, its
	 * op_ctx is the relocation's, so the check's reads are served from its fetch cache when it runs
	 * again; key and v are compaction's copies, valid for the call, v->addr the part's address.
	 * The check may read (hlog_read, hlog_prefetch) but not write, poll, set the op_ctx, release
	 * or unprotect s.) */
	int (*part_live)(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v);
	void *part_live_arg;
	bool group_span_only;     /* true: a group never changes its records in place, it always
	                           * writes a span (group.c note 9); for tests and measurements */
} hlog_config;

/*
 * A key. A user key (hlog_key_init: what clients name) matches only records of type HLOG_T_STRING
 * and HLOG_T_HEAD; an internal key (hlog_key_init_internal: a part of a large collection, named by
 * the collection layer) only records of type HLOG_T_PART. Equal bytes in the two namespaces are
 * two keys: chain walks skip the other namespace's records (same hash, same chains: the record
 * type tells them apart, so neither the index nor the record format changes). Internal records
 * never carry an expiry, never count as keys (DBSIZE, keys=, expires=) and are never reported by
 * hlog_scan / hlog_scan_base / the expiry cycle.
 */
typedef struct hlog_key {
	const void *ptr;
	size_t len;
	uint64_t hash;
	bool internal;
} hlog_key;

static inline void hlog_key_init(hlog_key *k, const void *p, size_t len)
{
	k->ptr = p;
	k->len = len;
	k->hash = hidx_hash(p, len);
	k->internal = false;
}

static inline void hlog_key_init_internal(hlog_key *k, const void *p, size_t len)
{
	k->ptr = p;
	k->len = len;
	k->hash = hidx_hash(p, len);
	k->internal = true;
}

/* What a record holds (record.h's REC_TYPE bits, docs/ARCHITECTURE.md "Collections"): a string
 * (every record before collections existed), a collection's head (the record under its user key;
 * its value says which type, coll/coll.h), or a part of a large collection under an internal key.
 * The store only keeps and reports it; a value's type changes only by writing it. */
enum { HLOG_T_STRING = 0, HLOG_T_HEAD = 1, HLOG_T_PART = 2 };

typedef struct hlog_value {
	const uint8_t *ptr;
	size_t len;
	int64_t expire_ms;        /* absolute unix ms, or HLOG_NO_EXPIRY */
	uint8_t rtype;            /* HLOG_T_* */
	uint64_t addr;            /* the logical address of the record the value came from (for a
	                           * record read back from the device: its address there) */
} hlog_value;

int hlog_open(hlog **out, const hlog_config *cfg);
void hlog_close(hlog *l);

int hlog_session_open(hlog *l, hlog_session **out);
void hlog_session_close(hlog_session *s);
void hlog_session_protect(hlog_session *s);
void hlog_session_unprotect(hlog_session *s);
/* Publish that this thread has moved on (lets pages be reclaimed); cheap, call between batches. */
void hlog_session_refresh(hlog_session *s);
/* now_ms used for expiry decisions by this session's next operations (one clock read per batch). */
void hlog_session_set_now(hlog_session *s, int64_t now_ms);

/*
 * Storage tier: pending operations (see the design notes in pending.c).
 *
 * With a device, a record below HeadAddress lives only on the device. An operation that needs it
 * (read, RMW, delete, upsert of a key that may exist on the device, scan) returns HLOG_PENDING after
 * queuing the device reads it needs on the session's own device queue, tagged with the op_ctx given
 * by hlog_session_set_op(). Nothing was changed in the store. When every read queued for that
 * op_ctx has completed (inside hlog_session_poll(), on the session's thread), the store calls
 * the session's ready callback with op_ctx; the caller then simply runs the same operation again:
 * this time the store serves the fetched records from the session's fetch cache (after checking the
 * index again, so a newer version written meanwhile wins), and the operation completes.
 * hlog_session_release(s, op_ctx) drops what was fetched for op_ctx (call it when the command that
 * used it is done). A multi-key command may call hlog_prefetch() for every key first and run only
 * when none is pending, so that it never mutates half its keys before a pending read.
 */
typedef void (*hlog_ready_fn)(void *cb_arg, void *op_ctx);
/* Open the session's device queue on this thread and set the ready callback. 0 or -errno. With a
 * device, a session must be attached before its first operation (else operations that need the
 * device fail with -ENOTCONN); the session must then be closed on the same thread. */
int hlog_session_attach(hlog_session *s, hlog_ready_fn ready, void *cb_arg);
/* Tag the reads queued by the following operations with op_ctx (e.g. the client). */
void hlog_session_set_op(hlog_session *s, void *op_ctx);
/* Forget what was fetched for op_ctx and any wait it registered. Reads still in flight for it
 * complete without a ready callback. */
void hlog_session_release(hlog_session *s, void *op_ctx);
/* Submit what is queued (one system call), reap completions, run ready callbacks; never blocks.
 * Returns the number of completions handled. Also claims and drives page writes (flushes), and
 * runs the epoch's due actions: on a protected session it refreshes the epoch, so call it between
 * operations (never from inside a store callback). */
int hlog_session_poll(hlog_session *s);
/* The fd the worker's event loop sleeps on for device completions (-1 without a device). It is a
 * nonblocking eventfd: when it polls readable, read its 8 bytes, then call hlog_session_poll. Other
 * threads also write it when an operation of this session waits for a frame and a page write or
 * an eviction finished elsewhere. */
int hlog_session_fd(hlog_session *s);
/* Device requests (reads and page writes) this session has handed to the device, or staged for
 * its next submission (readq.c note 1), whose completion has not been handled yet. 0 with ops
 * still parked means nothing of this session's own will make hlog_session_fd readable (reads held
 * back by the device throttle, a page write on another session): poll again after a short sleep. */
uint32_t hlog_session_inflight(hlog_session *s);
/* Whether this session holds device work that only its next hlog_session_poll moves on, and that
 * will never make hlog_session_fd readable by itself: requests queued since its last submission
 * (page writes that a page turn inside an operation claimed, reads staged by an operation that did
 * not go pending), completions the device already holds without a signal (a request finished or
 * refused at once), or completions left behind by a poll whose reaps all came back full. A caller
 * about to sleep on the fd polls first. */
bool hlog_session_unsubmitted(hlog_session *s);
/* Whether this session holds device work that a poll soon, not at once, must move on, because no
 * signal of its own will come: requests the kernel did not take at the last submission (it was
 * short of resources), or a backlog (requests the device's throttle refused) while nothing of this
 * session's is in flight, the throttle being held by other sessions' requests. A caller about to
 * sleep on the fd sleeps a short tick instead. */
bool hlog_session_tick(hlog_session *s);
/* A hint, no effect on the store: start loading k's index bucket into the CPU cache, so that a
 * batch (MGET) can hash every key and have the buckets on their way before the first lookup. */
void hlog_bucket_prefetch(hlog_session *s, const hlog_key *k);
/* Make sure key's newest record is in memory or fetched: HLOG_OK, or HLOG_PENDING (read queued), or
 * the error of a failed read. */
int hlog_prefetch(hlog_session *s, const hlog_key *k);
/*
 * What callers of the operations below must handle with a device:
 *   HLOG_PENDING       a read was queued (or is in flight) for op_ctx, or (writes) the memory
 *                      region is full until a page write finishes: no change was made. Poll; the
 *                      ready callback names op_ctx once; run the operation again (a re-run
 *                      may return HLOG_PENDING again: a record evicted meanwhile). Release
 *                      op_ctx once its command is done. A ready callback for an op_ctx that is
 *                      not parked (re-run early) is to be ignored.
 *   SPW_E_STORE_ERROR  a page write failed earlier: the store refuses writes from now on
 *                      (reads go on); hlog_info.store_error says which error.
 *   -EIO, SPW_E_CORRUPT, ... the device read for this operation failed; the store goes on (the
 *                      next attempt after hlog_session_release reads again).
 *   SPW_E_TOO_BIG      the record exceeds hlog_max_record_payload (the memory region, 1 GiB).
 */

/* Read: calls fn once with the live value (expired = absent) and returns HLOG_OK, or HLOG_NOTFOUND. */
typedef void (*hlog_read_fn)(void *ctx, const hlog_value *v);
int hlog_read(hlog_session *s, const hlog_key *k, hlog_read_fn fn, void *ctx);

/* Blind write (SET without options): the new value replaces whatever was there. HLOG_OK or error.
 * With a device, the exact key count needs to know whether the key was live: when its index entry
 * leads to the device before the key is found in memory, the old record is read first (HLOG_PENDING),
 * one device read per overwrite of a cold key; a key whose index entry does not exist costs none. */
int hlog_upsert(hlog_session *s, const hlog_key *k, const void *val, size_t len, int64_t expire_ms);
/* The same with the new value's record type (HLOG_T_*): RESTORE and replays of collections. An
 * internal key takes rtype HLOG_T_PART and no expiry, a user key any other type: else -EINVAL
 * (the same for a plan of hlog_rmw that answers WRITE against its key's namespace). */
int hlog_upsert_typed(hlog_session *s, const hlog_key *k, const void *val, size_t len, int64_t expire_ms,
                      uint8_t rtype);

/* Delete: HLOG_OK if a live key was removed, HLOG_NOTFOUND if there was none. */
int hlog_delete(hlog_session *s, const hlog_key *k);

/*
 * Read-modify-write. The store calls ops->plan with the current live value (NULL when absent or
 * expired); plan fills *out and returns 0, or a negative error that aborts the operation (returned
 * by hlog_rmw as is). For HLOG_RMW_WRITE the store then finds room for new_len bytes (in place when
 * the record is mutable and the rounded size and expiry presence are unchanged, else a new record at
 * the tail) and calls ops->fill(ctx, old, dst, in_place). With in_place, dst is old->ptr: fill must
 * only write what changes. plan may be called again if a concurrent writer won a race, so it must
 * derive everything from old and not accumulate state across calls.
 */
enum { HLOG_RMW_KEEP = 0, HLOG_RMW_WRITE = 1, HLOG_RMW_DELETE = 2 };
typedef struct hlog_rmw_plan {
	int action;
	size_t new_len;
	int64_t expire_ms;        /* for WRITE: expiry of the new value */
	uint8_t rtype;            /* for WRITE: the new value's HLOG_T_*; the store sets the old value's
	                           * (when absent: HLOG_T_STRING, HLOG_T_PART for an internal key)
	                           * before plan, so a plan that keeps the
	                           * value (EXPIRE) keeps its type, and one that changes the type says so */
} hlog_rmw_plan;
typedef struct hlog_rmw_ops {
	int (*plan)(void *ctx, const hlog_value *old, hlog_rmw_plan *out /* out */);
	void (*fill)(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place);
} hlog_rmw_ops;
int hlog_rmw(hlog_session *s, const hlog_key *k, const hlog_rmw_ops *ops, void *ctx);

/*
 * Groups (log/group.c): several records made visible together, head first, all in ONE reservation
 * at the tail (a span: records back to back, a filler where a record would cross a page end), so
 * that the group lies wholly on one side of a checkpoint's cut and any frame wait comes before
 * anything is written.
 */
/* A part of a group: an internal key's new value (or tombstone). */
typedef struct hlog_group_part {
	hlog_key key;            /* hlog_key_init_internal */
	const void *val;         /* rtype HLOG_T_PART, no expiry */
	size_t len;
	size_t cap;              /* the record's value length when more than len (group.c note 9): the
	                          * value is self-delimiting (a listpack), the bytes past len are zero,
	                          * and a later write of up to cap bytes can keep the record in place;
	                          * 0 (or <= len): exactly len */
	bool del;                /* a tombstone instead */
} hlog_group_part;
/* One hlog_rmw on the user key `head` (ops, ctx: as hlog_rmw; plan must answer WRITE or DELETE of
 * a live value, or an error that aborts with nothing written: a plan that answers KEEP, or DELETE
 * of an absent head, gets -EINVAL) plus nparts parts. When the head and every part are in the
 * mutable region and each new record has its old one's size (the caller holds the collection's
 * exclusive latch, as for every group), all are changed in place at once (group.c note 9: INFO
 * group_inplace_writes); else the head is written as a new record in the span; it is published first (its CAS, conditional like any rmw: a
 * concurrent writer makes plan run again on the new value), then each part (CAS on its index
 * entry, retried until it succeeds: parts are written only by holders of the collection's
 * exclusive latch, and by compaction's conditional copies, which lose to us). Returns HLOG_OK;
 * HLOG_PENDING (the head's old value must be read from the device, or no frame: NOTHING written,
 * park and re-run as for hlog_rmw); plan's error (nothing written); -EINVAL (a user key among the
 * parts, an internal head); SPW_E_TOO_BIG when the records need more than hlog_group_max_bytes or
 * one of them more than a page; the other errors of hlog_rmw. The redo hook is called for every
 * record in publish order with hlog_redo.group_more = true on all but the last. */
int hlog_group_rmw(hlog_session *s, const hlog_key *head, const hlog_rmw_ops *ops, void *ctx,
                   const hlog_group_part *parts, size_t nparts);
/* The most bytes (sum of hlog_record_bytes of its records) one group may take: several pages are
 * fine, at most a quarter of the memory region and at most 64 MiB. */
uint64_t hlog_group_max_bytes(hlog *l);

/*
 * Key enumeration in index order (SCAN/KEYS/RANDOMKEY). Visits the index buckets [cursor, cursor+count)
 * and calls fn for every live key there (newest version only, expired keys skipped). Returns the next
 * cursor, 0 when the whole index was covered. Keys written during a scan may or may not be seen;
 * keys present from start to end are seen at least once over a full scan, also while compaction
 * moves Begin (scan.c note 4), and exactly once unless the index doubled meanwhile (its buckets
 * below the cursor come back above the old end). hlog_scan_base numbers cursors in the buckets
 * the walk began with (base = hlog_scan_cursor_end then): exactly once across doublings too (KEYS).
 */
typedef void (*hlog_key_fn)(void *ctx, const void *key, size_t klen, const hlog_value *v);
uint64_t hlog_scan(hlog_session *s, uint64_t cursor, uint64_t count, hlog_key_fn fn, void *ctx);
uint64_t hlog_scan_base(hlog_session *s, uint64_t base, uint64_t cursor, uint64_t count, hlog_key_fn fn,
                        void *ctx);
uint64_t hlog_scan_cursor_end(hlog *l);   /* number of main buckets: cursors are < this */
/* With a device, hlog_scan reads the records of its chains that lie below HeadAddress before it
 * returns: the one place where the store waits for the device on the caller's thread (a documented
 * compromise for SCAN/KEYS/RANDOMKEY; the reads of one call go out together, one chain level at a
 * time, and the epoch is refreshed while it waits). 0, or the first device error the last
 * hlog_scan call met (the chains it could not read were skipped). */
int hlog_scan_error(hlog_session *s);

/*
 * Active expiry (log/expire.c). One step of an expiry cycle: walks the index buckets
 * [cursor, cursor + max_buckets) and, on each chain's in-memory part (the device part is
 * compaction's), samples every key whose newest version has an expiry and removes those expired as
 * of the session's now_ms, through the same path as a read that meets them (counted in
 * expired_keys). Safe while other sessions read and write the same keys: a key set again meanwhile
 * stays. The session is protected around the call (unprotect it between steps); with a device it
 * is attached, and polled between steps (its removals may claim page writes). Adds to *st (the
 * caller zeroes it) and returns the next cursor, 0 once the index was covered. Cursors are
 * hlog_scan's (< hlog_scan_cursor_end).
 */
typedef struct hlog_expire_stats {
	uint64_t buckets;         /* index buckets walked */
	uint64_t chains;          /* entries whose chain was walked */
	uint64_t records;         /* records visited in memory */
	uint64_t sampled;         /* newest versions with an expiry (not tombstones) */
	uint64_t expired;         /* keys this step removed */
	uint64_t cold_chains;     /* chains whose rest lies below HeadAddress (left to compaction) */
	int err;                  /* 0, or -ENOMEM: an expired key could not be queued (left for later) */
} hlog_expire_stats;
uint64_t hlog_expire_step(hlog_session *s, uint64_t cursor, uint64_t max_buckets, hlog_expire_stats *st);

/* Exact number of live keys (expired ones not yet removed count, as in Redis). O(sessions). */
uint64_t hlog_key_count(hlog *l);
/* Number of keys with an expiry (the "expires=" of INFO keyspace). */
uint64_t hlog_expires_count(hlog *l);

/* Remove every key: BeginAddress moves to the tail and the index forgets older entries. */
int hlog_flush_all(hlog_session *s);

/*
 * The store's counters, declared once. X(field, kind, info, doc):
 *   field  the name in each session (written only by its thread) and in hlog_info (the sum);
 *   kind   HLOG_CTR_SUM (added over the sessions) or HLOG_CTR_MAX (the largest session's);
 *   info   the INFO field it is printed as ("tier_..." in # Stats, server/info.c), or NULL when
 *          INFO shows it another way or not at all;
 *   doc    what it counts.
 * A new counter is one line here plus its ctr_add in log/: the session field, the sum in
 * hlog_info_get, hlog_counter_defs and the INFO line all come from this table.
 */
enum { HLOG_CTR_SUM, HLOG_CTR_MAX };
#define HLOG_COUNTERS(X) \
	X(inplace_updates,   HLOG_CTR_SUM, NULL, "updates done in place in the mutable region") \
	X(rcu_updates,       HLOG_CTR_SUM, NULL, "updates that copied a record to the tail") \
	X(appends,           HLOG_CTR_SUM, NULL, "records appended for a new key or a tombstone") \
	X(log_full_errors,   HLOG_CTR_SUM, NULL, "writes refused: the memory region was full") \
	X(retries,           HLOG_CTR_SUM, NULL, "operations restarted after an epoch action") \
	X(group_inplace,     HLOG_CTR_SUM, "group_inplace_writes", "groups whose records were all changed in place (group.c note 9)") \
	X(group_entry_waits, HLOG_CTR_SUM, "group_entry_waits", "writes that met an index entry a group holds for its parts and started again (group.c note 8)") \
	X(expired_keys,      HLOG_CTR_SUM, NULL, "expired keys removed lazily (INFO expired_keys)") \
	X(pending_reads,     HLOG_CTR_SUM, "tier_pending_reads", "operations that went pending on a device read (fetches started)") \
	X(pending_found,     HLOG_CTR_SUM, "tier_pending_found", "fetches that found a live record") \
	X(pending_notfound,  HLOG_CTR_SUM, "tier_pending_notfound", "fetches that found no record, or a tombstone") \
	X(pending_errors,    HLOG_CTR_SUM, "tier_pending_errors", "fetches that failed (the operation got the error)") \
	X(pending_hits,      HLOG_CTR_SUM, "tier_pending_hits", "re-runs served from the fetch cache") \
	X(device_reads,      HLOG_CTR_SUM, "tier_device_reads", "read requests (all kinds) that went to the device; a merged read counts once") \
	X(device_read_bytes, HLOG_CTR_SUM, "tier_device_read_bytes", "bytes those reads asked for") \
	X(second_reads,      HLOG_CTR_SUM, "tier_second_reads", "re-reads of a record longer than the first read") \
	X(chain_reads,       HLOG_CTR_SUM, "tier_chain_walk_reads", "reads of an older record of a shared chain (tag collisions)") \
	X(scan_reads,        HLOG_CTR_SUM, "tier_scan_reads", "records read by hlog_scan (blocking)") \
	X(flush_writes,      HLOG_CTR_SUM, "tier_flush_writes", "page write requests") \
	X(flush_bytes,       HLOG_CTR_SUM, "tier_flush_bytes", "bytes of those writes") \
	X(flush_waits,       HLOG_CTR_SUM, "tier_flush_waits", "writes that found no free frame until a page write finished") \
	X(device_submits,    HLOG_CTR_SUM, "tier_device_submits", "dev_submit calls that handed >= 1 IO to the device") \
	X(ios_submitted,     HLOG_CTR_SUM, "tier_ios_submitted", "IOs (reads and page writes, segment pieces) those calls handed over") \
	X(merged_reads,      HLOG_CTR_SUM, "tier_merged_reads", "record reads folded into a neighbour's device read (one request of at most 64 KiB)") \
	X(vectored_reads,    HLOG_CTR_SUM, "tier_vectored_reads", "merged device reads that went out vectored, straight into each record's buffer") \
	X(dedup_hits,        HLOG_CTR_SUM, "tier_dedup_hits", "record reads served by an identical read already queued or in flight") \
	X(backlog_waits,     HLOG_CTR_SUM, "tier_backlog_waits", "requests the device refused for now (throttle, queue depth) that waited in a backlog") \
	X(queue_depth_sum,   HLOG_CTR_SUM, NULL, "requests in flight on the submitting queue after each submission (INFO tier_queue_depth_mean)") \
	X(queue_depth_max,   HLOG_CTR_MAX, "tier_queue_depth_max", "the largest of those") \
	X(io_buffer_bytes,   HLOG_CTR_SUM, NULL, "read buffers the sessions hold, pooled or in use (a gauge; INFO # Memory)") \
	X(compact_read_bytes, HLOG_CTR_SUM, "compaction_read_bytes", "bytes of log compaction read from the device") \
	X(compact_copied,    HLOG_CTR_SUM, "compaction_copied_records", "live records compaction copied to the tail") \
	X(compact_copied_bytes, HLOG_CTR_SUM, "compaction_copied_bytes", "bytes of those copies") \
	X(evicted_keys,      HLOG_CTR_SUM, NULL, "live keys dropped with their segment (cache mode; INFO evicted_keys)") \
	X(compact_expired_drop_units, HLOG_CTR_SUM, NULL, "units (segments) compaction dropped unread, every record in them expired (INFO # Store)") \
	X(compact_expired_drop_bytes, HLOG_CTR_SUM, NULL, "log bytes of those units (INFO # Store compaction_expired_drop_bytes)") \
	X(compact_parts_dropped, HLOG_CTR_SUM, NULL, "parts compaction dropped, hlog_config.part_live having said dead (INFO # Stats compact_parts_dropped)")

/* One row of HLOG_COUNTERS for whoever lists them (INFO, later metrics): off is the field's offset
 * in hlog_info; hlog_counter_count rows, in table order. */
typedef struct hlog_counter_def {
	const char *field, *info, *doc;
	int kind;
	size_t off;
} hlog_counter_def;
extern const hlog_counter_def hlog_counter_defs[];
extern const unsigned hlog_counter_count;

/* Scatter-gather reads (log/readq.c): reads a poll queues are merged and shared before they go out,
 * so device_reads + merged_reads + dedup_hits = record reads asked for; reads per submission =
 * device_reads / device_submits; mean queue depth = queue_depth_sum / device_submits. */
#define HLOG_CTR_FIELD(field, kind, info, doc) uint64_t field;
typedef struct hlog_info {
	uint64_t begin, head, safe_read_only, read_only, flushed_until, tail;
	uint64_t page_bytes, max_pages, allocated_pages, memory_bytes;
	hidx_stats index;
	uint64_t index_max_bytes; /* hlog_config.index_max_bytes: what growth may reach (fixed at open) */
	uint64_t keys, expires;
	int store_error;          /* 0, or the error of the failed page write (sticky: writes refused) */
	HLOG_COUNTERS(HLOG_CTR_FIELD)   /* all 0 without a device but the first six */
} hlog_info;
void hlog_info_get(hlog *l, hlog_info *out /* out */);

/* Online index growth (store.c note 2). due: the overflow buckets passed hlog_config's threshold and
 * a doubled index stays within index_max_bytes. step: doubles it when due, on the caller's thread,
 * while other sessions go on; s is the caller's session, unprotected (NULL only when no other
 * thread uses the store: recovery). 1 (it doubled), 0 (not due) or -ENOMEM. */
bool hlog_index_grow_due(hlog *l);
int hlog_index_grow_step(hlog *l, hlog_session *s);

/* Largest key + value the log can store in one record: a record may span pages, so this is bounded
 * by the memory region (less a page) and by 1 GiB, not by the page size. */
uint64_t hlog_max_record_payload(hlog *l);
/* Bytes a record of this key and value takes in the log (header, expiry, padding: record.h). */
uint64_t hlog_record_bytes(size_t klen, size_t vlen, bool has_expiry);

/* ---------------- durability (log/ckpt.c, log/recover.c) ----------------
 *
 * Redo hook. With a hook set on a session (hlog_session_set_redo), every change that session makes
 * to the store calls fn once, right after the change is published and before the operation
 * returns: the value a key now has (HLOG_REDO_SET, the whole value and its absolute expiry), its
 * deletion (HLOG_REDO_DEL, also a lazy expiry's), or a FLUSHALL. seq orders changes: two changes
 * of one key get increasing seqs in the order the store applied them, whichever sessions made them
 * (taken at the change's linearization point: under the record's lock for an in-place change, right
 * before the publishing CAS for a new record). addr is the log address the change wrote (the new
 * record, or the record changed in place); for FLUSHALL, the new BeginAddress. A change is in a
 * checkpoint whose cut is C exactly when addr < C (ckpt.c note 2): replay skips those (a FLUSHALL
 * at exactly C is replayed on a state it already holds: harmless). A write racing a FLUSHALL on
 * another session may be ordered on either side of it by seq. fn runs with
 * the record locked: it must copy what it needs and must not call into the store.
 */
enum { HLOG_REDO_SET = 1, HLOG_REDO_DEL = 2, HLOG_REDO_FLUSHALL = 3 };
typedef struct hlog_redo {
	uint64_t seq;
	uint64_t addr;
	int kind;
	const void *key;
	size_t klen;
	const void *val;          /* HLOG_REDO_SET only */
	size_t vlen;
	int64_t expire_ms;        /* HLOG_REDO_SET: absolute unix ms or HLOG_NO_EXPIRY */
	uint8_t rtype;            /* HLOG_REDO_SET: the value's HLOG_T_*; HLOG_REDO_DEL: HLOG_T_PART for
	                           * an internal key's delete, else HLOG_T_STRING */
	bool group_more;          /* more records of this group (hlog_group_rmw) follow on this session;
	                           * false for every change outside a group and for a group's last */
} hlog_redo;
typedef void (*hlog_redo_fn)(void *arg, const hlog_redo *r);
/* Set (fn non-NULL) or clear the session's redo hook. seqs are taken only while some session has
 * a hook, so a store without an AOF pays nothing. */
void hlog_session_set_redo(hlog_session *s, hlog_redo_fn fn, void *arg);
/* The next seq the store will hand out; set it after recovery to one past the largest replayed. */
uint64_t hlog_redo_seq(hlog *l);
void hlog_redo_seq_set(hlog *l, uint64_t next);

/*
 * Checkpoints (ckpt.c). A checkpoint is: the log made durable up to a cut address C (with a device
 * through the page writes plus the cut's partial page; without one, the in-memory log written to
 * logdev by the checkpoint itself), an image of the hash index (zstd), and a metadata file that
 * names both with their checksums. Files in dir: checkpoint.<n>.index and checkpoint.<n>.meta, each
 * written under a .tmp name, synced, renamed, and the directory synced; the meta file last, so its
 * presence means the checkpoint is complete. The two newest are kept. Writers keep going while it
 * runs (no pause of the world: ckpt.c note 1).
 *
 * s is a session of the calling thread (with a device: attached) that nothing else uses. logdev:
 * where the log's bytes go: the store's own device with a storage tier (hlog_config.dev), else a
 * device of the caller's on <dir>/Store (the memory-only log). Returns 0 and fills *out, or -errno /
 * SPW_E_* with out->why saying what failed (the previous checkpoint stays usable).
 */
typedef struct hlog_ckpt_info {
	uint64_t id;              /* checkpoint number n (increasing) */
	uint64_t begin, cut;      /* the log [begin, cut) it covers */
	uint64_t scan_from;       /* where recovery re-reads the log to repair the fuzzy index image */
	uint64_t keys, expires;
	uint64_t next_seq;        /* the store's redo seq at the cut */
	uint64_t index_bytes;     /* the index image file's size */
	uint64_t log_bytes;       /* bytes of log this checkpoint wrote itself */
	int64_t unix_ms;          /* when it completed */
	uint64_t duration_us;
	uint64_t repaired;        /* recovery: valid records in [scan_from, cut) the index was raised to */
	char why[256];            /* on failure: what failed, naming the file */
} hlog_ckpt_info;
int hlog_checkpoint(hlog *l, hlog_session *s, const char *dir, struct dev *logdev, hlog_ckpt_info *out);
/* FLUSHALL and a checkpoint exclude each other (hlog_flush_all waits for a running checkpoint). */

/*
 * Recovery (recover.c). Loads checkpoint `which` (0 = the newest complete one, 1 = the one before),
 * checks every file it needs first (meta and index checksums, the segments covering [begin, cut)),
 * then loads the index image, repairs it from the log in [scan_from, cut), and sets the markers so
 * that the store continues at cut. Call on a freshly opened store, before any operation, with s a
 * session of the calling thread (attached with a device). Returns 0 with *out filled, HLOG_NOTFOUND
 * when dir holds no checkpoint (an empty store), or an error with why saying which file is wrong
 * and how. Progress for INFO: hlog_recover_progress.
 */
int hlog_recover(hlog *l, hlog_session *s, const char *dir, struct dev *logdev, int which,
                 hlog_ckpt_info *out, char *why, size_t whylen);
void hlog_recover_progress(hlog *l, uint64_t *done, uint64_t *total);
/* Offline check of dir's checkpoints (spillway-check): every meta and index file, and with logdev
 * the segments each needs. Prints what it found to out; returns the number of problems. */
int hlog_ckpt_check(const char *dir, struct dev *logdev, FILE *out);

/* ---------------- compaction (log/compact.c) ----------------
 *
 * A pass scans the oldest part of the log [Begin, until) (from the device, or without one from the
 * frames below SafeReadOnly), copies every record that is still the newest version of its key to
 * the tail conditionally (a key written meanwhile keeps its newer value), removes expired ones
 * (counted in expired_keys), drops the parts hlog_config.part_live says are dead (compact.c note 8;
 * parts are never evicted), and moves Begin past the part. The device's segments below Begin go
 * once no checkpoint on disk needs them (hlog_reclaim, run by the pass). Only a prefix can go
 * (compact.c note 1): the choice is how far it reaches, by the garbage counted per unit (a device
 * segment, or a page without a device) as records are superseded, deleted and expire.
 * s: a session of the calling thread that nothing else uses, attached with a device, unprotected
 * (the pass protects it as it goes). Writers keep going; a pass never blocks them.
 */
enum {
	HLOG_COMPACT_COPY = 0,            /* copy every live record */
	HLOG_COMPACT_EVICT_ALL = 1,       /* cache mode: delete them instead (counted in evicted_keys);
	                                   * parts are never evicted (compact.c note 8) */
	HLOG_COMPACT_EVICT_VOLATILE = 2,  /* delete those with an expiry, copy the others */
};
typedef struct hlog_compact_opts {
	uint64_t until;           /* compact [Begin, until), clipped to what may be compacted now */
	int mode;                 /* HLOG_COMPACT_* */
	uint64_t io_limit;        /* bytes per second read plus copied (0 = no limit) */
	const _Atomic int *stop;  /* when non-NULL and set, the pass ends early (Begin moves as far as
	                           * it got) */
} hlog_compact_opts;
typedef struct hlog_compact_info {
	uint64_t begin, end;      /* Begin before and after the pass */
	uint64_t read_bytes;      /* log bytes read from the device */
	uint64_t records;         /* records met */
	uint64_t copied, copied_bytes, expired, evicted;
	uint64_t removed_bytes;   /* device space given back (whole segments) */
	uint64_t dropped_bytes;   /* of end - begin, the log dropped unread: every record expired */
	uint64_t dropped_keys;    /* of expired, the keys that went with it */
	uint64_t parts_dropped;   /* parts not copied: hlog_config.part_live said dead */
	uint64_t duration_us;
	char why[160];            /* on failure */
} hlog_compact_info;
/* 0, or the first error (a relocation that failed: log memory full, a device read): Begin then
 * stops at the first record not handled, nothing live is lost. */
int hlog_compact(hlog *l, hlog_session *s, const hlog_compact_opts *o, hlog_compact_info *out);

typedef struct hlog_space {
	uint64_t unit_bytes;      /* a device segment, or a page without a device */
	uint64_t begin, limit, tail;  /* the log [begin, tail); a pass may work on [begin, limit) */
	uint64_t units;           /* units from Begin's to the tail's */
	uint64_t garbage;         /* garbage bytes counted in them */
	uint64_t hold;            /* the lowest Begin a checkpoint on disk needs (UINT64_MAX: none) */
	uint64_t reclaimed;       /* the device space below was given back */
	uint64_t expired_end;     /* a pass to here would drop [begin, expired_end) unread (compact.c
	                             note 7); begin when the oldest unit cannot go so */
} hlog_space;
void hlog_space_get(hlog *l, hlog_space *out /* out */);
/* The end of the prefix worth a pass: whole units from Begin's, at most max_units of them, with
 * the highest garbage share (garbage / bytes, ties to the longer), if it is at least min_share;
 * 0 when none is. */
uint64_t hlog_compact_choose(hlog *l, double min_share, uint64_t max_units);
/* Give back the device's segments below min(Begin, what the checkpoints on disk need); *removed:
 * their bytes. 0 or -errno. s as for hlog_compact. */
int hlog_reclaim(hlog *l, hlog_session *s, uint64_t *removed /* out */);

#endif
