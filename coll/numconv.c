/*
 * numconv.c - Redis 7.0's double <-> text rules for collections (numconv.h).
 *
 * Design notes:
 *  1. A zset score goes into a listpack as 7.0's zzlInsertAt puts it: double2ll first (an
 *     integral score within +-2^62 becomes an int entry; -0.0 becomes 0), else d2string's "%.17g"
 *     text through lp_append, whose own string2ll check keeps it a string ("5e+18", "1.5").
 *  2. Reading a score back (zzlGetScore) is strtod over at most 127 bytes, as zzlStrtod.
 *  3. Parsing needs a NUL-terminated copy for strtod: up to 255 bytes on the stack, longer
 *     input (legal: "0.000...01") in a heap copy, the rare path.
 */
#include "coll/numconv.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spw.h"

bool coll_double2ll(double v, long long *out)
{
	long long ll;

	/* (double)(LLONG_MAX / 2) rounds to 2^62: every double inside converts exactly. */
	if (!(v >= (double)(-LLONG_MAX / 2) && v <= (double)(LLONG_MAX / 2)))
		return false;
	ll = (long long)v;
	if ((double)ll != v)
		return false;
	*out = ll;
	return true;
}

size_t coll_d2str(char *buf, double v)
{
	long long ll;
	int n;

	if (isnan(v)) {
		memcpy(buf, "nan", 4);
		return 3;
	}
	if (isinf(v)) {
		n = snprintf(buf, COLL_D2STR_SIZE, "%s", v < 0 ? "-inf" : "inf");
		return (size_t)n;
	}
	if (v == 0) {
		n = snprintf(buf, COLL_D2STR_SIZE, "%s", signbit(v) ? "-0" : "0");
		return (size_t)n;
	}
	if (coll_double2ll(v, &ll))
		return spw_fmt_ll(buf, ll);
	n = snprintf(buf, COLL_D2STR_SIZE, "%.17g", v);
	return (size_t)n;
}

bool coll_parse_double(const void *s, size_t len, double *out)
{
	char stack[256], *buf = stack, *end;
	double v;
	bool ok;

	if (len == 0)
		return false;
	if (len >= sizeof(stack) && !(buf = malloc(len + 1)))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtod(buf, &end);
	ok = !isspace((unsigned char)buf[0]) && (size_t)(end - buf) == len &&
	     !(errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || fpclassify(v) == FP_ZERO)) && !isnan(v);
	if (buf != stack)
		free(buf);
	if (ok)
		*out = v;
	return ok;
}

double coll_lp_score(const lp_val *v)
{
	char buf[128];
	size_t n;

	if (v->is_int)
		return (double)v->v;
	n = v->len < sizeof(buf) - 1 ? v->len : sizeof(buf) - 1;
	memcpy(buf, v->s, n);
	buf[n] = '\0';
	return strtod(buf, NULL);
}

int coll_lp_append_score(lp_buf *b, double score, bool signed_zero)
{
	char buf[COLL_D2STR_SIZE];
	long long ll;

	if (signed_zero && score == 0 && signbit(score))
		return lp_append(b, "-0", 2);
	if (coll_double2ll(score, &ll))
		return lp_append_int(b, ll);
	return lp_append(b, buf, coll_d2str(buf, score));
}

int coll_lp_insert_score(lp_buf *b, size_t off, int where, double score, bool signed_zero,
                         size_t *newoff)
{
	char buf[COLL_D2STR_SIZE];
	long long ll;

	if (signed_zero && score == 0 && signbit(score))
		return lp_insert(b, off, where, "-0", 2, newoff);
	if (coll_double2ll(score, &ll))
		return lp_insert_int(b, off, where, ll, newoff);
	return lp_insert(b, off, where, buf, coll_d2str(buf, score), newoff);
}
