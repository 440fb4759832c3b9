/*
 * bench_opts.c - spillway-bench's flags: one table (bench_flags) that getopt's long options, the
 * value parsing and the messages come from, then the checks that relate flags to each other.
 *
 * Steps of bench_opts_parse: defaults (opts_defaults), every flag by its row (opts_read; the few
 * that need more than a kind in opt_own), then the key space (opts_check_keys), the workload
 * (opts_check_workload) and the client (opts_check_client). A bad value or combination is a
 * message on stderr and -EINVAL, which main turns into exit status 2.
 */
#include "bench/bench_int.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *f)
{
	fprintf(f,
	"usage: spillway-bench [options]\n"
	"  -h, --host HOST              server address (default 127.0.0.1)\n"
	"  -p, --port PORT              server port (default 6379)\n"
	"  -a, --password PW            send AUTH PW on every connection (alias --auth)\n"
	"      --client native|inproc   native: pipelined RESP over TCP (default); inproc: run the store\n"
	"                               (log/hlog) in this process, no TCP, to measure its CPU per op\n"
	"      --op OP                  GET SET MGET MSET INCR DEL EXISTS PING HGET HSET (default GET)\n"
	"      --dbsize N               keys 0..N-1 (default 1024)\n"
	"      --keylength K            key bytes, zero-padded decimal (default 8, or the digits of N-1;\n"
	"                               0 = just the digits)\n"
	"      --valuelength V          value bytes (default 8; 0 = the value is the key); HGET/HSET: per field\n"
	"      --fields F               HGET/HSET: the load writes each key as one HSET of F fields f0..f<F-1>;\n"
	"                               HGET reads, HSET sets one random field of a key (default 20)\n"
	"      --runtime S              seconds per row (default 15; 0 = load only; -1 = until Ctrl-C)\n"
	"  -t, --threads LIST           worker threads, comma separated: one row each (default 1)\n"
	"  -b, --batchsize LIST         offline: requests per batch (MGET/MSET: keys per command) (default 4096)\n"
	"  -s, --skipload               skip the load phase (the keys are already there)\n"
	"      --online                 latency mode: --itp requests in flight per connection\n"
	"      --op-workload LIST       online ops (default: --op)\n"
	"      --op-percent LIST        their shares, summing to 100\n"
	"      --itp K                  requests in flight per connection (default 1)\n"
	"      --rate LIST              paced open loop at R ops/s in total (implies --online); one row each\n"
	"      --zipf [THETA]           Zipf key choice, P(key k) ~ 1/(k+1)^THETA, 0 < THETA <= 10\n"
	"                               (default 0.99 when given alone)\n"
	"      --conns-per-thread C     connections per thread (default 1)\n"
	"      --csv FILE, --json FILE  write the rows\n"
	"      --plot FILE.png          throughput or latency chart (needs gnuplot)\n"
	"      --server-pid PID         add the server's CPU seconds and CPU us per op (from /proc)\n"
	"      --seed N                 random seed (default 1)\n"
	"      --memory --page --index --mutable-percent   inproc store sizing, as spillway-server\n"
	"      --quiet                  no progress or interval lines\n"
	"      --help\n");
}

/* getopt's return for the flags without a short letter. */
enum {
	OPT_OP = 256, OPT_DBSIZE, OPT_KEYLEN, OPT_VALLEN, OPT_RUNTIME, OPT_WORKLOAD, OPT_PERCENT, OPT_ITP, OPT_RATE,
	OPT_ZIPF, OPT_CONNS, OPT_CLIENT, OPT_CSV, OPT_JSON, OPT_PLOT, OPT_PID, OPT_SEED, OPT_MEMORY, OPT_PAGE,
	OPT_INDEX, OPT_MUTABLE, OPT_QUIET, OPT_HELP, OPT_FIELDS,
};

#define F(field) offsetof(bench_opts, field)
#define REQ required_argument
#define NOARG no_argument
/* name, key, argument, kind, field, count field, lo, hi, list max, label, default */
static const bench_cli bench_flags[] = {
	{ "host", 'h', REQ, BENCH_CLI_STR, F(host), 0, 0, 0, 0, "--host", "127.0.0.1" },
	{ "port", 'p', REQ, BENCH_CLI_OWN, F(port), 0, 0, 0, 0, "--port", NULL },
	{ "password", 'a', REQ, BENCH_CLI_STR, F(password), 0, 0, 0, 0, "--password", NULL },
	{ "auth", 'a', REQ, BENCH_CLI_STR, F(password), 0, 0, 0, 0, "--auth", NULL },
	{ "threads", 't', REQ, BENCH_CLI_INTS, F(threads), F(nthreads), 1, 4096, BENCH_LIST_MAX, "-t", "1" },
	{ "batchsize", 'b', REQ, BENCH_CLI_INTS, F(batches), F(nbatches), 1, 1 << 24, BENCH_LIST_MAX, "-b", "4096" },
	{ "skipload", 's', NOARG, BENCH_CLI_FLAG, F(skip_load), 0, 0, 0, 0, "-s", NULL },
	{ "online", 'o', NOARG, BENCH_CLI_FLAG, F(online), 0, 0, 0, 0, "--online", NULL },
	{ "op", OPT_OP, REQ, BENCH_CLI_OWN, F(op), 0, 0, 0, 0, "--op", NULL },
	{ "dbsize", OPT_DBSIZE, REQ, BENCH_CLI_U64, F(dbsize), 0, 1, UINT64_MAX, 0, "--dbsize", "1024" },
	{ "keylength", OPT_KEYLEN, REQ, BENCH_CLI_OWN, F(keylen), 0, 0, BENCH_KEYLEN_MAX, 0, "--keylength", NULL },
	{ "valuelength", OPT_VALLEN, REQ, BENCH_CLI_U32, F(vallen), 0, 0, BENCH_VALLEN_MAX, 0, "--valuelength", "8" },
	{ "fields", OPT_FIELDS, REQ, BENCH_CLI_U32, F(fields), 0, 1, BENCH_FIELDS_MAX, 0, "--fields", "20" },
	{ "runtime", OPT_RUNTIME, REQ, BENCH_CLI_DOUBLE, F(runtime), 0, 0, 0, 0, "--runtime", "15" },
	{ "op-workload", OPT_WORKLOAD, REQ, BENCH_CLI_OPS, F(wl_op), F(nwl), 0, 0, BENCH_OP_COUNT, "--op-workload", NULL },
	{ "op-percent", OPT_PERCENT, REQ, BENCH_CLI_INTS, F(wl_pct), F(npct), 0, 100, BENCH_OP_COUNT, "--op-percent", NULL },
	{ "itp", OPT_ITP, REQ, BENCH_CLI_INT, F(itp), 0, 1, 1 << 20, 0, "--itp", "1" },
	{ "rate", OPT_RATE, REQ, BENCH_CLI_RATES, F(rates), F(nrates), 0, 0, BENCH_LIST_MAX, "--rate", NULL },
	{ "zipf", OPT_ZIPF, optional_argument, BENCH_CLI_OWN, F(theta), 0, 0, 0, 0, "--zipf (0 < THETA <= 10)", NULL },
	{ "conns-per-thread", OPT_CONNS, REQ, BENCH_CLI_INT, F(conns), 0, 1, 4096, 0, "--conns-per-thread", "1" },
	{ "client", OPT_CLIENT, REQ, BENCH_CLI_OWN, F(client), 0, 0, 0, 0, "--client (native or inproc)", NULL },
	{ "csv", OPT_CSV, REQ, BENCH_CLI_STR, F(csv), 0, 0, 0, 0, "--csv", NULL },
	{ "json", OPT_JSON, REQ, BENCH_CLI_STR, F(json), 0, 0, 0, 0, "--json", NULL },
	{ "plot", OPT_PLOT, REQ, BENCH_CLI_STR, F(plot), 0, 0, 0, 0, "--plot", NULL },
	{ "server-pid", OPT_PID, REQ, BENCH_CLI_OWN, F(server_pid), 0, 1, INT32_MAX, 0, "--server-pid", NULL },
	{ "seed", OPT_SEED, REQ, BENCH_CLI_U64, F(seed), 0, 0, UINT64_MAX, 0, "--seed", "1" },
	{ "memory", OPT_MEMORY, REQ, BENCH_CLI_SIZE, F(memory), 0, 0, 0, 0, "--memory", "16g" },
	{ "page", OPT_PAGE, REQ, BENCH_CLI_SIZE, F(page), 0, 0, 0, 0, "--page", "32m" },
	{ "index", OPT_INDEX, REQ, BENCH_CLI_SIZE, F(index), 0, 0, 0, 0, "--index", "128m" },
	{ "mutable-percent", OPT_MUTABLE, REQ, BENCH_CLI_INT, F(mutable_percent), 0, 0, 100, 0, "--mutable-percent", "90" },
	{ "quiet", OPT_QUIET, NOARG, BENCH_CLI_FLAG, F(quiet), 0, 0, 0, 0, "--quiet", NULL },
	{ "help", OPT_HELP, NOARG, BENCH_CLI_OWN, 0, 0, 0, 0, 0, "--help", NULL },
};
#undef F
#undef REQ
#undef NOARG
#define NFLAGS ((int)SPW_ARRAY_LEN(bench_flags))

/* The rows' defaults, and those of the flags the table's kinds cannot hold. */
static void opts_defaults(bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->port = "6379";
	o->op = BENCH_OP_GET;
	o->keylen = 8;
	if (bench_cli_defaults(bench_flags, NFLAGS, o) < 0)
		abort();   /* a default in the table that its own row refuses */
}

static bool looks_numeric(const char *s)
{
	double d;
	return s && bench_parse_double(s, &d) == 0;
}

/* The flags whose value is more than its kind. *arg may move on (--zipf takes the next word when it
 * is a number). 0, or -EINVAL for a bad value. */
static int opt_own(const bench_cli *d, const char **arg, int argc, char **argv, bench_opts *o)
{
	uint64_t u;
	int v;

	switch (d->key) {
	case 'p':
		if (bench_parse_int(*arg, 1, 65535, &v) < 0)
			return -EINVAL;
		o->port = *arg;
		return 0;
	case OPT_OP:
		o->op_given = true;
		return (o->op = bench_op_parse(*arg)) < 0 ? -EINVAL : 0;
	case OPT_KEYLEN:
		o->keylen_given = true;
		if (bench_parse_int(*arg, (long)d->lo, (long)d->hi, &v) < 0)
			return -EINVAL;
		o->keylen = (uint32_t)v;
		return 0;
	case OPT_ZIPF:
		o->theta = 0.99;
		if (!*arg && optind < argc && looks_numeric(argv[optind]))
			*arg = argv[optind++];
		if (*arg && (bench_parse_double(*arg, &o->theta) < 0 || !(o->theta > 0 && o->theta <= 10)))
			return -EINVAL;
		return 0;
	case OPT_CLIENT:
		if (strcasecmp(*arg, "native") == 0 || strcasecmp(*arg, "LightClient") == 0)
			o->client = BENCH_CLIENT_NATIVE;
		else if (strcasecmp(*arg, "inproc") == 0)
			o->client = BENCH_CLIENT_INPROC;
		else
			return -EINVAL;
		return 0;
	case OPT_PID:
		if (bench_parse_u64(*arg, &u) < 0 || u < d->lo || u > d->hi)
			return -EINVAL;
		o->server_pid = (pid_t)u;
		return 0;
	default: /* OPT_HELP */
		usage(stdout);
		exit(0);
	}
}

/* Every flag on the command line, each by its row. 0, or -EINVAL after a message. */
static int opts_read(int argc, char **argv, bench_opts *o)
{
	struct option lo[NFLAGS + 1];
	int c;

	bench_cli_longopts(bench_flags, NFLAGS, lo);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h:p:a:t:b:so", lo, NULL)) != -1) {
		const bench_cli *d = bench_cli_find(bench_flags, NFLAGS, c);
		const char *arg = optarg;
		if (c == ':') {
			fprintf(stderr, "spillway-bench: %s needs a value\n", argv[optind - 1]);
			return -EINVAL;
		}
		if (!d) {
			fprintf(stderr, "spillway-bench: unknown option %s (see --help)\n", argv[optind - 1]);
			return -EINVAL;
		}
		int rc = d->kind == BENCH_CLI_OWN ? opt_own(d, &arg, argc, argv, o) : bench_cli_apply(d, arg, o);
		if (rc < 0) {
			fprintf(stderr, "spillway-bench: bad value for %s: '%s'\n", d->label, arg ? arg : "");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "spillway-bench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* Key length: Resp.benchmark's default 8, widened when dbsize needs more digits. */
static int opts_check_keys(bench_opts *o)
{
	uint32_t digits = bench_key_digits(o->dbsize);
	if (!o->keylen_given)
		o->keylen = SPW_MAX(8u, digits);
	else if (o->keylen != 0 && o->keylen < digits) {
		fprintf(stderr, "spillway-bench: --keylength %u cannot hold %llu keys (needs %u digits)\n", o->keylen,
		        (unsigned long long)o->dbsize, digits);
		return -EINVAL;
	}
	return 0;
}

/* A workload with HGET or HSET makes every key a hash (bench.h): the string ops that read or write
 * values cannot run on those keys, and the value cannot be the key (a field's value is a cell's). */
static int opts_check_hash(bench_opts *o)
{
	int string_op = -1;
	o->hash_keys = bench_op_hash(o->op);
	for (int i = 0; i < o->nwl; i++)
		o->hash_keys |= bench_op_hash(o->wl_op[i]);
	for (int i = -1; i < o->nwl; i++) {
		int op = i < 0 ? o->op : o->wl_op[i];
		if (op == BENCH_OP_GET || op == BENCH_OP_SET || op == BENCH_OP_MGET || op == BENCH_OP_MSET)
			string_op = op;
	}
	if (!o->hash_keys)
		return 0;
	if (string_op >= 0) {
		fprintf(stderr, "spillway-bench: HGET/HSET load hashes, on which %s would fail (WRONGTYPE)\n",
		        bench_op_name(string_op));
		return -EINVAL;
	}
	if (o->vallen == 0) {
		fprintf(stderr, "spillway-bench: HGET/HSET need --valuelength > 0\n");
		return -EINVAL;
	}
	return 0;
}

/* The online workload: ops and shares that sum to 100, --op alone being a workload of one. */
static int opts_check_workload(bench_opts *o)
{
	if (o->nrates)
		o->online = true;
	if (o->nwl == 0) {
		o->wl_op[0] = o->op;
		o->nwl = 1;
		if (o->npct > 1) {
			fprintf(stderr, "spillway-bench: --op-percent needs --op-workload\n");
			return -EINVAL;
		}
		o->wl_pct[0] = 100;
		o->npct = 1;
	} else if (o->npct == 0 && o->nwl == 1) {
		o->wl_pct[0] = 100;
		o->npct = 1;
	} else if (!o->op_given) {
		o->op = o->wl_op[0];
	}
	if (o->npct != o->nwl) {
		fprintf(stderr, "spillway-bench: --op-workload has %d ops but --op-percent %d shares\n", o->nwl,
		        o->npct);
		return -EINVAL;
	}
	int sum = 0;
	for (int i = 0; i < o->npct; i++)
		sum += o->wl_pct[i];
	if (sum != 100) {
		fprintf(stderr, "spillway-bench: --op-percent must sum to 100 (it sums to %d)\n", sum);
		return -EINVAL;
	}
	for (int i = 0; o->online && i < o->nwl; i++)
		if (bench_op_multi(o->wl_op[i])) {
			fprintf(stderr, "spillway-bench: --online runs single-key ops (and PING); %s is offline only\n",
			        bench_op_name(o->wl_op[i]));
			return -EINVAL;
		}
	return opts_check_hash(o);
}

/* Flags that the in-process client cannot honour. */
static int opts_check_client(const bench_opts *o)
{
	if (o->client == BENCH_CLIENT_INPROC && o->skip_load) {
		fprintf(stderr, "spillway-bench: -s with --client inproc: the in-process store starts empty\n");
		return -EINVAL;
	}
	if (o->client == BENCH_CLIENT_INPROC && o->hash_keys) {
		fprintf(stderr, "spillway-bench: HGET/HSET with --client inproc: the in-process store has no hashes\n");
		return -EINVAL;
	}
	if (o->client == BENCH_CLIENT_INPROC && o->server_pid) {
		fprintf(stderr, "spillway-bench: --server-pid with --client inproc: the store runs in this process "
		        "(its CPU is reported anyway)\n");
		return -EINVAL;
	}
	return 0;
}

int bench_opts_parse(int argc, char **argv, bench_opts *o)
{
	opts_defaults(o);
	if (opts_read(argc, argv, o) < 0 || opts_check_keys(o) < 0 || opts_check_workload(o) < 0 ||
	    opts_check_client(o) < 0)
		return -EINVAL;
	return 0;
}
