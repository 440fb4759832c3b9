/*
 * dev_uring.c - the io_uring backend (--device-type native --device-io-backend uring).
 *
 * One ring per dev_queue, so per worker thread: requests are prepared straight into the ring's SQ
 * by dev_read/dev_write (no system call), dev_submit is one io_uring_submit for all of them, and
 * dev_reap walks the CQ in user space (no system call, but at most one nonblocking enter to run
 * completions deferred as task work, see uring_ring_init and uring_taskrun_run). The ring's
 * eventfd is registered only when dev_queue_fd asks for it: the kernel then signals it per
 * completion, which a worker needs and a dedicated IO thread (dev_wait) does not.
 *
 * Sections: device open/close; queue open/close; enqueue (prep); submit; reap and wait; eventfd.
 */
#include "device/dev_int.h"

#if SPW_WITH_URING

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct uring_queue {
	dev_queue base;
	struct io_uring ring;
	bool efd_registered;
} uring_queue;

static const dev_ops uring_ops;

/* ---- device open/close ---------------------------------------------------------------------- */

/* Why the kernel refused a ring, for the start-up message. */
static void uring_refusal(int rc, char *err, size_t errlen)
{
	char extra[96] = "";
	FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
	if (f) {
		int v = 0;
		if (fscanf(f, "%d", &v) == 1 && v != 0)
			snprintf(extra, sizeof(extra), "; kernel.io_uring_disabled=%d", v);
		fclose(f);
	}
	if (rc == -ENOSYS && !extra[0])
		snprintf(extra, sizeof(extra), "; the kernel has no io_uring or a seccomp filter hides it");
	if (rc == -ENOMEM && !extra[0])
		snprintf(extra, sizeof(extra), "; RLIMIT_MEMLOCK may be too low for the ring");
	dev_err_set(err, errlen, "io_uring refused by the kernel (io_uring_setup: %s%s); use "
	            "--device-io-backend libaio or allow the fallback", strerror(-rc), extra);
}

int dev_uring_open(const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	struct io_uring probe;
	int rc;

	/* Ask the kernel for a tiny ring first: a refusal is reported as such, with the reason. */
	rc = io_uring_queue_init(2, &probe, 0);
	if (rc < 0) {
		uring_refusal(rc, err, errlen);
		return rc == -EINVAL ? -ENOSYS : rc;
	}
	io_uring_queue_exit(&probe);
	return dev_files_open(&uring_ops, "uring",
	                      DEV_CAP_DIRECT | DEV_CAP_PERSISTENT | DEV_CAP_ASYNC | DEV_CAP_FLUSH, true, cfg,
	                      out, err, errlen);
}

/* ---- queue open/close ----------------------------------------------------------------------- */

/*
 * The ring belongs to the thread that opens the queue, which is what SINGLE_ISSUER and
 * DEFER_TASKRUN promise the kernel (fio 3.33 sets up its rings the same way): completions are run
 * as task work only when this thread enters the kernel, in batches, with no interrupt of a busy
 * thread. TASKRUN_FLAG makes the kernel raise IORING_SQ_TASKRUN while such work waits, so
 * io_uring_peek_batch_cqe enters the kernel (io_uring_enter with GETEVENTS, min 0: it does not
 * block) only then; the registered eventfd is signalled when the work is queued. Older kernels
 * refuse these flags with -EINVAL: step down to COOP_TASKRUN, then to none.
 *
 * Rings without DEFER_TASKRUN (SINGLE_ISSUER | COOP_TASKRUN | TASKRUN_FLAG) were tried and not
 * kept (figures: docs/BENCHMARKS.md, "System calls per GET"). Completions are then posted by task
 * work whenever the worker enters the kernel for any reason (its epoll_wait, read and writev), so a
 * reap seldom enters; but a worker asleep in epoll_wait is woken by the task-work notification, not
 * by the eventfd (its epoll_wait returns EINTR; the work then posts the CQEs and signals the eventfd
 * on the way out, and the next pass finds nothing new), and fewer GETs per second were served.
 * Plain SINGLE_ISSUER, which also interrupts a busy worker, did worse. Neither stalled a client
 * sending one request at a time.
 */
static int uring_ring_init(struct io_uring *ring, unsigned entries)
{
	static const unsigned flag_sets[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG,
		IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		0,
	};
	int rc = -EINVAL;
	for (size_t i = 0; i < SPW_ARRAY_LEN(flag_sets) && rc == -EINVAL; i++) {
		struct io_uring_params p;
		memset(&p, 0, sizeof(p));
		p.flags = flag_sets[i];
		rc = io_uring_queue_init_params(entries, ring, &p);
	}
	return rc;
}

static int uring_queue_open(dev *d, dev_queue **out)
{
	uring_queue *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return -ENOMEM;
	/* SQ entries >= depth and the CQ is twice that (the default), and a queue never holds more than
	 * depth pieces (invariant 3 of device.c): neither ring can overflow. */
	rc = uring_ring_init(&q->ring, d->queue_depth);
	if (rc < 0) {
		free(q);
		return rc;
	}
	dev_queue_base_init(&q->base, d, &uring_ops, d->queue_depth);
	*out = &q->base;
	return 0;
}

static void uring_queue_close(dev_queue *bq)
{
	uring_queue *q = (uring_queue *)bq;
	dev_queue_drain(bq);
	io_uring_queue_exit(&q->ring);
	dev_queue_base_fini(bq);
	free(q);
}

/* ---- enqueue (prep) ------------------------------------------------------------------------- */

static inline void uring_prep(dev_queue *bq, int fd, int op, uint64_t off, const struct iovec *iov,
                              int iovcnt, uintptr_t tag)
{
	uring_queue *q = (uring_queue *)bq;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	if (SPW_UNLIKELY(!sqe)) {
		/* Cannot happen while pieces <= depth <= SQ entries; if it does, make room rather than
		 * lose the request. */
		io_uring_submit(&q->ring);
		bq->unsubmitted = io_uring_sq_ready(&q->ring) + 1;
		sqe = io_uring_get_sqe(&q->ring);
	}
	if (op == DEV_OP_READ) {
		/* Plain READ for one buffer, as fio does: the kernel skips the iovec import. */
		if (iovcnt == 1)
			io_uring_prep_read(sqe, fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
		else
			io_uring_prep_readv(sqe, fd, iov, (unsigned)iovcnt, off);
	} else if (op == DEV_OP_WRITE) {
		if (iovcnt == 1)
			io_uring_prep_write(sqe, fd, iov[0].iov_base, (unsigned)iov[0].iov_len, off);
		else
			io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, off);
	} else {
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	}
	io_uring_sqe_set_data(sqe, (void *)tag);
}

static int uring_enqueue(dev_queue *q, dev_req *r, int op)
{
	return dev_files_enqueue(q, r, op, uring_prep);
}

/* ---- submit --------------------------------------------------------------------------------- */

static int uring_submit(dev_queue *bq)
{
	uring_queue *q = (uring_queue *)bq;
	int rc;

	if (bq->unsubmitted == 0)
		return 0;
	do
		rc = io_uring_submit(&q->ring);
	while (rc == -EINTR);
	/* What the kernel has not consumed (after an error) is still ours to submit. */
	bq->unsubmitted = io_uring_sq_ready(&q->ring);
	if (rc < 0)
		return rc == -EBUSY ? -EAGAIN : rc;
	return rc;
}

/* ---- reap and wait -------------------------------------------------------------------------- */

#define URING_REAP_BATCH 64

/*
 * Run the completions waiting as task work, in one io_uring_enter that does not block.
 *
 * With DEFER_TASKRUN an enter runs at most max(URING_TW_CAP, min_complete) of them, so a plain
 * GETEVENTS enter (min 0) collects URING_TW_CAP and a batch of more reads than that took several
 * enters. Asking for every piece in flight lifts the cap, and a zero timeout (EXT_ARG, 5.11;
 * DEFER_TASKRUN needs 6.1) bounds the wait. The price: when fewer than asked have completed, the
 * kernel arms an hrtimer for the timeout and sleeps until it fires before returning -ETIME, far
 * longer than a plain enter takes, which costs GETs per second. So the plain enter stays wherever
 * the cap cannot bite (URING_TW_CAP or fewer pieces in flight). Figures: docs/BENCHMARKS.md,
 * "System calls per GET". A ring without DEFER_TASKRUN (the fallbacks) runs all its task work in a
 * plain enter.
 */
#define URING_TW_CAP 20   /* the kernel's IO_LOCAL_TW_DEFAULT_MAX (6.18) */

static void uring_taskrun_run(uring_queue *q)
{
	unsigned inflight = q->base.pieces - q->base.unsubmitted;
	if (!(q->ring.flags & IORING_SETUP_DEFER_TASKRUN) || inflight <= URING_TW_CAP) {
		io_uring_get_events(&q->ring);
		return;
	}
	struct __kernel_timespec zero = { .tv_sec = 0, .tv_nsec = 0 };
	struct io_uring_getevents_arg arg = { .ts = (uint64_t)(uintptr_t)&zero };
	/* -ETIME (fewer than inflight are done) and -EINTR are no failure: the CQ says what ran. */
	(void)io_uring_enter2((unsigned)q->ring.ring_fd, 0, inflight,
	                      IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, (sigset_t *)&arg,
	                      sizeof(arg));
}

static int uring_reap(dev_queue *bq, int max)
{
	uring_queue *q = (uring_queue *)bq;
	uint64_t start = bq->completed;
	bool entered = false;

	dev_queue_done_run(bq, max);
	while ((int)(bq->completed - start) < max) {
		struct io_uring_cqe *cqes[URING_REAP_BATCH];
		uintptr_t tags[URING_REAP_BATCH];
		int32_t res[URING_REAP_BATCH];
		unsigned want = (unsigned)SPW_MIN(max - (int)(bq->completed - start), URING_REAP_BATCH);
		/* Only peek at a CQ with entries: liburing's peek itself enters the kernel on an empty
		 * CQ while IORING_SQ_TASKRUN is set, which would undo the once-per-call limit below. */
		unsigned n = io_uring_cq_ready(&q->ring) ? io_uring_peek_batch_cqe(&q->ring, cqes, want) : 0;
		if (n == 0 && !entered && (IO_URING_READ_ONCE(*q->ring.sq.kflags) & IORING_SQ_TASKRUN)) {
			/* Completions wait as deferred task work: run it (a nonblocking enter). Once per
			 * call, after the visible CQEs: completions that become task work later do not make
			 * this call chase them one enter at a time; each new batch of task work signals the
			 * eventfd again (the list was emptied here), so the caller is told about it. */
			entered = true;
			uring_taskrun_run(q);
			n = io_uring_peek_batch_cqe(&q->ring, cqes, want);
		}
		if (n == 0)
			break;
		for (unsigned i = 0; i < n; i++) {
			tags[i] = (uintptr_t)io_uring_cqe_get_data(cqes[i]);
			res[i] = cqes[i]->res;
		}
		/* Hand the CQ slots back before the callbacks run: they may queue and submit more. */
		io_uring_cq_advance(&q->ring, n);
		for (unsigned i = 0; i < n; i++)
			dev_tag_complete(bq, tags[i], res[i]);
	}
	return (int)(bq->completed - start);
}

static int uring_wait(dev_queue *bq, int min, int64_t timeout_ns)
{
	uring_queue *q = (uring_queue *)bq;
	struct io_uring_cqe *cqe;
	int rc;

	if (bq->done_head) {
		/* Completions to deliver already: hand over what is queued, without waiting. */
		if (bq->unsubmitted)
			uring_submit(bq);
		return 0;
	}
	if (min > (int)bq->pieces)
		min = (int)bq->pieces;   /* never wait for completions that cannot come */
	if (min <= 0 || (bq->unsubmitted == 0 && io_uring_cq_ready(&q->ring) >= (unsigned)min))
		return 0;
	if (bq->unsubmitted > 0) {
		/* Submit what is queued and wait, in one io_uring_enter. */
		if (timeout_ns < 0) {
			rc = io_uring_submit_and_wait(&q->ring, (unsigned)min);
		} else {
			struct __kernel_timespec ts = {
				.tv_sec = timeout_ns / 1000000000LL,
				.tv_nsec = timeout_ns % 1000000000LL,
			};
			rc = io_uring_submit_and_wait_timeout(&q->ring, &cqe, (unsigned)min, &ts, NULL);
		}
		/* What the kernel has not consumed is still ours to submit. */
		bq->unsubmitted = io_uring_sq_ready(&q->ring);
		return rc < 0 ? (rc == -EBUSY ? -EAGAIN : rc) : 0;
	}
	if (timeout_ns < 0) {
		rc = io_uring_wait_cqe_nr(&q->ring, &cqe, (unsigned)min);
	} else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ns / 1000000000LL,
			.tv_nsec = timeout_ns % 1000000000LL,
		};
		rc = io_uring_wait_cqes(&q->ring, &cqe, (unsigned)min, &ts, NULL);
	}
	return rc < 0 ? rc : 0;
}

/* ---- eventfd -------------------------------------------------------------------------------- */

static int uring_queue_fd(dev_queue *bq)
{
	uring_queue *q = (uring_queue *)bq;
	int fd = dev_queue_efd(bq);
	if (fd < 0 || q->efd_registered)
		return fd;
	int rc = io_uring_register_eventfd(&q->ring, fd);
	if (rc < 0)
		return rc;
	q->efd_registered = true;
	return fd;
}

static const dev_ops uring_ops = {
	.close = dev_files_close,
	.queue_open = uring_queue_open,
	.queue_close = uring_queue_close,
	.enqueue = uring_enqueue,
	.submit = uring_submit,
	.reap = uring_reap,
	.wait = uring_wait,
	.queue_fd = uring_queue_fd,
	.segment_remove = dev_seg_remove,
	.sync = dev_files_sync,
};

#endif /* SPW_WITH_URING */
