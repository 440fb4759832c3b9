/*
 * config.c - every server option in one table; the command line, the config file and CONFIG
 * GET/SET/REWRITE all read it (Redis's static_configs[]).
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
 *     duplicate), then every value is parsed into a staging copy, and only then applied.
 *  6. Runtime writes: CONFIG SET runs on some worker while the others read g_cfg without locks.
 *     Mutable fields are aligned ints/uint64s written with relaxed atomic stores (no tearing), and
 *     g_cfg_version is bumped so workers refresh what they copied per client (parser limits).
 *     Immutable fields are written only before the workers start.
 *  7. Read-only options (maxmemory 0) are reported for tools that ask; setting them to their one
 *     value is accepted, any other value is refused honestly. dbfilename and appendfilename are
 *     stored for Redis config files and shown by CONFIG GET, and nothing reads them.
 *  9. save, as Redis 7's setConfigSaveOption: "<seconds> <changes> [...]" split on single spaces,
 *     seconds >= 1, changes >= 0, "" = no rules; CONFIG SET replaces the rules, while at start-up
 *     (config file and command line read as one) the first save line replaces the defaults and
 *     later ones add to it. Rules are copied under save_lock (config_save_rules): the saver thread
 *     reads them while CONFIG SET may write them.
 *  8. CONFIG REWRITE: without a config file it answers Redis's error; with one it rewrites the
 *     file in place (to a temporary file, then rename): lines naming an option get its current
 *     value, comments and unknown lines are kept, options changed from their default that the file
 *     did not mention are appended.
 */
#include "server/server_int.h"
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

enum opt_type { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_STRING, OPT_ENUM, OPT_CONST, OPT_FAULT, OPT_SAVE,
                OPT_OBL };

#define OPT_MUTABLE  (1u << 0)   /* CONFIG SET may change it while the server runs */
#define OPT_CLI_ONLY (1u << 1)   /* a start-up flag only (--config): not in CONFIG GET */
#define OPT_TIER     (1u << 2)   /* takes effect with the storage tier */
#define OPT_MULTIARG (1u << 3)   /* config file: several words join with spaces (bind, save) */
#define OPT_FAULT_PREFIX (1u << 4) /* --device-type: a "fault:" prefix sets device_fault */
#define OPT_PROTECTED (1u << 5)  /* Redis's protected configs (dbfilename): CONFIG SET refuses */

typedef struct spw_option {
	const char *name;
	const char *alias;           /* a second name, or NULL */
	uint8_t type;
	uint8_t flags;
	long long min, max;          /* OPT_INT / OPT_SIZE bounds, inclusive */
	const char *def;             /* default, as written in a config file */
	size_t off, size;            /* the field in g_cfg */
	const char *const *names;    /* OPT_ENUM: value = index; NULL-terminated */
	void (*apply)(void);         /* run after a change (start-up and CONFIG SET) */
	const char *help;
} spw_option;

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
static bool reading_startup, startup_save_seen;
static pthread_mutex_t save_lock = PTHREAD_MUTEX_INITIALIZER;

static void apply_loglevel(void) { spw_log_level = g_cfg.loglevel; }
static void apply_device_fault(void) { server_device_fault_apply(); }
static void apply_persist(void) { persist_config_changed(); }
static void apply_memcap(void) { memcap_config_changed(); }

#define FIELD(f) offsetof(spw_config, f), sizeof(((spw_config *)0)->f)
#define NOFIELD 0, 0
#define KB 1024LL
#define MB (1024LL * 1024)
#define GB (1024LL * 1024 * 1024)

/* The table. Order is the order of --help and of CONFIG GET *. */
static const spw_option options[] = {
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
	  "read options from FILE (\"name value\" per line) before the command line" },
	{ "databases", NULL, OPT_INT, 0, 1, 1, "1", FIELD(databases), NULL, NULL,
	  "number of databases (only db 0 exists)" },
	/* The store. */
	{ "memory", NULL, OPT_SIZE, 0, 64 * KB, LLONG_MAX, "16g", FIELD(memory_bytes), NULL, NULL,
	  "in-memory log size (pages are allocated as the log grows)" },
	{ "page", NULL, OPT_SIZE, 0, 4 * KB, 1 * GB, "32m", FIELD(page_bytes), NULL, NULL,
	  "log page size, a power of two; the largest record fits in one page" },
	{ "index", NULL, OPT_SIZE, 0, 4 * KB, LLONG_MAX, "128m", FIELD(index_bytes), NULL, NULL,
	  "hash index size (64-byte buckets of 7 entries; about 16 bytes per key)" },
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
	{ "compaction-io-limit", NULL, OPT_SIZE, OPT_MUTABLE, 0, LLONG_MAX, "64mb",
	  FIELD(compaction_io_limit), NULL, NULL, "bytes per second compaction may read and write "
	  "(0 = no limit)" },
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
};

#define NOPTIONS ((int)SPW_ARRAY_LEN(options))

/* The options the last config_load read from the config file or the command line, and those
 * start-up sized from others (config_option_sized). */
static bool option_given[NOPTIONS], option_sized[NOPTIONS];

/* ---------------- lookup and value parsing ---------------- */

static bool name_eq(const char *a, size_t alen, const char *lit)
{
	size_t n = strlen(lit);
	return alen == n && strncasecmp(a, lit, n) == 0;
}

static const spw_option *option_find(const char *name, size_t len)
{
	for (int i = 0; i < NOPTIONS; i++) {
		if (name_eq(name, len, options[i].name) ||
		    (options[i].alias && name_eq(name, len, options[i].alias)))
			return &options[i];
	}
	return NULL;
}

static void *field_ptr(spw_config *cfg, const spw_option *o) { return (char *)cfg + o->off; }

static int parse_bool(const char *v, size_t n, bool *out)
{
	if (name_eq(v, n, "yes") || name_eq(v, n, "true")) {
		*out = true;
		return 0;
	}
	if (name_eq(v, n, "no") || name_eq(v, n, "false")) {
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
	if (startup_save_seen && reading_startup)
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
	if (reading_startup)
		startup_save_seen = true;
	*out = r;
	return 0;
}

void config_save_rules(save_rules *out)
{
	pthread_mutex_lock(&save_lock);
	*out = g_cfg.save;
	pthread_mutex_unlock(&save_lock);
}

/*
 * Parse v (n bytes, not NUL-terminated) for option o and store it into cfg (a staging copy or
 * g_cfg). On error, err gets Redis's reason text ("argument must be ...") and -EINVAL is returned.
 */
static int option_parse(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                        size_t errlen)
{
	char buf[64];
	switch (o->type) {
	case OPT_BOOL: {
		bool b;
		if (parse_bool(v, n, &b) < 0) {
			snprintf(err, errlen, "argument must be 'yes' or 'no'");
			return -EINVAL;
		}
		*(bool *)field_ptr(cfg, o) = b;
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
		*(int *)field_ptr(cfg, o) = (int)x;
		return 0;
	}
	case OPT_SIZE: {
		uint64_t x;
		if (n == 0 || n >= sizeof(buf)) {
			snprintf(err, errlen, "argument must be a memory value");
			return -EINVAL;
		}
		memcpy(buf, v, n);
		buf[n] = '\0';
		if (spw_parse_size(buf, &x) < 0) {
			snprintf(err, errlen, "argument must be a memory value");
			return -EINVAL;
		}
		if (x > (uint64_t)LLONG_MAX || (long long)x < o->min || (long long)x > o->max) {
			snprintf(err, errlen, "argument must be between %lld and %lld inclusive", o->min, o->max);
			return -EINVAL;
		}
		*(uint64_t *)field_ptr(cfg, o) = x;
		return 0;
	}
	case OPT_STRING:
		if (n >= o->size) {
			snprintf(err, errlen, "argument is too long (at most %zu bytes)", o->size - 1);
			return -EINVAL;
		}
		if (memchr(v, '\0', n)) {
			snprintf(err, errlen, "argument must not contain NUL bytes");
			return -EINVAL;
		}
		memcpy(field_ptr(cfg, o), v, n);
		((char *)field_ptr(cfg, o))[n] = '\0';
		return 0;
	case OPT_ENUM:
		if (o->flags & OPT_FAULT_PREFIX) {
			bool fault = n >= 6 && strncasecmp(v, "fault:", 6) == 0;
			cfg->device_fault = fault;
			if (fault) {
				v += 6;
				n -= 6;
			}
		}
		for (int i = 0; o->names[i]; i++) {
			if (name_eq(v, n, o->names[i])) {
				*(int *)field_ptr(cfg, o) = enum_values(o->names) ? enum_values(o->names)[i] : i;
				return 0;
			}
		}
		{
			size_t k = (size_t)snprintf(err, errlen, "argument(s) must be one of the following: ");
			for (int i = 0; o->names[i] && k < errlen; i++)
				k += (size_t)snprintf(err + k, errlen - k, "%s%s", i ? ", " : "", o->names[i]);
		}
		return -EINVAL;
	case OPT_CONST:
		if (n == strlen(o->def) && strncasecmp(v, o->def, n) == 0)
			return 0;
		snprintf(err, errlen, "not supported by this server (the value is always '%s')", o->def);
		return -EINVAL;
	case OPT_FAULT: {
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
		memcpy(field_ptr(cfg, o), text, n + 1);
		return 0;
	}
	case OPT_SAVE:
		return save_parse(v, n, (save_rules *)field_ptr(cfg, o), err, errlen);
	case OPT_OBL:
		return memcap_obl_parse(v, n, (client_obl *)field_ptr(cfg, o), err, errlen);
	}
	snprintf(err, errlen, "unknown option type");
	return -EINVAL;
}

/* Format an option's current value as CONFIG GET shows it. Returns buf. */
static const char *option_format(const spw_option *o, char *buf, size_t cap)
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
static void option_publish(const spw_option *o, const spw_config *src)
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
	for (int i = 0; i < NOPTIONS; i++) {
		const spw_option *o = &options[i];
		if (option_parse(o, o->def, strlen(o->def), &g_cfg, err, sizeof(err)) < 0)
			abort();   /* a bad default is a bug in the table */
	}
	apply_loglevel();
}

/* ---------------- the config file ---------------- */

/* resp_args_split's callback for config_line_split: one word, NUL-terminated, into the output. */
typedef struct config_words {
	char *out;                   /* where the next word goes */
	char **words;
	int n, max;
} config_words;

static int config_word_add(void *ctx, const char *w, size_t len)
{
	config_words *cw = ctx;
	if (cw->n == cw->max)
		return -E2BIG;
	memcpy(cw->out, w, len);
	cw->out[len] = '\0';
	cw->words[cw->n++] = cw->out;
	cw->out += len + 1;
	return 0;
}

/*
 * Split a config line into words as Redis's sdssplitargs (resp_args_split, proto/resp_split.c):
 * blanks separate, "double quotes" know \n \r \t \b \a \\ \" and \xHH, 'single quotes' know \'.
 * Words are written NUL-terminated into out (same size as the line + 1: a word and its NUL never
 * take more bytes than the word and the blank or quotes around it took in the line). Returns the
 * word count, or < 0 on unbalanced quotes (or more than maxwords words).
 */
static int config_line_split(const char *line, char *out, char **words, int maxwords)
{
	config_words cw = { .out = out, .words = words, .n = 0, .max = maxwords };
	char *scratch = NULL;
	size_t cap = 0;
	int n = resp_args_split(line, strlen(line), &scratch, &cap, config_word_add, &cw);
	free(scratch);
	return n;
}

/* Apply one option given as words[0] = name, words[1..n) = value words. err gets a message. */
static int config_apply_words(char **words, int n, char *err, size_t errlen)
{
	const spw_option *o = option_find(words[0], strlen(words[0]));
	char why[256], val[2048];
	if (!o || (o->flags & OPT_CLI_ONLY)) {
		snprintf(err, errlen, "unknown option '%s'", words[0]);
		return -EINVAL;
	}
	if (n < 2) {
		snprintf(err, errlen, "option '%s' needs a value", words[0]);
		return -EINVAL;
	}
	if (n > 2 && !(o->flags & OPT_MULTIARG)) {
		snprintf(err, errlen, "option '%s' takes one value (quote it if it has spaces)", words[0]);
		return -EINVAL;
	}
	size_t k = 0;
	for (int i = 1; i < n; i++)
		k += (size_t)snprintf(val + k, k < sizeof(val) ? sizeof(val) - k : 0, "%s%s", i > 1 ? " " : "", words[i]);
	if (k >= sizeof(val)) {
		snprintf(err, errlen, "value of '%s' is too long", words[0]);
		return -EINVAL;
	}
	if (option_parse(o, val, k, &g_cfg, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "bad value for '%s' '%.200s': %s", words[0], val, why);
		return -EINVAL;
	}
	option_given[o - options] = true;
	return 0;
}

static int config_file_load(const char *path)
{
	FILE *fp = fopen(path, "r");
	char line[4096], words_buf[4097], err[512];
	char *words[64];
	int lineno = 0, rc = 0;
	if (!fp) {
		fprintf(stderr, "spillway: cannot open config file '%s': %s\n", path, strerror(errno));
		return -EINVAL;
	}
	while (fgets(line, sizeof(line), fp)) {
		lineno++;
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			fprintf(stderr, "spillway: %s:%d: line too long\n", path, lineno);
			rc = -EINVAL;
			goto fail;
		}
		const char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '#' || *p == '\0')
			continue;
		int n = config_line_split(p, words_buf, words, (int)SPW_ARRAY_LEN(words));
		if (n < 0) {
			fprintf(stderr, "spillway: %s:%d: unbalanced quotes in '%.*s'\n", path, lineno,
			        (int)strcspn(p, "\r\n"), p);
			rc = -EINVAL;
			goto fail;
		}
		if (n == 0)
			continue;
		if (config_apply_words(words, n, err, sizeof(err)) < 0) {
			fprintf(stderr, "spillway: %s:%d: %s\n", path, lineno, err);
			rc = -EINVAL;
			goto fail;
		}
	}
fail:
	fclose(fp);
	return rc;
}

/* ---------------- the command line ---------------- */

static void config_print_version(void)
{
	printf("Spillway server v=%s redis-compat=%s bits=%d\n", SPW_VERSION, SPW_REDIS_VERSION,
	       (int)(sizeof(long) * 8));
}

void config_print_help(void)
{
	char buf[64];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	printf("Usage: spillway-server [/path/to/spillway.conf] [--option value | --option=value ...]\n"
	       "       spillway-server --help | --version\n\n"
	       "Every option below works as a command-line flag, as a \"name value\" line of the config\n"
	       "file and (except --config) with CONFIG GET; those marked [runtime] also with CONFIG SET.\n"
	       "Sizes take k/m/g/t suffixes (powers of 1024). The config file is read first, then the\n"
	       "command line.\n\n");
	for (int i = 0; i < NOPTIONS; i++) {
		const spw_option *o = &options[i];
		const char *type = "";
		switch (o->type) {
		case OPT_BOOL: type = "yes|no"; break;
		case OPT_INT: type = "<int>"; break;
		case OPT_SIZE: type = "<size>"; break;
		case OPT_STRING: type = "<string>"; break;
		case OPT_ENUM: type = "<name>"; break;
		case OPT_CONST: type = "<fixed>"; break;
		case OPT_FAULT: type = "<spec>"; break;
		case OPT_SAVE: type = "\"<sec> <changes> ...\""; break;
		case OPT_OBL: type = "\"<class> <hard> <soft> <sec> ...\""; break;
		}
		snprintf(buf, sizeof(buf), "--%s %s", o->name, type);
		printf("  %-36s %s", buf, o->help);
		if (o->type == OPT_INT && o->min != o->max)
			printf(" [%lld..%lld]", o->min, o->max);
		if (!strcmp(o->name, "threads"))
			printf(" (default: 0 = %ld here)", ncpu > 0 ? ncpu : 1);
		else if (o->type == OPT_STRING || o->type == OPT_CONST || o->type == OPT_FAULT ||
		         o->type == OPT_SAVE || o->type == OPT_OBL)
			printf(" (default: \"%s\")", o->def);
		else
			printf(" (default: %s)", o->def);
		if (o->flags & OPT_MUTABLE)
			printf(" [runtime]");
		if (o->flags & OPT_TIER)
			printf(" [takes effect with the storage tier]");
		if (o->alias)
			printf(" (alias: %s)", o->alias);
		printf("\n");
	}
	printf("  %-36s %s\n  %-36s %s\n", "--help", "print this help and exit",
	       "--version", "print the version and exit");
}

static bool is_bool_word(const char *s)
{
	bool b;
	return parse_bool(s, strlen(s), &b) == 0;
}

/* Checks that need several options together; messages name the flag to change. */
static int config_check(void)
{
	if (g_cfg.page_bytes & (g_cfg.page_bytes - 1)) {
		fprintf(stderr, "spillway: bad value for --page '%llu': must be a power of two\n",
		        (unsigned long long)g_cfg.page_bytes);
		return -EINVAL;
	}
	if (g_cfg.memory_bytes < 2 * g_cfg.page_bytes) {
		fprintf(stderr, "spillway: bad value for --memory '%llu': must hold at least 2 pages of "
		        "--page %llu\n", (unsigned long long)g_cfg.memory_bytes,
		        (unsigned long long)g_cfg.page_bytes);
		return -EINVAL;
	}
	if (g_cfg.storage_tier && g_cfg.memory_bytes < TIER_MIN_PAGES * g_cfg.page_bytes) {
		fprintf(stderr, "spillway: bad value for --memory '%llu': with --storage-tier it must hold at "
		        "least %d pages of --page %llu (one being filled, one being flushed, one being read "
		        "and one to evict)\n", (unsigned long long)g_cfg.memory_bytes, TIER_MIN_PAGES,
		        (unsigned long long)g_cfg.page_bytes);
		return -EINVAL;
	}
	if (g_cfg.segment_bytes & (g_cfg.segment_bytes - 1)) {
		fprintf(stderr, "spillway: bad value for --segment '%llu': must be a power of two\n",
		        (unsigned long long)g_cfg.segment_bytes);
		return -EINVAL;
	}
	if (g_cfg.storage_tier && (g_cfg.device_type == SPW_DEVICE_TYPE_AZURESTORAGE ||
	                           g_cfg.device_type == SPW_DEVICE_TYPE_NULL)) {
		fprintf(stderr, "spillway: bad value for --device-type '%s': not supported (native, "
		        "localmemory or posix)\n", device_type_names[g_cfg.device_type]);
		return -EINVAL;
	}
	if (g_cfg.bind[0] == '\0') {
		fprintf(stderr, "spillway: bad value for --bind '': needs at least one address\n");
		return -EINVAL;
	}
	return 0;
}

static int config_load_args(int argc, char **argv);

bool config_option_given(const char *name)
{
	const spw_option *o = option_find(name, strlen(name));
	return o && option_given[o - options];
}

void config_option_sized(const char *name)
{
	const spw_option *o = option_find(name, strlen(name));
	if (o)
		option_sized[o - options] = true;
}

int config_load(int argc, char **argv)
{
	config_defaults();
	memset(option_given, 0, sizeof(option_given));
	memset(option_sized, 0, sizeof(option_sized));
	reading_startup = true;
	startup_save_seen = false;
	int rc = config_load_args(argc, argv);
	reading_startup = false;
	return rc;
}

static int config_load_args(int argc, char **argv)
{

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			config_print_help();
			return 1;
		}
		if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-v")) {
			config_print_version();
			return 1;
		}
	}

	/* The config file first: a leading non-flag argument, or --config. */
	const char *file = NULL;
	if (argc > 1 && argv[1][0] != '-')
		file = argv[1];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "spillway: option --config needs a value\n");
				return -EINVAL;
			}
			file = argv[i + 1];
		} else if (!strncmp(argv[i], "--config=", 9)) {
			file = argv[i] + 9;
		}
	}
	if (file) {
		if (strlen(file) >= sizeof(g_cfg.config_file)) {
			fprintf(stderr, "spillway: bad value for --config: path too long\n");
			return -EINVAL;
		}
		if (config_file_load(file) < 0)
			return -EINVAL;
		snprintf(g_cfg.config_file, sizeof(g_cfg.config_file), "%s", file);
	}

	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *val;
		char why[256], multi[2048];
		if (i == 1 && arg[0] != '-')
			continue;   /* the config file */
		if (strncmp(arg, "--", 2) || !arg[2]) {
			fprintf(stderr, "spillway: unexpected argument '%s' (options are --name value)\n", arg);
			return -EINVAL;
		}
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		const spw_option *o = option_find(name, nlen);
		if (!o) {
			fprintf(stderr, "spillway: unknown option --%.*s (see --help)\n", (int)nlen, name);
			return -EINVAL;
		}
		if (eq) {
			val = eq + 1;
		} else if (o->type == OPT_BOOL && (i + 1 >= argc || !is_bool_word(argv[i + 1]))) {
			val = "yes";   /* Garnet's switches: --storage-tier alone means yes */
		} else if (i + 1 >= argc) {
			fprintf(stderr, "spillway: option --%s needs a value\n", o->name);
			return -EINVAL;
		} else if ((o->flags & OPT_MULTIARG) && i + 2 < argc && strncmp(argv[i + 2], "--", 2)) {
			/* As redis-server: --save 900 1 300 10 (words up to the next --flag) */
			size_t k = 0;
			for (i++; i < argc && strncmp(argv[i], "--", 2); i++)
				k += (size_t)snprintf(multi + k, k < sizeof(multi) ? sizeof(multi) - k : 0, "%s%s",
				                      k ? " " : "", argv[i]);
			i--;
			if (k >= sizeof(multi)) {
				fprintf(stderr, "spillway: bad value for --%s: too long\n", o->name);
				return -EINVAL;
			}
			val = multi;
		} else {
			val = argv[++i];
		}
		if (o->flags & OPT_CLI_ONLY)
			continue;   /* --config: read above */
		if (option_parse(o, val, strlen(val), &g_cfg, why, sizeof(why)) < 0) {
			fprintf(stderr, "spillway: bad value for --%.*s '%s': %s\n", (int)nlen, name, val, why);
			return -EINVAL;
		}
		option_given[o - options] = true;
	}
	if (g_cfg.threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		g_cfg.threads = n > 0 ? (int)SPW_MIN(n, 1024) : 1;
	}
	char abs[PATH_MAX];
	if (!realpath(g_cfg.dir, abs)) {
		fprintf(stderr, "spillway: bad value for --dir '%s': %s\n", g_cfg.dir, strerror(errno));
		return -EINVAL;
	}
	if (strlen(abs) >= sizeof(g_cfg.dir)) {
		fprintf(stderr, "spillway: bad value for --dir '%s': path too long\n", g_cfg.dir);
		return -EINVAL;
	}
	snprintf(g_cfg.dir, sizeof(g_cfg.dir), "%s", abs);
	if (config_check() < 0)
		return -EINVAL;
	for (int i = 0; i < NOPTIONS; i++)
		if (options[i].apply)
			options[i].apply();
	return 0;
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
		const spw_option *o = option_find(pat, plen);
		if (!o || (o->flags & OPT_CLI_ONLY) || plen >= sizeof(name))
			return;
		memcpy(name, pat, plen);
		name[plen] = '\0';
		fn(ctx, name, option_format(o, buf, sizeof(buf)));
		return;
	}
	for (int i = 0; i < NOPTIONS; i++) {
		const spw_option *o = &options[i];
		if (o->flags & OPT_CLI_ONLY)
			continue;
		if (spw_glob_match(pat, plen, o->name, strlen(o->name), 1))
			fn(ctx, o->name, option_format(o, buf, sizeof(buf)));
		if (o->alias && spw_glob_match(pat, plen, o->alias, strlen(o->alias), 1))
			fn(ctx, o->alias, option_format(o, buf, sizeof(buf)));
	}
}

int config_set_pairs(const resp_slice *pairs, int npairs, char *err, size_t errlen)
{
	const spw_option *found[64];
	char why[256];
	static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
	spw_config staged;

	if (npairs > (int)SPW_ARRAY_LEN(found)) {
		snprintf(err, errlen, "ERR CONFIG SET: too many parameters in one call (at most %d)",
		         (int)SPW_ARRAY_LEN(found));
		return -EINVAL;
	}
	/* Names first, as Redis: unknown, immutable, duplicate. */
	for (int i = 0; i < npairs; i++) {
		const resp_slice *n = &pairs[2 * i];
		const spw_option *o = option_find(n->ptr, n->len);
		if (!o || (o->flags & OPT_CLI_ONLY)) {
			snprintf(err, errlen, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'",
			         (int)SPW_MIN(n->len, 128), n->ptr);
			return -EINVAL;
		}
		if (o->flags & OPT_PROTECTED) {
			snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%.*s') - "
			         "can't set protected config", (int)SPW_MIN(n->len, 128), n->ptr);
			return -EINVAL;
		}
		if (!(o->flags & OPT_MUTABLE) && o->type != OPT_CONST) {
			snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%.*s') - "
			         "can't set immutable config", (int)SPW_MIN(n->len, 128), n->ptr);
			return -EINVAL;
		}
		for (int j = 0; j < i; j++) {
			if (pairs[2 * j].len == n->len && !strncasecmp(pairs[2 * j].ptr, n->ptr, n->len)) {
				snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%.*s') - "
				         "duplicate parameter", (int)SPW_MIN(n->len, 128), n->ptr);
				return -EINVAL;
			}
		}
		found[i] = o;
	}
	/* Then values, into a staging copy: nothing changes unless all parse. The lock keeps two
	 * concurrent CONFIG SETs from interleaving their publish steps. */
	pthread_mutex_lock(&set_lock);
	staged = g_cfg;
	for (int i = 0; i < npairs; i++) {
		const resp_slice *n = &pairs[2 * i], *v = &pairs[2 * i + 1];
		if (option_parse(found[i], v->ptr, v->len, &staged, why, sizeof(why)) < 0) {
			pthread_mutex_unlock(&set_lock);
			snprintf(err, errlen, "ERR CONFIG SET failed (possibly related to argument '%.*s') - %s",
			         (int)SPW_MIN(n->len, 128), n->ptr, why);
			return -EINVAL;
		}
	}
	for (int i = 0; i < npairs; i++) {
		option_publish(found[i], &staged);
		if (found[i]->apply)
			found[i]->apply();
	}
	atomic_fetch_add_explicit(&g_cfg_version, 1, memory_order_release);
	pthread_mutex_unlock(&set_lock);
	return 0;
}

int config_set(const char *name, size_t nlen, const char *val, size_t vlen, char *err, size_t errlen)
{
	resp_slice p[2] = { { name, nlen }, { val, vlen } };
	return config_set_pairs(p, 1, err, errlen);
}

/* Quote a value for the config file if it needs it (empty, blanks, quotes, control bytes). */
static void config_quote(FILE *fp, const char *v)
{
	bool plain = *v != '\0';
	for (const char *p = v; *p; p++)
		if (isspace((unsigned char)*p) || *p == '"' || *p == '\'' || *p == '\\' || !isprint((unsigned char)*p))
			plain = false;
	if (plain) {
		fputs(v, fp);
		return;
	}
	fputc('"', fp);
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(fp, "\\%c", *p);
		else if (isprint(*p) || *p == ' ')
			fputc(*p, fp);
		else
			fprintf(fp, "\\x%02x", *p);
	}
	fputc('"', fp);
}

/* An option's value and the line's end for the config file. save's rules go unquoted, as Redis
 * writes them ("save 3600 1 300 100"; quoted they would be one word to Redis), "" when none; so do
 * client-output-buffer-limit's groups (Redis reads them from one line too). */
static void config_value_write(FILE *fp, const spw_option *o, char *buf, size_t cap)
{
	const char *v = option_format(o, buf, cap);
	if ((o->type == OPT_SAVE || o->type == OPT_OBL) && v[0])
		fputs(v, fp);
	else
		config_quote(fp, v);
	fputc('\n', fp);
}

/* Does a config line (name + value words) give option o the value it has now? */
static bool config_line_unchanged(const spw_option *o, char **words, int n)
{
	char val[2048], why[256];
	spw_config tmp;
	size_t k = 0;
	if (n < 2 || o->type == OPT_CONST)
		return o->type == OPT_CONST;
	if (o->type == OPT_OBL)
		return false;   /* a line may give one class of several: write the whole value once */
	if (!strcmp(o->name, "threads") || !strcmp(o->name, "dir"))
		return true;   /* resolved at start-up (0 = cores, "." = cwd) and immutable: keep as written */
	for (int i = 1; i < n && k < sizeof(val); i++)
		k += (size_t)snprintf(val + k, sizeof(val) - k, "%s%s", i > 1 ? " " : "", words[i]);
	if (k >= sizeof(val))
		return false;
	memcpy(&tmp, &g_cfg, sizeof(tmp));
	if (option_parse(o, val, k, &tmp, why, sizeof(why)) < 0)
		return false;
	if (o->type == OPT_STRING)
		return strcmp((char *)&tmp + o->off, (char *)&g_cfg + o->off) == 0;
	return memcmp((char *)&tmp + o->off, (char *)&g_cfg + o->off, o->size) == 0;
}

int config_rewrite(char *err, size_t errlen)
{
	char tmp[1100 + 16], line[4096], words_buf[4097], buf[640];
	char *words[64];
	bool seen[NOPTIONS];
	FILE *in = NULL, *out = NULL;
	int rc = 0;

	if (!g_cfg.config_file[0]) {
		snprintf(err, errlen, "ERR The server is running without a config file");
		return -ENOENT;
	}
	memset(seen, 0, sizeof(seen));
	snprintf(tmp, sizeof(tmp), "%s.rewrite.%d", g_cfg.config_file, (int)getpid());
	in = fopen(g_cfg.config_file, "r");
	out = fopen(tmp, "w");
	if (!out) {
		rc = -errno;
		goto fail;
	}
	while (in && fgets(line, sizeof(line), in)) {
		const char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		int n = (*p && *p != '#') ? config_line_split(p, words_buf, words, (int)SPW_ARRAY_LEN(words)) : 0;
		const spw_option *o = n > 0 ? option_find(words[0], strlen(words[0])) : NULL;
		if (!o || (o->flags & OPT_CLI_ONLY)) {
			fputs(line, out);
			if (line[strlen(line) - 1] != '\n')
				fputc('\n', out);
			continue;
		}
		int idx = (int)(o - options);
		if (seen[idx])
			continue;   /* later duplicates would override the value we write: drop them */
		seen[idx] = true;
		if (config_line_unchanged(o, words, n)) {
			fputs(line, out);   /* same value: keep the user's spelling ("64m", quotes) */
			if (line[strlen(line) - 1] != '\n')
				fputc('\n', out);
			continue;
		}
		fprintf(out, "%s ", words[0]);
		config_value_write(out, o, buf, sizeof(buf));
	}
	for (int i = 0; i < NOPTIONS; i++) {
		const spw_option *o = &options[i];
		char def[64];
		if (seen[i] || o->type == OPT_CONST || (o->flags & OPT_CLI_ONLY))
			continue;
		/* Compare with the default in the same canonical form. */
		spw_config d;
		memset(&d, 0, sizeof(d));
		if (option_parse(o, o->def, strlen(o->def), &d, def, sizeof(def)) == 0 &&
		    !memcmp((char *)&d + o->off, (char *)&g_cfg + o->off, o->size))
			continue;
		if (!strcmp(o->name, "threads") || !strcmp(o->name, "dir") || option_sized[i])
			continue;   /* resolved at start-up (cores, absolute path, sized from --maxmemory): not
			             * a user choice */
		fprintf(out, "%s ", o->name);
		config_value_write(out, o, buf, sizeof(buf));
	}
	if (fflush(out) != 0 || fsync(fileno(out)) != 0) {
		rc = -errno;
		goto fail;
	}
	if (fclose(out) != 0) {
		out = NULL;
		rc = -errno;
		goto fail;
	}
	out = NULL;
	if (rename(tmp, g_cfg.config_file) != 0) {
		rc = -errno;
		goto fail;
	}
	if (in)
		fclose(in);
	return 0;
fail:
	snprintf(err, errlen, "ERR Rewriting config file: %s", strerror(-rc));
	if (out)
		fclose(out);
	if (in)
		fclose(in);
	unlink(tmp);
	return rc;
}
