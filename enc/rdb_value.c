/*
 * rdb_value.c - one RDB value, every type redis-server 7.0 writes or accepts, decoded into a
 * visitor; streams and module values skipped; DUMP payloads verified and decoded.
 *
 * Design notes:
 *  1. A value decodes to what a client sees: a string, or begin / elements / end of a list, set,
 *     zset or hash, whatever the encoding (plain RDB elements, ziplist, zipmap, intset, listpack,
 *     quicklist nodes). The type code that stores it never learns the old formats.
 *  2. A packed blob is walked twice: first with no callback, which validates it whole and counts
 *     it, then for the visitor. So a visitor never sees a part of a corrupt blob, and begin gets an
 *     exact count for every packed encoding.
 *  3. Empty collections are corrupt (Redis refuses empty keys; a quicklist's empty nodes are
 *     skipped as in Redis, and a list of only empty nodes is empty). Duplicate hash fields or set
 *     members are left to the type code that builds the value (it has the structure to find them).
 *  4. A stream's or MODULE_2 value's structure is walked to skip it in a file (rdb_value_skip);
 *     in a DUMP payload they are RDB_E_UNSUPPORTED, as a type we do not store.
 */
#include "enc/rdb_int.h"
#include "common/spw.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VCALL(v, f, ...) ((v) && (v)->f ? (v)->f(__VA_ARGS__) : 0)

/* Pairs out of a packed blob (hash field/value, zset member/score): the first of a pair is kept
 * until the second comes. It points into the blob, or (an integer's text, which the walker formats
 * on its stack) is copied into first_int. */
typedef struct pair_ctx {
	const rdb_visitor *v;
	void *ctx;
	int kind;                     /* RDB_KIND_HASH or RDB_KIND_ZSET */
	const uint8_t *blob;
	size_t blob_len;
	const uint8_t *first;
	size_t first_len;
	bool have_first;
	uint8_t first_int[24];
} pair_ctx;

/* A zset score from a packed entry's text (zzlGetScore): integers and strtod's forms. */
static int score_parse(const uint8_t *p, size_t len, double *out)
{
	char buf[128];
	if (len == 0 || len >= sizeof(buf))
		return SPW_E_CORRUPT;
	memcpy(buf, p, len);
	buf[len] = '\0';
	char *end;
	*out = strtod(buf, &end);
	if (end != buf + len || isnan(*out))
		return SPW_E_CORRUPT;
	return 0;
}

static int pair_elem(void *arg, const uint8_t *p, size_t len)
{
	pair_ctx *pc = arg;
	if (!pc->have_first) {
		if (p >= pc->blob && p < pc->blob + pc->blob_len) {
			pc->first = p;
		} else {
			if (len > sizeof(pc->first_int))
				return SPW_E_CORRUPT;
			memcpy(pc->first_int, p, len);
			pc->first = pc->first_int;
		}
		pc->first_len = len;
		pc->have_first = true;
		return 0;
	}
	pc->have_first = false;
	if (pc->kind == RDB_KIND_HASH)
		return VCALL(pc->v, hash_field, pc->ctx, pc->first, pc->first_len, p, len);
	double score;
	int rc = score_parse(p, len, &score);
	if (rc < 0)
		return rc;
	return VCALL(pc->v, zset_member, pc->ctx, pc->first, pc->first_len, score);
}

typedef struct elem_ctx {
	const rdb_visitor *v;
	void *ctx;
	int kind;
} elem_ctx;

static int single_elem(void *arg, const uint8_t *p, size_t len)
{
	elem_ctx *ec = arg;
	if (ec->kind == RDB_KIND_LIST)
		return VCALL(ec->v, list_elem, ec->ctx, p, len);
	return VCALL(ec->v, set_member, ec->ctx, p, len);
}

typedef int (*walk_fn)(const uint8_t *, size_t, rdb_elem_fn, void *, uint64_t *);

/* A whole value in one packed blob: validate and count, begin, walk for the visitor, end. */
static int blob_value(rdb_reader *r, int rdb_type, int kind, walk_fn walk, const rdb_visitor *v, void *ctx)
{
	const uint8_t *p;
	size_t n;
	uint64_t count, again;
	int rc = rdb_read_string(r, 0, &p, &n);
	if (rc < 0)
		return rc;
	bool pairs = kind == RDB_KIND_HASH || kind == RDB_KIND_ZSET;
	if (walk(p, n, NULL, NULL, &count) < 0)
		return rdb_corrupt(r, "invalid packed encoding in a value of type %d", rdb_type);
	if (walk == rdb_zipmap_walk)   /* counts pairs; the others count entries */
		count *= 2;
	if (count == 0)
		return rdb_corrupt(r, "empty key (type %d)", rdb_type);
	if (pairs && count % 2)
		return rdb_corrupt(r, "odd number of entries in a value of type %d", rdb_type);
	if ((rc = VCALL(v, begin, ctx, kind, rdb_type, pairs ? count / 2 : count)) < 0)
		return rc;
	pair_ctx pc = { .v = v, .ctx = ctx, .kind = kind, .blob = p, .blob_len = n };
	elem_ctx ec = { .v = v, .ctx = ctx, .kind = kind };
	rc = pairs ? walk(p, n, pair_elem, &pc, &again) : walk(p, n, single_elem, &ec, &again);
	if (rc < 0)
		return rc == SPW_E_CORRUPT ? rdb_corrupt(r, "invalid score in a value of type %d", rdb_type) : rc;
	return VCALL(v, end, ctx);
}

/* The plain RDB forms: a count, then that many elements (pairs for a hash, member + score). */
static int plain_value(rdb_reader *r, int rdb_type, int kind, const rdb_visitor *v, void *ctx)
{
	uint64_t n;
	int rc = rdb_read_plain_len(r, &n);
	if (rc < 0)
		return rc;
	if (n == 0)
		return rdb_corrupt(r, "empty key (type %d)", rdb_type);
	if ((rc = VCALL(v, begin, ctx, kind, rdb_type, n)) < 0)
		return rc;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *a, *b;
		size_t alen, blen;
		double d;
		if ((rc = rdb_read_string(r, 0, &a, &alen)) < 0)
			return rc;
		switch (rdb_type) {
		case RDB_TYPE_LIST:
			rc = VCALL(v, list_elem, ctx, a, alen);
			break;
		case RDB_TYPE_SET:
			rc = VCALL(v, set_member, ctx, a, alen);
			break;
		case RDB_TYPE_HASH:
			if ((rc = rdb_read_string(r, 1, &b, &blen)) == 0)
				rc = VCALL(v, hash_field, ctx, a, alen, b, blen);
			break;
		default:   /* ZSET (text scores) and ZSET_2 (binary) */
			rc = rdb_type == RDB_TYPE_ZSET ? rdb_read_string_double(r, &d) : rdb_read_binary_double(r, &d);
			if (rc == 0 && isnan(d))
				rc = rdb_corrupt(r, "zset score is NaN");
			if (rc == 0)
				rc = VCALL(v, zset_member, ctx, a, alen, d);
		}
		if (rc < 0)
			return rc;
	}
	return VCALL(v, end, ctx);
}

/* Quicklists: a node count, then per node a ziplist (14) or a container kind and a listpack or one
 * plain element (18). begin comes before the first element with no count (0): the nodes are
 * validated one at a time, as they stream. */
static int quicklist_value(rdb_reader *r, int rdb_type, const rdb_visitor *v, void *ctx)
{
	uint64_t nodes, elems = 0;
	int rc = rdb_read_plain_len(r, &nodes);
	if (rc < 0)
		return rc;
	if (nodes == 0)
		return rdb_corrupt(r, "empty key (type %d)", rdb_type);
	elem_ctx ec = { .v = v, .ctx = ctx, .kind = RDB_KIND_LIST };
	for (uint64_t i = 0; i < nodes; i++) {
		uint64_t container = 2, count;   /* QUICKLIST_NODE_CONTAINER_PACKED */
		const uint8_t *p;
		size_t n;
		if (rdb_type == RDB_TYPE_LIST_QUICKLIST_2 && (rc = rdb_read_plain_len(r, &container)) < 0)
			return rc;
		if (container != 1 && container != 2)
			return rdb_corrupt(r, "quicklist container %llu unknown", (unsigned long long)container);
		if ((rc = rdb_read_string(r, 0, &p, &n)) < 0)
			return rc;
		walk_fn walk = rdb_type == RDB_TYPE_LIST_QUICKLIST ? rdb_ziplist_walk : rdb_listpack_walk;
		if (container == 2 && walk(p, n, NULL, NULL, &count) < 0)
			return rdb_corrupt(r, "invalid quicklist node %llu", (unsigned long long)i);
		if (container == 2 && count == 0)
			continue;   /* Redis drops empty nodes */
		if (elems == 0 && (rc = VCALL(v, begin, ctx, RDB_KIND_LIST, rdb_type, 0)) < 0)
			return rc;
		if (container == 1) {
			rc = single_elem(&ec, p, n);
			count = 1;
		} else {
			rc = walk(p, n, single_elem, &ec, &count);
		}
		if (rc < 0)
			return rc;
		elems += count;
	}
	if (elems == 0)
		return rdb_corrupt(r, "empty key (type %d)", rdb_type);
	return VCALL(v, end, ctx);
}

/* The types whose value is one packed blob, and the walk that reads it. */
static const struct {
	int type, kind;
	walk_fn walk;
} blob_types[] = {
	{ RDB_TYPE_HASH_ZIPMAP, RDB_KIND_HASH, rdb_zipmap_walk },
	{ RDB_TYPE_LIST_ZIPLIST, RDB_KIND_LIST, rdb_ziplist_walk },
	{ RDB_TYPE_SET_INTSET, RDB_KIND_SET, rdb_intset_walk },
	{ RDB_TYPE_ZSET_ZIPLIST, RDB_KIND_ZSET, rdb_ziplist_walk },
	{ RDB_TYPE_HASH_ZIPLIST, RDB_KIND_HASH, rdb_ziplist_walk },
	{ RDB_TYPE_HASH_LISTPACK, RDB_KIND_HASH, rdb_listpack_walk },
	{ RDB_TYPE_ZSET_LISTPACK, RDB_KIND_ZSET, rdb_listpack_walk },
	{ RDB_TYPE_SET_LISTPACK, RDB_KIND_SET, rdb_listpack_walk },   /* 7.2's; 7.0 refuses it, we read it */
};

int rdb_value_decode(rdb_reader *r, int rdb_type, const rdb_visitor *v, void *ctx)
{
	const uint8_t *p;
	size_t n;
	int rc;
	switch (rdb_type) {
	case RDB_TYPE_STRING:
		if ((rc = rdb_read_string(r, 0, &p, &n)) < 0)
			return rc;
		return VCALL(v, string, ctx, p, n);
	case RDB_TYPE_LIST: case RDB_TYPE_SET: case RDB_TYPE_ZSET: case RDB_TYPE_ZSET_2: case RDB_TYPE_HASH:
		return plain_value(r, rdb_type, rdb_type_kind(rdb_type), v, ctx);
	case RDB_TYPE_LIST_QUICKLIST: case RDB_TYPE_LIST_QUICKLIST_2:
		return quicklist_value(r, rdb_type, v, ctx);
	}
	for (size_t i = 0; i < SPW_ARRAY_LEN(blob_types); i++)
		if (blob_types[i].type == rdb_type)
			return blob_value(r, rdb_type, blob_types[i].kind, blob_types[i].walk, v, ctx);
	int kind = rdb_type_kind(rdb_type);
	if (kind == RDB_KIND_STREAM || kind == RDB_KIND_MODULE)
		return RDB_E_UNSUPPORTED;
	return rdb_corrupt(r, "unknown value type %d", rdb_type);
}

/* ---------------- skipping streams and module values ---------------- */

static int skip_lens(rdb_reader *r, int n)
{
	uint64_t x;
	for (int i = 0; i < n; i++) {
		int rc = rdb_read_plain_len(r, &x);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int skip_raw(rdb_reader *r, size_t n)
{
	uint8_t b[32];
	return rdb_read_raw(r, b, n);
}

/* A consumer group's pending entries (16-byte id, delivery time, count) and its consumers. */
static int skip_stream_group(rdb_reader *r, int rdb_type)
{
	uint64_t pel, consumers, cpel;
	int rc;
	if ((rc = rdb_skip_string(r)) < 0 || (rc = skip_lens(r, rdb_type >= RDB_TYPE_STREAM_LISTPACKS_2 ? 3 : 2)) < 0)
		return rc;
	if ((rc = rdb_read_plain_len(r, &pel)) < 0)
		return rc;
	for (uint64_t i = 0; i < pel; i++)
		if ((rc = skip_raw(r, 16 + 8)) < 0 || (rc = skip_lens(r, 1)) < 0)
			return rc;
	if ((rc = rdb_read_plain_len(r, &consumers)) < 0)
		return rc;
	for (uint64_t i = 0; i < consumers; i++) {
		if ((rc = rdb_skip_string(r)) < 0 || (rc = skip_raw(r, rdb_type >= RDB_TYPE_STREAM_LISTPACKS_3 ? 16 : 8)) < 0)
			return rc;
		if ((rc = rdb_read_plain_len(r, &cpel)) < 0)
			return rc;
		for (uint64_t j = 0; j < cpel; j++)
			if ((rc = skip_raw(r, 16)) < 0)
				return rc;
	}
	return 0;
}

static int skip_stream(rdb_reader *r, int rdb_type)
{
	uint64_t lps, groups;
	int rc = rdb_read_plain_len(r, &lps);
	if (rc < 0)
		return rc;
	for (uint64_t i = 0; i < lps; i++)
		if ((rc = rdb_skip_string(r)) < 0 || (rc = rdb_skip_string(r)) < 0)
			return rc;
	/* length, last id; from v2 the first id, the max deleted id and entries_added */
	if ((rc = skip_lens(r, rdb_type >= RDB_TYPE_STREAM_LISTPACKS_2 ? 8 : 3)) < 0)
		return rc;
	if ((rc = rdb_read_plain_len(r, &groups)) < 0)
		return rc;
	for (uint64_t i = 0; i < groups; i++)
		if ((rc = skip_stream_group(r, rdb_type)) < 0)
			return rc;
	return 0;
}

/* A module's opcodes (rdbLoadCheckModuleValue) up to its EOF opcode. */
int rdb_module_opcodes_skip(rdb_reader *r)
{
	for (;;) {
		uint64_t op;
		int rc = rdb_read_plain_len(r, &op);
		if (rc < 0)
			return rc;
		switch (op) {
		case 0: return 0;
		case 1: case 2: rc = skip_lens(r, 1); break;
		case 3: rc = skip_raw(r, 4); break;
		case 4: rc = skip_raw(r, 8); break;
		case 5: rc = rdb_skip_string(r); break;
		default: return rdb_corrupt(r, "unknown module opcode %llu", (unsigned long long)op);
		}
		if (rc < 0)
			return rc;
	}
}

int rdb_value_skip(rdb_reader *r, int rdb_type)
{
	switch (rdb_type_kind(rdb_type)) {
	case RDB_KIND_STREAM:
		return skip_stream(r, rdb_type);
	case RDB_KIND_MODULE: {
		if (rdb_type == RDB_TYPE_MODULE_PRE_GA)
			return RDB_E_UNSUPPORTED;
		int rc = skip_lens(r, 1);   /* the module id */
		return rc < 0 ? rc : rdb_module_opcodes_skip(r);
	}
	}
	return rdb_value_decode(r, rdb_type, NULL, NULL);
}

/* ---------------- DUMP payloads ---------------- */

int rdb_dump_verify(const void *p, size_t len, size_t *body_len)
{
	const uint8_t *b = p;
	if (len < 10)
		return SPW_E_CORRUPT;
	const uint8_t *f = b + len - 10;
	unsigned ver = f[0] | (unsigned)f[1] << 8;
	if (ver > RDB_VERSION)
		return SPW_E_CORRUPT;
	uint64_t crc = 0;
	for (int i = 7; i >= 0; i--)
		crc = crc << 8 | f[2 + i];
	if (rdb_crc64(0, b, len - 8) != crc)
		return SPW_E_CORRUPT;
	if (body_len)
		*body_len = len - 10;
	return 0;
}

/* The value is read from the whole payload, footer included, as Redis's rioInitWithBuffer does:
 * bytes left over after the value are not an error. */
int rdb_dump_decode(const void *p, size_t len, const rdb_visitor *v, void *ctx, int *rdb_type)
{
	rdb_reader r;
	uint8_t t;
	rdb_reader_init_buf(&r, p, len);
	int rc = rdb_read_u8(&r, &t);
	if (rc == 0) {
		*rdb_type = t;
		rc = rdb_value_decode(&r, t, v, ctx);
	}
	rdb_reader_fini(&r);
	return rc;
}
