/*
 * test_writer.c - the reply writer: every encoder byte for byte in RESP2 and RESP3, chunking,
 * consume/recycle, and allocation failure.
 *
 * The expected bytes were captured from redis-server 7.0.15 (e.g. ZSCORE for doubles, HELLO 3 for
 * maps, CLIENT INFO under RESP3 for verbatim strings, Lua error replies for CR/LF sanitising).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <limits.h>
#include <cmocka.h>

#include "proto/resp.h"

/* A test allocator: counts calls, can fail from the Nth call on, poisons the header fields so that
 * the writer must initialise them. */
typedef struct talloc {
	int calls;
	int fail_from;       /* 0: never fail */
	size_t last_min;
	size_t extra;        /* cap = min_cap + extra */
} talloc;

static resp_chunk *t_alloc(void *ctx, size_t min_cap)
{
	talloc *a = ctx;
	a->calls++;
	a->last_min = min_cap;
	if (a->fail_from && a->calls >= a->fail_from)
		return NULL;
	resp_chunk *c = malloc(sizeof(*c) + min_cap + a->extra);
	assert_non_null(c);
	memset(c, 0xAB, sizeof(*c));
	c->cap = (uint32_t)(min_cap + a->extra);
	return c;
}

static void free_chunks(resp_chunk *c)
{
	while (c) {
		resp_chunk *n = c->next;
		free(c);
		c = n;
	}
}

/* The unsent bytes of o, concatenated (caller frees). */
static char *out_bytes(const resp_out *o, size_t *len)
{
	size_t n = 0;
	for (resp_chunk *c = o->head; c; c = c->next)
		n += c->len - c->sent;
	char *b = malloc(n + 1);
	size_t k = 0;
	for (resp_chunk *c = o->head; c; c = c->next) {
		memcpy(b + k, c->data + c->sent, c->len - c->sent);
		k += c->len - c->sent;
	}
	*len = n;
	return b;
}

static int chunk_count(const resp_out *o)
{
	int n = 0;
	for (resp_chunk *c = o->head; c; c = c->next)
		n++;
	return n;
}

static void expect_bytes(resp_out *o, const char *want, size_t wlen)
{
	size_t n;
	char *got = out_bytes(o, &n);
	if (n != wlen || memcmp(got, want, n) != 0)
		print_error("got %zu bytes \"%.*s\", want %zu \"%.*s\"\n", n, (int)n, got, wlen, (int)wlen, want);
	assert_int_equal(n, wlen);
	assert_memory_equal(got, want, n);
	assert_int_equal(o->bytes, wlen);
	free(got);
	free_chunks(o->head);
	o->head = o->tail = NULL;
	o->bytes = 0;
}

/* Run stmt on a fresh writer speaking proto and compare with the literal want. */
#define CHECK(proto_, stmt, want) do { \
		talloc a_ = { 0 }; \
		resp_out o_; \
		resp_out_init(&o_, t_alloc, &a_); \
		o_.proto = (proto_); \
		resp_out *o = &o_; \
		stmt; \
		expect_bytes(&o_, want, sizeof(want) - 1); \
	} while (0)

static void test_writer_encodes_simple_ok_and_integers(void **state)
{
	(void)state;
	for (int proto = 2; proto <= 3; proto++) {
		CHECK(proto, resp_write_ok(o), "+OK\r\n");
		CHECK(proto, resp_write_simple(o, "PONG", 4), "+PONG\r\n");
		CHECK(proto, resp_write_int(o, 0), ":0\r\n");
		CHECK(proto, resp_write_int(o, 1), ":1\r\n");
		CHECK(proto, resp_write_int(o, 31), ":31\r\n");
		CHECK(proto, resp_write_int(o, 32), ":32\r\n");
		CHECK(proto, resp_write_int(o, -1), ":-1\r\n");
		CHECK(proto, resp_write_int(o, 1234567890123LL), ":1234567890123\r\n");
		CHECK(proto, resp_write_int(o, LLONG_MAX), ":9223372036854775807\r\n");
		CHECK(proto, resp_write_int(o, LLONG_MIN), ":-9223372036854775808\r\n");
	}
}

static void test_writer_encodes_bulks_the_same_in_both_protocols(void **state)
{
	(void)state;
	for (int proto = 2; proto <= 3; proto++) {
		CHECK(proto, resp_write_bulk(o, "", 0), "$0\r\n\r\n");
		CHECK(proto, resp_write_bulk(o, "value", 5), "$5\r\nvalue\r\n");
		CHECK(proto, resp_write_bulk(o, "a\r\n\0b", 5), "$5\r\na\r\n\0b\r\n");
		CHECK(proto, resp_write_bulk(o, "0123456789012345678901234567890", 31),
		      "$31\r\n0123456789012345678901234567890\r\n");
		CHECK(proto, resp_write_bulk(o, "01234567890123456789012345678901", 32),
		      "$32\r\n01234567890123456789012345678901\r\n");
		CHECK(proto, resp_write_bulk_cstr(o, "hello"), "$5\r\nhello\r\n");
		CHECK(proto, resp_write_bulk_ll(o, -42), "$3\r\n-42\r\n");
		CHECK(proto, resp_write_bulk_ll(o, 1000000), "$7\r\n1000000\r\n");
		CHECK(proto, { char *d = resp_write_bulk_fill(o, 3); memcpy(d, "abc", 3); }, "$3\r\nabc\r\n");
		CHECK(proto, resp_write_array_len(o, 0), "*0\r\n");
		CHECK(proto, resp_write_array_len(o, 2), "*2\r\n");
		CHECK(proto, resp_write_array_len(o, 100), "*100\r\n");
	}
}

static void test_writer_encodes_nulls_per_protocol(void **state)
{
	(void)state;
	CHECK(2, resp_write_null(o), "$-1\r\n");
	CHECK(3, resp_write_null(o), "_\r\n");
	CHECK(2, resp_write_null_array(o), "*-1\r\n");
	CHECK(3, resp_write_null_array(o), "_\r\n");
	CHECK(2, resp_write_bulk_cstr(o, NULL), "$-1\r\n");
	CHECK(3, resp_write_bulk_cstr(o, NULL), "_\r\n");
}

static void test_writer_encodes_maps_sets_and_bools_per_protocol(void **state)
{
	(void)state;
	CHECK(2, resp_write_map_len(o, 7), "*14\r\n");
	CHECK(3, resp_write_map_len(o, 7), "%7\r\n");
	CHECK(2, resp_write_map_len(o, 40), "*80\r\n");
	CHECK(3, resp_write_set_len(o, 0), "~0\r\n");
	CHECK(2, resp_write_set_len(o, 0), "*0\r\n");
	CHECK(3, resp_write_set_len(o, 3), "~3\r\n");
	CHECK(3, resp_write_bool(o, true), "#t\r\n");
	CHECK(3, resp_write_bool(o, false), "#f\r\n");
	CHECK(2, resp_write_bool(o, true), ":1\r\n");
	CHECK(2, resp_write_bool(o, false), ":0\r\n");
	/* HELLO 3's opening, as redis-server sends it. */
	CHECK(3, {
		resp_write_map_len(o, 7);
		resp_write_bulk_cstr(o, "server");
		resp_write_bulk_cstr(o, "redis");
		resp_write_bulk_cstr(o, "proto");
		resp_write_int(o, 3);
	}, "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n");
}

static void test_writer_encodes_doubles_as_redis_7_0(void **state)
{
	(void)state;
	CHECK(2, resp_write_double(o, 1.1), "$18\r\n1.1000000000000001\r\n");
	CHECK(3, resp_write_double(o, 1.1), ",1.1000000000000001\r\n");
	CHECK(2, resp_write_double(o, INFINITY), "$3\r\ninf\r\n");
	CHECK(3, resp_write_double(o, INFINITY), ",inf\r\n");
	CHECK(2, resp_write_double(o, -INFINITY), "$4\r\n-inf\r\n");
	CHECK(3, resp_write_double(o, -INFINITY), ",-inf\r\n");
	CHECK(2, resp_write_double(o, 0.0), "$1\r\n0\r\n");
	CHECK(3, resp_write_double(o, 0.0), ",0\r\n");
	CHECK(3, resp_write_double(o, -0.0), ",-0\r\n");
	CHECK(2, resp_write_double(o, 1e300), "$23\r\n1.0000000000000001e+300\r\n");
	CHECK(3, resp_write_double(o, 1e300), ",1.0000000000000001e+300\r\n");
	CHECK(2, resp_write_double(o, 2.5), "$3\r\n2.5\r\n");
	CHECK(3, resp_write_double(o, 3.5), ",3.5\r\n");
	CHECK(2, resp_write_double(o, 0.1), "$19\r\n0.10000000000000001\r\n");
	CHECK(3, resp_write_double(o, 0.1), ",0.10000000000000001\r\n");
	CHECK(2, resp_write_double(o, NAN), "$3\r\nnan\r\n");
	CHECK(3, resp_write_double(o, NAN), ",nan\r\n");
}

static void test_writer_encodes_verbatim_strings_per_protocol(void **state)
{
	(void)state;
	CHECK(3, resp_write_verbatim(o, "txt", "abcd", 4), "=8\r\ntxt:abcd\r\n");
	CHECK(2, resp_write_verbatim(o, "txt", "abcd", 4), "$4\r\nabcd\r\n");
	/* addReplyVerbatim pads a short format with spaces and cuts a long one to three bytes. */
	CHECK(3, resp_write_verbatim(o, "md", "x", 1), "=5\r\nmd :x\r\n");
	CHECK(3, resp_write_verbatim(o, "markdown", "", 0), "=4\r\nmar:\r\n");
	CHECK(3, resp_write_verbatim(o, "txt", "a\nb\n", 4), "=8\r\ntxt:a\nb\n\r\n");
}

static void test_writer_sanitises_crlf_in_errors(void **state)
{
	(void)state;
	for (int proto = 2; proto <= 3; proto++) {
		CHECK(proto, resp_write_error(o, "ERR syntax error", 16), "-ERR syntax error\r\n");
		CHECK(proto, resp_write_error(o, "WRONGTYPE x", 11), "-WRONGTYPE x\r\n");
		CHECK(proto, resp_write_error(o, "ERR a\r\nb", 8), "-ERR a  b\r\n");
		CHECK(proto, resp_write_errorf(o, "ERR unknown command '%s'", "foo"), "-ERR unknown command 'foo'\r\n");
		/* EVAL "return redis.error_reply('ERR a\r\nb\nc')" on redis-server 7.0.15. */
		CHECK(proto, resp_write_errorf(o, "%s", "ERR a\r\nb\nc"), "-ERR a  b c\r\n");
		/* EVAL "return {err='\r\nX y\r\n'}": the text is trimmed at its ends first. */
		CHECK(proto, resp_write_errorf(o, "-%s", "\r\nX y\r\n"), "-  X y\r\n");
		CHECK(proto, resp_write_errorf(o, "\r\nERR x\n"), "-ERR x\r\n");
		/* A caller's own dash is not doubled. */
		CHECK(proto, resp_write_error(o, "-ERR x", 6), "-ERR x\r\n");
	}
}

static void test_writer_formats_long_errors_without_truncating(void **state)
{
	(void)state;
	char arg[3000], want[3100];
	for (size_t i = 0; i < sizeof(arg) - 1; i++)
		arg[i] = (i % 100 == 50) ? '\n' : (char)('a' + i % 26);
	arg[sizeof(arg) - 1] = '\0';
	int n = snprintf(want, sizeof(want), "-ERR %s\r\n", arg);
	for (int i = 1; i < n - 2; i++)
		if (want[i] == '\n')
			want[i] = ' ';
	talloc a = { 0 };
	resp_out o;
	resp_out_init(&o, t_alloc, &a);
	resp_write_simple(&o, "x", 1);
	resp_write_errorf(&o, "ERR %s\r\n\r\n", arg);
	size_t len;
	char *got = out_bytes(&o, &len);
	assert_int_equal(len, 4 + (size_t)n);
	assert_memory_equal(got, "+x\r\n", 4);
	assert_memory_equal(got + 4, want, (size_t)n);
	free(got);
	free_chunks(o.head);
}

static void test_writer_spills_big_values_into_a_second_chunk(void **state)
{
	(void)state;
	talloc a = { 0 };
	resp_out o;
	resp_out_init(&o, t_alloc, &a);
	const size_t big = 40000;
	char *val = malloc(big);
	for (size_t i = 0; i < big; i++)
		val[i] = (char)(i * 7);

	resp_write_ok(&o);
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.last_min, 16 * 1024);        /* small replies take a 16 KiB chunk */
	assert_int_equal(o.head->sent, 0);             /* header fields were initialised */
	assert_null(o.head->next);
	resp_write_bulk(&o, val, big);
	/* The tail is filled, the rest goes to one chunk sized for it. */
	assert_int_equal(a.calls, 2);
	assert_int_equal(chunk_count(&o), 2);
	assert_int_equal(o.head->len, o.head->cap);

	size_t len;
	char *got = out_bytes(&o, &len);
	assert_int_equal(len, 5 + 8 + big + 2);
	assert_memory_equal(got, "+OK\r\n$40000\r\n", 13);
	assert_memory_equal(got + 13, val, big);
	assert_memory_equal(got + 13 + big, "\r\n", 2);
	free(got);

	/* resp_write_bulk_fill is contiguous even when the tail cannot hold it. */
	char *d = resp_write_bulk_fill(&o, 20000);
	assert_non_null(d);
	memset(d, 'z', 20000);
	assert_int_equal(chunk_count(&o), 3);
	assert_true(d >= o.tail->data && d + 20000 + 2 <= o.tail->data + o.tail->len);
	got = out_bytes(&o, &len);
	assert_int_equal(len, 13 + big + 2 + 8 + 20000 + 2);
	assert_memory_equal(got + 13 + big + 2, "$20000\r\nzzz", 11);
	assert_memory_equal(got + len - 3, "z\r\n", 3);
	free(got);

	/* resp_out_append of any length. */
	resp_out_append(&o, val, big);
	assert_int_equal(o.bytes, 13 + big + 2 + 8 + 20000 + 2 + big);
	free(val);
	free_chunks(o.head);
}

static void test_writer_consume_advances_sent_and_returns_drained_chunks(void **state)
{
	(void)state;
	talloc a = { 0 };
	resp_out o;
	resp_out_init(&o, t_alloc, &a);
	char block[10000];
	memset(block, 'q', sizeof(block));
	for (int i = 0; i < 5; i++)
		resp_out_append(&o, block, sizeof(block));   /* 50000 bytes in 16 KiB chunks */
	assert_int_equal(chunk_count(&o), 4);
	resp_chunk *first = o.head, *second = o.head->next;

	assert_null(resp_out_consume(&o, 100));
	assert_int_equal(first->sent, 100);
	assert_int_equal(o.bytes, 49900);

	resp_chunk *freed = resp_out_consume(&o, first->len - 100 + 5);
	assert_ptr_equal(freed, first);
	assert_null(freed->next);
	assert_ptr_equal(o.head, second);
	assert_int_equal(second->sent, 5);
	free(freed);

	/* Writes after a partial send go on behind what is unsent. */
	resp_write_ok(&o);
	size_t len;
	char *got = out_bytes(&o, &len);
	assert_int_equal(len, o.bytes);
	assert_memory_equal(got + len - 5, "+OK\r\n", 5);
	free(got);

	freed = resp_out_consume(&o, o.bytes);
	assert_ptr_equal(freed, second);
	int nfreed = 0;
	for (resp_chunk *c = freed; c; c = c->next)
		nfreed++;
	assert_int_equal(nfreed, 3);   /* in order, linked by next */
	assert_null(o.head);
	assert_null(o.tail);
	assert_int_equal(o.bytes, 0);
	free_chunks(freed);

	/* A fresh reply after everything drained starts a new chain. */
	resp_write_int(&o, 5);
	assert_non_null(o.head);
	assert_ptr_equal(o.head, o.tail);
	assert_int_equal(o.head->sent, 0);
	free_chunks(resp_out_consume(&o, o.bytes));
}

static void test_writer_marks_oom_and_drops_writes_after_allocation_failure(void **state)
{
	(void)state;
	talloc a = { .fail_from = 2 };
	resp_out o;
	resp_out_init(&o, t_alloc, &a);
	char block[20000];
	memset(block, 'x', sizeof(block));
	resp_write_ok(&o);
	assert_false(o.oom);
	resp_write_bulk(&o, block, sizeof(block));
	assert_true(o.oom);
	assert_null(resp_out_reserve_slow(&o, 1 << 20));
	assert_null(resp_write_bulk_fill(&o, 1 << 20));
	int calls = a.calls;
	resp_write_bulk(&o, block, sizeof(block));
	resp_write_errorf(&o, "ERR %s", "x");
	assert_int_equal(a.calls, calls);   /* no more attempts once failed */
	free_chunks(o.head);
}

static void test_writer_uses_allocator_cap_beyond_the_minimum(void **state)
{
	(void)state;
	talloc a = { .extra = 100000 };
	resp_out o;
	resp_out_init(&o, t_alloc, &a);
	char block[50000];
	memset(block, 'y', sizeof(block));
	resp_write_bulk(&o, block, sizeof(block));
	resp_write_bulk(&o, block, sizeof(block));
	assert_int_equal(a.calls, 1);
	assert_int_equal(chunk_count(&o), 1);
	assert_int_equal(o.bytes, 2 * (8 + sizeof(block) + 2));
	free_chunks(o.head);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer_encodes_simple_ok_and_integers),
		cmocka_unit_test(test_writer_encodes_bulks_the_same_in_both_protocols),
		cmocka_unit_test(test_writer_encodes_nulls_per_protocol),
		cmocka_unit_test(test_writer_encodes_maps_sets_and_bools_per_protocol),
		cmocka_unit_test(test_writer_encodes_doubles_as_redis_7_0),
		cmocka_unit_test(test_writer_encodes_verbatim_strings_per_protocol),
		cmocka_unit_test(test_writer_sanitises_crlf_in_errors),
		cmocka_unit_test(test_writer_formats_long_errors_without_truncating),
		cmocka_unit_test(test_writer_spills_big_values_into_a_second_chunk),
		cmocka_unit_test(test_writer_consume_advances_sent_and_returns_drained_chunks),
		cmocka_unit_test(test_writer_marks_oom_and_drops_writes_after_allocation_failure),
		cmocka_unit_test(test_writer_uses_allocator_cap_beyond_the_minimum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
