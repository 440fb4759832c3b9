/*
 * test_aof.c - the append-only file (server/aof.c): writers, replay's merge by seq and its cut,
 * torn tails against corruption in the middle, the offline check and its fix, pruning, big values.
 *
 * Each test works in its own temporary folder (setup/teardown), so the process-wide registry of
 * closed files never mixes two tests' files (aof_prune only looks at its own folder).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/aof.h"

#include "tests/server/aof_fixture.h"

static bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* One redo record: key "k<seq>", value "v<seq>" (SET). */
static void put(aof_writer *w, uint64_t seq, uint64_t addr, int kind)
{
	char key[32], val[32];
	int kl = snprintf(key, sizeof(key), "k%llu", (unsigned long long)seq);
	int vl = snprintf(val, sizeof(val), "v%llu", (unsigned long long)seq);
	hlog_redo r = {
		.seq = seq, .addr = addr, .kind = kind, .key = key, .klen = (size_t)kl,
		.val = kind == HLOG_REDO_SET ? val : NULL, .vlen = kind == HLOG_REDO_SET ? (size_t)vl : 0,
		.expire_ms = kind == HLOG_REDO_SET ? (int64_t)(1000 + seq) : HLOG_NO_EXPIRY,
	};
	aof_redo(w, &r);
}

/* What replay applied, in order. */
typedef struct seen {
	uint64_t seq[256];
	uint64_t addr[256];
	int kind[256];
	int n;
	bool content_ok;
	int fail_at;            /* apply returns -EIO at this record (0: never) */
} seen;

static int apply_record(void *ctx, const aof_rec *r)
{
	seen *s = ctx;
	if (s->fail_at && s->n + 1 == s->fail_at) return -EIO;
	char key[32], val[32];
	int kl = snprintf(key, sizeof(key), "k%llu", (unsigned long long)r->seq);
	int vl = snprintf(val, sizeof(val), "v%llu", (unsigned long long)r->seq);
	if (r->klen != (uint32_t)kl || memcmp(r->key, key, (size_t)kl) != 0) s->content_ok = false;
	if (r->kind == HLOG_REDO_SET) {
		if (r->vlen != (uint32_t)vl || memcmp(r->val, val, (size_t)vl) != 0) s->content_ok = false;
		if (r->expire_ms != (int64_t)(1000 + r->seq)) s->content_ok = false;
	} else if (r->vlen != 0) {
		s->content_ok = false;
	}
	if (s->n < 256) {
		s->seq[s->n] = r->seq;
		s->addr[s->n] = r->addr;
		s->kind[s->n] = r->kind;
	}
	s->n++;
	return 0;
}

static int replay(const char *dir, uint64_t cut, seen *s, aof_replay_stats *st, char *why,
                  size_t whylen)
{
	memset(s, 0, sizeof(*s));
	s->content_ok = true;
	return aof_replay(dir, cut, apply_record, s, st, why, whylen);
}

/* n records with seqs first, first+step, ...; addr = 100 * seq. Closes the writer. */
static void write_file(const char *dir, int worker, uint64_t gen, uint64_t first, uint64_t step,
                       int n)
{
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, dir, worker, gen, AOF_FSYNC_NO), 0);
	for (int i = 0; i < n; i++) {
		uint64_t seq = first + (uint64_t)i * step;
		put(w, seq, 100 * seq, HLOG_REDO_SET);
	}
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
}

static void test_two_writers_merge_by_seq_and_skip_below_cut(void **state)
{
	fixture *f = *state;
	assert_int_equal(aof_dir_prepare(f->dir), 0);
	aof_writer *w0, *w1;
	assert_int_equal(aof_writer_open(&w0, f->dir, 0, 1, AOF_FSYNC_ALWAYS), 0);
	assert_int_equal(aof_writer_open(&w1, f->dir, 1, 1, AOF_FSYNC_NO), 0);
	/* Odd seqs on worker 0, even on worker 1; flushed in several passes, as an event loop does. */
	for (uint64_t seq = 1; seq <= 20; seq++) {
		int kind = seq == 7 ? HLOG_REDO_DEL : seq == 12 ? HLOG_REDO_FLUSHALL : HLOG_REDO_SET;
		put(seq % 2 ? w0 : w1, seq, 100 * seq, kind);
		if (seq % 5 == 0) {
			assert_true(aof_writer_dirty(w0) || aof_writer_dirty(w1));
			assert_int_equal(aof_writer_flush(w0), 0);
			assert_int_equal(aof_writer_flush(w1), 0);
			assert_false(aof_writer_dirty(w0));
		}
	}
	assert_true(aof_writer_bytes(w0) > 40);
	assert_int_equal(aof_writer_error(w0), 0);
	aof_writer_close(w0);
	aof_writer_close(w1);

	seen s;
	aof_replay_stats st;
	char why[512];
	assert_int_equal(replay(f->dir, 500, &s, &st, why, sizeof(why)), 0);
	assert_int_equal(st.files, 2);
	assert_int_equal(st.records, 20);
	assert_int_equal(st.skipped, 4);          /* addr 100..400 < 500 */
	assert_int_equal(st.applied, 16);
	assert_int_equal(st.max_seq, 20);
	assert_int_equal(st.torn_bytes, 0);
	assert_int_equal(st.bytes_done, st.bytes_total);
	assert_int_equal(s.n, 16);
	assert_true(s.content_ok);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(s.seq[i], 5 + i);
		assert_int_equal(s.addr[i], 100 * (5 + i));
	}
	assert_int_equal(s.kind[7 - 5], HLOG_REDO_DEL);
	assert_int_equal(s.kind[12 - 5], HLOG_REDO_FLUSHALL);
	assert_int_equal(s.kind[13 - 5], HLOG_REDO_SET);

	/* An apply error stops replay and is returned, naming the file. */
	memset(&s, 0, sizeof(s));
	s.content_ok = true;
	s.fail_at = 3;
	assert_int_equal(aof_replay(f->dir, 0, apply_record, &s, &st, why, sizeof(why)), -EIO);
	assert_non_null(strstr(why, "spillway.1."));
	assert_int_equal(s.n, 2);
}

static void test_torn_tails_are_cut_and_counted(void **state)
{
	fixture *f = *state;
	char p0[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX], p4[PATH_MAX];
	/* Two-digit seqs: every record has the same size. */
	write_file(f->dir, 0, 1, 10, 3, 5);   /* seqs 10 13 16 19 22 */
	write_file(f->dir, 1, 1, 11, 3, 5);   /* seqs 11 14 17 20 23 */
	write_file(f->dir, 2, 1, 12, 3, 5);   /* seqs 12 15 18 21 24 */
	file_path(p0, sizeof(p0), f->dir, 1, 0);
	file_path(p1, sizeof(p1), f->dir, 1, 1);
	file_path(p2, sizeof(p2), f->dir, 1, 2);
	file_path(p3, sizeof(p3), f->dir, 1, 3);
	file_path(p4, sizeof(p4), f->dir, 1, 4);
	off_t full = file_size(p0);
	/* Worker 0: cut mid-record (its last record loses 7 bytes). */
	assert_int_equal(truncate(p0, full - 7), 0);
	/* Worker 1: a tail of zero bytes after its records. */
	int fd = open(p1, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	static const char zeros[4096];
	assert_int_equal(write(fd, zeros, sizeof(zeros)), (ssize_t)sizeof(zeros));
	close(fd);
	/* Worker 2: its last record fails its checksum and ends exactly at the end. */
	fd = open(p2, O_RDWR);
	assert_true(fd >= 0);
	char c;
	assert_int_equal(pread(fd, &c, 1, full - 1), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, full - 1), 1);
	close(fd);
	/* Workers 3 and 4: a crash while creating the file (empty; a header cut short). */
	fd = open(p3, O_WRONLY | O_CREAT, 0644);
	close(fd);
	fd = open(p4, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(write(fd, "SPWAOF01\1\0\0\0", 12), 12);
	close(fd);

	seen s;
	aof_replay_stats st;
	char why[512] = "";
	assert_int_equal(replay(f->dir, 0, &s, &st, why, sizeof(why)), 0);
	assert_int_equal(st.files, 5);
	assert_int_equal(st.records, 13);        /* 4 + 5 + 4 */
	assert_int_equal(s.n, 13);
	assert_true(s.content_ok);
	uint64_t rec_bytes = (uint64_t)(full - 40) / 5;
	assert_int_equal(st.torn_bytes, (rec_bytes - 7) + sizeof(zeros) + rec_bytes + 12);
	for (int i = 1; i < s.n; i++) assert_true(s.seq[i] > s.seq[i - 1]);
	assert_int_equal(st.max_seq, 23);
	assert_int_equal(st.bytes_done, st.bytes_total);
}

static void test_middle_corruption_is_refused_naming_the_file(void **state)
{
	fixture *f = *state;
	char p[PATH_MAX];
	write_file(f->dir, 0, 1, 1, 1, 3);
	write_file(f->dir, 1, 1, 10, 1, 5);
	file_path(p, sizeof(p), f->dir, 1, 1);
	off_t full = file_size(p);
	uint64_t rec_bytes = (uint64_t)(full - 40) / 5;
	/* Flip a byte in the value of the second record. */
	off_t at = (off_t)(40 + rec_bytes + rec_bytes - 1);
	int fd = open(p, O_RDWR);
	char c;
	assert_int_equal(pread(fd, &c, 1, at), 1);
	c ^= 1;
	assert_int_equal(pwrite(fd, &c, 1, at), 1);
	close(fd);

	seen s;
	aof_replay_stats st;
	char why[512] = "";
	assert_int_equal(replay(f->dir, 0, &s, &st, why, sizeof(why)), SPW_E_CORRUPT);
	assert_non_null(strstr(why, p));
	char off[64];
	snprintf(off, sizeof(off), "offset %llu", (unsigned long long)(40 + rec_bytes));
	assert_non_null(strstr(why, off));

	/* A bad file header in a file with records is corruption too. */
	c ^= 1;
	fd = open(p, O_RDWR);
	assert_int_equal(pwrite(fd, &c, 1, at), 1);
	assert_int_equal(pwrite(fd, "X", 1, 0), 1);
	close(fd);
	why[0] = '\0';
	assert_int_equal(replay(f->dir, 0, &s, &st, why, sizeof(why)), SPW_E_CORRUPT);
	assert_non_null(strstr(why, p));
	assert_non_null(strstr(why, "header"));
}

/* aof_check's output, captured. */
static int check_capture(const char *dir, bool fix, char *out, size_t cap)
{
	FILE *fp = tmpfile();
	assert_non_null(fp);
	int n = aof_check(dir, fix, fp);
	rewind(fp);
	size_t k = fread(out, 1, cap - 1, fp);
	out[k] = '\0';
	fclose(fp);
	return n;
}

static void test_check_fix_truncates_torn_tails_then_is_clean(void **state)
{
	fixture *f = *state;
	char p[PATH_MAX], out[4096];
	write_file(f->dir, 0, 3, 1, 1, 4);
	write_file(f->dir, 1, 3, 100, 1, 2);
	file_path(p, sizeof(p), f->dir, 3, 0);
	off_t full = file_size(p);
	uint64_t rec_bytes = (uint64_t)(full - 40) / 4;
	assert_int_equal(truncate(p, full - 3), 0);

	assert_int_equal(check_capture(f->dir, false, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "torn tail"));
	assert_non_null(strstr(out, "2 records, seq 100..101, OK"));
	assert_int_equal(file_size(p), full - 3);     /* without fix nothing changes */

	assert_int_equal(check_capture(f->dir, true, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "truncated"));
	assert_int_equal(file_size(p), (off_t)(40 + 3 * rec_bytes));

	assert_int_equal(check_capture(f->dir, false, out, sizeof(out)), 0);
	char line[PATH_MAX + 64];
	snprintf(line, sizeof(line), "%s: 3 records, seq 1..3, OK", p);
	assert_non_null(strstr(out, line));
	assert_null(strstr(out, "torn"));

	/* Corruption in the middle is a problem that fix leaves alone. */
	int fd = open(p, O_RDWR);
	assert_int_equal(pwrite(fd, "\xff", 1, 40 + 20), 1);
	close(fd);
	assert_int_equal(check_capture(f->dir, true, out, sizeof(out)), 1);
	assert_non_null(strstr(out, "bad record checksum"));
	assert_int_equal(file_size(p), (off_t)(40 + 3 * rec_bytes));
}

static void test_prune_removes_closed_files_below_the_cut(void **state)
{
	fixture *f = *state;
	char g1[PATH_MAX], g2[PATH_MAX], g3[PATH_MAX], e1[PATH_MAX];
	aof_writer *w, *e;
	assert_int_equal(aof_writer_open(&w, f->dir, 0, 1, AOF_FSYNC_EVERYSEC), 0);
	put(w, 1, 900, HLOG_REDO_SET);
	put(w, 2, 1000, HLOG_REDO_SET);                 /* gen 1: max addr 1000 */
	put(w, 3, 400, HLOG_REDO_SET);
	assert_int_equal(aof_writer_flush(w), 0);
	assert_int_equal(aof_writer_rotate(w, 2), 0);
	put(w, 4, 2000, HLOG_REDO_SET);                 /* gen 2: max addr 2000 (unflushed at rotate) */
	assert_int_equal(aof_writer_rotate(w, 3), 0);
	put(w, 5, 10, HLOG_REDO_SET);
	assert_int_equal(aof_writer_flush(w), 0);
	/* A file that never got a record is removed at close. */
	assert_int_equal(aof_writer_open(&e, f->dir, 1, 1, AOF_FSYNC_NO), 0);
	file_path(e1, sizeof(e1), f->dir, 1, 1);
	assert_true(file_exists(e1));
	aof_writer_close(e);
	assert_false(file_exists(e1));

	file_path(g1, sizeof(g1), f->dir, 1, 0);
	file_path(g2, sizeof(g2), f->dir, 2, 0);
	file_path(g3, sizeof(g3), f->dir, 3, 0);
	assert_true(file_exists(g1) && file_exists(g2) && file_exists(g3));
	assert_int_equal(aof_prune(f->dir, 1000), 0);   /* gen 1 holds addr 1000: not below */
	assert_int_equal(aof_prune(f->dir, 1001), 1);
	assert_false(file_exists(g1));
	assert_true(file_exists(g2));
	assert_int_equal(aof_prune(f->dir, 1u << 30), 1);  /* gen 2; gen 3 is still open */
	assert_false(file_exists(g2));
	assert_true(file_exists(g3));
	assert_int_equal(aof_max_gen(f->dir), 3);
	aof_writer_close(w);
	assert_int_equal(aof_prune(f->dir, 11), 1);
	assert_false(file_exists(g3));

	/* aof_remove_all puts the files aside (and aof_max_gen still sees them). */
	write_file(f->dir, 0, 4, 1, 1, 1);
	write_file(f->dir, 1, 4, 2, 1, 1);
	assert_int_equal(aof_remove_all(f->dir, true), 2);
	assert_int_equal(aof_max_gen(f->dir), 4);
	seen s;
	aof_replay_stats st;
	char why[256];
	assert_int_equal(replay(f->dir, 0, &s, &st, why, sizeof(why)), 0);
	assert_int_equal(st.files, 0);
	assert_int_equal(aof_prune(f->dir, 1u << 30), 0);   /* the registry forgot them */
}

static const size_t big_sizes[] = { 3u << 20, 5u << 20, 17 };
struct big { const uint8_t *val; int n; bool ok; };

static int apply_big(void *ctx, const aof_rec *r)
{
	struct big *b = ctx;
	if (r->seq != (uint64_t)b->n + 1 || r->vlen != big_sizes[b->n] || r->expire_ms != HLOG_NO_EXPIRY ||
	    memcmp(r->val, b->val, r->vlen) != 0)
		b->ok = false;
	b->n++;
	return 0;
}

static void test_big_values_round_trip(void **state)
{
	fixture *f = *state;
	uint8_t *val = malloc(5u << 20);
	assert_non_null(val);
	for (size_t i = 0; i < (5u << 20); i++) val[i] = (uint8_t)(i * 2654435761u >> 13);
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, f->dir, 0, 1, AOF_FSYNC_NO), 0);
	for (int i = 0; i < 3; i++) {
		char key[16];
		int kl = snprintf(key, sizeof(key), "big%d", i);
		hlog_redo r = { .seq = (uint64_t)i + 1, .addr = 1000, .kind = HLOG_REDO_SET, .key = key,
		                .klen = (size_t)kl, .val = val, .vlen = big_sizes[i], .expire_ms = HLOG_NO_EXPIRY };
		aof_redo(w, &r);
		assert_int_equal(aof_writer_flush(w), 0);
	}
	aof_writer_close(w);

	struct big b = { val, 0, true };
	assert_int_equal(aof_replay(f->dir, 0, apply_big, &b, NULL, NULL, 0), 0);
	assert_int_equal(b.n, 3);
	assert_true(b.ok);
	free(val);
}

static void test_sync_thread_starts_once_and_stops(void **state)
{
	fixture *f = *state;
	assert_int_equal(aof_sync_thread_start(), 0);
	assert_int_equal(aof_sync_thread_start(), 0);
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, f->dir, 0, 1, AOF_FSYNC_EVERYSEC), 0);
	put(w, 1, 100, HLOG_REDO_SET);
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_set_fsync(w, AOF_FSYNC_ALWAYS);
	put(w, 2, 200, HLOG_REDO_SET);
	assert_int_equal(aof_writer_flush(w), 0);
	aof_sync_thread_stop();
	aof_sync_thread_stop();
	assert_int_equal(aof_writer_error(w), 0);
	aof_writer_close(w);
	/* Opening the same generation again is refused (O_EXCL): a file is never appended twice. */
	assert_int_equal(aof_writer_open(&w, f->dir, 0, 1, AOF_FSYNC_NO), -EEXIST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_two_writers_merge_by_seq_and_skip_below_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_tails_are_cut_and_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_middle_corruption_is_refused_naming_the_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_fix_truncates_torn_tails_then_is_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prune_removes_closed_files_below_the_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_values_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sync_thread_starts_once_and_stops, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
