/*
 * dump.h - DUMP, RESTORE and --import-rdb's shared part: how a value decoded from Redis's format
 * becomes a record, and how a record becomes a DUMP payload, one entry per type (cmd_dump.c).
 * Private to server/.
 *
 * A type's code plugs in by one line in dump_types[] (cmd_dump.c): until it does, RESTORE of that
 * type answers "ERR Bad data format", DUMP of it an error, and --import-rdb skips its keys with
 * "type not supported yet".
 */
#ifndef SPW_SERVER_DUMP_H
#define SPW_SERVER_DUMP_H

#include "enc/rdb.h"
#include "log/hlog.h"

/* A value being built from its decoded elements: the type's visitor (ctx = the dump_build) fills
 * val with the record's value bytes and sets rtype (HLOG_T_*). */
typedef struct dump_build {
	int kind;                     /* RDB_KIND_* */
	int rdb_type;                 /* the encoding it came in */
	rdb_buf val;                  /* the record's value */
	uint8_t rtype;                /* the record's HLOG_T_* */
	void *state;                  /* the type's own, released by its fini */
} dump_build;

typedef struct dump_type_ops {
	/* RESTORE / import: callbacks that build b->val from the decoded value. */
	const rdb_visitor *vis;
	/* Release b->state (may be NULL). */
	void (*fini)(dump_build *b);
	/* DUMP: append the payload body (type byte and value: rdb_dump_* of enc/rdb.h) of record v. */
	int (*dump)(const hlog_value *v, rdb_buf *out);
} dump_type_ops;

/* By RDB_KIND_*: NULL where the type is not supported yet. */
extern const dump_type_ops dump_hash_ops, dump_list_ops, dump_set_ops, dump_zset_ops;   /* dump_coll.c */
extern const dump_type_ops *const dump_types[RDB_KINDS];

/* The type code for a record: RDB_KIND_STRING for a string, the collection's kind for a head
 * (coll/coll.h), RDB_KIND_UNKNOWN otherwise. */
int dump_record_kind(const hlog_value *v);

/* Decode a verified DUMP payload into b through its type's visitor. 0, RDB_E_UNSUPPORTED (no
 * code for the type yet, or a stream / module), or SPW_E_CORRUPT / another error. */
int dump_payload_build(const void *p, size_t len, dump_build *b /* out */);
/* Start b for a value of rdb_type: the visitor to decode it into, or NULL (unsupported type). */
const rdb_visitor *dump_build_begin(dump_build *b, int rdb_type);
void dump_build_fini(dump_build *b);

/* Write b under k as RESTORE does: replace says whether an existing key may be overwritten
 * (else DUMP_E_BUSYKEY when the key exists), expire_ms is absolute or HLOG_NO_EXPIRY.
 * HLOG_OK, HLOG_PENDING (nothing changed) or a store error. */
#define DUMP_E_BUSYKEY (-100300)
int dump_build_store(hlog_session *s, const hlog_key *k, const dump_build *b, int64_t expire_ms, bool replace);

#endif
