/*
 * latch.h - the large layout's collection latches (docs/ARCHITECTURE.md "Large collections"):
 * 4096 reader-writer spin latches, one per 64-byte cache line, chosen by the user key's hash.
 * Readers of a large collection hold one shared, writers exclusive, for the span of one store
 * operation sequence that never parks: on HLOG_PENDING the holder releases, parks and re-runs
 * (coll/latch.c note 2). Two keys may share a latch (a false conflict, never a wrong answer).
 * A thread holds at most one latch at a time.
 */
#ifndef SPW_COLL_LATCH_H
#define SPW_COLL_LATCH_H

#include <stdint.h>

#define COLL_LATCHES 4096u

void coll_latch_shared(uint64_t key_hash);
void coll_latch_shared_release(uint64_t key_hash);
void coll_latch_excl(uint64_t key_hash);
void coll_latch_excl_release(uint64_t key_hash);
/* For tests: the latch's word (readers, bit 31: a writer). */
uint32_t coll_latch_word(uint64_t key_hash);

#endif
