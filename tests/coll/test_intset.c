/*
 * test_intset.c - coll/intset: byte-exact agreement with redis-server 7.0's intsets (DUMP
 * payloads, framing stripped: SADD s 1 2 300 70000 5000000000; SADD s16 5 -3 100; SADD s32 5
 * -70000 32767), upgrades on add (prepend for negatives, append otherwise), remove / find / get,
 * random operations against a sorted-array model, and is_validate on hostile bytes (every
 * truncation, byte flips, a length that would wrap the size check) without out-of-bounds reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/spw.h"
#include "coll/intset.h"

static const uint8_t redis_s[] = {
	0x08, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x70, 0x11, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf2, 0x05, 0x2a, 0x01, 0x00, 0x00, 0x00,
};
static const uint8_t redis_s16[] = {
	0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0xfd, 0xff, 0x05, 0x00, 0x64, 0x00,
};
static const uint8_t redis_s32[] = {
	0x04, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x90, 0xee, 0xfe, 0xff, 0x05, 0x00, 0x00, 0x00,
	0xff, 0x7f, 0x00, 0x00,
};

/* An intset of the n ints added in order, checked byte for byte against want. */
static void check_adds(const int64_t *v, size_t n, const uint8_t *want, size_t wlen)
{
	lp_buf b;
	bool added;

	assert_int_equal(is_init(&b), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(is_add(&b, v[i], &added), 0);
		assert_true(added);
	}
	assert_int_equal(b.len, wlen);
	assert_int_equal(is_bytes(b.p), wlen);
	assert_memory_equal(b.p, want, wlen);
	assert_true(is_validate(b.p, b.len, true));
	lp_buf_free(&b);
}

static void test_sadd_of_ints_matches_redis_bytes_at_each_width(void **state)
{
	static const int64_t s[] = { 1, 2, 300, 70000, 5000000000LL };
	static const int64_t s16[] = { 5, -3, 100 };
	static const int64_t s32[] = { 5, -70000, 32767 };
	(void)state;

	check_adds(s, SPW_ARRAY_LEN(s), redis_s, sizeof(redis_s));
	check_adds(s16, SPW_ARRAY_LEN(s16), redis_s16, sizeof(redis_s16));
	check_adds(s32, SPW_ARRAY_LEN(s32), redis_s32, sizeof(redis_s32));
}

static void test_upgrades_keep_order_and_put_the_new_int_at_the_right_end(void **state)
{
	static const int64_t edges[] = { INT16_MIN, INT16_MAX, INT16_MIN - 1, INT16_MAX + 1,
	                                 INT32_MIN, INT32_MAX, (int64_t)INT32_MIN - 1,
	                                 (int64_t)INT32_MAX + 1, INT64_MIN, INT64_MAX };
	static const uint32_t enc[] = { 2, 2, 4, 4, 4, 4, 8, 8, 8, 8 };
	lp_buf b;
	bool added;
	int64_t v, prev;
	(void)state;

	assert_int_equal(is_init(&b), 0);
	assert_int_equal(is_len(b.p), 0);
	assert_false(is_find(b.p, 0));
	assert_false(is_validate(b.p, b.len, false));    /* Redis never stores an empty intset */
	assert_int_equal(is_add(&b, 7, &added), 0);
	for (size_t i = 0; i < SPW_ARRAY_LEN(edges); i++) {
		assert_int_equal(is_add(&b, edges[i], &added), 0);
		assert_true(added);
		assert_int_equal(b.p[0], enc[i]);
		assert_true(is_find(b.p, edges[i]));
		assert_true(is_find(b.p, 7));
		assert_true(is_get(b.p, 0, &prev));
		for (uint32_t k = 1; is_get(b.p, k, &v); k++, prev = v)
			assert_true(v > prev);
		assert_true(is_validate(b.p, b.len, true));
	}
	assert_int_equal(is_add(&b, INT16_MIN, &added), 0);
	assert_false(added);
	assert_true(is_get(b.p, 0, &v));
	assert_true(v == INT64_MIN);
	assert_true(is_get(b.p, is_len(b.p) - 1, &v));
	assert_true(v == INT64_MAX);
	assert_false(is_get(b.p, is_len(b.p), &v));
	lp_buf_free(&b);
}

static void test_remove_and_find_never_narrow_the_encoding(void **state)
{
	lp_buf b;
	bool r;
	(void)state;

	assert_int_equal(is_init(&b), 0);
	assert_int_equal(is_add(&b, 1, NULL), 0);
	assert_int_equal(is_add(&b, 5000000000LL, NULL), 0);
	assert_int_equal(is_remove(&b, 5000000000LL, &r), 0);
	assert_true(r);
	assert_int_equal(is_remove(&b, 5000000000LL, &r), 0);
	assert_false(r);
	assert_int_equal(b.p[0], 8);
	assert_int_equal(b.len, IS_HDR_SIZE + 8);
	assert_int_equal(is_remove(&b, 1, &r), 0);
	assert_true(r);
	assert_int_equal(is_len(b.p), 0);
	assert_int_equal(b.len, IS_HDR_SIZE);
	lp_buf_free(&b);

	/* a wider value than the encoding can never be present */
	assert_int_equal(is_init(&b), 0);
	assert_int_equal(is_add(&b, 3, NULL), 0);
	assert_false(is_find(b.p, 65536 + 3));
	assert_int_equal(is_remove(&b, 65536 + 3, &r), 0);
	assert_false(r);
	lp_buf_free(&b);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void test_random_adds_and_removes_agree_with_a_sorted_model(void **state)
{
	static int64_t model[4096];
	size_t n = 0;
	lp_buf b;
	uint64_t r = 99;
	(void)state;

	assert_int_equal(is_init(&b), 0);
	for (int step = 0; step < 20000; step++) {
		bool did, in = false;
		int64_t v;
		r = r * 6364136223846793005ULL + 1442695040888963407ULL;
		/* mostly small values (hits), a few wide ones (upgrades) */
		v = (r >> 60) == 0 ? (int64_t)(r >> 1) * ((r & 1) ? -1 : 1) : (int64_t)((r >> 33) % 600) - 300;
		for (size_t i = 0; i < n; i++)
			in |= model[i] == v;
		assert_int_equal(is_find(b.p, v), in);
		if ((r >> 20) % 3 && n < SPW_ARRAY_LEN(model)) {
			assert_int_equal(is_add(&b, v, &did), 0);
			assert_int_equal(did, !in);
			if (!in)
				model[n++] = v;
		} else {
			assert_int_equal(is_remove(&b, v, &did), 0);
			assert_int_equal(did, in);
			for (size_t i = 0; in && i < n; i++)
				if (model[i] == v)
					model[i] = model[--n];
		}
	}
	qsort(model, n, sizeof(model[0]), cmp_i64);
	assert_int_equal(is_len(b.p), n);
	for (uint32_t i = 0; i < n; i++) {
		int64_t v;
		assert_true(is_get(b.p, i, &v));
		assert_true(v == model[i]);
	}
	assert_true(is_validate(b.p, b.len, true));
	lp_buf_free(&b);
}

static bool check_heap(const uint8_t *src, size_t len, bool deep)
{
	uint8_t *c = malloc(len ? len : 1);
	bool ok;

	memcpy(c, src, len);
	ok = is_validate(c, len, deep);
	if (ok && deep) {
		int64_t v;
		for (uint32_t i = 0; is_get(c, i, &v); i++)
			assert_true(is_find(c, v));
	}
	free(c);
	return ok;
}

static void test_validate_rejects_truncations_bad_headers_and_disorder(void **state)
{
	uint8_t t[sizeof(redis_s)];
	unsigned r = 5;
	(void)state;

	for (size_t len = 0; len < sizeof(redis_s); len++)
		assert_false(check_heap(redis_s, len, false));
	assert_true(check_heap(redis_s, sizeof(redis_s), true));
	memcpy(t, redis_s, sizeof(t));
	t[0] = 3;                                    /* no such encoding */
	assert_false(check_heap(t, sizeof(t), false));
	memcpy(t, redis_s, sizeof(t));
	/* length 5 + 2^29: times 8 it is 40 again in 32 bits, so only a 64-bit check sees it */
	memcpy(t + 4, "\x05\x00\x00\x20", 4);
	assert_false(check_heap(t, sizeof(t), false));
	memcpy(t, redis_s, sizeof(t));
	memcpy(t + 8, redis_s + 16, 8);              /* 2, 2, ...: a duplicate */
	assert_true(check_heap(t, sizeof(t), false));
	assert_false(check_heap(t, sizeof(t), true));
	for (int i = 0; i < 3000; i++) {
		memcpy(t, redis_s, sizeof(t));
		r = r * 1103515245u + 12345u;
		t[(r >> 8) % sizeof(t)] ^= (uint8_t)(1u << ((r >> 4) % 8));
		(void)check_heap(t, sizeof(t), true);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sadd_of_ints_matches_redis_bytes_at_each_width),
		cmocka_unit_test(test_upgrades_keep_order_and_put_the_new_int_at_the_right_end),
		cmocka_unit_test(test_remove_and_find_never_narrow_the_encoding),
		cmocka_unit_test(test_random_adds_and_removes_agree_with_a_sorted_model),
		cmocka_unit_test(test_validate_rejects_truncations_bad_headers_and_disorder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
