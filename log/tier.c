/*
 * tier.c - the hybrid log's storage tier: page writes and FlushedUntil, eviction and frame waits,
 * pending reads through each session's fetch cache, scatter-gather (merged and shared reads), and
 * the device part of a scan. The design and its invariants are in hlog.c's notes 14-21; this file
 * keeps to the mechanics.
 *
 * Sections: IO objects, buffers and the backlog; page writes; eviction, waits and signals; pending
 * operations (the op table and the ready list); scatter-gather reads; fetches (the record read state
 * machine); the cold branch of a lookup; sessions (attach, poll, release, close); scan.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "log/epoch_int.h"
#include "log/hlog_int.h"

#define TIER_POLL_ROUNDS 16      /* submit/reap rounds per poll (completions may queue more reads) */
#define TIER_REAP_MAX 256
#define TIER_SCAN_WAIT_NS 10000000LL
#define TIER_KEY_MIN 64          /* first key buffer of a fetch entry (grown, never shrunk) */
#define TIER_MERGE_MAX (64u << 10)   /* the largest merged read (note 21) */
#define TIER_RD_BUCKETS 1024     /* rd_hash chains: reads queued or in flight, by offset */

enum { FETCH_READING, FETCH_FOUND, FETCH_ABSENT, FETCH_FAILED };

struct tier_io {
	dev_req req;                 /* first member: the completion finds its io from the request */
	struct iovec iov;
	tier_io *next;               /* free list, backlog */
	hlog_session *s;
	tier_fetch *f;               /* a read's fetch; NULL for a page write */
	uint64_t page;               /* a page write's page */
	uint64_t len;                /* bytes asked */
	uint64_t rel;                /* a read part's offset from f->base */
	bool write;
	/* Scatter-gather (note 21). A record read is a part (f set); a merged read has no fetch and
	 * lists its parts in members. */
	bool hashed;                 /* a part on rd_hash (queued or in flight, may take followers) */
	tier_io *hnext;              /* rd_hash chain */
	tier_io *followers;          /* parts sharing this part's bytes, linked by fnext */
	tier_io *fnext;
	tier_io *members;            /* a merged read: its parts in offset order, linked by mnext */
	tier_io *mnext;
	uint8_t *gbuf;               /* a merged read's own buffer, gcap bytes (not vectored) */
	uint64_t gcap;               /* bytes of gbuf, or of the pooled buffer iovs lives in */
	struct iovec *iovs;          /* a vectored merged read: niov buffers (members' and gap) */
	int niov;
};

struct tier_fetch {
	tier_fetch *next;            /* the op's fetches, or the free list */
	tier_op *op;                 /* NULL for a scan read */
	int state;                   /* FETCH_* */
	int err;                     /* FETCH_FAILED: the error the operation gets */
	uint64_t start;              /* cache key: the cold address the walk reached */
	uint64_t hash;
	uint8_t *key;                /* a copy (the caller's buffer may move), kcap bytes */
	uint32_t klen, kcap;
	uint64_t addr;               /* the record being read; the record found once FOUND */
	uint64_t base;               /* device offset of buf[0] (sector-aligned) */
	uint64_t want;               /* bytes asked from base */
	uint64_t valid;              /* bytes from base that came back */
	uint8_t *buf;
	uint64_t cap;
	uint32_t parts;              /* read requests in flight */
	int part_err;
	bool second;                 /* the read in flight is the whole record after a short first one */
};

struct tier_op {
	tier_op *next;               /* hash chain, or the free list */
	tier_op *ready_next;
	tier_op *wait_next;
	void *op_ctx;
	tier_fetch *fetches;
	uint32_t reads;              /* fetches still reading */
	uint64_t need;               /* waiting: the SafeHead it waits for */
	bool on_ready, waiting, released;
};

/* Scan bookkeeping (note 18). */
typedef struct scan_chain {
	uint64_t addr;               /* next record to read, 0 when the chain is done */
	tier_fetch *f;
	uint32_t seen;               /* newest seen key of this chain (index into seen), or NONE */
} scan_chain;

typedef struct scan_seen {
	uint64_t hash;
	uint64_t off;                /* key bytes in scan_keys */
	uint32_t len;
	uint32_t next;               /* older seen key of the same chain, or NONE */
} scan_seen;

#define SEEN_NONE UINT32_MAX

static void tier_io_done(dev_req *req, int64_t res);
static void tier_read_part_done(hlog_session *s, tier_io *io, int64_t res);
static void tier_fetch_step(hlog_session *s, tier_fetch *f);
static void tier_fetch_finish(hlog_session *s, tier_fetch *f, int state, int err);

/* ---------------- IO objects, buffers and the backlog ---------------- */

static tier_io *tier_io_get(hlog_session *s)
{
	tier_io *io = s->t.io_free;
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

static void tier_io_put(hlog_session *s, tier_io *io)
{
	io->next = s->t.io_free;
	s->t.io_free = io;
}

/* Hand io to the device; behind a backlog, or refused with -EAGAIN (throttle, queue depth), it
 * waits in the backlog (in order) for the next poll. Another refusal fails the request at once. */
static void tier_io_queue(hlog_session *s, tier_io *io)
{
	if (io->iovs) {
		io->req.iov = io->iovs;
		io->req.iovcnt = io->niov;
	} else {
		io->req.iov = &io->iov;
		io->req.iovcnt = 1;
	}
	io->req.done = tier_io_done;
	io->req.ctx = io;
	io->next = NULL;
	if (!s->t.backlog_head) {
		int rc = io->write ? dev_write(s->t.q, &io->req) : dev_read(s->t.q, &io->req);
		if (SPW_LIKELY(rc == 0)) {
			s->t.unsubmitted = true;
			return;
		}
		if (rc != -EAGAIN) {
			tier_io_done(&io->req, rc);
			return;
		}
	}
	if (s->t.backlog_tail)
		s->t.backlog_tail->next = io;
	else
		s->t.backlog_head = io;
	s->t.backlog_tail = io;
	s->t.backlog++;
}

static void tier_backlog_run(hlog_session *s)
{
	tier_io *io;
	while ((io = s->t.backlog_head) != NULL) {
		int rc = io->write ? dev_write(s->t.q, &io->req) : dev_read(s->t.q, &io->req);
		if (rc == -EAGAIN)
			break;
		s->t.backlog_head = io->next;
		if (!s->t.backlog_head)
			s->t.backlog_tail = NULL;
		s->t.backlog--;
		if (rc != 0)
			tier_io_done(&io->req, rc);
		else
			s->t.unsubmitted = true;
	}
}

static uint64_t tier_buf_align(const hlog *l)
{
	return SPW_MAX((uint64_t)4096, (uint64_t)l->dev->mem_align);
}

/* An aligned read buffer of at least want bytes: pooled power-of-two classes from buf_min, beyond
 * them a plain allocation. NULL when memory is short. */
static uint8_t *tier_buf_get(hlog_session *s, uint64_t want, uint64_t *cap /* out */)
{
	hlog *l = s->l;
	uint64_t size = l->buf_min;
	int c = 0;
	while (size < want && c < TIER_BUF_CLASSES - 1) {
		size <<= 1;
		c++;
	}
	uint8_t *b = NULL;
	if (size < want) {
		size = SPW_ALIGN_UP(want, tier_buf_align(l));   /* beyond the pooled classes */
	} else if ((b = s->t.buf_free[c]) != NULL) {
		memcpy(&s->t.buf_free[c], b, sizeof(b));
		*cap = size;
		return b;
	}
	b = aligned_alloc(tier_buf_align(l), size);
	if (!b)
		return NULL;
	ctr_add(&s->io_buffer_bytes, size);
	*cap = size;
	return b;
}

static void tier_buf_put(hlog_session *s, uint8_t *b, uint64_t cap)
{
	hlog *l = s->l;
	if (!b)
		return;
	for (int c = 0; c < TIER_BUF_CLASSES; c++) {
		if ((l->buf_min << c) == cap) {
			memcpy(b, &s->t.buf_free[c], sizeof(b));
			s->t.buf_free[c] = b;
			return;
		}
	}
	ctr_add(&s->io_buffer_bytes, -cap);
	free(b);
}

/* ---------------- page writes (note 14) ---------------- */

/* The sticky error state (note 19): the first error wins; waiters learn it in their next poll. */
static void tier_error_set(hlog *l, int err)
{
	int expect = 0;
	if (atomic_compare_exchange_strong(&l->error, &expect, err))
		spw_log(SPW_LOG_WARNING, 0, "Storage tier: a page write failed (%s); the store refuses writes "
		        "from now on", spw_strerror(err));
	tier_signal(l);
}

/* Move Head up to what a page turn wants, as far as FlushedUntil allows (note 15). */
static void tier_evict_maybe(hlog *l)
{
	uint64_t want = atomic_load(&l->evict_want);
	if (want <= atomic_load(&l->head))
		return;
	uint64_t target = SPW_MIN(want, atomic_load(&l->flushed_until));
	marker_advance(&l->head, target);
	log_head_bump(l);
}

/* Move FlushedUntil over every consecutive page written whole; a spanning record's pages count as
 * one step (note 5). Completions may race here from several threads: each step is a CAS. */
static void tier_flush_advance(hlog *l)
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
		tier_evict_maybe(l);
		tier_signal(l);
	}
}

static void tier_write_done(hlog_session *s, tier_io *io, int64_t res)
{
	hlog *l = s->l;
	uint64_t p = io->page, len = io->len;
	uint64_t slot = p & (l->frame_slots - 1);
	tier_io_put(s, io);
	if (res < 0 || (uint64_t)res != len) {
		tier_error_set(l, res < 0 ? (int)res : -EIO);
		return;
	}
	uint64_t w = atomic_load(&l->flush_left[slot]);
	do {
		if ((w >> 16) != p)
			return;   /* stale: the slot moved on after a FLUSHALL (note 12) */
	} while (!atomic_compare_exchange_weak(&l->flush_left[slot], &w, w - 1));
	if ((w & 0xffff) != 1)
		return;
	marker_advance(&l->flush_done[slot], p + 1);
	tier_flush_advance(l);
}

/* Queue the writes of page p (whole, split into io_chunk requests) on this session's queue. */
static void tier_flush_page(hlog_session *s, uint64_t p)
{
	hlog *l = s->l;
	uint64_t slot = p & (l->frame_slots - 1);
	uint64_t chunk = SPW_MIN(l->page_bytes, l->io_chunk);
	uint64_t n = l->page_bytes / chunk;
	atomic_store(&l->flush_left[slot], p << 16 | n);
	for (uint64_t i = 0; i < n; i++) {
		tier_io *io = tier_io_get(s);
		if (!io) {
			tier_error_set(l, -ENOMEM);
			return;
		}
		io->write = true;
		io->page = p;
		io->len = chunk;
		io->req.offset = (p << l->page_bits) + i * chunk;
		io->iov.iov_base = l->mem + slot * l->page_bytes + i * chunk;
		io->iov.iov_len = chunk;
		tier_io_queue(s, io);
	}
	ctr_add(&s->flush_writes, n);
	ctr_add(&s->flush_bytes, l->page_bytes);
}

/* Claim the pages between flush_claimed and SafeReadOnly (one CAS) and queue their writes. */
void tier_flush_claim(hlog_session *s)
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
		tier_flush_page(s, p);
}

/* ---------------- eviction, waits and signals (notes 15 and 17) ---------------- */

int tier_evict_for(hlog *l, uint64_t need, uint64_t ro, bool wait)
{
	if (atomic_load_explicit(&l->error, memory_order_relaxed))
		return SPW_E_STORE_ERROR;
	marker_advance(&l->evict_want, need);
	marker_advance(&l->read_only, ro);   /* the pages must be written to be evicted */
	log_ro_bump(l);
	tier_evict_maybe(l);
	if (!wait || load_acq(&l->safe_head) >= need)
		return 0;
	return load_acq(&l->head) >= need ? LOG_E_RETRY : LOG_E_WAIT;
}

void tier_signal(hlog *l)
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

static void tier_wait_flag(hlog_session *s, bool on)
{
	atomic_store(&s->wait_flag, on ? 1 : 0);
	if (on)
		atomic_fetch_add(&s->l->nwaiting, 1);
	else
		atomic_fetch_sub(&s->l->nwaiting, 1);
}

/* ---------------- pending operations ---------------- */

static inline uint32_t tier_op_bucket(const hlog_session *s, const void *op_ctx)
{
	return (uint32_t)(((uint64_t)(uintptr_t)op_ctx * 0x9E3779B97F4A7C15ULL) >> 40) & s->t.ops_mask;
}

static tier_op *tier_op_find(hlog_session *s, void *op_ctx)
{
	if (!s->t.ops)
		return NULL;
	for (tier_op *op = s->t.ops[tier_op_bucket(s, op_ctx)]; op; op = op->next)
		if (op->op_ctx == op_ctx)
			return op;
	return NULL;
}

static int tier_ops_grow(hlog_session *s)
{
	uint32_t n = s->t.ops ? (s->t.ops_mask + 1) * 2 : 64;
	tier_op **old = s->t.ops;
	uint32_t old_n = old ? s->t.ops_mask + 1 : 0;
	tier_op **t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->t.ops = t;
	s->t.ops_mask = n - 1;
	for (uint32_t i = 0; i < old_n; i++) {
		tier_op *op = old[i];
		while (op) {
			tier_op *next = op->next;
			uint32_t b = tier_op_bucket(s, op->op_ctx);
			op->next = t[b];
			t[b] = op;
			op = next;
		}
	}
	free(old);
	return 0;
}

/* A new op for op_ctx, which has none (tier_op_find said so). */
static tier_op *tier_op_new(hlog_session *s, void *op_ctx)
{
	tier_op *op;
	if ((!s->t.ops || s->t.ops_count >= s->t.ops_mask + 1) && tier_ops_grow(s) < 0)
		return NULL;
	op = s->t.op_free;
	if (op)
		s->t.op_free = op->next;
	else if (!(op = malloc(sizeof(*op))))
		return NULL;
	memset(op, 0, sizeof(*op));
	op->op_ctx = op_ctx;
	uint32_t b = tier_op_bucket(s, op_ctx);
	op->next = s->t.ops[b];
	s->t.ops[b] = op;
	s->t.ops_count++;
	return op;
}

static tier_op *tier_op_get(hlog_session *s, void *op_ctx)
{
	tier_op *op = tier_op_find(s, op_ctx);
	return op ? op : tier_op_new(s, op_ctx);
}

static void tier_op_unlink(hlog_session *s, tier_op *op)
{
	tier_op **pp = &s->t.ops[tier_op_bucket(s, op->op_ctx)];
	while (*pp != op)
		pp = &(*pp)->next;
	*pp = op->next;
	s->t.ops_count--;
}

static void tier_fetch_put(hlog_session *s, tier_fetch *f)
{
	tier_buf_put(s, f->buf, f->cap);
	f->buf = NULL;
	f->cap = 0;
	f->next = s->t.fetch_free;
	s->t.fetch_free = f;
}

/* Free a released op once nothing refers to it any more (reads, ready list, wait list). */
static void tier_op_maybe_free(hlog_session *s, tier_op *op)
{
	if (!op->released || op->reads || op->on_ready || op->waiting)
		return;
	tier_fetch *f = op->fetches;
	while (f) {
		tier_fetch *next = f->next;
		tier_fetch_put(s, f);
		f = next;
	}
	op->next = s->t.op_free;
	s->t.op_free = op;
}

static void tier_ready_push(hlog_session *s, tier_op *op)
{
	if (op->on_ready)
		return;
	op->on_ready = true;
	op->ready_next = NULL;
	if (s->t.ready_tail)
		s->t.ready_tail->ready_next = op;
	else
		s->t.ready_head = op;
	s->t.ready_tail = op;
}

/* Ready callbacks, at the end of hlog_session_poll only (note 20). The callback may release its
 * op: nothing of op is touched after the call. */
static void tier_ready_run(hlog_session *s)
{
	tier_op *op = s->t.ready_head;
	s->t.ready_head = s->t.ready_tail = NULL;
	while (op) {
		tier_op *next = op->ready_next;
		op->on_ready = false;
		if (op->released)
			tier_op_maybe_free(s, op);
		else if (op->reads == 0 && s->t.ready)   /* re-run early and reading again: wait for those */
			s->t.ready(s->t.cb_arg, op->op_ctx);
		op = next;
	}
}

/* Hand the waiting ops whose frame is free (or whose store failed) to the ready list. */
static void tier_waiters_check(hlog_session *s)
{
	hlog *l = s->l;
	if (!s->t.nwait)
		return;
	uint64_t sh = load_acq(&l->safe_head);
	bool failed = atomic_load(&l->error) != 0;
	tier_op **pp = &s->t.wait_head;
	tier_op *op;
	while ((op = *pp) != NULL) {
		if (op->released || sh >= op->need || failed) {
			*pp = op->wait_next;
			op->waiting = false;
			s->t.nwait--;
			if (op->released)
				tier_op_maybe_free(s, op);
			else
				tier_ready_push(s, op);
		} else {
			pp = &op->wait_next;
		}
	}
	if (!s->t.nwait)
		tier_wait_flag(s, false);
}

int tier_wait(hlog_session *s, uint64_t need)
{
	hlog *l = s->l;
	if (!s->t.q)
		return -ENOTCONN;
	tier_op *op = tier_op_get(s, s->t.op_ctx);
	if (!op)
		return -ENOMEM;
	ctr_add(&s->flush_waits, 1);
	if (!op->waiting) {
		op->waiting = true;
		op->need = need;
		op->wait_next = s->t.wait_head;
		s->t.wait_head = op;
		if (s->t.nwait++ == 0)
			tier_wait_flag(s, true);
	} else if (need > op->need) {
		op->need = need;
	}
	/* The flag is published (seq_cst) before SafeHead is read (seq_cst), and the signaller moves
	 * SafeHead before it reads the flags: one of the two sees the other (note 17). */
	if (atomic_load(&l->safe_head) >= need && !atomic_load(&l->error)) {
		tier_op **pp = &s->t.wait_head;
		while (*pp != op)
			pp = &(*pp)->wait_next;
		*pp = op->wait_next;
		op->waiting = false;
		if (--s->t.nwait == 0)
			tier_wait_flag(s, false);
		return 0;
	}
	return HLOG_PENDING;
}

/* ---------------- scatter-gather reads (note 21) ---------------- */

static inline uint32_t tier_rd_bucket(const hlog_session *s, uint64_t off)
{
	return (uint32_t)((off * 0x9E3779B97F4A7C15ULL) >> 40) & s->t.rd_mask;
}

static void tier_rd_unhash(hlog_session *s, tier_io *io)
{
	if (!io->hashed)
		return;
	tier_io **pp = &s->t.rd_hash[tier_rd_bucket(s, io->req.offset)];
	while (*pp != io)
		pp = &(*pp)->hnext;
	*pp = io->hnext;
	io->hashed = false;
}

/* Hand one device read (a part or a merged read) to the device queue. */
static void tier_read_issue(hlog_session *s, tier_io *io)
{
	ctr_add(&s->device_reads, 1);
	tier_io_queue(s, io);
}

/* A part of a fetch's read: share an identical read already queued or in flight, else stage it for
 * the next submission (tier_stage_flush). Without merging it goes to the device queue at once. */
static void tier_read_stage(hlog_session *s, tier_io *io)
{
	tier_session *t = &s->t;
	if (!s->l->read_merge || !t->rd_hash) {
		tier_read_issue(s, io);
		return;
	}
	uint32_t b = tier_rd_bucket(s, io->req.offset);
	for (tier_io *m = t->rd_hash[b]; m; m = m->hnext) {
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
static void tier_read_deliver(hlog_session *s, tier_io *io, const uint8_t *src, int64_t res)
{
	tier_rd_unhash(s, io);
	const uint8_t *bytes = src ? src : io->f->buf + io->rel;
	tier_io *fo = io->followers;
	while (fo) {
		tier_io *next = fo->fnext;
		int64_t r = res < 0 ? res : SPW_MIN(res, (int64_t)fo->len);
		if (r > 0)
			memcpy(fo->f->buf + fo->rel, bytes, (size_t)r);
		tier_read_part_done(s, fo, r);
		fo = next;
	}
	if (src && res > 0)
		memcpy(io->f->buf + io->rel, src, (size_t)SPW_MIN(res, (int64_t)io->len));
	tier_read_part_done(s, io, res);
}

/* A merged read completed: each member gets its slice, cut where its own read would have been cut
 * (a short result ends at the device's written end). A vectored read put each member's bytes in
 * its own buffer already; otherwise they are copied out of the merged buffer. */
static void tier_merged_done(hlog_session *s, tier_io *g, int64_t res)
{
	tier_io *m = g->members;
	while (m) {
		tier_io *next = m->mnext;
		uint64_t rel = m->req.offset - g->req.offset;
		int64_t r = res;
		if (res >= 0)
			r = (uint64_t)res <= rel ? 0 : (int64_t)SPW_MIN((uint64_t)res - rel, m->len);
		tier_read_deliver(s, m, g->iovs ? NULL : g->gbuf + rel, r);
		m = next;
	}
	tier_buf_put(s, g->iovs ? (uint8_t *)g->iovs : g->gbuf, g->gcap);
	tier_io_put(s, g);
}

/* One device read of [start, end) for the n staged parts in p (sorted by offset). niov > 0 (the
 * iovecs tier_stage_flush counted: parts that do not overlap, <= DEV_IOV_MAX): vectored, each part's
 * bytes straight into its own buffer and the gaps between parts (at most a sector each, never looked
 * at: concurrent reads may all land there) into the session's gap sector; the iovec array is a pooled
 * buffer. niov == 0 (two parts overlap): one buffer of the merged read's own, copied out on
 * completion. 0, or -ENOMEM (nothing issued: the caller issues the parts alone). */
static int tier_read_merge(hlog_session *s, tier_io **p, uint32_t n, uint64_t start, uint64_t end, int niov)
{
	tier_session *t = &s->t;
	tier_io *g = tier_io_get(s);
	if (!g)
		return -ENOMEM;
	if (niov > (int)n && !t->gap_buf && !(t->gap_buf = tier_buf_get(s, s->l->sector, &t->gap_cap)))
		niov = 0;
	if (niov && (g->iovs = (struct iovec *)tier_buf_get(s, (uint64_t)niov * sizeof(struct iovec), &g->gcap))) {
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
		g->gbuf = tier_buf_get(s, end - start, &g->gcap);
		if (!g->gbuf) {
			tier_io_put(s, g);
			return -ENOMEM;
		}
		g->iov.iov_base = g->gbuf;
		g->iov.iov_len = end - start;
	}
	g->len = end - start;
	g->req.offset = start;
	tier_io **pp = &g->members;
	for (uint32_t i = 0; i < n; i++) {
		*pp = p[i];
		pp = &p[i]->mnext;
	}
	*pp = NULL;
	ctr_add(&s->merged_reads, n - 1);
	tier_read_issue(s, g);
	return 0;
}

static int tier_io_cmp(const void *a, const void *b)
{
	const tier_io *x = *(tier_io *const *)a, *y = *(tier_io *const *)b;
	if (x->req.offset != y->req.offset)
		return x->req.offset < y->req.offset ? -1 : 1;
	return x->len > y->len ? -1 : x->len < y->len;
}

/* Issue the staged parts: sorted by offset, neighbours whose gap is at most a sector join one read
 * of at most TIER_MERGE_MAX bytes that stays within one io_chunk (and, while no two of them overlap,
 * of at most DEV_IOV_MAX iovecs, so that it can go out vectored). Completions that run at once (a
 * refusal) may stage more: those wait for the next call. */
static void tier_stage_flush(hlog_session *s)
{
	tier_session *t = &s->t;
	hlog *l = s->l;
	uint32_t n = t->nstaged;
	if (!n)
		return;
	tier_io *io = t->stage_head;
	t->stage_head = t->stage_tail = NULL;
	t->nstaged = 0;
	if (n > t->stage_cap) {
		uint32_t cap = SPW_MAX(n, SPW_MAX(64u, t->stage_cap * 2));
		tier_io **arr = realloc(t->stage_arr, (size_t)cap * sizeof(*arr));
		if (!arr) {
			while (io) {   /* no room to sort: each goes out alone, in order */
				tier_io *next = io->next;
				tier_read_issue(s, io);
				io = next;
			}
			return;
		}
		t->stage_arr = arr;
		t->stage_cap = cap;
	}
	tier_io **arr = t->stage_arr;
	for (uint32_t i = 0; i < n; i++, io = io->next)
		arr[i] = io;
	if (n > 1)
		qsort(arr, n, sizeof(*arr), tier_io_cmp);
	uint64_t chunk_mask = ~(l->io_chunk - 1);
	for (uint32_t i = 0; i < n; ) {
		uint64_t start = arr[i]->req.offset, end = start + arr[i]->len;
		uint32_t j = i + 1;
		int niov = 1;   /* iovecs of the run as a vectored read; 0 once two members overlap */
		while (j < n) {
			const tier_io *b = arr[j];
			uint64_t e = SPW_MAX(end, b->req.offset + b->len);
			if (b->req.offset > end + l->sector || e - start > TIER_MERGE_MAX ||
			    (start & chunk_mask) != ((e - 1) & chunk_mask))
				break;
			if (niov && b->req.offset < end) {
				niov = 0;   /* overlapping members: one buffer and a copy (tier_read_merge) */
			} else if (niov) {
				int add = 1 + (b->req.offset > end);
				if (niov + add > DEV_IOV_MAX)
					break;   /* a full vectored read: the next one starts at b */
				niov += add;
			}
			end = e;
			j++;
		}
		if (j - i > 1 && tier_read_merge(s, arr + i, j - i, start, end, niov) == 0) {
			i = j;
			continue;
		}
		for (; i < j; i++)
			tier_read_issue(s, arr[i]);
	}
}

/* ---------------- fetches: the record read state machine (note 16) ---------------- */

static tier_fetch *tier_fetch_new(hlog_session *s)
{
	tier_fetch *f = s->t.fetch_free;
	if (f) {
		s->t.fetch_free = f->next;
		uint8_t *key = f->key;
		uint32_t kcap = f->kcap;
		memset(f, 0, sizeof(*f));
		f->key = key;
		f->kcap = kcap;
	} else if (!(f = calloc(1, sizeof(*f)))) {
		return NULL;
	}
	return f;
}

/* Read len bytes of the record at addr (rounded out to sectors) into f's buffer, in io_chunk
 * pieces. The completion of the last piece runs tier_fetch_step. */
static void tier_fetch_read(hlog_session *s, tier_fetch *f, uint64_t addr, uint64_t len, bool second)
{
	hlog *l = s->l;
	uint64_t sec = l->sector;
	uint64_t base = addr & ~(sec - 1);
	uint64_t want = SPW_ALIGN_UP(addr + len, sec) - base;
	if (want > DEV_MAX_BYTES - base)
		want = DEV_MAX_BYTES - base;
	if (f->cap < want) {
		tier_buf_put(s, f->buf, f->cap);
		f->cap = 0;
		f->buf = tier_buf_get(s, want, &f->cap);
		if (!f->buf) {
			tier_fetch_finish(s, f, FETCH_FAILED, -ENOMEM);
			return;
		}
	}
	f->addr = addr;
	f->base = base;
	f->want = want;
	f->valid = want;
	f->part_err = 0;
	f->second = second;
	uint32_t n = 0;
	for (uint64_t o = base; o < base + want; o = (o & ~(l->io_chunk - 1)) + l->io_chunk)
		n++;
	/* All parts are counted before the first is queued: a refused one completes at once. */
	f->parts = n;
	for (uint64_t o = base; o < base + want; ) {
		uint64_t e = SPW_MIN((o & ~(l->io_chunk - 1)) + l->io_chunk, base + want);
		tier_io *io = tier_io_get(s);
		if (!io) {
			if (!f->part_err)
				f->part_err = -ENOMEM;
			if (--f->parts == 0)
				tier_fetch_step(s, f);
		} else {
			io->f = f;
			io->len = e - o;
			io->rel = o - base;
			io->req.offset = o;
			io->iov.iov_base = f->buf + (o - base);
			io->iov.iov_len = e - o;
			tier_read_stage(s, io);
		}
		o = e;
	}
}

/* One part of a fetch's read is in (res bytes, or -errno); the last part runs the state machine. */
static void tier_read_part_done(hlog_session *s, tier_io *io, int64_t res)
{
	tier_fetch *f = io->f;
	if (res < 0) {
		if (!f->part_err)
			f->part_err = (int)res;
	} else if ((uint64_t)res < io->len && io->rel + (uint64_t)res < f->valid) {
		f->valid = io->rel + (uint64_t)res;   /* short: at the device's written end */
	}
	tier_io_put(s, io);
	if (--f->parts == 0)
		tier_fetch_step(s, f);
}

static void tier_io_done(dev_req *req, int64_t res)
{
	tier_io *io = (tier_io *)req;
	hlog_session *s = io->s;
	if (io->write) {
		tier_write_done(s, io, res);
		return;
	}
	if (res > 0)
		ctr_add(&s->device_read_bytes, (uint64_t)res);
	if (io->members)
		tier_merged_done(s, io, res);
	else
		tier_read_deliver(s, io, NULL, res);
}

static void tier_fetch_finish(hlog_session *s, tier_fetch *f, int state, int err)
{
	f->state = state;
	f->err = err;
	if (!f->op) {
		s->t.scan_inflight--;
		return;
	}
	if (state == FETCH_FAILED) {
		ctr_add(&s->pending_errors, 1);
	} else if (state == FETCH_FOUND) {
		const log_rec *r = (const log_rec *)(f->buf + (f->addr - f->base));
		uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
		ctr_add((info & REC_TOMBSTONE) ? &s->pending_notfound : &s->pending_found, 1);
	} else {
		ctr_add(&s->pending_notfound, 1);
	}
	tier_op *op = f->op;
	if (--op->reads == 0) {
		if (op->released)
			tier_op_maybe_free(s, op);
		else if (!s->t.issuing)   /* refused at once: the operation returns the error itself */
			tier_ready_push(s, op);
	}
}

/* Every part of f's read is in: decide what the bytes say (the state diagram of note 16). */
static void tier_fetch_step(hlog_session *s, tier_fetch *f)
{
	hlog *l = s->l;
	if (f->part_err) {
		tier_fetch_finish(s, f, FETCH_FAILED, f->part_err);
		return;
	}
	uint64_t off = f->addr - f->base;
	const log_rec *r = (const log_rec *)(f->buf + off);
	uint64_t info = f->valid >= off + REC_HDR_BYTES ? atomic_load_explicit(&r->info, memory_order_relaxed) : 0;
	if (!info || ((info & REC_HAS_EXPIRY) && f->valid < off + REC_HDR_BYTES + 8)) {
		tier_fetch_finish(s, f, FETCH_FAILED, -EIO);   /* short where a record must be */
		return;
	}
	uint64_t size = rec_size(r, info);
	uint64_t prev = info & REC_PREV_MASK;
	if (!(info & REC_VALID) || size > l->max_rec || prev >= f->addr) {
		tier_fetch_finish(s, f, FETCH_FAILED, SPW_E_CORRUPT);
		return;
	}
	bool scan = f->op == NULL;
	uint64_t key_end = off + (uint64_t)(rec_key(r, info) - (const uint8_t *)r) + r->key_len;
	bool key_in = f->valid >= key_end;
	bool same = key_in && r->key_len == f->klen && memcmp(rec_key(r, info), f->key, f->klen) == 0;
	if (scan || same || !key_in) {
		if (f->valid < off + size) {
			if (f->second || f->want >= off + size || s->t.closing) {
				tier_fetch_finish(s, f, FETCH_FAILED, s->t.closing ? -ECANCELED : -EIO);
				return;
			}
			ctr_add(&s->second_reads, 1);
			tier_fetch_read(s, f, f->addr, size, true);
			return;
		}
		if (scan || same) {
			tier_fetch_finish(s, f, FETCH_FOUND, 0);
			return;
		}
	}
	/* Another key sharing the tag: its older records are on the device too. */
	if (prev < load_acq(&l->begin)) {
		tier_fetch_finish(s, f, FETCH_ABSENT, 0);
		return;
	}
	if (s->t.closing) {
		tier_fetch_finish(s, f, FETCH_FAILED, -ECANCELED);
		return;
	}
	ctr_add(&s->chain_reads, 1);
	tier_fetch_read(s, f, prev, l->initial_io, false);
}

/* ---------------- the cold branch of a lookup ---------------- */

/*
 * The chain walk for k reached addr (Begin <= addr < Head): the newest version of k at or below addr
 * is on the device (note 16). TIER_FOUND with *r and *info (a private copy, valid until op_ctx is
 * released), TIER_ABSENT, HLOG_PENDING (a read is queued or in flight for this op; with !queue:
 * nothing cached, nothing queued), or a negative error (the read failed; -ENOTCONN: no queue).
 */
int tier_cold(hlog_session *s, const hlog_key *k, uint64_t addr, bool queue, log_rec **r, uint64_t *info)
{
	hlog *l = s->l;
	if (addr < load_acq(&l->begin) || !l->dev)
		return TIER_ABSENT;   /* a FLUSHALL raced the walk (note 1) */
	tier_op *op = tier_op_find(s, s->t.op_ctx);
	if (op) {
		for (tier_fetch *f = op->fetches; f; f = f->next) {
			if (f->start != addr || f->hash != k->hash || f->klen != k->len ||
			    memcmp(f->key, k->ptr, k->len) != 0)
				continue;
			switch (f->state) {
			case FETCH_READING:
				return HLOG_PENDING;
			case FETCH_FAILED:
				return f->err;
			case FETCH_ABSENT:
				ctr_add(&s->pending_hits, 1);
				return TIER_ABSENT;
			default:
				ctr_add(&s->pending_hits, 1);
				*r = (log_rec *)(f->buf + (f->addr - f->base));
				*info = atomic_load_explicit(&(*r)->info, memory_order_relaxed) &
				        ~(REC_LOCK_X | REC_LOCK_S_MASK);
				return TIER_FOUND;
			}
		}
	}
	if (!queue)
		return HLOG_PENDING;
	if (!s->t.q)
		return -ENOTCONN;
	if (!op && !(op = tier_op_new(s, s->t.op_ctx)))
		return -ENOMEM;
	tier_fetch *f = tier_fetch_new(s);
	if (!f)
		return -ENOMEM;
	if (f->kcap < k->len) {
		uint32_t cap = (uint32_t)SPW_MAX((size_t)TIER_KEY_MIN, k->len);
		uint8_t *key = malloc(cap);
		if (!key) {
			tier_fetch_put(s, f);
			return -ENOMEM;
		}
		free(f->key);
		f->key = key;
		f->kcap = cap;
	}
	memcpy(f->key, k->ptr, k->len);
	f->klen = (uint32_t)k->len;
	f->hash = k->hash;
	f->start = addr;
	f->op = op;
	f->state = FETCH_READING;
	f->next = op->fetches;
	op->fetches = f;
	op->reads++;
	ctr_add(&s->pending_reads, 1);
	s->t.issuing = true;
	tier_fetch_read(s, f, addr, l->initial_io, false);
	s->t.issuing = false;
	if (f->state == FETCH_FAILED)
		return f->err;   /* refused at once (-ENOMEM, -EINVAL): the op learns it now */
	return HLOG_PENDING;
}

/* ---------------- sessions ---------------- */

int hlog_session_attach(hlog_session *s, hlog_ready_fn ready, void *cb_arg)
{
	s->t.ready = ready;
	s->t.cb_arg = cb_arg;
	if (!s->l->dev || s->t.q)
		return 0;
	if (s->l->read_merge && !s->t.rd_hash) {
		if (!(s->t.rd_hash = calloc(TIER_RD_BUCKETS, sizeof(*s->t.rd_hash))))
			return -ENOMEM;
		s->t.rd_mask = TIER_RD_BUCKETS - 1;
	}
	return dev_queue_open(s->l->dev, &s->t.q);
}

void hlog_session_set_op(hlog_session *s, void *op_ctx)
{
	s->t.op_ctx = op_ctx;
}

void hlog_session_release(hlog_session *s, void *op_ctx)
{
	tier_op *op = tier_op_find(s, op_ctx);
	if (!op)
		return;
	tier_op_unlink(s, op);
	op->released = true;
	tier_op_maybe_free(s, op);
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

/* Let due epoch actions run: a protected session refreshes (poll runs between operations). */
static void tier_epoch_step(hlog_session *s)
{
	epoch *e = s->l->ep;
	if (epoch_is_protected(e, s->id))
		epoch_refresh(e, s->id);
	else
		epoch_drain(e);
}

/* Re-queue actions a full drain list refused, move Head where a completion left it wanted, claim
 * page writes. */
static void tier_maintain(hlog_session *s)
{
	hlog *l = s->l;
	log_ro_bump(l);
	log_head_bump(l);
	tier_evict_maybe(l);
	tier_flush_claim(s);
}

/* Hand what this session queued to the kernel (its own flag: a wrapper device's queue need not
 * count what it passed on to the queue it wraps). */
static void tier_submit(hlog_session *s)
{
	tier_stage_flush(s);
	if (s->t.unsubmitted) {
		s->t.unsubmitted = false;
		int rc = dev_submit(s->t.q);
		if (rc < 0) {
			s->t.unsubmitted = true;   /* the kernel was short: the requests stay queued */
		} else if (rc > 0) {
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
static int tier_pump(hlog_session *s)
{
	dev_queue *q = s->t.q;
	int n = 0;
	for (int round = 0; round < TIER_POLL_ROUNDS; round++) {
		if (s->t.backlog)
			tier_backlog_run(s);
		tier_submit(s);
		if (!dev_queue_pending(q))
			break;
		int r = dev_reap(q, TIER_REAP_MAX);
		if (r <= 0)
			break;
		n += r;
		/* Another round only when this one left work behind: reads the callbacks queued, or a
		 * full reap. Completions still to come signal the session's fd; reaping again for them
		 * now would chase them with one system call each. */
		if (r < TIER_REAP_MAX && !s->t.unsubmitted && !s->t.backlog && !s->t.nstaged)
			break;
	}
	if (s->t.backlog)
		tier_backlog_run(s);
	tier_submit(s);
	return n;
}

int hlog_session_poll(hlog_session *s)
{
	if (!s->t.q)
		return 0;
	tier_epoch_step(s);
	tier_maintain(s);
	int n = tier_pump(s);
	if (n > 0) {
		/* Completions moved markers and queued actions: let them run, claim what became due. */
		tier_epoch_step(s);
		tier_maintain(s);
		tier_submit(s);
	}
	tier_waiters_check(s);
	tier_ready_run(s);
	return n;
}

void tier_session_close(hlog_session *s)
{
	hlog *l = s->l;
	tier_session *t = &s->t;
	if (t->q) {
		t->closing = true;
		tier_submit(s);   /* staged reads go out too: their fetches complete (or fail) normally */
		/* Page writes in the backlog must still reach the device: FlushedUntil waits for them. */
		while (t->backlog) {
			tier_pump(s);
			if (t->backlog && dev_queue_pending(t->q))
				dev_wait(t->q, 1, TIER_SCAN_WAIT_NS);
			else if (t->backlog)
				sched_yield();
		}
		pthread_mutex_lock(&l->sig_mu);
		s->efd = -1;
		pthread_mutex_unlock(&l->sig_mu);
		dev_queue_close(t->q);   /* waits for what is in flight; callbacks run */
		t->q = NULL;
	}
	if (t->nwait)
		tier_wait_flag(s, false);
	/* Everything left is on a list now. Released ops live only on the ready and wait lists: clear
	 * both lists first (freeing those), then free what the table holds. */
	for (tier_op *op = t->ready_head, *next; op; op = next) {
		next = op->ready_next;
		op->on_ready = false;
		if (op->released)
			tier_op_maybe_free(s, op);
	}
	for (tier_op *op = t->wait_head, *next; op; op = next) {
		next = op->wait_next;
		op->waiting = false;
		if (op->released)
			tier_op_maybe_free(s, op);
	}
	for (uint32_t i = 0; t->ops && i <= t->ops_mask; i++) {
		tier_op *op = t->ops[i];
		while (op) {
			tier_op *next = op->next;
			for (tier_fetch *f = op->fetches, *fn; f; f = fn) {
				fn = f->next;
				tier_fetch_put(s, f);
			}
			free(op);
			op = next;
		}
	}
	free(t->ops);
	for (tier_op *op = t->op_free, *next; op; op = next) {
		next = op->next;
		free(op);
	}
	for (tier_fetch *f = t->fetch_free, *next; f; f = next) {
		next = f->next;
		tier_buf_put(s, f->buf, f->cap);
		free(f->key);
		free(f);
	}
	for (tier_io *io = t->io_free, *next; io; io = next) {
		next = io->next;
		free(io);
	}
	tier_buf_put(s, t->gap_buf, t->gap_cap);   /* into the pool, freed just below */
	t->gap_buf = NULL;
	for (int c = 0; c < TIER_BUF_CLASSES; c++) {
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
	free(t->scan_chains);
	free(t->scan_seen);
	free(t->scan_keys);
	memset(t, 0, sizeof(*t));
}

/* ---------------- scan (note 18) ---------------- */

int hlog_scan_error(hlog_session *s)
{
	return s->t.scan_err;
}

void tier_scan_reset(hlog_session *s)
{
	s->t.scan_nchains = 0;
	s->t.scan_nseen = 0;
	s->t.scan_keys_len = 0;
	s->t.scan_err = 0;
}

/* Grow *p (n elements of size) to hold at least want elements. false when memory is short. */
static bool tier_grow(void **p, uint32_t *cap, uint32_t want, size_t size)
{
	if (want <= *cap)
		return true;
	uint32_t n = *cap ? *cap * 2 : 64;
	while (n < want)
		n *= 2;
	void *q = realloc(*p, (size_t)n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static bool tier_seen_add(hlog_session *s, scan_chain *c, const uint8_t *key, uint32_t len, uint64_t hash)
{
	tier_session *t = &s->t;
	if (!tier_grow(&t->scan_seen, &t->scan_seen_cap, t->scan_nseen + 1, sizeof(scan_seen)))
		return false;
	if (t->scan_keys_len + len > t->scan_keys_cap) {
		uint64_t n = t->scan_keys_cap ? t->scan_keys_cap * 2 : 4096;
		while (n < t->scan_keys_len + len)
			n *= 2;
		uint8_t *k = realloc(t->scan_keys, n);
		if (!k)
			return false;
		t->scan_keys = k;
		t->scan_keys_cap = n;
	}
	memcpy(t->scan_keys + t->scan_keys_len, key, len);
	scan_seen *e = &((scan_seen *)t->scan_seen)[t->scan_nseen];
	e->hash = hash;
	e->off = t->scan_keys_len;
	e->len = len;
	e->next = c->seen;
	c->seen = t->scan_nseen++;
	t->scan_keys_len += len;
	return true;
}

static bool tier_seen_has(hlog_session *s, const scan_chain *c, const uint8_t *key, uint32_t len, uint64_t hash)
{
	const scan_seen *seen = s->t.scan_seen;
	for (uint32_t i = c->seen; i != SEEN_NONE; i = seen[i].next)
		if (seen[i].hash == hash && seen[i].len == len && memcmp(s->t.scan_keys + seen[i].off, key, len) == 0)
			return true;
	return false;
}

/* hlog_scan's visitor met a chain that goes on at cold below Head: remember it with every key of
 * its in-memory part (they hide older versions on the device). Called with the epoch protected, so
 * the records between head and cold are still in memory. */
void tier_scan_chain_add(hlog_session *s, uint64_t head, uint64_t cold)
{
	tier_session *t = &s->t;
	hlog *l = s->l;
	if (!tier_grow(&t->scan_chains, &t->scan_chains_cap, t->scan_nchains + 1, sizeof(scan_chain))) {
		t->scan_err = -ENOMEM;
		return;
	}
	scan_chain *c = &((scan_chain *)t->scan_chains)[t->scan_nchains++];
	c->addr = cold;
	c->f = NULL;
	c->seen = SEEN_NONE;
	for (uint64_t b = head; b > cold; ) {
		log_rec *r = hlog_rec_at(l, b);
		uint64_t info = atomic_load_explicit(&r->info, memory_order_acquire);
		const uint8_t *key = rec_key(r, info);
		if (!tier_seen_add(s, c, key, r->key_len, hidx_hash(key, r->key_len))) {
			t->scan_err = -ENOMEM;
			c->addr = 0;
			return;
		}
		b = info & REC_PREV_MASK;
	}
}

/* Wait on this thread until every scan read is in; other completions run too (their ready
 * callbacks wait for the next poll). The epoch is refreshed: the scan holds no log pointer here. */
static void tier_scan_wait(hlog_session *s)
{
	dev_queue *q = s->t.q;
	while (s->t.scan_inflight) {
		if (tier_pump(s) > 0)
			continue;
		if (!s->t.scan_inflight)
			break;
		tier_epoch_step(s);
		if (dev_queue_pending(q))
			dev_wait(q, 1, TIER_SCAN_WAIT_NS);
		else
			sched_yield();   /* all of it held back by the device throttle */
	}
}

void tier_scan_cold(hlog_session *s, uint64_t begin, hlog_key_fn fn, void *ctx)
{
	tier_session *t = &s->t;
	hlog *l = s->l;
	if (!t->scan_nchains)
		return;
	scan_chain *chains = t->scan_chains;
	if (!t->q) {
		t->scan_err = -ENOTCONN;
		return;
	}
	for (;;) {
		uint32_t active = 0;
		for (uint32_t i = 0; i < t->scan_nchains; i++) {
			scan_chain *c = &chains[i];
			if (!c->addr)
				continue;
			if (c->addr < begin) {
				c->addr = 0;
				continue;
			}
			if (!c->f && !(c->f = tier_fetch_new(s))) {
				t->scan_err = -ENOMEM;
				c->addr = 0;
				continue;
			}
			c->f->state = FETCH_READING;   /* op NULL: a scan read, no key to compare */
			t->scan_inflight++;
			ctr_add(&s->scan_reads, 1);
			tier_fetch_read(s, c->f, c->addr, l->initial_io, false);
			active++;
		}
		if (!active)
			break;
		tier_scan_wait(s);
		for (uint32_t i = 0; i < t->scan_nchains; i++) {
			scan_chain *c = &chains[i];
			if (!c->addr)
				continue;
			tier_fetch *f = c->f;
			if (f->state == FETCH_FAILED) {
				if (!t->scan_err)
					t->scan_err = f->err;
				c->addr = 0;
				continue;
			}
			const log_rec *r = (const log_rec *)(f->buf + (f->addr - f->base));
			uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
			const uint8_t *key = rec_key(r, info);
			uint64_t hash = hidx_hash(key, r->key_len);
			if (!tier_seen_has(s, c, key, r->key_len, hash)) {
				if (!tier_seen_add(s, c, key, r->key_len, hash) && !t->scan_err)
					t->scan_err = -ENOMEM;
				bool expired = rec_expired(r, info, s->now_ms);
				if (!(info & REC_TOMBSTONE) && !expired) {
					hlog_value v = { rec_val(r, info), r->val_len, rec_expire_at(r, info) };
					fn(ctx, key, r->key_len, &v);
				}
			}
			uint64_t prev = info & REC_PREV_MASK;
			c->addr = prev >= begin ? prev : 0;
		}
	}
	for (uint32_t i = 0; i < t->scan_nchains; i++) {
		if (chains[i].f) {
			tier_fetch_put(s, chains[i].f);
			chains[i].f = NULL;
		}
	}
}
