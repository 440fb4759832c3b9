/*
 * test_list.c - coll/list: Redis's range arithmetic, slices (exact counts, the kept 65535 of a
 * large list, validity of the bytes), LREM from either end, LINSERT and LSET, and LPOS's
 * rank / count / maxlen rules including Redis 7.0's LONG_MIN rank, each against a simple model.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/list.h"
#include "coll/listpack.h"

/* A listpack of the words of s, split on spaces. */
static void build(lp_buf *b, const char *s)
{
	assert_int_equal(lp_buf_init(b), 0);
	while (*s) {
		const char *e = strchr(s, ' ');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		assert_int_equal(lp_append(b, s, n), 0);
		s += n + (e ? 1 : 0);
	}
}

/* The entries as words joined by spaces, into a static buffer. */
static const char *words(const uint8_t *lp)
{
	static char out[4096];
	char buf[LP_INTBUF_SIZE];
	size_t n, at = 0;
	lp_val v;

	assert_true(lp_validate(lp, lp_bytes(lp), true, NULL, NULL));
	out[0] = 0;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, p)) {
		lp_get(p, &v);
		const char *s = lp_val_str(&v, buf, &n);
		at += (size_t)snprintf(out + at, sizeof(out) - at, "%s%.*s", at ? " " : "", (int)n, s);
	}
	return out;
}

static void test_range_follows_redis_index_rules(void **state)
{
	long f, t;
	(void)state;
	assert_true(list_range(10, 0, -1, &f, &t));
	assert_int_equal(f, 0);
	assert_int_equal(t, 9);
	assert_true(list_range(10, -100, 100, &f, &t));
	assert_int_equal(f, 0);
	assert_int_equal(t, 9);
	assert_true(list_range(10, -3, -2, &f, &t));
	assert_int_equal(f, 7);
	assert_int_equal(t, 8);
	assert_false(list_range(10, 2, 1, &f, &t));
	assert_false(list_range(10, 10, 20, &f, &t));
	assert_false(list_range(10, -1, -2, &f, &t));
	assert_false(list_range(10, 0, -11, &f, &t));
	assert_false(list_range(0, 0, -1, &f, &t));
	assert_true(list_range(10, LONG_MIN, LONG_MAX, &f, &t));
	assert_int_equal(f, 0);
	assert_int_equal(t, 9);
}

static void test_slice_copies_a_run_of_entries_into_a_valid_listpack(void **state)
{
	lp_buf b;
	uint8_t dst[256];
	(void)state;
	build(&b, "a 1 bb -4096 ccc 70000 d");
	size_t len = list_slice(dst, b.p, 7, 1, 4);
	assert_int_equal(lp_bytes(dst), len);
	assert_int_equal(lp_count(dst), 4);
	assert_string_equal(words(dst), "1 bb -4096 ccc");
	len = list_slice(dst, b.p, 7, 6, 6);
	assert_string_equal(words(dst), "d");
	len = list_slice(dst, b.p, 7, 0, 6);
	assert_int_equal(len, b.len);
	assert_memory_equal(dst, b.p, b.len);
	lp_buf_free(&b);
}

/* Past 65534 entries the header says unknown; a slice keeps that, as Redis's deletions do, and
 * a walk still counts it. Long slices seek both ends, from whichever end is nearer. */
static void test_slice_of_a_large_list_keeps_the_unknown_count(void **state)
{
	lp_buf b;
	char s[16];
	long n = 70000;
	(void)state;
	assert_int_equal(lp_buf_init(&b), 0);
	for (long i = 0; i < n; i++) {
		int k = snprintf(s, sizeof(s), "%s%ld", i % 2 ? "s" : "", i);
		assert_int_equal(lp_append(&b, s, (size_t)k), 0);
	}
	uint8_t *dst = malloc(b.len);
	assert_non_null(dst);
	size_t len = list_slice(dst, b.p, n, 69000, 69999);
	assert_true(lp_validate(dst, len, true, NULL, NULL));
	assert_int_equal(dst[4] | dst[5] << 8, LP_COUNT_UNKNOWN);
	assert_int_equal(lp_count(dst), 1000);
	lp_val v;
	lp_get(lp_first(dst), &v);
	assert_true(v.is_int);
	assert_int_equal(v.v, 69000);
	len = list_slice(dst, b.p, n, 1, n - 2);
	assert_true(lp_validate(dst, len, true, NULL, NULL));
	assert_int_equal(lp_count(dst), n - 2);
	free(dst);
	lp_buf_free(&b);
}

static void test_rem_counts_from_either_end_and_matches_ints_by_text(void **state)
{
	lp_buf b;
	(void)state;
	build(&b, "a b a c a b a");
	assert_int_equal(list_rem(&b, 1, "a", 1), 1);
	assert_string_equal(words(b.p), "b a c a b a");
	assert_int_equal(list_rem(&b, -2, "a", 1), 2);
	assert_string_equal(words(b.p), "b a c b");
	assert_int_equal(list_rem(&b, 0, "b", 1), 2);
	assert_string_equal(words(b.p), "a c");
	assert_int_equal(list_rem(&b, 0, "zz", 2), 0);
	assert_int_equal(list_rem(&b, LONG_MIN, "a", 1), 1);   /* -LONG_MIN: every match */
	assert_string_equal(words(b.p), "c");
	lp_buf_free(&b);
	build(&b, "1 01 1 x 1");
	assert_int_equal(list_rem(&b, -5, "1", 1), 3);        /* "01" is a string, not the int 1 */
	assert_string_equal(words(b.p), "01 x");
	assert_int_equal(lp_count(b.p), 2);
	lp_buf_free(&b);
}

static void test_insert_and_set_edit_in_place_or_report_a_miss(void **state)
{
	lp_buf b;
	(void)state;
	build(&b, "a b c");
	assert_int_equal(list_insert(&b, LP_BEFORE, "a", 1, "x", 1), 1);
	assert_int_equal(list_insert(&b, LP_AFTER, "c", 1, "12", 2), 1);
	assert_int_equal(list_insert(&b, LP_AFTER, "nosuch", 6, "y", 1), 0);
	assert_string_equal(words(b.p), "x a b c 12");
	assert_int_equal(list_insert(&b, LP_BEFORE, "12", 2, "q", 1), 1);
	assert_string_equal(words(b.p), "x a b c q 12");
	assert_int_equal(list_set(&b, 0, "first", 5), 1);
	assert_int_equal(list_set(&b, -1, "-7", 2), 1);
	assert_int_equal(list_set(&b, 6, "z", 1), 0);
	assert_int_equal(list_set(&b, -7, "z", 1), 0);
	assert_string_equal(words(b.p), "first a b c q -7");
	lp_buf_free(&b);
}

struct idx { long v[16]; int n; };

static void collect(void *ctx, long index)
{
	struct idx *x = ctx;
	x->v[x->n++] = index;
}

/* lpos(list, ele, rank, count, maxlen) as "i j k". */
static const char *pos(const lp_buf *b, const char *e, long rank, long count, long maxlen)
{
	static char out[128];
	struct idx x = { .n = 0 };
	size_t at = 0;
	long found = list_pos(b->p, e, strlen(e), rank, count, maxlen, collect, &x);
	assert_int_equal(found, x.n);
	assert_int_equal(list_pos(b->p, e, strlen(e), rank, count, maxlen, NULL, NULL), found);
	out[0] = 0;
	for (int i = 0; i < x.n; i++)
		at += (size_t)snprintf(out + at, sizeof(out) - at, "%s%ld", i ? " " : "", x.v[i]);
	return out;
}

static void test_pos_applies_rank_count_and_maxlen_as_redis(void **state)
{
	lp_buf b;
	(void)state;
	build(&b, "a b c 1 2 3 c c");
	assert_string_equal(pos(&b, "c", 1, -1, 0), "2");
	assert_string_equal(pos(&b, "c", 2, -1, 0), "6");
	assert_string_equal(pos(&b, "c", -1, -1, 0), "7");
	assert_string_equal(pos(&b, "c", -3, -1, 0), "2");
	assert_string_equal(pos(&b, "c", 4, -1, 0), "");
	assert_string_equal(pos(&b, "c", 1, 0, 0), "2 6 7");
	assert_string_equal(pos(&b, "c", 1, 2, 0), "2 6");
	assert_string_equal(pos(&b, "c", 2, 2, 0), "6 7");
	assert_string_equal(pos(&b, "c", -1, 0, 0), "7 6 2");
	assert_string_equal(pos(&b, "c", 1, 0, 7), "2 6");
	assert_string_equal(pos(&b, "c", 1, -1, 2), "");
	assert_string_equal(pos(&b, "c", -1, 0, 2), "7 6");
	assert_string_equal(pos(&b, "1", 1, -1, 0), "3");
	assert_string_equal(pos(&b, "01", 1, -1, 0), "");
	/* Redis 7.0: -LONG_MIN stays negative, so every match passes the rank, and with COUNT the
	 * stop test wraps and never fires. */
	assert_string_equal(pos(&b, "c", LONG_MIN, -1, 0), "7");
	assert_string_equal(pos(&b, "c", LONG_MIN, 1, 0), "7 6 2");
	assert_string_equal(pos(&b, "c", LONG_MAX, 0, 0), "");
	lp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_follows_redis_index_rules),
		cmocka_unit_test(test_slice_copies_a_run_of_entries_into_a_valid_listpack),
		cmocka_unit_test(test_slice_of_a_large_list_keeps_the_unknown_count),
		cmocka_unit_test(test_rem_counts_from_either_end_and_matches_ints_by_text),
		cmocka_unit_test(test_insert_and_set_edit_in_place_or_report_a_miss),
		cmocka_unit_test(test_pos_applies_rank_count_and_maxlen_as_redis),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
