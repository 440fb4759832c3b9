/*
 * dev_fault.c - the fault-injecting wrapper ("fault:<type>"), as SQLite's test_vfs.c.
 *
 * Wraps any backend and, once armed with dev_fault_set, counts the IOs of the chosen kinds; the nth
 * (or, sticky, the nth and every later one) fails with an errno without reaching the device, comes
 * back short (reads), or is torn at a sector boundary (writes: only the first sectors are written,
 * and the result says how many bytes made it). Recovery tests loop over n.
 *
 * Each caller request travels to the inner device as a shadow request (kept on a per-queue free
 * list) whose callback adjusts the result and finishes the caller's request on the same thread.
 * The spec is read under a mutex per IO: this is a test device, correctness over speed.
 *
 * Sections: device open/close and arming; the text form; queue open/close; enqueue; completion;
 * the rest.
 */
#include "device/dev_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct fault_dev {
	dev base;
	dev *inner;
	pthread_mutex_t lock;        /* guards spec and count */
	dev_fault_spec spec;
	uint64_t count;              /* matching IOs since dev_fault_set */
	_Atomic uint64_t hits;
} fault_dev;

typedef struct fault_shadow {
	dev_req r;                   /* the request the inner device sees */
	dev_req *outer;
	int kind;                    /* what to do to the result */
	uint64_t keep;               /* SHORT_READ / TORN_WRITE: bytes that count */
	struct fault_shadow *next;
	struct iovec iov[DEV_IOV_MAX];
} fault_shadow;

typedef struct fault_queue {
	dev_queue base;
	dev_queue *inner;
	fault_shadow *free;
} fault_queue;

static const dev_ops fault_ops;

/* ---- device open/close and arming ----------------------------------------------------------- */

static void fault_close(dev *bd)
{
	fault_dev *d = (fault_dev *)bd;
	dev_close(d->inner);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int dev_fault_open(const dev_config *cfg, const char *inner, dev **out, char *err, size_t errlen)
{
	dev_config icfg = *cfg;
	fault_dev *d;
	dev *in = NULL;
	int rc;

	if (strncasecmp(inner, "fault:", 6) == 0) {
		dev_err_set(err, errlen, "a fault device cannot wrap another fault device");
		return -EINVAL;
	}
	icfg.type = inner;
	rc = dev_open(&icfg, &in, err, errlen);
	if (rc)
		return rc;
	d = calloc(1, sizeof(*d));
	if (!d) {
		dev_close(in);
		dev_err_set(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* The wrapper looks like the inner device and shares its segment table (so truncation and
	 * removal act on the real segments). */
	d->base.ops = &fault_ops;
	d->base.name = "fault";
	d->base.caps = in->caps | DEV_CAP_FAULT;
	d->base.sector_bytes = in->sector_bytes;
	d->base.mem_align = in->mem_align;
	d->base.throttle_limit = in->throttle_limit;
	d->base.queue_depth = in->queue_depth;
	d->base.segment_shift = in->segment_shift;
	d->base.segment_bytes = in->segment_bytes;
	d->base.segs = in->segs;
	atomic_init(&d->base.inflight, 0);
	d->inner = in;
	pthread_mutex_init(&d->lock, NULL);
	atomic_init(&d->hits, 0);
	*out = &d->base;
	return 0;
}

int dev_fault_set(dev *bd, const dev_fault_spec *spec)
{
	fault_dev *d = (fault_dev *)bd;
	if (!bd || !(bd->caps & DEV_CAP_FAULT) || bd->ops != &fault_ops)
		return -ENOTSUP;
	if (!spec || spec->kind < DEV_FAULT_NONE || spec->kind > DEV_FAULT_TORN_WRITE ||
	    (spec->kind != DEV_FAULT_NONE && spec->nth == 0) ||
	    (spec->kind == DEV_FAULT_ERROR && spec->err >= 0))
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	d->spec = *spec;
	d->count = 0;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* ---- the text form (device.h has the grammar) ---------------------------------------------- */

/* What a bare word sets. */
enum { FW_KIND, FW_ERRNO, FW_OPS, FW_STICKY };

static const struct fault_bare_word {
	const char *name;
	uint8_t sets;           /* FW_* */
	int val;                /* the kind, the errno (FW_ERRNO also sets kind error), the ops mask, sticky */
} fault_bare_words[] = {
	{ "none", FW_KIND, DEV_FAULT_NONE },          { "off", FW_KIND, DEV_FAULT_NONE },
	{ "error", FW_KIND, DEV_FAULT_ERROR },
	{ "short-read", FW_KIND, DEV_FAULT_SHORT_READ }, { "short", FW_KIND, DEV_FAULT_SHORT_READ },
	{ "torn-write", FW_KIND, DEV_FAULT_TORN_WRITE }, { "torn", FW_KIND, DEV_FAULT_TORN_WRITE },
	{ "eio", FW_ERRNO, EIO },                     { "enospc", FW_ERRNO, ENOSPC },
	{ "read", FW_OPS, 1u << DEV_OP_READ },        { "reads", FW_OPS, 1u << DEV_OP_READ },
	{ "write", FW_OPS, 1u << DEV_OP_WRITE },      { "writes", FW_OPS, 1u << DEV_OP_WRITE },
	{ "any", FW_OPS, (1u << DEV_OP_READ) | (1u << DEV_OP_WRITE) },
	{ "once", FW_STICKY, 0 },                     { "sticky", FW_STICKY, 1 },
};

/* A bare word (NUL-terminated in w) into s: a name of fault_bare_words or a count. 0 or -EINVAL. */
static int fault_bare(const char *w, dev_fault_spec *s)
{
	long long nth;
	for (size_t i = 0; i < SPW_ARRAY_LEN(fault_bare_words); i++) {
		const struct fault_bare_word *b = &fault_bare_words[i];
		if (strcasecmp(w, b->name) != 0)
			continue;
		switch (b->sets) {
		case FW_KIND: s->kind = b->val; break;
		case FW_ERRNO: s->kind = DEV_FAULT_ERROR; s->err = -b->val; break;
		case FW_OPS: s->ops = (uint32_t)b->val; break;
		case FW_STICKY: s->sticky = b->val != 0; break;
		}
		return 0;
	}
	if (spw_parse_ll(w, strlen(w), &nth) && nth >= 1) {
		s->nth = (uint64_t)nth;
		return 0;
	}
	return -EINVAL;
}

/* A "key=value" word (key and val NUL-terminated) into s. 0 or -EINVAL. */
static int fault_setting(const char *key, char *val, dev_fault_spec *s)
{
	static const struct { const char *name; int err; } errs[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EROFS", EROFS }, { "EAGAIN", EAGAIN },
	};
	char *end;
	if (strcasecmp(key, "nth") == 0 || strcasecmp(key, "tear") == 0) {
		bool nth = key[0] == 'n' || key[0] == 'N';
		errno = 0;
		unsigned long long v = strtoull(val, &end, 10);
		if (!*val || *end || errno || v == 0 || (!nth && v > UINT32_MAX))
			return -EINVAL;
		if (nth)
			s->nth = v;
		else
			s->tear_sectors = (uint32_t)v;
		return 0;
	}
	if (strcasecmp(key, "err") == 0) {
		for (size_t i = 0; i < SPW_ARRAY_LEN(errs); i++)
			if (strcasecmp(val, errs[i].name) == 0) {
				s->err = -errs[i].err;
				return 0;
			}
		long v = strtol(val, &end, 10);
		if (!*val || *end || v == 0 || v > 4095 || v < -4095)
			return -EINVAL;
		s->err = v > 0 ? (int)-v : (int)v;
		return 0;
	}
	if (strcasecmp(key, "ops") == 0) {
		uint32_t mask = 0;
		for (char *tok = strtok_r(val, "|", &end); tok; tok = strtok_r(NULL, "|", &end)) {
			if (strcasecmp(tok, "read") == 0)
				mask |= 1u << DEV_OP_READ;
			else if (strcasecmp(tok, "write") == 0)
				mask |= 1u << DEV_OP_WRITE;
			else if (strcasecmp(tok, "flush") == 0)
				mask |= 1u << DEV_OP_FLUSH;
			else
				return -EINVAL;
		}
		if (!mask)
			return -EINVAL;
		s->ops = mask;
		return 0;
	}
	return -EINVAL;
}

/* One word of the text form (n bytes at w) into s. 0 or -EINVAL. */
static int fault_word(const char *w, size_t n, dev_fault_spec *s)
{
	char buf[64], *val;
	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, w, n);
	buf[n] = 0;
	val = strchr(buf, '=');
	if (!val)
		return fault_bare(buf, s);
	*val++ = 0;
	return fault_setting(buf, val, s);
}

int dev_fault_spec_parse(const char *text, dev_fault_spec *out, char *why, size_t whylen)
{
	/* ops 0: no IO kind named; the default follows the fault (below). */
	dev_fault_spec s = { .kind = DEV_FAULT_ERROR, .nth = 1, .err = -EIO, .ops = 0 };
	const char *p = text;
	bool any = false;

	if (!text || !out)
		return -EINVAL;
	p += strspn(p, " ,\t");
	while (*p) {
		size_t n = strcspn(p, " ,\t");
		if (fault_word(p, n, &s) != 0) {
			dev_err_set(why, whylen, "'%.*s' is not one of read, write, any, a count >= 1, once, "
			            "sticky, eio, enospc, short, torn, off", (int)n, p);
			return -EINVAL;
		}
		any = true;
		p += n;
		p += strspn(p, " ,\t");
	}
	if (!any)
		s.kind = DEV_FAULT_NONE;   /* "" disarms */
	if (!s.ops)   /* a torn write tears writes; an error or a short read hits reads */
		s.ops = 1u << (s.kind == DEV_FAULT_TORN_WRITE ? DEV_OP_WRITE : DEV_OP_READ);
	*out = s;
	return 0;
}

uint64_t dev_fault_hits(dev *bd)
{
	if (!bd || bd->ops != &fault_ops)
		return 0;
	return atomic_load(&((fault_dev *)bd)->hits);
}

/* ---- queue open/close ----------------------------------------------------------------------- */

static int fault_queue_open(dev *bd, dev_queue **out)
{
	fault_dev *d = (fault_dev *)bd;
	fault_queue *q = calloc(1, sizeof(*q));
	int rc;
	if (!q)
		return -ENOMEM;
	rc = dev_queue_open(d->inner, &q->inner);
	if (rc) {
		free(q);
		return rc;
	}
	dev_queue_base_init(&q->base, bd, &fault_ops, bd->queue_depth);
	*out = &q->base;
	return 0;
}

static void fault_queue_close(dev_queue *bq)
{
	fault_queue *q = (fault_queue *)bq;
	dev_queue_drain(bq);
	dev_queue_close(q->inner);
	while (q->free) {
		fault_shadow *s = q->free;
		q->free = s->next;
		free(s);
	}
	dev_queue_base_fini(bq);
	free(q);
}

/* ---- enqueue -------------------------------------------------------------------------------- */

/* What the armed spec does to this IO (DEV_FAULT_NONE for most); *spec gets a copy of the spec. */
static int fault_decide(fault_dev *d, int op, dev_fault_spec *spec /* out */)
{
	int kind = DEV_FAULT_NONE;
	pthread_mutex_lock(&d->lock);
	const dev_fault_spec *s = &d->spec;
	*spec = *s;
	uint32_t mask = s->ops ? s->ops : (1u << DEV_OP_READ) | (1u << DEV_OP_WRITE);
	if (s->kind != DEV_FAULT_NONE && (mask & (1u << op))) {
		d->count++;
		if (d->count == s->nth || (s->sticky && d->count > s->nth))
			kind = s->kind;
		/* A short read applies to reads and a torn write to writes only. */
		if ((kind == DEV_FAULT_SHORT_READ && op != DEV_OP_READ) ||
		    (kind == DEV_FAULT_TORN_WRITE && op != DEV_OP_WRITE))
			kind = DEV_FAULT_NONE;
	}
	pthread_mutex_unlock(&d->lock);
	return kind;
}

/* The IO fault_decide counted was refused before it reached the device (throttle, memory): the
 * caller's retry is the same IO, so it must not count twice. */
static void fault_uncount(fault_dev *d, int op)
{
	pthread_mutex_lock(&d->lock);
	uint32_t mask = d->spec.ops ? d->spec.ops : (1u << DEV_OP_READ) | (1u << DEV_OP_WRITE);
	if (d->spec.kind != DEV_FAULT_NONE && (mask & (1u << op)) && d->count > 0)
		d->count--;
	pthread_mutex_unlock(&d->lock);
}

static void fault_inner_done(dev_req *ir, int64_t res);

static int fault_enqueue(dev_queue *bq, dev_req *r, int op)
{
	fault_queue *q = (fault_queue *)bq;
	fault_dev *d = (fault_dev *)bq->dev;
	fault_shadow *s;
	int rc = dev_req_begin(bq, r, op);
	if (rc)
		return rc;
	r->p.pending = 1;

	dev_fault_spec spec;
	int kind = fault_decide(d, op, &spec);
	uint64_t sector = bq->dev->sector_bytes;
	uint64_t keep = r->p.len;
	if (kind == DEV_FAULT_SHORT_READ) {
		keep = r->p.len / 2 / sector * sector;
	} else if (kind == DEV_FAULT_TORN_WRITE) {
		keep = spec.tear_sectors ? (uint64_t)spec.tear_sectors * sector
		                            : r->p.len / 2 / sector * sector;
		keep = SPW_MIN(keep, r->p.len);
	}
	if (kind == DEV_FAULT_ERROR || (kind == DEV_FAULT_TORN_WRITE && keep == 0)) {
		atomic_fetch_add(&d->hits, 1);
		/* Never reaches the device; completes in the next dev_reap. */
		int64_t res = kind == DEV_FAULT_ERROR ? spec.err : 0;
		if (dev_req_piece_end(r, 0, r->p.len, res))
			dev_queue_done_push(bq, r);
		return 0;
	}

	s = q->free;
	if (s) {
		q->free = s->next;
	} else if (!(s = malloc(sizeof(*s)))) {
		fault_uncount(d, op);
		dev_req_cancel(bq, r);
		return -ENOMEM;
	}
	memset(&s->r, 0, sizeof(s->r));
	s->outer = r;
	s->kind = kind;
	s->keep = keep;
	s->r.offset = r->offset;
	s->r.iov = r->iov;
	s->r.iovcnt = r->iovcnt;
	s->r.done = fault_inner_done;
	s->r.ctx = s;
	if (kind == DEV_FAULT_TORN_WRITE) {
		s->r.iovcnt = dev_iov_slice(r->iov, r->iovcnt, 0, keep, s->iov);
		s->r.iov = s->iov;
	}
	rc = q->inner->ops->enqueue(q->inner, &s->r, op);
	if (rc) {
		s->next = q->free;
		q->free = s;
		fault_uncount(d, op);
		dev_req_cancel(bq, r);
		return rc;
	}
	if (kind != DEV_FAULT_NONE)
		atomic_fetch_add(&d->hits, 1);
	return 0;
}

/* ---- completion ----------------------------------------------------------------------------- */

/* Runs inside the inner queue's reap, which the wrapper's reap calls: on the owning thread. */
static void fault_inner_done(dev_req *ir, int64_t res)
{
	fault_shadow *s = ir->ctx;
	dev_req *r = s->outer;
	fault_queue *q = (fault_queue *)r->p.q;

	if (res >= 0 && (s->kind == DEV_FAULT_SHORT_READ || s->kind == DEV_FAULT_TORN_WRITE))
		res = (int64_t)SPW_MIN((uint64_t)res, s->keep);
	s->next = q->free;
	q->free = s;
	if (dev_req_piece_end(r, 0, r->p.len, res))
		dev_req_finish(&q->base, r);
}

/* ---- the rest ------------------------------------------------------------------------------- */

static int fault_submit(dev_queue *bq)
{
	fault_queue *q = (fault_queue *)bq;
	int rc = dev_submit(q->inner);
	bq->unsubmitted = q->inner->unsubmitted;   /* what the inner queue kept is still to submit */
	return rc;
}

static int fault_reap(dev_queue *bq, int max)
{
	fault_queue *q = (fault_queue *)bq;
	uint64_t start = bq->completed;
	dev_queue_done_run(bq, max);
	int left = max - (int)(bq->completed - start);
	if (left > 0)
		dev_reap(q->inner, left);
	return (int)(bq->completed - start);
}

static int fault_wait(dev_queue *bq, int min, int64_t timeout_ns)
{
	fault_queue *q = (fault_queue *)bq;
	if (bq->done_head)
		return 0;
	return dev_wait(q->inner, min, timeout_ns);
}

static int fault_queue_fd(dev_queue *bq)
{
	return dev_queue_fd(((fault_queue *)bq)->inner);
}

static int fault_segment_remove(dev *bd, uint64_t seg)
{
	return dev_segment_remove(((fault_dev *)bd)->inner, seg);
}

static int fault_sync(dev *bd)
{
	return dev_sync(((fault_dev *)bd)->inner);
}

static const dev_ops fault_ops = {
	.close = fault_close,
	.queue_open = fault_queue_open,
	.queue_close = fault_queue_close,
	.enqueue = fault_enqueue,
	.submit = fault_submit,
	.reap = fault_reap,
	.wait = fault_wait,
	.queue_fd = fault_queue_fd,
	.segment_remove = fault_segment_remove,
	.sync = fault_sync,
};
