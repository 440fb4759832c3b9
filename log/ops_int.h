/*
 * ops_int.h - the update path of ops.c as group.c shares it (one lookup, one plan, one way to
 * count and log a change), private to log/. See ops.c's notes.
 */
#ifndef SPW_LOG_OPS_INT_H
#define SPW_LOG_OPS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "log/hlog_int.h"

enum { ST_ABSENT, ST_TOMB, ST_EXPIRED, ST_LIVE };
enum { OP_RMW, OP_UPSERT, OP_DELETE, OP_EXPIRE, OP_RELOCATE };

typedef struct log_op {
	int kind;
	int how;                     /* OP_RELOCATE: LOG_RELOCATE_* */
	uint64_t src;                /* OP_RELOCATE: the record compaction found */
	const log_rec *src_rec;      /* OP_RELOCATE: its bytes as compaction read them, or NULL */
	log_part_val *ask;           /* OP_RELOCATE: a live part's value goes here (LOG_RELOCATE_ASK) */
	const hlog_rmw_ops *ops;     /* OP_RMW */
	void *ctx;
	const void *val;             /* OP_UPSERT */
	size_t len;
	int64_t expire_ms;
	uint8_t rtype;               /* OP_UPSERT: the value's HLOG_T_* */
} log_op;

/* One run of the update loop: what the lookup found and what the plan decided. */
typedef struct log_upd {
	hidx_slot slot;
	bool have_slot;
	log_rec *r;                  /* the newest version R (in memory or the fetched copy), or NULL */
	uint64_t info;               /* R's info word (with REC_LOCK_X while mut) */
	uint64_t a;                  /* R's address, 0 when the key is absent (for a fetched copy: the
	                              * cold address the chain walk reached, which the CAS expects) */
	uint64_t found;              /* R's own address (the fetched record's, for a fetched copy) */
	bool mut;                    /* R is mutable and we hold its exclusive lock */
	int st;                      /* ST_*: R's state */
	hlog_value old;              /* R's value when it is live */
	const hlog_value *oldp;      /* &old when R is live, else NULL */
	hlog_rmw_plan plan;
	int result;                  /* what the operation returns once done */
	bool wr, new_exp;            /* the new version: a value (not a tombstone), with an expiry */
	const hlog_key *key;         /* the operation's key (for the redo hook) */
	uint64_t vlen, size;
} log_upd;

/* Step results of log_update's steps, besides what the operation returns (HLOG_* and errors). */
enum { UPD_NEXT = 32, UPD_RESTART = 33 };

/* A redo seq, taken only by sessions with a hook: under the record's lock (in place) or right
 * before the publishing CAS (a new record), so that one key's changes get increasing seqs in the
 * order they were applied (hlog.h). */
static inline uint64_t log_redo_seq(hlog_session *s)
{
	return SPW_UNLIKELY(s->redo != NULL) ? atomic_fetch_add(&s->l->redo_seq, 1) : 0;
}

/* Walk the chain from addr (newest first) for key k. The address of the newest version of k in
 * memory (may be a tombstone, may not be published yet: see rec_wait_valid) with *out and *info_out
 * set, or 0: absent, or, with *cold set, the chain goes on below Head at *cold (note 2). */
static inline uint64_t log_chain_find(hlog *l, uint64_t addr, uint64_t begin, const hlog_key *k,
		log_rec **out, uint64_t *info_out, uint64_t *cold)
{
	while (addr >= begin) {
		if (SPW_UNLIKELY(addr < load_acq(&l->head))) {
			*cold = addr;
			return 0;
		}
		log_rec *r = hlog_rec_at(l, addr);
		uint64_t info = atomic_load_explicit(&r->info, memory_order_acquire);
		if (rec_key_is(r, info, k->ptr, k->len, k->internal)) {   /* note 5: its namespace only */
			*out = r;
			*info_out = info;
			return addr;
		}
		addr = info & REC_PREV_MASK;
	}
	return 0;
}

/* Restart path of an operation that holds nothing: count it, let the epoch move, back off. */
void log_retry(hlog_session *s, unsigned *spins);
/* Find the newest version R of k (ops.c note 3); a mutable R comes back locked exclusive. UPD_NEXT,
 * UPD_RESTART (nothing held), or what the operation returns (HLOG_PENDING, a read's error). */
int log_update_find(hlog_session *s, const hlog_key *k, const log_op *op, log_upd *u);
/* Classify R and decide what to write (u->st, old, plan, size). UPD_NEXT when there is something
 * to write, else the operation's result (a plan's error, SPW_E_TOO_BIG, -EINVAL, or u->result
 * when nothing changes) with R still locked: the caller unlocks. */
int log_update_plan(hlog_session *s, const hlog_key *k, const log_op *op, log_upd *u);
/* A new version of k at na was published (its CAS won): the key counts, the units' live counts and
 * the garbage it made (ops.c notes 4 and 5, compact.c notes 3 and 7). */
void log_update_published(hlog_session *s, const hlog_key *k, const log_op *op, const log_upd *u, uint64_t na);
/* The redo hook's call for the change to k at addr (hlog.h, "durability"); group_more: more records
 * of a group follow (group.c). */
void log_redo(hlog_session *s, uint64_t seq, uint64_t addr, const hlog_key *k, bool wr, const log_rec *r,
              uint64_t info, int64_t expire_ms, bool group_more);

#endif
