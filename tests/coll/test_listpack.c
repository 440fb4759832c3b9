/*
 * test_listpack.c - coll/listpack: encodings at every width edge, iteration both ways, seek,
 * insert / replace / delete at the ends and in the middle, the 65535-count path, byte-exact
 * agreement with listpacks redis-server 7.0 built (lp_redis_bytes.h), and validation of hostile
 * bytes (every truncation, thousands of byte flips) without reading out of bounds (run under
 * ASan: each candidate lives in a heap block of exactly its size).
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

#include "common/spw.h"
#include "coll/listpack.h"
#include "coll/numconv.h"
#include "coll/lp_redis_bytes.h"

/* The int width edges, in the order they were pushed into redis_l. */
static const char *const LP_EDGE_INTS[] = {
	"127", "128", "-1", "4095", "4096", "-4096", "-4097", "32767", "32768", "-32768", "-32769",
	"8388607", "8388608", "-8388608", "-8388609", "2147483647", "2147483648", "-2147483648",
	"-2147483649", "9223372036854775807", "-9223372036854775808",
};
/* Entry sizes (encoding + data, no backlen) of those ints: 7-bit, 13, 16, 24, 32, 64-bit. */
static const unsigned LP_EDGE_INT_SIZES[] = { 1, 2, 2, 2, 3, 2, 3, 3, 4, 3, 4, 4, 5, 4, 5, 5, 9, 5, 9, 9, 9 };
/* Strings that string2ll refuses (so stay strings), then the 6-bit / 12-bit length edge. */
static const char *const LP_EDGE_STRS[] = {
	"x", "9223372036854775808", "-9223372036854775809", "007", "-0", "+5", " 5", "12a", "",
};

static void assert_bytes(const lp_buf *b, const uint8_t *want, size_t n)
{
	assert_int_equal(b->len, n);
	assert_int_equal(lp_bytes(b->p), n);
	assert_memory_equal(b->p, want, n);
	assert_true(lp_validate(b->p, b->len, true, NULL, NULL));
}

static void append_str(lp_buf *b, const char *s) { assert_int_equal(lp_append(b, s, strlen(s)), 0); }

/* A listpack of the n strings, appended in order (RPUSH, HSET of new fields). */
static void build_from(lp_buf *b, const char *const *s, size_t n)
{
	assert_int_equal(lp_buf_init(b), 0);
	for (size_t i = 0; i < n; i++)
		append_str(b, s[i]);
}

/* The entry's value as text (ints rendered) in buf. */
static const char *entry_text(const uint8_t *p, char *buf, size_t *len)
{
	lp_val v;
	lp_get(p, &v);
	return lp_val_str(&v, buf, len);
}

static void assert_entry_is(const uint8_t *p, const char *want)
{
	char buf[LP_INTBUF_SIZE];
	size_t n;
	const char *s;

	assert_non_null(p);
	s = entry_text(p, buf, &n);
	assert_int_equal(n, strlen(want));
	assert_memory_equal(s, want, n);
}

static void test_empty_listpack_is_seven_bytes_with_no_entries(void **state)
{
	static const uint8_t want[] = { 7, 0, 0, 0, 0, 0, 0xFF };
	lp_buf b;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	assert_bytes(&b, want, sizeof(want));
	assert_int_equal(lp_count(b.p), 0);
	assert_null(lp_first(b.p));
	assert_null(lp_last(b.p));
	assert_null(lp_seek(b.p, 0));
	assert_null(lp_seek(b.p, -1));
	assert_int_equal(lp_delete_range_index(&b, 0, 5), 0);
	lp_buf_free(&b);
}

static void test_ints_at_every_width_edge_take_the_narrowest_encoding(void **state)
{
	lp_buf b;
	const uint8_t *p;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	for (size_t i = 0; i < SPW_ARRAY_LEN(LP_EDGE_INTS); i++) {
		lp_val v;
		size_t before = b.len;
		append_str(&b, LP_EDGE_INTS[i]);
		/* entry + 1-byte backlen */
		assert_int_equal(b.len - before, LP_EDGE_INT_SIZES[i] + 1);
		p = lp_last(b.p);
		lp_get(p, &v);
		assert_true(v.is_int);
		assert_int_equal(v.v, strtoll(LP_EDGE_INTS[i], NULL, 10));
		assert_entry_is(p, LP_EDGE_INTS[i]);
	}
	for (size_t i = 0; i < SPW_ARRAY_LEN(LP_EDGE_STRS); i++) {
		lp_val v;
		append_str(&b, LP_EDGE_STRS[i]);
		lp_get(lp_last(b.p), &v);
		assert_false(v.is_int);
		assert_int_equal(v.len, strlen(LP_EDGE_STRS[i]));
	}
	lp_buf_free(&b);
}

/* The redis_l list: every int edge, non-int strings, then 63 and 64 bytes (6-bit / 12-bit). */
static void build_edge_list(lp_buf *b)
{
	char s63[63], s64[64];

	build_from(b, LP_EDGE_INTS, SPW_ARRAY_LEN(LP_EDGE_INTS));
	for (size_t i = 0; i < SPW_ARRAY_LEN(LP_EDGE_STRS); i++)
		append_str(b, LP_EDGE_STRS[i]);
	memset(s63, 'a', sizeof(s63));
	memset(s64, 'b', sizeof(s64));
	assert_int_equal(lp_append(b, s63, sizeof(s63)), 0);
	assert_int_equal(lp_append(b, s64, sizeof(s64)), 0);
}

static void test_rpush_of_every_edge_matches_redis_bytes(void **state)
{
	lp_buf b;
	(void)state;

	build_edge_list(&b);
	assert_bytes(&b, redis_l, sizeof(redis_l));
	lp_buf_free(&b);
}

/* Redis's framing around a long string: the header, the entry's own bytes, a fill, the backlen. */
struct long_str {
	const uint8_t *hdr;
	size_t hlen;
	size_t n;
	uint8_t fill;
	const uint8_t *backlen;
	size_t blen;
};

static size_t check_long_entry(const uint8_t *p, const struct long_str *w)
{
	assert_memory_equal(p, w->hdr, w->hlen);
	for (size_t i = 0; i < w->n; i++)
		assert_int_equal(p[w->hlen + i], w->fill);
	assert_memory_equal(p + w->hlen + w->n, w->backlen, w->blen);
	return w->hlen + w->n + w->blen;
}

/* hset(f1, n1 x fill1, f2, n2 x fill2) and compare with Redis's bytes (lp_redis_bytes.h notes). */
static void check_two_long_values(const uint8_t hdr[6], const struct long_str w[2])
{
	static const uint8_t f1[] = { 0x82, 'f', '1', 0x03 }, f2[] = { 0x82, 'f', '2', 0x03 };
	lp_buf b;
	size_t at = LP_HDR_SIZE;

	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 2; i++) {
		char *v = malloc(w[i].n);
		memset(v, w[i].fill, w[i].n);
		append_str(&b, i ? "f2" : "f1");
		assert_int_equal(lp_append(&b, v, w[i].n), 0);
		free(v);
	}
	assert_memory_equal(b.p, hdr, 6);
	for (int i = 0; i < 2; i++) {
		assert_memory_equal(b.p + at, i ? f2 : f1, 4);
		at += 4;
		at += check_long_entry(b.p + at, &w[i]);
	}
	assert_int_equal(b.p[at], LP_EOF);
	assert_int_equal(at + 1, b.len);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	assert_entry_is(lp_seek(b.p, -2), "f2");
	{
		lp_val v;
		lp_get(lp_prev(b.p, lp_seek(b.p, -2)), &v);
		assert_false(v.is_int);
		assert_int_equal(v.len, w[0].n);
	}
	lp_buf_free(&b);
}

static void test_strings_of_4095_and_4096_bytes_match_redis_bytes(void **state)
{
	/* lb: 19 20 00 00 04 00 | 82 66 31 03 | ef ff [4095 x 78] 20 81 | 82 66 32 03 |
	 *     f0 00 10 00 00 [4096 x 79] 20 85 | ff */
	static const uint8_t hdr[6] = { 0x19, 0x20, 0x00, 0x00, 0x04, 0x00 };
	static const uint8_t h1[] = { 0xef, 0xff }, b1[] = { 0x20, 0x81 };
	static const uint8_t h2[] = { 0xf0, 0x00, 0x10, 0x00, 0x00 }, b2[] = { 0x20, 0x85 };
	const struct long_str w[2] = { { h1, 2, 4095, 'x', b1, 2 }, { h2, 5, 4096, 'y', b2, 2 } };
	(void)state;

	check_two_long_values(hdr, w);
}

static void test_backlen_of_a_16383_byte_entry_takes_three_bytes_as_in_redis(void **state)
{
	/* hb: 11 80 00 00 04 00 | 82 66 31 03 | f0 f9 3f 00 00 [16377 x 76] 7f fe | 82 66 32 03 |
	 *     f0 fa 3f 00 00 [16378 x 77] 00 ff ff | ff */
	static const uint8_t hdr[6] = { 0x11, 0x80, 0x00, 0x00, 0x04, 0x00 };
	static const uint8_t h1[] = { 0xf0, 0xf9, 0x3f, 0x00, 0x00 }, b1[] = { 0x7f, 0xfe };
	static const uint8_t h2[] = { 0xf0, 0xfa, 0x3f, 0x00, 0x00 }, b2[] = { 0x00, 0xff, 0xff };
	const struct long_str w[2] = { { h1, 5, 16377, 'v', b1, 2 }, { h2, 5, 16378, 'w', b2, 3 } };
	(void)state;

	check_two_long_values(hdr, w);
}

static void test_hash_and_lpush_match_redis_bytes(void **state)
{
	static const char *const h[] = { "a", "1", "b", "hello", "c", "-7", "d", "123456789012" };
	lp_buf b;
	(void)state;

	build_from(&b, h, SPW_ARRAY_LEN(h));
	assert_bytes(&b, redis_h, sizeof(redis_h));
	lp_buf_free(&b);

	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(lp_prepend(&b, "c", 1), 0);
	assert_int_equal(lp_prepend(&b, "b", 1), 0);
	assert_int_equal(lp_prepend(&b, "a", 1), 0);
	assert_bytes(&b, redis_l2, sizeof(redis_l2));
	lp_buf_free(&b);
}

static void test_zset_scores_are_stored_as_redis_stores_them(void **state)
{
	/* redis_z's members in (score, member) order, as zzlInsert keeps them. */
	static const struct { const char *m; double s; } z[] = {
		{ "j", -1.0 / 0.0 }, { "m", -4611686018427388928.0 }, { "f", -2.5 }, { "c", -0.0 },
		{ "e", 0.1 }, { "a", 1.5 }, { "b", 3 }, { "k", 123456789012.0 }, { "g", 4503599627370496.0 },
		{ "h", 9007199254740993.0 }, { "l", 4611686018427387904.0 }, { "n", 5e18 }, { "d", 1e20 },
		{ "i", 1.0 / 0.0 },
	};
	lp_buf b;
	const uint8_t *p;
	size_t i = 0;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	for (i = 0; i < SPW_ARRAY_LEN(z); i++) {
		append_str(&b, z[i].m);
		assert_int_equal(coll_lp_append_score(&b, z[i].s, false), 0);
	}
	assert_bytes(&b, redis_z, sizeof(redis_z));
	/* Reading the scores back gives the doubles (-0.0 was stored as the int 0, as Redis does). */
	for (i = 0, p = lp_first(b.p); p; p = lp_next(b.p, lp_next(b.p, p)), i++) {
		lp_val v;
		lp_get(lp_next(b.p, p), &v);
		assert_true(coll_lp_score(&v) == z[i].s);
	}
	assert_int_equal(i, SPW_ARRAY_LEN(z));
	lp_buf_free(&b);
}

/* LINSERT / LSET / LREM / LTRIM done with offsets, as the list commands will. */
static void test_list_edits_in_the_middle_and_ends_match_redis_bytes(void **state)
{
	static const char *const init[] = { "a", "b", "c", "d", "e", "1", "2", "3" };
	const char *lng = "a-much-longer-string-than-before-it-was-here";
	lp_buf b;
	const uint8_t *p;
	size_t off;
	(void)state;

	build_from(&b, init, SPW_ARRAY_LEN(init));
	p = lp_find(b.p, lp_first(b.p), "c", 1, 0);
	assert_int_equal(lp_insert(&b, lp_off(&b, p), LP_BEFORE, "99999", 5, &off), 0);
	assert_entry_is(lp_at(&b, off), "99999");
	assert_entry_is(lp_next(b.p, lp_at(&b, off)), "c");
	p = lp_find(b.p, lp_first(b.p), "e", 1, 0);
	assert_int_equal(lp_insert(&b, lp_off(&b, p), LP_AFTER, "hello", 5, &off), 0);
	assert_entry_is(lp_at(&b, off), "hello");
	assert_int_equal(lp_replace(&b, lp_off(&b, lp_seek(b.p, 0)), "-5", 2), 0);
	off = lp_off(&b, lp_seek(b.p, 3));
	assert_int_equal(lp_replace(&b, off, lng, strlen(lng)), 0);
	assert_entry_is(lp_at(&b, off), lng);
	p = lp_find(b.p, lp_first(b.p), "2", 1, 0);
	off = lp_off(&b, p);
	assert_int_equal(lp_delete_range(&b, off, 1), 1);
	assert_entry_is(lp_at(&b, off), "3");
	assert_int_equal(lp_delete_range_index(&b, 0, 1), 1);
	assert_int_equal(lp_delete_range_index(&b, -1, 1), 1);
	assert_bytes(&b, redis_m, sizeof(redis_m));
	lp_buf_free(&b);
}

static void test_hash_edits_match_redis_bytes(void **state)
{
	static const char *const init[] = { "f1", "v1", "f2", "v2", "f3", "v3", "f4", "v4" };
	const char *lng = "a-longer-value-now-and-it-is-still-a-listpack";
	lp_buf b;
	const uint8_t *f;
	size_t off;
	(void)state;

	build_from(&b, init, SPW_ARRAY_LEN(init));
	/* skip 1: only fields are compared, so a value "f3" would never match */
	f = lp_find(b.p, lp_first(b.p), "f2", 2, 1);
	assert_int_equal(lp_replace(&b, lp_off(&b, lp_next(b.p, f)), lng, strlen(lng)), 0);
	f = lp_find(b.p, lp_first(b.p), "f3", 2, 1);
	assert_int_equal(lp_replace(&b, lp_off(&b, lp_next(b.p, f)), "7", 1), 0);
	f = lp_find(b.p, lp_first(b.p), "f1", 2, 1);
	off = lp_off(&b, f);
	assert_int_equal(lp_delete_range(&b, off, 2), 2);
	assert_entry_is(lp_at(&b, off), "f2");
	assert_bytes(&b, redis_hm, sizeof(redis_hm));
	lp_buf_free(&b);
}

static void test_iteration_both_ways_and_seek_with_negative_indexes_agree(void **state)
{
	lp_buf b;
	const uint8_t *fw[64], *p;
	long n = 0, i;
	(void)state;

	build_edge_list(&b);
	for (p = lp_first(b.p); p; p = lp_next(b.p, p))
		fw[n++] = p;
	assert_int_equal(n, lp_count(b.p));
	i = n;
	for (p = lp_last(b.p); p; p = lp_prev(b.p, p))
		assert_ptr_equal(p, fw[--i]);
	assert_int_equal(i, 0);
	for (i = 0; i < n; i++) {
		assert_ptr_equal(lp_seek(b.p, i), fw[i]);
		assert_ptr_equal(lp_seek(b.p, i - n), fw[i]);
	}
	assert_null(lp_seek(b.p, n));
	assert_null(lp_seek(b.p, -n - 1));
	assert_null(lp_seek(b.p, 1L << 40));
	lp_buf_free(&b);
}

static void test_find_matches_ints_by_their_canonical_text_only(void **state)
{
	lp_buf b;
	char buf[LP_INTBUF_SIZE];
	size_t n;
	lp_val v;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(lp_append_int(&b, 1), 0);
	append_str(&b, "01");
	assert_int_equal(lp_append_int(&b, -9223372036854775807LL - 1), 0);
	append_str(&b, "x");
	assert_ptr_equal(lp_find(b.p, lp_first(b.p), "1", 1, 0), lp_seek(b.p, 0));
	assert_ptr_equal(lp_find(b.p, lp_first(b.p), "01", 2, 0), lp_seek(b.p, 1));
	assert_ptr_equal(lp_find(b.p, lp_first(b.p), "-9223372036854775808", 20, 0), lp_seek(b.p, 2));
	assert_null(lp_find(b.p, lp_first(b.p), "+1", 2, 0));
	assert_null(lp_find(b.p, lp_first(b.p), "01", 2, 1));  /* skips the "01" */
	assert_true(lp_eq(lp_seek(b.p, 3), "x", 1));
	assert_false(lp_eq(lp_seek(b.p, 3), "xy", 2));
	lp_get(lp_seek(b.p, 2), &v);
	assert_string_equal(lp_val_str(&v, buf, &n), "-9223372036854775808");
	assert_int_equal(n, 20);
	lp_buf_free(&b);
}

static void test_a_string_from_inside_the_buffer_survives_its_move(void **state)
{
	lp_buf b;
	char big[200];
	lp_val v;
	(void)state;

	memset(big, 'q', sizeof(big));
	assert_int_equal(lp_buf_init(&b), 0);
	assert_int_equal(lp_append(&b, big, sizeof(big)), 0);
	for (int i = 0; i < 20; i++) {     /* each append may realloc the bytes it copies from */
		lp_get(lp_first(b.p), &v);
		assert_int_equal(lp_prepend(&b, v.s, v.len), 0);
	}
	for (const uint8_t *p = lp_first(b.p); p; p = lp_next(b.p, p)) {
		lp_get(p, &v);
		assert_int_equal(v.len, sizeof(big));
		assert_memory_equal(v.s, big, sizeof(big));
	}
	lp_buf_free(&b);
}

/* A model of the listpack: the entries' texts. */
#define MODEL_MAX 400
struct model {
	char s[MODEL_MAX][24];
	int n;
};

static void random_text(char *out, unsigned r)
{
	static const char *const fixed[] = { "0", "-1", "127", "128", "4096", "-4097", "70000", "01", "", "-0" };
	switch (r % 4) {
	case 0: snprintf(out, 24, "%s", fixed[(r / 4) % SPW_ARRAY_LEN(fixed)]); break;
	case 1: snprintf(out, 24, "%lld", (long long)((r * 2654435761u) % 100000000u) - 50000000); break;
	case 2: snprintf(out, 24, "s%u", r % 1000); break;
	default: snprintf(out, 24, "%lld", (long long)(((uint64_t)r << 40) ^ r)); break;
	}
}

static void check_model(const lp_buf *b, const struct model *m)
{
	const uint8_t *p = lp_first(b->p);

	assert_true(lp_validate(b->p, b->len, true, NULL, NULL));
	assert_int_equal(lp_count(b->p), m->n);
	for (int i = 0; i < m->n; i++, p = lp_next(b->p, p))
		assert_entry_is(p, m->s[i]);
	assert_null(p);
	p = lp_last(b->p);
	for (int i = m->n - 1; i >= 0; i--, p = lp_prev(b->p, p))
		assert_entry_is(p, m->s[i]);
	assert_null(p);
}

/* One random edit at a random index, done on both. */
static void model_step(lp_buf *b, struct model *m, unsigned r)
{
	int i = m->n ? (int)((r >> 8) % (unsigned)m->n) : 0, k;
	char t[24];
	size_t off = m->n ? lp_off(b, lp_seek(b->p, i)) : 0, no;

	random_text(t, r >> 3);
	switch ((m->n >= MODEL_MAX - 8) ? 4 : r % 6) {
	case 0: case 1:
		if (!m->n) {
			assert_int_equal(lp_append(b, t, strlen(t)), 0);
			memcpy(m->s[m->n++], t, 24);
			break;
		}
		k = (r & 64) ? LP_AFTER : LP_BEFORE;
		assert_int_equal(lp_insert(b, off, k, t, strlen(t), &no), 0);
		i += k == LP_AFTER;
		assert_int_equal(no, lp_off(b, lp_seek(b->p, i)));
		memmove(m->s[i + 1], m->s[i], (size_t)(m->n - i) * 24);
		memcpy(m->s[i], t, 24);
		m->n++;
		break;
	case 2:
		assert_int_equal((r & 1) ? lp_append(b, t, strlen(t)) : lp_prepend(b, t, strlen(t)), 0);
		i = (r & 1) ? m->n : 0;
		memmove(m->s[i + 1], m->s[i], (size_t)(m->n - i) * 24);
		memcpy(m->s[i], t, 24);
		m->n++;
		break;
	case 3:
		if (!m->n)
			break;
		assert_int_equal(lp_replace(b, off, t, strlen(t)), 0);
		memcpy(m->s[i], t, 24);
		break;
	default:
		k = (int)((r >> 4) % 5);
		if (r & 32) {
			k = lp_delete_range_index(b, i - m->n, (size_t)k);
		} else if (m->n) {
			k = lp_delete_range(b, off, (size_t)k);
		} else {
			k = 0;
		}
		assert_true(k >= 0 && k <= m->n - i);
		memmove(m->s[i], m->s[i + k], (size_t)(m->n - i - k) * 24);
		m->n -= k;
		break;
	}
}

static void test_random_edits_agree_with_a_model(void **state)
{
	static struct model m;
	lp_buf b;
	unsigned r = 12345;
	(void)state;

	m.n = 0;
	assert_int_equal(lp_buf_init(&b), 0);
	for (int step = 0; step < 3000; step++) {
		r = r * 1103515245u + 12345u;
		model_step(&b, &m, r);
		if (step % 50 == 0)
			check_model(&b, &m);
	}
	check_model(&b, &m);
	lp_buf_free(&b);
}

static void test_count_past_65534_reads_unknown_and_is_counted_by_walking(void **state)
{
	lp_buf b;
	const uint8_t *p;
	(void)state;

	assert_int_equal(lp_buf_init(&b), 0);
	for (int i = 0; i < 65534; i++)
		assert_int_equal(lp_append_int(&b, i & 127), 0);
	assert_int_equal(b.p[4] | b.p[5] << 8, 65534);
	assert_int_equal(lp_append_int(&b, 1), 0);
	assert_int_equal(b.p[4] | b.p[5] << 8, 65535);
	for (int i = 0; i < 100; i++)
		assert_int_equal(lp_append_int(&b, 2), 0);
	assert_int_equal(lp_count(b.p), 65635);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	/* unknown count: negative seeks walk back from the end, positive ones forward */
	p = lp_seek(b.p, -101);
	assert_entry_is(p, "1");
	assert_entry_is(lp_seek(b.p, 65534), "1");
	assert_null(lp_seek(b.p, 65635));
	assert_null(lp_seek(b.p, -65636));
	/* deleting keeps the header at "unknown", as Redis's lpDelete does */
	assert_int_equal(lp_delete_range_index(&b, -200, 200), 200);
	assert_int_equal(b.p[4] | b.p[5] << 8, 65535);
	assert_int_equal(lp_count(b.p), 65435);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	lp_buf_free(&b);
}

static int count_cb(const uint8_t *p, uint32_t head, void *arg)
{
	int *n = arg;
	(void)p;
	(void)head;
	return ++*n < 5;
}

static void test_validate_rejects_bad_headers_counts_and_callback_refusals(void **state)
{
	lp_buf b;
	int n = 0;
	uint8_t *c;
	(void)state;

	build_edge_list(&b);
	assert_true(lp_validate(b.p, b.len, true, NULL, NULL));
	assert_false(lp_validate(b.p, b.len, true, count_cb, &n));
	assert_int_equal(n, 5);
	assert_false(lp_validate(b.p, 6, false, NULL, NULL));
	assert_false(lp_validate(b.p, b.len - 1, false, NULL, NULL));
	c = malloc(b.len);
	memcpy(c, b.p, b.len);
	c[4]++;                                     /* count off by one */
	assert_true(lp_validate(c, b.len, false, NULL, NULL));
	assert_false(lp_validate(c, b.len, true, NULL, NULL));
	c[4] = c[5] = 0xFF;                         /* unknown count is accepted */
	assert_true(lp_validate(c, b.len, true, NULL, NULL));
	c[b.len - 1] = 0;
	assert_false(lp_validate(c, b.len, false, NULL, NULL));
	memcpy(c, b.p, b.len);
	c[LP_HDR_SIZE] = 0xF5;                      /* an encoding that does not exist */
	assert_false(lp_validate(c, b.len, true, NULL, NULL));
	memcpy(c, b.p, b.len);
	c[LP_HDR_SIZE + 1] = 0x02;                  /* 127's backlen says 2 */
	assert_false(lp_validate(c, b.len, true, NULL, NULL));
	free(c);
	lp_buf_free(&b);
}

/* Walk an accepted listpack every way the commands will, so ASan sees any stray read. */
static void exercise(const uint8_t *lp)
{
	char buf[LP_INTBUF_SIZE];
	size_t n;
	uint32_t c = lp_count(lp), k = 0;
	const uint8_t *p;

	for (p = lp_first(lp); p; p = lp_next(lp, p), k++)
		(void)entry_text(p, buf, &n);
	assert_int_equal(k, c);
	for (p = lp_last(lp); p; p = lp_prev(lp, p))
		k--;
	assert_int_equal(k, 0);
	(void)lp_find(lp, lp_first(lp) ? lp_first(lp) : NULL, "7", 1, 1);
	(void)lp_seek(lp, -1);
}

/* Check a candidate in a heap block of exactly its size; an accepted one is then walked. */
static int try_candidate(const uint8_t *src, size_t len)
{
	uint8_t *c = malloc(len ? len : 1);
	int ok;

	memcpy(c, src, len);
	ok = lp_validate(c, len, true, NULL, NULL);
	if (ok)
		exercise(c);
	free(c);
	return ok;
}

static void test_every_truncation_is_rejected_even_with_a_fixed_header(void **state)
{
	const struct { const uint8_t *p; size_t n; } src[] = {
		{ redis_l, sizeof(redis_l) }, { redis_z, sizeof(redis_z) }, { redis_hm, sizeof(redis_hm) },
	};
	uint8_t tmp[1024];
	(void)state;

	for (size_t s = 0; s < SPW_ARRAY_LEN(src); s++) {
		for (size_t len = 0; len < src[s].n; len++) {
			assert_false(try_candidate(src[s].p, len));
			if (len < LP_EMPTY_BYTES)
				continue;
			/* Make the header and end marker agree with the cut, so the entries are what fail;
			 * a cut that lands exactly after an entry, with the count fixed too, is valid. */
			memcpy(tmp, src[s].p, len);
			tmp[0] = (uint8_t)len, tmp[1] = (uint8_t)(len >> 8), tmp[2] = tmp[3] = 0;
			tmp[len - 1] = LP_EOF;
			tmp[4] = tmp[5] = 0xFF;
			(void)try_candidate(tmp, len);
		}
	}
}

static void test_random_byte_flips_never_read_out_of_bounds(void **state)
{
	const struct { const uint8_t *p; size_t n; } src[] = {
		{ redis_l, sizeof(redis_l) }, { redis_z, sizeof(redis_z) }, { redis_hm, sizeof(redis_hm) },
		{ redis_h, sizeof(redis_h) }, { redis_m, sizeof(redis_m) },
	};
	uint8_t tmp[1024];
	unsigned r = 777, accepted = 0;
	(void)state;

	for (int i = 0; i < 6000; i++) {
		size_t s = (size_t)i % SPW_ARRAY_LEN(src), n = src[s].n;
		int flips = 1 + (int)(i % 3);
		memcpy(tmp, src[s].p, n);
		for (int f = 0; f < flips; f++) {
			r = r * 1103515245u + 12345u;
			/* bias towards the entries: header flips fail at once */
			tmp[LP_HDR_SIZE + (r >> 8) % (n - LP_HDR_SIZE)] ^= (uint8_t)(1u << ((r >> 4) % 8));
		}
		accepted += (unsigned)try_candidate(tmp, n);
	}
	/* some flips (inside string bytes) keep the listpack valid: both outcomes were seen */
	assert_true(accepted > 0 && accepted < 6000);
}

/* lp_find's inline walk (listpack.c) gives lp_eq's answer on every encoding: each entry of a
 * listpack of every int width and every string length class is found by its text (the first
 * equal one), with skip 1 only at even indexes, and strings that differ in their first or last
 * byte only, or in length, are not confused. */
static void test_find_agrees_with_eq_on_every_encoding(void **state)
{
	static const long long ints[] = { 0, 127, -1, 4095, -4096, 32767, -32768, 8388607,
		-8388608, 2147483647, -2147483648LL, 9223372036854775807LL };
	/* 125/126: a 12-bit string's entry of 127/128 bytes (backlen 1/2); 16377-16379: a 32-bit
	 * string's entry of 16382-16384 bytes (backlen 2/3) */
	static const size_t lens[] = { 0, 1, 2, 13, 63, 64, 125, 126, 200, 4095, 4096, 5000, 16377, 16378, 16379 };
	lp_buf b = { 0 };
	char *big = malloc(17000), buf[LP_INTBUF_SIZE];
	const char *ps[64];
	size_t pl[64], n = 0;
	(void)state;

	assert_non_null(big);
	memset(big, 'a', 17000);
	assert_int_equal(lp_buf_init(&b), 0);
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		assert_int_equal(lp_append_int(&b, ints[i]), 0);
		ps[n] = NULL;
		pl[n++] = (size_t)ints[i];
	}
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		big[lens[i] ? lens[i] - 1 : 0] = 'z';   /* "a...az": each differs in its last byte */
		assert_int_equal(lp_append(&b, big, lens[i]), 0);
		big[lens[i] ? lens[i] - 1 : 0] = 'a';
		ps[n] = big;
		pl[n++] = lens[i];
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *want = lp_seek(b.p, (long)i), *got;
		const char *t = ps[i];
		size_t tl = pl[i];
		char last;
		if (!t) {
			lp_val v;
			lp_get(want, &v);
			t = lp_val_str(&v, buf, &tl);
		} else {
			last = tl ? big[tl - 1] : 0;
			if (tl)
				big[tl - 1] = 'z';
			got = lp_find(b.p, lp_first(b.p), t, tl, 0);
			assert_ptr_equal(got, want);
			assert_ptr_equal(lp_find(b.p, lp_first(b.p), t, tl, 1), i % 2 ? NULL : want);
			if (tl > 1) {
				big[0] = 'b';   /* the first byte differs */
				assert_null(lp_find(b.p, lp_first(b.p), t, tl, 0));
				big[0] = 'a';
			}
			if (tl)
				big[tl - 1] = last;
			assert_true(tl == 0 || lp_find(b.p, lp_first(b.p), t, tl, 0) != want);
			continue;
		}
		assert_true(lp_eq(want, t, tl));
		assert_ptr_equal(lp_find(b.p, lp_first(b.p), t, tl, 0), want);
		assert_ptr_equal(lp_find(b.p, lp_first(b.p), t, tl, 1), i % 2 ? NULL : want);
	}
	assert_null(lp_find(b.p, lp_first(b.p), "128", 3, 0));
	assert_null(lp_find(b.p, NULL, "0", 1, 0));
	free(big);
	lp_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_listpack_is_seven_bytes_with_no_entries),
		cmocka_unit_test(test_ints_at_every_width_edge_take_the_narrowest_encoding),
		cmocka_unit_test(test_rpush_of_every_edge_matches_redis_bytes),
		cmocka_unit_test(test_strings_of_4095_and_4096_bytes_match_redis_bytes),
		cmocka_unit_test(test_backlen_of_a_16383_byte_entry_takes_three_bytes_as_in_redis),
		cmocka_unit_test(test_hash_and_lpush_match_redis_bytes),
		cmocka_unit_test(test_zset_scores_are_stored_as_redis_stores_them),
		cmocka_unit_test(test_list_edits_in_the_middle_and_ends_match_redis_bytes),
		cmocka_unit_test(test_hash_edits_match_redis_bytes),
		cmocka_unit_test(test_iteration_both_ways_and_seek_with_negative_indexes_agree),
		cmocka_unit_test(test_find_matches_ints_by_their_canonical_text_only),
		cmocka_unit_test(test_a_string_from_inside_the_buffer_survives_its_move),
		cmocka_unit_test(test_random_edits_agree_with_a_model),
		cmocka_unit_test(test_count_past_65534_reads_unknown_and_is_counted_by_walking),
		cmocka_unit_test(test_validate_rejects_bad_headers_counts_and_callback_refusals),
		cmocka_unit_test(test_every_truncation_is_rejected_even_with_a_fixed_header),
		cmocka_unit_test(test_random_byte_flips_never_read_out_of_bounds),
		cmocka_unit_test(test_find_agrees_with_eq_on_every_encoding),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
