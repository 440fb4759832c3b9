/*
 * test_tier_bits.c - bitmaps on the storage tier: written with SETBIT and BITFIELD, pushed to the
 * device by filler, then read (GET GETBIT BITCOUNT BITPOS BITFIELD_RO), changed in place of their
 * cold records (SETBIT, BITFIELD INCRBY, a SETBIT that grows the string), combined (BITOP over cold
 * sources into cold destinations) and compared (LCS of two cold keys), every reply checked
 * against a model held by the test.
 *
 * Notes:
 *  1. --memory 512k --page 64k: each filler round writes 800 KB, so every bitmap written before
 *     it is below HeadAddress afterwards and the next command on it must read the device and park
 *     (server/cmd_bits.c note 5, cmd_string.c note 8). tier_parked_commands must grow in each
 *     phase by at least one park per key (the proof that the cold path ran).
 *  2. The bitmaps are BM_BYTES long with bits at offsets from a fixed mix, so they hold runs of
 *     zero bytes as well as set bits; BITOP sources differ in length (one key in three is grown
 *     past BM_BYTES in the mutate phase).
 *  3. No timing assertions: everything waits on replies.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"
#include "support/itest.h"

#define NKEYS 48
#define BM_BYTES 1500
#define BM_CAP (BM_BYTES + NKEYS + 16)
#define BITS_PER_KEY 12

static itest_server g_srv;
static uint8_t g_bm[NKEYS][BM_CAP];
static size_t g_len[NKEYS];

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t bit_off(int key, int k)
{
	return mix64((uint64_t)key * 64 + (uint64_t)k) % (BM_BYTES * 8);
}

/* ---------------- the model ---------------- */

static int model_bit(int key, uint64_t off)
{
	return off / 8 < g_len[key] ? (g_bm[key][off / 8] >> (7 - off % 8)) & 1 : 0;
}

static void model_grow(int key, size_t len)
{
	if (len > g_len[key])
		g_len[key] = len;   /* the bytes past the old end are zero already */
}

static int model_setbit(int key, uint64_t off, int on)
{
	int old = model_bit(key, off);
	model_grow(key, off / 8 + 1);
	if (on)
		g_bm[key][off / 8] |= (uint8_t)(0x80 >> (off % 8));
	else
		g_bm[key][off / 8] &= (uint8_t)~(0x80 >> (off % 8));
	return old;
}

static uint64_t model_field(int key, uint64_t off, int bits)
{
	uint64_t v = 0;
	for (int i = 0; i < bits; i++)
		v = v << 1 | (uint64_t)model_bit(key, off + (uint64_t)i);
	return v;
}

static void model_field_set(int key, uint64_t off, int bits, uint64_t v)
{
	for (int i = 0; i < bits; i++)
		model_setbit(key, off + (uint64_t)i, (int)(v >> (bits - 1 - i)) & 1);
}

static long long model_popcount(int key)
{
	long long n = 0;
	for (size_t i = 0; i < g_len[key]; i++)
		n += __builtin_popcount(g_bm[key][i]);
	return n;
}

static long long model_bitpos1(int key)
{
	for (uint64_t off = 0; off < g_len[key] * 8; off++)
		if (model_bit(key, off))
			return (long long)off;
	return -1;
}

/* The length of the longest common subsequence, by the textbook table, two rows at a time. */
static long long lcs_len(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	unsigned *up = calloc(blen + 1, sizeof(unsigned)), *row = calloc(blen + 1, sizeof(unsigned));
	assert_true(up && row);
	for (size_t i = 1; i <= alen; i++) {
		for (size_t j = 1; j <= blen; j++)
			row[j] = a[i - 1] == b[j - 1] ? up[j - 1] + 1 : (up[j] > row[j - 1] ? up[j] : row[j - 1]);
		unsigned *t = up;
		up = row;
		row = t;
	}
	long long n = up[blen];
	free(up);
	free(row);
	return n;
}

/* ---------------- pipelines ---------------- */

static void cmd_add(itest_buf *b, int argc, ...)
{
	va_list ap;
	va_start(ap, argc);
	itest_buf_fmt(b, "*%d\r\n", argc);
	for (int i = 0; i < argc; i++) {
		const char *s = va_arg(ap, const char *);
		itest_buf_bulk(b, s, strlen(s));
	}
	va_end(ap);
}

/* Send the pipeline and check every reply against want. */
static void pipeline_run(itest_conn *c, itest_buf *cmds, itest_buf *want)
{
	assert_int_equal(itest_conn_send(c, cmds->p, cmds->len), 0);
	itest_replies_expect(c, &g_srv, want->p, want->len, NULL);
	free(cmds->p);
	free(want->p);
	memset(cmds, 0, sizeof(*cmds));
	memset(want, 0, sizeof(*want));
}

static const char *key_name(int key, char *buf)
{
	sprintf(buf, "bm:%d", key);
	return buf;
}

/* 200 values of 4 KB under fresh names: what was written before is on the device after (note 1). */
static void filler_write(itest_conn *c, int round)
{
	static char v[4096];
	itest_buf cmds = { 0 }, want = { 0 };
	char k[64];
	memset(v, 'f', sizeof(v) - 1);
	for (int i = 0; i < 200; i++) {
		snprintf(k, sizeof(k), "fill:%d:%d", round, i);
		cmd_add(&cmds, 3, "SET", k, v);
		itest_buf_fmt(&want, "+OK\r\n");
	}
	pipeline_run(c, &cmds, &want);
}

static void all_keys_expect(itest_conn *c)
{
	itest_buf cmds = { 0 }, want = { 0 };
	char k[32];
	for (int i = 0; i < NKEYS; i++) {
		cmd_add(&cmds, 2, "GET", key_name(i, k));
		itest_buf_bulk(&want, g_bm[i], g_len[i]);
	}
	pipeline_run(c, &cmds, &want);
}

/* ---------------- the phases ---------------- */

/* SETBIT BITS_PER_KEY bits of each key, then a BITFIELD SET of a 16-bit field (#N offsets). */
static void bitmaps_load(itest_conn *c)
{
	itest_buf cmds = { 0 }, want = { 0 };
	char k[32], off[32], val[32];
	for (int i = 0; i < NKEYS; i++) {
		key_name(i, k);
		for (int j = 0; j < BITS_PER_KEY; j++) {
			uint64_t o = bit_off(i, j);
			sprintf(off, "%llu", (unsigned long long)o);
			cmd_add(&cmds, 4, "SETBIT", k, off, "1");
			itest_buf_fmt(&want, ":%d\r\n", model_setbit(i, o, 1));
		}
		sprintf(off, "#%d", i % 50);
		sprintf(val, "%d", i * 7 + 1);
		cmd_add(&cmds, 6, "BITFIELD", k, "SET", "u16", off, val);
		itest_buf_fmt(&want, "*1\r\n:%llu\r\n", (unsigned long long)model_field(i, (uint64_t)(i % 50) * 16, 16));
		model_field_set(i, (uint64_t)(i % 50) * 16, 16, (uint64_t)(i * 7 + 1));
	}
	pipeline_run(c, &cmds, &want);
}

/* Every read command on every (cold) key. */
static void bitmaps_read(itest_conn *c)
{
	itest_buf cmds = { 0 }, want = { 0 };
	char k[32], off[32];
	for (int i = 0; i < NKEYS; i++) {
		key_name(i, k);
		uint64_t o = bit_off(i, 3);
		sprintf(off, "%llu", (unsigned long long)o);
		cmd_add(&cmds, 3, "GETBIT", k, off);
		itest_buf_fmt(&want, ":%d\r\n", model_bit(i, o));
		cmd_add(&cmds, 2, "BITCOUNT", k);
		itest_buf_fmt(&want, ":%lld\r\n", model_popcount(i));
		cmd_add(&cmds, 3, "BITPOS", k, "1");
		itest_buf_fmt(&want, ":%lld\r\n", model_bitpos1(i));
		sprintf(off, "#%d", i % 50);
		cmd_add(&cmds, 5, "BITFIELD_RO", k, "GET", "u16", off);
		itest_buf_fmt(&want, "*1\r\n:%llu\r\n", (unsigned long long)model_field(i, (uint64_t)(i % 50) * 16, 16));
	}
	pipeline_run(c, &cmds, &want);
	all_keys_expect(c);
}

/* Writes whose plan needs the cold old value: clear a bit, add to a field, grow one key in three. */
static void bitmaps_mutate(itest_conn *c)
{
	itest_buf cmds = { 0 }, want = { 0 };
	char k[32], off[32];
	for (int i = 0; i < NKEYS; i++) {
		key_name(i, k);
		uint64_t o = bit_off(i, 0);
		sprintf(off, "%llu", (unsigned long long)o);
		cmd_add(&cmds, 4, "SETBIT", k, off, "0");
		itest_buf_fmt(&want, ":%d\r\n", model_setbit(i, o, 0));
		uint64_t v = (model_field(i, 24, 8) + 200) & 0xff;
		cmd_add(&cmds, 9, "BITFIELD", k, "INCRBY", "u8", "#3", "200", "GET", "u4", "24");
		model_field_set(i, 24, 8, v);
		itest_buf_fmt(&want, "*2\r\n:%llu\r\n:%llu\r\n", (unsigned long long)v,
		              (unsigned long long)model_field(i, 24, 4));
		if (i % 3 == 0) {
			o = (uint64_t)(BM_BYTES + i) * 8 + 5;
			sprintf(off, "%llu", (unsigned long long)o);
			cmd_add(&cmds, 4, "SETBIT", k, off, "1");
			itest_buf_fmt(&want, ":%d\r\n", model_setbit(i, o, 1));
		}
	}
	pipeline_run(c, &cmds, &want);
}

/* BITOP AND/OR/XOR over three cold sources of different lengths, NOT over one, into cold
 * destinations (earlier results); LCS LEN of two cold keys. */
static void bitmaps_combine(itest_conn *c, int round)
{
	static const char *const ops[] = { "AND", "OR", "XOR", "NOT" };
	itest_buf cmds = { 0 }, want = { 0 };
	static uint8_t res[BM_CAP];
	char d[32], a[32], b[32], e[32];
	for (int t = 0; t < 8; t++) {
		int op = t % 4, x = (t * 5 + round) % NKEYS, y = (x + 1) % NKEYS, z = (x + 3) % NKEYS;
		size_t len = g_len[x];
		if (op != 3)
			len = SPW_MAX(len, SPW_MAX(g_len[y], g_len[z]));
		for (size_t i = 0; i < len; i++) {
			uint8_t u = i < g_len[x] ? g_bm[x][i] : 0, v = i < g_len[y] ? g_bm[y][i] : 0,
			        w = i < g_len[z] ? g_bm[z][i] : 0;
			res[i] = op == 0 ? u & v & w : op == 1 ? (u | v | w) : op == 2 ? u ^ v ^ w : (uint8_t)~u;
		}
		sprintf(d, "dst:%d", t);
		if (op == 3)
			cmd_add(&cmds, 4, "BITOP", ops[op], d, key_name(x, a));
		else
			cmd_add(&cmds, 6, "BITOP", ops[op], d, key_name(x, a), key_name(y, b), key_name(z, e));
		itest_buf_fmt(&want, ":%zu\r\n", len);
		cmd_add(&cmds, 2, "GET", d);
		itest_buf_bulk(&want, res, len);
	}
	for (int t = 0; t < 2; t++) {
		int x = (t * 7 + round) % NKEYS, y = (x + 2) % NKEYS;
		cmd_add(&cmds, 4, "LCS", key_name(x, a), key_name(y, b), "LEN");
		itest_buf_fmt(&want, ":%lld\r\n", lcs_len(g_bm[x], g_len[x], g_bm[y], g_len[y]));
	}
	pipeline_run(c, &cmds, &want);
}

/* ---------------- the test ---------------- */

static int server_setup(void **state)
{
	(void)state;
	const char *flags[] = {
		"--storage-tier", "--device-type", "posix", "--threads", "1", "--memory", "512k",
		"--page", "64k", "--segment", "4m", "--index", "1m", NULL,
	};
	return itest_fixture_start(&g_srv, ITEST_SPILLWAY, flags, "tier_bits");
}

static int server_teardown(void **state)
{
	(void)state;
	return itest_fixture_stop(&g_srv, "tier_bits");
}

static void test_bitmaps_spilled_to_the_device_read_change_and_combine_as_the_model(void **state)
{
	(void)state;
	itest_conn c;
	long long parked;
	assert_int_equal(itest_conn_open(&c, g_srv.port), 0);

	bitmaps_load(&c);
	all_keys_expect(&c);
	filler_write(&c, 0);
	parked = itest_info_stat(&c, "tier_parked_commands");
	bitmaps_read(&c);
	parked = itest_stat_grew(&c, "tier_parked_commands", parked, NKEYS, "reads of cold bitmaps");

	filler_write(&c, 1);
	bitmaps_mutate(&c);
	parked = itest_stat_grew(&c, "tier_parked_commands", parked, NKEYS, "SETBIT/BITFIELD on cold bitmaps");
	all_keys_expect(&c);

	for (int round = 0; round < 3; round++) {
		filler_write(&c, 2 + round);
		bitmaps_combine(&c, round);
		parked = itest_stat_grew(&c, "tier_parked_commands", parked, 8, "BITOP/LCS over cold keys");
	}
	filler_write(&c, 9);
	all_keys_expect(&c);
	itest_conn_close(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bitmaps_spilled_to_the_device_read_change_and_combine_as_the_model),
	};
	return cmocka_run_group_tests(tests, server_setup, server_teardown);
}
