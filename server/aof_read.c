/*
 * aof_read.c - the append-only file's reading side: one reader per file (its window, torn tails,
 * corruption), replay (the files merged by seq, aof.c note 3) and the offline check. The notes on
 * the format and the rules for torn tails and corruption are aof.c's and aof.h's.
 *
 * Sections: readers - replay - check.
 *
 * NOTES ON THE DESIGN
 *
 * 1. Groups (aof.h). A reader knows where the group it is in began (group_at); when the file ends
 *    inside a group (a torn record, or the end right after a record with AOF_F_GROUP_MORE), the
 *    torn tail starts at the group's first record: replay drops the group whole, and the check's
 *    fix truncates there. Replay gathers a group into a buffer of its own (the reader's window
 *    moves on under it) and applies it once its last record is read, in the merge's place of its
 *    first record: the head's seq comes first, and nobody else writes the group's parts between
 *    its records (the writer holds the collection's exclusive latch over the whole group), so a
 *    record of another file with a seq inside the group's range touches at most the head, which it
 *    then correctly overwrites after the group. (A FLUSHALL racing the group on another session is
 *    ordered on either side of it, as for any record: hlog.h, "durability".)
 * 2. The skip rule (addr < cut: in the checkpoint) stays per record, but never splits a group: a
 *    group is one reservation at the log's tail (one span), and a checkpoint's cut is a log
 *    address taken between reservations, so all of a group's addrs lie on one side of it.
 */
#include "server/aof_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/spw.h"

/* ---------------- readers ---------------- */

/* One file being read: a window buf = the file's bytes [boff, boff + len). */
typedef struct aof_reader {
	char path[AOF_PATH];
	int fd;
	uint64_t size;            /* at open: nothing writes the files while they are read */
	uint8_t *buf;
	size_t cap, len;
	uint64_t boff;
	uint64_t off;             /* the next record's offset */
	uint64_t records, first_seq, last_seq;
	bool seq_back;            /* a seq not above the one before it (note 3) */
	uint64_t seq_back_at;
	bool have;                /* rec holds the current record (pointers into buf) */
	aof_rec rec;
	uint64_t rec_bytes;
	bool torn;                /* reading stopped at a torn tail at torn_at */
	uint64_t torn_at;
	const char *torn_what;
	bool in_group;            /* the last record read had AOF_F_GROUP_MORE (note 1) */
	uint64_t group_at;        /* the offset of the current group's first record */
} aof_reader;

static void reader_close(aof_reader *r)
{
	if (r->fd >= 0) close(r->fd);
	r->fd = -1;
	free(r->buf);
	r->buf = NULL;
}

/* Make the file's bytes [off, off + n) available in buf (the caller checked off + n <= size). */
static int reader_ensure(aof_reader *r, uint64_t off, size_t n)
{
	if (off >= r->boff && off + n <= r->boff + r->len) return 0;
	size_t keep = 0;
	if (off >= r->boff && off < r->boff + r->len) {
		keep = (size_t)(r->boff + r->len - off);
		memmove(r->buf, r->buf + (off - r->boff), keep);
	} else if (lseek(r->fd, (off_t)off, SEEK_SET) < 0) {
		return -errno;
	}
	r->boff = off;
	r->len = keep;
	size_t want = n > AOF_READ_BUF ? n : AOF_READ_BUF;
	/* A window grown for a big record shrinks back once what it keeps and needs is small again. */
	if (r->cap < want || (r->cap > 4 * (size_t)AOF_READ_BUF && want == AOF_READ_BUF &&
	                      keep <= AOF_READ_BUF)) {
		uint8_t *nb = realloc(r->buf, want);
		if (!nb) return -ENOMEM;
		r->buf = nb;
		r->cap = want;
	}
	while (r->len < n) {
		size_t room = r->cap - r->len;
		uint64_t left = r->size - (r->boff + r->len);
		if (room > left) room = (size_t)left;
		if (room == 0) return -EIO;   /* the file shrank under us */
		ssize_t k = read(r->fd, r->buf + r->len, room);
		if (k < 0) {
			if (errno == EINTR) continue;
			return -errno;
		}
		if (k == 0) return -EIO;
		r->len += (size_t)k;
	}
	return 0;
}

/* Whether the file's bytes from off to its end are all zero. 1, 0, or -errno. */
static int reader_tail_zero(aof_reader *r, uint64_t off)
{
	while (off < r->size) {
		size_t n = (size_t)SPW_MIN(r->size - off, (uint64_t)AOF_READ_BUF);
		int rc = reader_ensure(r, off, n);
		if (rc) return rc;
		const uint8_t *p = r->buf + (off - r->boff);
		for (size_t i = 0; i < n; i++)
			if (p[i]) return 0;
		off += n;
	}
	return 1;
}

static int corrupt(char *why, size_t whylen, const aof_reader *r, uint64_t off, const char *what)
{
	if (why && whylen)
		snprintf(why, whylen, "%s: %s at offset %" PRIu64 " (%" PRIu64 " bytes follow)", r->path,
		         what, off, r->size - off);
	return SPW_E_CORRUPT;
}

static void reader_cut(aof_reader *r, uint64_t off, const char *what)
{
	r->torn = true;
	r->torn_at = off;
	r->torn_what = what;
	if (r->in_group) {   /* note 1: a cut group goes whole */
		r->torn_at = r->group_at;
		r->torn_what = off == r->size ? "a group cut by the end of the file"
		                              : "a torn record inside a group";
	}
}

/* Open path and check its header. 0: ready; 1: a torn header (nothing to read, torn is set);
 * SPW_E_CORRUPT or -errno with why. */
static int reader_open(aof_reader *r, const char *path, uint64_t gen, int worker, char *why,
                       size_t whylen)
{
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	snprintf(r->path, sizeof(r->path), "%s", path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (why && whylen) snprintf(why, whylen, "%s: open: %s", path, strerror(e));
		return -e;
	}
	r->fd = fd;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		if (why && whylen) snprintf(why, whylen, "%s: fstat: %s", path, strerror(e));
		return -e;
	}
	r->size = (uint64_t)st.st_size;
	const char *bad = NULL;
	bool garbled = false;     /* magic or checksum wrong: what a crash during the open leaves */
	if (r->size >= AOF_HDR_BYTES) {
		int rc = reader_ensure(r, 0, AOF_HDR_BYTES);
		if (rc) {
			if (why && whylen) snprintf(why, whylen, "%s: read: %s", path, strerror(-rc));
			return rc;
		}
		const uint8_t *h = r->buf;
		if (memcmp(h, AOF_MAGIC, 8) != 0) bad = "bad magic in the file header";
		else if (get64(h + 32) != XXH3_64bits(h, 32)) bad = "bad checksum in the file header";
		garbled = bad != NULL;
		if (bad) {
		} else if (get32(h + 8) != AOF_VERSION) bad = "unknown version in the file header";
		else if (get32(h + 12) != (uint32_t)worker || get64(h + 16) != gen)
			bad = "the file header names another worker or generation than the file name";
	}
	/* note 2: a file no longer than a header, whose header is garbled, was being created */
	if (r->size < AOF_HDR_BYTES || (garbled && r->size == AOF_HDR_BYTES)) {
		reader_cut(r, 0, "torn file header");
		return 1;
	}
	if (bad) {
		if (why && whylen) snprintf(why, whylen, "%s: %s", path, bad);
		return SPW_E_CORRUPT;
	}
	r->off = AOF_HDR_BYTES;
	return 0;
}

/* Read the next record into r->rec. 1: a record; 0: the end (r->torn says whether a torn tail was
 * cut there); SPW_E_CORRUPT or -errno with why. */
static int reader_next(aof_reader *r, char *why, size_t whylen)
{
	r->have = false;
	if (r->torn) return 0;
	uint64_t off = r->off, rem = r->size - off;
	if (rem == 0) {
		if (r->in_group) reader_cut(r, off, NULL);
		return 0;
	}
	if (rem < AOF_REC_HDR) {
		reader_cut(r, off, "record header runs past the end");
		return 0;
	}
	int rc = reader_ensure(r, off, AOF_REC_HDR);
	if (rc) goto io;
	const uint8_t *p = r->buf + (off - r->boff);
	uint32_t len = get32(p);
	int kind = p[4];
	bool rtype_ok = kind == HLOG_REDO_SET ? p[5] <= HLOG_T_PART
	              : kind == HLOG_REDO_DEL ? p[5] == 0 || p[5] == HLOG_T_PART : p[5] == 0;
	bool flags_ok = kind == HLOG_REDO_FLUSHALL ? p[6] == 0 : (p[6] & ~AOF_F_GROUP_MORE) == 0;
	if (kind < HLOG_REDO_SET || kind > HLOG_REDO_FLUSHALL || !rtype_ok || !flags_ok || p[7] ||
	    len < AOF_REC_FIXED) {
		if ((rc = reader_tail_zero(r, off)) < 0) goto io;
		if (rc == 1) {
			reader_cut(r, off, "zero bytes");
			return 0;
		}
		return corrupt(why, whylen, r, off, "bad record header");
	}
	if ((uint64_t)AOF_REC_HDR + len > rem) {
		reader_cut(r, off, "record runs past the end");
		return 0;
	}
	if ((rc = reader_ensure(r, off, AOF_REC_HDR + (size_t)len))) goto io;
	p = r->buf + (off - r->boff);
	if (get64(p + 8) != rec_hash(p, len)) {
		if ((uint64_t)AOF_REC_HDR + len == rem) {
			reader_cut(r, off, "bad checksum in the last record");
			return 0;
		}
		return corrupt(why, whylen, r, off, "bad record checksum");
	}
	const uint8_t *q = p + AOF_REC_HDR;
	uint32_t klen = get32(q + 24), vlen = get32(q + 28);
	if ((uint64_t)AOF_REC_FIXED + klen + vlen != len || (kind != HLOG_REDO_SET && vlen))
		return corrupt(why, whylen, r, off, "record lengths disagree");
	aof_rec *a = &r->rec;
	a->seq = get64(q);
	a->addr = get64(q + 8);
	a->expire_ms = (int64_t)get64(q + 16);
	a->kind = kind;
	a->rtype = p[5];
	a->group_more = (p[6] & AOF_F_GROUP_MORE) != 0;
	if (!r->in_group) r->group_at = off;
	r->in_group = a->group_more;
	a->klen = klen;
	a->vlen = vlen;
	a->key = q + AOF_REC_FIXED;
	a->val = q + AOF_REC_FIXED + klen;
	if (r->records && a->seq <= r->last_seq && !r->seq_back) {
		r->seq_back = true;
		r->seq_back_at = off;
	}
	if (!r->records) r->first_seq = a->seq;
	r->last_seq = a->seq;
	r->records++;
	r->rec_bytes = AOF_REC_HDR + (uint64_t)len;
	r->off = off + r->rec_bytes;
	r->have = true;
	return 1;
io:
	if (why && whylen)
		snprintf(why, whylen, "%s: read at offset %" PRIu64 ": %s", r->path, off, strerror(-rc));
	return rc;
}

/* ---------------- replay ---------------- */

int aof_rec_apply(hlog_session *s, const aof_rec *r)
{
	hlog_key k;
	if (r->kind == HLOG_REDO_FLUSHALL) return hlog_flush_all(s);
	aof_rec_key(&k, r);
	switch (r->kind) {
	case HLOG_REDO_SET: return hlog_upsert_typed(s, &k, r->val, r->vlen, r->expire_ms, r->rtype);
	case HLOG_REDO_DEL: return hlog_delete(s, &k);
	default: return SPW_E_CORRUPT;
	}
}

/* What one replay shares between its steps. */
typedef struct replay_run {
	uint64_t cut;
	int (*apply)(void *ctx, const aof_rec *r);
	void *ctx;
	aof_replay_stats *stats;
	char *why;
	size_t whylen;
	/* a group being gathered (note 1): its records, their bytes copied into data */
	struct grp_rec {
		aof_rec rec;          /* key and val set once the group is whole (data may move) */
		uint64_t off;         /* the record's offset in its file */
		size_t at;            /* its key's (then value's) bytes in data */
	} *grp;
	size_t grp_n, grp_cap;
	uint8_t *data;
	size_t data_len, data_cap;
} replay_run;

/* Apply (or skip, below the cut) one record read from m at offset off. 0 or the error. */
static int replay_rec(replay_run *x, const aof_reader *m, const aof_rec *a, uint64_t off)
{
	if (a->addr < x->cut) {
		x->stats->skipped++;
		return 0;
	}
	int r = x->apply(x->ctx, a);
	if (r) {
		if (x->why && x->whylen)
			snprintf(x->why, x->whylen, "%s: applying the record at offset %" PRIu64 ": %s",
			         m->path, off, spw_strerror(r));
		return r < 0 ? r : -EIO;
	}
	x->stats->applied++;
	return 0;
}

/* Copy m's current record into the group being gathered. 0 or -ENOMEM. */
static int group_add(replay_run *x, const aof_reader *m)
{
	const aof_rec *a = &m->rec;
	size_t bytes = (size_t)a->klen + a->vlen;
	if (x->grp_n == x->grp_cap) {
		size_t cap = x->grp_cap ? 2 * x->grp_cap : 16;
		struct grp_rec *g = realloc(x->grp, cap * sizeof(*g));
		if (!g) return -ENOMEM;
		x->grp = g;
		x->grp_cap = cap;
	}
	if (x->data_len + bytes > x->data_cap) {
		size_t cap = x->data_cap ? x->data_cap : AOF_READ_BUF;
		while (cap < x->data_len + bytes) cap *= 2;
		uint8_t *d = realloc(x->data, cap);
		if (!d) return -ENOMEM;
		x->data = d;
		x->data_cap = cap;
	}
	memcpy(x->data + x->data_len, a->key, a->klen);
	memcpy(x->data + x->data_len + a->klen, a->val, a->vlen);
	x->grp[x->grp_n++] = (struct grp_rec){ .rec = *a, .off = m->off - m->rec_bytes, .at = x->data_len };
	x->data_len += bytes;
	return 0;
}

/* m's current record opens a group (note 1): read the rest of it, then apply it whole, or drop it
 * when the file ends inside it. Leaves m on the record after the group. 0 or the error. */
static int replay_group(replay_run *x, aof_reader *m)
{
	aof_replay_stats *st = x->stats;
	x->grp_n = x->data_len = 0;
	for (;;) {
		int r = group_add(x, m);
		if (r) return r;
		bool more = m->rec.group_more;
		st->records++;
		if (m->rec.seq > st->max_seq) st->max_seq = m->rec.seq;
		st->bytes_done += m->rec_bytes;
		r = reader_next(m, x->why, x->whylen);
		if (r < 0) return r;
		if (!more) break;
		if (r == 0) {   /* the file ended inside the group: reader_cut put the tail at its start */
			st->groups_cut++;
			return 0;
		}
	}
	st->groups++;
	for (size_t i = 0; i < x->grp_n; i++) {
		aof_rec *a = &x->grp[i].rec;
		a->key = x->data + x->grp[i].at;
		a->val = a->key + a->klen;
		int r = replay_rec(x, m, a, x->grp[i].off);
		if (r) return r;
	}
	return 0;
}

/* The k-way merge of the n open readers by seq (aof.c note 3). 0 or the error. */
static int replay_merge(replay_run *x, aof_reader *rd, int n)
{
	for (;;) {
		aof_reader *m = NULL;
		for (int i = 0; i < n; i++)
			if (rd[i].have && (!m || rd[i].rec.seq < m->rec.seq)) m = &rd[i];
		if (!m) return 0;
		int r;
		if (m->rec.group_more) {
			r = replay_group(x, m);
		} else {
			const aof_rec *a = &m->rec;
			x->stats->records++;
			if (a->seq > x->stats->max_seq) x->stats->max_seq = a->seq;
			r = replay_rec(x, m, a, m->off - m->rec_bytes);
			if (r == 0) {
				x->stats->bytes_done += m->rec_bytes;
				r = reader_next(m, x->why, x->whylen);
			}
		}
		if (r < 0) return r;
	}
}

int aof_replay(const char *dir, uint64_t cut, int (*apply)(void *ctx, const aof_rec *r), void *ctx,
               aof_replay_stats *stats, char *why, size_t whylen)
{
	aof_replay_stats local;
	if (!stats) stats = &local;
	memset(stats, 0, sizeof(*stats));
	if (why && whylen) why[0] = '\0';
	char adir[PATH_MAX], path[AOF_PATH];
	aof_file *v;
	int rc = aof_dir_path(adir, sizeof(adir), dir);
	if (rc) return rc;
	int n = aof_dir_list(dir, false, &v);
	if (n < 0) {
		if (why && whylen) snprintf(why, whylen, "%s: %s", adir, strerror(-n));
		return n;
	}
	aof_reader *rd = calloc(n ? (size_t)n : 1, sizeof(*rd));
	if (!rd) {
		free(v);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) rd[i].fd = -1;
	rc = 0;
	int open_n = 0;
	for (int i = 0; i < n && rc == 0; i++, open_n++) {
		snprintf(path, sizeof(path), "%s/%s", adir, v[i].name);
		int r = reader_open(&rd[i], path, v[i].gen, v[i].worker, why, whylen);
		if (r < 0) rc = r;
		stats->files++;
		stats->bytes_total += rd[i].size;
	}
	for (int i = 0; i < n && rc == 0; i++) {
		stats->bytes_done += AOF_HDR_BYTES;
		int r = reader_next(&rd[i], why, whylen);
		if (r < 0) rc = r;
	}
	if (rc == 0) {
		replay_run x = { .cut = cut, .apply = apply, .ctx = ctx, .stats = stats, .why = why,
		                 .whylen = whylen };
		rc = replay_merge(&x, rd, n);
		free(x.grp);
		free(x.data);
	}
	for (int i = 0; i < open_n; i++) {
		aof_reader *r = &rd[i];
		if (rc == 0 && r->torn) {
			uint64_t dropped = r->size - r->torn_at;
			stats->torn_bytes += dropped;
			if (dropped)
				spw_log(SPW_LOG_WARNING, 0, "AOF %s: %s at offset %" PRIu64 ", %" PRIu64
				        " bytes dropped (a torn tail)", r->path, r->torn_what, r->torn_at, dropped);
		}
		if (rc == 0 && r->seq_back)
			spw_log(SPW_LOG_WARNING, 0, "AOF %s: seqs go back at offset %" PRIu64
			        " (replayed in seq order anyway)", r->path, r->seq_back_at);
		reader_close(r);
	}
	if (rc == 0) stats->bytes_done = stats->bytes_total;
	free(rd);
	free(v);
	return rc;
}

/* ---------------- check ---------------- */

int aof_check(const char *dir, bool fix, FILE *out)
{
	char adir[PATH_MAX], path[AOF_PATH], why[AOF_PATH + 256];
	aof_file *v;
	int rc = aof_dir_path(adir, sizeof(adir), dir);
	if (rc) {
		fprintf(out, "%s: %s\n", dir, strerror(-rc));
		return 1;
	}
	int n = aof_dir_list(dir, false, &v);
	if (n < 0) {
		fprintf(out, "%s: %s\n", adir, strerror(-n));
		return 1;
	}
	if (n == 0) fprintf(out, "%s: no AOF files\n", adir);
	int problems = 0;
	for (int i = 0; i < n; i++) {
		aof_reader r;
		snprintf(path, sizeof(path), "%s/%s", adir, v[i].name);
		why[0] = '\0';
		rc = reader_open(&r, path, v[i].gen, v[i].worker, why, sizeof(why));
		while (rc == 0 && (rc = reader_next(&r, why, sizeof(why))) == 1) rc = 0;
		if (rc > 0) rc = 0;   /* a torn header: printed below */
		if (rc < 0) {
			fprintf(out, "%s\n", why);
			problems++;
			reader_close(&r);
			continue;
		}
		fprintf(out, "%s: %" PRIu64 " records", path, r.records);
		if (r.records) fprintf(out, ", seq %" PRIu64 "..%" PRIu64, r.first_seq, r.last_seq);
		bool bad = false;
		if (r.seq_back) {
			fprintf(out, ", seqs go back at offset %" PRIu64, r.seq_back_at);
			bad = true;
		}
		if (r.torn && r.torn_at < r.size) {
			fprintf(out, ", torn tail at offset %" PRIu64 " (%s, %" PRIu64 " bytes)", r.torn_at,
			        r.torn_what, r.size - r.torn_at);
			if (!fix) {
				fprintf(out, ", not fixed (--fix-aof truncates it)");
				bad = true;
			} else {
				int fd = open(path, O_WRONLY | O_CLOEXEC);
				if (fd < 0 || ftruncate(fd, (off_t)r.torn_at) < 0 || fsync(fd) < 0) {
					fprintf(out, ", truncating failed: %s", strerror(errno));
					bad = true;
				} else {
					fprintf(out, ", truncated to %" PRIu64 " bytes", r.torn_at);
				}
				if (fd >= 0) close(fd);
			}
		}
		fprintf(out, bad ? "\n" : ", OK\n");
		problems += bad;
		reader_close(&r);
	}
	free(v);
	return problems;
}
