/*
 * test_zset.c - the sorted-set commands on a real spillway-server, for what a byte-for-byte
 * comparison with redis-server cannot show (diff/zset.txt has the rest): sorted sets whose
 * records are on the device (pending reads), ZRANDMEMBER's random replies checked by their
 * properties, ZSCAN's walk by position over a skiplist-encoded set, keyspace hits and misses.
 *
 * Notes:
 *  1. The tier test writes ZSET_KEYS sorted sets of ZSET_MEMBERS members (about 600 bytes each)
 *     with --memory 256k, so nearly all of them are on the device when read back; INFO's
 *     tier_pending_reads must grow by at least one read per two sets read (a counter, not timing).
 *     Reads, writes, pops, STORE commands and ZMPOP over several keys all run on cold keys.
 *  2. Replies are parsed with a small RESP2 array reader (flat arrays of bulk strings only).
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

#define ZSET_KEYS 1200
#define ZSET_MEMBERS 16

/* ---------------- fixtures ---------------- */

static itest_server g_srv;

static int group_setup(void **state)
{
	(void)state;
	return itest_fixture_start(&g_srv, ITEST_SPILLWAY, NULL, "test_zset");
}

static int group_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "test_zset");
}

/* m<i> with score i, for i in [0, n). */
static void zset_fill(itest_conn *c, const char *key, int n)
{
	char m[32], s[32];
	for (int i = 0; i < n; i++) {
		snprintf(m, sizeof(m), "m%d", i);
		snprintf(s, sizeof(s), "%d", i);
		itest_expect(c, ":1\r\n", "ZADD", key, s, m, NULL);
	}
}

/* ---------------- ZRANDMEMBER ---------------- */

static void check_zrandmember(itest_conn *c, const char *key, int n)
{
	char cnt[16];
	itest_strs s;

	/* A positive count: distinct members, min(count, size) of them. */
	for (int count = 1; count <= n + 3; count += 5) {
		snprintf(cnt, sizeof(cnt), "%d", count);
		itest_strs_call(c, &s, "ZRANDMEMBER", key, cnt, NULL);
		assert_int_equal(s.n, count < n ? count : n);
		for (int i = 0; i < s.n; i++) {
			assert_true(s.v[i][0] == 'm' && atoi(s.v[i] + 1) < n);
			assert_int_equal(itest_strs_find(&s, s.v[i], i + 1, 1), -1);
		}
		itest_strs_free(&s);
	}
	/* WITHSCORES: each member next to its own score. */
	itest_strs_call(c, &s, "ZRANDMEMBER", key, "5", "WITHSCORES", NULL);
	assert_int_equal(s.n, 10);
	for (int i = 0; i < s.n; i += 2)
		assert_int_equal(atoi(s.v[i] + 1), atoi(s.v[i + 1]));
	itest_strs_free(&s);
	/* A negative count: exactly |count| picks, repeats allowed (200 picks of a few members
	 * must repeat), every one a member. */
	itest_strs_call(c, &s, "ZRANDMEMBER", key, "-200", NULL);
	assert_int_equal(s.n, 200);
	bool repeat = false;
	for (int i = 0; i < s.n; i++) {
		assert_true(s.v[i][0] == 'm' && atoi(s.v[i] + 1) < n);
		repeat |= itest_strs_find(&s, s.v[i], i + 1, 1) >= 0;
	}
	assert_true(repeat || n > 200);
	itest_strs_free(&s);
	/* No count: one member. */
	char *r = itest_call(c, "ZRANDMEMBER", key, NULL);
	assert_true(r[0] == '$' && strstr(r, "\r\nm") != NULL);
	free(r);
}

static void test_zrandmember_replies_have_redis_properties(void **state)
{
	(void)state;
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	zset_fill(&c, "rand:small", 10);
	check_zrandmember(&c, "rand:small", 10);
	zset_fill(&c, "rand:big", 300);
	itest_expect_bulk(&c, "skiplist", "OBJECT", "ENCODING", "rand:big", NULL);
	check_zrandmember(&c, "rand:big", 300);
	itest_conn_close(&c);
}

/* ---------------- ZSCAN of a skiplist-encoded set ---------------- */

static void test_zscan_walks_a_skiplist_set_by_position_to_the_end(void **state)
{
	(void)state;
	itest_conn c;
	char cur[32] = "0";
	itest_strs s;
	int total = 0, calls = 0;

	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	zset_fill(&c, "scan:big", 200);
	do {
		char *r = itest_call(&c, "ZSCAN", "scan:big", cur, "COUNT", "30", NULL);
		const char *p = r;
		assert_true(strncmp(p, "*2\r\n$", 5) == 0);
		long l = strtol(p + 5, (char **)&p, 10);
		p += 2;
		memcpy(cur, p, (size_t)l);
		cur[l] = '\0';
		itest_strs_parse(p + l + 2, &s);
		free(r);
		for (int i = 0; i < s.n; i += 2)
			assert_int_equal(atoi(s.v[i] + 1), atoi(s.v[i + 1]));
		total += s.n / 2;
		itest_strs_free(&s);
		calls++;
	} while (strcmp(cur, "0") != 0 && calls < 100);
	assert_int_equal(total, 200);
	assert_int_equal(calls, 7);    /* 30 pairs a call: the cursor is the position */
	itest_expect(&c, "*2\r\n$1\r\n0\r\n*0\r\n", "ZSCAN", "scan:big", "100000", NULL);
	itest_conn_close(&c);
}

/* ---------------- keyspace hits and misses ---------------- */

static void test_zset_reads_count_keyspace_hits_and_misses_as_redis(void **state)
{
	(void)state;
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	itest_expect(&c, ":1\r\n", "ZADD", "ks:z", "1", "a", NULL);
	itest_expect(&c, "+OK\r\n", "SET", "ks:s", "x", NULL);
	long long h = itest_info_stat(&c, "keyspace_hits"), m = itest_info_stat(&c, "keyspace_misses");
	itest_expect_bulk(&c, "1", "ZSCORE", "ks:z", "a", NULL);          /* hit */
	itest_expect(&c, "$-1\r\n", "ZSCORE", "ks:z", "b", NULL);        /* hit: the key is there */
	itest_expect(&c, "$-1\r\n", "ZSCORE", "ks:none", "a", NULL);     /* miss */
	itest_expect(&c, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
	             "ZCARD", "ks:s", NULL);                           /* hit, as lookupKeyRead */
	itest_expect(&c, "*0\r\n", "ZRANGE", "ks:none", "0", "-1", NULL);   /* miss */
	/* Writes look keys up for writing: neither. */
	itest_expect(&c, ":0\r\n", "ZADD", "ks:z", "2", "a", NULL);
	itest_expect(&c, ":0\r\n", "ZREM", "ks:none", "a", NULL);
	itest_expect(&c, "*0\r\n", "ZPOPMIN", "ks:none", NULL);
	assert_int_equal(itest_info_stat(&c, "keyspace_hits"), h + 3);
	assert_int_equal(itest_info_stat(&c, "keyspace_misses"), m + 2);
	itest_conn_close(&c);
}

/* ---------------- sorted sets on the device (note 1) ---------------- */

static size_t tier_member(char *buf, int k, int i)
{
	return (size_t)sprintf(buf, "zset %d member %d %020d", k, i, k * 31 + i);
}

/* ZRANGE WITHSCORES of set k: members from..ZSET_MEMBERS-1, member i scoring i * 1.5. */
static void expect_zrange(itest_conn *c, const char *key, int k, int from)
{
	itest_buf want = { 0 };
	char m[96], s[32];
	itest_buf_fmt(&want, "*%d\r\n", (ZSET_MEMBERS - from) * 2);
	for (int i = from; i < ZSET_MEMBERS; i++) {
		itest_buf_bulk(&want, m, tier_member(m, k, i));
		itest_buf_bulk(&want, s, (size_t)sprintf(s, "%.17g", i * 1.5));
	}
	char *r = itest_call(c, "ZRANGE", key, "0", "-1", "WITHSCORES", NULL);
	itest_bytes_expect(key, r, strlen(r), want.p, want.len);
	free(r);
	free(want.p);
}

static void tier_write(itest_conn *c)
{
	char key[32];
	for (int k = 0; k < ZSET_KEYS; k++) {
		const char *argv[2 + 2 * ZSET_MEMBERS];
		size_t lens[2 + 2 * ZSET_MEMBERS];
		char sb[ZSET_MEMBERS][32], mb[ZSET_MEMBERS][96];
		sprintf(key, "tz:%d", k);
		argv[0] = "ZADD";
		argv[1] = key;
		lens[0] = 4;
		lens[1] = strlen(key);
		for (int i = 0; i < ZSET_MEMBERS; i++) {
			argv[2 + 2 * i] = sb[i];
			lens[2 + 2 * i] = (size_t)sprintf(sb[i], "%.17g", i * 1.5);
			argv[3 + 2 * i] = mb[i];
			lens[3 + 2 * i] = tier_member(mb[i], k, i);
		}
		char *r = itest_conn_call_argv(c, 2 + 2 * ZSET_MEMBERS, argv, lens);
		assert_non_null(r);
		assert_string_equal(r, ":16\r\n");
		free(r);
	}
}

static void test_zsets_on_the_device_are_read_and_changed_after_pending_reads(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", NULL };
	itest_server srv;
	itest_conn c;
	char key[32], key2[32], m[96];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	tier_write(&c);
	assert_true(itest_info_field(&c, "store", "Log.HeadAddress") > 256 * 1024);
	long long pend = itest_info_stat(&c, "tier_pending_reads");
	for (int k = 0; k < ZSET_KEYS; k++) {
		sprintf(key, "tz:%d", k);
		expect_zrange(&c, key, k, 0);
	}
	pend = itest_stat_grew(&c, "tier_pending_reads", pend, ZSET_KEYS / 2,
	                       "ZRANGE of sorted sets written long before, past --memory");
	/* Changes of cold sets: a pop, a score read, a removal, a store from a cold source, a
	 * ZMPOP whose first key is missing and second cold, a union of two cold sets. */
	for (int k = 0; k < ZSET_KEYS; k++) {
		sprintf(key, "tz:%d", k);
		tier_member(m, k, 0);
		switch (k % 4) {
		case 0:
			itest_expect_bulk(&c, "0", "ZSCORE", key, m, NULL);
			itest_expect(&c, ":1\r\n", "ZREM", key, m, NULL);
			break;
		case 1: {
			char *r = itest_call(&c, "ZPOPMIN", key, NULL);
			assert_non_null(strstr(r, m));
			free(r);
			break;
		}
		case 2:
			sprintf(key2, "tzs:%d", k);
			itest_expect(&c, ":15\r\n", "ZRANGESTORE", key2, key, "1", "-1", NULL);
			itest_expect(&c, ":15\r\n", "ZUNIONSTORE", key, "2", key2, "nokey", NULL);
			break;
		default: {
			char *r = itest_call(&c, "ZMPOP", "2", "nokey", key, "MIN", NULL);
			assert_non_null(strstr(r, m));
			free(r);
		}
		}
	}
	for (int k = 0; k < ZSET_KEYS; k++) {
		sprintf(key, "tz:%d", k);
		expect_zrange(&c, key, k, 1);
	}
	itest_stat_grew(&c, "tier_pending_reads", pend, ZSET_KEYS / 2, "zset commands on cold keys");
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zrandmember_replies_have_redis_properties),
		cmocka_unit_test(test_zscan_walks_a_skiplist_set_by_position_to_the_end),
		cmocka_unit_test(test_zset_reads_count_keyspace_hits_and_misses_as_redis),
	};
	const struct CMUnitTest tier[] = {
		cmocka_unit_test(test_zsets_on_the_device_are_read_and_changed_after_pending_reads),
	};
	int rc = cmocka_run_group_tests_name("zset", tests, group_setup, group_teardown);
	return rc | cmocka_run_group_tests_name("zset_tier", tier, NULL, NULL);
}
