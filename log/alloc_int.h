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
/* FLUSHALL's marker moves (alloc.c note 9): Begin to the tail, the index below it cleared, Head and
 * ReadOnly to Begin's page. Returns that Head, which alloc_truncate_release takes. */
uint64_t alloc_truncate(hlog_session *s);
/* Queue the epoch action that frees the frames below head (and publishes SafeHead). */
void alloc_truncate_release(hlog_session *s, uint64_t head);
/* A poll's share: re-queue epoch actions a full drain list refused, move Head where a completion
 * left it wanted, claim the page writes that became due. */
void alloc_maintain(hlog_session *s);

#endif
