/*
 * test_compact.c - compaction and the disk budget through real server processes on real segment
 * files (server/compact.c, log/compact.c): overwrites compacted by COMPACT with a restart in the
 * middle and after, compaction started by --compaction-max-segments alone, a full --disk-max with
 * noeviction answering -OOM and losing nothing, and cache mode (an evicting maxmemory-policy)
 * dropping the oldest keys instead. Disk use is what du shows: the allocated blocks of the files.
 *
 * Each test proves from INFO that its path ran (compaction_copied_records, compaction_passes,
 * evicted_keys, the -OOM reply itself) and checks every key it wrote.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/itest.h"

#define VAL 1000          /* value bytes */
#define BATCH 500         /* commands per pipeline */

static void server_start(itest_server *s, const char *const *extra)
{
	static const char *const base[] = { "--threads", "2", "--storage-tier", "yes", "--memory", "4m",
		"--page", "64k", "--segment", "1m", "--index", "4m", "--compaction-io-limit", "0",
		"--save", "", "--checkpoint-interval", "0", NULL };
	itest_spillway_start_on(s, itest_data_dir, base, extra);
}

/* Allocated bytes of the segment files (what du shows for <dir>/Store). */
static uint64_t store_du(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/Store", itest_data_dir);
	DIR *d = opendir(path);
	assert_non_null(d);
	uint64_t sum = 0;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st;
		if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

static size_t key_of(int i, char *buf) { return (size_t)sprintf(buf, "ck:%07d", i); }

/* Key i's value of version v: VAL bytes that tell both apart. */
static void val_of(int i, int v, char *buf)
{
	int n = sprintf(buf, "%d:%d:", i, v);
	for (int k = n; k < VAL; k++)
		buf[k] = (char)('a' + (i + v + k) % 26);
}

static void bulk_cmd(itest_buf *b, int argc, const char *const *argv, const size_t *lens)
{
	itest_buf_fmt(b, "*%d\r\n", argc);
	for (int a = 0; a < argc; a++)
		itest_buf_bulk(b, argv[a], lens[a]);
}

/* SET keys [from, to) to version v (with PX px unless NULL), pipelined; every reply must be +OK. */
static void write_ttl(itest_conn *c, int from, int to, int v, const char *px)
{
	char k[32], val[VAL];
	for (int i = from; i < to;) {
		itest_buf cmd = { 0 }, want = { 0 };
		for (int n = 0; n < BATCH && i < to; n++, i++) {
			size_t kl = key_of(i, k);
			val_of(i, v, val);
			const char *argv[] = { "SET", k, val, "PX", px };
			size_t lens[] = { 3, kl, VAL, 2, px ? strlen(px) : 0 };
			bulk_cmd(&cmd, px ? 5 : 3, argv, lens);
			itest_buf_add(&want, "+OK\r\n", 5);
		}
		assert_int_equal(itest_conn_send(c, cmd.p, cmd.len), 0);
		char err[512];
		if (itest_replies_check(c, want.p, want.len, NULL, err, sizeof(err)) < 0)
			fail_msg("write_ttl %d: %s", v, err);
		free(cmd.p);
		free(want.p);
	}
}

static void write_version(itest_conn *c, int from, int to, int v)
{
	write_ttl(c, from, to, v, NULL);
}

/* GET keys [from, to): version v[i] (0 = absent), pipelined. */
static void check_versions(itest_conn *c, int from, int to, const int *v)
{
	char k[32], val[VAL];
	for (int i = from; i < to;) {
		itest_buf cmd = { 0 }, want = { 0 };
		for (int n = 0; n < BATCH && i < to; n++, i++) {
			size_t kl = key_of(i, k);
			const char *argv[] = { "GET", k };
			size_t lens[] = { 3, kl };
			bulk_cmd(&cmd, 2, argv, lens);
			if (v[i]) {
				val_of(i, v[i], val);
				itest_buf_bulk(&want, val, VAL);
			} else {
				itest_buf_add(&want, "$-1\r\n", 5);
			}
		}
		assert_int_equal(itest_conn_send(c, cmd.p, cmd.len), 0);
		char err[512];
		if (itest_replies_check(c, want.p, want.len, NULL, err, sizeof(err)) < 0)
			fail_msg("check_versions: %s", err);
		free(cmd.p);
		free(want.p);
	}
}

static void shutdown_wait(itest_server *s, itest_conn *c)
{
	itest_conn_send_cmd(c, "shutdown", NULL);
	assert_int_equal(itest_server_wait(s, ITEST_TIMEOUT_MS), 0);
	itest_server_stop(s);
	itest_conn_close(c);
}

/* 5,000 keys of 1 KB rewritten 8 times (about 40 MB through a 4 MB memory) with a restart after
 * the fourth: COMPACT copies the live records, the segments below go, disk use is at most 3x the
 * live data, and every key has its latest value, also after another restart. */
static void test_overwrites_compacted_bound_the_disk_and_keep_the_latest_values(void **state)
{
	(void)state;
	enum { N = 5000, R = 8 };
	static const char *const extra[] = { "--compaction-max-segments", "0", NULL };
	static int want[N];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (int v = 1; v <= R; v++) {
		write_version(&c, 0, N, v);
		if (v == R / 2) {
			shutdown_wait(&s, &c);
			server_start(&s, extra);
			assert_int_equal(itest_conn_open(&c, s.port), 0);
		}
	}
	uint64_t live = (uint64_t)N * (VAL + 32), before = store_du();
	assert_true(before > 3 * live);   /* the overwrites left garbage on the disk */
	long long copied = itest_info_stat(&c, "compaction_copied_records");
	long long saves = itest_info_field(&c, "persistence", "rdb_saves");
	/* COMPACT on one connection while another asks for checkpoints all along: a pass and a
	 * checkpoint overlap (the checkpoint waits for page writes the compactor's copies claimed). */
	itest_conn c2;
	assert_int_equal(itest_conn_open(&c2, s.port), 0);
	assert_int_equal(itest_conn_send_cmd(&c, "compact", NULL), 0);
	const char *reply = NULL;
	char type = 0;
	bool done = false;
	for (long long until = itest_now_ms() + 120000; !done && itest_now_ms() < until;) {
		char *r = itest_call(&c2, "bgsave", NULL);
		free(r);
		itest_sleep_ms(20);
		struct pollfd pfd = { .fd = c.fd, .events = POLLIN };
		if (c.len > c.pos || poll(&pfd, 1, 0) > 0)
			done = true;
	}
	assert_true(done);
	ssize_t n = itest_conn_read_reply(&c, &reply, &type);
	assert_true(n > 0);
	itest_bytes_expect("COMPACT", reply, (size_t)n, "+OK\r\n", 5);
	itest_conn_close(&c2);
	assert_true(itest_info_field(&c, "persistence", "rdb_saves") > saves);
	itest_stat_grew(&c, "compaction_copied_records", copied, 1, "COMPACT copies live records");
	/* Strings only: no part to drop (INFO # Stats names the count, compact.c note 8). */
	assert_int_equal(itest_info_field(&c, "stats", "compact_parts_dropped"), 0);
	uint64_t after = store_du();
	print_message("disk use: %llu KiB before COMPACT, %llu KiB after, live data %llu KiB\n",
	              (unsigned long long)before >> 10, (unsigned long long)after >> 10,
	              (unsigned long long)live >> 10);
	assert_true(after <= 3 * live);
	for (int i = 0; i < N; i++)
		want[i] = R;
	check_versions(&c, 0, N, want);
	itest_expect(&c, ":5000\r\n", "dbsize", NULL);
	shutdown_wait(&s, &c);
	/* Recovery after compaction: the checkpoint's Begin is past the segments that went. */
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	check_versions(&c, 0, N, want);
	itest_expect(&c, ":5000\r\n", "dbsize", NULL);
	shutdown_wait(&s, &c);
}

/* Wait until INFO field name (section store) is at least at_least. */
static long long wait_field(itest_conn *c, const char *section, const char *name, long long at_least,
                            int timeout_ms)
{
	long long v = -1, until = itest_now_ms() + timeout_ms;
	while ((v = itest_info_field(c, section, name)) < at_least && itest_now_ms() < until)
		itest_sleep_ms(100);
	return v;
}

/* No COMPACT: past --compaction-max-segments the compactor starts by itself and brings the disk
 * back down. */
static void test_compaction_starts_by_itself_past_max_segments(void **state)
{
	(void)state;
	enum { N = 5000, R = 6 };
	static const char *const extra[] = { "--compaction-max-segments", "8", NULL };
	static int want[N];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	for (int v = 1; v <= R; v++)
		write_version(&c, 0, N, v);
	assert_true(wait_field(&c, "store", "compaction_passes", 1, 60000) >= 1);
	uint64_t live = (uint64_t)N * (VAL + 32), du = 0;
	long long until = itest_now_ms() + 60000;
	while ((du = store_du()) > 4 * live && itest_now_ms() < until)
		itest_sleep_ms(200);
	print_message("disk use %llu KiB with %lld passes, live data %llu KiB\n", (unsigned long long)du >> 10,
	              itest_info_field(&c, "store", "compaction_passes"), (unsigned long long)live >> 10);
	assert_true(du <= 4 * live);
	for (int i = 0; i < N; i++)
		want[i] = R;
	check_versions(&c, 0, N, want);
	shutdown_wait(&s, &c);
}

/* SET new keys until the reply is -OOM (or the deadline): returns how many were acknowledged. */
static int write_until_oom(itest_conn *c, int max, bool *oom)
{
	char k[32], val[VAL];
	*oom = false;
	int i = 0;
	long long until = itest_now_ms() + 120000;
	while (i < max && !*oom && itest_now_ms() < until) {
		for (int n = 0; n < 50 && i < max; n++) {
			size_t kl = key_of(i, k);
			val_of(i, 1, val);
			const char *argv[] = { "SET", k, val };
			size_t lens[] = { 3, kl, VAL };
			char *r = itest_conn_call_argv(c, 3, argv, lens);
			assert_non_null(r);
			if (strncmp(r, "-OOM", 4) == 0) {
				assert_string_equal(r, "-OOM command not allowed when used disk > 'disk-max'.\r\n");
				*oom = true;
				free(r);
				break;
			}
			assert_string_equal(r, "+OK\r\n");
			free(r);
			i++;
		}
		itest_sleep_ms(5);   /* lets the compactor's once-a-second look see the disk */
	}
	return i;
}

/* noeviction (the default) with a disk budget: once it is full, writes get Redis's -OOM, reads
 * go on, every acknowledged key is there; FLUSHALL gives the space back and writes work again. */
static void test_full_disk_budget_answers_oom_and_loses_nothing(void **state)
{
	(void)state;
	enum { MAX = 60000 };
	static const char *const extra[] = { "--disk-max", "8mb", "--compaction-max-segments", "0", NULL };
	static int want[MAX];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	bool oom;
	int n = write_until_oom(&c, MAX, &oom);
	assert_true(oom);
	assert_int_equal(itest_info_field(&c, "store", "disk_oom"), 1);
	for (int i = 0; i < n; i++)
		want[i] = 1;
	check_versions(&c, 0, n, want);
	char dbs[32];
	snprintf(dbs, sizeof(dbs), ":%d\r\n", n);
	itest_expect(&c, dbs, "dbsize", NULL);
	itest_expect(&c, "+OK\r\n", "flushall", NULL);
	long long until = itest_now_ms() + 30000;
	while (itest_info_field(&c, "store", "disk_oom") != 0 && itest_now_ms() < until)
		itest_sleep_ms(100);
	itest_expect(&c, "+OK\r\n", "set", "after", "flush", NULL);
	shutdown_wait(&s, &c);
}

/* Cache mode: with an evicting policy a full budget drops the oldest segments instead: writes
 * never fail, the disk stays near the budget, evicted keys are counted and the rest read back. */
static void test_cache_mode_drops_the_oldest_keys_to_stay_within_the_disk_budget(void **state)
{
	(void)state;
	enum { N = 24000 };
	static const char *const extra[] = { "--disk-max", "8mb", "--maxmemory-policy", "allkeys-lru",
		"--compaction-max-segments", "0", NULL };
	static int want[N];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	/* All N in pieces, each piece a fresh range of keys: every SET must be +OK. */
	for (int from = 0; from < N; from += 2000) {
		write_version(&c, from, from + 2000, 2);
		itest_sleep_ms(50);
	}
	long long evicted = wait_field(&c, "stats", "evicted_keys", 1, 60000);
	assert_true(evicted > 0);
	uint64_t du = 0;
	long long until = itest_now_ms() + 60000;
	while ((du = store_du()) > 12ULL << 20 && itest_now_ms() < until)
		itest_sleep_ms(200);
	print_message("cache mode: disk use %llu KiB, %lld keys evicted\n", (unsigned long long)du >> 10,
	              itest_info_field(&c, "stats", "evicted_keys"));
	assert_true(du <= 12ULL << 20);
	/* Each key either reads its value or is gone; the count is exact. The compactor may still be
	 * evicting: a round counts only when evicted_keys did not move during it. */
	for (int round = 0;; round++) {
		assert_true(round < 20);
		long long ev0 = itest_info_field(&c, "stats", "evicted_keys");
		char *r = itest_call(&c, "dbsize", NULL);
		long long keys = atoll(r + 1);
		free(r);
		int present = 0;
		for (int i = 0; i < N; i++) {
			char k[32];
			key_of(i, k);
			char *g = itest_call(&c, "exists", k, NULL);
			want[i] = g[1] == '1' ? 2 : 0;
			present += want[i] != 0;
			free(g);
		}
		if (itest_info_field(&c, "stats", "evicted_keys") != ev0) {
			itest_sleep_ms(500);
			continue;
		}
		assert_int_equal(keys + ev0, N);
		assert_int_equal(present, keys);
		break;
	}
	check_versions(&c, 0, N, want);
	shutdown_wait(&s, &c);
}

/* TTL churn: 12 MB of keys with a short TTL over 1 MB segments, then live keys without one. Once
 * they have expired, COMPACT drops their segments without reading them (INFO
 * compaction_expired_drop_bytes; compaction_read_bytes grew by less than the log left after them),
 * DBSIZE falls to the live keys, expired_keys counts every expired key, and none comes back. */
/* by_itself: no COMPACT; the compactor starts the pass for the expired units at the oldest end
 * (server/compact.c note 1), and their disk comes back. */
static void expired_units_go_unread(bool by_itself)
{
	enum { E = 12000, L = 1000 };
	static const char *const extra[] = { "--compaction-max-segments", "0", NULL };
	static int want[E + L];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	/* The compactor starts a pass by itself once COMPACT_EXPIRED_UNITS units at the oldest end
	 * have expired (server/compact.c note 1), which on a slow or loaded machine happens while the
	 * later TTL keys are still being written or have not passed the margin yet: a first pass may
	 * drop only the oldest units, and the rest go in later ones. So nothing here assumes how long
	 * the writes took: the test waits for the drops to add up (a condition on the counter, read
	 * again each time), and disk use is measured against what the writes made, not against a
	 * sample that the first drops may already have shrunk. */
	long long drop0 = itest_info_field(&c, "store", "compaction_expired_drop_bytes");
	long long exp0 = itest_info_field(&c, "stats", "expired_keys");   /* early drops count too */
	write_ttl(&c, 0, E, 1, "1500");
	long long written = itest_now_ms();
	write_version(&c, E, E + L, 1);
	long long read0 = itest_info_stat(&c, "compaction_read_bytes");
	long long early = itest_info_field(&c, "store", "compaction_expired_drop_bytes") - drop0;
	long long tail = itest_info_field(&c, "store", "Log.TailAddress");
	long long span = tail - itest_info_field(&c, "store", "Log.BeginAddress") + early;
	/* Past the TTL and the drop's margin on the clock (2 s, compact.c note 7), then COMPACT until
	 * the passes have dropped most of the TTL keys' units (the compactor's clock decides). */
	while (itest_now_ms() < written + 1500 + 2500)
		itest_sleep_ms(100);
	long long dropped = 0;
	for (long long until = itest_now_ms() + 60000; itest_now_ms() < until; itest_sleep_ms(500)) {
		if (!by_itself)
			itest_expect(&c, "+OK\r\n", "compact", NULL);
		dropped = itest_info_field(&c, "store", "compaction_expired_drop_bytes") - drop0;
		if (dropped >= 6LL << 20)
			break;
	}
	if (by_itself) {
		/* The log's bytes written so far were on the device or in memory; what is left of them
		 * once the drops' segments went is at most what was not dropped (in whole segments), plus
		 * the checkpoints' files (4 MiB index images, compressed): 3 MiB of slack. */
		/* The pass is counted (compaction_passes) only after its checkpoints, while each of them
		 * gives segments back as soon as it is done (server/compact.c note 3): the disk may shrink
		 * before the count moves, so both are waited for. */
		uint64_t du = store_du(), left = (uint64_t)(tail - dropped);
		long long passes = itest_info_field(&c, "store", "compaction_passes");
		for (long long until = itest_now_ms() + 60000;
		     (du > left + (3ULL << 20) || passes == 0) && itest_now_ms() < until; itest_sleep_ms(200)) {
			du = store_du();
			passes = itest_info_field(&c, "store", "compaction_passes");
		}
		print_message("log written %lld KiB, %lld KiB dropped unread (%lld of them before the writes "
		              "ended), disk use now %llu KiB\n", tail >> 10, dropped >> 10, early >> 10,
		              (unsigned long long)du >> 10);
		/* the segments went, with no COMPACT and no segment trigger */
		assert_true(du <= left + (3ULL << 20));
		assert_true(passes > 0);
	}
	long long read = itest_info_stat(&c, "compaction_read_bytes") - read0;
	print_message("expired drop: %lld bytes dropped unread (%lld units), %lld bytes read, log %lld bytes\n",
	              dropped, itest_info_field(&c, "store", "compaction_expired_drop_units"), read, span);
	assert_true(dropped >= 6LL << 20);   /* most of the 12 MB of TTL keys */
	assert_true(read <= span - dropped);
	/* DBSIZE falls to the live keys (what is left in memory goes by active expiry). */
	char live[32];
	snprintf(live, sizeof(live), ":%d\r\n", L);
	char *r = NULL;
	for (long long until = itest_now_ms() + 60000; itest_now_ms() < until; itest_sleep_ms(100)) {
		free(r);
		r = itest_call(&c, "dbsize", NULL);
		if (!strcmp(r, live))
			break;
	}
	assert_string_equal(r, live);
	free(r);
	assert_int_equal(itest_info_field(&c, "stats", "expired_keys") - exp0, E);
	for (int i = 0; i < E + L; i++)
		want[i] = i < E ? 0 : 1;
	check_versions(&c, 0, E + L, want);
	itest_expect(&c, live, "dbsize", NULL);
	shutdown_wait(&s, &c);
}

static void test_segments_of_expired_keys_go_unread(void **state)
{
	(void)state;
	expired_units_go_unread(false);
}

static void test_segments_of_expired_keys_go_unread_without_compact(void **state)
{
	(void)state;
	expired_units_go_unread(true);
}

/* The figures a drop decides by are this process's own: after a restart, the recovered segments
 * (none of whose records this process saw written, so none counted against a drop) are read by
 * compaction as before, never dropped unread: every key survives. */
static void test_recovered_segments_are_never_dropped_unread(void **state)
{
	(void)state;
	enum { N = 6000, M = 4000 };
	static const char *const extra[] = { "--compaction-max-segments", "0", NULL };
	static int want[N + M];
	itest_server s;
	itest_conn c;
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	write_version(&c, 0, N, 1);
	shutdown_wait(&s, &c);
	server_start(&s, extra);
	assert_int_equal(itest_conn_open(&c, s.port), 0);
	write_version(&c, N, N + M, 1);   /* the recovered segments go to the device part compacted */
	long long passes = itest_info_field(&c, "store", "compaction_passes");
	itest_expect(&c, "+OK\r\n", "compact", NULL);
	assert_true(itest_info_field(&c, "store", "compaction_passes") > passes);
	assert_int_equal(itest_info_field(&c, "store", "compaction_expired_drop_bytes"), 0);
	for (int i = 0; i < N + M; i++)
		want[i] = 1;
	check_versions(&c, 0, N + M, want);
	itest_expect(&c, ":10000\r\n", "dbsize", NULL);
	shutdown_wait(&s, &c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_overwrites_compacted_bound_the_disk_and_keep_the_latest_values,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_compaction_starts_by_itself_past_max_segments, itest_data_dir_setup,
		                                itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_budget_answers_oom_and_loses_nothing, itest_data_dir_setup,
		                                itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_cache_mode_drops_the_oldest_keys_to_stay_within_the_disk_budget,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_segments_of_expired_keys_go_unread, itest_data_dir_setup,
		                                itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_segments_of_expired_keys_go_unread_without_compact,
		                                itest_data_dir_setup, itest_data_dir_teardown),
		cmocka_unit_test_setup_teardown(test_recovered_segments_are_never_dropped_unread, itest_data_dir_setup,
		                                itest_data_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
