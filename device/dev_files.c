/*
 * dev_files.c - the segment files that the file backends (uring, libaio, posix) share: opening and
 * creating them, preallocation in steps ahead of the writes, the folder walk behind reopening,
 * truncation and disk usage, the O_DIRECT probe, and dev_sync. Invariants 1, 2, 5 and 6 of device.c
 * hold here.
 *
 * Sections: preallocation (the first step, the preallocator thread, claiming steps); segment
 * files.
 */
#include "device/dev_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- preallocation (device.c note 6) -------------------------------------------------------- */

/* fallocate failed with e (other than ENOSPC at creation): a file system that cannot preallocate is
 * not asked again; anything else is said once. The writes go on either way, into blocks the file
 * system allocates as they come: preallocation is for speed and layout, never for correctness. */
static void dev_prealloc_failed(dev_segtab *t, int e)
{
	bool off = e == EOPNOTSUPP || e == ENOSYS || e == EINVAL;
	if (off)
		atomic_store(&t->prealloc_off, true);
	if (!atomic_exchange(&t->prealloc_warned, true))
		spw_log(SPW_LOG_NOTICE, e, "device: cannot preallocate segment files in %s%s", t->dir,
		        off ? "; writes allocate as they go" : "");
}

/* The first step of a new segment file, before its handle is published (so e->reserved is set
 * before any writer can read it). -ENOSPC when the disk cannot take it: the write that creates the
 * segment fails now rather than in the middle of it. Lock held. */
static int dev_file_reserve_first(dev *d, int fd, dev_seg_ent *e)
{
	dev_segtab *t = d->segs;
	uint64_t len = t->prealloc_step;

	if (!atomic_load(&t->prealloc_off) && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)len) < 0) {
		int err = errno;
		if (err == ENOSPC)
			return -ENOSPC;
		dev_prealloc_failed(t, err);
		len = d->segment_bytes;   /* not again for this segment */
	}
	if (atomic_load(&t->prealloc_off))
		len = d->segment_bytes;
	atomic_store_explicit(&e->reserved, len >= d->segment_bytes ? DEV_RESERVED_ALL : len,
	                      memory_order_relaxed);
	return 0;
}

/* Reserve [from, from + len) of the file fd, unless the file system said it cannot. */
static void dev_prealloc_range(dev_segtab *t, int fd, uint64_t from, uint64_t len)
{
	if (atomic_load_explicit(&t->prealloc_off, memory_order_relaxed))
		return;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)len) < 0)
		dev_prealloc_failed(t, errno);
}

/*
 * The preallocator (note 8): one thread per file device, started on the first step a writer
 * claims, that makes the fallocate calls so that no writer waits in one. Its queue is a small ring
 * under a mutex, touched once per step; a step it cannot take (ring full, no thread) is made by
 * the writer itself.
 */
#define DEV_PREALLOC_QUEUE 64

typedef struct dev_prealloc_job {
	uint64_t seg, from, len;
} dev_prealloc_job;

struct dev_prealloc {
	dev *d;
	pthread_mutex_t lock;        /* guards everything below */
	pthread_cond_t cond;         /* work for the thread, or stop */
	pthread_cond_t idle;         /* nothing queued or running (dev_prealloc_settle) */
	dev_prealloc_job ring[DEV_PREALLOC_QUEUE];
	unsigned head, n;
	bool running;                /* the thread is making a job */
	bool started, stop;          /* stop: closing, or the thread could not be started */
	pthread_t thread;
};

/* One job: the segment's fd is duplicated under the table lock, so a segment removed meanwhile is
 * simply skipped, and one removed during the fallocate only loses the blocks with its last fd. */
static void dev_prealloc_run(dev *d, const dev_prealloc_job *j)
{
	dev_segtab *t = d->segs;
	int fd = -1;
	pthread_mutex_lock(&t->lock);
	dev_seg_ent *e = dev_seg_peek(t, j->seg);
	int64_t h = e ? atomic_load(&e->h) : 0;
	if (h > 0)
		fd = fcntl((int)(h - 1), F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&t->lock);
	if (fd < 0)
		return;
	dev_prealloc_range(t, fd, j->from, j->len);
	close(fd);
}

static void *dev_prealloc_main(void *arg)
{
	struct dev_prealloc *pa = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals are the process's main thread's business */
	pthread_mutex_lock(&pa->lock);
	/* What was claimed is made, at close too (no IO is in flight then: it is quick), so that the
	 * files hold what dev_disk_usage said, also after a reopen. */
	while (!pa->stop || pa->n > 0) {
		if (pa->n == 0) {
			pthread_cond_wait(&pa->cond, &pa->lock);
			continue;
		}
		dev_prealloc_job j = pa->ring[pa->head];
		pa->head = (pa->head + 1) % DEV_PREALLOC_QUEUE;
		pa->n--;
		pa->running = true;
		pthread_mutex_unlock(&pa->lock);
		dev_prealloc_run(pa->d, &j);
		pthread_mutex_lock(&pa->lock);
		pa->running = false;
		if (pa->n == 0)
			pthread_cond_broadcast(&pa->idle);
	}
	pthread_mutex_unlock(&pa->lock);
	return NULL;
}

/* Wait until every range claimed so far is made (dev_disk_usage counts settled files). Bounded by
 * the queued fallocates: nothing is queued again while no writer claims. */
static void dev_prealloc_settle(dev_segtab *t)
{
	struct dev_prealloc *pa = t->pa;
	if (!pa)
		return;
	pthread_mutex_lock(&pa->lock);
	while (pa->started && (pa->n > 0 || pa->running))
		pthread_cond_wait(&pa->idle, &pa->lock);
	pthread_mutex_unlock(&pa->lock);
}

/* Hand a claimed step to the preallocator; false when the writer must make it itself. */
static bool dev_prealloc_post(dev_segtab *t, uint64_t seg, uint64_t from, uint64_t len)
{
	struct dev_prealloc *pa = t->pa;
	bool queued = false;
	if (!pa)
		return false;
	pthread_mutex_lock(&pa->lock);
	if (!pa->started && !pa->stop) {
		pa->started = pthread_create(&pa->thread, NULL, dev_prealloc_main, pa) == 0;
		if (!pa->started) {
			pa->stop = true;
			spw_log(SPW_LOG_WARNING, 0, "device: cannot start the preallocation thread for %s; "
			        "writers preallocate themselves", t->dir);
		}
	}
	if (!pa->stop && pa->n < DEV_PREALLOC_QUEUE) {
		pa->ring[(pa->head + pa->n) % DEV_PREALLOC_QUEUE] = (dev_prealloc_job){ seg, from, len };
		pa->n++;
		pthread_cond_signal(&pa->cond);
		queued = true;
	}
	pthread_mutex_unlock(&pa->lock);
	return queued;
}

/* The preallocator of a device whose segments are larger than a step (others never extend). */
static int dev_prealloc_open(dev *d)
{
	dev_segtab *t = d->segs;
	if (t->prealloc_step >= d->segment_bytes)
		return 0;
	struct dev_prealloc *pa = calloc(1, sizeof(*pa));
	if (!pa)
		return -ENOMEM;
	pa->d = d;
	pthread_mutex_init(&pa->lock, NULL);
	pthread_cond_init(&pa->cond, NULL);
	pthread_cond_init(&pa->idle, NULL);
	t->pa = pa;
	return 0;
}

/* Stop the thread (after it has made what is queued) and free it all. */
static void dev_prealloc_close(dev_segtab *t)
{
	struct dev_prealloc *pa = t->pa;
	if (!pa)
		return;
	pthread_mutex_lock(&pa->lock);
	pa->stop = true;
	pthread_cond_signal(&pa->cond);
	bool started = pa->started;
	pthread_mutex_unlock(&pa->lock);
	if (started)
		pthread_join(pa->thread, NULL);
	pthread_cond_destroy(&pa->idle);
	pthread_cond_destroy(&pa->cond);
	pthread_mutex_destroy(&pa->lock);
	free(pa);
	t->pa = NULL;
}

/*
 * The write [off, end) of segment seg came within prealloc_ahead of the reserved end r: claim up to
 * twice r, or the first step boundary at least prealloc_ahead past end when that is further (a
 * write that jumped), at most the segment, with one CAS (so among writers racing here exactly one
 * claims each range, and the others see it claimed and go on), and hand the range to the
 * preallocator. It starts at r, or at the step holding off when the write jumped past r, so a gap
 * the writes skipped stays a hole.
 */
void dev_files_reserve_ahead(dev *d, uint64_t seg, dev_seg_ent *e, int fd, uint64_t off,
                             uint64_t end)
{
	dev_segtab *t = d->segs;
	uint64_t step = t->prealloc_step, want, claim;
	uint64_t r = atomic_load_explicit(&e->reserved, memory_order_relaxed);

	do {
		if (end + t->prealloc_ahead <= r)
			return;   /* claimed by another writer meanwhile (or DEV_RESERVED_ALL) */
		want = SPW_MAX((end + t->prealloc_ahead + step - 1) & ~(step - 1), r * 2);
		want = SPW_MIN(d->segment_bytes, want);
		claim = want == d->segment_bytes ? DEV_RESERVED_ALL : want;
	} while (!atomic_compare_exchange_weak_explicit(&e->reserved, &r, claim, memory_order_relaxed,
	                                                memory_order_relaxed));
	uint64_t from = SPW_MAX(r, off & ~(step - 1));
	if (!dev_prealloc_post(t, seg, from, want - from))
		dev_prealloc_range(t, fd, from, want - from);
}

/* ---- segment files -------------------------------------------------------------------------- */

#define DEV_SEG_NAME_MAX (DEV_PREFIX_MAX + 24)   /* <prefix>, 20 digits, NUL */

static void dev_seg_name(const dev_segtab *t, char *buf, size_t len, uint64_t seg)
{
	snprintf(buf, len, "%s%llu", t->prefix, (unsigned long long)seg);
}

/* Open (or create) the file of segment seg. Lock held (dev_seg_get_slow), so seg's entry exists.
 * 0 with *h = fd + 1, 1 absent, or -errno. */
static int dev_file_open(dev *d, uint64_t seg, bool create, int64_t *h)
{
	dev_segtab *t = d->segs;
	dev_seg_ent *e = dev_seg_peek(t, seg);
	char name[DEV_SEG_NAME_MAX];
	int fd, flags = O_RDWR | O_CLOEXEC | t->oflags;

	dev_seg_name(t, name, sizeof(name), seg);
	fd = openat(t->dirfd, name, flags);
	if (fd >= 0) {
		/* An existing file: how much lies preallocated past its end is not known, so the first
		 * write claims its own step (a range already allocated costs the file system little). */
		atomic_store_explicit(&e->reserved, atomic_load(&t->prealloc_off) ? DEV_RESERVED_ALL : 0,
		                      memory_order_relaxed);
	} else if (errno == ENOENT) {
		if (!create)
			return 1;
		fd = openat(t->dirfd, name, flags | O_CREAT | O_EXCL, 0644);
		if (fd >= 0) {
			if (dev_file_reserve_first(d, fd, e) == -ENOSPC) {
				close(fd);
				unlinkat(t->dirfd, name, 0);
				return -ENOSPC;
			}
			/* The new directory entry must survive a crash as much as the data written into it. */
			fsync(t->dirfd);
		}
	}
	if (fd < 0) {
		int err = errno;
		spw_log(SPW_LOG_WARNING, err, "device: cannot open segment %s/%s", t->dir, name);
		return -err;
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
 * are not the device's. The one directory walk, behind reopening, truncation and disk usage. 0, or
 * -errno when the folder cannot be read. */
static int dev_files_walk(dev_segtab *t, dev_seg_visit_fn fn, void *ctx)
{
	int fd = openat(t->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	size_t plen = strlen(t->prefix);
	struct dirent *e;

	if (!dir) {
		int rc = -errno;
		if (fd >= 0)
			close(fd);
		return rc;
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
	return 0;
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

static void dev_seg_blocks(dev_segtab *t, const char *name, uint64_t seg, void *ctx)
{
	struct stat st;
	(void)seg;
	/* A file removed since the walk saw it is simply not counted. */
	if (fstatat(t->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		*(uint64_t *)ctx += (uint64_t)st.st_blocks * 512;
}

/* dev_disk_usage for files: st_blocks (512-byte units whatever the block size) summed over every
 * <prefix><n>, so the written data, the preallocated steps ahead of it and the files this process
 * never opened, as du counts them; the ranges already claimed are made first, so that the figure
 * does not depend on how far the preallocator has got. */
static int dev_files_usage(dev *d, uint64_t *bytes)
{
	dev_prealloc_settle(d->segs);
	return dev_files_walk(d->segs, dev_seg_blocks, bytes);
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
	t->usage = dev_files_usage;
	rc = dev_files_probe(d, direct, err, errlen);
	if (rc)
		return rc;
	dev_files_scan(d);
	rc = dev_prealloc_open(d);
	if (rc)
		dev_err_set(err, errlen, "out of memory");
	return rc;
}

void dev_files_close(dev *d)
{
	if (d->segs)
		dev_prealloc_close(d->segs);
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
void dev_files_purge_below(dev_segtab *t, uint64_t until)
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
