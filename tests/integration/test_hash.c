/*
 * test_hash.c - the hash commands on a real spillway-server, for what a byte-for-byte comparison
 * with redis-server cannot show (diff/hash.txt has the rest): hashes whose records are on the
 * device (pending reads), HRANDFIELD's random replies checked by their properties, HSCAN's walk
 * by position over a hashtable-encoded hash, and the keyspace hit/miss counting.
 *
 * Notes:
 *  1. The tier test writes HASH_KEYS hashes of about 700 bytes each with --memory 256k, so nearly
 *     all of them are on the device when read back; INFO's tier_pending_reads must grow by at
 *     least one read per hash read (a counter, not timing). Reads and writes both run on cold keys.
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

#define HASH_KEYS 1500
#define HASH_FIELDS 12

/* ---------------- fixtures ---------------- */

static itest_server g_srv;

static int group_setup(void **state)
{
	(void)state;
	return itest_fixture_start(&g_srv, ITEST_SPILLWAY, NULL, "test_hash");
}

static int group_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "test_hash");
}

/* f<i> -> "value <i> of <key>" for i in [0, 20): fields with values that tell them apart. */
static void hash_fill(itest_conn *c, const char *key, int nfields)
{
	char f[32], v[64];
	for (int i = 0; i < nfields; i++) {
		snprintf(f, sizeof(f), "f%d", i);
		snprintf(v, sizeof(v), "value %d of %s", i, key);
		itest_expect(c, ":1\r\n", "HSET", key, f, v, NULL);
	}
}

/* ---------------- HRANDFIELD ---------------- */

static void check_hrandfield(itest_conn *c, const char *key, int nfields)
{
	char cnt[16];
	itest_strs s;

	/* A positive count: distinct fields, min(count, size) of them. */
	for (int count = 1; count <= nfields + 3; count += 4) {
		snprintf(cnt, sizeof(cnt), "%d", count);
		itest_strs_call(c, &s, "HRANDFIELD", key, cnt, NULL);
		assert_int_equal(s.n, count < nfields ? count : nfields);
		for (int i = 0; i < s.n; i++) {
			assert_true(s.v[i][0] == 'f' && atoi(s.v[i] + 1) < nfields);
			assert_int_equal(itest_strs_find(&s, s.v[i], i + 1, 1), -1);
		}
		itest_strs_free(&s);
	}
	/* WITHVALUES: each field next to its own value. */
	itest_strs_call(c, &s, "HRANDFIELD", key, "5", "WITHVALUES", NULL);
	assert_int_equal(s.n, 10);
	for (int i = 0; i < s.n; i += 2) {
		char want[64];
		snprintf(want, sizeof(want), "value %d of %s", atoi(s.v[i] + 1), key);
		assert_string_equal(s.v[i + 1], want);
	}
	itest_strs_free(&s);
	/* A negative count: exactly |count| picks, repeats allowed (and with 200 picks of a few
	 * fields, certain). */
	itest_strs_call(c, &s, "HRANDFIELD", key, "-200", NULL);
	assert_int_equal(s.n, 200);
	bool repeat = false;
	for (int i = 0; i < s.n; i++) {
		assert_true(s.v[i][0] == 'f' && atoi(s.v[i] + 1) < nfields);
		repeat |= itest_strs_find(&s, s.v[i], i + 1, 1) >= 0;
	}
	assert_true(repeat);
	itest_strs_free(&s);
	itest_strs_call(c, &s, "HRANDFIELD", key, "-7", "WITHVALUES", NULL);
	assert_int_equal(s.n, 14);
	itest_strs_free(&s);
	/* No count: one field of the hash. */
	char *r = itest_call(c, "HRANDFIELD", key, NULL);
	assert_true(r[0] == '$' && strstr(r, "\r\nf") != NULL);
	free(r);
}

static void test_hrandfield_replies_have_redis_properties(void **state)
{
	(void)state;
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	hash_fill(&c, "rnd:small", 20);    /* a listpack */
	check_hrandfield(&c, "rnd:small", 20);
	hash_fill(&c, "rnd:big", 200);     /* a hashtable past 128 fields */
	check_hrandfield(&c, "rnd:big", 200);
	itest_conn_close(&c);
}

/* ---------------- HSCAN of a large hash: by buckets ---------------- */

static void test_hscan_walks_a_large_hash_by_buckets_to_the_end(void **state)
{
	(void)state;
	itest_conn c;
	char cur[32] = "0";
	bool seen[600] = { false };
	int calls = 0, total = 0;
	itest_strs s;

	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	hash_fill(&c, "scan:big", 600);   /* past hash-max-listpack-entries (512) */
	do {
		char *r = itest_call(&c, "HSCAN", "scan:big", cur, "COUNT", "100", NULL);
		assert_true(strncmp(r, "*2\r\n$", 5) == 0);
		const char *p = strchr(r + 5, '\n') + 1;
		snprintf(cur, sizeof(cur), "%.*s", (int)(strchr(p, '\r') - p), p);
		itest_strs_parse(strchr(p, '\n') + 1, &s);
		free(r);
		assert_true(s.n % 2 == 0);
		for (int i = 0; i < s.n; i += 2) {
			int f = atoi(s.v[i] + 1);
			assert_false(seen[f]);
			seen[f] = true;
			total++;
		}
		itest_strs_free(&s);
		calls++;
	} while (strcmp(cur, "0") != 0 && calls < 100);
	assert_int_equal(total, 600);
	/* A large hash (server/coll_large.c note 8): whole buckets a call, about 100 fields. */
	assert_true(calls >= 3 && calls <= 20);
	/* MATCH filters the fields visited; a cursor past the end is the end (a large hash's
	 * cursors are tagged, COLL_SCAN_LARGE: 2^62 | bucket; an untagged one starts over). */
	char *r = itest_call(&c, "HSCAN", "scan:big", "0", "COUNT", "600", "MATCH", "f1?", NULL);
	assert_true(strncmp(r, "*2\r\n$1\r\n0\r\n", 11) == 0);
	itest_strs_parse(r + 11, &s);
	free(r);
	assert_int_equal(s.n, 20);   /* f10 .. f19 and their values */
	for (int i = 0; i < s.n; i += 2)
		assert_true(strlen(s.v[i]) == 3 && strncmp(s.v[i], "f1", 2) == 0);
	itest_strs_free(&s);
	itest_expect(&c, "*2\r\n$1\r\n0\r\n*0\r\n", "HSCAN", "scan:big", "4611686018427487904", NULL);
	itest_conn_close(&c);
}

/* ---------------- keyspace hits and misses ---------------- */

static void test_hash_reads_count_keyspace_hits_and_misses_as_redis(void **state)
{
	(void)state;
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	itest_expect(&c, ":1\r\n", "HSET", "ks:h", "a", "1", NULL);
	itest_expect(&c, "+OK\r\n", "SET", "ks:s", "x", NULL);
	long long h = itest_info_stat(&c, "keyspace_hits"), m = itest_info_stat(&c, "keyspace_misses");
	itest_expect_bulk(&c, "1", "HGET", "ks:h", "a", NULL);            /* hit */
	itest_expect(&c, "$-1\r\n", "HGET", "ks:h", "b", NULL);          /* hit: the key is there */
	itest_expect(&c, "$-1\r\n", "HGET", "ks:none", "a", NULL);       /* miss */
	itest_expect(&c, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
	             "HLEN", "ks:s", NULL);                             /* hit, as lookupKeyRead */
	itest_expect(&c, ":0\r\n", "HEXISTS", "ks:none", "a", NULL);     /* miss */
	/* Writes look keys up for writing: neither. */
	itest_expect(&c, ":0\r\n", "HSET", "ks:h", "a", "2", NULL);
	itest_expect(&c, ":0\r\n", "HDEL", "ks:none", "a", NULL);
	itest_expect(&c, ":3\r\n", "HINCRBY", "ks:h", "a", "1", NULL);
	assert_int_equal(itest_info_stat(&c, "keyspace_hits"), h + 3);
	assert_int_equal(itest_info_stat(&c, "keyspace_misses"), m + 2);
	itest_conn_close(&c);
}

/* ---------------- hashes on the device (note 1) ---------------- */

static size_t tier_value(char *buf, int k, int f, int ver)
{
	return (size_t)sprintf(buf, "hash %d field %d version %d %040d", k, f, ver, k * 31 + f);
}

/* HGETALL of hash k: fields f0.. in order, f0 in version 1 when rewritten. */
static void expect_hgetall(itest_conn *c, const char *key, int k, int nfields, bool rewritten)
{
	itest_buf want = { 0 };
	char f[32], v[128];
	itest_buf_fmt(&want, "*%d\r\n", nfields * 2);
	for (int i = 0; i < nfields; i++) {
		itest_buf_bulk(&want, f, (size_t)sprintf(f, "f%d", i));
		itest_buf_bulk(&want, v, tier_value(v, k, i, i == 0 && rewritten));
	}
	char *r = itest_call(c, "HGETALL", key, NULL);
	itest_bytes_expect(key, r, strlen(r), want.p, want.len);
	free(r);
	free(want.p);
}

static void test_hashes_on_the_device_are_read_and_changed_after_pending_reads(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", NULL };
	itest_server srv;
	itest_conn c;
	char key[32], v[128];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	for (int k = 0; k < HASH_KEYS; k++) {
		sprintf(key, "th:%d", k);
		const char *argv[2 + 2 * HASH_FIELDS];
		size_t lens[2 + 2 * HASH_FIELDS];
		char fb[HASH_FIELDS][16], vb[HASH_FIELDS][128];
		argv[0] = "HSET";
		argv[1] = key;
		for (int i = 0; i < HASH_FIELDS; i++) {
			argv[2 + 2 * i] = fb[i];
			lens[2 + 2 * i] = (size_t)sprintf(fb[i], "f%d", i);
			argv[3 + 2 * i] = vb[i];
			lens[3 + 2 * i] = tier_value(vb[i], k, i, 0);
		}
		lens[0] = 4;
		lens[1] = strlen(key);
		char *r = itest_conn_call_argv(&c, 2 + 2 * HASH_FIELDS, argv, lens);
		assert_non_null(r);
		assert_string_equal(r, ":12\r\n");
		free(r);
	}
	long long head = itest_info_field(&c, "store", "Log.HeadAddress");
	assert_true(head > 256 * 1024);
	long long pend = itest_info_stat(&c, "tier_pending_reads");
	for (int k = 0; k < HASH_KEYS; k++) {
		sprintf(key, "th:%d", k);
		expect_hgetall(&c, key, k, HASH_FIELDS, false);
	}
	pend = itest_stat_grew(&c, "tier_pending_reads", pend, HASH_KEYS / 2,
	                       "HGETALL of hashes written long before, past --memory");
	/* Changes of cold hashes: a field rewritten, one added, one deleted, a counter. */
	for (int k = 0; k < HASH_KEYS; k += 3) {
		sprintf(key, "th:%d", k);
		tier_value(v, k, 0, 1);
		itest_expect(&c, ":0\r\n", "HSET", key, "f0", v, NULL);
	}
	for (int k = 1; k < HASH_KEYS; k += 3) {
		sprintf(key, "th:%d", k);
		itest_expect(&c, ":1\r\n", "HDEL", key, "f11", NULL);
		itest_expect(&c, ":5\r\n", "HINCRBY", key, "n", "5", NULL);
	}
	for (int k = 0; k < HASH_KEYS; k++) {
		sprintf(key, "th:%d", k);
		if (k % 3 == 0) {
			expect_hgetall(&c, key, k, HASH_FIELDS, true);
		} else if (k % 3 == 1) {
			itest_expect(&c, ":12\r\n", "HLEN", key, NULL);
			itest_expect_bulk(&c, "5", "HGET", key, "n", NULL);
		} else {
			expect_hgetall(&c, key, k, HASH_FIELDS, false);
		}
	}
	itest_stat_grew(&c, "tier_pending_reads", pend, HASH_KEYS / 2, "hash commands on cold keys");
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hrandfield_replies_have_redis_properties),
		cmocka_unit_test(test_hscan_walks_a_large_hash_by_buckets_to_the_end),
		cmocka_unit_test(test_hash_reads_count_keyspace_hits_and_misses_as_redis),
	};
	const struct CMUnitTest tier[] = {
		cmocka_unit_test(test_hashes_on_the_device_are_read_and_changed_after_pending_reads),
	};
	int rc = cmocka_run_group_tests_name("hash", tests, group_setup, group_teardown);
	return rc | cmocka_run_group_tests_name("hash_tier", tier, NULL, NULL);
}
