/*
 * hlog_int.h - the log's guts, private to log/ (and its tests): the store and session structs, the
 * small helpers every file of log/ shares, and a record walker for tests, recovery and compaction.
 * The record layout is record.h; each module's own declarations are in its *_int.h (alloc, pending,
 * readq, scan). The design notes open each module's .c file; store.c shows how they call each other.
 */
#ifndef SPW_HLOG_INT_H
#define SPW_HLOG_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/spw.h"
#include "index/hidx.h"
#include "log/epoch_int.h"
#include "log/hlog.h"
#include "log/record.h"

/* ---------------- small shared helpers ---------------- */

static inline uint64_t load_acq(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_acquire);
}

/* Raise a marker to at least v. true when this call moved it. */
static inline bool marker_advance(_Atomic uint64_t *m, uint64_t v)
{
	uint64_t cur = atomic_load(m);
	while (cur < v) {
		if (atomic_compare_exchange_weak(m, &cur, v))
			return true;
	}
	return false;
}

/* Single-writer counters: the owner adds without a locked instruction; readers may see it late. */
static inline void ctr_add(_Atomic uint64_t *c, uint64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

static inline void ctr_add_signed(_Atomic int64_t *c, int64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + d, memory_order_relaxed);
}

/* ---------------- the storage tier's session state ----------------
 *
 * Owned by the session's thread. Each group of fields belongs to one module, named beside it; no
 * other module writes them (pending.c's fetch completion counts scan_inflight down for scan.c).
 */

struct dev_queue;
typedef struct pend_op pend_op;
typedef struct pend_fetch pend_fetch;
typedef struct readq_io readq_io;

#define READQ_BUF_CLASSES 8              /* pooled read buffers: buf_min << 0 .. << 7 */

typedef struct tier_session {
	/* readq.c: the device queue, IO objects, staging, the backlog, the buffer pool. */
	struct dev_queue *q;               /* NULL until hlog_session_attach (or without a device) */
	bool closing;                      /* set by readq_queue_close; fetches stop going on */
	bool unsubmitted;                  /* requests queued since the last dev_submit */
	bool reap_full;                    /* the last poll ended on a full reap: completions may be left */
	bool submit_short;                 /* the last dev_submit left requests queued (kernel short) */
	/* Requests the device refused with -EAGAIN (throttle, queue depth), in order. */
	readq_io *backlog_head, *backlog_tail;
	uint32_t backlog;
	readq_io *io_free;
	/* Scatter-gather (readq.c note 1): record reads queued since the last submission (merged, sorted
	 * there), and every record read queued or in flight, by device offset (identical reads share). */
	readq_io *stage_head, *stage_tail;
	uint32_t nstaged;
	readq_io **stage_arr;              /* sort space, grown as needed */
	uint8_t *gap_buf;                  /* a sector that vectored reads drop gap bytes into */
	uint64_t gap_cap;
	uint32_t stage_cap;
	readq_io **rd_hash;                /* chains through readq_io.hnext; allocated at attach */
	uint32_t rd_mask;
	uint8_t *buf_free[READQ_BUF_CLASSES];  /* pooled aligned buffers (first word links) */
	/* pending.c: the op table, fetches, the ready and wait lists. */
	hlog_ready_fn ready;
	void *cb_arg;
	void *op_ctx;                      /* hlog_session_set_op */
	bool issuing;                      /* inside pend_cold's first read: no ready callback */
	pend_fetch *fetch_free;
	pend_op *op_free;
	/* Pending operations by op_ctx: an open hash table of chains. */
	pend_op **ops;
	uint32_t ops_mask, ops_count;
	pend_op *ready_head, *ready_tail;  /* ops whose reads are done: ready callbacks in poll */
	pend_op *wait_head;                /* ops waiting for a frame (flush waits) */
	uint32_t nwait;
	/* compact.c: the scan's own device queue, opened by the first pass on this session and kept
	 * (a ring per pass would be set up and torn down hundreds of times a second). */
	struct dev_queue *cmp_q;
	/* scan.c: the device part of a scan (blocking compromise, scan.c note 2). */
	uint32_t scan_inflight;
	int scan_err;
	void *scan_chains;                 /* scan_chain array, grown as needed */
	uint32_t scan_nchains, scan_chains_cap;
	void *scan_seen;                   /* seen-key array */
	uint32_t scan_nseen, scan_seen_cap;
	uint8_t *scan_keys;                /* seen-key bytes */
	uint64_t scan_keys_len, scan_keys_cap;
} tier_session;

/* ---------------- the store ---------------- */

struct hlog_session {
	hlog *l;
	int id;                            /* session slot = epoch table entry */
	int64_t now_ms;
	_Atomic int in_use;
	/* Counters: written only by the owning thread (relaxed load + store, no locked instruction),
	 * read by anyone summing them. keys/expires are deltas; see hlog_key_count(). The rest are
	 * HLOG_COUNTERS (hlog.h), by the same names as in hlog_info. */
	_Atomic int64_t keys, expires;
	_Atomic int64_t keys_post[2], expires_post[2];   /* the deltas at or above a cut (ckpt.c note 4) */
	_Atomic uint32_t cnt_seq;          /* odd while log_count changes the counts above (a seqlock) */
#define HLOG_CTR_SESSION_FIELD(field, kind, info, doc) _Atomic uint64_t field;
	HLOG_COUNTERS(HLOG_CTR_SESSION_FIELD)
#undef HLOG_CTR_SESSION_FIELD
	/* Read by other threads that signal this session's fd (alloc_signal, under l->sig_mu). */
	_Atomic int wait_flag;             /* 1 while some op of this session waits for a frame */
	int efd;                           /* hlog_session_fd once asked for, else -1 */
	/* scan.c note 4: hashes of the keys one hlog_scan call reported, for a second walk. */
	uint64_t *rep_h;
	uint32_t rep_n, rep_cap;
	/* readq.c: device requests the device accepted, and whose completion ran (read by
	 * hlog_reclaim on another thread: no segment goes while one accepted before is in flight). */
	_Atomic uint64_t io_accepted, io_completed;
	/* ops.c: the redo hook (hlog_session_set_redo), NULL when none. */
	hlog_redo_fn redo;
	void *redo_arg;
	tier_session t;                    /* owned by the session's thread */
} SPW_ALIGNED_CL;

struct hlog {
	/* Read-only after hlog_open. */
	hidx *idx;
	epoch *ep;
	uint64_t index_max;                /* hlog_config.index_max_bytes (store.c, index growth) */
	int index_pct;                     /* hlog_config.index_resize_pct, 0 made 25 */
	uint8_t *mem;                      /* 2 * mem_bytes: the frames, mapped twice back to back */
	uint64_t mem_bytes;                /* frame_slots * page_bytes */
	int mem_fd;                        /* the memfd behind both mappings */
	uint64_t window_mask;              /* address -> byte in mem: mem + (addr & window_mask) */
	uint64_t page_bytes;
	uint32_t page_bits;
	uint32_t tail_shift;               /* tail word = page << tail_shift | offset */
	uint64_t tail_off_mask;
	uint64_t max_pages;                /* pages that may be in memory at once */
	uint64_t frame_slots;              /* max_pages rounded up to a power of two */
	uint64_t mutable_pages;
	uint64_t page_limit;               /* first page number past the 48-bit address space */
	uint64_t max_rec;                  /* largest record (alloc.c note 5) */
	hlog_session *sessions;
	int max_sessions;
	/* Storage tier (NULL dev: memory only). */
	struct dev *dev;
	uint32_t sector;                   /* dev->sector_bytes */
	uint32_t initial_io;               /* first read of a pending record, before sector rounding */
	uint64_t io_chunk;                 /* the largest single request: a power of two, segment-aligned */
	uint64_t buf_min;                  /* smallest pooled read buffer */
	bool read_merge;                   /* !hlog_config.no_read_merge (readq.c note 1) */
	bool group_in_place;               /* !hlog_config.group_span_only (group.c note 9) */
	int (*part_live)(void *, hlog_session *, const void *, size_t, const hlog_value *);
	void *part_live_arg;               /* hlog_config's liveness check of parts (compact.c note 8) */

	/* Markers: read by every operation, written rarely and only by alloc.c (its note 2). */
	_Atomic uint64_t begin SPW_ALIGNED_CL;
	_Atomic uint64_t head;
	_Atomic uint64_t safe_head;
	_Atomic uint64_t safe_ro;
	_Atomic uint64_t read_only;
	_Atomic uint64_t flushed_until;
	_Atomic int error;                 /* sticky store error (0 or -errno): writes are refused */

	/* The tail: written by every allocation, so alone on its line. */
	_Atomic uint64_t tail SPW_ALIGNED_CL;

	/* Flush and eviction bookkeeping (alloc.c note 7): written by page turns and IO completions. */
	_Atomic uint64_t flush_claimed SPW_ALIGNED_CL;  /* pages below have had their writes queued */
	_Atomic uint64_t evict_want;       /* the Head some page turn needs */
	_Atomic uint64_t ro_bumped;        /* ReadOnly value whose SafeReadOnly action is queued */
	_Atomic uint64_t head_bumped;      /* Head value whose frame-release action is queued */
	_Atomic int nwaiting;              /* sessions with wait_flag set */

	/* Rarely touched. */
	pthread_mutex_t release_mu SPW_ALIGNED_CL;  /* serialises frame release (alloc.c note 9) */
	pthread_mutex_t sig_mu;            /* alloc_signal against a session closing its fd */
	_Atomic uint8_t *frame_used;       /* per frame slot: 1 while it holds a live page */
	_Atomic uint64_t *flush_done;      /* per frame slot: page + 1 of the last page written whole */
	_Atomic uint64_t *flush_left;      /* per frame slot: page << 16 | writes still in flight */
	_Atomic uint64_t *span_first;      /* per frame slot: page << 24 | (last - page) for the first
	                                      page of a record spanning pages (alloc.c note 5) */
	_Atomic uint64_t *span_cont;       /* per frame slot: page << 32 | end offset in this page of the
	                                      spanning record it continues (walkers skip that far) */
	_Atomic uint64_t allocated_pages;
	_Atomic int64_t keys_base, expires_base;     /* subtracted from the session sums (FLUSHALL) */

	/* Durability (ckpt.c, recover.c). */
	_Atomic uint64_t redo_seq SPW_ALIGNED_CL;  /* the next redo seq (ops.c): one fetch_add per change */
	_Atomic uint64_t cut_word;         /* generation << 48 | the last cut (ckpt.c note 4); read by
	                                      every counted change, written by a cut */
	pthread_mutex_t ckpt_mu;           /* a checkpoint's cut to its write-out, against FLUSHALL */
	pthread_mutex_t ckpt_one;          /* one checkpoint at a time (the whole of hlog_checkpoint) */
	uint64_t ckpt_id;                  /* the last checkpoint's number (under ckpt_mu) */
	uint64_t cut_gen;                  /* cuts taken, failed checkpoints' too (under ckpt_one) */
	uint64_t ckpt_from;                /* the last checkpoint's cut: the log below it is durable, so
	                                      the next checkpoint writes from there (under ckpt_mu) */
	_Atomic uint64_t rec_done, rec_total;      /* recovery's progress (hlog_recover_progress) */
	_Atomic uint64_t ckpt_hold;        /* the lowest Begin a checkpoint on disk needs (or a running
	                                      one cut at); UINT64_MAX with none: device space below it
	                                      may go (compact.c note 5) */

	/* Compaction (compact.c note 3): garbage bytes per unit (a device segment, or a page without
	 * a device), a ring indexed by unit & (LOG_GARBAGE_SLOTS - 1), one ring per session (session
	 * i's at garbage + i * LOG_GARBAGE_SLOTS: written only by its thread, no locked instruction
	 * on the write path; readers sum them). Statistics only: correctness never depends on them. */
	_Atomic int64_t *garbage;
	uint32_t unit_bits;
	/* compact_stats.c (compact.c note 7): per unit and session, what a pass needs to drop a unit
	 * of expired records without reading it; NULL without a device. Units below stats_from hold
	 * records this process did not see written (a recovered log, a FLUSHALL's tail unit). */
	struct log_ustat *ustats;
	_Atomic uint64_t stats_from;
	pthread_mutex_t compact_one;       /* one compaction pass at a time */
	_Atomic uint64_t reclaimed;        /* the device space below was given back (hlog_reclaim) */

	/* Group locks (group.c note 8): per hidx_entry_stripe, the id + 1 of the session whose group
	 * holds the stripe's entries for its parts, or 0; and how many groups hold any (so that a
	 * write looks at the stripe only while one does). */
	_Atomic uint32_t *group_locks;
	_Atomic uint64_t group_lockers SPW_ALIGNED_CL;
};

/* Whether a group holds the entry of hash (group.c note 8): a write that reserved its record must
 * not publish it there now (ops.c, log_update_append). Both loads sequentially consistent, after
 * the reservation's: a group that locked before reserving its span is seen. */
static inline bool log_group_holds(hlog *l, uint64_t hash)
{
	return SPW_UNLIKELY(atomic_load(&l->group_lockers) != 0) &&
	       atomic_load(&l->group_locks[hidx_entry_stripe(hash)]) != 0;
}

#define LOG_GARBAGE_SLOTS 8192u

static inline void log_garbage_add(hlog_session *s, uint64_t addr, int64_t bytes)
{
	hlog *l = s->l;
	ctr_add_signed(&l->garbage[(uint64_t)s->id * LOG_GARBAGE_SLOTS +
	                           ((addr >> l->unit_bits) & (LOG_GARBAGE_SLOTS - 1))], bytes);
}

/* compact.c note 7: one unit's statistics in one session's ring (slot unit & (LOG_GARBAGE_SLOTS
 * - 1)), written only by the session's thread. unit is the unit number + 1 the slot holds (0:
 * none); the owner starts a slot over when it first writes for a newer unit. max_exp: the latest
 * expiry of the value records written into the unit; blockers: value records without an expiry,
 * and records that run on into the next unit (the unit's end is not a record boundary); live: the
 * keys whose newest version is a value record in the unit (+1 published, -1 superseded). */
typedef struct log_ustat {
	_Atomic uint64_t unit;
	_Atomic int64_t max_exp, blockers, live;
} log_ustat;

/* The session's slot of addr's unit, started over for it if it held an older unit; NULL when a
 * newer unit holds it (the readers then trust no session's figures for addr's unit). */
static inline log_ustat *log_ustat_slot(hlog_session *s, uint64_t addr)
{
	hlog *l = s->l;
	uint64_t u = (addr >> l->unit_bits) + 1;
	log_ustat *p = &l->ustats[(uint64_t)s->id * LOG_GARBAGE_SLOTS + ((u - 1) & (LOG_GARBAGE_SLOTS - 1))];
	uint64_t t = atomic_load_explicit(&p->unit, memory_order_relaxed);
	if (SPW_LIKELY(t == u))
		return p;
	if (t > u)
		return NULL;
	/* The tag first, then a fence: a reader that sees any of the new figures sees the new tag. */
	atomic_store_explicit(&p->unit, u, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&p->max_exp, INT64_MIN, memory_order_relaxed);
	atomic_store_explicit(&p->blockers, 0, memory_order_relaxed);
	atomic_store_explicit(&p->live, 0, memory_order_relaxed);
	return p;
}

/* A value record (or, !wr, a tombstone) of size bytes written at addr: its expiry (HLOG_NO_EXPIRY
 * for none) into the unit's figures. Also for a record whose CAS may still fail: the figures only
 * err towards "not droppable". */
static inline void log_ustat_write(hlog_session *s, uint64_t addr, uint64_t size, bool wr, int64_t exp)
{
	if (!s->l->ustats)
		return;
	log_ustat *p = log_ustat_slot(s, addr);
	if (!p)
		return;
	bool spans = (addr >> s->l->unit_bits) != ((addr + size - 1) >> s->l->unit_bits);
	if ((wr && exp == HLOG_NO_EXPIRY) || spans)
		ctr_add_signed(&p->blockers, 1);
	else if (wr && exp > atomic_load_explicit(&p->max_exp, memory_order_relaxed))
		atomic_store_explicit(&p->max_exp, exp, memory_order_relaxed);
}

/* The key whose newest version is (d = +1) or was (d = -1) the value record at addr. */
static inline void log_ustat_live(hlog_session *s, uint64_t addr, int64_t d)
{
	if (!s->l->ustats)
		return;
	log_ustat *p = log_ustat_slot(s, addr);
	if (p)
		ctr_add_signed(&p->live, d);
}

int log_ustats_open(hlog *l);
void log_ustats_close(hlog *l);
/* Units below addr hold records whose figures this process never saw (recovery, FLUSHALL). */
void log_ustats_forget(hlog *l, uint64_t addr);
/* compact_stats.c: the end of the leading units of [begin, until) a pass may drop unread (their
 * records all expired; note 7), or begin. */
uint64_t log_expired_prefix(hlog *l, uint64_t begin, uint64_t until);
bool log_expired_live(hlog *l, uint64_t u0, uint64_t u1, int64_t *keys);
/* ops.c: n keys went with units dropped unread: the counts as n expiries (compact.c note 7). */
void log_count_dropped(hlog_session *s, int64_t n);

/* Compaction's conditional copy (ops.c): if the newest version of k is still the record at src,
 * copy it to the tail (LOG_RELOCATE_COPY), or delete it (the EVICT kinds, and an expired one in
 * any case; never a part): HLOG_OK. HLOG_NOTFOUND when there is nothing to do (a newer version, a
 * tombstone), HLOG_PENDING (a device read or a frame wait for the session's op_ctx: run it again
 * once ready), or an error. With ask non-NULL, a live part is left as it is: its value is copied
 * into *ask and the result is LOG_RELOCATE_ASK (compact.c note 8: the liveness check runs outside
 * the update path, then the relocation runs again with ask NULL to copy it). */
enum { LOG_RELOCATE_COPY, LOG_RELOCATE_EVICT_ALL, LOG_RELOCATE_EVICT_VOLATILE };
enum { LOG_RELOCATE_ASK = 3 };       /* a result, beside HLOG_OK / HLOG_NOTFOUND / HLOG_PENDING */
typedef struct log_part_val {
	uint8_t *buf;                    /* owned by the caller (grown by log_relocate, never shrunk) */
	uint32_t len, cap;
} log_part_val;
/* Before device segments go (compact.c note 5): one epoch, then every request the sessions' queues
 * had accepted completes. s: the caller's session, unprotected. false after LOG_QUIESCE_MS. */
#define LOG_QUIESCE_MS 5000u
#define LOG_QUIESCE_SESSIONS 4096u
bool log_io_quiesce(hlog *l, hlog_session *s);
/* rec: the record as compaction read it from the device (or NULL): used as the fetched copy when
 * the chain goes cold right at src, so that it is not read again. */
int log_relocate(hlog_session *s, const hlog_key *k, uint64_t src, int how, const log_rec *rec,
                 log_part_val *ask);

/* Visit every record header in [max(BeginAddress, HeadAddress), TailAddress) in address order (the
 * part of the log in memory; a spanning record cut by Head is skipped). Only while no other thread
 * writes (tests now; recovery and compaction of the read-only region later). Returns the number of
 * records visited (published, or garbage: check REC_VALID). */
typedef void (*hlog_record_fn)(void *ctx, uint64_t addr, const log_rec *r, uint64_t info);
uint64_t hlog_records_visit(hlog *l, hlog_record_fn fn, void *ctx);

static inline log_rec *hlog_rec_at(const hlog *l, uint64_t addr)
{
	return (log_rec *)(l->mem + (addr & l->window_mask));
}

/* The end, within page p, of a spanning record that started on an earlier page (p continues it),
 * or 0. */
static inline uint64_t log_span_cont_end(const hlog *l, uint64_t p)
{
	uint64_t w = atomic_load(&l->span_cont[p & (l->frame_slots - 1)]);
	return (w >> 32) == p ? (w & 0xffffffffULL) : 0;
}

/* ---------------- the tail word (alloc.c note 4) ---------------- */

static inline uint64_t tail_page(const hlog *l, uint64_t w) { return w >> l->tail_shift; }
static inline uint64_t tail_off(const hlog *l, uint64_t w) { return w & l->tail_off_mask; }

/* The tail word as an address; an overshot offset means "the end of that page". */
static inline uint64_t tail_address(const hlog *l, uint64_t w)
{
	return (tail_page(l, w) << l->page_bits) + SPW_MIN(tail_off(l, w), l->page_bytes);
}

/* ---------------- the epoch ---------------- */

/* Let due epoch actions run: a protected session refreshes (poll runs between operations). */
static inline void log_epoch_step(hlog_session *s)
{
	epoch *e = s->l->ep;
	if (epoch_is_protected(e, s->id))
		epoch_refresh(e, s->id);
	else
		epoch_drain(e);
}

#endif
