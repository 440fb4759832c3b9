/*
 * memcap.c - the memory cap (--maxmemory): what the server allocates, counted by part; --memory and
 * --index sized inside the cap at start-up; the memory bit of the -OOM gate; the grammar of Redis's
 * client-output-buffer-limit (the check itself is client.c's client_obl_check, on the client's
 * worker).
 *
 * Sections: counting / start-up sizing / the -OOM gate / client-output-buffer-limit.
 *
 * Design notes:
 *  1. used_memory is counted from gauges, not asked of the allocator: each part that grows with the
 *     data or the clients has one, kept by its owner where the memory is taken or given back.
 *       log      allocated_pages * page_bytes: a frame holds memory only while a live page is in it
 *                (log/alloc.c note 3: released frames are punched out of the memfd).
 *       index    the main array and the overflow pages (hidx_stats).
 *       io       the sessions' read and fetch buffers, pooled or in use (hlog io_buffer_bytes).
 *       clients  per worker buf_bytes (query buffers, reply chunks and the chunk pool, the command
 *                scratch: client.c and worker.c change it where they malloc or free) plus
 *                sizeof(client) per connected client.
 *       aof      the AOF writers' buffers (each worker's aof_buf_bytes, refreshed by its worker).
 *     Not counted: the code, thread stacks, the allocator's own overhead and the checkpoint's
 *     transient buffers (a copy buffer and zstd's context, a few MiB while one runs). Start-up
 *     leaves MEMCAP_RESERVE of the cap for those and for the client buffers (note 2), so that
 *     RSS stays near the cap even though used_memory does not see them.
 *  2. Start-up (memcap_startup_check): with --maxmemory, --memory + the index's room + the reserve
 *     must fit in the cap. The room is what the index may double up to (memcap_index_max:
 *     --index-max-size, left out 1/16 of the cap, never below --index). An option the user left
 *     out (config_option_given) is sized from the cap instead of its default: --index starts at
 *     1/16 of the cap (a power of two) but at most its default, or 1/64th of the room when that
 *     is more (so the doublings reach the room), and never above --index-max-size; --page
 *     halved until the window holds MEMCAP_MIN_PAGES pages, --memory to what is left, whole pages.
 *     A given value that does not fit stops start-up with a message naming what to pass.
 *  3. The -OOM gate: g_srv.deny_oom's SPW_OOM_MEMORY bit is set while used_memory > maxmemory under
 *     noeviction, and commands.c answers CMD_DENYOOM commands Redis's -OOM. Every worker looks after
 *     its pass (memcap_worker_check), at most once per millisecond while the bit is clear and every
 *     pass while it is set, so that the pass of a FLUSHALL or a DEL that made room clears it before
 *     the next request is read. The gauges are relaxed snapshots and the workers compute the same
 *     sum, so any of them may set or clear the bit (fetch_or / fetch_and: compaction owns the disk
 *     bit of the same word). Nothing is counted per request.
 *  4. client-output-buffer-limit, as Redis 7.0's: three classes (normal, replica, pubsub; "slave"
 *     is replica's old name and CONFIG GET shows it so); a value is groups of four words, each
 *     group changing its class only; sizes take this server's size grammar (k/m/g, powers of 1024).
 *     Only normal clients exist here, so only the normal class is enforced; the others are kept for
 *     Redis config files and tools.
 */
#include "server/server_int.h"
#include "index/hidx.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MEMCAP_RESERVE_MIN (4ULL << 20)
/* What start-up leaves outside --memory and --index for the parts that are not data (note 2). */
#define MEMCAP_RESERVE(cap) SPW_MAX((cap) / 8, MEMCAP_RESERVE_MIN)
#define MEMCAP_MIN_PAGES   8          /* a --page left out is halved until the window holds this many */
#define MEMCAP_PAGE_MIN    (64ULL << 10)
#define MEMCAP_INDEX_DEF   (16ULL << 20)   /* --index's default: sizing never raises it */

/* ---------------- counting (note 1) ---------------- */

static _Atomic uint64_t peak_bytes, startup_bytes;

void memcap_usage_get(const hlog_info *hi, memcap_usage *u)
{
	int64_t bufs = 0;
	uint64_t aof = 0;
	for (int i = 0; i < g_srv.nworkers; i++) {
		bufs += __atomic_load_n(&g_srv.workers[i].buf_bytes, __ATOMIC_RELAXED);
		aof += __atomic_load_n(&g_srv.workers[i].aof_buf_bytes, __ATOMIC_RELAXED);
	}
	uint64_t nclients = atomic_load_explicit(&g_srv.nclients, memory_order_relaxed);
	u->log = hi->allocated_pages * hi->page_bytes;
	u->index = hi->index.memory_bytes + hi->index.overflow_bytes;
	u->io = hi->io_buffer_bytes;
	u->clients = (uint64_t)(bufs > 0 ? bufs : 0) + nclients * sizeof(client);
	u->aof = aof;
	u->total = u->log + u->index + u->io + u->clients + u->aof;
	uint64_t p = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
	while (u->total > p && !atomic_compare_exchange_weak(&peak_bytes, &p, u->total))
		;
}

uint64_t memcap_peak(void) { return atomic_load_explicit(&peak_bytes, memory_order_relaxed); }

void memcap_startup_record(void)
{
	hlog_info hi;
	memcap_usage u;
	hlog_info_get(g_srv.store, &hi);
	memcap_usage_get(&hi, &u);
	atomic_store(&startup_bytes, u.total);
}

uint64_t memcap_startup_bytes(void) { return atomic_load(&startup_bytes); }

/* ---------------- start-up sizing (note 2) ---------------- */

/* A size as a user would pass it: the largest unit that divides it ("64mb"), else bytes. */
static const char *size_text(char *buf, size_t cap, uint64_t n)
{
	static const char *const units[] = { "gb", "mb", "kb" };
	for (int i = 0; i < 3; i++) {
		uint64_t u = 1ULL << (10 * (3 - i));
		if (n && n % u == 0) {
			snprintf(buf, cap, "%" PRIu64 "%s", n / u, units[i]);
			return buf;
		}
	}
	snprintf(buf, cap, "%" PRIu64, n);
	return buf;
}

static uint64_t floor_pow2(uint64_t x)
{
	return x ? 1ULL << (63 - __builtin_clzll(x)) : 0;
}

/* The pages the log's window must hold (config.c's checks, with a storage tier TIER_MIN_PAGES). */
static uint64_t min_pages(void) { return g_cfg.storage_tier ? TIER_MIN_PAGES : 2; }

/* --memory left out: what the cap leaves after the index and the reserve, in whole pages, with
 * --page halved (when left out too) until that holds MEMCAP_MIN_PAGES of them. -1 after a
 * message when not even the minimum window fits. */
static int memcap_memory_size(uint64_t cap, uint64_t reserve)
{
	char a[32], b[32], c[32], d[32], e[32];
	uint64_t idx = memcap_index_max();
	uint64_t room = cap > idx + reserve ? cap - idx - reserve : 0;
	if (!config_option_given("page")) {
		while (g_cfg.page_bytes > MEMCAP_PAGE_MIN && room / g_cfg.page_bytes < MEMCAP_MIN_PAGES)
			g_cfg.page_bytes /= 2;
		config_option_sized("page");
	}
	uint64_t mem = room - room % g_cfg.page_bytes;
	if (mem < min_pages() * g_cfg.page_bytes) {
		fprintf(stderr, "spillway: --maxmemory %s leaves %s for the log after the index's %s (what it "
		        "may grow to: --index-max-size) and %s for "
		        "client buffers, IO and checkpoints (1/8 of the cap, at least 4mb): less than %" PRIu64
		        " pages of --page %s; pass a larger --maxmemory, or a smaller --index-max-size or --page\n",
		        size_text(a, sizeof(a), cap), size_text(b, sizeof(b), room),
		        size_text(c, sizeof(c), idx), size_text(d, sizeof(d), reserve),
		        min_pages(), size_text(e, sizeof(e), g_cfg.page_bytes));
		return -1;
	}
	g_cfg.memory_bytes = mem;
	config_option_sized("memory");
	return 0;
}

/* What the index can really reach: hidx_open's start (--index down to a power of two of buckets)
 * doubled while within the limit, at most HIDX_GROW_MAX times, so that no room is held back that
 * growth could never use. */
uint64_t memcap_index_max(void)
{
	uint64_t start = SPW_MAX(floor_pow2(g_cfg.index_bytes / HIDX_BUCKET_BYTES), 64ULL) * HIDX_BUCKET_BYTES;
	uint64_t m = g_cfg.index_max_size;
	if (!m)
		m = g_cfg.maxmemory ? floor_pow2(g_cfg.maxmemory / 16) : UINT64_MAX;
	uint64_t r = start;
	for (unsigned k = 0; k < HIDX_GROW_MAX && r <= m / 2; k++)
		r *= 2;
	return r;
}

/* The smallest cap, in whole MiB, that holds n bytes of log and index beside its reserve. */
static uint64_t memcap_cap_needed(uint64_t n)
{
	uint64_t cap = SPW_MAX(n + (n + 6) / 7, n + MEMCAP_RESERVE_MIN);   /* n + cap / 8 <= cap */
	return SPW_ALIGN_UP(cap, 1ULL << 20);
}

int memcap_startup_check(void)
{
	char a[32], b[32], c[32], d[32], e[32], f[32];
	uint64_t cap = g_cfg.maxmemory;
	if (!cap)
		return 0;
	uint64_t reserve = MEMCAP_RESERVE(cap);
	if (!config_option_given("index")) {
		/* its default, or less in a small cap; more in a cap so large that the doublings
		 * would not reach 1/16 of it from the default */
		uint64_t idx = floor_pow2(cap / 16);
		uint64_t start = SPW_MAX(SPW_MIN(idx, MEMCAP_INDEX_DEF), idx >> HIDX_GROW_MAX);
		if (g_cfg.index_max_size)   /* never above what the user allows it to reach */
			start = SPW_MIN(start, floor_pow2(g_cfg.index_max_size));
		g_cfg.index_bytes = SPW_MAX(start, (uint64_t)HIDX_BUCKET_BYTES * 64);
		config_option_sized("index");
	}
	if (!config_option_given("memory")) {
		if (memcap_memory_size(cap, reserve) < 0)
			return -1;
	} else if (g_cfg.memory_bytes + memcap_index_max() + reserve > cap) {
		fprintf(stderr, "spillway: --memory %s and --index %s (growing up to %s: --index-max-size) "
		        "do not fit inside --maxmemory %s with "
		        "the %s it keeps for client buffers, IO and checkpoints (1/8 of the cap, at least "
		        "4mb); pass --maxmemory %s or more, or a smaller --memory (left out, --memory is sized "
		        "from --maxmemory)\n", size_text(a, sizeof(a), g_cfg.memory_bytes),
		        size_text(f, sizeof(f), g_cfg.index_bytes),
		        size_text(b, sizeof(b), memcap_index_max()), size_text(c, sizeof(c), cap),
		        size_text(d, sizeof(d), reserve),
		        size_text(e, sizeof(e), memcap_cap_needed(g_cfg.memory_bytes + memcap_index_max())));
		return -1;
	}
	spw_log(SPW_LOG_NOTICE, 0, "maxmemory %s: --memory %s, --index %s (growing up to %s), --page %s, "
	        "%s for the rest", size_text(a, sizeof(a), cap), size_text(b, sizeof(b), g_cfg.memory_bytes),
	        size_text(c, sizeof(c), g_cfg.index_bytes), size_text(f, sizeof(f), memcap_index_max()),
	        size_text(d, sizeof(d), g_cfg.page_bytes),
	        size_text(e, sizeof(e), cap - g_cfg.memory_bytes - memcap_index_max()));
	return 0;
}

void memcap_config_changed(void)
{
	uint64_t cap = __atomic_load_n(&g_cfg.maxmemory, __ATOMIC_RELAXED);
	if (!cap || !g_srv.store)
		return;   /* start-up: memcap_startup_check looks at it */
	hlog_info hi;
	memcap_usage u;
	hlog_info_get(g_srv.store, &hi);
	memcap_usage_get(&hi, &u);
	if (u.total > cap)
		spw_log(SPW_LOG_WARNING, 0, "WARNING: the new maxmemory value set via CONFIG SET (%" PRIu64
		        ") is smaller than the current memory usage (%" PRIu64 "). This will result in key "
		        "eviction and/or the inability to accept new write commands depending on the "
		        "maxmemory-policy.", cap, u.total);
}

/* ---------------- the -OOM gate (note 3) ---------------- */

void memcap_worker_check(worker *w)
{
	uint64_t cap = __atomic_load_n(&g_cfg.maxmemory, __ATOMIC_RELAXED);
	bool on = atomic_load_explicit(&g_srv.deny_oom, memory_order_relaxed) & SPW_OOM_MEMORY;
	if (SPW_LIKELY(!cap && !on))
		return;
	if (!on && w->now_ms == w->mem_check_ms)
		return;
	w->mem_check_ms = w->now_ms;
	hlog_info hi;
	memcap_usage u;
	hlog_info_get(g_srv.store, &hi);
	memcap_usage_get(&hi, &u);
	bool over = cap && u.total > cap &&
	            __atomic_load_n(&g_cfg.maxmemory_policy, __ATOMIC_RELAXED) == SPW_POLICY_NOEVICTION;
	if (over && !on) {
		if (!(atomic_fetch_or(&g_srv.deny_oom, SPW_OOM_MEMORY) & SPW_OOM_MEMORY))
			spw_log(SPW_LOG_VERBOSE, 0, "used_memory %" PRIu64 " > maxmemory %" PRIu64 ": writes get "
			        "-OOM", u.total, cap);
	} else if (!over && on) {
		if (atomic_fetch_and(&g_srv.deny_oom, ~SPW_OOM_MEMORY) & SPW_OOM_MEMORY)
			spw_log(SPW_LOG_VERBOSE, 0, "used_memory %" PRIu64 " is within maxmemory again", u.total);
	}
}

/* ---------------- client-output-buffer-limit (note 4) ---------------- */

static const char *const obl_class_names[SPW_OBL_CLASSES] = { "normal", "slave", "pubsub" };

/* Redis's getClientTypeByName, less master (its limits are not configurable). */
static int obl_class_find(const char *w, size_t n)
{
	if (n == 6 && !strncasecmp(w, "normal", 6))
		return SPW_OBL_NORMAL;
	if ((n == 5 && !strncasecmp(w, "slave", 5)) || (n == 7 && !strncasecmp(w, "replica", 7)))
		return SPW_OBL_REPLICA;
	if (n == 6 && !strncasecmp(w, "pubsub", 6))
		return SPW_OBL_PUBSUB;
	return -1;
}

/* One word of a value (split on spaces, as Redis's sdssplitlen) into buf. */
static bool obl_word(const char *w, size_t n, char *buf, size_t cap)
{
	if (n == 0 || n >= cap)
		return false;
	memcpy(buf, w, n);
	buf[n] = '\0';
	return true;
}

int memcap_obl_parse(const char *v, size_t n, client_obl *cfg, char *err, size_t errlen)
{
	const char *words[4 * SPW_OBL_CLASSES * 4];
	size_t lens[SPW_ARRAY_LEN(words)];
	int nw = 0;
	for (size_t i = 0; i < n;) {
		while (i < n && v[i] == ' ')
			i++;
		if (i == n)
			break;
		size_t j = i;
		while (j < n && v[j] != ' ')
			j++;
		if (nw == (int)SPW_ARRAY_LEN(words)) {
			snprintf(err, errlen, "Wrong number of arguments in buffer limit configuration.");
			return -EINVAL;
		}
		words[nw] = v + i;
		lens[nw++] = j - i;
		i = j;
	}
	if (nw % 4) {
		snprintf(err, errlen, "Wrong number of arguments in buffer limit configuration.");
		return -EINVAL;
	}
	client_obl next[SPW_OBL_CLASSES];
	memcpy(next, cfg, sizeof(next));
	for (int g = 0; g < nw; g += 4) {
		char hard[32], soft[32], secs[32];
		int cls = obl_class_find(words[g], lens[g]);
		if (cls < 0) {
			snprintf(err, errlen, "Invalid client class specified in buffer limit configuration.");
			return -EINVAL;
		}
		uint64_t h, s;
		long long t;
		if (!obl_word(words[g + 1], lens[g + 1], hard, sizeof(hard)) ||
		    !obl_word(words[g + 2], lens[g + 2], soft, sizeof(soft)) ||
		    !obl_word(words[g + 3], lens[g + 3], secs, sizeof(secs)) || spw_parse_size(hard, &h) < 0 ||
		    spw_parse_size(soft, &s) < 0 || !spw_parse_ll(secs, strlen(secs), &t) || t < 0) {
			snprintf(err, errlen, "Error in hard, soft or soft_seconds setting in buffer limit "
			         "configuration.");
			return -EINVAL;
		}
		next[cls] = (client_obl){ .hard = h, .soft = s, .soft_seconds = (uint64_t)t };
	}
	memcpy(cfg, next, sizeof(next));
	return 0;
}

const char *memcap_obl_format(const client_obl *obl, char *buf, size_t cap)
{
	size_t k = 0;
	buf[0] = '\0';
	for (int i = 0; i < SPW_OBL_CLASSES && k < cap; i++)
		k += (size_t)snprintf(buf + k, cap - k, "%s%s %" PRIu64 " %" PRIu64 " %" PRIu64, i ? " " : "",
		                      obl_class_names[i], obl[i].hard, obl[i].soft, obl[i].soft_seconds);
	return buf;
}

void memcap_worker_refresh(worker *w)
{
	uint64_t hard = __atomic_load_n(&g_cfg.obl[SPW_OBL_NORMAL].hard, __ATOMIC_RELAXED);
	uint64_t soft = __atomic_load_n(&g_cfg.obl[SPW_OBL_NORMAL].soft, __ATOMIC_RELAXED);
	uint64_t min = UINT64_MAX;
	if (hard)
		min = hard;
	if (soft && soft < min)
		min = soft;
	w->obl_min = min;
	client_chunk_pool_limit(w);
}
