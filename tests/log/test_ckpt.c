/*
 * test_ckpt.c - checkpoints and recovery of the store (log/ckpt.c, log/recover.c) on real files:
 * memory-only (the log written by the checkpoint to its own device) and with a storage tier; the
 * exact cut under concurrent writers (the repair path, proven by its counter); the checks that
 * refuse a corrupt or incomplete checkpoint; the previous checkpoint as a fallback; the redo hook.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device.h"
#include "log/hlog.h"
#include "tests/log/store_env.h"

#define NKEYS 3000

typedef struct ck_env {
	char dir[64];          /* checkpoints here; the log's segments in dir/Store */
	char store[96];
	bool tier;
	dev *d;                /* the store's device (tier) or the checkpoint's log device */
	hlog *l;
	hlog_session *s;
	int fd;
} ck_env;

static void ck_ready(void *arg, void *op) { (void)arg; (void)op; }

static hlog_config ck_config(bool tier, uint64_t index_bytes)
{
	hlog_config c = { .memory_bytes = tier ? 256 << 10 : 64 << 20, .page_bytes = 64 << 10,
	                  .index_bytes = index_bytes ? index_bytes : 64 << 10, .mutable_percent = 50, .max_sessions = 8,
	                  .initial_io_bytes = 128 };
	return c;
}

/* Open (or reopen, keeping dir) the device and a store; a session of this thread. */
static void ck_open_index(ck_env *e, bool tier, bool fresh, uint64_t index_bytes)
{
	char err[256] = "";
	if (fresh) {
		memset(e, 0, sizeof(*e));
		snprintf(e->dir, sizeof(e->dir), "/tmp/spw-ckpt.XXXXXX");
		assert_non_null(mkdtemp(e->dir));
		snprintf(e->store, sizeof(e->store), "%s/Store", e->dir);
		assert_int_equal(mkdir(e->store, 0755), 0);
	}
	e->tier = tier;
	assert_int_equal(store_env_dev_open("posix", e->store, 0, &e->d, err, sizeof(err)), 0);
	hlog_config c = ck_config(tier, index_bytes);
	c.dev = tier ? e->d : NULL;
	assert_int_equal(hlog_open(&e->l, &c), 0);
	assert_int_equal(hlog_session_open(e->l, &e->s), 0);
	assert_int_equal(hlog_session_attach(e->s, ck_ready, NULL), 0);
	e->fd = hlog_session_fd(e->s);
	hlog_session_set_now(e->s, spw_time_ms());
}

static void ck_open(ck_env *e, bool tier, bool fresh)
{
	ck_open_index(e, tier, fresh, 0);
}

static void ck_close(ck_env *e, bool remove_dir)
{
	if (e->s)
		hlog_session_close(e->s);
	hlog_close(e->l);
	dev_close(e->d);
	e->s = NULL;
	e->l = NULL;
	e->d = NULL;
	if (remove_dir)
		nftw(e->dir, store_env_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run op until it is not pending (a device read), polling the session. */
typedef int (*ck_op)(ck_env *e, void *arg);
static int ck_run(ck_env *e, ck_op op, void *arg)
{
	int rc;
	hlog_session_set_op(e->s, e);
	hlog_session_protect(e->s);
	while ((rc = op(e, arg)) == HLOG_PENDING) {
		hlog_session_unprotect(e->s);
		hlog_session_poll(e->s);
		if (e->fd >= 0)
			store_fd_wait(e->fd, 5);
		hlog_session_protect(e->s);
	}
	hlog_session_unprotect(e->s);
	hlog_session_release(e->s, e);
	return rc;
}

typedef struct kv { const char *k; const char *v; int64_t exp; char got[128]; bool found; } kv;

static int op_set(ck_env *e, void *arg)
{
	kv *x = arg;
	hlog_key k;
	hlog_key_init(&k, x->k, strlen(x->k));
	return hlog_upsert(e->s, &k, x->v, strlen(x->v), x->exp);
}

static int op_del(ck_env *e, void *arg)
{
	kv *x = arg;
	hlog_key k;
	hlog_key_init(&k, x->k, strlen(x->k));
	return hlog_delete(e->s, &k);
}

static void got_fn(void *ctx, const hlog_value *v)
{
	kv *x = ctx;
	size_t n = SPW_MIN(v->len, sizeof(x->got) - 1);
	memcpy(x->got, v->ptr, n);
	x->got[n] = '\0';
	x->found = true;
}

static int op_get(ck_env *e, void *arg)
{
	kv *x = arg;
	hlog_key k;
	x->found = false;
	hlog_key_init(&k, x->k, strlen(x->k));
	return hlog_read(e->s, &k, got_fn, x);
}

static void ck_set(ck_env *e, const char *key, const char *val)
{
	kv x = { .k = key, .v = val, .exp = HLOG_NO_EXPIRY };
	assert_int_equal(ck_run(e, op_set, &x), HLOG_OK);
}

/* The value of key, or NULL. */
static const char *ck_get(ck_env *e, const char *key, kv *x)
{
	memset(x, 0, sizeof(*x));
	x->k = key;
	int rc = ck_run(e, op_get, x);
	assert_true(rc == HLOG_OK || rc == HLOG_NOTFOUND);
	return rc == HLOG_OK ? x->got : NULL;
}

static int ck_checkpoint(ck_env *e, hlog_ckpt_info *info)
{
	int rc = hlog_checkpoint(e->l, e->s, e->dir, e->d, info);
	if (rc < 0)
		fprintf(stderr, "checkpoint: %s\n", info->why);
	return rc;
}

static int ck_recover(ck_env *e, int which, hlog_ckpt_info *info, char *why, size_t len)
{
	int rc = hlog_recover(e->l, e->s, e->dir, e->d, which, info, why, len);
	if (rc < 0)
		fprintf(stderr, "recover: %s\n", why);
	return rc;
}

/* Write NKEYS keys (every 7th deleted, every 5th overwritten), checkpoint, then change more;
 * recovery gives exactly the state at the checkpoint; a second round continues from there. */
static void ck_roundtrip(bool tier)
{
	ck_env e;
	char key[32], val[64], why[512];
	hlog_ckpt_info info;
	kv x;

	ck_open(&e, tier, true);
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key:%d", i);
		snprintf(val, sizeof(val), "value-%d-%s", i, "padding-padding-padding");
		ck_set(&e, key, val);
	}
	for (int i = 0; i < NKEYS; i += 5) {
		snprintf(key, sizeof(key), "key:%d", i);
		snprintf(val, sizeof(val), "new-%d", i);
		ck_set(&e, key, val);
	}
	for (int i = 0; i < NKEYS; i += 7) {
		kv d = { .k = key };
		snprintf(key, sizeof(key), "key:%d", i);
		assert_int_equal(ck_run(&e, op_del, &d), HLOG_OK);
	}
	uint64_t keys = hlog_key_count(e.l);
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	assert_int_equal(info.keys, keys);
	assert_true(info.cut > HLOG_FIRST_ADDRESS);
	/* After the checkpoint: not in it. */
	ck_set(&e, "after", "x");
	ck_set(&e, "key:1", "changed-after");
	ck_close(&e, false);

	ck_open(&e, tier, false);
	assert_int_equal(ck_recover(&e, 0, &info, why, sizeof(why)), 0);
	assert_int_equal(hlog_key_count(e.l), keys);
	assert_null(ck_get(&e, "after", &x));
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key:%d", i);
		const char *v = ck_get(&e, key, &x);
		if (i % 7 == 0) {
			assert_null(v);
		} else if (i % 5 == 0) {
			snprintf(val, sizeof(val), "new-%d", i);
			assert_non_null(v);
			assert_string_equal(v, val);
		} else {
			snprintf(val, sizeof(val), "value-%d-%s", i, "padding-padding-padding");
			assert_non_null(v);
			assert_string_equal(v, val);
		}
	}
	/* Second round on the recovered store: new writes, a checkpoint, recovery again. */
	ck_set(&e, "round2", "yes");
	ck_set(&e, "key:2", "r2");
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	assert_true(info.id >= 2);
	ck_close(&e, false);
	ck_open(&e, tier, false);
	assert_int_equal(ck_recover(&e, 0, &info, why, sizeof(why)), 0);
	assert_non_null(ck_get(&e, "round2", &x));
	assert_string_equal(ck_get(&e, "key:2", &x), "r2");
	assert_string_equal(ck_get(&e, "key:3", &x), "value-3-padding-padding-padding");
	assert_int_equal(hlog_key_count(e.l), keys + 1);
	/* The one before is still there: the first round's state. */
	ck_close(&e, false);
	ck_open(&e, tier, false);
	assert_int_equal(ck_recover(&e, 1, &info, why, sizeof(why)), 0);
	assert_null(ck_get(&e, "round2", &x));
	assert_string_equal(ck_get(&e, "key:2", &x), "value-2-padding-padding-padding");
	ck_close(&e, true);
}

static void test_roundtrip_memory(void **st) { (void)st; ck_roundtrip(false); }
static void test_roundtrip_tier(void **st) { (void)st; ck_roundtrip(true); }

/* An empty folder: HLOG_NOTFOUND, the store stays empty and usable. */
static void test_no_checkpoint(void **st)
{
	(void)st;
	ck_env e;
	char why[256];
	hlog_ckpt_info info;
	kv x;
	ck_open(&e, false, true);
	assert_int_equal(hlog_recover(e.l, e.s, e.dir, e.d, 0, &info, why, sizeof(why)), HLOG_NOTFOUND);
	ck_set(&e, "a", "b");
	assert_string_equal(ck_get(&e, "a", &x), "b");
	ck_close(&e, true);
}

/* ---------------- the exact cut under writers (ckpt.c note 2) ---------------- */

typedef struct writer {
	hlog *l;
	int id;
	_Atomic int *stop;
	int written;
} writer;

/* Each writer writes w<id>:<i> then sets c<id> = i + 1 (in place once it is mutable): a state that
 * holds c = n must hold keys 0..n-1, and at most key n besides. */
static void *writer_main(void *arg)
{
	writer *w = arg;
	hlog_session *s;
	char key[32], val[32], ckey[16];
	assert_int_equal(hlog_session_open(w->l, &s), 0);
	snprintf(ckey, sizeof(ckey), "c%d", w->id);
	for (int i = 0; !atomic_load(w->stop); i++) {
		hlog_key k;
		hlog_session_protect(s);
		hlog_session_set_now(s, spw_time_ms());
		snprintf(key, sizeof(key), "w%d:%d", w->id, i);
		hlog_key_init(&k, key, strlen(key));
		int rc = hlog_upsert(s, &k, "v", 1, HLOG_NO_EXPIRY);
		if (rc == SPW_E_LOG_FULL) {
			hlog_session_unprotect(s);
			break;
		}
		assert_int_equal(rc, HLOG_OK);
		snprintf(val, sizeof(val), "%010d", i + 1);
		hlog_key_init(&k, ckey, strlen(ckey));
		rc = hlog_upsert(s, &k, val, strlen(val), HLOG_NO_EXPIRY);
		hlog_session_unprotect(s);
		if (rc == SPW_E_LOG_FULL)
			break;
		assert_int_equal(rc, HLOG_OK);
		w->written = i + 1;
	}
	hlog_session_close(s);
	return NULL;
}

static void test_cut_under_writers(void **st)
{
	(void)st;
	enum { W = 3 };
	ck_env e;
	writer ws[W];
	pthread_t th[W];
	_Atomic int stop = 0;
	hlog_ckpt_info info;
	char why[512], key[32];
	kv x;
	uint64_t live = 0;

	/* A larger index, so that its image takes a while and the writers publish during it. */
	ck_open_index(&e, false, true, 32 << 20);
	for (int i = 0; i < W; i++) {
		ws[i] = (writer){ .l = e.l, .id = i, .stop = &stop };
		assert_int_equal(pthread_create(&th[i], NULL, writer_main, &ws[i]), 0);
	}
	usleep(5000);
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	uint64_t scan_from = info.scan_from, cut = info.cut;
	atomic_store(&stop, 1);
	for (int i = 0; i < W; i++)
		pthread_join(th[i], NULL);
	ck_close(&e, false);

	ck_open_index(&e, false, false, 32 << 20);
	assert_int_equal(ck_recover(&e, 0, &info, why, sizeof(why)), 0);
	/* The writers ran during the index image: the repair must have raised entries. */
	if (info.repaired == 0)
		fail_msg("no record repaired: scan_from %" PRIu64 " cut %" PRIu64 ", written %d %d %d",
		         scan_from, cut, ws[0].written, ws[1].written, ws[2].written);
	for (int t = 0; t < W; t++) {
		char ckey[16];
		snprintf(ckey, sizeof(ckey), "c%d", t);
		const char *cv = ck_get(&e, ckey, &x);
		int n = cv ? atoi(cv) : 0;
		for (int i = 0; i < n; i++) {
			snprintf(key, sizeof(key), "w%d:%d", t, i);
			if (!ck_get(&e, key, &x))
				fail_msg("writer %d: counter %d but key %d missing", t, n, i);
		}
		snprintf(key, sizeof(key), "w%d:%d", t, n + 1);
		assert_null(ck_get(&e, key, &x));
		/* Count what is there: the counter, keys 0..n-1, and key n if its write made the cut. */
		live += (cv ? 1 : 0) + n;
		snprintf(key, sizeof(key), "w%d:%d", t, n);
		live += ck_get(&e, key, &x) ? 1 : 0;
	}
	/* The checkpoint's key count is exact at the cut (ckpt.c note 4). */
	assert_int_equal(hlog_key_count(e.l), live);
	ck_close(&e, true);
}

/* FLUSHALL from a protected session while checkpoints run: FLUSHALL waits for a checkpoint's
 * write-out and the checkpoint waits for every session's epoch, so FLUSHALL must wait refreshing
 * (ops.c); a plain lock there deadlocks this test. */
typedef struct flusher {
	hlog *l;
	_Atomic int *stop;
	int flushes;
} flusher;

static void *flusher_main(void *arg)
{
	flusher *f = arg;
	hlog_session *s;
	char key[32];
	assert_int_equal(hlog_session_open(f->l, &s), 0);
	while (!atomic_load(f->stop)) {
		hlog_session_protect(s);
		hlog_session_set_now(s, spw_time_ms());
		for (int i = 0; i < 200; i++) {
			hlog_key k;
			snprintf(key, sizeof(key), "f:%d", i);
			hlog_key_init(&k, key, strlen(key));
			int rc = hlog_upsert(s, &k, "x", 1, HLOG_NO_EXPIRY);
			assert_true(rc == HLOG_OK || rc == SPW_E_LOG_FULL);
		}
		assert_int_equal(hlog_flush_all(s), HLOG_OK);
		f->flushes++;
		hlog_session_unprotect(s);
	}
	hlog_session_close(s);
	return NULL;
}

static void flushall_during_checkpoints(bool tier)
{
	ck_env e;
	_Atomic int stop = 0;
	flusher f;
	pthread_t th;
	hlog_ckpt_info info;
	char why[512];
	ck_open_index(&e, tier, true, 8 << 20);
	f = (flusher){ .l = e.l, .stop = &stop };
	assert_int_equal(pthread_create(&th, NULL, flusher_main, &f), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(ck_checkpoint(&e, &info), 0);
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	assert_true(f.flushes > 0);
	ck_close(&e, false);
	ck_open_index(&e, tier, false, 8 << 20);
	assert_int_equal(ck_recover(&e, 0, &info, why, sizeof(why)), 0);
	assert_true(hlog_key_count(e.l) <= 200);
	ck_close(&e, true);
}

static void test_flushall_during_checkpoints_memory(void **st) { (void)st; flushall_during_checkpoints(false); }
static void test_flushall_during_checkpoints_tier(void **st) { (void)st; flushall_during_checkpoints(true); }

/* A record allocated before the checkpoint notes scan_from but published only after the index
 * image (an RMW whose fill is slow): the checkpoint's epoch barrier waits for it, so the image
 * holds it (without the barrier the key is missing after recovery, and the AOF would skip it too:
 * its address is below the cut). */
static _Atomic int slow_in_fill;

static int slow_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	(void)ctx;
	(void)old;
	*out = (hlog_rmw_plan){ .action = HLOG_RMW_WRITE, .new_len = 5, .expire_ms = HLOG_NO_EXPIRY };
	return 0;
}

static void slow_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)ctx;
	(void)old;
	(void)in_place;
	atomic_store(&slow_in_fill, 1);
	usleep(200000);
	memcpy(dst, "slow!", 5);
}

static void *slow_writer(void *arg)
{
	static const hlog_rmw_ops ops = { slow_plan, slow_fill };
	hlog_session *s;
	hlog_key k;
	assert_int_equal(hlog_session_open(arg, &s), 0);
	hlog_session_protect(s);
	hlog_key_init(&k, "slowkey", 7);
	assert_int_equal(hlog_rmw(s, &k, &ops, NULL), HLOG_OK);
	hlog_session_unprotect(s);
	hlog_session_close(s);
	return NULL;
}

static void test_publish_after_scan_from(void **st)
{
	(void)st;
	ck_env e;
	pthread_t th;
	hlog_ckpt_info info;
	char why[512];
	kv x;
	ck_open(&e, false, true);
	atomic_store(&slow_in_fill, 0);
	assert_int_equal(pthread_create(&th, NULL, slow_writer, e.l), 0);
	while (!atomic_load(&slow_in_fill))
		usleep(1000);
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	pthread_join(th, NULL);
	ck_close(&e, false);
	ck_open(&e, false, false);
	assert_int_equal(ck_recover(&e, 0, &info, why, sizeof(why)), 0);
	assert_non_null(ck_get(&e, "slowkey", &x));
	assert_string_equal(x.got, "slow!");
	assert_int_equal(hlog_key_count(e.l), 1);
	ck_close(&e, true);
}

/* ---------------- refusals (recover.c note 2) ---------------- */

static void flip_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

static void test_refusals(void **st)
{
	(void)st;
	ck_env e;
	hlog_ckpt_info info;
	char why[512], path[256], key[32];
	kv x;

	ck_open(&e, false, true);
	for (int i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_set(&e, key, "first");
	}
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	uint64_t first = info.id;
	ck_set(&e, "k1", "second");
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	uint64_t second = info.id;
	ck_close(&e, false);

	struct { const char *ext; off_t at; int want; } cases[] = {
		{ "meta", 40, SPW_E_CORRUPT },
		{ "index", 60, SPW_E_CORRUPT },
	};
	for (size_t c = 0; c < SPW_ARRAY_LEN(cases); c++) {
		snprintf(path, sizeof(path), "%s/checkpoint.%" PRIu64 ".%s", e.dir, second, cases[c].ext);
		flip_byte(path, cases[c].at);
		ck_open(&e, false, false);
		why[0] = '\0';
		assert_int_equal(hlog_recover(e.l, e.s, e.dir, e.d, 0, &info, why, sizeof(why)), cases[c].want);
		assert_non_null(strstr(why, path));                    /* names the file */
		assert_non_null(strstr(why, "--recover-checkpoint previous"));
		ck_close(&e, false);
		/* The previous one still loads, explicitly asked for. */
		ck_open(&e, false, false);
		assert_int_equal(ck_recover(&e, 1, &info, why, sizeof(why)), 0);
		assert_int_equal(info.id, first);
		assert_string_equal(ck_get(&e, "k1", &x), "first");
		ck_close(&e, false);
		/* Loading the previous one set the newest aside (recover.c note 5): back, and repaired. */
		for (int f = 0; f < 2; f++) {
			char from[300], to[256];
			snprintf(to, sizeof(to), "%s/checkpoint.%" PRIu64 ".%s", e.dir, second, f ? "index" : "meta");
			snprintf(from, sizeof(from), "%s.aside", to);
			assert_int_equal(rename(from, to), 0);
		}
		flip_byte(path, cases[c].at);
	}
	/* A segment cut short: refused, naming the segment file. */
	snprintf(path, sizeof(path), "%s/Store/hlog.0", e.dir);
	assert_int_equal(truncate(path, 4096), 0);
	ck_open(&e, false, false);
	assert_true(hlog_recover(e.l, e.s, e.dir, e.d, 0, &info, why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "hlog.0"));
	ck_close(&e, true);
}

/* ---------------- the redo hook (hlog.h) ---------------- */

typedef struct redo_log {
	int n;
	uint64_t last_seq;
	int sets, dels, flushes;
	char lastval[64];
} redo_log;

static void redo_fn(void *arg, const hlog_redo *r)
{
	redo_log *g = arg;
	assert_true(r->seq > g->last_seq);
	g->last_seq = r->seq;
	g->n++;
	if (r->kind == HLOG_REDO_SET) {
		g->sets++;
		size_t n = SPW_MIN(r->vlen, sizeof(g->lastval) - 1);
		memcpy(g->lastval, r->val, n);
		g->lastval[n] = '\0';
	} else if (r->kind == HLOG_REDO_DEL) {
		g->dels++;
	} else {
		g->flushes++;
	}
}

static void test_redo_hook(void **st)
{
	(void)st;
	ck_env e;
	redo_log g = { 0 };
	hlog_ckpt_info info;
	ck_open(&e, false, true);
	hlog_session_set_redo(e.s, redo_fn, &g);
	ck_set(&e, "a", "1");      /* append */
	ck_set(&e, "a", "2");      /* in place */
	assert_string_equal(g.lastval, "2");
	kv d = { .k = "a" };
	assert_int_equal(ck_run(&e, op_del, &d), HLOG_OK);
	assert_int_equal(ck_run(&e, op_del, &d), HLOG_NOTFOUND);   /* no change, no record */
	hlog_session_protect(e.s);
	assert_int_equal(hlog_flush_all(e.s), HLOG_OK);
	hlog_session_unprotect(e.s);
	assert_int_equal(g.sets, 2);
	assert_int_equal(g.dels, 1);
	assert_int_equal(g.flushes, 1);
	assert_true(hlog_redo_seq(e.l) > g.last_seq);
	/* A checkpoint's cut is past every change made before it. */
	ck_set(&e, "b", "1");
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	assert_true(info.next_seq > g.last_seq);
	ck_close(&e, true);
}

/* A FLUSHALL that leaves Begin on a sector boundary, then a checkpoint whose cut is that Begin
 * (nothing written since): the bytes of the cut's page below Begin were never written, and
 * recovery must not read them (it failed with an I/O error past the end of the segment). */
static void flushall_to_a_sector_boundary_then_recover(bool tier)
{
	ck_env e;
	hlog_ckpt_info info;
	char why[512];
	ck_open_index(&e, tier, true, 0);
	for (int i = 0; i < 50; i++) {
		char k[16];
		snprintf(k, sizeof(k), "a%d", i);
		ck_set(&e, k, "hello");
	}
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	uint64_t sector = e.d->sector_bytes;
	hlog_info hi;
	hlog_info_get(e.l, &hi);
	uint64_t pad = (hi.tail / sector + 1) * sector - hi.tail;
	if (pad < 32)
		pad += sector;
	static char val[8192];
	memset(val, 'v', sizeof(val));
	val[pad - 20] = 0;   /* a record that ends the tail exactly on the next sector boundary */
	ck_set(&e, "kkkk", val);
	hlog_info_get(e.l, &hi);
	assert_int_equal(hi.tail % sector, 0);
	hlog_session_protect(e.s);
	assert_int_equal(hlog_flush_all(e.s), HLOG_OK);
	hlog_session_unprotect(e.s);
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	assert_int_equal(info.cut, info.begin);
	ck_close(&e, false);
	ck_open_index(&e, tier, false, 0);
	if (ck_recover(&e, 0, &info, why, sizeof(why)) != 0)
		fail_msg("recovery: %s", why);
	assert_int_equal(hlog_key_count(e.l), 0);
	ck_set(&e, "after", "x");   /* and the log takes writes */
	assert_int_equal(hlog_key_count(e.l), 1);
	ck_close(&e, true);
}

static void test_recovery_after_a_flushall_to_a_sector_boundary_memory(void **st)
{
	(void)st;
	flushall_to_a_sector_boundary_then_recover(false);
}

static void test_recovery_after_a_flushall_to_a_sector_boundary_tier(void **st)
{
	(void)st;
	flushall_to_a_sector_boundary_then_recover(true);
}

/* A record larger than a page spans into the next one; a checkpoint whose cut lies on that last
 * page, with nothing written after, completes (FlushedUntil stays below the span: it steps over a
 * span whole once its last page fills, which never happens here, as at a shutdown), and the
 * record comes back from it. */
static void test_checkpoint_with_the_cut_on_a_spanning_records_last_page(void **st)
{
	(void)st;
	ck_env e;
	hlog_ckpt_info info;
	char why[512];
	static char big[100001];
	ck_open_index(&e, true, true, 0);
	ck_set(&e, "small", "x");
	memset(big, 'b', sizeof(big) - 1);
	big[0] = 'B';
	ck_set(&e, "big", big);
	assert_int_equal(ck_checkpoint(&e, &info), 0);
	hlog_info hi;
	hlog_info_get(e.l, &hi);
	uint64_t cut_page = info.cut & ~(hi.page_bytes - 1);
	assert_true(hi.flushed_until < cut_page);   /* the span held it back: the path this test is for */
	ck_close(&e, false);
	ck_open_index(&e, true, false, 0);
	if (ck_recover(&e, 0, &info, why, sizeof(why)) != 0)
		fail_msg("recovery: %s", why);
	kv x;
	const char *got = ck_get(&e, "small", &x);
	assert_non_null(got);
	assert_string_equal(got, "x");
	got = ck_get(&e, "big", &x);   /* kv keeps the first 127 bytes */
	assert_non_null(got);
	assert_int_equal(got[0], 'B');
	assert_int_equal(strlen(got), sizeof(x.got) - 1);
	ck_close(&e, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_memory),
		cmocka_unit_test(test_roundtrip_tier),
		cmocka_unit_test(test_no_checkpoint),
		cmocka_unit_test(test_cut_under_writers),
		cmocka_unit_test(test_flushall_during_checkpoints_memory),
		cmocka_unit_test(test_flushall_during_checkpoints_tier),
		cmocka_unit_test(test_publish_after_scan_from),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_redo_hook),
		cmocka_unit_test(test_recovery_after_a_flushall_to_a_sector_boundary_memory),
		cmocka_unit_test(test_recovery_after_a_flushall_to_a_sector_boundary_tier),
		cmocka_unit_test(test_checkpoint_with_the_cut_on_a_spanning_records_last_page),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
