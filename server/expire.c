/*
 * expire.c - the expirer: a background thread that runs Redis's active expire cycle (Redis's
 * expire.c, activeExpireCycle, the slow cycle) over the store's index with its own store session,
 * and the INFO fields of it. One step of a cycle is the log's (hlog_expire_step, log/expire.c):
 * it walks index buckets from a cursor, samples the keys with an expiry whose newest version is in
 * memory and removes the expired ones as a read that met them would.
 *
 * Sections: state / the cycle / the thread / INFO.
 *
 * Design notes:
 *  1. Redis's cycle, adapted to one index that holds every key (Redis walks a dict of the keys
 *     with a TTL only). Every EXPIRE_PERIOD_MS (Redis's hz 10) a cycle runs loops; a loop runs
 *     steps until it sampled EXPIRE_KEYS_PER_LOOP keys with an expiry or walked its bucket quota,
 *     and the cycle runs another loop while more than EXPIRE_ACCEPTABLE_STALE percent of the
 *     loop's sampled keys were expired, while its CPU budget is left (EXPIRE_CPU_PERC of a core:
 *     25 ms of the thread's own CPU time per 100 ms, CLOCK_THREAD_CPUTIME_ID), and until it has
 *     covered the whole index once. The cursor is kept across cycles, so every bucket is visited
 *     in turn. A store without any key with an expiry costs nothing (hlog_expires_count).
 *  2. The bucket quota. Redis's loop stops after 20 buckets per key it looks for (400), its dict
 *     holding only keys with a TTL. Here buckets also hold keys without one, so the quota is the
 *     number of buckets where EXPIRE_KEYS_PER_LOOP keys with an expiry are expected (buckets over
 *     keys with an expiry, times 20), at least Redis's 400 and at most EXPIRE_LOOP_BUCKETS_MAX, so
 *     that a loop stays short where keys with a TTL are rare among many without. A loop that
 *     sampled nothing repeats only when the last cycle found its samples stale: Redis always
 *     repeats there, its empty buckets holding no key at all, but ours may hold many keys without a
 *     TTL, and an idle store would spend its CPU budget walking them. After a stale cycle, though,
 *     the few expired keys left are sparse (the index does not shrink as Redis's dict does), and
 *     stopping at the first empty loop would leave them for as many cycles as the index has
 *     quotas; so such a cycle walks on, within its budget and one round of the index.
 *  3. The session. The expirer's store session is the server's one beyond the workers, the saver
 *     and the main thread (start.c sizes max_sessions). It is protected around each step only and
 *     its clock is set before each. With a storage tier it is attached on this thread (its
 *     removals append tombstones, whose page turns may claim page writes on this session): it is
 *     polled after every step, and between cycles it sleeps on its device fd while any of its IO
 *     is in flight (a worker's rules, worker.c note 6), so a page write it claimed never waits for
 *     the next cycle. The session has no redo hook: a removal by the expirer writes no AOF record.
 *     Replay after a crash may bring back a key that had expired and been removed (its SET and
 *     absolute expiry are in the AOF): it is expired there too, so no read returns it, and the
 *     expirer removes it again.
 *  4. Statistics (INFO # Stats, where Redis 7.0 prints them): expired_keys counts both removals,
 *     lazy and active, since both are the store's (the session counter expired_keys);
 *     expired_stale_perc is Redis's running estimate, each cycle's expired / sampled averaged as
 *     0.05 * this cycle + 0.95 * before; expired_time_cap_reached_count the cycles stopped by the
 *     CPU budget; expire_cycle_cpu_milliseconds the CPU time the cycles used. CONFIG RESETSTAT
 *     zeroes the three, as in Redis. All under ex.lock (written once per cycle).
 *  5. The thread runs at nice EXPIRER_NICE, as the saver (persist.c note 7): background work that
 *     yields to the workers on a machine with no idle core; the CPU budget is the thread's own
 *     CPU time, so a lower priority stretches a cycle in time, not in work.
 */
#include "server/server_int.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPIRE_PERIOD_MS        100      /* Redis's hz 10 */
#define EXPIRE_KEYS_PER_LOOP    20       /* ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP */
#define EXPIRE_ACCEPTABLE_STALE 10       /* ACTIVE_EXPIRE_CYCLE_ACCEPTABLE_STALE, percent */
#define EXPIRE_CPU_PERC         25       /* ACTIVE_EXPIRE_CYCLE_SLOW_TIME_PERC */
#define EXPIRE_STEP_BUCKETS     16       /* buckets per hlog_expire_step */
#define EXPIRE_LOOP_BUCKETS_MIN 400      /* Redis's quota: 20 buckets per key looked for (note 2) */
#define EXPIRE_LOOP_BUCKETS_MAX 4000
#define EXPIRE_IO_WAIT_MS       10       /* the longest sleep on the device fd while IO is in flight */
#define EXPIRER_NICE            10       /* note 5 */

/* ---------------- state ---------------- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stop;
	uint64_t cursor;                  /* the expirer's own: where the next step starts */
	bool was_stale;                   /* the expirer's own: the last cycle's samples were stale */
	/* note 4, under lock */
	double stale;                     /* expired_stale_perc / 100 */
	uint64_t cap_reached;
	uint64_t cpu_ns;
} ex = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---------------- the cycle (notes 1 and 2) ---------------- */

/* One step, the session protected around it only, then polled (note 3). */
static void expire_step(hlog_session *s, hlog_expire_stats *st)
{
	hlog_session_protect(s);
	hlog_session_set_now(s, spw_time_ms());
	ex.cursor = hlog_expire_step(s, ex.cursor, EXPIRE_STEP_BUCKETS, st);
	hlog_session_unprotect(s);
	if (g_srv.dev)
		hlog_session_poll(s);
}

/* The bucket quota of one loop (note 2). */
static uint64_t expire_loop_quota(uint64_t buckets, uint64_t expires)
{
	uint64_t q = expires ? buckets / expires * EXPIRE_KEYS_PER_LOOP : EXPIRE_LOOP_BUCKETS_MAX;
	return SPW_MIN(SPW_MAX(q, (uint64_t)EXPIRE_LOOP_BUCKETS_MIN), (uint64_t)EXPIRE_LOOP_BUCKETS_MAX);
}

/* One loop: steps until EXPIRE_KEYS_PER_LOOP keys with an expiry were sampled, quota buckets or the
 * left buckets of this cycle's round were walked. */
static void expire_loop(hlog_session *s, uint64_t quota, uint64_t left, hlog_expire_stats *st)
{
	memset(st, 0, sizeof(*st));
	while (st->sampled < EXPIRE_KEYS_PER_LOOP && st->buckets < quota && st->buckets < left)
		expire_step(s, st);
}

/* Whether more than EXPIRE_ACCEPTABLE_STALE percent of sampled keys were expired. */
static bool stale_above(uint64_t expired, uint64_t sampled)
{
	return sampled && expired * 100 > sampled * EXPIRE_ACCEPTABLE_STALE;
}

/* One cycle: loops while the sampled keys are stale, within the CPU budget (note 1). */
static void expire_cycle(hlog_session *s)
{
	uint64_t t0 = thread_cpu_ns();
	uint64_t budget = (uint64_t)EXPIRE_PERIOD_MS * 1000000ULL * EXPIRE_CPU_PERC / 100;
	uint64_t buckets = hlog_scan_cursor_end(g_srv.store);
	uint64_t expires = hlog_expires_count(g_srv.store);
	uint64_t sampled = 0, expired = 0, walked = 0;
	bool capped = false;

	if (expires && !atomic_load(&g_srv.loading)) {
		uint64_t quota = expire_loop_quota(buckets, expires);
		bool repeat;
		do {
			hlog_expire_stats st;
			expire_loop(s, quota, buckets - walked, &st);
			walked += st.buckets;
			sampled += st.sampled;
			expired += st.expired;
			if (thread_cpu_ns() - t0 > budget) {
				capped = true;
				break;
			}
			repeat = walked < buckets &&
			         (st.sampled ? stale_above(st.expired, st.sampled) : ex.was_stale);
		} while (repeat);
	}
	ex.was_stale = stale_above(expired, sampled);
	uint64_t used = thread_cpu_ns() - t0;
	double perc = sampled ? (double)expired / (double)sampled : 0.0;
	pthread_mutex_lock(&ex.lock);
	ex.cpu_ns += used;
	ex.cap_reached += capped;
	ex.stale = perc * 0.05 + ex.stale * 0.95;
	pthread_mutex_unlock(&ex.lock);
}

/* ---------------- the thread ---------------- */

static void expirer_ready(void *cb_arg, void *op_ctx)
{
	(void)cb_arg;
	(void)op_ctx;   /* the steps release their reads at once: nothing is ever parked */
}

/* Sleep until until_ms (wall clock) or a stop; with a device, poll the session meanwhile and sleep
 * on its fd while its IO is in flight (note 3). false when asked to stop. */
static bool expirer_sleep(hlog_session *s, int fd, int64_t until_ms)
{
	for (;;) {
		bool busy = false, now_again = false;
		if (g_srv.dev) {
			hlog_session_poll(s);
			now_again = hlog_session_unsubmitted(s);
			busy = hlog_session_inflight(s) > 0 || hlog_session_tick(s);
		}
		pthread_mutex_lock(&ex.lock);
		bool stop = ex.stop;
		int64_t left = until_ms - spw_time_ms();
		if (stop || left <= 0) {
			pthread_mutex_unlock(&ex.lock);
			return !stop;
		}
		if (now_again) {
			pthread_mutex_unlock(&ex.lock);
			continue;
		}
		if (busy && fd >= 0) {
			pthread_mutex_unlock(&ex.lock);
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			if (poll(&pfd, 1, (int)SPW_MIN(left, (int64_t)EXPIRE_IO_WAIT_MS)) > 0) {
				uint64_t v;
				ssize_t r = read(fd, &v, sizeof(v));
				(void)r;
			}
			continue;
		}
		if (busy)
			left = 1;   /* a tick: nothing of ours will signal (hlog_session_tick) */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)left * 1000000ULL;
		ts.tv_sec += (time_t)(ns / 1000000000ULL);
		ts.tv_nsec = (long)(ns % 1000000000ULL);
		pthread_cond_timedwait(&ex.cond, &ex.lock, &ts);
		pthread_mutex_unlock(&ex.lock);
	}
}

static void *expirer_main(void *arg)
{
	hlog_session *s = NULL;
	(void)arg;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), EXPIRER_NICE) < 0)
		spw_log(SPW_LOG_VERBOSE, errno, "The expirer keeps the workers' priority");
	int rc = hlog_session_open(g_srv.store, &s);
	if (rc == 0 && g_srv.dev && (rc = hlog_session_attach(s, expirer_ready, NULL)) < 0) {
		hlog_session_close(s);
		s = NULL;
	}
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "The expirer cannot open a store session: %s; expired keys are "
		        "removed only when read", spw_strerror(rc));
		return NULL;
	}
	int fd = g_srv.dev ? hlog_session_fd(s) : -1;
	int64_t next = spw_time_ms();
	for (;;) {
		next += EXPIRE_PERIOD_MS;
		if (!expirer_sleep(s, fd, next))
			break;
		int64_t now = spw_time_ms();
		if (next < now - EXPIRE_PERIOD_MS)
			next = now;   /* late (a stopped process, a clock step): no burst of cycles */
		expire_cycle(s);
	}
	hlog_session_close(s);   /* on this thread: it closes the device queue (hlog.h) */
	return NULL;
}

int expire_start(void)
{
	pthread_mutex_lock(&ex.lock);
	ex.stop = false;
	pthread_mutex_unlock(&ex.lock);
	int rc = pthread_create(&ex.thread, NULL, expirer_main, NULL);
	if (rc) {
		spw_log(SPW_LOG_WARNING, rc, "Cannot start the expirer thread");
		return -1;
	}
	ex.started = true;
	return 0;
}

void expire_stop(void)
{
	if (!ex.started)
		return;
	pthread_mutex_lock(&ex.lock);
	ex.stop = true;
	pthread_cond_broadcast(&ex.cond);
	pthread_mutex_unlock(&ex.lock);
	pthread_join(ex.thread, NULL);
	ex.started = false;
}

/* ---------------- INFO (note 4) ---------------- */

void expire_info(sbuf *b)
{
	pthread_mutex_lock(&ex.lock);
	double stale = ex.stale;
	uint64_t cap = ex.cap_reached, ms = ex.cpu_ns / 1000000ULL;
	pthread_mutex_unlock(&ex.lock);
	sb_printf(b, "expired_stale_perc:%.2f\r\n"
	          "expired_time_cap_reached_count:%llu\r\n"
	          "expire_cycle_cpu_milliseconds:%llu\r\n",
	          stale * 100, (unsigned long long)cap, (unsigned long long)ms);
}

void expire_stats_reset(void)
{
	pthread_mutex_lock(&ex.lock);
	ex.stale = 0;
	ex.cap_reached = 0;
	ex.cpu_ns = 0;
	pthread_mutex_unlock(&ex.lock);
}
