/*
 * resp_parse.c - the request parser: one state machine over a connection's read buffer.
 *
 * NOTES ON THE DESIGN OF THE PARSER
 *
 *  1. Offsets, never pointers, survive a call. Between two calls the caller may move the unparsed
 *     bytes (compact or grow its buffer), so everything the parser remembers about a request in
 *     progress (p->pos, p->scan, p->arg_off[]) is an offset from the request's first byte, which is
 *     buf + 0 on the next call. Slices are built from those offsets only when the request is whole.
 *  2. No byte is scanned twice across calls for bulk payloads: p->pos is the first unparsed byte of
 *     the request, and a bulk whose payload has not fully arrived costs one length compare per call.
 *     Header lines ("*3", "$5") are re-searched from their start, which is bounded by RESP_INLINE_MAX
 *     as in Redis; inline lines resume their '\n' search at p->scan.
 *  3. States and transitions (all in resp_request_parse and its two helpers):
 *
 *        IDLE --'*'--> COUNT --n>0--> BULK_HDR <--> BULK_DATA --last arg--> IDLE (RESP_OK)
 *          |             `--n<=0 (skipped)----------------------------------> IDLE
 *          `--other--> INLINE --line--> IDLE (RESP_OK, or skipped when it has no argument)
 *        any state --bad input--> ERROR (sticky until resp_parser_reset)
 *
 *  4. Byte compatibility with Redis 7 (src/networking.c processMultibulkBuffer/processInlineBuffer):
 *     the request type is chosen by its first byte; a header line ends at the first '\r' and needs
 *     one more byte, which is not checked to be '\n'; the two bytes after a bulk payload are skipped
 *     unchecked; counts and lengths parse as string2ll (spw_parse_ll); a count <= 0 is an empty
 *     request; an inline line ends at '\n' with one '\r' before it stripped, and splits as
 *     sdssplitargs (resp_args_split, resp_split.c; a NUL ends the line's content, as it does for the
 *     C string sdssplitargs walks). Error texts are Redis's, with '\r' and '\n' shown as spaces as
 *     addReplyErrorFormat does.
 *  5. "too big" limits are applied to a line's length, not to how the bytes happened to arrive:
 *     Redis checks the unparsed bytes after each read of at most 16 KiB, so a line longer than
 *     RESP_INLINE_MAX is refused by Redis whatever the read sizes; we refuse it even when it arrives
 *     whole in one large read, so that the outcome does not depend on timing.
 *  6. Hot path: a request that arrived whole is parsed in one pass: a header costs a digit loop and
 *     no memchr in the usual case, an argument two stores, and nothing is allocated once the
 *     argument arrays have grown to the connection's widest request (they shrink back after an
 *     unusually wide one, so one MSET of a million keys does not pin memory for the connection's life).
 *
 * Sections: parser state; header lines; multibulk requests; inline requests; resp_request_parse.
 */
#include "proto/resp.h"
#include "common/spw.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	RESP_ST_IDLE = 0,
	RESP_ST_COUNT,      /* at the "*<n>\r\n" line (pos 0) */
	RESP_ST_BULK_HDR,   /* at a "$<len>\r\n" line (pos) */
	RESP_ST_BULK_DATA,  /* at a bulk payload of p->bulk bytes (pos) */
	RESP_ST_INLINE,     /* searching the inline line's '\n' (scan) */
	RESP_ST_ERROR,
};

#define RESP_ARGV_INIT  16
#define RESP_ARGV_KEEP  1024            /* wider arrays are freed when the next request starts */

static const char resp_err_mbulk_len[] = "Protocol error: invalid multibulk length";
static const char resp_err_bulk_len[] = "Protocol error: invalid bulk length";
static const char resp_err_mbulk_big[] = "Protocol error: too big mbulk count string";
static const char resp_err_bulk_big[] = "Protocol error: too big bulk count string";
static const char resp_err_inline_big[] = "Protocol error: too big inline request";
static const char resp_err_quotes[] = "Protocol error: unbalanced quotes in request";
static const char resp_err_querybuf[] = "query buffer limit reached";

/* ---------------- parser state ---------------- */

void resp_parser_init(resp_parser *p, const resp_limits *limits)
{
	memset(p, 0, sizeof(*p));
	p->bulk = -1;
	p->limits.max_bulk_len = RESP_MAX_BULK_DEFAULT;
	p->limits.max_querybuf = RESP_MAX_QUERYBUF_DEFAULT;
	/* A zero field means "default", so a caller may set only one of them. */
	if (limits && limits->max_bulk_len)
		p->limits.max_bulk_len = limits->max_bulk_len;
	if (limits && limits->max_querybuf)
		p->limits.max_querybuf = limits->max_querybuf;
}

static void resp_parser_free_args(resp_parser *p)
{
	free(p->arg_off);
	free(p->argv);
	p->arg_off = NULL;
	p->argv = NULL;
	p->argv_cap = 0;
}

void resp_parser_fini(resp_parser *p)
{
	resp_parser_free_args(p);
	free(p->inline_buf);
	p->inline_buf = NULL;
	p->inline_cap = 0;
}

void resp_parser_reset(resp_parser *p)
{
	p->state = RESP_ST_IDLE;
	p->is_inline = 0;
	p->multibulk = 0;
	p->bulk = -1;
	p->pos = 0;
	p->hint = 0;
	p->scan = 0;
	p->argc = 0;
	p->error = NULL;
}

size_t resp_parser_hint(const resp_parser *p)
{
	return p->hint;
}

const char *resp_parser_error(const resp_parser *p)
{
	return p->error ? p->error : "";
}

/* Make room for one more argument in both arrays (they share argv_cap). -ENOMEM or 0. */
static int resp_parser_grow(resp_parser *p)
{
	int cap = p->argv_cap ? p->argv_cap * 2 : RESP_ARGV_INIT;
	size_t *off;
	resp_slice *argv;

	if (p->argv_cap > INT_MAX / 2)
		return -ENOMEM;
	off = realloc(p->arg_off, (size_t)cap * sizeof(*off));
	if (!off)
		return -ENOMEM;
	p->arg_off = off;
	argv = realloc(p->argv, (size_t)cap * sizeof(*argv));
	if (!argv)
		return -ENOMEM;
	p->argv = argv;
	p->argv_cap = cap;
	return 0;
}

/* Enter the sticky error state with msg; every later call returns rc again. */
static int resp_parser_fail_rc(resp_parser *p, const char *msg, int rc)
{
	p->error = msg;
	p->error_rc = rc;
	p->state = RESP_ST_ERROR;
	p->hint = 0;
	return rc;
}

static int resp_parser_fail(resp_parser *p, const char *msg)
{
	return resp_parser_fail_rc(p, msg, msg == resp_err_querybuf ? RESP_EQUERYBUF : RESP_EPROTO);
}

/* ---------------- header lines ---------------- */

/* Header line results. */
enum { HDR_OK, HDR_MORE, HDR_LONG, HDR_BADTYPE, HDR_BADNUM };

/* The general case of resp_hdr_parse: find the line's '\r' as Redis does (strchr from the type byte),
 * then check the type and parse the number strictly. */
static int resp_hdr_parse_slow(const char *b, size_t n, size_t pos, char type, long long *v,
                               size_t *next /* out */)
{
	const char *cr = memchr(b + pos, '\r', n - pos);
	size_t at;

	if (!cr)
		return n - pos > RESP_INLINE_MAX ? HDR_LONG : HDR_MORE;
	at = (size_t)(cr - b);
	if (at - pos > RESP_INLINE_MAX)   /* note 5 */
		return HDR_LONG;
	if (at + 1 >= n)                  /* the byte after '\r' (meant to be '\n') is not here yet */
		return HDR_MORE;
	if (b[pos] != type)
		return HDR_BADTYPE;
	if (!spw_parse_ll(b + pos + 1, at - pos - 1, v))
		return HDR_BADNUM;
	*next = at + 2;
	return HDR_OK;
}

/*
 * Parse the header line "<type><integer>\r?" at b[pos]. HDR_OK sets *v and *next (the offset after
 * the line). The fast path takes the usual "$3\r\n": the right type, up to 18 digits without a
 * leading zero (so no overflow check), then '\r' and one more byte.
 */
static inline int resp_hdr_parse(const char *b, size_t n, size_t pos, char type, long long *v,
                                 size_t *next /* out */)
{
	const char *s = b + pos + 1, *end = b + n;

	if (SPW_LIKELY(pos < n && b[pos] == type && s < end && (unsigned)(*s - '0') < 10)) {
		const char *d = s, *lim = end - s > 18 ? s + 18 : end;
		uint64_t x = 0;
		while (s < lim && (unsigned)(*s - '0') < 10)
			x = x * 10 + (uint64_t)(*s++ - '0');
		if (SPW_LIKELY(s + 1 < end && *s == '\r' && (d[0] != '0' || s == d + 1))) {
			*v = (long long)x;
			*next = (size_t)(s + 2 - b);
			return HDR_OK;
		}
	}
	if (pos >= n)
		return HDR_MORE;
	return resp_hdr_parse_slow(b, n, pos, type, v, next);
}

/* ---------------- multibulk requests ---------------- */

/*
 * Multibulk request starting at b[0]; n bytes available. RESP_OK with *used set (req->argc == 0 for
 * an empty request), RESP_INCOMPLETE with the progress in p, or an error. The loop works on local
 * copies of the parser's fields and writes them back when it stops: the build's
 * -fno-strict-aliasing would otherwise reload them after every store to the argument arrays.
 */
static int resp_parse_multibulk(resp_parser *p, const char *b, size_t n, size_t *used /* out */,
                                resp_request *req /* out */)
{
	size_t pos = p->pos, next = 0;
	long long ll = 0, bulk = p->bulk, want = p->multibulk;
	int argc = p->argc, state = p->state, rc;

	if (SPW_UNLIKELY(pos > n))   /* the caller handed fewer bytes than last time */
		return resp_parser_fail_rc(p, "parser misuse: the request in progress lost bytes", -EINVAL);

	if (state == RESP_ST_COUNT) {
		rc = resp_hdr_parse(b, n, 0, '*', &ll, &next);
		if (SPW_UNLIKELY(rc != HDR_OK)) {
			if (rc == HDR_MORE)
				return RESP_INCOMPLETE;
			return resp_parser_fail(p, rc == HDR_LONG ? resp_err_mbulk_big : resp_err_mbulk_len);
		}
		if (SPW_UNLIKELY(ll > INT_MAX))
			return resp_parser_fail(p, resp_err_mbulk_len);
		if (SPW_UNLIKELY(ll <= 0)) {     /* "*0", "*-1": an empty request, skipped */
			*used = next;
			req->argc = 0;
			return RESP_OK;
		}
		want = ll;
		argc = 0;
		state = RESP_ST_BULK_HDR;
		pos = next;
	}

	while (argc < want) {
		if (state == RESP_ST_BULK_HDR) {
			rc = resp_hdr_parse(b, n, pos, '$', &ll, &next);
			if (SPW_UNLIKELY(rc != HDR_OK)) {
				if (rc == HDR_MORE)
					goto incomplete;
				if (rc == HDR_LONG)
					return resp_parser_fail(p, resp_err_bulk_big);
				if (rc == HDR_BADNUM)
					return resp_parser_fail(p, resp_err_bulk_len);
				/* HDR_BADTYPE: Redis formats the byte with %c and maps CR/LF to spaces. A NUL
				 * would end our C string, so it is shown as a space too (Redis, whose strchr
				 * stops at NUL, never answers that case at all). */
				char c = b[pos];
				if (c == '\r' || c == '\n' || c == '\0')
					c = ' ';
				snprintf(p->errbuf, sizeof(p->errbuf), "Protocol error: expected '$', got '%c'", c);
				return resp_parser_fail(p, p->errbuf);
			}
			if (SPW_UNLIKELY(ll < 0 || (uint64_t)ll > p->limits.max_bulk_len))
				return resp_parser_fail(p, resp_err_bulk_len);
			if (SPW_UNLIKELY((uint64_t)next + (uint64_t)ll + 2 > p->limits.max_querybuf))
				return resp_parser_fail(p, resp_err_querybuf);
			bulk = ll;
			state = RESP_ST_BULK_DATA;
			pos = next;
		}
		/* RESP_ST_BULK_DATA: the payload and the two bytes after it (not checked, as Redis). */
		size_t need = (size_t)bulk + 2;
		if (n - pos < need)
			goto incomplete;
		if (SPW_UNLIKELY(argc == p->argv_cap) && resp_parser_grow(p) < 0)
			return -ENOMEM;
		p->arg_off[argc] = pos;
		p->argv[argc].len = (size_t)bulk;   /* a length survives the buffer moving; ptr is set last */
		argc++;
		pos += need;
		state = RESP_ST_BULK_HDR;
	}

	resp_slice *argv = p->argv;
	const size_t *off = p->arg_off;
	for (int i = 0; i < argc; i++)
		argv[i].ptr = b + off[i];
	p->argc = argc;
	req->argc = argc;
	*used = pos;
	return RESP_OK;

incomplete:
	/* Only a bulk's announced length tells how big the request is. */
	p->hint = state == RESP_ST_BULK_DATA ? pos + (size_t)bulk + 2 : 0;
	p->pos = pos;
	p->argc = argc;
	p->multibulk = want;
	p->bulk = state == RESP_ST_BULK_DATA ? bulk : -1;
	p->state = state;
	return RESP_INCOMPLETE;
}

/* ---------------- inline requests ---------------- */

/* resp_args_split's callback: one argument of an inline request into p->argv. -ENOMEM or 0. */
static int resp_inline_add(void *ctx, const char *s, size_t len)
{
	resp_parser *p = ctx;
	if (SPW_UNLIKELY(p->argc == p->argv_cap) && resp_parser_grow(p) < 0)
		return -ENOMEM;
	p->argv[p->argc].ptr = s;
	p->argv[p->argc].len = len;
	p->argc++;
	return 0;
}

/* Inline request starting at b[0]; n bytes available. Same results as resp_parse_multibulk. */
static int resp_parse_inline(resp_parser *p, const char *b, size_t n, size_t *used /* out */,
                             resp_request *req /* out */)
{
	const char *nl;
	size_t line, content;
	int rc;

	if (SPW_UNLIKELY(p->scan > n))
		return resp_parser_fail_rc(p, "parser misuse: the request in progress lost bytes", -EINVAL);
	nl = memchr(b + p->scan, '\n', n - p->scan);

	if (!nl) {
		if (n > RESP_INLINE_MAX)
			return resp_parser_fail(p, resp_err_inline_big);
		p->scan = n;
		return RESP_INCOMPLETE;
	}
	line = (size_t)(nl - b);
	if (line > RESP_INLINE_MAX)   /* note 5 */
		return resp_parser_fail(p, resp_err_inline_big);
	content = line;
	if (content > 0 && b[content - 1] == '\r')
		content--;

	/* Plain arguments are slices of the line; quoted ones are unescaped into p->inline_buf, which
	 * the splitter sizes to the line before the first one, so it never moves under the slices. */
	p->argc = 0;
	rc = resp_args_split(b, content, &p->inline_buf, &p->inline_cap, resp_inline_add, p);
	if (rc == -EINVAL)
		return resp_parser_fail(p, resp_err_quotes);
	if (rc < 0)
		return rc;
	req->argc = p->argc;
	*used = line + 1;
	return RESP_OK;
}

int resp_request_parse(resp_parser *p, const char *buf, size_t len, size_t *consumed,
                       resp_request *req)
{
	size_t start = 0;   /* the request in progress begins at buf + start */
	int rc;

	if (SPW_UNLIKELY(p->state == RESP_ST_ERROR)) {
		*consumed = 0;
		return p->error_rc;
	}
	if (p->state == RESP_ST_IDLE && SPW_UNLIKELY(p->argv_cap > RESP_ARGV_KEEP))
		resp_parser_free_args(p);   /* note 6: the last request's argv is no longer in use */

	for (;;) {
		size_t used = 0;
		if (p->state == RESP_ST_IDLE) {
			if (start == len) {
				*consumed = start;
				return RESP_INCOMPLETE;
			}
			p->pos = 0;
			p->scan = 0;
			p->argc = 0;
			p->bulk = -1;
			p->is_inline = buf[start] != '*';
			p->state = p->is_inline ? RESP_ST_INLINE : RESP_ST_COUNT;
		}
		if (p->is_inline)
			rc = resp_parse_inline(p, buf + start, len - start, &used, req);
		else
			rc = resp_parse_multibulk(p, buf + start, len - start, &used, req);

		if (SPW_LIKELY(rc == RESP_OK)) {
			p->state = RESP_ST_IDLE;
			p->hint = 0;
			start += used;
			if (SPW_UNLIKELY(req->argc == 0))
				continue;   /* an empty request: skipped, as Redis's resetClient */
			req->argv = p->argv;
			req->is_inline = p->is_inline;
			*consumed = start;
			return RESP_OK;
		}
		*consumed = start;
		if (rc == RESP_INCOMPLETE && SPW_UNLIKELY(len - start > p->limits.max_querybuf))
			return resp_parser_fail(p, resp_err_querybuf);
		if (rc == -ENOMEM) {
			resp_parser_reset(p);
			resp_parser_fail_rc(p, "out of memory", -ENOMEM);
		}
		return rc;
	}
}
