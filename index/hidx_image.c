/*
 * hidx_image.c - index images: the hash index streamed to a file and read back (checkpoints).
 *
 * FORMAT (every integer little-endian; versions 1 and 2, one layout)
 *
 *   header, 40 bytes
 *      0  magic "SPWIDX01"
 *      8  u32 version (2 for an index that doubled, else 1: the format is the same)
 *     12  u32 doublings: the top bits of a bucket number that come from the tag (hidx.c note
 *         "Growth"; 0 in an image of an index that never grew, and in images before growth)
 *     16  u64 main buckets B
 *     24  u64 overflow buckets N (1-based indices 1..N)
 *     32  u64 uncompressed bytes, always (B + N) * 64
 *   one zstd frame of the uncompressed bytes: main buckets 0..B-1, then overflow buckets 1..N, each
 *     the 64 bytes of hidx_bucket (7 entry words, then the overflow word: 0 or an index in 1..N)
 *   trailer, 16 bytes
 *      0  u64 XXH3-64 of the frame's bytes
 *      8  u64 XXH3-64 of the header's 40 bytes
 *
 * The checkpoint's meta file records the XXH3-64 of the whole file (hidx_image_info.checksum).
 *
 * INVARIANTS OF AN IMAGE (what hidx_image_save guarantees and hidx_image_load checks or restores)
 *  1. No word carries the tentative bit (a claim in progress is written as a free slot).
 *  2. Every overflow word is 0 or an index in 1..N, and the chains that start at the main buckets
 *     never share a bucket, so they end and have no cycles.
 *  3. Each bucket a chain of the image reaches was published in the live index, linked the same way.
 *     Overflow buckets no chain reaches are written as zeros; the load gives them to the free list.
 *  4. An entry that existed when hidx_image_save was called and did not change while it ran is in the
 *     image, in its chain, with its address. An entry created, moved or cleared during the save may
 *     be in the image older, newer or not at all: the caller repairs those from the log written since
 *     the save began (hidx_entry_raise), so it must read that address before calling the save.
 *  5. A chain may hold two confirmed entries with one tag: an entry cleared (hidx_clear_below) after
 *     the save copied it, and created again in a slot the save had not reached. The load keeps the one
 *     with the higher address, the newer one as the log only appends, and frees the other, so the
 *     loaded index keeps hidx.c's invariant 1 (one confirmed entry per bucket and tag).
 *
 * HOW THE SAVE KEEPS 2 AND 3 WHILE OTHER THREADS PUBLISH
 *   N is hx_ovf_next - 1, read under the allocator lock before anything is copied: the header goes
 *   out first, and every bucket up to N has its page (hidx.c invariant 5). Pass 1 streams the main
 *   array; for each bucket it follows the live chain with acquire loads, as any reader, and marks the
 *   overflow buckets it reaches. Those are published, and a published link never changes (hidx.c
 *   invariant 3), so each has one parent. Pass 2 streams buckets 1..N: a marked bucket as it is now,
 *   an unmarked one as zeros. Copying every overflow bucket as it is would be wrong: a bucket on the
 *   allocator's free list keeps the free list's link in its overflow word, which would put a free
 *   bucket, or one published in another chain meanwhile, into a chain of the image. A link to a bucket
 *   beyond N (allocated during the save) is written as 0. A marked bucket may link to an unmarked one
 *   (linked after pass 1 went by): that target is written as zeros and has no other parent, so the
 *   link stays. Either way only entries created during the save are lost (invariant 4).
 *
 * The save holds hx_grow_one: no growth starts under it (hidx_grow waits for it to end), so the table
 * it walks stays current and unfrozen even though the saving thread is outside any epoch. Clears
 * (hx_grow_mu) still run beside it, as they always did (invariant 5).
 *
 * HOW THE LOAD TREATS h
 *   It decompresses straight into h (main array, then overflow pages it maps through
 *   hidx_overflow_reserve), then checks the trailer's checksums, the length and invariants 1-2, and
 *   restores 5; on any failure it returns h to empty (hidx_reset), so the caller can treat h as never
 *   touched. The image's geometry wins: a fresh h of another size is reshaped to it first
 *   (hidx_reshape), so a restart with another --index keeps the image. A header whose geometry is
 *   impossible is still read to the end (into a scratch buffer), so that a damaged header is told
 *   apart from a wrong one.
 *
 * Sections: byte order and helpers, save, load, raise.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include "index/hidx_int.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "index images are little-endian and copy buckets as they lie in memory: add byte swaps here"
#endif

#define HIDX_IMAGE_MAGIC "SPWIDX01"
/* Version 2 is an image of an index that doubled (the doublings at byte 12): a build that reads
 * only version 1 refuses it rather than put its entries in the wrong buckets. An index that never
 * grew still writes version 1. */
#define HIDX_IMAGE_VERSION 2u
#define HIDX_IMAGE_VERSION_UNGROWN 1u
#define HIDX_IMAGE_HEADER_BYTES 40
#define HIDX_IMAGE_TRAILER_BYTES 16
/* Buckets copied per compression call: 1 MiB of words. */
/* A header naming more main buckets than this (4 TiB) is taken as damaged, not mapped. */
#define HIDX_IMAGE_MAX_BUCKETS (1ULL << 36)
#define HIDX_IMAGE_CHUNK_BUCKETS ((1u << 20) / HIDX_BUCKET_BYTES)

/* ---- byte order and helpers -------------------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int image_fail(char *why, size_t whylen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int image_fail(char *why, size_t whylen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Write all of buf, resuming after signals and short writes. 0 or -errno. */
static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read up to len bytes, fewer only at end of file. The count or -errno. */
static ssize_t read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static uint64_t bucket_count(const hidx *h) { return hidx_cur(h)->ht_mask + 1; }

/* ---- save -------------------------------------------------------------------------------------- */

typedef struct image_writer {
	int fd;
	ZSTD_CCtx *cctx;
	void *zbuf;                /* compressed output */
	size_t zcap;
	XXH3_state_t *frame_xxh;   /* the frame's bytes */
	XXH3_state_t *file_xxh;    /* every byte written */
	uint64_t file_bytes;
	char *why;
	size_t whylen;
} image_writer;

static int writer_put(image_writer *w, const void *buf, size_t len, bool frame)
{
	int rc = write_all(w->fd, buf, len);

	if (rc)
		return image_fail(w->why, w->whylen, rc, "index image: write: %s", strerror(-rc));
	if (frame)
		XXH3_64bits_update(w->frame_xxh, buf, len);
	XXH3_64bits_update(w->file_xxh, buf, len);
	w->file_bytes += len;
	return 0;
}

/* Compress len bytes (end: and finish the frame), writing what zstd gives back. 0 or -errno. */
static int writer_compress(image_writer *w, const void *src, size_t len, bool end)
{
	ZSTD_inBuffer in = { src, len, 0 };
	const ZSTD_EndDirective mode = end ? ZSTD_e_end : ZSTD_e_continue;

	for (;;) {
		ZSTD_outBuffer out = { w->zbuf, w->zcap, 0 };
		size_t left = ZSTD_compressStream2(w->cctx, &out, &in, mode);
		int rc;

		if (ZSTD_isError(left))
			return image_fail(w->why, w->whylen, -EIO, "index image: zstd: %s",
					  ZSTD_getErrorName(left));
		if (out.pos && (rc = writer_put(w, w->zbuf, out.pos, true)))
			return rc;
		if (end ? left == 0 : in.pos == in.size)
			return 0;
	}
}

static inline void bitmap_set(uint64_t *bm, uint64_t i) { bm[i >> 6] |= 1ULL << (i & 63); }
static inline bool bitmap_test(const uint64_t *bm, uint64_t i) { return bm[i >> 6] >> (i & 63) & 1; }

/* One bucket as the image holds it: entries with relaxed loads (the image is fuzzy anyway), tentative
 * claims as free slots, and a link beyond the image's overflow count as the end of the chain. */
static uint64_t copy_bucket(hidx_bucket *dst, hidx_bucket *src, uint64_t novf)
{
	uint64_t link;

	for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
		uint64_t w = atomic_load_explicit(&src->hb_entry[j], memory_order_relaxed);

		atomic_store_explicit(&dst->hb_entry[j], (w & HIDX_TENTATIVE) ? 0 : w, memory_order_relaxed);
	}
	/* acquire: pass 1 follows this link into a page that the link's publisher mapped */
	link = atomic_load_explicit(&src->hb_overflow, memory_order_acquire);
	if (link > novf)
		link = 0;
	atomic_store_explicit(&dst->hb_overflow, link, memory_order_relaxed);
	return link;
}

static int image_save_locked(hidx *h, int fd, int zstd_level, hidx_image_info *out, char *why,
			     size_t whylen)
{
	hidx_table *t = hidx_cur(h);
	const uint64_t buckets = t->ht_mask + 1;
	unsigned char hdr[HIDX_IMAGE_HEADER_BYTES], trl[HIDX_IMAGE_TRAILER_BYTES];
	image_writer w = { .fd = fd, .why = why, .whylen = whylen };
	hidx_bucket *chunk = NULL;
	uint64_t *marked = NULL;
	uint64_t novf, raw;
	size_t zr;
	int rc = -ENOMEM;

	pthread_mutex_lock(&h->hx_ovf_lock);
	novf = h->hx_ovf_next - 1;
	pthread_mutex_unlock(&h->hx_ovf_lock);
	raw = (buckets + novf) * HIDX_BUCKET_BYTES;

	w.cctx = ZSTD_createCCtx();
	w.zcap = ZSTD_CStreamOutSize();
	w.zbuf = malloc(w.zcap);
	w.frame_xxh = XXH3_createState();
	w.file_xxh = XXH3_createState();
	chunk = aligned_alloc(HIDX_BUCKET_BYTES, HIDX_IMAGE_CHUNK_BUCKETS * sizeof(hidx_bucket));
	marked = calloc(novf / 64 + 1, sizeof(*marked));
	if (!w.cctx || !w.zbuf || !w.frame_xxh || !w.file_xxh || !chunk || !marked) {
		rc = image_fail(why, whylen, -ENOMEM, "index image: out of memory");
		goto out;
	}
	zr = ZSTD_CCtx_setParameter(w.cctx, ZSTD_c_compressionLevel, zstd_level);
	if (!ZSTD_isError(zr))
		zr = ZSTD_CCtx_setPledgedSrcSize(w.cctx, raw);
	if (ZSTD_isError(zr)) {
		rc = image_fail(why, whylen, -EINVAL, "index image: zstd level %d: %s", zstd_level,
				ZSTD_getErrorName(zr));
		goto out;
	}
	XXH3_64bits_reset(w.frame_xxh);
	XXH3_64bits_reset(w.file_xxh);

	memcpy(hdr, HIDX_IMAGE_MAGIC, 8);
	put_u32(hdr + 8, t->ht_grown ? HIDX_IMAGE_VERSION : HIDX_IMAGE_VERSION_UNGROWN);
	put_u32(hdr + 12, t->ht_grown);
	put_u64(hdr + 16, buckets);
	put_u64(hdr + 24, novf);
	put_u64(hdr + 32, raw);
	if ((rc = writer_put(&w, hdr, sizeof(hdr), false)))
		goto out;

	/* pass 1: the main array, marking the overflow buckets its chains reach now */
	for (uint64_t i = 0; i < buckets; i += HIDX_IMAGE_CHUNK_BUCKETS) {
		uint64_t n = SPW_MIN(buckets - i, (uint64_t)HIDX_IMAGE_CHUNK_BUCKETS);

		for (uint64_t k = 0; k < n; k++) {
			uint64_t idx = copy_bucket(&chunk[k], &t->ht_buckets[i + k], novf);

			/* Chains share no bucket (hidx.c invariant 3), so a marked index ends the walk
			 * only if something is badly wrong; it keeps the walk finite regardless. */
			while (idx && idx <= novf && !bitmap_test(marked, idx)) {
				bitmap_set(marked, idx);
				idx = atomic_load_explicit(&hidx_overflow_at(h, idx)->hb_overflow,
							   memory_order_acquire);
			}
		}
		if ((rc = writer_compress(&w, chunk, n * sizeof(hidx_bucket), false)))
			goto out;
	}
	/* pass 2: overflow buckets 1..novf, the unmarked ones as zeros (see the notes above) */
	for (uint64_t i = 1; i <= novf; i += HIDX_IMAGE_CHUNK_BUCKETS) {
		uint64_t n = SPW_MIN(novf + 1 - i, (uint64_t)HIDX_IMAGE_CHUNK_BUCKETS);

		for (uint64_t k = 0; k < n; k++) {
			if (bitmap_test(marked, i + k))
				copy_bucket(&chunk[k], hidx_overflow_at(h, i + k), novf);
			else
				memset(&chunk[k], 0, sizeof(chunk[k]));
		}
		if ((rc = writer_compress(&w, chunk, n * sizeof(hidx_bucket), false)))
			goto out;
	}
	if ((rc = writer_compress(&w, NULL, 0, true)))
		goto out;

	put_u64(trl, XXH3_64bits_digest(w.frame_xxh));
	put_u64(trl + 8, XXH3_64bits(hdr, sizeof(hdr)));
	if ((rc = writer_put(&w, trl, sizeof(trl), false)))
		goto out;
	if (out) {
		out->buckets = buckets;
		out->overflow_buckets = novf;
		out->file_bytes = w.file_bytes;
		out->checksum = XXH3_64bits_digest(w.file_xxh);
	}
	rc = 0;
out:
	free(marked);
	free(chunk);
	XXH3_freeState(w.file_xxh);
	XXH3_freeState(w.frame_xxh);
	free(w.zbuf);
	ZSTD_freeCCtx(w.cctx);
	return rc;
}

/* ---- load -------------------------------------------------------------------------------------- */

/* Where decompressed bytes go: h's main array, then its overflow pages one by one; past those, or for
 * an image that does not fit h, a scratch buffer that only counts them. */
typedef struct image_sink {
	hidx *h;              /* NULL: everything goes to scratch */
	uint64_t novf;
	uint64_t region;      /* 0 = main array, p + 1 = overflow page p, ~0 = scratch */
	char *dst;
	size_t len, pos;
	char *scratch;
	size_t scratch_len;
	uint64_t total;       /* bytes decompressed */
} image_sink;

static void sink_next(image_sink *s)
{
	uint64_t page = s->region;   /* the page after region (region 0 is the main array) */

	if (s->h && s->region != UINT64_MAX && page * HIDX_OVF_PAGE_BUCKETS < s->novf) {
		uint64_t n = SPW_MIN(s->novf - page * HIDX_OVF_PAGE_BUCKETS, HIDX_OVF_PAGE_BUCKETS);

		s->region++;
		s->dst = (char *)hidx_overflow_at(s->h, page * HIDX_OVF_PAGE_BUCKETS + 1);
		s->len = n * HIDX_BUCKET_BYTES;
	} else {
		s->region = UINT64_MAX;
		s->dst = s->scratch;
		s->len = s->scratch_len;
	}
	s->pos = 0;
}

/* The per-chain part of the structure check: invariants 1 and 2, and 5 restored. */
typedef struct chain_entry {
	uint64_t tag, addr;
	_Atomic uint64_t *slot;
} chain_entry;

static int chain_entry_cmp(const void *a, const void *b)
{
	const chain_entry *x = a, *y = b;

	return x->tag < y->tag ? -1 : x->tag > y->tag;
}

/* Check every chain of a freshly decompressed h and free the overflow buckets none reaches.
 * 0, -ENOMEM, or SPW_E_CORRUPT with why. */
static int image_check_chains(hidx *h, uint64_t novf, char *why, size_t whylen)
{
	const uint64_t buckets = bucket_count(h);
	uint64_t *seen = calloc(novf / 64 + 1, sizeof(*seen));
	chain_entry *es = NULL;
	size_t ecap = 0;
	int rc = 0;

	if (!seen)
		return image_fail(why, whylen, -ENOMEM, "index image: out of memory");
	for (uint64_t i = 0; i < buckets && !rc; i++) {
		hidx_bucket *b = &hidx_cur(h)->ht_buckets[i];
		uint64_t idx = 0;
		size_t n = 0;

		for (;;) {
			uint64_t link;

			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t w = atomic_load_explicit(&b->hb_entry[j], memory_order_relaxed);

				if (!w)
					continue;
				if (w & HIDX_TENTATIVE) {
					rc = image_fail(why, whylen, SPW_E_CORRUPT, "index image: main bucket "
							"%llu's chain holds a tentative entry",
							(unsigned long long)i);
					goto out;
				}
				if (n == ecap) {
					size_t cap = ecap ? 2 * ecap : 64;
					chain_entry *ne = realloc(es, cap * sizeof(*es));

					if (!ne) {
						rc = image_fail(why, whylen, -ENOMEM, "index image: out of memory");
						goto out;
					}
					es = ne;
					ecap = cap;
				}
				es[n++] = (chain_entry){ w & HIDX_TAG_MASK, w & HIDX_ADDR_MASK, &b->hb_entry[j] };
			}
			link = atomic_load_explicit(&b->hb_overflow, memory_order_relaxed);
			if (!link)
				break;
			if (link > novf || bitmap_test(seen, link)) {
				rc = image_fail(why, whylen, SPW_E_CORRUPT, "index image: %s bucket %llu links to "
						"overflow bucket %llu, %s", idx ? "overflow" : "main",
						(unsigned long long)(idx ? idx : i), (unsigned long long)link,
						link > novf ? "beyond the image's overflow buckets"
							    : "which another bucket links to");
				goto out;
			}
			bitmap_set(seen, link);
			idx = link;
			b = hidx_overflow_at(h, idx);
		}
		/* invariant 5: of entries sharing a tag keep the highest address */
		if (n > 1) {
			qsort(es, n, sizeof(*es), chain_entry_cmp);
			for (size_t k = 1; k < n; k++) {
				if (es[k].tag != es[k - 1].tag)
					continue;
				if (es[k].addr < es[k - 1].addr) {   /* carry the keeper forward */
					chain_entry t = es[k];
					es[k] = es[k - 1];
					es[k - 1] = t;
				}
				atomic_store_explicit(es[k - 1].slot, 0, memory_order_relaxed);
			}
		}
	}
	/* invariant 3: buckets no chain reaches are free (zeros, as the save wrote them) */
	for (uint64_t idx = novf; idx >= 1; idx--) {
		if (!bitmap_test(seen, idx)) {
			memset(hidx_overflow_at(h, idx), 0, sizeof(hidx_bucket));
			hidx_overflow_free(h, idx);
		}
	}
out:
	free(es);
	free(seen);
	return rc;
}

/* The load's state, shared by its steps (header, frame, trailer, checks). */
typedef struct image_load {
	hidx *h;
	int fd;
	char *why;
	size_t whylen;
	unsigned char hdr[HIDX_IMAGE_HEADER_BYTES], trl[HIDX_IMAGE_TRAILER_BYTES];
	image_sink sink;
	ZSTD_DCtx *dctx;
	XXH3_state_t *frame_xxh, *file_xxh;
	void *ibuf;
	size_t icap;
	ZSTD_inBuffer in;
	uint64_t buckets, hbuckets, novf, raw, file_bytes;
	bool fits, touched;
	bool reshaped;                     /* h took the header's geometry (undone on failure) */
	uint64_t orig_buckets;
	uint32_t orig_grown;
} image_load;

/* The header: magic, version, geometry; an image that fits h decompresses into h, any other into
 * scratch, so that the trailer can say whether the header itself is damaged. */
static int load_header(image_load *L)
{
	ssize_t got = read_full(L->fd, L->hdr, sizeof(L->hdr));
	if (got < 0)
		return image_fail(L->why, L->whylen, (int)got, "index image: read: %s", strerror((int)-got));
	if (got < 8 || memcmp(L->hdr, HIDX_IMAGE_MAGIC, 8) != 0)
		return image_fail(L->why, L->whylen, -EINVAL, "index image: not an index image (no magic %s)",
				  HIDX_IMAGE_MAGIC);
	if (got < (ssize_t)sizeof(L->hdr))
		return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: truncated header (%zd of "
				  "%zu bytes)", got, sizeof(L->hdr));
	uint32_t version = get_u32(L->hdr + 8);
	if (version != HIDX_IMAGE_VERSION && version != HIDX_IMAGE_VERSION_UNGROWN)
		return image_fail(L->why, L->whylen, -EINVAL, "index image: version %u, this build reads "
				  "%u and %u", version, HIDX_IMAGE_VERSION_UNGROWN, HIDX_IMAGE_VERSION);
	XXH3_64bits_update(L->file_xxh, L->hdr, sizeof(L->hdr));
	L->file_bytes = sizeof(L->hdr);
	L->hbuckets = get_u64(L->hdr + 16);
	L->novf = get_u64(L->hdr + 24);
	L->raw = get_u64(L->hdr + 32);
	/* Byte 12 is read in every version: images from before growth have 0 there (it was reserved),
	 * and the first builds that grew wrote their doublings there under version 1. */
	uint32_t grown = get_u32(L->hdr + 12);
	/* The image's geometry wins over h's (a restart with another --index). One that no index can
	 * have, or a length that does not add up, is left to the checks after the frame. */
	if (L->novf <= HIDX_OVF_MAX_BUCKETS && L->hbuckets <= HIDX_IMAGE_MAX_BUCKETS &&
	    L->raw == (L->hbuckets + L->novf) * HIDX_BUCKET_BYTES &&
	    (L->hbuckets != L->buckets || grown != hidx_cur(L->h)->ht_grown)) {
		L->orig_buckets = L->buckets;
		L->orig_grown = hidx_cur(L->h)->ht_grown;
		int rc = hidx_reshape(L->h, L->hbuckets, grown);
		if (rc == -ENOMEM)
			return image_fail(L->why, L->whylen, rc, "index image: no memory for %llu main buckets",
					  (unsigned long long)L->hbuckets);
		if (rc == 0) {
			L->buckets = L->hbuckets;
			L->reshaped = true;
		}
	}
	L->fits = L->hbuckets == L->buckets && L->novf <= HIDX_OVF_MAX_BUCKETS &&
		  L->raw == (L->buckets + L->novf) * HIDX_BUCKET_BYTES;
	if (!L->fits) {
		L->sink.region = UINT64_MAX;
		L->sink.dst = L->sink.scratch;
		L->sink.len = L->sink.scratch_len;
		return 0;
	}
	int rc = hidx_overflow_reserve(L->h, L->novf);
	L->touched = true;
	if (rc)
		return image_fail(L->why, L->whylen, rc, "index image: mapping %llu overflow buckets: %s",
				  (unsigned long long)L->novf, strerror(-rc));
	L->sink.h = L->h;
	L->sink.novf = L->novf;
	L->sink.dst = (char *)hidx_cur(L->h)->ht_buckets;
	L->sink.len = hidx_cur(L->h)->ht_bytes;
	return 0;
}

/* The zstd frame, into the sink, summed as it is read. */
static int load_frame(image_load *L)
{
	ZSTD_inBuffer *in = &L->in;
	bool out_full = false;
	size_t zr = 1;
	while (zr != 0) {
		/* A call that filled its output may hold more output back: call again before reading. */
		if (in->pos == in->size && !out_full) {
			ssize_t got = read_full(L->fd, L->ibuf, L->icap);
			if (got < 0)
				return image_fail(L->why, L->whylen, (int)got, "index image: read: %s",
						  strerror((int)-got));
			if (got == 0)
				return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: truncated in the "
						  "zstd frame (%llu bytes read)", (unsigned long long)L->file_bytes);
			in->size = (size_t)got;
			in->pos = 0;
		}
		if (L->sink.pos == L->sink.len)
			sink_next(&L->sink);
		ZSTD_outBuffer ob = { L->sink.dst + L->sink.pos, L->sink.len - L->sink.pos, 0 };
		size_t before = in->pos;
		zr = ZSTD_decompressStream(L->dctx, &ob, in);
		if (ZSTD_isError(zr))
			return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: zstd: %s (after %llu "
					  "bytes)", ZSTD_getErrorName(zr), (unsigned long long)L->file_bytes);
		XXH3_64bits_update(L->frame_xxh, (const char *)L->ibuf + before, in->pos - before);
		XXH3_64bits_update(L->file_xxh, (const char *)L->ibuf + before, in->pos - before);
		L->file_bytes += in->pos - before;
		out_full = ob.pos == ob.size;
		L->sink.pos += ob.pos;
		L->sink.total += ob.pos;
	}
	return 0;
}

/* The trailer: what the last read brought past the frame, then the rest. */
static int load_trailer(image_load *L)
{
	ZSTD_inBuffer *in = &L->in;
	size_t left = SPW_MIN(in->size - in->pos, sizeof(L->trl));
	memcpy(L->trl, (const char *)L->ibuf + in->pos, left);
	in->pos += left;
	if (left < sizeof(L->trl)) {
		ssize_t got = read_full(L->fd, L->trl + left, sizeof(L->trl) - left);
		if (got < 0)
			return image_fail(L->why, L->whylen, (int)got, "index image: read: %s",
					  strerror((int)-got));
		if ((size_t)got < sizeof(L->trl) - left)
			return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: truncated trailer");
	} else if (in->pos < in->size) {
		/* Read past the image: leave fd just after it, as a caller reading on expects. A pipe
		 * cannot seek back; nothing here depends on it. */
		(void)lseek(L->fd, -(off_t)(in->size - in->pos), SEEK_CUR);
	}
	XXH3_64bits_update(L->file_xxh, L->trl, sizeof(L->trl));
	L->file_bytes += sizeof(L->trl);
	return 0;
}

/* The checksums, then the geometry and the length, then the chains (invariants 3-5). */
static int load_verify(image_load *L)
{
	uint64_t frame_sum = XXH3_64bits_digest(L->frame_xxh);
	uint64_t header_sum = XXH3_64bits(L->hdr, sizeof(L->hdr));
	if (get_u64(L->trl + 8) != header_sum)
		return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: header checksum mismatch "
				  "(file says %016llx, header gives %016llx)",
				  (unsigned long long)get_u64(L->trl + 8), (unsigned long long)header_sum);
	if (get_u64(L->trl) != frame_sum)
		return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: checksum mismatch (file "
				  "says %016llx, data gives %016llx)", (unsigned long long)get_u64(L->trl),
				  (unsigned long long)frame_sum);
	if (L->hbuckets != L->buckets)
		return image_fail(L->why, L->whylen, -EINVAL, "index image: geometry mismatch (the image has "
				  "%llu main buckets, the index %llu)", (unsigned long long)L->hbuckets,
				  (unsigned long long)L->buckets);
	if (!L->fits || L->sink.total != L->raw)
		return image_fail(L->why, L->whylen, SPW_E_CORRUPT, "index image: length mismatch (header "
				  "says %llu bytes for %llu + %llu buckets, the frame gives %llu)",
				  (unsigned long long)L->raw, (unsigned long long)L->hbuckets,
				  (unsigned long long)L->novf, (unsigned long long)L->sink.total);
	return image_check_chains(L->h, L->novf, L->why, L->whylen);
}

int hidx_image_save(hidx *h, int fd, int zstd_level, hidx_image_info *out, char *why, size_t whylen)
{
	pthread_mutex_lock(&h->hx_grow_one);
	int rc = image_save_locked(h, fd, zstd_level, out, why, whylen);
	pthread_mutex_unlock(&h->hx_grow_one);
	return rc;
}

int hidx_image_load(hidx *h, int fd, hidx_image_info *out, char *why, size_t whylen)
{
	image_load L = { .h = h, .fd = fd, .why = why, .whylen = whylen, .buckets = bucket_count(h) };
	bool fresh;
	int rc;

	L.dctx = ZSTD_createDCtx();
	L.frame_xxh = XXH3_createState();
	L.file_xxh = XXH3_createState();
	L.icap = ZSTD_DStreamInSize();
	L.ibuf = malloc(L.icap);
	L.in = (ZSTD_inBuffer){ L.ibuf, 0, 0 };
	L.sink.scratch_len = 1u << 17;
	L.sink.scratch = malloc(L.sink.scratch_len);
	if (!L.dctx || !L.frame_xxh || !L.file_xxh || !L.ibuf || !L.sink.scratch) {
		rc = image_fail(why, whylen, -ENOMEM, "index image: out of memory");
		goto out;
	}
	pthread_mutex_lock(&h->hx_ovf_lock);
	fresh = h->hx_ovf_next == 1;
	pthread_mutex_unlock(&h->hx_ovf_lock);
	if (!fresh) {
		rc = image_fail(why, whylen, -EINVAL, "index image: the index to load into is in use");
		goto out;
	}
	XXH3_64bits_reset(L.frame_xxh);
	XXH3_64bits_reset(L.file_xxh);
	if ((rc = load_header(&L)) || (rc = load_frame(&L)) || (rc = load_trailer(&L)) ||
	    (rc = load_verify(&L)))
		goto out;
	if (out) {
		out->buckets = L.buckets;
		out->overflow_buckets = L.novf;
		out->file_bytes = L.file_bytes;
		out->checksum = XXH3_64bits_digest(L.file_xxh);
	}
out:
	if (rc && L.touched)
		hidx_reset(h);
	/* A failed load leaves h as it was opened, geometry too (the header may have been damaged). */
	if (rc && L.reshaped && hidx_reshape(h, L.orig_buckets, L.orig_grown) < 0)
		hidx_reset(h);   /* no memory to go back: keep the image's geometry, empty */
	free(L.sink.scratch);
	free(L.ibuf);
	XXH3_freeState(L.file_xxh);
	XXH3_freeState(L.frame_xxh);
	ZSTD_freeDCtx(L.dctx);
	return rc;
}

/* ---- raise ------------------------------------------------------------------------------------- */

int hidx_entry_raise(hidx *h, uint64_t hash, uint64_t addr)
{
	const uint64_t tag = hidx_tag_of(hash);
	hidx_slot s;

	addr &= HIDX_ADDR_MASK;
	for (;;) {
		int rc = hidx_entry_find_or_create(h, hash, &s);

		if (rc)
			return rc;
		while (hidx_slot_addr(&s) < addr) {
			if (hidx_slot_cas(&s, addr))
				return 0;
			/* hidx.c's rule: a slot freed or taken by another tag means find it again */
			if ((s.word & (HIDX_TAG_MASK | HIDX_TENTATIVE)) != tag)
				break;
		}
		if (hidx_slot_addr(&s) >= addr && (s.word & (HIDX_TAG_MASK | HIDX_TENTATIVE)) == tag)
			return 0;
	}
}
