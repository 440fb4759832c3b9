/*
 * resp_write.c - replies: the writer the server encodes them with, and the skipper clients (bench,
 * tests) find their ends with.
 *
 * NOTES ON THE WRITER
 *
 *  1. A resp_out is a chain of chunks from the caller's allocator. Encoders reserve the worst case
 *     for a header, format in place and commit what they wrote: one bounds check per reply in the
 *     common case. Small counts and lengths come from precomputed headers, as Redis's shared
 *     "*<n>\r\n" and "$<n>\r\n" objects; larger ones are formatted by spw_fmt_ll (common/spw.h).
 *  2. A payload larger than the tail's free space fills the tail and continues in one new chunk of at
 *     least its remaining size: at most two iovecs per value, no chunk above what one value needs.
 *  3. After an allocation failure o->oom is set and every later write is dropped: the stream is then
 *     corrupt and the caller must close the connection.
 *
 * NOTES ON THE SKIPPER
 *
 *  4. resp_reply_skip is stateless: it walks one reply from its first byte with a stack of
 *     "elements left" per open aggregate (no recursion, at most RESP_SKIP_DEPTH deep), so a reply
 *     that has not fully arrived is walked again from its start next time. Lines must end in CRLF
 *     and numbers parse as string2ll (spw_parse_ll).
 *
 * Sections: chunks; header lines; encoders; sent bytes; reply skipper.
 */
#include "proto/resp.h"
#include "common/spw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define RESP_CHUNK_MIN  (16 * 1024)     /* smallest chunk asked of the allocator */
#define RESP_SKIP_DEPTH 128             /* deepest aggregate nesting resp_reply_skip accepts */
#define RESP_SKIP_MAX_COUNT (1LL << 40) /* more elements than any real reply */

/* ---------------- chunks ---------------- */

void resp_out_init(resp_out *o, resp_chunk_alloc_fn alloc, void *ctx)
{
	memset(o, 0, sizeof(*o));
	o->proto = 2;
	o->alloc = alloc;
	o->alloc_ctx = ctx;
}

char *resp_out_reserve_slow(resp_out *o, size_t n)
{
	resp_chunk *t = o->tail, *c;

	if (o->oom)
		return NULL;
	if (t && t->cap - t->len >= n)
		return t->data + t->len;
	if (n > UINT32_MAX)
		goto fail;
	c = o->alloc(o->alloc_ctx, n > RESP_CHUNK_MIN ? n : RESP_CHUNK_MIN);
	if (!c)
		goto fail;
	if (c->cap < n)   /* an allocator that broke its contract: nothing can be written */
		goto fail;
	c->next = NULL;
	c->len = 0;
	c->sent = 0;
	if (t)
		t->next = c;
	else
		o->head = c;
	o->tail = c;
	return c->data;

fail:
	o->oom = true;
	return NULL;
}

/* Copy as much of [*src, *src + *n) as the tail's free space takes; both advance past it. */
static inline void resp_out_fill_tail(resp_out *o, const char **src, size_t *n)
{
	resp_chunk *t = o->tail;
	size_t k = t->cap - t->len;
	if (k > *n)
		k = *n;
	memcpy(t->data + t->len, *src, k);
	t->len += (uint32_t)k;
	o->bytes += k;
	*src += k;
	*n -= k;
}

void resp_out_append(resp_out *o, const void *p, size_t n)
{
	resp_chunk *t = o->tail;
	const char *src = p;
	char *d;

	if (n == 0 || o->oom)
		return;
	if (t && t->cap > t->len) {
		resp_out_fill_tail(o, &src, &n);
		if (n == 0)
			return;
	}
	d = resp_out_reserve_slow(o, n);
	if (!d)
		return;
	memcpy(d, src, n);
	resp_out_commit(o, n);
}

/* Append n payload bytes then "\r\n": the payload fills the tail's free space and its remainder goes,
 * with the CRLF, to one new chunk (note 2). */
static void resp_out_append_crlf(resp_out *o, const char *src, size_t n)
{
	resp_chunk *t = o->tail;
	char *d;

	if (o->oom)
		return;
	if (t && t->cap > t->len && t->cap - t->len < n + 2)
		resp_out_fill_tail(o, &src, &n);
	d = resp_out_reserve(o, n + 2);
	if (!d)
		return;
	if (n)
		memcpy(d, src, n);
	d[n] = '\r';
	d[n + 1] = '\n';
	resp_out_commit(o, n + 2);
}

/* ---------------- header lines ---------------- */

/* Precomputed "<prefix><n>\r\n" for 0 <= n < 32, as Redis's shared.mbulkhdr/bulkhdr. */
typedef struct resp_hdr {
	char s[7];
	uint8_t len;
} resp_hdr;

#define RESP_HDRS(c) { \
	{ c "0\r\n", 4 }, { c "1\r\n", 4 }, { c "2\r\n", 4 }, { c "3\r\n", 4 }, { c "4\r\n", 4 }, \
	{ c "5\r\n", 4 }, { c "6\r\n", 4 }, { c "7\r\n", 4 }, { c "8\r\n", 4 }, { c "9\r\n", 4 }, \
	{ c "10\r\n", 5 }, { c "11\r\n", 5 }, { c "12\r\n", 5 }, { c "13\r\n", 5 }, { c "14\r\n", 5 }, \
	{ c "15\r\n", 5 }, { c "16\r\n", 5 }, { c "17\r\n", 5 }, { c "18\r\n", 5 }, { c "19\r\n", 5 }, \
	{ c "20\r\n", 5 }, { c "21\r\n", 5 }, { c "22\r\n", 5 }, { c "23\r\n", 5 }, { c "24\r\n", 5 }, \
	{ c "25\r\n", 5 }, { c "26\r\n", 5 }, { c "27\r\n", 5 }, { c "28\r\n", 5 }, { c "29\r\n", 5 }, \
	{ c "30\r\n", 5 }, { c "31\r\n", 5 } }
#define RESP_NHDR 32

static const resp_hdr resp_hdr_bulk[RESP_NHDR] = RESP_HDRS("$");
static const resp_hdr resp_hdr_array[RESP_NHDR] = RESP_HDRS("*");
static const resp_hdr resp_hdr_int[RESP_NHDR] = RESP_HDRS(":");

#define RESP_LINE_MAX 32   /* prefix, sign, 20 digits, CRLF: the most a header line takes */

/* Write "<prefix><v>\r\n" at d (RESP_LINE_MAX bytes available). Returns its length. */
static inline size_t resp_fmt_line(char *d, char prefix, const resp_hdr *tbl, long long v)
{
	if (tbl && (unsigned long long)v < RESP_NHDR) {
		memcpy(d, tbl[v].s, 5);   /* the longest is 5 bytes ("$31\r\n"); len says how many count */
		return tbl[v].len;
	}
	d[0] = prefix;
	size_t n = 1 + spw_fmt_ll(d + 1, v);
	d[n] = '\r';
	d[n + 1] = '\n';
	return n + 2;
}

static void resp_write_line(resp_out *o, char prefix, const resp_hdr *tbl, long long v)
{
	char *d = resp_out_reserve(o, RESP_LINE_MAX);
	if (SPW_UNLIKELY(!d))
		return;
	resp_out_commit(o, resp_fmt_line(d, prefix, tbl, v));
}
/* ---------------- encoders ---------------- */


void resp_write_simple(resp_out *o, const char *s, size_t len)
{
	char *d = resp_out_reserve(o, len + 3);
	if (SPW_LIKELY(d)) {
		d[0] = '+';
		if (len)
			memcpy(d + 1, s, len);
		d[len + 1] = '\r';
		d[len + 2] = '\n';
		resp_out_commit(o, len + 3);
	}
}

void resp_write_ok(resp_out *o)
{
	char *d = resp_out_reserve(o, 5);
	if (SPW_LIKELY(d)) {
		memcpy(d, "+OK\r\n", 5);
		resp_out_commit(o, 5);
	}
}

/* Write "-" msg "\r\n" with CR and LF shown as spaces (a leading '-' in msg is its own dash). */
static void resp_write_error_raw(resp_out *o, const char *msg, size_t len)
{
	size_t dash = (len > 0 && msg[0] == '-') ? 0 : 1;
	char *d = resp_out_reserve(o, len + dash + 2);
	if (!d)
		return;
	d[0] = '-';
	for (size_t i = 0; i < len; i++) {
		char c = msg[i];
		d[dash + i] = (c == '\r' || c == '\n') ? ' ' : c;
	}
	d[dash + len] = '\r';
	d[dash + len + 1] = '\n';
	resp_out_commit(o, dash + len + 2);
}

void resp_write_error(resp_out *o, const char *msg, size_t len)
{
	resp_write_error_raw(o, msg, len);
}

/* Redis's addReplyErrorFormat: sdstrim(s, "\r\n") on both ends, then CR/LF inside become spaces. */
static void resp_error_trim(const char **s, size_t *len)
{
	while (*len && ((*s)[0] == '\r' || (*s)[0] == '\n')) {
		(*s)++;
		(*len)--;
	}
	while (*len && ((*s)[*len - 1] == '\r' || (*s)[*len - 1] == '\n'))
		(*len)--;
}

void resp_write_errorf(resp_out *o, const char *fmt, ...)
{
	char sbuf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(sbuf, sizeof(sbuf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(sbuf)) {
		const char *s = sbuf;
		size_t len = (size_t)n;
		resp_error_trim(&s, &len);
		resp_write_error_raw(o, s, len);
		return;
	}
	/* Too long for the stack: format straight into the reply, then sanitize it in place. The
	 * reservation covers '-', the text with its NUL, and CRLF; only what is kept is committed. */
	char *d = resp_out_reserve(o, (size_t)n + 4);
	if (!d)
		return;
	va_start(ap, fmt);
	vsnprintf(d + 1, (size_t)n + 1, fmt, ap);
	va_end(ap);
	const char *s = d + 1;
	size_t len = (size_t)n;
	resp_error_trim(&s, &len);
	size_t dash = (len > 0 && s[0] == '-') ? 0 : 1;
	memmove(d + dash, s, len);
	d[0] = '-';
	for (size_t i = 0; i < len + dash; i++)
		if (d[i] == '\r' || d[i] == '\n')
			d[i] = ' ';
	d[dash + len] = '\r';
	d[dash + len + 1] = '\n';
	resp_out_commit(o, dash + len + 2);
}

void resp_write_int(resp_out *o, long long v)
{
	resp_write_line(o, ':', resp_hdr_int, v);
}

void resp_write_bulk(resp_out *o, const void *p, size_t len)
{
	resp_chunk *t = o->tail;
	char *d;

	if (SPW_LIKELY(t && t->cap - t->len >= len + RESP_LINE_MAX + 2)) {
		d = t->data + t->len;
		size_t h = resp_fmt_line(d, '$', resp_hdr_bulk, (long long)len);
		if (len)
			memcpy(d + h, p, len);
		d[h + len] = '\r';
		d[h + len + 1] = '\n';
		resp_out_commit(o, h + len + 2);
		return;
	}
	/* Note 2: the header, then the payload filling the tail and spilling into one new chunk. */
	resp_write_line(o, '$', resp_hdr_bulk, (long long)len);
	resp_out_append_crlf(o, p, len);
}

void resp_write_bulk_cstr(resp_out *o, const char *s)
{
	if (!s)
		resp_write_null(o);
	else
		resp_write_bulk(o, s, strlen(s));
}

void resp_write_bulk_ll(resp_out *o, long long v)
{
	char buf[24];
	resp_write_bulk(o, buf, spw_fmt_ll(buf, v));
}

char *resp_write_bulk_fill(resp_out *o, size_t len)
{
	char *d = resp_out_reserve(o, len + RESP_LINE_MAX + 2);
	if (!d)
		return NULL;
	size_t h = resp_fmt_line(d, '$', resp_hdr_bulk, (long long)len);
	d[h + len] = '\r';
	d[h + len + 1] = '\n';
	resp_out_commit(o, h + len + 2);
	return d + h;
}

static void resp_write_lit(resp_out *o, const char *s, size_t len)
{
	char *d = resp_out_reserve(o, len);
	if (SPW_LIKELY(d)) {
		memcpy(d, s, len);
		resp_out_commit(o, len);
	}
}

void resp_write_null(resp_out *o)
{
	if (o->proto >= 3)
		resp_write_lit(o, "_\r\n", 3);
	else
		resp_write_lit(o, "$-1\r\n", 5);
}

void resp_write_null_array(resp_out *o)
{
	if (o->proto >= 3)
		resp_write_lit(o, "_\r\n", 3);
	else
		resp_write_lit(o, "*-1\r\n", 5);
}

void resp_write_array_len(resp_out *o, long long n)
{
	resp_write_line(o, '*', resp_hdr_array, n);
}

void resp_write_map_len(resp_out *o, long long n)
{
	if (o->proto >= 3)
		resp_write_line(o, '%', NULL, n);
	else
		resp_write_line(o, '*', resp_hdr_array, n * 2);
}

void resp_write_set_len(resp_out *o, long long n)
{
	if (o->proto >= 3)
		resp_write_line(o, '~', NULL, n);
	else
		resp_write_line(o, '*', resp_hdr_array, n);
}

/* Redis 7.0's addReplyDouble: "%.17g", with infinities spelled out (snprintf's own spelling for NaN). */
void resp_write_double(resp_out *o, double d)
{
	char buf[64];
	int n;

	if (isinf(d)) {
		if (o->proto >= 3)
			resp_write_lit(o, d > 0 ? ",inf\r\n" : ",-inf\r\n", d > 0 ? 6 : 7);
		else
			resp_write_bulk(o, d > 0 ? "inf" : "-inf", d > 0 ? 3 : 4);
		return;
	}
	if (o->proto >= 3) {
		n = snprintf(buf, sizeof(buf), ",%.17g\r\n", d);
		resp_write_lit(o, buf, (size_t)n);
	} else {
		n = snprintf(buf, sizeof(buf), "%.17g", d);
		resp_write_bulk(o, buf, (size_t)n);
	}
}

void resp_write_bool(resp_out *o, bool b)
{
	if (o->proto >= 3)
		resp_write_lit(o, b ? "#t\r\n" : "#f\r\n", 4);
	else
		resp_write_lit(o, b ? ":1\r\n" : ":0\r\n", 4);
}

/* Redis's addReplyVerbatim: the format is padded with spaces or cut to three bytes. */
void resp_write_verbatim(resp_out *o, const char *fmt3, const void *p, size_t len)
{
	char hdr[RESP_LINE_MAX + 4];
	size_t h;

	if (o->proto < 3) {
		resp_write_bulk(o, p, len);
		return;
	}
	h = resp_fmt_line(hdr, '=', NULL, (long long)(len + 4));
	for (int i = 0; i < 3; i++) {
		hdr[h++] = (fmt3 && *fmt3) ? *fmt3 : ' ';
		if (fmt3 && *fmt3)
			fmt3++;
	}
	hdr[h++] = ':';
	resp_out_append(o, hdr, h);
	resp_out_append_crlf(o, p, len);
}
/* ---------------- sent bytes ---------------- */

resp_chunk *resp_out_consume(resp_out *o, size_t n)
{
	resp_chunk *freed = NULL, **ftail = &freed;

	o->bytes -= n < o->bytes ? n : o->bytes;
	while (o->head) {
		resp_chunk *h = o->head;
		size_t avail = h->len - h->sent;
		if (n < avail) {
			h->sent += (uint32_t)n;
			break;
		}
		/* Fully sent (the tail too: the next reply takes a fresh chunk from the caller's pool). */
		n -= avail;
		o->head = h->next;
		h->next = NULL;
		*ftail = h;
		ftail = &h->next;
	}
	if (!o->head)
		o->tail = NULL;
	return freed;
}

/* ---------------- reply skipper ---------------- */

/* The line whose type byte is buf[pos]: RESP_OK with *cr the offset of its '\r', RESP_INCOMPLETE
 * when its "\r\n" has not fully arrived, or RESP_EPROTO when the '\r' is not followed by '\n'. */
static inline int resp_skip_line(const char *buf, size_t len, size_t pos, size_t *cr /* out */)
{
	const char *r = memchr(buf + pos + 1, '\r', len - pos - 1);
	if (!r || (size_t)(r - buf) + 1 >= len)
		return RESP_INCOMPLETE;
	if (r[1] != '\n')
		return RESP_EPROTO;
	*cr = (size_t)(r - buf);
	return RESP_OK;
}

int resp_reply_skip(const char *buf, size_t len, size_t *consumed, char *type)
{
	long long left[RESP_SKIP_DEPTH];   /* elements still to skip, per open aggregate */
	int depth = 0;
	size_t pos = 0, cr = 0;
	long long n;

	if (len == 0)
		return RESP_INCOMPLETE;
	*type = buf[0];
	for (;;) {
		if (pos >= len)
			return RESP_INCOMPLETE;
		char t = buf[pos];
		int rc = resp_skip_line(buf, len, pos, &cr);
		if (rc != RESP_OK)
			return rc;
		const char *s = buf + pos + 1;
		size_t sl = cr - pos - 1;
		size_t next = cr + 2;

		switch (t) {
		case '+': case '-': case ',': case '(':
			break;
		case ':':
			if (!spw_parse_ll(s, sl, &n))
				return RESP_EPROTO;
			break;
		case '_':
			if (sl != 0)
				return RESP_EPROTO;
			break;
		case '#':
			if (sl != 1 || (s[0] != 't' && s[0] != 'f'))
				return RESP_EPROTO;
			break;
		case '$': case '!': case '=':
			if (!spw_parse_ll(s, sl, &n))
				return RESP_EPROTO;
			if (n == -1 && t == '$')
				break;   /* RESP2 null bulk */
			if (n < 0)
				return RESP_EPROTO;
			if ((uint64_t)n + 2 > len - next)
				return RESP_INCOMPLETE;
			if (buf[next + (size_t)n] != '\r' || buf[next + (size_t)n + 1] != '\n')
				return RESP_EPROTO;
			next += (size_t)n + 2;
			break;
		case '*': case '~': case '>': case '%': case '|':
			if (!spw_parse_ll(s, sl, &n))
				return RESP_EPROTO;
			if (n == -1 && t != '|')
				break;   /* RESP2 null array */
			if (n < 0 || n > RESP_SKIP_MAX_COUNT)
				return RESP_EPROTO;
			/* Maps and attributes hold pairs; an attribute is followed by the reply it annotates. */
			if (t == '%' || t == '|')
				n *= 2;
			if (t == '|')
				n++;
			if (n == 0)
				break;
			if (depth == RESP_SKIP_DEPTH)
				return RESP_EPROTO;
			left[depth++] = n;
			pos = next;
			continue;
		default:
			return RESP_EPROTO;
		}
		pos = next;
		/* One element done: close every aggregate it completes. */
		while (depth > 0 && --left[depth - 1] == 0)
			depth--;
		if (depth == 0) {
			*consumed = pos;
			return RESP_OK;
		}
	}
}

