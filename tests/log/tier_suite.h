/*
 * tier_suite.h - the storage tier's tests, written once and included once per device backend (as
 * tests/device/conformance.h). The including file defines:
 *
 *   TIER_TYPE          the --device-type string: "uring" (falls back to libaio or posix when the
 *                      kernel refuses), "localmemory", "fault:posix"
 *   TIER_BIG_VALUE     (optional) bytes of the huge-value test's values, default 64 MB
 *   TIER_EXTRA_TESTS   (optional) more TIER_TEST(...) entries
 *
 * Every test runs in a fixture (tier_setup, tier_teardown): a fresh device in a fresh directory
 * under /tmp with small pages, so that a few thousand keys are many times the memory region, a
 * session on it, and the models the test sizes; teardown frees them and removes the directory,
 * also after a failed assertion. Each test gets a store of its own (no group fixture): its
 * markers and counters start from an empty log. The model, the operations and the driver that
 * runs them as the server does are in tier_model.h.
 */
#ifndef SPW_TEST_TIER_SUITE_H
#define SPW_TEST_TIER_SUITE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>

#include "tier_model.h"

#ifndef TIER_BIG_VALUE
#define TIER_BIG_VALUE (64u << 20)
#endif
#ifndef TIER_EXTRA_TESTS
#define TIER_EXTRA_TESTS
#endif

#define TIER_DIR "/tmp/spw-tier.XXXXXX"

/* ---------------- the fixture ---------------- */

/* The environment, the session, and the models a test checks against: m, and other for a second
 * key space (filler that pushes m's keys to the device, a second writer's keys). */
typedef struct tier {
	store_env env;
	tsess ts;
	model m, other;
	void *arg;                   /* the test's own state (parts_suite.h: its liveness check's) */
} tier;

/* A store's shape: memory pages of TIER_PAGE bytes, index bytes, 90% mutable; with a session or
 * without (a test whose threads open their own, and that opens one afterwards). */
typedef struct tier_shape {
	uint64_t pages;
	uint64_t index_bytes;
	bool session;
	/* hlog_config.part_live, its arg the fixture's tier (NULL: none) */
	int (*part_live)(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v);
} tier_shape;

static const tier_shape tier_default = { 8, 1 * MIB, true, NULL };
static const tier_shape tier_small_index = { 8, 4 * KIB, true, NULL };   /* few index entries: long chains */
static const tier_shape tier_huge = { (TIER_BIG_VALUE + 16 * MIB) / TIER_PAGE, 1 * MIB, true, NULL };
static const tier_shape tier_no_session = { 8, 1 * MIB, false, NULL };

static void tier_open(tier *f, const tier_shape *shape)
{
	memset(f, 0, sizeof(*f));
	hlog_config c = log_test_config(shape->pages * TIER_PAGE, TIER_PAGE, 90);
	c.index_bytes = shape->index_bytes;
	c.part_live = shape->part_live;
	c.part_live_arg = f;
	store_env_open(&f->env, TIER_TYPE, TIER_DIR, 0, &c);
	if (shape->session)
		tsess_open(&f->ts, f->env.l);
}

static void tier_close(tier *f)
{
	if (f->ts.s)
		tsess_close(&f->ts);
	model_free(&f->other);
	model_free(&f->m);
	store_env_close(&f->env);
}

/* *state: the tier_shape given to TIER_TEST_SHAPED, NULL for the default. */
static int tier_setup(void **state)
{
	const tier_shape *shape = *state ? *state : &tier_default;
	tier *f = malloc(sizeof(*f));
	if (!f)
		return -1;
	*state = f;
	tier_open(f, shape);
	return 0;
}

static int tier_teardown(void **state)
{
	tier_close(*state);
	free(*state);
	return 0;
}

/* The model m: n keys "prefix:i", loaded (version 1). */
static void tier_load(tier *f, int n, const char *prefix)
{
	model_init(&f->m, n, prefix);
	model_load(&f->ts, &f->m, 1);
}

#define TIER_TEST(fn) cmocka_unit_test_setup_teardown(fn, tier_setup, tier_teardown)
#define TIER_TEST_SHAPED(fn, shape) \
	cmocka_unit_test_prestate_setup_teardown(fn, tier_setup, tier_teardown, (void *)&shape)

/* ---------------- tests ---------------- */

/* 8 x 64 KiB pages of memory, 50k keys of mixed sizes (some larger than a page): load, read all,
 * overwrite a third, delete a sixth, increment counters and append to cold keys, read all and scan
 * all again, each step checked against the model. */
static void test_tier_store_larger_than_memory_matches_a_model(void **state)
{
	tier *f = *state;
	enum { N = 50000 };
	tier_load(f, N, "big");

	hlog_info i = info_of(f->env.l);
	assert_true(i.tail > 10 * 8 * TIER_PAGE);        /* far larger than memory */
	assert_true(i.head > i.begin);                   /* evicted */
	assert_true(i.head <= i.flushed_until);
	assert_true(i.flushed_until <= i.safe_read_only);
	assert_true(i.tail - i.head <= 8 * TIER_PAGE);   /* Head follows the tail */
	assert_true(i.flush_writes > 0);
	assert_int_equal(i.keys, (uint64_t)N);
	assert_int_equal(i.store_error, 0);
	print_info("loaded", f->env.l);

	/* Record reads asked for: device requests plus those merged into a neighbour's or shared. */
	uint64_t reads0 = i.device_reads + i.merged_reads + i.dedup_hits, bytes0 = i.device_read_bytes;
	model_read_all(&f->ts, &f->m);
	i = info_of(f->env.l);
	assert_true(i.device_reads + i.merged_reads + i.dedup_hits > reads0 + N / 2);   /* most keys came from the device */
	/* Merged reads share sectors, so only the records themselves (>= 24 bytes each) are sure. */
	assert_true(i.device_read_bytes > bytes0 + (uint64_t)N / 2 * 24);
	assert_true(i.pending_found >= (uint64_t)N / 2);
	assert_true(i.second_reads > 0);                 /* values longer than the first read */
	print_info("read all", f->env.l);

	int v2 = 2;
	tier_phase(&f->ts, &f->m, 0, N, 3, prep_upsert, check_upsert, &v2);
	tier_phase(&f->ts, &f->m, 1, N, 6, prep_delete, check_delete, NULL);
	/* Counters on every tenth key (cold: written long ago), appends on others. */
	tier_phase(&f->ts, &f->m, 7, N, 10, prep_incr, check_incr, NULL);
	tier_phase(&f->ts, &f->m, 7, N, 10, prep_incr, check_incr, NULL);
	tier_phase(&f->ts, &f->m, 3, N, 10, prep_append, check_append, NULL);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m));
	model_read_all(&f->ts, &f->m);
	model_scan_check(&f->ts, &f->m, 0);
	i = info_of(f->env.l);
	print_info("after updates", f->env.l);
	assert_int_equal(i.keys, model_live(&f->m));
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(f->ts.spurious, 0);
	assert_int_equal(f->ts.double_ready, 0);
}

/* Every key on one index entry: reads, deletes and RMWs walk the chain on the device. */
static void test_tier_keys_sharing_a_tag_are_told_apart_by_chain_walks_on_the_device(void **state)
{
	tier *f = *state;
	enum { N = 400 };
	model_init(&f->m, N, "tag");
	f->m.shared_hash = true;
	model_load(&f->ts, &f->m, 1);
	/* Push the whole chain out of memory with unrelated keys. */
	model_init(&f->other, 12000, "filler");
	model_load(&f->ts, &f->other, 1);
	assert_true(info_of(f->env.l).head > 2 * 8 * TIER_PAGE);

	uint64_t chain0 = info_of(f->env.l).chain_reads;
	tier_phase(&f->ts, &f->m, 0, N, 37, prep_read, check_read, NULL);
	assert_true(info_of(f->env.l).chain_reads > chain0 + 100);
	tier_phase(&f->ts, &f->m, 0, N, 5, prep_delete, check_delete, NULL);
	tier_phase(&f->ts, &f->m, 1, N, 5, prep_incr, check_incr, NULL);
	tier_phase(&f->ts, &f->m, 2, N, 5, prep_append, check_append, NULL);
	model_load(&f->ts, &f->other, 2);   /* everything cold again */
	model_read_all(&f->ts, &f->m);
	model_scan_check(&f->ts, &f->m, (int)model_live(&f->other));
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m) + model_live(&f->other));
	hlog_info i = info_of(f->env.l);
	assert_int_equal(i.pending_errors, 0);
	print_info("chains", f->env.l);
	assert_int_equal(f->ts.spurious, 0);
}

/* An op that prefetches two cold keys gets one ready callback, after both reads, and its re-run
 * finds both in the fetch cache. */
static void test_tier_ready_callback_runs_exactly_once_per_pending_op(void **state)
{
	tier *f = *state;
	enum { N = 12000 };
	tier_load(f, N, "once");

	top ops[TIER_BATCH];
	for (int k = 0; k < TIER_BATCH; k++) {
		memset(&ops[k], 0, sizeof(ops[k]));
		ops[k].kind = T_PREFETCH2;
		ops[k].m = &f->m;
		ops[k].i = k * 7;
		ops[k].j = k * 7 + 1;
	}
	uint64_t hits0 = info_of(f->env.l).pending_hits;
	tier_drive(&f->ts, ops, TIER_BATCH);
	for (int k = 0; k < TIER_BATCH; k++) {
		assert_int_equal(ops[k].rc, HLOG_OK);
		assert_true(ops[k].matched);
		assert_int_equal(ops[k].waves, 1);   /* one wave: both reads, one ready, one re-run */
		assert_int_equal(ops[k].runs, 2);
	}
	assert_true(info_of(f->env.l).pending_hits >= hits0 + 2 * TIER_BATCH);
	assert_int_equal(f->ts.spurious, 0);
	assert_int_equal(f->ts.double_ready, 0);

	/* Released ops: reads still in flight complete without a callback. */
	test_key t;
	model_key(&f->m, 11, &t);
	hlog_session_protect(f->ts.s);
	hlog_session_set_op(f->ts.s, &ops[0]);
	ops[0].parked = false;
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(f->ts.s, &t.k, read_copy_fn, &b), HLOG_PENDING);
	assert_int_equal(hlog_read(f->ts.s, &t.k, read_copy_fn, &b), HLOG_PENDING);   /* still reading */
	hlog_session_release(f->ts.s, &ops[0]);
	for (int k = 0; k < 1000 && hlog_session_inflight(f->ts.s); k++) {
		hlog_session_poll(f->ts.s);
		usleep(100);
	}
	hlog_session_poll(f->ts.s);
	hlog_session_unprotect(f->ts.s);
	assert_int_equal(hlog_session_inflight(f->ts.s), 0);
	assert_int_equal(f->ts.spurious, 0);
}

/* After the IO, the re-run starts from the index: a version written meanwhile wins. */
static void test_tier_a_version_written_while_the_read_was_pending_wins(void **state)
{
	tier *f = *state;
	enum { N = 12000 };
	tier_load(f, N, "race");

	/* A read goes pending; another client overwrites the key (its blind upsert reads the old
	 * record too, for the key count) before the read runs again. */
	uint64_t pending0 = info_of(f->env.l).pending_reads;
	top o = { .kind = T_READ, .m = &f->m, .i = 5 };
	hlog_session_protect(f->ts.s);
	assert_int_equal(top_run(&f->ts, &o), HLOG_PENDING);
	o.parked = true;
	hlog_session_unprotect(f->ts.s);
	top up = { .kind = T_UPSERT, .m = &f->m, .i = 5, .val = (const uint8_t *)strdup("fresh"), .len = 5 };
	tier_drive(&f->ts, &up, 1);
	check_upsert(&up, &f->m, NULL);
	hlog_session_protect(f->ts.s);
	tier_wait_ready(&f->ts, &o);
	assert_int_equal(top_run(&f->ts, &o), HLOG_OK);
	assert_true(o.matched);
	hlog_session_release(f->ts.s, &o);
	/* The same for an RMW: it plans from the newer in-memory version, not the fetched one. */
	top inc = { .kind = T_INCR, .m = &f->m, .i = 9, .delta = 5 };
	assert_int_equal(top_run(&f->ts, &inc), HLOG_PENDING);
	inc.parked = true;
	hlog_session_unprotect(f->ts.s);
	static const uint64_t ten = 10;
	up = (top){ .kind = T_UPSERT, .m = &f->m, .i = 9, .val = malloc(8), .len = 8 };
	memcpy((uint8_t *)up.val, &ten, 8);
	tier_drive(&f->ts, &up, 1);
	check_upsert(&up, &f->m, NULL);
	hlog_session_protect(f->ts.s);
	tier_wait_ready(&f->ts, &inc);
	assert_int_equal(top_run(&f->ts, &inc), HLOG_OK);
	hlog_session_release(f->ts.s, &inc);
	check_incr(&inc, &f->m, NULL);
	test_key t;
	model_key(&f->m, 9, &t);
	assert_int_equal(read_counter(f->ts.s, &t.k), 15);
	hlog_session_unprotect(f->ts.s);
	assert_int_equal(f->ts.spurious, 0);
	assert_true(info_of(f->env.l).pending_reads >= pending0 + 2);   /* the read and the RMW went to the device */
}

/* Tombstones and expired records are flushed and evicted like any record: neither brings the old
 * value back from the device. */
static void test_tier_deleted_and_expired_keys_never_come_back_from_the_device(void **state)
{
	tier *f = *state;
	enum { N = 2000 };
	model_init(&f->m, N, "gone");
	model_init(&f->other, 12000, "filler");
	model_load(&f->ts, &f->m, 1);
	tier_phase(&f->ts, &f->m, 0, N, 2, prep_delete, check_delete, NULL);
	/* Expiring keys: a TTL in the past of the clock the next reads use. */
	hlog_session_protect(f->ts.s);
	for (int i = 1; i < N; i += 4) {
		test_key t;
		model_key(&f->m, i, &t);
		assert_int_equal(hlog_upsert(f->ts.s, &t.k, "ttl", 3, 2000000), HLOG_OK);
		f->m.keys[i].alive = false;
	}
	hlog_session_unprotect(f->ts.s);
	model_load(&f->ts, &f->other, 1);   /* push everything to the device */
	assert_true(info_of(f->env.l).head > 3 * 8 * TIER_PAGE);
	hlog_session_set_now(f->ts.s, 3000000);
	uint64_t notfound0 = info_of(f->env.l).pending_notfound;
	model_read_all(&f->ts, &f->m);
	assert_true(info_of(f->env.l).pending_notfound > notfound0);   /* tombstones read from the device */
	model_scan_check(&f->ts, &f->m, (int)model_live(&f->other));
	/* Lazy expiry of cold keys wrote tombstones: the count drops as in Redis. */
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m) + model_live(&f->other));
	model_load(&f->ts, &f->other, 2);
	model_read_all(&f->ts, &f->m);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m) + model_live(&f->other));
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
}

/* A value of TIER_BIG_VALUE bytes with 64 KiB pages: written, evicted by another one, read back
 * from the device, appended to, read again. */
static void test_tier_huge_values_span_pages_and_come_back_from_the_device(void **state)
{
	tier *f = *state;
	assert_true(hlog_max_record_payload(f->env.l) >= TIER_BIG_VALUE);
	model_init(&f->m, 3, "huge");
	for (int i = 0; i < 3; i++)
		tier_upsert_sized(&f->ts, &f->m, i, TIER_BIG_VALUE - (size_t)i * 4096 - 3, 1);
	hlog_info i = info_of(f->env.l);
	assert_true(i.head > TIER_BIG_VALUE);   /* the first ones are on the device only */
	model_read_all(&f->ts, &f->m);
	assert_true(info_of(f->env.l).pending_found > i.pending_found);   /* read back from the device */
	tier_phase(&f->ts, &f->m, 0, 3, 1, prep_append, check_append, NULL);
	model_read_all(&f->ts, &f->m);
	/* Too big for the memory region: refused, never cut. */
	hlog_key k;
	hlog_key_init(&k, "toolarge", 8);
	hlog_session_protect(f->ts.s);
	assert_int_equal(hlog_upsert(f->ts.s, &k, f->m.keys[0].bytes, hlog_max_record_payload(f->env.l) - 7, 5000000),
	                 SPW_E_TOO_BIG);   /* checked before a byte of the value is read */
	hlog_session_unprotect(f->ts.s);
	print_info("huge", f->env.l);
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
}

/* Four threads, each with its own session and device queue, each running the larger-than-memory
 * workload on its own keys, plus counters all of them increment. Page writes claimed by one
 * session free frames another one waits for. */
#define TIER_THREADS 4
typedef struct mt_arg {
	hlog *l;
	int idx;
	_Atomic int *start;
	model m;
	model *counters;
	uint64_t spurious, waves;
} mt_arg;

static void *mt_worker(void *p)
{
	mt_arg *a = p;
	tsess ts;
	tsess_open(&ts, a->l);
	while (!atomic_load(a->start))
		;
	model_load(&ts, &a->m, 1);
	model_read_all(&ts, &a->m);
	int v2 = 2;
	tier_phase(&ts, &a->m, 0, a->m.n, 3, prep_upsert, check_upsert, &v2);
	tier_phase(&ts, &a->m, 1, a->m.n, 6, prep_delete, check_delete, NULL);
	tier_phase(&ts, &a->m, 3, a->m.n, 10, prep_append, check_append, NULL);
	model_read_all(&ts, &a->m);
	/* Shared counters: each thread increments each by idx + 1, 3 times, through the tier. */
	uint64_t delta = (uint64_t)a->idx + 1;
	for (int r = 0; r < 3; r++)
		tier_phase(&ts, a->counters, 0, a->counters->n, 1, prep_incr, check_ok, &delta);
	a->spurious = ts.spurious;
	a->waves = ts.waves;
	tsess_close(&ts);
	return NULL;
}

static void test_tier_concurrent_sessions_each_poll_their_own_queue(void **state)
{
	tier *f = *state;
	pthread_t th[TIER_THREADS];
	mt_arg args[TIER_THREADS];
	_Atomic int start = 0;
	model *counters = &f->m;
	model_init(counters, 500, "ctr");
	char prefix[TIER_THREADS][16];
	for (int t = 0; t < TIER_THREADS; t++) {
		memset(&args[t], 0, sizeof(args[t]));
		args[t].l = f->env.l;
		args[t].idx = t;
		args[t].start = &start;
		args[t].counters = counters;
		snprintf(prefix[t], sizeof(prefix[t]), "t%d", t);
		model_init(&args[t].m, 8000, prefix[t]);
		assert_int_equal(pthread_create(&th[t], NULL, mt_worker, &args[t]), 0);
	}
	atomic_store(&start, 1);
	for (int t = 0; t < TIER_THREADS; t++)
		pthread_join(th[t], NULL);

	tsess_open(&f->ts, f->env.l);
	uint64_t live = 0;
	for (int t = 0; t < TIER_THREADS; t++) {
		model_read_all(&f->ts, &args[t].m);
		live += model_live(&args[t].m);
		assert_int_equal(args[t].spurious, 0);
	}
	/* Every counter was incremented by 1+2+3+4, three times. */
	for (int i = 0; i < counters->n; i++) {
		uint64_t want = 3 * (1 + 2 + 3 + 4);
		counters->keys[i].bytes = malloc(8);
		assert_non_null(counters->keys[i].bytes);
		memcpy(counters->keys[i].bytes, &want, 8);
		counters->keys[i].len = 8;
		counters->keys[i].alive = true;
	}
	model_read_all(&f->ts, counters);
	assert_int_equal(hlog_key_count(f->env.l), live + (uint64_t)counters->n);
	hlog_info i = info_of(f->env.l);
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(i.store_error, 0);
	assert_true(i.head > 8 * 8 * TIER_PAGE);
	print_info("4 threads", f->env.l);
	for (int t = 0; t < TIER_THREADS; t++)
		model_free(&args[t].m);
}

/* FLUSHALL on a store that spilled: every key is gone, the store goes on, old records never come
 * back from the device. */
static void test_tier_flush_all_forgets_what_the_device_holds(void **state)
{
	tier *f = *state;
	enum { N = 6000 };
	tier_load(f, N, "fa");
	hlog_info i = info_of(f->env.l);
	assert_true(i.head > i.begin);   /* spilled: the device holds the oldest records */
	hlog_session_protect(f->ts.s);
	assert_int_equal(hlog_flush_all(f->ts.s), HLOG_OK);
	hlog_session_unprotect(f->ts.s);
	for (int k = 0; k < N; k++)
		f->m.keys[k].alive = false;
	model_read_all(&f->ts, &f->m);
	assert_int_equal(hlog_key_count(f->env.l), 0);
	assert_int_equal(info_of(f->env.l).pending_reads, i.pending_reads);   /* not one went to the device */
	model_load(&f->ts, &f->m, 2);
	model_read_all(&f->ts, &f->m);
	assert_int_equal(hlog_key_count(f->env.l), (uint64_t)N);
	model_scan_check(&f->ts, &f->m, 0);
}

/* A write that waits for a frame whose page write sits in ANOTHER session's queue sleeps on its
 * own fd with nothing of its own in flight, and is woken through that fd when the other session's
 * completion (and then the eviction) frees the frame: no tick is needed. */
typedef struct sig_arg {
	hlog *l;
	model *m;
	_Atomic int sleeping;        /* A waits on its fd with nothing in flight */
	_Atomic int done;
	int rc, woken, timeouts, sleeps;
} sig_arg;

static void *sig_waiter(void *p)
{
	sig_arg *a = p;
	tsess ts;
	tsess_open(&ts, a->l);
	static uint8_t val[2000];
	memset(val, 'w', sizeof(val));
	top o = { .kind = T_UPSERT, .m = a->m, .val = val, .len = sizeof(val) };
	hlog_session_protect(ts.s);
	/* Write until a page turn finds no frame: the pages to evict were claimed by the other
	 * session, which has not submitted their writes. */
	a->rc = tier_fill(&ts, &o, false);
	while (a->rc == HLOG_PENDING) {
		o.parked = true;
		o.ready = 0;
		while (!o.ready) {
			hlog_session_poll(ts.s);
			if (o.ready)
				break;
			uint32_t inflight = hlog_session_inflight(ts.s);
			hlog_session_unprotect(ts.s);
			if (inflight == 0) {
				a->sleeps++;
				atomic_store(&a->sleeping, 1);
			}
			int n = store_fd_wait(ts.fd, 10000);
			atomic_store(&a->sleeping, 0);
			if (n > 0 && inflight == 0)
				a->woken++;
			else if (n <= 0 && inflight == 0)
				a->timeouts++;
			hlog_session_protect(ts.s);
		}
		a->rc = top_run(&ts, &o);
		if (a->rc != HLOG_PENDING)
			hlog_session_release(ts.s, &o);
	}
	hlog_session_unprotect(ts.s);
	atomic_store(&a->done, 1);
	tsess_close(&ts);
	return NULL;
}

static void test_tier_a_frame_wait_is_woken_through_the_waiting_sessions_fd(void **state)
{
	tier *f = *state;
	tsess *b = &f->ts;
	model_init(&f->m, 100000, "b");
	model_init(&f->other, 100000, "a");
	/* B fills memory without ever polling: its page turns claim the page writes, which stay in its
	 * queue, unsubmitted, until one of its writes must wait for them. */
	static uint8_t val[2000];
	memset(val, 'b', sizeof(val));
	top o = { .kind = T_UPSERT, .m = &f->m, .val = val, .len = sizeof(val) };
	hlog_session_protect(b->s);
	assert_int_equal(tier_fill(b, &o, true), HLOG_PENDING);
	assert_true(hlog_session_inflight(b->s) > 0);   /* queued, never submitted */
	hlog_session_unprotect(b->s);

	sig_arg a = { .l = f->env.l, .m = &f->other };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, sig_waiter, &a), 0);
	while (!atomic_load(&a.sleeping) && !atomic_load(&a.done))
		usleep(1000);
	/* B comes back to its loop: submits, reaps, and its refreshes let the eviction run. */
	while (!atomic_load(&a.done)) {
		hlog_session_protect(b->s);
		hlog_session_poll(b->s);
		hlog_session_unprotect(b->s);
		usleep(200);
	}
	pthread_join(th, NULL);
	assert_int_equal(a.rc, HLOG_OK);
	assert_true(a.sleeps > 0);
	assert_true(a.woken > 0);
	assert_int_equal(a.timeouts, 0);
	assert_true(info_of(f->env.l).flush_waits > 0);
}

/* Spanning records back to back in a memory of 8 pages: a 5-page record right before a 4-page
 * one means the second turn must evict part of the first, which is written whole first, up to the
 * page the turn starts from (that page is closed). Everything reads back. */
static void test_tier_spanning_records_back_to_back_evict_each_other(void **state)
{
	tier *f = *state;
	enum { N = 60 };
	model_init(&f->m, N, "span");
	for (int i = 0; i < N; i++) {
		size_t len = i % 3 == 0 ? 5 * TIER_PAGE - 1000 - (size_t)i : i % 3 == 1 ? 4 * TIER_PAGE - 3000 + (size_t)i : 100;
		tier_upsert_sized(&f->ts, &f->m, i, len, 1);
	}
	model_read_all(&f->ts, &f->m);
	hlog_info i = info_of(f->env.l);
	assert_true(i.head > 20 * TIER_PAGE);
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(hlog_key_count(f->env.l), (uint64_t)N);
}

#include "compact_suite.h"
#include "parts_suite.h"

#define TIER_TESTS \
	COMPACT_TESTS, \
	PARTS_TESTS, \
	TIER_TEST(test_tier_store_larger_than_memory_matches_a_model), \
	TIER_TEST_SHAPED(test_tier_keys_sharing_a_tag_are_told_apart_by_chain_walks_on_the_device, tier_small_index), \
	TIER_TEST(test_tier_ready_callback_runs_exactly_once_per_pending_op), \
	TIER_TEST(test_tier_a_version_written_while_the_read_was_pending_wins), \
	TIER_TEST(test_tier_deleted_and_expired_keys_never_come_back_from_the_device), \
	TIER_TEST_SHAPED(test_tier_huge_values_span_pages_and_come_back_from_the_device, tier_huge), \
	TIER_TEST(test_tier_spanning_records_back_to_back_evict_each_other), \
	TIER_TEST_SHAPED(test_tier_concurrent_sessions_each_poll_their_own_queue, tier_no_session), \
	TIER_TEST(test_tier_a_frame_wait_is_woken_through_the_waiting_sessions_fd), \
	TIER_TEST(test_tier_flush_all_forgets_what_the_device_holds)

int main(void)
{
	if (!store_env_backend_available("tier suite", TIER_TYPE, TIER_DIR))
		return 77;
	const struct CMUnitTest tests[] = {
		TIER_TESTS,
		TIER_EXTRA_TESTS
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
