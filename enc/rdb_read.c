/*
 * rdb_read.c - the RDB reader: bytes from a buffer or a file through a window, lengths, strings in
 * every encoding (int8/16/32, LZF), doubles, and the running CRC64 of what was consumed.
 *
 * Design notes:
 *  1. One reader for both sources: a DUMP payload is the window itself (fd -1), a file slides a
 *     window over itself. Every read checks the bytes left first, so truncated input is
 *     SPW_E_CORRUPT with a message, never a read past the end.
 *  2. The CRC is not updated per read: consumed bytes are folded in when the window slides and when
 *     asked (rdb_reader_crc), a few large calls instead of one per length byte.
 *  3. Strings land in one of two scratch slots that grow as needed (a hash field and its value are
 *     both alive at once); integers become their decimal text, as Redis's rdbGenericLoadStringObject
 *     makes them. A string is limited by what the input can hold: a length larger than the bytes
 *     left (buffer) or an LZF length over 512 MiB beyond them is corrupt, so a hostile length
 *     never makes a huge allocation.
 */
#include "enc/rdb.h"
#include "common/spw.h"

#include <errno.h>
#include <liblzf/lzf.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RDB_WIN_DEFAULT (1u << 20)
#define RDB_STRING_SLACK (512ULL << 20)  /* an LZF or file string may exceed the window by this */

int rdb_corrupt(rdb_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return SPW_E_CORRUPT;
}

void rdb_reader_init_buf(rdb_reader *r, const void *p, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->buf = p;
	r->len = len;
	r->fd = -1;
}

int rdb_reader_init_fd(rdb_reader *r, int fd, size_t win_bytes)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->win_cap = win_bytes ? win_bytes : RDB_WIN_DEFAULT;
	r->win = malloc(r->win_cap);
	if (!r->win)
		return -ENOMEM;
	r->buf = r->win;
	return 0;
}

void rdb_reader_fini(rdb_reader *r)
{
	free(r->win);
	free(r->s[0].p);
	free(r->s[1].p);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

uint64_t rdb_reader_offset(const rdb_reader *r)
{
	return r->consumed + r->pos;
}

uint64_t rdb_reader_crc(rdb_reader *r)
{
	if (r->pos > r->crc_pos) {
		r->crc = rdb_crc64(r->crc, r->buf + r->crc_pos, r->pos - r->crc_pos);
		r->crc_pos = r->pos;
	}
	return r->crc;
}

/* File mode: keep the unread bytes, read more behind them until at least need bytes are there or
 * the file ends. 0, or -errno. */
static int win_fill(rdb_reader *r, size_t need)
{
	rdb_reader_crc(r);
	size_t left = r->len - r->pos;
	memmove(r->win, r->win + r->pos, left);
	r->consumed += r->pos;
	r->pos = r->crc_pos = 0;
	r->len = left;
	while (r->len < need && !r->eof) {
		ssize_t n = read(r->fd, r->win + r->len, r->win_cap - r->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			r->eof = true;
		r->len += (size_t)n;
	}
	return 0;
}

int rdb_read_raw(rdb_reader *r, void *dst, size_t n)
{
	uint8_t *d = dst;
	if (SPW_LIKELY(r->len - r->pos >= n)) {
		memcpy(d, r->buf + r->pos, n);
		r->pos += n;
		return 0;
	}
	if (r->fd < 0)
		return rdb_corrupt(r, "unexpected end of payload (%zu bytes wanted, %zu left)", n, r->len - r->pos);
	while (n) {
		if (r->pos == r->len) {
			int rc = win_fill(r, 1);
			if (rc < 0)
				return rc;
			if (r->len == 0)
				return rdb_corrupt(r, "unexpected end of file at offset %llu",
					(unsigned long long)r->consumed);
		}
		size_t k = SPW_MIN(n, r->len - r->pos);
		memcpy(d, r->buf + r->pos, k);
		r->pos += k;
		d += k;
		n -= k;
	}
	return 0;
}

int rdb_read_u8(rdb_reader *r, uint8_t *out)
{
	if (SPW_LIKELY(r->pos < r->len)) {
		*out = r->buf[r->pos++];
		return 0;
	}
	return rdb_read_raw(r, out, 1);
}

static uint64_t be_load(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static uint64_t le_load(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Redis's rdbLoadLenByRef: 00 6 bits, 01 14 bits (big endian), 0x80 32 bits and 0x81 64 bits (big
 * endian after the byte), 11 an encoded string (the low 6 bits say which). */
int rdb_read_len(rdb_reader *r, uint64_t *len, bool *encoded)
{
	uint8_t b[8];
	int rc = rdb_read_u8(r, &b[0]);
	if (rc < 0)
		return rc;
	*encoded = false;
	switch (b[0] >> 6) {
	case 0:
		*len = b[0] & 0x3f;
		return 0;
	case 1:
		if ((rc = rdb_read_u8(r, &b[1])) < 0)
			return rc;
		*len = (uint64_t)(b[0] & 0x3f) << 8 | b[1];
		return 0;
	case 3:
		*encoded = true;
		*len = b[0] & 0x3f;
		return 0;
	}
	int n = b[0] == 0x80 ? 4 : b[0] == 0x81 ? 8 : 0;
	if (!n)
		return rdb_corrupt(r, "unknown length encoding 0x%02x", b[0]);
	if ((rc = rdb_read_raw(r, b, n)) < 0)
		return rc;
	*len = be_load(b, n);
	return 0;
}

int rdb_read_plain_len(rdb_reader *r, uint64_t *len)
{
	bool enc;
	int rc = rdb_read_len(r, len, &enc);
	if (rc == 0 && enc)
		return rdb_corrupt(r, "an encoded string where a length was expected");
	return rc;
}

static int slot_reserve(rdb_reader *r, int slot, size_t n)
{
	rdb_sbuf *s = &r->s[slot];
	if (n + 1 <= s->cap)
		return 0;
	size_t cap = SPW_MAX(n + 1, s->cap * 2);
	uint8_t *p = realloc(s->p, cap);
	if (!p)
		return -ENOMEM;
	s->p = p;
	s->cap = cap;
	return 0;
}

/* A length the input can hold: in buffer mode, no more than the bytes left. */
static int len_check(rdb_reader *r, uint64_t n, uint64_t slack)
{
	uint64_t left = r->len - r->pos;
	if (r->fd < 0 ? n > left + slack : n > left + RDB_STRING_SLACK + slack)
		return rdb_corrupt(r, "string length %llu beyond the input", (unsigned long long)n);
	return 0;
}

static int read_lzf(rdb_reader *r, int slot, size_t *len)
{
	uint64_t clen, ulen;
	int rc;
	if ((rc = rdb_read_plain_len(r, &clen)) < 0 || (rc = rdb_read_plain_len(r, &ulen)) < 0)
		return rc;
	if ((rc = len_check(r, clen, 0)) < 0 || (rc = len_check(r, ulen, RDB_STRING_SLACK)) < 0)
		return rc;
	/* The compressed bytes need a buffer of their own: both slots may be alive (a hash field in
	 * slot 0 while its LZF value loads into slot 1). */
	uint8_t *c = malloc(clen ? clen : 1);
	if (!c)
		return -ENOMEM;
	if ((rc = rdb_read_raw(r, c, clen)) < 0 || (rc = slot_reserve(r, slot, ulen)) < 0)
		goto out;
	if (ulen == 0 || lzf_decompress(c, clen, r->s[slot].p, ulen) != ulen) {
		rc = rdb_corrupt(r, "invalid LZF compressed string");
		goto out;
	}
	*len = ulen;
out:
	free(c);
	return rc;
}

int rdb_read_string(rdb_reader *r, int slot, const uint8_t **p, size_t *len)
{
	uint64_t n;
	bool enc;
	int rc = rdb_read_len(r, &n, &enc);
	if (rc < 0)
		return rc;
	if (enc) {
		uint8_t b[4];
		int64_t v;
		switch (n) {
		case RDB_ENC_INT8:
		case RDB_ENC_INT16:
		case RDB_ENC_INT32: {
			int w = 1 << n;
			if ((rc = rdb_read_raw(r, b, w)) < 0)
				return rc;
			uint64_t u = le_load(b, w);
			v = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : (int32_t)u;
			if ((rc = slot_reserve(r, slot, 24)) < 0)
				return rc;
			*len = spw_fmt_ll((char *)r->s[slot].p, v);
			break;
		}
		case RDB_ENC_LZF:
			if ((rc = read_lzf(r, slot, len)) < 0)
				return rc;
			break;
		default:
			return rdb_corrupt(r, "unknown string encoding %llu", (unsigned long long)n);
		}
		*p = r->s[slot].p;
		return 0;
	}
	if ((rc = len_check(r, n, 0)) < 0 || (rc = slot_reserve(r, slot, n)) < 0)
		return rc;
	if ((rc = rdb_read_raw(r, r->s[slot].p, n)) < 0)
		return rc;
	*p = r->s[slot].p;
	*len = n;
	return 0;
}

int rdb_skip_string(rdb_reader *r)
{
	const uint8_t *p;
	size_t n;
	return rdb_read_string(r, 0, &p, &n);
}

int rdb_read_binary_double(rdb_reader *r, double *out)
{
	uint8_t b[8];
	int rc = rdb_read_raw(r, b, 8);
	if (rc < 0)
		return rc;
	uint64_t u = le_load(b, 8);
	memcpy(out, &u, 8);
	return 0;
}

/* Redis's rdbLoadDoubleValue: 253 NaN, 254 +inf, 255 -inf, else that many bytes of "%.17g" text. */
int rdb_read_string_double(rdb_reader *r, double *out)
{
	uint8_t n;
	char buf[256];
	int rc = rdb_read_u8(r, &n);
	if (rc < 0)
		return rc;
	switch (n) {
	case 253: *out = NAN; return 0;
	case 254: *out = INFINITY; return 0;
	case 255: *out = -INFINITY; return 0;
	}
	if ((rc = rdb_read_raw(r, buf, n)) < 0)
		return rc;
	buf[n] = '\0';
	if (sscanf(buf, "%lg", out) != 1)
		return rdb_corrupt(r, "invalid double '%s'", buf);
	return 0;
}

int rdb_read_millis(rdb_reader *r, int64_t *out)
{
	uint8_t b[8];
	int rc = rdb_read_raw(r, b, 8);
	if (rc == 0)
		*out = (int64_t)le_load(b, 8);
	return rc;
}

int rdb_type_kind(int t)
{
	switch (t) {
	case RDB_TYPE_STRING: return RDB_KIND_STRING;
	case RDB_TYPE_LIST: case RDB_TYPE_LIST_ZIPLIST: case RDB_TYPE_LIST_QUICKLIST:
	case RDB_TYPE_LIST_QUICKLIST_2: return RDB_KIND_LIST;
	case RDB_TYPE_SET: case RDB_TYPE_SET_INTSET: case RDB_TYPE_SET_LISTPACK: return RDB_KIND_SET;
	case RDB_TYPE_ZSET: case RDB_TYPE_ZSET_2: case RDB_TYPE_ZSET_ZIPLIST:
	case RDB_TYPE_ZSET_LISTPACK: return RDB_KIND_ZSET;
	case RDB_TYPE_HASH: case RDB_TYPE_HASH_ZIPMAP: case RDB_TYPE_HASH_ZIPLIST:
	case RDB_TYPE_HASH_LISTPACK: return RDB_KIND_HASH;
	case RDB_TYPE_STREAM_LISTPACKS: case RDB_TYPE_STREAM_LISTPACKS_2:
	case RDB_TYPE_STREAM_LISTPACKS_3: return RDB_KIND_STREAM;
	case RDB_TYPE_MODULE_PRE_GA: case RDB_TYPE_MODULE_2: return RDB_KIND_MODULE;
	}
	return RDB_KIND_UNKNOWN;
}

const char *rdb_kind_name(int kind)
{
	static const char *const names[RDB_KINDS] = { "string", "list", "set", "zset", "hash", "stream",
		"module", "unknown" };
	return kind >= 0 && kind < RDB_KINDS ? names[kind] : "unknown";
}
