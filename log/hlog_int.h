/*
 * hlog_int.h - the log's guts, private to log/ (and its tests): record layout, the store and
 * session structs, and a record walker for tests, recovery and compaction. See hlog.c's notes.
 */
#ifndef SPW_HLOG_INT_H
#define SPW_HLOG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/spw.h"
#include "index/hidx.h"
#include "log/epoch_int.h"
#include "log/hlog.h"

/* ---------------- record layout ----------------
 *
 *   +0   info      u64   (bits below; the only field that changes after publication, except
 *                         val_len, expire_at and the value, which change in place under the
 *                         record's exclusive lock while the record is mutable)
 *   +8   key_len   u32
 *   +12  val_len   u32
 *   +16  expire_at i64   only when REC_HAS_EXPIRY: absolute unix ms
 *   ...  key bytes, value bytes, zero padding to 8
 *
 * Size = align8(16 + (expiry ? 8 : 0) + key_len + val_len). A record never spans pages; the bytes
 * after the last record of a page stay zero, and a record's info is never 0 (a new record carries
 * REC_SEALED until published, a published one REC_VALID), so a page walker reads info == 0 as
 * "rest of this page is empty".
 */
#define REC_PREV_MASK     ((1ULL << 48) - 1)  /* bits 0-47: previous record of the chain (0 = none) */
#define REC_TOMBSTONE     (1ULL << 48)        /* bit 48: the key is deleted as of this version */
#define REC_VALID         (1ULL << 49)        /* bit 49: published (its index CAS succeeded) */
#define REC_SEALED        (1ULL << 50)        /* bit 50: valid+sealed = superseded by a newer version
                                               * (RCU from a mutable record); !valid+sealed = not yet
                                               * published, or never (lost its CAS: garbage) */
#define REC_HAS_EXPIRY    (1ULL << 51)        /* bit 51: expire_at present; fixed for the record's life */
#define REC_TYPE_SHIFT    52                  /* bits 52-53: reserved, record type (data types later) */
#define REC_TYPE_MASK     (3ULL << REC_TYPE_SHIFT)
#define REC_LOCK_X        (1ULL << 54)        /* bit 54: exclusive lock (in-place writer, RCU source) */
#define REC_LOCK_S_SHIFT  55                  /* bits 55-61: shared lock count (readers of mutable) */
#define REC_LOCK_S_ONE    (1ULL << REC_LOCK_S_SHIFT)
#define REC_LOCK_S_MASK   (0x7FULL << REC_LOCK_S_SHIFT)
#define REC_VERSION_SHIFT 62                  /* bits 62-63: reserved, checkpoint version */
#define REC_VERSION_MASK  (3ULL << REC_VERSION_SHIFT)

#define REC_HDR_BYTES 16u

typedef struct log_rec {
	_Atomic uint64_t info;
	uint32_t key_len;
	uint32_t val_len;
} log_rec;

static inline uint64_t rec_size_of(uint64_t klen, uint64_t vlen, bool has_expiry)
{
	return SPW_ALIGN_UP(REC_HDR_BYTES + (has_expiry ? 8u : 0u) + klen + vlen, 8);
}

static inline uint8_t *rec_key(const log_rec *r, uint64_t info)
{
	return (uint8_t *)r + REC_HDR_BYTES + ((info & REC_HAS_EXPIRY) ? 8u : 0u);
}

static inline uint8_t *rec_val(const log_rec *r, uint64_t info)
{
	return rec_key(r, info) + r->key_len;
}

static inline int64_t rec_expire_at(const log_rec *r, uint64_t info)
{
	return (info & REC_HAS_EXPIRY) ? *(const int64_t *)(r + 1) : HLOG_NO_EXPIRY;
}

static inline uint64_t rec_size(const log_rec *r, uint64_t info)
{
	return rec_size_of(r->key_len, r->val_len, (info & REC_HAS_EXPIRY) != 0);
}

/* ---------------- the store ---------------- */

struct hlog_session {
	hlog *l;
	int id;                            /* session slot = epoch table entry */
	int64_t now_ms;
	_Atomic int in_use;
	/* Counters: written only by the owning thread (relaxed load + store, no locked instruction),
	 * read by anyone summing them. keys/expires are deltas; see hlog_key_count(). */
	_Atomic int64_t keys, expires;
	_Atomic uint64_t inplace, rcu, appends, log_full, retries, expired;
} SPW_ALIGNED_CL;

struct hlog {
	/* Read-only after hlog_open. */
	hidx *idx;
	epoch *ep;
	uint8_t *mem;                      /* frame_slots * page_bytes of reserved address space */
	uint64_t mem_bytes;
	uint64_t window_mask;              /* address -> byte in mem: mem + (addr & window_mask) */
	uint64_t page_bytes;
	uint32_t page_bits;
	uint32_t tail_shift;               /* tail word = page << tail_shift | offset */
	uint64_t tail_off_mask;
	uint64_t max_pages;                /* pages that may be in memory at once */
	uint64_t frame_slots;              /* max_pages rounded up to a power of two */
	uint64_t mutable_pages;
	uint64_t page_limit;               /* first page number past the 48-bit address space */
	uint64_t max_rec;                  /* largest record: page_bytes - HLOG_FIRST_ADDRESS */
	uint64_t buckets;                  /* index main buckets (scan cursor end) */
	hlog_session *sessions;
	int max_sessions;

	/* Markers: read by every operation, written rarely (page turns, flush, epoch actions). */
	_Atomic uint64_t begin SPW_ALIGNED_CL;
	_Atomic uint64_t head;
	_Atomic uint64_t safe_head;
	_Atomic uint64_t safe_ro;
	_Atomic uint64_t read_only;
	_Atomic uint64_t flushed_until;

	/* The tail: written by every allocation, so alone on its line. */
	_Atomic uint64_t tail SPW_ALIGNED_CL;

	/* Rarely touched. */
	pthread_mutex_t release_mu SPW_ALIGNED_CL;  /* serialises frame release (note 12) */
	_Atomic uint8_t *frame_used;       /* per frame slot: 1 while it holds a live page */
	_Atomic uint64_t allocated_pages;
	_Atomic int64_t keys_base, expires_base;     /* subtracted from the session sums (FLUSHALL) */
};

/* Visit every record header in [BeginAddress, TailAddress) in address order. Only while no other
 * thread writes (tests now; recovery and compaction of the read-only region later). Returns the
 * number of records visited (published, or garbage: check REC_VALID). */
typedef void (*hlog_record_fn)(void *ctx, uint64_t addr, const log_rec *r, uint64_t info);
uint64_t hlog_records_visit(hlog *l, hlog_record_fn fn, void *ctx);

static inline log_rec *hlog_rec_at(const hlog *l, uint64_t addr)
{
	return (log_rec *)(l->mem + (addr & l->window_mask));
}

#endif
