/*
 * cmd_hll.c - the HyperLogLog commands (Redis's hyperloglog.c): PFADD PFCOUNT PFMERGE, over the
 * encodings of coll/hll.c. An HLL is a string (TYPE string, GET shows its bytes), so every command
 * works on string records; the bytes are Redis's to the byte (coll/hll.c note 1).
 *
 * Design notes:
 *  1. Errors in Redis's order: a key of another type is WRONGTYPE (the records' type, as the string
 *     commands: cmd_string.c note 9); a string that is not an HLL (isHLLObjectOrReply) is
 *     "WRONGTYPE Key is not a valid HyperLogLog string value."; a corrupt sparse encoding is
 *     "INVALIDOBJ Corrupted HLL object detected". The last two are found inside plan or a read
 *     callback and kept in the command's ctx (hll_err), so no project error code is needed.
 *  2. PFADD is one hlog_rmw (cmd_string.c note 3). A dense value is not copied: plan only asks
 *     whether some element would raise its register (then at least one does, and PFADD answers 1),
 *     and fill applies the elements to dst, which in place touches just the registers that grow and
 *     the cache byte (the size never changes). A sparse value, or a new key, is edited by plan in
 *     the worker's scratch (sized so that it only promotes where Redis does: hll_edit in
 *     coll/hll.h) and fill copies the result. An element met after a corruption is found leaves
 *     the changes before it written, as Redis's in-place edit does.
 *  3. PFCOUNT of one key answers the cached cardinality when it is valid (KEEP); otherwise it
 *     estimates and writes the 8 bytes of the cache back, as Redis does (it is a write there too,
 *     propagated; here it reaches the AOF as a record). PFCOUNT of several keys merges every key
 *     into one byte per register on the stack straight from the records (no copy) and writes
 *     nothing; neither does PFMERGE's reading.
 *  4. PFMERGE reads every source (argv[1..]: the destination too, as Redis) into the registers'
 *     maximum, then writes the destination with one hlog_rmw whose plan applies the maximum register
 *     by register (hll_edit_set in index order: Redis's bytes, promotion included; dense at once
 *     when a source was dense). The destination keeps its TTL. Not atomic across workers
 *     (cmd_string.c note 7): a destination changed between the reads and the write is checked
 *     again in plan, and the maximum raises what it holds then.
 *  5. Keyspace hits and misses as Redis's lookups: PFCOUNT and PFMERGE read with lookupKeyRead
 *     (counted, a wrong-type key is a hit), PFADD and PFMERGE's destination write with
 *     lookupKeyWrite (not counted).
 *  6. Parking (cmd_string.c note 8): each command changes the store only in its last operation,
 *     so a re-run after HLOG_PENDING repeats nothing. The multi-key ones prefetch every key first.
 */
#include "server/server_int.h"

#include <errno.h>
#include <string.h>

#include "coll/hll.h"

/* ---------------- shared ---------------- */

enum { HLL_ERR_NONE, HLL_ERR_NOT_HLL, HLL_ERR_CORRUPT };

static void reply_hll_err(client *c, int err)
{
	if (err == HLL_ERR_NOT_HLL)
		reply_error(c, "WRONGTYPE Key is not a valid HyperLogLog string value.");
	else
		reply_error(c, "INVALIDOBJ Corrupted HLL object detected");
}

static size_t sparse_max_bytes(void)
{
	return (size_t)__atomic_load_n(&g_cfg.hll_sparse_max_bytes, __ATOMIC_RELAXED);
}

static inline bool old_not_string(const hlog_value *old)
{
	return old && SPW_UNLIKELY(old->rtype != HLOG_T_STRING);
}

/*
 * Set e up to edit a copy of old (NULL: a new, empty HLL) in the worker's scratch: the sparse copy
 * with room to grow up to sparse_max (bounded by what a sparse HLL can grow by at all), then the
 * dense buffer a promotion writes. 0 or -ENOMEM.
 */
static int edit_in_scratch(worker *w, const hlog_value *old, size_t sparse_max, hll_edit *e /* out */)
{
	size_t len = old ? old->len : HLL_EMPTY_SIZE;
	size_t room = sparse_max > len ? SPW_MIN(sparse_max - len, (size_t)HLL_SPARSE_GROWTH_MAX) : 0;
	uint8_t *buf = worker_scratch(w, HLL_DENSE_SIZE + len + room);
	if (!buf)
		return -ENOMEM;
	e->dense = buf;
	e->p = buf + HLL_DENSE_SIZE;
	e->len = len;
	e->cap = len + room;
	e->sparse_max = sparse_max;
	e->promoted = false;
	if (old)
		memcpy(e->p, old->ptr, len);
	else
		hll_empty(e->p);
	return 0;
}

/* A new value that plan built whole in the worker's scratch, for fill to copy. */
struct built {
	const uint8_t *p;
	size_t len;
};

/* Plan to write what e holds, keeping old's TTL (Redis edits the value in place). Returns 0. */
static int built_plan(struct built *b, const hll_edit *e, const hlog_value *old, hlog_rmw_plan *out)
{
	b->p = e->p;
	b->len = e->len;
	out->action = HLOG_RMW_WRITE;
	out->new_len = e->len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void built_fill(const struct built *b, uint8_t *dst)
{
	memcpy(dst, b->p, b->len);
}

/* ---------------- PFADD ---------------- */

struct pfadd_ctx {
	worker *w;
	const resp_slice *els;
	int nels;
	size_t sparse_max;
	/* outputs of plan */
	int err;
	bool updated;
	struct built val;           /* the new value when plan built it (sparse, new), else p NULL */
};

static bool dense_would_grow(const struct pfadd_ctx *a, const uint8_t *regs)
{
	for (int j = 0; j < a->nels; j++) {
		long reg;
		int count = hll_pattern(a->els[j].ptr, a->els[j].len, &reg);
		if ((unsigned)count > hll_dense_get(regs, reg))
			return true;
	}
	return false;
}

/* Note 2: a sparse or new HLL edited in scratch. KEEP when nothing changed. */
static int pfadd_plan_edit(struct pfadd_ctx *a, const hlog_value *old, hlog_rmw_plan *out)
{
	hll_edit e;
	int grown = 0;

	if (edit_in_scratch(a->w, old, a->sparse_max, &e) < 0)
		return -ENOMEM;
	for (int j = 0; j < a->nels; j++) {
		int rc = hll_edit_add(&e, a->els[j].ptr, a->els[j].len);
		if (rc < 0) {
			a->err = HLL_ERR_CORRUPT;
			break;
		}
		grown += rc;
	}
	a->updated = !old || grown > 0;   /* creating the key counts as a change in Redis */
	if (!a->updated)
		return 0;
	if (!a->err)
		hll_cache_invalidate(e.p);
	return built_plan(&a->val, &e, old, out);
}

static int pfadd_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct pfadd_ctx *a = ctx;

	a->err = HLL_ERR_NONE;
	a->updated = false;
	a->val.p = NULL;
	out->action = HLOG_RMW_KEEP;
	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (old && !hll_valid(old->ptr, old->len)) {
		a->err = HLL_ERR_NOT_HLL;
		return 0;
	}
	if (!old || hll_encoding(old->ptr) != HLL_DENSE)
		return pfadd_plan_edit(a, old, out);
	if (!dense_would_grow(a, old->ptr + HLL_HDR_SIZE))
		return 0;
	a->updated = true;
	out->action = HLOG_RMW_WRITE;
	out->new_len = old->len;
	out->expire_ms = old->expire_ms;
	return 0;
}

static void pfadd_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct pfadd_ctx *a = ctx;

	if (a->val.p) {
		built_fill(&a->val, dst);
		return;
	}
	if (!in_place)
		memcpy(dst, old->ptr, old->len);
	for (int j = 0; j < a->nels; j++) {
		long reg;
		int count = hll_pattern(a->els[j].ptr, a->els[j].len, &reg);
		hll_dense_set(dst + HLL_HDR_SIZE, reg, (uint8_t)count);
	}
	hll_cache_invalidate(dst);
}

static const hlog_rmw_ops pfadd_ops = { pfadd_plan, pfadd_fill };

void cmd_pfadd(client *c)
{
	struct pfadd_ctx a = { .w = c->w, .els = c->argv + 2, .nels = c->argc - 2,
	                       .sparse_max = sparse_max_bytes() };
	hlog_key k;

	key_from_arg(&k, &c->argv[1]);
	if (reply_store_failed(c, hlog_rmw(c->w->sess, &k, &pfadd_ops, &a)))
		return;
	if (a.err)
		reply_hll_err(c, a.err);
	else
		reply_int(c, a.updated ? 1 : 0);
}

/* ---------------- PFCOUNT ---------------- */

struct pfcount_ctx {
	int err;
	bool found;
	uint64_t card;
};

/* Note 3: the cache, or the estimate written into the cache. */
static int pfcount_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct pfcount_ctx *x = ctx;

	x->err = HLL_ERR_NONE;
	x->found = old != NULL;
	x->card = 0;
	out->action = HLOG_RMW_KEEP;
	if (!old)
		return 0;
	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (!hll_valid(old->ptr, old->len)) {
		x->err = HLL_ERR_NOT_HLL;
		return 0;
	}
	if (hll_cache_get(old->ptr, &x->card))
		return 0;
	if (hll_count(old->ptr, old->len, &x->card) < 0) {
		x->err = HLL_ERR_CORRUPT;
		return 0;
	}
	out->action = HLOG_RMW_WRITE;
	out->new_len = old->len;
	out->expire_ms = old->expire_ms;
	return 0;
}

static void pfcount_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	if (!in_place)
		memcpy(dst, old->ptr, old->len);
	hll_cache_put(dst, ((struct pfcount_ctx *)ctx)->card);
}

static const hlog_rmw_ops pfcount_ops = { pfcount_plan, pfcount_fill };

struct merge_ctx {
	uint8_t *max;
	int err;
	bool dense;                 /* a source was dense */
};

static void read_merge(void *ctx, const hlog_value *v)
{
	struct merge_ctx *m = ctx;
	if (!hll_valid(v->ptr, v->len)) {
		m->err = HLL_ERR_NOT_HLL;
		return;
	}
	if (hll_encoding(v->ptr) == HLL_DENSE)
		m->dense = true;
	if (hll_merge(m->max, v->ptr, v->len) < 0)
		m->err = HLL_ERR_CORRUPT;
}

/* Merge argv[1..] into m->max (zeroed here), absent keys as empty HLLs, stopping at the first
 * error as Redis. false when it replied (an error) or parked. */
static bool sources_merge(client *c, struct merge_ctx *m)
{
	keys_ahead a;
	hlog_key k;

	if (reply_store_failed(c, command_keys_prefetch(c, 1, -1, 1)))
		return false;
	memset(m->max, 0, HLL_REGISTERS);
	keys_ahead_init(&a, c, 1, 1, c->argc - 1);
	for (int i = 1; i < c->argc; i++) {
		keys_ahead_next(&a, &k);
		int rc = str_read(c, &k, read_merge, m);
		if (rc != HLOG_PENDING)
			count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
		if (reply_store_failed(c, rc))
			return false;
		if (m->err) {
			reply_hll_err(c, m->err);
			return false;
		}
	}
	return true;
}

void cmd_pfcount(client *c)
{
	if (c->argc > 2) {
		uint8_t max[HLL_REGISTERS];
		struct merge_ctx m = { .max = max };
		if (sources_merge(c, &m))
			reply_int(c, (long long)hll_count_raw(max));
		return;
	}
	struct pfcount_ctx x = { 0 };
	hlog_key k;
	key_from_arg(&k, &c->argv[1]);
	int rc = hlog_rmw(c->w->sess, &k, &pfcount_ops, &x);
	if (rc != HLOG_PENDING)
		count_lookup(c, x.found);
	if (reply_store_failed(c, rc))
		return;
	if (x.err)
		reply_hll_err(c, x.err);
	else
		reply_int(c, (long long)x.card);
}

/* ---------------- PFMERGE ---------------- */

struct pfmerge_ctx {
	worker *w;
	const struct merge_ctx *src;
	size_t sparse_max;
	/* outputs of plan */
	int err;
	struct built val;
};

static int pfmerge_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct pfmerge_ctx *x = ctx;
	hll_edit e;

	x->err = HLL_ERR_NONE;
	out->action = HLOG_RMW_KEEP;
	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	if (old && !hll_valid(old->ptr, old->len)) {
		x->err = HLL_ERR_NOT_HLL;   /* changed since it was read (note 4) */
		return 0;
	}
	if (edit_in_scratch(x->w, old, x->sparse_max, &e) < 0)
		return -ENOMEM;
	if (x->src->dense && hll_edit_to_dense(&e) < 0) {
		x->err = HLL_ERR_CORRUPT;
		return 0;
	}
	for (long i = 0; i < HLL_REGISTERS; i++)
		if (x->src->max[i])
			hll_edit_set(&e, i, x->src->max[i]);   /* -1 (corrupt) is ignored, as Redis does */
	hll_cache_invalidate(e.p);
	return built_plan(&x->val, &e, old, out);
}

static void pfmerge_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	(void)old;
	(void)in_place;
	built_fill(&((struct pfmerge_ctx *)ctx)->val, dst);
}

static const hlog_rmw_ops pfmerge_ops = { pfmerge_plan, pfmerge_fill };

void cmd_pfmerge(client *c)
{
	uint8_t max[HLL_REGISTERS];
	struct merge_ctx m = { .max = max };
	struct pfmerge_ctx x = { .w = c->w, .src = &m, .sparse_max = sparse_max_bytes() };
	hlog_key k;

	if (!sources_merge(c, &m))
		return;
	key_from_arg(&k, &c->argv[1]);
	if (reply_store_failed(c, hlog_rmw(c->w->sess, &k, &pfmerge_ops, &x)))
		return;
	if (x.err)
		reply_hll_err(c, x.err);
	else
		reply_ok(c);
}
