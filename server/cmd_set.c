/*
 * cmd_set.c - the single-key set commands (Redis 7.0's t_set.c): SADD SREM SCARD SISMEMBER
 * SMISMEMBER SMEMBERS SRANDMEMBER SPOP SSCAN. The multi-key ones are in cmd_set_multi.c.
 *
 * Design notes:
 *  1. Small layout only (server/coll.c note 1): a set is one record, an intset or a listpack of
 *     members (coll/set.c note 1), so a change costs O(size of the set) bytes moved, a listpack
 *     set's membership test is O(n) (coll/set.c note 2), and a set is bounded by the log's largest
 *     record. Every write builds the new payload in a heap buffer (struct set_op), freed once the
 *     reply is written: one allocation per write command.
 *  2. Replies and errors are byte-identical to redis-server 7.0, in its order of checks: argument
 *     errors (counts, SSCAN's cursor) before the key's type, WRONGTYPE after; SSCAN's options are
 *     checked after the lookup, as scanGenericCommand does. Read commands count keyspace
 *     hits/misses as lookupKeyRead (a key of another type is a hit); SADD, SREM, SPOP do not.
 *  3. Orders: an intset replies ascending, as Redis's; a "hashtable" set replies in its listpack's
 *     order, which Redis's dict does not share (tests compare those sorted). Random picks
 *     (SRANDMEMBER, SPOP) of a small set are uniform, but not Redis's sequence: only their
 *     properties match; of a large set, a member of a random bucket (note 6), not uniform.
 *  4. SSCAN answers the whole set (matched) with cursor 0 whatever the cursor, as Redis does for
 *     an intset: every member present for the whole scan is returned, and a set is one record
 *     anyway. COUNT is checked and otherwise ignored.
 *  5. Writes are one coll_rmw each, whose edit rebuilds the payload from the current one on every
 *     run (coll.c note 2); SPOP's random picks are redone on each run and only the last run's
 *     members (set_op.taken) are replied.
 *  6. A large set (server/coll_large.c): SISMEMBER and SMISMEMBER read the buckets of their
 *     members, SCARD the head's count, SADD and SREM are point writes on their members' buckets;
 *     SRANDMEMBER and SPOP without a count read one random bucket (coll_large.c note 9) and
 *     SPOP then removes the member it picked there by a point write (coll_edit.hint_member), so
 *     a queue-like SPOP costs one bucket, not the set. Those two are separate steps, each under
 *     the set's latch: a pick that a concurrent SREM or SPOP removed first is picked again (the
 *     removal found nothing), so every SPOP takes a member that was there and no other one
 *     takes it. The bucket's seed is kept in c->resume across a park, so the re-run reads what
 *     was fetched. Every other command reads (and SPOP with a count rewrites) the whole set
 *     assembled in bucket order. The code here sees a listpack either way.
 *  7. SADD, SREM and SPOP's removal of ONE member of a listpack ("hashtable") set plan a listpack
 *     edit (coll_write_lp, server/coll.c note 6) rather than copy the set and rebuild it: a small
 *     set is patched where its record lies when its rounded size holds, a large set's bucket where
 *     it was read (coll_large.c note 10). A removal that would empty the listpack, an intset, and
 *     several members build as before (cset_*), so the result's bytes are the same either way.
 */
#include "server/set_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- shared with cmd_set_multi.c ---------------- */

bool set_lookup_failed(client *c, int rc)
{
	if (rc == HLOG_OK || rc == HLOG_NOTFOUND || rc == SPW_E_WRONGTYPE)
		count_lookup(c, rc != HLOG_NOTFOUND);
	return reply_store_failed(c, rc);
}

void set_reply_member(client *c, const lp_val *m)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s = lp_val_str(m, buf, &len);
	reply_bulk(c, s, len);
}

void set_reply_members(client *c, int enc, const uint8_t *p, bool array)
{
	cset_it it;
	lp_val m;
	if (array)
		resp_write_array_len(&c->out, cset_card(enc, p));
	else
		resp_write_set_len(&c->out, cset_card(enc, p));
	cset_it_init(&it, enc, p);
	while (cset_it_next(&it, &m))
		set_reply_member(c, &m);
}

void set_op_free(struct set_op *o)
{
	lp_buf_free(&o->b);
	lp_buf_free(&o->taken);
}

int set_op_start(struct set_op *o, const coll_view *cur, const resp_slice *first)
{
	o->n = 0;
	if (cur) {
		o->enc = cur->enc;
		return cset_load(&o->b, cur->p, cur->used);
	}
	return cset_init(&o->b, &o->enc, first->ptr, first->len);
}

void set_edit_out(coll_edit *e, struct set_op *o)
{
	e->enc = o->enc;
	if (cset_card(o->enc, o->b.p) == 0) {
		e->action = COLL_DELETE;
		return;
	}
	e->action = COLL_WRITE;
	e->out = o->b.p;
	e->out_len = o->b.len;
}

static int sadd_fn(coll_edit *e, const coll_view *cur);
static int srem_fn(coll_edit *e, const coll_view *cur);

int set_rmw(client *c, const resp_slice *key, struct set_op *o, int (*fn)(coll_edit *, const coll_view *),
            bool create)
{
	coll_edit e = { .type = COLL_SET, .create = create, .fn = fn, .arg = o };
	if (fn == sadd_fn || fn == srem_fn) {   /* point writes on a large set (note 6) */
		e.hint_first = 2;
		e.hint_step = 1;
	} else if (o->member) {
		e.hint_member = o->member;         /* SMOVE's member, SPOP's pick */
	}
	int rc = coll_rmw(c, key, &e);
	o->found = e.found;
	return rc;
}

/* Bit i of a fresh bitmap (*sel, the caller frees it) set for k distinct random indexes < n,
 * k <= n: marks picked at random, or, past half, all marked and n - k unmarked at random, so the
 * expected number of draws stays under 2k. 0 or -ENOMEM. */
static int pick_distinct(uint32_t n, uint32_t k, uint8_t **sel /* out */)
{
	bool invert = k > n / 2;
	uint32_t want = invert ? n - k : k;
	uint8_t *s = malloc(n / 8 + 1);

	if (!s)
		return -ENOMEM;
	memset(s, invert ? 0xff : 0, n / 8 + 1);
	while (want) {
		uint32_t i = (uint32_t)(rng_next() % n);
		uint8_t bit = (uint8_t)(1u << (i % 8));
		if (((s[i / 8] & bit) != 0) != invert)
			continue;
		s[i / 8] ^= bit;
		want--;
	}
	*sel = s;
	return 0;
}

/* ---------------- SADD, SREM ---------------- */

/* Note 7: add (or remove) the one member m of the listpack set cur as a planned edit: 1 when it
 * planned one (o->n is the count), 0 when there is nothing to plan here (the caller builds:
 * another encoding, a removal that empties the listpack), or an error. */
static int set_patch_one(coll_edit *e, const coll_view *cur, const resp_slice *m, bool add)
{
	struct set_op *o = e->arg;
	const uint8_t *lp, *p;
	uint8_t *s;
	size_t n;
	int rc;

	if (!cur || cur->enc != CENC_HASHTABLE || (!add && lp_count(cur->p) == 1))
		return 0;
	lp = cur->p;
	p = lp_find(lp, lp_first(lp), m->ptr, m->len, 0);
	o->n = 0;
	o->enc = CENC_HASHTABLE;
	if (add == (p != NULL))
		return 1;   /* there already, or not there to remove: nothing changes (action KEEP) */
	lp_edit_init(&o->pe, lp);
	if (add) {
		if (!(s = worker_scratch(e->c->w, m->len + LP_ENTRY_EXTRA)))
			return -ENOMEM;
		n = lp_entry_encode(s, m->ptr, m->len);
		rc = lp_edit_splice(&o->pe, lp_bytes(lp) - 1, 0, s, n, 1);
	} else {
		rc = lp_edit_splice(&o->pe, (size_t)(p - lp), lp_entry_size(p), NULL, 0, -1);
	}
	if (rc < 0)
		return rc;
	o->n = 1;
	coll_write_lp(e, CENC_HASHTABLE, &o->pe);
	return 1;
}

static int sadd_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	client *c = e->c;
	int rc = c->argc == 3 ? set_patch_one(e, cur, &c->argv[2], true) : 0;
	if (rc)
		return rc < 0 ? rc : 0;
	rc = set_op_start(o, cur, &c->argv[2]);

	for (int j = 2; rc == 0 && j < c->argc; j++) {
		bool added;
		rc = cset_add(&o->b, &o->enc, c->argv[j].ptr, c->argv[j].len, SET_MAX_INTSET_ENTRIES, &added);
		o->n += added;
	}
	if (rc < 0)
		return rc;
	if (o->n)
		set_edit_out(e, o);
	return 0;
}

/* SADD and SREM: one edit of argv[1], the count it made as the reply. */
static void set_count_edit(client *c, int (*fn)(coll_edit *, const coll_view *), bool create)
{
	struct set_op o = { 0 };
	int rc = set_rmw(c, &c->argv[1], &o, fn, create);
	if (!reply_store_failed(c, rc))
		reply_int(c, o.n);
	set_op_free(&o);
}

void cmd_sadd(client *c) { set_count_edit(c, sadd_fn, true); }

static int srem_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	client *c = e->c;
	int rc = c->argc == 3 ? set_patch_one(e, cur, &c->argv[2], false) : 0;
	if (rc)
		return rc < 0 ? rc : 0;
	rc = set_op_start(o, cur, NULL);

	for (int j = 2; rc == 0 && j < c->argc; j++) {
		bool removed;
		rc = cset_remove(&o->b, o->enc, c->argv[j].ptr, c->argv[j].len, &removed);
		o->n += removed;
		if (removed && cset_card(o->enc, o->b.p) == 0)
			break;
	}
	if (rc < 0)
		return rc;
	if (o->n)
		set_edit_out(e, o);
	return 0;
}

void cmd_srem(client *c) { set_count_edit(c, srem_fn, false); }

/* ---------------- SCARD, SISMEMBER, SMISMEMBER, SMEMBERS ---------------- */

/* A large set (note 6): the buckets of the members argv[2..]. */
static const coll_hint set_hint_members = { .mode = COLL_HINT_MEMBERS, .first = 2, .step = 1 };

static void scard_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	(void)hv;
	reply_int(ctx, v->large ? (long long)v->large->count : cset_card(v->enc, v->p));
}

void cmd_scard(client *c)
{
	static const coll_hint count = { .mode = COLL_HINT_COUNT, .first = 0, .step = 0 };
	int rc = coll_read_hint(c, &c->argv[1], COLL_SET, &count, scard_cb, c);
	if (!set_lookup_failed(c, rc) && rc == HLOG_NOTFOUND)
		reply_int(c, 0);
}

static void sismember_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	client *c = ctx;
	(void)hv;
	reply_int(c, cset_has(v->enc, v->p, c->argv[2].ptr, c->argv[2].len));
}

void cmd_sismember(client *c)
{
	int rc = coll_read_hint(c, &c->argv[1], COLL_SET, &set_hint_members, sismember_cb, c);
	if (!set_lookup_failed(c, rc) && rc == HLOG_NOTFOUND)
		reply_int(c, 0);
}

static void smismember_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	client *c = ctx;
	(void)hv;
	resp_write_array_len(&c->out, c->argc - 2);
	for (int j = 2; j < c->argc; j++)
		reply_int(c, v ? cset_has(v->enc, v->p, c->argv[j].ptr, c->argv[j].len) : 0);
}

void cmd_smismember(client *c)
{
	int rc = coll_read_hint(c, &c->argv[1], COLL_SET, &set_hint_members, smismember_cb, c);
	if (!set_lookup_failed(c, rc) && rc == HLOG_NOTFOUND)
		smismember_cb(c, NULL, NULL);
}

static void smembers_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	(void)hv;
	set_reply_members(ctx, v->enc, v->p, false);
}

void cmd_smembers(client *c)
{
	int rc = coll_read(c, &c->argv[1], COLL_SET, smembers_cb, c);
	if (!set_lookup_failed(c, rc) && rc == HLOG_NOTFOUND)
		resp_write_set_len(&c->out, 0);
}

/* ---------------- SRANDMEMBER ---------------- */

/* Note 6: the seed of a random bucket: the one a parked run of this command used, or a new one. */
static unsigned long long random_seed(client *c)
{
	return c->resume.stage == 1 ? (unsigned long long)c->resume.acc : rng_next() >> 1;
}

/* After a step that used seed: kept for the re-run when it parked (c->resume is zeroed once the
 * command completes). */
static void random_seed_keep(client *c, int rc, unsigned long long seed)
{
	if (rc == HLOG_PENDING) {
		c->resume.stage = 1;
		c->resume.acc = (long long)seed;
	}
}

struct srand_ctx {
	client *c;
	long long count;
	bool has_count;
	int rc;                   /* -ENOMEM, nothing replied */
};

/* count < 0: -count members drawn with replacement. A listpack is indexed once (one offset per
 * member) so that each draw is O(1). */
static void srand_repeat(struct srand_ctx *x, const coll_view *v, uint32_t n)
{
	unsigned long long k = (unsigned long long)-x->count;
	const uint8_t **at = NULL;
	lp_val m;

	if (v->enc != CENC_INTSET) {
		if (!(at = malloc(sizeof(*at) * n))) {
			x->rc = -ENOMEM;
			return;
		}
		uint32_t i = 0;
		for (const uint8_t *e = lp_first(v->p); e; e = lp_next(v->p, e))
			at[i++] = e;
	}
	resp_write_array_len(&x->c->out, (long long)k);
	while (k--) {
		uint32_t i = (uint32_t)(rng_next() % n);
		if (at)
			lp_get(at[i], &m);
		else
			cset_get(v->enc, v->p, i, &m);
		set_reply_member(x->c, &m);
	}
	free(at);
}

static void srand_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct srand_ctx *x = ctx;
	uint32_t n = cset_card(v->enc, v->p);
	uint8_t *sel;
	cset_it it;
	lp_val m;
	(void)hv;

	if (!x->has_count) {
		cset_get(v->enc, v->p, (uint32_t)(rng_next() % n), &m);
		set_reply_member(x->c, &m);
	} else if (x->count < 0) {
		srand_repeat(x, v, n);
	} else if (x->count == 0) {
		resp_write_array_len(&x->c->out, 0);
	} else if ((unsigned long long)x->count >= n) {
		set_reply_members(x->c, v->enc, v->p, true);
	} else if ((x->rc = pick_distinct(n, (uint32_t)x->count, &sel)) == 0) {
		resp_write_array_len(&x->c->out, x->count);
		cset_it_init(&it, v->enc, v->p);
		for (uint32_t i = 0; cset_it_next(&it, &m); i++)
			if (sel[i / 8] & (1u << (i % 8)))
				set_reply_member(x->c, &m);
		free(sel);
	}
}

void cmd_srandmember(client *c)
{
	struct srand_ctx x = { c, 0, c->argc == 3, 0 };
	if (c->argc > 3) {
		reply_err_syntax(c);
		return;
	}
	if (x.has_count) {
		if (!arg_ll(&c->argv[2], &x.count)) {
			reply_err_not_int(c);
			return;
		}
		if (x.count == LLONG_MIN) {
			reply_error(c, "ERR value is out of range, value must between -9223372036854775807 and "
			               "9223372036854775807");
			return;
		}
	}
	int rc;
	if (x.has_count) {
		rc = coll_read(c, &c->argv[1], COLL_SET, srand_cb, &x);
	} else {   /* note 6: a large set's random bucket, its seed kept across a park */
		coll_hint h = { .mode = COLL_HINT_RANDOM, .cursor = random_seed(c) };
		rc = coll_read_hint(c, &c->argv[1], COLL_SET, &h, srand_cb, &x);
		random_seed_keep(c, rc, h.cursor);
	}
	if (set_lookup_failed(c, rc))
		return;
	if (x.rc)
		reply_err_store(c, x.rc);
	else if (rc == HLOG_NOTFOUND && x.has_count)
		resp_write_array_len(&c->out, 0);
	else if (rc == HLOG_NOTFOUND)
		reply_null(c);
}

/* ---------------- SPOP ---------------- */

/* Redis's SPOP_MOVE_STRATEGY_MUL: when the members kept are at most a fifth of those taken,
 * Redis builds the kept ones into a new set, whose encoding starts afresh (an intset again when
 * they are all integers); we rebuild then too, so OBJECT ENCODING agrees. */
#define SPOP_MOVE_STRATEGY_MUL 5

static int spop_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	uint32_t n = cset_card(cur->enc, cur->p);
	unsigned long long k = o->count < 0 ? 1 : (unsigned long long)o->count;
	uint8_t *sel;
	cset_it it;
	lp_val m;
	int rc;

	o->n = 0;
	if (k == 0)
		return 0;
	if ((rc = cset_lp_reset(&o->taken)) < 0)
		return rc;
	if (k >= n) {   /* all of it: the key goes */
		cset_it_init(&it, cur->enc, cur->p);
		while (rc >= 0 && cset_it_next(&it, &m))
			rc = cset_lp_append(&o->taken, &m);
		o->n = n;
		e->action = COLL_DELETE;
		return rc < 0 ? rc : 0;
	}
	o->enc = cur->enc;
	if ((rc = cset_load(&o->b, cur->p, cur->used)) < 0 || (rc = pick_distinct(n, (uint32_t)k, &sel)) < 0)
		return rc;
	rc = cset_take(&o->b, o->enc, sel, &o->taken);
	free(sel);
	if (rc == 0 && (uint64_t)(n - k) * SPOP_MOVE_STRATEGY_MUL <= k)
		rc = cset_rebuild(&o->b, &o->enc, SET_MAX_INTSET_ENTRIES);
	if (rc < 0)
		return rc;
	o->n = (long long)k;
	set_edit_out(e, o);
	return 0;
}

/* Note 6: SPOP's pick, read from a random bucket of a large set (small: nothing picked). */
struct spop_pick {
	bool large;
	lp_buf m;                 /* the member's bytes */
	int rc;
};

static void spop_pick_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct spop_pick *x = ctx;
	char buf[LP_INTBUF_SIZE];
	size_t len;
	lp_val m;
	(void)hv;

	if (!(x->large = v->large != NULL))
		return;
	uint32_t n = cset_card(v->enc, v->p);
	if (n == 0) {             /* the whole read found no member while the head counts some */
		x->rc = SPW_E_CORRUPT;
		return;
	}
	cset_get(v->enc, v->p, (uint32_t)(rng_next() % n), &m);
	const char *s = lp_val_str(&m, buf, &len);
	if (lp_buf_reserve(&x->m, len ? len : 1) < 0) {
		x->rc = -ENOMEM;
		return;
	}
	memcpy(x->m.p, s, len);
	x->m.len = len;
}

static int spop_rem_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	bool removed;
	int rc = set_patch_one(e, cur, o->member, false);
	if (rc)
		return rc < 0 ? rc : 0;
	rc = set_op_start(o, cur, NULL);
	if (rc == 0)
		rc = cset_remove(&o->b, o->enc, o->member->ptr, o->member->len, &removed);
	if (rc == 0 && removed) {
		o->n = 1;
		set_edit_out(e, o);
	}
	return rc;
}

/* SPOP key of a large set (note 6): pick from a random bucket, remove the pick by a point write,
 * again while a concurrent writer took the pick first. false: the set is small (or a pick kept
 * losing), nothing was replied or changed and the caller runs the whole-set edit; true: replied. */
static bool spop_large(client *c)
{
	struct spop_pick x = { 0 };
	struct set_op o = { .count = -1 };
	resp_slice m;
	int rc = HLOG_OK;
	bool done = true;

	for (int tries = 0; tries < 64; tries++) {
		coll_hint h = { .mode = COLL_HINT_RANDOM, .cursor = tries ? rng_next() >> 1 : random_seed(c) };
		x.large = false;
		rc = coll_read_hint(c, &c->argv[1], COLL_SET, &h, spop_pick_cb, &x);
		random_seed_keep(c, rc, h.cursor);
		if (rc == HLOG_OK && x.rc)
			rc = x.rc;
		if (rc != HLOG_OK || !x.large)
			break;
		m.ptr = (const char *)x.m.p;
		m.len = x.m.len;
		o.member = &m;
		o.n = 0;
		rc = set_rmw(c, &c->argv[1], &o, spop_rem_fn, false);
		random_seed_keep(c, rc, h.cursor);
		if (rc != HLOG_OK || o.n)
			break;
	}
	if (rc == HLOG_NOTFOUND)
		reply_null(c);
	else if (rc == HLOG_OK && x.large && o.n)
		reply_bulk(c, (const char *)x.m.p, x.m.len);
	else if (rc == HLOG_OK)
		done = false;
	else
		reply_store_failed(c, rc);
	lp_buf_free(&x.m);
	set_op_free(&o);
	return done;
}

void cmd_spop(client *c)
{
	struct set_op o = { .count = -1 };
	int rc;

	if (c->argc > 3) {
		reply_err_syntax(c);
		return;
	}
	if (c->argc == 3) {
		if (!arg_ll(&c->argv[2], &o.count) || o.count < 0) {
			reply_error(c, "ERR value is out of range, must be positive");
			return;
		}
	}
	if (c->argc == 2 && spop_large(c))
		return;
	rc = set_rmw(c, &c->argv[1], &o, spop_fn, false);
	if (reply_store_failed(c, rc)) {
		set_op_free(&o);
		return;
	}
	if (c->argc == 2 && !o.found) {
		reply_null(c);
	} else if (c->argc == 2) {
		lp_val m;
		lp_get(lp_first(o.taken.p), &m);
		set_reply_member(c, &m);
	} else {
		resp_write_set_len(&c->out, o.n);
		for (const uint8_t *p = o.n ? lp_first(o.taken.p) : NULL; p; p = lp_next(o.taken.p, p)) {
			lp_val m;
			lp_get(p, &m);
			set_reply_member(c, &m);
		}
	}
	set_op_free(&o);
}

/* ---------------- SSCAN (note 4) ---------------- */

struct sscan_ctx {
	client *c;
	const char *pat;          /* NULL: every member */
	size_t plen;
	const char *err;          /* a bad option: replied once the key is found, as Redis */
};

static bool sscan_match(const struct sscan_ctx *x, const lp_val *m)
{
	char buf[LP_INTBUF_SIZE];
	size_t len;
	const char *s;
	if (!x->pat)
		return true;
	s = lp_val_str(m, buf, &len);
	return spw_glob_match(x->pat, x->plen, s, len, 0);
}

static void sscan_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct sscan_ctx *x = ctx;
	long long n = 0;
	cset_it it;
	lp_val m;
	(void)hv;

	if (x->err) {
		reply_error(x->c, x->err);
		return;
	}
	cset_it_init(&it, v->enc, v->p);
	while (cset_it_next(&it, &m))
		n += sscan_match(x, &m);
	resp_write_array_len(&x->c->out, 2);
	reply_bulk(x->c, "0", 1);
	resp_write_array_len(&x->c->out, n);
	cset_it_init(&it, v->enc, v->p);
	while (cset_it_next(&it, &m))
		if (sscan_match(x, &m))
			set_reply_member(x->c, &m);
}

/* The options (coll_scan_opts), reported only once the key is found. */
static void sscan_opts(client *c, struct sscan_ctx *x)
{
	coll_scan o;
	x->err = coll_scan_opts(c, &o);
	x->pat = o.pat;
	x->plen = o.plen;
}

void cmd_sscan(client *c)
{
	struct sscan_ctx x = { .c = c };
	unsigned long long cursor;

	if (!scan_cursor_parse(&c->argv[2], &cursor)) {
		reply_error(c, "ERR invalid cursor");
		return;
	}
	sscan_opts(c, &x);
	int rc = coll_read(c, &c->argv[1], COLL_SET, sscan_cb, &x);
	if (!set_lookup_failed(c, rc) && rc == HLOG_NOTFOUND) {
		resp_write_array_len(&c->out, 2);
		reply_bulk(c, "0", 1);
		resp_write_array_len(&c->out, 0);
	}
}
