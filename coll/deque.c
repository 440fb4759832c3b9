/*
 * deque.c - a large list's head format, node keys, liveness rule and node cuts (deque.h).
 *
 * Design notes:
 *  1. Nodes by position (docs/ARCHITECTURE.md "Large collections", the list row): element p is in
 *     node p / c, so LINDEX and LSET find their node by arithmetic, with no index of nodes, and a
 *     push or pop changes only an end node. Every node strictly between the two ends holds
 *     exactly c entries, which is what makes the arithmetic true; commands that would break it
 *     (LINSERT, LREM) rewrite the list whole (server/coll_list_large.c note 5).
 *  2. The end nodes live in the head, so a push or a pop that stays within its end node changes
 *     one record. A node becomes a part only when a push moves past it (it is full then), and
 *     stops being one when a pop or LTRIM makes it an end (it is copied into the head) or drops
 *     it. Hence the liveness rule (dq_part_live): strictly between the end nodes; the stale part
 *     of a node now in the head, or of one popped, is garbage for compaction, with no tombstone.
 *  3. Cuts copy entry bytes as they are (coll/list.c note 3) and write each node's count exactly:
 *     a node holds at most DQ_C_MAX (128) entries, far below the listpack's 65535 limit.
 *  4. An edit within one end node (dq_end_push, dq_end_pop) is one splice of the head's bytes
 *     plus its fixed fields and the node's listpack header: applied in place, an RPUSH writes
 *     its entries over the end byte (the right node's is the head's last byte), an LPUSH or a
 *     pop moves the bytes after the change once, as a small list's patch does (server/coll.c
 *     note 6).
 */
#include "coll/deque.h"

#include <errno.h>
#include <string.h>

static void be64_write(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static bool node_ok(const uint8_t *lp, size_t len, uint64_t want)
{
	return len >= LP_EMPTY_BYTES && lp_bytes(lp) == len && lp[len - 1] == LP_EOF &&
	       want > 0 && lp_count(lp) == want;
}

bool dq_parse(const uint8_t *v, size_t len, dq_head *out)
{
	if (len < DQ_HEAD_BYTES || (v[0] & ~COLL_LARGE) != COLL_LIST || !(v[0] & COLL_LARGE))
		return false;
	uint64_t used = lp_u32(v + 4);
	out->lo = coll_u64(v + 48);
	out->hi = coll_u64(v + 56);
	out->c = lp_u32(v + 64);
	out->llen = lp_u32(v + 68);
	out->rlen = lp_u32(v + 72);
	if (out->c < 1 || out->c > DQ_C_MAX || out->lo >= out->hi || coll_u64(v + 16) != out->hi - out->lo ||
	    used != dq_head_used(out->llen, out->rlen) || COLL_HDR + used > len)
		return false;
	out->left = v + DQ_HEAD_BYTES;
	out->right = out->rlen ? out->left + out->llen : NULL;
	uint64_t nlo = dq_first_node(out), nhi = dq_last_node(out);
	uint64_t lend = (nlo + 1) * out->c < out->hi ? (nlo + 1) * out->c : out->hi;
	if (!node_ok(out->left, out->llen, lend - out->lo))
		return false;
	if ((nlo == nhi) != (out->rlen == 0))
		return false;
	return !out->rlen || node_ok(out->right, out->rlen, out->hi - nhi * out->c);
}

size_t dq_write(uint8_t *dst, coll_head *h, uint64_t lo, uint64_t hi, uint32_t c, const uint8_t *l,
                size_t llen, const uint8_t *r, size_t rlen)
{
	if (!r)
		rlen = 0;
	h->type = COLL_LIST;
	h->level = 0;
	h->split = 0;
	h->count = hi - lo;
	coll_large_write(dst, h);
	size_t used = dq_head_used(llen, rlen);
	lp_u32_write(dst + 4, (uint32_t)used);
	coll_u64_write(dst + 48, lo);
	coll_u64_write(dst + 56, hi);
	lp_u32_write(dst + 64, c);
	lp_u32_write(dst + 68, (uint32_t)llen);
	lp_u32_write(dst + 72, (uint32_t)rlen);
	lp_u32_write(dst + 76, 0);
	memmove(dst + DQ_HEAD_BYTES, l, llen);
	if (rlen)
		memmove(dst + DQ_HEAD_BYTES + llen, r, rlen);
	return COLL_HDR + used;
}

void dq_node_key(uint8_t *out, uint64_t cid, uint64_t n)
{
	be64_write(out, cid);
	out[8] = 'n';
	be64_write(out + 9, n);
}

static void le64_write(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

size_t dq_ref_encode(uint8_t *dst, uint64_t pos, uint64_t len)
{
	dst[0] = DQ_REF_MARK;
	lp_u32_write(dst + 1, 16);
	le64_write(dst + 5, pos);
	le64_write(dst + 13, len);
	dst[21] = 21;   /* backlen: the entry's bytes before it */
	return DQ_REF_ENTRY_BYTES;
}

void dq_ref_parse(const uint8_t *e, uint64_t *pos, uint64_t *len)
{
	*pos = le64(e + 5);
	*len = le64(e + 13);
}

void dq_elem_key(uint8_t *out, uint64_t cid, uint64_t pos)
{
	be64_write(out, cid);
	out[8] = 'e';
	be64_write(out + 9, pos);
}

bool dq_elem_live(const uint8_t *v, size_t len, uint64_t pos)
{
	dq_head d;
	if (!dq_parse(v, len, &d))
		return true;
	return pos >= d.lo && pos < d.hi;
}

size_t dq_replace(uint8_t *dst, const uint8_t *lp, const uint8_t *at, const uint8_t *ent, size_t elen)
{
	size_t before = (size_t)(at - lp), osz = lp_entry_size(at), total = lp_bytes(lp);
	size_t after = total - before - osz, len = total - osz + elen;
	memcpy(dst, lp, before);
	memcpy(dst + before, ent, elen);
	memcpy(dst + before + elen, at + osz, after);
	lp_u32_write(dst, (uint32_t)len);
	return len;
}

bool dq_part_live(const uint8_t *v, size_t len, uint64_t n)
{
	dq_head d;
	if (!dq_parse(v, len, &d))
		return true;   /* not ours to judge: keep it */
	return n > dq_first_node(&d) && n < dq_last_node(&d);
}

uint32_t dq_choose_c(size_t bytes, uint64_t count, size_t record_max)
{
	if (!count)
		return DQ_C_MAX;
	uint64_t per = bytes / count + 1;
	uint64_t c = record_max / per;
	return c < 1 ? 1 : c > DQ_C_MAX ? DQ_C_MAX : (uint32_t)c;
}

size_t dq_run(uint8_t *dst, const uint8_t *a, const uint8_t *end, uint64_t count)
{
	size_t body = (size_t)(end - a), len = LP_HDR_SIZE + body + 1;
	if (count > LP_COUNT_UNKNOWN)
		count = LP_COUNT_UNKNOWN;
	lp_u32_write(dst, (uint32_t)len);
	dst[4] = (uint8_t)count;
	dst[5] = (uint8_t)(count >> 8);
	memcpy(dst + LP_HDR_SIZE, a, body);
	dst[len - 1] = LP_EOF;
	return len;
}

const uint8_t *dq_skip(const uint8_t *lp, const uint8_t *p, uint64_t k)
{
	for (; p && k; k--)
		p = lp_next(lp, p);
	return p;
}

long dq_split(const uint8_t *w, uint64_t wlo, uint32_t c, lp_buf *out, size_t *offs)
{
	uint64_t n = lp_count(w), nodes = dq_split_nodes(wlo, n, c), pos = wlo;
	const uint8_t *p = lp_first(w), *eof = w + lp_bytes(w) - 1;

	out->len = 0;
	if (lp_buf_reserve(out, lp_bytes(w) + nodes * LP_EMPTY_BYTES) < 0)
		return -ENOMEM;
	for (uint64_t j = 0; j < nodes; j++) {
		uint64_t room = c - pos % c, k = room < wlo + n - pos ? room : wlo + n - pos;
		const uint8_t *end = dq_skip(w, p, k);
		if (!end)
			end = eof;
		offs[j] = out->len;
		out->len += dq_run(out->p + out->len, p, end, k);
		pos += k;
		p = end == eof ? NULL : end;
	}
	offs[nodes] = out->len;
	return (long)nodes;
}

/* The end node an edit changes: the left one, or the right one (a one-node list's is the left). */
static void end_node(const uint8_t *v, const dq_head *d, bool left, dq_end_edit *e, uint32_t *len,
                     uint32_t *count)
{
	bool l = left || !d->right;
	e->node_off = l ? DQ_HEAD_BYTES : DQ_HEAD_BYTES + d->llen;
	*len = l ? d->llen : d->rlen;
	*count = lp_count(v + e->node_off);
	e->old_end = COLL_HDR + dq_head_used(d->llen, d->rlen);
	e->llen = d->llen;
	e->rlen = d->rlen;
	e->lo = d->lo;
	e->hi = d->hi;
}

static void end_finish(dq_end_edit *e, const dq_head *d, bool left, uint32_t len, uint32_t count)
{
	long delta = (long)e->ins_len - (long)e->del;
	e->node_len = (uint32_t)((long)len + delta);
	e->node_count = count;
	e->new_end = (size_t)((long)e->old_end + delta);
	if (left || !d->right)
		e->llen = e->node_len;
	else
		e->rlen = e->node_len;
}

int dq_end_push(const uint8_t *v, const dq_head *d, bool left, const uint8_t *ins, size_t ins_len,
                uint32_t n, dq_end_edit *e)
{
	uint32_t len, count;
	if (left ? d->lo % d->c < n : (d->hi - 1) % d->c + n >= d->c)
		return 1;
	end_node(v, d, left, e, &len, &count);
	e->off = left ? e->node_off + LP_HDR_SIZE : e->node_off + len - 1;
	e->del = 0;
	e->ins = ins;
	e->ins_len = ins_len;
	if (left)
		e->lo -= n;
	else
		e->hi += n;
	end_finish(e, d, left, len, count + n);
	return 0;
}

int dq_end_pop(const uint8_t *v, const dq_head *d, bool left, uint64_t k, dq_end_edit *e,
               const uint8_t **a, const uint8_t **end)
{
	uint32_t len, count;
	end_node(v, d, left, e, &len, &count);
	if (k < 1 || k >= count)
		return 1;
	const uint8_t *lp = v + e->node_off, *eof = lp + len - 1, *p;
	if (left) {
		*a = lp_first(lp);
		*end = (p = dq_skip(lp, *a, k)) ? p : eof;
		e->lo += k;
	} else {
		p = lp_last(lp);
		for (uint64_t i = 1; i < k && p; i++)
			p = lp_prev(lp, p);
		*a = p;
		*end = eof;
		e->hi -= k;
	}
	e->off = (size_t)(*a - v);
	e->del = (size_t)(*end - *a);
	e->ins = NULL;
	e->ins_len = 0;
	end_finish(e, d, left, len, count - (uint32_t)k);
	return 0;
}

void dq_end_apply(const dq_end_edit *e, const uint8_t *old, uint8_t *dst, bool in_place)
{
	if (!in_place)
		memcpy(dst, old, e->off);
	memmove(dst + e->off + e->ins_len, old + e->off + e->del, e->old_end - e->off - e->del);
	if (e->ins_len)
		memcpy(dst + e->off, e->ins, e->ins_len);
	lp_u32_write(dst + 4, (uint32_t)(e->new_end - COLL_HDR));
	coll_u64_write(dst + 16, e->hi - e->lo);
	coll_u64_write(dst + 48, e->lo);
	coll_u64_write(dst + 56, e->hi);
	lp_u32_write(dst + 68, e->llen);
	lp_u32_write(dst + 72, e->rlen);
	uint8_t *lp = dst + e->node_off;
	lp_u32_write(lp, e->node_len);
	lp[4] = (uint8_t)e->node_count;
	lp[5] = (uint8_t)(e->node_count >> 8);
}
