/*
 * parts_suite.h - compaction's liveness check of parts (log/compact.c note 8) on a storage tier,
 * included by tier_suite.h so that it runs on every device backend. The store is opened with a
 * check (hlog_config.part_live) modelled on the collections' one: a part's value names its owner,
 * a head under the user key "ph:<owner>", and the part is live while that head exists; the check
 * reads the head on compaction's own session, so a head on the device makes it go pending. Each
 * test proves from the counters that its path ran (parts dropped, copied, checks that parked).
 */
#ifndef SPW_TEST_PARTS_SUITE_H
#define SPW_TEST_PARTS_SUITE_H

#define PT_VLEN 240
#define PT_ALWAYS UINT64_MAX     /* an owner that makes the part live without a read */

/* What the check was asked and answered (tier.arg). */
typedef struct pt_check {
	uint64_t calls, pending, live, dead, failed;
	uint64_t bad;                /* calls with something other than a part of ours */
	int fail_with;               /* non-zero: answer this error instead */
} pt_check;

/* Part j's internal key "pt:<j>". */
static void pt_key(test_key *t, int j)
{
	test_key_make(t, "pt", j);
	hlog_key_init_internal(&t->k, t->buf, t->k.len);
}

/* Part j's value: its owner, then bytes of j. */
static void pt_val(uint8_t *v, uint64_t owner, int j)
{
	memcpy(v, &owner, sizeof(owner));
	val_fill(v + 8, PT_VLEN - 8, j, 77);
}

static void pt_found(void *ctx, const hlog_value *v)
{
	(void)v;
	(*(int *)ctx)++;
}

/* The check (hlog_config.part_live): live iff the owner's head "ph:<owner>" exists, read with
 * compaction's session s. No assertion in here: it runs inside a pass. */
static int pt_live(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v)
{
	tier *f = arg;
	pt_check *c = f->arg;
	int j;
	c->calls++;
	if (!test_key_parse(key, klen, "pt", &j) || v->rtype != HLOG_T_PART || v->len != PT_VLEN || !v->addr) {
		c->bad++;
		return 1;
	}
	if (c->fail_with) {
		c->failed++;
		return c->fail_with;
	}
	uint64_t owner;
	memcpy(&owner, v->ptr, sizeof(owner));
	if (owner == PT_ALWAYS) {
		c->live++;
		return 1;
	}
	test_key t;
	test_key_make(&t, "ph", (int)owner);
	int seen = 0;
	int rc = hlog_read(s, &t.k, pt_found, &seen);
	if (rc == HLOG_PENDING) {
		c->pending++;
		return HLOG_PENDING;
	}
	if (rc < 0) {
		c->failed++;
		return rc;
	}
	c->live += rc == HLOG_OK;
	c->dead += rc == HLOG_NOTFOUND;
	return rc == HLOG_OK;
}

static const tier_shape pt_with_check = { 8, 1 * MIB, true, pt_live };

/* Run op (an upsert or read of a part, on the protected test session) to completion. */
typedef struct pt_op {
	const test_key *t;
	const uint8_t *val;          /* NULL: a read into got */
	uint8_t got[PT_VLEN];
	int glen;
} pt_op;

static void pt_copy(void *ctx, const hlog_value *v)
{
	pt_op *p = ctx;
	p->glen = (int)v->len;
	memcpy(p->got, v->ptr, SPW_MIN(v->len, sizeof(p->got)));
}

static int pt_run(tsess *ts, pt_op *p)
{
	top o = { 0 };
	int rc;
	hlog_session_protect(ts->s);
	for (;;) {
		hlog_session_set_op(ts->s, &o);
		rc = p->val ? hlog_upsert_typed(ts->s, &p->t->k, p->val, PT_VLEN, HLOG_NO_EXPIRY, HLOG_T_PART)
		            : hlog_read(ts->s, &p->t->k, pt_copy, p);
		if (rc != HLOG_PENDING)
			break;
		o.parked = true;
		o.ready = 0;
		tier_wait_ready(ts, &o);
		o.parked = false;
	}
	hlog_session_release(ts->s, &o);
	hlog_session_unprotect(ts->s);
	return rc;
}

static void pt_put(tsess *ts, int j, uint64_t owner)
{
	test_key t;
	uint8_t v[PT_VLEN];
	pt_key(&t, j);
	pt_val(v, owner, j);
	pt_op p = { .t = &t, .val = v };
	assert_int_equal(pt_run(ts, &p), HLOG_OK);
}

/* Part j reads its value (owned by owner), or is absent. */
static void pt_expect(tsess *ts, int j, uint64_t owner, bool present)
{
	test_key t;
	pt_key(&t, j);
	pt_op p = { .t = &t };
	int rc = pt_run(ts, &p);
	if (!present) {
		assert_int_equal(rc, HLOG_NOTFOUND);
		return;
	}
	assert_int_equal(rc, HLOG_OK);
	uint8_t want[PT_VLEN];
	pt_val(want, owner, j);
	assert_int_equal(p.glen, PT_VLEN);
	assert_memory_equal(p.got, want, PT_VLEN);
}

enum { PT_P = 2000, PT_H = 100, PT_F = 6000 };

/* PT_P parts (part j owned by head j % PT_H) at the log's start, then the PT_H heads (f->m,
 * "ph"), then filler (f->other) that pushes them all to the device; the odd heads are deleted
 * (their parts are dead). Returns the end of the parts (a pass to there meets only parts), and
 * where the heads end. */
static uint64_t pt_load(tier *f, uint64_t *heads_end /* out */)
{
	for (int j = 0; j < PT_P; j++)
		pt_put(&f->ts, j, (uint64_t)(j % PT_H));
	uint64_t parts_end = info_of(f->env.l).tail;
	tier_load(f, PT_H, "ph");
	*heads_end = info_of(f->env.l).tail;
	model_init(&f->other, PT_F, "pf");
	model_load(&f->ts, &f->other, 1);
	tier_phase(&f->ts, &f->m, 1, PT_H, 2, prep_delete, check_delete, NULL);
	hlog_space sp;
	hlog_space_get(f->env.l, &sp);
	assert_true(sp.limit >= *heads_end);   /* the parts and heads are on the device */
	return parts_end;
}

/* One pass of mode over [Begin, until) on a session of its own. */
static hlog_compact_info pt_pass(tier *f, uint64_t until, int mode)
{
	tsess_settle(&f->ts);
	int fd;
	hlog_session *s = store_session_open(f->env.l, cmp_ready_noop, NULL, 1000000, &fd);
	hlog_compact_opts o = { .until = until, .mode = mode };
	hlog_compact_info ci;
	assert_int_equal(hlog_compact(f->env.l, s, &o, &ci), 0);
	hlog_session_close(s);
	fprintf(stderr, "parts: Begin %llu -> %llu, %llu records, %llu copied, %llu parts dropped, %llu evicted\n",
	        (unsigned long long)ci.begin, (unsigned long long)ci.end, (unsigned long long)ci.records,
	        (unsigned long long)ci.copied, (unsigned long long)ci.parts_dropped,
	        (unsigned long long)ci.evicted);
	return ci;
}

/* Every part reads as it should: those of live owners (even heads) or all (live_all) their value,
 * the others absent; the heads and the filler as their models say; the key count leaves parts out. */
static void pt_check_all(tier *f, bool live_all)
{
	for (int j = 0; j < PT_P; j++)
		pt_expect(&f->ts, j, (uint64_t)(j % PT_H), live_all || (j % PT_H) % 2 == 0);
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &f->other);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m) + model_live(&f->other));
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
}

/* A pass over parts alone: those whose owner is gone are dropped and counted, the others copied
 * and still readable; checks whose head read went to the device parked and completed. */
static void test_tier_compaction_drops_dead_parts_and_copies_live_ones(void **state)
{
	tier *f = *state;
	pt_check c = { 0 };
	f->arg = &c;
	uint64_t heads_end, parts_end = pt_load(f, &heads_end);
	hlog_info i0 = info_of(f->env.l);
	hlog_compact_info ci = pt_pass(f, parts_end, HLOG_COMPACT_COPY);
	fprintf(stderr, "parts check: %llu calls, %llu pending, %llu live, %llu dead\n", (unsigned long long)c.calls,
	        (unsigned long long)c.pending, (unsigned long long)c.live, (unsigned long long)c.dead);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.failed, 0);
	assert_true(ci.end >= parts_end);
	assert_int_equal(ci.parts_dropped, PT_P / 2);
	assert_int_equal(ci.copied, PT_P / 2);
	assert_int_equal(c.dead, PT_P / 2);
	assert_int_equal(c.live, PT_P / 2);
	/* The parked path ran: checks went pending on a head on the device and completed (each part
	 * decided once, after its reads). */
	assert_int_equal(c.calls, PT_P + c.pending);
	hlog_info i1 = info_of(f->env.l);
	assert_int_equal(i1.compact_parts_dropped - i0.compact_parts_dropped, PT_P / 2);
	/* The only reads besides the pass's pages: one fetch per live part's check, of its head on the
	 * device (a dead one's head is a tombstone in memory; a check run again while its read is
	 * still out waits for the same fetch; the copy after a parked check took the part's record as
	 * the scan read it). */
	assert_true(c.pending >= PT_P / 2);
	assert_int_equal(i1.pending_reads - i0.pending_reads, PT_P / 2);
	pt_check_all(f, false);
}

/* Without a check every part is live: all copied, none dropped, and (cache mode) none evicted. */
static void test_tier_compaction_without_a_part_check_copies_every_part(void **state)
{
	tier *f = *state;
	uint64_t heads_end, parts_end = pt_load(f, &heads_end);
	hlog_compact_info ci = pt_pass(f, parts_end, HLOG_COMPACT_EVICT_ALL);
	assert_int_equal(ci.parts_dropped, 0);
	assert_int_equal(ci.evicted, 0);
	assert_int_equal(ci.copied, PT_P);
	assert_int_equal(info_of(f->env.l).compact_parts_dropped, 0);
	pt_check_all(f, true);
}

/* A check that fails (its read's error) keeps the part: copied, none dropped. */
static void test_tier_compaction_keeps_a_part_whose_check_failed(void **state)
{
	tier *f = *state;
	pt_check c = { .fail_with = -EIO };
	f->arg = &c;
	uint64_t heads_end, parts_end = pt_load(f, &heads_end);
	hlog_compact_info ci = pt_pass(f, parts_end, HLOG_COMPACT_COPY);
	assert_int_equal(c.failed, PT_P);
	assert_int_equal(ci.parts_dropped, 0);
	assert_int_equal(ci.copied, PT_P);
	pt_check_all(f, true);
}

/* Cache mode never evicts a part: an evicting pass over the parts drops the dead ones and copies
 * the live ones (none evicted); one over the heads evicts the live heads, whose parts are then
 * dead, and the next pass over those parts (once more filler has pushed them to the device) drops
 * them: a collection leaves the cache whole. */
static void test_tier_compaction_evicting_never_evicts_a_part(void **state)
{
	tier *f = *state;
	pt_check c = { 0 };
	f->arg = &c;
	uint64_t heads_end, parts_end = pt_load(f, &heads_end);
	hlog_compact_info ci = pt_pass(f, parts_end, HLOG_COMPACT_EVICT_ALL);
	assert_int_equal(c.bad + c.failed, 0);
	assert_int_equal(ci.evicted, 0);
	assert_int_equal(ci.parts_dropped, PT_P / 2);
	assert_int_equal(ci.copied, PT_P / 2);
	pt_check_all(f, false);
	/* The heads: the live ones are evicted (the odd ones' records were superseded by their
	 * deletes' tombstones). */
	ci = pt_pass(f, heads_end, HLOG_COMPACT_EVICT_ALL);
	assert_int_equal(ci.evicted, PT_H / 2);
	assert_int_equal(ci.parts_dropped, 0);
	for (int h = 0; h < PT_H; h += 2)
		f->m.keys[h].alive = false;
	model more;
	model_init(&more, PT_F, "pg");
	model_load(&f->ts, &more, 1);
	c = (pt_check){ 0 };
	ci = pt_pass(f, UINT64_MAX, HLOG_COMPACT_COPY);
	assert_int_equal(ci.parts_dropped, PT_P / 2);
	assert_int_equal(c.live, 0);
	for (int j = 0; j < PT_P; j++)
		pt_expect(&f->ts, j, 0, false);
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &f->other);
	model_read_all(&f->ts, &more);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->other) + model_live(&more));
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
	model_free(&more);
}

/* Compaction's drop of units of expired records (note 7 there) never takes a unit holding a part
 * unread: the part has no expiry, so it blocks its unit. Expired keys fill the first units, a
 * part (live) lies in the second: only the first unit goes unread; the part was checked, copied
 * and reads its value. */
static void test_tier_compaction_reads_a_unit_holding_a_part(void **state)
{
	tier *f = *state;
	pt_check c = { 0 };
	f->arg = &c;
	enum { E = 12000, F = 6000 };
	int64_t past = spw_time_ms() - 60000;
	model_init(&f->m, E, "xe");
	model_init(&f->other, F, "xk");
	bool put = false;
	for (int i = 0; i < E; i++) {
		if (xe_put(&f->ts, &f->m, i, past) > MIB + 100 * KIB && !put) {
			pt_put(&f->ts, 0, PT_ALWAYS);
			put = true;
		}
	}
	for (int i = 0; i < F; i++)
		xe_put(&f->ts, &f->other, i, HLOG_NO_EXPIRY);
	hlog_compact_info ci = xe_pass(f, UINT64_MAX);
	hlog_space sp;
	hlog_space_get(f->env.l, &sp);
	assert_int_equal(ci.dropped_bytes, sp.unit_bytes - ci.begin % sp.unit_bytes);   /* the first unit only */
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.live, 1);
	assert_int_equal(ci.parts_dropped, 0);
	assert_int_equal(ci.expired, E);
	pt_expect(&f->ts, 0, PT_ALWAYS, true);
	for (int i = 0; i < E; i++)
		f->m.keys[i].alive = false;
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &f->other);
	assert_int_equal(hlog_key_count(f->env.l), F);
}

#define PARTS_TESTS \
	TIER_TEST_SHAPED(test_tier_compaction_drops_dead_parts_and_copies_live_ones, pt_with_check), \
	TIER_TEST(test_tier_compaction_without_a_part_check_copies_every_part), \
	TIER_TEST_SHAPED(test_tier_compaction_keeps_a_part_whose_check_failed, pt_with_check), \
	TIER_TEST_SHAPED(test_tier_compaction_evicting_never_evicts_a_part, pt_with_check), \
	TIER_TEST_SHAPED(test_tier_compaction_reads_a_unit_holding_a_part, pt_with_check)

#endif
