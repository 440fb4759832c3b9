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
 *  6. Segment files are preallocated with FALLOC_FL_KEEP_SIZE: disk space is reserved but the size
 *     stays the written end, which is what gives invariant 2 after a reopen.
 *  7. Every failure is a return value (-errno) or a callback result; no path aborts. Refusals by the
 *     kernel (io_uring, aio, O_DIRECT) are reported with the reason and never silently worked
 *     around, unless cfg.allow_fallback asks for it (then the fallback is logged).
 *
 * A request's life:
 *   dev_read/dev_write/dev_flush -> dev_req_begin (validate, throttle) -> queued (SQE / iocb / list)
 *   -> dev_submit (kernel or copy threads) -> completed (CQE / io_event / done list)
 *   -> dev_reap -> dev_req_finish (throttle slot back, callback).
 *
 * Sections: registry and dev_open; base device; segment table; segment files; requests.
 */
#include "device/dev_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
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
	if (rc)
		dev_err_set(err, errlen, "cannot allocate the segment table: %s", spw_strerror(rc));
	return rc;
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

/* A visitor of dev_segtab_each_open: segment seg has the open handle h. Nonzero stops the walk. */
typedef int (*dev_seg_open_fn)(dev *d, uint64_t seg, int64_t h, void *ctx);

/* Call fn for every open handle in the table, in segment order; returns fn's first nonzero result,
 * else 0. The caller holds the table lock or owns the table alone (close). */
static int dev_segtab_each_open(dev *d, dev_seg_open_fn fn, void *ctx)
{
	dev_segtab *t = d->segs;
	for (uint64_t ci = 0; ci < t->nchunks; ci++) {
		_Atomic int64_t *c = atomic_load(&t->chunks[ci]);
		if (!c)
			continue;
		for (uint32_t i = 0; i < DEV_SEG_CHUNK; i++) {
			int64_t h = atomic_load(&c[i]);
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
static _Atomic int64_t *dev_seg_slot(dev_segtab *t, uint64_t seg)
{
	uint64_t ci = seg >> DEV_SEG_CHUNK_BITS;
	if (ci >= t->nchunks)
		return NULL;
	_Atomic int64_t *c = atomic_load_explicit(&t->chunks[ci], memory_order_acquire);
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
static int dev_seg_lock(dev *d, uint64_t seg, _Atomic int64_t **slot /* out */)
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
	_Atomic int64_t *slot;
	int rc;

	if (seg < atomic_load_explicit(&t->begin, memory_order_acquire))
		return -ENOENT;
	rc = dev_seg_lock(d, seg, &slot);
	if (rc)
		return rc;
	int64_t v = atomic_load_explicit(slot, memory_order_relaxed);
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
		atomic_store_explicit(slot, DEV_SEG_ABSENT, memory_order_release);
	} else if (rc == 0) {
		/* Release: the handle is published after whatever open/create did to set it up. */
		atomic_store_explicit(slot, v, memory_order_release);
		*h = v;
	}
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int dev_seg_remove(dev *d, uint64_t seg)
{
	_Atomic int64_t *slot;
	int rc = dev_seg_lock(d, seg, &slot);
	if (rc)
		return rc;
	int64_t v = atomic_exchange(slot, DEV_SEG_REMOVED);
	rc = d->segs->release(d, seg, v > 0 ? v : 0, true);
	pthread_mutex_unlock(&d->segs->lock);
	return rc;
}

int dev_segment_prepare(dev *d, uint64_t seg)
{
	int64_t h;
	if (!d || !d->segs)
		return -EINVAL;
	return dev_seg_get(d, seg, true, &h);
}

static void dev_files_purge_below(dev_segtab *t, uint64_t until);

/*
 * Everything below until goes: the table's begin moves first (so new lookups there fail at once),
 * then open handles are released and, for files, the directory is swept once, so the cost follows
 * the segments that exist, not the width of the range.
 */
void dev_segment_name(const dev *d, uint64_t seg, char *buf, size_t len)
{
	const dev_segtab *t = d->segs;
	if (t && t->dir)
		snprintf(buf, len, "%s/%s%llu", t->dir, t->prefix ? t->prefix : "", (unsigned long long)seg);
	else
		snprintf(buf, len, "segment %llu", (unsigned long long)seg);
}

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
		_Atomic int64_t *c = atomic_load(&t->chunks[ci]);
		if (!c)
			continue;
		for (uint32_t i = 0; i < DEV_SEG_CHUNK; i++) {
			uint64_t seg = (ci << DEV_SEG_CHUNK_BITS) | i;
			if (seg < from || seg >= until)
				continue;
			int64_t h = atomic_exchange(&c[i], DEV_SEG_REMOVED);
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

/* ---- segment files -------------------------------------------------------------------------- */

#define DEV_SEG_NAME_MAX (DEV_PREFIX_MAX + 24)   /* <prefix>, 20 digits, NUL */

static void dev_seg_name(const dev_segtab *t, char *buf, size_t len, uint64_t seg)
{
	snprintf(buf, len, "%s%llu", t->prefix, (unsigned long long)seg);
}

/* Open (or create) the file of segment seg. Lock held. 0 with *h = fd + 1, 1 absent, or -errno. */
static int dev_file_open(dev *d, uint64_t seg, bool create, int64_t *h)
{
	dev_segtab *t = d->segs;
	char name[DEV_SEG_NAME_MAX];
	int fd, flags = O_RDWR | O_CLOEXEC | t->oflags;

	dev_seg_name(t, name, sizeof(name), seg);
	fd = openat(t->dirfd, name, flags);
	if (fd < 0 && errno == ENOENT) {
		if (!create)
			return 1;
		fd = openat(t->dirfd, name, flags | O_CREAT | O_EXCL, 0644);
		if (fd >= 0) {
			/* Reserve the whole segment now so that later writes do not allocate, keeping the size
			 * at the written end (invariant 6). A file system without fallocate still works. */
			if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)d->segment_bytes) < 0) {
				int e = errno;
				if (e == ENOSPC) {
					close(fd);
					unlinkat(t->dirfd, name, 0);
					return -ENOSPC;
				}
				if (!t->prealloc_warned) {
					t->prealloc_warned = true;
					spw_log(SPW_LOG_NOTICE, e, "device: cannot preallocate segments in %s", t->dir);
				}
			}
			/* The new directory entry must survive a crash as much as the data written into it. */
			fsync(t->dirfd);
		}
	}
	if (fd < 0) {
		int e = errno;
		spw_log(SPW_LOG_WARNING, e, "device: cannot open segment %s/%s", t->dir, name);
		return -e;
	}
	*h = (int64_t)fd + 1;
	return 0;
}

static int dev_file_release(dev *d, uint64_t seg, int64_t h, bool destroy)
{
	dev_segtab *t = d->segs;
	char name[DEV_SEG_NAME_MAX];
	if (h > 0)
		close((int)(h - 1));
	if (!destroy)
		return 0;
	dev_seg_name(t, name, sizeof(name), seg);
	if (unlinkat(t->dirfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* A visitor of dev_files_walk: the file name, its segment number, the caller's context. */
typedef void (*dev_seg_visit_fn)(dev_segtab *t, const char *name, uint64_t seg, void *ctx);

/* Call fn for every file <prefix><n> in the folder (n in base 10, nothing after it); other files
 * are not the device's. The one directory walk, behind reopening and truncation. */
static void dev_files_walk(dev_segtab *t, dev_seg_visit_fn fn, void *ctx)
{
	int fd = openat(t->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	size_t plen = strlen(t->prefix);
	struct dirent *e;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(dir)) != NULL) {
		char *end;
		if (strncmp(e->d_name, t->prefix, plen) != 0 || !e->d_name[plen])
			continue;
		unsigned long long n = strtoull(e->d_name + plen, &end, 10);
		if (*end == '\0')
			fn(t, e->d_name, n, ctx);
	}
	closedir(dir);
}

static void dev_seg_lowest(dev_segtab *t, const char *name, uint64_t seg, void *ctx)
{
	uint64_t *lowest = ctx;
	(void)t;
	(void)name;
	if (seg < *lowest)
		*lowest = seg;
}

/* Find the lowest existing segment file: segments below it were removed before a reopen. */
static void dev_files_scan(dev *d)
{
	uint64_t lowest = UINT64_MAX;
	dev_files_walk(d->segs, dev_seg_lowest, &lowest);
	if (lowest != UINT64_MAX)
		atomic_store(&d->segs->begin, lowest);
}

/*
 * Probe the file system: can a file here be opened O_DIRECT and take a one-sector direct write, and
 * what alignment does statx report? Uses a scratch file that is removed again.
 */
static int dev_files_probe(dev *d, bool direct, char *err, size_t errlen)
{
	dev_segtab *t = d->segs;
	const char *probe = ".probe";
	void *buf = NULL;
	int fd = -1, rc = 0;
	struct statx sx;
	uint32_t sector = 512, mem = 512;

	fd = openat(t->dirfd, probe, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0),
	            0600);
	if (fd < 0) {
		rc = -errno;
		if (direct && rc == -EINVAL) {
			dev_err_set(err, errlen,
			            "the file system under %s refuses O_DIRECT (open: %s); use --device-type posix "
			            "or allow the fallback", t->dir, strerror(-rc));
			rc = -EOPNOTSUPP;
		} else {
			dev_err_set(err, errlen, "cannot create files in %s: %s", t->dir, strerror(-rc));
		}
		goto fail;
	}
	memset(&sx, 0, sizeof(sx));
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align) {
		sector = SPW_MAX(sx.stx_dio_offset_align, 512u);
		mem = SPW_MAX(sx.stx_dio_mem_align, 1u);
	}
	if (d->sector_bytes < sector)
		d->sector_bytes = sector;
	d->mem_align = SPW_MAX(mem, d->sector_bytes);   /* callers align buffers to sectors anyway */
	if (direct) {
		/* Some file systems accept the flag and refuse the IO: try one aligned write. */
		if (posix_memalign(&buf, d->mem_align, d->sector_bytes) != 0) {
			rc = -ENOMEM;
			dev_err_set(err, errlen, "out of memory");
			goto fail;
		}
		memset(buf, 0, d->sector_bytes);
		if (pwrite(fd, buf, d->sector_bytes, 0) != (ssize_t)d->sector_bytes) {
			rc = errno ? -errno : -EIO;
			dev_err_set(err, errlen, "the file system under %s refuses O_DIRECT writes of %u bytes "
			            "(%s); use --device-type posix or allow the fallback",
			            t->dir, d->sector_bytes, strerror(-rc));
			if (rc == -EINVAL)
				rc = -EOPNOTSUPP;
			goto fail;
		}
	}
fail:
	free(buf);
	if (fd >= 0) {
		close(fd);
		unlinkat(t->dirfd, probe, 0);
	}
	return rc;
}

/* Copy the folder and the prefix out of cfg and create the folder. */
static int dev_files_names(dev_segtab *t, const dev_config *cfg, char *err, size_t errlen)
{
	if (!cfg->dir || !*cfg->dir) {
		dev_err_set(err, errlen, "no directory given for the segment files");
		return -EINVAL;
	}
	if (!cfg->prefix || strlen(cfg->prefix) > DEV_PREFIX_MAX || strchr(cfg->prefix, '/')) {
		dev_err_set(err, errlen, "the segment file prefix must be given, without '/', in at most %d "
		            "bytes", DEV_PREFIX_MAX);
		return -EINVAL;
	}
	t->dir = strdup(cfg->dir);
	t->prefix = strdup(cfg->prefix);
	if (!t->dir || !t->prefix) {
		dev_err_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (mkdir(t->dir, 0755) < 0 && errno != EEXIST) {
		int e = errno;
		dev_err_set(err, errlen, "cannot create %s: %s", t->dir, strerror(e));
		return -e;
	}
	return 0;
}

static int dev_files_setup(dev *d, const dev_config *cfg, bool direct, char *err, size_t errlen)
{
	dev_segtab *t = d->segs;
	int rc;

	rc = dev_files_names(t, cfg, err, errlen);
	if (rc)
		return rc;
	t->dirfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0) {
		rc = -errno;
		dev_err_set(err, errlen, "cannot open %s: %s", t->dir, strerror(-rc));
		return rc;
	}
	t->oflags = direct ? O_DIRECT : 0;
	t->open = dev_file_open;
	t->release = dev_file_release;
	rc = dev_files_probe(d, direct, err, errlen);
	if (rc)
		return rc;
	dev_files_scan(d);
	return 0;
}

void dev_files_close(dev *d)
{
	dev_base_fini(d);
	free(d);
}

int dev_files_open(const dev_ops *ops, const char *name, uint32_t caps, bool direct,
                   const dev_config *cfg, dev **out, char *err, size_t errlen)
{
	dev *d = calloc(1, sizeof(*d));
	int rc;

	if (!d) {
		dev_err_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = dev_base_init(d, ops, name, caps, cfg, err, errlen);
	if (rc == 0)
		rc = dev_files_setup(d, cfg, direct, err, errlen);
	if (rc) {
		dev_files_close(d);
		return rc;
	}
	*out = d;
	return 0;
}

static void dev_seg_unlink_below(dev_segtab *t, const char *name, uint64_t seg, void *ctx)
{
	if (seg < *(const uint64_t *)ctx && unlinkat(t->dirfd, name, 0) < 0 && errno != ENOENT)
		spw_log(SPW_LOG_WARNING, errno, "device: cannot remove %s/%s", t->dir, name);
}

/* Unlink every <prefix><n> with n < until (the ones never opened by this process included). */
static void dev_files_purge_below(dev_segtab *t, uint64_t until)
{
	dev_files_walk(t, dev_seg_unlink_below, &until);
}

/* The fds dev_files_sync copies under the table lock. */
typedef struct dev_fd_list {
	int *fds;
	int n, cap;
} dev_fd_list;

static int dev_seg_dup_fd(dev *d, uint64_t seg, int64_t h, void *ctx)
{
	dev_fd_list *l = ctx;
	(void)d;
	(void)seg;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		int *nf = realloc(l->fds, (size_t)cap * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		l->fds = nf;
		l->cap = cap;
	}
	int fd = fcntl((int)(h - 1), F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	l->fds[l->n++] = fd;
	return 0;
}

/* fdatasync every open segment file. The fds are duplicated under the table lock and synced
 * outside it, so a worker creating a segment meanwhile does not wait for the disk. */
int dev_files_sync(dev *d)
{
	dev_segtab *t = d->segs;
	dev_fd_list l = { NULL, 0, 0 };

	pthread_mutex_lock(&t->lock);
	int rc = dev_segtab_each_open(d, dev_seg_dup_fd, &l);
	pthread_mutex_unlock(&t->lock);
	for (int i = 0; i < l.n; i++) {
		if (fdatasync(l.fds[i]) < 0 && !rc)
			rc = -errno;
		close(l.fds[i]);
	}
	/* The directory too: segment files created since the last sync must not vanish in a crash. */
	if (fsync(t->dirfd) < 0 && !rc)
		rc = -errno;
	free(l.fds);
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
