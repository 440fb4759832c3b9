/*
 * test_redis_benchmark.c - the real redis-benchmark against spillway-server.
 *
 * redis-benchmark is how people will first measure Spillway, so it must run clean: it asks CONFIG GET
 * save/appendonly at start (a failure prints a WARNING), pipelines 16 requests per write, uses random
 * keys, and MSET with 10 keys. This is a compatibility test, not a performance one: it checks the exit
 * status, that every test printed its "requests per second" line, that nothing printed an error or a
 * warning, and that the data landed (DBSIZE > 0, a written key reads back as a 3-byte value, redis-benchmark's -d 3).
 *
 * SKIP (77) when redis-benchmark is not installed; a missing spillway-server is a FAIL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/itest.h"

static itest_server g_srv;

/* About 1.2 million records are written (MSET writes 10 keys each): room for all of them in memory. */
static const char *const srv_flags[] = {
	"--threads", "2", "--memory", "256m", "--page", "4m", "--index", "8m", NULL,
};

static int server_setup(void **state)
{
	(void)state;
	return itest_fixture_start(&g_srv, ITEST_TARGET, srv_flags, "redis_benchmark");
}

static int server_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "redis_benchmark");
}

/* The final result line of each test: "<NAME>: <float> requests per second". Progress updates are
 * separated by '\r', so split on both '\r' and '\n'. */
static bool result_line_found(const char *out, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = out; *p;) {
		size_t seg = strcspn(p, "\r\n");
		if (seg > nl + 2 && strncmp(p, name, nl) == 0 && p[nl] == ':' && p[nl + 1] == ' ') {
			char *end;
			double rps = strtod(p + nl + 2, &end);
			if (end != p + nl + 2 && rps > 0 && strncmp(end, " requests per second", 20) == 0)
				return true;
		}
		p += seg;
		while (*p == '\r' || *p == '\n')
			p++;
	}
	return false;
}

static void test_benchmark_set_get_incr_mset_runs_clean(void **state)
{
	(void)state;
	char port[16];
	snprintf(port, sizeof(port), "%d", g_srv.port);
	const char *argv[] = { "redis-benchmark", "-h", "127.0.0.1", "-p", port, "-t", "set,get,incr,mset",
	                       "-P", "16", "-n", "100000", "-r", "100000", "-q", NULL };
	char *out = NULL;
	int st = itest_prog_run(argv, NULL, 0, &out, NULL, 4 * ITEST_TIMEOUT_MS);
	if (st != 0)
		fail_msg("redis-benchmark exited with status %d: %s", st, out ? out : "");
	static const char *const bad[] = { "ERR", "rror", "WARNING", "WRONGTYPE" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (strstr(out, bad[i]))
			fail_msg("redis-benchmark printed \"%s\":\n%s", bad[i], out);
	static const char *const names[] = { "SET", "GET", "INCR", "MSET (10 keys)" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!result_line_found(out, names[i]))
			fail_msg("no \"%s: N requests per second\" line in:\n%s", names[i], out);
	free(out);

	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);
	char *r = itest_call(&c, "DBSIZE", NULL);
	if (r[0] != ':' || strtoll(r + 1, NULL, 10) <= 0)
		fail_msg("DBSIZE after redis-benchmark: %s", r);
	free(r);
	/* redis-benchmark's keys are key:<12 digits> holding 3 bytes (-d 3 by default). */
	r = itest_call(&c, "KEYS", "key:00000000000*", NULL);
	/* Take the first key of the KEYS reply: "*N\r\n$16\r\nkey:...\r\n". */
	char *k = strstr(r, "\r\n$16\r\n");
	if (r[0] != '*' || !k)
		fail_msg("KEYS key:00000000000* (keys 0..9 of 100000, surely written): %s", r);
	char key[17];
	memcpy(key, k + 7, 16);
	key[16] = '\0';
	free(r);
	r = itest_call(&c, "GET", key, NULL);
	if (strlen(r) != 9 || strncmp(r, "$3\r\n", 4) != 0 || strcmp(r + 7, "\r\n") != 0)
		fail_msg("GET %s after redis-benchmark: %s", key, r);
	free(r);
	itest_conn_close(&c);
}

int main(void)
{
	if (!itest_prog_present("redis-benchmark", "redis-tools"))
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_benchmark_set_get_incr_mset_runs_clean),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown) ? 1 : 0;
}
