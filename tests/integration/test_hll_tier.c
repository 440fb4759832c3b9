/*
 * test_hll_tier.c - HyperLogLogs far larger than --memory, spilled to the storage tier and read
 * back: spillway-server (--storage-tier, --memory 512k) and redis-server get the same PFADD,
 * PFCOUNT, PFMERGE and GET commands, and every reply must be the same bytes.
 *
 * Notes:
 *  1. HLL_KEYS keys, a third of them dense (3000 elements: 12304 bytes each), the rest sparse of
 *     various sizes: a few MB of HLLs, several times --memory, so most are on the device when the
 *     next phase reaches them. Each phase is pipelined HLL_BATCH commands at a time and compared
 *     reply by reply: load (PFADD), grow (PFADD more elements: read-modify-writes of cold
 *     records, sparse ones crossing into dense), count (PFCOUNT of one key, which writes its
 *     cache, and of three keys), merge (PFMERGE of four keys into new and existing keys), and
 *     check (GET of every key and PFCOUNT again).
 *  2. The path ran: tier_parked_commands must grow over the phases (commands parked on device
 *     reads), else the test did not exercise the tier.
 *  3. SKIP (77) when redis-server is not installed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"
#include "support/itest.h"

#ifdef ITEST_ASAN
#define HLL_KEYS 150
#else
#define HLL_KEYS 300
#endif
#define HLL_BATCH 32

static itest_server g_spw, g_redis;
static itest_conn g_cs, g_cr;

/* One pipeline sent to both servers. */
static itest_buf g_req;
static int g_nreq;

static void req_begin(int argc)
{
	itest_buf_fmt(&g_req, "*%d\r\n", argc);
}

static void req_arg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void req_arg(const char *fmt, ...)
{
	char s[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s, sizeof(s), fmt, ap);
	va_end(ap);
	itest_buf_bulk(&g_req, s, (size_t)n);
}

/* Send the pipeline to both servers and compare the replies one by one. */
static void req_flush(void)
{
	char what[64];
	if (!g_nreq)
		return;
	assert_int_equal(itest_conn_send(&g_cs, g_req.p, g_req.len), 0);
	assert_int_equal(itest_conn_send(&g_cr, g_req.p, g_req.len), 0);
	for (int i = 0; i < g_nreq; i++) {
		const char *rs, *rr;
		ssize_t ns = itest_conn_read_reply(&g_cs, &rs, NULL);
		if (ns < 0) {
			fprintf(stderr, "reply %d of %d from spillway-server: %s\n", i, g_nreq, spw_strerror((int)ns));
			itest_server_log_dump(&g_spw);
		}
		assert_true(ns > 0);
		char *copy = malloc((size_t)ns);
		assert_non_null(copy);
		memcpy(copy, rs, (size_t)ns);
		ssize_t nr = itest_conn_read_reply(&g_cr, &rr, NULL);
		assert_true(nr > 0);
		snprintf(what, sizeof(what), "reply %d of the pipeline", i);
		itest_bytes_expect(what, copy, (size_t)ns, rr, (size_t)nr);
		free(copy);
	}
	g_req.len = 0;
	g_nreq = 0;
}

static void req_end(void)
{
	if (++g_nreq == HLL_BATCH)
		req_flush();
}

/* Elements [from, to) of key i. */
static void pfadd(int i, int from, int to)
{
	req_begin(2 + to - from);
	req_arg("PFADD");
	req_arg("hll:%d", i);
	for (int e = from; e < to; e++)
		req_arg("k%d-e%d", i % 17, e);   /* keys share elements: unions overlap */
	req_end();
}

/* Elements key i gets at load: a third dense, the rest sparse of 1..1400 elements. */
static int load_size(int i)
{
	return i % 3 == 0 ? 3000 : 1 + (i * 37) % 1400;
}

static void test_hlls_spilled_to_the_device_answer_as_redis_does(void **state)
{
	(void)state;
	long long parked0 = itest_info_stat(&g_cs, "tier_parked_commands");

	for (int i = 0; i < HLL_KEYS; i++)            /* load */
		pfadd(i, 0, load_size(i));
	req_flush();
	for (int i = 0; i < HLL_KEYS; i++)            /* grow: cold read-modify-writes */
		pfadd(i, load_size(i) - 5, load_size(i) + 1 + i % 700);
	req_flush();
	for (int i = 0; i < HLL_KEYS; i++) {          /* count: one key (writes the cache), three keys */
		req_begin(2);
		req_arg("PFCOUNT");
		req_arg("hll:%d", i);
		req_end();
		req_begin(4);
		req_arg("PFCOUNT");
		req_arg("hll:%d", i);
		req_arg("hll:%d", (i * 7 + 1) % HLL_KEYS);
		req_arg("hll:%d", (i * 13 + 5) % HLL_KEYS);
		req_end();
	}
	req_flush();
	for (int i = 0; i < HLL_KEYS; i += 2) {       /* merge: into new keys and into existing ones */
		req_begin(6);
		req_arg("PFMERGE");
		if (i % 4 == 0)
			req_arg("merged:%d", i);
		else
			req_arg("hll:%d", i);
		for (int j = 1; j <= 4; j++)
			req_arg("hll:%d", (i * j + 11 * j) % HLL_KEYS);
		req_end();
	}
	req_flush();
	for (int i = 0; i < HLL_KEYS; i++) {          /* check: the bytes, and the count again */
		const char *key = i % 4 == 0 ? "merged" : "hll";
		req_begin(2);
		req_arg("GET");
		req_arg("%s:%d", key, i);
		req_end();
		req_begin(2);
		req_arg("GET");
		req_arg("hll:%d", i);
		req_end();
		req_begin(2);
		req_arg("PFCOUNT");
		req_arg("%s:%d", key, i);
		req_end();
	}
	req_flush();
	itest_stat_grew(&g_cs, "tier_parked_commands", parked0, HLL_KEYS / 4,
	                "HLL commands parked on device reads of spilled HLLs");
}

static int setup(void **state)
{
	(void)state;
	const char *flags[] = {
		"--storage-tier", "--device-type", "posix", "--memory", "512k", "--page", "64k",
		"--segment", "4m", "--index", "16m", NULL,
	};
	if (itest_fixture_start(&g_spw, ITEST_SPILLWAY, flags, "hll tier") != 0 ||
	    itest_fixture_start(&g_redis, ITEST_REDIS, NULL, "hll tier") != 0)
		return -1;
	if (itest_conn_open(&g_cs, g_spw.port) < 0 || itest_conn_open(&g_cr, g_redis.port) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	itest_conn_close(&g_cs);
	itest_conn_close(&g_cr);
	free(g_req.p);
	int a = itest_fixture_stop(&g_spw, "hll tier"), b = itest_fixture_stop(&g_redis, "hll tier");
	return a || b ? -1 : 0;
}

int main(void)
{
	if (!itest_prog_present("redis-server", "redis-server"))
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hlls_spilled_to_the_device_answer_as_redis_does),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
