/*
 * spw.h - what every layer shares: error codes, branch hints, clocks, logging.
 *
 * Errors follow liburing/LMDB: functions return 0 or a count on success, -errno for system errors,
 * and project codes from the reserved range below (all < SPW_E_BASE). spw_strerror() names both.
 * "Try again" codes are positive and module-specific (RESP_INCOMPLETE, HLOG_PENDING), never errors.
 */
#ifndef SPW_H
#define SPW_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "spw_config.h"

#define SPW_LIKELY(x)   __builtin_expect(!!(x), 1)
#define SPW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SPW_CACHELINE 64
#define SPW_ALIGNED_CL __attribute__((aligned(SPW_CACHELINE)))
#define SPW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SPW_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SPW_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SPW_ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t)(a) - 1))

/* Project error codes: a reserved negative range far below any -errno. */
enum {
	SPW_E_BASE = -100000,
	SPW_E_LOG_FULL = SPW_E_BASE - 1,    /* memory region full and no device tier to spill to */
	SPW_E_TOO_BIG = SPW_E_BASE - 2,     /* record larger than the log can hold (page size) */
	SPW_E_CORRUPT = SPW_E_BASE - 3,     /* checksum or magic mismatch */
	SPW_E_NOT_INT = SPW_E_BASE - 4,     /* value is not an integer or out of range */
	SPW_E_OVERFLOW = SPW_E_BASE - 5,    /* increment or decrement would overflow */
	SPW_E_NOT_FLOAT = SPW_E_BASE - 6,   /* value is not a valid float */
	SPW_E_NAN = SPW_E_BASE - 7,         /* increment would produce NaN or Infinity */
	SPW_E_STORE_ERROR = SPW_E_BASE - 8, /* sticky store error state */
	SPW_E_WRONGTYPE = SPW_E_BASE - 9,   /* the key holds a value of another type (Redis's WRONGTYPE) */
	SPW_E_LAST = SPW_E_BASE - 64,
};

/* Name an error from either range; never NULL. Thread-safe. */
const char *spw_strerror(int err);

/* Wall clock in ms/us since the epoch (CLOCK_REALTIME), for expiry, as Redis. */
int64_t spw_time_ms(void);
int64_t spw_time_us(void);
/* Monotonic clock in ns, for durations and stats. */
uint64_t spw_mono_ns(void);

/* Logging: the level check happens before formatting. err is an errno (0 for none). */
enum { SPW_LOG_DEBUG = 0, SPW_LOG_VERBOSE = 1, SPW_LOG_NOTICE = 2, SPW_LOG_WARNING = 3 };
extern int spw_log_level;
void spw_log_open(const char *path);   /* NULL or "" = stderr */
void spw_log_write(int level, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define spw_log(level, err, ...) \
	do { if ((level) >= spw_log_level) spw_log_write((level), (err), __VA_ARGS__); } while (0)

/* Parse a size with optional k/m/g/t suffix (powers of 1024, also kb/mb/gb). 0 or -EINVAL. */
int spw_parse_size(const char *s, uint64_t *out);
/* Strict base-10 int64 parse of exactly len bytes, as Redis's string2ll: an optional '-', no '+',
 * no spaces, no leading zeros ("0" itself aside). true on success. */
bool spw_parse_ll(const char *s, size_t len, long long *out);

/* Base-10 formatting, two digits at a time (the reply writer formats every length and integer it
 * sends with these, so they are inline). spw_digits2 holds "00" .. "99". */
extern const char spw_digits2[201];

static inline unsigned spw_u64_digits(uint64_t v)
{
	unsigned n = 1;
	for (;;) {
		if (v < 10) return n;
		if (v < 100) return n + 1;
		if (v < 1000) return n + 2;
		if (v < 10000) return n + 3;
		v /= 10000;
		n += 4;
	}
}

/* Format v in base 10 at dst, without a NUL. Returns the length (1..20). */
static inline size_t spw_fmt_u64(char *dst, uint64_t v)
{
	size_t n = spw_u64_digits(v), i = n;
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;
		v /= 100;
		dst[--i] = spw_digits2[d + 1];
		dst[--i] = spw_digits2[d];
	}
	if (v >= 10) {
		dst[--i] = spw_digits2[v * 2 + 1];
		dst[--i] = spw_digits2[v * 2];
	} else {
		dst[--i] = (char)('0' + v);
	}
	return n;
}

/* Format v in base 10 into buf (>= 21 bytes) and NUL-terminate it. Returns the length. */
static inline size_t spw_fmt_ll(char *buf, long long v)
{
	size_t n;
	if (v < 0) {
		buf[0] = '-';
		n = 1 + spw_fmt_u64(buf + 1, 0ULL - (unsigned long long)v);
	} else {
		n = spw_fmt_u64(buf, (uint64_t)v);
	}
	buf[n] = '\0';
	return n;
}
/* Redis's MAX_LONG_DOUBLE_CHARS: the longest text spw_parse_ld takes, and the room spw_fmt_ld needs
 * for any finite long double. */
#define SPW_LD_MAX_CHARS (5 * 1024)
/* Redis's string2ld over exactly len bytes (strtold: no leading space, nothing left over, no NaN,
 * no overflow or underflow to 0; "inf" is accepted). true on success. */
bool spw_parse_ld(const void *s, size_t len, long double *out /* out */);
/* Redis's ld2string(LD_STR_HUMAN): "%.17Lf" with trailing zeros and a bare '.' trimmed, "-0" as
 * "0" (INCRBYFLOAT, HINCRBYFLOAT). v is finite. The length, 0 when it does not fit in cap. */
size_t spw_fmt_ld(char *buf, size_t cap, long double v);
/* Glob match as Redis's stringmatchlen (*, ?, [a-z], [^x], \x). nocase != 0 folds case. */
bool spw_glob_match(const char *pat, size_t plen, const char *str, size_t slen, int nocase);

#endif
