/*
 * test_hidx_grow.c - the index doubles online (hidx.c note "Growth"): every entry keeps its address
 * and its one slot per tag, chains get shorter, a growth past HIDX_GROW_MAX is refused, and threads
 * that create, publish, look up and clear while the grower splits lose nothing and bring nothing
 * back.
 *
 * Hashes are crafted as in test_hidx.c (bucket = low bits, tag = bits 48-62): a 64-bucket index with
 * thousands of tags has long chains, and the tag's low bits pick the bucket after each doubling.
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

#define NTHREADS 4
#define PER_THREAD 3000

static uint64_t mk_hash(uint64_t b, uint64_t t, uint64_t noise)
{
	return (t << HIDX_TAG_SHIFT) | ((noise << 20) & 0x0000fffffff00000ULL) | b;
}

/* The i-th of many distinct (bucket, tag) pairs of a 64-bucket index. */
static uint64_t nth_hash(uint64_t i)
{
	return mk_hash(i % 64, 1 + i / 64, i);
}

static hidx *open_small(void)
{
	hidx *h = NULL;

	assert_int_equal(hidx_open(&h, 64 * 64), 0);
	return h;
}

static void put(hidx *h, uint64_t hash, uint64_t addr)
{
	hidx_slot s;

	assert_int_equal(hidx_entry_find_or_create(h, hash, &s), 0);
	while (hidx_slot_addr(&s) != addr)
		if (!hidx_slot_cas(&s, addr))
			assert_int_equal(hidx_entry_find_or_create(h, hash, &s), 0);
}

static uint64_t addr_of(hidx *h, uint64_t hash)
{
	hidx_slot s;

	return hidx_entry_find(h, hash, &s) == 0 ? hidx_slot_addr(&s) : UINT64_MAX;
}

static void count_visit(void *ctx, uint64_t word)
{
	(void)word;
	++*(uint64_t *)ctx;
}

static uint64_t scan_count(hidx *h)
{
	uint64_t n = 0, cursor = 0;

	do
		cursor = hidx_scan(h, cursor, 100, count_visit, &n);
	while (cursor);
	return n;
}

/* Every word of the current table is in its right bucket, once per tag, and none is frozen. */
static void assert_table_sound(hidx *h)
{
	hidx_table *t = hidx_cur(h);

	for (uint64_t i = 0; i <= t->ht_mask; i++) {
		uint64_t tags[512];
		size_t n = 0;

		assert_int_equal(atomic_load(&t->ht_buckets[i].hb_overflow) & ~HIDX_OVF_IDX_MASK, 0);
		for (hidx_bucket *b = &t->ht_buckets[i]; b; b = hidx_bucket_next(h, b, memory_order_acquire))
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t w = atomic_load(&b->hb_entry[j]);

				if (!w)
					continue;
				assert_int_equal(w & HIDX_TENTATIVE, 0);
				/* the bucket a hash with this tag (and bucket bits i) would pick */
				assert_int_equal(hidx_bucket_no(t, (w & HIDX_TAG_MASK) | (i & t->ht_base_mask)), i);
				for (size_t k = 0; k < n; k++)
					assert_true(tags[k] != (w & HIDX_TAG_MASK));
				assert_true(n < 512);
				tags[n++] = w & HIDX_TAG_MASK;
			}
	}
}

/* Overflow buckets linked into the current table's chains. */
static uint64_t chain_buckets(hidx *h)
{
	hidx_table *t = hidx_cur(h);
	uint64_t n = 0;

	for (uint64_t i = 0; i <= t->ht_mask; i++)
		for (hidx_bucket *b = hidx_bucket_next(h, &t->ht_buckets[i], memory_order_acquire); b;
		     b = hidx_bucket_next(h, b, memory_order_acquire))
			n++;
	return n;
}

static void test_growth_keeps_every_entry_and_shortens_the_chains(void **state)
{
	const uint64_t n = 5000;
	hidx *h = open_small();
	hidx_stats st0, st;

	(void)state;
	for (uint64_t i = 0; i < n; i++)
		put(h, nth_hash(i), 1000 + i);
	hidx_stats_get(h, &st0);
	assert_int_equal(st0.buckets, 64);
	assert_true(st0.overflow_buckets > n / 7 - 64);
	for (unsigned g = 1; g <= HIDX_GROW_MAX; g++) {
		assert_int_equal(hidx_grow(h, NULL, NULL), 0);
		hidx_stats_get(h, &st);
		assert_int_equal(st.buckets, 64ULL << g);
		assert_int_equal(st.grown, g);
		assert_int_equal(st.grows, g);
		assert_int_equal(st.memory_bytes, (64ULL << g) * HIDX_BUCKET_BYTES);
		for (uint64_t i = 0; i < n; i++)
			assert_int_equal(addr_of(h, nth_hash(i)), 1000 + i);
		assert_int_equal(scan_count(h), n);
		assert_table_sound(h);
	}
	/* 4096 buckets for 5000 entries: few chains need a second bucket; the old ones were given back */
	assert_true(st.overflow_buckets < st0.overflow_buckets / 8);
	assert_false(st.can_grow);
	assert_int_equal(hidx_grow(h, NULL, NULL), -ENOSPC);
	/* new entries go where the grown geometry says (40,000 more: long chains again, whose
	 * overflow buckets come from the pages given back), and clears still work */
	for (uint64_t i = n; i < 9 * n; i++)
		put(h, nth_hash(i), 1000 + i);
	for (uint64_t i = 0; i < 9 * n; i++)
		assert_int_equal(addr_of(h, nth_hash(i)), 1000 + i);
	assert_int_equal(scan_count(h), 9 * n);
	assert_table_sound(h);
	hidx_stats_get(h, &st);
	assert_int_equal(chain_buckets(h), st.overflow_buckets);
	hidx_clear_below(h, 1000 + n / 2);
	for (uint64_t i = 0; i < 9 * n; i++)
		assert_int_equal(addr_of(h, nth_hash(i)), i < n / 2 ? UINT64_MAX : 1000 + i);
	hidx_close(h);
}

/* Enough entries that the old chains fill whole overflow pages: a doubling gives those pages back
 * (the new chains took fresh ones), the stats stop counting them, and later chains take them again. */
static void test_growth_gives_wholly_free_overflow_pages_back(void **state)
{
	const uint64_t n = 100000;
	hidx *h = NULL;
	hidx_stats st0, st1, st2;

	(void)state;
	assert_int_equal(hidx_open(&h, 1024 * 64), 0);
	/* distinct (bucket, tag) pairs over 1024 buckets (random hashes would share some entries) */
#define PAIR(i) mk_hash((i) % 1024, 1 + (i) / 1024, (i))
	for (uint64_t i = 0; i < n; i++)
		put(h, PAIR(i), 64 + i);
	hidx_stats_get(h, &st0);
	assert_true(st0.overflow_buckets > 3 * HIDX_OVF_PAGE_BUCKETS);
	assert_int_equal(hidx_grow(h, NULL, NULL), 0);
	hidx_stats_get(h, &st1);
	assert_true(h->hx_ovf_nreleased >= 2);
	assert_int_equal(chain_buckets(h), st1.overflow_buckets);
	/* pages counted: the new chains' and the free list's, not the ones given back */
	assert_int_equal(st1.overflow_bytes, (h->hx_ovf_npages - h->hx_ovf_nreleased) * HIDX_OVF_PAGE_BYTES);
	/* what stays counted is about what the new chains use (a page of slack each side), not the old
	 * chains' pages on top */
	assert_true(st1.overflow_bytes <= (st1.overflow_buckets / HIDX_OVF_PAGE_BUCKETS + 2) * HIDX_OVF_PAGE_BYTES);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(addr_of(h, PAIR(i)), 64 + i);
	/* as many again: the chains grow into the pages given back before any new page is mapped */
	uint64_t mapped = h->hx_ovf_npages;
	for (uint64_t i = n; i < 2 * n; i++)
		put(h, PAIR(i), 64 + i);
	hidx_stats_get(h, &st2);
	assert_true(h->hx_ovf_nreleased == 0 || h->hx_ovf_npages == mapped);
	assert_int_equal(chain_buckets(h), st2.overflow_buckets);
	for (uint64_t i = 0; i < 2 * n; i++)
		assert_int_equal(addr_of(h, PAIR(i)), 64 + i);
	assert_int_equal(scan_count(h), 2 * n);
	assert_table_sound(h);
	hidx_close(h);
#undef PAIR
}

typedef struct seen {
	uint16_t *count;   /* visits per nth_hash index (its address - 1000) */
	uint64_t n;
} seen;

static void seen_visit(void *ctx, uint64_t word)
{
	seen *v = ctx;
	uint64_t a = word & HIDX_ADDR_MASK;

	assert_true(a >= 1000 && a < 1000 + v->n);
	v->count[a - 1000]++;
}

/* A walk that crosses doublings: with the base it began with, each entry once (KEYS); with
 * hidx_scan's cursors, each at least once (SCAN may repeat). */
static void test_scan_across_growth_with_its_base_sees_each_entry_once(void **state)
{
	const uint64_t n = 5000;

	(void)state;
	for (int based = 0; based < 2; based++) {
		hidx *h = open_small();
		seen v = { calloc(n, sizeof(uint16_t)), n };
		uint64_t base = hidx_buckets(h), cursor = 0;

		for (uint64_t i = 0; i < n; i++)
			put(h, nth_hash(i), 1000 + i);
		/* half of the walk, two doublings, the rest */
		cursor = based ? hidx_scan_base(h, base, 0, base / 2, seen_visit, &v)
			       : hidx_scan(h, 0, base / 2, seen_visit, &v);
		assert_int_equal(hidx_grow(h, NULL, NULL), 0);
		assert_int_equal(hidx_grow(h, NULL, NULL), 0);
		while (cursor)
			cursor = based ? hidx_scan_base(h, base, cursor, 5, seen_visit, &v)
				       : hidx_scan(h, cursor, 5, seen_visit, &v);
		uint64_t twice = 0;
		for (uint64_t i = 0; i < n; i++) {
			assert_true(v.count[i] >= 1);
			twice += v.count[i] > 1;
		}
		if (based)
			assert_int_equal(twice, 0);
		else
			assert_true(twice > 0);   /* what the base is for */
		free(v.count);
		hidx_close(h);
	}
}

/* ---- beside other threads ---- */

typedef struct worker {
	hidx *h;
	int id;
	_Atomic uint64_t inside;       /* odd while inside an index call (the test's epoch) */
	_Atomic int *stop;
	uint64_t errors, ops;
} worker;

typedef struct grower {
	worker *w;
	int n;
} grower;

/* quiesce(): wait until every worker that was inside a call has left it. */
static void quiesce(void *ctx)
{
	grower *g = ctx;
	uint64_t seen[NTHREADS];

	for (int i = 0; i < g->n; i++)
		seen[i] = atomic_load(&g->w[i].inside);
	for (int i = 0; i < g->n; i++)
		while ((seen[i] & 1) && atomic_load(&g->w[i].inside) == seen[i])
			sched_yield();
}

static uint64_t worker_hash(int id, uint64_t k)
{
	/* distinct (bucket, tag) pairs per thread, spread over buckets and tags */
	uint64_t i = k * NTHREADS + (uint64_t)id;

	return nth_hash(i);
}

/* Creates its keys, then raises their addresses round after round, checking after each publish that
 * every key it has made is found with the address it last gave it. */
static void *worker_main(void *arg)
{
	worker *w = arg;
	uint64_t round = 0;

	while (!atomic_load(w->stop) || round < 2) {
		for (uint64_t k = 0; k < PER_THREAD; k++) {
			uint64_t hash = worker_hash(w->id, k), want = (round + 1) * 1000000 + k;
			hidx_slot s;

			atomic_fetch_add(&w->inside, 1);
			int rc = hidx_entry_find_or_create(w->h, hash, &s);
			while (rc == 0 && !hidx_slot_cas(&s, want))
				rc = hidx_entry_find_or_create(w->h, hash, &s);
			atomic_fetch_add(&w->inside, 1);
			w->errors += rc != 0;
			atomic_fetch_add(&w->inside, 1);
			if (addr_of(w->h, hash) != want)
				w->errors++;
			/* an older key of this thread, published last round or this one */
			uint64_t o = (k * 7919) % PER_THREAD;
			uint64_t a = addr_of(w->h, worker_hash(w->id, o));
			if (a != (o <= k ? want - k + o : (round ? round * 1000000 + o : UINT64_MAX)))
				w->errors++;
			atomic_fetch_add(&w->inside, 1);
			w->ops++;
		}
		round++;
	}
	return NULL;
}

/* Rounds of workers against the grower until one round had workers split buckets themselves (the
 * path under test: a proof from the counter that they met a growth). */
static void test_growth_beside_creators_publishers_and_readers_loses_nothing(void **state)
{
	uint64_t helped = 0;

	(void)state;
	for (int attempt = 0; attempt < 50 && !helped; attempt++) {
		hidx *h = open_small();
		_Atomic int stop = 0;
		worker w[NTHREADS];
		pthread_t th[NTHREADS];
		grower g = { w, NTHREADS };
		hidx_stats st;

		for (int i = 0; i < NTHREADS; i++) {
			w[i] = (worker){ .h = h, .id = i, .stop = &stop };
			assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
		}
		for (unsigned k = 0; k < HIDX_GROW_MAX; k++) {
			sched_yield();
			assert_int_equal(hidx_grow(h, quiesce, &g), 0);
		}
		atomic_store(&stop, 1);
		for (int i = 0; i < NTHREADS; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(w[i].errors, 0);
			assert_true(w[i].ops >= 2 * PER_THREAD);
		}
		hidx_stats_get(h, &st);
		assert_int_equal(st.grows, HIDX_GROW_MAX);
		assert_int_equal(scan_count(h), (uint64_t)NTHREADS * PER_THREAD);
		assert_table_sound(h);
		helped = st.helped_splits;
		hidx_close(h);
	}
	assert_true(helped > 0);
}

/* A clear that runs while the grower splits must not get an entry back from a copy: entries below
 * the limit stay gone, the others stay, and every tag has one slot. */
typedef struct clearer {
	hidx *h;
	_Atomic int *stop;
	uint64_t limit, n;
	_Atomic uint64_t clears;
	uint64_t errors;
	worker rw[2];                  /* the readers' epoch counters (quiesce) */
} clearer;

static void *clearer_main(void *arg)
{
	clearer *c = arg;

	while (!atomic_load(c->stop)) {
		hidx_clear_below(c->h, c->limit);
		atomic_fetch_add(&c->clears, 1);
	}
	return NULL;
}

/* Lookups that meet frozen buckets and help split them, beside the clears. */
static void *reader_main(void *arg)
{
	worker *w = arg;
	clearer *c = (clearer *)((char *)(w - w->id) - offsetof(clearer, rw));

	for (uint64_t k = 0; !atomic_load(c->stop); k++) {
		uint64_t i = (k * 7919) % c->n;

		atomic_fetch_add(&w->inside, 1);
		uint64_t a = addr_of(c->h, nth_hash(i));
		atomic_fetch_add(&w->inside, 1);
		if (i >= c->n / 2 && a != 1000 + i)
			w->errors++;
	}
	return NULL;
}

static void test_clears_during_growth_bring_no_entry_back(void **state)
{
	const uint64_t n = 6000;
	hidx *h = open_small();
	_Atomic int stop = 0;
	clearer c = { .h = h, .stop = &stop, .limit = 1000 + n / 2, .n = n };
	pthread_t th, rd[2];

	(void)state;
	for (uint64_t i = 0; i < n; i++)
		put(h, nth_hash(i), 1000 + i);
	assert_int_equal(pthread_create(&th, NULL, clearer_main, &c), 0);
	grower g = { c.rw, 2 };
	for (int i = 0; i < 2; i++) {
		c.rw[i] = (worker){ .h = h, .id = i };
		assert_int_equal(pthread_create(&rd[i], NULL, reader_main, &c.rw[i]), 0);
	}
	for (unsigned k = 0; k < HIDX_GROW_MAX; k++) {
		uint64_t before = atomic_load(&c.clears);

		while (atomic_load(&c.clears) < before + 2)   /* clears between growths, too */
			sched_yield();
		assert_int_equal(hidx_grow(h, quiesce, &g), 0);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	for (int i = 0; i < 2; i++) {
		pthread_join(rd[i], NULL);
		assert_int_equal(c.rw[i].errors, 0);
	}
	hidx_clear_below(h, c.limit);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(addr_of(h, nth_hash(i)), i < n / 2 ? UINT64_MAX : 1000 + i);
	assert_int_equal(scan_count(h), n - n / 2);
	assert_table_sound(h);
	hidx_close(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_growth_keeps_every_entry_and_shortens_the_chains),
		cmocka_unit_test(test_growth_gives_wholly_free_overflow_pages_back),
		cmocka_unit_test(test_scan_across_growth_with_its_base_sees_each_entry_once),
		cmocka_unit_test(test_growth_beside_creators_publishers_and_readers_loses_nothing),
		cmocka_unit_test(test_clears_during_growth_bring_no_entry_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
