/*
 * test_zipf.c - spillway-bench's key choice: the Zipf generator draws ranks with the Zipf law's
 * frequencies (checked rank by rank with a chi-square test, and on the hottest ranks within 2%),
 * stays inside the key space for tiny and huge ones, and rejects bad exponents. The seeds are
 * fixed, so each test is repeatable; a generator that is off by even a few percent on a group of
 * ranks (as Gray et al.'s approximation is on ranks 2..9) fails them.
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

enum { NRANKS = 100, DRAWS = 1000000 };

/* Chi-square of observed rank counts against the Zipf law for n = NRANKS. */
static double zipf_chi2(double theta, uint64_t seed, double *p0_rel, double *p1_rel)
{
	bench_zipf z;
	bench_rng r;
	uint64_t *c = calloc(NRANKS, sizeof(*c));
	assert_non_null(c);
	assert_int_equal(bench_zipf_init(&z, NRANKS, theta), 0);
	bench_rng_seed(&r, seed);
	for (int i = 0; i < DRAWS; i++) {
		uint64_t k = bench_zipf_next(&z, &r);
		assert_true(k < NRANKS);
		c[k]++;
	}
	double norm = 0;
	for (int k = 1; k <= NRANKS; k++)
		norm += pow(k, -theta);
	double chi2 = 0;
	for (int k = 0; k < NRANKS; k++) {
		double e = DRAWS * pow(k + 1, -theta) / norm;
		chi2 += (c[k] - e) * (c[k] - e) / e;
		if (k == 0)
			*p0_rel = (c[k] - e) / e;
		if (k == 1)
			*p1_rel = (c[k] - e) / e;
	}
	free(c);
	return chi2;
}

/* 99 degrees of freedom: P(chi2 > 148.2) = 0.001 for a correct generator. */
#define CHI2_99DF_P001 148.2

static void check_theta(double theta)
{
	double p0 = 1, p1 = 1;
	double chi2 = zipf_chi2(theta, 1234, &p0, &p1);
	if (chi2 > CHI2_99DF_P001)
		fail_msg("theta %.2f: chi-square %.1f over %d ranks (critical %.1f)", theta, chi2, NRANKS, CHI2_99DF_P001);
	assert_true(fabs(p0) < 0.02);
	assert_true(fabs(p1) < 0.02);
}

static void test_zipf_099_follows_the_zipf_law_rank_by_rank(void **state)
{
	(void)state;
	check_theta(0.99);
}

static void test_zipf_other_exponents_follow_the_law_too(void **state)
{
	(void)state;
	check_theta(0.5);
	check_theta(1.0);
	check_theta(1.5);
}

static void test_zipf_hottest_key_share_on_a_large_key_space(void **state)
{
	(void)state;
	/* n = 10^9: P(rank 0) = 1 / H(n, 0.99); H computed here by the Euler-Maclaurin formula. */
	const double theta = 0.99;
	const uint64_t n = 1000000000ULL;
	double h = 0;
	for (int k = 1; k <= 1000000; k++)
		h += pow(k, -theta);
	double a = 1000000.0, b = (double)n;
	h += (pow(b, 1 - theta) - pow(a, 1 - theta)) / (1 - theta) + (pow(b, -theta) - pow(a, -theta)) / 2;
	bench_zipf z;
	bench_rng r;
	assert_int_equal(bench_zipf_init(&z, n, theta), 0);
	bench_rng_seed(&r, 99);
	uint64_t hot = 0, ndraw = 2000000;
	for (uint64_t i = 0; i < ndraw; i++) {
		uint64_t k = bench_zipf_next(&z, &r);
		assert_true(k < n);
		hot += k == 0;
	}
	double e = (double)ndraw / h;
	if (fabs((double)hot - e) > 0.03 * e)
		fail_msg("rank 0 drawn %llu times, expected %.0f", (unsigned long long)hot, e);
}

static void test_zipf_stays_inside_tiny_key_spaces(void **state)
{
	(void)state;
	for (uint64_t n = 1; n <= 3; n++) {
		bench_zipf z;
		bench_rng r;
		uint64_t seen[3] = { 0, 0, 0 };
		assert_int_equal(bench_zipf_init(&z, n, 0.99), 0);
		bench_rng_seed(&r, n);
		for (int i = 0; i < 10000; i++) {
			uint64_t k = bench_zipf_next(&z, &r);
			assert_true(k < n);
			seen[k]++;
		}
		for (uint64_t k = 0; k < n; k++)
			assert_true(seen[k] > 0);   /* every key of a tiny space is drawn */
	}
}

static void test_zipf_rejects_bad_parameters(void **state)
{
	(void)state;
	bench_zipf z;
	assert_int_equal(bench_zipf_init(&z, 100, 0.0), -EINVAL);
	assert_int_equal(bench_zipf_init(&z, 100, -0.5), -EINVAL);
	assert_int_equal(bench_zipf_init(&z, 100, 11.0), -EINVAL);
	assert_int_equal(bench_zipf_init(&z, 100, NAN), -EINVAL);
	assert_int_equal(bench_zipf_init(&z, 0, 0.99), -EINVAL);
}

static void test_uniform_keys_cover_the_key_space_evenly(void **state)
{
	(void)state;
	bench_keyspace ks;
	bench_rng r;
	uint64_t c[10] = { 0 };
	assert_int_equal(bench_keyspace_init(&ks, 10, 0, 8, 0.0), 0);
	bench_rng_seed(&r, 5);
	for (int i = 0; i < 100000; i++)
		c[bench_key_pick(&ks, &r)]++;
	double chi2 = 0;
	for (int k = 0; k < 10; k++)
		chi2 += (c[k] - 10000.0) * (c[k] - 10000.0) / 10000.0;
	assert_true(chi2 < 27.9);   /* 9 degrees of freedom, P = 0.001 */
}

static void test_keyspace_with_zipf_picks_hot_keys_first(void **state)
{
	(void)state;
	bench_keyspace ks;
	bench_rng r;
	uint64_t low = 0;
	assert_int_equal(bench_keyspace_init(&ks, 1000000, 0, 8, 0.99), 0);
	assert_true(ks.zipf);
	bench_rng_seed(&r, 6);
	for (int i = 0; i < 100000; i++)
		low += bench_key_pick(&ks, &r) < 1000;
	/* Keys 0..999 hold about half of the draws for theta 0.99 over a million keys (uniform: 0.1%). */
	assert_true(low > 40000 && low < 60000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zipf_099_follows_the_zipf_law_rank_by_rank),
		cmocka_unit_test(test_zipf_other_exponents_follow_the_law_too),
		cmocka_unit_test(test_zipf_hottest_key_share_on_a_large_key_space),
		cmocka_unit_test(test_zipf_stays_inside_tiny_key_spaces),
		cmocka_unit_test(test_zipf_rejects_bad_parameters),
		cmocka_unit_test(test_uniform_keys_cover_the_key_space_evenly),
		cmocka_unit_test(test_keyspace_with_zipf_picks_hot_keys_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
