/*
 * cmd_bits.c - the bitmap commands (Redis's bitops.c): SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD
 * BITFIELD_RO. LCS, which reads two keys the way BITOP reads its sources, is in cmd_lcs.c.
 *
 * Design notes:
 *  1. A bitmap is a plain string: bit 0 is the most significant bit of byte 0. Replies and errors
 *     are redis-server 7.0's byte for byte, in its order of checks: BITCOUNT looks the key up
 *     before it parses its range (a missing key answers 0 whatever the arguments), BITPOS parses
 *     the bit first, then looks up, then parses the range; BITFIELD parses every subcommand before
 *     it touches the key, so a bad one leaves the key as it was.
 *  2. Offsets are bounded by proto-max-bulk-len as Redis's getBitOffsetFromArgument: (offset >> 3)
 *     must stay below it. A string grown past what the log can hold answers the store's error.
 *  3. Every write is one hlog_rmw (cmd_string.c notes 3 and 4). plan decides from the old value
 *     (the new length: the old one, or up to the highest byte written, zero padded) and fill
 *     writes: in place it zeroes only the grown tail and rewrites only the bytes of the fields
 *     set, since dst already holds the old value. SETBIT that changes nothing keeps the record.
 *     BITFIELD runs its subcommands inside fill, on the new value, so that each sees the ones
 *     before it; its replies go to an array in the worker's scratch, rewritten (never appended
 *     to) if the store runs plan and fill again, and written to the client after hlog_rmw.
 *  4. Reads (GETBIT, BITCOUNT, BITPOS, BITFIELD's GETs) work on the record inside the hlog_read
 *     callback, without a copy. BITCOUNT counts 64-bit words with popcount (the POPCNT
 *     instruction where the CPU has it, chosen once); BITPOS skips words that cannot hold the bit.
 *  5. BITOP reads several keys: it prefetches them (the destination too) and parks while any is
 *     on the device (cmd_string.c note 8); nothing is written before every read succeeded, so a
 *     re-run starts from scratch. Each source is folded into the result in the worker's scratch
 *     as it is read (no copy of the sources). The destination is written with one upsert (the
 *     TTL goes, as Redis's setKey) or deleted when the result is empty, whatever its type.
 *  6. Types (cmd_string.c note 9): a key holding a collection answers WRONGTYPE where Redis's
 *     checkType does, after the same earlier checks: reads go through str_read (a hit is still
 *     counted), SETBIT's and BITFIELD's plans check the old value, BITOP stops at the first source
 *     that is not a string.
 */
#include "server/server_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---------------- argument parsing ---------------- */

#define ERR_BIT_OFFSET "ERR bit offset is not an integer or out of range"
#define ERR_BF_TYPE "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."

/* A bit offset as Redis's getBitOffsetFromArgument; with hash, "#N" means N * bits. */
static bool bit_offset_parse(const resp_slice *a, bool hash, int bits, uint64_t *off /* out */)
{
	bool usehash = hash && a->len > 0 && a->ptr[0] == '#';
	long long v;

	if (!spw_parse_ll(a->ptr + usehash, a->len - usehash, &v))
		return false;
	if (usehash)
		v = (long long)((uint64_t)v * (uint64_t)bits);   /* wraps negative on overflow: refused */
	if (v < 0 || (uint64_t)(v >> 3) >= g_cfg.proto_max_bulk_len)
		return false;
	*off = (uint64_t)v;
	return true;
}

/* "i1".."i64" or "u1".."u63"; the number ends at a NUL byte as Redis's strlen does. */
static bool bf_type_parse(const resp_slice *a, bool *sign /* out */, int *bits /* out */)
{
	long long v;
	if (a->len == 0 || (a->ptr[0] != 'i' && a->ptr[0] != 'u'))
		return false;
	*sign = a->ptr[0] == 'i';
	if (!spw_parse_ll(a->ptr + 1, strnlen(a->ptr + 1, a->len - 1), &v) || v < 1 || v > (*sign ? 64 : 63))
		return false;
	*bits = (int)v;
	return true;
}

/*
 * Redis's index rule for BITCOUNT and BITPOS over len units (bytes, or bits in BIT mode): negative
 * indexes count from the end, both are clamped into the string. false when the range is empty.
 */
static bool range_clamp(long long *start, long long *end, long long len)
{
	if (*start < 0)
		*start += len;
	if (*end < 0)
		*end += len;
	if (*start < 0)
		*start = 0;
	if (*end < 0)
		*end = 0;
	if (*end >= len)
		*end = len - 1;
	return *start <= *end;
}

/* ---------------- bit helpers ---------------- */

static inline int bit_get(const uint8_t *p, size_t len, uint64_t off)
{
	uint64_t byte = off >> 3;
	return byte < len ? (p[byte] >> (7 - (off & 7))) & 1 : 0;
}

static long long popcount_bytes(const uint8_t *p, size_t n)
{
	long long c = 0;
	for (size_t i = 0; i < n; i++)
		c += __builtin_popcount(p[i]);
	return c;
}

/* Words of 8 bytes, four counters so that the popcounts do not wait on each other. */
#define POPCOUNT_BODY                                                                      \
	uint64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0, w[4];                                     \
	size_t i = 0;                                                                      \
	for (; i + 32 <= n; i += 32) {                                                     \
		memcpy(w, p + i, 32);                                                      \
		c0 += (uint64_t)__builtin_popcountll(w[0]);                                \
		c1 += (uint64_t)__builtin_popcountll(w[1]);                                \
		c2 += (uint64_t)__builtin_popcountll(w[2]);                                \
		c3 += (uint64_t)__builtin_popcountll(w[3]);                                \
	}                                                                                  \
	for (; i + 8 <= n; i += 8) {                                                       \
		memcpy(w, p + i, 8);                                                       \
		c0 += (uint64_t)__builtin_popcountll(w[0]);                                \
	}                                                                                  \
	return (long long)(c0 + c1 + c2 + c3) + popcount_bytes(p + i, n - i);

static long long popcount_plain(const uint8_t *p, size_t n)
{
	POPCOUNT_BODY
}

#if defined(__x86_64__)
__attribute__((target("popcnt"))) static long long popcount_hw(const uint8_t *p, size_t n)
{
	POPCOUNT_BODY
}
#endif

/* Set bits in p[0..n). The instruction's variant when the CPU has it (x86-64 baseline lacks it). */
static long long bits_popcount(const uint8_t *p, size_t n)
{
#if defined(__x86_64__)
	static int hw = -1;
	if (SPW_UNLIKELY(hw < 0))
		hw = __builtin_cpu_supports("popcnt") ? 1 : 0;
	if (hw)
		return popcount_hw(p, n);
#endif
	return popcount_plain(p, n);
}

/* Set bits among bits [s, e] of p (both inside the string). */
static long long bits_count_range(const uint8_t *p, uint64_t s, uint64_t e)
{
	uint64_t sb = s >> 3, eb = e >> 3;
	long long c = bits_popcount(p + sb, (size_t)(eb - sb + 1));
	c -= __builtin_popcount(p[sb] & (uint8_t)~(0xffu >> (s & 7)));
	c -= __builtin_popcount(p[eb] & (uint8_t)(0xffu >> ((e & 7) + 1)));
	return c;
}

/* The first bit equal to bit among bits [s, e] of p (inside the string), or -1. */
static long long bits_find(const uint8_t *p, uint64_t s, uint64_t e, int bit)
{
	uint8_t flip = bit ? 0 : 0xff;
	uint64_t skip = bit ? 0 : UINT64_MAX, sb = s >> 3, eb = e >> 3;

	for (uint64_t b = sb; b <= eb;) {
		unsigned x = (uint8_t)(p[b] ^ flip);
		if (b == sb)
			x &= 0xffu >> (s & 7);
		if (b == eb)
			x &= (0xffu << (7 - (e & 7))) & 0xffu;
		if (x)
			return (long long)(b * 8 + (uint64_t)(__builtin_clz(x) - 24));
		b++;
		/* Whole words that hold no such bit, up to the last byte (the only one masked). */
		uint64_t w;
		while (b + 8 <= eb && (memcpy(&w, p + b, 8), w == skip))
			b += 8;
	}
	return -1;
}

/* An unsigned field of bits (1..64) at bit off, big-endian across up to 9 bytes. */
static uint64_t field_get(const uint8_t *p, uint64_t off, int bits)
{
	const uint8_t *b = p + (off >> 3);
	unsigned lead = off & 7, n = (lead + (unsigned)bits + 7) / 8;
	unsigned __int128 w = 0;
	for (unsigned i = 0; i < n; i++)
		w = (w << 8) | b[i];
	w >>= n * 8 - lead - (unsigned)bits;
	return (uint64_t)w & (bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1);
}

/* Write the low bits of v there: only the bytes the field covers change. */
static void field_set(uint8_t *p, uint64_t off, int bits, uint64_t v)
{
	uint8_t *b = p + (off >> 3);
	unsigned lead = off & 7, n = (lead + (unsigned)bits + 7) / 8, sh = n * 8 - lead - (unsigned)bits;
	uint64_t vm = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
	unsigned __int128 w = 0, m = (unsigned __int128)vm << sh;
	for (unsigned i = 0; i < n; i++)
		w = (w << 8) | b[i];
	w = (w & ~m) | ((unsigned __int128)(v & vm) << sh);
	for (unsigned i = n; i-- > 0; w >>= 8)
		b[i] = (uint8_t)w;
}

static int64_t field_get_signed(const uint8_t *p, uint64_t off, int bits)
{
	uint64_t u = field_get(p, off, bits);
	if (bits < 64 && (u >> (bits - 1)) & 1)
		u |= UINT64_MAX << bits;   /* sign-extend */
	return (int64_t)u;
}

/* plan's write of a value that keeps its TTL (SETBIT, BITFIELD, as Redis). */
static void grow_plan(const hlog_value *old, size_t new_len, hlog_rmw_plan *out)
{
	out->action = HLOG_RMW_WRITE;
	out->new_len = new_len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
}

/* fill's common part for a value that may grow to new_len: the old bytes (unless in place, where
 * dst holds them) and a zero tail. In place the tail may hold stale bytes of the rounded record. */
static void grow_fill(const hlog_value *old, uint8_t *dst, bool in_place, size_t new_len)
{
	size_t olen = old ? old->len : 0;
	if (!in_place && olen)
		memcpy(dst, old->ptr, olen);
	if (new_len > olen)
		memset(dst + olen, 0, new_len - olen);
}

/* ---------------- SETBIT, GETBIT ---------------- */

/* str_read of argv[i], counted as a keyspace lookup (Redis's lookupKeyRead, a key of another type
 * included): HLOG_OK or HLOG_NOTFOUND, or -1 after replying (WRONGTYPE, a store error, parked). */
static int key_read(client *c, int i, hlog_read_fn fn, void *ctx)
{
	hlog_key k;
	key_from_arg(&k, &c->argv[i]);
	int rc = str_read(c, &k, fn, ctx);
	count_lookup(c, rc == HLOG_OK || rc == SPW_E_WRONGTYPE);
	return reply_store_failed(c, rc) ? -1 : rc;
}

/* A plan's type check (note 6): only a string is a bitmap. */
static inline bool old_not_string(const hlog_value *old)
{
	return old && SPW_UNLIKELY(old->rtype != HLOG_T_STRING);
}

struct setbit_ctx {
	uint64_t off;
	int on;
	/* outputs of plan */
	int old_bit;
	size_t new_len;
};

static int setbit_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct setbit_ctx *s = ctx;
	size_t olen = old ? old->len : 0, need = (size_t)(s->off >> 3) + 1;

	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	s->old_bit = old ? bit_get(old->ptr, olen, s->off) : 0;
	if (need <= olen && s->old_bit == s->on) {
		out->action = HLOG_RMW_KEEP;   /* nothing changes */
		return 0;
	}
	s->new_len = SPW_MAX(olen, need);
	grow_plan(old, s->new_len, out);
	return 0;
}

static void setbit_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct setbit_ctx *s = ctx;
	uint8_t m = (uint8_t)(0x80u >> (s->off & 7));

	grow_fill(old, dst, in_place, s->new_len);
	if (s->on)
		dst[s->off >> 3] |= m;
	else
		dst[s->off >> 3] &= (uint8_t)~m;
}

static const hlog_rmw_ops setbit_ops = { setbit_plan, setbit_fill };

void cmd_setbit(client *c)
{
	struct setbit_ctx s;
	long long on;
	hlog_key k;

	if (!bit_offset_parse(&c->argv[2], false, 0, &s.off)) {
		reply_error(c, ERR_BIT_OFFSET);
		return;
	}
	if (!arg_ll(&c->argv[3], &on) || (on & ~1LL)) {
		reply_error(c, "ERR bit is not an integer or out of range");
		return;
	}
	s.on = (int)on;
	key_from_arg(&k, &c->argv[1]);
	if (!reply_store_failed(c, hlog_rmw(c->w->sess, &k, &setbit_ops, &s)))
		reply_int(c, s.old_bit);
}

struct getbit_ctx {
	uint64_t off;
	int bit;
};

static void read_getbit(void *ctx, const hlog_value *v)
{
	struct getbit_ctx *g = ctx;
	g->bit = bit_get(v->ptr, v->len, g->off);
}

void cmd_getbit(client *c)
{
	struct getbit_ctx g = { 0, 0 };

	if (!bit_offset_parse(&c->argv[2], false, 0, &g.off)) {
		reply_error(c, ERR_BIT_OFFSET);
		return;
	}
	int rc = key_read(c, 1, read_getbit, &g);
	if (rc < 0)
		return;
	reply_int(c, g.bit);
}

/* ---------------- BITCOUNT, BITPOS ---------------- */

/* A parsed [start end [BYTE|BIT]] range. err: the reply when the arguments are wrong, decided
 * before the lookup but answered only for an existing key (note 1). */
struct range_args {
	long long start, end;
	bool given, end_given, isbit;
	const char *err;
};

/* "BIT" or "BYTE" at argv[i] (NUL-terminated compare, as Redis's strcasecmp). */
static const char *range_unit_parse(client *c, int i, struct range_args *r)
{
	if (OPT_IS(&c->argv[i], "bit"))
		r->isbit = true;
	else if (!OPT_IS(&c->argv[i], "byte"))
		return "ERR syntax error";
	return NULL;
}

static const char *bitcount_args_parse(client *c, struct range_args *r)
{
	if (c->argc == 2)
		return NULL;
	if (c->argc != 4 && c->argc != 5)
		return "ERR syntax error";
	r->given = true;
	if (!arg_ll(&c->argv[2], &r->start) || !arg_ll(&c->argv[3], &r->end))
		return "ERR value is not an integer or out of range";
	/* Redis answers 0 for this empty range before it looks at the unit. */
	if (r->start < 0 && r->end < 0 && r->start > r->end)
		return NULL;
	return c->argc == 5 ? range_unit_parse(c, 4, r) : NULL;
}

struct bitcount_ctx {
	struct range_args r;
	long long count;
};

static void read_bitcount(void *ctx, const hlog_value *v)
{
	struct bitcount_ctx *b = ctx;
	long long s = b->r.start, e = b->r.end, len = (long long)v->len * (b->r.isbit ? 8 : 1);

	b->count = 0;
	if (b->r.err)
		return;
	if (!b->r.given) {
		b->count = bits_popcount(v->ptr, v->len);
		return;
	}
	if ((s < 0 && e < 0 && s > e) || !range_clamp(&s, &e, len))
		return;
	if (b->r.isbit)
		b->count = bits_count_range(v->ptr, (uint64_t)s, (uint64_t)e);
	else
		b->count = bits_popcount(v->ptr + s, (size_t)(e - s + 1));
}

void cmd_bitcount(client *c)
{
	struct bitcount_ctx b = { .r = { 0 } };

	b.r.err = bitcount_args_parse(c, &b.r);
	int rc = key_read(c, 1, read_bitcount, &b);
	if (rc < 0)
		return;
	if (rc == HLOG_OK && b.r.err)
		reply_error(c, b.r.err);
	else
		reply_int(c, b.count);
}

/* BITPOS key bit [start [end [BYTE|BIT]]]: start, then the unit, then end, as Redis. */
static const char *bitpos_args_parse(client *c, struct range_args *r)
{
	const char *err;
	if (c->argc == 3)
		return NULL;
	if (c->argc > 6)
		return "ERR syntax error";
	r->given = true;
	if (!arg_ll(&c->argv[3], &r->start))
		return "ERR value is not an integer or out of range";
	if (c->argc == 6 && (err = range_unit_parse(c, 5, r)) != NULL)
		return err;
	if (c->argc >= 5) {
		if (!arg_ll(&c->argv[4], &r->end))
			return "ERR value is not an integer or out of range";
		r->end_given = true;
	}
	return NULL;
}

struct bitpos_ctx {
	struct range_args r;
	int bit;
	long long pos;
};

/*
 * Redis's answer: the first bit equal to bit in the range; when there is none, -1 for a 1, and for
 * a 0 the bit after the range's last byte (the string reads as zero padded), unless the user gave
 * an end, or the range is empty: then -1.
 */
static void read_bitpos(void *ctx, const hlog_value *v)
{
	struct bitpos_ctx *b = ctx;
	long long len = (long long)v->len, s = 0, e = len - 1;

	b->pos = -1;
	if (b->r.err)
		return;
	if (b->r.given) {
		s = b->r.start;
		e = b->r.end_given ? b->r.end : (b->r.isbit ? len * 8 + 7 : len - 1);
		if (b->r.isbit)
			len *= 8;
		if (!range_clamp(&s, &e, len))
			return;
	} else if (len == 0) {
		return;
	}
	if (!b->r.isbit) {
		s *= 8;
		e = e * 8 + 7;
	}
	b->pos = bits_find(v->ptr, (uint64_t)s, (uint64_t)e, b->bit);
	if (b->pos < 0 && b->bit == 0 && !b->r.end_given)
		b->pos = ((e >> 3) + 1) * 8;
}

void cmd_bitpos(client *c)
{
	struct bitpos_ctx b = { .r = { 0 } };
	long long bit;

	if (!arg_ll(&c->argv[2], &bit)) {
		reply_err_not_int(c);
		return;
	}
	if (bit != 0 && bit != 1) {
		reply_error(c, "ERR The bit argument must be 1 or 0.");
		return;
	}
	b.bit = (int)bit;
	b.r.err = bitpos_args_parse(c, &b.r);
	int rc = key_read(c, 1, read_bitpos, &b);
	if (rc < 0)
		return;
	if (rc == HLOG_NOTFOUND)
		reply_int(c, bit ? -1 : 0);
	else if (b.r.err)
		reply_error(c, b.r.err);
	else
		reply_int(c, b.pos);
}

/* ---------------- BITOP ---------------- */

enum { BITOP_AND, BITOP_OR, BITOP_XOR, BITOP_NOT };

/* The result so far, in the worker's scratch: len bytes of the first nsrc sources combined. */
struct bitop_ctx {
	worker *w;
	int op, nsrc;
	size_t len;
	uint8_t *res;
	bool oom;
};

/* Fold one source (absent: empty) into the result. A source shorter than the result reads as
 * zeros past its end, so AND clears the rest; a longer one grows the result with zeros first
 * (what the shorter sources before it read as), which OR and XOR then combine with it. */
static void bitop_fold(struct bitop_ctx *b, const uint8_t *src, size_t n)
{
	size_t i;
	if (b->oom)
		return;
	if (n > b->len) {
		uint8_t *grown = worker_scratch(b->w, n);
		if (!grown) {
			b->oom = true;
			return;
		}
		memset(grown + b->len, 0, n - b->len);
		b->res = grown;
	}
	uint8_t *restrict r = b->res;
	if (b->nsrc++ == 0) {
		for (i = 0; i < n; i++)
			r[i] = b->op == BITOP_NOT ? (uint8_t)~src[i] : src[i];
		b->len = n;
		return;
	}
	switch (b->op) {
	case BITOP_AND:
		for (i = 0; i < n && i < b->len; i++)
			r[i] &= src[i];
		if (n < b->len)
			memset(r + n, 0, b->len - n);
		break;
	case BITOP_OR:
		for (i = 0; i < n; i++)
			r[i] |= src[i];
		break;
	case BITOP_XOR:
		for (i = 0; i < n; i++)
			r[i] ^= src[i];
		break;
	}
	b->len = SPW_MAX(b->len, n);
}

static void read_bitop(void *ctx, const hlog_value *v)
{
	bitop_fold(ctx, v->ptr, v->len);
}

void cmd_bitop(client *c)
{
	struct bitop_ctx b = { .w = c->w };
	const resp_slice *op = &c->argv[1];
	hlog_key k;
	int rc;

	if (OPT_IS(op, "and"))
		b.op = BITOP_AND;
	else if (OPT_IS(op, "or"))
		b.op = BITOP_OR;
	else if (OPT_IS(op, "xor"))
		b.op = BITOP_XOR;
	else if (OPT_IS(op, "not"))
		b.op = BITOP_NOT;
	else {
		reply_err_syntax(c);
		return;
	}
	if (b.op == BITOP_NOT && c->argc != 4) {
		reply_error(c, "ERR BITOP NOT must be called with a single source key.");
		return;
	}
	/* The destination too: an upsert or delete of a cold key reads it first (hlog.h). */
	if (reply_store_failed(c, command_keys_prefetch(c, 2, -1, 1)))
		return;
	for (int j = 3; j < c->argc; j++) {
		if ((rc = key_read(c, j, read_bitop, &b)) < 0)
			return;
		if (rc == HLOG_NOTFOUND)
			bitop_fold(&b, NULL, 0);
	}
	if (b.oom) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	key_from_arg(&k, &c->argv[2]);
	rc = b.len ? hlog_upsert(c->w->sess, &k, b.res, b.len, HLOG_NO_EXPIRY) : hlog_delete(c->w->sess, &k);
	if (!reply_store_failed(c, rc))
		reply_int(c, (long long)b.len);
}

/* ---------------- BITFIELD, BITFIELD_RO ---------------- */

enum { BF_GET, BF_SET, BF_INCRBY };
enum { BF_WRAP, BF_SAT, BF_FAIL };

typedef struct bf_op {
	int kind, overflow, bits;
	bool sign;
	uint64_t off;
	long long val;             /* SET's value, INCRBY's increment */
} bf_op;

/* One subcommand's reply: an integer, or nil (OVERFLOW FAIL refused it). */
typedef struct bf_res {
	long long v;
	bool nil;
} bf_res;

/* A cursor over BITFIELD's subcommands: parsed once to check them all before the key is touched,
 * and again as they run, which cannot fail then. */
typedef struct bf_iter {
	int j;
	int overflow;
} bf_iter;

/* The next GET/SET/INCRBY into *op (an OVERFLOW sets the mode of those after it). 1, 0 at the
 * end, or -1 with Redis's error text in *err. */
static int bf_next(const client *c, bf_iter *it, bf_op *op, const char **err)
{
	while (it->j < c->argc) {
		const resp_slice *sub = &c->argv[it->j];
		int more = c->argc - it->j - 1;

		if (OPT_IS(sub, "get") && more >= 2) {
			op->kind = BF_GET;
		} else if (OPT_IS(sub, "set") && more >= 3) {
			op->kind = BF_SET;
		} else if (OPT_IS(sub, "incrby") && more >= 3) {
			op->kind = BF_INCRBY;
		} else if (OPT_IS(sub, "overflow") && more >= 1) {
			const resp_slice *t = &c->argv[it->j + 1];
			if (OPT_IS(t, "wrap"))
				it->overflow = BF_WRAP;
			else if (OPT_IS(t, "sat"))
				it->overflow = BF_SAT;
			else if (OPT_IS(t, "fail"))
				it->overflow = BF_FAIL;
			else {
				*err = "ERR Invalid OVERFLOW type specified";
				return -1;
			}
			it->j += 2;
			continue;
		} else {
			*err = "ERR syntax error";
			return -1;
		}
		if (!bf_type_parse(&c->argv[it->j + 1], &op->sign, &op->bits)) {
			*err = ERR_BF_TYPE;
			return -1;
		}
		if (!bit_offset_parse(&c->argv[it->j + 2], true, op->bits, &op->off)) {
			*err = ERR_BIT_OFFSET;
			return -1;
		}
		if (op->kind != BF_GET && !arg_ll(&c->argv[it->j + 3], &op->val)) {
			*err = "ERR value is not an integer or out of range";
			return -1;
		}
		op->overflow = it->overflow;
		it->j += op->kind == BF_GET ? 3 : 4;
		return 1;
	}
	return 0;
}

/*
 * Whether value + incr leaves the range of an unsigned field of bits: 1 above, -1 below, 0 fits.
 * On overflow *lim is what WRAP (the sum modulo 2^bits) or SAT (the bound passed) stores. A SET
 * checks its value with incr 0; a negative value is a huge unsigned one, so it saturates high.
 */
static int bf_overflow_u(uint64_t value, long long incr, int bits, int mode, uint64_t *lim)
{
	uint64_t max = ((uint64_t)1 << bits) - 1;   /* bits <= 63 */
	int dir = 0;

	if (value > max || (incr > 0 && (uint64_t)incr > max - value))
		dir = 1;
	else if (incr < 0 && (uint64_t)0 - (uint64_t)incr > value)
		dir = -1;
	if (dir && mode == BF_WRAP)
		*lim = (value + (uint64_t)incr) & max;
	else if (dir)
		*lim = dir > 0 ? max : 0;
	return dir;
}

/*
 * The same for a signed field of bits (1..64): WRAP keeps the low bits, sign-extended. The bounds
 * on incr are taken modulo 2^64, as Redis's checkSignedBitfieldOverflow takes them: a SET far below
 * a narrow field's minimum (max - value wraps negative) counts as an overflow upwards, so SAT
 * stores the maximum there. Replies do not show it, the stored value does.
 */
static int bf_overflow_s(int64_t value, long long incr, int bits, int mode, int64_t *lim)
{
	int64_t max = bits == 64 ? INT64_MAX : (int64_t)(((uint64_t)1 << (bits - 1)) - 1), min = -max - 1;
	int64_t maxincr = (int64_t)((uint64_t)max - (uint64_t)value);
	int64_t minincr = (int64_t)((uint64_t)min - (uint64_t)value);
	int dir = 0;

	if (value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr))
		dir = 1;
	else if (value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr))
		dir = -1;
	if (dir && mode == BF_WRAP) {
		uint64_t sum = (uint64_t)value + (uint64_t)incr;
		if (bits < 64) {
			uint64_t high = UINT64_MAX << bits;
			sum = (sum >> (bits - 1)) & 1 ? sum | high : sum & ~high;
		}
		*lim = (int64_t)sum;
	} else if (dir) {
		*lim = dir > 0 ? max : min;
	}
	return dir;
}

/* GET over a string of len bytes: past its end it reads zeros. */
static long long bf_get(const uint8_t *p, size_t len, const bf_op *op)
{
	uint8_t win[9] = { 0 };
	uint64_t byte = op->off >> 3;
	if (byte < len)
		memcpy(win, p + byte, SPW_MIN((size_t)9, len - (size_t)byte));
	uint64_t off = op->off & 7;
	return op->sign ? field_get_signed(win, off, op->bits) : (long long)field_get(win, off, op->bits);
}

/* SET or INCRBY on p, which holds the whole field. SET answers the old value, INCRBY the new
 * one; false when OVERFLOW FAIL refused the write. */
static bool bf_write(uint8_t *p, const bf_op *op, long long *ret /* out */)
{
	uint64_t nv;
	int dir;

	if (op->sign) {
		int64_t old = field_get_signed(p, op->off, op->bits), lim = 0;
		if (op->kind == BF_INCRBY) {
			dir = bf_overflow_s(old, op->val, op->bits, op->overflow, &lim);
			nv = dir ? (uint64_t)lim : (uint64_t)old + (uint64_t)op->val;
			*ret = (long long)nv;
		} else {
			dir = bf_overflow_s(op->val, 0, op->bits, op->overflow, &lim);
			nv = dir ? (uint64_t)lim : (uint64_t)op->val;
			*ret = old;
		}
	} else {
		uint64_t old = field_get(p, op->off, op->bits), lim = 0;
		if (op->kind == BF_INCRBY) {
			dir = bf_overflow_u(old, op->val, op->bits, op->overflow, &lim);
			nv = dir ? lim : old + (uint64_t)op->val;
			*ret = (long long)nv;
		} else {
			dir = bf_overflow_u((uint64_t)op->val, 0, op->bits, op->overflow, &lim);
			nv = dir ? lim : (uint64_t)op->val;
			*ret = (long long)old;
		}
	}
	if (dir && op->overflow == BF_FAIL)
		return false;
	field_set(p, op->off, op->bits, nv);
	return true;
}

struct bf_ctx {
	client *c;
	int nops;
	uint64_t top;              /* the highest bit a SET or INCRBY writes */
	bf_res *res;               /* nops replies, in the worker's scratch */
	size_t new_len;            /* output of plan */
};

/* Only GETs: the replies straight from the record (or an absent key's zeros). */
static void bf_reply_gets(struct bf_ctx *b, const uint8_t *p, size_t len)
{
	bf_iter it = { 2, BF_WRAP };
	const char *err;
	bf_op op;

	resp_write_array_len(&b->c->out, b->nops);
	while (bf_next(b->c, &it, &op, &err) > 0)
		reply_int(b->c, bf_get(p, len, &op));
}

static void read_bf(void *ctx, const hlog_value *v)
{
	bf_reply_gets(ctx, v->ptr, v->len);
}

static int bf_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct bf_ctx *b = ctx;
	if (old_not_string(old))
		return SPW_E_WRONGTYPE;
	b->new_len = SPW_MAX(old ? old->len : 0, (size_t)(b->top >> 3) + 1);
	grow_plan(old, b->new_len, out);
	return 0;
}

/* The subcommands run here, in order, on the new value (note 3). */
static void bf_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct bf_ctx *b = ctx;
	bf_iter it = { 2, BF_WRAP };
	const char *err;
	bf_op op;

	grow_fill(old, dst, in_place, b->new_len);
	for (int i = 0; bf_next(b->c, &it, &op, &err) > 0; i++) {
		b->res[i].nil = false;
		if (op.kind == BF_GET)
			b->res[i].v = bf_get(dst, b->new_len, &op);
		else
			b->res[i].nil = !bf_write(dst, &op, &b->res[i].v);
	}
}

static const hlog_rmw_ops bf_ops = { bf_plan, bf_fill };

static void bitfield_generic(client *c, bool ro)
{
	struct bf_ctx b = { .c = c };
	bf_iter it = { 2, BF_WRAP };
	bool writes = false;
	const char *err;
	hlog_key k;
	bf_op op;
	int rc;

	while ((rc = bf_next(c, &it, &op, &err)) > 0) {
		b.nops++;
		if (op.kind != BF_GET) {
			writes = true;
			b.top = SPW_MAX(b.top, op.off + (uint64_t)op.bits - 1);
		}
	}
	if (rc < 0) {
		reply_error(c, err);
		return;
	}
	key_from_arg(&k, &c->argv[1]);
	if (!writes) {
		rc = key_read(c, 1, read_bf, &b);
		if (rc == HLOG_NOTFOUND)
			bf_reply_gets(&b, NULL, 0);
		return;
	}
	if (ro) {
		reply_error(c, "ERR BITFIELD_RO only supports the GET subcommand");
		return;
	}
	b.res = (bf_res *)worker_scratch(c->w, (size_t)b.nops * sizeof(bf_res));
	if (!b.res) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	if (reply_store_failed(c, hlog_rmw(c->w->sess, &k, &bf_ops, &b)))
		return;
	resp_write_array_len(&c->out, b.nops);
	for (int i = 0; i < b.nops; i++) {
		if (b.res[i].nil)
			reply_null(c);
		else
			reply_int(c, b.res[i].v);
	}
}

void cmd_bitfield(client *c)
{
	bitfield_generic(c, false);
}

void cmd_bitfield_ro(client *c)
{
	bitfield_generic(c, true);
}
