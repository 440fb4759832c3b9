/*
 * alloc_int.h - alloc.c's entry points, private to log/. See alloc.c's notes.
 */
#ifndef SPW_LOG_ALLOC_INT_H
#define SPW_LOG_ALLOC_INT_H

#include <errno.h>
#include <stdint.h>

#include "log/hlog_int.h"

/* Internal results of alloc_reserve, besides an address, SPW_E_LOG_FULL, SPW_E_TOO_BIG and
 * SPW_E_STORE_ERROR. */
#define LOG_E_RETRY (-EAGAIN)            /* drop everything, refresh, restart (an epoch action) */
#define LOG_E_WAIT (-EINPROGRESS)        /* a frame is waiting for its page to reach the device */

/* Map the frames and allocate the per-slot bookkeeping (l's sizes set). 0 or -errno. */
int alloc_open(hlog *l);
/* Set the markers of an empty log and open page 0 (alloc.c note 1). */
void alloc_start(hlog *l);
/* Unmap the frames and free the per-slot bookkeeping (what alloc_open set up, even partly). */
void alloc_close(hlog *l);
/* Reserve size bytes at the tail (alloc.c note 4): the address, or SPW_E_LOG_FULL,
 * SPW_E_STORE_ERROR, LOG_E_RETRY or LOG_E_WAIT (*need: the SafeHead the page turn waits for). */
int64_t alloc_reserve(hlog_session *s, uint64_t size, uint64_t *need /* out */);
/* The same for a group's span (group.c): larger than a page, it starts a fresh page and covers
 * whole pages as a spanning record does, but carries no span marks (alloc.c note 5). */
int64_t alloc_reserve_group(hlog_session *s, uint64_t size, uint64_t *need /* out */);
/* FLUSHALL's marker moves (alloc.c note 9): Begin to the tail, the index below it cleared, Head and
 * ReadOnly to Begin's page. Returns that Head, which alloc_truncate_release takes. */
uint64_t alloc_truncate(hlog_session *s);
/* Compaction's move of Begin (alloc.c): to `to`; returns the Head whose
 * frames alloc_truncate_release frees (without a device), or 0. Under ckpt_mu. */
uint64_t alloc_begin_raise(hlog_session *s, uint64_t to);
/* Queue the epoch action that frees the frames below head (and publishes SafeHead). */
void alloc_truncate_release(hlog_session *s, uint64_t head);
/* A checkpoint's cut (ckpt.c note 1): the tail moved to a multiple of align, ReadOnly raised to it,
 * cut_word set to gen << 48 | cut; returns it, with Begin at that instant in *begin_out. */
uint64_t alloc_cut(hlog_session *s, uint32_t align, uint64_t gen, uint64_t *begin_out /* out */);
/* Whether every page below addr's page is on the device: FlushedUntil has passed it, or, where a
 * spanning record ending on addr's page holds FlushedUntil back (it steps over a span whole, note
 * 5), each page from FlushedUntil's to addr's was written by itself. A checkpoint whose cut lies on
 * such a page waits for this, not for FlushedUntil: that page is written only once it fills. */
bool alloc_written_below(hlog *l, uint64_t addr);
/* Whether SafeReadOnly has passed cut (lets the epoch action run; call in a loop). */
bool alloc_cut_safe(hlog_session *s, uint64_t cut);
/* Recovery's markers: the log [begin, cut), with [head, cut) in memory (alloc.c). */
void alloc_recover(hlog *l, uint64_t begin, uint64_t head, uint64_t cut);
/* Spanning-record marks (alloc.c note 5): for a record of size bytes at page np; and the
 * continuation mark of page p alone (recovery). */
void alloc_span_mark(hlog *l, uint64_t np, uint64_t size);
void alloc_span_cont_set(hlog *l, uint64_t p, uint64_t end);
/* One step of a wait that holds nothing: the epoch, and this session's own device work (alloc.c). */
void alloc_wait_step(hlog_session *s);
/* A poll's share: re-queue epoch actions a full drain list refused, move Head where a completion
 * left it wanted, claim the page writes that became due. */
void alloc_maintain(hlog_session *s);

#endif
