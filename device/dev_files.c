/*
 * dev_files.c - the segment files that the file backends (uring, libaio, posix) share: opening and
 * creating them, preallocation, the folder walk behind reopening, truncation and disk usage, the
 * O_DIRECT probe, and dev_sync. Invariants 1, 2, 5 and 6 of device.c hold here.
 *
 * Sections: segment files.
 */
#include "device/dev_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
