/*
 * tier_suite.h - the storage tier's tests, written once and included once per device backend (as
 * tests/device/conformance.h). The including file defines:
 *
 *   TIER_TYPE          the --device-type string: "uring" (falls back to libaio or posix when the
 *                      kernel refuses), "localmemory", "fault:posix"
 *   TIER_BIG_VALUE     (optional) bytes of the huge-value test's values, default 64 MB
 *   TIER_EXTRA_TESTS   (optional) more cmocka_unit_test(...) entries
 *
 * Every test opens a fresh device in a fresh directory under /tmp (mkdtemp) with small pages, so
 * that a few thousand keys are many times the memory region, and removes it afterwards.
 *
 * The driver (tier_drive) does what the server does with its clients: run a batch of operations,
 * park those that return HLOG_PENDING, poll the session (sleeping on its fd, protected only while
 * it runs operations), re-run each parked operation when its ready callback came, and release its
 * op_ctx once it completed. Every operation is checked against a model of the store.
 */
#ifndef SPW_TEST_TIER_SUITE_H
#define SPW_TEST_TIER_SUITE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "log_test.h"

#ifndef TIER_BIG_VALUE
#define TIER_BIG_VALUE (64u << 20)
#endif
#ifndef TIER_EXTRA_TESTS
#define TIER_EXTRA_TESTS
#endif

#define KIB 1024ULL
#define MIB (1024ULL * 1024ULL)
#define TIER_PAGE (64 * KIB)
#define TIER_MAX_VAL (200 * KIB)
#define TIER_BATCH 64
#define TIER_STALL_MS 3000      /* a driver loop without progress for this long fails the test */

/* ---------------- the device and the store ---------------- */

typedef struct tenv {
	char dir[64];
	dev *d;
	hlog *l;
} tenv;

static int tier_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* Open the device and a store of pages pages of page bytes over it. false (and a message) when the
 * device cannot be opened here. */
static void tenv_open(tenv *e, uint64_t pages, uint64_t page, uint64_t index_bytes, int mutable_percent)
{
	char err[256] = "";
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "/tmp/spw-tier.XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	dev_config dc;
	dev_config_init(&dc);
	dc.type = TIER_TYPE;
	dc.dir = e->dir;
	dc.prefix = "hlog.";
	dc.segment_bytes = 1 * MIB;
	dc.allow_fallback = true;
	int rc = dev_open(&dc, &e->d, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "dev_open(%s): %s: %s\n", TIER_TYPE, spw_strerror(rc), err);
	assert_int_equal(rc, 0);
	hlog_config c = log_test_config(pages * page, page, mutable_percent);
	c.index_bytes = index_bytes;
	c.dev = e->d;
	c.initial_io_bytes = 128;
	assert_int_equal(hlog_open(&e->l, &c), 0);
}

static void tenv_close(tenv *e)
{
	hlog_close(e->l);
	dev_close(e->d);
	nftw(e->dir, tier_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* The backend really opened (uring may have fallen back), for the SKIP check. */
static bool tier_backend_available(void)
{
	tenv e;
	char err[256] = "";
	snprintf(e.dir, sizeof(e.dir), "/tmp/spw-tier.XXXXXX");
	if (!mkdtemp(e.dir))
		return false;
	dev_config dc;
	dev_config_init(&dc);
	dc.type = TIER_TYPE;
	dc.dir = e.dir;
	dc.prefix = "hlog.";
	dc.segment_bytes = 1 * MIB;
	dc.allow_fallback = true;
	int rc = dev_open(&dc, &e.d, err, sizeof(err));
	if (rc == 0) {
		fprintf(stderr, "tier suite: --device-type %s opened as %s (sector %u bytes)\n", TIER_TYPE,
		        e.d->name, e.d->sector_bytes);
		dev_close(e.d);
	} else {
		fprintf(stderr, "tier suite: --device-type %s refused: %s: %s\n", TIER_TYPE, spw_strerror(rc), err);
	}
	nftw(e.dir, tier_rm, 16, FTW_DEPTH | FTW_PHYS);
	return rc == 0;
}

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
	assert_int_equal(hlog_session_open(l, &ts->s), 0);
	assert_int_equal(hlog_session_attach(ts->s, tier_ready_cb, ts), 0);
	ts->fd = hlog_session_fd(ts->s);
	assert_true(ts->fd >= 0);
	hlog_session_set_now(ts->s, 1000000);
}

static void tsess_close(tsess *ts)
{
	hlog_session_close(ts->s);
}

static void read_check_fn(void *ctx, const hlog_value *v)
{
	top *o = ctx;
	const mkey *mk = &o->m->keys[o->i];
	o->reads_seen++;
	o->matched = mk->alive && v->len == mk->len && memcmp(v->ptr, mk->bytes, mk->len) == 0;
}

typedef struct append_ctx {
	const top *o;
} append_ctx;

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
		return hlog_upsert(ts->s, &t.k, o->val, o->len, HLOG_NO_EXPIRY);
	case T_READ:
		o->matched = false;
		o->reads_seen = 0;
		return hlog_read(ts->s, &t.k, read_check_fn, o);
	case T_DELETE:
		return hlog_delete(ts->s, &t.k);
	case T_INCR: {
		incr_ctx c = { .delta = o->delta, .expire_ms = HLOG_NO_EXPIRY };
		return hlog_rmw(ts->s, &t.k, &incr_ops, &c);
	}
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
			hlog_info i;
			hlog_info_get(ts->l, &i);
			fprintf(stderr, "stalled: %d parked, inflight %u; begin %llu head %llu safe_ro %llu ro %llu "
			        "flushed %llu tail %llu error %d\n", parked, hlog_session_inflight(ts->s),
			        (unsigned long long)i.begin, (unsigned long long)i.head,
			        (unsigned long long)i.safe_read_only, (unsigned long long)i.read_only,
			        (unsigned long long)i.flushed_until, (unsigned long long)i.tail, i.store_error);
			fail();
		}
		/* Sleep as a worker does: unprotected, on the fd while IO is in flight, else a tick. */
		hlog_session_unprotect(ts->s);
		if (hlog_session_inflight(ts->s) > 0) {
			struct pollfd pfd = { .fd = ts->fd, .events = POLLIN };
			if (poll(&pfd, 1, 50) > 0) {
				uint64_t v;
				ssize_t r = read(ts->fd, &v, sizeof(v));
				(void)r;
			}
		} else {
			struct pollfd pfd = { .fd = ts->fd, .events = POLLIN };
			if (poll(&pfd, 1, 1) > 0) {
				uint64_t v;
				ssize_t r = read(ts->fd, &v, sizeof(v));
				(void)r;
			}
		}
		hlog_session_protect(ts->s);
	}
	hlog_session_unprotect(ts->s);
}

/* ---------------- model-checked phases ---------------- */

/* Batch helper: ops[] for keys [from, to) with stride, of one kind, checked against the model. */
typedef void (*top_prep_fn)(top *o, model *m, int i, void *arg);
typedef void (*top_check_fn)(top *o, model *m, void *arg);

static void tier_phase(tsess *ts, model *m, int from, int to, int stride, top_prep_fn prep,
                       top_check_fn check, void *arg)
{
	top ops[TIER_BATCH];
	int n = 0;
	for (int i = from; i < to; i += stride) {
		memset(&ops[n], 0, sizeof(ops[n]));
		prep(&ops[n], m, i, arg);
		if (++n == TIER_BATCH || i + stride >= to) {
			tier_drive(ts, ops, n);
			for (int k = 0; k < n; k++)
				check(&ops[k], m, arg);
			n = 0;
		}
	}
	if (n) {
		tier_drive(ts, ops, n);
		for (int k = 0; k < n; k++)
			check(&ops[k], m, arg);
	}
}

/* Upserts: each op owns its bytes until checked; version in arg. */
static void prep_upsert(top *o, model *m, int i, void *arg)
{
	int v = *(int *)arg;
	o->kind = T_UPSERT;
	o->m = m;
	o->i = i;
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
	o->kind = T_READ;
	o->m = m;
	o->i = i;
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
	o->kind = T_DELETE;
	o->m = m;
	o->i = i;
}

static void check_delete(top *o, model *m, void *arg)
{
	(void)arg;
	mkey *mk = &m->keys[o->i];
	assert_int_equal(o->rc, mk->alive ? HLOG_OK : HLOG_NOTFOUND);
	mk->alive = false;
}

static void prep_incr(top *o, model *m, int i, void *arg)
{
	(void)arg;
	o->kind = T_INCR;
	o->m = m;
	o->i = i;
	o->delta = (uint64_t)i + 1;
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
	o->kind = T_APPEND;
	o->m = m;
	o->i = i;
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

static void model_load(tsess *ts, model *m, int version)
{
	tier_phase(ts, m, 0, m->n, 1, prep_upsert, check_upsert, &version);
}

static void model_read_all(tsess *ts, model *m)
{
	tier_phase(ts, m, 0, m->n, 1, prep_read, check_read, NULL);
}

static hlog_info tier_info(hlog *l)
{
	hlog_info i;
	hlog_info_get(l, &i);
	return i;
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
	char buf[64];
	int i;
	size_t plen = strlen(st->m->prefix);
	if (klen >= sizeof(buf) || klen <= plen + 1 || memcmp(key, st->m->prefix, plen) != 0) {
		st->other++;
		return;
	}
	memcpy(buf, key, klen);
	buf[klen] = 0;
	if (sscanf(buf + plen + 1, "%d", &i) != 1 || i < 0 || i >= st->m->n) {
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
	uint64_t cursor = 0;
	hlog_session_protect(ts->s);
	do {
		cursor = hlog_scan(ts->s, cursor, 256, scan_tally_fn, &st);
		assert_int_equal(hlog_scan_error(ts->s), 0);
		hlog_session_refresh(ts->s);
	} while (cursor != 0);
	hlog_session_unprotect(ts->s);
	assert_int_equal(st.other, others);
	assert_int_equal(st.bad, 0);
	for (int i = 0; i < m->n; i++)
		assert_int_equal(st.seen[i], m->keys[i].alive ? 1 : 0);
	free(st.seen);
}

static void print_info(const char *what, hlog *l)
{
	hlog_info i = tier_info(l);
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

/* ---------------- tests ---------------- */

/* 8 x 64 KiB pages of memory, 50k keys of mixed sizes (some larger than a page): load, read all,
 * overwrite a third, delete a sixth, increment counters and append to cold keys, read all and scan
 * all again, each step checked against the model. */
static void test_tier_store_larger_than_memory_matches_a_model(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 50000 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "big");

	model_load(&ts, &m, 1);
	hlog_info i = tier_info(e.l);
	assert_true(i.tail > 10 * 8 * TIER_PAGE);        /* far larger than memory */
	assert_true(i.head > i.begin);                   /* evicted */
	assert_true(i.head <= i.flushed_until);
	assert_true(i.flushed_until <= i.safe_read_only);
	assert_true(i.tail - i.head <= 8 * TIER_PAGE);   /* Head follows the tail */
	assert_true(i.flush_writes > 0);
	assert_int_equal(i.keys, (uint64_t)N);
	assert_int_equal(i.store_error, 0);
	print_info("loaded", e.l);

	/* Record reads asked for: device requests plus those merged into a neighbour's or shared. */
	uint64_t reads0 = i.device_reads + i.merged_reads + i.dedup_hits, bytes0 = i.device_read_bytes;
	model_read_all(&ts, &m);
	i = tier_info(e.l);
	assert_true(i.device_reads + i.merged_reads + i.dedup_hits > reads0 + N / 2);   /* most keys came from the device */
	/* Merged reads share sectors, so only the records themselves (>= 24 bytes each) are sure. */
	assert_true(i.device_read_bytes > bytes0 + (uint64_t)N / 2 * 24);
	assert_true(i.pending_found >= (uint64_t)N / 2);
	assert_true(i.second_reads > 0);                 /* values longer than the first read */
	print_info("read all", e.l);

	int v2 = 2;
	tier_phase(&ts, &m, 0, N, 3, prep_upsert, check_upsert, &v2);
	tier_phase(&ts, &m, 1, N, 6, prep_delete, check_delete, NULL);
	/* Counters on every tenth key (cold: written long ago), appends on others. */
	tier_phase(&ts, &m, 7, N, 10, prep_incr, check_incr, NULL);
	tier_phase(&ts, &m, 7, N, 10, prep_incr, check_incr, NULL);
	tier_phase(&ts, &m, 3, N, 10, prep_append, check_append, NULL);
	assert_int_equal(hlog_key_count(e.l), model_live(&m));
	model_read_all(&ts, &m);
	model_scan_check(&ts, &m, 0);
	i = tier_info(e.l);
	print_info("after updates", e.l);
	assert_int_equal(i.keys, model_live(&m));
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(ts.spurious, 0);
	assert_int_equal(ts.double_ready, 0);

	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

/* Every key on one index entry: reads, deletes and RMWs walk the chain on the device. */
static void test_tier_keys_sharing_a_tag_are_told_apart_by_chain_walks_on_the_device(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 400 };
	tenv_open(&e, 8, TIER_PAGE, 4 * KIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "tag");
	m.shared_hash = true;
	model_load(&ts, &m, 1);
	/* Push the whole chain out of memory with unrelated keys. */
	model other;
	model_init(&other, 12000, "filler");
	model_load(&ts, &other, 1);
	assert_true(tier_info(e.l).head > 2 * 8 * TIER_PAGE);

	uint64_t chain0 = tier_info(e.l).chain_reads;
	tier_phase(&ts, &m, 0, N, 37, prep_read, check_read, NULL);
	assert_true(tier_info(e.l).chain_reads > chain0 + 100);
	tier_phase(&ts, &m, 0, N, 5, prep_delete, check_delete, NULL);
	tier_phase(&ts, &m, 1, N, 5, prep_incr, check_incr, NULL);
	tier_phase(&ts, &m, 2, N, 5, prep_append, check_append, NULL);
	model_load(&ts, &other, 2);   /* everything cold again */
	model_read_all(&ts, &m);
	model_scan_check(&ts, &m, (int)model_live(&other));
	assert_int_equal(hlog_key_count(e.l), model_live(&m) + model_live(&other));
	hlog_info i = tier_info(e.l);
	assert_int_equal(i.pending_errors, 0);
	print_info("chains", e.l);
	assert_int_equal(ts.spurious, 0);

	tsess_close(&ts);
	model_free(&other);
	model_free(&m);
	tenv_close(&e);
}

/* An op that prefetches two cold keys gets one ready callback, after both reads, and its re-run
 * finds both in the fetch cache. */
static void test_tier_ready_callback_runs_exactly_once_per_pending_op(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 12000 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "once");
	model_load(&ts, &m, 1);

	top ops[TIER_BATCH];
	for (int k = 0; k < TIER_BATCH; k++) {
		memset(&ops[k], 0, sizeof(ops[k]));
		ops[k].kind = T_PREFETCH2;
		ops[k].m = &m;
		ops[k].i = k * 7;
		ops[k].j = k * 7 + 1;
	}
	uint64_t hits0 = tier_info(e.l).pending_hits;
	tier_drive(&ts, ops, TIER_BATCH);
	for (int k = 0; k < TIER_BATCH; k++) {
		assert_int_equal(ops[k].rc, HLOG_OK);
		assert_true(ops[k].matched);
		assert_int_equal(ops[k].waves, 1);   /* one wave: both reads, one ready, one re-run */
		assert_int_equal(ops[k].runs, 2);
	}
	assert_true(tier_info(e.l).pending_hits >= hits0 + 2 * TIER_BATCH);
	assert_int_equal(ts.spurious, 0);
	assert_int_equal(ts.double_ready, 0);

	/* Released ops: reads still in flight complete without a callback. */
	test_key t;
	model_key(&m, 11, &t);
	hlog_session_protect(ts.s);
	hlog_session_set_op(ts.s, &ops[0]);
	ops[0].parked = false;
	read_buf b = { .calls = 0 };
	assert_int_equal(hlog_read(ts.s, &t.k, read_copy_fn, &b), HLOG_PENDING);
	assert_int_equal(hlog_read(ts.s, &t.k, read_copy_fn, &b), HLOG_PENDING);   /* still reading */
	hlog_session_release(ts.s, &ops[0]);
	for (int k = 0; k < 1000 && hlog_session_inflight(ts.s); k++) {
		hlog_session_poll(ts.s);
		usleep(100);
	}
	hlog_session_poll(ts.s);
	hlog_session_unprotect(ts.s);
	assert_int_equal(hlog_session_inflight(ts.s), 0);
	assert_int_equal(ts.spurious, 0);

	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

/* After the IO, the re-run starts from the index: a version written meanwhile wins. */
static void test_tier_a_version_written_while_the_read_was_pending_wins(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 12000 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "race");
	model_load(&ts, &m, 1);

	/* A read goes pending; another client overwrites the key (its blind upsert reads the old
	 * record too, for the key count) before the read runs again. */
	top o = { .kind = T_READ, .m = &m, .i = 5 };
	hlog_session_protect(ts.s);
	assert_int_equal(top_run(&ts, &o), HLOG_PENDING);
	o.parked = true;
	hlog_session_unprotect(ts.s);
	top up = { .kind = T_UPSERT, .m = &m, .i = 5, .val = (const uint8_t *)strdup("fresh"), .len = 5 };
	tier_drive(&ts, &up, 1);
	check_upsert(&up, &m, NULL);
	hlog_session_protect(ts.s);
	while (!o.ready) {
		hlog_session_poll(ts.s);
		usleep(50);
	}
	assert_int_equal(top_run(&ts, &o), HLOG_OK);
	assert_true(o.matched);
	hlog_session_release(ts.s, &o);
	/* The same for an RMW: it plans from the newer in-memory version, not the fetched one. */
	top inc = { .kind = T_INCR, .m = &m, .i = 9, .delta = 5 };
	assert_int_equal(top_run(&ts, &inc), HLOG_PENDING);
	inc.parked = true;
	hlog_session_unprotect(ts.s);
	static const uint64_t ten = 10;
	up = (top){ .kind = T_UPSERT, .m = &m, .i = 9, .val = malloc(8), .len = 8 };
	memcpy((uint8_t *)up.val, &ten, 8);
	tier_drive(&ts, &up, 1);
	check_upsert(&up, &m, NULL);
	hlog_session_protect(ts.s);
	while (!inc.ready) {
		hlog_session_poll(ts.s);
		usleep(50);
	}
	assert_int_equal(top_run(&ts, &inc), HLOG_OK);
	hlog_session_release(ts.s, &inc);
	check_incr(&inc, &m, NULL);
	test_key t;
	model_key(&m, 9, &t);
	assert_int_equal(read_counter(ts.s, &t.k), 15);
	hlog_session_unprotect(ts.s);
	assert_int_equal(ts.spurious, 0);

	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

/* Tombstones and expired records are flushed and evicted like any record: neither brings the old
 * value back from the device. */
static void test_tier_deleted_and_expired_keys_never_come_back_from_the_device(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m, other;
	enum { N = 2000 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "gone");
	model_init(&other, 12000, "filler");
	model_load(&ts, &m, 1);
	tier_phase(&ts, &m, 0, N, 2, prep_delete, check_delete, NULL);
	/* Expiring keys: a TTL in the past of the clock the next reads use. */
	hlog_session_protect(ts.s);
	for (int i = 1; i < N; i += 4) {
		test_key t;
		model_key(&m, i, &t);
		assert_int_equal(hlog_upsert(ts.s, &t.k, "ttl", 3, 2000000), HLOG_OK);
		m.keys[i].alive = false;
	}
	hlog_session_unprotect(ts.s);
	model_load(&ts, &other, 1);   /* push everything to the device */
	assert_true(tier_info(e.l).head > 3 * 8 * TIER_PAGE);
	hlog_session_set_now(ts.s, 3000000);
	model_read_all(&ts, &m);
	model_scan_check(&ts, &m, (int)model_live(&other));
	/* Lazy expiry of cold keys wrote tombstones: the count drops as in Redis. */
	assert_int_equal(hlog_key_count(e.l), model_live(&m) + model_live(&other));
	model_load(&ts, &other, 2);
	model_read_all(&ts, &m);
	assert_int_equal(hlog_key_count(e.l), model_live(&m) + model_live(&other));
	assert_int_equal(tier_info(e.l).pending_errors, 0);

	tsess_close(&ts);
	model_free(&other);
	model_free(&m);
	tenv_close(&e);
}

/* A value of TIER_BIG_VALUE bytes with 64 KiB pages: written, evicted by another one, read back
 * from the device, appended to, read again. */
static void test_tier_huge_values_span_pages_and_come_back_from_the_device(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	uint64_t pages = (TIER_BIG_VALUE + 16 * MIB) / TIER_PAGE;
	tenv_open(&e, pages, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	assert_true(hlog_max_record_payload(e.l) >= TIER_BIG_VALUE);
	model_init(&m, 3, "huge");
	int v = 1;
	for (int i = 0; i < 3; i++) {
		top o = { 0 };
		o.kind = T_UPSERT;
		o.m = &m;
		o.i = i;
		o.len = TIER_BIG_VALUE - (size_t)i * 4096 - 3;
		uint8_t *b = malloc(o.len);
		assert_non_null(b);
		val_fill(b, o.len, i, v);
		o.val = b;
		tier_drive(&ts, &o, 1);
		check_upsert(&o, &m, NULL);
	}
	hlog_info i = tier_info(e.l);
	assert_true(i.head > TIER_BIG_VALUE);   /* the first ones are on the device only */
	model_read_all(&ts, &m);
	tier_phase(&ts, &m, 0, 3, 1, prep_append, check_append, NULL);
	model_read_all(&ts, &m);
	/* Too big for the memory region: refused, never cut. */
	hlog_key k;
	hlog_key_init(&k, "toolarge", 8);
	hlog_session_protect(ts.s);
	assert_int_equal(hlog_upsert(ts.s, &k, m.keys[0].bytes, hlog_max_record_payload(e.l) - 7, 5000000),
	                 SPW_E_TOO_BIG);   /* checked before a byte of the value is read */
	hlog_session_unprotect(ts.s);
	print_info("huge", e.l);
	assert_int_equal(tier_info(e.l).pending_errors, 0);

	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

/* Four threads, each with its own session and device queue, each running the larger-than-memory
 * workload on its own keys, plus counters all of them increment. Page writes claimed by one
 * session free frames another one waits for. */
#define TIER_THREADS 4
typedef struct mt_arg {
	hlog *l;
	int idx;
	_Atomic int *start;
	model m;
	model *counters;
	uint64_t spurious, waves;
} mt_arg;

static void *mt_worker(void *p)
{
	mt_arg *a = p;
	tsess ts;
	tsess_open(&ts, a->l);
	while (!atomic_load(a->start))
		;
	model_load(&ts, &a->m, 1);
	model_read_all(&ts, &a->m);
	int v2 = 2;
	tier_phase(&ts, &a->m, 0, a->m.n, 3, prep_upsert, check_upsert, &v2);
	tier_phase(&ts, &a->m, 1, a->m.n, 6, prep_delete, check_delete, NULL);
	tier_phase(&ts, &a->m, 3, a->m.n, 10, prep_append, check_append, NULL);
	model_read_all(&ts, &a->m);
	/* Shared counters: each thread increments each by idx + 1, 3 times, through the tier. */
	for (int r = 0; r < 3; r++) {
		top ops[TIER_BATCH];
		int n = a->counters->n;
		for (int base = 0; base < n; base += TIER_BATCH) {
			int k = 0;
			for (int i = base; i < n && k < TIER_BATCH; i++, k++) {
				memset(&ops[k], 0, sizeof(ops[k]));
				ops[k].kind = T_INCR;
				ops[k].m = a->counters;
				ops[k].i = i;
				ops[k].delta = (uint64_t)a->idx + 1;
			}
			tier_drive(&ts, ops, k);
			for (int j = 0; j < k; j++)
				assert_int_equal(ops[j].rc, HLOG_OK);
		}
	}
	a->spurious = ts.spurious;
	a->waves = ts.waves;
	tsess_close(&ts);
	return NULL;
}

static void test_tier_concurrent_sessions_each_poll_their_own_queue(void **state)
{
	(void)state;
	tenv e;
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	pthread_t th[TIER_THREADS];
	mt_arg args[TIER_THREADS];
	_Atomic int start = 0;
	model counters;
	model_init(&counters, 500, "ctr");
	char prefix[TIER_THREADS][16];
	for (int t = 0; t < TIER_THREADS; t++) {
		memset(&args[t], 0, sizeof(args[t]));
		args[t].l = e.l;
		args[t].idx = t;
		args[t].start = &start;
		args[t].counters = &counters;
		snprintf(prefix[t], sizeof(prefix[t]), "t%d", t);
		model_init(&args[t].m, 8000, prefix[t]);
		assert_int_equal(pthread_create(&th[t], NULL, mt_worker, &args[t]), 0);
	}
	atomic_store(&start, 1);
	for (int t = 0; t < TIER_THREADS; t++)
		pthread_join(th[t], NULL);

	tsess ts;
	tsess_open(&ts, e.l);
	uint64_t live = 0;
	for (int t = 0; t < TIER_THREADS; t++) {
		model_read_all(&ts, &args[t].m);
		live += model_live(&args[t].m);
		assert_int_equal(args[t].spurious, 0);
	}
	/* Every counter was incremented by 1+2+3+4, three times. */
	for (int i = 0; i < counters.n; i++) {
		uint64_t want = 3 * (1 + 2 + 3 + 4);
		counters.keys[i].bytes = malloc(8);
		assert_non_null(counters.keys[i].bytes);
		memcpy(counters.keys[i].bytes, &want, 8);
		counters.keys[i].len = 8;
		counters.keys[i].alive = true;
	}
	model_read_all(&ts, &counters);
	assert_int_equal(hlog_key_count(e.l), live + (uint64_t)counters.n);
	hlog_info i = tier_info(e.l);
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(i.store_error, 0);
	assert_true(i.head > 8 * 8 * TIER_PAGE);
	print_info("4 threads", e.l);
	tsess_close(&ts);
	for (int t = 0; t < TIER_THREADS; t++)
		model_free(&args[t].m);
	model_free(&counters);
	tenv_close(&e);
}

/* FLUSHALL on a store that spilled: every key is gone, the store goes on, old records never come
 * back from the device. */
static void test_tier_flush_all_forgets_what_the_device_holds(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 6000 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "fa");
	model_load(&ts, &m, 1);
	hlog_session_protect(ts.s);
	assert_int_equal(hlog_flush_all(ts.s), HLOG_OK);
	hlog_session_unprotect(ts.s);
	for (int i = 0; i < N; i++)
		m.keys[i].alive = false;
	model_read_all(&ts, &m);
	assert_int_equal(hlog_key_count(e.l), 0);
	model_load(&ts, &m, 2);
	model_read_all(&ts, &m);
	assert_int_equal(hlog_key_count(e.l), (uint64_t)N);
	model_scan_check(&ts, &m, 0);
	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

/* A write that waits for a frame whose page write sits in ANOTHER session's queue sleeps on its
 * own fd with nothing of its own in flight, and is woken through that fd when the other session's
 * completion (and then the eviction) frees the frame: no tick is needed. */
typedef struct sig_arg {
	hlog *l;
	model *m;
	_Atomic int sleeping;        /* A waits on its fd with nothing in flight */
	_Atomic int done;
	int rc, woken, timeouts, sleeps;
} sig_arg;

static void *sig_waiter(void *p)
{
	sig_arg *a = p;
	tsess ts;
	tsess_open(&ts, a->l);
	top o = { .kind = T_UPSERT, .m = a->m };
	static uint8_t val[2000];
	memset(val, 'w', sizeof(val));
	hlog_session_protect(ts.s);
	/* Write until a page turn finds no frame: the pages to evict were claimed by the other
	 * session, which has not submitted their writes. */
	for (o.i = 0; o.i < a->m->n; o.i++) {
		o.val = val;
		o.len = sizeof(val);
		o.rc = top_run(&ts, &o);
		if (o.rc != HLOG_OK)
			break;
		hlog_session_release(ts.s, &o);
		hlog_session_refresh(ts.s);
	}
	a->rc = o.rc;
	while (a->rc == HLOG_PENDING) {
		o.parked = true;
		o.ready = 0;
		while (!o.ready) {
			hlog_session_poll(ts.s);
			if (o.ready)
				break;
			uint32_t inflight = hlog_session_inflight(ts.s);
			hlog_session_unprotect(ts.s);
			if (inflight == 0) {
				a->sleeps++;
				atomic_store(&a->sleeping, 1);
			}
			struct pollfd pfd = { .fd = ts.fd, .events = POLLIN };
			int n = poll(&pfd, 1, 10000);
			atomic_store(&a->sleeping, 0);
			if (n > 0) {
				uint64_t v;
				ssize_t r = read(ts.fd, &v, sizeof(v));
				(void)r;
				if (inflight == 0)
					a->woken++;
			} else if (inflight == 0) {
				a->timeouts++;
			}
			hlog_session_protect(ts.s);
		}
		a->rc = top_run(&ts, &o);
		if (a->rc != HLOG_PENDING)
			hlog_session_release(ts.s, &o);
	}
	hlog_session_unprotect(ts.s);
	atomic_store(&a->done, 1);
	tsess_close(&ts);
	return NULL;
}

static void test_tier_a_frame_wait_is_woken_through_the_waiting_sessions_fd(void **state)
{
	(void)state;
	tenv e;
	tsess b;
	model mb, ma;
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&b, e.l);
	model_init(&mb, 100000, "b");
	model_init(&ma, 100000, "a");
	/* B fills memory without ever polling: its page turns claim the page writes, which stay in its
	 * queue, unsubmitted, until one of its writes must wait for them. */
	static uint8_t val[2000];
	memset(val, 'b', sizeof(val));
	top o = { .kind = T_UPSERT, .m = &mb };
	hlog_session_protect(b.s);
	for (o.i = 0; o.i < mb.n; o.i++) {
		o.val = val;
		o.len = sizeof(val);
		o.rc = top_run(&b, &o);
		hlog_session_release(b.s, &o);
		if (o.rc != HLOG_OK)
			break;
		hlog_session_refresh(b.s);
	}
	assert_int_equal(o.rc, HLOG_PENDING);
	assert_true(hlog_session_inflight(b.s) > 0);   /* queued, never submitted */
	hlog_session_unprotect(b.s);

	sig_arg a = { .l = e.l, .m = &ma };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, sig_waiter, &a), 0);
	while (!atomic_load(&a.sleeping) && !atomic_load(&a.done))
		usleep(1000);
	/* B comes back to its loop: submits, reaps, and its refreshes let the eviction run. */
	while (!atomic_load(&a.done)) {
		hlog_session_protect(b.s);
		hlog_session_poll(b.s);
		hlog_session_unprotect(b.s);
		usleep(200);
	}
	pthread_join(th, NULL);
	assert_int_equal(a.rc, HLOG_OK);
	assert_true(a.sleeps > 0);
	assert_true(a.woken > 0);
	assert_int_equal(a.timeouts, 0);
	assert_true(tier_info(e.l).flush_waits > 0);
	tsess_close(&b);
	model_free(&ma);
	model_free(&mb);
	tenv_close(&e);
}

/* Spanning records back to back in a memory of 8 pages: a 5-page record right before a 4-page
 * one means the second turn must evict part of the first, which is written whole first, up to the
 * page the turn starts from (that page is closed). Everything reads back. */
static void test_tier_spanning_records_back_to_back_evict_each_other(void **state)
{
	(void)state;
	tenv e;
	tsess ts;
	model m;
	enum { N = 60 };
	tenv_open(&e, 8, TIER_PAGE, 1 * MIB, 90);
	tsess_open(&ts, e.l);
	model_init(&m, N, "span");
	for (int i = 0; i < N; i++) {
		top o = { .kind = T_UPSERT, .m = &m, .i = i };
		o.len = i % 3 == 0 ? 5 * TIER_PAGE - 1000 - (size_t)i : i % 3 == 1 ? 4 * TIER_PAGE - 3000 + (size_t)i : 100;
		uint8_t *b = malloc(o.len);
		assert_non_null(b);
		val_fill(b, o.len, i, 1);
		o.val = b;
		tier_drive(&ts, &o, 1);
		check_upsert(&o, &m, NULL);
	}
	model_read_all(&ts, &m);
	hlog_info i = tier_info(e.l);
	assert_true(i.head > 20 * TIER_PAGE);
	assert_int_equal(i.pending_errors, 0);
	assert_int_equal(hlog_key_count(e.l), (uint64_t)N);
	tsess_close(&ts);
	model_free(&m);
	tenv_close(&e);
}

#define TIER_TESTS \
	cmocka_unit_test(test_tier_store_larger_than_memory_matches_a_model), \
	cmocka_unit_test(test_tier_keys_sharing_a_tag_are_told_apart_by_chain_walks_on_the_device), \
	cmocka_unit_test(test_tier_ready_callback_runs_exactly_once_per_pending_op), \
	cmocka_unit_test(test_tier_a_version_written_while_the_read_was_pending_wins), \
	cmocka_unit_test(test_tier_deleted_and_expired_keys_never_come_back_from_the_device), \
	cmocka_unit_test(test_tier_huge_values_span_pages_and_come_back_from_the_device), \
	cmocka_unit_test(test_tier_spanning_records_back_to_back_evict_each_other), \
	cmocka_unit_test(test_tier_concurrent_sessions_each_poll_their_own_queue), \
	cmocka_unit_test(test_tier_a_frame_wait_is_woken_through_the_waiting_sessions_fd), \
	cmocka_unit_test(test_tier_flush_all_forgets_what_the_device_holds)

int main(void)
{
	if (!tier_backend_available())
		return 77;
	const struct CMUnitTest tests[] = {
		TIER_TESTS,
		TIER_EXTRA_TESTS
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
