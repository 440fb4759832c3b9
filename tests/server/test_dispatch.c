/*
 * test_dispatch.c - the command table and dispatch, and the connection commands that need no store:
 * lookup, Redis's exact error texts for unknown commands, arity and subcommands, per-command stats,
 * HELLO, SELECT, CLIENT SETNAME, COMMAND GETKEYS/COUNT/INFO, CONFIG GET.
 *
 * A client is built by hand on a worker that is never started (client_fixture.h): its replies are
 * read straight out of c->out, byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include "server/server_int.h"
#include "client_fixture.h"

static int setup(void **state)
{
	(void)state;
	client_fixture_setup();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	client_fixture_teardown();
	return 0;
}

static void test_lookup_is_case_insensitive_and_exact(void **state)
{
	(void)state;
	const spw_command *get = command_lookup("get", 3);
	assert_non_null(get);
	assert_ptr_equal(command_lookup("GET", 3), get);
	assert_ptr_equal(command_lookup("gEt", 3), get);
	assert_null(command_lookup("ge", 2));
	assert_null(command_lookup("gett", 4));
	assert_null(command_lookup("", 0));
	assert_null(command_lookup("get\0", 4));
	/* Bytes next to 'A'..'Z' and bytes >= 0x80 must not fold into letters (word-wise lower-casing). */
	assert_null(command_lookup("GE@", 3));
	assert_null(command_lookup("GE[", 3));
	assert_null(command_lookup("G\xc5T", 3));
	assert_null(command_lookup("g\x05t", 3));
	/* Every command, short and long names alike, is found by its upper-case name. */
	for (int i = 0; i < command_count(); i++) {
		const spw_command *c = command_at(i);
		char up[64];
		size_t n = strlen(c->name);
		assert_true(n < sizeof(up));
		for (size_t j = 0; j < n; j++)
			up[j] = (char)toupper((unsigned char)c->name[j]);
		assert_ptr_equal(command_lookup(up, n), c);
		assert_ptr_equal(command_lookup(c->name, n), c);
	}
	const spw_command *cfg = command_lookup("CONFIG", 6);
	assert_non_null(cfg);
	const spw_command *set = command_sub_lookup(cfg, "SeT", 3);
	assert_non_null(set);
	assert_string_equal(set->name, "config|set");
	assert_ptr_equal(set->parent, cfg);
	assert_null(command_sub_lookup(cfg, "se", 2));
}

static void test_every_handler_of_the_contract_has_a_table_entry(void **state)
{
	(void)state;
	static const char *const names[] = {
		"get", "set", "setnx", "setex", "psetex", "getset", "getdel", "getex", "mget", "mset",
		"msetnx", "incr", "decr", "incrby", "decrby", "incrbyfloat", "append", "strlen", "getrange",
		"setrange", "substr", "del", "unlink", "exists", "type", "expire", "pexpire", "expireat",
		"pexpireat", "ttl", "pttl", "expiretime", "pexpiretime", "persist", "touch", "keys", "scan",
		"randomkey", "rename", "renamenx", "copy", "dbsize", "flushdb", "flushall", "ping", "echo",
		"quit", "hello", "info", "config", "command", "client", "select", "time", "shutdown", "auth",
		"save", "bgsave", "lastsave", "compact",
		"pfadd", "pfcount", "pfmerge",
		"setbit", "getbit", "bitcount", "bitpos", "bitop", "bitfield", "bitfield_ro", "lcs",
		"object", "memory", "dump", "restore",
		"hset", "hsetnx", "hget", "hmget", "hmset", "hdel", "hexists", "hlen", "hstrlen", "hkeys",
		"hvals", "hgetall", "hincrby", "hincrbyfloat", "hrandfield", "hscan",
		"lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen", "lindex", "lset", "lrange",
		"ltrim", "lrem", "linsert", "lpos", "lmove", "rpoplpush", "lmpop",
		"sadd", "srem", "scard", "sismember", "smismember", "smembers", "srandmember", "spop",
		"smove", "sinter", "sintercard", "sunion", "sdiff", "sinterstore", "sunionstore",
		"sdiffstore", "sscan",
	};
	assert_int_equal(command_count(), (int)SPW_ARRAY_LEN(names));
	for (size_t i = 0; i < SPW_ARRAY_LEN(names); i++) {
		const spw_command *c = command_lookup(names[i], strlen(names[i]));
		if (!c)
			fail_msg("%s is missing", names[i]);
		assert_non_null(c->fn);
		assert_non_null(c->summary);
		assert_ptr_equal(command_at_slot(c->index), c);
	}
	/* Every stats slot is distinct, subcommands included. */
	for (int s = 0; s < command_slots(); s++)
		assert_int_equal(command_at_slot(s)->index, s);
}

static void test_unknown_command_error_matches_redis(void **state)
{
	(void)state;
	assert_string_equal(run("foo", "a", "b", "c", NULL),
	                    "-ERR unknown command 'foo', with args beginning with: 'a' 'b' 'c' \r\n");
	assert_string_equal(run("FOO", NULL), "-ERR unknown command 'FOO', with args beginning with: \r\n");
	/* newlines become spaces */
	assert_string_equal(run("foo", "a\r\nb", NULL),
	                    "-ERR unknown command 'foo', with args beginning with: 'a  b' \r\n");
}

static void test_unknown_command_preview_stops_at_128_bytes(void **state)
{
	(void)state;
	char a[101], b[101], expect[400];
	memset(a, 'a', 100);
	a[100] = '\0';
	memset(b, 'b', 100);
	b[100] = '\0';
	/* "'" + 100 a + "' " is 103 bytes; the next argument gets the 25 bytes left; then stop. */
	snprintf(expect, sizeof(expect), "-ERR unknown command 'foo', with args beginning with: '%s' '%.25s' \r\n",
	         a, b);
	assert_string_equal(run("foo", a, b, "c", NULL), expect);
}

static void test_arity_errors_name_the_command_or_subcommand(void **state)
{
	(void)state;
	assert_string_equal(run("GET", NULL), "-ERR wrong number of arguments for 'get' command\r\n");
	assert_string_equal(run("ping", "a", "b", NULL), "-ERR wrong number of arguments for 'ping' command\r\n");
	assert_string_equal(run("config", NULL), "-ERR wrong number of arguments for 'config' command\r\n");
	assert_string_equal(run("config", "set", NULL),
	                    "-ERR wrong number of arguments for 'config|set' command\r\n");
	/* redis-server 7.0.15: past the arity (-4), an odd count of arguments is a syntax error */
	assert_string_equal(run("config", "set", "a", "b", "c", NULL), "-ERR syntax error\r\n");
	assert_string_equal(run("client", "getname", "x", NULL),
	                    "-ERR wrong number of arguments for 'client|getname' command\r\n");
}

static void test_unknown_subcommand_points_to_help(void **state)
{
	(void)state;
	assert_string_equal(run("config", "foo", NULL), "-ERR unknown subcommand 'foo'. Try CONFIG HELP.\r\n");
	assert_string_equal(run("Client", "bar", NULL), "-ERR unknown subcommand 'bar'. Try CLIENT HELP.\r\n");
}

static void test_stats_count_calls_failures_and_rejections(void **state)
{
	(void)state;
	const spw_command *ping = command_lookup("ping", 4);
	const spw_command *sel = command_lookup("select", 6);
	uint64_t calls = W.stats.cmd_calls[ping->index], total = W.stats.commands, errs = W.stats.errors;
	uint64_t rejected = W.stats.cmd_rejected[ping->index], failed = W.stats.cmd_failed[sel->index];
	uint64_t sel_calls = W.stats.cmd_calls[sel->index], ping_failed = W.stats.cmd_failed[ping->index];
	assert_string_equal(run("PING", NULL), "+PONG\r\n");
	assert_string_equal(run("ping", "hi", NULL), "$2\r\nhi\r\n");
	assert_int_equal(W.stats.cmd_calls[ping->index], calls + 2);
	assert_int_equal(W.stats.commands, total + 2);
	assert_ptr_equal(C.last_cmd, ping);

	/* Arity rejected before running (GET's arity is exact): rejected_calls, no call. */
	const spw_command *get = command_lookup("get", 3);
	uint64_t get_rejected = W.stats.cmd_rejected[get->index], get_calls = W.stats.cmd_calls[get->index];
	run("get", NULL);
	assert_int_equal(W.stats.cmd_rejected[get->index], get_rejected + 1);
	assert_int_equal(W.stats.cmd_calls[get->index], get_calls);
	assert_int_equal(W.stats.commands, total + 2);
	/* PING's arity is -1: "ping a b" runs and fails in the handler, as in Redis (failed_calls). */
	run("ping", "a", "b", NULL);
	assert_int_equal(W.stats.cmd_rejected[ping->index], rejected);
	assert_int_equal(W.stats.cmd_failed[ping->index], ping_failed + 1);

	assert_string_equal(run("select", "1", NULL), "-ERR DB index is out of range\r\n");
	assert_int_equal(W.stats.cmd_failed[sel->index], failed + 1);
	assert_int_equal(W.stats.cmd_calls[sel->index], sel_calls + 1);
	assert_int_equal(W.stats.errors, errs + 3);
}

static void test_select_accepts_only_db_zero(void **state)
{
	(void)state;
	assert_string_equal(run("select", "0", NULL), "+OK\r\n");
	assert_string_equal(run("select", "x", NULL), "-ERR value is not an integer or out of range\r\n");
	assert_string_equal(run("select", "-1", NULL), "-ERR DB index is out of range\r\n");
	assert_string_equal(run("select", "99999999999999", NULL),
	                    "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n");
}

static void test_hello_switches_protocol_and_answers_a_map(void **state)
{
	(void)state;
	const char *r2 = "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n"
	                 "$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:42\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"
	                 "$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
	assert_string_equal(run("hello", NULL), r2);
	assert_string_equal(run("hello", "4", NULL), "-NOPROTO unsupported protocol version\r\n");
	assert_string_equal(run("hello", "x", NULL), "-ERR Protocol version is not an integer or out of range\r\n");
	assert_string_equal(run("hello", "2", "foo", NULL), "-ERR Syntax error in HELLO option 'foo'\r\n");
	assert_string_equal(run("hello", "2", "AUTH", "x", NULL), "-ERR Syntax error in HELLO option 'AUTH'\r\n");
	assert_string_equal(run("hello", "2", "AUTH", "bob", "pw", NULL),
	                    "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
	const char *r = run("hello", "3", "AUTH", "default", "any", "SETNAME", "conn1", NULL);
	assert_int_equal(strncmp(r, "%7\r\n", 4), 0);
	assert_non_null(strstr(r, "$5\r\nproto\r\n:3\r\n"));
	assert_int_equal(C.proto, 3);
	assert_int_equal(C.out.proto, 3);
	assert_string_equal(C.name, "conn1");
	assert_string_equal(run("client", "getname", NULL), "$5\r\nconn1\r\n");
	run("hello", "2", NULL);
	assert_int_equal(C.proto, 2);
}

static void test_client_name_is_validated_like_redis(void **state)
{
	(void)state;
	assert_string_equal(run("client", "setname", "a b", NULL),
	                    "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
	assert_string_equal(run("client", "setname", "ok-name", NULL), "+OK\r\n");
	assert_string_equal(run("client", "getname", NULL), "$7\r\nok-name\r\n");
	assert_string_equal(run("client", "setname", "", NULL), "+OK\r\n");
	assert_string_equal(run("client", "getname", NULL), "$-1\r\n");
	assert_string_equal(run("client", "id", NULL), ":42\r\n");
	assert_string_equal(run("client", "no-evict", "maybe", NULL), "-ERR syntax error\r\n");
	assert_string_equal(run("client", "setinfo", "lib-name", "redis-py", NULL), "+OK\r\n");
	assert_string_equal(run("client", "setinfo", "foo", "x", NULL), "-ERR Unrecognized option 'foo'\r\n");
	assert_string_equal(run("client", "kill", "id", "x", NULL), "-ERR client-id should be greater than 0\r\n");
	assert_string_equal(run("client", "kill", "type", "foo", NULL), "-ERR Unknown client type 'foo'\r\n");
	assert_string_equal(run("client", "kill", "user", "bob", NULL), "-ERR No such user 'bob'\r\n");
	assert_string_equal(run("client", "kill", "skipme", "maybe", NULL), "-ERR syntax error\r\n");
}

static void test_command_subcommands_read_the_table(void **state)
{
	(void)state;
	char expect[32];
	snprintf(expect, sizeof(expect), ":%d\r\n", command_count());
	assert_string_equal(run("command", "count", NULL), expect);
	assert_string_equal(run("command", "getkeys", "mset", "a", "1", "b", "2", NULL),
	                    "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
	assert_string_equal(run("command", "getkeys", "nosuch", "a", NULL), "-ERR Invalid command specified\r\n");
	assert_string_equal(run("command", "getkeys", "ping", "x", NULL),
	                    "-ERR The command has no key arguments\r\n");
	assert_string_equal(run("command", "getkeys", "set", "a", NULL),
	                    "-ERR Invalid number of arguments specified for command\r\n");
	assert_string_equal(run("command", "getkeysandflags", "rename", "a", "b", NULL),
	                    "*2\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n"
	                    "*2\r\n$1\r\nb\r\n*2\r\n+OW\r\n+update\r\n");
	/* Key specs with variable flags take them from the arguments (Redis's getkeys procs), and a
	 * key count argument (LMPOP's keynum spec) names the keys, as redis-server 7.0.15 answers. */
	assert_string_equal(run("command", "getkeysandflags", "set", "a", "b", "ex", "10", NULL),
	                    "*1\r\n*2\r\n$1\r\na\r\n*2\r\n+OW\r\n+update\r\n");
	assert_string_equal(run("command", "getkeysandflags", "set", "a", "b", "get", NULL),
	                    "*1\r\n*2\r\n$1\r\na\r\n*3\r\n+RW\r\n+access\r\n+update\r\n");
	assert_string_equal(run("command", "getkeysandflags", "bitfield", "k", "get", "u8", "0", NULL),
	                    "*1\r\n*2\r\n$1\r\nk\r\n*2\r\n+RO\r\n+access\r\n");
	assert_string_equal(run("command", "getkeys", "lmpop", "2", "a", "b", "left", NULL),
	                    "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
	assert_string_equal(run("command", "getkeys", "lmpop", "x", "a", "b", "left", NULL),
	                    "-ERR Invalid arguments specified for command\r\n");
	/* Redis 7.0.15's COMMAND INFO GET, byte for byte. */
	assert_string_equal(run("command", "info", "get", "nosuch", NULL),
	                    "*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
	                    "*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n"
	                    "+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n"
	                    "$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n"
	                    "$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n"
	                    "$5\r\nlimit\r\n:0\r\n*0\r\n$-1\r\n");
	assert_string_equal(run("command", "docs", "nosuch", NULL), "*0\r\n");
	const char *list = run("command", "list", "filterby", "pattern", "config*", NULL);
	assert_non_null(strstr(list, "$10\r\nconfig|get\r\n"));
	assert_string_equal(run("command", "list", "foo", NULL), "-ERR syntax error\r\n");
}

static void test_config_get_replies_a_map_per_protocol(void **state)
{
	(void)state;
	assert_string_equal(run("config", "get", "maxclients", NULL), "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
	/* Several patterns naming one option answer it once, under the first spelling (as Redis). */
	assert_string_equal(run("config", "get", "port", "PORT", "p?rt", NULL),
	                    "*2\r\n$4\r\nport\r\n$4\r\n6379\r\n");
	assert_string_equal(run("config", "get", "nosuch", NULL), "*0\r\n");
	C.proto = 3;
	assert_string_equal(run("config", "get", "maxclients", NULL), "%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
	C.proto = 2;
	assert_string_equal(run("config", "set", "maxclients", "abc", NULL),
	                    "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument "
	                    "couldn't be parsed into an integer\r\n");
	assert_string_equal(run("config", "rewrite", NULL), "-ERR The server is running without a config file\r\n");
}

static void test_quit_closes_after_the_reply(void **state)
{
	(void)state;
	C.flags = 0;
	assert_string_equal(run("quit", NULL), "+OK\r\n");
	assert_true(C.flags & CLIENT_CLOSE_AFTER_REPLY);
	C.flags = 0;
	assert_string_equal(run("shutdown", "abort", NULL), "-ERR No shutdown in progress.\r\n");
	assert_string_equal(run("shutdown", "nosave", "save", NULL), "-ERR syntax error\r\n");
	assert_string_equal(run("auth", "pw", NULL),
	                    "-ERR AUTH <password> called without any password configured for the default user. "
	                    "Are you sure your configuration is correct?\r\n");
	assert_string_equal(run("auth", "default", "pw", NULL), "+OK\r\n");
}

/* While the store loads (persist.c note 1; the worker's reading of it for the pass), commands without Redis's "loading" flag (PING among
 * them, as in Redis 7.0) get Redis's exact -LOADING error and count as rejected; loading ones
 * (ECHO, CONFIG) run. */
static void test_loading_rejects_commands_without_the_loading_flag(void **state)
{
	(void)state;
	W.loading = true;   /* what the worker read at its pass's start (worker_aof_refresh) */
	out_reset();
	const spw_command *get = command_lookup("get", 3);
	uint64_t rejected = W.stats.cmd_rejected[get->index];
	assert_string_equal(run("get", "k", NULL), "-LOADING Redis is loading the dataset in memory\r\n");
	assert_int_equal(W.stats.cmd_rejected[get->index], rejected + 1);
	assert_string_equal(run("set", "k", "v", NULL), "-LOADING Redis is loading the dataset in memory\r\n");
	assert_string_equal(run("save", NULL), "-LOADING Redis is loading the dataset in memory\r\n");
	assert_string_equal(run("get", NULL), "-ERR wrong number of arguments for 'get' command\r\n");
	assert_string_equal(run("ping", NULL), "-LOADING Redis is loading the dataset in memory\r\n");   /* as Redis 7.0: PING has no loading flag */
	assert_string_equal(run("echo", "x", NULL), "$1\r\nx\r\n");
	assert_string_equal(run("time", "x", NULL), "-ERR wrong number of arguments for 'time' command\r\n");
	assert_string_equal(run("config", "get", "appendonly", NULL), "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n");
	W.loading = false;
	assert_string_equal(run("bgsave", "now", NULL), "-ERR syntax error\r\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loading_rejects_commands_without_the_loading_flag),
		cmocka_unit_test(test_lookup_is_case_insensitive_and_exact),
		cmocka_unit_test(test_every_handler_of_the_contract_has_a_table_entry),
		cmocka_unit_test(test_unknown_command_error_matches_redis),
		cmocka_unit_test(test_unknown_command_preview_stops_at_128_bytes),
		cmocka_unit_test(test_arity_errors_name_the_command_or_subcommand),
		cmocka_unit_test(test_unknown_subcommand_points_to_help),
		cmocka_unit_test(test_stats_count_calls_failures_and_rejections),
		cmocka_unit_test(test_select_accepts_only_db_zero),
		cmocka_unit_test(test_hello_switches_protocol_and_answers_a_map),
		cmocka_unit_test(test_client_name_is_validated_like_redis),
		cmocka_unit_test(test_command_subcommands_read_the_table),
		cmocka_unit_test(test_config_get_replies_a_map_per_protocol),
		cmocka_unit_test(test_quit_closes_after_the_reply),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
