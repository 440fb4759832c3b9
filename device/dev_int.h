/*
 * dev_int.h - what the device backends share and callers never see: the segment table, request
 * bookkeeping (validation, throttle, pieces, the done list) and the segment-file helpers.
 */
#ifndef SPW_DEV_INT_H
#define SPW_DEV_INT_H

#include "device/device.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

/* ---- segment table ------------------------------------------------------------------------- */

/*
 * Handle values (dev_seg_ent.h): 0 = not looked at yet, > 0 = a handle (fd + 1 for files, a
 * pointer for memory), DEV_SEG_ABSENT = no such segment (reads are short, a write creates it),
 * DEV_SEG_REMOVED = removed (IO fails with -ENOENT). Entries are read without a lock; every change
 * of h happens under t->lock.
 */
#define DEV_SEG_ABSENT (-2)
#define DEV_SEG_REMOVED (-1)
#define DEV_SEG_CHUNK_BITS 12
#define DEV_SEG_CHUNK (1u << DEV_SEG_CHUNK_BITS)
#define DEV_RESERVED_ALL UINT64_MAX   /* dev_seg_ent.reserved: nothing left to reserve */

/* One segment's entry; reserved sits beside h so that the write path's check touches no other
 * cache line. */
typedef struct dev_seg_ent {
	_Atomic int64_t h;
	/* Files: bytes from the segment's start that are preallocated or claimed by a thread about to
	 * preallocate them (device.c note 6); DEV_RESERVED_ALL once the whole segment is, or when the
	 * file system cannot preallocate. Set before h is published, then only raised, by a CAS. */
	_Atomic uint64_t reserved;
} dev_seg_ent;

typedef struct dev_segtab {
	pthread_mutex_t lock;               /* the slow path: open, create, remove */
	uint64_t nchunks;
	_Atomic(dev_seg_ent *) *chunks;     /* two-level table, chunks allocated on demand */
	_Atomic uint64_t begin;             /* segments below were truncated: -ENOENT */
	/* Backend hooks. open: 0 with *h, 1 = absent (only when !create), or -errno. */
	int (*open)(dev *d, uint64_t seg, bool create, int64_t *h);
	/* Release a handle (h > 0) and, with destroy, delete the segment's data (h may be 0). */
	int (*release)(dev *d, uint64_t seg, int64_t h, bool destroy);
	/* dev_disk_usage: what the segments take (adds to *bytes). NULL = nothing. */
	int (*usage)(dev *d, uint64_t *bytes);
	/* Files only. */
	int dirfd;                          /* cfg.dir, or -1 */
	int oflags;                         /* O_DIRECT or 0 */
	char *dir;                          /* cfg.dir, for messages */
	char *prefix;                       /* cfg.prefix: segment n is <dir>/<prefix><n> */
	uint64_t prealloc_step;             /* a power of two <= segment_bytes */
	uint64_t prealloc_ahead;            /* a write ending closer than this to reserved claims more */
	_Atomic bool prealloc_off;          /* the file system cannot preallocate: stop asking */
	_Atomic bool prealloc_warned;       /* a failed preallocation was logged (once per device) */
	struct dev_prealloc *pa;            /* the preallocator thread (dev_files.c), or NULL */
} dev_segtab;

int dev_segtab_open(dev *d);
void dev_segtab_close(dev *d);
int dev_seg_get_slow(dev *d, uint64_t seg, bool create, int64_t *h);
int dev_seg_remove(dev *d, uint64_t seg);
/* A visitor of dev_segtab_each_open: segment seg has the open handle h. Nonzero stops the walk. */
typedef int (*dev_seg_open_fn)(dev *d, uint64_t seg, int64_t h, void *ctx);
/* Call fn for every open handle in the table, in segment order; returns fn's first nonzero result,
 * else 0. The caller holds the table lock or owns the table alone (close). */
int dev_segtab_each_open(dev *d, dev_seg_open_fn fn, void *ctx);

/* The entry of seg when its chunk exists, else NULL; no lock, no allocation. */
static inline dev_seg_ent *dev_seg_peek(dev_segtab *t, uint64_t seg)
{
	uint64_t ci = seg >> DEV_SEG_CHUNK_BITS;
	if (SPW_UNLIKELY(ci >= t->nchunks))
		return NULL;
	dev_seg_ent *c = atomic_load_explicit(&t->chunks[ci], memory_order_acquire);
	return SPW_LIKELY(c != NULL) ? &c[seg & (DEV_SEG_CHUNK - 1)] : NULL;
}

/* Resolve segment seg: 0 with *h, 1 = absent (reading), -ENOENT = removed, -EINVAL = out of range,
 * other -errno from open/create. The fast path is two loads. */
static inline int dev_seg_get(dev *d, uint64_t seg, bool create, int64_t *h)
{
	dev_seg_ent *e = dev_seg_peek(d->segs, seg);
	if (SPW_LIKELY(e != NULL)) {
		int64_t v = atomic_load_explicit(&e->h, memory_order_acquire);
		if (SPW_LIKELY(v > 0)) {
			*h = v;
			return 0;
		}
	}
	return dev_seg_get_slow(d, seg, create, h);
}

/* A write of the file bytes [off, end) of segment seg (entry e, open, fd = h - 1) is about to be
 * queued: when it comes near the reserved end, claim the next step and have it preallocated
 * (device.c notes 6 and 8). One relaxed load when it does not. */
void dev_files_reserve_ahead(dev *d, uint64_t seg, dev_seg_ent *e, int fd, uint64_t off,
                             uint64_t end);

static inline void dev_files_reserve(dev *d, uint64_t seg, dev_seg_ent *e, int64_t h, uint64_t off,
                                     uint64_t end)
{
	if (SPW_UNLIKELY(end + d->segs->prealloc_ahead > atomic_load_explicit(&e->reserved,
	                                                                      memory_order_relaxed)))
		dev_files_reserve_ahead(d, seg, e, (int)(h - 1), off, end);
}

/* ---- device setup -------------------------------------------------------------------------- */

/* Fill the base struct from cfg and make an empty segment table. err gets a message on failure. */
int dev_base_init(dev *d, const dev_ops *ops, const char *name, uint32_t caps, const dev_config *cfg,
                  char *err, size_t errlen);
void dev_base_fini(dev *d);

/* Open a file backend whose device is a plain `dev` (uring, libaio, posix): dev_base_init, then
 * create cfg.dir, probe O_DIRECT (direct) and the sector size, and find existing segments
 * (<prefix><n>). 0 with *out, or -errno with err (-EOPNOTSUPP when O_DIRECT is refused). */
int dev_files_open(const dev_ops *ops, const char *name, uint32_t caps, bool direct,
                   const dev_config *cfg, dev **out /* out */, char *err, size_t errlen);
/* The close of those backends (their dev_ops.close). */
void dev_files_close(dev *d);
/* fdatasync every open segment file. */
int dev_files_sync(dev *d);
/* Unlink every <prefix><n> with n < until, the ones never opened by this process included. */
void dev_files_purge_below(dev_segtab *t, uint64_t until);

/* Backend constructors (the registry in device.c calls them). */
int dev_uring_open(const dev_config *cfg, dev **out, char *err, size_t errlen);
int dev_aio_open(const dev_config *cfg, dev **out, char *err, size_t errlen);
int dev_mem_open(const dev_config *cfg, dev **out, char *err, size_t errlen);
int dev_posix_open(const dev_config *cfg, dev **out, char *err, size_t errlen);
int dev_fault_open(const dev_config *cfg, const char *inner, dev **out, char *err, size_t errlen);

void dev_err_set(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- requests ------------------------------------------------------------------------------ */

/* A part of a request that spans segments: its own iovec slice, living until it completes. */
typedef struct dev_piece {
	struct dev_piece *next;      /* free list */
	dev_req *req;
	uint64_t rel;                /* offset of the piece within the request */
	uint64_t len;
	int iovcnt;
	struct iovec iov[DEV_IOV_MAX];
} dev_piece;

#define DEV_PIECE_POOL 64
/* Completion tags (io_uring user_data, iocb data): a dev_req pointer, or a dev_piece | 1. */
#define DEV_TAG_PIECE 1u

/* Base queue setup/teardown (efd, pieces, lists). */
void dev_queue_base_init(dev_queue *q, dev *d, const dev_ops *ops, uint32_t depth);
void dev_queue_base_fini(dev_queue *q);
/* Submit, reap and wait until no request of q is left (callbacks run); gives up, loudly, only
 * after a minute without progress. For queue_close. */
void dev_queue_drain(dev_queue *q);
/* Create (once) the queue's nonblocking eventfd; fd or -errno. */
int dev_queue_efd(dev_queue *q);

/* Validate r for op and take a throttle slot. 0, -EINVAL (misaligned, empty, too long, or spanning
 * more than DEV_PIECES_MAX segments: the same limit for every backend), -EAGAIN.
 * Inline: it is on every request's path and is a handful of loads for a one-buffer request. */
static inline int dev_req_begin(dev_queue *q, dev_req *r, int op)
{
	dev *d = q->dev;
	uint64_t len = 0, smask = d->sector_bytes - 1;
	uint64_t bad;
	if (SPW_UNLIKELY(!r || !r->done))
		return -EINVAL;
	bad = r->offset & smask;
	if (SPW_LIKELY(op != DEV_OP_FLUSH)) {
		uintptr_t amask = d->mem_align - 1;
		if (SPW_UNLIKELY(!r->iov || r->iovcnt < 1 || r->iovcnt > DEV_IOV_MAX))
			return -EINVAL;
		for (int i = 0; i < r->iovcnt; i++) {
			bad |= ((uintptr_t)r->iov[i].iov_base & amask) | (r->iov[i].iov_len & smask);
			len += r->iov[i].iov_len;
		}
		if (SPW_UNLIKELY(len == 0 || len > DEV_REQ_MAX_BYTES))
			return -EINVAL;
	}
	if (SPW_UNLIKELY(bad || r->offset >= DEV_MAX_BYTES || r->offset + len > DEV_MAX_BYTES))
		return -EINVAL;
	if (SPW_UNLIKELY(len && ((r->offset + len - 1) >> d->segment_shift) - (r->offset >> d->segment_shift) >=
	                 DEV_PIECES_MAX))
		return -EINVAL;
	/* The throttle: one relaxed add; past the limit the add is undone and the caller tries again. */
	if (SPW_UNLIKELY(atomic_fetch_add_explicit(&d->inflight, 1, memory_order_relaxed) >=
	                 d->throttle_limit)) {
		atomic_fetch_sub_explicit(&d->inflight, 1, memory_order_relaxed);
		return -EAGAIN;
	}
	r->p.next = NULL;
	r->p.q = q;
	r->p.len = len;
	r->p.short_at = len;
	r->p.res = 0;
	r->p.err = 0;
	r->p.pending = 0;
	r->p.op = (uint8_t)op;
	q->reqs++;
	return 0;
}

/* Give back the throttle slot of a request that dev_req_begin accepted but that was not queued. */
void dev_req_cancel(dev_queue *q, dev_req *r);

/* Piece [rel, rel+len) of r finished with res. True when that was r's last piece. */
static inline bool dev_req_piece_end(dev_req *r, uint64_t rel, uint64_t len, int64_t res)
{
	if (SPW_UNLIKELY(res < 0)) {
		if (r->p.err == 0)
			r->p.err = (int)res;
	} else if (SPW_UNLIKELY((uint64_t)res < len)) {
		if (rel + (uint64_t)res < r->p.short_at)
			r->p.short_at = rel + (uint64_t)res;
	}
	return --r->p.pending == 0;
}

static inline int64_t dev_req_result(const dev_req *r)
{
	if (r->p.err)
		return r->p.err;
	return (int64_t)SPW_MIN(r->p.short_at, r->p.len);
}

/* Run r's callback now: the throttle slot is given back first, so the callback may queue again. */
static inline void dev_req_finish(dev_queue *q, dev_req *r)
{
	int64_t res = dev_req_result(r);
	q->reqs--;
	q->completed++;
	atomic_fetch_sub_explicit(&q->dev->inflight, 1, memory_order_relaxed);
	r->done(r, res);
}

/* Append r to the list [*head, *tail] of requests linked through p.next. */
static inline void dev_req_append(dev_req **head, dev_req **tail, dev_req *r)
{
	r->p.next = NULL;
	if (*tail)
		(*tail)->p.next = r;
	else
		*head = r;
	*tail = r;
}

/* Put a finished request on the done list (its callback runs in the next dev_reap). */
static inline void dev_queue_done_push(dev_queue *q, dev_req *r)
{
	dev_req_append(&q->done_head, &q->done_tail, r);
	q->ndone++;
}

/* The enqueue of a backend that does its IO in dev_submit (posix, localmemory): validate r and add
 * it to the batch [*head, *tail] that the next dev_submit takes. Same returns as dev_req_begin. */
static inline int dev_batch_enqueue(dev_queue *q, dev_req *r, int op, dev_req **head, dev_req **tail)
{
	int rc = dev_req_begin(q, r, op);
	if (SPW_UNLIKELY(rc))
		return rc;
	r->p.pending = 1;   /* one piece; posix_do recounts when the request spans segments */
	dev_req_append(head, tail, r);
	q->unsubmitted++;
	return 0;
}

/* Run up to max callbacks from the done list. Returns how many ran. */
int dev_queue_done_run(dev_queue *q, int max);

/* A kernel completion for tag with result res: account the piece; the request when this was its
 * last piece, else NULL. */
static inline dev_req *dev_tag_end(dev_queue *q, uintptr_t tag, int64_t res)
{
	dev_req *r;
	uint64_t rel, len;
	q->pieces--;
	if (SPW_LIKELY(!(tag & DEV_TAG_PIECE))) {
		r = (dev_req *)tag;
		rel = 0;
		len = r->p.len;
	} else {
		dev_piece *p = (dev_piece *)(tag & ~(uintptr_t)DEV_TAG_PIECE);
		r = p->req;
		rel = p->rel;
		len = p->len;
		p->next = q->piece_free;
		q->piece_free = p;
	}
	return dev_req_piece_end(r, rel, len, res) ? r : NULL;
}

/* dev_tag_end, and the request's callback runs when it is done. */
static inline void dev_tag_complete(dev_queue *q, uintptr_t tag, int64_t res)
{
	dev_req *r = dev_tag_end(q, tag, res);
	if (r)
		dev_req_finish(q, r);
}

/* Copy the bytes [skip, skip+len) of an iovec array as a new array in out (<= DEV_IOV_MAX). */
int dev_iov_slice(const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len,
                  struct iovec *out /* out */);

/*
 * Queue r on a file backend that prepares kernel requests one piece at a time: split at segment
 * boundaries, resolve each segment's fd (creating it for writes, and preallocating ahead of them:
 * dev_files_reserve), and call prep(q, fd, op, off, iov, iovcnt, tag) for each piece; pieces of
 * absent or removed segments complete at once. prep cannot fail: the capacity (q->depth pieces) is
 * checked first. 0, -EINVAL, -EAGAIN.
 * The common case (one segment, already open) is inline so that prep inlines into it.
 */
typedef void (*dev_prep_fn)(dev_queue *q, int fd, int op, uint64_t off, const struct iovec *iov,
                            int iovcnt, uintptr_t tag);
int dev_files_enqueue_slow(dev_queue *q, dev_req *r, int op, dev_prep_fn prep);

static inline int dev_files_enqueue(dev_queue *q, dev_req *r, int op, dev_prep_fn prep)
{
	dev *d = q->dev;
	int rc = dev_req_begin(q, r, op);
	if (SPW_UNLIKELY(rc))
		return rc;
	uint64_t seg = r->offset >> d->segment_shift;
	if (SPW_LIKELY(op != DEV_OP_FLUSH && q->pieces < q->depth &&
	               ((r->offset + r->p.len - 1) >> d->segment_shift) == seg)) {
		dev_seg_ent *e = dev_seg_peek(d->segs, seg);
		int64_t h = e ? atomic_load_explicit(&e->h, memory_order_acquire) : 0;
		if (SPW_LIKELY(h > 0)) {
			uint64_t off = r->offset & (d->segment_bytes - 1);
			if (op == DEV_OP_WRITE)
				dev_files_reserve(d, seg, e, h, off, off + r->p.len);
			r->p.pending = 1;
			q->pieces++;
			q->unsubmitted++;
			prep(q, (int)(h - 1), op, off, r->iov, r->iovcnt, (uintptr_t)r);
			return 0;
		}
	}
	return dev_files_enqueue_slow(q, r, op, prep);
}

#endif
