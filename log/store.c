/*
 * store.c - opening and closing the store and its sessions, the session's poll, and INFO: the root
 * of log/ and the one file that calls into each of the others. log/hlog.h is the public header,
 * log/hlog_int.h the store and session structs; each module keeps its private declarations in its
 * own *_int.h. The calls form a tree (no file calls one that calls it back):
 *
 *     store.c -+-> ops.c --+-> alloc.c ---+-> readq.c --> device/
 *              |           '-> pending.c -'
 *              '-> scan.c ---> pending.c, readq.c
 *
 *     store.c also calls alloc.c, pending.c, readq.c and scan.c to open, poll and close, and
 *     ops.c only for the key counts in INFO. A page write's completion (alloc.c) and a read part's
 *     (pending.c) come back through callbacks stored in their requests, never by a direct call.
 *
 * NOTES ON THE DESIGN OF THE STORE
 *
 *  1. Threads. A session's device queue, fetch cache and pools belong to its thread; completions
 *     run there (inside hlog_session_poll, or dev_wait during a scan). Shared state touched by
 *     completions is atomics only: flush_left/flush_done/span per slot, markers, the error. Ready
 *     callbacks run only at the end of hlog_session_poll, never inside an operation.
 *
 *  2. Index growth. The index starts at --index and doubles (index/hidx.c note "Growth") once its
 *     overflow buckets pass index_pct percent of its main buckets, up to index_max. The growth runs
 *     on the caller's thread (the server's compactor), which waits one epoch (ckpt_epoch_barrier)
 *     before the old main array goes: every index call runs inside an operation, so inside the
 *     epoch. Recovery calls it between the pages it replays, with no other thread about.
 */

#include "log/hlog.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "device/device.h"
#include "log/alloc_int.h"
#include "log/ckpt_int.h"
#include "log/epoch_int.h"
#include "log/hlog_int.h"
#include "log/pending_int.h"
#include "log/readq_int.h"
#include "log/scan_int.h"

#define LOG_MIN_PAGE_BITS 12
#define LOG_MAX_PAGE_BITS 30
#define LOG_MAX_SESSIONS 4096        /* keeps tail overshoot far below the 16 spare offset bits */
#define LOG_MAX_RECORD (1ULL << 30)  /* u32 lengths, one device request; Redis's bulk limit is 512 MB */
#define LOG_TIER_MIN_PAGES 4         /* with a device: room to write, evict and allocate at once */
#define LOG_IO_DEFAULT 128           /* --initial-io-record-size default (Garnet's) */
#define LOG_INDEX_RESIZE_PCT 25      /* overflow buckets per main bucket, in percent, that double the
                                        index: about 6 entries per bucket on average (Garnet: 50) */

/* ---------------- open and close ---------------- */

int hlog_open(hlog **out, const hlog_config *cfg)
{
	hlog *l = NULL;
	int rc = -EINVAL;

	if (!cfg || cfg->page_bytes < (1ULL << LOG_MIN_PAGE_BITS) || cfg->page_bytes > (1ULL << LOG_MAX_PAGE_BITS)
			|| (cfg->page_bytes & (cfg->page_bytes - 1)) != 0)
		return -EINVAL;
	if (cfg->memory_bytes / cfg->page_bytes < 2 || cfg->mutable_percent < 0 || cfg->mutable_percent > 100
			|| cfg->max_sessions < 1 || cfg->max_sessions > LOG_MAX_SESSIONS)
		return -EINVAL;
	if (cfg->dev && (cfg->memory_bytes / cfg->page_bytes < LOG_TIER_MIN_PAGES
			|| cfg->page_bytes % cfg->dev->sector_bytes != 0 || cfg->dev->mem_align > cfg->page_bytes))
		return -EINVAL;

	l = aligned_alloc(SPW_CACHELINE, SPW_ALIGN_UP(sizeof(*l), SPW_CACHELINE));
	if (!l)
		return -ENOMEM;
	memset(l, 0, sizeof(*l));
	l->mem = MAP_FAILED;
	l->mem_fd = -1;
	pthread_mutex_init(&l->release_mu, NULL);
	pthread_mutex_init(&l->sig_mu, NULL);
	pthread_mutex_init(&l->ckpt_mu, NULL);
	pthread_mutex_init(&l->ckpt_one, NULL);
	pthread_mutex_init(&l->compact_one, NULL);
	atomic_store(&l->ckpt_hold, UINT64_MAX);
	atomic_store(&l->redo_seq, 1);
	atomic_store(&l->cut_word, REC_PREV_MASK);   /* no cut yet: nothing is above it */

	l->page_bytes = cfg->page_bytes;
	l->page_bits = (uint32_t)__builtin_ctzll(cfg->page_bytes);
	l->tail_shift = l->page_bits + 16;
	l->tail_off_mask = (1ULL << l->tail_shift) - 1;
	l->max_pages = cfg->memory_bytes / cfg->page_bytes;
	l->frame_slots = 1;
	while (l->frame_slots < l->max_pages)
		l->frame_slots <<= 1;
	l->mutable_pages = SPW_MAX(1, l->max_pages * (uint64_t)cfg->mutable_percent / 100);
	l->page_limit = 1ULL << (48 - l->page_bits);
	l->max_rec = SPW_MIN((l->max_pages - 1) * l->page_bytes, LOG_MAX_RECORD);
	l->max_sessions = cfg->max_sessions;
	l->mem_bytes = l->frame_slots * l->page_bytes;
	l->window_mask = l->mem_bytes - 1;
	l->dev = cfg->dev;
	l->index_max = cfg->index_max_bytes;
	l->part_live = cfg->part_live;
	l->part_live_arg = cfg->part_live_arg;
	l->index_pct = cfg->index_resize_pct > 0 ? cfg->index_resize_pct : LOG_INDEX_RESIZE_PCT;
	if (l->dev) {
		dev *d = l->dev;
		uint64_t segs = SPW_MAX(1u, SPW_MIN(8u, d->queue_depth));
		l->sector = d->sector_bytes;
		l->initial_io = cfg->initial_io_bytes ? cfg->initial_io_bytes : LOG_IO_DEFAULT;
		/* A request never spans more than `segs` segments (the device splits at segment ends and
		 * takes at most DEV_PIECES_MAX, and the queue's depth in pieces). */
		l->io_chunk = SPW_MIN(d->segment_bytes * segs, 256ULL << 20);
		uint64_t first = SPW_ALIGN_UP((uint64_t)l->initial_io, l->sector) + l->sector;
		l->buf_min = 4096;
		while (l->buf_min < first || l->buf_min < d->mem_align)
			l->buf_min <<= 1;
		l->read_merge = !cfg->no_read_merge;
	}
	l->group_in_place = !cfg->group_span_only;

	l->unit_bits = l->dev ? l->dev->segment_shift : l->page_bits;
	rc = -ENOMEM;
	if (!(l->garbage = calloc((size_t)cfg->max_sessions * LOG_GARBAGE_SLOTS, sizeof(*l->garbage))))
		goto fail;
	if (!(l->group_locks = calloc(1u << HIDX_STRIPE_BITS, sizeof(*l->group_locks))))
		goto fail;
	if ((rc = log_ustats_open(l)) < 0)
		goto fail;
	if ((rc = hidx_open(&l->idx, cfg->index_bytes)) < 0)
		goto fail;
	if (cfg->index_full_fn)
		hidx_set_full_hook(l->idx, (unsigned)l->index_pct, cfg->index_full_fn, cfg->index_full_ctx);
	if ((rc = epoch_open(&l->ep, cfg->max_sessions)) < 0)
		goto fail;
	if ((rc = alloc_open(l)) < 0)
		goto fail;
	rc = -ENOMEM;
	l->sessions = aligned_alloc(SPW_CACHELINE, (size_t)cfg->max_sessions * sizeof(hlog_session));
	if (!l->sessions)
		goto fail;
	memset(l->sessions, 0, (size_t)cfg->max_sessions * sizeof(hlog_session));
	for (int i = 0; i < cfg->max_sessions; i++) {
		l->sessions[i].l = l;
		l->sessions[i].id = i;
		l->sessions[i].efd = -1;
	}
	l->ckpt_from = 0;

	alloc_start(l);
	*out = l;
	return 0;
fail:
	hlog_close(l);
	return rc;
}

void hlog_close(hlog *l)
{
	if (!l)
		return;
	alloc_close(l);
	hidx_close(l->idx);
	epoch_close(l->ep);
	free(l->sessions);
	pthread_mutex_destroy(&l->release_mu);
	pthread_mutex_destroy(&l->sig_mu);
	pthread_mutex_destroy(&l->ckpt_mu);
	pthread_mutex_destroy(&l->ckpt_one);
	pthread_mutex_destroy(&l->compact_one);
	free(l->garbage);
	free(l->group_locks);
	log_ustats_close(l);
	free(l);
}

/* ---------------- sessions ---------------- */

int hlog_session_open(hlog *l, hlog_session **out)
{
	/* Counters are never reset: a reopened slot keeps contributing its history to the sums. */
	for (int i = 0; i < l->max_sessions; i++) {
		int expect = 0;
		if (atomic_compare_exchange_strong(&l->sessions[i].in_use, &expect, 1)) {
			l->sessions[i].now_ms = spw_time_ms();
			*out = &l->sessions[i];
			return 0;
		}
	}
	return -EBUSY;
}

/* The tier side of a session's close, module by module: the device queue first (what is in flight
 * completes, its callbacks run), then the ops and fetches (their buffers back to the pool), then
 * the pool and IO objects, then the scan's bookkeeping. */
static void store_session_tier_close(hlog_session *s)
{
	readq_queue_close(s);
	if (s->t.cmp_q)
		dev_queue_close(s->t.cmp_q);
	pend_session_close(s);
	readq_session_free(s);
	scan_session_free(s);
	memset(&s->t, 0, sizeof(s->t));
	s->redo = NULL;
	s->redo_arg = NULL;
}

void hlog_session_close(hlog_session *s)
{
	if (!s)
		return;
	store_session_tier_close(s);
	free(s->rep_h);
	s->rep_h = NULL;
	s->rep_n = s->rep_cap = 0;
	epoch_unprotect(s->l->ep, s->id);
	atomic_store(&s->in_use, 0);
}

void hlog_session_protect(hlog_session *s) { epoch_protect(s->l->ep, s->id); }
void hlog_session_unprotect(hlog_session *s) { epoch_unprotect(s->l->ep, s->id); }
void hlog_session_refresh(hlog_session *s) { epoch_refresh(s->l->ep, s->id); }
void hlog_session_set_now(hlog_session *s, int64_t now_ms) { s->now_ms = now_ms; }

void hlog_session_set_redo(hlog_session *s, hlog_redo_fn fn, void *arg)
{
	s->redo = fn;
	s->redo_arg = arg;
}

uint64_t hlog_redo_seq(hlog *l) { return atomic_load(&l->redo_seq); }
void hlog_redo_seq_set(hlog *l, uint64_t next) { atomic_store(&l->redo_seq, next); }

int hlog_session_attach(hlog_session *s, hlog_ready_fn ready, void *cb_arg)
{
	s->t.ready = ready;
	s->t.cb_arg = cb_arg;
	if (!s->l->dev || s->t.q)
		return 0;
	return readq_attach(s);
}

int hlog_session_poll(hlog_session *s)
{
	if (!s->t.q)
		return 0;
	log_epoch_step(s);
	alloc_maintain(s);
	int n = readq_pump(s);
	if (n > 0) {
		/* Completions moved markers and queued actions: let them run, claim what became due. */
		log_epoch_step(s);
		alloc_maintain(s);
		readq_submit(s);
	}
	pend_waiters_check(s);
	pend_ready_run(s);
	return n;
}

/* ---------------- info ---------------- */

/* ---------------- index growth (store.c note 2) ---------------- */

bool hlog_index_grow_due(hlog *l)
{
	hidx_stats st;
	hidx_stats_get(l->idx, &st);
	uint64_t doubled = 2 * st.buckets * HIDX_BUCKET_BYTES;
	return st.can_grow && doubled <= l->index_max &&
	       st.overflow_buckets * 100 >= st.buckets * (uint64_t)l->index_pct;
}

static void index_quiesce(void *ctx)
{
	hlog_session *s = ctx;
	if (s)
		ckpt_epoch_barrier(s);
}

int hlog_index_grow_step(hlog *l, hlog_session *s)
{
	if (!hlog_index_grow_due(l))
		return 0;
	int rc = hidx_grow(l->idx, index_quiesce, s);
	return rc == 0 ? 1 : rc == -ENOSPC ? 0 : rc;
}

void hlog_info_get(hlog *l, hlog_info *out)
{
	memset(out, 0, sizeof(*out));
	out->begin = atomic_load(&l->begin);
	out->head = atomic_load(&l->head);
	out->safe_read_only = atomic_load(&l->safe_ro);
	out->read_only = atomic_load(&l->read_only);
	out->flushed_until = atomic_load(&l->flushed_until);
	out->tail = tail_address(l, atomic_load(&l->tail));
	out->page_bytes = l->page_bytes;
	out->max_pages = l->max_pages;
	out->allocated_pages = atomic_load(&l->allocated_pages);
	out->memory_bytes = l->max_pages * l->page_bytes;
	hidx_stats_get(l->idx, &out->index);
	out->index_max_bytes = l->index_max;
	out->keys = hlog_key_count(l);
	out->expires = hlog_expires_count(l);
	out->store_error = atomic_load(&l->error);
	for (int i = 0; i < l->max_sessions; i++) {
		hlog_session *s = &l->sessions[i];
#define HLOG_CTR_SUM_UP(f, kind, info, doc) {                                              \
			uint64_t v = atomic_load_explicit(&s->f, memory_order_relaxed);         \
			out->f = (kind) == HLOG_CTR_MAX ? SPW_MAX(out->f, v) : out->f + v;     \
		}
		HLOG_COUNTERS(HLOG_CTR_SUM_UP)
#undef HLOG_CTR_SUM_UP
	}
}

#define HLOG_CTR_DEF(f, k, i, d) { .field = #f, .info = i, .doc = d, .kind = k, .off = offsetof(hlog_info, f) },
const hlog_counter_def hlog_counter_defs[] = { HLOG_COUNTERS(HLOG_CTR_DEF) };
#undef HLOG_CTR_DEF
const unsigned hlog_counter_count = SPW_ARRAY_LEN(hlog_counter_defs);

uint64_t hlog_max_record_payload(hlog *l)
{
	/* The largest record minus a header with an expiry: any key + value up to this fits. */
	return l->max_rec - REC_HDR_BYTES - 8;
}

uint64_t hlog_record_bytes(size_t klen, size_t vlen, bool has_expiry)
{
	return rec_size_of(klen, vlen, has_expiry);
}
