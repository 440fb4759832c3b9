/*
 * aof.c - the append-only file's writing side: writers (one per worker), the everysec sync thread,
 * the registry of closed files and pruning. Reading (replay, a k-way merge by seq, and the offline
 * check) is aof_read.c; what both share is aof_int.h.
 *
 * Sections: encoding - the directory - the sync thread - writers - the registry and pruning.
 *
 * NOTES ON THE DESIGN
 *
 * 1. A file's bytes are a prefix of what its writer meant to write, always. aof_writer_flush hands
 *    the whole buffer to one write(2) and, when the kernel takes only part of it (or fails after a
 *    partial write), drops exactly what was taken from the buffer and keeps the rest for the next
 *    flush. A short write therefore never leaves a hole or a duplicate: at worst the file ends in the
 *    middle of a record, which a later flush completes (or, after a crash, replay cuts as torn).
 * 2. The header is durable before any record: aof_writer_open writes it, fsyncs the file and the
 *    directory. So a bad header in a file longer than a header is corruption, while a file of at
 *    most a header's length whose header is bad (a crash during the open) is a torn tail.
 * 3. Within a file records have increasing seqs (one worker's session applies its changes one after
 *    another and the store's seq increases: log/hlog.h); across files and generations seqs are
 *    unique, so replay merges the open files by seq and applies each key's changes in the order the
 *    store made them. A file whose seqs go back is reported (check) and logged (replay).
 * 4. The sync thread and the fds. The thread walks the list of open writers holding g_open_mu for
 *    the whole pass, and reads each writer's fd only under it; a writer leaves the list (close) or
 *    swaps its fd (rotate) only under g_open_mu too, and closes the old fd after. So the thread never
 *    fdatasyncs a closed or reused fd. Opens, closes and rotations are rare (start-up, after a
 *    checkpoint, shutdown), so they may wait for one pass; the worker's flush never takes the lock.
 * 5. Errors. A write error stays in the writer (records stay in its buffer) until a later write
 *    succeeds; a sync error (the thread's or always's) until a later sync succeeds; aof_writer_error
 *    reports the write error first. A record aof_redo could not buffer (out of memory) is lost: that
 *    error is sticky until the writer rotates to a new file (which follows a checkpoint that holds
 *    the change, as it was made before the checkpoint started).
 * 6. Pruning. A closed file goes to the registry with the largest addr among its records; a durable
 *    checkpoint with cut C holds every change with addr < C, so a file whose largest addr is below C
 *    is redundant. A file with no records is removed at close and never registered.
 * 7. Groups (aof.h). The redo hook runs on the writing session's thread, and one hlog_group_rmw
 *    calls it for all of its records before it returns, so a group's records are consecutive in
 *    one writer's buffer; rotation (and with it a new file) happens only between event-loop
 *    passes, never inside a command, so a group never spans two files. The AOF has no rewrite of
 *    its own (no BGREWRITEAOF): a checkpoint is its compaction, and pruning drops a whole file or
 *    nothing, so a group's records go together. A group lies in one span of the log (one
 *    reservation), so a cut falls before or after all its addrs: a file holding one is pruned only
 *    when every record of the group is in the checkpoint. A record of a group that cannot be
 *    buffered (out of memory) takes the rest of its group with it: the group's records already
 *    buffered are taken back and its later ones are not written, so replay never sees a group with
 *    a hole in it (the loss itself is note 5's sticky error).
 *
 * Encoding (aof.h has the layout): integers are little-endian. The record checksum is
 * XXH3_64bits_withSeed(payload, len, seed) where seed is the record's first 8 bytes read as a
 * little-endian u64 (len, kind and the reserved bytes): one pass over the payload, and any change of
 * those 8 bytes changes the seed and thus the hash. The header checksum is XXH3_64bits of its first
 * 32 bytes.
 */
#include "server/aof_int.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/spw.h"

/* ---------------- encoding ---------------- */

static void header_encode(uint8_t h[AOF_HDR_BYTES], int worker, uint64_t gen, int64_t unix_ms)
{
	memcpy(h, AOF_MAGIC, 8);
	put32(h + 8, AOF_VERSION);
	put32(h + 12, (uint32_t)worker);
	put64(h + 16, gen);
	put64(h + 24, (uint64_t)unix_ms);
	put64(h + 32, XXH3_64bits(h, 32));
}

/* Parse "spillway.<gen>.<worker>.aof" (with_replayed: also "<that>.replayed"). true on a match. */
static bool name_parse(const char *name, uint64_t *gen, int *worker, bool with_replayed)
{
	if (strncmp(name, "spillway.", 9) != 0) return false;
	const char *p = name + 9;
	if (*p < '0' || *p > '9') return false;
	char *end;
	errno = 0;
	unsigned long long g = strtoull(p, &end, 10);
	if (errno || *end != '.') return false;
	p = end + 1;
	if (*p < '0' || *p > '9') return false;
	unsigned long w = strtoul(p, &end, 10);
	if (errno || w > INT_MAX) return false;
	if (strcmp(end, ".aof") != 0 && !(with_replayed && strcmp(end, ".aof.replayed") == 0))
		return false;
	*gen = g;
	*worker = (int)w;
	return true;
}

/* ---------------- the directory ---------------- */

int aof_dir_path(char *out, size_t cap, const char *dir)
{
	int n = snprintf(out, cap, "%s/%s", dir, AOF_DIR_NAME);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) return -errno;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

int aof_dir_prepare(const char *dir)
{
	char path[PATH_MAX];
	int rc = aof_dir_path(path, sizeof(path), dir);
	if (rc) return rc;
	if (mkdir(path, 0755) == 0) return fsync_dir(dir);
	if (errno != EEXIST) return -errno;
	struct stat st;
	if (stat(path, &st) < 0) return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int file_cmp(const void *a, const void *b)
{
	const aof_file *x = a, *y = b;
	if (x->gen != y->gen) return x->gen < y->gen ? -1 : 1;
	if (x->worker != y->worker) return x->worker < y->worker ? -1 : 1;
	return strcmp(x->name, y->name);
}

int aof_dir_list(const char *dir, bool with_replayed, aof_file **out)
{
	char path[PATH_MAX];
	*out = NULL;
	int rc = aof_dir_path(path, sizeof(path), dir);
	if (rc) return rc;
	DIR *d = opendir(path);
	if (!d) return errno == ENOENT ? 0 : -errno;
	aof_file *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		aof_file f;
		if (!name_parse(de->d_name, &f.gen, &f.worker, with_replayed)) continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			aof_file *nv = realloc(v, cap * sizeof(*v));
			if (!nv) { free(v); closedir(d); return -ENOMEM; }
			v = nv;
		}
		snprintf(f.name, sizeof(f.name), "%s", de->d_name);
		v[n++] = f;
	}
	closedir(d);
	if (n) qsort(v, n, sizeof(*v), file_cmp);
	*out = v;
	return (int)n;
}

uint64_t aof_max_gen(const char *dir)
{
	aof_file *v;
	int n = aof_dir_list(dir, true, &v);
	uint64_t g = 0;
	for (int i = 0; i < n; i++) g = SPW_MAX(g, v[i].gen);
	free(v);
	return g;
}

/* ---------------- the sync thread ---------------- */

struct aof_writer {
	struct aof_writer *next, *prev;   /* the open list (g_open_mu) */
	char dir[PATH_MAX];
	char path[AOF_PATH];
	int worker;
	uint64_t gen;
	int fd;                           /* changed only under g_open_mu (note 4) */
	_Atomic int fsync_mode;
	uint8_t *buf;
	size_t len, cap;
	uint64_t records, max_addr;       /* of the current file (records in the buffer included) */
	_Atomic uint64_t written;         /* bytes of the current file written (its size) */
	_Atomic uint64_t synced;          /* of those, bytes known durable */
	_Atomic int werr, serr;           /* note 5 */
	int lost;                         /* -ENOMEM once a record could not be buffered */
	bool in_group;                    /* the last record buffered had group_more (note 7) */
	bool group_drop;                  /* the rest of the current group is dropped (note 7) */
	size_t group_at;                  /* the current group's first record in buf */
	uint64_t group_records;           /* the current group's records buffered */
};

static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;
static aof_writer *g_open;            /* open writers */
static pthread_mutex_t g_thr_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_thr_cv;       /* initialised with CLOCK_MONOTONIC in aof_sync_thread_start */
static pthread_t g_thr;
static bool g_thr_running, g_thr_stop;

/* fdatasync the writer's file if it has unsynced bytes; the caller holds g_open_mu or owns w. */
static void writer_sync(aof_writer *w, int fd)
{
	uint64_t wr = atomic_load(&w->written);
	if (wr <= atomic_load(&w->synced)) return;
	if (fdatasync(fd) < 0) {
		int e = -errno;
		if (atomic_exchange(&w->serr, e) != e)
			spw_log(SPW_LOG_WARNING, -e, "AOF %s: fdatasync failed", w->path);
		return;
	}
	atomic_store(&w->serr, 0);
	/* Another syncer (the worker in always mode) may have stored a larger value meanwhile. */
	uint64_t s = atomic_load(&w->synced);
	while (s < wr && !atomic_compare_exchange_weak(&w->synced, &s, wr)) {}
}

static void *sync_thread(void *arg)
{
	(void)arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&g_thr_mu);
	while (!g_thr_stop) {
		next.tv_sec += 1;
		while (!g_thr_stop && pthread_cond_timedwait(&g_thr_cv, &g_thr_mu, &next) != ETIMEDOUT) {}
		if (g_thr_stop) break;
		pthread_mutex_unlock(&g_thr_mu);
		pthread_mutex_lock(&g_open_mu);
		for (aof_writer *w = g_open; w; w = w->next)
			if (atomic_load(&w->fsync_mode) == AOF_FSYNC_EVERYSEC && w->fd >= 0)
				writer_sync(w, w->fd);
		pthread_mutex_unlock(&g_open_mu);
		pthread_mutex_lock(&g_thr_mu);
		/* A pass longer than a second (slow disk) starts the next one at once, without a backlog. */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > next.tv_sec) next = now;
	}
	pthread_mutex_unlock(&g_thr_mu);
	return NULL;
}

int aof_sync_thread_start(void)
{
	int rc = 0;
	pthread_mutex_lock(&g_thr_mu);
	if (!g_thr_running) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&g_thr_cv, &ca);
		pthread_condattr_destroy(&ca);
		g_thr_stop = false;
		rc = -pthread_create(&g_thr, NULL, sync_thread, NULL);
		if (rc == 0) g_thr_running = true;
		else pthread_cond_destroy(&g_thr_cv);
	}
	pthread_mutex_unlock(&g_thr_mu);
	return rc;
}

void aof_sync_thread_stop(void)
{
	pthread_mutex_lock(&g_thr_mu);
	if (!g_thr_running) {
		pthread_mutex_unlock(&g_thr_mu);
		return;
	}
	g_thr_stop = true;
	pthread_cond_signal(&g_thr_cv);
	pthread_mutex_unlock(&g_thr_mu);
	pthread_join(g_thr, NULL);
	pthread_mutex_lock(&g_thr_mu);
	g_thr_running = false;
	pthread_cond_destroy(&g_thr_cv);
	pthread_mutex_unlock(&g_thr_mu);
}

/* ---------------- writers ---------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR) continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Create <dir>/appendonlydir/spillway.<gen>.<worker>.aof with its header, durable (note 2). */
static int file_create(const char *dir, int worker, uint64_t gen, char *path, size_t cap, int *fd_out)
{
	char adir[PATH_MAX];
	int rc = aof_dir_prepare(dir);
	if (rc) return rc;
	if ((rc = aof_dir_path(adir, sizeof(adir), dir))) return rc;
	int n = snprintf(path, cap, "%s/spillway.%" PRIu64 ".%d.aof", adir, gen, worker);
	if (n < 0 || (size_t)n >= cap) return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) return -errno;
	uint8_t h[AOF_HDR_BYTES];
	header_encode(h, worker, gen, spw_time_ms());
	if ((rc = write_all(fd, h, sizeof(h))) || (fsync(fd) < 0 && (rc = -errno)) ||
	    (rc = fsync_dir(adir))) {
		close(fd);
		unlink(path);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

int aof_writer_open(aof_writer **out, const char *dir, int worker, uint64_t gen, int fsync_mode)
{
	*out = NULL;
	if (worker < 0) return -EINVAL;
	aof_writer *w = calloc(1, sizeof(*w));
	if (!w) return -ENOMEM;
	int rc = -ENAMETOOLONG;
	if ((size_t)snprintf(w->dir, sizeof(w->dir), "%s", dir) >= sizeof(w->dir)) goto fail;
	rc = -ENOMEM;
	if (!(w->buf = malloc(AOF_BUF_INIT))) goto fail;
	w->cap = AOF_BUF_INIT;
	w->worker = worker;
	w->gen = gen;
	atomic_init(&w->fsync_mode, fsync_mode);
	if ((rc = file_create(dir, worker, gen, w->path, sizeof(w->path), &w->fd))) goto fail;
	atomic_init(&w->written, AOF_HDR_BYTES);
	atomic_init(&w->synced, AOF_HDR_BYTES);
	pthread_mutex_lock(&g_open_mu);
	w->next = g_open;
	if (g_open) g_open->prev = w;
	g_open = w;
	pthread_mutex_unlock(&g_open_mu);
	*out = w;
	return 0;
fail:
	free(w->buf);
	free(w);
	return rc;
}

/* A record is lost (note 5); inside a group, so is the rest of the group (note 7). */
static void redo_lost(aof_writer *w, const hlog_redo *r, int err, uint64_t len)
{
	if (!w->lost)
		spw_log(SPW_LOG_WARNING, -err, "AOF %s: a record of %" PRIu64 " bytes is lost%s", w->path,
		        len, w->in_group || r->group_more ? " (and the rest of its group)" : "");
	w->lost = err;
	if (w->in_group && w->group_at <= w->len) {
		w->len = w->group_at;
		w->records -= w->group_records;
	}
	w->in_group = false;
	w->group_drop = r->group_more;
}

void aof_redo(void *arg, const hlog_redo *r)
{
	aof_writer *w = arg;
	bool more = r->group_more && r->kind != HLOG_REDO_FLUSHALL;
	if (SPW_UNLIKELY(w->group_drop)) {   /* note 7: a group that lost a record */
		w->group_drop = more;
		return;
	}
	size_t vlen = r->kind == HLOG_REDO_SET ? r->vlen : 0;
	uint64_t len = (uint64_t)AOF_REC_FIXED + r->klen + vlen;
	if (len > UINT32_MAX || r->klen > UINT32_MAX) {
		redo_lost(w, r, -E2BIG, len);
		return;
	}
	size_t need = w->len + AOF_REC_HDR + (size_t)len;
	if (need > w->cap) {
		size_t cap = w->cap * 2;
		while (cap < need) cap *= 2;
		uint8_t *nb = realloc(w->buf, cap);
		if (!nb) {
			redo_lost(w, r, -ENOMEM, len);
			return;
		}
		w->buf = nb;
		w->cap = cap;
	}
	if (!w->in_group) {
		w->group_at = w->len;
		w->group_records = 0;
	}
	w->in_group = more;
	w->group_records++;
	uint8_t *p = w->buf + w->len;
	put32(p, (uint32_t)len);
	p[4] = (uint8_t)r->kind;
	/* Files before collections wrote 0 (strings); a part's tombstone says it is one. */
	p[5] = r->kind == HLOG_REDO_SET ? r->rtype
	     : r->kind == HLOG_REDO_DEL && r->rtype == HLOG_T_PART ? HLOG_T_PART : 0;
	p[6] = more ? AOF_F_GROUP_MORE : 0;
	p[7] = 0;
	uint8_t *q = p + AOF_REC_HDR;
	put64(q, r->seq);
	put64(q + 8, r->addr);
	put64(q + 16, (uint64_t)(r->kind == HLOG_REDO_SET ? r->expire_ms : HLOG_NO_EXPIRY));
	put32(q + 24, (uint32_t)r->klen);
	put32(q + 28, (uint32_t)vlen);
	if (r->klen) memcpy(q + AOF_REC_FIXED, r->key, r->klen);
	if (vlen) memcpy(q + AOF_REC_FIXED + r->klen, r->val, vlen);
	put64(p + 8, rec_hash(p, (uint32_t)len));
	w->len = need;
	w->records++;
	if (w->records == 1 || r->addr > w->max_addr) w->max_addr = r->addr;
}

bool aof_writer_dirty(const aof_writer *w)
{
	return w->len > 0;
}

size_t aof_writer_buffer_bytes(const aof_writer *w)
{
	return w->cap;
}

int aof_writer_flush(aof_writer *w)
{
	size_t done = 0;
	int rc = 0;
	while (done < w->len) {
		ssize_t k = write(w->fd, w->buf + done, w->len - done);
		if (k < 0) {
			if (errno == EINTR) continue;
			rc = -errno;
			break;
		}
		if (k == 0) {   /* no progress and no error: never spin on it */
			rc = -EIO;
			break;
		}
		done += (size_t)k;
	}
	/* Note 1: what the kernel took leaves the buffer, the rest waits for the next flush. */
	if (done) {
		atomic_fetch_add(&w->written, done);
		memmove(w->buf, w->buf + done, w->len - done);
		w->len -= done;
		/* A group's start that left the buffer cannot be taken back (note 7): SIZE_MAX. */
		w->group_at = w->group_at >= done && w->group_at != SIZE_MAX ? w->group_at - done : SIZE_MAX;
	}
	if (rc) {
		if (atomic_exchange(&w->werr, rc) != rc)
			spw_log(SPW_LOG_WARNING, -rc, "AOF %s: write failed", w->path);
		return rc;
	}
	atomic_store(&w->werr, 0);
	if (w->cap > AOF_BUF_KEEP) {
		uint8_t *nb = realloc(w->buf, AOF_BUF_INIT);
		if (nb) {
			w->buf = nb;
			w->cap = AOF_BUF_INIT;
		}
	}
	if (atomic_load(&w->fsync_mode) == AOF_FSYNC_ALWAYS) {
		writer_sync(w, w->fd);
		rc = atomic_load(&w->serr);
	}
	return rc;
}

int aof_writer_error(const aof_writer *w)
{
	int e = atomic_load(&w->werr);
	if (!e) e = w->lost;
	return e ? e : atomic_load(&w->serr);
}

void aof_writer_set_fsync(aof_writer *w, int fsync_mode)
{
	atomic_store(&w->fsync_mode, fsync_mode);
}

uint64_t aof_writer_bytes(const aof_writer *w)
{
	return atomic_load(&w->written);
}

static void registry_add(const char *path, uint64_t max_addr);

/* Flush and sync the current file, and retire fd (already out of the thread's reach, note 4): an
 * empty file is removed, one with records goes to the registry. */
static void writer_retire(int fd, const char *path, uint64_t records, uint64_t max_addr)
{
	if (fdatasync(fd) < 0)
		spw_log(SPW_LOG_WARNING, errno, "AOF %s: fdatasync at close failed", path);
	close(fd);
	if (records == 0) {
		if (unlink(path) == 0) {
			char *slash = strrchr(path, '/');
			if (slash) {
				*slash = '\0';
				fsync_dir(path);
				*slash = '/';
			}
		}
		return;
	}
	registry_add(path, max_addr);
}

void aof_writer_close(aof_writer *w)
{
	if (!w) return;
	if (w->len && aof_writer_flush(w) < 0)
		spw_log(SPW_LOG_WARNING, 0, "AOF %s: %zu bytes of records not written at close", w->path,
		        w->len);
	pthread_mutex_lock(&g_open_mu);
	if (w->prev) w->prev->next = w->next;
	else g_open = w->next;
	if (w->next) w->next->prev = w->prev;
	pthread_mutex_unlock(&g_open_mu);
	writer_retire(w->fd, w->path, w->records, w->max_addr);
	free(w->buf);
	free(w);
}

int aof_writer_rotate(aof_writer *w, uint64_t gen)
{
	/* The new file first: when it cannot be made, the writer keeps appending to the old one. */
	char path[AOF_PATH];
	int fd, rc = file_create(w->dir, w->worker, gen, path, sizeof(path), &fd);
	if (rc) return rc;
	/* The buffered records belong to the old file (its max addr counts them). */
	if (w->len && (rc = aof_writer_flush(w)) < 0 && w->len) {
		close(fd);
		unlink(path);
		return rc;
	}
	pthread_mutex_lock(&g_open_mu);
	int old_fd = w->fd;
	w->fd = fd;
	atomic_store(&w->written, AOF_HDR_BYTES);
	atomic_store(&w->synced, AOF_HDR_BYTES);
	pthread_mutex_unlock(&g_open_mu);
	char old_path[AOF_PATH];
	memcpy(old_path, w->path, sizeof(old_path));
	memcpy(w->path, path, sizeof(path));
	writer_retire(old_fd, old_path, w->records, w->max_addr);
	w->gen = gen;
	w->records = 0;
	w->max_addr = 0;
	w->lost = 0;
	w->in_group = w->group_drop = false;
	atomic_store(&w->serr, 0);
	return 0;
}

/* ---------------- the registry and pruning ---------------- */

typedef struct reg_entry {
	struct reg_entry *next;
	uint64_t max_addr;
	char path[];
} reg_entry;

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static reg_entry *g_reg;

static void registry_add(const char *path, uint64_t max_addr)
{
	size_t n = strlen(path) + 1;
	reg_entry *e = malloc(sizeof(*e) + n);
	if (!e) return;   /* the file stays until recovery replays and removes it: only space is lost */
	memcpy(e->path, path, n);
	e->max_addr = max_addr;
	pthread_mutex_lock(&g_reg_mu);
	e->next = g_reg;
	g_reg = e;
	pthread_mutex_unlock(&g_reg_mu);
}

/* Whether path lies directly in the folder adir. */
static bool path_in(const char *path, const char *adir)
{
	size_t n = strlen(adir);
	return strncmp(path, adir, n) == 0 && path[n] == '/' && !strchr(path + n + 1, '/');
}

int aof_prune(const char *dir, uint64_t cut)
{
	char adir[PATH_MAX];
	if (aof_dir_path(adir, sizeof(adir), dir)) return 0;
	int removed = 0;
	pthread_mutex_lock(&g_reg_mu);
	for (reg_entry **pp = &g_reg; *pp;) {
		reg_entry *e = *pp;
		if (path_in(e->path, adir) && e->max_addr < cut) {
			if (unlink(e->path) == 0) removed++;
			else if (errno != ENOENT)
				spw_log(SPW_LOG_WARNING, errno, "AOF %s: could not remove", e->path);
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&g_reg_mu);
	if (removed) fsync_dir(adir);
	return removed;
}

int aof_remove_all(const char *dir, bool keep_aside)
{
	char adir[PATH_MAX], path[AOF_PATH], to[AOF_PATH + 16];
	aof_file *v;
	int rc = aof_dir_path(adir, sizeof(adir), dir);
	if (rc) return rc;
	int n = aof_dir_list(dir, false, &v);
	if (n < 0) return n;
	int done = 0;
	rc = 0;
	if (keep_aside && n > 0) {
		/* Only the last start's replayed files are kept aside: older ones go now. */
		DIR *d = opendir(adir);
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			size_t len = strlen(e->d_name);
			if (len > 9 && !strcmp(e->d_name + len - 9, ".replayed") &&
			    (size_t)snprintf(path, sizeof(path), "%s/%s", adir, e->d_name) < sizeof(path))
				unlink(path);
		}
		if (d)
			closedir(d);
	}
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", adir, v[i].name);
		int r;
		if (keep_aside) {
			snprintf(to, sizeof(to), "%s.replayed", path);
			r = rename(path, to);
		} else {
			r = unlink(path);
		}
		if (r < 0) {
			if (!rc) rc = -errno;
			continue;
		}
		done++;
	}
	free(v);
	/* The registry named some of them. */
	pthread_mutex_lock(&g_reg_mu);
	for (reg_entry **pp = &g_reg; *pp;) {
		reg_entry *e = *pp;
		if (path_in(e->path, adir)) {
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
	pthread_mutex_unlock(&g_reg_mu);
	if (done) fsync_dir(adir);
	return rc ? rc : done;
}

