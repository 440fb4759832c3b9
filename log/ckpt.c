/*
 * ckpt.c - checkpoints: the state machine that takes one (index image, cut, the log made durable
 * up to the cut, metadata, retirement of old ones), and the file helpers recovery shares
 * (ckpt_int.h). Recovery itself is recover.c.
 *
 * NOTES ON THE DESIGN OF CHECKPOINTS (a FASTER fold-over checkpoint with a fuzzy index)
 *
 *  1. The steps. (a) scan_from = the tail (a record boundary), then one epoch (every record
 *     allocated below it is then published, ckpt_epoch_barrier); (b) the index image is written
 *     while every worker goes on (hidx_image_save reads each word atomically: fuzzy); (c) the cut
 *     (alloc_cut): for an instant the checkpoint owns the tail like a page-turn owner, moves it to
 *     a sector boundary (a filler record covers the gap), raises ReadOnly to it and gives it back;
 *     (d) wait until SafeReadOnly passes the cut: every thread that could still change a record
 *     below it in place has finished that operation; from now on the log below the cut does not
 *     change; (e) make [begin, cut) durable: with a device, wait until the page writes reach the
 *     cut's page and write that page's part below the cut from a copy; without one, write the
 *     in-memory log from the last cut's page up to the cut from the frames; then sync the device;
 *     (f) the meta file; (g) retire checkpoints older than the last CKPT_KEEP and the segments no
 *     kept one needs. No step stops the world: (c) holds the tail for a few instructions, (d) is
 *     one epoch, and writers never wait for the rest.
 *
 *  2. What is in it. The log below the cut at (d) is exactly the store as of the cut: records
 *     allocated after the cut lie above it; a change in place to a record below it either started
 *     before ReadOnly moved (and is done by (d)) or sees the new ReadOnly and copies the record
 *     above the cut. So a change is in the checkpoint exactly when the address it wrote is below
 *     the cut (hlog.h's redo rule, which AOF replay uses). The index image (b) is older than the cut
 *     and fuzzy: every address in it was allocated before (b) ended, so below the cut, but it may
 *     miss records published during (b), all of them at or above scan_from. Recovery repairs it by
 *     raising each entry to every valid record in [scan_from, cut) (recover.c note 1).
 *
 *  3. FLUSHALL waits (ckpt_mu) from the cut to the end of the write-out: it would release frames
 *     the write-out reads and stop page writes below the new Begin. It may run during the index
 *     image: Begin at the cut is what the meta file says, and recovery clears the image below it.
 *
 *  4. Counts, exact at the cut. Every change that moves a key count (log_count in ops.c) also adds
 *     its delta to keys_post[g] when the address it wrote is at or above cut_word's cut, g being
 *     cut_word's generation, which the cut stores before it gives the tail back (so every change
 *     at or above it sees it). Once SafeReadOnly passes the cut, every change below it has been
 *     counted (an operation's count comes before its thread refreshes), so the count at the cut
 *     is sum(keys) - (sum(keys_post[g]) - what keys_post[g] held before this cut). The bucket g
 *     alternates with every cut (cut_gen, failed checkpoints' cuts included): the previous cut's
 *     writers, still using the other bucket, all finished before that cut's own SafeReadOnly. A session's counts and
 *     its keys_post are read together under its seqlock (cnt_seq).
 *
 *  5. Failure. Any error (a write, a sync, a full disk) leaves the files of the failed checkpoint
 *     as .tmp (removed) and no meta file: the previous checkpoint stays the newest complete one.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "device/device.h"
#include "log/alloc_int.h"
#include "log/ckpt_int.h"
#include "log/epoch_int.h"
#include "log/hlog_int.h"

#define CKPT_IO_CHUNK (8ULL << 20)      /* one write request of the write-out */
#define CKPT_IO_DEPTH 8                 /* write requests in flight */
#define CKPT_ZSTD_LEVEL 1

/* ---------------- file helpers (shared with recover.c) ---------------- */

void ckpt_why(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

void ckpt_name(char *buf, size_t len, uint64_t id, const char *ext)
{
	snprintf(buf, len, "checkpoint.%" PRIu64 ".%s", id, ext);
}

static int ckpt_id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_list(const char *dir, uint64_t *ids, int max)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int n = 0;
	uint64_t all[256];
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		unsigned long long id;
		char tail[16];
		if (sscanf(e->d_name, "checkpoint.%llu.%15s", &id, tail) == 2 && !strcmp(tail, "meta") &&
		    n < (int)SPW_ARRAY_LEN(all))
			all[n++] = id;
	}
	closedir(d);
	qsort(all, (size_t)n, sizeof(all[0]), ckpt_id_cmp);
	if (n > max)
		n = max;
	memcpy(ids, all, (size_t)n * sizeof(all[0]));
	return n;
}

int ckpt_meta_read(const char *dir, uint64_t id, ckpt_meta *m, char *why, size_t whylen)
{
	char name[CKPT_NAME_MAX], path[4096];
	ckpt_name(name, sizeof(name), id, "meta");
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		ckpt_why(why, whylen, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	ssize_t n = pread(fd, m, sizeof(*m), 0);
	struct stat st;
	int rc = fstat(fd, &st);
	close(fd);
	if (n != (ssize_t)sizeof(*m) || rc < 0 || st.st_size != (off_t)sizeof(*m)) {
		ckpt_why(why, whylen, "%s: %lld bytes, a checkpoint meta file has %zu", path,
		         (long long)st.st_size, sizeof(*m));
		return SPW_E_CORRUPT;
	}
	if (memcmp(m->magic, CKPT_MAGIC, 8) != 0) {
		ckpt_why(why, whylen, "%s: not a checkpoint meta file (bad magic)", path);
		return SPW_E_CORRUPT;
	}
	if (m->version != CKPT_VERSION) {
		ckpt_why(why, whylen, "%s: format version %u, this build reads %u", path, m->version, CKPT_VERSION);
		return SPW_E_CORRUPT;
	}
	uint64_t sum = XXH3_64bits(m, offsetof(ckpt_meta, sum));
	if (sum != m->sum) {
		ckpt_why(why, whylen, "%s: checksum mismatch (file says %016" PRIx64 ", contents give %016"
		         PRIx64 ")", path, m->sum, sum);
		return SPW_E_CORRUPT;
	}
	if (m->id != id || m->cut < m->begin || m->scan_from > m->cut || m->page_bytes == 0) {
		ckpt_why(why, whylen, "%s: inconsistent addresses or id", path);
		return SPW_E_CORRUPT;
	}
	return 0;
}

int ckpt_file_sum(const char *path, uint64_t *sum, uint64_t *bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	XXH3_state_t *st = XXH3_createState();
	uint8_t *buf = malloc(1 << 20);
	int rc = 0;
	uint64_t total = 0;
	if (!st || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	XXH3_64bits_reset(st);
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		XXH3_64bits_update(st, buf, (size_t)n);
		total += (uint64_t)n;
	}
	*sum = XXH3_64bits_digest(st);
	*bytes = total;
out:
	free(buf);
	XXH3_freeState(st);
	close(fd);
	return rc;
}

int ckpt_dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* Write len bytes of buf at the device's offset off, in CKPT_IO_CHUNK requests, CKPT_IO_DEPTH at a
 * time, and wait for them (a dedicated thread: dev_wait). buf, off and len are sector-aligned. */
typedef struct ckpt_io {
	dev_req req;
	struct iovec iov;
	int64_t res;
	bool done;
} ckpt_io;

static void ckpt_io_done(dev_req *r, int64_t res)
{
	ckpt_io *io = (ckpt_io *)r;
	io->res = res;
	io->done = true;
}

int ckpt_dev_io(dev_queue *q, bool write, uint64_t off, void *buf, uint64_t len)
{
	ckpt_io ios[CKPT_IO_DEPTH];
	bool busy[CKPT_IO_DEPTH] = { false };
	uint64_t pos = 0;
	int inflight = 0, rc = 0;
	for (;;) {
		for (int i = 0; i < CKPT_IO_DEPTH && pos < len && rc == 0; i++) {
			if (busy[i])
				continue;
			ckpt_io *io = &ios[i];
			uint64_t n = SPW_MIN(CKPT_IO_CHUNK, len - pos);
			memset(io, 0, sizeof(*io));
			io->iov.iov_base = (uint8_t *)buf + pos;
			io->iov.iov_len = n;
			io->req.offset = off + pos;
			io->req.iov = &io->iov;
			io->req.iovcnt = 1;
			io->req.done = ckpt_io_done;
			int e = write ? dev_write(q, &io->req) : dev_read(q, &io->req);
			if (e == -EAGAIN)
				break;            /* the throttle: wait for ours, or for others' if none */
			if (e < 0) {
				rc = e;
				break;
			}
			busy[i] = true;
			inflight++;
			pos += n;
		}
		if (inflight == 0) {
			if (pos >= len || rc)
				break;
			usleep(100);
			continue;
		}
		int w = dev_wait(q, 1, 1000000000LL);
		if (w < 0 && w != -ETIME && w != -EINTR && rc == 0)
			rc = w;
		while (dev_reap(q, 64) > 0)
			;
		for (int i = 0; i < CKPT_IO_DEPTH; i++) {
			if (!busy[i] || !ios[i].done)
				continue;
			if (rc == 0 && (ios[i].res < 0 || (uint64_t)ios[i].res != ios[i].iov.iov_len))
				rc = ios[i].res < 0 ? (int)ios[i].res : -EIO;
			busy[i] = false;
			inflight--;
		}
	}
	return rc;
}

int ckpt_segments_check(dev *d, uint64_t begin, uint64_t cut, char *why, size_t whylen)
{
	if (cut <= begin)
		return 0;
	dev_queue *q = NULL;
	int rc = dev_queue_open(d, &q);
	if (rc < 0) {
		ckpt_why(why, whylen, "cannot open a device queue: %s", spw_strerror(rc));
		return rc;
	}
	uint8_t *sec = aligned_alloc(SPW_MAX(d->mem_align, 4096u), SPW_MAX(d->sector_bytes, 4096u));
	if (!sec) {
		dev_queue_close(q);
		return -ENOMEM;
	}
	uint64_t first = (begin & ~((uint64_t)d->sector_bytes - 1)) >> d->segment_shift;
	uint64_t last = (cut - 1) >> d->segment_shift;
	for (uint64_t seg = first; seg <= last && rc == 0; seg++) {
		/* The last sector this segment must hold. */
		uint64_t end = SPW_MIN(cut, (seg + 1) << d->segment_shift);
		uint64_t at = SPW_ALIGN_UP(end, (uint64_t)d->sector_bytes) - d->sector_bytes;
		int e = ckpt_dev_io(q, false, at, sec, d->sector_bytes);
		if (e < 0) {
			char name[512];
			dev_segment_name(d, seg, name, sizeof(name));
			ckpt_why(why, whylen, "log segment %s (log bytes %" PRIu64 "..%" PRIu64 ") is missing or "
			         "shorter than the checkpoint needs: %s", name, seg << d->segment_shift, end,
			         e == -EIO ? "short read" : spw_strerror(e));
			rc = -ENOENT;
		}
	}
	free(sec);
	dev_queue_close(q);
	return rc;
}

/* Write the file dir/name from fn's output: name.tmp, fdatasync, rename, (the caller syncs dir).
 * fn writes to fd and returns 0 or -errno. */
static int ckpt_file_write(const char *dir, const char *name, int (*fn)(void *, int), void *arg,
		char *why, size_t whylen)
{
	char tmp[4096], path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		ckpt_why(why, whylen, "%s: cannot create: %s", tmp, strerror(e));
		return -e;
	}
	int rc = fn(arg, fd);
	if (rc < 0) {
		if (!why[0])
			ckpt_why(why, whylen, "%s: write failed: %s", tmp, spw_strerror(rc));
	} else if (fdatasync(fd) < 0) {
		rc = -errno;
		ckpt_why(why, whylen, "%s: fdatasync failed: %s", tmp, strerror(errno));
	}
	if (close(fd) < 0 && rc == 0) {
		rc = -errno;
		ckpt_why(why, whylen, "%s: close failed: %s", tmp, strerror(errno));
	}
	if (rc == 0 && rename(tmp, path) < 0) {
		rc = -errno;
		ckpt_why(why, whylen, "%s: rename failed: %s", path, strerror(errno));
	}
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* ---------------- the checkpoint (notes 1-5) ---------------- */

typedef struct ckpt_run {
	hlog *l;
	hlog_session *s;
	const char *dir;
	dev *d;
	dev_queue *q;
	ckpt_meta m;
	hidx_image_info img;
	char *why;
	size_t whylen;
} ckpt_run;

static int ckpt_index_fn(void *arg, int fd)
{
	ckpt_run *r = arg;
	return hidx_image_save(r->l->idx, fd, CKPT_ZSTD_LEVEL, &r->img, r->why, r->whylen);
}

static int ckpt_meta_fn(void *arg, int fd)
{
	ckpt_run *r = arg;
	const uint8_t *p = (const uint8_t *)&r->m;
	size_t left = sizeof(r->m);
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		left -= (size_t)n;
	}
	return 0;
}

/* A record boundary no later allocation can land under: the tail, once no page turn is in
 * flight (a failed turn restores it lower, alloc.c note 4). */
static uint64_t ckpt_tail_now(hlog *l)
{
	unsigned spins = 0;
	uint64_t w;
	while (tail_off(l, w = load_acq(&l->tail)) > l->page_bytes)
		log_spin(&spins);
	return tail_address(l, w);
}

/* Note 4: sum(keys or expires) and sum(*_post[g]) over the sessions, each session read under its
 * seqlock. */
static void ckpt_counts_read(hlog *l, int g, int64_t *keys, int64_t *expires, int64_t *kpost,
		int64_t *epost)
{
	*keys = *expires = *kpost = *epost = 0;
	for (int i = 0; i < l->max_sessions; i++) {
		hlog_session *s = &l->sessions[i];
		int64_t k, e, kp, ep;
		unsigned spins = 0;
		for (;;) {
			uint32_t q = atomic_load_explicit(&s->cnt_seq, memory_order_acquire);
			k = atomic_load_explicit(&s->keys, memory_order_relaxed);
			e = atomic_load_explicit(&s->expires, memory_order_relaxed);
			kp = atomic_load_explicit(&s->keys_post[g], memory_order_relaxed);
			ep = atomic_load_explicit(&s->expires_post[g], memory_order_relaxed);
			atomic_thread_fence(memory_order_acquire);
			if (!(q & 1) && atomic_load_explicit(&s->cnt_seq, memory_order_relaxed) == q)
				break;
			log_spin(&spins);
		}
		*keys += k;
		*expires += e;
		*kpost += kp;
		*epost += ep;
	}
}

/* Step (a)'s barrier: one epoch. An operation holds its epoch from its allocation to its
 * publishing CAS, so once every session has refreshed, every record allocated below scan_from is
 * published (or garbage): the index image then holds it, and only records at or above scan_from
 * can be missing (note 2). */
static void ckpt_epoch_done(void *ctx, uint64_t arg)
{
	(void)arg;
	atomic_store((_Atomic int *)ctx, 1);
}

void ckpt_epoch_barrier(hlog_session *s)
{
	_Atomic int done = 0;
	while (epoch_bump(s->l->ep, ckpt_epoch_done, &done, 0) < 0) {
		log_epoch_step(s);
		usleep(200);
	}
	while (!atomic_load(&done)) {
		log_epoch_step(s);
		if (!atomic_load(&done))
			usleep(200);
	}
}

/* Step (d) and, with a device, the page writes of (e): wait, polling the session (it claims and
 * submits page writes: nobody else may be polling, all workers may be idle). */
static int ckpt_wait_flushed(ckpt_run *r, uint64_t cut)
{
	hlog *l = r->l;
	if (!l->dev)
		return 0;
	for (;;) {
		int err = atomic_load(&l->error);
		if (err) {
			ckpt_why(r->why, r->whylen, "a page write of the log failed: %s", spw_strerror(err));
			return err;
		}
		/* Done once every page below the cut's is written and none of the page writes this
		 * session claimed is left: nobody would reap them once it stops polling. Not
		 * FlushedUntil >= target: a record spanning into the cut's page holds it back until
		 * that page fills, which at shutdown is never (alloc_written_below). */
		bool written = alloc_written_below(l, cut);
		if (written && hlog_session_inflight(r->s) == 0 && !hlog_session_unsubmitted(r->s))
			return 0;
		hlog_session_poll(r->s);
		if (hlog_session_inflight(r->s) == 0 || !written)
			usleep(200);
	}
}

/* Step (e): [from, cut) onto the device. With a device only the cut's page part below the cut is
 * left (from a copy: the page may fill, be written and evicted meanwhile); without one, the
 * frames from the last cut's page on (they are never released without a device but by FLUSHALL,
 * which waits). */
static int ckpt_write_log(ckpt_run *r, uint64_t cut)
{
	hlog *l = r->l;
	uint64_t pb = l->page_bytes, pstart = cut & ~(pb - 1);
	uint64_t sfrom = ckpt_sum_from(&r->m, r->d->sector_bytes);
	/* Below ckpt_from the log is on the device already (the last checkpoint wrote it): only the
	 * part of the cut's page past it is written again; nothing below Begin is. */
	uint64_t from = SPW_MAX(SPW_MAX(l->ckpt_from, r->m.begin & ~(uint64_t)(r->d->sector_bytes - 1)),
	                        l->dev ? pstart : 0);
	int rc = 0;

	if (l->dev) {
		uint64_t len = cut > from ? cut - from : 0;
		uint8_t *copy = NULL;
		if (len && !(copy = aligned_alloc(SPW_MAX(r->d->mem_align, 4096u), SPW_ALIGN_UP(len, 4096))))
			return -ENOMEM;
		/* Protected, the cut's page cannot be released; it is in memory unless Head has passed it
		 * (frames are released only below Head's page). */
		hlog_session_protect(r->s);
		bool in_mem = (load_acq(&l->head) & ~(pb - 1)) <= pstart;
		bool written = load_acq(&l->flushed_until) >= cut;
		if (in_mem) {
			r->m.cut_page_sum = XXH3_64bits(hlog_rec_at(l, sfrom), cut - sfrom);
			if (len && !written)
				memcpy(copy, hlog_rec_at(l, from), len);
		}
		r->m.cut_page_cont = log_span_cont_end(l, pstart >> l->page_bits);
		hlog_session_unprotect(r->s);
		if (!in_mem) {
			/* Written whole and evicted meanwhile: the sum comes from the device. */
			uint64_t n = SPW_ALIGN_UP(cut - pstart, (uint64_t)r->d->sector_bytes);
			uint8_t *buf = aligned_alloc(SPW_MAX(r->d->mem_align, 4096u), SPW_ALIGN_UP(n, 4096));
			rc = buf ? ckpt_dev_io(r->q, false, pstart, buf, n) : -ENOMEM;
			if (rc == 0)
				r->m.cut_page_sum = XXH3_64bits(buf + (sfrom - pstart), cut - sfrom);
			free(buf);
		} else if (len && !written) {
			rc = ckpt_dev_io(r->q, true, from, copy, len);
			r->m.log_bytes = len;
		}
		free(copy);
		return rc;
	}
	/* Without a device the frames stay (FLUSHALL waits): write them page piece by page piece. */
	for (uint64_t p = from; p < cut && rc == 0;) {
		uint64_t end = SPW_MIN((p & ~(pb - 1)) + pb, cut);
		rc = ckpt_dev_io(r->q, true, p, hlog_rec_at(l, p), end - p);
		r->m.log_bytes += end - p;
		p = end;
	}
	if (rc == 0) {
		r->m.cut_page_sum = XXH3_64bits(hlog_rec_at(l, sfrom), cut - sfrom);
		r->m.cut_page_cont = log_span_cont_end(l, pstart >> l->page_bits);
	}
	return rc;
}

/* Step (g): checkpoints older than the CKPT_KEEP newest, and the segments below the oldest kept
 * one's Begin. Best effort: a failure here leaves files behind, never loses one still needed. */
static void ckpt_retire(ckpt_run *r)
{
	uint64_t ids[256];
	int n = ckpt_list(r->dir, ids, (int)SPW_ARRAY_LEN(ids));
	uint64_t keep_begin = r->m.begin;
	for (int i = 0; i < n; i++) {
		char name[CKPT_NAME_MAX], path[4096];
		if (i < CKPT_KEEP) {
			ckpt_meta m;
			char why[256];
			if (i > 0 && ckpt_meta_read(r->dir, ids[i], &m, why, sizeof(why)) == 0)
				keep_begin = SPW_MIN(keep_begin, m.begin);
			continue;
		}
		/* The meta first: without it the index image is just an orphan. */
		ckpt_name(name, sizeof(name), ids[i], "meta");
		snprintf(path, sizeof(path), "%s/%s", r->dir, name);
		unlink(path);
		ckpt_name(name, sizeof(name), ids[i], "index");
		snprintf(path, sizeof(path), "%s/%s", r->dir, name);
		unlink(path);
	}
	ckpt_dir_sync(r->dir);
	atomic_store(&r->l->ckpt_hold, keep_begin);
	/* No request may be in flight to a segment that goes (compact.c note 5). */
	if (keep_begin > r->d->segment_bytes && (r->d != r->l->dev || log_io_quiesce(r->l, r->s)))
		dev_truncate_until(r->d, keep_begin & ~(r->d->segment_bytes - 1));
}

/* Steps (c) and (d), under ckpt_mu: the cut, the log needed from its Begin on, and the counts
 * exact at it (notes 1 and 4). Returns the cut, once SafeReadOnly has passed it. */
static uint64_t ckpt_cut(ckpt_run *r)
{
	hlog *l = r->l;
	/* A generation per cut, failed checkpoints' included (note 4). */
	uint64_t gen = ++l->cut_gen;
	int g = (int)(gen & 1);
	int64_t k0, e0, kp0, ep0, k1, e1, kp1, ep1;
	ckpt_counts_read(l, g, &k0, &e0, &kp0, &ep0);
	uint64_t cut = alloc_cut(r->s, r->d->sector_bytes, gen, &r->m.begin);
	r->m.cut = cut;
	/* From the cut on, this checkpoint needs the log from its Begin (compact.c note 5). */
	for (uint64_t h = atomic_load(&l->ckpt_hold); h > r->m.begin;)
		if (atomic_compare_exchange_weak(&l->ckpt_hold, &h, r->m.begin))
			break;
	r->m.next_seq = atomic_load(&l->redo_seq);
	if (r->m.scan_from < r->m.begin)
		r->m.scan_from = r->m.begin;
	while (!alloc_cut_safe(r->s, cut))
		usleep(200);
	ckpt_counts_read(l, g, &k1, &e1, &kp1, &ep1);
	int64_t keys = k1 - (kp1 - kp0) - atomic_load(&l->keys_base);
	int64_t expires = e1 - (ep1 - ep0) - atomic_load(&l->expires_base);
	r->m.keys = keys > 0 ? (uint64_t)keys : 0;
	r->m.expires = expires > 0 ? (uint64_t)expires : 0;
	return cut;
}

int hlog_checkpoint(hlog *l, hlog_session *s, const char *dir, dev *logdev, hlog_ckpt_info *out)
{
	ckpt_run r = { .l = l, .s = s, .dir = dir, .d = logdev, .why = out->why, .whylen = sizeof(out->why) };
	char name[CKPT_NAME_MAX];
	uint64_t t0 = spw_mono_ns();
	int rc;
	bool locked = false;

	memset(out, 0, sizeof(*out));
	if (!logdev || (l->dev && l->dev != logdev)) {
		ckpt_why(out->why, sizeof(out->why), "no log device for the checkpoint");
		return -EINVAL;
	}
	pthread_mutex_lock(&l->ckpt_one);
	if ((rc = dev_queue_open(logdev, &r.q)) < 0) {
		ckpt_why(out->why, sizeof(out->why), "cannot open a device queue: %s", spw_strerror(rc));
		pthread_mutex_unlock(&l->ckpt_one);
		return rc;
	}
	/* The id: one past the newest on disk and the newest this store made. */
	uint64_t ids[1];
	int n = ckpt_list(dir, ids, 1);
	memcpy(r.m.magic, CKPT_MAGIC, 8);
	r.m.version = CKPT_VERSION;
	r.m.id = SPW_MAX(l->ckpt_id, n > 0 ? ids[0] : 0) + 1;
	r.m.page_bytes = l->page_bytes;
	r.m.segment_bytes = logdev->segment_bytes;
	r.m.buckets = hidx_buckets(l->idx);   /* informative: the image records its own geometry */

	/* (a), (b): the fuzzy index image (note 2). */
	r.m.scan_from = ckpt_tail_now(l);
	ckpt_epoch_barrier(s);
	ckpt_name(name, sizeof(name), r.m.id, "index");
	if ((rc = ckpt_file_write(dir, name, ckpt_index_fn, &r, out->why, sizeof(out->why))) < 0)
		goto out;
	/* The index image's name is durable before any meta file names it. */
	if ((rc = ckpt_dir_sync(dir)) < 0) {
		ckpt_why(out->why, sizeof(out->why), "%s: fsync of the folder failed: %s", dir, spw_strerror(rc));
		goto out;
	}
	r.m.index_bytes = r.img.file_bytes;
	r.m.index_sum = r.img.checksum;

	/* (c), (d), (e): the cut and the log below it (notes 1 and 3), the counts at it (note 4). */
	pthread_mutex_lock(&l->ckpt_mu);
	locked = true;
	uint64_t cut = ckpt_cut(&r);
	if ((rc = ckpt_wait_flushed(&r, cut)) < 0)
		goto out;
	if ((rc = ckpt_write_log(&r, cut)) < 0) {
		if (!out->why[0])
			ckpt_why(out->why, sizeof(out->why), "writing the log up to %" PRIu64 " failed: %s", cut,
			         spw_strerror(rc));
		goto out;
	}
	if ((rc = dev_sync(logdev)) < 0) {
		ckpt_why(out->why, sizeof(out->why), "syncing the log device failed: %s", spw_strerror(rc));
		goto out;
	}
	l->ckpt_from = cut;   /* the log below is durable: the next checkpoint starts there */
	pthread_mutex_unlock(&l->ckpt_mu);
	locked = false;

	/* (f): the meta file names both parts; its rename makes the checkpoint. */
	r.m.unix_ms = spw_time_ms();
	r.m.duration_us = (spw_mono_ns() - t0) / 1000;
	r.m.sum = XXH3_64bits(&r.m, offsetof(ckpt_meta, sum));
	ckpt_name(name, sizeof(name), r.m.id, "meta");
	if ((rc = ckpt_file_write(dir, name, ckpt_meta_fn, &r, out->why, sizeof(out->why))) < 0)
		goto out;
	if ((rc = ckpt_dir_sync(dir)) < 0) {
		ckpt_why(out->why, sizeof(out->why), "%s: fsync of the folder failed: %s", dir, spw_strerror(rc));
		goto out;
	}
	l->ckpt_id = r.m.id;
	ckpt_retire(&r);
out:
	if (locked)
		pthread_mutex_unlock(&l->ckpt_mu);
	if (rc < 0) {
		/* Note 5: no meta file, so the previous checkpoint stays the newest; the image goes. */
		char path[4096];
		ckpt_name(name, sizeof(name), r.m.id, "index");
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		unlink(path);
	}
	dev_queue_close(r.q);
	pthread_mutex_unlock(&l->ckpt_one);
	out->id = r.m.id;
	out->begin = r.m.begin;
	out->cut = r.m.cut;
	out->scan_from = r.m.scan_from;
	out->keys = r.m.keys;
	out->expires = r.m.expires;
	out->next_seq = r.m.next_seq;
	out->index_bytes = r.m.index_bytes;
	out->log_bytes = r.m.log_bytes;
	out->unix_ms = r.m.unix_ms;
	out->duration_us = (spw_mono_ns() - t0) / 1000;
	return rc;
}
