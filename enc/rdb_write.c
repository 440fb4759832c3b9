/*
 * rdb_write.c - writing RDB values as redis-server 7.0 does: lengths, strings (integer and LZF
 * encodings chosen by Redis's rules), binary doubles, and DUMP payloads for every type we store.
 *
 * Design notes:
 *  1. DUMP must give redis-server's bytes for the same value, so the string rules are Redis's
 *     rdbSaveRawString exactly: up to 11 bytes, a canonical integer (string2ll and back) in the
 *     int8/16/32 range becomes an int encoding; over 20 bytes, lzf_compress into len - 4 bytes
 *     (so it saves at least 4, else raw) with liblzf, the same LZF Redis bundles; otherwise the
 *     length and the bytes.
 *  2. Collections are written from their Redis-format bytes (listpack, intset): the type code keeps
 *     them as Redis does, so its DUMP is a copy. Sets of strings are type 2 from their members
 *     (7.0 has no listpack sets); lists are quicklist 2, one packed node per listpack.
 *  3. The buffer grows by doubling; a failed allocation sticks (oom) and is reported once by
 *     rdb_dump_finish, so the writers themselves return nothing.
 */
#include "enc/rdb.h"
#include "common/spw.h"

#include <errno.h>
#include <limits.h>
#include <liblzf/lzf.h>
#include <stdlib.h>
#include <string.h>

void rdb_buf_fini(rdb_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static bool buf_reserve(rdb_buf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->cap - b->len >= n)
		return true;
	size_t cap = SPW_MAX(b->cap * 2, b->len + n);
	cap = SPW_MAX(cap, 64);
	uint8_t *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void rdb_buf_put(rdb_buf *b, const void *p, size_t n)
{
	if (n && buf_reserve(b, n)) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
}

static void put_u8(rdb_buf *b, uint8_t v)
{
	rdb_buf_put(b, &v, 1);
}

static void put_le(rdb_buf *b, uint64_t v, int n)
{
	uint8_t t[8];
	for (int i = 0; i < n; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	rdb_buf_put(b, t, n);
}

/* Redis's rdbSaveLen. */
void rdb_write_len(rdb_buf *b, uint64_t len)
{
	uint8_t t[9];
	if (len < 64) {
		put_u8(b, (uint8_t)len);
	} else if (len < 16384) {
		t[0] = (uint8_t)(0x40 | (len >> 8));
		t[1] = (uint8_t)len;
		rdb_buf_put(b, t, 2);
	} else {
		int n = len <= UINT32_MAX ? 4 : 8;
		t[0] = n == 4 ? 0x80 : 0x81;
		for (int i = 0; i < n; i++)
			t[1 + i] = (uint8_t)(len >> (8 * (n - 1 - i)));
		rdb_buf_put(b, t, 1 + n);
	}
}

/* Redis's string2ll: an optional '-', no leading zeros, no '+', fits a long long. */
static bool canonical_ll(const uint8_t *p, size_t len, long long *out)
{
	char buf[24];
	long long v = 0;
	size_t i = 0;
	bool neg = false;
	if (len == 0 || len > 20)
		return false;
	if (p[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == len || p[i] < '1' || p[i] > '9')
		return len == 1 && p[0] == '0' ? (*out = 0, true) : false;
	unsigned long long u = 0;
	for (; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		if (u > (ULLONG_MAX - (p[i] - '0')) / 10)
			return false;
		u = u * 10 + (p[i] - '0');
	}
	if (neg ? u > (unsigned long long)LLONG_MAX + 1 : u > LLONG_MAX)
		return false;
	v = neg ? (long long)(0 - u) : (long long)u;
	/* and back: only a string equal to the integer's text is encoded as one */
	if (spw_fmt_ll(buf, v) != len || memcmp(buf, p, len) != 0)
		return false;
	*out = v;
	return true;
}

/* Redis's rdbEncodeInteger: 0 when v needs more than 32 bits. */
static int int_encode(long long v, uint8_t *t)
{
	int n;
	if (v >= INT8_MIN && v <= INT8_MAX)
		n = 1;
	else if (v >= INT16_MIN && v <= INT16_MAX)
		n = 2;
	else if (v >= INT32_MIN && v <= INT32_MAX)
		n = 4;
	else
		return 0;
	t[0] = 0xc0 | (n == 1 ? RDB_ENC_INT8 : n == 2 ? RDB_ENC_INT16 : RDB_ENC_INT32);
	for (int i = 0; i < n; i++)
		t[1 + i] = (uint8_t)((unsigned long long)v >> (8 * i));
	return 1 + n;
}

/* rdbSaveLzfStringObject: true when written compressed. */
static bool write_lzf(rdb_buf *b, const uint8_t *p, size_t len)
{
	size_t outlen = len - 4;
	uint8_t *out = malloc(outlen + 1);
	if (!out)
		return false;   /* Redis falls back to raw too */
	unsigned int clen = lzf_compress(p, (unsigned int)len, out, (unsigned int)outlen);
	if (clen > 0) {
		put_u8(b, 0xc0 | RDB_ENC_LZF);
		rdb_write_len(b, clen);
		rdb_write_len(b, len);
		rdb_buf_put(b, out, clen);
	}
	free(out);
	return clen > 0;
}

void rdb_write_string(rdb_buf *b, const void *s, size_t len)
{
	const uint8_t *p = s;
	long long v;
	uint8_t t[5];
	int n;
	if (len <= 11 && canonical_ll(p, len, &v) && (n = int_encode(v, t)) > 0) {
		rdb_buf_put(b, t, n);
		return;
	}
	if (len > 20 && len <= UINT32_MAX && write_lzf(b, p, len))
		return;
	rdb_write_len(b, len);
	rdb_buf_put(b, p, len);
}

void rdb_write_binary_double(rdb_buf *b, double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	put_le(b, u, 8);
}

/* A value that is one RDB string: the type byte, then the string. */
static void dump_blob(rdb_buf *b, int type, const void *p, size_t n)
{
	put_u8(b, (uint8_t)type);
	rdb_write_string(b, p, n);
}

void rdb_dump_string(rdb_buf *b, const void *p, size_t len) { dump_blob(b, RDB_TYPE_STRING, p, len); }
void rdb_dump_hash_listpack(rdb_buf *b, const void *lp, size_t n) { dump_blob(b, RDB_TYPE_HASH_LISTPACK, lp, n); }
void rdb_dump_zset_listpack(rdb_buf *b, const void *lp, size_t n) { dump_blob(b, RDB_TYPE_ZSET_LISTPACK, lp, n); }
void rdb_dump_set_intset(rdb_buf *b, const void *is, size_t n) { dump_blob(b, RDB_TYPE_SET_INTSET, is, n); }

void rdb_dump_set_begin(rdb_buf *b, uint64_t count)
{
	put_u8(b, RDB_TYPE_SET);
	rdb_write_len(b, count);
}

void rdb_dump_set_member(rdb_buf *b, const void *p, size_t len)
{
	rdb_write_string(b, p, len);
}

void rdb_dump_list_begin(rdb_buf *b, uint64_t nodes)
{
	put_u8(b, RDB_TYPE_LIST_QUICKLIST_2);
	rdb_write_len(b, nodes);
}

void rdb_dump_list_node(rdb_buf *b, const void *lp, size_t n)
{
	rdb_write_len(b, 2);   /* QUICKLIST_NODE_CONTAINER_PACKED */
	rdb_write_string(b, lp, n);
}

int rdb_dump_finish(rdb_buf *b)
{
	put_le(b, RDB_VERSION, 2);
	if (b->oom)
		return -ENOMEM;
	put_le(b, rdb_crc64(0, b->p, b->len), 8);
	return b->oom ? -ENOMEM : 0;
}
