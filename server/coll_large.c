/*
 * coll_large.c - the large layout of hashes and sets (docs/ARCHITECTURE.md "Large collections"):
 * a head record under the user key (coll/coll.h coll_head) and bucket parts under internal keys
 * (coll/bucket.h). server/coll.c stays the small path and hands a command here when it meets a
 * large head (COLL_E_LARGE) or when its edit made a payload that must become large
 * (COLL_E_CONVERT).
 *
 * Design notes:
 *  1. Every command works unchanged: the read path hands the command's own small-layout code a
 *     coll_view of a listpack assembled from buckets. A point command names its members (a
 *     coll_hint: argv[first], argv[first + step], ...) and gets the listpack of just their
 *     buckets, which holds every entry the command can see or change; HLEN and SCARD get the
 *     head's count (view->large); every other command gets the whole collection (whole read:
 *     every bucket prefetched in one wave, then assembled in bucket order).
 *  2. A point write runs the command's edit on that sub-listpack, then routes the edit's output
 *     back into the same buckets by hash (a new member's bucket is among them, since its
 *     argument named it); the count moves by the entries the output gained or lost. A write that
 *     leaves the count and every length as they were and changes one bucket is a plain upsert of
 *     that bucket; anything else is one hlog_group_rmw: the new head (count, mbytes, level,
 *     split) plus the changed buckets. A bucket emptied is deleted (an absent bucket reads empty).
 *  3. The head plan of every write checks that the head is still the bytes this command read
 *     (same cid, count, level, split pointer, mbytes), else it answers COLL_E_RESTART and the
 *     command runs again from the top (coll.c's loop); it keeps the head's expiry. Writers of a
 *     large collection hold its exclusive latch (coll/latch.h), readers the shared one, so only
 *     commands that take no latch (DEL, EXPIRE, RENAME, SET) can change it meanwhile.
 *  4. Latches are never held across a park: any HLOG_PENDING releases the latch and parks the
 *     client; the re-run finds what was fetched in the session's fetch cache.
 *  5. Linear hashing splits one bucket per write, the one at the split pointer, when a bucket the
 *     write touched passes 2 x BUCKET_MAX (note 11) (the split bucket is read when the write did not
 *     touch it). No merges in v1: a collection stays large until it is empty (then its head is
 *     deleted; its parts are garbage for compaction: the part_live hook below says dead).
 *  6. Whole writes (every command that is not a point write: SPOP with a count, the STORE commands on
 *     a large destination, HSET of many pairs is NOT one: it is a point write) run the edit on
 *     the whole assembled payload and write the result afresh by the rule of a new collection:
 *     a hashtable-encoded payload over coll-record-max becomes a large collection with a NEW cid
 *     (the old parts die with the old head), anything else a small record. The conversion of a
 *     small collection is the same path with the small record as the expected old head: the edit
 *     runs again on a copy of it, under the latch, and the group's head plan checks that the
 *     small record's bytes are unchanged.
 *  8. HSCAN of a large hash walks buckets in increasing number, whole buckets per call (about
 *     COUNT entries' worth), the cursor being the next bucket and 0 at the end. Buckets only split,
 *     never merge, and a split moves a member from bucket s up to s + 2^level, so a member's
 *     bucket number only grows: a member present throughout is either in a bucket at or past the
 *     cursor or was in the bucket a call answered, so it is returned at least once. The cursor
 *     is tagged (COLL_SCAN_LARGE): one without the tag is a small hashtable hash's position from
 *     before its conversion, and restarts from bucket 0 (an untagged bucket number would skip
 *     the buckets below it, whose fields the small scan had not reached).
 *  7. A cid belongs to one user key for its life (RENAME, COPY, DUMP read a large collection
 *     whole and write a small record: coll_large_flat), which is what makes liveness decidable
 *     from the registry part: cid|R names the owner; a part is live iff the owner's head is large
 *     with that cid (coll_part_live, compaction's hook). The registry of the key "" is an empty
 *     value, never a tombstone: a missing registry says dead for every part of the collection.
 *  9. SRANDMEMBER and SPOP without a count are point operations (COLL_HINT_RANDOM): the read
 *     takes random buckets, the i-th a hash of (cursor, i) mod the bucket count, until one is
 *     non-empty, at most as many as there are buckets (RANDOM_PROBES at least), and the command
 *     picks a member of that bucket. Each probe is a fresh random bucket, not the next one:
 *     with "the next non-empty bucket", the bucket after a run of empty ones is picked in
 *     proportion to the run, so SPOP drains exactly those and the runs grow until every pick
 *     is a long walk. A dense collection costs one or two probes. Buckets never merge (note 5),
 *     so a set drained by SPOP gets sparse, and a pick costs buckets / non-empty buckets probes
 *     then; the bound keeps the probes to what the whole read they avoid costs (a read of
 *     every bucket), and they all miss only when nearly every bucket is empty (odds about
 *     e^-(non-empty buckets)): then the collection is read whole. SPOP then removes its pick as SREM would, by a point
 *     write that names the member through coll_edit.hint_member (the pick is in no argv slot).
 *     The pick is not uniform over members: a member of a small bucket is likelier than one of a
 *     big bucket (buckets hold from 0 to 2 x BUCKET_MAX bytes), and a member after empty
 *     buckets likelier still. Redis's own dictGetFairRandomKey is not uniform either (a random
 *     bucket, then a random entry of its chain); what holds is that every member can come out.
 * 10. One touched bucket, the common case (one member named, SPOP's pick, a random probe), has
 *     fewer copies: the bucket is read into t_sub and IS the view and the old value (no t_old,
 *     no assembly; coll_bucket_views), and a planned edit (coll_write_lp: HSET of one pair,
 *     HDEL, HINCRBY, SADD/SREM of one member) is patched over it where it lies (coll_bucket_patches)
 *     rather than run into another buffer and compared back; the output needs no routing (every
 *     entry is that bucket's). So a count-changing write copies the bucket twice (read, written
 *     into the group's span) where it copied it four times. Several buckets are sorted and
 *     deduplicated (buckets_unique) so that routing finds a bucket by bisection. Whether the group
 *     could change the head and the bucket in place: docs/ARCHITECTURE.md "Large collections:
 *     what v1 builds" (not built).
 * 11. Buckets are smaller than coll-record-max: BUCKET_MAX = a quarter of it (1 KiB at the
 *     default 4096), half of that each at conversion, split past 2 x BUCKET_MAX, so 0.5-2 KiB
 *     where they were 2-8 KiB. Every count-changing write copies its whole bucket to the tail,
 *     and the tail's fresh frames cost page faults and clear_page per 4 KiB, which made the
 *     bucket's bytes most of a write's CPU (docs/BENCHMARKS.md appendix Q: 33 -> 9 CPU s per 1M
 *     HSETs of new fields, -P 16, from 4 KiB to 1 KiB); a point read walks a quarter of the
 *     entries too. coll-record-max stays the conversion threshold (a hashtable payload past it
 *     becomes large), so which collections are large does not change; only whole reads read
 *     about four times as many (smaller) parts.
 */
#include "server/server_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "coll/bucket.h"
#include "coll/coll.h"
#include "coll/latch.h"
#include "coll/listpack.h"

static const uint8_t lp_empty[LP_EMPTY_BYTES] = { LP_EMPTY_BYTES, 0, 0, 0, 0, 0, LP_EOF };

#define RECORD_MAX ((size_t)__atomic_load_n(&g_cfg.coll_record_max, __ATOMIC_RELAXED))
/* Note 11: a bucket's nominal size, a quarter of coll-record-max (64 bytes at least). */
#define BUCKET_MAX (RECORD_MAX / 4 > 64 ? RECORD_MAX / 4 : (size_t)64)

/* ---------------- per-thread buffers and ids ---------------- */

/* old: the touched buckets' old values back to back; sub: their entries assembled; route: the
 * new buckets; out: a patched edit's output; two: a split's halves; flat: a small record. */
static __thread lp_buf t_old, t_sub, t_route, t_out, t_two, t_flat;
static __thread uint64_t *t_bs;        /* touched bucket numbers */
static __thread size_t *t_oo, *t_no;   /* their old / new offsets (n + 1) */
static __thread size_t *t_oc;          /* their records' capacities (0: none; coll_part_cap) */
static __thread size_t t_rcap;         /* the last bucket read's record length */
static __thread hlog_group_part *t_parts;
static __thread uint8_t (*t_keys)[COLL_BUCKET_KEY_BYTES];
static __thread size_t t_cap;
static __thread uint64_t t_rng;
static __thread lp_buf t_small;        /* the conversion's copy of the small record */
static __thread const uint8_t *t_oldp; /* where the touched buckets' old values lie: t_old.p, or
                                        * t_sub.p for one bucket (note 10) */
static __thread bool t_keyed;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;
static pthread_key_t bufs_key;

#define BUF_KEEP (1u << 20)
/* Note 9: bucket reads a random pick makes at least before it reads the collection whole. */
#define RANDOM_PROBES 32

static lp_buf *t_bufs_of(int i)
{
	lp_buf *const all[] = { &t_old, &t_sub, &t_route, &t_out, &t_two, &t_flat, &t_small };
	return i < (int)(sizeof(all) / sizeof(all[0])) ? all[i] : NULL;
}

/* The thread's buffers go when it exits (the key's destructor runs on it). */
static void bufs_destroy(void *unused)
{
	(void)unused;
	for (int i = 0; t_bufs_of(i); i++)
		lp_buf_free(t_bufs_of(i));
	free(t_parts);   /* the arrays' one table (arrays_reserve) */
	t_bs = NULL;
	t_oo = t_no = NULL;
	t_parts = NULL;
	t_keys = NULL;
	t_cap = 0;
}

static void bufs_key_create(void) { pthread_key_create(&bufs_key, bufs_destroy); }

/* At the start of every large operation: the key set once per thread, and the buffers a big
 * collection grew past BUF_KEEP freed (so one huge HGETALL does not pin its memory). */
static void bufs_enter(void)
{
	if (!t_keyed) {
		pthread_once(&bufs_once, bufs_key_create);
		pthread_setspecific(bufs_key, &t_keyed);
		t_keyed = true;
	}
	for (int i = 0; t_bufs_of(i); i++)
		if (t_bufs_of(i)->cap > BUF_KEEP)
			lp_buf_free(t_bufs_of(i));
}

/* The per-bucket arrays as one table (one allocation, each array aligned for its type): the
 * group parts first, then the 64-bit arrays, the keys (bytes) last. */
static int arrays_reserve(size_t n)
{
	if (n + 3 <= t_cap)
		return 0;
	size_t cap = (n + 3) * 2;
	size_t bytes = cap * (sizeof(*t_parts) + sizeof(*t_bs) + 3 * sizeof(*t_oo) + sizeof(*t_keys));
	uint8_t *p = malloc(bytes);
	if (!p)
		return -ENOMEM;
	free(t_parts);   /* the table's start: every array lives in it */
	t_parts = (hlog_group_part *)p;
	t_bs = (uint64_t *)(p + cap * sizeof(*t_parts));
	t_oo = (size_t *)(t_bs + cap);
	t_no = t_oo + cap;
	t_oc = t_no + cap;
	t_keys = (uint8_t(*)[COLL_BUCKET_KEY_BYTES])(t_oc + cap);
	t_cap = cap;
	return 0;
}

/* A new collection id: splitmix64 over a getrandom seed, never 0. */
static uint64_t cid_new(void)
{
	if (!t_rng && getrandom(&t_rng, sizeof(t_rng), 0) != (ssize_t)sizeof(t_rng))
		t_rng = (uint64_t)(uintptr_t)&t_rng ^ (uint64_t)spw_time_ms();
	for (;;) {
		uint64_t z = (t_rng += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		if (z)
			return z;
	}
}

static inline unsigned type_per(int type) { return type == COLL_HASH ? 2 : 1; }

/* ---------------- reading the head and the buckets ---------------- */

struct head_read {
	bool large;
	coll_head h;
	uint8_t raw[COLL_LARGE_HDR];
	hlog_value hv;             /* the head's value as read (ptr: raw) */
	lp_buf *copy;              /* when set: the whole value copied there (a small record) */
	int err;
};

static void head_read_cb(void *ctx, const hlog_value *v)
{
	struct head_read *hr = ctx;
	hr->hv = *v;
	hr->large = v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len);
	if (hr->large) {
		if (!coll_large_parse(v->ptr, v->len, &hr->h)) {
			hr->err = SPW_E_CORRUPT;
			return;
		}
		memcpy(hr->raw, v->ptr, COLL_LARGE_HDR);
		hr->hv.ptr = hr->raw;
		hr->hv.len = COLL_LARGE_HDR;
	} else if (hr->copy) {
		if (lp_buf_reserve(hr->copy, v->len ? v->len : 1) < 0) {
			hr->err = -ENOMEM;
			return;
		}
		memcpy(hr->copy->p, v->ptr, v->len);
		hr->copy->len = v->len;
		hr->hv.ptr = hr->copy->p;
	}
}

static int head_read(client *c, const hlog_key *k, struct head_read *hr)
{
	hr->err = 0;
	hr->large = false;
	int rc = hlog_read(c->w->sess, k, head_read_cb, hr);
	return rc == HLOG_OK && hr->err ? hr->err : rc;
}

/* A bucket's listpack appended to the buffer, without its record's spare capacity (t_rcap). */
static void bucket_copy_cb(void *ctx, const hlog_value *v)
{
	lp_buf *b = ctx;
	size_t n = coll_part_lp_len(v);
	t_rcap = v->len;
	if (lp_buf_reserve(b, b->len + n) == 0) {
		memcpy(b->p + b->len, v->ptr, n);
		b->len += n;
	}
}

/* Note 10: the one bucket under k (prefetched) into t_sub as it is: the view and the old value
 * at once (t_oo[0] 0, t_oo[1] its bytes, 0 when absent: then t_sub is an empty listpack). */
static int bucket_load_one(client *c, const hlog_key *k)
{
	t_sub.len = 0;
	t_oldp = NULL;
	int rc = hlog_read(c->w->sess, k, bucket_copy_cb, &t_sub);
	if (rc == HLOG_PENDING || rc < 0)
		return rc;
	if (rc == HLOG_OK && t_sub.len < LP_EMPTY_BYTES)
		return SPW_E_CORRUPT;
	c->w->stats.coll_part_reads += rc == HLOG_OK;
	c->w->stats.coll_bucket_views++;
	t_oo[0] = 0;
	t_oo[1] = t_sub.len;
	t_oc[0] = rc == HLOG_OK ? t_rcap : 0;
	if (rc == HLOG_NOTFOUND) {
		if (lp_buf_reserve(&t_sub, LP_EMPTY_BYTES) < 0)
			return -ENOMEM;
		memcpy(t_sub.p, lp_empty, LP_EMPTY_BYTES);
		t_sub.len = LP_EMPTY_BYTES;
	}
	t_oldp = t_sub.p;
	return HLOG_OK;
}

/* Prefetch the n buckets in t_bs of cid in one wave, then copy their values into t_old (bucket j
 * at t_oo[j] .. t_oo[j + 1]; an absent bucket is empty) and their entries into t_sub. One bucket
 * (note 10) is copied into t_sub alone, which is then both the view and the old value (t_oldp
 * says where the old values lie). HLOG_OK, HLOG_PENDING (nothing read: note 4) or an error. */
static int buckets_load(client *c, uint64_t cid, size_t n)
{
	hlog_key k;
	int rc;
	bool pending = false;

	for (size_t j = 0; j < n; j++) {
		coll_bucket_key(t_keys[j], cid, t_bs[j]);
		hlog_key_init_internal(&k, t_keys[j], COLL_BUCKET_KEY_BYTES);
		rc = hlog_prefetch(c->w->sess, &k);
		if (rc == HLOG_PENDING)
			pending = true;
		else if (rc < 0)
			return rc;
	}
	if (pending)
		return HLOG_PENDING;
	if (n == 1)
		return bucket_load_one(c, &k);
	t_old.len = 0;
	t_oldp = NULL;
	if (coll_lp_asm_begin(&t_sub) < 0)
		return -ENOMEM;
	for (size_t j = 0; j < n; j++) {
		t_oo[j] = t_old.len;
		hlog_key_init_internal(&k, t_keys[j], COLL_BUCKET_KEY_BYTES);
		rc = hlog_read(c->w->sess, &k, bucket_copy_cb, &t_old);
		if (rc == HLOG_PENDING || rc < 0)
			return rc;
		if (rc == HLOG_OK && t_old.len - t_oo[j] < LP_EMPTY_BYTES)
			return SPW_E_CORRUPT;
		t_oc[j] = rc == HLOG_OK ? t_rcap : 0;
		c->w->stats.coll_part_reads += rc == HLOG_OK;
	}
	t_oo[n] = t_old.len;
	t_oldp = t_old.p;
	uint64_t entries = 0;
	for (size_t j = 0; j < n; j++) {
		if (t_oo[j + 1] == t_oo[j])
			continue;
		entries += lp_count(t_old.p + t_oo[j]);
		if ((rc = coll_lp_asm_add(&t_sub, t_old.p + t_oo[j], t_oo[j + 1] - t_oo[j])) < 0)
			return rc;
	}
	coll_lp_asm_end(&t_sub, entries);
	return HLOG_OK;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Note 10: sort the n bucket numbers in t_bs and drop repeats (O(n log n), not O(n x buckets));
 * the count left. Sorted, route_touched_fn finds a bucket's index by bisection. */
static size_t buckets_unique(size_t n)
{
	size_t m = 0;
	if (n > 1)
		qsort(t_bs, n, sizeof(*t_bs), u64_cmp);
	for (size_t j = 0; j < n; j++)
		if (m == 0 || t_bs[m - 1] != t_bs[j])
			t_bs[m++] = t_bs[j];
	return m;
}

/* The buckets a command touches into t_bs: those of its member arguments (deduplicated), the
 * bucket of one (a member that is no argument, note 9), or all of them. The count, or an error. */
static long buckets_pick(client *c, const coll_head *h, int first, int step, const resp_slice *one)
{
	uint64_t nb = coll_bucket_count(h);
	size_t n = 0;
	if (one) {
		if (arrays_reserve(1) < 0)
			return -ENOMEM;
		t_bs[0] = coll_bucket_of(h, coll_member_hash(h->cid, one->ptr, one->len));
		return 1;
	}
	if (first <= 0) {
		if (arrays_reserve(nb) < 0)
			return -ENOMEM;
		for (uint64_t b = 0; b < nb; b++)
			t_bs[n++] = b;
		return (long)n;
	}
	if (arrays_reserve((size_t)c->argc) < 0)
		return -ENOMEM;
	for (int i = first; i < c->argc; i += step)
		t_bs[n++] = coll_bucket_of(h, coll_member_hash(h->cid, c->argv[i].ptr, c->argv[i].len));
	return (long)buckets_unique(n);
}

/* Note 8: the buckets of a scan step into t_bs: from the cursor on, enough whole buckets for
 * about hint->count entries at the collection's mean per bucket (1..1024 of them; all of them
 * from cursor 0 when the collection has at most COUNT members); hint->next is the bucket after
 * them, 0 past the last. A cursor past the end picks none. */
static long buckets_scan(const coll_head *h, coll_hint *hint)
{
	uint64_t nb = coll_bucket_count(h), per = h->count / nb + 1, want;
	/* an untagged cursor is the small layout's position (the hash converted meanwhile) */
	uint64_t from = hint->cursor & COLL_SCAN_LARGE ? hint->cursor & ~COLL_SCAN_LARGE : 0;
	hint->next = 0;
	if (from >= nb)
		return 0;
	want = ((uint64_t)hint->count + per - 1) / per;
	want = want < 1 ? 1 : want > 1024 ? 1024 : want;
	if (h->count <= (uint64_t)hint->count && from == 0)
		want = nb;   /* all of it fits one call: one answer with cursor 0, as Redis's dict gives */
	if (want > nb - from)
		want = nb - from;
	if (arrays_reserve(want) < 0)
		return -ENOMEM;
	for (uint64_t j = 0; j < want; j++)
		t_bs[j] = from + j;
	hint->next = from + want < nb ? (from + want) | COLL_SCAN_LARGE : 0;
	return (long)want;
}

/* Note 9: the i-th random bucket of a pick from seed (splitmix64's finalizer of seed + i). */
static uint64_t random_bucket(uint64_t seed, uint64_t i, uint64_t nb)
{
	uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) % nb;
}

/* Note 9: the first non-empty of seed's random buckets into t_sub, within as many reads as
 * there are buckets (RANDOM_PROBES at least). HLOG_OK (t_sub holds a non-empty bucket), HLOG_NOTFOUND (all of
 * those were empty: the caller reads the whole collection), HLOG_PENDING or an error. A probe
 * that parks is read again by the re-run, which starts from the same seed (the caller keeps
 * it), so the buckets before it come from the session's fetch cache. */
static int buckets_random(client *c, const coll_head *h, uint64_t seed)
{
	uint64_t nb = coll_bucket_count(h);
	uint64_t bound = nb < RANDOM_PROBES ? RANDOM_PROBES : nb;
	int rc;
	if (arrays_reserve(1) < 0)
		return -ENOMEM;
	for (uint64_t i = 0; i < bound; i++) {
		t_bs[0] = random_bucket(seed, i, nb);
		if ((rc = buckets_load(c, h->cid, 1)) != HLOG_OK)
			return rc;
		if (lp_first(t_sub.p))
			return HLOG_OK;
	}
	return HLOG_NOTFOUND;
}

/* ---------------- the head plan (note 3) ---------------- */

static int head_plan_fn(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	struct head_plan *p = ctx;
	if (p->expect ? !old || old->rtype != HLOG_T_HEAD || old->len < p->expect_len ||
	                 memcmp(old->ptr, p->expect, p->expect_len) != 0
	              : old != NULL)
		return COLL_E_RESTART;
	if (!p->val) {
		out->action = HLOG_RMW_DELETE;
		return 0;
	}
	out->action = HLOG_RMW_WRITE;
	out->rtype = HLOG_T_HEAD;
	out->new_len = p->len;
	out->expire_ms = old && !p->drop_ttl ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void head_fill_fn(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	struct head_plan *p = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, p->val, p->len);
}

const hlog_rmw_ops coll_head_ops = { head_plan_fn, head_fill_fn };

/* Write the head (p) and nparts parts as one group (nparts 0: one hlog_rmw). */
static int head_write(client *c, const hlog_key *k, struct head_plan *p, size_t nparts)
{
	int rc = nparts ? coll_group_write(c, k, &coll_head_ops, p, t_parts, nparts)
	                : hlog_rmw(c->w->sess, k, &coll_head_ops, p);
	if (rc == HLOG_OK && nparts)
		c->w->stats.coll_group_writes++;
	return rc;
}

/* Part i: val (len 0: a delete) with capacity cap (coll_part_cap; 0: exactly len). */
static void part_set(size_t i, const uint8_t *key, size_t klen, const uint8_t *val, size_t len, size_t cap)
{
	hlog_key_init_internal(&t_parts[i].key, key, klen);
	t_parts[i].val = len ? val : NULL;
	t_parts[i].len = len;
	t_parts[i].cap = len ? cap : 0;
	t_parts[i].del = len == 0;
}

/* ---------------- reads (note 1) ---------------- */

int coll_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint, coll_read_fn fn,
                    void *ctx)
{
	struct head_read hr = { .copy = NULL };
	int rc, mode = hint ? hint->mode : COLL_HINT_WHOLE;
	long n;

	bufs_enter();
	coll_latch_shared(k->hash);
	if ((rc = head_read(c, k, &hr)) != HLOG_OK)
		goto out;
	if (!hr.large) {
		rc = COLL_E_RESTART;
		goto out;
	}
	if (type && hr.h.type != type) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	coll_view view = { hr.h.type, hr.h.enc, lp_empty, sizeof(lp_empty), -1, &hr.h };
	if (mode == COLL_HINT_HEAD || mode == COLL_HINT_COUNT) {
		fn(ctx, &view, &hr.hv);
		goto out;
	}
	if (hr.h.type == COLL_LIST || hr.h.type == COLL_ZSET) {   /* their own layouts */
		coll_latch_shared_release(k->hash);
		return hr.h.type == COLL_LIST ? coll_list_large_read(c, k, type, hint, fn, ctx)
		                              : coll_zset_large_read(c, k, type, hint, fn, ctx);
	}
	rc = HLOG_NOTFOUND;
	if (mode == COLL_HINT_RANDOM && (rc = buckets_random(c, &hr.h, hint->cursor)) != HLOG_NOTFOUND &&
	    rc != HLOG_OK)
		goto out;
	if (mode == COLL_HINT_RANDOM && rc == HLOG_NOTFOUND)
		mode = COLL_HINT_WHOLE;   /* too sparse for a random bucket: read it whole (note 9) */
	if (mode != COLL_HINT_RANDOM) {
		if (mode == COLL_HINT_SCAN)
			n = buckets_scan(&hr.h, (coll_hint *)hint);
		else
			n = buckets_pick(c, &hr.h, mode == COLL_HINT_MEMBERS ? hint->first : 0,
			                 hint ? hint->step : 1, NULL);
		if (n < 0) {
			rc = (int)n;
			goto out;
		}
		if ((rc = buckets_load(c, hr.h.cid, (size_t)n)) != HLOG_OK)
			goto out;
	}
	view.p = t_sub.p;
	view.used = t_sub.len;
	if (mode == COLL_HINT_WHOLE) {
		view.count = (int64_t)hr.h.count * type_per(hr.h.type);
		c->w->stats.coll_whole_reads++;
	}
	fn(ctx, &view, &hr.hv);
out:
	coll_latch_shared_release(k->hash);
	return rc;
}

/* A small record's value (header and payload) of the large collection under k into t_flat, for
 * RENAME, COPY and DUMP (note 7). HLOG_OK (*val, *len: valid until the thread's next call),
 * HLOG_NOTFOUND, HLOG_PENDING or an error. */
struct flat_ctx {
	int rc;
};

static void flat_cb(void *ctx, const coll_view *v, const hlog_value *hv)
{
	struct flat_ctx *f = ctx;
	(void)hv;
	size_t vlen = coll_value_len(v->used, 0);
	if (lp_buf_reserve(&t_flat, vlen) < 0) {
		f->rc = -ENOMEM;
		return;
	}
	memset(t_flat.p, 0, vlen);
	coll_hdr_write(t_flat.p, v->type, v->enc, v->used);
	memcpy(t_flat.p + COLL_HDR, v->p, v->used);
	t_flat.len = vlen;
}

int coll_large_flat(client *c, const hlog_key *k, const uint8_t **val, size_t *len)
{
	struct flat_ctx f = { 0 };
	coll_hint h = { .mode = COLL_HINT_WHOLE, .first = 0, .step = 1 };
	int rc;
	rc = coll_large_read(c, k, 0, &h, flat_cb, &f);   /* COLL_E_RESTART: no longer large */
	if (rc == HLOG_OK && f.rc)
		rc = f.rc;
	*val = t_flat.p;
	*len = t_flat.len;
	return rc;
}

/* ---------------- writes ---------------- */

/* The edit's output as bytes: out, a patch run into t_out (or, with in_place, over view's
 * bytes, which must be t_sub's: note 10), or an empty listpack (DELETE). */
static int edit_output(coll_edit *e, const coll_view *view, bool in_place, const uint8_t **out,
                       size_t *len)
{
	if (e->action == COLL_DELETE) {
		*out = lp_empty;
		*len = sizeof(lp_empty);
	} else if (e->patch && in_place) {
		if (lp_buf_reserve(&t_sub, e->out_len) < 0)
			return -ENOMEM;
		e->patch(e->patch_arg, t_sub.p, t_sub.p, true);
		t_sub.len = e->out_len;
		*out = t_sub.p;
		*len = e->out_len;
	} else if (e->patch) {
		if (lp_buf_reserve(&t_out, e->out_len) < 0)
			return -ENOMEM;
		e->patch(e->patch_arg, view ? view->p : NULL, t_out.p, false);
		t_out.len = e->out_len;
		*out = t_out.p;
		*len = e->out_len;
	} else {
		*out = e->out;
		*len = e->out_len;
	}
	return 0;
}

static void edit_reset(coll_edit *e, bool found)
{
	e->found = found;
	e->action = COLL_KEEP;
	e->out = NULL;
	e->out_len = 0;
	e->patch = NULL;
	e->count = 0;
}

/* Whether an edit's result is to be large (coll-record-max's rule in the contract). */
bool coll_large_wanted(int type, int enc, size_t used)
{
	if (type == COLL_LIST)
		return coll_list_large_wanted(enc, used);
	if (type == COLL_ZSET)
		return coll_zset_large_wanted(enc, used);
	return (type == COLL_HASH || type == COLL_SET) && enc == CENC_HASHTABLE && used > RECORD_MAX;
}

/* Note 6: write the payload (type, enc) afresh over the old head expect (NULL: absent): deleted
 * when empty, a new large collection (new cid) or a small record. */
static int write_afresh(client *c, const hlog_key *k, coll_edit *e, const uint8_t *expect,
                        size_t expect_len, bool was_large, const uint8_t *out, size_t len)
{
	struct head_plan p = { expect, expect_len, NULL, 0, e->drop_ttl };
	uint8_t head[COLL_LARGE_HDR];
	unsigned per = type_per(e->type);
	int rc;

	if (e->action == COLL_DELETE || (e->enc != CENC_INTSET && lp_first(out) == NULL))
		return expect ? head_write(c, k, &p, 0) : HLOG_OK;
	if (!coll_large_wanted(e->type, e->enc, len)) {
		size_t vlen = coll_value_len(len, 0);
		if (lp_buf_reserve(&t_flat, vlen) < 0)
			return -ENOMEM;
		memset(t_flat.p, 0, vlen);
		coll_hdr_write(t_flat.p, e->type, e->enc, len);
		memmove(t_flat.p + COLL_HDR, out, len);
		p.val = t_flat.p;
		p.len = vlen;
		return head_write(c, k, &p, 0);
	}
	coll_head h = { e->type, e->enc, cid_new(), lp_count(out) / per, 0, 0, 0 };
	coll_head_size(&h, coll_initial_buckets(len, BUCKET_MAX));
	uint64_t nb = coll_bucket_count(&h);
	if ((rc = arrays_reserve(nb + 1)) < 0 || (rc = coll_lp_split(out, per, &h, &t_route, t_no)) < 0)
		return rc;
	size_t np = 0;
	coll_registry_key(t_keys[0], h.cid);
	part_set(np, t_keys[0], COLL_REGISTRY_KEY_BYTES, k->ptr, k->len, 0);
	t_parts[np].val = k->ptr;
	t_parts[np++].del = false;   /* the key "" is an empty value, not a delete (note 7) */
	h.mbytes = k->len;
	for (uint64_t b = 0; b < nb; b++) {
		const uint8_t *lp = t_route.p + t_no[b];
		if (!lp_first(lp))
			continue;
		coll_bucket_key(t_keys[np], h.cid, b);
		part_set(np, t_keys[np], COLL_BUCKET_KEY_BYTES, lp, t_no[b + 1] - t_no[b],
		         coll_part_cap(t_no[b + 1] - t_no[b], 0));
		h.mbytes += t_parts[np++].len;
	}
	coll_large_write(head, &h);
	p.val = head;
	p.len = sizeof(head);
	rc = head_write(c, k, &p, np);
	if (rc == HLOG_OK && !was_large)
		c->w->stats.coll_large_conversions++;
	return rc;
}

/* The index among the n touched buckets of the bucket of hash (n: not among them). */
struct route_touched {
	const coll_head *h;
	size_t n;
};

static uint64_t route_touched_fn(void *arg, uint64_t hash)
{
	struct route_touched *r = arg;
	uint64_t b = coll_bucket_of(r->h, hash);
	size_t lo = 0, hi = r->n;   /* t_bs sorted (buckets_unique) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t_bs[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && t_bs[lo] == b ? lo : r->n;
}

/* Note 5: split bucket h->split (its current value cur, len; cur NULL: read it), adding its two
 * halves to the parts at *np (the split bucket's part replacing the one at index at, when the
 * write touched it: at >= 0). HLOG_OK, HLOG_PENDING or an error. */
static int split_one(client *c, coll_head *h, size_t *np, long at, const uint8_t *cur, size_t len)
{
	uint64_t s = h->split, dst = s + (1ull << h->level);
	size_t offs[3];
	lp_buf one = { 0 };
	int rc;

	if (!cur) {
		hlog_key k;
		coll_bucket_key(t_keys[*np], h->cid, s);
		hlog_key_init_internal(&k, t_keys[*np], COLL_BUCKET_KEY_BYTES);
		rc = hlog_read(c->w->sess, &k, bucket_copy_cb, &one);
		if (rc == HLOG_PENDING || rc < 0) {
			lp_buf_free(&one);
			return rc;
		}
		c->w->stats.coll_part_reads += rc == HLOG_OK;
		cur = rc == HLOG_OK ? one.p : lp_empty;
		len = rc == HLOG_OK ? one.len : 0;
	}
	rc = coll_bucket_split(len ? cur : lp_empty, type_per(h->type), h, &t_two, offs);
	lp_buf_free(&one);
	if (rc < 0)
		return rc;
	size_t stay = lp_first(t_two.p) ? offs[1] - offs[0] : 0;
	size_t move = lp_first(t_two.p + offs[1]) ? offs[2] - offs[1] : 0;
	h->mbytes = h->mbytes - len + stay + move;
	size_t i = at >= 0 ? (size_t)at : (*np)++;
	coll_bucket_key(t_keys[i], h->cid, s);
	part_set(i, t_keys[i], COLL_BUCKET_KEY_BYTES, t_two.p, stay, coll_part_cap(stay, 0));
	if (move) {
		coll_bucket_key(t_keys[*np], h->cid, dst);
		part_set(*np, t_keys[*np], COLL_BUCKET_KEY_BYTES, t_two.p + offs[1], move, coll_part_cap(move, 0));
		(*np)++;
	}
	coll_head_split_advance(h);
	c->w->stats.coll_bucket_splits++;
	return HLOG_OK;
}

/* Note 2: route a point edit's output (out, len) back into the n touched buckets and write what
 * changed. The sub-listpack the edit saw held old_entries entries, the buckets' old values lie at
 * t_oldp (note 10: patched, that one bucket's old bytes are gone and it is known changed). */
static int point_write(client *c, const hlog_key *k, bool patched, struct head_read *hr, size_t n,
                       uint32_t old_entries, const uint8_t *out)
{
	coll_head h = hr->h;
	unsigned per = type_per(h.type);
	struct head_plan p = { hr->raw, COLL_LARGE_HDR, NULL, 0, false };
	struct route_touched rt = { &hr->h, n };
	uint8_t head[COLL_LARGE_HDR];
	size_t np = 0, big = 0;
	long split_at = -1;
	bool split_touched = false;
	int rc;

	int64_t delta = ((int64_t)lp_count(out) - (int64_t)old_entries) / (int64_t)per;
	if ((int64_t)h.count + delta <= 0)
		return head_write(c, k, &p, 0);   /* empty: the head deleted (note 5) */
	h.count = (uint64_t)((int64_t)h.count + delta);
	/* One touched bucket: every entry of the output belongs to it (the edit saw that bucket's
	 * entries and members its arguments named, all routed there), so nothing needs hashing. */
	const uint8_t *routed = out;
	if (n == 1) {
		t_no[0] = 0;
		t_no[1] = lp_bytes(out);
	} else if ((rc = coll_lp_route(out, per, h.cid, route_touched_fn, &rt, n, &t_route, t_no)) < 0) {
		return rc;
	} else {
		routed = t_route.p;
	}
	const uint8_t *split_cur = NULL;
	size_t split_len = 0;
	for (size_t j = 0; j < n; j++) {
		const uint8_t *nv = routed + t_no[j];
		size_t nl = lp_first(nv) ? t_no[j + 1] - t_no[j] : 0, ol = t_oo[j + 1] - t_oo[j];
		bool same = !patched && nl == ol && memcmp(nv, t_oldp + t_oo[j], nl) == 0;
		if (t_bs[j] == h.split) {
			split_touched = true;
			split_cur = nv;
			split_len = nl;
		}
		if (nl > 2 * BUCKET_MAX)
			big++;
		if (same)
			continue;
		h.mbytes = h.mbytes - ol + nl;
		if (t_bs[j] == h.split)
			split_at = (long)np;
		coll_bucket_key(t_keys[np], h.cid, t_bs[j]);
		part_set(np, t_keys[np], COLL_BUCKET_KEY_BYTES, nv, nl, coll_part_cap(nl, t_oc[j]));
		np++;
	}
	if (big && (rc = split_one(c, &h, &np, split_at, split_touched ? split_cur : NULL,
	                           split_len)) != HLOG_OK)
		return rc;
	if (np == 0 && delta == 0)
		return HLOG_OK;
	if (np == 1 && !big && delta == 0 && h.mbytes == hr->h.mbytes && !t_parts[0].del) {
		return coll_part_put(c, &t_parts[0]);
	}
	coll_large_write(head, &h);
	p.val = head;
	p.len = sizeof(head);
	return head_write(c, k, &p, np);
}

/* A command's write on a large collection (coll.c handed it over: COLL_E_LARGE), under the
 * exclusive latch: a point write (e->hint_first > 0 or e->hint_member) or a whole write (note 6). HLOG_OK,
 * HLOG_PENDING, COLL_E_RESTART (coll.c runs the command again) or an error. */
int coll_large_rmw(client *c, const hlog_key *k, coll_edit *e)
{
	struct head_read hr = { .copy = NULL };
	bool point = e->hint_first > 0 || e->hint_member;
	const uint8_t *out;
	size_t len;
	long n;
	int rc;

	if (e->type == COLL_LIST)   /* its own layout, which reads and checks the head itself */
		return coll_list_large_rmw(c, k, e);
	bufs_enter();
	coll_latch_excl(k->hash);
	if ((rc = head_read(c, k, &hr)) != HLOG_OK || !hr.large) {
		rc = rc == HLOG_PENDING || rc < 0 ? rc : COLL_E_RESTART;
		goto out;
	}
	if (hr.h.type != e->type) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	if (hr.h.type == COLL_ZSET) {   /* its own layout */
		coll_latch_excl_release(k->hash);
		return coll_zset_large_rmw(c, k, e);
	}
	if ((n = buckets_pick(c, &hr.h, e->hint_first, e->hint_step, e->hint_member)) < 0) {
		rc = (int)n;
		goto out;
	}
	if ((rc = buckets_load(c, hr.h.cid, (size_t)n)) != HLOG_OK)
		goto out;
	coll_view view = { hr.h.type, hr.h.enc, t_sub.p, t_sub.len, -1, &hr.h };
	if (!point) {
		view.count = (int64_t)hr.h.count * type_per(hr.h.type);
		c->w->stats.coll_whole_reads++;
	}
	edit_reset(e, true);
	if ((rc = e->fn(e, &view)) < 0 || e->action == COLL_KEEP)
		goto out;
	uint32_t old_entries = lp_count(t_sub.p);
	/* note 10: one bucket's planned edit patches the bucket where it was read */
	bool patch = point && n == 1 && e->patch && e->action == COLL_WRITE;
	if ((rc = edit_output(e, &view, patch, &out, &len)) < 0)
		goto out;
	c->w->stats.coll_bucket_patches += patch;
	if (point && e->action != COLL_DELETE && e->enc != CENC_HASHTABLE)
		rc = SPW_E_CORRUPT;   /* a point edit keeps a large collection's encoding */
	else if (point)
		rc = point_write(c, k, patch, &hr, (size_t)n, old_entries, out);
	else
		rc = write_afresh(c, k, e, hr.raw, COLL_LARGE_HDR, true, out, len);
out:
	coll_latch_excl_release(k->hash);
	return rc;
}

/* The conversion (note 6): the small path's edit made a hashtable-encoded payload over
 * coll-record-max (COLL_E_CONVERT). Run the edit again on a copy of the small record under the
 * exclusive latch and write its result afresh. HLOG_OK, HLOG_PENDING, COLL_E_RESTART or an error. */
int coll_large_convert(client *c, const hlog_key *k, coll_edit *e)
{
	struct head_read hr = { .copy = &t_small };
	coll_view view;
	const uint8_t *out;
	size_t len;
	int rc;

	if (e->type == COLL_LIST)
		return coll_list_large_convert(c, k, e);
	if (e->type == COLL_ZSET)
		return coll_zset_large_convert(c, k, e);
	bufs_enter();
	coll_latch_excl(k->hash);
	rc = head_read(c, k, &hr);
	if (rc == HLOG_PENDING || rc < 0 || hr.large) {
		rc = hr.large ? COLL_E_RESTART : rc;
		goto out;
	}
	bool found = rc == HLOG_OK;
	if (found && hr.hv.rtype == HLOG_T_STRING) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	if (found && (hr.hv.rtype != HLOG_T_HEAD || !coll_parse(t_small.p, t_small.len, &view))) {
		rc = SPW_E_CORRUPT;
		goto out;
	}
	if (found && view.type != e->type) {
		rc = SPW_E_WRONGTYPE;
		goto out;
	}
	rc = HLOG_OK;
	if (!found && !e->create)
		goto out;
	edit_reset(e, found);
	if ((rc = e->fn(e, found ? &view : NULL)) < 0 || e->action == COLL_KEEP)
		goto out;
	if ((rc = edit_output(e, found ? &view : NULL, false, &out, &len)) < 0)
		goto out;
	rc = write_afresh(c, k, e, found ? t_small.p : NULL, found ? t_small.len : 0, false, out, len);
out:
	coll_latch_excl_release(k->hash);
	return rc;
}

/* ---------------- compaction's liveness check of parts (note 7) ---------------- */

struct live_ctx {
	uint64_t cid, n;          /* n: the part's suffix (a bucket's or a list node's number) */
	int kind;
	bool live;
	uint8_t *owner;
	size_t olen;
	int err;
};

static void owner_copy_cb(void *ctx, const hlog_value *v)
{
	struct live_ctx *x = ctx;
	if (!(x->owner = malloc(v->len ? v->len : 1))) {
		x->err = -ENOMEM;
		return;
	}
	if (v->len)   /* the empty key: no pointer to copy from */
		memcpy(x->owner, v->ptr, v->len);
	x->olen = v->len;
}

static void owner_head_cb(void *ctx, const hlog_value *v)
{
	struct live_ctx *x = ctx;
	coll_head h;
	x->live = v->rtype == HLOG_T_HEAD && coll_is_large(v->ptr, v->len) &&
	          coll_large_parse(v->ptr, v->len, &h) && h.cid == x->cid;
	if (x->live && h.type == COLL_LIST)   /* a list's finer rule: its nodes by position */
		x->live = coll_list_part_live(v->ptr, v->len, x->kind, x->n);
}

/* hlog_config.part_live: cid|R names the owner; a part is live iff the owner's head is a large
 * head of that cid. 1, 0, HLOG_PENDING, or an error (compaction keeps the part). */
int coll_part_live(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v)
{
	struct live_ctx x = { 0 };
	uint64_t b;
	int kind, rc;
	hlog_key k;
	(void)arg;

	if (!coll_part_key_parse(key, klen, &x.cid, &kind, &b))
		return 1;   /* not a collection's part: not ours to judge */
	x.kind = kind;
	x.n = b;
	if (kind == COLL_KIND_REGISTRY) {
		owner_copy_cb(&x, v);
	} else {
		uint8_t rk[COLL_REGISTRY_KEY_BYTES];
		coll_registry_key(rk, x.cid);
		hlog_key_init_internal(&k, rk, sizeof(rk));
		rc = hlog_read(s, &k, owner_copy_cb, &x);
		if (rc == HLOG_NOTFOUND)
			return 0;
		if (rc != HLOG_OK)
			return rc;
	}
	if (x.err)
		return x.err;
	hlog_key_init(&k, x.owner, x.olen);
	rc = hlog_read(s, &k, owner_head_cb, &x);
	free(x.owner);
	if (rc == HLOG_NOTFOUND)
		return 0;
	return rc == HLOG_OK ? x.live : rc;
}
