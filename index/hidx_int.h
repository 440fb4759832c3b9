/*
 * hidx_int.h - the guts of the hash index, private to index/ (and its white-box tests).
 *
 * The bucket layout, the overflow allocator's geometry and the helpers that turn a hash into a bucket
 * and a tag. Nothing outside index/ and tests/index/ may include this file.
 */
#ifndef SPW_HIDX_INT_H
#define SPW_HIDX_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include "common/spw.h"
#include "index/hidx.h"

#define HIDX_MIN_BUCKETS 64ULL

/* Overflow buckets come from pages of HIDX_OVF_PAGE_BUCKETS buckets (256 KiB), found through a
 * fixed table of HIDX_OVF_MAX_PAGES page pointers: 2^20 pages of 2^12 buckets = 2^32 buckets. */
#define HIDX_OVF_PAGE_BITS 12
#define HIDX_OVF_PAGE_BUCKETS (1ULL << HIDX_OVF_PAGE_BITS)
#define HIDX_OVF_PAGE_BYTES (HIDX_OVF_PAGE_BUCKETS * HIDX_BUCKET_BYTES)
#define HIDX_OVF_MAX_BUCKETS (1ULL << 32)
#define HIDX_OVF_MAX_PAGES (HIDX_OVF_MAX_BUCKETS >> HIDX_OVF_PAGE_BITS)

/* Main arrays of at least this size ask for transparent huge pages: a random probe per request
 * otherwise costs a TLB miss on top of the cache miss. */
#define HIDX_HUGEPAGE_MIN_BYTES (2ULL << 20)

/* One cache line: 7 entry words, then the overflow word: the 1-based index of the next overflow
 * bucket (0 = none) in its low bits, and during a growth (hidx.c note "Growth") two flags. */
typedef struct hidx_bucket {
	_Atomic uint64_t hb_entry[HIDX_BUCKET_ENTRIES];
	_Atomic uint64_t hb_overflow;
} SPW_ALIGNED_CL hidx_bucket;

_Static_assert(sizeof(hidx_bucket) == HIDX_BUCKET_BYTES, "a bucket is one cache line");

#define HIDX_OVF_IDX_MASK ((1ULL << 48) - 1)
#define HIDX_OVF_FROZEN (1ULL << 63)   /* the chain is being split: no slot or link may change */
#define HIDX_OVF_SPLIT (1ULL << 62)    /* (a main bucket) its entries are in the next table */
/* A frozen free slot (or one that held a just-created entry with no record): tentative bit, tag 0.
 * A frozen entry is its word with the tentative bit added (its address is never 0). */
#define HIDX_MOVED (HIDX_TENTATIVE | 1ULL)

/* One main array. The bucket number of a hash is its low base_bits bits, then the low `grown` bits
 * of its tag: a doubling splits bucket i into i and i + buckets by the next tag bit, which every
 * entry carries, so a split needs no key. */
typedef struct hidx_table {
	hidx_bucket *ht_buckets;           /* mmap'd, HIDX_BUCKET_BYTES aligned */
	uint64_t ht_mask;                  /* buckets - 1 */
	uint64_t ht_base_mask;             /* (1 << base_bits) - 1 */
	uint64_t ht_grown_mask;            /* (1 << grown) - 1 */
	uint32_t ht_base_bits, ht_grown;
	uint64_t ht_bytes;                 /* mapping length of ht_buckets */
	_Atomic(struct hidx_table *) ht_next;  /* the table this one is being split into */
} hidx_table;

struct hidx {
	_Atomic(hidx_table *) hx_cur;      /* the table new operations start from */
	/* Growth: hx_grow_one makes growths one at a time (held across the whole of hidx_grow) and
	 * keeps them off an image save; hx_grow_mu keeps hidx_clear_below off a table being split
	 * (held from the first split until no helper writes, never across a wait for an epoch). */
	pthread_mutex_t hx_grow_one, hx_grow_mu;
	_Atomic uint64_t hx_old_bytes;     /* a growth's other table: the new one while the split fills
	                                      it, then the old one until it is unmapped (stats) */
	/* hx_cur's geometry, for readers outside any epoch (INFO, SCAN's cursor checks): they must
	 * not dereference a table that a growth may be unmapping. */
	_Atomic uint64_t hx_nbuckets;
	_Atomic uint32_t hx_ngrown;
	_Atomic uint64_t hx_grows;         /* doublings done */
	_Atomic uint64_t hx_clear_pending; /* a hidx_clear_below limit left during a split */
	_Atomic uint64_t hx_helped;        /* frozen buckets met (and split) by an index call */
	_Atomic uint64_t hx_helpers;       /* threads in hidx_split's copy (hidx.c note "Growth") */

	/* Overflow allocator. Page pointers are written once, under hx_ovf_lock, before any index into
	 * the page is published; readers reach a page only through a published overflow word. */
	_Atomic(hidx_bucket *) *hx_ovf_pages;  /* HIDX_OVF_MAX_PAGES slots, mmap'd (untouched = free) */
	pthread_mutex_t hx_ovf_lock;
	uint64_t hx_ovf_next;              /* next never-used 1-based index (lock) */
	uint64_t hx_ovf_free;              /* free list head, linked through hb_overflow (lock) */
	uint64_t hx_ovf_free_count;        /* (lock) */
	uint64_t hx_ovf_npages;            /* pages mapped so far (lock) */
	/* Pages given back to the kernel (MADV_DONTNEED) after a growth left them wholly free: still
	 * mapped, read as zeros, on neither list; the allocator takes them again before the next
	 * never-used index (lock). */
	uint32_t *hx_ovf_released;
	uint64_t hx_ovf_nreleased;
	/* hidx_set_full_hook (lock): told once per table, so one wake-up per growth wanted. */
	void (*hx_full_fn)(void *ctx);
	void *hx_full_ctx;
	uint64_t hx_full_pct;
	bool hx_full_told;
};

static inline hidx_table *hidx_cur(const hidx *h)
{
	return atomic_load_explicit(&((hidx *)h)->hx_cur, memory_order_acquire);
}

/* The tag of a hash, in place (bits 48-62). Tag 0 is folded into tag 1: a confirmed entry with tag 0
 * and address 0 would be the word 0, which means "free slot". Keys sharing a tag already share an
 * entry (the log compares keys along the chain), so folding costs only a rare extra comparison. */
static inline uint64_t hidx_tag_of(uint64_t hash)
{
	uint64_t tag = hash & HIDX_TAG_MASK;
	return tag ? tag : (1ULL << HIDX_TAG_SHIFT);
}

static inline uint64_t hidx_bucket_no(const hidx_table *t, uint64_t hash)
{
	uint64_t tagbits = (hidx_tag_of(hash) >> HIDX_TAG_SHIFT) & t->ht_grown_mask;
	return (hash & t->ht_base_mask) | (tagbits << t->ht_base_bits);
}

/* The overflow bucket with 1-based index idx (idx must have been published or just allocated).
 * The page pointer load may be relaxed: the caller read idx from an overflow word with acquire (or
 * allocated it itself), which orders the page table store before this load. */
static inline hidx_bucket *hidx_overflow_at(const hidx *h, uint64_t idx)
{
	uint64_t i = idx - 1;
	hidx_bucket *page = atomic_load_explicit(&h->hx_ovf_pages[i >> HIDX_OVF_PAGE_BITS],
						 memory_order_relaxed);
	return &page[i & (HIDX_OVF_PAGE_BUCKETS - 1)];
}

/* The next bucket of a chain, or NULL. */
static inline hidx_bucket *hidx_bucket_next(const hidx *h, hidx_bucket *b, memory_order mo)
{
	uint64_t idx = atomic_load_explicit(&b->hb_overflow, mo) & HIDX_OVF_IDX_MASK;
	return idx ? hidx_overflow_at(h, idx) : NULL;
}

/* For index images (hidx_image.c), with no other thread using h. hidx_overflow_reserve maps pages
 * so that overflow buckets 1..n exist and counts them as handed out (hx_ovf_next = n + 1); h's
 * allocator must be untouched. 0, -EINVAL (allocator used, or n too large) or -ENOMEM.
 * hidx_overflow_free puts an all-zero, unlinked bucket on the free list (any thread; takes the lock).
 * hidx_reset returns h to its state at hidx_open: main array zero, overflow pages unmapped.
 * hidx_reshape gives a fresh h (no entry used) a main array of `buckets` buckets of which the top
 * `grown` bits come from the tag, as an image saved after growths has: 0, -EINVAL or -ENOMEM. */
int hidx_overflow_reserve(hidx *h, uint64_t n);
void hidx_overflow_free(hidx *h, uint64_t idx);
/* The rest of the allocator (hidx_ovf.c), for hidx.c: a bucket handed out (0 or -ENOMEM); pages
 * mapped ahead until n buckets can be handed out without a new mapping (0 or -ENOMEM); the
 * buckets of t's chains taken back once no thread can walk them, whole free pages given back to
 * the kernel; reset (no other thread: unmaps the pages), close, and the counts for hidx_stats. */
int hidx_overflow_alloc(hidx *h, uint64_t *idx /* out */);
int hidx_overflow_prepare(hidx *h, uint64_t n);
void hidx_overflow_retire(hidx *h, const hidx_table *t);
void hidx_overflow_reset(hidx *h);
void hidx_overflow_close(hidx *h);
void hidx_overflow_stats(hidx *h, uint64_t *buckets, uint64_t *bytes);
/* A growth is over: the fill hook may tell again. */
void hidx_overflow_grew(hidx *h);
/* An anonymous, lazily backed mapping of bytes (zeros), or NULL. */
void *hidx_map(uint64_t bytes);
void hidx_reset(hidx *h);
int hidx_reshape(hidx *h, uint64_t buckets, uint32_t grown);

#endif
