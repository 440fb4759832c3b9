/*
 * test_aof_groups.c - a real server replaying AOF files that hold groups (server/persist.c note 8,
 * server/aof_read.c notes 1-2): a whole group is applied, its parts under internal keys that no
 * command sees (GET of the same bytes, DBSIZE, KEYS, SCAN, INFO keyspace), also after the
 * checkpoint the replay ends with and a restart on it; a file cut inside a group drops the group
 * whole and keeps what came before. INFO persistence aof_replayed_groups / aof_groups_cut prove
 * the paths ran.
 *
 * Notes:
 *  1. The files are written by the real writer (aof_redo, as a worker's redo hook calls it) into
 *     the data folder before the server starts: the server's commands do not write groups yet
 *     (the large layout is engineer H's); the records are the ones hlog_group_rmw's hook hands over.
 *  2. The group's head is a string record: the AOF does not look at what a head holds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/aof.h"
#include "support/itest.h"

static void server_start(itest_server *s)
{
	static const char *const base[] = { "--threads", "2", "--memory", "32m", "--page", "64k",
		"--index", "1m", "--save", "", "--checkpoint-interval", "0", "--aof", "yes", NULL };
	itest_spillway_start_on(s, itest_data_dir, base, NULL);
}

static void put(aof_writer *w, uint64_t seq, int kind, uint8_t rtype, bool more, const char *key,
                const char *val)
{
	bool set = kind == HLOG_REDO_SET;
	hlog_redo r = {
		.seq = seq, .addr = 1000 + seq, .kind = kind, .key = key, .klen = strlen(key),
		.val = set ? val : NULL, .vlen = set ? strlen(val) : 0, .expire_ms = HLOG_NO_EXPIRY,
		.rtype = rtype, .group_more = more,
	};
	aof_redo(w, &r);
}

/* User keys "a" and "b" around a group: head "h", part "a" (the user key's bytes), part "p:1".
 * Returns the file's path in path. */
static void write_file(char *path, size_t cap)
{
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, itest_data_dir, 0, 1, AOF_FSYNC_NO), 0);
	put(w, 1, HLOG_REDO_SET, HLOG_T_STRING, false, "a", "1");
	put(w, 2, HLOG_REDO_SET, HLOG_T_STRING, false, "b", "2");
	put(w, 3, HLOG_REDO_SET, HLOG_T_STRING, true, "h", "head");
	put(w, 4, HLOG_REDO_SET, HLOG_T_PART, true, "a", "part-a");
	put(w, 5, HLOG_REDO_SET, HLOG_T_PART, false, "p:1", "part-1");
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
	snprintf(path, cap, "%s/%s/spillway.1.0.aof", itest_data_dir, AOF_DIR_NAME);
}

/* What clients see of the store: "a", "b" and, with_head, "h"; never a part. */
static void expect_user_keys(itest_conn *c, bool with_head)
{
	itest_expect_bulk(c, "1", "get", "a", NULL);
	itest_expect_bulk(c, "2", "get", "b", NULL);
	if (with_head) itest_expect_bulk(c, "head", "get", "h", NULL);
	else itest_expect(c, "$-1\r\n", "get", "h", NULL);
	itest_expect(c, "$-1\r\n", "get", "p:1", NULL);
	itest_expect(c, ":0\r\n", "exists", "p:1", NULL);
	itest_expect(c, with_head ? ":3\r\n" : ":2\r\n", "dbsize", NULL);
	itest_strs keys;
	itest_strs_call(c, &keys, "keys", "*", NULL);
	assert_int_equal(keys.n, with_head ? 3 : 2);
	assert_int_equal(itest_strs_find(&keys, "p:1", 0, 1), -1);
	itest_strs_free(&keys);
	char *info = itest_call(c, "info", "keyspace", NULL);
	assert_non_null(strstr(info, with_head ? "db0:keys=3," : "db0:keys=2,"));
	free(info);
}

static void test_a_group_replays_whole_and_its_parts_stay_internal(void **state)
{
	(void)state;
	char path[512];
	write_file(path, sizeof(path));
	itest_server s;
	itest_conn c;
	server_start(&s);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	expect_user_keys(&c, true);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_replayed_groups"), 1);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_groups_cut"), 0);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_replayed_records"), 5);
	/* The replay ended with a checkpoint (persist.c note 1): a restart loads it, parts and all. */
	itest_conn_send_cmd(&c, "shutdown", NULL);
	assert_int_equal(itest_server_wait(&s, ITEST_TIMEOUT_MS), 0);
	itest_server_stop(&s);
	itest_conn_close(&c);
	server_start(&s);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	expect_user_keys(&c, true);
	assert_true(itest_info_field(&c, "persistence", "checkpoint_last_id") > 0);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_a_file_cut_inside_a_group_drops_the_group(void **state)
{
	(void)state;
	char path[512];
	write_file(path, sizeof(path));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size - 2), 0);   /* inside the group's last record */
	itest_server s;
	itest_conn c;
	server_start(&s);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	expect_user_keys(&c, false);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_groups_cut"), 1);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_replayed_groups"), 0);
	assert_int_equal(itest_info_field(&c, "persistence", "aof_replayed_records"), 2);
	assert_true(itest_info_field(&c, "persistence", "aof_torn_bytes") > 0);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_group_replays_whole_and_its_parts_stay_internal,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_a_file_cut_inside_a_group_drops_the_group,
		                                itest_data_dir_setup, itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
