/*
 * test_tier_checks.c - the storage tier's edges against a real spillway-server: start-up checks of
 * the tier's flags, tag collisions resolved by chain walks on the device, and device read failures
 * that reach only the client whose command needed the read.
 *
 * Notes:
 *  1. Collisions: --index 4k is 64 buckets, and keys whose hashes share the bucket (hash & 63) and
 *     the 15-bit tag (bits 48-62, index/hidx.h) share one index entry: the log chains them through
 *     each record's previous address. The test hashes candidate names with the index's own hash,
 *     keeps those that share an entry with another (pairs and triples), stores them, pushes them to
 *     the device with filler, and reads them back: a read that lands on another key's record must
 *     walk the chain on the device.
 *  2. Faults: --device-type fault:posix wraps the posix device in the fault injector, armed at run
 *     time with CONFIG SET device-fault (server/config.c). "read 1" fails the next device read
 *     once with EIO; "read 1 sticky" fails every read until "off".
 *  3. No timing assertions; everything waits on replies.
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
#include <unistd.h>

#include "support/itest.h"
#include "index/hidx.h"

/* ---------------- helpers ---------------- */

/* A value for key name (deterministic, 50..250 bytes). */
static void value_of(const char *key, int ver, char *out)
{
	uint64_t h = hidx_hash(key, strlen(key)) + (uint64_t)ver * 0x9e3779b97f4a7c15ULL;
	int n = 50 + (int)(h % 200);
	int k = sprintf(out, "%s/v%d/", key, ver);
	for (; k < n; k++)
		out[k] = (char)('a' + (h >> (k % 56)) % 26);
	out[n] = '\0';
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

/* SET k:0..n-1 to their values (value_of, version 0), then push them to the device with filler. */
static void cold_keys_load(itest_conn *c, int n)
{
	char key[64], val[512];
	for (int i = 0; i < n; i++) {
		sprintf(key, "k:%d", i);
		value_of(key, 0, val);
		itest_expect(c, "+OK\r\n", "SET", key, val, NULL);
	}
	fill(c, "fill", 200);
}

static void run_server_expecting_failure(const char *const *extra, const char *needle)
{
	char exe[512], dir[256];
	const char *argv[32];
	int argc = 0;
	char *out = NULL;
	assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	assert_int_equal(itest_tmpdir_make(dir, sizeof(dir), "spw-tier-chk"), 0);
	argv[argc++] = exe;
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--dir";
	argv[argc++] = dir;
	for (int i = 0; extra[i]; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	int st = itest_prog_run(argv, NULL, 0, &out, NULL, 20000);
	itest_tmpdir_remove(dir);   /* the device may have made <dir>/Store */
	if (st != 1 || !out || !strstr(out, needle))
		fail_msg("expected exit status 1 and a message naming '%s'; got status %d and: %s", needle, st,
		         out ? out : "(nothing)");
	free(out);
}

/* ---------------- start-up ---------------- */

static void test_a_missing_log_directory_stops_startup_naming_the_flag(void **state)
{
	(void)state;
	const char *a[] = { "--storage-tier", "--logdir", "/nonexistent/spillway-logdir", NULL };
	run_server_expecting_failure(a, "--logdir");
	const char *b[] = { "--storage-tier", "--logdir", "/etc/hostname", NULL };
	run_server_expecting_failure(b, "--logdir");
}

static void test_a_memory_region_of_fewer_than_four_pages_stops_startup_with_the_tier(void **state)
{
	(void)state;
	const char *a[] = { "--storage-tier", "--memory", "192k", "--page", "64k", NULL };
	run_server_expecting_failure(a, "--memory");
}

static void test_arming_faults_needs_a_fault_device(void **state)
{
	(void)state;
	const char *a[] = { "--storage-tier", "--device-type", "posix", "--device-fault", "read 1", NULL };
	run_server_expecting_failure(a, "--device-fault");
	const char *b[] = { "--storage-tier", "--device-type", "fault:posix", "--device-fault", "read x", NULL };
	run_server_expecting_failure(b, "--device-fault");
}

/* ---------------- tag collisions (note 1) ---------------- */

#define COL_BUCKETS 64
#define COL_CANDIDATES 300000
#define COL_MAX_KEYS 1500

/*
 * Candidates col:N grouped by (bucket, tag), groups of two or more kept: keys[] gets the N of each
 * key, group[] its group's number, one group after another. Returns the count of keys; *ngroups
 * the count of groups.
 */
static int colliding_keys_find(int *keys, int *group, int *ngroups)
{
	char key[64];
	size_t slots = (size_t)COL_BUCKETS << HIDX_TAG_BITS;
	int *first = malloc(slots * sizeof(int)), *next = malloc(COL_CANDIDATES * sizeof(int));
	int nkeys = 0;
	assert_true(first && next);
	*ngroups = 0;
	memset(first, -1, slots * sizeof(int));
	for (int i = 0; i < COL_CANDIDATES; i++) {
		int n = sprintf(key, "col:%d", i);
		uint64_t h = hidx_hash(key, (size_t)n);
		size_t slot = (size_t)(h & (COL_BUCKETS - 1)) << HIDX_TAG_BITS | (size_t)((h >> HIDX_TAG_SHIFT) & 0x7fff);
		next[i] = first[slot];
		first[slot] = i;
	}
	for (size_t s = 0; s < slots && nkeys < COL_MAX_KEYS - 8; s++) {
		if (first[s] < 0 || next[first[s]] < 0)
			continue;
		for (int i = first[s]; i >= 0 && nkeys < COL_MAX_KEYS; i = next[i]) {
			keys[nkeys] = i;
			group[nkeys++] = *ngroups;
		}
		(*ngroups)++;
	}
	free(first);
	free(next);
	return nkeys;
}

/* Where key k stands in its group: 0 first, 1 second, 2 later. */
static int group_place(const int *group, int k)
{
	if (k == 0 || group[k - 1] != group[k])
		return 0;
	return k == 1 || group[k - 2] != group[k] ? 1 : 2;
}

static void test_keys_sharing_an_index_entry_are_told_apart_on_the_device(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", "--index", "4k", NULL };
	itest_server srv;
	itest_conn c;
	char key[64], val[512];
	int *keys = malloc(COL_MAX_KEYS * sizeof(int)), *group = malloc(COL_MAX_KEYS * sizeof(int));
	int ngroups;
	assert_true(keys && group);
	int nkeys = colliding_keys_find(keys, group, &ngroups);
	assert_true(ngroups > 100);

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	for (int k = 0; k < nkeys; k++) {
		sprintf(key, "col:%d", keys[k]);
		value_of(key, 0, val);
		itest_expect(&c, "+OK\r\n", "SET", key, val, NULL);
	}
	fill(&c, "fill", 200);   /* 800 KB: every col: key is now on the device only */
	long long head = itest_info_field(&c, "store", "Log.HeadAddress");
	assert_true(head > 256 * 1024);
	long long walks = itest_info_stat(&c, "tier_chain_walk_reads");

	for (int k = 0; k < nkeys; k++) {
		sprintf(key, "col:%d", keys[k]);
		value_of(key, 0, val);
		itest_expect_bulk(&c, val, "GET", key, NULL);
	}
	walks = itest_stat_grew(&c, "tier_chain_walk_reads", walks, 1, "GETs of colliding keys on the device");

	/* Delete the first key of each group and rewrite the second; push them out again; the newest
	 * version of each wins, deleted keys stay deleted. */
	for (int k = 0; k < nkeys; k++) {
		sprintf(key, "col:%d", keys[k]);
		if (group_place(group, k) == 0) {
			itest_expect(&c, ":1\r\n", "DEL", key, NULL);
		} else if (group_place(group, k) == 1) {
			value_of(key, 1, val);
			itest_expect(&c, "+OK\r\n", "SET", key, val, NULL);
		}
	}
	fill(&c, "fill2", 200);
	long long pend = itest_info_stat(&c, "tier_pending_reads");
	for (int k = 0; k < nkeys; k++) {
		sprintf(key, "col:%d", keys[k]);
		if (group_place(group, k) == 0) {
			itest_expect(&c, "$-1\r\n", "GET", key, NULL);
			itest_expect(&c, ":0\r\n", "EXISTS", key, NULL);
		} else {
			value_of(key, group_place(group, k) == 1 ? 1 : 0, val);
			itest_expect_bulk(&c, val, "GET", key, NULL);
		}
	}
	itest_stat_grew(&c, "tier_pending_reads", pend, nkeys, "a GET of each colliding key, all on the device again");
	itest_stat_grew(&c, "tier_chain_walk_reads", walks, 1, "GETs of rewritten and deleted colliding keys");
	free(keys);
	free(group);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

/* ---------------- device read failures (note 2) ---------------- */

static void test_a_failed_device_read_errors_only_the_client_that_needed_it(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "fault:posix", "--memory", "256k",
	                        "--page", "64k", NULL };
	itest_server srv;
	itest_conn a, b;
	char key[64], val[512];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&a, srv.port), 0);
	assert_int_equal(itest_conn_open(&b, srv.port), 0);
	cold_keys_load(&a, 1000);
	long long pend = itest_info_stat(&a, "tier_pending_reads");

	/* One read fails: that client gets an IO error, the other client and a retry are served. */
	itest_expect(&a, "+OK\r\n", "CONFIG", "SET", "device-fault", "read 1", NULL);
	char *r = itest_call(&a, "GET", "k:5", NULL);
	if (strncmp(r, "-ERR IO error", 13) != 0)
		fail_msg("GET of a key whose device read failed answered \"%s\"", r);
	free(r);
	for (int i = 6; i < 60; i++) {
		sprintf(key, "k:%d", i);
		value_of(key, 0, val);
		itest_expect_bulk(&b, val, "GET", key, NULL);
	}
	value_of("k:5", 0, val);
	itest_expect_bulk(&a, val, "GET", "k:5", NULL);
	pend = itest_stat_grew(&a, "tier_pending_reads", pend, 56, "GETs of k:5..59 on the device, k:5 twice");

	/* A multi-key command whose reads fail answers the error as a whole, then works again. */
	itest_expect(&a, "+OK\r\n", "CONFIG", "SET", "device-fault", "read 1", NULL);
	r = itest_call(&a, "MGET", "k:100", "k:101", "k:102", NULL);
	if (strncmp(r, "-ERR IO error", 13) != 0)
		fail_msg("MGET whose device read failed answered \"%s\"", r);
	free(r);
	r = itest_call(&a, "MGET", "k:100", "k:101", "k:102", NULL);
	assert_true(strncmp(r, "*3\r\n$", 5) == 0);
	free(r);

	/* A failing device: every cold read errors, in-memory work and writes go on, then it heals. */
	itest_expect(&a, "+OK\r\n", "CONFIG", "SET", "device-fault", "read 1 sticky", NULL);
	for (int i = 200; i < 210; i++) {
		sprintf(key, "k:%d", i);
		r = itest_call(i % 2 ? &a : &b, "GET", key, NULL);
		if (strncmp(r, "-ERR IO error", 13) != 0)
			fail_msg("GET %s with a failing device answered \"%s\"", key, r);
		free(r);
	}
	itest_expect(&b, "+PONG\r\n", "PING", NULL);
	itest_expect(&b, "+OK\r\n", "SET", "fresh", "value", NULL);
	itest_expect(&b, "$5\r\nvalue\r\n", "GET", "fresh", NULL);
	assert_true(itest_info_stat(&b, "tier_io_error_replies") >= 12);
	itest_expect(&a, "+OK\r\n", "CONFIG", "SET", "device-fault", "off", NULL);
	long long reads = itest_info_stat(&a, "tier_device_reads");
	for (int i = 200; i < 210; i++) {
		sprintf(key, "k:%d", i);
		value_of(key, 0, val);
		itest_expect_bulk(i % 2 ? &a : &b, val, "GET", key, NULL);
	}
	itest_stat_grew(&a, "tier_device_reads", reads, 10, "GETs of k:200..209 once the device healed");
	itest_conn_close(&a);
	itest_conn_close(&b);
	assert_int_equal(itest_server_stop(&srv), 0);
}

/* ---------------- every key command on cold keys ---------------- */

static void test_every_key_command_finds_cold_keys_on_the_device(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", NULL };
	itest_server srv;
	itest_conn c;
	char key[64], val[512], v2[512], k2[64];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	for (int i = 0; i < 400; i++) {
		sprintf(key, "n:%d", i);
		itest_expect(&c, "+OK\r\n", "SET", key, "100", NULL);
	}
	cold_keys_load(&c, 400);
	long long parked = itest_info_stat(&c, "tier_parked_commands");
	long long pend = itest_info_stat(&c, "tier_pending_reads");

	/* Reads. */
	value_of("k:1", 0, val);
	itest_expect_bulk(&c, val, "GET", "k:1", NULL);
	value_of("k:2", 0, val);
	sprintf(v2, ":%zu\r\n", strlen(val));
	itest_expect(&c, v2, "STRLEN", "k:2", NULL);
	itest_expect(&c, "$3\r\nk:3\r\n", "GETRANGE", "k:3", "0", "2", NULL);
	itest_expect(&c, "+string\r\n", "TYPE", "k:4", NULL);
	itest_expect(&c, ":-1\r\n", "TTL", "k:5", NULL);
	itest_expect(&c, ":3\r\n", "EXISTS", "k:6", "k:7", "nosuch", "k:8", NULL);
	itest_expect(&c, ":2\r\n", "TOUCH", "k:9", "k:10", NULL);
	/* Read-modify-writes. */
	itest_expect(&c, ":105\r\n", "INCRBY", "n:1", "5", NULL);
	itest_expect(&c, ":99\r\n", "DECR", "n:2", NULL);
	itest_expect(&c, "$5\r\n100.5\r\n", "INCRBYFLOAT", "n:3", "0.5", NULL);
	itest_expect(&c, ":5\r\n", "APPEND", "n:4", "xy", NULL);
	itest_expect(&c, ":3\r\n", "SETRANGE", "n:5", "0", "7", NULL);
	itest_expect(&c, "$3\r\n700\r\n", "GET", "n:5", NULL);
	value_of("k:11", 0, val);
	itest_expect_bulk(&c, val, "GETSET", "k:11", "new", NULL);
	itest_expect(&c, "$3\r\nnew\r\n", "GET", "k:11", NULL);
	value_of("k:12", 0, val);
	itest_expect_bulk(&c, val, "SET", "k:12", "x", "XX", "GET", NULL);
	itest_expect(&c, "$-1\r\n", "SET", "k:13", "x", "NX", NULL);
	itest_expect(&c, ":0\r\n", "SETNX", "k:14", "x", NULL);
	value_of("k:15", 0, val);
	itest_expect_bulk(&c, val, "GETDEL", "k:15", NULL);
	itest_expect(&c, "$-1\r\n", "GET", "k:15", NULL);
	value_of("k:16", 0, val);
	itest_expect_bulk(&c, val, "GETEX", "k:16", "EX", "1000", NULL);
	itest_expect(&c, ":1000\r\n", "TTL", "k:16", NULL);
	itest_expect(&c, ":1\r\n", "EXPIRE", "k:17", "1000", NULL);
	itest_expect(&c, ":1\r\n", "PERSIST", "k:17", NULL);
	itest_expect(&c, ":1\r\n", "PEXPIRE", "k:18", "1", NULL);
	/* Several keys. */
	itest_expect(&c, ":2\r\n", "DEL", "k:19", "nosuch", "k:20", NULL);
	itest_expect(&c, ":1\r\n", "UNLINK", "k:21", NULL);
	itest_expect(&c, "+OK\r\n", "MSET", "k:22", "a", "k:23", "b", NULL);
	itest_expect(&c, "*2\r\n$1\r\na\r\n$1\r\nb\r\n", "MGET", "k:22", "k:23", NULL);
	itest_expect(&c, ":0\r\n", "MSETNX", "fresh1", "a", "k:24", "b", NULL);
	itest_expect(&c, "$-1\r\n", "GET", "fresh1", NULL);
	itest_expect(&c, ":1\r\n", "MSETNX", "fresh1", "a", "fresh2", "b", NULL);
	value_of("k:25", 0, val);
	itest_expect(&c, "+OK\r\n", "RENAME", "k:25", "renamed", NULL);
	itest_expect_bulk(&c, val, "GET", "renamed", NULL);
	itest_expect(&c, "$-1\r\n", "GET", "k:25", NULL);
	itest_expect(&c, ":0\r\n", "RENAMENX", "k:26", "k:27", NULL);
	value_of("k:28", 0, val);
	itest_expect(&c, ":1\r\n", "RENAMENX", "k:28", "k:28b", NULL);
	itest_expect_bulk(&c, val, "GET", "k:28b", NULL);
	value_of("k:29", 0, val);
	itest_expect(&c, ":1\r\n", "COPY", "k:29", "copied", NULL);
	itest_expect_bulk(&c, val, "GET", "copied", NULL);
	itest_expect_bulk(&c, val, "GET", "k:29", NULL);
	itest_expect(&c, ":0\r\n", "COPY", "k:30", "k:31", NULL);

	/* Push everything out again and read the results from the device. */
	fill(&c, "fill2", 200);
	itest_expect(&c, "$3\r\n105\r\n", "GET", "n:1", NULL);
	itest_expect(&c, "$5\r\n100xy\r\n", "GET", "n:4", NULL);
	itest_expect(&c, "$-1\r\n", "GET", "k:18", NULL);   /* expired */
	itest_expect(&c, ":-1\r\n", "TTL", "k:17", NULL);
	itest_expect(&c, ":0\r\n", "EXISTS", "k:19", "k:20", "k:21", "k:25", "k:28", NULL);
	value_of("k:29", 0, val);
	itest_expect_bulk(&c, val, "GET", "copied", NULL);
	sprintf(k2, "k:%d", 26);
	value_of(k2, 0, v2);
	itest_expect_bulk(&c, v2, "GET", k2, NULL);
	itest_stat_grew(&c, "tier_parked_commands", parked, 30, "the commands above, parked on the device");
	itest_stat_grew(&c, "tier_pending_reads", pend, 30, "the commands above, reading cold keys");
	/* KEYS walks the device too (the store's blocking scan). */
	char *r = itest_call(&c, "KEYS", "k:2?", NULL);
	if (strncmp(r, "*", 1) != 0 || strstr(r, "k:26") == NULL)
		fail_msg("KEYS k:2? answered %s", r);
	free(r);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

/* ---------------- connections that go away while parked ---------------- */

static void test_clients_that_disconnect_while_parked_leave_the_others_served(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", "--threads", "2", NULL };
	itest_server srv;
	itest_conn c, gone[16];
	char key[64], val[512];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	cold_keys_load(&c, 1000);
	long long parked = itest_info_stat(&c, "tier_parked_commands");
	long long reads = itest_info_stat(&c, "tier_device_reads");
	/* Each sends a pipeline of cold GETs, MGETs and a RENAME and hangs up without reading. */
	for (int k = 0; k < 16; k++) {
		char req[64 * 1024];
		size_t n = 0;
		assert_int_equal(itest_conn_open(&gone[k], srv.port), 0);
		for (int i = 0; i < 60; i++) {
			int key_i = (k * 61 + i * 7) % 1000;
			n += (size_t)sprintf(req + n, "GET k:%d\r\nMGET k:%d k:%d\r\n", key_i, (key_i + 1) % 1000,
			                     (key_i + 2) % 1000);
		}
		n += (size_t)sprintf(req + n, "RENAME k:%d r:%d\r\n", 900 + k, k);
		assert_int_equal(itest_conn_send(&gone[k], req, n), 0);
		if (k % 2)
			itest_conn_close(&gone[k]);
	}
	for (int k = 0; k < 16; k += 2)
		itest_conn_close(&gone[k]);
	for (int i = 0; i < 900; i += 3) {
		sprintf(key, "k:%d", i);
		value_of(key, 0, val);
		itest_expect_bulk(&c, val, "GET", key, NULL);
	}
	/* The 300 GETs above are cold: each parked on a device read (which a read of a client that went
	 * away may have started). */
	itest_stat_grew(&c, "tier_parked_commands", parked, 300, "the 300 cold GETs of the client that stayed");
	itest_stat_grew(&c, "tier_device_reads", reads, 1, "cold GETs");
	itest_expect(&c, "+PONG\r\n", "PING", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_missing_log_directory_stops_startup_naming_the_flag),
		cmocka_unit_test(test_a_memory_region_of_fewer_than_four_pages_stops_startup_with_the_tier),
		cmocka_unit_test(test_arming_faults_needs_a_fault_device),
		cmocka_unit_test(test_keys_sharing_an_index_entry_are_told_apart_on_the_device),
		cmocka_unit_test(test_every_key_command_finds_cold_keys_on_the_device),
		cmocka_unit_test(test_clients_that_disconnect_while_parked_leave_the_others_served),
		cmocka_unit_test(test_a_failed_device_read_errors_only_the_client_that_needed_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
