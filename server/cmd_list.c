/*
 * cmd_list.c - the list commands (Redis's t_list.c, blocking ones aside): LPUSH RPUSH LPUSHX RPUSHX
 * LPOP RPOP LLEN LINDEX LSET LRANGE LTRIM LREM LINSERT LPOS LMOVE RPOPLPUSH LMPOP.
 *
 * Design notes:
 *  1. A list is one head record whose payload is one listpack (coll/list.c note 1), whatever its
 *     size: OBJECT ENCODING "quicklist", as every Redis 7.0 list. A change rewrites the payload,
 *     so it costs O(size of the list) bytes moved, while the list is small. Past 2 x
 *     coll-record-max bytes it becomes large (server/coll_list_large.c: a deque of node parts),
 *     where a change costs O(one node) (note 7).
 *  2. Replies and errors are redis-server 7.0.15's byte for byte, checked in t_list.c's order:
 *     the arguments Redis parses before its lookup (counts, LEFT/RIGHT, BEFORE/AFTER, LPOS's
 *     options, LRANGE/LTRIM's indexes) first, then the key (missing key, WRONGTYPE), then what
 *     Redis parses after it (LINDEX's and LSET's index). The nils are Redis's: LPOP/RPOP with a
 *     count and LMPOP answer a null array (RESP2 *-1, RESP3 _) for nothing, without a count a null
 *     bulk. Reads count keyspace hits and misses where Redis's lookupKeyRead does (LLEN, LINDEX,
 *     LRANGE, LPOS); write lookups do not.
 *  3. Writes are one coll_rmw each (coll.c note 2). The ends of a list are patched (coll.c note
 *     6): pushes, pops, LMOVE's and RPOPLPUSH's pop and push plan one listpack edit (coll/listpack.h
 *     lp_edit) with the new entries encoded in the worker's scratch, and the store writes it where
 *     the record lies when it can: O(pushed or popped bytes) at the tail, one move of the payload
 *     at the head, and one copy of the list when the record must move. A list's length is
 *     never counted by a walk for their replies (coll.c note 7). The other writes (LSET LTRIM LREM
 *     LINSERT) build the new listpack in the scratch (no allocation once it has grown): list_work
 *     copies the current payload there with room for what the command adds, bounded by
 *     LIST_ENTRY_EXTRA per element, so the listpack writes never reallocate memory they do not
 *     own. What the reply needs from the old value (popped elements, LMOVE's element) is copied
 *     into the scratch too, since the record may not be read after coll_rmw returns; the edit may
 *     run more than once and plans or rebuilds all of it each time.
 *  4. LMOVE and RPOPLPUSH: with one key (source = destination) the move is one coll_rmw, a
 *     rotation. With two they are three store operations, not atomic across worker threads in
 *     this version (as MSET, cmd_string.c note 7): read the source's end element (nil when the
 *     source is missing, WRONGTYPE), push a copy onto the destination (its WRONGTYPE comes here,
 *     before anything changed, as in Redis, which checks it before popping), then pop the source.
 *     Pushing first means the only state a park must carry is "pushed already" (c->resume.stage
 *     1: the re-run only pops, and replies with what it popped).
 *  5. LMPOP pops from the first of its keys that holds a list: one coll_rmw per key, in order, the
 *     ones before it being missing (so unchanged); WRONGTYPE on a key before it stops it, as in
 *     Redis. All its keys are prefetched first (cmd_string.c note 8), so a park happens before any
 *     change and the re-run starts over.
 *  6. Pending reads: every single-key command is one store operation that may answer HLOG_PENDING
 *     before it changed anything (reply_store_failed parks the client, the request runs again).
 *  7. A large list (server/coll_list_large.c): each command also says what it does, for the
 *     large layout's point paths: pushes, pops, LSET and LTRIM a coll_list_op (its answer comes
 *     back there, o.done set), LLEN a count hint, LINDEX, LRANGE and LMOVE's peek a COLL_HINT_LIST
 *     (the view then holds just the elements asked for, view->large set). LINSERT, LREM, LPOS
 *     and an LMOVE within one list run their small-layout code on the whole list assembled.
 */
#include "server/server_int.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/list.h"
#include "coll/listpack.h"

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

/* ---------------- shared helpers ---------------- */

/* A list payload is a listpack exactly its used length (coll_parse checked only the header). */
static bool list_ok(const coll_view *v)
{
	return v->used >= LP_EMPTY_BYTES && lp_bytes(v->p) == v->used && v->p[v->used - 1] == LP_EOF;
}


static void reply_entry(client *c, const uint8_t *p)
{
	char buf[LP_INTBUF_SIZE];
	size_t n;
	const char *s = lp_entry_str(p, buf, &n);
	reply_bulk(c, s, n);
}

/* An array of n entries of lp from p on, towards the tail or (reverse) the head. */
static void reply_entries(client *c, const uint8_t *lp, const uint8_t *p, long n, bool reverse)
{
	resp_write_array_len(&c->out, n);
	for (; n > 0 && p; n--, p = reverse ? lp_prev(lp, p) : lp_next(lp, p))
		reply_entry(c, p);
}

/* LEFT / RIGHT (getListPositionFromObjectOrReply): 1 left, 0 right, -1 after a syntax error. */
static int arg_side(client *c, const resp_slice *a)
{
	if (OPT_IS(a, "left"))
		return 1;
	if (OPT_IS(a, "right"))
		return 0;
	reply_err_syntax(c);
	return -1;
}

/* Note 3: a copy of cur (or an empty listpack) in the worker's scratch, with extra bytes free. */
static int list_work(coll_edit *e, const coll_view *cur, size_t extra, lp_buf *b /* out */)
{
	const uint8_t *src = cur ? cur->p : lp_empty;
	size_t used = cur ? cur->used : LP_EMPTY_BYTES;
	uint8_t *s;

	if (cur && !list_ok(cur))
		return SPW_E_CORRUPT;
	if (!(s = worker_scratch(e->c->w, used + extra)))
		return -ENOMEM;
	b->p = s;
	b->cap = used + extra;
	b->len = used;
	memcpy(b->p, src, used);
	return 0;
}

/* The edit's result: the listpack in b, or a deletion when it has no entries left. */
static void list_out(coll_edit *e, const uint8_t *lp, size_t len)
{
	e->enc = CENC_QUICKLIST;
	e->action = lp_first(lp) ? COLL_WRITE : COLL_DELETE;
	e->out = lp;
	e->out_len = len;
}

/* A read's keyspace hit or miss (note 2): a key of another type was found. */
static void count_list_lookup(client *c, int rc)
{
	count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
}

/* ---------------- LPUSH RPUSH LPUSHX RPUSHX ---------------- */

struct push_ctx {
	bool left;
	int first;                /* argv index of the first element, or 0: one element, the first
	                           * vlen bytes of the scratch (LMOVE, note 4) */
	size_t vlen;
	long long len;            /* out: the list's length after */
	lp_edit pe;               /* the planned edit (note 3) */
};

/* Note 3: the new entries, encoded in the scratch (after LMOVE's element), go in at one end in
 * one splice: in place an RPUSH writes them over the end marker, an LPUSH moves the payload once. */
static int push_fn(coll_edit *e, const coll_view *cur)
{
	struct push_ctx *x = e->arg;
	client *c = e->c;
	const uint8_t *lp = cur ? cur->p : lp_empty;
	size_t used = cur ? cur->used : LP_EMPTY_BYTES, keep = x->first ? 0 : x->vlen;
	size_t need = x->vlen + LP_ENTRY_EXTRA, at = 0;
	long n = x->first ? c->argc - x->first : 1;
	uint8_t *s, *ins;
	int rc;

	if (cur && !list_ok(cur))
		return SPW_E_CORRUPT;
	if (x->first)
		need = 0;
	for (int j = x->first; x->first && j < c->argc; j++)
		need += c->argv[j].len + LP_ENTRY_EXTRA;
	if (!(s = worker_scratch(c->w, keep + need)))
		return -ENOMEM;
	ins = s + keep;
	if (!x->first)
		at = lp_entry_encode(ins, s, x->vlen);
	for (long i = 0; x->first && i < n; i++) {
		/* LPUSH a b c leaves c b a at the head: the last argument is the first entry. */
		const resp_slice *a = &c->argv[x->left ? c->argc - 1 - i : x->first + i];
		at += lp_entry_encode(ins + at, a->ptr, a->len);
	}
	lp_edit_init(&x->pe, lp);
	if ((rc = lp_edit_splice(&x->pe, x->left ? LP_HDR_SIZE : used - 1, 0, ins, at, n)) < 0)
		return rc;
	x->len = (cur ? coll_lp_count(cur) : 0) + n;
	e->count = (uint32_t)x->len;
	coll_write_lp(e, CENC_QUICKLIST, &x->pe);
	return 0;
}

/* xx: LPUSHX / RPUSHX, only onto an existing list (0 when there is none). */
static void push_generic(client *c, bool left, bool xx)
{
	struct push_ctx x = { .left = left, .first = 2 };
	coll_list_op o = { .op = COLL_LIST_PUSH, .left = left, .elems = &c->argv[2], .nelems = c->argc - 2 };
	coll_edit e = { .type = COLL_LIST, .create = !xx, .fn = push_fn, .arg = &x, .list_op = &o };
	if (!reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		reply_int(c, o.done ? o.len : x.len);
}

void cmd_lpush(client *c) { push_generic(c, true, false); }
void cmd_rpush(client *c) { push_generic(c, false, false); }
void cmd_lpushx(client *c) { push_generic(c, true, true); }
void cmd_rpushx(client *c) { push_generic(c, false, true); }

/* ---------------- LPOP RPOP (and the pops of LMOVE, LMPOP) ---------------- */

struct pop_ctx {
	bool left;
	long count;
	size_t keep;              /* scratch bytes before the edit's (LMOVE's element) */
	long n;                   /* out: elements popped */
	const uint8_t *popped;    /* out: a listpack of them, in list order, in the scratch */
	lp_edit pe;               /* the planned edit (note 3) */
};

/* The popped elements are a run of the old list (coll/list.c note 3), copied out for the reply;
 * the new list is the old one less that run, one splice (note 3). Only the popped end is walked,
 * so a pop costs O(popped bytes) at the tail and one move of the payload at the head. */
static int pop_fn(coll_edit *e, const coll_view *cur)
{
	struct pop_ctx *x = e->arg;
	const uint8_t *lp = cur->p, *p, *edge, *a, *end;
	uint8_t *s;
	long k = 0;
	int rc;

	if (!list_ok(cur))
		return SPW_E_CORRUPT;
	x->n = 0;
	x->popped = NULL;
	e->action = COLL_KEEP;
	/* edge: the popped entry nearest the rest; p: the first entry of the rest on that side. */
	for (p = edge = x->left ? lp_first(lp) : lp_last(lp); p && k < x->count; k++) {
		edge = p;
		p = x->left ? lp_next(lp, p) : lp_prev(lp, p);
	}
	if (k == 0)
		return 0;
	a = x->left ? lp_first(lp) : edge;
	end = x->left && p ? p : lp + cur->used - 1;
	if (!(s = worker_scratch(e->c->w, x->keep + LP_EMPTY_BYTES + (size_t)(end - a))))
		return -ENOMEM;
	x->n = k;
	x->popped = s + x->keep;
	list_run(s + x->keep, lp, a, end, (uint32_t)k);
	if (!p) {
		e->action = COLL_DELETE;
		return 0;
	}
	lp_edit_init(&x->pe, lp);
	if ((rc = lp_edit_splice(&x->pe, (size_t)(a - lp), (size_t)(end - a), NULL, 0, -k)) < 0)
		return rc;
	e->count = coll_lp_count(cur) - (uint32_t)k;
	coll_write_lp(e, CENC_QUICKLIST, &x->pe);
	return 0;
}

static int pop_run(client *c, const resp_slice *key, struct pop_ctx *x, bool *found /* out */)
{
	coll_list_op o = { .op = COLL_LIST_POP, .left = x->left, .a = x->count };
	coll_edit e = { .type = COLL_LIST, .fn = pop_fn, .arg = x, .list_op = &o };
	int rc = coll_rmw(c, key, &e);
	*found = e.found;
	if (o.done) {   /* a large list (note 7) */
		x->n = o.n;
		x->popped = o.popped;
	}
	return rc;
}

/* The popped elements as an array: LPOP's in list order, RPOP's from the tail. */
static void reply_popped(client *c, const struct pop_ctx *x)
{
	if (!x->n)
		resp_write_array_len(&c->out, 0);
	else
		reply_entries(c, x->popped, x->left ? lp_first(x->popped) : lp_last(x->popped), x->n, !x->left);
}

static void pop_generic(client *c, bool left)
{
	struct pop_ctx x = { .left = left, .count = 1 };
	bool hascount = c->argc == 3, found;
	long long count;

	if (c->argc > 3) {
		reply_err_arity(c);
		return;
	}
	if (hascount) {
		if (!arg_ll(&c->argv[2], &count) || count < 0) {
			reply_error(c, "ERR value is out of range, must be positive");
			return;
		}
		x.count = (long)count;
	}
	if (reply_store_failed(c, pop_run(c, &c->argv[1], &x, &found)))
		return;
	if (!found) {
		if (hascount)
			resp_write_null_array(&c->out);
		else
			reply_null(c);
	} else if (hascount) {
		reply_popped(c, &x);
	} else if (x.n) {
		reply_entry(c, lp_first(x.popped));
	} else {
		reply_null(c);   /* an empty list: only a corrupt record has one */
	}
}

void cmd_lpop(client *c) { pop_generic(c, true); }
void cmd_rpop(client *c) { pop_generic(c, false); }

/* ---------------- LLEN LINDEX LRANGE ---------------- */

struct read_ctx {
	client *c;
	bool arg_ok;              /* LINDEX: the index parsed (Redis parses it after the lookup) */
	long long a, b;
	long long n;              /* LLEN: out */
};

static void llen_cb(void *ctx, const coll_view *v, const hlog_value *rec)
{
	struct read_ctx *x = ctx;
	(void)rec;
	x->n = v->large ? (long long)v->large->count : list_ok(v) ? (long long)coll_lp_count(v) : -1;
}

void cmd_llen(client *c)
{
	struct read_ctx x = { .c = c };
	coll_hint h = { .mode = COLL_HINT_COUNT };
	int rc = coll_read_hint(c, &c->argv[1], COLL_LIST, &h, llen_cb, &x);
	count_list_lookup(c, rc);
	if (rc == HLOG_OK && x.n < 0)
		rc = SPW_E_CORRUPT;
	if (reply_store_failed(c, rc))
		return;
	reply_int(c, rc == HLOG_OK ? x.n : 0);
}

static void lindex_cb(void *ctx, const coll_view *v, const hlog_value *rec)
{
	struct read_ctx *x = ctx;
	const uint8_t *p;
	(void)rec;
	if (!x->arg_ok)
		reply_err_not_int(x->c);
	else if (!list_ok(v))
		reply_err_store(x->c, SPW_E_CORRUPT);
	else if ((p = v->large ? lp_first(v->p) : lp_seek(v->p, (long)x->a)))
		reply_entry(x->c, p);
	else
		reply_null(x->c);
}

void cmd_lindex(client *c)
{
	struct read_ctx x = { .c = c };
	x.arg_ok = arg_ll(&c->argv[2], &x.a);
	coll_hint h = { .mode = x.arg_ok ? COLL_HINT_LIST : COLL_HINT_HEAD, .list_a = x.a, .list_index = true };
	int rc = coll_read_hint(c, &c->argv[1], COLL_LIST, &h, lindex_cb, &x);
	count_list_lookup(c, rc);
	if (!reply_store_failed(c, rc) && rc == HLOG_NOTFOUND)
		reply_null(c);
}

static void lrange_cb(void *ctx, const coll_view *v, const hlog_value *rec)
{
	struct read_ctx *x = ctx;
	long from, to;
	(void)rec;
	if (!list_ok(v))
		reply_err_store(x->c, SPW_E_CORRUPT);
	else if (v->large)   /* note 7: just the range */
		reply_entries(x->c, v->p, lp_first(v->p), (long)lp_count(v->p), false);
	else if (!list_range((long)coll_lp_count(v), (long)x->a, (long)x->b, &from, &to))
		resp_write_array_len(&x->c->out, 0);
	else
		reply_entries(x->c, v->p, lp_seek(v->p, from), to - from + 1, false);
}

void cmd_lrange(client *c)
{
	struct read_ctx x = { .c = c };
	if (!arg_ll(&c->argv[2], &x.a) || !arg_ll(&c->argv[3], &x.b)) {
		reply_err_not_int(c);
		return;
	}
	coll_hint h = { .mode = COLL_HINT_LIST, .list_a = x.a, .list_b = x.b };
	int rc = coll_read_hint(c, &c->argv[1], COLL_LIST, &h, lrange_cb, &x);
	count_list_lookup(c, rc);
	if (!reply_store_failed(c, rc) && rc == HLOG_NOTFOUND)
		resp_write_array_len(&c->out, 0);
}

/* ---------------- LSET LTRIM LREM LINSERT ---------------- */

struct edit_ctx {
	long long a, b;           /* LSET: index; LTRIM: start, end; LREM: count */
	bool arg_ok;              /* LSET: the index parsed */
	int where;                /* LINSERT: LP_BEFORE / LP_AFTER */
	long long result;         /* out: LSET 1 set / 0 out of range; LREM removed; LINSERT length / -1 */
};

static int lset_fn(coll_edit *e, const coll_view *cur)
{
	struct edit_ctx *x = e->arg;
	const resp_slice *val = &e->c->argv[3];
	lp_buf b;
	int rc;

	x->result = 0;
	e->action = COLL_KEEP;
	if (!x->arg_ok)
		return 0;
	if ((rc = list_work(e, cur, val->len + LIST_ENTRY_EXTRA, &b)) < 0)
		return rc;
	if ((rc = list_set(&b, (long)x->a, val->ptr, val->len)) <= 0)
		return rc;
	x->result = 1;
	list_out(e, b.p, b.len);
	return 0;
}

void cmd_lset(client *c)
{
	struct edit_ctx x = { 0 };
	coll_list_op o = { .op = COLL_LIST_SET, .val = &c->argv[3] };
	coll_edit e = { .type = COLL_LIST, .fn = lset_fn, .arg = &x, .list_op = &o };
	x.arg_ok = arg_ll(&c->argv[2], &x.a);
	o.a = x.a;
	if (!x.arg_ok)
		o.op = COLL_LIST_PROBE;
	if (reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		return;
	if (o.done)
		x.result = o.result;
	if (!e.found)
		reply_error(c, "ERR no such key");
	else if (!x.arg_ok)
		reply_err_not_int(c);
	else if (!x.result)
		reply_error(c, "ERR index out of range");
	else
		reply_ok(c);
}

/* LTRIM keeps a slice of the list (coll/list.c note 3). */
static int ltrim_fn(coll_edit *e, const coll_view *cur)
{
	struct edit_ctx *x = e->arg;
	long llen, from, to;
	uint8_t *s;

	if (!list_ok(cur))
		return SPW_E_CORRUPT;
	llen = (long)coll_lp_count(cur);
	if (!list_range(llen, (long)x->a, (long)x->b, &from, &to)) {
		list_out(e, lp_empty, LP_EMPTY_BYTES);
		return 0;
	}
	e->action = COLL_KEEP;
	if (from == 0 && to == llen - 1)
		return 0;
	if (!(s = worker_scratch(e->c->w, cur->used)))
		return -ENOMEM;
	list_out(e, s, list_slice(s, cur->p, llen, from, to));
	return 0;
}

void cmd_ltrim(client *c)
{
	struct edit_ctx x = { 0 };
	coll_list_op o = { .op = COLL_LIST_TRIM };
	coll_edit e = { .type = COLL_LIST, .fn = ltrim_fn, .arg = &x, .list_op = &o };
	if (!arg_ll(&c->argv[2], &x.a) || !arg_ll(&c->argv[3], &x.b)) {
		reply_err_not_int(c);
		return;
	}
	o.a = x.a;
	o.b = x.b;
	if (!reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		reply_ok(c);
}

static int lrem_fn(coll_edit *e, const coll_view *cur)
{
	struct edit_ctx *x = e->arg;
	const resp_slice *val = &e->c->argv[3];
	lp_buf b;
	int rc;

	if ((rc = list_work(e, cur, 0, &b)) < 0)
		return rc;
	x->result = list_rem(&b, (long)x->a, val->ptr, val->len);
	if (x->result)
		list_out(e, b.p, b.len);
	else
		e->action = COLL_KEEP;
	return 0;
}

void cmd_lrem(client *c)
{
	struct edit_ctx x = { 0 };
	coll_edit e = { .type = COLL_LIST, .fn = lrem_fn, .arg = &x };
	if (!arg_ll(&c->argv[2], &x.a)) {
		reply_err_not_int(c);
		return;
	}
	if (!reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		reply_int(c, x.result);
}

static int linsert_fn(coll_edit *e, const coll_view *cur)
{
	struct edit_ctx *x = e->arg;
	const resp_slice *pivot = &e->c->argv[3], *val = &e->c->argv[4];
	lp_buf b;
	int rc;

	x->result = -1;
	e->action = COLL_KEEP;
	if ((rc = list_work(e, cur, val->len + LIST_ENTRY_EXTRA, &b)) < 0)
		return rc;
	if ((rc = list_insert(&b, x->where, pivot->ptr, pivot->len, val->ptr, val->len)) <= 0)
		return rc;
	x->result = coll_lp_count(cur) + 1;
	e->count = (uint32_t)x->result;
	list_out(e, b.p, b.len);
	return 0;
}

void cmd_linsert(client *c)
{
	struct edit_ctx x = { 0 };
	coll_edit e = { .type = COLL_LIST, .fn = linsert_fn, .arg = &x };
	if (OPT_IS(&c->argv[2], "after")) {
		x.where = LP_AFTER;
	} else if (OPT_IS(&c->argv[2], "before")) {
		x.where = LP_BEFORE;
	} else {
		reply_err_syntax(c);
		return;
	}
	if (!reply_store_failed(c, coll_rmw(c, &c->argv[1], &e)))
		reply_int(c, x.result);
}

/* ---------------- LPOS ---------------- */

struct lpos_ctx {
	client *c;
	long rank, count, maxlen;
};

static void lpos_emit(void *ctx, long index)
{
	reply_int(ctx, index);
}

static void lpos_cb(void *ctx, const coll_view *v, const hlog_value *rec)
{
	struct lpos_ctx *x = ctx;
	const resp_slice *ele = &x->c->argv[2];
	(void)rec;
	if (!list_ok(v)) {
		reply_err_store(x->c, SPW_E_CORRUPT);
	} else if (x->count >= 0) {
		/* The array's length first: count the matches, then write them. */
		long n = list_pos(v->p, ele->ptr, ele->len, x->rank, x->count, x->maxlen, NULL, NULL);
		resp_write_array_len(&x->c->out, n);
		list_pos(v->p, ele->ptr, ele->len, x->rank, x->count, x->maxlen, lpos_emit, x->c);
	} else if (!list_pos(v->p, ele->ptr, ele->len, x->rank, -1, x->maxlen, lpos_emit, x->c)) {
		reply_null(x->c);
	}
}

/* LPOS's options, in lposCommand's order and with its messages. */
static bool lpos_args(client *c, struct lpos_ctx *x)
{
	long long v;
	for (int j = 3; j < c->argc; j++) {
		bool more = j + 1 < c->argc;
		if (OPT_IS(&c->argv[j], "rank") && more) {
			if (!arg_ll(&c->argv[++j], &v)) {
				reply_err_not_int(c);
				return false;
			}
			if (v == 0) {
				reply_error(c, "ERR RANK can't be zero: use 1 to start from the first match, 2 from "
					"the second ... or use negative to start from the end of the list");
				return false;
			}
			x->rank = (long)v;
		} else if (OPT_IS(&c->argv[j], "count") && more) {
			if (!arg_ll(&c->argv[++j], &v) || v < 0) {
				reply_error(c, "ERR COUNT can't be negative");
				return false;
			}
			x->count = (long)v;
		} else if (OPT_IS(&c->argv[j], "maxlen") && more) {
			if (!arg_ll(&c->argv[++j], &v) || v < 0) {
				reply_error(c, "ERR MAXLEN can't be negative");
				return false;
			}
			x->maxlen = (long)v;
		} else {
			reply_err_syntax(c);
			return false;
		}
	}
	return true;
}

void cmd_lpos(client *c)
{
	struct lpos_ctx x = { c, 1, -1, 0 };   /* count -1: COUNT not given */
	if (!lpos_args(c, &x))
		return;
	int rc = coll_read(c, &c->argv[1], COLL_LIST, lpos_cb, &x);
	count_list_lookup(c, rc);
	if (reply_store_failed(c, rc) || rc != HLOG_NOTFOUND)
		return;
	if (x.count >= 0)
		resp_write_array_len(&c->out, 0);
	else
		reply_null(c);
}

/* ---------------- LMOVE RPOPLPUSH ---------------- */

struct move_ctx {
	client *c;
	bool from_left, to_left;
	bool found;               /* out: the source has an element, */
	size_t vlen;              /* the scratch's first vlen bytes (note 4) */
	int rc;
	lp_edit pe;               /* rotate_fn's planned edit */
};

/* The source's end element, copied to the scratch's start. */
static void move_peek_cb(void *ctx, const coll_view *v, const hlog_value *rec)
{
	struct move_ctx *x = ctx;
	char buf[LP_INTBUF_SIZE];
	const uint8_t *p;
	const char *s;
	uint8_t *dst;
	(void)rec;
	if (!list_ok(v)) {
		x->rc = SPW_E_CORRUPT;
		return;
	}
	if (!(p = v->large || x->from_left ? lp_first(v->p) : lp_last(v->p)))
		return;
	s = lp_entry_str(p, buf, &x->vlen);
	if (!(dst = worker_scratch(x->c->w, x->vlen ? x->vlen : 1))) {
		x->rc = -ENOMEM;
		return;
	}
	memcpy(dst, s, x->vlen);
	x->found = true;
}

/* One key: pop one end and push onto the other (or the same) end, in one edit: two splices, or
 * one replacing the entry with itself re-encoded when the ends are the same (as the pop and the
 * push would leave it). The element, as text for the reply, goes to the scratch's start. */
static int rotate_fn(coll_edit *e, const coll_view *cur)
{
	struct move_ctx *x = e->arg;
	char buf[LP_INTBUF_SIZE];
	const uint8_t *lp = cur->p, *p;
	size_t off, esz, ilen;
	const char *s;
	uint8_t *dst;
	int rc = 0;

	x->found = false;
	e->action = COLL_KEEP;
	if (!list_ok(cur))
		return SPW_E_CORRUPT;
	if (!(p = x->from_left ? lp_first(lp) : lp_last(lp)))
		return 0;
	s = lp_entry_str(p, buf, &x->vlen);
	if (!(dst = worker_scratch(e->c->w, 2 * x->vlen + LP_ENTRY_EXTRA)))
		return -ENOMEM;
	memcpy(dst, s, x->vlen);
	ilen = lp_entry_encode(dst + x->vlen, dst, x->vlen);
	off = (size_t)(p - lp);
	esz = lp_entry_size(p);
	lp_edit_init(&x->pe, lp);
	if (x->from_left == x->to_left)
		rc = lp_edit_splice(&x->pe, off, esz, dst + x->vlen, ilen, 0);
	else if ((rc = lp_edit_splice(&x->pe, off, esz, NULL, 0, -1)) == 0)
		rc = lp_edit_splice(&x->pe, x->to_left ? LP_HDR_SIZE : cur->used - 1, 0, dst + x->vlen, ilen, 1);
	if (rc < 0)
		return rc;
	x->found = true;
	e->count = coll_lp_count(cur);
	coll_write_lp(e, CENC_QUICKLIST, &x->pe);
	return 0;
}

static void reply_moved(client *c, size_t vlen)
{
	reply_bulk(c, worker_scratch(c->w, vlen ? vlen : 1), vlen);
}

/* Note 4. c->resume.stage 1: the element is on the destination already. */
static void move_generic(client *c, bool from_left, bool to_left)
{
	const resp_slice *src = &c->argv[1], *dst = &c->argv[2];
	struct move_ctx x = { .c = c, .from_left = from_left, .to_left = to_left };
	struct pop_ctx y = { .left = from_left, .count = 1 };
	bool found;
	int rc;

	if (src->len == dst->len && !memcmp(src->ptr, dst->ptr, src->len)) {
		coll_edit e = { .type = COLL_LIST, .fn = rotate_fn, .arg = &x };
		if (reply_store_failed(c, coll_rmw(c, src, &e)))
			return;
		if (x.found)
			reply_moved(c, x.vlen);
		else
			reply_null(c);
		return;
	}
	if (c->resume.stage == 0) {
		if (reply_store_failed(c, command_keys_prefetch(c, 1, 2, 1)))
			return;
		coll_hint h = { .mode = COLL_HINT_LIST, .list_a = from_left ? 0 : -1, .list_index = true };
		rc = coll_read_hint(c, src, COLL_LIST, &h, move_peek_cb, &x);
		if (rc == HLOG_OK)
			rc = x.rc;
		if (reply_store_failed(c, rc))
			return;
		if (!x.found) {
			reply_null(c);
			return;
		}
		struct push_ctx px = { .left = to_left, .vlen = x.vlen };
		resp_slice el = { (const char *)worker_scratch(c->w, x.vlen ? x.vlen : 1), x.vlen };
		coll_list_op o = { .op = COLL_LIST_PUSH, .left = to_left, .elems = &el, .nelems = 1 };
		coll_edit e = { .type = COLL_LIST, .create = true, .fn = push_fn, .arg = &px, .list_op = &o };
		if (reply_store_failed(c, coll_rmw(c, dst, &e)))
			return;
		y.keep = x.vlen;
	}
	rc = pop_run(c, src, &y, &found);
	if (rc == HLOG_PENDING)
		c->resume.stage = 1;
	if (reply_store_failed(c, rc))
		return;
	if (y.n)
		reply_entry(c, lp_first(y.popped));
	else if (c->resume.stage == 0)
		reply_moved(c, x.vlen);   /* another thread emptied the source meanwhile */
	else
		reply_null(c);
}

void cmd_lmove(client *c)
{
	int from, to;
	if ((from = arg_side(c, &c->argv[3])) < 0 || (to = arg_side(c, &c->argv[4])) < 0)
		return;
	move_generic(c, from, to);
}

void cmd_rpoplpush(client *c) { move_generic(c, false, true); }

/* ---------------- LMPOP ---------------- */

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count], parsed as lmpopGenericCommand. */
void cmd_lmpop(client *c)
{
	long long numkeys, count = -1;
	struct pop_ctx x = { 0 };
	int side, where;
	bool found;

	if (!arg_ll(&c->argv[1], &numkeys) || numkeys < 1) {
		reply_error(c, "ERR numkeys should be greater than 0");
		return;
	}
	if (numkeys > c->argc - 3) {   /* no room for LEFT|RIGHT after the keys */
		reply_err_syntax(c);
		return;
	}
	where = 2 + (int)numkeys;
	if ((side = arg_side(c, &c->argv[where])) < 0)
		return;
	for (int j = where + 1; j < c->argc; j++) {
		if (count == -1 && OPT_IS(&c->argv[j], "count") && j + 1 < c->argc) {
			if (!arg_ll(&c->argv[++j], &count) || count < 1) {
				reply_error(c, "ERR count should be greater than 0");
				return;
			}
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	x.left = side;
	x.count = count == -1 ? 1 : (long)count;
	if (numkeys > 1 && reply_store_failed(c, command_keys_prefetch(c, 2, where - 1, 1)))
		return;
	for (int k = 2; k < where; k++) {
		if (reply_store_failed(c, pop_run(c, &c->argv[k], &x, &found)))
			return;
		if (!found || !x.n)
			continue;
		resp_write_array_len(&c->out, 2);
		reply_bulk(c, c->argv[k].ptr, c->argv[k].len);
		reply_popped(c, &x);
		return;
	}
	resp_write_null_array(&c->out);
}
