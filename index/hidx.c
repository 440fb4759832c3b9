/*
 * hidx.c - the latch-free hash index (Tsavorite's design).
 *
 * NOTES ON THE DESIGN OF THE INDEX
 *
 * Layout. A power-of-two array of 64-byte buckets (hidx_int.h), mmap'd so that untouched pages cost
 * nothing. A bucket holds 7 entry words and one overflow word: the 1-based index of the next bucket
 * of its chain, taken from the overflow allocator (0 = end of chain). Overflow buckets live in pages
 * of 4096 buckets that are mapped on demand and found through a fixed table of page pointers.
 *
 * Entry word (bit layout beside the constants in hidx.h):
 *
 *   63         62 ........ 48   47 ................................ 0
 *   tentative  tag (15 bits)    logical address of the newest record
 *
 *   0                      free slot
 *   T | tag | 0            tentative: a claim being checked for twins; readers skip it
 *   tag | 0                confirmed, no record yet (the creator is about to CAS one in)
 *   tag | addr             confirmed; addr < BeginAddress means "no record" to the log
 *
 * Tag 0 is folded into tag 1 (hidx_tag_of) so that "tag | 0" is never the free word 0.
 *
 * Invariants.
 *  1. At most one confirmed entry exists per (bucket, tag) in a chain. The insert protocol below is
 *     what keeps it; nothing else ever writes a tag into a free slot.
 *  2. A slot changes only by CAS, except two plain stores made by the thread that owns a tentative
 *     claim (confirm: T|tag|0 -> tag|0; back out: T|tag|0 -> 0). Nobody else writes a tentative
 *     word: readers skip it, hidx_clear_below skips it, and hidx_slot_cas needs a confirmed word
 *     that only hidx_entry_find(_or_create) hands out.
 *  3. Chains only grow: an overflow word goes from 0 to an index once (CAS) and never changes again
 *     while the index is open; overflow buckets are never unlinked or freed before hidx_close, so a
 *     reader may walk a chain at any time without a lock or an epoch.
 *  4. A bucket is zero when it is published. Fresh pages come zeroed from mmap; a bucket whose
 *     publishing CAS lost goes on the allocator's free list untouched, and its link word (the only
 *     word the free list uses) is zeroed again before it is handed out.
 *  5. A page pointer is stored (under the allocator mutex) before any index into that page is handed
 *     out, and the CAS that publishes an index is a release, so a reader that saw the index through
 *     an acquire load of an overflow word sees the page.
 *
 * Insert protocol (hidx_entry_find_or_create).
 *   a. Walk the chain: return the confirmed entry with our tag if there is one; remember the first
 *      free slot. If only a tentative twin is there, pause and start again (its owner resolves it in
 *      a few steps; claiming beside it would only make one of us back out).
 *   b. No free slot: allocate an overflow bucket, CAS it into the last bucket's overflow word (0 ->
 *      idx); if another thread linked one first, give ours back to the free list. Start again.
 *   c. Claim the free slot: CAS 0 -> T|tag. If that fails, someone took it: start again.
 *   d. Rescan the whole chain (from the main bucket, following overflow words afresh) for any other
 *      word with our tag, tentative or confirmed. If there is one, back out (store 0), pause for a
 *      random, growing while, and start again. Otherwise confirm: store tag|0 and return it.
 *
 * Why it is safe. Two threads A and B inserting the same (bucket, tag) each do "claim (CAS), then read
 * every slot" - Dekker's pattern. With the claims and the rescan loads sequentially consistent, the
 * two claims and the reads are in one total order: if A's rescan read B's slot before B claimed it,
 * then B's claim, and B's rescan after it, come after A's claim, so B sees A's word and backs out.
 * At least one of any two claimants therefore sees the other; a thread that confirms saw no twin, so
 * no other claim of that tag was in place before its rescan, and any later claimant sees the
 * confirmed entry. A slot that B claims in a bucket linked after A read that overflow word is covered
 * by the same argument: the link precedes B's claim, which precedes B's rescan. Both threads may back
 * out at once; the randomised backoff makes a repeat unlikely, so the loop ends (livelock-free in
 * practice, not in theory). Because step a picks the first free slot, two creators of one tag
 * usually aim at the same slot and the claim CAS alone orders them; the rescan is what saves the
 * rarer case where their first free slots differ (a slot ahead was freed by a back-out or a clear
 * between their scans).
 *
 * Publishing and clearing. The log publishes a record by hidx_slot_cas (tag|old -> tag|new), so a
 * concurrent hidx_clear_below (tag|old -> 0, only for old < limit) and a publisher race on one word
 * and exactly one wins. In particular, a freshly created entry (tag|0) may be cleared before its
 * creator's first CAS; that CAS then fails with s->word == 0, and the creator must call
 * hidx_entry_find_or_create again rather than retry the CAS on the stale slot. The general rule for
 * the log: on a failed hidx_slot_cas, if the refreshed word is 0 or carries another tag, re-find the
 * entry; and treat any entry address below BeginAddress as "no record".
 *
 * Memory orders. Claims, the rescan and the overflow link are seq_cst (the Dekker argument needs the
 * store-load order; on x86 the loads are plain moves and the CAS is a locked op anyway). Lookups use
 * acquire loads, pairing with the publisher's CAS, so a record found through an entry is fully
 * written. hidx_slot_cas is seq_cst.
 *
 * Sections: open/close, the overflow allocator, lookups and inserts, scan and clear, stats.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "index/hidx_int.h"

/* A spin-wait hint to the CPU (lets the sibling hyperthread run, saves power). */
static inline void hidx_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* ---- open/close -------------------------------------------------------------------------------- */

static void *hidx_map(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static uint64_t hidx_floor_pow2(uint64_t v)
{
	return v ? 1ULL << (63 - __builtin_clzll(v)) : 0;
}

int hidx_open(hidx **out, uint64_t size_bytes)
{
	int rc = -ENOMEM;
	hidx *h;
	uint64_t buckets;

	if (!out)
		return -EINVAL;
	*out = NULL;
	buckets = SPW_MAX(hidx_floor_pow2(size_bytes / HIDX_BUCKET_BYTES), HIDX_MIN_BUCKETS);
	/* Bucket bits beyond 48 would overlap the tag and the address space cannot hold that many
	 * records anyway. */
	if (buckets > (1ULL << HIDX_TAG_SHIFT))
		return -EINVAL;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->hx_mask = buckets - 1;
	h->hx_main_bytes = buckets * HIDX_BUCKET_BYTES;
	h->hx_ovf_next = 1;
	if (pthread_mutex_init(&h->hx_ovf_lock, NULL) != 0) {
		free(h);
		return -ENOMEM;
	}
	h->hx_buckets = hidx_map(h->hx_main_bytes);
	if (!h->hx_buckets)
		goto fail;
	if (h->hx_main_bytes >= HIDX_HUGEPAGE_MIN_BYTES)
		(void)madvise(h->hx_buckets, h->hx_main_bytes, MADV_HUGEPAGE);   /* a hint; may be off */
	h->hx_ovf_pages = hidx_map(HIDX_OVF_MAX_PAGES * sizeof(*h->hx_ovf_pages));
	if (!h->hx_ovf_pages)
		goto fail;
	*out = h;
	return 0;
fail:
	hidx_close(h);
	return rc;
}

void hidx_close(hidx *h)
{
	if (!h)
		return;
	if (h->hx_ovf_pages) {
		for (uint64_t p = 0; p < h->hx_ovf_npages; p++)
			munmap(atomic_load_explicit(&h->hx_ovf_pages[p], memory_order_relaxed),
			       HIDX_OVF_PAGE_BYTES);
		munmap(h->hx_ovf_pages, HIDX_OVF_MAX_PAGES * sizeof(*h->hx_ovf_pages));
	}
	if (h->hx_buckets)
		munmap(h->hx_buckets, h->hx_main_bytes);
	pthread_mutex_destroy(&h->hx_ovf_lock);
	free(h);
}

/* ---- the overflow allocator -------------------------------------------------------------------- */

/* Hand out a zeroed, unpublished overflow bucket: from the free list, else the next unused index,
 * mapping its page first if needed. Rare (a chain outgrew 7 entries), hence the mutex. 0 or -ENOMEM. */
static int hidx_overflow_alloc(hidx *h, uint64_t *idx /* out */)
{
	uint64_t page;
	int rc = 0;

	pthread_mutex_lock(&h->hx_ovf_lock);
	if (h->hx_ovf_free) {
		hidx_bucket *b;

		*idx = h->hx_ovf_free;
		b = hidx_overflow_at(h, *idx);
		h->hx_ovf_free = atomic_load_explicit(&b->hb_overflow, memory_order_relaxed);
		/* Invariant 4: the link was the only nonzero word; the publishing CAS releases this. */
		atomic_store_explicit(&b->hb_overflow, 0, memory_order_relaxed);
		h->hx_ovf_free_count--;
		goto out;
	}
	if (h->hx_ovf_next > HIDX_OVF_MAX_BUCKETS) {
		rc = -ENOMEM;
		goto out;
	}
	page = (h->hx_ovf_next - 1) >> HIDX_OVF_PAGE_BITS;
	if (page == h->hx_ovf_npages) {
		hidx_bucket *mem = hidx_map(HIDX_OVF_PAGE_BYTES);

		if (!mem) {
			rc = -ENOMEM;
			goto out;
		}
		/* Invariant 5: stored before any index into the page leaves this function. */
		atomic_store_explicit(&h->hx_ovf_pages[page], mem, memory_order_release);
		h->hx_ovf_npages++;
	}
	*idx = h->hx_ovf_next++;
out:
	pthread_mutex_unlock(&h->hx_ovf_lock);
	return rc;
}

/* Take back a bucket that was never published (its link CAS lost). It is still all zero. Also used
 * by an image load for the buckets no chain of the image reaches (hidx_int.h). */
void hidx_overflow_free(hidx *h, uint64_t idx)
{
	hidx_bucket *b = hidx_overflow_at(h, idx);

	pthread_mutex_lock(&h->hx_ovf_lock);
	atomic_store_explicit(&b->hb_overflow, h->hx_ovf_free, memory_order_relaxed);
	h->hx_ovf_free = idx;
	h->hx_ovf_free_count++;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

int hidx_overflow_reserve(hidx *h, uint64_t n)
{
	int rc = 0;

	pthread_mutex_lock(&h->hx_ovf_lock);
	if (h->hx_ovf_next != 1 || n > HIDX_OVF_MAX_BUCKETS) {
		rc = -EINVAL;
		goto out;
	}
	while (h->hx_ovf_npages * HIDX_OVF_PAGE_BUCKETS < n) {
		hidx_bucket *mem = hidx_map(HIDX_OVF_PAGE_BYTES);

		if (!mem) {
			rc = -ENOMEM;   /* the pages mapped so far stay counted; hidx_reset unmaps them */
			goto out;
		}
		atomic_store_explicit(&h->hx_ovf_pages[h->hx_ovf_npages], mem, memory_order_release);
		h->hx_ovf_npages++;
	}
	h->hx_ovf_next = n + 1;
out:
	pthread_mutex_unlock(&h->hx_ovf_lock);
	return rc;
}

/* Only with no other thread using h (a failed image load): unmapping pages breaks invariant 3 for
 * any reader still walking a chain. */
void hidx_reset(hidx *h)
{
	/* A private anonymous mapping reads back as zeros after MADV_DONTNEED, and gives the memory back;
	 * memset is the fallback where the advice is refused. */
	if (madvise(h->hx_buckets, h->hx_main_bytes, MADV_DONTNEED) != 0)
		memset(h->hx_buckets, 0, h->hx_main_bytes);
	pthread_mutex_lock(&h->hx_ovf_lock);
	for (uint64_t p = 0; p < h->hx_ovf_npages; p++) {
		munmap(atomic_load_explicit(&h->hx_ovf_pages[p], memory_order_relaxed), HIDX_OVF_PAGE_BYTES);
		atomic_store_explicit(&h->hx_ovf_pages[p], NULL, memory_order_relaxed);
	}
	h->hx_ovf_npages = 0;
	h->hx_ovf_next = 1;
	h->hx_ovf_free = 0;
	h->hx_ovf_free_count = 0;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

/* Make sure tail has a successor: link a fresh bucket unless another thread already did. Either way
 * the caller rescans. 0 or -ENOMEM. */
static int hidx_chain_extend(hidx *h, hidx_bucket *tail)
{
	uint64_t idx, expect = 0;
	int rc;

	if (atomic_load_explicit(&tail->hb_overflow, memory_order_acquire))
		return 0;
	rc = hidx_overflow_alloc(h, &idx);
	if (rc)
		return rc;
	if (!atomic_compare_exchange_strong(&tail->hb_overflow, &expect, idx))
		hidx_overflow_free(h, idx);   /* reused by the next allocation instead of leaking */
	return 0;
}

/* ---- lookups and inserts ----------------------------------------------------------------------- */

int hidx_entry_find(hidx *h, uint64_t hash, hidx_slot *out /* out */)
{
	const uint64_t tag = hidx_tag_of(hash);
	hidx_bucket *b = hidx_bucket_of(h, hash);

	do {
		for (int i = 0; i < HIDX_BUCKET_ENTRIES; i++) {
			_Atomic uint64_t *e = &b->hb_entry[i];
			uint64_t w = atomic_load_explicit(e, memory_order_acquire);

			if ((w & (HIDX_TAG_MASK | HIDX_TENTATIVE)) == tag) {
				out->entry = e;
				out->word = w;
				return 0;
			}
		}
		b = hidx_bucket_next(h, b, memory_order_acquire);
	} while (b);
	return -ENOENT;
}

/* Is there a word with our tag, tentative or not, anywhere in the chain other than at mine?
 * Step d of the protocol: every load is seq_cst, see "Why it is safe". */
static bool hidx_chain_has_twin(const hidx *h, hidx_bucket *b, uint64_t tag,
				const _Atomic uint64_t *mine)
{
	do {
		for (int i = 0; i < HIDX_BUCKET_ENTRIES; i++) {
			_Atomic uint64_t *e = &b->hb_entry[i];

			if (e != mine && (atomic_load(e) & HIDX_TAG_MASK) == tag)
				return true;
		}
		b = hidx_bucket_next(h, b, memory_order_seq_cst);
	} while (b);
	return false;
}

/* Pause for a random number of spins below 2^min(attempt, 10), then yield the CPU once contention
 * has lasted long enough that the other claimant may be descheduled. Only ever reached when two
 * threads insert the same (bucket, tag) at the same instant. */
static void hidx_backoff(unsigned *attempt, uint64_t *rng)
{
	unsigned bits = SPW_MIN(*attempt, 10u);
	uint64_t x = *rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	for (uint64_t n = x & ((1ULL << bits) - 1); n; n--)
		hidx_cpu_relax();
	if (++*attempt > 16)
		sched_yield();
}

int hidx_entry_find_or_create(hidx *h, uint64_t hash, hidx_slot *out /* out */)
{
	const uint64_t tag = hidx_tag_of(hash);
	hidx_bucket *const head = hidx_bucket_of(h, hash);
	unsigned attempt = 0;
	/* Backoff jitter: the stack address differs between threads, which breaks their symmetry. */
	uint64_t rng = (hash ^ (uintptr_t)&attempt) | 1;

	for (;;) {
		_Atomic uint64_t *slot = NULL;
		hidx_bucket *b = head, *tail;
		bool pending_twin = false;
		uint64_t expect = 0;

		/* a. find, remembering the first free slot */
		do {
			for (int i = 0; i < HIDX_BUCKET_ENTRIES; i++) {
				_Atomic uint64_t *e = &b->hb_entry[i];
				uint64_t w = atomic_load_explicit(e, memory_order_acquire);

				if (w == 0) {
					if (!slot)
						slot = e;
				} else if ((w & HIDX_TAG_MASK) == tag) {
					if (!(w & HIDX_TENTATIVE)) {
						out->entry = e;
						out->word = w;
						return 0;
					}
					pending_twin = true;
				}
			}
			tail = b;
			b = hidx_bucket_next(h, b, memory_order_acquire);
		} while (b);

		if (pending_twin) {
			hidx_backoff(&attempt, &rng);
			continue;
		}
		/* b. chain full */
		if (!slot) {
			int rc = hidx_chain_extend(h, tail);

			if (rc)
				return rc;
			continue;
		}
		/* c. claim */
		if (!atomic_compare_exchange_strong(slot, &expect, tag | HIDX_TENTATIVE))
			continue;
		/* d. rescan; back out or confirm (invariant 2: plain stores, the slot is ours) */
		if (hidx_chain_has_twin(h, head, tag, slot)) {
			atomic_store_explicit(slot, 0, memory_order_release);
			hidx_backoff(&attempt, &rng);
			continue;
		}
		atomic_store_explicit(slot, tag, memory_order_release);
		out->entry = slot;
		out->word = tag;
		return 0;
	}
}

bool hidx_slot_cas(hidx_slot *s, uint64_t new_addr)
{
	uint64_t desired = (s->word & ~HIDX_ADDR_MASK) | (new_addr & HIDX_ADDR_MASK);

	if (atomic_compare_exchange_strong(s->entry, &s->word, desired)) {
		s->word = desired;
		return true;
	}
	return false;   /* s->word now holds what the entry holds */
}

void hidx_prefetch(hidx *h, uint64_t hash)
{
	__builtin_prefetch(hidx_bucket_of(h, hash), 0, 3);
}

/* ---- scan and clear ---------------------------------------------------------------------------- */

uint64_t hidx_scan(hidx *h, uint64_t cursor, uint64_t count, hidx_visit_fn fn, void *ctx)
{
	const uint64_t buckets = h->hx_mask + 1;
	uint64_t end;

	if (cursor >= buckets)
		return 0;
	/* count 0 still makes progress, so a caller's loop always ends */
	end = count >= buckets - cursor ? buckets : cursor + SPW_MAX(count, 1);
	for (uint64_t i = cursor; i < end; i++) {
		hidx_bucket *b = &h->hx_buckets[i];

		do {
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t w = atomic_load_explicit(&b->hb_entry[j], memory_order_acquire);

				if (!(w & HIDX_TENTATIVE) && (w & HIDX_ADDR_MASK))
					fn(ctx, w);
			}
			b = hidx_bucket_next(h, b, memory_order_acquire);
		} while (b);
	}
	return end < buckets ? end : 0;
}

/* Overflow buckets stay linked (invariant 3); only their entries become free. */
void hidx_clear_below(hidx *h, uint64_t addr)
{
	const uint64_t buckets = h->hx_mask + 1;

	for (uint64_t i = 0; i < buckets; i++) {
		hidx_bucket *b = &h->hx_buckets[i];

		do {
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				_Atomic uint64_t *e = &b->hb_entry[j];
				uint64_t w = atomic_load_explicit(e, memory_order_acquire);

				/* A failed CAS refreshes w: a publisher that moved the address to or
				 * above addr wins; one still below is cleared on the next turn. */
				while (w && !(w & HIDX_TENTATIVE) && (w & HIDX_ADDR_MASK) < addr &&
				       !atomic_compare_exchange_weak(e, &w, 0))
					;
			}
			b = hidx_bucket_next(h, b, memory_order_acquire);
		} while (b);
	}
}

/* ---- stats ------------------------------------------------------------------------------------- */

void hidx_stats_get(hidx *h, hidx_stats *out /* out */)
{
	out->buckets = h->hx_mask + 1;
	out->memory_bytes = h->hx_main_bytes;
	pthread_mutex_lock(&h->hx_ovf_lock);
	/* linked buckets only: those waiting on the free list were never published */
	out->overflow_buckets = h->hx_ovf_next - 1 - h->hx_ovf_free_count;
	out->overflow_bytes = h->hx_ovf_npages * HIDX_OVF_PAGE_BYTES;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}
