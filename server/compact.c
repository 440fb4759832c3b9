/*
 * compact.c - the server's side of compaction: the compactor thread and its state machine (when a
 * pass runs, how far and in which mode), the disk budget (--disk-max, the -OOM state of a full
 * one, cache mode), COMPACT's requests and INFO's compaction lines. A pass itself is the log's
 * (hlog_compact, log/compact.c).
 *
 * The compactor's state machine (one thread, transitions under cs.lock):
 *
 *     idle --(COMPACT, segments past --compaction-max-segments, disk past --disk-max, a memory-only
 *            log past half its memory with garbage worth a pass, units of expired records at the
 *            oldest end)--> pass --> checkpoints --> idle
 *
 * Design notes:
 *  1. What a pass covers. COMPACT: everything compactable now (with a device, the log below Head).
 *     A trigger: the prefix hlog_compact_choose picks (the best garbage share, at least
 *     MIN_SHARE, or LOW_SHARE once the disk budget is near: a mostly-live prefix is not copied
 *     again and again for a segment count alone), at most a quarter of the log per pass. Units
 *     of expired records at the oldest end (COMPACT_EXPIRED_UNITS of them, or an eighth of the
 *     log) start a pass over just them: it reads nothing (log/compact.c note 7).
 *  2. The disk budget counts what `du` shows of the data: the allocated blocks of the log's segment
 *     files, the checkpoints and the AOF (disk_usage). Past 90% of --disk-max compaction runs with
 *     LOW_SHARE. With noeviction (the default), a disk still past the budget after a pass sets
 *     SPW_OOM_DISK: commands that grow the data get Redis's -OOM until compaction or a FLUSHALL
 *     brings it below 95%; nothing is dropped. With an evicting maxmemory-policy (cache mode) the
 *     oldest segments are dropped instead: an evicting pass (allkeys-*: every key there; volatile-*:
 *     the keys with an expiry, the others copied) over as many units as the excess, counted in
 *     evicted_keys.
 *  3. Space comes back only once no checkpoint needs it (log/compact.c note 5): after a pass that
 *     moved Begin, the compactor asks for checkpoints (at most CKPT_AFTER, the two kept ones need
 *     Begin past the segments) and gives the segments back after each.
 *  4. The thread runs at nice COMPACT_NICE, like the saver, under the IO budget
 *     --compaction-io-limit: compaction is background work; foreground GETs keep the device and
 *     the cores (docs/BENCHMARKS.md appendix L: 16 MB/s kept GET p99.9 within 1.2x of idle, 64 MB/s
 *     did not stay within 2x on this machine's one-queue disk). Once the disk passes 90% of
 *     --disk-max, or the log spans twice --compaction-max-segments (compaction falls behind the
 *     writers), the budget is four times as large: running out of disk is worse than latency.
 */
#include "server/server_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define COMPACT_WAIT_MS 1000   /* the compactor looks at its triggers once a second */
#define COMPACT_EXPIRED_UNITS 2 /* units of expired records at the oldest end that start a pass */
#define COMPACT_WAIT_MEM_MS 20 /* without a device: 50 times a second (a cheap look) */
#define COMPACT_NICE    10
#define MIN_SHARE       0.25   /* note 1 */
#define LOW_SHARE       0.02
#define CKPT_AFTER      2      /* note 3 */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started;
	bool gone;                 /* no compactor will run a COMPACT any more: it failed or stopped
	                              (lock); before compact_start, a COMPACT waits for it */
	_Atomic int stop;
	bool index_wanted;         /* the index's fill hook fired: look at its growth now (lock) */
	uint64_t asked, done;      /* COMPACT tickets */
	int done_rc;
	char done_why[160];
	/* results */
	uint64_t passes, failures, moved_bytes, removed_bytes, evicting_passes;
	uint64_t disk_used;
	hlog_compact_info last;
	int last_rc;
} cs = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* ---------------- the disk budget (note 2) ---------------- */

static uint64_t dir_blocks(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return 0;
	uint64_t sum = 0;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* Allocated bytes of the data: the folder's files (checkpoints), its appendonlydir and the log's
 * segments in <logdir>/Store (or <dir>/Store); *segments: the last part alone. */
static uint64_t disk_usage(uint64_t *segments)
{
	char p[2100];
	uint64_t sum = dir_blocks(g_cfg.dir);
	snprintf(p, sizeof(p), "%s/appendonlydir", g_cfg.dir);
	sum += dir_blocks(p);
	snprintf(p, sizeof(p), "%s/Store", g_cfg.storage_tier && g_cfg.logdir[0] ? g_cfg.logdir : g_cfg.dir);
	*segments = dir_blocks(p);
	return sum + *segments;
}

static bool policy_evicts(void)
{
	return __atomic_load_n(&g_cfg.maxmemory_policy, __ATOMIC_RELAXED) != SPW_POLICY_NOEVICTION;
}

static int evict_mode(void)
{
	int p = __atomic_load_n(&g_cfg.maxmemory_policy, __ATOMIC_RELAXED);
	return p <= SPW_POLICY_VOLATILE_TTL ? HLOG_COMPACT_EVICT_VOLATILE : HLOG_COMPACT_EVICT_ALL;
}

/* ---------------- a pass ---------------- */

/* What is due (note 1): fills o, or returns false. */
static bool compact_due(bool asked, uint64_t disk, uint64_t segs, hlog_compact_opts *o)
{
	hlog *l = g_srv.store;
	hlog_space sp;
	hlog_space_get(l, &sp);
	uint64_t dmax = __atomic_load_n(&g_cfg.disk_max, __ATOMIC_RELAXED);
	int maxseg = __atomic_load_n(&g_cfg.compaction_max_segments, __ATOMIC_RELAXED);
	memset(o, 0, sizeof(*o));
	o->io_limit = __atomic_load_n(&g_cfg.compaction_io_limit, __ATOMIC_RELAXED);
	o->stop = &cs.stop;
	o->mode = HLOG_COMPACT_COPY;
	/* Cache mode: drop the oldest units, as many as the excess (and one more); only while what
	 * the last pass dropped has come back (else the same excess would drop unit after unit), and
	 * only for what segments can give (checkpoints and the AOF are not theirs to shrink). */
	bool settled = !g_srv.dev || (sp.begin & ~(sp.unit_bytes - 1)) <= sp.reclaimed;
	uint64_t other = disk - segs;
	if (dmax && disk > dmax && policy_evicts() && sp.limit > sp.begin && settled && other < dmax) {
		o->mode = evict_mode();
		o->until = sp.begin + ((disk - dmax) / sp.unit_bytes + 1) * sp.unit_bytes;
		return true;
	}
	if (asked) {
		o->until = UINT64_MAX;
		return true;
	}
	/* Units of expired records at the oldest end go for no IO (log/compact.c note 7): once a few
	 * have gathered (each pass is followed by two checkpoints), so that TTL churn does not wait
	 * for the segment trigger to get its disk back. */
	uint64_t expired_units = (sp.expired_end - sp.begin) / sp.unit_bytes;
	if (g_srv.dev && expired_units >= SPW_MAX(COMPACT_EXPIRED_UNITS, sp.units / 8)) {
		o->until = sp.expired_end;
		return true;
	}
	uint64_t max_units = SPW_MAX(1, sp.units / 4);
	bool near = dmax && disk > dmax / 10 * 9;
	bool many = g_srv.dev && maxseg > 0 && sp.units > (uint64_t)maxseg;
	/* Note 4: a budget about to be reached, or a log twice past its segment trigger (compaction
	 * falling behind the writers), outweighs the latency. */
	if (o->io_limit && (near || (many && sp.units > 2 * (uint64_t)maxseg)))
		o->io_limit *= 4;
	bool full = false;
	if (!g_srv.dev) {
		hlog_info hi;
		hlog_info_get(l, &hi);
		full = sp.tail - sp.begin > hi.memory_bytes / 2;
	}
	if (!near && !many && !full)
		return false;
	o->until = hlog_compact_choose(l, near ? LOW_SHARE : MIN_SHARE, max_units);
	return o->until != 0;
}

/* Checkpoints after a pass (note 3), then the segments they no longer need go. */
static void compact_checkpoints(hlog_session *s, uint64_t *removed)
{
	for (int i = 0; i < CKPT_AFTER && !atomic_load(&cs.stop); i++) {
		uint64_t ticket, got = 0;
		int rc = -EBUSY;
		for (int tries = 0; tries < 600 && rc == -EBUSY && !atomic_load(&cs.stop); tries++) {
			if ((rc = persist_save_request(&ticket)) == -EBUSY)
				usleep(100 * 1000);
		}
		if (rc < 0)
			return;
		int crc = 0;
		while (!persist_save_done(ticket, &crc) && !atomic_load(&cs.stop))
			usleep(10 * 1000);
		if (crc < 0 || hlog_reclaim(g_srv.store, s, &got) < 0)
			return;
		*removed += got;
		if (got == 0 && i > 0)
			return;
	}
}

/* Begin moved without a pass (FLUSHALL): the checkpoints catch up and the space comes back. */
static void compact_space_back(hlog_session *s, uint64_t begin_at_start)
{
	hlog_space sp;
	hlog_space_get(g_srv.store, &sp);
	if (!g_srv.dev || (sp.begin & ~(sp.unit_bytes - 1)) <= sp.reclaimed)
		return;
	uint64_t got = 0;
	/* Checkpoints only for a Begin this process moved: a start does not take any by itself. */
	if (sp.hold != UINT64_MAX && sp.hold < (sp.begin & ~(sp.unit_bytes - 1))) {
		if (sp.begin > begin_at_start)
			compact_checkpoints(s, &got);
	} else {
		hlog_reclaim(g_srv.store, s, &got);
	}
	pthread_mutex_lock(&cs.lock);
	cs.removed_bytes += got;
	pthread_mutex_unlock(&cs.lock);
}

static int compact_pass(hlog_session *s, const hlog_compact_opts *o, hlog_compact_info *ci)
{
	int rc = hlog_compact(g_srv.store, s, o, ci);
	if (ci->end > ci->begin) {
		spw_log(SPW_LOG_NOTICE, 0, "Compaction%s: Begin %" PRIu64 " -> %" PRIu64 ", %" PRIu64
		        " records copied (%" PRIu64 " bytes), %" PRIu64 " expired (%" PRIu64 " bytes of them dropped "
		        "unread), %" PRIu64 " evicted, %" PRIu64 " bytes read in %" PRIu64 " ms",
		        o->mode != HLOG_COMPACT_COPY ? " (evicting)" : "", ci->begin, ci->end, ci->copied,
		        ci->copied_bytes, ci->expired, ci->dropped_bytes, ci->evicted, ci->read_bytes,
		        ci->duration_us / 1000);
		uint64_t more = 0;
		if (g_srv.dev)   /* without one, no segment waits for them: the frames are free already */
			compact_checkpoints(s, &more);
		ci->removed_bytes += more;
	}
	if (rc < 0)
		spw_log(SPW_LOG_WARNING, 0, "Compaction stopped early: %s", ci->why);
	else if (ci->why[0])   /* a pass that finished but has something to say (compact.c note 7) */
		spw_log(SPW_LOG_WARNING, 0, "Compaction: %s", ci->why);
	return rc;
}

/* The -OOM state of a full budget with noeviction (note 2). */
static void compact_oom_update(uint64_t disk)
{
	uint64_t dmax = __atomic_load_n(&g_cfg.disk_max, __ATOMIC_RELAXED);
	int cur = atomic_load(&g_srv.deny_oom) & SPW_OOM_DISK;
	if (dmax && disk > dmax && !policy_evicts()) {
		if (!cur)
			spw_log(SPW_LOG_WARNING, 0, "Disk budget reached: %" PRIu64 " bytes used, --disk-max %"
			        PRIu64 ": writes get -OOM until compaction frees space", disk, dmax);
		atomic_fetch_or(&g_srv.deny_oom, SPW_OOM_DISK);
	} else if (cur && (!dmax || disk < dmax / 20 * 19 || policy_evicts())) {
		spw_log(SPW_LOG_NOTICE, 0, "Disk budget: %" PRIu64 " bytes used, writes accepted again", disk);
		atomic_fetch_and(&g_srv.deny_oom, ~SPW_OOM_DISK);
	}
}

void compact_index_wanted(void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&cs.lock);
	cs.index_wanted = true;
	pthread_cond_signal(&cs.cond);
	pthread_mutex_unlock(&cs.lock);
}

/* The index's growth (log/store.c note 2) runs here too: a background thread with a store session,
 * looking every --index-resize-freq seconds, and at once when the index's fill hook says the
 * threshold was passed (compact_index_wanted, from the inserting worker: a bulk load fills a
 * small index many times over in a second); doublings in a row until the fill is under it. */
static void compact_index_grow(hlog_session *s)
{
	int rc;
	for (int64_t t0 = spw_time_ms(); (rc = hlog_index_grow_step(g_srv.store, s)) == 1; t0 = spw_time_ms()) {
		hlog_info hi;
		hlog_info_get(g_srv.store, &hi);
		spw_log(SPW_LOG_NOTICE, 0, "The index doubled to %llu buckets (%llu MiB) for %llu keys in %lld ms",
		        (unsigned long long)hi.index.buckets, (unsigned long long)(hi.index.memory_bytes >> 20),
		        (unsigned long long)hi.keys, (long long)(spw_time_ms() - t0));
	}
	if (rc < 0)
		spw_log(SPW_LOG_WARNING, 0, "The index cannot double: %s; it keeps its size (longer "
		        "chains)", spw_strerror(rc));
}

static void *compact_main(void *arg)
{
	(void)arg;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), COMPACT_NICE) < 0)
		spw_log(SPW_LOG_VERBOSE, errno, "The compactor keeps the workers' priority");
	hlog_session *s = NULL;
	int rc = persist_session_open(&s, NULL, NULL);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "The compactor cannot open a store session: %s; no compaction "
		        "until restart", spw_strerror(rc));
		/* COMPACT is refused from now on; a waiting one gets its answer. */
		pthread_mutex_lock(&cs.lock);
		cs.started = false;
		cs.gone = true;
		cs.done = cs.asked;
		cs.done_rc = rc;
		snprintf(cs.done_why, sizeof(cs.done_why), "the compactor has no store session");
		pthread_mutex_unlock(&cs.lock);
		server_wake_saves();
		return NULL;
	}
	hlog_space sp0;
	hlog_space_get(g_srv.store, &sp0);
	uint64_t begin_at_start = sp0.begin, disk = 0, segs = 0;
	int64_t disk_ms = 0, grow_ms = 0;
	bool due_prev = false, stuck = false;
	pthread_mutex_lock(&cs.lock);
	while (!atomic_load(&cs.stop)) {
		uint64_t serving = cs.asked;
		bool asked = serving > cs.done, index_wanted = cs.index_wanted;
		cs.index_wanted = false;
		pthread_mutex_unlock(&cs.lock);
		/* The folders are looked at once a second at most (note 2), even when passes come faster. */
		int64_t now = spw_time_ms();
		if (due_prev || now - disk_ms >= COMPACT_WAIT_MS) {
			disk = disk_usage(&segs);
			disk_ms = now;
		}
		if (index_wanted || now - grow_ms >= (int64_t)g_cfg.index_resize_freq * 1000) {
			grow_ms = now;
			compact_index_grow(s);
		}
		hlog_compact_opts o;
		hlog_compact_info ci;
		memset(&ci, 0, sizeof(ci));
		hlog_info hi;
		hlog_info_get(g_srv.store, &hi);
		/* A store in its error state refuses the copies: no pass until a restart. */
		bool due = !atomic_load(&g_srv.loading) && !hi.store_error && !stuck &&
		           compact_due(asked, disk, segs, &o);
		int prc = due ? compact_pass(s, &o, &ci) : 0;
		if (asked && hi.store_error) {
			prc = SPW_E_STORE_ERROR;
			snprintf(ci.why, sizeof(ci.why), "the store refuses writes since a page write failed "
			         "(INFO store)");
		}
		if (!due && !atomic_load(&g_srv.loading))
			compact_space_back(s, begin_at_start);
		if (due) {
			disk = disk_usage(&segs);
			disk_ms = spw_time_ms();
		}
		due_prev = due;
		compact_oom_update(disk);
		/* A pass that failed without moving Begin (log memory full, a device error) is not
		 * tried again at once: the next look comes after the normal wait. */
		stuck = due && prc < 0 && ci.end == ci.begin && !asked;
		pthread_mutex_lock(&cs.lock);
		cs.disk_used = disk;
		if (due) {
			cs.passes++;
			cs.failures += prc < 0;
			cs.evicting_passes += o.mode != HLOG_COMPACT_COPY;
			cs.moved_bytes += ci.end - ci.begin;
			cs.removed_bytes += ci.removed_bytes;
			cs.last = ci;
			cs.last_rc = prc;
		}
		if (asked) {
			cs.done = serving;
			cs.done_rc = prc;
			snprintf(cs.done_why, sizeof(cs.done_why), "%s", prc < 0 ? ci.why : "");
			pthread_mutex_unlock(&cs.lock);
			server_wake_saves();   /* COMPACT waiters (worker.c note 8) */
			pthread_mutex_lock(&cs.lock);
			continue;
		}
		if (due && ci.end > ci.begin)
			continue;   /* more may be due at once */
		if (stuck) {
			pthread_mutex_unlock(&cs.lock);
			for (int i = 0; i < COMPACT_WAIT_MS / 100 && !atomic_load(&cs.stop); i++)
				usleep(100 * 1000);
			pthread_mutex_lock(&cs.lock);
			stuck = false;
			continue;
		}
		/* Without a device the log fills the memory at the writers' speed: look more often. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		long wait_ms = g_srv.dev ? COMPACT_WAIT_MS : COMPACT_WAIT_MEM_MS;
		ts.tv_nsec += (wait_ms % 1000) * 1000000L;
		ts.tv_sec += wait_ms / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		if (cs.asked == cs.done && !cs.index_wanted && !atomic_load(&cs.stop))
			pthread_cond_timedwait(&cs.cond, &cs.lock, &ts);
	}
	pthread_mutex_unlock(&cs.lock);
	hlog_session_close(s);
	return NULL;
}

int compact_start(void)
{
	atomic_store(&cs.stop, 0);
	int rc = pthread_create(&cs.thread, NULL, compact_main, NULL);
	pthread_mutex_lock(&cs.lock);
	if (rc) {
		/* A COMPACT taken before this gets its answer. */
		cs.gone = true;
		cs.done = cs.asked;
		cs.done_rc = -rc;
		snprintf(cs.done_why, sizeof(cs.done_why), "the compactor did not start");
	} else {
		cs.started = true;
	}
	pthread_mutex_unlock(&cs.lock);
	if (rc) {
		spw_log(SPW_LOG_WARNING, rc, "Cannot start the compactor thread");
		server_wake_saves();
		return -1;
	}
	return 0;
}

void compact_stop(void)
{
	if (!cs.started)
		return;
	pthread_mutex_lock(&cs.lock);
	atomic_store(&cs.stop, 1);
	pthread_cond_broadcast(&cs.cond);
	pthread_mutex_unlock(&cs.lock);
	pthread_join(cs.thread, NULL);   /* a pass ends at its next page (the stop flag) */
	cs.started = false;
	/* COMPACT waiters get an answer. */
	pthread_mutex_lock(&cs.lock);
	cs.gone = true;
	if (cs.asked > cs.done) {
		cs.done = cs.asked;
		cs.done_rc = -ECANCELED;
		snprintf(cs.done_why, sizeof(cs.done_why), "the server is shutting down");
	}
	pthread_mutex_unlock(&cs.lock);
}

/* ---------------- requests ---------------- */

int compact_request(uint64_t *ticket)
{
	pthread_mutex_lock(&cs.lock);
	/* Before compact_start (the workers serve from the end of loading on, a moment earlier) the
	 * ticket waits for the compactor, which takes it first. */
	int rc = cs.gone ? -ENOTCONN : 0;
	if (rc == 0) {
		*ticket = ++cs.asked;
		pthread_cond_broadcast(&cs.cond);
	}
	pthread_mutex_unlock(&cs.lock);
	return rc;
}

bool compact_done(uint64_t ticket, int *rc, char *why, size_t whylen)
{
	pthread_mutex_lock(&cs.lock);
	bool done = ticket <= cs.done;
	if (done) {
		*rc = cs.done_rc;
		snprintf(why, whylen, "%s", cs.done_why);
	}
	pthread_mutex_unlock(&cs.lock);
	return done;
}

void cmd_compact(client *c)
{
	uint64_t ticket;
	if (compact_request(&ticket) < 0) {
		reply_error(c, "ERR compaction is not running");
		return;
	}
	c->save_ticket = ticket;
	c->flags |= CLIENT_SAVE_WAIT | CLIENT_COMPACT_WAIT;   /* worker.c note 8 answers it */
}

/* ---------------- INFO ---------------- */

void compact_info(struct sbuf *b)
{
	hlog_space sp;
	hlog_space_get(g_srv.store, &sp);
	hlog_info hi;
	hlog_info_get(g_srv.store, &hi);
	pthread_mutex_lock(&cs.lock);
	sb_printf(b, "compaction_passes:%" PRIu64 "\r\n"
	          "compaction_failures:%" PRIu64 "\r\n"
	          "compaction_evicting_passes:%" PRIu64 "\r\n"
	          "compaction_moved_bytes:%" PRIu64 "\r\n"
	          "compaction_expired_drop_units:%" PRIu64 "\r\n"
	          "compaction_expired_drop_bytes:%" PRIu64 "\r\n"
	          "compaction_removed_bytes:%" PRIu64 "\r\n"
	          "compaction_last_duration_ms:%" PRIu64 "\r\n"
	          "log_begin_address:%" PRIu64 "\r\n"
	          "log_units:%" PRIu64 "\r\n"
	          "log_unit_bytes:%" PRIu64 "\r\n"
	          "log_garbage_bytes:%" PRIu64 "\r\n"
	          "disk_used_bytes:%" PRIu64 "\r\n"
	          "disk_max:%" PRIu64 "\r\n"
	          "disk_oom:%d\r\n",
	          cs.passes, cs.failures, cs.evicting_passes, cs.moved_bytes,
	          hi.compact_expired_drop_units, hi.compact_expired_drop_bytes, cs.removed_bytes, cs.last.duration_us / 1000, sp.begin, sp.units, sp.unit_bytes,
	          sp.garbage, cs.disk_used, (uint64_t)__atomic_load_n(&g_cfg.disk_max, __ATOMIC_RELAXED),
	          (atomic_load(&g_srv.deny_oom) & SPW_OOM_DISK) ? 1 : 0);
	pthread_mutex_unlock(&cs.lock);
}
