/*
 * test_cli.c - the flag table both benchmark programs parse their command lines by (bench_cli):
 * every kind stores its value at its row's field, numbers outside a row's range and malformed
 * values are refused without touching the field's value, lists count their entries and refuse one
 * too many, aliases find their first row, defaults are stored as if given (the tool's own rows
 * skipped), and getopt's table is built row for row.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "bench/bench.h"

typedef struct opts {
	bool flag;
	const char *str;
	int i;
	uint32_t u32;
	uint64_t u64, size;
	double d;
	int ints[4], nints;
	double rates[4];
	int nrates;
	int ops[4], nops;
} opts;

#define F(field) offsetof(opts, field)
static const bench_cli rows[] = {
	{ "flag", 'f', no_argument, BENCH_CLI_FLAG, F(flag), 0, 0, 0, 0, "--flag", NULL },
	{ "str", 's', required_argument, BENCH_CLI_STR, F(str), 0, 0, 0, 0, "--str", "dflt" },
	{ "int", 256, required_argument, BENCH_CLI_INT, F(i), 0, 1, 100, 0, "--int", "5" },
	{ "u32", 257, required_argument, BENCH_CLI_U32, F(u32), 0, 0, 1 << 24, 0, "--u32", NULL },
	{ "u64", 258, required_argument, BENCH_CLI_U64, F(u64), 0, 1, 1000, 0, "--u64", "10" },
	{ "size", 259, required_argument, BENCH_CLI_SIZE, F(size), 0, 0, 0, 0, "--size", "1k" },
	{ "double", 260, required_argument, BENCH_CLI_DOUBLE, F(d), 0, 0, 0, 0, "--double", NULL },
	{ "ints", 't', required_argument, BENCH_CLI_INTS, F(ints), F(nints), 1, 9, 4, "-t", "3,4" },
	{ "rates", 261, required_argument, BENCH_CLI_RATES, F(rates), F(nrates), 0, 0, 4, "--rates", NULL },
	{ "ops", 262, required_argument, BENCH_CLI_OPS, F(ops), F(nops), 0, 0, 4, "--ops", "PING" },
	{ "own", 263, required_argument, BENCH_CLI_OWN, 0, 0, 0, 0, 0, "--own", "not applied" },
	{ "alias", 's', required_argument, BENCH_CLI_STR, F(str), 0, 0, 0, 0, "--alias", NULL },
};
#undef F
#define NROWS ((int)SPW_ARRAY_LEN(rows))

static const bench_cli *row(int key)
{
	const bench_cli *d = bench_cli_find(rows, NROWS, key);
	assert_non_null(d);
	return d;
}

static void test_cli_scalar_kinds_store_at_their_field(void **state)
{
	(void)state;
	opts o;
	memset(&o, 0, sizeof(o));
	assert_int_equal(bench_cli_apply(row('f'), NULL, &o), 0);
	assert_true(o.flag);
	assert_int_equal(bench_cli_apply(row('s'), "abc", &o), 0);
	assert_string_equal(o.str, "abc");
	assert_int_equal(bench_cli_apply(row(256), "42", &o), 0);
	assert_int_equal(o.i, 42);
	assert_int_equal(bench_cli_apply(row(257), "4096", &o), 0);
	assert_int_equal(o.u32, 4096);
	assert_int_equal(bench_cli_apply(row(258), "1000", &o), 0);
	assert_int_equal(o.u64, 1000);
	assert_int_equal(bench_cli_apply(row(259), "2m", &o), 0);
	assert_int_equal(o.size, 2u << 20);
	assert_int_equal(bench_cli_apply(row(260), "0.5", &o), 0);
	assert_true(o.d == 0.5);
}

static void test_cli_refuses_values_out_of_range_or_malformed(void **state)
{
	(void)state;
	opts o;
	memset(&o, 0, sizeof(o));
	o.i = 7;
	o.u64 = 7;
	assert_int_equal(bench_cli_apply(row(256), "0", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(256), "101", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(256), "5x", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(256), "", &o), -EINVAL);
	assert_int_equal(o.i, 7);
	assert_int_equal(bench_cli_apply(row(257), "-1", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(258), "0", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(258), "1001", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(258), "-5", &o), -EINVAL);
	assert_int_equal(o.u64, 7);
	assert_int_equal(bench_cli_apply(row(259), "2q", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(260), "nan", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(263), "x", &o), -ENOTSUP);
}

static void test_cli_lists_count_entries_and_refuse_one_too_many(void **state)
{
	(void)state;
	opts o;
	memset(&o, 0, sizeof(o));
	assert_int_equal(bench_cli_apply(row('t'), "1,2,9", &o), 0);
	assert_int_equal(o.nints, 3);
	assert_int_equal(o.ints[0], 1);
	assert_int_equal(o.ints[2], 9);
	assert_int_equal(bench_cli_apply(row('t'), "1,2,3,4,5", &o), -EINVAL);
	assert_true(o.nints < 0);
	assert_int_equal(bench_cli_apply(row('t'), "1,10", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row('t'), ",", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(261), "1e5,2.5", &o), 0);
	assert_int_equal(o.nrates, 2);
	assert_true(o.rates[1] == 2.5);
	assert_int_equal(bench_cli_apply(row(261), "0", &o), -EINVAL);
	assert_int_equal(bench_cli_apply(row(262), "get,SET", &o), 0);
	assert_int_equal(o.nops, 2);
	assert_int_equal(o.ops[0], BENCH_OP_GET);
	assert_int_equal(o.ops[1], BENCH_OP_SET);
	assert_int_equal(bench_cli_apply(row(262), "GET,NOPE", &o), -EINVAL);
}

static void test_cli_defaults_are_stored_as_if_given_and_own_rows_skipped(void **state)
{
	(void)state;
	opts o;
	memset(&o, 0, sizeof(o));
	assert_int_equal(bench_cli_defaults(rows, NROWS, &o), 0);
	assert_false(o.flag);
	assert_string_equal(o.str, "dflt");
	assert_int_equal(o.i, 5);
	assert_int_equal(o.u64, 10);
	assert_int_equal(o.size, 1024);
	assert_int_equal(o.nints, 2);
	assert_int_equal(o.ints[1], 4);
	assert_int_equal(o.nops, 1);
	assert_int_equal(o.ops[0], BENCH_OP_PING);
	assert_int_equal(o.nrates, 0);

	static const bench_cli bad[] = {
		{ "int", 256, required_argument, BENCH_CLI_INT, offsetof(opts, i), 0, 1, 100, 0, "--int", "0" },
	};
	assert_int_equal(bench_cli_defaults(bad, 1, &o), -EINVAL);
}

static void test_cli_builds_getopts_table_row_for_row(void **state)
{
	(void)state;
	struct option lo[NROWS + 1];
	bench_cli_longopts(rows, NROWS, lo);
	for (int i = 0; i < NROWS; i++) {
		assert_string_equal(lo[i].name, rows[i].name);
		assert_int_equal(lo[i].val, rows[i].key);
		assert_int_equal(lo[i].has_arg, rows[i].has_arg);
		assert_null(lo[i].flag);
	}
	assert_null(lo[NROWS].name);
	assert_string_equal(bench_cli_find(rows, NROWS, 's')->name, "str");   /* the first of an alias */
	assert_null(bench_cli_find(rows, NROWS, '?'));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_scalar_kinds_store_at_their_field),
		cmocka_unit_test(test_cli_refuses_values_out_of_range_or_malformed),
		cmocka_unit_test(test_cli_lists_count_entries_and_refuse_one_too_many),
		cmocka_unit_test(test_cli_defaults_are_stored_as_if_given_and_own_rows_skipped),
		cmocka_unit_test(test_cli_builds_getopts_table_row_for_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
