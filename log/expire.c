/*
 * expire.c - active expiry: one step of an expiry cycle (hlog_expire_step), which walks index
 * buckets from a cursor, samples the keys with an expiry whose newest version is in memory, and
 * removes the expired ones through the lazy path of ops.c (a read that meets an expired newest
 * version removes it: OP_EXPIRE). The cycle around the steps (how many, how often, the CPU
 * budget) is the caller's: server/expire.c runs Redis's.
 *
 * NOTES ON THE DESIGN OF ACTIVE EXPIRY
 *
 *  1. What a step looks at. hidx_scan hands over the entries of [cursor, cursor + max_buckets);
 *     each entry's chain is walked newest first from the address the entry held, over its in-memory
 *     part only (addresses >= Begin and >= Head; the first address below Head ends the walk, and
 *     the device part is left to compaction, which drops expired records as it copies). The first
 *     record of a key on the chain is that key's newest version as of the entry word; later ones
 *     are hidden (expire_seen). A newest version that is valid, not a tombstone and carries
 *     REC_HAS_EXPIRY is "sampled"; one whose expire_at < now_ms (rec_expired, Redis's rule) is
 *     expired and its key is queued for removal.
 *
 *  2. Reading records (ops.c notes 1 and 3). A record reachable from the index is waited for until
 *     it is valid (rec_wait_valid). Key length, key bytes, the previous address and REC_HAS_EXPIRY
 *     never change after publication, so the walk reads them without a lock, as log_chain_find
 *     does. The tombstone bit and expire_at may change in place while the record is mutable:
 *     a record at or above SafeReadOnly (as loaded for the chain: it only grows, so a record below
 *     the loaded value is immutable) is read under a shared lock (sealed ones too: a sealed record
 *     is still the newest the walk knows of), one below it without any atomic RMW.
 *
 *  3. Removal goes through hlog_read, never from inside the walk. Keys are copied into the step's
 *     buffer while the chains of a few buckets are walked (EXPIRE_CHUNK); then, with no lock and no
 *     log pointer held, each is read: the read runs the full lookup again, and if the newest version
 *     it finds is still expired it removes it (ops.c note 4: a tombstone in place or appended, best
 *     effort, counted in the session's expired_keys). So the walk's snapshot only chooses keys: a
 *     writer that set the key again meanwhile wins (the read finds a live value and removes
 *     nothing), and a removal is always the store's own, under its locks and CAS rules: a step never
 *     loses a live key nor brings one back. What a step removed is the growth of the session's
 *     expired_keys over the step. A read that finds the newest version gone to the device meanwhile
 *     (evicted between the walk and the read) goes pending; the step releases it at once (its op_ctx
 *     is the step's own) and leaves that key to compaction or a later read.
 *
 *  4. Epoch. The caller protects the session around a step (hlog.h) and unprotects it between
 *     steps; inside, the step refreshes after each chunk's removals (it holds nothing then), so a
 *     long step does not hold back page reclamation.
 */

#include <stdlib.h>
#include <string.h>

#include "log/hlog_int.h"

#define EXPIRE_CHUNK 16              /* buckets walked before their expired keys are removed */
#define EXPIRE_SEEN_MAX 32           /* distinct keys per chain remembered; past that, a re-walk */
#define EXPIRE_BUF_STACK 4096        /* key bytes queued on the stack before the heap is used */

/* The keys a chunk found expired: [u32 length][bytes] back to back. */
typedef struct expire_walk {
	hlog_session *s;
	hlog_expire_stats *st;
	uint64_t begin;
	uint8_t *buf;
	size_t len, cap;
	bool heap;
	int err;                     /* -ENOMEM once a key could not be queued */
	uint8_t stack[EXPIRE_BUF_STACK];
} expire_walk;

static bool expire_queue(expire_walk *w, const uint8_t *key, uint32_t klen)
{
	size_t need = w->len + sizeof(uint32_t) + klen;
	if (need > w->cap) {
		size_t cap = w->cap * 2;
		while (cap < need)
			cap *= 2;
		uint8_t *p = w->heap ? realloc(w->buf, cap) : malloc(cap);
		if (!p)
			return false;
		if (!w->heap)
			memcpy(p, w->buf, w->len);
		w->buf = p;
		w->cap = cap;
		w->heap = true;
	}
	memcpy(w->buf + w->len, &klen, sizeof(klen));
	memcpy(w->buf + w->len + sizeof(klen), key, klen);
	w->len = need;
	return true;
}

static bool key_equal(const log_rec *a, uint64_t ai, const log_rec *b, uint64_t bi)
{
	return rec_same_key(a, ai, b, bi);   /* the namespace too (ops.c note 5) */
}

/* Whether r's key was met nearer the entry (note 1). seen holds the newest record of each distinct
 * key so far; once it is full, the chain from head to a is walked again instead. */
static bool expire_seen(hlog *l, const log_rec *r, uint64_t info, log_rec **seen, const uint64_t *seen_info,
		int nseen, bool overflow, uint64_t head, uint64_t a)
{
	for (int i = 0; i < nseen; i++)
		if (key_equal(seen[i], seen_info[i], r, info))
			return true;
	if (!overflow)
		return false;
	for (uint64_t b = head; b != a; ) {
		log_rec *q = hlog_rec_at(l, b);
		uint64_t qi = atomic_load_explicit(&q->info, memory_order_acquire);
		if (key_equal(q, qi, r, info))
			return true;
		b = qi & REC_PREV_MASK;
	}
	return false;
}

/* A newest version with an expiry: sample it, queue its key when it is expired (note 2). */
static void expire_sample(expire_walk *w, log_rec *r, uint64_t info, bool locked)
{
	if (locked)
		info = rec_lock_shared(r, true);
	bool tomb = (info & REC_TOMBSTONE) != 0;
	bool expired = !tomb && rec_expired(r, info, w->s->now_ms);
	if (locked)
		rec_unlock_shared(r);
	if (tomb)
		return;
	w->st->sampled++;
	if (expired && !expire_queue(w, rec_key(r, info), r->key_len))
		w->err = -ENOMEM;
}

/* hidx_scan's visitor: one entry's chain, in memory only (note 1). */
static void expire_visit(void *ctx, uint64_t word)
{
	expire_walk *w = ctx;
	hlog *l = w->s->l;
	uint64_t head = word & HIDX_ADDR_MASK;
	uint64_t safe_ro = load_acq(&l->safe_ro);
	log_rec *seen[EXPIRE_SEEN_MAX];
	uint64_t seen_info[EXPIRE_SEEN_MAX];
	int nseen = 0;
	bool overflow = false;

	w->st->chains++;
	for (uint64_t a = head; a >= w->begin; ) {
		if (a < load_acq(&l->head)) {
			w->st->cold_chains++;   /* the rest is on the device: compaction's */
			break;
		}
		log_rec *r = hlog_rec_at(l, a);
		uint64_t info = rec_wait_valid(r, atomic_load_explicit(&r->info, memory_order_acquire));
		uint64_t prev = info & REC_PREV_MASK;
		w->st->records++;
		if (!expire_seen(l, r, info, seen, seen_info, nseen, overflow, head, a)) {
			if (nseen < EXPIRE_SEEN_MAX) {
				seen[nseen] = r;
				seen_info[nseen++] = info;
			} else {
				overflow = true;
			}
			/* A part never has an expiry (ops.c note 5): only user keys are sampled. */
			if ((info & REC_HAS_EXPIRY) && !rec_internal(info))
				expire_sample(w, r, info, a >= safe_ro);
		}
		a = prev;
	}
}

static void expire_read_fn(void *ctx, const hlog_value *v)
{
	(void)ctx;
	(void)v;   /* set again meanwhile: live, nothing to remove */
}

/* Read every queued key (note 3): the lazy path removes those still expired. */
static void expire_remove(expire_walk *w)
{
	hlog_session *s = w->s;
	void *op = s->t.op_ctx;
	hlog_session_set_op(s, w);
	for (size_t off = 0; off < w->len; ) {
		uint32_t klen;
		memcpy(&klen, w->buf + off, sizeof(klen));
		hlog_key k;
		hlog_key_init(&k, w->buf + off + sizeof(klen), klen);
		hlog_read(s, &k, expire_read_fn, NULL);
		off += sizeof(klen) + klen;
	}
	if (s->l->dev)
		hlog_session_release(s, w);   /* a read that went pending or failed: forget it (note 3) */
	hlog_session_set_op(s, op);
	w->len = 0;
}

uint64_t hlog_expire_step(hlog_session *s, uint64_t cursor, uint64_t max_buckets, hlog_expire_stats *st)
{
	hlog *l = s->l;
	expire_walk w;
	w.s = s;
	w.st = st;
	w.buf = w.stack;
	w.len = 0;
	w.cap = sizeof(w.stack);
	w.heap = false;
	w.err = 0;
	uint64_t removed0 = atomic_load_explicit(&s->expired_keys, memory_order_relaxed);
	uint64_t buckets = hidx_buckets(l->idx);   /* a growth meanwhile keeps cursors valid (hidx.c) */
	uint64_t next = cursor < buckets ? cursor : 0;
	for (uint64_t done = 0; done < max_buckets; ) {
		uint64_t n = SPW_MIN((uint64_t)EXPIRE_CHUNK, max_buckets - done);
		uint64_t from = next;
		w.begin = load_acq(&l->begin);
		next = hidx_scan(l->idx, from, n, expire_visit, &w);
		uint64_t walked = (next ? next : SPW_MAX(buckets, from)) - from;
		st->buckets += walked;
		done += walked;
		expire_remove(&w);
		hlog_session_refresh(s);   /* note 4: nothing is held here */
		if (!next)
			break;
	}
	st->expired += atomic_load_explicit(&s->expired_keys, memory_order_relaxed) - removed0;
	if (w.err && !st->err)
		st->err = w.err;
	if (w.heap)
		free(w.buf);
	return next;
}
