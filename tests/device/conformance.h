/*
 * conformance.h - the device conformance suite, written once and included once per backend
 * (as FASTER's paging_test.h). The including file defines:
 *
 *   CONF_TYPE          the --device-type string, e.g. "uring", "localmemory", "fault:native"
 *   CONF_THREADS       (optional) --device-completion-threads, default 0
 *   CONF_EXTRA_TESTS   (optional) more cmocka_unit_test_setup_teardown(...) entries
 *
 * and gets a main() that runs every test against that backend, or exits 77 (SKIP) when this
 * machine or build lacks the backend, never a pass. Each test runs in a fixture (conf_setup,
 * conf_teardown): a fresh device with 64 KiB segments and a queue, in a fresh directory on the
 * real file system (under the build directory), and the test's buffers (conf_scratch); teardown
 * frees them and removes the directory, also after a failed assertion. The tests of disk use
 * (preallocation in steps, dev_disk_usage) are in conf_disk.h.
 */
#ifndef SPW_TEST_DEVICE_CONFORMANCE_H
#define SPW_TEST_DEVICE_CONFORMANCE_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "device/dev_test.h"

#ifndef CONF_THREADS
#define CONF_THREADS 0
#endif
#ifndef CONF_EXTRA_TESTS
#define CONF_EXTRA_TESTS
#endif

#define CONF_SEG (64u * 1024u)
#define CONF_ALIGN 4096u
#define CONF_SCRATCH_MAX 8

typedef struct conf {
	char dir[256];
	dev_config cfg;
	dev *d;
	dev_queue *q;
	void *scratch[CONF_SCRATCH_MAX];   /* conf_scratch's buffers, freed by conf_teardown */
	int nscratch;
} conf;

/* One request with its result, for tests. */
typedef struct tio {
	dev_req req;
	struct iovec iov[DEV_IOV_MAX];
	int64_t res;
	int done;
	pthread_t thread;
	int order;
	int *counter;
} tio;

static void tio_done(dev_req *r, int64_t res)
{
	tio *t = r->ctx;
	t->res = res;
	t->done++;
	t->thread = pthread_self();
	if (t->counter)
		t->order = ++*t->counter;
}

static void tio_init(tio *t, uint64_t off, void *buf, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->req.offset = off;
	t->iov[0].iov_base = buf;
	t->iov[0].iov_len = len;
	t->req.iov = t->iov;
	t->req.iovcnt = buf ? 1 : 0;
	t->req.done = tio_done;
	t->req.ctx = t;
	t->res = -12345;
}

static void *conf_buf(size_t len)
{
	void *p = NULL;
	assert_int_equal(posix_memalign(&p, CONF_ALIGN, len ? len : CONF_ALIGN), 0);
	memset(p, 0, len);
	return p;
}

/* A zeroed buffer of len bytes aligned for any backend, the fixture's: freed after the test. */
static void *conf_scratch(conf *c, size_t len)
{
	assert_true(c->nscratch < CONF_SCRATCH_MAX);
	c->scratch[c->nscratch] = conf_buf(len);
	return c->scratch[c->nscratch++];
}

/* Deterministic bytes for (offset, seed): every 8-byte word names where it belongs. */
static void conf_fill(uint8_t *p, size_t len, uint64_t off, uint64_t seed)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = ((off + i) * 0x9E3779B97F4A7C15ULL) ^ seed;
		memcpy(p + i, &v, 8);
	}
}

/* Reap (and wait) until *done_count reaches target; fails the test after 10 s of nothing. */
static void conf_run(dev_queue *q, int *done_count, int target)
{
	int idle = 0;
	while (*done_count < target) {
		int rc = dev_submit(q);
		assert_true(rc >= 0 || rc == -EAGAIN);
		if (dev_reap(q, 1024) > 0) {
			idle = 0;
			continue;
		}
		rc = dev_wait(q, 1, 100000000LL);
		assert_true(rc == 0 || rc == -ETIME || rc == -EINTR);
		assert_true(++idle < 100);
	}
}

/* Queue t (retrying while throttled), submit, and wait for it. Returns its result. */
static int64_t conf_io(dev_queue *q, tio *t, int op)
{
	int rc;
	for (;;) {
		rc = op == DEV_OP_READ ? dev_read(q, &t->req) :
		     op == DEV_OP_WRITE ? dev_write(q, &t->req) : dev_flush(q, &t->req);
		if (rc != -EAGAIN)
			break;
		dev_submit(q);
		dev_wait(q, 1, 100000000LL);
		dev_reap(q, 1024);
	}
	assert_int_equal(rc, 0);
	conf_run(q, &t->done, 1);
	assert_int_equal(t->done, 1);
	return t->res;
}

static int64_t conf_write(dev_queue *q, uint64_t off, void *buf, size_t len)
{
	tio t;
	tio_init(&t, off, buf, len);
	return conf_io(q, &t, DEV_OP_WRITE);
}

static int64_t conf_read(dev_queue *q, uint64_t off, void *buf, size_t len)
{
	tio t;
	tio_init(&t, off, buf, len);
	return conf_io(q, &t, DEV_OP_READ);
}

static void conf_cfg(conf *c)
{
	dev_config_init(&c->cfg);
	c->cfg.type = CONF_TYPE;
	c->cfg.dir = c->dir;
	c->cfg.prefix = "hlog.";
	c->cfg.segment_bytes = CONF_SEG;
	c->cfg.completion_threads = CONF_THREADS;
}

static int conf_open(conf *c)
{
	char err[256] = "";
	int rc = dev_open(&c->cfg, &c->d, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "dev_open(%s): %s: %s\n", CONF_TYPE, spw_strerror(rc), err);
		return rc;
	}
	rc = dev_queue_open(c->d, &c->q);
	if (rc) {
		dev_close(c->d);
		c->d = NULL;
	}
	return rc;
}

static void conf_close(conf *c)
{
	dev_queue_close(c->q);
	c->q = NULL;
	dev_close(c->d);
	c->d = NULL;
}

static int conf_setup(void **state)
{
	conf *c = calloc(1, sizeof(*c));
	if (!c)
		return -1;
	if (dev_test_dir_make(c->dir, sizeof(c->dir), "devtest") != 0) {
		free(c);
		return -1;
	}
	conf_cfg(c);
	if (conf_open(c)) {
		dev_test_dir_remove(c->dir);
		free(c);
		return -1;
	}
	*state = c;
	return 0;
}

static int conf_teardown(void **state)
{
	conf *c = *state;
	conf_close(c);
	dev_test_dir_remove(c->dir);
	for (int i = 0; i < c->nscratch; i++)
		free(c->scratch[i]);
	free(c);
	return 0;
}

/* Lay out n bytes at 0 with conf_fill(seed) data, in 32 KiB writes. */
static void conf_layout(dev_queue *q, uint64_t n, uint64_t seed)
{
	size_t chunk = 32 * 1024;
	uint8_t *buf = conf_buf(chunk);
	for (uint64_t off = 0; off < n; off += chunk) {
		conf_fill(buf, chunk, off, seed);
		assert_int_equal(conf_write(q, off, buf, chunk), (int64_t)chunk);
	}
	free(buf);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_device_reports_sector_size_alignment_and_capabilities(void **state)
{
	conf *c = *state;
	assert_true(c->d->sector_bytes >= 512);
	assert_int_equal(c->d->sector_bytes & (c->d->sector_bytes - 1), 0);
	assert_true(c->d->mem_align >= 1);
	assert_int_equal(c->d->mem_align & (c->d->mem_align - 1), 0);
	assert_int_equal(c->d->segment_bytes, CONF_SEG);
	assert_non_null(c->d->name);
	if (c->d->caps & DEV_CAP_DIRECT)
		assert_true(c->d->caps & DEV_CAP_PERSISTENT);
	if (strncmp(CONF_TYPE, "fault:", 6) == 0)
		assert_true(c->d->caps & DEV_CAP_FAULT);
	else
		assert_false(c->d->caps & DEV_CAP_FAULT);
}

static void test_device_round_trips_writes_at_random_aligned_offsets_and_sizes(void **state)
{
	conf *c = *state;
	const uint64_t span = 8 * CONF_SEG;           /* 8 segments: many boundaries */
	uint8_t *shadow = conf_scratch(c, span);
	uint8_t *buf = conf_scratch(c, 4 * CONF_SEG);
	unsigned seed = 12345;
	uint32_t sec = c->d->sector_bytes;

	conf_layout(c->q, span, 7);
	conf_fill(shadow, span, 0, 7);
	for (int i = 0; i < 200; i++) {
		uint64_t nsec = 1 + (uint64_t)rand_r(&seed) % (2 * CONF_SEG / sec);
		uint64_t len = nsec * sec;
		uint64_t off = (uint64_t)rand_r(&seed) % ((span - len) / sec + 1) * sec;
		if (rand_r(&seed) & 1) {
			conf_fill(buf, len, off, (uint64_t)i << 32);
			assert_int_equal(conf_write(c->q, off, buf, len), (int64_t)len);
			memcpy(shadow + off, buf, len);
		} else {
			memset(buf, 0xAB, len);
			assert_int_equal(conf_read(c->q, off, buf, len), (int64_t)len);
			assert_memory_equal(buf, shadow + off, len);
		}
	}
	/* And the whole span once more in one read of 8 pieces. */
	assert_int_equal(conf_read(c->q, 0, buf, span / 2), (int64_t)(span / 2));
	assert_memory_equal(buf, shadow, span / 2);
}

static void test_device_vectored_write_reads_back_through_other_splits(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	size_t total = 16 * (size_t)sec;
	uint8_t *src = conf_scratch(c, total), *dst = conf_scratch(c, total);
	tio t;

	conf_fill(src, total, 0, 99);
	/* Write as 3 buffers of 2, 9 and 5 sectors. */
	tio_init(&t, 4 * sec, src, 2 * (size_t)sec);
	t.iov[1].iov_base = src + 2 * sec;
	t.iov[1].iov_len = 9 * (size_t)sec;
	t.iov[2].iov_base = src + 11 * sec;
	t.iov[2].iov_len = 5 * (size_t)sec;
	t.req.iovcnt = 3;
	assert_int_equal(conf_io(c->q, &t, DEV_OP_WRITE), (int64_t)total);
	/* Read as 4 buffers of 1, 7, 7 and 1 sectors, placed in reverse order in dst. */
	tio_init(&t, 4 * sec, dst + 15 * sec, sec);
	t.iov[1].iov_base = dst + 8 * sec;
	t.iov[1].iov_len = 7 * (size_t)sec;
	t.iov[2].iov_base = dst + 1 * sec;
	t.iov[2].iov_len = 7 * (size_t)sec;
	t.iov[3].iov_base = dst;
	t.iov[3].iov_len = sec;
	t.req.iovcnt = 4;
	assert_int_equal(conf_io(c->q, &t, DEV_OP_READ), (int64_t)total);
	assert_memory_equal(dst + 15 * sec, src, sec);
	assert_memory_equal(dst + 8 * sec, src + 1 * sec, 7 * (size_t)sec);
	assert_memory_equal(dst + 1 * sec, src + 8 * sec, 7 * (size_t)sec);
	assert_memory_equal(dst, src + 15 * sec, sec);
}

static void test_device_completes_many_reads_in_flight_each_with_its_own_data(void **state)
{
	conf *c = *state;
	enum { N = 128, BS = 4096 };
	const uint64_t span = 16 * CONF_SEG;
	uint8_t *bufs = conf_scratch(c, (size_t)N * BS), *want = conf_scratch(c, BS);
	tio *t = conf_scratch(c, N * sizeof(*t));
	int done = 0, order = 0;
	unsigned seed = 777;

	assert_non_null(t);
	conf_layout(c->q, span, 5);
	for (int i = 0; i < N; i++) {
		uint64_t off = (uint64_t)rand_r(&seed) % (span / BS) * BS;
		tio_init(&t[i], off, bufs + (size_t)i * BS, BS);
		t[i].counter = &order;
		assert_int_equal(dev_read(c->q, &t[i].req), 0);
	}
	assert_int_equal(dev_queue_pending(c->q), N);
	/* Queued is not submitted: nothing can complete yet. */
	assert_int_equal(dev_reap(c->q, N), 0);
	/* One submit hands over the whole batch. */
	assert_int_equal(dev_submit(c->q), N);
	assert_int_equal(dev_submit(c->q), 0);
	for (;;) {
		done = 0;
		for (int i = 0; i < N; i++)
			done += t[i].done;
		if (done == N)
			break;
		if (dev_reap(c->q, 7) == 0)   /* small reaps: callbacks interleave with new arrivals */
			assert_true(dev_wait(c->q, 1, 1000000000LL) == 0);
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].done, 1);
		assert_int_equal(t[i].res, BS);
		conf_fill(want, BS, t[i].req.offset, 5);
		assert_memory_equal(bufs + (size_t)i * BS, want, BS);
		assert_true(t[i].order >= 1 && t[i].order <= N);
	}
	assert_int_equal(dev_queue_pending(c->q), 0);
}

static void test_device_reads_and_writes_across_segment_boundaries(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	size_t len = 2 * CONF_SEG + 2 * (size_t)sec;   /* touches 4 segments */
	uint64_t off = CONF_SEG - sec;
	uint8_t *src = conf_scratch(c, len), *dst = conf_scratch(c, len);

	conf_fill(src, len, off, 3);
	assert_int_equal(conf_write(c->q, off, src, len), (int64_t)len);
	assert_int_equal(conf_read(c->q, off, dst, len), (int64_t)len);
	assert_memory_equal(dst, src, len);
	/* A two-sector read straddling one boundary. */
	memset(dst, 0, len);
	assert_int_equal(conf_read(c->q, 2 * CONF_SEG - sec, dst, 2 * (size_t)sec), 2 * (int64_t)sec);
	assert_memory_equal(dst, src + CONF_SEG, 2 * (size_t)sec);
}

static void test_device_read_past_the_written_end_is_short(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	uint8_t *buf = conf_scratch(c, 8 * (size_t)sec);

	conf_fill(buf, 3 * (size_t)sec, 0, 1);
	assert_int_equal(conf_write(c->q, 0, buf, 3 * (size_t)sec), 3 * (int64_t)sec);
	assert_int_equal(conf_read(c->q, 0, buf, 8 * (size_t)sec), 3 * (int64_t)sec);
	/* Wholly past the end, and in a segment never written. */
	assert_int_equal(conf_read(c->q, 4 * (uint64_t)sec, buf, sec), 0);
	assert_int_equal(conf_read(c->q, 5 * (uint64_t)CONF_SEG, buf, sec), 0);
	/* A read spanning into a segment that does not exist stops at the boundary. */
	conf_fill(buf, sec, CONF_SEG - sec, 1);
	assert_int_equal(conf_write(c->q, CONF_SEG - sec, buf, sec), (int64_t)sec);
	assert_int_equal(conf_read(c->q, CONF_SEG - sec, buf, 4 * (size_t)sec), (int64_t)sec);
}

static void test_device_rejects_misaligned_offsets_lengths_and_buffers(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	uint8_t *buf = conf_scratch(c, 4 * (size_t)sec);
	tio t;

	tio_init(&t, 1, buf, sec);                         /* offset */
	assert_int_equal(dev_write(c->q, &t.req), -EINVAL);
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	tio_init(&t, sec, buf, sec + 100);                 /* length */
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	if (c->d->mem_align > 1) {
		tio_init(&t, 0, buf + 1, sec);                 /* buffer */
		assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	}
	tio_init(&t, 0, buf, sec);                         /* a second buffer misaligned */
	t.iov[1].iov_base = buf + sec;
	t.iov[1].iov_len = 10;
	t.req.iovcnt = 2;
	assert_int_equal(dev_write(c->q, &t.req), -EINVAL);
	tio_init(&t, 0, buf, sec);
	t.req.iovcnt = 0;                                  /* nothing to read */
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	t.req.iovcnt = DEV_IOV_MAX + 1;
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	tio_init(&t, DEV_MAX_BYTES, buf, sec);             /* out of the address space */
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	tio_init(&t, 0, buf, sec);
	t.req.done = NULL;
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	assert_int_equal(dev_read(c->q, NULL), -EINVAL);
	/* One request may span at most DEV_PIECES_MAX segments, on every backend: 16 segments' worth
	 * starting one sector in touches 17. */
	uint8_t *big = conf_scratch(c, (size_t)DEV_PIECES_MAX * CONF_SEG);
	tio_init(&t, sec, big, (size_t)DEV_PIECES_MAX * CONF_SEG);
	assert_int_equal(dev_read(c->q, &t.req), -EINVAL);
	assert_int_equal(dev_write(c->q, &t.req), -EINVAL);
	/* Rejections take no throttle slot and leave nothing behind. */
	assert_int_equal(dev_queue_pending(c->q), 0);
	assert_int_equal(atomic_load(&c->d->inflight), 0);
	assert_int_equal(dev_submit(c->q), 0);
	assert_int_equal(dev_reap(c->q, 100), 0);
}

static void test_device_throttle_answers_eagain_past_the_limit(void **state)
{
	conf *c = *state;
	enum { LIMIT = 8, N = 40 };
	uint8_t *bufs;
	tio *t = conf_scratch(c, N * sizeof(*t));
	int accepted = 0, eagain = 0, done = 0;

	assert_non_null(t);
	conf_close(c);
	c->cfg.throttle_limit = LIMIT;
	assert_int_equal(conf_open(c), 0);
	bufs = conf_scratch(c, (size_t)N * 4096);
	conf_layout(c->q, CONF_SEG, 2);
	for (int i = 0; i < N; i++) {
		tio_init(&t[i], (uint64_t)(i % 16) * 4096, bufs + (size_t)i * 4096, 4096);
		t[i].counter = &done;
	}
	/* Queue until refused: exactly LIMIT accepted, the next answered -EAGAIN. */
	for (int i = 0; i < N; i++) {
		int rc = dev_read(c->q, &t[i].req);
		if (rc == -EAGAIN) {
			eagain++;
			break;
		}
		assert_int_equal(rc, 0);
		accepted++;
	}
	assert_int_equal(accepted, LIMIT);
	assert_int_equal(eagain, 1);
	/* Run them all, keeping the device full; in-flight never passes the limit. */
	int next = accepted;
	while (done < N) {
		dev_submit(c->q);
		assert_true(atomic_load(&c->d->inflight) <= LIMIT);
		if (dev_reap(c->q, 3) == 0)
			dev_wait(c->q, 1, 100000000LL);
		while (next < N) {
			int rc = dev_read(c->q, &t[next].req);
			if (rc == -EAGAIN)
				break;
			assert_int_equal(rc, 0);
			next++;
			assert_true(atomic_load(&c->d->inflight) <= LIMIT);
		}
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(t[i].res, 4096);
	assert_int_equal(atomic_load(&c->d->inflight), 0);
}

static bool conf_seg_file_exists(conf *c, uint64_t seg)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/hlog.%llu", c->dir, (unsigned long long)seg);
	return stat(path, &st) == 0;
}

static void test_device_removed_segments_are_gone_and_reads_there_fail(void **state)
{
	conf *c = *state;
	uint8_t *buf = conf_scratch(c, 4096);
	bool files = (c->d->caps & DEV_CAP_PERSISTENT) != 0;

	conf_layout(c->q, 4 * CONF_SEG, 4);
	if (files)
		assert_true(conf_seg_file_exists(c, 1));
	assert_int_equal(dev_segment_remove(c->d, 1), 0);
	if (files) {
		assert_false(conf_seg_file_exists(c, 1));
		assert_true(conf_seg_file_exists(c, 0));
	}
	assert_int_equal(conf_read(c->q, CONF_SEG + 4096, buf, 4096), -ENOENT);
	assert_int_equal(conf_write(c->q, CONF_SEG, buf, 4096), -ENOENT);
	assert_int_equal(conf_read(c->q, 0, buf, 4096), 4096);
	/* Truncate below segment 3: 0 and 2 go too, 3 stays. */
	assert_int_equal(dev_truncate_until(c->d, 3 * (uint64_t)CONF_SEG + 4096), 0);
	if (files) {
		assert_false(conf_seg_file_exists(c, 0));
		assert_false(conf_seg_file_exists(c, 2));
		assert_true(conf_seg_file_exists(c, 3));
	}
	assert_int_equal(conf_read(c->q, 0, buf, 4096), -ENOENT);
	assert_int_equal(conf_read(c->q, 2 * (uint64_t)CONF_SEG, buf, 4096), -ENOENT);
	assert_int_equal(conf_read(c->q, 3 * (uint64_t)CONF_SEG, buf, 4096), 4096);
	/* Removing an already removed segment is fine. */
	assert_int_equal(dev_segment_remove(c->d, 1), 0);
}

static void test_device_flush_and_sync_succeed_after_writes(void **state)
{
	conf *c = *state;
	uint8_t *buf = conf_scratch(c, 4096);
	tio t;

	conf_fill(buf, 4096, 0, 8);
	assert_int_equal(conf_write(c->q, 0, buf, 4096), 4096);
	tio_init(&t, 0, NULL, 0);
	assert_int_equal(conf_io(c->q, &t, DEV_OP_FLUSH), 0);
	tio_init(&t, 9 * (uint64_t)CONF_SEG, NULL, 0);      /* a segment that does not exist */
	assert_int_equal(conf_io(c->q, &t, DEV_OP_FLUSH), 0);
	assert_int_equal(dev_sync(c->d), 0);
}

typedef struct conf_thread_arg {
	dev *d;
	uint64_t base;
	int ok;                 /* callbacks that ran on this thread */
	int wrong;              /* callbacks that ran elsewhere */
	pthread_t self;
} conf_thread_arg;

static void conf_thread_done(dev_req *r, int64_t res)
{
	conf_thread_arg *a = r->ctx;
	if (pthread_equal(pthread_self(), a->self) && res == 4096)
		a->ok++;
	else
		a->wrong++;
}

static void *conf_thread_main(void *arg)
{
	conf_thread_arg *a = arg;
	enum { N = 32 };
	dev_queue *q = NULL;
	dev_req reqs[N];
	struct iovec iov[N];
	uint8_t *bufs = NULL;

	a->self = pthread_self();
	if (dev_queue_open(a->d, &q) != 0 || posix_memalign((void **)&bufs, CONF_ALIGN, N * 4096) != 0) {
		a->wrong = -1;
		dev_queue_close(q);
		return NULL;
	}
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			memset(&reqs[i], 0, sizeof(reqs[i]));
			iov[i].iov_base = bufs + i * 4096;
			iov[i].iov_len = 4096;
			reqs[i].offset = a->base + (uint64_t)i * 4096;
			reqs[i].iov = &iov[i];
			reqs[i].iovcnt = 1;
			reqs[i].done = conf_thread_done;
			reqs[i].ctx = a;
			int rc = round % 2 ? dev_read(q, &reqs[i]) : dev_write(q, &reqs[i]);
			if (rc != 0)
				a->wrong++;
		}
		dev_submit(q);
		while (dev_queue_pending(q) > 0)
			if (dev_reap(q, 5) == 0)
				dev_wait(q, 1, 100000000LL);
	}
	dev_queue_close(q);
	free(bufs);
	return NULL;
}

static void test_device_runs_callbacks_only_on_the_owning_thread(void **state)
{
	conf *c = *state;
	enum { T = 3 };
	pthread_t th[T];
	conf_thread_arg a[T];

	for (int i = 0; i < T; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].d = c->d;
		a[i].base = (uint64_t)i * 2 * CONF_SEG;
		assert_int_equal(pthread_create(&th[i], NULL, conf_thread_main, &a[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].wrong, 0);
		assert_int_equal(a[i].ok, 4 * 32);
	}
	/* And the main thread's own queue saw none of theirs. */
	assert_int_equal(dev_queue_pending(c->q), 0);
	assert_int_equal(dev_reap(c->q, 100), 0);
}

static void test_device_queue_fd_wakes_an_event_loop_for_completions(void **state)
{
	conf *c = *state;
	enum { N = 16 };
	uint8_t *bufs = conf_scratch(c, N * 4096);
	tio t[N];
	int done = 0, fd = dev_queue_fd(c->q);

	assert_true(fd >= 0);
	assert_int_equal(dev_queue_fd(c->q), fd);          /* the same fd every time */
	conf_layout(c->q, CONF_SEG, 6);
	for (int i = 0; i < N; i++) {
		tio_init(&t[i], (uint64_t)i * 4096, bufs + i * 4096, 4096);
		t[i].counter = &done;
		assert_int_equal(dev_read(c->q, &t[i].req), 0);
	}
	assert_true(dev_submit(c->q) >= 0);
	/* The event-loop protocol of device.h: reap until empty, then sleep on the fd. */
	int sleeps = 0;
	while (done < N) {
		if (dev_reap(c->q, 1024) > 0)
			continue;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int rc = poll(&p, 1, 2000);
		assert_true(rc == 1);                          /* woken, not timed out */
		uint64_t v;
		assert_int_equal(read(fd, &v, 8), 8);
		assert_true(++sleeps <= N);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(t[i].res, 4096);
}

static void test_device_wait_blocks_until_completions_are_ready(void **state)
{
	conf *c = *state;
	enum { N = 8 };
	uint8_t *bufs = conf_scratch(c, N * 4096);
	tio t[N];
	int done = 0;

	conf_layout(c->q, CONF_SEG, 6);
	for (int i = 0; i < N; i++) {
		tio_init(&t[i], (uint64_t)i * 4096, bufs + i * 4096, 4096);
		t[i].counter = &done;
		assert_int_equal(dev_read(c->q, &t[i].req), 0);
	}
	/* No dev_submit: dev_wait submits what is queued, then waits for all of it. */
	assert_int_equal(dev_wait(c->q, N, -1), 0);
	/* Asking for more than is in flight waits only for what can come. */
	assert_int_equal(dev_wait(c->q, 1000, -1), 0);
	while (done < N) {
		int n = dev_reap(c->q, N);
		if (n == 0)   /* a backend may need another wait after a partial one */
			assert_int_equal(dev_wait(c->q, 1, 1000000000LL), 0);
	}
	assert_int_equal(done, N);
	/* Nothing in flight: returns at once. */
	assert_int_equal(dev_wait(c->q, 1, -1), 0);
}

static void test_device_keeps_data_after_close_and_reopen(void **state)
{
	conf *c = *state;
	const uint64_t span = 3 * CONF_SEG + 8192;
	uint8_t *buf = conf_scratch(c, span), *want = conf_scratch(c, span);

	if (!(c->d->caps & DEV_CAP_PERSISTENT))
		skip();   /* memory: nothing outlives the device */
	conf_fill(want, span, 0, 11);
	assert_int_equal(conf_write(c->q, 0, want, span), (int64_t)span);
	assert_int_equal(dev_segment_remove(c->d, 0), 0);
	conf_close(c);
	assert_int_equal(conf_open(c), 0);
	/* Segment 0 was removed before the close and stays gone. */
	assert_int_equal(conf_read(c->q, 0, buf, 4096), -ENOENT);
	/* The rest is intact, and the written end is where it was. */
	assert_int_equal(conf_read(c->q, CONF_SEG, buf, span - CONF_SEG + 4096),
	                 (int64_t)(span - CONF_SEG));
	assert_memory_equal(buf, want + CONF_SEG, span - CONF_SEG);
	/* Truncation reaches files this process never opened. */
	assert_true(conf_seg_file_exists(c, 2));
	assert_int_equal(dev_truncate_until(c->d, 3 * (uint64_t)CONF_SEG), 0);
	assert_false(conf_seg_file_exists(c, 1));
	assert_false(conf_seg_file_exists(c, 2));
	assert_int_equal(conf_read(c->q, 3 * (uint64_t)CONF_SEG, buf, 8192), 8192);
	assert_memory_equal(buf, want + 3 * CONF_SEG, 8192);
}

static void test_device_prepares_a_segment_before_its_first_write(void **state)
{
	conf *c = *state;
	uint8_t *buf = conf_scratch(c, 4096);

	assert_int_equal(dev_segment_prepare(c->d, 5), 0);
	if (c->d->caps & DEV_CAP_PERSISTENT)
		assert_true(conf_seg_file_exists(c, 5));
	assert_int_equal(conf_read(c->q, 5 * (uint64_t)CONF_SEG, buf, 4096), 0);   /* nothing written */
	conf_fill(buf, 4096, 5 * (uint64_t)CONF_SEG, 9);
	assert_int_equal(conf_write(c->q, 5 * (uint64_t)CONF_SEG, buf, 4096), 4096);
	assert_int_equal(dev_truncate_until(c->d, 6 * (uint64_t)CONF_SEG), 0);
	assert_int_equal(dev_segment_prepare(c->d, 5), -ENOENT);                      /* removed */
}

static void test_device_names_are_case_insensitive_and_unknown_ones_explained(void **state)
{
	conf *c = *state;
	dev_config cfg = c->cfg;
	char upper[64], err[256] = "";
	dev *d = NULL;
	size_t i;

	for (i = 0; CONF_TYPE[i] && i < sizeof(upper) - 1; i++)
		upper[i] = (char)(CONF_TYPE[i] >= 'a' && CONF_TYPE[i] <= 'z' ? CONF_TYPE[i] - 32 : CONF_TYPE[i]);
	upper[i] = 0;
	cfg.type = upper;
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), 0);
	dev_close(d);
	cfg.type = "floppy";
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -ENOENT);
	assert_null(d);
	assert_non_null(strstr(err, "floppy"));
	cfg.type = CONF_TYPE;
	cfg.segment_bytes = 3 * CONF_SEG;                  /* not a power of two */
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "power of two"));
}

#include "device/conf_disk.h"

/* ---- main ----------------------------------------------------------------------------------- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_device_reports_sector_size_alignment_and_capabilities,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_round_trips_writes_at_random_aligned_offsets_and_sizes,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_vectored_write_reads_back_through_other_splits,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_completes_many_reads_in_flight_each_with_its_own_data,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_reads_and_writes_across_segment_boundaries,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_read_past_the_written_end_is_short,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_rejects_misaligned_offsets_lengths_and_buffers,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_throttle_answers_eagain_past_the_limit,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_removed_segments_are_gone_and_reads_there_fail,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_flush_and_sync_succeed_after_writes,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_runs_callbacks_only_on_the_owning_thread,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_queue_fd_wakes_an_event_loop_for_completions,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_wait_blocks_until_completions_are_ready,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_keeps_data_after_close_and_reopen,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_prepares_a_segment_before_its_first_write,
		                                conf_setup, conf_teardown),
		cmocka_unit_test_setup_teardown(test_device_names_are_case_insensitive_and_unknown_ones_explained,
		                                conf_setup, conf_teardown),
		CONF_DISK_TESTS
		CONF_EXTRA_TESTS
	};
	conf probe;
	char err[256] = "";
	int rc;

	/* SKIP, never pass, when the backend is not here: not built, or refused by this kernel or file
	 * system. */
	memset(&probe, 0, sizeof(probe));
	if (dev_test_dir_make(probe.dir, sizeof(probe.dir), "devtest") != 0)
		return 1;
	conf_cfg(&probe);
	rc = dev_open(&probe.cfg, &probe.d, err, sizeof(err));
	if (rc == 0)
		dev_close(probe.d);
	dev_test_dir_remove(probe.dir);
	if (rc == -ENOENT || rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP) {
		printf("SKIP: device '%s' is not available here: %s\n", CONF_TYPE, err);
		return 77;
	}
	if (rc) {
		printf("device '%s' failed to open: %s: %s\n", CONF_TYPE, spw_strerror(rc), err);
		return 1;
	}
	return cmocka_run_group_tests_name("device " CONF_TYPE, tests, NULL, NULL);
}

#endif
