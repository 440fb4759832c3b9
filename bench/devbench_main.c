/*
 * devbench_main.c - spillway-devbench: drive a device backend the way fio drives a file, and print
 * IOPS, MB/s, average and p99 latency and CPU seconds per IO.
 *
 *   spillway-devbench --backend uring|libaio|localmemory|posix --dir DIR --size 1g --bs 4096
 *                     --qd 64 --threads 1 --runtime 10 --rw randread|randwrite|read|write
 *                     [--segment 1g] [--completion-threads 0] [--throttle 4096] [--seed 1]
 *                     [--batch-submit 1]
 *
 * Each thread opens its own queue and keeps --qd requests in flight, as a fio job does with
 * --iodepth: it waits for at least one completion (dev_wait), reaps everything ready, and each
 * callback queues its replacement. --batch-submit N is fio's iodepth_batch_submit: a dev_submit
 * once N replacements are queued (1, the default, as fio: each goes out at once), and in any case
 * the rest with the next dev_wait; 0 = only there, so with io_uring a reap's worth of new IO and
 * the wait for the next completion cost one system call together. Random offsets are uniform
 * over [0, size) in bs steps; sequential jobs split [0, size) between threads. Read jobs first lay
 * out the file set (once: a read of the last block tells whether it is there). CPU is getrusage of
 * the whole process over the measured interval (so localmemory's copy threads and io_uring's
 * io-wq workers count), and, as fio reports it, of the IO threads alone (RUSAGE_THREAD).
 *
 * The last line is machine-readable (tools/compare-fio-dev.sh parses it):
 *   RESULT backend=.. rw=.. bs=.. qd=.. threads=.. ios=.. seconds=.. iops=.. mbps=.. lat_avg_us=..
 *          lat_p99_us=.. cpu_s=.. cpu_us_per_io=.. thread_cpu_us_per_io=.. errors=..
 *
 * Sections: options; latency histogram; the job; layout; main.
 */
#include "device/device.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>

/* ---- options -------------------------------------------------------------------------------- */

enum { RW_RANDREAD, RW_RANDWRITE, RW_READ, RW_WRITE };

typedef struct bench_opts {
	const char *backend;
	const char *dir;
	uint64_t size, bs, segment;
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
	        "         [--throttle 4096] [--seed 1] [--batch-submit 1]\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

static int parse_opts(int argc, char **argv, bench_opts *o)
{
	static const struct option lo[] = {
		{ "backend", required_argument, 0, 'b' }, { "dir", required_argument, 0, 'd' },
		{ "size", required_argument, 0, 's' }, { "bs", required_argument, 0, 'B' },
		{ "qd", required_argument, 0, 'q' }, { "threads", required_argument, 0, 't' },
		{ "runtime", required_argument, 0, 'r' }, { "rw", required_argument, 0, 'w' },
		{ "segment", required_argument, 0, 'S' }, { "completion-threads", required_argument, 0, 'c' },
		{ "throttle", required_argument, 0, 'T' }, { "seed", required_argument, 0, 'e' },
		{ "batch-submit", required_argument, 0, 'm' },
		{ "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
	};
	int c, li = 0, rc = 0;
	const char *rw = "randread";

	memset(o, 0, sizeof(*o));
	o->backend = "uring";
	o->size = 1ULL << 30;
	o->bs = 4096;
	o->segment = 0;
	o->qd = 64;
	o->threads = 1;
	o->runtime = 10;
	o->throttle = DEV_THROTTLE_DEFAULT;
	o->seed = 1;
	o->batch_submit = 1;
	while ((c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		int v;
		switch (c) {
		case 'b': o->backend = optarg; break;
		case 'd': o->dir = optarg; break;
		case 's': rc = spw_parse_size(optarg, &o->size); break;
		case 'B': rc = spw_parse_size(optarg, &o->bs); break;
		case 'S': rc = spw_parse_size(optarg, &o->segment); break;
		case 'q': rc = parse_int(optarg, 1, 65536, &o->qd); break;
		case 't': rc = parse_int(optarg, 1, 256, &o->threads); break;
		case 'r': rc = parse_int(optarg, 1, 86400, &o->runtime); break;
		case 'c': rc = parse_int(optarg, 0, 256, &o->completion_threads); break;
		case 'T': rc = parse_int(optarg, 1, 1 << 24, &v); o->throttle = (uint32_t)v; break;
		case 'e': rc = parse_int(optarg, 0, 1 << 30, &v); o->seed = (uint64_t)v; break;
		case 'm': rc = parse_int(optarg, 0, 65536, &o->batch_submit); break;
		case 'w': rw = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: return -EINVAL;
		}
		if (rc) {
			fprintf(stderr, "spillway-devbench: bad value '%s' for --%s\n", optarg, lo[li].name);
			return rc;
		}
	}
	if (strcasecmp(rw, "randread") == 0) o->rw = RW_RANDREAD;
	else if (strcasecmp(rw, "randwrite") == 0) o->rw = RW_RANDWRITE;
	else if (strcasecmp(rw, "read") == 0) o->rw = RW_READ;
	else if (strcasecmp(rw, "write") == 0) o->rw = RW_WRITE;
	else {
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

static const char *rw_name(int rw)
{
	static const char *n[] = { "randread", "randwrite", "read", "write" };
	return n[rw];
}

int main(int argc, char **argv)
{
	bench_opts o;
	dev_config cfg;
	dev *d = NULL;
	job *jobs = NULL;
	char err[512] = "";
	int rc;

	if (parse_opts(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	dev_config_init(&cfg);
	cfg.type = o.backend;
	/* The server's layout, <dir>/Store/hlog.<n>; the device creates only its own folder. */
	char store[4096 + 8];
	snprintf(store, sizeof(store), "%s/Store", o.dir ? o.dir : "/tmp");
	if (o.dir && strcasecmp(o.backend, "localmemory") != 0)
		mkdir(o.dir, 0755);
	cfg.dir = store;
	cfg.prefix = "hlog.";
	cfg.segment_bytes = o.segment;
	cfg.throttle_limit = o.throttle;
	cfg.queue_depth = (uint32_t)SPW_MAX(o.qd, DEV_QUEUE_DEPTH_DEFAULT);
	cfg.completion_threads = o.completion_threads;
	rc = dev_open(&cfg, &d, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "spillway-devbench: cannot open device '%s': %s\n", o.backend, err);
		return 1;
	}
	if (o.bs % d->sector_bytes) {
		fprintf(stderr, "spillway-devbench: --bs must be a multiple of the sector size %u\n",
		        d->sector_bytes);
		rc = -EINVAL;
		goto fail;
	}
	if (o.rw == RW_RANDREAD || o.rw == RW_READ) {
		rc = layout(d, &o);
		if (rc) {
			fprintf(stderr, "spillway-devbench: layout failed: %s\n", spw_strerror(rc));
			goto fail;
		}
	}

	jobs = calloc((size_t)o.threads, sizeof(*jobs));
	if (!jobs) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_barrier_init(&bench_start, NULL, (unsigned)o.threads + 1);
	for (int t = 0; t < o.threads; t++) {
		job *j = &jobs[t];
		j->o = &o;
		j->d = d;
		j->id = t;
		j->rng = 0x9E3779B97F4A7C15ULL * (o.seed + (uint64_t)t + 1);
		j->nblocks = o.size / o.bs;
		j->seq_lo = o.size / o.bs / (uint64_t)o.threads * (uint64_t)t * o.bs;
		j->seq_hi = t == o.threads - 1 ? o.size / o.bs * o.bs
		                               : j->seq_lo + o.size / o.bs / (uint64_t)o.threads * o.bs;
		j->seq_next = j->seq_lo;
		j->hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
		j->slots = calloc((size_t)o.qd, sizeof(slot));
		if (!j->hist || !j->slots ||
		    posix_memalign((void **)&j->bufs, 4096, (size_t)o.qd * o.bs) != 0) {
			rc = -ENOMEM;
			goto fail;
		}
		memset(j->bufs, 0xa5, (size_t)o.qd * o.bs);
		for (int i = 0; i < o.qd; i++) {
			slot *s = &j->slots[i];
			s->j = j;
			s->iov.iov_base = j->bufs + (size_t)i * o.bs;
			s->iov.iov_len = o.bs;
			s->req.iov = &s->iov;
			s->req.iovcnt = 1;
			s->req.done = job_done;
			s->req.ctx = s;
		}
	}
	for (int t = 0; t < o.threads; t++)
		pthread_create(&jobs[t].th, NULL, job_main, &jobs[t]);

	struct rusage ru0, ru1;
	pthread_barrier_wait(&bench_start);
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = spw_mono_ns();
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };
	while (spw_mono_ns() - t0 < (uint64_t)o.runtime * 1000000000ULL)
		nanosleep(&nap, NULL);
	/* Snapshot the counters at the end of the interval; what is in flight then is not counted. */
	uint64_t ios = 0, bytes = 0, lat_sum = 0, errors = 0, n = 0;
	double thread_cpu = 0;
	uint64_t *hist = calloc(HIST_BUCKETS, sizeof(uint64_t));
	for (int t = 0; t < o.threads; t++)
		atomic_store(&jobs[t].stop, 1);
	uint64_t t1 = spw_mono_ns();
	getrusage(RUSAGE_SELF, &ru1);
	for (int t = 0; t < o.threads; t++) {
		pthread_join(jobs[t].th, NULL);
		ios += jobs[t].ios;
		bytes += jobs[t].bytes;
		lat_sum += jobs[t].lat_sum;
		errors += jobs[t].errors;
		thread_cpu += jobs[t].cpu_s;
		if (jobs[t].rc)
			rc = jobs[t].rc;
		for (int b = 0; b < HIST_BUCKETS && hist; b++)
			hist[b] += jobs[t].hist[b];
	}
	double secs = (double)(t1 - t0) / 1e9;
	for (int b = 0; b < HIST_BUCKETS && hist; b++)
		n += hist[b];
	uint64_t p99 = 0, seen = 0;
	for (int b = 0; b < HIST_BUCKETS && hist; b++) {
		seen += hist[b];
		if (seen * 100 >= n * 99) {
			p99 = hist_value((unsigned)b);
			break;
		}
	}
	free(hist);
	double cpu = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime) + tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	double iops = (double)ios / secs;
	printf("backend %s (%s), rw %s, bs %llu, qd %d, threads %d, batch-submit %d, %.1f s\n",
	       o.backend, d->name, rw_name(o.rw), (unsigned long long)o.bs, o.qd, o.threads,
	       o.batch_submit, secs);
	printf("  IOPS      %.0f\n", iops);
	printf("  MB/s      %.1f\n", (double)bytes / secs / 1e6);
	printf("  latency   avg %.1f us, p99 %.1f us\n", n ? (double)lat_sum / (double)n / 1e3 : 0.0,
	       (double)p99 / 1e3);
	printf("  CPU       %.2f s (user %.2f, sys %.2f), %.2f us per IO; IO threads alone %.2f us per IO\n",
	       cpu, tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime), tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime),
	       ios ? cpu / (double)ios * 1e6 : 0.0, ios ? thread_cpu / (double)ios * 1e6 : 0.0);
	if (errors)
		printf("  errors    %llu\n", (unsigned long long)errors);
	printf("RESULT backend=%s rw=%s bs=%llu qd=%d threads=%d batch=%d ios=%llu seconds=%.3f iops=%.0f mbps=%.1f "
	       "lat_avg_us=%.1f lat_p99_us=%.1f cpu_s=%.3f cpu_us_per_io=%.3f thread_cpu_us_per_io=%.3f "
	       "errors=%llu\n",
	       d->name, rw_name(o.rw), (unsigned long long)o.bs, o.qd, o.threads, o.batch_submit,
	       (unsigned long long)ios, secs, iops, (double)bytes / secs / 1e6,
	       n ? (double)lat_sum / (double)n / 1e3 : 0.0, (double)p99 / 1e3, cpu,
	       ios ? cpu / (double)ios * 1e6 : 0.0, ios ? thread_cpu / (double)ios * 1e6 : 0.0,
	       (unsigned long long)errors);
	pthread_barrier_destroy(&bench_start);
fail:
	if (jobs) {
		for (int t = 0; t < o.threads; t++) {
			free(jobs[t].hist);
			free(jobs[t].slots);
			free(jobs[t].bufs);
		}
		free(jobs);
	}
	dev_close(d);
	return rc ? 1 : 0;
}
