/*
 * test_import.c - --import-rdb: a dump.rdb written by a real redis-server 7.0 (strings of every
 * encoding, with and without expiries, an expired one, hashes, lists, sets and sorted sets in each
 * encoding Redis saves them in) is loaded
 * by spillway-server before it serves; each key is compared with redis-server's (DUMP bytes and
 * PEXPIRETIME), and the summary in the log says what was skipped and why. --check-only reads the
 * same file as a tool; a corrupt file fails the start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/spw.h"
#include "support/itest.h"

static char long_value[3000], bin_value[] = "\x00\xff\r\nbin\x00";

static const struct { const char *key, *value; size_t len; const char *px; } keys[] = {
	{ "int8", "-5", 2, NULL },
	{ "int32", "2147483647", 10, NULL },
	{ "bigint", "12345678901234", 14, NULL },
	{ "short", "hello", 5, NULL },
	{ "long", long_value, sizeof(long_value), NULL },
	{ "binary", bin_value, sizeof(bin_value) - 1, NULL },
	{ "ttl", "expiring", 8, "4102444800000" },
	{ "ttl2", "12", 2, "4102444800123" },
};

/* The collections: each key's DUMP from redis-server must equal spillway's after the import (a
 * hashtable-encoded one too: the import keeps the file's order, which is the dict order Redis's
 * DUMP just wrote). */
static const char *const coll_keys[] = { "h", "hh", "l", "lbig", "si", "ss", "sbig", "z", "zbig", "zlong" };
#define NCOLL SPW_ARRAY_LEN(coll_keys)
static char *coll_dumps[NCOLL];
static size_t coll_dump_lens[NCOLL];
static char *zbig_range;   /* redis-server's ZRANGE zbig 0 -1 WITHSCORES */

/* A DUMP reply's length: "$N\r\n" and N bytes and "\r\n" (the payload may hold NULs). */
static size_t dump_reply_len(const char *d)
{
	long n = strtol(d + 1, NULL, 10);
	return (size_t)n + (size_t)(strchr(d, '\n') - d) + 3;
}

/* The collections on redis-server: listpack and hashtable hashes, a small and a multi-node list,
 * an intset, a string set and an intset past set-max-intset-entries, a listpack zset, a skiplist
 * one past zset-max-listpack-entries (saved as ZSET_2, highest first) and one with a long member. */
static void redis_colls_make(itest_conn *c)
{
	char v[100], n[16];
	memset(v, 'q', sizeof(v) - 1);
	v[sizeof(v) - 1] = '\0';
	itest_expect(c, ":3\r\n", "HSET", "h", "f", "v", "n", "42", "", "empty", NULL);
	itest_expect(c, ":1\r\n", "HSET", "hh", "f", v, NULL);
	itest_expect(c, ":2\r\n", "RPUSH", "l", "a", "b", NULL);
	for (int i = 0; i < 2000; i++) {
		snprintf(n, sizeof(n), i % 2 ? "%d" : "e%d", i);
		free(itest_call(c, "RPUSH", "lbig", n, NULL));
		free(itest_call(c, "SADD", "sbig", n + (i % 2 ? 0 : 1), NULL));   /* integers only */
	}
	itest_expect(c, ":3\r\n", "SADD", "si", "1", "-70000", "9", NULL);
	itest_expect(c, ":1\r\n", "SADD", "ss", "member", NULL);
	itest_expect(c, ":1\r\n", "ZADD", "z", "1", "m", NULL);
	itest_expect(c, ":2\r\n", "ZADD", "zlong", "2", v, "-1.5", "short", NULL);
	for (int i = 0; i < 300; i++) {
		char sc[32];
		snprintf(n, sizeof(n), i % 3 ? "z%d" : "%d", i);
		snprintf(sc, sizeof(sc), "%g", (i * 13) % 97 - 0.5 * (i % 2));
		free(itest_call(c, "ZADD", "zbig", sc, n, NULL));
	}
	zbig_range = itest_call(c, "ZRANGE", "zbig", "0", "-1", "WITHSCORES", NULL);
	for (size_t i = 0; i < NCOLL; i++) {
		coll_dumps[i] = itest_call(c, "DUMP", coll_keys[i], NULL);
		coll_dump_lens[i] = dump_reply_len(coll_dumps[i]);
	}
}

static char *file_read(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = malloc(1 << 20);
	*n = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

/* redis-server writes dump.rdb into dir: the strings, one key expired before SAVE (active expiry
 * off, so SAVE still holds it), a hash and a list. The DUMPs of the strings into dumps[]. */
static void redis_rdb_make(const char *dir, char **dumps, size_t *dump_lens)
{
	itest_server r;
	const char *extra[] = { "--dir", dir, "--enable-debug-command", "yes", NULL };
	assert_int_equal(itest_redis_start(&r, extra), 0);
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, r.port), 0);
	for (size_t i = 0; i < SPW_ARRAY_LEN(keys); i++) {
		const char *argv[] = { "SET", keys[i].key, keys[i].value, "PXAT", keys[i].px };
		size_t lens[] = { 3, strlen(keys[i].key), keys[i].len, 4, keys[i].px ? strlen(keys[i].px) : 0 };
		free(itest_conn_call_argv(&c, keys[i].px ? 5 : 3, argv, lens));
		const char *d[] = { "DUMP", keys[i].key };
		size_t dl[] = { 4, strlen(keys[i].key) };
		dumps[i] = itest_conn_call_argv(&c, 2, d, dl);
		dump_lens[i] = strlen(dumps[i]);   /* "$N\r\n" ... : the header has no NUL, the rest is compared by N */
		long n = strtol(dumps[i] + 1, NULL, 10);
		dump_lens[i] = (size_t)n + (size_t)(strchr(dumps[i], '\n') - dumps[i]) + 3;
	}
	itest_expect(&c, "+OK\r\n", "DEBUG", "SET-ACTIVE-EXPIRE", "0", NULL);
	itest_expect(&c, "+OK\r\n", "SET", "gone", "x", "PX", "1", NULL);
	itest_expect(&c, "+OK\r\n", "DEBUG", "SLEEP", "0.02", NULL);
	redis_colls_make(&c);
	itest_expect(&c, "+OK\r\n", "SAVE", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&r), 0);
}

static void test_import_rdb_of_redis_loads_every_string_with_its_expiry(void **st)
{
	(void)st;
	char *dumps[SPW_ARRAY_LEN(keys)], path[512];
	size_t dump_lens[SPW_ARRAY_LEN(keys)];
	for (size_t i = 0; i < sizeof(long_value); i++)
		long_value[i] = "spillway"[i % 8];
	redis_rdb_make(itest_data_dir, dumps, dump_lens);
	snprintf(path, sizeof(path), "%s/dump.rdb", itest_data_dir);

	itest_server s;
	const char *extra[] = { "--import-rdb", path, NULL };
	assert_int_equal(itest_spillway_start(&s, extra), 0);
	itest_conn c;
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (size_t i = 0; i < SPW_ARRAY_LEN(keys); i++) {
		char *got = itest_call(&c, "DUMP", keys[i].key, NULL);
		itest_bytes_expect(keys[i].key, got, dump_lens[i], dumps[i], dump_lens[i]);
		free(got);
		char want[64];
		snprintf(want, sizeof(want), ":%s\r\n", keys[i].px ? keys[i].px : "-1");
		itest_expect(&c, want, "PEXPIRETIME", keys[i].key, NULL);
		free(dumps[i]);
	}
	for (size_t i = 0; i < NCOLL; i++) {
		char *got = itest_call(&c, "DUMP", coll_keys[i], NULL);
		itest_bytes_expect(coll_keys[i], got, dump_reply_len(got), coll_dumps[i], coll_dump_lens[i]);
		free(got);
		free(coll_dumps[i]);
	}
	itest_expect(&c, "$8\r\nlistpack\r\n", "OBJECT", "ENCODING", "h", NULL);
	itest_expect(&c, "$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "hh", NULL);
	itest_expect(&c, "$9\r\nquicklist\r\n", "OBJECT", "ENCODING", "lbig", NULL);
	itest_expect(&c, "$6\r\nintset\r\n", "OBJECT", "ENCODING", "si", NULL);
	itest_expect(&c, "$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "ss", NULL);
	itest_expect(&c, "$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "sbig", NULL);
	itest_expect(&c, ":2000\r\n", "SCARD", "sbig", NULL);
	itest_expect(&c, "$8\r\nlistpack\r\n", "OBJECT", "ENCODING", "z", NULL);
	itest_expect(&c, "$8\r\nskiplist\r\n", "OBJECT", "ENCODING", "zbig", NULL);
	itest_expect(&c, "$8\r\nskiplist\r\n", "OBJECT", "ENCODING", "zlong", NULL);
	itest_expect(&c, zbig_range, "ZRANGE", "zbig", "0", "-1", "WITHSCORES", NULL);
	free(zbig_range);
	itest_expect(&c, ":0\r\n", "EXISTS", "gone", NULL);
	itest_expect(&c, ":18\r\n", "DBSIZE", NULL);
	itest_conn_close(&c);

	/* the summary: keys per type, and each skip with its reason (the log goes with the stop) */
	size_t n = 0;
	char *log = file_read(s.log, &n);
	if (!log)
		fail_msg("no log at %s", s.log);
	log[n < (1 << 20) ? n : n - 1] = '\0';
	const char *want[] = { "RDB import done: 18 keys", "checksum ok", "  string: 8 keys", "  hash: 2 keys",
		"  list: 2 keys", "  set: 3 keys", "  zset: 3 keys", "skipped 1 already expired" };
	for (size_t i = 0; i < SPW_ARRAY_LEN(want); i++)
		if (!strstr(log, want[i]))
			fail_msg("the log lacks '%s':\n%s", want[i], log);
	if (strstr(log, "not supported yet"))
		fail_msg("the log skips a type:\n%s", log);
	free(log);
	assert_int_equal(itest_server_stop(&s), 0);
}

/* --check-only: the same file read as a tool, the summary on stdout and nothing served; a flipped
 * byte fails it with the reason. */
static void test_check_only_reads_the_file_and_a_corrupt_one_fails(void **st)
{
	(void)st;
	char *dumps[SPW_ARRAY_LEN(keys)], path[512], bin[512];
	size_t dump_lens[SPW_ARRAY_LEN(keys)];
	redis_rdb_make(itest_data_dir, dumps, dump_lens);
	for (size_t i = 0; i < SPW_ARRAY_LEN(keys); i++)
		free(dumps[i]);
	for (size_t i = 0; i < NCOLL; i++)
		free(coll_dumps[i]);
	free(zbig_range);
	snprintf(path, sizeof(path), "%s/dump.rdb", itest_data_dir);
	assert_int_equal(itest_spillway_path(bin, sizeof(bin)), 0);
	const char *argv[] = { bin, "--import-rdb", path, "--check-only", NULL };
	char *out = NULL;
	assert_int_equal(itest_prog_run(argv, NULL, 0, &out, NULL, 30000), 0);
	if (!strstr(out, "RDB import done: 18 keys") || !strstr(out, "  zset: 3 keys"))
		fail_msg("check-only said:\n%s", out);
	free(out);

	size_t n = 0;
	char *b = file_read(path, &n);
	assert_non_null(b);
	b[n / 2] ^= 0x5a;
	FILE *f = fopen(path, "wb");
	fwrite(b, 1, n, f);
	fclose(f);
	free(b);
	assert_int_equal(itest_prog_run(argv, NULL, 0, &out, NULL, 30000), 1);
	if (!strstr(out, "RDB check failed"))
		fail_msg("check-only said:\n%s", out);
	free(out);
}

int main(void)
{
	if (!itest_prog_present("redis-server", "redis-server"))
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_import_rdb_of_redis_loads_every_string_with_its_expiry,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_check_only_reads_the_file_and_a_corrupt_one_fails,
		                                itest_data_dir_setup, itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
