/*
 * test_deque.c - coll/deque.c: a large list's head round trips and its consistency checks, the
 * cut of a window at node boundaries (checked entry by entry against the window), the choice of
 * elements per node, node keys and the liveness rule of node parts, the edits within an end node,
 * out-of-line element references (encoding, keys, liveness, an entry replaced).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/bucket.h"
#include "coll/deque.h"

static void build(lp_buf *b, uint64_t from, uint64_t n)
{
	char s[32];
	assert_int_equal(lp_buf_init(b), 0);
	for (uint64_t i = from; i < from + n; i++) {
		int l = snprintf(s, sizeof(s), i % 3 ? "el:%llu" : "%llu", (unsigned long long)i);
		assert_int_equal(lp_append(b, s, (size_t)l), 0);
	}
}

static bool entry_is(const uint8_t *p, uint64_t i)
{
	char s[32], buf[LP_INTBUF_SIZE];
	size_t len;
	int l = snprintf(s, sizeof(s), i % 3 ? "el:%llu" : "%llu", (unsigned long long)i);
	const char *e = lp_entry_str(p, buf, &len);
	return len == (size_t)l && memcmp(e, s, len) == 0;
}

static void test_split_cuts_at_node_boundaries_with_exact_counts(void **st)
{
	(void)st;
	lp_buf w, out = { 0 };
	size_t offs[64];
	for (uint32_t c = 1; c <= 17; c += 4) {
		for (uint64_t wlo = 1000; wlo < 1000 + c + 2; wlo++) {
			uint64_t n = 5 * c + 3;
			build(&w, 0, n);
			long nn = dq_split(w.p, wlo, c, &out, offs);
			assert_int_equal(nn, (long)dq_split_nodes(wlo, n, c));
			uint64_t i = 0, pos = wlo;
			for (long j = 0; j < nn; j++) {
				const uint8_t *lp = out.p + offs[j];
				assert_int_equal(lp_bytes(lp), offs[j + 1] - offs[j]);
				/* every node but the first and last is full, and starts at a boundary */
				uint64_t want = c - pos % c < wlo + n - pos ? c - pos % c : wlo + n - pos;
				assert_int_equal(lp_count(lp), want);
				assert_int_equal(pos / c, wlo / c + (uint64_t)j);
				for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, p), i++, pos++)
					assert_true(entry_is(p, i));
			}
			assert_int_equal(i, n);
			lp_buf_free(&w);
		}
	}
	lp_buf_free(&out);
}

static void test_head_round_trips_and_rejects_inconsistent_ones(void **st)
{
	(void)st;
	const uint32_t c = 8;
	uint64_t lo = (DQ_POS_START / c) * c + 3, hi = lo + 5 + 3 * c + 2;   /* left 5, 3 full, right 2 */
	lp_buf l, r;
	build(&l, 0, 5);
	build(&r, 0, 2);
	coll_head h = { COLL_LIST, CENC_QUICKLIST, 0x1234, 0, 999, 7, 7 };
	uint8_t v[512];
	size_t len = dq_write(v, &h, lo, hi, c, l.p, l.len, r.p, r.len);
	assert_int_equal(len, COLL_HDR + dq_head_used(l.len, r.len));
	coll_head g;
	dq_head d;
	assert_true(coll_is_large(v, len));
	assert_true(coll_large_parse(v, len, &g));
	assert_int_equal(g.type, COLL_LIST);
	assert_int_equal(g.count, hi - lo);
	assert_int_equal(g.mbytes, 999);
	assert_int_equal(g.level, 0);
	assert_true(dq_parse(v, len, &d));
	assert_int_equal(d.lo, lo);
	assert_int_equal(d.hi, hi);
	assert_int_equal(d.c, c);
	assert_memory_equal(d.left, l.p, l.len);
	assert_memory_equal(d.right, r.p, r.len);
	/* liveness: strictly between the end nodes */
	assert_false(dq_part_live(v, len, lo / c));
	assert_true(dq_part_live(v, len, lo / c + 1));
	assert_true(dq_part_live(v, len, lo / c + 3));
	assert_false(dq_part_live(v, len, lo / c + 4));
	assert_false(dq_part_live(v, len, lo / c + 100));
	assert_false(dq_part_live(v, len, 1));
	/* a wrong count in an end node, a short value, a hi that disagrees */
	assert_false(dq_parse(v, len - 1, &d));
	len = dq_write(v, &h, lo + 1, hi, c, l.p, l.len, r.p, r.len);
	assert_false(dq_parse(v, len, &d));
	len = dq_write(v, &h, lo, hi + 1, c, l.p, l.len, r.p, r.len);
	assert_false(dq_parse(v, len, &d));
	/* one node: no right listpack */
	len = dq_write(v, &h, lo, lo + 5, c, l.p, l.len, NULL, 0);
	assert_true(dq_parse(v, len, &d));
	assert_null(d.right);
	len = dq_write(v, &h, lo, lo + 5, c, l.p, l.len, r.p, r.len);   /* a right node in a one-node list */
	assert_false(dq_parse(v, len, &d));
	lp_buf_free(&l);
	lp_buf_free(&r);
}

static void test_node_keys_parse_as_parts_and_c_is_bounded(void **st)
{
	(void)st;
	uint8_t k[DQ_NODE_KEY_BYTES];
	uint64_t cid, n;
	int kind;
	dq_node_key(k, 0xfeedull, 0x0102030405060708ull);
	assert_true(coll_part_key_parse(k, sizeof(k), &cid, &kind, &n));
	assert_int_equal(cid, 0xfeed);
	assert_int_equal(kind, COLL_KIND_NODE);
	assert_int_equal(n, 0x0102030405060708ull);
	assert_int_equal(dq_choose_c(100000, 10000, 4096), 372 > DQ_C_MAX ? DQ_C_MAX : 372);
	assert_int_equal(dq_choose_c(1000000, 100, 4096), 1);
	assert_int_equal(dq_choose_c(4096 * 10, 320, 4096), 31);
	assert_true(dq_choose_c(0, 0, 4096) >= 1);
}

/* A reference is a valid listpack entry (lp_next walks over it, it reads as a 16-byte string)
 * that no canonical encoding gives; element keys parse as 'e' parts; an element part lives in
 * [lo, hi); dq_replace swaps one entry, count kept. */
static void test_element_references_keys_liveness_and_replace(void **st)
{
	(void)st;
	lp_buf b, out;
	uint8_t ref[DQ_REF_ENTRY_BYTES], k[DQ_NODE_KEY_BYTES], canon[32], h[512];
	uint64_t pos, len, cid, n;
	int kind;
	assert_int_equal(dq_ref_encode(ref, 0x4000000000000123ull, 3000000), DQ_REF_ENTRY_BYTES);
	assert_true(dq_is_ref(ref));
	assert_int_equal(lp_entry_size(ref), DQ_REF_ENTRY_BYTES);
	dq_ref_parse(ref, &pos, &len);
	assert_int_equal(pos, 0x4000000000000123ull);
	assert_int_equal(len, 3000000);
	size_t cl = lp_entry_encode(canon, "0123456789abcdef", 16);
	assert_false(dq_is_ref(canon));
	assert_int_equal(cl, 18);
	dq_elem_key(k, 0xbeef, 77);
	assert_true(coll_part_key_parse(k, sizeof(k), &cid, &kind, &n));
	assert_int_equal(kind, COLL_KIND_ELEM);
	assert_int_equal(cid, 0xbeef);
	assert_int_equal(n, 77);
	/* a one-node head over [100, 110) */
	build(&b, 100, 10);
	coll_head hd = { COLL_LIST, CENC_QUICKLIST, 0xbeef, 0, 0, 0, 0 };
	size_t hl = dq_write(h, &hd, 100, 110, 16, b.p, b.len, NULL, 0);
	assert_true(dq_elem_live(h, hl, 100) && dq_elem_live(h, hl, 109));
	assert_false(dq_elem_live(h, hl, 99) || dq_elem_live(h, hl, 110));
	/* replace entry 4 by the reference, then back */
	const uint8_t *at = dq_skip(b.p, lp_first(b.p), 4);
	assert_int_equal(lp_buf_init(&out), 0);
	assert_int_equal(lp_buf_reserve(&out, b.len + sizeof(ref)), 0);
	out.len = dq_replace(out.p, b.p, at, ref, sizeof(ref));
	assert_int_equal(lp_bytes(out.p), out.len);
	assert_int_equal(lp_count(out.p), 10);
	const uint8_t *p = lp_first(out.p);
	for (uint64_t i = 0; i < 10; i++, p = lp_next(out.p, p))
		assert_true(i == 4 ? dq_is_ref(p) : entry_is(p, 100 + i));
	assert_null(p);
	lp_buf_free(&out);
	lp_buf_free(&b);
}

/* Pushes and pops within an end node (dq_end_*), applied in place and into a new buffer, give the
 * head that dq_write would build from the edited nodes; ones that would leave the node say 1. */
static void test_end_edits_patch_the_head_in_place_and_copied(void **st)
{
	(void)st;
	const uint32_t c = 8;
	uint64_t lo = (DQ_POS_START / c) * c + 3, hi = lo + 5 + c + 2;   /* left 5, 1 full, right 2 */
	lp_buf l, r, want_l, want_r;
	build(&l, 10, 5);
	build(&r, 30, 2);
	coll_head h = { COLL_LIST, CENC_QUICKLIST, 0x99, 0, 0, 0, 0 };
	uint8_t v[1024], cp[1024], want[1024], ins[64];
	size_t len = dq_write(v, &h, lo, hi, c, l.p, l.len, r.p, r.len), wlen, at = 0;
	dq_head d;
	dq_end_edit e;
	const uint8_t *a, *end;
	assert_true(dq_parse(v, len, &d));
	at += lp_entry_encode(ins + at, "el:8", 4);     /* in list order: LPUSH 9 el:8 */
	at += lp_entry_encode(ins + at, "9", 1);
	assert_int_equal(dq_end_push(v, &d, true, ins, at, 2, &e), 0);
	build(&want_l, 8, 7);
	wlen = dq_write(want, &h, lo - 2, hi, c, want_l.p, want_l.len, r.p, r.len);
	memcpy(cp, v, len);
	dq_end_apply(&e, v, cp + 0, true);              /* in place: cp is the old head */
	assert_int_equal(e.new_end, wlen);
	assert_memory_equal(cp, want, wlen);
	memset(cp, 0xee, sizeof(cp));
	dq_end_apply(&e, v, cp, false);
	assert_memory_equal(cp, want, wlen);
	assert_int_equal(dq_end_push(v, &d, true, ins, at, 4, &e), 1);   /* lo % c is 3: 4 do not fit */
	/* RPUSH of 6 fills the right node (2 + 6 = 8); 7 would not fit */
	at = 0;
	for (int i = 32; i < 38; i++) {
		char sb[16];
		int n = snprintf(sb, sizeof(sb), i % 3 ? "el:%d" : "%d", i);
		at += lp_entry_encode(ins + at, sb, (size_t)n);
	}
	assert_int_equal(dq_end_push(v, &d, false, ins, at, 7, &e), 1);
	assert_int_equal(dq_end_push(v, &d, false, ins, at, 6, &e), 0);
	build(&want_r, 30, 8);
	wlen = dq_write(want, &h, lo, hi + 6, c, l.p, l.len, want_r.p, want_r.len);
	memcpy(cp, v, len);
	dq_end_apply(&e, cp, cp, true);
	assert_memory_equal(cp, want, wlen);
	/* LPOP 3 of the left node's 5; RPOP 1 of the right's 2; emptying a node says 1 */
	assert_int_equal(dq_end_pop(v, &d, true, 3, &e, &a, &end), 0);
	lp_buf_free(&want_l);
	build(&want_l, 13, 2);
	wlen = dq_write(want, &h, lo + 3, hi, c, want_l.p, want_l.len, r.p, r.len);
	assert_true(entry_is(a, 10));
	memcpy(cp, v, len);
	dq_end_apply(&e, cp, cp, true);
	assert_memory_equal(cp, want, wlen);
	assert_int_equal(dq_end_pop(v, &d, false, 1, &e, &a, &end), 0);
	assert_true(entry_is(a, 31));
	lp_buf_free(&want_r);
	build(&want_r, 30, 1);
	wlen = dq_write(want, &h, lo, hi - 1, c, l.p, l.len, want_r.p, want_r.len);
	dq_end_apply(&e, v, cp, false);
	assert_memory_equal(cp, want, wlen);
	assert_int_equal(dq_end_pop(v, &d, false, 2, &e, &a, &end), 1);
	assert_int_equal(dq_end_pop(v, &d, true, 5, &e, &a, &end), 1);
	lp_buf_free(&l);
	lp_buf_free(&r);
	lp_buf_free(&want_l);
	lp_buf_free(&want_r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_cuts_at_node_boundaries_with_exact_counts),
		cmocka_unit_test(test_head_round_trips_and_rejects_inconsistent_ones),
		cmocka_unit_test(test_node_keys_parse_as_parts_and_c_is_bounded),
		cmocka_unit_test(test_end_edits_patch_the_head_in_place_and_copied),
		cmocka_unit_test(test_element_references_keys_liveness_and_replace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
