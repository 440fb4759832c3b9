/*
 * cmd_client.c - CLIENT and its subcommands (Redis's networking.c command part): ID, INFO, LIST,
 * KILL, GETNAME, SETNAME, SETINFO, REPLY, NO-EVICT, NO-TOUCH, HELP; client names (also HELLO's).
 *
 * Design notes:
 *  1. Replies and error texts are redis-server 7.0.15's (CLIENT SETINFO and NO-TOUCH: 7.2), CLIENT
 *     LIST/INFO as a verbatim "txt" string in RESP3 (cmd_server.c note 1).
 *  2. CLIENT LIST and CLIENT KILL reach the clients of other workers only through the worker
 *     layer's cross-worker requests (server_clients_visit, server_kill_clients: worker.c note 3);
 *     nothing here touches another worker's client directly.
 *  3. CLIENT REPLY, as Redis's flags: OFF mutes every reply until CLIENT REPLY ON (whose +OK goes
 *     out: ON clears the mode before it replies); SKIP sets SKIP_NEXT, which becomes SKIP when
 *     that command ends, so the next command's reply is muted, and SKIP lasts one command; SKIP
 *     under OFF does nothing. A command is muted whole: command_dispatch marks the reply before
 *     it runs and client_reply_mode_end drops what it wrote once it has completed or been
 *     rejected (the mark that rolls back a parked attempt, commands.c note 6), so a parked
 *     attempt does not spend the SKIP and its re-run is the one muted. A SAVE or COMPACT muted
 *     when sent is answered later, muted too (CLIENT_REPLY_MUTE_WAIT). Muted errors still count
 *     (total_error_replies, errorstats), as Redis counts them in afterErrorReply.
 */
#include "server/server_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---------------- CLIENT REPLY (note 3) ---------------- */

void client_reply_mode_end(client *c, resp_chunk *tail, uint32_t tail_len, size_t bytes)
{
	if (c->flags & (CLIENT_REPLY_OFF | CLIENT_REPLY_SKIP)) {
		client_reply_rollback(c, tail, tail_len, bytes);
		if (c->flags & CLIENT_SAVE_WAIT)
			c->flags |= CLIENT_REPLY_MUTE_WAIT;   /* its answer comes later (worker.c note 8) */
	}
	c->flags &= ~CLIENT_REPLY_SKIP;
	if (c->flags & CLIENT_REPLY_SKIP_NEXT)
		c->flags = (c->flags & ~CLIENT_REPLY_SKIP_NEXT) | CLIENT_REPLY_SKIP;
}

/* ---------------- client names ---------------- */

/* Redis's validateClientName: printable ASCII without spaces. 0 or the error already replied. */
int client_name_check(client *c, const resp_slice *name)
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

void client_name_set(client *c, const resp_slice *name)
{
	memcpy(c->name, name->ptr, name->len);
	c->name[name->len] = '\0';
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
	} else if (arg_eq(sub, "reply")) {   /* note 3 */
		if (arg_eq(&c->argv[2], "on")) {
			c->flags &= ~CLIENT_REPLY_MODES;
			reply_ok(c);
		} else if (arg_eq(&c->argv[2], "off")) {
			c->flags |= CLIENT_REPLY_OFF;
		} else if (arg_eq(&c->argv[2], "skip")) {
			if (!(c->flags & CLIENT_REPLY_OFF))
				c->flags |= CLIENT_REPLY_SKIP_NEXT;
		} else {
			reply_err_syntax(c);
		}
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

