/*
 * test_ikeys.c - internal keys (hlog.h, hlog_key; ops.c note 5): a user key and an internal key
 * with the same bytes are two keys (read, rmw, delete, upsert, in memory and through the device
 * and back), internal records count in no key count and are never scanned or expired, writes
 * stay in their key's namespace, and hlog_value.addr names the record a value came from.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "store_env.h"

#define KIB 1024ULL

typedef struct ik {
	store_env env;               /* with a device (dev_test), else only env.l */
	hlog *l;
	hlog_session *s;
	int fd;
	int ready;
	int fillers;                 /* distinct filler keys written (ik_push_below_head) */
} ik;

static void ik_ready(void *cb_arg, void *op_ctx)
{
	(void)op_ctx;
	((ik *)cb_arg)->ready++;
}

static ik *ik_open(void **state, bool device, uint64_t memory, uint64_t page)
{
	ik *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	*state = f;
	hlog_config c = log_test_config(memory, page, 50);
	if (device) {
		store_env_open(&f->env, "localmemory", "/tmp/spw-ikeys.XXXXXX", 0, &c);
		f->l = f->env.l;
		f->s = store_session_open(f->l, ik_ready, f, 1000000, &f->fd);
	} else {
		assert_int_equal(hlog_open(&f->l, &c), 0);
		assert_int_equal(hlog_session_open(f->l, &f->s), 0);
		hlog_session_set_now(f->s, 1000000);
		f->env.l = f->l;
	}
	hlog_session_protect(f->s);
	return f;
}

static int ik_teardown(void **state)
{
	ik *f = *state;
	if (!f)
		return 0;
	if (f->s) {
		hlog_session_unprotect(f->s);
		hlog_session_close(f->s);
	}
	if (f->env.d)
		store_env_close(&f->env);
	else
		hlog_close(f->l);
	free(f);
	return 0;
}

/* One operation of the tests, run again until it is not pending (the server's driver, in small). */
enum { IK_READ, IK_UPSERT, IK_DELETE, IK_INCR };
typedef struct ikop {
	int kind;
	const hlog_key *k;
	const void *val;
	size_t len;
	uint8_t rtype;
	read_buf out;
} ikop;

static int ik_run_once(ik *f, ikop *o)
{
	hlog_session_set_op(f->s, o);
	switch (o->kind) {
	case IK_READ:
		o->out.calls = 0;
		return hlog_read(f->s, o->k, read_copy_fn, &o->out);
	case IK_UPSERT:
		return hlog_upsert_typed(f->s, o->k, o->val, o->len, HLOG_NO_EXPIRY, o->rtype);
	case IK_DELETE:
		return hlog_delete(f->s, o->k);
	default:
		return incr_by(f->s, o->k, 1, HLOG_NO_EXPIRY);
	}
}

static int ik_run(ik *f, ikop *o)
{
	int rc, rounds = 0;
	while ((rc = ik_run_once(f, o)) == HLOG_PENDING) {
		assert_true(++rounds < 100000);
		store_pending_step(f->s, f->fd);
	}
	if (f->env.d)
		hlog_session_release(f->s, o);
	return rc;
}

static int ik_read(ik *f, const hlog_key *k, read_buf *out)
{
	ikop o = { .kind = IK_READ, .k = k };
	int rc = ik_run(f, &o);
	*out = o.out;
	return rc;
}

static int ik_upsert(ik *f, const hlog_key *k, const char *v, uint8_t rtype)
{
	ikop o = { .kind = IK_UPSERT, .k = k, .val = v, .len = strlen(v), .rtype = rtype };
	return ik_run(f, &o);
}

static int ik_delete(ik *f, const hlog_key *k)
{
	ikop o = { .kind = IK_DELETE, .k = k };
	return ik_run(f, &o);
}

static int ik_incr(ik *f, const hlog_key *k)
{
	ikop o = { .kind = IK_INCR, .k = k };
	return ik_run(f, &o);
}

static bool ik_is(ik *f, const hlog_key *k, const char *want)
{
	read_buf b;
	return ik_read(f, k, &b) == HLOG_OK && b.calls == 1 && b.len == strlen(want) &&
	       memcmp(b.data, want, b.len) == 0;
}

static uint64_t ik_counter(ik *f, const hlog_key *k)
{
	read_buf b;
	uint64_t v = 0;
	if (ik_read(f, k, &b) == HLOG_OK && b.len == 8)
		memcpy(&v, b.data, 8);
	return v;
}

/* Filler user keys that push everything older to the device: writes until Head passes addr. */
static void ik_push_below_head(ik *f, uint64_t addr)
{
	static uint8_t val[900];
	memset(val, 'f', sizeof(val));
	for (int i = 0; info_of(f->l).head <= addr; i++) {
		test_key t;
		test_key_make(&t, "filler", i);
		ikop o = { .kind = IK_UPSERT, .k = &t.k, .val = val, .len = sizeof(val), .rtype = HLOG_T_STRING };
		assert_int_equal(ik_run(f, &o), HLOG_OK);
		assert_true(i < 1000000);
		if (i + 1 > f->fillers)
			f->fillers = i + 1;
	}
}

/* The same operations on both namespaces of the bytes "k", through f: each sees only its own. */
static void ik_both_namespaces(ik *f, bool device)
{
	hlog_key uk, xk;
	hlog_key_init(&uk, "k", 1);
	hlog_key_init_internal(&xk, "k", 1);
	assert_true(uk.hash == xk.hash);   /* same hash, same chain: only the type tells them apart */

	assert_int_equal(ik_upsert(f, &uk, "user", HLOG_T_STRING), HLOG_OK);
	read_buf b;
	assert_int_equal(ik_read(f, &xk, &b), HLOG_NOTFOUND);
	assert_int_equal(ik_upsert(f, &xk, "part", HLOG_T_PART), HLOG_OK);
	assert_true(ik_is(f, &uk, "user"));
	assert_true(ik_is(f, &xk, "part"));
	assert_int_equal(hlog_key_count(f->l), 1);
	if (device) {
		ik_push_below_head(f, info_of(f->l).tail);
		/* hlog_prefetch of the internal key reads its record (and then serves it from the cache). */
		int tag;
		hlog_session_set_op(f->s, &tag);
		assert_int_equal(hlog_prefetch(f->s, &xk), HLOG_PENDING);
		int rc, rounds = 0;
		while ((rc = hlog_prefetch(f->s, &xk)) == HLOG_PENDING) {
			assert_true(++rounds < 100000);
			hlog_session_poll(f->s);
			store_fd_wait(f->fd, 5);
		}
		assert_int_equal(rc, HLOG_OK);
		read_buf pb = { .calls = 0 };
		assert_int_equal(hlog_read(f->s, &xk, read_copy_fn, &pb), HLOG_OK);   /* no wait now */
		assert_memory_equal(pb.data, "part", 4);
		hlog_session_release(f->s, &tag);
		uint64_t found0 = info_of(f->l).pending_found;
		assert_true(ik_is(f, &xk, "part"));   /* read back from the device */
		assert_true(ik_is(f, &uk, "user"));
		assert_true(info_of(f->l).pending_found >= found0 + 2);
	}
	/* Delete the user key: the part stays. */
	assert_int_equal(ik_delete(f, &uk), HLOG_OK);
	assert_int_equal(ik_read(f, &uk, &b), HLOG_NOTFOUND);
	assert_true(ik_is(f, &xk, "part"));
	assert_int_equal(ik_delete(f, &uk), HLOG_NOTFOUND);
	if (device)
		ik_push_below_head(f, info_of(f->l).tail);
	/* RMW on each: two counters. */
	hlog_key uc, xc;
	hlog_key_init(&uc, "c", 1);
	hlog_key_init_internal(&xc, "c", 1);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ik_incr(f, &xc), HLOG_OK);
	assert_int_equal(ik_incr(f, &uc), HLOG_OK);
	if (device)
		ik_push_below_head(f, info_of(f->l).tail);
	assert_int_equal(ik_incr(f, &xc), HLOG_OK);
	assert_int_equal(ik_counter(f, &xc), 4);
	assert_int_equal(ik_counter(f, &uc), 1);
	/* Delete the part, the user key of the same bytes stays; a deleted part reads absent. */
	assert_int_equal(ik_delete(f, &xc), HLOG_OK);
	assert_int_equal(ik_read(f, &xc, &b), HLOG_NOTFOUND);
	assert_int_equal(ik_counter(f, &uc), 1);
	assert_true(ik_is(f, &xk, "part"));
	if (device) {
		ik_push_below_head(f, info_of(f->l).tail);
		assert_int_equal(ik_read(f, &xc, &b), HLOG_NOTFOUND);   /* its tombstone on the device */
		assert_int_equal(ik_counter(f, &uc), 1);
	}
	/* A user key written again over the part's bytes: both again. */
	assert_int_equal(ik_upsert(f, &uk, "user2", HLOG_T_STRING), HLOG_OK);
	assert_true(ik_is(f, &uk, "user2"));
	assert_true(ik_is(f, &xk, "part"));
	assert_int_equal(hlog_key_count(f->l), 2 + (uint64_t)f->fillers);   /* "k" and "c", never the parts */
	assert_int_equal(hlog_expires_count(f->l), 0);
}

static void test_user_and_internal_keys_with_equal_bytes_are_independent(void **state)
{
	ik *f = ik_open(state, false, 64 * 4 * KIB, 4 * KIB);
	ik_both_namespaces(f, false);
}

static void test_user_and_internal_keys_stay_independent_through_the_device(void **state)
{
	ik *f = ik_open(state, true, 8 * 4 * KIB, 4 * KIB);
	ik_both_namespaces(f, true);
}

static void test_writes_stay_in_their_key_namespace(void **state)
{
	ik *f = ik_open(state, false, 64 * 4 * KIB, 4 * KIB);
	hlog_key uk, xk;
	hlog_key_init(&uk, "n", 1);
	hlog_key_init_internal(&xk, "n", 1);
	assert_int_equal(hlog_upsert_typed(f->s, &xk, "v", 1, HLOG_NO_EXPIRY, HLOG_T_STRING), -EINVAL);
	assert_int_equal(hlog_upsert_typed(f->s, &xk, "v", 1, HLOG_NO_EXPIRY, HLOG_T_HEAD), -EINVAL);
	assert_int_equal(hlog_upsert_typed(f->s, &xk, "v", 1, 5000000, HLOG_T_PART), -EINVAL);
	assert_int_equal(hlog_upsert_typed(f->s, &uk, "v", 1, HLOG_NO_EXPIRY, HLOG_T_PART), -EINVAL);
	assert_int_equal(hlog_upsert(f->s, &xk, "v", 1, HLOG_NO_EXPIRY), -EINVAL);
	read_buf b;
	assert_int_equal(hlog_read(f->s, &xk, read_copy_fn, &b), HLOG_NOTFOUND);
	assert_int_equal(hlog_read(f->s, &uk, read_copy_fn, &b), HLOG_NOTFOUND);
	/* An RMW of an absent internal key sees rtype PART by default (incr keeps it). */
	assert_int_equal(incr_by(f->s, &xk, 7, HLOG_NO_EXPIRY), HLOG_OK);
	assert_int_equal(read_counter(f->s, &xk), 7);
	assert_int_equal(hlog_key_count(f->l), 0);
}

/* Scan visitor: counts user keys of "s:<i>" and anything with a part's type. */
typedef struct scan_seen_ctx {
	int user, parts, other;
} scan_seen_ctx;

static void scan_count_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	scan_seen_ctx *c = ctx;
	int i;
	if (v->rtype == HLOG_T_PART)
		c->parts++;
	else if (test_key_parse(key, klen, "s", &i))
		c->user++;
	else
		c->other++;
}

static void ik_scan_and_counts(ik *f, bool device)
{
	int n = 200;
	for (int i = 0; i < n; i++) {
		test_key t;
		test_key_make(&t, "s", i);
		hlog_key x;
		hlog_key_init_internal(&x, t.buf, t.k.len);
		assert_int_equal(ik_upsert(f, &x, "part", HLOG_T_PART), HLOG_OK);
		if (i % 2 == 0)
			assert_int_equal(ik_upsert(f, &t.k, "user", HLOG_T_STRING), HLOG_OK);
	}
	for (int i = 0; i < n; i++) {   /* only parts, no user key of the same bytes */
		test_key t;
		test_key_make(&t, "only", i);
		hlog_key x;
		hlog_key_init_internal(&x, t.buf, t.k.len);
		assert_int_equal(ik_upsert(f, &x, "p", HLOG_T_PART), HLOG_OK);
	}
	if (device)
		ik_push_below_head(f, info_of(f->l).tail);
	uint64_t fillers = 0;
	if (device) {
		/* The fillers are user keys "filler:i": count them out of DBSIZE below. */
		scan_seen_ctx all = { 0 };
		scan_whole(f->s, 16, scan_count_fn, &all);
		fillers = (uint64_t)all.other;
		assert_int_equal(fillers, f->fillers);
		assert_int_equal(all.parts, 0);
		assert_int_equal(all.user, n / 2);
	} else {
		scan_seen_ctx c = { 0 };
		assert_int_equal(scan_whole(f->s, 16, scan_count_fn, &c), 0);
		assert_int_equal(c.parts, 0);
		assert_int_equal(c.other, 0);
		assert_int_equal(c.user, n / 2);
	}
	assert_int_equal(hlog_key_count(f->l) - fillers, n / 2);
	/* The expiry cycle samples no part. */
	hlog_expire_stats st = { 0 };
	uint64_t cur = 0;
	do {
		cur = hlog_expire_step(f->s, cur, 64, &st);
	} while (cur);
	assert_int_equal(st.sampled, 0);
	assert_int_equal(st.expired, 0);
}

static void test_scan_and_key_counts_ignore_internal_records(void **state)
{
	ik *f = ik_open(state, false, 256 * 4 * KIB, 4 * KIB);
	ik_scan_and_counts(f, false);
}

static void test_scan_through_the_device_ignores_internal_records(void **state)
{
	ik *f = ik_open(state, true, 8 * 4 * KIB, 4 * KIB);
	ik_scan_and_counts(f, true);
	assert_true(info_of(f->l).scan_reads > 0);   /* the chains' device part was walked */
}

/* hlog_value.addr: the record the value came from (read, and rmw's old). */
typedef struct addr_ctx {
	uint64_t old_addr;
	int plans;
} addr_ctx;

static int addr_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	addr_ctx *c = ctx;
	c->plans++;
	c->old_addr = old ? old->addr : 0;
	out->action = HLOG_RMW_KEEP;
	return 0;
}

static void addr_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)ctx, (void)old, (void)dst, (void)in_place;
}

static void addr_read_fn(void *ctx, const hlog_value *v)
{
	*(uint64_t *)ctx = v->addr;
}

static void test_value_addr_names_the_record_it_came_from(void **state)
{
	ik *f = ik_open(state, true, 8 * 4 * KIB, 4 * KIB);
	hlog_key k;
	hlog_key_init(&k, "a", 1);
	uint64_t t0 = info_of(f->l).tail;
	assert_int_equal(ik_upsert(f, &k, "v1", HLOG_T_STRING), HLOG_OK);
	uint64_t a1 = 0, a2 = 0;
	assert_int_equal(hlog_read(f->s, &k, addr_read_fn, &a1), HLOG_OK);
	assert_int_equal(a1, t0);
	static const hlog_rmw_ops ops = { addr_plan, addr_fill };
	addr_ctx c = { 0 };
	assert_int_equal(hlog_rmw(f->s, &k, &ops, &c), HLOG_OK);
	assert_int_equal(c.old_addr, a1);
	/* On the device: the fetched copy's address is the record's. */
	ik_push_below_head(f, a1);
	ikop o = { .kind = IK_READ, .k = &k };
	assert_int_equal(ik_run(f, &o), HLOG_OK);
	hlog_session_set_op(f->s, &o);
	int rc;
	while ((rc = hlog_read(f->s, &k, addr_read_fn, &a2)) == HLOG_PENDING) {
		hlog_session_poll(f->s);
		store_fd_wait(f->fd, 5);
	}
	assert_int_equal(rc, HLOG_OK);
	assert_int_equal(a2, a1);
	hlog_session_release(f->s, &o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_user_and_internal_keys_with_equal_bytes_are_independent, ik_teardown),
		cmocka_unit_test_teardown(test_user_and_internal_keys_stay_independent_through_the_device, ik_teardown),
		cmocka_unit_test_teardown(test_writes_stay_in_their_key_namespace, ik_teardown),
		cmocka_unit_test_teardown(test_scan_and_key_counts_ignore_internal_records, ik_teardown),
		cmocka_unit_test_teardown(test_scan_through_the_device_ignores_internal_records, ik_teardown),
		cmocka_unit_test_teardown(test_value_addr_names_the_record_it_came_from, ik_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
