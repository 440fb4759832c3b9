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
 *
 *  9. In place. A group whose records all lie in the mutable region and keep their sizes changes
 *     them where they are (group_in_place), with no span, no stripes and no CAS: the head R is
 *     locked exclusive by the lookup (ops.c note 3); then ONE load of ReadOnly classifies R and
 *     every part's newest version (found in memory, each locked exclusive: a reader's share is
 *     waited for, another writer's lock, a seal or a part named twice sends the group to the
 *     span); every record is rewritten, the redo hook called for each in order with group_more
 *     (one block of seqs, taken under all the locks), and only then is any lock dropped. Why
 *     this is atomic:
 *     - for readers: every reader of a mutable record holds its share, so it sees each record
 *       before or after; a reader of several (a collection command) holds the collection's
 *       shared latch against the writer's exclusive one, as for the span;
 *     - for checkpoints: from the ReadOnly load to the last store the session does not refresh
 *       its epoch, so a cut that moved ReadOnly after the load waits (SafeReadOnly) until every
 *       record is rewritten, and all of them lie below it: the checkpoint holds the whole group;
 *       a cut before the load leaves R below ReadOnly and the group goes to the span;
 *     - for the AOF: the records are framed with group_more as a span's are (note 5), and logged
 *       only when R is above Begin (a FLUSHALL that overtook the group moved Begin past all of
 *       them: no part of it is logged).
 *     A part to delete that has no version at all (none in memory, the chain not reaching the
 *     device) needs nothing; one whose chain goes on to the device, or a part to write that is
 *     absent, sends the group to the span. Counts: nothing is published, so the key counts
 *     stay (R stays live with its expiry presence); a value written counts for its unit as an
 *     in-place update does (ops.c, log_update_in_place), a tombstone set makes the old value
 *     garbage. Sizes: a collection keeps a bucket's record at its capacity (hlog_group_part.cap,
 *     the bytes past the listpack zero), so that a write that grows it a little stays in place.
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

/* A part's record value length: cap when it is more than len (hlog.h). */
static size_t group_part_vlen(const hlog_group_part *p)
{
	return p->del ? 0 : p->cap > p->len ? p->cap : p->len;
}

static uint64_t group_part_size(const hlog_group_part *p)
{
	return rec_size_of(p->key.len, group_part_vlen(p), false);
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
		r->val_len = (uint32_t)group_part_vlen(p);
		if (p->key.len)
			memcpy(rec_key(r, info), p->key.ptr, p->key.len);
		if (!p->del && p->len)
			memcpy(rec_val(r, info), p->val, p->len);
		/* The frame is zero where the span was reserved: the capacity past len is too. */
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
		if (group_part_size(&parts[i]) > l->page_bytes || group_part_vlen(&parts[i]) > l->page_bytes)
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

/* Note 9: at most this many parts are changed in place (more go to the span). */
#define GROUP_INPLACE_MAX 16

typedef struct group_ip {
	log_rec *r;                  /* NULL: a part to delete that has no version */
	uint64_t a, info;            /* info: with our REC_LOCK_X */
} group_ip;

/* Part i's newest version, found in memory at or above ro and locked exclusive into *ip: true;
 * false (nothing held) when the group must take the span. */
static bool group_ip_find(group_run *g, size_t i, uint64_t ro, group_ip *ip, const group_ip *got)
{
	hlog *l = g->s->l;
	const hlog_group_part *p = &g->parts[i];
	hidx_slot slot;
	uint64_t cold = 0;
	ip->r = NULL;
	ip->a = 0;
	if (hidx_entry_find(l->idx, p->key.hash, &slot) == 0)
		ip->a = log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), &p->key, &ip->r, &ip->info,
		                       &cold);
	if (!ip->a)
		return p->del && !cold;   /* nothing to delete; a value needs a new record */
	if (ip->a < ro)
		return false;
	for (size_t j = 0; j < i; j++)
		if (got[j].r == ip->r)
			return false;    /* named twice: the span keeps the last (note 3) */
	if (!(ip->info & REC_VALID) || !(ip->info = rec_try_lock_excl(ip->r)))
		return false;
	if (!p->del && rec_size(ip->r, ip->info) != group_part_size(p)) {
		rec_unlock_excl(ip->r, ip->info);
		return false;
	}
	return true;
}

/* Rewrite part i where it lies (note 9): the value and its zero capacity, or the tombstone bit. */
static void group_ip_write(group_run *g, size_t i, group_ip *ip)
{
	hlog_session *s = g->s;
	const hlog_group_part *p = &g->parts[i];
	log_rec *r = ip->r;
	bool tomb = (ip->info & REC_TOMBSTONE) != 0;
	if (p->del) {
		if (!tomb)
			log_garbage_add(s, ip->a, (int64_t)rec_size(r, ip->info));
		ip->info |= REC_TOMBSTONE;
		return;
	}
	size_t vlen = group_part_vlen(p);
	uint8_t *v = rec_val(r, ip->info);
	if (p->len)
		memcpy(v, p->val, p->len);
	memset(v + p->len, 0, vlen - p->len);
	r->val_len = (uint32_t)vlen;
	if (tomb)
		log_garbage_add(s, ip->a, -(int64_t)rec_size(r, ip->info));   /* revived */
	ip->info &= ~REC_TOMBSTONE;
	log_ustat_write(s, ip->a, rec_size(r, ip->info), true, HLOG_NO_EXPIRY);
}

/* Note 9: the whole group in place: HLOG_OK with every lock dropped, or UPD_NEXT (R still
 * locked, nothing changed) for the span. */
static int group_in_place(group_run *g)
{
	hlog_session *s = g->s;
	hlog *l = s->l;
	log_upd *u = &g->u;
	group_ip ip[GROUP_INPLACE_MAX];
	size_t n;

	if (!l->group_in_place || !u->mut || !u->wr || u->st != ST_LIVE || g->nparts > GROUP_INPLACE_MAX ||
	    u->new_exp != ((u->info & REC_HAS_EXPIRY) != 0) || u->size != rec_size(u->r, u->info))
		return UPD_NEXT;
	uint64_t ro = load_acq(&l->read_only);
	if (u->a < ro)
		return UPD_NEXT;
	for (n = 0; n < g->nparts; n++)
		if (!group_ip_find(g, n, ro, &ip[n], ip))
			break;
	if (n < g->nparts) {
		while (n--)
			if (ip[n].r)
				rec_unlock_excl(ip[n].r, ip[n].info);
		return UPD_NEXT;
	}
	/* From the ReadOnly load to the last unlock: no epoch refresh (note 9). */
	log_rec *r = u->r;
	int64_t exp = u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY;
	g->op.ops->fill(g->op.ctx, u->oldp, rec_val(r, u->info), true);
	r->val_len = (uint32_t)u->vlen;
	if (u->new_exp)
		*(int64_t *)(r + 1) = u->plan.expire_ms;
	uint64_t hinfo = (u->info & ~(REC_TOMBSTONE | REC_TYPE_MASK)) | rec_type_bits(u->plan.rtype);
	log_ustat_write(s, u->a, u->size, true, exp);
	size_t changed = 0;
	for (size_t i = 0; i < g->nparts; i++)
		if (ip[i].r) {
			group_ip_write(g, i, &ip[i]);
			changed++;
		}
	if (SPW_UNLIKELY(s->redo != NULL)) {
		uint64_t seq = atomic_fetch_add(&l->redo_seq, 1 + changed);
		if (u->a >= atomic_load(&l->begin)) {
			size_t left = changed;
			log_redo(s, seq++, u->a, g->head, true, r, hinfo, exp, left > 0);
			for (size_t i = 0; i < g->nparts; i++)
				if (ip[i].r) {
					left--;
					log_redo(s, seq++, ip[i].a, &g->parts[i].key, !g->parts[i].del, ip[i].r, ip[i].info,
					         HLOG_NO_EXPIRY, left > 0);
				}
		}
	}
	for (size_t i = 0; i < g->nparts; i++)
		if (ip[i].r)
			rec_unlock_excl(ip[i].r, ip[i].info);
	rec_unlock_excl(r, hinfo);
	ctr_add(&s->inplace_updates, 1 + changed);
	ctr_add(&s->group_inplace, 1);
	return HLOG_OK;
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
		if (rc == UPD_NEXT && (rc = group_in_place(&g)) == HLOG_OK)
			return HLOG_OK;
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
