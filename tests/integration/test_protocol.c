/*
 * test_protocol.c - raw RESP over a real socket to a running spillway-server.
 *
 * Each test sends exact bytes and checks the exact bytes that come back, error texts included: the
 * texts are the ones redis-server 7.0 sends (checked with SPW_ITEST_TARGET=redis, which runs this
 * same file against redis-server; tests of Spillway-only flags are skipped then).
 *
 * Notes:
 *  1. Splitting a pipeline "at every byte boundary" sends the first k bytes, waits a moment so the
 *     server reads them alone, then sends the rest; the replies must be the same whatever k is. This
 *     is what exercises the parser's resume-where-it-stopped state through the real read path.
 *  2. Back-pressure: a client that writes a long pipeline and reads nothing must not stop the worker
 *     from serving others; its replies must all arrive, in order, once it reads.
 *  3. Counters: 32 clients INCR 4 shared keys; every reply value of a key must appear exactly once
 *     (a lost or doubled update shows as a duplicate or a gap), and the final GETs are exact.
 *  4. No timing assertions: waits only give the server a chance to see a partial request.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/itest.h"
#include "proto/resp.h"

static itest_server g_srv;

/* --page 8m so that a 5 MB value fits in one page of the log; 4 workers for the counter test. */
static const char *const srv_flags[] = {
	"--threads", "4", "--memory", "128m", "--page", "8m", "--index", "4m", NULL,
};

static int server_setup(void **state)
{
	(void)state;
	return itest_fixture_start(&g_srv, ITEST_TARGET, srv_flags, "protocol");
}

static int server_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "protocol");
}

static void conn_open(itest_conn *c)
{
	int err = itest_conn_open(c, g_srv.port);
	if (err)
		fail_msg("connect to port %d: %s", g_srv.port, strerror(-err));
}

/* ---------------- pipelines split anywhere ---------------- */

static const char pipeline[] =
	"*1\r\n$4\r\nPING\r\n"
	"*3\r\n$3\r\nSET\r\n$7\r\nsplit:a\r\n$5\r\nhello\r\n"
	"*2\r\n$3\r\nGET\r\n$7\r\nsplit:a\r\n"
	"*2\r\n$3\r\nDEL\r\n$7\r\nsplit:n\r\n"
	"*2\r\n$4\r\nINCR\r\n$7\r\nsplit:n\r\n"
	"ECHO inline\r\n"
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
	"*3\r\n$3\r\nSET\r\n$7\r\nsplit:b\r\n$4\r\n\x00\r\n\xff\r\n"
	"*2\r\n$3\r\nGET\r\n$7\r\nsplit:b\r\n"
	"*3\r\n$4\r\nMGET\r\n$7\r\nsplit:a\r\n$7\r\nsplit:z\r\n";
static const char pipeline_replies[] =
	"+PONG\r\n"
	"+OK\r\n"
	"$5\r\nhello\r\n"
	":1\r\n"           /* DEL: split:n is 1 after every round, and set before the first */
	":1\r\n"
	"$6\r\ninline\r\n"
	"$0\r\n\r\n"
	"+OK\r\n"
	"$4\r\n\x00\r\n\xff\r\n"
	"*2\r\n$5\r\nhello\r\n$-1\r\n";
#define PIPELINE_N 10

/* Read the pipeline's PIPELINE_N replies and compare each with pipeline_replies. */
static void pipeline_check(itest_conn *c, const char *what)
{
	char err[1024];
	int n = itest_replies_check(c, pipeline_replies, sizeof(pipeline_replies) - 1, NULL, err, sizeof(err));
	if (n < 0)
		fail_msg("%s: %s", what, err);
	assert_int_equal(n, PIPELINE_N);
}

static void test_pipeline_split_at_every_byte_boundary_gets_replies_in_order(void **state)
{
	(void)state;
	itest_conn c;
	size_t n = sizeof(pipeline) - 1;
	char what[64];

	conn_open(&c);
	/* Make DEL split:n answer 1 every round, the first included. */
	itest_expect(&c, "+OK\r\n", "SET", "split:n", "0", NULL);
	for (size_t k = 1; k < n; k++) {
		assert_int_equal(itest_conn_send(&c, pipeline, k), 0);
		itest_sleep_ms(1);
		assert_int_equal(itest_conn_send(&c, pipeline + k, n - k), 0);
		snprintf(what, sizeof(what), "pipeline split at byte %zu", k);
		pipeline_check(&c, what);
	}
	itest_conn_close(&c);
}

static void test_pipeline_sent_byte_by_byte_gets_replies_in_order(void **state)
{
	(void)state;
	itest_conn c;
	conn_open(&c);
	itest_expect(&c, "+OK\r\n", "SET", "split:n", "0", NULL);
	for (size_t i = 0; i < sizeof(pipeline) - 1; i++) {
		assert_int_equal(itest_conn_send(&c, pipeline + i, 1), 0);
		if (i % 4 == 0)
			itest_sleep_ms(1);
	}
	pipeline_check(&c, "pipeline sent byte by byte");
	itest_conn_close(&c);
}

static void test_pipeline_in_random_chunks_gets_replies_in_order(void **state)
{
	(void)state;
	itest_conn c;
	unsigned seed = 12345;
	size_t n = sizeof(pipeline) - 1;
	char what[64];

	conn_open(&c);
	itest_expect(&c, "+OK\r\n", "SET", "split:n", "0", NULL);
	for (int round = 0; round < 40; round++) {
		/* Several copies back to back, cut at random places: requests straddle chunk ends. */
		for (int copy = 0; copy < 3; copy++) {
			size_t off = 0;
			while (off < n) {
				size_t chunk = 1 + rand_r(&seed) % 23;
				if (chunk > n - off)
					chunk = n - off;
				assert_int_equal(itest_conn_send(&c, pipeline + off, chunk), 0);
				off += chunk;
				if (rand_r(&seed) % 4 == 0)
					itest_sleep_ms(1);
			}
		}
		for (int copy = 0; copy < 3; copy++) {
			snprintf(what, sizeof(what), "random chunks, round %d copy %d", round, copy);
			pipeline_check(&c, what);
		}
	}
	itest_conn_close(&c);
}

/* ---------------- inline commands ---------------- */

static void test_inline_commands_work_like_telnet(void **state)
{
	(void)state;
	itest_conn c;
	static const char req[] =
		"PING\r\n"
		"SET inl:foo bar\r\n"
		"GET inl:foo\n"                         /* a bare LF ends a line too */
		"\r\n\n"                                /* blank lines are skipped */
		"SET \"inl:a b\" \"c\\x41\\n\"\r\n"     /* quotes and escapes as redis-cli writes them */
		"GET \"inl:a b\"\r\n"
		"   ECHO    spaced   \r\n"
		"SET inl:q 'it\\'s'\r\n"
		"GET inl:q\r\n"
		"ping\r\n";
	static const char want[] =
		"+PONG\r\n"
		"+OK\r\n"
		"$3\r\nbar\r\n"
		"+OK\r\n"
		"$3\r\ncA\n\r\n"
		"$6\r\nspaced\r\n"
		"+OK\r\n"
		"$4\r\nit's\r\n"
		"+PONG\r\n";
	conn_open(&c);
	assert_int_equal(itest_conn_send(&c, req, sizeof(req) - 1), 0);
	itest_replies_expect(&c, NULL, want, sizeof(want) - 1, NULL);
	itest_conn_close(&c);
}

static void test_empty_multibulk_requests_are_ignored(void **state)
{
	(void)state;
	itest_conn c;
	static const char req[] = "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n";
	conn_open(&c);
	assert_int_equal(itest_conn_send(&c, req, sizeof(req) - 1), 0);
	itest_replies_expect(&c, NULL, "+PONG\r\n", 7, NULL);   /* *0 and *-1 have no reply */
	itest_expect(&c, "$2\r\nok\r\n", "ECHO", "ok", NULL);
	itest_conn_close(&c);
}

/* ---------------- protocol errors ---------------- */

typedef struct bad_request {
	const char *bytes;
	size_t len;            /* 0: strlen */
	const char *reply;     /* everything the server sends before it closes */
} bad_request;

static char big_inline[70000], big_mbulk[70000], big_bulk[70000];

static void test_protocol_errors_reply_exact_text_and_close_only_that_connection(void **state)
{
	(void)state;
	memset(big_inline, 'A', sizeof(big_inline));
	big_mbulk[0] = '*';
	memset(big_mbulk + 1, '1', sizeof(big_mbulk) - 1);
	memcpy(big_bulk, "*1\r\n$", 5);
	memset(big_bulk + 5, '1', sizeof(big_bulk) - 5);
	const bad_request bad[] = {
		{ "*abc\r\n", 0, "-ERR Protocol error: invalid multibulk length\r\n" },
		{ "*3000000000\r\n", 0, "-ERR Protocol error: invalid multibulk length\r\n" },
		{ "*1\r\n$abc\r\n", 0, "-ERR Protocol error: invalid bulk length\r\n" },
		{ "*1\r\n$-5\r\n", 0, "-ERR Protocol error: invalid bulk length\r\n" },
		{ "*1\r\n$600000000\r\n", 0, "-ERR Protocol error: invalid bulk length\r\n" },
		{ "*1\r\nfoo\r\n", 0, "-ERR Protocol error: expected '$', got 'f'\r\n" },
		{ "*2\r\n$4\r\nECHO\r\n:5\r\n", 0, "-ERR Protocol error: expected '$', got ':'\r\n" },
		{ "SET \"a\r\n", 0, "-ERR Protocol error: unbalanced quotes in request\r\n" },
		{ "ECHO \"a\"b\r\n", 0, "-ERR Protocol error: unbalanced quotes in request\r\n" },
		{ "PING\r\n*abc\r\n", 0, "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n" },
		{ big_inline, sizeof(big_inline), "-ERR Protocol error: too big inline request\r\n" },
		{ big_mbulk, sizeof(big_mbulk), "-ERR Protocol error: too big mbulk count string\r\n" },
		{ big_bulk, sizeof(big_bulk), "-ERR Protocol error: too big bulk count string\r\n" },
	};
	itest_conn other;
	conn_open(&other);
	itest_expect(&other, "+OK\r\n", "SET", "perr:k", "survivor", NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		itest_conn c;
		char what[96];
		size_t len = bad[i].len ? bad[i].len : strlen(bad[i].bytes);
		char *shown = itest_escape(bad[i].bytes, len, 24);
		snprintf(what, sizeof(what), "request \"%s\"", shown);
		free(shown);
		conn_open(&c);
		/* The server may close before it has read all of a long bad request: EPIPE is fine. */
		int se = itest_conn_send(&c, bad[i].bytes, len);
		if (se && se != -EPIPE && se != -ECONNRESET)
			fail_msg("%s: send: %s", what, strerror(-se));
		/* Everything up to EOF: the error reply, then nothing more. */
		char *got;
		size_t have;
		int rc = itest_conn_read_to_eof(&c, &got, &have);
		itest_bytes_expect(what, got, have, bad[i].reply, strlen(bad[i].reply));
		free(got);
		if (rc != 0)
			fail_msg("%s: the connection was not closed after the protocol error (%s)", what,
			         strerror(-rc));
		itest_conn_close(&c);
		/* The other client carries on. */
		itest_expect(&other, "$8\r\nsurvivor\r\n", "GET", "perr:k", NULL);
	}
	itest_expect(&other, "+PONG\r\n", "PING", NULL);
	itest_conn_close(&other);
}

static void test_quit_replies_ok_and_closes(void **state)
{
	(void)state;
	itest_conn c;
	conn_open(&c);
	assert_int_equal(itest_conn_send(&c, "*1\r\n$4\r\nQUIT\r\n", 14), 0);
	const char *r;
	ssize_t n = itest_conn_read_reply(&c, &r, NULL);
	assert_true(n > 0);
	itest_bytes_expect("QUIT", r, (size_t)n, "+OK\r\n", 5);
	assert_int_equal(itest_conn_wait_closed(&c), 0);
	itest_conn_close(&c);
}

/* ---------------- big values ---------------- */

static void test_five_megabyte_value_round_trips(void **state)
{
	(void)state;
	const size_t n = 5 * 1024 * 1024;
	char *v = malloc(n);
	assert_non_null(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (char)((i * 31 + 7) & 0xff);
	itest_conn c;
	conn_open(&c);
	const char *argv[] = { "SET", "big:5m", v };
	size_t lens[] = { 3, 6, n };
	char *r = itest_conn_call_argv(&c, 3, argv, lens);
	assert_non_null(r);
	itest_bytes_expect("SET of 5 MB", r, strlen(r), "+OK\r\n", 5);
	free(r);
	const char *gargv[] = { "GET", "big:5m" };
	assert_int_equal(itest_conn_send_argv(&c, 2, gargv, NULL), 0);
	const char *rep;
	ssize_t len = itest_conn_read_reply(&c, &rep, NULL);
	assert_true(len > 0);
	char hdr[32];
	int hl = snprintf(hdr, sizeof(hdr), "$%zu\r\n", n);
	assert_int_equal((size_t)len, (size_t)hl + n + 2);
	assert_memory_equal(rep, hdr, (size_t)hl);
	if (memcmp(rep + hl, v, n) != 0)
		fail_msg("GET of 5 MB: payload differs");
	assert_memory_equal(rep + hl + n, "\r\n", 2);
	itest_expect(&c, ":5242880\r\n", "STRLEN", "big:5m", NULL);
	char tail[64];
	snprintf(tail, sizeof(tail), "$3\r\n%c%c%c\r\n", v[n - 3], v[n - 2], v[n - 1]);
	itest_expect(&c, tail, "GETRANGE", "big:5m", "-3", "-1", NULL);
	itest_expect(&c, ":1\r\n", "DEL", "big:5m", NULL);
	free(v);
	itest_conn_close(&c);
}

/* ---------------- back-pressure (note 2) ---------------- */

static void test_client_that_does_not_read_does_not_block_others(void **state)
{
	(void)state;
	enum { N = 40000, VLEN = 1000 };
	char val[VLEN];
	memset(val, 'v', sizeof(val));
	itest_conn a, b;
	conn_open(&a);
	conn_open(&b);
	const char *sargv[] = { "SET", "bp:v", val };
	size_t slens[] = { 3, 4, VLEN };
	char *r = itest_conn_call_argv(&b, 3, sargv, slens);
	assert_non_null(r);
	free(r);

	static const char get[] = "*2\r\n$3\r\nGET\r\n$4\r\nbp:v\r\n";
	size_t glen = sizeof(get) - 1, total = glen * N, sent = 0;
	char *reqs = malloc(total);
	for (int i = 0; i < N; i++)
		memcpy(reqs + (size_t)i * glen, get, glen);
	char want[VLEN + 16];
	int wl = snprintf(want, sizeof(want), "$%d\r\n", VLEN);
	memcpy(want + wl, val, VLEN);
	memcpy(want + wl + VLEN, "\r\n", 2);
	size_t rlen = (size_t)wl + VLEN + 2, rgot = 0, rtotal = rlen * N;
	char *rbuf = malloc(1 << 16);
	bool others_checked = false;
	long long deadline = itest_now_ms() + ITEST_TIMEOUT_MS * 2;

	/* Phase 1: A writes without reading until the kernel or the server stops taking bytes. */
	while (sent < total) {
		ssize_t w = send(a.fd, reqs + sent, total - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			sent += (size_t)w;
			continue;
		}
		assert_true(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		break;
	}
	/* Others are served while A's replies pile up unread. */
	itest_expect(&b, "+PONG\r\n", "PING", NULL);
	itest_expect(&b, "+OK\r\n", "SET", "bp:other", "1", NULL);
	itest_expect(&b, ":2\r\n", "INCR", "bp:other", NULL);
	itest_conn c;
	conn_open(&c);
	itest_expect(&c, "$1\r\n2\r\n", "GET", "bp:other", NULL);
	itest_conn_close(&c);
	others_checked = true;

	/* Phase 2: A reads everything (and sends the rest); replies are N identical bulks, in order. */
	while (rgot < rtotal) {
		if (itest_now_ms() > deadline)
			fail_msg("back-pressure: %zu of %zu reply bytes after the deadline (%zu of %zu sent)",
			         rgot, rtotal, sent, total);
		struct pollfd pfd = { a.fd, POLLIN | (sent < total ? POLLOUT : 0), 0 };
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if ((pfd.revents & POLLOUT) && sent < total) {
			ssize_t w = send(a.fd, reqs + sent, total - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(a.fd, rbuf, 1 << 16, MSG_DONTWAIT);
			if (n == 0)
				fail_msg("back-pressure: the server closed the connection after %zu reply bytes", rgot);
			if (n < 0)
				continue;
			for (ssize_t i = 0; i < n; i++, rgot++)
				if (rbuf[i] != want[rgot % rlen])
					fail_msg("back-pressure: reply byte %zu (reply %zu) differs", rgot, rgot / rlen);
		}
	}
	assert_true(others_checked);
	assert_int_equal(sent, total);
	itest_expect(&a, "+PONG\r\n", "PING", NULL);
	free(reqs);
	free(rbuf);
	itest_conn_close(&a);
	itest_conn_close(&b);
}

/* ---------------- many clients, shared counters (note 3) ---------------- */

enum { CLIENTS = 32, KEYS = 4, BATCHES = 10, BATCH = 100 };
typedef struct incr_job {
	int port;
	int idx;
	int err;
	long long *values;   /* [KEYS][BATCHES*BATCH/KEYS] values seen per key */
	int nvalues[KEYS];
} incr_job;

static void *incr_worker(void *arg)
{
	incr_job *j = arg;
	itest_conn c;
	char req[64];
	if ((j->err = itest_conn_open(&c, j->port)) != 0)
		return NULL;
	for (int b = 0; b < BATCHES && !j->err; b++) {
		char *batch = malloc(BATCH * 40);
		size_t len = 0;
		for (int i = 0; i < BATCH; i++) {
			int k = (j->idx + i) % KEYS;
			int l = snprintf(req, sizeof(req), "*2\r\n$4\r\nINCR\r\n$5\r\nctr:%d\r\n", k);
			memcpy(batch + len, req, (size_t)l);
			len += (size_t)l;
		}
		j->err = itest_conn_send(&c, batch, len);
		free(batch);
		for (int i = 0; i < BATCH && !j->err; i++) {
			const char *r;
			ssize_t n = itest_conn_read_reply(&c, &r, NULL);
			if (n < 4 || r[0] != ':') {
				j->err = n < 0 ? (int)n : -EPROTO;
				break;
			}
			int k = (j->idx + i) % KEYS;
			j->values[k * (BATCHES * BATCH) + j->nvalues[k]++] = strtoll(r + 1, NULL, 10);
		}
	}
	itest_conn_close(&c);
	return NULL;
}

static void test_many_clients_incr_shared_keys_to_exact_counts(void **state)
{
	(void)state;
	pthread_t th[CLIENTS];
	incr_job jobs[CLIENTS];
	itest_conn c;
	const long long per_key = (long long)CLIENTS * BATCHES * BATCH / KEYS;

	conn_open(&c);
	itest_expect(&c, ":0\r\n", "DEL", "ctr:0", "ctr:1", "ctr:2", "ctr:3", NULL);
	for (int i = 0; i < CLIENTS; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].port = g_srv.port;
		jobs[i].idx = i;
		jobs[i].values = calloc(KEYS * BATCHES * BATCH, sizeof(long long));
		assert_int_equal(pthread_create(&th[i], NULL, incr_worker, &jobs[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(th[i], NULL);
	for (int k = 0; k < KEYS; k++) {
		/* Every value 1..per_key was handed out exactly once. */
		unsigned char *seen = calloc((size_t)per_key + 1, 1);
		for (int i = 0; i < CLIENTS; i++) {
			if (jobs[i].err)
				fail_msg("client %d: %s", i, strerror(-jobs[i].err));
			for (int v = 0; v < jobs[i].nvalues[k]; v++) {
				long long x = jobs[i].values[k * (BATCHES * BATCH) + v];
				if (x < 1 || x > per_key || seen[x])
					fail_msg("ctr:%d: INCR returned %lld %s", k, x,
					         x < 1 || x > per_key ? "(out of range)" : "twice");
				seen[x] = 1;
			}
		}
		free(seen);
		char key[16], num[24], want[48];
		snprintf(key, sizeof(key), "ctr:%d", k);
		snprintf(num, sizeof(num), "%lld", per_key);
		snprintf(want, sizeof(want), "$%zu\r\n%s\r\n", strlen(num), num);
		itest_expect(&c, want, "GET", key, NULL);
	}
	for (int i = 0; i < CLIENTS; i++)
		free(jobs[i].values);
	itest_conn_close(&c);
}

/* ---------------- process lifecycle ---------------- */

static const char *const small_flags[] = {
	"--threads", "2", "--memory", "16m", "--page", "1m", "--index", "1m", NULL,
};

static void test_sigterm_stops_the_server_with_status_zero(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	assert_int_equal(itest_target_start(&s, small_flags), 0);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "+OK\r\n", "SET", "k", "v", NULL);
	int st = itest_server_stop(&s);
	if (st != 0)
		itest_server_log_dump(&s);
	assert_int_equal(st, 0);
	/* The client sees the connection end. */
	assert_int_equal(itest_conn_wait_closed(&c), 0);
	itest_conn_close(&c);
}

static void test_shutdown_command_stops_the_server_with_status_zero(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	assert_int_equal(itest_target_start(&s, small_flags), 0);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	assert_int_equal(itest_conn_send_cmd(&c, "SHUTDOWN", NULL), 0);
	/* Redis sends no reply to a successful SHUTDOWN: the connection just closes. */
	assert_int_equal(itest_conn_wait_closed(&c), 0);
	itest_conn_close(&c);
	int st = itest_server_wait(&s, ITEST_TIMEOUT_MS);
	if (st != 0)
		itest_server_log_dump(&s);
	assert_int_equal(st, 0);
	assert_int_equal(itest_server_stop(&s), 0);   /* reaped already: cleans up */
}

static void test_bad_flag_exits_one_and_names_the_flag(void **state)
{
	(void)state;
	char exe[1024], *out = NULL;
	if (itest_target_is_redis())
		snprintf(exe, sizeof(exe), "redis-server");
	else
		assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	const char *argv[] = { exe, "--no-such-flag", "1", NULL };
	int st = itest_prog_run(argv, NULL, 0, &out, NULL, ITEST_TIMEOUT_MS);
	if (st != 1 || !strstr(out, "no-such-flag"))
		fprintf(stderr, "output:\n%s\n", out ? out : "");
	assert_int_equal(st, 1);
	assert_non_null(strstr(out, "no-such-flag"));
	free(out);
}

static void test_help_flag_exits_zero_and_lists_flags(void **state)
{
	(void)state;
	char exe[1024], *out = NULL;
	if (itest_target_is_redis())
		skip();   /* redis-server --help exits 1; this is a Spillway promise */
	assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	const char *argv[] = { exe, "--help", NULL };
	int st = itest_prog_run(argv, NULL, 0, &out, NULL, ITEST_TIMEOUT_MS);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "--port"));
	assert_non_null(strstr(out, "--threads"));
	assert_non_null(strstr(out, "--memory"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipeline_split_at_every_byte_boundary_gets_replies_in_order),
		cmocka_unit_test(test_pipeline_sent_byte_by_byte_gets_replies_in_order),
		cmocka_unit_test(test_pipeline_in_random_chunks_gets_replies_in_order),
		cmocka_unit_test(test_inline_commands_work_like_telnet),
		cmocka_unit_test(test_empty_multibulk_requests_are_ignored),
		cmocka_unit_test(test_protocol_errors_reply_exact_text_and_close_only_that_connection),
		cmocka_unit_test(test_quit_replies_ok_and_closes),
		cmocka_unit_test(test_five_megabyte_value_round_trips),
		cmocka_unit_test(test_client_that_does_not_read_does_not_block_others),
		cmocka_unit_test(test_many_clients_incr_shared_keys_to_exact_counts),
	};
	const struct CMUnitTest lifecycle[] = {
		cmocka_unit_test(test_sigterm_stops_the_server_with_status_zero),
		cmocka_unit_test(test_shutdown_command_stops_the_server_with_status_zero),
		cmocka_unit_test(test_bad_flag_exits_one_and_names_the_flag),
		cmocka_unit_test(test_help_flag_exits_zero_and_lists_flags),
	};
	int failed = cmocka_run_group_tests(tests, server_setup, server_teardown);
	failed += cmocka_run_group_tests(lifecycle, NULL, NULL);
	return failed ? 1 : 0;
}
