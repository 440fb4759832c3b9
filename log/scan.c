/*
 * scan.c - the walks over the store: hlog_scan (the index's chains, the newest version of each key,
 * and with a device the chains' older parts read back level by level on the caller's thread) and
 * hlog_records_visit (the pages in memory, in address order). Device reads go through pending.c's
 * fetches (pend_fetch_read) and are waited for with readq.c's pump.
 *
 * NOTES ON THE DESIGN OF SCANS
 *
 *  1. hlog_scan walks hidx_scan's entries; for each chain it reports each key's newest version only
 *     (a key seen nearer the head hides the older ones, tombstones and expired versions hide too).
 *     A sealed version is still reported: its value was current when the chain was read, and
 *     skipping it would lose a key updated during the scan. A chain that reaches below Head goes on
 *     on the device (note 2).
 *
 *  2. Scan with a device. hlog_scan reports the in-memory part of each chain as before; a chain
 *     that reaches below Head is remembered with the keys it has seen (scan_chain_add), and once
 *     the index buckets of the call are covered, scan_cold reads those chains on the device one
 *     level at a time (all chains' next records at once, one submission), waiting for them on the
 *     caller's thread with dev_wait: the documented compromise for SCAN/KEYS/RANDOMKEY (they
 *     already cost O(N) in Redis); every other operation goes pending instead. Its reads count in
 *     scan_reads; a failed read skips the rest of that chain and is reported by hlog_scan_error.
 *
 *  4. Begin moving during a call. Compaction copies a key above Begin and then moves Begin past
 *     the old version; a call that had read the bucket's entry word before the copy follows the
 *     chain into what is now below Begin (without a device, below Head, which moves with Begin)
 *     and would miss a key present from start to end. So a call whose Begin moved while it ran
 *     walks its buckets again (SCAN_BEGIN_ROUNDS at most), skipping the keys the first walk
 *     reported (their hashes, noted as it goes: one store per key).
 *
 *  5. Internal keys (ops.c note 5): a part (a record of type HLOG_T_PART) is never reported, and
 *     never hides a user key of the same bytes: the walks pass over it as over another key.
 *
 *  3. hlog_records_visit is the page walker of the tests (compaction has its own, compact.c); recovery has
 *     its own, which also reads pages from the device (recover.c). REC_VERSION bits stay reserved:
 *     checkpoints need no version in the records (ckpt.c note 1).
 */

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "log/hlog_int.h"
#include "log/pending_int.h"
#include "log/readq_int.h"
#include "log/scan_int.h"

/* Scan bookkeeping (note 2). */
typedef struct scan_chain {
	uint64_t addr;               /* next record to read, 0 when the chain is done */
	pend_fetch *f;
	uint32_t seen;               /* newest seen key of this chain (index into seen), or NONE */
} scan_chain;

typedef struct scan_seen {
	uint64_t hash;
	uint64_t off;                /* key bytes in scan_keys */
	uint32_t len;
	uint32_t next;               /* older seen key of the same chain, or NONE */
} scan_seen;
#define SEEN_NONE UINT32_MAX
#define SCAN_BEGIN_ROUNDS 4          /* walks of one call's buckets when Begin moves (note 4) */

typedef struct scan_ctx {
	hlog_session *s;
	hlog_key_fn fn;
	void *ctx;
	uint64_t begin;
	int round;                   /* note 4: 0, or a walk again after Begin moved */
	uint32_t sorted;             /* rep_h[0, sorted) is sorted (walks after the first) */
} scan_ctx;

static int scan_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Report a live key (note 4): the first walk notes its hash; a walk again skips the keys the
 * first one reported (by hash: two keys of one call with the same 64-bit hash are not told
 * apart there, only in that race). */
static void scan_report(scan_ctx *sc, const void *key, size_t klen, const hlog_value *v)
{
	hlog_session *s = sc->s;
	uint64_t h = hidx_hash(key, klen);
	if (sc->round > 0) {
		/* [0, sorted) is sorted (before this walk); what this walk added is after it. */
		if (sc->sorted && bsearch(&h, s->rep_h, sc->sorted, sizeof(h), scan_u64_cmp))
			return;
		for (uint32_t i = sc->sorted; i < s->rep_n; i++)
			if (s->rep_h[i] == h)
				return;
	}
	if (s->rep_n == s->rep_cap) {
		uint32_t cap = s->rep_cap ? s->rep_cap * 2 : 64;
		uint64_t *nh = realloc(s->rep_h, cap * sizeof(*nh));
		if (nh) {
			s->rep_h = nh;
			s->rep_cap = cap;
		}
	}
	if (s->rep_n < s->rep_cap)
		s->rep_h[s->rep_n++] = h;
	sc->fn(sc->ctx, key, klen, v);
}

/* ---------------- the device part's bookkeeping (note 2) ---------------- */

static void scan_reset(hlog_session *s)
{
	s->t.scan_nchains = 0;
	s->t.scan_nseen = 0;
	s->t.scan_keys_len = 0;
	s->t.scan_err = 0;
}

/* Grow *p (n elements of size) to hold at least want elements. false when memory is short. */
static bool scan_grow(void **p, uint32_t *cap, uint32_t want, size_t size)
{
	if (want <= *cap)
		return true;
	uint32_t n = *cap ? *cap * 2 : 64;
	while (n < want)
		n *= 2;
	void *q = realloc(*p, (size_t)n * size);
	if (!q)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static bool scan_seen_add(hlog_session *s, scan_chain *c, const uint8_t *key, uint32_t len, uint64_t hash)
{
	tier_session *t = &s->t;
	if (!scan_grow(&t->scan_seen, &t->scan_seen_cap, t->scan_nseen + 1, sizeof(scan_seen)))
		return false;
	if (t->scan_keys_len + len > t->scan_keys_cap) {
		uint64_t n = t->scan_keys_cap ? t->scan_keys_cap * 2 : 4096;
		while (n < t->scan_keys_len + len)
			n *= 2;
		uint8_t *k = realloc(t->scan_keys, n);
		if (!k)
			return false;
		t->scan_keys = k;
		t->scan_keys_cap = n;
	}
	memcpy(t->scan_keys + t->scan_keys_len, key, len);
	scan_seen *e = &((scan_seen *)t->scan_seen)[t->scan_nseen];
	e->hash = hash;
	e->off = t->scan_keys_len;
	e->len = len;
	e->next = c->seen;
	c->seen = t->scan_nseen++;
	t->scan_keys_len += len;
	return true;
}

static bool scan_seen_has(hlog_session *s, const scan_chain *c, const uint8_t *key, uint32_t len, uint64_t hash)
{
	const scan_seen *seen = s->t.scan_seen;
	for (uint32_t i = c->seen; i != SEEN_NONE; i = seen[i].next)
		if (seen[i].hash == hash && seen[i].len == len && memcmp(s->t.scan_keys + seen[i].off, key, len) == 0)
			return true;
	return false;
}

/* hlog_scan's visitor met a chain that goes on at cold below Head: remember it with every key of
 * its in-memory part (they hide older versions on the device). Called with the epoch protected, so
 * the records between head and cold are still in memory. */
static void scan_chain_add(hlog_session *s, uint64_t head, uint64_t cold)
{
	tier_session *t = &s->t;
	hlog *l = s->l;
	if (!scan_grow(&t->scan_chains, &t->scan_chains_cap, t->scan_nchains + 1, sizeof(scan_chain))) {
		t->scan_err = -ENOMEM;
		return;
	}
	scan_chain *c = &((scan_chain *)t->scan_chains)[t->scan_nchains++];
	c->addr = cold;
	c->f = NULL;
	c->seen = SEEN_NONE;
	for (uint64_t b = head; b > cold; ) {
		log_rec *r = hlog_rec_at(l, b);
		uint64_t info = atomic_load_explicit(&r->info, memory_order_acquire);
		const uint8_t *key = rec_key(r, info);
		if (rec_internal(info)) {
			b = info & REC_PREV_MASK;   /* note 5: parts hide no user key */
			continue;
		}
		if (!scan_seen_add(s, c, key, r->key_len, hidx_hash(key, r->key_len))) {
			t->scan_err = -ENOMEM;
			c->addr = 0;
			return;
		}
		b = info & REC_PREV_MASK;
	}
}

/* ---------------- scan (notes 1 and 2) ---------------- */

/* true when a record between head (inclusive) and a (exclusive) has r's key: a newer version. */
static bool scan_hidden(hlog *l, uint64_t head, uint64_t a, const log_rec *r, uint64_t info, uint64_t begin)
{
	const uint8_t *key = rec_key(r, info);
	for (uint64_t b = head; b != a && b >= begin; ) {
		log_rec *q = hlog_rec_at(l, b);
		uint64_t qi = atomic_load_explicit(&q->info, memory_order_acquire);
		if (rec_key_is(q, qi, key, r->key_len, rec_internal(info)))
			return true;
		b = qi & REC_PREV_MASK;
	}
	return false;
}

static void scan_visit(void *vctx, uint64_t word)
{
	scan_ctx *sc = vctx;
	hlog *l = sc->s->l;
	uint64_t head = word & HIDX_ADDR_MASK;
	uint64_t safe_ro = load_acq(&l->safe_ro);
	for (uint64_t a = head; a >= sc->begin; ) {
		if (a < load_acq(&l->head)) {
			/* The rest of the chain is on the device: read after the buckets (note 2). */
			if (l->dev)
				scan_chain_add(sc->s, head, a);
			break;
		}
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info = rec_wait_valid(r, atomic_load_explicit(&r->info, memory_order_acquire));
		uint64_t prev = info & REC_PREV_MASK;
		if (!rec_internal(info) && !scan_hidden(l, head, a, r, info, sc->begin)) {
			bool locked = a >= safe_ro;
			if (locked)
				info = rec_lock_shared(r, true);   /* note 1: a sealed version is reported */
			if (!(info & REC_TOMBSTONE) && !rec_expired(r, info, sc->s->now_ms)) {
				hlog_value v = rec_value(r, info, a);
				scan_report(sc, rec_key(r, info), r->key_len, &v);
			}
			if (locked)
				rec_unlock_shared(r);
		}
		a = prev;
	}
}

/* Wait on this thread until every scan read is in; other completions run too (their ready
 * callbacks wait for the next poll). The epoch is refreshed: the scan holds no log pointer here. */
static void scan_wait(hlog_session *s)
{
	dev_queue *q = s->t.q;
	while (s->t.scan_inflight) {
		if (readq_pump(s) > 0)
			continue;
		if (!s->t.scan_inflight)
			break;
		log_epoch_step(s);
		if (dev_queue_pending(q))
			dev_wait(q, 1, READQ_WAIT_NS);
		else
			sched_yield();   /* all of it held back by the device throttle */
	}
}

static void scan_cold(scan_ctx *sc)
{
	hlog_session *s = sc->s;
	uint64_t begin = sc->begin;
	tier_session *t = &s->t;
	hlog *l = s->l;
	if (!t->scan_nchains)
		return;
	scan_chain *chains = t->scan_chains;
	if (!t->q) {
		t->scan_err = -ENOTCONN;
		return;
	}
	for (;;) {
		uint32_t active = 0;
		for (uint32_t i = 0; i < t->scan_nchains; i++) {
			scan_chain *c = &chains[i];
			if (!c->addr)
				continue;
			if (c->addr < begin) {
				c->addr = 0;
				continue;
			}
			if (!c->f && !(c->f = pend_fetch_new(s))) {
				t->scan_err = -ENOMEM;
				c->addr = 0;
				continue;
			}
			c->f->state = FETCH_READING;   /* op NULL: a scan read, no key to compare */
			t->scan_inflight++;
			ctr_add(&s->scan_reads, 1);
			pend_fetch_read(s, c->f, c->addr, l->initial_io, false);
			active++;
		}
		if (!active)
			break;
		scan_wait(s);
		for (uint32_t i = 0; i < t->scan_nchains; i++) {
			scan_chain *c = &chains[i];
			if (!c->addr)
				continue;
			pend_fetch *f = c->f;
			if (f->state == FETCH_FAILED) {
				if (!t->scan_err)
					t->scan_err = f->err;
				c->addr = 0;
				continue;
			}
			const log_rec *r = (const log_rec *)(f->buf + (f->addr - f->base));
			uint64_t info = atomic_load_explicit(&r->info, memory_order_relaxed);
			const uint8_t *key = rec_key(r, info);
			uint64_t hash = hidx_hash(key, r->key_len);
			if (!rec_internal(info) && !scan_seen_has(s, c, key, r->key_len, hash)) {
				if (!scan_seen_add(s, c, key, r->key_len, hash) && !t->scan_err)
					t->scan_err = -ENOMEM;
				bool expired = rec_expired(r, info, s->now_ms);
				if (!(info & REC_TOMBSTONE) && !expired) {
					hlog_value v = rec_value(r, info, f->addr);
					scan_report(sc, key, r->key_len, &v);
				}
			}
			uint64_t prev = info & REC_PREV_MASK;
			c->addr = prev >= begin ? prev : 0;
		}
	}
	for (uint32_t i = 0; i < t->scan_nchains; i++) {
		if (chains[i].f) {
			pend_fetch_put(s, chains[i].f);
			chains[i].f = NULL;
		}
	}
}

uint64_t hlog_scan(hlog_session *s, uint64_t cursor, uint64_t count, hlog_key_fn fn, void *ctx)
{
	return hlog_scan_base(s, 0, cursor, count, fn, ctx);
}

uint64_t hlog_scan_base(hlog_session *s, uint64_t base, uint64_t cursor, uint64_t count, hlog_key_fn fn,
                        void *ctx)
{
	uint64_t next = 0;
	/* Note 4: a Begin that moved during the call may have cut chains the walk was on (compaction
	 * copied their keys above it): the call's buckets are walked again, a few times at most. */
	s->rep_n = 0;
	for (int round = 0; round < SCAN_BEGIN_ROUNDS; round++) {
		if (round > 0)
			qsort(s->rep_h, s->rep_n, sizeof(*s->rep_h), scan_u64_cmp);
		scan_ctx sc = { s, fn, ctx, load_acq(&s->l->begin), round, s->rep_n };
		if (s->l->dev)
			scan_reset(s);
		next = hidx_scan_base(s->l->idx, base, cursor, count, scan_visit, &sc);
		if (s->l->dev)
			scan_cold(&sc);
		if (load_acq(&s->l->begin) == sc.begin)
			break;
	}
	return next;
}

int hlog_scan_error(hlog_session *s)
{
	return s->t.scan_err;
}

uint64_t hlog_scan_cursor_end(hlog *l)
{
	return hidx_buckets(l->idx);
}

void scan_session_free(hlog_session *s)
{
	free(s->t.scan_chains);
	free(s->t.scan_seen);
	free(s->t.scan_keys);
}

/* ---------------- the page walker (note 3) ---------------- */

uint64_t hlog_records_visit(hlog *l, hlog_record_fn fn, void *ctx)
{
	uint64_t n = 0;
	uint64_t a = SPW_MAX(atomic_load(&l->begin), atomic_load(&l->head));
	uint64_t end = tail_address(l, atomic_load(&l->tail));
	uint64_t skip;
	/* Head cut a spanning record: its continuation is not a record start. */
	while (a > atomic_load(&l->begin) && (a & (l->page_bytes - 1)) == 0 &&
	       (skip = log_span_cont_end(l, a >> l->page_bits)) != 0)
		a += skip;
	while (a < end) {
		uint64_t page_end = (a | (l->page_bytes - 1)) + 1;
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info;
		if (page_end - a < REC_HDR_BYTES || (info = atomic_load(&r->info)) == 0) {
			a = page_end;   /* the rest of the page was never allocated */
			continue;
		}
		fn(ctx, a, r, info);
		n++;
		a += rec_size(r, info);
	}
	return n;
}
