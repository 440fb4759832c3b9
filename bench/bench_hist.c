/*
 * bench_hist.c - the latency histogram (HdrHistogram's log-linear layout, our code).
 *
 * Layout: value v lives in bucket b = (position of v's highest bit) - (sub-bucket bits), and in that
 * bucket at sub-bucket v >> (b + unit_mag). Bucket 0 covers [0, sub_count << unit_mag) in
 * sub_count linear steps; every further bucket covers the next power of two in sub_half steps (its
 * lower half is already covered by the bucket below), so the counts array holds
 * (buckets + 1) * sub_half slots and the relative error of any value is at most 1 / sub_half.
 *
 * Invariants:
 *  1. counts is allocated by bench_hist_init only; record/merge/reset/percentile never allocate.
 *  2. total == sum of counts, min/max are the extremes of recorded (clamped) values.
 *  3. Two histograms merge only when their layout fields are equal (same init arguments).
 */
#include "bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int bench_hist_init(bench_hist *h, int64_t lowest, int64_t highest, int sigfigs)
{
	memset(h, 0, sizeof(*h));
	if (lowest < 1 || highest < 2 * lowest || sigfigs < 1 || sigfigs > 5)
		return -EINVAL;
	int64_t largest_single_unit = 2 * (int64_t)pow(10, sigfigs);
	int sub_count_mag = (int)ceil(log2((double)largest_single_unit));
	h->lowest = lowest;
	h->highest = highest;
	h->unit_mag = 63 - __builtin_clzll((uint64_t)lowest);
	h->sub_half_mag = (sub_count_mag > 1 ? sub_count_mag : 1) - 1;
	h->sub_count = (int64_t)1 << (h->sub_half_mag + 1);
	h->sub_half = h->sub_count / 2;
	h->sub_mask = (h->sub_count - 1) << h->unit_mag;
	/* Buckets until the first value the histogram cannot hold passes highest. */
	int64_t untrackable = h->sub_count << h->unit_mag;
	int buckets = 1;
	while (untrackable <= highest) {
		if (untrackable > INT64_MAX / 2) {
			buckets++;
			break;
		}
		untrackable <<= 1;
		buckets++;
	}
	h->buckets = buckets;
	h->counts_len = (int32_t)((buckets + 1) * h->sub_half);
	h->counts = calloc((size_t)h->counts_len, sizeof(*h->counts));
	if (!h->counts)
		return -ENOMEM;
	h->min = INT64_MAX;
	h->max = 0;
	return 0;
}

void bench_hist_fini(bench_hist *h)
{
	free(h->counts);
	h->counts = NULL;
}

void bench_hist_reset(bench_hist *h)
{
	memset(h->counts, 0, (size_t)h->counts_len * sizeof(*h->counts));
	h->total = 0;
	h->sum = 0;
	h->min = INT64_MAX;
	h->max = 0;
}

int bench_hist_merge(bench_hist *dst, const bench_hist *src)
{
	if (dst->counts_len != src->counts_len || dst->unit_mag != src->unit_mag ||
	    dst->sub_half_mag != src->sub_half_mag)
		return -EINVAL;
	if (!src->total)
		return 0;
	for (int32_t i = 0; i < src->counts_len; i++)
		dst->counts[i] += src->counts[i];
	dst->total += src->total;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	return 0;
}

/* The lowest value of the sub-bucket at counts index i. */
static int64_t hist_value_at_index(const bench_hist *h, int32_t i)
{
	int32_t bucket = (i >> h->sub_half_mag) - 1;
	int64_t sub = (i & (h->sub_half - 1)) + h->sub_half;
	if (bucket < 0) {
		sub -= h->sub_half;
		bucket = 0;
	}
	return sub << (bucket + h->unit_mag);
}

/* Width of the sub-bucket that holds v. */
static int64_t hist_equiv_range(const bench_hist *h, int64_t v)
{
	int pow2ceil = 64 - __builtin_clzll((uint64_t)v | (uint64_t)h->sub_mask);
	int bucket = pow2ceil - h->unit_mag - (h->sub_half_mag + 1);
	int64_t sub = v >> (bucket + h->unit_mag);
	if (sub >= h->sub_count)
		bucket++;
	return (int64_t)1 << (h->unit_mag + bucket);
}

int64_t bench_hist_lowest_equiv(const bench_hist *h, int64_t v)
{
	return hist_value_at_index(h, bench_hist_index(h, v));
}

int64_t bench_hist_highest_equiv(const bench_hist *h, int64_t v)
{
	return bench_hist_lowest_equiv(h, v) + hist_equiv_range(h, v) - 1;
}

int64_t bench_hist_percentile(const bench_hist *h, double p)
{
	if (!h->total)
		return 0;
	if (p <= 0)
		return h->min;
	if (p >= 100)
		return h->max;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->total);
	if (rank < 1)
		rank = 1;
	if (rank > h->total)
		rank = h->total;
	uint64_t seen = 0;
	for (int32_t i = 0; i < h->counts_len; i++) {
		seen += h->counts[i];
		if (seen >= rank) {
			/* The sub-bucket's highest value, but never beyond what was recorded. */
			int64_t v = bench_hist_highest_equiv(h, hist_value_at_index(h, i));
			return v < h->max ? v : h->max;
		}
	}
	return h->max;
}

double bench_hist_mean(const bench_hist *h)
{
	return h->total ? (double)h->sum / (double)h->total : 0.0;
}

void bench_hist_print(const bench_hist *h, FILE *f, double unit, int ticks_per_half)
{
	fprintf(f, "%12s %14s %10s %14s\n\n", "Value", "Percentile", "TotalCount", "1/(1-Percentile)");
	if (!h->total) {
		fprintf(f, "#[no samples]\n");
		return;
	}
	/* Percentile steps as HdrHistogram's percentile iterator: ticks_per_half steps per halving of
	 * the distance to 100%, each reported at the first sub-bucket that reaches it. */
	double pct = 0.0;
	uint64_t seen = 0;
	for (int32_t i = 0; i < h->counts_len && seen < h->total; i++) {
		if (!h->counts[i])
			continue;
		seen += h->counts[i];
		double reached = 100.0 * (double)seen / (double)h->total;
		int64_t v = bench_hist_highest_equiv(h, hist_value_at_index(h, i));
		if (v > h->max)
			v = h->max;
		while (pct <= reached && pct < 100.0) {
			fprintf(f, "%12.3f %14.12f %10llu %14.2f\n", (double)v / unit, pct / 100.0,
			        (unsigned long long)seen, 1.0 / (1.0 - pct / 100.0));
			if (seen == h->total)
				break;   /* the last value: only the 100% line follows */
			double half = ldexp(1.0, (int)floor(log2(100.0 / (100.0 - pct))) + 1);
			pct += 100.0 / (half * ticks_per_half);
			if (100.0 - pct < 1e-9)
				pct = 100.0;
		}
	}
	fprintf(f, "%12.3f %14.12f %10llu %14s\n", (double)h->max / unit, 1.0, (unsigned long long)h->total, "inf");
	fprintf(f, "#[Mean    = %12.3f, StdDeviation   = n/a]\n", bench_hist_mean(h) / unit);
	fprintf(f, "#[Max     = %12.3f, Total count    = %12llu]\n", (double)h->max / unit,
	        (unsigned long long)h->total);
	fprintf(f, "#[Buckets = %12d, SubBuckets     = %12lld]\n", h->buckets, (long long)h->sub_count);
}
