/*
 * bench_main.c - spillway-bench: a RESP load generator with Garnet Resp.benchmark's flags.
 *
 *   spillway-bench [--host H] [--port P] [--password PW] [--client native|inproc]
 *                  [--op GET|SET|MGET|MSET|INCR|DEL|EXISTS|PING|HGET|HSET] [--dbsize N] [--keylength K]
 *                  [--valuelength V] [--fields F] [--runtime S] [-t 1,2,4] [-b 1,16,256] [-s] [--zipf [THETA]]
 *                  [--online --op-workload GET,SET --op-percent 80,20 --itp K [--rate R[,R2..]]]
 *                  [--conns-per-thread C] [--csv FILE] [--json FILE] [--plot FILE.png]
 *                  [--server-pid PID] [--seed N] [--memory --page --index --mutable-percent]
 *
 * Design notes:
 *  1. Phases. Unless -s, a load phase first writes keys 0..dbsize-1 with their deterministic values
 *     (SET pipelines when --op SET, one HSET of all --fields per key when the workload has HGET or
 *     HSET, else MSET commands), split over the largest -t. --runtime 0
 *     stops there. Then either offline rows (one per (threads, batch) pair of the -t and -b lists)
 *     or online rows (one per threads value, and per --rate value when rates are given).
 *  2. One row = one bench_run: worker threads set up everything they need (connections, batches,
 *     buffers) and wait on a barrier; the clock and the server CPU reading start when all are
 *     ready; the main thread then only sleeps, reports, and finally sets run->stop. A worker that
 *     fails to set up aborts the row before anything is measured. run_row's steps, in order:
 *     run_init, run_workers_alloc, run_start (threads and the gate), run_wait, run_stop (join and
 *     gather), row_fill, row_report, run_free.
 *  3. Online reporting without sharing counters: every 2 s the main thread bumps run->epoch; each
 *     worker, between rounds, swaps its two histograms and publishes the full one
 *     (bench_worker_publish); the main thread merges what was published into the interval and
 *     the total, then marks it consumed, and only then may the worker reuse it. A worker that
 *     is late publishes in a later interval; nothing is lost or read while written.
 *  4. Throughput is the ops completed divided by the time from the start to the last worker's stop.
 *     Ops are requests, except MGET/MSET, which count their keys (as Resp.benchmark's batch size).
 *  5. Server CPU (--server-pid) is utime+stime of /proc/PID/stat before the start and after the stop
 *     (clock ticks, usually 10 ms: use runs of seconds); with --client inproc the workers' own
 *     thread CPU is the store's CPU.
 *  6. Exit status: 0 when every row ran and every reply checked out; 1 when a row failed or a reply
 *     check failed (so scripts cannot take a broken server's number); 2 for usage errors.
 */
#include "bench/bench_int.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log/hlog.h"

#define LOAD_RT_BYTES (4u << 20)          /* a load round trip carries about this much */
#define OFFLINE_BATCH_BYTES (8u << 20)    /* pre-built batches per worker, at most */
#define OFFLINE_BATCH_KEYS (1u << 18)     /* ... drawing about this many keys */
#define REPORT_WAIT_NS 500000000ULL       /* how long the reporter waits for late workers */

static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	g_interrupted = 1;
}

/* ---------------- runs ---------------- */

bool bench_worker_ready(bench_worker *w, int err)
{
	bench_run *r = w->run;
	if (err < 0 && !w->err)
		bench_worker_fail(w, err, "setup failed: %s", spw_strerror(err));
	/* Paced workers sleep until each send time: the default 50 us timer slack would add to every
	 * measured latency (slack is per thread). */
	if (r->rate > 0)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	pthread_mutex_lock(&r->mu);
	r->nready++;
	pthread_cond_broadcast(&r->cv);
	while (!r->go)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	return !atomic_load(&r->abort) && !w->err;
}

void bench_worker_fail(bench_worker *w, int err, const char *fmt, ...)
{
	if (w->err)
		return;
	w->err = err < 0 ? err : -EIO;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->errmsg, sizeof(w->errmsg), fmt, ap);
	va_end(ap);
}

uint32_t bench_offline_batch_count(const bench_keyspace *ks, int op, uint32_t batch)
{
	size_t bytes = bench_op_multi(op) ? bench_req_size(ks, op, batch) : (size_t)batch * bench_req_size(ks, op, 1);
	/* Draw about OFFLINE_BATCH_KEYS keys whatever the key space: a small one is then covered many
	 * times over (every key is exercised and checked), a large one sampled evenly. */
	uint64_t n = (OFFLINE_BATCH_KEYS + batch - 1) / batch;
	n = SPW_MAX(n, 2u);
	n = SPW_MIN(n, 4096u);
	if (n * bytes > OFFLINE_BATCH_BYTES)
		n = SPW_MAX((uint64_t)1, OFFLINE_BATCH_BYTES / bytes);
	return (uint32_t)n;
}

typedef struct bench_ctx {
	const bench_opts *o;
	const bench_keyspace *ks;
	hlog *store;
	bool tty;
	bench_row *rows;
	int nrows, rows_cap;
	bool any_failure;
	bool header_printed;
} bench_ctx;

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };
	nanosleep(&ts, NULL);
}

/* Online: ask every worker for its interval, merge what they publish (note 3). */
static void run_collect(bench_run *r, bench_hist *interval, bench_hist *total, bool ask)
{
	uint64_t e = ask ? atomic_fetch_add(&r->epoch, 1) + 1 : atomic_load(&r->epoch);
	uint64_t deadline = spw_mono_ns() + (ask ? REPORT_WAIT_NS : 0);
	for (;;) {
		bool all = true;
		for (int i = 0; i < r->threads; i++) {
			bench_worker *w = &r->w[i];
			uint64_t p = atomic_load_explicit(&w->pub_epoch, memory_order_acquire);
			if (p != atomic_load_explicit(&w->consumed, memory_order_relaxed)) {
				if (interval)
					bench_hist_merge(interval, &w->h[w->pub_idx]);
				bench_hist_merge(total, &w->h[w->pub_idx]);
				atomic_store_explicit(&w->consumed, p, memory_order_release);
			}
			if (p != e && !atomic_load(&w->done))
				all = false;
		}
		if (all || spw_mono_ns() >= deadline)
			return;
		sleep_ns(1000000);
	}
}

static void row_op_name(const bench_opts *o, int mode, char *buf, size_t n)
{
	if (mode != BENCH_MODE_ONLINE || o->nwl == 1) {
		int op = mode == BENCH_MODE_ONLINE ? o->wl_op[0] : o->op;
		if (mode == BENCH_MODE_LOAD && o->hash_keys)
			op = BENCH_OP_HSET;
		else if (mode == BENCH_MODE_LOAD)   /* the in-process load upserts key by key: "SET" */
			op = o->op == BENCH_OP_SET || o->client == BENCH_CLIENT_INPROC ? BENCH_OP_SET : BENCH_OP_MSET;
		snprintf(buf, n, "%s", bench_op_name(op));
		return;
	}
	size_t at = 0;
	for (int i = 0; i < o->nwl && at < n; i++)
		at += (size_t)snprintf(buf + at, n - at, "%s%s:%d", i ? "," : "", bench_op_name(o->wl_op[i]), o->wl_pct[i]);
}

static double ns_to_us(int64_t ns)
{
	return (double)ns / 1e3;
}

/* What a row's workers leave behind, gathered once they are joined. */
typedef struct run_result {
	bench_check check;            /* the workers' reply checks, merged */
	uint64_t t_end_ns;            /* the last worker's stop */
	double thread_cpu;            /* inproc: the workers' CPU seconds */
	int64_t cpu0, cpu1;           /* --server-pid: the server's CPU ticks at the start and the stop */
	bool failed;
} run_result;

/* The run's parameters, its workload thresholds, and whether a nil reply is allowed (DEL runs). */
static void run_init(bench_run *r, const bench_ctx *ctx, int mode, int threads, int batch, double rate)
{
	const bench_opts *o = ctx->o;
	memset(r, 0, sizeof(*r));
	r->o = o;
	r->ks = ctx->ks;
	r->mode = mode;
	r->threads = threads;
	r->batch = batch;
	r->conns = o->conns;
	r->itp = o->itp;
	r->rate = rate;
	r->store = ctx->store;
	r->nwl = o->nwl;
	uint32_t cum = 0;
	for (int i = 0; i < o->nwl; i++) {
		r->wl_op[i] = o->wl_op[i];
		cum += (uint32_t)o->wl_pct[i];
		r->wl_cum[i] = cum;
	}
	bool deletes = false;
	for (int i = 0; i < o->nwl && mode == BENCH_MODE_ONLINE; i++)
		deletes |= o->wl_op[i] == BENCH_OP_DEL;
	deletes |= mode == BENCH_MODE_OFFLINE && o->op == BENCH_OP_DEL;
	r->allow_missing = deletes;
}

/* The workers' slots: seeds, load key ranges, histograms. 0 or -ENOMEM (run_free cleans up). */
static int run_workers_alloc(bench_run *r, const bench_ctx *ctx)
{
	r->w = calloc((size_t)r->threads, sizeof(*r->w));
	if (!r->w)
		return -ENOMEM;
	for (int i = 0; i < r->threads; i++) {
		bench_worker *w = &r->w[i];
		w->run = r;
		w->idx = i;
		bench_rng_seed(&w->rng, ctx->o->seed * 0x100000001b3ULL + (uint64_t)ctx->nrows * 7919 + (uint64_t)i);
		w->check.allow_missing = r->allow_missing;
		w->lo = ctx->ks->dbsize * (uint64_t)i / (uint64_t)r->threads;
		w->hi = ctx->ks->dbsize * (uint64_t)(i + 1) / (uint64_t)r->threads;
		if (r->mode != BENCH_MODE_LOAD &&
		    (bench_hist_init(&w->h[0], BENCH_HIST_LOWEST, BENCH_HIST_HIGHEST, BENCH_HIST_SIGFIGS) < 0 ||
		     bench_hist_init(&w->h[1], BENCH_HIST_LOWEST, BENCH_HIST_HIGHEST, BENCH_HIST_SIGFIGS) < 0))
			return -ENOMEM;
	}
	return 0;
}

/* Start the worker threads and release them together (note 2): every started worker is set up,
 * then the clock starts. Returns the threads started (fewer aborts the run). */
static int run_start(bench_run *r, run_result *res)
{
	void *(*fn)(void *) = r->o->client == BENCH_CLIENT_INPROC ? bench_inproc_worker : bench_net_worker;
	int created = 0;
	for (; created < r->threads; created++) {
		if (pthread_create(&r->w[created].tid, NULL, fn, &r->w[created]) != 0) {
			fprintf(stderr, "spillway-bench: cannot start thread %d of %d\n", created + 1, r->threads);
			atomic_store(&r->abort, true);
			break;
		}
	}
	pthread_mutex_lock(&r->mu);
	while (r->nready < created)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	for (int i = 0; i < created; i++)
		if (r->w[i].err)
			atomic_store(&r->abort, true);
	if (g_interrupted)
		atomic_store(&r->abort, true);
	res->cpu0 = r->o->server_pid ? bench_proc_cpu_ticks(r->o->server_pid) : 0;
	pthread_mutex_lock(&r->mu);
	r->t_start_ns = spw_mono_ns();
	r->go = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return created;
}

/* The main thread while the row runs: sleep, and every report period print an online interval
 * (note 3) or the load's progress, until the runtime is up, every worker is done or Ctrl-C. */
static void run_wait(bench_run *r, const bench_ctx *ctx, bench_hist *interval, bench_hist *total)
{
	const bench_opts *o = r->o;
	int mode = r->mode;
	bool online = mode == BENCH_MODE_ONLINE;
	bool bar = mode == BENCH_MODE_LOAD && ctx->tty;   /* a terminal's bar moves every 200 ms */
	uint64_t t0 = r->t_start_ns, next_report = t0 + (bar ? 200000000ULL : BENCH_REPORT_NS);
	uint64_t deadline = o->runtime > 0 ? t0 + (uint64_t)(o->runtime * 1e9) : UINT64_MAX;
	uint64_t last_report = t0;
	if (online && !o->quiet)
		bench_interval_header(stdout);
	for (;;) {
		uint64_t now = spw_mono_ns();
		bool all_done = true;
		for (int i = 0; i < r->threads; i++)
			all_done &= atomic_load(&r->w[i].done);
		if (g_interrupted || all_done || (mode != BENCH_MODE_LOAD && now >= deadline))
			break;
		if (now >= next_report) {
			if (online) {
				bench_hist_reset(interval);
				run_collect(r, interval, total, true);
				uint64_t t = spw_mono_ns();
				if (!o->quiet)
					bench_interval_print(stdout, (double)(t - t0) / 1e9, interval, total->total,
					                     (double)interval->total * 1e9 / (double)(t - last_report));
				last_report = t;
				next_report += BENCH_REPORT_NS;
			} else if (mode == BENCH_MODE_LOAD && !o->quiet) {
				uint64_t done = 0;
				for (int i = 0; i < r->threads; i++)
					done += atomic_load_explicit(&r->w[i].loaded, memory_order_relaxed);
				bench_progress(stderr, ctx->tty, done, ctx->ks->dbsize, (double)(now - t0) / 1e9);
				next_report += bar ? 200000000ULL : BENCH_REPORT_NS;
			} else {
				next_report += BENCH_REPORT_NS;
			}
			continue;
		}
		uint64_t until = SPW_MIN(next_report, deadline);
		sleep_ns(SPW_MIN(until - now, 50000000ULL));
	}
	if (mode == BENCH_MODE_LOAD && ctx->tty && !o->quiet)
		fprintf(stderr, "\n");
}

/* Stop and join the workers, then gather: what was published and not yet merged, then what each
 * worker still holds; ops, the end time, CPU and the first failure go into row and res. */
static void run_stop(bench_run *r, int created, bench_hist *total, bench_row *row, run_result *res)
{
	atomic_store(&r->stop, true);
	for (int i = 0; i < created; i++)
		pthread_join(r->w[i].tid, NULL);
	res->cpu1 = r->o->server_pid ? bench_proc_cpu_ticks(r->o->server_pid) : 0;
	res->t_end_ns = r->t_start_ns;
	res->failed = atomic_load(&r->abort);
	if (r->mode != BENCH_MODE_LOAD)
		run_collect(r, NULL, total, false);
	for (int i = 0; i < created; i++) {
		bench_worker *w = &r->w[i];
		if (r->mode != BENCH_MODE_LOAD)
			bench_hist_merge(total, &w->h[w->cur]);
		bench_check_merge(&res->check, &w->check);
		row->ops += w->ops;
		res->t_end_ns = SPW_MAX(res->t_end_ns, w->t_end_ns);
		res->thread_cpu += w->cpu_s;
		if (w->err) {
			res->failed = true;
			fprintf(stderr, "spillway-bench: thread %d: %s\n", i, w->errmsg);
			if (!row->first[0])
				snprintf(row->first, sizeof(row->first), "%s", w->errmsg);
		}
	}
	if (res->failed && !row->first[0] && g_interrupted)
		snprintf(row->first, sizeof(row->first), "interrupted");
}

/* The row's columns from the run, its latency histogram and its results (note 4, note 5). */
static void row_fill(bench_row *row, const bench_run *r, const bench_hist *total, const run_result *res)
{
	static const char *const mode_names[] = { "load", "offline", "online" };
	const bench_opts *o = r->o;
	int mode = r->mode;
	snprintf(row->mode, sizeof(row->mode), "%s", mode_names[mode]);
	row_op_name(o, mode, row->op, sizeof(row->op));
	row->threads = r->threads;
	row->batch = mode == BENCH_MODE_ONLINE ? 0 : r->batch;
	row->conns = o->client == BENCH_CLIENT_INPROC ? 0 : (mode == BENCH_MODE_LOAD ? 1 : o->conns);
	row->itp = mode == BENCH_MODE_ONLINE ? o->itp : 0;
	row->rate = r->rate > 0 ? r->rate : NAN;
	row->seconds = (double)(res->t_end_ns - r->t_start_ns) / 1e9;
	row->tput = row->seconds > 0 ? (double)row->ops / row->seconds : 0;
	bool lat = mode != BENCH_MODE_LOAD && total->total > 0;
	row->min_us = lat ? ns_to_us(bench_hist_percentile(total, 0)) : NAN;
	row->p5_us = lat ? ns_to_us(bench_hist_percentile(total, 5)) : NAN;
	row->p50_us = lat ? ns_to_us(bench_hist_percentile(total, 50)) : NAN;
	row->avg_us = lat ? bench_hist_mean(total) / 1e3 : NAN;
	row->p95_us = lat ? ns_to_us(bench_hist_percentile(total, 95)) : NAN;
	row->p99_us = lat ? ns_to_us(bench_hist_percentile(total, 99)) : NAN;
	row->p999_us = lat ? ns_to_us(bench_hist_percentile(total, 99.9)) : NAN;
	row->max_us = lat ? ns_to_us(bench_hist_percentile(total, 100)) : NAN;
	row->errors = res->check.errors;
	row->wrong = res->check.wrong;
	row->missing = res->check.missing;
	if (!row->first[0])
		memcpy(row->first, res->check.first, sizeof(row->first));
	row->srv_cpu_s = row->srv_cpu_us_per_op = NAN;
	if (o->client == BENCH_CLIENT_INPROC) {
		row->srv_cpu_s = res->thread_cpu;
	} else if (o->server_pid) {
		if (res->cpu0 >= 0 && res->cpu1 >= 0)
			row->srv_cpu_s = (double)(res->cpu1 - res->cpu0) / (double)sysconf(_SC_CLK_TCK);
		else
			fprintf(stderr, "spillway-bench: cannot read /proc/%d/stat\n", (int)o->server_pid);
	}
	if (!isnan(row->srv_cpu_s) && row->ops)
		row->srv_cpu_us_per_op = row->srv_cpu_s * 1e6 / (double)row->ops;
	row->failed = res->failed;
}

/* Print the row (the header before the first), its reply-check line and, online, its latency
 * distribution; then keep it for --csv, --json and --plot. 0 or -ENOMEM. */
static int row_report(bench_ctx *ctx, const bench_row *row, const bench_run *r, const bench_hist *total,
                      const run_result *res)
{
	const bench_check *check = &res->check;
	if (!ctx->header_printed) {
		bench_row_print_header(stdout);
		ctx->header_printed = true;
	}
	bench_row_print(stdout, row);
	if (bench_check_failures(check) || check->nils)
		printf("  reply check: %llu error replies, %llu wrong, %llu missing%s%llu nil (keys deleted by the "
		       "workload)%s%s\n", (unsigned long long)check->errors, (unsigned long long)check->wrong,
		       (unsigned long long)check->missing, ", ", (unsigned long long)check->nils,
		       check->first[0] ? "; first: " : "", check->first);
	if (r->mode == BENCH_MODE_ONLINE && total->total > 0) {
		printf("  latency distribution (us), %s, %d threads x %d conns x itp %d%s:\n", row->op, r->threads,
		       row->conns, r->o->itp, r->rate > 0 ? ", paced" : "");
		bench_hist_print(total, stdout, 1e3, 5);
	}
	fflush(stdout);
	if (res->failed || bench_check_failures(check))
		ctx->any_failure = true;
	if (ctx->nrows == ctx->rows_cap) {
		int cap = ctx->rows_cap ? 2 * ctx->rows_cap : 16;
		bench_row *nr = realloc(ctx->rows, (size_t)cap * sizeof(*nr));
		if (!nr)
			return -ENOMEM;
		ctx->rows = nr;
		ctx->rows_cap = cap;
	}
	ctx->rows[ctx->nrows++] = *row;
	return 0;
}

static void run_free(bench_run *r)
{
	if (!r->w)
		return;
	for (int i = 0; i < r->threads; i++) {
		bench_hist_fini(&r->w[i].h[0]);
		bench_hist_fini(&r->w[i].h[1]);
	}
	free(r->w);
	r->w = NULL;
}

/* Run one row and append it. Returns 0, 1 when the row failed (a worker could not connect or lost
 * its connection: the sweep stops there), or -errno. */
static int run_row(bench_ctx *ctx, int mode, int threads, int batch, double rate)
{
	bench_run r;
	bench_hist total, interval;
	bench_row row;
	run_result res;
	int rc;

	run_init(&r, ctx, mode, threads, batch, rate);
	memset(&row, 0, sizeof(row));
	memset(&res, 0, sizeof(res));
	if (bench_hist_init(&total, BENCH_HIST_LOWEST, BENCH_HIST_HIGHEST, BENCH_HIST_SIGFIGS) < 0)
		return -ENOMEM;
	if (bench_hist_init(&interval, BENCH_HIST_LOWEST, BENCH_HIST_HIGHEST, BENCH_HIST_SIGFIGS) < 0) {
		bench_hist_fini(&total);
		return -ENOMEM;
	}
	rc = run_workers_alloc(&r, ctx);
	if (rc < 0)
		goto out;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	int created = run_start(&r, &res);
	if (!atomic_load(&r.abort))
		run_wait(&r, ctx, &interval, &total);
	run_stop(&r, created, &total, &row, &res);
	row_fill(&row, &r, &total, &res);
	rc = row_report(ctx, &row, &r, &total, &res);
	if (rc == 0)
		rc = res.failed ? 1 : 0;
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
out:
	run_free(&r);
	bench_hist_fini(&total);
	bench_hist_fini(&interval);
	return rc;
}

/* Keys per load round trip: about LOAD_RT_BYTES, at most 1024. */
static int load_batch(const bench_keyspace *ks)
{
	size_t per = ks->fields ? bench_hash_load_size(ks) : (size_t)ks->keylen + ks->vallen + 32;
	return (int)SPW_MAX((size_t)1, SPW_MIN((size_t)1024, LOAD_RT_BYTES / per));
}

int main(int argc, char **argv)
{
	bench_opts o;
	bench_keyspace ks;
	bench_ctx ctx;
	int rc;

	if (bench_opts_parse(argc, argv, &o) < 0)
		return 2;
	rc = bench_keyspace_init(&ks, o.dbsize, o.keylen, o.vallen, o.theta);
	if (rc == 0 && o.hash_keys)
		rc = bench_keyspace_hash(&ks, o.fields);
	if (rc < 0) {
		fprintf(stderr, "spillway-bench: bad key space (--dbsize %llu --keylength %u --valuelength %u%s)\n",
		        (unsigned long long)o.dbsize, o.keylen, o.vallen, o.hash_keys ? " --fields" : "");
		return 2;
	}
	memset(&ctx, 0, sizeof(ctx));
	ctx.o = &o;
	ctx.ks = &ks;
	ctx.tty = isatty(STDERR_FILENO);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sa.sa_flags = SA_RESETHAND;   /* a second Ctrl-C ends the process */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (o.client == BENCH_CLIENT_INPROC) {
		rc = bench_inproc_open(&o, &ctx.store);
		if (rc < 0) {
			fprintf(stderr, "spillway-bench: cannot open the in-process store (--memory %llu --page %llu "
			        "--index %llu): %s\n", (unsigned long long)o.memory, (unsigned long long)o.page,
			        (unsigned long long)o.index, spw_strerror(rc));
			return 1;
		}
	}
	char dist[32] = "uniform";
	if (ks.zipf)
		snprintf(dist, sizeof(dist), "zipf %.2f", ks.z.theta);
	char shape[48] = "";
	if (ks.fields)
		snprintf(shape, sizeof(shape), " (hashes of %u fields)", ks.fields);
	printf("# spillway-bench: %s; dbsize %llu%s, keys %u B, values %u B%s, %s keys; runtime %g s\n",
	       o.client == BENCH_CLIENT_INPROC ? "in-process store" : "native client", (unsigned long long)ks.dbsize,
	       shape, ks.keylen, ks.vallen, ks.value_is_key ? " (= key)" : "", dist, o.runtime);
	if (o.client == BENCH_CLIENT_NATIVE)
		printf("# server %s:%s\n", o.host, o.port);
	fflush(stdout);

	int maxt = 1;
	for (int i = 0; i < o.nthreads; i++)
		maxt = SPW_MAX(maxt, o.threads[i]);
	rc = 0;
	if (!o.skip_load && !g_interrupted) {
		int lt = (int)SPW_MIN((uint64_t)maxt, ks.dbsize);
		if ((rc = run_row(&ctx, BENCH_MODE_LOAD, lt, load_batch(&ks), 0)) != 0)
			goto done;
	}
	if (o.runtime != 0) {
		for (int ti = 0; ti < o.nthreads && !g_interrupted; ti++) {
			if (!o.online) {
				for (int bi = 0; bi < o.nbatches && !g_interrupted; bi++)
					if ((rc = run_row(&ctx, BENCH_MODE_OFFLINE, o.threads[ti], o.batches[bi], 0)) != 0)
						goto done;
			} else if (o.nrates) {
				for (int ri = 0; ri < o.nrates && !g_interrupted; ri++)
					if ((rc = run_row(&ctx, BENCH_MODE_ONLINE, o.threads[ti], 0, o.rates[ri])) != 0)
						goto done;
			} else if ((rc = run_row(&ctx, BENCH_MODE_ONLINE, o.threads[ti], 0, 0)) != 0) {
				goto done;
			}
		}
	}
done:
	if (rc > 0)
		fprintf(stderr, "spillway-bench: stopping after a failed row\n");
	if (rc < 0) {
		fprintf(stderr, "spillway-bench: %s\n", spw_strerror(rc));
		ctx.any_failure = true;
	}
	if (o.csv && (rc = bench_csv_write(o.csv, ctx.rows, ctx.nrows)) < 0) {
		fprintf(stderr, "spillway-bench: cannot write %s: %s\n", o.csv, spw_strerror(rc));
		ctx.any_failure = true;
	}
	if (o.json && (rc = bench_json_write(o.json, &o, &ks, ctx.rows, ctx.nrows)) < 0) {
		fprintf(stderr, "spillway-bench: cannot write %s: %s\n", o.json, spw_strerror(rc));
		ctx.any_failure = true;
	}
	if (o.plot && ctx.nrows) {
		rc = bench_plot_write(o.plot, ctx.rows, ctx.nrows);
		if (rc == -ENOENT)
			fprintf(stderr, "spillway-bench: --plot needs gnuplot (apt-get install gnuplot-nox; scripts/deps.sh)\n");
		else if (rc < 0)
			fprintf(stderr, "spillway-bench: gnuplot failed to draw %s\n", o.plot);
		if (rc < 0)
			ctx.any_failure = true;
	}
	free(ctx.rows);
	bench_inproc_close(ctx.store);
	return ctx.any_failure ? 1 : 0;
}
