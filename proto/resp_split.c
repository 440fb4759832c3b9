/*
 * resp_split.c - Redis's argument splitter (sdssplitargs in src/sds.c), the one copy: inline
 * requests (resp_parse.c), the config file (server/config.c) and the differential test's scripts
 * split their lines here.
 *
 * NOTES
 *
 *  1. The rules are sdssplitargs's, byte for byte, because a line typed at telnet, written in a
 *     config file or pasted from redis-cli must split here as it does in Redis:
 *       - the line ends at its first NUL (sdssplitargs walks a C string);
 *       - before a word, every isspace() byte is skipped; inside a word only space, tab, CR and LF
 *         end it (a vertical tab or form feed is part of the word);
 *       - a word is plain bytes, optionally ended by one quoted part: "double quotes" know \n \r
 *         \t \b \a, \xHH and \<byte> (that byte); 'single quotes' know \' only;
 *       - the closing quote ends the word and must be followed by a blank or the end of the line
 *         (so a"b c" is the word ab c, and "a"b is an error); a quote left open is an error.
 *  2. Zero copy where it can be: a word without a quote is handed out as a slice of the line. A
 *     word with one is rebuilt in the caller's scratch buffer, grown once to the line's length
 *     before the first such word: unescaping never makes a word longer than the bytes it came
 *     from, so the buffer never moves while earlier words point into it.
 *
 * States of a word (split_word, split_quoted):
 *
 *   blanks --byte--> PLAIN --blank/end--> word (a slice of the line)
 *                      `--quote--> QUOTED --closing quote + blank/end--> word (in scratch)
 *                                    `--end of line, or closing quote + other byte--> -EINVAL
 */
#include "proto/resp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline bool split_is_space(char c)   /* isspace() in the C locale */
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

static inline bool split_ends_word(char c)   /* what ends a plain word (not \v or \f) */
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static inline int split_hex(char c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	if (c >= 'A' && c <= 'F') return c - 'A' + 10;
	return -1;
}

/* The byte at q, or NUL at and past the end e, as sdssplitargs sees its C string. */
static inline char split_at(const char *q, const char *e)
{
	return q < e ? *q : '\0';
}

/* One escape inside double quotes at q ('\\' followed by a byte): its byte into *o. Returns how
 * many bytes of the line it took. */
static size_t split_escape(const char *q, const char *e, char *o)
{
	if (split_at(q + 1, e) == 'x' && split_hex(split_at(q + 2, e)) >= 0 &&
	    split_hex(split_at(q + 3, e)) >= 0) {
		*o = (char)(split_hex(q[2]) * 16 + split_hex(q[3]));
		return 4;
	}
	switch (q[1]) {
	case 'n': *o = '\n'; break;
	case 'r': *o = '\r'; break;
	case 't': *o = '\t'; break;
	case 'b': *o = '\b'; break;
	case 'a': *o = '\a'; break;
	default: *o = q[1]; break;
	}
	return 2;
}

/*
 * The quoted part opening at *qp, unescaped to *op; both advance past it. 0, or -EINVAL when the
 * line ends inside it or its closing quote is followed by something other than a blank.
 */
static int split_quoted(const char **qp, const char *e, char **op)
{
	const char *q = *qp;
	char *o = *op;
	const char quote = *q++;

	for (;;) {
		char c = split_at(q, e);
		if (c == '\0')
			return -EINVAL;
		if (c == quote) {
			if (split_at(q + 1, e) && !split_is_space(split_at(q + 1, e)))
				return -EINVAL;
			q++;
			break;
		}
		if (c == '\\' && quote == '"' && split_at(q + 1, e)) {
			q += split_escape(q, e, o++);
		} else if (c == '\\' && quote == '\'' && split_at(q + 1, e) == '\'') {
			*o++ = '\'';
			q += 2;
		} else {
			*o++ = c;
			q++;
		}
	}
	*qp = q;
	*op = o;
	return 0;
}

/* Make *scratch hold need bytes (realloc; it stays put once big enough). 0 or -ENOMEM. */
static int split_scratch(char **scratch, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	char *nb = realloc(*scratch, need);
	if (!nb)
		return -ENOMEM;
	*scratch = nb;
	*cap = need;
	return 0;
}

int resp_args_split(const char *s, size_t len, char **scratch, size_t *scratch_cap,
                    resp_arg_fn emit, void *ctx)
{
	const char *nul = memchr(s, '\0', len);
	const char *e = nul ? nul : s + len, *q = s;
	char *o = NULL;   /* where the next rebuilt word goes in *scratch; NULL until the first one */
	int n = 0, rc;

	for (;; n++) {
		while (q < e && split_is_space(*q))
			q++;
		if (q >= e)
			return n;

		const char *w = q;
		while (q < e && !split_ends_word(*q) && *q != '"' && *q != '\'')
			q++;
		if (q == e || split_ends_word(*q)) {
			rc = emit(ctx, w, (size_t)(q - w));
			if (rc < 0)
				return rc;
			if (q < e)
				q++;   /* the blank that ended it */
			continue;
		}

		/* A quote: the word (plain part, then the quoted part) is rebuilt in scratch (note 2). */
		if (!o) {
			rc = split_scratch(scratch, scratch_cap, (size_t)(e - s));
			if (rc < 0)
				return rc;
			o = *scratch;
		}
		char *start = o;
		memcpy(o, w, (size_t)(q - w));
		o += q - w;
		rc = split_quoted(&q, e, &o);
		if (rc < 0)
			return rc;
		rc = emit(ctx, start, (size_t)(o - start));
		if (rc < 0)
			return rc;
	}
}
