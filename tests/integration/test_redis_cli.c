/*
 * test_redis_cli.c - the real redis-cli against spillway-server.
 *
 * redis-cli is what operators type first; these tests run it as a child process with its output on a
 * pipe, where it prints replies "raw" (no "(integer)" decoration, nil as an empty line), and check
 * that output. They cover one-shot commands, INFO keyspace, CONFIG GET port, --scan with a pattern
 * (which follows SCAN cursors to the end) and --pipe mass insertion.
 *
 * SKIP (77) when redis-cli is not installed; a missing spillway-server is a FAIL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/itest.h"

static itest_server g_srv;
static char g_port[16];

static const char *const srv_flags[] = {
	"--threads", "2", "--memory", "64m", "--page", "1m", "--index", "1m", NULL,
};

static int server_setup(void **state)
{
	(void)state;
	if (itest_fixture_start(&g_srv, ITEST_TARGET, srv_flags, "redis_cli") != 0)
		return -1;
	snprintf(g_port, sizeof(g_port), "%d", g_srv.port);
	return 0;
}

static int server_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "redis_cli");
}

/* Run redis-cli -h 127.0.0.1 -p PORT args... (NULL-terminated); return its output (malloc'd). */
static char *cli_run_in(const char *in, size_t inlen, int *status, const char *arg0, ...)
{
	const char *argv[32] = { "redis-cli", "-h", "127.0.0.1", "-p", g_port };
	int argc = 5;
	va_list ap;
	va_start(ap, arg0);
	for (const char *a = arg0; a && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	char *out = NULL;
	int st = itest_prog_run(argv, in, inlen, &out, NULL, ITEST_TIMEOUT_MS);
	if (st < 0)
		fail_msg("redis-cli %s: %s", arg0, strerror(-st));
	*status = st;
	return out;
}

#define cli(...) cli_run_in(NULL, 0, &st, __VA_ARGS__, NULL)

/* Expect exactly want from redis-cli with these arguments, and exit status 0. */
#define cli_expect(want, ...) do { \
	int st; \
	char *out_ = cli(__VA_ARGS__); \
	if (strcmp(out_, (want)) != 0 || st != 0) { \
		char *e1 = itest_escape(out_, strlen(out_), 300), *e2 = itest_escape(want, strlen(want), 300); \
		fail_msg("redis-cli %s: status %d, output \"%s\", expected \"%s\"", #__VA_ARGS__, st, e1, e2); \
	} \
	free(out_); \
} while (0)

static void test_cli_runs_basic_string_commands(void **state)
{
	(void)state;
	cli_expect("OK\n", "FLUSHALL");
	cli_expect("PONG\n", "PING");
	cli_expect("OK\n", "SET", "cli:k", "hello world");
	cli_expect("hello world\n", "GET", "cli:k");
	cli_expect("1\n", "INCR", "cli:n");
	cli_expect("11\n", "INCRBY", "cli:n", "10");
	cli_expect("\n", "GET", "cli:nosuch");
	cli_expect("hello world\n\n11\n", "MGET", "cli:k", "cli:nosuch", "cli:n");
	cli_expect("2\n", "EXISTS", "cli:k", "cli:n");
	cli_expect("1\n", "DEL", "cli:k");
	cli_expect("0\n", "DEL", "cli:k");
	cli_expect("\n", "GET", "cli:k");
	cli_expect("string\n", "TYPE", "cli:n");
}

static void test_cli_reads_keys_and_ttls(void **state)
{
	(void)state;
	int st;
	cli_expect("OK\n", "FLUSHALL");
	cli_expect("OK\n", "MSET", "cli:a", "1", "cli:b", "2", "other", "3");
	char *out = cli("KEYS", "cli:*");
	/* KEYS order is unspecified: accept either. */
	if (strcmp(out, "cli:a\ncli:b\n") != 0 && strcmp(out, "cli:b\ncli:a\n") != 0)
		fail_msg("KEYS cli:* printed \"%s\"", out);
	free(out);
	cli_expect("-1\n", "TTL", "cli:a");
	cli_expect("-2\n", "TTL", "cli:nosuch");
	cli_expect("1\n", "EXPIRE", "cli:a", "1000");
	cli_expect("1000\n", "TTL", "cli:a");
	cli_expect("1\n", "PERSIST", "cli:a");
	cli_expect("-1\n", "TTL", "cli:a");
	cli_expect("3\n", "DBSIZE");
}

static void test_cli_shows_info_keyspace_and_config_port(void **state)
{
	(void)state;
	int st;
	cli_expect("OK\n", "FLUSHALL");
	cli_expect("OK\n", "MSET", "i:a", "1", "i:b", "2", "i:c", "3");
	cli_expect("1\n", "EXPIRE", "i:a", "1000");
	char *out = cli("INFO", "keyspace");
	if (st != 0 || strncmp(out, "# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=", 40) != 0)
		fail_msg("INFO keyspace printed \"%s\"", out);
	free(out);
	char want[64];
	snprintf(want, sizeof(want), "port\n%s\n", g_port);
	cli_expect(want, "CONFIG", "GET", "port");
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_cli_scan_with_pattern_lists_every_matching_key_once(void **state)
{
	(void)state;
	enum { N = 300 };
	int st;
	char key[32];
	cli_expect("OK\n", "FLUSHALL");
	/* N matching keys and as many that do not match, sent as lines on redis-cli's stdin. */
	char *script = malloc(N * 64);
	size_t len = 0;
	for (int i = 0; i < N; i++)
		len += (size_t)sprintf(script + len, "SET scan:%04d v\nSET skip:%04d v\n", i, i);
	char *loaded = cli_run_in(script, len, &st, NULL);
	free(script);
	if (st != 0)
		fail_msg("loading keys through redis-cli's stdin: status %d: %s", st, loaded);
	free(loaded);
	cli_expect("600\n", "DBSIZE");
	char *out = cli("--scan", "--pattern", "scan:*");
	assert_int_equal(st, 0);
	char *lines[N + 8];
	int n = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (n == N + 8)
			fail_msg("--scan printed more than %d keys", N + 8);
		lines[n++] = l;
	}
	qsort(lines, (size_t)n, sizeof(char *), line_cmp);
	if (n != N)
		fail_msg("--scan --pattern scan:* printed %d keys, expected %d (duplicates or misses)", n, N);
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "scan:%04d", i);
		if (strcmp(lines[i], key) != 0)
			fail_msg("--scan: key %d is \"%s\", expected \"%s\"", i, lines[i], key);
	}
	free(out);
}

static void test_cli_pipe_mode_loads_ten_thousand_sets(void **state)
{
	(void)state;
	enum { N = 10000 };
	int st;
	cli_expect("OK\n", "FLUSHALL");
	char *in = malloc((size_t)N * 64);
	size_t len = 0;
	for (int i = 0; i < N; i++) {
		char k[24], v[24];
		int kl = snprintf(k, sizeof(k), "pipe:%d", i), vl = snprintf(v, sizeof(v), "%d", i * 7);
		len += (size_t)sprintf(in + len, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", kl, k, vl, v);
	}
	char *out = cli_run_in(in, len, &st, "--pipe", NULL);
	free(in);
	if (st != 0 || !strstr(out, "errors: 0, replies: 10000"))
		fail_msg("redis-cli --pipe: status %d, output: %s", st, out);
	free(out);
	cli_expect("10000\n", "DBSIZE");
	cli_expect("69993\n", "GET", "pipe:9999");
	cli_expect("0\n", "GET", "pipe:0");
}

int main(void)
{
	if (!itest_prog_present("redis-cli", "redis-tools"))
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_runs_basic_string_commands),
		cmocka_unit_test(test_cli_reads_keys_and_ttls),
		cmocka_unit_test(test_cli_shows_info_keyspace_and_config_port),
		cmocka_unit_test(test_cli_scan_with_pattern_lists_every_matching_key_once),
		cmocka_unit_test(test_cli_pipe_mode_loads_ten_thousand_sets),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown) ? 1 : 0;
}
