/*
 * test_durability_faults.c - what a real server does with failing devices and damaged files: a
 * checkpoint whose writes or sync fail (an IO error, a full disk) is reported failed in the reply and in
 * INFO, and the previous checkpoint stays the one a restart loads; a flipped byte in each kind of
 * file (checkpoint meta, index image, log segment, AOF record) stops start-up with a message that
 * names the file, unless --recover-checkpoint previous is asked for; a torn AOF tail is cut.
 *
 * Notes:
 *  1. Each test has its own data folder, passed as --dir and --logdir after the helper's.
 *  2. A start that must be refused runs the binary with itest_prog_run and checks its exit status
 *     and its output (the message), instead of waiting for a PING that never comes.
 *  3. Without --storage-tier, --device-type fault:<type> wraps the device checkpoints write the log
 *     to, so CONFIG SET device-fault makes exactly the checkpoint's writes fail.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/itest.h"

#define BASE_FLAGS "--threads", "2", "--memory", "32m", "--page", "64k", "--index", "1m", \
	"--segment", "1m", "--save", "", "--checkpoint-interval", "0"

static void server_start(itest_server *s, const char *const *extra)
{
	static const char *const base[] = { BASE_FLAGS, NULL };
	itest_spillway_start_on(s, itest_data_dir, base, extra);
}

static void server_kill(itest_server *s)
{
	kill(s->pid, SIGKILL);
	assert_int_equal(itest_server_wait(s, ITEST_TIMEOUT_MS), 128 + SIGKILL);
	itest_server_stop(s);
}

/* Start the binary on itest_data_dir and expect it to refuse (note 2): exit status 1, its output holding
 * every one of the NULL-terminated strings in want. */
static void start_refused(const char *const *extra, const char *const *want)
{
	char exe[512], port[16];
	char *out = NULL;
	assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	snprintf(port, sizeof(port), "%d", itest_port_pick());
	const char *argv[48] = { exe, "--bind", "127.0.0.1", "--port", port, BASE_FLAGS, "--dir", itest_data_dir,
	                         "--logdir", itest_data_dir };
	size_t n = 0;
	while (argv[n])
		n++;
	for (; extra && *extra && n + 1 < sizeof(argv) / sizeof(argv[0]); extra++)
		argv[n++] = *extra;
	int st = itest_prog_run(argv, NULL, 0, &out, NULL, ITEST_TIMEOUT_MS);
	if (st != 1)
		fail_msg("exit status %d, want 1 (refused); output:\n%s", st, out ? out : "");
	for (; *want; want++)
		if (!out || !strstr(out, *want))
			fail_msg("the refusal does not say '%s'; output:\n%s", *want, out ? out : "");
	free(out);
}

/* The path of the first file in itest_data_dir/sub whose name contains part (and not ".tmp"). */
static void find_file(const char *sub, const char *part, char *path, size_t len)
{
	char d[512];
	snprintf(d, sizeof(d), "%s%s%s", itest_data_dir, sub[0] ? "/" : "", sub);
	DIR *dir = opendir(d);
	assert_non_null(dir);
	struct dirent *e;
	path[0] = '\0';
	char best[256] = "";
	while ((e = readdir(dir)) != NULL) {
		if (strstr(e->d_name, part) && !strstr(e->d_name, ".tmp") && strcmp(e->d_name, best) > 0)
			snprintf(best, sizeof(best), "%s", e->d_name);
	}
	closedir(dir);
	if (!best[0])
		fail_msg("no file *%s* in %s", part, d);
	if ((size_t)snprintf(path, len, "%s/%s", d, best) >= len)
		fail_msg("path too long: %s/%s", d, best);
}

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	unsigned char b;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x20;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static off_t file_size(const char *path)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

/* A SAVE that fails (spec armed on the checkpoints' device, note 3) answers an error, INFO says
 * why, and a restart after SIGKILL loads the previous checkpoint. */
static void save_fails(const char *spec, const char *why_part)
{
	const char *extra[] = { "--device-type", "fault:posix", NULL };
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "+OK\r\n", "set", "k", "v1", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	long long id = itest_info_field(&c, "persistence", "checkpoint_last_id");
	assert_true(id > 0);
	itest_expect(&c, "+OK\r\n", "set", "k", "v2", NULL);
	itest_expect(&c, "+OK\r\n", "config", "set", "device-fault", spec, NULL);
	itest_expect(&c, "-ERR\r\n", "save", NULL);
	assert_int_equal(itest_info_field(&c, "persistence", "checkpoint_failures"), 1);
	char *info = itest_call(&c, "info", "persistence", NULL);
	if (!strstr(info, "rdb_last_bgsave_status:err") || !strstr(info, why_part))
		fail_msg("INFO does not report the failure (%s):\n%s", why_part, info);
	free(info);
	assert_int_equal(itest_info_field(&c, "persistence", "checkpoint_last_id"), id);
	/* SHUTDOWN's checkpoint fails too: Redis's error, and the server goes on. */
	itest_expect(&c, "-ERR Errors trying to SHUTDOWN. Check logs.\r\n", "shutdown", NULL);
	itest_expect(&c, "+PONG\r\n", "ping", NULL);
	itest_conn_close(&c);
	server_kill(&s);

	server_start(&s, NULL);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect_bulk(&c, "v1", "get", "k", NULL);
	assert_int_equal(itest_info_field(&c, "persistence", "checkpoint_last_id"), id);
	/* And the next checkpoint works. */
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_checkpoint_write_error(void **state)
{
	(void)state;
	save_fails("write sticky", "Input/output error");
}

static void test_checkpoint_disk_full(void **state)
{
	(void)state;
	save_fails("write sticky enospc", "No space left on device");
}

/* The log's sync (fdatasync of the segments) fails: the checkpoint fails the same way. */
static void test_checkpoint_sync_error(void **state)
{
	(void)state;
	save_fails("error ops=flush sticky", "syncing the log device failed");
}

/* Two checkpoints (k=old, then k=new), then damage the newest's part: refused naming the file;
 * --recover-checkpoint previous starts with k=old. */
static void damaged_checkpoint(const char *sub, const char *part, off_t at_from_end, const char *name_in_msg)
{
	itest_server s;
	itest_conn c;
	char path[512];
	server_start(&s, NULL);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "+OK\r\n", "set", "k", "old", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_expect(&c, "+OK\r\n", "set", "k", "new", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_conn_close(&c);
	server_kill(&s);

	find_file(sub, part, path, sizeof(path));
	flip_byte(path, file_size(path) - at_from_end);
	const char *want[] = { name_in_msg ? name_in_msg : path, "--recover-checkpoint previous", NULL };
	start_refused(NULL, want);

	const char *prev[] = { "--recover-checkpoint", "previous", NULL };
	server_start(&s, prev);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect_bulk(&c, "old", "get", "k", NULL);
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

static void test_corrupt_meta(void **state)
{
	(void)state;
	damaged_checkpoint("", ".meta", 20, NULL);
}

static void test_corrupt_index(void **state)
{
	(void)state;
	damaged_checkpoint("", ".index", 30, NULL);
}

/* The newest checkpoint's last log page (its part below the cut) carries a checksum. */
static void test_corrupt_segment(void **state)
{
	(void)state;
	damaged_checkpoint("Store", "hlog.", 8, "hlog.0");
}

/* AOF: a flipped byte in a middle record refuses start-up naming the file; a torn tail is cut. */
static void test_aof_damage(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--threads", "1", NULL };
	itest_server s;
	itest_conn c;
	char path[512];
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "+OK\r\n", "set", "a", "1", NULL);
	itest_expect(&c, "+OK\r\n", "set", "b", "2", NULL);
	itest_expect(&c, "+OK\r\n", "set", "c", "3", NULL);
	itest_conn_close(&c);
	server_kill(&s);

	find_file("appendonlydir", ".aof", path, sizeof(path));
	off_t size = file_size(path);
	/* Torn tail: the last record loses its last bytes. */
	assert_int_equal(truncate(path, size - 3), 0);
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect_bulk(&c, "1", "get", "a", NULL);
	itest_expect_bulk(&c, "2", "get", "b", NULL);
	itest_expect(&c, "$-1\r\n", "get", "c", NULL);
	assert_true(itest_info_field(&c, "persistence", "aof_torn_bytes") > 0);
	itest_expect(&c, "+OK\r\n", "set", "d", "4", NULL);
	itest_expect(&c, "+OK\r\n", "set", "e", "5", NULL);
	itest_conn_close(&c);
	server_kill(&s);

	/* A middle record of the newest file: refused, naming it. */
	find_file("appendonlydir", ".aof", path, sizeof(path));
	assert_true(strstr(path, ".replayed") == NULL);
	flip_byte(path, 40 + 20);   /* inside the first record, after the 40-byte file header */
	const char *want[] = { path, NULL };
	start_refused(extra, want);
}

/* spillway-check DIR (the built tool, next to the server): 0 and "OK" on a good folder, 1 and
 * "BAD" naming a damaged checkpoint; --fix-aof cuts a torn AOF tail, after which it is 0 again. */
static int check_run(bool fix, char **out)
{
	char exe[512], tool[600];
	assert_int_equal(itest_spillway_path(exe, sizeof(exe)), 0);
	char *slash = strrchr(exe, '/');
	assert_non_null(slash);
	*slash = '\0';
	snprintf(tool, sizeof(tool), "%s/spillway-check", exe);
	const char *argv[] = { tool, "--segment", "1m", "--logdir", itest_data_dir, fix ? "--fix-aof" : itest_data_dir,
	                       fix ? itest_data_dir : NULL, NULL };
	return itest_prog_run(argv, NULL, 0, out, NULL, ITEST_TIMEOUT_MS);
}

static void test_spillway_check(void **state)
{
	(void)state;
	const char *extra[] = { "--aof", "yes", "--aof-fsync", "always", "--threads", "1", NULL };
	itest_server s;
	itest_conn c;
	char path[512], *out = NULL;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, "+OK\r\n", "set", "a", "1", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_expect(&c, "+OK\r\n", "set", "b", "2", NULL);
	itest_expect(&c, "+OK\r\n", "set", "c", "3", NULL);
	itest_conn_close(&c);
	server_kill(&s);

	int st = check_run(false, &out);
	if (st != 0 || !strstr(out, "OK"))
		fail_msg("spillway-check on a good folder: status %d:\n%s", st, out);
	free(out);
	/* A torn AOF tail: reported; --fix-aof cuts it; clean again. */
	find_file("appendonlydir", ".aof", path, sizeof(path));
	assert_int_equal(truncate(path, file_size(path) - 2), 0);
	st = check_run(false, &out);
	if (st != 1)
		fail_msg("spillway-check with a torn AOF tail: status %d:\n%s", st, out);
	free(out);
	st = check_run(true, &out);
	if (st != 0)
		fail_msg("spillway-check --fix-aof: status %d:\n%s", st, out);
	free(out);
	assert_int_equal(check_run(false, &out), 0);
	free(out);
	/* A damaged meta file: BAD, naming it. */
	find_file("", ".meta", path, sizeof(path));
	flip_byte(path, 16);
	st = check_run(false, &out);
	if (st != 1 || !strstr(out, "BAD") || !strstr(out, path))
		fail_msg("spillway-check with a damaged meta file: status %d:\n%s", st, out);
	free(out);
}

/* Segments truncated below a FLUSHALL's Begin, then the checkpoints removed by hand: the next
 * start finds segments but no checkpoint; it sets them aside and starts a fresh log that can be
 * written (a fresh log in a folder whose lowest segment is not the first fails every page write). */
static void test_segments_without_checkpoint(void **state)
{
	(void)state;
	const char *extra[] = { "--storage-tier", "--device-type", "posix", "--memory", "256k", NULL };
	itest_server s;
	itest_conn c;
	char key[32], val[600], path[512];
	memset(val, 'v', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		itest_expect(&c, "+OK\r\n", "set", key, val, NULL);
	}
	itest_expect(&c, "+OK\r\n", "flushall", NULL);
	itest_expect(&c, "+OK\r\n", "set", "after", "1", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_expect(&c, "+OK\r\n", "save", NULL);
	itest_conn_close(&c);
	server_kill(&s);
	snprintf(path, sizeof(path), "%s/Store/hlog.0", itest_data_dir);
	assert_int_equal(access(path, F_OK), -1);   /* truncated below Begin */
	for (int i = 0; i < 4; i++) {   /* two checkpoints: their meta and index files */
		find_file("", "checkpoint.", path, sizeof(path));
		assert_int_equal(unlink(path), 0);
	}

	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	itest_expect(&c, ":0\r\n", "dbsize", NULL);
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		itest_expect(&c, "+OK\r\n", "set", key, val, NULL);
	}
	assert_true(itest_info_stat(&c, "tier_flush_writes") > 0);
	itest_expect_bulk(&c, val, "get", "n0", NULL);   /* read back from the device */
	itest_conn_close(&c);
	assert_int_equal(itest_server_stop(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_checkpoint_write_error, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_disk_full, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_checkpoint_sync_error, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_meta, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_index, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_segment, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_aof_damage, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_spillway_check, itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_segments_without_checkpoint, itest_data_dir_setup, itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
