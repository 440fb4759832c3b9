/*
 * epoch.c - epoch protection after FASTER's LightEpoch.
 *
 * Design notes:
 *  1. The global epoch `current` starts at 1 and only grows. Each thread has one table entry on its
 *     own cache line: 0 = not protected, else the epoch it last published. Only the owner writes its
 *     entry; anyone reads it.
 *  2. The safe epoch is (oldest published epoch) - 1, or current - 1 when nobody is protected. Every
 *     thread that could still hold a pointer or a marker value from epoch <= safe has since
 *     re-published a newer epoch (or left).
 *  3. epoch_bump() advances `current` from E to E+1 and queues the action with trigger epoch E. The
 *     action runs when safe >= E, i.e. every protected thread published an epoch > E, which it can
 *     only have read after the bump, hence after the state change the caller made before bumping.
 *  4. A thread that loads `current` just before a bump and stores it just after a drain saw its entry
 *     at 0 has published a stale epoch; that is harmless. Its store and all its later loads of shared
 *     state follow the drainer's load of its entry in the seq_cst order, so it sees the new state.
 *  5. Drain list: EPOCH_DRAIN_SLOTS fixed slots, each with a trigger word: FREE, LOCKED (being filled
 *     or emptied) or the trigger epoch. Pushing and popping claim the slot by CAS on that word, so
 *     each action runs exactly once, on whichever thread pops it, outside any lock.
 *  6. A full list is reported (-EAGAIN), never waited on: the bumping thread may itself be the one
 *     protected at an old epoch, and it may hold record pointers that forbid a refresh. The log backs
 *     out of its operation, refreshes, and tries again.
 *  7. Cost: protect/refresh is one load of `current`, one seq_cst store to the thread's own line and
 *     one load of drain_count; the O(threads) scan happens only while actions are queued.
 */
#include "log/epoch_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"

#define EPOCH_FREE   UINT64_MAX          /* drain slot holds nothing */
#define EPOCH_LOCKED (UINT64_MAX - 1)    /* drain slot being filled or emptied */

typedef struct epoch_entry {
	_Atomic uint64_t local;              /* 0 = unprotected, else the epoch this thread published */
	char pad[SPW_CACHELINE - sizeof(uint64_t)];
} epoch_entry;

typedef struct epoch_action {
	_Atomic uint64_t trigger;            /* EPOCH_FREE, EPOCH_LOCKED or the trigger epoch */
	epoch_action_fn fn;
	void *ctx;
	uint64_t arg;
} epoch_action;

struct epoch {
	_Atomic uint64_t current SPW_ALIGNED_CL;
	_Atomic uint32_t drain_count;        /* queued actions; refresh drains only when nonzero */
	epoch_action drain[EPOCH_DRAIN_SLOTS] SPW_ALIGNED_CL;
	int nthreads;
	epoch_entry *table;
};

int epoch_open(epoch **out, int max_threads)
{
	epoch *e = NULL;
	if (max_threads < 1)
		return -EINVAL;
	e = aligned_alloc(SPW_CACHELINE, SPW_ALIGN_UP(sizeof(*e), SPW_CACHELINE));
	if (!e)
		goto fail;
	memset(e, 0, sizeof(*e));
	e->table = aligned_alloc(SPW_CACHELINE, (size_t)max_threads * sizeof(epoch_entry));
	if (!e->table)
		goto fail;
	memset(e->table, 0, (size_t)max_threads * sizeof(epoch_entry));
	e->nthreads = max_threads;
	atomic_init(&e->current, 1);
	atomic_init(&e->drain_count, 0);
	for (int i = 0; i < EPOCH_DRAIN_SLOTS; i++)
		atomic_init(&e->drain[i].trigger, EPOCH_FREE);
	*out = e;
	return 0;
fail:
	free(e);
	return -ENOMEM;
}

void epoch_close(epoch *e)
{
	if (!e)
		return;
	free(e->table);
	free(e);
}

uint64_t epoch_current(const epoch *e)
{
	return atomic_load(&e->current);
}

uint32_t epoch_pending(const epoch *e)
{
	return atomic_load(&e->drain_count);
}

bool epoch_is_protected(const epoch *e, int tid)
{
	return atomic_load_explicit(&e->table[tid].local, memory_order_relaxed) != 0;
}

/* The largest epoch no protected thread can still be in (note 2). */
static uint64_t epoch_safe_compute(epoch *e)
{
	uint64_t oldest = atomic_load(&e->current);
	for (int i = 0; i < e->nthreads; i++) {
		uint64_t v = atomic_load(&e->table[i].local);
		if (v != 0 && v < oldest)
			oldest = v;
	}
	return oldest - 1;
}

void epoch_drain(epoch *e)
{
	if (atomic_load_explicit(&e->drain_count, memory_order_acquire) == 0)
		return;
	uint64_t safe = epoch_safe_compute(e);
	for (int i = 0; i < EPOCH_DRAIN_SLOTS; i++) {
		epoch_action *a = &e->drain[i];
		uint64_t t = atomic_load_explicit(&a->trigger, memory_order_acquire);
		/* FREE and LOCKED are larger than any safe epoch, so one comparison skips them. */
		if (t > safe)
			continue;
		if (!atomic_compare_exchange_strong(&a->trigger, &t, EPOCH_LOCKED))
			continue;   /* another thread popped it */
		epoch_action_fn fn = a->fn;
		void *ctx = a->ctx;
		uint64_t arg = a->arg;
		atomic_store_explicit(&a->trigger, EPOCH_FREE, memory_order_release);
		atomic_fetch_sub(&e->drain_count, 1);
		fn(ctx, arg);
	}
}

void epoch_protect(epoch *e, int tid)
{
	epoch_refresh(e, tid);
}

void epoch_unprotect(epoch *e, int tid)
{
	/* release: every read of log memory this thread made happens before a drainer sees 0 */
	atomic_store_explicit(&e->table[tid].local, 0, memory_order_release);
}

void epoch_refresh(epoch *e, int tid)
{
	/* seq_cst: the loads of markers and index entries that follow must not move above this store
	 * (on x86 this is the one xchg of the protect). */
	atomic_store(&e->table[tid].local, atomic_load(&e->current));
	epoch_drain(e);
}

/* Claim a free slot and queue the action with trigger epoch prior. false when none is free. */
static bool epoch_action_push(epoch *e, uint64_t prior, epoch_action_fn fn, void *ctx, uint64_t arg)
{
	for (int i = 0; i < EPOCH_DRAIN_SLOTS; i++) {
		epoch_action *a = &e->drain[i];
		uint64_t t = EPOCH_FREE;
		if (atomic_load_explicit(&a->trigger, memory_order_relaxed) != EPOCH_FREE)
			continue;
		if (!atomic_compare_exchange_strong(&a->trigger, &t, EPOCH_LOCKED))
			continue;
		a->fn = fn;
		a->ctx = ctx;
		a->arg = arg;
		/* Count first, publish second: a drainer that sees the trigger also sees a nonzero count. */
		atomic_fetch_add(&e->drain_count, 1);
		atomic_store_explicit(&a->trigger, prior, memory_order_release);
		return true;
	}
	return false;
}

int epoch_bump(epoch *e, epoch_action_fn fn, void *ctx, uint64_t arg)
{
	/* seq_cst RMW: the caller's state change (made before this call) precedes the new epoch. */
	uint64_t prior = atomic_fetch_add(&e->current, 1);
	int rc = 0;
	if (fn && !epoch_action_push(e, prior, fn, ctx, arg)) {
		/* Running the actions that are already safe may free a slot. */
		epoch_drain(e);
		if (!epoch_action_push(e, prior, fn, ctx, arg))
			rc = -EAGAIN;
	}
	epoch_drain(e);
	return rc;
}
