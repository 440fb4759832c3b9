/*
 * enc/rdb.h - Redis's serialization: CRC64, the RDB value encodings, DUMP payloads and RDB files.
 * The one public header of enc/ (pure codecs; the only I/O is reading an RDB file).
 *
 * Ownership: strings handed to a visitor point into the reader's scratch and are valid only until
 * the callback returns. Errors are negative: SPW_E_CORRUPT (bad or truncated bytes, with a message
 * in the reader's err), -ENOMEM, -errno from a file, or what a visitor callback returned.
 */
#ifndef SPW_ENC_RDB_H
#define SPW_ENC_RDB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------- CRC64 (crc64.c) ---------------- */

/* Redis's crc64 (Jones polynomial, reflected): crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca. */
uint64_t rdb_crc64(uint64_t crc, const void *p, size_t n);

/* ---------------- types and constants (Redis 7.0's rdb.h) ---------------- */

#define RDB_VERSION 10               /* what redis-server 7.0 writes; RESTORE accepts <= this */

enum {
	RDB_TYPE_STRING = 0, RDB_TYPE_LIST = 1, RDB_TYPE_SET = 2, RDB_TYPE_ZSET = 3, RDB_TYPE_HASH = 4,
	RDB_TYPE_ZSET_2 = 5, RDB_TYPE_MODULE_PRE_GA = 6, RDB_TYPE_MODULE_2 = 7,
	RDB_TYPE_HASH_ZIPMAP = 9, RDB_TYPE_LIST_ZIPLIST = 10, RDB_TYPE_SET_INTSET = 11,
	RDB_TYPE_ZSET_ZIPLIST = 12, RDB_TYPE_HASH_ZIPLIST = 13, RDB_TYPE_LIST_QUICKLIST = 14,
	RDB_TYPE_STREAM_LISTPACKS = 15, RDB_TYPE_HASH_LISTPACK = 16, RDB_TYPE_ZSET_LISTPACK = 17,
	RDB_TYPE_LIST_QUICKLIST_2 = 18, RDB_TYPE_STREAM_LISTPACKS_2 = 19,
	RDB_TYPE_SET_LISTPACK = 20, RDB_TYPE_STREAM_LISTPACKS_3 = 21,
};

/* File opcodes. */
enum {
	RDB_OPCODE_FUNCTION2 = 245, RDB_OPCODE_FUNCTION_PRE_GA = 246, RDB_OPCODE_MODULE_AUX = 247,
	RDB_OPCODE_IDLE = 248, RDB_OPCODE_FREQ = 249, RDB_OPCODE_AUX = 250, RDB_OPCODE_RESIZEDB = 251,
	RDB_OPCODE_EXPIRETIME_MS = 252, RDB_OPCODE_EXPIRETIME = 253, RDB_OPCODE_SELECTDB = 254,
	RDB_OPCODE_EOF = 255,
};

/* What a value decodes to: the type a client sees (TYPE), whatever the RDB encoding. */
enum { RDB_KIND_STRING, RDB_KIND_LIST, RDB_KIND_SET, RDB_KIND_ZSET, RDB_KIND_HASH, RDB_KIND_STREAM,
	RDB_KIND_MODULE, RDB_KIND_UNKNOWN, RDB_KINDS };
int rdb_type_kind(int rdb_type);
const char *rdb_kind_name(int kind);   /* "string", "list", ... "stream", "module", "unknown" */

/* ---------------- the reader (rdb_read.c) ---------------- */

/* A string read into one of the reader's two scratch slots (a hash needs field and value at once). */
typedef struct rdb_sbuf {
	uint8_t *p;
	size_t cap;
} rdb_sbuf;

typedef struct rdb_reader {
	const uint8_t *buf;          /* the bytes: the whole payload, or the file's window */
	size_t len, pos;             /* [pos, len) unread */
	size_t crc_pos;              /* bytes of buf before this are in crc */
	uint64_t crc;                /* CRC64 of what was consumed before crc_pos */
	uint64_t consumed;           /* bytes consumed before buf[0] (file mode) */
	int fd;                      /* -1: buffer mode */
	uint8_t *win;                /* file mode: the window buf points to */
	size_t win_cap;
	bool eof;                    /* file mode: read() returned 0 */
	rdb_sbuf s[2];
	char err[160];               /* why the last SPW_E_CORRUPT */
} rdb_reader;

void rdb_reader_init_buf(rdb_reader *r, const void *p, size_t len);
/* Reads fd through a window of win_bytes (0 = 1 MiB). 0 or -ENOMEM. The fd stays the caller's. */
int rdb_reader_init_fd(rdb_reader *r, int fd, size_t win_bytes);
void rdb_reader_fini(rdb_reader *r);
/* Bytes consumed so far; the CRC64 of them. */
uint64_t rdb_reader_offset(const rdb_reader *r);
uint64_t rdb_reader_crc(rdb_reader *r);
/* SPW_E_CORRUPT with a message in r->err (printf format). */
int rdb_corrupt(rdb_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int rdb_read_raw(rdb_reader *r, void *dst, size_t n);
int rdb_read_u8(rdb_reader *r, uint8_t *out);
/* A length: *encoded says it is a special string encoding (then *len is RDB_ENC_*). */
int rdb_read_len(rdb_reader *r, uint64_t *len, bool *encoded);
enum { RDB_ENC_INT8 = 0, RDB_ENC_INT16 = 1, RDB_ENC_INT32 = 2, RDB_ENC_LZF = 3 };
/* A plain length (an encoded one is corrupt). */
int rdb_read_plain_len(rdb_reader *r, uint64_t *len);
/* A string in any encoding, integers as their decimal text, LZF decompressed, into slot 0 or 1:
 * *p is valid until the next read into that slot. */
int rdb_read_string(rdb_reader *r, int slot, const uint8_t **p, size_t *len);
int rdb_skip_string(rdb_reader *r);
int rdb_read_binary_double(rdb_reader *r, double *out);
int rdb_read_string_double(rdb_reader *r, double *out);   /* the old format: length byte + text */
int rdb_read_millis(rdb_reader *r, int64_t *out);          /* 8 bytes LE */

/* ---------------- values (rdb_value.c, rdb_ziplist.c) ---------------- */

/* What a decoded value is handed to. Any callback may be NULL (ignored); a negative return stops
 * the decoding and is returned. Integers stored as integers (intsets, listpack and ziplist ints)
 * arrive as their decimal text, as Redis's commands see them. */
typedef struct rdb_visitor {
	int (*string)(void *ctx, const uint8_t *p, size_t len);
	/* A collection starts: its kind (RDB_KIND_*), its RDB type, and how many elements it will have
	 * when the encoding says (0 = unknown; a hash counts pairs). */
	int (*begin)(void *ctx, int kind, int rdb_type, uint64_t count_hint);
	int (*hash_field)(void *ctx, const uint8_t *f, size_t flen, const uint8_t *v, size_t vlen);
	int (*list_elem)(void *ctx, const uint8_t *p, size_t len);
	int (*set_member)(void *ctx, const uint8_t *p, size_t len);
	int (*zset_member)(void *ctx, const uint8_t *p, size_t len, double score);
	int (*end)(void *ctx);
} rdb_visitor;

/* A value that is valid RDB but not one we decode (streams, modules). */
#define RDB_E_UNSUPPORTED (-100200)

/* Decode one value of rdb_type from r into v. 0; RDB_E_UNSUPPORTED for streams and modules (the
 * reader is then not past the value); SPW_E_CORRUPT for bad bytes, a zero-length collection included
 * (Redis refuses empty keys). Every length is checked against the bytes there are. */
int rdb_value_decode(rdb_reader *r, int rdb_type, const rdb_visitor *v, void *ctx);
/* Skip one value in an RDB file, streams and MODULE_2 values included (for --import-rdb: a type we
 * cannot store is stepped over). 0, RDB_E_UNSUPPORTED (MODULE_PRE_GA: no way to skip), or an error. */
int rdb_value_skip(rdb_reader *r, int rdb_type);

/* The in-memory encodings inside a value. Each validates every length against n first. */
typedef int (*rdb_elem_fn)(void *ctx, const uint8_t *p, size_t len);
int rdb_ziplist_walk(const uint8_t *zl, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count /* out */);
int rdb_listpack_walk(const uint8_t *lp, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count /* out */);
int rdb_intset_walk(const uint8_t *is, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *count /* out */);
/* A zipmap calls fn with key then value for each pair. */
int rdb_zipmap_walk(const uint8_t *zm, size_t n, rdb_elem_fn fn, void *ctx, uint64_t *pairs /* out */);

/* ---------------- writing (rdb_write.c) ---------------- */

/* A growable output buffer (malloc'd; oom sticks and later appends do nothing). */
typedef struct rdb_buf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
} rdb_buf;
void rdb_buf_fini(rdb_buf *b);
void rdb_buf_put(rdb_buf *b, const void *p, size_t n);

void rdb_write_len(rdb_buf *b, uint64_t len);
/* Redis's rdbSaveRawString: a canonical integer of <= 11 characters that fits 32 bits as an int
 * encoding, a string over 20 bytes LZF-compressed when that saves at least 4 bytes, else raw. */
void rdb_write_string(rdb_buf *b, const void *p, size_t len);
void rdb_write_binary_double(rdb_buf *b, double d);

/* DUMP payload bodies: the type byte and the value (finish with rdb_dump_finish). */
void rdb_dump_string(rdb_buf *b, const void *p, size_t len);
void rdb_dump_hash_listpack(rdb_buf *b, const void *lp, size_t n);
void rdb_dump_zset_listpack(rdb_buf *b, const void *lp, size_t n);
void rdb_dump_set_intset(rdb_buf *b, const void *is, size_t n);
/* SET (type 2) from members: begin with the count, then each member. */
void rdb_dump_set_begin(rdb_buf *b, uint64_t count);
void rdb_dump_set_member(rdb_buf *b, const void *p, size_t len);
/* LIST_QUICKLIST_2: begin with the node count, then one packed node per listpack. */
void rdb_dump_list_begin(rdb_buf *b, uint64_t nodes);
void rdb_dump_list_node(rdb_buf *b, const void *lp, size_t n);
/* Append the RDB version (2 bytes LE) and the CRC64 of everything before (8 bytes LE). 0 or -ENOMEM. */
int rdb_dump_finish(rdb_buf *b);

/* RESTORE's check (Redis's verifyDumpPayload): at least 10 bytes, version <= RDB_VERSION, CRC64
 * matches. 0 or SPW_E_CORRUPT. *body_len (may be NULL) is the length without the footer. */
int rdb_dump_verify(const void *p, size_t len, size_t *body_len /* out */);
/* Decode a verified payload into v: reads the type byte, then the value (rdb_value_decode). */
int rdb_dump_decode(const void *p, size_t len, const rdb_visitor *v, void *ctx, int *rdb_type /* out */);

/* ---------------- files (rdb_file.c) ---------------- */

/* What an RDB file's reader hands over, key by key. */
typedef struct rdb_file_ops {
	/* A key in db with its expiry (-1 none, else absolute unix ms) and its value's type: return a
	 * visitor to decode the value into (with *vctx), or NULL to skip the value. k is valid only
	 * during the call (the value's decoding reuses the reader's scratch). */
	const rdb_visitor *(*key)(void *ctx, int db, const uint8_t *k, size_t klen, int rdb_type,
		int64_t expire_ms, void **vctx /* out */);
	/* The value just decoded (rc 0), skipped as asked (rc 1), or skipped as a type we do not decode
	 * (rc RDB_E_UNSUPPORTED: a stream or module). A negative return stops the load. */
	int (*value_done)(void *ctx, int rc);
	/* An AUX field, a function library or a module's aux data (NULL: ignored). */
	int (*aux)(void *ctx, const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen);
	void (*skipped)(void *ctx, const char *what);   /* a FUNCTION2 or MODULE_AUX stepped over */
} rdb_file_ops;

typedef struct rdb_file_info {
	int version;
	uint64_t keys;              /* keys met, skipped ones included */
	uint64_t bytes;
	bool crc_checked;           /* the file had a non-zero checksum and it matched */
} rdb_file_info;

/* Read a whole RDB file: "REDIS" + 4-digit version (1..10), then the opcodes and keys to EOF and
 * the trailing CRC64 (checked when not zero, as Redis; files before version 5 have none). 0 or an
 * error (r->err says why). */
int rdb_file_load(rdb_reader *r, const rdb_file_ops *ops, void *ctx, rdb_file_info *info /* out */);

#endif
