/*
 * config.c - every server option in one table, its values (parse, format, publish), the save
 * rules, and CONFIG GET/SET; the command line, the config file and CONFIG REWRITE read the same
 * table in config_file.c (Redis's static_configs[]).
 *
 * Design notes:
 *  1. One row per option: name, alias, type, bounds, default (written as it would be in a config
 *     file, so defaults go through the same parser as user values), field offset in g_cfg,
 *     flags (runtime-mutable, command-line only, storage tier) and help text. Adding an option is
 *     adding a row and a field.
 *  2. Precedence, as Redis: table defaults, then the config file, then command-line flags. A
 *     config file is named by --config FILE or by a first argument that is not a flag
 *     (redis-server's "redis-server /etc/redis.conf --port 7000").
 *  3. Names: Garnet's flags (--memory, --page, --index, --mutable-percent, --storage-tier...) and
 *     Redis's names (port, maxclients, proto-max-bulk-len...) are rows of the same table, so every
 *     option works in all three places. Aliases (io-threads for threads) are second names.
 *  4. Values parse strictly: ints in base 10 as Redis's string2ll (no '+', no spaces, no leading
 *     zeros), sizes through spw_parse_size (k/m/g/t, powers of 1024), bools yes/no (true/false too,
 *     for Garnet's command lines), enums by name without case. A bad value at start-up stops the
 *     server with a message naming the flag; CONFIG SET answers Redis 7's error texts.
 *  5. CONFIG SET is all or nothing, as Redis 7: names are checked first (unknown, immutable,
 *     duplicate: the first wrong one is the error), then every value is parsed into a staging
 *     copy, then all are published and each distinct apply hook runs once; a hook that fails
 *     (the AOF cannot be turned on) puts every value of the call back and runs the hooks again.
 *     A value error quotes the row's name (or its alias, as typed), as Redis quotes its config's
 *     name; the name errors quote the argument. CONFIG GET answers each option once, under the
 *     name as typed for a plain name, and every matching name and alias for a glob.
 *  6. Runtime writes: CONFIG SET runs on some worker while the others read g_cfg without locks.
 *     Mutable fields are aligned ints/uint64s written with relaxed atomic stores (no tearing), and
 *     g_cfg_version is bumped so workers refresh what they copied per client (parser limits).
 *     Immutable fields are written only before the workers start.
 *  7. Read-only config_options (maxmemory 0) are reported for tools that ask; setting them to their one
 *     value is accepted, any other value is refused honestly. dbfilename and appendfilename are
 *     stored for Redis config files and shown by CONFIG GET, and nothing reads them.
 *  9. save, as Redis 7's setConfigSaveOption: "<seconds> <changes> [...]" split on single spaces,
 *     seconds >= 1, changes >= 0, "" = no rules; CONFIG SET replaces the rules, while at start-up
 *     (config file and command line read as one) the first save line replaces the defaults and
 *     later ones add to it. Rules are copied under save_lock (config_save_rules): the saver thread
 *     reads them while CONFIG SET may write them.
 *  8. CONFIG REWRITE: without a config file it answers Redis's error; with one it rewrites the
 *     file in place (to a temporary file, then rename): lines naming an option get its current
 *     value, comments and unknown lines are kept, config_options changed from their default that the file
 *     did not mention are appended.
 */
#include "server/config_int.h"
#include "server/aof.h"
#include "device/device.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

spw_config g_cfg;
_Atomic uint32_t g_cfg_version;

static const char *const policy_names[] = { "volatile-lru", "volatile-lfu", "volatile-random",
                                            "volatile-ttl", "allkeys-lru", "allkeys-lfu",
                                            "allkeys-random", "noeviction", NULL };
static const char *const loglevel_names[] = { "debug", "verbose", "notice", "warning", NULL };
static const char *const device_type_names[] = { "default", "native", "randomaccess", "filestream",
                                                 "azurestorage", "localmemory", "null", "posix", NULL };
static const char *const device_io_names[] = { "default", "libaio", "uring", NULL };
/* Redis's order (its error text lists them so), mapped to server/aof.h's values. */
static const char *const aof_fsync_names[] = { "everysec", "always", "no", NULL };
static const int aof_fsync_values[] = { AOF_FSYNC_EVERYSEC, AOF_FSYNC_ALWAYS, AOF_FSYNC_NO };
static const char *const recover_names[] = { "newest", "previous", NULL };

/* OPT_ENUM: the value stored for names[i] (NULL: i itself). */
static const int *enum_values(const char *const *names)
{
	return names == aof_fsync_names ? aof_fsync_values : NULL;
}

/* Start-up reads the config file and the command line as one: the first save line there replaces
 * the defaults, later ones add rules (note 9). */
bool config_reading_startup, config_startup_save_seen;
static pthread_mutex_t save_lock = PTHREAD_MUTEX_INITIALIZER;

static int apply_loglevel(const char **why) { (void)why; spw_log_level = g_cfg.loglevel; return 0; }
static int apply_device_fault(const char **why) { (void)why; server_device_fault_apply(); return 0; }
static int apply_memcap(const char **why) { (void)why; memcap_config_changed(); return 0; }

static int apply_persist(const char **why)
{
	if (persist_config_changed() == 0)
		return 0;
	*why = "Unable to turn on AOF. Check server logs.";   /* Redis's updateAppendonly */
	return -1;
}

#define FIELD(f) offsetof(spw_config, f), sizeof(((spw_config *)0)->f)
#define NOFIELD 0, 0
#define KB 1024LL
#define MB (1024LL * 1024)
#define GB (1024LL * 1024 * 1024)

/* The table. Order is the order of --help and of CONFIG GET *. */
const spw_option config_options[] = {
	/* Network and clients. */
	{ "port", NULL, OPT_INT, 0, 0, 65535, "6379", FIELD(port), NULL, NULL,
	  "TCP port to listen on" },
	{ "bind", NULL, OPT_STRING, OPT_MULTIARG, 0, 0, "127.0.0.1", FIELD(bind), NULL, NULL,
	  "addresses to listen on, space separated (up to 4; * = all IPv4, ::* = all IPv6)" },
	{ "threads", "io-threads", OPT_INT, 0, 0, 1024, "0", FIELD(threads), NULL, NULL,
	  "worker threads, each with its own listener and event loop (0 = one per online core)" },
	{ "maxclients", NULL, OPT_INT, OPT_MUTABLE, 1, 1000000, "10000", FIELD(maxclients), NULL, NULL,
	  "maximum number of connected clients" },
	{ "timeout", NULL, OPT_INT, OPT_MUTABLE, 0, INT_MAX, "0", FIELD(timeout), NULL, NULL,
	  "close a client idle for this many seconds (0 = never)" },
	{ "tcp-keepalive", NULL, OPT_INT, OPT_MUTABLE, 0, INT_MAX, "300", FIELD(tcp_keepalive), NULL, NULL,
	  "TCP keepalive period in seconds for new connections (0 = off)" },
	{ "proto-max-bulk-len", NULL, OPT_SIZE, OPT_MUTABLE, 1 * MB, LLONG_MAX, "512mb",
	  FIELD(proto_max_bulk_len), NULL, NULL, "largest bulk string a client may send" },
	{ "client-query-buffer-limit", NULL, OPT_SIZE, OPT_MUTABLE, 1 * MB, LLONG_MAX, "1gb",
	  FIELD(querybuf_limit), NULL, NULL, "largest pending request of one client; over it the client is closed" },
	{ "output-pause-bytes", NULL, OPT_SIZE, OPT_MUTABLE, 64 * KB, LLONG_MAX, "64mb",
	  FIELD(output_pause_bytes), NULL, NULL, "stop reading a client whose unsent replies pass this" },
	/* Logging and files. */
	{ "loglevel", NULL, OPT_ENUM, OPT_MUTABLE, 0, 0, "notice", FIELD(loglevel), loglevel_names,
	  apply_loglevel, "debug, verbose, notice or warning" },
	{ "logfile", NULL, OPT_STRING, 0, 0, 0, "", FIELD(logfile), NULL, NULL,
	  "log file (empty = standard error)" },
	{ "dir", NULL, OPT_STRING, 0, 0, 0, ".", FIELD(dir), NULL, NULL,
	  "working directory (reported as an absolute path)" },
	{ "config", NULL, OPT_STRING, OPT_CLI_ONLY, 0, 0, "", FIELD(config_file), NULL, NULL,
	  "read config_options from FILE (\"name value\" per line) before the command line" },
	{ "import-rdb", NULL, OPT_STRING, OPT_CLI_ONLY, 0, 0, "", FIELD(import_rdb), NULL, NULL,
	  "load every key of a redis-server dump.rdb FILE after recovery, before serving (import.c)" },
	{ "check-only", NULL, OPT_BOOL, OPT_CLI_ONLY, 0, 0, "no", FIELD(import_check_only), NULL, NULL,
	  "with --import-rdb: read and check the file, print its summary and exit, storing nothing" },
	{ "databases", NULL, OPT_INT, 0, 1, 1, "1", FIELD(databases), NULL, NULL,
	  "number of databases (only db 0 exists)" },
	/* The store. */
	{ "memory", NULL, OPT_SIZE, 0, 64 * KB, LLONG_MAX, "16g", FIELD(memory_bytes), NULL, NULL,
	  "in-memory log size (pages are allocated as the log grows)" },
	{ "page", NULL, OPT_SIZE, 0, 4 * KB, 1 * GB, "32m", FIELD(page_bytes), NULL, NULL,
	  "log page size, a power of two; the largest record fits in one page" },
	{ "index", NULL, OPT_SIZE, 0, 4 * KB, LLONG_MAX, "16m", FIELD(index_bytes), NULL, NULL,
	  "hash index size at start (64-byte buckets of 7 entries); it doubles online as keys come, "
	  "up to --index-max-size" },
	{ "index-max-size", NULL, OPT_SIZE, 0, 0, LLONG_MAX, "0", FIELD(index_max_size), NULL, NULL,
	  "the size the index may double up to (0 = 64 times --index, or 1/16 of --maxmemory when "
	  "set; --index or less = it never grows)" },
	{ "index-resize-threshold", NULL, OPT_INT, 0, 1, 100, "25", FIELD(index_resize_threshold), NULL,
	  NULL, "double the index once its overflow buckets pass this percent of its main buckets" },
	{ "index-resize-freq", NULL, OPT_INT, 0, 1, 3600, "1", FIELD(index_resize_freq), NULL, NULL,
	  "seconds between looks at the index's fill" },
	{ "mutable-percent", NULL, OPT_INT, 0, 0, 100, "90", FIELD(mutable_percent), NULL, NULL,
	  "percent of the in-memory log that is updated in place" },
	/* Storage tier (Garnet's flags; start.c's tier_open maps them onto the device). */
	{ "storage-tier", NULL, OPT_BOOL, OPT_TIER, 0, 0, "no", FIELD(storage_tier), NULL, NULL,
	  "spill the log to a device: --memory becomes a window over a log on the device" },
	{ "logdir", NULL, OPT_STRING, OPT_TIER, 0, 0, "", FIELD(logdir), NULL, NULL,
	  "existing, writable directory of the log's segment files, in <logdir>/Store (empty = --dir)" },
	{ "segment", NULL, OPT_SIZE, OPT_TIER, 1 * MB, LLONG_MAX, "1g", FIELD(segment_bytes), NULL, NULL,
	  "size of one log segment file, a power of two" },
	{ "device-type", NULL, OPT_ENUM, OPT_TIER | OPT_FAULT_PREFIX, 0, 0, "default", FIELD(device_type),
	  device_type_names, NULL,
	  "native (= default: io_uring or libaio, O_DIRECT), localmemory, posix (pread/pwrite; also "
	  "randomaccess and filestream); a fault: prefix wraps one in the fault injector (tests)" },
	{ "device-io-backend", NULL, OPT_ENUM, OPT_TIER, 0, 0, "default", FIELD(device_io_backend),
	  device_io_names, NULL, "native device backend: default (uring when the kernel allows it, "
	  "else libaio), libaio or uring" },
	{ "device-throttle-limit", NULL, OPT_INT, OPT_TIER, 0, 65536, "0", FIELD(device_throttle_limit),
	  NULL, NULL, "IOs in flight on the device, and each worker's device queue depth (0 = 4096 on the device, 1024 per worker)" },
	{ "device-completion-threads", NULL, OPT_INT, OPT_TIER, 0, 64, "4",
	  FIELD(device_completion_threads), NULL, NULL,
	  "copy threads of the localmemory device (0 = the submitting worker copies)" },
	{ "initial-io-record-size", NULL, OPT_SIZE, OPT_TIER, 64, 1 * GB, "128",
	  FIELD(initial_io_record_size), NULL, NULL,
	  "bytes read first for a record on the device (rounded up to sectors)" },
	{ "sg-get", NULL, OPT_BOOL, OPT_TIER | OPT_MUTABLE, 0, 0, "yes", FIELD(sg_get), NULL, NULL,
	  "scatter-gather GET: a GET that waits on the device also queues the reads of the GETs and "
	  "MGETs pipelined after it, so they go out in one submission" },
	{ "device-fault", NULL, OPT_FAULT, OPT_TIER | OPT_MUTABLE, 0, 0, "", FIELD(device_fault_spec), NULL,
	  apply_device_fault, "arm the fault injector of --device-type fault:<type> (the storage tier's "
	  "device, or without one the device checkpoints write the log to): \"[read|write|any] "
	  "[N] [once|sticky] [eio|enospc|short|torn]\" fails the Nth IO; \"powercut\" holds every write "
	  "until a sync (a SIGKILL then loses what was not synced), \"powercut-now\" drops them at once "
	  "(\"\" or off disarms)" },
	/* Durability (persist.c: checkpoints and recovery; aof.c: the append-only file). */
	{ "aof", "appendonly", OPT_BOOL, OPT_MUTABLE, 0, 0, "no", FIELD(aof), NULL, apply_persist,
	  "append every write to <dir>/appendonlydir and replay it after the newest checkpoint at start "
	  "(turned on at runtime, a checkpoint starts at once)" },
	{ "aof-fsync", "appendfsync", OPT_ENUM, OPT_MUTABLE, 0, 0, "everysec", FIELD(aof_fsync),
	  aof_fsync_names, apply_persist, "always (a reply leaves only after its record is synced; one "
	  "sync per event-loop pass), everysec (synced once a second) or no (the kernel decides)" },
	{ "checkpoint-interval", NULL, OPT_INT, OPT_MUTABLE, 0, INT_MAX, "300", FIELD(checkpoint_interval),
	  NULL, NULL, "seconds between periodic checkpoints, taken only when something changed (0 = off)" },
	{ "save", NULL, OPT_SAVE, OPT_MUTABLE | OPT_MULTIARG, 0, 0, "3600 1 300 100 60 10000", FIELD(save),
	  NULL, NULL, "Redis's rules \"<seconds> <changes> [...]\": a checkpoint once <changes> writes "
	  "happened within <seconds> (\"\" = none)" },
	{ "recover-checkpoint", NULL, OPT_ENUM, 0, 0, 0, "newest", FIELD(recover_checkpoint), recover_names,
	  NULL, "newest (the newest checkpoint, then the AOF) or previous (the checkpoint before it, "
	  "without the AOF: later writes are not restored)" },
	{ "dbfilename", NULL, OPT_STRING, OPT_PROTECTED, 0, 0, "dump.rdb", FIELD(dbfilename), NULL, NULL,
	  "accepted for Redis config files and shown by CONFIG GET, otherwise unused (checkpoints are "
	  "<dir>/checkpoint.<n>.*)" },
	{ "appendfilename", NULL, OPT_STRING, 0, 0, 0, "appendonly.aof", FIELD(appendfilename), NULL, NULL,
	  "accepted for Redis config files and shown by CONFIG GET, otherwise unused (AOF files are "
	  "<dir>/appendonlydir/spillway.<gen>.<worker>.aof)" },
	/* Space (compact.c, expire.c): the disk budget and what happens when it is reached. */
	{ "compaction-max-segments", NULL, OPT_INT, OPT_MUTABLE, 0, INT_MAX, "32",
	  FIELD(compaction_max_segments), NULL, NULL, "compact the oldest part of the log once it "
	  "spans more than this many segments on the device (0 = only for --disk-max and COMPACT)" },
	{ "compaction-io-limit", NULL, OPT_SIZE, OPT_MUTABLE, 0, LLONG_MAX, "16mb",
	  FIELD(compaction_io_limit), NULL, NULL, "bytes per second compaction may read and write "
	  "(four times that once the disk passes 90% of --disk-max or the log twice "
	  "--compaction-max-segments; 0 = no limit)" },
	{ "disk-max", NULL, OPT_SIZE, OPT_MUTABLE, 0, LLONG_MAX, "0", FIELD(disk_max), NULL, NULL,
	  "disk the data may take (allocated blocks of log segments, checkpoints and AOF; 0 = no "
	  "limit): past it compaction runs, then writes get -OOM (noeviction) or the oldest segments "
	  "are dropped (an evicting maxmemory-policy)" },
	{ "maxmemory-policy", NULL, OPT_ENUM, OPT_MUTABLE, 0, 0, "noeviction", FIELD(maxmemory_policy),
	  policy_names, NULL, "noeviction (writes get -OOM once a budget is reached), or a Redis "
	  "evicting policy: with --disk-max the oldest segments are dropped (allkeys-*: every key in "
	  "them; volatile-*: the keys with an expiry, the others are copied)" },
	/* The memory cap (memcap.c). */
	{ "maxmemory", NULL, OPT_SIZE, OPT_MUTABLE, 0, LLONG_MAX, "0", FIELD(maxmemory), NULL, apply_memcap,
	  "bytes everything the server allocates may take: log pages, index, IO, client and AOF buffers "
	  "(0 = no cap). --memory and --index must fit inside it with room for client buffers; left "
	  "out, --memory is sized from it. Past it writes get -OOM (noeviction)" },
	{ "client-output-buffer-limit", NULL, OPT_OBL, OPT_MUTABLE | OPT_MULTIARG, 0, 0,
	  "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60", FIELD(obl), NULL, NULL,
	  "Redis's \"<class> <hard> <soft> <soft seconds>\" (class normal, replica or pubsub): a client "
	  "whose unsent replies pass hard bytes, or stay past soft bytes for soft seconds, is closed "
	  "(0 = no limit)" },
	/* Collection encodings (Redis 7.0's names, aliases, defaults and bounds), read by the data
	 * types when a collection grows; a change applies to collections written after it. */
	{ "coll-write-in-place", NULL, OPT_BOOL, 0, 0, 0, "yes", FIELD(coll_write_in_place), NULL, NULL,
	  "a write to a large collection rewrites its head and parts where they lie while they are in "
	  "the mutable region, and keeps a quarter of spare room in each bucket for that (no: every "
	  "write appends its records at the tail; for measurements)" },
	{ "coll-record-max", NULL, OPT_SIZE, OPT_MUTABLE, 128, 65536, "4096", FIELD(coll_record_max),
	  NULL, NULL,
	  "bytes: a hash or set Redis keeps as a hash table (OBJECT ENCODING hashtable) whose payload "
	  "passes this becomes large: a head and buckets of an eighth to a half of this size each "
	  "(coll_large.c note 11), so that a change costs a bucket, not the collection" },
	{ "hash-max-listpack-entries", "hash-max-ziplist-entries", OPT_SIZE, OPT_MUTABLE | OPT_INTEGER,
	  0, LLONG_MAX, "512", FIELD(hash_max_listpack_entries), NULL, NULL,
	  "a hash with more fields than this leaves the compact listpack encoding for a hash table "
	  "(512: redis-server 7.0's built-in default; its sample redis.conf writes 128)" },
	{ "hash-max-listpack-value", "hash-max-ziplist-value", OPT_SIZE, OPT_MUTABLE | OPT_REDIS_UNITS,
	  0, LLONG_MAX, "64", FIELD(hash_max_listpack_value), NULL, NULL,
	  "a hash with a field or value longer than this many bytes leaves the listpack encoding" },
	{ "set-max-intset-entries", NULL, OPT_SIZE, OPT_MUTABLE | OPT_INTEGER, 0, LLONG_MAX, "512",
	  FIELD(set_max_intset_entries), NULL, NULL,
	  "a set of integers with more members than this leaves the intset encoding for a hash table" },
	{ "zset-max-listpack-entries", "zset-max-ziplist-entries", OPT_SIZE, OPT_MUTABLE | OPT_INTEGER,
	  0, LLONG_MAX, "128", FIELD(zset_max_listpack_entries), NULL, NULL,
	  "a sorted set with more members than this leaves the listpack encoding for a skiplist" },
	{ "zset-max-listpack-value", "zset-max-ziplist-value", OPT_SIZE, OPT_MUTABLE | OPT_REDIS_UNITS,
	  0, LLONG_MAX, "64", FIELD(zset_max_listpack_value), NULL, NULL,
	  "a sorted set with a member longer than this many bytes leaves the listpack encoding" },
	{ "list-max-listpack-size", "list-max-ziplist-size", OPT_INT, OPT_MUTABLE, INT_MIN, INT_MAX, "-2",
	  FIELD(list_max_listpack_size), NULL, NULL,
	  "a list node's limit: > 0 entries, or -1..-5 bytes (4, 8, 16, 32 or 64 KiB; lower counts as -5)" },
	{ "list-compress-depth", NULL, OPT_INT, OPT_MUTABLE, 0, INT_MAX, "0", FIELD(list_compress_depth),
	  NULL, NULL, "list nodes left uncompressed at each end of a list; inner ones are LZF-compressed "
	  "(0 = none compressed)" },
	/* Data types. */
	{ "hll-sparse-max-bytes", NULL, OPT_SIZE, OPT_MUTABLE, 0, LONG_MAX, "3000",
	  FIELD(hll_sparse_max_bytes), NULL, NULL,
	  "largest sparse HyperLogLog: one that would grow past it turns dense (12304 bytes)" },
};

const int config_noptions = (int)SPW_ARRAY_LEN(config_options);
_Static_assert(SPW_ARRAY_LEN(config_options) <= CONFIG_MAX_OPTIONS, "raise CONFIG_MAX_OPTIONS");

/* The config_options the last config_load read from the config file or the command line, and those
 * start-up sized from others (config_option_sized). */
bool config_given[CONFIG_MAX_OPTIONS], config_sized[CONFIG_MAX_OPTIONS];

/* ---------------- lookup and value parsing ---------------- */

bool config_name_eq(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);
	return alen == n && strncasecmp(a, lit, n) == 0;
}

const spw_option *config_option_find(const char *name, size_t len)
{
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		if (config_name_eq(name, len, config_options[i].name) ||
		    (config_options[i].alias && config_name_eq(name, len, config_options[i].alias)))
			return &config_options[i];
	}
	return NULL;
}

void *config_field_ptr(spw_config *cfg, const spw_option *o) { return (char *)cfg + o->off; }

int config_parse_bool(const char *v, size_t n, bool *out)
{
	if (config_name_eq(v, n, "yes") || config_name_eq(v, n, "true")) {
		*out = true;
		return 0;
	}
	if (config_name_eq(v, n, "no") || config_name_eq(v, n, "false")) {
		*out = false;
		return 0;
	}
	return -EINVAL;
}

/* save's value (note 9): pairs split on single spaces, parsed as Redis's strtoll checks them. */
static int save_parse(const char *v, size_t n, save_rules *out, char *err, size_t errlen)
{
	save_rules r;
	char tok[32];
	long long nums[2 * CONFIG_SAVE_MAX];
	int cnt = 0;

	memset(&r, 0, sizeof(r));
	if (config_startup_save_seen && config_reading_startup)
		r = *out;   /* a later save line at start-up adds rules */
	for (size_t i = 0; n > 0 && i <= n;) {
		const char *sp = memchr(v + i, ' ', n - i);
		size_t len = sp ? (size_t)(sp - (v + i)) : n - i;
		if (cnt == (int)SPW_ARRAY_LEN(nums) || len >= sizeof(tok)) {
			snprintf(err, errlen, "Invalid save parameters");
			return -EINVAL;
		}
		memcpy(tok, v + i, len);
		tok[len] = '\0';
		char *end;
		errno = 0;
		long long x = strtoll(tok, &end, 10);
		if (*end != '\0' || errno || ((cnt & 1) == 0 && x < 1) || ((cnt & 1) == 1 && x < 0)) {
			snprintf(err, errlen, "Invalid save parameters");
			return -EINVAL;
		}
		nums[cnt++] = x;
		i += len + 1;
	}
	if ((cnt & 1) || r.n + cnt / 2 > CONFIG_SAVE_MAX) {
		snprintf(err, errlen, "Invalid save parameters");
		return -EINVAL;
	}
	for (int k = 0; k < cnt; k += 2) {
		r.r[r.n].seconds = nums[k];
		r.r[r.n].changes = nums[k + 1];
		r.n++;
	}
	if (config_reading_startup)
		config_startup_save_seen = true;
	*out = r;
	return 0;
}

void config_save_rules(save_rules *out)
{
	pthread_mutex_lock(&save_lock);
	*out = g_cfg.save;
	pthread_mutex_unlock(&save_lock);
}

/* Redis's memtoull (util.c): digits, then nothing, b, k, kb, m, mb, g or gb (k = 1000, kb = 1024).
 * The Redis-named rows that take memory values read them so, where the Garnet-style sizes read
 * every suffix as a power of 1024 (spw_parse_size). 0 or -EINVAL. */
static int redis_memtoull(const char *s, uint64_t *out)
{
	static const struct { const char *unit; uint64_t mul; } units[] = {
		{ "", 1 }, { "b", 1 }, { "k", 1000 }, { "kb", 1024 }, { "m", 1000 * 1000 },
		{ "mb", 1024 * 1024 }, { "g", 1000ULL * 1000 * 1000 }, { "gb", 1024ULL * 1024 * 1024 },
	};
	const char *u = s;
	while (isdigit((unsigned char)*u))
		u++;
	for (size_t i = 0; i < SPW_ARRAY_LEN(units); i++) {
		if (strcasecmp(u, units[i].unit) != 0)
			continue;
		unsigned long long x = 0;
		/* strtoull without its sign and blanks: an overflow saturates (Redis ignores ERANGE),
		 * which then fails the option's bounds. */
		for (const char *p = s; p < u; p++)
			x = x > (ULLONG_MAX - (unsigned)(*p - '0')) / 10 ? ULLONG_MAX : x * 10 + (unsigned)(*p - '0');
		*out = x * units[i].mul;   /* wraps as 7.0's does: a huge value then fails the bounds */
		return 0;
	}
	return -EINVAL;
}

/* An OPT_SIZE value (config_option_parse): Redis's string2ll for OPT_INTEGER rows, else a memory
 * value (Redis's units with OPT_REDIS_UNITS, spw_parse_size's otherwise), then the bounds. */
static int option_parse_size(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                             size_t errlen)
{
	char buf[64];
	uint64_t x;
	long long ll;
	if (o->flags & OPT_INTEGER) {   /* Redis's string2ll, then the bounds */
		if (!spw_parse_ll(v, n, &ll)) {
			snprintf(err, errlen, "argument couldn't be parsed into an integer");
			return -EINVAL;
		}
		x = (uint64_t)ll;   /* a negative one fails the bounds below, as in Redis */
	} else if (n >= sizeof(buf) || (n == 0 && !(o->flags & OPT_REDIS_UNITS))) {
		snprintf(err, errlen, "argument must be a memory value");
		return -EINVAL;
	} else {
		memcpy(buf, v, n);
		buf[n] = '\0';
		if (((o->flags & OPT_REDIS_UNITS) ? redis_memtoull(buf, &x) : spw_parse_size(buf, &x)) < 0) {
			snprintf(err, errlen, "argument must be a memory value");
			return -EINVAL;
		}
	}
	if (x > (uint64_t)LLONG_MAX || (long long)x < o->min || (long long)x > o->max) {
		snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min, o->max);
		return -EINVAL;
	}
	*(uint64_t *)config_field_ptr(cfg, o) = x;
	return 0;
}

/* An OPT_ENUM value by name, without case (a "fault:" prefix first where the row allows one). */
static int option_parse_enum(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                             size_t errlen)
{
	if (o->flags & OPT_FAULT_PREFIX) {
		bool fault = n >= 6 && strncasecmp(v, "fault:", 6) == 0;
		cfg->device_fault = fault;
		if (fault) {
			v += 6;
			n -= 6;
		}
	}
	for (int i = 0; o->names[i]; i++) {
		if (config_name_eq(v, n, o->names[i])) {
			*(int *)config_field_ptr(cfg, o) = enum_values(o->names) ? enum_values(o->names)[i] : i;
			return 0;
		}
	}
	{
		size_t k = (size_t)snprintf(err, errlen, "argument(s) must be one of the following: ");
		for (int i = 0; o->names[i] && k < errlen; i++)
			k += (size_t)snprintf(err + k, errlen - k, "%s%s", i ? ", " : "", o->names[i]);
	}
	return -EINVAL;
}

/* An OPT_FAULT value: device.h's grammar; while running only a fault device can be armed. */
static int option_parse_fault(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                              size_t errlen)
{
	dev_fault_spec spec;
	char text[sizeof(cfg->device_fault_spec)];
	if (n >= sizeof(text)) {
		snprintf(err, errlen, "argument is too long (at most %zu bytes)", sizeof(text) - 1);
		return -EINVAL;
	}
	memcpy(text, v, n);
	text[n] = '\0';
	if (dev_fault_spec_parse(text, &spec, err, errlen) < 0)   /* device.h has the grammar */
		return -EINVAL;
	/* Running: only a fault device can be armed. At start-up server_main checks it. */
	dev *fd = g_srv.dev ? g_srv.dev : g_srv.logdev;   /* the checkpoints' without a tier */
	if (fd && !(fd->caps & DEV_CAP_FAULT) && spec.kind != DEV_FAULT_NONE) {
		snprintf(err, errlen, "the device is not a fault injector (start with --device-type "
		         "fault:<type>)");
		return -EINVAL;
	}
	memcpy(config_field_ptr(cfg, o), text, n + 1);
	return 0;
}

/*
 * Parse v (n bytes, not NUL-terminated) for option o and store it into cfg (a staging copy or
 * g_cfg). On error, err gets Redis's reason text ("argument must be ...") and -EINVAL is returned.
 */
int config_option_parse(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                        size_t errlen)
{
	switch (o->type) {
	case OPT_BOOL: {
		bool b;
		if (config_parse_bool(v, n, &b) < 0) {
			snprintf(err, errlen, "argument must be 'yes' or 'no'");
			return -EINVAL;
		}
		*(bool *)config_field_ptr(cfg, o) = b;
		return 0;
	}
	case OPT_INT: {
		long long x;
		if (!spw_parse_ll(v, n, &x)) {
			snprintf(err, errlen, "argument couldn't be parsed into an integer");
			return -EINVAL;
		}
		if (x < o->min || x > o->max) {
			snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min, o->max);
			return -EINVAL;
		}
		*(int *)config_field_ptr(cfg, o) = (int)x;
		return 0;
	}
	case OPT_SIZE:
		return option_parse_size(o, v, n, cfg, err, errlen);
	case OPT_STRING:
		if (n >= o->size) {
			snprintf(err, errlen, "argument is too long (at most %zu bytes)", o->size - 1);
			return -EINVAL;
		}
		if (memchr(v, '\0', n)) {
			snprintf(err, errlen, "argument must not contain NUL bytes");
			return -EINVAL;
		}
		memcpy(config_field_ptr(cfg, o), v, n);
		((char *)config_field_ptr(cfg, o))[n] = '\0';
		return 0;
	case OPT_ENUM:
		return option_parse_enum(o, v, n, cfg, err, errlen);
	case OPT_CONST:
		if (n == strlen(o->def) && strncasecmp(v, o->def, n) == 0)
			return 0;
		snprintf(err, errlen, "not supported by this server (the value is always '%s')", o->def);
		return -EINVAL;
	case OPT_FAULT:
		return option_parse_fault(o, v, n, cfg, err, errlen);
	case OPT_SAVE:
		return save_parse(v, n, (save_rules *)config_field_ptr(cfg, o), err, errlen);
	case OPT_OBL:
		return memcap_obl_parse(v, n, (client_obl *)config_field_ptr(cfg, o), err, errlen);
	}
	snprintf(err, errlen, "unknown option type");
	return -EINVAL;
}

/* Format an option's current value as CONFIG GET shows it. Returns buf. */
const char *config_option_format(const spw_option *o, char *buf, size_t cap)
{
	const void *p = (const char *)&g_cfg + o->off;
	switch (o->type) {
	case OPT_BOOL: return *(const bool *)p ? "yes" : "no";
	case OPT_INT: snprintf(buf, cap, "%d", __atomic_load_n((const int *)p, __ATOMIC_RELAXED)); return buf;
	case OPT_SIZE:
		snprintf(buf, cap, "%llu", (unsigned long long)__atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED));
		return buf;
	case OPT_STRING: snprintf(buf, cap, "%s", (const char *)p); return buf;
	case OPT_ENUM: {
		int v = __atomic_load_n((const int *)p, __ATOMIC_RELAXED), idx = v;
		const int *vals = enum_values(o->names);
		if (vals)
			for (idx = 0; o->names[idx] && vals[idx] != v; idx++)
				;
		if ((o->flags & OPT_FAULT_PREFIX) && g_cfg.device_fault) {
			snprintf(buf, cap, "fault:%s", o->names[idx]);
			return buf;
		}
		return o->names[idx] ? o->names[idx] : "";
	}
	case OPT_CONST: return o->def;
	case OPT_FAULT: snprintf(buf, cap, "%s", (const char *)p); return buf;
	case OPT_SAVE: {
		save_rules r;
		size_t k = 0;
		config_save_rules(&r);
		buf[0] = '\0';
		for (int i = 0; i < r.n && k < cap; i++)
			k += (size_t)snprintf(buf + k, cap - k, "%s%lld %lld", i ? " " : "",
			                      (long long)r.r[i].seconds, (long long)r.r[i].changes);
		return buf;
	}
	case OPT_OBL: {
		client_obl obl[SPW_OBL_CLASSES];
		for (int i = 0; i < SPW_OBL_CLASSES * 3; i++)
			((uint64_t *)obl)[i] = __atomic_load_n((const uint64_t *)p + i, __ATOMIC_RELAXED);
		return memcap_obl_format(obl, buf, cap);
	}
	}
	return "";
}

/* Copy a field from src into g_cfg with the store width the workers read (note 6). */
void config_option_publish(const spw_option *o, const spw_config *src)
{
	const void *s = (const char *)src + o->off;
	void *d = (char *)&g_cfg + o->off;
	switch (o->type) {
	case OPT_INT:
	case OPT_ENUM: __atomic_store_n((int *)d, *(const int *)s, __ATOMIC_RELAXED); break;
	case OPT_SIZE: __atomic_store_n((uint64_t *)d, *(const uint64_t *)s, __ATOMIC_RELAXED); break;
	case OPT_BOOL: __atomic_store_n((bool *)d, *(const bool *)s, __ATOMIC_RELAXED); break;
	case OPT_STRING:
	case OPT_FAULT: memcpy(d, s, o->size); break;   /* not read on the request path */
	case OPT_CONST: break;
	case OPT_OBL:   /* read by the workers (memcap_obl_refresh): word by word, as OPT_SIZE */
		for (size_t i = 0; i < o->size / sizeof(uint64_t); i++)
			__atomic_store_n((uint64_t *)d + i, ((const uint64_t *)s)[i], __ATOMIC_RELAXED);
		break;
	case OPT_SAVE:
		pthread_mutex_lock(&save_lock);
		memcpy(d, s, o->size);
		pthread_mutex_unlock(&save_lock);
		break;
	}
}

void config_defaults(void)
{
	char err[256];
	memset(&g_cfg, 0, sizeof(g_cfg));
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		const spw_option *o = &config_options[i];
		if (config_option_parse(o, o->def, strlen(o->def), &g_cfg, err, sizeof(err)) < 0)
			abort();   /* a bad default is a bug in the table */
	}
	spw_log_level = g_cfg.loglevel;
}

/* ---------------- CONFIG GET / SET / REWRITE ---------------- */

static bool has_glob(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] == '*' || p[i] == '?' || p[i] == '[')
			return true;
	return false;
}

void config_get_matching(const char *pat, size_t plen, config_visit_fn fn, void *ctx)
{
	char buf[640], name[128];
	/* As Redis 7: a name without glob characters is looked up directly (aliases included) and
	 * answered under the name as typed. */
	if (!has_glob(pat, plen)) {
		const spw_option *o = config_option_find(pat, plen);
		if (!o || (o->flags & OPT_CLI_ONLY) || plen >= sizeof(name))
			return;
		memcpy(name, pat, plen);
		name[plen] = '\0';
		fn(ctx, name, config_option_format(o, buf, sizeof(buf)));
		return;
	}
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		const spw_option *o = &config_options[i];
		if (o->flags & OPT_CLI_ONLY)
			continue;
		if (spw_glob_match(pat, plen, o->name, strlen(o->name), 1))
			fn(ctx, o->name, config_option_format(o, buf, sizeof(buf)));
		if (o->alias && spw_glob_match(pat, plen, o->alias, strlen(o->alias), 1))
			fn(ctx, o->alias, config_option_format(o, buf, sizeof(buf)));
	}
}

/* The name CONFIG SET's value errors quote: the row's name or its alias, whichever was typed,
 * written as the table writes it (Redis quotes its config's own name there, not the argument). */
static const char *set_name(const spw_option *o, const resp_slice *typed)
{
	return o->alias && config_name_eq(typed->ptr, typed->len, o->alias) ? o->alias : o->name;
}

/* Names first, as Redis: unknown, immutable or protected, duplicate; the first one wrong is the
 * error. A row and its alias are two parameters there (Redis 7.0 keeps an alias as a config of
 * its own), so only the same name twice is a duplicate. */
static int set_check_names(const resp_slice *pairs, int npairs, const spw_option **found, char *err,
                           size_t errlen)
{
	for (int i = 0; i < npairs; i++) {
		const resp_slice *n = &pairs[2 * i];
		const spw_option *o = config_option_find(n->ptr, n->len);
		const char *why = NULL;
		if (!o || (o->flags & OPT_CLI_ONLY)) {
			snprintf(err, errlen, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'",
			         (int)SPW_MIN(n->len, 128), n->ptr);
			return -EINVAL;
		}
		if (o->flags & OPT_PROTECTED)
			why = "can't set protected config";
		else if (!(o->flags & OPT_MUTABLE) && o->type != OPT_CONST)
			why = "can't set immutable config";
		for (int j = 0; j < i && !why; j++)
			if (pairs[2 * j].len == n->len && !strncasecmp(pairs[2 * j].ptr, n->ptr, n->len))
				why = "duplicate parameter";
		if (why) {
			snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%.*s') - %s",
			         (int)SPW_MIN(n->len, 128), n->ptr, why);
			return -EINVAL;
		}
		found[i] = o;
	}
	return 0;
}

/* Run each distinct apply hook of the call once, in the order the options came (Redis's
 * apply_fns). The index of the pair whose hook failed, with its reason in *why, or -1. */
static int set_apply(const spw_option *const *found, int npairs, const char **why)
{
	for (int i = 0; i < npairs; i++) {
		bool ran = false;
		for (int j = 0; j < i && !ran; j++)
			ran = found[j]->apply == found[i]->apply;
		if (found[i]->apply && !ran && found[i]->apply(why) < 0)
			return i;
	}
	return -1;
}

int config_set_pairs(const resp_slice *pairs, int npairs, char *err, size_t errlen)
{
	const spw_option *found[64];
	char why[256];
	static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
	static spw_config staged, old;   /* under set_lock: too big for a worker's stack twice */
	int rc = -EINVAL;

	if (npairs > (int)SPW_ARRAY_LEN(found)) {
		snprintf(err, errlen, "ERR CONFIG SET: too many parameters in one call (at most %d)",
		         (int)SPW_ARRAY_LEN(found));
		return -EINVAL;
	}
	if (set_check_names(pairs, npairs, found, err, errlen) < 0)
		return -EINVAL;
	/* Then values, into a staging copy: nothing changes unless all parse. The lock keeps two
	 * concurrent CONFIG SETs from interleaving their publish steps. */
	pthread_mutex_lock(&set_lock);
	staged = old = g_cfg;
	for (int i = 0; i < npairs; i++) {
		const resp_slice *v = &pairs[2 * i + 1];
		if (config_option_parse(found[i], v->ptr, v->len, &staged, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
			         set_name(found[i], &pairs[2 * i]), why);
			goto out;
		}
	}
	/* Publish all, then apply; an apply that fails puts every value of the call back and runs
	 * the hooks again on them (Redis's restoreBackupConfig), so the call changed nothing. */
	for (int i = 0; i < npairs; i++)
		config_option_publish(found[i], &staged);
	const char *reason = NULL;
	int bad = set_apply(found, npairs, &reason);
	if (bad >= 0) {
		spw_log(SPW_LOG_WARNING, 0, "Failed applying new configuration. Possibly related to new %s "
		        "setting. Restoring previous settings.", set_name(found[bad], &pairs[2 * bad]));
		for (int i = 0; i < npairs; i++)
			config_option_publish(found[i], &old);
		const char *ignored;
		(void)set_apply(found, npairs, &ignored);
		snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%s') - %s",
		         set_name(found[bad], &pairs[2 * bad]), reason ? reason : "apply failed");
	} else {
		rc = 0;
	}
	atomic_fetch_add_explicit(&g_cfg_version, 1, memory_order_release);
out:
	pthread_mutex_unlock(&set_lock);
	return rc;
}

int config_set(const char *name, size_t nlen, const char *val, size_t vlen, char *err, size_t errlen)
{
	resp_slice p[2] = { { name, nlen }, { val, vlen } };
	return config_set_pairs(p, 1, err, errlen);
}
