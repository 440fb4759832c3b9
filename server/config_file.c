/*
 * config_file.c - how options arrive and leave as text: the config file (Redis's syntax), the
 * command line (Garnet's and Redis's flags), start-up's checks, and CONFIG REWRITE, which writes the
 * file back. The table and the values are config.c's (its notes 2, 4, 8 and 9 are this file's rules:
 * precedence, strict values, REWRITE, save at start-up).
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
int config_line_split(const char *line, char *out, char **words, int maxwords)
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
	const spw_option *o = config_option_find(words[0], strlen(words[0]));
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
	if (config_option_parse(o, val, k, &g_cfg, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "bad value for '%s' '%.200s': %s", words[0], val, why);
		return -EINVAL;
	}
	config_given[o - config_options] = true;
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
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		const spw_option *o = &config_options[i];
		const char *type = "";
		switch (o->type) {
		case OPT_BOOL: type = "yes|no"; break;
		case OPT_INT: type = "<int>"; break;
		case OPT_SIZE: type = (o->flags & OPT_INTEGER) ? "<int>" : "<size>"; break;
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
	return config_parse_bool(s, strlen(s), &b) == 0;
}

/* Checks that need several config_options together; messages name the flag to change. */
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
		        "localmemory or posix)\n", config_option_find("device-type", 11)->names[g_cfg.device_type]);
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
	const spw_option *o = config_option_find(name, strlen(name));
	return o && config_given[o - config_options];
}

void config_option_sized(const char *name)
{
	const spw_option *o = config_option_find(name, strlen(name));
	if (o)
		config_sized[o - config_options] = true;
}

int config_load(int argc, char **argv)
{
	config_defaults();
	memset(config_given, 0, sizeof(config_given));
	memset(config_sized, 0, sizeof(config_sized));
	config_reading_startup = true;
	config_startup_save_seen = false;
	int rc = config_load_args(argc, argv);
	config_reading_startup = false;
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
			fprintf(stderr, "spillway: unexpected argument '%s' (config_options are --name value)\n", arg);
			return -EINVAL;
		}
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		const spw_option *o = config_option_find(name, nlen);
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
		if (o->flags & OPT_CLI_ONLY && !strcmp(o->name, "config"))
			continue;   /* read above; the other start-up flags (--import-rdb) are set here */
		if (config_option_parse(o, val, strlen(val), &g_cfg, why, sizeof(why)) < 0) {
			fprintf(stderr, "spillway: bad value for --%.*s '%s': %s\n", (int)nlen, name, val, why);
			return -EINVAL;
		}
		config_given[o - config_options] = true;
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
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		const char *why;
		if (config_options[i].apply)
			(void)config_options[i].apply(&why);   /* nothing runs yet that could refuse */
	}
	return 0;
}

/* ---------------- CONFIG REWRITE ---------------- */

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
	const char *v = config_option_format(o, buf, cap);
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
	if (config_option_parse(o, val, k, &tmp, why, sizeof(why)) < 0)
		return false;
	if (o->type == OPT_STRING)
		return strcmp((char *)&tmp + o->off, (char *)&g_cfg + o->off) == 0;
	return memcmp((char *)&tmp + o->off, (char *)&g_cfg + o->off, o->size) == 0;
}

int config_rewrite(char *err, size_t errlen)
{
	char tmp[1100 + 16], line[4096], words_buf[4097], buf[640];
	char *words[64];
	bool seen[CONFIG_NOPTIONS];
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
		const spw_option *o = n > 0 ? config_option_find(words[0], strlen(words[0])) : NULL;
		if (!o || (o->flags & OPT_CLI_ONLY)) {
			fputs(line, out);
			if (line[strlen(line) - 1] != '\n')
				fputc('\n', out);
			continue;
		}
		int idx = (int)(o - config_options);
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
	for (int i = 0; i < CONFIG_NOPTIONS; i++) {
		const spw_option *o = &config_options[i];
		char def[64];
		if (seen[i] || o->type == OPT_CONST || (o->flags & OPT_CLI_ONLY))
			continue;
		/* Compare with the default in the same canonical form. */
		spw_config d;
		memset(&d, 0, sizeof(d));
		if (config_option_parse(o, o->def, strlen(o->def), &d, def, sizeof(def)) == 0 &&
		    !memcmp((char *)&d + o->off, (char *)&g_cfg + o->off, o->size))
			continue;
		if (!strcmp(o->name, "threads") || !strcmp(o->name, "dir") || config_sized[i])
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
