/*
 * cmd_hash.c - the hash commands (Redis 7.0's t_hash.c): HSET HMSET HSETNX HGET HMGET HDEL HEXISTS
 * HLEN HSTRLEN HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN.
 *
 * Design notes:
 *  1. A hash is one collection record (server/coll.c): the header, then a listpack of field,
 *     value pairs in the order fields were first set (coll/hash.h), whatever its size. Small
 *     layout only: every change copies and rewrites the whole listpack, so it costs O(size of the
 *     hash) bytes moved, and a hash is bounded by the log's largest record (a write past it
 *     answers the store's too-big error and changes nothing).
 *  2. Encoding, as OBJECT ENCODING reports it: the header's enc moves from listpack to hashtable
 *     by Redis 7.0's rules, one way: any field or value argument of HSET / HMSET longer than
 *     hash-max-listpack-value (hashTypeTryConversion checks them all before setting any), the pair
 *     HSETNX adds, the field or new value of HINCRBY / HINCRBYFLOAT (hashTypeSet's own check), or
 *     more than hash-max-listpack-entries fields after a set. The bytes stay a listpack: only
 *     what depends on the encoding in Redis follows it (HSCAN, note 5).
 *  3. Order: every reply walks the listpack, which is Redis's order for a listpack hash. For a
 *     hashtable-encoded one Redis answers in dict order, which is not reproduced (tests compare
 *     those replies sorted).
 *  4. Reads reply from the record inside coll_read's callback (under the record's shared lock, no
 *     copy). Writes rebuild the listpack from the current payload in the thread's edit buffer each
 *     time the edit runs (coll.c note 2) and reply after coll_rmw returns, from what the edit left
 *     in its context; errors about the stored value (HINCRBY's "hash value is not an integer")
 *     leave the key as it was. Checks come in Redis's order: arguments, then the lookup
 *     (WRONGTYPE), then the stored values. keyspace hits and misses count as lookupKeyRead counts
 *     them: read commands only, a key of another type being a hit.
 *  5. HSCAN: a hash Redis keeps as a listpack is answered whole with cursor 0 whatever the cursor,
 *     as Redis does. A hashtable-encoded one is walked by position: the cursor is the index of the
 *     next field, a call visits COUNT fields (MATCH filters those, so a call may return fewer, or
 *     none) and answers 0 once it reaches the end; a cursor past the end answers 0 and nothing.
 *     A walk while the hash changes may miss or repeat fields (deleting a field before the cursor
 *     shifts the rest down): weaker than the guarantee of Redis's dict cursor, until the large
 *     layout brings buckets.
 *  6. HRANDFIELD: a positive count below the size picks distinct fields by selection sampling, so
 *     they come in listpack order as Redis's lpRandomPairsUnique gives them; a negative count
 *     picks with replacement through an index of field offsets in the worker's scratch; a count
 *     at or past the size answers the whole hash.
 *  7. Pending reads: every command is one coll_read or one coll_rmw, so HLOG_PENDING parks the
 *     client before anything changed (coll.c note 4) and the re-run starts over.
 *  8. The stored listpack is checked shallowly (lp_validate without deep: header, length, end
 *     marker) before it is walked; records come from this server and the log checks them.
 *  9. Writes of one field are patched (coll.c note 6), not rebuilt: HSET and HMSET of one pair,
 *     HSETNX, HINCRBY, HINCRBYFLOAT and HDEL of one field plan one listpack edit (hash_patch_set,
 *     hdel_edit): a new field's pair appended at the end (in place: written over the end marker),
 *     a value replaced where it stands (in place and of the same encoded size: only its bytes
 *     written), a pair removed; a value set to what it is writes nothing, unless a long argument
 *     or hash-max-listpack-entries makes a listpack a hashtable (Redis converts all the same). Several pairs or fields in one command build the listpack in the
 *     edit buffer as note 4 says, since each change moves the offsets of the next.
 * 10. A large hash (server/coll_large.c): HGET, HMGET, HEXISTS, HSTRLEN read the buckets of their
 *     fields, HLEN the head's count; every write here is a point write on the buckets of its
 *     fields; the rest (HGETALL, HKEYS, HVALS, HRANDFIELD) get the whole hash assembled in
 *     bucket order. The code below sees a listpack either way. HSCAN walks a large hash by
 *     buckets (coll_large.c note 8): the cursor is the next bucket, each call answers whole
 *     buckets, about COUNT fields, so no field present throughout is missed.
 */
#include "server/server_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/hash.h"
#include "coll/listpack.h"

/* hash-max-listpack-entries / -value, CONFIG SET-able (config.c note 6: relaxed loads). */
#define HASH_MAX_LISTPACK_ENTRIES __atomic_load_n(&g_cfg.hash_max_listpack_entries, __ATOMIC_RELAXED)
#define HASH_MAX_LISTPACK_VALUE __atomic_load_n(&g_cfg.hash_max_listpack_value, __ATOMIC_RELAXED)

/* ---------------- shared helpers ---------------- */

static bool hash_payload_ok(const coll_view *v)
{
	return lp_validate(v->p, v->used, false, NULL, NULL);
}

/* Write the entry at p as a bulk string (an int entry as its base-10 text). */
static void reply_entry(client *c, const uint8_t *p)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s = lp_entry_str(p, buf, &len);
	reply_bulk(c, s, len);
}

/* A read command's body: v is the hash (v->p its listpack). */
typedef void hash_read_fn(client *c, const coll_view *v, void *arg);

struct hread_ctx {
	client *c;
	hash_read_fn *fn;
	void *arg;
};

static void hread_cb(void *ctx, const coll_view *view, const hlog_value *v)
{
	struct hread_ctx *x = ctx;
	(void)v;
	if (!hash_payload_ok(view))
		reply_err_store(x->c, SPW_E_CORRUPT);
	else
		x->fn(x->c, view, x->arg);
}

/* The lookup of a read command on argv[1], counted as lookupKeyRead (note 4): 1 when fn ran (and
 * replied), 0 when the key is missing (the caller replies), -1 when an error was replied or the
 * client parked. */
static int hash_lookup_hint(client *c, hash_read_fn *fn, void *arg, const coll_hint *h)
{
	struct hread_ctx x = { c, fn, arg };
	int rc = coll_read_hint(c, &c->argv[1], COLL_HASH, h, hread_cb, &x);
	if (rc == HLOG_PENDING) {
		reply_pending(c);
		return -1;
	}
	count_lookup(c, rc != HLOG_NOTFOUND);
	if (rc == HLOG_NOTFOUND)
		return 0;
	return reply_store_failed(c, rc) ? -1 : 1;
}

static int hash_lookup(client *c, hash_read_fn *fn, void *arg)
{
	return hash_lookup_hint(c, fn, arg, NULL);
}

/* A large hash (note 10): the buckets of the fields argv[2..], or its count. */
static const coll_hint hint_fields = { .mode = COLL_HINT_MEMBERS, .first = 2, .step = 1 };
static const coll_hint hint_count = { .mode = COLL_HINT_COUNT, .first = 0, .step = 0 };

/* Start an edit's fn: the current listpack (checked, note 8) or an empty one in the edit
 * buffer. */
static int hash_load(const coll_view *cur, lp_buf **b /* out */)
{
	if (cur && !hash_payload_ok(cur))
		return SPW_E_CORRUPT;
	return coll_buf_load(cur, b);
}

/* End an edit's fn that changed b: the entries rule of note 2, and an empty hash deleted. */
static int hash_store(coll_edit *e, lp_buf *b, int enc)
{
	uint32_t n = hash_lp_len(b->p);
	if (n == 0) {
		e->action = COLL_DELETE;
		return 0;
	}
	if (enc == CENC_LISTPACK && n > HASH_MAX_LISTPACK_ENTRIES)
		enc = CENC_HASHTABLE;
	e->action = COLL_WRITE;
	e->enc = enc;
	e->out = b->p;
	e->out_len = b->len;
	return 0;
}

static int hdel_edit(coll_edit *e, const coll_view *cur);

/* Run the edit fn (context arg) on argv[1]: true when it went through and the caller replies. */
static bool hash_edit(client *c, int (*fn)(coll_edit *, const coll_view *), void *arg, bool create)
{
	coll_edit e = { .type = COLL_HASH, .create = create, .fn = fn, .arg = arg };
	/* Every write here is a point write (note 10): its fields are argv[2], argv[4], ... for the
	 * commands that take pairs or one field and a value, argv[2..] for HDEL. */
	bool del = fn == hdel_edit;
	e.hint_first = 2;
	e.hint_step = del ? 1 : 2;
	return !reply_store_failed(c, coll_rmw(c, &c->argv[1], &e));
}

static inline bool hash_too_long(size_t len) { return len > HASH_MAX_LISTPACK_VALUE; }

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

/* Note 9: plan setting field f to v in cur (NULL: a new hash) as the edit pe, encoding enc moving
 * by note 2's entries rule. 1 when the field is added, 0 when its value is replaced, or an
 * error. The new entries are encoded in the worker's scratch. */
static int hash_patch_set(coll_edit *e, const coll_view *cur, const resp_slice *f, const void *v,
	size_t vlen, int enc, lp_edit *pe)
{
	const uint8_t *lp = cur ? cur->p : lp_empty, *vp;
	uint8_t *s;
	size_t n;
	int rc;

	if (cur && !hash_payload_ok(cur))
		return SPW_E_CORRUPT;
	if (!(s = worker_scratch(e->c->w, f->len + vlen + 2 * LP_ENTRY_EXTRA)))
		return -ENOMEM;
	lp_edit_init(pe, lp);
	vp = hash_lp_value(lp, f->ptr, f->len);
	/* A listpack-encoded hash has at most 128 fields, so its count is known (no walk). */
	if (enc == CENC_LISTPACK && hash_lp_len(lp) + !vp > HASH_MAX_LISTPACK_ENTRIES)
		enc = CENC_HASHTABLE;
	if (vp) {
		n = lp_entry_encode(s, v, vlen);
		/* The same value in the same encoding: nothing to write (action KEEP). A listpack
		 * that a long argument or the entries limit turns into a hashtable is written all
		 * the same: Redis converts it though the value is the same (hashTypeTryConversion
		 * before, hashTypeSet's length and count checks after). */
		if (n == lp_entry_size(vp) && memcmp(s, vp, n) == 0 && enc == cur->enc)
			return 0;
		rc = lp_edit_splice(pe, (size_t)(vp - lp), lp_entry_size(vp), s, n, 0);
	} else {
		n = lp_entry_encode(s, f->ptr, f->len);
		n += lp_entry_encode(s + n, v, vlen);
		rc = lp_edit_splice(pe, lp_bytes(lp) - 1, 0, s, n, 2);
	}
	if (rc < 0)
		return rc;
	coll_write_lp(e, enc, pe);
	return !vp;
}

/* ---------------- HSET, HMSET, HSETNX ---------------- */

struct hset_ctx {
	bool long_arg;             /* a field or value past hash-max-listpack-value (note 2) */
	long long added;           /* out */
	lp_edit pe;                /* one pair: the planned edit (note 9) */
};

static int hset_edit(coll_edit *e, const coll_view *cur)
{
	struct hset_ctx *x = e->arg;
	const resp_slice *a = e->c->argv;
	int enc = cur ? cur->enc : CENC_LISTPACK, rc;
	lp_buf *b;

	if (x->long_arg)
		enc = CENC_HASHTABLE;
	if (e->c->argc == 4) {
		if ((rc = hash_patch_set(e, cur, &a[2], a[3].ptr, a[3].len, enc, &x->pe)) < 0)
			return rc;
		x->added = rc;
		return 0;
	}
	if ((rc = hash_load(cur, &b)) < 0)
		return rc;
	x->added = 0;
	for (int i = 2; i + 1 < e->c->argc; i += 2) {
		if ((rc = hash_lp_set(b, a[i].ptr, a[i].len, a[i + 1].ptr, a[i + 1].len)) < 0)
			return rc;
		x->added += rc;
	}
	return hash_store(e, b, enc);
}

/* HSET and HMSET: the same edit; HSET answers how many fields were added, HMSET OK. */
static void hset_generic(client *c, bool hmset)
{
	struct hset_ctx x = { .long_arg = false };

	if (c->argc % 2 == 1) {
		reply_err_arity(c);
		return;
	}
	for (int i = 2; i < c->argc && !x.long_arg; i++)
		x.long_arg = hash_too_long(c->argv[i].len);
	if (!hash_edit(c, hset_edit, &x, true))
		return;
	if (hmset)
		reply_ok(c);
	else
		reply_int(c, x.added);
}

void cmd_hset(client *c) { hset_generic(c, false); }
void cmd_hmset(client *c) { hset_generic(c, true); }

static int hsetnx_edit(coll_edit *e, const coll_view *cur)
{
	struct hset_ctx *x = e->arg;
	const resp_slice *f = &e->c->argv[2], *v = &e->c->argv[3];
	int enc = cur ? cur->enc : CENC_LISTPACK, rc;

	x->added = 0;
	if (cur && !hash_payload_ok(cur))
		return SPW_E_CORRUPT;
	if (cur && hash_lp_value(cur->p, f->ptr, f->len)) {
		e->action = COLL_KEEP;
		return 0;
	}
	if (hash_too_long(f->len) || hash_too_long(v->len))
		enc = CENC_HASHTABLE;
	if ((rc = hash_patch_set(e, cur, f, v->ptr, v->len, enc, &x->pe)) < 0)
		return rc;
	x->added = 1;
	return 0;
}

void cmd_hsetnx(client *c)
{
	struct hset_ctx x = { .long_arg = false };
	if (hash_edit(c, hsetnx_edit, &x, true))
		reply_int(c, x.added);
}

/* ---------------- HDEL ---------------- */

struct hdel_ctx {
	long long deleted;         /* out */
	lp_edit pe;                /* one field: the planned edit (note 9) */
};

/* One field: its pair removed by a planned edit (note 9); the last one deletes the hash. */
static int hdel_one(coll_edit *e, const coll_view *cur, struct hdel_ctx *x)
{
	const resp_slice *f = &e->c->argv[2];
	const uint8_t *p = lp_first(cur->p);
	size_t n;
	int rc;

	if (p)
		p = lp_find(cur->p, p, f->ptr, f->len, 1);
	if (!p) {
		e->action = COLL_KEEP;
		return 0;
	}
	x->deleted = 1;
	if (hash_lp_len(cur->p) == 1) {
		e->action = COLL_DELETE;
		return 0;
	}
	n = lp_entry_size(p);
	n += lp_entry_size(p + n);
	lp_edit_init(&x->pe, cur->p);
	if ((rc = lp_edit_splice(&x->pe, (size_t)(p - cur->p), n, NULL, 0, -2)) < 0)
		return rc;
	coll_write_lp(e, cur->enc, &x->pe);
	return 0;
}

static int hdel_edit(coll_edit *e, const coll_view *cur)
{
	struct hdel_ctx *x = e->arg;
	lp_buf *b;
	int rc;

	x->deleted = 0;
	if (!hash_payload_ok(cur))
		return SPW_E_CORRUPT;
	if (e->c->argc == 3)
		return hdel_one(e, cur, x);
	if ((rc = hash_load(cur, &b)) < 0)
		return rc;
	for (int i = 2; i < e->c->argc; i++)
		x->deleted += hash_lp_del(b, e->c->argv[i].ptr, e->c->argv[i].len);
	if (x->deleted == 0) {
		e->action = COLL_KEEP;
		return 0;
	}
	return hash_store(e, b, cur->enc);
}

/* A write lookup in Redis (lookupKeyWriteOrReply): a missing key answers 0, no hit or miss. */
void cmd_hdel(client *c)
{
	struct hdel_ctx x = { .deleted = 0 };
	if (hash_edit(c, hdel_edit, &x, false))
		reply_int(c, x.deleted);
}

/* ---------------- HINCRBY, HINCRBYFLOAT ---------------- */

struct hincr_ctx {
	lp_edit pe;                /* the planned edit (note 9) */
	long long incr;
	long double fincr;
	const char *err;           /* out: an error about the stored value (note 4) */
	long long result;          /* out: HINCRBY */
	size_t len;                /* out: HINCRBYFLOAT's result in buf */
	char buf[SPW_LD_MAX_CHARS];
};

/* The field's current value entry (NULL when absent) of a checked payload. */
static int hincr_current(const coll_view *cur, const resp_slice *f, lp_val *v /* out */, bool *found)
{
	*found = false;
	if (!cur)
		return 0;
	if (!hash_payload_ok(cur))
		return SPW_E_CORRUPT;
	const uint8_t *p = hash_lp_value(cur->p, f->ptr, f->len);
	if (p) {
		lp_get(p, v);
		*found = true;
	}
	return 0;
}

/* Store the new value text of HINCRBY*'s field (hashTypeSet, with its length check). */
static int hincr_store(coll_edit *e, const coll_view *cur, const char *val, size_t vlen)
{
	const resp_slice *f = &e->c->argv[2];
	struct hincr_ctx *x = e->arg;
	int enc = cur ? cur->enc : CENC_LISTPACK, rc;

	if (hash_too_long(f->len) || hash_too_long(vlen))
		enc = CENC_HASHTABLE;
	rc = hash_patch_set(e, cur, f, val, vlen, enc, &x->pe);
	return rc < 0 ? rc : 0;
}

static int hincrby_edit(coll_edit *e, const coll_view *cur)
{
	struct hincr_ctx *x = e->arg;
	long long v = 0;
	lp_val cv;
	bool found;
	char buf[LP_INTBUF_SIZE];
	int rc;

	x->err = NULL;
	if ((rc = hincr_current(cur, &e->c->argv[2], &cv, &found)) < 0)
		return rc;
	if (found && cv.is_int)
		v = cv.v;
	else if (found && !spw_parse_ll((const char *)cv.s, cv.len, &v))
		x->err = "ERR hash value is not an integer";
	if (!x->err && ((x->incr < 0 && v < 0 && x->incr < LLONG_MIN - v) ||
	                (x->incr > 0 && v > 0 && x->incr > LLONG_MAX - v)))
		x->err = "ERR increment or decrement would overflow";
	if (x->err) {
		e->action = COLL_KEEP;
		return 0;
	}
	x->result = v + x->incr;
	return hincr_store(e, cur, buf, spw_fmt_ll(buf, x->result));
}

void cmd_hincrby(client *c)
{
	struct hincr_ctx x;
	if (!arg_ll(&c->argv[3], &x.incr)) {
		reply_err_not_int(c);
		return;
	}
	if (!hash_edit(c, hincrby_edit, &x, true))
		return;
	if (x.err)
		reply_error(c, x.err);
	else
		reply_int(c, x.result);
}

static int hincrbyfloat_edit(coll_edit *e, const coll_view *cur)
{
	struct hincr_ctx *x = e->arg;
	long double v = 0;
	lp_val cv;
	bool found;
	int rc;

	x->err = NULL;
	if ((rc = hincr_current(cur, &e->c->argv[2], &cv, &found)) < 0)
		return rc;
	if (found && cv.is_int)
		v = (long double)cv.v;
	else if (found && !spw_parse_ld(cv.s, cv.len, &v))
		x->err = "ERR hash value is not a float";
	if (!x->err) {
		v += x->fincr;
		if (isnan(v) || isinf(v))
			x->err = "ERR increment would produce NaN or Infinity";
	}
	if (x->err) {
		e->action = COLL_KEEP;
		return 0;
	}
	if ((x->len = spw_fmt_ld(x->buf, sizeof(x->buf), v)) == 0)
		return SPW_E_NOT_FLOAT;
	return hincr_store(e, cur, x->buf, x->len);
}

void cmd_hincrbyfloat(client *c)
{
	struct hincr_ctx x;
	if (!spw_parse_ld(c->argv[3].ptr, c->argv[3].len, &x.fincr)) {
		reply_error(c, "ERR value is not a valid float");
		return;
	}
	if (isnan(x.fincr) || isinf(x.fincr)) {
		reply_error(c, "ERR value is NaN or Infinity");
		return;
	}
	if (!hash_edit(c, hincrbyfloat_edit, &x, true))
		return;
	if (x.err)
		reply_error(c, x.err);
	else
		reply_bulk(c, x.buf, x.len);
}

/* ---------------- HGET, HMGET, HEXISTS, HLEN, HSTRLEN ---------------- */

static void hget_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	(void)arg;
	const uint8_t *p = hash_lp_value(lp, c->argv[2].ptr, c->argv[2].len);
	if (p)
		reply_entry(c, p);
	else
		reply_null(c);
}

void cmd_hget(client *c)
{
	if (hash_lookup_hint(c, hget_body, NULL, &hint_fields) == 0)
		reply_null(c);
}

static void hmget_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v ? v->p : NULL;
	(void)arg;
	resp_write_array_len(&c->out, c->argc - 2);
	for (int i = 2; i < c->argc; i++) {
		const uint8_t *p = lp ? hash_lp_value(lp, c->argv[i].ptr, c->argv[i].len) : NULL;
		if (p)
			reply_entry(c, p);
		else
			reply_null(c);
	}
}

void cmd_hmget(client *c)
{
	if (hash_lookup_hint(c, hmget_body, NULL, &hint_fields) == 0)
		hmget_body(c, NULL, NULL);
}

static void hexists_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	(void)arg;
	reply_int(c, hash_lp_value(lp, c->argv[2].ptr, c->argv[2].len) != NULL);
}

void cmd_hexists(client *c)
{
	if (hash_lookup_hint(c, hexists_body, NULL, &hint_fields) == 0)
		reply_int(c, 0);
}

static void hlen_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	(void)arg;
	reply_int(c, v->large ? (long long)v->large->count : hash_lp_len(lp));
}

void cmd_hlen(client *c)
{
	if (hash_lookup_hint(c, hlen_body, NULL, &hint_count) == 0)
		reply_int(c, 0);
}

/* The length of the value as Redis replies it: an int entry's digits. */
static void hstrlen_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	(void)arg;
	const uint8_t *p = hash_lp_value(lp, c->argv[2].ptr, c->argv[2].len);
	char buf[LP_INTBUF_SIZE];
	size_t len = 0;
	lp_val e;
	if (p) {
		lp_get(p, &e);
		lp_val_str(&e, buf, &len);
	}
	reply_int(c, (long long)len);
}

void cmd_hstrlen(client *c)
{
	if (hash_lookup_hint(c, hstrlen_body, NULL, &hint_fields) == 0)
		reply_int(c, 0);
}

/* ---------------- HKEYS, HVALS, HGETALL ---------------- */

enum { HALL_KEYS = 1, HALL_VALS = 2 };

static void hall_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	int what = (int)(intptr_t)arg;
	uint32_t n = hash_lp_len(lp);
	if (what == (HALL_KEYS | HALL_VALS))
		resp_write_map_len(&c->out, n);
	else
		resp_write_array_len(&c->out, n);
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p))) {
		if (what & HALL_KEYS)
			reply_entry(c, p);
		if (what & HALL_VALS)
			reply_entry(c, lp_next(lp, p));
	}
}

/* Redis's genericHgetallCommand: a missing key is an empty map (HGETALL) or array. */
static void hall_generic(client *c, int what)
{
	if (hash_lookup(c, hall_body, (void *)(intptr_t)what) != 0)
		return;
	if (what == (HALL_KEYS | HALL_VALS))
		resp_write_map_len(&c->out, 0);
	else
		resp_write_array_len(&c->out, 0);
}

void cmd_hkeys(client *c) { hall_generic(c, HALL_KEYS); }
void cmd_hvals(client *c) { hall_generic(c, HALL_VALS); }
void cmd_hgetall(client *c) { hall_generic(c, HALL_KEYS | HALL_VALS); }

/* ---------------- HRANDFIELD ---------------- */

struct hrand_ctx {
	bool has_count, withvalues;
	long count;
};

/* One field (and its value) of a HRANDFIELD reply: a pair is an array of two in RESP3. */
static void hrand_pair(client *c, const uint8_t *lp, const uint8_t *f, bool withvalues)
{
	if (withvalues && c->proto > 2)
		resp_write_array_len(&c->out, 2);
	reply_entry(c, f);
	if (withvalues)
		reply_entry(c, lp_next(lp, f));
}

/* count picks with replacement (note 6). */
static void hrand_repeat(client *c, const uint8_t *lp, uint32_t n, unsigned long count, bool wv)
{
	uint32_t *offs = (uint32_t *)worker_scratch(c->w, (size_t)n * sizeof(uint32_t));
	uint32_t i = 0;
	if (!offs) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p)))
		offs[i++] = (uint32_t)(p - lp);
	resp_write_array_len(&c->out, wv && c->proto == 2 ? (long long)count * 2 : (long long)count);
	while (count--)
		hrand_pair(c, lp, lp + offs[rng_next() % n], wv);
}

static void hrand_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	struct hrand_ctx *x = arg;
	uint32_t n = hash_lp_len(lp);
	bool wv = x->withvalues;

	if (!x->has_count) {
		reply_entry(c, lp_seek(lp, 2 * (long)(rng_next() % n)));
		return;
	}
	unsigned long count = x->count >= 0 ? (unsigned long)x->count : 0UL - (unsigned long)x->count;
	if (count == 0) {
		resp_write_array_len(&c->out, 0);
	} else if (x->count < 0 || count == 1) {
		hrand_repeat(c, lp, n, count, wv);
	} else {
		/* Distinct fields: all of them, or count chosen by selection sampling in order. */
		unsigned long want = count < n ? count : n, left = n;
		resp_write_array_len(&c->out, wv && c->proto == 2 ? (long long)want * 2 : (long long)want);
		for (const uint8_t *p = lp_first(lp); p && want; p = lp_next(lp, lp_next(lp, p)), left--) {
			if (rng_next() % left < want) {
				hrand_pair(c, lp, p, wv);
				want--;
			}
		}
	}
}

/* Redis's hrandfieldCommand: the count and WITHVALUES are checked before the lookup. */
void cmd_hrandfield(client *c)
{
	struct hrand_ctx x = { c->argc >= 3, false, 0 };
	long long l;

	if (x.has_count) {
		if (!arg_ll(&c->argv[2], &l)) {
			reply_err_not_int(c);
			return;
		}
		if (l < -LONG_MAX) {
			reply_errorf(c, "ERR value is out of range, value must between %ld and %ld", -LONG_MAX,
			             LONG_MAX);
			return;
		}
		if (c->argc > 4 || (c->argc == 4 && !OPT_IS(&c->argv[3], "withvalues"))) {
			reply_err_syntax(c);
			return;
		}
		x.withvalues = c->argc == 4;
		if (x.withvalues && (l < -LONG_MAX / 2 || l > LONG_MAX / 2)) {
			reply_error(c, "ERR value is out of range");
			return;
		}
		x.count = (long)l;
	}
	if (hash_lookup(c, hrand_body, &x) != 0)
		return;
	if (x.has_count)
		resp_write_array_len(&c->out, 0);
	else
		reply_null(c);
}

/* ---------------- HSCAN ---------------- */

struct hscan_ctx {
	unsigned long long cursor;
	long long count;
	const char *pat;
	size_t plen;
	bool use_pat;
	const char *err;           /* an option error, replied once the key is found (Redis's order) */
	const coll_hint *hint;     /* a large hash's buckets (note 10): hint->next is the cursor */
};

static bool hscan_match(const struct hscan_ctx *x, const uint8_t *f)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	if (!x->use_pat)
		return true;
	const char *s = lp_entry_str(f, buf, &len);
	return spw_glob_match(x->pat, x->plen, s, len, 0);
}

static void hscan_body(client *c, const coll_view *v, void *arg)
{
	const uint8_t *lp = v->p;
	struct hscan_ctx *x = arg;
	unsigned long long n = hash_lp_len(lp), from = 0, to = n, next = 0;

	if (x->err) {
		reply_error(c, x->err);
		return;
	}
	if (v->large) {                  /* whole buckets (note 10) */
		next = x->hint->next;
	} else if (v->enc != CENC_LISTPACK) {   /* by position (note 5) */
		/* a large hash's cursor (COLL_SCAN_LARGE) met by a small one: from the start */
		from = x->cursor & COLL_SCAN_LARGE ? 0 : x->cursor < n ? x->cursor : n;
		to = n - from > (unsigned long long)x->count ? from + (unsigned long long)x->count : n;
		next = to < n ? to : 0;
	}
	const uint8_t *first = from < n ? lp_seek(lp, (long)(2 * from)) : NULL, *p;
	unsigned long long i, hits = 0;
	for (p = first, i = from; p && i < to; p = lp_next(lp, lp_next(lp, p)), i++)
		hits += hscan_match(x, p);
	char cbuf[24];
	resp_write_array_len(&c->out, 2);
	reply_bulk(c, cbuf, spw_fmt_ll(cbuf, (long long)next));
	resp_write_array_len(&c->out, (long long)hits * 2);
	for (p = first, i = from; p && i < to; p = lp_next(lp, lp_next(lp, p)), i++) {
		if (hscan_match(x, p)) {
			reply_entry(c, p);
			reply_entry(c, lp_next(lp, p));
		}
	}
}

/* The options after the cursor, as Redis's scanGenericCommand takes them for a key's scan (no
 * TYPE). An error is kept in x->err: Redis parses them only once the key is found. */
static void hscan_opts(client *c, struct hscan_ctx *x)
{
	coll_scan o;
	x->err = coll_scan_opts(c, &o);
	x->count = o.count;
	x->pat = o.pat;
	x->plen = o.plen;
	x->use_pat = o.pat != NULL;
}

void cmd_hscan(client *c)
{
	struct hscan_ctx x = { .count = 10 };
	char cbuf[24];

	if (!scan_cursor_parse(&c->argv[2], &x.cursor)) {
		reply_error(c, "ERR invalid cursor");
		return;
	}
	hscan_opts(c, &x);
	coll_hint h = { .mode = COLL_HINT_SCAN, .cursor = x.cursor, .count = x.count };
	x.hint = &h;
	if (hash_lookup_hint(c, hscan_body, &x, &h) != 0)
		return;
	resp_write_array_len(&c->out, 2);   /* Redis's shared.emptyscan */
	reply_bulk(c, cbuf, spw_fmt_ll(cbuf, 0));
	resp_write_array_len(&c->out, 0);
}
