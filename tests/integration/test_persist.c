/*
 * test_persist.c - durability through real server processes and real files (server/persist.c):
 * what a restart brings back after SHUTDOWN, SHUTDOWN NOSAVE and a SIGKILL with the AOF, and the
 * commands and options of checkpoints (SAVE, BGSAVE, LASTSAVE, CONFIG GET save / appendonly).
 *
 * Notes:
 *  1. Each test keeps the data folder of its own (itest_tmpdir_make) and passes it as --dir and
 *     --logdir after the helper's, so that the second process of a test starts on the first one's
 *     files (the helper's own folder, holding the log, goes away with each clean stop).
 *  2. The "restart" tests prove the path ran from INFO: the first process wrote a checkpoint
 *     (rdb_saves after SHUTDOWN is not readable, so the second one reports checkpoint_last_id > 0,
 *     the checkpoint it loaded), and the key is read back by GET.
 *  3. -LOADING is not tested here: recovery of a small store is over before a client could ask.
 *     tests/server/test_dispatch.c checks it on the dispatch path.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/itest.h"

/* A server on itest_data_dir with the small geometry below plus extra (NULL-terminated); fails the test
 * when it does not start. */
static void server_start(itest_server *s, const char *const *extra)
{
	static const char *const base[] = { "--threads", "2", "--memory", "64m", "--page", "1m",
		"--index", "1m", NULL };
	itest_spillway_start_on(s, itest_data_dir, base, extra);
}

/* SHUTDOWN [arg] on c and wait for the process to exit; its exit status must be 0. */
static void server_shutdown(itest_server *s, itest_conn *c, const char *arg)
{
	itest_conn_send_cmd(c, "shutdown", arg, NULL);
	int st = itest_server_wait(s, ITEST_TIMEOUT_MS);
	if (st != 0) {
		itest_server_log_dump(s);
		fail_msg("exit status %d after SHUTDOWN %s", st, arg ? arg : "");
	}
	itest_server_stop(s);   /* reaped: removes its own folder */
}

static void conn_open(itest_conn *c, const itest_server *s)
{
	assert_int_equal(itest_conn_open(c, s->port), 0);
}

/* SET, SHUTDOWN (a checkpoint), restart on the same files: the key is there (note 2). */
static void restart_keeps_key(const char *const *extra)
{
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	conn_open(&c, &s);
	itest_expect(&c, "+OK\r\n", "set", "durable", "value-1", NULL);
	itest_expect(&c, "+OK\r\n", "set", "gone", "x", NULL);
	itest_expect(&c, ":1\r\n", "del", "gone", NULL);
	server_shutdown(&s, &c, NULL);
	itest_conn_close(&c);

	server_start(&s, extra);
	conn_open(&c, &s);
	itest_expect_bulk(&c, "value-1", "get", "durable", NULL);
	itest_expect(&c, "$-1\r\n", "get", "gone", NULL);
	itest_expect(&c, ":1\r\n", "dbsize", NULL);
	assert_true(itest_info_field(&c, "persistence", "checkpoint_last_id") > 0);
	assert_int_equal(itest_info_field(&c, "persistence", "loading"), 0);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_shutdown_checkpoint_brings_a_key_back_memory_only(void **state)
{
	(void)state;
	restart_keeps_key(NULL);
}

static void test_shutdown_checkpoint_brings_a_key_back_with_a_storage_tier(void **state)
{
	(void)state;
	const char *extra[] = { "--storage-tier", "--device-type", "posix", "--memory", "1m", "--page",
	                        "64k", "--segment", "4m", NULL };
	restart_keeps_key(extra);
}

/* SHUTDOWN NOSAVE without an AOF takes no checkpoint: the key written after the last one is gone. */
static void test_shutdown_nosave_without_aof_loses_the_key(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	server_start(&s, NULL);
	conn_open(&c, &s);
	itest_expect(&c, "+OK\r\n", "set", "volatile", "v", NULL);
	server_shutdown(&s, &c, "nosave");
	itest_conn_close(&c);

	server_start(&s, NULL);
	conn_open(&c, &s);
	itest_expect(&c, "$-1\r\n", "get", "volatile", NULL);
	itest_expect(&c, ":0\r\n", "dbsize", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

/* Poll INFO until rdb_saves reaches want (a deadline, not a timed assertion). */
static void saves_wait(itest_conn *c, long long want)
{
	long long t0 = itest_now_ms();
	while (itest_info_field(c, "persistence", "rdb_saves") < want) {
		if (itest_now_ms() - t0 > ITEST_TIMEOUT_MS)
			fail_msg("rdb_saves did not reach %lld", want);
		itest_sleep_ms(10);
	}
}

/* BGSAVE answers at once and LASTSAVE moves once it is done; SAVE answers +OK after its own. */
static void test_bgsave_and_save_move_lastsave(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	server_start(&s, NULL);
	conn_open(&c, &s);
	itest_expect(&c, "+OK\r\n", "set", "k", "v", NULL);
	char *r = itest_call(&c, "lastsave", NULL);
	long long t0 = atoll(r + 1);
	free(r);
	long long saves = itest_info_field(&c, "persistence", "rdb_saves");
	assert_int_equal(itest_info_field(&c, "persistence", "rdb_changes_since_last_save"), 1);
	itest_sleep_ms(1100);   /* LASTSAVE counts seconds */
	itest_expect(&c, "+Background saving started\r\n", "bgsave", NULL);
	saves_wait(&c, saves + 1);
	r = itest_call(&c, "lastsave", NULL);
	assert_true(atoll(r + 1) > t0);
	free(r);
	assert_int_equal(itest_info_field(&c, "persistence", "rdb_changes_since_last_save"), 0);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	assert_int_equal(itest_info_field(&c, "persistence", "rdb_saves"), saves + 2);
	itest_expect(&c, "-ERR syntax error\r\n", "bgsave", "later", NULL);
	itest_expect(&c, "-ERR wrong number of arguments for 'save' command\r\n", "save", "x", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

/* CONFIG GET/SET of the durability options answer as redis-server 7.0. */
static void test_config_get_save_and_appendonly_answer_as_redis(void **state)
{
	(void)state;
	itest_server s;
	itest_conn c;
	server_start(&s, NULL);
	conn_open(&c, &s);
	itest_expect(&c, "*2\r\n$4\r\nsave\r\n$23\r\n3600 1 300 100 60 10000\r\n", "config", "get", "save", NULL);
	itest_expect(&c, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n", "config", "get", "appendonly", NULL);
	itest_expect(&c, "*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n", "config", "get", "appendfsync", NULL);
	itest_expect(&c, "+OK\r\n", "config", "set", "save", "900 1 300 10", NULL);
	itest_expect(&c, "*2\r\n$4\r\nsave\r\n$12\r\n900 1 300 10\r\n", "config", "get", "save", NULL);
	itest_expect(&c, "-ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save "
	             "parameters\r\n", "config", "set", "save", "900", NULL);
	itest_expect(&c, "+OK\r\n", "config", "set", "save", "", NULL);
	itest_expect(&c, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n", "config", "get", "save", NULL);
	itest_expect(&c, "-ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set "
	             "protected config\r\n", "config", "set", "dbfilename", "x.rdb", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

/* With --aof-fsync always, a write acknowledged before a SIGKILL is there after the restart: it
 * comes back from the AOF (no checkpoint holds it: INFO aof_replayed_records counts it). */
static void test_aof_always_keeps_an_acknowledged_write_through_sigkill(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", NULL };
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	conn_open(&c, &s);
	itest_expect(&c, "+OK\r\n", "set", "acked", "1", NULL);
	itest_expect(&c, ":2\r\n", "incr", "acked", NULL);
	itest_expect(&c, ":3\r\n", "append", "acked", "xy", NULL);
	kill(s.pid, SIGKILL);
	assert_int_equal(itest_server_wait(&s, ITEST_TIMEOUT_MS), 128 + SIGKILL);
	itest_conn_close(&c);
	itest_server_stop(&s);

	server_start(&s, extra);
	conn_open(&c, &s);
	itest_expect_bulk(&c, "2xy", "get", "acked", NULL);
	assert_true(itest_info_field(&c, "persistence", "aof_replayed_records") >= 3);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_enabled"), 1);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

/* Collections keep their type through a checkpoint and the AOF replay after a SIGKILL (the record
 * type travels in the log record and in the AOF record's byte 5): TYPE, contents, TTL, RENAME and
 * COPY of them, and the replay path ran (aof_replayed_records). */
static void collections_come_back(const char *const *extra)
{
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	conn_open(&c, &s);
	itest_expect(&c, ":2\r\n", "hset", "h", "f1", "v1", "f2", "v2", NULL);
	itest_expect(&c, ":3\r\n", "rpush", "l", "a", "b", "c", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);   /* these two in the checkpoint */
	itest_expect(&c, ":1\r\n", "hset", "h", "f3", "v3", NULL);
	itest_expect(&c, ":4\r\n", "lpush", "l", "z", NULL);
	itest_expect(&c, ":1\r\n", "expire", "h", "100000", NULL);
	itest_expect(&c, ":1\r\n", "copy", "l", "l2", NULL);
	itest_expect(&c, "+OK\r\n", "rename", "h", "h2", NULL);
	itest_expect(&c, ":2\r\n", "rpush", "fresh", "1", "2", NULL);   /* only in the AOF */
	itest_expect(&c, "+OK\r\n", "set", "s", "plain", NULL);
	kill(s.pid, SIGKILL);
	assert_int_equal(itest_server_wait(&s, ITEST_TIMEOUT_MS), 128 + SIGKILL);
	itest_conn_close(&c);
	itest_server_stop(&s);

	server_start(&s, extra);
	conn_open(&c, &s);
	assert_true(itest_info_field(&c, "persistence", "aof_replayed_records") >= 7);
	itest_expect(&c, "+hash\r\n", "type", "h2", NULL);
	itest_expect(&c, "+none\r\n", "type", "h", NULL);
	itest_expect(&c, "*6\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n$2\r\nf3\r\n$2\r\nv3\r\n",
	             "hgetall", "h2", NULL);
	char *ttl = itest_call(&c, "ttl", "h2", NULL);
	assert_true(ttl[0] == ':' && atoll(ttl + 1) > 99000);
	free(ttl);
	for (int i = 0; i < 2; i++)
		itest_expect(&c, "*4\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", "lrange",
		             i ? "l2" : "l", "0", "-1", NULL);
	itest_expect(&c, "+list\r\n", "type", "fresh", NULL);
	itest_expect(&c, "$9\r\nquicklist\r\n", "object", "encoding", "fresh", NULL);
	itest_expect(&c, "$5\r\nplain\r\n", "get", "s", NULL);
	itest_expect(&c, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "get", "l", NULL);
	itest_expect(&c, ":5\r\n", "dbsize", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_collections_come_back_through_a_checkpoint_and_the_aof(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", NULL };
	collections_come_back(extra);
}

static void test_collections_come_back_with_a_storage_tier(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--storage-tier", "--device-type",
	                        "posix", "--memory", "1m", "--page", "64k", "--segment", "4m", NULL };
	collections_come_back(extra);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_shutdown_checkpoint_brings_a_key_back_memory_only,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_checkpoint_brings_a_key_back_with_a_storage_tier,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_nosave_without_aof_loses_the_key, itest_data_dir_setup,
		                                itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_bgsave_and_save_move_lastsave, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_config_get_save_and_appendonly_answer_as_redis, itest_data_dir_setup,
		                                itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_aof_always_keeps_an_acknowledged_write_through_sigkill,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_collections_come_back_through_a_checkpoint_and_the_aof,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_collections_come_back_with_a_storage_tier,
		                                itest_data_dir_setup, itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
