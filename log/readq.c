/*
 * readq.c - a session's read queue and the IO under it: IO objects and pooled aligned buffers,
 * staging, sharing (identical reads), merging (vectored or copied), the backlog of requests the
 * device refused, submission and reaping, and the session's device queue (attach, fd, close). The
 * bottom of log/: it calls only the device. A read part hands its bytes back through the callback
 * its owner stored in it (readq_io.part_done); a page write through its own dev_req.done.
 *
 * NOTES ON THE DESIGN OF THE READ QUEUE
 *
 *  1. Scatter-gather reads. A record read (one io_chunk part of a fetch's read, pend_fetch_read)
 *     is not handed to the device when it is asked for: it is staged on the session (readq_stage)
 *     until the next submission (readq_submit, i.e. every hlog_session_poll round), so that all the
 *     reads a batch of operations queued go out together in one dev_submit. Two things happen on
 *     the way:
 *       sharing   a read whose (device offset, length) is covered by a read already staged or in
 *                 flight at the same offset (rd_hash, keyed by offset) attaches to it as a
 *                 follower and issues nothing: when the leader's bytes arrive they are copied to
 *                 the follower first, then each goes on through its own fetch (dedup_hits).
 *                 Safe because the device bytes below Head never change (pages are written
 *                 once, alloc.c note 7; a FLUSHALL moves Begin past them for good).
 *       merging   at submission the staged reads are sorted by offset; neighbours whose gap is at
 *                 most one sector (overlapping, same or adjacent sectors) join one device read of
 *                 at most READQ_MERGE_MAX bytes within one io_chunk (readq_stage_flush, readq_merge). When the members do not
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
 *     machine of pending.c note 1 is unchanged; hlog_config.no_read_merge turns both off (each read
 *     goes out alone, as issued). device_reads counts the requests that really went to the device. The
 *     throttle: a request the device refuses (-EAGAIN, --device-throttle-limit or the queue's
 *     depth) waits in the session's backlog (readq_io_queue) and goes out from a later poll, after completions
 *     freed room; the worker never blocks on it, and while its own requests are in flight the
 *     queue's fd wakes it. Counters per session: submissions that handed over >= 1 IO, IOs
 *     handed over, and the requests in flight on the queue right after each (sum and max).
 */

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "log/hlog_int.h"
#include "log/readq_int.h"

#define READQ_POLL_ROUNDS 16         /* submit/reap rounds per pump (completions may queue more) */
#define READQ_REAP_MAX 256
#define READQ_MERGE_MAX (64u << 10)  /* the largest merged read (note 1) */
#define READQ_RD_BUCKETS 1024        /* rd_hash chains: reads queued or in flight, by offset */

static void readq_read_done(dev_req *req, int64_t res);

/* ---------------- IO objects, buffers and the backlog ---------------- */

readq_io *readq_io_get(hlog_session *s)
{
	readq_io *io = s->t.io_free;
	if (SPW_LIKELY(io != NULL)) {
		s->t.io_free = io->next;
	} else {
		io = malloc(sizeof(*io));
		if (!io)
			return NULL;
	}
	memset(io, 0, sizeof(*io));
	io->s = s;
	return io;
}

void readq_io_put(hlog_session *s, readq_io *io)
{
	io->next = s->t.io_free;
	s->t.io_free = io;
}

/* Hand io to the device; behind a backlog, or refused with -EAGAIN (throttle, queue depth), it
 * waits in the backlog (in order) for the next poll. Another refusal fails the request at once,
 * through the completion the caller set (io->req.done). */
static inline void readq_io_accepted(hlog_session *s, readq_io *io)
{
	io->accepted = true;
	atomic_store_explicit(&s->io_accepted, atomic_load_explicit(&s->io_accepted, memory_order_relaxed) + 1,
	                      memory_order_release);
}

void readq_io_completed(hlog_session *s, readq_io *io)
{
	if (io->accepted) {
		io->accepted = false;
		atomic_store_explicit(&s->io_completed,
		                      atomic_load_explicit(&s->io_completed, memory_order_relaxed) + 1,
		                      memory_order_release);
	}
}

void readq_io_queue(hlog_session *s, readq_io *io)
{
	if (io->iovs) {
		io->req.iov = io->iovs;
		io->req.iovcnt = io->niov;
	} else {
		io->req.iov = &io->iov;
		io->req.iovcnt = 1;
	}
	io->req.ctx = io;
	io->next = NULL;
	if (!s->t.backlog_head) {
		int rc = io->write ? dev_write(s->t.q, &io->req) : dev_read(s->t.q, &io->req);
		if (SPW_LIKELY(rc == 0)) {
			readq_io_accepted(s, io);
			s->t.unsubmitted = true;
			return;
		}
		if (rc != -EAGAIN) {
			io->req.done(&io->req, rc);
			return;
		}
	}
	if (s->t.backlog_tail)
		s->t.backlog_tail->next = io;
	else
		s->t.backlog_head = io;
	s->t.backlog_tail = io;
	s->t.backlog++;
	ctr_add(&s->backlog_waits, 1);
}

static void readq_backlog_run(hlog_session *s)
{
	readq_io *io;
	while ((io = s->t.backlog_head) != NULL) {
		int rc = io->write ? dev_write(s->t.q, &io->req) : dev_read(s->t.q, &io->req);
		if (rc == -EAGAIN)
			break;
		s->t.backlog_head = io->next;
		if (!s->t.backlog_head)
			s->t.backlog_tail = NULL;
		s->t.backlog--;
		if (rc != 0) {
			io->req.done(&io->req, rc);
		} else {
			readq_io_accepted(s, io);
			s->t.unsubmitted = true;
		}
	}
}

static uint64_t readq_buf_align(const hlog *l)
{
	return SPW_MAX((uint64_t)4096, (uint64_t)l->dev->mem_align);
}

/* An aligned read buffer of at least want bytes: pooled power-of-two classes from buf_min, beyond
 * them a plain allocation. NULL when memory is short. */
uint8_t *readq_buf_get(hlog_session *s, uint64_t want, uint64_t *cap /* out */)
{
	hlog *l = s->l;
	uint64_t size = l->buf_min;
	int c = 0;
	while (size < want && c < READQ_BUF_CLASSES - 1) {
		size <<= 1;
		c++;
	}
	uint8_t *b = NULL;
	if (size < want) {
		size = SPW_ALIGN_UP(want, readq_buf_align(l));   /* beyond the pooled classes */
	} else if ((b = s->t.buf_free[c]) != NULL) {
		memcpy(&s->t.buf_free[c], b, sizeof(b));
		*cap = size;
		return b;
	}
	b = aligned_alloc(readq_buf_align(l), size);
	if (!b)
		return NULL;
	ctr_add(&s->io_buffer_bytes, size);
	*cap = size;
	return b;
}

void readq_buf_put(hlog_session *s, uint8_t *b, uint64_t cap)
{
	hlog *l = s->l;
	if (!b)
		return;
	for (int c = 0; c < READQ_BUF_CLASSES; c++) {
		if ((l->buf_min << c) == cap) {
			memcpy(b, &s->t.buf_free[c], sizeof(b));
			s->t.buf_free[c] = b;
			return;
		}
	}
	ctr_add(&s->io_buffer_bytes, -cap);
	free(b);
}

/* ---------------- staging, sharing and merging (note 1) ---------------- */

static inline uint32_t readq_rd_bucket(const hlog_session *s, uint64_t off)
{
	return (uint32_t)((off * 0x9E3779B97F4A7C15ULL) >> 40) & s->t.rd_mask;
}

static void readq_rd_unhash(hlog_session *s, readq_io *io)
{
	if (!io->hashed)
		return;
	readq_io **pp = &s->t.rd_hash[readq_rd_bucket(s, io->req.offset)];
	while (*pp != io)
		pp = &(*pp)->hnext;
	*pp = io->hnext;
	io->hashed = false;
}

/* Hand one device read (a part or a merged read) to the device queue. */
static void readq_issue(hlog_session *s, readq_io *io)
{
	ctr_add(&s->device_reads, 1);
	io->req.done = readq_read_done;
	readq_io_queue(s, io);
}

/* A part of a fetch's read: share an identical read already queued or in flight, else stage it for
 * the next submission (readq_stage_flush). Without merging it goes to the device queue at once. */
void readq_stage(hlog_session *s, readq_io *io)
{
	tier_session *t = &s->t;
	if (!s->l->read_merge || !t->rd_hash) {
		readq_issue(s, io);
		return;
	}
	uint32_t b = readq_rd_bucket(s, io->req.offset);
	for (readq_io *m = t->rd_hash[b]; m; m = m->hnext) {
		if (m->req.offset == io->req.offset && m->len >= io->len) {
			io->fnext = m->followers;
			m->followers = io;
			ctr_add(&s->dedup_hits, 1);
			return;
		}
	}
	io->hnext = t->rd_hash[b];
	t->rd_hash[b] = io;
	io->hashed = true;
	io->next = NULL;
	if (t->stage_tail)
		t->stage_tail->next = io;
	else
		t->stage_head = io;
	t->stage_tail = io;
	t->nstaged++;
}

/* A part's bytes are in: src (a merged read's slice) or the part's own buffer, res bytes or -errno.
 * Followers get their copy first: the part's own completion may reuse its fetch's buffer. */
static void readq_deliver(hlog_session *s, readq_io *io, const uint8_t *src, int64_t res)
{
	readq_rd_unhash(s, io);
	const uint8_t *bytes = src ? src : (const uint8_t *)io->iov.iov_base;
	readq_io *fo = io->followers;
	while (fo) {
		readq_io *next = fo->fnext;
		int64_t r = res < 0 ? res : SPW_MIN(res, (int64_t)fo->len);
		if (r > 0)
			memcpy(fo->iov.iov_base, bytes, (size_t)r);
		fo->part_done(s, fo, r);
		fo = next;
	}
	if (src && res > 0)
		memcpy(io->iov.iov_base, src, (size_t)SPW_MIN(res, (int64_t)io->len));
	io->part_done(s, io, res);
}

/* A merged read completed: each member gets its slice, cut where its own read would have been cut
 * (a short result ends at the device's written end). A vectored read put each member's bytes in
 * its own buffer already; otherwise they are copied out of the merged buffer. */
static void readq_merged_done(hlog_session *s, readq_io *g, int64_t res)
{
	readq_io *m = g->members;
	while (m) {
		readq_io *next = m->mnext;
		uint64_t rel = m->req.offset - g->req.offset;
		int64_t r = res;
		if (res >= 0)
			r = (uint64_t)res <= rel ? 0 : (int64_t)SPW_MIN((uint64_t)res - rel, m->len);
		readq_deliver(s, m, g->iovs ? NULL : g->gbuf + rel, r);
		m = next;
	}
	readq_buf_put(s, g->iovs ? (uint8_t *)g->iovs : g->gbuf, g->gcap);
	readq_io_put(s, g);
}

/* One device read of [start, end) for the n staged parts in p (sorted by offset). niov > 0 (the
 * iovecs readq_stage_flush counted: parts that do not overlap, <= DEV_IOV_MAX): vectored, each
 * part's bytes straight into its own buffer and the gaps between parts (at most a sector each, never
 * looked at: concurrent reads may all land there) into the session's gap sector; the iovec array is
 * a pooled buffer. niov == 0 (two parts overlap): one buffer of the merged read's own, copied out on
 * completion. 0, or -ENOMEM (nothing issued: the caller issues the parts alone). */
static int readq_merge(hlog_session *s, readq_io **p, uint32_t n, uint64_t start, uint64_t end, int niov)
{
	tier_session *t = &s->t;
	readq_io *g = readq_io_get(s);
	if (!g)
		return -ENOMEM;
	if (niov > (int)n && !t->gap_buf && !(t->gap_buf = readq_buf_get(s, s->l->sector, &t->gap_cap)))
		niov = 0;
	if (niov && (g->iovs = (struct iovec *)readq_buf_get(s, (uint64_t)niov * sizeof(struct iovec), &g->gcap))) {
		uint64_t pos = start;
		int k = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (p[i]->req.offset > pos)
				g->iovs[k++] = (struct iovec){ t->gap_buf, (size_t)(p[i]->req.offset - pos) };
			g->iovs[k++] = p[i]->iov;
			pos = p[i]->req.offset + p[i]->len;
		}
		g->niov = k;
		ctr_add(&s->vectored_reads, 1);
	} else {
		g->gbuf = readq_buf_get(s, end - start, &g->gcap);
		if (!g->gbuf) {
			readq_io_put(s, g);
			return -ENOMEM;
		}
		g->iov.iov_base = g->gbuf;
		g->iov.iov_len = end - start;
	}
	g->len = end - start;
	g->req.offset = start;
	readq_io **pp = &g->members;
	for (uint32_t i = 0; i < n; i++) {
		*pp = p[i];
		pp = &p[i]->mnext;
	}
	*pp = NULL;
	ctr_add(&s->merged_reads, n - 1);
	readq_issue(s, g);
	return 0;
}

static int readq_io_cmp(const void *a, const void *b)
{
	const readq_io *x = *(readq_io *const *)a, *y = *(readq_io *const *)b;
	if (x->req.offset != y->req.offset)
		return x->req.offset < y->req.offset ? -1 : 1;
	return x->len > y->len ? -1 : x->len < y->len;
}

/* Issue the staged parts: sorted by offset, neighbours whose gap is at most a sector join one read
 * of at most READQ_MERGE_MAX bytes that stays within one io_chunk (and, while no two of them
 * overlap, of at most DEV_IOV_MAX iovecs, so that it can go out vectored). Completions that run at once (a
 * refusal) may stage more: those wait for the next call. */
static void readq_stage_flush(hlog_session *s)
{
	tier_session *t = &s->t;
	hlog *l = s->l;
	uint32_t n = t->nstaged;
	if (!n)
		return;
	readq_io *io = t->stage_head;
	t->stage_head = t->stage_tail = NULL;
	t->nstaged = 0;
	if (n > t->stage_cap) {
		uint32_t cap = SPW_MAX(n, SPW_MAX(64u, t->stage_cap * 2));
		readq_io **arr = realloc(t->stage_arr, (size_t)cap * sizeof(*arr));
		if (!arr) {
			while (io) {   /* no room to sort: each goes out alone, in order */
				readq_io *next = io->next;
				readq_issue(s, io);
				io = next;
			}
			return;
		}
		t->stage_arr = arr;
		t->stage_cap = cap;
	}
	readq_io **arr = t->stage_arr;
	for (uint32_t i = 0; i < n; i++, io = io->next)
		arr[i] = io;
	if (n > 1)
		qsort(arr, n, sizeof(*arr), readq_io_cmp);
	uint64_t chunk_mask = ~(l->io_chunk - 1);
	for (uint32_t i = 0; i < n; ) {
		uint64_t start = arr[i]->req.offset, end = start + arr[i]->len;
		uint32_t j = i + 1;
		int niov = 1;   /* iovecs of the run as a vectored read; 0 once two members overlap */
		while (j < n) {
			const readq_io *b = arr[j];
			uint64_t e = SPW_MAX(end, b->req.offset + b->len);
			if (b->req.offset > end + l->sector || e - start > READQ_MERGE_MAX ||
			    (start & chunk_mask) != ((e - 1) & chunk_mask))
				break;
			if (niov && b->req.offset < end) {
				niov = 0;   /* overlapping members: one buffer and a copy (readq_merge) */
			} else if (niov) {
				int add = 1 + (b->req.offset > end);
				if (niov + add > DEV_IOV_MAX)
					break;   /* a full vectored read: the next one starts at b */
				niov += add;
			}
			end = e;
			j++;
		}
		if (j - i > 1 && readq_merge(s, arr + i, j - i, start, end, niov) == 0) {
			i = j;
			continue;
		}
		for (; i < j; i++)
			readq_issue(s, arr[i]);
	}
}

/* A device read's completion (its dev_req.done): a merged read's members or a lone part get their
 * bytes through readq_deliver. */
static void readq_read_done(dev_req *req, int64_t res)
{
	readq_io *io = (readq_io *)req;
	hlog_session *s = io->s;
	readq_io_completed(s, io);
	if (res > 0)
		ctr_add(&s->device_read_bytes, (uint64_t)res);
	if (io->members)
		readq_merged_done(s, io, res);
	else
		readq_deliver(s, io, NULL, res);
}

/* ---------------- submission and the session's queue ---------------- */

/* Hand what this session queued to the kernel (its own flag: a wrapper device's queue need not
 * count what it passed on to the queue it wraps). */
void readq_submit(hlog_session *s)
{
	readq_stage_flush(s);
	if (s->t.unsubmitted) {
		int rc = dev_submit(s->t.q);
		/* What the kernel did not take (it was short: an error, or a partial submission) stays
		 * queued for a later poll, which the worker makes on a tick (hlog_session_tick), not at
		 * once: retrying in a loop would spin while the kernel stays short. */
		s->t.unsubmitted = s->t.submit_short = rc < 0 || s->t.q->unsubmitted > 0;
		if (rc > 0) {
			uint64_t depth = dev_queue_pending(s->t.q);
			ctr_add(&s->device_submits, 1);
			ctr_add(&s->ios_submitted, (uint64_t)rc);
			ctr_add(&s->queue_depth_sum, depth);
			if (depth > atomic_load_explicit(&s->queue_depth_max, memory_order_relaxed))
				atomic_store_explicit(&s->queue_depth_max, depth, memory_order_relaxed);
		}
	}
}

/* Submit, reap, submit what the callbacks queued, a bounded number of rounds. */
int readq_pump(hlog_session *s)
{
	dev_queue *q = s->t.q;
	int n = 0;
	for (int round = 0; round < READQ_POLL_ROUNDS; round++) {
		s->t.reap_full = false;
		if (s->t.backlog)
			readq_backlog_run(s);
		readq_submit(s);
		if (!dev_queue_pending(q))
			break;
		int r = dev_reap(q, READQ_REAP_MAX);
		if (r <= 0)
			break;
		n += r;
		/* A full last round leaves completions whose signal this poll consumed: the next poll
		 * reaps them (hlog_session_unsubmitted). */
		s->t.reap_full = r == READQ_REAP_MAX;
		/* Another round only when this one left work behind: reads the callbacks queued, or a
		 * full reap. Completions still to come signal the session's fd; reaping again for them
		 * now would chase them with one system call each. */
		if (r < READQ_REAP_MAX && !s->t.unsubmitted && !s->t.backlog && !s->t.nstaged)
			break;
	}
	if (s->t.backlog)
		readq_backlog_run(s);
	readq_submit(s);
	return n;
}

int readq_attach(hlog_session *s)
{
	if (s->l->read_merge && !s->t.rd_hash) {
		if (!(s->t.rd_hash = calloc(READQ_RD_BUCKETS, sizeof(*s->t.rd_hash))))
			return -ENOMEM;
		s->t.rd_mask = READQ_RD_BUCKETS - 1;
	}
	return dev_queue_open(s->l->dev, &s->t.q);
}

void readq_queue_close(hlog_session *s)
{
	hlog *l = s->l;
	tier_session *t = &s->t;
	if (!t->q)
		return;
	t->closing = true;
	readq_submit(s);   /* staged reads go out too: their fetches complete (or fail) normally */
	/* Page writes in the backlog must still reach the device: FlushedUntil waits for them. */
	while (t->backlog) {
		readq_pump(s);
		if (t->backlog && dev_queue_pending(t->q))
			dev_wait(t->q, 1, READQ_WAIT_NS);
		else if (t->backlog)
			sched_yield();
	}
	pthread_mutex_lock(&l->sig_mu);
	s->efd = -1;
	pthread_mutex_unlock(&l->sig_mu);
	dev_queue_close(t->q);   /* waits for what is in flight; callbacks run */
	t->q = NULL;
}

void readq_session_free(hlog_session *s)
{
	hlog *l = s->l;
	tier_session *t = &s->t;
	for (readq_io *io = t->io_free, *next; io; io = next) {
		next = io->next;
		free(io);
	}
	readq_buf_put(s, t->gap_buf, t->gap_cap);   /* into the pool, freed just below */
	t->gap_buf = NULL;
	for (int c = 0; c < READQ_BUF_CLASSES; c++) {
		uint8_t *b = t->buf_free[c];
		while (b) {
			uint8_t *next;
			memcpy(&next, b, sizeof(next));
			ctr_add(&s->io_buffer_bytes, -(l->buf_min << c));
			free(b);
			b = next;
		}
	}
	free(t->stage_arr);
	free(t->rd_hash);
}

int hlog_session_fd(hlog_session *s)
{
	if (!s->t.q)
		return -1;
	if (s->efd >= 0)
		return s->efd;
	int fd = dev_queue_fd(s->t.q);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&s->l->sig_mu);
	s->efd = fd;
	pthread_mutex_unlock(&s->l->sig_mu);
	return fd;
}

uint32_t hlog_session_inflight(hlog_session *s)
{
	/* Staged reads count: the next poll hands them over (as the device counts what it queued). */
	return s->t.q ? dev_queue_pending(s->t.q) + s->t.nstaged : 0;
}

bool hlog_session_unsubmitted(hlog_session *s)
{
	const tier_session *t = &s->t;
	return t->q && ((t->unsubmitted && !t->submit_short) || t->nstaged || t->reap_full || t->q->ndone);
}

bool hlog_session_tick(hlog_session *s)
{
	const tier_session *t = &s->t;
	return t->q && (t->submit_short || (t->backlog && dev_queue_pending(t->q) == 0));
}
