/*
 * dev_posix.c - the posix backend (--device-type posix): preadv/pwritev and fdatasync.
 *
 * For file systems without O_DIRECT (tmpfs on old kernels, some network and FUSE file systems) and
 * as the fallback a user may ask for. The same segment files as the native backends, through the
 * page cache; dev_submit performs each queued request on the calling thread and its callback runs
 * in the next dev_reap. The alignment rules stay those of the native backends, so a configuration
 * that works here works there.
 *
 * Sections: device open/close; queue open/close; enqueue; submit (the IO); reap and wait.
 */
#include "device/dev_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct posix_queue {
	dev_queue base;
	dev_req *q_head, *q_tail;    /* queued since the last dev_submit */
} posix_queue;

static const dev_ops posix_ops;

/* ---- device open/close ---------------------------------------------------------------------- */

int dev_posix_open(const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	return dev_files_open(&posix_ops, "posix", DEV_CAP_PERSISTENT | DEV_CAP_FLUSH, false, cfg, out, err,
	                      errlen);
}

/* ---- queue open/close ----------------------------------------------------------------------- */

static int posix_queue_open(dev *d, dev_queue **out)
{
	posix_queue *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	dev_queue_base_init(&q->base, d, &posix_ops, d->queue_depth);
	*out = &q->base;
	return 0;
}

static void posix_queue_close(dev_queue *bq)
{
	dev_queue_drain(bq);
	dev_queue_base_fini(bq);
	free(bq);
}

/* ---- enqueue -------------------------------------------------------------------------------- */

static int posix_enqueue(dev_queue *bq, dev_req *r, int op)
{
	posix_queue *q = (posix_queue *)bq;
	return dev_batch_enqueue(bq, r, op, &q->q_head, &q->q_tail);
}

/* ---- submit (the IO) ------------------------------------------------------------------------ */

/* One piece: the whole of iov at off in fd, retrying partial transfers; bytes done or -errno. A
 * read stops early only at the end of the file. */
static int64_t posix_piece(int fd, int op, uint64_t off, struct iovec *iov, int iovcnt)
{
	int64_t done = 0;
	while (iovcnt > 0) {
		ssize_t n = op == DEV_OP_READ ? preadv(fd, iov, iovcnt, (off_t)off)
		                              : pwritev(fd, iov, iovcnt, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return done ? done : -errno;
		}
		if (n == 0)
			break;
		done += n;
		off += (uint64_t)n;
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return done;
}

/* Perform r on the calling thread, piece by piece, accounting each into r. */
static void posix_do(dev *d, dev_req *r)
{
	int op = r->p.op;
	uint64_t seg0 = r->offset >> d->segment_shift;
	uint64_t seg1 = op == DEV_OP_FLUSH ? seg0 : (r->offset + r->p.len - 1) >> d->segment_shift;
	uint64_t rel = 0;

	r->p.pending = (uint16_t)(seg1 - seg0 + 1);
	for (uint64_t seg = seg0; seg <= seg1; seg++) {
		uint64_t file_off = seg == seg0 ? r->offset & (d->segment_bytes - 1) : 0;
		uint64_t len = op == DEV_OP_FLUSH ? 0 : SPW_MIN(d->segment_bytes - file_off, r->p.len - rel);
		struct iovec iov[DEV_IOV_MAX];
		int64_t h, res;
		int g = dev_seg_get(d, seg, op == DEV_OP_WRITE, &h);
		if (g != 0) {
			res = g == 1 ? 0 : g;
		} else if (op == DEV_OP_FLUSH) {
			res = fdatasync((int)(h - 1)) < 0 ? -errno : 0;
		} else {
			if (op == DEV_OP_WRITE)
				dev_files_reserve(d, seg, dev_seg_peek(d->segs, seg), h, file_off, file_off + len);
			int n = dev_iov_slice(r->iov, r->iovcnt, rel, len, iov);
			res = posix_piece((int)(h - 1), op, file_off, iov, n);
		}
		dev_req_piece_end(r, rel, len, res);
		rel += len;
	}
}

static int posix_submit(dev_queue *bq)
{
	posix_queue *q = (posix_queue *)bq;
	dev_req *r = q->q_head;
	int n = (int)bq->unsubmitted;

	q->q_head = q->q_tail = NULL;
	bq->unsubmitted = 0;
	while (r) {
		dev_req *next = r->p.next;
		posix_do(bq->dev, r);
		dev_queue_done_push(bq, r);
		r = next;
	}
	return n;
}

/* ---- reap and wait -------------------------------------------------------------------------- */

static int posix_reap(dev_queue *bq, int max)
{
	return dev_queue_done_run(bq, max);
}

static int posix_wait(dev_queue *bq, int min, int64_t timeout_ns)
{
	(void)min;
	(void)timeout_ns;
	posix_submit(bq);   /* the IO happens here; then everything is done */
	return 0;
}

static int posix_queue_fd(dev_queue *bq)
{
	return dev_queue_efd(bq);   /* never signalled: nothing completes after dev_submit returns */
}

static const dev_ops posix_ops = {
	.close = dev_files_close,
	.queue_open = posix_queue_open,
	.queue_close = posix_queue_close,
	.enqueue = posix_enqueue,
	.submit = posix_submit,
	.reap = posix_reap,
	.wait = posix_wait,
	.queue_fd = posix_queue_fd,
	.segment_remove = dev_seg_remove,
	.sync = dev_files_sync,
};
