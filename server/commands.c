/*
 * commands.c - the command table, name lookup and dispatch (Redis's commands.def + processCommand
 * + call()).
 *
 * Design notes:
 *  1. The table mirrors redis-server 7.0.15's COMMAND INFO / COMMAND DOCS for every command we
 *     implement (arity, flags, first/last key and step, ACL categories, tips, key specs, summary,
 *     since, group, complexity), so clients that read COMMAND see what they expect. It was taken
 *     from a running redis-server 7.0.15; CLIENT SETINFO and CLIENT NO-TOUCH come from 7.2.
 *  2. Container commands (CONFIG, CLIENT, COMMAND) have subcommand entries named "config|get",
 *     as Redis 7: dispatch finds the subcommand from argv[1], checks its own arity (so the error
 *     names 'config|set') and counts stats per subcommand (cmdstat_config|get). The subcommands
 *     share their container's handler, which switches on argv[1] again (admin paths only).
 *  3. Lookup is an open-addressing table of 256 slots, built once at start, keyed by an FNV-1a
 *     hash of the lower-cased name computed while reading argv[0]: case-insensitive, no
 *     allocation, no copy, usually one probe and one compare.
 *  4. Stats are per worker (no shared counters on the request path): calls, failed calls (the
 *     handler replied with an error: total_error_replies moved), rejected calls (arity) and time.
 *     Time costs one clock read per command (server_ticks(): the TSC on x86-64): the reading after
 *     a command is the start of the next one (the worker sets w->cmd_clock before each client's
 *     batch), so the time charged to a command includes parsing its request. Commands that are
 *     rejected re-read the clock so that the next command is not charged for them. A reading
 *     below the previous one (a TSC step between CPUs) charges nothing.
 *  5. Order of checks as Redis's processCommand: unknown command, unknown subcommand, arity.
 *     Error texts are Redis 7.0's, byte for byte (argument previews truncated at 128 bytes and
 *     newlines turned to spaces).
 *  6. A handler that parks its client (reply_pending: the store answered HLOG_PENDING) leaves no
 *     trace of that attempt: what it wrote to the reply is rolled back and its error and keyspace
 *     counters restored, since the same request runs again once the device reads are done
 *     (park.c note 1). The attempt's time is charged to the command, its call is not counted.
 *     The marks cost five loads per command; handlers then need only guarantee that they did not
 *     change the store before parking. The same mark mutes a command's reply under CLIENT REPLY
 *     OFF|SKIP once it has really completed, or was rejected (cmd_client.c note 3): a parked
 *     attempt leaves SKIP for its re-run.
 *  7. While the store loads at start (g_srv.loading, persist.c note 1), a command without Redis's
 *     CMD_LOADING flag is rejected with Redis's exact "-LOADING Redis is loading the dataset in
 *     memory" (a rejected call), after the arity check as in processCommand.
 */
#include "server/server_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static spw_command config_subcommands[] = {
	{ .name = "config|get", .fn = cmd_config, .arity = -3, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "2.0.0", .group = "server", .complexity = "O(N) when N is the number of configuration parameters provided",
	  .summary = "Get the values of configuration parameters" },
	{ .name = "config|help", .fn = cmd_config, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "5.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Show helpful text about the different subcommands" },
	{ .name = "config|resetstat", .fn = cmd_config, .arity = 2, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "2.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Reset the stats returned by INFO" },
	{ .name = "config|rewrite", .fn = cmd_config, .arity = 2, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "2.8.0", .group = "server", .complexity = "O(1)",
	  .summary = "Rewrite the configuration file with the in memory configuration" },
	{ .name = "config|set", .fn = cmd_config, .arity = -4, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "2.0.0", .group = "server", .complexity = "O(N) when N is the number of configuration parameters provided",
	  .summary = "Set configuration parameters to the given values",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
};

static spw_command command_subcommands[] = {
	{ .name = "command|count", .fn = cmd_command, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.8.13", .group = "server", .complexity = "O(1)",
	  .summary = "Get total number of Redis commands" },
	{ .name = "command|docs", .fn = cmd_command, .arity = -2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "7.0.0", .group = "server", .complexity = "O(N) where N is the number of commands to look up",
	  .summary = "Get array of specific Redis command documentation",
	  .tips = "nondeterministic_output_order" },
	{ .name = "command|getkeys", .fn = cmd_command, .arity = -4, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.8.13", .group = "server", .complexity = "O(N) where N is the number of arguments to the command",
	  .summary = "Extract keys given a full Redis command" },
	{ .name = "command|getkeysandflags", .fn = cmd_command, .arity = -4, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "7.0.0", .group = "server", .complexity = "O(N) where N is the number of arguments to the command",
	  .summary = "Extract keys and access flags given a full Redis command" },
	{ .name = "command|help", .fn = cmd_command, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "5.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Show helpful text about the different subcommands" },
	{ .name = "command|info", .fn = cmd_command, .arity = -2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.8.13", .group = "server", .complexity = "O(N) where N is the number of commands to look up",
	  .summary = "Get array of specific Redis command details, or all when no argument is given.",
	  .tips = "nondeterministic_output_order" },
	{ .name = "command|list", .fn = cmd_command, .arity = -2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "7.0.0", .group = "server", .complexity = "O(N) where N is the total number of Redis commands",
	  .summary = "Get an array of Redis command names",
	  .tips = "nondeterministic_output_order" },
};

static spw_command client_subcommands[] = {
	{ .name = "client|getname", .fn = cmd_client, .arity = 2, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.6.9", .group = "connection", .complexity = "O(1)",
	  .summary = "Get the current connection name" },
	{ .name = "client|help", .fn = cmd_client, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "5.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Show helpful text about the different subcommands" },
	{ .name = "client|id", .fn = cmd_client, .arity = 2, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "5.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Returns the client ID for the current connection" },
	{ .name = "client|info", .fn = cmd_client, .arity = 2, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "6.2.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Returns information about the current client connection.",
	  .tips = "nondeterministic_output" },
	{ .name = "client|kill", .fn = cmd_client, .arity = -3, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous @connection",
	  .since = "2.4.0", .group = "connection", .complexity = "O(N) where N is the number of client connections",
	  .summary = "Kill the connection of a client" },
	{ .name = "client|list", .fn = cmd_client, .arity = -2, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous @connection",
	  .since = "2.4.0", .group = "connection", .complexity = "O(N) where N is the number of client connections",
	  .summary = "Get the list of client connections",
	  .tips = "nondeterministic_output" },
	{ .name = "client|no-evict", .fn = cmd_client, .arity = 3, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous @connection",
	  .since = "7.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Set client eviction mode for the current connection" },
	{ .name = "client|no-touch", .fn = cmd_client, .arity = 3, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "7.2.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Controls whether commands sent by the client affect the LRU/LFU of accessed keys" },
	{ .name = "client|reply", .fn = cmd_client, .arity = 3, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "3.2.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Instruct the server whether to reply to commands" },
	{ .name = "client|setinfo", .fn = cmd_client, .arity = 4, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "7.2.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Set client or connection specific info",
	  .tips = "request_policy:all_nodes response_policy:all_succeeded" },
	{ .name = "client|setname", .fn = cmd_client, .arity = 3, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.6.9", .group = "connection", .complexity = "O(1)",
	  .summary = "Set the current connection name" },
};

/* OBJECT and MEMORY (cmd_object.c): rows from tools/gen-command-rows.py. */
static spw_command object_subcommands[] = {
	{ .name = "object|encoding", .fn = cmd_object, .arity = 3, .flags = CMD_READONLY,
	  .first_key = 2, .last_key = 2, .step = 1, .acl_categories = "@keyspace @read @slow",
	  .since = "2.2.3", .group = "generic", .complexity = "O(1)",
	  .summary = "Inspect the internal encoding of a Redis object",
	  .tips = "nondeterministic_output",
	  .key_specs = "RO:2:0:1" },
	{ .name = "object|freq", .fn = cmd_object, .arity = 3, .flags = CMD_READONLY,
	  .first_key = 2, .last_key = 2, .step = 1, .acl_categories = "@keyspace @read @slow",
	  .since = "4.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the logarithmic access frequency counter of a Redis object",
	  .tips = "nondeterministic_output",
	  .key_specs = "RO:2:0:1" },
	{ .name = "object|help", .fn = cmd_object, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @slow",
	  .since = "6.2.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Show helpful text about the different subcommands" },
	{ .name = "object|idletime", .fn = cmd_object, .arity = 3, .flags = CMD_READONLY,
	  .first_key = 2, .last_key = 2, .step = 1, .acl_categories = "@keyspace @read @slow",
	  .since = "2.2.3", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the time since a Redis object was last accessed",
	  .tips = "nondeterministic_output",
	  .key_specs = "RO:2:0:1" },
	{ .name = "object|refcount", .fn = cmd_object, .arity = 3, .flags = CMD_READONLY,
	  .first_key = 2, .last_key = 2, .step = 1, .acl_categories = "@keyspace @read @slow",
	  .since = "2.2.3", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the number of references to the value of the key",
	  .tips = "nondeterministic_output",
	  .key_specs = "RO:2:0:1" },
};

static spw_command memory_subcommands[] = {
	{ .name = "memory|help", .fn = cmd_memory, .arity = 2, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "4.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Show helpful text about the different subcommands" },
	{ .name = "memory|usage", .fn = cmd_memory, .arity = -3, .flags = CMD_READONLY,
	  .first_key = 2, .last_key = 2, .step = 1, .acl_categories = "@read @slow",
	  .since = "4.0.0", .group = "server", .complexity = "O(N) where N is the number of samples.",
	  .summary = "Estimate the memory usage of a key",
	  .key_specs = "RO:2:0:1" },
};

static spw_command cmd_table[] = {
#include "server/cmdtab_dump.inc"   /* DUMP, RESTORE (cmd_dump.c) */
	{ .name = "get", .fn = cmd_get, .arity = 2, .flags = CMD_READONLY | CMD_FAST | CMD_LOOKAHEAD,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@read @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Get the value of a key",
	  .key_specs = "RO access:1:0:1" },
	{ .name = "set", .fn = cmd_set, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @slow",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Set the string value of a key",
	  .key_specs = "RW access update variable_flags:1:0:1:RW and ACCESS due to the optional `GET` argument" },
	{ .name = "setnx", .fn = cmd_setnx, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Set the value of a key, only if the key does not exist",
	  .key_specs = "OW insert:1:0:1" },
	{ .name = "setex", .fn = cmd_setex, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @slow",
	  .since = "2.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Set the value and expiration of a key",
	  .key_specs = "OW update:1:0:1" },
	{ .name = "psetex", .fn = cmd_psetex, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @slow",
	  .since = "2.6.0", .group = "string", .complexity = "O(1)",
	  .summary = "Set the value and expiration in milliseconds of a key",
	  .key_specs = "OW update:1:0:1" },
	{ .name = "getset", .fn = cmd_getset, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Set the string value of a key and return its old value",
	  .key_specs = "RW access update:1:0:1", .deprecated_since = "6.2.0", .replaced_by = "`SET` with the `!GET` argument" },
	{ .name = "getdel", .fn = cmd_getdel, .arity = 2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "6.2.0", .group = "string", .complexity = "O(1)",
	  .summary = "Get the value of a key and delete the key",
	  .key_specs = "RW access delete:1:0:1" },
	{ .name = "getex", .fn = cmd_getex, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "6.2.0", .group = "string", .complexity = "O(1)",
	  .summary = "Get the value of a key and optionally set its expiration",
	  .key_specs = "RW access update:1:0:1:RW and UPDATE because it changes the TTL" },
	{ .name = "mget", .fn = cmd_mget, .arity = -2, .flags = CMD_READONLY | CMD_FAST | CMD_LOOKAHEAD,
	  .first_key = 1, .last_key = -1, .step = 1, .acl_categories = "@read @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(N) where N is the number of keys to retrieve.",
	  .summary = "Get the values of all the given keys",
	  .tips = "request_policy:multi_shard", .key_specs = "RO access:1:-1:1" },
	{ .name = "mset", .fn = cmd_mset, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .step = 2, .acl_categories = "@write @string @slow",
	  .since = "1.0.1", .group = "string", .complexity = "O(N) where N is the number of keys to set.",
	  .summary = "Set multiple keys to multiple values",
	  .tips = "request_policy:multi_shard response_policy:all_succeeded", .key_specs = "OW update:1:-1:2" },
	{ .name = "msetnx", .fn = cmd_msetnx, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = -1, .step = 2, .acl_categories = "@write @string @slow",
	  .since = "1.0.1", .group = "string", .complexity = "O(N) where N is the number of keys to set.",
	  .summary = "Set multiple keys to multiple values, only if none of the keys exist",
	  .tips = "request_policy:multi_shard response_policy:agg_min", .key_specs = "OW insert:1:-1:2" },
	{ .name = "incr", .fn = cmd_incr, .arity = 2, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Increment the integer value of a key by one",
	  .key_specs = "RW access update:1:0:1" },
	{ .name = "decr", .fn = cmd_decr, .arity = 2, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Decrement the integer value of a key by one",
	  .key_specs = "RW access update:1:0:1" },
	{ .name = "incrby", .fn = cmd_incrby, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Increment the integer value of a key by the given amount",
	  .key_specs = "RW access update:1:0:1" },
	{ .name = "decrby", .fn = cmd_decrby, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "1.0.0", .group = "string", .complexity = "O(1)",
	  .summary = "Decrement the integer value of a key by the given number",
	  .key_specs = "RW access update:1:0:1" },
	{ .name = "incrbyfloat", .fn = cmd_incrbyfloat, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "2.6.0", .group = "string", .complexity = "O(1)",
	  .summary = "Increment the float value of a key by the given amount",
	  .key_specs = "RW access update:1:0:1" },
	{ .name = "append", .fn = cmd_append, .arity = 3, .flags = CMD_WRITE | CMD_DENYOOM | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @fast",
	  .since = "2.0.0", .group = "string", .complexity = "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
	  .summary = "Append a value to a key",
	  .key_specs = "RW insert:1:0:1" },
	{ .name = "strlen", .fn = cmd_strlen, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@read @string @fast",
	  .since = "2.2.0", .group = "string", .complexity = "O(1)",
	  .summary = "Get the length of the value stored in a key",
	  .key_specs = "RO:1:0:1" },
	{ .name = "getrange", .fn = cmd_getrange, .arity = 4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@read @string @slow",
	  .since = "2.4.0", .group = "string", .complexity = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.",
	  .summary = "Get a substring of the string stored at a key",
	  .key_specs = "RO access:1:0:1" },
	{ .name = "setrange", .fn = cmd_setrange, .arity = 4, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@write @string @slow",
	  .since = "2.2.0", .group = "string", .complexity = "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
	  .summary = "Overwrite part of a string at key starting at the specified offset",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "substr", .fn = cmd_substr, .arity = 4, .flags = CMD_READONLY,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@read @string @slow",
	  .since = "1.0.0", .group = "string", .complexity = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.",
	  .summary = "Get a substring of the string stored at a key",
	  .key_specs = "RO access:1:0:1", .deprecated_since = "2.0.0", .replaced_by = "`GETRANGE`" },
	{ .name = "del", .fn = cmd_del, .arity = -2, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = -1, .step = 1, .acl_categories = "@keyspace @write @slow",
	  .since = "1.0.0", .group = "generic", .complexity = "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
	  .summary = "Delete a key",
	  .tips = "request_policy:multi_shard response_policy:agg_sum", .key_specs = "RM delete:1:-1:1" },
	{ .name = "unlink", .fn = cmd_unlink, .arity = -2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = -1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "4.0.0", .group = "generic", .complexity = "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
	  .summary = "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
	  .tips = "request_policy:multi_shard response_policy:agg_sum", .key_specs = "RM delete:1:-1:1" },
	{ .name = "exists", .fn = cmd_exists, .arity = -2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = -1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "1.0.0", .group = "generic", .complexity = "O(N) where N is the number of keys to check.",
	  .summary = "Determine if a key exists",
	  .tips = "request_policy:multi_shard response_policy:agg_sum", .key_specs = "RO:1:-1:1" },
	{ .name = "type", .fn = cmd_type, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Determine the type stored at key",
	  .key_specs = "RO:1:0:1" },
	{ .name = "expire", .fn = cmd_expire, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Set a key's time to live in seconds",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "pexpire", .fn = cmd_pexpire, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "2.6.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Set a key's time to live in milliseconds",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "expireat", .fn = cmd_expireat, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "1.2.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Set the expiration for a key as a UNIX timestamp",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "pexpireat", .fn = cmd_pexpireat, .arity = -3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "2.6.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "ttl", .fn = cmd_ttl, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the time to live for a key in seconds",
	  .tips = "nondeterministic_output", .key_specs = "RO access:1:0:1" },
	{ .name = "pttl", .fn = cmd_pttl, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "2.6.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the time to live for a key in milliseconds",
	  .tips = "nondeterministic_output", .key_specs = "RO access:1:0:1" },
	{ .name = "expiretime", .fn = cmd_expiretime, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "7.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the expiration Unix timestamp for a key",
	  .key_specs = "RO access:1:0:1" },
	{ .name = "pexpiretime", .fn = cmd_pexpiretime, .arity = 2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "7.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Get the expiration Unix timestamp for a key in milliseconds",
	  .key_specs = "RO access:1:0:1" },
	{ .name = "persist", .fn = cmd_persist, .arity = 2, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 1, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "2.2.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Remove the expiration from a key",
	  .key_specs = "RW update:1:0:1" },
	{ .name = "touch", .fn = cmd_touch, .arity = -2, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 1, .last_key = -1, .step = 1, .acl_categories = "@keyspace @read @fast",
	  .since = "3.2.1", .group = "generic", .complexity = "O(N) where N is the number of keys that will be touched.",
	  .summary = "Alters the last access time of a key(s). Returns the number of existing keys specified.",
	  .tips = "request_policy:multi_shard response_policy:agg_sum", .key_specs = "RO:1:-1:1" },
	{ .name = "keys", .fn = cmd_keys, .arity = 2, .flags = CMD_READONLY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @read @slow @dangerous",
	  .since = "1.0.0", .group = "generic", .complexity = "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
	  .summary = "Find all keys matching the given pattern",
	  .tips = "request_policy:all_shards nondeterministic_output_order" },
	{ .name = "scan", .fn = cmd_scan, .arity = -2, .flags = CMD_READONLY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @read @slow",
	  .since = "2.8.0", .group = "generic", .complexity = "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
	  .summary = "Incrementally iterate the keys space",
	  .tips = "nondeterministic_output request_policy:special" },
	{ .name = "randomkey", .fn = cmd_randomkey, .arity = 1, .flags = CMD_READONLY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @read @slow",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Return a random key from the keyspace",
	  .tips = "request_policy:all_shards nondeterministic_output" },
	{ .name = "rename", .fn = cmd_rename, .arity = 3, .flags = CMD_WRITE,
	  .first_key = 1, .last_key = 2, .step = 1, .acl_categories = "@keyspace @write @slow",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Rename a key",
	  .key_specs = "RW access delete:1:0:1;OW update:2:0:1" },
	{ .name = "renamenx", .fn = cmd_renamenx, .arity = 3, .flags = CMD_WRITE | CMD_FAST,
	  .first_key = 1, .last_key = 2, .step = 1, .acl_categories = "@keyspace @write @fast",
	  .since = "1.0.0", .group = "generic", .complexity = "O(1)",
	  .summary = "Rename a key, only if the new key does not exist",
	  .key_specs = "RW access delete:1:0:1;OW insert:2:0:1" },
	{ .name = "copy", .fn = cmd_copy, .arity = -3, .flags = CMD_WRITE | CMD_DENYOOM,
	  .first_key = 1, .last_key = 2, .step = 1, .acl_categories = "@keyspace @write @slow",
	  .since = "6.2.0", .group = "generic", .complexity = "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
	  .summary = "Copy a key",
	  .key_specs = "RO access:1:0:1;OW update:2:0:1" },
	{ .name = "dbsize", .fn = cmd_dbsize, .arity = 1, .flags = CMD_READONLY | CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @read @fast",
	  .since = "1.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Return the number of keys in the selected database",
	  .tips = "request_policy:all_shards response_policy:agg_sum" },
	{ .name = "flushdb", .fn = cmd_flushdb, .arity = -1, .flags = CMD_WRITE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @write @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(N) where N is the number of keys in the selected database",
	  .summary = "Remove all keys from the current database",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "flushall", .fn = cmd_flushall, .arity = -1, .flags = CMD_WRITE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@keyspace @write @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(N) where N is the total number of keys in all databases",
	  .summary = "Remove all keys from all databases",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "ping", .fn = cmd_ping, .arity = -1, .flags = CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "1.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Ping the server",
	  .tips = "request_policy:all_shards response_policy:all_succeeded" },
	{ .name = "echo", .fn = cmd_echo, .arity = 2, .flags = CMD_LOADING | CMD_STALE | CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "1.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Echo the given string" },
	{ .name = "quit", .fn = cmd_quit, .arity = -1, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOAUTH | CMD_ALLOW_BUSY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "1.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Close the connection" },
	{ .name = "hello", .fn = cmd_hello, .arity = -1, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOAUTH | CMD_ALLOW_BUSY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "6.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Handshake with Redis" },
	{ .name = "auth", .fn = cmd_auth, .arity = -2, .flags = CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_FAST | CMD_NOAUTH | CMD_ALLOW_BUSY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "1.0.0", .group = "connection", .complexity = "O(N) where N is the number of passwords defined for the user",
	  .summary = "Authenticate to the server" },
	{ .name = "info", .fn = cmd_info, .arity = -1, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Get information and statistics about the server",
	  .tips = "nondeterministic_output request_policy:all_shards response_policy:special" },
	{ .name = "config", .fn = cmd_config, .arity = -2, .flags = 0,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "2.0.0", .group = "server", .complexity = "Depends on subcommand.",
	  .summary = "A container for server configuration commands",
	  .subcommands = config_subcommands, .nsubcommands = (int)SPW_ARRAY_LEN(config_subcommands) },
	{ .name = "command", .fn = cmd_command, .arity = -1, .flags = CMD_LOADING | CMD_STALE,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow @connection",
	  .since = "2.8.13", .group = "server", .complexity = "O(N) where N is the total number of Redis commands",
	  .summary = "Get array of Redis command details",
	  .tips = "nondeterministic_output_order",
	  .subcommands = command_subcommands, .nsubcommands = (int)SPW_ARRAY_LEN(command_subcommands) },
	{ .name = "client", .fn = cmd_client, .arity = -2, .flags = 0,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "2.4.0", .group = "connection", .complexity = "Depends on subcommand.",
	  .summary = "A container for client connection commands",
	  .subcommands = client_subcommands, .nsubcommands = (int)SPW_ARRAY_LEN(client_subcommands) },
	{ .name = "select", .fn = cmd_select, .arity = 2, .flags = CMD_LOADING | CMD_STALE | CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast @connection",
	  .since = "1.0.0", .group = "connection", .complexity = "O(1)",
	  .summary = "Change the selected database for the current connection" },
	{ .name = "time", .fn = cmd_time, .arity = 1, .flags = CMD_LOADING | CMD_STALE | CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@fast",
	  .since = "2.6.0", .group = "server", .complexity = "O(1)",
	  .summary = "Return the current server time",
	  .tips = "nondeterministic_output" },
	{ .name = "shutdown", .fn = cmd_shutdown, .arity = -1, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_LOADING | CMD_STALE | CMD_NO_MULTI | CMD_ALLOW_BUSY,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
	  .summary = "Synchronously save the dataset to disk and then shut down the server" },
	{ .name = "save", .fn = cmd_save, .arity = 1, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_NO_ASYNC_LOADING | CMD_NO_MULTI,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(N) where N is the total number of keys in all databases",
	  .summary = "Synchronously save the dataset to disk" },
	{ .name = "bgsave", .fn = cmd_bgsave, .arity = -1, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_NO_ASYNC_LOADING,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Asynchronously save the dataset to disk" },
	{ .name = "compact", .fn = cmd_compact, .arity = 1, .flags = CMD_ADMIN | CMD_NOSCRIPT | CMD_NO_MULTI,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @slow @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(N) where N is the size of the log compacted",
	  .summary = "Compact the oldest part of the log now and give its disk space back (Spillway)" },
	{ .name = "lastsave", .fn = cmd_lastsave, .arity = 1, .flags = CMD_LOADING | CMD_STALE | CMD_FAST,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@admin @fast @dangerous",
	  .since = "1.0.0", .group = "server", .complexity = "O(1)",
	  .summary = "Get the UNIX time stamp of the last successful save to disk",
	  .tips = "nondeterministic_output" },
	{ .name = "object", .fn = cmd_object, .arity = -2, .flags = 0,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "2.2.3", .group = "generic", .complexity = "Depends on subcommand.",
	  .summary = "A container for object introspection commands",
	  .subcommands = object_subcommands, .nsubcommands = (int)SPW_ARRAY_LEN(object_subcommands) },
	{ .name = "memory", .fn = cmd_memory, .arity = -2, .flags = 0,
	  .first_key = 0, .last_key = 0, .step = 0, .acl_categories = "@slow",
	  .since = "4.0.0", .group = "server", .complexity = "Depends on subcommand.",
	  .summary = "A container for memory diagnostics commands",
	  .subcommands = memory_subcommands, .nsubcommands = (int)SPW_ARRAY_LEN(memory_subcommands) },
#include "server/cmdtab_hll.inc"
#include "server/cmdtab_bits.inc"
#include "server/cmdtab_hash.inc"
#include "server/cmdtab_list.inc"
#include "server/cmdtab_set.inc"
};

/* ---------------- lookup ---------------- */

#define LOOKUP_SLOTS 1024  /* power of two, well above the number of commands */
#define NAME_MAX_LEN 32    /* longer argv[0] cannot be a command */

static const spw_command *lookup_table[LOOKUP_SLOTS];
static const spw_command *slot_table[1024];  /* stats slot -> command */
static int nslots;
static bool table_ready;

static inline unsigned char fold(unsigned char ch)
{
	return (unsigned char)(ch + (((unsigned)ch - 'A') < 26u) * 32u);
}

static inline uint32_t name_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ fold((unsigned char)s[i])) * 16777619u;
	return h;
}

/* Case-insensitive compare of n bytes of s with a lower-case name of exactly n bytes (a NUL in s
 * never matches: the name's terminator stops the loop first). */
static inline bool name_matches(const char *s, size_t n, const char *lower)
{
	for (size_t i = 0; i < n; i++)
		if (lower[i] == '\0' || fold((unsigned char)s[i]) != (unsigned char)lower[i])
			return false;
	return lower[n] == '\0';
}

/*
 * Names of up to 8 bytes (every hot command) are looked up as one folded 64-bit word: load the bytes,
 * lower-case A-Z with SWAR arithmetic, hash with one multiply, compare one word and the length: the
 * lookup runs once per request, and a byte-wise hash and compare was a visible share of a pipelined
 * GET's instructions (docs/BENCHMARKS.md has the profile).
 * A NUL byte in the name never matches: no command name contains one, and the length differs.
 */
#define FAST_SLOTS 1024
static uint64_t fast_word[FAST_SLOTS];
static uint8_t fast_len[FAST_SLOTS];
static const spw_command *fast_cmd[FAST_SLOTS];

static inline uint64_t name_word(const char *s, size_t n)
{
	uint64_t w = 0;
	memcpy(&w, s, n);
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t low7 = w & ~high;                        /* each byte's 7 low bits */
	uint64_t ge_a = low7 + ones * (0x80 - 'A');       /* high bit set where byte >= 'A' */
	uint64_t gt_z = low7 + ones * (0x80 - 'Z' - 1);   /* high bit set where byte > 'Z' */
	uint64_t upper = ge_a & ~gt_z & ~w & high;        /* ASCII 'A'..'Z' only (not bytes >= 0x80) */
	return w | (upper >> 2);                          /* 0x80 >> 2 = 0x20: to lower case */
}

static inline uint32_t word_slot(uint64_t w, size_t n)
{
	return (uint32_t)(((w ^ n) * 0x9E3779B97F4A7C15ULL) >> 56) & (FAST_SLOTS - 1);
}

void command_table_init(void)
{
	if (table_ready)
		return;
	int ntop = (int)SPW_ARRAY_LEN(cmd_table);
	nslots = 0;
	for (int i = 0; i < ntop; i++) {
		spw_command *c = &cmd_table[i];
		c->index = nslots;
		slot_table[nslots++] = c;
		uint32_t h = name_hash(c->name, strlen(c->name)) & (LOOKUP_SLOTS - 1);
		while (lookup_table[h])
			h = (h + 1) & (LOOKUP_SLOTS - 1);
		lookup_table[h] = c;
		size_t n = strlen(c->name);
		if (n <= 8) {
			uint64_t w = name_word(c->name, n);
			uint32_t f = word_slot(w, n);
			while (fast_cmd[f])
				f = (f + 1) & (FAST_SLOTS - 1);
			fast_word[f] = w;
			fast_len[f] = (uint8_t)n;
			fast_cmd[f] = c;
		}
	}
	for (int i = 0; i < ntop; i++) {
		spw_command *c = &cmd_table[i];
		for (int j = 0; j < c->nsubcommands; j++) {
			spw_command *s = &c->subcommands[j];
			s->parent = c;
			s->index = nslots;
			slot_table[nslots++] = s;
		}
	}
	table_ready = true;
}

const spw_command *command_lookup(const char *name, size_t len)
{
	if (SPW_UNLIKELY(!table_ready))
		command_table_init();
	if (len == 0 || len > NAME_MAX_LEN)
		return NULL;
	if (SPW_LIKELY(len <= 8)) {
		uint64_t w = name_word(name, len);
		for (uint32_t f = word_slot(w, len); fast_cmd[f]; f = (f + 1) & (FAST_SLOTS - 1))
			if (fast_word[f] == w && fast_len[f] == len)
				return fast_cmd[f];
		return NULL;
	}
	uint32_t h = name_hash(name, len) & (LOOKUP_SLOTS - 1);
	const spw_command *c;
	while ((c = lookup_table[h]) != NULL) {
		if (name_matches(name, len, c->name))
			return c;
		h = (h + 1) & (LOOKUP_SLOTS - 1);
	}
	return NULL;
}

const spw_command *command_sub_lookup(const spw_command *parent, const char *name, size_t len)
{
	size_t plen = strlen(parent->name) + 1;   /* "config|" */
	for (int i = 0; i < parent->nsubcommands; i++) {
		const spw_command *s = &parent->subcommands[i];
		if (strlen(s->name) - plen == len && name_matches(name, len, s->name + plen))
			return s;
	}
	return NULL;
}

int command_count(void) { return (int)SPW_ARRAY_LEN(cmd_table); }

const spw_command *command_at(int i)
{
	if (SPW_UNLIKELY(!table_ready))
		command_table_init();
	return (i >= 0 && i < command_count()) ? &cmd_table[i] : NULL;
}

int command_slots(void)
{
	if (SPW_UNLIKELY(!table_ready))
		command_table_init();
	return nslots;
}

const spw_command *command_at_slot(int slot)
{
	return (slot >= 0 && slot < command_slots()) ? slot_table[slot] : NULL;
}

/* ---------------- dispatch ---------------- */

/* Redis's "unknown command" error: the name (at most 128 bytes) and a preview of the arguments,
 * each quoted and followed by a space, stopping once the preview reaches 128 bytes. */
static void reply_unknown_command(client *c)
{
	char args[160 + 4];
	size_t n = 0;
	for (int i = 1; i < c->argc && n < 128; i++) {
		size_t room = 128 - n, len = SPW_MIN(c->argv[i].len, room);
		/* %.*s stops at a NUL byte, as Redis's does on the sds */
		const char *z = memchr(c->argv[i].ptr, '\0', len);
		if (z)
			len = (size_t)(z - c->argv[i].ptr);
		args[n++] = '\'';
		memcpy(args + n, c->argv[i].ptr, len);
		n += len;
		args[n++] = '\'';
		args[n++] = ' ';
	}
	args[n] = '\0';
	size_t nlen = SPW_MIN(c->argv[0].len, 128);
	const char *z = memchr(c->argv[0].ptr, '\0', nlen);
	if (z)
		nlen = (size_t)(z - c->argv[0].ptr);
	reply_errorf(c, "ERR unknown command '%.*s', with args beginning with: %s", (int)nlen,
	             c->argv[0].ptr, args);
}

static void reply_unknown_subcommand(client *c, const spw_command *parent)
{
	char upper[NAME_MAX_LEN + 1];
	size_t i;
	for (i = 0; parent->name[i] && i < NAME_MAX_LEN; i++)
		upper[i] = (char)(parent->name[i] - ((unsigned)(parent->name[i] - 'a') < 26u) * 32);
	upper[i] = '\0';
	size_t len = SPW_MIN(c->argv[1].len, 128);
	const char *z = memchr(c->argv[1].ptr, '\0', len);
	if (z)
		len = (size_t)(z - c->argv[1].ptr);
	reply_errorf(c, "ERR unknown subcommand '%.*s'. Try %s HELP.", (int)len, c->argv[1].ptr, upper);
}

static void keys_ahead_load(keys_ahead *a, int i)
{
	hlog_key *k = &a->ks[i % KEYS_AHEAD];
	key_from_arg(k, &a->c->argv[a->first + i * a->step]);
	hlog_bucket_prefetch(a->c->w->sess, k);
}

void keys_ahead_init(keys_ahead *a, client *c, int first, int step, int n)
{
	a->c = c;
	a->first = first;
	a->step = step;
	a->n = n;
	a->next = 0;
	for (int i = 0; i < n && i < KEYS_AHEAD; i++)
		keys_ahead_load(a, i);
}

void keys_ahead_next(keys_ahead *a, hlog_key *k)
{
	int i = a->next++;
	*k = a->ks[i % KEYS_AHEAD];
	if (i + KEYS_AHEAD < a->n)
		keys_ahead_load(a, i + KEYS_AHEAD);
}

int command_keys_prefetch(client *c, int first, int last, int step)
{
	int rc = 0;
	hlog_key k;
	if (!c->w->tier)
		return 0;
	if (last < 0)
		last = c->argc + last;
	/* Every key, even after one is pending: their reads go out together in the next poll. */
	keys_ahead a;
	int n = (last - first) / step + 1;
	keys_ahead_init(&a, c, first, step, n);
	for (int i = 0; i < n; i++) {
		keys_ahead_next(&a, &k);
		int r = hlog_prefetch(c->w->sess, &k);
		if (r < 0)
			return r;
		if (r == HLOG_PENDING)
			rc = HLOG_PENDING;
	}
	return rc;
}

void command_dispatch(client *c)
{
	worker *w = c->w;
	worker_stats *st = &w->stats;
	const spw_command *cmd = command_lookup(c->argv[0].ptr, c->argv[0].len);
	resp_chunk *mark = c->out.tail;
	uint32_t mark_len = mark ? mark->len : 0;
	size_t mark_bytes = c->out.bytes;

	if (SPW_UNLIKELY(!cmd)) {
		c->cmd = NULL;
		reply_unknown_command(c);
		goto rejected;
	}
	if (SPW_UNLIKELY(cmd->subcommands != NULL) && c->argc >= 2) {
		const spw_command *sub = command_sub_lookup(cmd, c->argv[1].ptr, c->argv[1].len);
		if (!sub) {
			c->cmd = cmd;
			reply_unknown_subcommand(c, cmd);
			st->cmd_rejected[cmd->index]++;
			goto rejected;
		}
		cmd = sub;
	}
	c->cmd = cmd;
	if (SPW_UNLIKELY(!command_arity_ok(cmd, c->argc))) {
		reply_err_arity(c);
		st->cmd_rejected[cmd->index]++;
		goto rejected;
	}
	/* Redis's processCommand: while the dataset loads, only "loading" commands run (persist.c). */
	if (SPW_UNLIKELY(c->w->loading) && !(cmd->flags & CMD_LOADING)) {
		reply_error(c, "LOADING Redis is loading the dataset in memory");
		st->cmd_rejected[cmd->index]++;
		goto rejected;
	}
	/* Redis's OOM gate: a budget is reached (compact.c: disk; memory), writes that grow refuse. */
	if (SPW_UNLIKELY(atomic_load_explicit(&g_srv.deny_oom, memory_order_relaxed) != 0) &&
	    (cmd->flags & CMD_DENYOOM)) {
		reply_error(c, (atomic_load(&g_srv.deny_oom) & SPW_OOM_MEMORY)
		               ? "OOM command not allowed when used memory > 'maxmemory'."
		               : "OOM command not allowed when used disk > 'disk-max'.");
		st->cmd_rejected[cmd->index]++;
		goto rejected;
	}

	uint64_t errors = st->errors, hits = st->keyspace_hits, misses = st->keyspace_misses;
	c->last_cmd = cmd;   /* before the call, so CLIENT LIST shows cmd=client|list as Redis */
	cmd->fn(c);
	uint64_t now = server_ticks();
	int idx = cmd->index;
	if (SPW_UNLIKELY(c->flags & CLIENT_PARKED)) {
		/* Note 6: this attempt leaves no trace; the request runs again. */
		client_reply_rollback(c, mark, mark_len, mark_bytes);
		st->errors = errors;
		st->keyspace_hits = hits;
		st->keyspace_misses = misses;
		if (SPW_LIKELY(now > w->cmd_clock))
			st->cmd_ticks[idx] += now - w->cmd_clock;
		w->cmd_clock = now;
		return;
	}
	st->commands++;
	st->cmd_calls[idx]++;
	if (SPW_LIKELY(now > w->cmd_clock))
		st->cmd_ticks[idx] += now - w->cmd_clock;
	w->cmd_clock = now;
	if (SPW_UNLIKELY(st->errors != errors))
		st->cmd_failed[idx]++;
	if (SPW_UNLIKELY(c->flags & CLIENT_REPLY_MODES))
		client_reply_mode_end(c, mark, mark_len, mark_bytes);
	return;

rejected:
	w->cmd_clock = server_ticks();
	if (cmd)
		c->last_cmd = cmd;
	if (SPW_UNLIKELY(c->flags & CLIENT_REPLY_MODES))
		client_reply_mode_end(c, mark, mark_len, mark_bytes);
}
