/*
 * hlog.c - the hybrid log: records in a circular buffer of page frames, found through the hash
 * index, updated in place while mutable and by read-copy-update after that (Tsavorite's design).
 *
 * NOTES ON THE DESIGN OF THE LOG
 *
 *  1. Addresses. One 48-bit logical address space; 0 = none, the first 64 bytes of page 0 are never
 *     allocated, so the first record is at HLOG_FIRST_ADDRESS. page = addr >> page_bits, offset =
 *     addr & (page_bytes - 1); page_bytes is a power of two in [4 KiB, 1 GiB]. Regions:
 *
 *      Begin        Head       SafeReadOnly    ReadOnly                  Tail
 *        |            |              |             |                       |
 *     ...[ truncated  ][ device only ][ read-only   ][ fuzzy  ][ mutable     ][ unallocated
 *                      (device tier)   RCU, no locks  retry     in place under the record lock
 *
 *     Begin <= Head <= SafeReadOnly <= ReadOnly <= Tail, and SafeHead <= Head. Every marker only
 *     moves up (marker_advance: CAS to the max). The one exception to the ordering is transient:
 *     hlog_flush_all moves Head at once and SafeReadOnly in its epoch action; nothing compares
 *     those two (only addresses >= Begin >= Head are ever classified).
 *
 *  2. Who moves what:
 *       Tail         log_alloc (fetch_add); the page turn stores (page+1, 0)      [log_page_turn]
 *       ReadOnly     page turn: max(RO, start(new page) - mutable_pages * page)   [log_page_turn]
 *                    flush: max(RO, new Head)                                      [hlog_flush_all]
 *       SafeReadOnly epoch action after either of those                  [log_ro_safe, log_flush_release]
 *       FlushedUntil = SafeReadOnly. There is no device: a page "flushes" the moment no thread can
 *                    still write it, which is SafeReadOnly, not ReadOnly (an in-place writer with an
 *                    old epoch may still be inside a page just below ReadOnly). The device tier
 *                    replaces this with the completion of real page writes.
 *       Begin        flush: the tail address                                       [hlog_flush_all]
 *       Head         flush: the start of Begin's page. With no device nothing else moves it, and
 *                    Head <= Begin, so the "below Head: HLOG_PENDING" branch of the chain walk is
 *                    dead code for now                                             [hlog_flush_all]
 *       SafeHead     epoch action after a Head move, once its frames are released [log_flush_release]
 *
 *  3. Frames. The in-memory window is max_pages = memory / page_bytes pages (>= 2). Page p lives in
 *     frame slot p & (frame_slots - 1), frame_slots = max_pages rounded up to a power of two, and
 *     the frames are one reservation of address space (mmap, MAP_NORESERVE), so address -> pointer
 *     is mem + (addr & window_mask): one AND, no frame table, no division. The kernel materialises
 *     a frame's memory when it is first written, so RSS follows the data; AllocatedPageCount counts
 *     slots holding a live page. The memory cap is max_pages, not frame_slots: page p may be opened
 *     only when page p - max_pages lies wholly below SafeHead, and the page that last used p's slot,
 *     p - frame_slots, is older still. Released frames are returned to the kernel with
 *     MADV_DONTNEED, which also makes them read as zero when reused.
 *
 *  4. Tail. One word: page << (page_bits + 16) | offset. The offset field has 16 spare bits so that
 *     the overshoot of threads adding past a page end (each adds at most once per page turn, at most
 *     one page each) can never carry into the page number; a plain page << 32 would overflow with
 *     1 GiB pages. Allocation is fetch_add(size):
 *       offset + size <= page_bytes          the record is at (page, offset).
 *       offset <= page_bytes < offset + size this thread owns the turn to page + 1 (exactly one).
 *       offset > page_bytes                  someone else owns it: spin (pause, then sched_yield)
 *                                            until the page changes or the tail is restored.
 *     The owner checks the frame (note 3). No room: it stores the tail back to (page, offset) (every
 *     thread that added meanwhile is spinning and used nothing) and fails with SPW_E_LOG_FULL, or
 *     with an internal retry when a flush has already moved Head far enough and only the epoch
 *     action is missing. Room: it marks the frame live, advances ReadOnly, queues the SafeReadOnly
 *     action, then publishes (page + 1, 0). Spinners do not refresh the epoch: they may hold record
 *     pointers, and nothing they could unblock is waited for (the owner never waits).
 *
 *  5. Records: see the layout and bits in hlog_int.h. A record never spans pages; the largest is
 *     page_bytes - 64 so that page 0 holds one too. Trailing page bytes stay zero.
 *
 *  6. Publishing. A new record is written with REC_SEALED (not published), then the index entry is
 *     CASed from the word the chain walk started at to the new address; on success the record's
 *     info is stored as VALID (release). On failure the record stays sealed-and-invalid forever
 *     (garbage for the page walker) and the operation restarts from the index lookup.
 *     Deviation from "readers skip invalid records": a record reachable from the index has always
 *     won its CAS (a loser is unreachable: nothing points to it), so an invalid record met on a
 *     chain is one being published right now. Walkers wait the few instructions until it is valid.
 *     Skipping it to an older version would lose updates: an RMW would plan from the older value
 *     and its CAS, expecting the very entry that the in-flight record now holds, would succeed.
 *
 *  7. Lookup (hlog_read, log_update): entry = hidx_entry_find(hash); walk from its address while
 *     addr >= Begin: compare key length and bytes; the first match is the newest version. Tombstone
 *     = absent; expired (has_expiry and expire_at < now, Redis's rule: a key is still there in the
 *     millisecond it expires) = absent and removed lazily (note 9).
 *
 *  8. Updates (log_update), by the region of the newest version R (snapshot of the markers):
 *       R >= ReadOnly        lock R exclusive (CAS on info). If R is sealed, unlock and restart. Plan
 *                            under the lock. Delete: tombstone bit in place. Write: in place when
 *                            align8 size and expiry presence are unchanged (val_len and expire_at are
 *                            rewritten); this also revives a tombstoned or expired R. Else RCU: the
 *                            new record is appended and CASed while R stays locked, then R is sealed
 *                            and unlocked, so an in-place writer cannot slip into the old version.
 *       SafeRO <= R < RO     fuzzy: some thread with an old epoch may still be writing R in place;
 *                            refresh the epoch and restart (counted in retries).
 *       R < SafeReadOnly     immutable: no lock; plan from R, append the new version (or a
 *                            tombstone), CAS. Also when R is absent.
 *     Readers lock mutable (>= SafeRO) records shared while they call back; records below SafeRO
 *     are read without any atomic RMW. Why this is safe: SafeRO passes R only after every thread
 *     that might have classified R as mutable has refreshed, and threads refresh only between
 *     operations or after dropping everything (restart paths).
 *     R is the newest version while we hold its exclusive lock and it is not sealed: in the mutable
 *     region every newer version is created under R's lock (RCU seals R; a tombstone is set in
 *     place; revival is in place), and nobody appends over an R that it sees as immutable until R
 *     is below SafeRO, which waits for us.
 *     Locks are never held across an epoch refresh, a wait on another record or a page-turn wait
 *     by the turn owner, so there is no cycle: a lock holder only ever waits for a turn owner, and
 *     a turn owner waits for nobody.
 *
 *  9. Counters. Per session, on the session's own cache line, written only by its thread: key and
 *     expire deltas, and stats. A key counts while its newest version is not a tombstone (expired
 *     keys count until removed, as in Redis). log_count applies (old state, new state): +1 when a
 *     key goes from absent/tombstone to live, -1 on delete; an expired old version counts one
 *     "expired" removal. A read or RMW that meets an expired version removes it (tombstone in place
 *     or appended, best effort: LOG_FULL leaves it for later), so DBSIZE drops as in Redis's lazy
 *     expiry. hlog_key_count = sum of deltas - base; hlog_flush_all sets base to the sum, which is
 *     exact when no session writes during the flush; a write that races the flush may be counted
 *     once too often or too few (a write that lands below the new Begin is not counted).
 *
 * 10. Epoch (epoch.c). A session protects before a batch, refreshes between batches. Inside an
 *     operation the log refreshes only on restart paths, where it holds no lock and no pointer. The
 *     epoch actions: log_ro_safe (SafeReadOnly, FlushedUntil) after a page turn moved ReadOnly;
 *     log_flush_release (SafeReadOnly, release frames, SafeHead) after a flush. A full drain list
 *     makes the page turn back out with an internal retry (the op refreshes, which usually runs the
 *     queued actions, and tries again); a page turn that finds ReadOnly ahead of SafeReadOnly queues
 *     the action again, so a failed attempt is never forgotten.
 *
 * 11. hlog_scan walks hidx_scan's entries; for each chain it reports each key's newest version only
 *     (a key seen nearer the head hides the older ones, tombstones and expired versions hide too).
 *     A sealed version is still reported: its value was current when the chain was read, and
 *     skipping it would lose a key updated during the scan.
 *
 * 12. hlog_flush_all: wait out a page turn in flight, Begin = tail, hidx_clear_below(Begin), Head
 *     and ReadOnly to Begin's page start, counters' base, then an epoch action that advances
 *     SafeReadOnly, releases the frames of the pages below the new Head (MADV_DONTNEED, under
 *     release_mu so that two flushes never release a frame a page turn already reused) and only
 *     then publishes SafeHead, which is what lets a page turn reuse them. Operations racing the
 *     flush land before or after it; a record they publish below Begin is simply invisible.
 *
 * 13. Later tiers (REFERENCE.md): pages below SafeReadOnly get flushed asynchronously and
 *     FlushedUntil follows the completions; eviction moves Head (bounded by FlushedUntil) instead of
 *     failing with LOG_FULL, and log_flush_release's frame release becomes the eviction action; the
 *     chain walk's "addr < Head" branch returns HLOG_PENDING; REC_VERSION bits carry the checkpoint
 *     version. hlog_records_visit is the page walker recovery and compaction will use.
 */
#include "log/hlog.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log/epoch_int.h"
#include "log/hlog_int.h"

#define LOG_MIN_PAGE_BITS 12
#define LOG_MAX_PAGE_BITS 30
#define LOG_MAX_SESSIONS 4096        /* keeps tail overshoot far below the 16 spare offset bits */
#define LOG_E_RETRY (-EAGAIN)        /* internal only: drop everything, refresh, restart */

/* ---------------- small helpers ---------------- */

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

static inline uint64_t load_acq(_Atomic uint64_t *p)
{
	return atomic_load_explicit(p, memory_order_acquire);
}

/* Raise a marker to at least v. true when this call moved it. */
static bool marker_advance(_Atomic uint64_t *m, uint64_t v)
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

static inline uint64_t tail_page(const hlog *l, uint64_t w) { return w >> l->tail_shift; }
static inline uint64_t tail_off(const hlog *l, uint64_t w) { return w & l->tail_off_mask; }

/* The tail word as an address; an overshot offset means "the end of that page". */
static inline uint64_t tail_address(const hlog *l, uint64_t w)
{
	return (tail_page(l, w) << l->page_bits) + SPW_MIN(tail_off(l, w), l->page_bytes);
}

static inline bool rec_expired(const log_rec *r, uint64_t info, int64_t now_ms)
{
	return (info & REC_HAS_EXPIRY) && rec_expire_at(r, info) < now_ms;
}

/* ---------------- record locks (info word) ---------------- */

/* Wait until a reachable record is published (note 6); returns its info. */
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
static uint64_t rec_lock_shared(log_rec *r, bool allow_sealed)
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
 * or 0 without a lock when the record is sealed. While X is held nobody else changes info, so the
 * holder edits its copy and publishes it with the unlock store. */
static uint64_t rec_lock_excl(log_rec *r)
{
	unsigned spins = 0;
	uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
	for (;;) {
		if (info & REC_SEALED)
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

static inline void rec_unlock_excl(log_rec *r, uint64_t info)
{
	atomic_store_explicit(&r->info, info & ~REC_LOCK_X, memory_order_release);
}

/* ---------------- frames and page turns ---------------- */

static void log_frame_use(hlog *l, uint64_t page)
{
	uint64_t slot = page & (l->frame_slots - 1);
	if (!atomic_load_explicit(&l->frame_used[slot], memory_order_relaxed)) {
		atomic_store_explicit(&l->frame_used[slot], 1, memory_order_relaxed);
		atomic_fetch_add(&l->allocated_pages, 1);
	}
}

static void log_frame_release(hlog *l, uint64_t page)
{
	uint64_t slot = page & (l->frame_slots - 1);
	if (!atomic_load_explicit(&l->frame_used[slot], memory_order_relaxed))
		return;
	/* Anonymous private memory: DONTNEED frees it and the next touch reads zeros. */
	madvise(l->mem + slot * l->page_bytes, l->page_bytes, MADV_DONTNEED);
	atomic_store_explicit(&l->frame_used[slot], 0, memory_order_relaxed);
	atomic_fetch_sub(&l->allocated_pages, 1);
}

/* Epoch action after a page turn moved ReadOnly to ro: every thread has seen it. */
static void log_ro_safe(void *ctx, uint64_t ro)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, ro);
	marker_advance(&l->flushed_until, ro);
}

/* Epoch action after a flush moved Head to head: nobody can reach a record below Begin any more,
 * so the frames of the pages below head are free. Release them, then publish SafeHead (note 12). */
static void log_flush_release(void *ctx, uint64_t head)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, head);
	marker_advance(&l->flushed_until, head);
	pthread_mutex_lock(&l->release_mu);
	uint64_t old = atomic_load(&l->safe_head);
	if (head > old) {
		uint64_t first = old >> l->page_bits, end = head >> l->page_bits;
		/* Older pages of the same slots were released when SafeHead passed them. */
		if (end - first > l->frame_slots)
			first = end - l->frame_slots;
		for (uint64_t p = first; p < end; p++)
			log_frame_release(l, p);
		marker_advance(&l->safe_head, head);
	}
	pthread_mutex_unlock(&l->release_mu);
}

/* Called by the one thread whose fetch_add crossed the end of page (note 4). 0 when the tail now
 * stands at (page + 1, 0), else the tail is restored to (page, off) and SPW_E_LOG_FULL or
 * LOG_E_RETRY is returned. */
static int log_page_turn(hlog *l, uint64_t page, uint64_t off)
{
	uint64_t np = page + 1;
	int rc;

	if (np >= l->page_limit) {
		rc = SPW_E_LOG_FULL;
		goto fail;
	}
	if (np >= l->max_pages) {
		/* The window may hold max_pages pages: np - max_pages must end at or below SafeHead. */
		uint64_t need = (np - l->max_pages + 1) << l->page_bits;
		if (load_acq(&l->safe_head) < need) {
			rc = load_acq(&l->head) >= need ? LOG_E_RETRY : SPW_E_LOG_FULL;
			goto fail;
		}
	}
	log_frame_use(l, np);
	if (np > l->mutable_pages)
		marker_advance(&l->read_only, (np - l->mutable_pages) << l->page_bits);
	uint64_t ro = atomic_load(&l->read_only);
	/* ReadOnly is stored before the bump, so the action runs only after all threads saw it. */
	if (ro > atomic_load(&l->safe_ro) && epoch_bump(l->ep, log_ro_safe, l, ro) < 0) {
		rc = LOG_E_RETRY;
		goto fail;
	}
	atomic_store_explicit(&l->tail, np << l->tail_shift, memory_order_release);
	return 0;
fail:
	atomic_store_explicit(&l->tail, (page << l->tail_shift) | off, memory_order_release);
	return rc;
}

/* Reserve size bytes (a multiple of 8, <= max_rec) at the tail. The address, or SPW_E_LOG_FULL or
 * LOG_E_RETRY. The caller must write a record header there before anything else. */
static int64_t log_alloc(hlog *l, uint64_t size)
{
	unsigned spins = 0;
	for (;;) {
		uint64_t w = atomic_fetch_add(&l->tail, size);
		uint64_t page = tail_page(l, w), off = tail_off(l, w);
		if (SPW_LIKELY(off + size <= l->page_bytes))
			return (int64_t)((page << l->page_bits) + off);
		if (off <= l->page_bytes) {
			int rc = log_page_turn(l, page, off);
			if (rc < 0)
				return rc;
			continue;
		}
		for (;;) {
			uint64_t t = load_acq(&l->tail);
			if (tail_page(l, t) != page || tail_off(l, t) <= l->page_bytes)
				break;
			log_spin(&spins);
		}
	}
}

/* ---------------- chains ---------------- */

/* Walk the chain from addr (newest first) for key k. The address of the newest version of k (may be
 * a tombstone, may not be published yet: see rec_wait_valid) with *out and *info_out set, or 0. */
static inline uint64_t log_chain_find(hlog *l, uint64_t addr, uint64_t begin, const hlog_key *k,
		log_rec **out, uint64_t *info_out)
{
	while (addr >= begin) {
		if (SPW_UNLIKELY(addr < load_acq(&l->head)))
			return 0;   /* on the device only: HLOG_PENDING once the device tier exists */
		log_rec *r = hlog_rec_at(l, addr);
		uint64_t info = atomic_load_explicit(&r->info, memory_order_acquire);
		if (r->key_len == k->len && memcmp(rec_key(r, info), k->ptr, k->len) == 0) {
			*out = r;
			*info_out = info;
			return addr;
		}
		addr = info & REC_PREV_MASK;
	}
	return 0;
}

/* ---------------- open / close / sessions ---------------- */

int hlog_open(hlog **out, const hlog_config *cfg)
{
	hlog *l = NULL;
	int rc = -EINVAL;

	if (!cfg || cfg->page_bytes < (1ULL << LOG_MIN_PAGE_BITS) || cfg->page_bytes > (1ULL << LOG_MAX_PAGE_BITS)
			|| (cfg->page_bytes & (cfg->page_bytes - 1)) != 0)
		return -EINVAL;
	if (cfg->memory_bytes / cfg->page_bytes < 2 || cfg->mutable_percent < 0 || cfg->mutable_percent > 100
			|| cfg->max_sessions < 1 || cfg->max_sessions > LOG_MAX_SESSIONS)
		return -EINVAL;

	l = aligned_alloc(SPW_CACHELINE, SPW_ALIGN_UP(sizeof(*l), SPW_CACHELINE));
	if (!l)
		return -ENOMEM;
	memset(l, 0, sizeof(*l));
	l->mem = MAP_FAILED;
	pthread_mutex_init(&l->release_mu, NULL);

	l->page_bytes = cfg->page_bytes;
	l->page_bits = (uint32_t)__builtin_ctzll(cfg->page_bytes);
	l->tail_shift = l->page_bits + 16;
	l->tail_off_mask = (1ULL << l->tail_shift) - 1;
	l->max_pages = cfg->memory_bytes / cfg->page_bytes;
	l->frame_slots = 1;
	while (l->frame_slots < l->max_pages)
		l->frame_slots <<= 1;
	l->mutable_pages = SPW_MAX(1, l->max_pages * (uint64_t)cfg->mutable_percent / 100);
	l->page_limit = 1ULL << (48 - l->page_bits);
	l->max_rec = l->page_bytes - HLOG_FIRST_ADDRESS;
	l->max_sessions = cfg->max_sessions;
	l->mem_bytes = l->frame_slots * l->page_bytes;
	l->window_mask = l->mem_bytes - 1;

	if ((rc = hidx_open(&l->idx, cfg->index_bytes)) < 0)
		goto fail;
	hidx_stats st;
	hidx_stats_get(l->idx, &st);
	l->buckets = st.buckets;
	if ((rc = epoch_open(&l->ep, cfg->max_sessions)) < 0)
		goto fail;
	rc = -ENOMEM;
	l->mem = mmap(NULL, l->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (l->mem == MAP_FAILED)
		goto fail;
	l->frame_used = calloc(l->frame_slots, sizeof(*l->frame_used));
	l->sessions = aligned_alloc(SPW_CACHELINE, (size_t)cfg->max_sessions * sizeof(hlog_session));
	if (!l->frame_used || !l->sessions)
		goto fail;
	memset(l->sessions, 0, (size_t)cfg->max_sessions * sizeof(hlog_session));
	for (int i = 0; i < cfg->max_sessions; i++) {
		l->sessions[i].l = l;
		l->sessions[i].id = i;
	}

	atomic_store(&l->begin, HLOG_FIRST_ADDRESS);
	atomic_store(&l->head, HLOG_FIRST_ADDRESS);
	atomic_store(&l->safe_head, HLOG_FIRST_ADDRESS);
	atomic_store(&l->safe_ro, HLOG_FIRST_ADDRESS);
	atomic_store(&l->read_only, HLOG_FIRST_ADDRESS);
	atomic_store(&l->flushed_until, HLOG_FIRST_ADDRESS);
	atomic_store(&l->tail, HLOG_FIRST_ADDRESS);       /* page 0, offset 64 */
	log_frame_use(l, 0);
	*out = l;
	return 0;
fail:
	hlog_close(l);
	return rc;
}

void hlog_close(hlog *l)
{
	if (!l)
		return;
	if (l->mem != MAP_FAILED)
		munmap(l->mem, l->mem_bytes);
	hidx_close(l->idx);
	epoch_close(l->ep);
	free((void *)l->frame_used);
	free(l->sessions);
	pthread_mutex_destroy(&l->release_mu);
	free(l);
}

int hlog_session_open(hlog *l, hlog_session **out)
{
	/* Counters are never reset: a reopened slot keeps contributing its history to the sums. */
	for (int i = 0; i < l->max_sessions; i++) {
		int expect = 0;
		if (atomic_compare_exchange_strong(&l->sessions[i].in_use, &expect, 1)) {
			l->sessions[i].now_ms = spw_time_ms();
			*out = &l->sessions[i];
			return 0;
		}
	}
	return -EBUSY;
}

void hlog_session_close(hlog_session *s)
{
	if (!s)
		return;
	epoch_unprotect(s->l->ep, s->id);
	atomic_store(&s->in_use, 0);
}

void hlog_session_protect(hlog_session *s) { epoch_protect(s->l->ep, s->id); }
void hlog_session_unprotect(hlog_session *s) { epoch_unprotect(s->l->ep, s->id); }
void hlog_session_refresh(hlog_session *s) { epoch_refresh(s->l->ep, s->id); }
void hlog_session_set_now(hlog_session *s, int64_t now_ms) { s->now_ms = now_ms; }

/* Restart path of an operation that holds nothing: count it, let the epoch move, back off. */
static void log_retry(hlog_session *s, unsigned *spins)
{
	ctr_add(&s->retries, 1);
	epoch_refresh(s->l->ep, s->id);
	log_spin(spins);
}

/* ---------------- read ---------------- */

enum { ST_ABSENT, ST_TOMB, ST_EXPIRED, ST_LIVE };
enum { OP_RMW, OP_UPSERT, OP_DELETE, OP_EXPIRE };

typedef struct log_op {
	int kind;
	const hlog_rmw_ops *ops;     /* OP_RMW */
	void *ctx;
	const void *val;             /* OP_UPSERT */
	size_t len;
	int64_t expire_ms;
} log_op;

static int log_update(hlog_session *s, const hlog_key *k, const log_op *op);

int hlog_read(hlog_session *s, const hlog_key *k, hlog_read_fn fn, void *ctx)
{
	hlog *l = s->l;
	unsigned spins = 0;
	for (;;) {
		hidx_slot slot;
		log_rec *r;
		uint64_t info;
		if (hidx_entry_find(l->idx, k->hash, &slot) != 0)
			return HLOG_NOTFOUND;
		uint64_t a = log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info);
		if (!a)
			return HLOG_NOTFOUND;
		info = rec_wait_valid(r, info);
		bool locked = a >= load_acq(&l->safe_ro);
		if (locked) {
			/* Mutable or fuzzy: an in-place writer may be at work; read under a shared lock. */
			info = rec_lock_shared(r, false);
			if (!info) {
				log_retry(s, &spins);
				continue;
			}
		}
		if (info & REC_TOMBSTONE) {
			if (locked)
				rec_unlock_shared(r);
			return HLOG_NOTFOUND;
		}
		if (rec_expired(r, info, s->now_ms)) {
			if (locked)
				rec_unlock_shared(r);
			log_op op = { .kind = OP_EXPIRE };
			log_update(s, k, &op);
			return HLOG_NOTFOUND;
		}
		hlog_value v = { rec_val(r, info), r->val_len, rec_expire_at(r, info) };
		fn(ctx, &v);
		if (locked)
			rec_unlock_shared(r);
		return HLOG_OK;
	}
}

/* ---------------- updates ---------------- */

/* Apply a key's transition to the session's counters (note 9). */
static void log_count(hlog_session *s, int st, uint64_t old_info, int action, bool new_exp)
{
	int old_counted = st == ST_LIVE || st == ST_EXPIRED;
	int old_exp = old_counted && (old_info & REC_HAS_EXPIRY);
	int new_counted = action == HLOG_RMW_WRITE;
	int nexp = new_counted && new_exp;
	if (new_counted != old_counted)
		ctr_add_signed(&s->keys, new_counted - old_counted);
	if (nexp != old_exp)
		ctr_add_signed(&s->expires, nexp - old_exp);
	if (st == ST_EXPIRED)
		ctr_add(&s->expired, 1);
}

static void log_fill(const log_op *op, const hlog_value *old, uint8_t *dst, bool in_place)
{
	if (op->kind == OP_UPSERT)
		memcpy(dst, op->val, op->len);
	else
		op->ops->fill(op->ctx, old, dst, in_place);
}

/*
 * The one update path behind upsert, RMW, delete and lazy expiry (note 8). Returns HLOG_OK,
 * HLOG_NOTFOUND (delete of an absent key), a plan's error, SPW_E_TOO_BIG, SPW_E_LOG_FULL or
 * -ENOMEM (index full).
 */
static int log_update(hlog_session *s, const hlog_key *k, const log_op *op)
{
	hlog *l = s->l;
	unsigned spins = 0;
	bool writes = op->kind == OP_RMW || op->kind == OP_UPSERT;

	if (k->len > l->max_rec)
		return writes ? SPW_E_TOO_BIG : HLOG_NOTFOUND;

	for (;;) {
		hidx_slot slot;
		log_rec *r = NULL;
		uint64_t info = 0, a = 0;
		bool have_slot = hidx_entry_find(l->idx, k->hash, &slot) == 0;
		if (!have_slot && !writes)
			return HLOG_NOTFOUND;
		if (have_slot)
			a = log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info);
		bool mut = false;
		if (a) {
			info = rec_wait_valid(r, info);
			mut = a >= load_acq(&l->read_only);
			if (!mut && a >= load_acq(&l->safe_ro)) {
				log_retry(s, &spins);   /* fuzzy band */
				continue;
			}
			if (mut && !(info = rec_lock_excl(r))) {
				log_retry(s, &spins);   /* sealed: a newer version is published */
				continue;
			}
		}

		int st = !a ? ST_ABSENT : (info & REC_TOMBSTONE) ? ST_TOMB
			: rec_expired(r, info, s->now_ms) ? ST_EXPIRED : ST_LIVE;
		hlog_value old = { NULL, 0, HLOG_NO_EXPIRY };
		if (st == ST_LIVE) {
			old.ptr = rec_val(r, info);
			old.len = r->val_len;
			old.expire_ms = rec_expire_at(r, info);
		}
		const hlog_value *oldp = st == ST_LIVE ? &old : NULL;

		hlog_rmw_plan plan = { HLOG_RMW_KEEP, 0, HLOG_NO_EXPIRY };
		int result = HLOG_OK, rc;
		switch (op->kind) {
		case OP_RMW:
			rc = op->ops->plan(op->ctx, oldp, &plan);
			if (rc < 0)
				goto unlock_return;
			break;
		case OP_UPSERT:
			plan.action = HLOG_RMW_WRITE;
			plan.new_len = op->len;
			plan.expire_ms = op->expire_ms;
			break;
		case OP_DELETE:
			plan.action = HLOG_RMW_DELETE;
			result = st == ST_LIVE ? HLOG_OK : HLOG_NOTFOUND;
			break;
		default: /* OP_EXPIRE */
			result = HLOG_NOTFOUND;
			break;
		}
		if (plan.action == HLOG_RMW_KEEP && st == ST_EXPIRED)
			plan.action = HLOG_RMW_DELETE;      /* lazy expiry: whoever sees it removes it */
		if (plan.action == HLOG_RMW_DELETE && (st == ST_ABSENT || st == ST_TOMB))
			plan.action = HLOG_RMW_KEEP;
		if (plan.action == HLOG_RMW_KEEP) {
			rc = result;
			goto unlock_return;
		}

		bool wr = plan.action == HLOG_RMW_WRITE;
		bool new_exp = wr && plan.expire_ms != HLOG_NO_EXPIRY;
		uint64_t vlen = wr ? plan.new_len : 0;
		uint64_t size = rec_size_of(k->len, vlen, new_exp);
		if (size > l->max_rec || (wr && plan.new_len > l->max_rec)) {
			rc = SPW_E_TOO_BIG;
			goto unlock_return;
		}

		if (mut) {
			if (!wr) {
				info |= REC_TOMBSTONE;
				log_count(s, st, info, plan.action, false);
				ctr_add(&s->inplace, 1);
				rec_unlock_excl(r, info);
				return result;
			}
			bool cur_exp = (info & REC_HAS_EXPIRY) != 0;
			if (new_exp == cur_exp && size == rec_size(r, info)) {
				/* In place. A tombstoned or expired R is revived: fill writes it whole. */
				log_fill(op, oldp, rec_val(r, info), st == ST_LIVE);
				log_count(s, st, info, plan.action, new_exp);
				r->val_len = (uint32_t)vlen;
				if (new_exp)
					*(int64_t *)(r + 1) = plan.expire_ms;
				info &= ~REC_TOMBSTONE;
				ctr_add(&s->inplace, 1);
				rec_unlock_excl(r, info);
				return result;
			}
		}

		/* A new version at the tail: RCU from R, a tombstone, or the first version of the key. */
		if (!have_slot) {
			if ((rc = hidx_entry_find_or_create(l->idx, k->hash, &slot)) < 0)
				return rc;
			if (hidx_slot_addr(&slot) != 0) {
				log_retry(s, &spins);   /* someone published into the entry meanwhile: replan */
				continue;
			}
			have_slot = true;
		}
		int64_t na = log_alloc(l, size);
		if (na < 0) {
			if (mut)
				rec_unlock_excl(r, info);
			if (na == LOG_E_RETRY) {
				log_retry(s, &spins);
				continue;
			}
			ctr_add(&s->log_full, 1);
			return (int)na;
		}
		log_rec *n = hlog_rec_at(l, (uint64_t)na);
		uint64_t ninfo = hidx_slot_addr(&slot) | (new_exp ? REC_HAS_EXPIRY : 0) | (wr ? 0 : REC_TOMBSTONE);
		/* Sealed, not valid: unpublished (the frame is zero, so the info word is the first write). */
		atomic_store_explicit(&n->info, ninfo | REC_SEALED, memory_order_relaxed);
		n->key_len = (uint32_t)k->len;
		n->val_len = (uint32_t)vlen;
		if (new_exp)
			*(int64_t *)(n + 1) = plan.expire_ms;
		memcpy(rec_key(n, ninfo), k->ptr, k->len);
		if (wr)
			log_fill(op, oldp, rec_val(n, ninfo), false);
		/* The CAS publishes the record's bytes (release) to whoever reads the entry. */
		if (!hidx_slot_cas(&slot, (uint64_t)na)) {
			if (mut)
				rec_unlock_excl(r, info);
			log_retry(s, &spins);   /* the record stays sealed and invalid: garbage */
			continue;
		}
		atomic_store_explicit(&n->info, ninfo | REC_VALID, memory_order_release);
		/* Seal the source only after the new version is valid, so that whoever locks it next and
		 * sees the seal finds the new version by restarting. */
		if (mut)
			rec_unlock_excl(r, info | REC_SEALED);
		/* A flush that overtook us made the new version invisible: it must not be counted. */
		if ((uint64_t)na >= load_acq(&l->begin))
			log_count(s, st, info, plan.action, new_exp);
		ctr_add(a ? &s->rcu : &s->appends, 1);
		return result;

unlock_return:
		if (mut)
			rec_unlock_excl(r, info);
		return rc;
	}
}

int hlog_upsert(hlog_session *s, const hlog_key *k, const void *val, size_t len, int64_t expire_ms)
{
	log_op op = { .kind = OP_UPSERT, .val = val, .len = len, .expire_ms = expire_ms };
	return log_update(s, k, &op);
}

int hlog_delete(hlog_session *s, const hlog_key *k)
{
	log_op op = { .kind = OP_DELETE };
	return log_update(s, k, &op);
}

int hlog_rmw(hlog_session *s, const hlog_key *k, const hlog_rmw_ops *ops, void *ctx)
{
	log_op op = { .kind = OP_RMW, .ops = ops, .ctx = ctx };
	return log_update(s, k, &op);
}

/* ---------------- scan ---------------- */

typedef struct scan_ctx {
	hlog_session *s;
	hlog_key_fn fn;
	void *ctx;
	uint64_t begin;
} scan_ctx;

/* true when a record between head (inclusive) and a (exclusive) has r's key: a newer version. */
static bool scan_hidden(hlog *l, uint64_t head, uint64_t a, const log_rec *r, uint64_t info, uint64_t begin)
{
	const uint8_t *key = rec_key(r, info);
	for (uint64_t b = head; b != a && b >= begin; ) {
		log_rec *q = hlog_rec_at(l, b);
		uint64_t qi = atomic_load_explicit(&q->info, memory_order_acquire);
		if (q->key_len == r->key_len && memcmp(rec_key(q, qi), key, r->key_len) == 0)
			return true;
		b = qi & REC_PREV_MASK;
	}
	return false;
}

static void scan_visit(void *vctx, uint64_t word)
{
	scan_ctx *sc = vctx;
	hlog *l = sc->s->l;
	uint64_t head = word & HIDX_ADDR_MASK;
	uint64_t safe_ro = load_acq(&l->safe_ro);
	for (uint64_t a = head; a >= sc->begin; ) {
		if (a < load_acq(&l->head))
			break;   /* device tier: the scan will read these records' keys from the device */
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info = rec_wait_valid(r, atomic_load_explicit(&r->info, memory_order_acquire));
		uint64_t prev = info & REC_PREV_MASK;
		if (!scan_hidden(l, head, a, r, info, sc->begin)) {
			bool locked = a >= safe_ro;
			if (locked)
				info = rec_lock_shared(r, true);   /* note 11: a sealed version is reported */
			if (!(info & REC_TOMBSTONE) && !rec_expired(r, info, sc->s->now_ms)) {
				hlog_value v = { rec_val(r, info), r->val_len, rec_expire_at(r, info) };
				sc->fn(sc->ctx, rec_key(r, info), r->key_len, &v);
			}
			if (locked)
				rec_unlock_shared(r);
		}
		a = prev;
	}
}

uint64_t hlog_scan(hlog_session *s, uint64_t cursor, uint64_t count, hlog_key_fn fn, void *ctx)
{
	scan_ctx sc = { s, fn, ctx, load_acq(&s->l->begin) };
	return hidx_scan(s->l->idx, cursor, count, scan_visit, &sc);
}

uint64_t hlog_scan_cursor_end(hlog *l)
{
	return l->buckets;
}

/* ---------------- counts, flush, info ---------------- */

static int64_t log_sum_keys(hlog *l)
{
	int64_t sum = 0;
	for (int i = 0; i < l->max_sessions; i++)
		sum += atomic_load_explicit(&l->sessions[i].keys, memory_order_relaxed);
	return sum;
}

static int64_t log_sum_expires(hlog *l)
{
	int64_t sum = 0;
	for (int i = 0; i < l->max_sessions; i++)
		sum += atomic_load_explicit(&l->sessions[i].expires, memory_order_relaxed);
	return sum;
}

uint64_t hlog_key_count(hlog *l)
{
	int64_t n = log_sum_keys(l) - atomic_load(&l->keys_base);
	return n < 0 ? 0 : (uint64_t)n;
}

uint64_t hlog_expires_count(hlog *l)
{
	int64_t n = log_sum_expires(l) - atomic_load(&l->expires_base);
	return n < 0 ? 0 : (uint64_t)n;
}

int hlog_flush_all(hlog_session *s)
{
	hlog *l = s->l;
	unsigned spins = 0;
	uint64_t w;

	/* A page turn in flight may still fail and restore the tail below its page end; Begin must be
	 * an address no later allocation can land under. */
	while (tail_off(l, w = load_acq(&l->tail)) > l->page_bytes)
		log_spin(&spins);
	marker_advance(&l->begin, tail_address(l, w));
	uint64_t begin = load_acq(&l->begin);
	hidx_clear_below(l->idx, begin);
	uint64_t head = begin & ~(l->page_bytes - 1);
	if (head < HLOG_FIRST_ADDRESS)
		head = HLOG_FIRST_ADDRESS;
	marker_advance(&l->read_only, head);
	marker_advance(&l->head, head);
	atomic_store(&l->keys_base, log_sum_keys(l));
	atomic_store(&l->expires_base, log_sum_expires(l));
	/* The flush holds no record pointer, so it may refresh while it waits for a drain slot. */
	while (epoch_bump(l->ep, log_flush_release, l, head) < 0) {
		epoch_refresh(l->ep, s->id);
		log_spin(&spins);
	}
	epoch_refresh(l->ep, s->id);
	return HLOG_OK;
}

void hlog_info_get(hlog *l, hlog_info *out)
{
	memset(out, 0, sizeof(*out));
	out->begin = atomic_load(&l->begin);
	out->head = atomic_load(&l->head);
	out->safe_read_only = atomic_load(&l->safe_ro);
	out->read_only = atomic_load(&l->read_only);
	out->flushed_until = atomic_load(&l->flushed_until);
	out->tail = tail_address(l, atomic_load(&l->tail));
	out->page_bytes = l->page_bytes;
	out->max_pages = l->max_pages;
	out->allocated_pages = atomic_load(&l->allocated_pages);
	out->memory_bytes = l->max_pages * l->page_bytes;
	hidx_stats_get(l->idx, &out->index);
	out->keys = hlog_key_count(l);
	out->expires = hlog_expires_count(l);
	for (int i = 0; i < l->max_sessions; i++) {
		hlog_session *s = &l->sessions[i];
		out->inplace_updates += atomic_load_explicit(&s->inplace, memory_order_relaxed);
		out->rcu_updates += atomic_load_explicit(&s->rcu, memory_order_relaxed);
		out->appends += atomic_load_explicit(&s->appends, memory_order_relaxed);
		out->log_full_errors += atomic_load_explicit(&s->log_full, memory_order_relaxed);
		out->retries += atomic_load_explicit(&s->retries, memory_order_relaxed);
		out->expired_keys += atomic_load_explicit(&s->expired, memory_order_relaxed);
	}
}

uint64_t hlog_max_record_payload(hlog *l)
{
	/* The largest record minus a header with an expiry: any key + value up to this fits. */
	return l->max_rec - REC_HDR_BYTES - 8;
}

uint64_t hlog_records_visit(hlog *l, hlog_record_fn fn, void *ctx)
{
	uint64_t n = 0;
	uint64_t a = atomic_load(&l->begin);
	uint64_t end = tail_address(l, atomic_load(&l->tail));
	while (a < end) {
		uint64_t page_end = (a | (l->page_bytes - 1)) + 1;
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info;
		if (page_end - a < REC_HDR_BYTES || (info = atomic_load(&r->info)) == 0) {
			a = page_end;   /* the rest of the page was never allocated */
			continue;
		}
		fn(ctx, a, r, info);
		n++;
		a += rec_size(r, info);
	}
	return n;
}
