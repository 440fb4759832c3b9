/*
 * cmd_keys.c - the generic key commands (Redis's db.c and expire.c): DEL UNLINK EXISTS TYPE
 * EXPIRE PEXPIRE EXPIREAT PEXPIREAT TTL PTTL EXPIRETIME PEXPIRETIME PERSIST TOUCH KEYS SCAN
 * RANDOMKEY RENAME RENAMENX COPY DBSIZE FLUSHDB FLUSHALL.
 *
 * Design notes:
 *  1. Replies and errors are byte-identical to redis-server 7.0, including the order of checks
 *     (options, then numbers, then the key). Only db 0 exists: COPY ... DB n with n != 0 answers
 *     "DB index is out of range".
 *  2. Types: a key is a string or a collection (its record type and, for a collection, its
 *     header's first byte: coll/coll.h). TYPE and SCAN ... TYPE read them from the record they
 *     visit anyway; SCAN compares the name without case, as Redis's strcasecmp does.
 *  3. Expiry changes are one hlog_rmw each: plan looks at the old record's expiry and asks for a
 *     write of the same bytes with the new expiry (in place the fill writes nothing), or a delete
 *     when the new time is already past (Redis's checkAlreadyExpired).
 *  4. KEYS, SCAN and RANDOMKEY walk hlog_scan's bucket cursor. The callback sees keys inside the
 *     store's lock, so keys are copied into a per-thread buffer and the reply written afterwards
 *     (its array length must come first). The buffer is kept between calls (no allocation in the
 *     steady state) unless one huge KEYS made it large.
 *  5. SCAN follows Redis's loop: visit one bucket at a time until COUNT keys were seen (before
 *     MATCH filtering) or the end; the cursor is the next bucket, "0" at the end. Redis also stops
 *     after 10*COUNT buckets, but its table is sized to the keys while our index is sized up front
 *     and mostly empty when the data is small: with that cap an empty 128 MiB index would take
 *     20,000 calls of COUNT 10 to walk. So the cap is at least SCAN_MIN_BUCKETS (1 MiB of index
 *     memory, a fraction of a millisecond to read), and a whole walk takes a few hundred calls.
 *  6. RANDOMKEY answers nil at once when the store holds no key; otherwise it probes a few random
 *     buckets, then walks forward from a random one (wrapping) so that a sparse index still finds
 *     the keys it has.
 *  7. keyspace_hits/misses count what Redis's lookupKeyRead counts: EXISTS, TYPE, TTL family,
 *     TOUCH, COPY's source and SCAN's TYPE check; DEL, EXPIRE and RENAME do not.
 *  8. Not atomic across worker threads in this version: RENAME and COPY read the source, write
 *     the destination and (RENAME) delete the source as separate store operations, so another
 *     client may briefly see both keys, or a write to the source made in between may be lost.
 *     RENAMENX and COPY without REPLACE create the destination atomically (one hlog_rmw).
 *  9. HLOG_PENDING parks the client (reply_store_failed -> reply_pending) and the request runs again
 *     once the device reads are done (park.c note 1); a handler must not have changed the store
 *     before it parks. Commands of several keys (DEL, UNLINK, EXISTS, TOUCH of more than one key,
 *     RENAME, RENAMENX, COPY) first prefetch every key, so that their reads go out together and
 *     no key is written before all are at hand. Should a later step still park (a record evicted
 *     in between), DEL keeps its position and count and RENAME its stage in c->resume, so that
 *     the re-run neither deletes twice nor answers differently (RENAMENX would find the
 *     destination it wrote itself).
 * 10. KEYS, SCAN and RANDOMKEY do not park: with a device, hlog_scan reads the chains it meets on
 *     the device before it returns (the store's documented compromise: the worker waits for those
 *     reads). A chain it could not read makes KEYS and SCAN answer the device error rather than a
 *     silently shorter list; RANDOMKEY answers any key it did find.
 */
#include "server/server_int.h"
#include "coll/coll.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------- shared helpers ---------------- */

static void read_noop(void *ctx, const hlog_value *v)
{
	(void)ctx;
	(void)v;
}

/* Does the key exist? 1, 0, HLOG_PENDING, or a negative store error. */
static int key_exists(client *c, const resp_slice *key)
{
	hlog_key k;
	key_from_arg(&k, key);
	int rc = hlog_read(c->w->sess, &k, read_noop, NULL);
	if (rc == HLOG_OK)
		return 1;
	if (rc == HLOG_NOTFOUND)
		return 0;
	return rc;
}

/* Only the expiry changes: in place there is nothing to write. */
static void keep_value_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)ctx;
	if (!in_place)
		memcpy(dst, old->ptr, old->len);
}

/* ---------------- the per-thread key buffer (note 4) ---------------- */

/* Entries are [size_t len][bytes], packed. */
typedef struct keybuf {
	char *p;
	size_t len, cap;
	long long n;
	bool oom;
} keybuf;

static __thread keybuf t_keys;

#define KEYBUF_KEEP_MAX (1u << 20)   /* a buffer grown past this is freed after use */

/* The thread's buffer is freed when the thread exits (a pthread key's destructor), so workers
 * that stop leave nothing behind for the leak checker. */
static pthread_once_t keybuf_once = PTHREAD_ONCE_INIT;
static pthread_key_t keybuf_key;

static void keybuf_key_create(void)
{
	pthread_key_create(&keybuf_key, free);
}

static void keybuf_push(keybuf *b, const void *key, size_t klen)
{
	size_t need = sizeof(size_t) + klen;
	if (b->oom)
		return;
	if (b->cap - b->len < need) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap - b->len < need)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
		pthread_once(&keybuf_once, keybuf_key_create);
		pthread_setspecific(keybuf_key, p);
	}
	memcpy(b->p + b->len, &klen, sizeof(size_t));
	memcpy(b->p + b->len + sizeof(size_t), key, klen);
	b->len += need;
	b->n++;
}

/* Write the buffered keys as bulk strings (the array header is the caller's). */
static void keybuf_write(keybuf *b, client *c)
{
	size_t off = 0, klen;
	while (off < b->len) {
		memcpy(&klen, b->p + off, sizeof(size_t));
		off += sizeof(size_t);
		reply_bulk(c, b->p + off, klen);
		off += klen;
	}
}

static void keybuf_reset(keybuf *b)
{
	b->len = 0;
	b->n = 0;
	b->oom = false;
	if (b->cap > KEYBUF_KEEP_MAX) {
		free(b->p);
		b->p = NULL;
		b->cap = 0;
		pthread_setspecific(keybuf_key, NULL);
	}
}

/* ---------------- DEL, UNLINK, EXISTS, TOUCH, TYPE ---------------- */

/* c->resume (note 9): idx = the key that parked, acc = keys deleted before it. */
void cmd_del(client *c)
{
	long long n = c->resume.acc;
	int first = c->resume.idx ? c->resume.idx : 1;
	hlog_key k;
	if (c->argc > 2 && first == 1 && reply_store_failed(c, command_keys_prefetch(c, 1, -1, 1)))
		return;
	for (int j = first; j < c->argc; j++) {
		key_from_arg(&k, &c->argv[j]);
		int rc = hlog_delete(c->w->sess, &k);
		if (SPW_UNLIKELY(rc == HLOG_PENDING)) {
			c->resume.idx = j;
			c->resume.acc = n;
		}
		if (reply_store_failed(c, rc))
			return;
		n += rc == HLOG_OK;
	}
	reply_int(c, n);
}

/* Deleting is already O(1) per key here (a tombstone), so UNLINK is DEL. */
void cmd_unlink(client *c)
{
	cmd_del(c);
}

/* EXISTS and TOUCH: how many of the keys exist, duplicates counted each time. */
static void count_existing(client *c)
{
	long long n = 0;
	if (c->argc > 2 && reply_store_failed(c, command_keys_prefetch(c, 1, -1, 1)))
		return;
	for (int j = 1; j < c->argc; j++) {
		int rc = key_exists(c, &c->argv[j]);
		if (reply_store_failed(c, rc))
			return;
		count_lookup(c, rc == 1);
		n += rc;
	}
	reply_int(c, n);
}

void cmd_exists(client *c)
{
	count_existing(c);
}

void cmd_touch(client *c)
{
	count_existing(c);
}

const char *value_type_name(const hlog_value *v)
{
	if (v->rtype == HLOG_T_STRING)
		return "string";
	return coll_type_name(v->len ? v->ptr[0] & ~COLL_LARGE : 0);   /* a large head too */
}

static void read_type(void *ctx, const hlog_value *v)
{
	*(const char **)ctx = value_type_name(v);
}

void cmd_type(client *c)
{
	const char *t = "none";
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_read(c->w->sess, &k, read_type, &t);
	if (reply_store_failed(c, rc))
		return;
	count_lookup(c, rc == HLOG_OK);
	reply_simple(c, t, strlen(t));
}

/* ---------------- EXPIRE family ---------------- */

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

/* Redis's addReplyErrorFormat on "Unsupported option %s": the option ends at its first NUL,
 * trailing CR/LF are trimmed and any other CR/LF become spaces, so the reply stays one line. */
static void reply_unsupported_option(client *c, const resp_slice *opt)
{
	static const char prefix[] = "ERR Unsupported option ";
	size_t plen = sizeof(prefix) - 1;
	size_t olen = strnlen(opt->ptr, opt->len);
	char *msg;

	while (olen && (opt->ptr[olen - 1] == '\r' || opt->ptr[olen - 1] == '\n'))
		olen--;
	msg = (char *)worker_scratch(c->w, plen + olen + 1);
	if (!msg) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	memcpy(msg, prefix, plen);
	for (size_t i = 0; i < olen; i++) {
		char ch = opt->ptr[i];
		msg[plen + i] = (ch == '\r' || ch == '\n') ? ' ' : ch;
	}
	msg[plen + olen] = '\0';
	reply_error(c, msg);
}

/* Redis's parseExtendedExpireArgumentsOrReply. false after replying. */
static bool expire_flags_parse(client *c, int *flags /* out */)
{
	int f = 0;
	for (int j = 3; j < c->argc; j++) {
		const resp_slice *o = &c->argv[j];
		if (OPT_IS(o, "nx")) {
			f |= EXP_NX;
		} else if (OPT_IS(o, "xx")) {
			f |= EXP_XX;
		} else if (OPT_IS(o, "gt")) {
			f |= EXP_GT;
		} else if (OPT_IS(o, "lt")) {
			f |= EXP_LT;
		} else {
			reply_unsupported_option(c, o);
			return false;
		}
	}
	if ((f & EXP_NX) && (f & (EXP_XX | EXP_GT | EXP_LT))) {
		reply_error(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
		return false;
	}
	if ((f & EXP_GT) && (f & EXP_LT)) {
		reply_error(c, "ERR GT and LT options at the same time are not compatible");
		return false;
	}
	*flags = f;
	return true;
}

struct expire_ctx {
	int flags;
	long long when;            /* absolute ms */
	int64_t now_ms;
	int result;                /* output of plan: 1 when the expiry was set or the key deleted */
};

static int expire_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct expire_ctx *e = ctx;
	long long cur;

	e->result = 0;
	out->action = HLOG_RMW_KEEP;
	if (!old)
		return 0;
	cur = old->expire_ms;   /* HLOG_NO_EXPIRY is -1, as Redis's getExpire */
	if ((e->flags & EXP_NX) && cur != -1)
		return 0;
	if ((e->flags & EXP_XX) && cur == -1)
		return 0;
	/* GT: no expiry counts as infinite, so GT always fails on it. */
	if ((e->flags & EXP_GT) && (e->when <= cur || cur == -1))
		return 0;
	if ((e->flags & EXP_LT) && cur != -1 && e->when >= cur)
		return 0;
	e->result = 1;
	if (e->when <= e->now_ms) {
		out->action = HLOG_RMW_DELETE;
	} else if (e->when != cur) {
		out->action = HLOG_RMW_WRITE;
		out->new_len = old->len;
		out->expire_ms = e->when;
	}
	return 0;
}

static const hlog_rmw_ops expire_ops = { expire_plan, keep_value_fill };

/* Redis's expireGenericCommand: basetime is now (EXPIRE/PEXPIRE) or 0 (the AT forms). */
static void expire_generic(client *c, long long basetime, bool seconds, const char *cmd)
{
	struct expire_ctx e = { .now_ms = c->w->now_ms };
	long long when;
	hlog_key k;

	if (!expire_flags_parse(c, &e.flags))
		return;
	if (!arg_ll(&c->argv[2], &when)) {
		reply_err_not_int(c);
		return;
	}
	if (seconds) {
		if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
			goto invalid;
		when *= 1000;
	}
	if (when > LLONG_MAX - basetime)
		goto invalid;
	e.when = when + basetime;

	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &expire_ops, &e);
	if (!reply_store_failed(c, rc))
		reply_int(c, e.result);
	return;
invalid:
	reply_errorf(c, "ERR invalid expire time in '%s' command", cmd);
}

void cmd_expire(client *c)
{
	expire_generic(c, c->w->now_ms, true, "expire");
}

void cmd_pexpire(client *c)
{
	expire_generic(c, c->w->now_ms, false, "pexpire");
}

void cmd_expireat(client *c)
{
	expire_generic(c, 0, true, "expireat");
}

void cmd_pexpireat(client *c)
{
	expire_generic(c, 0, false, "pexpireat");
}

static void read_expire(void *ctx, const hlog_value *v)
{
	*(int64_t *)ctx = v->expire_ms;
}

/* Redis's ttlGenericCommand: -2 no key, -1 no expiry, else the remaining (or absolute) time,
 * never negative, seconds rounded to nearest. */
static void ttl_generic(client *c, bool ms, bool absolute)
{
	int64_t expire = HLOG_NO_EXPIRY;
	long long ttl;
	hlog_key k;

	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_read(c->w->sess, &k, read_expire, &expire);
	if (reply_store_failed(c, rc))
		return;
	count_lookup(c, rc == HLOG_OK);
	if (rc == HLOG_NOTFOUND) {
		reply_int(c, -2);
		return;
	}
	if (expire == HLOG_NO_EXPIRY) {
		reply_int(c, -1);
		return;
	}
	ttl = absolute ? expire : expire - c->w->now_ms;
	if (ttl < 0)
		ttl = 0;
	/* Rounded in unsigned arithmetic: ttl + 500 passes LLONG_MAX for PEXPIREAT LLONG_MAX, where
	 * redis-server replies the exact quotient, 9223372036854776. */
	reply_int(c, ms ? ttl : (long long)(((unsigned long long)ttl + 500) / 1000));
}

void cmd_ttl(client *c)
{
	ttl_generic(c, false, false);
}

void cmd_pttl(client *c)
{
	ttl_generic(c, true, false);
}

void cmd_expiretime(client *c)
{
	ttl_generic(c, false, true);
}

void cmd_pexpiretime(client *c)
{
	ttl_generic(c, true, true);
}

static int persist_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	int *result = ctx;
	*result = 0;
	out->action = HLOG_RMW_KEEP;
	if (old && old->expire_ms != HLOG_NO_EXPIRY) {
		*result = 1;
		out->action = HLOG_RMW_WRITE;
		out->new_len = old->len;
		out->expire_ms = HLOG_NO_EXPIRY;
	}
	return 0;
}

static const hlog_rmw_ops persist_ops = { persist_plan, keep_value_fill };

void cmd_persist(client *c)
{
	int result = 0;
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &persist_ops, &result);
	if (!reply_store_failed(c, rc))
		reply_int(c, result);
}

/* ---------------- KEYS, SCAN, RANDOMKEY ---------------- */

struct match_ctx {
	keybuf *b;
	const char *pat;
	size_t plen;
	bool use_pat;              /* false for "*" */
	const resp_slice *type;    /* SCAN TYPE: the type name asked for */
	long long seen;            /* keys visited, before filtering */
	long long type_checks;     /* SCAN TYPE lookups, counted as hits as Redis does */
	bool check_type;
};

static void match_visit(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	struct match_ctx *m = ctx;
	m->seen++;
	if (m->use_pat && !spw_glob_match(m->pat, m->plen, key, klen, 0))
		return;
	if (m->check_type) {
		m->type_checks++;
		const char *t = value_type_name(v);
		size_t tl = strnlen(m->type->ptr, m->type->len);   /* a C string to Redis: up to a NUL */
		if (strlen(t) != tl || strncasecmp(t, m->type->ptr, tl) != 0)
			return;
	}
	keybuf_push(m->b, key, klen);
}

/* Buckets per hlog_scan call while KEYS walks the whole index; the epoch is refreshed between
 * batches so a long KEYS does not hold back page reclamation. */
#define KEYS_BATCH 1024

void cmd_keys(client *c)
{
	const resp_slice *p = &c->argv[1];
	struct match_ctx m = { .b = &t_keys, .pat = p->ptr, .plen = p->len };
	uint64_t cursor = 0;
	/* Cursors in the buckets the index has now: a doubling between batches repeats no key. */
	uint64_t base = hlog_scan_cursor_end(g_srv.store);

	int err = 0;
	m.use_pat = !(p->len == 1 && p->ptr[0] == '*');
	do {
		cursor = hlog_scan_base(c->w->sess, base, cursor, KEYS_BATCH, match_visit, &m);
		if (!err)
			err = hlog_scan_error(c->w->sess);
		hlog_session_refresh(c->w->sess);
	} while (cursor != 0);

	if (err) {
		reply_err_store(c, err);   /* keys on the device could not be read (note 10) */
	} else if (m.b->oom) {
		reply_err_store(c, -ENOMEM);
	} else {
		resp_write_array_len(&c->out, m.b->n);
		keybuf_write(m.b, c);
	}
	keybuf_reset(m.b);
}

/* Redis's parseScanCursorOrReply: strtoul over the argument up to its first NUL, no leading
 * space, a sign allowed ("-1" wraps), nothing after the digits, no overflow. */
bool scan_cursor_parse(const resp_slice *a, unsigned long long *out)
{
	const char *p = a->ptr, *end = a->ptr + strnlen(a->ptr, a->len);
	unsigned long long v = 0;
	bool neg = false;

	if (p == end) {
		*out = 0;   /* strtoul("") is 0 with nothing left over */
		return true;
	}
	if (isspace((unsigned char)*p))
		return false;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (p == end || !isdigit((unsigned char)*p))
		return false;
	for (; p < end && isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (p != end)
		return false;
	*out = neg ? -v : v;
	return true;
}

/* The least number of buckets one SCAN call may visit (note 5). */
#define SCAN_MIN_BUCKETS (16LL * 1024)

void cmd_scan(client *c)
{
	struct match_ctx m = { .b = &t_keys };
	unsigned long long cursor;
	long long count = 10, maxit;
	char cbuf[24];

	if (!scan_cursor_parse(&c->argv[1], &cursor)) {
		reply_error(c, "ERR invalid cursor");
		return;
	}
	for (int i = 2; i < c->argc; i += 2) {
		const resp_slice *o = &c->argv[i];
		bool has_arg = c->argc - i >= 2;
		if (OPT_IS(o, "count") && has_arg) {
			if (!arg_ll(&c->argv[i + 1], &count)) {
				reply_err_not_int(c);
				return;
			}
			if (count < 1) {
				reply_err_syntax(c);
				return;
			}
		} else if (OPT_IS(o, "match") && has_arg) {
			m.pat = c->argv[i + 1].ptr;
			m.plen = c->argv[i + 1].len;
			m.use_pat = !(m.plen == 1 && m.pat[0] == '*');
		} else if (OPT_IS(o, "type") && has_arg) {
			m.check_type = true;
			m.type = &c->argv[i + 1];
		} else {
			reply_err_syntax(c);
			return;
		}
	}

	int err = 0;
	if (cursor >= hlog_scan_cursor_end(g_srv.store) || hlog_key_count(g_srv.store) == 0) {
		cursor = 0;   /* not a cursor we handed out, or nothing to find: the walk is over */
	} else {
		if (__builtin_mul_overflow(count, 10LL, &maxit))
			maxit = LLONG_MAX;
		maxit = SPW_MAX(maxit, SCAN_MIN_BUCKETS);
		do {
			cursor = hlog_scan(c->w->sess, cursor, 1, match_visit, &m);
			if (!err)
				err = hlog_scan_error(c->w->sess);
		} while (cursor && maxit-- && m.seen < count);
	}
	c->w->stats.keyspace_hits += (uint64_t)m.type_checks;

	if (err) {
		reply_err_store(c, err);   /* note 10 */
	} else if (m.b->oom) {
		reply_err_store(c, -ENOMEM);
	} else {
		resp_write_array_len(&c->out, 2);
		reply_bulk(c, cbuf, spw_fmt_ll(cbuf, (long long)cursor));
		resp_write_array_len(&c->out, m.b->n);
		keybuf_write(m.b, c);
	}
	keybuf_reset(m.b);
}

static __thread uint64_t t_rng;

/* xorshift64*: RANDOMKEY and the random collection commands only need a cheap, thread-local
 * spread. */
uint64_t rng_next(void)
{
	if (SPW_UNLIKELY(t_rng == 0))
		t_rng = (spw_mono_ns() ^ (uint64_t)(uintptr_t)&t_rng) | 1;
	t_rng ^= t_rng >> 12;
	t_rng ^= t_rng << 25;
	t_rng ^= t_rng >> 27;
	return t_rng * 2685821657736338717ULL;
}

/* Reservoir sampling over the keys of one batch: each seen key replaces the pick with
 * probability 1/seen, so the pick is uniform within the batch. */
struct pick_ctx {
	keybuf *b;
	long long seen;
};

static void pick_visit(void *ctx, const void *key, size_t klen, const hlog_value *v)
{
	struct pick_ctx *p = ctx;
	(void)v;
	p->seen++;
	if (p->seen == 1 || rng_next() % (uint64_t)p->seen == 0) {
		p->b->len = 0;
		p->b->n = 0;
		keybuf_push(p->b, key, klen);
	}
}

#define RANDOMKEY_PROBES 16
#define RANDOMKEY_BATCH 256

/* Note 6: a few random buckets first, then a forward walk from a random bucket, wrapping once. */
void cmd_randomkey(client *c)
{
	struct pick_ctx p = { .b = &t_keys };
	uint64_t end = hlog_scan_cursor_end(g_srv.store);

	if (end == 0 || hlog_key_count(g_srv.store) == 0) {
		reply_null(c);
		return;
	}
	int err = 0;
	for (int i = 0; i < RANDOMKEY_PROBES && p.seen == 0; i++) {
		hlog_scan(c->w->sess, rng_next() % end, 1, pick_visit, &p);
		if (!err)
			err = hlog_scan_error(c->w->sess);
	}

	uint64_t start = rng_next() % end, cur = start;
	bool wrapped = false;
	while (p.seen == 0) {
		uint64_t limit = wrapped ? start : end;
		if (cur >= limit)
			break;
		uint64_t next = hlog_scan(c->w->sess, cur, SPW_MIN((uint64_t)RANDOMKEY_BATCH, limit - cur),
		                          pick_visit, &p);
		if (!err)
			err = hlog_scan_error(c->w->sess);
		cur = next ? next : end;
		if (cur >= end && !wrapped) {
			wrapped = true;
			cur = 0;
		}
	}

	if (p.b->oom)
		reply_err_store(c, -ENOMEM);
	else if (p.seen == 0 && err)
		reply_err_store(c, err);   /* note 10: nothing found, and some chains could not be read */
	else if (p.seen == 0)
		reply_null(c);
	else
		keybuf_write(p.b, c);
	keybuf_reset(p.b);
}

/* ---------------- RENAME, RENAMENX, COPY ---------------- */

/* A copy of the source taken in the worker's scratch. */
struct src_copy {
	worker *w;
	const uint8_t *p;
	size_t len;
	int64_t expire_ms;
	uint8_t rtype;             /* a collection is copied as the one record it is today */
	int err;
};

static void read_copy(void *ctx, const hlog_value *v)
{
	struct src_copy *s = ctx;
	uint8_t *p = worker_scratch(s->w, v->len ? v->len : 1);
	if (!p) {
		s->err = -ENOMEM;
		return;
	}
	memcpy(p, v->ptr, v->len);
	s->p = p;
	s->len = v->len;
	s->expire_ms = v->expire_ms;
	s->rtype = v->rtype;
}

/* Read the source into scratch. HLOG_OK, HLOG_NOTFOUND, or a negative error. */
static int src_read(client *c, const resp_slice *key, struct src_copy *s)
{
	hlog_key k;
	s->w = c->w;
	s->err = 0;
	key_from_arg(&k, key);
	for (int tries = 0; tries < 64; tries++) {
		int rc = hlog_read(c->w->sess, &k, read_copy, s);
		if (rc == HLOG_OK && s->err)
			return s->err;
		if (rc != HLOG_OK || s->rtype != HLOG_T_HEAD || !coll_is_large(s->p, s->len))
			return rc;
		/* A large collection is copied as a small record: its cid stays its owner's
		 * (coll_large.c note 7); the expiry is the head's, read above. */
		rc = coll_large_flat(c, &k, &s->p, &s->len);
		if (rc != COLL_E_RESTART)
			return rc;
	}
	return -EAGAIN;
}

/* Create the destination from the copy unless it exists (one rmw, so atomic for the dest). */
struct dst_ctx {
	const struct src_copy *s;
	bool created;              /* output of plan */
};

static int dst_nx_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct dst_ctx *d = ctx;
	d->created = old == NULL;
	out->action = old ? HLOG_RMW_KEEP : HLOG_RMW_WRITE;
	out->new_len = d->s->len;
	out->expire_ms = d->s->expire_ms;
	out->rtype = d->s->rtype;
	return 0;
}

static void dst_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct dst_ctx *d = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, d->s->p, d->s->len);
}

static const hlog_rmw_ops dst_nx_ops = { dst_nx_plan, dst_fill };

/* Write the destination: replace it (keeping the source's TTL, dropping the old one) or create
 * it only if absent. 1 written, 0 refused, HLOG_PENDING (2), or a negative error. */
static int dst_write(client *c, const resp_slice *key, const struct src_copy *s, bool replace)
{
	hlog_key k;
	key_from_arg(&k, key);
	if (replace) {
		int rc = hlog_upsert_typed(c->w->sess, &k, s->p, s->len, s->expire_ms, s->rtype);
		return rc < 0 || rc == HLOG_PENDING ? rc : 1;
	}
	struct dst_ctx d = { .s = s };
	int rc = hlog_rmw(c->w->sess, &k, &dst_nx_ops, &d);
	if (rc < 0 || rc == HLOG_PENDING)
		return rc;
	return d.created;
}

static bool args_same(const resp_slice *a, const resp_slice *b)
{
	return a->len == b->len && memcmp(a->ptr, b->ptr, a->len) == 0;
}

/* Redis's renameGenericCommand. Not atomic across threads (note 8). c->resume.stage 1: the
 * destination was written before the command parked on deleting the source (note 9). */
static void rename_generic(client *c, bool nx)
{
	struct src_copy s;
	hlog_key k;
	int rc;

	if (c->resume.stage == 1)
		goto delete_source;
	if (reply_store_failed(c, command_keys_prefetch(c, 1, 2, 1)))
		return;
	if (args_same(&c->argv[1], &c->argv[2])) {
		rc = key_exists(c, &c->argv[1]);
		if (reply_store_failed(c, rc))
			return;
		if (rc == 0)
			reply_error(c, "ERR no such key");
		else if (nx)
			reply_int(c, 0);
		else
			reply_ok(c);
		return;
	}
	rc = src_read(c, &c->argv[1], &s);
	if (reply_store_failed(c, rc))
		return;
	if (rc == HLOG_NOTFOUND) {
		reply_error(c, "ERR no such key");
		return;
	}
	rc = dst_write(c, &c->argv[2], &s, !nx);
	if (reply_store_failed(c, rc))
		return;
	if (rc == 0) {
		reply_int(c, 0);
		return;
	}
delete_source:
	key_from_arg(&k, &c->argv[1]);
	rc = hlog_delete(c->w->sess, &k);
	if (SPW_UNLIKELY(rc == HLOG_PENDING))
		c->resume.stage = 1;
	if (reply_store_failed(c, rc))
		return;
	if (nx)
		reply_int(c, 1);
	else
		reply_ok(c);
}

void cmd_rename(client *c)
{
	rename_generic(c, false);
}

void cmd_renamenx(client *c)
{
	rename_generic(c, true);
}

/* Redis's copyCommand; only db 0 exists (note 1). */
void cmd_copy(client *c)
{
	struct src_copy s;
	bool replace = false;
	int rc;

	for (int j = 3; j < c->argc; j++) {
		const resp_slice *o = &c->argv[j];
		if (OPT_IS(o, "replace")) {
			replace = true;
		} else if (OPT_IS(o, "db") && c->argc - j - 1 >= 1) {
			long long db;
			if (!arg_ll(&c->argv[j + 1], &db)) {
				reply_err_not_int(c);
				return;
			}
			if (db < INT_MIN || db > INT_MAX) {
				reply_error(c, "ERR value is out of range, value must between -2147483648 and 2147483647");
				return;
			}
			if (db != 0) {
				reply_error(c, "ERR DB index is out of range");
				return;
			}
			j++;
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	if (args_same(&c->argv[1], &c->argv[2])) {
		reply_error(c, "ERR source and destination objects are the same");
		return;
	}
	if (reply_store_failed(c, command_keys_prefetch(c, 1, 2, 1)))
		return;
	rc = src_read(c, &c->argv[1], &s);
	if (reply_store_failed(c, rc))
		return;
	count_lookup(c, rc == HLOG_OK);
	if (rc == HLOG_NOTFOUND) {
		reply_int(c, 0);
		return;
	}
	rc = dst_write(c, &c->argv[2], &s, replace);
	if (!reply_store_failed(c, rc))
		reply_int(c, rc);
}

/* ---------------- DBSIZE, FLUSHDB, FLUSHALL ---------------- */

void cmd_dbsize(client *c)
{
	reply_int(c, (long long)hlog_key_count(g_srv.store));
}

/* Redis's getFlushCommandFlags: an optional SYNC or ASYNC, nothing else. Both flush at once here:
 * moving BeginAddress is already O(index) with no per-key work to hand to a thread. */
void cmd_flushall(client *c)
{
	if (c->argc > 2 || (c->argc == 2 && !OPT_IS(&c->argv[1], "sync") && !OPT_IS(&c->argv[1], "async"))) {
		reply_err_syntax(c);
		return;
	}
	if (!reply_store_failed(c, hlog_flush_all(c->w->sess)))
		reply_ok(c);
}

void cmd_flushdb(client *c)
{
	cmd_flushall(c);
}
