/*
 * test_group_inplace.c - groups changed in place (log/group.c note 9): a group whose head and
 * parts are all mutable and keep their sizes rewrites them where they lie (INFO
 * group_inplace_writes, no byte appended at the tail), with its redo records framed as a span's;
 * a part's capacity (hlog_group_part.cap) lets it grow in place; a tombstone is set in place and
 * a part without any version needs nothing; a record below ReadOnly, a size that changes, a part
 * named twice or hlog_config.group_span_only send the group to the span; two threads' groups on
 * one head lose no update while a reader never sees a part half rewritten.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "log_test.h"

#define PAGE (4 * 1024ULL)
#define NP 3

typedef struct gi {
	hlog *l;
	hlog_session *s;
	hlog_key head;
	char pkeys[NP][16];
	uint8_t pvals[NP][512];
	hlog_group_part parts[NP];
	uint8_t hval[16];            /* the head's next value (HEAD_LEN bytes) */
} gi;

#define HEAD_LEN 16

static gi *gi_open(void **state, int mutable_percent, bool span_only)
{
	gi *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	*state = g;
	hlog_config c = log_test_config(64 * PAGE, PAGE, mutable_percent);
	c.group_span_only = span_only;
	assert_int_equal(hlog_open(&g->l, &c), 0);
	assert_int_equal(hlog_session_open(g->l, &g->s), 0);
	hlog_session_set_now(g->s, 1000000);
	hlog_session_protect(g->s);
	hlog_key_init(&g->head, "coll", 4);
	for (int i = 0; i < NP; i++) {
		int n = snprintf(g->pkeys[i], sizeof(g->pkeys[i]), "coll|b%d", i);
		hlog_key_init_internal(&g->parts[i].key, g->pkeys[i], (size_t)n);
		g->parts[i].val = g->pvals[i];
	}
	return g;
}

static int gi_teardown(void **state)
{
	gi *g = *state;
	if (!g)
		return 0;
	hlog_session_unprotect(g->s);
	hlog_session_close(g->s);
	hlog_close(g->l);
	free(g);
	return 0;
}

/* The head's plan: write HEAD_LEN bytes (g->hval); fill copies them, in place or not. */
static int gi_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	(void)ctx;
	(void)old;
	out->action = HLOG_RMW_WRITE;
	out->new_len = HEAD_LEN;
	out->rtype = HLOG_T_HEAD;
	out->expire_ms = HLOG_NO_EXPIRY;
	return 0;
}

static void gi_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	gi *g = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, g->hval, HEAD_LEN);
}

static const hlog_rmw_ops gi_ops = { gi_plan, gi_fill };

/* Part i's value: len bytes of c (cap: the record's capacity, 0 = len). */
static void gi_set(gi *g, int i, uint8_t c, size_t len, size_t cap)
{
	memset(g->pvals[i], c, len);
	g->parts[i].len = len;
	g->parts[i].cap = cap;
	g->parts[i].del = false;
}

static int gi_run(gi *g, uint8_t gen, size_t nparts)
{
	memset(g->hval, gen, HEAD_LEN);
	return hlog_group_rmw(g->s, &g->head, &gi_ops, g, g->parts, nparts);
}

typedef struct got { uint8_t v[1024]; size_t len; uint64_t addr; } got;

static void got_fn(void *ctx, const hlog_value *v)
{
	got *x = ctx;
	x->len = v->len < sizeof(x->v) ? v->len : sizeof(x->v);
	memcpy(x->v, v->ptr, x->len);
	x->addr = v->addr;
}

/* k reads back len bytes of c followed by zeros up to want_len; returns its address. */
static uint64_t gi_check(gi *g, const hlog_key *k, uint8_t c, size_t len, size_t want_len)
{
	got x;
	assert_int_equal(hlog_read(g->s, k, got_fn, &x), HLOG_OK);
	assert_int_equal(x.len, want_len);
	for (size_t j = 0; j < want_len; j++)
		assert_int_equal(x.v[j], j < len ? c : 0);
	return x.addr;
}

static hlog_info gi_info(gi *g)
{
	hlog_info i;
	hlog_info_get(g->l, &i);
	return i;
}

typedef struct redo_log { uint64_t seq[8], addr[8]; int kind[8]; bool more[8]; int n; } redo_log;

static void redo_fn(void *arg, const hlog_redo *r)
{
	redo_log *lg = arg;
	assert_true(lg->n < 8);
	lg->seq[lg->n] = r->seq;
	lg->addr[lg->n] = r->addr;
	lg->kind[lg->n] = r->kind;
	lg->more[lg->n++] = r->group_more;
}

static void test_group_in_place_rewrites_head_and_parts_where_they_lie(void **state)
{
	gi *g = gi_open(state, 90, false);
	for (int i = 0; i < NP; i++)
		gi_set(g, i, (uint8_t)('a' + i), 100, 0);
	assert_int_equal(gi_run(g, '1', NP), HLOG_OK);   /* new parts: the span */
	assert_int_equal(gi_info(g).group_inplace, 0);
	uint64_t head_at = gi_check(g, &g->head, '1', HEAD_LEN, HEAD_LEN), at[NP];
	for (int i = 0; i < NP; i++)
		at[i] = gi_check(g, &g->parts[i].key, (uint8_t)('a' + i), 100, 100);

	redo_log lg = { .n = 0 };
	hlog_session_set_redo(g->s, redo_fn, &lg);
	uint64_t tail = gi_info(g).tail;
	for (int i = 0; i < NP; i++)
		gi_set(g, i, (uint8_t)('x' + i), 100, 0);
	assert_int_equal(gi_run(g, '2', NP), HLOG_OK);
	hlog_info in = gi_info(g);
	assert_int_equal(in.group_inplace, 1);
	assert_int_equal(in.tail, tail);                 /* nothing appended */
	assert_int_equal(gi_check(g, &g->head, '2', HEAD_LEN, HEAD_LEN), head_at);
	for (int i = 0; i < NP; i++)
		assert_int_equal(gi_check(g, &g->parts[i].key, (uint8_t)('x' + i), 100, 100), at[i]);
	/* The redo records: the head first, then the parts, framed as one group, seqs in a row. */
	assert_int_equal(lg.n, 1 + NP);
	assert_int_equal(lg.addr[0], head_at);
	for (int i = 0; i <= NP; i++) {
		assert_int_equal(lg.kind[i], HLOG_REDO_SET);
		assert_int_equal(lg.more[i], i < NP);
		if (i) {
			assert_int_equal(lg.seq[i], lg.seq[0] + (uint64_t)i);
			assert_int_equal(lg.addr[i], at[i - 1]);
		}
	}
	hlog_session_set_redo(g->s, NULL, NULL);
	assert_int_equal(hlog_key_count(g->l), 1);       /* parts are no keys; the head stays one */
}

static void test_group_part_with_capacity_grows_in_place_until_it_is_full(void **state)
{
	gi *g = gi_open(state, 90, false);
	gi_set(g, 0, 'a', 10, 64);
	assert_int_equal(gi_run(g, '1', 1), HLOG_OK);
	uint64_t at = gi_check(g, &g->parts[0].key, 'a', 10, 64);   /* the capacity reads as zeros */
	gi_set(g, 0, 'b', 40, 64);
	assert_int_equal(gi_run(g, '2', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 1);
	assert_int_equal(gi_check(g, &g->parts[0].key, 'b', 40, 64), at);
	gi_set(g, 0, 'c', 8, 64);                         /* shrinking within the capacity: in place */
	assert_int_equal(gi_run(g, '3', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 2);
	assert_int_equal(gi_check(g, &g->parts[0].key, 'c', 8, 64), at);
	gi_set(g, 0, 'd', 70, 100);                       /* past it: a new record in a span */
	assert_int_equal(gi_run(g, '4', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 2);
	assert_true(gi_check(g, &g->parts[0].key, 'd', 70, 100) > at);
	gi_check(g, &g->head, '4', HEAD_LEN, HEAD_LEN);
}

static void test_group_in_place_sets_a_tombstone_and_skips_a_part_never_written(void **state)
{
	gi *g = gi_open(state, 90, false);
	gi_set(g, 0, 'a', 32, 0);
	gi_set(g, 1, 'b', 32, 0);
	assert_int_equal(gi_run(g, '1', 2), HLOG_OK);
	uint64_t tail = gi_info(g).tail;
	gi_set(g, 0, 'c', 32, 0);
	g->parts[1].del = true;
	g->parts[2].del = true;                           /* never written: nothing to delete */
	g->parts[2].len = 0;
	assert_int_equal(gi_run(g, '2', 3), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 1);
	assert_int_equal(gi_info(g).tail, tail);
	gi_check(g, &g->parts[0].key, 'c', 32, 32);
	got x;
	assert_int_equal(hlog_read(g->s, &g->parts[1].key, got_fn, &x), HLOG_NOTFOUND);
	assert_int_equal(hlog_read(g->s, &g->parts[2].key, got_fn, &x), HLOG_NOTFOUND);
	/* Written again at its old size, the tombstoned part comes back in place. */
	gi_set(g, 1, 'd', 32, 0);
	assert_int_equal(gi_run(g, '3', 2), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 2);
	gi_check(g, &g->parts[1].key, 'd', 32, 32);
}

static void test_group_goes_to_the_span_when_a_record_cannot_change_in_place(void **state)
{
	gi *g = gi_open(state, 10, false);   /* a small mutable region */
	gi_set(g, 0, 'a', 32, 0);
	gi_set(g, 1, 'b', 32, 0);
	assert_int_equal(gi_run(g, '1', 2), HLOG_OK);
	/* A size that changes. */
	gi_set(g, 1, 'c', 48, 0);
	assert_int_equal(gi_run(g, '2', 2), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 0);
	gi_check(g, &g->parts[1].key, 'c', 48, 48);
	/* A part named twice: the span, which keeps the later value (group.c note 3). */
	g->parts[1] = g->parts[0];
	g->parts[1].val = g->pvals[1];
	memset(g->pvals[1], 'e', 32);
	assert_int_equal(gi_run(g, '3', 2), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 0);
	gi_check(g, &g->parts[0].key, 'e', 32, 32);
	/* Records below ReadOnly: other keys push the mutable region past them. */
	uint64_t at = gi_check(g, &g->parts[0].key, 'e', 32, 32);
	for (int i = 0; gi_info(g).read_only <= at; i++) {
		assert_true(i < 100000);
		test_key t;
		test_key_make(&t, "fill", i);
		uint8_t v[200] = { 0 };
		assert_int_equal(hlog_upsert(g->s, &t.k, v, sizeof(v), HLOG_NO_EXPIRY), HLOG_OK);
		hlog_session_refresh(g->s);
	}
	gi_set(g, 0, 'f', 32, 0);
	assert_int_equal(gi_run(g, '4', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 0);
	assert_true(gi_check(g, &g->parts[0].key, 'f', 32, 32) > at);
	/* Freshly written at the tail, the same group goes in place. */
	gi_set(g, 0, 'g', 32, 0);
	assert_int_equal(gi_run(g, '5', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 1);
}

static void test_group_span_only_never_changes_in_place(void **state)
{
	gi *g = gi_open(state, 90, true);
	gi_set(g, 0, 'a', 32, 0);
	assert_int_equal(gi_run(g, '1', 1), HLOG_OK);
	uint64_t tail = gi_info(g).tail;
	assert_int_equal(gi_run(g, '2', 1), HLOG_OK);
	assert_int_equal(gi_info(g).group_inplace, 0);
	assert_true(gi_info(g).tail > tail);
}

/* Two writers' groups on one head (a counter) and their own part, each rewriting all of a 256-byte
 * part with one byte; a reader checks that every part it reads is all one byte. */
#define RACE_ROUNDS 20000
#define RPART 256

typedef struct racer {
	hlog *l;
	int id;
	_Atomic int *stop;
	uint64_t torn;
} racer;

static int ctr_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	uint64_t *v = ctx;
	uint64_t cur = 0;
	if (old && old->len == 8)
		memcpy(&cur, old->ptr, 8);
	*v = cur + 1;
	out->action = HLOG_RMW_WRITE;
	out->new_len = 8;
	out->rtype = HLOG_T_HEAD;
	out->expire_ms = HLOG_NO_EXPIRY;
	return 0;
}

static void ctr_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)old;
	(void)in_place;
	memcpy(dst, ctx, 8);
}

static const hlog_rmw_ops ctr_ops = { ctr_plan, ctr_fill };

static void *writer_thread(void *arg)
{
	racer *r = arg;
	hlog_session *s;
	assert_int_equal(hlog_session_open(r->l, &s), 0);
	hlog_session_protect(s);
	hlog_key head;
	hlog_key_init(&head, "ctr", 3);
	char pk[8];
	snprintf(pk, sizeof(pk), "w%d", r->id);
	uint8_t val[RPART];
	for (int i = 1; i <= RACE_ROUNDS; i++) {
		memset(val, (uint8_t)i, sizeof(val));
		hlog_group_part part = { .val = val, .len = sizeof(val) };
		hlog_key_init_internal(&part.key, pk, strlen(pk));
		uint64_t v;
		assert_int_equal(hlog_group_rmw(s, &head, &ctr_ops, &v, &part, 1), HLOG_OK);
		if (i % 16 == 0)
			hlog_session_refresh(s);
	}
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

static void part_uniform_fn(void *ctx, const hlog_value *v)
{
	racer *r = ctx;
	const uint8_t *p = v->ptr;
	for (size_t j = 1; j < v->len; j++)
		if (p[j] != p[0]) {
			r->torn++;
			return;
		}
}

static void *reader_thread(void *arg)
{
	racer *r = arg;
	hlog_session *s;
	assert_int_equal(hlog_session_open(r->l, &s), 0);
	hlog_session_protect(s);
	hlog_key k[2];
	hlog_key_init_internal(&k[0], "w0", 2);
	hlog_key_init_internal(&k[1], "w1", 2);
	for (unsigned i = 0; !atomic_load(r->stop); i++) {
		(void)hlog_read(s, &k[i & 1], part_uniform_fn, r);
		if (i % 16 == 0)
			hlog_session_refresh(s);
	}
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

static void test_groups_racing_in_place_lose_no_update_and_tear_no_part(void **state)
{
	gi *g = gi_open(state, 90, false);
	hlog_session_unprotect(g->s);
	_Atomic int stop = 0;
	racer w[2], rd = { g->l, 9, &stop, 0 };
	pthread_t th[3];
	for (int i = 0; i < 2; i++) {
		w[i] = (racer){ g->l, i, &stop, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, writer_thread, &w[i]), 0);
	}
	assert_int_equal(pthread_create(&th[2], NULL, reader_thread, &rd), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	atomic_store(&stop, 1);
	assert_int_equal(pthread_join(th[2], NULL), 0);
	hlog_session_protect(g->s);
	hlog_key head;
	hlog_key_init(&head, "ctr", 3);
	got x;
	assert_int_equal(hlog_read(g->s, &head, got_fn, &x), HLOG_OK);
	uint64_t v;
	memcpy(&v, x.v, 8);
	assert_int_equal(v, 2 * RACE_ROUNDS);
	assert_int_equal(rd.torn, 0);
	hlog_info in = gi_info(g);
	assert_true(in.group_inplace > 0);                /* the path ran */
	print_message("in place: %llu of %d groups\n", (unsigned long long)in.group_inplace, 2 * RACE_ROUNDS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_group_in_place_rewrites_head_and_parts_where_they_lie, gi_teardown),
		cmocka_unit_test_teardown(test_group_part_with_capacity_grows_in_place_until_it_is_full, gi_teardown),
		cmocka_unit_test_teardown(test_group_in_place_sets_a_tombstone_and_skips_a_part_never_written,
		                          gi_teardown),
		cmocka_unit_test_teardown(test_group_goes_to_the_span_when_a_record_cannot_change_in_place,
		                          gi_teardown),
		cmocka_unit_test_teardown(test_group_span_only_never_changes_in_place, gi_teardown),
		cmocka_unit_test_teardown(test_groups_racing_in_place_lose_no_update_and_tear_no_part, gi_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
