/*
 * test_config.c - the options table: command-line flags, the config file, CONFIG SET/GET/REWRITE.
 *
 * config_load() prints its complaints on stderr; the tests capture stderr into a temporary file
 * to check that a bad value names the flag to fix.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "server/server_int.h"
#include "server/aof.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Run config_load with stderr captured into out. */
static int load_capture(int argc, char **argv, char *out, size_t cap)
{
	char path[] = "/tmp/spw_test_stderr_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	int rc = config_load(argc, argv);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ssize_t n = pread(fd, out, cap - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return rc;
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

static char *read_file(const char *path)
{
	static char buf[8192];
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

static void test_defaults_are_the_documented_ones(void **state)
{
	(void)state;
	char *argv[] = { "spillway-server" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_int_equal(g_cfg.port, 6379);
	assert_string_equal(g_cfg.bind, "127.0.0.1");
	assert_true(g_cfg.threads >= 1);   /* 0 = one per online core, resolved at load */
	assert_int_equal(g_cfg.threads, (int)sysconf(_SC_NPROCESSORS_ONLN));
	assert_int_equal(g_cfg.maxclients, 10000);
	assert_int_equal(g_cfg.loglevel, SPW_LOG_NOTICE);
	assert_int_equal(g_cfg.memory_bytes, 16ULL << 30);
	assert_int_equal(g_cfg.page_bytes, 32ULL << 20);
	assert_int_equal(g_cfg.index_bytes, 16ULL << 20);
	assert_int_equal(g_cfg.index_max_size, 0);
	assert_int_equal(g_cfg.index_resize_threshold, 25);
	assert_int_equal(g_cfg.index_resize_freq, 1);
	assert_int_equal(g_cfg.mutable_percent, 90);
	assert_int_equal(g_cfg.proto_max_bulk_len, 512ULL << 20);
	assert_int_equal(g_cfg.querybuf_limit, 1ULL << 30);
	assert_int_equal(g_cfg.output_pause_bytes, 64ULL << 20);
	assert_int_equal(g_cfg.databases, 1);
	assert_int_equal(g_cfg.storage_tier, false);
	assert_int_equal(g_cfg.segment_bytes, 1ULL << 30);
	assert_int_equal(g_cfg.device_type, SPW_DEVICE_TYPE_DEFAULT);
	assert_int_equal(g_cfg.device_io_backend, SPW_DEVICE_IO_DEFAULT);
	assert_int_equal(g_cfg.device_completion_threads, 4);
	assert_int_equal(g_cfg.initial_io_record_size, 128);
	assert_true(g_cfg.dir[0] == '/');   /* "." reported as an absolute path */
}

static void test_flags_take_both_forms_and_size_suffixes(void **state)
{
	(void)state;
	char *argv[] = { "s", "--port", "7000", "--memory=1g", "--page", "4m", "--index=64k",
	                 "--threads", "3", "--mutable-percent", "50", "--proto-max-bulk-len", "2mb",
	                 "--loglevel", "WARNING", "--bind", "127.0.0.1 ::1" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_int_equal(g_cfg.port, 7000);
	assert_int_equal(g_cfg.memory_bytes, 1ULL << 30);
	assert_int_equal(g_cfg.page_bytes, 4ULL << 20);
	assert_int_equal(g_cfg.index_bytes, 64ULL << 10);
	assert_int_equal(g_cfg.threads, 3);
	assert_int_equal(g_cfg.mutable_percent, 50);
	assert_int_equal(g_cfg.proto_max_bulk_len, 2ULL << 20);
	assert_int_equal(g_cfg.loglevel, SPW_LOG_WARNING);
	assert_int_equal(spw_log_level, SPW_LOG_WARNING);
	assert_string_equal(g_cfg.bind, "127.0.0.1 ::1");
	config_defaults();
	assert_int_equal(spw_log_level, SPW_LOG_NOTICE);
}

static void test_garnet_storage_flags_are_accepted_and_stored(void **state)
{
	(void)state;
	char *argv[] = { "s", "--storage-tier", "--logdir", "/tmp", "--segment", "256m",
	                 "--device-type", "Native", "--device-io-backend", "Uring",
	                 "--device-throttle-limit", "512", "--device-completion-threads", "8",
	                 "--initial-io-record-size", "8k" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_true(g_cfg.storage_tier);
	assert_string_equal(g_cfg.logdir, "/tmp");
	assert_int_equal(g_cfg.segment_bytes, 256ULL << 20);
	assert_int_equal(g_cfg.device_type, SPW_DEVICE_TYPE_NATIVE);
	assert_int_equal(g_cfg.device_io_backend, SPW_DEVICE_IO_URING);
	assert_int_equal(g_cfg.device_throttle_limit, 512);
	assert_int_equal(g_cfg.device_completion_threads, 8);
	assert_int_equal(g_cfg.initial_io_record_size, 8192);

	char *argv2[] = { "s", "--storage-tier", "no", "--port", "1" };
	assert_int_equal(config_load(ARGC(argv2), argv2), 0);
	assert_false(g_cfg.storage_tier);
	assert_int_equal(g_cfg.port, 1);
}

static void expect_rejected(char **argv, int argc, const char *needle)
{
	char err[1024];
	assert_int_equal(load_capture(argc, argv, err, sizeof(err)), -EINVAL);
	if (!strstr(err, needle))
		fail_msg("message '%s' does not contain '%s'", err, needle);
}

static void test_bad_values_stop_startup_naming_the_flag(void **state)
{
	(void)state;
	char *a1[] = { "s", "--port", "abc" };
	expect_rejected(a1, ARGC(a1), "--port");
	char *a2[] = { "s", "--port", "70000" };
	expect_rejected(a2, ARGC(a2), "between 0 and 65535");
	char *a3[] = { "s", "--memory", "lots" };
	expect_rejected(a3, ARGC(a3), "--memory");
	char *a4[] = { "s", "--loglevel", "chatty" };
	expect_rejected(a4, ARGC(a4), "debug, verbose, notice, warning");
	char *a5[] = { "s", "--no-such-flag", "1" };
	expect_rejected(a5, ARGC(a5), "--no-such-flag");
	char *a6[] = { "s", "--port" };
	expect_rejected(a6, ARGC(a6), "--port needs a value");
	char *a7[] = { "s", "stray", "--port", "1" };   /* a leading non-flag is a config file */
	expect_rejected(a7, ARGC(a7), "stray");
	char *a8[] = { "s", "--port", "1", "stray" };
	expect_rejected(a8, ARGC(a8), "unexpected argument 'stray'");
	char *a9[] = { "s", "--maxclients", "+5" };   /* strict integers, as Redis */
	expect_rejected(a9, ARGC(a9), "--maxclients");
	char *a10[] = { "s", "--device-type", "floppy" };
	expect_rejected(a10, ARGC(a10), "--device-type");
	char *a11[] = { "s", "--appendfsync", "sometimes" };
	expect_rejected(a11, ARGC(a11), "everysec, always, no");
	char *a12[] = { "s", "--save", "900" };
	expect_rejected(a12, ARGC(a12), "Invalid save parameters");
}

static void test_store_geometry_is_checked_at_startup(void **state)
{
	(void)state;
	char *a1[] = { "s", "--page", "3m" };
	expect_rejected(a1, ARGC(a1), "--page");
	char *a2[] = { "s", "--memory", "64m", "--page", "64m" };
	expect_rejected(a2, ARGC(a2), "--memory");
	char *a3[] = { "s", "--memory", "128m", "--page", "64m" };
	assert_int_equal(config_load(ARGC(a3), a3), 0);
}

static void test_help_and_version_print_and_stop(void **state)
{
	(void)state;
	char out[64];
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	int devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, STDOUT_FILENO);
	char *a1[] = { "s", "--port", "1", "--help" };
	int rc1 = load_capture(ARGC(a1), a1, out, sizeof(out));
	char *a2[] = { "s", "--version" };
	int rc2 = load_capture(ARGC(a2), a2, out, sizeof(out));
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(devnull);
	assert_int_equal(rc1, 1);
	assert_int_equal(rc2, 1);
}

static void test_config_file_is_read_before_the_command_line(void **state)
{
	(void)state;
	char path[] = "/tmp/spw_test_conf_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path,
	           "# a comment\n"
	           "\n"
	           "port 7001\n"
	           "   maxclients 77   \n"
	           "logfile \"/tmp/with space.log\"\n"
	           "bind 127.0.0.1 ::1\n"
	           "save \"\"\n"
	           "memory 256m\n"
	           "page 1m\n"
	           "loglevel 'verbose'\n");
	char *argv[] = { "s", "--config", path, "--port", "7002" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_int_equal(g_cfg.port, 7002);   /* the command line wins */
	assert_int_equal(g_cfg.maxclients, 77);
	assert_string_equal(g_cfg.logfile, "/tmp/with space.log");
	assert_string_equal(g_cfg.bind, "127.0.0.1 ::1");
	assert_int_equal(g_cfg.memory_bytes, 256ULL << 20);
	assert_int_equal(g_cfg.loglevel, SPW_LOG_VERBOSE);
	assert_string_equal(g_cfg.config_file, path);

	/* redis-server's form: the file as the first argument. */
	char *argv2[] = { "s", path };
	assert_int_equal(config_load(ARGC(argv2), argv2), 0);
	assert_int_equal(g_cfg.port, 7001);
	unlink(path);
	config_defaults();
}

static void test_config_file_errors_name_the_file_and_line(void **state)
{
	(void)state;
	char path[] = "/tmp/spw_test_conf_XXXXXX";
	char err[1024];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, "port 7001\nmaxclients many\n");
	char *argv[] = { "s", "--config", path };
	assert_int_equal(load_capture(ARGC(argv), argv, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":2:"));
	assert_non_null(strstr(err, "maxclients"));

	write_file(path, "port 7001\nbogus-option 1\n");
	assert_int_equal(load_capture(ARGC(argv), argv, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bogus-option"));

	write_file(path, "logfile \"unterminated\n");
	assert_int_equal(load_capture(ARGC(argv), argv, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "quotes"));

	write_file(path, "port 1 2\n");
	assert_int_equal(load_capture(ARGC(argv), argv, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "port"));
	unlink(path);

	char *argv2[] = { "s", "--config", "/nonexistent/spillway.conf" };
	assert_int_equal(load_capture(ARGC(argv2), argv2, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "/nonexistent/spillway.conf"));
}

static int set1(const char *name, const char *val, char *err, size_t cap)
{
	return config_set(name, strlen(name), val, strlen(val), err, cap);
}

static void test_config_set_answers_redis_error_texts(void **state)
{
	(void)state;
	char err[512];
	config_defaults();
	assert_int_equal(set1("foo", "bar", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR Unknown option or number of arguments for CONFIG SET - 'foo'");
	assert_int_equal(set1("port", "7000", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'port') - "
	                         "can't set immutable config");
	assert_int_equal(set1("maxclients", "abc", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
	                         "argument couldn't be parsed into an integer");
	assert_int_equal(set1("timeout", "-1", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'timeout') - "
	                         "argument must be between 0 and 2147483647 inclusive");
	assert_int_equal(set1("loglevel", "foo", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'loglevel') - "
	                         "argument(s) must be one of the following: debug, verbose, notice, warning");
	assert_int_equal(set1("proto-max-bulk-len", "abc", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - "
	                         "argument must be a memory value");
	assert_int_equal(set1("proto-max-bulk-len", "1k", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - "
	                         "argument must be between 1048576 and 9223372036854775807 inclusive");

	uint32_t v0 = atomic_load(&g_cfg_version);
	assert_int_equal(set1("MaxClients", "5000", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.maxclients, 5000);
	assert_true(atomic_load(&g_cfg_version) != v0);
	assert_int_equal(set1("proto-max-bulk-len", "10mb", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.proto_max_bulk_len, 10ULL << 20);
	assert_int_equal(set1("loglevel", "debug", err, sizeof(err)), 0);
	assert_int_equal(spw_log_level, SPW_LOG_DEBUG);
	assert_int_equal(set1("maxmemory", "100mb", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.maxmemory, 100ULL << 20);
	/* client-output-buffer-limit: Redis 7.0's grammar, errors and CONFIG GET form */
	assert_int_equal(set1("client-output-buffer-limit", "normal 1mb 512kb 10", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.obl[SPW_OBL_NORMAL].hard, 1ULL << 20);
	assert_int_equal(g_cfg.obl[SPW_OBL_NORMAL].soft, 512ULL << 10);
	assert_int_equal(g_cfg.obl[SPW_OBL_NORMAL].soft_seconds, 10);
	assert_int_equal(g_cfg.obl[SPW_OBL_REPLICA].hard, 256ULL << 20);   /* untouched */
	assert_int_equal(set1("client-output-buffer-limit", "replica 1mb 1mb 1", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.obl[SPW_OBL_REPLICA].soft_seconds, 1);
	assert_int_equal(set1("client-output-buffer-limit", "", err, sizeof(err)), 0);
	assert_int_equal(set1("client-output-buffer-limit", "wrong number", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'client-output-buffer-limit') - Wrong number of arguments in buffer "
	                         "limit configuration.");
	assert_int_equal(set1("client-output-buffer-limit", "master 10mb 10mb 60", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'client-output-buffer-limit') - Invalid client class specified in "
	                         "buffer limit configuration.");
	assert_int_equal(set1("client-output-buffer-limit", "normal 10mb 10mb -1", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'client-output-buffer-limit') - Error in hard, soft or soft_seconds "
	                         "setting in buffer limit configuration.");
	assert_int_equal(set1("client-output-buffer-limit", "normal 10mbs 0 0", err, sizeof(err)), -EINVAL);
	assert_int_equal(g_cfg.obl[SPW_OBL_NORMAL].hard, 1ULL << 20);   /* all or nothing */
	config_defaults();
}

static void test_config_set_is_all_or_nothing(void **state)
{
	(void)state;
	char err[512];
	config_defaults();
	resp_slice pairs[] = { { "timeout", 7 }, { "5", 1 }, { "maxclients", 10 }, { "1x", 2 } };
	assert_int_equal(config_set_pairs(pairs, 2, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
	                         "argument couldn't be parsed into an integer");
	assert_int_equal(g_cfg.timeout, 0);   /* the good pair was not applied either */

	resp_slice dup[] = { { "timeout", 7 }, { "5", 1 }, { "TIMEOUT", 7 }, { "6", 1 } };
	assert_int_equal(config_set_pairs(dup, 2, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'TIMEOUT') - "
	                         "duplicate parameter");

	resp_slice ok[] = { { "timeout", 7 }, { "5", 1 }, { "maxclients", 10 }, { "10", 2 } };
	assert_int_equal(config_set_pairs(ok, 2, err, sizeof(err)), 0);
	assert_int_equal(g_cfg.timeout, 5);
	assert_int_equal(g_cfg.maxclients, 10);
	config_defaults();
}

typedef struct seen {
	char names[64][64];
	char values[64][64];
	int n;
} seen;

static void collect(void *ctx, const char *name, const char *value)
{
	seen *s = ctx;
	assert_true(s->n < 64);
	snprintf(s->names[s->n], 64, "%s", name);
	snprintf(s->values[s->n], 64, "%s", value);
	s->n++;
}

static int seen_find(const seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name))
			return i;
	return -1;
}

static void test_config_get_matches_globs_without_case(void **state)
{
	(void)state;
	seen s = { .n = 0 };
	config_defaults();
	config_get_matching("MAX*", 4, collect, &s);
	assert_int_equal(s.n, 3);   /* maxclients, maxmemory-policy, maxmemory */
	assert_true(seen_find(&s, "maxclients") >= 0);
	assert_string_equal(s.values[seen_find(&s, "maxmemory")], "0");

	memset(&s, 0, sizeof(s));
	config_get_matching("*", 1, collect, &s);
	assert_true(seen_find(&s, "port") >= 0);
	assert_true(seen_find(&s, "io-threads") >= 0);   /* aliases are listed too, as Redis */
	assert_int_equal(seen_find(&s, "config"), -1);   /* --config is a start-up flag only */
	assert_string_equal(s.values[seen_find(&s, "save")], "3600 1 300 100 60 10000");
	assert_string_equal(s.values[seen_find(&s, "appendonly")], "no");
	assert_string_equal(s.values[seen_find(&s, "appendfsync")], "everysec");
	assert_string_equal(s.values[seen_find(&s, "dbfilename")], "dump.rdb");
	assert_string_equal(s.values[seen_find(&s, "loglevel")], "notice");
	assert_string_equal(s.values[seen_find(&s, "storage-tier")], "no");
	assert_string_equal(s.values[seen_find(&s, "memory")], "17179869184");

	memset(&s, 0, sizeof(s));
	config_get_matching("p?rt", 4, collect, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.values[0], "6379");

	memset(&s, 0, sizeof(s));
	config_get_matching("[mp]age", 7, collect, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "page");

	/* No glob characters: answered under the name as typed, as Redis 7. */
	memset(&s, 0, sizeof(s));
	config_get_matching("MAXCLIENTS", 10, collect, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "MAXCLIENTS");
	assert_string_equal(s.values[0], "10000");

	memset(&s, 0, sizeof(s));
	config_get_matching("nosuch", 6, collect, &s);
	assert_int_equal(s.n, 0);
}

/* Durability options (persist.c): Redis's names and ours are one option; save's rules parse and
 * print as Redis 7's, accumulate over the start-up lines and are replaced by CONFIG SET. */
/* Issue 13: Redis 7.0's collection encoding parameters, their defaults, bounds, units and aliases
 * (each answered from redis-server 7.0.15), read by the data types from g_cfg. */
static void test_collection_encoding_options_take_redis_defaults_bounds_and_aliases(void **state)
{
	(void)state;
	char err[512];
	config_defaults();
	assert_int_equal(g_cfg.hash_max_listpack_entries, 512);   /* redis-server 7.0.15's, not redis.conf's */
	assert_int_equal(g_cfg.hash_max_listpack_value, 64);
	assert_int_equal(g_cfg.set_max_intset_entries, 512);
	assert_int_equal(g_cfg.zset_max_listpack_entries, 128);
	assert_int_equal(g_cfg.zset_max_listpack_value, 64);
	assert_int_equal(g_cfg.list_max_listpack_size, -2);
	assert_int_equal(g_cfg.list_compress_depth, 0);

	/* The old ziplist names are aliases of the same field. */
	assert_int_equal(set1("hash-max-ziplist-entries", "5", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.hash_max_listpack_entries, 5);
	assert_int_equal(set1("zset-max-ziplist-entries", "6", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.zset_max_listpack_entries, 6);
	assert_int_equal(set1("list-max-ziplist-size", "-5", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.list_max_listpack_size, -5);
	/* The value limits are Redis memory values: k = 1000, kb = 1024, "" = 0. */
	assert_int_equal(set1("hash-max-listpack-value", "1k", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.hash_max_listpack_value, 1000);
	assert_int_equal(set1("zset-max-ziplist-value", "1KB", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.zset_max_listpack_value, 1024);
	assert_int_equal(set1("hash-max-listpack-value", "", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.hash_max_listpack_value, 0);
	assert_int_equal(set1("hash-max-listpack-value", "1 k", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'hash-max-listpack-value') - argument must be a memory value");
	assert_int_equal(set1("hash-max-listpack-value", "99999999999999999999k", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'hash-max-listpack-value') - argument must be between 0 and "
	                         "9223372036854775807 inclusive");
	/* The entry limits are plain integers. */
	assert_int_equal(set1("set-max-intset-entries", "1k", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'set-max-intset-entries') - argument couldn't be parsed into an integer");
	assert_int_equal(set1("hash-max-listpack-entries", "-1", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'hash-max-listpack-entries') - argument must be between 0 and "
	                         "9223372036854775807 inclusive");
	assert_int_equal(set1("set-max-intset-entries", "99999999999", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.set_max_intset_entries, 99999999999ULL);
	assert_int_equal(set1("list-compress-depth", "-1", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'list-compress-depth') - argument must be between 0 and 2147483647 inclusive");
	assert_int_equal(set1("list-max-listpack-size", "-2147483649", err, sizeof(err)), -EINVAL);

	/* A glob answers both names; a plain name is answered as typed. */
	seen s = { .n = 0 };
	config_get_matching("hash-max-*", 10, collect, &s);
	assert_int_equal(s.n, 4);
	assert_string_equal(s.values[seen_find(&s, "hash-max-ziplist-entries")], "5");
	assert_string_equal(s.values[seen_find(&s, "hash-max-listpack-entries")], "5");
	memset(&s, 0, sizeof(s));
	config_get_matching("LIST-MAX-ZIPLIST-SIZE", 21, collect, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.names[0], "LIST-MAX-ZIPLIST-SIZE");
	assert_string_equal(s.values[0], "-5");

	/* And on the command line, under either name. */
	char *argv[] = { "spillway", "--hash-max-ziplist-value", "100", "--list-compress-depth", "2", NULL };
	char out[1024];
	assert_int_equal(load_capture(ARGC(argv) - 1, argv, out, sizeof(out)), 0);
	assert_int_equal(g_cfg.hash_max_listpack_value, 100);
	assert_int_equal(g_cfg.list_compress_depth, 2);
	config_defaults();
}

/* Redis quotes a value error under its config's own name (or alias), not the argument's case, and
 * the first wrong name of a call is the error; a name and its alias are not duplicates. */
static void test_config_set_errors_quote_names_as_redis(void **state)
{
	(void)state;
	char err[512];
	config_defaults();
	assert_int_equal(set1("MAXCLIENTS", "abc", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
	                         "argument couldn't be parsed into an integer");
	assert_int_equal(set1("HASH-MAX-ZIPLIST-ENTRIES", "x", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument "
	                         "'hash-max-ziplist-entries') - argument couldn't be parsed into an integer");

	resp_slice first[] = { { "maxclients", 10 }, { "10", 2 }, { "maxclients", 10 }, { "11", 2 },
	                       { "nosuch", 6 }, { "1", 1 } };
	assert_int_equal(config_set_pairs(first, 3, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
	                         "duplicate parameter");
	resp_slice unknown[] = { { "nosuch", 6 }, { "1", 1 }, { "port", 4 }, { "1", 1 } };
	assert_int_equal(config_set_pairs(unknown, 2, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'");

	resp_slice alias[] = { { "hash-max-ziplist-entries", 24 }, { "5", 1 },
	                       { "hash-max-listpack-entries", 25 }, { "6", 1 } };
	assert_int_equal(config_set_pairs(alias, 2, err, sizeof(err)), 0);
	assert_int_equal(g_cfg.hash_max_listpack_entries, 6);   /* in order: the last one wins */
	config_defaults();
}

static void test_durability_options_take_redis_and_garnet_names(void **state)
{
	(void)state;
	char err[512];
	seen s = { .n = 0 };
	config_defaults();
	assert_false(g_cfg.aof);
	assert_int_equal(g_cfg.aof_fsync, AOF_FSYNC_EVERYSEC);
	assert_int_equal(g_cfg.checkpoint_interval, 300);
	assert_int_equal(g_cfg.save.n, 3);
	assert_int_equal(g_cfg.recover_checkpoint, SPW_RECOVER_NEWEST);

	char *a1[] = { "s", "--appendonly", "yes", "--appendfsync", "always", "--save", "900", "1",
	               "300", "10", "--recover-checkpoint", "previous" };
	assert_int_equal(config_load(ARGC(a1), a1), 0);
	assert_true(g_cfg.aof);
	assert_int_equal(g_cfg.aof_fsync, AOF_FSYNC_ALWAYS);
	assert_int_equal(g_cfg.recover_checkpoint, SPW_RECOVER_PREVIOUS);
	config_get_matching("save", 4, collect, &s);
	config_get_matching("aof-fsync", 9, collect, &s);
	assert_string_equal(s.values[seen_find(&s, "save")], "900 1 300 10");
	assert_string_equal(s.values[seen_find(&s, "aof-fsync")], "always");

	char *a2[] = { "s", "--aof", "no", "--save", "", "--aof-fsync", "no" };
	assert_int_equal(config_load(ARGC(a2), a2), 0);
	assert_false(g_cfg.aof);
	assert_int_equal(g_cfg.save.n, 0);
	assert_int_equal(g_cfg.aof_fsync, AOF_FSYNC_NO);

	/* A config file's save lines add up, as Redis's; the first replaces the defaults. */
	char path[] = "/tmp/spw_test_conf_XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, "save 900 1\nsave 60 10000\ndbfilename x.rdb\n");
	char *a3[] = { "s", path };
	assert_int_equal(config_load(ARGC(a3), a3), 0);
	assert_int_equal(g_cfg.save.n, 2);
	assert_int_equal(g_cfg.save.r[1].seconds, 60);
	assert_string_equal(g_cfg.dbfilename, "x.rdb");
	unlink(path);

	/* CONFIG SET: Redis 7.0's answers. */
	assert_int_equal(set1("save", "10 20", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.save.n, 1);
	assert_int_equal(set1("save", "900", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters");
	assert_int_equal(set1("save", "0 0", err, sizeof(err)), -EINVAL);
	assert_int_equal(set1("save", " 10  20 ", err, sizeof(err)), -EINVAL);
	assert_int_equal(set1("save", "", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.save.n, 0);
	assert_int_equal(set1("appendfsync", "bad", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'appendfsync') - "
	                         "argument(s) must be one of the following: everysec, always, no");
	assert_int_equal(set1("appendonly", "maybe", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'appendonly') - "
	                         "argument must be 'yes' or 'no'");
	assert_int_equal(set1("dbfilename", "y.rdb", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - "
	                         "can't set protected config");
	assert_int_equal(set1("appendfilename", "y.aof", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ERR CONFIG SET failed (possibly related to argument 'appendfilename') - "
	                         "can't set immutable config");
	assert_int_equal(set1("checkpoint-interval", "0", err, sizeof(err)), 0);
	assert_int_equal(g_cfg.checkpoint_interval, 0);
	config_defaults();
}

static void test_config_rewrite_needs_a_config_file(void **state)
{
	(void)state;
	char err[512];
	char *argv[] = { "s" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_true(config_rewrite(err, sizeof(err)) < 0);
	assert_string_equal(err, "ERR The server is running without a config file");
}

static void test_config_rewrite_keeps_comments_and_writes_current_values(void **state)
{
	(void)state;
	char path[] = "/tmp/spw_test_conf_XXXXXX";
	char err[512];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, "# keep me\nmaxclients 50\nunknown-thing 1\nmaxclients 60\n");
	/* (unknown-thing would stop a load: name the file without reading it) */
	char *argv2[] = { "s", "--maxclients", "60" };
	assert_int_equal(config_load(ARGC(argv2), argv2), 0);
	snprintf(g_cfg.config_file, sizeof(g_cfg.config_file), "%s", path);
	assert_int_equal(set1("maxclients", "123", err, sizeof(err)), 0);
	assert_int_equal(set1("timeout", "9", err, sizeof(err)), 0);
	assert_int_equal(config_rewrite(err, sizeof(err)), 0);
	const char *text = read_file(path);
	assert_non_null(strstr(text, "# keep me\n"));
	assert_non_null(strstr(text, "maxclients 123\n"));
	assert_null(strstr(text, "maxclients 60"));   /* the later duplicate is dropped */
	assert_non_null(strstr(text, "unknown-thing 1\n"));
	assert_non_null(strstr(text, "timeout 9\n"));   /* changed from default: appended */
	assert_null(strstr(text, "\nport "));           /* defaults are not written */
	unlink(path);
	config_defaults();
}

/* The room held back for the index is what its doublings can reach, no more (memcap.c note 2). */
static void test_index_max_is_what_the_doublings_reach(void **state)
{
	(void)state;
	char *a1[] = { "s", "--index", "16m" };
	assert_int_equal(config_load(ARGC(a1), a1), 0);
	assert_int_equal(memcap_index_max(), 1ULL << 30);           /* 16m << 6 */
	config_defaults();
	char *a2[] = { "s", "--index", "100m", "--index-max-size", "1g" };
	assert_int_equal(config_load(ARGC(a2), a2), 0);
	assert_int_equal(memcap_index_max(), 1ULL << 30);           /* 64m (100m rounded down) << 4 */
	config_defaults();
	char *a3[] = { "s", "--index", "16m", "--index-max-size", "16g" };
	assert_int_equal(config_load(ARGC(a3), a3), 0);
	assert_int_equal(memcap_index_max(), 1ULL << 30);           /* no more than 6 doublings */
	config_defaults();
	char *a4[] = { "s", "--index", "16m", "--index-max-size", "8m" };
	assert_int_equal(config_load(ARGC(a4), a4), 0);
	assert_int_equal(memcap_index_max(), 16ULL << 20);          /* below --index: it never grows */
	config_defaults();
	/* a cap so large that the default start's doublings would not reach 1/16 of it */
	char *a5[] = { "s", "--maxmemory", "64g" };
	assert_int_equal(config_load(ARGC(a5), a5), 0);
	assert_int_equal(memcap_startup_check(), 0);
	assert_int_equal(g_cfg.index_bytes, 64ULL << 20);
	assert_int_equal(memcap_index_max(), 4ULL << 30);
	config_defaults();
	/* and never a start above a given --index-max-size */
	char *a6[] = { "s", "--maxmemory", "64g", "--index-max-size", "32m" };
	assert_int_equal(config_load(ARGC(a6), a6), 0);
	assert_int_equal(memcap_startup_check(), 0);
	assert_int_equal(g_cfg.index_bytes, 32ULL << 20);
	assert_int_equal(memcap_index_max(), 32ULL << 20);
	config_defaults();
}

static void test_maxmemory_sizes_what_was_left_out_and_rewrite_keeps_it_out(void **state)
{
	(void)state;
	char path[] = "/tmp/spw_test_conf_XXXXXX";
	char err[512];
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	/* Redis's config files give one class a line. */
	write_file(path, "client-output-buffer-limit normal 0 0 0\nclient-output-buffer-limit pubsub 1mb 1mb 1\n");
	char *argv[] = { "s", "--config", path, "--maxmemory", "64mb" };
	assert_int_equal(config_load(ARGC(argv), argv), 0);
	assert_int_equal(memcap_startup_check(), 0);
	assert_int_equal(g_cfg.index_bytes, 4ULL << 20);    /* 1/16 of the cap */
	assert_int_equal(memcap_index_max(), 4ULL << 20);   /* and it may not grow past it */
	assert_int_equal(g_cfg.page_bytes, 4ULL << 20);     /* halved until the log holds 8 pages */
	assert_int_equal(g_cfg.memory_bytes, 52ULL << 20);  /* 64 - 4 - 8 (the reserve) */
	assert_int_equal(g_cfg.obl[SPW_OBL_PUBSUB].soft_seconds, 1);
	assert_int_equal(config_rewrite(err, sizeof(err)), 0);
	const char *text = read_file(path);
	assert_non_null(strstr(text, "client-output-buffer-limit normal 0 0 0 slave 268435456 67108864 60 "
	                             "pubsub 1048576 1048576 1\n"));
	assert_non_null(strstr(text, "maxmemory 67108864\n"));
	assert_null(strstr(text, "\nmemory "));   /* sized: the next start sizes it again */
	assert_null(strstr(text, "\nindex "));
	assert_null(strstr(text, "\npage "));
	unlink(path);

	char *given[] = { "s", "--maxmemory", "64mb", "--memory", "60mb", "--page", "1mb" };
	assert_int_equal(config_load(ARGC(given), given), 0);
	assert_int_equal(memcap_startup_check(), -1);   /* 60 + 4 + 8 > 64 */
	char *fits[] = { "s", "--maxmemory", "64mb", "--memory", "48mb", "--page", "1mb" };
	assert_int_equal(config_load(ARGC(fits), fits), 0);
	assert_int_equal(memcap_startup_check(), 0);
	assert_int_equal(g_cfg.memory_bytes, 48ULL << 20);
	config_defaults();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_are_the_documented_ones),
		cmocka_unit_test(test_flags_take_both_forms_and_size_suffixes),
		cmocka_unit_test(test_garnet_storage_flags_are_accepted_and_stored),
		cmocka_unit_test(test_bad_values_stop_startup_naming_the_flag),
		cmocka_unit_test(test_store_geometry_is_checked_at_startup),
		cmocka_unit_test(test_help_and_version_print_and_stop),
		cmocka_unit_test(test_config_file_is_read_before_the_command_line),
		cmocka_unit_test(test_config_file_errors_name_the_file_and_line),
		cmocka_unit_test(test_config_set_answers_redis_error_texts),
		cmocka_unit_test(test_config_set_is_all_or_nothing),
		cmocka_unit_test(test_config_get_matches_globs_without_case),
		cmocka_unit_test(test_collection_encoding_options_take_redis_defaults_bounds_and_aliases),
		cmocka_unit_test(test_config_set_errors_quote_names_as_redis),
		cmocka_unit_test(test_durability_options_take_redis_and_garnet_names),
		cmocka_unit_test(test_config_rewrite_needs_a_config_file),
		cmocka_unit_test(test_config_rewrite_keeps_comments_and_writes_current_values),
		cmocka_unit_test(test_index_max_is_what_the_doublings_reach),
		cmocka_unit_test(test_maxmemory_sizes_what_was_left_out_and_rewrite_keeps_it_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
