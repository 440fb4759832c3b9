/*
 * aof_read.c - the append-only file's reading side: one reader per file (its window, torn tails,
 * corruption), replay (the files merged by seq, aof.c note 3) and the offline check. The notes on
 * the format and the rules for torn tails and corruption are aof.c's and aof.h's.
 *
 * Sections: readers - replay - check.
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
	if (rem == 0) return 0;
	if (rem < AOF_REC_HDR) {
		reader_cut(r, off, "record header runs past the end");
		return 0;
	}
	int rc = reader_ensure(r, off, AOF_REC_HDR);
	if (rc) goto io;
	const uint8_t *p = r->buf + (off - r->boff);
	uint32_t len = get32(p);
	int kind = p[4];
	if (kind < HLOG_REDO_SET || kind > HLOG_REDO_FLUSHALL ||
	    (kind == HLOG_REDO_SET ? p[5] > HLOG_T_PART : p[5] != 0) || p[6] || p[7] ||
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
	while (rc == 0) {
		aof_reader *m = NULL;
		for (int i = 0; i < n; i++)
			if (rd[i].have && (!m || rd[i].rec.seq < m->rec.seq)) m = &rd[i];
		if (!m) break;
		const aof_rec *a = &m->rec;
		stats->records++;
		if (a->seq > stats->max_seq) stats->max_seq = a->seq;
		if (a->addr < cut) {
			stats->skipped++;
		} else {
			int r = apply(ctx, a);
			if (r) {
				if (why && whylen)
					snprintf(why, whylen, "%s: applying the record at offset %" PRIu64 ": %s",
					         m->path, m->off - m->rec_bytes, spw_strerror(r));
				rc = r < 0 ? r : -EIO;
				break;
			}
			stats->applied++;
		}
		stats->bytes_done += m->rec_bytes;
		int r = reader_next(m, why, whylen);
		if (r < 0) rc = r;
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
