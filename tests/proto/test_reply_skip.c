/*
 * test_reply_skip.c - resp_reply_skip over every RESP2/RESP3 type, nested and partial replies,
 * hostile nesting and random input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/resp.h"

/* The whole reply is OK with consumed == its length (also with bytes after it), and every strict
 * prefix of it is RESP_INCOMPLETE. */
static void expect_reply(const char *r, size_t n, char type)
{
	size_t used = 0;
	char t = 0;
	char *buf = calloc(1, n + 8);

	for (size_t k = 0; k < n; k++) {
		/* Copy the prefix alone, so that reading past it is an ASan error. */
		char *pre = calloc(1, k ? k : 1);
		memcpy(pre, r, k);
		int rc = resp_reply_skip(pre, k, &used, &t);
		if (rc != RESP_INCOMPLETE)
			print_error("prefix %zu of \"%.*s\": rc %d\n", k, (int)n, r, rc);
		assert_int_equal(rc, RESP_INCOMPLETE);
		free(pre);
	}
	memcpy(buf, r, n);
	assert_int_equal(resp_reply_skip(buf, n, &used, &t), RESP_OK);
	assert_int_equal(used, n);
	assert_int_equal(t, type);
	memcpy(buf + n, "+NEXT\r\n", 7);
	assert_int_equal(resp_reply_skip(buf, n + 7, &used, &t), RESP_OK);
	assert_int_equal(used, n);
	free(buf);
}

#define REPLY(lit, type) expect_reply(lit, sizeof(lit) - 1, type)

static void expect_bad(const char *r, size_t n)
{
	size_t used;
	char t;
	assert_int_equal(resp_reply_skip(r, n, &used, &t), RESP_EPROTO);
}

#define BAD(lit) expect_bad(lit, sizeof(lit) - 1)

static void test_skip_finds_the_end_of_each_scalar_type(void **state)
{
	(void)state;
	REPLY("+OK\r\n", '+');
	REPLY("-ERR unknown command 'x'\r\n", '-');
	REPLY(":0\r\n", ':');
	REPLY(":-9223372036854775808\r\n", ':');
	REPLY("$5\r\nvalue\r\n", '$');
	REPLY("$0\r\n\r\n", '$');
	REPLY("$4\r\n\r\n\r\n\r\n", '$');
	REPLY("$-1\r\n", '$');
	REPLY("_\r\n", '_');
	REPLY(",1.1000000000000001\r\n", ',');
	REPLY(",-inf\r\n", ',');
	REPLY("#t\r\n", '#');
	REPLY("#f\r\n", '#');
	REPLY("!21\r\nSYNTAX invalid syntax\r\n", '!');
	REPLY("=15\r\ntxt:Some string\r\n", '=');
	REPLY("(3492890328409238509324850943850943825024385\r\n", '(');
}

static void test_skip_walks_nested_aggregates(void **state)
{
	(void)state;
	REPLY("*0\r\n", '*');
	REPLY("*-1\r\n", '*');
	REPLY("*2\r\n$3\r\nfoo\r\n$-1\r\n", '*');
	REPLY("*3\r\n:1\r\n*2\r\n+a\r\n*0\r\n$1\r\nz\r\n", '*');
	REPLY("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:3\r\n"
	      "$2\r\nid\r\n:59\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
	      "$7\r\nmodules\r\n*0\r\n", '%');
	REPLY("~3\r\n+a\r\n+b\r\n%1\r\n+k\r\n~1\r\n#t\r\n", '~');
	REPLY(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n", '>');
	REPLY("*2\r\n*2\r\n$1\r\nc\r\n,-inf\r\n*2\r\n$1\r\nd\r\n,0\r\n", '*');
	/* An attribute is followed by the reply it annotates; both are skipped together. */
	REPLY("|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n"
	      "*2\r\n:2039123\r\n:9543892\r\n", '|');
	REPLY("*2\r\n|1\r\n+ttl\r\n:3600\r\n$1\r\nv\r\n:7\r\n", '*');
	REPLY("|0\r\n:1\r\n", '|');
}

static void test_skip_limits_nesting_depth(void **state)
{
	(void)state;
	char buf[4 * 200 + 8];
	size_t n = 0;
	for (int i = 0; i < 128; i++) {
		memcpy(buf + n, "*1\r\n", 4);
		n += 4;
	}
	memcpy(buf + n, ":1\r\n", 4);
	size_t used;
	char t;
	assert_int_equal(resp_reply_skip(buf, n + 4, &used, &t), RESP_OK);
	assert_int_equal(used, n + 4);

	n = 0;
	for (int i = 0; i < 200; i++) {
		memcpy(buf + n, "*1\r\n", 4);
		n += 4;
	}
	memcpy(buf + n, ":1\r\n", 4);
	assert_int_equal(resp_reply_skip(buf, n + 4, &used, &t), RESP_EPROTO);
}

static void test_skip_rejects_malformed_replies(void **state)
{
	(void)state;
	BAD("?x\r\n");
	BAD("hello\r\n");
	BAD("+OK\rX");
	BAD(":abc\r\n");
	BAD(":01\r\n");
	BAD(":\r\n");
	BAD("$3\r\nfooXY");
	BAD("$-2\r\n");
	BAD("$x\r\n");
	BAD("*-2\r\n");
	BAD("*1x\r\n");
	BAD("#x\r\n");
	BAD("_x\r\n");
	BAD("!-1\r\n");
	BAD("|-1\r\n");
	BAD("*2\r\n+a\r\n?\r\n");
	BAD("*99999999999999\r\n");
}

static void test_skip_survives_random_garbage(void **state)
{
	(void)state;
	static const char alpha[] = "*$%~>|+-:_,#!=(\r\n0123456789-tf";
	char buf[300];
	srand(777);
	for (int iter = 0; iter < 30000; iter++) {
		size_t n = (size_t)(rand() % (int)sizeof(buf));
		char *b = malloc(n ? n : 1);
		for (size_t i = 0; i < n; i++)
			b[i] = rand() % 5 ? alpha[rand() % (sizeof(alpha) - 1)] : (char)rand();
		size_t used = 0;
		char t;
		int rc = resp_reply_skip(b, n, &used, &t);
		assert_true(rc == RESP_OK || rc == RESP_INCOMPLETE || rc == RESP_EPROTO);
		if (rc == RESP_OK)
			assert_true(used > 0 && used <= n);
		free(b);
	}
}

/* Random well-formed replies, built recursively, must be found whole and not before. */
static size_t gen_reply(char *b, size_t cap, int depth)
{
	size_t n = 0;
	int kind = rand() % (depth < 4 ? 14 : 8);
	if (cap < 64)
		kind = 0;
	switch (kind) {
	case 0: n = (size_t)snprintf(b, cap, "+OK\r\n"); break;
	case 1: n = (size_t)snprintf(b, cap, ":%d\r\n", rand() - RAND_MAX / 2); break;
	case 2: n = (size_t)snprintf(b, cap, "$-1\r\n"); break;
	case 3: {
		int len = rand() % 20;
		n = (size_t)snprintf(b, cap, "$%d\r\n", len);
		for (int i = 0; i < len; i++)
			b[n++] = "\r\n*$ab"[rand() % 6];
		b[n++] = '\r';
		b[n++] = '\n';
		break;
	}
	case 4: n = (size_t)snprintf(b, cap, "_\r\n"); break;
	case 5: n = (size_t)snprintf(b, cap, ",%d.5\r\n", rand() % 100); break;
	case 6: n = (size_t)snprintf(b, cap, "#%c\r\n", rand() % 2 ? 't' : 'f'); break;
	case 7: n = (size_t)snprintf(b, cap, "-ERR x\r\n"); break;
	default: {
		static const char types[] = "**%~>|";
		char t = types[rand() % 6];
		int cnt = rand() % 4;
		int elems = (t == '%' || t == '|') ? 2 * cnt + (t == '|') : cnt;
		n = (size_t)snprintf(b, cap, "%c%d\r\n", t, cnt);
		for (int i = 0; i < elems; i++)
			n += gen_reply(b + n, (cap - n) / (size_t)(elems - i), depth + 1);
		break;
	}
	}
	return n;
}

static void test_skip_finds_random_nested_replies_whole_and_only_whole(void **state)
{
	(void)state;
	static char buf[1 << 16];
	srand(31337);
	for (int iter = 0; iter < 400; iter++) {
		size_t n = gen_reply(buf, sizeof(buf), 0);
		expect_reply(buf, n, buf[0]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_skip_finds_the_end_of_each_scalar_type),
		cmocka_unit_test(test_skip_walks_nested_aggregates),
		cmocka_unit_test(test_skip_limits_nesting_depth),
		cmocka_unit_test(test_skip_rejects_malformed_replies),
		cmocka_unit_test(test_skip_survives_random_garbage),
		cmocka_unit_test(test_skip_finds_random_nested_replies_whole_and_only_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
