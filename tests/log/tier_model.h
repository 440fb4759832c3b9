/*
 * tier_model.h - the machinery of the storage tier's suite (tier_suite.h): a model of what the store
 * holds, the operations run against it, the driver that runs them the way the server runs its
 * clients, and phases that check every result against the model.
 *
 * The driver (tier_drive) does what the server does with its clients: run a batch of operations,
 * park those that return HLOG_PENDING, poll the session (sleeping on its fd, protected only while
 * it runs operations), re-run each parked operation when its ready callback came, and release its
 * op_ctx once it completed. Include after cmocka.h.
 */
#ifndef SPW_TEST_TIER_MODEL_H
#define SPW_TEST_TIER_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_env.h"

#define KIB 1024ULL
#define MIB (1024ULL * 1024ULL)
#define TIER_PAGE (64 * KIB)
#define TIER_BATCH 64
#define TIER_STALL_MS 30000     /* a driver loop without progress for this long is a hang and fails the
                                 * test; long enough that a loaded 2-core machine never trips it */

/* ---------------- the model ---------------- */

typedef struct mkey {
	uint8_t *bytes;              /* expected value when alive */
	uint32_t len;
	bool alive;
} mkey;

typedef struct model {
	mkey *keys;
	int n;
	const char *prefix;
	bool shared_hash;            /* every key gets the same hash: one chain (tag collisions) */
} model;

static void model_init(model *m, int n, const char *prefix)
{
	m->keys = calloc((size_t)n, sizeof(mkey));
	assert_non_null(m->keys);
	m->n = n;
	m->prefix = prefix;
	m->shared_hash = false;
}

static void model_free(model *m)
{
	for (int i = 0; i < m->n; i++)
		free(m->keys[i].bytes);
	free(m->keys);
}

static void model_key(const model *m, int i, test_key *t)
{
	test_key_make(t, m->prefix, i);
	if (m->shared_hash)
		t->k.hash = 0x5a5a00000000002aULL;
}

static uint64_t model_live(const model *m)
{
	uint64_t n = 0;
	for (int i = 0; i < m->n; i++)
		n += m->keys[i].alive;
	return n;
}

/* Deterministic bytes for (key, version). */
static void val_fill(uint8_t *p, size_t len, int i, int v)
{
	uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ULL ^ (uint64_t)v * 0xC2B2AE3D27D4EB4FULL;
	for (size_t j = 0; j < len; j++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		p[j] = (uint8_t)(x >> 56);
	}
}

/* Mixed sizes: mostly small, some of a few KiB, a few larger than a page. */
static size_t val_size(int i, int v)
{
	unsigned h = (unsigned)(i * 2654435761u + (unsigned)v * 40503u);
	if (i % 5000 == 4999)
		return 70 * KIB + h % (100 * KIB);
	if (i % 97 == 0)
		return 300 + h % 3000;
	return 1 + h % 200;
}

/* ---------------- operations and the driver ---------------- */

enum { T_UPSERT, T_READ, T_DELETE, T_INCR, T_APPEND, T_PREFETCH2 };

typedef struct top {
	int kind;
	model *m;
	int i, j;                    /* key(s): j is the second key of T_PREFETCH2 */
	const uint8_t *val;          /* T_UPSERT: the bytes to write (owned by the caller) */
	size_t len;
	int64_t expire_ms;           /* T_UPSERT: an absolute expiry, 0 for none */
	uint64_t delta;              /* T_INCR */
	uint8_t suffix[16];          /* T_APPEND */
	size_t slen;
	/* results */
	int rc;
	bool matched;                /* T_READ: the value equals the model's */
	int reads_seen;              /* read callbacks */
	/* driver state */
	bool parked;
	int ready;                   /* ready callbacks since parked */
	int waves;                   /* times it went pending */
	int runs;
} top;

typedef struct tsess {
	hlog *l;
	hlog_session *s;
	int fd;
	uint64_t spurious;           /* ready callbacks for an op that was not parked */
	uint64_t double_ready;       /* a second ready callback before the re-run */
	uint64_t waves;
	uint64_t polls;
} tsess;

static void tier_ready_cb(void *cb_arg, void *op_ctx)
{
	tsess *ts = cb_arg;
	top *o = op_ctx;
	if (!o || !o->parked) {
		ts->spurious++;
		return;
	}
	if (o->ready++)
		ts->double_ready++;
}

static void tsess_open(tsess *ts, hlog *l)
{
	memset(ts, 0, sizeof(*ts));
	ts->l = l;
	ts->s = store_session_open(l, tier_ready_cb, ts, 1000000, &ts->fd);
}

static void tsess_close(tsess *ts)
{
	hlog_session_close(ts->s);
	ts->s = NULL;
}

static void read_check_fn(void *ctx, const hlog_value *v)
{
	top *o = ctx;
	const mkey *mk = &o->m->keys[o->i];
	o->reads_seen++;
	o->matched = mk->alive && v->len == mk->len && memcmp(v->ptr, mk->bytes, mk->len) == 0;
}

static int append_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	const top *o = ctx;
	out->action = HLOG_RMW_WRITE;
	out->new_len = (old ? old->len : 0) + o->slen;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void append_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	const top *o = ctx;
	size_t olen = old ? old->len : 0;
	if (old && !in_place)
		memcpy(dst, old->ptr, olen);
	memcpy(dst + olen, o->suffix, o->slen);
}

static const hlog_rmw_ops append_ops = { append_plan, append_fill };

/* Run o once (the session is protected). Returns the store's result. */
static int top_run(tsess *ts, top *o)
{
	test_key t;
	model_key(o->m, o->i, &t);
	hlog_session_set_op(ts->s, o);
	o->runs++;
	switch (o->kind) {
	case T_UPSERT:
		return hlog_upsert(ts->s, &t.k, o->val, o->len, o->expire_ms ? o->expire_ms : HLOG_NO_EXPIRY);
	case T_READ:
		o->matched = false;
		o->reads_seen = 0;
		return hlog_read(ts->s, &t.k, read_check_fn, o);
	case T_DELETE:
		return hlog_delete(ts->s, &t.k);
	case T_INCR:
		return incr_by(ts->s, &t.k, o->delta, HLOG_NO_EXPIRY);
	case T_APPEND:
		return hlog_rmw(ts->s, &t.k, &append_ops, o);
	default: {   /* T_PREFETCH2: a two-key command that prefetches both keys first */
		test_key t2;
		model_key(o->m, o->j, &t2);
		int a = hlog_prefetch(ts->s, &t.k);
		int b = hlog_prefetch(ts->s, &t2.k);
		if (a < 0)
			return a;
		if (b < 0)
			return b;
		if (a == HLOG_PENDING || b == HLOG_PENDING)
			return HLOG_PENDING;
		o->matched = false;
		o->reads_seen = 0;
		int rc = hlog_read(ts->s, &t.k, read_check_fn, o);
		if (rc == HLOG_PENDING)
			return rc;   /* both were fetched: must not happen (checked by the test) */
		bool first = o->matched || (rc == HLOG_NOTFOUND && !o->m->keys[o->i].alive);
		int save = o->i;
		o->i = o->j;
		rc = hlog_read(ts->s, &t2.k, read_check_fn, o);
		bool second = o->matched || (rc == HLOG_NOTFOUND && !o->m->keys[o->j].alive);
		o->i = save;
		o->matched = first && second;
		return rc == HLOG_PENDING ? rc : HLOG_OK;
	}
	}
}

/* Run a batch of operations to completion the way the server does. */
static void tier_drive(tsess *ts, top *ops, int n)
{
	int parked = 0;
	hlog_session_protect(ts->s);
	for (int k = 0; k < n; k++) {
		top *o = &ops[k];
		o->rc = top_run(ts, o);
		if (o->rc == HLOG_PENDING) {
			o->parked = true;
			o->waves++;
			ts->waves++;
			parked++;
		} else {
			hlog_session_release(ts->s, o);
		}
	}
	/* The server polls once per pass: that submits what the batch queued (reads, page writes). */
	hlog_session_poll(ts->s);
	uint64_t last_progress = spw_mono_ns();
	while (parked > 0) {
		ts->polls++;
		hlog_session_poll(ts->s);   /* refreshes the epoch: we hold nothing here */
		bool progress = false;
		for (int k = 0; k < n; k++) {
			top *o = &ops[k];
			if (!o->parked || !o->ready)
				continue;
			o->ready = 0;
			progress = true;
			o->rc = top_run(ts, o);
			if (o->rc == HLOG_PENDING) {
				o->waves++;
				ts->waves++;
			} else {
				o->parked = false;
				parked--;
				hlog_session_release(ts->s, o);
			}
		}
		if (progress) {
			last_progress = spw_mono_ns();
			continue;
		}
		if (spw_mono_ns() - last_progress >= (uint64_t)TIER_STALL_MS * 1000000ULL) {
			hlog_info i = info_of(ts->l);
			fprintf(stderr, "stalled: %d parked, inflight %u; begin %llu head %llu safe_ro %llu ro %llu "
			        "flushed %llu tail %llu error %d\n", parked, hlog_session_inflight(ts->s),
			        (unsigned long long)i.begin, (unsigned long long)i.head,
			        (unsigned long long)i.safe_read_only, (unsigned long long)i.read_only,
			        (unsigned long long)i.flushed_until, (unsigned long long)i.tail, i.store_error);
			fail();
		}
		/* Sleep as a worker does: unprotected, on the fd while IO is in flight, else a tick. */
		hlog_session_unprotect(ts->s);
		store_fd_wait(ts->fd, hlog_session_inflight(ts->s) > 0 ? 50 : 1);
		hlog_session_protect(ts->s);
	}
	hlog_session_unprotect(ts->s);
}

/* ---------------- model-checked phases ---------------- */

typedef void (*top_prep_fn)(top *o, model *m, int i, void *arg);
typedef void (*top_check_fn)(top *o, model *m, void *arg);

/* ops[] for the keys from, from + stride, ... below to, at most TIER_BATCH of them. How many. */
static int tier_batch_prep(top *ops, model *m, int from, int to, int stride, top_prep_fn prep, void *arg)
{
	int n = 0;
	for (int i = from; i < to && n < TIER_BATCH; i += stride, n++) {
		memset(&ops[n], 0, sizeof(ops[n]));
		prep(&ops[n], m, i, arg);
	}
	return n;
}

/* Operations of one kind on keys [from, to) with stride, run in batches of TIER_BATCH, each result
 * checked against the model. */
static void tier_phase(tsess *ts, model *m, int from, int to, int stride, top_prep_fn prep,
                       top_check_fn check, void *arg)
{
	top ops[TIER_BATCH];
	for (int i = from; i < to; i += TIER_BATCH * stride) {
		int n = tier_batch_prep(ops, m, i, to, stride, prep, arg);
		tier_drive(ts, ops, n);
		for (int k = 0; k < n; k++)
			check(&ops[k], m, arg);
	}
}

static void top_init(top *o, int kind, model *m, int i)
{
	o->kind = kind;
	o->m = m;
	o->i = i;
}

/* Upserts: each op owns its bytes until checked; version in arg. */
static void prep_upsert(top *o, model *m, int i, void *arg)
{
	int v = *(int *)arg;
	top_init(o, T_UPSERT, m, i);
	o->len = val_size(i, v);
	uint8_t *b = malloc(o->len ? o->len : 1);
	assert_non_null(b);
	val_fill(b, o->len, i, v);
	o->val = b;
}

static void check_upsert(top *o, model *m, void *arg)
{
	(void)arg;
	assert_int_equal(o->rc, HLOG_OK);
	mkey *mk = &m->keys[o->i];
	free(mk->bytes);
	mk->bytes = (uint8_t *)o->val;
	mk->len = (uint32_t)o->len;
	mk->alive = true;
}

static void prep_read(top *o, model *m, int i, void *arg)
{
	(void)arg;
	top_init(o, T_READ, m, i);
}

static void check_read(top *o, model *m, void *arg)
{
	(void)arg;
	if (m->keys[o->i].alive) {
		if (o->rc != HLOG_OK || !o->matched)
			fprintf(stderr, "key %s:%d: rc %d matched %d\n", m->prefix, o->i, o->rc, o->matched);
		assert_int_equal(o->rc, HLOG_OK);
		assert_true(o->matched);
		assert_int_equal(o->reads_seen, 1);
	} else {
		assert_int_equal(o->rc, HLOG_NOTFOUND);
		assert_int_equal(o->reads_seen, 0);
	}
}

static void prep_delete(top *o, model *m, int i, void *arg)
{
	(void)arg;
	top_init(o, T_DELETE, m, i);
}

static void check_delete(top *o, model *m, void *arg)
{
	(void)arg;
	mkey *mk = &m->keys[o->i];
	assert_int_equal(o->rc, mk->alive ? HLOG_OK : HLOG_NOTFOUND);
	mk->alive = false;
}

/* Increments by *(uint64_t *)arg, or by i + 1 with arg NULL. */
static void prep_incr(top *o, model *m, int i, void *arg)
{
	top_init(o, T_INCR, m, i);
	o->delta = arg ? *(const uint64_t *)arg : (uint64_t)i + 1;
}

/* The model's counter: an 8-byte value is a counter, anything else counts as 0 (incr_plan). */
static void check_incr(top *o, model *m, void *arg)
{
	(void)arg;
	assert_int_equal(o->rc, HLOG_OK);
	mkey *mk = &m->keys[o->i];
	uint64_t cur = 0;
	if (mk->alive && mk->len == 8)
		memcpy(&cur, mk->bytes, 8);
	cur += o->delta;
	free(mk->bytes);
	mk->bytes = malloc(8);
	assert_non_null(mk->bytes);
	memcpy(mk->bytes, &cur, 8);
	mk->len = 8;
	mk->alive = true;
}

static void prep_append(top *o, model *m, int i, void *arg)
{
	(void)arg;
	top_init(o, T_APPEND, m, i);
	o->slen = 1 + (size_t)i % 15;
	for (size_t j = 0; j < o->slen; j++)
		o->suffix[j] = (uint8_t)('a' + (i + (int)j) % 26);
}

static void check_append(top *o, model *m, void *arg)
{
	(void)arg;
	assert_int_equal(o->rc, HLOG_OK);
	mkey *mk = &m->keys[o->i];
	size_t olen = mk->alive ? mk->len : 0;
	uint8_t *b = malloc(olen + o->slen);
	assert_non_null(b);
	if (olen)
		memcpy(b, mk->bytes, olen);
	memcpy(b + olen, o->suffix, o->slen);
	free(mk->bytes);
	mk->bytes = b;
	mk->len = (uint32_t)(olen + o->slen);
	mk->alive = true;
}

/* For operations whose results the model does not follow (it is checked later as a whole). */
static void check_ok(top *o, model *m, void *arg)
{
	(void)m;
	(void)arg;
	assert_int_equal(o->rc, HLOG_OK);
}

/* Upsert key i of m with len bytes of version v, run to completion and kept by the model. */
static void tier_upsert_sized(tsess *ts, model *m, int i, size_t len, int v)
{
	top o = { .kind = T_UPSERT, .m = m, .i = i, .len = len };
	uint8_t *b = malloc(len);
	assert_non_null(b);
	val_fill(b, len, i, v);
	o.val = b;
	tier_drive(ts, &o, 1);
	check_upsert(&o, m, NULL);
}

/* Poll the protected session until the parked o's ready callback came. */
static void tier_wait_ready(tsess *ts, top *o)
{
	while (!o->ready) {
		hlog_session_poll(ts->s);
		usleep(50);
	}
}

/* Run the upsert o on keys 0, 1, ... of its model (protected) until one is not HLOG_OK: a page
 * turn found no free frame. That one is released too when release_last, else it stays parked on
 * its op_ctx. Its result. */
static int tier_fill(tsess *ts, top *o, bool release_last)
{
	for (o->i = 0; o->i < o->m->n; o->i++) {
		o->rc = top_run(ts, o);
		if (o->rc != HLOG_OK) {
			if (release_last)
				hlog_session_release(ts->s, o);
			break;
		}
		hlog_session_release(ts->s, o);
		hlog_session_refresh(ts->s);
	}
	return o->rc;
}

static void model_load(tsess *ts, model *m, int version)
{
	tier_phase(ts, m, 0, m->n, 1, prep_upsert, check_upsert, &version);
}

static void model_read_all(tsess *ts, model *m)
{
	tier_phase(ts, m, 0, m->n, 1, prep_read, check_read, NULL);
}

/* SCAN over the whole index sees every live key of the model once (and nothing else). */
typedef struct scan_tally {
	model *m;
	int *seen;
	int other;
	int bad;
} scan_tally;

static void scan_tally_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	scan_tally *st = ctx;
	int i;
	if (!test_key_parse(key, klen, st->m->prefix, &i) || i < 0 || i >= st->m->n) {
		st->other++;
		return;
	}
	st->seen[i]++;
	const mkey *mk = &st->m->keys[i];
	if (!mk->alive || v->len != mk->len || memcmp(v->ptr, mk->bytes, mk->len) != 0)
		st->bad++;
}

/* others: keys of other models the scan must see too. */
static void model_scan_check(tsess *ts, model *m, int others)
{
	scan_tally st = { m, calloc((size_t)m->n, sizeof(int)), 0, 0 };
	assert_non_null(st.seen);
	hlog_session_protect(ts->s);
	assert_int_equal(scan_whole(ts->s, 256, scan_tally_fn, &st), 0);
	hlog_session_unprotect(ts->s);
	assert_int_equal(st.other, others);
	assert_int_equal(st.bad, 0);
	for (int i = 0; i < m->n; i++)
		assert_int_equal(st.seen[i], m->keys[i].alive ? 1 : 0);
	free(st.seen);
}

static void print_info(const char *what, hlog *l)
{
	hlog_info i = info_of(l);
	fprintf(stderr,
	        "  %s: tail %llu head %llu flushed %llu keys %llu | flush writes %llu (%llu KiB) waits %llu"
	        " | pending reads %llu found %llu notfound %llu errors %llu hits %llu | device reads %llu"
	        " (%llu KiB) second %llu chain %llu scan %llu | reads/pending %.2f | submits %llu ios %llu"
	        " merged %llu dedup %llu qdepth mean %.1f max %llu\n",
	        what, (unsigned long long)i.tail, (unsigned long long)i.head,
	        (unsigned long long)i.flushed_until, (unsigned long long)i.keys,
	        (unsigned long long)i.flush_writes, (unsigned long long)i.flush_bytes / 1024,
	        (unsigned long long)i.flush_waits, (unsigned long long)i.pending_reads,
	        (unsigned long long)i.pending_found, (unsigned long long)i.pending_notfound,
	        (unsigned long long)i.pending_errors, (unsigned long long)i.pending_hits,
	        (unsigned long long)i.device_reads, (unsigned long long)i.device_read_bytes / 1024,
	        (unsigned long long)i.second_reads, (unsigned long long)i.chain_reads,
	        (unsigned long long)i.scan_reads,
	        i.pending_reads ? (double)(i.device_reads + i.merged_reads + i.dedup_hits - i.scan_reads) /
	                          (double)i.pending_reads : 0.0,
	        (unsigned long long)i.device_submits, (unsigned long long)i.ios_submitted,
	        (unsigned long long)i.merged_reads, (unsigned long long)i.dedup_hits,
	        i.device_submits ? (double)i.queue_depth_sum / (double)i.device_submits : 0.0,
	        (unsigned long long)i.queue_depth_max);
}

#endif
