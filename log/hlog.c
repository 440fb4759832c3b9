/*
 * hlog.c - the hybrid log: records in a circular buffer of page frames, found through the hash
 * index, updated in place while mutable and by read-copy-update after that, spilled to a device
 * below HeadAddress and read back by pending operations (Tsavorite's design). The device half lives
 * in tier.c; these notes cover both.
 *
 * NOTES ON THE DESIGN OF THE LOG
 *
 *  1. Addresses. One 48-bit logical address space; 0 = none, the first 64 bytes of page 0 are never
 *     allocated, so the first record is at HLOG_FIRST_ADDRESS. page = addr >> page_bits, offset =
 *     addr & (page_bytes - 1); page_bytes is a power of two in [4 KiB, 1 GiB]. The device's logical
 *     byte space is the log's address space: address a is device offset a. Regions:
 *
 *      Begin        Head       SafeReadOnly    ReadOnly                  Tail
 *        |            |              |             |                       |
 *     ...[ truncated  ][ device only ][ read-only   ][ fuzzy  ][ mutable     ][ unallocated
 *                      pending reads   RCU, no locks  retry     in place under the record lock
 *
 *     Begin <= Head <= FlushedUntil <= SafeReadOnly <= ReadOnly <= Tail, and SafeHead <= Head.
 *     Every marker only moves up (marker_advance: CAS to the max). The exception is transient:
 *     hlog_flush_all moves Head at once and SafeReadOnly/FlushedUntil in its epoch action; nothing
 *     compares those (only addresses >= Begin >= Head are ever classified, and tier_cold checks
 *     Begin again).
 *
 *  2. Who moves what:
 *       Tail         log_alloc (fetch_add); the page turn stores (page+1, 0)      [log_page_turn]
 *       ReadOnly     page turn: max(RO, start(new page) - mutable_pages * page), and with a device
 *                    at least the Head the turn after next will need (note 15)    [log_page_turn]
 *                    eviction: the Head a page turn needs, or the end of the
 *                    spanning record that Head would cut                          [tier_evict_for]
 *                    flush: max(RO, new Head)                                     [hlog_flush_all]
 *       SafeReadOnly epoch action after either of those                  [log_ro_safe, log_flush_release]
 *       FlushedUntil no device: = SafeReadOnly (a page "flushes" the moment no thread can still
 *                    write it). Device: the page writes' completions, contiguously [tier_flush_advance]
 *       Begin        flush: the tail address                                      [hlog_flush_all]
 *       Head         eviction: min(wanted Head, FlushedUntil)   [tier_evict_maybe: page turn, IO
 *                    completion, poll]; flush: the start of Begin's page          [hlog_flush_all]
 *       SafeHead     epoch action after a Head move, once its frames are released
 *                                                             [log_evict_action, log_flush_release]
 *
 *  3. Frames. The in-memory window is max_pages = memory / page_bytes pages (>= 2; >= 4 with a
 *     device). Page p lives in frame slot p & (frame_slots - 1), frame_slots = max_pages rounded up to
 *     a power of two, so address -> pointer is mem + (addr & window_mask): one AND, no frame table,
 *     no division. The frames are a memfd of frame_slots * page_bytes mapped twice, back to back, so
 *     that a record running past the last slot continues, contiguous in virtual memory, into the
 *     second mapping of slot 0 (note 5). The kernel materialises a frame's memory when it is first
 *     written, so RSS follows the data; AllocatedPageCount counts slots holding a live page. The
 *     memory cap is max_pages, not frame_slots: page p may be opened only when page p - max_pages
 *     lies wholly below SafeHead, and the page that last used p's slot, p - frame_slots, is older
 *     still. Released frames are punched out of the memfd (FALLOC_FL_PUNCH_HOLE), which frees them
 *     and makes them read as zero when reused. The mappings ask for huge pages (MADV_HUGEPAGE);
 *     shared memory gets them only where the kernel's shmem_enabled allows, where an anonymous
 *     mapping would get them under THP "always": the price of the contiguous window.
 *
 *  4. Tail. One word: page << (page_bits + 16) | offset. The offset field has 16 spare bits so that
 *     the overshoot of threads adding past a page end (each adds at most once per page turn, at most
 *     page_bytes + 8 each) can never carry into the page number; a plain page << 32 would overflow
 *     with 1 GiB pages. Allocation is fetch_add(size) (page_bytes + 8 for a spanning record, so that
 *     it always crosses the page end):
 *       offset + size <= page_bytes          the record is at (page, offset).
 *       offset <= page_bytes < offset + size this thread owns the turn to page + 1 (exactly one).
 *       offset > page_bytes                  someone else owns it: spin (pause, then sched_yield)
 *                                            until the page changes or the tail is restored.
 *     The owner checks the frames (note 3). No room: it stores the tail back to (page, offset), or
 *     to (page, page_bytes) when it had to close the page (note 15); every thread that added
 *     meanwhile is spinning and used nothing. It fails with SPW_E_LOG_FULL without a device,
 *     LOG_E_WAIT when a page write must finish first (note 17), or an internal retry when Head is
 *     far enough and only the epoch action is missing. Room: it marks the frames live, advances
 *     ReadOnly, queues the SafeReadOnly action, then publishes (page + 1, 0). Spinners do not
 *     refresh the epoch: they may hold record pointers, and nothing they could unblock is waited
 *     for (the owner never waits).
 *
 *  5. Records: see the layout and bits in hlog_int.h. A record of at most page_bytes never spans
 *     pages. A larger one (values of 64 MB and more whatever --page is) is allocated by a page turn
 *     of its own: it starts at the next page and covers N = ceil(size / page) consecutive pages,
 *     and the tail continues right after it inside its last page. Its bytes are contiguous in
 *     memory thanks to the double mapping, and on the device anyway. Limits: N <= max_pages - 1
 *     (the record and the page before it in memory together) and size <= 1 GiB (u32 lengths, one
 *     device request; Redis's bulk limit is 512 MB): max_rec = min((max_pages - 1) * page, 1 GiB),
 *     larger -> SPW_E_TOO_BIG. The turn notes the span per frame slot: span_first at its first
 *     page (FlushedUntil crosses the span in one step, so a record that starts below Head is on
 *     the device whole) and span_cont at the others (the page walker skips the continuation).
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
 *     Every reachable record is valid before its page passes SafeReadOnly, hence before it is
 *     written to the device.
 *
 *  7. Lookup (hlog_read, log_update): entry = hidx_entry_find(hash); walk from its address while
 *     addr >= Begin: compare key length and bytes; the first match is the newest version. Tombstone
 *     = absent; expired (has_expiry and expire_at < now, Redis's rule: a key is still there in the
 *     millisecond it expires) = absent and removed lazily (note 9). The walk compares each address
 *     with Head (one load and compare, all the in-memory fast path pays for the tier); the first
 *     address below Head is "cold": the rest of the chain is on the device (note 16).
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
 *       Head <= R < SafeRO   immutable: no lock; plan from R, append the new version (or a
 *                            tombstone), CAS. Also when R is absent.
 *       R < Head             on the device: the fetched copy (note 16) is R, immutable as above;
 *                            the CAS expects the entry word this run started from.
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
 *     a turn owner waits for nobody. A pending return (read or frame) holds nothing.
 *
 *  9. Counters. Per session, on the session's own cache line, written only by its thread: key and
 *     expire deltas, and stats. A key counts while its newest version is not a tombstone (expired
 *     keys count until removed, as in Redis). log_count applies (old state, new state): +1 when a
 *     key goes from absent/tombstone to live, -1 on delete; an expired old version counts one
 *     "expired" removal. A read or RMW that meets an expired version removes it (tombstone in place
 *     or appended, best effort: LOG_FULL, a frame wait or an uncached device record leave it for
 *     later), so DBSIZE drops as in Redis's lazy expiry. hlog_key_count = sum of deltas - base;
 *     hlog_flush_all sets base to the sum, which is exact when no session writes during the flush;
 *     a write that races the flush may be counted once too often or too few (a write that lands
 *     below the new Begin is not counted). The count stays exact with a device because every
 *     update, upsert included, learns the old state: a blind upsert whose chain reaches the device
 *     before the key is found reads the old record first (the one read a plain SET pays, only for
 *     keys whose index entry already exists and leads to the device).
 *
 * 10. Epoch (epoch.c). A session protects before a batch, refreshes between batches. Inside an
 *     operation the log refreshes only on restart paths, where it holds no lock and no pointer. The
 *     epoch actions: log_ro_safe (SafeReadOnly; FlushedUntil without a device) after ReadOnly
 *     moved; log_evict_action (release frames, SafeHead) after an eviction moved Head;
 *     log_flush_release (SafeReadOnly, FlushedUntil, frames, SafeHead) after a flush. Each marker
 *     remembers the value whose action is queued (ro_bumped, head_bumped), so a move queues one
 *     action, and a failed bump (full drain list) is queued again by the next page turn or poll.
 *     A full drain list makes the page turn back out with an internal retry.
 *
 * 11. hlog_scan walks hidx_scan's entries; for each chain it reports each key's newest version only
 *     (a key seen nearer the head hides the older ones, tombstones and expired versions hide too).
 *     A sealed version is still reported: its value was current when the chain was read, and
 *     skipping it would lose a key updated during the scan. A chain that reaches below Head goes on
 *     on the device (note 18).
 *
 * 12. hlog_flush_all: wait out a page turn in flight, Begin = tail, hidx_clear_below(Begin), Head
 *     and ReadOnly to Begin's page start (with a device also the flush claim: pages below are never
 *     written), counters' base, then an epoch action that advances SafeReadOnly and FlushedUntil,
 *     releases the frames of the pages below the new Head (under release_mu so that two releases
 *     never free a frame a page turn already reused) and only then publishes SafeHead, which is what
 *     lets a page turn reuse them. Operations racing the flush land before or after it; a record
 *     they publish below Begin is simply invisible. Page writes still in flight below the new Head
 *     finish into the truncated part of the device (harmless: nothing reads there); their
 *     per-slot bookkeeping carries the page number, so a stale completion never counts for the
 *     page that reuses the slot. The device's space below Begin is not reclaimed yet.
 *
 * 13. hlog_records_visit is the page walker recovery and compaction will use; REC_VERSION bits are
 *     reserved for the checkpoint version. There is no recovery yet: a log opened on a device
 *     starts empty and overwrites what the segments held.
 *
 * THE STORAGE TIER (tier.c)
 *
 * 14. Flush. Pages are written whole (page_bytes is a multiple of the device's sector, so writes
 *     are sector-aligned and two page writes never overlap) once they are below SafeReadOnly, the
 *     point after which no thread can change them (note 8). Any session's hlog_session_poll claims
 *     the pages between flush_claimed and SafeReadOnly (one CAS) and queues their writes, split
 *     into segment-aligned requests of at most io_chunk bytes, on its own device queue. A session
 *     that turned a page claims right away (log_alloc), so in practice the page-turn owner queues
 *     the writes and they go out with its next poll. Each
 *     completion (on the claiming thread, inside its poll) counts down flush_left[slot] (page << 16
 *     | parts); the last part stores flush_done[slot] = page + 1 and calls tier_flush_advance, which
 *     moves FlushedUntil over every consecutive written page (a spanning record's pages in one step,
 *     note 5) with CAS, so completions may come out of order and on different threads. A failed or
 *     short write puts the store in the sticky error state (note 19).
 *
 * 15. Eviction. A page turn that needs a frame whose page is not below SafeHead asks tier_evict_for:
 *     evict_want = need; ReadOnly >= need (so the page gets written if it was not yet read-only);
 *     Head = min(evict_want, FlushedUntil) and the frame-release action is queued. The frame is
 *     free once the action ran (every thread has left the epoch in which the page was visible) and
 *     published SafeHead. Until then the turn fails: LOG_E_RETRY (Head is there, only the epoch is
 *     missing: refresh and retry, as without a device) or LOG_E_WAIT (the page write has not
 *     finished). To make waits rare, each turn works ahead: it makes read-only what the turn after
 *     next will need (so its page writes start now, claimed by the turning session itself, note
 *     14) and evicts what the next turn needs where already written. A page write that completes
 *     moves Head up to evict_want (tier_evict_maybe), so the frame is freed before the next turn.
 *     A spanning record that need cuts must be written whole before FlushedUntil passes need
 *     (note 5), so ReadOnly goes to its end (log_evict_ro). That end can be the turning thread's
 *     own page (only for a spanning allocation right after another one); a turn that fails then
 *     restores the tail as (page, page_bytes): the page is closed, nobody allocates there any
 *     more, and making it read-only is safe. ReadOnly never passes the start of the tail page
 *     otherwise.
 *
 * 16. Pending reads. The chain walk met cold address A (Begin <= A < Head). tier_cold looks in the
 *     session's fetch cache: entries belong to the op_ctx set by hlog_session_set_op and are keyed
 *     by (A, key hash, key bytes). A fetch's life:
 *
 *        (miss) --tier_cold: copy the key, read initial_io at A (sector-rounded)--> READING
 *        READING --completion, all parts in (tier_io_done -> tier_fetch_step):
 *            header short or invalid ............................. FAILED (-EIO / SPW_E_CORRUPT)
 *            key read and different: prev >= Begin ? read prev (chain read) : ABSENT
 *            record longer than what was read ...... read the whole record (second read) READING
 *            key equal, record whole ................................................ FOUND
 *        FOUND / ABSENT / FAILED --tier_fetch_finish: op->reads-- ; 0 --> ready list
 *        ready list --hlog_session_poll (tier_ready_run)--> ready(cb_arg, op_ctx), once per wave
 *        re-run: index -> walk; a newer version in memory wins; reaching A again --> the cached
 *            FOUND copy (plan/read from it, CAS against the entry word of this run) or ABSENT;
 *            reaching another cold address --> a new fetch (A is not trusted for another address)
 *        hlog_session_release(op_ctx) --> entries freed (reads still in flight: on completion)
 *
 *     The chain below a cold address is always on the device (older records have lower addresses,
 *     and Head only grows), so a chain walk never comes back to memory. Every record below Head is
 *     on the device whole, since Head <= FlushedUntil and FlushedUntil steps over spanning records.
 *     Nothing in the store changes before the op runs again, so a reply never shows stale data: the
 *     re-run sees every version written meanwhile. Buffers come from per-session pools of
 *     power-of-two classes (sector-aligned, first read: buf_min), IO objects and fetch entries from
 *     per-session free lists: no allocation per read in the steady state.
 *
 * 17. Frame waits. An update whose allocation got LOG_E_WAIT registers its op (tier_wait: need,
 *     the session's wait_flag) and returns HLOG_PENDING. hlog_session_poll hands the op to the
 *     ready callback once SafeHead >= need or the store failed. Completions that move FlushedUntil
 *     and the eviction action call tier_signal, which writes the eventfd of every session with a
 *     waiting op (the page write may complete on another worker's queue, whose epoll wakes on its
 *     own fd; the signal wakes the waiter's). The flag is published before the op rechecks
 *     SafeHead, and the signaller moves the marker before it reads the flags, so no wake-up is
 *     lost. Waits are counted (flush_waits).
 *
 * 18. Scan with a device. hlog_scan reports the in-memory part of each chain as before; a chain
 *     that reaches below Head is remembered with the keys it has seen, and once the index buckets
 *     of the call are covered, the store reads those chains on the device one level at a time (all
 *     chains' next records at once, one submission), waiting for them on the caller's thread with
 *     dev_wait: the documented compromise for SCAN/KEYS/RANDOMKEY (they already cost O(N) in
 *     Redis); every other operation goes pending instead. Its reads count in scan_reads; a failed
 *     read skips the rest of that chain and is reported by hlog_scan_error.
 *
 * 19. Sticky error. A page write that fails or comes back short stores its error in l->error
 *     (first one wins), logs it, and wakes waiters: from then on every write (upsert, RMW,
 *     delete) returns SPW_E_STORE_ERROR, reads of memory and of pages already written go on, no
 *     more pages are written (FlushedUntil stops, so nothing more is evicted) and
 *     hlog_info.store_error says which error. A failed read fails only its operation.
 *
 * 20. Threads. A session's device queue, fetch cache and pools belong to its thread; completions run
 *     there (inside hlog_session_poll, or dev_wait during a scan). Shared state touched by
 *     completions is atomics only: flush_left/flush_done/span per slot, markers, the error. Ready
 *     callbacks run only at the end of hlog_session_poll, never inside an operation.
 *
 * 21. Scatter-gather reads. A record read (one io_chunk part of a fetch's read, tier_fetch_read) is
 *     not handed to the device when it is asked for: it is staged on the session until the next
 *     submission (tier_submit, i.e. every hlog_session_poll round), so that all the reads a batch of
 *     operations queued go out together in one dev_submit. Two things happen on the way:
 *       sharing   a read whose (device offset, length) is covered by a read already staged or in
 *                 flight at the same offset (rd_hash, keyed by offset) attaches to it as a
 *                 follower and issues nothing: when the leader's bytes arrive they are copied to
 *                 the follower first, then each goes on through its own fetch (dedup_hits).
 *                 Safe because the device bytes below Head never change (pages are written
 *                 once, note 14; a FLUSHALL moves Begin past them for good).
 *       merging   at submission the staged reads are sorted by offset; neighbours whose gap is at
 *                 most one sector (overlapping, same or adjacent sectors) join one device read of
 *                 at most TIER_MERGE_MAX bytes within one io_chunk. When the members do not
 *                 overlap it is a vectored read: one iovec per member pointing into the member's
 *                 own fetch buffer, and the gaps between them (at most a sector each) into the
 *                 session's gap sector, so no byte is copied (vectored_reads; at most
 *                 DEV_IOV_MAX iovecs). Members that overlap (two records in one sector) read into
 *                 a pooled buffer of the merged read's own instead, and its completion copies each
 *                 member's slice into the member's buffer. Either way a short result is cut per
 *                 member exactly as the member's own read would have been, and the members
 *                 complete in offset order (merged_reads). A lone read goes out as before, into
 *                 its fetch's buffer, with no copy.
 *     Either way every fetch sees exactly the bytes its own read would have returned, so the state
 *     machine of note 16 is unchanged; hlog_config.no_read_merge turns both off (each read goes
 *     out alone, as issued). device_reads counts the requests that really went to the device. The
 *     throttle: a request the device refuses (-EAGAIN, --device-throttle-limit or the queue's
 *     depth) waits in the session's backlog and goes out from a later poll, after completions
 *     freed room; the worker never blocks on it, and while its own requests are in flight the
 *     queue's fd wakes it. Counters per session: submissions that handed over >= 1 IO, IOs
 *     handed over, and the requests in flight on the queue right after each (sum and max).
 */
#include "log/hlog.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device.h"
#include "log/epoch_int.h"
#include "log/hlog_int.h"

#define LOG_MIN_PAGE_BITS 12
#define LOG_MAX_PAGE_BITS 30
#define LOG_MAX_SESSIONS 4096        /* keeps tail overshoot far below the 16 spare offset bits */
#define LOG_MAX_RECORD (1ULL << 30)  /* u32 lengths, one device request; Redis's bulk limit is 512 MB */
#define LOG_TIER_MIN_PAGES 4         /* with a device: room to write, evict and allocate at once */
#define LOG_IO_DEFAULT 128           /* --initial-io-record-size default (Garnet's) */

static inline uint64_t tail_page(const hlog *l, uint64_t w) { return w >> l->tail_shift; }
static inline uint64_t tail_off(const hlog *l, uint64_t w) { return w & l->tail_off_mask; }

/* The tail word as an address; an overshot offset means "the end of that page". */
static inline uint64_t tail_address(const hlog *l, uint64_t w)
{
	return (tail_page(l, w) << l->page_bits) + SPW_MIN(tail_off(l, w), l->page_bytes);
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
	off_t off = (off_t)(slot * l->page_bytes);
	if (!atomic_load_explicit(&l->frame_used[slot], memory_order_relaxed))
		return;
	/* Punching the memfd frees the memory behind both mappings; the next touch reads zeros. */
	if (fallocate(l->mem_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, (off_t)l->page_bytes) != 0)
		memset(l->mem + off, 0, l->page_bytes);   /* no hole punching here: still zero it */
	atomic_store_explicit(&l->frame_used[slot], 0, memory_order_relaxed);
	atomic_fetch_sub(&l->allocated_pages, 1);
}

/* Release the frames of the pages below head, then publish SafeHead (notes 12 and 15). */
void log_frames_release(hlog *l, uint64_t head)
{
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

/* Epoch action after ReadOnly moved to ro: every thread has seen it, so nobody writes below ro. */
static void log_ro_safe(void *ctx, uint64_t ro)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, ro);
	if (!l->dev)
		marker_advance(&l->flushed_until, ro);
	else
		tier_signal(l);   /* pages to write: a waiting session may be the one to claim them */
}

/* Epoch action after an eviction moved Head: nobody can still hold a pointer below head. */
static void log_evict_action(void *ctx, uint64_t head)
{
	hlog *l = ctx;
	log_frames_release(l, head);
	tier_signal(l);
}

/* Epoch action after a flush moved Head to head: nobody can reach a record below Begin any more,
 * so the frames of the pages below head are free (note 12). */
static void log_flush_release(void *ctx, uint64_t head)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, head);
	marker_advance(&l->flushed_until, head);
	log_frames_release(l, head);
	if (l->dev)
		tier_signal(l);
}

bool log_ro_bump(hlog *l)
{
	uint64_t ro = atomic_load(&l->read_only);
	if (ro <= atomic_load(&l->ro_bumped) || ro <= atomic_load(&l->safe_ro))
		return true;
	/* ReadOnly is stored before the bump, so the action runs only after all threads saw it. */
	if (epoch_bump(l->ep, log_ro_safe, l, ro) < 0)
		return false;
	marker_advance(&l->ro_bumped, ro);
	return true;
}

bool log_head_bump(hlog *l)
{
	uint64_t h = atomic_load(&l->head);
	if (h <= atomic_load(&l->head_bumped) || h <= atomic_load(&l->safe_head))
		return true;
	if (epoch_bump(l->ep, log_evict_action, l, h) < 0)
		return false;
	marker_advance(&l->head_bumped, h);
	return true;
}

/* Called by the one thread whose fetch_add crossed the end of page (note 4), for a record of size
 * bytes. 0 when the tail now stands at (page + 1, 0), or, for a spanning record (size > page_bytes,
 * note 5), right after the record, whose address is then *addr. Else the tail is restored to
 * (page, off) and SPW_E_LOG_FULL, SPW_E_STORE_ERROR, LOG_E_RETRY or LOG_E_WAIT (with *need, the
 * SafeHead the turn waits for) is returned. */
static int log_page_turn(hlog *l, uint64_t page, uint64_t off, uint64_t size, uint64_t *addr,
		uint64_t *need_out)
{
	uint64_t np = page + 1, last = np, mask = l->frame_slots - 1;
	int rc;

	if (size > l->page_bytes)
		last = np + ((size - 1) >> l->page_bits);
	if (last >= l->page_limit) {
		rc = SPW_E_LOG_FULL;
		goto fail;
	}
	if (last >= l->max_pages) {
		/* The window may hold max_pages pages: last - max_pages must end at or below SafeHead. */
		uint64_t need = (last - l->max_pages + 1) << l->page_bits;
		if (load_acq(&l->safe_head) < need) {
			if (!l->dev) {
				rc = load_acq(&l->head) >= need ? LOG_E_RETRY : SPW_E_LOG_FULL;
			} else {
				/* A spanning record cut by need must be written whole first, which may include
				 * this turn's own page (note 15): then that page is closed for good. */
				rc = tier_evict_for(l, need, log_evict_ro(l, need), true);   /* fail: closes page */
			}
			if (rc < 0) {
				*need_out = need;
				goto fail;
			}
		}
	}
	for (uint64_t p = np; p <= last; p++)
		log_frame_use(l, p);
	uint64_t end = (np << l->page_bits) + size;
	if (last > np) {
		/* Spanning record: mark its pages before anyone can write or walk them (note 5). */
		atomic_store(&l->span_first[np & mask], np << 24 | (last - np));
		for (uint64_t p = np + 1; p <= last; p++)
			atomic_store(&l->span_cont[p & mask], p << 32 |
			             (p == last ? end - (last << l->page_bits) : l->page_bytes));
	}
	uint64_t ro = last > l->mutable_pages ? (last - l->mutable_pages) << l->page_bits : 0;
	if (l->dev && last + 3 > l->max_pages) {
		/* Ahead (note 15): what the turn after next needs becomes read-only (so its write starts
		 * now), and what the next turn needs is evicted where written already. ReadOnly never
		 * passes this turn's last page, the new tail page. */
		uint64_t next = last + 2 > l->max_pages ? (last + 2 - l->max_pages) << l->page_bits : 0;
		uint64_t next2 = (last + 3 - l->max_pages) << l->page_bits;
		uint64_t next_ro = SPW_MIN(log_evict_ro(l, next2), last << l->page_bits);
		ro = SPW_MAX(ro, next_ro);
		tier_evict_for(l, next, next_ro, false);
	}
	marker_advance(&l->read_only, ro);
	if (!log_ro_bump(l)) {
		/* The tail stays in page, but ReadOnly has moved (and may have passed page's start, for a
		 * spanning record or the look-ahead above): the span marks go, and the fail path closes
		 * the page if it is read-only now. */
		for (uint64_t p = np; last > np && p <= last; p++)
			atomic_store(p == np ? &l->span_first[p & mask] : &l->span_cont[p & mask], 0);
		rc = LOG_E_RETRY;
		goto fail;
	}
	if (last > np) {
		*addr = np << l->page_bits;
		atomic_store_explicit(&l->tail, (last << l->tail_shift) | (end - (last << l->page_bits)),
		                      memory_order_release);
	} else {
		atomic_store_explicit(&l->tail, np << l->tail_shift, memory_order_release);
	}
	return 0;
fail:
	/* A page ReadOnly has entered takes no more records: the next allocation turns it again. */
	if (load_acq(&l->read_only) > (page << l->page_bits))
		off = l->page_bytes;
	atomic_store_explicit(&l->tail, (page << l->tail_shift) | off, memory_order_release);
	return rc;
}

/* Reserve size bytes (a multiple of 8, <= max_rec) at the tail. The address, or SPW_E_LOG_FULL,
 * SPW_E_STORE_ERROR, LOG_E_RETRY or LOG_E_WAIT (*need set). The caller must write a record header
 * there before anything else. A session that turned a page claims the page writes that became due
 * (note 14): they go out with its next poll. */
static int64_t log_alloc(hlog_session *s, uint64_t size, uint64_t *need)
{
	hlog *l = s->l;
	unsigned spins = 0;
	bool spans = size > l->page_bytes;
	uint64_t add = spans ? l->page_bytes + 8 : size;   /* a spanning record always turns the page */
	for (;;) {
		uint64_t w = atomic_fetch_add(&l->tail, add);
		uint64_t page = tail_page(l, w), off = tail_off(l, w);
		if (SPW_LIKELY(off + add <= l->page_bytes))
			return (int64_t)((page << l->page_bits) + off);
		if (off <= l->page_bytes) {
			uint64_t addr = 0;
			int rc = log_page_turn(l, page, off, size, &addr, need);
			if (rc < 0)
				return rc;
			if (l->dev)
				tier_flush_claim(s);
			if (spans)
				return (int64_t)addr;
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

/* Walk the chain from addr (newest first) for key k. The address of the newest version of k in
 * memory (may be a tombstone, may not be published yet: see rec_wait_valid) with *out and *info_out
 * set, or 0: absent, or, with *cold set, the chain goes on below Head at *cold (note 7). */
static inline uint64_t log_chain_find(hlog *l, uint64_t addr, uint64_t begin, const hlog_key *k,
		log_rec **out, uint64_t *info_out, uint64_t *cold)
{
	while (addr >= begin) {
		if (SPW_UNLIKELY(addr < load_acq(&l->head))) {
			*cold = addr;
			return 0;
		}
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

/* The frames: a memfd of mem_bytes mapped twice back to back (note 3). 0 or -errno. */
static int log_frames_map(hlog *l)
{
	l->mem_fd = memfd_create("spillway-log", MFD_CLOEXEC);
	if (l->mem_fd < 0)
		return -errno;
	if (ftruncate(l->mem_fd, (off_t)l->mem_bytes) != 0)
		return -errno;
	/* Reserve both halves first so that nobody else can take the second one. */
	void *base = mmap(NULL, 2 * l->mem_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	l->mem = base;
	for (int i = 0; i < 2; i++) {
		void *p = mmap(l->mem + (uint64_t)i * l->mem_bytes, l->mem_bytes, PROT_READ | PROT_WRITE,
		               MAP_SHARED | MAP_FIXED | MAP_NORESERVE, l->mem_fd, 0);
		if (p == MAP_FAILED)
			return -errno;
	}
	/* Where the kernel allows huge pages for shared memory, take them (fewer TLB misses). */
	(void)madvise(l->mem, 2 * l->mem_bytes, MADV_HUGEPAGE);
	return 0;
}

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
	if (cfg->dev && (cfg->memory_bytes / cfg->page_bytes < LOG_TIER_MIN_PAGES
			|| cfg->page_bytes % cfg->dev->sector_bytes != 0 || cfg->dev->mem_align > cfg->page_bytes))
		return -EINVAL;

	l = aligned_alloc(SPW_CACHELINE, SPW_ALIGN_UP(sizeof(*l), SPW_CACHELINE));
	if (!l)
		return -ENOMEM;
	memset(l, 0, sizeof(*l));
	l->mem = MAP_FAILED;
	l->mem_fd = -1;
	pthread_mutex_init(&l->release_mu, NULL);
	pthread_mutex_init(&l->sig_mu, NULL);

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
	l->max_rec = SPW_MIN((l->max_pages - 1) * l->page_bytes, LOG_MAX_RECORD);
	l->max_sessions = cfg->max_sessions;
	l->mem_bytes = l->frame_slots * l->page_bytes;
	l->window_mask = l->mem_bytes - 1;
	l->dev = cfg->dev;
	if (l->dev) {
		dev *d = l->dev;
		uint64_t segs = SPW_MAX(1u, SPW_MIN(8u, d->queue_depth));
		l->sector = d->sector_bytes;
		l->initial_io = cfg->initial_io_bytes ? cfg->initial_io_bytes : LOG_IO_DEFAULT;
		/* A request never spans more than `segs` segments (the device splits at segment ends and
		 * takes at most DEV_PIECES_MAX, and the queue's depth in pieces). */
		l->io_chunk = SPW_MIN(d->segment_bytes * segs, 256ULL << 20);
		uint64_t first = SPW_ALIGN_UP((uint64_t)l->initial_io, l->sector) + l->sector;
		l->buf_min = 4096;
		while (l->buf_min < first || l->buf_min < d->mem_align)
			l->buf_min <<= 1;
		l->read_merge = !cfg->no_read_merge;
	}

	if ((rc = hidx_open(&l->idx, cfg->index_bytes)) < 0)
		goto fail;
	hidx_stats st;
	hidx_stats_get(l->idx, &st);
	l->buckets = st.buckets;
	if ((rc = epoch_open(&l->ep, cfg->max_sessions)) < 0)
		goto fail;
	if ((rc = log_frames_map(l)) < 0)
		goto fail;
	rc = -ENOMEM;
	l->frame_used = calloc(l->frame_slots, sizeof(*l->frame_used));
	l->flush_done = calloc(l->frame_slots, sizeof(*l->flush_done));
	l->flush_left = calloc(l->frame_slots, sizeof(*l->flush_left));
	l->span_first = calloc(l->frame_slots, sizeof(*l->span_first));
	l->span_cont = calloc(l->frame_slots, sizeof(*l->span_cont));
	l->sessions = aligned_alloc(SPW_CACHELINE, (size_t)cfg->max_sessions * sizeof(hlog_session));
	if (!l->frame_used || !l->flush_done || !l->flush_left || !l->span_first || !l->span_cont || !l->sessions)
		goto fail;
	memset(l->sessions, 0, (size_t)cfg->max_sessions * sizeof(hlog_session));
	for (int i = 0; i < cfg->max_sessions; i++) {
		l->sessions[i].l = l;
		l->sessions[i].id = i;
		l->sessions[i].efd = -1;
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
		munmap(l->mem, 2 * l->mem_bytes);
	if (l->mem_fd >= 0)
		close(l->mem_fd);
	hidx_close(l->idx);
	epoch_close(l->ep);
	free((void *)l->frame_used);
	free((void *)l->flush_done);
	free((void *)l->flush_left);
	free((void *)l->span_first);
	free((void *)l->span_cont);
	free(l->sessions);
	pthread_mutex_destroy(&l->release_mu);
	pthread_mutex_destroy(&l->sig_mu);
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
	tier_session_close(s);
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
		uint64_t info, cold = 0;
		bool locked = false;
		if (hidx_entry_find(l->idx, k->hash, &slot) != 0)
			return HLOG_NOTFOUND;
		uint64_t a = log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info, &cold);
		if (!a) {
			if (SPW_LIKELY(!cold))
				return HLOG_NOTFOUND;
			/* On the device: the fetched copy is private and immutable, no lock (note 16). */
			int rc = tier_cold(s, k, cold, true, &r, &info);
			if (rc != TIER_FOUND)
				return rc == TIER_ABSENT ? HLOG_NOTFOUND : rc;
		} else {
			info = rec_wait_valid(r, info);
			locked = a >= load_acq(&l->safe_ro);
			if (locked) {
				/* Mutable or fuzzy: an in-place writer may be at work; read under a shared lock. */
				info = rec_lock_shared(r, false);
				if (!info) {
					log_retry(s, &spins);
					continue;
				}
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

void hlog_bucket_prefetch(hlog_session *s, const hlog_key *k)
{
	hidx_prefetch(s->l->idx, k->hash);
}

int hlog_prefetch(hlog_session *s, const hlog_key *k)
{
	hlog *l = s->l;
	hidx_slot slot;
	log_rec *r;
	uint64_t info, cold = 0;
	if (!l->dev || hidx_entry_find(l->idx, k->hash, &slot) != 0)
		return HLOG_OK;
	if (log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info, &cold) || !cold)
		return HLOG_OK;
	int rc = tier_cold(s, k, cold, true, &r, &info);
	return rc == TIER_FOUND || rc == TIER_ABSENT ? HLOG_OK : rc;
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
		ctr_add(&s->expired_keys, 1);
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
 * HLOG_NOTFOUND (delete of an absent key), HLOG_PENDING (a device read or a frame wait, note 16/17),
 * a plan's error, SPW_E_TOO_BIG, SPW_E_LOG_FULL, SPW_E_STORE_ERROR, a device read's error or
 * -ENOMEM (index full). Lazy expiry (OP_EXPIRE) is best effort: it never waits or reads.
 */
static int log_update(hlog_session *s, const hlog_key *k, const log_op *op)
{
	hlog *l = s->l;
	unsigned spins = 0;
	bool writes = op->kind == OP_RMW || op->kind == OP_UPSERT;
	bool lazy = op->kind == OP_EXPIRE;

	if (SPW_UNLIKELY(atomic_load_explicit(&l->error, memory_order_relaxed) != 0))
		return lazy ? HLOG_NOTFOUND : SPW_E_STORE_ERROR;   /* note 19 */
	if (k->len > l->max_rec)
		return writes ? SPW_E_TOO_BIG : HLOG_NOTFOUND;

	for (;;) {
		hidx_slot slot;
		log_rec *r = NULL;
		uint64_t info = 0, a = 0, cold = 0;
		bool fetched = false;
		bool have_slot = hidx_entry_find(l->idx, k->hash, &slot) == 0;
		if (!have_slot && !writes)
			return HLOG_NOTFOUND;
		if (have_slot)
			a = log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info, &cold);
		if (!a && cold) {
			/* The newest version is on the device: plan from the fetched copy (note 8). */
			int rc = tier_cold(s, k, cold, !lazy, &r, &info);
			if (rc == TIER_FOUND) {
				a = cold;
				fetched = true;
			} else if (rc != TIER_ABSENT) {
				return lazy ? HLOG_NOTFOUND : rc;
			}
		}
		bool mut = false;
		if (a && !fetched) {
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
				ctr_add(&s->inplace_updates, 1);
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
				ctr_add(&s->inplace_updates, 1);
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
		uint64_t need = 0;
		int64_t na = log_alloc(s, size, &need);
		if (na < 0) {
			if (mut)
				rec_unlock_excl(r, info);
			if (na == LOG_E_RETRY) {
				log_retry(s, &spins);
				continue;
			}
			if (na == LOG_E_WAIT) {
				if (lazy)
					return result;
				/* No frame until a page write finishes (note 17): nothing was changed. */
				rc = tier_wait(s, need);
				if (rc == 0) {
					log_retry(s, &spins);
					continue;
				}
				return rc;
			}
			if (na == SPW_E_LOG_FULL)
				ctr_add(&s->log_full_errors, 1);
			return lazy ? result : (int)na;
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
		ctr_add(a ? &s->rcu_updates : &s->appends, 1);
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
		if (a < load_acq(&l->head)) {
			/* The rest of the chain is on the device: read after the buckets (note 18). */
			if (l->dev)
				tier_scan_chain_add(sc->s, head, a);
			break;
		}
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
	if (s->l->dev)
		tier_scan_reset(s);
	uint64_t next = hidx_scan(s->l->idx, cursor, count, scan_visit, &sc);
	if (s->l->dev)
		tier_scan_cold(s, sc.begin, fn, ctx);
	return next;
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
	marker_advance(&l->flush_claimed, head & ~(l->page_bytes - 1));   /* never written (note 12) */
	marker_advance(&l->head, head);
	atomic_store(&l->keys_base, log_sum_keys(l));
	atomic_store(&l->expires_base, log_sum_expires(l));
	/* The flush holds no record pointer, so it may refresh while it waits for a drain slot. */
	while (epoch_bump(l->ep, log_flush_release, l, head) < 0) {
		epoch_refresh(l->ep, s->id);
		log_spin(&spins);
	}
	marker_advance(&l->ro_bumped, head);
	marker_advance(&l->head_bumped, head);
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
	out->store_error = atomic_load(&l->error);
	for (int i = 0; i < l->max_sessions; i++) {
		hlog_session *s = &l->sessions[i];
#define HLOG_CTR_SUM_UP(f, kind, info, doc) {                                              \
			uint64_t v = atomic_load_explicit(&s->f, memory_order_relaxed);         \
			out->f = (kind) == HLOG_CTR_MAX ? SPW_MAX(out->f, v) : out->f + v;     \
		}
		HLOG_COUNTERS(HLOG_CTR_SUM_UP)
#undef HLOG_CTR_SUM_UP
	}
}

#define HLOG_CTR_DEF(f, k, i, d) { .field = #f, .info = i, .doc = d, .kind = k, .off = offsetof(hlog_info, f) },
const hlog_counter_def hlog_counter_defs[] = { HLOG_COUNTERS(HLOG_CTR_DEF) { 0 } };
#undef HLOG_CTR_DEF
const unsigned hlog_counter_count = sizeof(hlog_counter_defs) / sizeof(hlog_counter_defs[0]) - 1;

uint64_t hlog_max_record_payload(hlog *l)
{
	/* The largest record minus a header with an expiry: any key + value up to this fits. */
	return l->max_rec - REC_HDR_BYTES - 8;
}

uint64_t hlog_records_visit(hlog *l, hlog_record_fn fn, void *ctx)
{
	uint64_t n = 0;
	uint64_t a = SPW_MAX(atomic_load(&l->begin), atomic_load(&l->head));
	uint64_t end = tail_address(l, atomic_load(&l->tail));
	uint64_t skip;
	/* Head cut a spanning record: its continuation is not a record start. */
	while (a > atomic_load(&l->begin) && (a & (l->page_bytes - 1)) == 0 &&
	       (skip = log_span_cont_end(l, a >> l->page_bits)) != 0)
		a += skip;
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
