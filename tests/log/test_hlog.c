/*
 * test_hlog.c - the hybrid log on one thread: addresses and page turns, LOG_FULL, record sizes
 * (records larger than a page span whole pages), in-place versus read-copy-update, deletes,
 * expiry, chains of keys sharing an index entry, scan, and FLUSHALL reusing frames.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "log_test.h"

#define KIB 1024ULL

/* A store of the test's geometry and a protected session on it, opened by the test (fixture_open)
 * and closed by the teardown (fixture_teardown), also after a failed assertion. */
typedef struct fixture {
	hlog *l;
	hlog_session *s;
} fixture;

static fixture *fixture_open(void **state, uint64_t memory, uint64_t page, int mutable_percent)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	*state = f;
	hlog_config c = log_test_config(memory, page, mutable_percent);
	assert_int_equal(hlog_open(&f->l, &c), 0);
	assert_int_equal(hlog_session_open(f->l, &f->s), 0);
	hlog_session_protect(f->s);
	hlog_session_set_now(f->s, 1000000);
	return f;
}

static int fixture_teardown(void **state)
{
	fixture *f = *state;
	if (!f)
		return 0;
	if (f->s) {
		hlog_session_unprotect(f->s);
		hlog_session_close(f->s);
	}
	hlog_close(f->l);
	free(f);
	return 0;
}

static void pattern(uint8_t *p, size_t len, int seed)
{
	for (size_t j = 0; j < len; j++)
		p[j] = (uint8_t)(seed * 31 + (int)j * 7 + 1);
}

/* ---------------- geometry ---------------- */

static void test_open_rejects_bad_geometry(void **state)
{
	(void)state;
	hlog *l;
	hlog_config c = log_test_config(64 * KIB, 4 * KIB, 90);
	c.page_bytes = 6 * KIB;
	assert_int_equal(hlog_open(&l, &c), -EINVAL);
	c.page_bytes = 2 * KIB;
	assert_int_equal(hlog_open(&l, &c), -EINVAL);
	c = log_test_config(4 * KIB, 4 * KIB, 90);   /* one page: no room to turn */
	assert_int_equal(hlog_open(&l, &c), -EINVAL);
	c = log_test_config(64 * KIB, 4 * KIB, 101);
	assert_int_equal(hlog_open(&l, &c), -EINVAL);
	c = log_test_config(64 * KIB, 4 * KIB, 90);
	c.max_sessions = 0;
	assert_int_equal(hlog_open(&l, &c), -EINVAL);
}

static void test_open_reports_geometry_and_initial_markers(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_info i = info_of(f->l);
	assert_int_equal(i.page_bytes, 4 * KIB);
	assert_int_equal(i.max_pages, 16);
	assert_int_equal(i.memory_bytes, 64 * KIB);
	assert_int_equal(i.allocated_pages, 1);
	assert_int_equal(i.begin, HLOG_FIRST_ADDRESS);
	assert_int_equal(i.tail, HLOG_FIRST_ADDRESS);
	assert_int_equal(i.keys, 0);
	/* A record may span pages: the limit is the memory region less one page. */
	assert_int_equal(hlog_max_record_payload(f->l), 15 * 4 * KIB - 24);
	assert_true(hlog_scan_cursor_end(f->l) >= 64);
}

typedef struct walk {
	uint64_t records, valid, sealed_valid, garbage, spanning, page_bytes, last_addr;
	uint64_t pages, misplaced;   /* pages seen; pages whose first record is not at their start */
	bool ordered;
} walk;

static void walk_fn(void *ctx, uint64_t addr, const log_rec *r, uint64_t info)
{
	walk *w = ctx;
	uint64_t size = rec_size(r, info);
	w->records++;
	if (info & REC_VALID)
		w->valid++;
	if ((info & REC_VALID) && (info & REC_SEALED))
		w->sealed_valid++;
	if (!(info & REC_VALID))
		w->garbage++;
	if (addr / w->page_bytes != (addr + size - 1) / w->page_bytes)
		w->spanning++;
	if (addr < w->last_addr || addr % 8 != 0)
		w->ordered = false;
	if (w->records == 1 || addr / w->page_bytes != w->last_addr / w->page_bytes) {
		/* A page turn leaves the next record at offset 0; page 0 starts at 64. */
		w->pages++;
		if (addr % w->page_bytes != (addr < w->page_bytes ? HLOG_FIRST_ADDRESS : 0))
			w->misplaced++;
	}
	w->last_addr = addr;
}

static walk walk_log(hlog *l)
{
	walk w = { .page_bytes = l->page_bytes, .ordered = true };
	hlog_records_visit(l, walk_fn, &w);
	return w;
}

static void test_many_records_turn_pages_and_never_span_them(void **state)
{
	fixture *f = fixture_open(state, 256 * KIB, 4 * KIB, 90);
	uint8_t val[700];
	int n = 0;
	uint64_t bytes = 0;
	/* Sizes that do not divide the page, so that page ends are left partly empty. */
	for (n = 0; bytes < 200 * KIB; n++) {
		test_key t;
		test_key_make(&t, "page", n);
		size_t len = (size_t)(n * 37) % sizeof(val);
		pattern(val, len, n);
		assert_int_equal(hlog_upsert(f->s, &t.k, val, len, HLOG_NO_EXPIRY), HLOG_OK);
		bytes += rec_size_of(t.k.len, len, false);
	}
	hlog_info i = info_of(f->l);
	assert_true(i.tail >> 12 >= 49);             /* at least 49 page turns */
	assert_true(i.tail >= HLOG_FIRST_ADDRESS + bytes);
	assert_true(i.allocated_pages >= 50);
	assert_true(i.allocated_pages <= i.max_pages);
	assert_int_equal(i.keys, (uint64_t)n);
	assert_int_equal(i.appends, (uint64_t)n);
	walk w = walk_log(f->l);
	assert_int_equal(w.records, (uint64_t)n);
	assert_int_equal(w.valid, (uint64_t)n);
	assert_int_equal(w.spanning, 0);
	assert_true(w.ordered);
	assert_int_equal(w.pages, (i.tail >> 12) + 1);
	assert_int_equal(w.misplaced, 0);
	for (int k = 0; k < n; k++) {
		test_key t;
		test_key_make(&t, "page", k);
		size_t len = (size_t)(k * 37) % sizeof(val);
		pattern(val, len, k);
		assert_true(read_equals(f->s, &t.k, val, len));
	}
}

static void test_read_of_missing_key_is_notfound(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	test_key t;
	read_buf b = { .calls = 0 };
	test_key_make(&t, "none", 1);
	assert_int_equal(hlog_read(f->s, &t.k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(b.calls, 0);
	assert_int_equal(hlog_delete(f->s, &t.k), HLOG_NOTFOUND);
	hlog_key empty;
	hlog_key_init(&empty, "", 0);
	assert_int_equal(hlog_upsert(f->s, &empty, "v", 1, HLOG_NO_EXPIRY), HLOG_OK);
	assert_true(read_equals(f->s, &empty, "v", 1));
	assert_int_equal(hlog_read(f->s, &t.k, read_copy_fn, &b), HLOG_NOTFOUND);
}

static void test_log_full_keeps_every_earlier_key_readable(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	uint8_t val[100];
	int n, rc = 0;
	for (n = 0; n < 10000; n++) {
		test_key t;
		test_key_make(&t, "full", n);
		pattern(val, sizeof(val), n);
		rc = hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY);
		if (rc != HLOG_OK)
			break;
	}
	assert_int_equal(rc, SPW_E_LOG_FULL);
	assert_true(n > 400);   /* 16 pages of about 30 records */
	/* Still full, and nothing was lost. */
	test_key t;
	test_key_make(&t, "full", n);
	assert_int_equal(hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), SPW_E_LOG_FULL);
	hlog_info i = info_of(f->l);
	assert_int_equal(i.keys, (uint64_t)n);
	assert_int_equal(i.log_full_errors, 2);
	assert_int_equal(i.allocated_pages, 16);
	assert_true(i.tail <= 64 * KIB);
	for (int k = 0; k < n; k++) {
		test_key_make(&t, "full", k);
		pattern(val, sizeof(val), k);
		assert_true(read_equals(f->s, &t.k, val, sizeof(val)));
	}
	/* An in-place update still works when nothing needs to be appended. */
	test_key_make(&t, "full", n - 1);
	memset(val, 0xAB, sizeof(val));
	assert_int_equal(hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), HLOG_OK);
	assert_true(read_equals(f->s, &t.k, val, sizeof(val)));
}

/* Read k into a heap buffer and compare with want (values larger than read_buf holds). */
typedef struct big_read {
	const uint8_t *want;
	size_t len;
	int calls;
	bool equal;
} big_read;

static void big_read_fn(void *ctx, const hlog_value *v)
{
	big_read *b = ctx;
	b->calls++;
	b->equal = v->len == b->len && memcmp(v->ptr, b->want, b->len) == 0;
}

static bool read_big_equals(hlog_session *s, const hlog_key *k, const uint8_t *want, size_t len)
{
	big_read b = { want, len, 0, false };
	return hlog_read(s, k, big_read_fn, &b) == HLOG_OK && b.calls == 1 && b.equal;
}

static void test_record_larger_than_the_memory_region_is_too_big(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	uint64_t max = hlog_max_record_payload(f->l);
	static uint8_t val[64 * KIB];
	hlog_key k;
	hlog_key_init(&k, "big", 3);
	assert_int_equal(hlog_upsert(f->s, &k, val, max - 3 + 1, 5000000), SPW_E_TOO_BIG);
	assert_int_equal(hlog_upsert(f->s, &k, val, 64 * KIB, HLOG_NO_EXPIRY), SPW_E_TOO_BIG);
	/* Exactly the reported maximum fits, with an expiry, even after a partly filled page: it takes
	 * 15 whole pages after the first. */
	hlog_key small;
	hlog_key_init(&small, "small", 5);
	assert_int_equal(hlog_upsert(f->s, &small, val, 100, HLOG_NO_EXPIRY), HLOG_OK);
	pattern(val, max - 3, 9);
	assert_int_equal(hlog_upsert(f->s, &k, val, max - 3, 5000000), HLOG_OK);
	assert_true(read_big_equals(f->s, &k, val, max - 3));
	hlog_info i = info_of(f->l);
	assert_int_equal(i.keys, 2);
	assert_int_equal(i.allocated_pages, 16);
	walk w = walk_log(f->l);
	assert_int_equal(w.records, 2);
	assert_int_equal(w.spanning, 1);
	/* Memory is now full: without a device that is LOG_FULL, and nothing was lost. */
	assert_int_equal(hlog_upsert(f->s, &small, val, 200, HLOG_NO_EXPIRY), SPW_E_LOG_FULL);
	assert_true(read_big_equals(f->s, &k, val, max - 3));
}

static void test_record_larger_than_a_page_spans_whole_pages_and_the_tail_continues_after_it(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	static uint8_t big[3][10000];
	uint8_t val[300];
	int n = 0;
	for (int round = 0; round < 3; round++) {
		for (int j = 0; j < 5; j++, n++) {
			test_key t;
			test_key_make(&t, "around", n);
			pattern(val, sizeof(val), n);
			assert_int_equal(hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), HLOG_OK);
		}
		test_key t;
		test_key_make(&t, "spans", round);
		pattern(big[round], sizeof(big[round]), 100 + round);
		assert_int_equal(hlog_upsert(f->s, &t.k, big[round], sizeof(big[round]), HLOG_NO_EXPIRY), HLOG_OK);
	}
	/* A spanning record starts a page; the next record follows it inside its last page. */
	walk w = walk_log(f->l);
	assert_int_equal(w.records, (uint64_t)n + 3);
	assert_int_equal(w.spanning, 3);
	assert_true(w.ordered);
	hlog_info i = info_of(f->l);
	assert_true(i.tail < 14 * 4 * KIB);   /* 3 x 3 pages + the small records: no page wasted */
	for (int round = 0; round < 3; round++) {
		test_key t;
		test_key_make(&t, "spans", round);
		assert_true(read_big_equals(f->s, &t.k, big[round], sizeof(big[round])));
	}
	for (int k = 0; k < n; k++) {
		test_key t;
		test_key_make(&t, "around", k);
		pattern(val, sizeof(val), k);
		assert_true(read_equals(f->s, &t.k, val, sizeof(val)));
	}
	/* Updating a spanning record in place (mutable, same size) and by RCU (it grows). */
	test_key t;
	test_key_make(&t, "spans", 2);
	memset(big[2], 'x', sizeof(big[2]));
	assert_int_equal(hlog_upsert(f->s, &t.k, big[2], sizeof(big[2]), HLOG_NO_EXPIRY), HLOG_OK);
	assert_true(read_big_equals(f->s, &t.k, big[2], sizeof(big[2])));
	assert_int_equal(hlog_upsert(f->s, &t.k, big[1], sizeof(big[1]) - 1000, HLOG_NO_EXPIRY), HLOG_OK);
	assert_true(read_big_equals(f->s, &t.k, big[1], sizeof(big[1]) - 1000));
	assert_int_equal(hlog_key_count(f->l), (uint64_t)n + 3);
}

/* ---------------- in place versus RCU ---------------- */

static void test_update_is_in_place_while_the_rounded_size_fits_and_copies_when_it_grows(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_key k;
	hlog_key_init(&k, "key", 3);
	/* 16 + 3 + 3 = 22 -> 24 bytes: values of 1..5 bytes share the rounded size. */
	assert_int_equal(hlog_upsert(f->s, &k, "abc", 3, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &k, "abd", 3, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &k, "abcde", 5, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &k, "x", 1, HLOG_NO_EXPIRY), HLOG_OK);
	hlog_info i = info_of(f->l);
	assert_int_equal(i.appends, 1);
	assert_int_equal(i.inplace_updates, 3);
	assert_int_equal(i.rcu_updates, 0);
	assert_true(read_equals(f->s, &k, "x", 1));
	/* Beyond the padding: a new version at the tail, and the old one is sealed. */
	assert_int_equal(hlog_upsert(f->s, &k, "abcdefgh", 8, HLOG_NO_EXPIRY), HLOG_OK);
	i = info_of(f->l);
	assert_int_equal(i.rcu_updates, 1);
	assert_int_equal(i.keys, 1);
	assert_true(read_equals(f->s, &k, "abcdefgh", 8));
	walk w = walk_log(f->l);
	assert_int_equal(w.records, 2);
	assert_int_equal(w.sealed_valid, 1);
	/* Adding an expiry changes the layout: also a copy. */
	assert_int_equal(hlog_upsert(f->s, &k, "abcdefgh", 8, 9000000), HLOG_OK);
	i = info_of(f->l);
	assert_int_equal(i.rcu_updates, 2);
	assert_int_equal(i.expires, 1);
	/* Changing only the expiry time keeps it in place. */
	assert_int_equal(hlog_upsert(f->s, &k, "abcdefgh", 8, 9500000), HLOG_OK);
	i = info_of(f->l);
	assert_int_equal(i.rcu_updates, 2);
	assert_int_equal(i.inplace_updates, 4);
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_OK);
	assert_int_equal(b.expire_ms, 9500000);
}

/* ---------------- record types ---------------- */

static void read_type_fn(void *ctx, const hlog_value *v)
{
	*(int *)ctx = v->rtype;
}

static int type_of(hlog_session *s, const hlog_key *k)
{
	int t = -1;
	assert_int_equal(hlog_read(s, k, read_type_fn, &t), HLOG_OK);
	return t;
}

/* A plan that rewrites the value as it is and sets nothing else: the type must stay (hlog.h). */
static int same_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	(void)ctx;
	out->action = HLOG_RMW_WRITE;
	out->new_len = old ? old->len : 1;
	out->expire_ms = 5000000;
	return 0;
}

static void same_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)ctx;
	if (!in_place)
		memcpy(dst, old ? old->ptr : (const uint8_t *)"x", old ? old->len : 1);
}

static const hlog_rmw_ops same_ops = { same_plan, same_fill };

static void type_scan_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	if (klen == 4 && memcmp(key, "coll", 4) == 0)
		*(int *)ctx = v->rtype;
}

static void fill_to_page(fixture *f, uint64_t page, const char *prefix);

static void test_record_type_is_kept_in_place_by_copies_and_by_plans_that_keep_the_value(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 50);
	hlog_key k;
	hlog_key_init(&k, "coll", 4);
	assert_int_equal(hlog_upsert_typed(f->s, &k, "headval", 7, HLOG_NO_EXPIRY, HLOG_T_HEAD), HLOG_OK);
	assert_int_equal(type_of(f->s, &k), HLOG_T_HEAD);
	/* A plan that does not name a type keeps the old one, also when it adds an expiry (a copy). */
	assert_int_equal(hlog_rmw(f->s, &k, &same_ops, NULL), HLOG_OK);
	assert_int_equal(type_of(f->s, &k), HLOG_T_HEAD);
	/* A plain upsert of the same size writes a string in place: the type changes with it. */
	uint64_t inplace = info_of(f->l).inplace_updates;
	assert_int_equal(hlog_upsert(f->s, &k, "strval!", 7, 5000000), HLOG_OK);
	assert_int_equal(info_of(f->l).inplace_updates, inplace + 1);
	assert_int_equal(type_of(f->s, &k), HLOG_T_STRING);
	assert_int_equal(hlog_upsert_typed(f->s, &k, "headval", 7, 5000000, HLOG_T_HEAD), HLOG_OK);
	assert_int_equal(info_of(f->l).inplace_updates, inplace + 2);
	assert_int_equal(type_of(f->s, &k), HLOG_T_HEAD);
	/* Once read-only, the RMW copies the record to the tail: the copy keeps the type. */
	fill_to_page(f, 12, "fill");   /* 50% of 16 pages mutable: page 0 is read-only now */
	uint64_t rcu = info_of(f->l).rcu_updates;
	assert_int_equal(hlog_rmw(f->s, &k, &same_ops, NULL), HLOG_OK);
	assert_int_equal(info_of(f->l).rcu_updates, rcu + 1);
	assert_int_equal(type_of(f->s, &k), HLOG_T_HEAD);
	/* A scan reports it. */
	int seen = -1;
	uint64_t cur = 0;
	do {
		cur = hlog_scan(f->s, cur, 64, type_scan_fn, &seen);
	} while (cur);
	assert_int_equal(seen, HLOG_T_HEAD);
}

/* Write filler records until the tail is on page `page`. */
static void fill_to_page(fixture *f, uint64_t page, const char *prefix)
{
	uint8_t val[200];
	memset(val, 'f', sizeof(val));
	for (int n = 0; info_of(f->l).tail >> f->l->page_bits < page; n++) {
		test_key t;
		test_key_make(&t, prefix, n);
		assert_int_equal(hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), HLOG_OK);
	}
}

static void test_update_of_a_read_only_record_copies_it_to_the_tail(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 25);   /* 4 mutable pages */
	hlog_key k;
	hlog_key_init(&k, "old", 3);
	assert_int_equal(hlog_upsert(f->s, &k, "v1", 2, HLOG_NO_EXPIRY), HLOG_OK);
	fill_to_page(f, 6, "filler");
	hlog_session_refresh(f->s);   /* lets SafeReadOnly catch up with ReadOnly */
	hlog_info i = info_of(f->l);
	assert_int_equal(i.read_only, 2 * 4 * KIB);
	assert_int_equal(i.safe_read_only, i.read_only);
	assert_int_equal(i.flushed_until, i.safe_read_only);
	uint64_t rcu = i.rcu_updates, inplace = i.inplace_updates;
	assert_int_equal(hlog_upsert(f->s, &k, "v2", 2, HLOG_NO_EXPIRY), HLOG_OK);
	i = info_of(f->l);
	assert_int_equal(i.rcu_updates, rcu + 1);
	assert_int_equal(i.inplace_updates, inplace);
	assert_int_equal(i.retries, 0);
	assert_true(read_equals(f->s, &k, "v2", 2));
	/* The new version is mutable again. */
	assert_int_equal(hlog_upsert(f->s, &k, "v3", 2, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(info_of(f->l).inplace_updates, inplace + 1);
	assert_true(read_equals(f->s, &k, "v3", 2));
}

static void test_update_in_the_fuzzy_region_retries_until_it_is_safe(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 25);
	hlog_key k;
	hlog_key_init(&k, "fuzzy", 5);
	assert_int_equal(incr_by(f->s, &k, 5, HLOG_NO_EXPIRY), HLOG_OK);
	/* No refresh: this thread still holds the epoch from before ReadOnly moved past the key. */
	fill_to_page(f, 6, "filler");
	hlog_info i = info_of(f->l);
	assert_true(i.safe_read_only <= HLOG_FIRST_ADDRESS);
	assert_true(i.read_only > HLOG_FIRST_ADDRESS);
	assert_int_equal(read_counter(f->s, &k), 5);   /* reads lock instead of retrying */
	assert_int_equal(incr_by(f->s, &k, 2, HLOG_NO_EXPIRY), HLOG_OK);
	i = info_of(f->l);
	assert_true(i.retries >= 1);
	assert_int_equal(i.rcu_updates, 1);
	assert_int_equal(i.safe_read_only, i.read_only);
	assert_int_equal(read_counter(f->s, &k), 7);
}

/* ---------------- delete ---------------- */

static void test_delete_then_reinsert_in_the_mutable_region(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_key k;
	hlog_key_init(&k, "gone", 4);
	assert_int_equal(hlog_upsert(f->s, &k, "value", 5, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_int_equal(hlog_delete(f->s, &k), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 0);
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_delete(f->s, &k), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), 0);
	/* The tombstone was set in place; a value of the same rounded size revives the record. */
	assert_int_equal(hlog_upsert(f->s, &k, "again", 5, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_true(read_equals(f->s, &k, "again", 5));
	hlog_info i = info_of(f->l);
	assert_int_equal(i.appends, 1);
	assert_int_equal(i.inplace_updates, 2);
	/* Deleted again, then a value that does not fit: a new record. */
	assert_int_equal(hlog_delete(f->s, &k), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &k, "a longer value", 14, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_true(read_equals(f->s, &k, "a longer value", 14));
}

static void test_delete_of_a_read_only_record_appends_a_tombstone(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 25);
	hlog_key k;
	hlog_key_init(&k, "ro", 2);
	assert_int_equal(hlog_upsert(f->s, &k, "value", 5, HLOG_NO_EXPIRY), HLOG_OK);
	fill_to_page(f, 6, "filler");
	hlog_session_refresh(f->s);
	uint64_t keys = hlog_key_count(f->l);
	hlog_info i = info_of(f->l);
	assert_int_equal(hlog_delete(f->s, &k), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), keys - 1);
	assert_int_equal(info_of(f->l).tail, i.tail + rec_size_of(2, 0, false));
	assert_int_equal(info_of(f->l).rcu_updates, i.rcu_updates + 1);   /* a new version at the tail */
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_delete(f->s, &k), HLOG_NOTFOUND);
	assert_int_equal(hlog_upsert(f->s, &k, "back", 4, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), keys);
	assert_true(read_equals(f->s, &k, "back", 4));
}

/* ---------------- RMW ---------------- */

static int fail_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	(void)ctx;
	(void)old;
	(void)out;
	return SPW_E_NOT_INT;
}

static int delete_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	int *seen = ctx;
	*seen = old != NULL;
	out->action = HLOG_RMW_DELETE;
	return 0;
}

static int keep_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	int *seen = ctx;
	*seen = old != NULL;
	out->action = HLOG_RMW_KEEP;
	return 0;
}

static void test_rmw_plan_error_aborts_and_keep_and_delete_are_honoured(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_key k;
	hlog_key_init(&k, "rmw", 3);
	assert_int_equal(incr_by(f->s, &k, 41, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(incr_by(f->s, &k, 1, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(read_counter(f->s, &k), 42);
	hlog_rmw_ops fail = { fail_plan, incr_fill };
	assert_int_equal(hlog_rmw(f->s, &k, &fail, NULL), SPW_E_NOT_INT);
	assert_int_equal(read_counter(f->s, &k), 42);
	int seen = -1;
	hlog_rmw_ops keep = { keep_plan, incr_fill };
	assert_int_equal(hlog_rmw(f->s, &k, &keep, &seen), HLOG_OK);
	assert_int_equal(seen, 1);
	assert_int_equal(read_counter(f->s, &k), 42);
	hlog_rmw_ops del = { delete_plan, incr_fill };
	assert_int_equal(hlog_rmw(f->s, &k, &del, &seen), HLOG_OK);
	assert_int_equal(seen, 1);
	assert_int_equal(hlog_key_count(f->l), 0);
	assert_int_equal(hlog_rmw(f->s, &k, &keep, &seen), HLOG_OK);
	assert_int_equal(seen, 0);
	/* KEEP on an absent key creates nothing. */
	hlog_key other;
	hlog_key_init(&other, "never", 5);
	uint64_t tail = info_of(f->l).tail;
	assert_int_equal(hlog_rmw(f->s, &other, &keep, &seen), HLOG_OK);
	assert_int_equal(seen, 0);
	assert_int_equal(info_of(f->l).tail, tail);
	assert_int_equal(hlog_key_count(f->l), 0);
}

/* ---------------- expiry ---------------- */

static void test_expired_key_reads_as_absent_and_is_removed_lazily(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_key k, p;
	hlog_key_init(&k, "ttl", 3);
	hlog_key_init(&p, "persistent", 10);
	hlog_session_set_now(f->s, 1000);
	assert_int_equal(hlog_upsert(f->s, &k, "v", 1, 2000), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &p, "v", 1, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 2);
	assert_int_equal(hlog_expires_count(f->l), 1);
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_OK);
	assert_int_equal(b.expire_ms, 2000);
	hlog_session_set_now(f->s, 2000);   /* Redis: still there in its last millisecond */
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_OK);
	/* Not yet looked at: still counted, as in Redis. */
	hlog_session_set_now(f->s, 2001);
	assert_int_equal(hlog_key_count(f->l), 2);
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_int_equal(hlog_expires_count(f->l), 0);
	hlog_info i = info_of(f->l);
	assert_int_equal(i.expired_keys, 1);
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(info_of(f->l).expired_keys, 1);
	/* Going back in time does not resurrect a removed key. */
	hlog_session_set_now(f->s, 1000);
	assert_int_equal(hlog_read(f->s, &k, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_read(f->s, &p, read_copy_fn, &b), HLOG_OK);
}

static void test_rmw_and_delete_see_an_expired_key_as_absent(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 25);
	hlog_key k, d;
	hlog_key_init(&k, "counter", 7);
	hlog_key_init(&d, "victim", 6);
	hlog_session_set_now(f->s, 1000);
	assert_int_equal(incr_by(f->s, &k, 10, 1500), HLOG_OK);
	assert_int_equal(hlog_upsert(f->s, &d, "x", 1, 1500), HLOG_OK);
	assert_int_equal(hlog_expires_count(f->l), 2);
	hlog_session_set_now(f->s, 1600);
	assert_int_equal(incr_by(f->s, &k, 1, HLOG_NO_EXPIRY), HLOG_OK);   /* starts again from 0 */
	assert_int_equal(read_counter(f->s, &k), 1);
	assert_int_equal(hlog_delete(f->s, &d), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_int_equal(hlog_expires_count(f->l), 0);
	assert_int_equal(info_of(f->l).expired_keys, 2);
	/* The same below ReadOnly, where removal appends a tombstone. */
	hlog_key r;
	hlog_key_init(&r, "readonly", 8);
	assert_int_equal(hlog_upsert(f->s, &r, "x", 1, 1700), HLOG_OK);
	fill_to_page(f, 6, "filler");
	hlog_session_refresh(f->s);
	uint64_t keys = hlog_key_count(f->l);
	hlog_session_set_now(f->s, 1800);
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->s, &r, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), keys - 1);
	assert_int_equal(info_of(f->l).expired_keys, 3);
}

/* ---------------- chains ---------------- */

/* Keys forced onto one index entry: the log alone tells them apart through the chain. */
static void shared_key(test_key *t, int i)
{
	test_key_make(t, "tag", i);
	t->k.hash = 0x5a5a00000000002aULL;
}

static void test_keys_sharing_an_index_entry_are_told_apart_by_the_chain(void **state)
{
	fixture *f = fixture_open(state, 256 * KIB, 4 * KIB, 50);
	enum { N = 300 };
	char v[32];
	for (int i = 0; i < N; i++) {
		test_key t;
		shared_key(&t, i);
		int len = snprintf(v, sizeof(v), "value-%d", i);
		assert_int_equal(hlog_upsert(f->s, &t.k, v, (size_t)len, HLOG_NO_EXPIRY), HLOG_OK);
	}
	assert_int_equal(hlog_key_count(f->l), N);
	for (int i = 0; i < N; i += 3) {
		test_key t;
		shared_key(&t, i);
		assert_int_equal(hlog_delete(f->s, &t.k), HLOG_OK);
	}
	for (int i = 1; i < N; i += 3) {
		test_key t;
		shared_key(&t, i);
		int len = snprintf(v, sizeof(v), "changed-value-%d", i);   /* grows: RCU */
		assert_int_equal(hlog_upsert(f->s, &t.k, v, (size_t)len, HLOG_NO_EXPIRY), HLOG_OK);
	}
	hlog_session_refresh(f->s);
	assert_int_equal(hlog_key_count(f->l), N - N / 3);
	for (int i = 0; i < N; i++) {
		test_key t;
		shared_key(&t, i);
		read_buf b = { .calls = 0 };
		if (i % 3 == 0) {
			assert_int_equal(hlog_read(f->s, &t.k, read_copy_fn, &b), HLOG_NOTFOUND);
			continue;
		}
		int len = snprintf(v, sizeof(v), i % 3 == 1 ? "changed-value-%d" : "value-%d", i);
		assert_true(read_equals(f->s, &t.k, v, (size_t)len));
	}
	hlog_info i = info_of(f->l);
	assert_int_equal(i.index.overflow_buckets, 0);   /* one entry held them all */
}

/* ---------------- scan ---------------- */

typedef struct scan_seen {
	int counts[2000];
	int other;
	int bad_value;
} scan_seen;

static void scan_count_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	scan_seen *s = ctx;
	int i;
	if (test_key_parse(key, klen, "scan", &i) || test_key_parse(key, klen, "tag", &i)) {
		if (i >= 0 && i < 2000) {
			s->counts[i]++;
			if (v->len != 8 || memcmp(v->ptr, "scanval!", 8) != 0)
				s->bad_value++;
			return;
		}
	}
	s->other++;
}

static void scan_all(fixture *f, scan_seen *seen)
{
	memset(seen, 0, sizeof(*seen));
	assert_int_equal(scan_whole(f->s, 7, scan_count_fn, seen), 0);
}

static void test_scan_returns_each_live_key_exactly_once(void **state)
{
	fixture *f = fixture_open(state, 128 * KIB, 4 * KIB, 10);   /* 3 mutable pages */
	enum { N = 1500 };
	hlog_session_set_now(f->s, 1000);
	for (int i = 0; i < N; i++) {
		test_key t;
		test_key_make(&t, "scan", i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "scanval!", 8, i % 7 == 0 ? 1500 : HLOG_NO_EXPIRY), HLOG_OK);
	}
	/* Rewrite some (RCU for the older ones, in place for the newer), delete some, expire some. */
	for (int i = 0; i < N; i += 5) {
		test_key t;
		test_key_make(&t, "scan", i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "scanval!", 8, i % 7 == 0 ? 1500 : HLOG_NO_EXPIRY), HLOG_OK);
	}
	for (int i = 3; i < N; i += 11) {
		test_key t;
		test_key_make(&t, "scan", i);
		assert_int_equal(hlog_delete(f->s, &t.k), HLOG_OK);
	}
	assert_true(info_of(f->l).rcu_updates > 0);
	hlog_session_set_now(f->s, 2000);   /* every seventh key is now expired */
	scan_seen seen;
	scan_all(f, &seen);
	assert_int_equal(seen.other, 0);
	assert_int_equal(seen.bad_value, 0);
	for (int i = 0; i < N; i++) {
		int want = (i % 7 == 0 || (i >= 3 && (i - 3) % 11 == 0)) ? 0 : 1;
		assert_int_equal(seen.counts[i], want);
	}
}

static void test_scan_reports_each_key_of_a_shared_chain_once(void **state)
{
	fixture *f = fixture_open(state, 256 * KIB, 4 * KIB, 90);
	enum { N = 120 };
	for (int i = 0; i < N; i++) {
		test_key t;
		shared_key(&t, i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "scanval!", 8, HLOG_NO_EXPIRY), HLOG_OK);
	}
	for (int i = 0; i < N; i += 2) {   /* older versions stay in the chain behind newer ones */
		test_key t;
		shared_key(&t, i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "scanval!", 8, 5000000), HLOG_OK);
	}
	for (int i = 0; i < N; i += 4) {
		test_key t;
		shared_key(&t, i);
		assert_int_equal(hlog_delete(f->s, &t.k), HLOG_OK);
	}
	scan_seen seen;
	scan_all(f, &seen);
	assert_int_equal(seen.other, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(seen.counts[i], i % 4 == 0 ? 0 : 1);
}

/* ---------------- flush ---------------- */

static void test_flush_all_empties_the_store_and_reuses_its_frames(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	uint8_t val[200];
	uint64_t total = 0;
	for (int round = 0; round < 6; round++) {
		int n, rc = HLOG_OK;
		for (n = 0; n < 100000; n++) {
			test_key t;
			test_key_make(&t, round % 2 ? "odd" : "even", n);
			pattern(val, sizeof(val), n + round);
			rc = hlog_upsert(f->s, &t.k, val, sizeof(val), n % 2 ? 9000000 : HLOG_NO_EXPIRY);
			if (rc != HLOG_OK)
				break;
			total += sizeof(val);
		}
		assert_int_equal(rc, SPW_E_LOG_FULL);
		assert_true(n > 200);   /* most of the 16 pages were reusable */
		assert_int_equal(hlog_key_count(f->l), (uint64_t)n);
		assert_int_equal(hlog_expires_count(f->l), (uint64_t)n / 2);
		for (int k = 0; k < n; k += 17) {
			test_key t;
			test_key_make(&t, round % 2 ? "odd" : "even", k);
			pattern(val, sizeof(val), k + round);
			assert_true(read_equals(f->s, &t.k, val, sizeof(val)));
		}
		assert_int_equal(hlog_flush_all(f->s), HLOG_OK);
		hlog_info i = info_of(f->l);
		assert_int_equal(i.keys, 0);
		assert_int_equal(i.expires, 0);
		assert_int_equal(i.begin, i.tail);
		assert_int_equal(i.head, i.begin & ~(4 * KIB - 1));
		assert_true(i.safe_read_only >= i.head);
		assert_int_equal(i.allocated_pages, 1);   /* only the tail's page is left */
		for (int k = 0; k < n; k += 13) {
			test_key t;
			read_buf b = { .calls = 0 };
			test_key_make(&t, round % 2 ? "odd" : "even", k);
			assert_int_equal(hlog_read(f->s, &t.k, read_copy_fn, &b), HLOG_NOTFOUND);
		}
		scan_seen seen;
		scan_all(f, &seen);
		assert_int_equal(seen.other, 0);
	}
	assert_true(total > 4 * 64 * KIB);
	/* After a flush with nothing written, a key count of zero and a working store. */
	assert_int_equal(hlog_flush_all(f->s), HLOG_OK);
	hlog_key k;
	hlog_key_init(&k, "after", 5);
	assert_int_equal(hlog_upsert(f->s, &k, "x", 1, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 1);
	assert_true(read_equals(f->s, &k, "x", 1));
}

static void test_flush_all_waits_for_an_idle_protected_session_before_reusing_frames(void **state)
{
	fixture *f = fixture_open(state, 64 * KIB, 4 * KIB, 90);
	hlog_session *other;
	assert_int_equal(hlog_session_open(f->l, &other), 0);
	hlog_session_protect(other);   /* protected, not refreshing: it may still hold old pointers */
	uint8_t val[200];
	memset(val, 'z', sizeof(val));
	int n;
	for (n = 0;; n++) {
		test_key t;
		test_key_make(&t, "hold", n);
		if (hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY) != HLOG_OK)
			break;
	}
	assert_int_equal(hlog_flush_all(f->s), HLOG_OK);
	hlog_info i = info_of(f->l);
	assert_int_equal(i.keys, 0);
	assert_int_equal(i.allocated_pages, 16);   /* nothing released yet */
	assert_true(i.safe_read_only < i.head);
	hlog_session_refresh(other);
	i = info_of(f->l);
	assert_int_equal(i.allocated_pages, 1);
	hlog_session_unprotect(other);
	hlog_session_close(other);
	test_key t;
	test_key_make(&t, "hold", 0);
	assert_int_equal(hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), HLOG_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_open_rejects_bad_geometry, fixture_teardown),
		cmocka_unit_test_teardown(test_open_reports_geometry_and_initial_markers, fixture_teardown),
		cmocka_unit_test_teardown(test_many_records_turn_pages_and_never_span_them, fixture_teardown),
		cmocka_unit_test_teardown(test_read_of_missing_key_is_notfound, fixture_teardown),
		cmocka_unit_test_teardown(test_log_full_keeps_every_earlier_key_readable, fixture_teardown),
		cmocka_unit_test_teardown(test_record_larger_than_the_memory_region_is_too_big, fixture_teardown),
		cmocka_unit_test_teardown(test_record_larger_than_a_page_spans_whole_pages_and_the_tail_continues_after_it, fixture_teardown),
		cmocka_unit_test_teardown(test_update_is_in_place_while_the_rounded_size_fits_and_copies_when_it_grows, fixture_teardown),
		cmocka_unit_test_teardown(test_update_of_a_read_only_record_copies_it_to_the_tail, fixture_teardown),
		cmocka_unit_test_teardown(test_update_in_the_fuzzy_region_retries_until_it_is_safe, fixture_teardown),
		cmocka_unit_test_teardown(test_delete_then_reinsert_in_the_mutable_region, fixture_teardown),
		cmocka_unit_test_teardown(test_delete_of_a_read_only_record_appends_a_tombstone, fixture_teardown),
		cmocka_unit_test_teardown(test_rmw_plan_error_aborts_and_keep_and_delete_are_honoured, fixture_teardown),
		cmocka_unit_test_teardown(test_expired_key_reads_as_absent_and_is_removed_lazily, fixture_teardown),
		cmocka_unit_test_teardown(test_rmw_and_delete_see_an_expired_key_as_absent, fixture_teardown),
		cmocka_unit_test_teardown(test_keys_sharing_an_index_entry_are_told_apart_by_the_chain, fixture_teardown),
		cmocka_unit_test_teardown(test_scan_returns_each_live_key_exactly_once, fixture_teardown),
		cmocka_unit_test_teardown(test_scan_reports_each_key_of_a_shared_chain_once, fixture_teardown),
		cmocka_unit_test_teardown(test_flush_all_empties_the_store_and_reuses_its_frames, fixture_teardown),
		cmocka_unit_test_teardown(test_record_type_is_kept_in_place_by_copies_and_by_plans_that_keep_the_value, fixture_teardown),
		cmocka_unit_test_teardown(test_flush_all_waits_for_an_idle_protected_session_before_reusing_frames, fixture_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
