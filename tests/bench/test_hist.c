/*
 * test_hist.c - spillway-bench's latency histogram against exact answers: percentiles of a sorted
 * array, the 3-significant-digit resolution over 1 ns .. 60 s, clamping, merging and printing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void hist_new(bench_hist *h)
{
	assert_int_equal(bench_hist_init(h, BENCH_HIST_LOWEST, BENCH_HIST_HIGHEST, BENCH_HIST_SIGFIGS), 0);
}

/* Values spread over six decades, as latencies are: 10^(3 + 6u) ns with u uniform. */
static int64_t latency_like(bench_rng *r)
{
	return (int64_t)pow(10.0, 3.0 + 6.0 * bench_rng_double(r));
}

static void test_hist_percentiles_match_a_sorted_array(void **state)
{
	(void)state;
	enum { N = 200000 };
	static const double ps[] = { 0.1, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99 };
	int64_t *v = malloc(N * sizeof(*v));
	bench_hist h;
	bench_rng r;
	assert_non_null(v);
	hist_new(&h);
	bench_rng_seed(&r, 42);
	long double sum = 0;
	for (int i = 0; i < N; i++) {
		v[i] = latency_like(&r);
		sum += v[i];
		bench_hist_record(&h, v[i]);
	}
	qsort(v, N, sizeof(*v), cmp_i64);
	assert_int_equal(h.total, N);
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		size_t rank = (size_t)ceil(ps[i] / 100.0 * N);
		int64_t exact = v[rank - 1];
		int64_t got = bench_hist_percentile(&h, ps[i]);
		/* Never below the sample, at most one sub-bucket (1/1024 of the value) above it. */
		if (got < exact || got > exact + exact / 1024 + 1)
			fail_msg("p%g: histogram %lld, sorted array %lld", ps[i], (long long)got, (long long)exact);
	}
	assert_int_equal(bench_hist_percentile(&h, 0), v[0]);
	assert_int_equal(bench_hist_percentile(&h, 100), v[N - 1]);
	assert_true(fabs(bench_hist_mean(&h) - (double)(sum / N)) < 1e-6 * (double)(sum / N));
	bench_hist_fini(&h);
	free(v);
}

static void test_hist_percentiles_of_a_few_exact_values(void **state)
{
	(void)state;
	bench_hist h;
	hist_new(&h);
	/* Below 2048 every value has its own slot: answers are exact. */
	for (int i = 1; i <= 100; i++)
		bench_hist_record(&h, i * 10);
	assert_int_equal(bench_hist_percentile(&h, 50), 500);
	assert_int_equal(bench_hist_percentile(&h, 99), 990);
	assert_int_equal(bench_hist_percentile(&h, 1), 10);
	assert_int_equal(bench_hist_percentile(&h, 0.5), 10);
	assert_int_equal(bench_hist_percentile(&h, 100), 1000);
	bench_hist_fini(&h);
}

static void test_hist_keeps_three_significant_digits_from_1us_to_60s(void **state)
{
	(void)state;
	bench_hist h;
	hist_new(&h);
	for (int64_t v = 1000; v <= BENCH_HIST_HIGHEST; v = v * 3 / 2 + 7) {
		int64_t lo = bench_hist_lowest_equiv(&h, v), hi = bench_hist_highest_equiv(&h, v);
		assert_true(lo <= v && v <= hi);
		if ((double)(hi - lo) > (double)v / 1000.0)
			fail_msg("value %lld shares its slot with [%lld, %lld]: worse than 3 digits", (long long)v,
			         (long long)lo, (long long)hi);
	}
	/* The slot of the largest value is still a real slot. */
	assert_true(bench_hist_index(&h, BENCH_HIST_HIGHEST) < h.counts_len);
	bench_hist_fini(&h);
}

static void test_hist_clamps_values_outside_its_range(void **state)
{
	(void)state;
	bench_hist h;
	hist_new(&h);
	bench_hist_record(&h, -5);
	bench_hist_record(&h, BENCH_HIST_HIGHEST * 10);
	assert_int_equal(h.total, 2);
	assert_int_equal(bench_hist_percentile(&h, 0), 0);
	assert_int_equal(bench_hist_percentile(&h, 100), BENCH_HIST_HIGHEST);
	bench_hist_fini(&h);
}

static void test_hist_merge_adds_counts_and_extremes(void **state)
{
	(void)state;
	bench_hist a, b, all;
	bench_rng r;
	hist_new(&a);
	hist_new(&b);
	hist_new(&all);
	bench_rng_seed(&r, 7);
	for (int i = 0; i < 10000; i++) {
		int64_t v = latency_like(&r);
		bench_hist_record(i % 3 ? &a : &b, v);
		bench_hist_record(&all, v);
	}
	assert_int_equal(bench_hist_merge(&a, &b), 0);
	assert_int_equal(a.total, all.total);
	assert_int_equal(a.min, all.min);
	assert_int_equal(a.max, all.max);
	assert_memory_equal(a.counts, all.counts, (size_t)a.counts_len * sizeof(*a.counts));
	bench_hist_fini(&a);
	bench_hist_fini(&b);
	bench_hist_fini(&all);
}

static void test_hist_merge_rejects_a_different_layout(void **state)
{
	(void)state;
	bench_hist a, b;
	hist_new(&a);
	assert_int_equal(bench_hist_init(&b, 1, 1000000, 2), 0);
	bench_hist_record(&b, 5);
	assert_int_equal(bench_hist_merge(&a, &b), -EINVAL);
	assert_int_equal(a.total, 0);
	bench_hist_fini(&a);
	bench_hist_fini(&b);
}

static void test_hist_init_rejects_bad_ranges(void **state)
{
	(void)state;
	bench_hist h;
	assert_int_equal(bench_hist_init(&h, 0, 1000, 3), -EINVAL);
	assert_int_equal(bench_hist_init(&h, 10, 15, 3), -EINVAL);
	assert_int_equal(bench_hist_init(&h, 1, 1000, 0), -EINVAL);
	assert_int_equal(bench_hist_init(&h, 1, 1000, 6), -EINVAL);
}

static void test_hist_reset_forgets_everything(void **state)
{
	(void)state;
	bench_hist h;
	hist_new(&h);
	bench_hist_record_n(&h, 12345, 10);
	bench_hist_reset(&h);
	assert_int_equal(h.total, 0);
	assert_int_equal(bench_hist_percentile(&h, 50), 0);
	bench_hist_record(&h, 77);
	assert_int_equal(bench_hist_percentile(&h, 50), 77);
	assert_int_equal(bench_hist_percentile(&h, 0), 77);
	bench_hist_fini(&h);
}

static void test_hist_print_lists_percentiles_up_to_the_maximum(void **state)
{
	(void)state;
	bench_hist h;
	char *out = NULL;
	size_t len = 0;
	hist_new(&h);
	for (int i = 1; i <= 1000; i++)
		bench_hist_record(&h, i * 1000);
	FILE *f = open_memstream(&out, &len);
	assert_non_null(f);
	bench_hist_print(&h, f, 1e3, 5);
	fclose(f);
	assert_non_null(strstr(out, "Percentile"));
	/* The median line (percentile 0.5, 500 samples) shows 500 us within 3 digits; the last line
	 * the maximum at percentile 1.0 */
	const char *med = strstr(out, " 0.500000000000        500 ");
	assert_non_null(med);
	while (med > out && med[-1] != '\n')
		med--;
	double v = 0;
	assert_int_equal(sscanf(med, "%lf", &v), 1);
	assert_true(v >= 500.0 && v <= 500.5);
	assert_non_null(strstr(out, "    1000.000 1.000000000000       1000            inf"));
	assert_non_null(strstr(out, "Total count    =         1000"));
	free(out);
	bench_hist_fini(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_percentiles_match_a_sorted_array),
		cmocka_unit_test(test_hist_percentiles_of_a_few_exact_values),
		cmocka_unit_test(test_hist_keeps_three_significant_digits_from_1us_to_60s),
		cmocka_unit_test(test_hist_clamps_values_outside_its_range),
		cmocka_unit_test(test_hist_merge_adds_counts_and_extremes),
		cmocka_unit_test(test_hist_merge_rejects_a_different_layout),
		cmocka_unit_test(test_hist_init_rejects_bad_ranges),
		cmocka_unit_test(test_hist_reset_forgets_everything),
		cmocka_unit_test(test_hist_print_lists_percentiles_up_to_the_maximum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
