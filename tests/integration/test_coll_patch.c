/*
 * test_coll_patch.c - collection writes patched where the record lies (server/coll.c notes 6-7): a
 * real spillway-server, pushes, pops, rotations and one-field hash writes checked against their
 * replies and a read back, and INFO's coll_patches_in_place / coll_patches_copied showing which
 * write ran.
 *
 * Notes:
 *  1. The proof that the in-place path ran is the counter, not timing: single-element pushes onto
 *     one list and same-size value replacements in one hash are mostly in place (coll_value_len's
 *     room), and the copies (the record outgrowing its room) are fewer.
 *  2. A list past 65535 elements: the listpack's count says "unknown" there, and the length the
 *     replies give comes from the count kept after the payload (coll/coll.h COLL_F_COUNT); it is
 *     checked across pushes at both ends, pops, a rotation and LLEN.
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

static itest_server g_srv;
static itest_conn g_c;

static int setup(void **state)
{
	(void)state;
	if (itest_spillway_start(&g_srv, NULL) != 0 || itest_conn_open(&g_c, g_srv.port) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	itest_conn_close(&g_c);
	return itest_server_stop(&g_srv);
}

static void expect_int(const char *want_num, const char *arg0, const char *a1, const char *a2,
	const char *a3)
{
	char want[48];
	snprintf(want, sizeof(want), ":%s\r\n", want_num);
	itest_expect(&g_c, want, arg0, a1, a2, a3, NULL);
}

static void test_pushes_and_pops_run_in_place(void **state)
{
	char e[32], n[32];
	(void)state;
	long long in0 = itest_info_stat(&g_c, "coll_patches_in_place");
	long long cp0 = itest_info_stat(&g_c, "coll_patches_copied");
	for (int i = 0; i < 400; i++) {
		snprintf(e, sizeof(e), "%s%d", i % 3 ? "elem" : "", i);   /* ints and strings */
		snprintf(n, sizeof(n), "%d", i + 1);
		expect_int(n, i % 2 ? "RPUSH" : "LPUSH", "l", e, NULL);
	}
	long long in1 = itest_stat_grew(&g_c, "coll_patches_in_place", in0, 300, "400 single pushes");
	long long cp1 = itest_info_stat(&g_c, "coll_patches_copied");
	assert_true(cp1 - cp0 < in1 - in0);
	/* The ends: LPUSH put the even ones at the head, last first; RPUSH the odd ones at the tail. */
	itest_expect(&g_c, "*2\r\n$7\r\nelem398\r\n$3\r\n396\r\n", "LRANGE", "l", "0", "1", NULL);
	itest_expect(&g_c, "*2\r\n$7\r\nelem398\r\n$3\r\n396\r\n", "LPOP", "l", "2", NULL);
	itest_expect(&g_c, "*2\r\n$3\r\n399\r\n$7\r\nelem397\r\n", "RPOP", "l", "2", NULL);
	itest_expect(&g_c, ":396\r\n", "LLEN", "l", NULL);
	itest_expect(&g_c, "$7\r\nelem395\r\n", "RPOPLPUSH", "l", "l", NULL);
	itest_expect(&g_c, "$7\r\nelem395\r\n", "LMOVE", "l", "l", "LEFT", "RIGHT", NULL);
	itest_expect(&g_c, "$7\r\nelem395\r\n", "LMOVE", "l", "m", "RIGHT", "LEFT", NULL);
	itest_expect(&g_c, "$7\r\nelem395\r\n", "LMOVE", "m", "l", "LEFT", "LEFT", NULL);
	itest_expect(&g_c, "*3\r\n$7\r\nelem395\r\n$7\r\nelem394\r\n$7\r\nelem392\r\n", "LRANGE", "l",
		"0", "2", NULL);
	itest_expect(&g_c, "*2\r\n$7\r\nelem391\r\n$3\r\n393\r\n", "LRANGE", "l", "-2", "-1", NULL);
	itest_stat_grew(&g_c, "coll_patches_in_place", in1, 6, "pops, rotations, LMOVE's pop and push on l");
	itest_expect(&g_c, ":1\r\n", "DEL", "l", NULL);
}

static void test_hash_writes_of_one_field_run_in_place(void **state)
{
	char f[32], v[32];
	(void)state;
	for (int i = 0; i < 50; i++) {
		snprintf(f, sizeof(f), "f%d", i);
		itest_expect(&g_c, ":1\r\n", "HSET", "h", f, "v0", NULL);
	}
	long long in0 = itest_info_stat(&g_c, "coll_patches_in_place");
	for (int i = 0; i < 200; i++) {
		snprintf(f, sizeof(f), "f%d", i % 50);
		/* same encoded size, another value each time: written over the old */
		snprintf(v, sizeof(v), "v%d", 1 + (i / 50 + i) % 9);
		itest_expect(&g_c, ":0\r\n", "HSET", "h", f, v, NULL);
	}
	long long in1 = itest_stat_grew(&g_c, "coll_patches_in_place", in0, 200, "same-size HSET");
	itest_expect_bulk(&g_c, "v5", "HGET", "h", "f49", NULL);
	/* the value it has already: nothing to write (cmd_hash.c hash_patch_set) */
	itest_expect(&g_c, ":0\r\n", "HSET", "h", "f49", "v5", NULL);
	if (itest_info_stat(&g_c, "coll_patches_in_place") != in1)
		fail_msg("an HSET of the value the field has wrote the hash");
	itest_expect(&g_c, ":0\r\n", "HSETNX", "h", "f1", "x", NULL);
	itest_expect(&g_c, ":1\r\n", "HSETNX", "h", "new", "x", NULL);
	itest_expect(&g_c, ":5\r\n", "HINCRBY", "h", "n", "5", NULL);
	itest_expect(&g_c, ":100005\r\n", "HINCRBY", "h", "n", "100000", NULL);   /* a wider int */
	itest_expect_bulk(&g_c, "100005.5", "HINCRBYFLOAT", "h", "n", "0.5", NULL);
	itest_expect(&g_c, ":1\r\n", "HDEL", "h", "f0", NULL);
	itest_expect(&g_c, ":51\r\n", "HLEN", "h", NULL);
	itest_expect_bulk(&g_c, "v2", "HGET", "h", "f1", NULL);
	itest_expect_bulk(&g_c, "x", "HGET", "h", "new", NULL);
	itest_expect(&g_c, "$-1\r\n", "HGET", "h", "f0", NULL);
	itest_stat_grew(&g_c, "coll_patches_in_place", in1, 4, "HSETNX, HINCRBY, HDEL of one field");
	itest_expect(&g_c, ":1\r\n", "DEL", "h", NULL);
}

/* Note 2. */
static void test_length_past_65535_elements(void **state)
{
	enum { BATCH = 1000, TOTAL = 70000 };
	static char elems[BATCH][16];
	const char *argv[2 + BATCH] = { "RPUSH", "big" };
	size_t lens[2 + BATCH] = { 5, 3 };
	char want[32];
	(void)state;
	for (int b = 0; b < TOTAL / BATCH; b++) {
		for (int i = 0; i < BATCH; i++) {
			lens[2 + i] = (size_t)snprintf(elems[i], sizeof(elems[i]), "e%d", b * BATCH + i);
			argv[2 + i] = elems[i];
		}
		char *r = itest_conn_call_argv(&g_c, 2 + BATCH, argv, lens);
		snprintf(want, sizeof(want), ":%d\r\n", (b + 1) * BATCH);
		assert_non_null(r);
		assert_string_equal(r, want);
		free(r);
	}
	itest_expect(&g_c, ":70000\r\n", "LLEN", "big", NULL);
	itest_expect(&g_c, ":70001\r\n", "LPUSH", "big", "head", NULL);
	itest_expect(&g_c, ":70002\r\n", "RPUSH", "big", "tail", NULL);
	itest_expect(&g_c, "*2\r\n$4\r\nhead\r\n$2\r\ne0\r\n", "LPOP", "big", "2", NULL);
	itest_expect(&g_c, "$4\r\ntail\r\n", "RPOPLPUSH", "big", "big", NULL);
	itest_expect(&g_c, ":70000\r\n", "LLEN", "big", NULL);
	itest_expect(&g_c, "*2\r\n$4\r\ntail\r\n$2\r\ne1\r\n", "LRANGE", "big", "0", "1", NULL);
	itest_expect(&g_c, "$6\r\ne69999\r\n", "LINDEX", "big", "-1", NULL);
	itest_expect(&g_c, "+OK\r\n", "LTRIM", "big", "0", "65533", NULL);   /* built; counted once */
	itest_expect(&g_c, ":65534\r\n", "LLEN", "big", NULL);
	itest_expect(&g_c, ":65535\r\n", "RPUSH", "big", "x", NULL);
	itest_expect(&g_c, ":1\r\n", "DEL", "big", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pushes_and_pops_run_in_place),
		cmocka_unit_test(test_hash_writes_of_one_field_run_in_place),
		cmocka_unit_test(test_length_past_65535_elements),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
