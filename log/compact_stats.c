/*
 * compact_stats.c - the per-unit figures that let a compaction pass drop units whose records
 * have all expired without reading them (compact.c note 7): their rings (one per session, beside
 * the garbage counters), and the readers that sum them over the sessions. The writers are inline
 * in hlog_int.h (log_ustat_write, log_ustat_live), called from ops.c's update path.
 */

#include <errno.h>
#include <stdlib.h>

#include "log/hlog_int.h"

/* Margin on the drop's clock: operations decide expiry on a clock set per batch, so one may still
 * see a record as live for a moment after it expired by this thread's clock. */
#define LOG_EXPIRED_MARGIN_MS 2000

int log_ustats_open(hlog *l)
{
	atomic_store(&l->stats_from, 0);
	if (!l->dev)
		return 0;   /* the drop is for device units only (a page without a device is in memory) */
	l->ustats = calloc((size_t)l->max_sessions * LOG_GARBAGE_SLOTS, sizeof(*l->ustats));
	return l->ustats ? 0 : -ENOMEM;
}

void log_ustats_close(hlog *l)
{
	free(l->ustats);
	l->ustats = NULL;
}

void log_ustats_forget(hlog *l, uint64_t addr)
{
	marker_advance(&l->stats_from, addr);
}

/* Session i's slot for unit u, read consistently: 1 with its figures when it holds u, 0 when it
 * holds an older unit (the session wrote nothing for u), -1 when a newer unit holds it (what the
 * session had for u may be lost). */
static int ustat_read(hlog *l, int i, uint64_t u, int64_t *max_exp, int64_t *blockers, int64_t *live)
{
	log_ustat *p = &l->ustats[(uint64_t)i * LOG_GARBAGE_SLOTS + (u & (LOG_GARBAGE_SLOTS - 1))];
	uint64_t t1 = atomic_load_explicit(&p->unit, memory_order_acquire);
	if (t1 != u + 1)
		return t1 > u + 1 ? -1 : 0;
	*max_exp = atomic_load_explicit(&p->max_exp, memory_order_relaxed);
	*blockers = atomic_load_explicit(&p->blockers, memory_order_relaxed);
	*live = atomic_load_explicit(&p->live, memory_order_relaxed);
	/* The owner stores the tag before the figures of a new unit (log_ustat_slot): figures of a
	 * newer unit come with a newer tag here. */
	atomic_thread_fence(memory_order_acquire);
	uint64_t t2 = atomic_load_explicit(&p->unit, memory_order_relaxed);
	return t2 == t1 ? 1 : -1;
}

/* Unit u's figures over every session: false when some session's may be lost. */
static bool ustat_sum(hlog *l, uint64_t u, int64_t *max_exp, int64_t *blockers, int64_t *live)
{
	*max_exp = INT64_MIN;
	*blockers = *live = 0;
	for (int i = 0; i < l->max_sessions; i++) {
		int64_t m, b, v;
		int rc = ustat_read(l, i, u, &m, &b, &v);
		if (rc < 0)
			return false;
		if (rc == 0)
			continue;
		*max_exp = SPW_MAX(*max_exp, m);
		*blockers += b;
		*live += v;
	}
	return true;
}

uint64_t log_expired_prefix(hlog *l, uint64_t begin, uint64_t until)
{
	if (!l->ustats)
		return begin;
	uint64_t ub = l->unit_bits, from = atomic_load(&l->stats_from);
	uint64_t u0 = begin >> ub, tail_unit = tail_address(l, load_acq(&l->tail)) >> ub;
	int64_t cutoff = spw_time_ms() - LOG_EXPIRED_MARGIN_MS;
	uint64_t end = begin;
	/* Half a ring of room to the tail: no unit the tail reaches before the pass has read the
	 * dropped units' live counts shares their slots (compact.c note 7). */
	for (uint64_t u = u0; ((u + 1) << ub) <= until && (u << ub) >= from &&
	                      tail_unit < u0 + LOG_GARBAGE_SLOTS / 2; u++) {
		int64_t m, b, v;
		if (!ustat_sum(l, u, &m, &b, &v) || b != 0 || m >= cutoff)
			break;
		end = (u + 1) << ub;
	}
	return end;
}

/* The keys of units [u0, u1) whose newest version is there, summed over the sessions; false when
 * some session's count may be lost (a newer unit took its slot). */
bool log_expired_live(hlog *l, uint64_t u0, uint64_t u1, int64_t *keys)
{
	bool exact = true;
	*keys = 0;
	for (uint64_t u = u0; u < u1; u++) {
		int64_t m, b, v;
		exact &= ustat_sum(l, u, &m, &b, &v);
		*keys += v;
	}
	return exact;
}
