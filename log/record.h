/*
 * record.h - the record: its layout in the log (and on the device, byte for byte), the bits of its
 * info word, and the helpers every file of log/ reads and locks records with. Private to log/ (and
 * its tests). The rules for publishing and locking are ops.c's notes 1 and 3.
 */
#ifndef SPW_LOG_RECORD_H
#define SPW_LOG_RECORD_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/spw.h"
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
 * Size = align8(16 + (expiry ? 8 : 0) + key_len + val_len). A record of at most page_bytes never
 * spans pages; a larger one starts a page and covers whole pages after it, its end sharing the last
 * one with the records that follow (alloc.c note 5). The bytes after the last record of a page stay
 * zero, and a record's info is never 0 (a new record carries REC_SEALED until published, a
 * published one REC_VALID), so a page walker reads info == 0 as "rest of this page is empty".
 * The same bytes go to the device unchanged: a record read back from address a is the record that
 * was at a in memory (its lock bits may hold a reader's count; nobody looks at them there).
 */
#define REC_PREV_MASK     ((1ULL << 48) - 1)  /* bits 0-47: previous record of the chain (0 = none) */
#define REC_TOMBSTONE     (1ULL << 48)        /* bit 48: the key is deleted as of this version */
#define REC_VALID         (1ULL << 49)        /* bit 49: published (its index CAS succeeded) */
#define REC_SEALED        (1ULL << 50)        /* bit 50: valid+sealed = superseded by a newer version
                                               * (RCU from a mutable record); !valid+sealed = not yet
                                               * published, or never (lost its CAS: garbage) */
#define REC_HAS_EXPIRY    (1ULL << 51)        /* bit 51: expire_at present; fixed for the record's life */
#define REC_TYPE_SHIFT    52                  /* bits 52-53: the record type, HLOG_T_* (hlog.h); fixed
                                               * for a record's life except that a write in place may
                                               * change it with the value, under the exclusive lock */
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

static inline uint8_t rec_type(uint64_t info)
{
	return (uint8_t)((info & REC_TYPE_MASK) >> REC_TYPE_SHIFT);
}

static inline uint64_t rec_type_bits(uint8_t rtype)
{
	return ((uint64_t)rtype << REC_TYPE_SHIFT) & REC_TYPE_MASK;
}

/* The value a callback sees: the record's, at address addr. */
static inline hlog_value rec_value(const log_rec *r, uint64_t info, uint64_t addr)
{
	return (hlog_value){ rec_val(r, info), r->val_len, rec_expire_at(r, info), rec_type(info), addr };
}

/* Whether the record is in the namespace of a key that is internal or not (hlog.h, hlog_key):
 * internal keys own the HLOG_T_PART records (tombstones included), user keys all others. */
static inline bool rec_internal(uint64_t info)
{
	return rec_type(info) == HLOG_T_PART;
}

/* Whether the record (header r, info) holds key k: the same namespace and the same bytes. */
static inline bool rec_key_is(const log_rec *r, uint64_t info, const void *key, size_t klen, bool internal)
{
	return r->key_len == klen && rec_internal(info) == internal &&
	       (klen == 0 || memcmp(rec_key(r, info), key, klen) == 0);
}

/* Whether two records hold the same key (namespace and bytes). */
static inline bool rec_same_key(const log_rec *a, uint64_t ai, const log_rec *b, uint64_t bi)
{
	return rec_key_is(a, ai, rec_key(b, bi), b->key_len, rec_internal(bi));
}

static inline bool rec_expired(const log_rec *r, uint64_t info, int64_t now_ms)
{
	return (info & REC_HAS_EXPIRY) && rec_expire_at(r, info) < now_ms;
}

static inline uint64_t rec_size(const log_rec *r, uint64_t info)
{
	return rec_size_of(r->key_len, r->val_len, (info & REC_HAS_EXPIRY) != 0);
}

/* ---------------- waiting ---------------- */

static inline void log_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Back-off for short waits on another thread: pause a while, then give the CPU away. */
static inline void log_spin(unsigned *n)
{
	if (++*n < 128)
		log_cpu_relax();
	else
		sched_yield();
}

/* ---------------- record locks (info word) ---------------- */

/* Wait until a reachable record is published (ops.c note 1); returns its info. */
static inline uint64_t rec_wait_valid(log_rec *r, uint64_t info)
{
	unsigned spins = 0;
	while (SPW_UNLIKELY(!(info & REC_VALID))) {
		log_spin(&spins);
		info = atomic_load_explicit(&r->info, memory_order_acquire);
	}
	return info;
}

/* Shared lock for reading a mutable record. Returns the info word (with our share), or 0 without
 * a lock when the record is sealed and allow_sealed is false. */
static inline uint64_t rec_lock_shared(log_rec *r, bool allow_sealed)
{
	unsigned spins = 0;
	uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
	for (;;) {
		if ((info & REC_SEALED) && !allow_sealed)
			return 0;
		if ((info & REC_LOCK_X) || (info & REC_LOCK_S_MASK) == REC_LOCK_S_MASK) {
			log_spin(&spins);
			info = atomic_load_explicit(&r->info, memory_order_relaxed);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&r->info, &info, info + REC_LOCK_S_ONE,
				memory_order_acquire, memory_order_relaxed))
			return info + REC_LOCK_S_ONE;
	}
}

static inline void rec_unlock_shared(log_rec *r)
{
	atomic_fetch_sub_explicit(&r->info, REC_LOCK_S_ONE, memory_order_release);
}

/* Exclusive lock for an in-place writer or an RCU source. Returns the info word (with REC_LOCK_X),
 * or 0 without a lock when the record is sealed, or (wait_writer false) when another writer holds
 * X: readers' shares (held for one copy) are always waited for (group.c note 9 gives up on a
 * writer). While X is held nobody else changes info, so the holder edits its copy and publishes
 * it with the unlock store. */
static inline uint64_t rec_lock_excl_if(log_rec *r, bool wait_writer)
{
	unsigned spins = 0;
	uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
	for (;;) {
		if ((info & REC_SEALED) || (!wait_writer && (info & REC_LOCK_X)))
			return 0;
		if (info & (REC_LOCK_X | REC_LOCK_S_MASK)) {
			log_spin(&spins);
			info = atomic_load_explicit(&r->info, memory_order_relaxed);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&r->info, &info, info | REC_LOCK_X,
				memory_order_acquire, memory_order_relaxed))
			return info | REC_LOCK_X;
	}
}

static inline uint64_t rec_lock_excl(log_rec *r) { return rec_lock_excl_if(r, true); }
static inline uint64_t rec_try_lock_excl(log_rec *r) { return rec_lock_excl_if(r, false); }

static inline void rec_unlock_excl(log_rec *r, uint64_t info)
{
	atomic_store_explicit(&r->info, info & ~REC_LOCK_X, memory_order_release);
}

#endif
