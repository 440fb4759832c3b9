/*
 * recover.c - recovery: the state machine that turns a checkpoint's files back into a store
 * (choose, check, load the index image, load the log's in-memory part, repair the index, set the
 * markers), and the offline check of a checkpoint folder. The files are ckpt.c's (ckpt_int.h).
 *
 * NOTES ON THE DESIGN OF RECOVERY
 *
 *  1. Repairing the fuzzy image (ckpt.c note 2). Every address in the image is below the cut, and
 *     a record the image misses was published during the image, so at or above scan_from. A
 *     chain's records only get newer (higher addresses; a group's parts too, group.c note 8) and
 *     an entry only moves up (FLUSHALL aside, handled by clearing the image below Begin), so
 *     raising each record's entry to its address, for every valid record in [scan_from, cut) in
 *     address order, gives each entry the newest record it had at the cut. Tombstones count (a deleted key's newest version); invalid records
 *     (lost CASes, the cut's filler) are garbage and skipped.
 *
 *  2. Check first, then load. Every file the checkpoint needs is checked before anything is
 *     loaded: the meta file's checksum, the index file's size and XXH3, the segments covering
 *     [begin, cut) present and long enough; the index image checks its own checksums as it loads,
 *     the cut's partial page is checked against the meta file once read. Values in full pages on
 *     the device carry no checksum yet (a record's header is checked when the repair walks it):
 *     start-up stays proportional to the index and the log written during the image, not to the
 *     data. A failure names the file and what is wrong; the caller refuses to start (or, asked to,
 *     takes the previous checkpoint).
 *
 *  3. What is in memory afterwards. With a device: only the cut's page (its part below the cut;
 *     the rest zero), Head at its start; every older record is read on demand, as before the
 *     restart. Without one: the whole log [Begin's page, cut), read from the checkpoint's segment
 *     files into the frames; it must fit --memory, as it did when it was written.
 *
 *  4. Counts: the meta file's key and expire counts become the base the sessions' deltas count
 *     from (ckpt.c note 4).
 *
 *  5. Loading the previous checkpoint (which = 1) sets the newer one aside (checkpoint.<n>.*.aside):
 *     this run writes the log again from the older cut on, so the newer one no longer matches it.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include "device/device.h"
#include "log/alloc_int.h"
#include "log/ckpt_int.h"
#include "log/hlog_int.h"

/* ---------------- the log walker of the repair (note 1) ---------------- */

typedef struct rec_walk {
	hlog *l;
	dev_queue *q;             /* device reads of pages below Head (with a device) */
	uint8_t *page;            /* the page being walked, read from the device */
	uint64_t page_no;         /* which page is in page, or UINT64_MAX */
	uint64_t head;            /* pages at or above are in memory */
	uint64_t cut;
	uint8_t *kbuf;            /* a spanning record's key when it runs past its first page */
	uint64_t kcap;
	uint64_t repaired;        /* entries raised (hlog_ckpt_info.repaired) */
} rec_walk;

/* The bytes of page p (in memory or read into w->page), or NULL with *rc. */
static const uint8_t *walk_page(rec_walk *w, uint64_t p, int *rc)
{
	hlog *l = w->l;
	uint64_t start = p << l->page_bits;
	if (start >= (w->head & ~(l->page_bytes - 1)))
		return (const uint8_t *)hlog_rec_at(l, start);
	if (w->page_no != p) {
		uint64_t len = SPW_MIN(l->page_bytes, w->cut - start);
		len = SPW_ALIGN_UP(len, (uint64_t)l->dev->sector_bytes);
		memset(w->page, 0, l->page_bytes);
		if ((*rc = ckpt_dev_io(w->q, false, start, w->page, len)) < 0)
			return NULL;
		w->page_no = p;
	}
	return w->page;
}

/* The key of the record at a (header h, from its page): from the page when it is there whole. */
static const uint8_t *walk_key(rec_walk *w, uint64_t a, const log_rec *h, uint64_t info, int *rc)
{
	hlog *l = w->l;
	uint64_t off = a & (l->page_bytes - 1);
	uint64_t kofs = REC_HDR_BYTES + ((info & REC_HAS_EXPIRY) ? 8u : 0u);
	if (off + kofs + h->key_len <= l->page_bytes || a >= (w->head & ~(l->page_bytes - 1)))
		return (const uint8_t *)h + kofs;
	/* A spanning record whose key runs past its first page: read the key from the device. */
	uint32_t sec = l->dev->sector_bytes;
	uint64_t from = a & ~((uint64_t)sec - 1), len = SPW_ALIGN_UP(a + kofs + h->key_len, sec) - from;
	if (len > w->kcap) {
		free(w->kbuf);
		w->kcap = SPW_ALIGN_UP(len, 4096);
		w->kbuf = aligned_alloc(SPW_MAX(l->dev->mem_align, 4096u), w->kcap);
		if (!w->kbuf) {
			w->kcap = 0;
			*rc = -ENOMEM;
			return NULL;
		}
	}
	if ((*rc = ckpt_dev_io(w->q, false, from, w->kbuf, len)) < 0)
		return NULL;
	return w->kbuf + (a - from) + kofs;
}

/* Walk the records in [from, cut): raise the index entry of each valid one at or above repair
 * (note 1) and, for records in memory, set the spanning marks. 0, or SPW_E_CORRUPT / -errno with
 * why. */
static int walk_log(rec_walk *w, uint64_t from, uint64_t repair, char *why, size_t whylen)
{
	hlog *l = w->l;
	uint64_t a = from, pb = l->page_bytes, grow_page = UINT64_MAX;
	int rc = 0;
	while (a < w->cut) {
		uint64_t p = a >> l->page_bits, off = a & (pb - 1);
		/* A replay into a small index grows it as it goes (store.c note 2): no other thread yet. */
		if (p != grow_page) {
			grow_page = p;
			while (hlog_index_grow_step(l, NULL) == 1)
				;
		}
		if (off + REC_HDR_BYTES > pb) {
			a = (p + 1) << l->page_bits;
			continue;
		}
		const uint8_t *page = walk_page(w, p, &rc);
		if (!page) {
			ckpt_why(why, whylen, "reading the log at %" PRIu64 " failed: %s", a, spw_strerror(rc));
			return rc;
		}
		const log_rec *r = (const log_rec *)(page + off);
		uint64_t info = atomic_load_explicit(&((log_rec *)r)->info, memory_order_relaxed);
		if (info == 0) {
			a = (p + 1) << l->page_bits;   /* the rest of the page is empty */
			continue;
		}
		uint64_t size = rec_size(r, info);
		bool spans = size > pb - off;
		if ((spans && off != 0) || a + size > w->cut || size < REC_HDR_BYTES) {
			ckpt_why(why, whylen, "the log is corrupt at address %" PRIu64 " (a record header of "
			         "%" PRIu64 " bytes that does not fit its page or the checkpoint)", a, size);
			return SPW_E_CORRUPT;
		}
		if ((info & REC_VALID) && a >= repair) {
			const uint8_t *key = walk_key(w, a, r, info, &rc);
			if (!key) {
				ckpt_why(why, whylen, "reading a key at %" PRIu64 " failed: %s", a, spw_strerror(rc));
				return rc;
			}
			if ((rc = hidx_entry_raise(l->idx, hidx_hash(key, r->key_len), a)) < 0) {
				ckpt_why(why, whylen, "the index is full (--index too small for the checkpoint)");
				return rc;
			}
			w->repaired++;
		}
		if (spans && a >= (w->head & ~(pb - 1)))
			alloc_span_mark(l, p, size);
		a += size;
		atomic_store_explicit(&l->rec_done, a, memory_order_relaxed);
	}
	return 0;
}

/* ---------------- choosing and checking (note 2) ---------------- */

/* Check checkpoint id's files without loading anything. 0 or an error with why. */
static int recover_check(hlog *l, const char *dir, dev *d, uint64_t id, ckpt_meta *m, char *why,
		size_t whylen)
{
	int rc = ckpt_meta_read(dir, id, m, why, whylen);
	if (rc < 0)
		return rc;
	char name[CKPT_NAME_MAX], path[4096];
	ckpt_name(name, sizeof(name), id, "index");
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (l) {
		if (m->page_bytes != l->page_bytes) {
			ckpt_why(why, whylen, "checkpoint %" PRIu64 " was written with --page %" PRIu64 ", this "
			         "start has --page %" PRIu64 ": start with the same --page", id, m->page_bytes,
			         l->page_bytes);
			return -EINVAL;
		}
		/* Another --index is fine: the index takes the image's geometry (hidx_image_load). */
	}
	if (d && m->segment_bytes != d->segment_bytes) {
		ckpt_why(why, whylen, "checkpoint %" PRIu64 " was written with --segment %" PRIu64 ", this "
		         "start has --segment %" PRIu64 ": start with the same --segment", id,
		         m->segment_bytes, d->segment_bytes);
		return -EINVAL;
	}
	uint64_t sum = 0, bytes = 0;
	if ((rc = ckpt_file_sum(path, &sum, &bytes)) < 0) {
		ckpt_why(why, whylen, "%s: cannot read: %s", path, spw_strerror(rc));
		return rc;
	}
	if (bytes != m->index_bytes || sum != m->index_sum) {
		ckpt_why(why, whylen, "%s: %" PRIu64 " bytes with checksum %016" PRIx64 ", the meta file "
		         "says %" PRIu64 " bytes with %016" PRIx64 " (corrupt or truncated)", path, bytes, sum,
		         m->index_bytes, m->index_sum);
		return SPW_E_CORRUPT;
	}
	if (d && (rc = ckpt_segments_check(d, m->begin, m->cut, why, whylen)) < 0)
		return rc;
	return 0;
}

/* ---------------- loading ---------------- */

static int recover_load(hlog *l, const char *dir, dev *d, dev_queue *q, const ckpt_meta *m,
		uint64_t *repaired, char *why, size_t whylen)
{
	uint64_t pb = l->page_bytes, pmask = ~(pb - 1);
	uint64_t cut_page = m->cut & pmask;
	uint64_t head = l->dev ? cut_page : (m->begin & pmask);
	int rc;

	if (!l->dev && ((m->cut - head + pb - 1) / pb) + 1 > l->max_pages) {
		ckpt_why(why, whylen, "the checkpoint's log (%" PRIu64 " bytes) does not fit --memory %" PRIu64
		         ": start with at least the --memory it was written with", m->cut - head,
		         l->max_pages * pb);
		return -ENOSPC;
	}
	/* The index image (it checks its own checksums; the file's were checked already). */
	char name[CKPT_NAME_MAX], path[4096];
	ckpt_name(name, sizeof(name), m->id, "index");
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		ckpt_why(why, whylen, "%s: cannot open: %s", path, strerror(errno));
		return rc;
	}
	hidx_image_info img;
	char iwhy[256] = "";
	rc = hidx_image_load(l->idx, fd, &img, iwhy, sizeof(iwhy));
	close(fd);
	if (rc < 0) {
		ckpt_why(why, whylen, "%s: %s", path, iwhy[0] ? iwhy : spw_strerror(rc));
		return rc;
	}
	hidx_clear_below(l->idx, m->begin);

	/* The in-memory part of the log (note 3), read into its frames. */
	atomic_store(&l->rec_total, m->cut);
	/* Below Begin's sector nothing may have been written: a FLUSHALL moved Begin past bytes that
	 * no page write took (ckpt.c writes from there too). The page is read whole as before (an
	 * older checkpoint's bytes there come back unchanged and are written back so when the page is
	 * flushed again); only when that fails, zeros stand in below Begin's sector: no address
	 * below Begin is ever read. */
	uint64_t bsec = m->begin & ~(uint64_t)(d->sector_bytes - 1);
	for (uint64_t p = head; p < m->cut; p += pb) {
		uint64_t from = p, to = SPW_MIN(p + pb, m->cut);
		rc = ckpt_dev_io(q, false, from, hlog_rec_at(l, from), to - from);
		if (rc < 0 && bsec > p) {
			from = SPW_MIN(bsec, to);
			memset(hlog_rec_at(l, p), 0, from - p);
			rc = from < to ? ckpt_dev_io(q, false, from, hlog_rec_at(l, from), to - from) : 0;
		}
		if (rc < 0) {
			char seg[512];
			dev_segment_name(d, from >> d->segment_shift, seg, sizeof(seg));
			ckpt_why(why, whylen, "%s: reading log bytes %" PRIu64 "..%" PRIu64 " failed: %s", seg,
			         from, to, spw_strerror(rc));
			return rc;
		}
		atomic_store_explicit(&l->rec_done, to, memory_order_relaxed);
	}
	uint64_t sfrom = ckpt_sum_from(m, d->sector_bytes);
	uint64_t sum = XXH3_64bits(hlog_rec_at(l, sfrom), m->cut - sfrom);
	if (sum != m->cut_page_sum) {
		char seg[512];
		dev_segment_name(d, cut_page >> d->segment_shift, seg, sizeof(seg));
		ckpt_why(why, whylen, "%s: the log's last page (bytes %" PRIu64 "..%" PRIu64 ") has checksum "
		         "%016" PRIx64 ", the checkpoint says %016" PRIx64 " (corrupt)", seg, sfrom, m->cut,
		         sum, m->cut_page_sum);
		return SPW_E_CORRUPT;
	}
	if (m->cut_page_cont)
		alloc_span_cont_set(l, cut_page >> l->page_bits, m->cut_page_cont);

	/* Repair the image (note 1); without a device the walk also marks spanning records. */
	rec_walk w = { .l = l, .q = q, .page_no = UINT64_MAX, .head = head, .cut = m->cut };
	if (l->dev && m->scan_from < cut_page) {
		w.page = aligned_alloc(SPW_MAX(l->dev->mem_align, 4096u), pb);
		if (!w.page)
			return -ENOMEM;
	}
	rc = walk_log(&w, l->dev ? m->scan_from : m->begin, m->scan_from, why, whylen);
	*repaired = w.repaired;
	free(w.page);
	free(w.kbuf);
	if (rc < 0)
		return rc;

	alloc_recover(l, m->begin, head < HLOG_FIRST_ADDRESS ? HLOG_FIRST_ADDRESS : head, m->cut);
	atomic_store(&l->keys_base, -(int64_t)m->keys);
	atomic_store(&l->expires_base, -(int64_t)m->expires);
	atomic_store(&l->redo_seq, SPW_MAX(m->next_seq, 1));
	l->ckpt_id = m->id;
	l->ckpt_from = m->cut;
	return 0;
}

int hlog_recover(hlog *l, hlog_session *s, const char *dir, dev *logdev, int which,
                 hlog_ckpt_info *out, char *why, size_t whylen)
{
	uint64_t ids[CKPT_KEEP + 1];
	ckpt_meta m;
	dev_queue *q = NULL;
	uint64_t t0 = spw_mono_ns();
	(void)s;

	memset(out, 0, sizeof(*out));
	why[0] = '\0';
	if (!logdev || (l->dev && l->dev != logdev)) {
		ckpt_why(why, whylen, "no log device to recover from");
		return -EINVAL;
	}
	int n = ckpt_list(dir, ids, (int)SPW_ARRAY_LEN(ids));
	if (n < 0) {
		ckpt_why(why, whylen, "%s: cannot list: %s", dir, spw_strerror(n));
		return n;
	}
	if (n == 0)
		return HLOG_NOTFOUND;
	if (which >= n) {
		ckpt_why(why, whylen, "%s holds %d checkpoint(s): there is no previous one to recover from", dir, n);
		return -ENOENT;
	}
	uint64_t id = ids[which];
	int rc = recover_check(l, dir, logdev, id, &m, why, whylen);
	if (rc < 0) {
		size_t len = strlen(why);
		if (which == 0 && n > 1)
			ckpt_why(why + len, whylen - len, "; to start from the previous checkpoint (%" PRIu64 ") and "
			         "lose what came after it, start with --recover-checkpoint previous", ids[1]);
		return rc;
	}
	if ((rc = dev_queue_open(logdev, &q)) < 0) {
		ckpt_why(why, whylen, "cannot open a device queue: %s", spw_strerror(rc));
		return rc;
	}
	rc = recover_load(l, dir, logdev, q, &m, &out->repaired, why, whylen);
	dev_queue_close(q);
	if (rc < 0) {
		size_t len = strlen(why);
		if (which == 0 && n > 1)
			ckpt_why(why + len, whylen - len, "; to start from the previous checkpoint (%" PRIu64 ") and "
			         "lose what came after it, start with --recover-checkpoint previous", ids[1]);
		return rc;
	}
	/* Loaded an older one: the newer ones describe a history this run diverges from (it writes the
	 * log again from this cut on). They are set aside (*.aside), never loaded again by mistake. */
	for (int i = 0; i < which; i++) {
		for (int f = 0; f < 2; f++) {
			char name[CKPT_NAME_MAX], from[4096], to[4200];
			ckpt_name(name, sizeof(name), ids[i], f ? "index" : "meta");
			snprintf(from, sizeof(from), "%s/%s", dir, name);
			snprintf(to, sizeof(to), "%s.aside", from);
			if (rename(from, to) < 0 && errno != ENOENT)
				spw_log(SPW_LOG_WARNING, errno, "Cannot set %s aside", from);
		}
	}
	if (which > 0)
		ckpt_dir_sync(dir);
	/* The log the checkpoints left on disk need stays (compact.c note 5): the loaded one's and the
	 * one before it, which --recover-checkpoint previous may still load. */
	uint64_t hold = m.begin;
	for (int i = which + 1; i < n && i < which + CKPT_KEEP; i++) {
		ckpt_meta pm;
		char pwhy[256];
		if (ckpt_meta_read(dir, ids[i], &pm, pwhy, sizeof(pwhy)) == 0)
			hold = SPW_MIN(hold, pm.begin);
	}
	atomic_store(&l->ckpt_hold, hold);
	/* What the recovered log holds was not counted by unit here (compact.c note 7). */
	log_ustats_forget(l, tail_address(l, load_acq(&l->tail)));
	if (l->dev)   /* what the checkpoints' retirement removed before the restart */
		atomic_store(&l->reclaimed, hold & ~(l->dev->segment_bytes - 1));
	out->id = m.id;
	out->begin = m.begin;
	out->cut = m.cut;
	out->scan_from = m.scan_from;
	out->keys = m.keys;
	out->expires = m.expires;
	out->next_seq = m.next_seq;
	out->index_bytes = m.index_bytes;
	out->log_bytes = m.log_bytes;
	out->unix_ms = m.unix_ms;
	out->duration_us = (spw_mono_ns() - t0) / 1000;
	return 0;
}

void hlog_recover_progress(hlog *l, uint64_t *done, uint64_t *total)
{
	*done = atomic_load_explicit(&l->rec_done, memory_order_relaxed);
	*total = atomic_load_explicit(&l->rec_total, memory_order_relaxed);
}

/* ---------------- the offline check (spillway-check) ---------------- */

int hlog_ckpt_check(const char *dir, dev *logdev, FILE *out)
{
	uint64_t ids[64];
	int n = ckpt_list(dir, ids, (int)SPW_ARRAY_LEN(ids)), problems = 0;
	if (n < 0) {
		fprintf(out, "%s: cannot list: %s\n", dir, spw_strerror(n));
		return 1;
	}
	if (n == 0)
		fprintf(out, "%s: no checkpoint\n", dir);
	for (int i = 0; i < n; i++) {
		ckpt_meta m;
		char why[1024] = "";
		int rc = recover_check(NULL, dir, logdev, ids[i], &m, why, sizeof(why));
		if (rc < 0) {
			fprintf(out, "checkpoint %" PRIu64 ": BAD: %s\n", ids[i], why);
			problems++;
			continue;
		}
		fprintf(out, "checkpoint %" PRIu64 ": OK: log %" PRIu64 "..%" PRIu64 ", %" PRIu64 " keys, index "
		        "image %" PRIu64 " bytes%s\n", ids[i], m.begin, m.cut, m.keys, m.index_bytes,
		        logdev ? ", segments present" : " (segments not checked: no --logdir)");
	}
	return problems;
}
