/*
 * server_int.h - what the server's files share: configuration, workers, clients, the command table
 * and reply helpers. Private to server/.
 *
 * Threading: one worker thread owns each client end to end (read, parse, execute, write). Command
 * handlers run on the client's worker with its hlog session protected; they may use the worker's
 * scratch buffer and must not block.
 */
#ifndef SPW_SERVER_INT_H
#define SPW_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/uio.h>
#include "common/spw.h"
#include "proto/resp.h"
#include "log/hlog.h"
#include "server/conn.h"

/* ---------------- configuration (config.c) ---------------- */

/* One Redis "save <seconds> <changes>" rule: a checkpoint when at least changes writes happened and
 * seconds passed since the last successful one. */
typedef struct save_rule {
	int64_t seconds, changes;
} save_rule;
#define CONFIG_SAVE_MAX 16
typedef struct save_rules {
	int n;
	save_rule r[CONFIG_SAVE_MAX];
} save_rules;

/* One class of Redis's client-output-buffer-limit: a client whose unsent replies pass hard bytes,
 * or stay above soft bytes for soft_seconds, is closed (0 = no limit). */
typedef struct client_obl {
	uint64_t hard, soft, soft_seconds;
} client_obl;
enum { SPW_OBL_NORMAL, SPW_OBL_REPLICA, SPW_OBL_PUBSUB, SPW_OBL_CLASSES };

typedef struct spw_config {
	char bind[256];
	int port;
	int threads;
	int maxclients;
	int loglevel;                 /* SPW_LOG_* */
	char logfile[1024];
	char config_file[1024];
	char dir[1024];
	uint64_t index_bytes;         /* --index */
	uint64_t index_max_size;      /* --index-max-size (0 = memcap_index_max's default) */
	int index_resize_threshold;   /* --index-resize-threshold, percent */
	int index_resize_freq;        /* --index-resize-freq, seconds */
	uint64_t memory_bytes;        /* --memory */
	uint64_t page_bytes;          /* --page */
	int mutable_percent;          /* --mutable-percent */
	uint64_t proto_max_bulk_len;  /* proto-max-bulk-len */
	uint64_t querybuf_limit;      /* client-query-buffer-limit */
	uint64_t output_pause_bytes;  /* stop reading a client whose unsent replies pass this */
	int timeout;                  /* idle client timeout in seconds, 0 = never */
	int tcp_keepalive;
	int databases;                /* reported for CONFIG GET databases; only db 0 exists */
	char import_rdb[1024];        /* --import-rdb FILE (import.c), "" = none */
	bool import_check_only;       /* --check-only: import's read and summary, nothing stored */
	/* Garnet's storage-tier flags (see tier_open in start.c for how they map to the device). */
	bool storage_tier;            /* --storage-tier */
	char logdir[1024];            /* --logdir: segment files go to <logdir>/Store; "" = dir */
	uint64_t segment_bytes;       /* --segment */
	int device_type;              /* --device-type: SPW_DEVICE_TYPE_* */
	bool device_fault;            /* --device-type fault:<type>: the fault-injecting wrapper */
	char device_fault_spec[128];  /* device-fault: arms the wrapper (CONFIG SET, tests) */
	int device_io_backend;        /* --device-io-backend: SPW_DEVICE_IO_* */
	int device_throttle_limit;    /* --device-throttle-limit: IOs in flight, 0 = the device's default */
	int device_completion_threads; /* --device-completion-threads */
	uint64_t initial_io_record_size; /* --initial-io-record-size */
	bool sg_get;                  /* --sg-get: a parked GET prefetches the GETs after it (park.c note 3) */
	/* Durability (persist.c, aof.h). */
	bool aof;                     /* --aof / appendonly */
	int aof_fsync;                /* --aof-fsync / appendfsync: AOF_FSYNC_* (server/aof.h) */
	int checkpoint_interval;      /* --checkpoint-interval seconds, 0 = off */
	int recover_checkpoint;       /* --recover-checkpoint: SPW_RECOVER_* */
	save_rules save;              /* save: read them with config_save_rules from other threads */
	char dbfilename[256];         /* accepted for Redis configs, unused */
	char appendfilename[256];     /* accepted for Redis configs, unused */
	/* Space: compaction, expiry, caps (compact.c, expire.c). */
	int compaction_max_segments;  /* --compaction-max-segments: compact past this many (0 = off) */
	uint64_t compaction_io_limit; /* --compaction-io-limit: bytes/s compaction reads + writes (0 = no limit) */
	uint64_t disk_max;            /* --disk-max: bytes of disk the data may take (0 = no limit) */
	int maxmemory_policy;         /* maxmemory-policy: SPW_POLICY_* */
	/* The memory cap (memcap.c). */
	uint64_t maxmemory;           /* --maxmemory: bytes everything the server allocates may take (0 = no cap) */
	client_obl obl[SPW_OBL_CLASSES]; /* client-output-buffer-limit, per client class */
	/* Collection encodings (Redis 7.0's names and defaults), CONFIG SET-able: read them with
	 * __atomic_load_n(..., __ATOMIC_RELAXED) (config.c note 6). */
	bool coll_write_in_place;           /* --coll-write-in-place: a large collection's write changes
	                                     * its records in place while they are mutable (yes) */
	uint64_t coll_record_max;           /* a hashtable-encoded hash or set whose payload passes this
	                                     * many bytes becomes large (coll_large.c; 4096) */
	uint64_t hash_max_listpack_entries; /* a hash with more fields leaves the listpack (512) */
	uint64_t hash_max_listpack_value;   /* ... or with a longer field or value, in bytes (64) */
	uint64_t set_max_intset_entries;    /* an integer set with more members leaves the intset (512) */
	uint64_t zset_max_listpack_entries; /* a sorted set with more members leaves the listpack (128) */
	uint64_t zset_max_listpack_value;   /* ... or with a longer member, in bytes (64) */
	int list_max_listpack_size;         /* quicklist node: > 0 entries, -1..-5 = 4..64 KiB (-2) */
	int list_compress_depth;            /* quicklist nodes kept uncompressed at each end (0 = none) */
	uint64_t hll_sparse_max_bytes; /* hll-sparse-max-bytes: a sparse HLL past it turns dense (cmd_hll.c) */
} spw_config;

/* maxmemory-policy values (Redis's names). Any allkeys-* or volatile-* policy makes a full
 * --disk-max drop the oldest segments (cache mode, compact.c); noeviction answers -OOM. */
enum {
	SPW_POLICY_VOLATILE_LRU, SPW_POLICY_VOLATILE_LFU, SPW_POLICY_VOLATILE_RANDOM,
	SPW_POLICY_VOLATILE_TTL, SPW_POLICY_ALLKEYS_LRU, SPW_POLICY_ALLKEYS_LFU,
	SPW_POLICY_ALLKEYS_RANDOM, SPW_POLICY_NOEVICTION,
};

/* g_srv.deny_oom bits: why writes that grow the data are refused. */
enum { SPW_OOM_DISK = 1 << 0, SPW_OOM_MEMORY = 1 << 1 };

/* --recover-checkpoint values. */
enum { SPW_RECOVER_NEWEST, SPW_RECOVER_PREVIOUS };

/* --device-type values (Garnet's names, matched without case). */
enum {
	SPW_DEVICE_TYPE_DEFAULT, SPW_DEVICE_TYPE_NATIVE, SPW_DEVICE_TYPE_RANDOMACCESS,
	SPW_DEVICE_TYPE_FILESTREAM, SPW_DEVICE_TYPE_AZURESTORAGE, SPW_DEVICE_TYPE_LOCALMEMORY,
	SPW_DEVICE_TYPE_NULL,
	SPW_DEVICE_TYPE_POSIX,        /* Spillway's own: pread/pwrite on a thread (no O_DIRECT needed) */
};
/* --device-io-backend values. */
enum { SPW_DEVICE_IO_DEFAULT, SPW_DEVICE_IO_LIBAIO, SPW_DEVICE_IO_URING };

extern spw_config g_cfg;
/* Bumped by every successful CONFIG SET, so workers can refresh what they cache per client (the
 * parser's limits) with one relaxed load per loop pass. */
extern _Atomic uint32_t g_cfg_version;

/* Parse argv (and --config FILE) into g_cfg. 0, 1 when --help/--version printed, or -EINVAL after
 * printing a message that names the flag. */
int config_load(int argc, char **argv);
void config_print_help(void);
/* CONFIG SET name value: 0, or -EINVAL with Redis's error text in err. */
int config_set(const char *name, size_t nlen, const char *val, size_t vlen, char *err, size_t errlen);
/* CONFIG SET name value [name value ...], all or nothing: pairs[] alternates names and values. */
int config_set_pairs(const resp_slice *pairs, int npairs, char *err, size_t errlen);
/* CONFIG GET: calls fn for every option whose name matches the glob. */
typedef void (*config_visit_fn)(void *ctx, const char *name, const char *value);
void config_get_matching(const char *pat, size_t plen, config_visit_fn fn, void *ctx);
/* CONFIG REWRITE: 0, or -errno with Redis's error text in err ("The server is running without a
 * config file" when started without one). */
int config_rewrite(char *err, size_t errlen);
/* A consistent copy of the save rules (CONFIG SET may change them meanwhile). */
void config_save_rules(save_rules *out /* out */);
/* Whether the last config_load set the option (by its name or alias) on the command line or in the
 * config file, rather than leaving the table's default (memcap.c sizes what the user left). */
bool config_option_given(const char *name);
/* Start-up set the option from others (memcap.c: --memory from --maxmemory): CONFIG REWRITE leaves
 * it out, so that the next start sizes it again. */
void config_option_sized(const char *name);
/* Reset g_cfg to the table's defaults (config_load does this first). */
void config_defaults(void);
/* With --storage-tier, --memory must hold at least this many --page pages. */
#define TIER_MIN_PAGES 4
/* Arm (or disarm) the fault device from g_cfg.device_fault_spec; nothing without one (start.c). */
void server_device_fault_apply(void);

/* ---------------- workers and clients (worker.c, client.c, park.c) ---------------- */

typedef struct worker worker;
typedef struct client client;

#define WORKER_MAX_BIND 4             /* --bind addresses */

#define CLIENT_CLOSE_AFTER_REPLY (1u << 0)   /* QUIT, protocol error: close once replies are out */
#define CLIENT_CLOSE_ASAP        (1u << 1)   /* CLIENT KILL, query buffer limit: close now */
#define CLIENT_READ_PAUSED       (1u << 2)   /* back-pressure: not reading until replies drain */
#define CLIENT_PARKED            (1u << 3)   /* a command waits on the device (reply_pending) */
#define CLIENT_SAVE_WAIT         (1u << 4)   /* SAVE: waits for the saver's checkpoint (persist.c) */
#define CLIENT_SHUTDOWN_SAVE     (1u << 5)   /* SHUTDOWN: the checkpoint it waits for decides it */
#define CLIENT_COMPACT_WAIT      (1u << 15)  /* COMPACT: waits for its pass (compact.c), with SAVE_WAIT */
/* CLIENT REPLY (cmd_client.c note 3): OFF mutes every reply, SKIP the current command's, SKIP_NEXT
 * becomes SKIP when the current command ends; MUTE_WAIT: a muted SAVE/COMPACT answered later. */
#define CLIENT_REPLY_OFF         (1u << 11)
#define CLIENT_REPLY_SKIP        (1u << 12)
#define CLIENT_REPLY_SKIP_NEXT   (1u << 13)
#define CLIENT_REPLY_MUTE_WAIT   (1u << 14)
#define CLIENT_REPLY_MODES (CLIENT_REPLY_OFF | CLIENT_REPLY_SKIP | CLIENT_REPLY_SKIP_NEXT)

/* What a parked multi-key command had done before it parked, so that its re-run goes on from there
 * instead of repeating a mutation (park.c note 1). Zero unless the command parked. */
typedef struct client_resume {
	int stage;
	int idx;
	long long acc;
} client_resume;

/* What the store tags a request's device reads with (op_ctx, park.c notes 2-3): the client's
 * own op, or one slot of its look-ahead ring. */
typedef struct client_op {
	client *c;
	uint32_t keys;                /* a ring slot: the keys of its request */
	bool counted;                 /* a ring slot: its wait is in tier_parked_commands already */
} client_op;

struct client {
	conn conn;                    /* the socket, through conn.h */
	uint32_t flags;
	uint64_t id;
	worker *w;
	int proto;                    /* 2 or 3; also out.proto */
	resp_parser parser;
	char *rbuf;                   /* read buffer; [rpos, rlen) unparsed */
	size_t rlen, rpos, rcap;
	resp_out out;
	int argc;                     /* the request being executed */
	const resp_slice *argv;
	const struct spw_command *cmd;        /* the command being executed */
	const struct spw_command *last_cmd;
	char name[128];               /* CLIENT SETNAME */
	char addr[64];                /* ip:port of the peer */
	char laddr[64];               /* ip:port of our end */
	int64_t ctime_ms;             /* connected at */
	int64_t last_ms;              /* last interaction */
	client *next, *prev;          /* worker's client list */
	client *pending_next;         /* worker's list of clients with replies to write */
	bool in_pending;
	uint32_t ev;                  /* events registered with epoll (EPOLLIN/EPOLLOUT) */
	_Atomic bool kill_mark;       /* CLIENT KILL from another worker: the owner closes it */
	/* Storage tier (park.c notes 1-2). */
	client *resume_next;          /* worker's list of clients whose device reads are done */
	bool in_resume;               /* on that list */
	bool io_wait;                 /* parked: the store will call the ready callback for it */
	bool op_held;                 /* the store holds fetched records for it: release when done */
	client_resume resume;
	client_op self_op;            /* the op of a request the look-ahead did not cover */
	client_op *park_op;           /* parked: the op whose ready callback resumes it */
	bool park_sg;                 /* parked on a GET/MGET with sg-get on: read on, look ahead */
	bool sg_stop;                 /* the look-ahead met a request it must not pass */
	bool sg_full;                 /* it has no room for the next request until one has run */
	/* The look-ahead ring (park.c note 3): one op per request after the running one whose keys were
	 * prefetched, in request order from sg_head. Its slots live in chunks allocated as the ring
	 * first reaches them and never moved (the store holds pointers to them): a client that looks
	 * ahead a few requests costs a few hundred bytes, not the whole ring. */
	client_op **sg_chunks;
	uint32_t sg_head, sg_count;
	uint32_t sg_keys;             /* keys of the covered requests */
	size_t sg_scan;               /* bytes after rpos parsed by the look-ahead (the covered end) */
	uint64_t save_ticket;         /* CLIENT_SAVE_WAIT: the checkpoint request it waits for */
	int64_t obl_soft_since;       /* ms its unsent replies first passed the soft output limit, 0 = below */
};

struct spw_command;

/*
 * The server's own counters, kept per worker and written only by it (worker.c note 5), declared
 * once: X(field, group, INFO name, doc). worker_stats' fields, their sums over the workers
 * (server_counters, info.c), CONFIG RESETSTAT's baselines and INFO's lines all come from this
 * table. The group says where INFO shows a counter: SRV_CTR_STATS in "# Stats", SRV_CTR_TIER and
 * SRV_CTR_SG among its storage-tier lines (only with --storage-tier), SRV_CTR_NONE nowhere.
 */
#define SERVER_COUNTERS(X) \
	X(connections,     SRV_CTR_STATS, "total_connections_received", "connections accepted") \
	X(commands,        SRV_CTR_STATS, "total_commands_processed", "commands run (a parked one counts once, when it completes)") \
	X(net_in,          SRV_CTR_STATS, "total_net_input_bytes", "bytes read from clients") \
	X(net_out,         SRV_CTR_STATS, "total_net_output_bytes", "bytes written to clients") \
	X(rejected,        SRV_CTR_STATS, "rejected_connections", "connections refused at maxclients") \
	X(expired_keys,    SRV_CTR_STATS, "expired_keys", "expired keys the server removed (INFO adds the store's lazy removals)") \
	X(keyspace_hits,   SRV_CTR_STATS, "keyspace_hits", "key lookups that found the key") \
	X(keyspace_misses, SRV_CTR_STATS, "keyspace_misses", "key lookups that did not") \
	X(errors,          SRV_CTR_STATS, "total_error_replies", "error replies (reply_error)") \
	X(reads,           SRV_CTR_STATS, "total_reads_processed", "socket reads that moved bytes") \
	X(writes,          SRV_CTR_STATS, "total_writes_processed", "socket writes that moved bytes") \
	X(obl_closed,      SRV_CTR_STATS, "client_output_buffer_limit_disconnections", "clients closed for passing client-output-buffer-limit (Redis 7.2's name)") \
	X(coll_patch_inplace, SRV_CTR_STATS, "coll_patches_in_place", "collection writes that changed only the bytes that differ, where the record lies (coll.c note 6)") \
	X(coll_patch_copy, SRV_CTR_STATS, "coll_patches_copied", "collection writes patched while copying the old record once (coll.c note 6)") \
	X(coll_large_conversions, SRV_CTR_STATS, "coll_large_conversions", "small collections that became large (coll_large.c note 6)") \
	X(coll_bucket_splits, SRV_CTR_STATS, "coll_bucket_splits", "buckets of large collections split (coll_large.c note 5)") \
	X(coll_part_reads, SRV_CTR_STATS, "coll_part_reads", "part records of large collections read by commands") \
	X(coll_whole_reads, SRV_CTR_STATS, "coll_whole_reads", "commands that assembled a whole large collection (coll_large.c note 1)") \
	X(coll_group_writes, SRV_CTR_STATS, "coll_group_writes", "hlog_group_rmw calls that succeeded (coll_large.c note 2)") \
	X(coll_list_node_writes, SRV_CTR_STATS, "coll_list_node_writes", "node parts of large lists written (coll_list_large.c note 2)") \
	X(coll_list_node_reads, SRV_CTR_STATS, "coll_list_node_reads", "node parts of large lists read (coll_list_large.c note 3)") \
	X(coll_list_whole, SRV_CTR_STATS, "coll_list_whole_ops", "commands that assembled a whole large list (coll_list_large.c note 5)") \
	X(coll_bucket_views, SRV_CTR_STATS, "coll_bucket_views", "large hash/set operations on one bucket that used the bucket as read as their view, unassembled (coll_large.c note 10)") \
	X(coll_bucket_patches, SRV_CTR_STATS, "coll_bucket_patches", "point writes to a large hash/set that patched their one bucket where it was read, not rebuilt (coll_large.c note 10)") \
	X(coll_list_elem_writes, SRV_CTR_STATS, "coll_list_elem_writes", "out-of-line elements of large lists written (coll_list_elem.c)") \
	X(coll_list_elem_reads, SRV_CTR_STATS, "coll_list_elem_reads", "out-of-line elements of large lists read (coll_list_elem.c note 4)") \
	X(coll_list_elem_drops, SRV_CTR_STATS, "coll_list_elem_drops", "out-of-line elements of large lists tombstoned (coll_list_elem.c note 3)") \
	X(coll_zset_node_reads, SRV_CTR_STATS, "coll_zset_node_reads", "tree nodes of large sorted sets read by commands (coll_zset_large.c)") \
	X(coll_zset_node_writes, SRV_CTR_STATS, "coll_zset_node_writes", "tree nodes of large sorted sets written or removed (coll_zset_large.c)") \
	X(coll_zset_node_splits, SRV_CTR_STATS, "coll_zset_node_splits", "tree nodes of large sorted sets split (coll_zset_large.c note 4)") \
	X(coll_zset_point_reads, SRV_CTR_STATS, "coll_zset_point_reads", "reads of large sorted sets answered without a whole read (coll_zset_large.c note 2)") \
	X(coll_zset_point_writes, SRV_CTR_STATS, "coll_zset_point_writes", "writes of large sorted sets that changed only the touched parts (coll_zset_large.c note 3)") \
	X(busy_ns,         SRV_CTR_NONE,  NULL, "time spent not sleeping (INFO worker_N_busy_pct)") \
	X(parked,          SRV_CTR_TIER,  "tier_parked_commands", "commands parked on the device (each park counts), and those whose read a parked GET's look-ahead queued (park.c note 3)") \
	X(io_errors,       SRV_CTR_TIER,  "tier_io_error_replies", "commands answered with a device IO error") \
	X(sg_runs,         SRV_CTR_SG,    "sg_lookahead_runs", "look-aheads run by a parked GET/MGET (park.c note 3)") \
	X(sg_gets,         SRV_CTR_SG,    "sg_lookahead_gets", "keys of later GET/MGET requests they prefetched") \
	X(sg_pending,      SRV_CTR_SG,    "sg_lookahead_pending", "of those, the ones that queued a device read")

enum { SRV_CTR_NONE, SRV_CTR_STATS, SRV_CTR_TIER, SRV_CTR_SG };

#define SRV_CTR_FIELD(field, group, info, doc) uint64_t field;
typedef struct worker_stats {
	SERVER_COUNTERS(SRV_CTR_FIELD)
	uint64_t *cmd_calls;          /* per command index: calls */
	uint64_t *cmd_failed;         /* per command index: calls that replied with an error */
	uint64_t *cmd_ticks;          /* per command index: server_ticks() spent (see server_ticks) */
	uint64_t *cmd_rejected;       /* per command index: rejected before running (arity) */
} worker_stats;

/* SERVER_COUNTERS summed over the workers (info.c): server_counters_sum. */
typedef struct server_counters {
	SERVER_COUNTERS(SRV_CTR_FIELD)
} server_counters;
/* The sums, less the CONFIG RESETSTAT baselines unless raw; relaxed snapshots (info.c note 1). */
void server_counters_sum(server_counters *out /* out */, bool raw);
/* One row of SERVER_COUNTERS for whoever lists them (INFO, later metrics): off is the field's
 * offset in server_counters. */
typedef struct server_counter_def {
	const char *field, *info, *doc;
	int group;
	size_t off;
} server_counter_def;
extern const server_counter_def server_counter_defs[];
extern const unsigned server_counter_count;

struct worker {
	int idx;
	int epfd;
	int wake_fd;                  /* eventfd: shutdown and CLIENT KILL from other threads */
	hlog_session *sess;
	client *clients;              /* all clients of this worker */
	uint32_t nclients;
	client *pending;              /* clients with replies waiting to be written */
	resp_chunk *chunk_pool;       /* free reply chunks */
	uint32_t chunk_pool_len;
	uint32_t chunk_pool_max;      /* idle chunks kept (client_chunk_pool_limit) */
	uint8_t *scratch;             /* per-worker scratch for commands (RENAME, GETRANGE, ...) */
	size_t scratch_cap;
	int64_t now_ms;               /* clock read once per loop pass */
	worker_stats stats;
	_Atomic int kill_pending;     /* another thread asked us to look for CLIENT KILL marks */
	int listen_fds[WORKER_MAX_BIND]; /* one per --bind address */
	int nlisten;
	pthread_t thread;
	pthread_mutex_t clients_lock; /* guards the client LIST (not the clients' fields): taken by the
	                               * owner on connect/close and by CLIENT LIST/KILL elsewhere */
	worker_stats stats_base;      /* CONFIG RESETSTAT baseline: reported = stats - stats_base */
	int64_t buf_bytes;            /* bytes held by read buffers, reply chunks and scratch (a gauge) */
	int rbuf_clients;             /* clients holding a read buffer: worker_cron shrinks idle ones */
	uint64_t aof_buf_bytes;       /* its AOF writer's buffer (a gauge, memcap.c) */
	uint64_t obl_min;             /* unsent reply bytes past which client_obl_check runs (UINT64_MAX: never) */
	int64_t mem_check_ms;         /* memcap_worker_check's last look at the cap */
	int64_t next_cron_ms;         /* next idle-client timeout check */
	uint32_t cfg_version;         /* g_cfg_version last applied */
	uint64_t cmd_clock;           /* command timing: server_ticks() at the end of the last command */
	bool accept_paused;           /* listeners off for a second after EMFILE (cron re-arms) */
	bool stopping;                /* shutdown seen: not accepting, draining replies */
	int64_t stop_deadline_ms;
	/* Storage tier (worker.c note 6, park.c). */
	bool tier;                    /* the store has a device: poll the session, park clients */
	bool loading;                 /* g_srv.loading as this pass began (worker_aof_refresh) */
	int io_fd;                    /* hlog_session_fd, in the epoll set (-1 when none) */
	bool io_dirty;                /* reads may be queued and not yet submitted: poll before sleeping */
	uint32_t nparked;             /* clients waiting on the device (io_wait) */
	client *resume_head, *resume_tail;   /* ready clients, in completion order */
	resp_parser sg_parser;        /* look-ahead over a parked client's later requests (park.c note 3) */
	/* Durability (worker.c note 7). */
	struct aof_writer *aof;       /* this worker's AOF file while --aof is on, else NULL */
	uint64_t aof_gen;             /* the generation it writes */
	int aof_fsync;                /* the fsync mode it was set to */
	int aof_err;                  /* last write/sync error logged (0 = none): log once per error */
	_Atomic int save_pending;     /* the saver finished a checkpoint: answer SAVE waiters */
};

typedef struct server_state {
	hlog *store;
	int nworkers;
	worker *workers;
	_Atomic int shutdown;         /* SHUTDOWN or signal seen */
	_Atomic uint64_t next_client_id;
	_Atomic uint32_t nclients;    /* connected_clients across workers */
	int64_t start_ms;
	uint64_t start_mono_ns;
	char executable[1024];
	int pid;
	_Atomic int shutdown_signal;  /* SIGTERM/SIGINT number, 0 for SHUTDOWN */
	_Atomic int shutdown_logged;
	pthread_mutex_t stats_lock;   /* CONFIG RESETSTAT and the INFO rate sampler */
	char run_id[41];
	char config_file_abs[1024];
	uint64_t start_ticks;         /* server_ticks() at start, with start_mono_ns: calibration */
	struct dev *dev;              /* the storage tier's device (--storage-tier), else NULL */
	_Atomic int start_failed;     /* a worker could not start: exit code 1 */
	/* Durability (persist.c). */
	_Atomic int loading;          /* recovery runs: commands without CMD_LOADING get -LOADING */
	_Atomic int deny_oom;         /* SPW_OOM_* bits: CMD_DENYOOM commands get -OOM (commands.c) */
	_Atomic uint64_t aof_gen;     /* the AOF generation workers write; the saver bumps it */
	_Atomic int aof_write_err;    /* 0, or the last AOF write/sync error (INFO aof_last_write_status) */
	_Atomic int aof_writers;      /* workers with an AOF writer open (persist.c note 5) */
	_Atomic int shutdown_nosave;  /* SHUTDOWN NOSAVE: no final checkpoint */
	struct dev *logdev;           /* where checkpoints write the log (g_srv.dev with a tier) */
	bool logdev_own;              /* opened by start.c for checkpoints only: close it */
} server_state;

extern server_state g_srv;

/* The clock of per-command timing (commandstats): the TSC on x86-64 (cheaper to read than
 * clock_gettime; invariant TSC is what Linux itself uses as clocksource), CLOCK_MONOTONIC
 * elsewhere. Ticks are turned into time only when INFO asks, by server_ticks_to_ns(), calibrated
 * against CLOCK_MONOTONIC over the server's lifetime. */
static inline uint64_t server_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#else
	return spw_mono_ns();
#endif
}
uint64_t server_ticks_to_ns(uint64_t ticks);

/* Ensure the worker's scratch holds n bytes; NULL on ENOMEM. Valid until the next call, which keeps
 * the contents (it grows like realloc). */
uint8_t *worker_scratch(worker *w, size_t n);
/* Mark the client to close; from its own worker only. */
void client_close_async(client *c);
/* Ask every worker to close the clients matching: used by CLIENT KILL (id, or addr, or laddr). */
int server_kill_clients(uint64_t id, const char *addr, const char *laddr, bool skipme, client *self);
/* Visit every client of every worker for CLIENT LIST. Each worker's list is walked under its
 * clients_lock (so no client is freed under us); the fields of clients of other workers are read
 * without locks: plain snapshots, good enough for an operator's listing. */
typedef void (*client_visit_fn)(void *ctx, const client *c);
void server_clients_visit(client_visit_fn fn, void *ctx);
void server_request_shutdown(void);
/* Wake every worker for one loop pass (after CONFIG SET: a sleeping worker re-reads its timers). */
void server_wake_all(void);
/* Format one CLIENT LIST / CLIENT INFO line (no trailing newline) into buf. Returns the length. */
size_t client_info_format(const client *c, char *buf, size_t cap);

/* Inside a worker (worker.c, client.c, park.c); all on the worker's own thread. */
void *worker_main(void *arg);                  /* the thread: loop until shutdown (start.c starts it) */
worker *worker_self(void);                     /* the worker of this thread, NULL elsewhere */
void worker_scratch_trim(worker *w);
/* client.c: a client's connection, input and output. */
void client_create(worker *w, conn *cn, const struct sockaddr_storage *peer);
void client_free(worker *w, client *c);
bool client_readable(const client *c);
void client_read(worker *w, client *c);
void client_process_input(worker *w, client *c);
void client_pending_add(worker *w, client *c);  /* write, close or re-arm c at the end of the pass */
void client_pending_flush(worker *w);
void client_chunk_pool_free(worker *w);
void client_chunk_pool_limit(worker *w);
#define RBUF_IDLE_MS 2000              /* an idle client's read buffer shrinks (client.c note 2) */
/* worker_cron: a client idle for RBUF_IDLE_MS wasting more than 4 KiB of read buffer keeps only
 * its unparsed bytes (none: the buffer goes), as Redis's clientsCronResizeQueryBuffer. */
void client_rbuf_idle_shrink(worker *w, client *c);
/* park.c: clients on the storage tier. */
client_op *client_op_begin(worker *w, client *c);
void client_park(worker *w, client *c, client_op *op, size_t consumed);
void client_op_end(worker *w, client *c, client_op *op, size_t consumed);
bool client_sg_open(const client *c);
void client_sg_extend(worker *w, client *c);
void client_tier_forget(worker *w, client *c);
void client_sg_free(client *c);
void worker_op_ready(void *cb_arg, void *op_ctx);   /* the store's ready callback */
void worker_io_pass(worker *w);

/* ---------------- the memory cap (memcap.c) ---------------- */

/* What the server allocates, by part (memcap.c note 1): INFO # Memory and the -OOM gate. */
typedef struct memcap_usage {
	uint64_t log;                 /* log pages in memory */
	uint64_t index;               /* the hash index and its overflow buckets */
	uint64_t io;                  /* the log's read and fetch buffers */
	uint64_t clients;             /* client structs, query and reply buffers, reply pools, scratch */
	uint64_t aof;                 /* the AOF writers' buffers */
	uint64_t total;               /* used_memory: the sum */
} memcap_usage;
/* The parts now, from the store's figures hi (hlog_info_get) and the workers' gauges; relaxed
 * snapshots (info.c note 1). Also raises the peak. */
void memcap_usage_get(const hlog_info *hi, memcap_usage *out /* out */);
uint64_t memcap_peak(void);
/* used_memory once the store was open, before any client (INFO used_memory_startup). */
void memcap_startup_record(void);
uint64_t memcap_startup_bytes(void);
/* Start-up (start.c, after config_load): with --maxmemory, size --memory (and --index) from the cap
 * when the user left them, or check that they fit. 0, or -1 after printing why on stderr. */
int memcap_startup_check(void);
/* The size the index may double up to (--index-max-size, or its default; never below --index). */
uint64_t memcap_index_max(void);
/* Once per worker pass (worker.c): the -OOM gate's SPW_OOM_MEMORY bit, looked at about once a
 * millisecond, every pass while it is set. */
void memcap_worker_check(worker *w);
/* What a worker caches of the cap's options (worker_config_refresh): obl_min from
 * client-output-buffer-limit's normal class, its reply chunk pool's size. */
void memcap_worker_refresh(worker *w);
/* client-output-buffer-limit's value: Redis's "<class> <hard> <soft> <soft seconds>" groups; the
 * classes named change, the others keep what cfg has. 0, or -EINVAL with Redis's reason in err. */
int memcap_obl_parse(const char *v, size_t n, client_obl *cfg, char *err, size_t errlen);
/* As CONFIG GET shows it (Redis 7.0: "normal 0 0 0 slave 268435456 67108864 60 pubsub ..."). */
const char *memcap_obl_format(const client_obl *obl, char *buf, size_t cap);
/* CONFIG SET maxmemory: a warning when the cap is below what is used now, as Redis. */
void memcap_config_changed(void);
/* client.c: close c when its unsent replies break client-output-buffer-limit (Redis's
 * checkClientOutputBufferLimits); true when it was marked to close. */
bool client_obl_check(worker *w, client *c);

/* ---------------- durability (persist.c) ---------------- */

struct sbuf;

/* Recovery on the main thread while the workers answer -LOADING: the newest checkpoint (or the
 * previous one), then the AOF after it. 0, or -1 after logging why (the process must exit 1). */
int persist_recover(void);
/* Start / stop the saver thread. persist_stop then runs the final checkpoint on the calling
 * thread when save is true (after the workers stopped): 0, or -1 when that checkpoint failed. */
int persist_start(void);
/* compact.c: the compactor thread, COMPACT's tickets, INFO's lines. */
int compact_start(void);
/* The index's fill hook (hlog_config.index_full_fn): wakes the compactor to grow it. */
void compact_index_wanted(void *ctx);
void compact_stop(void);
int compact_request(uint64_t *ticket /* out */);
bool compact_done(uint64_t ticket, int *rc, char *why, size_t whylen);
void compact_info(struct sbuf *b);
/* A store session for a background thread; with a device attached with ready (NULL: ignored). */
int persist_session_open(hlog_session **out, hlog_ready_fn ready, void *arg);
int persist_stop(bool save);
/* CONFIG SET appendonly / appendfsync (and start-up: does nothing before persist_start). 0, or
 * -errno when the AOF cannot be turned on (its folder or sync thread): nothing changed then. */
int persist_config_changed(void);
/* BGSAVE: 0 when the saver was asked, -EBUSY when a checkpoint is already asked for or running. */
int persist_bgsave(void);
/* SAVE: -EBUSY as BGSAVE, else 0 with *ticket to wait for (persist_save_done). */
int persist_save_request(uint64_t *ticket /* out */);
/* Whether the checkpoint of ticket is done; then *rc is its result (0 or an error). */
bool persist_save_done(uint64_t ticket, int *rc /* out */);
/* LASTSAVE: unix seconds of the last successful checkpoint (the start time before one). */
int64_t persist_lastsave(void);
/* INFO's # Persistence section. */
void persist_info(struct sbuf *b);
/* worker.c: set every worker's save_pending and wake it (the saver, after a checkpoint). */
void server_wake_saves(void);
/* worker.c: write (and with always, sync) the worker's AOF records of this pass; called before any
 * reply leaves (client_pending_flush). */
void worker_aof_flush(worker *w);

/* ---------------- active expiry (expire.c) ---------------- */

/* Start / stop the expirer thread (Redis's active expire cycle, with a store session of its own).
 * expire_start: 0, or -1 after logging why (expired keys are then removed only when read). */
int expire_start(void);
void expire_stop(void);
/* INFO # Stats: expired_stale_perc, expired_time_cap_reached_count, expire_cycle_cpu_milliseconds. */
void expire_info(struct sbuf *b);
/* CONFIG RESETSTAT: those three back to 0. */
void expire_stats_reset(void);

/* ---------------- commands (commands.c and cmd_*.c) ---------------- */

typedef void cmd_fn(client *c);

#define CMD_WRITE      (1u << 0)
#define CMD_READONLY   (1u << 1)
#define CMD_DENYOOM    (1u << 2)
#define CMD_ADMIN      (1u << 3)
#define CMD_PUBSUB     (1u << 4)
#define CMD_NOSCRIPT   (1u << 5)
#define CMD_RANDOM     (1u << 6)
#define CMD_LOADING    (1u << 7)
#define CMD_STALE      (1u << 8)
#define CMD_FAST       (1u << 9)
#define CMD_NOAUTH     (1u << 10)
#define CMD_MAY_REPLICATE (1u << 11)
#define CMD_SENTINEL   (1u << 12)
#define CMD_NO_MULTI   (1u << 13)
#define CMD_ALLOW_BUSY (1u << 14)
/* Spillway's own, not shown by COMMAND: the look-ahead of a parked client (park.c) may prefetch the
 * keys of such a request (first_key..last_key by step) before it runs. Only for a command that reads
 * those keys and nothing else, so that reading them early changes no reply. */
#define CMD_LOOKAHEAD  (1u << 15)
#define CMD_NO_ASYNC_LOADING (1u << 16)
#define CMD_MOVABLE_KEYS (1u << 17)   /* Redis's movablekeys: keys found through a key count */

typedef struct spw_command {
	const char *name;             /* lower case */
	cmd_fn *fn;
	int arity;                    /* Redis: N exact, -N at least N (name included) */
	uint32_t flags;
	int first_key, last_key, step;
	const char *acl_categories;   /* space separated, e.g. "@write @string @slow" */
	const char *summary;          /* for COMMAND DOCS */
	const char *since;
	const char *group;            /* "string", "generic", "server", "connection" */
	int index;                    /* position in the table, set at start */
	/* Added by commands.c (COMMAND INFO / DOCS fidelity, container commands): */
	const char *complexity;
	const char *tips;             /* space separated, e.g. "request_policy:multi_shard" */
	const char *key_specs;        /* ";" separated "FLAGS:begin_index:lastkey:keystep[:notes]" (a
	                               * range) or "FLAGS:begin_index:#keynumidx:firstkey:keystep[:notes]"
	                               * (a key count argument): tools/gen-command-rows.py writes them */
	const char *deprecated_since, *replaced_by;
	struct spw_command *subcommands;  /* CONFIG, CLIENT, COMMAND: entries named "config|get" */
	int nsubcommands;
	const struct spw_command *parent;
} spw_command;

/* Park the client: the store answered HLOG_PENDING, so the handler returns without a reply (and
 * must not have changed the store). The worker runs the same request again once the device reads
 * are done; what the handler wrote into the reply before is dropped (park.c note 1). */
static inline void reply_pending(client *c) { c->flags |= CLIENT_PARKED; }
/* Bring the newest records of argv[first], argv[first+step] ... argv[last] (last < 0: from the end)
 * into memory or the session's fetch cache, all reads queued together. 0 when every one is there,
 * HLOG_PENDING when some are being read, or a negative store error. Does nothing (0) without a
 * storage tier, so multi-key commands pay no extra lookup in memory-only mode. */
int command_keys_prefetch(client *c, int first, int last, int step);
/* Drop what was written to c->out after (tail, tail_len, bytes): a parked command's partial reply. */
void client_reply_rollback(client *c, resp_chunk *tail, uint32_t tail_len, size_t bytes);
/* A command ended (run or rejected, not parked) with a CLIENT REPLY mode set: drop what it wrote
 * since the mark when muted, and move SKIP on (cmd_client.c note 3). */
void client_reply_mode_end(client *c, resp_chunk *tail, uint32_t tail_len, size_t bytes);

/* Whether argc arguments (the name included) satisfy cmd's arity. */
static inline bool command_arity_ok(const spw_command *cmd, int argc)
{
	return cmd->arity > 0 ? argc == cmd->arity : argc >= -cmd->arity;
}
/* Look up argv[0] (case-insensitive). NULL when unknown. */
const spw_command *command_lookup(const char *name, size_t len);
int command_count(void);
const spw_command *command_at(int i);
/* Build the lookup table and number every command and subcommand (idempotent; server_main calls
 * it). command_slots() is the size of the per-command stats arrays (subcommands included). */
void command_table_init(void);
int command_slots(void);
const spw_command *command_at_slot(int slot);
/* A container's subcommand by its name after the '|' (case-insensitive), or NULL. */
const spw_command *command_sub_lookup(const spw_command *parent, const char *name, size_t len);
/* Run one parsed request on c: arity check, dispatch, stats. */
void command_dispatch(client *c);

/* Handlers, one per command, grouped by family as in Redis. */
/* coll.c: one collection command on the store (coll.c notes). */
struct coll_view;
/* Called with the collection (v: its record's value; for a string, when the read accepts any
 * type, view->type is 0 and view->p/used are the string). Runs under the record's shared lock. */
typedef void (*coll_read_fn)(void *ctx, const struct coll_view *view, const hlog_value *v);
/* What of a large collection a read needs (coll_large.c note 1): the whole collection, the
 * buckets of its member arguments argv[first], argv[first + step], ... (a view of just those),
 * its count (view->large->count, an empty payload), its head alone (TYPE, OBJECT, MEMORY), or
 * one non-empty bucket picked at random (COLL_HINT_RANDOM, coll_large.c note 9: the bucket
 * cursor mod the bucket count, or the first non-empty one after it within a few reads, else the
 * whole collection; cursor is the caller's random number, kept across a park so that the re-run
 * reads the bucket that was fetched). */
enum { COLL_HINT_WHOLE = 0, COLL_HINT_MEMBERS = 1, COLL_HINT_COUNT = 2, COLL_HINT_HEAD = 3,
       COLL_HINT_SCAN = 4, COLL_HINT_RANDOM = 5 };
typedef struct coll_hint {
	int mode;
	int first, step;
	/* COLL_HINT_SCAN (HSCAN, coll_large.c note 8): the buckets from cursor on, whole ones, about
	 * count entries' worth (at least one bucket); next: the bucket after them, 0 at the end
	 * (set by the read), each a bucket number tagged COLL_SCAN_LARGE (0 stays 0) */
	unsigned long long cursor, next;
	long long count;
	/* Lists (COLL_HINT_LIST, coll_list_large.c note 3): the element at index list_a (list_index),
	 * or the range list_a..list_b as LRANGE takes it; the view then holds just those elements
	 * (view->large set). */
	long long list_a, list_b;
	bool list_index;
	/* ZSET block (coll_zset_large.c note 2): COLL_HINT_ZRANK (the member argv[first]; out: zrank,
	 * -1 when absent) and COLL_HINT_ZRANGE (zq: a rank or score range; the read sets zq's
	 * large_exact and large_n and hands fn exactly the run, or nothing when zq->count_only) */
	struct zs_rangeq *zq;
	long long zrank;
} coll_hint;
#define COLL_HINT_LIST 16
enum { COLL_HINT_ZRANK = 17, COLL_HINT_ZRANGE = 18 };
/* A large hash's HSCAN cursor: the bucket | this bit, so that a cursor of the other layout (a
 * small hashtable hash's position, before a conversion) is told apart and restarts the scan
 * from the start, returning some fields twice but missing none (coll_large.c note 8). */
#define COLL_SCAN_LARGE (1ull << 62)
/* Read key as a collection of type (COLL_*), or of any type, strings included, when type is 0.
 * HLOG_OK (fn called), HLOG_NOTFOUND, SPW_E_WRONGTYPE, SPW_E_CORRUPT, HLOG_PENDING or an error.
 * A large collection is read whole (type 0: its head alone). */
int coll_read(client *c, const resp_slice *key, int type, coll_read_fn fn, void *ctx);
/* The same with a hint for a large collection (NULL: as coll_read). */
int coll_read_hint(client *c, const resp_slice *key, int type, const coll_hint *h, coll_read_fn fn,
                   void *ctx);
/* HSCAN, SSCAN and ZSCAN's options after the cursor, as Redis's scanGenericCommand takes them for
 * a key (COUNT, MATCH; no TYPE): NULL, or the error to reply, which Redis replies only once the
 * key is found. count defaults to 10; pat is NULL for every member ("*" included). */
typedef struct coll_scan {
	long long count;
	const char *pat;
	size_t plen;
} coll_scan;
const char *coll_scan_opts(client *c, coll_scan *o);
enum { COLL_KEEP = 0, COLL_WRITE = 1, COLL_DELETE = 2 };
typedef struct coll_edit coll_edit;
struct coll_edit {
	/* in */
	int type;                 /* COLL_* the command works on */
	bool create;              /* an absent key runs fn with cur NULL (commands that add), else
	                           * nothing runs and found stays false */
	bool drop_ttl;            /* a write drops the key's TTL (Redis's setKey: the STORE commands) */
	/* fn decides from cur alone (it may run more than once: coll.c note 2): it sets action, and
	 * for COLL_WRITE enc and the new payload out/out_len (memory its caller owns, valid until
	 * coll_rmw returns). 0, or an error that coll_rmw returns as is (SPW_E_*, -ENOMEM). */
	int (*fn)(coll_edit *e, const struct coll_view *cur);
	void *arg;                /* fn's context */
	/* out, set by fn */
	int action;               /* COLL_KEEP, COLL_WRITE, COLL_DELETE (the collection is empty) */
	int enc;                  /* CENC_* of the new value */
	const uint8_t *out;
	size_t out_len;
	/* Or, for COLL_WRITE without out (coll.c note 6): the new payload is out_len bytes that
	 * patch(patch_arg, old, dst, in_place) writes from the current payload old (NULL when the
	 * key is new), with in_place (dst == old) only the bytes that change. coll_write_lp sets
	 * these for a listpack edit. */
	void (*patch)(const void *arg, const uint8_t *old, uint8_t *dst, bool in_place);
	const void *patch_arg;
	uint32_t count;           /* a list's new length when fn knows it (0: coll.c counts) */
	/* in: a point write names its members argv[hint_first], argv[hint_first + hint_step], ...
	 * (coll_large.c note 2: fn then sees a large collection's buckets of those members only);
	 * 0: fn sees the whole collection */
	int hint_first, hint_step;
	/* in: or, with hint_first 0, the one member a point write names when it is no argv slot
	 * (SPOP's pick, coll_large.c note 9); NULL: none. Valid until coll_rmw returns. */
	const resp_slice *hint_member;
	/* in: a list command's point operation on a large list (coll_list_large.c note 2), or NULL:
	 * a large list runs fn on the whole list assembled (note 5) */
	struct coll_list_op *list_op;
	/* ZSET block (coll_zset_large.c note 3): how a write on a large sorted set touches it.
	 * COLL_ZE_MEMBERS: fn sees the pairs of the members argv[hint_first], argv[hint_first +
	 * hint_step]...; COLL_ZE_POP: the zpop_n lowest (zpop_max: highest) pairs; 0: the whole set. */
	int zmode;
	long long zpop_n;
	bool zpop_max;
	/* out, set by coll_rmw */
	bool found;               /* the key existed (and had the type) */
	client *c;
};
/* Lists: what a command does, for the large layout's point paths (coll_list_large.c note 2). The
 * small path runs fn and ignores it. PROBE: nothing, found only (an argument error Redis reports
 * after its lookup). */
enum { COLL_LIST_PUSH = 1, COLL_LIST_POP = 2, COLL_LIST_SET = 3, COLL_LIST_TRIM = 4, COLL_LIST_PROBE = 5 };
typedef struct coll_list_op {
	int op;
	bool left;                /* PUSH, POP: the head end */
	const resp_slice *elems;  /* PUSH: the elements in argument order */
	int nelems;
	long long a, b;           /* POP: count; SET: index; TRIM: start, end */
	const resp_slice *val;    /* SET */
	/* out */
	bool done;                /* the large path ran it (the fields below are its answer) */
	long long len;            /* PUSH: the length after */
	long n;                   /* POP: elements popped, */
	const uint8_t *popped;    /* a listpack of them in list order (valid until the thread's next
	                           * large list command) */
	int result;               /* SET: 1 set, 0 out of range */
} coll_list_op;
/* Change key by one hlog_rmw. HLOG_OK, HLOG_PENDING, SPW_E_WRONGTYPE, or an error (fn's, the
 * store's). A change keeps the key's TTL; COLL_DELETE removes the key. */
enum { COLL_ZE_WHOLE = 0, COLL_ZE_MEMBERS = 1, COLL_ZE_POP = 2 };   /* coll_edit.zmode */
int coll_rmw(client *c, const resp_slice *key, coll_edit *e);
/* For an edit's fn: the thread's edit buffer (coll.c note 5) holding a copy of cur's payload, or
 * an empty listpack when cur is NULL. Valid until coll_rmw returns. 0 or -ENOMEM. */
struct lp_buf;
int coll_buf_load(const struct coll_view *cur, struct lp_buf **out /* out */);
/* For an edit's fn: write the payload as cur's listpack (an empty one when the key is new) with
 * the planned edit pe applied (coll.c note 6), encoding enc; pe must stay valid until coll_rmw
 * returns. A list's fn also sets e->count. */
struct lp_edit;
void coll_write_lp(coll_edit *e, int enc, const struct lp_edit *pe);

/* coll_large.c: the large layout (coll_large.c notes). The codes below pass between coll.c and
 * coll_large.c only: a large head met (COLL_E_LARGE), an edit whose result must become large
 * (COLL_E_CONVERT), the command to run again from the top (COLL_E_RESTART). */
#define COLL_E_LARGE (SPW_E_BASE - 60)
#define COLL_E_CONVERT (SPW_E_BASE - 61)
#define COLL_E_RESTART (SPW_E_BASE - 62)
struct coll_head;
int coll_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint, coll_read_fn fn,
                    void *ctx);
int coll_large_rmw(client *c, const hlog_key *k, coll_edit *e);
int coll_large_convert(client *c, const hlog_key *k, coll_edit *e);
/* Whether a payload of used bytes (type, enc) is written as a large collection. */
bool coll_large_wanted(int type, int enc, size_t used);
/* The large collection under k as a small record's value (RENAME, COPY, DUMP): *val valid until
 * the thread's next call. HLOG_OK, HLOG_NOTFOUND, HLOG_PENDING, COLL_E_RESTART (no longer large:
 * read it again) or an error. */
int coll_large_flat(client *c, const hlog_key *k, const uint8_t **val, size_t *len);
/* The large layouts of lists (coll_list_large.c) and sorted sets (coll_zset_large.c). Every large
 * head starts with coll/coll.h's 48-byte prefix (cid, count, mbytes at the same offsets, level and
 * split: a list's are 0), its own fields after it (used > 40), so TYPE, OBJECT ENCODING, MEMORY
 * USAGE, HLEN-style counts and compaction's liveness rule (coll_part_live) read every type alike.
 * coll_large.c reads the head, answers COLL_HINT_HEAD and COLL_HINT_COUNT itself, and hands every
 * other read and every write of a large list or zset to these, without its latch held; they keep
 * coll_large_read's, coll_large_rmw's and coll_large_convert's contracts (WHOLE reads give the
 * command the small layout's payload assembled in order, which RENAME, COPY and DUMP use through
 * coll_large_flat). _wanted: coll_large_wanted's rule for the type. */
int coll_list_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx);
int coll_list_large_rmw(client *c, const hlog_key *k, coll_edit *e);
int coll_list_large_convert(client *c, const hlog_key *k, coll_edit *e);
bool coll_list_large_wanted(int enc, size_t used);
/* coll_part_live's rule for a large list's parts (coll/deque.h dq_part_live): head is the owner's
 * head value, already known to be a large list with the part's cid. */
bool coll_list_part_live(const uint8_t *head, size_t len, int kind, uint64_t n);
int coll_zset_large_read(client *c, const hlog_key *k, int type, const coll_hint *hint,
                         coll_read_fn fn, void *ctx);
int coll_zset_large_rmw(client *c, const hlog_key *k, coll_edit *e);
int coll_zset_large_convert(client *c, const hlog_key *k, coll_edit *e);
bool coll_zset_large_wanted(int enc, size_t used);
/* A large head's conditional write (coll_large.c note 3): plan answers COLL_E_RESTART unless the
 * head still starts with expect (NULL: the key must be absent), then writes val (NULL: deletes),
 * keeping the expiry unless drop_ttl. The ops every large layout passes to hlog_rmw or
 * hlog_group_rmw for its head. */
struct head_plan {
	const uint8_t *expect;     /* the head's bytes as read, NULL: the key was absent */
	size_t expect_len;
	const uint8_t *val;        /* the new head's value, NULL: delete the head */
	size_t len;
	bool drop_ttl;
};
extern const hlog_rmw_ops coll_head_ops;
/* A listpack part's record capacity (hlog_group_part.cap, log/group.c note 9): for len bytes in a
 * record now holding ocap (0: none), ocap while len fits and fills over half of it, so that the
 * write keeps the record's size and can change it in place; else len and a quarter more, to
 * 8 bytes. 0 (exactly len) with --coll-write-in-place no. */
static inline size_t coll_part_cap(size_t len, size_t ocap)
{
	if (!g_cfg.coll_write_in_place)
		return 0;
	if (len <= ocap && len > ocap / 2)
		return ocap;
	return (len + len / 4 + 7) & ~(size_t)7;
}
/* A listpack part's own bytes (lp_bytes) within its record's value, which may hold spare
 * capacity after it; the record's length when the header claims more (the caller's check of the
 * listpack then fails). */
size_t coll_part_lp_len(const hlog_value *v);
/* One part written alone (no head changes) with its capacity: in place when it keeps the size. */
int coll_part_put(client *c, const hlog_group_part *p);
/* hlog_group_rmw on the worker's session, once more without the parts' spare room when that
 * made the group SPW_E_TOO_BIG. */
int coll_group_write(client *c, const hlog_key *k, const hlog_rmw_ops *ops, void *ctx, hlog_group_part *parts,
                     size_t n);
/* hlog_config.part_live (coll_large.c note 7). */
int coll_part_live(void *arg, hlog_session *s, const void *key, size_t klen, const hlog_value *v);

/* cmd_object.c */
cmd_fn cmd_object, cmd_memory;
/* cmd_keys.c: TYPE's name for a value ("string", "hash", ...). */
const char *value_type_name(const hlog_value *v);
/* cmd_keys.c: Redis's parseScanCursorOrReply rules (false: "ERR invalid cursor"), and the worker
 * thread's cheap random numbers (RANDOMKEY, HRANDFIELD). */
bool scan_cursor_parse(const resp_slice *a, unsigned long long *out /* out */);
uint64_t rng_next(void);

/* cmd_string.c */
/* hlog_read for a command on strings (cmd_string.c note 9): SPW_E_WRONGTYPE, fn not called, when
 * the key holds a collection. */
int str_read(client *c, const hlog_key *k, hlog_read_fn fn, void *ctx);
cmd_fn cmd_get, cmd_set, cmd_setnx, cmd_setex, cmd_psetex, cmd_getset, cmd_getdel, cmd_getex,
	cmd_mget, cmd_mset, cmd_msetnx, cmd_incr, cmd_decr, cmd_incrby, cmd_decrby, cmd_incrbyfloat,
	cmd_append, cmd_strlen, cmd_getrange, cmd_setrange, cmd_substr;
/* cmd_bits.c, cmd_lcs.c */
cmd_fn cmd_setbit, cmd_getbit, cmd_bitcount, cmd_bitpos, cmd_bitop, cmd_bitfield, cmd_bitfield_ro,
	cmd_lcs;
/* cmd_keys.c */
cmd_fn cmd_del, cmd_unlink, cmd_exists, cmd_type, cmd_expire, cmd_pexpire, cmd_expireat,
	cmd_pexpireat, cmd_ttl, cmd_pttl, cmd_expiretime, cmd_pexpiretime, cmd_persist, cmd_touch,
	cmd_keys, cmd_scan, cmd_randomkey, cmd_rename, cmd_renamenx, cmd_copy, cmd_dbsize, cmd_flushdb,
	cmd_flushall;
/* cmd_set.c, cmd_set_multi.c */
cmd_fn cmd_sadd, cmd_srem, cmd_scard, cmd_sismember, cmd_smismember, cmd_smembers, cmd_srandmember,
	cmd_spop, cmd_sscan, cmd_smove, cmd_sinter, cmd_sintercard, cmd_sunion, cmd_sdiff, cmd_sinterstore,
	cmd_sunionstore, cmd_sdiffstore;
/* cmd_server.c */
cmd_fn cmd_ping, cmd_echo, cmd_quit, cmd_hello, cmd_config, cmd_command, cmd_select, cmd_time,
	cmd_shutdown, cmd_auth, cmd_save, cmd_bgsave, cmd_lastsave, cmd_compact;
/* cmd_hll.c */
cmd_fn cmd_pfadd, cmd_pfcount, cmd_pfmerge;
/* cmd_hash.c */
cmd_fn cmd_hset, cmd_hsetnx, cmd_hget, cmd_hmget, cmd_hmset, cmd_hdel, cmd_hexists, cmd_hlen,
	cmd_hstrlen, cmd_hkeys, cmd_hvals, cmd_hgetall, cmd_hincrby, cmd_hincrbyfloat, cmd_hrandfield,
	cmd_hscan;
/* cmd_dump.c */
cmd_fn cmd_dump, cmd_restore;
/* cmd_zset.c, cmd_zset_range.c, cmd_zset_ops.c (zset_int.h) */
cmd_fn cmd_zadd, cmd_zincrby, cmd_zrem, cmd_zcard, cmd_zscore, cmd_zmscore, cmd_zrank, cmd_zrevrank,
	cmd_zpopmin, cmd_zpopmax, cmd_zmpop, cmd_zremrangebyrank, cmd_zremrangebyscore,
	cmd_zremrangebylex, cmd_zrange, cmd_zrangestore, cmd_zrevrange, cmd_zrangebyscore,
	cmd_zrevrangebyscore, cmd_zrangebylex, cmd_zrevrangebylex, cmd_zcount, cmd_zlexcount,
	cmd_zrandmember, cmd_zscan, cmd_zunion, cmd_zinter, cmd_zdiff, cmd_zintercard, cmd_zunionstore,
	cmd_zinterstore, cmd_zdiffstore;
/* cmd_client.c */
cmd_fn cmd_client;
/* Redis's validateClientName: printable ASCII without spaces. 0, or -EINVAL with the error replied. */
int client_name_check(client *c, const resp_slice *name);
void client_name_set(client *c, const resp_slice *name);   /* after client_name_check */
/* cmd_list.c */
cmd_fn cmd_lpush, cmd_rpush, cmd_lpushx, cmd_rpushx, cmd_lpop, cmd_rpop, cmd_llen, cmd_lindex,
	cmd_lset, cmd_lrange, cmd_ltrim, cmd_lrem, cmd_linsert, cmd_lpos, cmd_lmove, cmd_rpoplpush,
	cmd_lmpop;
/* info.c */
cmd_fn cmd_info;
void info_stats_reset(void);   /* CONFIG RESETSTAT (info.c note 2) */

/* ---------------- replies (reply.c): thin wrappers over proto's writer on c->out ---------------- */

static inline void reply_ok(client *c) { resp_write_ok(&c->out); }
static inline void reply_int(client *c, long long v) { resp_write_int(&c->out, v); }
static inline void reply_bulk(client *c, const void *p, size_t len) { resp_write_bulk(&c->out, p, len); }
static inline void reply_null(client *c) { resp_write_null(&c->out); }
static inline void reply_simple(client *c, const char *s, size_t len) { resp_write_simple(&c->out, s, len); }
/* An error reply; msg includes its code ("ERR ...", "WRONGTYPE ..."). Counts total_error_replies. */
void reply_error(client *c, const char *msg);
void reply_errorf(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Redis's standard errors, with its exact text. */
void reply_err_arity(client *c);          /* ERR wrong number of arguments for 'x' command */
void reply_err_syntax(client *c);         /* ERR syntax error */
void reply_err_not_int(client *c);        /* ERR value is not an integer or out of range */
void reply_err_wrongtype(client *c);      /* WRONGTYPE Operation against a key holding ... */
void reply_err_store(client *c, int err); /* a store error: OOM, too big, corrupt... */

/* Help replies: an array of simple strings, lines[] ends with NULL. */
void reply_help(client *c, const char *const *lines);

/* A growable text buffer on the worker's scratch (INFO, CLIENT LIST, CONFIG GET): valid until the
 * worker's next worker_scratch call. A failed allocation sets oom and later adds do nothing. */
typedef struct sbuf {
	worker *w;
	char *p;
	size_t len, cap;
	bool oom;
} sbuf;
void sb_init(sbuf *b, worker *w);
void sb_add(sbuf *b, const char *s, size_t n);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text replies (INFO, CLIENT LIST/INFO): a verbatim "txt" string in RESP3, a bulk in RESP2; an
 * oom buffer answers the store's out-of-memory error. */
void reply_text(client *c, sbuf *b);

/* A counter another worker increments plainly, read as one 64-bit snapshot (info.c note 1). */
static inline uint64_t rd64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* Argument helpers: strict integer parse as Redis's getLongLongFromObject. */
bool arg_ll(const resp_slice *a, long long *out);
bool arg_eq(const resp_slice *a, const char *lit);   /* case-insensitive compare with a literal */

/* Compare an option with a lower-case literal the way Redis's strcasecmp on an sds does: the
 * argument ends at its first NUL byte, so "nx\0junk" is NX. */
bool arg_opt_is(const resp_slice *a, const char *lit, size_t n);
#define OPT_IS(a, lit) arg_opt_is((a), lit, sizeof(lit) - 1)

static inline void key_from_arg(hlog_key *k, const resp_slice *a) { hlog_key_init(k, a->ptr, a->len); }
#define KEYS_AHEAD 8   /* multi-key commands hash this many keys ahead (hlog_bucket_prefetch) */

/* The keys argv[first], argv[first + step], ... (n of them) of a multi-key command, taken in order
 * with keys_ahead_next: each is hashed, and its index bucket started into the CPU cache, KEYS_AHEAD
 * keys before it is used, so that a large MGET waits on several cache misses at once instead of one
 * after another. */
typedef struct keys_ahead {
	client *c;
	int first, step, n, next;
	hlog_key ks[KEYS_AHEAD];
} keys_ahead;
void keys_ahead_init(keys_ahead *a, client *c, int first, int step, int n);
/* The next key into *k (a copy: its slot is reused at once). */
void keys_ahead_next(keys_ahead *a, hlog_key *k);

/* Count a keyspace hit or miss (INFO keyspace_hits/misses) on the client's worker. */
static inline void count_lookup(client *c, bool found)
{
	if (found)
		c->w->stats.keyspace_hits++;
	else
		c->w->stats.keyspace_misses++;
}

/* For a store result rc: false on success; otherwise write the reply (Redis's error text for the
 * number errors, the store error, or park the client on HLOG_PENDING) and return true: the handler
 * must return. */
bool reply_store_failed(client *c, int rc);

#endif
