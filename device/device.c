/*
 * device.c - the device layer's core: registry, segment table, segment files, request bookkeeping.
 *
 * NOTES ON THE DESIGN OF THE DEVICE LAYER
 *
 * Invariants:
 *  1. A logical offset maps to (segment = offset >> segment_shift, file offset = offset & (segment
 *     bytes - 1)); segment n is <cfg.dir>/<cfg.prefix><n>, names the caller chose. A request that
 *     crosses a segment boundary is split into pieces, one per segment (at most DEV_PIECES_MAX); the
 *     caller sees one completion.
 *  2. A request's result is the first piece error if any, else the bytes before the first short
 *     piece: a read that reaches the written end returns a short count, never bytes past a hole.
 *  3. The throttle counts requests from acceptance (dev_req_begin) until just before their
 *     callback; dev->inflight never exceeds throttle_limit, because the add that would pass it is
 *     undone and answered -EAGAIN. A queue also never holds more than its depth in pieces, so an
 *     io_uring SQ or an aio context can never overflow.
 *  4. Completion callbacks run only inside dev_reap (or dev_queue_close) of the queue that accepted
 *     the request, so on that queue's thread; never inside dev_read/dev_write/dev_submit, so a caller
 *     holding its own state across those calls is never re-entered.
 *  5. Segment table entries change only under the table lock and only move 0 -> handle/ABSENT,
 *     ABSENT -> handle, and anything -> REMOVED; the request path reads them lock-free. Handles stay
 *     valid until the segment is removed or the device closed, which the caller orders after all IO
 *     to the segment (see device.h).
 *  6. Segment files are preallocated with FALLOC_FL_KEEP_SIZE, so that page writes land in blocks
 *     reserved for them (no block allocation on the write path, and a segment's blocks stay near
 *     each other), while the size stays the written end, which is what gives invariant 2 after a
 *     reopen. The reservation grows with the writes instead of covering the whole segment at
 *     creation, so disk use (st_blocks, what du shows and dev_disk_usage counts) follows the data:
 *     a store that wrote 1 MB into 1 GiB segments holds one step, not 1 GiB. A new file gets its
 *     first step (cfg.prealloc_step, 64 MiB by default, at most the segment) at creation; an ENOSPC
 *     there fails the write that creates it. Each segment entry holds its reserved end r
 *     (dev_seg_ent.reserved); a write that ends within half a step of r claims up to 2r (or past
 *     itself, rounded to a step, if it jumped further), at most the segment, with one CAS
 *     (dev_files_reserve_ahead): with several threads writing one segment exactly one claims each
 *     range, and the others, seeing it claimed, go on. Doubling rather than a fixed step because
 *     each extension of a file being written costs a drain of its IO (note 8): a 1 GiB segment
 *     grows in 4 extensions from 64 MiB, not 15, and what lies reserved past the written end is
 *     less than the written part plus a step and a half, in the segments being written only (a
 *     segment written to its end holds exactly its data). It stays allocated across a close. A
 *     failed extension is logged once and not retried (the writes then allocate as they go: the
 *     reservation is for speed and layout, never for correctness); a file system without fallocate
 *     is not asked again. A file found at open (a reopen) has an unknown reservation: its first
 *     write claims its own step.
 *  7. Every failure is a return value (-errno) or a callback result; no path aborts. Refusals by the
 *     kernel (io_uring, aio, O_DIRECT) are reported with the reason and never silently worked
 *     around, unless cfg.allow_fallback asks for it (then the fallback is logged).
 *  8. Where the extensions after the first step are made: by a thread of the device's own (the
 *     preallocator, dev_files.c, started on the first claim), never by the writer. The kernel makes
 *     a fallocate wait for every direct IO in flight on the file (inode_dio_wait, ext4 and xfs
 *     alike), and the writer that claims an extension has its own writes in flight there: made on
 *     the writer, each one stalled it for as long as its queue took to drain (docs/BENCHMARKS.md,
 *     "Step preallocation"), which on a worker is a stall of every client it serves. The writer
 *     only claims (one CAS) and queues the range (one mutex, once per extension); with io_uring its
 *     writes meanwhile go on asynchronously (the kernel hands those that meet the file's lock to its
 *     workers), while a libaio or posix writer still waits for the file's lock in its submission:
 *     that part of the cost is the kernel's, and the doubling of note 6 keeps it to a few times per
 *     segment. The claim is made half a step early, so the range is normally in place before the
 *     writes reach it; a write that gets there first still succeeds (the file system allocates it).
 *     The first step stays on the creating thread (the new file has no IO in flight, and its ENOSPC
 *     must fail that write); dev_segment_prepare lets a caller take that off its workers too.
 *
 * A request's life:
 *   dev_read/dev_write/dev_flush -> dev_req_begin (validate, throttle) -> queued (SQE / iocb / list)
 *   -> dev_submit (kernel or copy threads) -> completed (CQE / io_event / done list)
 *   -> dev_reap -> dev_req_finish (throttle slot back, callback).
 *
 * Sections: registry and dev_open; base device; segment table; requests. The segment files are
 * dev_files.c's.
 */
#include "device/dev_int.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- registry and dev_open ------------------------------------------------------------------ */

typedef struct dev_backend {
	const char *name;
	const char *alias;
	int (*open)(const dev_config *cfg, dev **out, char *err, size_t errlen);
} dev_backend;

static const dev_backend dev_backends[] = {
#if SPW_WITH_URING
	{ "uring", "io_uring", dev_uring_open },
#endif
#if SPW_WITH_AIO
	{ "libaio", "aio", dev_aio_open },
#endif
	{ "localmemory", "memory", dev_mem_open },
	{ "posix", NULL, dev_posix_open },
};

void dev_err_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

const char *dev_backend_name(int i)
{
	if (i < 0 || (size_t)i >= SPW_ARRAY_LEN(dev_backends))
		return NULL;
	return dev_backends[i].name;
}

static const dev_backend *dev_backend_find(const char *name)
{
	for (size_t i = 0; i < SPW_ARRAY_LEN(dev_backends); i++) {
		const dev_backend *b = &dev_backends[i];
		if (strcasecmp(name, b->name) == 0 || (b->alias && strcasecmp(name, b->alias) == 0))
			return b;
	}
	return NULL;
}

bool dev_backend_built(const char *name)
{
	if (name && strncasecmp(name, "fault:", 6) == 0)
		name += 6;
	if (name && strcasecmp(name, "native") == 0)
		return SPW_WITH_URING || SPW_WITH_AIO;
	return name && dev_backend_find(name) != NULL;
}

void dev_config_init(dev_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->type = "native";
	cfg->segment_bytes = DEV_SEGMENT_DEFAULT;
	cfg->throttle_limit = DEV_THROTTLE_DEFAULT;
	cfg->queue_depth = DEV_QUEUE_DEPTH_DEFAULT;
}

/* Is rc a refusal that a fallback may step around (as opposed to a bad argument)? */
static bool dev_refused(int rc)
{
	return rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP || rc == -EAGAIN || rc == -ENOMEM ||
	       rc == -EACCES;
}

/* The backend to try after b refused with rc: O_DIRECT refused (-EOPNOTSUPP) is the file
 * system's doing, which only posix gets around; any other refusal steps uring -> libaio -> posix.
 * NULL when nothing is left. */
static const dev_backend *dev_fallback_next(const dev_backend *b, int rc)
{
	const dev_backend *nb = NULL;
	if (rc != -EOPNOTSUPP && strcmp(b->name, "uring") == 0)
		nb = dev_backend_find("libaio");
	if (!nb)
		nb = dev_backend_find("posix");
	return nb == b ? NULL : nb;
}

static int dev_open_chain(const dev_config *cfg, const dev_backend *b, bool fallback, dev **out,
                          char *err, size_t errlen);

/* b's open failed with rc (why): step down when fallback is allowed and the kernel refused, else
 * report why. */
static int dev_open_after(const dev_config *cfg, const dev_backend *b, int rc, const char *why,
                          bool fallback, dev **out, char *err, size_t errlen)
{
	const dev_backend *nb = fallback && dev_refused(rc) ? dev_fallback_next(b, rc) : NULL;
	if (!nb) {
		dev_err_set(err, errlen, "%s", why);
		return rc;
	}
	spw_log(SPW_LOG_WARNING, 0, "device: %s; falling back to %s as asked", why, nb->name);
	return dev_open_chain(cfg, nb, fallback, out, err, errlen);
}

/* Open backend b, stepping down on a refusal when fallback is allowed. */
static int dev_open_chain(const dev_config *cfg, const dev_backend *b, bool fallback, dev **out,
                          char *err, size_t errlen)
{
	char why[256] = "";
	int rc = b->open(cfg, out, why, sizeof(why));
	return rc == 0 ? 0 : dev_open_after(cfg, b, rc, why, fallback, out, err, errlen);
}

int dev_open(const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	const char *type;
	const dev_backend *b;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg) {
		dev_err_set(err, errlen, "no device configuration");
		return -EINVAL;
	}
	type = cfg->type && *cfg->type ? cfg->type : "native";
	if (strncasecmp(type, "fault:", 6) == 0)
		return dev_fault_open(cfg, type + 6, out, err, errlen);

	if (strcasecmp(type, "native") == 0) {
		const char *io = cfg->io_backend;
		if (io && *io && strcasecmp(io, "auto") != 0) {
			b = dev_backend_find(io);
			if (!b || (strcasecmp(b->name, "uring") != 0 && strcasecmp(b->name, "libaio") != 0)) {
				dev_err_set(err, errlen, "unknown or unbuilt --device-io-backend '%s' (uring, libaio)",
				            io);
				return -ENOENT;
			}
			return dev_open_chain(cfg, b, cfg->allow_fallback, out, err, errlen);
		}
		/* The default: uring when the kernel allows it, else libaio, and say so. */
		b = dev_backend_find("uring");
		if (b) {
			char why[256] = "";
			rc = b->open(cfg, out, why, sizeof(why));
			if (rc == 0)
				return 0;
			if (!dev_refused(rc) || rc == -EOPNOTSUPP)   /* libaio would meet the same refusal */
				return dev_open_after(cfg, b, rc, why, cfg->allow_fallback, out, err, errlen);
			spw_log(SPW_LOG_NOTICE, 0, "device: %s; using libaio", why);
		}
		b = dev_backend_find("libaio");
		if (!b) {
			dev_err_set(err, errlen, "no native backend in this build (uring and libaio both off)");
			return -ENOENT;
		}
		return dev_open_chain(cfg, b, cfg->allow_fallback, out, err, errlen);
	}

	b = dev_backend_find(type);
	if (!b) {
		dev_err_set(err, errlen,
		            "unknown or unbuilt device type '%s' (native, localmemory, posix, uring, libaio)",
		            type);
		return -ENOENT;
	}
	return dev_open_chain(cfg, b, cfg->allow_fallback, out, err, errlen);
}

void dev_close(dev *d)
{
	if (d)
		d->ops->close(d);
}

/* ---- base device ---------------------------------------------------------------------------- */

/* The preallocation step (note 6): cfg's, or the default, as a power of two from 64 KiB to the
 * segment; a write that ends within half a step of the reserved end reserves the next step. */
static void dev_prealloc_init(dev_segtab *t, const dev_config *cfg, uint64_t seg)
{
	uint64_t step = cfg->prealloc_step ? cfg->prealloc_step : DEV_PREALLOC_STEP_DEFAULT;
	uint64_t p = DEV_SEGMENT_MIN;
	while (p < step && p < seg)
		p <<= 1;
	t->prealloc_step = SPW_MIN(p, seg);
	t->prealloc_ahead = t->prealloc_step / 2;
}

int dev_base_init(dev *d, const dev_ops *ops, const char *name, uint32_t caps, const dev_config *cfg,
                  char *err, size_t errlen)
{
	uint64_t seg = cfg->segment_bytes ? cfg->segment_bytes : DEV_SEGMENT_DEFAULT;
	uint32_t sector = cfg->sector_bytes ? cfg->sector_bytes : 512;

	if ((seg & (seg - 1)) != 0 || seg < DEV_SEGMENT_MIN || seg > DEV_MAX_BYTES / 2) {
		dev_err_set(err, errlen, "segment size %llu is not a power of two between %llu and %llu",
		            (unsigned long long)seg, (unsigned long long)DEV_SEGMENT_MIN,
		            (unsigned long long)(DEV_MAX_BYTES / 2));
		return -EINVAL;
	}
	if ((sector & (sector - 1)) != 0 || sector > 65536) {
		dev_err_set(err, errlen, "sector size %u is not a power of two up to 64 KiB", sector);
		return -EINVAL;
	}
	d->ops = ops;
	d->name = name;
	d->caps = caps;
	d->sector_bytes = sector;
	d->mem_align = sector;
	d->throttle_limit = cfg->throttle_limit ? cfg->throttle_limit : DEV_THROTTLE_DEFAULT;
	d->queue_depth = cfg->queue_depth ? cfg->queue_depth : DEV_QUEUE_DEPTH_DEFAULT;
	if (d->queue_depth < DEV_PIECES_MAX)
		d->queue_depth = DEV_PIECES_MAX;   /* a request of DEV_PIECES_MAX pieces must always fit */
	if (d->queue_depth > 32768)
		d->queue_depth = 32768;            /* io_uring's SQ limit */
	d->segment_bytes = seg;
	d->segment_shift = (unsigned)__builtin_ctzll(seg);
	atomic_init(&d->inflight, 0);
	int rc = dev_segtab_open(d);
	if (rc) {
		dev_err_set(err, errlen, "cannot allocate the segment table: %s", spw_strerror(rc));
		return rc;
	}
	dev_prealloc_init(d->segs, cfg, seg);
	return 0;
}

void dev_base_fini(dev *d)
{
	if (d->segs)
		dev_segtab_close(d);
}

/* ---- segment table -------------------------------------------------------------------------- */

int dev_segtab_open(dev *d)
{
	dev_segtab *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	uint64_t nseg = DEV_MAX_BYTES >> d->segment_shift;
	t->nchunks = (nseg + DEV_SEG_CHUNK - 1) >> DEV_SEG_CHUNK_BITS;
	t->chunks = calloc(t->nchunks, sizeof(*t->chunks));
	if (!t->chunks) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	atomic_init(&t->begin, 0);
	t->dirfd = -1;
	d->segs = t;
	return 0;
}

int dev_segtab_each_open(dev *d, dev_seg_open_fn fn, void *ctx)
{
	dev_segtab *t = d->segs;
	for (uint64_t ci = 0; ci < t->nchunks; ci++) {
		dev_seg_ent *c = atomic_load(&t->chunks[ci]);
		if (!c)
			continue;
		for (uint32_t i = 0; i < DEV_SEG_CHUNK; i++) {
			int64_t h = atomic_load(&c[i].h);
			int rc = h > 0 ? fn(d, (ci << DEV_SEG_CHUNK_BITS) | i, h, ctx) : 0;
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int dev_seg_close_one(dev *d, uint64_t seg, int64_t h, void *ctx)
{
	(void)ctx;
	d->segs->release(d, seg, h, false);
	return 0;
}

void dev_segtab_close(dev *d)
{
	dev_segtab *t = d->segs;
	if (t->release)
		dev_segtab_each_open(d, dev_seg_close_one, NULL);
	for (uint64_t ci = 0; ci < t->nchunks; ci++)
		free(atomic_load(&t->chunks[ci]));
	free(t->chunks);
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t->dir);
	free(t->prefix);
	pthread_mutex_destroy(&t->lock);
	free(t);
	d->segs = NULL;
}

/* The entry of seg, allocating its chunk; NULL when out of range or out of memory. Lock held. */
static dev_seg_ent *dev_seg_slot(dev_segtab *t, uint64_t seg)
{
	uint64_t ci = seg >> DEV_SEG_CHUNK_BITS;
	if (ci >= t->nchunks)
		return NULL;
	dev_seg_ent *c = atomic_load_explicit(&t->chunks[ci], memory_order_acquire);
	if (!c) {
		c = calloc(DEV_SEG_CHUNK, sizeof(*c));
		if (!c)
			return NULL;
		/* Release: a lock-free reader that sees the chunk sees its zeroed entries. */
		atomic_store_explicit(&t->chunks[ci], c, memory_order_release);
	}
	return &c[seg & (DEV_SEG_CHUNK - 1)];
}

/* Take the table lock and find seg's entry: 0 with *slot and the lock held, or -EINVAL (out of
 * range) / -ENOMEM without it. */
static int dev_seg_lock(dev *d, uint64_t seg, dev_seg_ent **slot /* out */)
{
	dev_segtab *t = d->segs;
	if (seg >= (DEV_MAX_BYTES >> d->segment_shift))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	*slot = dev_seg_slot(t, seg);
	if (!*slot) {
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	return 0;
}

int dev_seg_get_slow(dev *d, uint64_t seg, bool create, int64_t *h)
{
	dev_segtab *t = d->segs;
	dev_seg_ent *slot;
	int rc;

	if (seg < atomic_load_explicit(&t->begin, memory_order_acquire))
		return -ENOENT;
	rc = dev_seg_lock(d, seg, &slot);
	if (rc)
		return rc;
	int64_t v = atomic_load_explicit(&slot->h, memory_order_relaxed);
	if (v > 0) {
		*h = v;
		rc = 0;
		goto out;
	}
	if (v == DEV_SEG_REMOVED || seg < atomic_load(&t->begin)) {
		rc = -ENOENT;
		goto out;
	}
	if (v == DEV_SEG_ABSENT && !create) {
		rc = 1;
		goto out;
	}
	rc = t->open(d, seg, create, &v);
	if (rc == 1) {
		atomic_store_explicit(&slot->h, DEV_SEG_ABSENT, memory_order_release);
	} else if (rc == 0) {
		/* Release: the handle is published after whatever open/create did to set it up (the
		 * entry's reserved end included). */
		atomic_store_explicit(&slot->h, v, memory_order_release);
		*h = v;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int dev_seg_remove(dev *d, uint64_t seg)
{
	dev_seg_ent *slot;
	int rc = dev_seg_lock(d, seg, &slot);
	if (rc)
		return rc;
	int64_t v = atomic_exchange(&slot->h, DEV_SEG_REMOVED);
	rc = d->segs->release(d, seg, v > 0 ? v : 0, true);
	pthread_mutex_unlock(&d->segs->lock);
	return rc;
}

int dev_disk_usage(dev *d, uint64_t *bytes)
{
	if (!d || !d->segs || !bytes)
		return -EINVAL;
	*bytes = 0;
	return d->segs->usage ? d->segs->usage(d, bytes) : 0;
}

int dev_segment_prepare(dev *d, uint64_t seg)
{
	int64_t h;
	if (!d || !d->segs)
		return -EINVAL;
	return dev_seg_get(d, seg, true, &h);
}

void dev_segment_name(const dev *d, uint64_t seg, char *buf, size_t len)
{
	const dev_segtab *t = d->segs;
	if (t && t->dir)
		snprintf(buf, len, "%s/%s%llu", t->dir, t->prefix ? t->prefix : "", (unsigned long long)seg);
	else
		snprintf(buf, len, "segment %llu", (unsigned long long)seg);
}

/*
 * Everything below until goes: the table's begin moves first (so new lookups there fail at once),
 * then open handles are released and, for files, the directory is swept once, so the cost follows
 * the segments that exist, not the width of the range.
 */
int dev_truncate_until(dev *d, uint64_t offset)
{
	dev_segtab *t;
	uint64_t until, from;

	if (!d || !d->segs)
		return -EINVAL;
	t = d->segs;
	if (offset > DEV_MAX_BYTES)
		offset = DEV_MAX_BYTES;
	until = offset >> d->segment_shift;
	pthread_mutex_lock(&t->lock);
	from = atomic_load(&t->begin);
	if (until <= from) {
		pthread_mutex_unlock(&t->lock);
		return 0;
	}
	atomic_store_explicit(&t->begin, until, memory_order_release);
	for (uint64_t ci = from >> DEV_SEG_CHUNK_BITS; ci < t->nchunks && (ci << DEV_SEG_CHUNK_BITS) < until;
	     ci++) {
		dev_seg_ent *c = atomic_load(&t->chunks[ci]);
		if (!c)
			continue;
		for (uint32_t i = 0; i < DEV_SEG_CHUNK; i++) {
			uint64_t seg = (ci << DEV_SEG_CHUNK_BITS) | i;
			if (seg < from || seg >= until)
				continue;
			int64_t h = atomic_exchange(&c[i].h, DEV_SEG_REMOVED);
			if (h > 0)
				t->release(d, seg, h, true);
		}
	}
	int rc = 0;
	if (t->dirfd >= 0) {
		dev_files_purge_below(t, until);
		/* The removals must be durable: a reopen takes Begin from the lowest file left. */
		if (fsync(t->dirfd) < 0)
			rc = -errno;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* ---- requests ------------------------------------------------------------------------------- */

void dev_queue_base_init(dev_queue *q, dev *d, const dev_ops *ops, uint32_t depth)
{
	q->ops = ops;
	q->dev = d;
	q->depth = depth;
	q->pieces = 0;
	q->reqs = 0;
	q->unsubmitted = 0;
	q->ndone = 0;
	q->completed = 0;
	q->done_head = q->done_tail = NULL;
	q->piece_free = NULL;
	q->piece_mem = NULL;
	q->efd = -1;
}

void dev_queue_base_fini(dev_queue *q)
{
	free(q->piece_mem);
	q->piece_mem = NULL;
	if (q->efd >= 0)
		close(q->efd);
	q->efd = -1;
}

void dev_queue_drain(dev_queue *q)
{
	uint64_t last = spw_mono_ns();
	while (q->reqs > 0) {
		q->ops->submit(q);
		if (q->ops->reap(q, INT_MAX) > 0) {
			last = spw_mono_ns();
			continue;
		}
		if (spw_mono_ns() - last > 60ULL * 1000000000ULL) {
			spw_log(SPW_LOG_WARNING, 0, "device %s: %u requests did not complete in 60 s; "
			        "closing the queue without them", q->dev->name, q->reqs);
			break;
		}
		q->ops->wait(q, 1, 100000000LL);
	}
}

int dev_queue_efd(dev_queue *q)
{
	if (q->efd < 0) {
		q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (q->efd < 0)
			return -errno;
	}
	return q->efd;
}

void dev_req_cancel(dev_queue *q, dev_req *r)
{
	(void)r;
	q->reqs--;
	atomic_fetch_sub_explicit(&q->dev->inflight, 1, memory_order_relaxed);
}

int dev_queue_done_run(dev_queue *q, int max)
{
	int n = 0;
	while (n < max && q->done_head) {
		dev_req *r = q->done_head;
		q->done_head = r->p.next;
		if (!q->done_head)
			q->done_tail = NULL;
		q->ndone--;
		dev_req_finish(q, r);
		n++;
	}
	return n;
}

int dev_iov_slice(const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len, struct iovec *out)
{
	int n = 0;
	for (int i = 0; i < iovcnt && len > 0; i++) {
		uint64_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		uint64_t take = SPW_MIN(l - skip, len);
		out[n].iov_base = (char *)iov[i].iov_base + skip;
		out[n].iov_len = take;
		n++;
		len -= take;
		skip = 0;
	}
	return n;
}

/* The pool for requests that span segments, made on the first such request. */
static int dev_pieces_alloc(dev_queue *q)
{
	dev_piece *p = calloc(DEV_PIECE_POOL, sizeof(*p));
	if (!p)
		return -ENOMEM;
	q->piece_mem = p;
	for (int i = 0; i < DEV_PIECE_POOL; i++) {
		p[i].next = q->piece_free;
		q->piece_free = &p[i];
	}
	return 0;
}

/* One piece of r whose segment could not be used: complete it at once with res. */
static void dev_piece_now(dev_queue *q, dev_req *r, uint64_t rel, uint64_t len, int64_t res)
{
	if (dev_req_piece_end(r, rel, len, res))
		dev_queue_done_push(q, r);
}

int dev_files_enqueue_slow(dev_queue *q, dev_req *r, int op, dev_prep_fn prep)
{
	dev *d = q->dev;
	uint64_t seg0 = r->offset >> d->segment_shift;
	uint64_t seg1 = op == DEV_OP_FLUSH ? seg0 : (r->offset + r->p.len - 1) >> d->segment_shift;
	uint64_t npieces = seg1 - seg0 + 1, rel = 0;
	int rc;

	/* npieces <= DEV_PIECES_MAX: dev_req_begin refused longer spans. */
	if (q->pieces + npieces > q->depth) {
		rc = -EAGAIN;
		goto fail;
	}
	if (npieces > 1) {
		if (!q->piece_mem && (rc = dev_pieces_alloc(q)) != 0)
			goto fail;
		/* Count free pieces first so that a request is either wholly queued or not at all. */
		uint64_t nfree = 0;
		for (dev_piece *p = q->piece_free; p && nfree < npieces; p = p->next)
			nfree++;
		if (nfree < npieces) {
			rc = -EAGAIN;
			goto fail;
		}
	}
	/* pending covers every piece before any can complete, so none finishes the request early. */
	r->p.pending = (uint16_t)npieces;
	for (uint64_t seg = seg0; seg <= seg1; seg++) {
		uint64_t file_off = seg == seg0 ? r->offset & (d->segment_bytes - 1) : 0;
		uint64_t len = op == DEV_OP_FLUSH ? 0 :
			SPW_MIN(d->segment_bytes - file_off, r->p.len - rel);
		int64_t h;
		int g = dev_seg_get(d, seg, op == DEV_OP_WRITE, &h);
		if (g == 0 && op == DEV_OP_WRITE)
			dev_files_reserve(d, seg, dev_seg_peek(d->segs, seg), h, file_off, file_off + len);
		if (g != 0) {
			/* Absent: a read there is past the written end, a flush has nothing to do. */
			dev_piece_now(q, r, rel, len, g == 1 ? 0 : g);
		} else if (npieces == 1) {
			q->pieces++;
			q->unsubmitted++;
			prep(q, (int)(h - 1), op, file_off, r->iov, r->iovcnt, (uintptr_t)r);
		} else {
			dev_piece *p = q->piece_free;
			q->piece_free = p->next;
			p->req = r;
			p->rel = rel;
			p->len = len;
			p->iovcnt = dev_iov_slice(r->iov, r->iovcnt, rel, len, p->iov);
			q->pieces++;
			q->unsubmitted++;
			prep(q, (int)(h - 1), op, file_off, p->iov, p->iovcnt, (uintptr_t)p | DEV_TAG_PIECE);
		}
		rel += len;
	}
	return 0;
fail:
	dev_req_cancel(q, r);
	return rc;
}
