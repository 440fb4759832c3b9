/*
 * hll.c - Redis 7.0's HyperLogLog (hyperloglog.c) on caller-owned bytes: the hash, the dense and
 * sparse encodings and their changes, merging, and Otmar Ertl's estimator (PFCOUNT since Redis 5).
 *
 * Design notes:
 *  1. Byte-identical to Redis, not merely equivalent: clients GET an HLL from one server and SET it
 *     on another, and PFCOUNT answers must match exactly. So every choice Redis makes that shows in
 *     the bytes is kept: the sparse set splits an opcode exactly as hllSparseSet does, then merges
 *     adjacent VAL opcodes scanning at most 5 opcodes from the one before the change; the promotion
 *     to dense happens at the same moment (a register above 32, or a split that would pass
 *     hll-sparse-max-bytes); the header (cached cardinality included) is copied on promotion; the
 *     estimator's floating-point steps run in Redis's order. The code is written anew from that
 *     description.
 *  2. The estimator (estimate) must round exactly as Redis's: it is built for the baseline x86-64
 *     target (no FMA), so `z += x * y` is two roundings as in redis-server's Debian build.
 *  3. Redis reads one byte past the end of the string in two places, relying on the NUL that ends
 *     an sds: the dense macros touch the byte after the last register (without effect), and a
 *     truncated XZERO at the end of a sparse encoding reads it as its low byte. Here the dense
 *     accessors skip the second byte when the register fits in the first, and byte_at() reads a
 *     byte past the end as 0, so no buffer needs a spare byte.
 *  4. A corrupt sparse encoding (runs that do not cover exactly 16384 registers, from SETRANGE or
 *     APPEND on an HLL) is detected where Redis detects it, and only there: merging, counting and
 *     promoting check the coverage; a set fails only when no opcode covers its register.
 */
#include "coll/hll.h"

#include <endian.h>
#include <math.h>
#include <string.h>

#define HLL_ALPHA_INF 0.721347520444481703680   /* 0.5 / ln(2) */

/* ---------------- hash ---------------- */

/* MurmurHash64A as Redis has it (endian-neutral: 8-byte blocks read little-endian). Redis passes
 * the length as an int; elements past 2 GB would hash differently there. */
uint64_t hll_murmur64a(const void *key, size_t len, uint64_t seed)
{
	const uint64_t m = 0xc6a4a7935bd1e995ULL;
	const int r = 47;
	const uint8_t *data = key, *end = data + (len & ~(size_t)7);
	uint64_t h = seed ^ ((uint64_t)len * m);

	for (; data != end; data += 8) {
		uint64_t k;
		memcpy(&k, data, 8);
		k = le64toh(k);
		k *= m;
		k ^= k >> r;
		k *= m;
		h ^= k;
		h *= m;
	}
	switch (len & 7) {
	case 7: h ^= (uint64_t)data[6] << 48; /* fall through */
	case 6: h ^= (uint64_t)data[5] << 40; /* fall through */
	case 5: h ^= (uint64_t)data[4] << 32; /* fall through */
	case 4: h ^= (uint64_t)data[3] << 24; /* fall through */
	case 3: h ^= (uint64_t)data[2] << 16; /* fall through */
	case 2: h ^= (uint64_t)data[1] << 8;  /* fall through */
	case 1: h ^= (uint64_t)data[0]; h *= m;
	}
	h ^= h >> r;
	h *= m;
	h ^= h >> r;
	return h;
}

/* The low HLL_P bits pick the register; the pattern is counted in the bits above them, with bit
 * HLL_Q forced so that it ends by HLL_Q + 1. */
int hll_pattern(const void *ele, size_t len, long *reg)
{
	uint64_t hash = hll_murmur64a(ele, len, HLL_HASH_SEED);
	*reg = (long)(hash & (HLL_REGISTERS - 1));
	hash >>= HLL_P;
	hash |= 1ULL << HLL_Q;
	return __builtin_ctzll(hash) + 1;
}

/* ---------------- header ---------------- */

bool hll_valid(const uint8_t *p, size_t len)
{
	if (len < HLL_HDR_SIZE || memcmp(p, "HYLL", 4) != 0 || p[4] > HLL_SPARSE)
		return false;
	return p[4] != HLL_DENSE || len == HLL_DENSE_SIZE;
}

size_t hll_empty(uint8_t *dst)
{
	memset(dst, 0, HLL_HDR_SIZE);
	memcpy(dst, "HYLL", 4);
	dst[4] = HLL_SPARSE;
	dst[HLL_HDR_SIZE] = (uint8_t)(0x40 | (HLL_REGISTERS - 1) >> 8);    /* XZERO:16384 */
	dst[HLL_HDR_SIZE + 1] = (uint8_t)((HLL_REGISTERS - 1) & 0xff);
	return HLL_EMPTY_SIZE;
}

bool hll_cache_get(const uint8_t *p, uint64_t *card)
{
	uint64_t v;
	if (p[15] & 0x80)
		return false;
	memcpy(&v, p + 8, 8);
	*card = le64toh(v);
	return true;
}

void hll_cache_put(uint8_t *p, uint64_t card)
{
	uint64_t v = htole64(card);
	memcpy(p + 8, &v, 8);
}

/* ---------------- dense ---------------- */

/* Register i's 6 bits start at bit 6i; they spill into the next byte only when they start past
 * bit 2 of theirs (note 3: the last register never does). */
unsigned hll_dense_get(const uint8_t *regs, long i)
{
	size_t byte = (size_t)i * HLL_BITS / 8;
	unsigned fb = (unsigned)((size_t)i * HLL_BITS & 7);
	unsigned v = regs[byte] >> fb;
	if (fb > 8 - HLL_BITS)
		v |= (unsigned)regs[byte + 1] << (8 - fb);
	return v & 63;
}

static void dense_put(uint8_t *regs, long i, unsigned v)
{
	size_t byte = (size_t)i * HLL_BITS / 8;
	unsigned fb = (unsigned)((size_t)i * HLL_BITS & 7);
	regs[byte] = (uint8_t)((regs[byte] & ~(63u << fb)) | (v << fb));
	if (fb > 8 - HLL_BITS)
		regs[byte + 1] = (uint8_t)((regs[byte + 1] & ~(63u >> (8 - fb))) | (v >> (8 - fb)));
}

int hll_dense_set(uint8_t *regs, long i, uint8_t count)
{
	if (count <= hll_dense_get(regs, i))
		return 0;
	dense_put(regs, i, count);
	return 1;
}

/* Registers 4k..4k+3 from their three bytes r, for the loops over all of them. */
static inline void dense_unpack4(const uint8_t *r, unsigned v[4])
{
	v[0] = r[0] & 63u;
	v[1] = (r[0] >> 6 | r[1] << 2) & 63u;
	v[2] = (r[1] >> 4 | r[2] << 4) & 63u;
	v[3] = r[2] >> 2;
}

/* ---------------- sparse ---------------- */

enum { OP_ZERO, OP_XZERO, OP_VAL };

static inline int op_kind(uint8_t b) { return (b & 0x80) ? OP_VAL : (b & 0x40) ? OP_XZERO : OP_ZERO; }
static inline int op_size(uint8_t b) { return op_kind(b) == OP_XZERO ? 2 : 1; }
static inline int val_value(uint8_t b) { return ((b >> 2) & 0x1f) + 1; }
static inline int val_len(uint8_t b) { return (b & 3) + 1; }
static inline uint8_t val_op(long v, long n) { return (uint8_t)(0x80 | (v - 1) << 2 | (n - 1)); }
/* A byte of the encoding, 0 past its end (note 3). */
static inline uint8_t byte_at(const uint8_t *p, const uint8_t *end) { return p < end ? *p : 0; }

/* Registers covered by the opcode at p. */
static long op_span(const uint8_t *p, const uint8_t *end)
{
	switch (op_kind(*p)) {
	case OP_ZERO: return (*p & 0x3f) + 1;
	case OP_VAL: return val_len(*p);
	default: return ((long)(*p & 0x3f) << 8 | byte_at(p + 1, end)) + 1;
	}
}

/* n (1..16384) registers at zero as one opcode at dst: ZERO up to 64, XZERO above. Its size. */
static int zero_run_put(uint8_t *dst, long n)
{
	if (n <= 64) {
		dst[0] = (uint8_t)(n - 1);
		return 1;
	}
	dst[0] = (uint8_t)(0x40 | (n - 1) >> 8);
	dst[1] = (uint8_t)((n - 1) & 0xff);
	return 2;
}

/* Walk the opcodes [p, end), calling fn(ctx, first, n, value) for every VAL run. -1 when the runs do
 * not cover exactly the 16384 registers; a VAL run past the last register is corrupt at once (as
 * redis-server 7.0.15 answers for merging, counting and promoting alike), before fn sees it. */
typedef void (*run_fn)(void *ctx, long first, long n, unsigned value);
static int sparse_walk(const uint8_t *p, const uint8_t *end, run_fn fn, void *ctx)
{
	long idx = 0;
	while (p < end) {
		long n = op_span(p, end);
		if (op_kind(*p) == OP_VAL) {
			if (idx + n > HLL_REGISTERS)
				return -1;
			fn(ctx, idx, n, (unsigned)val_value(*p));
		}
		idx += n;
		p += op_size(*p);
	}
	return idx == HLL_REGISTERS ? 0 : -1;
}

static void run_to_dense(void *ctx, long first, long n, unsigned v)
{
	for (long i = first; i < first + n; i++)
		dense_put(ctx, i, v);
}

static void run_max(void *ctx, long first, long n, unsigned v)
{
	uint8_t *max = ctx;
	for (long i = first; i < first + n; i++)
		if (v > max[i])
			max[i] = (uint8_t)v;
}

static void run_histo(void *ctx, long first, long n, unsigned v)
{
	(void)first;
	((int *)ctx)[v] += (int)n;
}

int hll_edit_to_dense(hll_edit *e)
{
	if (hll_encoding(e->p) == HLL_DENSE)
		return 0;
	memset(e->dense, 0, HLL_DENSE_SIZE);
	memcpy(e->dense, e->p, HLL_HDR_SIZE);   /* magic and cached cardinality */
	e->dense[4] = HLL_DENSE;
	if (sparse_walk(e->p + HLL_HDR_SIZE, e->p + e->len, run_to_dense, e->dense + HLL_HDR_SIZE) < 0)
		return -1;
	e->p = e->dense;
	e->len = e->cap = HLL_DENSE_SIZE;
	return 0;
}

static int sparse_promote(hll_edit *e, long i, uint8_t count)
{
	if (hll_edit_to_dense(e) < 0)
		return -1;
	e->promoted = true;
	return hll_dense_set(e->p + HLL_HDR_SIZE, i, count);
}

/* Merge adjacent VAL opcodes of one value (up to a run of 4), scanning at most 5 opcodes from p:
 * Redis's step 4, which decides the bytes. After a merge the same opcode is tried again. */
static void sparse_merge_near(hll_edit *e, uint8_t *p)
{
	uint8_t *end = e->p + e->len;
	int scan = 5;

	while (p < end && scan-- > 0) {
		if (op_kind(*p) != OP_VAL) {
			p += op_size(*p);
			continue;
		}
		if (p + 1 < end && op_kind(p[1]) == OP_VAL && val_value(p[0]) == val_value(p[1]) &&
		    val_len(p[0]) + val_len(p[1]) <= 4) {
			p[1] = val_op(val_value(p[0]), val_len(p[0]) + val_len(p[1]));
			memmove(p, p + 1, (size_t)(end - p - 1));
			end--;
			e->len--;
			continue;
		}
		p++;
	}
}

/* Redis's hllSparseSet: find the opcode covering register i; if it must change, rewrite it in
 * place (a run of 1) or split it into up to 3 opcodes (at most 5 bytes), shifting the rest. */
static int sparse_set(hll_edit *e, long i, uint8_t count)
{
	uint8_t *sparse = e->p + HLL_HDR_SIZE, *end = e->p + e->len, *p = sparse, *prev = NULL, *next;
	long first = 0, span = 0;

	if (count > HLL_SPARSE_VAL_MAX)
		return sparse_promote(e, i, count);
	while (p < end) {
		span = op_span(p, end);
		if (i <= first + span - 1)
			break;
		prev = p;
		first += span;
		p += op_size(*p);
	}
	if (p >= end)
		return -1;
	next = p + op_size(*p) < end ? p + op_size(*p) : NULL;

	int kind = op_kind(*p);
	if (kind == OP_VAL && val_value(*p) >= count)
		return 0;
	if (span == 1 && kind != OP_XZERO) {
		*p = val_op(count, 1);
	} else {
		uint8_t seq[5];
		long n = 0, last = first + span - 1;
		if (kind == OP_VAL) {
			long cur = val_value(*p);
			if (i != first)
				seq[n++] = val_op(cur, i - first);
			seq[n++] = val_op(count, 1);
			if (i != last)
				seq[n++] = val_op(cur, last - i);
		} else {
			if (i != first)
				n += zero_run_put(seq + n, i - first);
			seq[n++] = val_op(count, 1);
			if (i != last)
				n += zero_run_put(seq + n, last - i);
		}
		long delta = n - op_size(*p);
		if (delta > 0 && (e->len + (size_t)delta > e->sparse_max || e->len + (size_t)delta > e->cap))
			return sparse_promote(e, i, count);
		if (delta && next)
			memmove(next + delta, next, (size_t)(end - next));
		e->len = (size_t)((long)e->len + delta);
		memcpy(p, seq, (size_t)n);
	}
	sparse_merge_near(e, prev ? prev : sparse);
	hll_cache_invalidate(e->p);
	return 1;
}

int hll_edit_set(hll_edit *e, long i, uint8_t count)
{
	switch (hll_encoding(e->p)) {
	case HLL_DENSE: return hll_dense_set(e->p + HLL_HDR_SIZE, i, count);
	case HLL_SPARSE: return sparse_set(e, i, count);
	default: return -1;
	}
}

int hll_edit_add(hll_edit *e, const void *ele, size_t len)
{
	long reg;
	int count = hll_pattern(ele, len, &reg);
	return hll_edit_set(e, reg, (uint8_t)count);
}

/* ---------------- merge and count ---------------- */

int hll_merge(uint8_t max[HLL_REGISTERS], const uint8_t *p, size_t len)
{
	if (hll_encoding(p) == HLL_DENSE) {
		const uint8_t *r = p + HLL_HDR_SIZE;
		unsigned v[4];
		for (long i = 0; i < HLL_REGISTERS; i += 4, r += 3) {
			dense_unpack4(r, v);
			for (int k = 0; k < 4; k++)
				if (v[k] > max[i + k])
					max[i + k] = (uint8_t)v[k];
		}
		return 0;
	}
	return sparse_walk(p + HLL_HDR_SIZE, p + len, run_max, max);
}

/* Ertl's sigma and tau ("New cardinality estimation algorithms for HyperLogLog sketches",
 * arXiv:1702.01284), iterated until the sum stops changing, as Redis does. */
static double hll_sigma(double x)
{
	double y = 1, z = x, zp;
	if (x == 1.)
		return INFINITY;
	do {
		x *= x;
		zp = z;
		z += x * y;
		y += y;
	} while (zp != z);
	return z;
}

static double hll_tau(double x)
{
	double y = 1.0, z = 1 - x, zp;
	if (x == 0. || x == 1.)
		return 0.;
	do {
		x = sqrt(x);
		zp = z;
		y *= 0.5;
		z -= pow(1 - x, 2) * y;
	} while (zp != z);
	return z / 3;
}

/* The cardinality from the histogram of register values (note 2 on rounding). An empty HLL gives
 * sigma(1) = inf and so 0. */
static uint64_t estimate(const int histo[64])
{
	double m = HLL_REGISTERS;
	double z = m * hll_tau((m - histo[HLL_Q + 1]) / m);
	for (int j = HLL_Q; j >= 1; --j) {
		z += histo[j];
		z *= 0.5;
	}
	z += m * hll_sigma(histo[0] / m);
	double e = (double)llroundl(HLL_ALPHA_INF * m * m / z);
	return (uint64_t)e;
}

int hll_count(const uint8_t *p, size_t len, uint64_t *card)
{
	int histo[64] = { 0 };

	if (hll_encoding(p) == HLL_DENSE) {
		const uint8_t *r = p + HLL_HDR_SIZE;
		unsigned v[4];
		for (long i = 0; i < HLL_REGISTERS; i += 4, r += 3) {
			dense_unpack4(r, v);
			histo[v[0]]++, histo[v[1]]++, histo[v[2]]++, histo[v[3]]++;
		}
	} else {
		if (sparse_walk(p + HLL_HDR_SIZE, p + len, run_histo, histo) < 0)
			return -1;
		int nonzero = 0;
		for (int j = 1; j < 64; j++)
			nonzero += histo[j];
		histo[0] = HLL_REGISTERS - nonzero;
	}
	*card = estimate(histo);
	return 0;
}

uint64_t hll_count_raw(const uint8_t max[HLL_REGISTERS])
{
	int histo[64] = { 0 };
	for (long i = 0; i < HLL_REGISTERS; i++)
		histo[max[i] & 63]++;
	return estimate(histo);
}
