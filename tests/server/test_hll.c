/*
 * test_hll.c - the HyperLogLog commands (cmd_hll.c) on a real in-memory store, for what the
 * differential script cannot reach yet: keys holding a collection record (HLOG_T_HEAD) answer
 * Redis's WRONGTYPE to PFADD, PFCOUNT and PFMERGE, count as keyspace hits where Redis's
 * lookupKeyRead does, and are left as they were. No collection command exists to make such a key
 * from a client, so the test writes the record with hlog_upsert_typed.
 *
 * The client is client_fixture.h's, with W.sess a session of a store opened here.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server/server_int.h"
#include "client_fixture.h"

static hlog *L;

#define WRONGTYPE "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"

static int setup(void **state)
{
	(void)state;
	hlog_config cfg = { .memory_bytes = 4 << 20, .page_bytes = 256 << 10, .index_bytes = 64 << 10,
	                    .mutable_percent = 90, .max_sessions = 2 };
	client_fixture_setup();
	assert_int_equal(hlog_open(&L, &cfg), 0);
	assert_int_equal(hlog_session_open(L, &W.sess), 0);
	hlog_session_protect(W.sess);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	hlog_session_unprotect(W.sess);
	hlog_session_close(W.sess);
	hlog_close(L);
	client_fixture_teardown();
	return 0;
}

static void read_keep(void *ctx, const hlog_value *v)
{
	hlog_value *out = ctx;
	*out = *v;
	out->ptr = NULL;   /* only the type and size are kept: the pointer dies with the callback */
}

static void test_a_collection_key_is_wrongtype_to_every_hll_command(void **state)
{
	(void)state;
	hlog_key k;
	hlog_value v;
	hlog_key_init(&k, "coll", 4);
	assert_int_equal(hlog_upsert_typed(W.sess, &k, "not a string", 12, HLOG_NO_EXPIRY, HLOG_T_HEAD), 0);
	assert_string_equal(run("PFADD", "h", "a", "b", "c", NULL), ":1\r\n");

	uint64_t hits = W.stats.keyspace_hits;
	assert_string_equal(run("PFADD", "coll", "a", NULL), WRONGTYPE);
	assert_string_equal(run("PFADD", "coll", NULL), WRONGTYPE);
	assert_int_equal(W.stats.keyspace_hits, hits);   /* lookupKeyWrite counts nothing */
	assert_string_equal(run("PFCOUNT", "coll", NULL), WRONGTYPE);
	assert_int_equal(W.stats.keyspace_hits, hits + 1);
	assert_string_equal(run("PFCOUNT", "h", "coll", NULL), WRONGTYPE);
	assert_int_equal(W.stats.keyspace_hits, hits + 3);
	assert_string_equal(run("PFMERGE", "dst", "h", "coll", NULL), WRONGTYPE);
	assert_string_equal(run("PFMERGE", "coll", "h", NULL), WRONGTYPE);
	assert_string_equal(run("EXISTS", "dst", NULL), ":0\r\n");

	/* The record is as it was, and the HLL next to it still works. */
	assert_int_equal(hlog_read(W.sess, &k, read_keep, &v), HLOG_OK);
	assert_int_equal(v.rtype, HLOG_T_HEAD);
	assert_int_equal(v.len, 12);
	assert_string_equal(run("PFCOUNT", "h", NULL), ":3\r\n");
	assert_string_equal(run("PFMERGE", "dst", "h", NULL), "+OK\r\n");
	assert_string_equal(run("PFCOUNT", "dst", "h", NULL), ":3\r\n");
}

/* A dense HLL changes in place: PFADD and PFCOUNT keep the record's size and type. */
static void test_dense_pfadd_and_pfcount_keep_a_string_of_12304_bytes(void **state)
{
	(void)state;
	const char *argv[62] = { "PFADD", "d" };
	static char els[60][16];
	for (int round = 0; round < 60; round++) {
		for (int j = 0; j < 60; j++) {
			snprintf(els[j], sizeof(els[j]), "r%d-%d", round, j);
			argv[2 + j] = els[j];
		}
		const char *r = run_argv(62, argv);
		assert_true(r[0] == ':');
	}
	assert_string_equal(run("STRLEN", "d", NULL), ":12304\r\n");
	assert_string_equal(run("TYPE", "d", NULL), "+string\r\n");
	const char *count = run("PFCOUNT", "d", NULL);
	assert_true(count[0] == ':');
	long n = strtol(count + 1, NULL, 10);
	assert_true(n > 3400 && n < 3800);   /* 3600 distinct elements, 0.81% standard error */
	assert_string_equal(run("STRLEN", "d", NULL), ":12304\r\n");
	assert_string_equal(run("PFADD", "d", "r0-0", NULL), ":0\r\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_collection_key_is_wrongtype_to_every_hll_command),
		cmocka_unit_test(test_dense_pfadd_and_pfcount_keep_a_string_of_12304_bytes),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
