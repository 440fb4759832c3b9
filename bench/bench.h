/*
 * bench.h - spillway-bench's parts, shared between its files and with tests/bench.
 *
 * Library part (bench_hist.c, bench_zipf.c, bench_req.c, bench_cli.c: library spw_bench, unit-tested
 * alone):
 *   - bench_hist: an HdrHistogram-style log-linear latency histogram (fixed memory, no allocation
 *     after bench_hist_init);
 *   - bench_rng / bench_zipf: a per-thread random generator and an exact Zipf generator;
 *   - the key space (deterministic keys and values), the request encoder and batch builder, and the
 *     reply checker that makes a broken server fail loudly instead of posting a fast number;
 *   - bench_cli: the flag table both tools (spillway-bench, spillway-devbench) parse their options by.
 * Tool part (bench_opts.c, bench_net.c, bench_inproc.c, bench_out.c, bench_main.c: the executable
 * only): its flags, the native pipelined client, the in-process client, output, and the driver (see
 * bench_main.c's notes).
 *
 * All functions return 0 or a count on success and -errno on failure, like the rest of Spillway.
 */
#ifndef SPW_BENCH_H
#define SPW_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/spw.h"

/* ---------------- histogram ---------------- */

/*
 * Log-linear histogram after Gil Tene's HdrHistogram: values in [lowest, highest] are kept with
 * `sigfigs` significant decimal digits. Each power-of-two bucket above the first is split into
 * sub_half linear sub-buckets (1024 for 3 digits), so a recorded value is off by at most 1/1024 of
 * itself. The counts array is allocated once; recording is a clz, two shifts and an increment.
 * Values below lowest count in the lowest sub-bucket, values above highest count as highest.
 */
typedef struct bench_hist {
	int64_t lowest, highest;
	int unit_mag;             /* floor(log2(lowest)) */
	int sub_half_mag;         /* log2(sub_half) */
	int64_t sub_count;        /* sub-buckets of bucket 0 (2 * sub_half) */
	int64_t sub_half;
	int64_t sub_mask;         /* (sub_count - 1) << unit_mag */
	int buckets;
	int32_t counts_len;
	uint64_t total;
	int64_t min, max;         /* exact recorded extremes (after clamping); min INT64_MAX when empty */
	uint64_t sum;             /* of recorded values, for the mean */
	uint64_t *counts;
} bench_hist;

/* The range the tool records latencies in: 1 ns .. 60 s, 3 significant digits (so 1 us .. 60 s
 * with better than 0.1% resolution, as the issue asks, and sub-microsecond in-process latencies). */
#define BENCH_HIST_LOWEST 1
#define BENCH_HIST_HIGHEST 60000000000LL
#define BENCH_HIST_SIGFIGS 3

/* 0, -EINVAL (lowest < 1, highest < 2 * lowest, sigfigs outside 1..5) or -ENOMEM. */
int bench_hist_init(bench_hist *h, int64_t lowest, int64_t highest, int sigfigs);
void bench_hist_fini(bench_hist *h);
void bench_hist_reset(bench_hist *h);
/* Index of value v in counts (v already clamped to [0, highest]). */
static inline int32_t bench_hist_index(const bench_hist *h, int64_t v)
{
	int pow2ceil = 64 - __builtin_clzll((uint64_t)v | (uint64_t)h->sub_mask);
	int bucket = pow2ceil - h->unit_mag - (h->sub_half_mag + 1);
	int32_t sub = (int32_t)(v >> (bucket + h->unit_mag));
	return (int32_t)(((int64_t)(bucket + 1) << h->sub_half_mag) + (sub - h->sub_half));
}
/* Record n occurrences of value v. No allocation, no system call. */
static inline void bench_hist_record_n(bench_hist *h, int64_t v, uint64_t n)
{
	if (SPW_UNLIKELY(v < 0))
		v = 0;
	if (SPW_UNLIKELY(v > h->highest))
		v = h->highest;
	h->counts[bench_hist_index(h, v)] += n;
	h->total += n;
	h->sum += (uint64_t)v * n;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}
static inline void bench_hist_record(bench_hist *h, int64_t v) { bench_hist_record_n(h, v, 1); }
/* Add src's counts into dst. Both must have the same layout (same init arguments): -EINVAL else. */
int bench_hist_merge(bench_hist *dst, const bench_hist *src);
/* The value at percentile p (0..100): the highest value equivalent to the nearest-rank sample
 * (rank ceil(p/100 * total), at least 1), so it is never below the exact sample and at most one
 * sub-bucket above it. 0 when empty. p = 0 gives the minimum, p = 100 the maximum. */
int64_t bench_hist_percentile(const bench_hist *h, double p);
double bench_hist_mean(const bench_hist *h);
/* Lowest and highest values that share v's sub-bucket. */
int64_t bench_hist_lowest_equiv(const bench_hist *h, int64_t v);
int64_t bench_hist_highest_equiv(const bench_hist *h, int64_t v);
/* Print the whole distribution as HdrHistogram's percentile output does (Value, Percentile,
 * TotalCount, 1/(1-Percentile)), values divided by unit (1000: ns printed as us), with
 * ticks_per_half steps per halving of the remaining distance to 100%. */
void bench_hist_print(const bench_hist *h, FILE *f, double unit, int ticks_per_half);

/* ---------------- random numbers and Zipf ---------------- */

/* splitmix64: one add and three multiply-xorshift steps; good enough for key choice, seedable. */
typedef struct bench_rng {
	uint64_t s;
} bench_rng;

static inline uint64_t bench_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}
static inline void bench_rng_seed(bench_rng *r, uint64_t seed) { r->s = bench_mix64(seed + 0x9e3779b97f4a7c15ULL); }
static inline uint64_t bench_rng_next(bench_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return bench_mix64(r->s);
}
/* Uniform in [0, n) (Lemire's multiply-shift; bias < n / 2^64). */
static inline uint64_t bench_rng_below(bench_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}
/* Uniform in [0, 1). */
static inline double bench_rng_double(bench_rng *r) { return (double)(bench_rng_next(r) >> 11) * 0x1.0p-53; }

/*
 * Zipf over ranks [0, n): P(rank k) proportional to 1 / (k + 1)^theta, theta > 0 (0.99 is the
 * YCSB/Resp.benchmark default). Drawn exactly, in O(1) expected time and with O(1) set-up (no
 * zeta(n) sum), by Hoermann and Derflinger's rejection-inversion ("Rejection-inversion to generate
 * variates from monotone discrete distributions", ACM TOMACS 1996). Rank 0 is the hottest key.
 * (Gray et al.'s method, which YCSB and Resp.benchmark use, is only approximate: it over-draws the
 * ranks just below the hottest; docs/BENCHMARKS.md appendix F has by how much.)
 */
typedef struct bench_zipf {
	uint64_t n;
	double theta;
	double hx1;               /* H(1.5) - 1 */
	double hn;                /* H(n + 0.5) */
	double s;                 /* 2 - H^-1(H(2.5) - h(2)): the quick-accept bound */
} bench_zipf;

/* 0, or -EINVAL when n < 1 or theta is not in (0, 10]. */
int bench_zipf_init(bench_zipf *z, uint64_t n, double theta);
uint64_t bench_zipf_next(const bench_zipf *z, bench_rng *r);

/* ---------------- key space, requests, batches ---------------- */

enum bench_op {
	BENCH_OP_GET,
	BENCH_OP_SET,
	BENCH_OP_MGET,     /* one command with b keys */
	BENCH_OP_MSET,     /* one command with b key-value pairs */
	BENCH_OP_INCR,     /* on counter keys ("c" + key): values that are integers */
	BENCH_OP_DEL,
	BENCH_OP_EXISTS,
	BENCH_OP_PING,
	BENCH_OP_HGET,     /* one field of a hash key (the key space's fields > 0) */
	BENCH_OP_HSET,     /* sets one field of a hash key */
	BENCH_OP_COUNT
};

/* "GET", ...; NULL for an unknown op. */
const char *bench_op_name(int op);
/* Case-insensitive; the op, or -EINVAL. */
int bench_op_parse(const char *s);
/* Ops that take b keys in one command. */
static inline bool bench_op_multi(int op) { return op == BENCH_OP_MGET || op == BENCH_OP_MSET; }
/* Ops on one field of a hash: their requests name a cell (below), not a key. */
static inline bool bench_op_hash(int op) { return op == BENCH_OP_HGET || op == BENCH_OP_HSET; }

/*
 * The key space: keys 0..dbsize-1, key i written as the decimal i left-padded with '0' to keylen
 * bytes (so a later run can find them: loading is deterministic). Key i's value is valuelen bytes
 * that depend only on i (letters and digits from splitmix64(i), never an integer), or the key
 * itself when the value length given is 0 (as Resp.benchmark's --valuelength 0). Values of
 * different keys differ (unless valuelen is tiny), so a server returning the wrong key's value, a
 * stale value or a truncated one is caught.
 *
 * Hash key spaces (fields > 0, for HGET and HSET): every key is a hash of fields fields named
 * "f0".."f<fields-1>", each value vallen bytes. HGET and HSET requests carry a cell index,
 * key * fields + field, where a string op carries a key index; field f of key k holds the value
 * that bench_value_format gives index k * fields + f, so a reply from the wrong field or key fails.
 */
typedef struct bench_keyspace {
	uint64_t dbsize;
	uint32_t keylen;          /* >= digits of dbsize - 1 */
	uint32_t vallen;          /* bytes of every value (keylen when value_is_key) */
	bool value_is_key;
	uint32_t fields;          /* > 0: every key is a hash of this many fields; 0: strings */
	bool zipf;
	bench_zipf z;             /* when zipf */
} bench_keyspace;

#define BENCH_KEYLEN_MAX 1024
#define BENCH_VALLEN_MAX (64u << 20)
#define BENCH_FIELDS_MAX (1u << 20)

/* Decimal digits of dbsize - 1 (at least 1). */
uint32_t bench_key_digits(uint64_t dbsize);
/* 0, or -EINVAL (dbsize 0, keylen < digits or > BENCH_KEYLEN_MAX, vallen > BENCH_VALLEN_MAX, bad
 * theta). keylen 0 means "just the digits"; vallen 0 means "the value is the key". theta 0 = uniform. */
int bench_keyspace_init(bench_keyspace *ks, uint64_t dbsize, uint32_t keylen, uint32_t vallen, double theta);
/* Write key i (ks->keylen bytes) to out. Counter keys (INCR) are "c" followed by key i. */
void bench_key_format(const bench_keyspace *ks, uint64_t i, char *out);
/* Write key i's value (ks->vallen bytes) to out. */
void bench_value_format(const bench_keyspace *ks, uint64_t i, char *out);
/* true when [p, p+len) is key i's value. */
bool bench_value_matches(const bench_keyspace *ks, uint64_t i, const char *p, size_t len);
/* Make ks a hash key space of fields fields (see above). 0, or -EINVAL when fields is 0 or over
 * BENCH_FIELDS_MAX, the value is the key (vallen 0), or dbsize * fields cells overflow 64 bits. */
int bench_keyspace_hash(bench_keyspace *ks, uint32_t fields);
/* A key for the next request: uniform or Zipf over the key space. */
static inline uint64_t bench_key_pick(const bench_keyspace *ks, bench_rng *r)
{
	return ks->zipf ? bench_zipf_next(&ks->z, r) : bench_rng_below(r, ks->dbsize);
}
/* What the next request of op names: a key (bench_key_pick), for a hash op a cell whose key is so
 * drawn and whose field is uniform, for PING 0. */
static inline uint64_t bench_req_pick(const bench_keyspace *ks, int op, bench_rng *r)
{
	if (op == BENCH_OP_PING)
		return 0;
	uint64_t k = bench_key_pick(ks, r);
	return bench_op_hash(op) ? k * ks->fields + bench_rng_below(r, ks->fields) : k;
}

/* Bytes that encoding op with nkeys keys takes: exact, except for HGET/HSET, where it is the size
 * with the longest field name (a bound: field names differ in length). */
size_t bench_req_size(const bench_keyspace *ks, int op, uint32_t nkeys);
/*
 * Encode one request as a RESP array into out (bench_req_size bytes available): op on keys
 * keys[0..nkeys) (nkeys 1 except for MGET/MSET; none for PING; for HGET/HSET keys[0] is a cell).
 * key_off/val_off (may be NULL) get, for each key, the offsets in out of its bytes and of its
 * value's bytes (SET/MSET/HSET; else 0), so the in-process client can run the same batch from the
 * same bytes. Returns the bytes written.
 */
size_t bench_req_encode(const bench_keyspace *ks, int op, const uint64_t *keys, uint32_t nkeys, char *out,
                        uint32_t *key_off, uint32_t *val_off);
/* The load's request for key i of a hash key space: one HSET of all its fields, f0 first. Its exact
 * size, and the encoder (bench_hash_load_size bytes available; returns the bytes written). */
size_t bench_hash_load_size(const bench_keyspace *ks);
size_t bench_hash_load_encode(const bench_keyspace *ks, uint64_t key, char *out);

/*
 * A pre-built batch: `count` requests of one op (or one MGET/MSET of `count` keys), encoded back to
 * back, with what the checker and the in-process client need. Built before the timed interval.
 */
typedef struct bench_batch {
	int op;
	char *buf;
	size_t len;
	uint32_t nreq;            /* top-level replies this batch gets */
	uint32_t nkeys;           /* keys in it (nreq for single-key ops; 0 for PING) */
	uint64_t *keys;           /* key index of each key, in order */
	uint32_t *key_off;        /* offsets in buf of each key's bytes */
	uint32_t *val_off;        /* offsets in buf of each key's value (SET/MSET) */
} bench_batch;

/* Build a batch of `count` (>= 1) requests/keys, keys drawn by bench_key_pick, or sequential from
 * *seq when seq is not NULL (the load phase; *seq advances). 0, -EINVAL or -ENOMEM. */
int bench_batch_build(bench_batch *b, const bench_keyspace *ks, int op, uint32_t count, bench_rng *r,
                      uint64_t *seq);
void bench_batch_free(bench_batch *b);

/* ---------------- reply checks ---------------- */

enum {
	BENCH_REPLY_OK = 0,
	BENCH_REPLY_ERROR = 1,    /* an error reply (-ERR ...) */
	BENCH_REPLY_WRONG = 2,    /* a reply of the wrong type, or a value that is not the key's */
	BENCH_REPLY_MISSING = 3,  /* nil for a key that was loaded (and no DEL in the workload) */
};

typedef struct bench_check {
	uint64_t errors, wrong, missing;
	uint64_t nils;            /* nil replies accepted because the workload deletes keys */
	bool allow_missing;       /* the workload has DEL: a nil GET is not a failure */
	char first[200];          /* the first failure, for the report ("" when none) */
} bench_check;

static inline uint64_t bench_check_failures(const bench_check *c) { return c->errors + c->wrong + c->missing; }
void bench_check_merge(bench_check *dst, const bench_check *src);

/*
 * Check one complete reply [p, p+len) (as delimited by resp_reply_skip) to op on key (for MGET: one
 * element of the array, checked as a GET of that key; the caller splits the array with
 * bench_array_header). Counts failures in c and returns BENCH_REPLY_*.
 *   GET: the key's value (nil: MISSING, or accepted when c->allow_missing)
 *   SET, MSET: +OK       INCR: an integer      DEL, EXISTS: :0 or :1 (0 for EXISTS as a nil GET)
 *   PING: +PONG          any op: '-' is ERROR (RESP3 '!' blob errors too)
 *   HGET: as GET, the cell's value     HSET (one field, or the load's whole hash): an integer
 *   from 0 to ks->fields (the fields it added)
 */
int bench_reply_check(bench_check *c, const bench_keyspace *ks, int op, uint64_t key, const char *p, size_t len);
/* Record a failure found elsewhere (the in-process client, a short array) in c. */
void bench_check_note(bench_check *c, int kind, int op, uint64_t key, const char *what, size_t wlen);

/* Parse an aggregate header "*<n>\r\n" at p: RESP_OK with *consumed and *count (-1 for a null
 * array), RESP_INCOMPLETE, or RESP_EPROTO when p is not an array header. */
int bench_array_header(const char *p, size_t len, size_t *consumed /* out */, int64_t *count /* out */);

/* ---------------- command-line options (bench_cli.c) ---------------- */

/*
 * Both tools declare their flags once, as a table of bench_cli rows: getopt's long-option table is
 * built from it (bench_cli_longopts) and a flag's value is parsed and stored by its row's kind
 * (bench_cli_apply), so a new flag is one row. Values land at an offset in the tool's options struct.
 */
enum bench_cli_kind {
	BENCH_CLI_OWN,            /* the tool handles it itself (bench_cli_apply returns -ENOTSUP) */
	BENCH_CLI_FLAG,           /* bool, set true; no value */
	BENCH_CLI_STR,            /* const char *, the argument itself */
	BENCH_CLI_INT,            /* int in [lo, hi] (strtol) */
	BENCH_CLI_U32,            /* uint32_t in [lo, hi] (strtol) */
	BENCH_CLI_U64,            /* uint64_t in [lo, hi], decimal, no sign */
	BENCH_CLI_DOUBLE,         /* double, not NaN */
	BENCH_CLI_SIZE,           /* uint64_t with a k/m/g/t suffix (spw_parse_size) */
	BENCH_CLI_INTS,           /* "1,2,4": ints in [lo, hi], at most max, count in the int at count_off */
	BENCH_CLI_RATES,          /* "1e5,2e5": doubles > 0, as INTS */
	BENCH_CLI_OPS,            /* "GET,SET": bench_op_parse values, as INTS */
};

typedef struct bench_cli {
	const char *name;         /* the long flag, without "--" */
	int key;                  /* what getopt returns for it: a short letter or a code >= 256 */
	int has_arg;              /* getopt's no_argument, required_argument, optional_argument */
	int kind;                 /* BENCH_CLI_* */
	size_t off;               /* of the value in the options struct */
	size_t count_off;         /* list kinds: of the entry count */
	uint64_t lo, hi;          /* number kinds: the accepted range */
	int max;                  /* list kinds: entries at most */
	const char *label;        /* how messages name the flag ("--port", "-t") */
	const char *def;          /* the default, written as on the command line; NULL: none (or the
	                           * tool's own, for BENCH_CLI_OWN rows) */
} bench_cli;

/* Fill out[0..n] (n rows plus the zero terminator) for getopt_long. out has n + 1 entries. */
struct option;
void bench_cli_longopts(const bench_cli *defs, int n, struct option *out);
/* Store every row's default (def) in opts, as if given on the command line; OWN rows are skipped.
 * 0, or -EINVAL when a default does not parse (a mistake in the table). */
int bench_cli_defaults(const bench_cli *defs, int n, void *opts);
/* The row whose key is key (the first, for aliases), or NULL. */
const bench_cli *bench_cli_find(const bench_cli *defs, int n, int key);
/* Parse arg by d's kind into opts + d->off: 0, -EINVAL for a bad value, -ENOTSUP for BENCH_CLI_OWN. */
int bench_cli_apply(const bench_cli *d, const char *arg, void *opts);
/* The number parsers the kinds use, for the tools' own flags. 0 or -EINVAL. */
int bench_parse_int(const char *s, long lo, long hi, int *out);
int bench_parse_u64(const char *s, uint64_t *out);
int bench_parse_double(const char *s, double *out);

#endif
