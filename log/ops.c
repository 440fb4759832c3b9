/*
 * ops.c - operations on the hybrid log: read, upsert, RMW, delete and lazy expiry, through one
 * chain walk and one update path, the key counts they keep, and FLUSHALL. Records in memory are
 * found through the hash index; a chain that goes on below HeadAddress continues in pending.c
 * (pend_cold), and an update that finds no frame waits there (pend_wait). New records get their
 * address from alloc.c (alloc_reserve); FLUSHALL's marker moves are alloc.c's (alloc_truncate).
 *
 * NOTES ON THE DESIGN OF OPERATIONS
 *
 *  1. Publishing. A new record is written with REC_SEALED (not published), then the index entry is
 *     CASed from the word the chain walk started at to the new address; on success the record's
 *     info is stored as VALID (release). On failure the record stays sealed-and-invalid forever
 *     (garbage for the page walker) and the operation restarts from the index lookup; so it does
 *     when a group holds the entry (group.c note 8: checked after the reservation, before the CAS).
 *     Deviation from "readers skip invalid records": a record reachable from the index has always
 *     won its CAS (a loser is unreachable: nothing points to it), so an invalid record met on a
 *     chain is one being published right now. Walkers wait the few instructions until it is valid.
 *     Skipping it to an older version would lose updates: an RMW would plan from the older value
 *     and its CAS, expecting the very entry that the in-flight record now holds, would succeed.
 *     Every reachable record is valid before its page passes SafeReadOnly, hence before it is
 *     written to the device.
 *
 *  2. Lookup (hlog_read, log_update): entry = hidx_entry_find(hash); walk from its address while
 *     addr >= Begin: compare key length and bytes; the first match is the newest version. Tombstone
 *     = absent; expired (has_expiry and expire_at < now, Redis's rule: a key is still there in the
 *     millisecond it expires) = absent and removed lazily (note 4). The walk compares each address
 *     with Head (one load and compare, all the in-memory fast path pays for the tier); the first
 *     address below Head is "cold": the rest of the chain is on the device (pending.c note 1).
 *     A cold walk that ends absent while Begin moved since the walk began starts again from the
 *     index: compaction moves Begin past records it copied, and the copy is newer than the entry
 *     word the walk started from (without a device Head moves with Begin, so the walk meets
 *     the cold branch there too).
 *
 *  3. Updates (log_update), by the region of the newest version R (snapshot of the markers):
 *       R >= ReadOnly        lock R exclusive (CAS on info). If R is sealed, unlock and restart. Plan
 *                            under the lock. Delete: tombstone bit in place. Write: in place when
 *                            align8 size and expiry presence are unchanged (val_len and expire_at are
 *                            rewritten); this also revives a tombstoned or expired R. Else RCU: the
 *                            new record is appended and CASed while R stays locked, then R is sealed
 *                            and unlocked, so an in-place writer cannot slip into the old version.
 *       SafeRO <= R < RO     fuzzy: some thread with an old epoch may still be writing R in place;
 *                            refresh the epoch and restart (counted in retries).
 *       Head <= R < SafeRO   immutable: no lock; plan from R, append the new version (or a
 *                            tombstone), CAS. Also when R is absent.
 *       R < Head             on the device: the fetched copy (pending.c note 1) is R, immutable
 *                            as above; the CAS expects the entry word this run started from.
 *     Readers lock mutable (>= SafeRO) records shared while they call back; records below SafeRO
 *     are read without any atomic RMW. Why this is safe: SafeRO passes R only after every thread
 *     that might have classified R as mutable has refreshed, and threads refresh only between
 *     operations or after dropping everything (restart paths).
 *     R is the newest version while we hold its exclusive lock and it is not sealed: in the mutable
 *     region every newer version is created under R's lock (RCU seals R; a tombstone is set in
 *     place; revival is in place), and nobody appends over an R that it sees as immutable until R
 *     is below SafeRO, which waits for us.
 *     Locks are never held across an epoch refresh, a wait on another record or a page-turn wait
 *     by the turn owner, so there is no cycle: a lock holder only ever waits for a turn owner, and
 *     a turn owner waits for nobody. A pending return (read or frame) holds nothing.
 *
 *  4. Counters. Per session, on the session's own cache line, written only by its thread: key and
 *     expire deltas, and stats. A key counts while its newest version is not a tombstone (expired
 *     keys count until removed, as in Redis). log_count applies (old state, new state): +1 when a
 *     key goes from absent/tombstone to live, -1 on delete; an expired old version counts one
 *     "expired" removal. A read or RMW that meets an expired version removes it (tombstone in place
 *     or appended, best effort: LOG_FULL, a frame wait or an uncached device record leave it for
 *     later), so DBSIZE drops as in Redis's lazy expiry. hlog_key_count = sum of deltas - base;
 *     hlog_flush_all sets base to the sum, which is exact when no session writes during the flush;
 *     a write that races the flush may be counted once too often or too few (a write that lands
 *     below the new Begin is not counted). The count stays exact with a device because every
 *     update, upsert included, learns the old state: a blind upsert whose chain reaches the device
 *     before the key is found reads the old record first (the one read a plain SET pays, only for
 *     keys whose index entry already exists and leads to the device).
 *
 *  5. Internal keys (hlog.h, hlog_key). The namespace of a record is its type: HLOG_T_PART for
 *     internal keys (a tombstone of one carries the type too), any other for user keys. Every key
 *     match (log_chain_find, pending.c's fetches, scan.c, expire.c) compares the namespace with the
 *     bytes (rec_key_is), so equal bytes of the two namespaces are two keys sharing one chain; a
 *     write never moves a key across (a plan that would: -EINVAL). Parts are not keys: log_count
 *     and the units' live counts leave them out, and they never carry an expiry (so a unit that
 *     holds one is never dropped unread: it is a blocker, compact.c note 7).
 */

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log/alloc_int.h"
#include "log/hlog_int.h"
#include "log/ops_int.h"
#include "log/pending_int.h"

/* Restart path of an operation that holds nothing: count it, let the epoch move, back off. */
void log_retry(hlog_session *s, unsigned *spins)
{
	ctr_add(&s->retries, 1);
	epoch_refresh(s->l->ep, s->id);
	log_spin(spins);
}

/* ---------------- read (notes 2 and 3) ---------------- */

static int log_update(hlog_session *s, const hlog_key *k, const log_op *op);

int hlog_read(hlog_session *s, const hlog_key *k, hlog_read_fn fn, void *ctx)
{
	hlog *l = s->l;
	unsigned spins = 0;
	for (;;) {
		hidx_slot slot;
		log_rec *r;
		uint64_t info, cold = 0;
		bool locked = false;
		if (hidx_entry_find(l->idx, k->hash, &slot) != 0)
			return HLOG_NOTFOUND;
		uint64_t b0 = load_acq(&l->begin);
		uint64_t a = log_chain_find(l, hidx_slot_addr(&slot), b0, k, &r, &info, &cold);
		if (!a) {
			if (SPW_LIKELY(!cold))
				return HLOG_NOTFOUND;
			/* On the device: the fetched copy is private and immutable, no lock (pending.c note 1). */
			int rc = pend_cold(s, k, cold, true, &r, &info, &a);
			if (rc == PEND_ABSENT && load_acq(&l->begin) != b0) {
				log_retry(s, &spins);   /* note 2: Begin moved under the walk */
				continue;
			}
			if (rc != PEND_FOUND)
				return rc == PEND_ABSENT ? HLOG_NOTFOUND : rc;
		} else {
			info = rec_wait_valid(r, info);
			locked = a >= load_acq(&l->safe_ro);
			if (locked) {
				/* Mutable or fuzzy: an in-place writer may be at work; read under a shared lock. */
				info = rec_lock_shared(r, false);
				if (!info) {
					log_retry(s, &spins);
					continue;
				}
			}
		}
		if (info & REC_TOMBSTONE) {
			if (locked)
				rec_unlock_shared(r);
			return HLOG_NOTFOUND;
		}
		if (rec_expired(r, info, s->now_ms)) {
			if (locked)
				rec_unlock_shared(r);
			log_op op = { .kind = OP_EXPIRE };
			log_update(s, k, &op);
			return HLOG_NOTFOUND;
		}
		hlog_value v = rec_value(r, info, a);
		fn(ctx, &v);
		if (locked)
			rec_unlock_shared(r);
		return HLOG_OK;
	}
}

void hlog_bucket_prefetch(hlog_session *s, const hlog_key *k)
{
	hidx_prefetch(s->l->idx, k->hash);
}

int hlog_prefetch(hlog_session *s, const hlog_key *k)
{
	hlog *l = s->l;
	hidx_slot slot;
	log_rec *r;
	uint64_t info, cold = 0;
	if (!l->dev || hidx_entry_find(l->idx, k->hash, &slot) != 0)
		return HLOG_OK;
	if (log_chain_find(l, hidx_slot_addr(&slot), load_acq(&l->begin), k, &r, &info, &cold) || !cold)
		return HLOG_OK;
	int rc = pend_cold(s, k, cold, true, &r, &info, NULL);
	return rc == PEND_FOUND || rc == PEND_ABSENT ? HLOG_OK : rc;
}

/* ---------------- updates (note 3) ---------------- */

/* Apply a key's transition, a change written at addr, to the session's counters (note 4). A
 * change at or above the running checkpoint's cut also goes to keys_post/expires_post of the
 * cut's generation, first (ckpt.c note 4: the checkpoint's count leaves those out). */
static void log_count(hlog_session *s, uint64_t addr, int st, uint64_t old_info, int action,
		bool new_exp)
{
	int old_counted = st == ST_LIVE || st == ST_EXPIRED;
	int old_exp = old_counted && (old_info & REC_HAS_EXPIRY);
	int new_counted = action == HLOG_RMW_WRITE;
	int nexp = new_counted && new_exp;
	int dk = new_counted - old_counted, de = nexp - old_exp;
	if (dk || de) {
		/* A seqlock, so that the checkpoint reads keys and keys_post of one change together. */
		uint32_t q = atomic_load_explicit(&s->cnt_seq, memory_order_relaxed);
		atomic_store_explicit(&s->cnt_seq, q + 1, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
		uint64_t w = load_acq(&s->l->cut_word);
		if (addr >= (w & REC_PREV_MASK)) {
			int g = (int)((w >> 48) & 1);
			ctr_add_signed(&s->keys_post[g], dk);
			ctr_add_signed(&s->expires_post[g], de);
		}
		ctr_add_signed(&s->keys, dk);
		ctr_add_signed(&s->expires, de);
		atomic_store_explicit(&s->cnt_seq, q + 2, memory_order_release);
	}
	if (st == ST_EXPIRED)
		ctr_add(&s->expired_keys, 1);
}

void log_count_dropped(hlog_session *s, int64_t n)
{
	/* Every key of a dropped unit had an expiry, and every change there lies below any cut taken
	 * since (the caller holds ckpt_mu: no cut is between its count and its write-out). */
	uint32_t q = atomic_load_explicit(&s->cnt_seq, memory_order_relaxed);
	atomic_store_explicit(&s->cnt_seq, q + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	ctr_add_signed(&s->keys, -n);
	ctr_add_signed(&s->expires, -n);
	atomic_store_explicit(&s->cnt_seq, q + 2, memory_order_release);
	ctr_add(&s->expired_keys, (uint64_t)n);
}

static void log_fill(const log_op *op, const hlog_value *old, uint8_t *dst, bool in_place)
{
	if (op->kind == OP_UPSERT)
		memcpy(dst, op->val, op->len);
	else if (op->kind == OP_RELOCATE)
		memcpy(dst, old->ptr, old->len);
	else
		op->ops->fill(op->ctx, old, dst, in_place);
}

/* The redo hook (hlog.h, "durability"): the change just made to k, at addr, with its seq. For an
 * in-place change the caller holds the record's exclusive lock; for a new record it is published
 * (the CAS won) but not yet valid, so nobody else can change it while fn copies it (note 1). */
void log_redo(hlog_session *s, uint64_t seq, uint64_t addr, const hlog_key *k, bool wr,
		const log_rec *r, uint64_t info, int64_t expire_ms, bool group_more)
{
	hlog_redo rd = {
		.seq = seq, .addr = addr, .kind = wr ? HLOG_REDO_SET : HLOG_REDO_DEL,
		.key = k->ptr, .klen = k->len,
		.val = wr ? rec_val(r, info) : NULL, .vlen = wr ? r->val_len : 0,
		.expire_ms = wr ? expire_ms : HLOG_NO_EXPIRY,
		/* A delete of a part says so: the replay needs the key's namespace. */
		.rtype = wr ? rec_type(info) : k->internal ? HLOG_T_PART : HLOG_T_STRING,
		.group_more = group_more,
	};
	s->redo(s->redo_arg, &rd);
}

/* An in-place change's redo record: its seq, then Begin (both sequentially consistent); a record
 * below Begin was flushed away by a FLUSHALL that took its seq after moving Begin, and its change
 * is lost in the store too, so it is not logged (hlog_flush_all). */
static void log_redo_visible(hlog_session *s, uint64_t addr, const hlog_key *k, bool wr,
		const log_rec *r, uint64_t info, int64_t expire_ms)
{
	uint64_t seq = log_redo_seq(s);
	if (addr >= atomic_load(&s->l->begin))
		log_redo(s, seq, addr, k, wr, r, info, expire_ms, false);
}

/* Find the newest version R of k (note 3): in memory, or the fetched copy from the device. A
 * mutable R comes back locked exclusive (u->mut). UPD_NEXT; UPD_RESTART (fuzzy band, or R sealed:
 * nothing held); or what the operation returns (HLOG_NOTFOUND: no entry and nothing to write,
 * HLOG_PENDING, a device read's error). */
int log_update_find(hlog_session *s, const hlog_key *k, const log_op *op, log_upd *u)
{
	hlog *l = s->l;
	bool writes = op->kind == OP_RMW || op->kind == OP_UPSERT;
	bool lazy = op->kind == OP_EXPIRE;
	uint64_t cold = 0;
	bool fetched = false;

	u->r = NULL;
	u->key = k;
	u->info = 0;
	u->a = 0;
	u->found = 0;
	u->mut = false;
	u->have_slot = hidx_entry_find(l->idx, k->hash, &u->slot) == 0;
	if (!u->have_slot && !writes)
		return HLOG_NOTFOUND;
	uint64_t b0 = load_acq(&l->begin);
	if (u->have_slot)
		u->a = log_chain_find(l, hidx_slot_addr(&u->slot), b0, k, &u->r, &u->info, &cold);
	if (!u->a && cold && op->src_rec && cold == op->src) {
		/* Compaction read this very record: it is the fetched copy (compact.c note 2). */
		u->r = (log_rec *)op->src_rec;
		u->info = atomic_load_explicit(&u->r->info, memory_order_relaxed) & ~(REC_LOCK_X | REC_LOCK_S_MASK);
		u->a = u->found = cold;
		fetched = true;
	} else if (!u->a && cold) {
		/* The newest version is on the device: plan from the fetched copy (note 3). */
		uint64_t at = cold;
		int rc = pend_cold(s, k, cold, !lazy, &u->r, &u->info, &at);
		if (rc == PEND_FOUND) {
			u->a = cold;
			u->found = at;
			fetched = true;
		} else if (rc != PEND_ABSENT) {
			return lazy ? HLOG_NOTFOUND : rc;
		} else if (load_acq(&l->begin) != b0) {
			return UPD_RESTART;   /* note 2: Begin moved under the walk */
		}
	}
	if (u->a && !fetched) {
		u->found = u->a;
		u->info = rec_wait_valid(u->r, u->info);
		u->mut = u->a >= load_acq(&l->read_only);
		if (!u->mut && u->a >= load_acq(&l->safe_ro))
			return UPD_RESTART;   /* fuzzy band */
		if (u->mut && !(u->info = rec_lock_excl(u->r)))
			return UPD_RESTART;   /* sealed: a newer version is published */
	}
	return UPD_NEXT;
}

/* A live part's value for compaction's liveness check (compact.c note 8): copied out, since R may
 * be a frame or a fetched copy that the check's own reads must not be able to take away. */
static int log_relocate_ask(log_part_val *ask, const hlog_value *v)
{
	if (v->len > ask->cap) {
		uint8_t *nb = realloc(ask->buf, v->len);
		if (!nb)
			return -ENOMEM;
		ask->buf = nb;
		ask->cap = (uint32_t)v->len;
	}
	if (v->len)
		memcpy(ask->buf, v->ptr, v->len);
	ask->len = (uint32_t)v->len;
	return LOG_RELOCATE_ASK;
}

/* Compaction's conditional copy (compact.c note 2): only when the newest version of the key is
 * still the record compaction read (op->src), immutable; a live one is copied to the tail as it is
 * (or, evicting, deleted: never a part, note 8 there), an expired one removed; a live part whose
 * liveness compaction asks about (op->ask) is handed out unchanged. Anything else (a newer
 * version, a tombstone) leaves nothing to do: HLOG_NOTFOUND. */
static void log_relocate_plan(const log_op *op, log_upd *u)
{
	u->result = HLOG_NOTFOUND;
	if (!u->a || u->found != op->src || u->mut)
		return;
	if (u->st == ST_EXPIRED) {
		u->plan.action = HLOG_RMW_DELETE;
		u->result = HLOG_OK;
	} else if (u->st == ST_LIVE) {
		bool part = u->old.rtype == HLOG_T_PART;
		if (part && op->ask) {
			u->result = log_relocate_ask(op->ask, &u->old);
			return;
		}
		bool evict = !part && (op->how == LOG_RELOCATE_EVICT_ALL ||
		             (op->how == LOG_RELOCATE_EVICT_VOLATILE && u->old.expire_ms != HLOG_NO_EXPIRY));
		u->plan.action = evict ? HLOG_RMW_DELETE : HLOG_RMW_WRITE;
		u->plan.new_len = u->old.len;
		u->plan.expire_ms = u->old.expire_ms;
		u->plan.rtype = u->old.rtype;
		u->result = HLOG_OK;
	}
}

/* Classify R and decide what to write: u->st, u->old, u->plan, u->result and the new version's
 * size. UPD_NEXT when there is something to write; else what the operation returns (a plan's error,
 * SPW_E_TOO_BIG, or u->result when nothing changes), with R still locked: the caller unlocks. */
int log_update_plan(hlog_session *s, const hlog_key *k, const log_op *op, log_upd *u)
{
	hlog *l = s->l;
	log_rec *r = u->r;
	uint64_t info = u->info;
	int rc;

	u->st = !u->a ? ST_ABSENT : (info & REC_TOMBSTONE) ? ST_TOMB
		: rec_expired(r, info, s->now_ms) ? ST_EXPIRED : ST_LIVE;
	u->old = (hlog_value){ NULL, 0, HLOG_NO_EXPIRY, k->internal ? HLOG_T_PART : HLOG_T_STRING, 0 };
	if (u->st == ST_LIVE)
		u->old = rec_value(r, info, u->found);
	u->oldp = u->st == ST_LIVE ? &u->old : NULL;

	u->plan = (hlog_rmw_plan){ HLOG_RMW_KEEP, 0, HLOG_NO_EXPIRY, u->old.rtype };
	u->result = HLOG_OK;
	switch (op->kind) {
	case OP_RMW:
		rc = op->ops->plan(op->ctx, u->oldp, &u->plan);
		if (rc < 0)
			return rc;
		break;
	case OP_UPSERT:
		u->plan.action = HLOG_RMW_WRITE;
		u->plan.new_len = op->len;
		u->plan.expire_ms = op->expire_ms;
		u->plan.rtype = op->rtype;
		break;
	case OP_DELETE:
		u->plan.action = HLOG_RMW_DELETE;
		u->result = u->st == ST_LIVE ? HLOG_OK : HLOG_NOTFOUND;
		break;
	case OP_RELOCATE:
		log_relocate_plan(op, u);
		break;
	default: /* OP_EXPIRE */
		u->result = HLOG_NOTFOUND;
		break;
	}
	if (u->plan.action == HLOG_RMW_KEEP && u->st == ST_EXPIRED)
		u->plan.action = HLOG_RMW_DELETE;      /* lazy expiry: whoever sees it removes it */
	if (u->plan.action == HLOG_RMW_DELETE && (u->st == ST_ABSENT || u->st == ST_TOMB))
		u->plan.action = HLOG_RMW_KEEP;
	if (u->plan.action == HLOG_RMW_KEEP)
		return u->result;

	u->wr = u->plan.action == HLOG_RMW_WRITE;
	/* Note 5: a value stays in its key's namespace, and an internal one has no expiry. */
	if (u->wr && ((u->plan.rtype == HLOG_T_PART) != k->internal || u->plan.rtype > HLOG_T_PART ||
	              (k->internal && u->plan.expire_ms != HLOG_NO_EXPIRY)))
		return -EINVAL;
	u->new_exp = u->wr && u->plan.expire_ms != HLOG_NO_EXPIRY;
	u->vlen = u->wr ? u->plan.new_len : 0;
	u->size = rec_size_of(k->len, u->vlen, u->new_exp);
	if (u->size > l->max_rec || (u->wr && u->plan.new_len > l->max_rec))
		return SPW_E_TOO_BIG;
	return UPD_NEXT;
}

/* R is mutable and locked: a delete sets its tombstone bit, a write of the same size and expiry
 * presence rewrites it in place. u->result with R unlocked, or UPD_NEXT (R still locked): the new
 * version goes to the tail. */
static int log_update_in_place(hlog_session *s, const log_op *op, log_upd *u)
{
	log_rec *r = u->r;
	uint64_t info = u->info;

	if (!u->wr) {
		info |= REC_TOMBSTONE;
		log_garbage_add(s, u->a, rec_size(r, info));
		if (!u->key->internal) {
			log_ustat_live(s, u->a, -1);   /* R was counted (live or expired): it is not any more */
			log_count(s, u->a, u->st, info, u->plan.action, false);
		}
		ctr_add(&s->inplace_updates, 1);
		if (SPW_UNLIKELY(s->redo != NULL))
			log_redo_visible(s, u->a, u->key, false, r, info, HLOG_NO_EXPIRY);
		rec_unlock_excl(r, info);
		return u->result;
	}
	bool cur_exp = (info & REC_HAS_EXPIRY) != 0;
	if (u->new_exp == cur_exp && u->size == rec_size(r, info)) {
		/* In place. A tombstoned or expired R is revived: fill writes it whole. */
		log_fill(op, u->oldp, rec_val(r, info), u->st == ST_LIVE);
		if (u->st == ST_TOMB) {
			log_garbage_add(s, u->a, -(int64_t)u->size);
			if (!u->key->internal)
				log_ustat_live(s, u->a, 1);   /* revived: the key's newest version is R again */
		}
		/* Every value written in place is accounted (compact.c note 7): a new expiry raises the
		 * unit's latest expiry, and a value without one (also one that revives a tombstone,
		 * which counted as neither) keeps the unit from being dropped unread. */
		log_ustat_write(s, u->a, u->size, true, u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY);
		if (!u->key->internal)
			log_count(s, u->a, u->st, info, u->plan.action, u->new_exp);
		r->val_len = (uint32_t)u->vlen;
		if (u->new_exp)
			*(int64_t *)(r + 1) = u->plan.expire_ms;
		info = (info & ~(REC_TOMBSTONE | REC_TYPE_MASK)) | rec_type_bits(u->plan.rtype);
		ctr_add(&s->inplace_updates, 1);
		if (SPW_UNLIKELY(s->redo != NULL))
			log_redo_visible(s, u->a, u->key, true, r, info,
			                 u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY);
		rec_unlock_excl(r, info);
		return u->result;
	}
	return UPD_NEXT;
}

/* What a published new version made garbage (compact.c note 3): R, when it was a live or expired
 * value (a tombstone was counted when it was written), and the new version itself when it is a
 * tombstone; and the counters of the kind of change. */
static void log_update_garbage(hlog_session *s, const log_op *op, const log_upd *u, uint64_t na)
{
	if (u->found && (u->st == ST_LIVE || u->st == ST_EXPIRED))
		log_garbage_add(s, u->found, (int64_t)rec_size(u->r, u->info));
	if (!u->wr)
		log_garbage_add(s, na, (int64_t)u->size);
	if (op->kind == OP_RELOCATE) {
		if (u->wr) {
			ctr_add(&s->compact_copied, 1);
			ctr_add(&s->compact_copied_bytes, u->size);
		} else if (u->st == ST_LIVE) {
			ctr_add(&s->evicted_keys, 1);
		}
		return;
	}
	ctr_add(u->a ? &s->rcu_updates : &s->appends, 1);
}

/* A new version at the tail: RCU from R, a tombstone, or the first version of the key (notes 1 and
 * 3). What the operation returns, with R unlocked (sealed once the new version is valid), or
 * UPD_RESTART: nothing was published and R is unlocked. */
static int log_update_append(hlog_session *s, const hlog_key *k, const log_op *op, log_upd *u)
{
	hlog *l = s->l;
	bool lazy = op->kind == OP_EXPIRE;
	int rc;

	if (!u->have_slot) {
		if ((rc = hidx_entry_find_or_create(l->idx, k->hash, &u->slot)) < 0)
			return rc;
		if (hidx_slot_addr(&u->slot) != 0)
			return UPD_RESTART;   /* someone published into the entry meanwhile: replan */
		u->have_slot = true;
	}
	if (log_group_holds(l, k->hash)) {
		/* Not now (group.c note 8), and no record left behind: this look is only cheaper. */
		ctr_add(&s->group_entry_waits, 1);
		if (u->mut)
			rec_unlock_excl(u->r, u->info);
		return UPD_RESTART;
	}
	uint64_t need = 0;
	int64_t na = alloc_reserve(s, u->size, &need);
	if (na < 0) {
		if (u->mut)
			rec_unlock_excl(u->r, u->info);
		if (na == LOG_E_RETRY)
			return UPD_RESTART;
		if (na == LOG_E_WAIT) {
			if (lazy)
				return u->result;
			/* No frame until a page write finishes (pending.c note 2): nothing was changed. */
			rc = pend_wait(s, need);
			return rc == 0 ? UPD_RESTART : rc;
		}
		if (na == SPW_E_LOG_FULL)
			ctr_add(&s->log_full_errors, 1);
		return lazy ? u->result : (int)na;
	}
	log_rec *n = hlog_rec_at(l, (uint64_t)na);
	uint64_t ninfo = hidx_slot_addr(&u->slot) | (u->new_exp ? REC_HAS_EXPIRY : 0) |
	                 (u->wr ? rec_type_bits(u->plan.rtype) : REC_TOMBSTONE) |
	                 (!u->wr && k->internal ? rec_type_bits(HLOG_T_PART) : 0);   /* note 5 */
	/* Sealed, not valid: unpublished (the frame is zero, so the info word is the first write). */
	atomic_store_explicit(&n->info, ninfo | REC_SEALED, memory_order_relaxed);
	n->key_len = (uint32_t)k->len;
	n->val_len = (uint32_t)u->vlen;
	if (u->new_exp)
		*(int64_t *)(n + 1) = u->plan.expire_ms;
	memcpy(rec_key(n, ninfo), k->ptr, k->len);
	if (u->wr)
		log_fill(op, u->oldp, rec_val(n, ninfo), false);
	log_ustat_write(s, (uint64_t)na, u->size, u->wr, u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY);
	uint64_t seq = log_redo_seq(s);
	/* Not into an entry a group holds: our record may lie above its span (group.c note 8). This
	 * look, after the reservation, is the one that counts. */
	if (log_group_holds(l, k->hash)) {
		ctr_add(&s->group_entry_waits, 1);
		if (u->mut)
			rec_unlock_excl(u->r, u->info);
		return UPD_RESTART;   /* the record stays sealed and invalid: garbage, as a lost CAS's */
	}
	/* The CAS publishes the record's bytes (release) to whoever reads the entry. */
	if (!hidx_slot_cas(&u->slot, (uint64_t)na)) {
		if (u->mut)
			rec_unlock_excl(u->r, u->info);
		return UPD_RESTART;   /* the record stays sealed and invalid: garbage */
	}
	/* seq first, then Begin (both sequentially consistent): see hlog_flush_all. */
	if (SPW_UNLIKELY(s->redo != NULL) && (uint64_t)na >= atomic_load(&l->begin))
		log_redo(s, seq, (uint64_t)na, k, u->wr, n, ninfo, u->new_exp ? u->plan.expire_ms : HLOG_NO_EXPIRY,
		         false);
	atomic_store_explicit(&n->info, ninfo | REC_VALID, memory_order_release);
	/* Seal the source only after the new version is valid, so that whoever locks it next and
	 * sees the seal finds the new version by restarting. */
	if (u->mut)
		rec_unlock_excl(u->r, u->info | REC_SEALED);
	log_update_published(s, k, op, u, (uint64_t)na);
	return u->result;
}

void log_update_published(hlog_session *s, const hlog_key *k, const log_op *op, const log_upd *u, uint64_t na)
{
	/* A flush that overtook us made the new version invisible: it must not be counted. */
	if (na >= load_acq(&s->l->begin) && !k->internal) {   /* note 5: parts are no keys */
		log_count(s, na, u->st, u->info, u->plan.action, u->new_exp);
		/* The same transition by unit (compact.c note 7): R's unit loses the key, na's gains it. */
		if (u->found && (u->st == ST_LIVE || u->st == ST_EXPIRED))
			log_ustat_live(s, u->found, -1);
		if (u->wr)
			log_ustat_live(s, na, 1);
	}
	log_update_garbage(s, op, u, na);
}

/*
 * The one update path behind upsert, RMW, delete and lazy expiry (note 3), in four steps: find R,
 * plan, in place (mutable R), append. A step that must restart holds nothing: the loop refreshes
 * the epoch and starts again from the index. Returns HLOG_OK, HLOG_NOTFOUND (delete of an absent
 * key), HLOG_PENDING (a device read or a frame wait, pending.c notes 1 and 2), a plan's error,
 * SPW_E_TOO_BIG, SPW_E_LOG_FULL, SPW_E_STORE_ERROR, a device read's error or -ENOMEM (index full).
 * Lazy expiry (OP_EXPIRE) is best effort: it never waits or reads.
 */
static int log_update(hlog_session *s, const hlog_key *k, const log_op *op)
{
	hlog *l = s->l;
	unsigned spins = 0;
	bool writes = op->kind == OP_RMW || op->kind == OP_UPSERT;
	bool lazy = op->kind == OP_EXPIRE;

	if (SPW_UNLIKELY(atomic_load_explicit(&l->error, memory_order_relaxed) != 0))
		return lazy ? HLOG_NOTFOUND : SPW_E_STORE_ERROR;   /* alloc.c note 10 */
	if (k->len > l->max_rec)
		return writes ? SPW_E_TOO_BIG : HLOG_NOTFOUND;

	for (;;) {
		log_upd u;
		int rc = log_update_find(s, k, op, &u);
		if (rc == UPD_NEXT) {
			rc = log_update_plan(s, k, op, &u);
			if (rc != UPD_NEXT) {
				if (u.mut)
					rec_unlock_excl(u.r, u.info);
				return rc;
			}
			if (u.mut)
				rc = log_update_in_place(s, op, &u);
			if (rc == UPD_NEXT)
				rc = log_update_append(s, k, op, &u);
		}
		if (rc != UPD_RESTART)
			return rc;
		log_retry(s, &spins);
	}
}

int hlog_upsert(hlog_session *s, const hlog_key *k, const void *val, size_t len, int64_t expire_ms)
{
	return hlog_upsert_typed(s, k, val, len, expire_ms, HLOG_T_STRING);
}

int hlog_upsert_typed(hlog_session *s, const hlog_key *k, const void *val, size_t len, int64_t expire_ms,
                      uint8_t rtype)
{
	log_op op = { .kind = OP_UPSERT, .val = val, .len = len, .expire_ms = expire_ms, .rtype = rtype };
	return log_update(s, k, &op);
}

int hlog_delete(hlog_session *s, const hlog_key *k)
{
	log_op op = { .kind = OP_DELETE };
	return log_update(s, k, &op);
}

int hlog_rmw(hlog_session *s, const hlog_key *k, const hlog_rmw_ops *ops, void *ctx)
{
	log_op op = { .kind = OP_RMW, .ops = ops, .ctx = ctx };
	return log_update(s, k, &op);
}

int log_relocate(hlog_session *s, const hlog_key *k, uint64_t src, int how, const log_rec *rec,
                 log_part_val *ask)
{
	log_op op = { .kind = OP_RELOCATE, .how = how, .src = src, .src_rec = rec, .ask = ask };
	return log_update(s, k, &op);
}

/* ---------------- key counts and FLUSHALL (note 4) ---------------- */

static int64_t log_sum_keys(hlog *l)
{
	int64_t sum = 0;
	for (int i = 0; i < l->max_sessions; i++)
		sum += atomic_load_explicit(&l->sessions[i].keys, memory_order_relaxed);
	return sum;
}

static int64_t log_sum_expires(hlog *l)
{
	int64_t sum = 0;
	for (int i = 0; i < l->max_sessions; i++)
		sum += atomic_load_explicit(&l->sessions[i].expires, memory_order_relaxed);
	return sum;
}

uint64_t hlog_key_count(hlog *l)
{
	int64_t n = log_sum_keys(l) - atomic_load(&l->keys_base);
	return n < 0 ? 0 : (uint64_t)n;
}

uint64_t hlog_expires_count(hlog *l)
{
	int64_t n = log_sum_expires(l) - atomic_load(&l->expires_base);
	return n < 0 ? 0 : (uint64_t)n;
}

/* FLUSHALL waits for a checkpoint between its cut and its write-out (ckpt.c note 3): pages below
 * the new Begin would never be written, and the checkpoint needs them. It waits refreshing its
 * epoch (it holds no record): the checkpoint it waits for waits for every session's epoch. */
int hlog_flush_all(hlog_session *s)
{
	hlog *l = s->l;
	unsigned spins = 0;
	while (pthread_mutex_trylock(&l->ckpt_mu) != 0) {
		alloc_wait_step(s);
		if (++spins < 64)
			log_cpu_relax();
		else
			usleep(200);   /* a write-out may take seconds: do not burn the core meanwhile */
	}
	uint64_t head = alloc_truncate(s);
	/* The flushed records' keys stay in the figures of Begin's unit: it is never dropped unread. */
	log_ustats_forget(l, load_acq(&l->begin));
	/* The seq after Begin moved: a change racing the flush either checked Begin before it moved
	 * (and got a lower seq) or finds its record below Begin and logs nothing (log_redo). */
	uint64_t seq = log_redo_seq(s);
	atomic_store(&l->keys_base, log_sum_keys(l));
	atomic_store(&l->expires_base, log_sum_expires(l));
	if (s->redo) {
		hlog_redo rd = { .seq = seq, .addr = load_acq(&l->begin), .kind = HLOG_REDO_FLUSHALL,
		                 .expire_ms = HLOG_NO_EXPIRY };
		s->redo(s->redo_arg, &rd);
	}
	pthread_mutex_unlock(&l->ckpt_mu);
	alloc_truncate_release(s, head);
	return HLOG_OK;
}
