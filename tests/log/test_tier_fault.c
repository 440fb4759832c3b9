/*
 * test_tier_fault.c - the storage tier's suite (tier_suite.h) on the fault-injecting wrapper over
 * the posix backend, plus what only a fault device can show: a failed or short device read fails
 * only its operation (the store and the other operations go on), and a failed page write puts the
 * store in its sticky error state (writes refused with SPW_E_STORE_ERROR, reads still served).
 */
#define TIER_TYPE "fault:posix"
#define TIER_BIG_VALUE (16u << 20)
#define TIER_EXTRA_TESTS \
	TIER_TEST(test_tier_a_failed_device_read_fails_only_its_operation), \
	TIER_TEST(test_tier_a_failed_page_write_makes_the_store_refuse_writes_and_keep_serving_reads),

static void test_tier_a_failed_device_read_fails_only_its_operation(void **state);
static void test_tier_a_failed_page_write_makes_the_store_refuse_writes_and_keep_serving_reads(void **state);

#include "tier_suite.h"

static void arm(dev *d, int kind, uint64_t nth, bool sticky, int op)
{
	dev_fault_spec spec = { .kind = kind, .nth = nth, .err = -EIO, .sticky = sticky, .ops = 1u << op };
	assert_int_equal(dev_fault_set(d, &spec), 0);
}

static void disarm(dev *d)
{
	dev_fault_spec spec = { .kind = DEV_FAULT_NONE };
	assert_int_equal(dev_fault_set(d, &spec), 0);
}

static void scan_noop_fn(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	(void)ctx;
	(void)key;
	(void)klen;
	(void)v;
}

static int read_one(tsess *ts, model *m, int i, bool *matched)
{
	top o = { .kind = T_READ, .m = m, .i = i };
	tier_drive(ts, &o, 1);
	*matched = o.matched;
	return o.rc;
}

static void test_tier_a_failed_device_read_fails_only_its_operation(void **state)
{
	tier *f = *state;
	tsess *ts = &f->ts;
	model *m = &f->m;
	dev *d = f->env.d;
	bool matched;
	enum { N = 12000 };
	tier_load(f, N, "rfail");

	/* One failed read: that operation gets -EIO, the next ones are served. */
	uint64_t hits0 = dev_fault_hits(d);
	arm(d, DEV_FAULT_ERROR, 1, false, DEV_OP_READ);
	assert_int_equal(read_one(ts, m, 5, &matched), -EIO);
	assert_int_equal(dev_fault_hits(d), hits0 + 1);
	tier_phase(ts, m, 6, 400, 1, prep_read, check_read, NULL);
	assert_int_equal(read_one(ts, m, 5, &matched), HLOG_OK);   /* released: read again */
	assert_true(matched);

	/* Every read failing for a while: every cold operation fails, none crashes, writes go on. */
	arm(d, DEV_FAULT_ERROR, 1, true, DEV_OP_READ);
	for (int i = 1000; i < 1050; i++)
		assert_int_equal(read_one(ts, m, i, &matched), -EIO);
	top inc = { .kind = T_INCR, .m = m, .i = 1051, .delta = 1 };
	tier_drive(ts, &inc, 1);
	assert_int_equal(inc.rc, -EIO);   /* an RMW of a cold key needs the read too */
	int v = 3;
	tier_phase(ts, m, N - 200, N, 1, prep_upsert, check_upsert, &v);   /* memory keys: no read */
	disarm(d);

	/* A scan that cannot read a chain says so (and skips that chain only). */
	arm(d, DEV_FAULT_ERROR, 1, true, DEV_OP_READ);
	hlog_session_protect(ts->s);
	int scan_err = scan_whole(ts->s, 256, scan_noop_fn, NULL);
	hlog_session_unprotect(ts->s);
	assert_int_equal(scan_err, -EIO);
	disarm(d);

	/* Short reads: the op gets an error or (the record was inside what came back) the value,
	 * never wrong bytes. */
	arm(d, DEV_FAULT_SHORT_READ, 1, true, DEV_OP_READ);
	for (int i = 2000; i < 2040; i++) {
		int rc = read_one(ts, m, i, &matched);
		assert_true(rc == -EIO || (rc == HLOG_OK && matched));
	}
	disarm(d);

	model_read_all(ts, m);
	hlog_info i = info_of(f->env.l);
	assert_true(i.pending_errors >= 52);
	assert_int_equal(i.store_error, 0);
	assert_int_equal(ts->spurious, 0);
	print_info("read faults", f->env.l);
}

/* A failed page write of this kind on the fresh store of f. */
static void write_fault_run(tier *f, int kind)
{
	tsess *ts = &f->ts;
	model *m = &f->m;
	enum { N = 30000 };
	model_init(m, N, "wfail");
	int v = 1;
	tier_phase(ts, m, 0, 4000, 1, prep_upsert, check_upsert, &v);
	assert_true(info_of(f->env.l).head > HLOG_FIRST_ADDRESS);   /* some of it lives on the device */

	arm(f->env.d, kind, 1, true, DEV_OP_WRITE);
	int refused = 0, i;
	for (i = 4000; i < N && !refused; i += TIER_BATCH) {
		top ops[TIER_BATCH];
		int n = tier_batch_prep(ops, m, i, N, 1, prep_upsert, &v);
		tier_drive(ts, ops, n);
		for (int k = 0; k < n; k++) {
			if (ops[k].rc == HLOG_OK) {
				check_upsert(&ops[k], m, NULL);
			} else {
				assert_int_equal(ops[k].rc, SPW_E_STORE_ERROR);
				free((void *)ops[k].val);
				refused++;
			}
		}
	}
	assert_true(refused > 0);
	hlog_info info = info_of(f->env.l);
	assert_int_equal(info.store_error, -EIO);

	/* Writes of every kind are refused, also of keys in memory. */
	top ops[4];
	memset(ops, 0, sizeof(ops));
	prep_upsert(&ops[0], m, 10, &v);
	prep_delete(&ops[1], m, i - 1, NULL);
	prep_incr(&ops[2], m, 20, NULL);
	prep_append(&ops[3], m, i - 2, NULL);
	tier_drive(ts, ops, 4);
	for (int k = 0; k < 4; k++)
		assert_int_equal(ops[k].rc, SPW_E_STORE_ERROR);
	free((void *)ops[0].val);

	/* Reads go on: of memory and of the pages written before the failure. */
	disarm(f->env.d);
	model_read_all(ts, m);
	assert_int_equal(info_of(f->env.l).store_error, -EIO);
	assert_int_equal(ts->spurious, 0);
	print_info(kind == DEV_FAULT_ERROR ? "write error" : "torn write", f->env.l);
}

/* Both a failed and a torn (short) page write put the store in the error state: the fixture's store
 * takes the first, a fresh one the second. */
static void test_tier_a_failed_page_write_makes_the_store_refuse_writes_and_keep_serving_reads(void **state)
{
	tier *f = *state;
	write_fault_run(f, DEV_FAULT_ERROR);
	tier_close(f);
	tier_open(f, &tier_default);
	write_fault_run(f, DEV_FAULT_TORN_WRITE);
}
