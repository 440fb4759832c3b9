/*
 * itest_check.c - checks and fixtures that fail the running cmocka test: send a command and compare
 * its reply, read a field or a counter from INFO, start and stop a group's server.
 *
 * Notes:
 *  1. The checks fail through cmocka's _fail(), which jumps out of the test: call them from the
 *     test's own thread only. A load thread reports through its own error text instead
 *     (test_tier.c). They take the caller's file and line (itest.h's macros), so a failure names
 *     the line of the test.
 *  2. A mismatch prints the command and both replies escaped, so that CR, LF and binary bytes show.
 *  3. A test that names a path ("cold", "parked", "look-ahead") proves that the path ran from an
 *     INFO stats counter (itest_stat_grew). A counter INFO does not have fails the test instead of
 *     reading as -1, so a renamed counter cannot make such a proof vacuous.
 *  4. A fixture's server is "not running" when it has no process and no folder: never started, a
 *     start that failed (server_start removes the folder), or stopped cleanly already. Stopping it
 *     then is a no-op, so teardowns need no flag of their own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "itest.h"

/* Print "ERROR: why" as cmocka's fail_msg does and fail the test at file:line (note 1). */
static void check_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
static void check_fail(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	print_error("ERROR: %s\n", msg);
	_fail(file, line);
	abort();   /* not reached: _fail jumps out of the test */
}

void itest_bytes_expect_at(const char *file, int line, const char *what, const void *got, size_t glen,
                           const void *want, size_t wlen)
{
	if (glen == wlen && memcmp(got, want, wlen) == 0)
		return;
	char *g = itest_escape(got, glen, 400), *w = itest_escape(want, wlen, 400);
	fprintf(stderr, "%s:\n  expected \"%s\"\n  got      \"%s\"\n", what, w, g);
	free(g);
	free(w);
	check_fail(file, line, "%s: reply bytes differ", what);
}

/* Send the command arg0, ap...; what gets "ARG0 ARG1" (escaped) for messages. Fails on no reply. */
static char *call_va(const char *file, int line, itest_conn *c, char *what, size_t cap,
                     const char *arg0, va_list ap)
{
	va_list aq;
	va_copy(aq, ap);
	const char *arg1 = va_arg(aq, const char *);
	va_end(aq);
	char *e1 = arg1 ? itest_escape(arg1, strlen(arg1), 60) : NULL;
	snprintf(what, cap, "%s%s%s", arg0, e1 ? " " : "", e1 ? e1 : "");
	free(e1);
	char *r = itest_conn_call_va(c, arg0, ap);
	if (!r)
		check_fail(file, line, "%s: no reply", what);
	return r;
}

char *itest_call_at(const char *file, int line, itest_conn *c, const char *arg0, ...)
{
	char what[128];
	va_list ap;
	va_start(ap, arg0);
	char *r = call_va(file, line, c, what, sizeof(what), arg0, ap);
	va_end(ap);
	return r;
}

void itest_expect_at(const char *file, int line, itest_conn *c, const char *want, const char *arg0, ...)
{
	char what[128];
	va_list ap;
	va_start(ap, arg0);
	char *r = call_va(file, line, c, what, sizeof(what), arg0, ap);
	va_end(ap);
	itest_bytes_expect_at(file, line, what, r, strlen(r), want, strlen(want));
	free(r);
}

void itest_expect_bulk_at(const char *file, int line, itest_conn *c, const char *value,
                          const char *arg0, ...)
{
	char what[128];
	itest_buf want = { 0 };
	itest_buf_bulk(&want, value, strlen(value));
	va_list ap;
	va_start(ap, arg0);
	char *r = call_va(file, line, c, what, sizeof(what), arg0, ap);
	va_end(ap);
	itest_bytes_expect_at(file, line, what, r, strlen(r), want.p, want.len);
	free(r);
	free(want.p);
}

void itest_replies_expect_at(const char *file, int line, itest_conn *c, const itest_server *srv,
                             const void *want, size_t wlen, itest_buf *got)
{
	char err[1024];
	if (itest_replies_check(c, want, wlen, got, err, sizeof(err)) >= 0)
		return;
	if (srv)
		itest_server_log_dump(srv);
	check_fail(file, line, "%s", err);
}

long long itest_info_field_at(const char *file, int line, itest_conn *c, const char *section,
                              const char *name)
{
	char *r = itest_call_at(file, line, c, "INFO", section, NULL);
	long long v = itest_info_value(r, name);
	free(r);
	return v;
}

long long itest_info_value(const char *reply, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = reply; (p = strstr(p, name)) != NULL; p += nl)
		if ((p == reply || p[-1] == '\n') && p[nl] == ':')
			return strtoll(p + nl + 1, NULL, 10);
	return -1;
}

long long itest_info_stat_at(const char *file, int line, itest_conn *c, const char *name)
{
	long long v = itest_info_field_at(file, line, c, "stats", name);
	if (v < 0)
		check_fail(file, line, "INFO stats has no %s", name);
	return v;
}

long long itest_stat_grew_at(const char *file, int line, itest_conn *c, const char *name,
                             long long before, long long at_least, const char *what)
{
	long long now = itest_info_stat_at(file, line, c, name);
	if (now - before < at_least)
		check_fail(file, line, "%s grew by %lld (%lld -> %lld), at least %lld expected: %s", name,
		           now - before, before, now, at_least, what);
	return now;
}

int itest_fixture_start(itest_server *s, itest_kind kind, const char *const *flags, const char *who)
{
	const char *what;
	int err;
	switch (kind) {
	case ITEST_SPILLWAY:
		what = "spillway-server";
		err = itest_spillway_start(s, flags);
		break;
	case ITEST_REDIS:
		what = "redis-server";
		err = itest_redis_start(s, flags);
		break;
	default:
		what = "the server under test";
		err = itest_target_start(s, flags);
		break;
	}
	if (err) {
		fprintf(stderr, "%s: cannot start %s: %s\n", who, what, strerror(-err));
		return -1;
	}
	return 0;
}

void itest_spillway_start_on(itest_server *s, const char *dir, const char *const *base,
                             const char *const *extra)
{
	const char *flags[64] = { "--dir", dir, "--logdir", dir };
	size_t n = 4;
	for (const char *const *l = base; l && *l; l++)
		if (n + 1 < sizeof(flags) / sizeof(flags[0]))
			flags[n++] = *l;
	for (const char *const *l = extra; l && *l; l++)
		if (n + 1 < sizeof(flags) / sizeof(flags[0]))
			flags[n++] = *l;
	flags[n] = NULL;
	if (itest_spillway_start(s, flags) < 0)
		fail_msg("spillway-server did not start on %s", dir);
}

int itest_fixture_stop(itest_server *s, const char *who)
{
	if (s->pid == 0 && s->dir[0] == '\0')
		return 0;   /* not running (note 4) */
	int st = itest_server_stop(s);
	if (st == 0)
		return 0;
	fprintf(stderr, "%s: %s exited with status %d\n", who, s->name, st);
	itest_server_log_dump(s);
	return -1;
}

/* ---------------- a flat RESP2 array of bulk strings ---------------- */

void itest_strs_free(itest_strs *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->v[i]);
	s->n = 0;
}

const char *itest_strs_parse(const char *p, itest_strs *out)
{
	assert_true(*p == '*');
	long n = strtol(p + 1, (char **)&p, 10);
	assert_true(n >= 0 && n <= ITEST_STRS_MAX);
	p += 2;
	out->n = 0;
	for (long i = 0; i < n; i++) {
		assert_true(*p == '$');
		long l = strtol(p + 1, (char **)&p, 10);
		p += 2;
		out->v[i] = malloc((size_t)l + 1);
		assert_non_null(out->v[i]);
		memcpy(out->v[i], p, (size_t)l);
		out->v[i][l] = '\0';
		out->len[i] = (size_t)l;
		out->n++;
		p += l + 2;
	}
	return p;
}

void itest_strs_call(itest_conn *c, itest_strs *out, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	char *r = itest_conn_call_va(c, arg0, ap);
	va_end(ap);
	assert_non_null(r);
	if (*r != '*')
		fail_msg("not an array: %s", r);
	itest_strs_parse(r, out);
	free(r);
}

int itest_strs_find(const itest_strs *s, const char *v, int from, int step)
{
	for (int i = from; i < s->n; i += step)
		if (strcmp(s->v[i], v) == 0)
			return i;
	return -1;
}
