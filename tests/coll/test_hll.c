/*
 * test_hll.c - coll/hll.c against redis-server 7.0.15: the bytes a series of PFADDs leaves, the
 * PFCOUNT they answer, the promotion to dense, registers, merges and corrupt encodings.
 *
 * The expected values were read from a real redis-server 7.0.15 (PFADD key "1" .. "N" in order,
 * then GET key and PFCOUNT key, then GET key again): the length, an FNV-1a 64 of the bytes before
 * and after PFCOUNT (which writes the cached cardinality), and the count. The differential script
 * tests/integration/diff/hll.txt checks the same through the server.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/hll.h"

/* A buffer for one HLL: room for a sparse one of any size the tests reach, and its dense form. */
typedef struct hll_buf {
	hll_edit e;
	uint8_t sparse[HLL_EMPTY_SIZE + HLL_SPARSE_GROWTH_MAX];
	uint8_t dense[HLL_DENSE_SIZE];
} hll_buf;

static void buf_init(hll_buf *b, size_t sparse_max)
{
	b->e.p = b->sparse;
	b->e.len = hll_empty(b->sparse);
	b->e.cap = sizeof(b->sparse);
	b->e.dense = b->dense;
	b->e.sparse_max = sparse_max;
	b->e.promoted = false;
	hll_cache_invalidate(b->e.p);   /* PFADD creating the key invalidates the cache (it counts as a change) */
}

/* PFADD "from" .. "to" as decimal strings: 1 when some register grew. */
static int add_range(hll_buf *b, int from, int to)
{
	int any = 0;
	char s[16];
	for (int i = from; i <= to; i++) {
		int rc = hll_edit_add(&b->e, s, (size_t)snprintf(s, sizeof(s), "%d", i));
		assert_true(rc >= 0);
		any |= rc;
	}
	if (any)
		hll_cache_invalidate(b->e.p);
	return any;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* PFCOUNT of one key: the cache, or the estimate written into the cache. */
static uint64_t pfcount(hll_buf *b)
{
	uint64_t card;
	if (hll_cache_get(b->e.p, &card))
		return card;
	assert_int_equal(hll_count(b->e.p, b->e.len, &card), 0);
	hll_cache_put(b->e.p, card);
	return card;
}

static void test_pfadd_of_1_to_n_leaves_redis_bytes_and_pfcount_answers_redis_count(void **state)
{
	(void)state;
	static const struct {
		int n;
		uint64_t count;
		size_t len;
		uint64_t before, after;   /* FNV-1a of GET before and after PFCOUNT */
	} want[] = {
		{ 0, 0, 18, 0x524bc36d036c0579ULL, 0xfd8f436a8f6e62f9ULL },
		{ 1, 1, 21, 0x323da3c3b4f28a1fULL, 0x446de56fd33c5174ULL },
		{ 10, 10, 47, 0x20497d638317412bULL, 0x5cde536f74ba0a91ULL },
		{ 100, 100, 287, 0xac12d593e674f307ULL, 0x3770f1dc718158cbULL },
		{ 1000, 1001, 1922, 0xabdeac6c99b1409dULL, 0xa0dd3e84971cee9ULL },
		{ 10000, 9988, 12304, 0x3a3f10e0e48d0f9bULL, 0x9078d254492587b6ULL },
		{ 100000, 99562, 12304, 0x1dd51ecdcaaba319ULL, 0x736701e306df8596ULL },
	};
	hll_buf *b = malloc(sizeof(*b));
	assert_non_null(b);
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		buf_init(b, HLL_SPARSE_MAX_DEFAULT);
		add_range(b, 1, want[k].n);
		assert_int_equal(b->e.len, want[k].len);
		assert_true(hll_valid(b->e.p, b->e.len));
		assert_int_equal(fnv1a(b->e.p, b->e.len), want[k].before);
		assert_int_equal(pfcount(b), want[k].count);
		assert_int_equal(fnv1a(b->e.p, b->e.len), want[k].after);
		assert_int_equal(pfcount(b), want[k].count);   /* from the cache now */
	}
	free(b);
}

static void test_three_elements_give_redis_sparse_bytes_and_cache(void **state)
{
	(void)state;
	static const uint8_t before[] = "HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a";
	static const uint8_t after[] = "HYLL\x01\0\0\0\x03\0\0\0\0\0\0\0\x60\xf3\x80\x50\xb1\x84\x4b\xfb\x80\x42\x5a";
	hll_buf *b = malloc(sizeof(*b));
	assert_non_null(b);
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	assert_int_equal(hll_edit_add(&b->e, "a", 1), 1);
	assert_int_equal(hll_edit_add(&b->e, "b", 1), 1);
	assert_int_equal(hll_edit_add(&b->e, "c", 1), 1);
	assert_int_equal(hll_edit_add(&b->e, "a", 1), 0);   /* again: no register grows */
	assert_int_equal(b->e.len, sizeof(before) - 1);
	assert_memory_equal(b->e.p, before, sizeof(before) - 1);
	assert_int_equal(pfcount(b), 3);
	assert_memory_equal(b->e.p, after, sizeof(after) - 1);
	free(b);
}

/* Redis promotes at the element whose split would pass hll-sparse-max-bytes: with 3000, the 1649th
 * of "1".."N", the sparse encoding then 3000 bytes exactly. */
static void test_sparse_is_promoted_to_dense_where_redis_promotes_it(void **state)
{
	(void)state;
	hll_buf *b = malloc(sizeof(*b));
	assert_non_null(b);
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	add_range(b, 1, 1648);
	assert_int_equal(hll_encoding(b->e.p), HLL_SPARSE);
	assert_int_equal(b->e.len, 3000);
	assert_false(b->e.promoted);
	add_range(b, 1649, 1649);
	assert_true(b->e.promoted);
	assert_ptr_equal(b->e.p, b->dense);
	assert_int_equal(hll_encoding(b->e.p), HLL_DENSE);
	assert_int_equal(b->e.len, HLL_DENSE_SIZE);

	/* hll-sparse-max-bytes 100: 20 elements stay sparse, 40 do not (redis-server's bytes). */
	buf_init(b, 100);
	add_range(b, 1, 20);
	assert_int_equal(b->e.len, 77);
	assert_int_equal(fnv1a(b->e.p, b->e.len), 0xd6a2051403085db9ULL);
	buf_init(b, 100);
	add_range(b, 1, 40);
	assert_int_equal(b->e.len, HLL_DENSE_SIZE);
	assert_int_equal(fnv1a(b->e.p, b->e.len), 0xd4df63aca0421b33ULL);
	buf_init(b, 100);
	add_range(b, 1, 100);
	assert_int_equal(fnv1a(b->e.p, b->e.len), 0x5e46d45fa18ba541ULL);
	assert_int_equal(pfcount(b), 100);
	free(b);
}

/* A register above 32 cannot be sparse: one set promotes, whatever the size. */
static void test_a_register_above_32_promotes_at_once(void **state)
{
	(void)state;
	hll_buf *b = malloc(sizeof(*b));
	assert_non_null(b);
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	assert_int_equal(hll_edit_set(&b->e, 5, 32), 1);
	assert_int_equal(hll_encoding(b->e.p), HLL_SPARSE);
	assert_int_equal(hll_edit_set(&b->e, 9000, 33), 1);
	assert_int_equal(hll_encoding(b->e.p), HLL_DENSE);
	assert_int_equal(hll_dense_get(b->e.p + HLL_HDR_SIZE, 5), 32);
	assert_int_equal(hll_dense_get(b->e.p + HLL_HDR_SIZE, 9000), 33);
	assert_int_equal(hll_edit_set(&b->e, 9000, 20), 0);
	free(b);
}

/* The register an element goes to holds its pattern length afterwards, in both encodings. */
static void test_an_added_element_sets_its_register_to_its_pattern_length(void **state)
{
	(void)state;
	hll_buf *b = malloc(sizeof(*b));
	uint8_t max[HLL_REGISTERS];
	long reg;
	assert_non_null(b);
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	int count = hll_pattern("hello", 5, &reg);
	assert_true(count >= 1 && count <= HLL_Q + 1);
	assert_int_equal(hll_edit_add(&b->e, "hello", 5), 1);
	memset(max, 0, sizeof(max));
	assert_int_equal(hll_merge(max, b->e.p, b->e.len), 0);
	for (long i = 0; i < HLL_REGISTERS; i++)
		assert_int_equal(max[i], i == reg ? count : 0);
	assert_int_equal(hll_edit_to_dense(&b->e), 0);
	assert_int_equal(hll_dense_get(b->e.p + HLL_HDR_SIZE, reg), (unsigned)count);
	free(b);
}

/* Redis's PFSELFTEST idea: every register keeps its value and leaves its neighbours alone. */
static void test_dense_registers_hold_every_value_without_touching_neighbours(void **state)
{
	(void)state;
	static uint8_t regs[HLL_DENSE_SIZE - HLL_HDR_SIZE];
	static uint8_t model[HLL_REGISTERS];
	uint64_t x = 88172645463325252ULL;
	for (int round = 0; round < 20; round++) {
		for (long i = 0; i < HLL_REGISTERS; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			model[i] = (uint8_t)(x & 63);
		}
		memset(regs, 0, sizeof(regs));
		for (long i = 0; i < HLL_REGISTERS; i++)
			hll_dense_set(regs, i, model[i]);
		for (long i = 0; i < HLL_REGISTERS; i++)
			assert_int_equal(hll_dense_get(regs, i), model[i]);
	}
}

static void test_union_counts_as_redis_pfcount_of_two_keys(void **state)
{
	(void)state;
	static uint8_t max[HLL_REGISTERS];
	hll_buf *b = malloc(sizeof(*b));
	assert_non_null(b);
	memset(max, 0, sizeof(max));
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	add_range(b, 1, 100);
	assert_int_equal(hll_merge(max, b->e.p, b->e.len), 0);
	buf_init(b, HLL_SPARSE_MAX_DEFAULT);
	add_range(b, 1, 1000);
	assert_int_equal(hll_merge(max, b->e.p, b->e.len), 0);
	assert_int_equal(hll_count_raw(max), 1001);
	memset(max, 0, sizeof(max));
	assert_int_equal(hll_count_raw(max), 0);
	free(b);
}

/* Runs that do not cover 16384 registers, or a VAL run past the last one, are corrupt for count,
 * merge and promotion; a set whose register no opcode covers fails too. The header checks are
 * hll_valid's. */
static void test_corrupt_sparse_encodings_are_detected_where_redis_detects_them(void **state)
{
	(void)state;
	static uint8_t max[HLL_REGISTERS], dense[HLL_DENSE_SIZE];
	uint8_t p[64];
	uint64_t card;
	size_t n = hll_empty(p);

	p[HLL_HDR_SIZE] = 0x40 | (8000 - 1) >> 8;   /* XZERO:8000: half the registers missing */
	p[HLL_HDR_SIZE + 1] = (8000 - 1) & 0xff;
	assert_true(hll_valid(p, n));
	assert_int_equal(hll_count(p, n, &card), -1);
	assert_int_equal(hll_merge(max, p, n), -1);
	hll_edit e = { .p = p, .len = n, .cap = sizeof(p), .dense = dense, .sparse_max = 3000 };
	assert_int_equal(hll_edit_set(&e, 100, 3), 1);        /* covered: works, as in Redis */
	assert_int_equal(hll_edit_set(&e, 9000, 3), -1);      /* not covered */
	assert_int_equal(hll_edit_to_dense(&e), -1);
	assert_ptr_equal(e.p, p);

	n = hll_empty(p);
	p[n++] = 0x80;                                        /* a VAL past the 16384th register */
	assert_int_equal(hll_count(p, n, &card), -1);
	assert_int_equal(hll_merge(max, p, n), -1);

	memcpy(p, "HYLX", 4);
	assert_false(hll_valid(p, n));
	n = hll_empty(p);
	p[4] = 2;
	assert_false(hll_valid(p, n));
	p[4] = HLL_DENSE;
	assert_false(hll_valid(p, n));                        /* dense must be 12304 bytes */
	assert_false(hll_valid(p, 15));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pfadd_of_1_to_n_leaves_redis_bytes_and_pfcount_answers_redis_count),
		cmocka_unit_test(test_three_elements_give_redis_sparse_bytes_and_cache),
		cmocka_unit_test(test_sparse_is_promoted_to_dense_where_redis_promotes_it),
		cmocka_unit_test(test_a_register_above_32_promotes_at_once),
		cmocka_unit_test(test_an_added_element_sets_its_register_to_its_pattern_length),
		cmocka_unit_test(test_dense_registers_hold_every_value_without_touching_neighbours),
		cmocka_unit_test(test_union_counts_as_redis_pfcount_of_two_keys),
		cmocka_unit_test(test_corrupt_sparse_encodings_are_detected_where_redis_detects_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
