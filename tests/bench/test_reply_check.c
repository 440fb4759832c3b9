/*
 * test_reply_check.c - spillway-bench's reply checker: the right value passes, and every way a
 * broken server could post a fast number (another key's value, a truncated value, nil for a
 * loaded key, an error, a reply of the wrong type) is counted, with the first one described; for
 * HGET the value of the very field asked (a cell), and for HSET an integer up to the fields.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "proto/resp.h"

static bench_keyspace g_ks;

static int setup(void **state)
{
	(void)state;
	/* Hashes of 20 fields too (HGET, HSET): the string ops ignore the fields. */
	if (bench_keyspace_init(&g_ks, 1000, 8, 12, 0.0) < 0)
		return -1;
	return bench_keyspace_hash(&g_ks, 20);
}

/* "$12\r\n<value of key i>\r\n" */
static size_t bulk_of_value(uint64_t i, char *out)
{
	int n = sprintf(out, "$%u\r\n", g_ks.vallen);
	bench_value_format(&g_ks, i, out + n);
	memcpy(out + n + g_ks.vallen, "\r\n", 2);
	return (size_t)n + g_ks.vallen + 2;
}

static int check(bench_check *c, int op, uint64_t key, const char *reply)
{
	return bench_reply_check(c, &g_ks, op, key, reply, strlen(reply));
}

static void test_get_of_a_loaded_key_passes_with_its_value(void **state)
{
	(void)state;
	bench_check c;
	char r[64];
	memset(&c, 0, sizeof(c));
	size_t n = bulk_of_value(7, r);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_GET, 7, r, n), BENCH_REPLY_OK);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_MGET, 7, r, n), BENCH_REPLY_OK);
	assert_int_equal(bench_check_failures(&c), 0);
	assert_string_equal(c.first, "");
}

static void test_another_keys_value_counts_as_wrong(void **state)
{
	(void)state;
	bench_check c;
	char r[64];
	memset(&c, 0, sizeof(c));
	size_t n = bulk_of_value(8, r);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_GET, 7, r, n), BENCH_REPLY_WRONG);
	assert_int_equal(c.wrong, 1);
	assert_int_equal(bench_check_failures(&c), 1);
	assert_non_null(strstr(c.first, "GET key 7: wrong reply: $12\\r\\n"));
}

static void test_truncated_or_padded_values_count_as_wrong(void **state)
{
	(void)state;
	bench_check c;
	char v[16], r[64];
	memset(&c, 0, sizeof(c));
	bench_value_format(&g_ks, 3, v);
	sprintf(r, "$11\r\n%.11s\r\n", v);
	assert_int_equal(check(&c, BENCH_OP_GET, 3, r), BENCH_REPLY_WRONG);
	sprintf(r, "$13\r\n%.12sx\r\n", v);
	assert_int_equal(check(&c, BENCH_OP_GET, 3, r), BENCH_REPLY_WRONG);
	assert_int_equal(c.wrong, 2);
}

static void test_nil_for_a_loaded_key_counts_as_missing_unless_the_workload_deletes(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(check(&c, BENCH_OP_GET, 1, "$-1\r\n"), BENCH_REPLY_MISSING);
	assert_int_equal(check(&c, BENCH_OP_GET, 1, "_\r\n"), BENCH_REPLY_MISSING);   /* RESP3 null */
	assert_int_equal(check(&c, BENCH_OP_EXISTS, 1, ":0\r\n"), BENCH_REPLY_MISSING);
	assert_int_equal(c.missing, 3);
	assert_non_null(strstr(c.first, "missing key"));
	memset(&c, 0, sizeof(c));
	c.allow_missing = true;
	assert_int_equal(check(&c, BENCH_OP_GET, 1, "$-1\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_EXISTS, 1, ":0\r\n"), BENCH_REPLY_OK);
	assert_int_equal(c.nils, 2);
	assert_int_equal(bench_check_failures(&c), 0);
}

static void test_error_replies_are_counted_for_every_op(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	for (int op = 0; op < BENCH_OP_COUNT; op++)
		assert_int_equal(check(&c, op, 1, "-ERR out of memory\r\n"), BENCH_REPLY_ERROR);
	assert_int_equal(check(&c, BENCH_OP_GET, 1, "!9\r\nERR oops!\r\n"), BENCH_REPLY_ERROR);   /* RESP3 */
	assert_int_equal(c.errors, BENCH_OP_COUNT + 1);
	assert_non_null(strstr(c.first, "GET key 1: error reply: -ERR out of memory"));
}

static void test_replies_of_the_wrong_type_count_as_wrong(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(check(&c, BENCH_OP_GET, 1, ":1\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_GET, 1, "+OK\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_SET, 1, "$2\r\nOK\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_MSET, 1, "+QUEUED\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_INCR, 1, "$1\r\n1\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_INCR, 1, ":x\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_DEL, 1, ":2\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_EXISTS, 1, ":2\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_PING, 0, "+OK\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_GET, 1, "", 0), BENCH_REPLY_WRONG);
	assert_int_equal(c.wrong, 10);
}

static void test_expected_replies_of_the_other_ops_pass(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(check(&c, BENCH_OP_SET, 1, "+OK\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_MSET, 1, "+OK\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_INCR, 1, ":12345\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_INCR, 1, ":-3\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_DEL, 1, ":1\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_DEL, 1, ":0\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_EXISTS, 1, ":1\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_PING, 0, "+PONG\r\n"), BENCH_REPLY_OK);
	assert_int_equal(bench_check_failures(&c), 0);
}

static void test_the_first_failure_is_kept_and_merged(void **state)
{
	(void)state;
	bench_check a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	check(&b, BENCH_OP_GET, 5, "-ERR first\r\n");
	check(&b, BENCH_OP_GET, 6, "-ERR second\r\n");
	assert_non_null(strstr(b.first, "first"));
	bench_check_merge(&a, &b);
	assert_int_equal(a.errors, 2);
	assert_non_null(strstr(a.first, "GET key 5"));
	bench_check_note(&a, BENCH_REPLY_WRONG, BENCH_OP_MGET, 9, "x", 1);
	assert_int_equal(a.wrong, 1);
	assert_non_null(strstr(a.first, "GET key 5"));   /* still the first */
}

static void test_failure_text_escapes_binary_bytes(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	char r[] = "$3\r\n\x01\xff\\\r\n";
	bench_reply_check(&c, &g_ks, BENCH_OP_GET, 2, r, sizeof(r) - 1);
	assert_non_null(strstr(c.first, "\\x01\\xff\\x5c"));
}

static void test_array_headers_split_mget_replies(void **state)
{
	(void)state;
	size_t used = 0;
	int64_t n = 0;
	assert_int_equal(bench_array_header("*3\r\n$1\r\na\r\n", 12, &used, &n), RESP_OK);
	assert_int_equal(used, 4);
	assert_int_equal(n, 3);
	assert_int_equal(bench_array_header("*-1\r\n", 5, &used, &n), RESP_OK);
	assert_int_equal(n, -1);
	assert_int_equal(bench_array_header("*1024", 5, &used, &n), RESP_INCOMPLETE);
	assert_int_equal(bench_array_header("*10\r", 4, &used, &n), RESP_INCOMPLETE);
	assert_int_equal(bench_array_header("", 0, &used, &n), RESP_INCOMPLETE);
	assert_int_equal(bench_array_header("$3\r\nabc\r\n", 9, &used, &n), RESP_EPROTO);
	assert_int_equal(bench_array_header("*x\r\n", 4, &used, &n), RESP_EPROTO);
	assert_int_equal(bench_array_header("*3\rx", 4, &used, &n), RESP_EPROTO);
	assert_int_equal(bench_array_header("*-2\r\n", 5, &used, &n), RESP_EPROTO);
	assert_int_equal(bench_array_header("*111111111111111111111111111", 28, &used, &n), RESP_EPROTO);
}

/* The way the client walks an MGET reply: header, then each element checked against its key. */
static void test_an_mget_reply_checks_each_element_against_its_key(void **state)
{
	(void)state;
	bench_check c;
	char r[256];
	size_t len = (size_t)sprintf(r, "*3\r\n");
	len += bulk_of_value(10, r + len);
	len += bulk_of_value(99, r + len);   /* the server mixed up key 11 */
	len += (size_t)sprintf(r + len, "$-1\r\n");
	uint64_t keys[3] = { 10, 11, 12 };
	memset(&c, 0, sizeof(c));
	size_t off, used;
	int64_t n;
	char type;
	assert_int_equal(bench_array_header(r, len, &off, &n), RESP_OK);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(resp_reply_skip(r + off, len - off, &used, &type), RESP_OK);
		bench_reply_check(&c, &g_ks, BENCH_OP_MGET, keys[i], r + off, used);
		off += used;
	}
	assert_int_equal(off, len);
	assert_int_equal(c.wrong, 1);
	assert_int_equal(c.missing, 1);
	assert_non_null(strstr(c.first, "MGET key 11: wrong reply"));
}

static void test_hget_passes_the_cells_value_and_nothing_else(void **state)
{
	(void)state;
	bench_check c;
	char r[64];
	memset(&c, 0, sizeof(c));
	size_t n = bulk_of_value(141, r);   /* field 1 of key 7: the value of cell 141 */
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_HGET, 141, r, n), BENCH_REPLY_OK);
	assert_int_equal(bench_check_failures(&c), 0);
	/* the next field of the same key, and the same field of the next key */
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_HGET, 142, r, n), BENCH_REPLY_WRONG);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_HGET, 161, r, n), BENCH_REPLY_WRONG);
	assert_int_equal(bench_reply_check(&c, &g_ks, BENCH_OP_HGET, 141, r, n - 3), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_HGET, 141, "$-1\r\n"), BENCH_REPLY_MISSING);
	assert_int_equal(check(&c, BENCH_OP_HGET, 141, "-WRONGTYPE Operation against a key holding the wrong "
	                       "kind of value\r\n"), BENCH_REPLY_ERROR);
	assert_int_equal(c.wrong, 3);
	assert_int_equal(c.missing, 1);
	assert_int_equal(c.errors, 1);
	assert_true(strncmp(c.first, "HGET cell 142: wrong reply: $12", 31) == 0);
}

static void test_hset_passes_an_integer_up_to_the_fields(void **state)
{
	(void)state;
	bench_check c;
	memset(&c, 0, sizeof(c));
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, ":0\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, ":1\r\n"), BENCH_REPLY_OK);
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, ":20\r\n"), BENCH_REPLY_OK);   /* the load's reply */
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, ":21\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, ":-1\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(check(&c, BENCH_OP_HSET, 5, "+OK\r\n"), BENCH_REPLY_WRONG);
	assert_int_equal(c.wrong, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_of_a_loaded_key_passes_with_its_value),
		cmocka_unit_test(test_another_keys_value_counts_as_wrong),
		cmocka_unit_test(test_truncated_or_padded_values_count_as_wrong),
		cmocka_unit_test(test_nil_for_a_loaded_key_counts_as_missing_unless_the_workload_deletes),
		cmocka_unit_test(test_error_replies_are_counted_for_every_op),
		cmocka_unit_test(test_replies_of_the_wrong_type_count_as_wrong),
		cmocka_unit_test(test_expected_replies_of_the_other_ops_pass),
		cmocka_unit_test(test_the_first_failure_is_kept_and_merged),
		cmocka_unit_test(test_failure_text_escapes_binary_bytes),
		cmocka_unit_test(test_array_headers_split_mget_replies),
		cmocka_unit_test(test_an_mget_reply_checks_each_element_against_its_key),
		cmocka_unit_test(test_hget_passes_the_cells_value_and_nothing_else),
		cmocka_unit_test(test_hset_passes_an_integer_up_to_the_fields),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
