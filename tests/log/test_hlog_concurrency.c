/*
 * test_hlog_concurrency.c - the log under several threads, each with its own session: RMW
 * increments stay exact across in-place, fuzzy and RCU paths, readers never see a torn value,
 * concurrent inserts and deletes of the same keys keep an exact count, FLUSHALL during traffic.
 *
 * Filler records keep the tail moving so that hot keys keep falling below ReadOnly: that is what
 * sends updates through the fuzzy region and read-copy-update while other threads work in place.
 *
 * Each test runs in a fixture (setup, teardown) that holds what the threads share and closes the
 * store the test opened; each thread runs one step function iters times in a session of its own
 * (worker_main), refreshing every 32 steps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "log_test.h"

#define KIB 1024ULL
#define THREADS 4   /* the append test's letter counts assume 4 */

typedef struct shared shared;

typedef struct worker_arg {
	shared *sh;
	int idx;
} worker_arg;

/* One operation of thread w->idx, the i-th, in its protected session s. */
typedef void (*worker_step_fn)(worker_arg *w, hlog_session *s, int i);

struct shared {
	hlog *l;
	int iters;
	worker_step_fn step;
	_Atomic int start;
	_Atomic uint64_t ok;          /* successful operations counted by the test */
	_Atomic uint64_t torn;
	_Atomic uint64_t errors;
};

static int setup(void **state)
{
	*state = calloc(1, sizeof(shared));
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	shared *sh = *state;
	hlog_close(sh->l);
	free(sh);
	return 0;
}

/* The test's store: pages of 4 KiB, closed by teardown. */
static shared *open_store(void **state, uint64_t memory, int mutable_percent, int iters)
{
	shared *sh = *state;
	hlog_config c = log_test_config(memory, 4 * KIB, mutable_percent);
	assert_int_equal(hlog_open(&sh->l, &c), 0);
	sh->iters = iters;
	return sh;
}

static void *worker_main(void *arg)
{
	worker_arg *w = arg;
	shared *sh = w->sh;
	hlog_session *s;
	if (hlog_session_open(sh->l, &s) != 0) {
		atomic_fetch_add(&sh->errors, 1);
		return NULL;
	}
	while (!atomic_load(&sh->start))
		;
	hlog_session_protect(s);
	for (int i = 0; i < sh->iters; i++) {
		sh->step(w, s, i);
		if (i % 32 == 0)
			hlog_session_refresh(s);
	}
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

/* THREADS threads running step, started together. */
static void run_threads(shared *sh, worker_step_fn step)
{
	pthread_t th[THREADS];
	worker_arg args[THREADS];
	atomic_store(&sh->start, 0);
	sh->step = step;
	for (int i = 0; i < THREADS; i++) {
		args[i].sh = sh;
		args[i].idx = i;
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &args[i]), 0);
	}
	atomic_store(&sh->start, 1);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
}

/* A session of the test's own thread, protected, to check what the threads left. */
static hlog_session *check_begin(shared *sh)
{
	hlog_session *s;
	assert_int_equal(hlog_session_open(sh->l, &s), 0);
	hlog_session_protect(s);
	return s;
}

static void check_end(hlog_session *s)
{
	hlog_session_unprotect(s);
	hlog_session_close(s);
}

static void filler(hlog_session *s, int thread, int n)
{
	uint8_t val[100];
	test_key t;
	memset(val, 'f', sizeof(val));
	snprintf(t.buf, sizeof(t.buf), "fill:%d:%d", thread, n);
	hlog_key_init(&t.k, t.buf, strlen(t.buf));
	hlog_upsert(s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY);
}

/* ---------------- increments ---------------- */

static void incr_step(worker_arg *w, hlog_session *s, int i)
{
	shared *sh = w->sh;
	test_key t;
	test_key_make(&t, "counter", (i * 7 + w->idx) % 16);
	if (incr_by(s, &t.k, 1, HLOG_NO_EXPIRY) == HLOG_OK)
		atomic_fetch_add_explicit(&sh->ok, 1, memory_order_relaxed);
	else
		atomic_fetch_add(&sh->errors, 1);
	if (i % 16 == 0)
		filler(s, w->idx, i);
}

static void test_concurrent_rmw_increments_on_shared_keys_are_exact(void **state)
{
	shared *sh = open_store(state, 1024 * KIB, 10, 20000);
	run_threads(sh, incr_step);
	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(atomic_load(&sh->ok), (uint64_t)THREADS * sh->iters);

	hlog_session *s = check_begin(sh);
	uint64_t total = 0;
	for (int k = 0; k < 16; k++) {
		test_key t;
		test_key_make(&t, "counter", k);
		total += read_counter(s, &t.k);
	}
	assert_int_equal(total, (uint64_t)THREADS * sh->iters);
	hlog_info i = info_of(sh->l);
	print_message("log %llu of %llu bytes, %llu in place, %llu RCU, %llu retries\n",
	              (unsigned long long)i.tail, (unsigned long long)i.memory_bytes,
	              (unsigned long long)i.inplace_updates, (unsigned long long)i.rcu_updates,
	              (unsigned long long)i.retries);
	assert_true(i.inplace_updates > 0);
	assert_true(i.rcu_updates > 0);          /* counters did fall below ReadOnly */
	assert_int_equal(i.keys, 16 + THREADS * ((sh->iters + 15) / 16));
	assert_int_equal(i.log_full_errors, 0);
	check_end(s);
}

/* ---------------- appends: values that outgrow their record ---------------- */

typedef struct append_ctx {
	uint8_t c;
	size_t n;            /* bytes to append */
	size_t old_len;
} append_ctx;

static int append_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	append_ctx *a = ctx;
	a->old_len = old ? old->len : 0;
	out->action = HLOG_RMW_WRITE;
	out->new_len = a->old_len + a->n;
	out->expire_ms = HLOG_NO_EXPIRY;
	return 0;
}

static void append_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	append_ctx *a = ctx;
	if (!in_place && old)
		memcpy(dst, old->ptr, old->len);
	memset(dst + a->old_len, a->c, a->n);
}

static const hlog_rmw_ops append_ops = { append_plan, append_fill };

#define APPEND_KEYS 4

static void append_step(worker_arg *w, hlog_session *s, int i)
{
	test_key t;
	test_key_make(&t, "append", i % APPEND_KEYS);
	append_ctx a = { .c = (uint8_t)('A' + w->idx), .n = (size_t)w->idx + 1 };
	if (hlog_rmw(s, &t.k, &append_ops, &a) != HLOG_OK)
		atomic_fetch_add(&w->sh->errors, 1);
}

/* Growth forces RCU from mutable records, racing in-place appends to the same record. Threads grow
 * the values by different amounts, so one may copy a record that another still fits in place: the
 * seal is what keeps that writer out of a version that was just copied. */
static void test_concurrent_appends_that_outgrow_their_records_lose_nothing(void **state)
{
	shared *sh = open_store(state, 4096 * KIB, 90, 1000);
	run_threads(sh, append_step);
	assert_int_equal(atomic_load(&sh->errors), 0);
	hlog_session *s = check_begin(sh);
	for (int k = 0; k < APPEND_KEYS; k++) {
		test_key t;
		read_buf b = { .calls = 0 };
		int per[THREADS] = { 0 };
		test_key_make(&t, "append", k);
		assert_int_equal(hlog_read(s, &t.k, read_copy_fn, &b), HLOG_OK);
		assert_int_equal(b.len, (1 + 2 + 3 + 4) * sh->iters / APPEND_KEYS);
		for (size_t j = 0; j < b.len; j++) {
			assert_true(b.data[j] >= 'A' && b.data[j] < 'A' + THREADS);
			per[b.data[j] - 'A']++;
		}
		for (int th = 0; th < THREADS; th++)
			assert_int_equal(per[th], (th + 1) * sh->iters / APPEND_KEYS);
	}
	assert_true(info_of(sh->l).rcu_updates >= (uint64_t)(THREADS * sh->iters / 8));
	check_end(s);
}

/* ---------------- torn values ---------------- */

#define VAL_LEN 64

static void check_value(void *ctx, const hlog_value *v)
{
	shared *sh = ctx;
	bool torn = v->len != VAL_LEN;
	for (size_t j = 1; j < v->len && !torn; j++)
		torn = v->ptr[j] != v->ptr[0];
	if (torn)
		atomic_fetch_add(&sh->torn, 1);
}

/* Even threads write, odd ones read. */
static void tear_step(worker_arg *w, hlog_session *s, int i)
{
	shared *sh = w->sh;
	uint8_t val[VAL_LEN];
	test_key t;
	test_key_make(&t, "tear", i % 8);
	if (w->idx % 2 == 0) {
		memset(val, 'a' + (i + w->idx) % 26, sizeof(val));
		if (hlog_upsert(s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY) != HLOG_OK)
			atomic_fetch_add(&sh->errors, 1);
		if (i % 16 == 0)
			filler(s, w->idx, i);
	} else if (hlog_read(s, &t.k, check_value, sh) == HLOG_OK) {
		atomic_fetch_add_explicit(&sh->ok, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add(&sh->errors, 1);   /* the keys exist from the start */
	}
}

/* The keys exist before the threads start: a reader that runs before every writer (threads start
 * in any order, and on a loaded machine a reader may finish before a writer is scheduled at all)
 * still reads a value each time, so the count of reads is exact rather than "some". */
static void test_concurrent_upserts_and_reads_never_see_a_torn_value(void **state)
{
	shared *sh = open_store(state, 1024 * KIB, 10, 20000);
	hlog_session *s0 = check_begin(sh);
	for (int k = 0; k < 8; k++) {
		uint8_t val[VAL_LEN];
		test_key t;
		test_key_make(&t, "tear", k);
		memset(val, 'z', sizeof(val));
		assert_int_equal(hlog_upsert(s0, &t.k, val, sizeof(val), HLOG_NO_EXPIRY), HLOG_OK);
	}
	check_end(s0);
	run_threads(sh, tear_step);
	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(atomic_load(&sh->torn), 0);
	assert_int_equal(atomic_load(&sh->ok), (uint64_t)(THREADS / 2) * sh->iters);   /* every read found one */
	hlog_info i = info_of(sh->l);
	assert_true(i.rcu_updates > 0);
	assert_true(i.inplace_updates > 0);
}

/* ---------------- same keys from every thread ---------------- */

#define SAME_KEYS 1000

/* Each thread walks the keys in its own order. */
static void insert_step(worker_arg *w, hlog_session *s, int i)
{
	test_key t;
	int k = (i * (2 * w->idx + 1) + w->idx * 250) % SAME_KEYS;
	test_key_make(&t, "same", k);
	if (hlog_upsert(s, &t.k, "v", 1, HLOG_NO_EXPIRY) != HLOG_OK)
		atomic_fetch_add(&w->sh->errors, 1);
}

static void delete_step(worker_arg *w, hlog_session *s, int i)
{
	shared *sh = w->sh;
	test_key t;
	int k = (i * (2 * w->idx + 1) + w->idx * 333) % SAME_KEYS;
	test_key_make(&t, "same", k);
	int rc = hlog_delete(s, &t.k);
	if (rc == HLOG_OK)
		atomic_fetch_add(&sh->ok, 1);
	else if (rc != HLOG_NOTFOUND)
		atomic_fetch_add(&sh->errors, 1);
}

static void test_concurrent_inserts_and_deletes_of_the_same_keys_keep_an_exact_count(void **state)
{
	shared *sh = open_store(state, 1024 * KIB, 10, SAME_KEYS);
	run_threads(sh, insert_step);
	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(hlog_key_count(sh->l), SAME_KEYS);
	run_threads(sh, delete_step);
	assert_int_equal(atomic_load(&sh->errors), 0);
	assert_int_equal(atomic_load(&sh->ok), SAME_KEYS);   /* each key deleted exactly once */
	assert_int_equal(hlog_key_count(sh->l), 0);
}

/* ---------------- FLUSHALL during traffic ---------------- */

/* Thread 0 empties the store every 500 steps while the others write and read. */
static void flush_step(worker_arg *w, hlog_session *s, int i)
{
	shared *sh = w->sh;
	if (w->idx == 0) {
		if (i % 500 == 0 && hlog_flush_all(s) != HLOG_OK)
			atomic_fetch_add(&sh->errors, 1);
		return;
	}
	test_key t;
	test_key_make(&t, "fl", (i * 13 + w->idx) % 3000);
	int rc;
	if (i % 3 == 0) {
		rc = incr_by(s, &t.k, 1, HLOG_NO_EXPIRY);
	} else if (i % 3 == 1) {
		uint8_t val[150];
		memset(val, 'q', sizeof(val));
		rc = hlog_upsert(s, &t.k, val, (size_t)(i % 150), HLOG_NO_EXPIRY);
	} else {
		read_buf b = { .calls = 0 };
		rc = hlog_read(s, &t.k, read_copy_fn, &b) < 0 ? -1 : 0;
		if (i % 7 == 0)
			rc = hlog_delete(s, &t.k);
	}
	if (rc < 0 && rc != SPW_E_LOG_FULL)
		atomic_fetch_add(&sh->errors, 1);
}

static void test_flush_all_during_traffic_is_safe_and_exact_once_idle(void **state)
{
	shared *sh = open_store(state, 256 * KIB, 50, 6000);
	run_threads(sh, flush_step);
	assert_int_equal(atomic_load(&sh->errors), 0);

	hlog_session *s = check_begin(sh);
	assert_int_equal(hlog_flush_all(s), HLOG_OK);
	assert_int_equal(hlog_key_count(sh->l), 0);
	assert_int_equal(hlog_expires_count(sh->l), 0);
	for (int k = 0; k < 10; k++) {
		test_key t;
		test_key_make(&t, "after", k);
		assert_int_equal(hlog_upsert(s, &t.k, "x", 1, 5000000000000LL), HLOG_OK);
	}
	assert_int_equal(hlog_key_count(sh->l), 10);
	assert_int_equal(hlog_expires_count(sh->l), 10);
	hlog_info i = info_of(sh->l);
	assert_true(i.allocated_pages <= i.max_pages);
	assert_true(i.begin <= i.tail && i.head <= i.begin);
	check_end(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_concurrent_rmw_increments_on_shared_keys_are_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_appends_that_outgrow_their_records_lose_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_upserts_and_reads_never_see_a_torn_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_inserts_and_deletes_of_the_same_keys_keep_an_exact_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_all_during_traffic_is_safe_and_exact_once_idle, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
