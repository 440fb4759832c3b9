/*
 * test_hash_req.c - spillway-bench's hash requests (HGET, HSET and the load's HSET of every field):
 * a request names a cell (key * fields + field) and proto's own parser reads back the key, the
 * field "f<n>" and the cell's value from it; the load writes every field of a key in one HSET; the
 * sizes bound (one field) or equal (the load) what the encoders write; picks cover every field
 * of the drawn keys. (The checker's side of HGET and HSET is in test_reply_check.c.)
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

static void ks_hash(uint64_t dbsize, uint32_t vallen, uint32_t fields)
{
	assert_int_equal(bench_keyspace_init(&g_ks, dbsize, 8, vallen, 0.0), 0);
	assert_int_equal(bench_keyspace_hash(&g_ks, fields), 0);
}

static bool slice_is(const resp_slice *s, const char *p, size_t n)
{
	return s->len == n && memcmp(s->ptr, p, n) == 0;
}

/* argv[at] is key (cell / fields)'s name and argv[at + 1] field (cell % fields)'s. */
static void assert_names_cell(const resp_request *req, int at, uint64_t cell)
{
	char k[16], f[16];
	bench_key_format(&g_ks, cell / g_ks.fields, k);
	int fl = snprintf(f, sizeof(f), "f%llu", (unsigned long long)(cell % g_ks.fields));
	assert_true(slice_is(&req->argv[at], k, g_ks.keylen));
	assert_true(slice_is(&req->argv[at + 1], f, (size_t)fl));
}

/* Parse one request at buf with proto's parser; *used gets its bytes. */
static void parse_one(const char *buf, size_t len, resp_parser *p, resp_request *req, size_t *used)
{
	int rc = resp_request_parse(p, buf, len, used, req);
	if (rc != RESP_OK)
		fail_msg("the request does not parse (%d)", rc);
}

static void test_hget_and_hset_batches_name_a_field_of_a_key(void **state)
{
	(void)state;
	static const int ops[] = { BENCH_OP_HGET, BENCH_OP_HSET };
	bench_rng r;
	ks_hash(1000, 24, 20);
	bench_rng_seed(&r, 5);
	for (size_t o = 0; o < 2; o++) {
		bench_batch b;
		resp_parser p;
		assert_int_equal(bench_batch_build(&b, &g_ks, ops[o], 64, &r, NULL), 0);
		assert_int_equal(b.nreq, 64);
		resp_parser_init(&p, NULL);
		size_t off = 0;
		for (uint32_t i = 0; i < b.nreq; i++) {
			resp_request req;
			size_t used;
			parse_one(b.buf + off, b.len - off, &p, &req, &used);
			assert_true(b.keys[i] < g_ks.dbsize * g_ks.fields);
			assert_true(slice_is(&req.argv[0], bench_op_name(ops[o]), 4));
			assert_names_cell(&req, 1, b.keys[i]);
			assert_ptr_equal(req.argv[1].ptr, b.buf + b.key_off[i]);
			if (ops[o] == BENCH_OP_HSET) {
				char v[24];
				assert_int_equal(req.argc, 4);
				bench_value_format(&g_ks, b.keys[i], v);
				assert_true(slice_is(&req.argv[3], v, 24));
				assert_ptr_equal(req.argv[3].ptr, b.buf + b.val_off[i]);
			} else {
				assert_int_equal(req.argc, 3);
				assert_int_equal(b.val_off[i], 0);
			}
			off += used;
		}
		assert_int_equal(off, b.len);
		resp_parser_fini(&p);
		bench_batch_free(&b);
	}
}

static void test_the_load_writes_every_field_of_a_key_in_one_hset(void **state)
{
	(void)state;
	ks_hash(1000, 16, 20);
	size_t size = bench_hash_load_size(&g_ks);
	char *buf = malloc(size + 1);
	assert_non_null(buf);
	buf[size] = 0x5a;
	assert_int_equal(bench_hash_load_encode(&g_ks, 7, buf), size);
	assert_int_equal(buf[size], 0x5a);   /* nothing past the end */

	resp_parser p;
	resp_request req;
	size_t used;
	resp_parser_init(&p, NULL);
	parse_one(buf, size, &p, &req, &used);
	assert_int_equal(used, size);
	assert_int_equal(req.argc, 2 + 2 * 20);
	assert_true(slice_is(&req.argv[0], "HSET", 4));
	assert_true(slice_is(&req.argv[1], "00000007", 8));
	for (uint32_t f = 0; f < 20; f++) {
		char v[16];
		uint64_t cell = 7 * 20 + f;
		char name[8];
		int nl = snprintf(name, sizeof(name), "f%u", f);
		assert_true(slice_is(&req.argv[2 + 2 * f], name, (size_t)nl));
		bench_value_format(&g_ks, cell, v);
		assert_true(slice_is(&req.argv[3 + 2 * f], v, 16));
		/* each field has its own value: the checker can tell a wrong field */
		if (f > 0)
			assert_false(slice_is(&req.argv[1 + 2 * f], v, 16));
	}
	resp_parser_fini(&p);
	free(buf);
}

static void test_hash_request_sizes_bound_what_the_encoders_write(void **state)
{
	(void)state;
	static const uint32_t fields[] = { 1, 9, 10, 11, 100, 1001 };
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		ks_hash(12345, 33, fields[i]);
		for (int op = BENCH_OP_HGET; op <= BENCH_OP_HSET; op++) {
			size_t bound = bench_req_size(&g_ks, op, 1);
			bool met = false;
			for (uint64_t f = 0; f < fields[i]; f++) {
				uint64_t cell = 12344 * (uint64_t)fields[i] + f;
				char buf[256];
				memset(buf, 0x5a, sizeof(buf));
				assert_true(bound < sizeof(buf));
				size_t n = bench_req_encode(&g_ks, op, &cell, 1, buf, NULL, NULL);
				assert_true(n <= bound);
				assert_int_equal(buf[bound], 0x5a);
				met |= n == bound;   /* the widest field name meets the bound exactly */
			}
			assert_true(met);
		}
		size_t size = bench_hash_load_size(&g_ks);
		char *buf = malloc(size + 1);
		assert_non_null(buf);
		buf[size] = 0x5a;
		assert_int_equal(bench_hash_load_encode(&g_ks, 12344, buf), size);
		assert_int_equal(buf[size], 0x5a);
		free(buf);
	}
}

static void test_picks_cover_every_field_of_the_drawn_keys(void **state)
{
	(void)state;
	enum { N = 10, F = 5 };
	bool seen[N * F] = { false };
	bench_rng r;
	ks_hash(N, 8, F);
	bench_rng_seed(&r, 9);
	for (int i = 0; i < 20000; i++) {
		uint64_t c = bench_req_pick(&g_ks, i & 1 ? BENCH_OP_HGET : BENCH_OP_HSET, &r);
		assert_true(c < N * F);
		seen[c] = true;
		assert_true(bench_req_pick(&g_ks, BENCH_OP_EXISTS, &r) < N);   /* other ops draw keys */
		assert_int_equal(bench_req_pick(&g_ks, BENCH_OP_PING, &r), 0);
	}
	for (int c = 0; c < N * F; c++)
		assert_true(seen[c]);
}

static void test_a_hash_key_space_refuses_what_it_cannot_hold(void **state)
{
	(void)state;
	bench_keyspace ks;
	assert_int_equal(bench_keyspace_init(&ks, 1000, 8, 8, 0.0), 0);
	assert_int_equal(ks.fields, 0);   /* strings unless asked */
	assert_int_equal(bench_keyspace_hash(&ks, 0), -EINVAL);
	assert_int_equal(bench_keyspace_hash(&ks, BENCH_FIELDS_MAX + 1), -EINVAL);
	assert_int_equal(bench_keyspace_init(&ks, 1000, 8, 0, 0.0), 0);
	assert_int_equal(bench_keyspace_hash(&ks, 20), -EINVAL);   /* the value is the key */
	assert_int_equal(bench_keyspace_init(&ks, UINT64_MAX / 2, 20, 8, 0.0), 0);
	assert_int_equal(bench_keyspace_hash(&ks, 3), -EINVAL);   /* cells overflow */
	assert_int_equal(ks.fields, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hget_and_hset_batches_name_a_field_of_a_key),
		cmocka_unit_test(test_the_load_writes_every_field_of_a_key_in_one_hset),
		cmocka_unit_test(test_hash_request_sizes_bound_what_the_encoders_write),
		cmocka_unit_test(test_picks_cover_every_field_of_the_drawn_keys),
		cmocka_unit_test(test_a_hash_key_space_refuses_what_it_cannot_hold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
