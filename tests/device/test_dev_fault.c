/*
 * test_dev_fault.c - the device conformance suite through the fault-injecting wrapper over the
 * native backend ("fault:native": disarmed, the wrapper must be invisible), plus the wrapper's own
 * behaviours: the nth IO failing once or from then on, short reads, torn writes.
 */
#define CONF_TYPE "fault:native"

static void test_fault_fails_exactly_the_nth_io_once_for_every_n(void **state);
static void test_fault_sticky_enospc_fails_every_write_from_the_nth_on(void **state);
static void test_fault_short_read_returns_half_rounded_down_to_a_sector(void **state);
static void test_fault_torn_write_reaches_the_device_only_up_to_the_tear(void **state);
static void test_fault_set_refuses_plain_devices_and_bad_specs(void **state);
static void test_fault_spec_parses_the_text_form_of_the_config_option(void **state);
static void test_fault_spec_parses_the_short_words_of_device_fault(void **state);

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
	cmocka_unit_test(test_fault_spec_parses_the_short_words_of_device_fault),

#include "device/conformance.h"

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
	                    "enospc, short, torn, off");
}
