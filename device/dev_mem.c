/*
 * dev_mem.c - the LocalMemory backend (--device-type localmemory): segments in RAM.
 *
 * The software ceiling for benchmarks: the whole pending-IO path with zero device latency. Segments
 * are anonymous NORESERVE mappings made on the first write (memory is committed as it is touched,
 * so a small store holds little whatever the segment size; dev_disk_usage counts the resident
 * pages); each remembers its written end, so a read past it is short, as on a file.
 *
 * --device-completion-threads 0: dev_submit copies on the submitting thread and the callbacks run
 * in its next dev_reap (no thread hop). N > 0: dev_submit hands the batch to N copy threads (one
 * lock per batch) as Garnet does; each finished request is pushed on its queue's lock-free
 * completion stack, and the queue's eventfd is written when that stack goes from empty to not
 * empty. Callbacks still run only in the owner's dev_reap.
 *
 * Sections: segments; the copy; device open/close; queue open/close; enqueue and submit;
 * copy threads; reap and wait.
 */
#include "device/dev_int.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct mem_seg {
	uint8_t *buf;
	_Atomic uint64_t end;            /* written end (high-water mark) */
} mem_seg;

typedef struct mem_dev {
	dev base;
	int nthreads;
	pthread_t *threads;
	pthread_mutex_t lock;            /* guards the work list and stopping */
	pthread_cond_t cond;
	dev_req *work_head, *work_tail;  /* submitted, waiting for a copy thread */
	bool stopping;
} mem_dev;

typedef struct mem_queue {
	dev_queue base;
	dev_req *q_head, *q_tail;        /* queued since the last dev_submit */
	_Atomic(dev_req *) finished;     /* pushed by copy threads (newest first) */
	_Atomic int touching;            /* copy threads between their push and their eventfd write */
} mem_queue;

static const dev_ops mem_ops;

/* ---- segments ------------------------------------------------------------------------------- */

static int mem_seg_open(dev *d, uint64_t seg, bool create, int64_t *h)
{
	(void)seg;
	if (!create)
		return 1;
	mem_seg *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->buf = mmap(NULL, d->segment_bytes, PROT_READ | PROT_WRITE,
	              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->buf == MAP_FAILED) {
		int e = errno;
		free(s);
		return -e;
	}
	atomic_init(&s->end, 0);
	*h = (int64_t)(intptr_t)s;
	return 0;
}

static int mem_seg_release(dev *d, uint64_t seg, int64_t h, bool destroy)
{
	(void)seg;
	(void)destroy;   /* memory has nothing that outlives the handle */
	if (h > 0) {
		mem_seg *s = (mem_seg *)(intptr_t)h;
		munmap(s->buf, d->segment_bytes);
		free(s);
	}
	return 0;
}

/* Pages of s that hold memory: mincore over its written part, a window at a time (no allocation);
 * the rounded-up written end if the kernel will not say. */
static uint64_t mem_seg_resident(const mem_seg *s)
{
	enum { WINDOW_PAGES = 4096 };
	unsigned char vec[WINDOW_PAGES];
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t end = (atomic_load_explicit(&s->end, memory_order_relaxed) + page - 1) & ~(page - 1);
	uint64_t bytes = 0;

	for (uint64_t at = 0; at < end; at += WINDOW_PAGES * page) {
		uint64_t len = SPW_MIN(end - at, WINDOW_PAGES * page);
		if (mincore(s->buf + at, len, vec) < 0)
			return end;
		for (uint64_t i = 0; i < len / page; i++)
			bytes += (vec[i] & 1) ? page : 0;
	}
	return bytes;
}

static int mem_seg_usage_one(dev *d, uint64_t seg, int64_t h, void *ctx)
{
	(void)d;
	(void)seg;
	*(uint64_t *)ctx += mem_seg_resident((const mem_seg *)(intptr_t)h);
	return 0;
}

/* dev_disk_usage for memory: what the segments hold. Under the table lock, which their release
 * (removal, truncation) also takes, so no mapping goes away under mincore. */
static int mem_usage(dev *d, uint64_t *bytes)
{
	pthread_mutex_lock(&d->segs->lock);
	dev_segtab_each_open(d, mem_seg_usage_one, bytes);
	pthread_mutex_unlock(&d->segs->lock);
	return 0;
}

/* ---- the copy ------------------------------------------------------------------------------- */

/* Copy len bytes between buf and the iovec bytes [skip, skip+len); to_iov picks the direction. */
static void mem_iov_copy(const struct iovec *iov, int iovcnt, uint64_t skip, uint8_t *buf, uint64_t len,
                         bool to_iov)
{
	for (int i = 0; i < iovcnt && len > 0; i++) {
		uint64_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		uint64_t n = SPW_MIN(l - skip, len);
		uint8_t *p = (uint8_t *)iov[i].iov_base + skip;
		if (to_iov)
			memcpy(p, buf, n);
		else
			memcpy(buf, p, n);
		buf += n;
		len -= n;
		skip = 0;
	}
}

/* Perform r (any thread) and record its result in r->p (pending stays 1 until it is finished). */
static void mem_do(dev *d, dev_req *r)
{
	int op = r->p.op;
	uint64_t rel = 0, off = r->offset;
	int64_t res = 0;

	if (op == DEV_OP_FLUSH) {
		r->p.res = 0;
		return;
	}
	while (rel < r->p.len) {
		uint64_t seg = off >> d->segment_shift;
		uint64_t soff = off & (d->segment_bytes - 1);
		uint64_t n = SPW_MIN(d->segment_bytes - soff, r->p.len - rel);
		int64_t h;
		int g = dev_seg_get(d, seg, op == DEV_OP_WRITE, &h);
		if (g == 1)
			break;                 /* absent: past the written end */
		if (g < 0) {
			res = g;
			break;
		}
		mem_seg *s = (mem_seg *)(intptr_t)h;
		if (op == DEV_OP_WRITE) {
			mem_iov_copy(r->iov, r->iovcnt, rel, s->buf + soff, n, false);
			/* Release after the copy: a reader that sees the new end sees the bytes. */
			uint64_t end = atomic_load_explicit(&s->end, memory_order_relaxed);
			while (end < soff + n &&
			       !atomic_compare_exchange_weak_explicit(&s->end, &end, soff + n,
			                                              memory_order_release,
			                                              memory_order_relaxed))
				;
			rel += n;
			off += n;
		} else {
			uint64_t end = atomic_load_explicit(&s->end, memory_order_acquire);
			uint64_t got = end > soff ? SPW_MIN(n, end - soff) : 0;
			mem_iov_copy(r->iov, r->iovcnt, rel, s->buf + soff, got, true);
			rel += got;
			off += got;
			if (got < n)
				break;         /* the written end: a short count */
		}
	}
	r->p.res = res < 0 ? res : (int64_t)rel;
}

/* ---- device open/close ---------------------------------------------------------------------- */

static void *mem_thread_main(void *arg);

static void mem_close(dev *bd)
{
	mem_dev *d = (mem_dev *)bd;
	if (d->threads) {
		pthread_mutex_lock(&d->lock);
		d->stopping = true;
		pthread_cond_broadcast(&d->cond);
		pthread_mutex_unlock(&d->lock);
		for (int i = 0; i < d->nthreads; i++)
			pthread_join(d->threads[i], NULL);
		free(d->threads);
	}
	pthread_cond_destroy(&d->cond);
	pthread_mutex_destroy(&d->lock);
	dev_base_fini(bd);
	free(d);
}

int dev_mem_open(const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	mem_dev *d = calloc(1, sizeof(*d));
	int rc, n = cfg->completion_threads;

	if (!d) {
		dev_err_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	if (n < 0 || n > 256) {
		dev_err_set(err, errlen, "--device-completion-threads %d is not in 0..256", n);
		rc = -EINVAL;
		goto fail;
	}
	rc = dev_base_init(&d->base, &mem_ops, "localmemory", n > 0 ? DEV_CAP_ASYNC : 0, cfg, err, errlen);
	if (rc)
		goto fail;
	d->base.segs->open = mem_seg_open;
	d->base.segs->release = mem_seg_release;
	d->base.segs->usage = mem_usage;
	if (n > 0) {
		d->threads = calloc((size_t)n, sizeof(*d->threads));
		if (!d->threads) {
			rc = -ENOMEM;
			dev_err_set(err, errlen, "out of memory");
			goto fail;
		}
		for (int i = 0; i < n; i++) {
			rc = -pthread_create(&d->threads[i], NULL, mem_thread_main, d);
			if (rc) {
				dev_err_set(err, errlen, "cannot start completion threads: %s", strerror(-rc));
				goto fail;
			}
			d->nthreads++;
		}
	}
	*out = &d->base;
	return 0;
fail:
	mem_close(&d->base);
	return rc;
}

/* ---- queue open/close ----------------------------------------------------------------------- */

static int mem_queue_open(dev *bd, dev_queue **out)
{
	mem_dev *d = (mem_dev *)bd;
	mem_queue *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	dev_queue_base_init(&q->base, bd, &mem_ops, bd->queue_depth);
	atomic_init(&q->finished, NULL);
	atomic_init(&q->touching, 0);
	if (d->nthreads > 0) {
		/* The copy threads wake the owner through it, so it exists from the start. */
		int fd = dev_queue_efd(&q->base);
		if (fd < 0) {
			free(q);
			return fd;
		}
	}
	*out = &q->base;
	return 0;
}

static void mem_queue_close(dev_queue *bq)
{
	mem_queue *q = (mem_queue *)bq;
	dev_queue_drain(bq);
	/* A copy thread may still be about to write our eventfd for the last request: let it. */
	while (atomic_load_explicit(&q->touching, memory_order_acquire) != 0)
		sched_yield();
	dev_queue_base_fini(bq);
	free(bq);
}

/* ---- enqueue and submit --------------------------------------------------------------------- */

static int mem_enqueue(dev_queue *bq, dev_req *r, int op)
{
	mem_queue *q = (mem_queue *)bq;
	return dev_batch_enqueue(bq, r, op, &q->q_head, &q->q_tail);
}

static int mem_submit(dev_queue *bq)
{
	mem_queue *q = (mem_queue *)bq;
	mem_dev *d = (mem_dev *)bq->dev;
	dev_req *r = q->q_head, *tail = q->q_tail;
	int n = (int)bq->unsubmitted;

	if (!r)
		return 0;
	q->q_head = q->q_tail = NULL;
	bq->unsubmitted = 0;
	if (d->nthreads == 0) {
		while (r) {
			dev_req *next = r->p.next;
			mem_do(bq->dev, r);
			if (dev_req_piece_end(r, 0, r->p.len, r->p.res))
				dev_queue_done_push(bq, r);
			r = next;
		}
		return n;
	}
	/* One lock for the whole batch. */
	pthread_mutex_lock(&d->lock);
	if (d->work_tail)
		d->work_tail->p.next = r;
	else
		d->work_head = r;
	d->work_tail = tail;
	if (n > 1)
		pthread_cond_broadcast(&d->cond);
	else
		pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	bq->pieces += (uint32_t)n;   /* in the threads' hands until they come back */
	return n;
}

/* ---- copy threads --------------------------------------------------------------------------- */

static void *mem_thread_main(void *arg)
{
	mem_dev *d = arg;
	for (;;) {
		pthread_mutex_lock(&d->lock);
		while (!d->work_head && !d->stopping)
			pthread_cond_wait(&d->cond, &d->lock);
		dev_req *r = d->work_head;
		if (!r) {   /* stopping and nothing left */
			pthread_mutex_unlock(&d->lock);
			return NULL;
		}
		d->work_head = r->p.next;
		if (!d->work_head)
			d->work_tail = NULL;
		pthread_mutex_unlock(&d->lock);

		mem_do(&d->base, r);
		mem_queue *q = (mem_queue *)r->p.q;
		/* Once r is pushed its owner may finish it and close the queue: say we still use q (the
		 * increment is ordered before the push by the push's release). */
		atomic_fetch_add_explicit(&q->touching, 1, memory_order_relaxed);
		/* Push on the owner's stack (release: the copy and r->p.res are visible to the owner). */
		dev_req *old = atomic_load_explicit(&q->finished, memory_order_relaxed);
		do
			r->p.next = old;
		while (!atomic_compare_exchange_weak_explicit(&q->finished, &old, r, memory_order_release,
		                                              memory_order_relaxed));
		if (!old) {
			uint64_t one = 1;
			ssize_t w = write(q->base.efd, &one, sizeof(one));
			(void)w;   /* EAGAIN only when the counter is saturated: the owner is awake anyway */
		}
		atomic_fetch_sub_explicit(&q->touching, 1, memory_order_release);
	}
}

/* Move what the copy threads finished onto the done list, oldest first. */
static void mem_collect(mem_queue *q)
{
	dev_req *r = atomic_exchange_explicit(&q->finished, NULL, memory_order_acquire);
	dev_req *rev = NULL;
	while (r) {
		dev_req *next = r->p.next;
		r->p.next = rev;
		rev = r;
		r = next;
	}
	while (rev) {
		dev_req *next = rev->p.next;
		q->base.pieces--;
		if (dev_req_piece_end(rev, 0, rev->p.len, rev->p.res))
			dev_queue_done_push(&q->base, rev);
		rev = next;
	}
}

/* ---- reap and wait -------------------------------------------------------------------------- */

static int mem_reap(dev_queue *bq, int max)
{
	mem_queue *q = (mem_queue *)bq;
	if (atomic_load_explicit(&q->finished, memory_order_relaxed))
		mem_collect(q);
	return dev_queue_done_run(bq, max);
}

static int mem_wait(dev_queue *bq, int min, int64_t timeout_ns)
{
	mem_queue *q = (mem_queue *)bq;
	mem_dev *d = (mem_dev *)bq->dev;
	uint64_t deadline = timeout_ns >= 0 ? spw_mono_ns() + (uint64_t)timeout_ns : UINT64_MAX;

	if (bq->unsubmitted > 0)
		mem_submit(bq);
	if (d->nthreads == 0)
		return 0;   /* everything submitted is already done */
	for (;;) {
		mem_collect(q);
		int ready = (int)bq->ndone;
		int possible = ready + (int)bq->pieces;
		if (ready >= SPW_MIN(min, possible))
			return 0;
		uint64_t now = spw_mono_ns();
		if (now >= deadline)
			return -ETIME;
		struct pollfd pfd = { .fd = bq->efd, .events = POLLIN };
		int ms = deadline == UINT64_MAX ? -1 : (int)SPW_MIN((deadline - now + 999999) / 1000000, 1000000);
		int rc = poll(&pfd, 1, ms);
		if (rc < 0)
			return -errno;
		if (rc > 0) {
			uint64_t v;
			ssize_t rd = read(bq->efd, &v, sizeof(v));
			(void)rd;
		}
	}
}

static int mem_queue_fd(dev_queue *bq)
{
	return dev_queue_efd(bq);
}

static int mem_sync(dev *d)
{
	(void)d;
	return 0;
}

static const dev_ops mem_ops = {
	.close = mem_close,
	.queue_open = mem_queue_open,
	.queue_close = mem_queue_close,
	.enqueue = mem_enqueue,
	.submit = mem_submit,
	.reap = mem_reap,
	.wait = mem_wait,
	.queue_fd = mem_queue_fd,
	.segment_remove = dev_seg_remove,
	.sync = mem_sync,
};
