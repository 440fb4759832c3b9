/*
 * cmd_server.c - connection and server commands: PING ECHO QUIT HELLO AUTH SELECT TIME INFO CONFIG
 * COMMAND CLIENT SHUTDOWN (Redis's server.c, networking.c, config.c and acl.c command parts).
 *
 * Design notes:
 *  1. Replies and error texts are redis-server 7.0.15's, checked against it command by command,
 *     including the RESP3 shapes (INFO and CLIENT LIST/INFO as verbatim "txt" strings, CONFIG GET
 *     and HELLO as maps, COMMAND flags as sets).
 *  2. Nothing here is on the request hot path; these handlers may take locks and walk all workers.
 *     Stats of other workers are read with relaxed atomic loads of counters their owners increment
 *     plainly: each value is a consistent 64-bit snapshot, the set of them is not (as Redis's INFO
 *     with io-threads).
 *  3. CONFIG RESETSTAT does not write other workers' counters (that would race with their
 *     increments): it records each worker's current values as a baseline, and INFO reports
 *     counters minus baseline. Baselines are written under g_srv.stats_lock.
 *  4. Rates (instantaneous_ops_per_sec, the kbps, worker_N_busy_pct) have no timer behind them,
 *     so an idle server never wakes up: INFO computes them over the window since the previous
 *     sample, and takes a new sample when the last one is at least a second old (the first INFO
 *     measures since start). Two INFO calls a second apart give the rates of that second.
 *  5. No ACL: as a Redis without requirepass, the only user is "default" and any password is
 *     accepted for it (HELLO AUTH, AUTH user pass); AUTH with a password alone answers Redis's
 *     "no password configured" error.
 *  6. SHUTDOWN: there is no persistence, so SAVE/NOSAVE change nothing (SAVE logs that nothing was
 *     saved); ABORT answers "No shutdown in progress." since shutdowns are never pending.
 *  7. The storage tier in INFO (only with --storage-tier, so memory-only INFO is unchanged): the
 *     store's counters (hlog_info) in "# Stats" as tier_* fields next to the server's own (parked
 *     commands, IO error replies, the sg_* look-ahead counters of scatter-gather GET), with CONFIG
 *     RESETSTAT baselines kept here since the store's counters only grow (tier_queue_depth_max is a
 *     maximum, not reset); "# Store" names the device and shows the sticky store error
 *     (Log.StoreError); "# Memory" adds the log's pages in memory and the index bytes per key.
 */
#include "server/server_int.h"
#include "device/device.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

static inline uint64_t rd64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

static void reply_help(client *c, const char *const *lines)
{
	int n = 0;
	while (lines[n])
		n++;
	resp_write_array_len(&c->out, n);
	for (int i = 0; i < n; i++)
		resp_write_simple(&c->out, lines[i], strlen(lines[i]));
}

/* ---------------- a growable text buffer on the worker's scratch ---------------- */

typedef struct sbuf {
	worker *w;
	char *p;
	size_t len, cap;
	bool oom;
} sbuf;

static void sb_init(sbuf *b, worker *w)
{
	b->w = w;
	b->len = 0;
	b->oom = false;
	b->p = (char *)worker_scratch(w, 4096);
	b->cap = b->p ? 4096 : 0;
	if (!b->p)
		b->oom = true;
}

static bool sb_reserve(sbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n <= b->cap)
		return true;
	size_t cap = SPW_MAX(b->cap * 2, b->len + n);
	char *p = (char *)worker_scratch(b->w, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void sb_add(sbuf *b, const char *s, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void __attribute__((format(printf, 2, 3))) sb_printf(sbuf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		if (b->oom)
			return;
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		if (!sb_reserve(b, (size_t)n + 1))
			return;
	}
}

/* Text replies (INFO, CLIENT LIST/INFO): a verbatim "txt" string in RESP3, a bulk in RESP2. */
static void reply_text(client *c, sbuf *b)
{
	if (b->oom) {
		reply_err_store(c, -ENOMEM);
		return;
	}
	resp_write_verbatim(&c->out, "txt", b->p, b->len);
}

/* ---------------- PING ECHO QUIT SELECT TIME AUTH ---------------- */

void cmd_ping(client *c)
{
	if (c->argc > 2) {
		reply_err_arity(c);
		return;
	}
	if (c->argc == 1)
		resp_write_simple(&c->out, "PONG", 4);
	else
		reply_bulk(c, c->argv[1].ptr, c->argv[1].len);
}

void cmd_echo(client *c) { reply_bulk(c, c->argv[1].ptr, c->argv[1].len); }

void cmd_quit(client *c)
{
	reply_ok(c);
	c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}

void cmd_select(client *c)
{
	long long id;
	if (!arg_ll(&c->argv[1], &id)) {
		reply_err_not_int(c);
		return;
	}
	if (id < INT32_MIN || id > INT32_MAX) {
		reply_error(c, "ERR value is out of range, value must between -2147483648 and 2147483647");
		return;
	}
	if (id != 0) {
		reply_error(c, "ERR DB index is out of range");
		return;
	}
	reply_ok(c);
}

void cmd_time(client *c)
{
	int64_t us = spw_time_us();
	resp_write_array_len(&c->out, 2);
	resp_write_bulk_ll(&c->out, us / 1000000);
	resp_write_bulk_ll(&c->out, us % 1000000);
}

/* Check user/password as a Redis with no requirepass: only "default" exists, any password. */
static bool auth_check(client *c, const resp_slice *user)
{
	if (arg_eq(user, "default"))
		return true;
	reply_error(c, "WRONGPASS invalid username-password pair or user is disabled.");
	return false;
}

void cmd_auth(client *c)
{
	if (c->argc > 3) {
		reply_err_syntax(c);
		return;
	}
	if (c->argc == 2) {
		reply_error(c, "ERR AUTH <password> called without any password configured for the default "
		               "user. Are you sure your configuration is correct?");
		return;
	}
	if (auth_check(c, &c->argv[1]))
		reply_ok(c);
}

/* ---------------- HELLO and client names ---------------- */

/* Redis's validateClientName: printable ASCII without spaces. 0 or the error already replied. */
static int client_name_check(client *c, const resp_slice *name)
{
	for (size_t i = 0; i < name->len; i++) {
		unsigned char ch = (unsigned char)name->ptr[i];
		if (ch < '!' || ch > '~') {
			reply_error(c, "ERR Client names cannot contain spaces, newlines or special characters.");
			return -EINVAL;
		}
	}
	if (name->len >= sizeof(c->name)) {
		reply_errorf(c, "ERR Client names are limited to %zu bytes in this server", sizeof(c->name) - 1);
		return -EINVAL;
	}
	return 0;
}

static void client_name_set(client *c, const resp_slice *name)
{
	memcpy(c->name, name->ptr, name->len);
	c->name[name->len] = '\0';
}

void cmd_hello(client *c)
{
	long long ver = 0;
	int next = 1;
	const resp_slice *user = NULL, *name = NULL;

	if (c->argc >= 2) {
		if (!arg_ll(&c->argv[next++], &ver)) {
			reply_error(c, "ERR Protocol version is not an integer or out of range");
			return;
		}
		if (ver < 2 || ver > 3) {
			reply_error(c, "NOPROTO unsupported protocol version");
			return;
		}
	}
	for (int j = next; j < c->argc; j++) {
		int more = c->argc - 1 - j;
		const resp_slice *opt = &c->argv[j];
		if (arg_eq(opt, "AUTH") && more >= 2) {
			user = &c->argv[j + 1];
			j += 2;
		} else if (arg_eq(opt, "SETNAME") && more >= 1) {
			name = &c->argv[j + 1];
			if (client_name_check(c, name) < 0)
				return;
			j++;
		} else {
			reply_errorf(c, "ERR Syntax error in HELLO option '%.*s'", (int)SPW_MIN(opt->len, 128), opt->ptr);
			return;
		}
	}
	if (user && !auth_check(c, user))
		return;
	if (name)
		client_name_set(c, name);
	if (ver) {
		c->proto = (int)ver;
		c->out.proto = (int)ver;
	}
	resp_out *o = &c->out;
	resp_write_map_len(o, 7);
	resp_write_bulk_cstr(o, "server");
	resp_write_bulk_cstr(o, "redis");
	resp_write_bulk_cstr(o, "version");
	resp_write_bulk_cstr(o, SPW_REDIS_VERSION);
	resp_write_bulk_cstr(o, "proto");
	resp_write_int(o, c->proto);
	resp_write_bulk_cstr(o, "id");
	resp_write_int(o, (long long)c->id);
	resp_write_bulk_cstr(o, "mode");
	resp_write_bulk_cstr(o, "standalone");
	resp_write_bulk_cstr(o, "role");
	resp_write_bulk_cstr(o, "master");
	resp_write_bulk_cstr(o, "modules");
	resp_write_array_len(o, 0);
}

/* ---------------- CLIENT ---------------- */

static const char *const client_help[] = {
	"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GETNAME",
	"    Return the name of the current connection.",
	"ID",
	"    Return the ID of the current connection.",
	"INFO",
	"    Return information about the current client connection.",
	"KILL <ip:port>",
	"    Kill connection made from <ip:port>.",
	"KILL <option> <value> [<option> <value> [...]]",
	"    Kill connections. Options are:",
	"    * ID <client-id>",
	"      Kill connections by client id.",
	"    * ADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made from the specified address",
	"    * LADDR (<ip:port>|<unixsocket>:0)",
	"      Kill connections made to specified local address",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Kill connections by type.",
	"    * USER <username>",
	"      Kill connections authenticated by <username>.",
	"    * SKIPME (YES|NO)",
	"      Skip killing current connection (default: yes).",
	"LIST [options ...]",
	"    Return information about client connections. Options:",
	"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
	"      Return clients of specified type.",
	"    * ID <client-id> [<client-id> ...]",
	"      Return clients with the given ids.",
	"REPLY (ON|OFF|SKIP)",
	"    Control the replies sent to the current connection (only ON in this server).",
	"SETNAME <name>",
	"    Assign the name <name> to the current connection.",
	"SETINFO <LIB-NAME|LIB-VER> <value>",
	"    Set client library name or version (accepted, not stored).",
	"NO-EVICT (ON|OFF)",
	"    Protect current client connection from eviction (no eviction here: accepted).",
	"NO-TOUCH (ON|OFF)",
	"    Will not touch LRU/LFU stats when this mode is on (no LRU here: accepted).",
	"HELP",
	"    Prints this help.",
	NULL,
};

/* CLIENT TYPE names: every client here is "normal"; the others are valid names that match none. */
static int client_type_parse(client *c, const resp_slice *t, bool *normal)
{
	if (arg_eq(t, "normal")) {
		*normal = true;
		return 0;
	}
	if (arg_eq(t, "master") || arg_eq(t, "replica") || arg_eq(t, "slave") || arg_eq(t, "pubsub")) {
		*normal = false;
		return 0;
	}
	reply_errorf(c, "ERR Unknown client type '%.*s'", (int)SPW_MIN(t->len, 128), t->ptr);
	return -EINVAL;
}

typedef struct list_ctx {
	sbuf *b;
	const long long *ids;
	int nids;
	char line[1024];
} list_ctx;

static void client_list_visit(void *arg, const client *c)
{
	list_ctx *x = arg;
	if (x->nids) {
		int i;
		for (i = 0; i < x->nids; i++)
			if ((long long)c->id == x->ids[i])
				break;
		if (i == x->nids)
			return;
	}
	size_t n = client_info_format(c, x->line, sizeof(x->line));
	sb_add(x->b, x->line, n);
	sb_add(x->b, "\n", 1);
}

static void client_list(client *c)
{
	long long ids[64];
	list_ctx x = { .ids = ids, .nids = 0 };
	sbuf b;
	bool normal = true;

	if (c->argc == 4 && arg_eq(&c->argv[2], "type")) {
		if (client_type_parse(c, &c->argv[3], &normal) < 0)
			return;
	} else if (c->argc > 3 && arg_eq(&c->argv[2], "id")) {
		if (c->argc - 3 > (int)SPW_ARRAY_LEN(ids)) {
			reply_errorf(c, "ERR at most %d client ids", (int)SPW_ARRAY_LEN(ids));
			return;
		}
		for (int j = 3; j < c->argc; j++) {
			if (!arg_ll(&c->argv[j], &ids[x.nids++])) {
				reply_error(c, "ERR Invalid client ID");
				return;
			}
		}
	} else if (c->argc != 2) {
		reply_err_syntax(c);
		return;
	}
	sb_init(&b, c->w);
	x.b = &b;
	if (normal)
		server_clients_visit(client_list_visit, &x);
	reply_text(c, &b);
}

static void client_kill(client *c)
{
	/* Old form: CLIENT KILL ip:port; kills even the caller (after this reply). */
	if (c->argc == 3) {
		char addr[128];
		const resp_slice *a = &c->argv[2];
		if (a->len >= sizeof(addr)) {
			reply_error(c, "ERR No such client");
			return;
		}
		memcpy(addr, a->ptr, a->len);
		addr[a->len] = '\0';
		if (server_kill_clients(0, addr, NULL, false, c) == 0)
			reply_error(c, "ERR No such client");
		else
			reply_ok(c);
		return;
	}
	if ((c->argc - 2) % 2 != 0) {
		reply_err_syntax(c);
		return;
	}
	long long id = 0;
	bool skipme = true, normal = true;
	char addr[128] = "", laddr[128] = "";
	for (int i = 2; i < c->argc; i += 2) {
		const resp_slice *k = &c->argv[i], *v = &c->argv[i + 1];
		if (arg_eq(k, "id")) {
			if (!arg_ll(v, &id) || id <= 0) {
				reply_error(c, "ERR client-id should be greater than 0");
				return;
			}
		} else if (arg_eq(k, "type")) {
			if (client_type_parse(c, v, &normal) < 0)
				return;
		} else if (arg_eq(k, "addr") || arg_eq(k, "laddr")) {
			char *dst = arg_eq(k, "addr") ? addr : laddr;
			size_t n = SPW_MIN(v->len, sizeof(addr) - 1);
			memcpy(dst, v->ptr, n);
			dst[n] = '\0';
			if (v->len >= sizeof(addr))
				dst[0] = '\x01';   /* cannot match any address */
		} else if (arg_eq(k, "user")) {
			if (!arg_eq(v, "default")) {
				reply_errorf(c, "ERR No such user '%.*s'", (int)SPW_MIN(v->len, 128), v->ptr);
				return;
			}
		} else if (arg_eq(k, "skipme")) {
			if (arg_eq(v, "yes")) {
				skipme = true;
			} else if (arg_eq(v, "no")) {
				skipme = false;
			} else {
				reply_err_syntax(c);
				return;
			}
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	int n = normal ? server_kill_clients((uint64_t)id, addr[0] ? addr : NULL, laddr[0] ? laddr : NULL,
	                                     skipme, c)
	               : 0;
	reply_int(c, n);
}

static void client_on_off(client *c)
{
	if (arg_eq(&c->argv[2], "on") || arg_eq(&c->argv[2], "off"))
		reply_ok(c);
	else
		reply_err_syntax(c);
}

void cmd_client(client *c)
{
	const resp_slice *sub = &c->argv[1];
	char line[1024];

	if (arg_eq(sub, "id")) {
		reply_int(c, (long long)c->id);
	} else if (arg_eq(sub, "getname")) {
		if (c->name[0])
			reply_bulk(c, c->name, strlen(c->name));
		else
			reply_null(c);
	} else if (arg_eq(sub, "setname")) {
		if (client_name_check(c, &c->argv[2]) == 0) {
			client_name_set(c, &c->argv[2]);
			reply_ok(c);
		}
	} else if (arg_eq(sub, "info")) {
		sbuf b;
		sb_init(&b, c->w);
		size_t n = client_info_format(c, line, sizeof(line));
		sb_add(&b, line, n);
		sb_add(&b, "\n", 1);
		reply_text(c, &b);
	} else if (arg_eq(sub, "list")) {
		client_list(c);
	} else if (arg_eq(sub, "kill")) {
		client_kill(c);
	} else if (arg_eq(sub, "no-evict") || arg_eq(sub, "no-touch")) {
		client_on_off(c);
	} else if (arg_eq(sub, "reply")) {
		if (arg_eq(&c->argv[2], "on"))
			reply_ok(c);
		else if (arg_eq(&c->argv[2], "off") || arg_eq(&c->argv[2], "skip"))
			reply_error(c, "ERR CLIENT REPLY OFF|SKIP is not supported by this server");
		else
			reply_err_syntax(c);
	} else if (arg_eq(sub, "setinfo")) {
		const resp_slice *attr = &c->argv[2], *val = &c->argv[3];
		if (!arg_eq(attr, "lib-name") && !arg_eq(attr, "lib-ver")) {
			reply_errorf(c, "ERR Unrecognized option '%.*s'", (int)SPW_MIN(attr->len, 128), attr->ptr);
			return;
		}
		for (size_t i = 0; i < val->len; i++) {
			unsigned char ch = (unsigned char)val->ptr[i];
			if (ch < '!' || ch > '~') {
				reply_errorf(c, "ERR %s cannot contain spaces, newlines or special characters.",
				             arg_eq(attr, "lib-name") ? "lib-name" : "lib-ver");
				return;
			}
		}
		reply_ok(c);
	} else {   /* help: the only other subcommand in the table */
		reply_help(c, client_help);
	}
}

/* ---------------- CONFIG ---------------- */

static const char *const config_help[] = {
	"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET <pattern>",
	"    Return parameters matching the glob-like <pattern> and their values.",
	"SET <directive> <value>",
	"    Set the configuration <directive> to <value>.",
	"RESETSTAT",
	"    Reset statistics reported by the INFO command.",
	"REWRITE",
	"    Rewrite the configuration file.",
	"HELP",
	"    Prints this help.",
	NULL,
};

typedef struct get_ctx {
	sbuf *b;           /* name\0value\0 pairs */
	int n;
} get_ctx;

static void config_get_visit(void *arg, const char *name, const char *value)
{
	get_ctx *x = arg;
	/* Several patterns may match one option: Redis answers it once. */
	size_t off = 0;
	for (int i = 0; i < x->n; i++) {
		const char *nm = x->b->p + off;
		if (!strcasecmp(nm, name))
			return;
		off += strlen(nm) + 1;
		off += strlen(x->b->p + off) + 1;
	}
	sb_add(x->b, name, strlen(name) + 1);
	sb_add(x->b, value, strlen(value) + 1);
	x->n++;
}

/* Zero the INFO counters: record each worker's current values as its baseline (note 3). */
/* CONFIG RESETSTAT baseline of the store's tier counters (note 7). Under g_srv.stats_lock. */
static hlog_info tier_base;

static void stats_reset(void)
{
	int slots = command_slots();
	pthread_mutex_lock(&g_srv.stats_lock);
	hlog_info_get(g_srv.store, &tier_base);
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		worker_stats *s = &w->stats, *b = &w->stats_base;
		b->commands = rd64(&s->commands);
		b->connections = rd64(&s->connections);
		b->rejected = rd64(&s->rejected);
		b->net_in = rd64(&s->net_in);
		b->net_out = rd64(&s->net_out);
		b->keyspace_hits = rd64(&s->keyspace_hits);
		b->keyspace_misses = rd64(&s->keyspace_misses);
		b->expired_keys = rd64(&s->expired_keys);
		b->errors = rd64(&s->errors);
		b->busy_ns = rd64(&s->busy_ns);
		b->reads = rd64(&s->reads);
		b->writes = rd64(&s->writes);
		b->parked = rd64(&s->parked);
		b->io_errors = rd64(&s->io_errors);
		b->sg_runs = rd64(&s->sg_runs);
		b->sg_gets = rd64(&s->sg_gets);
		b->sg_pending = rd64(&s->sg_pending);
		for (int j = 0; j < slots; j++) {
			b->cmd_calls[j] = rd64(&s->cmd_calls[j]);
			b->cmd_ticks[j] = rd64(&s->cmd_ticks[j]);
			b->cmd_failed[j] = rd64(&s->cmd_failed[j]);
			b->cmd_rejected[j] = rd64(&s->cmd_rejected[j]);
		}
	}
	pthread_mutex_unlock(&g_srv.stats_lock);
}

void cmd_config(client *c)
{
	const resp_slice *sub = &c->argv[1];
	char err[512];

	if (arg_eq(sub, "get")) {
		sbuf b;
		get_ctx x = { .b = &b, .n = 0 };
		sb_init(&b, c->w);
		for (int i = 2; i < c->argc; i++)
			config_get_matching(c->argv[i].ptr, c->argv[i].len, config_get_visit, &x);
		if (b.oom) {
			reply_err_store(c, -ENOMEM);
			return;
		}
		resp_write_map_len(&c->out, x.n);
		const char *p = b.p;
		for (int i = 0; i < 2 * x.n; i++) {
			size_t n = strlen(p);
			reply_bulk(c, p, n);
			p += n + 1;
		}
	} else if (arg_eq(sub, "set")) {
		if (c->argc % 2 != 0) {
			reply_err_arity(c);
			return;
		}
		if (config_set_pairs(&c->argv[2], (c->argc - 2) / 2, err, sizeof(err)) < 0) {
			reply_error(c, err);
		} else {
			server_wake_all();   /* e.g. a new timeout: sleeping workers must arm their timer */
			reply_ok(c);
		}
	} else if (arg_eq(sub, "resetstat")) {
		stats_reset();
		reply_ok(c);
	} else if (arg_eq(sub, "rewrite")) {
		if (config_rewrite(err, sizeof(err)) < 0) {
			reply_error(c, err);
		} else {
			spw_log(SPW_LOG_NOTICE, 0, "CONFIG REWRITE executed with success.");
			reply_ok(c);
		}
	} else {
		reply_help(c, config_help);
	}
}

/* ---------------- COMMAND ---------------- */

static const char *const command_help[] = {
	"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"(no subcommand)",
	"    Return details about all Redis commands.",
	"COUNT",
	"    Return the total number of commands in this Redis server.",
	"LIST",
	"    Return a list of all commands in this Redis server.",
	"INFO [<command-name> ...]",
	"    Return details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"DOCS [<command-name> ...]",
	"    Return documentation details about multiple Redis commands.",
	"    If no command names are given, documentation details for all",
	"    commands are returned.",
	"GETKEYS <full-command>",
	"    Return the keys from a full Redis command.",
	"GETKEYSANDFLAGS <full-command>",
	"    Return the keys and the access flags from a full Redis command.",
	"HELP",
	"    Prints this help.",
	NULL,
};

static const struct { uint32_t flag; const char *name; } flag_names[] = {
	{ CMD_WRITE, "write" },       { CMD_READONLY, "readonly" }, { CMD_DENYOOM, "denyoom" },
	{ CMD_ADMIN, "admin" },       { CMD_PUBSUB, "pubsub" },     { CMD_NOSCRIPT, "noscript" },
	{ CMD_LOADING, "loading" },   { CMD_STALE, "stale" },       { CMD_FAST, "fast" },
	{ CMD_NOAUTH, "no_auth" },    { CMD_MAY_REPLICATE, "may_replicate" },
	{ CMD_SENTINEL, "sentinel" }, { CMD_NO_MULTI, "no_multi" }, { CMD_ALLOW_BUSY, "allow_busy" },
};

/* Count the words of a space separated list. */
static int words_count(const char *s, char sep)
{
	int n = 0;
	bool in = false;
	for (; s && *s; s++) {
		if (*s == sep) {
			in = false;
		} else if (!in) {
			in = true;
			n++;
		}
	}
	return n;
}

/* Write each word of s as a status (bulk = false) or bulk string. */
static void write_words(resp_out *o, const char *s, char sep, bool bulk)
{
	while (s && *s) {
		while (*s == sep)
			s++;
		if (!*s)
			break;
		const char *e = strchr(s, sep);
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (bulk)
			resp_write_bulk(o, s, n);
		else
			resp_write_simple(o, s, n);
		s += n;
	}
}

typedef struct key_spec {
	char flags[64];
	int index, lastkey, keystep;
	char notes[96];
} key_spec;

/* Parse the i-th "FLAGS:index:lastkey:keystep[:notes]" of cmd->key_specs. false when there is none. */
static bool key_spec_get(const spw_command *cmd, int i, key_spec *ks)
{
	const char *s = cmd->key_specs;
	for (; s && i > 0; i--) {
		s = strchr(s, ';');
		if (s)
			s++;
	}
	if (!s || !*s)
		return false;
	const char *colon = strchr(s, ':');
	if (!colon)
		return false;
	size_t n = SPW_MIN((size_t)(colon - s), sizeof(ks->flags) - 1);
	memcpy(ks->flags, s, n);
	ks->flags[n] = '\0';
	ks->notes[0] = '\0';
	if (sscanf(colon + 1, "%d:%d:%d", &ks->index, &ks->lastkey, &ks->keystep) != 3)
		return false;
	const char *end = strchr(s, ';'), *p = colon + 1;
	for (int k = 0; k < 3 && p; k++) {
		p = strchr(p, ':');
		if (p)
			p++;
	}
	if (p && (!end || p < end)) {
		size_t len = SPW_MIN((size_t)((end ? end : p + strlen(p)) - p), sizeof(ks->notes) - 1);
		memcpy(ks->notes, p, len);
		ks->notes[len] = '\0';
	}
	return true;
}

static int key_spec_count(const spw_command *cmd)
{
	return cmd->key_specs ? words_count(cmd->key_specs, ';') : 0;
}

static void command_info_write(resp_out *o, const spw_command *cmd)
{
	int nflags = 0;
	for (size_t i = 0; i < SPW_ARRAY_LEN(flag_names); i++)
		if (cmd->flags & flag_names[i].flag)
			nflags++;
	resp_write_array_len(o, 10);
	resp_write_bulk_cstr(o, cmd->name);
	resp_write_int(o, cmd->arity);
	resp_write_set_len(o, nflags);
	for (size_t i = 0; i < SPW_ARRAY_LEN(flag_names); i++)
		if (cmd->flags & flag_names[i].flag)
			resp_write_simple(o, flag_names[i].name, strlen(flag_names[i].name));
	resp_write_int(o, cmd->first_key);
	resp_write_int(o, cmd->last_key);
	resp_write_int(o, cmd->step);
	resp_write_set_len(o, words_count(cmd->acl_categories, ' '));
	write_words(o, cmd->acl_categories, ' ', false);
	resp_write_set_len(o, words_count(cmd->tips, ' '));
	write_words(o, cmd->tips, ' ', true);
	int nks = key_spec_count(cmd);
	resp_write_set_len(o, nks);
	for (int i = 0; i < nks; i++) {
		key_spec ks;
		if (!key_spec_get(cmd, i, &ks))
			memset(&ks, 0, sizeof(ks));
		resp_write_map_len(o, ks.notes[0] ? 4 : 3);
		if (ks.notes[0]) {
			resp_write_bulk_cstr(o, "notes");
			resp_write_bulk_cstr(o, ks.notes);
		}
		resp_write_bulk_cstr(o, "flags");
		resp_write_set_len(o, words_count(ks.flags, ' '));
		write_words(o, ks.flags, ' ', false);
		resp_write_bulk_cstr(o, "begin_search");
		resp_write_map_len(o, 2);
		resp_write_bulk_cstr(o, "type");
		resp_write_bulk_cstr(o, "index");
		resp_write_bulk_cstr(o, "spec");
		resp_write_map_len(o, 1);
		resp_write_bulk_cstr(o, "index");
		resp_write_int(o, ks.index);
		resp_write_bulk_cstr(o, "find_keys");
		resp_write_map_len(o, 2);
		resp_write_bulk_cstr(o, "type");
		resp_write_bulk_cstr(o, "range");
		resp_write_bulk_cstr(o, "spec");
		resp_write_map_len(o, 3);
		resp_write_bulk_cstr(o, "lastkey");
		resp_write_int(o, ks.lastkey);
		resp_write_bulk_cstr(o, "keystep");
		resp_write_int(o, ks.keystep);
		resp_write_bulk_cstr(o, "limit");
		resp_write_int(o, 0);
	}
	resp_write_set_len(o, cmd->nsubcommands);
	for (int i = 0; i < cmd->nsubcommands; i++)
		command_info_write(o, &cmd->subcommands[i]);
}

static void command_docs_write(resp_out *o, const spw_command *cmd)
{
	int n = 4 + (cmd->deprecated_since ? 3 : 0) + (cmd->nsubcommands ? 1 : 0);
	resp_write_map_len(o, n);
	resp_write_bulk_cstr(o, "summary");
	resp_write_bulk_cstr(o, cmd->summary ? cmd->summary : "");
	resp_write_bulk_cstr(o, "since");
	resp_write_bulk_cstr(o, cmd->since ? cmd->since : "");
	resp_write_bulk_cstr(o, "group");
	resp_write_bulk_cstr(o, cmd->group ? cmd->group : "");
	resp_write_bulk_cstr(o, "complexity");
	resp_write_bulk_cstr(o, cmd->complexity ? cmd->complexity : "");
	if (cmd->deprecated_since) {
		resp_write_bulk_cstr(o, "doc_flags");
		resp_write_set_len(o, 1);
		resp_write_simple(o, "deprecated", 10);
		resp_write_bulk_cstr(o, "deprecated_since");
		resp_write_bulk_cstr(o, cmd->deprecated_since);
		resp_write_bulk_cstr(o, "replaced_by");
		resp_write_bulk_cstr(o, cmd->replaced_by ? cmd->replaced_by : "");
	}
	if (cmd->nsubcommands) {
		resp_write_bulk_cstr(o, "subcommands");
		resp_write_map_len(o, cmd->nsubcommands);
		for (int i = 0; i < cmd->nsubcommands; i++) {
			resp_write_bulk_cstr(o, cmd->subcommands[i].name);
			command_docs_write(o, &cmd->subcommands[i]);
		}
	}
}

/* A command by "name" or "container|sub", as COMMAND INFO/DOCS accept. */
static const spw_command *command_by_fullname(const resp_slice *a)
{
	const char *bar = memchr(a->ptr, '|', a->len);
	if (!bar)
		return command_lookup(a->ptr, a->len);
	const spw_command *p = command_lookup(a->ptr, (size_t)(bar - a->ptr));
	if (!p || !p->subcommands)
		return NULL;
	return command_sub_lookup(p, bar + 1, a->len - (size_t)(bar - a->ptr) - 1);
}

static bool acl_has_category(const spw_command *cmd, const resp_slice *cat)
{
	const char *s = cmd->acl_categories;
	while (s && *s) {
		while (*s == ' ')
			s++;
		const char *e = strchr(s, ' ');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n > 1 && n - 1 == cat->len && !strncasecmp(s + 1, cat->ptr, cat->len))
			return true;
		s += n;
	}
	return false;
}

static void command_list(client *c)
{
	int filter = 0;   /* 0 none, 1 module, 2 aclcat, 3 pattern */
	const resp_slice *arg = NULL;
	if (c->argc == 5 && arg_eq(&c->argv[2], "filterby")) {
		arg = &c->argv[4];
		if (arg_eq(&c->argv[3], "module"))
			filter = 1;
		else if (arg_eq(&c->argv[3], "aclcat"))
			filter = 2;
		else if (arg_eq(&c->argv[3], "pattern"))
			filter = 3;
	}
	if (c->argc != 2 && !filter) {
		reply_err_syntax(c);
		return;
	}
	int total = command_slots(), n = 0;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			resp_write_array_len(&c->out, n);
		for (int i = 0; i < total; i++) {
			const spw_command *cmd = command_at_slot(i);
			bool match = filter == 0 ||
			             (filter == 2 && acl_has_category(cmd, arg)) ||
			             (filter == 3 && spw_glob_match(arg->ptr, arg->len, cmd->name, strlen(cmd->name), 1));
			if (!match)
				continue;
			if (pass == 0)
				n++;
			else
				resp_write_bulk_cstr(&c->out, cmd->name);
		}
	}
}

/* COMMAND GETKEYS / GETKEYSANDFLAGS from first/last/step (with the key specs' flags). */
static void command_getkeys(client *c, bool with_flags)
{
	const resp_slice *argv = &c->argv[2];
	int argc = c->argc - 2;
	const spw_command *cmd = command_lookup(argv[0].ptr, argv[0].len);
	if (cmd && cmd->subcommands && argc >= 2) {
		const spw_command *sub = command_sub_lookup(cmd, argv[1].ptr, argv[1].len);
		if (sub)
			cmd = sub;
	}
	if (!cmd) {
		reply_error(c, "ERR Invalid command specified");
		return;
	}
	if ((cmd->arity > 0 && argc != cmd->arity) || argc < -cmd->arity) {
		reply_error(c, "ERR Invalid number of arguments specified for command");
		return;
	}
	if (cmd->first_key == 0) {
		reply_error(c, "ERR The command has no key arguments");
		return;
	}
	int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
	int n = 0;
	for (int i = cmd->first_key; i <= last && i < argc; i += cmd->step)
		n++;
	resp_write_array_len(&c->out, n);
	for (int i = cmd->first_key; i <= last && i < argc; i += cmd->step) {
		if (!with_flags) {
			reply_bulk(c, argv[i].ptr, argv[i].len);
			continue;
		}
		/* The key spec whose begin index covers this key: the last one at or before it. */
		key_spec ks = { .flags = "" }, t;
		for (int k = 0; key_spec_get(cmd, k, &t); k++)
			if (t.index <= i)
				ks = t;
		resp_write_array_len(&c->out, 2);
		reply_bulk(c, argv[i].ptr, argv[i].len);
		resp_write_set_len(&c->out, words_count(ks.flags, ' '));
		write_words(&c->out, ks.flags, ' ', false);
	}
}

void cmd_command(client *c)
{
	int ntop = command_count();
	if (c->argc == 1) {
		resp_write_array_len(&c->out, ntop);
		for (int i = 0; i < ntop; i++)
			command_info_write(&c->out, command_at(i));
		return;
	}
	const resp_slice *sub = &c->argv[1];
	if (arg_eq(sub, "count")) {
		reply_int(c, ntop);
	} else if (arg_eq(sub, "info")) {
		if (c->argc == 2) {
			resp_write_array_len(&c->out, ntop);
			for (int i = 0; i < ntop; i++)
				command_info_write(&c->out, command_at(i));
			return;
		}
		resp_write_array_len(&c->out, c->argc - 2);
		for (int i = 2; i < c->argc; i++) {
			const spw_command *cmd = command_by_fullname(&c->argv[i]);
			if (cmd)
				command_info_write(&c->out, cmd);
			else
				reply_null(c);
		}
	} else if (arg_eq(sub, "docs")) {
		if (c->argc == 2) {
			resp_write_map_len(&c->out, ntop);
			for (int i = 0; i < ntop; i++) {
				resp_write_bulk_cstr(&c->out, command_at(i)->name);
				command_docs_write(&c->out, command_at(i));
			}
			return;
		}
		int n = 0;
		for (int i = 2; i < c->argc; i++)
			if (command_by_fullname(&c->argv[i]))
				n++;
		resp_write_map_len(&c->out, n);
		for (int i = 2; i < c->argc; i++) {
			const spw_command *cmd = command_by_fullname(&c->argv[i]);
			if (!cmd)
				continue;
			resp_write_bulk_cstr(&c->out, cmd->name);
			command_docs_write(&c->out, cmd);
		}
	} else if (arg_eq(sub, "list")) {
		command_list(c);
	} else if (arg_eq(sub, "getkeys")) {
		command_getkeys(c, false);
	} else if (arg_eq(sub, "getkeysandflags")) {
		command_getkeys(c, true);
	} else {
		reply_help(c, command_help);
	}
}

/* ---------------- SHUTDOWN ---------------- */

void cmd_shutdown(client *c)
{
	bool save = false, nosave = false, abort_ = false;
	for (int i = 1; i < c->argc; i++) {
		const resp_slice *a = &c->argv[i];
		if (arg_eq(a, "nosave")) {
			nosave = true;
		} else if (arg_eq(a, "save")) {
			save = true;
		} else if (arg_eq(a, "now") || arg_eq(a, "force")) {
			/* nothing to wait for or to fail: no replicas, no persistence */
		} else if (arg_eq(a, "abort")) {
			abort_ = true;
		} else {
			reply_err_syntax(c);
			return;
		}
	}
	if ((save && nosave) || (abort_ && c->argc != 2)) {
		reply_err_syntax(c);
		return;
	}
	if (abort_) {
		reply_error(c, "ERR No shutdown in progress.");
		return;
	}
	spw_log(SPW_LOG_WARNING, 0, "User requested shutdown...");
	if (save)
		spw_log(SPW_LOG_WARNING, 0, "SHUTDOWN SAVE: this server keeps no snapshots, nothing saved");
	server_request_shutdown();
	/* As Redis: no reply; replies to earlier commands of this client still go out. */
	c->flags |= CLIENT_CLOSE_AFTER_REPLY;
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

/* Counters summed over workers, minus the RESETSTAT baselines unless raw. */
typedef struct stats_sum {
	uint64_t commands, connections, rejected, net_in, net_out, hits, misses, expired, errors;
	uint64_t reads, writes, parked, io_errors;
	uint64_t sg_runs, sg_gets, sg_pending;
} stats_sum;

static void stats_sum_get(stats_sum *s, bool raw)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < g_srv.nworkers; i++) {
		const worker_stats *w = &g_srv.workers[i].stats, *b = &g_srv.workers[i].stats_base;
#define ADD(f, g) s->f += rd64(&w->g) - (raw ? 0 : rd64(&b->g))
		ADD(commands, commands);
		ADD(connections, connections);
		ADD(rejected, rejected);
		ADD(net_in, net_in);
		ADD(net_out, net_out);
		ADD(hits, keyspace_hits);
		ADD(misses, keyspace_misses);
		ADD(expired, expired_keys);
		ADD(errors, errors);
		ADD(reads, reads);
		ADD(writes, writes);
		ADD(parked, parked);
		ADD(io_errors, io_errors);
		ADD(sg_runs, sg_runs);
		ADD(sg_gets, sg_gets);
		ADD(sg_pending, sg_pending);
#undef ADD
	}
}

/* The rate sampler (note 4). Guarded by g_srv.stats_lock. */
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
	stats_sum s;
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
	stats_sum_get(&s, true);
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

static void info_memory(sbuf *b, const hlog_info *hi)
{
	static _Atomic uint64_t peak;
	char h1[32], h2[32], h3[32], h4[32];
	uint64_t log_bytes = hi->allocated_pages * hi->page_bytes;
	uint64_t index_bytes = hi->index.memory_bytes + hi->index.overflow_bytes;
	int64_t bufs = 0;
	for (int i = 0; i < g_srv.nworkers; i++)
		bufs += __atomic_load_n(&g_srv.workers[i].buf_bytes, __ATOMIC_RELAXED);
	uint64_t clients = atomic_load_explicit(&g_srv.nclients, memory_order_relaxed);
	uint64_t buffers = (uint64_t)(bufs > 0 ? bufs : 0) + clients * sizeof(client);
	uint64_t used = log_bytes + index_bytes + buffers;
	uint64_t p = atomic_load(&peak);
	while (used > p && !atomic_compare_exchange_weak(&peak, &p, used))
		;
	if (used > p)
		p = used;
	uint64_t rss = rss_bytes();
	struct sysinfo si;
	uint64_t total = sysinfo(&si) == 0 ? (uint64_t)si.totalram * si.mem_unit : 0;
	sb_printf(b, "# Memory\r\n"
	          "used_memory:%llu\r\n"
	          "used_memory_human:%s\r\n"
	          "used_memory_rss:%llu\r\n"
	          "used_memory_rss_human:%s\r\n"
	          "used_memory_peak:%llu\r\n"
	          "used_memory_peak_human:%s\r\n"
	          "used_memory_log:%llu\r\n"
	          "used_memory_index:%llu\r\n"
	          "used_memory_buffers:%llu\r\n"
	          "total_system_memory:%llu\r\n"
	          "total_system_memory_human:%s\r\n"
	          "maxmemory:0\r\n"
	          "maxmemory_human:0B\r\n"
	          "maxmemory_policy:noeviction\r\n"
	          "log_max_memory:%llu\r\n"
	          "log_pages_in_memory:%llu\r\n"
	          "log_page_bytes:%llu\r\n"
	          "index_bytes_per_key:%.2f\r\n"
	          "mem_allocator:libc\r\n",
	          (unsigned long long)used, human(h1, sizeof(h1), used), (unsigned long long)rss,
	          human(h2, sizeof(h2), rss), (unsigned long long)p, human(h3, sizeof(h3), p),
	          (unsigned long long)log_bytes, (unsigned long long)index_bytes,
	          (unsigned long long)buffers, (unsigned long long)total, human(h4, sizeof(h4), total),
	          (unsigned long long)hi->memory_bytes, (unsigned long long)hi->allocated_pages,
	          (unsigned long long)hi->page_bytes,
	          hi->keys ? (double)index_bytes / (double)hi->keys : 0.0);
}

static void info_persistence(sbuf *b)
{
	sb_printf(b, "# Persistence\r\n"
	          "loading:0\r\n"
	          "async_loading:0\r\n"
	          "rdb_changes_since_last_save:0\r\n"
	          "rdb_bgsave_in_progress:0\r\n"
	          "rdb_last_save_time:%lld\r\n"
	          "rdb_last_bgsave_status:ok\r\n"
	          "aof_enabled:0\r\n"
	          "aof_rewrite_in_progress:0\r\n"
	          "aof_last_write_status:ok\r\n",
	          (long long)(g_srv.start_ms / 1000));
}

/* The storage tier's lines of # Stats: every store counter with an INFO name (HLOG_COUNTERS,
 * log/hlog.h), less the CONFIG RESETSTAT baseline z (a MAX is shown as is), then the ratios made of
 * them and the server's own scatter-gather counters (park.c note 3). */
static void info_tier(sbuf *b, const stats_sum *s, const hlog_info *hi, const hlog_info *z)
{
	sb_printf(b, "tier_parked_commands:%llu\r\n"
	          "tier_io_error_replies:%llu\r\n",
	          (unsigned long long)s->parked, (unsigned long long)s->io_errors);
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
	sb_printf(b, "sg_lookahead_runs:%llu\r\n"
	          "sg_lookahead_gets:%llu\r\n"
	          "sg_lookahead_pending:%llu\r\n"
	          "sg_pending_per_park:%.3f\r\n",
	          (unsigned long long)s->sg_runs, (unsigned long long)s->sg_gets,
	          (unsigned long long)s->sg_pending,
	          s->sg_runs ? (double)(s->sg_runs + s->sg_pending) / (double)s->sg_runs : 0.0);
}

static void info_stats(sbuf *b)
{
	stats_sum s;
	stats_sum_get(&s, false);
	/* The store removes expired keys lazily, so it is the one that counts them. */
	hlog_info hi;
	hlog_info_get(g_srv.store, &hi);
	s.expired += hi.expired_keys;
	pthread_mutex_lock(&g_srv.stats_lock);
	rates_update();
	sb_printf(b, "# Stats\r\n"
	          "total_connections_received:%llu\r\n"
	          "total_commands_processed:%llu\r\n"
	          "instantaneous_ops_per_sec:%llu\r\n"
	          "total_net_input_bytes:%llu\r\n"
	          "total_net_output_bytes:%llu\r\n"
	          "instantaneous_input_kbps:%.2f\r\n"
	          "instantaneous_output_kbps:%.2f\r\n"
	          "rejected_connections:%llu\r\n"
	          "expired_keys:%llu\r\n"
	          "evicted_keys:0\r\n"
	          "keyspace_hits:%llu\r\n"
	          "keyspace_misses:%llu\r\n"
	          "pubsub_channels:0\r\n"
	          "pubsub_patterns:0\r\n"
	          "total_error_replies:%llu\r\n"
	          "total_reads_processed:%llu\r\n"
	          "total_writes_processed:%llu\r\n"
	          "workers:%d\r\n",
	          (unsigned long long)s.connections, (unsigned long long)s.commands,
	          (unsigned long long)(rate.ops + 0.5), (unsigned long long)s.net_in,
	          (unsigned long long)s.net_out, rate.in_kbps, rate.out_kbps,
	          (unsigned long long)s.rejected, (unsigned long long)s.expired,
	          (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.errors,
	          (unsigned long long)s.reads, (unsigned long long)s.writes, g_srv.nworkers);
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
	          "Log.StoreError:%s\r\n",
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
	          hi->store_error ? spw_strerror(hi->store_error) : "ok");
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
