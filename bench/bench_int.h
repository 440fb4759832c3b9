/*
 * bench_int.h - spillway-bench's driver, clients and output (the executable's files only).
 *
 * One "run" is one result row: `threads` worker threads, each with its own connections (native) or
 * store session (inproc), set up before the clock starts, released together, stopped together.
 * The driver (bench_main.c) owns the run; bench_opts.c its flags; a client (bench_net.c, bench_inproc.c) supplies the
 * worker bodies; bench_out.c turns runs into rows, tables, CSV, JSON and plots.
 */
#ifndef SPW_BENCH_INT_H
#define SPW_BENCH_INT_H

#include <pthread.h>
#include <sys/types.h>

#include "bench/bench.h"

struct hlog;

#define BENCH_LIST_MAX 32
#define BENCH_REPORT_NS 2000000000ULL    /* online: a line every 2 s */

enum { BENCH_CLIENT_NATIVE, BENCH_CLIENT_INPROC };
enum { BENCH_MODE_LOAD, BENCH_MODE_OFFLINE, BENCH_MODE_ONLINE };

typedef struct bench_opts {
	const char *host;
	const char *port;
	const char *password;
	int op;                       /* --op: offline op, and the load op when SET or MSET */
	bool op_given;
	uint64_t dbsize;
	uint32_t keylen, vallen;
	bool keylen_given;
	uint32_t fields;              /* --fields: per hash when hash_keys */
	bool hash_keys;               /* the workload has HGET or HSET: the load writes hashes */
	double runtime;               /* seconds; 0 = load only; < 0 = until interrupted */
	int threads[BENCH_LIST_MAX], nthreads;
	int batches[BENCH_LIST_MAX], nbatches;
	bool skip_load, online;
	int wl_op[BENCH_OP_COUNT], nwl;
	int wl_pct[BENCH_OP_COUNT], npct;   /* --op-percent: one share per --op-workload op */
	int itp;
	double rates[BENCH_LIST_MAX];
	int nrates;
	double theta;                 /* 0 = uniform */
	int conns;                    /* per thread */
	int client;
	const char *csv, *json, *plot;
	pid_t server_pid;
	uint64_t seed;
	uint64_t memory, page, index; /* inproc store sizing, as spillway-server's flags */
	int mutable_percent;
	bool quiet;                   /* no progress or interval lines */
} bench_opts;

/* Parse and check the command line (bench_opts.c). 0, or -EINVAL after a message on stderr. */
int bench_opts_parse(int argc, char **argv, bench_opts *o);

/* One result row. Latencies in microseconds; NAN where a column does not apply. */
typedef struct bench_row {
	char mode[8];                 /* load, offline, online */
	char op[96];                  /* GET, or GET:80,SET:20 */
	int threads, batch, conns, itp;
	double rate;                  /* offered ops/s (0 = closed loop) */
	uint64_t ops;
	double seconds, tput;
	double min_us, p5_us, p50_us, avg_us, p95_us, p99_us, p999_us, max_us;
	uint64_t errors, wrong, missing;
	double srv_cpu_s, srv_cpu_us_per_op;
	char first[200];              /* first reply-check failure or client error ("" none) */
	bool failed;                  /* a connection or thread failed */
} bench_row;

typedef struct bench_run bench_run;

typedef struct bench_worker {
	bench_run *run;
	int idx;
	pthread_t tid;
	bench_rng rng;
	bench_hist h[2];              /* h[cur]: recording; h[!cur]: the last published interval */
	int cur;
	int pub_idx;                  /* which of h[] holds the published interval (set before pub_epoch) */
	_Atomic uint64_t pub_epoch;   /* epoch of the interval in h[pub_idx] */
	_Atomic uint64_t consumed;    /* the reporter merged the interval published at this epoch */
	bench_check check;
	uint64_t ops;
	uint64_t t_end_ns;
	double cpu_s;                 /* inproc: this thread's CPU time over the run */
	uint64_t lo, hi;              /* load: key range */
	_Atomic uint64_t loaded;
	int err;
	char errmsg[200];
	_Atomic bool done;
} bench_worker;

struct bench_run {
	const bench_opts *o;
	const bench_keyspace *ks;
	int mode;
	int threads, batch, conns, itp;
	double rate;
	uint32_t wl_cum[BENCH_OP_COUNT];   /* cumulative percent thresholds of the online workload */
	int wl_op[BENCH_OP_COUNT], nwl;
	bool allow_missing;
	struct hlog *store;               /* inproc */
	bench_worker *w;
	pthread_mutex_t mu;               /* start gate: workers count in, then wait for go */
	pthread_cond_t cv;
	int nready;
	bool go;
	_Atomic bool abort;
	_Atomic bool stop;
	_Atomic uint64_t epoch;
	uint64_t t_start_ns;
};

/* Worker entry points (each calls bench_worker_ready() once set up, and returns when run->stop). */
void *bench_net_worker(void *arg);
void *bench_inproc_worker(void *arg);
/* Open / close the in-process store with the sizing flags. */
int bench_inproc_open(const bench_opts *o, struct hlog **out);
void bench_inproc_close(struct hlog *l);

/* Shared by the workers (bench_main.c). */
/* After setup: wait for the start. false when the run was aborted (a worker failed to set up). */
bool bench_worker_ready(bench_worker *w, int err);
/* Record a worker failure (first message kept). */
void bench_worker_fail(bench_worker *w, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Hand the interval histogram to the reporter when it asked for one (online; cheap to call often). */
static inline void bench_worker_publish(bench_worker *w)
{
	uint64_t e = atomic_load_explicit(&w->run->epoch, memory_order_acquire);
	uint64_t p = atomic_load_explicit(&w->pub_epoch, memory_order_relaxed);
	if (SPW_LIKELY(e == p))
		return;
	/* The previous interval must have been merged before its histogram is reused. */
	if (atomic_load_explicit(&w->consumed, memory_order_acquire) != p)
		return;
	w->pub_idx = w->cur;
	w->cur ^= 1;
	bench_hist_reset(&w->h[w->cur]);
	atomic_store_explicit(&w->pub_epoch, e, memory_order_release);
}
/* The next op of the online workload. */
static inline int bench_workload_pick(const bench_run *r, bench_rng *rng)
{
	if (r->nwl == 1)
		return r->wl_op[0];
	uint32_t x = (uint32_t)bench_rng_below(rng, 100);
	for (int i = 0; i < r->nwl - 1; i++)
		if (x < r->wl_cum[i])
			return r->wl_op[i];
	return r->wl_op[r->nwl - 1];
}
static inline bool bench_run_stopped(const bench_run *r)
{
	return atomic_load_explicit(&r->stop, memory_order_relaxed);
}

/* Batches each worker pre-builds for an offline run: enough to vary keys, at most ~8 MiB. */
uint32_t bench_offline_batch_count(const bench_keyspace *ks, int op, uint32_t batch);

/* ---- output (bench_out.c) ---- */
void bench_row_print_header(FILE *f);
void bench_row_print(FILE *f, const bench_row *r);
void bench_interval_header(FILE *f);
void bench_interval_print(FILE *f, double t_s, const bench_hist *h, uint64_t total_ops, double tput);
int bench_csv_write(const char *path, const bench_row *rows, int n);
int bench_json_write(const char *path, const bench_opts *o, const bench_keyspace *ks, const bench_row *rows, int n);
int bench_plot_write(const char *path, const bench_row *rows, int n);
/* utime + stime of a process in clock ticks from /proc/PID/stat; -errno. */
int64_t bench_proc_cpu_ticks(pid_t pid);
/* Load progress: a bar on a terminal, a plain line otherwise. */
void bench_progress(FILE *f, bool tty, uint64_t done, uint64_t total, double secs);

#endif
