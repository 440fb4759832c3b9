/*
 * test_bench.c - spillway-bench against a real spillway-server and a real redis-server.
 *
 * Each server gets a short run of every mode (load, offline over a -t list, online with a
 * GET/SET mix) with --csv, and the rows are checked for shape: the expected modes and sweep,
 * every numeric column a number, ops and throughput above zero, percentiles in order, no reply
 * failures and a clean exit. Then the reply check itself is put to the test: after a load, another
 * client overwrites one key with a wrong value, and a GET run over that small key space must count
 * it as a wrong reply and exit with status 1. Hash runs (HGET, HSET) load every key as one HSET of
 * --fields fields, give the same well-formed rows, and catch an overwritten field by its cell. The
 * in-process client gets a short run too, and
 * --server-pid must fill the server CPU columns. All runs last a fraction of a second: this tests
 * the tool, not the servers' speed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/itest.h"

enum { SRV_SPILLWAY, SRV_REDIS, SRV_COUNT };

static itest_server g_srv[SRV_COUNT];
static bool g_up[SRV_COUNT];
static char g_bench[512];

static const char *const spw_flags[] = {
	"--threads", "2", "--memory", "64m", "--page", "1m", "--index", "4m", NULL,
};

static int setup(void **state)
{
	(void)state;
	char dir[400];
	if (itest_spillway_path(dir, sizeof(dir)) < 0)
		return -1;
	*strrchr(dir, '/') = '\0';
	snprintf(g_bench, sizeof(g_bench), "%s/spillway-bench", dir);
	if (access(g_bench, X_OK) != 0) {
		fprintf(stderr, "bench: %s is not built (cmake --build build --target spillway-bench)\n", g_bench);
		return -1;
	}
	if (itest_fixture_start(&g_srv[SRV_SPILLWAY], ITEST_SPILLWAY, spw_flags, "bench") != 0)
		return -1;
	g_up[SRV_SPILLWAY] = true;
	/* redis-server is optional: its tests skip when it is not installed. */
	int err = itest_redis_start(&g_srv[SRV_REDIS], NULL);
	if (err == 0)
		g_up[SRV_REDIS] = true;
	else if (err != -ENOENT) {
		fprintf(stderr, "bench: cannot start redis-server: %s\n", strerror(-err));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	int rc = 0;
	for (int i = 0; i < SRV_COUNT; i++)
		if (itest_fixture_stop(&g_srv[i], "bench") != 0)
			rc = -1;
	return rc;
}

/* ---------------- running the tool ---------------- */

/* Run spillway-bench with args (NULL-terminated) plus --port and --csv; *out gets stdout+stderr
 * (malloc'd), *csv the CSV file's contents (malloc'd). Returns the exit status. */
static int bench_run(int srv, const char *const *args, char **out, char **csv)
{
	const char *argv[64];
	char port[16], path[] = "/tmp/spw-bench-test.XXXXXX";
	int argc = 0, fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	snprintf(port, sizeof(port), "%d", srv >= 0 ? g_srv[srv].port : 1);
	argv[argc++] = g_bench;
	if (srv >= 0) {
		argv[argc++] = "--port";
		argv[argc++] = port;
	}
	argv[argc++] = "--csv";
	argv[argc++] = path;
	for (int i = 0; args[i]; i++)
		argv[argc++] = args[i];
	argv[argc] = NULL;
	int st = itest_prog_run(argv, NULL, 0, out, NULL, 4 * ITEST_TIMEOUT_MS);
	FILE *f = fopen(path, "r");
	*csv = NULL;
	if (f) {
		size_t cap = 0;
		ssize_t n = getdelim(csv, &cap, '\0', f);
		if (n < 0) {
			free(*csv);
			*csv = strdup("");
		}
		fclose(f);
	}
	unlink(path);
	return st;
}

/* ---------------- CSV rows ---------------- */

#define NCOLS 24
enum { C_MODE, C_OP, C_THREADS, C_BATCH, C_CONNS, C_ITP, C_RATE, C_OPS, C_SECONDS, C_TPUT, C_MIN, C_P5, C_P50,
       C_AVG, C_P95, C_P99, C_P999, C_MAX, C_ERRORS, C_WRONG, C_MISSING, C_CPU, C_CPU_OP, C_FAILED };

typedef struct csv_row {
	char f[NCOLS][96];
	int n;
} csv_row;

/* Split one CSV line (fields may be "quoted", with commas inside). */
static void csv_split(const char *line, size_t len, csv_row *r)
{
	memset(r, 0, sizeof(*r));
	size_t i = 0;
	while (i <= len && r->n < NCOLS + 1) {
		char *dst = r->n < NCOLS ? r->f[r->n] : NULL;
		size_t o = 0;
		bool q = i < len && line[i] == '"';
		if (q)
			i++;
		while (i < len && (q ? line[i] != '"' : line[i] != ',')) {
			if (dst && o + 1 < sizeof(r->f[0]))
				dst[o++] = line[i];
			i++;
		}
		if (q)
			i++;   /* closing quote */
		r->n++;
		if (i >= len || line[i] != ',')
			break;
		i++;
	}
}

static const char csv_header[] =
	"mode,op,threads,batch,conns_per_thread,itp,rate,ops,seconds,ops_per_s,min_us,p5_us,p50_us,avg_us,p95_us,"
	"p99_us,p999_us,max_us,errors,wrong,missing,server_cpu_s,server_cpu_us_per_op,failed";

/* Rows of a CSV file, header checked. Returns the count. */
static int csv_rows(const char *csv, csv_row *rows, int max)
{
	size_t hl = strlen(csv_header);
	if (strncmp(csv, csv_header, hl) != 0 || csv[hl] != '\n')
		fail_msg("CSV header differs:\n%s", csv);
	int n = 0;
	for (const char *p = csv + hl + 1; *p && n < max;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		csv_split(p, len, &rows[n]);
		if (rows[n].n != NCOLS)
			fail_msg("CSV row %d has %d fields, not %d: %.*s", n, rows[n].n, NCOLS, (int)len, p);
		n++;
		p += len + (e ? 1 : 0);
	}
	return n;
}

static double num(const csv_row *r, int col)
{
	char *end;
	const char *s = r->f[col];
	double v = strtod(s, &end);
	if (!*s || *end)
		fail_msg("column %d of a %s row is not a number: '%s'", col, r->f[C_MODE], s);
	return v;
}

static bool empty(const csv_row *r, int col)
{
	return r->f[col][0] == '\0';
}

/* A row that ran clean: counts, throughput, ordered percentiles (when it has latencies). */
static void row_check(const csv_row *r, const char *mode, const char *op, int threads)
{
	assert_string_equal(r->f[C_MODE], mode);
	assert_string_equal(r->f[C_OP], op);
	assert_int_equal((int)num(r, C_THREADS), threads);
	num(r, C_BATCH);
	num(r, C_CONNS);
	num(r, C_ITP);
	if (num(r, C_OPS) <= 0 || num(r, C_SECONDS) <= 0 || num(r, C_TPUT) <= 0)
		fail_msg("%s %s row with no work done: ops %s seconds %s", mode, op, r->f[C_OPS], r->f[C_SECONDS]);
	if (strcmp(mode, "load") != 0) {
		double l[] = { num(r, C_MIN), num(r, C_P5), num(r, C_P50), num(r, C_P95), num(r, C_P99), num(r, C_P999),
		               num(r, C_MAX) };
		for (size_t i = 1; i < sizeof(l) / sizeof(l[0]); i++)
			if (l[i] < l[i - 1])
				fail_msg("%s %s row: percentiles out of order", mode, op);
		double avg = num(r, C_AVG);
		assert_true(avg >= l[0] && avg <= l[6]);
	} else {
		assert_true(empty(r, C_P50) && empty(r, C_P99));
	}
	if (num(r, C_ERRORS) != 0 || num(r, C_WRONG) != 0 || num(r, C_MISSING) != 0 || num(r, C_FAILED) != 0)
		fail_msg("%s %s row has failures: errors %s wrong %s missing %s failed %s", mode, op, r->f[C_ERRORS],
		         r->f[C_WRONG], r->f[C_MISSING], r->f[C_FAILED]);
}

/* ---------------- tests ---------------- */

static void modes_against(int srv)
{
	char *out = NULL, *csv = NULL;
	csv_row rows[16];
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)g_srv[srv].pid);

	/* Load, then offline over -t 1,2 with batches of 16 (one row per pair). */
	const char *off[] = { "--dbsize", "2000", "--runtime", "0.3", "-t", "1,2", "-b", "16", "--op", "GET",
	                      "--server-pid", pid, NULL };
	int st = bench_run(srv, off, &out, &csv);
	if (st != 0 || !csv)
		fail_msg("%s: offline run exited %d:\n%s", g_srv[srv].name, st, out ? out : "");
	int n = csv_rows(csv, rows, 16);
	assert_int_equal(n, 3);
	row_check(&rows[0], "load", "MSET", 2);
	assert_int_equal((int)num(&rows[0], C_OPS), 2000);
	row_check(&rows[1], "offline", "GET", 1);
	row_check(&rows[2], "offline", "GET", 2);
	assert_int_equal((int)num(&rows[1], C_BATCH), 16);
	/* --server-pid: CPU seconds and CPU per op are numbers (maybe 0 at tick resolution). */
	assert_true(num(&rows[1], C_CPU) >= 0 && num(&rows[1], C_CPU_OP) >= 0);
	assert_non_null(strstr(out, "mode    op"));   /* the human table */
	free(out);
	free(csv);

	/* Online, skipping the load (-s): the keys are there from the run above. */
	const char *on[] = { "--dbsize", "2000", "-s", "--runtime", "0.3", "--online", "--op-workload", "GET,SET",
	                     "--op-percent", "80,20", "-t", "2", "--itp", "4", "--zipf", NULL };
	st = bench_run(srv, on, &out, &csv);
	if (st != 0 || !csv)
		fail_msg("%s: online run exited %d:\n%s", g_srv[srv].name, st, out ? out : "");
	n = csv_rows(csv, rows, 16);
	assert_int_equal(n, 1);
	row_check(&rows[0], "online", "GET:80,SET:20", 2);
	assert_int_equal((int)num(&rows[0], C_ITP), 4);
	/* The full distribution at the end, HdrHistogram style. */
	assert_non_null(strstr(out, "Percentile TotalCount"));
	assert_non_null(strstr(out, "1.000000000000"));
	free(out);
	free(csv);
}


/* Load 16 keys, overwrite key 3 from another connection, then GET over the 16 keys: the overwritten
 * key is drawn (thousands of GETs over 16 keys) and must be reported. */
static void wrong_value_caught_on(int srv)
{
	char *out = NULL, *csv = NULL;
	csv_row rows[4];
	const char *load[] = { "--dbsize", "16", "--runtime", "0", NULL };
	int st = bench_run(srv, load, &out, &csv);
	if (st != 0)
		fail_msg("%s: load exited %d:\n%s", g_srv[srv].name, st, out ? out : "");
	free(out);
	free(csv);

	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv[srv].port), 0);
	char *r = itest_call(&c, "GET", "00000003", NULL);
	assert_true(strncmp(r, "$8\r\n", 4) == 0);   /* loaded: an 8-byte value */
	free(r);
	itest_expect(&c, "+OK\r\n", "SET", "00000003", "notright", NULL);
	itest_conn_close(&c);

	const char *get[] = { "--dbsize", "16", "-s", "--runtime", "0.3", "-t", "1", "-b", "8", "--op", "GET", NULL };
	st = bench_run(srv, get, &out, &csv);
	if (st != 1)
		fail_msg("%s: a run that met a wrong value exited %d, not 1:\n%s", g_srv[srv].name, st, out ? out : "");
	assert_int_equal(csv_rows(csv, rows, 4), 1);
	assert_string_equal(rows[0].f[C_MODE], "offline");
	if (num(&rows[0], C_WRONG) < 1 || num(&rows[0], C_ERRORS) != 0 || num(&rows[0], C_MISSING) != 0)
		fail_msg("%s: wrong %s errors %s missing %s", g_srv[srv].name, rows[0].f[C_WRONG], rows[0].f[C_ERRORS],
		         rows[0].f[C_MISSING]);
	/* Every GET of key 3 is wrong, every other GET right: about 1/16 of the ops. */
	assert_true(num(&rows[0], C_WRONG) < num(&rows[0], C_OPS) / 4);
	assert_non_null(strstr(out, "GET key 3: wrong reply: $8\\r\\nnotright\\r\\n"));
	free(out);
	free(csv);

	/* And a key that is gone is "missing", as a GET run over an empty key space shows. */
	assert_int_equal(itest_conn_open(&c, g_srv[srv].port), 0);
	itest_expect(&c, "+OK\r\n", "FLUSHALL", NULL);
	itest_conn_close(&c);
	const char *miss[] = { "--dbsize", "16", "-s", "--runtime", "0.2", "-b", "4", "--op", "GET", NULL };
	st = bench_run(srv, miss, &out, &csv);
	assert_int_equal(st, 1);
	assert_int_equal(csv_rows(csv, rows, 4), 1);
	assert_true(num(&rows[0], C_MISSING) == num(&rows[0], C_OPS));
	free(out);
	free(csv);
}

/* Hashes: a load of 400 hashes of 20 fields, offline HGET and an online HGET/HSET mix; then one
 * field overwritten from another connection must be caught by a HGET run over 4 of those keys
 * (80 cells: the overwritten one is drawn about once in 80 HGETs). */
static void hashes_against(int srv)
{
	char *out = NULL, *csv = NULL;
	csv_row rows[4];
	const char *off[] = { "--dbsize", "400", "--fields", "20", "--valuelength", "24", "--runtime", "0.3", "-b",
	                      "16", "--op", "HGET", NULL };
	int st = bench_run(srv, off, &out, &csv);
	if (st != 0 || !csv)
		fail_msg("%s: HGET run exited %d:\n%s", g_srv[srv].name, st, out ? out : "");
	assert_int_equal(csv_rows(csv, rows, 4), 2);
	row_check(&rows[0], "load", "HSET", 1);
	assert_int_equal((int)num(&rows[0], C_OPS), 400);
	row_check(&rows[1], "offline", "HGET", 1);
	free(out);
	free(csv);

	itest_conn c;
	assert_int_equal(itest_conn_open(&c, g_srv[srv].port), 0);
	itest_expect(&c, ":20\r\n", "HLEN", "00000399", NULL);
	char *r = itest_call(&c, "HGET", "00000003", "f19", NULL);
	assert_true(strncmp(r, "$24\r\n", 5) == 0);
	free(r);
	itest_conn_close(&c);

	const char *on[] = { "--dbsize", "400", "--fields", "20", "--valuelength", "24", "-s", "--runtime", "0.3",
	                     "--online", "--op-workload", "HGET,HSET", "--op-percent", "80,20", "--itp", "4", "--zipf",
	                     NULL };
	st = bench_run(srv, on, &out, &csv);
	if (st != 0 || !csv)
		fail_msg("%s: HGET/HSET run exited %d:\n%s", g_srv[srv].name, st, out ? out : "");
	assert_int_equal(csv_rows(csv, rows, 4), 1);
	row_check(&rows[0], "online", "HGET:80,HSET:20", 1);
	free(out);
	free(csv);

	assert_int_equal(itest_conn_open(&c, g_srv[srv].port), 0);
	itest_expect(&c, ":0\r\n", "HSET", "00000003", "f1", "notright", NULL);
	itest_conn_close(&c);
	const char *get[] = { "--dbsize", "4", "--fields", "20", "--valuelength", "24", "-s", "--runtime", "0.3", "-b",
	                      "8", "--op", "HGET", NULL };
	st = bench_run(srv, get, &out, &csv);
	if (st != 1)
		fail_msg("%s: a HGET run that met a wrong field exited %d, not 1:\n%s", g_srv[srv].name, st,
		         out ? out : "");
	assert_int_equal(csv_rows(csv, rows, 4), 1);
	assert_true(num(&rows[0], C_WRONG) >= 1 && num(&rows[0], C_WRONG) < num(&rows[0], C_OPS) / 4);
	assert_int_equal((int)num(&rows[0], C_ERRORS), 0);
	assert_non_null(strstr(out, "HGET cell 61: wrong reply: $8\\r\\nnotright\\r\\n"));   /* key 3, field 1 */
	free(out);
	free(csv);
}

/* A check run once per server: the test's state names the server and the check. */
typedef struct on_server {
	int srv;
	void (*check)(int srv);
} on_server;

static void test_on_server(void **state)
{
	const on_server *t = *state;
	if (!g_up[t->srv])
		skip();   /* redis-server is not installed */
	t->check(t->srv);
}

#define ON_SERVER(name, check, srv) { #name, test_on_server, NULL, NULL, &(on_server){ srv, check } }

static void test_inproc_client_runs_the_same_workloads_without_tcp(void **state)
{
	(void)state;
	char *out = NULL, *csv = NULL;
	csv_row rows[8];
	const char *args[] = { "--client", "inproc", "--memory", "64m", "--page", "1m", "--index", "1m", "--dbsize",
	                       "1000", "--runtime", "0.2", "-b", "32", "--op", "INCR", NULL };
	int st = bench_run(-1, args, &out, &csv);
	if (st != 0)
		fail_msg("inproc run exited %d:\n%s", st, out ? out : "");
	assert_int_equal(csv_rows(csv, rows, 8), 2);
	row_check(&rows[0], "load", "SET", 1);
	row_check(&rows[1], "offline", "INCR", 1);
	/* The store's own CPU time is reported (thread CPU of the workers). */
	assert_true(num(&rows[1], C_CPU) > 0 && num(&rows[1], C_CPU_OP) > 0);
	free(out);
	free(csv);
}

static void test_bad_flags_are_usage_errors(void **state)
{
	(void)state;
	char *out = NULL, *csv = NULL;
	const char *bad1[] = { "--op-workload", "GET,SET", "--op-percent", "50,40", "--online", NULL };
	assert_int_equal(bench_run(SRV_SPILLWAY, bad1, &out, &csv), 2);
	assert_non_null(strstr(out, "sum to 100"));
	free(out);
	free(csv);
	const char *bad2[] = { "--dbsize", "1000000000", "--keylength", "4", NULL };
	assert_int_equal(bench_run(SRV_SPILLWAY, bad2, &out, &csv), 2);
	free(out);
	free(csv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		ON_SERVER(test_bench_modes_give_well_formed_rows_against_spillway, modes_against, SRV_SPILLWAY),
		ON_SERVER(test_bench_modes_give_well_formed_rows_against_redis, modes_against, SRV_REDIS),
		ON_SERVER(test_reply_check_catches_a_value_overwritten_by_another_client_on_spillway,
		          wrong_value_caught_on, SRV_SPILLWAY),
		ON_SERVER(test_reply_check_catches_a_value_overwritten_by_another_client_on_redis,
		          wrong_value_caught_on, SRV_REDIS),
		ON_SERVER(test_hash_runs_give_well_formed_rows_and_catch_a_wrong_field_on_spillway, hashes_against,
		          SRV_SPILLWAY),
		ON_SERVER(test_hash_runs_give_well_formed_rows_and_catch_a_wrong_field_on_redis, hashes_against,
		          SRV_REDIS),
		cmocka_unit_test(test_inproc_client_runs_the_same_workloads_without_tcp),
		cmocka_unit_test(test_bad_flags_are_usage_errors),
	};
	return cmocka_run_group_tests(tests, setup, teardown) ? 1 : 0;
}
