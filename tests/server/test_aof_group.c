/*
 * test_aof_group.c - groups and parts in the AOF (server/aof.c note 7, aof_read.c notes 1-2): a
 * group's records are applied only once the whole group is read, in the merge's place of its first
 * record; a file cut anywhere inside a group drops the group whole and keeps the records before it
 * (replay, and the offline check's fix); the skip rule below a checkpoint's cut; a record the writer
 * loses takes its group with it; and, through a real store, a part replayed with aof_rec_apply is
 * written under its internal key.
 *
 * Most records are crafted hlog_redo records handed to the real writer (aof_redo), as the store's
 * redo hook hands them, group_more set on all but a group's last; the last test has a real log's
 * hlog_group_rmw write them through its redo hook. The files are real files.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/aof.h"

typedef struct fixture {
	char dir[64];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/spw_test_aofg_XXXXXX");
	if (!mkdtemp(f->dir)) return -1;
	*state = f;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	fixture *f = *state;
	nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void file_path(char *out, size_t cap, const char *dir, uint64_t gen, int worker)
{
	snprintf(out, cap, "%s/%s/spillway.%llu.%d.aof", dir, AOF_DIR_NAME, (unsigned long long)gen,
	         worker);
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* The bytes a record takes in the file (aof.h: a 16-byte header, 32 fixed payload bytes). */
static off_t rec_bytes(size_t klen, size_t vlen)
{
	return (off_t)(16 + 32 + klen + vlen);
}

/* One record: key "k<seq>" (internal bytes "p<seq>" for a part), value "v<seq>" for a SET. */
static off_t put(aof_writer *w, uint64_t seq, uint64_t addr, int kind, uint8_t rtype, bool more)
{
	char key[32], val[32];
	int kl = snprintf(key, sizeof(key), "%c%llu", rtype == HLOG_T_PART ? 'p' : 'k',
	                  (unsigned long long)seq);
	int vl = snprintf(val, sizeof(val), "v%llu", (unsigned long long)seq);
	bool set = kind == HLOG_REDO_SET;
	hlog_redo r = {
		.seq = seq, .addr = addr, .kind = kind, .key = key, .klen = (size_t)kl,
		.val = set ? val : NULL, .vlen = set ? (size_t)vl : 0, .expire_ms = HLOG_NO_EXPIRY,
		.rtype = rtype, .group_more = more,
	};
	aof_redo(w, &r);
	return rec_bytes((size_t)kl, set ? (size_t)vl : 0);
}

/* What replay applied, in order. */
typedef struct seen {
	uint64_t seq[64];
	int kind[64];
	uint8_t rtype[64];
	bool more[64];
	int n;
	bool content_ok;
} seen;

static int apply_record(void *ctx, const aof_rec *r)
{
	seen *s = ctx;
	char key[32], val[32];
	int kl = snprintf(key, sizeof(key), "%c%llu", r->rtype == HLOG_T_PART ? 'p' : 'k',
	                  (unsigned long long)r->seq);
	int vl = snprintf(val, sizeof(val), "v%llu", (unsigned long long)r->seq);
	if (r->klen != (uint32_t)kl || memcmp(r->key, key, (size_t)kl) != 0) s->content_ok = false;
	if (r->kind == HLOG_REDO_SET && (r->vlen != (uint32_t)vl || memcmp(r->val, val, (size_t)vl)))
		s->content_ok = false;
	if (s->n < 64) {
		s->seq[s->n] = r->seq;
		s->kind[s->n] = r->kind;
		s->rtype[s->n] = r->rtype;
		s->more[s->n] = r->group_more;
	}
	s->n++;
	return 0;
}

static int replay(const char *dir, uint64_t cut, seen *s, aof_replay_stats *st)
{
	char why[512];
	memset(s, 0, sizeof(*s));
	s->content_ok = true;
	int rc = aof_replay(dir, cut, apply_record, s, st, why, sizeof(why));
	if (rc) print_message("replay: %s\n", why);
	return rc;
}

/* The file of the tests: seq 1 (a string), a group of seq 2 (the head), 3 (a part), 4 (a part's
 * tombstone), then seq 5. Its offsets: where the group starts and ends, and each record's end. */
typedef struct layout {
	off_t group_at, group_end, end;
	off_t rec_end[6];
} layout;

static layout write_group_file(const char *dir)
{
	aof_writer *w;
	layout L;
	assert_int_equal(aof_writer_open(&w, dir, 0, 1, AOF_FSYNC_NO), 0);
	off_t at = 40;
	at += put(w, 1, 100, HLOG_REDO_SET, HLOG_T_STRING, false);
	L.rec_end[1] = L.group_at = at;
	at += put(w, 2, 200, HLOG_REDO_SET, HLOG_T_HEAD, true);
	L.rec_end[2] = at;
	at += put(w, 3, 201, HLOG_REDO_SET, HLOG_T_PART, true);
	L.rec_end[3] = at;
	at += put(w, 4, 202, HLOG_REDO_DEL, HLOG_T_PART, false);
	L.rec_end[4] = L.group_end = at;
	at += put(w, 5, 300, HLOG_REDO_SET, HLOG_T_STRING, false);
	L.rec_end[5] = L.end = at;
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
	char path[4200];
	file_path(path, sizeof(path), dir, 1, 0);
	assert_int_equal(file_size(path), L.end);
	return L;
}

static void test_a_whole_group_is_applied_in_order_with_its_framing(void **state)
{
	fixture *f = *state;
	write_group_file(f->dir);
	seen s;
	aof_replay_stats st;
	assert_int_equal(replay(f->dir, 0, &s, &st), 0);
	assert_int_equal(s.n, 5);
	assert_true(s.content_ok);
	for (int i = 0; i < 5; i++) assert_int_equal(s.seq[i], (uint64_t)i + 1);
	assert_false(s.more[0]);
	assert_true(s.more[1]);
	assert_true(s.more[2]);
	assert_false(s.more[3]);
	assert_false(s.more[4]);
	assert_int_equal(s.rtype[1], HLOG_T_HEAD);
	assert_int_equal(s.rtype[2], HLOG_T_PART);
	assert_int_equal(s.kind[3], HLOG_REDO_DEL);
	assert_int_equal(s.rtype[3], HLOG_T_PART);   /* a part's tombstone keeps its namespace */
	assert_int_equal(st.groups, 1);
	assert_int_equal(st.groups_cut, 0);
	assert_int_equal(st.applied, 5);
	assert_int_equal(st.torn_bytes, 0);
	assert_int_equal(aof_check(f->dir, false, stderr), 0);
}

/* Cut the file at every length from the group's end down to its start: the group is never applied,
 * seq 1 always is, and the torn tail starts at the group. At exactly the group's end it is whole. */
static void test_a_file_cut_inside_a_group_drops_it_whole(void **state)
{
	fixture *f = *state;
	layout L = write_group_file(f->dir);
	char path[4200];
	file_path(path, sizeof(path), f->dir, 1, 0);
	for (off_t len = L.group_end; len >= L.group_at; len--) {   /* shorter each time */
		assert_int_equal(truncate(path, len), 0);
		seen s;
		aof_replay_stats st;
		assert_int_equal(replay(f->dir, 0, &s, &st), 0);
		assert_true(s.content_ok);
		if (len == L.group_end) {   /* whole: applied */
			assert_int_equal(s.n, 4);
			assert_int_equal(st.groups, 1);
			assert_int_equal(st.groups_cut, 0);
			assert_int_equal(st.torn_bytes, 0);
			continue;
		}
		assert_int_equal(s.n, 1);
		assert_int_equal(s.seq[0], 1);
		assert_int_equal(st.applied, 1);
		assert_int_equal(st.groups, 0);
		/* counted once its first record was read whole (a cut inside that one is a torn record) */
		assert_int_equal(st.groups_cut, len >= L.rec_end[2] ? 1 : 0);
		assert_int_equal(st.torn_bytes, (uint64_t)(len - L.group_at));
	}
	/* The check reports a cut group as a torn tail; its fix truncates at the group's start. */
	assert_int_equal(unlink(path), 0);
	L = write_group_file(f->dir);
	assert_int_equal(truncate(path, L.rec_end[3]), 0);   /* the file ends right after a part */
	assert_int_equal(aof_check(f->dir, false, stderr), 1);
	assert_int_equal(aof_check(f->dir, true, stderr), 0);
	assert_int_equal(file_size(path), L.group_at);
	assert_int_equal(aof_check(f->dir, false, stderr), 0);
	seen s;
	aof_replay_stats st;
	assert_int_equal(replay(f->dir, 0, &s, &st), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(st.torn_bytes, 0);
}

/* A group is applied in the merge's place of its first record, whole, even when another worker's
 * records have seqs between its records' (aof_read.c note 1). */
static void test_a_group_is_applied_at_its_first_seq_across_files(void **state)
{
	fixture *f = *state;
	aof_writer *a, *b;
	assert_int_equal(aof_writer_open(&a, f->dir, 0, 1, AOF_FSYNC_NO), 0);
	assert_int_equal(aof_writer_open(&b, f->dir, 1, 1, AOF_FSYNC_NO), 0);
	put(a, 10, 1000, HLOG_REDO_SET, HLOG_T_HEAD, true);
	put(a, 12, 1001, HLOG_REDO_SET, HLOG_T_PART, true);
	put(a, 14, 1002, HLOG_REDO_SET, HLOG_T_PART, false);
	put(a, 15, 3000, HLOG_REDO_SET, HLOG_T_STRING, false);
	put(b, 9, 2000, HLOG_REDO_SET, HLOG_T_STRING, false);
	put(b, 11, 2001, HLOG_REDO_SET, HLOG_T_STRING, false);
	put(b, 13, 2002, HLOG_REDO_DEL, HLOG_T_STRING, false);
	assert_int_equal(aof_writer_flush(a), 0);
	assert_int_equal(aof_writer_flush(b), 0);
	aof_writer_close(a);
	aof_writer_close(b);
	seen s;
	aof_replay_stats st;
	assert_int_equal(replay(f->dir, 0, &s, &st), 0);
	const uint64_t want[] = { 9, 10, 12, 14, 11, 13, 15 };
	assert_int_equal(s.n, 7);
	for (int i = 0; i < 7; i++) assert_int_equal(s.seq[i], want[i]);
	assert_int_equal(st.max_seq, 15);
	/* The skip rule is per record; a checkpoint's cut never falls inside a group's span (one
	 * reservation): here it is above the group (skipped whole) and above seq 9. */
	assert_int_equal(replay(f->dir, 2001, &s, &st), 0);
	const uint64_t above[] = { 11, 13, 15 };
	assert_int_equal(s.n, 3);
	for (int i = 0; i < 3; i++) assert_int_equal(s.seq[i], above[i]);
	assert_int_equal(st.groups, 1);
	assert_int_equal(st.skipped, 4);
	/* Above the group only: the group is skipped whole, the other worker's records applied. */
	assert_int_equal(replay(f->dir, 1003, &s, &st), 0);
	const uint64_t other[] = { 9, 11, 13, 15 };
	assert_int_equal(s.n, 4);
	for (int i = 0; i < 4; i++) assert_int_equal(s.seq[i], other[i]);
	assert_int_equal(st.skipped, 3);
}

/* A record of a group the writer cannot take (here: too big for the format) takes the group's
 * buffered records back and drops its later ones; the records around the group stay. */
static void test_a_lost_record_takes_its_group_with_it(void **state)
{
	fixture *f = *state;
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, f->dir, 0, 1, AOF_FSYNC_NO), 0);
	put(w, 1, 100, HLOG_REDO_SET, HLOG_T_STRING, false);
	put(w, 2, 200, HLOG_REDO_SET, HLOG_T_HEAD, true);
	static const char k[] = "p3";
	hlog_redo big = { .seq = 3, .addr = 201, .kind = HLOG_REDO_SET, .key = k,
	                  .klen = (size_t)UINT32_MAX + 1, .val = NULL, .vlen = 0,
	                  .expire_ms = HLOG_NO_EXPIRY, .rtype = HLOG_T_PART, .group_more = true };
	aof_redo(w, &big);   /* refused before its bytes are read */
	put(w, 4, 202, HLOG_REDO_SET, HLOG_T_PART, false);
	put(w, 5, 300, HLOG_REDO_SET, HLOG_T_STRING, false);
	assert_int_equal(aof_writer_error(w), -E2BIG);
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
	seen s;
	aof_replay_stats st;
	assert_int_equal(replay(f->dir, 0, &s, &st), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.seq[0], 1);
	assert_int_equal(s.seq[1], 5);
	assert_int_equal(st.groups, 0);
	assert_int_equal(st.torn_bytes, 0);
}

/* ---------------- through a real store ---------------- */

static off_t put_kv(aof_writer *w, uint64_t seq, uint64_t addr, int kind, uint8_t rtype, bool more,
                    const char *key, const char *val)
{
	bool set = kind == HLOG_REDO_SET;
	hlog_redo r = {
		.seq = seq, .addr = addr, .kind = kind, .key = key, .klen = strlen(key),
		.val = set ? val : NULL, .vlen = set ? strlen(val) : 0, .expire_ms = HLOG_NO_EXPIRY,
		.rtype = rtype, .group_more = more,
	};
	aof_redo(w, &r);
	return rec_bytes(r.klen, r.vlen);
}

static int apply_store(void *ctx, const aof_rec *r)
{
	int rc = aof_rec_apply(ctx, r);
	assert_int_not_equal(rc, HLOG_PENDING);   /* a store in memory with room: never */
	return rc < 0 ? rc : 0;
}

typedef struct got {
	char val[64];
	uint8_t rtype;
	bool found;
} got;

static void got_fn(void *ctx, const hlog_value *v)
{
	got *g = ctx;
	g->found = true;
	g->rtype = v->rtype;
	snprintf(g->val, sizeof(g->val), "%.*s", (int)v->len, (const char *)v->ptr);
}

/* Read key in its namespace: its value, or "" when it is not there. */
static got store_get(hlog_session *s, const char *key, bool internal)
{
	hlog_key k;
	got g = { .found = false };
	if (internal) hlog_key_init_internal(&k, key, strlen(key));
	else hlog_key_init(&k, key, strlen(key));
	int rc = hlog_read(s, &k, got_fn, &g);
	assert_true(rc == HLOG_OK || rc == HLOG_NOTFOUND);
	assert_int_equal(rc == HLOG_OK, g.found);
	return g;
}

/* A user string "same", then a group (head "h", part "same" = "part", part "gone" = "x"), then a
 * second group (head "h" again, part "gone" deleted). Its length up to the second group's start. */
static off_t write_store_file(const char *dir)
{
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, dir, 0, 1, AOF_FSYNC_NO), 0);
	off_t at = 40;
	at += put_kv(w, 1, 100, HLOG_REDO_SET, HLOG_T_STRING, false, "same", "user");
	at += put_kv(w, 2, 200, HLOG_REDO_SET, HLOG_T_HEAD, true, "h", "head-1");
	at += put_kv(w, 3, 201, HLOG_REDO_SET, HLOG_T_PART, true, "same", "part");
	at += put_kv(w, 4, 202, HLOG_REDO_SET, HLOG_T_PART, false, "gone", "x");
	off_t second = at;
	put_kv(w, 5, 300, HLOG_REDO_SET, HLOG_T_HEAD, true, "h", "head-2");
	put_kv(w, 6, 301, HLOG_REDO_DEL, HLOG_T_PART, false, "gone", NULL);
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
	return second;
}

/* Replay the folder into a fresh store in memory; *l and *s for the caller to close. */
static void replay_into_store(const char *dir, hlog **l, hlog_session **s, aof_replay_stats *st)
{
	hlog_config c = { .memory_bytes = 4u << 20, .page_bytes = 64u << 10, .index_bytes = 64u << 10,
	                  .mutable_percent = 90, .max_sessions = 2 };
	assert_int_equal(hlog_open(l, &c), 0);
	assert_int_equal(hlog_session_open(*l, s), 0);
	hlog_session_protect(*s);
	char why[512] = "";
	int rc = aof_replay(dir, 0, apply_store, *s, st, why, sizeof(why));
	if (rc) print_message("replay: %s\n", why);
	assert_int_equal(rc, 0);
}

static void store_close(hlog *l, hlog_session *s)
{
	hlog_session_unprotect(s);
	hlog_session_close(s);
	hlog_close(l);
}

/* Parts come back under their internal keys: readable there, invisible to a user key with the same
 * bytes and to the key count; a part's tombstone deletes the part, not the user key. */
static void test_parts_are_replayed_under_internal_keys(void **state)
{
	fixture *f = *state;
	write_store_file(f->dir);
	hlog *l;
	hlog_session *s;
	aof_replay_stats st;
	replay_into_store(f->dir, &l, &s, &st);
	assert_int_equal(st.applied, 6);
	assert_int_equal(st.groups, 2);
	got g = store_get(s, "same", true);
	assert_string_equal(g.val, "part");
	assert_int_equal(g.rtype, HLOG_T_PART);
	g = store_get(s, "same", false);
	assert_string_equal(g.val, "user");
	assert_int_equal(g.rtype, HLOG_T_STRING);
	assert_string_equal(store_get(s, "h", false).val, "head-2");
	assert_int_equal(store_get(s, "h", false).rtype, HLOG_T_HEAD);
	assert_false(store_get(s, "h", true).found);
	assert_false(store_get(s, "gone", true).found);   /* the second group deleted it */
	assert_false(store_get(s, "gone", false).found);
	assert_int_equal(hlog_key_count(l), 2);           /* "same" and "h": parts count in none */
	store_close(l, s);
}

/* The file cut inside the second group: the first group is whole in the store, none of the second
 * is (the head keeps its first value, the part its value). */
static void test_a_cut_group_leaves_the_store_as_before_it(void **state)
{
	fixture *f = *state;
	off_t second = write_store_file(f->dir);
	char path[4200];
	file_path(path, sizeof(path), f->dir, 1, 0);
	off_t size = file_size(path);
	assert_int_equal(truncate(path, size - 1), 0);   /* inside the group's last record */
	hlog *l;
	hlog_session *s;
	aof_replay_stats st;
	replay_into_store(f->dir, &l, &s, &st);
	assert_int_equal(st.applied, 4);
	assert_int_equal(st.groups, 1);
	assert_int_equal(st.groups_cut, 1);
	assert_int_equal(st.torn_bytes, (uint64_t)(size - 1 - second));
	assert_string_equal(store_get(s, "h", false).val, "head-1");
	assert_string_equal(store_get(s, "gone", true).val, "x");
	assert_string_equal(store_get(s, "same", true).val, "part");
	assert_int_equal(hlog_key_count(l), 2);
	store_close(l, s);
}

/* ---------------- through a real log's hlog_group_rmw ---------------- */

typedef struct noted {
	int n;
	char key[8][8];
	bool more[8];
	uint8_t rtype[8];
	int kind[8];
} noted;

static int note_record(void *ctx, const aof_rec *a)
{
	noted *r = ctx;
	if (r->n < 8) {
		snprintf(r->key[r->n], sizeof(r->key[r->n]), "%.*s", (int)a->klen, (const char *)a->key);
		r->more[r->n] = a->group_more;
		r->rtype[r->n] = a->rtype;
		r->kind[r->n] = a->kind;
	}
	r->n++;
	return 0;
}

static int head_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	(void)old;
	out->action = HLOG_RMW_WRITE;
	out->new_len = strlen(ctx);
	out->expire_ms = HLOG_NO_EXPIRY;
	out->rtype = HLOG_T_HEAD;
	return 0;
}

static void head_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)old;
	(void)in_place;
	memcpy(dst, ctx, strlen(ctx));
}

/* A store whose session's redo hook is the writer, as a worker's (worker.c note 7): a string "x",
 * then one hlog_group_rmw (head "h", parts "c|b0" and "h" -- the head's bytes, internal -- and a
 * tombstone of "c|b1"), then a string "y"; the writer is closed. */
static void write_through_a_real_log(const char *dir)
{
	hlog *l;
	hlog_session *s;
	hlog_config c = { .memory_bytes = 4u << 20, .page_bytes = 64u << 10, .index_bytes = 64u << 10,
	                  .mutable_percent = 90, .max_sessions = 2 };
	assert_int_equal(hlog_open(&l, &c), 0);
	assert_int_equal(hlog_session_open(l, &s), 0);
	hlog_session_protect(s);
	aof_writer *w;
	assert_int_equal(aof_writer_open(&w, dir, 0, 1, AOF_FSYNC_NO), 0);
	hlog_session_set_redo(s, aof_redo, w);
	hlog_key k;
	hlog_key_init(&k, "x", 1);
	assert_int_equal(hlog_upsert(s, &k, "vx", 2, HLOG_NO_EXPIRY), 0);
	hlog_group_part parts[3] = {
		{ .val = "m0", .len = 2 }, { .val = "m-h", .len = 3 }, { .del = true },
	};
	hlog_key_init_internal(&parts[0].key, "c|b0", 4);
	hlog_key_init_internal(&parts[1].key, "h", 1);
	hlog_key_init_internal(&parts[2].key, "c|b1", 4);
	static const hlog_rmw_ops ops = { head_plan, head_fill };
	hlog_key head;
	hlog_key_init(&head, "h", 1);
	assert_int_equal(hlog_group_rmw(s, &head, &ops, (void *)"head", parts, 3), HLOG_OK);
	hlog_key_init(&k, "y", 1);
	assert_int_equal(hlog_upsert(s, &k, "vy", 2, HLOG_NO_EXPIRY), 0);
	hlog_session_set_redo(s, NULL, NULL);
	assert_int_equal(aof_writer_flush(w), 0);
	aof_writer_close(w);
	store_close(l, s);
}

/* What hlog_group_rmw's redo records become in the file, and in a store replayed from it: the
 * group's records in publish order (head first), group_more on all but the last; parts under
 * internal keys. Then the file cut inside the group: "x" only. */
static void test_a_real_group_rmw_round_trips_and_a_cut_drops_it(void **state)
{
	fixture *f = *state;
	write_through_a_real_log(f->dir);
	/* The records as the reader sees them. */
	noted r = { .n = 0 };
	aof_replay_stats st;
	char why[512] = "";
	assert_int_equal(aof_replay(f->dir, 0, note_record, &r, &st, why, sizeof(why)), 0);
	assert_int_equal(r.n, 6);
	const char *keys[] = { "x", "h", "c|b0", "h", "c|b1", "y" };
	const uint8_t rtypes[] = { HLOG_T_STRING, HLOG_T_HEAD, HLOG_T_PART, HLOG_T_PART, HLOG_T_PART,
	                           HLOG_T_STRING };
	for (int i = 0; i < 6; i++) {
		assert_string_equal(r.key[i], keys[i]);
		assert_int_equal(r.rtype[i], rtypes[i]);
		assert_int_equal(r.more[i], i >= 1 && i <= 3);
		assert_int_equal(r.kind[i], i == 4 ? HLOG_REDO_DEL : HLOG_REDO_SET);
	}
	assert_int_equal(st.groups, 1);
	/* Into a store. */
	hlog *l;
	hlog_session *s;
	replay_into_store(f->dir, &l, &s, &st);
	assert_string_equal(store_get(s, "h", false).val, "head");
	assert_string_equal(store_get(s, "h", true).val, "m-h");
	assert_string_equal(store_get(s, "c|b0", true).val, "m0");
	assert_false(store_get(s, "c|b0", false).found);
	assert_false(store_get(s, "c|b1", true).found);
	assert_int_equal(hlog_key_count(l), 3);   /* x, h, y */
	store_close(l, s);
	/* Cut inside the group (its last record loses a byte): x only. */
	char path[4200];
	file_path(path, sizeof(path), f->dir, 1, 0);
	off_t y = rec_bytes(1, 2);
	assert_int_equal(truncate(path, file_size(path) - y - 1), 0);
	replay_into_store(f->dir, &l, &s, &st);
	assert_int_equal(st.groups_cut, 1);
	assert_int_equal(st.applied, 1);
	assert_string_equal(store_get(s, "x", false).val, "vx");
	assert_false(store_get(s, "h", false).found);
	assert_false(store_get(s, "h", true).found);
	assert_false(store_get(s, "c|b0", true).found);
	assert_int_equal(hlog_key_count(l), 1);
	store_close(l, s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_whole_group_is_applied_in_order_with_its_framing, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_a_file_cut_inside_a_group_drops_it_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_group_is_applied_at_its_first_seq_across_files, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_a_lost_record_takes_its_group_with_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parts_are_replayed_under_internal_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_cut_group_leaves_the_store_as_before_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_real_group_rmw_round_trips_and_a_cut_drops_it, setup,
		                                teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
