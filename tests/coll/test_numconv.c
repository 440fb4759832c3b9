/*
 * test_numconv.c - coll/numconv: Redis 7.0's d2string and double2ll (the texts and ints a zset
 * score is stored as, checked against what redis-server 7.0 stored for the same ZADDs), the
 * score parser's accept / reject rules (getDoubleFromObject), and reading a score entry back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "common/spw.h"
#include "coll/numconv.h"

static void test_d2str_prints_as_redis_7_0(void **state)
{
	static const struct { double v; const char *s; } c[] = {
		{ NAN, "nan" }, { INFINITY, "inf" }, { -INFINITY, "-inf" }, { 0.0, "0" }, { -0.0, "-0" },
		{ 1.5, "1.5" }, { 0.1, "0.10000000000000001" }, { 3, "3" }, { -2.5, "-2.5" },
		{ 4611686018427387904.0, "4611686018427387904" }, { -4611686018427387904.0, "-4611686018427387904" },
		{ -4611686018427388928.0, "-4.6116860184273889e+18" }, { 5e18, "5e+18" }, { 1e20, "1e+20" },
		{ 1e-300, "1e-300" }, { 123456789012.0, "123456789012" },
	};
	char buf[COLL_D2STR_SIZE];
	(void)state;

	for (size_t i = 0; i < SPW_ARRAY_LEN(c); i++) {
		size_t n = coll_d2str(buf, c[i].v);
		assert_int_equal(n, strlen(c[i].s));
		assert_memory_equal(buf, c[i].s, n);
	}
}

static void test_double2ll_takes_integral_values_within_2_pow_62(void **state)
{
	long long ll = 1;
	(void)state;

	assert_true(coll_double2ll(-0.0, &ll) && ll == 0);
	assert_true(coll_double2ll(4611686018427387904.0, &ll) && ll == 4611686018427387904LL);
	assert_true(coll_double2ll(-4611686018427387904.0, &ll) && ll == -4611686018427387904LL);
	assert_false(coll_double2ll(4611686018427388928.0, &ll));
	assert_false(coll_double2ll(0.5, &ll));
	assert_false(coll_double2ll(NAN, &ll));
	assert_false(coll_double2ll(INFINITY, &ll));
}

static void test_parse_double_accepts_and_rejects_as_zadd_does(void **state)
{
	static const char *const ok[] = { "1.5", "-0", "inf", "-inf", "+inf", "1e308", "0x10", "3" };
	static const char *const bad[] = { "", " 1", "1 ", "nan", "1e400", "1e-400", "abc", "1.5x" };
	char lng[300];
	double d;
	(void)state;

	for (size_t i = 0; i < SPW_ARRAY_LEN(ok); i++) {
		assert_true(coll_parse_double(ok[i], strlen(ok[i]), &d));
	}
	for (size_t i = 0; i < SPW_ARRAY_LEN(bad); i++)
		assert_false(coll_parse_double(bad[i], strlen(bad[i]), &d));
	assert_false(coll_parse_double("1\0", 2, &d));       /* the length counts, not the NUL */
	assert_true(coll_parse_double("0x10", 4, &d) && d == 16);
	/* longer than the stack copy: the heap path */
	memset(lng, '0', sizeof(lng));
	lng[1] = '.';
	lng[sizeof(lng) - 1] = '1';
	assert_true(coll_parse_double(lng, sizeof(lng), &d) && d > 0 && d < 1e-290);
}

static void test_score_entries_read_back_as_doubles(void **state)
{
	lp_buf b;
	lp_val v;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(coll_lp_append_score(&b, 0.25, false), 0);
	assert_int_equal(coll_lp_append_score(&b, -7, false), 0);
	assert_int_equal(coll_lp_insert_score(&b, LP_HDR_SIZE, LP_BEFORE, -INFINITY, false, NULL), 0);
	lp_get(lp_seek(b.p, 0), &v);
	assert_false(v.is_int);
	assert_true(coll_lp_score(&v) == -INFINITY);
	lp_get(lp_seek(b.p, 1), &v);
	assert_false(v.is_int);
	assert_true(coll_lp_score(&v) == 0.25);
	lp_get(lp_seek(b.p, 2), &v);
	assert_true(v.is_int);
	assert_true(coll_lp_score(&v) == -7);
	lp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_d2str_prints_as_redis_7_0),
		cmocka_unit_test(test_double2ll_takes_integral_values_within_2_pow_62),
		cmocka_unit_test(test_parse_double_accepts_and_rejects_as_zadd_does),
		cmocka_unit_test(test_score_entries_read_back_as_doubles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
