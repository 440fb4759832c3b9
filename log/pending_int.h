/*
 * pending_int.h - pending.c's fetches and entry points, private to log/. See pending.c's notes.
 */
#ifndef SPW_LOG_PENDING_INT_H
#define SPW_LOG_PENDING_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "log/hlog_int.h"

/* Internal results of pend_cold (positive, never returned to callers of the public API). */
enum { PEND_FOUND = 16, PEND_ABSENT = 17 };

enum { FETCH_READING, FETCH_FOUND, FETCH_ABSENT, FETCH_FAILED };

struct pend_fetch {
	pend_fetch *next;            /* the op's fetches, or the free list */
	pend_op *op;                 /* NULL for a scan read */
	int state;                   /* FETCH_* */
	int err;                     /* FETCH_FAILED: the error the operation gets */
	uint64_t start;              /* cache key: the cold address the walk reached */
	uint64_t hash;
	uint8_t *key;                /* a copy (the caller's buffer may move), kcap bytes */
	uint32_t klen, kcap;
	bool internal;               /* the key's namespace (ops.c note 5) */
	uint64_t addr;               /* the record being read; the record found once FOUND */
	uint64_t base;               /* device offset of buf[0] (sector-aligned) */
	uint64_t want;               /* bytes asked from base */
	uint64_t valid;              /* bytes from base that came back */
	uint8_t *buf;
	uint64_t cap;
	uint32_t parts;              /* read requests in flight */
	int part_err;
	bool second;                 /* the read in flight is the whole record after a short first one */
};

/* The cold branch of a chain walk (pending.c note 1): PEND_FOUND with *r and *info (a private copy,
 * valid until op_ctx is released) and, when at is not NULL, the record's address in *at;
 * PEND_ABSENT, HLOG_PENDING, or a negative error. */
int pend_cold(hlog_session *s, const hlog_key *k, uint64_t addr, bool queue, log_rec **r /* out */,
              uint64_t *info /* out */, uint64_t *at /* out */);
/* An update found no frame: register the op for a wake-up. HLOG_PENDING, 0 (room now: retry), or
 * an error (pending.c note 2). */
int pend_wait(hlog_session *s, uint64_t need);
/* Hand the waiting ops whose frame is free (or whose store failed) to the ready list. */
void pend_waiters_check(hlog_session *s);
/* Ready callbacks, at the end of hlog_session_poll only. */
void pend_ready_run(hlog_session *s);
/* Fetch entries for a scan (op NULL): new, read the record at addr, return to the free list. */
pend_fetch *pend_fetch_new(hlog_session *s);
void pend_fetch_read(hlog_session *s, pend_fetch *f, uint64_t addr, uint64_t len, bool second);
void pend_fetch_put(hlog_session *s, pend_fetch *f);
/* Free every op and fetch of a closing session (its device queue is closed already). */
void pend_session_close(hlog_session *s);

#endif
