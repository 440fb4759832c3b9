/*
 * compact_suite.h - compaction's tests on a storage tier (log/compact.c), included by tier_suite.h
 * so that they run on every device backend it runs on. Each proves from the counters that the path
 * it is named after ran (records copied, keys evicted, segments removed), and checks every key
 * against a model: no key lost, none resurrected, every live key with its newest value.
 */
#ifndef SPW_TEST_COMPACT_SUITE_H
#define SPW_TEST_COMPACT_SUITE_H

/* The segment files of the store's device that exist now (the file backends), or -1. */
static int cmp_segment_files(tier *f)
{
	if (!f->env.dir[0])
		return -1;
	char path[256];
	snprintf(path, sizeof(path), "%s", f->env.dir);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strncmp(e->d_name, "hlog.", 5) == 0;
	closedir(d);
	return n;
}

/* Compaction runs its own op_ctx values on its session: a ready callback that ignores them. */
static void cmp_ready_noop(void *arg, void *op) { (void)arg; (void)op; }

/* The test's session sends the page writes its last page turns claimed, as a worker does before
 * it sleeps: compaction on another session waits for those frames. */
static void tsess_settle(tsess *ts)
{
	hlog_session_protect(ts->s);
	while (hlog_session_inflight(ts->s) > 0 || hlog_session_unsubmitted(ts->s)) {
		hlog_session_poll(ts->s);
		hlog_session_unprotect(ts->s);
		usleep(100);
		hlog_session_protect(ts->s);
	}
	hlog_session_unprotect(ts->s);
}

/* Passes over everything compactable until Begin stops moving, on a session of their own; the
 * infos summed. */
static hlog_compact_info cmp_all(tier *f, int mode)
{
	tsess_settle(&f->ts);
	int fd;
	hlog_session *s = store_session_open(f->env.l, cmp_ready_noop, NULL, 1000000, &fd);
	hlog_compact_info sum = { 0 };
	for (int pass = 0; pass < 64; pass++) {
		hlog_compact_opts o = { .until = UINT64_MAX, .mode = mode };
		hlog_compact_info ci;
		assert_int_equal(hlog_compact(f->env.l, s, &o, &ci), 0);
		if (pass == 0)
			sum.begin = ci.begin;
		sum.end = ci.end;
		sum.copied += ci.copied;
		sum.evicted += ci.evicted;
		sum.expired += ci.expired;
		sum.removed_bytes += ci.removed_bytes;
		sum.read_bytes += ci.read_bytes;
		if (ci.end == ci.begin)
			break;
	}
	hlog_session_close(s);
	return sum;
}

/* 3000 keys overwritten 5 times spill far past memory; compaction copies the live records of the
 * oldest part, Begin moves, the old segments go, and every key still has its newest value (read
 * back from the device where compaction put it, and over SCAN); the count stays exact. */
static void test_tier_compaction_copies_the_live_records_and_gives_the_segments_back(void **state)
{
	tier *f = *state;
	enum { N = 3000 };
	tier_load(f, N, "cp");
	for (int v = 2; v <= 5; v++)
		tier_phase(&f->ts, &f->m, 0, N, 1, prep_upsert, check_upsert, &v);
	tier_phase(&f->ts, &f->m, 0, N, 7, prep_delete, check_delete, NULL);
	hlog_space sp;
	hlog_space_get(f->env.l, &sp);
	assert_true(sp.garbage > 0);
	assert_true(hlog_compact_choose(f->env.l, 0.2, UINT64_MAX) > sp.begin);
	int files0 = cmp_segment_files(f);
	hlog_compact_info ci = cmp_all(f, HLOG_COMPACT_COPY);
	assert_true(ci.end > ci.begin);
	assert_true(ci.copied > 0);
	assert_true(ci.read_bytes > 0);
	assert_true(ci.removed_bytes > 0);
	if (files0 > 0)
		assert_true(cmp_segment_files(f) < files0);
	hlog_info i = info_of(f->env.l);
	assert_true(i.begin == ci.end);
	assert_int_equal(i.compact_copied, ci.copied);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m));
	model_read_all(&f->ts, &f->m);
	model_scan_check(&f->ts, &f->m, 0);
	/* And the store goes on: more writes, another round. */
	int v6 = 6;
	tier_phase(&f->ts, &f->m, 0, N, 2, prep_upsert, check_upsert, &v6);
	cmp_all(f, HLOG_COMPACT_COPY);
	model_read_all(&f->ts, &f->m);
	assert_int_equal(hlog_key_count(f->env.l), model_live(&f->m));
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
}

/* Upserts whose expiry has passed: the key is gone at once (model: not alive). */
static void prep_upsert_expired(top *o, model *m, int i, void *arg)
{
	prep_upsert(o, m, i, arg);
	o->expire_ms = 1;
}

static void check_upsert_expired(top *o, model *m, void *arg)
{
	check_upsert(o, m, arg);
	m->keys[o->i].alive = false;
}

/* Writers (their own sessions and keys) overwrite, delete and write expired values while a
 * compaction thread runs pass after pass over the same keys; afterwards every key is as the
 * writers left it: no key lost, none resurrected. */
typedef struct cr_arg {
	hlog *l;
	model m;
	int rounds;
} cr_arg;

static void *cr_writer(void *p)
{
	cr_arg *a = p;
	tsess ts;
	tsess_open(&ts, a->l);
	model_load(&ts, &a->m, 1);
	for (int r = 0; r < a->rounds; r++) {
		int v = 2 + r;
		tier_phase(&ts, &a->m, r % 3, a->m.n, 2, prep_upsert, check_upsert, &v);
		tier_phase(&ts, &a->m, (r + 1) % 5, a->m.n, 5, prep_delete, check_delete, NULL);
		tier_phase(&ts, &a->m, (r + 2) % 7, a->m.n, 7, prep_upsert_expired, check_upsert_expired, &v);
	}
	tsess_settle(&ts);
	tsess_close(&ts);
	return NULL;
}

typedef struct cr_comp {
	hlog *l;
	_Atomic int stop;
	int passes, moved, errors;
	uint64_t copied, expired;
} cr_comp;


static void *cr_compactor(void *p)
{
	cr_comp *c = p;
	tsess ts = { .l = c->l };
	ts.s = store_session_open(c->l, cmp_ready_noop, NULL, 1000000, &ts.fd);
	while (!atomic_load(&c->stop)) {
		/* Everything there is to compact, as often as possible: the most races. */
		hlog_compact_opts o = { .until = UINT64_MAX, .mode = HLOG_COMPACT_COPY };
		hlog_compact_info ci;
		int rc = hlog_compact(c->l, ts.s, &o, &ci);
		c->errors += rc < 0 && rc != SPW_E_LOG_FULL;
		c->passes++;
		c->moved += ci.end > ci.begin;
		c->copied += ci.copied;
		c->expired += ci.expired;
	}
	tsess_close(&ts);
	return NULL;
}

static void test_tier_compaction_racing_writers_deletes_and_expiry_loses_and_resurrects_nothing(void **state)
{
	tier *f = *state;
	enum { W = 2, N = 1500 };
	cr_arg args[W];
	pthread_t th[W], ct;
	cr_comp comp = { .l = f->env.l };
	assert_int_equal(pthread_create(&ct, NULL, cr_compactor, &comp), 0);
	static const char *const prefixes[W] = { "cr0", "cr1" };
	for (int w = 0; w < W; w++) {
		args[w].l = f->env.l;
		args[w].rounds = 12;
		model_init(&args[w].m, N, prefixes[w]);
		assert_int_equal(pthread_create(&th[w], NULL, cr_writer, &args[w]), 0);
	}
	for (int w = 0; w < W; w++)
		pthread_join(th[w], NULL);
	atomic_store(&comp.stop, 1);
	pthread_join(ct, NULL);
	fprintf(stderr, "compaction racing writers: %d passes, %d moved Begin, %llu copied, %llu expired\n",
	        comp.passes, comp.moved, (unsigned long long)comp.copied, (unsigned long long)comp.expired);
	assert_int_equal(comp.errors, 0);
	assert_true(comp.moved > 1);
	assert_true(comp.copied > 0);
	/* One more pass with nothing running, then every key as the model says. */
	cmp_all(f, HLOG_COMPACT_COPY);
	uint64_t live = 0;
	for (int w = 0; w < W; w++) {
		model_read_all(&f->ts, &args[w].m);
		live += model_live(&args[w].m);
	}
	/* The reads removed what had expired: the count is exact. */
	assert_int_equal(hlog_key_count(f->env.l), live);
	for (int w = 0; w < W; w++)
		model_free(&args[w].m);
	assert_int_equal(info_of(f->env.l).pending_errors, 0);
}

/* Cache mode: an evicting pass drops the live keys of the oldest part instead of copying them
 * (counted), keeps the rest, and the count stays exact. */
static void test_tier_compaction_evicting_drops_the_oldest_keys_and_counts_them(void **state)
{
	tier *f = *state;
	enum { N = 20000 };
	tier_load(f, N, "ev");
	hlog_space sp;
	hlog_space_get(f->env.l, &sp);
	hlog_compact_opts o = { .until = sp.begin + 2 * sp.unit_bytes, .mode = HLOG_COMPACT_EVICT_ALL };
	hlog_compact_info ci;
	int fd;
	tsess_settle(&f->ts);
	hlog_session *cs = store_session_open(f->env.l, cmp_ready_noop, NULL, 1000000, &fd);
	assert_int_equal(hlog_compact(f->env.l, cs, &o, &ci), 0);
	hlog_session_close(cs);
	fprintf(stderr, "evict: begin %llu until %llu limit %llu -> end %llu, %llu records, %llu evicted, %llu copied\n",
	        (unsigned long long)sp.begin, (unsigned long long)o.until, (unsigned long long)sp.limit,
	        (unsigned long long)ci.end, (unsigned long long)ci.records, (unsigned long long)ci.evicted,
	        (unsigned long long)ci.copied);
	assert_true(ci.evicted > 0);
	assert_int_equal(ci.copied, 0);
	assert_int_equal(info_of(f->env.l).evicted_keys, ci.evicted);
	assert_int_equal(hlog_key_count(f->env.l), (uint64_t)N - ci.evicted);
	/* Which keys went: exactly the ones that now read absent; the others read their value. */
	uint64_t gone = 0;
	for (int k = 0; k < N; k++) {
		top o2 = { .kind = T_READ, .m = &f->m, .i = k };
		tier_drive(&f->ts, &o2, 1);
		if (o2.rc == HLOG_NOTFOUND) {
			gone++;
			f->m.keys[k].alive = false;
		} else {
			assert_int_equal(o2.rc, HLOG_OK);
			assert_true(o2.matched);
		}
	}
	assert_int_equal(gone, ci.evicted);
	model_scan_check(&f->ts, &f->m, 0);
}

/* ---------------- units of expired records dropped unread (compact.c note 7) ---------------- */

#define XE_VLEN 300

/* Upsert key i of m (XE_VLEN bytes, expiry exp or HLOG_NO_EXPIRY) to completion, kept by the
 * model as alive (the test session's clock is 1970's, so an expiry in the past of the real clock
 * is still ahead of it). The log's tail afterwards: the record's end, nothing else writing. */
static uint64_t xe_put(tsess *ts, model *m, int i, int64_t exp)
{
	top o = { .kind = T_UPSERT, .m = m, .i = i, .len = XE_VLEN,
	          .expire_ms = exp == HLOG_NO_EXPIRY ? 0 : exp };
	uint8_t *b = malloc(XE_VLEN);
	assert_non_null(b);
	val_fill(b, XE_VLEN, i, 1);
	o.val = b;
	tier_drive(ts, &o, 1);
	check_upsert(&o, m, NULL);
	return info_of(ts->l).tail;
}

/* One pass over [Begin, until), on a session of its own. */
static hlog_compact_info xe_pass(tier *f, uint64_t until)
{
	tsess_settle(&f->ts);
	int fd;
	hlog_session *s = store_session_open(f->env.l, cmp_ready_noop, NULL, 1000000, &fd);
	hlog_compact_opts o = { .until = until, .mode = HLOG_COMPACT_COPY };
	hlog_compact_info ci;
	assert_int_equal(hlog_compact(f->env.l, s, &o, &ci), 0);
	hlog_session_close(s);
	fprintf(stderr, "expired drop: Begin %llu -> %llu, %llu bytes (%llu keys) dropped unread, %llu bytes read, "
	        "%llu expired, %llu copied\n", (unsigned long long)ci.begin, (unsigned long long)ci.end,
	        (unsigned long long)ci.dropped_bytes, (unsigned long long)ci.dropped_keys,
	        (unsigned long long)ci.read_bytes, (unsigned long long)ci.expired, (unsigned long long)ci.copied);
	return ci;
}

/* E keys whose expiry has passed (by the real clock, which compaction decides on) fill the first
 * units, a keeper with no expiry is written once the tail is past keep_at (0: none), then F keys
 * without expiry push them all to the device. One pass: the leading units holding only expired
 * records go without a read of them (the counters prove it), the key count falls by exactly the
 * keys that lay there, and no expired key comes back, on the real clock or the test's old one. */
static void xe_run(tier *f, uint64_t keep_at, uint64_t want_units, bool flush_first)
{
	enum { E = 12000, F = 6000 };
	hlog *l = f->env.l;
	int64_t past = spw_time_ms() - 60000;
	model_init(&f->m, E, "xe");
	model_init(&f->other, F + 1, "xk");
	uint64_t *end_of = calloc(E, sizeof(uint64_t));
	assert_non_null(end_of);
	bool kept = keep_at == 0;
	if (flush_first) {
		/* Keys counted in Begin's unit, then flushed: that unit's figures hold them still. */
		for (int i = 0; i < E / 4; i++)
			xe_put(&f->ts, &f->m, i, past);
		hlog_session_protect(f->ts.s);
		assert_int_equal(hlog_flush_all(f->ts.s), HLOG_OK);
		hlog_session_unprotect(f->ts.s);
		assert_int_equal(hlog_key_count(l), 0);
	}
	for (int i = 0; i < E; i++) {
		end_of[i] = xe_put(&f->ts, &f->m, i, past);
		if (!kept && end_of[i] > keep_at) {
			xe_put(&f->ts, &f->other, F, HLOG_NO_EXPIRY);   /* the keeper */
			kept = true;
		}
	}
	for (int i = 0; i < F; i++)
		xe_put(&f->ts, &f->other, i, HLOG_NO_EXPIRY);
	uint64_t live_other = model_live(&f->other);
	assert_int_equal(hlog_key_count(l), E + live_other);
	hlog_info i0 = info_of(l);
	hlog_compact_info ci = xe_pass(f, UINT64_MAX);
	hlog_info i1 = info_of(l);
	hlog_space sp;
	hlog_space_get(l, &sp);
	/* The path ran, for exactly the units wanted. */
	assert_int_equal(ci.dropped_bytes, want_units ? want_units * sp.unit_bytes - ci.begin % sp.unit_bytes : 0);
	assert_int_equal(i1.compact_expired_drop_bytes - i0.compact_expired_drop_bytes, ci.dropped_bytes);
	assert_int_equal(i1.compact_expired_drop_units - i0.compact_expired_drop_units, want_units);
	/* Nothing of them was read: the pass's page reads began where they end. */
	uint64_t from = ci.begin + ci.dropped_bytes;
	assert_true(ci.end >= from);
	assert_true(ci.read_bytes <= ci.end - from + TIER_PAGE);
	assert_int_equal(i1.compact_read_bytes - i0.compact_read_bytes, ci.read_bytes);
	/* The keys that lay there, exactly, went from the count as expiries; the scan removed the rest. */
	uint64_t there = 0;
	for (int i = 0; i < E; i++)
		there += end_of[i] <= from;
	assert_int_equal(ci.dropped_keys, there);
	assert_int_equal(ci.expired, E);
	assert_int_equal(i1.expired_keys - i0.expired_keys, ci.expired);
	assert_int_equal(hlog_key_count(l), live_other);
	assert_int_equal(hlog_expires_count(l), 0);
	/* None comes back, even to the test's 1970 clock; the others read their values. */
	for (int i = 0; i < E; i++)
		f->m.keys[i].alive = false;
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &f->other);
	hlog_session_set_now(f->ts.s, spw_time_ms());
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &f->other);
	model_scan_check(&f->ts, &f->other, 0);
	assert_int_equal(hlog_key_count(l), live_other);
	assert_int_equal(info_of(l).pending_errors, 0);
	free(end_of);
}

static void test_tier_compaction_drops_units_of_expired_records_unread(void **state)
{
	xe_run(*state, 0, 3, false);   /* 12000 x 3xx bytes: three whole 1 MiB units, then the fourth */
}

/* One key without an expiry in the second unit: that unit is read (the keeper survives), only the
 * first goes unread. */
static void test_tier_compaction_reads_a_unit_holding_a_key_without_expiry(void **state)
{
	xe_run(*state, MIB + 100 * KIB, 1, false);
}

/* After a FLUSHALL, Begin's unit holds keys the flush took from the count: it is read, never
 * dropped unread (its live figure would take them again), and the count stays exact. */
static void test_tier_compaction_reads_the_unit_a_flushall_left_begin_in(void **state)
{
	xe_run(*state, 0, 0, true);
}

/* A read parked on a fetch that found its key's record in a unit the next pass drops unread (the
 * chain runs through a newer record of a colliding key that stays): re-run after the drop, it
 * finds the key absent, not the fetched copy (which the test's 1970 clock would take for live). */
/* A unit of expired records that also holds key k of its own, changed in place by change (which
 * must make one in-place update): k's unit must be read, not dropped, and k keep its value.
 * k_first: k is written before the first half of the expired keys (so that it is no longer mutable
 * when change runs), else just before change. */
static void xe_unit_with_an_inplace_change(tier *f, const char *prefix, bool k_first,
                                           void (*change)(tier *, model *))
{
	enum { E = 12000, F = 6000 };
	hlog *l = f->env.l;
	int64_t past = spw_time_ms() - 60000;
	model k;
	model_init(&k, 1, prefix);
	model_init(&f->m, E, "xe");
	model_init(&f->other, F, "xk");
	if (k_first)
		xe_put(&f->ts, &k, 0, past);
	for (int i = 0; i < E / 2; i++)
		xe_put(&f->ts, &f->m, i, past);
	if (!k_first)
		xe_put(&f->ts, &k, 0, past);
	uint64_t ip0 = info_of(l).inplace_updates;
	change(f, &k);
	assert_int_equal(info_of(l).inplace_updates - ip0, 1);   /* the path under test ran */
	for (int i = E / 2; i < E; i++)
		xe_put(&f->ts, &f->m, i, past);
	for (int i = 0; i < F; i++)
		xe_put(&f->ts, &f->other, i, HLOG_NO_EXPIRY);
	(void)xe_pass(f, UINT64_MAX);
	hlog_session_set_now(f->ts.s, spw_time_ms());
	model_read_all(&f->ts, &k);
	assert_int_equal(hlog_key_count(l), F + 1);
	model_free(&k);
}

/* DEL appends a tombstone; SET k xyz (no expiry) fits its padding and revives it in place. */
static void xe_revive_without_expiry(tier *f, model *k)
{
	top d = { .kind = T_DELETE, .m = k, .i = 0 };
	tier_drive(&f->ts, &d, 1);
	check_delete(&d, k, NULL);
	uint64_t ip0 = info_of(f->env.l).inplace_updates;
	tier_upsert_sized(&f->ts, k, 0, 3, 7);
	/* the delete itself was not in place (the record is not mutable any more): only the SET was */
	assert_int_equal(info_of(f->env.l).inplace_updates - ip0, 1);
}

static void xe_raise_expiry(tier *f, model *k)
{
	xe_put(&f->ts, k, 0, spw_time_ms() + 3600000);   /* SET k v PX long, the same size */
}

/* A tombstone revived in place by a short value without expiry: the unit holds a key that never
 * expires (the review found it lost: the in-place write was not accounted). */
static void test_tier_compaction_reads_a_unit_whose_tombstone_was_revived_without_expiry(void **state)
{
	xe_unit_with_an_inplace_change(*state, "rv", true, xe_revive_without_expiry);
}

/* An in-place rewrite to a later expiry keeps its unit too. */
static void test_tier_compaction_reads_a_unit_whose_expiry_was_raised_in_place(void **state)
{
	xe_unit_with_an_inplace_change(*state, "rx", false, xe_raise_expiry);
}

/* Every expired key written twice (the second version two units later), a tenth deleted: the
 * superseded and deleted versions' units lose their live figure, the count stays exact. */
static void test_tier_compaction_drop_counts_superseded_and_deleted_versions_once(void **state)
{
	tier *f = *state;
	enum { E = 6000, F = 6000 };
	hlog *l = f->env.l;
	int64_t past = spw_time_ms() - 60000;
	model_init(&f->m, E, "xe");
	model_init(&f->other, F, "xk");
	for (int i = 0; i < E; i++)
		xe_put(&f->ts, &f->m, i, past);
	for (int i = 0; i < E; i++)
		xe_put(&f->ts, &f->m, i, past - 1);
	for (int i = 0; i < E; i += 10) {
		top d = { .kind = T_DELETE, .m = &f->m, .i = i };
		tier_drive(&f->ts, &d, 1);
		check_delete(&d, &f->m, NULL);
	}
	for (int i = 0; i < F; i++)
		xe_put(&f->ts, &f->other, i, HLOG_NO_EXPIRY);
	assert_int_equal(hlog_key_count(l), E - E / 10 + F);
	hlog_compact_info ci = xe_pass(f, UINT64_MAX);
	assert_true(ci.dropped_bytes > 0);
	assert_int_equal(hlog_key_count(l), F);
	assert_int_equal(hlog_expires_count(l), 0);
}

static void test_tier_a_fetch_that_found_a_dropped_record_reads_absent_after_the_drop(void **state)
{
	tier *f = *state;
	enum { E = 9000, F = 6000 };
	hlog *l = f->env.l;
	int64_t past = spw_time_ms() - 60000;
	model fill;
	model_init(&f->m, 2, "xc");
	f->m.shared_hash = true;              /* key 1's record leads to key 0's on one chain */
	model_init(&f->other, E, "xe");
	model_init(&fill, F, "xf");
	xe_put(&f->ts, &f->m, 0, past);       /* the first record of unit 0 */
	for (int i = 0; i < E; i++)
		xe_put(&f->ts, &f->other, i, past);
	xe_put(&f->ts, &f->m, 1, HLOG_NO_EXPIRY);   /* in unit 2, which stays */
	for (int i = 0; i < F; i++)
		xe_put(&f->ts, &fill, i, HLOG_NO_EXPIRY);
	top o = { .kind = T_READ, .m = &f->m, .i = 0 };
	hlog_session_protect(f->ts.s);
	assert_int_equal(top_run(&f->ts, &o), HLOG_PENDING);
	o.parked = true;
	tier_wait_ready(&f->ts, &o);          /* the fetch read key 1's record, then key 0's: found */
	hlog_session_unprotect(f->ts.s);
	/* Only the drop: a scan would not find the colliding keys (compaction hashes their bytes). */
	hlog_compact_info ci = xe_pass(f, 2 * MIB);
	assert_int_equal(ci.begin + ci.dropped_bytes, 2 * MIB);
	hlog_session_protect(f->ts.s);
	assert_int_equal(top_run(&f->ts, &o), HLOG_NOTFOUND);
	hlog_session_release(f->ts.s, &o);
	hlog_session_unprotect(f->ts.s);
	f->m.keys[0].alive = false;
	model_read_all(&f->ts, &f->m);
	model_read_all(&f->ts, &fill);
	assert_int_equal(hlog_key_count(l), 2 + E + F - ci.dropped_keys);
	model_free(&fill);
}

#define COMPACT_TESTS \
	TIER_TEST(test_tier_compaction_copies_the_live_records_and_gives_the_segments_back), \
	TIER_TEST(test_tier_compaction_racing_writers_deletes_and_expiry_loses_and_resurrects_nothing), \
	TIER_TEST(test_tier_compaction_evicting_drops_the_oldest_keys_and_counts_them), \
	TIER_TEST(test_tier_compaction_drops_units_of_expired_records_unread), \
	TIER_TEST(test_tier_compaction_reads_a_unit_holding_a_key_without_expiry), \
	TIER_TEST(test_tier_compaction_reads_the_unit_a_flushall_left_begin_in), \
	TIER_TEST(test_tier_compaction_reads_a_unit_whose_tombstone_was_revived_without_expiry), \
	TIER_TEST(test_tier_compaction_reads_a_unit_whose_expiry_was_raised_in_place), \
	TIER_TEST(test_tier_compaction_drop_counts_superseded_and_deleted_versions_once), \
	TIER_TEST(test_tier_a_fetch_that_found_a_dropped_record_reads_absent_after_the_drop)

#endif
