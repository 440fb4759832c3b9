/*
 * test_ztree.c - coll/ztree.c, the counted B+tree's node functions: key order and bounds, inner
 * nodes (build, insert, remove, counts, the child a bound or a rank descends into, splits) and
 * leaves (pairs before a bound, splits and chunks that keep every pair in order), checked against
 * the pairs put in.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/zset.h"
#include "coll/ztree.h"

/* A leaf of n pairs "m<i>" with score i / 2 (so scores repeat), in zset order. */
static void build_leaf(lp_buf *b, int n)
{
	char m[32];
	assert_int_equal(lp_buf_init(b), 0);
	for (int i = 0; i < n; i++) {
		int ml = snprintf(m, sizeof(m), "m%05d", i);
		assert_int_equal(zs_insert(b, m, (size_t)ml, (double)(i / 2), true), 0);
	}
}

static void test_keys_order_by_score_then_member_and_bounds_are_prefixes(void **st)
{
	(void)st;
	zt_key a = { 1, "b", 1 }, b = { 1, "ba", 2 }, c = { 2, "a", 1 };
	assert_true(zt_key_cmp(&a, &b) < 0);
	assert_true(zt_key_cmp(&b, &c) < 0);
	assert_int_equal(zt_key_cmp(&a, &a), 0);
	zt_bound sc = { { 1, NULL, 0 }, true, false }, sci = { { 1, NULL, 0 }, true, true };
	assert_false(zt_before(&a, &sc));
	assert_true(zt_before(&a, &sci));
	assert_false(zt_before(&c, &sci));
	zt_bound k = { b, false, false }, ki = { b, false, true };
	assert_true(zt_before(&a, &k));
	assert_false(zt_before(&b, &k));
	assert_true(zt_before(&b, &ki));
}

static void test_inner_nodes_pick_children_by_bound_and_rank(void **st)
{
	(void)st;
	zt_ent e[3] = { { 10, 5, { 0, NULL, 0 } }, { 11, 7, { 3, "x", 1 } }, { 12, 4, { 5, "a", 1 } } };
	lp_buf b = { 0 };
	uint64_t sk;
	assert_int_equal(zt_inner_build(&b, e, 3), 0);
	assert_true(zt_inner_valid(b.p, b.len));
	assert_int_equal(zt_inner_n(b.p), 3);
	assert_int_equal(zt_inner_total(b.p), 16);
	zt_bound lo = { { 1, "zz", 2 }, false, true };
	assert_int_equal(zt_inner_pick(b.p, &lo, &sk), 0);
	assert_int_equal(sk, 0);
	zt_bound mid = { { 3, "x", 1 }, false, true };   /* inclusive: the separator's own child */
	assert_int_equal(zt_inner_pick(b.p, &mid, &sk), 1);
	assert_int_equal(sk, 5);
	zt_bound mid_ex = { { 3, "x", 1 }, false, false };
	assert_int_equal(zt_inner_pick(b.p, &mid_ex, &sk), 0);
	zt_bound hi = { { 9, NULL, 0 }, true, false };
	assert_int_equal(zt_inner_pick(b.p, &hi, &sk), 2);
	assert_int_equal(sk, 12);
	assert_int_equal(zt_inner_rank(b.p, 0, &sk), 0);
	assert_int_equal(zt_inner_rank(b.p, 4, &sk), 0);
	assert_int_equal(zt_inner_rank(b.p, 5, &sk), 1);
	assert_int_equal(sk, 5);
	assert_int_equal(zt_inner_rank(b.p, 15, &sk), 2);
	assert_int_equal(sk, 12);
	/* insert, count, remove */
	zt_ent n = { 13, 2, { 4, "long-member", 11 } }, got;
	assert_int_equal(zt_inner_insert(&b, 2, &n), 0);
	assert_true(zt_inner_valid(b.p, b.len));
	zt_inner_count_add(b.p, 2, 3);
	zt_inner_ent(b.p, zt_inner_off(b.p, 2), &got);
	assert_int_equal(got.id, 13);
	assert_int_equal(got.count, 5);
	assert_int_equal(got.sep.mlen, 11);
	assert_memory_equal(got.sep.m, "long-member", 11);
	assert_int_equal(zt_inner_total(b.p), 21);
	zt_inner_remove(&b, 1);
	assert_true(zt_inner_valid(b.p, b.len));
	assert_int_equal(zt_inner_n(b.p), 3);
	zt_inner_ent(b.p, zt_inner_off(b.p, 1), &got);
	assert_int_equal(got.id, 13);
	lp_buf_free(&b);
}

static void test_inner_split_keeps_every_entry_in_order(void **st)
{
	(void)st;
	enum { N = 300 };
	zt_ent e[N];
	char names[N][16];
	lp_buf b = { 0 }, out = { 0 };
	size_t offs[3];
	for (int i = 0; i < N; i++) {
		int l = snprintf(names[i], sizeof(names[i]), "s%d", i);
		e[i] = (zt_ent){ (uint64_t)i + 100, (uint64_t)i, { i, names[i], (size_t)l } };
	}
	assert_int_equal(zt_inner_build(&b, e, N), 0);
	assert_int_equal(zt_inner_split(b.p, b.len, &out, offs), 0);
	assert_true(zt_inner_valid(out.p, offs[1]));
	assert_true(zt_inner_valid(out.p + offs[1], offs[2] - offs[1]));
	uint32_t n1 = zt_inner_n(out.p), n2 = zt_inner_n(out.p + offs[1]);
	assert_int_equal(n1 + n2, N);
	assert_true(n1 > N / 4 && n2 > N / 4);
	assert_int_equal(zt_inner_total(out.p) + zt_inner_total(out.p + offs[1]), (uint64_t)N * (N - 1) / 2);
	zt_ent first;
	zt_inner_ent(out.p + offs[1], ZT_INNER_HDR, &first);
	assert_int_equal(first.id, 100 + n1);
	lp_buf_free(&b);
	lp_buf_free(&out);
}

static void test_leaf_before_split_and_chunks_keep_the_pairs(void **st)
{
	(void)st;
	lp_buf b, out = { 0 };
	size_t offs[3];
	build_leaf(&b, 200);
	zt_bound s10 = { { 10, NULL, 0 }, true, false }, s10i = { { 10, NULL, 0 }, true, true };
	assert_int_equal(zt_leaf_before(b.p, &s10), 20);
	assert_int_equal(zt_leaf_before(b.p, &s10i), 22);
	zt_bound k = { { 10, "m00021", 6 }, false, false };
	assert_int_equal(zt_leaf_before(b.p, &k), 21);
	assert_int_equal(zt_leaf_split(b.p, &out, offs), 0);
	const uint8_t *l = out.p, *r = out.p + offs[1];
	assert_true(lp_validate(l, offs[1], true, NULL, NULL));
	assert_true(lp_validate(r, offs[2] - offs[1], true, NULL, NULL));
	unsigned long nl = lp_count(l) / 2, nr = lp_count(r) / 2;
	assert_int_equal(nl + nr, 200);
	assert_true(nl > 80 && nr > 80);
	char buf[LP_INTBUF_SIZE];
	zt_key kl, kr;
	zt_key_of(l, lp_seek(l, -2), buf, &kl);
	char buf2[LP_INTBUF_SIZE];
	zt_key_of(r, lp_first(r), buf2, &kr);
	assert_true(zt_key_cmp(&kl, &kr) < 0);
	/* the halves concatenated are the leaf */
	assert_memory_equal(l + LP_HDR_SIZE, b.p + LP_HDR_SIZE, offs[1] - LP_EMPTY_BYTES);
	/* chunks of ~100 bytes cover every pair */
	unsigned long total = 0, pairs;
	for (const uint8_t *p = lp_first(b.p); p;) {
		const uint8_t *e = zt_chunk_end(b.p, p, 100, &pairs);
		assert_true(pairs >= 1);
		total += pairs;
		p = e;
	}
	assert_int_equal(total, 200);
	lp_buf_free(&b);
	lp_buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_order_by_score_then_member_and_bounds_are_prefixes),
		cmocka_unit_test(test_inner_nodes_pick_children_by_bound_and_rank),
		cmocka_unit_test(test_inner_split_keeps_every_entry_in_order),
		cmocka_unit_test(test_leaf_before_split_and_chunks_keep_the_pairs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
