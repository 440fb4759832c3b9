/*
 * spw.c - shared helpers: error names, clocks, logging, number and size parsing (long doubles
 * included, as Redis's string2ld / ld2string), glob matching.
 *
 * Invariants:
 *  1. Nothing here allocates on a hot path; spw_parse_ll and spw_fmt_ll (inline in spw.h) are used
 *     per request, by the server and by proto's parser and writer: they are the only copies.
 *  2. spw_parse_ll accepts exactly what Redis's string2ll accepts (no spaces, no '+', no leading
 *     zeros except "0" itself), so "value is not an integer" errors match Redis byte for byte.
 */
#include "common/spw.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int spw_log_level = SPW_LOG_NOTICE;
static FILE *log_fp;

const char *spw_strerror(int err)
{
	static __thread char buf[64];
	switch (err) {
	case 0: return "success";
	case SPW_E_LOG_FULL: return "log memory full (no storage tier to spill to)";
	case SPW_E_TOO_BIG: return "record too large for the log page";
	case SPW_E_CORRUPT: return "corrupt data (bad magic or checksum)";
	case SPW_E_NOT_INT: return "value is not an integer or out of range";
	case SPW_E_OVERFLOW: return "increment or decrement would overflow";
	case SPW_E_NOT_FLOAT: return "value is not a valid float";
	case SPW_E_NAN: return "increment would produce NaN or Infinity";
	case SPW_E_STORE_ERROR: return "store is in an error state";
	case SPW_E_WRONGTYPE: return "the key holds a value of another type";
	default: break;
	}
	if (err < 0 && err > SPW_E_BASE)
		return strerror_r(-err, buf, sizeof(buf));
	snprintf(buf, sizeof(buf), "unknown error %d", err);
	return buf;
}

int64_t spw_time_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t spw_time_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t spw_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void spw_log_open(const char *path)
{
	if (!path || !*path)
		return;
	FILE *fp = fopen(path, "a");
	if (!fp) {
		fprintf(stderr, "spillway: cannot open log file '%s': %s\n", path, strerror(errno));
		return;
	}
	setvbuf(fp, NULL, _IOLBF, 0);
	log_fp = fp;
}

void spw_log_write(int level, int err, const char *fmt, ...)
{
	static const char marks[] = ".-*#";   /* Redis's level marks */
	char msg[1024], ts[64];
	struct timeval tv;
	struct tm tm;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%d %b %Y %H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03d", (int)(tv.tv_usec / 1000));
	FILE *fp = log_fp ? log_fp : stderr;
	if (level < 0) level = 0;
	if (level > 3) level = 3;
	if (err)
		fprintf(fp, "%d:M %s %c %s: %s\n", (int)getpid(), ts, marks[level], msg, strerror(err));
	else
		fprintf(fp, "%d:M %s %c %s\n", (int)getpid(), ts, marks[level], msg);
}

int spw_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	uint64_t mul = 1;
	char u = (char)tolower((unsigned char)*end);
	if (u) {
		switch (u) {
		case 'b': mul = 1; break;
		case 'k': mul = 1ULL << 10; break;
		case 'm': mul = 1ULL << 20; break;
		case 'g': mul = 1ULL << 30; break;
		case 't': mul = 1ULL << 40; break;
		default: return -EINVAL;
		}
		end++;
		if (u != 'b' && (*end == 'b' || *end == 'B'))
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

/* Redis's string2ll (util.c), over exactly slen bytes. */
bool spw_parse_ll(const char *s, size_t slen, long long *out)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v;

	if (slen == 0 || slen > 20)
		return false;
	if (slen == 1 && s[0] == '0') {
		*out = 0;
		return true;
	}
	if (s[0] == '-') {
		neg = true;
		if (++i == slen)
			return false;
	}
	if (s[i] < '1' || s[i] > '9')
		return false;
	v = (uint64_t)(s[i++] - '0');
	for (; i < slen; i++) {
		unsigned d = (unsigned)(unsigned char)s[i] - '0';
		if (d > 9 || v > UINT64_MAX / 10 || v * 10 > UINT64_MAX - d)
			return false;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (uint64_t)LLONG_MAX + 1)
			return false;
		*out = (long long)(0ULL - v);
	} else {
		if (v > (uint64_t)LLONG_MAX)
			return false;
		*out = (long long)v;
	}
	return true;
}

bool spw_parse_ld(const void *s, size_t len, long double *out)
{
	char buf[SPW_LD_MAX_CHARS];
	char *end;
	long double v;

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtold(buf, &end);
	if (isspace((unsigned char)buf[0]) || *end != '\0' || (size_t)(end - buf) != len ||
	    (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
	    errno == EINVAL || isnan(v))
		return false;
	*out = v;
	return true;
}

size_t spw_fmt_ld(char *buf, size_t cap, long double v)
{
	int n = snprintf(buf, cap, "%.17Lf", v);
	size_t l;

	if (n < 0 || (size_t)n + 1 > cap)
		return 0;
	l = (size_t)n;
	if (memchr(buf, '.', l)) {
		while (buf[l - 1] == '0')
			l--;
		if (buf[l - 1] == '.')
			l--;
	}
	if (l == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		l = 1;
	}
	return l;
}

const char spw_digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* Redis's stringmatchlen, iterative except for '*', with its nesting guard. */
static bool glob_match_impl(const char *pattern, size_t patternLen, const char *string, size_t stringLen,
                            int nocase, int *skipLongerMatches, int nesting)
{
	if (nesting > 1000)
		return false;
	while (patternLen && stringLen) {
		switch (pattern[0]) {
		case '*':
			while (patternLen > 1 && pattern[1] == '*') {
				pattern++;
				patternLen--;
			}
			if (patternLen == 1)
				return true;
			while (stringLen) {
				if (glob_match_impl(pattern + 1, patternLen - 1, string, stringLen, nocase,
				                    skipLongerMatches, nesting + 1))
					return true;
				if (*skipLongerMatches)
					return false;
				string++;
				stringLen--;
			}
			*skipLongerMatches = 1;
			return false;
		case '?':
			string++;
			stringLen--;
			break;
		case '[': {
			int not, match;
			pattern++;
			patternLen--;
			not = patternLen > 0 && pattern[0] == '^';
			if (not) {
				pattern++;
				patternLen--;
			}
			match = 0;
			while (1) {
				if (patternLen == 0) {
					pattern--;
					patternLen++;
					break;
				} else if (pattern[0] == '\\' && patternLen >= 2) {
					pattern++;
					patternLen--;
					if (pattern[0] == string[0])
						match = 1;
				} else if (pattern[0] == ']') {
					break;
				} else if (patternLen >= 3 && pattern[1] == '-') {
					int start = (unsigned char)pattern[0];
					int end = (unsigned char)pattern[2];
					int c = (unsigned char)string[0];
					if (start > end) {
						int t = start;
						start = end;
						end = t;
					}
					if (nocase) {
						start = tolower(start);
						end = tolower(end);
						c = tolower(c);
					}
					pattern += 2;
					patternLen -= 2;
					if (c >= start && c <= end)
						match = 1;
				} else {
					if (!nocase) {
						if (pattern[0] == string[0])
							match = 1;
					} else {
						if (tolower((unsigned char)pattern[0]) == tolower((unsigned char)string[0]))
							match = 1;
					}
				}
				pattern++;
				patternLen--;
			}
			if (not)
				match = !match;
			if (!match)
				return false;
			string++;
			stringLen--;
			break;
		}
		case '\\':
			if (patternLen >= 2) {
				pattern++;
				patternLen--;
			}
			/* fall through */
		default:
			if (!nocase) {
				if (pattern[0] != string[0])
					return false;
			} else {
				if (tolower((unsigned char)pattern[0]) != tolower((unsigned char)string[0]))
					return false;
			}
			string++;
			stringLen--;
			break;
		}
		pattern++;
		patternLen--;
		if (stringLen == 0) {
			while (patternLen && *pattern == '*') {
				pattern++;
				patternLen--;
			}
			break;
		}
	}
	return patternLen == 0 && stringLen == 0;
}

bool spw_glob_match(const char *pat, size_t plen, const char *str, size_t slen, int nocase)
{
	int skip = 0;
	return glob_match_impl(pat, plen, str, slen, nocase, &skip, 0);
}
