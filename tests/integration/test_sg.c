/*
 * test_sg.c - scatter-gather GET (--sg-get, park.c note 3) end to end: a spillway-server with
 * --storage-tier and a tiny --memory, so most keys are on the device, answers pipelines that mix
 * GETs that hit memory with GETs that go to the device, and writes in between, exactly as a model
 * applied request by request says.
 *
 * Notes:
 *  1. Sizes: --page 64k --memory 512k and SG_KEYS keys of about 100 B (2.5 MB of log: most are
 *     cold). Under AddressSanitizer fewer keys and shorter pipelines.
 *  2. Every pipeline is sent in one write, so the server finds it whole in the read buffer and the
 *     look-ahead of a parked GET sees the requests after it; then every reply is read and compared
 *     byte for byte with the model's.
 *  3. sg-get on and off (CONFIG SET at run time) must give the same reply stream for the same
 *     workload; the INFO counters (sg_lookahead_*) say whether the look-ahead ran.
 *  4. Every test here that reads cold keys proves it from INFO (itest_stat_grew): device reads
 *     (tier_device_reads) grew, or the look-ahead ran (sg_lookahead_runs, sg_lookahead_gets), so a
 *     change that kept every key in memory, or switched the look-ahead off, fails instead of
 *     passing without testing the path.
 *  5. A closed-loop client (a window of requests in flight, each reply answered by more bytes, cut
 *     anywhere, even inside a request) makes the server read and extend the look-ahead while a GET
 *     waits and send replies as soon as the reads before them are in (streaming), on the posix
 *     device and on an asynchronous one (localmemory with a completion thread).
 *  6. No timing assertions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/spw.h"
#include "support/itest.h"

#ifdef ITEST_ASAN
#define SG_KEYS 6000
#define SG_PIPE 300
#else
#define SG_KEYS 20000
#define SG_PIPE 1000
#endif

static itest_server g_srv;
static itest_conn g_c;
/* The model: generation of each key's value, -1 when deleted. */
static int g_gen[SG_KEYS];

/* ---------------- model and buffers ---------------- */

static size_t key_make(int i, char *buf)
{
	return (size_t)sprintf(buf, "sg:key:%d", i);
}

/* About 100 bytes, different for each key and generation. */
static size_t val_make(int i, int gen, char *buf)
{
	int n = sprintf(buf, "val-%d-gen-%d-", i, gen);
	int len = 90 + (i * 7 + gen) % 30;
	for (int k = n; k < len; k++)
		buf[k] = (char)('a' + (i + k + gen) % 26);
	return (size_t)len;
}

/* A request: argv as RESP; and its expected reply. */
typedef struct pipe_buf {
	itest_buf req, exp;
	int n;                         /* requests */
} pipe_buf;

static void pb_reset(pipe_buf *pb)
{
	pb->req.len = pb->exp.len = 0;
	pb->n = 0;
}

static void pb_free(pipe_buf *pb)
{
	free(pb->req.p);
	free(pb->exp.p);
	memset(pb, 0, sizeof(*pb));
}

static void exp_value(itest_buf *exp, int i)
{
	char v[256];
	if (g_gen[i] < 0) {
		itest_buf_add(exp, "$-1\r\n", 5);
		return;
	}
	itest_buf_bulk(exp, v, val_make(i, g_gen[i], v));
}

static void pb_get(pipe_buf *pb, int i)
{
	char k[64];
	itest_buf_add(&pb->req, "*2\r\n$3\r\nGET\r\n", 13);
	itest_buf_bulk(&pb->req, k, key_make(i, k));
	exp_value(&pb->exp, i);
	pb->n++;
}

static void pb_set(pipe_buf *pb, int i, int gen)
{
	char k[64], v[256];
	itest_buf_add(&pb->req, "*3\r\n$3\r\nSET\r\n", 13);
	itest_buf_bulk(&pb->req, k, key_make(i, k));
	itest_buf_bulk(&pb->req, v, val_make(i, gen, v));
	itest_buf_add(&pb->exp, "+OK\r\n", 5);
	g_gen[i] = gen;
	pb->n++;
}

static void pb_del(pipe_buf *pb, int i)
{
	char k[64];
	itest_buf_add(&pb->req, "*2\r\n$3\r\nDEL\r\n", 13);
	itest_buf_bulk(&pb->req, k, key_make(i, k));
	itest_buf_fmt(&pb->exp, ":%d\r\n", g_gen[i] >= 0 ? 1 : 0);
	g_gen[i] = -1;
	pb->n++;
}

static void pb_mget(pipe_buf *pb, const int *keys, int n)
{
	char k[64];
	itest_buf_fmt(&pb->req, "*%d\r\n$4\r\nMGET\r\n", n + 1);
	itest_buf_fmt(&pb->exp, "*%d\r\n", n);
	for (int j = 0; j < n; j++) {
		itest_buf_bulk(&pb->req, k, key_make(keys[j], k));
		exp_value(&pb->exp, keys[j]);
	}
	pb->n++;
}

/* Send the pipeline in one write; append every reply to got (may be NULL) and compare each with the
 * expected one. */
static void pb_run(pipe_buf *pb, itest_buf *got)
{
	assert_int_equal(itest_conn_send(&g_c, pb->req.p, pb->req.len), 0);
	itest_replies_expect(&g_c, &g_srv, pb->exp.p, pb->exp.len, got);
	pb_reset(pb);
}

/* SET every key to generation gen on c, 500 per pipeline, the model following. 0, or -1 with err. */
static int keys_load(itest_conn *c, int gen, char *err, size_t errlen)
{
	pipe_buf pb = { 0 };
	int rc = 0;
	for (int i = 0; i < SG_KEYS && rc == 0; i++) {
		g_gen[i] = -1;
		pb_set(&pb, i, gen);
		if (pb.n == 500 || i == SG_KEYS - 1) {
			int se = itest_conn_send(c, pb.req.p, pb.req.len);
			if (se < 0) {
				snprintf(err, errlen, "send: %s", strerror(-se));
				rc = -1;
			} else if (itest_replies_check(c, pb.exp.p, pb.exp.len, NULL, err, errlen) < 0) {
				rc = -1;
			}
			pb_reset(&pb);
		}
	}
	pb_free(&pb);
	return rc;
}

/* A counter of INFO stats on the suite's connection. */
static long long stat(const char *name)
{
	return itest_info_stat(&g_c, name);
}

/* Fail unless counter name grew since before: the proof that a test's path ran (note 4). */
static void stat_grew(const char *name, long long before, const char *what)
{
	itest_stat_grew(&g_c, name, before, 1, what);
}

static void sg_set(const char *yesno)
{
	itest_expect(&g_c, "+OK\r\n", "CONFIG", "SET", "sg-get", yesno, NULL);
	char exp[64];
	snprintf(exp, sizeof(exp), "*2\r\n$6\r\nsg-get\r\n$%zu\r\n%s\r\n", strlen(yesno), yesno);
	itest_expect(&g_c, exp, "CONFIG", "GET", "sg-get", NULL);
}

static uint64_t rnd_state = 88172645463325252ULL;
static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 16);
}

/* ---------------- setup ---------------- */

static int server_setup(void **state)
{
	(void)state;
	const char *flags[] = {
		"--storage-tier", "--device-type", "posix", "--threads", "1", "--memory", "512k",
		"--page", "64k", "--segment", "4m", "--index", "4m", NULL,
	};
	if (itest_fixture_start(&g_srv, ITEST_SPILLWAY, flags, "sg") != 0)
		return -1;
	if (itest_conn_open(&g_c, g_srv.port) < 0)
		return -1;
	char err[1024];
	if (keys_load(&g_c, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "sg: loading the keys: %s\n", err);
		return -1;
	}
	return 0;
}

static int server_teardown(void **state)
{
	(void)state;
	itest_conn_close(&g_c);
	return itest_fixture_stop(&g_srv, "sg");
}

/* ---------------- tests ---------------- */

static void test_a_write_later_in_the_pipeline_is_not_seen_by_an_earlier_cold_get(void **state)
{
	(void)state;
	pipe_buf pb = { 0 };
	long long reads = stat("tier_device_reads");
	/* Cold keys (loaded first, long evicted): GET, then SET/DEL of the same key, then GET. */
	for (int j = 0; j < 20; j++) {
		int a = j * 3, b = j * 3 + 1, c = j * 3 + 2;
		pb_get(&pb, a);
		pb_get(&pb, b);
		pb_get(&pb, c);
		pb_set(&pb, a, 1000 + j);
		pb_del(&pb, b);
		pb_get(&pb, a);
		pb_get(&pb, b);
		pb_get(&pb, c);
	}
	pb_run(&pb, NULL);
	pb_free(&pb);
	stat_grew("tier_device_reads", reads, "GETs of keys loaded first, long evicted");
}

static void test_interleaved_get_set_del_pipelines_answer_in_order_with_the_right_values(void **state)
{
	(void)state;
	pipe_buf pb = { 0 };
	long long reads = stat("tier_device_reads");
	for (int round = 0; round < 6; round++) {
		for (int r = 0; r < SG_PIPE; r++) {
			/* Half the GETs on recently written keys (likely in memory), half anywhere (cold). */
			uint32_t x = rnd();
			int i = (x & 1) ? (int)((SG_KEYS - 1) - rnd() % 400) : (int)(rnd() % SG_KEYS);
			uint32_t op = rnd() % 100;
			if (op < 70)
				pb_get(&pb, i);
			else if (op < 85)
				pb_set(&pb, i, (g_gen[i] < 0 ? 0 : g_gen[i]) + 1);
			else
				pb_del(&pb, i);
		}
		pb_run(&pb, NULL);
	}
	pb_free(&pb);
	stat_grew("tier_device_reads", reads, "GETs of any key, most of them cold");
}

static void test_a_long_pipeline_of_cold_gets_parks_once_for_many_reads(void **state)
{
	(void)state;
	sg_set("yes");
	long long runs0 = stat("sg_lookahead_runs"), gets0 = stat("sg_lookahead_gets");
	long long pend0 = stat("sg_lookahead_pending"), reads = stat("tier_device_reads");
	long long merged = stat("tier_merged_reads");
	pipe_buf pb = { 0 };
	for (int r = 0; r < SG_PIPE; r++)
		pb_get(&pb, 100 + r);   /* loaded first: on the device */
	pb_run(&pb, NULL);
	pb_free(&pb);
	stat_grew("tier_device_reads", reads, "GETs of keys loaded first");
	/* Keys loaded one after another lie side by side on the device: the look-ahead's reads merge. */
	stat_grew("tier_merged_reads", merged, "GETs of neighbouring cold keys queued by one look-ahead");
	long long runs = stat("sg_lookahead_runs") - runs0, gets = stat("sg_lookahead_gets") - gets0;
	long long pend = stat("sg_lookahead_pending") - pend0;
	assert_true(runs >= 1);
	assert_true(gets > runs);
	/* Pending GETs per parked client: the parked one plus those its look-ahead queued. */
	assert_true((runs + pend) / runs > 1);
}

static void test_mget_of_1000_keys_half_cold_half_hot_answers_in_key_order(void **state)
{
	(void)state;
	pipe_buf pb = { 0 };
	int keys[1000];
	/* 500 keys written now (in memory) interleaved with 500 loaded first (on the device). */
	for (int j = 0; j < 500; j++)
		pb_set(&pb, SG_KEYS / 2 + j, 7);
	pb_run(&pb, NULL);
	for (int j = 0; j < 500; j++) {
		keys[2 * j] = 200 + j;
		keys[2 * j + 1] = SG_KEYS / 2 + j;
	}
	long long reads = stat("tier_device_reads"), merged = stat("tier_merged_reads");
	pb_mget(&pb, keys, 1000);
	pb_get(&pb, 200);
	pb_mget(&pb, keys + 1, 999);
	pb_run(&pb, NULL);
	pb_free(&pb);
	stat_grew("tier_device_reads", reads, "MGETs of 500 keys loaded first");
	stat_grew("tier_merged_reads", merged, "an MGET of 500 cold keys that lie side by side");
}

/* A workload that leaves the store as it found it, so it can run twice: GETs and MGETs of cold,
 * hot and missing keys, SETs of the value a key already has, and a scratch key written, read and
 * deleted within the pipeline. */
static void workload_build(pipe_buf *pb, uint64_t seed)
{
	rnd_state = seed;
	for (int r = 0; r < SG_PIPE; r++) {
		int i = (int)(rnd() % SG_KEYS);
		uint32_t op = rnd() % 100;
		if (op < 75) {
			pb_get(pb, i);
		} else if (op < 85) {
			int keys[8];
			for (int j = 0; j < 8; j++)
				keys[j] = (int)(rnd() % SG_KEYS);
			pb_mget(pb, keys, 8);
		} else if (op < 90) {
			if (g_gen[i] >= 0)
				pb_set(pb, i, g_gen[i]);
			else
				pb_del(pb, i);
		} else {
			/* The scratch key: SET, GET, DEL (it ends absent, as it started). */
			int s = SG_KEYS - 1;
			int old = g_gen[s];
			pb_set(pb, s, 5000 + r);
			pb_get(pb, s);
			if (old >= 0)
				pb_set(pb, s, old);
			else
				pb_del(pb, s);
		}
	}
}

static void test_sg_get_on_and_off_give_byte_identical_reply_streams(void **state)
{
	(void)state;
	itest_buf on = { 0 }, off = { 0 };
	pipe_buf pb = { 0 };

	sg_set("no");
	long long runs0 = stat("sg_lookahead_runs"), reads = stat("tier_device_reads");
	for (int round = 0; round < 3; round++) {
		workload_build(&pb, 1234567ULL + (uint64_t)round);
		pb_run(&pb, &off);
	}
	assert_int_equal(stat("sg_lookahead_runs"), runs0);   /* off: no look-ahead */
	stat_grew("tier_device_reads", reads, "the workload with sg-get off: GETs of cold keys");

	sg_set("yes");
	long long gets0 = stat("sg_lookahead_gets");
	for (int round = 0; round < 3; round++) {
		workload_build(&pb, 1234567ULL + (uint64_t)round);
		pb_run(&pb, &on);
	}
	assert_true(stat("sg_lookahead_runs") > runs0);
	stat_grew("sg_lookahead_gets", gets0, "the workload with sg-get on");
	assert_int_equal(on.len, off.len);
	assert_memory_equal(on.p, off.p, on.len);
	free(on.p);
	free(off.p);
	pb_free(&pb);
}

/* Drive a closed loop on c: requests built from the model (their expected replies recorded at once,
 * so later writes count), sent in random cuts while at most `window` complete requests wait for
 * replies; every reply compared in order. */
static void closed_loop_run(itest_conn *c, int n, int window, uint64_t seed)
{
	pipe_buf pb = { 0 };
	size_t *req_end = malloc(sizeof(size_t) * (size_t)n);
	size_t *exp_end = malloc(sizeof(size_t) * (size_t)n);
	assert_non_null(req_end);
	assert_non_null(exp_end);
	rnd_state = seed;
	for (int r = 0; r < n; r++) {
		int i = (rnd() & 1) ? (int)(rnd() % 2000) : (int)(rnd() % SG_KEYS);   /* many cold */
		uint32_t op = rnd() % 100;
		if (op < 84) {
			pb_get(&pb, i);
		} else if (op < 90) {
			int keys[5];
			for (int j = 0; j < 5; j++)
				keys[j] = (int)(rnd() % SG_KEYS);
			pb_mget(&pb, keys, 5);
		} else if (op < 96) {
			pb_set(&pb, i, (g_gen[i] < 0 ? 0 : g_gen[i]) + 1);
		} else {
			pb_del(&pb, i);
		}
		req_end[r] = pb.req.len;
		exp_end[r] = pb.exp.len;
	}
	size_t sent = 0;
	int complete = 0, replied = 0;
	while (replied < n) {
		while (complete - replied < window && sent < pb.req.len) {
			size_t cut = rnd() % 300 + 1;   /* not inside SPW_MIN: it evaluates twice */
			cut = SPW_MIN(cut, pb.req.len - sent);
			assert_int_equal(itest_conn_send(c, pb.req.p + sent, cut), 0);
			sent += cut;
			while (complete < n && req_end[complete] <= sent)
				complete++;
			if (rnd() % 3 == 0 && complete > replied)
				break;   /* sometimes read before the window is full */
		}
		size_t e0 = replied ? exp_end[replied - 1] : 0;
		char err[1024];
		if (itest_replies_check(c, pb.exp.p + e0, exp_end[replied] - e0, NULL, err, sizeof(err)) < 0)
			fail_msg("sg: closed loop reply %d of %d: %s", replied, n, err);
		replied++;
	}
	free(req_end);
	free(exp_end);
	pb_free(&pb);
}

static void test_a_closed_loop_client_gets_every_reply_in_order_while_its_gets_wait(void **state)
{
	(void)state;
	sg_set("yes");
	long long runs0 = stat("sg_lookahead_runs"), reads = stat("tier_device_reads");
	closed_loop_run(&g_c, SG_PIPE * 3, 32, 99991);
	closed_loop_run(&g_c, SG_PIPE, 1, 99992);
	assert_true(stat("sg_lookahead_runs") > runs0);
	stat_grew("tier_device_reads", reads, "the closed loops' GETs, many of them cold");
}

static void test_a_closed_loop_on_an_asynchronous_device_streams_in_order(void **state)
{
	(void)state;
	/* The same on a device whose reads complete on another thread, so that requests arrive while
	 * the head GET's read is in flight. The model restarts: a fresh server with fresh keys. */
	itest_server srv;
	const char *flags[] = {
		"--storage-tier", "--device-type", "localmemory", "--device-completion-threads", "1",
		"--threads", "1", "--memory", "512k", "--page", "64k", "--segment", "4m", "--index", "4m", NULL,
	};
	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	itest_conn c, ctl;
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	assert_int_equal(itest_conn_open(&ctl, srv.port), 0);
	int saved[SG_KEYS];
	memcpy(saved, g_gen, sizeof(saved));
	char err[1024];
	if (keys_load(&c, 1, err, sizeof(err)) < 0)
		fail_msg("sg: loading the keys: %s", err);
	pipe_buf pb = { 0 };
	long long runs = itest_info_stat(&ctl, "sg_lookahead_runs");
	long long reads = itest_info_stat(&ctl, "tier_device_reads");
	closed_loop_run(&c, SG_PIPE * 3, 64, 4242);
	closed_loop_run(&c, SG_PIPE, 8, 4243);
	itest_conn_close(&c);
	runs = itest_stat_grew(&ctl, "sg_lookahead_runs", runs, 1, "closed loops of cold GETs, sg-get on");
	reads = itest_stat_grew(&ctl, "tier_device_reads", reads, 1, "closed loops of cold GETs");

	/* A client that sends a pipeline of cold GETs and shuts down its writing side at once (nc -N,
	 * redis-cli --pipe style): the end of input is seen while a GET waits, and every reply must
	 * still come. */
	for (int round = 0; round < 5; round++) {
		assert_int_equal(itest_conn_open(&c, srv.port), 0);
		for (int r = 0; r < SG_PIPE / 4; r++)
			pb_get(&pb, (int)(rnd() % SG_KEYS));
		assert_int_equal(itest_conn_send(&c, pb.req.p, pb.req.len), 0);
		assert_int_equal(shutdown(c.fd, SHUT_WR), 0);
		if (itest_replies_check(&c, pb.exp.p, pb.exp.len, NULL, err, sizeof(err)) < 0)
			fail_msg("sg: half-closed pipeline, round %d: %s", round, err);
		itest_conn_close(&c);
		pb_reset(&pb);
	}
	pb_free(&pb);
	itest_stat_grew(&ctl, "tier_device_reads", reads, 1, "half-closed pipelines of cold GETs");
	itest_conn_close(&ctl);
	memcpy(g_gen, saved, sizeof(saved));
	assert_int_equal(itest_server_stop(&srv), 0);
}

static void test_reads_beyond_the_device_throttle_wait_without_stalling_other_clients(void **state)
{
	(void)state;
	/* A second server with a throttle of 4 reads in flight: a long cold pipeline on one connection
	 * still completes exactly, and a PING on another connection is answered meanwhile. */
	itest_server srv;
	const char *flags[] = {
		"--storage-tier", "--device-type", "posix", "--threads", "1", "--memory", "256k",
		"--page", "32k", "--segment", "4m", "--index", "4m", "--device-throttle-limit", "4", NULL,
	};
	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	itest_conn a, b;
	assert_int_equal(itest_conn_open(&a, srv.port), 0);
	assert_int_equal(itest_conn_open(&b, srv.port), 0);
	/* 5000 keys of about 100 B are twice --memory whatever SG_KEYS is (fewer under ASan), so the
	 * first ones are on the device. */
	int n = 5000;
	itest_buf req = { 0 }, exp = { 0 };
	char k[64], v[256];
	for (int i = 0; i < n; i++) {
		itest_buf_add(&req, "*3\r\n$3\r\nSET\r\n", 13);
		itest_buf_bulk(&req, k, key_make(i, k));
		itest_buf_bulk(&req, v, val_make(i, 3, v));
		itest_buf_add(&exp, "+OK\r\n", 5);
	}
	assert_int_equal(itest_conn_send(&a, req.p, req.len), 0);
	itest_replies_expect(&a, &srv, exp.p, exp.len, NULL);
	req.len = exp.len = 0;
	for (int i = 0; i < n; i++) {
		itest_buf_add(&req, "*2\r\n$3\r\nGET\r\n", 13);
		itest_buf_bulk(&req, k, key_make(i, k));
		itest_buf_bulk(&exp, v, val_make(i, 3, v));
	}
	long long reads = itest_info_stat(&b, "tier_device_reads");
	assert_int_equal(itest_conn_send(&a, req.p, req.len), 0);
	itest_expect(&b, "+PONG\r\n", "PING", NULL);
	itest_replies_expect(&a, &srv, exp.p, exp.len, NULL);
	free(req.p);
	free(exp.p);
	itest_stat_grew(&b, "tier_device_reads", reads, 1, "GETs of keys written first, beyond --memory");
	itest_conn_close(&a);
	itest_conn_close(&b);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_write_later_in_the_pipeline_is_not_seen_by_an_earlier_cold_get),
		cmocka_unit_test(test_interleaved_get_set_del_pipelines_answer_in_order_with_the_right_values),
		cmocka_unit_test(test_a_long_pipeline_of_cold_gets_parks_once_for_many_reads),
		cmocka_unit_test(test_mget_of_1000_keys_half_cold_half_hot_answers_in_key_order),
		cmocka_unit_test(test_sg_get_on_and_off_give_byte_identical_reply_streams),
		cmocka_unit_test(test_reads_beyond_the_device_throttle_wait_without_stalling_other_clients),
		cmocka_unit_test(test_a_closed_loop_client_gets_every_reply_in_order_while_its_gets_wait),
		cmocka_unit_test(test_a_closed_loop_on_an_asynchronous_device_streams_in_order),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown);
}
