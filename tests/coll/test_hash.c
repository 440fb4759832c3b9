/*
 * test_hash.c - coll/hash.c: a hash's listpack as Redis's hashTypeSet / hashTypeDelete leave it
 * (pairs in insertion order, updates in place, int-encoded fields found by their text), checked
 * against a model of field, value pairs through random edits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "coll/hash.h"

/* The listpack's entries as "a=1,b=2," text (ints rendered as Redis replies them). */
static void lp_dump(const lp_buf *b, char *out, size_t cap)
{
	size_t n = 0;
	char ib[LP_INTBUF_SIZE];
	int k = 0;
	out[0] = '\0';
	for (const uint8_t *p = lp_first(b->p); p; p = lp_next(b->p, p), k++) {
		lp_val v;
		size_t len;
		lp_get(p, &v);
		const char *s = lp_val_str(&v, ib, &len);
		n += (size_t)snprintf(out + n, cap - n, "%.*s%c", (int)len, s, k % 2 ? ',' : '=');
	}
}

static void test_set_appends_new_pairs_and_updates_in_place(void **state)
{
	(void)state;
	lp_buf b;
	char d[256];
	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(hash_lp_set(&b, "a", 1, "1", 1), 1);
	assert_int_equal(hash_lp_set(&b, "b", 1, "two", 3), 1);
	assert_int_equal(hash_lp_set(&b, "c", 1, "3", 1), 1);
	assert_int_equal(hash_lp_set(&b, "a", 1, "one, longer now", 15), 0);
	lp_dump(&b, d, sizeof(d));
	assert_string_equal(d, "a=one, longer now,b=two,c=3,");
	assert_int_equal(hash_lp_len(b.p), 3);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	lp_buf_free(&b);
}

static void test_lookup_compares_fields_only_and_ints_by_text(void **state)
{
	(void)state;
	lp_buf b;
	lp_val v;
	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(hash_lp_set(&b, "x", 1, "y", 1), 1);
	assert_int_equal(hash_lp_set(&b, "y", 1, "x", 1), 1);
	assert_int_equal(hash_lp_set(&b, "12", 2, "-5", 2), 1);
	assert_null(hash_lp_value(b.p, "z", 1));
	const uint8_t *p = hash_lp_value(b.p, "y", 1);   /* the field y, not the value y */
	assert_non_null(p);
	lp_get(p, &v);
	assert_false(v.is_int);
	assert_memory_equal(v.s, "x", 1);
	p = hash_lp_value(b.p, "12", 2);
	assert_non_null(p);
	lp_get(p, &v);
	assert_true(v.is_int && v.v == -5);
	assert_null(hash_lp_value(b.p, "012", 3));   /* not the int 12's text */
	lp_buf_free(&b);
}

static void test_delete_removes_the_pair_and_keeps_the_order(void **state)
{
	(void)state;
	lp_buf b;
	char d[256];
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 5; i++) {
		char f[8];
		int n = sprintf(f, "f%d", i);
		assert_int_equal(hash_lp_set(&b, f, (size_t)n, f, (size_t)n), 1);
	}
	assert_int_equal(hash_lp_del(&b, "f2", 2), 1);
	assert_int_equal(hash_lp_del(&b, "f2", 2), 0);
	assert_int_equal(hash_lp_del(&b, "f0", 2), 1);
	assert_int_equal(hash_lp_del(&b, "f4", 2), 1);
	lp_dump(&b, d, sizeof(d));
	assert_string_equal(d, "f1=f1,f3=f3,");
	assert_int_equal(hash_lp_del(&b, "f1", 2), 1);
	assert_int_equal(hash_lp_del(&b, "f3", 2), 1);
	assert_int_equal(hash_lp_len(b.p), 0);
	assert_int_equal(b.len, LP_EMPTY_BYTES);
	lp_buf_free(&b);
}

/* Random sets and deletes over 40 fields against a model array. */
static void test_random_edits_match_a_model(void **state)
{
	(void)state;
	int model[40];
	int order[40], norder = 0;
	uint64_t r = 88172645463325252ULL;
	lp_buf b;
	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 40; i++)
		model[i] = -1;
	for (int step = 0; step < 20000; step++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		int f = (int)(r % 40), val = (int)((r >> 8) % 100000);
		char fs[8], vs[16];
		size_t fl = (size_t)sprintf(fs, "%s%d", f % 2 ? "k" : "", f);
		size_t vl = (size_t)sprintf(vs, "%d%s", val, (r >> 40) % 2 ? "" : "s");
		if ((r >> 32) % 3 == 0) {
			assert_int_equal(hash_lp_del(&b, fs, fl), model[f] >= 0);
			if (model[f] >= 0) {
				int j = 0;
				while (order[j] != f)
					j++;
				memmove(order + j, order + j + 1, (size_t)(norder - j - 1) * sizeof(int));
				norder--;
			}
			model[f] = -1;
		} else {
			assert_int_equal(hash_lp_set(&b, fs, fl, vs, vl), model[f] < 0);
			if (model[f] < 0)
				order[norder++] = f;
			model[f] = val * 2 + (int)((r >> 40) % 2);
		}
	}
	assert_int_equal(hash_lp_len(b.p), norder);
	const uint8_t *p = lp_first(b.p);
	for (int j = 0; j < norder; j++, p = lp_next(b.p, lp_next(b.p, p))) {
		char fs[8];
		size_t fl = (size_t)sprintf(fs, "%s%d", order[j] % 2 ? "k" : "", order[j]);
		assert_true(lp_eq(p, fs, fl));
	}
	assert_null(p);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	lp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_set_appends_new_pairs_and_updates_in_place),
		cmocka_unit_test(test_lookup_compares_fields_only_and_ints_by_text),
		cmocka_unit_test(test_delete_removes_the_pair_and_keeps_the_order),
		cmocka_unit_test(test_random_edits_match_a_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
