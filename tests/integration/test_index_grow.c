/*
 * test_index_grow.c - the index sizes itself to the keys (log/store.c note 2, index/hidx.c note
 * "Growth") in a real server process on real segment files: started at --index 64k (1024 buckets),
 * 80,000 keys written on one connection while another reads back what was written before, on
 * another worker, double the index several times while both go on; every key keeps its value,
 * also after a restart with yet another --index (the checkpoint's image brings its geometry back).
 * --index-max-size at --index keeps it from growing.
 *
 * Each test proves from INFO (index_grows, IndexBucketCount) whether the growth ran.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/itest.h"

#define N 80000
#define BATCH 1000

static void server_start(itest_server *s, const char *index, const char *const *extra)
{
	const char *base[] = { "--threads", "2", "--storage-tier", "yes", "--memory", "4m", "--page", "64k",
		"--segment", "4m", "--index", index, "--save", "", "--checkpoint-interval", "0", NULL };
	itest_spillway_start_on(s, itest_data_dir, base, extra);
}

static size_t key_of(int i, char *buf) { return (size_t)sprintf(buf, "ig:%08d", i); }
static size_t val_of(int i, char *buf) { return (size_t)sprintf(buf, "value-of-%d-%x", i, i * 2654435761u); }

/* SET (set) or GET keys [from, to), pipelined: every SET answers +OK, every GET the key's value. */
static void keys_run(itest_conn *c, int from, int to, bool set)
{
	itest_buf cmd = { 0 }, want = { 0 };
	for (int i = from; i < to; i++) {
		char k[32], v[64];
		size_t kl = key_of(i, k), vl = val_of(i, v);
		itest_buf_fmt(&cmd, set ? "*3\r\n$3\r\nSET\r\n" : "*2\r\n$3\r\nGET\r\n");
		itest_buf_bulk(&cmd, k, kl);
		if (set) {
			itest_buf_bulk(&cmd, v, vl);
			itest_buf_add(&want, "+OK\r\n", 5);
		} else {
			itest_buf_bulk(&want, v, vl);
		}
	}
	assert_int_equal(itest_conn_send(c, cmd.p, cmd.len), 0);
	char err[512];
	if (itest_replies_check(c, want.p, want.len, NULL, err, sizeof(err)) < 0)
		fail_msg("%s %d..%d: %s", set ? "SET" : "GET", from, to, err);
	free(cmd.p);
	free(want.p);
}

static void write_keys(itest_conn *c, int from, int to) { keys_run(c, from, to, true); }
static void check_keys(itest_conn *c, int from, int to) { keys_run(c, from, to, false); }

static void check_all(itest_conn *c)
{
	for (int i = 0; i < N; i += BATCH)
		check_keys(c, i, i + BATCH);
	char want[32];
	snprintf(want, sizeof(want), ":%d\r\n", N);
	itest_expect(c, want, "dbsize", NULL);
}

static void shutdown_wait(itest_server *s, itest_conn *c)
{
	itest_conn_send_cmd(c, "shutdown", NULL);
	assert_int_equal(itest_server_wait(s, ITEST_TIMEOUT_MS), 0);
	itest_server_stop(s);
	itest_conn_close(c);
}

/* Write all keys; after each batch read back an earlier one on the other connection. Returns the
 * doublings INFO counted half way through the load. */
static long long load_while_reading(itest_conn *w, itest_conn *r)
{
	long long half = -1;
	for (int i = 0, b = 0; i < N; i += BATCH, b++) {
		if (i == N / 2)
			half = itest_info_field(w, "store", "index_grows");
		write_keys(w, i, i + BATCH);
		int back = (int)((b * 7919u) % (unsigned)(b + 1)) * BATCH;
		check_keys(r, back, back + BATCH);
		if (b % 10 == 9)
			itest_sleep_ms(300);   /* leave the compactor its once-a-second look mid-load */
	}
	return half;
}

static void test_index_doubles_under_load_and_keeps_every_key_across_a_restart(void **state)
{
	(void)state;
	itest_server s;
	itest_conn w, r;
	server_start(&s, "64k", NULL);
	assert_int_equal(itest_conn_open(&w, s.port), 0);
	assert_int_equal(itest_conn_open(&r, s.port), 0);
	assert_int_equal(itest_info_field(&w, "store", "IndexBucketCount"), 1024);
	/* It grew while both connections went on (the fill hook wakes the grower at once), not only
	 * after the load: the reads of the second half ran across doublings. */
	assert_true(load_while_reading(&w, &r) >= 1);
	/* 80,000 keys in 1024 buckets is 78 a bucket: it must have doubled at least 4 times (25% of
	 * the main buckets in overflow is about 6 keys a bucket) */
	long long grows = 0, until = itest_now_ms() + 30000;
	while ((grows = itest_info_field(&w, "store", "index_grows")) < 4 && itest_now_ms() < until)
		itest_sleep_ms(200);
	long long buckets = itest_info_field(&w, "store", "IndexBucketCount");
	print_message("index: %lld doublings, %lld buckets, %lld overflow buckets for %d keys\n", grows,
	              buckets, itest_info_field(&w, "store", "IndexOverflowBucketCount"), N);
	assert_true(grows >= 4);
	assert_int_equal(buckets, 1024LL << grows);
	check_all(&r);
	itest_conn_close(&r);
	shutdown_wait(&s, &w);

	/* another --index: the checkpoint's image keeps the grown geometry */
	server_start(&s, "128k", NULL);
	assert_int_equal(itest_conn_open(&w, s.port), 0);
	assert_int_equal(itest_info_field(&w, "store", "IndexBucketCount"), buckets);
	check_all(&w);
	shutdown_wait(&s, &w);
}

static void test_index_max_size_at_index_keeps_it_from_growing(void **state)
{
	(void)state;
	static const char *const extra[] = { "--index-max-size", "64k", NULL };
	itest_server s;
	itest_conn w, r;
	server_start(&s, "64k", extra);
	assert_int_equal(itest_conn_open(&w, s.port), 0);
	assert_int_equal(itest_conn_open(&r, s.port), 0);
	assert_int_equal(load_while_reading(&w, &r), 0);
	itest_sleep_ms(1500);   /* a look of the compactor's, which must not grow it */
	assert_int_equal(itest_info_field(&w, "store", "index_grows"), 0);
	assert_int_equal(itest_info_field(&w, "store", "IndexBucketCount"), 1024);
	assert_int_equal(itest_info_field(&w, "store", "index_max_bytes"), 64 << 10);
	/* long chains, still every key */
	assert_true(itest_info_field(&w, "store", "IndexOverflowBucketCount") > 1024);
	check_all(&r);
	itest_conn_close(&r);
	shutdown_wait(&s, &w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_index_doubles_under_load_and_keeps_every_key_across_a_restart,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_index_max_size_at_index_keeps_it_from_growing,
		                                itest_data_dir_setup, itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
