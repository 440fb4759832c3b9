/*
 * numconv.h - Redis's number <-> text rules that the collection commands need, in one place.
 *
 * Integers are common/spw.h's: spw_parse_ll is Redis's string2ll (and listpack's lpStringToInt64,
 * the same rules), spw_fmt_ll its ll2string. What is here is about doubles: how a zset score is
 * parsed (getDoubleFromObject), stored in a listpack (d2string, then lpAppend, so an integral
 * score becomes an int entry) and read back (zzlGetScore).
 */
#ifndef SPW_COLL_NUMCONV_H
#define SPW_COLL_NUMCONV_H

#include <stdbool.h>
#include <stddef.h>

#include "coll/listpack.h"

/* Room for d2string's longest output ("%.17g": "-2.2250738585072014e-308") and a NUL. */
#define COLL_D2STR_SIZE 128

/* Redis 7.0's double2ll: true and *out when v is integral and |v| <= 2^62 (LLONG_MAX / 2 as a
 * double), the range where Redis stores a zset score as an int entry and prints it with ll2string.
 * -0.0 gives 0. */
bool coll_double2ll(double v, long long *out /* out */);

/* Redis 7.0's d2string: "nan", "inf", "-inf", "0" / "-0" for zeros, what coll_double2ll
 * takes in base 10, else "%.17g". buf holds COLL_D2STR_SIZE. Returns the length. */
size_t coll_d2str(char *buf, double v);

/* Redis's getDoubleFromObject on len bytes: strtod over all of them, no leading space, no NaN,
 * overflow rejected, underflow to 0 rejected; "inf" and "-inf" accepted. true on success. */
bool coll_parse_double(const void *s, size_t len, double *out /* out */);

/* Redis's zzlGetScore: an int entry as a double, a string entry through strtod (its first 127
 * bytes, as zzlStrtod). */
double coll_lp_score(const lp_val *v);

/* A zset score as zzlInsertAt stores it: an int entry when coll_double2ll takes it, else the
 * string d2string makes. Same returns and offsets as lp_append / lp_insert. signed_zero: the set
 * is skiplist-encoded, where Redis keeps the double itself and replies -0 for -0.0: such a zero is
 * stored as the text "-0" (which no int parse takes), any other score as above. */
int coll_lp_append_score(lp_buf *b, double score, bool signed_zero);
int coll_lp_insert_score(lp_buf *b, size_t off, int where, double score, bool signed_zero,
                         size_t *newoff /* out */);

#endif
