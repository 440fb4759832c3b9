/*
 * test_split.c - resp_args_split, Redis's sdssplitargs, on its own: the rules of resp_split.c note 1,
 * words handed out as slices of the line or of the caller's scratch buffer, and errors (unbalanced
 * quotes, an error from the callback) that stop the split. Inline requests (test_resp.c), the
 * config file (tests/server/test_config.c) and the differential scripts use it through their callers.
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

#include "proto/resp.h"

typedef struct words {
	char text[512];          /* the words joined as "[w1][w2]..." */
	const char *ptr[16];     /* where each word pointed */
	int n;
	int fail_at;             /* return -E2BIG for this word (0 = never) */
} words;

static int collect(void *ctx, const char *w, size_t len)
{
	words *ws = ctx;
	if (ws->fail_at && ws->n + 1 == ws->fail_at)
		return -E2BIG;
	size_t k = strlen(ws->text);
	snprintf(ws->text + k, sizeof(ws->text) - k, "[%.*s]", (int)len, w);
	if (ws->n < 16)
		ws->ptr[ws->n] = w;
	ws->n++;
	return 0;
}

/* Split s (of len bytes) and return the joined words; rc gets the result. */
static const char *split(words *ws, const char *s, size_t len, int *rc)
{
	char *scratch = NULL;
	size_t cap = 0;
	memset(ws, 0, sizeof(*ws));
	*rc = resp_args_split(s, len, &scratch, &cap, collect, ws);
	free(scratch);
	return ws->text;
}

static void test_split_follows_sdssplitargs_rules(void **state)
{
	(void)state;
	static const struct { const char *in; const char *out; } cases[] = {
		{ "", "" },
		{ "   \t\v\f ", "" },
		{ "set k v", "[set][k][v]" },
		{ "  a\t\tb \r\n", "[a][b]" },
		{ "a\vb", "[a\vb]" },                       /* \v and \f do not end a word */
		{ "\"a b\" c", "[a b][c]" },
		{ "x\"a b\"", "[xa b]" },                   /* a quoted part ends a word */
		{ "\"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"", "[AJ\n\r\t\b\a\\\"q]" },
		{ "\"\\x4\"", "[x4]" },                     /* not a hex escape: \x is x */
		{ "'it\\'s' '\\n'", "[it's][\\n]" },        /* single quotes know \' only */
		{ "\"\" ''", "[][]" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		words ws;
		int rc;
		const char *got = split(&ws, cases[i].in, strlen(cases[i].in), &rc);
		assert_true(rc >= 0);
		assert_int_equal(rc, ws.n);
		assert_string_equal(got, cases[i].out);
	}
}

static void test_split_refuses_unbalanced_quotes_and_a_quote_glued_to_a_word(void **state)
{
	(void)state;
	static const char *bad[] = { "\"a", "'a", "\"a\"b", "'a'b", "a \"b\\\"", "\"a\\" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		words ws;
		int rc;
		split(&ws, bad[i], strlen(bad[i]), &rc);
		assert_int_equal(rc, -EINVAL);
	}
}

static void test_split_ends_the_line_at_a_nul(void **state)
{
	(void)state;
	words ws;
	int rc;
	assert_string_equal(split(&ws, "a b\0c d", 7, &rc), "[a][b]");
	assert_int_equal(rc, 2);
	/* A quote left open at the NUL is open at the end of the line. */
	split(&ws, "a \"b\0\"", 6, &rc);
	assert_int_equal(rc, -EINVAL);
}

static void test_split_hands_out_slices_of_the_line_or_of_the_scratch(void **state)
{
	(void)state;
	const char line[] = "plain \"quo ted\" tail";
	char *scratch = NULL;
	size_t cap = 0;
	words ws;
	memset(&ws, 0, sizeof(ws));
	assert_int_equal(resp_args_split(line, strlen(line), &scratch, &cap, collect, &ws), 3);
	assert_ptr_equal(ws.ptr[0], line);
	assert_ptr_equal(ws.ptr[1], scratch);             /* rebuilt where quotes were */
	assert_ptr_equal(ws.ptr[2], line + 16);
	assert_true(cap >= strlen(line));
	/* A second line reuses the buffer when it is big enough. */
	char *was = scratch;
	memset(&ws, 0, sizeof(ws));
	assert_int_equal(resp_args_split("'x'", 3, &scratch, &cap, collect, &ws), 1);
	assert_ptr_equal(scratch, was);
	free(scratch);
}

static void test_split_stops_at_the_first_error_of_the_callback(void **state)
{
	(void)state;
	char *scratch = NULL;
	size_t cap = 0;
	words ws;
	memset(&ws, 0, sizeof(ws));
	ws.fail_at = 2;
	assert_int_equal(resp_args_split("a b c", 5, &scratch, &cap, collect, &ws), -E2BIG);
	assert_int_equal(ws.n, 1);
	free(scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_follows_sdssplitargs_rules),
		cmocka_unit_test(test_split_refuses_unbalanced_quotes_and_a_quote_glued_to_a_word),
		cmocka_unit_test(test_split_ends_the_line_at_a_nul),
		cmocka_unit_test(test_split_hands_out_slices_of_the_line_or_of_the_scratch),
		cmocka_unit_test(test_split_stops_at_the_first_error_of_the_callback),
	};
	return cmocka_run_group_tests_name("argument splitter", tests, NULL, NULL);
}
