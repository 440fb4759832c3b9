/*
 * test_bucket.c - coll/bucket.c and coll/latch.c: linear hashing's bucket choice and splits, the
 * routing of a listpack into buckets and the assembling back, checked against the members put in;
 * the latches' shared and exclusive states.
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
#include "coll/hash.h"
#include "coll/latch.h"

#define N 2000

static void build_hash(lp_buf *b, int n)
{
	char f[32], v[32];
	assert_int_equal(lp_buf_init(b), 0);
	for (int i = 0; i < n; i++) {
		int fl = snprintf(f, sizeof(f), i % 3 ? "field:%d" : "%d", i);
		int vl = snprintf(v, sizeof(v), "v%d", i * 7);
		assert_int_equal(hash_lp_set(b, f, (size_t)fl, v, (size_t)vl), 1);
	}
}

static void test_head_round_trips_and_sizes_give_the_bucket_count(void **st)
{
	(void)st;
	coll_head h = { COLL_HASH, CENC_HASHTABLE, 0xabcdef0123456789ull, 20000, 123456, 0, 0 };
	coll_head g;
	uint8_t buf[COLL_LARGE_HDR];
	for (uint64_t n = 1; n < 5000; n += 37) {
		coll_head_size(&h, n);
		assert_int_equal(coll_bucket_count(&h), n);
		coll_large_write(buf, &h);
		assert_true(coll_is_large(buf, sizeof(buf)));
		assert_true(coll_large_parse(buf, sizeof(buf), &g));
		assert_true(g.type == h.type && g.enc == h.enc && g.cid == h.cid && g.count == h.count &&
		            g.mbytes == h.mbytes && g.level == h.level && g.split == h.split);
		coll_view v;
		assert_false(coll_parse(buf, sizeof(buf), &v));
	}
	assert_int_equal(coll_initial_buckets(10000, 256), 79);
	assert_int_equal(coll_initial_buckets(0, 256), 1);
}

static void test_part_keys_parse_back(void **st)
{
	(void)st;
	uint8_t k[COLL_BUCKET_KEY_BYTES];
	uint64_t cid, b;
	int kind;
	coll_bucket_key(k, 0x0102030405060708ull, 77);
	assert_int_equal(k[0], 1);
	assert_int_equal(k[8], 'b');
	assert_true(coll_part_key_parse(k, sizeof(k), &cid, &kind, &b));
	assert_true(cid == 0x0102030405060708ull && kind == 'b' && b == 77);
	coll_registry_key(k, 9);
	assert_true(coll_part_key_parse(k, COLL_REGISTRY_KEY_BYTES, &cid, &kind, &b));
	assert_true(cid == 9 && kind == 'R');
	assert_false(coll_part_key_parse(k, 5, &cid, &kind, &b));
}

/* Every pair lands in the bucket coll_bucket_of names, and assembling gives the pairs back. */
static void check_split(const lp_buf *hash, const coll_head *h)
{
	uint64_t nb = coll_bucket_count(h);
	size_t *offs = calloc(nb + 1, sizeof(size_t));
	lp_buf out, asm_;
	assert_int_equal(lp_buf_init(&out), 0);
	assert_int_equal(lp_buf_init(&asm_), 0);
	assert_int_equal(coll_lp_split(hash->p, 2, h, &out, offs), 0);
	assert_int_equal(coll_lp_asm_begin(&asm_), 0);
	uint32_t total = 0;
	for (uint64_t j = 0; j < nb; j++) {
		const uint8_t *lp = out.p + offs[j];
		assert_int_equal(lp_bytes(lp), offs[j + 1] - offs[j]);
		assert_true(lp_validate(lp, offs[j + 1] - offs[j], true, NULL, NULL));
		for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p)))
			assert_int_equal(coll_bucket_of(h, coll_entry_hash(h->cid, p)), j);
		total += lp_count(lp);
		assert_int_equal(coll_lp_asm_add(&asm_, lp, offs[j + 1] - offs[j]), 0);
	}
	coll_lp_asm_end(&asm_, total);
	assert_int_equal(total, lp_count(hash->p));
	assert_true(lp_validate(asm_.p, asm_.len, true, NULL, NULL));
	assert_int_equal(asm_.len, hash->len);
	for (const uint8_t *p = lp_first(hash->p); p; p = lp_next(hash->p, lp_next(hash->p, p))) {
		char ib[LP_INTBUF_SIZE];
		size_t len;
		const char *s = lp_entry_str(p, ib, &len);
		const uint8_t *v = hash_lp_value(asm_.p, s, len);
		assert_non_null(v);
		assert_int_equal(lp_entry_size(v), lp_entry_size(lp_next(hash->p, p)));
		assert_memory_equal(v, lp_next(hash->p, p), lp_entry_size(v));
	}
	lp_buf_free(&out);
	lp_buf_free(&asm_);
	free(offs);
}

static void test_split_routes_every_pair_to_its_bucket_and_assembles_back(void **st)
{
	(void)st;
	lp_buf hash;
	build_hash(&hash, N);
	coll_head h = { COLL_HASH, CENC_HASHTABLE, 42, N, 0, 0, 0 };
	for (uint64_t nb = 1; nb < 300; nb = nb * 2 + 1) {
		coll_head_size(&h, nb);
		check_split(&hash, &h);
	}
	lp_buf_free(&hash);
}

/* Splitting bucket `split` moves exactly the pairs that the advanced head puts in the new bucket:
 * a run of splits from one bucket keeps every pair where coll_bucket_of looks for it. */
static void test_bucket_splits_keep_every_member_findable(void **st)
{
	(void)st;
	lp_buf hash, out, two;
	build_hash(&hash, 600);
	coll_head h = { COLL_HASH, CENC_HASHTABLE, 7, 600, 0, 0, 0 };
	uint64_t nb = 1;
	assert_int_equal(lp_buf_init(&out), 0);
	assert_int_equal(lp_buf_init(&two), 0);
	lp_buf *bk = calloc(64, sizeof(lp_buf));
	assert_int_equal(lp_buf_from(&bk[0], hash.p, hash.len), 0);
	while (nb < 40) {
		size_t offs[3];
		uint64_t s = h.split, dst = h.split + (1ull << h.level);
		assert_int_equal(coll_bucket_split(bk[s].p, 2, &h, &two, offs), 0);
		lp_buf_free(&bk[s]);   /* lp_buf_from starts a new buffer */
		lp_buf_free(&bk[dst]);
		assert_int_equal(lp_buf_from(&bk[s], two.p + offs[0], offs[1] - offs[0]), 0);
		assert_int_equal(lp_buf_from(&bk[dst], two.p + offs[1], offs[2] - offs[1]), 0);
		coll_head_split_advance(&h);
		nb++;
		assert_int_equal(coll_bucket_count(&h), nb);
		uint32_t total = 0;
		for (uint64_t j = 0; j < nb; j++) {
			for (const uint8_t *p = lp_first(bk[j].p); p; p = lp_next(bk[j].p, lp_next(bk[j].p, p)))
				assert_int_equal(coll_bucket_of(&h, coll_entry_hash(h.cid, p)), j);
			total += lp_count(bk[j].p);
		}
		assert_int_equal(total, 1200);
	}
	assert_int_equal(h.level, 5);
	assert_int_equal(h.split, 8);
	for (int j = 0; j < 64; j++)
		lp_buf_free(&bk[j]);
	free(bk);
	lp_buf_free(&two);
	lp_buf_free(&out);
	lp_buf_free(&hash);
}

static void test_latch_counts_readers_and_excludes_a_writer(void **st)
{
	(void)st;
	uint64_t h = 0x123456789abcdefull;
	coll_latch_shared(h);
	coll_latch_shared(h);
	assert_int_equal(coll_latch_word(h), 2);
	coll_latch_shared_release(h);
	coll_latch_shared_release(h);
	assert_int_equal(coll_latch_word(h), 0);
	coll_latch_excl(h);
	assert_int_equal(coll_latch_word(h), 0x80000000u);
	coll_latch_excl_release(h);
	assert_int_equal(coll_latch_word(h), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_round_trips_and_sizes_give_the_bucket_count),
		cmocka_unit_test(test_part_keys_parse_back),
		cmocka_unit_test(test_split_routes_every_pair_to_its_bucket_and_assembles_back),
		cmocka_unit_test(test_bucket_splits_keep_every_member_findable),
		cmocka_unit_test(test_latch_counts_readers_and_excludes_a_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
