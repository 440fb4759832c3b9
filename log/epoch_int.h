/*
 * epoch_int.h - epoch protection (FASTER's LightEpoch), private to log/.
 *
 * A thread "protects" itself before it reads shared log memory and "unprotects" before it sleeps.
 * A thread that changes shared state (a marker such as SafeReadOnlyAddress, the set of live page
 * frames) first publishes the change, then bumps the global epoch with an action. The action runs,
 * exactly once and on whichever thread notices first, when every protected thread has published an
 * epoch newer than the bump (by refresh or a fresh protect): at that point no thread can still act
 * on the state it saw before the change.
 *
 * Threads are identified by a small integer tid in [0, max_threads), owned by the caller (the log
 * uses its session slot). Actions must be short and must not bump or wait on the epoch.
 */
#ifndef SPW_EPOCH_INT_H
#define SPW_EPOCH_INT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct epoch epoch;

/* An action runs as fn(ctx, arg) once its epoch is safe. */
typedef void (*epoch_action_fn)(void *ctx, uint64_t arg);

/* Actions waiting for their epoch at one time. A full list makes epoch_bump() fail with -EAGAIN
 * instead of spinning, because its caller may be the very thread holding the list back. */
#define EPOCH_DRAIN_SLOTS 64

/* 0, -EINVAL (max_threads < 1) or -ENOMEM. */
int epoch_open(epoch **out, int max_threads);
/* Pending actions are dropped, not run. */
void epoch_close(epoch *e);

/* Enter: publish the current epoch for tid (a seq_cst store, so that every later load of shared
 * state is ordered after it), then run actions that became safe. */
void epoch_protect(epoch *e, int tid);
/* Leave: tid holds nothing any more and blocks no action. */
void epoch_unprotect(epoch *e, int tid);
/* Re-publish the current epoch (tid must hold no pointer from before) and run safe actions. */
void epoch_refresh(epoch *e, int tid);
bool epoch_is_protected(const epoch *e, int tid);

/* Advance the epoch; with fn, queue fn(ctx, arg) to run once every thread protected now has moved
 * past the epoch before the bump. 0, or -EAGAIN when the drain list stayed full (the epoch was
 * advanced anyway; the caller keeps its state change and tries again later). */
int epoch_bump(epoch *e, epoch_action_fn fn, void *ctx, uint64_t arg);

/* Run every queued action whose epoch is safe now. Cheap when none is queued. */
void epoch_drain(epoch *e);

uint64_t epoch_current(const epoch *e);
/* Actions queued and not yet run. */
uint32_t epoch_pending(const epoch *e);

#endif
