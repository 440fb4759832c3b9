/*
 * resp.h - RESP2/RESP3 request parser and reply writer.
 *
 * proto does no I/O and knows nothing of the store: the caller hands it bytes and a buffer to write
 * replies into, so it can be unit-tested and fuzzed alone.
 *
 * Parser: incremental and zero-copy. The caller keeps a read buffer; resp_request_parse() looks at
 * the unconsumed bytes [buf, buf+len) and either returns one whole request whose arguments are
 * slices into that buffer (valid until the caller moves or reuses those bytes), or RESP_INCOMPLETE
 * with its progress saved in the parser as offsets relative to buf. The caller may then move the
 * unconsumed bytes (compact the buffer) as long as it hands the same bytes, plus new ones, next time.
 * resp_parser_hint() says how many bytes the request in progress needs in total, so a large bulk can
 * be received into one buffer of the right size (no copy later).
 *
 * Writer: replies are appended to a resp_out, a chain of chunks the caller supplies through an
 * allocator callback (the server hands chunks from a per-thread pool: no malloc per reply). The
 * writer encodes for the connection's protocol version (2 or 3).
 *
 * Files: resp_parse.c (the request parser), resp_split.c (Redis's argument splitter, also used by
 * the config file), resp_write.c (the reply writer and the reply skipper). Numbers are formatted
 * and parsed by common/spw.h's spw_fmt_ll and spw_parse_ll (Redis's string2ll).
 */
#ifndef SPW_RESP_H
#define SPW_RESP_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Parser results. RESP_OK: one request in *req. RESP_INCOMPLETE: need more bytes. */
enum {
	RESP_OK = 0,
	RESP_INCOMPLETE = 1,
	RESP_EPROTO = -71,  /* -EPROTO: protocol error; resp_parser_error() has Redis's text */
	RESP_EQUERYBUF = -105, /* -ENOBUFS: the request in progress passed limits.max_querybuf */
};

/* Redis's defaults (src/server.h). */
#define RESP_INLINE_MAX        (64 * 1024)          /* PROTO_INLINE_MAX_SIZE */
#define RESP_MAX_BULK_DEFAULT  (512ULL * 1024 * 1024) /* proto-max-bulk-len */
#define RESP_MAX_QUERYBUF_DEFAULT (1024ULL * 1024 * 1024) /* client-query-buffer-limit */

typedef struct resp_slice {
	const char *ptr;
	size_t len;
} resp_slice;

typedef struct resp_limits {
	uint64_t max_bulk_len;   /* proto-max-bulk-len */
	uint64_t max_querybuf;   /* client-query-buffer-limit: bytes of one pending request */
} resp_limits;

/* Parser state: lives in the connection. Fields are private to resp_parse.c. */
typedef struct resp_parser {
	int state;               /* RESP_ST_* in resp_parse.c */
	int is_inline;
	long long multibulk;     /* args announced by '*' */
	long long bulk;          /* length announced by '$' of the argument in progress, -1 none */
	size_t pos;              /* bytes of the current request already scanned (offset from buf) */
	size_t hint;             /* total bytes the request in progress needs, 0 when unknown */
	size_t scan;             /* inline: bytes of the line already searched for '\n' */
	int argc;
	int argv_cap;
	size_t *arg_off;         /* per argument: offset from buf (its length is already in argv);
	                          * turned into slices when the request is complete */
	resp_slice *argv;        /* slices for the last complete request */
	char *inline_buf;        /* inline requests with quotes are unescaped here */
	size_t inline_cap;
	const char *error;       /* Redis's error text after RESP_EPROTO (static string or errbuf) */
	int error_rc;            /* what the sticky error state returns: the first error's code */
	char errbuf[48];         /* "Protocol error: expected '$', got 'X'" */
	resp_limits limits;
} resp_parser;

typedef struct resp_request {
	int argc;
	const resp_slice *argv;  /* argv[0] is the command name; owned by the parser */
	bool is_inline;
} resp_request;

void resp_parser_init(resp_parser *p, const resp_limits *limits);  /* limits NULL = Redis defaults */
void resp_parser_fini(resp_parser *p);
/* Forget any request in progress (after the caller discarded its bytes). */
void resp_parser_reset(resp_parser *p);

/*
 * Parse one request from [buf, buf+len). On RESP_OK, *consumed is the request's size in bytes (plus
 * any empty requests skipped before it) and *req its arguments (slices into buf, or into the parser
 * for unescaped inline arguments), valid until the next call on this parser. Empty requests (blank
 * inline lines, "*0", "*-1") are skipped as Redis does: they return RESP_INCOMPLETE with *consumed
 * covering them if no request follows. On RESP_INCOMPLETE, *consumed may be > 0 (bytes that can be
 * dropped); the request in progress starts at buf + *consumed next time. On RESP_EPROTO,
 * resp_parser_error() gives the message ("Protocol error: ...") to send as "-ERR <message>" before
 * closing the connection; the parser then stays in error until resp_parser_reset().
 *
 * One exception, as Redis: when the request in progress needs more than limits.max_querybuf bytes
 * (what arrived so far, or what a bulk length announces), the result is RESP_EQUERYBUF, with the
 * text "query buffer limit reached" in resp_parser_error(): log it and close the connection without
 * a reply. The parser stays in error as after RESP_EPROTO. -ENOMEM when the argument arrays cannot
 * grow, -EINVAL when the caller handed fewer bytes than the request in progress already had: both
 * close the connection without a reply, and the parser stays in error, returning the same code.
 */
int resp_request_parse(resp_parser *p, const char *buf, size_t len, size_t *consumed /* out */,
                       resp_request *req /* out */);
/* Bytes the request in progress needs in all (from its first byte), or 0 when not known yet. Known
 * while the parser waits for the payload of a bulk argument; it covers that argument's CRLF. */
size_t resp_parser_hint(const resp_parser *p);
const char *resp_parser_error(const resp_parser *p);

/*
 * Redis's argument splitter (sdssplitargs): the one copy, for inline requests, the config file and
 * test scripts; resp_split.c has the rules. Splits [s, s+len), which ends early at a NUL, and hands
 * each word in order to emit(ctx, word, wlen): a word without quotes is a slice of s; a word with a
 * quoted part is unescaped into *scratch (NULL, or from malloc, *scratch_cap bytes), which is grown
 * with realloc to len bytes before the first such word and not moved again during the call, so
 * every word handed out stays valid until the caller frees or reuses *scratch (the caller frees
 * it). Returns the number of words, -EINVAL on unbalanced quotes, -ENOMEM, or the first negative
 * value emit returned (the split stops there).
 */
typedef int (*resp_arg_fn)(void *ctx, const char *word, size_t len);
int resp_args_split(const char *s, size_t len, char **scratch /* in, out */,
                    size_t *scratch_cap /* in, out */, resp_arg_fn emit, void *ctx);

/*
 * Reply parsing (for clients: bench, tests). Finds the end of one complete reply of any RESP2/RESP3
 * type in [buf, buf+len), nested aggregates included. Returns RESP_OK with *consumed set, or
 * RESP_INCOMPLETE, or RESP_EPROTO on malformed input. *type gets the first byte ('+', '-', ':', ...);
 * an attribute ('|') is skipped together with the reply it annotates, and *type is then '|'.
 * Stateless: an incomplete reply is scanned again from its start next time. Nesting deeper than 128
 * aggregates is RESP_EPROTO (no recursion, no stack growth on hostile input).
 */
int resp_reply_skip(const char *buf, size_t len, size_t *consumed /* out */, char *type /* out */);

/* ---- Writer ---- */

typedef struct resp_chunk {
	struct resp_chunk *next;
	uint32_t len;   /* bytes written */
	uint32_t cap;   /* bytes available in data[] */
	uint32_t sent;  /* bytes already handed to the kernel (used by the server) */
	uint32_t pad;
	char data[];
} resp_chunk;

/* The caller's allocator: returns a chunk with cap >= min_cap (or NULL on ENOMEM). */
typedef resp_chunk *(*resp_chunk_alloc_fn)(void *ctx, size_t min_cap);

typedef struct resp_out {
	resp_chunk *head, *tail;
	size_t bytes;            /* total bytes written, not yet released by the caller */
	int proto;               /* 2 or 3 */
	bool oom;                /* an allocation failed: the connection must be closed */
	resp_chunk_alloc_fn alloc;
	void *alloc_ctx;
} resp_out;

void resp_out_init(resp_out *o, resp_chunk_alloc_fn alloc, void *ctx);   /* proto starts at 2 */

/* Contiguous space for n bytes at the tail; commit what was written. NULL after an allocation failure. */
char *resp_out_reserve_slow(resp_out *o, size_t n);
static inline char *resp_out_reserve(resp_out *o, size_t n)
{
	resp_chunk *t = o->tail;
	if (t && t->cap - t->len >= n)
		return t->data + t->len;
	return resp_out_reserve_slow(o, n);
}
static inline void resp_out_commit(resp_out *o, size_t n)
{
	o->tail->len += (uint32_t)n;
	o->bytes += n;
}
void resp_out_append(resp_out *o, const void *p, size_t n);   /* raw bytes, any length */

/* Encoders; each writes exactly what redis-server 7 writes for the connection's protocol. */
void resp_write_simple(resp_out *o, const char *s, size_t len);     /* +s */
void resp_write_ok(resp_out *o);                                    /* +OK */
/* -msg (msg has its prefix: "ERR ..."; a leading '-' is used as the dash). CR and LF in the text
 * become spaces; errorf first trims CR/LF at both ends, as addReplyErrorFormat. */
void resp_write_error(resp_out *o, const char *msg, size_t len);
void resp_write_errorf(resp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_write_int(resp_out *o, long long v);                      /* :v */
void resp_write_bulk(resp_out *o, const void *p, size_t len);       /* $len\r\n...\r\n */
void resp_write_bulk_cstr(resp_out *o, const char *s);
void resp_write_bulk_ll(resp_out *o, long long v);                  /* integer as a bulk string */
/* Write a whole bulk of len bytes ($len, payload space, CRLF) contiguously and return where the
 * payload goes, for the caller to fill (e.g. straight from a log record). NULL on allocation failure. */
char *resp_write_bulk_fill(resp_out *o, size_t len);
void resp_write_null(resp_out *o);          /* RESP2 $-1, RESP3 _ */
void resp_write_null_array(resp_out *o);    /* RESP2 *-1, RESP3 _ */
void resp_write_array_len(resp_out *o, long long n);   /* *n */
void resp_write_map_len(resp_out *o, long long n);     /* RESP3 %n, RESP2 *(2n) */
void resp_write_set_len(resp_out *o, long long n);     /* RESP3 ~n, RESP2 *n */
void resp_write_double(resp_out *o, double d);         /* RESP3 ,d  RESP2 bulk, formatted as Redis %.17g */
void resp_write_bool(resp_out *o, bool b);             /* RESP3 #t/#f, RESP2 :1/:0 */
void resp_write_verbatim(resp_out *o, const char *fmt3, const void *p, size_t len); /* RESP3 =len\r\ntxt:..., RESP2 bulk */

/* Drop the first n bytes written (after the kernel took them): advances head->sent, and returns the
 * chunks fully sent (the tail too, leaving head and tail NULL) as a list linked by next, in order,
 * for the caller to recycle; frees nothing. resp_out_reserve_slow() re-initialises next/len/sent of
 * every chunk it gets from the allocator, so recycled chunks need no clearing. */
resp_chunk *resp_out_consume(resp_out *o, size_t n);

#endif
