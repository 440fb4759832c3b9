/*
 * import.h - --import-rdb (import.c): a redis-server 7.0 dump.rdb into the store. Private to server/.
 */
#ifndef SPW_SERVER_IMPORT_H
#define SPW_SERVER_IMPORT_H

#include "server/dump.h"

typedef struct import_stats {
	uint64_t keys[RDB_KINDS];          /* imported, by type */
	uint64_t skipped_type[RDB_KINDS];  /* no dump_types[] entry yet */
	uint64_t skipped_expired, skipped_db, skipped_stream_module;
	uint64_t skipped_aux;              /* function libraries, module aux fields */
	uint64_t bytes;
	int64_t ms;
	int version;
	bool crc_checked;
} import_stats;

/* Store one key (expire_ms absolute or HLOG_NO_EXPIRY). 0 or a negative error, which stops the import. */
typedef int (*import_set_fn)(void *ctx, const uint8_t *k, size_t klen, const dump_build *b, int64_t expire_ms);

/* Read path whole; set (NULL: check only) gets every key to store. 0, or a negative error with
 * why filled. Keys expiring at or before now_ms are skipped. */
int import_rdb(const char *path, int64_t now_ms, import_set_fn set, void *set_ctx, import_stats *st /* out */,
	char *why, size_t whylen);
/* The summary, one line at a time. */
void import_summary_print(const import_stats *st, void (*line)(void *ctx, const char *s), void *ctx);
/* spillway-server --import-rdb FILE --check-only: the read without a store, the summary on stdout.
 * The exit code: 0, or 1 (a message on stderr). */
int import_check_main(void);

#endif
