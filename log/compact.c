/*
 * compact.c - compaction: the state machine of one pass over the oldest part of the log (choose
 * how far, scan, relocate the live records, move Begin, give the device space back), and the
 * garbage statistics it chooses by. The conditional copy itself is an update of ops.c
 * (log_relocate); Begin's move is alloc.c's (alloc_begin_raise).
 *
 * NOTES ON THE DESIGN OF COMPACTION (FASTER's log compaction by conditional copy to the tail)
 *
 *  1. Only a prefix goes. A record is reached from the index through a chain of older records
 *     (tag collisions share chains), so a segment in the middle of the log cannot go while an
 *     older segment stays: a chain walk that crossed it would lose the records below. What goes is
 *     always [Begin, until): every walk stops at Begin. The choice is therefore how far the prefix
 *     reaches, by garbage (note 3): the prefix of whole units with the highest garbage share, not
 *     below a minimum share, so that a mostly-live prefix is not rewritten again and again.
 *
 *  2. A pass. The records of [Begin, until) are read in address order (from the device a page at
 *     a time, with a device; from the frames without one, where until stays below SafeReadOnly).
 *     For each valid, unsealed value record at src, log_relocate(key, src) runs the update path:
 *     if the newest version of the key is still src, it is copied to the tail (a CAS on the index
 *     entry the lookup started from, so a write that came in meanwhile wins and the copy is
 *     dropped), or removed when it has expired (a tombstone, counted as an expiry) or when the
 *     pass evicts (cache mode; never a part: note 8). The copy is the record's own bytes: with a
 *     device the lookup takes the page compaction read as the fetched record when the chain goes
 *     cold right at src, so a live record is read once. A relocation that must wait (a newer
 *     record on the device to read first, no frame, a part's liveness check: note 8) is parked
 *     and run again once its read is done; at most CMP_PARK are parked.
 *     Tombstones and superseded records are simply not copied: every older version of their key
 *     lies below them, so in the prefix too.
 *
 *  3. Garbage. Each unit (a device segment; a page without a device) counts the bytes that became
 *     garbage in it: a live or expired version superseded or deleted (ops.c, when the new version
 *     is published), a tombstone when written. A ring of LOG_GARBAGE_SLOTS counters per session, so
 *     that a write pays a plain add on a line of its own thread; Begin's move
 *     zeroes the units below it. Statistics only: nothing depends on them being exact (an
 *     in-place update makes no garbage; a failed CAS's record is not counted).
 *
 *  4. Begin moves to the first record not handled: until (or past a record that spans it), or
 *     the first record whose relocation failed (log memory full, a device error), so that nothing
 *     live is ever left below Begin. The move holds ckpt_mu, as FLUSHALL does (alloc.c note 9):
 *     without a device it releases frames a checkpoint's write-out reads. Relocations hold it
 *     too, a page's worth at a time: a copy that raced a FLUSHALL could otherwise bring back a key
 *     the flush removed. The lock is taken only while the session is unprotected (a checkpoint
 *     holds it while it waits for every session's epoch).
 *
 *  5. The device space below Begin goes (hlog_reclaim) once no checkpoint on disk needs it:
 *     ckpt_hold is the lowest Begin of the checkpoints kept (ckpt.c retire, recover.c) or of one
 *     running (lowered at its cut). Segments below min(Begin, hold) are removed once no request
 *     can touch them (log_io_quiesce): one epoch, so that every operation that saw the old Begin
 *     has finished, then every request the sessions' device queues had accepted has completed
 *     (a localmemory segment is unmapped, a file's descriptor closed: a request in flight there
 *     would read freed memory or another file), twice over for a chain read that a completion
 *     queued meanwhile. Reads queued later see the new Begin first (pending.c finishes a fetch
 *     whose record Begin passed as absent; the segment table refuses IO below its begin).
 *
 *  6. The IO budget (io_limit bytes per second): bytes read (pages, and the newer records some
 *     relocations read first) and bytes copied are charged; the scan reads CMP_IO_BYTES at a time,
 *     one request in flight, so that foreground reads never queue behind a page; a pass
 *     ahead of its budget sleeps, unprotected and without ckpt_mu, so foreground reads keep the
 *     device.
 *
 *  7. Units of expired records go unread. Each session keeps, per unit and beside its garbage
 *     ring (compact_stats.c, hlog_int.h log_ustat), the latest expiry of the value records written
 *     into the unit, the count of "blockers" (value records without an expiry, and a record that
 *     runs on into the next unit, whose end is then not a record boundary), and "live", the keys
 *     whose newest version is a value record there: +1 when one is published as the newest, -1
 *     on the unit of the counted version it supersedes or deletes (the very transitions log_count
 *     applies to the key count, so live summed over the units is the key count's share from
 *     them). Every value written in place is accounted as one written there (a new expiry raises
 *     the latest expiry; none, as when a short value revives a tombstone in place, is a blocker).
 *     A pass first
 *     takes the leading units of [Begin, until) that are wholly on the device (below the flushed
 *     part and Head), that hold only records this process counted (at or above stats_from: not a
 *     recovered log, not a FLUSHALL's tail unit), with no blocker and a latest expiry more than
 *     LOG_EXPIRED_MARGIN_MS in the past (the operations' clocks are set per batch); under
 *     ckpt_mu it moves Begin past them, waits one epoch, reads their live counts and takes them
 *     from the key and expire counts as expiries (log_count_dropped), then reads the rest as in
 *     note 2. Why the counts stay exact:
 *     - Nothing decrements a dropped unit's live count after it is read: a decrement comes from an
 *       operation that found a version in the unit as the newest of its key, so one that walked
 *       the chain with the old Begin; every such operation had finished by the epoch, and any
 *       later one stops at the new Begin (addresses below Begin are absent to every chain walk,
 *       fetch and index entry; hidx_clear_below only gives the slots back). That includes a
 *       fetch that found the record before the move for an operation re-run after it: pend_cold
 *       answers absent for a cached record below Begin (a pass that reads copies or deletes
 *       every counted record before it passes it, so there the re-run meets the newer version;
 *       a drop leaves none).
 *     - No key is counted twice: an operation that found the version live or expired before the
 *       move and replaced it (a write, a delete, lazy expiry) applied its key count change and the
 *       unit's -1 together, before the epoch, so the key is not in the live count the drop takes
 *       away; an operation that finds the key absent after the move counts it as a new key, the
 *       drop having taken the old one away.
 *     - The checkpoints: the move, the count and the subtraction are one section under ckpt_mu,
 *       so a cut (with its count) comes wholly before it (its Begin and count still hold the
 *       units: ckpt_hold keeps their segments) or wholly after.
 *     - The rings alias units LOG_GARBAGE_SLOTS apart: a slot holds its unit's number and is
 *       started over only by its owner, for a newer unit; a unit whose slot a newer unit holds in
 *       some session is never dropped, and none can take it while the pass runs, the tail being
 *       less than half a ring past the first unit dropped when the pass decides: another half a
 *       ring (4096 units) would have to be written within the one epoch the pass waits. The
 *       count checks the tags again; were one lost, the pass takes what the sessions still hold
 *       and says so in its why (the count is then off; it returns 0: nothing live was lost).
 *     Statistics stay statistics for the choice (note 3); these figures decide what goes unread,
 *     so every figure errs towards "read it": a record whose CAS fails still counts its expiry.
 *     The segments go by hlog_reclaim as any others (note 5).
 *
 *  8. Parts. A part (a record of type HLOG_T_PART: a bucket or a registry of a large collection,
 *     docs/ARCHITECTURE.md "Collections") is reached only through its collection's head, which the
 *     store knows nothing of, and it outlives its collection (a DEL of a large hash deletes the
 *     head only), so its key's newest version may be garbage. Whether it still is reachable is the
 *     server's to say (hlog_config.part_live); without the check every part is live.
 *     - The check runs outside the update path. A relocation of a part asks log_relocate with ask:
 *       the update path finds the newest version as for any record and, when that is still src
 *       and a live part, hands its value out instead of writing (LOG_RELOCATE_ASK: nothing
 *       changed, nothing held). The value is copied into the park slot: the record may be a frame
 *       that an epoch refresh inside the check's reads lets go, or a fetched copy. Store callbacks
 *       must not call into the store; this check reads, so it is called from here, between two
 *       runs of the update path, protected and under ckpt_mu as every relocation.
 *     - Its reads are the relocation's reads: the check gets compaction's session with the op_ctx
 *       set to the park slot, so a read it makes that goes to the device queues under that slot,
 *       and HLOG_PENDING parks the slot as "asking" (key and value kept in it). cmp_drain polls
 *       the session and runs every parked slot again; an asking one runs the check again, whose
 *       reads the fetch cache now serves (each read in flight is asked for once: a re-run while
 *       it is still out waits for the same fetch), and hlog_session_release drops them once the
 *       relocation is done. A check that needs two reads one after the other (the registry, then
 *       the owner's head) parks twice. With a device the slot keeps the part's record as the scan
 *       read it, so the copy after a live verdict does not read it again (as note 2's first run).
 *     - Live (1, or an error: the check errs towards keeping data): log_relocate again without
 *       ask, the ordinary conditional copy, in which a write that came meanwhile wins. Dead (0):
 *       not copied, counted (compact_parts_dropped, hlog_compact_info.parts_dropped); Begin's move
 *       takes it away as it takes superseded records. No tombstone: parts are not in the key count
 *       (hlog.h, internal keys), and nothing reaches a dead part's key again (a collection id is
 *       new each time a collection becomes large and never changes owner, so a dead one stays
 *       dead). A verdict that comes after a park may be about a version superseded meanwhile:
 *       not copying it is what the pass does with superseded versions anyway.
 *     - Cache mode never evicts a part (ops.c log_relocate_plan): an evicting pass checks and
 *       copies parts as a copying one does. Evicting one bucket of a live collection would lose
 *       members its head still counts; a collection leaves the cache whole, by its head's
 *       eviction, after which its parts are dead and later passes drop them.
 *     - Note 7's drop never takes a unit holding a part unread: a part has no expiry, so its write
 *       counts as a blocker of its unit (log_ustat_write: a value record without an expiry),
 *       whether or not its key is in the unit's live count; so its liveness is always checked.
 */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "log/alloc_int.h"
#include "log/ckpt_int.h"
#include "log/hlog_int.h"

#define CMP_PARK 64                  /* relocations waiting for a device read at once */
#define CMP_IO_BYTES (128u << 10)    /* one read of the scan (note 6) */

/* A part's relocation (note 8): not asked yet, its check waiting for a read, or found live. */
enum { CMP_P_NEW = 0, CMP_P_ASKING, CMP_P_LIVE };

typedef struct cmp_park {
	bool used;
	uint8_t rtype;                   /* the record's HLOG_T_* */
	uint8_t pstate;                  /* CMP_P_* (parts only) */
	uint64_t src;
	uint8_t *key;
	uint32_t klen, kcap;
	log_part_val val;                /* a part's value, as the check sees it (note 8) */
	uint8_t *rbuf;                   /* with a device, a part parked by its check: its record as */
	uint64_t rcap;                   /* the scan read it, so that the copy reads it no more (note 8) */
	bool has_rec;
} cmp_park;

typedef struct cmp_run {
	hlog *l;
	hlog_session *s;
	const hlog_compact_opts *o;
	hlog_compact_info *out;
	int how;                         /* LOG_RELOCATE_* */
	dev_queue *q;                    /* page reads (with a device) */
	uint8_t *page;                   /* the page read from the device */
	uint64_t page_no;                /* which one, or UINT64_MAX */
	uint8_t *big;                    /* a spanning record, read whole */
	uint64_t big_cap;
	cmp_park park[CMP_PARK];
	int nparked;
	uint64_t floor;                  /* the lowest src whose relocation failed (UINT64_MAX: none) */
	int err;                         /* the first failure */
	uint64_t t0_ns;
	uint64_t copied0;                /* the session's copied bytes at the start (the IO budget) */
	uint64_t n0[3];                  /* the session's copied, evicted and expired counts at the start */
	uint64_t dread0;                 /* its device read bytes at the start (relocations' reads) */
	bool locked;                     /* ckpt_mu held */
} cmp_run;

/* ---------------- statistics (note 3) ---------------- */

static uint64_t cmp_unit_garbage(hlog *l, uint64_t u)
{
	int64_t g = 0;
	for (int i = 0; i < l->max_sessions; i++)
		g += atomic_load_explicit(&l->garbage[(uint64_t)i * LOG_GARBAGE_SLOTS + (u & (LOG_GARBAGE_SLOTS - 1))],
		                          memory_order_relaxed);
	return g > 0 ? (uint64_t)g : 0;
}

/* Where compaction may go up to (note 2): with a device, the written part below Head; without,
 * the immutable pages below SafeReadOnly. */
static uint64_t cmp_limit(hlog *l)
{
	uint64_t head = load_acq(&l->head), flushed = load_acq(&l->flushed_until);
	uint64_t lim = l->dev ? SPW_MIN(head, flushed) : load_acq(&l->safe_ro);
	return lim & ~(l->page_bytes - 1);
}

void hlog_space_get(hlog *l, hlog_space *out)
{
	memset(out, 0, sizeof(*out));
	out->unit_bytes = 1ULL << l->unit_bits;
	out->begin = load_acq(&l->begin);
	out->limit = SPW_MAX(cmp_limit(l), out->begin);
	out->tail = tail_address(l, load_acq(&l->tail));
	out->hold = atomic_load(&l->ckpt_hold);
	out->reclaimed = atomic_load(&l->reclaimed);
	uint64_t u0 = out->begin >> l->unit_bits, u1 = out->tail >> l->unit_bits;
	out->units = u1 - u0 + 1;
	for (uint64_t u = u0; u <= u1 && u - u0 < LOG_GARBAGE_SLOTS; u++)
		out->garbage += cmp_unit_garbage(l, u);
	out->expired_end = SPW_MAX(log_expired_prefix(l, out->begin, out->limit), out->begin);
}

uint64_t hlog_compact_choose(hlog *l, double min_share, uint64_t max_units)
{
	uint64_t begin = load_acq(&l->begin), limit = cmp_limit(l);
	uint64_t ub = l->unit_bits, u0 = begin >> ub, best = 0;
	double best_share = 0;
	uint64_t g = 0;
	/* Units a pass would drop unread (note 7) are garbage whole: their records have all expired. */
	uint64_t expired_end = log_expired_prefix(l, begin, limit);
	for (uint64_t u = u0; ((u + 1) << ub) <= limit && u - u0 < SPW_MIN(max_units, LOG_GARBAGE_SLOTS); u++) {
		g += ((u + 1) << ub) <= expired_end ? (1ULL << ub) - ((u << ub) < begin ? begin - (u << ub) : 0)
		                                    : cmp_unit_garbage(l, u);
		uint64_t end = (u + 1) << ub;
		double share = (double)g / (double)(end - begin);
		if (share > 1)
			share = 1;
		if (share >= best_share && share >= min_share) {
			best_share = share;
			best = end;
		}
	}
	return best;
}

/* ---------------- the IO budget and the lock (notes 4 and 6) ---------------- */

/* ckpt_mu, as FLUSHALL takes it (note 4): a checkpoint holding it may wait for page writes this
 * session claimed, which only its own polls send and reap, so it polls while it waits. */
static void cmp_mu_lock(hlog_session *s)
{
	unsigned spins = 0;
	while (pthread_mutex_trylock(&s->l->ckpt_mu) != 0) {
		alloc_wait_step(s);
		if (++spins < 64)
			log_cpu_relax();
		else
			usleep(200);
	}
}

static void cmp_lock(cmp_run *c)
{
	if (!c->locked) {
		cmp_mu_lock(c->s);
		c->locked = true;
		hlog_session_protect(c->s);
		hlog_session_set_now(c->s, spw_time_ms());   /* expiry decided on a current clock */
	}
}

static void cmp_unlock(cmp_run *c)
{
	if (c->locked) {
		hlog_session_unprotect(c->s);
		pthread_mutex_unlock(&c->l->ckpt_mu);
		c->locked = false;
	}
}

static uint64_t cmp_copied_bytes(hlog_session *s)
{
	return atomic_load_explicit(&s->compact_copied_bytes, memory_order_relaxed);
}

static void cmp_budget(cmp_run *c)
{
	uint64_t lim = c->o->io_limit;
	if (!lim)
		return;
	uint64_t used = c->out->read_bytes + (cmp_copied_bytes(c->s) - c->copied0) +
	                (atomic_load_explicit(&c->s->device_read_bytes, memory_order_relaxed) - c->dread0);
	double elapsed = (double)(spw_mono_ns() - c->t0_ns) / 1e9;
	double ahead = (double)used / (double)lim - elapsed;
	if (ahead <= 0)
		return;
	bool relock = c->locked;
	cmp_unlock(c);
	/* In slices, moving this session's own page writes along and looking at the stop flag. */
	uint64_t until = spw_mono_ns() + (uint64_t)(ahead * 1e9);
	while (spw_mono_ns() < until && !(c->o->stop && atomic_load(c->o->stop))) {
		alloc_wait_step(c->s);
		usleep(2000);
	}
	if (relock)
		cmp_lock(c);
}

/* ---------------- relocations (note 2) ---------------- */

static void cmp_fail(cmp_run *c, uint64_t src, int rc)
{
	if (src < c->floor)
		c->floor = src;
	if (!c->err)
		c->err = rc;
}

/* The liveness check of a part that is still its key's newest version (note 8), its value in
 * p->val: HLOG_PENDING (p waits, asking), HLOG_OK (dead: dropped, counted) or LOG_RELOCATE_ASK
 * (live, or the check failed: copy it). */
static int cmp_part_check(cmp_run *c, cmp_park *p, const uint8_t *key, uint32_t klen)
{
	hlog_value v = { .ptr = p->val.buf, .len = p->val.len, .expire_ms = HLOG_NO_EXPIRY,
	                 .rtype = HLOG_T_PART, .addr = p->src };
	int rc = c->l->part_live(c->l->part_live_arg, c->s, key, klen, &v);
	if (rc == HLOG_PENDING) {
		p->pstate = CMP_P_ASKING;
		return HLOG_PENDING;
	}
	if (rc == 0) {
		ctr_add(&c->s->compact_parts_dropped, 1);
		c->out->parts_dropped++;
		return HLOG_OK;
	}
	p->pstate = CMP_P_LIVE;   /* 1, or an error: live */
	return LOG_RELOCATE_ASK;
}

/* One run of a relocation for park slot p (its op_ctx): true when it is done (or failed). */
static bool cmp_try(cmp_run *c, cmp_park *p, const uint8_t *key, uint32_t klen, const log_rec *rec)
{
	hlog_key k;
	if (p->rtype == HLOG_T_PART)   /* a part's key is internal (ops.c note 5) */
		hlog_key_init_internal(&k, key, klen);
	else
		hlog_key_init(&k, key, klen);
	hlog_session_set_op(c->s, p);
	bool ask = p->rtype == HLOG_T_PART && c->l->part_live && p->pstate != CMP_P_LIVE;
	int rc = p->pstate == CMP_P_ASKING ? LOG_RELOCATE_ASK
	       : log_relocate(c->s, &k, p->src, c->how, rec, ask ? &p->val : NULL);
	if (rc == LOG_RELOCATE_ASK && (rc = cmp_part_check(c, p, key, klen)) == LOG_RELOCATE_ASK)
		rc = log_relocate(c->s, &k, p->src, c->how, rec, NULL);
	if (rc == HLOG_PENDING)
		return false;
	hlog_session_release(c->s, p);
	p->pstate = CMP_P_NEW;
	p->has_rec = false;
	if (rc < 0)
		cmp_fail(c, p->src, rc);
	return true;
}

/* A part parked by its check (or by the copy after it) keeps the record the scan read (rec, with
 * a device): the copy takes it as the fetched record instead of reading it again (note 8).
 * Without the room for it the copy reads it again: nothing is lost. */
static void cmp_keep_rec(cmp_park *p, const log_rec *rec)
{
	uint64_t size = rec_size(rec, atomic_load_explicit(&((log_rec *)rec)->info, memory_order_relaxed));
	if (size > p->rcap) {
		uint8_t *nb = realloc(p->rbuf, size);
		if (!nb)
			return;
		p->rbuf = nb;
		p->rcap = size;
	}
	memcpy(p->rbuf, rec, size);
	p->has_rec = true;
}

/* Run the parked relocations again until at most `keep` are left (note 2). */
static void cmp_drain(cmp_run *c, int keep)
{
	if (c->nparked > keep)
		cmp_lock(c);
	while (c->nparked > keep) {
		hlog_session_poll(c->s);
		int before = c->nparked;
		for (int i = 0; i < CMP_PARK; i++) {
			cmp_park *p = &c->park[i];
			const log_rec *kept = p->has_rec ? (const log_rec *)p->rbuf : NULL;
			if (p->used && cmp_try(c, p, p->key, p->klen, kept)) {
				p->used = false;
				c->nparked--;
			}
		}
		if (c->nparked == before && c->nparked > keep) {
			/* Nothing moved: wait for a completion (the session's fd), holding nothing. */
			bool relock = c->locked;
			cmp_unlock(c);
			int fd = hlog_session_fd(c->s);
			if (fd >= 0) {
				struct pollfd pfd = { .fd = fd, .events = POLLIN };
				uint64_t v;
				if (poll(&pfd, 1, 1) > 0 && read(fd, &v, sizeof(v)) < 0)
					(void)0;
			} else {
				usleep(100);
			}
			if (relock)
				cmp_lock(c);
		}
	}
}

/* Relocate the record at src (key, its type, and with a device the record's bytes as read). */
static void cmp_relocate(cmp_run *c, uint64_t src, const uint8_t *key, uint32_t klen, uint8_t rtype,
                         const log_rec *rec)
{
	if (c->nparked == CMP_PARK)
		cmp_drain(c, CMP_PARK - 1);
	cmp_park *p = NULL;
	for (int i = 0; i < CMP_PARK && !p; i++)
		if (!c->park[i].used)
			p = &c->park[i];
	p->src = src;
	p->rtype = rtype;
	p->pstate = CMP_P_NEW;
	p->has_rec = false;
	if (cmp_try(c, p, key, klen, rec))
		return;
	if (rec && p->pstate != CMP_P_NEW)   /* a part parked by its check or after it */
		cmp_keep_rec(p, rec);
	if (p->kcap < klen) {
		uint8_t *nk = realloc(p->key, klen);
		if (!nk) {
			hlog_session_release(c->s, p);
			p->pstate = CMP_P_NEW;
			cmp_fail(c, src, -ENOMEM);
			return;
		}
		p->key = nk;
		p->kcap = klen;
	}
	if (klen)   /* the empty key: p->key may still be NULL */
		memcpy(p->key, key, klen);
	p->klen = klen;
	p->used = true;
	c->nparked++;
}

/* ---------------- the scan (note 2) ---------------- */

/* Page p's bytes: in memory (no device), or read into c->page. NULL with c->err set (the pass
 * ends at a, the record it was about to read: never inside a record). */
static const uint8_t *cmp_page(cmp_run *c, uint64_t p, uint64_t a)
{
	hlog *l = c->l;
	if (!l->dev)
		return (const uint8_t *)hlog_rec_at(l, p << l->page_bits);
	if (c->page_no != p) {
		bool relock = c->locked;
		cmp_unlock(c);
		cmp_budget(c);
		/* In pieces, one at a time, the budget looked at between them: a foreground read queued
		 * behind compaction's waits for one small request, not for a page (note 6). */
		int rc = 0;
		for (uint64_t off = 0; off < l->page_bytes && rc == 0; off += CMP_IO_BYTES) {
			uint64_t n = SPW_MIN(CMP_IO_BYTES, l->page_bytes - off);
			alloc_wait_step(c->s);   /* this session's page writes go on meanwhile */
			rc = ckpt_dev_io(c->q, false, (p << l->page_bits) + off, c->page + off, n);
			c->out->read_bytes += n;
			ctr_add(&c->s->compact_read_bytes, n);
			if (rc == 0)
				cmp_budget(c);
		}
		if (relock)
			cmp_lock(c);
		if (rc < 0) {
			cmp_fail(c, a, rc);
			snprintf(c->out->why, sizeof(c->out->why), "reading the log at %" PRIu64 " failed: %s",
			         p << l->page_bits, spw_strerror(rc));
			return NULL;
		}
		c->page_no = p;
	}
	return c->page;
}

/* A record that spans pages, whole (it starts page p; size bytes), read from the device. */
static const log_rec *cmp_big(cmp_run *c, uint64_t a, uint64_t size)
{
	hlog *l = c->l;
	uint64_t len = SPW_ALIGN_UP(size, (uint64_t)l->sector);
	if (len > c->big_cap) {
		free(c->big);
		c->big_cap = SPW_ALIGN_UP(len, 4096);
		if (!(c->big = aligned_alloc(SPW_MAX(l->dev->mem_align, 4096u), c->big_cap))) {
			c->big_cap = 0;
			cmp_fail(c, a, -ENOMEM);
			return NULL;
		}
	}
	bool relock = c->locked;
	cmp_unlock(c);
	int rc = ckpt_dev_io(c->q, false, a, c->big, len);
	if (relock)
		cmp_lock(c);
	if (rc < 0) {
		cmp_fail(c, a, rc);
		return NULL;
	}
	c->out->read_bytes += len;
	ctr_add(&c->s->compact_read_bytes, len);
	return (const log_rec *)c->big;
}

/* Walk [from, until) and relocate every value record that may be live. Returns where it stopped:
 * until or past (a spanning record), or earlier on a failure or a stop. */
static uint64_t cmp_scan(cmp_run *c, uint64_t from, uint64_t until)
{
	hlog *l = c->l;
	uint64_t a = from, pb = l->page_bytes, cur_page = UINT64_MAX;
	while (a < until && !c->err) {
		uint64_t p = a >> l->page_bits, off = a & (pb - 1);
		if (p != cur_page) {
			/* A page at a time under the lock (note 4), then a look at the budget and stop. */
			cmp_unlock(c);
			if (c->o->stop && atomic_load(c->o->stop))
				break;
			cmp_budget(c);
			cmp_lock(c);
			/* A FLUSHALL moved Begin past us: nothing below is anybody's (and without a device
			 * its frames are going). */
			if (a < load_acq(&l->begin))
				break;
			/* The copies turn pages, whose writes this session claims: they go out with its polls. */
			hlog_session_poll(c->s);
			cur_page = p;
		}
		if (off + REC_HDR_BYTES > pb) {
			a = (p + 1) << l->page_bits;
			continue;
		}
		const uint8_t *page = cmp_page(c, p, a);
		if (!page)
			break;
		const log_rec *r = (const log_rec *)(page + off);
		uint64_t info = atomic_load_explicit(&((log_rec *)r)->info, memory_order_acquire);
		if (info == 0) {
			a = (p + 1) << l->page_bits;   /* the rest of the page is empty */
			continue;
		}
		uint64_t size = rec_size(r, info);
		bool spans = size > pb - off;
		if (size < REC_HDR_BYTES || (spans && off != 0) || size > l->max_rec) {
			cmp_fail(c, a, SPW_E_CORRUPT);
			snprintf(c->out->why, sizeof(c->out->why), "the log is corrupt at address %" PRIu64, a);
			break;
		}
		c->out->records++;
		if ((info & REC_VALID) && !(info & (REC_SEALED | REC_TOMBSTONE))) {
			const log_rec *rec = r;
			if (spans && l->dev && !(rec = cmp_big(c, a, size)))
				break;
			uint64_t rinfo = atomic_load_explicit(&((log_rec *)rec)->info, memory_order_relaxed);
			cmp_relocate(c, a, rec_key(rec, rinfo), rec->key_len, rec_type(rinfo), l->dev ? rec : NULL);
		}
		a += size;
	}
	cmp_drain(c, 0);
	cmp_unlock(c);
	return a;
}

/* ---------------- a pass ---------------- */

static void cmp_free(cmp_run *c)
{
	free(c->page);
	free(c->big);
	for (int i = 0; i < CMP_PARK; i++) {
		free(c->park[i].key);
		free(c->park[i].val.buf);
		free(c->park[i].rbuf);
	}
}

/* The pass's buffers and device queue (with a device). 0 or -errno with why. */
static int cmp_open(cmp_run *c)
{
	hlog *l = c->l;
	if (!l->dev)
		return 0;
	if (!(c->page = aligned_alloc(SPW_MAX(l->dev->mem_align, 4096u), l->page_bytes))) {
		snprintf(c->out->why, sizeof(c->out->why), "no memory for a page buffer");
		return -ENOMEM;
	}
	int rc = c->s->t.cmp_q ? 0 : dev_queue_open(l->dev, &c->s->t.cmp_q);
	if (rc < 0)
		snprintf(c->out->why, sizeof(c->out->why), "cannot open a device queue: %s", spw_strerror(rc));
	c->q = c->s->t.cmp_q;
	return rc;
}

/* Before the pass returns: the page writes its copies' page turns claimed went out and completed
 * (nobody else reaps them, and other sessions' writes may wait for those frames). */
static void cmp_settle(cmp_run *c)
{
	hlog_session_protect(c->s);
	while (hlog_session_inflight(c->s) > 0 || hlog_session_unsubmitted(c->s)) {
		hlog_session_poll(c->s);
		if (hlog_session_inflight(c->s) > 0) {
			hlog_session_unprotect(c->s);
			usleep(100);
			hlog_session_protect(c->s);
		}
	}
	hlog_session_unprotect(c->s);
}

/* Move Begin to end (note 4). */
static void cmp_begin_move(cmp_run *c, uint64_t end)
{
	cmp_mu_lock(c->s);
	hlog_session_protect(c->s);
	uint64_t head = alloc_begin_raise(c->s, end);
	pthread_mutex_unlock(&c->l->ckpt_mu);
	if (head)
		alloc_truncate_release(c->s, head);
	hlog_session_unprotect(c->s);
	/* Entries below Begin read as absent already; clearing them gives their slots back. The clear
	 * is a CAS per word, safe against publishers, so it needs neither the lock nor the epoch. */
	hidx_clear_below(c->l->idx, load_acq(&c->l->begin));
}

/* Note 7: drop the leading units of [begin, until) whose records have all expired, unread: Begin
 * past them, one epoch, then their keys out of the counts. Returns Begin afterwards. */
static uint64_t cmp_drop_expired(cmp_run *c, uint64_t begin, uint64_t until)
{
	hlog *l = c->l;
	if (!l->ustats)
		return begin;
	cmp_mu_lock(c->s);
	/* Under the lock: no FLUSHALL moves Begin or stats_from meanwhile. */
	uint64_t b = load_acq(&l->begin), end = b == begin ? log_expired_prefix(l, b, until) : b;
	if (end > b) {
		hlog_session_protect(c->s);
		alloc_begin_raise(c->s, end);   /* with a device nothing in memory changes */
		hlog_session_unprotect(c->s);
		ckpt_epoch_barrier(c->s);        /* every operation that saw the old Begin has finished */
		int64_t keys;
		uint64_t ub = l->unit_bits;
		if (!log_expired_live(l, b >> ub, end >> ub, &keys))
			snprintf(c->out->why, sizeof(c->out->why), "the key count may be off after dropping "
			         "expired units [%" PRIu64 ", %" PRIu64 "): their figures were overwritten", b, end);
		if (keys > 0) {
			log_count_dropped(c->s, keys);
			c->out->dropped_keys += (uint64_t)keys;
		}
		ctr_add(&c->s->compact_expired_drop_units, ((end - 1) >> ub) - (b >> ub) + 1);   /* b's too */
		ctr_add(&c->s->compact_expired_drop_bytes, end - b);
		c->out->dropped_bytes += end - b;
	}
	pthread_mutex_unlock(&l->ckpt_mu);
	if (end > b)
		hidx_clear_below(l->idx, load_acq(&l->begin));
	return SPW_MAX(end, b);
}

int hlog_compact(hlog *l, hlog_session *s, const hlog_compact_opts *o, hlog_compact_info *out)
{
	memset(out, 0, sizeof(*out));
	cmp_run c = { .l = l, .s = s, .o = o, .out = out, .page_no = UINT64_MAX, .floor = UINT64_MAX,
	              .t0_ns = spw_mono_ns(), .copied0 = cmp_copied_bytes(s) };
	c.how = o->mode == HLOG_COMPACT_EVICT_ALL ? LOG_RELOCATE_EVICT_ALL
	      : o->mode == HLOG_COMPACT_EVICT_VOLATILE ? LOG_RELOCATE_EVICT_VOLATILE : LOG_RELOCATE_COPY;
	c.n0[0] = atomic_load(&s->compact_copied);
	c.n0[1] = atomic_load(&s->evicted_keys);
	c.n0[2] = atomic_load(&s->expired_keys);
	c.dread0 = atomic_load(&s->device_read_bytes);
	pthread_mutex_lock(&l->compact_one);
	uint64_t begin = load_acq(&l->begin);
	out->begin = out->end = begin;
	int rc = cmp_open(&c);
	uint64_t limit = cmp_limit(l), until = SPW_MIN(o->until, limit);
	if (rc == 0 && until > begin) {
		uint64_t from = cmp_drop_expired(&c, begin, until);
		uint64_t end = from < until ? cmp_scan(&c, from, until) : from;
		end = SPW_MIN(end, c.floor);
		if (end > from)
			cmp_begin_move(&c, end);
		out->end = SPW_MAX(load_acq(&l->begin), begin);
		rc = c.err;
		if (rc && !out->why[0])
			snprintf(out->why, sizeof(out->why), "a relocation failed at %" PRIu64 ": %s", c.floor,
			         spw_strerror(rc));
		int e = end > begin ? hlog_reclaim(l, s, &out->removed_bytes) : 0;
		if (e < 0 && !rc) {
			rc = e;
			snprintf(out->why, sizeof(out->why), "removing segments failed: %s", spw_strerror(e));
		}
	}
	cmp_settle(&c);
	cmp_free(&c);
	pthread_mutex_unlock(&l->compact_one);
	out->copied = atomic_load(&s->compact_copied) - c.n0[0];
	out->evicted = atomic_load(&s->evicted_keys) - c.n0[1];
	out->expired = atomic_load(&s->expired_keys) - c.n0[2];
	out->copied_bytes = cmp_copied_bytes(s) - c.copied0;
	out->duration_us = (spw_mono_ns() - c.t0_ns) / 1000;
	return rc;
}

/* Note 5: one epoch (no operation that saw the old Begin is still running), then every device
 * request the sessions had accepted by then completes; twice, for a chain read a completion
 * queued during the first wait. false after LOG_QUIESCE_MS without it. */
bool log_io_quiesce(hlog *l, hlog_session *s)
{
	static _Thread_local uint64_t want[LOG_QUIESCE_SESSIONS];
	int n = SPW_MIN(l->max_sessions, (int)LOG_QUIESCE_SESSIONS);
	for (int round = 0; round < 2; round++) {
		ckpt_epoch_barrier(s);
		for (int i = 0; i < n; i++)
			want[i] = atomic_load_explicit(&l->sessions[i].io_accepted, memory_order_acquire);
		uint64_t deadline = spw_mono_ns() + LOG_QUIESCE_MS * 1000000ULL;
		for (int i = 0; i < n;) {
			if (atomic_load_explicit(&l->sessions[i].io_completed, memory_order_acquire) >= want[i]) {
				i++;
				continue;
			}
			if (spw_mono_ns() > deadline)
				return false;
			alloc_wait_step(s);   /* its own requests complete in its own polls */
			usleep(500);
		}
	}
	return true;
}

int hlog_reclaim(hlog *l, hlog_session *s, uint64_t *removed)
{
	*removed = 0;
	if (!l->dev)
		return 0;
	uint64_t seg = l->dev->segment_bytes;
	uint64_t begin = load_acq(&l->begin), hold = atomic_load(&l->ckpt_hold);
	uint64_t to = SPW_MIN(begin, hold) & ~(seg - 1);
	uint64_t from = atomic_load(&l->reclaimed);
	if (to <= from)
		return 0;
	if (!log_io_quiesce(l, s))
		return 0;   /* requests still in flight: the next call tries again */
	int rc = dev_truncate_until(l->dev, to);
	if (rc == 0 && marker_advance(&l->reclaimed, to))
		*removed = to - from;
	return rc;
}
