/*
 * spillway-check - offline check of a data folder: the append-only files (server/aof.h) and the
 * checkpoints with the log segments they need (log/hlog.h), as redis-check-aof / redis-check-rdb.
 *
 *   spillway-check [--fix-aof] [--logdir DIR] [--segment SIZE] DIR
 *
 * DIR is the server's --dir. The log's segments are <logdir or DIR>/Store/hlog.<n>; they are opened
 * (with the posix backend: no O_DIRECT, no kernel queue needed) only when that folder exists, and
 * --segment must match the server's (default 1g). Exit status: 0 when nothing is wrong (a torn AOF
 * tail fixed by --fix-aof is not a problem), 1 when something is, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/spw.h"
#include "device/device.h"
#include "log/hlog.h"
#include "server/aof.h"

static void usage(FILE *out)
{
	fprintf(out,
	        "Usage: spillway-check [--fix-aof] [--logdir DIR] [--segment SIZE] DIR\n"
	        "  Checks DIR/appendonlydir/*.aof and DIR's checkpoints (with the log segments in\n"
	        "  <logdir or DIR>/Store when that folder exists).\n"
	        "  --fix-aof       truncate torn AOF tails (as redis-check-aof --fix)\n"
	        "  --logdir DIR    the server's --logdir (default: DIR)\n"
	        "  --segment SIZE  the server's --segment (default 1g)\n"
	        "Exit status: 0 no problems, 1 problems found, 2 usage error.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fix-aof", no_argument, NULL, 'f' },
		{ "logdir", required_argument, NULL, 'l' },
		{ "segment", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool fix = false;
	const char *logdir = NULL;
	uint64_t segment = DEV_SEGMENT_DEFAULT;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': fix = true; break;
		case 'l': logdir = optarg; break;
		case 's':
			if (spw_parse_size(optarg, &segment) < 0 || segment < DEV_SEGMENT_MIN ||
			    (segment & (segment - 1))) {
				fprintf(stderr, "spillway-check: --segment '%s': a power of two of at least 64k\n",
				        optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	const char *dir = argv[optind];
	struct stat st;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "spillway-check: %s: not a folder\n", dir);
		return 2;
	}

	int problems = aof_check(dir, fix, stdout);

	char store[PATH_MAX];
	snprintf(store, sizeof(store), "%s/Store", logdir ? logdir : dir);
	dev *logdev = NULL;
	if (stat(store, &st) == 0 && S_ISDIR(st.st_mode)) {
		dev_config cfg;
		dev_config_init(&cfg);
		cfg.type = "posix";
		cfg.dir = store;
		cfg.prefix = "hlog.";
		cfg.segment_bytes = segment;
		char err[256] = "";
		int rc = dev_open(&cfg, &logdev, err, sizeof(err));
		if (rc < 0) {
			printf("%s: cannot open the log segments: %s\n", store, err[0] ? err : spw_strerror(rc));
			problems++;
			logdev = NULL;
		}
	}
	problems += hlog_ckpt_check(dir, logdev, stdout);
	if (logdev) dev_close(logdev);
	fflush(stdout);
	return problems ? 1 : 0;
}
