/*
 * itest_conn.c - the integration tests' RESP client: raw bytes out, one complete reply in.
 *
 * Notes:
 *  1. Replies are delimited with proto's resp_reply_skip(), the same code Spillway's own clients use,
 *     so a reply is "complete" by the RESP grammar, not by a guess such as "ends with CRLF".
 *  2. The socket is blocking with no timeouts of its own; every wait goes through poll() with the
 *     connection's deadline, so a server that stops answering fails the test in bounded time.
 *  3. Sends use MSG_NOSIGNAL: a server that closed the connection (protocol error tests) gives
 *     -EPIPE instead of killing the test with SIGPIPE.
 */
#include "itest.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/resp.h"

long long itest_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void itest_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int itest_conn_open(itest_conn *c, int port)
{
	struct sockaddr_in sa;
	int one = 1;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->timeout_ms = ITEST_TIMEOUT_MS;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	return 0;
}

void itest_conn_close(itest_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* Wait until c's socket is ready for events or deadline passes (note 2). 0 (ready, or a signal: the
 * caller retries), -ETIMEDOUT, or -errno. */
static int conn_wait(itest_conn *c, short events, long long deadline)
{
	long long left = deadline - itest_now_ms();
	if (left <= 0)
		return -ETIMEDOUT;
	struct pollfd pfd = { c->fd, events, 0 };
	if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

int itest_conn_send(itest_conn *c, const void *p, size_t n)
{
	const char *s = p;
	long long deadline = itest_now_ms() + c->timeout_ms;

	while (n > 0) {
		ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			s += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		/* The server is not reading: wait for room, within the deadline. */
		int err = conn_wait(c, POLLOUT, deadline);
		if (err)
			return err;
	}
	return 0;
}

/* Append one "$len\r\n<bytes>\r\n" to a growing buffer. */
static int buf_put(char **b, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > *cap) {
		size_t ncap = *cap ? *cap : 256;
		while (ncap < *len + n)
			ncap *= 2;
		char *nb = realloc(*b, ncap);
		if (!nb)
			return -ENOMEM;
		*b = nb;
		*cap = ncap;
	}
	memcpy(*b + *len, p, n);
	*len += n;
	return 0;
}

int itest_conn_send_argv(itest_conn *c, int argc, const char *const *argv, const size_t *lens)
{
	char *b = NULL, hdr[32];
	size_t len = 0, cap = 0;
	int err = 0, n;

	n = snprintf(hdr, sizeof(hdr), "*%d\r\n", argc);
	err = buf_put(&b, &len, &cap, hdr, (size_t)n);
	for (int i = 0; i < argc && !err; i++) {
		size_t l = lens ? lens[i] : strlen(argv[i]);
		n = snprintf(hdr, sizeof(hdr), "$%zu\r\n", l);
		err = buf_put(&b, &len, &cap, hdr, (size_t)n);
		if (!err)
			err = buf_put(&b, &len, &cap, argv[i], l);
		if (!err)
			err = buf_put(&b, &len, &cap, "\r\n", 2);
	}
	if (!err)
		err = itest_conn_send(c, b, len);
	free(b);
	return err;
}

/* Collect a NULL-terminated vararg list into argv (at most 64 arguments). */
#define ITEST_MAX_ARGS 64
static int collect_args(const char *arg0, va_list ap, const char **argv)
{
	int argc = 0;
	for (const char *a = arg0; a && argc < ITEST_MAX_ARGS; a = va_arg(ap, const char *))
		argv[argc++] = a;
	return argc;
}

int itest_conn_send_cmd(itest_conn *c, const char *arg0, ...)
{
	const char *argv[ITEST_MAX_ARGS];
	va_list ap;
	va_start(ap, arg0);
	int argc = collect_args(arg0, ap, argv);
	va_end(ap);
	return itest_conn_send_argv(c, argc, argv, NULL);
}

/* Wait for readability and read what is there into c->buf. 0 on bytes, -ECONNRESET on EOF. */
static int conn_fill(itest_conn *c, long long deadline)
{
	if (c->pos > 0 && c->pos == c->len)
		c->pos = c->len = 0;
	if (c->cap - c->len < 65536) {
		/* Compact first, then grow: replies of many MB (5 MB values) must fit whole. */
		if (c->pos > 0) {
			memmove(c->buf, c->buf + c->pos, c->len - c->pos);
			c->len -= c->pos;
			c->pos = 0;
		}
		if (c->cap - c->len < 65536) {
			size_t ncap = c->cap ? c->cap * 2 : 131072;
			char *nb = realloc(c->buf, ncap);
			if (!nb)
				return -ENOMEM;
			c->buf = nb;
			c->cap = ncap;
		}
	}
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (r > 0) {
			c->len += (size_t)r;
			return 0;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int err = conn_wait(c, POLLIN, deadline);
		if (err)
			return err;
	}
}

ssize_t itest_conn_read_reply(itest_conn *c, const char **reply, char *type)
{
	long long deadline = itest_now_ms() + c->timeout_ms;
	for (;;) {
		size_t used = 0;
		char t = 0;
		if (c->len > c->pos) {
			int rc = resp_reply_skip(c->buf + c->pos, c->len - c->pos, &used, &t);
			if (rc == RESP_OK) {
				*reply = c->buf + c->pos;
				if (type)
					*type = t;
				c->pos += used;
				return (ssize_t)used;
			}
			if (rc != RESP_INCOMPLETE)
				return -EPROTO;
		}
		int err = conn_fill(c, deadline);
		if (err)
			return err;
	}
}

char *itest_conn_call_argv(itest_conn *c, int argc, const char *const *argv, const size_t *lens)
{
	const char *r;
	if (itest_conn_send_argv(c, argc, argv, lens) < 0)
		return NULL;
	ssize_t n = itest_conn_read_reply(c, &r, NULL);
	if (n < 0)
		return NULL;
	char *copy = malloc((size_t)n + 1);
	if (!copy)
		return NULL;
	memcpy(copy, r, (size_t)n);
	copy[n] = '\0';
	return copy;
}

char *itest_conn_call_va(itest_conn *c, const char *arg0, va_list ap)
{
	const char *argv[ITEST_MAX_ARGS];
	int argc = collect_args(arg0, ap, argv);
	return itest_conn_call_argv(c, argc, argv, NULL);
}

char *itest_conn_call(itest_conn *c, const char *arg0, ...)
{
	va_list ap;
	va_start(ap, arg0);
	char *r = itest_conn_call_va(c, arg0, ap);
	va_end(ap);
	return r;
}

/* The number of complete replies in want[0..wlen), or -1 when it is not a sequence of them. */
static int replies_count(const char *want, size_t wlen)
{
	int n = 0;
	for (size_t off = 0; off < wlen; n++) {
		size_t used;
		char t;
		if (resp_reply_skip(want + off, wlen - off, &used, &t) != RESP_OK)
			return -1;
		off += used;
	}
	return n;
}

int itest_replies_check(itest_conn *c, const void *want, size_t wlen, itest_buf *got, char *err,
                        size_t errlen)
{
	const char *w = want;
	int n = replies_count(w, wlen);
	if (n < 0) {
		snprintf(err, errlen, "the expected replies are not RESP (a bug in the test)");
		return -1;
	}
	size_t off = 0;
	for (int k = 0; k < n; k++) {
		const char *rep;
		size_t used;
		char t;
		resp_reply_skip(w + off, wlen - off, &used, &t);
		ssize_t len = itest_conn_read_reply(c, &rep, NULL);
		if (len < 0) {
			snprintf(err, errlen, "reply %d of %d: %s", k + 1, n, strerror((int)-len));
			return -1;
		}
		if (got)
			itest_buf_add(got, rep, (size_t)len);
		if ((size_t)len != used || memcmp(rep, w + off, used) != 0) {
			char *g = itest_escape(rep, (size_t)len, 200), *e = itest_escape(w + off, used, 200);
			snprintf(err, errlen, "reply %d of %d: got \"%s\", want \"%s\"", k + 1, n, g ? g : "?",
			         e ? e : "?");
			free(g);
			free(e);
			return -1;
		}
		off += used;
	}
	return n;
}

int itest_conn_wait_closed(itest_conn *c)
{
	long long deadline = itest_now_ms() + c->timeout_ms;
	size_t before = c->len - c->pos;
	if (before > 0)
		return 1;
	int err = conn_fill(c, deadline);
	if (err == -ECONNRESET)
		return 0;
	if (err == 0)
		return 1;
	return err;
}

int itest_conn_read_to_eof(itest_conn *c, char **out, size_t *len)
{
	long long deadline = itest_now_ms() + c->timeout_ms;
	int err;
	do
		err = conn_fill(c, deadline);
	while (err == 0);
	if (err == -ECONNRESET)
		err = 0;
	*len = c->len - c->pos;
	*out = malloc(*len + 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, c->buf + c->pos, *len);
	(*out)[*len] = '\0';
	c->pos = c->len;
	return err;
}

char *itest_escape(const void *p, size_t n, size_t max)
{
	const unsigned char *s = p;
	size_t shown = n < max ? n : max;
	char *out = malloc(shown * 4 + 64), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < shown; i++) {
		unsigned char ch = s[i];
		switch (ch) {
		case '\r': *o++ = '\\'; *o++ = 'r'; break;
		case '\n': *o++ = '\\'; *o++ = 'n'; break;
		case '\t': *o++ = '\\'; *o++ = 't'; break;
		case '\\': *o++ = '\\'; *o++ = '\\'; break;
		case '"': *o++ = '\\'; *o++ = '"'; break;
		default:
			if (ch < 0x20 || ch >= 0x7f)
				o += sprintf(o, "\\x%02x", ch);
			else
				*o++ = (char)ch;
		}
	}
	if (shown < n)
		o += sprintf(o, "...(%zu more bytes)", n - shown);
	*o = '\0';
	return out;
}

void itest_buf_add(itest_buf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap - b->len < n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			fprintf(stderr, "itest: out of memory for a %zu-byte buffer\n", cap);
			abort();
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void itest_buf_fmt(itest_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		fprintf(stderr, "itest: itest_buf_fmt: \"%s\" does not fit %zu bytes\n", fmt, sizeof(tmp));
		abort();
	}
	itest_buf_add(b, tmp, (size_t)n);
}

void itest_buf_bulk(itest_buf *b, const void *p, size_t n)
{
	itest_buf_fmt(b, "$%zu\r\n", n);
	itest_buf_add(b, p, n);
	itest_buf_add(b, "\r\n", 2);
}
