/*
 * bench_inproc.c - --client inproc: the same workloads run straight against the store (log/hlog.h)
 * in this process, with no TCP and no RESP, to measure what the store itself costs per operation.
 *
 * Design notes:
 *  1. The store is opened once (bench_inproc_open) with spillway-server's sizing flags (--memory
 *     --page --index --mutable-percent) and no device; every row's workers use it, so a load done at
 *     the start serves all rows, as a running server would.
 *  2. One hlog_session per worker thread, protected around each batch of operations and unprotected
 *     between batches, with one hlog_session_set_now per batch: what a server worker does around
 *     one event-loop pass, so epoch and clock costs are paid per batch, not per operation.
 *  3. Offline runs the pre-built batches of the native client, reading keys and values from the
 *     same encoded bytes (bench_batch key_off/val_off), so both clients run identical key sequences.
 *     Per-op latency in offline is the batch's time divided by its operations (one clock pair per
 *     batch); online times every operation.
 *  4. Checks are the native client's: a GET must see the key's value (compared inside the read
 *     callback, where the value is valid), a missing key is a failure unless the workload deletes.
 *  5. CPU is each worker's own thread time (RUSAGE_THREAD) over the run: the store's cost alone,
 *     reported in the row's server CPU columns. Paced runs (--rate) spin for the last 50 us before
 *     each due time, so their CPU includes waiting: use offline rows for CPU per op.
 */
#include "bench/bench_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "log/hlog.h"

int bench_inproc_open(const bench_opts *o, hlog **out)
{
	int maxt = 1;
	for (int i = 0; i < o->nthreads; i++)
		maxt = SPW_MAX(maxt, o->threads[i]);
	hlog_config hc = {
		.memory_bytes = o->memory,
		.page_bytes = o->page,
		.index_bytes = o->index,
		.mutable_percent = o->mutable_percent,
		.max_sessions = maxt + 1,
		.dev = NULL,
	};
	return hlog_open(out, &hc);
}

void bench_inproc_close(hlog *l)
{
	if (l)
		hlog_close(l);
}

static double thread_cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) < 0)
		return 0.0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---------------- operations ---------------- */

typedef struct ip_read_ctx {
	bench_worker *w;
	uint64_t key;
	int op;
} ip_read_ctx;

static void ip_read_fn(void *ctx, const hlog_value *v)
{
	ip_read_ctx *x = ctx;
	if (x->op == BENCH_OP_EXISTS)
		return;
	if (!bench_value_matches(x->w->run->ks, x->key, (const char *)v->ptr, v->len))
		bench_check_note(&x->w->check, BENCH_REPLY_WRONG, x->op, x->key, (const char *)v->ptr, v->len);
}

typedef struct ip_incr {
	long long result;
	size_t len;
	char buf[24];
} ip_incr;

static int ip_incr_plan(void *ctx, const hlog_value *old, hlog_rmw_plan *out)
{
	ip_incr *x = ctx;
	long long v = 0;
	if (old && !spw_parse_ll((const char *)old->ptr, old->len, &v))
		return SPW_E_NOT_INT;
	if (v == LLONG_MAX)
		return SPW_E_OVERFLOW;
	x->result = v + 1;
	x->len = spw_fmt_ll(x->buf, x->result);
	out->action = HLOG_RMW_WRITE;
	out->new_len = x->len;
	out->expire_ms = old ? old->expire_ms : HLOG_NO_EXPIRY;
	return 0;
}

static void ip_incr_fill(void *ctx, const hlog_value *old, uint8_t *dst, bool in_place)
{
	ip_incr *x = ctx;
	(void)old;
	(void)in_place;
	memcpy(dst, x->buf, x->len);
}

static const hlog_rmw_ops ip_incr_ops = { ip_incr_plan, ip_incr_fill };

static void ip_store_error(bench_worker *w, int op, uint64_t key, int rc)
{
	const char *e = spw_strerror(rc);
	bench_check_note(&w->check, BENCH_REPLY_ERROR, op, key, e, strlen(e));
}

static void ip_absent(bench_worker *w, int op, uint64_t key)
{
	if (w->check.allow_missing)
		w->check.nils++;
	else
		bench_check_note(&w->check, BENCH_REPLY_MISSING, op, key, "(nil)", 5);
}

/* Run op on one key: kp/kl its bytes (counter key for INCR), vp its value (SET/MSET). */
static void ip_exec(bench_worker *w, hlog_session *s, int op, uint64_t key, const char *kp, size_t kl,
                    const char *vp)
{
	hlog_key k;
	int rc;
	if (op == BENCH_OP_PING)
		return;
	hlog_key_init(&k, kp, kl);
	switch (op) {
	case BENCH_OP_GET:
	case BENCH_OP_MGET:
	case BENCH_OP_EXISTS: {
		ip_read_ctx x = { w, key, op };
		rc = hlog_read(s, &k, ip_read_fn, &x);
		if (rc == HLOG_NOTFOUND)
			ip_absent(w, op, key);
		break;
	}
	case BENCH_OP_SET:
	case BENCH_OP_MSET:
		rc = hlog_upsert(s, &k, vp, w->run->ks->vallen, HLOG_NO_EXPIRY);
		break;
	case BENCH_OP_INCR: {
		ip_incr x;
		rc = hlog_rmw(s, &k, &ip_incr_ops, &x);
		break;
	}
	case BENCH_OP_DEL:
		rc = hlog_delete(s, &k);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc < 0)
		ip_store_error(w, op, key, rc);
}

/* ---------------- loops ---------------- */

static void ip_load(bench_worker *w, hlog_session *s, char *kbuf, char *vbuf)
{
	const bench_keyspace *ks = w->run->ks;
	for (uint64_t next = w->lo; next < w->hi && !bench_run_stopped(w->run);) {
		uint64_t end = SPW_MIN(w->hi, next + (uint64_t)w->run->batch);
		hlog_session_protect(s);
		hlog_session_set_now(s, spw_time_ms());
		for (uint64_t i = next; i < end; i++) {
			bench_key_format(ks, i, kbuf);
			bench_value_format(ks, i, vbuf);
			ip_exec(w, s, BENCH_OP_SET, i, kbuf, ks->keylen, vbuf);
		}
		hlog_session_unprotect(s);
		w->ops += end - next;
		atomic_store_explicit(&w->loaded, w->ops, memory_order_relaxed);
		next = end;
	}
}

static void ip_offline(bench_worker *w, hlog_session *s, const bench_batch *batches, uint32_t nb)
{
	const bench_keyspace *ks = w->run->ks;
	bench_hist *h = &w->h[w->cur];
	uint32_t bi = 0;
	while (!bench_run_stopped(w->run)) {
		const bench_batch *b = &batches[bi];
		bi = bi + 1 == nb ? 0 : bi + 1;
		uint32_t n = b->op == BENCH_OP_PING ? b->nreq : b->nkeys;
		size_t kl = b->op == BENCH_OP_INCR ? ks->keylen + 1 : ks->keylen;
		uint64_t t0 = spw_mono_ns();
		hlog_session_protect(s);
		hlog_session_set_now(s, spw_time_ms());
		for (uint32_t j = 0; j < n; j++)
			ip_exec(w, s, b->op, b->nkeys ? b->keys[j] : 0, b->buf + b->key_off[j], kl,
			        b->buf + b->val_off[j]);
		hlog_session_unprotect(s);
		uint64_t t1 = spw_mono_ns();
		bench_hist_record_n(h, (int64_t)((t1 - t0) / n), n);
		w->ops += n;
	}
}

/* Wait until the monotonic time t: sleep while more than 60 us remain, spin the rest (a wake-up
 * takes tens of microseconds, longer than one store operation). */
static void ip_wait_until(uint64_t t)
{
	for (;;) {
		uint64_t now = spw_mono_ns();
		if (now >= t)
			return;
		if (t - now > 60000) {
			uint64_t d = t - 50000;
			struct timespec ts = { (time_t)(d / 1000000000ULL), (long)(d % 1000000000ULL) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
}

static void ip_online(bench_worker *w, hlog_session *s, char *kbuf, char *vbuf)
{
	bench_run *r = w->run;
	const bench_keyspace *ks = r->ks;
	bool paced = r->rate > 0;
	uint64_t interval = paced ? (uint64_t)(1e9 * r->threads / r->rate) : 0;
	uint64_t next_due = spw_mono_ns();
	uint32_t group = (uint32_t)SPW_MAX(1, r->itp);

	if (paced && interval == 0)
		interval = 1;
	while (!bench_run_stopped(r)) {
		bench_worker_publish(w);
		bench_hist *h = &w->h[w->cur];
		if (paced)
			ip_wait_until(next_due);
		hlog_session_protect(s);
		hlog_session_set_now(s, spw_time_ms());
		for (uint32_t g = 0; g < group; g++) {
			int op = bench_workload_pick(r, &w->rng);
			uint64_t key = op == BENCH_OP_PING ? 0 : bench_key_pick(ks, &w->rng);
			size_t kl = ks->keylen;
			if (op == BENCH_OP_INCR) {
				kbuf[0] = 'c';
				bench_key_format(ks, key, kbuf + 1);
				kl++;
			} else {
				bench_key_format(ks, key, kbuf);
			}
			if (op == BENCH_OP_SET)
				bench_value_format(ks, key, vbuf);
			uint64_t t0 = paced ? next_due : spw_mono_ns();
			ip_exec(w, s, op, key, kbuf, kl, vbuf);
			uint64_t t1 = spw_mono_ns();
			bench_hist_record(h, (int64_t)(t1 - t0));
			w->ops++;
			if (paced) {
				next_due += interval;
				if (next_due > t1)
					break;   /* the rest is not due yet */
			}
		}
		hlog_session_unprotect(s);
	}
}

void *bench_inproc_worker(void *arg)
{
	bench_worker *w = arg;
	bench_run *r = w->run;
	const bench_keyspace *ks = r->ks;
	hlog_session *s = NULL;
	bench_batch *batches = NULL;
	uint32_t nb = 0;
	char *kbuf = malloc(BENCH_KEYLEN_MAX + 2);
	char *vbuf = malloc(ks->vallen + 1);
	int rc = kbuf && vbuf ? 0 : -ENOMEM;

	if (rc == 0 && (rc = hlog_session_open(r->store, &s)) < 0)
		bench_worker_fail(w, rc, "cannot open a store session: %s", spw_strerror(rc));
	if (rc == 0 && r->mode == BENCH_MODE_OFFLINE) {
		nb = bench_offline_batch_count(ks, r->o->op, (uint32_t)r->batch);
		batches = calloc(nb, sizeof(*batches));
		if (!batches)
			rc = -ENOMEM;
		for (uint32_t i = 0; rc == 0 && i < nb; i++)
			rc = bench_batch_build(&batches[i], ks, r->o->op, (uint32_t)r->batch, &w->rng, NULL);
	}
	if (rc < 0 && !w->err)
		bench_worker_fail(w, rc, "setup: %s", spw_strerror(rc));
	if (bench_worker_ready(w, rc)) {
		double cpu0 = thread_cpu_s();
		switch (r->mode) {
		case BENCH_MODE_LOAD: ip_load(w, s, kbuf, vbuf); break;
		case BENCH_MODE_OFFLINE: ip_offline(w, s, batches, nb); break;
		default: ip_online(w, s, kbuf, vbuf); break;
		}
		w->cpu_s = thread_cpu_s() - cpu0;
	}
	w->t_end_ns = spw_mono_ns();
	if (s)
		hlog_session_close(s);
	for (uint32_t i = 0; batches && i < nb; i++)
		bench_batch_free(&batches[i]);
	free(batches);
	free(kbuf);
	free(vbuf);
	atomic_store(&w->done, true);
	return NULL;
}
