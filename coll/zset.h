/*
 * zset.h - a sorted set's listpack, as Redis 7.0's zzl* functions keep it: member, score pairs
 * ordered by score, then by member bytes (memcmp, the shorter first on a tie), each score stored
 * as zzlInsertAt stores it (coll/numconv.h). Also the score and lex range specs of ZRANGEBYSCORE,
 * ZRANGEBYLEX and their kin, parsed with Redis's rules.
 *
 * Ownership as listpack.h: read functions take the listpack's bytes and return entry pointers
 * into them; write functions take an lp_buf and may move its bytes.
 */
#ifndef SPW_COLL_ZSET_H
#define SPW_COLL_ZSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/listpack.h"

/* A score interval (zrangespec): min/max with their "(" exclusions. */
typedef struct zs_range {
	double min, max;
	bool minex, maxex;
} zs_range;

/* A lex interval (zlexrangespec): each end is a string (ex: "(" exclusive, "[" inclusive) or
 * "-" / "+" (inf -1 / +1, always exclusive), which sort before / after every member. */
typedef struct zs_lex_end {
	const uint8_t *s;
	size_t len;
	int inf;                  /* -1 "-", +1 "+", 0 a string */
	bool ex;
} zs_lex_end;
typedef struct zs_lex {
	zs_lex_end min, max;
} zs_lex;

/* zslParseRange: each end is an optional "(" then what strtod takes up to the argument's first
 * NUL byte (leading spaces, "inf", hex included; NaN refused). false: "ERR min or max is not a
 * float". */
bool zs_range_parse(const void *min, size_t minlen, const void *max, size_t maxlen, zs_range *out /* out */);
/* zslParseLexRange: "-", "+" (nothing after them up to a NUL), "(x", "[x". The strings point into
 * the arguments. false: "ERR min or max not valid string range item". */
bool zs_lex_parse(const void *min, size_t minlen, const void *max, size_t maxlen, zs_lex *out /* out */);

bool zs_gte_min(double v, const zs_range *r);
bool zs_lte_max(double v, const zs_range *r);
/* Whether the member entry at p is past the lex range's min / within its max. */
bool zs_lex_gte_min(const uint8_t *p, const zs_lex *r);
bool zs_lex_lte_max(const uint8_t *p, const zs_lex *r);

/* Members in the listpack (entries / 2). */
static inline unsigned long zs_len(const uint8_t *lp) { return lp_count(lp) / 2; }
/* The score of the member entry at p (its next entry, as zzlGetScore reads it). */
double zs_score(const uint8_t *lp, const uint8_t *p);
/* The member's bytes: its string, or an int entry rendered into buf (LP_INTBUF_SIZE). */
const char *zs_member(const uint8_t *p, char *buf, size_t *len /* out */);
/* zzlCompareElements: <0, 0, >0 as the member entry at p sorts before, equal to, after s. */
int zs_member_cmp(const uint8_t *p, const void *s, size_t len);
/* zzlFind: the member entry equal to s, its score into *score (may be NULL), or NULL. */
const uint8_t *zs_find(const uint8_t *lp, const void *s, size_t len, double *score /* out */);

/* zzlInsert: add the member (not present) in (score, member) order. 0 or -ENOMEM / -E2BIG. */
int zs_insert(lp_buf *b, const void *s, size_t len, double score, bool skiplist);
/* Delete the member at byte offset off and its score. 0 or an error. */
int zs_delete(lp_buf *b, size_t off);
/* Append a member and its score at the end (the caller keeps the order). */
int zs_append(lp_buf *b, const void *s, size_t len, double score, bool skiplist);
/* (skiplist: the set is skiplist-encoded: coll_lp_append_score's signed_zero.) */

/* A run of pairs as a listpack of its own (pops, ZRANGESTORE): zs_run_len gives the bytes of the n
 * pairs from member entry p onward; zs_run_write writes a listpack of those len bytes into dst,
 * which holds len + LP_EMPTY_BYTES. Returns the listpack's length. */
size_t zs_run_len(const uint8_t *lp, const uint8_t *p, unsigned long n);
size_t zs_run_write(uint8_t *dst, const uint8_t *p, size_t len, unsigned long n);

/* The first / last member entry with a score in r, or NULL (zzlFirstInRange, zzlLastInRange). */
const uint8_t *zs_first_in_range(const uint8_t *lp, const zs_range *r);
const uint8_t *zs_last_in_range(const uint8_t *lp, const zs_range *r);
const uint8_t *zs_first_in_lex(const uint8_t *lp, const zs_lex *r);
const uint8_t *zs_last_in_lex(const uint8_t *lp, const zs_lex *r);

#endif
