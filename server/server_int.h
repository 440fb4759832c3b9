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

#include <stdatomic.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/uio.h>
#include "common/spw.h"
#include "proto/resp.h"
#include "log/hlog.h"

/* ---------------- configuration (config.c) ---------------- */

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
	uint64_t memory_bytes;        /* --memory */
	uint64_t page_bytes;          /* --page */
	int mutable_percent;          /* --mutable-percent */
	uint64_t proto_max_bulk_len;  /* proto-max-bulk-len */
	uint64_t querybuf_limit;      /* client-query-buffer-limit */
	uint64_t output_pause_bytes;  /* stop reading a client whose unsent replies pass this */
	int timeout;                  /* idle client timeout in seconds, 0 = never */
	int tcp_keepalive;
	int databases;                /* reported for CONFIG GET databases; only db 0 exists */
} spw_config;

extern spw_config g_cfg;

/* Parse argv (and --config FILE) into g_cfg. 0, 1 when --help/--version printed, or -EINVAL after
 * printing a message that names the flag. */
int config_load(int argc, char **argv);
void config_print_help(void);
/* CONFIG SET name value: 0, or -EINVAL with Redis's error text in err. */
int config_set(const char *name, size_t nlen, const char *val, size_t vlen, char *err, size_t errlen);
/* CONFIG GET: calls fn for every option whose name matches the glob. */
typedef void (*config_visit_fn)(void *ctx, const char *name, const char *value);
void config_get_matching(const char *pat, size_t plen, config_visit_fn fn, void *ctx);

/* ---------------- workers and clients (server.c) ---------------- */

typedef struct worker worker;
typedef struct client client;

#define CLIENT_CLOSE_AFTER_REPLY (1u << 0)   /* QUIT, protocol error: close once replies are out */
#define CLIENT_CLOSE_ASAP        (1u << 1)   /* CLIENT KILL, query buffer limit: close now */
#define CLIENT_READ_PAUSED       (1u << 2)   /* back-pressure: not reading until replies drain */

struct client {
	int fd;
	uint32_t flags;
	uint64_t id;
	worker *w;
	int proto;                    /* 2 or 3; also out.proto */
	int db;                       /* always 0 */
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
};

struct spw_command;

typedef struct worker_stats {
	uint64_t commands;            /* total_commands_processed */
	uint64_t connections;         /* total_connections_received */
	uint64_t rejected;            /* rejected_connections */
	uint64_t net_in, net_out;     /* bytes */
	uint64_t keyspace_hits, keyspace_misses;
	uint64_t expired_keys;
	uint64_t errors;              /* total_error_replies */
	uint64_t busy_ns;             /* time spent not sleeping */
	uint64_t *cmd_calls;          /* per command index: calls */
	uint64_t *cmd_usec;           /* per command index: microseconds */
	uint64_t *cmd_failed;         /* per command index: rejected/failed calls */
} worker_stats;

struct worker {
	int idx;
	int epfd;
	int listen_fd;
	int wake_fd;                  /* eventfd: shutdown and CLIENT KILL from other threads */
	hlog_session *sess;
	client *clients;              /* all clients of this worker */
	uint32_t nclients;
	client *pending;              /* clients with replies waiting to be written */
	resp_chunk *chunk_pool;       /* free reply chunks */
	uint32_t chunk_pool_len;
	uint8_t *scratch;             /* per-worker scratch for commands (RENAME, GETRANGE, ...) */
	size_t scratch_cap;
	int64_t now_ms;               /* clock read once per loop pass */
	worker_stats stats;
	_Atomic int kill_pending;     /* another thread asked us to look for CLIENT KILL marks */
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
} server_state;

extern server_state g_srv;

/* Ensure the worker's scratch holds n bytes; NULL on ENOMEM. Valid until the next call. */
uint8_t *worker_scratch(worker *w, size_t n);
/* Mark the client to close; from its own worker only. */
void client_close_async(client *c);
/* Ask every worker to close the clients matching: used by CLIENT KILL (id, or addr, or laddr). */
int server_kill_clients(uint64_t id, const char *addr, const char *laddr, bool skipme, client *self);
/* Visit every client of every worker for CLIENT LIST. Clients of other workers are read without
 * locks: fields are plain snapshots, good enough for an operator's listing. */
typedef void (*client_visit_fn)(void *ctx, const client *c);
void server_clients_visit(client_visit_fn fn, void *ctx);
void server_request_shutdown(void);
/* Format one CLIENT LIST / CLIENT INFO line (no trailing newline) into buf. Returns the length. */
size_t client_info_format(const client *c, char *buf, size_t cap);

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
} spw_command;

/* Look up argv[0] (case-insensitive). NULL when unknown. */
const spw_command *command_lookup(const char *name, size_t len);
int command_count(void);
const spw_command *command_at(int i);
/* Run one parsed request on c: arity check, dispatch, stats. */
void command_dispatch(client *c);

/* Handlers, one per command, grouped by family as in Redis. */
/* cmd_string.c */
cmd_fn cmd_get, cmd_set, cmd_setnx, cmd_setex, cmd_psetex, cmd_getset, cmd_getdel, cmd_getex,
	cmd_mget, cmd_mset, cmd_msetnx, cmd_incr, cmd_decr, cmd_incrby, cmd_decrby, cmd_incrbyfloat,
	cmd_append, cmd_strlen, cmd_getrange, cmd_setrange, cmd_substr;
/* cmd_keys.c */
cmd_fn cmd_del, cmd_unlink, cmd_exists, cmd_type, cmd_expire, cmd_pexpire, cmd_expireat,
	cmd_pexpireat, cmd_ttl, cmd_pttl, cmd_expiretime, cmd_pexpiretime, cmd_persist, cmd_touch,
	cmd_keys, cmd_scan, cmd_randomkey, cmd_rename, cmd_renamenx, cmd_copy, cmd_dbsize, cmd_flushdb,
	cmd_flushall;
/* cmd_server.c */
cmd_fn cmd_ping, cmd_echo, cmd_quit, cmd_hello, cmd_info, cmd_config, cmd_command, cmd_client,
	cmd_select, cmd_time, cmd_shutdown;

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
void reply_err_store(client *c, int err); /* a store error: OOM, too big, corrupt... */

/* Argument helpers: strict integer parse as Redis's getLongLongFromObject. */
bool arg_ll(const resp_slice *a, long long *out);
bool arg_eq(const resp_slice *a, const char *lit);   /* case-insensitive compare with a literal */

#endif
