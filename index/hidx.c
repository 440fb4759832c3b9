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
 * Growth (hidx_grow). The main array doubles while other threads go on using it, FASTER's split of
 * a bucket into i and i + N, made so that no key has to be read and no thread ever waits for the
 * grower:
 *  - The bucket number is the hash's low base bits, then the low `grown` bits of the tag
 *    (hidx_bucket_no). Doubling takes the next tag bit, which every entry word carries: the split
 *    of bucket i sends each entry to i or i + N by that bit alone. The price is one tag bit less to
 *    tell the entries of one bucket apart per doubling, hence HIDX_GROW_MAX (9 bits are left).
 *  - The grower publishes the new table as the old one's ht_next, then splits every old bucket in
 *    order; then makes the new table current, waits for the helpers still copying (hx_helpers), and
 *    unmaps the old one once quiesce() says no thread still holds it (the log's epoch).
 *    hx_grow_mu keeps hidx_clear_below off the tables until no helper writes (a slot a clear
 *    freed must not get a copied value back): a clear that comes during a split leaves its limit
 *    for the grower, who runs it on the new table afterwards (a clear only gives slots back: an
 *    entry below Begin reads as absent already), so a FLUSHALL never waits for a split. An image
 *    save holds hx_grow_one, so no growth starts under it.
 *  - Splitting bucket i (hidx_split, which any thread may run; they help each other and the grower
 *    and all compute the same result): set FROZEN in the main bucket's overflow word; then freeze
 *    every slot of the chain (CAS; a word gets the tentative bit, a free slot or an entry without
 *    a record becomes HIDX_MOVED; a tentative claim is waited out, its owner resolves it in a few
 *    steps) and set FROZEN in every link word (a link CAS of 0 -> index then fails). Frozen words
 *    never change again. Then copy the frozen entries, in chain order, into the new buckets i and
 *    i + N, position k of a chain at bucket k / 7, slot k % 7, each by CAS from 0 (a helper that
 *    comes second finds its values there) and set SPLIT.
 *  - Users route (hidx_route): a main bucket without FROZEN is used as before; one with FROZEN is
 *    split (helped) and the operation goes on in ht_next. The new buckets i and i + N are used only
 *    after SPLIT, so nothing but the copy writes them before. An operation that began in a bucket
 *    which is frozen under it cannot go wrong: a lookup that misses looks at the flag again after
 *    its loads (FROZEN is set before the first slot is frozen, so a lookup that read a frozen slot
 *    sees it) and repeats in the next table; a claim or a CAS on a frozen slot fails, the insert
 *    routes again, and the log's failed publish restarts from the index (its CAS expects the word
 *    it found, and a frozen word differs). A confirmed entry with no record yet (tag|0) is dropped
 *    by the freeze, not copied: its creator's CAS fails and it creates the entry anew in the new
 *    table. Invariant 1 holds in the new table: one old chain had one entry per tag, and its tags go
 *    to one of the two halves each.
 *  - hidx_scan visits a frozen bucket through the two new buckets it splits into, so a scan that
 *    crosses a growth sees every entry; cursors stay valid, since the table only grows and keeps
 *    bucket i's keys in i or i + N. With hidx_scan's cursors (now's buckets) an entry may be seen
 *    twice (a cursor below N revisits i + N); hidx_scan_base numbers cursors in the buckets a walk
 *    began with and visits j, j + base, j + 2 base ... for cursor j: each entry once (KEYS).
 *
 * The overflow allocator (pages, the free list, pages given back) is hidx_ovf.c's.
 *
 * Sections: open/close, lookups and inserts, growth, scan and clear, stats.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "index/hidx_int.h"

/* hidx_entry_stripe (hidx.h) takes the lowest bucket bit: every table has at least two buckets. */
_Static_assert(HIDX_MIN_BUCKETS >= 2, "hidx_entry_stripe needs the bucket's lowest bit");

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

static uint64_t hidx_floor_pow2(uint64_t v)
{
	return v ? 1ULL << (63 - __builtin_clzll(v)) : 0;
}

/* Make t current (open, reshape, a growth's switch). */
static void hidx_set_cur(hidx *h, hidx_table *t)
{
	atomic_store(&h->hx_cur, t);
	atomic_store(&h->hx_nbuckets, t->ht_mask + 1);
	atomic_store(&h->hx_ngrown, t->ht_grown);
}

/* A zeroed main array of 2^bits buckets whose top `grown` bits come from the tag. */
static hidx_table *hidx_table_new(uint32_t bits, uint32_t grown)
{
	hidx_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->ht_mask = (1ULL << bits) - 1;
	t->ht_base_bits = bits - grown;
	t->ht_base_mask = (1ULL << t->ht_base_bits) - 1;
	t->ht_grown = grown;
	t->ht_grown_mask = (1ULL << grown) - 1;
	t->ht_bytes = (t->ht_mask + 1) * HIDX_BUCKET_BYTES;
	t->ht_buckets = hidx_map(t->ht_bytes);
	if (!t->ht_buckets) {
		free(t);
		return NULL;
	}
	if (t->ht_bytes >= HIDX_HUGEPAGE_MIN_BYTES)
		(void)madvise(t->ht_buckets, t->ht_bytes, MADV_HUGEPAGE);   /* a hint; may be off */
	return t;
}

static void hidx_table_free(hidx_table *t)
{
	if (t) {
		munmap(t->ht_buckets, t->ht_bytes);
		free(t);
	}
}

int hidx_open(hidx **out, uint64_t size_bytes)
{
	hidx *h;
	uint64_t buckets;

	if (!out)
		return -EINVAL;
	*out = NULL;
	buckets = SPW_MAX(hidx_floor_pow2(size_bytes / HIDX_BUCKET_BYTES), HIDX_MIN_BUCKETS);
	/* Bucket bits beyond 48 would overlap the tag and the address space cannot hold that many
	 * records anyway (growth stops there too: HIDX_GROW_MAX tag bits at most). */
	if (buckets > (1ULL << (HIDX_TAG_SHIFT - HIDX_GROW_MAX)))
		return -EINVAL;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->hx_ovf_next = 1;
	if (pthread_mutex_init(&h->hx_ovf_lock, NULL) != 0) {
		free(h);
		return -ENOMEM;
	}
	pthread_mutex_init(&h->hx_grow_one, NULL);
	pthread_mutex_init(&h->hx_grow_mu, NULL);
	hidx_table *t = hidx_table_new((uint32_t)__builtin_ctzll(buckets), 0);
	if (!t)
		goto fail;
	hidx_set_cur(h, t);
	h->hx_ovf_pages = hidx_map(HIDX_OVF_MAX_PAGES * sizeof(*h->hx_ovf_pages));   /* untouched = free */
	if (!h->hx_ovf_pages)
		goto fail;
	*out = h;
	return 0;
fail:
	hidx_close(h);
	return -ENOMEM;
}

void hidx_close(hidx *h)
{
	if (!h)
		return;
	hidx_overflow_close(h);
	hidx_table_free(atomic_load(&h->hx_cur));
	pthread_mutex_destroy(&h->hx_ovf_lock);
	pthread_mutex_destroy(&h->hx_grow_one);
	pthread_mutex_destroy(&h->hx_grow_mu);
	free(h);
}

/* Only with no other thread using h (a failed image load): unmapping pages breaks invariant 3 for
 * any reader still walking a chain. */
void hidx_reset(hidx *h)
{
	hidx_table *t = hidx_cur(h);

	/* A private anonymous mapping reads back as zeros after MADV_DONTNEED, and gives the memory back;
	 * memset is the fallback where the advice is refused. */
	if (madvise(t->ht_buckets, t->ht_bytes, MADV_DONTNEED) != 0)
		memset(t->ht_buckets, 0, t->ht_bytes);
	hidx_overflow_reset(h);
}

int hidx_reshape(hidx *h, uint64_t buckets, uint32_t grown)
{
	hidx_table *old = hidx_cur(h), *t;

	if (!buckets || (buckets & (buckets - 1)) || grown > HIDX_GROW_MAX ||
	    (buckets >> grown) < HIDX_MIN_BUCKETS || buckets > (1ULL << HIDX_TAG_SHIFT))
		return -EINVAL;
	if (old->ht_mask + 1 == buckets && old->ht_grown == grown)
		return 0;
	if (!(t = hidx_table_new((uint32_t)__builtin_ctzll(buckets), grown)))
		return -ENOMEM;
	hidx_set_cur(h, t);
	hidx_table_free(old);
	return 0;
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

static void hidx_split(hidx *h, hidx_table *t, uint64_t i);
static void hidx_clear_run(hidx *h);

/* The main bucket of hash in the newest table whose bucket is not frozen (note "Growth"): one
 * load of a word the caller reads next anyway when no growth runs. */
static inline hidx_bucket *hidx_route(hidx *h, uint64_t hash, hidx_table **tp)
{
	hidx_table *t = hidx_cur(h);

	for (;;) {
		uint64_t i = hidx_bucket_no(t, hash);
		hidx_bucket *b = &t->ht_buckets[i];

		if (SPW_LIKELY(!(atomic_load_explicit(&b->hb_overflow, memory_order_acquire) & HIDX_OVF_FROZEN))) {
			*tp = t;
			return b;
		}
		atomic_fetch_add_explicit(&h->hx_helped, 1, memory_order_relaxed);
		hidx_split(h, t, i);
		t = atomic_load_explicit(&t->ht_next, memory_order_acquire);
	}
}

static inline bool hidx_frozen(const hidx_bucket *head)
{
	return atomic_load_explicit(&((hidx_bucket *)head)->hb_overflow, memory_order_acquire) & HIDX_OVF_FROZEN;
}

/* The confirmed entry with tag in head's chain: 0 and *out, or -ENOENT. */
static inline int hidx_chain_find(hidx *h, hidx_bucket *head, uint64_t tag, hidx_slot *out)
{
	hidx_bucket *b = head;

	do {
		for (int i = 0; i < HIDX_BUCKET_ENTRIES; i++) {
			_Atomic uint64_t *e = &b->hb_entry[i];
			uint64_t w = atomic_load_explicit(e, memory_order_acquire);

			/* a frozen word has the tentative bit: never a match */
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

/* A lookup that met a growth: route (helping the split) and walk again until a miss is a miss. */
static __attribute__((noinline)) int hidx_entry_find_routed(hidx *h, uint64_t hash, hidx_slot *out)
{
	const uint64_t tag = hidx_tag_of(hash);
	hidx_table *t;

	for (;;) {
		hidx_bucket *head = hidx_route(h, hash, &t);

		if (hidx_chain_find(h, head, tag, out) == 0)
			return 0;
		if (!hidx_frozen(head))
			return -ENOENT;
	}
}

/* The hot path costs what it did before growth existed but the tag bits in the bucket number and
 * one look at the flags after a miss: a match on an unfrozen word is good whatever happens next
 * (note "Growth"), and a miss is a miss if the chain was not frozen under the walk. */
int hidx_entry_find(hidx *h, uint64_t hash, hidx_slot *out /* out */)
{
	const uint64_t tag = hidx_tag_of(hash);
	hidx_table *t = hidx_cur(h);
	hidx_bucket *head = &t->ht_buckets[hidx_bucket_no(t, hash)];

	if (SPW_LIKELY(hidx_chain_find(h, head, tag, out) == 0))
		return 0;
	if (SPW_LIKELY(!hidx_frozen(head)))
		return -ENOENT;
	return hidx_entry_find_routed(h, hash, out);
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
	unsigned attempt = 0;
	/* Backoff jitter: the stack address differs between threads, which breaks their symmetry. */
	uint64_t rng = (hash ^ (uintptr_t)&attempt) | 1;

	for (;;) {
		_Atomic uint64_t *slot = NULL;
		hidx_table *t;
		/* Routed afresh on every attempt: a claim that failed may have met a freeze. */
		hidx_bucket *const head = hidx_route(h, hash, &t);
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

		if (hidx_frozen(head))
			continue;   /* the chain is being split: go on in the next table */
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

uint64_t hidx_buckets(hidx *h)
{
	return atomic_load_explicit(&h->hx_nbuckets, memory_order_relaxed);
}

void hidx_prefetch(hidx *h, uint64_t hash)
{
	hidx_table *t = hidx_cur(h);

	__builtin_prefetch(&t->ht_buckets[hidx_bucket_no(t, hash)], 0, 3);
}

/* ---- growth (note "Growth") -------------------------------------------------------------------- */

/* Freeze one slot: after it, the word never changes. Returns the frozen word. */
static uint64_t hidx_freeze_slot(_Atomic uint64_t *e)
{
	unsigned spins = 0;

	for (;;) {
		uint64_t w = atomic_load(e);

		if (w & HIDX_TENTATIVE) {
			if (w & HIDX_ADDR_MASK)
				return w;   /* frozen already (an entry, or HIDX_MOVED) */
			/* a claim in progress: its owner confirms or backs out in a few steps */
			if (++spins > 64)
				sched_yield();
			else
				hidx_cpu_relax();
			continue;
		}
		uint64_t f = (w & HIDX_ADDR_MASK) ? w | HIDX_TENTATIVE : HIDX_MOVED;
		if (atomic_compare_exchange_strong(e, &w, f))
			return f;
	}
}

/* Put entry word w at position *pos of the chain that starts at *b (a bucket of the next table that
 * only the split of its old bucket writes), linking buckets as needed. Every helper places the same
 * words at the same positions, so a CAS that fails found the value there already. 0 or -ENOMEM. */
static int hidx_place(hidx *h, hidx_bucket **b, unsigned *pos, uint64_t w)
{
	if (*pos == HIDX_BUCKET_ENTRIES) {
		int rc = hidx_chain_extend(h, *b);

		if (rc)
			return rc;
		*b = hidx_bucket_next(h, *b, memory_order_acquire);
		*pos = 0;
	}
	uint64_t expect = 0;
	(void)atomic_compare_exchange_strong(&(*b)->hb_entry[*pos], &expect, w);
	++*pos;
	return 0;
}

/* Split bucket i of t into buckets i and i + N of t's next table. Any thread may run it, at once
 * with others: the result is the same. An allocation failure cannot be handed back to a reader in
 * the middle of a lookup, so it is retried; hidx_grow mapped, before the first freeze, as many
 * overflow buckets as the old chains had linked (and an eighth more), and the two halves of a
 * chain of a + b entries need max(0, ceil(a/7) - 1) + max(0, ceil(b/7) - 1) <= max(0,
 * ceil((a+b)/7) - 1), what it had, so only inserts made meanwhile can run the allocator dry. */
static void hidx_split(hidx *h, hidx_table *t, uint64_t i)
{
	hidx_bucket *head = &t->ht_buckets[i];
	hidx_table *n = atomic_load_explicit(&t->ht_next, memory_order_acquire);

	if (atomic_load_explicit(&head->hb_overflow, memory_order_acquire) & HIDX_OVF_SPLIT)
		return;
	/* Counted before SPLIT is looked at again (seq_cst both): the grower waits for the count to
	 * drop to 0 after the last SPLIT, so a helper that comes later sees SPLIT and writes nothing. */
	atomic_fetch_add(&h->hx_helpers, 1);
	if (atomic_load(&head->hb_overflow) & HIDX_OVF_SPLIT) {
		atomic_fetch_sub(&h->hx_helpers, 1);
		return;
	}
	atomic_fetch_or(&head->hb_overflow, HIDX_OVF_FROZEN);
	for (hidx_bucket *b = head; b;) {
		for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++)
			(void)hidx_freeze_slot(&b->hb_entry[j]);
		uint64_t link = b == head ? atomic_load(&b->hb_overflow) : atomic_fetch_or(&b->hb_overflow, HIDX_OVF_FROZEN);
		link &= HIDX_OVF_IDX_MASK;
		b = link ? hidx_overflow_at(h, link) : NULL;
	}
	for (;;) {
		hidx_bucket *dst[2] = { &n->ht_buckets[i], &n->ht_buckets[i + t->ht_mask + 1] };
		unsigned pos[2] = { 0, 0 };
		int rc = 0;

		for (hidx_bucket *b = head; b && !rc; b = hidx_bucket_next(h, b, memory_order_acquire)) {
			for (int j = 0; j < HIDX_BUCKET_ENTRIES && !rc; j++) {
				uint64_t w = atomic_load_explicit(&b->hb_entry[j], memory_order_acquire);

				if (!(w & HIDX_TAG_MASK))
					continue;   /* HIDX_MOVED */
				unsigned half = (unsigned)(w >> (HIDX_TAG_SHIFT + t->ht_grown)) & 1;
				rc = hidx_place(h, &dst[half], &pos[half], w & ~HIDX_TENTATIVE);
			}
		}
		if (!rc)
			break;
		sched_yield();
	}
	atomic_fetch_or(&head->hb_overflow, HIDX_OVF_SPLIT);
	atomic_fetch_sub(&h->hx_helpers, 1);
}

int hidx_grow(hidx *h, void (*quiesce)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&h->hx_grow_one);
	hidx_table *t = hidx_cur(h), *n = NULL;
	int rc = -ENOSPC;

	if (t->ht_grown >= HIDX_GROW_MAX)
		goto out;
	uint64_t linked, bytes;
	hidx_overflow_stats(h, &linked, &bytes);
	rc = -ENOMEM;
	/* the copy's overflow buckets (hidx_split), with room for the inserts made meanwhile */
	if (hidx_overflow_prepare(h, linked + linked / 8 + 64) < 0)
		goto out;
	if (!(n = hidx_table_new(t->ht_base_bits + t->ht_grown + 1, t->ht_grown + 1)))
		goto out;
	/* both arrays are counted from here to the retirement: the new one while it fills */
	atomic_store(&h->hx_old_bytes, n->ht_bytes);
	pthread_mutex_lock(&h->hx_grow_mu);
	atomic_store(&t->ht_next, n);   /* before the first FROZEN: whoever sees one finds n */
	for (uint64_t i = 0; i <= t->ht_mask; i++)
		hidx_split(h, t, i);
	/* the old array's bytes first: a moment's undercount, never a count of both twice */
	atomic_store(&h->hx_old_bytes, t->ht_bytes);
	hidx_set_cur(h, n);
	/* A helper still copying could otherwise write a value into a slot of n that a clear freed
	 * meanwhile. Helpers wait on nothing but a tentative claim or the allocator: a short wait. */
	for (unsigned spins = 0; atomic_load(&h->hx_helpers) != 0;)
		if (++spins > 64)
			sched_yield();
	pthread_mutex_unlock(&h->hx_grow_mu);
	hidx_clear_run(h);   /* the clears that came during the split */
	/* Threads that loaded t before the switch still walk it (and find SPLIT, so go to n). */
	if (quiesce)
		quiesce(ctx);
	hidx_overflow_retire(h, t);
	hidx_table_free(t);
	hidx_overflow_grew(h);
	atomic_store(&h->hx_old_bytes, 0);
	atomic_fetch_add(&h->hx_grows, 1);
	rc = 0;
out:
	pthread_mutex_unlock(&h->hx_grow_one);
	return rc;
}

/* ---- scan and clear ---------------------------------------------------------------------------- */

/* Bucket i of t and its chain; a frozen one through the two buckets it splits into. The words of a
 * walk are handed to fn only once the chain is known not to have frozen under it, so that no entry
 * is reported twice by one call (the next table would give it again). */
static void hidx_scan_bucket(hidx *h, hidx_table *t, uint64_t i, hidx_visit_fn fn, void *ctx)
{
	hidx_bucket *head = &t->ht_buckets[i];

	if (!hidx_frozen(head)) {
		uint64_t stack[64], *w = stack, cap = SPW_ARRAY_LEN(stack), n = 0;
		hidx_bucket *b = head;

		do {
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t x = atomic_load_explicit(&b->hb_entry[j], memory_order_acquire);

				if ((x & HIDX_TENTATIVE) || !(x & HIDX_ADDR_MASK))
					continue;
				if (n == cap) {
					/* a chain past 64 entries: rare, so the heap; without memory, what
					 * was seen goes out now (a freeze after it may repeat those) */
					uint64_t *nw = malloc(2 * cap * sizeof(*nw));
					if (nw) {
						memcpy(nw, w, n * sizeof(*nw));
						if (w != stack)
							free(w);
						w = nw;
						cap *= 2;
					} else {
						for (uint64_t k = 0; k < n; k++)
							fn(ctx, w[k]);
						n = 0;
					}
				}
				w[n++] = x;
			}
			b = hidx_bucket_next(h, b, memory_order_acquire);
		} while (b);
		bool frozen = hidx_frozen(head);
		if (!frozen)
			for (uint64_t k = 0; k < n; k++)
				fn(ctx, w[k]);
		if (w != stack)
			free(w);
		if (SPW_LIKELY(!frozen))
			return;
		/* frozen under the walk: its entries are all in the next table's two buckets */
	}
	hidx_split(h, t, i);
	hidx_table *n = atomic_load_explicit(&t->ht_next, memory_order_acquire);
	hidx_scan_bucket(h, n, i, fn, ctx);
	hidx_scan_bucket(h, n, i + t->ht_mask + 1, fn, ctx);
}

uint64_t hidx_scan_base(hidx *h, uint64_t base, uint64_t cursor, uint64_t count, hidx_visit_fn fn,
			void *ctx)
{
	hidx_table *t = hidx_cur(h);
	const uint64_t buckets = t->ht_mask + 1;
	uint64_t end;

	/* the table only doubles, so a base from earlier divides buckets; 0 (or a base from a
	 * table that was larger: a reshape) numbers the buckets as they are now */
	if (base == 0 || base > buckets)
		base = buckets;
	if (cursor >= base)
		return 0;
	/* count 0 still makes progress, so a caller's loop always ends */
	end = count >= base - cursor ? base : cursor + SPW_MAX(count, 1);
	for (uint64_t j = cursor; j < end; j++)
		for (uint64_t i = j; i < buckets; i += base)
			hidx_scan_bucket(h, t, i, fn, ctx);
	return end < base ? end : 0;
}

uint64_t hidx_scan(hidx *h, uint64_t cursor, uint64_t count, hidx_visit_fn fn, void *ctx)
{
	return hidx_scan_base(h, 0, cursor, count, fn, ctx);
}

/* Overflow buckets stay linked (invariant 3); only their entries become free. Off a growth's
 * split (hx_grow_mu held): a freed slot that the split had copied would come back in the next
 * table. */
static void hidx_clear_locked(hidx *h, uint64_t addr)
{
	hidx_table *t = hidx_cur(h);
	const uint64_t buckets = t->ht_mask + 1;

	for (uint64_t i = 0; i < buckets; i++) {
		hidx_bucket *b = &t->ht_buckets[i];

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

/* Run the pending clear if hx_grow_mu is free; whoever holds it runs this after unlocking, so a
 * limit left in hx_clear_pending is never forgotten (the fences order "leave the limit, try the
 * lock" against "unlock, look for a limit"). */
static void hidx_clear_run(hidx *h)
{
	atomic_thread_fence(memory_order_seq_cst);
	while (atomic_load(&h->hx_clear_pending) && pthread_mutex_trylock(&h->hx_grow_mu) == 0) {
		uint64_t a = atomic_exchange(&h->hx_clear_pending, 0);

		if (a)
			hidx_clear_locked(h, a);
		pthread_mutex_unlock(&h->hx_grow_mu);
		atomic_thread_fence(memory_order_seq_cst);
	}
}

/* Never waits: while the mutex is held (a growth's split, or another clear) the limit is left for
 * its holder, who runs it after unlocking. The clear is slot reuse only (an entry below Begin reads
 * as absent already), so it may come a little later; with nobody holding the mutex it runs before
 * this returns. */
void hidx_clear_below(hidx *h, uint64_t addr)
{
	uint64_t cur = atomic_load(&h->hx_clear_pending);

	while (cur < addr && !atomic_compare_exchange_weak(&h->hx_clear_pending, &cur, addr))
		;
	hidx_clear_run(h);
}

/* ---- stats ------------------------------------------------------------------------------------- */

void hidx_stats_get(hidx *h, hidx_stats *out /* out */)
{
	out->buckets = atomic_load(&h->hx_nbuckets);
	out->grown = atomic_load(&h->hx_ngrown);
	out->can_grow = out->grown < HIDX_GROW_MAX;
	out->grows = atomic_load(&h->hx_grows);
	out->helped_splits = atomic_load(&h->hx_helped);
	out->memory_bytes = out->buckets * HIDX_BUCKET_BYTES + atomic_load(&h->hx_old_bytes);
	hidx_overflow_stats(h, &out->overflow_buckets, &out->overflow_bytes);
}
