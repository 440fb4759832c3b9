/*
 * persist.c - the server's side of durability: recovery at start (on the main thread), the saver
 * thread and its checkpoint state machine, SAVE / BGSAVE / LASTSAVE's requests and INFO's
 * # Persistence section. The store's checkpoints and recovery are log/'s (hlog.h, "durability");
 * the AOF files are aof.c's; the workers' AOF writers are worker.c's (note 7 there).
 *
 * Sections: state / recovery / the saver / requests / INFO.
 *
 * The saver's state machine (one thread, all transitions under ps.lock):
 *
 *     idle --(BGSAVE, SAVE, interval, save rule, AOF turned on)--> running --> idle + result
 *
 * Design notes:
 *  1. Recovery runs while the workers are up and answer -LOADING to every command without
 *     Redis's "loading" flag (commands.c), so that clients and monitors see Redis's behaviour
 *     rather than a refused connection. The main thread uses a session of its own (the store's
 *     max_sessions counts it, and one for the saver): hlog_recover loads the newest checkpoint
 *     (or, with --recover-checkpoint previous, the one before, ignoring the AOF, logged loudly),
 *     then aof_replay applies every AOF record with addr >= the checkpoint's cut. Any error stops
 *     start-up with the store's or the AOF's reason (naming the file): a server never serves a
 *     partial dataset. After a replay (or with previous), a checkpoint is taken at once and the
 *     replayed files are set aside (*.replayed), so a second crash does not replay them again on
 *     top of a checkpoint that already holds them. The redo seq continues after the largest one
 *     seen, so seqs keep ordering one key's changes across restarts.
 *  2. A checkpoint (checkpoint_run): first the AOF generation moves on and every worker is woken
 *     (each closes its file and opens the next generation at its next pass), then hlog_checkpoint,
 *     then, on success, aof_prune(cut) removes the closed files whose records are all in it. Files
 *     of the old generation that still got a record at or past the cut stay until a later cut
 *     covers them: pruning goes by address, not by generation, so the order in which the workers
 *     rotate does not matter.
 *  3. Changes since the last checkpoint (rdb_changes_since_last_save, the save rules and the
 *     interval) are the store's write counters (inplace_updates + rcu_updates + appends) less
 *     their sum when the last successful checkpoint started. An automatic checkpoint that failed is
 *     retried after CKPT_RETRY_MS (Redis's CONFIG_BGSAVE_RETRY_DELAY), not every second.
 *  4. SAVE takes a ticket and parks its client (CLIENT_SAVE_WAIT: its later requests wait too)
 *     without blocking its worker; when the checkpoint that started after the ticket ends, the
 *     saver sets every worker's save_pending and wakes it (as CLIENT KILL's kill_pending), and the
 *     worker answers its waiters (worker.c). As Redis 7.0: SAVE or BGSAVE while a checkpoint runs
 *     answers "Background save already in progress"; a failed SAVE answers "-ERR". One that comes
 *     after loading but before persist_start has started the saver waits for it.
 *  5. AOF turned on at runtime (CONFIG SET appendonly yes): records start once each worker has
 *     opened its writer; the changes made before are in no AOF, so a checkpoint starts as soon as
 *     every worker has one (g_srv.aof_writers), after which checkpoint + AOF cover everything.
 *     Until it completes, a crash restores the previous checkpoint plus the AOF written since.
 *  6. Shutdown: the saver stops (a checkpoint it runs finishes first); the final checkpoint runs
 *     on the main thread after the workers have exited, so every acknowledged write is in it.
 *  7. The saver runs at nice SAVER_NICE: a checkpoint is background work (its CPU is the index
 *     image's compression and copy), and on a machine with no idle core it must not take the
 *     workers' time slices (GET p99.9 during BGSAVE, docs/BENCHMARKS.md appendix H). Not
 *     SCHED_IDLE: under constant full load a checkpoint must still finish.
 *  8. Groups and parts in the AOF (a large collection's head and parts, aof.h): aof_replay hands a
 *     group over only once its last record is read (a torn tail drops a cut group whole) and one
 *     record at a time, each with the skip rule; a group lies in one span of the log, so the
 *     checkpoint's cut never splits it (aof_read.c note 2). A part (rtype HLOG_T_PART) is written
 *     under its internal key, where no user key reads it and no key count sees it.
 */
#include "server/server_int.h"
#include "server/import.h"
#include "server/aof.h"
#include "device/device.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SAVER_WAIT_MS      1000          /* the saver looks at its rules once a second */
#define CKPT_RETRY_MS      5000          /* an automatic checkpoint that failed waits this long */
#define LOAD_LOG_MS        5000          /* a progress line this often during long loads */
#define REPLAY_WAIT_TRIES  10            /* 1 ms polls before a pending replay op runs again */
#define SAVER_NICE         10            /* the saver thread's nice value (note 7) */

/* ---------------- state ---------------- */

enum { WHY_NONE, WHY_BGSAVE, WHY_SAVE, WHY_INTERVAL, WHY_RULE, WHY_AOF_ON };
static const char *const why_names[] = { "", "BGSAVE", "SAVE", "checkpoint-interval", "save rule",
                                         "AOF turned on" };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stop;
	bool start_failed;                /* persist_start could not start the saver */
	/* requests */
	bool bgsave_asked;
	uint64_t save_asked, save_done;   /* SAVE tickets handed out / answered (note 4) */
	int save_rc;                      /* result for the tickets <= save_done */
	bool aof_on_pending;              /* note 5 */
	bool aof_was_on;
	/* running */
	bool running;
	int64_t run_start_ms;
	/* results */
	int64_t lastsave_ms;              /* last success (start time before one) */
	int64_t last_try_ms;              /* last attempt's end */
	int last_rc;                      /* 0 or the last attempt's error */
	char last_why[256];
	int64_t last_time_sec;            /* rdb_last_bgsave_time_sec, -1 before one */
	uint64_t saves, failures;
	hlog_ckpt_info last;              /* the last successful one */
	uint64_t changes_base;            /* note 3 */
	/* loading */
	int64_t loading_start_s;
	uint64_t loaded_keys;
	aof_replay_stats replay;          /* bytes_done is written by the replay, read by INFO */
	bool replaying;
} ps = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.last_time_sec = -1,
};

static hlog_session *main_sess;       /* the main thread's: recovery and the final checkpoint */

/* The store's write counters (note 3). */
static uint64_t changes_total(void)
{
	hlog_info hi;
	hlog_info_get(g_srv.store, &hi);
	return hi.inplace_updates + hi.rcu_updates + hi.appends;
}

static void noop_ready(void *cb_arg, void *op_ctx)
{
	(void)cb_arg;
	(void)op_ctx;
}

/* A session for the calling thread; with a device, attached with ready (NULL: ignored). */
int persist_session_open(hlog_session **out, hlog_ready_fn ready, void *arg)
{
	int rc = hlog_session_open(g_srv.store, out);
	if (rc < 0)
		return rc;
	if (g_srv.dev) {
		rc = hlog_session_attach(*out, ready ? ready : noop_ready, arg);
		if (rc < 0) {
			hlog_session_close(*out);
			*out = NULL;
		}
	}
	return rc;
}

/* ---------------- recovery (note 1) ---------------- */

typedef struct replay_ctx {
	hlog_session *s;
	bool ready;
	uint64_t n;
	int64_t next_log_ms;
} replay_ctx;

static void replay_ready(void *cb_arg, void *op_ctx)
{
	(void)op_ctx;
	((replay_ctx *)cb_arg)->ready = true;
}

/* Loading progress over both phases: bytes of the checkpoint's files, then of the AOF. */
static void loading_progress(uint64_t *done, uint64_t *total)
{
	uint64_t d = 0, t = 0;
	hlog_recover_progress(g_srv.store, &d, &t);
	*done = d + __atomic_load_n(&ps.replay.bytes_done, __ATOMIC_RELAXED);
	*total = t + __atomic_load_n(&ps.replay.bytes_total, __ATOMIC_RELAXED);
}

static void loading_log(void)
{
	uint64_t done, total;
	loading_progress(&done, &total);
	double secs = (double)(spw_time_ms() / 1000 - ps.loading_start_s);
	double rate = secs > 0 ? (double)done / secs : 0;
	double perc = total ? 100.0 * (double)done / (double)total : 0;
	long long eta = rate > 0 && total > done ? (long long)((double)(total - done) / rate) : 0;
	spw_log(SPW_LOG_NOTICE, 0, "Loading: %.1f%% (%.1f MB/s), ETA %lld s", perc, rate / 1e6, eta);
}

/* The loading monitor: a progress line every LOAD_LOG_MS while recovery runs on the main thread. */
static void *loading_monitor(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ps.lock);
	while (atomic_load(&g_srv.loading)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += LOAD_LOG_MS / 1000;
		if (pthread_cond_timedwait(&ps.cond, &ps.lock, &ts) == ETIMEDOUT && atomic_load(&g_srv.loading)) {
			pthread_mutex_unlock(&ps.lock);
			loading_log();
			pthread_mutex_lock(&ps.lock);
		}
	}
	pthread_mutex_unlock(&ps.lock);
	return NULL;
}

/* Wait for a pending replay op: poll the session, sleep 1 ms on its fd, a few times, so that the
 * op runs again once its read or its frame is there (or early, which the store allows). */
static void replay_wait(replay_ctx *x)
{
	int fd = hlog_session_fd(x->s);
	for (int i = 0; i < REPLAY_WAIT_TRIES && !x->ready; i++) {
		hlog_session_poll(x->s);
		if (x->ready)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		poll(&p, fd >= 0 ? 1 : 0, 1);
		if (fd >= 0 && (p.revents & POLLIN)) {
			uint64_t v;
			ssize_t r = read(fd, &v, sizeof(v));
			(void)r;
		}
	}
}

/* aof_replay's callback: one record into the store through the main thread's session. */
static int replay_apply(void *ctx, const aof_rec *r)
{
	replay_ctx *x = ctx;
	int rc;

	for (;;) {
		x->ready = false;
		hlog_session_set_op(x->s, x);
		rc = aof_rec_apply(x->s, r);   /* a part under its internal key (note 8) */
		if (rc != HLOG_PENDING)
			break;
		replay_wait(x);
	}
	if (g_srv.dev)
		hlog_session_release(x->s, x);
	/* The index grows as the replay fills it (log/store.c note 2), as the log's replay does: no
	 * other thread reads the store while it loads (commands get -LOADING), hence no quiesce. */
	if ((x->n & 65535) == 65535)
		while (hlog_index_grow_step(g_srv.store, NULL) == 1)
			;
	if ((++x->n & 1023) == 0) {
		hlog_session_refresh(x->s);
		int64_t now = spw_time_ms();
		if (now >= x->next_log_ms) {
			loading_log();
			x->next_log_ms = now + LOAD_LOG_MS;
		}
	}
	return rc < 0 ? rc : 0;
}

/* --import-rdb's writes (import.c): each key as the AOF replay writes a SET, with its waits. */
static int import_set(void *ctx, const uint8_t *k, size_t klen, const dump_build *b, int64_t expire_ms)
{
	aof_rec r = { .kind = HLOG_REDO_SET, .key = k, .klen = (uint32_t)klen, .val = b->val.p,
	              .vlen = (uint32_t)b->val.len, .expire_ms = expire_ms, .rtype = b->rtype };
	return replay_apply(ctx, &r);
}

static void import_log_line(void *ctx, const char *s)
{
	(void)ctx;
	spw_log(SPW_LOG_NOTICE, 0, "%s", s);
}

/* The import after the recovery, before the workers serve (import.c note 1). 0 or -1 (logged). */
static int import_run(replay_ctx *x)
{
	import_stats st;
	char why[512] = "";
	spw_log(SPW_LOG_NOTICE, 0, "Importing %s", g_cfg.import_rdb);
	hlog_session_protect(x->s);
	hlog_session_set_now(x->s, spw_time_ms());
	int rc = import_rdb(g_cfg.import_rdb, spw_time_ms(), import_set, x, &st, why, sizeof(why));
	hlog_session_unprotect(x->s);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Fatal error importing the RDB file: %s. Exiting.", why);
		return -1;
	}
	import_summary_print(&st, import_log_line, NULL);
	return 0;
}

/* Record a successful checkpoint's figures (under ps.lock). */
static void result_record(const hlog_ckpt_info *ci, int rc, uint64_t changes_at_start, int64_t t0_ms)
{
	int64_t now = spw_time_ms();
	ps.last_try_ms = now;
	ps.last_rc = rc;
	ps.last_time_sec = (now - t0_ms) / 1000;
	if (rc == 0) {
		ps.last = *ci;
		ps.saves++;
		ps.lastsave_ms = now;
		ps.changes_base = changes_at_start;
		ps.last_why[0] = '\0';
	} else {
		ps.failures++;
		snprintf(ps.last_why, sizeof(ps.last_why), "%s", ci->why[0] ? ci->why : spw_strerror(rc));
		for (char *p = ps.last_why; *p; p++)
			if (*p == '\r' || *p == '\n')
				*p = ' ';   /* one INFO line */
	}
}

/* A checkpoint on session s of the calling thread (note 2). 0 or the error (logged). */
static int checkpoint_run(hlog_session *s, hlog_ckpt_info *ci, const char *why)
{
	int64_t t0 = spw_time_ms();
	uint64_t changes = changes_total();
	memset(ci, 0, sizeof(*ci));
	spw_log(SPW_LOG_NOTICE, 0, "Checkpoint started (%s)", why);
	atomic_fetch_add(&g_srv.aof_gen, 1);
	server_wake_all();   /* writers rotate at their next pass */
	int rc = hlog_checkpoint(g_srv.store, s, g_cfg.dir, g_srv.logdev, ci);
	if (rc == 0) {
		int pruned = aof_prune(g_cfg.dir, ci->cut);
		spw_log(SPW_LOG_NOTICE, 0, "DB saved on disk: checkpoint %" PRIu64 ", cut %" PRIu64 ", %" PRIu64
		        " keys, index image %" PRIu64 " bytes, %.3f seconds; %d AOF file(s) removed", ci->id,
		        ci->cut, ci->keys, ci->index_bytes, (double)ci->duration_us / 1e6, pruned);
	} else {
		spw_log(SPW_LOG_WARNING, 0, "Background saving error: %s", ci->why[0] ? ci->why : spw_strerror(rc));
	}
	pthread_mutex_lock(&ps.lock);
	result_record(ci, rc, changes, t0);
	pthread_mutex_unlock(&ps.lock);
	return rc;
}

int persist_recover(void)
{
	char why[512] = "";
	hlog_ckpt_info info;
	replay_ctx x = { .s = NULL };
	pthread_t mon;
	bool mon_started = false;
	bool previous = g_cfg.recover_checkpoint == SPW_RECOVER_PREVIOUS;
	uint64_t t0 = spw_mono_ns();
	int rc;

	ps.loading_start_s = spw_time_ms() / 1000;
	ps.lastsave_ms = g_srv.start_ms;
	rc = persist_session_open(&main_sess, replay_ready, &x);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Cannot open the recovery session: %s", spw_strerror(rc));
		return -1;
	}
	x.s = main_sess;
	x.next_log_ms = spw_time_ms() + LOAD_LOG_MS;
	mon_started = pthread_create(&mon, NULL, loading_monitor, NULL) == 0;
	if (previous)
		spw_log(SPW_LOG_WARNING, 0, "--recover-checkpoint previous: loading the checkpoint BEFORE the "
		        "newest one and IGNORING the AOF: writes after that checkpoint are NOT restored");
	memset(&info, 0, sizeof(info));
	rc = hlog_recover(g_srv.store, main_sess, g_cfg.dir, g_srv.logdev, previous ? 1 : 0, &info, why,
	                  sizeof(why));
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Fatal error loading the DB: %s. Exiting.", why[0] ? why : spw_strerror(rc));
		goto fail;
	}
	bool have = rc == 0;
	if (have)
		spw_log(SPW_LOG_NOTICE, 0, "Checkpoint %" PRIu64 " loaded: %" PRIu64 " keys, log [%" PRIu64 ", %"
		        PRIu64 ")", info.id, info.keys, info.begin, info.cut);
	else
		spw_log(SPW_LOG_NOTICE, 0, "No checkpoint in %s: starting with an empty store", g_cfg.dir);
	uint64_t next_seq = have ? info.next_seq : 0;
	if (!previous) {
		hlog_session_protect(main_sess);
		hlog_session_set_now(main_sess, spw_time_ms());
		ps.replaying = true;
		rc = aof_replay(g_cfg.dir, have ? info.cut : 0, replay_apply, &x, &ps.replay, why, sizeof(why));
		ps.replaying = false;
		hlog_session_unprotect(main_sess);
		if (rc < 0) {
			spw_log(SPW_LOG_WARNING, 0, "Fatal error replaying the AOF: %s. Exiting.",
			        why[0] ? why : spw_strerror(rc));
			goto fail;
		}
		if (ps.replay.torn_bytes)
			spw_log(SPW_LOG_WARNING, 0, "AOF: a torn tail of %" PRIu64 " bytes was cut after a crash",
			        ps.replay.torn_bytes);
		if (ps.replay.groups_cut)
			spw_log(SPW_LOG_WARNING, 0, "AOF: %" PRIu64 " group(s) cut by a torn tail were dropped whole",
			        ps.replay.groups_cut);
		if (ps.replay.files)
			spw_log(SPW_LOG_NOTICE, 0, "AOF replayed: %" PRIu64 " files, %" PRIu64 " records applied "
			        "(%" PRIu64 " groups), %" PRIu64 " already in the checkpoint", ps.replay.files,
			        ps.replay.applied, ps.replay.groups, ps.replay.skipped);
		next_seq = SPW_MAX(next_seq, ps.replay.max_seq + 1);
		/* Page writes the replay's page turns claimed go out only with this session's polls:
		 * move them all on, whatever comes next (nobody else reaps them). */
		while (g_srv.dev && (hlog_session_inflight(main_sess) || hlog_session_unsubmitted(main_sess))) {
			hlog_session_poll(main_sess);
			usleep(200);
		}
	}
	hlog_redo_seq_set(g_srv.store, next_seq);
	bool imported = g_cfg.import_rdb[0] != '\0';
	if (imported && import_run(&x) < 0)
		goto fail;
	if (ps.replay.applied || imported || (previous && have)) {
		/* Note 1: the replayed state becomes a checkpoint before the files are set aside. */
		hlog_ckpt_info ci;
		if (checkpoint_run(main_sess, &ci, previous ? "recovered from the previous checkpoint" :
		                                 imported ? "RDB imported" : "AOF replayed") == 0) {
			int n = aof_remove_all(g_cfg.dir, true);
			if (n < 0)
				spw_log(SPW_LOG_WARNING, -n, "Cannot set the replayed AOF files aside");
		} else {
			/* The replayed files' addresses belong to the last run: they must be covered by a
			 * checkpoint of this state before this run writes anything (note 1). Nothing is lost:
			 * the files and the checkpoint stay as they were for the next start. */
			spw_log(SPW_LOG_WARNING, 0, "Fatal error: the recovered state could not be checkpointed "
			        "(%s); the checkpoint and AOF files are left as they were. Exiting.",
			        ci.why[0] ? ci.why : "see above");
			goto fail;
		}
	} else if (have) {
		pthread_mutex_lock(&ps.lock);
		ps.last = info;
		pthread_mutex_unlock(&ps.lock);
	}
	atomic_store(&g_srv.aof_gen, aof_max_gen(g_cfg.dir) + 1);
	ps.changes_base = changes_total();
	ps.loaded_keys = hlog_key_count(g_srv.store);
	pthread_mutex_lock(&ps.lock);
	atomic_store(&g_srv.loading, 0);
	pthread_cond_broadcast(&ps.cond);
	pthread_mutex_unlock(&ps.lock);
	if (mon_started)
		pthread_join(mon, NULL);
	spw_log(SPW_LOG_NOTICE, 0, "DB loaded from disk: %.3f seconds", (double)(spw_mono_ns() - t0) / 1e9);
	return 0;
fail:
	pthread_mutex_lock(&ps.lock);
	atomic_store(&g_srv.loading, 0);
	pthread_cond_broadcast(&ps.cond);
	pthread_mutex_unlock(&ps.lock);
	if (mon_started)
		pthread_join(mon, NULL);
	return -1;
}

/* ---------------- the saver ---------------- */

/* What is due now (under ps.lock): a WHY_* or WHY_NONE. */
static int saver_due(int64_t now)
{
	if (ps.save_asked > ps.save_done)
		return WHY_SAVE;
	if (ps.bgsave_asked)
		return WHY_BGSAVE;
	if (ps.aof_on_pending && atomic_load(&g_srv.aof_writers) >= g_srv.nworkers)
		return WHY_AOF_ON;
	if (ps.last_rc != 0 && now - ps.last_try_ms < CKPT_RETRY_MS)
		return WHY_NONE;   /* note 3 */
	uint64_t changes = changes_total() - ps.changes_base;
	int64_t since = now - ps.lastsave_ms;
	int interval = __atomic_load_n(&g_cfg.checkpoint_interval, __ATOMIC_RELAXED);
	if (interval > 0 && changes > 0 && since >= (int64_t)interval * 1000)
		return WHY_INTERVAL;
	save_rules r;
	config_save_rules(&r);
	for (int i = 0; i < r.n; i++)
		if (changes >= (uint64_t)r.r[i].changes && since > r.r[i].seconds * 1000)
			return WHY_RULE;
	return WHY_NONE;
}

static void *saver_main(void *arg)
{
	hlog_session *s = NULL;
	(void)arg;
	/* Note 7: a checkpoint's CPU (the index image's compression above all) yields to the workers. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), SAVER_NICE) < 0)
		spw_log(SPW_LOG_VERBOSE, errno, "The saver keeps the workers' priority");
	int rc = persist_session_open(&s, NULL, NULL);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "The saver cannot open a store session: %s; no checkpoints until "
		        "restart", spw_strerror(rc));
		return NULL;
	}
	pthread_mutex_lock(&ps.lock);
	while (!ps.stop) {
		int64_t now = spw_time_ms();
		int why = saver_due(now);
		if (why == WHY_NONE) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += SAVER_WAIT_MS / 1000;
			pthread_cond_timedwait(&ps.cond, &ps.lock, &ts);
			continue;
		}
		uint64_t serving = ps.save_asked;
		char text[96];
		if (why == WHY_RULE || why == WHY_INTERVAL)
			snprintf(text, sizeof(text), "%s: %" PRIu64 " changes in %lld seconds", why_names[why],
			         changes_total() - ps.changes_base, (long long)((now - ps.lastsave_ms) / 1000));
		else
			snprintf(text, sizeof(text), "%s", why_names[why]);
		ps.bgsave_asked = false;
		if (why == WHY_AOF_ON)
			ps.aof_on_pending = false;
		ps.running = true;
		ps.run_start_ms = now;
		pthread_mutex_unlock(&ps.lock);

		hlog_ckpt_info ci;
		rc = checkpoint_run(s, &ci, text);

		pthread_mutex_lock(&ps.lock);
		ps.running = false;
		if (serving > ps.save_done) {
			ps.save_done = serving;
			ps.save_rc = rc;
			pthread_mutex_unlock(&ps.lock);
			server_wake_saves();   /* note 4 */
			pthread_mutex_lock(&ps.lock);
		}
	}
	pthread_mutex_unlock(&ps.lock);
	hlog_session_close(s);
	return NULL;
}

int persist_start(void)
{
	pthread_mutex_lock(&ps.lock);
	ps.aof_was_on = g_cfg.aof;
	ps.stop = false;
	pthread_mutex_unlock(&ps.lock);
	int rc = pthread_create(&ps.thread, NULL, saver_main, NULL);
	pthread_mutex_lock(&ps.lock);
	if (rc) {
		/* A SAVE taken before this (persist_save_request) gets its answer: failed. */
		ps.start_failed = true;
		if (ps.save_asked > ps.save_done) {
			ps.save_done = ps.save_asked;
			ps.save_rc = -rc;
		}
	} else {
		ps.started = true;
	}
	pthread_mutex_unlock(&ps.lock);
	if (rc) {
		spw_log(SPW_LOG_WARNING, rc, "Cannot start the saver thread");
		server_wake_saves();
		return -1;
	}
	return 0;
}

int persist_stop(bool save)
{
	int rc = 0;
	if (ps.started) {
		pthread_mutex_lock(&ps.lock);
		ps.stop = true;
		pthread_cond_broadcast(&ps.cond);
		pthread_mutex_unlock(&ps.lock);
		pthread_join(ps.thread, NULL);   /* a checkpoint it runs completes first (note 6) */
		ps.started = false;
	}
	if (save && main_sess) {
		hlog_ckpt_info ci;
		spw_log(SPW_LOG_NOTICE, 0, "Saving the final checkpoint.");
		rc = checkpoint_run(main_sess, &ci, "shutdown") == 0 ? 0 : -1;
		if (rc < 0)
			spw_log(SPW_LOG_WARNING, 0, "Error trying to save the DB: exiting with status 1; the next "
			        "start recovers the last checkpoint%s", __atomic_load_n(&g_cfg.aof, __ATOMIC_RELAXED) ?
			        " and replays the AOF (nothing acknowledged is lost)" :
			        " (without the AOF, the writes since it are lost)");
	}
	if (main_sess) {
		hlog_session_close(main_sess);
		main_sess = NULL;
	}
	return rc;
}

int persist_config_changed(void)
{
	int rc = 0;
	if (!ps.started)
		return 0;   /* start-up: the options are read before anything runs */
	pthread_mutex_lock(&ps.lock);
	bool on = __atomic_load_n(&g_cfg.aof, __ATOMIC_RELAXED);
	if (on && !ps.aof_was_on) {
		rc = aof_dir_prepare(g_cfg.dir);
		if (rc == 0)
			rc = aof_sync_thread_start();
		if (rc < 0) {
			/* CONFIG SET answers Redis's error and puts appendonly back (config.c note 5). */
			spw_log(SPW_LOG_WARNING, -rc, "AOF turned on: cannot prepare %s/%s", g_cfg.dir, AOF_DIR_NAME);
			pthread_mutex_unlock(&ps.lock);
			return rc;
		}
		atomic_fetch_add(&g_srv.aof_gen, 1);   /* a new generation: the last one's files may exist */
		ps.aof_on_pending = true;   /* note 5 */
		spw_log(SPW_LOG_NOTICE, 0, "AOF turned on: a checkpoint follows once every worker writes it");
	}
	ps.aof_was_on = on;
	pthread_cond_broadcast(&ps.cond);
	pthread_mutex_unlock(&ps.lock);
	server_wake_all();   /* workers open or close their writers, or change the fsync mode */
	return 0;
}

/* ---------------- requests ---------------- */

int persist_bgsave(void)
{
	int rc = 0;
	pthread_mutex_lock(&ps.lock);
	if (ps.running || ps.bgsave_asked || ps.save_asked > ps.save_done) {
		rc = -EBUSY;
	} else {
		ps.bgsave_asked = true;
		pthread_cond_broadcast(&ps.cond);
	}
	pthread_mutex_unlock(&ps.lock);
	if (rc == 0)
		spw_log(SPW_LOG_NOTICE, 0, "Background saving started");
	return rc;
}

int persist_save_request(uint64_t *ticket)
{
	int rc = 0;
	pthread_mutex_lock(&ps.lock);
	/* Before the saver has started (the workers serve from the end of loading on, a moment before
	 * persist_start) a SAVE waits for it: it runs the ticket first. After a stop, or a saver that
	 * could not start, there is nobody to run it. */
	if (ps.running || (!ps.started && (ps.stop || ps.start_failed))) {
		rc = -EBUSY;
	} else {
		*ticket = ++ps.save_asked;
		pthread_cond_broadcast(&ps.cond);
	}
	pthread_mutex_unlock(&ps.lock);
	return rc;
}

bool persist_save_done(uint64_t ticket, int *rc)
{
	bool done;
	pthread_mutex_lock(&ps.lock);
	done = ticket <= ps.save_done;
	if (done)
		*rc = ps.save_rc;
	pthread_mutex_unlock(&ps.lock);
	return done;
}

int64_t persist_lastsave(void)
{
	pthread_mutex_lock(&ps.lock);
	int64_t t = ps.lastsave_ms / 1000;
	pthread_mutex_unlock(&ps.lock);
	return t;
}

/* ---------------- INFO ---------------- */

/* # Persistence: Redis 7.0's fields in its order (what has no counterpart here is 0, as a Redis
 * that never forked), then the loading progress while loading, then the checkpoint's own. */
void persist_info(struct sbuf *b)
{
	int loading = atomic_load(&g_srv.loading);
	uint64_t changes = loading ? 0 : changes_total();
	int64_t now = spw_time_ms();

	pthread_mutex_lock(&ps.lock);
	bool running = ps.running;
	int64_t cur = running ? (now - ps.run_start_ms) / 1000 : -1;
	int last_rc = ps.last_rc;
	hlog_ckpt_info last = ps.last;
	int64_t lastsave = ps.lastsave_ms / 1000, last_time = ps.last_time_sec;
	uint64_t saves = ps.saves, failures = ps.failures, base = ps.changes_base;
	char why[sizeof(ps.last_why)];
	memcpy(why, ps.last_why, sizeof(why));
	pthread_mutex_unlock(&ps.lock);

	sb_printf(b, "# Persistence\r\n"
	          "loading:%d\r\n"
	          "async_loading:0\r\n"
	          "current_cow_peak:0\r\n"
	          "current_cow_size:0\r\n"
	          "current_cow_size_age:0\r\n"
	          "current_fork_perc:0.00\r\n"
	          "current_save_keys_processed:0\r\n"
	          "current_save_keys_total:0\r\n"
	          "rdb_changes_since_last_save:%" PRIu64 "\r\n"
	          "rdb_bgsave_in_progress:%d\r\n"
	          "rdb_last_save_time:%lld\r\n"
	          "rdb_last_bgsave_status:%s\r\n"
	          "rdb_last_bgsave_time_sec:%lld\r\n"
	          "rdb_current_bgsave_time_sec:%lld\r\n"
	          "rdb_saves:%" PRIu64 "\r\n"
	          "rdb_last_cow_size:0\r\n"
	          "rdb_last_load_keys_expired:0\r\n"
	          "rdb_last_load_keys_loaded:%" PRIu64 "\r\n"
	          "aof_enabled:%d\r\n"
	          "aof_rewrite_in_progress:0\r\n"
	          "aof_rewrite_scheduled:0\r\n"
	          "aof_last_rewrite_time_sec:-1\r\n"
	          "aof_current_rewrite_time_sec:-1\r\n"
	          "aof_last_bgrewrite_status:ok\r\n"
	          "aof_rewrites:0\r\n"
	          "aof_rewrites_consecutive_failures:0\r\n"
	          "aof_last_write_status:%s\r\n"
	          "aof_last_cow_size:0\r\n"
	          "module_fork_in_progress:0\r\n"
	          "module_fork_last_cow_size:0\r\n",
	          loading, changes > base ? changes - base : 0, running ? 1 : 0, (long long)lastsave,
	          last_rc ? "err" : "ok", (long long)last_time, (long long)cur, saves,
	          ps.loaded_keys, __atomic_load_n(&g_cfg.aof, __ATOMIC_RELAXED) ? 1 : 0,
	          atomic_load(&g_srv.aof_write_err) ? "err" : "ok");
	if (loading) {
		uint64_t done, total;
		loading_progress(&done, &total);
		double secs = (double)(now / 1000 - ps.loading_start_s);
		double rate = secs > 0 ? (double)done / secs : 0;
		long long eta = rate > 0 && total > done ? (long long)((double)(total - done) / rate) : 1;
		sb_printf(b, "loading_start_time:%lld\r\n"
		          "loading_total_bytes:%" PRIu64 "\r\n"
		          "loading_loaded_bytes:%" PRIu64 "\r\n"
		          "loading_loaded_perc:%.2f\r\n"
		          "loading_eta_seconds:%lld\r\n",
		          (long long)ps.loading_start_s, total, done,
		          total ? 100.0 * (double)done / (double)total : 0.0, eta);
	}
	sb_printf(b, "checkpoint_last_id:%" PRIu64 "\r\n"
	          "checkpoint_last_cut:%" PRIu64 "\r\n"
	          "checkpoint_last_keys:%" PRIu64 "\r\n"
	          "checkpoint_last_bytes:%" PRIu64 "\r\n"
	          "checkpoint_last_duration_us:%" PRIu64 "\r\n"
	          "checkpoint_failures:%" PRIu64 "\r\n"
	          "checkpoint_last_error:%s\r\n"
	          "aof_replayed_records:%" PRIu64 "\r\n"
	          "aof_torn_bytes:%" PRIu64 "\r\n"
	          "aof_replayed_groups:%" PRIu64 "\r\n"
	          "aof_groups_cut:%" PRIu64 "\r\n",
	          last.id, last.cut, last.keys, last.index_bytes, last.duration_us, failures, why,
	          ps.replay.applied, ps.replay.torn_bytes, ps.replay.groups, ps.replay.groups_cut);
}
