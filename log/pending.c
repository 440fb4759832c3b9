/*
 * pending.c - pending operations: the op table (by op_ctx), each op's fetch cache and the fetch
 * state machine that reads a record back from the device, the ready list, and the list of ops
 * waiting for a frame. Reads go through readq.c; their parts come back through the callback each
 * part carries (pend_part_done). Nothing here moves a marker: waits read SafeHead and the error
 * that alloc.c moves, and alloc.c's wake-up (alloc_signal) reads the wait flags set here.
 *
 * NOTES ON THE DESIGN OF PENDING OPERATIONS
 *
 *  1. Pending reads. The chain walk met cold address A (Begin <= A < Head). pend_cold looks in the
 *     session's fetch cache: entries belong to the op_ctx set by hlog_session_set_op and are keyed
 *     by (A, key hash, key bytes). A fetch's life:
 *
 *        (miss) --pend_cold: copy the key, read initial_io at A (sector-rounded)--> READING
 *        READING --completion, all parts in (readq_deliver -> pend_part_done -> pend_fetch_step):
 *            header short or invalid ............................. FAILED (-EIO / SPW_E_CORRUPT)
 *            key read and different: prev >= Begin ? read prev (chain read) : ABSENT
 *            record longer than what was read ...... read the whole record (second read) READING
 *            key equal, record whole ................................................ FOUND
 *        FOUND / ABSENT / FAILED --pend_fetch_finish: op->reads-- ; 0 --> ready list
 *        ready list --hlog_session_poll (pend_ready_run)--> ready(cb_arg, op_ctx), once per wave
 *        re-run: index -> walk; a newer version in memory wins; reaching A again --> the cached
 *            FOUND copy (plan/read from it, CAS against the entry word of this run) or ABSENT
 *            (also a FOUND copy whose record Begin has passed since: compact.c note 7);
 *            reaching another cold address --> a new fetch (A is not trusted for another address)
 *        hlog_session_release(op_ctx) --> entries freed (reads still in flight: on completion)
 *
 *     The chain below a cold address is always on the device (older records have lower addresses,
 *     a group's parts included: group.c note 8; and Head only grows), so a chain walk never comes
 *     back to memory, and a previous address at or above the record's is corruption. Every record below Head is
 *     on the device whole, since Head <= FlushedUntil and FlushedUntil steps over spanning records.
 *     Nothing in the store changes before the op runs again, so a reply never shows stale data: the
 *     re-run sees every version written meanwhile. Buffers come from per-session pools of
 *     power-of-two classes (readq_buf_get: sector-aligned, first read: buf_min), IO objects
 *     (readq_io_get) and fetch entries from per-session free lists: no allocation per read in the
 *     steady state.
 *
 *  2. Frame waits. An update whose allocation got LOG_E_WAIT registers its op (pend_wait: need, the
 *     session's wait_flag) and returns HLOG_PENDING. hlog_session_poll (pend_waiters_check) hands
 *     the op to the ready callback once SafeHead >= need or the store failed. Completions that move
 *     FlushedUntil and the eviction action call alloc_signal (alloc.c), which writes the eventfd of
 *     every session with a waiting op (the page write may complete on another worker's queue, whose
 *     epoll wakes on its own fd; the signal wakes the waiter's). The flag is published before the
 *     op rechecks SafeHead, and the signaller moves the marker before it reads the flags, so no
 *     wake-up is lost. Waits are counted (flush_waits).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "log/hlog_int.h"
#include "log/pending_int.h"
#include "log/readq_int.h"

#define PEND_KEY_MIN 64          /* first key buffer of a fetch entry (grown, never shrunk) */

struct pend_op {
	pend_op *next;               /* hash chain, or the free list */
	pend_op *ready_next;
	pend_op *wait_next;
	void *op_ctx;
	pend_fetch *fetches;
	uint32_t reads;              /* fetches still reading */
	uint64_t need;               /* waiting: the SafeHead it waits for */
	bool on_ready, waiting, released;
};

static void pend_fetch_step(hlog_session *s, pend_fetch *f);
static void pend_fetch_finish(hlog_session *s, pend_fetch *f, int state, int err);
static void pend_part_done(hlog_session *s, readq_io *io, int64_t res);

/* ---------------- the op table ---------------- */

static inline uint32_t pend_op_bucket(const hlog_session *s, const void *op_ctx)
{
	return (uint32_t)(((uint64_t)(uintptr_t)op_ctx * 0x9E3779B97F4A7C15ULL) >> 40) & s->t.ops_mask;
}

static pend_op *pend_op_find(hlog_session *s, void *op_ctx)
{
	if (!s->t.ops)
		return NULL;
	for (pend_op *op = s->t.ops[pend_op_bucket(s, op_ctx)]; op; op = op->next)
		if (op->op_ctx == op_ctx)
			return op;
	return NULL;
}

static int pend_ops_grow(hlog_session *s)
{
	uint32_t n = s->t.ops ? (s->t.ops_mask + 1) * 2 : 64;
	pend_op **old = s->t.ops;
	uint32_t old_n = old ? s->t.ops_mask + 1 : 0;
	pend_op **t = calloc(n, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->t.ops = t;
	s->t.ops_mask = n - 1;
	for (uint32_t i = 0; i < old_n; i++) {
		pend_op *op = old[i];
		while (op) {
			pend_op *next = op->next;
			uint32_t b = pend_op_bucket(s, op->op_ctx);
			op->next = t[b];
			t[b] = op;
			op = next;
		}
	}
	free(old);
	return 0;
}

/* A new op for op_ctx, which has none (pend_op_find said so). */
static pend_op *pend_op_new(hlog_session *s, void *op_ctx)
{
	pend_op *op;
	if ((!s->t.ops || s->t.ops_count >= s->t.ops_mask + 1) && pend_ops_grow(s) < 0)
		return NULL;
	op = s->t.op_free;
	if (op)
		s->t.op_free = op->next;
	else if (!(op = malloc(sizeof(*op))))
		return NULL;
	memset(op, 0, sizeof(*op));
	op->op_ctx = op_ctx;
	uint32_t b = pend_op_bucket(s, op_ctx);
	op->next = s->t.ops[b];
	s->t.ops[b] = op;
	s->t.ops_count++;
	return op;
}

static pend_op *pend_op_get(hlog_session *s, void *op_ctx)
{
	pend_op *op = pend_op_find(s, op_ctx);
	return op ? op : pend_op_new(s, op_ctx);
}

static void pend_op_unlink(hlog_session *s, pend_op *op)
{
	pend_op **pp = &s->t.ops[pend_op_bucket(s, op->op_ctx)];
	while (*pp != op)
		pp = &(*pp)->next;
	*pp = op->next;
	s->t.ops_count--;
}

void pend_fetch_put(hlog_session *s, pend_fetch *f)
{
	readq_buf_put(s, f->buf, f->cap);
	f->buf = NULL;
	f->cap = 0;
	f->next = s->t.fetch_free;
	s->t.fetch_free = f;
}

/* Free a released op once nothing refers to it any more (reads, ready list, wait list). */
static void pend_op_maybe_free(hlog_session *s, pend_op *op)
{
	if (!op->released || op->reads || op->on_ready || op->waiting)
		return;
	pend_fetch *f = op->fetches;
	while (f) {
		pend_fetch *next = f->next;
		pend_fetch_put(s, f);
		f = next;
	}
	op->next = s->t.op_free;
	s->t.op_free = op;
}

/* ---------------- the ready list and frame waits (note 2) ---------------- */

static void pend_ready_push(hlog_session *s, pend_op *op)
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

/* Ready callbacks, at the end of hlog_session_poll only (store.c note 1). The callback may release
 * its op: nothing of op is touched after the call. */
void pend_ready_run(hlog_session *s)
{
	pend_op *op = s->t.ready_head;
	s->t.ready_head = s->t.ready_tail = NULL;
	while (op) {
		pend_op *next = op->ready_next;
		op->on_ready = false;
		if (op->released)
			pend_op_maybe_free(s, op);
		else if (op->reads == 0 && s->t.ready)   /* re-run early and reading again: wait for those */
			s->t.ready(s->t.cb_arg, op->op_ctx);
		op = next;
	}
}

static void pend_wait_flag(hlog_session *s, bool on)
{
	atomic_store(&s->wait_flag, on ? 1 : 0);
	if (on)
		atomic_fetch_add(&s->l->nwaiting, 1);
	else
		atomic_fetch_sub(&s->l->nwaiting, 1);
}

/* Hand the waiting ops whose frame is free (or whose store failed) to the ready list. */
void pend_waiters_check(hlog_session *s)
{
	hlog *l = s->l;
	if (!s->t.nwait)
		return;
	uint64_t sh = load_acq(&l->safe_head);
	bool failed = atomic_load(&l->error) != 0;
	pend_op **pp = &s->t.wait_head;
	pend_op *op;
	while ((op = *pp) != NULL) {
		if (op->released || sh >= op->need || failed) {
			*pp = op->wait_next;
			op->waiting = false;
			s->t.nwait--;
			if (op->released)
				pend_op_maybe_free(s, op);
			else
				pend_ready_push(s, op);
		} else {
			pp = &op->wait_next;
		}
	}
	if (!s->t.nwait)
		pend_wait_flag(s, false);
}

int pend_wait(hlog_session *s, uint64_t need)
{
	hlog *l = s->l;
	if (!s->t.q)
		return -ENOTCONN;
	pend_op *op = pend_op_get(s, s->t.op_ctx);
	if (!op)
		return -ENOMEM;
	ctr_add(&s->flush_waits, 1);
	if (!op->waiting) {
		op->waiting = true;
		op->need = need;
		op->wait_next = s->t.wait_head;
		s->t.wait_head = op;
		if (s->t.nwait++ == 0)
			pend_wait_flag(s, true);
	} else if (need > op->need) {
		op->need = need;
	}
	/* The flag is published (seq_cst) before SafeHead is read (seq_cst), and the signaller moves
	 * SafeHead before it reads the flags: one of the two sees the other (note 2). */
	if (atomic_load(&l->safe_head) >= need && !atomic_load(&l->error)) {
		pend_op **pp = &s->t.wait_head;
		while (*pp != op)
			pp = &(*pp)->wait_next;
		*pp = op->wait_next;
		op->waiting = false;
		if (--s->t.nwait == 0)
			pend_wait_flag(s, false);
		return 0;
	}
	return HLOG_PENDING;
}

/* ---------------- fetches: the record read state machine (note 1) ---------------- */

pend_fetch *pend_fetch_new(hlog_session *s)
{
	pend_fetch *f = s->t.fetch_free;
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
 * pieces. The completion of the last piece runs pend_fetch_step. */
void pend_fetch_read(hlog_session *s, pend_fetch *f, uint64_t addr, uint64_t len, bool second)
{
	hlog *l = s->l;
	uint64_t sec = l->sector;
	uint64_t base = addr & ~(sec - 1);
	uint64_t want = SPW_ALIGN_UP(addr + len, sec) - base;
	if (want > DEV_MAX_BYTES - base)
		want = DEV_MAX_BYTES - base;
	if (f->cap < want) {
		readq_buf_put(s, f->buf, f->cap);
		f->cap = 0;
		f->buf = readq_buf_get(s, want, &f->cap);
		if (!f->buf) {
			pend_fetch_finish(s, f, FETCH_FAILED, -ENOMEM);
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
		readq_io *io = readq_io_get(s);
		if (!io) {
			if (!f->part_err)
				f->part_err = -ENOMEM;
			if (--f->parts == 0)
				pend_fetch_step(s, f);
		} else {
			io->f = f;
			io->part_done = pend_part_done;
			io->len = e - o;
			io->rel = o - base;
			io->req.offset = o;
			io->iov.iov_base = f->buf + (o - base);
			io->iov.iov_len = e - o;
			readq_stage(s, io);
		}
		o = e;
	}
}

/* One part of a fetch's read is in (res bytes, or -errno; readq_io.part_done); the last part runs
 * the state machine. */
static void pend_part_done(hlog_session *s, readq_io *io, int64_t res)
{
	pend_fetch *f = io->f;
	if (res < 0) {
		if (!f->part_err)
			f->part_err = (int)res;
	} else if ((uint64_t)res < io->len && io->rel + (uint64_t)res < f->valid) {
		f->valid = io->rel + (uint64_t)res;   /* short: at the device's written end */
	}
	readq_io_put(s, io);
	if (--f->parts == 0)
		pend_fetch_step(s, f);
}

static void pend_fetch_finish(hlog_session *s, pend_fetch *f, int state, int err)
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
	pend_op *op = f->op;
	if (--op->reads == 0) {
		if (op->released)
			pend_op_maybe_free(s, op);
		else if (!s->t.issuing)   /* refused at once: the operation returns the error itself */
			pend_ready_push(s, op);
	}
}

/* Every part of f's read is in: decide what the bytes say (the state diagram of note 1). */
static void pend_fetch_step(hlog_session *s, pend_fetch *f)
{
	hlog *l = s->l;
	if (f->part_err || f->addr < load_acq(&l->begin)) {
		/* A record Begin passed while it was read (compaction or FLUSHALL moved Begin; its
		 * segment may be gone, compact.c note 5) is nobody's: the key has no older version. */
		if (f->addr < load_acq(&l->begin))
			pend_fetch_finish(s, f, FETCH_ABSENT, 0);
		else
			pend_fetch_finish(s, f, FETCH_FAILED, f->part_err);
		return;
	}
	uint64_t off = f->addr - f->base;
	const log_rec *r = (const log_rec *)(f->buf + off);
	uint64_t info = f->valid >= off + REC_HDR_BYTES ? atomic_load_explicit(&r->info, memory_order_relaxed) : 0;
	if (!info || ((info & REC_HAS_EXPIRY) && f->valid < off + REC_HDR_BYTES + 8)) {
		pend_fetch_finish(s, f, FETCH_FAILED, -EIO);   /* short where a record must be */
		return;
	}
	uint64_t size = rec_size(r, info);
	uint64_t prev = info & REC_PREV_MASK;
	if (!(info & REC_VALID) || size > l->max_rec || prev >= f->addr) {
		pend_fetch_finish(s, f, FETCH_FAILED, SPW_E_CORRUPT);
		return;
	}
	bool scan = f->op == NULL;
	uint64_t key_end = off + (uint64_t)(rec_key(r, info) - (const uint8_t *)r) + r->key_len;
	bool key_in = f->valid >= key_end;
	/* The same key: its namespace too (ops.c note 5); "" has no key pointer. */
	bool same = key_in && rec_key_is(r, info, f->key, f->klen, f->internal);
	if (scan || same || !key_in) {
		if (f->valid < off + size) {
			if (f->second || f->want >= off + size || s->t.closing) {
				pend_fetch_finish(s, f, FETCH_FAILED, s->t.closing ? -ECANCELED : -EIO);
				return;
			}
			ctr_add(&s->second_reads, 1);
			pend_fetch_read(s, f, f->addr, size, true);
			return;
		}
		if (scan || same) {
			pend_fetch_finish(s, f, FETCH_FOUND, 0);
			return;
		}
	}
	/* Another key sharing the tag: its older records are on the device too. */
	if (prev < load_acq(&l->begin)) {
		pend_fetch_finish(s, f, FETCH_ABSENT, 0);
		return;
	}
	if (s->t.closing) {
		pend_fetch_finish(s, f, FETCH_FAILED, -ECANCELED);
		return;
	}
	ctr_add(&s->chain_reads, 1);
	pend_fetch_read(s, f, prev, l->initial_io, false);
}

/* ---------------- the cold branch of a lookup ---------------- */

/*
 * The chain walk for k reached addr (Begin <= addr < Head): the newest version of k at or below addr
 * is on the device (note 1). PEND_FOUND with *r and *info (a private copy, valid until op_ctx is
 * released), PEND_ABSENT, HLOG_PENDING (a read is queued or in flight for this op; with !queue:
 * nothing cached, nothing queued), or a negative error (the read failed; -ENOTCONN: no queue).
 */
int pend_cold(hlog_session *s, const hlog_key *k, uint64_t addr, bool queue, log_rec **r, uint64_t *info,
              uint64_t *at)
{
	hlog *l = s->l;
	if (addr < load_acq(&l->begin) || !l->dev)
		return PEND_ABSENT;   /* a FLUSHALL raced the walk (alloc.c note 1) */
	pend_op *op = pend_op_find(s, s->t.op_ctx);
	if (op) {
		for (pend_fetch *f = op->fetches; f; f = f->next) {
			if (f->start != addr || f->hash != k->hash || f->klen != k->len ||
			    f->internal != k->internal || (k->len && memcmp(f->key, k->ptr, k->len) != 0))
				continue;
			switch (f->state) {
			case FETCH_READING:
				return HLOG_PENDING;
			case FETCH_FAILED:
				return f->err;
			case FETCH_ABSENT:
				ctr_add(&s->pending_hits, 1);
				return PEND_ABSENT;
			default:
				ctr_add(&s->pending_hits, 1);
				/* Begin passed the record since the fetch found it: absent now, as a fetch finishing
				 * now would be. Compaction copies a record before it passes it, so the re-run meets
				 * the copy first; a unit of expired records dropped unread has no copy (compact.c
				 * note 7), and its keys have left the count. */
				if (f->addr < load_acq(&l->begin))
					return PEND_ABSENT;
				*r = (log_rec *)(f->buf + (f->addr - f->base));
				*info = atomic_load_explicit(&(*r)->info, memory_order_relaxed) &
				        ~(REC_LOCK_X | REC_LOCK_S_MASK);
				if (at)
					*at = f->addr;
				return PEND_FOUND;
			}
		}
	}
	if (!queue)
		return HLOG_PENDING;
	if (!s->t.q)
		return -ENOTCONN;
	if (!op && !(op = pend_op_new(s, s->t.op_ctx)))
		return -ENOMEM;
	pend_fetch *f = pend_fetch_new(s);
	if (!f)
		return -ENOMEM;
	if (f->kcap < k->len) {
		uint32_t cap = (uint32_t)SPW_MAX((size_t)PEND_KEY_MIN, k->len);
		uint8_t *key = malloc(cap);
		if (!key) {
			pend_fetch_put(s, f);
			return -ENOMEM;
		}
		free(f->key);
		f->key = key;
		f->kcap = cap;
	}
	if (k->len)   /* the empty key: f->key may still be NULL */
		memcpy(f->key, k->ptr, k->len);
	f->klen = (uint32_t)k->len;
	f->internal = k->internal;
	f->hash = k->hash;
	f->start = addr;
	f->op = op;
	f->state = FETCH_READING;
	f->next = op->fetches;
	op->fetches = f;
	op->reads++;
	ctr_add(&s->pending_reads, 1);
	s->t.issuing = true;
	pend_fetch_read(s, f, addr, l->initial_io, false);
	s->t.issuing = false;
	if (f->state == FETCH_FAILED)
		return f->err;   /* refused at once (-ENOMEM, -EINVAL): the op learns it now */
	return HLOG_PENDING;
}

/* ---------------- sessions ---------------- */

void hlog_session_set_op(hlog_session *s, void *op_ctx)
{
	s->t.op_ctx = op_ctx;
}

void hlog_session_release(hlog_session *s, void *op_ctx)
{
	pend_op *op = pend_op_find(s, op_ctx);
	if (!op)
		return;
	pend_op_unlink(s, op);
	op->released = true;
	pend_op_maybe_free(s, op);
}

void pend_session_close(hlog_session *s)
{
	tier_session *t = &s->t;
	if (t->nwait)
		pend_wait_flag(s, false);
	/* Everything left is on a list now. Released ops live only on the ready and wait lists: clear
	 * both lists first (freeing those), then free what the table holds. */
	for (pend_op *op = t->ready_head, *next; op; op = next) {
		next = op->ready_next;
		op->on_ready = false;
		if (op->released)
			pend_op_maybe_free(s, op);
	}
	for (pend_op *op = t->wait_head, *next; op; op = next) {
		next = op->wait_next;
		op->waiting = false;
		if (op->released)
			pend_op_maybe_free(s, op);
	}
	for (uint32_t i = 0; t->ops && i <= t->ops_mask; i++) {
		pend_op *op = t->ops[i];
		while (op) {
			pend_op *next = op->next;
			for (pend_fetch *f = op->fetches, *fn; f; f = fn) {
				fn = f->next;
				pend_fetch_put(s, f);
			}
			free(op);
			op = next;
		}
	}
	free(t->ops);
	for (pend_op *op = t->op_free, *next; op; op = next) {
		next = op->next;
		free(op);
	}
	for (pend_fetch *f = t->fetch_free, *next; f; f = next) {
		next = f->next;
		readq_buf_put(s, f->buf, f->cap);
		free(f->key);
		free(f);
	}
}
