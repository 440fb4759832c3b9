/*
 * bench_req.c - the key space, request encoding, pre-built batches and reply checks.
 *
 * Invariants:
 *  1. Keys and values are pure functions of the key index (and the key space's sizes): a load and
 *     a later run with -s agree on every byte without sharing anything but the flags.
 *  2. A value never parses as an integer (its first byte is a letter), so INCR on a loaded key is an
 *     error and counter keys ("c" + key) never collide with loaded keys (those are all digits).
 *  3. bench_req_size() is exact (for HGET/HSET a bound: the longest field name), and
 *     bench_hash_load_size() exact: encoders write into buffers sized by them, never past them.
 *  4. The checker never allocates: it compares replies against values regenerated block by block.
 *  5. A hash op's request names a cell, key * fields + field (bench.h), so the ring of in-flight
 *     requests, the batches and the checker carry one number per request for either kind of op.
 */
#include "bench/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/resp.h"

static const char *const op_names[BENCH_OP_COUNT] = {
	[BENCH_OP_GET] = "GET", [BENCH_OP_SET] = "SET", [BENCH_OP_MGET] = "MGET", [BENCH_OP_MSET] = "MSET",
	[BENCH_OP_INCR] = "INCR", [BENCH_OP_DEL] = "DEL", [BENCH_OP_EXISTS] = "EXISTS", [BENCH_OP_PING] = "PING",
	[BENCH_OP_HGET] = "HGET", [BENCH_OP_HSET] = "HSET",
};

const char *bench_op_name(int op)
{
	return op >= 0 && op < BENCH_OP_COUNT ? op_names[op] : NULL;
}

int bench_op_parse(const char *s)
{
	for (int i = 0; i < BENCH_OP_COUNT; i++)
		if (strcasecmp(s, op_names[i]) == 0)
			return i;
	return -EINVAL;
}

/* ---------------- key space ---------------- */

static uint32_t dec_digits(uint64_t v)
{
	uint32_t n = 1;
	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

uint32_t bench_key_digits(uint64_t dbsize)
{
	return dec_digits(dbsize > 0 ? dbsize - 1 : 0);
}

int bench_keyspace_init(bench_keyspace *ks, uint64_t dbsize, uint32_t keylen, uint32_t vallen, double theta)
{
	memset(ks, 0, sizeof(*ks));
	if (dbsize == 0)
		return -EINVAL;
	uint32_t digits = bench_key_digits(dbsize);
	if (keylen == 0)
		keylen = digits;
	if (keylen < digits || keylen > BENCH_KEYLEN_MAX || vallen > BENCH_VALLEN_MAX)
		return -EINVAL;
	ks->dbsize = dbsize;
	ks->keylen = keylen;
	ks->value_is_key = vallen == 0;
	ks->vallen = vallen ? vallen : keylen;
	if (theta != 0.0) {
		int rc = bench_zipf_init(&ks->z, dbsize, theta);
		if (rc < 0)
			return rc;
		ks->zipf = true;
	}
	return 0;
}

int bench_keyspace_hash(bench_keyspace *ks, uint32_t fields)
{
	if (fields == 0 || fields > BENCH_FIELDS_MAX || ks->value_is_key || ks->dbsize > UINT64_MAX / fields)
		return -EINVAL;
	ks->fields = fields;
	return 0;
}

void bench_key_format(const bench_keyspace *ks, uint64_t i, char *out)
{
	char *p = out + ks->keylen;
	do {
		*--p = (char)('0' + i % 10);
		i /= 10;
	} while (i && p > out);
	while (p > out)
		*--p = '0';
}

/* 64 symbols, 6 bits each: 10 symbols from one 64-bit block. The first 52 are letters. */
static const char val_alphabet[64] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
#define VAL_BLOCK 10

/* Block `blk` of key i's value (VAL_BLOCK bytes). */
static inline void value_block(uint64_t i, uint64_t blk, char *out)
{
	uint64_t w = bench_mix64(i * 0xd6e8feb86659fd93ULL + blk + 0x5851f42d4c957f2dULL);
	for (int j = 0; j < VAL_BLOCK; j++) {
		out[j] = val_alphabet[w & 63];
		w >>= 6;
	}
	if (blk == 0)
		out[0] = val_alphabet[(unsigned char)out[0] % 52];   /* a letter: never an integer */
}

void bench_value_format(const bench_keyspace *ks, uint64_t i, char *out)
{
	if (ks->value_is_key) {
		bench_key_format(ks, i, out);
		return;
	}
	char blk[VAL_BLOCK];
	for (uint32_t off = 0, b = 0; off < ks->vallen; off += VAL_BLOCK, b++) {
		uint32_t n = SPW_MIN((uint32_t)VAL_BLOCK, ks->vallen - off);
		value_block(i, b, blk);
		memcpy(out + off, blk, n);
	}
}

bool bench_value_matches(const bench_keyspace *ks, uint64_t i, const char *p, size_t len)
{
	if (len != ks->vallen)
		return false;
	if (ks->value_is_key) {
		char k[BENCH_KEYLEN_MAX];
		bench_key_format(ks, i, k);
		return memcmp(k, p, len) == 0;
	}
	char blk[VAL_BLOCK];
	for (uint32_t off = 0, b = 0; off < ks->vallen; off += VAL_BLOCK, b++) {
		uint32_t n = SPW_MIN((uint32_t)VAL_BLOCK, ks->vallen - off);
		value_block(i, b, blk);
		if (memcmp(p + off, blk, n) != 0)
			return false;
	}
	return true;
}

/* ---------------- requests ---------------- */

/* Bytes of "<c><n>\r\n". */
static size_t hdr_size(uint64_t n)
{
	return 1 + dec_digits(n) + 2;
}

/* Bytes of a bulk string of n bytes: "$n\r\n" + n + "\r\n". */
static size_t bulk_size(uint64_t n)
{
	return hdr_size(n) + n + 2;
}

/* n in decimal at p; returns the end. */
static char *put_dec(char *p, uint64_t n)
{
	uint32_t d = dec_digits(n);
	for (uint32_t j = d; j > 0; j--) {
		p[j - 1] = (char)('0' + n % 10);
		n /= 10;
	}
	return p + d;
}

static char *put_hdr(char *p, char c, uint64_t n)
{
	*p++ = c;
	p = put_dec(p, n);
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/* Bytes of field f's name, "f<decimal f>". */
static uint32_t field_len(uint64_t f)
{
	return 1 + dec_digits(f);
}

/* Field f's name as a bulk string. */
static char *put_field(char *p, uint64_t f)
{
	p = put_hdr(p, '$', field_len(f));
	*p++ = 'f';
	p = put_dec(p, f);
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/* The value of key (or cell) i as a bulk string; *val_off (may be NULL) gets its offset from base. */
static char *put_value(const bench_keyspace *ks, uint64_t i, char *p, const char *base, uint32_t *val_off)
{
	p = put_hdr(p, '$', ks->vallen);
	if (val_off)
		*val_off = (uint32_t)(p - base);
	bench_value_format(ks, i, p);
	p += ks->vallen;
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

static char *put_bulk(char *p, const char *s, size_t n)
{
	p = put_hdr(p, '$', n);
	memcpy(p, s, n);
	p += n;
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/* Arguments of op with n keys, command name included. */
static uint64_t req_argc(int op, uint32_t n)
{
	switch (op) {
	case BENCH_OP_SET:
	case BENCH_OP_HGET: return 3;
	case BENCH_OP_HSET: return 4;
	case BENCH_OP_MGET: return 1 + (uint64_t)n;
	case BENCH_OP_MSET: return 1 + 2 * (uint64_t)n;
	case BENCH_OP_PING: return 1;
	default: return 2;
	}
}

static uint32_t req_keylen(const bench_keyspace *ks, int op)
{
	return op == BENCH_OP_INCR ? ks->keylen + 1 : ks->keylen;
}

size_t bench_req_size(const bench_keyspace *ks, int op, uint32_t nkeys)
{
	if (!bench_op_multi(op))
		nkeys = op == BENCH_OP_PING ? 0 : 1;
	size_t s = hdr_size(req_argc(op, nkeys)) + bulk_size(strlen(op_names[op]));
	s += (size_t)nkeys * bulk_size(req_keylen(ks, op));
	if (bench_op_hash(op))
		s += bulk_size(field_len(ks->fields ? ks->fields - 1 : 0));
	if (op == BENCH_OP_SET || op == BENCH_OP_MSET || op == BENCH_OP_HSET)
		s += (size_t)nkeys * bulk_size(ks->vallen);
	return s;
}

size_t bench_req_encode(const bench_keyspace *ks, int op, const uint64_t *keys, uint32_t nkeys, char *out,
                        uint32_t *key_off, uint32_t *val_off)
{
	if (!bench_op_multi(op))
		nkeys = op == BENCH_OP_PING ? 0 : 1;
	char *p = put_hdr(out, '*', req_argc(op, nkeys));
	p = put_bulk(p, op_names[op], strlen(op_names[op]));
	bool hash = bench_op_hash(op);
	bool with_value = op == BENCH_OP_SET || op == BENCH_OP_MSET || op == BENCH_OP_HSET;
	for (uint32_t j = 0; j < nkeys; j++) {
		p = put_hdr(p, '$', req_keylen(ks, op));
		if (key_off)
			key_off[j] = (uint32_t)(p - out);
		if (op == BENCH_OP_INCR)
			*p++ = 'c';
		bench_key_format(ks, hash ? keys[j] / ks->fields : keys[j], p);
		p += ks->keylen;
		*p++ = '\r';
		*p++ = '\n';
		if (hash)
			p = put_field(p, keys[j] % ks->fields);
		if (with_value)
			p = put_value(ks, keys[j], p, out, val_off ? &val_off[j] : NULL);
		else if (val_off)
			val_off[j] = 0;
	}
	return (size_t)(p - out);
}

size_t bench_hash_load_size(const bench_keyspace *ks)
{
	size_t s = hdr_size(2 + 2 * (uint64_t)ks->fields) + bulk_size(4) + bulk_size(ks->keylen);
	for (uint32_t f = 0; f < ks->fields; f++)
		s += bulk_size(field_len(f)) + bulk_size(ks->vallen);
	return s;
}

size_t bench_hash_load_encode(const bench_keyspace *ks, uint64_t key, char *out)
{
	char *p = put_hdr(out, '*', 2 + 2 * (uint64_t)ks->fields);
	p = put_bulk(p, "HSET", 4);
	p = put_hdr(p, '$', ks->keylen);
	bench_key_format(ks, key, p);
	p += ks->keylen;
	*p++ = '\r';
	*p++ = '\n';
	for (uint32_t f = 0; f < ks->fields; f++) {
		p = put_field(p, f);
		p = put_value(ks, key * ks->fields + f, p, out, NULL);
	}
	return (size_t)(p - out);
}

/* ---------------- batches ---------------- */

void bench_batch_free(bench_batch *b)
{
	free(b->buf);
	free(b->keys);
	free(b->key_off);
	free(b->val_off);
	memset(b, 0, sizeof(*b));
}

int bench_batch_build(bench_batch *b, const bench_keyspace *ks, int op, uint32_t count, bench_rng *r,
                      uint64_t *seq)
{
	memset(b, 0, sizeof(*b));
	if (count < 1 || !bench_op_name(op) || (!seq && !r))
		return -EINVAL;
	bool multi = bench_op_multi(op);
	size_t one = multi ? bench_req_size(ks, op, count) : bench_req_size(ks, op, 1);
	size_t size = multi ? one : one * count;
	if (size > UINT32_MAX)
		return -EINVAL;   /* offsets are 32-bit */
	b->op = op;
	b->nreq = multi ? 1 : count;
	b->nkeys = op == BENCH_OP_PING ? 0 : count;
	b->buf = malloc(size);
	b->keys = calloc(count, sizeof(*b->keys));
	b->key_off = calloc(count, sizeof(*b->key_off));
	b->val_off = calloc(count, sizeof(*b->val_off));
	if (!b->buf || !b->keys || !b->key_off || !b->val_off) {
		bench_batch_free(b);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < b->nkeys; j++)
		b->keys[j] = seq ? (*seq)++ : bench_req_pick(ks, op, r);
	if (multi) {
		b->len = bench_req_encode(ks, op, b->keys, count, b->buf, b->key_off, b->val_off);
	} else {
		size_t off = 0;
		for (uint32_t j = 0; j < count; j++) {
			uint32_t ko = 0, vo = 0;
			size_t n = bench_req_encode(ks, op, b->nkeys ? &b->keys[j] : NULL, 1, b->buf + off, &ko, &vo);
			b->key_off[j] = (uint32_t)off + ko;
			b->val_off[j] = vo ? (uint32_t)off + vo : 0;
			off += n;
		}
		b->len = off;
	}
	return 0;
}

/* ---------------- reply checks ---------------- */

void bench_check_merge(bench_check *dst, const bench_check *src)
{
	dst->errors += src->errors;
	dst->wrong += src->wrong;
	dst->missing += src->missing;
	dst->nils += src->nils;
	if (!dst->first[0] && src->first[0])
		memcpy(dst->first, src->first, sizeof(dst->first));
}

/* Escape up to max bytes of p into out (cap bytes): printable ASCII as is, \r \n, else \xHH. */
static size_t escape_into(char *out, size_t cap, const char *p, size_t n, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	for (size_t i = 0; i < n && i < max; i++) {
		unsigned char ch = (unsigned char)p[i];
		char tmp[4];
		size_t tl;
		if (ch == '\r') { tmp[0] = '\\'; tmp[1] = 'r'; tl = 2; }
		else if (ch == '\n') { tmp[0] = '\\'; tmp[1] = 'n'; tl = 2; }
		else if (ch >= 0x20 && ch < 0x7f && ch != '\\') { tmp[0] = (char)ch; tl = 1; }
		else { tmp[0] = '\\'; tmp[1] = 'x'; tmp[2] = hex[ch >> 4]; tmp[3] = hex[ch & 15]; tl = 4; }
		if (o + tl + 4 >= cap)
			break;
		memcpy(out + o, tmp, tl);
		o += tl;
	}
	if (n > max && o + 4 < cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

void bench_check_note(bench_check *c, int kind, int op, uint64_t key, const char *what, size_t wlen)
{
	static const char *const kinds[] = { "ok", "error reply", "wrong reply", "missing key" };
	switch (kind) {
	case BENCH_REPLY_ERROR: c->errors++; break;
	case BENCH_REPLY_WRONG: c->wrong++; break;
	case BENCH_REPLY_MISSING: c->missing++; break;
	default: return;
	}
	if (c->first[0])
		return;
	int n;
	if (op == BENCH_OP_PING)
		n = snprintf(c->first, sizeof(c->first), "PING: %s: ", kinds[kind]);
	else
		n = snprintf(c->first, sizeof(c->first), "%s %s %llu: %s: ", bench_op_name(op),
		             bench_op_hash(op) ? "cell" : "key", (unsigned long long)key, kinds[kind]);
	if (n > 0 && (size_t)n < sizeof(c->first))
		escape_into(c->first + n, sizeof(c->first) - (size_t)n, what, wlen, 64);
}

static bool reply_is(const char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len == n && memcmp(p, lit, n) == 0;
}

/* "$<n>\r\n<data>\r\n" as delimited by resp_reply_skip: the payload, or false for a null bulk. */
static bool bulk_payload(const char *p, size_t len, const char **data, size_t *dlen)
{
	const char *cr = memchr(p, '\r', len);
	if (!cr || p[1] == '-')
		return false;
	long long n;
	if (!spw_parse_ll(p + 1, (size_t)(cr - p - 1), &n) || n < 0)
		return false;
	*data = cr + 2;
	*dlen = (size_t)n;
	return (size_t)(cr + 2 - p) + (size_t)n + 2 == len;
}

int bench_reply_check(bench_check *c, const bench_keyspace *ks, int op, uint64_t key, const char *p, size_t len)
{
	int kind = BENCH_REPLY_OK;
	if (len == 0) {
		kind = BENCH_REPLY_WRONG;
		goto out;
	}
	if (p[0] == '-' || p[0] == '!') {
		kind = BENCH_REPLY_ERROR;
		goto out;
	}
	switch (op) {
	case BENCH_OP_GET:
	case BENCH_OP_MGET:
	case BENCH_OP_HGET: {
		const char *d;
		size_t dl;
		bool nil = (p[0] == '$' && len >= 3 && p[1] == '-') || p[0] == '_';
		if (nil)
			kind = c->allow_missing ? (c->nils++, BENCH_REPLY_OK) : BENCH_REPLY_MISSING;
		else if (p[0] != '$' || !bulk_payload(p, len, &d, &dl) || !bench_value_matches(ks, key, d, dl))
			kind = BENCH_REPLY_WRONG;
		break;
	}
	case BENCH_OP_SET:
	case BENCH_OP_MSET:
		if (!reply_is(p, len, "+OK\r\n"))
			kind = BENCH_REPLY_WRONG;
		break;
	case BENCH_OP_INCR: {
		long long v;
		if (p[0] != ':' || len < 4 || !spw_parse_ll(p + 1, len - 3, &v))
			kind = BENCH_REPLY_WRONG;
		break;
	}
	case BENCH_OP_HSET: {
		long long v;
		if (p[0] != ':' || len < 4 || !spw_parse_ll(p + 1, len - 3, &v) || v < 0 || v > (long long)ks->fields)
			kind = BENCH_REPLY_WRONG;
		break;
	}
	case BENCH_OP_DEL:
		if (!reply_is(p, len, ":0\r\n") && !reply_is(p, len, ":1\r\n"))
			kind = BENCH_REPLY_WRONG;
		break;
	case BENCH_OP_EXISTS:
		if (reply_is(p, len, ":0\r\n"))
			kind = c->allow_missing ? (c->nils++, BENCH_REPLY_OK) : BENCH_REPLY_MISSING;
		else if (!reply_is(p, len, ":1\r\n"))
			kind = BENCH_REPLY_WRONG;
		break;
	case BENCH_OP_PING:
		if (!reply_is(p, len, "+PONG\r\n"))
			kind = BENCH_REPLY_WRONG;
		break;
	default:
		kind = BENCH_REPLY_WRONG;
		break;
	}
out:
	if (kind != BENCH_REPLY_OK)
		bench_check_note(c, kind, op, key, p, len);
	return kind;
}

int bench_array_header(const char *p, size_t len, size_t *consumed, int64_t *count)
{
	if (len == 0)
		return RESP_INCOMPLETE;
	if (p[0] != '*')
		return RESP_EPROTO;
	size_t lim = len < 24 ? len : 24;   /* "*" + 20 digits + CRLF */
	const char *cr = memchr(p, '\r', lim);
	if (!cr)
		return len < 24 ? RESP_INCOMPLETE : RESP_EPROTO;
	size_t at = (size_t)(cr - p);
	if (at + 1 >= len)
		return RESP_INCOMPLETE;
	long long n;
	if (cr[1] != '\n' || !spw_parse_ll(p + 1, at - 1, &n) || n < -1)
		return RESP_EPROTO;
	*consumed = at + 2;
	*count = n;
	return RESP_OK;
}
