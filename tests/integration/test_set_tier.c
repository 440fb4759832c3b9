/*
 * test_set_tier.c - set commands on sets whose records are on the device: a real spillway-server
 * with --storage-tier and a small --memory, many sets written, pushed below HeadAddress with
 * filler, then read and changed by every set command. Each command is one store operation that
 * answers HLOG_PENDING before it changes anything (server/cmd_set.c, cmd_set_multi.c note 1), so
 * the client parks and the command runs again: the replies must be what they would be in memory.
 *
 * Notes:
 *  1. Sets: set:i holds 20 integers (an intset) when i % 3 == 0, else 30 strings of 24 bytes (a
 *     listpack of members), so both encodings are read cold. Exact replies are known: an intset
 *     replies ascending, a listpack set in arrival order (ours).
 *  2. The path is proven by INFO tier_pending_reads growing by at least one per cold set read,
 *     a counter, not a time.
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

#define NSETS 300

static bool set_is_int(int i) { return i % 3 == 0; }
static int set_size(int i) { return set_is_int(i) ? 20 : 30; }

/* Member j of set:i (as text). */
static void member_make(int i, int j, char *buf)
{
	if (set_is_int(i))
		sprintf(buf, "%d", i * 1000 + j);
	else
		sprintf(buf, "member-%05d-%03d-abcdefgh", i, j);
}

/* SET n filler keys of 4 KB each: pushes what came before below HeadAddress. */
static void fill(itest_conn *c, const char *prefix, int n)
{
	static char v[4096];
	char k[64];
	memset(v, 'f', sizeof(v) - 1);
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "%s:%d", prefix, i);
		itest_expect(c, "+OK\r\n", "SET", k, v, NULL);
	}
}

/* The exact SMEMBERS reply of set:i holding members from..size-1 (note 1). */
static void smembers_want(int i, int from, itest_buf *b)
{
	char m[64];
	b->len = 0;
	itest_buf_fmt(b, "*%d\r\n", set_size(i) - from);
	for (int j = from; j < set_size(i); j++) {
		member_make(i, j, m);
		itest_buf_bulk(b, m, strlen(m));
	}
	itest_buf_add(b, "", 1);
}

static void test_set_commands_on_sets_read_back_from_the_device(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", NULL };
	itest_server srv;
	itest_conn c;
	itest_buf want = { 0 };
	char key[32], key2[32], m[64], n[32];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	for (int i = 0; i < NSETS; i++) {
		sprintf(key, "set:%d", i);
		for (int j = 0; j < set_size(i); j++) {
			member_make(i, j, m);
			itest_expect(&c, ":1\r\n", "SADD", key, m, NULL);
		}
	}
	fill(&c, "fill", 200);   /* 800 KB: every set is on the device only */

	/* reads: SCARD, SISMEMBER, SMEMBERS, SSCAN, SRANDMEMBER of every set, cold */
	long long pend = itest_info_stat(&c, "tier_pending_reads");
	for (int i = 0; i < NSETS; i++) {
		sprintf(key, "set:%d", i);
		sprintf(n, ":%d\r\n", set_size(i));
		itest_expect(&c, n, "SCARD", key, NULL);
		member_make(i, 7, m);
		itest_expect(&c, ":1\r\n", "SISMEMBER", key, m, NULL);
		smembers_want(i, 0, &want);
		itest_expect(&c, want.p, "SMEMBERS", key, NULL);
	}
	pend = itest_stat_grew(&c, "tier_pending_reads", pend, NSETS, "a read of each set on the device");

	/* writes on cold sets: SREM, SPOP of all but the rest, SINTERSTORE, SMOVE */
	fill(&c, "fill2", 200);
	for (int i = 0; i < NSETS; i++) {
		sprintf(key, "set:%d", i);
		member_make(i, 0, m);
		itest_expect(&c, ":1\r\n", "SREM", key, m, NULL);
	}
	pend = itest_stat_grew(&c, "tier_pending_reads", pend, NSETS, "SREM of each set on the device");
	fill(&c, "fill3", 200);
	for (int i = 0; i + 1 < NSETS; i += 2) {
		sprintf(key, "set:%d", i);
		sprintf(key2, "set:%d", i + 1);
		member_make(i, 1, m);
		itest_expect(&c, ":1\r\n", "SMOVE", key, key2, m, NULL);   /* both cold */
		itest_expect(&c, ":1\r\n", "SREM", key2, m, NULL);
		sprintf(key2, "dst:%d", i);
		sprintf(n, ":%d\r\n", set_size(i) - 2);
		itest_expect(&c, n, "SINTERSTORE", key2, key, key, NULL);
	}
	pend = itest_stat_grew(&c, "tier_pending_reads", pend, NSETS / 2, "SMOVE of sets on the device");
	fill(&c, "fill4", 200);
	for (int i = 0; i + 1 < NSETS; i += 2) {
		sprintf(key, "dst:%d", i);
		smembers_want(i, 2, &want);
		itest_expect(&c, want.p, "SMEMBERS", key, NULL);
		sprintf(key2, "set:%d", i + 1);
		smembers_want(i + 1, 1, &want);
		itest_expect(&c, want.p, "SUNION", key2, "nosuch", NULL);
	}
	itest_stat_grew(&c, "tier_pending_reads", pend, NSETS / 2, "SMEMBERS and SUNION of sets on the device");
	free(want.p);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_commands_on_sets_read_back_from_the_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
