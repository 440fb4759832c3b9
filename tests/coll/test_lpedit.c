/*
 * test_lpedit.c - coll/listpack's planned edits (lp_edit, lp_entry_encode) against the writes that
 * build (lp_append, lp_prepend, lp_replace, lp_delete_range): for random sequences of the edits the
 * server plans (pushes of several elements at either end, pops of several at either end, a value
 * replaced, a pair removed, a rotation between the ends or at one end, two replacements that shift
 * the runs between and after them either way), the bytes written in place
 * over the old listpack and the bytes written as one copy are both the bytes the build gives,
 * header count included, also across the 65535 "unknown" count.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/listpack.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A random element: ints of every width, strings whose entry sizes straddle the backlen and
 * header widths (63/64, 127/128, 4095/4096 bytes). Written to buf; its length. */
static size_t rand_elem(char *buf)
{
	static const size_t lens[] = { 0, 1, 5, 62, 63, 64, 125, 126, 127, 128, 300, 4095, 4096, 5000 };
	switch (rnd() % 4) {
	case 0:
		return (size_t)snprintf(buf, 32, "%lld", (long long)(rnd() % 200) - 100);
	case 1: {
		static const long long big[] = { 4095, -4096, 32767, -32768, 8388607, 2147483647, 9007199254740993LL,
			-9223372036854775807LL - 1 };
		return (size_t)snprintf(buf, 32, "%lld", big[rnd() % 8]);
	}
	default: {
		size_t n = rnd() % 8 ? lens[rnd() % 6] : lens[rnd() % 14];
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)('a' + rnd() % 26);
		if (n > 0 && rnd() % 5 == 0)
			buf[0] = '0';   /* "0abc": not an int */
		return n;
	}
	}
}

/* Apply pe to the old bytes both ways and compare each with want. */
static void check_apply(const lp_edit *pe, const uint8_t *old, size_t old_len, const lp_buf *want)
{
	size_t cap = (old_len > pe->new_len ? old_len : pe->new_len) + 16;
	uint8_t *inplace = malloc(cap), *copy = malloc(pe->new_len + 16);

	assert_non_null(inplace);
	assert_non_null(copy);
	assert_int_equal(pe->old_len, old_len);
	assert_int_equal(pe->new_len, want->len);
	memset(inplace, 0xAB, cap);
	memcpy(inplace, old, old_len);
	lp_edit_apply(pe, inplace, inplace, true);
	assert_memory_equal(inplace, want->p, want->len);
	memset(copy, 0xCD, pe->new_len + 16);
	lp_edit_apply(pe, old, copy, false);
	assert_memory_equal(copy, want->p, want->len);
	assert_int_equal(copy[pe->new_len], 0xCD);   /* wrote nothing past the end */
	assert_true(lp_validate(copy, pe->new_len, true, NULL, NULL));
	free(inplace);
	free(copy);
}

/* The elements of a push, encoded as the server's push does (LPUSH: the last one first). */
static size_t encode_push(uint8_t *ins, char elems[][5100], const size_t *lens, int n, bool left)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		int j = left ? n - 1 - i : i;
		at += lp_entry_encode(ins + at, elems[j], lens[j]);
	}
	return at;
}

static char elems[8][5100];
static uint8_t ins[8 * 5200];

/* One random edit: planned on b's bytes (a copy: old), built on b, then compared. */
static void one_edit(lp_buf *b)
{
	uint8_t *old = malloc(b->len);
	size_t old_len = b->len, lens[8];
	uint32_t n = lp_count(b->p);
	lp_edit pe;
	int op = (int)(rnd() % 6), k = 1 + (int)(rnd() % 4);

	assert_non_null(old);
	memcpy(old, b->p, b->len);
	lp_edit_init(&pe, old);
	if (n == 0 || op <= 1) {   /* push k at the head (op 0) or the tail */
		bool left = op == 0;
		for (int i = 0; i < k; i++)
			lens[i] = rand_elem(elems[i]);
		size_t at = encode_push(ins, elems, lens, k, left);
		assert_int_equal(lp_edit_splice(&pe, left ? LP_HDR_SIZE : old_len - 1, 0, ins, at, k), 0);
		for (int i = 0; i < k; i++)
			assert_int_equal(left ? lp_prepend(b, elems[i], lens[i]) : lp_append(b, elems[i], lens[i]), 0);
	} else if (op <= 3) {      /* pop k (at most all) at the head (op 2) or the tail */
		bool left = op == 2;
		if ((uint32_t)k > n)
			k = (int)n;
		const uint8_t *a = left ? lp_first(old) : lp_seek(old, -k);
		const uint8_t *end = left ? lp_seek(old, k) : NULL;
		if (!end)
			end = old + old_len - 1;
		assert_int_equal(lp_edit_splice(&pe, (size_t)(a - old), (size_t)(end - a), NULL, 0, -k), 0);
		assert_int_equal(lp_delete_range_index(b, left ? 0 : -k, (size_t)k), k);
	} else if (op == 4) {      /* replace the entry at a random index, or remove it and the next */
		long i = (long)(rnd() % n);
		const uint8_t *p = lp_seek(old, i);
		if (rnd() % 2 || i + 1 == (long)n) {
			lens[0] = rand_elem(elems[0]);
			size_t at = lp_entry_encode(ins, elems[0], lens[0]);
			assert_int_equal(lp_edit_splice(&pe, (size_t)(p - old), lp_entry_size(p), ins, at, 0), 0);
			assert_int_equal(lp_replace(b, lp_off(b, lp_seek(b->p, i)), elems[0], lens[0]), 0);
		} else {
			size_t del = lp_entry_size(p);
			del += lp_entry_size(p + del);
			assert_int_equal(lp_edit_splice(&pe, (size_t)(p - old), del, NULL, 0, -2), 0);
			assert_int_equal(lp_delete_range(b, lp_off(b, lp_seek(b->p, i)), 2), 2);
		}
	} else if (op == 5 && n >= 2 && rnd() % 2) {   /* two replacements (any shifts) */
		long i = (long)(rnd() % (n - 1)), j = i + 1 + (long)(rnd() % (n - 1 - (uint32_t)i));
		const uint8_t *p = lp_seek(old, i), *q = lp_seek(old, j);
		lens[0] = rand_elem(elems[0]);
		lens[1] = rand_elem(elems[1]);
		size_t a0 = lp_entry_encode(ins, elems[0], lens[0]);
		size_t a1 = lp_entry_encode(ins + a0, elems[1], lens[1]);
		assert_int_equal(lp_edit_splice(&pe, (size_t)(q - old), lp_entry_size(q), ins + a0, a1, 0), 0);
		assert_int_equal(lp_edit_splice(&pe, (size_t)(p - old), lp_entry_size(p), ins, a0, 0), 0);
		assert_int_equal(lp_replace(b, lp_off(b, lp_seek(b->p, i)), elems[0], lens[0]), 0);
		assert_int_equal(lp_replace(b, lp_off(b, lp_seek(b->p, j)), elems[1], lens[1]), 0);
	} else {                   /* rotate: pop one end, push the element at either end */
		bool from_left = rnd() % 2, to_left = rnd() % 2;
		const uint8_t *p = from_left ? lp_first(old) : lp_last(old);
		char txt[LP_INTBUF_SIZE], copy[5100];
		lp_val v;
		size_t len;
		lp_get(p, &v);
		const char *s = lp_val_str(&v, txt, &len);
		memcpy(copy, s, len);
		size_t at = lp_entry_encode(ins, copy, len), off = (size_t)(p - old), sz = lp_entry_size(p);
		if (from_left == to_left) {
			assert_int_equal(lp_edit_splice(&pe, off, sz, ins, at, 0), 0);
		} else {
			assert_int_equal(lp_edit_splice(&pe, off, sz, NULL, 0, -1), 0);
			assert_int_equal(lp_edit_splice(&pe, to_left ? LP_HDR_SIZE : old_len - 1, 0, ins, at, 1), 0);
		}
		assert_int_equal(lp_delete_range_index(b, from_left ? 0 : -1, 1), 1);
		assert_int_equal(to_left ? lp_prepend(b, copy, len) : lp_append(b, copy, len), 0);
	}
	check_apply(&pe, old, old_len, b);
	free(old);
}

static void test_random_edits_match_the_build(void **state)
{
	(void)state;
	for (int seq = 0; seq < 200; seq++) {
		lp_buf b;
		assert_int_equal(lp_buf_init(&b), 0);
		for (int step = 0; step < 60; step++)
			one_edit(&b);
		lp_buf_free(&b);
	}
}

static void test_entry_encode_matches_append(void **state)
{
	char buf[5100];
	uint8_t enc[5200];
	(void)state;
	for (int i = 0; i < 2000; i++) {
		lp_buf b;
		size_t n = rand_elem(buf);
		assert_int_equal(lp_buf_init(&b), 0);
		assert_int_equal(lp_append(&b, buf, n), 0);
		size_t e = lp_entry_encode(enc, buf, n);
		assert_true(e <= n + LP_ENTRY_EXTRA);
		assert_int_equal(e, b.len - LP_EMPTY_BYTES);
		assert_memory_equal(enc, b.p + LP_HDR_SIZE, e);
		assert_int_equal(lp_entry_size(b.p + LP_HDR_SIZE), e);
		lp_buf_free(&b);
	}
}

/* Near 65535 entries the count saturates as the lp_* writes saturate it, whatever the edit. */
static void test_count_saturates_like_the_build(void **state)
{
	lp_buf b;
	(void)state;
	rng_state = 12345;
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 65530; i++)
		assert_int_equal(lp_append(&b, "x", 1), 0);
	for (int step = 0; step < 400; step++)
		one_edit(&b);
	lp_buf_free(&b);

	/* A rotation at 65534: the pop first (65533), then the push (65534), never unknown. */
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 65534; i++)
		assert_int_equal(lp_append(&b, "ab", 2), 0);
	uint8_t *old = malloc(b.len);
	size_t old_len = b.len, at = lp_entry_encode(ins, "ab", 2);
	lp_edit pe;
	memcpy(old, b.p, b.len);
	lp_edit_init(&pe, old);
	assert_int_equal(lp_edit_splice(&pe, old_len - 1 - at, at, NULL, 0, -1), 0);
	assert_int_equal(lp_edit_splice(&pe, LP_HDR_SIZE, 0, ins, at, 1), 0);
	assert_int_equal(pe.count, 65534);
	assert_int_equal(lp_delete_range_index(&b, -1, 1), 1);
	assert_int_equal(lp_prepend(&b, "ab", 2), 0);
	check_apply(&pe, old, old_len, &b);
	free(old);
	lp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_entry_encode_matches_append),
		cmocka_unit_test(test_random_edits_match_the_build),
		cmocka_unit_test(test_count_saturates_like_the_build),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
