/*
 * test_memcap.c - the memory cap through real server processes (server/memcap.c): start-up sizes
 * --memory inside --maxmemory or refuses what does not fit, INFO # Memory's parts add up to
 * used_memory and follow the load, client-output-buffer-limit closes a client that never reads
 * (as redis-server does: SPW_ITEST_TARGET=redis runs those tests against it), writes get -OOM at
 * the cap without a storage tier and work again after FLUSHALL, and with a storage tier the
 * process's RSS stays within the cap plus 10% while it loads 20 times the cap with many idle
 * clients connected.
 *
 * Notes:
 *  1. INFO's parts are compared within one INFO reply (itest_info_value), never across two: the
 *     gauges move between calls.
 *  2. RSS is VmRSS of /proc/<pid>/status, sampled after every pipeline of the load. Under
 *     AddressSanitizer the load is smaller and RSS is not compared (its shadow memory and
 *     quarantine are not the server's).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/itest.h"

#define MB (1024LL * 1024)

static const char *const no_saves[] = { "--save", "", "--checkpoint-interval", "0", NULL };

/* Start the target with flags (spillway-server's) after no_saves; fails the test when it does not
 * start. */
static void start(itest_server *s, const char *const *flags)
{
	const char *argv[32];
	int n = 0;
	for (int i = 0; no_saves[i]; i++)
		argv[n++] = no_saves[i];
	for (int i = 0; flags && flags[i]; i++)
		argv[n++] = flags[i];
	argv[n] = NULL;
	assert_true(n < 32);
	if (itest_target_start(s, argv) < 0)
		fail_msg("cannot start the server under test");
}

static void stop(itest_server *s)
{
	int st = itest_server_stop(s);
	if (st != 0) {
		itest_server_log_dump(s);
		fail_msg("exit status %d", st);
	}
}

/* spillway-server with flags, expected to refuse to start: its output (malloc'd). */
static char *start_refused(const char *const *flags)
{
	char exe[4096], dir[256], port[16];
	const char *argv[32] = { exe, "--port", port, "--dir", dir, "--bind", "127.0.0.1" };
	int n = 7;
	assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	assert_int_equal(itest_tmpdir_make(dir, sizeof(dir), "spw-memcap"), 0);
	snprintf(port, sizeof(port), "%d", itest_port_pick());
	for (int i = 0; flags[i]; i++)
		argv[n++] = flags[i];
	argv[n] = NULL;
	char *out = NULL;
	size_t len;
	int st = itest_prog_run(argv, NULL, 0, &out, &len, ITEST_TIMEOUT_MS);
	itest_tmpdir_remove(dir);
	if (st != 1)
		fail_msg("exit status %d, not 1; output: %s", st, out ? out : "");
	return out;
}

static void expect_in(const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("'%s' is not in: %s", want, text);
}

static void test_startup_refuses_memory_and_index_that_do_not_fit_the_cap(void **state)
{
	(void)state;
	if (itest_target_is_redis())
		skip();
	const char *big[] = { "--maxmemory", "64mb", "--memory", "64mb", "--index", "1mb", NULL };
	char *out = start_refused(big);
	expect_in(out, "--memory 64mb and --index 1mb (growing up to 4mb: --index-max-size) do not fit "
	          "inside --maxmemory 64mb");
	expect_in(out, "pass --maxmemory 78mb or more, or a smaller --memory");
	free(out);
	const char *tiny[] = { "--maxmemory", "2mb", NULL };
	out = start_refused(tiny);
	expect_in(out, "--maxmemory 2mb leaves 0 for the log");
	expect_in(out, "pass a larger --maxmemory");
	free(out);

	/* What fits starts; left out, --memory is sized from the cap (memcap.c note 2). */
	itest_server s;
	itest_conn c;
	const char *fits[] = { "--maxmemory", "64mb", "--memory", "32mb", "--index", "1mb", "--page", "1mb",
		NULL };
	start(&s, fits);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	assert_int_equal(itest_info_field(&c, "memory", "maxmemory"), 64 * MB);
	assert_int_equal(itest_info_field(&c, "memory", "log_max_memory"), 32 * MB);
	itest_expect(&c, "*2\r\n$9\r\nmaxmemory\r\n$8\r\n67108864\r\n", "config", "get", "maxmemory", NULL);
	itest_conn_close(&c);
	stop(&s);
	const char *sized[] = { "--maxmemory", "64mb", NULL };
	start(&s, sized);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	long long mem = itest_info_field(&c, "memory", "log_max_memory");
	long long idx = itest_info_field(&c, "store", "IndexMemorySizeBytes");
	if (mem + idx + 8 * MB > 64 * MB || mem < 32 * MB)
		fail_msg("--memory %lld and --index %lld sized from --maxmemory 64mb", mem, idx);
	itest_conn_close(&c);
	stop(&s);
}

/* used_memory and its parts from one INFO memory reply (note 1): the parts must add up. */
typedef struct mem_parts {
	long long used, log, index, io, clients, aof, rss;
} mem_parts;

static void mem_parts_get(itest_conn *c, mem_parts *m)
{
	char *r = itest_call(c, "info", "memory", NULL);
	m->used = itest_info_value(r, "used_memory");
	m->log = itest_info_value(r, "used_memory_log");
	m->index = itest_info_value(r, "used_memory_index");
	m->io = itest_info_value(r, "used_memory_io");
	m->clients = itest_info_value(r, "used_memory_clients");
	m->aof = itest_info_value(r, "used_memory_aof");
	m->rss = itest_info_value(r, "used_memory_rss");
	assert_true(itest_info_value(r, "used_memory_peak") >= m->used);
	assert_int_equal(itest_info_value(r, "mem_clients_normal"), m->clients);
	assert_int_equal(itest_info_value(r, "used_memory_dataset"), m->log);
	assert_int_equal(itest_info_value(r, "used_memory_overhead"), m->used - m->log);
	if (m->log + m->index + m->io + m->clients + m->aof != m->used)
		fail_msg("parts %lld + %lld + %lld + %lld + %lld != used_memory %lld in:\n%s", m->log,
		         m->index, m->io, m->clients, m->aof, m->used, r);
	free(r);
}

/* count SETs of vlen-byte values key:<first..>, pipelined about 1 MB at a time, until the first
 * pipeline with an error reply, whose first error goes to *err (malloc'd; err may be NULL). Returns
 * the SETs that answered +OK. */
static long long load(itest_conn *c, long long first, long long count, size_t vlen, char **err)
{
	char *val = malloc(vlen);
	assert_non_null(val);
	memset(val, 'v', vlen);
	long long ok = 0;
	const int batch = (int)(vlen >= (1 << 20) ? 1 : (1 << 20) / vlen < 256 ? (1 << 20) / vlen : 256);
	for (long long i = 0; i < count; i += batch) {
		itest_buf b = { 0 };
		int n = (int)(count - i < batch ? count - i : batch);
		for (int k = 0; k < n; k++) {
			char key[32];
			int kl = snprintf(key, sizeof(key), "key:%lld", first + i + k);
			itest_buf_fmt(&b, "*3\r\n$3\r\nSET\r\n");
			itest_buf_bulk(&b, key, (size_t)kl);
			itest_buf_bulk(&b, val, vlen);
		}
		assert_int_equal(itest_conn_send(c, b.p, b.len), 0);
		free(b.p);
		bool failed = false;
		for (int k = 0; k < n; k++) {
			const char *r;
			char t;
			ssize_t len = itest_conn_read_reply(c, &r, &t);
			assert_true(len > 0);
			if (t == '+') {
				ok++;
			} else if (!failed) {
				failed = true;
				if (err)
					*err = strndup(r, (size_t)len);
			}
		}
		if (failed)
			break;
	}
	free(val);
	return ok;
}

static void test_info_memory_parts_add_up_and_follow_the_load(void **state)
{
	(void)state;
	if (itest_target_is_redis())
		skip();   /* the parts are Spillway's own fields */
	itest_server s;
	itest_conn c, more[40];
	mem_parts a, b, d;
	const char *flags[] = { "--maxmemory", "128mb", "--page", "1mb", NULL };
	start(&s, flags);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	mem_parts_get(&c, &a);
	assert_int_equal(load(&c, 0, 4000, 10000, NULL), 4000);   /* 40 MB */
	mem_parts_get(&c, &b);
	if (b.log < a.log + 32 * MB)
		fail_msg("used_memory_log %lld after 40 MB of SETs (was %lld)", b.log, a.log);
	/* 40 more clients, each with a read buffer (its first request allocates it). */
	for (int i = 0; i < 40; i++) {
		assert_int_equal(itest_conn_open(&more[i], s.port), 0);
		itest_expect(&more[i], "+PONG\r\n", "ping", NULL);
	}
	mem_parts_get(&c, &d);
	if (d.clients < b.clients + 40 * 16384)
		fail_msg("used_memory_clients %lld with 40 more clients (was %lld)", d.clients, b.clients);
	/* Idle, they give their read buffers back (client.c note 2): the part falls again. */
	long long t0 = itest_now_ms();
	do {
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("used_memory_clients %lld: idle clients kept their read buffers", d.clients);
		itest_sleep_ms(200);
		mem_parts_get(&c, &d);
	} while (d.clients >= b.clients + 20 * 16384);
	for (int i = 0; i < 40; i++)
		itest_conn_close(&more[i]);
	itest_expect(&c, "+OK\r\n", "flushall", NULL);
	/* FLUSHALL frees the frames in an epoch action (log/alloc.c note 9), which runs once every
	 * thread inside the epoch has moved on: on a loaded machine (ASan in CI) that may be after the
	 * INFO that follows, so poll (bounded). */
	t0 = itest_now_ms();
	for (mem_parts_get(&c, &d); d.log > a.log; mem_parts_get(&c, &d)) {
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("used_memory_log %lld after FLUSHALL (%lld at start)", d.log, a.log);
		itest_sleep_ms(50);
	}
	itest_conn_close(&c);
	stop(&s);
}

/* Until connected_clients is want (bounded). */
static void clients_wait(itest_conn *c, long long want)
{
	long long t0 = itest_now_ms(), n;
	while ((n = itest_info_field(c, "clients", "connected_clients")) != want) {
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("connected_clients %lld, waited for %lld", n, want);
		itest_sleep_ms(20);
	}
}

/* A connection that pipelines n GETs of key and reads nothing. Its receive buffer keeps its
 * default size: a tiny one makes the kernel trickle what the server had queued before it closed
 * (zero-window probes), and the read to EOF would outlast its deadline. */
static void gets_unread(itest_conn *r, int port, int n)
{
	assert_int_equal(itest_conn_open(r, port), 0);
	itest_buf b = { 0 };
	for (int i = 0; i < n; i++)
		itest_buf_fmt(&b, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
	assert_int_equal(itest_conn_send(r, b.p, b.len), 0);
	free(b.p);
}

/* The reader was closed by the server before it got every reply (n of vlen bytes). */
static void expect_closed_early(itest_conn *r, size_t n, size_t vlen)
{
	char *rest;
	size_t len;
	int rc = itest_conn_read_to_eof(r, &rest, &len);
	if (rc != 0)
		fail_msg("read to EOF: %d after %zu bytes", rc, len);
	if (len >= n * vlen)
		fail_msg("the client got all %zu bytes of replies: not closed", len);
	free(rest);
	itest_conn_close(r);
}

static void test_output_buffer_limit_closes_a_client_that_never_reads(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c, r;
	start(&s, NULL);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "*2\r\n$26\r\nclient-output-buffer-limit\r\n$67\r\nnormal 0 0 0 slave 268435456 "
	             "67108864 60 pubsub 33554432 8388608 60\r\n", "config", "get",
	             "client-output-buffer-limit", NULL);
	itest_expect(&c, "-ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') "
	             "- Invalid client class specified in buffer limit configuration.\r\n", "config", "set",
	             "client-output-buffer-limit", "master 1mb 1mb 1", NULL);
	char *val = malloc(100000);
	memset(val, 'b', 100000);
	const char *set[] = { "set", "big", val };
	size_t lens[] = { 3, 3, 100000 };
	char *rep = itest_conn_call_argv(&c, 3, set, lens);
	assert_string_equal(rep, "+OK\r\n");
	free(rep);
	free(val);
	long long before = itest_target_is_redis() ? 0 :
	                   itest_info_stat(&c, "client_output_buffer_limit_disconnections");

	/* Past the hard limit. */
	itest_expect(&c, "+OK\r\n", "config", "set", "client-output-buffer-limit", "normal 1mb 0 0", NULL);
	gets_unread(&r, s.port, 200);
	clients_wait(&c, 1);
	expect_closed_early(&r, 200, 100000);
	if (!itest_target_is_redis())
		before = itest_stat_grew(&c, "client_output_buffer_limit_disconnections", before, 1,
		                         "a client past the hard output limit closed");

	/* Past the soft limit for longer than its seconds: the clock starts with the first look, the
	 * next reply after it closes the client (as Redis's checkClientOutputBufferLimits). */
	itest_expect(&c, "+OK\r\n", "config", "set", "client-output-buffer-limit", "normal 0 1mb 1", NULL);
	gets_unread(&r, s.port, 300);   /* 30 MB: more than the socket buffers hold, so more than 1 MB waits */
	itest_sleep_ms(2500);   /* past soft seconds (Redis counts whole seconds) */
	assert_int_equal(itest_conn_send_cmd(&r, "get", "big", NULL), 0);
	clients_wait(&c, 1);
	expect_closed_early(&r, 301, 100000);
	if (!itest_target_is_redis())
		itest_stat_grew(&c, "client_output_buffer_limit_disconnections", before, 1,
		                "a client past the soft output limit for its seconds closed");
	itest_expect(&c, "*2\r\n$26\r\nclient-output-buffer-limit\r\n$73\r\nnormal 0 1048576 1 slave "
	             "268435456 67108864 60 pubsub 33554432 8388608 60\r\n", "config", "get",
	             "client-output-buffer-limit", NULL);
	itest_conn_close(&c);
	stop(&s);
}

/* SET until the gate answers; its reply must be Redis's -OOM (bounded: the gate is looked at after
 * every pass once set, within a millisecond otherwise). */
static void oom_wait(itest_conn *c)
{
	long long t0 = itest_now_ms();
	for (;;) {
		char *r = itest_call(c, "set", "probe", "x", NULL);
		bool oom = !strcmp(r, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
		if (!oom && strcmp(r, "+OK\r\n"))
			fail_msg("SET answered %s", r);
		free(r);
		if (oom)
			return;
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("no -OOM with used_memory past maxmemory");
		itest_sleep_ms(5);
	}
}

static void test_writes_get_oom_at_the_cap_without_a_tier_and_work_after_flushall(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	char *err = NULL;
	const char *flags[] = { "--maxmemory", "32mb", "--page", "1mb", NULL };
	if (itest_target_is_redis()) {
		start(&s, NULL);
		assert_int_equal(itest_conn_open(&c, s.port), 0);
		itest_expect(&c, "+OK\r\n", "config", "set", "maxmemory", "32mb", NULL);
	} else {
		start(&s, flags);
		assert_int_equal(itest_conn_open(&c, s.port), 0);
	}
	long long ok = load(&c, 0, 10000, 10000, &err);   /* 100 MB into a 32 MB cap */
	if (!err || strncmp(err, "-OOM ", 5))
		fail_msg("%lld SETs of 10 KB, then %s", ok, err ? err : "no error");
	if (ok < 1000)
		fail_msg("-OOM after only %lld SETs of 10 KB under a 32 MB cap", ok);
	free(err);
	itest_expect(&c, "+OK\r\n", "flushall", NULL);
	itest_expect(&c, "+OK\r\n", "set", "after", "flushall", NULL);

	/* The gate itself: a cap lowered below what is used refuses writes, reads go on. */
	assert_int_equal(load(&c, 0, 1000, 10000, NULL), 1000);
	itest_expect(&c, "+OK\r\n", "config", "set", "maxmemory", "4mb", NULL);
	oom_wait(&c);
	itest_expect(&c, "$8\r\nflushall\r\n", "get", "after", NULL);
	itest_expect(&c, "+OK\r\n", "flushall", NULL);
	if (!itest_target_is_redis())
		itest_expect(&c, "+OK\r\n", "set", "after", "flushall", NULL);   /* the pass cleared it */
	itest_expect(&c, "+OK\r\n", "config", "set", "maxmemory", "0", NULL);
	itest_expect(&c, "+OK\r\n", "set", "after", "flushall", NULL);
	itest_conn_close(&c);
	stop(&s);
}

static long long rss_bytes(pid_t pid)
{
	char path[64], line[256];
	long long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *fp = fopen(path, "r");
	if (!fp)
		return -1;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "VmRSS: %lld kB", &kb) == 1)
			break;
	fclose(fp);
	return kb * 1024;
}

/* Idle connections to port, as many as want and the fd limit allow; their fds into fds. */
static int idle_open(int port, int *fds, int want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && (rlim_t)want + 64 > rl.rlim_cur)
		want = (int)rl.rlim_cur - 64;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int n = 0;
	for (; n < want; n++) {
		fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[n] < 0 || connect(fds[n], (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			if (fds[n] >= 0)
				close(fds[n]);
			break;
		}
	}
	return n;
}

static void test_rss_stays_within_the_cap_loading_20x_with_many_clients(void **state)
{
	(void)state;
	if (itest_target_is_redis())
		skip();
	const long long cap = 64 * MB;
#ifdef ITEST_ASAN
	const long long times = 4;
#else
	const long long times = 20;
#endif
	const size_t vlen = 4096;
	itest_server s;
	itest_conn c;
	static int fds[1000];
	const char *flags[] = { "--storage-tier", "--maxmemory", "64mb", "--threads", "2", NULL };
	start(&s, flags);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	int idle = idle_open(s.port, fds, 1000);
	clients_wait(&c, idle + 1);
	long long flushed0 = itest_info_stat(&c, "tier_flush_bytes"), rss_max = 0, keys = times * cap / (long long)vlen;
	const long long step = 2048;   /* 8 MB a round, then a look at RSS */
	for (long long i = 0; i < keys; i += step) {
		assert_int_equal(load(&c, i, step, vlen, NULL), step);
		long long rss = rss_bytes(s.pid);
		if (rss > rss_max)
			rss_max = rss;
	}
	mem_parts m;
	mem_parts_get(&c, &m);
	print_message("memcap: %d idle clients, %lld MB loaded into a %lld MB cap: RSS at most %lld KB "
	              "(%.1f%% of the cap), used_memory %lld KB at the end\n", idle, keys * (long long)vlen / MB,
	              cap / MB, rss_max / 1024, 100.0 * (double)rss_max / (double)cap, m.used / 1024);
	itest_stat_grew(&c, "tier_flush_bytes", flushed0, (times - 2) * cap, "the load went to the device");
#ifndef ITEST_ASAN
	if (rss_max > cap + cap / 10)
		fail_msg("RSS reached %lld bytes under a cap of %lld (+10%% = %lld)", rss_max, cap, cap + cap / 10);
#endif
	itest_expect_bulk(&c, "vvvv", "getrange", "key:0", "0", "3", NULL);   /* back from the device */
	for (int i = 0; i < idle; i++)
		close(fds[i]);
	itest_conn_close(&c);
	stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_startup_refuses_memory_and_index_that_do_not_fit_the_cap),
		cmocka_unit_test(test_info_memory_parts_add_up_and_follow_the_load),
		cmocka_unit_test(test_output_buffer_limit_closes_a_client_that_never_reads),
		cmocka_unit_test(test_writes_get_oom_at_the_cap_without_a_tier_and_work_after_flushall),
		cmocka_unit_test(test_rss_stays_within_the_cap_loading_20x_with_many_clients),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
