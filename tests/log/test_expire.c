/*
 * test_expire.c - active expiry (log/expire.c): steps of an expiry cycle remove the keys whose
 * newest version in memory has expired, without any read of theirs, and nothing else: a key set
 * again without a TTL stays, a key whose older version had a TTL but whose newest has none stays, a
 * key not yet expired stays, and with writers racing the steps on the same keys no live key is
 * lost and no removed one comes back. Each test runs memory-only and over a LocalMemory device;
 * with the device, what lies below HeadAddress is left alone (compaction's part), which the steps'
 * cold_chains counter shows.
 *
 * Time is the sessions' clock (hlog_session_set_now), never the wall clock: a key "expires" when
 * the stepping session's now passes its expire_ms, so no test sleeps for a TTL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "store_env.h"

#define KIB 1024ULL
#define MIB (1024ULL * 1024ULL)
#define NOW 1000000LL                /* the writers' clock */
#define LATER (NOW + 10000)          /* the stepping session's clock once the TTLs have passed */
#define STEP_BUCKETS 64
#define RACE_THREADS 3
#define RACE_KEYS 600                /* per writer */

/* ---------------- the fixture: a store, memory-only or on a LocalMemory device ---------------- */

typedef struct xstore {
	bool dev;
	store_env env;               /* with the device */
	hlog *l;
} xstore;

static void xstore_open(xstore *x, bool dev, uint64_t memory, uint64_t index_bytes)
{
	memset(x, 0, sizeof(*x));
	x->dev = dev;
	hlog_config c = log_test_config(memory, 64 * KIB, 90);
	c.index_bytes = index_bytes;
	if (dev) {
		store_env_open(&x->env, "localmemory", "/tmp/spw-expire.XXXXXX", 0, &c);
		x->l = x->env.l;
	} else {
		assert_int_equal(hlog_open(&x->l, &c), 0);
	}
}

static void xstore_close(xstore *x)
{
	if (x->dev)
		store_env_close(&x->env);
	else
		hlog_close(x->l);
	memset(x, 0, sizeof(*x));
}

static int fixture_setup(void **state)
{
	*state = calloc(1, sizeof(xstore));
	return *state ? 0 : -1;
}

static int fixture_teardown(void **state)
{
	xstore *x = *state;
	if (x->l)
		xstore_close(x);
	free(x);
	return 0;
}

/* ---------------- sessions that run each operation to completion ---------------- */

typedef struct xsess {
	hlog_session *s;
	int fd;                      /* -1 without a device */
} xsess;

static void noop_ready(void *cb_arg, void *op_ctx)
{
	(void)cb_arg;
	(void)op_ctx;
}

/* A session of x's store at now. With the device attached; cmocka asserts, so test thread only. */
static void xsess_open(xsess *q, xstore *x, int64_t now)
{
	if (x->dev) {
		q->s = store_session_open(x->l, noop_ready, NULL, now, &q->fd);
	} else {
		assert_int_equal(hlog_session_open(x->l, &q->s), 0);
		hlog_session_set_now(q->s, now);
		q->fd = -1;
	}
}

/* The same for other threads: 0 or an error, no assert. */
static int xsess_open_thread(xsess *q, hlog *l, bool dev, int64_t now)
{
	q->fd = -1;
	int rc = hlog_session_open(l, &q->s);
	if (rc < 0)
		return rc;
	hlog_session_set_now(q->s, now);
	if (dev) {
		if ((rc = hlog_session_attach(q->s, noop_ready, NULL)) < 0)
			return rc;
		q->fd = hlog_session_fd(q->s);
	}
	return 0;
}

/* Between operations: submit what the last one queued (page writes its page turn claimed, reads),
 * reap completions; while IO is in flight, sleep on the fd a little. */
static void xsess_poll(xsess *q, bool wait)
{
	if (q->fd < 0)
		return;
	hlog_session_poll(q->s);
	if (wait)
		store_fd_wait(q->fd, hlog_session_inflight(q->s) > 0 ? 10 : 1);
}

typedef struct xop {
	int kind;                    /* 'u' upsert, 'r' read, 'd' delete */
	hlog_key k;
	const void *val;
	size_t len;
	int64_t expire_ms;
	read_buf *out;               /* 'r' */
} xop;

static int xop_once(hlog_session *s, xop *o)
{
	switch (o->kind) {
	case 'u':
		return hlog_upsert(s, &o->k, o->val, o->len, o->expire_ms);
	case 'd':
		return hlog_delete(s, &o->k);
	default:
		o->out->calls = 0;
		return hlog_read(s, &o->k, read_copy_fn, o->out);
	}
}

/* Run o until it does not go pending, as the server re-runs a parked command. Its result. */
static int xop_run(xsess *q, xop *o)
{
	int rc;
	hlog_session_set_op(q->s, o);
	for (int tries = 0; ; tries++) {
		hlog_session_protect(q->s);
		rc = xop_once(q->s, o);
		hlog_session_unprotect(q->s);
		if (rc != HLOG_PENDING || tries > 200000)
			break;
		xsess_poll(q, true);
	}
	hlog_session_release(q->s, o);
	xsess_poll(q, false);
	return rc;
}

static int x_set(xsess *q, const hlog_key *k, const void *v, size_t len, int64_t expire_ms)
{
	xop o = { .kind = 'u', .k = *k, .val = v, .len = len, .expire_ms = expire_ms };
	return xop_run(q, &o);
}

static int x_del(xsess *q, const hlog_key *k)
{
	xop o = { .kind = 'd', .k = *k };
	return xop_run(q, &o);
}

static int x_get(xsess *q, const hlog_key *k, read_buf *out)
{
	xop o = { .kind = 'r', .k = *k, .out = out };
	return xop_run(q, &o);
}

/* One step, protected around it and polled after it (hlog.h). The next cursor. */
static uint64_t x_step(xsess *q, uint64_t cursor, hlog_expire_stats *st)
{
	hlog_session_protect(q->s);
	cursor = hlog_expire_step(q->s, cursor, STEP_BUCKETS, st);
	hlog_session_unprotect(q->s);
	xsess_poll(q, false);
	return cursor;
}

/* Steps from cursor 0 until the index is covered once. */
static void x_sweep(xsess *q, hlog_expire_stats *st)
{
	uint64_t cursor = 0;
	int steps = 0;
	memset(st, 0, sizeof(*st));
	do {
		cursor = x_step(q, cursor, st);
		assert_true(++steps < 1000000);
	} while (cursor != 0);
	assert_int_equal(st->err, 0);
}

/* Filler: n keys of 200 bytes without a TTL, so that the records before them leave the mutable
 * region (and, with a small memory on a device, memory). */
static void x_fill(xsess *q, const char *prefix, int n)
{
	uint8_t v[200];
	memset(v, 'f', sizeof(v));
	for (int i = 0; i < n; i++) {
		test_key t;
		test_key_make(&t, prefix, i);
		assert_int_equal(x_set(q, &t.k, v, sizeof(v), HLOG_NO_EXPIRY), HLOG_OK);
	}
}

/* ---------------- single-threaded behaviour ---------------- */

/* 1000 keys with short TTLs and 300 without: after one sweep at a later clock, without a read, the
 * count is 300, the expires count 0, and the step says it removed the 1000 (so does expired_keys). */
static void removes_keys_with_short_ttls(xstore *x, bool dev)
{
	xstore_open(x, dev, 64 * MIB, 256 * KIB);
	xsess w, e;
	xsess_open(&w, x, NOW);
	xsess_open(&e, x, LATER);
	for (int i = 0; i < 1000; i++) {
		test_key t;
		test_key_make(&t, "ttl", i);
		assert_int_equal(x_set(&w, &t.k, "v", 1, NOW + 1 + i % 5), HLOG_OK);
	}
	for (int i = 0; i < 300; i++) {
		test_key t;
		test_key_make(&t, "keep", i);
		assert_int_equal(x_set(&w, &t.k, "v", 1, HLOG_NO_EXPIRY), HLOG_OK);
	}
	assert_int_equal(hlog_key_count(x->l), 1300);
	assert_int_equal(hlog_expires_count(x->l), 1000);
	uint64_t removed0 = info_of(x->l).expired_keys;

	hlog_expire_stats st;
	x_sweep(&e, &st);
	assert_int_equal(st.sampled, 1000);
	assert_int_equal(st.expired, 1000);
	assert_int_equal(hlog_key_count(x->l), 300);
	assert_int_equal(hlog_expires_count(x->l), 0);
	assert_int_equal(info_of(x->l).expired_keys - removed0, 1000);

	/* A second sweep finds nothing: the tombstones are not sampled. */
	x_sweep(&e, &st);
	assert_int_equal(st.sampled, 0);
	assert_int_equal(st.expired, 0);
	read_buf b;
	for (int i = 0; i < 300; i++) {
		test_key t;
		test_key_make(&t, "keep", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_OK);
	}
	test_key t;
	test_key_make(&t, "ttl", 7);
	assert_int_equal(x_get(&w, &t.k, &b), HLOG_NOTFOUND);
	hlog_session_close(w.s);
	hlog_session_close(e.s);
}

static void test_expire_removes_keys_with_short_ttls_without_a_read(void **state)
{
	removes_keys_with_short_ttls(*state, false);
}

static void test_expire_removes_keys_with_short_ttls_without_a_read_on_a_device(void **state)
{
	removes_keys_with_short_ttls(*state, true);
}

/*
 * The newest version decides, wherever the older ones are:
 *   reset:   TTL, then set again without one (in the mutable region: a new record, the expiry's
 *            presence changed)                                                       -> stays
 *   older:   TTL, filler pushes it out of the mutable region, then set without one   -> stays
 *   revived: no TTL, filler, then set with a TTL that passes                         -> removed
 *   future:  a TTL that has not passed at the stepping clock                         -> stays
 *   deleted: TTL, then DEL (a tombstone is not sampled)                              -> absent
 */
static void newest_version_decides(xstore *x, bool dev)
{
	xstore_open(x, dev, dev ? 1 * MIB : 64 * MIB, 256 * KIB);
	xsess w, e;
	xsess_open(&w, x, NOW);
	xsess_open(&e, x, LATER);
	const int n = 50;
	for (int i = 0; i < n; i++) {
		test_key t;
		test_key_make(&t, "reset", i);
		assert_int_equal(x_set(&w, &t.k, "v1", 2, NOW + 5), HLOG_OK);
		assert_int_equal(x_set(&w, &t.k, "v2", 2, HLOG_NO_EXPIRY), HLOG_OK);
		test_key_make(&t, "older", i);
		assert_int_equal(x_set(&w, &t.k, "v1", 2, NOW + 5), HLOG_OK);
		test_key_make(&t, "revived", i);
		assert_int_equal(x_set(&w, &t.k, "v1", 2, HLOG_NO_EXPIRY), HLOG_OK);
		test_key_make(&t, "deleted", i);
		assert_int_equal(x_set(&w, &t.k, "v1", 2, NOW + 5), HLOG_OK);
		assert_int_equal(x_del(&w, &t.k), HLOG_OK);
	}
	/* In memory-only mode 20% of 64 MiB is far more than this filler: the older versions leave
	 * the mutable region only with the device's 1 MiB (and some leave memory). */
	x_fill(&w, "fill", dev ? 3000 : 100);
	for (int i = 0; i < n; i++) {
		test_key t;
		test_key_make(&t, "older", i);
		assert_int_equal(x_set(&w, &t.k, "v2", 2, HLOG_NO_EXPIRY), HLOG_OK);
		test_key_make(&t, "revived", i);
		assert_int_equal(x_set(&w, &t.k, "v2", 2, NOW + 5), HLOG_OK);
		test_key_make(&t, "future", i);
		assert_int_equal(x_set(&w, &t.k, "v2", 2, LATER + 100000), HLOG_OK);
	}
	uint64_t keys = hlog_key_count(x->l);
	hlog_expire_stats st;
	x_sweep(&e, &st);
	assert_int_equal(st.expired, n);                      /* the revived ones */
	assert_int_equal(st.sampled, 2 * n);                  /* revived and future */
	assert_int_equal(hlog_key_count(x->l), keys - n);
	assert_int_equal(hlog_expires_count(x->l), n);        /* the future ones */
	read_buf b;
	for (int i = 0; i < n; i++) {
		test_key t;
		test_key_make(&t, "reset", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_OK);
		assert_memory_equal(b.data, "v2", 2);
		test_key_make(&t, "older", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_OK);
		assert_memory_equal(b.data, "v2", 2);
		assert_int_equal(b.expire_ms, HLOG_NO_EXPIRY);
		test_key_make(&t, "future", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_OK);
		test_key_make(&t, "revived", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_NOTFOUND);
		test_key_make(&t, "deleted", i);
		assert_int_equal(x_get(&w, &t.k, &b), HLOG_NOTFOUND);
	}
	hlog_session_close(w.s);
	hlog_session_close(e.s);
}

static void test_expire_goes_by_the_newest_version_of_each_key(void **state)
{
	newest_version_decides(*state, false);
}

static void test_expire_goes_by_the_newest_version_of_each_key_on_a_device(void **state)
{
	newest_version_decides(*state, true);
}

/* Keys that expired and then went to the device are left to compaction: a sweep counts the chains
 * it stopped at HeadAddress and removes nothing there; the keys still count until read. */
static void test_expire_leaves_the_device_part_alone(void **state)
{
	xstore *x = *state;
	xstore_open(x, true, 512 * KIB, 256 * KIB);
	xsess w, e;
	xsess_open(&w, x, NOW);
	xsess_open(&e, x, LATER);
	for (int i = 0; i < 200; i++) {
		test_key t;
		test_key_make(&t, "cold", i);
		assert_int_equal(x_set(&w, &t.k, "v", 1, NOW + 5), HLOG_OK);
	}
	x_fill(&w, "fill", 8000);   /* 1.6 MB through a 512 KiB memory: the cold keys are on the device */
	hlog_info i = info_of(x->l);
	assert_true(i.head > HLOG_FIRST_ADDRESS);
	hlog_expire_stats st;
	x_sweep(&e, &st);
	assert_true(st.cold_chains > 0);
	assert_int_equal(hlog_key_count(x->l), 8200 - st.expired);
	assert_true(st.expired < 200);   /* the few cold keys still in memory, if any */
	hlog_session_close(w.s);
	hlog_session_close(e.s);
}

/* ---------------- writers racing the steps ---------------- */

/*
 * RACE_THREADS writers, each owning RACE_KEYS keys of its own in a small index (long chains shared
 * with the other writers' keys), write each key over and over, choosing for each write: a value
 * without a TTL, one with a TTL far ahead (both live), one with a TTL already passed, or a DEL (both
 * absent). The value names the key and the write's number. Every third write is read back at once:
 * a live value must be exactly the one written (an expirer that removed it lost a live key), an
 * absent one must be absent (one that came back was resurrected). Meanwhile the expirer steps
 * through the index again and again at the same clock. At the end every key is read and compared
 * with its writer's model, and once a last sweep has run the count is exactly the live keys.
 */
typedef struct race {
	hlog *l;
	bool dev;
	_Atomic int writers_left;
	_Atomic int stop;
	_Atomic uint64_t lost, resurrected, wrong, errors;
	_Atomic uint64_t removed;      /* the expirer's removals */
	int state[RACE_THREADS][RACE_KEYS];   /* 0 absent, else the live write's number */
	int64_t expire[RACE_THREADS][RACE_KEYS];
} race;

typedef struct race_arg {
	race *r;
	int idx;
} race_arg;

static void race_key(test_key *t, int w, int i)
{
	char prefix[16];
	snprintf(prefix, sizeof(prefix), "w%d", w);
	test_key_make(t, prefix, i);
}

static int race_val(char *buf, size_t cap, int w, int i, int n)
{
	return snprintf(buf, cap, "w%d-k%d-n%d-%s", w, i, n, n % 2 ? "odd" : "even-longer-value");
}

/* Write number n of key i by writer w: what it writes and the model's state after it. */
static int race_write(race *r, xsess *q, int w, int i, int n, unsigned *seed)
{
	test_key t;
	char v[64];
	race_key(&t, w, i);
	int len = race_val(v, sizeof(v), w, i, n);
	int choice = (int)(rand_r(seed) % 8);
	int rc;
	if (choice < 3) {
		rc = x_set(q, &t.k, v, (size_t)len, HLOG_NO_EXPIRY);
		r->state[w][i] = n;
		r->expire[w][i] = HLOG_NO_EXPIRY;
	} else if (choice < 5) {
		rc = x_set(q, &t.k, v, (size_t)len, NOW + 1000000);
		r->state[w][i] = n;
		r->expire[w][i] = NOW + 1000000;
	} else if (choice < 7) {
		rc = x_set(q, &t.k, v, (size_t)len, NOW - 1 - choice);
		r->state[w][i] = 0;
	} else {
		rc = x_del(q, &t.k);
		rc = rc == HLOG_NOTFOUND ? HLOG_OK : rc;
		r->state[w][i] = 0;
	}
	return rc;
}

/* Read key i of writer w and compare with the model. */
static void race_check(race *r, xsess *q, int w, int i)
{
	test_key t;
	read_buf b;
	char v[64];
	race_key(&t, w, i);
	int rc = x_get(q, &t.k, &b);
	int n = r->state[w][i];
	if (rc != HLOG_OK && rc != HLOG_NOTFOUND) {
		atomic_fetch_add(&r->errors, 1);
	} else if (n && rc == HLOG_NOTFOUND) {
		atomic_fetch_add(&r->lost, 1);
	} else if (!n && rc == HLOG_OK) {
		atomic_fetch_add(&r->resurrected, 1);
	} else if (n) {
		int len = race_val(v, sizeof(v), w, i, n);
		if (b.len != (size_t)len || memcmp(b.data, v, (size_t)len) != 0 || b.expire_ms != r->expire[w][i])
			atomic_fetch_add(&r->wrong, 1);
	}
}

static void *race_writer(void *arg)
{
	race_arg *a = arg;
	race *r = a->r;
	xsess q;
	unsigned seed = 12345u + (unsigned)a->idx;
	if (xsess_open_thread(&q, r->l, r->dev, NOW) < 0) {
		atomic_fetch_add(&r->errors, 1);
		atomic_fetch_sub(&r->writers_left, 1);
		return NULL;
	}
	int rounds = r->dev ? 12 : 25;
	for (int n = 1; n <= rounds; n++) {
		for (int i = 0; i < RACE_KEYS; i++) {
			if (race_write(r, &q, a->idx, i, n, &seed) != HLOG_OK)
				atomic_fetch_add(&r->errors, 1);
			if ((i + n) % 3 == 0)
				race_check(r, &q, a->idx, i);
		}
	}
	hlog_session_close(q.s);
	atomic_fetch_sub(&r->writers_left, 1);
	return NULL;
}

static void *race_expirer(void *arg)
{
	race *r = arg;
	xsess q;
	if (xsess_open_thread(&q, r->l, r->dev, NOW) < 0) {
		atomic_fetch_add(&r->errors, 1);
		return NULL;
	}
	uint64_t cursor = 0;
	while (!atomic_load(&r->stop)) {
		hlog_expire_stats st = { 0 };
		hlog_session_protect(q.s);
		cursor = hlog_expire_step(q.s, cursor, 8, &st);
		hlog_session_unprotect(q.s);
		xsess_poll(&q, false);
		if (st.err)
			atomic_fetch_add(&r->errors, 1);
		atomic_fetch_add(&r->removed, st.expired);
	}
	hlog_session_close(q.s);
	return NULL;
}

static void writers_race_the_expirer(xstore *x, bool dev)
{
	/* 4 KiB of index: 64 buckets for 1800 keys, so chains hold many keys (tag collisions). */
	xstore_open(x, dev, dev ? 1 * MIB : 64 * MIB, 4 * KIB);
	race *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->l = x->l;
	r->dev = dev;
	r->writers_left = RACE_THREADS;
	pthread_t th[RACE_THREADS], ex;
	race_arg args[RACE_THREADS];
	assert_int_equal(pthread_create(&ex, NULL, race_expirer, r), 0);
	for (int i = 0; i < RACE_THREADS; i++) {
		args[i] = (race_arg){ r, i };
		assert_int_equal(pthread_create(&th[i], NULL, race_writer, &args[i]), 0);
	}
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&r->stop, 1);
	pthread_join(ex, NULL);
	fprintf(stderr, "race (%s): the expirer removed %llu keys while the writers ran\n",
	        dev ? "device" : "memory", (unsigned long long)atomic_load(&r->removed));
	assert_int_equal(atomic_load(&r->errors), 0);
	assert_int_equal(atomic_load(&r->lost), 0);
	assert_int_equal(atomic_load(&r->resurrected), 0);
	assert_int_equal(atomic_load(&r->wrong), 0);
	assert_true(atomic_load(&r->removed) > 0);   /* the race really raced removals */

	/* A last sweep removes what is still expired in memory; the rest (on the device) is read,
	 * which removes it lazily, best effort (ops.c note 4): a few passes until the count is exact. */
	xsess e, q;
	xsess_open(&e, x, NOW);
	xsess_open(&q, x, NOW);
	hlog_expire_stats st;
	uint64_t live = 0;
	for (int w = 0; w < RACE_THREADS; w++)
		for (int i = 0; i < RACE_KEYS; i++)
			live += r->state[w][i] != 0;
	for (int pass = 0; pass < 5; pass++) {
		x_sweep(&e, &st);
		if (!dev)
			assert_int_equal(hlog_key_count(x->l), live);
		for (int w = 0; w < RACE_THREADS; w++)
			for (int i = 0; i < RACE_KEYS; i++)
				race_check(r, &q, w, i);
		if (hlog_key_count(x->l) == live)
			break;
	}
	assert_int_equal(atomic_load(&r->lost), 0);
	assert_int_equal(atomic_load(&r->resurrected), 0);
	assert_int_equal(atomic_load(&r->wrong), 0);
	assert_int_equal(atomic_load(&r->errors), 0);
	assert_int_equal(hlog_key_count(x->l), live);
	hlog_session_close(e.s);
	hlog_session_close(q.s);
	free(r);
}

static void test_expire_racing_writers_never_lose_nor_resurrect_a_key(void **state)
{
	writers_race_the_expirer(*state, false);
}

static void test_expire_racing_writers_never_lose_nor_resurrect_a_key_on_a_device(void **state)
{
	writers_race_the_expirer(*state, true);
}

#define XTEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		XTEST(test_expire_removes_keys_with_short_ttls_without_a_read),
		XTEST(test_expire_removes_keys_with_short_ttls_without_a_read_on_a_device),
		XTEST(test_expire_goes_by_the_newest_version_of_each_key),
		XTEST(test_expire_goes_by_the_newest_version_of_each_key_on_a_device),
		XTEST(test_expire_leaves_the_device_part_alone),
		XTEST(test_expire_racing_writers_never_lose_nor_resurrect_a_key),
		XTEST(test_expire_racing_writers_never_lose_nor_resurrect_a_key_on_a_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
