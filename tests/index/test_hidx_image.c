/*
 * test_hidx_image.c - index images: a save loads back entry for entry (into an index of any size,
 * which takes the image's geometry, doublings included), a damaged image is refused and leaves the
 * index empty, tentative claims come back free, the free list survives, a
 * save beside running writers loads, and hidx_entry_raise only ever raises.
 *
 * Hashes are crafted as in test_hidx.c (bucket = low bits, tag = bits 48-62); a 64-bucket index with
 * thousands of hashes gives long overflow chains. White-box checks go through hidx_int.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "index/hidx_int.h"

#define SMALL_BYTES (64 * 64)   /* 64 buckets */
#define NHASHES 5000

static uint64_t mk_hash(uint64_t b, uint64_t t, uint64_t noise)
{
	return (t << HIDX_TAG_SHIFT) | ((noise << 20) & 0x0000fffffff00000ULL) | b;
}

/* The i-th of many distinct (bucket, tag) pairs of a 64-bucket index. */
static uint64_t nth_hash(uint64_t i)
{
	return mk_hash(i % 64, 1 + i / 64, i);
}

/* The same pairs in an index of BIG_BUCKETS: still 64 chains, spread over the main array so that a
 * save copies them at different moments. */
#define BIG_BUCKETS (1ULL << 17)
static uint64_t spread_hash(uint64_t i)
{
	return mk_hash((i % 64) * (BIG_BUCKETS / 64), 1 + i / 64, i);
}

static hidx *open_index(uint64_t bytes)
{
	hidx *h = NULL;

	assert_int_equal(hidx_open(&h, bytes), 0);
	return h;
}

static void put(hidx *h, uint64_t hash, uint64_t addr)
{
	hidx_slot s;

	assert_int_equal(hidx_entry_find_or_create(h, hash, &s), 0);
	while (!hidx_slot_cas(&s, addr))
		;
}

static uint64_t addr_of(hidx *h, uint64_t hash)
{
	hidx_slot s;

	return hidx_entry_find(h, hash, &s) == 0 ? hidx_slot_addr(&s) : UINT64_MAX;
}

/* ---- whole-index views ---- */

typedef struct words {
	uint64_t *w;
	size_t n, cap;
} words;

static void collect(void *ctx, uint64_t word)
{
	words *v = ctx;

	if (v->n == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 1024;
		v->w = realloc(v->w, v->cap * sizeof(*v->w));
		assert_non_null(v->w);
	}
	v->w[v->n++] = word;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Every entry hidx_scan visits, sorted; words carry (tag, address), so equal arrays for two
 * indexes of one geometry mean equal contents up to slot positions. */
static words scan_all(hidx *h)
{
	words v = { 0 };
	uint64_t cursor = 0;

	do
		cursor = hidx_scan(h, cursor, 7, collect, &v);
	while (cursor);
	qsort(v.w, v.n, sizeof(*v.w), cmp_u64);
	return v;
}

/* Nonzero words anywhere in h, the main array and every overflow bucket handed out. */
static uint64_t nonzero_words(hidx *h)
{
	uint64_t n = 0;

	for (uint64_t i = 0; i <= hidx_cur(h)->ht_mask; i++)
		for (int j = 0; j < HIDX_BUCKET_ENTRIES + 1; j++)
			n += ((uint64_t *)&hidx_cur(h)->ht_buckets[i])[j] != 0;
	for (uint64_t idx = 1; idx < h->hx_ovf_next; idx++)
		for (int j = 0; j < HIDX_BUCKET_ENTRIES + 1; j++)
			n += ((uint64_t *)hidx_overflow_at(h, idx))[j] != 0;
	return n;
}

static void assert_empty(hidx *h)
{
	hidx_stats st;

	assert_int_equal(nonzero_words(h), 0);
	hidx_stats_get(h, &st);
	assert_int_equal(st.overflow_buckets, 0);
	assert_int_equal(h->hx_ovf_next, 1);
	assert_int_equal(h->hx_ovf_npages, 0);
}

/* At most one word per tag in every chain (hidx.c invariant 1). */
static void assert_tags_unique(hidx *h)
{
	for (uint64_t i = 0; i <= hidx_cur(h)->ht_mask; i++) {
		uint64_t tags[4096];
		size_t n = 0;

		for (hidx_bucket *b = &hidx_cur(h)->ht_buckets[i]; b; b = hidx_bucket_next(h, b, memory_order_acquire))
			for (int j = 0; j < HIDX_BUCKET_ENTRIES; j++) {
				uint64_t w = atomic_load(&b->hb_entry[j]);

				if (w) {
					assert_true(n < SPW_ARRAY_LEN(tags));
					tags[n++] = w & HIDX_TAG_MASK;
				}
			}
		qsort(tags, n, sizeof(*tags), cmp_u64);
		for (size_t k = 1; k < n; k++)
			assert_true(tags[k] != tags[k - 1]);
	}
}

/* ---- files ---- */

static int tmp_fd(void)
{
	char path[] = "/tmp/test_hidx_image.XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

static int save(hidx *h, hidx_image_info *info)
{
	char why[256] = "";
	int fd = tmp_fd();
	int rc = hidx_image_save(h, fd, 3, info, why, sizeof(why));

	if (rc)
		fail_msg("save: %d %s", rc, why);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static int load(hidx *h, int fd, hidx_image_info *info, char *why, size_t whylen)
{
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return hidx_image_load(h, fd, info, why, whylen);
}

static void flip_byte(int fd, off_t at)
{
	unsigned char c;

	assert_int_equal(pread(fd, &c, 1, at), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, at), 1);
}

static hidx *filled_small(void)
{
	hidx *h = open_index(SMALL_BYTES);

	for (uint64_t i = 0; i < NHASHES; i++)
		put(h, nth_hash(i), 1000 + i);
	return h;
}

/* ---- tests ---- */

static void test_saved_image_loads_back_entry_for_entry(void **state)
{
	(void)state;
	hidx *a = filled_small(), *b = open_index(SMALL_BYTES);
	hidx_image_info si, li;
	hidx_stats sa, sb;
	char why[256] = "";
	int fd = save(a, &si);
	off_t size = lseek(fd, 0, SEEK_END);
	unsigned char *file = malloc((size_t)size);

	assert_int_equal(si.buckets, 64);
	assert_true(si.overflow_buckets > 64);   /* the chains really overflowed */
	assert_int_equal(si.file_bytes, (uint64_t)size);
	assert_int_equal(pread(fd, file, (size_t)size, 0), size);
	assert_int_equal(si.checksum, XXH3_64bits(file, (size_t)size));
	free(file);

	assert_int_equal(load(b, fd, &li, why, sizeof(why)), 0);
	assert_memory_equal(&si, &li, sizeof(si));
	assert_int_equal(lseek(fd, 0, SEEK_CUR), size);   /* fd left just past the image */

	words wa = scan_all(a), wb = scan_all(b);
	assert_int_equal(wa.n, NHASHES);
	assert_int_equal(wb.n, wa.n);
	assert_memory_equal(wa.w, wb.w, wa.n * sizeof(*wa.w));
	for (uint64_t i = 0; i < NHASHES; i++)
		assert_int_equal(addr_of(b, nth_hash(i)), 1000 + i);
	hidx_stats_get(a, &sa);
	hidx_stats_get(b, &sb);
	assert_int_equal(sb.overflow_buckets, sa.overflow_buckets);
	assert_tags_unique(b);

	/* the loaded index is an ordinary one: it grows and publishes */
	put(b, nth_hash(NHASHES), 7);
	assert_int_equal(addr_of(b, nth_hash(NHASHES)), 7);
	free(wa.w);
	free(wb.w);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_image_followed_by_other_bytes_loads_and_stops_at_its_end(void **state)
{
	(void)state;
	hidx *a = filled_small(), *b = open_index(SMALL_BYTES);
	hidx_image_info si;
	char why[256] = "", tail[] = "after the image";
	int fd = save(a, &si);

	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)si.file_bytes);
	assert_int_equal(write(fd, tail, sizeof(tail)), (ssize_t)sizeof(tail));
	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	assert_int_equal(lseek(fd, 0, SEEK_CUR), (off_t)si.file_bytes);
	assert_int_equal(addr_of(b, nth_hash(17)), 1017);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_empty_index_round_trips(void **state)
{
	(void)state;
	hidx *a = open_index(1 << 20), *b = open_index(1 << 20);
	hidx_image_info si;
	char why[256] = "";
	int fd = save(a, &si);

	assert_int_equal(si.overflow_buckets, 0);
	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	assert_empty(b);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

/* A restart with another --index: the image's geometry wins (hidx_reshape). */
static void test_image_of_another_size_loads_with_its_geometry(void **state)
{
	(void)state;
	hidx *a = filled_small(), *b = open_index(2 * SMALL_BYTES);
	hidx_stats st;
	char why[256] = "";
	int fd = save(a, NULL);

	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	hidx_stats_get(b, &st);
	assert_int_equal(st.buckets, 64);
	assert_int_equal(st.grown, 0);
	for (uint64_t i = 0; i < NHASHES; i++)
		assert_int_equal(addr_of(b, nth_hash(i)), 1000 + i);
	assert_tags_unique(b);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

/* An index that doubled twice saves its doublings: the loaded one finds every entry in the buckets
 * the grown geometry puts it in (the low tag bits pick them), whatever size it was opened with. */
static void test_grown_index_image_loads_with_its_doublings(void **state)
{
	(void)state;
	hidx *a = filled_small(), *b = open_index(16 * SMALL_BYTES);
	hidx_stats sa, sb;
	char why[256] = "";

	int fd0 = save(a, NULL);
	unsigned char ver[4];
	assert_int_equal(pread(fd0, ver, 4, 8), 4);
	assert_int_equal(ver[0], 1);   /* never grew: version 1, which older builds read */
	close(fd0);
	assert_int_equal(hidx_grow(a, NULL, NULL), 0);
	assert_int_equal(hidx_grow(a, NULL, NULL), 0);
	int fd = save(a, NULL);
	assert_int_equal(pread(fd, ver, 4, 8), 4);
	assert_int_equal(ver[0], 2);   /* doubled: version 2, which they refuse */
	assert_int_equal(pread(fd, ver, 4, 12), 4);
	assert_int_equal(ver[0], 2);   /* the doublings */
	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	hidx_stats_get(a, &sa);
	hidx_stats_get(b, &sb);
	assert_int_equal(sa.buckets, 256);
	assert_int_equal(sb.buckets, 256);
	assert_int_equal(sb.grown, 2);
	assert_int_equal(sb.overflow_buckets, sa.overflow_buckets);
	for (uint64_t i = 0; i < NHASHES; i++)
		assert_int_equal(addr_of(b, nth_hash(i)), 1000 + i);
	words wa = scan_all(a), wb = scan_all(b);
	assert_int_equal(wa.n, NHASHES);
	assert_int_equal(wb.n, NHASHES);
	assert_memory_equal(wa.w, wb.w, wa.n * sizeof(*wa.w));
	free(wa.w);
	free(wb.w);
	assert_tags_unique(b);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_not_an_image_is_einval(void **state)
{
	(void)state;
	hidx *b = open_index(SMALL_BYTES);
	char why[256] = "", junk[100];
	int fd = tmp_fd();

	memset(junk, 'x', sizeof(junk));
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not an index image"));
	assert_empty(b);
	close(fd);
	hidx_close(b);
}

static void test_flipped_byte_in_the_frame_is_corrupt_and_leaves_the_index_empty(void **state)
{
	(void)state;
	hidx *a = filled_small();
	hidx_image_info si;
	int fd = save(a, &si);

	/* several places: the frame's header, its middle, its last block */
	const off_t at[] = { 41, 40 + (off_t)(si.file_bytes - 56) / 2, (off_t)si.file_bytes - 16 - 3 };
	for (size_t k = 0; k < SPW_ARRAY_LEN(at); k++) {
		hidx *b = open_index(SMALL_BYTES);
		char why[256] = "";

		flip_byte(fd, at[k]);
		assert_int_equal(load(b, fd, NULL, why, sizeof(why)), SPW_E_CORRUPT);
		assert_non_null(strstr(why, "index image"));
		assert_empty(b);
		flip_byte(fd, at[k]);   /* back as it was: it loads again */
		assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
		hidx_close(b);
	}
	close(fd);
	hidx_close(a);
}

static void test_flipped_byte_in_the_header_or_trailer_is_corrupt(void **state)
{
	(void)state;
	hidx *a = filled_small();
	hidx_image_info si;
	int fd = save(a, &si);
	/* reserved, main buckets (a damaged count is not a geometry mismatch), overflow buckets,
	 * uncompressed bytes, and the two trailer checksums */
	const off_t at[] = { 13, 16, 25, 33, (off_t)si.file_bytes - 16, (off_t)si.file_bytes - 1 };

	for (size_t k = 0; k < SPW_ARRAY_LEN(at); k++) {
		hidx *b = open_index(SMALL_BYTES);
		char why[256] = "";

		flip_byte(fd, at[k]);
		assert_int_equal(load(b, fd, NULL, why, sizeof(why)), SPW_E_CORRUPT);
		assert_non_null(strstr(why, "checksum mismatch"));
		assert_empty(b);
		flip_byte(fd, at[k]);
		hidx_close(b);
	}
	close(fd);
	hidx_close(a);
}

static void test_truncated_image_is_corrupt(void **state)
{
	(void)state;
	hidx *a = filled_small();
	hidx_image_info si;
	int fd = save(a, &si);
	/* longest first: ftruncate would pad a longer length with zeros */
	const off_t lens[] = { (off_t)si.file_bytes - 1, (off_t)si.file_bytes - 16, 200, 40, 30 };

	for (size_t k = 0; k < SPW_ARRAY_LEN(lens); k++) {
		hidx *b = open_index(SMALL_BYTES);
		char why[256] = "";

		assert_int_equal(ftruncate(fd, lens[k]), 0);
		assert_int_equal(load(b, fd, NULL, why, sizeof(why)), SPW_E_CORRUPT);
		assert_non_null(strstr(why, "truncated"));
		assert_empty(b);
		hidx_close(b);
	}
	close(fd);
	hidx_close(a);
}

static void test_load_into_a_used_index_is_refused(void **state)
{
	(void)state;
	hidx *a = filled_small(), *b = filled_small();
	char why[256] = "";
	int fd = save(a, NULL);

	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(addr_of(b, nth_hash(3)), 1003);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_tentative_entries_come_back_free(void **state)
{
	(void)state;
	hidx *a = open_index(SMALL_BYTES), *b = open_index(SMALL_BYTES);
	const uint64_t t5 = 5ULL << HIDX_TAG_SHIFT;
	char why[256] = "";

	put(a, mk_hash(3, 4, 0), 99);
	/* a claim in progress, as step c of the insert protocol leaves it */
	atomic_store(&hidx_cur(a)->ht_buckets[3].hb_entry[1], HIDX_TENTATIVE | t5);
	int fd = save(a, NULL);

	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	assert_int_equal(atomic_load(&hidx_cur(b)->ht_buckets[3].hb_entry[1]), 0);
	assert_int_equal(addr_of(b, mk_hash(3, 4, 0)), 99);
	assert_int_equal(hidx_entry_find(b, mk_hash(3, 5, 0), &(hidx_slot){ 0 }), -ENOENT);
	assert_int_equal(nonzero_words(b), 1);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_two_entries_of_one_tag_load_as_the_newer(void **state)
{
	(void)state;
	hidx *a = open_index(SMALL_BYTES), *b = open_index(SMALL_BYTES);
	const uint64_t t9 = 9ULL << HIDX_TAG_SHIFT;
	char why[256] = "";

	/* what a save sees when an entry is cleared after it was copied and created again in a slot
	 * the save had not reached: two confirmed words of one tag, the later one newer */
	for (uint64_t t = 1; t <= 8; t++)
		put(a, mk_hash(2, 100 + t, 0), 50 + t);       /* fills bucket 2, starts its overflow */
	atomic_store(&hidx_cur(a)->ht_buckets[2].hb_entry[0], t9 | 10);
	atomic_store(&hidx_overflow_at(a, 1)->hb_entry[3], t9 | 20);
	int fd = save(a, NULL);

	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	assert_int_equal(addr_of(b, mk_hash(2, 9, 0)), 20);
	assert_int_equal(atomic_load(&hidx_cur(b)->ht_buckets[2].hb_entry[0]), 0);
	assert_tags_unique(b);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_free_list_buckets_come_back_free(void **state)
{
	(void)state;
	hidx *a = open_index(SMALL_BYTES), *b = open_index(SMALL_BYTES);
	hidx_stats sa, sb;
	char why[256] = "";

	/* two handed-out buckets that lost their link race: the free list is 2 -> 1, and bucket 2's
	 * overflow word holds the free list's link, not a chain's */
	assert_int_equal(hidx_overflow_reserve(a, 2), 0);
	hidx_overflow_free(a, 1);
	hidx_overflow_free(a, 2);
	assert_int_equal(atomic_load(&hidx_overflow_at(a, 2)->hb_overflow), 1);
	/* the eighth entry of bucket 6 needs an overflow bucket: the free list's head, 2 */
	for (uint64_t t = 1; t <= 8; t++)
		put(a, mk_hash(6, t, 0), t);
	hidx_stats_get(a, &sa);
	assert_int_equal(sa.overflow_buckets, 1);
	int fd = save(a, NULL);

	assert_int_equal(load(b, fd, NULL, why, sizeof(why)), 0);
	hidx_stats_get(b, &sb);
	assert_int_equal(sb.overflow_buckets, 1);
	assert_int_equal(b->hx_ovf_free_count, 1);
	/* the next overflow bucket b hands out is the free one, not a fresh index */
	for (uint64_t t = 9; t <= 15; t++)
		put(b, mk_hash(6, t, 0), t);
	assert_int_equal(b->hx_ovf_next, 3);
	assert_int_equal(b->hx_ovf_free_count, 0);
	for (uint64_t t = 1; t <= 15; t++)
		assert_int_equal(addr_of(b, mk_hash(6, t, 0)), t);
	close(fd);
	hidx_close(a);
	hidx_close(b);
}

static void test_raise_creates_raises_and_never_lowers(void **state)
{
	(void)state;
	hidx *h = open_index(SMALL_BYTES);
	const uint64_t k = mk_hash(11, 3, 0);

	assert_int_equal(hidx_entry_raise(h, k, 500), 0);   /* no entry yet: created at 500 */
	assert_int_equal(addr_of(h, k), 500);
	assert_int_equal(hidx_entry_raise(h, k, 400), 0);
	assert_int_equal(addr_of(h, k), 500);
	assert_int_equal(hidx_entry_raise(h, k, 500), 0);
	assert_int_equal(addr_of(h, k), 500);
	assert_int_equal(hidx_entry_raise(h, k, 900), 0);
	assert_int_equal(addr_of(h, k), 900);
	/* the tag stays, and other tags of the bucket are not touched */
	assert_int_equal(hidx_entry_raise(h, mk_hash(11, 4, 0), 10), 0);
	assert_int_equal(addr_of(h, k), 900);
	assert_int_equal(addr_of(h, mk_hash(11, 4, 0)), 10);
	hidx_close(h);
}

/* ---- concurrency ---- */

#define NRAISERS 4
#define FUZZY_ROUNDS 20

typedef struct raiser {
	hidx *h;
	_Atomic uint64_t *next_addr;
	_Atomic bool *stop;
	unsigned id;
} raiser;

static void *raise_thread(void *arg)
{
	raiser *r = arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL * (r->id + 1);

	while (!atomic_load(r->stop)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* mostly raises of known keys, some new keys that grow chains during the save */
		uint64_t i = (x >> 8) % (2 * NHASHES);
		uint64_t a = atomic_fetch_add(r->next_addr, 1);

		assert_int_equal(hidx_entry_raise(r->h, spread_hash(i), a), 0);
	}
	return NULL;
}

static void *clear_thread(void *arg)
{
	raiser *r = arg;

	while (!atomic_load(r->stop)) {
		hidx_clear_below(r->h, atomic_load(r->next_addr) - 2000);
		sched_yield();
	}
	return NULL;
}

/* Save rounds beside threads that publish (and, with clears, free and re-create entries); every
 * image must load, hold one word per tag in a chain, and, without clears, every entry the index had
 * when the save began at its address then or higher (invariant 4 of hidx_image.c). */
static void fuzzy_rounds(bool with_clears)
{
	_Atomic uint64_t next_addr = 1000000;
	_Atomic bool stop;
	raiser *rs = calloc(NRAISERS, sizeof(*rs));
	pthread_t th[NRAISERS + 1];
	uint64_t during = 0;   /* raises that ran while a save did */

	assert_non_null(rs);
	/* At least FUZZY_ROUNDS, and on until a save has run beside the writers (on a loaded machine
	 * the writers may not get the CPU while the first saves run). */
	for (int round = 0; round < FUZZY_ROUNDS || (during == 0 && round < 20 * FUZZY_ROUNDS); round++) {
		hidx *a = open_index(BIG_BUCKETS * HIDX_BUCKET_BYTES);
		hidx *b = open_index(BIG_BUCKETS * HIDX_BUCKET_BYTES);
		uint64_t *before = malloc(NHASHES * sizeof(*before));
		char why[256] = "";

		for (uint64_t i = 0; i < NHASHES; i++)
			put(a, spread_hash(i), 1000 + i);
		for (uint64_t i = 0; i < NHASHES; i++)
			before[i] = addr_of(a, spread_hash(i));
		atomic_store(&stop, false);
		for (unsigned t = 0; t < NRAISERS; t++) {
			rs[t] = (raiser){ .h = a, .next_addr = &next_addr, .stop = &stop, .id = t + 7 * round };
			assert_int_equal(pthread_create(&th[t], NULL, raise_thread, &rs[t]), 0);
		}
		if (with_clears)
			assert_int_equal(pthread_create(&th[NRAISERS], NULL, clear_thread, &rs[0]), 0);
		/* let the writers get going, so that the save runs beside them */
		for (uint64_t go = atomic_load(&next_addr) + 2000; atomic_load(&next_addr) < go;)
			sched_yield();
		uint64_t started = atomic_load(&next_addr);
		int fd = save(a, NULL);
		during += atomic_load(&next_addr) - started;
		atomic_store(&stop, true);
		for (unsigned t = 0; t < NRAISERS + (unsigned)with_clears; t++)
			pthread_join(th[t], NULL);

		if (load(b, fd, NULL, why, sizeof(why)) != 0)
			fail_msg("round %d: %s", round, why);
		assert_tags_unique(b);
		if (!with_clears)
			for (uint64_t i = 0; i < NHASHES; i++)
				assert_true(addr_of(b, spread_hash(i)) >= before[i]);
		/* the loaded allocator is whole: growing every chain further works */
		for (uint64_t i = 2 * NHASHES; i < 2 * NHASHES + 2000; i++)
			assert_int_equal(hidx_entry_raise(b, spread_hash(i), 1), 0);
		assert_tags_unique(b);
		free(before);
		close(fd);
		hidx_close(a);
		hidx_close(b);
	}
	free(rs);
	assert_true(during > 0);   /* the saves really ran beside the writers */
}

static void test_save_beside_publishers_loads_with_every_older_entry(void **state)
{
	(void)state;
	fuzzy_rounds(false);
}

static void test_save_beside_publishers_and_clears_loads_one_entry_per_tag(void **state)
{
	(void)state;
	fuzzy_rounds(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_saved_image_loads_back_entry_for_entry),
		cmocka_unit_test(test_image_followed_by_other_bytes_loads_and_stops_at_its_end),
		cmocka_unit_test(test_empty_index_round_trips),
		cmocka_unit_test(test_image_of_another_size_loads_with_its_geometry),
		cmocka_unit_test(test_grown_index_image_loads_with_its_doublings),
		cmocka_unit_test(test_not_an_image_is_einval),
		cmocka_unit_test(test_flipped_byte_in_the_frame_is_corrupt_and_leaves_the_index_empty),
		cmocka_unit_test(test_flipped_byte_in_the_header_or_trailer_is_corrupt),
		cmocka_unit_test(test_truncated_image_is_corrupt),
		cmocka_unit_test(test_load_into_a_used_index_is_refused),
		cmocka_unit_test(test_tentative_entries_come_back_free),
		cmocka_unit_test(test_two_entries_of_one_tag_load_as_the_newer),
		cmocka_unit_test(test_free_list_buckets_come_back_free),
		cmocka_unit_test(test_raise_creates_raises_and_never_lowers),
		cmocka_unit_test(test_save_beside_publishers_loads_with_every_older_entry),
		cmocka_unit_test(test_save_beside_publishers_and_clears_loads_one_entry_per_tag),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
