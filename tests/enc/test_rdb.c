/*
 * test_rdb.c - enc/: CRC64, RDB lengths and strings, DUMP payloads byte for byte as redis-server
 * 7.0.15 writes them, decoding of every value type and encoding, RDB files, hostile input.
 *
 * The payloads below were captured from redis-server 7.0.15 (DUMP, and SAVE's dump.rdb) started with
 * hash/zset-max-listpack-entries 4, set-max-intset-entries 4 and list-max-listpack-size 4, so that
 * both encodings of each type show up. The formats 7.0 no longer writes (ziplist, zipmap, quicklist
 * 1, plain LIST and ZSET) are built here by hand from their format descriptions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/spw.h"
#include "enc/rdb.h"

/* ---------------- helpers ---------------- */

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = 0;
	for (; h[0] && h[1]; h += 2) {
		unsigned v;
		sscanf(h, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

/* A visitor that writes what it sees as text: "begin hash 3|f1=v1|...|end". */
typedef struct rec {
	char s[16384];
	size_t n;
} rec;

static void rec_add(rec *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	r->n += (size_t)vsnprintf(r->s + r->n, sizeof(r->s) - r->n, fmt, ap);
	va_end(ap);
	if (r->n >= sizeof(r->s))
		r->n = sizeof(r->s) - 1;
}

/* Strings are copied whole (they may hold NUL bytes). */
static int v_string(void *c, const uint8_t *p, size_t n)
{
	rec *r = c;
	rec_add(r, "str ");
	n = SPW_MIN(n, sizeof(r->s) - 1 - r->n);
	memcpy(r->s + r->n, p, n);
	r->n += n;
	return 0;
}
static int v_begin(void *c, int kind, int t, uint64_t cnt)
{
	rec_add(c, "begin %s %d %llu", rdb_kind_name(kind), t, (unsigned long long)cnt);
	return 0;
}
static int v_hash(void *c, const uint8_t *f, size_t fl, const uint8_t *v, size_t vl)
{
	rec_add(c, "|%.*s=%.*s", (int)fl, f, (int)vl, v);
	return 0;
}
static int v_list(void *c, const uint8_t *p, size_t n)
{
	if (n > 40)
		rec_add(c, "|<%zu bytes %c>", n, p[0]);
	else
		rec_add(c, "|%.*s", (int)n, p);
	return 0;
}
static int v_zset(void *c, const uint8_t *p, size_t n, double s) { rec_add(c, "|%.*s:%g", (int)n, p, s); return 0; }
static int v_end(void *c) { rec_add(c, "|end"); return 0; }
static const rdb_visitor rec_vis = { v_string, v_begin, v_hash, v_list, v_list, v_zset, v_end };

/* Verify and decode a DUMP payload given in hex; the record into r. */
static int decode_hex(const char *hex, rec *r, int *type)
{
	static uint8_t b[65536];
	size_t n = unhex(hex, b);
	memset(r, 0, sizeof(*r));
	int rc = rdb_dump_verify(b, n, NULL);
	if (rc < 0)
		return rc;
	return rdb_dump_decode(b, n, &rec_vis, r, type);
}

/* A payload built by hand: type, value bytes, then version 10 and the CRC. */
static size_t payload_make(uint8_t *out, int type, const uint8_t *val, size_t n)
{
	rdb_buf b = { 0 };
	uint8_t t = (uint8_t)type;
	rdb_buf_put(&b, &t, 1);
	rdb_buf_put(&b, val, n);
	assert_int_equal(rdb_dump_finish(&b), 0);
	memcpy(out, b.p, b.len);
	size_t len = b.len;
	rdb_buf_fini(&b);
	return len;
}

/* ---------------- CRC64 ---------------- */

static uint64_t crc64_bitwise(uint64_t crc, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x95ac9329ac4bc9b5ULL : crc >> 1;
	}
	return crc;
}

static void test_crc64_matches_redis_test_vector(void **st)
{
	(void)st;
	assert_true(rdb_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caULL);
	/* Redis's crc64 test: the Lorem ipsum sentence. */
	const char *li = "This is a test of the emergency broadcast system.";
	assert_true(rdb_crc64(0, li, strlen(li)) == crc64_bitwise(0, (const uint8_t *)li, strlen(li)));
}

static void test_crc64_slices_agree_with_the_bitwise_form_at_every_split(void **st)
{
	(void)st;
	uint8_t buf[1031];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	uint64_t want = crc64_bitwise(0, buf, sizeof(buf));
	assert_true(rdb_crc64(0, buf, sizeof(buf)) == want);
	for (size_t cut = 0; cut < 40; cut++)
		assert_true(rdb_crc64(rdb_crc64(0, buf, cut), buf + cut, sizeof(buf) - cut) == want);
}

/* ---------------- lengths and strings ---------------- */

static void test_lengths_round_trip_in_each_size(void **st)
{
	(void)st;
	static const struct { uint64_t v; size_t bytes; } cases[] = {
		{ 0, 1 }, { 63, 1 }, { 64, 2 }, { 16383, 2 }, { 16384, 5 }, { UINT32_MAX, 5 },
		{ (uint64_t)UINT32_MAX + 1, 9 }, { UINT64_MAX, 9 },
	};
	for (size_t i = 0; i < SPW_ARRAY_LEN(cases); i++) {
		rdb_buf b = { 0 };
		rdb_write_len(&b, cases[i].v);
		assert_int_equal(b.len, cases[i].bytes);
		rdb_reader r;
		rdb_reader_init_buf(&r, b.p, b.len);
		uint64_t got;
		bool enc;
		assert_int_equal(rdb_read_len(&r, &got, &enc), 0);
		assert_false(enc);
		assert_true(got == cases[i].v);
		assert_int_equal(rdb_reader_offset(&r), b.len);
		rdb_reader_fini(&r);
		rdb_buf_fini(&b);
	}
}

/* Values and their DUMP from redis-server 7.0.15 (SET k v; DUMP k). */
static const struct { const char *v; size_t len; const char *dump; } str_dumps[] = {
	{ "0", 1, "00c0000a009840a778f8500308" },
	{ "-1", 2, "00c0ff0a000c937e2485089dc5" },
	{ "127", 3, "00c07f0a000db5eb315254c514" },
	{ "-128", 4, "00c0800a009966326d2f0c5bd9" },
	{ "128", 3, "00c180000a00eb7ab3b510cf4b65" },
	{ "32767", 5, "00c1ff7f0a00495a37da17f4d52b" },
	{ "-32768", 6, "00c100800a00b540064753bb1ace" },
	{ "32768", 5, "00c2008000000a0045d82eedd5bda910" },
	{ "2147483647", 10, "00c2ffffff7f0a002c74e59ee02eada1" },
	{ "-2147483648", 11, "00c2000000800a00c74f873e33558187" },
	{ "2147483648", 10, "000a323134373438333634380a00e7b129a34c1d76ee" },
	{ "12345678901", 11, "000b31323334353637383930310a00304e52d727176510" },
	{ "007", 3, "00033030370a007258e27b4c69bad9" },
	{ "-0", 2, "00022d300a00d5411fd9d6d050cc" },
	{ " 1", 2, "000220310a003fe5791ae5defb1b" },
	{ "hello", 5, "000568656c6c6f0a006372df766534200a" },
	{ "aaaaaaaaaaaaaaaaaaaaa", 21, "00c30615016161e00a000a00fd0cb36807413f68" },
	{ "abababababababababababababababababababababababababababababababababababababababab", 80,
	  "00c30a405002616261e042010161620a00949d5f0eb1dea445" },
	{ "\x00\xc3\xbf\x01" "binary", 10, "000a00c3bf0162696e6172790a007e42079245e24d00" },
};

static void test_string_dumps_equal_redis_bytes(void **st)
{
	(void)st;
	uint8_t want[256];
	for (size_t i = 0; i < SPW_ARRAY_LEN(str_dumps); i++) {
		size_t n = unhex(str_dumps[i].dump, want);
		rdb_buf b = { 0 };
		rdb_dump_string(&b, str_dumps[i].v, str_dumps[i].len);
		assert_int_equal(rdb_dump_finish(&b), 0);
		assert_int_equal(b.len, n);
		assert_memory_equal(b.p, want, n);
		rdb_buf_fini(&b);
	}
}

static void test_string_dumps_of_redis_decode_to_the_value(void **st)
{
	(void)st;
	rec r;
	int type;
	for (size_t i = 0; i < SPW_ARRAY_LEN(str_dumps); i++) {
		assert_int_equal(decode_hex(str_dumps[i].dump, &r, &type), 0);
		assert_int_equal(type, RDB_TYPE_STRING);
		assert_int_equal(r.n, 4 + str_dumps[i].len);
		assert_memory_equal(r.s + 4, str_dumps[i].v, str_dumps[i].len);
	}
}

/* Long strings: LZF when it saves 4 bytes (a repetitive one), raw when it does not (random bytes),
 * and both read back; a 70000-byte length takes the 32-bit length form. */
static void test_long_strings_round_trip_compressed_or_raw(void **st)
{
	(void)st;
	size_t n = 70000;
	uint8_t *s = malloc(n);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t x = 88172645463325252ULL;
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			s[i] = pass == 0 ? (uint8_t)("abcdefgh"[i % 8]) : (uint8_t)x;
		}
		rdb_buf b = { 0 };
		rdb_write_string(&b, s, n);
		assert_int_equal(b.p[0], pass == 0 ? 0xc3 : 0x80);
		assert_true(pass == 0 ? b.len < n / 4 : b.len == n + 5);
		rdb_reader r;
		rdb_reader_init_buf(&r, b.p, b.len);
		const uint8_t *p;
		size_t len;
		assert_int_equal(rdb_read_string(&r, 1, &p, &len), 0);
		assert_int_equal(len, n);
		assert_memory_equal(p, s, n);
		rdb_reader_fini(&r);
		rdb_buf_fini(&b);
	}
	free(s);
}

static void test_doubles_read_in_both_formats(void **st)
{
	(void)st;
	rdb_buf b = { 0 };
	rdb_write_binary_double(&b, -2.5);
	static const uint8_t txt[] = { 4, '1', '.', '2', '5', 253, 254, 255 };
	rdb_buf_put(&b, txt, sizeof(txt));
	rdb_reader r;
	rdb_reader_init_buf(&r, b.p, b.len);
	double d;
	assert_int_equal(rdb_read_binary_double(&r, &d), 0);
	assert_true(d == -2.5);
	assert_int_equal(rdb_read_string_double(&r, &d), 0);
	assert_true(d == 1.25);
	assert_int_equal(rdb_read_string_double(&r, &d), 0);
	assert_true(isnan(d));
	assert_int_equal(rdb_read_string_double(&r, &d), 0);
	assert_true(isinf(d) && d > 0);
	assert_int_equal(rdb_read_string_double(&r, &d), 0);
	assert_true(isinf(d) && d < 0);
	assert_int_equal(rdb_read_string_double(&r, &d), SPW_E_CORRUPT);   /* the end */
	rdb_reader_fini(&r);
	rdb_buf_fini(&b);
}

/* ---------------- collections from redis-server ---------------- */

static const struct { const char *name, *hex, *want; int type; } coll_dumps[] = {
	{ "hash listpack", "101d1d0000000600826631038276310382663203f1393003816e02dff902ff0a004a78dedf32870999",
	  "begin hash 16 3|f1=v1|f2=12345|n=-7|end", RDB_TYPE_HASH_LISTPACK },
	{ "hash hashtable", "04050161c0010165c0050163c0030164c0040162c0020a00031480a329b8805a",
	  "begin hash 4 5|a=1|e=5|c=3|d=4|b=2|end", RDB_TYPE_HASH },
	{ "zset listpack", "111a1a0000000600816202dffe0281610283312e35048163020301ff0a00e5c16814373f6b4e",
	  "begin zset 17 3|b:-2|a:1.5|c:3|end", RDB_TYPE_ZSET_LISTPACK },
	{ "zset skiplist", "0505016500000000000015400164000000000000104001630000000000000840016200000000000000400161000000000000f03f0a00df9b5bf4cd2f67bc",
	  "begin zset 5 5|e:5.25|d:4|c:3|b:2|a:1|end", RDB_TYPE_ZSET_2 },
	{ "set intset", "0b14040000000300000038ffffff01000000701101000a0042b342c34acb72ed",
	  "begin set 11 3|-200|1|70000|end", RDB_TYPE_SET_INTSET },
	{ "set hashtable", "020101780a00ffe880ba760c2f09", "begin set 2 1|x|end", RDB_TYPE_SET },
	{ "list quicklist", "120202191900000004008161028162020c01f400a22f4dffffffff09ff0210100000000300816502816602816702ff0a00ffe8a2d2ed0bcf4c",
	  "begin list 18 0|a|b|12|-3000000000|e|f|g|end", RDB_TYPE_LIST_QUICKLIST_2 },
	{ "list plain node", "120202c3404a539607961300000100f08820060078e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ee0002278dff020a0a0000000100817902ff0a0007c857a492a8e90b",
	  "begin list 18 0|<5000 bytes x>|y|end", RDB_TYPE_LIST_QUICKLIST_2 },
};

static void test_collection_dumps_of_redis_decode_in_every_encoding(void **st)
{
	(void)st;
	rec r;
	int type;
	for (size_t i = 0; i < SPW_ARRAY_LEN(coll_dumps); i++) {
		int rc = decode_hex(coll_dumps[i].hex, &r, &type);
		if (rc != 0 || strcmp(r.s, coll_dumps[i].want) != 0)
			fail_msg("%s: rc %d, got '%s'", coll_dumps[i].name, rc, r.s);
		assert_int_equal(type, coll_dumps[i].type);
	}
}

/* The writers given Redis-format bytes reproduce redis-server's DUMP: the listpack or intset is
 * cut out of the captured payload (type byte, length, blob) and written again. */
static void test_collection_writers_reproduce_redis_dumps(void **st)
{
	(void)st;
	static uint8_t want[4096];
	for (size_t i = 0; i < SPW_ARRAY_LEN(coll_dumps); i++) {
		size_t n = unhex(coll_dumps[i].hex, want);
		rdb_buf b = { 0 };
		const uint8_t *blob = want + 2;   /* these blobs are < 64 bytes: one length byte */
		size_t bl = want[1];
		switch (coll_dumps[i].type) {
		case RDB_TYPE_HASH_LISTPACK: rdb_dump_hash_listpack(&b, blob, bl); break;
		case RDB_TYPE_ZSET_LISTPACK: rdb_dump_zset_listpack(&b, blob, bl); break;
		case RDB_TYPE_SET_INTSET: rdb_dump_set_intset(&b, blob, bl); break;
		case RDB_TYPE_SET:
			rdb_dump_set_begin(&b, 1);
			rdb_dump_set_member(&b, "x", 1);
			break;
		case RDB_TYPE_LIST_QUICKLIST_2:
			if (i != 6)
				continue;
			rdb_dump_list_begin(&b, 2);   /* nodes of 0x19 and 0x10 bytes at offsets 4 and 31 */
			rdb_dump_list_node(&b, want + 4, 0x19);
			rdb_dump_list_node(&b, want + 31, 0x10);
			break;
		default:
			continue;
		}
		assert_int_equal(rdb_dump_finish(&b), 0);
		if (b.len != n || memcmp(b.p, want, n) != 0)
			fail_msg("%s: the writer's bytes differ", coll_dumps[i].name);
		rdb_buf_fini(&b);
	}
}

/* ---------------- the old encodings, built by hand ---------------- */

/* A ziplist of the given entries (strings; "#N" entries are written as integers in the encoding
 * that the value needs: immediate, int8, int16, int24, int32, int64). */
static size_t ziplist_build(uint8_t *zl, const char *const *items, int n)
{
	size_t p = 10, prev = 0, last = 10;
	for (int i = 0; i < n; i++) {
		size_t start = p;
		last = p;
		if (prev < 254) {
			zl[p++] = (uint8_t)prev;
		} else {
			zl[p++] = 254;
			for (int k = 0; k < 4; k++)
				zl[p++] = (uint8_t)(prev >> (8 * k));
		}
		const char *s = items[i];
		if (s[0] == '#') {
			long long v = strtoll(s + 1, NULL, 10);
			int w;
			if (v >= 0 && v <= 12) {
				zl[p++] = (uint8_t)(0xf1 + v);
				w = 0;
			} else if (v >= INT8_MIN && v <= INT8_MAX) { zl[p++] = 0xfe; w = 1; }
			else if (v >= INT16_MIN && v <= INT16_MAX) { zl[p++] = 0xc0; w = 2; }
			else if (v >= -(1 << 23) && v < (1 << 23)) { zl[p++] = 0xf0; w = 3; }
			else if (v >= INT32_MIN && v <= INT32_MAX) { zl[p++] = 0xd0; w = 4; }
			else { zl[p++] = 0xe0; w = 8; }
			for (int k = 0; k < w; k++)
				zl[p++] = (uint8_t)((unsigned long long)v >> (8 * k));
		} else {
			size_t l = strlen(s);
			if (l < 64) {
				zl[p++] = (uint8_t)l;
			} else if (l < 16384) {
				zl[p++] = (uint8_t)(0x40 | (l >> 8));
				zl[p++] = (uint8_t)l;
			} else {
				zl[p++] = 0x80;
				for (int k = 3; k >= 0; k--)
					zl[p++] = (uint8_t)(l >> (8 * k));
			}
			memcpy(zl + p, s, l);
			p += l;
		}
		prev = p - start;
	}
	zl[p++] = 0xff;
	for (int k = 0; k < 4; k++) {
		zl[k] = (uint8_t)(p >> (8 * k));
		zl[4 + k] = (uint8_t)(last >> (8 * k));
	}
	zl[8] = (uint8_t)n;
	zl[9] = (uint8_t)(n >> 8);
	return p;
}

/* A value that is one RDB string holding blob. */
static size_t blob_payload(uint8_t *out, int type, const uint8_t *blob, size_t n)
{
	rdb_buf v = { 0 };
	rdb_write_len(&v, n);
	rdb_buf_put(&v, blob, n);
	size_t len = payload_make(out, type, v.p, v.len);
	rdb_buf_fini(&v);
	return len;
}

static int decode_bytes(const uint8_t *p, size_t n, rec *r)
{
	int type;
	memset(r, 0, sizeof(*r));
	assert_int_equal(rdb_dump_verify(p, n, NULL), 0);
	return rdb_dump_decode(p, n, &rec_vis, r, &type);
}

static void test_ziplists_decode_as_list_zset_and_hash(void **st)
{
	(void)st;
	static uint8_t zl[4096], pl[4096];
	char big[300];
	memset(big, 'q', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *items[] = { "a", "#5", "#-100", "#1000", "#-70000", "#3000000000", "#100000000", big, "z" };
	rec r;
	size_t n = ziplist_build(zl, items, 9);
	assert_int_equal(decode_bytes(pl, blob_payload(pl, RDB_TYPE_LIST_ZIPLIST, zl, n), &r), 0);
	assert_string_equal(r.s, "begin list 10 9|a|5|-100|1000|-70000|3000000000|100000000|<299 bytes q>|z|end");

	const char *zitems[] = { "m", "#2", "n", "2.5" };
	n = ziplist_build(zl, zitems, 4);
	assert_int_equal(decode_bytes(pl, blob_payload(pl, RDB_TYPE_ZSET_ZIPLIST, zl, n), &r), 0);
	assert_string_equal(r.s, "begin zset 12 2|m:2|n:2.5|end");

	const char *hitems[] = { "#7", "seven", "f", "#-1" };
	n = ziplist_build(zl, hitems, 4);
	assert_int_equal(decode_bytes(pl, blob_payload(pl, RDB_TYPE_HASH_ZIPLIST, zl, n), &r), 0);
	assert_string_equal(r.s, "begin hash 13 2|7=seven|f=-1|end");

	/* quicklist 1: nodes are ziplists; an empty node is dropped */
	const char *n1[] = { "x", "#1" }, *n2[] = { "y" };
	rdb_buf v = { 0 };
	rdb_write_len(&v, 3);
	n = ziplist_build(zl, n1, 2);
	rdb_write_len(&v, n);
	rdb_buf_put(&v, zl, n);
	n = ziplist_build(zl, NULL, 0);
	rdb_write_len(&v, n);
	rdb_buf_put(&v, zl, n);
	n = ziplist_build(zl, n2, 1);
	rdb_write_string(&v, zl, n);
	size_t len = payload_make(pl, RDB_TYPE_LIST_QUICKLIST, v.p, v.len);
	rdb_buf_fini(&v);
	assert_int_equal(decode_bytes(pl, len, &r), 0);
	assert_string_equal(r.s, "begin list 14 0|x|1|y|end");
}

static void test_zipmaps_and_plain_old_types_decode(void **st)
{
	(void)st;
	static uint8_t pl[4096];
	/* zipmap: count, then len key len free value [free bytes], end */
	static const uint8_t zm[] = { 2, 1, 'a', 2, 0, 'v', '1', 3, 'k', 'e', 'y', 1, 2, 'z', 'X', 'X', 0xff };
	rec r;
	assert_int_equal(decode_bytes(pl, blob_payload(pl, RDB_TYPE_HASH_ZIPMAP, zm, sizeof(zm)), &r), 0);
	assert_string_equal(r.s, "begin hash 9 2|a=v1|key=z|end");

	/* LIST (1) and ZSET (3, text scores) */
	rdb_buf v = { 0 };
	rdb_write_len(&v, 2);
	rdb_write_string(&v, "one", 3);
	rdb_write_string(&v, "-5", 2);
	assert_int_equal(decode_bytes(pl, payload_make(pl, RDB_TYPE_LIST, v.p, v.len), &r), 0);
	assert_string_equal(r.s, "begin list 1 2|one|-5|end");
	v.len = 0;
	rdb_write_len(&v, 2);
	static const uint8_t z[] = { 1, 'a', 3, '0', '.', '5', 1, 'b', 254 };
	rdb_buf_put(&v, z, sizeof(z));
	assert_int_equal(decode_bytes(pl, payload_make(pl, RDB_TYPE_ZSET, v.p, v.len), &r), 0);
	assert_string_equal(r.s, "begin zset 3 2|a:0.5|b:inf|end");
	rdb_buf_fini(&v);
}

static void test_empty_collections_and_streams_are_refused(void **st)
{
	(void)st;
	static uint8_t pl[256], zl[64];
	rec r;
	uint8_t zero = 0;
	assert_int_equal(decode_bytes(pl, payload_make(pl, RDB_TYPE_SET, &zero, 1), &r), SPW_E_CORRUPT);
	size_t n = ziplist_build(zl, NULL, 0);
	assert_int_equal(decode_bytes(pl, blob_payload(pl, RDB_TYPE_LIST_ZIPLIST, zl, n), &r), SPW_E_CORRUPT);
	assert_int_equal(decode_bytes(pl, payload_make(pl, RDB_TYPE_STREAM_LISTPACKS_2, &zero, 1), &r),
		RDB_E_UNSUPPORTED);
	assert_int_equal(decode_bytes(pl, payload_make(pl, RDB_TYPE_MODULE_2, &zero, 1), &r), RDB_E_UNSUPPORTED);
	assert_int_equal(decode_bytes(pl, payload_make(pl, 8, &zero, 1), &r), SPW_E_CORRUPT);
}

static void test_dump_verify_checks_version_crc_and_length(void **st)
{
	(void)st;
	uint8_t b[64];
	size_t n = unhex(str_dumps[15].dump, b), body;
	assert_int_equal(rdb_dump_verify(b, n, &body), 0);
	assert_int_equal(body, n - 10);
	assert_int_equal(rdb_dump_verify(b, 9, NULL), SPW_E_CORRUPT);
	b[3] ^= 1;
	assert_int_equal(rdb_dump_verify(b, n, NULL), SPW_E_CORRUPT);
	b[3] ^= 1;
	/* version 9 with its CRC is accepted, 11 is not */
	for (unsigned ver = 9; ver <= 11; ver += 2) {
		b[n - 10] = (uint8_t)ver;
		uint64_t crc = rdb_crc64(0, b, n - 8);
		for (int i = 0; i < 8; i++)
			b[n - 8 + i] = (uint8_t)(crc >> (8 * i));
		assert_int_equal(rdb_dump_verify(b, n, NULL), ver <= 10 ? 0 : SPW_E_CORRUPT);
	}
}

/* ---------------- RDB files ---------------- */

/* SAVE of redis-server 7.0.15: strings (one with PXAT 4102444800000), a hash, list, intset, set,
 * zset, a stream with a consumer group and a pending entry, and a function library. */
static const char rdb_file_hex[] =
	"524544495330303130fa0972656469732d76657206372e302e3135fa0a72656469732d62697473c040fa056374696d65c272"
	"b90f6bfa08757365642d6d656dc2b8b71100fa08616f662d62617365c000f5404723216c7561206e616d653d6d796c69620a"
	"72656469732e72656769737465725f66756e6374696f6e28276631272c2066756e6374696f6e28292072657475726e203120"
	"656e6429fe00fb0901000273310568656c6c6ffc00d8c32cbb03000000027378017600027332c13930020273730201790178"
	"130273740110000000000000000100000000000000011d1d0000000a0001010001010181610200010201000100018162020401"
	"ff0101010101000001010167010101010000000000000001000000000000000125676c35a2010000010101632567"
	"6c35a201000001000000000000000100000000000000011001680d0d0000000200816602817602ff11017a0c0c0000000200"
	"816d020101ff12016c01020d0d0000000200816102816202ff0b0273690c020000000200000001000200ffda7975ef09137b96";

typedef struct file_rec {
	rec r;
	int skipped, unsupported, aux;
} file_rec;

static const rdb_visitor *f_key(void *ctx, int db, const uint8_t *k, size_t klen, int type, int64_t exp,
	void **vctx)
{
	file_rec *f = ctx;
	rec_add(&f->r, "\n%d %.*s t%d", db, (int)klen, k, type);
	if (exp >= 0)
		rec_add(&f->r, " px%lld", (long long)exp);
	rec_add(&f->r, ": ");
	*vctx = &f->r;
	return &rec_vis;
}
static int f_done(void *ctx, int rc)
{
	file_rec *f = ctx;
	if (rc == RDB_E_UNSUPPORTED)
		f->unsupported++;
	return 0;
}
static int f_aux(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	(void)k, (void)kl, (void)v, (void)vl;
	((file_rec *)ctx)->aux++;
	return 0;
}
static void f_skipped(void *ctx, const char *what)
{
	(void)what;
	((file_rec *)ctx)->skipped++;
}
static const rdb_file_ops file_ops = { f_key, f_done, f_aux, f_skipped };

static const char rdb_file_want[] =
	"\n0 s1 t0: str hello"
	"\n0 sx t0 px4102444800000: str v"
	"\n0 s2 t0: str 12345"
	"\n0 ss t2: begin set 2 2|y|x|end"
	"\n0 st t19: "
	"\n0 h t16: begin hash 16 1|f=v|end"
	"\n0 z t17: begin zset 17 1|m:1|end"
	"\n0 l t18: begin list 18 0|a|b|end"
	"\n0 si t11: begin set 11 2|1|2|end";

static void check_file_load(rdb_reader *r)
{
	file_rec f;
	rdb_file_info info;
	memset(&f, 0, sizeof(f));
	int rc = rdb_file_load(r, &file_ops, &f, &info);
	if (rc != 0)
		fail_msg("load: %d %s", rc, r->err);
	assert_string_equal(f.r.s, rdb_file_want);
	assert_int_equal(info.version, 10);
	assert_int_equal(info.keys, 9);
	assert_true(info.crc_checked);
	assert_int_equal(f.unsupported, 1);
	assert_int_equal(f.aux, 5);
	assert_int_equal(f.skipped, 1);
	assert_int_equal(info.bytes, sizeof(rdb_file_hex) / 2);
}

static void test_rdb_file_of_redis_loads_from_a_buffer(void **st)
{
	(void)st;
	static uint8_t b[4096];
	size_t n = unhex(rdb_file_hex, b);
	rdb_reader r;
	rdb_reader_init_buf(&r, b, n);
	check_file_load(&r);
	rdb_reader_fini(&r);
}

/* From a file, through a 16-byte window: every read that crosses a refill, the CRC's included. */
static void test_rdb_file_of_redis_loads_through_a_small_window(void **st)
{
	(void)st;
	static uint8_t b[4096];
	size_t n = unhex(rdb_file_hex, b);
	char path[] = "/tmp/spw_test_rdb_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	lseek(fd, 0, SEEK_SET);
	rdb_reader r;
	assert_int_equal(rdb_reader_init_fd(&r, fd, 16), 0);
	check_file_load(&r);
	rdb_reader_fini(&r);
	/* a flipped byte in a value fails the checksum */
	b[200] ^= 0x01;
	rdb_reader_init_buf(&r, b, n);
	file_rec f;
	rdb_file_info info;
	memset(&f, 0, sizeof(f));
	assert_int_not_equal(rdb_file_load(&r, &file_ops, &f, &info), 0);
	rdb_reader_fini(&r);
	close(fd);
	unlink(path);
}

/* ---------------- hostile input ---------------- */

static int load_any(const uint8_t *p, size_t n)
{
	rdb_reader r;
	rdb_reader_init_buf(&r, p, n);
	file_rec *f = calloc(1, sizeof(*f));
	rdb_file_info info;
	int rc = rdb_file_load(&r, &file_ops, f, &info);
	free(f);
	rdb_reader_fini(&r);
	return rc;
}

static int decode_any(const uint8_t *p, size_t n)
{
	rec *r = calloc(1, sizeof(*r));
	int type;
	int rc = rdb_dump_decode(p, n, &rec_vis, r, &type);   /* no verify: corrupt bytes get through */
	free(r);
	return rc;
}

/* Every truncation and many single-byte changes of every payload and of the file: an error or a
 * success, never a read out of bounds (ASan) or a crash. The truncated bytes are copied to a buffer
 * of exactly their size, so that ASan sees a read past the end. */
static void test_hostile_truncations_and_flips_never_crash(void **st)
{
	(void)st;
	static uint8_t full[4096];
	const char *all[SPW_ARRAY_LEN(coll_dumps) + SPW_ARRAY_LEN(str_dumps) + 1];
	size_t k = 0;
	for (size_t i = 0; i < SPW_ARRAY_LEN(coll_dumps); i++)
		all[k++] = coll_dumps[i].hex;
	for (size_t i = 0; i < SPW_ARRAY_LEN(str_dumps); i++)
		all[k++] = str_dumps[i].dump;
	all[k++] = rdb_file_hex;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (size_t i = 0; i < k; i++) {
		size_t n = unhex(all[i], full);
		bool file = all[i] == rdb_file_hex;
		for (size_t cut = 0; cut < n; cut++) {
			uint8_t *t = malloc(cut ? cut : 1);
			memcpy(t, full, cut);
			assert_true((file ? load_any(t, cut) : decode_any(t, cut)) <= 0);
			free(t);
		}
		for (int round = 0; round < 3000; round++) {
			uint8_t *t = malloc(n);
			memcpy(t, full, n);
			for (int f = 0; f < 1 + round % 3; f++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				t[(x >> 8) % n] = (uint8_t)x;
			}
			assert_true((file ? load_any(t, n) : decode_any(t, n)) <= 0);
			free(t);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc64_matches_redis_test_vector),
		cmocka_unit_test(test_crc64_slices_agree_with_the_bitwise_form_at_every_split),
		cmocka_unit_test(test_lengths_round_trip_in_each_size),
		cmocka_unit_test(test_string_dumps_equal_redis_bytes),
		cmocka_unit_test(test_string_dumps_of_redis_decode_to_the_value),
		cmocka_unit_test(test_long_strings_round_trip_compressed_or_raw),
		cmocka_unit_test(test_doubles_read_in_both_formats),
		cmocka_unit_test(test_collection_dumps_of_redis_decode_in_every_encoding),
		cmocka_unit_test(test_collection_writers_reproduce_redis_dumps),
		cmocka_unit_test(test_ziplists_decode_as_list_zset_and_hash),
		cmocka_unit_test(test_zipmaps_and_plain_old_types_decode),
		cmocka_unit_test(test_empty_collections_and_streams_are_refused),
		cmocka_unit_test(test_dump_verify_checks_version_crc_and_length),
		cmocka_unit_test(test_rdb_file_of_redis_loads_from_a_buffer),
		cmocka_unit_test(test_rdb_file_of_redis_loads_through_a_small_window),
		cmocka_unit_test(test_hostile_truncations_and_flips_never_crash),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
