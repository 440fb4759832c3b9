/*
 * test_batch.c - spillway-bench's key space and batch builder: keys and values are deterministic,
 * and every pre-built batch is a run of well-formed RESP requests (proto's own parser reads them
 * back) whose keys, values and recorded offsets agree with what the checker and the in-process
 * client will assume.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "proto/resp.h"

static bench_keyspace g_ks;

static void ks_init(uint64_t dbsize, uint32_t keylen, uint32_t vallen)
{
	assert_int_equal(bench_keyspace_init(&g_ks, dbsize, keylen, vallen, 0.0), 0);
}

static bool slice_is(const resp_slice *s, const char *p, size_t n)
{
	return s->len == n && memcmp(s->ptr, p, n) == 0;
}

/* Parse every request of b with proto's parser; calls fn for each with its index. */
typedef void (*req_fn)(const bench_batch *b, uint32_t i, const resp_request *req, size_t start);
static void parse_all(const bench_batch *b, req_fn fn)
{
	resp_parser p;
	resp_parser_init(&p, NULL);
	size_t off = 0;
	uint32_t n = 0;
	while (off < b->len) {
		size_t used = 0;
		resp_request req;
		int rc = resp_request_parse(&p, b->buf + off, b->len - off, &used, &req);
		if (rc != RESP_OK)
			fail_msg("request %u at offset %zu does not parse (%d)", n, off, rc);
		fn(b, n, &req, off);
		off += used;
		n++;
	}
	assert_int_equal(off, b->len);
	assert_int_equal(n, b->nreq);
	resp_parser_fini(&p);
}

static void test_keys_are_zero_padded_decimals(void **state)
{
	(void)state;
	char k[16];
	ks_init(1000, 8, 8);
	bench_key_format(&g_ks, 42, k);
	assert_memory_equal(k, "00000042", 8);
	ks_init(1000, 0, 8);   /* 0 = just the digits of 999 */
	assert_int_equal(g_ks.keylen, 3);
	bench_key_format(&g_ks, 7, k);
	assert_memory_equal(k, "007", 3);
	bench_key_format(&g_ks, 999, k);
	assert_memory_equal(k, "999", 3);
}

static void test_keyspace_rejects_keys_too_short_for_the_dbsize(void **state)
{
	(void)state;
	bench_keyspace ks;
	assert_int_equal(bench_keyspace_init(&ks, 100000, 4, 8, 0.0), -EINVAL);
	assert_int_equal(bench_keyspace_init(&ks, 0, 8, 8, 0.0), -EINVAL);
	assert_int_equal(bench_keyspace_init(&ks, 10, BENCH_KEYLEN_MAX + 1, 8, 0.0), -EINVAL);
	assert_int_equal(bench_keyspace_init(&ks, 10, 8, 8, 1e9), -EINVAL);
}

static void test_values_are_deterministic_distinct_and_never_integers(void **state)
{
	(void)state;
	enum { N = 20000, V = 16 };
	ks_init(N, 8, V);
	char *all = malloc((size_t)N * V);
	assert_non_null(all);
	for (uint64_t i = 0; i < N; i++) {
		char again[V];
		bench_value_format(&g_ks, i, all + i * V);
		bench_value_format(&g_ks, i, again);
		assert_memory_equal(all + i * V, again, V);
		char c = all[i * V];
		assert_true((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
		assert_true(bench_value_matches(&g_ks, i, all + i * V, V));
	}
	/* No two keys share a value (sorting would be quicker; N^2/2 memcmp of 16 B is fine here). */
	for (uint64_t i = 1; i < N; i += 97)
		for (uint64_t j = 0; j < N; j++)
			if (i != j && memcmp(all + i * V, all + j * V, V) == 0)
				fail_msg("keys %llu and %llu have the same value", (unsigned long long)i, (unsigned long long)j);
	free(all);
}

static void test_value_match_rejects_near_misses(void **state)
{
	(void)state;
	char v[64], other[64];
	ks_init(1000, 8, 37);   /* not a multiple of the generator's 10-byte blocks */
	bench_value_format(&g_ks, 5, v);
	bench_value_format(&g_ks, 6, other);
	assert_true(bench_value_matches(&g_ks, 5, v, 37));
	assert_false(bench_value_matches(&g_ks, 5, other, 37));
	assert_false(bench_value_matches(&g_ks, 5, v, 36));
	v[36] ^= 1;
	assert_false(bench_value_matches(&g_ks, 5, v, 37));
}

static void test_valuelength_zero_makes_the_value_the_key(void **state)
{
	(void)state;
	char v[16];
	ks_init(1000, 8, 0);
	assert_true(g_ks.value_is_key);
	assert_int_equal(g_ks.vallen, 8);
	bench_value_format(&g_ks, 12, v);
	assert_memory_equal(v, "00000012", 8);
	assert_true(bench_value_matches(&g_ks, 12, "00000012", 8));
	assert_false(bench_value_matches(&g_ks, 12, "00000013", 8));
}

static void check_get(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	char k[16];
	assert_int_equal(req->argc, 2);
	assert_true(slice_is(&req->argv[0], "GET", 3));
	bench_key_format(&g_ks, b->keys[i], k);
	assert_true(slice_is(&req->argv[1], k, g_ks.keylen));
	assert_true(b->keys[i] < g_ks.dbsize);
	assert_ptr_equal(req->argv[1].ptr, b->buf + b->key_off[i]);
	assert_true(b->key_off[i] > start);
}

static void test_get_batch_is_count_requests_with_recorded_keys(void **state)
{
	(void)state;
	bench_batch b;
	bench_rng r;
	ks_init(100000, 10, 8);
	bench_rng_seed(&r, 1);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_GET, 64, &r, NULL), 0);
	assert_int_equal(b.nreq, 64);
	assert_int_equal(b.nkeys, 64);
	assert_int_equal(b.len, 64 * bench_req_size(&g_ks, BENCH_OP_GET, 1));
	parse_all(&b, check_get);
	bench_batch_free(&b);
}

static void check_set(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	char k[16], v[64];
	(void)start;
	assert_int_equal(req->argc, 3);
	assert_true(slice_is(&req->argv[0], "SET", 3));
	bench_key_format(&g_ks, b->keys[i], k);
	bench_value_format(&g_ks, b->keys[i], v);
	assert_true(slice_is(&req->argv[1], k, g_ks.keylen));
	assert_true(slice_is(&req->argv[2], v, g_ks.vallen));
	assert_ptr_equal(req->argv[2].ptr, b->buf + b->val_off[i]);
}

static void test_set_batch_carries_each_keys_own_value(void **state)
{
	(void)state;
	bench_batch b;
	uint64_t seq = 500;
	ks_init(1000, 8, 40);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_SET, 16, NULL, &seq), 0);
	assert_int_equal(seq, 516);
	for (uint32_t i = 0; i < 16; i++)
		assert_int_equal(b.keys[i], 500 + i);   /* sequential: the load phase */
	parse_all(&b, check_set);
	bench_batch_free(&b);
}

static void check_mget(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	(void)i;
	(void)start;
	assert_int_equal(req->argc, 1 + (int)b->nkeys);
	assert_true(slice_is(&req->argv[0], "MGET", 4));
	for (uint32_t j = 0; j < b->nkeys; j++) {
		char k[16];
		bench_key_format(&g_ks, b->keys[j], k);
		assert_true(slice_is(&req->argv[1 + j], k, g_ks.keylen));
		assert_ptr_equal(req->argv[1 + j].ptr, b->buf + b->key_off[j]);
	}
}

static void check_mset(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	(void)i;
	(void)start;
	assert_int_equal(req->argc, 1 + 2 * (int)b->nkeys);
	assert_true(slice_is(&req->argv[0], "MSET", 4));
	for (uint32_t j = 0; j < b->nkeys; j++) {
		char k[16], v[16];
		bench_key_format(&g_ks, b->keys[j], k);
		bench_value_format(&g_ks, b->keys[j], v);
		assert_true(slice_is(&req->argv[1 + 2 * j], k, g_ks.keylen));
		assert_true(slice_is(&req->argv[2 + 2 * j], v, g_ks.vallen));
		assert_ptr_equal(req->argv[2 + 2 * j].ptr, b->buf + b->val_off[j]);
	}
}

static void test_mget_and_mset_batches_are_one_command_of_count_keys(void **state)
{
	(void)state;
	bench_batch b;
	bench_rng r;
	ks_init(1000, 8, 8);
	bench_rng_seed(&r, 2);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_MGET, 100, &r, NULL), 0);
	assert_int_equal(b.nreq, 1);
	assert_int_equal(b.nkeys, 100);
	assert_int_equal(b.len, bench_req_size(&g_ks, BENCH_OP_MGET, 100));
	parse_all(&b, check_mget);
	bench_batch_free(&b);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_MSET, 12, &r, NULL), 0);
	assert_int_equal(b.nreq, 1);
	parse_all(&b, check_mset);
	bench_batch_free(&b);
}

static void check_incr(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	char k[16];
	(void)start;
	assert_int_equal(req->argc, 2);
	assert_true(slice_is(&req->argv[0], "INCR", 4));
	k[0] = 'c';
	bench_key_format(&g_ks, b->keys[i], k + 1);
	assert_true(slice_is(&req->argv[1], k, g_ks.keylen + 1));
	assert_ptr_equal(req->argv[1].ptr, b->buf + b->key_off[i]);
}

static void check_ping(const bench_batch *b, uint32_t i, const resp_request *req, size_t start)
{
	(void)b;
	(void)i;
	(void)start;
	assert_int_equal(req->argc, 1);
	assert_true(slice_is(&req->argv[0], "PING", 4));
}

static void test_incr_uses_counter_keys_and_ping_has_none(void **state)
{
	(void)state;
	bench_batch b;
	bench_rng r;
	ks_init(1000, 8, 8);
	bench_rng_seed(&r, 3);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_INCR, 8, &r, NULL), 0);
	parse_all(&b, check_incr);
	bench_batch_free(&b);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_PING, 5, &r, NULL), 0);
	assert_int_equal(b.nreq, 5);
	assert_int_equal(b.nkeys, 0);
	parse_all(&b, check_ping);
	bench_batch_free(&b);
}

static void test_request_sizes_are_exact_for_every_op(void **state)
{
	(void)state;
	static const uint32_t vlens[] = { 0, 1, 9, 10, 11, 99, 100, 1000, 70000 };
	static const uint32_t counts[] = { 1, 2, 9, 10, 11, 1000 };
	uint64_t keys[1000];
	for (size_t v = 0; v < sizeof(vlens) / sizeof(vlens[0]); v++) {
		ks_init(123456, 0, vlens[v]);
		for (int op = 0; op < BENCH_OP_COUNT; op++)
			for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]) && !bench_op_hash(op); c++) {
				/* hash ops need a hash key space: test_hash_req.c */
				uint32_t n = bench_op_multi(op) ? counts[c] : 1;
				for (uint32_t j = 0; j < n; j++)
					keys[j] = (j * 7919u) % g_ks.dbsize;
				size_t want = bench_req_size(&g_ks, op, n);
				char *buf = malloc(want + 1);
				assert_non_null(buf);
				buf[want] = 0x5a;
				assert_int_equal(bench_req_encode(&g_ks, op, keys, n, buf, NULL, NULL), want);
				assert_int_equal(buf[want], 0x5a);   /* nothing past the end */
				free(buf);
			}
	}
}

static void test_batch_build_rejects_bad_arguments(void **state)
{
	(void)state;
	bench_batch b;
	bench_rng r;
	ks_init(1000, 8, 8);
	bench_rng_seed(&r, 4);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_GET, 0, &r, NULL), -EINVAL);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_COUNT, 4, &r, NULL), -EINVAL);
	assert_int_equal(bench_batch_build(&b, &g_ks, BENCH_OP_GET, 4, NULL, NULL), -EINVAL);
}

static void test_op_names_parse_in_any_case(void **state)
{
	(void)state;
	assert_int_equal(bench_op_parse("get"), BENCH_OP_GET);
	assert_int_equal(bench_op_parse("MSet"), BENCH_OP_MSET);
	assert_int_equal(bench_op_parse("ZADD"), -EINVAL);
	for (int op = 0; op < BENCH_OP_COUNT; op++)
		assert_int_equal(bench_op_parse(bench_op_name(op)), op);
	assert_null(bench_op_name(BENCH_OP_COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_are_zero_padded_decimals),
		cmocka_unit_test(test_keyspace_rejects_keys_too_short_for_the_dbsize),
		cmocka_unit_test(test_values_are_deterministic_distinct_and_never_integers),
		cmocka_unit_test(test_value_match_rejects_near_misses),
		cmocka_unit_test(test_valuelength_zero_makes_the_value_the_key),
		cmocka_unit_test(test_get_batch_is_count_requests_with_recorded_keys),
		cmocka_unit_test(test_set_batch_carries_each_keys_own_value),
		cmocka_unit_test(test_mget_and_mset_batches_are_one_command_of_count_keys),
		cmocka_unit_test(test_incr_uses_counter_keys_and_ping_has_none),
		cmocka_unit_test(test_request_sizes_are_exact_for_every_op),
		cmocka_unit_test(test_batch_build_rejects_bad_arguments),
		cmocka_unit_test(test_op_names_parse_in_any_case),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
