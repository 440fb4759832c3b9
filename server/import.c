/*
 * import.c - --import-rdb FILE: every key of a dump.rdb written by redis-server 7.0 into the store,
 * after recovery and before the server answers (persist.c calls it while -LOADING is answered),
 * and --check-only: the same read with nothing stored, a summary printed.
 *
 * Design notes:
 *  1. One pass, front to back through enc/'s file reader (a bounded window): values decode through
 *     dump_types[] (dump.h), the code RESTORE uses, so a type that RESTORE accepts is imported and
 *     one that it does not is skipped with "type not supported yet".
 *  2. Skipped and counted, each with its reason: keys already expired (at the import's start
 *     time), keys of a database other than 0 (Spillway has one), streams and module values
 *     (stepped over), types not supported yet; function libraries and module aux data are
 *     stepped over and counted too. A corrupt file stops the import and the start fails: no
 *     partial dataset is served.
 *  3. The write goes through the caller's callback (persist.c: the AOF replay's path, with its
 *     device waits and index growth), so this file knows nothing of sessions.
 */
#include "server/server_int.h"
#include "server/dump.h"
#include "server/import.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IMPORT_LOG_MS 5000

typedef struct import_ctx {
	import_stats *st;
	import_set_fn set;
	void *set_ctx;
	int64_t now_ms;
	rdb_reader *r;
	/* the key being read: its name copied (the reader reuses its scratch for the value) */
	uint8_t *key;
	size_t klen, kcap;
	int64_t expire_ms;
	dump_build b;
	bool building;
	bool oom;
	int64_t t0_ms, next_log_ms;
} import_ctx;

static const rdb_visitor *imp_key(void *arg, int db, const uint8_t *k, size_t klen, int rdb_type,
	int64_t expire_ms, void **vctx)
{
	import_ctx *x = arg;
	int kind = rdb_type_kind(rdb_type);
	x->building = false;
	if (kind == RDB_KIND_STREAM || kind == RDB_KIND_MODULE)
		return NULL;   /* the reader steps over it and says so in imp_done */
	if (db != 0) {
		x->st->skipped_db++;
		return NULL;
	}
	if (expire_ms >= 0 && expire_ms <= x->now_ms) {
		x->st->skipped_expired++;
		return NULL;
	}
	const rdb_visitor *v = dump_build_begin(&x->b, rdb_type);
	if (!v) {
		x->st->skipped_type[kind]++;
		return NULL;
	}
	if (klen > x->kcap) {
		uint8_t *p = realloc(x->key, klen);
		if (!p) {
			dump_build_fini(&x->b);
			x->oom = true;   /* imp_done fails the load */
			return NULL;
		}
		x->key = p;
		x->kcap = klen;
	}
	memcpy(x->key, k, klen);
	x->klen = klen;
	x->expire_ms = expire_ms;
	x->building = true;
	*vctx = &x->b;
	return v;
}

static void progress_log(import_ctx *x)
{
	int64_t now = spw_time_ms();
	if (now < x->next_log_ms)
		return;
	x->next_log_ms = now + IMPORT_LOG_MS;
	double secs = (double)(now - x->t0_ms) / 1000.0;
	uint64_t keys = 0;
	for (int i = 0; i < RDB_KINDS; i++)
		keys += x->st->keys[i];
	spw_log(SPW_LOG_NOTICE, 0, "RDB import: %" PRIu64 " keys, %.1f MB read (%.0f keys/s, %.1f MB/s)", keys,
		(double)rdb_reader_offset(x->r) / 1e6, secs > 0 ? (double)keys / secs : 0,
		secs > 0 ? (double)rdb_reader_offset(x->r) / 1e6 / secs : 0);
}

static int imp_done(void *arg, int rc)
{
	import_ctx *x = arg;
	if (rc == RDB_E_UNSUPPORTED) {
		x->st->skipped_stream_module++;
	} else if (rc == 0 && x->building) {
		int64_t exp = x->expire_ms >= 0 ? x->expire_ms : HLOG_NO_EXPIRY;
		int wrc = x->set ? x->set(x->set_ctx, x->key, x->klen, &x->b, exp) : 0;
		if (wrc < 0) {
			dump_build_fini(&x->b);
			x->building = false;
			return wrc;
		}
		x->st->keys[x->b.kind]++;
	} else if (x->oom) {
		return -ENOMEM;   /* imp_key could not copy the key */
	}
	if (x->building)
		dump_build_fini(&x->b);
	x->building = false;
	progress_log(x);
	return 0;
}

static void imp_skipped(void *arg, const char *what)
{
	(void)what;
	((import_ctx *)arg)->st->skipped_aux++;
}

static const rdb_file_ops import_ops = { .key = imp_key, .value_done = imp_done, .skipped = imp_skipped };

int import_rdb(const char *path, int64_t now_ms, import_set_fn set, void *set_ctx, import_stats *st,
	char *why, size_t whylen)
{
	rdb_reader r;
	rdb_file_info info;
	import_ctx x = { .st = st, .set = set, .set_ctx = set_ctx, .now_ms = now_ms, .r = &r };
	memset(st, 0, sizeof(*st));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	int rc = rdb_reader_init_fd(&r, fd, 0);
	if (rc == 0) {
		x.t0_ms = spw_time_ms();
		x.next_log_ms = x.t0_ms + IMPORT_LOG_MS;
		rc = rdb_file_load(&r, &import_ops, &x, &info);
		st->bytes = rdb_reader_offset(&r);
		st->version = info.version;
		st->crc_checked = info.crc_checked;
		st->ms = spw_time_ms() - x.t0_ms;
		if (rc < 0)
			snprintf(why, whylen, "%s at offset %" PRIu64 ": %s", path, st->bytes,
				rc == SPW_E_CORRUPT ? r.err : spw_strerror(rc));
	} else {
		snprintf(why, whylen, "out of memory");
	}
	if (x.building)
		dump_build_fini(&x.b);
	free(x.key);
	rdb_reader_fini(&r);
	close(fd);
	return rc;
}

/* The summary: one line of totals, one per type imported, one per reason keys were skipped. */
void import_summary_print(const import_stats *st, void (*line)(void *ctx, const char *s), void *ctx)
{
	char buf[256];
	uint64_t keys = 0;
	for (int i = 0; i < RDB_KINDS; i++)
		keys += st->keys[i];
	snprintf(buf, sizeof(buf), "RDB import done: %" PRIu64 " keys from %" PRIu64 " bytes (RDB version %d%s) "
		"in %.3f s", keys, st->bytes, st->version, st->crc_checked ? ", checksum ok" : ", no checksum",
		(double)st->ms / 1000.0);
	line(ctx, buf);
	for (int i = 0; i < RDB_KINDS; i++) {
		if (st->keys[i]) {
			snprintf(buf, sizeof(buf), "  %s: %" PRIu64 " keys", rdb_kind_name(i), st->keys[i]);
			line(ctx, buf);
		}
		if (st->skipped_type[i]) {
			snprintf(buf, sizeof(buf), "  skipped %" PRIu64 " %s keys: type not supported yet",
				st->skipped_type[i], rdb_kind_name(i));
			line(ctx, buf);
		}
	}
	static const struct { size_t off; const char *why; } reasons[] = {
		{ offsetof(import_stats, skipped_expired), "already expired" },
		{ offsetof(import_stats, skipped_db), "in a database other than 0" },
		{ offsetof(import_stats, skipped_stream_module), "streams or module values (not supported)" },
		{ offsetof(import_stats, skipped_aux), "function libraries or module aux fields (not supported)" },
	};
	for (size_t i = 0; i < SPW_ARRAY_LEN(reasons); i++) {
		uint64_t n = *(const uint64_t *)((const char *)st + reasons[i].off);
		if (n) {
			snprintf(buf, sizeof(buf), "  skipped %" PRIu64 " %s", n, reasons[i].why);
			line(ctx, buf);
		}
	}
}

static void print_line(void *ctx, const char *s)
{
	fprintf(ctx, "%s\n", s);
}

int import_check_main(void)
{
	import_stats st;
	char why[512] = "";
	if (!g_cfg.import_rdb[0]) {
		fprintf(stderr, "--check-only needs --import-rdb FILE\n");
		return 1;
	}
	int rc = import_rdb(g_cfg.import_rdb, spw_time_ms(), NULL, NULL, &st, why, sizeof(why));
	if (rc < 0) {
		fprintf(stderr, "RDB check failed: %s\n", why);
		return 1;
	}
	import_summary_print(&st, print_line, stdout);
	return 0;
}
