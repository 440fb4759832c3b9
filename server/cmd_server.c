/*
 * cmd_server.c - connection and server commands: PING ECHO QUIT HELLO AUTH SELECT TIME CONFIG
 * COMMAND SHUTDOWN SAVE BGSAVE LASTSAVE (Redis's server.c, networking.c, config.c, rdb.c and
 * acl.c command parts). INFO is in info.c, CLIENT in cmd_client.c, the checkpoints behind SAVE
 * and BGSAVE in persist.c.
 *
 * Design notes:
 *  1. Replies and error texts are redis-server 7.0.15's, checked against it command by command,
 *     including the RESP3 shapes (INFO and CLIENT LIST/INFO as verbatim "txt" strings, CONFIG GET
 *     and HELLO as maps, COMMAND flags as sets).
 *  2. Nothing here is on the request hot path; these handlers may take locks and walk all workers.
 *  3. No ACL: as a Redis without requirepass, the only user is "default" and any password is
 *     accepted for it (HELLO AUTH, AUTH user pass); AUTH with a password alone answers Redis's
 *     "no password configured" error.
 *  4. SHUTDOWN: a graceful shutdown takes a final checkpoint unless NOSAVE (the main thread runs
 *     it once the workers have exited, start.c); SAVE is the default here. ABORT answers "No
 *     shutdown in progress." since shutdowns are never pending.
 *  5. SAVE parks the client until the saver's checkpoint ends (persist.c note 4; its worker goes
 *     on serving others), BGSAVE asks the saver and answers at once. BGSAVE SCHEDULE behaves as
 *     BGSAVE, as in a Redis with no other child process: nothing here ever makes a checkpoint wait
 *     for something else.
 */
#include "server/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---------------- HELLO ---------------- */


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
		if (c->argc % 2 != 0) {   /* Redis 7.0: the arity (-4) is checked, an odd count is syntax */
			reply_err_syntax(c);
			return;
		}
		if (config_set_pairs(&c->argv[2], (c->argc - 2) / 2, err, sizeof(err)) < 0) {
			reply_error(c, err);
		} else {
			server_wake_all();   /* e.g. a new timeout: sleeping workers must arm their timer */
			reply_ok(c);
		}
	} else if (arg_eq(sub, "resetstat")) {
		info_stats_reset();
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
	{ CMD_SENTINEL, "sentinel" }, { CMD_NO_ASYNC_LOADING, "no_async_loading" },
	{ CMD_NO_MULTI, "no_multi" }, { CMD_ALLOW_BUSY, "allow_busy" },
	{ CMD_MOVABLE_KEYS, "movablekeys" },
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
	bool keynum;               /* find_keys keynum: keynumidx, firstkey, keystep */
	int keynumidx, firstkey;
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
	ks->keynum = false;
	int fields = 3;
	if (sscanf(colon + 1, "%d:#%d:%d:%d", &ks->index, &ks->keynumidx, &ks->firstkey, &ks->keystep) == 4) {
		ks->keynum = true;
		ks->lastkey = 0;
		fields = 4;
	} else if (sscanf(colon + 1, "%d:%d:%d", &ks->index, &ks->lastkey, &ks->keystep) != 3) {
		return false;
	}
	const char *end = strchr(s, ';'), *p = colon + 1;
	for (int k = 0; k < fields && p; k++) {
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
		resp_write_bulk_cstr(o, ks.keynum ? "keynum" : "range");
		resp_write_bulk_cstr(o, "spec");
		resp_write_map_len(o, 3);
		resp_write_bulk_cstr(o, ks.keynum ? "keynumidx" : "lastkey");
		resp_write_int(o, ks.keynum ? ks.keynumidx : ks.lastkey);
		resp_write_bulk_cstr(o, ks.keynum ? "firstkey" : "keystep");
		resp_write_int(o, ks.keynum ? ks.firstkey : ks.keystep);
		resp_write_bulk_cstr(o, ks.keynum ? "keystep" : "limit");
		resp_write_int(o, ks.keynum ? ks.keystep : 0);
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

/* The keys of argv by cmd's key specs, as Redis's getKeysUsingKeySpecs: positions into pos and
 * the spec's index into spec (at most max). The count, or -1 when a key count argument is not a
 * number >= 0 (Redis's invalid spec). Keys past argc are left out (a variadic command reports its
 * own syntax error). */
static int keys_from_specs(const spw_command *cmd, const resp_slice *argv, int argc, int *pos,
		int *spec, int max)
{
	key_spec ks;
	int n = 0;
	for (int k = 0; key_spec_get(cmd, k, &ks); k++) {
		int first = ks.index, last, step = ks.keystep;
		if (first >= argc)
			continue;
		if (ks.keynum) {
			long long numkeys;
			if (first + ks.keynumidx >= argc ||
			    !spw_parse_ll(argv[first + ks.keynumidx].ptr, argv[first + ks.keynumidx].len, &numkeys) ||
			    numkeys < 0 || numkeys > argc)
				return -1;
			first += ks.firstkey;
			last = first + (int)numkeys - 1;
		} else {
			last = ks.lastkey >= 0 ? first + ks.lastkey : argc + ks.lastkey;
		}
		for (int i = first; i <= last && step > 0; i += step) {
			if (i >= argc || n == max)
				continue;
			pos[n] = i;
			spec[n++] = k;
		}
	}
	return n;
}

/* The flags of a key spec marked variable_flags, from the arguments, as Redis's getkeys_proc of
 * SET (GET makes the key read too) and BITFIELD (read-only unless a SET or INCRBY, or anything it
 * cannot parse, comes) set them; Redis never shows variable_flags itself. */
static const char *key_flags_variable(const spw_command *cmd, const resp_slice *argv, int argc)
{
	if (strcmp(cmd->name, "set") == 0) {
		for (int i = 3; i < argc; i++)
			if (strnlen(argv[i].ptr, argv[i].len) == 3 && strncasecmp(argv[i].ptr, "get", 3) == 0)
				return "RW access update";
		return "OW update";
	}
	if (strcmp(cmd->name, "bitfield") == 0) {
		for (int i = 2; i < argc; i++) {
			int rem = argc - i - 1;
			if (arg_eq(&argv[i], "get") && rem >= 2)
				i += 2;
			else if (arg_eq(&argv[i], "overflow") && rem >= 1)
				i += 1;
			else
				return "RW access update";   /* SET, INCRBY or a syntax error: not read-only */
		}
		return "RO access";
	}
	return NULL;
}

/* COMMAND GETKEYS / GETKEYSANDFLAGS through the key specs (keys_from_specs), or first/last/step
 * for a command that has none. */
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
	if (cmd->first_key == 0 && !cmd->key_specs) {
		reply_error(c, "ERR The command has no key arguments");
		return;
	}
	if (cmd->key_specs) {
		int *pos = (int *)worker_scratch(c->w, (size_t)argc * 2 * sizeof(int));
		if (!pos) {
			reply_err_store(c, -ENOMEM);
			return;
		}
		int *spec = pos + argc;
		int n = keys_from_specs(cmd, argv, argc, pos, spec, argc);
		if (n <= 0) {
			reply_error(c, "ERR Invalid arguments specified for command");
			return;
		}
		resp_write_array_len(&c->out, n);
		for (int j = 0; j < n; j++) {
			key_spec ks;
			if (with_flags)
				resp_write_array_len(&c->out, 2);
			reply_bulk(c, argv[pos[j]].ptr, argv[pos[j]].len);
			if (with_flags && key_spec_get(cmd, spec[j], &ks)) {
				const char *f = strstr(ks.flags, "variable_flags") ? key_flags_variable(cmd, argv, argc) : NULL;
				f = f ? f : ks.flags;
				resp_write_set_len(&c->out, words_count(f, ' '));
				write_words(&c->out, f, ' ', false);
			}
		}
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
	uint64_t ticket;
	if (!nosave && persist_save_request(&ticket) == 0) {
		/* As Redis: the shutdown happens only if its checkpoint succeeds; a failed one answers
		 * "Errors trying to SHUTDOWN" and the server goes on (worker.c note 8). The final
		 * checkpoint after the workers stop then holds only what came in meanwhile. */
		c->save_ticket = ticket;
		c->flags |= CLIENT_SAVE_WAIT | CLIENT_SHUTDOWN_SAVE;
		return;
	}
	if (nosave)
		atomic_store(&g_srv.shutdown_nosave, 1);
	server_request_shutdown();
	/* As Redis: no reply; replies to earlier commands of this client still go out. */
	c->flags |= CLIENT_CLOSE_AFTER_REPLY;
}


/* ---------------- SAVE BGSAVE LASTSAVE (note 5) ---------------- */

void cmd_save(client *c)
{
	uint64_t ticket;
	if (persist_save_request(&ticket) < 0) {
		reply_error(c, "ERR Background save already in progress");
		return;
	}
	c->save_ticket = ticket;
	c->flags |= CLIENT_SAVE_WAIT;   /* worker.c note 8 answers it */
}

void cmd_bgsave(client *c)
{
	if (c->argc > 1 && (c->argc > 2 || !arg_eq(&c->argv[1], "schedule"))) {
		reply_err_syntax(c);
		return;
	}
	if (persist_bgsave() < 0) {
		reply_error(c, "ERR Background save already in progress");
		return;
	}
	resp_write_simple(&c->out, "Background saving started", 25);
}

void cmd_lastsave(client *c) { reply_int(c, (long long)persist_lastsave()); }
