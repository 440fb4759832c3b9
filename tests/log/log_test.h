/*
 * log_test.h - helpers shared by the log tests: opening a small store, keys, value callbacks, the
 * store's counters, and the 8-byte counter RMW used by the increment tests.
 */
#ifndef SPW_LOG_TEST_H
#define SPW_LOG_TEST_H

#include <stdio.h>
#include <string.h>

#include "log/hlog.h"
#include "log/hlog_int.h"

static inline hlog_config log_test_config(uint64_t memory, uint64_t page, int mutable_percent)
{
	hlog_config c = {
		.memory_bytes = memory,
		.page_bytes = page,
		.index_bytes = 64 * 1024,
		.mutable_percent = mutable_percent,
		.max_sessions = 8,
	};
	return c;
}

typedef struct test_key {
	char buf[64];
	hlog_key k;
} test_key;

static inline void test_key_make(test_key *t, const char *prefix, int i)
{
	int n = snprintf(t->buf, sizeof(t->buf), "%s:%d", prefix, i);
	hlog_key_init(&t->k, t->buf, (size_t)n);
}

/* The i of a key made by test_key_make(prefix, i); false for any other key (a scan's keys are not
 * NUL-terminated). */
static inline bool test_key_parse(const void *key, size_t klen, const char *prefix, int *i)
{
	char buf[64];
	size_t plen = strlen(prefix);
	if (klen >= sizeof(buf) || klen <= plen + 1 || memcmp(key, prefix, plen) != 0)
		return false;
	memcpy(buf, key, klen);
	buf[klen] = 0;
	return buf[plen] == ':' && sscanf(buf + plen + 1, "%d", i) == 1;
}

/* The store's counters and markers now. */
static inline hlog_info info_of(hlog *l)
{
	hlog_info i;
	hlog_info_get(l, &i);
	return i;
}

/* Scan the whole index, count buckets a call, refreshing the (protected) session between calls.
 * The last error a call reported (hlog_scan_error), 0 when none did. Include after cmocka.h. */
static inline int scan_whole(hlog_session *s, uint64_t count, hlog_key_fn fn, void *ctx)
{
	uint64_t cursor = 0;
	int err = 0, calls = 0;
	do {
		cursor = hlog_scan(s, cursor, count, fn, ctx);
		if (hlog_scan_error(s))
			err = hlog_scan_error(s);
		hlog_session_refresh(s);
		assert_true(++calls < 100000);
	} while (cursor != 0);
	return err;
}

/* A copy of the value seen by a read. */
typedef struct read_buf {
	uint8_t data[8192];
	size_t len;
	int64_t expire_ms;
	int calls;
} read_buf;

static inline void read_copy_fn(void *ctx, const hlog_value *v)
{
	read_buf *b = ctx;
	b->len = v->len < sizeof(b->data) ? v->len : sizeof(b->data);
	memcpy(b->data, v->ptr, b->len);
	b->expire_ms = v->expire_ms;
	b->calls++;
}

/* Read k and compare with want. */
static inline bool read_equals(hlog_session *s, const hlog_key *k, const void *want, size_t len)
{
	read_buf b = { .calls = 0 };
	if (hlog_read(s, k, read_copy_fn, &b) != HLOG_OK || b.calls != 1)
		return false;
	return b.len == len && memcmp(b.data, want, len) == 0;
}

/* RMW that treats the value as a little-endian u64 counter and adds ctx->delta. */
typedef struct incr_ctx {
	uint64_t delta;
	uint64_t next;       /* derived from old in plan, written by fill */
	int64_t expire_ms;
} incr_ctx;

static inline int incr_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	incr_ctx *c = ctx;
	uint64_t cur = 0;
	if (old && old->len == 8)
		memcpy(&cur, old->ptr, 8);
	c->next = cur + c->delta;
	out->action = HLOG_RMW_WRITE;
	out->new_len = 8;
	out->expire_ms = old ? old->expire_ms : c->expire_ms;
	return 0;
}

static inline void incr_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)old;
	(void)in_place;
	incr_ctx *c = ctx;
	memcpy(dst, &c->next, 8);
}

static const hlog_rmw_ops incr_ops = { incr_plan, incr_fill };

/* Add delta to k's counter (a new one expires at expire_ms). hlog_rmw's result. */
static inline int incr_by(hlog_session *s, const hlog_key *k, uint64_t delta, int64_t expire_ms)
{
	incr_ctx c = { .delta = delta, .expire_ms = expire_ms };
	return hlog_rmw(s, k, &incr_ops, &c);
}

static inline uint64_t read_counter(hlog_session *s, const hlog_key *k)
{
	read_buf b = { .calls = 0 };
	uint64_t v = 0;
	if (hlog_read(s, k, read_copy_fn, &b) == HLOG_OK && b.len == 8)
		memcpy(&v, b.data, 8);
	return v;
}

#endif
