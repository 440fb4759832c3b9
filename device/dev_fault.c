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
 * The power-cut mode (device.h, "Power cut") keeps unsynced writes in a buffer of extents instead.
 * Invariants of that buffer (all under pc_lock):
 *  - the extents are sorted by offset and never overlap: a write cuts what it covers out of the
 *    older extents first, so the later write wins; every offset and length is a multiple of the
 *    sector, and each extent's data is aligned for the inner device (one valid request each);
 *  - a dirty extent is a write the inner device has not seen; dirty extents exist only while armed;
 *  - a clean extent was written out already and is kept only while a read that may have read the
 *    inner device before that write-out is still in flight (pc_reads > 0): its overlay then still
 *    shows the bytes the read must see. The last such read's completion drops them.
 * Write-outs (sync, flush, disarm, close) run with pc_lock held, through a queue of their own on
 * the inner device, so callbacks of the caller's queue never run inside them.
 *
 * Sections: device open/close and arming; the text form; queue open/close; the power-cut buffer;
 * enqueue; completion; the rest.
 */
#include "device/dev_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

/* One extent of the power-cut buffer. */
typedef struct pc_ext {
	uint64_t off, len;
	uint8_t *data;               /* len bytes, aligned to the inner device's mem_align */
	bool clean;                  /* already on the inner device (kept for reads in flight) */
} pc_ext;

typedef struct fault_dev {
	dev base;
	dev *inner;
	pthread_mutex_t lock;        /* guards spec and count */
	dev_fault_spec spec;
	uint64_t count;              /* matching IOs since dev_fault_set */
	_Atomic uint64_t hits;
	/* The power-cut mode. pc_lock is taken before lock, never the other way round. */
	pthread_mutex_t pc_lock;     /* guards every pc_ field */
	_Atomic bool pc_armed;       /* written under pc_lock; read without it first on the IO path */
	pc_ext *pc_ext;              /* the buffer: sorted, disjoint (the invariants above) */
	size_t pc_n, pc_cap;
	uint32_t pc_reads;           /* reads in flight that lay the buffer over their result */
	dev_fault_powercut_stats pc; /* the cumulative counters (buffered_* are counted on demand) */
} fault_dev;

typedef struct fault_shadow {
	dev_req r;                   /* the request the inner device sees */
	dev_req *outer;
	int kind;                    /* what to do to the result */
	bool overlay;                /* a read under the power-cut mode: lay the buffer over it */
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

static int pc_writeout(fault_dev *d, uint64_t lo, uint64_t hi);
static size_t pc_drop(fault_dev *d, bool clean, uint64_t *bytes);

/* A clean close keeps the power on: what is buffered goes to the inner device (unsynced). */
static void fault_close(dev *bd)
{
	fault_dev *d = (fault_dev *)bd;
	uint64_t bytes;
	pthread_mutex_lock(&d->pc_lock);
	int rc = pc_writeout(d, 0, DEV_MAX_BYTES);
	if (rc)
		spw_log(SPW_LOG_WARNING, -rc, "fault device: writing the power-cut buffer out at close");
	pc_drop(d, false, &bytes);
	pc_drop(d, true, &bytes);
	pthread_mutex_unlock(&d->pc_lock);
	free(d->pc_ext);
	dev_close(d->inner);
	pthread_mutex_destroy(&d->pc_lock);
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
	pthread_mutex_init(&d->pc_lock, NULL);
	atomic_init(&d->pc_armed, false);
	atomic_init(&d->hits, 0);
	*out = &d->base;
	return 0;
}

int dev_fault_set(dev *bd, const dev_fault_spec *spec)
{
	fault_dev *d = (fault_dev *)bd;
	if (!bd || !(bd->caps & DEV_CAP_FAULT) || bd->ops != &fault_ops)
		return -ENOTSUP;
	if (!spec || spec->kind < DEV_FAULT_NONE || spec->kind > DEV_FAULT_POWERCUT ||
	    (spec->kind != DEV_FAULT_NONE && spec->kind != DEV_FAULT_POWERCUT && spec->nth == 0) ||
	    (spec->kind == DEV_FAULT_ERROR && spec->err >= 0))
		return -EINVAL;
	pthread_mutex_lock(&d->pc_lock);
	if (spec->kind == DEV_FAULT_POWERCUT) {
		if (spec->cut_now) {   /* the power goes: the unsynced writes are gone */
			uint64_t bytes;
			pc_drop(d, false, &bytes);
			d->pc.dropped_bytes += bytes;
			d->pc.cuts++;
		}
		atomic_store(&d->pc_armed, true);
	} else if (atomic_load(&d->pc_armed)) {
		/* Leaving the mode with the power on: the buffered writes happened. */
		int rc = pc_writeout(d, 0, DEV_MAX_BYTES);
		if (rc) {
			pthread_mutex_unlock(&d->pc_lock);
			return rc;
		}
		atomic_store(&d->pc_armed, false);
	}
	pthread_mutex_lock(&d->lock);
	d->spec = *spec;
	d->count = 0;
	pthread_mutex_unlock(&d->lock);
	pthread_mutex_unlock(&d->pc_lock);
	return 0;
}

/* ---- the text form (device.h has the grammar) ---------------------------------------------- */

/* What a bare word sets. */
enum { FW_KIND, FW_ERRNO, FW_OPS, FW_STICKY, FW_POWERCUT };

static const struct fault_bare_word {
	const char *name;
	uint8_t sets;           /* FW_* */
	int val;                /* the kind, the errno (FW_ERRNO also sets kind error), the ops mask, sticky,
	                           cut_now (FW_POWERCUT also sets kind powercut) */
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
	{ "powercut", FW_POWERCUT, 0 },               { "powercut-now", FW_POWERCUT, 1 },
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
		case FW_POWERCUT: s->kind = DEV_FAULT_POWERCUT; s->cut_now = b->val != 0; break;
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
			            "sticky, eio, enospc, short, torn, powercut, powercut-now, off", (int)n, p);
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

int dev_fault_powercut_stats_get(dev *bd, dev_fault_powercut_stats *out)
{
	fault_dev *d = (fault_dev *)bd;
	if (!bd || bd->ops != &fault_ops || !out)
		return -ENOTSUP;
	pthread_mutex_lock(&d->pc_lock);
	*out = d->pc;
	out->buffered_bytes = out->buffered_extents = 0;
	for (size_t i = 0; i < d->pc_n; i++)
		if (!d->pc_ext[i].clean) {
			out->buffered_bytes += d->pc_ext[i].len;
			out->buffered_extents++;
		}
	pthread_mutex_unlock(&d->pc_lock);
	return 0;
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

/* ---- the power-cut buffer (every function here runs with pc_lock held) ------------------------ */

static void *pc_alloc(fault_dev *d, uint64_t len)
{
	void *p = NULL;
	size_t align = SPW_MAX((size_t)d->inner->mem_align, sizeof(void *));
	return posix_memalign(&p, align, len) == 0 ? p : NULL;
}

/* Index of the first extent that ends after off. */
static size_t pc_first(const fault_dev *d, uint64_t off)
{
	size_t lo = 0, hi = d->pc_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->pc_ext[mid].off + d->pc_ext[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int pc_reserve(fault_dev *d, size_t extra)
{
	if (d->pc_n + extra <= d->pc_cap)
		return 0;
	size_t cap = SPW_MAX(d->pc_cap * 2, d->pc_n + extra + 16);
	pc_ext *ne = realloc(d->pc_ext, cap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	d->pc_ext = ne;
	d->pc_cap = cap;
	return 0;
}

/* Remove [lo, hi) from the buffer, clean or dirty: the extents inside go, the ones across an end
 * keep their part outside. 0, or -ENOMEM with the buffer unchanged (the only allocations, the kept
 * tail and an array slot, come before any change). */
static int pc_cut(fault_dev *d, uint64_t lo, uint64_t hi)
{
	size_t i = pc_first(d, lo), j;
	if (i == d->pc_n || d->pc_ext[i].off >= hi)
		return 0;
	for (j = i; j + 1 < d->pc_n && d->pc_ext[j + 1].off < hi; j++)
		;
	pc_ext left = d->pc_ext[i], right = d->pc_ext[j];
	bool has_left = left.off < lo, has_right = right.off + right.len > hi;
	if (has_right) {
		uint64_t rlen = right.off + right.len - hi;
		uint8_t *tail = pc_alloc(d, rlen);
		if (!tail || (i == j && has_left && pc_reserve(d, 1))) {
			free(tail);
			return -ENOMEM;
		}
		memcpy(tail, right.data + (hi - right.off), rlen);
		right.off = hi;
		right.len = rlen;
		right.data = tail;
	}
	for (size_t k = i; k <= j; k++)
		if (!(k == i && has_left))
			free(d->pc_ext[k].data);
	left.len = lo - left.off;
	size_t removed = j - i + 1, put = (size_t)has_left + (size_t)has_right;
	memmove(&d->pc_ext[i + put], &d->pc_ext[j + 1], (d->pc_n - j - 1) * sizeof(pc_ext));
	d->pc_n = d->pc_n - removed + put;
	if (has_left)
		d->pc_ext[i] = left;
	if (has_right)
		d->pc_ext[i + has_left] = right;
	return 0;
}

/* Put [off, off+len) with data (taken over on success) into the buffer over whatever was there.
 * 0 or -ENOMEM (the buffer unchanged, data still the caller's). */
static int pc_insert(fault_dev *d, uint64_t off, uint64_t len, uint8_t *data, bool clean)
{
	if (pc_reserve(d, 2) || pc_cut(d, off, off + len))
		return -ENOMEM;
	size_t i = pc_first(d, off);
	memmove(&d->pc_ext[i + 1], &d->pc_ext[i], (d->pc_n - i) * sizeof(pc_ext));
	d->pc_ext[i] = (pc_ext){ .off = off, .len = len, .data = data, .clean = clean };
	d->pc_n++;
	return 0;
}

/* Drop every clean (or every dirty) extent; *bytes gets their size. Returns how many went. */
static size_t pc_drop(fault_dev *d, bool clean, uint64_t *bytes)
{
	size_t w = 0, n = d->pc_n;
	*bytes = 0;
	for (size_t i = 0; i < d->pc_n; i++) {
		if (d->pc_ext[i].clean == clean) {
			*bytes += d->pc_ext[i].len;
			free(d->pc_ext[i].data);
		} else {
			d->pc_ext[w++] = d->pc_ext[i];
		}
	}
	d->pc_n = w;
	return n - w;
}

/* Clean extents are needed only by reads in flight. */
static void pc_drop_clean_if_unread(fault_dev *d)
{
	uint64_t bytes;
	if (d->pc_reads == 0)
		pc_drop(d, true, &bytes);
}

typedef struct pc_io {
	dev_req r;
	struct iovec iov;
	int64_t res;
	bool done;
} pc_io;

static void pc_io_done(dev_req *r, int64_t res)
{
	pc_io *io = r->ctx;
	io->res = res;
	io->done = true;
}

/* Write len bytes at off to the inner device through tq and wait for it. The bytes or -errno. */
static int64_t pc_inner_write(fault_dev *d, dev_queue *tq, uint64_t off, const uint8_t *buf,
                              uint64_t len)
{
	uint8_t *bounce = NULL;
	/* A piece cut out of an extent at a segment boundary may sit off the memory alignment. */
	if ((uintptr_t)buf % d->inner->mem_align) {
		if (!(bounce = pc_alloc(d, len)))
			return -ENOMEM;
		memcpy(bounce, buf, len);
		buf = bounce;
	}
	/* On the heap: a request the drain gave up on may still complete into it later. */
	pc_io *io = calloc(1, sizeof(*io));
	if (!io) {
		free(bounce);
		return -ENOMEM;
	}
	io->iov.iov_base = (void *)buf;
	io->iov.iov_len = len;
	io->r.offset = off;
	io->r.iov = &io->iov;
	io->r.iovcnt = 1;
	io->r.done = pc_io_done;
	io->r.ctx = io;
	int rc;
	/* -EAGAIN: the throttle is full of other threads' IO; it drains without us. */
	for (int tries = 0; (rc = dev_write(tq, &io->r)) == -EAGAIN && tries < 60000; tries++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	if (rc) {
		free(io);
		free(bounce);
		return rc == -EAGAIN ? -ETIMEDOUT : rc;
	}
	dev_queue_drain(tq);
	if (!io->done)
		return -ETIMEDOUT;   /* io and bounce leak: the device still holds them */
	int64_t res = io->res;
	free(io);
	free(bounce);
	return res >= 0 && (uint64_t)res < len ? -EIO : res;
}

/*
 * Write every dirty extent's part inside [lo, hi) to the inner device (through a queue of its own,
 * opened on the first one). What got there becomes clean, or goes when no read is in flight;
 * what lies in a removed segment (-ENOENT) goes too. 0 or the first -errno (those parts stay dirty).
 */
static int pc_writeout(fault_dev *d, uint64_t lo, uint64_t hi)
{
	dev_queue *tq = NULL;
	uint64_t pos = lo;
	int err = 0;

	while (pos < hi) {
		size_t i = pc_first(d, pos);
		while (i < d->pc_n && d->pc_ext[i].clean && d->pc_ext[i].off < hi)
			i++;
		if (i == d->pc_n || d->pc_ext[i].off >= hi)
			break;
		pc_ext *e = &d->pc_ext[i];
		uint64_t cs = SPW_MAX(e->off, pos), ce = SPW_MIN(e->off + e->len, hi);
		int rc = 0;
		if (!tq && (rc = dev_queue_open(d->inner, &tq)) < 0) {
			tq = NULL;
			err = rc;
			break;
		}
		int64_t res = pc_inner_write(d, tq, cs, e->data + (cs - e->off), ce - cs);
		if (res >= 0)
			d->pc.synced_bytes += ce - cs;
		if (res >= 0 && d->pc_reads > 0) {
			if (cs == e->off && ce == e->off + e->len) {
				e->clean = true;
			} else {
				uint8_t *copy = pc_alloc(d, ce - cs);
				if (copy)
					memcpy(copy, e->data + (cs - e->off), ce - cs);
				/* Out of memory: it stays dirty, and the next sync writes it again. */
				if (copy && pc_insert(d, cs, ce - cs, copy, true))
					free(copy);
			}
		} else if (res >= 0 || res == -ENOENT) {
			pc_cut(d, cs, ce);   /* out of memory: stays, and is written again (harmless) */
		} else if (!err) {
			err = (int)res;
		}
		pos = ce;
	}
	dev_queue_close(tq);
	return err;
}

/* Zero the bytes [a, b) of r's buffers (relative to the request). */
static void pc_iov_zero(dev_req *r, uint64_t a, uint64_t b)
{
	uint64_t rel = 0;
	for (int k = 0; k < r->iovcnt; k++) {
		uint64_t x = SPW_MAX(rel, a), y = SPW_MIN(rel + r->iov[k].iov_len, b);
		if (x < y)
			memset((uint8_t *)r->iov[k].iov_base + (x - rel), 0, y - x);
		rel += r->iov[k].iov_len;
	}
}

/* The inner device's written end within segment seg (bytes from the segment's start), or -1 when
 * it cannot say (not a file backend). */
static int64_t pc_inner_end(fault_dev *d, uint64_t seg)
{
	int64_t h;
	struct stat st;
	int rc = dev_seg_get(d->inner, seg, false, &h);
	if (rc == 1)
		return 0;   /* absent */
	if (rc < 0 || d->inner->segs->dirfd < 0 || fstat((int)(h - 1), &st) < 0)
		return -1;
	return st.st_size;
}

/*
 * Lay the buffer over a finished read of r whose inner result *res is >= 0. Where the read came back
 * short, the written end is worked out segment by segment as a file's would be: the larger of the
 * inner file's end and the buffered writes' end in that segment, the bytes between reading as zeros;
 * the first segment part that ends short ends the result. Then every overlapping buffered byte is
 * copied in. (Past the first short segment the inner end comes from fstat, so an inner device that
 * is not files stops the result at that segment's end.)
 */
static void pc_overlay(fault_dev *d, dev_req *r, int64_t *res)
{
	uint64_t off = r->offset, len = r->p.len, got = (uint64_t)*res;
	unsigned shift = d->base.segment_shift;

	if (got < len) {
		uint64_t start = got, known_end = got;   /* this segment part, and the inner's end in it */
		for (;;) {
			uint64_t seg = (off + start) >> shift;
			uint64_t stop = SPW_MIN(len, ((seg + 1) << shift) - off), end = known_end;
			for (size_t i = pc_first(d, off + start); i < d->pc_n && d->pc_ext[i].off < off + stop; i++)
				end = SPW_MAX(end, SPW_MIN(d->pc_ext[i].off + d->pc_ext[i].len - off, stop));
			pc_iov_zero(r, known_end, end);
			got = end;
			if (end < stop || stop == len)
				break;
			int64_t ie = pc_inner_end(d, seg + 1);
			if (ie < 0)
				break;
			start = stop;
			known_end = SPW_MIN(stop + (uint64_t)ie, SPW_MIN(len, ((seg + 2) << shift) - off));
		}
		*res = (int64_t)got;
	}
	for (size_t i = pc_first(d, off); i < d->pc_n && d->pc_ext[i].off < off + len; i++) {
		const pc_ext *e = &d->pc_ext[i];
		uint64_t cs = SPW_MAX(e->off, off), ce = SPW_MIN(e->off + e->len, off + len);
		uint64_t rel = 0;
		for (int k = 0; k < r->iovcnt; k++) {
			uint64_t x = SPW_MAX(rel, cs - off), y = SPW_MIN(rel + r->iov[k].iov_len, ce - off);
			if (x < y)
				memcpy((uint8_t *)r->iov[k].iov_base + (x - rel), e->data + (off + x - e->off), y - x);
			rel += r->iov[k].iov_len;
		}
	}
}

/* The power-cut mode's part of enqueue, for a request r that dev_req_begin accepted. Returns
 * PC_PASS (not armed after all: the usual path), PC_OVERLAY (a read: the usual path, overlaid at
 * completion), PC_DONE (finished here; its callback runs in the next dev_reap), or -errno (r was
 * given back). */
enum { PC_PASS = 1, PC_OVERLAY = 2, PC_DONE = 3 };

static int pc_enqueue(dev_queue *bq, fault_dev *d, dev_req *r, int op)
{
	int64_t res = 0;
	pthread_mutex_lock(&d->pc_lock);
	if (!atomic_load(&d->pc_armed)) {
		pthread_mutex_unlock(&d->pc_lock);
		return PC_PASS;
	}
	if (op == DEV_OP_READ) {
		d->pc_reads++;
		pthread_mutex_unlock(&d->pc_lock);
		return PC_OVERLAY;
	}
	if (op == DEV_OP_FLUSH) {
		uint64_t seg = r->offset >> d->base.segment_shift;
		int rc = pc_writeout(d, seg << d->base.segment_shift, (seg + 1) << d->base.segment_shift);
		d->pc.syncs++;
		pthread_mutex_unlock(&d->pc_lock);
		if (rc == 0)
			return PC_PASS;   /* and now the inner flush */
		if (dev_req_piece_end(r, 0, 0, rc))
			dev_queue_done_push(bq, r);
		return PC_DONE;
	}
	/* A write: fails as the inner device would where a segment was removed. */
	uint64_t s0 = r->offset >> d->base.segment_shift, s1 = (r->offset + r->p.len - 1) >> d->base.segment_shift;
	for (uint64_t seg = s0; seg <= s1 && res == 0; seg++) {
		int64_t h;
		int rc = dev_seg_get(d->inner, seg, false, &h);
		if (rc < 0)
			res = rc;
	}
	if (res == 0) {
		uint8_t *data = pc_alloc(d, r->p.len);
		uint64_t at = 0;
		if (!data || pc_insert(d, r->offset, r->p.len, data, false)) {
			pthread_mutex_unlock(&d->pc_lock);
			free(data);
			dev_req_cancel(bq, r);
			return -ENOMEM;
		}
		for (int k = 0; k < r->iovcnt; k++) {
			memcpy(data + at, r->iov[k].iov_base, r->iov[k].iov_len);
			at += r->iov[k].iov_len;
		}
		d->pc.accepted_bytes += r->p.len;
		res = (int64_t)r->p.len;
	}
	pthread_mutex_unlock(&d->pc_lock);
	if (dev_req_piece_end(r, 0, r->p.len, res))
		dev_queue_done_push(bq, r);
	return PC_DONE;
}

/* A read that PC_OVERLAY counted is over (completed, or refused by the inner queue). */
static void pc_read_end(fault_dev *d, dev_req *r, int64_t *res)
{
	pthread_mutex_lock(&d->pc_lock);
	if (r && *res >= 0)
		pc_overlay(d, r, res);
	d->pc_reads--;
	pc_drop_clean_if_unread(d);
	pthread_mutex_unlock(&d->pc_lock);
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
	if (s->kind != DEV_FAULT_NONE && s->kind != DEV_FAULT_POWERCUT && (mask & (1u << op))) {
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
	if (d->spec.kind != DEV_FAULT_NONE && d->spec.kind != DEV_FAULT_POWERCUT && (mask & (1u << op)) &&
	    d->count > 0)
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

	bool overlay = false;
	if (atomic_load_explicit(&d->pc_armed, memory_order_relaxed)) {
		rc = pc_enqueue(bq, d, r, op);
		if (rc < 0 || rc == PC_DONE)
			return rc < 0 ? rc : 0;
		overlay = rc == PC_OVERLAY;
	}

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
		if (overlay)
			pc_read_end(d, NULL, NULL);
		fault_uncount(d, op);
		dev_req_cancel(bq, r);
		return -ENOMEM;
	}
	memset(&s->r, 0, sizeof(s->r));
	s->outer = r;
	s->kind = kind;
	s->overlay = overlay;
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
		if (overlay)
			pc_read_end(d, NULL, NULL);
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

	if (s->overlay)   /* before a short read cuts it: the cut applies to what the caller sees */
		pc_read_end((fault_dev *)q->base.dev, r, &res);
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

/* What is buffered in a removed segment goes with it. */
static int fault_segment_remove(dev *bd, uint64_t seg)
{
	fault_dev *d = (fault_dev *)bd;
	pthread_mutex_lock(&d->pc_lock);
	int rc = pc_cut(d, seg << bd->segment_shift, (seg + 1) << bd->segment_shift);
	pthread_mutex_unlock(&d->pc_lock);
	return rc ? rc : dev_segment_remove(d->inner, seg);
}

/* Power-cut mode: the buffer reaches the inner device first, then the inner sync makes it stay. */
static int fault_sync(dev *bd)
{
	fault_dev *d = (fault_dev *)bd;
	dev_fault_spec spec;
	/* dev_sync counts as a flush (ops=flush): an armed error fails it, and nothing is synced. */
	if (fault_decide(d, DEV_OP_FLUSH, &spec) == DEV_FAULT_ERROR) {
		atomic_fetch_add(&d->hits, 1);
		return spec.err;
	}
	pthread_mutex_lock(&d->pc_lock);
	int rc = 0;
	if (atomic_load(&d->pc_armed)) {
		rc = pc_writeout(d, 0, DEV_MAX_BYTES);
		d->pc.syncs++;
	}
	pthread_mutex_unlock(&d->pc_lock);
	return rc ? rc : dev_sync(d->inner);
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
