/*
 * test_resp.c - the request parser: pipelines split at every byte, inline quoting, Redis's exact
 * protocol errors, limits, the size hint, and random input that must never crash it.
 *
 * Expected argument lists and error texts were taken from redis-server 7.0.15 by sending it the
 * same bytes (printf ... | nc), so these tests pin Redis's behaviour, not ours.
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

/* ---------------- helpers ---------------- */

typedef struct sbuf {
	char *p;
	size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_addf(sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	sb_add(b, tmp, (size_t)n);
}

/* One request as text: "M2|3:SET,1:k,\n" (M multibulk, I inline; each argument length:bytes). */
static void record(sbuf *log, const resp_request *r)
{
	sb_addf(log, "%c%d|", r->is_inline ? 'I' : 'M', r->argc);
	for (int i = 0; i < r->argc; i++) {
		sb_addf(log, "%zu:", r->argv[i].len);
		sb_add(log, r->argv[i].ptr, r->argv[i].len);
		sb_add(log, ",", 1);
	}
	sb_add(log, "\n", 1);
}

/*
 * A simulated connection: the parser and a read buffer that moves to fresh memory every time bytes
 * are appended or dropped, as a server compacting its buffer would. A slice or offset kept from an
 * older buffer reads freed memory, which ASan reports.
 */
typedef struct sim {
	resp_parser p;
	char *buf;
	size_t len;
	sbuf log;
	int rc;
} sim;

static void sim_init(sim *s, const resp_limits *lim)
{
	memset(s, 0, sizeof(*s));
	resp_parser_init(&s->p, lim);
	s->buf = malloc(1);
}

static void sim_fini(sim *s)
{
	resp_parser_fini(&s->p);
	free(s->buf);
	free(s->log.p);
}

static void sim_move(sim *s, size_t drop, const char *add, size_t n)
{
	size_t keep = s->len - drop;
	char *nb = malloc(keep + n + 1);
	assert_non_null(nb);
	memcpy(nb, s->buf + drop, keep);
	if (n)
		memcpy(nb + keep, add, n);
	free(s->buf);
	s->buf = nb;
	s->len = keep + n;
}

/* Append bytes and parse until the parser wants more or fails. Returns the last result. */
static int sim_feed(sim *s, const char *data, size_t n)
{
	size_t off = 0;

	sim_move(s, 0, data, n);
	for (;;) {
		size_t used = 0;
		resp_request req;
		int rc = resp_request_parse(&s->p, s->buf + off, s->len - off, &used, &req);
		assert_true(used <= s->len - off);
		if (rc == RESP_OK) {
			assert_true(used > 0);
			assert_true(req.argc > 0);
			if (!req.is_inline) {
				/* Multibulk arguments are slices of this request's bytes (zero copy). */
				for (int i = 0; i < req.argc; i++) {
					assert_true(req.argv[i].ptr >= s->buf + off);
					assert_true(req.argv[i].ptr + req.argv[i].len <= s->buf + off + used);
				}
			}
			record(&s->log, &req);
			off += used;
			continue;
		}
		off += used;
		sim_move(s, off, NULL, 0);
		s->rc = rc;
		return rc;
	}
}

/* Parse all of [buf, buf+len) in one piece; returns the transcript (caller frees; its length in
 * *loglen when asked) and the last result in *rc. */
static char *parse_all_n(const char *buf, size_t len, const resp_limits *lim, int *rc, char *err,
                         size_t errlen, size_t *loglen)
{
	sim s;
	sim_init(&s, lim);
	*rc = sim_feed(&s, buf, len);
	if (err)
		snprintf(err, errlen, "%s", resp_parser_error(&s.p));
	char *out = s.log.p ? s.log.p : strdup("");
	if (loglen)
		*loglen = s.log.len;
	s.log.p = NULL;
	sim_fini(&s);
	return out;
}

static char *parse_all(const char *buf, size_t len, const resp_limits *lim, int *rc, char *err,
                       size_t errlen)
{
	return parse_all_n(buf, len, lim, rc, err, errlen, NULL);
}

/* ---------------- whole requests ---------------- */

static void test_parser_parses_one_multibulk_request_as_slices(void **state)
{
	(void)state;
	static const char in[] = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n";
	resp_parser p;
	resp_request req;
	size_t used = 0;

	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, in, sizeof(in) - 1, &used, &req), RESP_OK);
	assert_int_equal(used, sizeof(in) - 1);
	assert_int_equal(req.argc, 3);
	assert_false(req.is_inline);
	assert_ptr_equal(req.argv[0].ptr, in + 8);
	assert_memory_equal(req.argv[0].ptr, "SET", 3);
	assert_int_equal(req.argv[1].len, 3);
	assert_memory_equal(req.argv[1].ptr, "key", 3);
	assert_int_equal(req.argv[2].len, 5);
	assert_ptr_equal(req.argv[2].ptr, in + 26);
	assert_int_equal(resp_parser_hint(&p), 0);
	resp_parser_fini(&p);
}

static void test_parser_returns_pipelined_requests_one_per_call(void **state)
{
	(void)state;
	static const char in[] = "*1\r\n$4\r\nPING\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPI";
	resp_parser p;
	resp_request req;
	size_t used = 0, off = 0;

	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, in, sizeof(in) - 1, &used, &req), RESP_OK);
	assert_int_equal(used, 14);
	off += used;
	assert_int_equal(resp_request_parse(&p, in + off, sizeof(in) - 1 - off, &used, &req), RESP_OK);
	assert_true(req.is_inline);
	assert_int_equal(used, 6);
	off += used;
	assert_int_equal(resp_request_parse(&p, in + off, sizeof(in) - 1 - off, &used, &req), RESP_OK);
	assert_int_equal(req.argc, 2);
	assert_memory_equal(req.argv[1].ptr, "k", 1);
	off += used;
	assert_int_equal(resp_request_parse(&p, in + off, sizeof(in) - 1 - off, &used, &req),
	                 RESP_INCOMPLETE);
	assert_int_equal(used, 0);
	resp_parser_fini(&p);
}

static void test_parser_keeps_binary_arguments_with_crlf_inside(void **state)
{
	(void)state;
	static const char in[] = "*3\r\n$3\r\nSET\r\n$4\r\n\r\n\r\n\r\n$6\r\na\0\r\nb\n\r\n";
	int rc;
	size_t loglen;
	char *log = parse_all_n(in, sizeof(in) - 1, NULL, &rc, NULL, 0, &loglen);
	static const char want[] = "M3|3:SET,4:\r\n\r\n,6:a\0\r\nb\n,\n";
	assert_int_equal(rc, RESP_INCOMPLETE);
	assert_int_equal(loglen, sizeof(want) - 1);
	assert_memory_equal(log, want, sizeof(want) - 1);
	free(log);
}

static void test_parser_skips_empty_multibulk_and_blank_lines(void **state)
{
	(void)state;
	static const char in[] = "*0\r\n*-1\r\n\r\n  \t\n\n*-9223372036854775808\r\n";
	resp_parser p;
	resp_request req;
	size_t used = 123;

	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, in, sizeof(in) - 1, &used, &req), RESP_INCOMPLETE);
	assert_int_equal(used, sizeof(in) - 1);   /* all of it can be dropped */

	static const char in2[] = "*0\r\n\r\nPING\r\n";
	assert_int_equal(resp_request_parse(&p, in2, sizeof(in2) - 1, &used, &req), RESP_OK);
	assert_int_equal(used, sizeof(in2) - 1);   /* the skipped bytes count with the request */
	assert_int_equal(req.argc, 1);
	assert_memory_equal(req.argv[0].ptr, "PING", 4);
	resp_parser_fini(&p);
}

/* ---------------- every split point ---------------- */

static const char pipeline[] =
	"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"
	"PING\r\n"
	"\r\n"
	"*0\r\n"
	"  \n"
	"*1\r\n$4\r\nPING\r\n"
	"ECHO \"a\\x41\\n\\\"q\" 'it\\'s' plain\r\n"
	"*-1\r\n"
	"*2\r\n$4\r\nECHO\r\n$6\r\na\r\nb\r\n\r\n"
	"*3\r\n$3\r\nSET\r\n$0\r\n\r\n$10\r\n0123456789\r\n"
	"GET k\n"
	"*2\r\n$4\r\nECHO\r\n$12\r\nzero\0byte\r\n!\r\n"
	"*12\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n$1\r\nh\r\n"
	"$1\r\ni\r\n$1\r\nj\r\n$1\r\nk\r\n$2\r\nlm\r\n";

static const char pipeline_log[] =
	"M3|3:SET,3:key,5:value,\n"
	"I1|4:PING,\n"
	"M1|4:PING,\n"
	"I4|4:ECHO,5:aA\n\"q,4:it's,5:plain,\n"
	"M2|4:ECHO,6:a\r\nb\r\n,\n"
	"M3|3:SET,0:,10:0123456789,\n"
	"I2|3:GET,1:k,\n"
	"M2|4:ECHO,12:zero\0byte\r\n!,\n"
	"M12|1:a,1:b,1:c,1:d,1:e,1:f,1:g,1:h,1:i,1:j,1:k,2:lm,\n";

static void assert_log(const sbuf *log, const char *want, size_t wlen)
{
	assert_int_equal(log->len, wlen);
	assert_memory_equal(log->p, want, wlen);
}

static void test_parser_gives_the_same_requests_whole_or_split(void **state)
{
	(void)state;
	const size_t n = sizeof(pipeline) - 1;
	int rc;
	char *whole = parse_all(pipeline, n, NULL, &rc, NULL, 0);
	assert_int_equal(rc, RESP_INCOMPLETE);
	assert_memory_equal(whole, pipeline_log, sizeof(pipeline_log) - 1);
	free(whole);

	/* The prefix [0,k), then the rest: what was logged after the prefix is a prefix of the log. */
	for (size_t k = 0; k <= n; k++) {
		sim s;
		sim_init(&s, NULL);
		assert_int_equal(sim_feed(&s, pipeline, k), RESP_INCOMPLETE);
		assert_true(s.log.len <= sizeof(pipeline_log) - 1);
		if (s.log.len)
			assert_memory_equal(s.log.p, pipeline_log, s.log.len);
		assert_int_equal(sim_feed(&s, pipeline + k, n - k), RESP_INCOMPLETE);
		assert_log(&s.log, pipeline_log, sizeof(pipeline_log) - 1);
		assert_int_equal(s.len, 0);
		sim_fini(&s);
	}
}

static void test_parser_gives_the_same_requests_split_twice_anywhere(void **state)
{
	(void)state;
	const size_t n = sizeof(pipeline) - 1;
	for (size_t i = 0; i <= n; i += 3) {
		for (size_t j = i; j <= n; j++) {
			sim s;
			sim_init(&s, NULL);
			sim_feed(&s, pipeline, i);
			sim_feed(&s, pipeline + i, j - i);
			assert_int_equal(sim_feed(&s, pipeline + j, n - j), RESP_INCOMPLETE);
			assert_log(&s.log, pipeline_log, sizeof(pipeline_log) - 1);
			sim_fini(&s);
		}
	}
}

static void test_parser_gives_the_same_requests_in_random_chunks(void **state)
{
	(void)state;
	const size_t n = sizeof(pipeline) - 1;
	srand(1234);
	for (int iter = 0; iter < 2000; iter++) {
		sim s;
		size_t off = 0;
		int maxchunk = 1 + rand() % (iter % 2 ? 8 : 64);
		sim_init(&s, NULL);
		while (off < n) {
			size_t c = 1 + (size_t)(rand() % maxchunk);
			if (c > n - off)
				c = n - off;
			assert_int_equal(sim_feed(&s, pipeline + off, c), RESP_INCOMPLETE);
			off += c;
		}
		assert_log(&s.log, pipeline_log, sizeof(pipeline_log) - 1);
		sim_fini(&s);
	}
}

/* Random requests with random binary arguments, encoded as multibulk, read in random chunks. */
static void test_parser_round_trips_random_binary_requests(void **state)
{
	(void)state;
	srand(99);
	for (int iter = 0; iter < 300; iter++) {
		sbuf wire = { 0 }, want = { 0 };
		int nreq = 1 + rand() % 6;
		for (int r = 0; r < nreq; r++) {
			int argc = 1 + rand() % (r == 0 ? 40 : 5);
			sb_addf(&wire, "*%d\r\n", argc);
			sb_addf(&want, "M%d|", argc);
			for (int a = 0; a < argc; a++) {
				size_t len = (size_t)(rand() % 4 == 0 ? rand() % 3000 : rand() % 12);
				char *arg = malloc(len + 1);
				for (size_t i = 0; i < len; i++)
					arg[i] = "\r\n*$\0ab"[rand() % 7];
				sb_addf(&wire, "$%zu\r\n", len);
				sb_add(&wire, arg, len);
				sb_add(&wire, "\r\n", 2);
				sb_addf(&want, "%zu:", len);
				sb_add(&want, arg, len);
				sb_add(&want, ",", 1);
				free(arg);
			}
			sb_add(&want, "\n", 1);
		}
		sim s;
		size_t off = 0;
		sim_init(&s, NULL);
		while (off < wire.len) {
			size_t c = 1 + (size_t)(rand() % 700);
			if (c > wire.len - off)
				c = wire.len - off;
			assert_int_equal(sim_feed(&s, wire.p + off, c), RESP_INCOMPLETE);
			off += c;
		}
		assert_log(&s.log, want.p, want.len);
		sim_fini(&s);
		free(wire.p);
		free(want.p);
	}
}

static void test_parser_grows_and_shrinks_its_argument_arrays(void **state)
{
	(void)state;
	for (int round = 0; round < 2; round++) {
		int widths[] = { 1, 17, 100, 3000, 2 };
		for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
			sbuf wire = { 0 };
			sb_addf(&wire, "*%d\r\n", widths[w]);
			for (int a = 0; a < widths[w]; a++)
				sb_addf(&wire, "$%d\r\n%d\r\n", a < 10 ? 1 : a < 100 ? 2 : a < 1000 ? 3 : 4, a);
			resp_parser p;
			resp_request req;
			size_t used;
			resp_parser_init(&p, NULL);
			assert_int_equal(resp_request_parse(&p, wire.p, wire.len, &used, &req), RESP_OK);
			assert_int_equal(req.argc, widths[w]);
			char num[16];
			int nl = snprintf(num, sizeof(num), "%d", widths[w] - 1);
			assert_int_equal(req.argv[widths[w] - 1].len, nl);
			assert_memory_equal(req.argv[widths[w] - 1].ptr, num, (size_t)nl);
			/* The same parser takes a narrow request after a wide one. */
			assert_int_equal(resp_request_parse(&p, "*1\r\n$1\r\nx\r\n", 11, &used, &req), RESP_OK);
			assert_int_equal(req.argc, 1);
			assert_memory_equal(req.argv[0].ptr, "x", 1);
			resp_parser_fini(&p);
			free(wire.p);
		}
	}
}

/* ---------------- inline ---------------- */

typedef struct inline_case {
	const char *in;
	size_t inlen;
	const char *log;    /* expected transcript, or NULL for the unbalanced-quotes error */
	size_t loglen;
} inline_case;

#define IC(in, log) { in, sizeof(in) - 1, log, sizeof(log) - 1 }
#define IC_BAD(in)  { in, sizeof(in) - 1, NULL, 0 }

static void test_parser_splits_inline_commands_as_redis_does(void **state)
{
	(void)state;
	static const inline_case cases[] = {
		IC("PING\n", "I1|4:PING,\n"),
		IC("PING\r\n", "I1|4:PING,\n"),
		IC(" PING\t\r\n", "I1|4:PING,\n"),
		IC("a\tb  c\n", "I3|1:a,1:b,1:c,\n"),
		IC("ECHO \"a\\x41\\n\\\"q\"\r\n", "I2|4:ECHO,5:aA\n\"q,\n"),
		IC("ECHO  \"\\x41\\x4a\\x4A\"\r\n", "I2|4:ECHO,3:AJJ,\n"),
		IC("ECHO 'a\\'b' c\r\n", "I3|4:ECHO,3:a'b,1:c,\n"),
		IC("ECHO 'a\\nb'\r\n", "I2|4:ECHO,4:a\\nb,\n"),
		IC("ECHO a\vb\r\n", "I2|4:ECHO,3:a\vb,\n"),
		IC("ECHO \va\r\n", "I2|4:ECHO,1:a,\n"),
		IC("ECHO a\rb\r\n", "I3|4:ECHO,1:a,1:b,\n"),
		IC("ECHO \"a\" \r\n", "I2|4:ECHO,1:a,\n"),
		IC("ECHO \"a\"\t\r\n", "I2|4:ECHO,1:a,\n"),
		IC("ECHO \"a\"\vx\r\n", "I3|4:ECHO,1:a,1:x,\n"),
		IC("ECHO \"\"\r\n", "I2|4:ECHO,0:,\n"),
		IC("ECHO ''\r\n", "I2|4:ECHO,0:,\n"),
		IC("ECHO \"\\xzz\"\r\n", "I2|4:ECHO,3:xzz,\n"),
		IC("ECHO \"\\x4\"\r\n", "I2|4:ECHO,2:x4,\n"),
		IC("ECHO \"\\b\\a\\r\\q\"\r\n", "I2|4:ECHO,4:\b\a\rq,\n"),
		IC("ECHO \"a\\\\\"\r\n", "I2|4:ECHO,2:a\\,\n"),
		IC("ECHO a\"b c\" d\r\n", "I3|4:ECHO,4:ab c,1:d,\n"),
		IC("SET k \"x\\r\\ny\" \r\n", "I3|3:SET,1:k,4:x\r\ny,\n"),
		IC("ECHO \r\r\n", "I1|4:ECHO,\n"),
		/* A NUL ends the line's content, as for the C string sdssplitargs reads. (Redis itself
		 * never answers such a line: its strchr for '\n' stops at the NUL.) */
		IC("ECHO a\0b\r\n", "I2|4:ECHO,1:a,\n"),
		IC_BAD("PING \"a\r\n"),
		IC_BAD("PING 'a\r\n"),
		IC_BAD("PING 'a'b\r\n"),
		IC_BAD("ECHO a\"b c\"d\r\n"),
		IC_BAD("ECHO \"a\\\r\n"),
		IC_BAD("ECHO \"a\\\"\n"),
		IC_BAD("ECHO 'a\\'\n"),
		IC_BAD("ECHO \"a\0\"\n"),
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;
		char err[128];
		size_t loglen;
		char *log = parse_all_n(cases[i].in, cases[i].inlen, NULL, &rc, err, sizeof(err), &loglen);
		if (cases[i].log) {
			assert_int_equal(rc, RESP_INCOMPLETE);
			assert_int_equal(loglen, cases[i].loglen);
			assert_memory_equal(log, cases[i].log, cases[i].loglen);
		} else {
			assert_int_equal(rc, RESP_EPROTO);
			assert_string_equal(err, "Protocol error: unbalanced quotes in request");
		}
		free(log);
	}
}

static void test_parser_unescapes_quoted_inline_args_into_its_own_buffer(void **state)
{
	(void)state;
	/* Quoted arguments live in the parser; plain ones are slices of the line. */
	char *line = strdup("SET \"k\\x20y\" plain\r\n");
	resp_parser p;
	resp_request req;
	size_t used;
	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, line, strlen(line), &used, &req), RESP_OK);
	assert_true(req.is_inline);
	assert_int_equal(req.argc, 3);
	assert_true(req.argv[0].ptr == line);
	assert_false(req.argv[1].ptr >= line && req.argv[1].ptr < line + strlen(line));
	assert_memory_equal(req.argv[1].ptr, "k y", 3);
	assert_true(req.argv[2].ptr == line + 13);
	free(line);
	resp_parser_fini(&p);
}

/* ---------------- errors and limits ---------------- */

typedef struct err_case {
	const char *in;
	size_t inlen;
	const char *err;
} err_case;

#define EC(in, err) { in, sizeof(in) - 1, err }

static void test_parser_reports_redis_protocol_error_texts(void **state)
{
	(void)state;
	static const char mb[] = "Protocol error: invalid multibulk length";
	static const char bl[] = "Protocol error: invalid bulk length";
	static const err_case cases[] = {
		EC("*2147483648\r\n", mb),
		EC("*9223372036854775808\r\n", mb),
		EC("*-9223372036854775809\r\n", mb),
		EC("*-0\r\n", mb),
		EC("*00\r\n", mb),
		EC("*01\r\n", mb),
		EC("*+1\r\n", mb),
		EC("*\r\n", mb),
		EC("*1x\r\n", mb),
		EC("* 1\r\n", mb),
		EC("*3\n$3\r\n", mb),
		EC("*1\r\n$-1\r\n", bl),
		EC("*1\r\n$01\r\n", bl),
		EC("*1\r\n$+1\r\n", bl),
		EC("*1\r\n$\r\n", bl),
		EC("*1\r\n$536870913\r\n", bl),
		EC("*1\r\n$99999999999999999999\r\n", bl),
		EC("*1\r\nX\r\n", "Protocol error: expected '$', got 'X'"),
		EC("*1\r\n\r\r\n", "Protocol error: expected '$', got ' '"),
		EC("*1\r\n$4\r\nPING\r\n*1\r\n\n\r\n", "Protocol error: expected '$', got ' '"),
		EC("*2\r\n$3\r\nfoo\r\n:1\r\n", "Protocol error: expected '$', got ':'"),
		/* The two bytes after a payload are skipped unchecked, as Redis does. */
		EC("*2\r\n$3\r\nfoobar\r\n", "Protocol error: expected '$', got 'r'"),
		EC("PING \"a\r\n", "Protocol error: unbalanced quotes in request"),
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc;
		char err[128];
		char *log = parse_all(cases[i].in, cases[i].inlen, NULL, &rc, err, sizeof(err));
		assert_int_equal(rc, RESP_EPROTO);
		assert_string_equal(err, cases[i].err);
		free(log);
	}
}

/* Redis answers these only once more than 64 KiB sit without a line end (PROTO_INLINE_MAX_SIZE). */
static void test_parser_refuses_lines_longer_than_64k(void **state)
{
	(void)state;
	const size_t max = RESP_INLINE_MAX;
	char *b = malloc(max + 16);
	int rc;
	char err[128];
	char *log;

	/* "*" and 65535 digits: still waiting; one more byte: too big. */
	b[0] = '*';
	memset(b + 1, '1', max);
	log = parse_all(b, max, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	free(log);
	log = parse_all(b, max + 1, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: too big mbulk count string");
	free(log);

	/* "*1\r\n$" and digits, counted from the '$'. */
	memcpy(b, "*1\r\n$", 5);
	memset(b + 5, '1', max);
	log = parse_all(b, 4 + max, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	free(log);
	log = parse_all(b, 5 + max, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: too big bulk count string");
	free(log);

	/* A complete header line of 64 KiB is a bad number, not a long line. */
	memset(b + 5, '0', max - 1);
	memcpy(b + 4 + max, "\r\n", 2);
	log = parse_all(b, 6 + max, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: invalid bulk length");
	free(log);

	/* Inline: 65536 bytes without '\n' wait; 65537 are refused, even when the '\n' follows. */
	memset(b, 'P', max + 1);
	log = parse_all(b, max, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	free(log);
	log = parse_all(b, max + 1, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: too big inline request");
	free(log);
	b[max + 1] = '\n';
	log = parse_all(b, max + 2, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: too big inline request");
	free(log);
	b[max] = '\n';
	log = parse_all(b, max + 1, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	assert_int_equal(strlen(log), strlen("I1|65536:,\n") + max);
	free(log);
	free(b);
}

static void test_parser_honours_max_bulk_len(void **state)
{
	(void)state;
	resp_limits lim = { .max_bulk_len = 10, .max_querybuf = 0 };
	int rc;
	char err[128];
	char *log = parse_all("*1\r\n$10\r\n0123456789\r\n", 22, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	assert_string_equal(log, "M1|10:0123456789,\n");
	free(log);
	log = parse_all("*1\r\n$11\r\n", 9, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EPROTO);
	assert_string_equal(err, "Protocol error: invalid bulk length");
	free(log);
	/* The default is Redis's 512 MB. */
	log = parse_all("*1\r\n$536870912\r\n", 17, NULL, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	free(log);
}

static void test_parser_closes_silently_past_the_query_buffer_limit(void **state)
{
	(void)state;
	resp_limits lim = { .max_bulk_len = 0, .max_querybuf = 1000 };
	int rc;
	char err[128];
	char big[1200];
	char *log;

	/* A bulk that announces more than the limit: refused before its bytes arrive. */
	log = parse_all("*2\r\n$3\r\nSET\r\n$990\r\n", 19, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EQUERYBUF);
	assert_string_equal(err, "query buffer limit reached");
	assert_null(strstr(err, "Protocol error"));
	free(log);

	/* Many small arguments, still incomplete, past the limit. */
	size_t n = (size_t)snprintf(big, sizeof(big), "*1000\r\n");
	while (n + 7 < sizeof(big))
		n += (size_t)snprintf(big + n, sizeof(big) - n, "$1\r\nx\r\n");
	log = parse_all(big, n, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EQUERYBUF);
	assert_string_equal(err, "query buffer limit reached");
	free(log);

	/* An inline line past the limit (but within 64 KiB). */
	memset(big, 'a', sizeof(big));
	log = parse_all(big, 1001, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_EQUERYBUF);
	assert_string_equal(err, "query buffer limit reached");
	free(log);

	/* Requests under the limit pass, however many are pipelined. */
	for (n = 0; n + 6 <= sizeof(big); n += 6)
		memcpy(big + n, "PING\r\n", 6);
	log = parse_all(big, n, &lim, &rc, err, sizeof(err));
	assert_int_equal(rc, RESP_INCOMPLETE);
	assert_int_equal(strlen(log), (n / 6) * strlen("I1|4:PING,\n"));
	free(log);
}

static void test_parser_answers_requests_before_the_bad_one_and_stays_failed(void **state)
{
	(void)state;
	static const char in[] = "PING\r\n*1\r\nX\r\n";
	resp_parser p;
	resp_request req;
	size_t used;

	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, in, sizeof(in) - 1, &used, &req), RESP_OK);
	assert_int_equal(used, 6);
	assert_int_equal(resp_request_parse(&p, in + 6, sizeof(in) - 7, &used, &req), RESP_EPROTO);
	assert_string_equal(resp_parser_error(&p), "Protocol error: expected '$', got 'X'");
	/* Sticky: more bytes change nothing until the caller resets. */
	assert_int_equal(resp_request_parse(&p, "PING\r\n", 6, &used, &req), RESP_EPROTO);
	assert_int_equal(used, 0);
	resp_parser_reset(&p);
	assert_int_equal(resp_request_parse(&p, "PING\r\n", 6, &used, &req), RESP_OK);
	assert_int_equal(req.argc, 1);
	resp_parser_fini(&p);
}

/* ---------------- hint ---------------- */

static void test_parser_hints_the_size_of_a_big_bulk_request(void **state)
{
	(void)state;
	static const char pre[] = "PING\r\n";
	static const char hdr[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n";
	const size_t hl = sizeof(hdr) - 1, total = hl + 100000 + 2;
	char *wire = malloc(6 + total);
	memcpy(wire, pre, 6);
	memcpy(wire + 6, hdr, hl);
	for (size_t i = 0; i < 100000; i++)
		wire[6 + hl + i] = (char)('a' + i % 26);
	memcpy(wire + 6 + hl + 100000, "\r\n", 2);

	resp_parser p;
	resp_request req;
	size_t used;
	resp_parser_init(&p, NULL);
	assert_int_equal(resp_request_parse(&p, wire, 6, &used, &req), RESP_OK);
	/* The SET arrives in pieces; the hint is counted from the request's first byte. */
	const char *b = wire + 6;
	assert_int_equal(resp_request_parse(&p, b, hl - 3, &used, &req), RESP_INCOMPLETE);
	assert_int_equal(used, 0);
	assert_int_equal(resp_parser_hint(&p), 0);   /* the length is not known yet */
	size_t have[] = { hl, hl + 1, hl + 5000, hl + 99999, total - 1 };
	for (size_t i = 0; i < sizeof(have) / sizeof(have[0]); i++) {
		/* Each time in a freshly moved buffer, as after the caller grew its buffer to the hint. */
		char *moved = malloc(have[i]);
		memcpy(moved, b, have[i]);
		assert_int_equal(resp_request_parse(&p, moved, have[i], &used, &req), RESP_INCOMPLETE);
		assert_int_equal(used, 0);
		assert_int_equal(resp_parser_hint(&p), total);
		free(moved);
	}
	char *moved = malloc(total);
	memcpy(moved, b, total);
	assert_int_equal(resp_request_parse(&p, moved, total, &used, &req), RESP_OK);
	assert_int_equal(used, total);
	assert_int_equal(req.argc, 3);
	assert_int_equal(req.argv[2].len, 100000);
	assert_memory_equal(req.argv[2].ptr, b + hl, 100000);
	assert_int_equal(resp_parser_hint(&p), 0);
	free(moved);
	free(wire);
	resp_parser_fini(&p);
}

/* ---------------- robustness ---------------- */

static void fuzz_one(const char *data, size_t n, const resp_limits *lim, int maxchunk)
{
	sim s;
	size_t off = 0;
	sim_init(&s, lim);
	while (off < n) {
		size_t c = 1 + (size_t)(rand() % maxchunk);
		if (c > n - off)
			c = n - off;
		int rc = sim_feed(&s, data + off, c);
		assert_true(rc == RESP_INCOMPLETE || rc == RESP_EPROTO);
		if (rc == RESP_EPROTO) {
			assert_true(strlen(resp_parser_error(&s.p)) > 0);
			break;
		}
		off += c;
	}
	sim_fini(&s);
}

static void test_parser_survives_random_garbage_and_truncations(void **state)
{
	(void)state;
	static const char alpha[] = "*$\r\n0123456789-+ \t\"'\\xaZ\0\v";
	resp_limits lim = { .max_bulk_len = 4096, .max_querybuf = 8192 };
	char buf[512];

	srand(4242);
	for (int iter = 0; iter < 20000; iter++) {
		size_t n = (size_t)(rand() % (int)sizeof(buf));
		for (size_t i = 0; i < n; i++)
			buf[i] = rand() % 4 ? alpha[rand() % (sizeof(alpha) - 1)] : (char)rand();
		/* Protocol-shaped starts reach deeper states. */
		if (n > 4 && iter % 3 == 0)
			memcpy(buf, "*3\r\n$", 5);
		fuzz_one(buf, n, &lim, 1 + rand() % 64);
	}
	/* The valid pipeline with random bytes flipped, and cut anywhere. */
	const size_t pn = sizeof(pipeline) - 1;
	for (int iter = 0; iter < 5000; iter++) {
		memcpy(buf, pipeline, pn);
		int flips = 1 + rand() % 3;
		for (int f = 0; f < flips; f++)
			buf[rand() % pn] = rand() % 2 ? alpha[rand() % (sizeof(alpha) - 1)] : (char)rand();
		fuzz_one(buf, (size_t)rand() % (pn + 1), iter % 2 ? &lim : NULL, 1 + rand() % 16);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parser_parses_one_multibulk_request_as_slices),
		cmocka_unit_test(test_parser_returns_pipelined_requests_one_per_call),
		cmocka_unit_test(test_parser_keeps_binary_arguments_with_crlf_inside),
		cmocka_unit_test(test_parser_skips_empty_multibulk_and_blank_lines),
		cmocka_unit_test(test_parser_gives_the_same_requests_whole_or_split),
		cmocka_unit_test(test_parser_gives_the_same_requests_split_twice_anywhere),
		cmocka_unit_test(test_parser_gives_the_same_requests_in_random_chunks),
		cmocka_unit_test(test_parser_round_trips_random_binary_requests),
		cmocka_unit_test(test_parser_grows_and_shrinks_its_argument_arrays),
		cmocka_unit_test(test_parser_splits_inline_commands_as_redis_does),
		cmocka_unit_test(test_parser_unescapes_quoted_inline_args_into_its_own_buffer),
		cmocka_unit_test(test_parser_reports_redis_protocol_error_texts),
		cmocka_unit_test(test_parser_refuses_lines_longer_than_64k),
		cmocka_unit_test(test_parser_honours_max_bulk_len),
		cmocka_unit_test(test_parser_closes_silently_past_the_query_buffer_limit),
		cmocka_unit_test(test_parser_answers_requests_before_the_bad_one_and_stays_failed),
		cmocka_unit_test(test_parser_hints_the_size_of_a_big_bulk_request),
		cmocka_unit_test(test_parser_survives_random_garbage_and_truncations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
