/*
 * bench_out.c - what spillway-bench prints and writes: the table, online interval lines, CSV, JSON,
 * gnuplot charts, load progress, and the server's CPU time from /proc.
 *
 * Notes:
 *  1. Every format carries the same columns in the same order (the CSV header names them), so a
 *     script can read whichever it prefers; NAN (a column that does not apply) is "-" in the table,
 *     empty in CSV and null in JSON.
 *  2. Latencies are stored in ns and shown in microseconds with 3 decimals below 10 us, 1 above.
 *  3. --plot runs gnuplot on a data file and a script in a temporary folder: throughput against
 *     threads (one line per batch size) or against batch size for offline rows, and p50/p99/p99.9
 *     against offered load (or achieved throughput in a closed loop) for online rows.
 */
#include "bench/bench_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------- table ---------------- */

static void fmt_num(char *buf, size_t n, double v, int decimals)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.*f", decimals, v);
}

static void fmt_us(char *buf, size_t n, double us)
{
	fmt_num(buf, n, us, isnan(us) || us >= 10.0 ? 1 : 3);
}

void bench_row_print_header(FILE *f)
{
	fprintf(f, "%-7s %-20s %4s %6s %5s %5s %9s %11s %7s %12s %9s %9s %9s %7s %8s %9s\n", "mode", "op", "thr",
	        "batch", "conns", "itp", "rate", "ops", "secs", "ops/s", "p50_us", "p99_us", "p99.9_us", "errors",
	        "srv_cpu", "srv_us/op");
}

void bench_row_print(FILE *f, const bench_row *r)
{
	char rate[24], p50[24], p99[24], p999[24], cpu[24], cpuop[24], batch[16], itp[16];
	fmt_num(rate, sizeof(rate), r->rate > 0 ? r->rate : NAN, 0);
	fmt_us(p50, sizeof(p50), r->p50_us);
	fmt_us(p99, sizeof(p99), r->p99_us);
	fmt_us(p999, sizeof(p999), r->p999_us);
	fmt_num(cpu, sizeof(cpu), r->srv_cpu_s, 2);
	fmt_num(cpuop, sizeof(cpuop), r->srv_cpu_us_per_op, 3);
	fmt_num(batch, sizeof(batch), r->batch > 0 ? r->batch : NAN, 0);
	fmt_num(itp, sizeof(itp), r->itp > 0 ? r->itp : NAN, 0);
	fprintf(f, "%-7s %-20s %4d %6s %5d %5s %9s %11llu %7.2f %12.0f %9s %9s %9s %7llu %8s %9s%s\n", r->mode, r->op,
	        r->threads, batch, r->conns, itp, rate, (unsigned long long)r->ops, r->seconds, r->tput, p50, p99,
	        p999, (unsigned long long)(r->errors + r->wrong + r->missing), cpu, cpuop, r->failed ? "  FAILED" : "");
	fflush(f);
}

void bench_interval_header(FILE *f)
{
	fprintf(f, "%8s %10s %10s %10s %10s %10s %10s %10s %12s %12s\n", "time_s", "min_us", "5th_us", "median_us",
	        "avg_us", "95th_us", "99th_us", "99.9th_us", "total_ops", "tput_ops/s");
}

void bench_interval_print(FILE *f, double t_s, const bench_hist *h, uint64_t total_ops, double tput)
{
	if (!h->total) {
		fprintf(f, "%8.1f %10s %10s %10s %10s %10s %10s %10s %12llu %12.0f\n", t_s, "-", "-", "-", "-", "-",
		        "-", "-", (unsigned long long)total_ops, tput);
	} else {
		fprintf(f, "%8.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %12llu %12.0f\n", t_s,
		        (double)bench_hist_percentile(h, 0) / 1e3, (double)bench_hist_percentile(h, 5) / 1e3,
		        (double)bench_hist_percentile(h, 50) / 1e3, bench_hist_mean(h) / 1e3,
		        (double)bench_hist_percentile(h, 95) / 1e3, (double)bench_hist_percentile(h, 99) / 1e3,
		        (double)bench_hist_percentile(h, 99.9) / 1e3, (unsigned long long)total_ops, tput);
	}
	fflush(f);
}

/* ---------------- CSV and JSON ---------------- */

static const char csv_header[] =
	"mode,op,threads,batch,conns_per_thread,itp,rate,ops,seconds,ops_per_s,min_us,p5_us,p50_us,avg_us,p95_us,"
	"p99_us,p999_us,max_us,errors,wrong,missing,server_cpu_s,server_cpu_us_per_op,failed";

static void csv_num(FILE *f, double v, int decimals)
{
	if (!isnan(v))
		fprintf(f, "%.*f", decimals, v);
	fputc(',', f);
}

int bench_csv_write(const char *path, const bench_row *rows, int n)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", csv_header);
	for (int i = 0; i < n; i++) {
		const bench_row *r = &rows[i];
		/* op may hold commas (a workload): quote it */
		fprintf(f, "%s,\"%s\",%d,%d,%d,%d,", r->mode, r->op, r->threads, r->batch, r->conns, r->itp);
		csv_num(f, r->rate, 0);
		fprintf(f, "%llu,%.3f,%.1f,", (unsigned long long)r->ops, r->seconds, r->tput);
		csv_num(f, r->min_us, 3);
		csv_num(f, r->p5_us, 3);
		csv_num(f, r->p50_us, 3);
		csv_num(f, r->avg_us, 3);
		csv_num(f, r->p95_us, 3);
		csv_num(f, r->p99_us, 3);
		csv_num(f, r->p999_us, 3);
		csv_num(f, r->max_us, 3);
		fprintf(f, "%llu,%llu,%llu,", (unsigned long long)r->errors, (unsigned long long)r->wrong,
		        (unsigned long long)r->missing);
		csv_num(f, r->srv_cpu_s, 3);
		csv_num(f, r->srv_cpu_us_per_op, 4);
		fprintf(f, "%d\n", r->failed ? 1 : 0);
	}
	int err = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !err)
		err = -errno;
	return err;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *name, double v, int decimals, bool comma)
{
	fprintf(f, "\"%s\": ", name);
	if (isnan(v))
		fprintf(f, "null");
	else
		fprintf(f, "%.*f", decimals, v);
	if (comma)
		fprintf(f, ", ");
}

int bench_json_write(const char *path, const bench_opts *o, const bench_keyspace *ks, const bench_row *rows, int n)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n  \"tool\": \"spillway-bench\",\n  \"client\": \"%s\",\n  \"host\": ",
	        o->client == BENCH_CLIENT_INPROC ? "inproc" : "native");
	json_str(f, o->host);
	fprintf(f, ",\n  \"port\": ");
	json_str(f, o->port);
	fprintf(f, ",\n  \"dbsize\": %llu, \"keylength\": %u, \"valuelength\": %u, \"zipf\": ",
	        (unsigned long long)ks->dbsize, ks->keylen, ks->value_is_key ? 0 : ks->vallen);
	if (ks->zipf)
		fprintf(f, "%.4f", ks->z.theta);
	else
		fprintf(f, "null");
	fprintf(f, ",\n  \"rows\": [\n");
	for (int i = 0; i < n; i++) {
		const bench_row *r = &rows[i];
		fprintf(f, "    {\"mode\": ");
		json_str(f, r->mode);
		fprintf(f, ", \"op\": ");
		json_str(f, r->op);
		fprintf(f, ", \"threads\": %d, \"batch\": %d, \"conns_per_thread\": %d, \"itp\": %d, ", r->threads,
		        r->batch, r->conns, r->itp);
		json_num(f, "rate", r->rate, 0, true);
		fprintf(f, "\"ops\": %llu, ", (unsigned long long)r->ops);
		json_num(f, "seconds", r->seconds, 3, true);
		json_num(f, "ops_per_s", r->tput, 1, true);
		json_num(f, "min_us", r->min_us, 3, true);
		json_num(f, "p5_us", r->p5_us, 3, true);
		json_num(f, "p50_us", r->p50_us, 3, true);
		json_num(f, "avg_us", r->avg_us, 3, true);
		json_num(f, "p95_us", r->p95_us, 3, true);
		json_num(f, "p99_us", r->p99_us, 3, true);
		json_num(f, "p999_us", r->p999_us, 3, true);
		json_num(f, "max_us", r->max_us, 3, true);
		fprintf(f, "\"errors\": %llu, \"wrong\": %llu, \"missing\": %llu, ", (unsigned long long)r->errors,
		        (unsigned long long)r->wrong, (unsigned long long)r->missing);
		json_num(f, "server_cpu_s", r->srv_cpu_s, 3, true);
		json_num(f, "server_cpu_us_per_op", r->srv_cpu_us_per_op, 4, true);
		fprintf(f, "\"failed\": %s, \"first_failure\": ", r->failed ? "true" : "false");
		json_str(f, r->first);
		fprintf(f, "}%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	int err = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !err)
		err = -errno;
	return err;
}

/* ---------------- plot ---------------- */

static int plot_run_gnuplot(const char *script)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return -ENOENT;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

int bench_plot_write(const char *path, const bench_row *rows, int n)
{
	char dir[] = "/tmp/spillway-bench-plot.XXXXXX";
	char data[64], script[64];
	int rc = 0, noff = 0, non = 0, nthr = 0, thr0 = -1;
	if (!mkdtemp(dir))
		return -errno;
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(script, sizeof(script), "%s/plot.gp", dir);
	for (int i = 0; i < n; i++) {
		if (strcmp(rows[i].mode, "offline") == 0) {
			noff++;
			if (rows[i].threads != thr0) {
				nthr++;
				thr0 = rows[i].threads;
			}
		} else if (strcmp(rows[i].mode, "online") == 0) {
			non++;
		}
	}
	/* The op of the first row that is plotted, for the title. */
	const char *title_op = "";
	for (int i = n - 1; i >= 0; i--)
		if (strcmp(rows[i].mode, noff >= non ? "offline" : "online") == 0)
			title_op = rows[i].op;
	FILE *d = fopen(data, "w"), *s = fopen(script, "w");
	if (!d || !s) {
		rc = -errno;
		goto out;
	}
	fprintf(s, "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1000,640 }"
	           " else { set terminal png size 1000,640 }\n");
	fprintf(s, "set output '%s'\nset grid\nset key outside right\n", path);
	if (noff >= non) {
		/* Throughput: x = threads (one series per batch size) when threads vary, else batch size. */
		bool by_threads = nthr > 1;
		fprintf(s, "set title 'spillway-bench: throughput (%s)'\n", title_op);
		fprintf(s, "set ylabel 'ops/s'\nset yrange [0:*]\nset xlabel '%s'\n", by_threads ? "threads" : "batch size");
		fprintf(s, by_threads ? "set xtics 1\n" : "set logscale x 2\n");
		int series = 0;
		for (int i = 0; i < n; i++) {
			if (strcmp(rows[i].mode, "offline") != 0)
				continue;
			int key = by_threads ? rows[i].batch : rows[i].threads;
			bool seen = false;
			for (int j = 0; j < i; j++)
				if (strcmp(rows[j].mode, "offline") == 0 && (by_threads ? rows[j].batch : rows[j].threads) == key)
					seen = true;
			if (seen)
				continue;
			fprintf(d, "# %s %d\n", by_threads ? "batch" : "threads", key);
			for (int j = i; j < n; j++)
				if (strcmp(rows[j].mode, "offline") == 0 && (by_threads ? rows[j].batch : rows[j].threads) == key)
					fprintf(d, "%d %.1f\n", by_threads ? rows[j].threads : rows[j].batch, rows[j].tput);
			fprintf(d, "\n\n");
			fprintf(s, "%s '%s' index %d using 1:2 with linespoints title '%s %d'", series ? ", \\\n    " : "plot ",
			        data, series, by_threads ? "batch" : "threads", key);
			series++;
		}
		fprintf(s, "\n");
	} else {
		/* Latency against offered load (--rate) or achieved throughput (closed loop). */
		bool offered = false;
		for (int i = 0; i < n; i++)
			if (strcmp(rows[i].mode, "online") == 0 && rows[i].rate > 0)
				offered = true;
		for (int i = 0; i < n; i++)
			if (strcmp(rows[i].mode, "online") == 0)
				fprintf(d, "%.1f %.3f %.3f %.3f\n", offered ? rows[i].rate : rows[i].tput, rows[i].p50_us,
				        rows[i].p99_us, rows[i].p999_us);
		fprintf(s, "set title 'spillway-bench: latency (%s)'\n", title_op);
		fprintf(s, "set xlabel '%s'\nset ylabel 'latency (us)'\nset logscale y\n",
		        offered ? "offered load (ops/s)" : "throughput (ops/s)");
		fprintf(s, "plot '%s' using 1:2 with linespoints title 'p50', '' using 1:3 with linespoints title 'p99',"
		           " '' using 1:4 with linespoints title 'p99.9'\n", data);
	}
	if (fclose(d) != 0 || fclose(s) != 0) {
		d = s = NULL;
		rc = -EIO;
		goto out;
	}
	d = s = NULL;
	rc = plot_run_gnuplot(script);
out:
	if (d)
		fclose(d);
	if (s)
		fclose(s);
	unlink(data);
	unlink(script);
	rmdir(dir);
	return rc;
}

/* ---------------- /proc and progress ---------------- */

int64_t bench_proc_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name, which ends at the last ')' (it may hold spaces and parens):
	 * state(3) ... utime(14) stime(15). */
	char *p = strrchr(buf, ')');
	if (!p)
		return -EPROTO;
	unsigned long long ut, st;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -EPROTO;
	return (int64_t)(ut + st);
}

void bench_progress(FILE *f, bool tty, uint64_t done, uint64_t total, double secs)
{
	double frac = total ? (double)done / (double)total : 1.0;
	double rate = secs > 0 ? (double)done / secs : 0.0;
	double eta = rate > 0 ? (double)(total - done) / rate : 0.0;
	if (tty) {
		char bar[41];
		int fill = (int)(frac * 40);
		for (int i = 0; i < 40; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[40] = '\0';
		fprintf(f, "\rload [%s] %5.1f%% %llu/%llu keys %.0f keys/s ETA %.0f s   ", bar, frac * 100,
		        (unsigned long long)done, (unsigned long long)total, rate, eta);
	} else {
		fprintf(f, "load: %llu/%llu keys (%.1f%%), %.0f keys/s, ETA %.0f s\n", (unsigned long long)done,
		        (unsigned long long)total, frac * 100, rate, eta);
	}
	fflush(f);
}
