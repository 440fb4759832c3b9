/*
 * latch.c - 4096 reader-writer spin latches (coll/latch.h).
 *
 * Design notes:
 *  1. One 32-bit word per 64-byte line (no false sharing between latches): bits 0..30 count the
 *     readers, bit 31 is the writer. A reader adds one when no writer holds it; a writer sets bit
 *     31 when the word is 0 (no readers, no writer). Writers get no preference: the spans held
 *     are short (one command's store operations on one collection, nothing waits inside), so
 *     starvation would need a reader always present.
 *  2. Never held across a park: an operation that answers HLOG_PENDING makes its holder release
 *     before parking, so a latch never waits on a device read, and the spin is bounded by other
 *     threads' in-memory work. Acquire/release ordering makes what a writer published to the store
 *     before its release visible to the next holder.
 */
#include "coll/latch.h"

#include <stdalign.h>
#include <stdatomic.h>

#define LATCH_WRITER 0x80000000u

struct latch_line {
	alignas(64) _Atomic uint32_t w;
};

static struct latch_line latches[COLL_LATCHES];

static inline _Atomic uint32_t *latch_of(uint64_t h)
{
	/* the high bits: the index uses the low ones to pick buckets */
	return &latches[(h >> 40) % COLL_LATCHES].w;
}

static inline void latch_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

void coll_latch_shared(uint64_t key_hash)
{
	_Atomic uint32_t *w = latch_of(key_hash);
	for (;;) {
		uint32_t v = atomic_load_explicit(w, memory_order_relaxed);
		if (!(v & LATCH_WRITER) &&
		    atomic_compare_exchange_weak_explicit(w, &v, v + 1, memory_order_acquire,
		                                          memory_order_relaxed))
			return;
		latch_pause();
	}
}

void coll_latch_shared_release(uint64_t key_hash)
{
	atomic_fetch_sub_explicit(latch_of(key_hash), 1, memory_order_release);
}

void coll_latch_excl(uint64_t key_hash)
{
	_Atomic uint32_t *w = latch_of(key_hash);
	for (;;) {
		uint32_t v = 0;
		if (atomic_compare_exchange_weak_explicit(w, &v, LATCH_WRITER, memory_order_acquire,
		                                          memory_order_relaxed))
			return;
		latch_pause();
	}
}

void coll_latch_excl_release(uint64_t key_hash)
{
	atomic_store_explicit(latch_of(key_hash), 0, memory_order_release);
}

uint32_t coll_latch_word(uint64_t key_hash)
{
	return atomic_load_explicit(latch_of(key_hash), memory_order_relaxed);
}
