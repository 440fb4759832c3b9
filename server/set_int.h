/*
 * set_int.h - what cmd_set.c and cmd_set_multi.c share: the edit context of a set write and the
 * reply helpers. Private to the two files.
 */
#ifndef SPW_SERVER_SET_INT_H
#define SPW_SERVER_SET_INT_H

#include "server/server_int.h"
#include "coll/coll.h"
#include "coll/set.h"

/* set-max-intset-entries (CONFIG SET-able: it decides only later conversions, as in Redis). */
#define SET_MAX_INTSET_ENTRIES ((size_t)g_cfg.set_max_intset_entries)

/* One set write's context (coll.c note 2: rebuilt on every run of the edit). Heap buffers, freed
 * by set_op_free after the reply. */
struct set_op {
	lp_buf b;                 /* the new payload */
	lp_buf taken;             /* SPOP: the members taken out, a listpack */
	int enc;                  /* CENC_* of b */
	long long n;              /* the reply's count */
	long long count;          /* SPOP's count argument, -1 without one */
	const resp_slice *member; /* SMOVE's member */
	bool found;               /* the key existed (set by set_rmw) */
	lp_edit pe;               /* one member of a listpack set: the planned edit (cmd_set.c note 7) */
};
void set_op_free(struct set_op *o);
/* The start of an edit: o->b is a copy of cur, or (cur NULL) a new set that can hold first
 * (setTypeCreate). o->n = 0. 0 or -ENOMEM. */
int set_op_start(struct set_op *o, const coll_view *cur, const resp_slice *first);
/* The end of an edit from o->b: written, or deleted when empty. */
void set_edit_out(coll_edit *e, struct set_op *o);
/* coll_rmw of key as a set with the edit fn and o as its context. */
int set_rmw(client *c, const resp_slice *key, struct set_op *o, int (*fn)(coll_edit *, const coll_view *),
            bool create);

/* After a read command's coll_read: count the lookup as lookupKeyRead does (a key of another
 * type is a hit), then reply_store_failed. */
bool set_lookup_failed(client *c, int rc);
void set_reply_member(client *c, const lp_val *m);
/* A reply of every member: a set (RESP3 '~'), or an array (SRANDMEMBER's, as 7.0 answers it). */
void set_reply_members(client *c, int enc, const uint8_t *p, bool array);

#endif
