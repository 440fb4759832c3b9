/*
 * test_dump_types.c - DUMP and RESTORE of collections against a running redis-server 7.0 with
 * sanitize-dump-payload yes (the mode in which Redis checks a payload whole, duplicates included):
 * hostile payloads (hashes, sets, zsets) get the same error from both servers, a big one too;
 * DUMPs of spillway's collections past the listpack thresholds load into redis-server with the same
 * contents and the encoding Redis gives them, and back (a zset's DUMP bytes equal on both).
 * diff/dump_types.txt covers the byte-for-byte cases.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/listpack.h"
#include "common/spw.h"
#include "enc/rdb.h"
#include "support/itest.h"

static itest_server g_redis, g_spw;
static itest_conn g_rc, g_sc;

static int servers_start(void **st)
{
	(void)st;
	const char *rflags[] = { "--sanitize-dump-payload", "yes", NULL };
	if (itest_fixture_start(&g_redis, ITEST_REDIS, rflags, "redis") < 0 ||
	    itest_fixture_start(&g_spw, ITEST_SPILLWAY, NULL, "spillway") < 0)
		return -1;
	if (itest_conn_open(&g_rc, g_redis.port) < 0 || itest_conn_open(&g_sc, g_spw.port) < 0)
		return -1;
	return 0;
}

static int servers_stop(void **st)
{
	(void)st;
	itest_conn_close(&g_rc);
	itest_conn_close(&g_sc);
	int a = itest_fixture_stop(&g_spw, "spillway"), b = itest_fixture_stop(&g_redis, "redis");
	return a < 0 || b < 0 ? -1 : 0;
}

/* Send one command (binary arguments) to c: the reply, malloc'd, with its length in *len. */
static char *call(itest_conn *c, size_t *len, int argc, const char *const *argv, const size_t *lens)
{
	char *r = itest_conn_call_argv(c, argc, argv, lens);
	if (!r)
		fail_msg("no reply to %s", argv[0]);
	/* a bulk reply may hold NULs: its length from its header */
	*len = r[0] == '$' && r[1] != '-' ? (size_t)strtol(r + 1, NULL, 10) + (size_t)(strchr(r, '\n') - r) + 3
		: strlen(r);
	return r;
}

static char *restore(itest_conn *c, const char *key, const rdb_buf *p, bool replace)
{
	const char *argv[] = { "RESTORE", key, "0", (const char *)p->p, "REPLACE" };
	size_t lens[] = { 7, strlen(key), 1, p->len, 7 }, n;
	return call(c, &n, replace ? 5 : 4, argv, lens);
}

/* A finished DUMP payload of the body built so far. */
static void payload_finish(rdb_buf *b)
{
	assert_int_equal(rdb_dump_finish(b), 0);
}

static void put_u8(rdb_buf *b, uint8_t v) { rdb_buf_put(b, &v, 1); }

/* RESTORE p on both servers: the same reply, want. */
static void restore_both_expect(const char *what, const rdb_buf *p, const char *want)
{
	char *r = restore(&g_rc, "bad", p, true), *s = restore(&g_sc, "bad", p, true);
	if (strcmp(r, want) || strcmp(s, want))
		fail_msg("%s: redis-server %s, spillway %s, want %s", what, r, s, want);
	free(r);
	free(s);
	if (want[0] == '-')
		itest_expect(&g_sc, ":0\r\n", "EXISTS", "bad", NULL);
}

/* A listpack of n pairs f<i> and vfmt of i (hash values "v%d", zset scores "%d"), the last field
 * repeating the first when dup. */
static void lp_pairs(lp_buf *lp, int n, bool dup, const char *vfmt)
{
	char f[32], v[32];
	assert_int_equal(lp_buf_init(lp), 0);
	for (int i = 0; i < n; i++) {
		snprintf(f, sizeof(f), "f%d", dup && i == n - 1 ? 0 : i);
		snprintf(v, sizeof(v), vfmt, i);
		assert_int_equal(lp_append(lp, f, strlen(f)), 0);
		assert_int_equal(lp_append(lp, v, strlen(v)), 0);
	}
}

/* Duplicate fields in every hash encoding, a big listpack among them (past the 16-bit count, so the
 * check cannot be quadratic and still finish), and a listpack of odd length: "ERR Bad data format"
 * from both servers, nothing stored. Its well-formed twin is accepted by both. */
static void test_hostile_hash_payloads_are_refused_as_redis_refuses_them(void **st)
{
	(void)st;
	const char *bad = "-ERR Bad data format\r\n";
	rdb_buf p = { 0 };
	lp_buf lp;

	lp_pairs(&lp, 3, true, "v%d");
	rdb_dump_hash_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("listpack with a duplicate field", &p, bad);
	lp_buf_free(&lp);
	p.len = 0;

	lp_pairs(&lp, 70000, true, "v%d");
	rdb_dump_hash_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("70000-pair listpack with a duplicate field", &p, bad);
	lp_buf_free(&lp);
	p.len = 0;

	lp_pairs(&lp, 70000, false, "v%d");
	rdb_dump_hash_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("70000-pair listpack", &p, "+OK\r\n");
	lp_buf_free(&lp);
	p.len = 0;
	itest_expect(&g_sc, "$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "bad", NULL);
	itest_expect(&g_sc, ":70000\r\n", "HLEN", "bad", NULL);
	itest_expect(&g_sc, ":1\r\n", "DEL", "bad", NULL);
	itest_expect(&g_rc, ":1\r\n", "DEL", "bad", NULL);

	lp_pairs(&lp, 2, false, "v%d");
	assert_int_equal(lp_append(&lp, "odd", 3), 0);
	rdb_dump_hash_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("listpack of 5 entries", &p, bad);
	lp_buf_free(&lp);
	p.len = 0;

	put_u8(&p, RDB_TYPE_HASH);   /* plain pairs */
	rdb_write_len(&p, 3);
	const char *kv[] = { "a", "1", "b", "2", "a", "3" };
	for (size_t i = 0; i < SPW_ARRAY_LEN(kv); i++)
		rdb_write_string(&p, kv[i], 1);
	payload_finish(&p);
	restore_both_expect("plain hash with a duplicate field", &p, bad);
	p.len = 0;

	/* zipmap {a: 1, a: 2} */
	static const uint8_t zm[] = { 2, 1, 'a', 1, 0, '1', 1, 'a', 1, 0, '2', 0xff };
	put_u8(&p, RDB_TYPE_HASH_ZIPMAP);
	rdb_write_string(&p, zm, sizeof(zm));
	payload_finish(&p);
	restore_both_expect("zipmap with a duplicate field", &p, bad);
	p.len = 0;

	rdb_dump_set_begin(&p, 3);   /* a plain set {x, 7, x} */
	rdb_dump_set_member(&p, "x", 1);
	rdb_dump_set_member(&p, "7", 1);
	rdb_dump_set_member(&p, "x", 1);
	payload_finish(&p);
	restore_both_expect("plain set with a duplicate member", &p, bad);
	p.len = 0;

	static const uint8_t is[] = { 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1, 0 };   /* intset {1, 1} */
	rdb_dump_set_intset(&p, is, sizeof(is));
	payload_finish(&p);
	restore_both_expect("intset with a duplicate member", &p, bad);
	rdb_buf_fini(&p);
}

/* The reply of cmd key on c (a malloc'd copy). */
static char *read_back(itest_conn *c, const char *cmd, const char *key, const char *a1, const char *a2)
{
	const char *argv[] = { cmd, key, a1, a2 };
	size_t n;
	return call(c, &n, a2 ? 4 : a1 ? 3 : 2, argv, NULL);
}

static void same_reply(const char *cmd, const char *key, const char *a1, const char *a2)
{
	char *r = read_back(&g_rc, cmd, key, a1, a2), *s = read_back(&g_sc, cmd, key, a1, a2);
	itest_bytes_expect(cmd, s, strlen(s), r, strlen(r));
	free(r);
	free(s);
}

/* The same reply from both servers, NULs and all. */
static void same_argv(int argc, const char *const *argv)
{
	size_t n, m;
	char *r = call(&g_rc, &n, argc, argv, NULL), *s = call(&g_sc, &m, argc, argv, NULL);
	itest_bytes_expect(argv[0], s, m, r, n);
	free(r);
	free(s);
}

/* DUMP key on from, RESTORE it as key on to. */
static void move_key(itest_conn *from, itest_conn *to, const char *key)
{
	size_t n;
	const char *argv[] = { "DUMP", key };
	char *d = call(from, &n, 2, argv, NULL);
	if (d[0] != '$')
		fail_msg("DUMP %s: %s", key, d);
	rdb_buf p = { 0 };
	const char *body = strchr(d, '\n') + 1;
	rdb_buf_put(&p, body, n - (size_t)(body - d) - 2);
	char *r = restore(to, key, &p, true);
	if (strcmp(r, "+OK\r\n"))
		fail_msg("RESTORE %s: %s", key, r);
	free(r);
	free(d);
	rdb_buf_fini(&p);
}

/* Collections built on spillway past the thresholds (a hashtable hash of 600 fields, a long field;
 * a list of 3000 LPUSHed elements with ints and empty strings), DUMPed and loaded into
 * redis-server: the same contents and encodings there; and a redis-server hashtable hash DUMPed in
 * its dict order into spillway. */
static void test_big_collections_move_both_ways(void **st)
{
	(void)st;
	char f[32], v[32];
	free(itest_call(&g_sc, "DEL", "h", "l", "hl", NULL));
	for (int i = 0; i < 600; i++) {
		snprintf(f, sizeof(f), "field%d", i);
		snprintf(v, sizeof(v), "%d", i * 31);
		free(itest_call(&g_sc, "HSET", "h", f, v, NULL));
		snprintf(v, sizeof(v), i % 3 ? "e%d" : i % 2 ? "%d" : "", i);
		free(itest_call(&g_sc, "LPUSH", "l", v, NULL));
		free(itest_call(&g_sc, "LPUSH", "l", v, v, v, v, NULL));
	}
	char longv[200];
	memset(longv, 'q', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	free(itest_call(&g_sc, "HSET", "hl", "f", longv, "g", "1", NULL));
	for (int round = 0; round < 2; round++) {
		itest_conn *from = round ? &g_rc : &g_sc, *to = round ? &g_sc : &g_rc;
		move_key(from, to, "h");
		move_key(from, to, "l");
		move_key(from, to, "hl");
		same_reply("OBJECT", "ENCODING", "h", NULL);
		same_reply("HLEN", "h", NULL, NULL);
		for (int i = 0; i < 600; i += 97) {
			snprintf(f, sizeof(f), "field%d", i);
			same_reply("HGET", "h", f, NULL);
		}
		same_reply("LRANGE", "l", "0", "-1");
		same_reply("OBJECT", "ENCODING", "l", NULL);
		same_reply("HGET", "hl", "f", NULL);
		same_reply("OBJECT", "ENCODING", "hl", NULL);
	}
	itest_expect(&g_rc, "$9\r\nhashtable\r\n", "OBJECT", "ENCODING", "h", NULL);
}

/* A ZSET_2 body of n members m<i> scored n - i (highest first, as Redis writes a skiplist), the
 * last member repeating the first when dup, the last score NaN when nan. */
static void zset2_payload(rdb_buf *p, int n, bool dup, bool nan)
{
	char m[32];
	put_u8(p, RDB_TYPE_ZSET_2);
	rdb_write_len(p, (uint64_t)n);
	for (int i = 0; i < n; i++) {
		snprintf(m, sizeof(m), "m%d", dup && i == n - 1 ? 0 : i);
		rdb_write_string(p, m, strlen(m));
		rdb_write_binary_double(p, nan && i == n - 1 ? (double)NAN : (double)(n - i));
	}
	payload_finish(p);
}

/* Duplicate members in a listpack (small and past the 16-bit count) and in ZSET_2 (big: the check
 * sorts, it is not quadratic), a NaN score, an odd listpack: "ERR Bad data format" from both,
 * nothing stored; the big twins are accepted by both, as skiplists. Where redis-server takes what
 * spillway refuses or reorders (dump_coll.c note 5), only spillway is asked: a listpack's "nan"
 * score is refused, an unordered listpack is stored sorted. */
static void test_hostile_zset_payloads_are_refused_as_redis_refuses_them(void **st)
{
	(void)st;
	const char *bad = "-ERR Bad data format\r\n";
	rdb_buf p = { 0 };
	lp_buf lp;

	for (int n = 3; n <= 70000; n += 69997) {
		lp_pairs(&lp, n, true, "%d");
		rdb_dump_zset_listpack(&p, lp.p, lp.len);
		payload_finish(&p);
		restore_both_expect("zset listpack with a duplicate member", &p, bad);
		lp_buf_free(&lp);
		p.len = 0;
		zset2_payload(&p, n, true, false);
		restore_both_expect("ZSET_2 with a duplicate member", &p, bad);
		p.len = 0;
	}
	zset2_payload(&p, 5, false, true);
	restore_both_expect("ZSET_2 with a NaN score", &p, bad);
	p.len = 0;

	lp_pairs(&lp, 70000, false, "%d");
	rdb_dump_zset_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("70000-pair zset listpack", &p, "+OK\r\n");
	lp_buf_free(&lp);
	p.len = 0;
	same_reply("OBJECT", "ENCODING", "bad", NULL);
	same_reply("ZRANGE", "bad", "69990", "-1");
	zset2_payload(&p, 70000, false, false);
	restore_both_expect("70000-member ZSET_2", &p, "+OK\r\n");
	p.len = 0;
	same_reply("OBJECT", "ENCODING", "bad", NULL);
	same_reply("ZRANGE", "bad", "0", "9");
	itest_expect(&g_sc, ":70000\r\n", "ZCARD", "bad", NULL);
	itest_expect(&g_sc, "*2\r\n$6\r\nm69999\r\n$1\r\n1\r\n", "ZRANGE", "bad", "0", "0", "WITHSCORES", NULL);
	itest_expect(&g_sc, ":1\r\n", "DEL", "bad", NULL);
	itest_expect(&g_rc, ":1\r\n", "DEL", "bad", NULL);

	lp_pairs(&lp, 2, false, "%d");
	assert_int_equal(lp_append(&lp, "odd", 3), 0);
	rdb_dump_zset_listpack(&p, lp.p, lp.len);
	payload_finish(&p);
	restore_both_expect("zset listpack of 5 entries", &p, bad);
	lp_buf_free(&lp);
	p.len = 0;

	static const char *const nan_lp[] = { "a", "1", "b", "nan" }, *const unordered[] = { "b", "2", "a", "1" };
	for (int round = 0; round < 2; round++) {
		assert_int_equal(lp_buf_init(&lp), 0);
		for (int i = 0; i < 4; i++) {
			const char *e = round ? unordered[i] : nan_lp[i];
			assert_int_equal(lp_append(&lp, e, strlen(e)), 0);
		}
		rdb_dump_zset_listpack(&p, lp.p, lp.len);
		payload_finish(&p);
		char *r = restore(&g_sc, "odd", &p, true);
		assert_string_equal(r, round ? "+OK\r\n" : bad);
		free(r);
		lp_buf_free(&lp);
		p.len = 0;
	}
	itest_expect(&g_sc, "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n", "ZRANGE", "odd", "0", "-1",
		"WITHSCORES", NULL);
	rdb_buf_fini(&p);
}

/* Sorted sets built on spillway (300 members: a skiplist, scores with ties and fractions, integer
 * members; a listpack one; one with a long member: a skiplist of two), DUMPed into redis-server
 * and back: the same contents and encodings, and DUMP's bytes equal on both servers each way. */
static void test_zsets_move_both_ways(void **st)
{
	(void)st;
	char m[32], sc[32];
	free(itest_call(&g_sc, "DEL", "zb", "zsm", "zlm", NULL));
	for (int i = 0; i < 300; i++) {
		snprintf(m, sizeof(m), i % 4 ? "m%d" : "%d", i);
		snprintf(sc, sizeof(sc), "%g", (i * 37) % 101 + 0.25 * (i % 3));
		itest_expect(&g_sc, ":1\r\n", "ZADD", "zb", sc, m, NULL);
	}
	itest_expect(&g_sc, ":3\r\n", "ZADD", "zsm", "1", "a", "-2.5", "b", "inf", "", NULL);
	char longm[100];
	memset(longm, 'q', sizeof(longm) - 1);
	longm[sizeof(longm) - 1] = '\0';
	itest_expect(&g_sc, ":2\r\n", "ZADD", "zlm", "1", longm, "1", "short", NULL);
	static const char *const keys[] = { "zb", "zsm", "zlm" };
	for (int round = 0; round < 2; round++) {
		itest_conn *from = round ? &g_rc : &g_sc, *to = round ? &g_sc : &g_rc;
		for (size_t i = 0; i < SPW_ARRAY_LEN(keys); i++) {
			move_key(from, to, keys[i]);
			const char *zr[] = { "ZRANGE", keys[i], "0", "-1", "WITHSCORES" }, *dump[] = { "DUMP", keys[i] };
			same_argv(5, zr);
			same_argv(2, dump);
			same_reply("OBJECT", "ENCODING", keys[i], NULL);
		}
	}
	itest_expect(&g_sc, "$8\r\nskiplist\r\n", "OBJECT", "ENCODING", "zb", NULL);
	itest_expect(&g_sc, "$8\r\nlistpack\r\n", "OBJECT", "ENCODING", "zsm", NULL);
	itest_expect(&g_sc, "$8\r\nskiplist\r\n", "OBJECT", "ENCODING", "zlm", NULL);
	itest_expect(&g_sc, ":300\r\n", "ZCARD", "zb", NULL);
}

int main(void)
{
	if (!itest_prog_present("redis-server", "redis-server"))
		return 77;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_hash_payloads_are_refused_as_redis_refuses_them),
		cmocka_unit_test(test_big_collections_move_both_ways),
		cmocka_unit_test(test_hostile_zset_payloads_are_refused_as_redis_refuses_them),
		cmocka_unit_test(test_zsets_move_both_ways),
	};
	return cmocka_run_group_tests(tests, servers_start, servers_stop);
}
