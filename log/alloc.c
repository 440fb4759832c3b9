/*
 * alloc.c - the hybrid log's address markers and every move of them: the frames (mapped, used,
 * released), the tail and the page turn, the page writes and FlushedUntil, eviction and SafeHead,
 * FLUSHALL's truncation, the epoch actions behind the Safe markers, the wake-ups of frame waiters,
 * and the sticky error. Every other file of log/ only reads the markers.
 *
 * Calls down: readq.c (IO objects for the page writes), the index (FLUSHALL), the epoch. It calls
 * nothing above it (ops.c, pending.c, scan.c, store.c); a page write's completion comes back
 * through its device request's callback (alloc_write_done).
 *
 * NOTES ON THE DESIGN OF THE ALLOCATOR
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
 *     FLUSHALL (note 9) moves Head at once and SafeReadOnly/FlushedUntil in its epoch action;
 *     nothing compares those (only addresses >= Begin >= Head are ever classified, and pend_cold
 *     checks Begin again).
 *
 *  2. Who moves what (each move is made in this file, by the function in brackets):
 *       Tail         alloc_reserve (fetch_add); the page turn stores (page+1, 0)  [alloc_page_turn]
 *       ReadOnly     page turn: max(RO, start(new page) - mutable_pages * page), and with a
 *                    device at least the Head the turn after next needs (note 8) [alloc_page_turn]
 *                    eviction: the Head a page turn needs, or the end of the
 *                    spanning record that Head would cut                          [alloc_evict_for]
 *                    flush: max(RO, new Head)                                      [alloc_truncate]
 *       SafeReadOnly epoch action after either of those        [alloc_ro_safe, alloc_flush_release]
 *       FlushedUntil no device: = SafeReadOnly (a page "flushes" the moment no thread can
 *                    still write it)                           [alloc_ro_safe, alloc_flush_release]
 *                    device: the page writes' completions, contiguously       [alloc_flush_advance]
 *       Begin        flush: the tail address                                       [alloc_truncate]
 *       Head         eviction: min(wanted Head, FlushedUntil), from a page turn, an IO
 *                    completion or a poll                                       [alloc_evict_maybe]
 *                    flush: the start of Begin's page                              [alloc_truncate]
 *       SafeHead     epoch action after a Head move, once its frames are released
 *                                                        [alloc_frames_release: alloc_evict_action,
 *                                                                              alloc_flush_release]
 *       error        the first failed or short page write (note 10)               [alloc_error_set]
 *     The flush claim, evict_want, ro_bumped/head_bumped, the per-slot flush_done, flush_left,
 *     span marks and frame_used are this file's too. The other files only read the markers:
 *     ops.c classifies records by them, pending.c's frame waits compare SafeHead, scan.c stops
 *     its walks at Head.
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
 *     with 1 GiB pages. Allocation (alloc_reserve) is fetch_add(size) (page_bytes + 8 for a
 *     spanning record, so that it always crosses the page end):
 *       offset + size <= page_bytes          the record is at (page, offset).
 *       offset <= page_bytes < offset + size this thread owns the turn to page + 1 (exactly one).
 *       offset > page_bytes                  someone else owns it: spin (pause, then sched_yield)
 *                                            until the page changes or the tail is restored.
 *     The owner (alloc_page_turn) checks the frames (note 3). No room: it stores the tail back to
 *     (page, offset), or to (page, page_bytes) when it had to close the page (note 8); every thread
 *     that added meanwhile is spinning and used nothing. It fails with SPW_E_LOG_FULL without a
 *     device, LOG_E_WAIT when a page write must finish first (the caller waits: pending.c note 2),
 *     or an internal retry when Head is far enough and only the epoch action is missing. Room: it
 *     marks the frames live, advances ReadOnly, queues the SafeReadOnly action, then publishes
 *     (page + 1, 0). Spinners do not refresh the epoch: they may hold record pointers, and nothing
 *     they could unblock is waited for (the owner never waits).
 *
 *  5. Records: see the layout and bits in record.h. A record of at most page_bytes never spans
 *     pages. A larger one (values of 64 MB and more whatever --page is) is allocated by a page turn
 *     of its own: it starts at the next page and covers N = ceil(size / page) consecutive pages,
 *     and the tail continues right after it inside its last page. Its bytes are contiguous in
 *     memory thanks to the double mapping, and on the device anyway. Limits: N <= max_pages - 1
 *     (the record and the page before it in memory together) and size <= 1 GiB (u32 lengths, one
 *     device request; Redis's bulk limit is 512 MB): max_rec = min((max_pages - 1) * page, 1 GiB),
 *     larger -> SPW_E_TOO_BIG. The turn notes the span per frame slot: span_first at its first
 *     page (FlushedUntil crosses the span in one step, so a record that starts below Head is on
 *     the device whole) and span_cont at the others (the page walker skips the continuation).
 *     A group's span (group.c) is allocated the same way when it is larger than a page
 *     (alloc_reserve_group), but without the marks: its records never cross a page end (group.c
 *     lays fillers there), so each of its pages is an ordinary page to every walker, written and
 *     evicted by itself.
 *
 *  6. Epoch (epoch.c). A session protects before a batch, refreshes between batches. Inside an
 *     operation the log refreshes only on restart paths, where it holds no lock and no pointer. The
 *     epoch actions: alloc_ro_safe (SafeReadOnly; FlushedUntil without a device) after ReadOnly
 *     moved; alloc_evict_action (release frames, SafeHead) after an eviction moved Head;
 *     alloc_flush_release (SafeReadOnly, FlushedUntil, frames, SafeHead) after a flush. Each marker
 *     remembers the value whose action is queued (ro_bumped, head_bumped), so a move queues one
 *     action, and a failed bump (full drain list) is queued again by the next page turn or poll.
 *     A full drain list makes the page turn back out with an internal retry.
 *
 *  7. Flush. Pages are written whole (page_bytes is a multiple of the device's sector, so writes
 *     are sector-aligned and two page writes never overlap) once they are below SafeReadOnly, the
 *     point after which no thread can change them (ops.c note 3). Any session's poll
 *     (alloc_maintain) claims the pages between flush_claimed and SafeReadOnly (one CAS,
 *     alloc_flush_claim) and queues their writes, split into segment-aligned requests of at most
 *     io_chunk bytes, on its own device queue. A session that turned a page claims right away
 *     (alloc_reserve), so in practice the page-turn owner queues the writes and they go out with
 *     its next poll. Each completion (alloc_write_done, on the claiming thread, inside its poll)
 *     counts down flush_left[slot] (page << 16 | parts); the last part stores flush_done[slot] =
 *     page + 1 and calls alloc_flush_advance, which moves FlushedUntil over every consecutive
 *     written page (a spanning record's pages in one step, note 5) with CAS, so completions may
 *     come out of order and on different threads. A failed or short write puts the store in the
 *     sticky error state (note 10).
 *
 *  8. Eviction. A page turn that needs a frame whose page is not below SafeHead asks
 *     alloc_evict_for: evict_want = need; ReadOnly >= need (so the page gets written if it was not
 *     yet read-only); Head = min(evict_want, FlushedUntil) and the frame-release action is queued.
 *     The frame is free once the action ran (every thread has left the epoch in which the page was
 *     visible) and published SafeHead. Until then the turn fails: LOG_E_RETRY (Head is there, only
 *     the epoch is missing: refresh and retry, as without a device) or LOG_E_WAIT (the page write
 *     has not finished). To make waits rare, each turn works ahead: it makes read-only what the
 *     turn after next will need (so its page writes start now, claimed by the turning session
 *     itself, note 7) and evicts what the next turn needs where already written. A page write that
 *     completes moves Head up to evict_want (alloc_evict_maybe), so the frame is freed before the
 *     next turn. A spanning record that need cuts must be written whole before FlushedUntil passes
 *     need (note 5), so ReadOnly goes to its end (alloc_evict_ro). That end can be the turning
 *     thread's own page (only for a spanning allocation right after another one); a turn that fails
 *     then restores the tail as (page, page_bytes): the page is closed, nobody allocates there any
 *     more, and making it read-only is safe. ReadOnly never passes the start of the tail page
 *     otherwise.
 *
 *  9. FLUSHALL (hlog_flush_all in ops.c). alloc_truncate: wait out a page turn in flight, Begin =
 *     tail, hidx_clear_below(Begin), Head and ReadOnly to Begin's page start (with a device also
 *     the flush claim: pages below are never written); ops.c sets the key counts' base; then
 *     alloc_truncate_release queues the epoch action (alloc_flush_release) that advances
 *     SafeReadOnly and FlushedUntil, releases the frames of the pages below the new Head (under
 *     release_mu so that two releases never free a frame a page turn already reused) and only then
 *     publishes SafeHead, which is what lets a page turn reuse them. Operations racing the flush
 *     land before or after it; a record they publish below Begin is simply invisible. Page writes
 *     still in flight below the new Head finish into the truncated part of the device (harmless:
 *     nothing reads there); their per-slot bookkeeping carries the page number, so a stale
 *     completion never counts for the page that reuses the slot. The device's space below Begin
 *     goes with hlog_reclaim (compact.c note 5), which the server's compactor runs.
 *
 * 10. Sticky error. A page write that fails or comes back short stores its error in l->error (first
 *     one wins, alloc_error_set), logs it, and wakes waiters (alloc_signal): from then on every
 *     write (upsert, RMW, delete) returns SPW_E_STORE_ERROR, reads of memory and of pages already
 *     written go on, no more pages are written (FlushedUntil stops, so nothing more is evicted) and
 *     hlog_info.store_error says which error. A failed read fails only its operation.
 */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device.h"
#include "log/alloc_int.h"
#include "log/epoch_int.h"
#include "log/hlog_int.h"
#include "log/readq_int.h"

/* ---------------- frames (notes 3 and 5) ---------------- */

/* The frames: a memfd of mem_bytes mapped twice back to back (note 3). 0 or -errno. */
static int alloc_frames_map(hlog *l)
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

/* Map the frames, allocate the per-slot bookkeeping. 0 or -errno. */
int alloc_open(hlog *l)
{
	int rc = alloc_frames_map(l);
	if (rc < 0)
		return rc;
	l->frame_used = calloc(l->frame_slots, sizeof(*l->frame_used));
	l->flush_done = calloc(l->frame_slots, sizeof(*l->flush_done));
	l->flush_left = calloc(l->frame_slots, sizeof(*l->flush_left));
	l->span_first = calloc(l->frame_slots, sizeof(*l->span_first));
	l->span_cont = calloc(l->frame_slots, sizeof(*l->span_cont));
	if (!l->frame_used || !l->flush_done || !l->flush_left || !l->span_first || !l->span_cont)
		return -ENOMEM;
	return 0;
}

void alloc_close(hlog *l)
{
	if (l->mem != MAP_FAILED)
		munmap(l->mem, 2 * l->mem_bytes);
	if (l->mem_fd >= 0)
		close(l->mem_fd);
	free((void *)l->frame_used);
	free((void *)l->flush_done);
	free((void *)l->flush_left);
	free((void *)l->span_first);
	free((void *)l->span_cont);
}

static void alloc_frame_use(hlog *l, uint64_t page)
{
	uint64_t slot = page & (l->frame_slots - 1);
	if (!atomic_load_explicit(&l->frame_used[slot], memory_order_relaxed)) {
		atomic_store_explicit(&l->frame_used[slot], 1, memory_order_relaxed);
		atomic_fetch_add(&l->allocated_pages, 1);
	}
}

/* An empty log: every marker at the first address, the tail in page 0 (note 1). */
void alloc_start(hlog *l)
{
	atomic_store(&l->begin, HLOG_FIRST_ADDRESS);
	atomic_store(&l->head, HLOG_FIRST_ADDRESS);
	atomic_store(&l->safe_head, HLOG_FIRST_ADDRESS);
	atomic_store(&l->safe_ro, HLOG_FIRST_ADDRESS);
	atomic_store(&l->read_only, HLOG_FIRST_ADDRESS);
	atomic_store(&l->flushed_until, HLOG_FIRST_ADDRESS);
	atomic_store(&l->tail, HLOG_FIRST_ADDRESS);       /* page 0, offset 64 */
	alloc_frame_use(l, 0);
}

static void alloc_frame_release(hlog *l, uint64_t page)
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

/* Release the frames of the pages below head, then publish SafeHead (notes 8 and 9). */
static void alloc_frames_release(hlog *l, uint64_t head)
{
	pthread_mutex_lock(&l->release_mu);
	uint64_t old = atomic_load(&l->safe_head);
	if (head > old) {
		uint64_t first = old >> l->page_bits, end = head >> l->page_bits;
		/* Older pages of the same slots were released when SafeHead passed them. */
		if (end - first > l->frame_slots)
			first = end - l->frame_slots;
		for (uint64_t p = first; p < end; p++)
			alloc_frame_release(l, p);
		marker_advance(&l->safe_head, head);
	}
	pthread_mutex_unlock(&l->release_mu);
}

/* Note 5's marks for a spanning record of size bytes starting at page np: span_first at its first
 * page, span_cont (with the end offset in the last one) at the others. */
void alloc_span_mark(hlog *l, uint64_t np, uint64_t size)
{
	uint64_t mask = l->frame_slots - 1;
	uint64_t last = np + ((size - 1) >> l->page_bits), end = (np << l->page_bits) + size;
	atomic_store(&l->span_first[np & mask], np << 24 | (last - np));
	for (uint64_t p = np + 1; p <= last; p++)
		atomic_store(&l->span_cont[p & mask], p << 32 |
		             (p == last ? end - (last << l->page_bits) : l->page_bytes));
}

/* Recovery: the cut's page continues a spanning record up to offset end (ckpt_meta.cut_page_cont). */
void alloc_span_cont_set(hlog *l, uint64_t p, uint64_t end)
{
	atomic_store(&l->span_cont[p & (l->frame_slots - 1)], p << 32 | end);
}

/* ---------------- wake-ups and the sticky error (pending.c note 2, note 10) ---------------- */

/* Wake sessions with ops waiting for a frame (pending.c note 2), after FlushedUntil, SafeHead or
 * the error moved. */
static void alloc_signal(hlog *l)
{
	if (atomic_load(&l->nwaiting) == 0)
		return;
	pthread_mutex_lock(&l->sig_mu);
	for (int i = 0; i < l->max_sessions; i++) {
		hlog_session *s = &l->sessions[i];
		if (atomic_load(&s->wait_flag) && s->efd >= 0) {
			uint64_t one = 1;
			ssize_t rc = write(s->efd, &one, sizeof(one));
			(void)rc;   /* a full counter is still readable */
		}
	}
	pthread_mutex_unlock(&l->sig_mu);
}

/* The sticky error state (note 10): the first error wins; waiters learn it in their next poll. */
static void alloc_error_set(hlog *l, int err)
{
	int expect = 0;
	if (atomic_compare_exchange_strong(&l->error, &expect, err))
		spw_log(SPW_LOG_WARNING, 0, "Storage tier: a page write failed (%s); the store refuses writes "
		        "from now on", spw_strerror(err));
	alloc_signal(l);
}

/* ---------------- epoch actions (note 6) ---------------- */

/* Epoch action after ReadOnly moved to ro: every thread has seen it, so nobody writes below ro. */
static void alloc_ro_safe(void *ctx, uint64_t ro)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, ro);
	if (!l->dev)
		marker_advance(&l->flushed_until, ro);
	else
		alloc_signal(l);   /* pages to write: a waiting session may be the one to claim them */
}

/* Epoch action after an eviction moved Head: nobody can still hold a pointer below head. */
static void alloc_evict_action(void *ctx, uint64_t head)
{
	hlog *l = ctx;
	alloc_frames_release(l, head);
	alloc_signal(l);
}

/* Epoch action after a flush moved Head to head: nobody can reach a record below Begin any more,
 * so the frames of the pages below head are free (note 9). */
static void alloc_flush_release(void *ctx, uint64_t head)
{
	hlog *l = ctx;
	marker_advance(&l->safe_ro, head);
	marker_advance(&l->flushed_until, head);
	alloc_frames_release(l, head);
	if (l->dev)
		alloc_signal(l);
}

/* Queue the SafeReadOnly / frame-release epoch action for the current ReadOnly / Head unless one is
 * queued already. false when the epoch's drain list was full (a later call queues it). */
static bool alloc_ro_bump(hlog *l)
{
	uint64_t ro = atomic_load(&l->read_only);
	if (ro <= atomic_load(&l->ro_bumped) || ro <= atomic_load(&l->safe_ro))
		return true;
	/* ReadOnly is stored before the bump, so the action runs only after all threads saw it. */
	if (epoch_bump(l->ep, alloc_ro_safe, l, ro) < 0)
		return false;
	marker_advance(&l->ro_bumped, ro);
	return true;
}

static bool alloc_head_bump(hlog *l)
{
	uint64_t h = atomic_load(&l->head);
	if (h <= atomic_load(&l->head_bumped) || h <= atomic_load(&l->safe_head))
		return true;
	if (epoch_bump(l->ep, alloc_evict_action, l, h) < 0)
		return false;
	marker_advance(&l->head_bumped, h);
	return true;
}

/* ---------------- page writes (note 7) ---------------- */

/* Move Head up to what a page turn wants, as far as FlushedUntil allows (note 8). */
static void alloc_evict_maybe(hlog *l)
{
	uint64_t want = atomic_load(&l->evict_want);
	if (want <= atomic_load(&l->head))
		return;
	uint64_t target = SPW_MIN(want, atomic_load(&l->flushed_until));
	marker_advance(&l->head, target);
	alloc_head_bump(l);
}

/* Move FlushedUntil over every consecutive page written whole; a spanning record's pages count as
 * one step (note 5). Completions may race here from several threads: each step is a CAS. */
static void alloc_flush_advance(hlog *l)
{
	uint64_t mask = l->frame_slots - 1;
	bool moved = false;
	for (;;) {
		uint64_t fu = atomic_load(&l->flushed_until);
		uint64_t f = fu >> l->page_bits;
		if (atomic_load(&l->flush_done[f & mask]) != f + 1)
			break;
		uint64_t next = f + 1;
		uint64_t sp = atomic_load(&l->span_first[f & mask]);
		if ((sp >> 24) == f && (sp & 0xffffff) != 0) {
			uint64_t last = f + (sp & 0xffffff), q;
			for (q = f + 1; q <= last; q++)
				if (atomic_load(&l->flush_done[q & mask]) != q + 1)
					break;
			if (q <= last)
				break;
			next = last + 1;
		}
		if (atomic_compare_exchange_strong(&l->flushed_until, &fu, next << l->page_bits))
			moved = true;
	}
	if (moved) {
		alloc_evict_maybe(l);
		alloc_signal(l);
	}
}

/* A page write's completion (its dev_req.done): count the part down, and the last part of a page
 * moves FlushedUntil. A failed or short write puts the store in the sticky error state. */
static void alloc_write_done(dev_req *req, int64_t res)
{
	readq_io *io = (readq_io *)req;
	hlog_session *s = io->s;
	readq_io_completed(s, io);
	hlog *l = s->l;
	uint64_t p = io->page, len = io->len;
	uint64_t slot = p & (l->frame_slots - 1);
	readq_io_put(s, io);
	if (res < 0 || (uint64_t)res != len) {
		alloc_error_set(l, res < 0 ? (int)res : -EIO);
		return;
	}
	uint64_t w = atomic_load(&l->flush_left[slot]);
	do {
		if ((w >> 16) != p)
			return;   /* stale: the slot moved on after a FLUSHALL (note 9) */
	} while (!atomic_compare_exchange_weak(&l->flush_left[slot], &w, w - 1));
	if ((w & 0xffff) != 1)
		return;
	marker_advance(&l->flush_done[slot], p + 1);
	alloc_flush_advance(l);
}

/* Queue the writes of page p (whole, split into io_chunk requests) on this session's queue. */
static void alloc_flush_page(hlog_session *s, uint64_t p)
{
	hlog *l = s->l;
	uint64_t slot = p & (l->frame_slots - 1);
	uint64_t chunk = SPW_MIN(l->page_bytes, l->io_chunk);
	uint64_t n = l->page_bytes / chunk;
	atomic_store(&l->flush_left[slot], p << 16 | n);
	for (uint64_t i = 0; i < n; i++) {
		readq_io *io = readq_io_get(s);
		if (!io) {
			alloc_error_set(l, -ENOMEM);
			return;
		}
		io->write = true;
		io->page = p;
		io->len = chunk;
		io->req.offset = (p << l->page_bits) + i * chunk;
		io->iov.iov_base = l->mem + slot * l->page_bytes + i * chunk;
		io->iov.iov_len = chunk;
		io->req.done = alloc_write_done;
		readq_io_queue(s, io);
	}
	ctr_add(&s->flush_writes, n);
	ctr_add(&s->flush_bytes, l->page_bytes);
}

/* Claim the pages between flush_claimed and SafeReadOnly (one CAS) and queue their writes. */
static void alloc_flush_claim(hlog_session *s)
{
	hlog *l = s->l;
	if (!s->t.q)
		return;   /* not attached: another session's poll claims them */
	uint64_t pmask = ~(l->page_bytes - 1);
	uint64_t c = atomic_load(&l->flush_claimed), t;
	for (;;) {
		t = load_acq(&l->safe_ro) & pmask;
		if (c >= t || atomic_load_explicit(&l->error, memory_order_relaxed))
			return;
		if (atomic_compare_exchange_weak(&l->flush_claimed, &c, t))
			break;
	}
	for (uint64_t p = c >> l->page_bits; p < t >> l->page_bits; p++)
		alloc_flush_page(s, p);
}

bool alloc_written_below(hlog *l, uint64_t addr)
{
	uint64_t target = addr & ~(l->page_bytes - 1), fu = load_acq(&l->flushed_until);
	if (fu >= target)
		return true;
	/* Pages at and above FlushedUntil are all in their frames (none is evicted unwritten), so
	 * each slot's flush_done is its own page's. */
	uint64_t mask = l->frame_slots - 1;
	for (uint64_t p = fu >> l->page_bits; p < target >> l->page_bits; p++)
		if (atomic_load(&l->flush_done[p & mask]) != p + 1)
			return false;
	return true;
}

/* ---------------- eviction (note 8) ---------------- */

/* The ReadOnly an eviction up to need requires: need, or the end of the last page of a spanning
 * record that need cuts (FlushedUntil steps over a spanning record whole, note 5). */
static uint64_t alloc_evict_ro(const hlog *l, uint64_t need)
{
	uint64_t p = need >> l->page_bits;
	if (!(need & (l->page_bytes - 1)) && !log_span_cont_end(l, p))
		return need;
	while (log_span_cont_end(l, p + 1))
		p++;
	return (p + 1) << l->page_bits;
}

/* Page turn with a device: make room for frames below need, with ReadOnly at least ro (see
 * alloc_evict_ro). 0 when SafeHead already passed need (or !wait), else LOG_E_RETRY (only the epoch
 * is missing), LOG_E_WAIT (a page write must finish first) or SPW_E_STORE_ERROR. */
static int alloc_evict_for(hlog *l, uint64_t need, uint64_t ro, bool wait)
{
	if (atomic_load_explicit(&l->error, memory_order_relaxed))
		return SPW_E_STORE_ERROR;
	marker_advance(&l->evict_want, need);
	marker_advance(&l->read_only, ro);   /* the pages must be written to be evicted */
	alloc_ro_bump(l);
	alloc_evict_maybe(l);
	if (!wait || load_acq(&l->safe_head) >= need)
		return 0;
	return load_acq(&l->head) >= need ? LOG_E_RETRY : LOG_E_WAIT;
}

/* ---------------- the tail and the page turn (note 4) ---------------- */

/* Called by the one thread whose fetch_add crossed the end of page (note 4), for a record of size
 * bytes. 0 when the tail now stands at (page + 1, 0), or, for a spanning record (size > page_bytes,
 * note 5), right after the record, whose address is then *addr. Else the tail is restored to
 * (page, off) and SPW_E_LOG_FULL, SPW_E_STORE_ERROR, LOG_E_RETRY or LOG_E_WAIT (with *need, the
 * SafeHead the turn waits for) is returned. */
static int alloc_page_turn(hlog *l, uint64_t page, uint64_t off, uint64_t size, bool mark, uint64_t *addr,
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
				 * this turn's own page (note 8): then that page is closed for good. */
				rc = alloc_evict_for(l, need, alloc_evict_ro(l, need), true);   /* fail: closes page */
			}
			if (rc < 0) {
				*need_out = need;
				goto fail;
			}
		}
	}
	for (uint64_t p = np; p <= last; p++)
		alloc_frame_use(l, p);
	uint64_t end = (np << l->page_bits) + size;
	if (last > np && mark)
		alloc_span_mark(l, np, size);   /* before anyone can write or walk its pages (note 5) */
	uint64_t ro = last > l->mutable_pages ? (last - l->mutable_pages) << l->page_bits : 0;
	if (l->dev && last + 3 > l->max_pages) {
		/* Ahead (note 8): what the turn after next needs becomes read-only (so its write starts
		 * now), and what the next turn needs is evicted where written already. ReadOnly never
		 * passes this turn's last page, the new tail page. */
		uint64_t next = last + 2 > l->max_pages ? (last + 2 - l->max_pages) << l->page_bits : 0;
		uint64_t next2 = (last + 3 - l->max_pages) << l->page_bits;
		uint64_t next_ro = SPW_MIN(alloc_evict_ro(l, next2), last << l->page_bits);
		ro = SPW_MAX(ro, next_ro);
		alloc_evict_for(l, next, next_ro, false);
	}
	marker_advance(&l->read_only, ro);
	if (!alloc_ro_bump(l)) {
		/* The tail stays in page, but ReadOnly has moved (and may have passed page's start, for a
		 * spanning record or the look-ahead above): the span marks go, and the fail path closes
		 * the page if it is read-only now. */
		for (uint64_t p = np; mark && last > np && p <= last; p++)
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
 * (note 7): they go out with its next poll. */
static int64_t alloc_reserve_at(hlog_session *s, uint64_t size, bool mark, uint64_t *need)
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
			int rc = alloc_page_turn(l, page, off, size, mark, &addr, need);
			if (rc < 0)
				return rc;
			if (l->dev)
				alloc_flush_claim(s);
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

int64_t alloc_reserve(hlog_session *s, uint64_t size, uint64_t *need)
{
	return alloc_reserve_at(s, size, true, need);
}

int64_t alloc_reserve_group(hlog_session *s, uint64_t size, uint64_t *need)
{
	return alloc_reserve_at(s, size, false, need);
}

/* ---------------- truncation (FLUSHALL, note 9) and maintenance ---------------- */

/* FLUSHALL (note 9): Begin to the tail, the index below it cleared, ReadOnly, the flush claim and
 * Head to Begin's page start. Returns that Head for alloc_truncate_release. */
uint64_t alloc_truncate(hlog_session *s)
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
	marker_advance(&l->flush_claimed, head & ~(l->page_bytes - 1));   /* never written (note 9) */
	marker_advance(&l->head, head);
	return head;
}

/* Compaction's move of Begin (compact.c note 4), under ckpt_mu as FLUSHALL's: Begin to `to`, a
 * record boundary no higher than what compaction may pass (with a device, below Head; without
 * one, below SafeReadOnly); the caller clears the index entries below it afterwards. The garbage of the units wholly
 * below goes to zero (their slots are reused). Without a device Head and ReadOnly follow Begin's
 * page as in FLUSHALL (note 9), and the frames below are released by alloc_truncate_release with
 * the Head returned; with one nothing in memory changes (0). */
uint64_t alloc_begin_raise(hlog_session *s, uint64_t to)
{
	hlog *l = s->l;
	uint64_t old = load_acq(&l->begin);
	if (!marker_advance(&l->begin, to))
		return 0;
	uint64_t u0 = old >> l->unit_bits, u1 = to >> l->unit_bits;
	if (u1 - u0 > LOG_GARBAGE_SLOTS)
		u0 = u1 - LOG_GARBAGE_SLOTS;
	/* A session adding to a slot at this moment may keep a stale value: statistics. */
	for (int i = 0; i < l->max_sessions; i++)
		for (uint64_t u = u0; u < u1; u++)
			atomic_store_explicit(&l->garbage[(uint64_t)i * LOG_GARBAGE_SLOTS + (u & (LOG_GARBAGE_SLOTS - 1))],
			                      0, memory_order_relaxed);
	if (l->dev)
		return 0;
	uint64_t head = to & ~(l->page_bytes - 1);
	if (head <= load_acq(&l->head))
		return 0;
	marker_advance(&l->read_only, head);
	marker_advance(&l->flush_claimed, head);
	marker_advance(&l->head, head);
	return head;
}

/* The second half of FLUSHALL: the epoch action that advances SafeReadOnly and FlushedUntil and
 * frees the frames below head (alloc_flush_release), then a refresh so that it can run. */
void alloc_truncate_release(hlog_session *s, uint64_t head)
{
	hlog *l = s->l;
	unsigned spins = 0;

	/* The flush holds no record pointer, so it may refresh while it waits for a drain slot. */
	while (epoch_bump(l->ep, alloc_flush_release, l, head) < 0) {
		epoch_refresh(l->ep, s->id);
		log_spin(&spins);
	}
	marker_advance(&l->ro_bumped, head);
	marker_advance(&l->head_bumped, head);
	epoch_refresh(l->ep, s->id);
}

/* ---------------- checkpoint cut and recovery (ckpt.c note 1, recover.c) ---------------- */

/* The cut (ckpt.c note 1): own the tail as a page-turn owner does (note 4), so that no allocation
 * is in progress and none can start; move the tail to a multiple of align (a filler record, garbage
 * to every walker, covers the gap; a page with less than a filler's room left is closed instead);
 * raise ReadOnly to that address; give the tail back. Every record allocated later lies at or
 * above the cut and every change after the new ReadOnly is seen lands there too, so the log below
 * the cut, once SafeReadOnly passes it, is exactly the store at this instant. *begin_out: Begin at
 * the cut (FLUSHALL also owns the tail to move it). gen << 48 | cut goes to cut_word before the
 * tail is given back (ckpt.c note 4). */
uint64_t alloc_cut(hlog_session *s, uint32_t align, uint64_t gen, uint64_t *begin_out)
{
	hlog *l = s->l;
	unsigned spins = 0;
	for (;;) {
		uint64_t w = atomic_fetch_add(&l->tail, l->page_bytes + 8);
		uint64_t page = tail_page(l, w), off = tail_off(l, w);
		if (off > l->page_bytes) {
			for (;;) {
				uint64_t t = load_acq(&l->tail);
				if (tail_page(l, t) != page || tail_off(l, t) <= l->page_bytes)
					break;
				log_spin(&spins);
			}
			continue;
		}
		uint64_t noff = SPW_ALIGN_UP(off, (uint64_t)align), cut;
		if (noff != off && noff - off < REC_HDR_BYTES)
			noff += align;
		if (noff >= l->page_bytes) {
			noff = l->page_bytes;                  /* closed: the next allocation turns the page */
			cut = (page + 1) << l->page_bits;
		} else {
			cut = (page << l->page_bits) + noff;
			if (noff > off) {
				log_rec *f = hlog_rec_at(l, (page << l->page_bits) + off);
				f->key_len = 0;
				f->val_len = (uint32_t)(noff - off - REC_HDR_BYTES);
				atomic_store_explicit(&f->info, REC_SEALED, memory_order_release);   /* garbage */
			}
		}
		*begin_out = load_acq(&l->begin);
		/* Before the tail goes back: every change at or above the cut reads this (ckpt.c note 4). */
		atomic_store_explicit(&l->cut_word, (gen & 0xffff) << 48 | cut, memory_order_release);
		marker_advance(&l->read_only, cut);
		atomic_store_explicit(&l->tail, (page << l->tail_shift) | noff, memory_order_release);
		alloc_ro_bump(l);
		return cut;
	}
}

/* Whether SafeReadOnly has reached cut; queues the epoch action again if a full drain list
 * refused it, and lets due actions run (the caller holds no record). */
bool alloc_cut_safe(hlog_session *s, uint64_t cut)
{
	hlog *l = s->l;
	alloc_ro_bump(l);
	log_epoch_step(s);
	return load_acq(&l->safe_ro) >= cut;
}

/* Recovery (recover.c): the markers of a log that continues at cut, with [head, cut) in memory
 * (the caller has filled those frames). Without a device head is Begin's page and every page up
 * to cut's is in memory; with one, head is cut's page start and only that page is. Nothing else
 * runs on the store yet. */
void alloc_recover(hlog *l, uint64_t begin, uint64_t head, uint64_t cut)
{
	uint64_t pmask = ~(l->page_bytes - 1);
	for (uint64_t i = 0; i < l->frame_slots; i++)
		atomic_store(&l->frame_used[i], 0);
	atomic_store(&l->allocated_pages, 0);
	for (uint64_t p = head >> l->page_bits; p <= cut >> l->page_bits; p++)
		alloc_frame_use(l, p);
	atomic_store(&l->begin, begin);
	atomic_store(&l->head, head);
	atomic_store(&l->safe_head, head);
	atomic_store(&l->head_bumped, head);
	atomic_store(&l->evict_want, head);
	atomic_store(&l->flush_claimed, cut & pmask);
	atomic_store(&l->flushed_until, l->dev ? cut & pmask : cut);
	atomic_store(&l->read_only, cut);
	atomic_store(&l->safe_ro, cut);
	atomic_store(&l->ro_bumped, cut);
	uint64_t page = cut >> l->page_bits, off = cut & (l->page_bytes - 1);
	atomic_store(&l->tail, (page << l->tail_shift) | off);
}

/* A wait inside an operation that holds nothing (FLUSHALL behind a checkpoint's write-out): let
 * the epoch move, and move this session's own device work on (page writes it claimed and has not
 * submitted: the checkpoint may be waiting for exactly those), without ready callbacks, which only
 * a poll runs. */
void alloc_wait_step(hlog_session *s)
{
	log_epoch_step(s);
	if (!s->t.q)
		return;
	alloc_maintain(s);
	readq_pump(s);
}

/* Re-queue actions a full drain list refused, move Head where a completion left it wanted, claim
 * page writes. */
void alloc_maintain(hlog_session *s)
{
	hlog *l = s->l;
	alloc_ro_bump(l);
	alloc_head_bump(l);
	alloc_evict_maybe(l);
	alloc_flush_claim(s);
}
