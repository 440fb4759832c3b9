/*
 * bench_cli.c - the flag table both benchmark tools parse their command lines by (see bench.h).
 *
 * A tool lists its flags once as bench_cli rows, each with its default; getopt_long's table is
 * built from the rows and each value is parsed and stored by its row's kind, so the tools keep no
 * switch of their own beyond the flags that need one (BENCH_CLI_OWN). The number parsers are strict: the whole
 * argument must be the number, and a value out of range is an error, never clamped.
 */
#include "bench/bench.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int bench_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-')
		return -EINVAL;
	*out = v;
	return 0;
}

int bench_parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

int bench_parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!*s || *end || errno || isnan(v))
		return -EINVAL;
	*out = v;
	return 0;
}

/* One entry of a comma-separated list into slot i of the row's array. 0 or -EINVAL. */
static int list_entry(const bench_cli *d, const char *tok, void *arr, int i)
{
	switch (d->kind) {
	case BENCH_CLI_INTS:
		return bench_parse_int(tok, (long)d->lo, (long)d->hi, &((int *)arr)[i]);
	case BENCH_CLI_RATES: {
		double *r = &((double *)arr)[i];
		return bench_parse_double(tok, r) < 0 || !(*r > 0) ? -EINVAL : 0;
	}
	default: {
		int *op = &((int *)arr)[i];
		return (*op = bench_op_parse(tok)) < 0 ? -EINVAL : 0;
	}
	}
}

/* "a,b,c" into the row's array; the entry count into its count field (-EINVAL on failure). */
static int list_apply(const bench_cli *d, const char *s, char *opts)
{
	int n = 0, *count = (int *)(opts + d->count_off);
	char buf[512];
	*count = -EINVAL;
	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == d->max || list_entry(d, tok, opts + d->off, n) < 0)
			return -EINVAL;
		n++;
	}
	if (!n)
		return -EINVAL;
	*count = n;
	return 0;
}

int bench_cli_apply(const bench_cli *d, const char *arg, void *opts)
{
	char *at = (char *)opts + d->off;
	uint64_t u;
	int v;

	switch (d->kind) {
	case BENCH_CLI_FLAG:
		*(bool *)at = true;
		return 0;
	case BENCH_CLI_STR:
		*(const char **)at = arg;
		return 0;
	case BENCH_CLI_INT:
		return bench_parse_int(arg, (long)d->lo, (long)d->hi, (int *)at);
	case BENCH_CLI_U32:
		if (bench_parse_int(arg, (long)d->lo, (long)d->hi, &v) < 0)
			return -EINVAL;
		*(uint32_t *)at = (uint32_t)v;
		return 0;
	case BENCH_CLI_U64:
		if (bench_parse_u64(arg, &u) < 0 || u < d->lo || u > d->hi)
			return -EINVAL;
		*(uint64_t *)at = u;
		return 0;
	case BENCH_CLI_DOUBLE:
		return bench_parse_double(arg, (double *)at);
	case BENCH_CLI_SIZE:
		return spw_parse_size(arg, (uint64_t *)at) < 0 ? -EINVAL : 0;
	case BENCH_CLI_INTS:
	case BENCH_CLI_RATES:
	case BENCH_CLI_OPS:
		return list_apply(d, arg, opts);
	default:
		return -ENOTSUP;
	}
}

void bench_cli_longopts(const bench_cli *defs, int n, struct option *out)
{
	for (int i = 0; i < n; i++)
		out[i] = (struct option){ defs[i].name, defs[i].has_arg, NULL, defs[i].key };
	out[n] = (struct option){ 0, 0, 0, 0 };
}

int bench_cli_defaults(const bench_cli *defs, int n, void *opts)
{
	for (int i = 0; i < n; i++)
		if (defs[i].def && defs[i].kind != BENCH_CLI_OWN && bench_cli_apply(&defs[i], defs[i].def, opts) < 0)
			return -EINVAL;
	return 0;
}

const bench_cli *bench_cli_find(const bench_cli *defs, int n, int key)
{
	for (int i = 0; i < n; i++)
		if (defs[i].key == key)
			return &defs[i];
	return NULL;
}
