/*
 * config_int.h - what config.c (the option table, values, CONFIG GET/SET) and config_file.c (the
 * config file, the command line, CONFIG REWRITE) share, private to server/. The design notes are
 * config.c's.
 */
#ifndef SPW_SERVER_CONFIG_INT_H
#define SPW_SERVER_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/server_int.h"

enum opt_type { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_STRING, OPT_ENUM, OPT_CONST, OPT_FAULT, OPT_SAVE,
                OPT_OBL };

#define OPT_MUTABLE  (1u << 0)   /* CONFIG SET may change it while the server runs */
#define OPT_CLI_ONLY (1u << 1)   /* a start-up flag only (--config): not in CONFIG GET */
#define OPT_TIER     (1u << 2)   /* takes effect with the storage tier */
#define OPT_MULTIARG (1u << 3)   /* config file: several words join with spaces (bind, save) */
#define OPT_FAULT_PREFIX (1u << 4) /* --device-type: a "fault:" prefix sets device_fault */
#define OPT_PROTECTED (1u << 5)  /* Redis's protected configs (dbfilename): CONFIG SET refuses */
#define OPT_INTEGER  (1u << 6)   /* OPT_SIZE taking a plain integer (Redis's size_t INTEGER_CONFIG) */
#define OPT_REDIS_UNITS (1u << 7) /* OPT_SIZE read as Redis's memtoull: k = 1000, kb = 1024 */

typedef struct spw_option {
	const char *name;
	const char *alias;           /* a second name, or NULL */
	uint8_t type;
	uint8_t flags;
	long long min, max;          /* OPT_INT / OPT_SIZE bounds, inclusive */
	const char *def;             /* default, as written in a config file */
	size_t off, size;            /* the field in g_cfg */
	const char *const *names;    /* OPT_ENUM: value = index; NULL-terminated */
	/* Run after a change (start-up and CONFIG SET): 0, or -1 with Redis's reason in *why, and
	 * CONFIG SET puts every option of the call back (config.c note 5). */
	int (*apply)(const char **why);
	const char *help;
} spw_option;

#define CONFIG_MAX_OPTIONS 128        /* room in config_given / config_sized */
#define CONFIG_NOPTIONS config_noptions

/* The table (config.c note 1), in its order. */
extern const spw_option config_options[];
extern const int config_noptions;
/* The options the last config_load read from the config file or the command line, and those
 * start-up sized from others (config_option_sized), by index in config_options. */
extern bool config_given[CONFIG_MAX_OPTIONS], config_sized[CONFIG_MAX_OPTIONS];
/* Start-up reads the config file and the command line as one (config.c note 9). */
extern bool config_reading_startup, config_startup_save_seen;

bool config_name_eq(const char *a, size_t alen, const char *lit);
const spw_option *config_option_find(const char *name, size_t len);
void *config_field_ptr(spw_config *cfg, const spw_option *o);
int config_parse_bool(const char *v, size_t n, bool *out);
/* Parse v (n bytes) for o into cfg; -EINVAL with Redis's reason in err (config.c note 4). */
int config_option_parse(const spw_option *o, const char *v, size_t n, spw_config *cfg, char *err,
                        size_t errlen);
/* The value of o in g_cfg as a config file writes it (buf holds it when needed). */
const char *config_option_format(const spw_option *o, char *buf, size_t cap);
/* Store o's field from src into g_cfg the way a running server must see it (config.c note 6). */
void config_option_publish(const spw_option *o, const spw_config *src);
/* Split a config file line into words (NUL-terminated, in out): how many, or -errno. */
int config_line_split(const char *line, char *out, char **words, int maxwords);

#endif
