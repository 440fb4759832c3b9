/*
 * test_tier.c - the storage tier end to end: a data set many times --memory, served correctly by a
 * real spillway-server started with --storage-tier, checked reply by reply against a model.
 *
 * This file is the suite; test_tier_<backend>.c define TIER_* and include it to run the same suite
 * on another device (SQLite-style: one suite, registered once per configuration):
 *   TIER_DEVICE      --device-type (default "posix")
 *   TIER_IO          --device-io-backend, or leave undefined
 *   TIER_THREADS     --threads (default "1")
 *   TIER_CLIENTS     connections driving the load at once, one test thread each (default 4)
 *   TIER_SKIP_URING  skip (exit 77) when the kernel refuses io_uring (test_tier_uring.c)
 *
 * Notes:
 *  1. Sizes: --page 64k --memory 512k (8 pages) and 500,000 keys of mixed sizes (8 B to 32 KB,
 *     about 190 B on average: ~100 MB of log, 200 times --memory). Under AddressSanitizer
 *     (ITEST_ASAN) the suite loads 100,000 keys so that it stays near a minute on a loaded machine;
 *     SPW_TIER_KEYS=N in the environment overrides both.
 *  2. Phases, each run by every connection over its own keys (key i belongs to connection
 *     i % TIER_CLIENTS), pipelined TIER_BATCH commands at a time:
 *       load    SET every key (values: see val_make; one key in 12 holds an integer)
 *       read    GET every key: nearly all are cold, so nearly every GET is a device read
 *       mutate  SET a third again (new value, new size), DEL a sixth (two keys per DEL), INCRBY
 *               the integer keys, APPEND to a sixth; every reply is checked
 *       verify  MGET every key, eight at a time, against the model's final state
 *     Between phases the main thread reads INFO: after the load Log.TailAddress must cover the
 *     records loaded and Log.HeadAddress must sit within --memory of it; across the read phase
 *     the record reads asked for must grow by about one per cold key (merged and shared reads
 *     included: how many there are depends on the load) and each device request by a sector.
 *  3. No timing assertions. A failure reports the first wrong reply (escaped) and the server's log.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/itest.h"
#include "device/device.h"

#ifndef TIER_DEVICE
#define TIER_DEVICE "posix"
#endif
#ifndef TIER_THREADS
#define TIER_THREADS "1"
#endif
#ifndef TIER_CLIENTS
#define TIER_CLIENTS 4
#endif
#define TIER_BATCH 64
#define TIER_MEMORY_BYTES (512 * 1024)

#ifdef ITEST_ASAN
#define TIER_KEYS_DEFAULT 100000
#else
#define TIER_KEYS_DEFAULT 500000
#endif

static itest_server g_srv;
static int g_nkeys;

/* ---------------- the model ---------------- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static size_t key_make(int i, char *buf)
{
	return (size_t)sprintf(buf, "tier:%07d", i);
}

static bool key_is_int(int i) { return i % 12 == 2; }

/* Value of key i in version ver (0 = loaded, 1 = overwritten): mostly small, a quarter a few
 * hundred bytes, a few KB now and then, one in 500 up to 32 KB. Integer keys hold i. */
static size_t val_make(int i, int ver, char *buf)
{
	if (ver == 0 && key_is_int(i))
		return (size_t)sprintf(buf, "%d", i);
	uint64_t h = mix64((uint64_t)i * 2 + (uint64_t)ver);
	unsigned r = (unsigned)(h % 1000);
	size_t len;
	if (r < 700)
		len = 8 + (h >> 10) % 56;
	else if (r < 950)
		len = 64 + (h >> 10) % 300;
	else if (r < 998)
		len = 500 + (h >> 10) % 2000;
	else
		len = 4000 + (h >> 10) % 28000;
	uint64_t s = mix64(h);
	for (size_t k = 0; k < len; k++) {
		if ((k & 7) == 0)
			s = mix64(s + k);
		buf[k] = (char)('!' + (s >> ((k & 7) * 8)) % 90);
	}
	return len;
}

static size_t suffix_make(int i, char *buf)
{
	return (size_t)sprintf(buf, "+app%d", i % 1000);
}

static long long incr_of(int i) { return i % 100 + 1; }

/* The value key i must have after the mutate phase; -1 when deleted. */
static long val_final(int i, char *buf)
{
	switch (i % 6) {
	case 0:
	case 3:
		return (long)val_make(i, 1, buf);
	case 1:
		return -1;
	case 2:
		if (key_is_int(i))
			return sprintf(buf, "%lld", (long long)i + incr_of(i));
		return (long)val_make(i, 0, buf);
	case 4: {
		size_t n = val_make(i, 0, buf);
		return (long)(n + suffix_make(i, buf + n));
	}
	default:
		return (long)val_make(i, 0, buf);
	}
}

/* ---------------- a pipelined client ---------------- */

/* A command as a RESP array: argc pieces given as (pointer, length) pairs. */
static void ob_cmd(itest_buf *b, int argc, ...)
{
	va_list ap;
	itest_buf_fmt(b, "*%d\r\n", argc);
	va_start(ap, argc);
	for (int k = 0; k < argc; k++) {
		const char *p = va_arg(ap, const char *);
		size_t n = va_arg(ap, size_t);
		itest_buf_bulk(b, p, n);
	}
	va_end(ap);
}

typedef struct tclient {
	int id;
	itest_conn conn;
	pthread_t th;
	int phase;
	itest_buf req, exp;        /* a batch of requests and their expected replies, back to back */
	int ncmds;
	long long sent;            /* commands sent, for messages */
	char err[1024];
	bool failed;
} tclient;

static tclient g_cl[TIER_CLIENTS];

static void cl_fail(tclient *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cl_fail(tclient *c, const char *fmt, ...)
{
	va_list ap;
	if (c->failed)
		return;
	c->failed = true;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
}

/* Count a command of the batch (its request and expected reply are appended after). */
static void exp_begin(tclient *c)
{
	c->ncmds++;
}

/* Send the batch and check each reply against the expected bytes. A load thread cannot fail the
 * cmocka test itself: the error goes to c->err for phase_run. */
static void cl_flush(tclient *c)
{
	char err[700];
	if (!c->ncmds || c->failed)
		goto out;
	int rc = itest_conn_send(&c->conn, c->req.p, c->req.len);
	if (rc < 0) {
		cl_fail(c, "client %d: send: %s", c->id, strerror(-rc));
		goto out;
	}
	if (itest_replies_check(&c->conn, c->exp.p, c->exp.len, NULL, err, sizeof(err)) < 0) {
		char *req = itest_escape(c->req.p, c->req.len, 60);
		cl_fail(c, "client %d, phase %d, batch after command %lld: %s (batch starts \"%s\")", c->id,
		        c->phase, c->sent, err, req);
		free(req);
		goto out;
	}
	c->sent += c->ncmds;
out:
	c->req.len = c->exp.len = 0;
	c->ncmds = 0;
}

static void cl_maybe_flush(tclient *c)
{
	if (c->ncmds >= TIER_BATCH)
		cl_flush(c);
}

static void exp_bulk_or_nil(tclient *c, const char *p, long n)
{
	if (n < 0)
		itest_buf_add(&c->exp, "$-1\r\n", 5);
	else
		itest_buf_bulk(&c->exp, p, (size_t)n);
}

/* ---------------- phases (note 2) ---------------- */

enum { PH_LOAD, PH_READ, PH_MUTATE, PH_VERIFY };

static void phase_load(tclient *c, char *kb, char *vb)
{
	for (int i = c->id; i < g_nkeys && !c->failed; i += TIER_CLIENTS) {
		size_t kl = key_make(i, kb), vl = val_make(i, 0, vb);
		ob_cmd(&c->req, 3, "SET", (size_t)3, kb, kl, vb, vl);
		exp_begin(c);
		itest_buf_add(&c->exp, "+OK\r\n", 5);
		cl_maybe_flush(c);
	}
}

static void phase_read(tclient *c, char *kb, char *vb)
{
	for (int i = c->id; i < g_nkeys && !c->failed; i += TIER_CLIENTS) {
		size_t kl = key_make(i, kb), vl = val_make(i, 0, vb);
		ob_cmd(&c->req, 2, "GET", (size_t)3, kb, kl);
		exp_begin(c);
		itest_buf_bulk(&c->exp, vb, vl);
		cl_maybe_flush(c);
	}
}

static void phase_mutate(tclient *c, char *kb, char *vb)
{
	char kb2[32], sb[32];
	int del_pending = -1;   /* a key of the delete class waiting for a partner */
	for (int i = c->id; i < g_nkeys && !c->failed; i += TIER_CLIENTS) {
		size_t kl = key_make(i, kb), vl;
		switch (i % 6) {
		case 0:
		case 3:
			vl = val_make(i, 1, vb);
			ob_cmd(&c->req, 3, "SET", (size_t)3, kb, kl, vb, vl);
			exp_begin(c);
			itest_buf_add(&c->exp, "+OK\r\n", 5);
			break;
		case 1:
			if (del_pending < 0) {
				del_pending = i;
				continue;
			}
			ob_cmd(&c->req, 3, "DEL", (size_t)3, kb2, key_make(del_pending, kb2), kb, kl);
			exp_begin(c);
			itest_buf_add(&c->exp, ":2\r\n", 4);
			del_pending = -1;
			break;
		case 2:
			if (!key_is_int(i))
				continue;
			vl = (size_t)sprintf(vb, "%lld", incr_of(i));
			ob_cmd(&c->req, 3, "INCRBY", (size_t)6, kb, kl, vb, vl);
			exp_begin(c);
			itest_buf_fmt(&c->exp, ":%lld\r\n", (long long)i + incr_of(i));
			break;
		case 4: {
			size_t sl = suffix_make(i, sb);
			ob_cmd(&c->req, 3, "APPEND", (size_t)6, kb, kl, sb, sl);
			exp_begin(c);
			itest_buf_fmt(&c->exp, ":%zu\r\n", val_make(i, 0, vb) + sl);
			break;
		}
		default:
			continue;
		}
		cl_maybe_flush(c);
	}
	if (del_pending >= 0 && !c->failed) {
		ob_cmd(&c->req, 2, "DEL", (size_t)3, kb2, key_make(del_pending, kb2));
		exp_begin(c);
		itest_buf_add(&c->exp, ":1\r\n", 4);
	}
}

static void phase_verify(tclient *c, char *kb, char *vb)
{
	enum { GROUP = 8 };
	int ids[GROUP], n = 0;
	for (int i = c->id; !c->failed; i += TIER_CLIENTS) {
		if (i < g_nkeys)
			ids[n++] = i;
		if (n == GROUP || (i >= g_nkeys && n > 0)) {
			itest_buf_fmt(&c->req, "*%d\r\n", n + 1);
			itest_buf_bulk(&c->req, "MGET", 4);
			for (int k = 0; k < n; k++)
				itest_buf_bulk(&c->req, kb, key_make(ids[k], kb));
			exp_begin(c);
			itest_buf_fmt(&c->exp, "*%d\r\n", n);
			for (int k = 0; k < n; k++)
				exp_bulk_or_nil(c, vb, val_final(ids[k], vb));
			n = 0;
			cl_maybe_flush(c);
		}
		if (i >= g_nkeys)
			break;
	}
}

static void *client_main(void *arg)
{
	tclient *c = arg;
	char kb[32];
	char *vb = malloc(64 * 1024);
	if (!vb) {
		cl_fail(c, "out of memory");
		return NULL;
	}
	switch (c->phase) {
	case PH_LOAD: phase_load(c, kb, vb); break;
	case PH_READ: phase_read(c, kb, vb); break;
	case PH_MUTATE: phase_mutate(c, kb, vb); break;
	case PH_VERIFY: phase_verify(c, kb, vb); break;
	}
	cl_flush(c);
	free(vb);
	return NULL;
}

/* Run one phase on every connection at once; fail the test with the first client's error. */
static void phase_run(int phase)
{
	for (int k = 0; k < TIER_CLIENTS; k++) {
		g_cl[k].phase = phase;
		assert_int_equal(pthread_create(&g_cl[k].th, NULL, client_main, &g_cl[k]), 0);
	}
	for (int k = 0; k < TIER_CLIENTS; k++)
		pthread_join(g_cl[k].th, NULL);
	for (int k = 0; k < TIER_CLIENTS; k++) {
		if (g_cl[k].failed) {
			itest_server_log_dump(&g_srv);
			fail_msg("%s", g_cl[k].err);
		}
	}
}

/* ---------------- INFO ---------------- */

/* INFO keyspace's db0:keys=N, or -1. */
static long long info_keys(itest_conn *c)
{
	char *r = itest_call(c, "INFO", "keyspace", NULL);
	char *p = strstr(r, "db0:keys=");
	long long v = p ? strtoll(p + 9, NULL, 10) : -1;
	free(r);
	return v;
}

/* ---------------- set-up ---------------- */

static int tier_keys(void)
{
	const char *e = getenv("SPW_TIER_KEYS");
	int n = e ? atoi(e) : 0;
	return n > 0 ? n : TIER_KEYS_DEFAULT;
}

#ifdef TIER_SKIP_URING
/* Exit 77 (SKIP) when the kernel refuses io_uring: ask the device layer itself, as the server would. */
static void uring_or_skip(void)
{
	char dir[256], err[256] = "";
	dev_config cfg;
	dev *d = NULL;
	if (itest_tmpdir_make(dir, sizeof(dir), "spw-tier-uring") != 0)
		return;
	dev_config_init(&cfg);
	cfg.type = "uring";
	cfg.dir = dir;
	cfg.prefix = "hlog.";
	int rc = dev_open(&cfg, &d, err, sizeof(err));
	if (d)
		dev_close(d);
	itest_tmpdir_remove(dir);
	if (rc == -ENOSYS || rc == -EPERM || rc == -ENOENT) {
		fprintf(stderr, "SKIP: io_uring is not available here: %s\n", err);
		exit(77);
	}
}
#endif

static int server_setup(void **state)
{
	(void)state;
	const char *flags[] = {
		"--storage-tier", "--device-type", TIER_DEVICE,
#ifdef TIER_IO
		"--device-io-backend", TIER_IO,
#endif
		"--threads", TIER_THREADS, "--memory", "512k", "--page", "64k", "--segment", "4m",
		"--index", "16m", NULL,
	};
	g_nkeys = tier_keys();
	if (itest_fixture_start(&g_srv, ITEST_SPILLWAY, flags, "tier") != 0)
		return -1;
	for (int k = 0; k < TIER_CLIENTS; k++) {
		memset(&g_cl[k], 0, sizeof(g_cl[k]));
		g_cl[k].id = k;
		if (itest_conn_open(&g_cl[k].conn, g_srv.port) < 0)
			return -1;
	}
	return 0;
}

static int server_teardown(void **state)
{
	(void)state;
	for (int k = 0; k < TIER_CLIENTS; k++) {
		itest_conn_close(&g_cl[k].conn);
		free(g_cl[k].req.p);
		free(g_cl[k].exp.p);
	}
	return itest_fixture_stop(&g_srv, "tier");
}

/* ---------------- the test ---------------- */

static void test_a_data_set_far_larger_than_memory_is_served_exactly_as_the_model_says(void **state)
{
	(void)state;
	itest_conn ctl;
	char kb[32];
	assert_int_equal(itest_conn_open(&ctl, g_srv.port), 0);

	/* Load, then the log's addresses (note 2). */
	phase_run(PH_LOAD);
	unsigned long long payload = 0, records = 0;
	for (int i = 0; i < g_nkeys; i++) {
		static char vb[64 * 1024];
		size_t kl = key_make(i, kb), vl = val_make(i, 0, vb);
		payload += kl + vl;
		records += (16 + kl + vl + 7) & ~7ULL;
	}
	long long tail = itest_info_field(&ctl, "store", "Log.TailAddress");
	long long head = itest_info_field(&ctl, "store", "Log.HeadAddress");
	long long begin = itest_info_field(&ctl, "store", "Log.BeginAddress");
	assert_true(tail > 0 && head >= 0 && begin >= 0);
	if ((unsigned long long)(tail - begin) < payload || (unsigned long long)(tail - begin) > 2 * records + (1 << 20))
		fail_msg("Log.TailAddress %lld - BeginAddress %lld does not match the %llu bytes of records "
		         "loaded (%llu of keys and values)", tail, begin, records, payload);
	if (head > tail || tail - head > TIER_MEMORY_BYTES)
		fail_msg("Log.HeadAddress %lld is not within --memory (%d) of TailAddress %lld", head,
		         TIER_MEMORY_BYTES, tail);
	assert_int_equal(info_keys(&ctl), g_nkeys);

	/* Read everything back: the record reads asked for grow with the cold keys, at least one each
	 * (device_reads + merged_reads + dedup_hits counts them, log/readq.c note 1), and every request
	 * that went to the device read at least a sector of 512 bytes or more. Not bytes per cold key:
	 * how many neighbouring reads one poll merges into one request, or attaches to a read of the
	 * same sector, depends on how many GETs each poll finds queued, i.e. on the machine's load (a
	 * merged read of adjacent 190-byte records costs less than 256 bytes per record). */
	static const char *const rd[] = { "tier_device_reads", "tier_merged_reads", "tier_dedup_hits" };
	long long asked0 = 0, reqs0 = itest_info_stat(&ctl, rd[0]);
	for (int k = 0; k < 3; k++)
		asked0 += itest_info_stat(&ctl, rd[k]);
	long long rb0 = itest_info_stat(&ctl, "tier_device_read_bytes");
	phase_run(PH_READ);
	long long cold = (long long)((double)g_nkeys * (double)(head - begin) / (double)(tail - begin));
	char what[128];
	snprintf(what, sizeof(what), "%d GETs of which about %lld were cold", g_nkeys, cold);
	long long asked = 0, reqs = itest_info_stat(&ctl, rd[0]) - reqs0;
	for (int k = 0; k < 3; k++)
		asked += itest_info_stat(&ctl, rd[k]);
	print_message("read phase: %lld record reads asked for, %lld device requests, %lld bytes, for "
	              "about %lld cold keys\n", asked - asked0, reqs,
	              itest_info_stat(&ctl, "tier_device_read_bytes") - rb0, cold);
	if (asked - asked0 < cold * 9 / 10)
		fail_msg("record reads asked for grew by %lld, at least %lld expected: %s", asked - asked0,
		         cold * 9 / 10, what);
	assert_true(reqs > 0);
	itest_stat_grew(&ctl, "tier_device_read_bytes", rb0, reqs * 512, "a sector or more per device request");
	/* ... and those GETs waited for the device without blocking the worker: they parked. */
	itest_stat_grew(&ctl, "tier_parked_commands", 0, cold / 2, what);

	phase_run(PH_MUTATE);
	phase_run(PH_VERIFY);
	long long deleted = 0;
	for (int i = 0; i < g_nkeys; i++)
		deleted += i % 6 == 1;
	assert_int_equal(info_keys(&ctl), g_nkeys - deleted);

	itest_expect(&ctl, "+PONG\r\n", "PING", NULL);
	itest_conn_close(&ctl);
}

int main(void)
{
#ifdef TIER_SKIP_URING
	uring_or_skip();
#endif
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_data_set_far_larger_than_memory_is_served_exactly_as_the_model_says),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown);
}
