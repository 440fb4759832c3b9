/*
 * devbench_main.c - spillway-devbench: drive a device backend the way fio drives a file, and print
 * IOPS, MB/s, average and p99 latency and CPU seconds per IO.
 *
 *   spillway-devbench --backend uring|libaio|localmemory|posix --dir DIR --size 1g --bs 4096
 *                     --qd 64 --threads 1 --runtime 10 --rw randread|randwrite|read|write
 *                     [--segment 1g] [--completion-threads 0] [--throttle 4096] [--seed 1]
 *                     [--batch-submit 1] [--prealloc-step 0]
 *
 * Each thread opens its own queue and keeps --qd requests in flight, as a fio job does with
 * --iodepth: it waits for at least one completion (dev_wait), reaps everything ready, and each
 * callback queues its replacement. --batch-submit N is fio's iodepth_batch_submit: a dev_submit
 * once N replacements are queued (1, the default, as fio: each goes out at once), and in any case
 * the rest with the next dev_wait; 0 = only there, so with io_uring a reap's worth of new IO and
 * the wait for the next completion cost one system call together. --prealloc-step is the device's
 * cfg.prealloc_step (0: its default step; the segment size: each segment reserved whole when its
 * file is made), and the report says what the segments hold on disk afterwards (dev_disk_usage). Random offsets are uniform
 * over [0, size) in bs steps; sequential jobs split [0, size) between threads. Read jobs first lay
 * out the file set (once: a read of the last block tells whether it is there). CPU is getrusage of
 * the whole process over the measured interval (so localmemory's copy threads and io_uring's
 * io-wq workers count), and, as fio reports it, of the IO threads alone (RUSAGE_THREAD).
 *
 * The last line is machine-readable (tools/compare-fio-dev.sh parses it):
 *   RESULT backend=.. rw=.. bs=.. qd=.. threads=.. batch=.. ios=.. seconds=.. iops=.. mbps=..
 *          lat_avg_us=.. lat_p99_us=.. cpu_s=.. cpu_us_per_io=.. thread_cpu_us_per_io=.. errors=..
 *
 * Sections: options (one bench_cli table); latency histogram; the job; layout; main (device_setup,
 * jobs_alloc, jobs_run, jobs_sum, report).
 */
#include "bench/bench.h"
#include "device/device.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>

/* ---- options -------------------------------------------------------------------------------- */

enum { RW_RANDREAD, RW_RANDWRITE, RW_READ, RW_WRITE };
static const char *const rw_names[] = { "randread", "randwrite", "read", "write" };

typedef struct bench_opts {
	const char *backend;
	const char *dir;
	const char *rw_arg;           /* --rw as given; rw is its RW_* */
	uint64_t size, bs, segment;
	uint64_t prealloc_step;       /* 0 = the device's default step */
	int qd, threads, runtime, rw, completion_threads;
	int batch_submit;             /* submit when this many are queued; 0 = once per reap */
	uint32_t throttle;
	uint64_t seed;
} bench_opts;

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: spillway-devbench --backend uring|libaio|localmemory|posix --dir DIR [--size 1g]\n"
	        "         [--bs 4096] [--qd 64] [--threads 1] [--runtime 10]\n"
	        "         [--rw randread|randwrite|read|write] [--segment 1g] [--completion-threads 0]\n"
	        "         [--throttle 4096] [--seed 1] [--batch-submit 1] [--prealloc-step 0]\n");
}

#define F(field) offsetof(bench_opts, field)
#define REQ required_argument
#define STR_(x) #x
#define STR(x) STR_(x)
/* name, key, argument, kind, field, count field, lo, hi, list max, label, default (segment: 0 = one
 * file holding the whole set, worked out after parsing) */
static const bench_cli devbench_flags[] = {
	{ "backend", 'b', REQ, BENCH_CLI_STR, F(backend), 0, 0, 0, 0, "--backend", "uring" },
	{ "dir", 'd', REQ, BENCH_CLI_STR, F(dir), 0, 0, 0, 0, "--dir", NULL },
	{ "size", 's', REQ, BENCH_CLI_SIZE, F(size), 0, 0, 0, 0, "--size", "1g" },
	{ "bs", 'B', REQ, BENCH_CLI_SIZE, F(bs), 0, 0, 0, 0, "--bs", "4096" },
	{ "qd", 'q', REQ, BENCH_CLI_INT, F(qd), 0, 1, 65536, 0, "--qd", "64" },
	{ "threads", 't', REQ, BENCH_CLI_INT, F(threads), 0, 1, 256, 0, "--threads", "1" },
	{ "runtime", 'r', REQ, BENCH_CLI_INT, F(runtime), 0, 1, 86400, 0, "--runtime", "10" },
	{ "rw", 'w', REQ, BENCH_CLI_STR, F(rw_arg), 0, 0, 0, 0, "--rw", "randread" },
	{ "segment", 'S', REQ, BENCH_CLI_SIZE, F(segment), 0, 0, 0, 0, "--segment", "0" },
	{ "completion-threads", 'c', REQ, BENCH_CLI_INT, F(completion_threads), 0, 0, 256, 0, "--completion-threads", "0" },
	{ "throttle", 'T', REQ, BENCH_CLI_U32, F(throttle), 0, 1, 1 << 24, 0, "--throttle", STR(DEV_THROTTLE_DEFAULT) },
	{ "seed", 'e', REQ, BENCH_CLI_U64, F(seed), 0, 0, 1 << 30, 0, "--seed", "1" },
	{ "batch-submit", 'm', REQ, BENCH_CLI_INT, F(batch_submit), 0, 0, 65536, 0, "--batch-submit", "1" },
	{ "prealloc-step", 'P', REQ, BENCH_CLI_SIZE, F(prealloc_step), 0, 0, 0, 0, "--prealloc-step", "0" },
	{ "help", 'h', no_argument, BENCH_CLI_OWN, 0, 0, 0, 0, 0, "--help", NULL },
};
#undef F
#undef REQ
#undef STR
#undef STR_
#define NFLAGS ((int)SPW_ARRAY_LEN(devbench_flags))

/* The flags by their rows (devbench_flags), then what they must satisfy together. 0 or -EINVAL. */
static int parse_opts(int argc, char **argv, bench_opts *o)
{
	struct option lo[NFLAGS + 1];
	int c, rc;

	memset(o, 0, sizeof(*o));
	if (bench_cli_defaults(devbench_flags, NFLAGS, o) < 0)
		abort();   /* a default in the table that its own row refuses */
	bench_cli_longopts(devbench_flags, NFLAGS, lo);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const bench_cli *d = bench_cli_find(devbench_flags, NFLAGS, c);
		if (!d)
			return -EINVAL;
		if (d->kind == BENCH_CLI_OWN) {   /* --help */
			usage(stdout);
			exit(0);
		}
		rc = bench_cli_apply(d, optarg, o);
		if (rc) {
			fprintf(stderr, "spillway-devbench: bad value '%s' for --%s\n", optarg, d->name);
			return rc;
		}
	}
	o->rw = -1;
	for (int i = 0; i < (int)SPW_ARRAY_LEN(rw_names); i++)
		if (strcasecmp(o->rw_arg, rw_names[i]) == 0)
			o->rw = i;
	if (o->rw < 0) {
		fprintf(stderr, "spillway-devbench: --rw must be randread, randwrite, read or write\n");
		return -EINVAL;
	}
	if (!o->dir && strcasecmp(o->backend, "localmemory") != 0) {
		fprintf(stderr, "spillway-devbench: --dir is required for file backends\n");
		return -EINVAL;
	}
	if (o->bs < 512 || (o->bs & 511) || o->size < o->bs * (uint64_t)o->threads) {
		fprintf(stderr, "spillway-devbench: --bs must be a multiple of 512 and --size >= bs*threads\n");
		return -EINVAL;
	}
	if (!o->segment) {
		/* One segment file holding the whole set by default, so fio can use the same file. */
		o->segment = 1ULL << 30;
		while (o->segment < o->size)
			o->segment <<= 1;
	}
	return 0;
}

/* ---- latency histogram ---------------------------------------------------------------------- */

/* Log-linear: 64 sub-buckets per power of two of nanoseconds (about 1.6% resolution). */
#define HIST_SUB_BITS 6
#define HIST_BUCKETS (64 << HIST_SUB_BITS)

static inline unsigned hist_index(uint64_t ns)
{
	if (ns < (1u << HIST_SUB_BITS))
		return (unsigned)ns;
	unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
	unsigned sub = (unsigned)(ns >> (msb - HIST_SUB_BITS)) & ((1u << HIST_SUB_BITS) - 1);
	return ((msb - HIST_SUB_BITS + 1) << HIST_SUB_BITS) | sub;
}

static uint64_t hist_value(unsigned idx)
{
	if (idx < (1u << HIST_SUB_BITS))
		return idx;
	unsigned msb = (idx >> HIST_SUB_BITS) + HIST_SUB_BITS - 1;
	uint64_t sub = idx & ((1u << HIST_SUB_BITS) - 1);
	return ((1ULL << HIST_SUB_BITS) | sub) << (msb - HIST_SUB_BITS);
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* ---- the job -------------------------------------------------------------------------------- */

typedef struct job job;

typedef struct slot {
	dev_req req;
	struct iovec iov;
	uint64_t t0;
	job *j;
} slot;

struct job {
	const bench_opts *o;
	dev *d;
	int id;
	dev_queue *q;
	slot *slots;
	uint8_t *bufs;
	uint64_t rng;
	uint64_t seq_next, seq_lo, seq_hi;
	uint64_t nblocks;
	int unsubmitted;              /* queued since the last dev_submit */
	_Atomic int stop;
	uint64_t ios, bytes, lat_sum, errors;
	uint64_t *hist;
	int rc;
	double cpu_s;                 /* this thread's CPU over the measured interval */
	pthread_t th;
};

static pthread_barrier_t bench_start;

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static inline uint64_t job_offset(job *j)
{
	if (j->o->rw == RW_RANDREAD || j->o->rw == RW_RANDWRITE)
		return (rng_next(&j->rng) % j->nblocks) * j->o->bs;
	uint64_t off = j->seq_next;
	j->seq_next += j->o->bs;
	if (j->seq_next >= j->seq_hi)
		j->seq_next = j->seq_lo;
	return off;
}

static inline int job_issue(job *j, slot *s)
{
	s->req.offset = job_offset(j);
	s->t0 = spw_mono_ns();
	return (j->o->rw == RW_RANDREAD || j->o->rw == RW_READ) ? dev_read(j->q, &s->req)
	                                                        : dev_write(j->q, &s->req);
}

static void job_done(dev_req *r, int64_t res)
{
	slot *s = r->ctx;
	job *j = s->j;
	if (atomic_load_explicit(&j->stop, memory_order_relaxed))
		return;   /* after the measured interval: not counted, not replaced */
	uint64_t lat = spw_mono_ns() - s->t0;
	if (res != (int64_t)j->o->bs) {
		if (j->errors++ == 0)
			fprintf(stderr, "spillway-devbench: IO at %llu returned %lld (%s)\n",
			        (unsigned long long)r->offset, (long long)res,
			        res < 0 ? spw_strerror((int)res) : "short");
	} else {
		j->ios++;
		j->bytes += (uint64_t)res;
	}
	j->lat_sum += lat;
	j->hist[hist_index(lat)]++;
	/* Keep the queue full: the replacement is queued here and submitted after the reap. */
	if (job_issue(j, s) != 0)
		j->errors++;
	else if (j->o->batch_submit && ++j->unsubmitted >= j->o->batch_submit) {
		dev_submit(j->q);
		j->unsubmitted = 0;
	}
}

static void *job_main(void *arg)
{
	job *j = arg;
	const bench_opts *o = j->o;
	int rc;

	rc = dev_queue_open(j->d, &j->q);
	if (rc) {
		fprintf(stderr, "spillway-devbench: queue: %s\n", spw_strerror(rc));
		j->rc = rc;
		pthread_barrier_wait(&bench_start);
		return NULL;
	}
	pthread_barrier_wait(&bench_start);
	struct rusage ru0, ru1;
	getrusage(RUSAGE_THREAD, &ru0);
	for (int i = 0; i < o->qd; i++) {
		rc = job_issue(j, &j->slots[i]);
		if (rc) {
			fprintf(stderr, "spillway-devbench: queueing: %s (raise --throttle?)\n", spw_strerror(rc));
			j->rc = rc;
			break;
		}
	}
	dev_submit(j->q);
	while (!atomic_load_explicit(&j->stop, memory_order_relaxed)) {
		/* dev_wait submits what the callbacks queued and waits, in one system call (io_uring). */
		if (dev_reap(j->q, o->qd) == 0) {
			dev_wait(j->q, 1, 100000000LL);
			j->unsubmitted = 0;
		}
	}
	getrusage(RUSAGE_THREAD, &ru1);
	j->cpu_s = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	dev_queue_close(j->q);   /* waits for what is still in flight */
	return NULL;
}

/* ---- layout ------------------------------------------------------------------------------- */

typedef struct lay {
	dev_req req;
	struct iovec iov;
	int busy;
	int *err;
} lay;

static void layout_done(dev_req *r, int64_t res)
{
	lay *l = r->ctx;
	l->busy = 0;
	if (res != (int64_t)l->iov.iov_len && *l->err == 0)
		*l->err = res < 0 ? (int)res : -ENODATA;
}

static int layout_issue(dev_queue *q, lay *l, uint64_t off, void *buf, size_t len, bool write)
{
	memset(&l->req, 0, sizeof(l->req));
	l->iov.iov_base = buf;
	l->iov.iov_len = len;
	l->req.offset = off;
	l->req.iov = &l->iov;
	l->req.iovcnt = 1;
	l->req.done = layout_done;
	l->req.ctx = l;
	l->busy = 1;
	return write ? dev_write(q, &l->req) : dev_read(q, &l->req);
}

/* Write the whole set once (1 MiB writes, 8 in flight) unless a read of the last block finds it. */
static int layout(dev *d, const bench_opts *o)
{
	enum { CHUNK = 1 << 20, QD = 8 };
	dev_queue *q = NULL;
	uint8_t *buf = NULL;
	lay l[QD];
	int err = 0, rc, busy;
	uint64_t off = 0;

	rc = dev_queue_open(d, &q);
	if (rc)
		return rc;
	if (posix_memalign((void **)&buf, 4096, (size_t)CHUNK * QD) != 0) {
		rc = -ENOMEM;
		goto fail;
	}
	memset(buf, 0x5a, (size_t)CHUNK * QD);
	for (int i = 0; i < QD; i++) {
		l[i].busy = 0;
		l[i].err = &err;
	}
	rc = layout_issue(q, &l[0], o->size - o->bs, buf, o->bs, false);
	if (rc)
		goto fail;
	dev_submit(q);
	while (l[0].busy)
		if (dev_reap(q, 1) == 0)
			dev_wait(q, 1, -1);
	if (err == 0)
		goto fail;   /* laid out already (rc is 0) */
	err = 0;
	fprintf(stderr, "spillway-devbench: laying out %llu bytes in %s\n", (unsigned long long)o->size,
	        o->dir ? o->dir : "memory");
	do {
		busy = 0;
		for (int i = 0; i < QD; i++) {
			if (!l[i].busy && off < o->size) {
				size_t len = (size_t)SPW_MIN((uint64_t)CHUNK, o->size - off);
				rc = layout_issue(q, &l[i], off, buf + (size_t)i * CHUNK, len, true);
				if (rc == -EAGAIN) {
					l[i].busy = 0;   /* the device is full (tiny segments): later */
				} else if (rc) {
					goto fail;
				} else {
					off += len;
				}
			}
			busy += l[i].busy;
		}
		dev_submit(q);
		if (busy && dev_reap(q, QD) == 0)
			dev_wait(q, 1, -1);
	} while ((busy || off < o->size) && err == 0);
	rc = err ? err : dev_sync(d);
fail:
	dev_queue_close(q);
	free(buf);
	return rc;
}

/* ---- main ----------------------------------------------------------------------------------- */

/* The device from the flags, checked against the block size, with the file set laid out for reads.
 * 0 or an error (reported); *out is the device whenever it opened, for the caller to close. */
static int device_setup(const bench_opts *o, dev **out)
{
	dev_config cfg;
	char err[512] = "";
	int rc;

	dev_config_init(&cfg);
	cfg.type = o->backend;
	/* The server's layout, <dir>/Store/hlog.<n>; the device creates only its own folder. */
	char store[4096 + 8];
	snprintf(store, sizeof(store), "%s/Store", o->dir ? o->dir : "/tmp");
	if (o->dir && strcasecmp(o->backend, "localmemory") != 0)
		mkdir(o->dir, 0755);
	cfg.dir = store;
	cfg.prefix = "hlog.";
	cfg.segment_bytes = o->segment;
	cfg.throttle_limit = o->throttle;
	cfg.queue_depth = (uint32_t)SPW_MAX(o->qd, DEV_QUEUE_DEPTH_DEFAULT);
	cfg.completion_threads = o->completion_threads;
	cfg.prealloc_step = o->prealloc_step;
	rc = dev_open(&cfg, out, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "spillway-devbench: cannot open device '%s': %s\n", o->backend, err);
		*out = NULL;
		return rc;
	}
	if (o->bs % (*out)->sector_bytes) {
		fprintf(stderr, "spillway-devbench: --bs must be a multiple of the sector size %u\n",
		        (*out)->sector_bytes);
		return -EINVAL;
	}
	if (o->rw == RW_RANDREAD || o->rw == RW_READ) {
		rc = layout(*out, o);
		if (rc)
			fprintf(stderr, "spillway-devbench: layout failed: %s\n", spw_strerror(rc));
	}
	return rc;
}

/* One job per thread: its share of a sequential set, its histogram, its --qd slots and buffers.
 * 0 or -ENOMEM (jobs_free cleans up what was allocated). */
static int jobs_alloc(const bench_opts *o, dev *d, job **out)
{
	job *jobs = calloc((size_t)o->threads, sizeof(*jobs));
	*out = jobs;
	if (!jobs)
		return -ENOMEM;
	uint64_t blocks = o->size / o->bs, share = blocks / (uint64_t)o->threads;
	for (int t = 0; t < o->threads; t++) {
		job *j = &jobs[t];
		j->o = o;
		j->d = d;
		j->id = t;
		j->rng = 0x9E3779B97F4A7C15ULL * (o->seed + (uint64_t)t + 1);
		j->nblocks = blocks;
		j->seq_lo = share * (uint64_t)t * o->bs;
		j->seq_hi = t == o->threads - 1 ? blocks * o->bs : j->seq_lo + share * o->bs;
		j->seq_next = j->seq_lo;
		j->hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
		j->slots = calloc((size_t)o->qd, sizeof(slot));
		if (!j->hist || !j->slots || posix_memalign((void **)&j->bufs, 4096, (size_t)o->qd * o->bs) != 0)
			return -ENOMEM;
		memset(j->bufs, 0xa5, (size_t)o->qd * o->bs);
		for (int i = 0; i < o->qd; i++) {
			slot *s = &j->slots[i];
			s->j = j;
			s->iov.iov_base = j->bufs + (size_t)i * o->bs;
			s->iov.iov_len = o->bs;
			s->req.iov = &s->iov;
			s->req.iovcnt = 1;
			s->req.done = job_done;
			s->req.ctx = s;
		}
	}
	return 0;
}

static void jobs_free(job *jobs, int threads)
{
	if (!jobs)
		return;
	for (int t = 0; t < threads; t++) {
		free(jobs[t].hist);
		free(jobs[t].slots);
		free(jobs[t].bufs);
	}
	free(jobs);
}

/* What the measured interval adds up to over all jobs. */
typedef struct totals {
	uint64_t ios, bytes, lat_sum, errors;
	uint64_t n, p99;              /* latencies recorded, and their 99th percentile (ns) */
	double secs;                  /* the measured interval */
	double cpu, user, sys;        /* the whole process (RUSAGE_SELF) */
	double thread_cpu;            /* the IO threads alone */
	int rc;                       /* a job's failure, 0 when none */
	int disk_rc;                  /* dev_disk_usage's return, and what it said */
	uint64_t disk;
} totals;

/* Sum the joined jobs' counters and histograms; the p99 from the merged histogram. */
static void jobs_sum(const bench_opts *o, const job *jobs, totals *m)
{
	uint64_t *hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
	for (int t = 0; t < o->threads; t++) {
		m->ios += jobs[t].ios;
		m->bytes += jobs[t].bytes;
		m->lat_sum += jobs[t].lat_sum;
		m->errors += jobs[t].errors;
		m->thread_cpu += jobs[t].cpu_s;
		if (jobs[t].rc)
			m->rc = jobs[t].rc;
		for (int b = 0; b < HIST_BUCKETS && hist; b++)
			hist[b] += jobs[t].hist[b];
	}
	for (int b = 0; b < HIST_BUCKETS && hist; b++)
		m->n += hist[b];
	uint64_t seen = 0;
	for (int b = 0; b < HIST_BUCKETS && hist; b++) {
		seen += hist[b];
		if (seen * 100 >= m->n * 99) {
			m->p99 = hist_value((unsigned)b);
			break;
		}
	}
	free(hist);
}

/* Start the jobs together, let them run --runtime seconds, stop them and sum what they did. */
static void jobs_run(const bench_opts *o, job *jobs, totals *m)
{
	struct rusage ru0, ru1;
	pthread_barrier_init(&bench_start, NULL, (unsigned)o->threads + 1);
	for (int t = 0; t < o->threads; t++)
		pthread_create(&jobs[t].th, NULL, job_main, &jobs[t]);
	pthread_barrier_wait(&bench_start);
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = spw_mono_ns();
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };
	while (spw_mono_ns() - t0 < (uint64_t)o->runtime * 1000000000ULL)
		nanosleep(&nap, NULL);
	/* Snapshot the counters at the end of the interval; what is in flight then is not counted. */
	for (int t = 0; t < o->threads; t++)
		atomic_store(&jobs[t].stop, 1);
	uint64_t t1 = spw_mono_ns();
	getrusage(RUSAGE_SELF, &ru1);
	for (int t = 0; t < o->threads; t++)
		pthread_join(jobs[t].th, NULL);
	jobs_sum(o, jobs, m);
	m->secs = (double)(t1 - t0) / 1e9;
	m->user = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	m->sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	m->cpu = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	pthread_barrier_destroy(&bench_start);
}

/* The human-readable lines, then the RESULT line that tools/compare-fio-dev.sh parses. */
static void report(const bench_opts *o, const dev *d, const totals *m)
{
	double iops = (double)m->ios / m->secs;
	double lat_avg_us = m->n ? (double)m->lat_sum / (double)m->n / 1e3 : 0.0;
	double cpu_per_io = m->ios ? m->cpu / (double)m->ios * 1e6 : 0.0;
	double thread_per_io = m->ios ? m->thread_cpu / (double)m->ios * 1e6 : 0.0;
	printf("backend %s (%s), rw %s, bs %llu, qd %d, threads %d, batch-submit %d, %.1f s\n",
	       o->backend, d->name, rw_names[o->rw], (unsigned long long)o->bs, o->qd, o->threads,
	       o->batch_submit, m->secs);
	printf("  IOPS      %.0f\n", iops);
	printf("  MB/s      %.1f\n", (double)m->bytes / m->secs / 1e6);
	printf("  latency   avg %.1f us, p99 %.1f us\n", lat_avg_us, (double)m->p99 / 1e3);
	printf("  CPU       %.2f s (user %.2f, sys %.2f), %.2f us per IO; IO threads alone %.2f us per IO\n",
	       m->cpu, m->user, m->sys, cpu_per_io, thread_per_io);
	if (m->errors)
		printf("  errors    %llu\n", (unsigned long long)m->errors);
	if (m->disk_rc == 0)
		printf("  disk      %.1f MiB held by the segments (dev_disk_usage)\n", (double)m->disk / (1 << 20));
	printf("RESULT backend=%s rw=%s bs=%llu qd=%d threads=%d batch=%d ios=%llu seconds=%.3f iops=%.0f mbps=%.1f "
	       "lat_avg_us=%.1f lat_p99_us=%.1f cpu_s=%.3f cpu_us_per_io=%.3f thread_cpu_us_per_io=%.3f "
	       "errors=%llu\n",
	       d->name, rw_names[o->rw], (unsigned long long)o->bs, o->qd, o->threads, o->batch_submit,
	       (unsigned long long)m->ios, m->secs, iops, (double)m->bytes / m->secs / 1e6, lat_avg_us,
	       (double)m->p99 / 1e3, m->cpu, cpu_per_io, thread_per_io, (unsigned long long)m->errors);
}

int main(int argc, char **argv)
{
	bench_opts o;
	dev *d = NULL;
	job *jobs = NULL;
	totals m;
	int rc;

	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	rc = device_setup(&o, &d);
	if (rc && !d)
		return 1;
	if (rc == 0)
		rc = jobs_alloc(&o, d, &jobs);
	if (rc == 0) {
		memset(&m, 0, sizeof(m));
		jobs_run(&o, jobs, &m);
		rc = m.rc;
		m.disk_rc = dev_disk_usage(d, &m.disk);
		report(&o, d, &m);
	}
	jobs_free(jobs, o.threads);
	dev_close(d);
	return rc ? 1 : 0;
}
