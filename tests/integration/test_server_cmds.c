/*
 * test_server_cmds.c - issue 13's server commands against a running spillway-server: CLIENT REPLY
 * ON|OFF|SKIP in pipelines, in RESP3 and across a parked (cold) GET, CONFIG SET's rollback when an
 * apply step fails, and the idle query buffer shrink.
 *
 * Notes:
 *  1. CLIENT REPLY: the expected bytes are what redis-server 7.0.15 sends for the same pipeline
 *     (SPW_ITEST_TARGET=redis runs the tests that do not need Spillway's flags against it). A
 *     muted command is followed by one that answers, so a reply that should not exist shows up
 *     as a byte mismatch, never as a wait.
 *  2. The parked test loads keys that --memory 256k pushes to the device, so the GET after
 *     CLIENT REPLY SKIP parks (tier_parked_commands proves it) and runs again: the SKIP must mute
 *     that GET's real reply once and leave the next command's reply alone.
 *  3. The query buffer shrink is Redis's clientsCronResizeQueryBuffer: after a 100 KB value the
 *     buffer is left grown; once the client is idle for 2 s the worker's timer gives it back.
 *     The test polls CLIENT LIST (bounded) until qbuf-free=0, with no timed assertion.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/itest.h"

static itest_server g_srv;

static const char *const srv_flags[] = { "--threads", "1", "--memory", "64m", "--index", "1m", NULL };

static int server_setup(void **state)
{
	(void)state;
	return itest_fixture_start(&g_srv, ITEST_TARGET, srv_flags, "server_cmds");
}

static int server_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "server_cmds");
}

static void conn_open(itest_conn *c, int port)
{
	int err = itest_conn_open(c, port);
	if (err)
		fail_msg("connect to port %d: %s", port, strerror(-err));
}

/* Send raw bytes and expect exactly want back as the replies. */
static void pipeline_expect(itest_conn *c, const char *req, const char *want)
{
	assert_int_equal(itest_conn_send(c, req, strlen(req)), 0);
	itest_replies_expect(c, &g_srv, want, strlen(want), NULL);
}

static void test_client_reply_off_on_and_skip_mute_what_redis_mutes(void **state)
{
	(void)state;
	itest_conn c;
	conn_open(&c, g_srv.port);
	long long errors = itest_info_stat(&c, "total_error_replies");
	pipeline_expect(&c,
	                "CLIENT REPLY OFF\r\nPING\r\nSET a 1\r\nNOSUCH\r\nCLIENT REPLY SKIP\r\nGET a\r\n"
	                "CLIENT REPLY ON\r\nPING\r\n"
	                "CLIENT REPLY SKIP\r\nGET a\r\nPING x\r\n"
	                "CLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\n"
	                "CLIENT REPLY FOO\r\nCLIENT REPLY\r\n"
	                "CLIENT REPLY SKIP\r\nFOO\r\nPING y\r\n"
	                "CLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nPING 1\r\nPING 2\r\n"
	                "CLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nPING 3\r\nCLIENT REPLY ON\r\nPING 4\r\n",
	                "+OK\r\n+PONG\r\n$1\r\nx\r\n+OK\r\n-ERR syntax error\r\n"
	                "-ERR wrong number of arguments for 'client|reply' command\r\n$1\r\ny\r\n"
	                "$1\r\n2\r\n+OK\r\n$1\r\n4\r\n");
	/* The muted errors (NOSUCH, FOO) still count, as Redis's afterErrorReply counts them. */
	itest_stat_grew(&c, "total_error_replies", errors, 4, "two muted and two sent error replies");
	/* RESP3: a muted map reply leaves no bytes either (HELLO's own reply names the server). */
	free(itest_call(&c, "HELLO", "3", NULL));
	pipeline_expect(&c, "CLIENT REPLY SKIP\r\nCONFIG GET timeout\r\nPING\r\n"
	                    "CLIENT REPLY OFF\r\nHELLO 2\r\nCLIENT REPLY ON\r\nCONFIG GET timeout\r\n",
	                "+PONG\r\n+OK\r\n*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n");
	itest_conn_close(&c);
}

/* Note 2: a SKIP before a GET that parks on the device mutes that GET once, not its attempt. */
static void test_client_reply_skip_mutes_a_parked_get_once(void **state)
{
	(void)state;
	if (itest_target_is_redis())
		skip();   /* needs the storage tier */
	static const char *const flags[] = { "--storage-tier", "--device-type", "posix", "--threads", "1",
	                                     "--memory", "256k", "--page", "64k", "--segment", "4m",
	                                     "--index", "1m", NULL };
	itest_server srv;
	itest_conn c;
	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	conn_open(&c, srv.port);
	itest_buf load = { 0 };
	char val[1000];
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < 2000; i++) {   /* 2 MB through a 256 KB log window: the first go cold */
		char key[32];
		int n = snprintf(key, sizeof(key), "k%d", i);
		itest_buf_fmt(&load, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n", n, key, sizeof(val));
		itest_buf_add(&load, val, sizeof(val));
		itest_buf_add(&load, "\r\n", 2);
	}
	assert_int_equal(itest_conn_send(&c, load.p, load.len), 0);
	for (int i = 0; i < 2000; i++) {
		const char *r;
		assert_true(itest_conn_read_reply(&c, &r, NULL) > 0);
	}
	free(load.p);
	long long parked = itest_info_stat(&c, "tier_parked_commands");
	itest_buf want = { 0 };
	itest_buf_bulk(&want, val, sizeof(val));
	itest_buf_add(&want, "+PONG\r\n", 7);
	const char *req = "CLIENT REPLY SKIP\r\nGET k1\r\nGET k2\r\nPING\r\n";
	assert_int_equal(itest_conn_send(&c, req, strlen(req)), 0);
	itest_replies_expect(&c, &srv, want.p, want.len, NULL);
	free(want.p);
	itest_stat_grew(&c, "tier_parked_commands", parked, 1, "a GET of a key on the device");
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

/* config.c note 5: an apply step that fails (appendonly yes when <dir>/appendonlydir cannot be a
 * folder) puts back the pairs before and after it in the same call. */
static void test_config_set_rolls_back_every_pair_when_an_apply_fails(void **state)
{
	(void)state;
	if (itest_target_is_redis())
		skip();   /* Spillway's folder layout */
	itest_conn c;
	conn_open(&c, g_srv.port);
	char path[400];
	snprintf(path, sizeof(path), "%s/appendonlydir", g_srv.dir);
	int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);   /* a file where the folder goes */
	assert_true(fd >= 0);
	close(fd);
	itest_expect(&c, "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to "
	                 "turn on AOF. Check server logs.\r\n",
	             "CONFIG", "SET", "maxclients", "77", "appendonly", "yes", "timeout", "9", NULL);
	itest_expect(&c, "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n", "CONFIG", "GET", "maxclients", NULL);
	itest_expect(&c, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", "CONFIG", "GET", "appendonly", NULL);
	itest_expect(&c, "*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n", "CONFIG", "GET", "timeout", NULL);
	assert_int_equal(unlink(path), 0);
	itest_conn_close(&c);
}

/* The qbuf-free= field of the CLIENT LIST line of the client named name, or -1. */
static long long qbuf_free_of(itest_conn *c, const char *name)
{
	char *r = itest_call(c, "CLIENT", "LIST", NULL);
	char tag[64];
	snprintf(tag, sizeof(tag), " name=%s ", name);
	char *line = strstr(r, tag);
	long long v = -1;
	if (line) {
		char *f = strstr(line, " qbuf-free=");
		char *eol = strchr(line, '\n');
		if (f && (!eol || f < eol))
			v = atoll(f + 11);
	}
	free(r);
	return v;
}

/* Note 3. */
static void test_an_idle_clients_grown_query_buffer_is_given_back(void **state)
{
	(void)state;
	itest_conn big, watch;
	conn_open(&big, g_srv.port);
	conn_open(&watch, g_srv.port);
	itest_expect(&big, "+OK\r\n", "CLIENT", "SETNAME", "grown", NULL);
	static char val[100000];
	memset(val, 'q', sizeof(val));
	const char *argv[] = { "SET", "qbufkey", val };
	size_t lens[] = { 3, 7, sizeof(val) };
	free(itest_conn_call_argv(&big, 3, argv, lens));
	long long before = qbuf_free_of(&watch, "grown");
	assert_true(before > 64 * 1024);   /* grown for the value, and kept (under 256 KB) */
	long long now = before;
	for (int i = 0; i < 100 && now != 0; i++) {   /* bounded: the idle limit is 2 s */
		itest_sleep_ms(100);
		now = qbuf_free_of(&watch, "grown");
	}
	assert_int_equal(now, 0);
	/* And the client goes on: the next request gets a buffer again. */
	itest_expect(&big, "$3\r\nqqq\r\n", "GETRANGE", "qbufkey", "0", "2", NULL);
	itest_conn_close(&big);
	itest_conn_close(&watch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_reply_off_on_and_skip_mute_what_redis_mutes),
		cmocka_unit_test(test_client_reply_skip_mutes_a_parked_get_once),
		cmocka_unit_test(test_config_set_rolls_back_every_pair_when_an_apply_fails),
		cmocka_unit_test(test_an_idle_clients_grown_query_buffer_is_given_back),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown);
}
