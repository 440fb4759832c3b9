/*
 * test_list_tier.c - the list commands on lists whose records are on the device: a real
 * spillway-server with --storage-tier and a --memory a few times smaller than the lists, every
 * list command run on cold lists and checked against a model, then every list read back cold.
 *
 * Notes:
 *  1. Sizes: 2000 lists of 8 elements of 32 bytes (about 300 bytes a record, 600 KB) against
 *     --memory 256k: the first lists written are on the device when the commands come, and a fill
 *     of 1000 strings of 300 bytes pushes the changed ones out before the final read.
 *  2. The proof that the cold path ran is INFO's tier_pending_reads and tier_parked_commands
 *     (counters, not timing): each command on a cold list parks once and reads its record.
 *  3. LMOVE between two cold lists and LMPOP over several keys exercise the multi-key path:
 *     prefetch, then one store operation per key (server/cmd_list.c notes 4-5).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/itest.h"

#define NLISTS 2000
#define NELEMS 8
#define MAXE 24
#define ELEN 48

typedef struct mlist {
	int n;
	char e[MAXE][ELEN];
} mlist;

static mlist g_m[NLISTS];

static void key_of(int i, char *buf) { sprintf(buf, "list:%d", i); }

static void elem_of(int i, int j, char *buf)
{
	int k = sprintf(buf, "v%d.%d.", i, j);
	memset(buf + k, 'a' + (i + j) % 26, (size_t)(32 - k));
	buf[32] = 0;
}

/* ---------------- the model ---------------- */

static void m_push(mlist *m, bool left, const char *s)
{
	assert_true(m->n < MAXE);
	if (left) {
		memmove(m->e[1], m->e[0], (size_t)m->n * ELEN);
		strcpy(m->e[0], s);
	} else {
		strcpy(m->e[m->n], s);
	}
	m->n++;
}

static void m_pop(mlist *m, bool left, char *out)
{
	assert_true(m->n > 0);
	if (left) {
		strcpy(out, m->e[0]);
		memmove(m->e[0], m->e[1], (size_t)(m->n - 1) * ELEN);
	} else {
		strcpy(out, m->e[m->n - 1]);
	}
	m->n--;
}

static void m_del(mlist *m, int at)
{
	memmove(m->e[at], m->e[at + 1], (size_t)(m->n - at - 1) * ELEN);
	m->n--;
}

/* The LRANGE 0 -1 reply of the model. */
static void m_range_reply(const mlist *m, itest_buf *b)
{
	itest_buf_fmt(b, "*%d\r\n", m->n);
	for (int j = 0; j < m->n; j++)
		itest_buf_bulk(b, m->e[j], strlen(m->e[j]));
}

/* ---------------- helpers ---------------- */

static void expect_buf(itest_conn *c, itest_buf *want, const char *const *argv, int argc)
{
	size_t lens[16];
	for (int k = 0; k < argc; k++)
		lens[k] = strlen(argv[k]);
	char *r = itest_conn_call_argv(c, argc, argv, lens);
	assert_non_null(r);
	itest_bytes_expect(argv[0], r, strlen(r), want->p, want->len);
	free(r);
	want->len = 0;
}

static void load(itest_conn *c, int from, int to)
{
	char key[32], e[NELEMS][ELEN], want[16];
	for (int i = from; i < to; i++) {
		const char *argv[2 + NELEMS] = { "RPUSH", key };
		size_t lens[2 + NELEMS] = { 5, 0 };
		key_of(i, key);
		lens[1] = strlen(key);
		g_m[i].n = 0;
		for (int j = 0; j < NELEMS; j++) {
			elem_of(i, j, e[j]);
			argv[2 + j] = e[j];
			lens[2 + j] = strlen(e[j]);
			m_push(&g_m[i], false, e[j]);
		}
		char *r = itest_conn_call_argv(c, 2 + NELEMS, argv, lens);
		sprintf(want, ":%d\r\n", NELEMS);
		assert_non_null(r);
		assert_string_equal(r, want);
		free(r);
	}
}

/* n strings of 300 bytes: later records that push the lists out of memory. */
static void fill(itest_conn *c, int n)
{
	char key[32], val[301];
	memset(val, 'f', 300);
	val[300] = 0;
	for (int i = 0; i < n; i++) {
		sprintf(key, "fill:%d", i);
		itest_expect(c, "+OK\r\n", "SET", key, val, NULL);
	}
}

/* ---------------- the test ---------------- */

/* One command of each kind on cold list i (i in 0..999), its reply checked against the model. */
static void command_on_cold_list(itest_conn *c, int i, itest_buf *w)
{
	char key[32], key2[32], v[ELEN], s[64];
	mlist *m = &g_m[i];
	key_of(i, key);
	switch (i % 16) {
	case 0:
		m_push(m, true, "pushed");
		itest_buf_fmt(w, ":%d\r\n", m->n);
		expect_buf(c, w, (const char *[]){ "LPUSH", key, "pushed" }, 3);
		break;
	case 1:
		m_push(m, false, "x1");
		m_push(m, false, "x2");
		itest_buf_fmt(w, ":%d\r\n", m->n);
		expect_buf(c, w, (const char *[]){ "RPUSHX", key, "x1", "x2" }, 4);
		break;
	case 2:
		itest_buf_fmt(w, "*2\r\n");
		m_pop(m, false, v);
		itest_buf_bulk(w, v, strlen(v));
		m_pop(m, false, v);
		itest_buf_bulk(w, v, strlen(v));
		expect_buf(c, w, (const char *[]){ "RPOP", key, "2" }, 3);
		break;
	case 3:
		m_pop(m, true, v);
		itest_buf_bulk(w, v, strlen(v));
		expect_buf(c, w, (const char *[]){ "LPOP", key }, 2);
		break;
	case 4:
		strcpy(m->e[3], "set");
		itest_buf_fmt(w, "+OK\r\n");
		expect_buf(c, w, (const char *[]){ "LSET", key, "3", "set" }, 4);
		break;
	case 5:
		memmove(m->e[5], m->e[4], (size_t)(m->n - 4) * ELEN);
		strcpy(m->e[4], "ins");
		m->n++;
		itest_buf_fmt(w, ":%d\r\n", m->n);
		expect_buf(c, w, (const char *[]){ "LINSERT", key, "BEFORE", m->e[5], "ins" }, 5);
		break;
	case 6:
		strcpy(v, m->e[5]);
		m_del(m, 5);
		itest_buf_fmt(w, ":1\r\n");
		expect_buf(c, w, (const char *[]){ "LREM", key, "0", v }, 4);
		break;
	case 7:
		memmove(m->e[0], m->e[2], 4 * ELEN);
		m->n = 4;
		itest_buf_fmt(w, "+OK\r\n");
		expect_buf(c, w, (const char *[]){ "LTRIM", key, "2", "5" }, 4);
		break;
	case 8:   /* two cold lists */
		key_of(i + 1000, key2);
		m_pop(m, true, v);
		m_push(&g_m[i + 1000], false, v);
		itest_buf_bulk(w, v, strlen(v));
		expect_buf(c, w, (const char *[]){ "LMOVE", key, key2, "LEFT", "RIGHT" }, 5);
		break;
	case 9:   /* a rotation */
		m_pop(m, false, v);
		m_push(m, true, v);
		itest_buf_bulk(w, v, strlen(v));
		expect_buf(c, w, (const char *[]){ "RPOPLPUSH", key, key }, 3);
		break;
	case 10:
		key_of(i + 1, key2);   /* the next list stays: LMPOP pops from the first one */
		itest_buf_fmt(w, "*2\r\n");
		itest_buf_bulk(w, key, strlen(key));
		itest_buf_fmt(w, "*3\r\n");
		for (int k = 0; k < 3; k++) {
			m_pop(m, false, v);
			itest_buf_bulk(w, v, strlen(v));
		}
		expect_buf(c, w, (const char *[]){ "LMPOP", "3", "nosuch", key, key2, "RIGHT", "COUNT", "3" }, 8);
		break;
	case 11:
		itest_buf_fmt(w, "*%d\r\n", m->n);
		while (m->n) {
			m_pop(m, true, v);
			itest_buf_bulk(w, v, strlen(v));
		}
		expect_buf(c, w, (const char *[]){ "LPOP", key, "100" }, 3);
		break;
	case 12:
		itest_buf_fmt(w, ":%d\r\n", m->n);
		expect_buf(c, w, (const char *[]){ "LLEN", key }, 2);
		break;
	case 13:
		itest_buf_bulk(w, m->e[m->n - 2], strlen(m->e[m->n - 2]));
		expect_buf(c, w, (const char *[]){ "LINDEX", key, "-2" }, 3);
		break;
	case 14:
		sprintf(s, ":%d\r\n", 6);
		itest_buf_fmt(w, "%s", s);
		expect_buf(c, w, (const char *[]){ "LPOS", key, m->e[6] }, 3);
		break;
	default:
		m_range_reply(m, w);
		expect_buf(c, w, (const char *[]){ "LRANGE", key, "0", "-1" }, 4);
		break;
	}
}

static void test_list_commands_work_on_lists_on_the_device(void **state)
{
	(void)state;
	const char *flags[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", "--page",
	                        "64k", NULL };
	itest_server srv;
	itest_conn c;
	itest_buf w = { 0 };
	char key[32];

	assert_int_equal(itest_spillway_start(&srv, flags), 0);
	assert_int_equal(itest_conn_open(&c, srv.port), 0);
	load(&c, 0, NLISTS);
	long long parked = itest_info_stat(&c, "tier_parked_commands");
	long long pend = itest_info_stat(&c, "tier_pending_reads");

	/* Every kind of command, each on its own cold list (the first 800 written). */
	for (int i = 0; i < 800; i++)
		command_on_cold_list(&c, i, &w);
	itest_stat_grew(&c, "tier_pending_reads", pend, 400, "list commands on cold lists");
	itest_stat_grew(&c, "tier_parked_commands", parked, 400, "list commands on cold lists, parked");

	/* Push the changed lists out and read every list back. */
	fill(&c, 1000);
	pend = itest_info_stat(&c, "tier_pending_reads");
	for (int i = 0; i < NLISTS; i++) {
		key_of(i, key);
		if (g_m[i].n)
			m_range_reply(&g_m[i], &w);
		else
			itest_buf_fmt(&w, "*0\r\n");
		expect_buf(&c, &w, (const char *[]){ "LRANGE", key, "0", "-1" }, 4);
	}
	itest_stat_grew(&c, "tier_pending_reads", pend, 400, "LRANGE of every list, the changed ones cold");

	/* Pipelined reads of cold lists: a parked LLEN / LRANGE / LINDEX / LPOS looks ahead over the
	 * ones after it (CMD_LOOKAHEAD, park.c note 3), and every reply still comes in order. */
	fill(&c, 1000);
	long long ahead = itest_info_stat(&c, "sg_lookahead_gets");
	itest_buf req = { 0 };
	for (int i = 0; i < 400; i++) {
		const mlist *m = &g_m[i];
		key_of(i, key);
		switch (i % 4) {
		case 0:
			itest_buf_fmt(&req, "*2\r\n$4\r\nLLEN\r\n$%zu\r\n%s\r\n", strlen(key), key);
			itest_buf_fmt(&w, ":%d\r\n", m->n);
			break;
		case 1:
			itest_buf_fmt(&req, "*4\r\n$6\r\nLRANGE\r\n$%zu\r\n%s\r\n$1\r\n0\r\n$2\r\n-1\r\n",
			              strlen(key), key);
			m_range_reply(m, &w);
			break;
		case 2:
			itest_buf_fmt(&req, "*3\r\n$6\r\nLINDEX\r\n$%zu\r\n%s\r\n$1\r\n0\r\n", strlen(key), key);
			if (m->n)
				itest_buf_bulk(&w, m->e[0], strlen(m->e[0]));
			else
				itest_buf_fmt(&w, "$-1\r\n");
			break;
		default:
			itest_buf_fmt(&req, "*3\r\n$4\r\nLPOS\r\n$%zu\r\n%s\r\n$6\r\nnosuch\r\n", strlen(key), key);
			itest_buf_fmt(&w, "$-1\r\n");
			break;
		}
	}
	assert_int_equal(itest_conn_send(&c, req.p, req.len), 0);
	itest_replies_expect(&c, &srv, w.p, w.len, NULL);
	itest_stat_grew(&c, "sg_lookahead_gets", ahead, 1, "pipelined list reads behind a parked one");
	free(req.p);
	free(w.p);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&srv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_commands_work_on_lists_on_the_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
