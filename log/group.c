/*
 * group.c - groups (hlog.h, hlog_group_rmw): one RMW of a user key (the head) and the new values
 * of internal keys (the parts) made visible together, head first. The state machine of one group:
 *
 *   lookup the head (ops.c's log_update_find) -> plan (log_update_plan) -> reserve the span
 *   (alloc_reserve / alloc_reserve_group) -> fill the head and copy the parts in (all sealed:
 *   unpublished) -> publish the head (CAS) -> publish each part (CAS, retried) -> redo calls ->
 *   every record valid, the head's old version sealed.
 *   A lost head CAS leaves the whole span as garbage and starts over from the lookup.
 *
 * NOTES ON THE DESIGN OF GROUPS
 *
 *  1. One span. The group's records are laid out back to back in ONE reservation at the tail: a
 *     group that fits in what is left of the tail page goes there (alloc_reserve, as one record
 *     would); a larger one starts a fresh page and covers whole pages (alloc_reserve_group: the
 *     spanning-record allocation of alloc.c note 5 without its span marks). Inside the span no
 *     record crosses a page end: where the next record does not fit in the rest of a page, that
 *     rest becomes a filler (an invalid record, as the checkpoint cut's filler; 8 bytes too short
 *     for a header stay zero, which walkers read as "rest of the page empty"), and the record
 *     starts the next page. So every page walker (scan.c, compact.c, recover.c) parses the span's
 *     pages as ordinary records, and each of its pages is written and evicted by itself. Every
 *     record must therefore fit in a page (else SPW_E_TOO_BIG).
 *
 *  2. Nothing is written before everything is known. The head's old value is found first (a cold
 *     one goes pending through pending.c, HLOG_PENDING with nothing written), the plan is made,
 *     the part index entries exist (created before the span, so -ENOMEM comes before it), and the
 *     reservation is the only allocation: a frame wait (LOG_E_WAIT, pending.c note 2) or a full
 *     log also leaves nothing behind. A plan that keeps the head (or deletes an absent one) gets
 *     -EINVAL: a group always writes its head, so that its redo records start with it.
 *
 *  3. Publishing (ops.c note 1). The head's CAS expects the index word the lookup started from,
 *     like any RMW: a writer that came in between makes it fail, the span stays sealed and invalid
 *     (garbage, never reachable), and the loop replans from the new value and reserves again.
 *     Once the head's CAS won, each part is published by a CAS on its own index entry, its
 *     previous-address field set from the word it expects; a failed part CAS refreshes the word and
 *     tries again, or looks the entry up again when the word is no longer its key's (a clear took
 *     the entry: a fresh one, tag|0, is below any Begin). The group holds every entry it publishes
 *     into from before its reservation to its last part's CAS (note 8), so the word a part's CAS
 *     meets names a record below the span, or the group's own earlier record of that key: every
 *     chain goes down in address, which pending.c's device walk, recover.c's index repair and
 *     compaction's Begin rule (compact.c note 1) rely on. Among writers of the part's own key it
 *     could only lose to compaction's conditional copy of an older version (parts are written
 *     only under the collection's exclusive latch), and such a copy, like a record of another
 *     key sharing the entry, now either came before the lock (below the span: a CAS it wins
 *     before ours is a plain retry) or waits for the group to end. As parts are written only
 *     under that latch, an old version of a part needs no seal: no in-place writer can be on it.
 *     The head and the parts become valid only after every part is published; readers that meet
 *     them meanwhile wait (ops.c note 1), holding nothing.
 *     The head's old version R, when mutable, stays locked exclusive from the lookup to the end
 *     (as in an RCU) and is sealed once the new head is valid.
 *
 *  4. Why a group is atomic for checkpoints. All its records are in one span, and a checkpoint's
 *     cut moves the tail (alloc_cut) between two reservations, so the span lies wholly below or
 *     wholly above the cut. A span below the cut is fully published before SafeReadOnly passes the
 *     cut, i.e. before its pages are written: the group's whole run, from the reservation to the
 *     last VALID store, holds the session's epoch without a refresh (restarts refresh only before
 *     a new reservation, holding nothing), and SafeReadOnly passes an address only after every
 *     session has refreshed since ReadOnly passed it (alloc.c note 6). A recovered log therefore
 *     holds every record of a group or none, and the index repair (recover.c note 1) raises each
 *     part's entry as it does any record's.
 *
 *  5. Redo (hlog.h, "durability"). Each record takes its seq right before its CAS, so that one key's
 *     changes keep increasing seqs. The hook is called for every record, in publish order (head
 *     first), after the last CAS and before any record is valid (nobody can change them), with
 *     group_more set on all but the last; and only when Begin had not passed the span then (a
 *     FLUSHALL that overtook the group took its seq after every one of the group's, and the whole
 *     group is gone from the store: none of it is logged, never a part of it).
 *
 *  6. Counts. The head counts as any RMW's new version (log_update_published); the parts count in no
 *     key count (ops.c note 5). Each part's old version in memory becomes garbage when it was a
 *     value, a part's tombstone is garbage itself (compact.c note 3); an old version on the device
 *     is not looked for (statistics only). A filler and a lost span are not counted, as a lost
 *     CAS's record is not.
 *
 *  7. Limits: hlog_group_max_bytes = a quarter of the memory region, at most 64 MiB, for the sum of
 *     the records' sizes (the fillers come on top, less than a page per page); a group that needs
 *     more answers SPW_E_TOO_BIG, with nothing written. A span of N pages needs N <= max_pages - 1
 *     pages (alloc.c note 5), which a quarter of the region always leaves.
 *
 *  8. Group locks: why every part's chain goes down. Between the reservation and a part's CAS,
 *     any record published into the part's index entry would lie above the span (reserved
 *     later), and the part's CAS, expecting that word, would point the part's previous address
 *     up: a record of another key sharing the entry (same bucket and tag), or compaction's copy
 *     of the part's older version. Walkers cannot accept such a link: pending.c would read the
 *     higher address from the device before it is written there; recover.c raises an entry to
 *     the highest valid record, which would hide the part behind the other one; and once Begin
 *     passes the part, every walk stops there (compact.c note 1), losing the other key's record
 *     above it. So the race is prevented, not repaired: before its reservation the group takes
 *     a lock on the stripe (hidx_entry_stripe: one number per entry, whatever the index's size) of
 *     its head and of each part, in l->group_locks (the session's id + 1, taken by CAS, all or
 *     none: a stripe another group holds makes it release what it took and start over, so no
 *     group waits for another while holding one); l->group_lockers counts the groups holding
 *     some. ops.c's one publishing path checks the stripe after its own reservation and before
 *     its CAS (log_group_holds) and, when held, leaves its record as garbage (a lost CAS's) and
 *     starts over (counted in group_entry_waits). Why that suffices: the group's lock, its
 *     reservation, the writer's reservation and the writer's check are sequentially consistent,
 *     and the reservations are RMWs of one tail word: a writer whose record lies above the span
 *     reserved after the group did, so it sees the lock; a writer that did not see it reserved
 *     before the span and publishes below it (then a part's CAS just retries). Stripes are
 *     released after the last part's CAS (later records go on top of a published part and point
 *     down), and on every path that gives the span up. Costs: two RMWs on a shared line per
 *     group, one load per write while a group runs (a second on the stripe only then), and the
 *     writes that share a stripe with a running group start over for the group's few
 *     microseconds. Nothing lies outside the span, so note 4's atomicity for checkpoints and the
 *     AOF's group_more (note 5) stay as they were; a writer refused here holds nothing (it
 *     dropped R's lock) and never waits inside a group's window (its restart refreshes).
 */

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "log/alloc_int.h"
#include "log/hlog_int.h"
#include "log/ops_int.h"
#include "log/pending_int.h"

#define GROUP_MAX_BYTES (64ULL << 20)

uint64_t hlog_group_max_bytes(hlog *l)
{
	/* A quarter of the memory region (note 7). */
	return SPW_MIN(l->max_pages * l->page_bytes / 4, GROUP_MAX_BYTES);
}

/* One run of a group: the head's update as ops.c sees it, and the span. */
typedef struct group_run {
	hlog_session *s;
	const hlog_key *head;
	const hlog_group_part *parts;
	size_t nparts;
	log_op op;
	log_upd u;
	uint64_t span;               /* the span's first address */
	uint64_t head_addr;
	uint64_t head_info;          /* the new head's info word, without SEALED/VALID */
	uint64_t head_seq;
} group_run;

static uint64_t group_part_size(const hlog_group_part *p)
{
	return rec_size_of(p->key.len, p->del ? 0 : p->len, false);
}

/* The hash of the group's i-th key: 0 the head, i the part i - 1. */
static uint64_t group_hash(const group_run *g, size_t i)
{
	return i == 0 ? g->head->hash : g->parts[i - 1].key.hash;
}

/* Give back the stripes of the group's first n keys (note 8), each only while it is still ours:
 * a stripe named twice was given back at its first name, and may be another group's by now. */
static void group_unlock(group_run *g, size_t n)
{
	hlog *l = g->s->l;
	uint32_t me = (uint32_t)g->s->id + 1;
	for (size_t i = 0; i < n; i++) {
		uint32_t cur = me;
		atomic_compare_exchange_strong(&l->group_locks[hidx_entry_stripe(group_hash(g, i))], &cur, 0);
	}
	atomic_fetch_sub(&l->group_lockers, 1);
}

/* Take the stripes of the head and of every part (note 8), all or none: true when all are ours;
 * false, holding none, when another group holds one. Before the reservation, sequentially
 * consistent (the count first, so that a write that sees a stripe also looks at it). */
static bool group_lock(group_run *g)
{
	hlog *l = g->s->l;
	uint32_t me = (uint32_t)g->s->id + 1;
	atomic_fetch_add(&l->group_lockers, 1);
	for (size_t i = 0; i <= g->nparts; i++) {
		_Atomic uint32_t *w = &l->group_locks[hidx_entry_stripe(group_hash(g, i))];
		uint32_t cur = 0;
		if (!atomic_compare_exchange_strong(w, &cur, me) && cur != me) {
			group_unlock(g, i);
			return false;
		}
	}
	return true;
}

/* Where a record of size bytes goes when the span's layout has reached *pos (note 1): *pos, or the
 * next page when the rest of this one is too short (a filler there when fill). Advances *pos. */
static uint64_t group_place(hlog *l, uint64_t *pos, uint64_t size, bool fill)
{
	uint64_t page_end = (*pos | (l->page_bytes - 1)) + 1;
	if (*pos + size > page_end) {
		uint64_t gap = page_end - *pos;
		if (fill && gap >= REC_HDR_BYTES) {
			log_rec *f = hlog_rec_at(l, *pos);
			f->key_len = 0;
			f->val_len = (uint32_t)(gap - REC_HDR_BYTES);
			atomic_store_explicit(&f->info, REC_SEALED, memory_order_relaxed);   /* garbage */
		}
		*pos = page_end;
	}
	uint64_t at = *pos;
	*pos += size;
	return at;
}

/* The span's bytes when it starts a page (note 1). */
static uint64_t group_span_bytes(hlog *l, const group_run *g)
{
	uint64_t pos = 0;
	group_place(l, &pos, g->u.size, false);
	for (size_t i = 0; i < g->nparts; i++)
		group_place(l, &pos, group_part_size(&g->parts[i]), false);
	return pos;
}

/* Write the span at g->span: the head (filled by the plan's fill), then the parts, all sealed. */
static void group_write(group_run *g)
{
	hlog *l = g->s->l;
	log_upd *u = &g->u;
	uint64_t pos = g->span;
	g->head_addr = group_place(l, &pos, u->size, true);
	log_rec *n = hlog_rec_at(l, g->head_addr);
	g->head_info = hidx_slot_addr(&u->slot) | (u->new_exp ? REC_HAS_EXPIRY : 0) |
	               (u->wr ? rec_type_bits(u->plan.rtype) : REC_TOMBSTONE);
	atomic_store_explicit(&n->info, g->head_info | REC_SEALED, memory_order_relaxed);
	n->key_len = (uint32_t)g->head->len;
	n->val_len = (uint32_t)u->vlen;
	if (u->new_exp)
		*(int64_t *)(n + 1) = u->plan.expire_ms;
	memcpy(rec_key(n, g->head_info), g->head->ptr, g->head->len);
	if (u->wr)
		g->op.ops->fill(g->op.ctx, u->oldp, rec_val(n, g->head_info), false);
	log_ustat_write(g->s, g->head_addr, u->size, u->wr, u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY);
	for (size_t i = 0; i < g->nparts; i++) {
		const hlog_group_part *p = &g->parts[i];
		uint64_t size = group_part_size(p);
		uint64_t a = group_place(l, &pos, size, true);
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info = rec_type_bits(HLOG_T_PART) | (p->del ? REC_TOMBSTONE : 0);
		atomic_store_explicit(&r->info, info | REC_SEALED, memory_order_relaxed);
		r->key_len = (uint32_t)p->key.len;
		r->val_len = p->del ? 0 : (uint32_t)p->len;
		if (p->key.len)
			memcpy(rec_key(r, info), p->key.ptr, p->key.len);
		if (!p->del && p->len)
			memcpy(rec_val(r, info), p->val, p->len);
		log_ustat_write(g->s, a, size, !p->del, HLOG_NO_EXPIRY);
	}
}

/* Lookup and plan (notes 2 and 3): UPD_NEXT with the head's update planned (R locked when
 * mutable), UPD_RESTART (nothing held), or what the group returns. */
static int group_plan(group_run *g)
{
	hlog_session *s = g->s;
	hlog *l = s->l;
	log_upd *u = &g->u;
	int rc = log_update_find(s, g->head, &g->op, u);
	if (rc != UPD_NEXT)
		return rc;
	rc = log_update_plan(s, g->head, &g->op, u);
	if (rc == UPD_NEXT && u->size > l->page_bytes)
		rc = SPW_E_TOO_BIG;   /* note 1: no record of a span crosses a page */
	if (rc == UPD_NEXT) {
		uint64_t sum = u->size;
		for (size_t i = 0; i < g->nparts; i++)
			sum += group_part_size(&g->parts[i]);
		if (sum > hlog_group_max_bytes(l))
			rc = SPW_E_TOO_BIG;
	}
	if (rc == UPD_NEXT && !u->have_slot) {
		if ((rc = hidx_entry_find_or_create(l->idx, g->head->hash, &u->slot)) == 0) {
			u->have_slot = true;
			/* Someone published into the entry meanwhile: replan. */
			rc = hidx_slot_addr(&u->slot) != 0 ? UPD_RESTART : UPD_NEXT;
		}
	}
	if (rc != UPD_NEXT && u->mut)
		rec_unlock_excl(u->r, u->info);
	if (rc >= 0 && rc != UPD_NEXT && rc != UPD_RESTART)
		return -EINVAL;   /* note 2: the plan kept the head, or deleted an absent one */
	return rc;
}

/* Reserve the span (note 1), the stripes held (note 8): UPD_NEXT with g->span, or (R unlocked,
 * the stripes given back) UPD_RESTART or what the group returns (HLOG_PENDING for a frame wait,
 * SPW_E_LOG_FULL, SPW_E_STORE_ERROR). */
static int group_reserve(group_run *g)
{
	hlog_session *s = g->s;
	hlog *l = s->l;
	uint64_t bytes = group_span_bytes(l, g), need = 0;
	int64_t na = bytes <= l->page_bytes ? alloc_reserve(s, bytes, &need) : alloc_reserve_group(s, bytes, &need);
	if (na >= 0) {
		g->span = (uint64_t)na;
		return UPD_NEXT;
	}
	group_unlock(g, g->nparts + 1);
	if (g->u.mut)
		rec_unlock_excl(g->u.r, g->u.info);
	if (na == LOG_E_RETRY)
		return UPD_RESTART;
	if (na == LOG_E_WAIT) {
		int rc = pend_wait(s, need);
		return rc == 0 ? UPD_RESTART : rc;
	}
	if (na == SPW_E_LOG_FULL)
		ctr_add(&s->log_full_errors, 1);
	return (int)na;
}

/* Publish part i at a (note 3): CAS until it wins; the old version's garbage (note 6). */
static void group_part_publish(group_run *g, size_t i, uint64_t a)
{
	hlog_session *s = g->s;
	hlog *l = s->l;
	const hlog_group_part *p = &g->parts[i];
	log_rec *r = hlog_rec_at(l, a);
	uint64_t info = rec_type_bits(HLOG_T_PART) | (p->del ? REC_TOMBSTONE : 0);
	hidx_slot slot;
	unsigned spins = 0;
	for (bool done = false; !done; ) {
		while (hidx_entry_find_or_create(l->idx, p->key.hash, &slot) != 0) {
			/* Created before the span (note 2): gone only by a FLUSHALL's clear, which left the
			 * whole group below Begin (invisible: nothing to publish). */
			if (g->span < load_acq(&l->begin))
				return;
			log_spin(&spins);
		}
		uint64_t tag = slot.word & ~HIDX_ADDR_MASK;
		for (;;) {
			atomic_store_explicit(&r->info, hidx_slot_addr(&slot) | info | REC_SEALED, memory_order_relaxed);
			if ((done = hidx_slot_cas(&slot, a)))
				break;
			/* Lost to compaction's copy (note 3): slot.word is fresh. A word of another tag (or 0)
			 * is a clear of the entry (a fresh one is tag|0, below any Begin) and maybe a reuse
			 * of its slot: look the entry up again (index/hidx.c, "Publishing and clearing"). */
			if ((slot.word & ~HIDX_ADDR_MASK) != tag)
				break;
			log_spin(&spins);
		}
		if (!done && g->span < load_acq(&l->begin))
			return;   /* a FLUSHALL's clear: the group is invisible */
	}
	uint64_t prev = atomic_load_explicit(&r->info, memory_order_relaxed) & REC_PREV_MASK, cold = 0, oinfo;
	log_rec *o;
	uint64_t oa = prev ? log_chain_find(l, prev, load_acq(&l->begin), &p->key, &o, &oinfo, &cold) : 0;
	/* A version in our own span (the group names this part twice) becomes valid only at the end:
	 * its info word already says whether it is a tombstone. */
	if (oa && oa < g->span)
		oinfo = rec_wait_valid(o, oinfo);
	if (oa && !(oinfo & REC_TOMBSTONE))
		log_garbage_add(s, oa, (int64_t)rec_size(o, oinfo));
	if (p->del)
		log_garbage_add(s, a, (int64_t)group_part_size(p));
	ctr_add(&s->appends, 1);
}

/* The head's CAS won: publish the parts, give the stripes back (note 8), call the redo hook
 * (note 5), make every record valid, seal R, count (note 6). */
static void group_finish(group_run *g)
{
	hlog_session *s = g->s;
	hlog *l = s->l;
	log_upd *u = &g->u;
	uint64_t pos = g->head_addr + u->size;
	for (size_t i = 0; i < g->nparts; i++)
		group_part_publish(g, i, group_place(l, &pos, group_part_size(&g->parts[i]), false));
	/* Every part is in its entry: what comes on top now points down (note 8). */
	group_unlock(g, g->nparts + 1);
	log_rec *n = hlog_rec_at(l, g->head_addr);
	/* seqs first, then Begin (both sequentially consistent): see hlog_flush_all. */
	if (SPW_UNLIKELY(s->redo != NULL) && g->span >= atomic_load(&l->begin)) {
		log_redo(s, g->head_seq, g->head_addr, g->head, u->wr, n, g->head_info,
		         u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY, g->nparts > 0);
		pos = g->head_addr + u->size;
		for (size_t i = 0; i < g->nparts; i++) {
			const hlog_group_part *p = &g->parts[i];
			uint64_t a = group_place(l, &pos, group_part_size(p), false);
			log_rec *r = hlog_rec_at(l, a);
			uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
			log_redo(s, g->head_seq + 1 + i, a, &p->key, !p->del, r, info, HLOG_NO_EXPIRY, i + 1 < g->nparts);
		}
	}
	pos = g->head_addr + u->size;
	for (size_t i = 0; i < g->nparts; i++) {
		log_rec *r = hlog_rec_at(l, group_place(l, &pos, group_part_size(&g->parts[i]), false));
		uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
		atomic_store_explicit(&r->info, (info & ~REC_SEALED) | REC_VALID, memory_order_release);
	}
	atomic_store_explicit(&n->info, g->head_info | REC_VALID, memory_order_release);
	/* Seal the source only after the new version is valid (ops.c, log_update_append). */
	if (u->mut)
		rec_unlock_excl(u->r, u->info | REC_SEALED);
	log_update_published(s, g->head, &g->op, u, g->head_addr);
}

/* The arguments' checks, and the parts' index entries created (note 2). 0 or an error. */
static int group_check(hlog *l, const hlog_key *head, const hlog_group_part *parts, size_t nparts)
{
	if (SPW_UNLIKELY(atomic_load_explicit(&l->error, memory_order_relaxed) != 0))
		return SPW_E_STORE_ERROR;   /* alloc.c note 10 */
	if (head->internal)
		return -EINVAL;
	if (head->len > l->page_bytes)
		return SPW_E_TOO_BIG;
	for (size_t i = 0; i < nparts; i++) {
		if (!parts[i].key.internal)
			return -EINVAL;
		if (group_part_size(&parts[i]) > l->page_bytes || parts[i].len > l->page_bytes)
			return SPW_E_TOO_BIG;
	}
	for (size_t i = 0; i < nparts; i++) {
		hidx_slot slot;
		int rc = hidx_entry_find_or_create(l->idx, parts[i].key.hash, &slot);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int hlog_group_rmw(hlog_session *s, const hlog_key *head, const hlog_rmw_ops *ops, void *ctx,
                   const hlog_group_part *parts, size_t nparts)
{
	hlog *l = s->l;
	unsigned spins = 0;
	int rc = group_check(l, head, parts, nparts);
	if (rc != 0)
		return rc;
	group_run g = { .s = s, .head = head, .parts = parts, .nparts = nparts };
	g.op = (log_op){ .kind = OP_RMW, .ops = ops, .ctx = ctx };
	for (;;) {
		rc = group_plan(&g);
		if (rc == UPD_NEXT && !group_lock(&g)) {
			if (g.u.mut)
				rec_unlock_excl(g.u.r, g.u.info);
			ctr_add(&s->group_entry_waits, 1);
			rc = UPD_RESTART;   /* another group holds one of our entries (note 8) */
		}
		if (rc == UPD_NEXT)
			rc = group_reserve(&g);
		if (rc == UPD_NEXT) {
			/* From here to the last VALID store: no epoch refresh (note 4). */
			group_write(&g);
			/* The group's seqs, one block, right before the head's CAS (note 5). */
			g.head_seq = SPW_UNLIKELY(s->redo != NULL) ? atomic_fetch_add(&l->redo_seq, 1 + nparts) : 0;
			if (hidx_slot_cas(&g.u.slot, g.head_addr)) {
				group_finish(&g);
				return HLOG_OK;
			}
			group_unlock(&g, nparts + 1);
			if (g.u.mut)
				rec_unlock_excl(g.u.r, g.u.info);
			rc = UPD_RESTART;   /* the span stays sealed and invalid: garbage (note 3) */
		}
		if (rc != UPD_RESTART)
			return rc;
		log_retry(s, &spins);
	}
}
