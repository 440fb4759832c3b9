/*
 * coll_list_fast.c - a push or pop on a large list that stays within its end node
 * (server/coll_list_large.c note 9): one hlog_rmw of the head, planned from the head it is given.
 *
 * Design notes:
 *  1. No read before it and no check of bytes read: the rmw is atomic by itself, as a small
 *     list's is. Its fill patches the head where it lies (coll/deque.c note 4: an RPUSH writes
 *     only its entries).
 *  2. A plan that finds the end node would fill or empty writes nothing and sets slow: the
 *     general path runs (coll_list_large.c note 2). So does a push of an element past
 *     coll_list_elem.c's threshold and a pop that would pop a reference (their parts go in the
 *     general path's group).
 *  3. Buffers: the thread's encoded entries and the popped entries of the last pop (the reply
 *     reads them after the call: trimmed at the next call's entry, coll_list_fast_trim).
 */
#include "server/coll_list_int.h"

#include <errno.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/deque.h"

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };
static __thread lp_buf t_fenc, t_fres;

void coll_list_fast_trim(size_t keep)
{
	if (t_fenc.cap > keep)
		lp_buf_free(&t_fenc);
	if (t_fres.cap > keep)
		lp_buf_free(&t_fres);
}

struct fast {
	coll_list_op *o;
	uint32_t n;               /* PUSH: entries in t_fenc (encoded, no listpack header) */
	dq_end_edit ed;
	size_t new_len;
	bool slow;                /* out: the general path must run (nothing written) */
};

/* Note 9: plan from the head itself; a push or pop that leaves its end node sets slow. */
static int fast_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct fast *f = ctx;
	coll_list_op *o = f->o;
	const uint8_t *a = NULL, *end = NULL;
	coll_head h;
	dq_head d;

	out->action = HLOG_RMW_KEEP;
	f->slow = false;
	if (old && old->rtype == HLOG_T_STRING)
		return SPW_E_WRONGTYPE;
	if (!old || old->rtype != HLOG_T_HEAD || !coll_is_large(old->ptr, old->len) ||
	    !coll_large_parse(old->ptr, old->len, &h))
		return COLL_E_RESTART;   /* changed since coll.c met it: run again on what is there */
	if (h.type != COLL_LIST)   /* coll_large_rmw hands a list command over before any check */
		return SPW_E_WRONGTYPE;
	if (!dq_parse(old->ptr, old->len, &d))
		return SPW_E_CORRUPT;
	if (o->op == COLL_LIST_POP && o->a <= 0) {
		o->n = 0;
		o->popped = lp_empty;
		return 0;
	}
	int rc = o->op == COLL_LIST_PUSH
	             ? dq_end_push(old->ptr, &d, o->left, t_fenc.p, t_fenc.len, f->n, &f->ed)
	             : dq_end_pop(old->ptr, &d, o->left, (uint64_t)o->a, &f->ed, &a, &end);
	if (rc) {
		f->slow = true;
		return 0;
	}
	for (const uint8_t *q = a; o->op == COLL_LIST_POP && q < end; q += lp_entry_size(q))
		if (dq_is_ref(q)) {   /* a popped reference: its tombstone goes in op_pop's group */
			f->slow = true;
			return 0;
		}
	if (o->op == COLL_LIST_POP) {   /* the popped entries, copied out for the reply */
		if (lp_buf_reserve(&t_fres, (size_t)(end - a) + LP_EMPTY_BYTES) < 0)
			return -ENOMEM;
		t_fres.len = dq_run(t_fres.p, a, end, (uint64_t)o->a);
		o->n = (long)o->a;
		o->popped = t_fres.p;
	}
	o->len = (long long)(f->ed.hi - f->ed.lo);
	f->new_len = coll_value_len(f->ed.new_end - COLL_HDR, old->len);
	out->action = HLOG_RMW_WRITE;
	out->rtype = HLOG_T_HEAD;
	out->new_len = f->new_len;
	out->expire_ms = old->expire_ms;
	return 0;
}

static void fast_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct fast *f = ctx;
	dq_end_apply(&f->ed, old->ptr, dst, in_place);
	if (!in_place)
		memset(dst + f->ed.new_end, 0, f->new_len - f->ed.new_end);
}

static const hlog_rmw_ops fast_ops = { fast_plan, fast_fill };

/* Note 9: a push or pop that stays within its end node, as one hlog_rmw of the head planned from
 * the head itself. HLOG_OK with *slow set when the general path must run. */
int coll_list_fast_rmw(client *c, const hlog_key *k, coll_list_op *o, bool *slow)
{
	struct fast f = { .o = o };
	size_t at = 0;
	if (o->op == COLL_LIST_PUSH) {
		size_t need = 0;
		for (int i = 0; i < o->nelems; i++) {
			need += o->elems[i].len + LP_ENTRY_EXTRA;
			if (o->elems[i].len > le_threshold()) {   /* out of line: op_push's group */
				*slow = true;
				return HLOG_OK;
			}
		}
		if (lp_buf_reserve(&t_fenc, need ? need : 1) < 0)
			return -ENOMEM;
		for (int i = 0; i < o->nelems; i++) {
			/* LPUSH a b c leaves c b a at the head: the last argument is the first entry. */
			const resp_slice *a = &o->elems[o->left ? o->nelems - 1 - i : i];
			at += lp_entry_encode(t_fenc.p + at, a->ptr, a->len);
		}
		t_fenc.len = at;
		f.n = (uint32_t)o->nelems;
		if (o->nelems > (int)DQ_C_MAX) {
			*slow = true;
			return HLOG_OK;
		}
	}
	int rc = hlog_rmw(c->w->sess, k, &fast_ops, &f);
	*slow = rc == HLOG_OK && f.slow;
	return rc;
}
