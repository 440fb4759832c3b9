/*
 * reply.c - error replies with Redis's texts, text replies (INFO, CLIENT LIST, CONFIG GET) built in
 * a growable buffer on the worker's scratch, help replies, and argument helpers.
 *
 * Design notes:
 *  1. Every error reply goes through reply_error(), which counts total_error_replies on the
 *     worker (no shared counter). command_dispatch() compares that count before and after a
 *     handler to count the command's failed_calls, so handlers need not know about stats.
 *  2. Store errors get texts that say what to do: the log is full because there is no storage
 *     tier (raise --memory, or run with --storage-tier), a value does not fit (a record may span
 *     pages but not exceed the memory region: raise --memory).
 *  3. With the storage tier, a device read that failed reaches the one client whose command
 *     needed it, as "-ERR IO error ..." (the server and other clients go on), and counts in INFO
 *     stats (tier_io_error_replies). A store in its sticky error state (a page write to the device
 *     failed) refuses writes with "-ERR store error state ...", as INFO store shows.
 */
#include "server/server_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void reply_error(client *c, const char *msg)
{
	c->w->stats.errors++;
	resp_write_error(&c->out, msg, strlen(msg));
}

void reply_errorf(client *c, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* As Redis's addReplyErrorFormat: newlines would break the protocol, make them spaces. */
	for (int i = 0; i < n; i++)
		if (buf[i] == '\r' || buf[i] == '\n')
			buf[i] = ' ';
	c->w->stats.errors++;
	resp_write_error(&c->out, buf, (size_t)n);
}

void reply_err_arity(client *c)
{
	reply_errorf(c, "ERR wrong number of arguments for '%s' command", c->cmd ? c->cmd->name : "");
}

void reply_err_syntax(client *c) { reply_error(c, "ERR syntax error"); }

void reply_err_not_int(client *c) { reply_error(c, "ERR value is not an integer or out of range"); }
void reply_err_wrongtype(client *c)
{
	reply_error(c, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

void reply_err_store(client *c, int err)
{
	switch (err) {
	case SPW_E_LOG_FULL:
		if (g_srv.dev)
			reply_error(c, "OOM log memory full: the device cannot take pages fast enough (raise "
			               "--memory)");
		else if (g_cfg.maxmemory && !config_option_given("memory"))
			reply_error(c, "OOM log memory full: the log's share of 'maxmemory' is used up (raise "
			               "--maxmemory, or run with --storage-tier)");   /* memcap.c note 2 */
		else
			reply_error(c, "OOM log memory full: no storage tier to spill to (raise --memory, or run "
			               "with --storage-tier)");
		break;
	case SPW_E_STORE_ERROR:
		c->w->stats.io_errors++;
		reply_error(c, "ERR store error state: a write to the storage device failed, writes are "
		               "refused (see INFO store)");
		break;
	case SPW_E_CORRUPT:
		c->w->stats.io_errors++;
		reply_error(c, "ERR IO error: a record read from the storage device is corrupt");
		break;
	case -EIO:
	case -ENODATA:
	case -ENXIO:
	case -EBADF:
		c->w->stats.io_errors++;
		reply_errorf(c, "ERR IO error on the storage device: %s", spw_strerror(err));
		break;
	case SPW_E_TOO_BIG:
		reply_errorf(c, "ERR value too large: the log stores at most %llu bytes of key and value in "
		             "one record (raise --memory)",
		             (unsigned long long)hlog_max_record_payload(g_srv.store));
		break;
	case SPW_E_NOT_INT:
		reply_err_not_int(c);
		break;
	default:
		reply_errorf(c, "ERR %s", spw_strerror(err));
		break;
	}
}

bool arg_ll(const resp_slice *a, long long *out)
{
	return spw_parse_ll(a->ptr, a->len, out);
}

bool arg_eq(const resp_slice *a, const char *lit)
{
	size_t n = strlen(lit);
	return a->len == n && strncasecmp(a->ptr, lit, n) == 0;
}

bool arg_opt_is(const resp_slice *a, const char *lit, size_t n)
{
	if (a->len < n || (a->len > n && a->ptr[n] != '\0'))
		return false;
	return strncasecmp(a->ptr, lit, n) == 0;
}

bool reply_store_failed(client *c, int rc)
{
	if (SPW_LIKELY(rc >= 0 && rc != HLOG_PENDING))
		return false;
	switch (rc) {
	case SPW_E_NOT_INT: reply_err_not_int(c); break;
	case SPW_E_OVERFLOW: reply_error(c, "ERR increment or decrement would overflow"); break;
	case SPW_E_NOT_FLOAT: reply_error(c, "ERR value is not a valid float"); break;
	case SPW_E_NAN: reply_error(c, "ERR increment would produce NaN or Infinity"); break;
	case SPW_E_WRONGTYPE: reply_err_wrongtype(c); break;
	case HLOG_PENDING: reply_pending(c); break;
	default: reply_err_store(c, rc); break;
	}
	return true;
}

/* ---------------- help and text replies ---------------- */

void reply_help(client *c, const char *const *lines)
{
	int n = 0;
	while (lines[n])
		n++;
	resp_write_array_len(&c->out, n);
	for (int i = 0; i < n; i++)
		resp_write_simple(&c->out, lines[i], strlen(lines[i]));
}

/* ---------------- a growable text buffer on the worker's scratch ---------------- */

void sb_init(sbuf *b, worker *w)
{
	b->w = w;
	b->len = 0;
	b->oom = false;
	b->p = (char *)worker_scratch(w, 4096);
	b->cap = b->p ? 4096 : 0;
	if (!b->p)
		b->oom = true;
}

static bool sb_reserve(sbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n <= b->cap)
		return true;
	size_t cap = SPW_MAX(b->cap * 2, b->len + n);
	char *p = (char *)worker_scratch(b->w, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void sb_add(sbuf *b, const char *s, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

void sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		if (b->oom)
			return;
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		if (!sb_reserve(b, (size_t)n + 1))
			return;
	}
}

/* Text replies (INFO, CLIENT LIST/INFO): a verbatim "txt" string in RESP3, a bulk in RESP2. */
void reply_text(client *c, sbuf *b)
{
	if (b->oom) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	resp_write_verbatim(&c->out, "txt", b->p, b->len);
}
