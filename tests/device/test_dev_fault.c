/*
 * test_dev_fault.c - the device conformance suite through the fault-injecting wrapper over the
 * native backend ("fault:native": disarmed, the wrapper must be invisible), plus the wrapper's own
 * behaviours: the nth IO failing once or from then on, short reads, torn writes, and the power-cut
 * mode (writes held until a sync; the segment files are read with pread to see what reached them).
 */
#define CONF_TYPE "fault:native"

static void test_fault_fails_exactly_the_nth_io_once_for_every_n(void **state);
static void test_fault_sticky_enospc_fails_every_write_from_the_nth_on(void **state);
static void test_fault_short_read_returns_half_rounded_down_to_a_sector(void **state);
static void test_fault_torn_write_reaches_the_device_only_up_to_the_tear(void **state);
static void test_fault_set_refuses_plain_devices_and_bad_specs(void **state);
static void test_fault_spec_parses_the_text_form_of_the_config_option(void **state);
static void test_fault_spec_parses_the_short_words_of_device_fault(void **state);
static void test_fault_powercut_write_reads_back_but_does_not_reach_the_file(void **state);
static void test_fault_powercut_sync_and_flush_write_the_buffer_to_the_files(void **state);
static void test_fault_powercut_now_forgets_the_unsynced_writes_and_keeps_the_synced(void **state);
static void test_fault_powercut_later_write_wins_on_read_and_after_sync(void **state);
static void test_fault_powercut_read_spans_buffered_and_unbuffered_parts(void **state);
static void test_fault_powercut_sigkill_loses_exactly_the_writes_since_the_sync(void **state);
static void test_fault_powercut_read_in_flight_across_a_sync_sees_the_buffered_bytes(void **state);

#define CONF_EXTRA_TESTS                                                                         \
	cmocka_unit_test_setup_teardown(test_fault_fails_exactly_the_nth_io_once_for_every_n,        \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_sticky_enospc_fails_every_write_from_the_nth_on,  \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_short_read_returns_half_rounded_down_to_a_sector, \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_torn_write_reaches_the_device_only_up_to_the_tear,\
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_set_refuses_plain_devices_and_bad_specs,          \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_spec_parses_the_text_form_of_the_config_option,   \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test(test_fault_spec_parses_the_short_words_of_device_fault),                    \
	cmocka_unit_test_setup_teardown(test_fault_powercut_write_reads_back_but_does_not_reach_the_file,\
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_powercut_sync_and_flush_write_the_buffer_to_the_files,\
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(                                                             \
		test_fault_powercut_now_forgets_the_unsynced_writes_and_keeps_the_synced,                \
		conf_setup, conf_teardown),                                                              \
	cmocka_unit_test_setup_teardown(test_fault_powercut_later_write_wins_on_read_and_after_sync, \
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_powercut_read_spans_buffered_and_unbuffered_parts,\
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(test_fault_powercut_sigkill_loses_exactly_the_writes_since_the_sync,\
	                                conf_setup, conf_teardown),                                  \
	cmocka_unit_test_setup_teardown(                                                             \
		test_fault_powercut_read_in_flight_across_a_sync_sees_the_buffered_bytes,                \
		conf_setup, conf_teardown),

#include "device/conformance.h"

#include <signal.h>
#include <sys/wait.h>

static void test_fault_fails_exactly_the_nth_io_once_for_every_n(void **state)
{
	conf *c = *state;
	uint8_t *buf = conf_scratch(c, 4096);
	conf_layout(c->q, CONF_SEG, 1);
	/* The recovery-test pattern: loop over n, and exactly the nth read fails. */
	for (uint64_t n = 1; n <= 5; n++) {
		dev_fault_spec s = { .kind = DEV_FAULT_ERROR, .nth = n, .err = -EIO,
		                     .ops = 1u << DEV_OP_READ };
		assert_int_equal(dev_fault_set(c->d, &s), 0);
		for (uint64_t i = 1; i <= 6; i++)
			assert_int_equal(conf_read(c->q, i * 4096, buf, 4096), i == n ? -EIO : 4096);
		/* Writes were not counted and do not fail. */
		assert_int_equal(conf_write(c->q, 0, buf, 4096), 4096);
	}
	assert_int_equal(dev_fault_hits(c->d), 5);
}

static void test_fault_sticky_enospc_fails_every_write_from_the_nth_on(void **state)
{
	conf *c = *state;
	uint8_t *buf = conf_scratch(c, 4096);
	dev_fault_spec s = { .kind = DEV_FAULT_ERROR, .nth = 2, .err = -ENOSPC, .sticky = true,
	                     .ops = 1u << DEV_OP_WRITE };
	conf_fill(buf, 4096, 0, 2);
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_write(c->q, 0, buf, 4096), 4096);
	for (int i = 1; i < 5; i++)
		assert_int_equal(conf_write(c->q, (uint64_t)i * 4096, buf, 4096), -ENOSPC);
	/* Reads go on working, and see only the first write. */
	assert_int_equal(conf_read(c->q, 0, buf, 4096), 4096);
	assert_int_equal(conf_read(c->q, 4096, buf, 4096), 0);
	/* Disarmed, writes work again. */
	s.kind = DEV_FAULT_NONE;
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_write(c->q, 4096, buf, 4096), 4096);
	assert_int_equal(dev_fault_hits(c->d), 4);
}

static void test_fault_short_read_returns_half_rounded_down_to_a_sector(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	uint8_t *buf = conf_scratch(c, 8 * (size_t)sec), *want = conf_scratch(c, 8 * (size_t)sec);
	dev_fault_spec s = { .kind = DEV_FAULT_SHORT_READ, .nth = 1 };

	conf_fill(want, 8 * (size_t)sec, 0, 3);
	assert_int_equal(conf_write(c->q, 0, want, 8 * (size_t)sec), 8 * (int64_t)sec);
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_read(c->q, 0, buf, 8 * (size_t)sec), 4 * (int64_t)sec);
	assert_memory_equal(buf, want, 4 * (size_t)sec);
	/* Once: the next read is whole. */
	assert_int_equal(conf_read(c->q, 0, buf, 8 * (size_t)sec), 8 * (int64_t)sec);
	/* A one-sector read cut in half is empty. */
	s.nth = 1;
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_read(c->q, 0, buf, sec), 0);
}

static void test_fault_torn_write_reaches_the_device_only_up_to_the_tear(void **state)
{
	conf *c = *state;
	uint32_t sec = c->d->sector_bytes;
	size_t len = 8 * (size_t)sec;
	uint8_t *old = conf_scratch(c, len), *new = conf_scratch(c, len), *got = conf_scratch(c, len);
	dev_fault_spec s = { .kind = DEV_FAULT_TORN_WRITE, .nth = 1, .tear_sectors = 3 };

	conf_fill(old, len, 0, 100);
	conf_fill(new, len, 0, 200);
	assert_int_equal(conf_write(c->q, 0, old, len), (int64_t)len);
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_write(c->q, 0, new, len), 3 * (int64_t)sec);
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, new, 3 * (size_t)sec);
	assert_memory_equal(got + 3 * sec, old + 3 * sec, len - 3 * (size_t)sec);
	/* Default tear: half the sectors. */
	s.tear_sectors = 0;
	assert_int_equal(conf_write(c->q, 0, old, len), (int64_t)len);   /* restore, untorn */
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_write(c->q, 0, new, len), 4 * (int64_t)sec);
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, new, 4 * (size_t)sec);
	assert_memory_equal(got + 4 * sec, old + 4 * sec, len - 4 * (size_t)sec);
}

static void test_fault_set_refuses_plain_devices_and_bad_specs(void **state)
{
	conf *c = *state;
	dev_config cfg;
	dev *plain = NULL;
	dev_fault_spec s = { .kind = DEV_FAULT_ERROR, .nth = 1, .err = -EIO };

	dev_config_init(&cfg);
	cfg.type = "localmemory";
	cfg.segment_bytes = CONF_SEG;
	assert_int_equal(dev_open(&cfg, &plain, NULL, 0), 0);
	assert_int_equal(dev_fault_set(plain, &s), -ENOTSUP);
	assert_int_equal(dev_fault_hits(plain), 0);
	dev_close(plain);
	s.err = EIO;                       /* errors are negative */
	assert_int_equal(dev_fault_set(c->d, &s), -EINVAL);
	s.err = -EIO;
	s.nth = 0;                         /* counting starts at 1 */
	assert_int_equal(dev_fault_set(c->d, &s), -EINVAL);
	s.kind = 99;
	s.nth = 1;
	assert_int_equal(dev_fault_set(c->d, &s), -EINVAL);
	cfg.type = "fault:fault:posix";
	assert_int_equal(dev_open(&cfg, &plain, NULL, 0), -EINVAL);
}

static void test_fault_spec_parses_the_text_form_of_the_config_option(void **state)
{
	conf *c = *state;
	dev_fault_spec s;
	uint8_t *buf = conf_scratch(c, 4096);

	assert_int_equal(dev_fault_spec_parse("error nth=3 err=ENOSPC sticky ops=write|flush", &s, NULL, 0), 0);
	assert_int_equal(s.kind, DEV_FAULT_ERROR);
	assert_int_equal(s.nth, 3);
	assert_int_equal(s.err, -ENOSPC);
	assert_true(s.sticky);
	assert_int_equal(s.ops, (1u << DEV_OP_WRITE) | (1u << DEV_OP_FLUSH));
	assert_int_equal(dev_fault_spec_parse("Torn-Write,tear=2", &s, NULL, 0), 0);
	assert_int_equal(s.kind, DEV_FAULT_TORN_WRITE);
	assert_int_equal(s.ops, 1u << DEV_OP_WRITE);   /* a torn write with no IO named tears writes */
	assert_int_equal(s.tear_sectors, 2);
	assert_int_equal(s.nth, 1);
	assert_false(s.sticky);
	assert_int_equal(dev_fault_spec_parse("error err=5", &s, NULL, 0), 0);
	assert_int_equal(s.err, -5);
	assert_int_equal(dev_fault_spec_parse("none", &s, NULL, 0), 0);
	assert_int_equal(s.kind, DEV_FAULT_NONE);
	const char *bad[] = { "explode", "nth=0", "nth=x", "err=EWHAT", "ops=erase", "ops=", "tear=", "nth" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(dev_fault_spec_parse(bad[i], &s, NULL, 0), -EINVAL);
	/* A parsed spec arms the device. */
	assert_int_equal(dev_fault_spec_parse("error nth=1 err=EIO ops=read", &s, NULL, 0), 0);
	assert_int_equal(dev_fault_set(c->d, &s), 0);
	assert_int_equal(conf_read(c->q, 0, buf, 4096), -EIO);
}

/* --device-fault and CONFIG SET device-fault go through the same parser: their short words, their
 * defaults (error EIO, the first read, once), "" and off disarming, and the reason for a bad word. */
static void test_fault_spec_parses_the_short_words_of_device_fault(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int kind, err;
		uint64_t nth;
		uint32_t ops;
		bool sticky;
	} cases[] = {
		{ "read 1", DEV_FAULT_ERROR, -EIO, 1, 1u << DEV_OP_READ, false },
		{ "write,3 sticky enospc", DEV_FAULT_ERROR, -ENOSPC, 3, 1u << DEV_OP_WRITE, true },
		{ "any short", DEV_FAULT_SHORT_READ, -EIO, 1, (1u << DEV_OP_READ) | (1u << DEV_OP_WRITE), false },
		{ "WRITES Torn", DEV_FAULT_TORN_WRITE, -EIO, 1, 1u << DEV_OP_WRITE, false },
		{ "", DEV_FAULT_NONE, -EIO, 1, 1u << DEV_OP_READ, false },
		{ " , ", DEV_FAULT_NONE, -EIO, 1, 1u << DEV_OP_READ, false },
		{ "off", DEV_FAULT_NONE, -EIO, 1, 1u << DEV_OP_READ, false },
	};
	dev_fault_spec s;
	char why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(dev_fault_spec_parse(cases[i].text, &s, why, sizeof(why)), 0);
		assert_int_equal(s.kind, cases[i].kind);
		assert_int_equal(s.err, cases[i].err);
		assert_int_equal(s.nth, cases[i].nth);
		assert_int_equal(s.ops, cases[i].ops);
		assert_int_equal(s.sticky, cases[i].sticky);
	}
	const char *bad[] = { "read x", "read 0", "read -1", "read +1", "read 01" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(dev_fault_spec_parse(bad[i], &s, why, sizeof(why)), -EINVAL);
	assert_int_equal(dev_fault_spec_parse("read x", &s, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "'x' is not one of read, write, any, a count >= 1, once, sticky, eio, "
	                    "enospc, short, torn, powercut, powercut-now, off");
	/* The power-cut words: the mode, and the mode with the cut now; a later word wins. */
	assert_int_equal(dev_fault_spec_parse("powercut", &s, why, sizeof(why)), 0);
	assert_int_equal(s.kind, DEV_FAULT_POWERCUT);
	assert_false(s.cut_now);
	assert_int_equal(dev_fault_spec_parse("PowerCut-Now", &s, why, sizeof(why)), 0);
	assert_int_equal(s.kind, DEV_FAULT_POWERCUT);
	assert_true(s.cut_now);
	assert_int_equal(dev_fault_spec_parse("powercut-now powercut", &s, why, sizeof(why)), 0);
	assert_false(s.cut_now);
	assert_int_equal(dev_fault_spec_parse("powercut off", &s, why, sizeof(why)), 0);
	assert_int_equal(s.kind, DEV_FAULT_NONE);
}

/* ---- the power-cut mode --------------------------------------------------------------------- */

/* Arm the wrapper from the text form, as --device-fault would. */
static void pc_arm(conf *c, const char *text)
{
	dev_fault_spec s;
	char why[256];
	assert_int_equal(dev_fault_spec_parse(text, &s, why, sizeof(why)), 0);
	assert_int_equal(dev_fault_set(c->d, &s), 0);
}

static dev_fault_powercut_stats pc_stats(conf *c)
{
	dev_fault_powercut_stats st;
	assert_int_equal(dev_fault_powercut_stats_get(c->d, &st), 0);
	return st;
}

/* pread segment seg's file directly (no device): the bytes there, or -ENOENT without a file. */
static int64_t pc_file_read(const char *dir, uint64_t seg, uint64_t off, void *buf, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/hlog.%llu", dir, (unsigned long long)seg);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = pread(fd, buf, len, (off_t)off);
	close(fd);
	return n < 0 ? -errno : n;
}

static int64_t pc_flush(dev_queue *q, uint64_t off)
{
	tio t;
	tio_init(&t, off, NULL, 0);
	return conf_io(q, &t, DEV_OP_FLUSH);
}

static void test_fault_powercut_write_reads_back_but_does_not_reach_the_file(void **state)
{
	conf *c = *state;
	size_t len = 16 * 1024;
	uint8_t *a = conf_scratch(c, len), *got = conf_scratch(c, len);

	conf_fill(a, len, 0, 11);
	pc_arm(c, "powercut");
	assert_int_equal(conf_write(c->q, 0, a, len), (int64_t)len);
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, a, len);
	/* The inner device never saw it: no segment file, or nothing in it. */
	assert_true(pc_file_read(c->dir, 0, 0, got, len) <= 0);
	dev_fault_powercut_stats st = pc_stats(c);
	assert_int_equal(st.buffered_bytes, len);
	assert_int_equal(st.buffered_extents, 1);
	assert_int_equal(st.accepted_bytes, len);
	assert_int_equal(st.synced_bytes, 0);
	assert_int_equal(dev_fault_hits(c->d), 0);   /* a mode, not a counted fault */
}

static void test_fault_powercut_sync_and_flush_write_the_buffer_to_the_files(void **state)
{
	conf *c = *state;
	size_t len = 8 * 1024;
	uint8_t *a = conf_scratch(c, len), *b = conf_scratch(c, len), *e = conf_scratch(c, len);
	uint8_t *got = conf_scratch(c, len);

	conf_fill(a, len, 0, 21);
	conf_fill(b, len, CONF_SEG, 22);
	conf_fill(e, len, 2 * CONF_SEG, 23);
	pc_arm(c, "powercut");
	assert_int_equal(conf_write(c->q, 0, a, len), (int64_t)len);
	assert_int_equal(conf_write(c->q, CONF_SEG, b, len), (int64_t)len);
	assert_int_equal(conf_write(c->q, 2 * CONF_SEG, e, len), (int64_t)len);
	/* A flush request makes its own segment durable, and only that one. */
	assert_int_equal(pc_flush(c->q, CONF_SEG + 4096), 0);
	assert_int_equal(pc_file_read(c->dir, 1, 0, got, len), (int64_t)len);
	assert_memory_equal(got, b, len);
	assert_true(pc_file_read(c->dir, 0, 0, got, len) <= 0);
	assert_true(pc_file_read(c->dir, 2, 0, got, len) <= 0);
	dev_fault_powercut_stats st = pc_stats(c);
	assert_int_equal(st.buffered_bytes, 2 * len);
	assert_int_equal(st.synced_bytes, len);
	assert_int_equal(st.syncs, 1);
	/* dev_sync: everything. */
	assert_int_equal(dev_sync(c->d), 0);
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, len), (int64_t)len);
	assert_memory_equal(got, a, len);
	assert_int_equal(pc_file_read(c->dir, 2, 0, got, len), (int64_t)len);
	assert_memory_equal(got, e, len);
	st = pc_stats(c);
	assert_int_equal(st.buffered_bytes, 0);
	assert_int_equal(st.buffered_extents, 0);
	assert_int_equal(st.synced_bytes, 3 * len);
	assert_int_equal(st.syncs, 2);
	/* Read back through the device, from the files now. */
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, a, len);
}

static void test_fault_powercut_now_forgets_the_unsynced_writes_and_keeps_the_synced(void **state)
{
	conf *c = *state;
	const size_t K4 = 4096, len = 24 * 1024;
	uint8_t *a = conf_scratch(c, 16 * 1024), *b = conf_scratch(c, K4), *dd = conf_scratch(c, 2 * K4);
	uint8_t *want = conf_scratch(c, len), *got = conf_scratch(c, len);

	conf_fill(a, 16 * 1024, 0, 31);
	conf_fill(b, K4, 0, 32);
	conf_fill(dd, 2 * K4, 16 * 1024, 33);
	pc_arm(c, "powercut");
	assert_int_equal(conf_write(c->q, 0, a, 16 * 1024), 16 * 1024);
	assert_int_equal(dev_sync(c->d), 0);
	/* Unsynced: b over the synced a, and dd past a's end. */
	assert_int_equal(conf_write(c->q, 0, b, K4), (int64_t)K4);
	assert_int_equal(conf_write(c->q, 16 * 1024, dd, 2 * K4), 2 * (int64_t)K4);
	memcpy(want, a, 16 * 1024);
	memcpy(want, b, K4);
	memcpy(want + 16 * 1024, dd, 2 * K4);
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, want, len);

	pc_arm(c, "powercut-now");   /* the power goes */
	dev_fault_powercut_stats st = pc_stats(c);
	assert_int_equal(st.dropped_bytes, K4 + 2 * K4);
	assert_int_equal(st.cuts, 1);
	assert_int_equal(st.buffered_bytes, 0);
	/* What was synced is all there is: a, ending where it ended. */
	memset(got, 0xAB, len);
	assert_int_equal(conf_read(c->q, 0, got, len), 16 * 1024);
	assert_memory_equal(got, a, 16 * 1024);
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, len), 16 * 1024);
	assert_memory_equal(got, a, 16 * 1024);

	/* Still armed: the next write is held again; disarming keeps the power on and writes it. */
	assert_int_equal(conf_write(c->q, 0, b, K4), (int64_t)K4);
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, K4), (int64_t)K4);
	assert_memory_equal(got, a, K4);
	pc_arm(c, "off");
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, K4), (int64_t)K4);
	assert_memory_equal(got, b, K4);
	assert_int_equal(pc_stats(c).buffered_bytes, 0);
	/* Disarmed, a write goes straight to the file. */
	assert_int_equal(conf_write(c->q, 4 * K4, b, K4), (int64_t)K4);
	assert_int_equal(pc_file_read(c->dir, 0, 4 * K4, got, K4), (int64_t)K4);
	assert_memory_equal(got, b, K4);
	assert_int_equal(pc_stats(c).accepted_bytes, 16 * 1024 + K4 + 2 * K4 + K4);
}

static void test_fault_powercut_later_write_wins_on_read_and_after_sync(void **state)
{
	conf *c = *state;
	const size_t K4 = 4096, span = 40 * 1024;
	uint8_t *shadow = conf_scratch(c, span), *buf = conf_scratch(c, span), *got = conf_scratch(c, span);
	/* (offset, length) in 4 KiB units: inside, across an end, at the start, and one covering an
	 * earlier one whole. */
	static const struct { unsigned off, len; } w[] = {
		{ 0, 8 }, { 2, 1 }, { 7, 3 }, { 0, 1 }, { 4, 1 }, { 3, 3 },
	};

	pc_arm(c, "powercut");
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
		size_t off = w[i].off * K4, len = w[i].len * K4;
		conf_fill(buf, len, off, 40 + i);
		assert_int_equal(conf_write(c->q, off, buf, len), (int64_t)len);
		memcpy(shadow + off, buf, len);
	}
	assert_int_equal(pc_stats(c).buffered_bytes, span);   /* the union, once */
	assert_int_equal(conf_read(c->q, 0, got, span), (int64_t)span);
	assert_memory_equal(got, shadow, span);
	/* A read of the middle only, through several extents. */
	assert_int_equal(conf_read(c->q, 3 * K4, got, 5 * K4), 5 * (int64_t)K4);
	assert_memory_equal(got, shadow + 3 * K4, 5 * K4);
	assert_int_equal(dev_sync(c->d), 0);
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, span), (int64_t)span);
	assert_memory_equal(got, shadow, span);
	assert_int_equal(pc_stats(c).synced_bytes, span);
}

static void test_fault_powercut_read_spans_buffered_and_unbuffered_parts(void **state)
{
	conf *c = *state;
	const size_t K4 = 4096, span = 32 * 1024;
	uint8_t *x = conf_scratch(c, 16 * 1024), *y = conf_scratch(c, K4), *z = conf_scratch(c, K4);
	uint8_t *want = conf_scratch(c, span), *got = conf_scratch(c, span);
	uint8_t *wv = conf_scratch(c, 2 * K4);

	conf_fill(x, 16 * 1024, 0, 51);
	conf_fill(y, K4, K4, 52);
	conf_fill(z, K4, 20 * 1024, 53);
	assert_int_equal(conf_write(c->q, 0, x, 16 * 1024), 16 * 1024);   /* disarmed: in the file */
	pc_arm(c, "powercut");
	assert_int_equal(conf_write(c->q, K4, y, K4), (int64_t)K4);
	memcpy(want, x, 16 * 1024);
	memcpy(want + K4, y, K4);
	assert_int_equal(conf_read(c->q, 0, got, 16 * 1024), 16 * 1024);
	assert_memory_equal(got, want, 16 * 1024);
	/* Past the file's end with a hole: the read is as long as the file would be, the hole zeros. */
	assert_int_equal(conf_write(c->q, 20 * 1024, z, K4), (int64_t)K4);
	memcpy(want + 20 * 1024, z, K4);
	memset(got, 0xAB, span);
	assert_int_equal(conf_read(c->q, 0, got, span), 24 * 1024);
	assert_memory_equal(got, want, 24 * 1024);
	/* And the real file agrees after the sync. */
	assert_int_equal(dev_sync(c->d), 0);
	memset(got, 0xAB, span);
	assert_int_equal(conf_read(c->q, 0, got, span), 24 * 1024);
	assert_memory_equal(got, want, 24 * 1024);

	/* Across a segment boundary: a buffered write from the end of segment 0 into segment 1, and a
	 * read from before it (a hole in segment 0) into segment 1's part. */
	conf_fill(wv, 2 * K4, CONF_SEG - K4, 54);
	assert_int_equal(conf_write(c->q, CONF_SEG - K4, wv, 2 * K4), 2 * (int64_t)K4);
	memset(got, 0xAB, span);
	assert_int_equal(conf_read(c->q, CONF_SEG - 2 * K4, got, 4 * K4), 3 * (int64_t)K4);
	for (size_t i = 0; i < K4; i++)
		assert_int_equal(got[i], 0);
	assert_memory_equal(got + K4, wv, 2 * K4);
	assert_int_equal(dev_sync(c->d), 0);
	memset(got, 0xAB, span);
	assert_int_equal(conf_read(c->q, CONF_SEG - 2 * K4, got, 4 * K4), 3 * (int64_t)K4);
	assert_memory_equal(got + K4, wv, 2 * K4);
	/* The inner file's end in a later segment counts: segment 3 has 8 KiB on file, segment 2
	 * nothing but a buffered write at its end, and one more buffered write follows segment 3's
	 * file end. A read from segment 2's hole to past that. */
	uint64_t s3 = 3 * CONF_SEG;
	conf_fill(wv, 2 * K4, s3, 55);
	assert_int_equal(conf_write(c->q, s3, wv, 2 * K4), 2 * (int64_t)K4);
	assert_int_equal(dev_sync(c->d), 0);
	assert_int_equal(conf_write(c->q, s3 - K4, z, K4), (int64_t)K4);
	assert_int_equal(conf_write(c->q, s3 + 2 * K4, y, K4), (int64_t)K4);
	memset(got, 0xAB, span);
	assert_int_equal(conf_read(c->q, s3 - 2 * K4, got, 6 * K4), 5 * (int64_t)K4);
	for (size_t i = 0; i < K4; i++)
		assert_int_equal(got[i], 0);
	assert_memory_equal(got + K4, z, K4);
	assert_memory_equal(got + 2 * K4, wv, 2 * K4);
	assert_memory_equal(got + 4 * K4, y, K4);
}

/* The real thing: a child writes, syncs, writes more and is killed; the files have exactly the
 * synced writes. */
static void test_fault_powercut_sigkill_loses_exactly_the_writes_since_the_sync(void **state)
{
	conf *c = *state;
	const size_t len = 8 * 1024;
	uint8_t *a = conf_scratch(c, len), *got = conf_scratch(c, len);
	int status;

	conf_fill(a, len, 0, 61);
	conf_close(c);   /* the child opens the folder itself */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dev *d = NULL;
		dev_queue *q = NULL;
		uint8_t *b = conf_buf(len);
		dev_fault_spec s;
		conf_fill(b, len, len, 62);
		if (dev_open(&c->cfg, &d, NULL, 0) || dev_queue_open(d, &q) ||
		    dev_fault_spec_parse("powercut", &s, NULL, 0) || dev_fault_set(d, &s) ||
		    conf_write(q, 0, a, len) != (int64_t)len || dev_sync(d) ||
		    conf_write(q, len, b, len) != (int64_t)len || conf_write(q, 0, b, len) != (int64_t)len)
			_exit(3);
		kill(getpid(), SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_int_equal(pc_file_read(c->dir, 0, 0, got, len), (int64_t)len);
	assert_memory_equal(got, a, len);
	assert_int_equal(pc_file_read(c->dir, 0, len, got, len), 0);   /* the file ends at the sync */
	assert_int_equal(conf_open(c), 0);   /* for the teardown, and the device agrees */
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, a, len);
}

/* A read that the inner device served before a sync wrote the buffer out, and whose callback runs
 * after: the written-out extents stay (clean) until it ran, so it still sees the new bytes. */
static void test_fault_powercut_read_in_flight_across_a_sync_sees_the_buffered_bytes(void **state)
{
	conf *c = *state;
	const size_t len = 8 * 1024;
	uint8_t *old = conf_scratch(c, len), *new = conf_scratch(c, len), *got = conf_scratch(c, len);
	tio t;

	conf_fill(old, len, 0, 71);
	conf_fill(new, len, 0, 72);
	assert_int_equal(conf_write(c->q, 0, old, len), (int64_t)len);   /* disarmed: on file */
	pc_arm(c, "powercut");
	assert_int_equal(conf_write(c->q, 0, new, len), (int64_t)len);
	tio_init(&t, 0, got, len);
	assert_int_equal(dev_read(c->q, &t.req), 0);
	assert_true(dev_submit(c->q) >= 0);
	int rc = dev_wait(c->q, 1, -1);   /* served (the old bytes), not yet called back */
	assert_true(rc == 0 || rc == -EINTR);
	assert_int_equal(t.done, 0);
	assert_int_equal(dev_sync(c->d), 0);
	assert_int_equal(pc_stats(c).buffered_bytes, 0);
	conf_run(c->q, &t.done, 1);
	assert_int_equal(t.res, (int64_t)len);
	assert_memory_equal(got, new, len);
	/* Called back, the clean copy is gone: later reads come from the file. */
	memset(got, 0, len);
	assert_int_equal(conf_read(c->q, 0, got, len), (int64_t)len);
	assert_memory_equal(got, new, len);
}
