/*
 * test_group.c - groups (log/group.c, hlog_group_rmw): a head and its parts readable whole, the
 * redo hook's order and group_more, a failed plan or a too big group writing nothing, a lost race
 * re-planning (the lost span left as garbage), PENDING while the old head is on the device, and
 * spans past what is left of a page and over several pages that every walker (scan, the page
 * walker, compaction, checkpoint and recovery) parses as ordinary records, and the group locks
 * (group.c note 8): a write sharing a part's entry during the group waits for it, so every part's
 * chain goes down.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "index/hidx_int.h"
#include "store_env.h"

#define KIB 1024ULL
#define PAGE (4 * KIB)

typedef struct gf {
	store_env env;               /* env.d: with a device */
	hlog *l;
	hlog_session *s;
	int fd;
	dev *logdev;                 /* memory-only checkpoints: the log's device */
	char ckdir[64];
} gf;

static void gf_ready(void *cb_arg, void *op_ctx)
{
	(void)cb_arg;
	(void)op_ctx;
}

static gf *gf_open(void **state, bool device, uint64_t memory, int mutable_percent)
{
	gf *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	*state = f;
	hlog_config c = log_test_config(memory, PAGE, mutable_percent);
	c.group_span_only = true;   /* these tests are of the span; in place: test_group_inplace.c */
	if (device) {
		store_env_open(&f->env, "localmemory", "/tmp/spw-group.XXXXXX", 0, &c);
		f->l = f->env.l;
		f->s = store_session_open(f->l, gf_ready, f, 1000000, &f->fd);
	} else {
		assert_int_equal(hlog_open(&f->l, &c), 0);
		assert_int_equal(hlog_session_open(f->l, &f->s), 0);
		hlog_session_set_now(f->s, 1000000);
		f->fd = -1;
	}
	hlog_session_protect(f->s);
	return f;
}

static void gf_close_store(gf *f)
{
	if (f->s) {
		hlog_session_unprotect(f->s);
		hlog_session_close(f->s);
		f->s = NULL;
	}
	if (f->env.d)
		store_env_close(&f->env);
	else if (f->l)
		hlog_close(f->l);
	f->l = NULL;
}

static int gf_teardown(void **state)
{
	gf *f = *state;
	if (!f)
		return 0;
	gf_close_store(f);
	if (f->logdev)
		dev_close(f->logdev);
	if (f->ckdir[0])
		nftw(f->ckdir, store_env_rm, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

/* ---------------- the group of the tests ---------------- */

#define GMAX 64

/* The head's value: "H" + a generation byte per write ('0' + n); parts: "p<i>:" + len bytes. */
typedef struct grp {
	hlog_key head;
	char pkeys[GMAX][16];
	uint8_t pvals[GMAX][2048];
	hlog_group_part parts[GMAX];
	size_t n;
	int plans;
	int gen;                     /* runs of grp_run: the head's new byte ('0' + gen) */
	int fail_rc;                 /* plan answers this when < 0 */
	int action;                  /* HLOG_RMW_WRITE (default) or another */
	void (*in_plan)(struct grp *g);   /* called from the first plan (the race test) */
	void (*in_fill)(struct grp *g);   /* called from the head's fill: the span is reserved */
	char seen[64];               /* the old value the last plan saw */
} grp;

static void grp_init(grp *g, const char *head, size_t n, size_t len)
{
	memset(g, 0, sizeof(*g));
	hlog_key_init(&g->head, head, strlen(head));
	g->n = n;
	g->action = HLOG_RMW_WRITE;
	for (size_t i = 0; i < n; i++) {
		int kl = snprintf(g->pkeys[i], sizeof(g->pkeys[i]), "%s|b%zu", head, i);
		for (size_t j = 0; j < len; j++)
			g->pvals[i][j] = (uint8_t)('a' + (i * 7 + j) % 26);
		hlog_key_init_internal(&g->parts[i].key, g->pkeys[i], (size_t)kl);
		g->parts[i].val = g->pvals[i];
		g->parts[i].len = len;
	}
}

static int grp_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	grp *g = ctx;
	if (g->plans++ == 0 && g->in_plan)
		g->in_plan(g);
	size_t olen = old ? SPW_MIN(old->len, sizeof(g->seen) - 2) : 0;
	memcpy(g->seen, old ? (const char *)old->ptr : "", olen);
	g->seen[olen] = 0;
	if (g->fail_rc < 0)
		return g->fail_rc;
	out->action = g->action;
	out->new_len = (olen ? olen : 1) + 1;
	out->rtype = HLOG_T_HEAD;
	out->expire_ms = HLOG_NO_EXPIRY;
	return 0;
}

static void grp_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	grp *g = ctx;
	assert_false(in_place);   /* a group's head is always a new record */
	size_t olen = strlen(g->seen);
	if (!olen) {
		dst[0] = 'H';
		olen = 1;
	} else {
		memcpy(dst, g->seen, olen);
	}
	(void)old;
	dst[olen] = (uint8_t)('0' + (g->gen % 10));
	if (g->in_fill)
		g->in_fill(g);
}

static const hlog_rmw_ops grp_ops = { grp_plan, grp_fill };

/* Run the group until it is not pending. */
static int grp_run(gf *f, grp *g)
{
	int rc, rounds = 0;
	g->gen++;
	hlog_session_set_op(f->s, g);
	while ((rc = hlog_group_rmw(f->s, &g->head, &grp_ops, g, g->parts, g->n)) == HLOG_PENDING) {
		assert_true(++rounds < 100000);
		store_pending_step(f->s, f->fd);
	}
	if (f->env.d)
		hlog_session_release(f->s, g);
	return rc;
}

/* Read k (polling through pending reads): HLOG_OK with the value and its address, or NOTFOUND. */
typedef struct got { uint8_t v[4096]; size_t len; uint64_t addr; uint8_t rtype; } got;

static void got_fn(void *ctx, const hlog_value *v)
{
	got *g = ctx;
	g->len = SPW_MIN(v->len, sizeof(g->v));
	memcpy(g->v, v->ptr, g->len);
	g->addr = v->addr;
	g->rtype = v->rtype;
}

static int gf_read(gf *f, const hlog_key *k, got *out)
{
	int rc, rounds = 0;
	hlog_session_set_op(f->s, out);
	while ((rc = hlog_read(f->s, k, got_fn, out)) == HLOG_PENDING) {
		assert_true(++rounds < 100000);
		hlog_session_poll(f->s);
		if (hlog_session_inflight(f->s))
			store_fd_wait(f->fd, 5);
	}
	if (f->env.d)
		hlog_session_release(f->s, out);
	return rc;
}

/* Every part of g reads back with its value, in its namespace only; the head reads want. Returns
 * the parts' addresses in addrs (may be NULL). */
static void grp_check(gf *f, const grp *g, const char *want, uint64_t *addrs)
{
	got x;
	assert_int_equal(gf_read(f, &g->head, &x), HLOG_OK);
	assert_int_equal(x.len, strlen(want));
	assert_memory_equal(x.v, want, x.len);
	assert_int_equal(x.rtype, HLOG_T_HEAD);
	for (size_t i = 0; i < g->n; i++) {
		assert_int_equal(gf_read(f, &g->parts[i].key, &x), HLOG_OK);
		assert_int_equal(x.len, g->parts[i].len);
		assert_memory_equal(x.v, g->parts[i].val, x.len);
		assert_int_equal(x.rtype, HLOG_T_PART);
		if (addrs)
			addrs[i] = x.addr;
		hlog_key u;
		hlog_key_init(&u, g->parts[i].key.ptr, g->parts[i].key.len);
		assert_int_equal(gf_read(f, &u, &x), HLOG_NOTFOUND);   /* no user key of those bytes */
	}
}

/* ---------------- the redo hook ---------------- */

typedef struct redo_rec { uint64_t seq, addr; int kind; uint8_t rtype; bool more; char key[24]; } redo_rec;
typedef struct redo_log { redo_rec r[GMAX + 8]; int n; } redo_log;

static void redo_fn(void *arg, const hlog_redo *r)
{
	redo_log *lg = arg;
	assert_true(lg->n < GMAX + 8);
	redo_rec *x = &lg->r[lg->n++];
	x->seq = r->seq;
	x->addr = r->addr;
	x->kind = r->kind;
	x->rtype = r->rtype;
	x->more = r->group_more;
	snprintf(x->key, sizeof(x->key), "%.*s", (int)r->klen, (const char *)r->key);
}

/* ---------------- tests ---------------- */

static void test_group_of_a_head_and_three_parts_is_readable_whole(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	redo_log lg = { .n = 0 };
	hlog_session_set_redo(f->s, redo_fn, &lg);
	grp g;
	grp_init(&g, "h", 3, 100);
	uint64_t t0 = info_of(f->l).tail;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	grp_check(f, &g, "H1", NULL);
	assert_int_equal(hlog_key_count(f->l), 1);   /* the head only: parts are no keys */
	/* Head first, then the parts in order, group_more on all but the last, seqs in a row. */
	assert_int_equal(lg.n, 4);
	assert_string_equal(lg.r[0].key, "h");
	assert_int_equal(lg.r[0].rtype, HLOG_T_HEAD);
	assert_int_equal(lg.r[0].addr, t0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(lg.r[i].kind, HLOG_REDO_SET);
		assert_int_equal(lg.r[i].more, i < 3);
		assert_int_equal(lg.r[i].seq, lg.r[0].seq + (uint64_t)i);
		if (i > 0) {
			assert_string_equal(lg.r[i].key, g.pkeys[i - 1]);
			assert_int_equal(lg.r[i].rtype, HLOG_T_PART);
			assert_true(lg.r[i].addr > lg.r[i - 1].addr);
		}
	}
	/* A second group over the same keys: a part deleted, the others rewritten; redo says so. */
	lg.n = 0;
	g.parts[1].del = true;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	assert_int_equal(lg.n, 4);
	assert_int_equal(lg.r[2].kind, HLOG_REDO_DEL);
	assert_int_equal(lg.r[2].rtype, HLOG_T_PART);
	assert_false(lg.r[3].more);
	got x;
	assert_int_equal(gf_read(f, &g.parts[1].key, &x), HLOG_NOTFOUND);
	assert_int_equal(gf_read(f, &g.head, &x), HLOG_OK);
	assert_memory_equal(x.v, "H12", 3);
	assert_int_equal(x.len, 3);
	assert_int_equal(hlog_key_count(f->l), 1);
	/* A group that deletes its head and its parts (a large collection emptied). */
	grp d;
	grp_init(&d, "d", 2, 30);
	assert_int_equal(grp_run(f, &d), HLOG_OK);
	assert_int_equal(hlog_key_count(f->l), 2);
	d.action = HLOG_RMW_DELETE;
	d.parts[0].del = d.parts[1].del = true;
	lg.n = 0;
	assert_int_equal(grp_run(f, &d), HLOG_OK);
	assert_int_equal(lg.n, 3);
	assert_int_equal(lg.r[0].kind, HLOG_REDO_DEL);
	assert_int_equal(lg.r[0].rtype, HLOG_T_STRING);
	assert_int_equal(gf_read(f, &d.head, &x), HLOG_NOTFOUND);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(gf_read(f, &d.parts[i].key, &x), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), 1);
	/* A group without parts is an RMW of its head written as a new record. */
	lg.n = 0;
	g.n = 0;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	assert_int_equal(lg.n, 1);
	assert_false(lg.r[0].more);
	hlog_session_set_redo(f->s, NULL, NULL);
}

static void test_group_whose_plan_fails_writes_nothing(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	grp g;
	grp_init(&g, "h", 3, 100);
	hlog_info i0 = info_of(f->l);
	g.fail_rc = -ERANGE;
	assert_int_equal(grp_run(f, &g), -ERANGE);
	g.fail_rc = 0;
	g.action = HLOG_RMW_KEEP;
	assert_int_equal(grp_run(f, &g), -EINVAL);
	g.action = HLOG_RMW_DELETE;   /* of an absent head: nothing to delete */
	assert_int_equal(grp_run(f, &g), -EINVAL);
	/* Too big: the sum of the records over hlog_group_max_bytes (a quarter of 64 pages here). */
	grp big;
	grp_init(&big, "big", 40, 2000);
	assert_true(40 * 2000 > hlog_group_max_bytes(f->l));
	assert_int_equal(hlog_group_max_bytes(f->l), 64 * PAGE / 4);
	assert_int_equal(grp_run(f, &big), SPW_E_TOO_BIG);
	/* A user key among the parts, an internal head. */
	grp bad;
	grp_init(&bad, "x", 2, 10);
	hlog_key_init(&bad.parts[1].key, "x|b1", 4);
	assert_int_equal(grp_run(f, &bad), -EINVAL);
	hlog_key_init_internal(&bad.head, "x", 1);
	bad.parts[1].key.internal = true;
	assert_int_equal(grp_run(f, &bad), -EINVAL);
	hlog_info i1 = info_of(f->l);
	assert_int_equal(i1.tail, i0.tail);             /* no byte reserved */
	got x;
	assert_int_equal(gf_read(f, &g.head, &x), HLOG_NOTFOUND);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(gf_read(f, &g.parts[i].key, &x), HLOG_NOTFOUND);
	assert_int_equal(hlog_key_count(f->l), 0);
	/* And the store goes on: the same group succeeds now. */
	g.action = HLOG_RMW_WRITE;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	assert_int_equal(info_of(f->l).tail, i0.tail + hlog_record_bytes(1, 2, false) +
	                 3 * hlog_record_bytes(strlen(g.pkeys[0]), 100, false));
}

/* The race: while the group's first plan runs, another session writes the head. */
typedef struct racer { hlog *l; const hlog_key *k; } racer;

static void *racer_main(void *arg)
{
	racer *r = arg;
	hlog_session *s;
	assert_int_equal(hlog_session_open(r->l, &s), 0);
	hlog_session_protect(s);
	hlog_session_set_now(s, 1000000);
	assert_int_equal(hlog_upsert_typed(s, r->k, "R", 1, HLOG_NO_EXPIRY, HLOG_T_HEAD), HLOG_OK);
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

static hlog *race_l;
static void race_in_plan(grp *g)
{
	/* The head is below SafeReadOnly (no lock held by the group's lookup): the racer's RCU
	 * publishes a new version, and the group's CAS, which expects the old entry, loses. */
	racer r = { race_l, &g->head };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, racer_main, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
}

typedef struct visit_cnt { uint64_t part_valid, part_garbage, head_valid; } visit_cnt;

static void visit_fn(void *ctx, uint64_t addr, const log_rec *r, uint64_t info)
{
	(void)addr;
	(void)r;
	visit_cnt *c = ctx;
	if (rec_type(info) == HLOG_T_PART)
		(info & REC_VALID) ? c->part_valid++ : c->part_garbage++;
	else if (rec_type(info) == HLOG_T_HEAD && (info & REC_VALID))
		c->head_valid++;
}

static void test_group_that_loses_the_race_for_its_head_plans_again(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 0);
	race_l = f->l;
	hlog_key hk;
	hlog_key_init(&hk, "h", 1);
	assert_int_equal(hlog_upsert_typed(f->s, &hk, "old", 3, HLOG_NO_EXPIRY, HLOG_T_HEAD), HLOG_OK);
	uint64_t head_addr = info_of(f->l).tail - hlog_record_bytes(1, 3, false);
	/* Turn pages until the head is below SafeReadOnly (mutable_percent 0). */
	for (int i = 0; info_of(f->l).safe_read_only <= head_addr; i++) {
		test_key t;
		test_key_make(&t, "fill", i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "........................................", 40,
		                             HLOG_NO_EXPIRY), HLOG_OK);
		hlog_session_refresh(f->s);
		assert_true(i < 10000);
	}
	grp g;
	grp_init(&g, "h", 3, 50);
	g.in_plan = race_in_plan;
	uint64_t retries0 = info_of(f->l).retries;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	assert_int_equal(g.plans, 2);                      /* planned again ... */
	assert_string_equal(g.seen, "R");                  /* ... on the racer's value */
	grp_check(f, &g, "R1", NULL);
	assert_true(info_of(f->l).retries > retries0);
	/* The lost span is garbage: its parts sealed and invalid, one valid version of each part. */
	visit_cnt c = { 0 };
	hlog_records_visit(f->l, visit_fn, &c);
	assert_int_equal(c.part_valid, 3);
	assert_int_equal(c.part_garbage, 3);
}

static void gf_fill_to_device(gf *f, uint64_t addr)
{
	static uint8_t val[900];
	memset(val, 'f', sizeof(val));
	for (int i = 0; info_of(f->l).head <= addr; i++) {
		test_key t;
		test_key_make(&t, "filler", i);
		int rc;
		hlog_session_set_op(f->s, &t);
		while ((rc = hlog_upsert(f->s, &t.k, val, sizeof(val), HLOG_NO_EXPIRY)) == HLOG_PENDING) {
			hlog_session_poll(f->s);
			if (hlog_session_inflight(f->s))
				store_fd_wait(f->fd, 5);
		}
		hlog_session_release(f->s, &t);
		assert_int_equal(rc, HLOG_OK);
		assert_true(i < 100000);
	}
}

static void test_group_is_pending_while_its_old_head_is_on_the_device(void **state)
{
	gf *f = gf_open(state, true, 8 * PAGE, 50);
	grp g;
	grp_init(&g, "h", 3, 100);
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	got x;
	assert_int_equal(gf_read(f, &g.head, &x), HLOG_OK);
	gf_fill_to_device(f, info_of(f->l).tail);
	hlog_info i0 = info_of(f->l);
	hlog_session_set_op(f->s, &g);
	assert_int_equal(hlog_group_rmw(f->s, &g.head, &grp_ops, &g, g.parts, g.n), HLOG_PENDING);
	assert_int_equal(info_of(f->l).tail, i0.tail);     /* nothing written */
	assert_int_equal(grp_run(f, &g), HLOG_OK);         /* the re-run after the read */
	assert_true(info_of(f->l).pending_reads > i0.pending_reads);
	grp_check(f, &g, "H12", NULL);
	/* Everything (the parts too) to the device and back. */
	gf_fill_to_device(f, info_of(f->l).tail);
	grp_check(f, &g, "H12", NULL);
}

/* Parts' addresses: each record within one page, back to back except at page ends. */
static void grp_check_layout(const grp *g, const uint64_t *addrs)
{
	for (size_t i = 0; i < g->n; i++) {
		uint64_t size = hlog_record_bytes(g->parts[i].key.len, g->parts[i].len, false);
		assert_true((addrs[i] & (PAGE - 1)) + size <= PAGE);
		if (i > 0) {
			uint64_t prev_end = addrs[i - 1] + hlog_record_bytes(g->parts[i - 1].key.len,
			                                                      g->parts[i - 1].len, false);
			assert_true(addrs[i] == prev_end || (addrs[i] & (PAGE - 1)) == 0);
		}
	}
}

static void test_group_larger_than_what_is_left_of_a_page_starts_a_fresh_page(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	hlog_key k;
	hlog_key_init(&k, "pad", 3);
	assert_int_equal(hlog_upsert(f->s, &k, "x", 1, HLOG_NO_EXPIRY), HLOG_OK);
	static uint8_t pad[3000];
	hlog_key_init(&k, "pad2", 4);
	assert_int_equal(hlog_upsert(f->s, &k, pad, sizeof(pad), HLOG_NO_EXPIRY), HLOG_OK);
	uint64_t t0 = info_of(f->l).tail;
	assert_true((t0 & (PAGE - 1)) > 2000);
	grp g;
	grp_init(&g, "h", 4, 600);   /* about 2.5 KiB: not in the 1 KiB left */
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	uint64_t addrs[GMAX];
	grp_check(f, &g, "H1", addrs);
	got x;
	assert_int_equal(gf_read(f, &g.head, &x), HLOG_OK);
	assert_int_equal(x.addr, (t0 | (PAGE - 1)) + 1);   /* the next page's start */
	assert_int_equal(addrs[0], x.addr + hlog_record_bytes(1, 2, false));
	grp_check_layout(&g, addrs);
}

/* The group over several pages of the walker tests: 12 parts of 1500 bytes, two a page. */
static void grp_multi(gf *f, grp *g, uint64_t *addrs)
{
	grp_init(g, "m", 12, 1500);
	assert_int_equal(grp_run(f, g), HLOG_OK);
	grp_check(f, g, "H1", addrs);
	grp_check_layout(g, addrs);
	assert_true(addrs[11] - addrs[0] >= 4 * PAGE);   /* several pages */
}

typedef struct scan_cnt { int heads, parts, other; } scan_cnt;

static void scan_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	scan_cnt *c = ctx;
	if (v->rtype == HLOG_T_PART)
		c->parts++;
	else if (klen == 1 && memcmp(key, "m", 1) == 0)
		c->heads++;
	else
		c->other++;
}

static void test_group_over_several_pages_is_parsed_by_scan_walker_and_compaction(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	grp g;
	uint64_t addrs[GMAX];
	grp_multi(f, &g, addrs);
	scan_cnt sc = { 0 };
	assert_int_equal(scan_whole(f->s, 8, scan_fn, &sc), 0);
	assert_int_equal(sc.heads, 1);
	assert_int_equal(sc.parts, 0);
	visit_cnt c = { 0 };
	hlog_records_visit(f->l, visit_fn, &c);
	assert_int_equal(c.part_valid, 12);
	assert_int_equal(c.head_valid, 1);
	assert_int_equal(c.part_garbage, 0);
	/* Compaction over the group's pages: push them below SafeReadOnly, compact to there. */
	for (int i = 0; info_of(f->l).safe_read_only <= addrs[11] + PAGE; i++) {
		test_key t;
		test_key_make(&t, "fill", i);
		assert_int_equal(hlog_upsert(f->s, &t.k, "........", 8, HLOG_NO_EXPIRY), HLOG_OK);
		hlog_session_refresh(f->s);
		assert_true(i < 100000);
	}
	hlog_session_unprotect(f->s);
	hlog_compact_opts o = { .until = (addrs[11] | (PAGE - 1)) + 1, .mode = HLOG_COMPACT_COPY };
	hlog_compact_info ci;
	memset(&ci, 0, sizeof(ci));
	assert_int_equal(hlog_compact(f->l, f->s, &o, &ci), 0);
	hlog_session_protect(f->s);
	assert_true(ci.end > addrs[11]);                 /* Begin passed the whole group */
	assert_true(ci.copied >= 13);                    /* the head and every part copied */
	uint64_t after[GMAX];
	grp_check(f, &g, "H1", after);
	for (size_t i = 0; i < 12; i++)
		assert_true(after[i] >= ci.end);
}

static void test_group_over_several_pages_survives_checkpoint_and_recovery(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	snprintf(f->ckdir, sizeof(f->ckdir), "/tmp/spw-groupck.XXXXXX");
	assert_non_null(mkdtemp(f->ckdir));
	char store[96], err[256] = "", why[512] = "";
	snprintf(store, sizeof(store), "%s/Store", f->ckdir);
	assert_int_equal(mkdir(store, 0755), 0);
	assert_int_equal(store_env_dev_open("posix", store, 0, &f->logdev, err, sizeof(err)), 0);
	grp g;
	uint64_t addrs[GMAX];
	hlog_key k;
	hlog_key_init(&k, "before", 6);
	assert_int_equal(hlog_upsert(f->s, &k, "b", 1, HLOG_NO_EXPIRY), HLOG_OK);
	grp_multi(f, &g, addrs);
	hlog_session_unprotect(f->s);
	assert_int_equal(hlog_session_attach(f->s, gf_ready, f), 0);
	hlog_ckpt_info info;
	memset(&info, 0, sizeof(info));
	int rc = hlog_checkpoint(f->l, f->s, f->ckdir, f->logdev, &info);
	if (rc < 0)
		fprintf(stderr, "checkpoint: %s\n", info.why);
	assert_int_equal(rc, 0);
	assert_true(info.cut > addrs[11]);
	assert_int_equal(info.keys, 2);
	hlog_session_close(f->s);
	f->s = NULL;
	hlog_close(f->l);
	f->l = NULL;

	hlog_config c = log_test_config(64 * PAGE, PAGE, 50);
	assert_int_equal(hlog_open(&f->l, &c), 0);
	assert_int_equal(hlog_session_open(f->l, &f->s), 0);
	assert_int_equal(hlog_session_attach(f->s, gf_ready, f), 0);
	hlog_session_set_now(f->s, 1000000);
	rc = hlog_recover(f->l, f->s, f->ckdir, f->logdev, 0, &info, why, sizeof(why));
	if (rc < 0)
		fprintf(stderr, "recover: %s\n", why);
	assert_int_equal(rc, 0);
	hlog_session_protect(f->s);
	uint64_t after[GMAX];
	grp_check(f, &g, "H1", after);
	for (size_t i = 0; i < 12; i++)
		assert_int_equal(after[i], addrs[i]);
	assert_int_equal(hlog_key_count(f->l), 2);
	visit_cnt vc = { 0 };
	hlog_records_visit(f->l, visit_fn, &vc);
	assert_int_equal(vc.part_valid, 12);
	assert_int_equal(vc.head_valid, 1);
}

/* With a device: a group over several pages goes to the device page by page (no span marks: each
 * page written and evicted by itself) and comes back whole; compaction reads it from the device. */
static void test_group_over_several_pages_goes_to_the_device_and_back(void **state)
{
	gf *f = gf_open(state, true, 32 * PAGE, 50);
	grp g;
	uint64_t addrs[GMAX];
	grp_multi(f, &g, addrs);
	uint64_t head_addr;
	got x;
	assert_int_equal(gf_read(f, &g.head, &x), HLOG_OK);
	head_addr = x.addr;
	gf_fill_to_device(f, addrs[11] + PAGE);
	uint64_t found0 = info_of(f->l).pending_found;
	uint64_t after[GMAX];
	grp_check(f, &g, "H1", after);
	for (size_t i = 0; i < 12; i++)
		assert_int_equal(after[i], addrs[i]);
	assert_true(info_of(f->l).pending_found >= found0 + 13);   /* all read back from the device */
	/* A second group over the cold parts: PENDING on the head, then new versions of all. */
	for (size_t i = 0; i < 12; i++)
		g.pvals[i][0] = 'Z';
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	grp_check(f, &g, "H12", after);
	for (size_t i = 0; i < 12; i++)
		assert_true(after[i] > addrs[11]);
	/* Compaction of the first group's pages from the device: nothing live there any more but the
	 * fillers' keys; the group's new versions stay. */
	hlog_session_unprotect(f->s);
	hlog_compact_opts o = { .until = (addrs[11] | (PAGE - 1)) + 1, .mode = HLOG_COMPACT_COPY };
	hlog_compact_info ci;
	memset(&ci, 0, sizeof(ci));
	assert_int_equal(hlog_compact(f->l, f->s, &o, &ci), 0);
	hlog_session_protect(f->s);
	assert_true(ci.end > addrs[11] && ci.begin <= head_addr);
	assert_true(ci.read_bytes > 0);
	grp_check(f, &g, "H12", NULL);
}

/* Two threads run groups on one head (an 8-byte counter: incr_ops) each with a part of its own:
 * no increment is lost (a lost head CAS plans again), each part holds its thread's last value, and
 * the counts see one key. */
#define RACE_GROUPS 3000
typedef struct gthread { hlog *l; int id; uint64_t retries; } gthread;

static void *group_thread(void *arg)
{
	gthread *t = arg;
	hlog_session *s;
	assert_int_equal(hlog_session_open(t->l, &s), 0);
	hlog_session_set_now(s, 1000000);
	hlog_session_protect(s);
	hlog_key head;
	hlog_key_init(&head, "ctr", 3);
	char pk[8];
	snprintf(pk, sizeof(pk), "t%d", t->id);
	for (uint64_t i = 1; i <= RACE_GROUPS; i++) {
		hlog_group_part part = { .val = &i, .len = sizeof(i) };
		hlog_key_init_internal(&part.key, pk, strlen(pk));
		incr_ctx c = { .delta = 1, .expire_ms = HLOG_NO_EXPIRY };
		assert_int_equal(hlog_group_rmw(s, &head, &incr_ops, &c, &part, 1), HLOG_OK);
		if (i % 16 == 0)
			hlog_session_refresh(s);
	}
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

static void test_groups_racing_on_one_head_lose_no_update(void **state)
{
	gf *f = gf_open(state, false, 512 * PAGE, 10);   /* mostly immutable heads: CAS races */
	gthread t[2];
	pthread_t th[2];
	hlog_session_unprotect(f->s);
	for (int i = 0; i < 2; i++) {
		t[i] = (gthread){ f->l, i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, group_thread, &t[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	hlog_session_protect(f->s);
	hlog_key head;
	hlog_key_init(&head, "ctr", 3);
	assert_int_equal(read_counter(f->s, &head), 2 * RACE_GROUPS);
	for (int i = 0; i < 2; i++) {
		char pk[8];
		snprintf(pk, sizeof(pk), "t%d", i);
		hlog_key k;
		hlog_key_init_internal(&k, pk, strlen(pk));
		assert_int_equal(read_counter(f->s, &k), RACE_GROUPS);
	}
	assert_int_equal(hlog_key_count(f->l), 1);
	visit_cnt c = { 0 };
	hlog_records_visit(f->l, visit_fn, &c);
	assert_int_equal(c.part_valid, 2 * RACE_GROUPS);   /* one per won group; lost spans are garbage */
	print_message("lost spans: %llu parts, retries %llu\n", (unsigned long long)c.part_garbage,
	              (unsigned long long)info_of(f->l).retries);
}

/* A group that names one part twice (the same internal key in two of its parts): the later one is
 * the part's value. Its publish walks to the earlier one, which is the group's own record, not valid
 * until the group ends: waiting for it there would wait forever. */
static void test_group_naming_a_part_twice_keeps_the_later_value(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	grp g;
	grp_init(&g, "h", 3, 40);
	g.parts[2].key = g.parts[0].key;   /* part 2 rewrites part 0 */
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	got x;
	assert_int_equal(gf_read(f, &g.parts[0].key, &x), HLOG_OK);
	assert_int_equal(x.len, 40);
	assert_memory_equal(x.v, g.pvals[2], 40);
	assert_int_equal(gf_read(f, &g.parts[1].key, &x), HLOG_OK);
	assert_memory_equal(x.v, g.pvals[1], 40);
	assert_int_equal(hlog_key_count(f->l), 1);
	/* Again, the second time over an older version, and with the later one a tombstone. */
	g.parts[2].del = true;
	assert_int_equal(grp_run(f, &g), HLOG_OK);
	assert_int_equal(gf_read(f, &g.parts[0].key, &x), HLOG_NOTFOUND);
	visit_cnt c = { 0 };
	hlog_records_visit(f->l, visit_fn, &c);
	assert_int_equal(c.part_valid, 6);
}

/* A part's index entry cleared between its publish's lookup and its CAS (a fresh entry, tag|0, is
 * what hidx_clear_below takes when compaction or a FLUSHALL moves Begin): the failed CAS hands back
 * a word of no key (0, or another key's reuse of the slot), so the publish must look the entry up
 * again rather than retry the CAS on that word. A thread clears the fresh entries (below address
 * 1: nothing published) while groups write new parts; every part reads back. */
#define CLEAR_GROUPS 3000
#define CLEAR_PARTS 4
typedef struct clearer { hlog *l; atomic_bool stop; uint64_t runs; } clearer;

static void *clear_thread(void *arg)
{
	clearer *c = arg;
	while (!atomic_load(&c->stop)) {
		hidx_clear_below(c->l->idx, 1);
		c->runs++;
	}
	return NULL;
}

static void test_group_parts_survive_their_fresh_entries_being_cleared(void **state)
{
	gf *f = gf_open(state, false, 1024 * PAGE, 50);
	clearer c = { .l = f->l };
	atomic_init(&c.stop, false);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, clear_thread, &c), 0);
	hlog_key head;
	hlog_key_init(&head, "ctr", 3);
	static char keys[CLEAR_GROUPS][CLEAR_PARTS][16];
	for (int i = 0; i < CLEAR_GROUPS; i++) {
		hlog_group_part parts[CLEAR_PARTS];
		for (int j = 0; j < CLEAR_PARTS; j++) {
			int n = snprintf(keys[i][j], sizeof(keys[i][j]), "c%d|%d", i, j);
			parts[j] = (hlog_group_part){ .val = keys[i][j], .len = (size_t)n };
			hlog_key_init_internal(&parts[j].key, keys[i][j], (size_t)n);
		}
		incr_ctx ic = { .delta = 1, .expire_ms = HLOG_NO_EXPIRY };
		assert_int_equal(hlog_group_rmw(f->s, &head, &incr_ops, &ic, parts, CLEAR_PARTS), HLOG_OK);
		if (i % 16 == 0)
			hlog_session_refresh(f->s);
	}
	atomic_store(&c.stop, true);
	assert_int_equal(pthread_join(th, NULL), 0);
	int lost = 0;
	for (int i = 0; i < CLEAR_GROUPS; i++)
		for (int j = 0; j < CLEAR_PARTS; j++) {
			hlog_key k;
			hlog_key_init_internal(&k, keys[i][j], strlen(keys[i][j]));
			got x;
			if (gf_read(f, &k, &x) != HLOG_OK || x.len != strlen(keys[i][j]) ||
			    memcmp(x.v, keys[i][j], x.len) != 0)
				lost++;
		}
	print_message("clears: %llu, parts lost: %d\n", (unsigned long long)c.runs, lost);
	assert_int_equal(lost, 0);
	assert_int_equal(read_counter(f->s, &head), CLEAR_GROUPS);
}

/* ---------------- a write sharing a part's entry while the group runs (group.c note 8) ---------------- */

/* A user key sharing a part's index entry (same bucket and tag: k42603767 and "h|b0", found by
 * search), or another group's part sharing it, written by another thread while a group is between
 * its span's reservation and its parts' CASes. That record, reserved after the span, would lie
 * above it, and the part's CAS would go on top of it with its previous address pointing up, which
 * pending.c's chain reads, recover.c's repair and compaction's Begin rule cannot follow. The group
 * holds the entry's stripe over that window: the other write starts over (group_entry_waits) and
 * publishes once the parts are in, on top of them. The fill callback waits until the other thread
 * either has been refused once (the fix) or is done (without it: the test then fails on prev). */
#define COLLIDE_KEY "k42603767"

typedef struct sharer {
	hlog *l;
	int kind;                    /* 0: an upsert of COLLIDE_KEY; 1: a group whose part is pkey */
	char pkey[24];
	atomic_int done;
	int rc;
	pthread_t th;
	uint64_t waits0;             /* group_entry_waits before */
	bool started;
} sharer;

static sharer the_sharer;

static void *sharer_main(void *arg)
{
	sharer *r = arg;
	hlog_session *s2;
	assert_int_equal(hlog_session_open(r->l, &s2), 0);
	hlog_session_protect(s2);
	if (r->kind == 0) {
		hlog_key k2;
		hlog_key_init(&k2, COLLIDE_KEY, strlen(COLLIDE_KEY));
		r->rc = hlog_upsert(s2, &k2, "x", 1, HLOG_NO_EXPIRY);
	} else {
		hlog_key head;
		hlog_key_init(&head, "g2", 2);
		hlog_group_part part = { .val = "y", .len = 1 };
		hlog_key_init_internal(&part.key, r->pkey, strlen(r->pkey));
		incr_ctx ic = { .delta = 1, .expire_ms = HLOG_NO_EXPIRY };
		r->rc = hlog_group_rmw(s2, &head, &incr_ops, &ic, &part, 1);
	}
	hlog_session_unprotect(s2);
	hlog_session_close(s2);
	atomic_store(&r->done, 1);
	return NULL;
}

/* The group's fill: the span is reserved, no part is published yet. Start the other writer and
 * wait until it was refused once or is done (a condition, no time). */
static void sharer_in_fill(grp *g)
{
	sharer *r = &the_sharer;
	(void)g;
	if (r->started)
		return;
	r->started = true;
	atomic_init(&r->done, 0);
	r->waits0 = info_of(r->l).group_entry_waits;
	assert_int_equal(pthread_create(&r->th, NULL, sharer_main, r), 0);
	while (!atomic_load(&r->done) && info_of(r->l).group_entry_waits == r->waits0)
		sched_yield();
}

/* Run the race of part 0 of a 1-part group "h" against the sharer: a first group writes the part,
 * the second (value 'Z') races. Returns the part's address; *other: the sharer's record's. */
static uint64_t race_run(gf *f, grp *g, int kind, const char *pkey, const hlog_key *other_key, uint64_t *other)
{
	grp_init(g, "h", 1, 40);
	assert_int_equal(grp_run(f, g), HLOG_OK);
	memset(&the_sharer, 0, sizeof(the_sharer));
	the_sharer.l = f->l;
	the_sharer.kind = kind;
	snprintf(the_sharer.pkey, sizeof(the_sharer.pkey), "%s", pkey ? pkey : "");
	g->in_fill = sharer_in_fill;
	g->pvals[0][0] = 'Z';
	assert_int_equal(grp_run(f, g), HLOG_OK);
	assert_true(the_sharer.started);
	assert_int_equal(pthread_join(the_sharer.th, NULL), 0);
	assert_int_equal(the_sharer.rc, HLOG_OK);
	got x;
	assert_int_equal(gf_read(f, &g->parts[0].key, &x), HLOG_OK);
	assert_int_equal(x.v[0], 'Z');
	uint64_t a = x.addr;
	assert_int_equal(gf_read(f, other_key, &x), HLOG_OK);
	*other = x.addr;
	return a;
}

/* The path ran: the other write was refused while the group held the entry. Asserted last, so that
 * without the locks a test fails on what the race did. */
static void race_check_waited(gf *f)
{
	uint64_t waits = info_of(f->l).group_entry_waits - the_sharer.waits0;
	print_message("group_entry_waits: %llu\n", (unsigned long long)waits);
	assert_true(waits >= 1);
}

/* An internal key sharing the entry of "h|b0" (same tag and low 16 hash bits: found by search). */
#define COLLIDE_PART "c1404569566"

static void collide_check(gf *f, const hlog_key *k)
{
	hlog_key p0;
	hlog_key_init_internal(&p0, "h|b0", 4);
	hidx_table *t = hidx_cur(f->l->idx);
	assert_int_equal(hidx_tag_of(k->hash), hidx_tag_of(p0.hash));
	assert_int_equal(hidx_bucket_no(t, k->hash), hidx_bucket_no(t, p0.hash));
	assert_int_equal(hidx_entry_stripe(k->hash), hidx_entry_stripe(p0.hash));
}

static void test_group_part_chain_stays_below_its_address_when_a_key_sharing_its_entry_is_written(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	grp g;
	hlog_key k2;
	hlog_key_init(&k2, COLLIDE_KEY, strlen(COLLIDE_KEY));
	collide_check(f, &k2);
	uint64_t k2a = 0, a = race_run(f, &g, 0, NULL, &k2, &k2a);
	uint64_t prev = atomic_load(&hlog_rec_at(f->l, a)->info) & REC_PREV_MASK;
	print_message("part at %llu, its prev %llu, the other key at %llu\n", (unsigned long long)a,
	              (unsigned long long)prev, (unsigned long long)k2a);
	assert_true(prev < a);
	assert_true(k2a > a);   /* the other key went on top, once the part was in */
	assert_int_equal(atomic_load(&hlog_rec_at(f->l, k2a)->info) & REC_PREV_MASK, a);
	assert_int_equal(hlog_key_count(f->l), 2);
	race_check_waited(f);
}

/* Another group whose part shares the entry: its lock finds the stripe held and it starts over,
 * counted the same way; both parts read back, every chain going down. */
static void test_groups_whose_parts_share_an_entry_wait_for_each_other(void **state)
{
	gf *f = gf_open(state, false, 64 * PAGE, 50);
	grp g;
	hlog_key other;
	hlog_key_init_internal(&other, COLLIDE_PART, strlen(COLLIDE_PART));
	collide_check(f, &other);
	uint64_t oa = 0, a = race_run(f, &g, 1, COLLIDE_PART, &other, &oa);
	assert_true((atomic_load(&hlog_rec_at(f->l, a)->info) & REC_PREV_MASK) < a);
	assert_true(oa > a);
	assert_true((atomic_load(&hlog_rec_at(f->l, oa)->info) & REC_PREV_MASK) < oa);
	hlog_key g2;
	hlog_key_init(&g2, "g2", 2);
	assert_int_equal(read_counter(f->s, &g2), 1);
	race_check_waited(f);
}

/* The race with a device, then everything pushed to the device: reading the other key and the part
 * back walks their shared chain there (chain reads), which an upward link would have made fail
 * (pending.c refuses a previous address at or above the record's as corrupt: SPW_E_CORRUPT). */
static void test_group_race_with_a_key_sharing_its_entry_reads_back_from_the_device(void **state)
{
	gf *f = gf_open(state, true, 8 * PAGE, 50);
	grp g;
	hlog_key k2;
	hlog_key_init(&k2, COLLIDE_KEY, strlen(COLLIDE_KEY));
	uint64_t k2a = 0;
	race_run(f, &g, 0, NULL, &k2, &k2a);
	gf_fill_to_device(f, info_of(f->l).tail);
	hlog_info i0 = info_of(f->l);
	got x;
	assert_int_equal(gf_read(f, &g.parts[0].key, &x), HLOG_OK);   /* k2 first, then the part */
	assert_int_equal(x.v[0], 'Z');
	assert_int_equal(gf_read(f, &k2, &x), HLOG_OK);
	assert_memory_equal(x.v, "x", 1);
	hlog_info i1 = info_of(f->l);
	assert_true(i1.chain_reads > i0.chain_reads);
	assert_int_equal(i1.pending_errors, i0.pending_errors);
	race_check_waited(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_group_of_a_head_and_three_parts_is_readable_whole, gf_teardown),
		cmocka_unit_test_teardown(test_group_whose_plan_fails_writes_nothing, gf_teardown),
		cmocka_unit_test_teardown(test_group_that_loses_the_race_for_its_head_plans_again, gf_teardown),
		cmocka_unit_test_teardown(test_group_is_pending_while_its_old_head_is_on_the_device, gf_teardown),
		cmocka_unit_test_teardown(test_group_larger_than_what_is_left_of_a_page_starts_a_fresh_page,
		                          gf_teardown),
		cmocka_unit_test_teardown(test_group_over_several_pages_is_parsed_by_scan_walker_and_compaction,
		                          gf_teardown),
		cmocka_unit_test_teardown(test_group_over_several_pages_survives_checkpoint_and_recovery,
		                          gf_teardown),
		cmocka_unit_test_teardown(test_group_over_several_pages_goes_to_the_device_and_back, gf_teardown),
		cmocka_unit_test_teardown(test_groups_racing_on_one_head_lose_no_update, gf_teardown),
		cmocka_unit_test_teardown(test_group_naming_a_part_twice_keeps_the_later_value, gf_teardown),
		cmocka_unit_test_teardown(test_group_parts_survive_their_fresh_entries_being_cleared, gf_teardown),
		cmocka_unit_test_teardown(
			test_group_part_chain_stays_below_its_address_when_a_key_sharing_its_entry_is_written,
			gf_teardown),
		cmocka_unit_test_teardown(test_groups_whose_parts_share_an_entry_wait_for_each_other, gf_teardown),
		cmocka_unit_test_teardown(test_group_race_with_a_key_sharing_its_entry_reads_back_from_the_device,
		                          gf_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
