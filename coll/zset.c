/*
 * zset.c - a sorted set's listpack (Redis 7.0's zzl* functions) and its range specs.
 *
 * Design notes:
 *  1. Order: (score, member), members compared as zzlCompareElements does: memcmp over the
 *     shorter length, then the shorter first; an int entry compares as its base-10 text. An
 *     insert walks from the front to the first pair that sorts after the new one, as zzlInsert
 *     does, so a sequence of edits builds the bytes redis-server builds.
 *  2. Scores are read as zzlGetScore reads them and written through numconv.h (d2string text, an
 *     integral score as an int entry), so that a stored score reads back as the same double.
 *  3. Range arguments are parsed as Redis parses them: strtod runs over the C string, so the
 *     argument ends at its first NUL byte, and "" or "(" is 0. The lex range's "-" and "+" are
 *     sentinels below and above every string (sdscmplex's shared.minstring / maxstring).
 *  4. Lex ranges assume equal scores, as in Redis; on a set with mixed scores the answers are
 *     those of Redis's listpack walk (zzlFirstInLexRange: a linear walk after the first-and-last
 *     test). A skiplist set in Redis descends its levels instead, which on such a set may stop
 *     elsewhere: those answers are not reproduced (they depend on Redis's random levels).
 */
#include "coll/zset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll/numconv.h"

/* ---------------- range specs ---------------- */

/* One end of a score range: "(" and strtod over the bytes up to the first NUL. */
static bool range_end_parse(const char *s, size_t len, double *v, bool *ex)
{
	char stackbuf[128], *buf = stackbuf, *end;
	bool ok;

	len = strnlen(s, len);
	if (len >= sizeof(stackbuf) && !(buf = malloc(len + 1)))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	*ex = buf[0] == '(';
	*v = strtod(buf + *ex, &end);
	ok = end[0] == '\0' && !isnan(*v);
	if (buf != stackbuf)
		free(buf);
	return ok;
}

bool zs_range_parse(const void *min, size_t minlen, const void *max, size_t maxlen, zs_range *out)
{
	return range_end_parse(min, minlen, &out->min, &out->minex) &&
	       range_end_parse(max, maxlen, &out->max, &out->maxex);
}

static bool lex_end_parse(const uint8_t *s, size_t len, zs_lex_end *e)
{
	e->s = NULL;
	e->len = 0;
	e->inf = 0;
	e->ex = true;
	if (len == 0)
		return false;
	switch (s[0]) {
	case '+':
	case '-':
		if (len > 1 && s[1] != '\0')
			return false;
		e->inf = s[0] == '+' ? 1 : -1;
		return true;
	case '(':
	case '[':
		e->ex = s[0] == '(';
		e->s = s + 1;
		e->len = len - 1;
		return true;
	default:
		return false;
	}
}

bool zs_lex_parse(const void *min, size_t minlen, const void *max, size_t maxlen, zs_lex *out)
{
	return lex_end_parse(min, minlen, &out->min) && lex_end_parse(max, maxlen, &out->max);
}

bool zs_gte_min(double v, const zs_range *r) { return r->minex ? v > r->min : v >= r->min; }
bool zs_lte_max(double v, const zs_range *r) { return r->maxex ? v < r->max : v <= r->max; }

static bool range_empty(const zs_range *r)
{
	return r->min > r->max || (r->min == r->max && (r->minex || r->maxex));
}

static int bytes_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	int cmp = memcmp(a, b, alen < blen ? alen : blen);
	return cmp ? cmp : (alen < blen ? -1 : alen > blen);
}

/* sdscmplex of a member entry against a range end. */
static int lex_cmp_end(const uint8_t *p, const zs_lex_end *e)
{
	if (e->inf)
		return -e->inf;
	return zs_member_cmp(p, e->s, e->len);
}

bool zs_lex_gte_min(const uint8_t *p, const zs_lex *r)
{
	int cmp = lex_cmp_end(p, &r->min);
	return r->min.ex ? cmp > 0 : cmp >= 0;
}

bool zs_lex_lte_max(const uint8_t *p, const zs_lex *r)
{
	int cmp = lex_cmp_end(p, &r->max);
	return r->max.ex ? cmp < 0 : cmp <= 0;
}

/* zslIsInLexRange's first test: a range that is empty whatever the set holds. */
static bool lex_empty(const zs_lex *r)
{
	int cmp;
	if (r->min.inf || r->max.inf)
		cmp = r->min.inf == r->max.inf ? 0 : (r->min.inf == 1 || r->max.inf == -1) ? 1 : -1;
	else
		cmp = bytes_cmp(r->min.s, r->min.len, r->max.s, r->max.len);
	return cmp > 0 || (cmp == 0 && (r->min.ex || r->max.ex));
}

/* ---------------- members and scores ---------------- */

double zs_score(const uint8_t *lp, const uint8_t *p)
{
	lp_val v;
	lp_get(lp_next(lp, p), &v);
	return coll_lp_score(&v);
}

const char *zs_member(const uint8_t *p, char *buf, size_t *len)
{
	return lp_entry_str(p, buf, len);
}

int zs_member_cmp(const uint8_t *p, const void *s, size_t len)
{
	char buf[LP_INTBUF_SIZE];
	size_t mlen;
	const char *m = zs_member(p, buf, &mlen);
	return bytes_cmp(m, mlen, s, len);
}

const uint8_t *zs_find(const uint8_t *lp, const void *s, size_t len, double *score)
{
	const uint8_t *p = lp_first(lp);
	if (p && (p = lp_find(lp, p, s, len, 1)) && score)
		*score = zs_score(lp, p);
	return p;
}

/* ---------------- edits ---------------- */

int zs_insert(lp_buf *b, const void *s, size_t len, double score, bool skiplist)
{
	const uint8_t *p;
	size_t off, moff;
	int rc;

	for (p = lp_first(b->p); p; p = lp_next(b->p, lp_next(b->p, p))) {
		double cur = zs_score(b->p, p);
		if (cur > score || (cur == score && zs_member_cmp(p, s, len) > 0))
			break;
	}
	if (!p)
		return zs_append(b, s, len, score, skiplist);
	off = lp_off(b, p);
	if ((rc = lp_insert(b, off, LP_BEFORE, s, len, &moff)) < 0)
		return rc;
	return coll_lp_insert_score(b, moff, LP_AFTER, score, skiplist, NULL);
}

int zs_append(lp_buf *b, const void *s, size_t len, double score, bool skiplist)
{
	int rc = lp_append(b, s, len);
	return rc < 0 ? rc : coll_lp_append_score(b, score, skiplist);
}

int zs_delete(lp_buf *b, size_t off)
{
	int rc = lp_delete_range(b, off, 2);
	return rc < 0 ? rc : 0;
}

size_t zs_run_len(const uint8_t *lp, const uint8_t *p, unsigned long n)
{
	const uint8_t *q = p;
	for (unsigned long i = 0; q && i < 2 * n; i++)
		q = lp_next(lp, q);
	return (size_t)((q ? q : lp + lp_bytes(lp) - 1) - p);
}

size_t zs_run_write(uint8_t *dst, const uint8_t *p, size_t len, unsigned long n)
{
	uint32_t total = (uint32_t)(len + LP_EMPTY_BYTES);
	/* lpAppend stops counting at 65535 (unknown: lp_count walks) */
	uint32_t count = 2 * n < LP_COUNT_UNKNOWN ? (uint32_t)(2 * n) : LP_COUNT_UNKNOWN;
	dst[0] = (uint8_t)total;
	dst[1] = (uint8_t)(total >> 8);
	dst[2] = (uint8_t)(total >> 16);
	dst[3] = (uint8_t)(total >> 24);
	dst[4] = (uint8_t)count;
	dst[5] = (uint8_t)(count >> 8);
	memcpy(dst + LP_HDR_SIZE, p, len);
	dst[LP_HDR_SIZE + len] = LP_EOF;
	return total;
}

/* ---------------- ranges ---------------- */

const uint8_t *zs_first_in_range(const uint8_t *lp, const zs_range *r)
{
	if (range_empty(r))
		return NULL;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p))) {
		double s = zs_score(lp, p);
		if (zs_gte_min(s, r))
			return zs_lte_max(s, r) ? p : NULL;
	}
	return NULL;
}

const uint8_t *zs_last_in_range(const uint8_t *lp, const zs_range *r)
{
	if (range_empty(r))
		return NULL;
	for (const uint8_t *q = lp_last(lp); q; ) {
		const uint8_t *p = lp_prev(lp, q);
		double s = zs_score(lp, p);
		if (zs_lte_max(s, r))
			return zs_gte_min(s, r) ? p : NULL;
		q = lp_prev(lp, p);
	}
	return NULL;
}

/* zzlIsInLexRange: the range is not empty, the last member is past min and the first within max.
 * With mixed scores the members are not in lex order, so this test changes answers: it is kept
 * because Redis makes it. */
static bool lex_in_range(const uint8_t *lp, const zs_lex *r)
{
	const uint8_t *first = lp_first(lp), *last = lp_seek(lp, -2);
	return !lex_empty(r) && first && zs_lex_gte_min(last, r) && zs_lex_lte_max(first, r);
}

const uint8_t *zs_first_in_lex(const uint8_t *lp, const zs_lex *r)
{
	if (!lex_in_range(lp, r))
		return NULL;
	for (const uint8_t *p = lp_first(lp); p; p = lp_next(lp, lp_next(lp, p))) {
		if (zs_lex_gte_min(p, r))
			return zs_lex_lte_max(p, r) ? p : NULL;
	}
	return NULL;
}

const uint8_t *zs_last_in_lex(const uint8_t *lp, const zs_lex *r)
{
	if (!lex_in_range(lp, r))
		return NULL;
	for (const uint8_t *q = lp_last(lp); q; ) {
		const uint8_t *p = lp_prev(lp, q);
		if (zs_lex_lte_max(p, r))
			return zs_lex_gte_min(p, r) ? p : NULL;
		q = lp_prev(lp, p);
	}
	return NULL;
}
