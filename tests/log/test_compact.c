/*
 * test_compact.c - compaction of a memory-only log (log/compact.c without a device): the pass
 * copies the live records of the oldest pages, Begin and Head move, the frames below are given
 * back, so that a store overwritten many times over its memory keeps taking writes; the choice by
 * garbage share; compaction racing FLUSHALL never brings a flushed key back; and the liveness
 * check of parts drops the dead ones (compact.c note 8). The device side is in compact_suite.h
 * and parts_suite.h (every tier backend).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/hlog.h"
#include "tests/log/log_test.h"

#define PAGE (64u * 1024u)
#define PAGES 32u
#define VLEN 200

static void val_of(int i, int v, uint8_t *buf)
{
	for (int k = 0; k < VLEN; k++)
		buf[k] = (uint8_t)(i * 31 + v * 7 + k);
}

static void copy_fn(void *ctx, const hlog_value *v)
{
	read_buf *b = ctx;
	memcpy(b->data, v->ptr, v->len);
	b->len = v->len;
	b->calls++;
}

/* Key i reads version v (0: absent). */
static void expect_version(hlog_session *s, int i, int v)
{
	test_key t;
	test_key_make(&t, "mc", i);
	read_buf b = { .len = 0 };
	int rc = hlog_read(s, &t.k, copy_fn, &b);
	if (!v) {
		assert_int_equal(rc, HLOG_NOTFOUND);
		return;
	}
	assert_int_equal(rc, HLOG_OK);
	uint8_t want[VLEN];
	val_of(i, v, want);
	assert_int_equal(b.len, VLEN);
	assert_memory_equal(b.data, want, VLEN);
}

static int put(hlog_session *s, int i, int v)
{
	test_key t;
	uint8_t val[VLEN];
	test_key_make(&t, "mc", i);
	val_of(i, v, val);
	return hlog_upsert(s, &t.k, val, VLEN, HLOG_NO_EXPIRY);
}

static hlog *open_store(hlog_session **s)
{
	hlog_config c = log_test_config(PAGES * PAGE, PAGE, 10);
	c.index_bytes = 256 * 1024;
	hlog *l;
	assert_int_equal(hlog_open(&l, &c), 0);
	assert_int_equal(hlog_session_open(l, s), 0);
	hlog_session_set_now(*s, 1000000);
	return l;
}

/* Compact everything compactable (the pages below SafeReadOnly) on a session of its own, four
 * pages a pass: each pass frees what its copies took, so a log in a memory half full of live data
 * never runs out of frames while it is compacted. */
static hlog_compact_info compact_now(hlog *l)
{
	hlog_session *cs;
	assert_int_equal(hlog_session_open(l, &cs), 0);
	hlog_session_set_now(cs, 1000000);
	hlog_compact_info sum = { 0 };
	hlog_space sp;
	hlog_space_get(l, &sp);
	for (;;) {
		uint64_t to = SPW_MIN(info_of(l).begin + 4 * PAGE, sp.limit);   /* not its own copies */
		hlog_compact_opts o = { .until = to, .mode = HLOG_COMPACT_COPY };
		hlog_compact_info ci;
		assert_int_equal(hlog_compact(l, cs, &o, &ci), 0);
		if (!sum.begin)
			sum.begin = ci.begin;
		sum.end = ci.end;
		sum.copied += ci.copied;
		if (ci.end == ci.begin)
			break;
	}
	hlog_session_close(cs);
	return sum;
}

/* 4,000 keys overwritten 60 times: 50 MB through a 2 MB memory. Without compaction the log is
 * full after the first few rounds; with a pass whenever the memory is half full, every write is
 * taken and every key has its newest value. */
static void test_memory_only_log_compacted_keeps_taking_overwrites(void **state)
{
	(void)state;
	enum { N = 4000, R = 60 };
	hlog_session *s;
	hlog *l = open_store(&s);
	uint64_t passes = 0, copied = 0;
	for (int v = 1; v <= R; v++) {
		hlog_session_protect(s);
		for (int i = 0; i < N; i++)
			assert_int_equal(put(s, i, v), HLOG_OK);
		hlog_session_unprotect(s);
		hlog_info in = info_of(l);
		if (in.tail - in.begin > PAGES * PAGE / 2) {
			hlog_compact_info ci = compact_now(l);
			passes += ci.end > ci.begin;
			copied += ci.copied;
		}
	}
	assert_true(passes > 0);
	assert_true(copied > 0);
	hlog_info in = info_of(l);
	assert_true(in.begin > 0);
	assert_int_equal(in.log_full_errors, 0);
	assert_true(in.allocated_pages <= PAGES);
	assert_int_equal(in.compact_copied, copied);
	hlog_session_protect(s);
	for (int i = 0; i < N; i++)
		expect_version(s, i, R);
	hlog_session_unprotect(s);
	assert_int_equal(hlog_key_count(l), (uint64_t)N);
	hlog_session_close(s);
	hlog_close(l);
}

/* Compaction's liveness check of parts (compact.c note 8) without a device: part j's value names
 * its owner, the head "mh:<owner>"; the check reads it on compaction's session (never pending
 * here: everything is in memory) and says live while it exists. */
typedef struct mp_check {
	uint64_t calls, live, dead, other;
} mp_check;

static void mp_count(void *ctx, const hlog_value *v)
{
	(void)v;
	(*(int *)ctx)++;
}

static int mp_live(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v)
{
	mp_check *c = arg;
	uint64_t owner;
	int n = 0;
	c->calls++;
	if (klen < 3 || memcmp(key, "mp:", 3) != 0 || v->len != VLEN) {
		c->other++;
		return 1;
	}
	memcpy(&owner, v->ptr, sizeof(owner));
	test_key t;
	test_key_make(&t, "mh", (int)owner);
	int rc = hlog_read(s, &t.k, mp_count, &n);
	c->live += rc == HLOG_OK;
	c->dead += rc == HLOG_NOTFOUND;
	c->other += rc != HLOG_OK && rc != HLOG_NOTFOUND;
	return rc == HLOG_OK ? 1 : rc == HLOG_NOTFOUND ? 0 : rc;
}

static void mp_key(test_key *t, int j)
{
	test_key_make(t, "mp", j);
	hlog_key_init_internal(&t->k, t->buf, t->k.len);
}

/* 2000 parts of 100 owners, the odd owners deleted, filler behind: a pass over the parts drops
 * those of the odd owners (counted) and copies the others, which read their values. */
static void test_memory_only_compaction_drops_dead_parts(void **state)
{
	(void)state;
	enum { P = 2000, H = 100, FILL = 3000 };
	mp_check c = { 0 };
	hlog_config cfg = log_test_config(PAGES * PAGE, PAGE, 10);
	cfg.index_bytes = 256 * 1024;
	cfg.part_live = mp_live;
	cfg.part_live_arg = &c;
	hlog *l;
	hlog_session *s;
	assert_int_equal(hlog_open(&l, &cfg), 0);
	assert_int_equal(hlog_session_open(l, &s), 0);
	hlog_session_set_now(s, 1000000);
	uint8_t val[VLEN];
	hlog_session_protect(s);
	for (int j = 0; j < P; j++) {
		test_key t;
		mp_key(&t, j);
		uint64_t owner = (uint64_t)(j % H);
		val_of(j, 1, val);
		memcpy(val, &owner, sizeof(owner));
		assert_int_equal(hlog_upsert_typed(s, &t.k, val, VLEN, HLOG_NO_EXPIRY, HLOG_T_PART), HLOG_OK);
	}
	uint64_t parts_end = info_of(l).tail;
	for (int h = 0; h < H; h++) {
		test_key t;
		test_key_make(&t, "mh", h);
		assert_int_equal(hlog_upsert(s, &t.k, "head", 4, HLOG_NO_EXPIRY), HLOG_OK);
	}
	for (int h = 1; h < H; h += 2) {
		test_key t;
		test_key_make(&t, "mh", h);
		assert_int_equal(hlog_delete(s, &t.k), HLOG_OK);
	}
	for (int i = 0; i < FILL; i++) {
		assert_int_equal(put(s, i, 1), HLOG_OK);
		hlog_session_refresh(s);   /* SafeReadOnly follows ReadOnly by an epoch action */
	}
	hlog_session_unprotect(s);
	hlog_space sp;
	hlog_space_get(l, &sp);
	fprintf(stderr, "parts end %llu limit %llu tail %llu\n", (unsigned long long)parts_end,
	        (unsigned long long)sp.limit, (unsigned long long)sp.tail);
	assert_true(sp.limit >= parts_end);

	hlog_session *cs;
	assert_int_equal(hlog_session_open(l, &cs), 0);
	hlog_compact_opts o = { .until = parts_end, .mode = HLOG_COMPACT_COPY };
	hlog_compact_info ci;
	assert_int_equal(hlog_compact(l, cs, &o, &ci), 0);
	hlog_session_close(cs);
	assert_true(ci.end >= parts_end);
	assert_int_equal(c.other, 0);
	assert_int_equal(c.calls, P);
	assert_int_equal(c.dead, P / 2);
	assert_int_equal(ci.parts_dropped, P / 2);
	assert_int_equal(ci.copied, P / 2);
	assert_int_equal(info_of(l).compact_parts_dropped, P / 2);
	hlog_session_protect(s);
	for (int j = 0; j < P; j++) {
		test_key t;
		mp_key(&t, j);
		read_buf b = { .len = 0 };
		int rc = hlog_read(s, &t.k, copy_fn, &b);
		if ((j % H) % 2) {
			assert_int_equal(rc, HLOG_NOTFOUND);
			continue;
		}
		assert_int_equal(rc, HLOG_OK);
		uint64_t owner = (uint64_t)(j % H);
		val_of(j, 1, val);
		memcpy(val, &owner, sizeof(owner));
		assert_int_equal(b.len, VLEN);
		assert_memory_equal(b.data, val, VLEN);
	}
	for (int i = 0; i < FILL; i++)
		expect_version(s, i, 1);
	hlog_session_unprotect(s);
	assert_int_equal(hlog_key_count(l), (uint64_t)(H / 2 + FILL));
	hlog_session_close(s);
	hlog_close(l);
}

/* The choice: a prefix full of overwritten records is worth a pass, a fresh load is not. */
static void test_choice_follows_the_garbage_share(void **state)
{
	(void)state;
	hlog_session *s;
	hlog *l = open_store(&s);
	hlog_session_protect(s);
	for (int i = 0; i < 2000; i++)
		assert_int_equal(put(s, i, 1), HLOG_OK);
	hlog_session_unprotect(s);
	assert_int_equal(hlog_compact_choose(l, 0.25, UINT64_MAX), 0);   /* nothing overwritten */
	hlog_session_protect(s);
	for (int v = 2; v <= 4; v++)
		for (int i = 0; i < 2000; i++)
			assert_int_equal(put(s, i, v), HLOG_OK);
	hlog_session_unprotect(s);
	hlog_space sp;
	hlog_space_get(l, &sp);
	assert_true(sp.garbage > 0);
	uint64_t until = hlog_compact_choose(l, 0.25, UINT64_MAX);
	assert_true(until > sp.begin);
	assert_true(until <= sp.limit);
	hlog_session_close(s);
	hlog_close(l);
}

/* A compaction thread copying records while the main thread flushes the store: no flushed key
 * ever comes back (a copy that raced the flush would resurrect it). */
typedef struct fr_arg {
	hlog *l;
	_Atomic int stop;
	int passes;
	_Atomic uint64_t copied;
} fr_arg;

static void *fr_compactor(void *p)
{
	fr_arg *a = p;
	hlog_session *cs;
	assert_int_equal(hlog_session_open(a->l, &cs), 0);
	hlog_session_set_now(cs, 1000000);
	while (!atomic_load(&a->stop)) {
		hlog_compact_opts o = { .until = UINT64_MAX, .mode = HLOG_COMPACT_COPY };
		hlog_compact_info ci;
		int rc = hlog_compact(a->l, cs, &o, &ci);
		if (rc != 0 && rc != SPW_E_LOG_FULL)
			a->passes = -1000000;   /* checked on the main thread */
		a->passes++;
		a->copied += ci.copied;
	}
	hlog_session_close(cs);
	return NULL;
}

static void test_compaction_racing_flushall_brings_nothing_back(void **state)
{
	(void)state;
	enum { N = 1500, ROUNDS = 30, MAX_ROUNDS = 1000 };
	hlog_session *s;
	hlog *l = open_store(&s);
	fr_arg a = { .l = l };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fr_compactor, &a), 0);
	/* At least ROUNDS, and on until the compactor has copied while the flushes came (on a loaded
	 * machine its thread may not get the CPU in the first ones): the race needs both. */
	for (int r = 0; r < ROUNDS || (r < MAX_ROUNDS && atomic_load(&a.copied) == 0); r++) {
		hlog_session_protect(s);
		for (int v = 1; v <= 3; v++)
			for (int i = 0; i < N; i++)
				assert_int_equal(put(s, i, v), HLOG_OK);
		assert_int_equal(hlog_flush_all(s), HLOG_OK);
		hlog_session_refresh(s);
		hlog_session_unprotect(s);
		usleep(500);   /* a pass may be copying what the flush removed */
		hlog_session_protect(s);
		for (int i = 0; i < N; i++)
			expect_version(s, i, 0);
		hlog_session_unprotect(s);
		assert_int_equal(hlog_key_count(l), 0);
	}
	atomic_store(&a.stop, 1);
	pthread_join(th, NULL);
	assert_true(a.passes > 0);
	assert_true(a.copied > 0);   /* the passes copied records while the flushes came */
	hlog_session_close(s);
	hlog_close(l);
}

/* Full scans while a compaction thread keeps copying the same keys and moving Begin past their
 * old versions: every key, present from start to end, is seen exactly once by every full scan
 * (scan.c note 4: a call whose Begin moved walks its buckets again, skipping what it reported). */
typedef struct sc_tally {
	int n;
	int *seen;
	int other;
} sc_tally;

static void sc_tally_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	sc_tally *t = ctx;
	int i;
	(void)v;
	if (test_key_parse(key, klen, "mc", &i) && i >= 0 && i < t->n)
		t->seen[i]++;
	else
		t->other++;
}

static void test_full_scans_racing_compaction_see_every_key_once(void **state)
{
	(void)state;
	enum { N = 3000, SCANS = 200, MAX_SCANS = 20000 };
	hlog_session *s;
	hlog *l = open_store(&s);
	hlog_session_protect(s);
	for (int i = 0; i < N; i++)
		assert_int_equal(put(s, i, 1), HLOG_OK);
	hlog_session_unprotect(s);
	fr_arg a = { .l = l };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fr_compactor, &a), 0);
	sc_tally t = { .n = N, .seen = calloc(N, sizeof(int)) };
	assert_non_null(t.seen);
	uint64_t begin0 = info_of(l).begin;
	/* At least SCANS, and on until the compactor has copied every key over at least once and
	 * moved Begin (on a loaded machine its thread may get little CPU): scans must race both. */
	for (int k = 0; k < SCANS || (k < MAX_SCANS && (atomic_load(&a.copied) <= (uint64_t)N ||
	                                                info_of(l).begin == begin0)); k++) {
		memset(t.seen, 0, N * sizeof(int));
		hlog_session_protect(s);
		assert_int_equal(scan_whole(s, 16, sc_tally_fn, &t), 0);
		hlog_session_unprotect(s);
		for (int i = 0; i < N; i++)
			if (t.seen[i] != 1)
				fail_msg("scan %d saw key %d %d times", k, i, t.seen[i]);
	}
	atomic_store(&a.stop, 1);
	pthread_join(th, NULL);
	assert_int_equal(t.other, 0);
	assert_true(a.passes > 0);
	assert_true(a.copied > (uint64_t)N);             /* the keys were copied over and over */
	assert_true(info_of(l).begin > begin0);          /* and Begin moved under the scans */
	free(t.seen);
	hlog_session_close(s);
	hlog_close(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_memory_only_log_compacted_keeps_taking_overwrites),
		cmocka_unit_test(test_memory_only_compaction_drops_dead_parts),
		cmocka_unit_test(test_choice_follows_the_garbage_share),
		cmocka_unit_test(test_compaction_racing_flushall_brings_nothing_back),
		cmocka_unit_test(test_full_scans_racing_compaction_see_every_key_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
