/*
 * hidx.h - the latch-free hash index (Tsavorite's design).
 *
 * A power-of-two array of 64-byte buckets. Each bucket holds 7 entries and one overflow word that
 * links to an overflow bucket from a fixed-page allocator. An entry is one 64-bit word:
 *
 *   bit 63      tentative: inserted but not yet confirmed unique (readers skip it)
 *   bits 48-62  tag: 15 high bits of the key's hash (bits 48-62 of XXH3)
 *   bits 0-47   logical address of the newest record of the chain (0 = no record yet)
 *
 * A word of 0 is a free slot. Bucket = hash & (buckets - 1). Keys whose hashes share bucket and tag
 * share one entry; the log chains their records through each record's previous address.
 *
 * The index knows nothing of records or keys: it maps (bucket, tag) to an address. Publishing a new
 * record is one CAS of the entry (hidx_slot_cas). Entries are never removed while the server runs,
 * except by hidx_clear_below() (FLUSHALL, truncation), which is safe against concurrent CAS.
 *
 * The main array doubles online (hidx_grow) while other threads go on reading and publishing: the
 * size given to hidx_open is where it starts.
 */
#ifndef SPW_HIDX_H
#define SPW_HIDX_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <xxhash.h>

#define HIDX_ADDR_BITS 48
#define HIDX_ADDR_MASK ((1ULL << HIDX_ADDR_BITS) - 1)
#define HIDX_TAG_BITS 15
#define HIDX_TAG_SHIFT 48
#define HIDX_TAG_MASK (((1ULL << HIDX_TAG_BITS) - 1) << HIDX_TAG_SHIFT)
#define HIDX_TENTATIVE (1ULL << 63)
#define HIDX_BUCKET_BYTES 64
#define HIDX_BUCKET_ENTRIES 7
/* At most this many doublings (hidx_grow): each takes one more tag bit into the bucket number
 * (hidx.c note "Growth"), so that 15 - HIDX_GROW_MAX bits still tell entries of one bucket apart. */
#define HIDX_GROW_MAX 6u

typedef struct hidx hidx;

/* A found or created entry: where it lives and the word seen there. */
typedef struct hidx_slot {
	_Atomic uint64_t *entry;
	uint64_t word;           /* value read (or installed); tag | address */
} hidx_slot;

static inline uint64_t hidx_hash(const void *key, size_t len) { return XXH3_64bits(key, len); }
static inline uint64_t hidx_slot_addr(const hidx_slot *s) { return s->word & HIDX_ADDR_MASK; }
/* A number in [0, 2^HIDX_STRIPE_BITS) that every key sharing hash's entry (bucket and tag) gets,
 * whatever the index's size now or later: the tag as entries store it (tag 0 reads as 1) and the
 * lowest bucket bit (an index has at least 64 buckets). The log's group locks are kept by it. */
#define HIDX_STRIPE_BITS 16
static inline uint32_t hidx_entry_stripe(uint64_t hash)
{
	uint64_t tag = (hash & HIDX_TAG_MASK) >> HIDX_TAG_SHIFT;
	return (uint32_t)(((tag ? tag : 1) << 1) | (hash & 1));
}

/* size_bytes / 64 rounded down to a power of two (at least 64 buckets). 0 or -ENOMEM/-EINVAL. */
int hidx_open(hidx **out, uint64_t size_bytes);
void hidx_close(hidx *h);

/* Main buckets now (they double as the index grows). */
uint64_t hidx_buckets(hidx *h);

/* Find the confirmed entry for hash's (bucket, tag). 0 and *out, or -ENOENT. */
int hidx_entry_find(hidx *h, uint64_t hash, hidx_slot *out /* out */);
/* Find it, or create it with address 0 (tentative-then-confirm, so no twin ever exists). 0 or -ENOMEM. */
int hidx_entry_find_or_create(hidx *h, uint64_t hash, hidx_slot *out /* out */);
/* Replace the slot's address with new_addr if the entry still holds s->word. On failure s->word is
 * refreshed with what is there now. */
bool hidx_slot_cas(hidx_slot *s, uint64_t new_addr);
/* Bring the key's bucket into cache ahead of use (MGET and pipelines). */
void hidx_prefetch(hidx *h, uint64_t hash);

/* Visit the entries of buckets [cursor, cursor+count) of the main array, each with its overflow chain.
 * fn(ctx, word) sees every confirmed entry with a nonzero address. Returns the next cursor, 0 at the end. */
typedef void (*hidx_visit_fn)(void *ctx, uint64_t word);
uint64_t hidx_scan(hidx *h, uint64_t cursor, uint64_t count, hidx_visit_fn fn, void *ctx);
/* The same with cursors that number `base` buckets (hidx_buckets() when a walk began; 0 = now):
 * a cursor j covers every bucket the doublings since made of bucket j, so a walk that crosses a
 * growth visits each entry once. hidx_scan's cursors are now's, and a walk across a growth may
 * visit an entry twice (buckets below the cursor reappear above the old end). */
uint64_t hidx_scan_base(hidx *h, uint64_t base, uint64_t cursor, uint64_t count, hidx_visit_fn fn,
			void *ctx);

/* Free every entry whose address is below addr (CAS, so concurrent publishers win). Never waits:
 * during a growth's split it is left to the grower, which runs it when the split ends. */
void hidx_clear_below(hidx *h, uint64_t addr);

/* Double the main array while other threads use the index (hidx.c note "Growth"). quiesce(ctx)
 * must return once every thread that was inside an index call when it was called has left it (the
 * log passes an epoch barrier); it is called without any index lock held. 0, -ENOSPC (already
 * HIDX_GROW_MAX doublings), -ENOMEM (nothing changed: the overflow buckets the copy needs are mapped
 * before anything is frozen). One growth at a time: a second caller waits, then doubles again (the
 * caller decides whether one is due). */
int hidx_grow(hidx *h, void (*quiesce)(void *ctx), void *ctx);

/* fn(ctx) runs once, on the thread whose insert links an overflow bucket that brings them to pct
 * percent of the main buckets, with no index lock held (a wake-up of whoever grows the index: it
 * must be short), and once more per growth after that. */
void hidx_set_full_hook(hidx *h, unsigned pct, void (*fn)(void *ctx), void *ctx);

typedef struct hidx_stats {
	uint64_t buckets;            /* main array */
	uint32_t grown;              /* doublings in its geometry (also those of a loaded image) */
	bool can_grow;               /* grown < the most doublings an index can take */
	uint64_t grows;              /* doublings done since open */
	uint64_t helped_splits;      /* frozen buckets that lookups and inserts met and split */
	uint64_t overflow_buckets;   /* allocated overflow buckets */
	uint64_t memory_bytes;       /* main array (and during a growth the one being split) */
	uint64_t overflow_bytes;     /* overflow pages */
} hidx_stats;
void hidx_stats_get(hidx *h, hidx_stats *out /* out */);

/*
 * Index images (hidx_image.c), for checkpoints. hidx_image_save streams the main array and the
 * overflow buckets in use through zstd into fd (at its current offset), reading every word with an
 * atomic load while other threads go on publishing: the image is fuzzy (an entry may be older or
 * newer than another), which the log's recovery repairs. Tentative entries are written as free.
 * hidx_image_load reads such an image into h, which must be freshly opened (no entry used); h takes
 * the image's geometry (its main buckets and doublings); it checks the format first, decompresses into h,
 * checks the checksums and the chains, and on any failure resets h to empty (as opened). Both return 0 or -errno (-EINVAL: not an image, or a geometry no index can have; SPW_E_CORRUPT
 * from common/spw.h: a checksum or a length is wrong), with why filled on failure.
 *
 * Format: a header (magic "SPWIDX01", version, main buckets, overflow buckets, uncompressed bytes),
 * the zstd frame, a trailer with the XXH3-64 of the compressed bytes and of the header.
 */
typedef struct hidx_image_info {
	uint64_t buckets;            /* main buckets */
	uint64_t overflow_buckets;   /* overflow buckets written (1-based indices 1..overflow_buckets) */
	uint64_t file_bytes;         /* bytes written to / read from fd */
	uint64_t checksum;           /* XXH3-64 of the whole file as written (for the checkpoint's meta) */
} hidx_image_info;
int hidx_image_save(hidx *h, int fd, int zstd_level, hidx_image_info *out, char *why, size_t whylen);
int hidx_image_load(hidx *h, int fd, hidx_image_info *out, char *why, size_t whylen);
/* Raise the entry for hash's (bucket, tag) to addr if it holds less (recovery's repair). 0 or -ENOMEM. */
int hidx_entry_raise(hidx *h, uint64_t hash, uint64_t addr);

#endif
