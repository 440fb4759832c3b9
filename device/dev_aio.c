/*
 * dev_aio.c - the libaio backend (--device-type native --device-io-backend libaio).
 *
 * One aio context per dev_queue, so per worker thread. dev_read/dev_write fill an iocb in the
 * queue's array (no system call), dev_submit is one io_submit for all of them, and dev_reap reads
 * the completion ring that the kernel maps at the context's address, in user space as fio's
 * userspace_reap does (no system call when nothing completed, none when something did). dev_wait
 * uses io_getevents, whose events are kept for the next dev_reap. Completions are signalled through
 * an eventfd (io_set_eventfd) once dev_queue_fd has asked for one.
 *
 * Sections: device open/close; queue open/close; enqueue (prep); submit; reap and wait; eventfd.
 */
#include "device/dev_int.h"

#if SPW_WITH_AIO

#include <errno.h>
#include <libaio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The completion ring the kernel maps at the aio context address (fs/aio.c, struct aio_ring). */
struct aio_uring_hdr {
	unsigned id;
	unsigned nr;                 /* number of io_events */
	unsigned head;               /* written by the consumer */
	unsigned tail;               /* written by the kernel */
	unsigned magic;
	unsigned compat_features;
	unsigned incompat_features;
	unsigned header_length;
	struct io_event events[];
};
#define AIO_RING_MAGIC 0xa10a10a1u

typedef struct aio_queue {
	dev_queue base;
	io_context_t ctx;
	struct aio_uring_hdr *ring;  /* NULL when the kernel's ring layout is not the known one */
	struct iocb *iocbs;          /* depth iocbs queued since the last io_submit, in order */
	struct iocb **iocbp;         /* iocbp[i] = &iocbs[i], the array io_submit takes */
	uint32_t nq;                 /* iocbs queued */
	struct io_event *ev;         /* events that dev_wait took from the kernel, not yet run */
	int nev, evpos;
} aio_queue;

static const dev_ops aio_ops;

/* ---- device open/close ---------------------------------------------------------------------- */

int dev_aio_open(const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	io_context_t probe = 0;
	int rc;

	rc = io_setup(1, &probe);
	if (rc < 0) {
		dev_err_set(err, errlen, "Linux aio refused by the kernel (io_setup: %s%s)", strerror(-rc),
		            rc == -EAGAIN ? "; fs.aio-max-nr is used up" :
		            rc == -ENOSYS ? "; the kernel has no aio or a seccomp filter hides it" : "");
		return rc;
	}
	io_destroy(probe);
	return dev_files_open(&aio_ops, "libaio",
	                      DEV_CAP_DIRECT | DEV_CAP_PERSISTENT | DEV_CAP_ASYNC | DEV_CAP_FLUSH, true, cfg,
	                      out, err, errlen);
}

/* ---- queue open/close ----------------------------------------------------------------------- */

static int aio_queue_open(dev *d, dev_queue **out)
{
	aio_queue *q = calloc(1, sizeof(*q));
	uint32_t depth = d->queue_depth;
	int rc;

	if (!q)
		return -ENOMEM;
	q->iocbs = calloc(depth, sizeof(*q->iocbs));
	q->iocbp = calloc(depth, sizeof(*q->iocbp));
	q->ev = calloc(depth, sizeof(*q->ev));
	if (!q->iocbs || !q->iocbp || !q->ev) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < depth; i++)
		q->iocbp[i] = &q->iocbs[i];
	/* depth events: a queue never holds more than depth pieces, so the ring cannot overflow. */
	rc = io_setup((int)depth, &q->ctx);
	if (rc < 0)
		goto fail;
	q->ring = (struct aio_uring_hdr *)q->ctx;
	if (q->ring->magic != AIO_RING_MAGIC || q->ring->incompat_features != 0)
		q->ring = NULL;   /* unknown layout: reap through io_getevents instead */
	dev_queue_base_init(&q->base, d, &aio_ops, depth);
	*out = &q->base;
	return 0;
fail:
	free(q->iocbs);
	free(q->iocbp);
	free(q->ev);
	free(q);
	return rc;
}

static void aio_queue_close(dev_queue *bq)
{
	aio_queue *q = (aio_queue *)bq;
	dev_queue_drain(bq);
	io_destroy(q->ctx);
	dev_queue_base_fini(bq);
	free(q->iocbs);
	free(q->iocbp);
	free(q->ev);
	free(q);
}

/* ---- enqueue (prep) ------------------------------------------------------------------------- */

static inline void aio_prep(dev_queue *bq, int fd, int op, uint64_t off, const struct iovec *iov,
                            int iovcnt, uintptr_t tag)
{
	aio_queue *q = (aio_queue *)bq;
	struct iocb *cb = &q->iocbs[q->nq++];   /* nq <= pieces <= depth */
	if (op == DEV_OP_READ) {
		if (iovcnt == 1)
			io_prep_pread(cb, fd, iov[0].iov_base, iov[0].iov_len, (long long)off);
		else
			io_prep_preadv(cb, fd, iov, iovcnt, (long long)off);
	} else if (op == DEV_OP_WRITE) {
		if (iovcnt == 1)
			io_prep_pwrite(cb, fd, iov[0].iov_base, iov[0].iov_len, (long long)off);
		else
			io_prep_pwritev(cb, fd, iov, iovcnt, (long long)off);
	} else {
		io_prep_fdsync(cb, fd);
	}
	cb->data = (void *)tag;
	if (bq->efd >= 0)
		io_set_eventfd(cb, bq->efd);
}

static int aio_enqueue(dev_queue *q, dev_req *r, int op)
{
	return dev_files_enqueue(q, r, op, aio_prep);
}

/* ---- submit --------------------------------------------------------------------------------- */

/* Drop the first n queued iocbs (submitted or failed), keeping the rest in order. */
static void aio_queue_shift(aio_queue *q, uint32_t n)
{
	if (n < q->nq)
		memmove(q->iocbs, q->iocbs + n, (q->nq - n) * sizeof(*q->iocbs));
	q->nq -= n;
	q->base.unsubmitted = q->nq;
}

static int aio_submit(dev_queue *bq)
{
	aio_queue *q = (aio_queue *)bq;
	int total = 0;

	while (q->nq > 0) {
		int rc = io_submit(q->ctx, (long)q->nq, q->iocbp);
		if (rc > 0) {
			total += rc;
			aio_queue_shift(q, (uint32_t)rc);
		} else if (rc == -EINTR) {
			continue;
		} else if (rc == -EAGAIN || rc == 0) {
			/* Out of kernel resources: the rest stays queued for the next call. */
			return total ? total : -EAGAIN;
		} else {
			/* The first iocb was refused (a bad fd, an unsupported op): it fails alone, with the
			 * kernel's error, through the done list; the others go on. */
			dev_req *done = dev_tag_end(bq, (uintptr_t)q->iocbs[0].data, rc);
			if (done)   /* to the done list: dev_submit runs no callbacks */
				dev_queue_done_push(bq, done);
			aio_queue_shift(q, 1);
		}
	}
	return total;
}

/* ---- reap and wait -------------------------------------------------------------------------- */

#define AIO_REAP_BATCH 64

/* Completions available in the mapped ring. */
static inline unsigned aio_ring_ready(const struct aio_uring_hdr *ring)
{
	unsigned head = __atomic_load_n(&ring->head, __ATOMIC_RELAXED);
	unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
	return tail >= head ? tail - head : ring->nr - head + tail;
}

static int aio_reap(dev_queue *bq, int max)
{
	aio_queue *q = (aio_queue *)bq;
	uint64_t start = bq->completed;

	dev_queue_done_run(bq, max);
	while (q->evpos < q->nev && (int)(bq->completed - start) < max) {
		struct io_event *e = &q->ev[q->evpos++];
		dev_tag_complete(bq, (uintptr_t)e->data, (int64_t)e->res);
	}
	while ((int)(bq->completed - start) < max) {
		uintptr_t tags[AIO_REAP_BATCH];
		int64_t res[AIO_REAP_BATCH];
		int want = SPW_MIN(max - (int)(bq->completed - start), AIO_REAP_BATCH);
		int n = 0;
		if (q->ring) {
			struct aio_uring_hdr *ring = q->ring;
			unsigned head = ring->head;
			/* Acquire: the event bodies the kernel wrote before moving tail are visible. */
			unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
			while (head != tail && n < want) {
				tags[n] = (uintptr_t)ring->events[head].data;
				res[n] = (int64_t)(long)ring->events[head].res;
				n++;
				head = head + 1 >= ring->nr ? 0 : head + 1;
			}
			/* Release: the kernel may reuse the slots only after we have read them. */
			__atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
		} else {
			struct io_event ev[AIO_REAP_BATCH];
			struct timespec zero = { 0, 0 };
			n = io_getevents(q->ctx, 0, want, ev, &zero);
			if (n < 0)
				n = 0;
			for (int i = 0; i < n; i++) {
				tags[i] = (uintptr_t)ev[i].data;
				res[i] = (int64_t)(long)ev[i].res;
			}
		}
		if (n == 0)
			break;
		for (int i = 0; i < n; i++)
			dev_tag_complete(bq, tags[i], res[i]);
	}
	return (int)(bq->completed - start);
}

static int aio_wait(dev_queue *bq, int min, int64_t timeout_ns)
{
	aio_queue *q = (aio_queue *)bq;
	int submitted = (int)(bq->pieces - bq->unsubmitted);
	struct timespec ts, *tsp = NULL;
	int rc;

	if (bq->unsubmitted > 0) {
		rc = aio_submit(bq);
		if (rc < 0 && rc != -EAGAIN)
			return rc;
		submitted = (int)(bq->pieces - bq->unsubmitted);
	}
	if (bq->done_head || q->evpos < q->nev)
		return 0;
	if (min > submitted)
		min = submitted;
	if (min <= 0 || (q->ring && aio_ring_ready(q->ring) >= (unsigned)min))
		return 0;
	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000LL;
		ts.tv_nsec = timeout_ns % 1000000000LL;
		tsp = &ts;
	}
	rc = io_getevents(q->ctx, min, (long)bq->depth, q->ev, tsp);
	if (rc < 0)
		return rc;
	q->nev = rc;
	q->evpos = 0;
	return rc >= min ? 0 : -ETIME;
}

/* ---- eventfd -------------------------------------------------------------------------------- */

static int aio_queue_fd(dev_queue *bq)
{
	aio_queue *q = (aio_queue *)bq;
	bool fresh = bq->efd < 0;
	int fd = dev_queue_efd(bq);
	/* iocbs prepared before now but not submitted signal too; earlier in-flight ones do not, which
	 * is why a worker asks for the fd before its first request. */
	if (fd >= 0 && fresh)
		for (uint32_t i = 0; i < q->nq; i++)
			io_set_eventfd(&q->iocbs[i], fd);
	return fd;
}

static const dev_ops aio_ops = {
	.close = dev_files_close,
	.queue_open = aio_queue_open,
	.queue_close = aio_queue_close,
	.enqueue = aio_enqueue,
	.submit = aio_submit,
	.reap = aio_reap,
	.wait = aio_wait,
	.queue_fd = aio_queue_fd,
	.segment_remove = dev_seg_remove,
	.sync = dev_files_sync,
};

#endif /* SPW_WITH_AIO */
