/*
 * test_differential.c - spillway-server against redis-server, byte for byte.
 *
 * Every script tests/integration/diff/NAME.txt runs on fresh connections to both servers, after a
 * FLUSHALL on each; every reply is compared byte for byte and the first mismatch of a script is
 * printed as script:line, the command, and both replies escaped around the first differing byte.
 *
 * Script syntax (one command per line, quoted as redis-cli does: "..." with \n \r \t \b \a \\ \"
 * \xHH, '...' with \' only, bare words split on blanks; '#' starts a comment line). Directive lines
 * apply to the next command:
 *   !sort        the reply is an aggregate compared as a sorted multiset of its elements (KEYS);
 *                for a map (RESP3 '%') the key/value pairs are sorted.
 *   !skip        sent to both servers, the replies are read but not compared (volatile replies).
 *   !scanall     the command is a SCAN whose cursor (argv[1]) is followed to the end on each server;
 *                the sorted set of keys returned is compared (an error reply is compared as is).
 *                HSCAN, SSCAN and ZSCAN too (cursor argv[2]): their elements (fields and values,
 *                members and scores) are compared as one set, so give the values distinct texts.
 *   !repeat N    the command's last argument is repeated N times (values of hundreds of KB).
 *
 * Notes:
 *  1. Volatile commands are listed by name in volatile_commands[] below, each with why. A script
 *     that uses one without !skip fails to load: nothing is excluded silently, and a script cannot
 *     quietly compare something that differs by design (a port, a client id, a clock).
 *  2. No sleeps: expiry is exercised with large TTLs (TTL rounds to seconds, so a few ms of run time
 *     do not show), absolute EXPIREAT/PEXPIREAT times read back with EXPIRETIME, and times in the
 *     past, which delete at once on both servers.
 *  3. redis-server runs with --databases 1 because Spillway has only db 0: SELECT 1 must then fail
 *     the same way on both.
 *  4. SKIP (77) only when redis-server is not installed; a missing spillway-server is a FAIL.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/spw.h"
#include "support/itest.h"
#include "proto/resp.h"

/* ---------------- volatile commands (note 1) ---------------- */

typedef struct volatile_cmd {
	const char *name;   /* "CMD" or "CMD SUBCMD" */
	const char *why;
} volatile_cmd;

static const volatile_cmd volatile_commands[] = {
	{ "INFO", "server-specific fields: versions, pids, ports, uptime, memory" },
	{ "TIME", "the clock" },
	{ "LASTSAVE", "the clock" },
	{ "CLIENT ID", "connection counters differ between servers" },
	{ "CLIENT LIST", "ids, addresses, ages, buffer sizes" },
	{ "CLIENT INFO", "ids, addresses, ages, buffer sizes" },
	{ "HELLO", "server name, version, connection id" },
	{ "COMMAND", "Spillway implements a subset of Redis's commands" },
	{ "CONFIG GET", "volatile parameter names (volatile_config_names) and glob patterns" },
	{ "DEBUG", "server internals" },
	{ "RANDOMKEY", "random by definition" },
	{ "SCAN", "cursors are implementation-defined; use !scanall to compare the whole iteration" },
	{ "OBJECT IDLETIME", "access times are not tracked here (cmd_object.c note 3): an error instead" },
	{ "MEMORY", "allocator figures; MEMORY USAGE is this server's record size (cmd_object.c note 4)" },
	{ "LATENCY", "measurements" },
	{ "SLOWLOG", "measurements" },
};

/* CONFIG GET parameters whose values differ by design between the two processes under test. */
static const char *const volatile_config_names[] = {
	"port", "bind", "dir", "logfile", "pidfile", "dbfilename", "save", "appendonly", "maxmemory",
	"maxclients", "io-threads", "daemonize", "unixsocket", "logdir", "threads", "memory", "page",
	"index", "tls-port", "supervised", "loglevel",
};

static bool word_is(const char *arg, size_t len, const char *word, size_t wlen)
{
	return len == wlen && strncasecmp(arg, word, wlen) == 0;
}

/* Why argv is volatile, or NULL. The SCAN entry is lifted by !scanall (the caller checks). */
static const char *volatile_reason(int argc, char *const *argv, const size_t *lens, const char **which)
{
	for (size_t i = 0; i < sizeof(volatile_commands) / sizeof(volatile_commands[0]); i++) {
		const char *name = volatile_commands[i].name, *sp = strchr(name, ' ');
		size_t l0 = sp ? (size_t)(sp - name) : strlen(name);
		if (argc < 1 || !word_is(argv[0], lens[0], name, l0))
			continue;
		if (sp) {
			if (argc < 2 || !word_is(argv[1], lens[1], sp + 1, strlen(sp + 1)))
				continue;
		}
		if (strcmp(name, "CONFIG GET") == 0) {
			bool vol = false;
			for (int a = 2; a < argc && !vol; a++) {
				if (memchr(argv[a], '*', lens[a]) || memchr(argv[a], '?', lens[a]) ||
				    memchr(argv[a], '[', lens[a]))
					vol = true;
				for (size_t k = 0; k < sizeof(volatile_config_names) / sizeof(char *) && !vol; k++)
					vol = word_is(argv[a], lens[a], volatile_config_names[k],
					              strlen(volatile_config_names[k]));
			}
			if (!vol)
				continue;
		}
		*which = name;
		return volatile_commands[i].why;
	}
	return NULL;
}

/* The argument index of a scan command's cursor: 1 for SCAN, 2 for a key's scan, 0 for others. */
static int scan_cursor_arg(int argc, char *const *argv, const size_t *lens)
{
	if (argc < 1)
		return 0;
	if (word_is(argv[0], lens[0], "SCAN", 4))
		return 1;
	if (word_is(argv[0], lens[0], "HSCAN", 5) || word_is(argv[0], lens[0], "SSCAN", 5) ||
	    word_is(argv[0], lens[0], "ZSCAN", 5))
		return 2;
	return 0;
}

/* ---------------- scripts ---------------- */

typedef struct dcmd {
	int line;
	int argc;
	char **argv;
	size_t *lens;
	bool sort, skip, scanall;
	long repeat;        /* the last argument was repeated this many times (0: not) */
	char *text;         /* the source line, for messages */
} dcmd;

typedef struct script {
	char name[128];
	dcmd *cmds;
	int n, cap;
} script;

static void dcmd_free(dcmd *c)
{
	for (int a = 0; a < c->argc; a++)
		free(c->argv[a]);
	free(c->argv);
	free(c->lens);
	free(c->text);
}

static void script_free(script *s)
{
	for (int i = 0; i < s->n; i++)
		dcmd_free(&s->cmds[i]);
	free(s->cmds);
	memset(s, 0, sizeof(*s));
}

/* resp_args_split's callback for line_split: each word as a malloc'd NUL-terminated copy. */
typedef struct line_words {
	char **argv;
	size_t *lens;
	int argc;
} line_words;

static int line_word_add(void *ctx, const char *w, size_t len)
{
	line_words *lw = ctx;
	char **na = realloc(lw->argv, sizeof(char *) * (size_t)(lw->argc + 1));
	if (na)
		lw->argv = na;
	size_t *nl = realloc(lw->lens, sizeof(size_t) * (size_t)(lw->argc + 1));
	if (nl)
		lw->lens = nl;
	char *tok = na && nl ? malloc(len + 1) : NULL;
	if (!tok)
		return -ENOMEM;
	memcpy(tok, w, len);
	tok[len] = '\0';
	lw->argv[lw->argc] = tok;
	lw->lens[lw->argc] = len;
	lw->argc++;
	return 0;
}

/*
 * Split a line as redis-cli does (sdssplitargs, through proto's resp_args_split):
 * quotes, escapes, and a closing quote that must be followed by a blank or the end. Returns
 * argc >= 0, or -EINVAL on unbalanced quotes.
 */
static int line_split(const char *p, char ***argv_out, size_t **lens_out)
{
	line_words lw = { NULL, NULL, 0 };
	char *scratch = NULL;
	size_t cap = 0;
	int rc = resp_args_split(p, strlen(p), &scratch, &cap, line_word_add, &lw);

	free(scratch);
	if (rc < 0) {
		for (int i = 0; i < lw.argc; i++)
			free(lw.argv[i]);
		free(lw.argv);
		free(lw.lens);
		return rc;
	}
	*argv_out = lw.argv;
	*lens_out = lw.lens;
	return lw.argc;
}

/*
 * Parse a script's text. 0, or -EINVAL with "name:line: why" in err: bad quoting, an unknown or
 * dangling directive, or a volatile command without !skip (note 1).
 */
static int script_parse(script *s, const char *name, const char *text, char *err, size_t errlen)
{
	bool sort = false, skip = false, scanall = false;
	long repeat = 0;
	int lineno = 0;
	const char *p = text;

	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	while (*p) {
		const char *eol = strchr(p, '\n');
		size_t ll = eol ? (size_t)(eol - p) : strlen(p);
		char *line = strndup(p, ll);
		p += ll + (eol ? 1 : 0);
		lineno++;
		char *t = line;
		while (isspace((unsigned char)*t))
			t++;
		size_t tl = strlen(t);
		while (tl > 0 && isspace((unsigned char)t[tl - 1]))
			t[--tl] = '\0';
		if (*t == '\0' || *t == '#') {
			free(line);
			continue;
		}
		if (*t == '!') {
			if (strcmp(t, "!sort") == 0)
				sort = true;
			else if (strcmp(t, "!skip") == 0)
				skip = true;
			else if (strcmp(t, "!scanall") == 0)
				scanall = true;
			else if (strncmp(t, "!repeat ", 8) == 0 && (repeat = strtol(t + 8, NULL, 10)) > 0 &&
			         repeat <= 10 * 1000 * 1000)
				;
			else {
				snprintf(err, errlen, "%s:%d: unknown directive '%s'", name, lineno, t);
				free(line);
				goto fail;
			}
			free(line);
			continue;
		}
		dcmd c;
		memset(&c, 0, sizeof(c));
		c.line = lineno;
		c.text = line;   /* c owns the line from here: dcmd_free frees both */
		c.argc = line_split(t, &c.argv, &c.lens);
		if (c.argc <= 0) {
			snprintf(err, errlen, "%s:%d: unbalanced quotes in '%s'", name, lineno, t);
			dcmd_free(&c);
			goto fail;
		}
		if (repeat > 0) {
			int last = c.argc - 1;
			size_t l = c.lens[last], total = l * (size_t)repeat;
			char *big = malloc(total + 1);
			for (long r = 0; big && r < repeat; r++)
				memcpy(big + (size_t)r * l, c.argv[last], l);
			if (!big) {
				snprintf(err, errlen, "%s:%d: out of memory", name, lineno);
				dcmd_free(&c);
				goto fail;
			}
			big[total] = '\0';
			free(c.argv[last]);
			c.argv[last] = big;
			c.lens[last] = total;
		}
		const char *which = NULL;
		const char *why = volatile_reason(c.argc, c.argv, c.lens, &which);
		bool scan_ok = scanall && scan_cursor_arg(c.argc, c.argv, c.lens) != 0;
		if (why && !skip && !scan_ok) {
			snprintf(err, errlen,
			         "%s:%d: '%s' is volatile (%s): put !skip before it, it is never excluded silently",
			         name, lineno, which, why);
			dcmd_free(&c);
			goto fail;
		}
		if (scanall && !scan_ok) {
			snprintf(err, errlen, "%s:%d: !scanall needs a SCAN command", name, lineno);
			dcmd_free(&c);
			goto fail;
		}
		c.sort = sort;
		c.skip = skip;
		c.scanall = scanall;
		c.repeat = repeat;
		if (s->n == s->cap) {
			s->cap = s->cap ? s->cap * 2 : 64;
			s->cmds = realloc(s->cmds, sizeof(dcmd) * (size_t)s->cap);
		}
		s->cmds[s->n++] = c;
		sort = skip = scanall = false;
		repeat = 0;
	}
	if (sort || skip || scanall || repeat) {
		snprintf(err, errlen, "%s: a directive at the end applies to no command", name);
		goto fail;
	}
	return 0;
fail:
	script_free(s);
	return -EINVAL;
}

static char *file_read(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		return NULL;
	fseek(fp, 0, SEEK_END);
	long n = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, fp) != (size_t)n) {
		free(b);
		b = NULL;
	}
	if (b)
		b[n] = '\0';
	fclose(fp);
	return b;
}

/* ---------------- reply normalisation ---------------- */

typedef struct elem {
	const char *p;
	size_t len;
} elem;

static int elem_cmp(const void *a, const void *b)
{
	const elem *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->p, y->p, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Split an aggregate reply into its header and elements. Count of elements, or -1 if r is not an
 * aggregate with a non-negative length. For a map, elements are key+value pairs. */
static long aggregate_split(const char *r, size_t len, size_t *hdr_len, elem **out)
{
	if (len < 4 || (r[0] != '*' && r[0] != '~' && r[0] != '%' && r[0] != '>'))
		return -1;
	const char *crlf = memchr(r, '\r', len);
	if (!crlf)
		return -1;
	long n = strtol(r + 1, NULL, 10);
	if (n < 0)
		return -1;
	*hdr_len = (size_t)(crlf - r) + 2;
	int per = r[0] == '%' ? 2 : 1;
	elem *e = calloc((size_t)n + 1, sizeof(elem));
	size_t off = *hdr_len;
	for (long i = 0; i < n; i++) {
		size_t start = off;
		for (int k = 0; k < per; k++) {
			size_t used;
			char t;
			if (resp_reply_skip(r + off, len - off, &used, &t) != RESP_OK) {
				free(e);
				return -1;
			}
			off += used;
		}
		e[i].p = r + start;
		e[i].len = off - start;
	}
	*out = e;
	return n;
}

/* The reply with its aggregate elements sorted (!sort), into out. */
static void reply_sorted(const char *r, size_t len, itest_buf *out)
{
	size_t hdr;
	elem *e = NULL;
	long n = aggregate_split(r, len, &hdr, &e);
	if (n < 0) {
		itest_buf_add(out, r, len);
		return;
	}
	qsort(e, (size_t)n, sizeof(elem), elem_cmp);
	itest_buf_add(out, r, hdr);
	for (long i = 0; i < n; i++)
		itest_buf_add(out, e[i].p, e[i].len);
	free(e);
}

/*
 * !scanall: follow the cursor of c (argv[1], a key's scan argv[2]) to 0 on conn and build "*N\r\n" + the sorted, unique
 * keys seen. An error or malformed reply is returned as it came. 0, or -errno on I/O failure.
 */
static int scan_collect(itest_conn *conn, const dcmd *c, itest_buf *out)
{
	char cursor[32] = "0";
	const char **argv = calloc((size_t)c->argc, sizeof(char *));
	size_t *lens = calloc((size_t)c->argc, sizeof(size_t));
	itest_buf keys = { 0 };   /* every key element seen, back to back */
	size_t *offs = NULL, nall = 0, capall = 0;
	int rc = 0;

	for (int a = 0; a < c->argc; a++) {
		argv[a] = c->argv[a];
		lens[a] = c->lens[a];
	}
	int ci = scan_cursor_arg(c->argc, c->argv, c->lens);
	for (int iter = 0; iter < 1000000; iter++) {
		const char *r;
		if (c->argc > ci) {   /* a bare SCAN (arity error) goes out as written */
			argv[ci] = cursor;
			lens[ci] = strlen(cursor);
		}
		if ((rc = itest_conn_send_argv(conn, c->argc, argv, lens)) < 0)
			goto out;
		ssize_t n = itest_conn_read_reply(conn, &r, NULL);
		if (n < 0) {
			rc = (int)n;
			goto out;
		}
		size_t hdr;
		elem *top = NULL;
		if (aggregate_split(r, (size_t)n, &hdr, &top) != 2 || top[0].p[0] != '$' ||
		    top[1].p[0] != '*') {
			free(top);
			out->len = 0;
			itest_buf_add(out, r, (size_t)n);   /* an error, or not SCAN's shape: compare as is */
			goto out;
		}
		const char *cp = memchr(top[0].p, '\n', top[0].len);
		size_t clen = top[0].len - (size_t)(cp + 1 - top[0].p) - 2;
		snprintf(cursor, sizeof(cursor), "%.*s", (int)(clen < 31 ? clen : 31), cp + 1);
		size_t h2;
		elem *ks = NULL;
		long nk = aggregate_split(top[1].p, top[1].len, &h2, &ks);
		for (long i = 0; i < nk; i++) {
			/* Copy: the connection buffer is reused by the next reply. Offsets, since keys.p moves. */
			if (nall == capall) {
				capall = capall ? capall * 2 : 64;
				offs = realloc(offs, capall * sizeof(size_t));
				assert_non_null(offs);
			}
			offs[nall++] = keys.len;
			itest_buf_add(&keys, ks[i].p, ks[i].len);
		}
		free(ks);
		free(top);
		if (strcmp(cursor, "0") == 0) {
			elem *all = calloc(nall + 1, sizeof(elem));
			assert_non_null(all);
			for (size_t i = 0; i < nall; i++) {
				all[i].p = keys.p + offs[i];
				all[i].len = (i + 1 < nall ? offs[i + 1] : keys.len) - offs[i];
			}
			qsort(all, nall, sizeof(elem), elem_cmp);
			size_t uniq = 0;
			for (size_t i = 0; i < nall; i++)
				if (uniq == 0 || elem_cmp(&all[uniq - 1], &all[i]) != 0)
					all[uniq++] = all[i];
			out->len = 0;
			itest_buf_fmt(out, "*%zu\r\n", uniq);
			for (size_t i = 0; i < uniq; i++)
				itest_buf_add(out, all[i].p, all[i].len);
			free(all);
			goto out;
		}
	}
	rc = -ELOOP;
out:
	free(offs);
	free(keys.p);
	free(argv);
	free(lens);
	return rc;
}

/* ---------------- the servers and the comparison ---------------- */

static itest_server g_redis, g_spw;
static char g_diff_dir[1024];

static const char *const spw_flags[] = {
	"--threads", "2", "--memory", "64m", "--page", "1m", "--index", "1m", NULL,
};

/* Spillway matches Redis 7.0 (SPW_REDIS_VERSION); another reference version differs in places (error
 * texts, new options). Say so up front rather than leave a puzzling diff. */
static void redis_version_check(void)
{
	itest_conn c;
	if (itest_conn_open(&c, g_redis.port) != 0)
		return;
	char *info = itest_conn_call(&c, "INFO", "server", NULL);
	const char *v = info ? strstr(info, "redis_version:") : NULL;
	if (v) {
		v += strlen("redis_version:");
		int len = (int)strcspn(v, "\r\n");
		print_message("differential: reference redis-server %.*s\n", len, v);
		if (strncmp(v, SPW_REDIS_VERSION, 4) != 0)
			fprintf(stderr, "differential: WARNING: Spillway matches Redis %s; this redis-server is "
			        "%.*s, some replies may differ for that reason\n", SPW_REDIS_VERSION, len, v);
	}
	free(info);
	itest_conn_close(&c);
}

static int servers_start(void **state)
{
	(void)state;
	if (itest_fixture_start(&g_redis, ITEST_REDIS, NULL, "differential") != 0)
		return -1;
	redis_version_check();
	/* SPW_ITEST_TARGET=redis compares redis-server with itself: a check of the scripts and runner. */
	if (itest_fixture_start(&g_spw, ITEST_TARGET, spw_flags, "differential") != 0) {
		itest_server_stop(&g_redis);   /* cmocka runs no teardown after a failed setup */
		return -1;
	}
	print_message("differential: redis-server on port %d, %s on port %d\n", g_redis.port, g_spw.name,
	              g_spw.port);
	return 0;
}

static int servers_stop(void **state)
{
	(void)state;
	int rc = itest_fixture_stop(&g_spw, "differential");
	itest_server_stop(&g_redis);   /* the reference: its exit status is not under test */
	return rc;
}

/* Print the first mismatch: where, what, and both replies around the first differing byte. */
static void mismatch_report(const script *s, const dcmd *c, const char *a, size_t alen, const char *b,
                            size_t blen)
{
	size_t off = 0;
	while (off < alen && off < blen && a[off] == b[off])
		off++;
	size_t from = off > 60 ? off - 60 : 0;
	char *ea = itest_escape(a + from, alen - from, 240);
	char *eb = itest_escape(b + from, blen - from, 240);
	char *cmd = itest_escape(c->text, strlen(c->text), 200);
	fprintf(stderr,
	        "\n%s:%d: replies differ\n"
	        "  command:         %s%s\n"
	        "  first difference at byte %zu (replies of %zu and %zu bytes)\n",
	        s->name, c->line, cmd, c->repeat ? "  (last argument repeated by !repeat)" : "", off,
	        alen, blen);
	if (from)
		fprintf(stderr, "  (both replies shown from byte %zu)\n", from);
	fprintf(stderr, "  redis-server: \"%s\"\n  %s: \"%s\"\n\n", ea, g_spw.name, eb);
	free(ea);
	free(eb);
	free(cmd);
}

/* Send c to one server and put its (normalised) reply in out. 0 or -errno. */
static int run_one(itest_conn *conn, const dcmd *c, itest_buf *out)
{
	const char *r;
	out->len = 0;
	if (c->scanall)
		return scan_collect(conn, c, out);
	int err = itest_conn_send_argv(conn, c->argc, (const char *const *)c->argv, c->lens);
	if (err)
		return err;
	ssize_t n = itest_conn_read_reply(conn, &r, NULL);
	if (n < 0)
		return (int)n;
	if (c->sort)
		reply_sorted(r, (size_t)n, out);
	else
		itest_buf_add(out, r, (size_t)n);
	return 0;
}

/* Run one script on fresh connections; true when every compared reply matched. */
static bool script_run(const script *s)
{
	itest_conn cr, cs;
	itest_buf ra = { 0 }, rb = { 0 };
	bool ok = false;

	int ea = itest_conn_open(&cr, g_redis.port), eb = itest_conn_open(&cs, g_spw.port);
	if (ea || eb) {
		fprintf(stderr, "%s: cannot connect (redis-server: %s, %s: %s)\n", s->name,
		        ea ? strerror(-ea) : "connected", g_spw.name, eb ? strerror(-eb) : "connected");
		goto out;
	}
	char *fa = itest_conn_call(&cr, "FLUSHALL", NULL);
	char *fb = itest_conn_call(&cs, "FLUSHALL", NULL);
	if (!fa || !fb || strcmp(fa, "+OK\r\n") != 0 || strcmp(fb, "+OK\r\n") != 0) {
		fprintf(stderr, "%s: FLUSHALL before the script failed (redis-server: %s, %s: %s)\n",
		        s->name, fa ? fa : "no reply", g_spw.name, fb ? fb : "no reply");
		free(fa);
		free(fb);
		goto out;
	}
	free(fa);
	free(fb);
	for (int i = 0; i < s->n; i++) {
		const dcmd *c = &s->cmds[i];
		ea = run_one(&cr, c, &ra);
		eb = run_one(&cs, c, &rb);
		if (ea || eb) {
			char *cmd = itest_escape(c->text, strlen(c->text), 200);
			fprintf(stderr, "\n%s:%d: %s\n  redis-server: %s\n  %s: %s\n", s->name, c->line, cmd,
			        ea ? strerror(-ea) : "replied", g_spw.name, eb ? strerror(-eb) : "replied");
			free(cmd);
			goto out;
		}
		if (c->skip)
			continue;
		if (ra.len != rb.len || memcmp(ra.p, rb.p, ra.len) != 0) {
			mismatch_report(s, c, ra.p, ra.len, rb.p, rb.len);
			goto out;
		}
	}
	ok = true;
out:
	free(ra.p);
	free(rb.p);
	itest_conn_close(&cr);
	itest_conn_close(&cs);
	return ok;
}

static void test_script_replies_match_redis_byte_for_byte(void **state)
{
	const char *path = *state;
	char err[512] = "";
	script s;
	char *text = file_read(path);
	if (!text)
		fail_msg("cannot read %s: %s", path, strerror(errno));
	const char *base = strrchr(path, '/');
	char name[128];
	snprintf(name, sizeof(name), "diff/%s", base ? base + 1 : path);
	int rc = script_parse(&s, name, text, err, sizeof(err));
	free(text);
	if (rc)
		fail_msg("%s", err);
	bool ok = script_run(&s);
	int n = s.n;
	script_free(&s);
	if (!ok)
		fail_msg("%s: does not match redis-server (details above)", name);
	print_message("%s: %d commands matched\n", name, n);
}

/* ---------------- the script reader itself ---------------- */

static void test_reader_unescapes_redis_cli_quoting(void **state)
{
	(void)state;
	script s;
	char err[256];
	const char *text = "# comment\n\n  SET \"a b\" \"x\\r\\n\\x41\\\"\\\\\"  \n"
	                   "SET 'it\\'s' ''\n"
	                   "!repeat 3\nSET big ab\n";
	assert_int_equal(script_parse(&s, "t", text, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.cmds[0].argc, 3);
	assert_int_equal(s.cmds[0].line, 3);
	assert_int_equal(s.cmds[0].lens[1], 3);
	assert_memory_equal(s.cmds[0].argv[1], "a b", 3);
	assert_int_equal(s.cmds[0].lens[2], 6);
	assert_memory_equal(s.cmds[0].argv[2], "x\r\nA\"\\", 6);
	assert_string_equal(s.cmds[1].argv[1], "it's");
	assert_int_equal(s.cmds[1].lens[2], 0);
	assert_int_equal(s.cmds[2].lens[2], 6);
	assert_string_equal(s.cmds[2].argv[2], "ababab");
	script_free(&s);
}

static void test_reader_rejects_volatile_commands_without_skip(void **state)
{
	(void)state;
	script s;
	char err[256];
	const char *bad[] = { "INFO\n", "client list\n", "CONFIG GET port\n", "CONFIG GET *\n",
	                      "SCAN 0\n", "HELLO 3\n", "!sort\nCOMMAND\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(script_parse(&s, "t", bad[i], err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "volatile"));
	}
	const char *good = "!skip\nINFO\nCONFIG GET timeout\nCLIENT GETNAME\n!scanall\nSCAN 0 COUNT 5\n";
	assert_int_equal(script_parse(&s, "t", good, err, sizeof(err)), 0);
	assert_int_equal(s.n, 4);
	assert_true(s.cmds[0].skip);
	assert_false(s.cmds[1].skip);
	assert_true(s.cmds[3].scanall);
	script_free(&s);
}

static void test_reader_rejects_bad_quotes_and_directives(void **state)
{
	(void)state;
	script s;
	char err[256];
	assert_int_equal(script_parse(&s, "t", "SET \"a b\n", err, sizeof(err)), -EINVAL);
	assert_int_equal(script_parse(&s, "t", "SET \"a\"b c\n", err, sizeof(err)), -EINVAL);
	assert_int_equal(script_parse(&s, "t", "!bogus\nGET a\n", err, sizeof(err)), -EINVAL);
	assert_int_equal(script_parse(&s, "t", "GET a\n!skip\n", err, sizeof(err)), -EINVAL);
	assert_int_equal(script_parse(&s, "t", "!scanall\nGET a\n", err, sizeof(err)), -EINVAL);
}

static void test_sorting_compares_aggregates_as_multisets(void **state)
{
	(void)state;
	itest_buf a = { 0 }, b = { 0 };
	const char *x = "*3\r\n$1\r\nb\r\n$1\r\na\r\n$2\r\nab\r\n";
	const char *y = "*3\r\n$2\r\nab\r\n$1\r\nb\r\n$1\r\na\r\n";
	reply_sorted(x, strlen(x), &a);
	reply_sorted(y, strlen(y), &b);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.p, b.p, a.len);
	const char *m1 = "%2\r\n$1\r\nk\r\n$1\r\n1\r\n$1\r\nj\r\n$1\r\n2\r\n";
	const char *m2 = "%2\r\n$1\r\nj\r\n$1\r\n2\r\n$1\r\nk\r\n$1\r\n1\r\n";
	a.len = b.len = 0;
	reply_sorted(m1, strlen(m1), &a);
	reply_sorted(m2, strlen(m2), &b);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.p, b.p, a.len);
	a.len = b.len = 0;
	const char *z = "*2\r\n$1\r\na\r\n$1\r\nc\r\n";
	reply_sorted(x, strlen(x), &a);
	reply_sorted(z, strlen(z), &b);
	assert_false(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
	free(a.p);
	free(b.p);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	const struct CMUnitTest reader_tests[] = {
		cmocka_unit_test(test_reader_unescapes_redis_cli_quoting),
		cmocka_unit_test(test_reader_rejects_volatile_commands_without_skip),
		cmocka_unit_test(test_reader_rejects_bad_quotes_and_directives),
		cmocka_unit_test(test_sorting_compares_aggregates_as_multisets),
	};
	int failed = cmocka_run_group_tests(reader_tests, NULL, NULL);

	if (!itest_prog_present("redis-server", "redis-server"))
		return failed ? 1 : 77;
	const char *src = getenv("SPW_SRC");
	if (!src || !*src) {
		fprintf(stderr, "FAIL: SPW_SRC is not set (ctest sets it to the source folder)\n");
		return 1;
	}
	snprintf(g_diff_dir, sizeof(g_diff_dir), "%s/tests/integration/diff", src);
	DIR *d = opendir(g_diff_dir);
	if (!d) {
		fprintf(stderr, "FAIL: cannot open %s: %s\n", g_diff_dir, strerror(errno));
		return 1;
	}
	char *paths[256];
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 256) {
		size_t l = strlen(de->d_name);
		if (l > 4 && strcmp(de->d_name + l - 4, ".txt") == 0) {
			paths[n] = malloc(strlen(g_diff_dir) + l + 2);
			sprintf(paths[n], "%s/%s", g_diff_dir, de->d_name);
			n++;
		}
	}
	closedir(d);
	if (n == 0) {
		fprintf(stderr, "FAIL: no scripts in %s\n", g_diff_dir);
		return 1;
	}
	qsort(paths, (size_t)n, sizeof(char *), name_cmp);
	struct CMUnitTest *tests = calloc((size_t)n, sizeof(*tests));
	for (int i = 0; i < n; i++) {
		tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(
			test_script_replies_match_redis_byte_for_byte, paths[i]);
		const char *base = strrchr(paths[i], '/') + 1;
		char *tname = malloc(strlen(base) + 64);
		sprintf(tname, "test_script_%s_replies_match_redis_byte_for_byte", base);
		tests[i].name = tname;
	}
	failed += _cmocka_run_group_tests("differential_scripts", tests, (size_t)n, servers_start,
	                                  servers_stop);
	for (int i = 0; i < n; i++) {
		free((char *)tests[i].name);
		free(paths[i]);
	}
	free(tests);
	return failed ? 1 : 0;
}
