/*
 * zset_int.h - what the sorted-set command files (cmd_zset.c, cmd_zset_range.c, cmd_zset_ops.c)
 * share: the read wrapper, the store of a computed result, the encoding rule and reply helpers.
 * Private to server/.
 */
#ifndef SPW_SERVER_ZSET_INT_H
#define SPW_SERVER_ZSET_INT_H

#include "server/server_int.h"

#include "coll/coll.h"
#include "coll/listpack.h"
#include "coll/zset.h"

/* zset-max-listpack-entries / -value, CONFIG SET-able (config.c note 6: relaxed loads). */
#define ZSET_MAX_LISTPACK_ENTRIES __atomic_load_n(&g_cfg.zset_max_listpack_entries, __ATOMIC_RELAXED)
#define ZSET_MAX_LISTPACK_VALUE __atomic_load_n(&g_cfg.zset_max_listpack_value, __ATOMIC_RELAXED)

/* A read command's body: called with the sorted set (its listpack checked shallowly) under the
 * record's shared lock; it writes the reply. */
typedef void zs_body_fn(client *c, const coll_view *v, void *arg);

/* Look key up as lookupKeyRead does (a keyspace hit or miss when count) and run fn on the zset.
 * 1: fn ran; 0: no such key (nothing replied); -1: an error or a park was replied. */
int zs_lookup(client *c, const resp_slice *key, bool count, zs_body_fn *fn, void *arg);
/* The same with a hint for a large set (coll_zset_large.c note 2; NULL: a whole read). */
int zs_lookup_hint(client *c, const resp_slice *key, bool count, coll_hint *h, zs_body_fn *fn, void *arg);

/* The encoding a stored result of n members, the longest maxlen bytes, gets
 * (zsetConvertToListpackIfNeeded). */
static inline int zs_result_enc(unsigned long n, size_t maxlen)
{
	return n <= ZSET_MAX_LISTPACK_ENTRIES && maxlen <= ZSET_MAX_LISTPACK_VALUE ? CENC_LISTPACK
	                                                                           : CENC_SKIPLIST;
}

/* Redis's setKey of a computed sorted set (the STORE commands): dst becomes the listpack lp
 * (whatever dst held before, its TTL dropped), or is deleted when lp is empty. A store result. */
int zs_store(client *c, const resp_slice *dst, const uint8_t *lp, int enc);

/* Reply with a member entry's bytes. */
void zs_reply_member(client *c, const uint8_t *p);
/* Reply with one member, and its score when withscores (a pair array in RESP3 when nested). */
void zs_reply_pair(client *c, const uint8_t *lp, const uint8_t *p, bool withscores, bool nested);

/* Redis's getLongFromObjectOrReply (msg NULL: its standard text). false after replying. */
bool zs_arg_long(client *c, const resp_slice *a, long long *out, const char *msg);

/* cmd_zset_range.c: ZRANGE's options and range, parsed (zrangeGenericCommand's steps 1 and 2). */
enum { ZR_AUTO = 0, ZR_RANK, ZR_SCORE, ZR_LEX };
typedef struct zs_rangeq {
	int type;                 /* ZR_RANK, ZR_SCORE, ZR_LEX */
	bool rev, withscores;
	long long start, end;     /* ZR_RANK */
	long long offset, limit;  /* LIMIT (limit -1: none) */
	zs_range score;
	zs_lex lex;
	/* a large set (coll_zset_large.c note 2): count_only (in: ZCOUNT, no pairs wanted);
	 * large_exact (out: the view is exactly the run, large_n pairs, in forward order) */
	bool count_only, large_exact;
	unsigned long long large_n;
} zs_rangeq;
/* The run of pairs a range selects: first (in the walk's direction), count of them. */
typedef struct zs_run {
	const uint8_t *first;
	unsigned long n;
} zs_run;
void zs_run_find(const uint8_t *lp, const zs_rangeq *q, zs_run *out /* out */);
/* The next member entry in the walk's direction, or NULL. */
const uint8_t *zs_step(const uint8_t *lp, const uint8_t *p, bool rev);

#endif
