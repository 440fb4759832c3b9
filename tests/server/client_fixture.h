/*
 * client_fixture.h - a client built by hand on a worker that is never started, for the server's
 * unit tests: commands run through command_dispatch and their replies are read straight out of
 * c->out, byte for byte. Include once per test program, after cmocka.h; W and C are its globals.
 * Tests that need a store open one and set W.sess (tests/server/test_hll.c).
 */
#ifndef SPW_TEST_CLIENT_FIXTURE_H
#define SPW_TEST_CLIENT_FIXTURE_H

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "server/server_int.h"

static worker W;
static client C;

static resp_chunk *test_chunk_alloc(void *ctx, size_t min_cap)
{
	(void)ctx;
	size_t cap = min_cap < 256 ? 256 : min_cap;   /* small chunks: replies span several */
	resp_chunk *k = calloc(1, sizeof(*k) + cap);
	assert_non_null(k);
	k->cap = (uint32_t)cap;
	return k;
}

/* Drop the replies so far. */
static void out_reset(void)
{
	resp_chunk *k = C.out.head;
	while (k) {
		resp_chunk *n = k->next;
		free(k);
		k = n;
	}
	resp_out_init(&C.out, test_chunk_alloc, NULL);
	C.out.proto = C.proto;
}

/* The command table, default config, a zeroed worker with its stats arrays, a RESP2 client. */
static void client_fixture_setup(void)
{
	command_table_init();
	config_defaults();
	int slots = command_slots();
	memset(&W, 0, sizeof(W));
	W.stats.cmd_calls = calloc((size_t)slots, sizeof(uint64_t));
	W.stats.cmd_ticks = calloc((size_t)slots, sizeof(uint64_t));
	W.stats.cmd_failed = calloc((size_t)slots, sizeof(uint64_t));
	W.stats.cmd_rejected = calloc((size_t)slots, sizeof(uint64_t));
	memset(&C, 0, sizeof(C));
	C.w = &W;
	C.id = 42;
	C.proto = 2;
	C.conn.fd = -1;
	resp_out_init(&C.out, test_chunk_alloc, NULL);
	C.out.proto = 2;
}

static void client_fixture_teardown(void)
{
	out_reset();
	free(W.stats.cmd_calls);
	free(W.stats.cmd_ticks);
	free(W.stats.cmd_failed);
	free(W.stats.cmd_rejected);
	free(W.scratch);
}

/* Run one command of argc arguments; return its reply as one string (valid until the next run). */
static const char *run_argv(int argc, const char *const *args)
{
	static char reply[65536];
	resp_slice argv[128];
	assert_true(argc <= 128);
	for (int i = 0; i < argc; i++) {
		argv[i].ptr = args[i];
		argv[i].len = strlen(args[i]);
	}
	out_reset();
	C.argc = argc;
	C.argv = argv;
	command_dispatch(&C);
	C.argc = 0;
	C.argv = NULL;
	size_t n = 0;
	for (resp_chunk *k = C.out.head; k; k = k->next) {
		assert_true(n + k->len < sizeof(reply));
		memcpy(reply + n, k->data + k->sent, k->len - k->sent);
		n += k->len - k->sent;
	}
	reply[n] = '\0';
	return reply;
}

/* The same with the arguments as NULL-terminated strings. */
static const char *run(const char *arg0, ...)
{
	const char *args[128];
	va_list ap;
	int argc = 0;
	va_start(ap, arg0);
	for (const char *a = arg0; a && argc < 128; a = va_arg(ap, const char *))
		args[argc++] = a;
	va_end(ap);
	return run_argv(argc, args);
}

#endif
