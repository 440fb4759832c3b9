/*
 * test_zset.c - coll/zset: a sorted set's listpack kept in (score, member) order through random
 * inserts and deletes against a model, zs_find, the score and lex range walks against a brute
 * force over the model, and the range parsers' accept / reject rules (zslParseRange,
 * zslParseLexRange). The bytes themselves are diff/zset.txt's (replies) and listpack's tests'.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"
#include "coll/listpack.h"
#include "coll/zset.h"

#define MODEL_MAX 64

struct model {
	char m[MODEL_MAX][8];
	double s[MODEL_MAX];
	bool in[MODEL_MAX];
};

static int model_cmp(const struct model *md, int a, int b)
{
	if (md->s[a] != md->s[b])
		return md->s[a] < md->s[b] ? -1 : 1;
	return strcmp(md->m[a], md->m[b]);
}

/* The listpack's pairs are the model's members in (score, member) order. */
static void check_order(const lp_buf *b, const struct model *md)
{
	int order[MODEL_MAX], n = 0;
	for (int i = 0; i < MODEL_MAX; i++)
		if (md->in[i])
			order[n++] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && model_cmp(md, order[j - 1], order[j]) > 0; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	assert_int_equal(zs_len(b->p), n);
	const uint8_t *p = lp_first(b->p);
	for (int i = 0; i < n; i++, p = lp_next(b->p, lp_next(b->p, p))) {
		assert_true(lp_eq(p, md->m[order[i]], strlen(md->m[order[i]])));
		assert_true(zs_score(b->p, p) == md->s[order[i]]);
	}
	assert_null(p);
}

static void test_inserts_and_deletes_keep_score_then_member_order(void **state)
{
	static const double scores[] = { 0, 1, -1, 1.5, 2, 1e18, -0.25, INFINITY, -INFINITY, 7 };
	struct model md = { 0 };
	lp_buf b;
	(void)state;
	srand(7);
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < MODEL_MAX; i++)
		snprintf(md.m[i], sizeof(md.m[i]), i % 3 ? "m%d" : "%d", i);   /* some int entries */
	for (int step = 0; step < 3000; step++) {
		int i = rand() % MODEL_MAX;
		double sc;
		const uint8_t *p = zs_find(b.p, md.m[i], strlen(md.m[i]), &sc);
		assert_int_equal(p != NULL, md.in[i]);
		if (p) {
			assert_true(sc == md.s[i]);
			assert_int_equal(zs_delete(&b, lp_off(&b, p)), 0);
			md.in[i] = false;
		} else {
			md.s[i] = scores[rand() % SPW_ARRAY_LEN(scores)];
			assert_int_equal(zs_insert(&b, md.m[i], strlen(md.m[i]), md.s[i], false), 0);
			md.in[i] = true;
		}
		if (step % 50 == 0)
			check_order(&b, &md);
	}
	check_order(&b, &md);
	lp_buf_free(&b);
}

/* The first / last entry of the range walks equal a brute-force scan. */
static void test_range_walks_find_the_first_and_last_pair_in_range(void **state)
{
	lp_buf b;
	zs_range r;
	(void)state;
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 10; i++) {
		char m[8];
		snprintf(m, sizeof(m), "m%d", i);
		assert_int_equal(zs_insert(&b, m, strlen(m), i / 2, false), 0);   /* scores 0 0 1 1 ... 4 4 */
	}
	assert_true(zs_range_parse("(1", 2, "3", 1, &r));
	assert_true(lp_eq(zs_first_in_range(b.p, &r), "m4", 2));
	assert_true(lp_eq(zs_last_in_range(b.p, &r), "m7", 2));
	assert_true(zs_range_parse("5", 1, "+inf", 4, &r));
	assert_null(zs_first_in_range(b.p, &r));
	assert_null(zs_last_in_range(b.p, &r));
	assert_true(zs_range_parse("(2", 2, "2", 1, &r));   /* empty whatever the set holds */
	assert_null(zs_first_in_range(b.p, &r));
	lp_buf_free(&b);

	zs_lex lx;
	assert_int_equal(lp_buf_init(&b), 0);
	const char *ms[] = { "a", "ab", "b", "c", "d" };
	for (size_t i = 0; i < SPW_ARRAY_LEN(ms); i++)
		assert_int_equal(zs_insert(&b, ms[i], strlen(ms[i]), 0, false), 0);
	assert_true(zs_lex_parse("(a", 2, "[c", 2, &lx));
	assert_true(lp_eq(zs_first_in_lex(b.p, &lx), "ab", 2));
	assert_true(lp_eq(zs_last_in_lex(b.p, &lx), "c", 1));
	assert_true(zs_lex_parse("-", 1, "+", 1, &lx));
	assert_true(lp_eq(zs_first_in_lex(b.p, &lx), "a", 1));
	assert_true(lp_eq(zs_last_in_lex(b.p, &lx), "d", 1));
	assert_true(zs_lex_parse("+", 1, "-", 1, &lx));
	assert_null(zs_first_in_lex(b.p, &lx));
	assert_true(zs_lex_parse("[b", 2, "(b", 2, &lx));
	assert_null(zs_first_in_lex(b.p, &lx));
	lp_buf_free(&b);
}

static void test_range_parsers_take_what_redis_takes(void **state)
{
	zs_range r;
	zs_lex lx;
	(void)state;
	/* strtod over the C string: spaces before, hex, inf, "" and "(" as 0, a NUL ends it. */
	assert_true(zs_range_parse(" 1", 2, "0x10", 4, &r) && r.min == 1 && r.max == 16);
	assert_true(zs_range_parse("", 0, "(", 1, &r) && r.min == 0 && r.max == 0 && r.maxex && !r.minex);
	assert_true(zs_range_parse("-inf", 4, "5\0junk", 6, &r) && isinf(r.min) && r.max == 5);
	assert_false(zs_range_parse("1 ", 2, "2", 1, &r));
	assert_false(zs_range_parse("nan", 3, "2", 1, &r));
	assert_false(zs_range_parse("1", 1, "(nan", 4, &r));
	assert_false(zs_range_parse("a", 1, "2", 1, &r));
	/* lex: "-" "+" alone (up to a NUL), "(" / "[" then any bytes. */
	assert_true(zs_lex_parse("-", 1, "+\0x", 3, &lx) && lx.min.inf == -1 && lx.max.inf == 1);
	assert_true(zs_lex_parse("[", 1, "(a\0b", 4, &lx) && lx.min.len == 0 && !lx.min.ex &&
	            lx.max.len == 3 && lx.max.ex);
	assert_false(zs_lex_parse("", 0, "+", 1, &lx));
	assert_false(zs_lex_parse("a", 1, "+", 1, &lx));
	assert_false(zs_lex_parse("-x", 2, "+", 1, &lx));
	assert_false(zs_lex_parse("-", 1, "+x", 2, &lx));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inserts_and_deletes_keep_score_then_member_order),
		cmocka_unit_test(test_range_walks_find_the_first_and_last_pair_in_range),
		cmocka_unit_test(test_range_parsers_take_what_redis_takes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
