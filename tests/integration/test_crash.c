/*
 * test_crash.c - crashes at random moments, through real server processes on real files: a writer
 * sends SET / INCR / DEL / APPEND (and now and then BGSAVE) on two connections (two workers) and
 * records every acknowledged reply; the server is killed with SIGKILL after a random delay; the
 * next start must hold every acknowledged write, and the one write in flight per connection either
 * whole or not at all. Then without the AOF: the state after the kill equals the last completed
 * checkpoint (SAVE) exactly. Then a power cut: the log's device forgets every write it was not
 * asked to sync (--device-fault powercut), and the AOF under always still gives every acknowledged
 * write back.
 *
 * Notes:
 *  1. Each connection owns its keys (c<conn>:<n>), so the expected value of a key is the model's,
 *     or the model's with that connection's one unacknowledged command applied.
 *  2. Rounds: CRASH_ROUNDS kill points per variant (SPW_CRASH_ROUNDS in the environment for a long
 *     run). The proof that recovery ran: INFO aof_replayed_records or checkpoint_last_id after the
 *     restart, and the data checked key by key.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/itest.h"

#define NCONN 2
#define NKEYS 24                 /* per connection */
#define VMAX 512

typedef struct model {
	char val[NCONN][NKEYS][VMAX];  /* "" = absent */
} model;

typedef struct pending_op {
	bool any;
	int key;
	char after[VMAX];              /* the key's value if the command was applied */
} pending_op;

static unsigned g_seed;

static int rnd(int n) { return (int)(rand_r(&g_seed) % (unsigned)n); }

static int crash_rounds(int dflt)
{
	const char *e = getenv("SPW_CRASH_ROUNDS");
	return e && atoi(e) > 0 ? atoi(e) : dflt;
}

static void server_start(itest_server *s, const char *const *extra)
{
	static const char *const base[] = { "--threads", "2", "--page", "64k", "--index", "1m",
		"--segment", "1m", "--checkpoint-interval", "0", "--save", "", NULL };
	itest_spillway_start_on(s, itest_data_dir, base, extra);
}

static void key_name(char *buf, size_t len, int conn, int k)
{
	snprintf(buf, len, "c%d:%d", conn, k);
}

/* The value a GET returned: "" for nil. */
static void get_value(itest_conn *c, const char *key, char *out)
{
	char *r = itest_call(c, "get", key, NULL);
	out[0] = '\0';
	if (r[0] == '$' && r[1] != '-') {
		char *p = strstr(r, "\r\n");
		long n = strtol(r + 1, NULL, 10);
		if (p && n >= 0 && n < VMAX) {
			memcpy(out, p + 2, (size_t)n);
			out[n] = '\0';
		}
	}
	free(r);
}

/* Every key is the model's value, or the value after the connection's pending command (note 1);
 * the model takes what the server has. */
static void model_check(itest_server *s, model *m, pending_op *pend)
{
	itest_conn c;
	char key[32], got[VMAX];
	assert_int_equal(itest_conn_open(&c, s->port), 0);
	for (int i = 0; i < NCONN; i++) {
		for (int k = 0; k < NKEYS; k++) {
			key_name(key, sizeof(key), i, k);
			get_value(&c, key, got);
			if (!strcmp(got, m->val[i][k]))
				continue;
			if (pend[i].any && pend[i].key == k && !strcmp(got, pend[i].after)) {
				snprintf(m->val[i][k], VMAX, "%s", got);
				continue;
			}
			itest_server_log_dump(s);
			fail_msg("%s: got '%s', acknowledged '%s'%s%s%s", key, got, m->val[i][k],
			         pend[i].any && pend[i].key == k ? ", or in flight '" : "",
			         pend[i].any && pend[i].key == k ? pend[i].after : "",
			         pend[i].any && pend[i].key == k ? "'" : "");
		}
	}
	itest_conn_close(&c);
}

/* One command for connection i on key k: its argv and the value the key has once it is applied.
 * false when the command would make the value too long (the caller picks another). */
static bool op_make(const model *m, int i, int k, int *argc, const char *argv[4], char bufs[2][VMAX],
		char *after)
{
	const char *cur = m->val[i][k];
	switch (rnd(4)) {
	case 0:   /* SET */
		snprintf(bufs[1], VMAX, "v%d-%.*s", rnd(1000000), rnd(VMAX / 2),
		         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
		argv[0] = "set";
		argv[2] = bufs[1];
		*argc = 3;
		snprintf(after, VMAX, "%s", bufs[1]);
		return true;
	case 1: { /* INCR: on a number, or on an absent key */
		char *end;
		long long v = cur[0] ? strtoll(cur, &end, 10) : 0;
		if (cur[0] && *end)
			return false;
		argv[0] = "incr";
		*argc = 2;
		snprintf(after, VMAX, "%lld", v + 1);
		return true;
	}
	case 2:   /* DEL */
		argv[0] = "del";
		*argc = 2;
		after[0] = '\0';
		return true;
	default:  /* APPEND */
		if (strlen(cur) + 8 >= VMAX / 2)
			return false;
		snprintf(bufs[1], VMAX, "a%d", rnd(100));
		argv[0] = "append";
		argv[2] = bufs[1];
		*argc = 3;
		snprintf(after, VMAX, "%s%s", cur, bufs[1]);
		return true;
	}
}

typedef struct killer {
	pid_t pid;
	int delay_ms;
} killer;

static void *killer_main(void *arg)
{
	killer *k = arg;
	itest_sleep_ms(k->delay_ms);
	kill(k->pid, SIGKILL);
	return NULL;
}

/* Write on NCONN connections, round robin, until the server dies (the killer's SIGKILL); the model
 * gets every acknowledged command, pend the one in flight per connection. bgsave: now and then a
 * BGSAVE on the first connection (a crash during a checkpoint). Returns the commands acknowledged. */
static int write_until_killed(itest_server *s, model *m, pending_op *pend, bool bgsave, int delay_ms)
{
	itest_conn c[NCONN];
	bool alive[NCONN];
	int acked = 0;
	for (int i = 0; i < NCONN; i++) {
		assert_int_equal(itest_conn_open(&c[i], s->port), 0);
		c[i].timeout_ms = 10000;
		alive[i] = true;
		pend[i].any = false;
	}
	killer k = { .pid = s->pid, .delay_ms = delay_ms };
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, killer_main, &k), 0);
	for (int n = 0; alive[0] || alive[1]; n++) {
		int i = n % NCONN;
		if (!alive[i])
			continue;
		if (bgsave && i == 0 && n % 97 == 0) {
			const char *bg[] = { "bgsave" };
			const char *reply;
			if (itest_conn_send_argv(&c[i], 1, bg, NULL) < 0 ||
			    itest_conn_read_reply(&c[i], &reply, NULL) < 0)
				alive[i] = false;
			continue;
		}
		int key = rnd(NKEYS), argc;
		const char *argv[4];
		char bufs[2][VMAX], after[VMAX];
		key_name(bufs[0], VMAX, i, key);
		argv[1] = bufs[0];
		if (!op_make(m, i, key, &argc, argv, bufs, after))
			continue;
		pend[i].any = true;
		pend[i].key = key;
		snprintf(pend[i].after, VMAX, "%s", after);
		const char *reply;
		char type;
		if (itest_conn_send_argv(&c[i], argc, argv, NULL) < 0 ||
		    itest_conn_read_reply(&c[i], &reply, &type) < 0) {
			alive[i] = false;   /* killed: the command stays pending */
			continue;
		}
		if (type == '-')
			fail_msg("%s %s: %s", argv[0], argv[1], reply);
		snprintf(m->val[i][key], VMAX, "%s", after);
		pend[i].any = false;
		acked++;
	}
	pthread_join(th, NULL);
	for (int i = 0; i < NCONN; i++)
		itest_conn_close(&c[i]);
	int st = itest_server_wait(s, ITEST_TIMEOUT_MS);
	assert_int_equal(st, 128 + SIGKILL);
	itest_server_stop(s);
	return acked;
}

/* Rounds of start, check, write, kill (note 2). */
static void crash_rounds_run(const char *const *extra, int rounds, bool bgsave)
{
	model *m = calloc(1, sizeof(*m));
	pending_op pend[NCONN] = { 0 };
	itest_server s;
	long long replayed = 0, acked = 0;
	assert_non_null(m);
	for (int r = 0; r < rounds; r++) {
		server_start(&s, extra);
		model_check(&s, m, pend);
		itest_conn c;
		assert_int_equal(itest_conn_open(&c, s.port), 0);
		replayed += itest_info_field(&c, "persistence", "aof_replayed_records");
		itest_conn_close(&c);
		acked += write_until_killed(&s, m, pend, bgsave, 20 + rnd(120));
	}
	server_start(&s, extra);
	model_check(&s, m, pend);
	assert_int_equal(itest_server_stop(&s), 0);
	fprintf(stderr, "crash: %d kill points, %lld writes acknowledged, %lld AOF records replayed\n",
	        rounds, acked, replayed);
	/* The path ran: acknowledged writes came back through AOF replay. */
	assert_true(acked > 0);
	assert_true(replayed > 0);
	free(m);
}

static int dir_setup(void **state)
{
	g_seed = (unsigned)itest_now_ms();
	fprintf(stderr, "seed %u\n", g_seed);
	return itest_data_dir_setup(state);
}

static void test_kill_memory_only(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--memory", "32m", NULL };
	crash_rounds_run(extra, crash_rounds(25), true);
}

static void test_kill_storage_tier(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--storage-tier",
	                        "--device-type", "posix", "--memory", "512k", NULL };
	crash_rounds_run(extra, crash_rounds(25), true);
}

/* The log's device forgets what was not synced (note: only the log: the AOF is a plain file).
 * First more data than --memory, so that pages are written to the device (INFO tier_flush_writes),
 * which forgets them at the kill: every key must come back all the same. Then kill rounds. */
static void test_power_cut(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--storage-tier",
	                        "--device-type", "fault:posix", "--device-fault", "powercut",
	                        "--memory", "256k", NULL };
	enum { NFILL = 2000 };
	itest_server s;
	itest_conn c;
	char key[32], val[320];
	memset(val, 'p', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (int i = 0; i < NFILL; i++) {
		snprintf(key, sizeof(key), "fill:%d", i);
		val[0] = (char)('a' + i % 26);
		itest_expect(&c, "+OK\r\n", "set", key, val, NULL);
	}
	assert_true(itest_info_stat(&c, "tier_flush_writes") > 0);   /* pages went to the device */
	itest_conn_close(&c);
	kill(s.pid, SIGKILL);
	assert_int_equal(itest_server_wait(&s, ITEST_TIMEOUT_MS), 128 + SIGKILL);
	itest_server_stop(&s);
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (int i = 0; i < NFILL; i++) {
		snprintf(key, sizeof(key), "fill:%d", i);
		val[0] = (char)('a' + i % 26);
		itest_expect_bulk(&c, val, "get", key, NULL);
	}
	assert_int_equal(itest_info_field(&c, "persistence", "aof_replayed_records"), NFILL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
	crash_rounds_run(extra, crash_rounds(8), true);
}

/* Without the AOF the state after a kill is the last SAVE's, exactly. */
static void test_kill_without_aof_gives_the_checkpoint(void **state)
{
	(void)state;
	const char *extra[] = { "--memory", "32m", NULL };
	model *m = calloc(1, sizeof(*m));
	pending_op pend[NCONN] = { 0 };
	itest_server s;
	for (int r = 0; r < crash_rounds(5); r++) {
		server_start(&s, extra);
		model_check(&s, m, pend);
		itest_conn c;
		assert_int_equal(itest_conn_open(&c, s.port), 0);
		if (r > 0)
			assert_true(itest_info_field(&c, "persistence", "checkpoint_last_id") > 0);
		/* Writes, SAVE, then more writes that no checkpoint holds. */
		char key[32], val[32];
		for (int k = 0; k < NKEYS; k++) {
			key_name(key, sizeof(key), 0, k);
			snprintf(val, sizeof(val), "r%d-%d", r, rnd(1000));
			itest_expect(&c, "+OK\r\n", "set", key, val, NULL);
			snprintf(m->val[0][k], VMAX, "%s", val);
		}
		itest_expect(&c, "+OK\r\n", "save", NULL);
		for (int k = 0; k < NKEYS; k++) {
			key_name(key, sizeof(key), 0, k);
			itest_expect(&c, "+OK\r\n", "set", key, "after-save", NULL);
		}
		itest_conn_close(&c);
		kill(s.pid, SIGKILL);
		assert_int_equal(itest_server_wait(&s, ITEST_TIMEOUT_MS), 128 + SIGKILL);
		itest_server_stop(&s);
	}
	server_start(&s, extra);
	model_check(&s, m, pend);
	assert_int_equal(itest_server_stop(&s), 0);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kill_memory_only, dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_kill_storage_tier, dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_power_cut, dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_kill_without_aof_gives_the_checkpoint, dir_setup,
		                                itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
