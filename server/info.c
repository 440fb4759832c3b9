/*
 * info.c - INFO and the counters behind it: the sums over the workers, the rate sampler and the
 * CONFIG RESETSTAT baselines (Redis's genRedisInfoString).
 *
 * Design notes:
 *  1. Stats of other workers are read with relaxed atomic loads of counters their owners increment
 *     plainly (worker.c note 5): each value is a consistent 64-bit snapshot, the set of them is not
 *     (as Redis's INFO with io-threads). Nothing here is on the request hot path.
 *  2. CONFIG RESETSTAT does not write other workers' counters (that would race with their
 *     increments): it records each worker's current values as a baseline, and INFO reports
 *     counters minus baseline. Baselines are written under g_srv.stats_lock.
 *  3. Rates (instantaneous_ops_per_sec, the kbps, worker_N_busy_pct) have no timer behind them,
 *     so an idle server never wakes up: INFO computes them over the window since the previous
 *     sample, and takes a new sample when the last one is at least a second old (the first INFO
 *     measures since start). Two INFO calls a second apart give the rates of that second.
 *  4. The storage tier in INFO (only with --storage-tier, so memory-only INFO is unchanged): the
 *     store's counters (hlog_info) in "# Stats" as tier_* fields next to the server's own (parked
 *     commands, IO error replies, the sg_* look-ahead counters of scatter-gather GET), with CONFIG
 *     RESETSTAT baselines kept here since the store's counters only grow (tier_queue_depth_max is a
 *     maximum, not reset); "# Store" names the device and shows the sticky store error
 *     (Log.StoreError); "# Memory" adds the log's pages in memory and the index bytes per key.
 *  5. "# Memory" shows used_memory and its parts as the memory cap counts them (memcap.c note 1),
 *     under Redis 7.0's names where Redis has the field (used_memory_dataset is the log's pages,
 *     used_memory_overhead the rest, used_memory_dataset_perc the log's share of used_memory
 *     (Redis leaves its start-up usage out of that share), mem_clients_normal and mem_aof_buffer the client and AOF
 *     parts) and used_memory_<part> for each part; the parts add up to used_memory exactly.
 */
#include "server/server_int.h"
#include "device/device.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

/* ---------------- CONFIG RESETSTAT ---------------- */

/* CONFIG RESETSTAT baseline of the store's tier counters (note 4). Under g_srv.stats_lock. */
static hlog_info tier_base;

/* Zero the INFO counters: record each worker's current values as its baseline (note 2). */
void info_stats_reset(void)
{
	int slots = command_slots();
	pthread_mutex_lock(&g_srv.stats_lock);
	hlog_info_get(g_srv.store, &tier_base);
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		worker_stats *s = &w->stats, *b = &w->stats_base;
#define BASE(f, group, info, doc) b->f = rd64(&s->f);
		SERVER_COUNTERS(BASE)
#undef BASE
		for (int j = 0; j < slots; j++) {
			b->cmd_calls[j] = rd64(&s->cmd_calls[j]);
			b->cmd_ticks[j] = rd64(&s->cmd_ticks[j]);
			b->cmd_failed[j] = rd64(&s->cmd_failed[j]);
			b->cmd_rejected[j] = rd64(&s->cmd_rejected[j]);
		}
	}
	pthread_mutex_unlock(&g_srv.stats_lock);
	expire_stats_reset();
}

/* ---------------- INFO ---------------- */

enum {
	SEC_SERVER = 1 << 0, SEC_CLIENTS = 1 << 1, SEC_MEMORY = 1 << 2, SEC_PERSISTENCE = 1 << 3,
	SEC_STATS = 1 << 4, SEC_REPLICATION = 1 << 5, SEC_CPU = 1 << 6, SEC_STORE = 1 << 7,
	SEC_COMMANDSTATS = 1 << 8, SEC_CLUSTER = 1 << 9, SEC_KEYSPACE = 1 << 10,
};
#define SEC_DEFAULT (SEC_SERVER | SEC_CLIENTS | SEC_MEMORY | SEC_PERSISTENCE | SEC_STATS | \
                     SEC_REPLICATION | SEC_CPU | SEC_STORE | SEC_CLUSTER | SEC_KEYSPACE)
#define SEC_ALL (SEC_DEFAULT | SEC_COMMANDSTATS)

static const struct { const char *name; int bit; } sections[] = {
	{ "server", SEC_SERVER },     { "clients", SEC_CLIENTS },         { "memory", SEC_MEMORY },
	{ "persistence", SEC_PERSISTENCE }, { "stats", SEC_STATS },     { "replication", SEC_REPLICATION },
	{ "cpu", SEC_CPU },           { "store", SEC_STORE },             { "commandstats", SEC_COMMANDSTATS },
	{ "cluster", SEC_CLUSTER },   { "keyspace", SEC_KEYSPACE },
	{ "default", SEC_DEFAULT },   { "all", SEC_ALL },                 { "everything", SEC_ALL },
};

void server_counters_sum(server_counters *s, bool raw)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < g_srv.nworkers; i++) {
		const worker_stats *w = &g_srv.workers[i].stats, *b = &g_srv.workers[i].stats_base;
#define ADD(f, group, info, doc) s->f += rd64(&w->f) - (raw ? 0 : rd64(&b->f));
		SERVER_COUNTERS(ADD)
#undef ADD
	}
}

#define DEF(f, group, info, doc) { #f, info, doc, group, offsetof(server_counters, f) },
const server_counter_def server_counter_defs[] = { SERVER_COUNTERS(DEF) };
#undef DEF
const unsigned server_counter_count = SPW_ARRAY_LEN(server_counter_defs);

/* The INFO lines of the server counters of one group, in table order; after expired_keys, the
 * expirer's fields, where Redis 7.0 prints them (expire.c note 4). */
static void info_counters(sbuf *b, const server_counters *s, int group)
{
	for (unsigned i = 0; i < server_counter_count; i++) {
		const server_counter_def *d = &server_counter_defs[i];
		if (d->group != group)
			continue;
		sb_printf(b, "%s:%llu\r\n", d->info,
		          (unsigned long long)*(const uint64_t *)((const char *)s + d->off));
		if (d->off == offsetof(server_counters, expired_keys))
			expire_info(b);
	}
}

/* The rate sampler (note 3). Guarded by g_srv.stats_lock. */
static struct {
	uint64_t t_ns, commands, net_in, net_out;
	uint64_t *busy;
	double ops, in_kbps, out_kbps;
	double *busy_pct;
	bool have;
} rate;

static void rates_update(void)
{
	int nw = g_srv.nworkers;
	uint64_t now = spw_mono_ns();
	server_counters s;
	if (!rate.busy) {
		rate.busy = calloc((size_t)nw, sizeof(uint64_t));
		rate.busy_pct = calloc((size_t)nw, sizeof(double));
		if (!rate.busy || !rate.busy_pct) {
			free(rate.busy);
			free(rate.busy_pct);
			rate.busy = NULL;
			rate.busy_pct = NULL;
			return;
		}
		rate.t_ns = g_srv.start_mono_ns;
	}
	if (rate.have && now - rate.t_ns < 1000000000ULL)
		return;
	server_counters_sum(&s, true);
	double dt = (double)(now - rate.t_ns) / 1e9;
	if (dt <= 0)
		return;
	rate.ops = (double)(s.commands - rate.commands) / dt;
	rate.in_kbps = (double)(s.net_in - rate.net_in) / 1024.0 / dt;
	rate.out_kbps = (double)(s.net_out - rate.net_out) / 1024.0 / dt;
	for (int i = 0; i < nw; i++) {
		uint64_t b = rd64(&g_srv.workers[i].stats.busy_ns);
		rate.busy_pct[i] = 100.0 * (double)(b - rate.busy[i]) / 1e9 / dt;
		if (rate.busy_pct[i] > 100.0)
			rate.busy_pct[i] = 100.0;
		rate.busy[i] = b;
	}
	rate.commands = s.commands;
	rate.net_in = s.net_in;
	rate.net_out = s.net_out;
	rate.t_ns = now;
	rate.have = true;
}

/* Redis's bytesToHuman. */
static const char *human(char *buf, size_t cap, uint64_t n)
{
	double d = (double)n;
	if (n < 1024)
		snprintf(buf, cap, "%lluB", (unsigned long long)n);
	else if (n < (1ULL << 20))
		snprintf(buf, cap, "%.2fK", d / 1024);
	else if (n < (1ULL << 30))
		snprintf(buf, cap, "%.2fM", d / (1 << 20));
	else if (n < (1ULL << 40))
		snprintf(buf, cap, "%.2fG", d / (1ULL << 30));
	else if (n < (1ULL << 50))
		snprintf(buf, cap, "%.2fT", d / (1ULL << 40));
	else
		snprintf(buf, cap, "%.2fP", d / (1ULL << 50));
	return buf;
}

static uint64_t rss_bytes(void)
{
	FILE *fp = fopen("/proc/self/statm", "r");
	unsigned long long size = 0, rss = 0;
	if (fp) {
		if (fscanf(fp, "%llu %llu", &size, &rss) != 2)
			rss = 0;
		fclose(fp);
	}
	return rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static pthread_once_t uname_once = PTHREAD_ONCE_INIT;
static struct utsname uname_buf;
static void uname_init(void) { uname(&uname_buf); }

static void info_server(sbuf *b)
{
	int64_t now_us = spw_time_us();
	int64_t up = (int64_t)((spw_mono_ns() - g_srv.start_mono_ns) / 1000000000ULL);
	pthread_once(&uname_once, uname_init);
	sb_printf(b, "# Server\r\n"
	          "redis_version:%s\r\n"
	          "redis_git_sha1:00000000\r\n"
	          "redis_git_dirty:0\r\n"
	          "redis_build_id:0\r\n"
	          "redis_mode:standalone\r\n"
	          "os:%s %s %s\r\n"
	          "arch_bits:%d\r\n"
	          "monotonic_clock:POSIX clock_gettime\r\n"
	          "multiplexing_api:epoll\r\n"
	          "atomicvar_api:c11-builtin\r\n"
	          "gcc_version:%d.%d.%d\r\n"
	          "process_id:%d\r\n"
	          "process_supervised:no\r\n"
	          "run_id:%s\r\n"
	          "tcp_port:%d\r\n"
	          "server_time_usec:%lld\r\n"
	          "uptime_in_seconds:%lld\r\n"
	          "uptime_in_days:%lld\r\n"
	          "executable:%s\r\n"
	          "config_file:%s\r\n"
	          "spillway_version:%s\r\n"
	          "threads:%d\r\n",
	          SPW_REDIS_VERSION, uname_buf.sysname, uname_buf.release, uname_buf.machine,
	          (int)(sizeof(long) * 8),
#ifdef __GNUC__
	          __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
	          0, 0, 0,
#endif
	          g_srv.pid, g_srv.run_id, g_cfg.port, (long long)now_us, (long long)up,
	          (long long)(up / 86400), g_srv.executable, g_srv.config_file_abs, SPW_VERSION,
	          g_srv.nworkers);
}

static void info_clients(sbuf *b)
{
	sb_printf(b, "# Clients\r\n"
	          "connected_clients:%u\r\n"
	          "cluster_connections:0\r\n"
	          "maxclients:%d\r\n"
	          "blocked_clients:0\r\n"
	          "tracking_clients:0\r\n"
	          "clients_in_timeout_table:0\r\n",
	          atomic_load_explicit(&g_srv.nclients, memory_order_relaxed),
	          __atomic_load_n(&g_cfg.maxclients, __ATOMIC_RELAXED));
}

/* config_get_matching's callback: the value of the one option asked for. */
static void option_value_copy(void *ctx, const char *name, const char *value)
{
	(void)name;
	snprintf(ctx, 32, "%s", value);
}

/* Redis 7.0's # Memory fields that this server can fill, in Redis's order, with the parts of
 * used_memory (memcap.c note 1) after its dataset lines, then the log's own (note 4). */
static void info_memory(sbuf *b, const hlog_info *hi)
{
	char h1[32], h2[32], h3[32], h4[32], h5[32], policy[32] = "";
	memcap_usage u;
	memcap_usage_get(hi, &u);
	uint64_t peak = SPW_MAX(memcap_peak(), u.total), rss = rss_bytes();
	uint64_t startup = memcap_startup_bytes(), cap = __atomic_load_n(&g_cfg.maxmemory, __ATOMIC_RELAXED);
	struct sysinfo si;
	uint64_t total = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
	config_get_matching("maxmemory-policy", 16, option_value_copy, policy);
	sb_printf(b, "# Memory\r\n"
	          "used_memory:%llu\r\n"
	          "used_memory_human:%s\r\n"
	          "used_memory_rss:%llu\r\n"
	          "used_memory_rss_human:%s\r\n"
	          "used_memory_peak:%llu\r\n"
	          "used_memory_peak_human:%s\r\n"
	          "used_memory_peak_perc:%.2f%%\r\n"
	          "used_memory_overhead:%llu\r\n"
	          "used_memory_startup:%llu\r\n"
	          "used_memory_dataset:%llu\r\n"
	          "used_memory_dataset_perc:%.2f%%\r\n",
	          (unsigned long long)u.total, human(h1, sizeof(h1), u.total), (unsigned long long)rss,
	          human(h2, sizeof(h2), rss), (unsigned long long)peak, human(h3, sizeof(h3), peak),
	          peak ? 100.0 * (double)u.total / (double)peak : 0.0,
	          (unsigned long long)(u.total - u.log), (unsigned long long)startup,
	          (unsigned long long)u.log, u.total ? 100.0 * (double)u.log / (double)u.total : 0.0);
	sb_printf(b, "used_memory_log:%llu\r\n"
	          "used_memory_index:%llu\r\n"
	          "used_memory_io:%llu\r\n"
	          "used_memory_clients:%llu\r\n"
	          "used_memory_aof:%llu\r\n"
	          "total_system_memory:%llu\r\n"
	          "total_system_memory_human:%s\r\n"
	          "maxmemory:%llu\r\n"
	          "maxmemory_human:%s\r\n"
	          "maxmemory_policy:%s\r\n"
	          "mem_fragmentation_ratio:%.2f\r\n"
	          "mem_fragmentation_bytes:%lld\r\n"
	          "mem_not_counted_for_evict:0\r\n"
	          "mem_clients_normal:%llu\r\n"
	          "mem_aof_buffer:%llu\r\n",
	          (unsigned long long)u.log, (unsigned long long)u.index, (unsigned long long)u.io,
	          (unsigned long long)u.clients, (unsigned long long)u.aof, (unsigned long long)total,
	          human(h4, sizeof(h4), total), (unsigned long long)cap, human(h5, sizeof(h5), cap), policy,
	          u.total ? (double)rss / (double)u.total : 0.0, (long long)rss - (long long)u.total,
	          (unsigned long long)u.clients, (unsigned long long)u.aof);
	sb_printf(b, "log_max_memory:%llu\r\n"
	          "log_pages_in_memory:%llu\r\n"
	          "log_page_bytes:%llu\r\n"
	          "index_bytes_per_key:%.2f\r\n"
	          "mem_allocator:libc\r\n",
	          (unsigned long long)hi->memory_bytes, (unsigned long long)hi->allocated_pages,
	          (unsigned long long)hi->page_bytes,
	          hi->keys ? (double)u.index / (double)hi->keys : 0.0);
}

static void info_persistence(sbuf *b)
{
	persist_info(b);   /* persist.c owns the state it shows */
}

/* The storage tier's lines of # Stats: the server's SRV_CTR_TIER counters, every store counter
 * with an INFO name (HLOG_COUNTERS, log/hlog.h), less the CONFIG RESETSTAT baseline z (a MAX is
 * shown as is), then the ratios made of them and the server's own scatter-gather counters
 * (SRV_CTR_SG, park.c note 3). */
static void info_tier(sbuf *b, const server_counters *s, const hlog_info *hi, const hlog_info *z)
{
	info_counters(b, s, SRV_CTR_TIER);
	for (unsigned i = 0; i < hlog_counter_count; i++) {
		const hlog_counter_def *d = &hlog_counter_defs[i];
		if (!d->info)
			continue;
		uint64_t v = *(const uint64_t *)((const char *)hi + d->off);
		if (d->kind == HLOG_CTR_SUM)
			v -= *(const uint64_t *)((const char *)z + d->off);
		sb_printf(b, "%s:%llu\r\n", d->info, (unsigned long long)v);
	}
	uint64_t pend = hi->pending_reads - z->pending_reads, reads = hi->device_reads - z->device_reads;
	uint64_t subs = hi->device_submits - z->device_submits;
	sb_printf(b, "tier_reads_per_pending_op:%.3f\r\n"
	          "tier_reads_per_submit:%.3f\r\n"
	          "tier_queue_depth_mean:%.3f\r\n",
	          pend ? (double)reads / (double)pend : 0.0, subs ? (double)reads / (double)subs : 0.0,
	          subs ? (double)(hi->queue_depth_sum - z->queue_depth_sum) / (double)subs : 0.0);
	/* Look-aheads run by parked GETs/MGETs, the keys they prefetched and how many of those queued
	 * a read; pending reads per such park counts the parked request's own read as one. */
	info_counters(b, s, SRV_CTR_SG);
	sb_printf(b, "sg_pending_per_park:%.3f\r\n",
	          s->sg_runs ? (double)(s->sg_runs + s->sg_pending) / (double)s->sg_runs : 0.0);
}

static void info_stats(sbuf *b)
{
	server_counters s;
	server_counters_sum(&s, false);
	/* The store removes expired keys, lazily on a read and actively for the expirer, so it is the
	 * one that counts them; less its CONFIG RESETSTAT baseline, as the rest. */
	hlog_info hi;
	hlog_info_get(g_srv.store, &hi);
	pthread_mutex_lock(&g_srv.stats_lock);
	s.expired_keys += hi.expired_keys - tier_base.expired_keys;
	rates_update();
	/* The counters first (SERVER_COUNTERS' order), then what is not a counter. */
	sb_printf(b, "# Stats\r\n");
	info_counters(b, &s, SRV_CTR_STATS);
	sb_printf(b, "instantaneous_ops_per_sec:%llu\r\n"
	          "instantaneous_input_kbps:%.2f\r\n"
	          "instantaneous_output_kbps:%.2f\r\n"
	          "evicted_keys:%llu\r\n"
	          "compact_parts_dropped:%llu\r\n"
	          "pubsub_channels:0\r\n"
	          "pubsub_patterns:0\r\n"
	          "workers:%d\r\n",
	          (unsigned long long)(rate.ops + 0.5), rate.in_kbps, rate.out_kbps,
	          (unsigned long long)hi.evicted_keys,
	          (unsigned long long)(hi.compact_parts_dropped - tier_base.compact_parts_dropped), g_srv.nworkers);
	for (int i = 0; i < g_srv.nworkers; i++)
		sb_printf(b, "worker_%d_busy_pct:%.2f\r\n", i, rate.busy_pct ? rate.busy_pct[i] : 0.0);
	if (g_srv.dev)
		info_tier(b, &s, &hi, &tier_base);
	pthread_mutex_unlock(&g_srv.stats_lock);
}

static void info_replication(sbuf *b)
{
	sb_printf(b, "# Replication\r\n"
	          "role:master\r\n"
	          "connected_slaves:0\r\n"
	          "master_failover_state:no-failover\r\n"
	          "master_replid:%s\r\n"
	          "master_replid2:0000000000000000000000000000000000000000\r\n"
	          "master_repl_offset:0\r\n"
	          "second_repl_offset:-1\r\n"
	          "repl_backlog_active:0\r\n",
	          g_srv.run_id);
}

static void info_cpu(sbuf *b)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	sb_printf(b, "# CPU\r\n"
	          "used_cpu_sys:%ld.%06ld\r\n"
	          "used_cpu_user:%ld.%06ld\r\n",
	          (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
	          (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
}

/* Garnet's "Store" fields, in Garnet's order, then the log's own counters. */
static void info_store(sbuf *b, const hlog_info *hi)
{
	uint64_t idx_total = hi->index.memory_bytes + hi->index.overflow_bytes;
	sb_printf(b, "# Store\r\n"
	          "CurrentVersion:1\r\n"
	          "LastCheckpointedVersion:0\r\n"
	          "SystemState:REST\r\n"
	          "IndexBucketCount:%llu\r\n"
	          "IndexBucketSizeBytes:%d\r\n"
	          "IndexMemorySizeBytes:%llu\r\n"
	          "IndexOverflowBucketCount:%llu\r\n"
	          "IndexOverflowMemorySizeBytes:%llu\r\n"
	          "IndexTotalMemorySizeBytes:%llu\r\n"
	          "LogDir:%s\r\n"
	          "Log.PageSizeBytes:%llu\r\n"
	          "Log.MaxPageCount:%llu\r\n"
	          "Log.AllocatedPageCount:%llu\r\n"
	          "Log.MaxMemorySizeBytes:%llu\r\n"
	          "Log.CurrentMemorySizeBytes:%llu\r\n"
	          "Log.BeginAddress:%llu\r\n"
	          "Log.HeadAddress:%llu\r\n"
	          "Log.SafeReadOnlyAddress:%llu\r\n"
	          "Log.ReadOnlyAddress:%llu\r\n"
	          "Log.FlushedUntilAddress:%llu\r\n"
	          "Log.TailAddress:%llu\r\n"
	          "Log.InPlaceUpdates:%llu\r\n"
	          "Log.RCUUpdates:%llu\r\n"
	          "Log.Appends:%llu\r\n"
	          "Log.FullErrors:%llu\r\n"
	          "Log.Retries:%llu\r\n"
	          "Log.MaxRecordPayloadBytes:%llu\r\n"
	          "Log.StorageTier:%s\r\n"
	          "Log.StoreError:%s\r\n"
	          "index_grows:%llu\r\n"
	          "index_max_bytes:%llu\r\n",
	          (unsigned long long)hi->index.buckets, HIDX_BUCKET_BYTES,
	          (unsigned long long)hi->index.memory_bytes, (unsigned long long)hi->index.overflow_buckets,
	          (unsigned long long)hi->index.overflow_bytes, (unsigned long long)idx_total,
	          g_cfg.logdir[0] ? g_cfg.logdir : g_cfg.dir,
	          (unsigned long long)hi->page_bytes, (unsigned long long)hi->max_pages,
	          (unsigned long long)hi->allocated_pages, (unsigned long long)hi->memory_bytes,
	          (unsigned long long)(hi->allocated_pages * hi->page_bytes),
	          (unsigned long long)hi->begin, (unsigned long long)hi->head,
	          (unsigned long long)hi->safe_read_only, (unsigned long long)hi->read_only,
	          (unsigned long long)hi->flushed_until, (unsigned long long)hi->tail,
	          (unsigned long long)hi->inplace_updates, (unsigned long long)hi->rcu_updates,
	          (unsigned long long)hi->appends, (unsigned long long)hi->log_full_errors,
	          (unsigned long long)hi->retries, (unsigned long long)hlog_max_record_payload(g_srv.store),
	          g_srv.dev ? g_srv.dev->name : "none",
	          hi->store_error ? spw_strerror(hi->store_error) : "ok",
	          (unsigned long long)hi->index.grows, (unsigned long long)hi->index_max_bytes);
	compact_info(b);   /* compact.c owns the state it shows */
}

static void info_commandstats(sbuf *b)
{
	sb_printf(b, "# Commandstats\r\n");
	int slots = command_slots();
	pthread_mutex_lock(&g_srv.stats_lock);
	for (int j = 0; j < slots; j++) {
		uint64_t calls = 0, ticks = 0, failed = 0, rejected = 0;
		for (int i = 0; i < g_srv.nworkers; i++) {
			const worker_stats *s = &g_srv.workers[i].stats, *z = &g_srv.workers[i].stats_base;
			calls += rd64(&s->cmd_calls[j]) - z->cmd_calls[j];
			ticks += rd64(&s->cmd_ticks[j]) - z->cmd_ticks[j];
			failed += rd64(&s->cmd_failed[j]) - z->cmd_failed[j];
			rejected += rd64(&s->cmd_rejected[j]) - z->cmd_rejected[j];
		}
		if (!calls && !failed && !rejected)
			continue;
		uint64_t ns = server_ticks_to_ns(ticks), usec = ns / 1000;
		sb_printf(b, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
		          "failed_calls=%llu\r\n",
		          command_at_slot(j)->name, (unsigned long long)calls, (unsigned long long)usec,
		          calls ? (double)ns / 1000.0 / (double)calls : 0.0, (unsigned long long)rejected,
		          (unsigned long long)failed);
	}
	pthread_mutex_unlock(&g_srv.stats_lock);
}

static void info_keyspace(sbuf *b)
{
	uint64_t keys = hlog_key_count(g_srv.store);
	sb_printf(b, "# Keyspace\r\n");
	if (keys)
		sb_printf(b, "db0:keys=%llu,expires=%llu,avg_ttl=0\r\n", (unsigned long long)keys,
		          (unsigned long long)hlog_expires_count(g_srv.store));
}

void cmd_info(client *c)
{
	int want = 0;
	if (c->argc == 1) {
		want = SEC_DEFAULT;
	} else {
		for (int i = 1; i < c->argc; i++)
			for (size_t k = 0; k < SPW_ARRAY_LEN(sections); k++)
				if (arg_eq(&c->argv[i], sections[k].name))
					want |= sections[k].bit;
	}
	sbuf b;
	hlog_info hi;
	int n = 0;
	sb_init(&b, c->w);
	if (want & (SEC_MEMORY | SEC_STORE))
		hlog_info_get(g_srv.store, &hi);
#define SECTION(bit, call) do { if (want & (bit)) { if (n++) sb_add(&b, "\r\n", 2); call; } } while (0)
	SECTION(SEC_SERVER, info_server(&b));
	SECTION(SEC_CLIENTS, info_clients(&b));
	SECTION(SEC_MEMORY, info_memory(&b, &hi));
	SECTION(SEC_PERSISTENCE, info_persistence(&b));
	SECTION(SEC_STATS, info_stats(&b));
	SECTION(SEC_REPLICATION, info_replication(&b));
	SECTION(SEC_CPU, info_cpu(&b));
	SECTION(SEC_STORE, info_store(&b, &hi));
	SECTION(SEC_COMMANDSTATS, info_commandstats(&b));
	SECTION(SEC_CLUSTER, sb_printf(&b, "# Cluster\r\ncluster_enabled:0\r\n"));
	SECTION(SEC_KEYSPACE, info_keyspace(&b));
#undef SECTION
	reply_text(c, &b);
}

