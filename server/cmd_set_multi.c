/*
 * cmd_set_multi.c - the set commands over several keys (Redis 7.0's t_set.c): SMOVE SINTER
 * SINTERCARD SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE.
 *
 * Design notes:
 *  1. Sources first, then writes (cmd_string.c note 8): every key is prefetched together, then
 *     each source is read and copied out of its record (coll_read; a read answering HLOG_PENDING
 *     parks the client before anything changed), and only then is the destination written. The
 *     keyspace hits/misses of the reads (lookupKeyRead; the STORE forms and SMOVE look up for
 *     writing and count none) are counted once all reads are done, so a parked and re-run command
 *     counts once.
 *  2. Redis's order of checks: keys are read in argument order and the first of another type
 *     answers WRONGTYPE, even after a missing key (7.0 reads them all before it answers an empty
 *     intersection); SINTERCARD's numkeys and LIMIT are checked before any key.
 *  3. Results are built as Redis builds its dstset (createIntsetObject, then setTypeAdd of each
 *     member: coll/set.c note 1), so an all-integer result of at most set-max-intset-entries is an
 *     intset and replies ascending as Redis's does; otherwise Redis replies in dict order, which
 *     ours (the listpack's) does not match. Building costs O(r) membership tests of the result as
 *     it grows (coll/set.c note 2), and each intersection or difference test O(n) per source: the
 *     small layout's price.
 *  4. STORE forms overwrite the destination whatever it held, dropping its TTL (setKey), or delete
 *     it when the result is empty, and answer the result's size. SMOVE checks the destination's
 *     type before it changes anything; src == dst answers membership and writes nothing.
 *  5. Not atomic across worker threads (as MSET, cmd_string.c note 7): another client may change
 *     a source between its read and the write. SMOVE adds to the destination before it removes
 *     from the source, so a re-run after the second operation parked finds the member still in the
 *     source, adds nothing new and removes it: the move happens once and answers 1.
 *  6. SMOVE on a large source or destination (server/coll_large.c) is point work: the source's
 *     membership test reads the member's bucket, the destination's type check its head, and the
 *     add and the removal are point writes naming the member (coll_edit.hint_member, as SADD and
 *     SREM of it), so it costs a bucket or two, not the sets; a small destination that the add
 *     makes large converts as SADD's does. Still two writes (note 5), not one atomic step.
 */
#include "server/set_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { SETOP_INTER, SETOP_UNION, SETOP_DIFF };

/* A source, copied out of its record. */
struct set_src {
	lp_buf b;
	int enc;
	bool found;
};

static void src_load_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct set_src *s = ctx;
	(void)hv;
	s->enc = v->enc;
	s->found = cset_load(&s->b, v->p, v->used) == 0;
}

static void srcs_free(struct set_src *s, int n)
{
	for (int i = 0; i < n; i++)
		lp_buf_free(&s[i].b);
	free(s);
}

/* Read the n keys argv[first...] into *out (note 1). HLOG_OK, or the first error (the reply
 * written: WRONGTYPE, a parked client...) after which nothing is left to free. */
static int srcs_load(client *c, int first, int n, bool count, struct set_src **out /* out */)
{
	struct set_src *s = calloc((size_t)n, sizeof(*s));
	int i, rc = HLOG_OK;

	if (!s) {
		reply_store_failed(c, -ENOMEM);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		rc = coll_read(c, &c->argv[first + i], COLL_SET, src_load_cb, &s[i]);
		if (rc == HLOG_OK && !s[i].found)
			rc = -ENOMEM;
		if (rc != HLOG_OK && rc != HLOG_NOTFOUND)
			break;
	}
	if (count && rc != HLOG_PENDING) {
		for (int j = 0; j < n && j <= i; j++)
			count_lookup(c, s[j].found || j == i);
	}
	if (rc == HLOG_NOTFOUND)
		rc = HLOG_OK;
	if (reply_store_failed(c, rc)) {
		srcs_free(s, n);
		return rc;
	}
	*out = s;
	return HLOG_OK;
}

/* Every member of s[0] in all the others (s[0] the smallest), counted into *card up to limit
 * (0: none) and added to r unless r is NULL. 0 or -ENOMEM. */
static int sets_inter(struct set_src *s, int n, lp_buf *r, int *enc, long long limit, long long *card)
{
	cset_it it;
	lp_val m;
	int j, rc = 0;

	cset_it_init(&it, s[0].enc, s[0].b.p);
	while (rc == 0 && cset_it_next(&it, &m)) {
		for (j = 1; j < n; j++)
			if (!cset_has_val(s[j].enc, s[j].b.p, &m))
				break;
		if (j < n)
			continue;
		(*card)++;
		if (r) {
			bool added;
			rc = cset_add_val(r, enc, &m, SET_MAX_INTSET_ENTRIES, &added);
		}
		if (limit && *card >= limit)
			break;
	}
	return rc;
}

/* SUNION: every member of every source; SDIFF: those of s[0] in no other. 0 or -ENOMEM. */
static int sets_union_diff(struct set_src *s, int n, int op, lp_buf *r, int *enc)
{
	cset_it it;
	lp_val m;
	int rc = 0;

	for (int i = 0; i < (op == SETOP_DIFF ? 1 : n); i++) {
		if (!s[i].found)
			continue;
		cset_it_init(&it, s[i].enc, s[i].b.p);
		while (rc == 0 && cset_it_next(&it, &m)) {
			bool added, skip = false;
			for (int j = 1; op == SETOP_DIFF && j < n && !skip; j++)
				skip = s[j].found && cset_has_val(s[j].enc, s[j].b.p, &m);
			if (!skip)
				rc = cset_add_val(r, enc, &m, SET_MAX_INTSET_ENTRIES, &added);
		}
	}
	return rc;
}

/* The result of op over the n sources into r (a new set, its encoding in *enc). */
static int sets_compute(struct set_src *s, int n, int op, lp_buf *r, int *enc)
{
	long long card = 0;
	int rc = cset_init(r, enc, NULL, 0);

	if (rc < 0 || op != SETOP_INTER)
		return rc < 0 ? rc : sets_union_diff(s, n, op, r, enc);
	for (int i = 0; i < n; i++) {
		if (!s[i].found)
			return 0;   /* an empty set intersects to nothing */
		if (cset_card(s[i].enc, s[i].b.p) < cset_card(s[0].enc, s[0].b.p)) {
			struct set_src t = s[0];
			s[0] = s[i];
			s[i] = t;
		}
	}
	return sets_inter(s, n, r, enc, 0, &card);
}

/* Note 4: the result into dst (deleted when empty). A store result. */
static int set_store(client *c, const resp_slice *dst, const lp_buf *r, int enc)
{
	hlog_key k;
	size_t len;
	uint8_t *v;
	int rc;

	key_from_arg(&k, dst);
	if (cset_card(enc, r->p) == 0) {
		rc = hlog_delete(c->w->sess, &k);
		return rc == HLOG_NOTFOUND ? HLOG_OK : rc;
	}
	len = coll_value_len(r->len, 0);
	if (!(v = worker_scratch(c->w, len)))
		return -ENOMEM;
	coll_hdr_write(v, COLL_SET, enc, r->len);
	memcpy(v + COLL_HDR, r->p, r->len);
	memset(v + COLL_HDR + r->len, 0, len - COLL_HDR - r->len);
	return hlog_upsert_typed(c->w->sess, &k, v, len, HLOG_NO_EXPIRY, HLOG_T_HEAD);
}

/* SINTER, SUNION, SDIFF and their STORE forms: sources argv[first..argc), dst NULL or the key. */
static void sets_generic(client *c, int first, const resp_slice *dst, int op)
{
	int n = c->argc - first, enc, rc;
	struct set_src *s;
	lp_buf r = { 0 };

	if (reply_store_failed(c, command_keys_prefetch(c, 1, -1, 1)) || srcs_load(c, first, n, !dst, &s))
		return;
	rc = sets_compute(s, n, op, &r, &enc);
	if (rc == 0 && dst)
		rc = set_store(c, dst, &r, enc);
	if (!reply_store_failed(c, rc)) {
		if (dst)
			reply_int(c, cset_card(enc, r.p));
		else
			set_reply_members(c, enc, r.p, false);
	}
	lp_buf_free(&r);
	srcs_free(s, n);
}

void cmd_sinter(client *c) { sets_generic(c, 1, NULL, SETOP_INTER); }
void cmd_sunion(client *c) { sets_generic(c, 1, NULL, SETOP_UNION); }
void cmd_sdiff(client *c) { sets_generic(c, 1, NULL, SETOP_DIFF); }
void cmd_sinterstore(client *c) { sets_generic(c, 2, &c->argv[1], SETOP_INTER); }
void cmd_sunionstore(client *c) { sets_generic(c, 2, &c->argv[1], SETOP_UNION); }
void cmd_sdiffstore(client *c) { sets_generic(c, 2, &c->argv[1], SETOP_DIFF); }

/* SINTERCARD numkeys key [key ...] [LIMIT limit] */
void cmd_sintercard(client *c)
{
	long long numkeys, limit = 0, card = 0;
	struct set_src *s;
	int i, rc = 0;

	if (!arg_ll(&c->argv[1], &numkeys) || numkeys < 1) {
		reply_error(c, "ERR numkeys should be greater than 0");
		return;
	}
	if (numkeys > c->argc - 2) {
		reply_error(c, "ERR Number of keys can't be greater than number of args");
		return;
	}
	for (i = 2 + (int)numkeys; i < c->argc; i += 2) {
		if (OPT_IS(&c->argv[i], "limit") && i + 1 < c->argc) {
			if (!arg_ll(&c->argv[i + 1], &limit) || limit < 0) {
				reply_error(c, "ERR LIMIT can't be negative");
				return;
			}
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	if (reply_store_failed(c, command_keys_prefetch(c, 2, 1 + (int)numkeys, 1)) ||
	    srcs_load(c, 2, (int)numkeys, true, &s))
		return;
	for (i = 0; i < numkeys && s[i].found; i++) {
		if (cset_card(s[i].enc, s[i].b.p) < cset_card(s[0].enc, s[0].b.p)) {
			struct set_src t = s[0];
			s[0] = s[i];
			s[i] = t;
		}
	}
	if (i == numkeys)
		rc = sets_inter(s, (int)numkeys, NULL, NULL, limit, &card);
	if (!reply_store_failed(c, rc))
		reply_int(c, card);
	srcs_free(s, (int)numkeys);
}

/* ---------------- SMOVE (notes 4, 5) ---------------- */

static void smove_has_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct set_op *o = ctx;
	(void)hv;
	o->found = cset_has(v->enc, v->p, o->member->ptr, o->member->len);
}

static void smove_dst_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	(void)ctx;
	(void)v;
	(void)hv;
}

static int smove_add_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	bool added;
	int rc = set_op_start(o, cur, o->member);
	if (rc == 0)
		rc = cset_add(&o->b, &o->enc, o->member->ptr, o->member->len, SET_MAX_INTSET_ENTRIES, &added);
	if (rc == 0 && added)
		set_edit_out(e, o);
	return rc;
}

static int smove_rem_fn(coll_edit *e, const coll_view *cur)
{
	struct set_op *o = e->arg;
	bool removed;
	int rc = set_op_start(o, cur, NULL);
	if (rc == 0)
		rc = cset_remove(&o->b, o->enc, o->member->ptr, o->member->len, &removed);
	if (rc == 0 && removed)
		set_edit_out(e, o);
	return rc;
}

void cmd_smove(client *c)
{
	/* note 6: a large source's bucket of the member, a large destination's head (its type) */
	static const coll_hint member_hint = { .mode = COLL_HINT_MEMBERS, .first = 3, .step = 1 };
	static const coll_hint head_hint = { .mode = COLL_HINT_HEAD, .first = 0, .step = 0 };
	const resp_slice *src = &c->argv[1], *dst = &c->argv[2];
	bool same = src->len == dst->len && memcmp(src->ptr, dst->ptr, src->len) == 0;
	struct set_op o = { .member = &c->argv[3] };
	int rc;

	if (reply_store_failed(c, command_keys_prefetch(c, 1, 2, 1)))
		return;
	rc = coll_read_hint(c, src, COLL_SET, &member_hint, smove_has_cb, &o);
	if (rc == HLOG_NOTFOUND) {
		reply_int(c, 0);
		return;
	}
	if (reply_store_failed(c, rc))
		return;
	if (!same && (rc = coll_read_hint(c, dst, COLL_SET, &head_hint, smove_dst_cb, NULL)) !=
	                     HLOG_NOTFOUND &&
	    reply_store_failed(c, rc))
		return;
	if (same || !o.found) {
		reply_int(c, o.found);
		return;
	}
	rc = set_rmw(c, dst, &o, smove_add_fn, true);
	if (rc == HLOG_OK)
		rc = set_rmw(c, src, &o, smove_rem_fn, false);
	if (!reply_store_failed(c, rc))
		reply_int(c, 1);
	set_op_free(&o);
}
