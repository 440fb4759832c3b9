/*
 * sg_suite.h - scatter-gather reads of the storage tier (hlog.c note 21), written once and included
 * once per device backend. The including file defines SG_TYPE, the --device-type string.
 *
 * Each test loads small records into a store whose memory is a small fraction of the data, so the
 * first records loaded live on the device only, then issues many pending reads at once (one op_ctx
 * each, as the server's look-ahead over a pipeline does) and drives them the way a worker does:
 * poll, re-run each op whose ready callback came, release it once done.
 */
#ifndef SPW_TEST_SG_SUITE_H
#define SPW_TEST_SG_SUITE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "log_test.h"

#define SG_PAGE (16u * 1024u)
#define SG_PAGES 8
#define SG_DEADLINE_MS 5000          /* a drive without completion for this long fails the test */

typedef struct sg_env {
	char dir[64];
	dev *d;
	hlog *l;
	hlog_session *s;
	int fd;
	int spurious;                    /* ready callbacks for an op that was not parked */
	int load_op;                     /* op_ctx of the loading writes */
} sg_env;

typedef struct sg_op {
	int key;
	bool parked;
	int ready;
	int rc;
	read_buf *b;
} sg_op;

static int sg_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int64_t sg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sg_ready(void *cb_arg, void *op_ctx)
{
	sg_env *e = cb_arg;
	if (op_ctx == &e->load_op)
		return;
	sg_op *op = op_ctx;
	if (!op->parked)
		e->spurious++;
	op->ready++;
}

/* A store of SG_PAGES pages over a fresh device; throttle 0 = the device's default. */
static void sg_open(sg_env *e, bool no_merge, uint32_t throttle)
{
	char err[256] = "";
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/spw-sg.XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	dev_config dc;
	dev_config_init(&dc);
	dc.type = SG_TYPE;
	dc.dir = e->dir;
	dc.prefix = "hlog.";
	dc.segment_bytes = 1u << 20;
	dc.allow_fallback = true;
	if (throttle)
		dc.throttle_limit = throttle;
	int rc = dev_open(&dc, &e->d, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "dev_open(%s): %s: %s\n", SG_TYPE, spw_strerror(rc), err);
	assert_int_equal(rc, 0);
	hlog_config c = log_test_config((uint64_t)SG_PAGES * SG_PAGE, SG_PAGE, 90);
	c.index_bytes = 1u << 20;
	c.dev = e->d;
	c.initial_io_bytes = 128;
	c.no_read_merge = no_merge;
	assert_int_equal(hlog_open(&e->l, &c), 0);
	assert_int_equal(hlog_session_open(e->l, &e->s), 0);
	assert_int_equal(hlog_session_attach(e->s, sg_ready, e), 0);
	e->fd = hlog_session_fd(e->s);
	assert_true(e->fd >= 0);
	hlog_session_set_now(e->s, 1);
}

static void sg_close(sg_env *e)
{
	hlog_session_close(e->s);
	hlog_close(e->l);
	dev_close(e->d);
	nftw(e->dir, sg_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Nothing ready: sleep on the session's fd while its own requests are in flight, else briefly. */
static void sg_wait(sg_env *e)
{
	if (hlog_session_inflight(e->s)) {
		struct pollfd p = { .fd = e->fd, .events = POLLIN };
		if (poll(&p, 1, 5) > 0) {
			uint64_t v;
			ssize_t n = read(e->fd, &v, sizeof(v));
			(void)n;
		}
	} else {
		usleep(100);
	}
}

static void sg_key(test_key *t, int i)
{
	test_key_make(t, "sg", i);
}

/* Deterministic value of key i, version v: len bytes into buf (at least 4096). */
static size_t sg_value(int i, int v, size_t maxlen, uint8_t *buf)
{
	uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)v * 40503u;
	size_t len = 1 + h % maxlen;
	for (size_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(h >> (k % 24) ^ k ^ (uint32_t)v);
	return len;
}

/* A write (upsert, or delete with val NULL) retried through its pending states until done. */
static int sg_write(sg_env *e, int i, const void *val, size_t len)
{
	test_key t;
	sg_key(&t, i);
	int64_t deadline = sg_now_ms() + SG_DEADLINE_MS;
	for (;;) {
		hlog_session_set_op(e->s, &e->load_op);
		hlog_session_protect(e->s);
		int rc = val ? hlog_upsert(e->s, &t.k, val, len, HLOG_NO_EXPIRY) : hlog_delete(e->s, &t.k);
		hlog_session_unprotect(e->s);
		if (rc != HLOG_PENDING) {
			hlog_session_release(e->s, &e->load_op);
			return rc;
		}
		if (hlog_session_poll(e->s) == 0)
			sg_wait(e);
		assert_true(sg_now_ms() < deadline);
	}
}

/* Load keys [0, n) with version v of values up to maxlen bytes, polling as a worker does. */
static void sg_load(sg_env *e, int n, int v, size_t maxlen)
{
	uint8_t buf[4096];
	for (int i = 0; i < n; i++) {
		size_t len = sg_value(i, v, maxlen, buf);
		assert_int_equal(sg_write(e, i, buf, len), HLOG_OK);
		if (i % 32 == 31)
			hlog_session_poll(e->s);
	}
	hlog_session_poll(e->s);
}

static int sg_run(sg_env *e, sg_op *op)
{
	test_key t;
	sg_key(&t, op->key);
	hlog_session_set_op(e->s, op);
	op->b->calls = 0;
	op->rc = hlog_read(e->s, &t.k, read_copy_fn, op->b);
	return op->rc;
}

/* Run every read of ops before polling once (all their device reads queue in the same pass), then
 * drive the pending ones to completion. Returns how many went pending. */
static int sg_drive(sg_env *e, sg_op *ops, int n)
{
	int left = 0, pended = 0;
	hlog_session_protect(e->s);
	for (int i = 0; i < n; i++) {
		ops[i].ready = 0;
		ops[i].parked = sg_run(e, &ops[i]) == HLOG_PENDING;
		left += ops[i].parked;
	}
	hlog_session_unprotect(e->s);
	pended = left;
	int64_t deadline = sg_now_ms() + SG_DEADLINE_MS;
	while (left) {
		bool progress = hlog_session_poll(e->s) > 0;
		hlog_session_protect(e->s);
		for (int i = 0; i < n; i++) {
			if (!ops[i].parked || !ops[i].ready)
				continue;
			ops[i].ready = 0;
			progress = true;
			if (sg_run(e, &ops[i]) != HLOG_PENDING) {
				ops[i].parked = false;
				left--;
			}
		}
		hlog_session_unprotect(e->s);
		if (!progress)
			sg_wait(e);
		assert_true(sg_now_ms() < deadline);
	}
	for (int i = 0; i < n; i++)
		hlog_session_release(e->s, &ops[i]);
	return pended;
}

static sg_op *sg_ops_new(int n)
{
	sg_op *ops = calloc((size_t)n, sizeof(*ops));
	assert_non_null(ops);
	for (int i = 0; i < n; i++) {
		ops[i].b = calloc(1, sizeof(read_buf));
		assert_non_null(ops[i].b);
	}
	return ops;
}

static void sg_ops_free(sg_op *ops, int n)
{
	for (int i = 0; i < n; i++)
		free(ops[i].b);
	free(ops);
}

/* ops[i] read key's version v (or found nothing when v < 0). */
static void sg_assert_value(const sg_op *op, int v, size_t maxlen)
{
	if (v < 0) {
		assert_int_equal(op->rc, HLOG_NOTFOUND);
		return;
	}
	uint8_t want[4096];
	size_t len = sg_value(op->key, v, maxlen, want);
	assert_int_equal(op->rc, HLOG_OK);
	assert_int_equal(op->b->calls, 1);
	assert_int_equal(op->b->len, len);
	assert_memory_equal(op->b->data, want, len);
}

static hlog_info sg_info(sg_env *e)
{
	hlog_info i;
	hlog_info_get(e->l, &i);
	return i;
}

/* ---------------- tests ---------------- */

static void test_sg_neighbouring_records_read_at_once_share_device_reads(void **state)
{
	(void)state;
	enum { N = 6000, OPS = 64, FIRST = 100 };
	sg_env e;
	sg_open(&e, false, 0);
	sg_load(&e, N, 1, 60);   /* ~80-byte records: several to a sector */
	hlog_info i0 = sg_info(&e);
	assert_true(i0.head > i0.begin);

	sg_op *ops = sg_ops_new(OPS);
	for (int k = 0; k < OPS; k++)
		ops[k].key = FIRST + k;   /* loaded one after another: same and adjacent sectors */
	assert_int_equal(sg_drive(&e, ops, OPS), OPS);   /* all of them cold */
	for (int k = 0; k < OPS; k++)
		sg_assert_value(&ops[k], 1, 60);
	hlog_info i1 = sg_info(&e);
	uint64_t reads = i1.device_reads - i0.device_reads;
	fprintf(stderr, "  %d ops: device reads %llu merged %llu dedup %llu submits %llu\n", OPS,
	        (unsigned long long)reads, (unsigned long long)(i1.merged_reads - i0.merged_reads),
	        (unsigned long long)(i1.dedup_hits - i0.dedup_hits),
	        (unsigned long long)(i1.device_submits - i0.device_submits));
	assert_true(i1.merged_reads > i0.merged_reads);
	assert_true(reads < OPS);
	assert_true(reads >= 1);
	/* Every record read asked for is a device read, a merged one or a shared one. */
	assert_int_equal(reads + (i1.merged_reads - i0.merged_reads) + (i1.dedup_hits - i0.dedup_hits),
	                 (uint64_t)OPS);
	assert_true(i1.device_submits > i0.device_submits);
	assert_true(i1.ios_submitted - i0.ios_submitted >= reads);
	assert_true(i1.queue_depth_max >= 1);
	assert_int_equal(i1.pending_errors, 0);
	assert_int_equal(e.spurious, 0);
	sg_ops_free(ops, OPS);
	sg_close(&e);
}

/* Fixed-size values: records 700-odd bytes apart, so that the first (128-byte) reads of two
 * neighbours never share a sector and can go out as one vectored read. */
static size_t sg_value_fixed(int i, uint8_t *buf)
{
	for (size_t k = 0; k < 700; k++)
		buf[k] = (uint8_t)((uint32_t)i * 31u + (uint32_t)k * 7u);
	return 700;
}

static void test_sg_neighbours_in_separate_sectors_are_read_vectored_into_their_own_buffers(void **state)
{
	(void)state;
	enum { N = 2000, OPS = 64, FIRST = 50 };
	sg_env e;
	uint8_t want[700];
	sg_open(&e, false, 0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(sg_write(&e, i, want, sg_value_fixed(i, want)), HLOG_OK);
		if (i % 32 == 31)
			hlog_session_poll(e.s);
	}
	hlog_session_poll(e.s);
	hlog_info i0 = sg_info(&e);
	sg_op *ops = sg_ops_new(OPS);
	for (int k = 0; k < OPS; k++)
		ops[k].key = FIRST + k;
	assert_int_equal(sg_drive(&e, ops, OPS), OPS);
	for (int k = 0; k < OPS; k++) {
		assert_int_equal(ops[k].rc, HLOG_OK);
		assert_int_equal(ops[k].b->len, sg_value_fixed(ops[k].key, want));
		assert_memory_equal(ops[k].b->data, want, sizeof(want));
	}
	hlog_info i1 = sg_info(&e);
	uint64_t reads = i1.device_reads - i0.device_reads, merged = i1.merged_reads - i0.merged_reads;
	uint64_t vec = i1.vectored_reads - i0.vectored_reads, second = i1.second_reads - i0.second_reads;
	fprintf(stderr, "  %d ops: device reads %llu merged %llu vectored %llu second %llu\n", OPS,
	        (unsigned long long)reads, (unsigned long long)merged, (unsigned long long)vec,
	        (unsigned long long)second);
	assert_true(vec >= 1);
	assert_true(merged >= vec);
	/* Each op asked for a first read and (700 > 128 bytes) a second one. */
	assert_int_equal(second, (uint64_t)OPS);
	assert_int_equal(reads + merged + (i1.dedup_hits - i0.dedup_hits), (uint64_t)OPS + second);
	assert_int_equal(i1.pending_errors, i0.pending_errors);
	sg_ops_free(ops, OPS);
	sg_close(&e);
}

static void test_sg_one_record_read_by_two_ops_goes_to_the_device_once(void **state)
{
	(void)state;
	enum { N = 6000 };
	sg_env e;
	sg_open(&e, false, 0);
	sg_load(&e, N, 1, 60);
	sg_op *ops = sg_ops_new(3);

	/* Two op_ctx, one key. */
	ops[0].key = ops[1].key = 7;
	hlog_info i0 = sg_info(&e);
	assert_int_equal(sg_drive(&e, ops, 2), 2);
	sg_assert_value(&ops[0], 1, 60);
	sg_assert_value(&ops[1], 1, 60);
	hlog_info i1 = sg_info(&e);
	assert_int_equal(i1.device_reads - i0.device_reads, 1);
	assert_int_equal(i1.dedup_hits - i0.dedup_hits, 1);
	assert_int_equal(i1.pending_reads - i0.pending_reads, 2);   /* each op has its own fetch */
	assert_int_equal(i1.pending_found - i0.pending_found, 2);

	/* One op_ctx asking twice: its fetch cache already holds the read in flight. */
	ops[2].key = 9;
	hlog_session_protect(e.s);
	ops[2].parked = true;
	assert_int_equal(sg_run(&e, &ops[2]), HLOG_PENDING);
	assert_int_equal(sg_run(&e, &ops[2]), HLOG_PENDING);
	hlog_session_unprotect(e.s);
	assert_int_equal(sg_drive(&e, &ops[2], 1), 1);
	sg_assert_value(&ops[2], 1, 60);
	hlog_info i2 = sg_info(&e);
	assert_int_equal(i2.device_reads - i1.device_reads, 1);
	assert_int_equal(i2.pending_reads - i1.pending_reads, 1);
	assert_int_equal(e.spurious, 0);
	sg_ops_free(ops, 3);
	sg_close(&e);
}

/* The same randomized workload on a store that merges and shares reads and on one that does not:
 * every read sees the same bytes (and the model's). */
static void test_sg_merged_and_single_reads_give_identical_bytes(void **state)
{
	(void)state;
	enum { N = 3000, BATCH = 64, BATCHES = 12, MAXLEN = 2000 };
	sg_env e[2];
	int *ver = malloc(N * sizeof(int));
	assert_non_null(ver);
	sg_op *ops[2] = { sg_ops_new(BATCH), sg_ops_new(BATCH) };
	for (int m = 0; m < 2; m++) {
		sg_open(&e[m], m == 1, 0);
		srand(4242);
		uint8_t buf[4096];
		sg_load(&e[m], N, 1, MAXLEN);   /* values up to 2000 bytes: some need a second read */
		for (int i = 0; i < N; i++)
			ver[i] = 1;
		for (int k = 0; k < N / 3; k++) {   /* overwrites and deletes at random */
			int i = rand() % N;
			if (rand() % 4 == 0) {
				sg_write(&e[m], i, NULL, 0);
				ver[i] = -1;
			} else {
				ver[i] = 2 + k;
				size_t len = sg_value(i, ver[i], MAXLEN, buf);
				assert_int_equal(sg_write(&e[m], i, buf, len), HLOG_OK);
			}
			if (k % 32 == 31)
				hlog_session_poll(e[m].s);
		}
	}
	int pended = 0;
	unsigned seed = 99;
	for (int b = 0; b < BATCHES; b++) {
		int base = rand_r(&seed) % (N - 400);
		for (int k = 0; k < BATCH; k++) {
			/* Mostly a window of nearby keys (neighbours on the device), some repeats, some far. */
			int r = rand_r(&seed) % 8;
			int key = r == 0 ? rand_r(&seed) % N : r == 1 && k ? ops[0][k - 1].key : base + rand_r(&seed) % 400;
			ops[0][k].key = ops[1][k].key = key;
		}
		for (int m = 0; m < 2; m++)
			pended += sg_drive(&e[m], ops[m], BATCH);
		for (int k = 0; k < BATCH; k++) {
			sg_assert_value(&ops[0][k], ver[ops[0][k].key], MAXLEN);
			assert_int_equal(ops[0][k].rc, ops[1][k].rc);
			assert_int_equal(ops[0][k].b->len, ops[1][k].b->len);
			assert_memory_equal(ops[0][k].b->data, ops[1][k].b->data, ops[0][k].b->len);
		}
	}
	hlog_info merged = sg_info(&e[0]), single = sg_info(&e[1]);
	fprintf(stderr, "  merged: device reads %llu merged %llu dedup %llu second %llu | single: device"
	        " reads %llu\n",
	        (unsigned long long)merged.device_reads, (unsigned long long)merged.merged_reads,
	        (unsigned long long)merged.dedup_hits, (unsigned long long)merged.second_reads,
	        (unsigned long long)single.device_reads);
	assert_true(pended > BATCH);
	assert_true(merged.merged_reads + merged.dedup_hits > 0);
	assert_true(merged.second_reads > 0);
	assert_int_equal(single.merged_reads, 0);
	assert_int_equal(single.dedup_hits, 0);
	assert_true(merged.device_reads < single.device_reads);
	assert_int_equal(merged.pending_errors, 0);
	assert_int_equal(single.pending_errors, 0);
	for (int m = 0; m < 2; m++) {
		assert_int_equal(e[m].spurious, 0);
		sg_ops_free(ops[m], BATCH);
		sg_close(&e[m]);
	}
	free(ver);
}

/* More reads than the device's throttle: the rest wait in the store (no error, no blocking) and go
 * out as completions free room; the queue never holds more than the throttle. */
static void test_sg_reads_beyond_the_throttle_wait_in_the_store_and_all_complete(void **state)
{
	(void)state;
	enum { N = 6000, OPS = 200, THROTTLE = 4 };
	for (int merge = 0; merge < 2; merge++) {
		sg_env e;
		sg_open(&e, merge == 0, THROTTLE);
		sg_load(&e, N, 1, 60);
		sg_op *ops = sg_ops_new(OPS);
		for (int k = 0; k < OPS; k++)
			ops[k].key = (k * 37) % 3000;   /* spread: few neighbours */
		hlog_info i0 = sg_info(&e);
		assert_int_equal(sg_drive(&e, ops, OPS), OPS);
		for (int k = 0; k < OPS; k++)
			sg_assert_value(&ops[k], 1, 60);
		hlog_info i1 = sg_info(&e);
		assert_true(i1.queue_depth_max >= 1);
		assert_true(i1.queue_depth_max <= THROTTLE);
		assert_true(i1.device_submits - i0.device_submits >= (i1.device_reads - i0.device_reads) / THROTTLE);
		if (merge == 0)
			assert_true(i1.device_reads - i0.device_reads >= OPS);
		assert_int_equal(i1.pending_errors, 0);
		assert_int_equal(hlog_session_inflight(e.s), 0);
		assert_int_equal(e.spurious, 0);
		sg_ops_free(ops, OPS);
		sg_close(&e);
	}
}

static bool sg_backend_available(void)
{
	char dir[64], err[256] = "";
	snprintf(dir, sizeof(dir), "/tmp/spw-sg.XXXXXX");
	if (!mkdtemp(dir))
		return false;
	dev_config dc;
	dev_config_init(&dc);
	dc.type = SG_TYPE;
	dc.dir = dir;
	dc.prefix = "hlog.";
	dc.segment_bytes = 1u << 20;
	dc.allow_fallback = true;
	dev *d;
	int rc = dev_open(&dc, &d, err, sizeof(err));
	if (rc == 0) {
		fprintf(stderr, "sg suite: --device-type %s opened as %s\n", SG_TYPE, d->name);
		dev_close(d);
	} else {
		fprintf(stderr, "sg suite: --device-type %s refused: %s: %s\n", SG_TYPE, spw_strerror(rc), err);
	}
	nftw(dir, sg_rm, 16, FTW_DEPTH | FTW_PHYS);
	return rc == 0;
}

int main(void)
{
	if (!sg_backend_available())
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sg_neighbouring_records_read_at_once_share_device_reads),
		cmocka_unit_test(test_sg_neighbours_in_separate_sectors_are_read_vectored_into_their_own_buffers),
		cmocka_unit_test(test_sg_one_record_read_by_two_ops_goes_to_the_device_once),
		cmocka_unit_test(test_sg_merged_and_single_reads_give_identical_bytes),
		cmocka_unit_test(test_sg_reads_beyond_the_throttle_wait_in_the_store_and_all_complete),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
