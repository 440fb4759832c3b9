/*
 * hidx_ovf.c - the index's overflow allocator: buckets for chains longer than a main bucket.
 *
 * State (struct hidx's hx_ovf_* fields, all under hx_ovf_lock but the page table): pages of
 * HIDX_OVF_PAGE_BUCKETS buckets mapped on demand through a fixed table of page pointers; buckets
 * handed out by a bump index (hx_ovf_next) or from a free list linked through their overflow words;
 * and pages given back to the kernel after a growth (hx_ovf_released), taken again before the next
 * never-used index. A bucket moves: never used -> published in a chain -> (a growth retires the
 * chain) free or on a page given back -> handed out again. A bucket whose publishing CAS lost goes
 * straight back to the free list.
 *
 * Invariants (hidx.c's 3-5 from the allocator's side): a bucket handed out is all zero (its link
 * word, the one word the free list uses, is zeroed as it leaves the list); a page pointer is stored
 * before any index into the page is handed out; a page is given back only when every bucket of it is free or
 * belonged to the retired chains, and never the page the bump index is in.
 *
 * Sections: mapping, hand out and take back, growth's preparation and retirement, reset and stats.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "index/hidx_int.h"

/* ---- mapping ----------------------------------------------------------------------------------- */

void *hidx_map(uint64_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* ---- hand out and take back ------------------------------------------------------------------- */

/* Hand out a zeroed, unpublished overflow bucket: from the free list, else the next unused index,
 * mapping its page first if needed. Rare (a chain outgrew 7 entries), hence the mutex. 0 or -ENOMEM. */
int hidx_overflow_alloc(hidx *h, uint64_t *idx /* out */)
{
	uint64_t page;
	int rc = 0;

	pthread_mutex_lock(&h->hx_ovf_lock);
	if (h->hx_ovf_free) {
		hidx_bucket *b;

		*idx = h->hx_ovf_free;
		b = hidx_overflow_at(h, *idx);
		h->hx_ovf_free = atomic_load_explicit(&b->hb_overflow, memory_order_relaxed);
		/* Invariant 4: the link was the only nonzero word; the publishing CAS releases this. */
		atomic_store_explicit(&b->hb_overflow, 0, memory_order_relaxed);
		h->hx_ovf_free_count--;
		goto out;
	}
	if (h->hx_ovf_nreleased) {
		/* A page a growth gave back: zeros again, so every bucket of it goes on the free list
		 * (its links fault it in) but the one handed out. */
		uint64_t first = ((uint64_t)h->hx_ovf_released[--h->hx_ovf_nreleased] << HIDX_OVF_PAGE_BITS) + 1;

		for (uint64_t i = first + HIDX_OVF_PAGE_BUCKETS - 1; i > first; i--) {
			atomic_store_explicit(&hidx_overflow_at(h, i)->hb_overflow, h->hx_ovf_free,
					      memory_order_relaxed);
			h->hx_ovf_free = i;
		}
		h->hx_ovf_free_count += HIDX_OVF_PAGE_BUCKETS - 1;
		*idx = first;
		goto out;
	}
	if (h->hx_ovf_next > HIDX_OVF_MAX_BUCKETS) {
		rc = -ENOMEM;
		goto out;
	}
	page = (h->hx_ovf_next - 1) >> HIDX_OVF_PAGE_BITS;
	if (page == h->hx_ovf_npages) {
		hidx_bucket *mem = hidx_map(HIDX_OVF_PAGE_BYTES);

		if (!mem) {
			rc = -ENOMEM;
			goto out;
		}
		/* Invariant 5: stored before any index into the page leaves this function. */
		atomic_store_explicit(&h->hx_ovf_pages[page], mem, memory_order_release);
		h->hx_ovf_npages++;
	}
	*idx = h->hx_ovf_next++;
out:;
	/* The fill a growth waits for (hidx_set_full_hook), told once per table. */
	bool tell = false;
	if (rc == 0 && h->hx_full_fn && !h->hx_full_told) {
		uint64_t linked = h->hx_ovf_next - 1 - h->hx_ovf_free_count -
				  h->hx_ovf_nreleased * HIDX_OVF_PAGE_BUCKETS;
		if (linked * 100 >= atomic_load(&h->hx_nbuckets) * h->hx_full_pct)
			tell = h->hx_full_told = true;
	}
	void (*fn)(void *) = h->hx_full_fn;
	void *ctx = h->hx_full_ctx;
	pthread_mutex_unlock(&h->hx_ovf_lock);
	if (tell)
		fn(ctx);
	return rc;
}

void hidx_set_full_hook(hidx *h, unsigned pct, void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&h->hx_ovf_lock);
	h->hx_full_fn = fn;
	h->hx_full_ctx = ctx;
	h->hx_full_pct = pct;
	h->hx_full_told = false;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

void hidx_overflow_grew(hidx *h)
{
	pthread_mutex_lock(&h->hx_ovf_lock);
	h->hx_full_told = false;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

/* Take back a bucket that was never published (its link CAS lost). It is still all zero. Also used
 * by an image load for the buckets no chain of the image reaches (hidx_int.h). */
void hidx_overflow_free(hidx *h, uint64_t idx)
{
	hidx_bucket *b = hidx_overflow_at(h, idx);

	pthread_mutex_lock(&h->hx_ovf_lock);
	atomic_store_explicit(&b->hb_overflow, h->hx_ovf_free, memory_order_relaxed);
	h->hx_ovf_free = idx;
	h->hx_ovf_free_count++;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

int hidx_overflow_reserve(hidx *h, uint64_t n)
{
	int rc = 0;

	pthread_mutex_lock(&h->hx_ovf_lock);
	if (h->hx_ovf_next != 1 || n > HIDX_OVF_MAX_BUCKETS) {
		rc = -EINVAL;
		goto out;
	}
	while (h->hx_ovf_npages * HIDX_OVF_PAGE_BUCKETS < n) {
		hidx_bucket *mem = hidx_map(HIDX_OVF_PAGE_BYTES);

		if (!mem) {
			rc = -ENOMEM;   /* the pages mapped so far stay counted; hidx_reset unmaps them */
			goto out;
		}
		atomic_store_explicit(&h->hx_ovf_pages[h->hx_ovf_npages], mem, memory_order_release);
		h->hx_ovf_npages++;
	}
	h->hx_ovf_next = n + 1;
out:
	pthread_mutex_unlock(&h->hx_ovf_lock);
	return rc;
}

/* Map pages ahead until n overflow buckets can be handed out without a new mapping (a growth, before
 * its split: a copy must not fail half way). 0 or -ENOMEM. */
int hidx_overflow_prepare(hidx *h, uint64_t n)
{
	int rc = 0;

	pthread_mutex_lock(&h->hx_ovf_lock);
	for (;;) {
		uint64_t unused = h->hx_ovf_npages * HIDX_OVF_PAGE_BUCKETS - (h->hx_ovf_next - 1);
		uint64_t avail = unused + h->hx_ovf_free_count + h->hx_ovf_nreleased * HIDX_OVF_PAGE_BUCKETS;

		if (avail >= n)
			break;
		if (h->hx_ovf_npages == HIDX_OVF_MAX_PAGES) {
			rc = -ENOMEM;
			break;
		}
		hidx_bucket *mem = hidx_map(HIDX_OVF_PAGE_BYTES);
		if (!mem) {
			rc = -ENOMEM;
			break;
		}
		atomic_store_explicit(&h->hx_ovf_pages[h->hx_ovf_npages], mem, memory_order_release);
		h->hx_ovf_npages++;
	}
	pthread_mutex_unlock(&h->hx_ovf_lock);
	return rc;
}

/* ---- retirement (after a growth) -------------------------------------------------------------- */

/* Free buckets per overflow page, counting the old chains' as free: cnt[p], or UINT32_MAX for a
 * page given back already (lock held). */
static void hidx_ovf_count(hidx *h, const hidx_table *t, uint32_t *cnt)
{
	for (uint64_t r = 0; r < h->hx_ovf_nreleased; r++)
		cnt[h->hx_ovf_released[r]] = UINT32_MAX;
	for (uint64_t idx = h->hx_ovf_free; idx;
	     idx = atomic_load_explicit(&hidx_overflow_at(h, idx)->hb_overflow, memory_order_relaxed))
		cnt[(idx - 1) >> HIDX_OVF_PAGE_BITS]++;
	for (uint64_t i = 0; i <= t->ht_mask; i++)
		for (uint64_t l = atomic_load(&t->ht_buckets[i].hb_overflow) & HIDX_OVF_IDX_MASK; l;
		     l = atomic_load(&hidx_overflow_at(h, l)->hb_overflow) & HIDX_OVF_IDX_MASK)
			cnt[(l - 1) >> HIDX_OVF_PAGE_BITS]++;
}

/* The old table's overflow buckets, once no thread can walk its chains: a page wholly free with
 * them is given back to the kernel (the new chains took fresh pages while the old ones were still
 * read, so most of the old pages are); the rest go on the free list, zeroed (invariant 4). Without
 * memory for the counts, all of them go on the free list. */
void hidx_overflow_retire(hidx *h, const hidx_table *t)
{
	pthread_mutex_lock(&h->hx_ovf_lock);
	uint64_t np = h->hx_ovf_npages, bump = (h->hx_ovf_next - 1) >> HIDX_OVF_PAGE_BITS;
	uint32_t *cnt = calloc(np + 1, sizeof(*cnt));
	uint32_t *rel = realloc(h->hx_ovf_released, (np + 1) * sizeof(*rel));

	if (rel)
		h->hx_ovf_released = rel;
	if (cnt && rel)
		hidx_ovf_count(h, t, cnt);
	/* the page of the next never-used index is not whole: it stays */
	if (cnt && bump < np)
		cnt[bump] = 0;
#define PAGE_GOES(idx) (cnt && rel && cnt[((idx) - 1) >> HIDX_OVF_PAGE_BITS] == HIDX_OVF_PAGE_BUCKETS)
	/* the free list without the buckets of the pages that go */
	uint64_t head = h->hx_ovf_free, kept = 0;
	h->hx_ovf_free = 0;
	for (uint64_t idx = head, next; idx; idx = next) {
		hidx_bucket *b = hidx_overflow_at(h, idx);
		next = atomic_load_explicit(&b->hb_overflow, memory_order_relaxed);
		if (!PAGE_GOES(idx)) {
			atomic_store_explicit(&b->hb_overflow, h->hx_ovf_free, memory_order_relaxed);
			h->hx_ovf_free = idx;
			kept++;
		}
	}
	h->hx_ovf_free_count = kept;
	for (uint64_t i = 0; i <= t->ht_mask; i++) {
		uint64_t link = atomic_load(&t->ht_buckets[i].hb_overflow) & HIDX_OVF_IDX_MASK;

		while (link) {
			hidx_bucket *b = hidx_overflow_at(h, link);
			uint64_t next = atomic_load(&b->hb_overflow) & HIDX_OVF_IDX_MASK;

			if (!PAGE_GOES(link)) {
				memset((void *)b, 0, sizeof(*b));
				atomic_store_explicit(&b->hb_overflow, h->hx_ovf_free, memory_order_relaxed);
				h->hx_ovf_free = link;
				h->hx_ovf_free_count++;
			}
			link = next;
		}
	}
	for (uint64_t p = 0; cnt && rel && p < np; p++) {
		if (cnt[p] != HIDX_OVF_PAGE_BUCKETS)
			continue;
		hidx_bucket *mem = atomic_load_explicit(&h->hx_ovf_pages[p], memory_order_relaxed);
		/* zeros after the advice; where it is refused, by hand */
		if (madvise(mem, HIDX_OVF_PAGE_BYTES, MADV_DONTNEED) != 0)
			memset((void *)mem, 0, HIDX_OVF_PAGE_BYTES);
		h->hx_ovf_released[h->hx_ovf_nreleased++] = (uint32_t)p;
	}
#undef PAGE_GOES
	pthread_mutex_unlock(&h->hx_ovf_lock);
	free(cnt);
}

/* ---- reset, close and stats -------------------------------------------------------------------- */

void hidx_overflow_reset(hidx *h)
{
	pthread_mutex_lock(&h->hx_ovf_lock);
	for (uint64_t p = 0; p < h->hx_ovf_npages; p++) {
		munmap(atomic_load_explicit(&h->hx_ovf_pages[p], memory_order_relaxed), HIDX_OVF_PAGE_BYTES);
		atomic_store_explicit(&h->hx_ovf_pages[p], NULL, memory_order_relaxed);
	}
	h->hx_ovf_npages = 0;
	h->hx_ovf_next = 1;
	h->hx_ovf_free = 0;
	h->hx_ovf_free_count = 0;
	h->hx_ovf_nreleased = 0;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}

void hidx_overflow_close(hidx *h)
{
	if (h->hx_ovf_pages) {
		for (uint64_t p = 0; p < h->hx_ovf_npages; p++)
			munmap(atomic_load_explicit(&h->hx_ovf_pages[p], memory_order_relaxed),
			       HIDX_OVF_PAGE_BYTES);
		munmap(h->hx_ovf_pages, HIDX_OVF_MAX_PAGES * sizeof(*h->hx_ovf_pages));
	}
	free(h->hx_ovf_released);
}

void hidx_overflow_stats(hidx *h, uint64_t *buckets, uint64_t *bytes)
{
	pthread_mutex_lock(&h->hx_ovf_lock);
	/* linked buckets only: those on the free list or on pages given back are not in any chain */
	*buckets = h->hx_ovf_next - 1 - h->hx_ovf_free_count - h->hx_ovf_nreleased * HIDX_OVF_PAGE_BUCKETS;
	*bytes = (h->hx_ovf_npages - h->hx_ovf_nreleased) * HIDX_OVF_PAGE_BYTES;
	pthread_mutex_unlock(&h->hx_ovf_lock);
}
