/*
 * test_hidx_grow_stress.c - the index doubles six times from 64 buckets (hidx.c note "Growth")
 * while writers create and publish, readers look up, a scanner walks and a clearer clears, and
 * afterwards nothing is twinned, misplaced, missing, lost or brought back:
 *  - writers publish by hidx_entry_find_or_create + hidx_slot_cas with the log's rule (a failed CAS
 *    restarts from the index); half their publishes go to the "frontier", the next key not yet
 *    created, so that all writers create the same new (bucket, tag) at once;
 *  - a quarter of the writers' operations only look up a key already published (never absent);
 *  - a scanner's full pass visits at least the keys created before it began;
 *  - a clearer clears the victims (addresses below ADDR_BASE) over and over: a clear during a
 *    split is left to the grower (hx_clear_pending), so a victim may still be seen until it has
 *    run, but one seen gone never comes back; after the threads stop, one more (synchronous) clear
 *    leaves none;
 *  - at the end: one confirmed entry per tag per chain, each in its right bucket, every published
 *    key found, and every successful CAS of a key in its final address's predecessor chain (each
 *    address records the one it replaced).
 * Rounds run until one had threads meet frozen buckets and split them (helped_splits > 0), within
 * a bound. Work is bounded by counts (addresses per round), never by clocks.
 *
 * Hashes are crafted as in test_hidx.c (bucket = low bits, tag = bits 48-62).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "index/hidx_int.h"

#define NWRITERS 4
#define NTHREADS (NWRITERS + 2)   /* the writers, the scanner, the clearer */
#define NKEYS 240000              /* distinct (bucket, tag) pairs the writers use */
#define NCOLD 3000                /* keys published before the threads start */
#define NVICT 2000                /* entries below ADDR_BASE, for the clearer */
#define ADDR_BASE (1ULL << 40)    /* writers publish ADDR_BASE + a, a < NADDR */
#define NADDR (1u << 19)          /* addresses per round: the bound on a round's work */
#define MIN_ROUNDS 3
#define MAX_ROUNDS 20

static uint64_t mk_hash(uint64_t b, uint64_t t, uint64_t noise)
{
	return (t << HIDX_TAG_SHIFT) | ((noise << 20) & 0x0000fffffff00000ULL) | b;
}

/* Key i: bucket i % 64, tag 1 + i / 64; variant v: the same (bucket, tag), other noise bits. */
static uint64_t key_hash(uint64_t i, uint64_t v)
{
	return mk_hash(i % 64, 1 + i / 64, i * 31 + v * 7777);
}

/* Victims: tags above every key's. */
static uint64_t vict_hash(uint64_t i)
{
	return key_hash(NKEYS + 64 * 10 + i, 9);
}

/* One round's shared state (static: the arrays are large). */
static struct {
	hidx *h;
	_Atomic uint64_t frontier;        /* keys below it are published */
	_Atomic uint64_t next_addr;
	_Atomic uint64_t prev[NADDR];     /* prev[a] = the address ADDR_BASE + a replaced, + 1 */
	_Atomic uint64_t succ[NKEYS];     /* successful CASes per key */
	_Atomic uint8_t created[NKEYS];   /* published at least once */
	_Atomic uint64_t inside[NTHREADS];/* odd while inside an index call (the test's epoch) */
	_Atomic int stop;
	_Atomic int writers;              /* writers still running */
	_Atomic uint64_t errors;
	_Atomic uint64_t passes, victims_gone_seen, created_keys;   /* over all rounds */
} S;

/* Count a fault (threads must not assert: cmocka's asserts belong to the test's thread). 1. */
static uint64_t fault(const char *what, uint64_t a, uint64_t b)
{
	if (atomic_fetch_add(&S.errors, 1) < 10)
		print_error("%s (%llu, %llu)\n", what, (unsigned long long)a, (unsigned long long)b);
	return 1;
}

static void enter(int id)
{
	atomic_fetch_add(&S.inside[id], 1);
}

static void leave(int id)
{
	atomic_fetch_add(&S.inside[id], 1);
}

/* quiesce(): wait until every thread that was inside an index call has left it. */
static void quiesce(void *ctx)
{
	uint64_t seen[NTHREADS];

	(void)ctx;
	for (int i = 0; i < NTHREADS; i++)
		seen[i] = atomic_load(&S.inside[i]);
	for (int i = 0; i < NTHREADS; i++)
		while ((seen[i] & 1) && atomic_load(&S.inside[i]) == seen[i])
			sched_yield();
}

/* Publish ADDR_BASE + a for key k (hash: one of its variants), the log's way. */
static void publish(uint64_t k, uint64_t hash, uint64_t a)
{
	hidx_slot s;
	int rc = hidx_entry_find_or_create(S.h, hash, &s);

	for (;;) {
		if (rc) {
			fault("find_or_create failed", k, (uint64_t)-rc);
			return;
		}
		uint64_t old = hidx_slot_addr(&s);
		if (hidx_slot_cas(&s, ADDR_BASE + a)) {
			atomic_store(&S.prev[a], old + 1);
			if (old == 0) {
				uint64_t e = k;
				atomic_compare_exchange_strong(&S.frontier, &e, k + 1);
			}
			atomic_fetch_add(&S.succ[k], 1);
			atomic_store(&S.created[k], 1);
			return;
		}
		/* the log's rule: restart from the index */
		rc = hidx_entry_find_or_create(S.h, hash, &s);
	}
}

static void *writer_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);

	while (!atomic_load(&S.stop)) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		uint64_t fr = atomic_load(&S.frontier);
		uint64_t k = (rng >> 20) & 1 ? fr : rng % fr, hash;

		if (k >= NKEYS)
			k = rng % NCOLD;
		hash = key_hash(k, (rng >> 32) % 4);
		if ((rng >> 40) % 4 == 0) {
			hidx_slot s;
			int was = atomic_load(&S.created[k]);

			enter(id);
			int rc = hidx_entry_find(S.h, hash, &s);
			leave(id);
			if (rc != 0 && was)
				fault("published key not found", k, 0);
			continue;
		}
		uint64_t a = atomic_fetch_add(&S.next_addr, 1);
		if (a >= NADDR)
			break;
		enter(id);
		publish(k, hash, a);
		leave(id);
	}
	atomic_fetch_sub(&S.writers, 1);
	return NULL;
}

static void visit(void *ctx, uint64_t w)
{
	(void)w;
	++*(uint64_t *)ctx;
}

static void *scanner_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&S.stop)) {
		uint64_t n = 0, c = 0, fr = atomic_load(&S.frontier);

		do {
			enter(NWRITERS);
			c = hidx_scan(S.h, c, 7, visit, &n);
			leave(NWRITERS);
		} while (c);
		/* keys below fr have distinct (bucket, tag)s and addresses; a pass may repeat some */
		if (n < fr)
			fault("scan pass saw fewer entries than keys published before it", n, fr);
		atomic_fetch_add(&S.passes, 1);
	}
	return NULL;
}

static void *clearer_main(void *arg)
{
	static uint8_t gone[NVICT];   /* one clearer at a time */
	const int id = NWRITERS + 1;

	(void)arg;
	memset(gone, 0, sizeof(gone));
	while (!atomic_load(&S.stop)) {
		enter(id);
		hidx_clear_below(S.h, ADDR_BASE);   /* the victims only (and creates not yet published) */
		leave(id);
		for (uint64_t i = 0; i < NVICT; i += 3) {
			hidx_slot s;

			enter(id);
			uint64_t a = hidx_entry_find(S.h, vict_hash(i), &s) == 0 ? hidx_slot_addr(&s) : 0;
			leave(id);
			if (a == 0) {
				atomic_fetch_add(&S.victims_gone_seen, !gone[i]);
				gone[i] = 1;
			} else if (a != 5 + i) {
				fault("victim with another address", i, a);
			} else if (gone[i]) {
				fault("cleared victim came back", i, a);   /* a late clear is fine, a return is not */
			}
		}
	}
	return NULL;
}

/* One confirmed entry per tag per chain, each in its right bucket, none frozen or tentative. */
static uint64_t table_faults(void)
{
	hidx_table *t = hidx_cur(S.h);
	uint64_t bad = 0;

	for (uint64_t i = 0; i <= t->ht_mask; i++) {
		uint64_t tags[512];
		size_t n = 0;

		if (atomic_load(&t->ht_buckets[i].hb_overflow) & ~HIDX_OVF_IDX_MASK)
			bad += fault("growth flag left in bucket", i, 0);
		for (hidx_bucket *b = &t->ht_buckets[i]; b; b = hidx_bucket_next(S.h, b, memory_order_acquire))
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t w = atomic_load(&b->hb_entry[j]), tag = w & HIDX_TAG_MASK;

				if (!w)
					continue;
				if (w & HIDX_TENTATIVE)
					bad += fault("tentative word left", i, w);
				if (hidx_bucket_no(t, tag | (i & t->ht_base_mask)) != i)
					bad += fault("entry in the wrong bucket", i, w);
				for (size_t k = 0; k < n; k++)
					if (tags[k] == tag)
						bad += fault("twin in bucket (bucket, tag)", i, tag >> HIDX_TAG_SHIFT);
				if (n == SPW_ARRAY_LEN(tags))
					return bad + fault("chain longer than the check holds", i, n);
				tags[n++] = tag;
			}
	}
	return bad;
}

/* Every published key found, and every successful CAS of it in its final address's chain. */
static uint64_t key_faults(void)
{
	uint64_t bad = 0;

	for (uint64_t k = 0; k < NKEYS; k++) {
		hidx_slot s;
		uint64_t want = atomic_load(&S.succ[k]), len = 0;

		if (hidx_entry_find(S.h, key_hash(k, 0), &s) != 0) {
			if (want)
				bad += fault("published key missing", k, want);
			continue;
		}
		for (uint64_t a = hidx_slot_addr(&s); a; len++) {
			uint64_t p = a >= ADDR_BASE && a - ADDR_BASE < NADDR ? atomic_load(&S.prev[a - ADDR_BASE]) : 0;

			if (!p) {
				bad += fault("address not published by a writer", k, a);
				break;
			}
			a = p - 1;
		}
		if (len != want)
			bad += fault("lost update: chain length, successful CASes", len, want);
	}
	for (uint64_t i = 0; i < NVICT; i++) {
		hidx_slot s;

		if (hidx_entry_find(S.h, vict_hash(i), &s) == 0)
			bad += fault("victim left after the last clear", i, hidx_slot_addr(&s));
	}
	return bad;
}

/* A fresh index of 64 buckets with the cold keys and the victims. */
static void round_setup(void)
{
	memset((void *)S.prev, 0, sizeof(S.prev));
	memset((void *)S.succ, 0, sizeof(S.succ));
	memset((void *)S.created, 0, sizeof(S.created));
	atomic_store(&S.next_addr, 0);
	atomic_store(&S.stop, 0);
	atomic_store(&S.writers, NWRITERS);
	assert_int_equal(hidx_open(&S.h, 64 * 64), 0);
	for (uint64_t k = 0; k < NCOLD; k++) {
		hidx_slot s;
		uint64_t a = atomic_fetch_add(&S.next_addr, 1);

		assert_int_equal(hidx_entry_find_or_create(S.h, key_hash(k, 0), &s), 0);
		assert_true(hidx_slot_cas(&s, ADDR_BASE + a));
		atomic_store(&S.prev[a], 1);
		atomic_store(&S.succ[k], 1);
		atomic_store(&S.created[k], 1);
	}
	atomic_store(&S.frontier, NCOLD);
	for (uint64_t i = 0; i < NVICT; i++) {
		hidx_slot s;

		assert_int_equal(hidx_entry_find_or_create(S.h, vict_hash(i), &s), 0);
		assert_true(hidx_slot_cas(&s, 5 + i));
	}
}

/* One round: the threads against six doublings, each after another share of the addresses is
 * used (so growths meet busy writers); the checks; the round's helped_splits. */
static uint64_t stress_round(void)
{
	pthread_t th[NTHREADS];
	hidx_stats st;

	round_setup();
	for (int i = 0; i < NWRITERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, (void *)(intptr_t)i), 0);
	assert_int_equal(pthread_create(&th[NWRITERS], NULL, scanner_main, NULL), 0);
	assert_int_equal(pthread_create(&th[NWRITERS + 1], NULL, clearer_main, NULL), 0);
	for (unsigned g = 0; g < HIDX_GROW_MAX; g++) {
		while (atomic_load(&S.next_addr) < (g + 1) * (NADDR / (HIDX_GROW_MAX + 2)) &&
		       atomic_load(&S.writers) > 0)
			sched_yield();
		assert_int_equal(hidx_grow(S.h, quiesce, NULL), 0);
	}
	atomic_store(&S.stop, 1);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	hidx_clear_below(S.h, ADDR_BASE);   /* no growth runs now: it runs before it returns */
	hidx_stats_get(S.h, &st);
	assert_int_equal(st.grows, HIDX_GROW_MAX);
	assert_int_equal(st.buckets, 64ULL << HIDX_GROW_MAX);
	assert_int_equal(table_faults(), 0);
	assert_int_equal(key_faults(), 0);
	assert_int_equal(atomic_load(&S.errors), 0);
	atomic_fetch_add(&S.created_keys, atomic_load(&S.frontier) - NCOLD);
	hidx_close(S.h);
	S.h = NULL;
	return st.helped_splits;
}

static void test_growth_under_colliding_creators_readers_scans_and_clears_loses_nothing(void **state)
{
	uint64_t helped = 0;
	int rounds = 0;

	(void)state;
	while (rounds < MIN_ROUNDS || (helped == 0 && rounds < MAX_ROUNDS)) {
		helped += stress_round();
		rounds++;
	}
	print_message("%d rounds: %llu keys created by colliding writers, %llu helped splits, "
		      "%llu scan passes, %llu victims seen cleared\n", rounds,
		      (unsigned long long)atomic_load(&S.created_keys), (unsigned long long)helped,
		      (unsigned long long)atomic_load(&S.passes),
		      (unsigned long long)atomic_load(&S.victims_gone_seen));
	assert_true(helped > 0);   /* the threads met frozen buckets and split them */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_growth_under_colliding_creators_readers_scans_and_clears_loses_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
