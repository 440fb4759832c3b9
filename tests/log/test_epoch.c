/*
 * test_epoch.c - epoch protection: actions wait for every protected thread, run exactly once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "log/epoch_int.h"

static void count_action(void *ctx, uint64_t arg)
{
	atomic_fetch_add((_Atomic uint64_t *)ctx, arg);
}

/* An epoch table of the test's size and a count of actions run; teardown closes the table. */
typedef struct efix {
	epoch *e;
	_Atomic uint64_t ran;
} efix;

static efix *efix_open(void **state, int threads)
{
	efix *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	*state = f;
	assert_int_equal(epoch_open(&f->e, threads), 0);
	return f;
}

static int efix_teardown(void **state)
{
	efix *f = *state;
	if (f && f->e)
		epoch_close(f->e);
	free(f);
	return 0;
}

static void test_epoch_action_waits_until_every_protected_thread_refreshed(void **state)
{
	efix *f = efix_open(state, 4);
	epoch *e = f->e;
	epoch_protect(e, 0);
	epoch_protect(e, 1);
	epoch_protect(e, 2);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), 0);
	assert_int_equal(atomic_load(&f->ran), 0);
	epoch_refresh(e, 0);
	assert_int_equal(atomic_load(&f->ran), 0);
	epoch_refresh(e, 2);
	assert_int_equal(atomic_load(&f->ran), 0);
	assert_int_equal(epoch_pending(e), 1);
	epoch_refresh(e, 1);   /* the last one holding the old epoch */
	assert_int_equal(atomic_load(&f->ran), 1);
	assert_int_equal(epoch_pending(e), 0);
	epoch_refresh(e, 1);
	assert_int_equal(atomic_load(&f->ran), 1);   /* exactly once */
}

static void test_epoch_unprotect_releases_a_waiting_action(void **state)
{
	efix *f = efix_open(state, 2);
	epoch *e = f->e;
	epoch_protect(e, 0);
	epoch_protect(e, 1);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), 0);
	epoch_refresh(e, 0);
	assert_int_equal(atomic_load(&f->ran), 0);
	epoch_unprotect(e, 1);
	assert_false(epoch_is_protected(e, 1));
	epoch_drain(e);
	assert_int_equal(atomic_load(&f->ran), 1);
}

static void test_epoch_action_runs_at_once_when_nobody_is_protected(void **state)
{
	efix *f = efix_open(state, 3);
	epoch *e = f->e;
	uint64_t before = epoch_current(e);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 5), 0);
	assert_int_equal(epoch_current(e), before + 1);
	assert_int_equal(atomic_load(&f->ran), 5);
}

static void test_epoch_thread_protected_after_the_bump_does_not_hold_the_action(void **state)
{
	efix *f = efix_open(state, 2);
	epoch *e = f->e;
	epoch_protect(e, 0);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), 0);
	epoch_protect(e, 1);   /* sees the new epoch */
	assert_int_equal(atomic_load(&f->ran), 0);
	epoch_refresh(e, 0);
	assert_int_equal(atomic_load(&f->ran), 1);
}

static void test_epoch_bump_reports_a_full_drain_list_instead_of_waiting(void **state)
{
	efix *f = efix_open(state, 1);
	epoch *e = f->e;
	epoch_protect(e, 0);
	for (int i = 0; i < EPOCH_DRAIN_SLOTS; i++)
		assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), 0);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), -EAGAIN);
	assert_int_equal(atomic_load(&f->ran), 0);
	epoch_refresh(e, 0);
	assert_int_equal(atomic_load(&f->ran), EPOCH_DRAIN_SLOTS);
	assert_int_equal(epoch_bump(e, count_action, (void *)&f->ran, 1), 0);
	epoch_refresh(e, 0);
	assert_int_equal(atomic_load(&f->ran), EPOCH_DRAIN_SLOTS + 1);
}

static void test_epoch_open_rejects_zero_threads(void **state)
{
	(void)state;
	epoch *e;
	assert_int_equal(epoch_open(&e, 0), -EINVAL);
}

/* Several threads refresh in a loop while one bumps: every queued action runs exactly once. */
typedef struct race {
	epoch *e;
	_Atomic int stop;
	_Atomic uint64_t ran;
} race;

static race g_race;

static void *refresher(void *arg)
{
	int tid = (int)(intptr_t)arg;
	epoch_protect(g_race.e, tid);
	while (!atomic_load(&g_race.stop))
		epoch_refresh(g_race.e, tid);
	epoch_unprotect(g_race.e, tid);
	return NULL;
}

static void test_epoch_actions_run_exactly_once_under_concurrent_refresh(void **state)
{
	(void)state;
	enum { THREADS = 3, BUMPS = 20000 };
	pthread_t th[THREADS];
	assert_int_equal(epoch_open(&g_race.e, THREADS + 1), 0);
	atomic_store(&g_race.stop, 0);
	atomic_store(&g_race.ran, 0);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, refresher, (void *)(intptr_t)(i + 1)), 0);
	uint64_t queued = 0;
	epoch_protect(g_race.e, 0);
	for (int i = 0; i < BUMPS; i++) {
		if (epoch_bump(g_race.e, count_action, (void *)&g_race.ran, 1) == 0)
			queued++;
		epoch_refresh(g_race.e, 0);
	}
	atomic_store(&g_race.stop, 1);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	epoch_unprotect(g_race.e, 0);
	epoch_drain(g_race.e);
	assert_true(queued > 0);
	assert_int_equal(atomic_load(&g_race.ran), queued);
	assert_int_equal(epoch_pending(g_race.e), 0);
	epoch_close(g_race.e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_epoch_action_waits_until_every_protected_thread_refreshed, efix_teardown),
		cmocka_unit_test_teardown(test_epoch_unprotect_releases_a_waiting_action, efix_teardown),
		cmocka_unit_test_teardown(test_epoch_action_runs_at_once_when_nobody_is_protected, efix_teardown),
		cmocka_unit_test_teardown(test_epoch_thread_protected_after_the_bump_does_not_hold_the_action, efix_teardown),
		cmocka_unit_test_teardown(test_epoch_bump_reports_a_full_drain_list_instead_of_waiting, efix_teardown),
		cmocka_unit_test(test_epoch_open_rejects_zero_threads),
		cmocka_unit_test(test_epoch_actions_run_exactly_once_under_concurrent_refresh),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
