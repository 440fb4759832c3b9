/*
 * rdb_file.c - an RDB file front to back: the header, the opcodes (AUX, SELECTDB, RESIZEDB,
 * EXPIRETIME(_MS), FREQ, IDLE, MODULE_AUX, FUNCTION2, EOF), each key and its value handed to the
 * caller, and the trailing CRC64.
 *
 * Design notes:
 *  1. The states are Redis's rdbLoadRioWithLoadingCtx: opcodes set what applies to the next key
 *     (its expiry; FREQ and IDLE are read and dropped: we keep no LRU/LFU), a value type byte
 *     starts a key, whose expiry is then reset. EOF ends; the checksum follows from version 5.
 *  2. The caller decides per key (its callback returns a visitor or NULL); a value we do not decode
 *     (stream, MODULE_2) is skipped by walking its structure, so the load goes on. A
 *     MODULE_PRE_GA value or a function library in the pre-GA format cannot be stepped over
 *     and ends the load, as Redis ends it.
 *  3. The CRC is that of every byte before the checksum; a zero checksum means the writer had
 *     rdbchecksum off and is not checked (as Redis).
 */
#include "enc/rdb_int.h"
#include "common/spw.h"

#include <stdlib.h>
#include <string.h>

static int load_header(rdb_reader *r, rdb_file_info *info)
{
	char h[10];
	int rc = rdb_read_raw(r, h, 9);
	if (rc < 0)
		return rc;
	h[9] = '\0';
	if (memcmp(h, "REDIS", 5) != 0)
		return rdb_corrupt(r, "wrong signature trying to load DB from file");
	int ver = 0;
	for (int i = 5; i < 9; i++) {
		if (h[i] < '0' || h[i] > '9')
			return rdb_corrupt(r, "bad RDB version '%s'", h + 5);
		ver = ver * 10 + (h[i] - '0');
	}
	if (ver < 1 || ver > RDB_VERSION)
		return rdb_corrupt(r, "can't handle RDB format version %d", ver);
	info->version = ver;
	return 0;
}

/* One key: its name, then its value decoded into the caller's visitor or skipped. */
static int load_key(rdb_reader *r, int type, int db, int64_t expire_ms, const rdb_file_ops *ops,
	void *ctx, rdb_file_info *info)
{
	const uint8_t *k;
	size_t klen;
	void *vctx = NULL;
	int rc = rdb_read_string(r, 1, &k, &klen);
	if (rc < 0)
		return rc;
	info->keys++;
	int kind = rdb_type_kind(type);
	if (kind == RDB_KIND_UNKNOWN)
		return rdb_corrupt(r, "unknown RDB value type %d", type);
	const rdb_visitor *v = ops->key ? ops->key(ctx, db, k, klen, type, expire_ms, &vctx) : NULL;
	int res;
	if (kind == RDB_KIND_STREAM || kind == RDB_KIND_MODULE) {
		if ((rc = rdb_value_skip(r, type)) == RDB_E_UNSUPPORTED)
			return rdb_corrupt(r, "a module value of the pre-GA format (type 6) cannot be skipped");
		res = RDB_E_UNSUPPORTED;
	} else if (v) {
		rc = rdb_value_decode(r, type, v, vctx);
		res = 0;
	} else {
		rc = rdb_value_skip(r, type);
		res = 1;
	}
	if (rc < 0)
		return rc;
	return ops->value_done ? ops->value_done(ctx, res) : 0;
}

/* MODULE_AUX: the module id, "when" (a UINT opcode and its value), then its opcodes. */
static int skip_module_aux(rdb_reader *r)
{
	uint64_t x, when_op;
	int rc;
	if ((rc = rdb_read_plain_len(r, &x)) < 0 || (rc = rdb_read_plain_len(r, &when_op)) < 0)
		return rc;
	if (when_op != 2)
		return rdb_corrupt(r, "bad when opcode %llu in MODULE_AUX", (unsigned long long)when_op);
	if ((rc = rdb_read_plain_len(r, &x)) < 0)
		return rc;
	return rdb_module_opcodes_skip(r);
}

static int load_trailer(rdb_reader *r, rdb_file_info *info)
{
	uint8_t b[8];
	if (info->version < 5)
		return 0;
	uint64_t want = rdb_reader_crc(r), got = 0;
	int rc = rdb_read_raw(r, b, 8);
	if (rc < 0)
		return rc;
	for (int i = 7; i >= 0; i--)
		got = got << 8 | b[i];
	if (got == 0)
		return 0;
	if (got != want)
		return rdb_corrupt(r, "wrong RDB checksum expected: (%llx) got: (%llx)",
			(unsigned long long)got, (unsigned long long)want);
	info->crc_checked = true;
	return 0;
}

/* An opcode that is not a value type: 1 at EOF, 0 to go on, or an error. */
static int load_opcode(rdb_reader *r, uint8_t op, int *db, int64_t *expire_ms, const rdb_file_ops *ops,
	void *ctx)
{
	uint8_t b[4];
	uint64_t x;
	const uint8_t *k, *v;
	size_t klen, vlen;
	int rc;
	switch (op) {
	case RDB_OPCODE_EOF:
		return 1;
	case RDB_OPCODE_EXPIRETIME:
		if ((rc = rdb_read_raw(r, b, 4)) < 0)
			return rc;
		*expire_ms = (int64_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			(uint32_t)b[3] << 24) * 1000;
		return 0;
	case RDB_OPCODE_EXPIRETIME_MS:
		return rdb_read_millis(r, expire_ms);
	case RDB_OPCODE_FREQ:
		return rdb_read_u8(r, b);
	case RDB_OPCODE_IDLE:
		return rdb_read_plain_len(r, &x);
	case RDB_OPCODE_SELECTDB:
		if ((rc = rdb_read_plain_len(r, &x)) < 0)
			return rc;
		if (x > INT32_MAX)
			return rdb_corrupt(r, "db number %llu out of range", (unsigned long long)x);
		*db = (int)x;
		return 0;
	case RDB_OPCODE_RESIZEDB:
		if ((rc = rdb_read_plain_len(r, &x)) < 0)
			return rc;
		return rdb_read_plain_len(r, &x);
	case RDB_OPCODE_AUX:
		if ((rc = rdb_read_string(r, 0, &k, &klen)) < 0 || (rc = rdb_read_string(r, 1, &v, &vlen)) < 0)
			return rc;
		return ops->aux ? ops->aux(ctx, k, klen, v, vlen) : 0;
	case RDB_OPCODE_MODULE_AUX:
		if ((rc = skip_module_aux(r)) < 0)
			return rc;
		if (ops->skipped)
			ops->skipped(ctx, "module aux data");
		return 0;
	case RDB_OPCODE_FUNCTION2:
		if ((rc = rdb_skip_string(r)) < 0)
			return rc;
		if (ops->skipped)
			ops->skipped(ctx, "function library (functions are not supported)");
		return 0;
	case RDB_OPCODE_FUNCTION_PRE_GA:
		return rdb_corrupt(r, "pre-release function format not supported");
	}
	return rdb_corrupt(r, "unknown RDB opcode %u", op);
}

int rdb_file_load(rdb_reader *r, const rdb_file_ops *ops, void *ctx, rdb_file_info *info)
{
	int db = 0, rc;
	int64_t expire_ms = -1;
	memset(info, 0, sizeof(*info));
	if ((rc = load_header(r, info)) < 0)
		return rc;
	for (;;) {
		uint8_t t;
		if ((rc = rdb_read_u8(r, &t)) < 0)
			return rc;
		if (t >= RDB_OPCODE_FUNCTION2) {
			rc = load_opcode(r, t, &db, &expire_ms, ops, ctx);
			if (rc < 0)
				return rc;
			if (rc == 1)
				break;
			continue;
		}
		if ((rc = load_key(r, t, db, expire_ms, ops, ctx, info)) < 0)
			return rc;
		expire_ms = -1;
	}
	rc = load_trailer(r, info);
	info->bytes = rdb_reader_offset(r);
	return rc;
}
