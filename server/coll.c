/*
 * coll.c - a collection command on the store: reading a collection record, and changing it by one
 * hlog_rmw. Every hash, list, set and sorted-set command goes through here, so WRONGTYPE, the
 * record type, the header (coll/coll.h) and the capacity rule are decided in one place.
 *
 * Design notes:
 *  1. The small layout (docs/ARCHITECTURE.md "Collections"): a collection is one head record
 *     (HLOG_T_HEAD), so a change rewrites the record: in place when it is mutable and the rounded
 *     size is unchanged (coll_value_len keeps the length while the payload fits), else a copy at
 *     the tail. Lists, sorted sets, listpack hashes and intset sets stay small whatever their
 *     size; a hashtable-encoded hash or set past coll-record-max becomes large (note 8).
 *  2. One command, one hlog_rmw: the edit runs inside plan, from the current value alone, and may
 *     run more than once (a concurrent writer won the race), so it builds its result afresh each
 *     time (into a buffer its caller owns) and records its reply's inputs in its own context, never
 *     accumulating. The reply is written after coll_rmw returns (cmd_string.c note 3's rule).
 *  3. Redis's order: WRONGTYPE comes from the lookup, after the argument checks the command makes
 *     before it (the caller parses its arguments first). A collection left empty is deleted, as
 *     Redis does; a change keeps the key's TTL unless the edit asks to drop it (drop_ttl: a STORE
 *     command's result replaces the key, as Redis's setKey).
 *  4. Pending reads: coll_read and coll_rmw are one store operation each, so HLOG_PENDING parks
 *     the client before anything changed (cmd_string.c note 8).
 *  5. The edit buffer (coll_buf_load): one growable buffer per thread that an edit rebuilds the
 *     payload in, so that a write allocates nothing in the steady state. coll_rmw frees it when a
 *     big collection grew it past COLL_BUF_KEEP; a pthread key frees it when the thread exits.
 *  6. Two ways to write. An edit that builds gives the whole new payload (out), which coll_fill
 *     copies into the record: with the build itself, two copies of the collection. An edit that
 *     patches gives only the new length and a patch (coll_write_lp: a planned listpack edit,
 *     coll/listpack.h lp_edit) that coll_fill runs on the record: in place (the record mutable,
 *     its rounded size unchanged, which coll_value_len's room makes the common case) it writes
 *     only what changes, an RPUSH the new entries, the end marker and the headers; otherwise it
 *     writes the new record from the old one in one copy. Both the patch and the count below are
 *     planned from old alone, like a build (note 2). The worker counts both kinds
 *     (coll_patches_in_place, coll_patches_copied in INFO), so tests can see which ran.
 *  7. A list's length: the listpack's count stops at 65535 ("unknown": then Redis walks the
 *     entries), so every list record written here carries its exact length after the payload
 *     (coll/coll.h COLL_F_COUNT). LLEN and a push's reply read the listpack's count below 65535
 *     and that one past it, and walk only a list written elsewhere (RESTORE), once: the next write
 *     stores the count. An edit that builds may leave e->count 0; coll_plan counts its output then
 *     (a walk only past 65534 entries, on a path that costs O(n) anyway).
 *  8. The large layout (coll_large.c): a read or a plan that meets a large head hands the command
 *     to coll_large.c (COLL_E_LARGE from plan: nothing written); so does a plan whose edit made a
 *     hashtable-encoded hash or set payload over coll-record-max (COLL_E_CONVERT: the conversion
 *     runs the edit again there). coll_large.c answers COLL_E_RESTART when the head changed under
 *     it, and the command runs again from the top, at most COLL_TRIES times.
 */
#include "server/server_int.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/listpack.h"

/* Runs of a command that met a concurrent change of a large head (COLL_E_RESTART) before it
 * gives up with -EAGAIN. */
#define COLL_TRIES 64

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

/* ---------------- the edit buffer (note 5) ---------------- */

#define COLL_BUF_KEEP (1u << 20)

static __thread lp_buf t_buf;
static __thread bool t_buf_keyed;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static pthread_key_t buf_key;

static void buf_destroy(void *b) { lp_buf_free(b); }
static void buf_key_create(void) { pthread_key_create(&buf_key, buf_destroy); }

int coll_buf_load(const coll_view *cur, lp_buf **out)
{
	const uint8_t *src = cur ? cur->p : lp_empty;
	size_t n = cur ? cur->used : sizeof(lp_empty);

	if (!t_buf_keyed) {
		pthread_once(&buf_once, buf_key_create);
		pthread_setspecific(buf_key, &t_buf);
		t_buf_keyed = true;
	}
	if (lp_buf_reserve(&t_buf, n) < 0)
		return -ENOMEM;
	memcpy(t_buf.p, src, n);
	t_buf.len = n;
	*out = &t_buf;
	return 0;
}

/* ---------------- reads ---------------- */

struct coll_read_ctx {
	int type;                 /* COLL_*, or 0: any type, strings included (TYPE, OBJECT) */
	coll_read_fn fn;
	void *ctx;
	int rc;
	bool large;               /* a large head: coll_large_read reads it (note 8) */
};

static void coll_read_cb(void *ctx, const hlog_value *v)
{
	struct coll_read_ctx *x = ctx;
	coll_view view = { 0, 0, v->ptr, v->len, -1, NULL };
	if (v->rtype == HLOG_T_STRING) {
		if (x->type) {
			x->rc = SPW_E_WRONGTYPE;
			return;
		}
	} else if (v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len)) {
		x->large = true;
		return;
	} else if (v->rtype != HLOG_T_HEAD || !coll_parse(v->ptr, v->len, &view)) {
		x->rc = SPW_E_CORRUPT;
		return;
	} else if (x->type && view.type != x->type) {
		x->rc = SPW_E_WRONGTYPE;
		return;
	}
	x->fn(x->ctx, &view, v);
}

int coll_read_hint(client *c, const resp_slice *key, int type, const coll_hint *h, coll_read_fn fn,
                   void *ctx)
{
	hlog_key k;
	int rc;
	key_from_arg(&k, key);
	for (int tries = 0; tries < COLL_TRIES; tries++) {
		struct coll_read_ctx x = { type, fn, ctx, 0, false };
		rc = hlog_read(c->w->sess, &k, coll_read_cb, &x);
		if (rc == HLOG_OK && x.large)
			rc = coll_large_read(c, &k, type, h, fn, ctx);
		else if (rc == HLOG_OK && x.rc)
			rc = x.rc;
		if (rc != COLL_E_RESTART)
			return rc;
	}
	return -EAGAIN;
}

int coll_read(client *c, const resp_slice *key, int type, coll_read_fn fn, void *ctx)
{
	return coll_read_hint(c, key, type, NULL, fn, ctx);
}

/* ---------------- HSCAN, SSCAN, ZSCAN's options ---------------- */

const char *coll_scan_opts(client *c, coll_scan *o)
{
	o->count = 10;
	o->pat = NULL;
	o->plen = 0;
	for (int i = 3; i < c->argc; i += 2) {
		const resp_slice *opt = &c->argv[i];
		bool has_arg = c->argc - i >= 2;
		if (OPT_IS(opt, "count") && has_arg) {
			if (!arg_ll(&c->argv[i + 1], &o->count))
				return "ERR value is not an integer or out of range";
			if (o->count < 1)
				return "ERR syntax error";
		} else if (OPT_IS(opt, "match") && has_arg) {
			o->pat = c->argv[i + 1].ptr;
			o->plen = c->argv[i + 1].len;
			if (o->plen == 1 && o->pat[0] == '*')
				o->pat = NULL;
		} else {
			return "ERR syntax error";
		}
	}
	return NULL;
}

/* ---------------- changes ---------------- */

static void lp_patch(const void *arg, const uint8_t *old, uint8_t *dst, bool in_place)
{
	lp_edit_apply(arg, old ? old : lp_empty, dst, in_place);
}

void coll_write_lp(coll_edit *e, int enc, const lp_edit *pe)
{
	e->action = COLL_WRITE;
	e->enc = enc;
	e->out = NULL;
	e->out_len = pe->new_len;
	e->patch = lp_patch;
	e->patch_arg = pe;
}

static int coll_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	coll_edit *e = ctx;
	coll_view view;
	int rc;

	e->found = old != NULL;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	e->count = 0;
	out->action = HLOG_RMW_KEEP;
	if (old) {
		if (old->rtype == HLOG_T_STRING)
			return SPW_E_WRONGTYPE;
		if (old->rtype == HLOG_T_HEAD && coll_is_large(old->ptr, old->len))
			return COLL_E_LARGE;   /* note 8 */
		if (old->rtype != HLOG_T_HEAD || !coll_parse(old->ptr, old->len, &view))
			return SPW_E_CORRUPT;
		if (view.type != e->type)
			return SPW_E_WRONGTYPE;
	} else if (!e->create) {
		return 0;
	}
	if ((rc = e->fn(e, old ? &view : NULL)) < 0)
		return rc;
	if (e->action == COLL_DELETE) {
		out->action = old ? HLOG_RMW_DELETE : HLOG_RMW_KEEP;
	} else if (e->action == COLL_WRITE) {
		size_t need = e->out_len;
		if (coll_large_wanted(e->type, e->enc, need))
			return COLL_E_CONVERT;   /* note 8 */
		if (e->type == COLL_LIST) {   /* note 7 */
			if (!e->count)
				e->count = lp_count(e->out);
			need += COLL_COUNT_BYTES;
		}
		if (need > UINT32_MAX)
			return SPW_E_TOO_BIG;
		out->action = HLOG_RMW_WRITE;
		out->rtype = HLOG_T_HEAD;
		out->new_len = coll_value_len(need, old ? old->len : 0);
		out->expire_ms = old && !e->drop_ttl ? old->expire_ms : HLOG_NO_EXPIRY;
	}
	return 0;
}

static void coll_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	coll_edit *e = ctx;

	coll_hdr_write(dst, e->type, e->enc, e->out_len);
	if (e->patch) {
		e->patch(e->patch_arg, old ? old->ptr + COLL_HDR : NULL, dst + COLL_HDR, in_place);
		if (in_place)
			e->c->w->stats.coll_patch_inplace++;
		else
			e->c->w->stats.coll_patch_copy++;
	} else if (e->out_len) {
		memmove(dst + COLL_HDR, e->out, e->out_len);
	}
	if (e->type == COLL_LIST) {
		dst[2] = COLL_F_COUNT;
		lp_u32_write(dst + COLL_HDR + e->out_len, e->count);
	}
}

static const hlog_rmw_ops coll_ops = { coll_plan, coll_fill };

int coll_rmw(client *c, const resp_slice *key, coll_edit *e)
{
	hlog_key k;
	key_from_arg(&k, key);
	e->c = c;
	int rc = -EAGAIN;
	for (int tries = 0; tries < COLL_TRIES; tries++) {
		rc = hlog_rmw(c->w->sess, &k, &coll_ops, e);
		if (rc == COLL_E_LARGE)
			rc = coll_large_rmw(c, &k, e);
		else if (rc == COLL_E_CONVERT)
			rc = coll_large_convert(c, &k, e);
		if (rc != COLL_E_RESTART)
			break;
		rc = -EAGAIN;
	}
	if (t_buf.cap > COLL_BUF_KEEP)
		lp_buf_free(&t_buf);
	return rc;
}

/* ---------------- listpack parts with spare capacity (log/group.c note 9) ---------------- */

size_t coll_part_lp_len(const hlog_value *v)
{
	if (v->len < LP_EMPTY_BYTES)
		return v->len;
	size_t n = lp_bytes(v->ptr);
	return n <= v->len ? n : v->len;
}

static int part_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	const hlog_group_part *p = ctx;
	(void)old;
	out->action = HLOG_RMW_WRITE;
	out->new_len = p->cap > p->len ? p->cap : p->len;
	out->rtype = HLOG_T_PART;
	out->expire_ms = HLOG_NO_EXPIRY;
	return 0;
}

static void part_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	const hlog_group_part *p = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, p->val, p->len);
	if (p->cap > p->len)
		memset(dst + p->len, 0, p->cap - p->len);
}

static const hlog_rmw_ops part_ops = { part_plan, part_fill };

int coll_part_put(client *c, const hlog_group_part *p)
{
	return hlog_rmw(c->w->sess, &p->key, &part_ops, (void *)p);
}

int coll_group_write(client *c, const hlog_key *k, const hlog_rmw_ops *ops, void *ctx, hlog_group_part *parts,
                     size_t n)
{
	int rc = hlog_group_rmw(c->w->sess, k, ops, ctx, parts, n);
	if (rc != SPW_E_TOO_BIG)
		return rc;
	/* The spare room may be what made the group too big: without it, it may fit. */
	bool spare = false;
	for (size_t i = 0; i < n; i++)
		if (parts[i].cap > parts[i].len) {
			parts[i].cap = 0;
			spare = true;
		}
	return spare ? hlog_group_rmw(c->w->sess, k, ops, ctx, parts, n) : rc;
}
