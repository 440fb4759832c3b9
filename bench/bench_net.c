/*
 * bench_net.c - the native pipelined RESP client: load, offline (batches) and online (in flight,
 * closed loop or paced) workers over TCP.
 *
 * Design notes:
 *  1. Everything a worker touches while the clock runs is allocated in net_setup(): receive
 *     buffers, send buffers, the in-flight rings and the pre-built batches. The send/receive path
 *     only encodes into those buffers, calls send/recv/ppoll, and compacts with memmove.
 *  2. Reply boundaries come from proto's resp_reply_skip(), which rescans an incomplete reply from
 *     its start. A GET reply rescans in O(1) (it reads the bulk's length), but a big MGET array
 *     would be rescanned from its first element on every recv, so MGET arrays are split here: the
 *     header is read once (bench_array_header) and each element is skipped and checked alone.
 *  3. Syscalls per round: a thread with one connection sends with MSG_DONTWAIT and then waits in a
 *     blocking recv (SO_RCVTIMEO 100 ms, so a stop is seen in time): 2 calls per batch. With several
 *     connections, or when paced, one ppoll covers them all.
 *  4. Offline: a connection sends a whole pre-built batch, reads all its replies, then sends the
 *     next batch (the batches cycle). Each reply's latency is counted from the batch's send.
 *  5. Online: a ring per connection holds what is in flight (op, key, start time), in send order, so
 *     the n-th reply belongs to the ring's head. Closed loop keeps --itp in flight: each reply queues
 *     a replacement, and the replacements of one round are stamped with one clock read just before
 *     they are sent. Paced (--rate): requests are due at t0 + n * interval and stamped with that
 *     intended time whenever they actually go out, so a slow server cannot hide its queueing
 *     (no coordinated omission); if every ring is full the backlog waits and its latency grows.
 *  6. Replies are read as they come; one clock read per received chunk times all of its replies.
 */
#include "bench/bench_int.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proto/resp.h"

#define NET_RECV_TIMEOUT_MS 100
#define NET_POLL_NS 100000000ULL
#define NET_RATE_INFLIGHT 1024            /* paced: per-connection in-flight cap unless --itp is larger */
#define NET_SBUF_MAX (64u << 20)          /* bound on one connection's send buffer */
#define NET_LOAD_MSET_KEYS 64             /* keys per MSET command while loading */

typedef struct net_inflight {
	uint64_t t_ns;
	uint64_t key;
	int op;
} net_inflight;

typedef struct net_conn {
	int fd;
	/* sending: [out + out_off, out + out_len) not yet sent; out is a batch's bytes or sbuf */
	const char *out;
	size_t out_len, out_off;
	char *sbuf;
	size_t scap;
	/* receiving: [in_beg, in_end) received and not yet consumed */
	char *in;
	size_t in_cap, in_beg, in_end;
	bool fresh;                       /* bytes arrived since the last processing */
	/* offline */
	uint32_t bidx;
	const bench_batch *b;
	uint32_t pending, key_pos;
	int64_t arr_left;                 /* MGET elements still to come in the current array */
	uint32_t arr_seen;
	uint64_t t_sent;
	/* online */
	net_inflight *ring;
	uint32_t ring_mask, ring_head, ring_n, unstamped;
	uint32_t cap;                     /* most requests in flight (paced: the backlog's bound) */
} net_conn;

typedef struct net_state {
	net_conn *c;
	int n;
	struct pollfd *pfd;
	bench_batch *batches;
	uint32_t nbatches;
} net_state;

/* ---------------- connections ---------------- */

static int net_resolve(bench_worker *w, struct addrinfo **ai)
{
	const bench_opts *o = w->run->o;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc = getaddrinfo(o->host, o->port, &hints, ai);
	if (rc != 0) {
		bench_worker_fail(w, -EHOSTUNREACH, "cannot resolve %s:%s: %s", o->host, o->port, gai_strerror(rc));
		return -EHOSTUNREACH;
	}
	return 0;
}

/* Send all of [p, p+n) on a blocking socket (setup only). */
static int net_send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pf = { fd, POLLOUT, 0 };
			poll(&pf, 1, NET_RECV_TIMEOUT_MS);
			continue;
		}
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int net_fill(net_conn *c, bool block);

/* AUTH password, at setup: the reply must be +OK. */
static int net_auth(bench_worker *w, net_conn *c)
{
	const char *pw = w->run->o->password;
	size_t pl = strlen(pw);
	char *req = malloc(pl + 64);
	if (!req)
		return -ENOMEM;
	int n = snprintf(req, pl + 64, "*2\r\n$4\r\nAUTH\r\n$%zu\r\n", pl);
	memcpy(req + n, pw, pl);
	memcpy(req + n + pl, "\r\n", 2);
	int rc = net_send_all(c->fd, req, (size_t)n + pl + 2);
	free(req);
	if (rc < 0)
		return rc;
	uint64_t deadline = spw_mono_ns() + 10000000000ULL;
	for (;;) {
		size_t used;
		char type;
		rc = resp_reply_skip(c->in + c->in_beg, c->in_end - c->in_beg, &used, &type);
		if (rc == RESP_OK) {
			const char *p = c->in + c->in_beg;
			bool ok = used == 5 && memcmp(p, "+OK\r\n", 5) == 0;
			if (!ok)
				bench_worker_fail(w, -EACCES, "AUTH failed: %.*s", (int)SPW_MIN(used - 2, (size_t)120), p);
			c->in_beg += used;
			return ok ? 0 : -EACCES;
		}
		if (rc != RESP_INCOMPLETE)
			return -EPROTO;
		if (spw_mono_ns() > deadline)
			return -ETIMEDOUT;
		if ((rc = net_fill(c, true)) < 0)
			return rc;
	}
}

static int net_conn_open(bench_worker *w, const struct addrinfo *ai0, net_conn *c)
{
	int err = -ECONNREFUSED;
	for (const struct addrinfo *ai = ai0; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			c->fd = fd;
			err = 0;
			break;
		}
		err = -errno;
		close(fd);
	}
	if (err < 0) {
		bench_worker_fail(w, err, "cannot connect to %s:%s: %s", w->run->o->host, w->run->o->port,
		                  spw_strerror(err));
		return err;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct timeval tv = { .tv_sec = 0, .tv_usec = NET_RECV_TIMEOUT_MS * 1000 };
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (w->run->o->password) {
		err = net_auth(w, c);
		if (err < 0 && !w->err)
			bench_worker_fail(w, err, "AUTH: %s", spw_strerror(err));
	}
	return err;
}

/* Send what is pending without blocking. 0 (maybe partial) or -errno. */
static int net_flush(net_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return n < 0 ? -errno : -EPIPE;
	}
	return 0;
}

static inline bool net_unsent(const net_conn *c)
{
	return c->out_off < c->out_len;
}

/* Receive what is there (block: wait up to the socket's 100 ms timeout). Bytes read, 0, or -errno
 * (-ECONNRESET when the server closed, -ENOBUFS when one reply outgrew the buffer). */
static int net_fill(net_conn *c, bool block)
{
	if (c->in_beg == c->in_end) {
		c->in_beg = c->in_end = 0;
	} else if (c->in_beg > 0 && c->in_cap - c->in_end < c->in_cap / 2) {
		memmove(c->in, c->in + c->in_beg, c->in_end - c->in_beg);
		c->in_end -= c->in_beg;
		c->in_beg = 0;
	}
	if (c->in_end == c->in_cap)
		return -ENOBUFS;
	for (;;) {
		ssize_t n = recv(c->fd, c->in + c->in_end, c->in_cap - c->in_end, block ? 0 : MSG_DONTWAIT);
		if (n > 0) {
			c->in_end += (size_t)n;
			c->fresh = true;
			return (int)SPW_MIN(n, (ssize_t)INT32_MAX);
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return -errno;
	}
}

/* Wait for replies on any connection (and for room to send where bytes are pending). One
 * connection with nothing pending blocks in recv itself (note 3). 0 or -errno. */
static int net_wait(net_state *st, uint64_t timeout_ns, bool may_block)
{
	if (st->n == 1 && may_block && !net_unsent(&st->c[0])) {
		int rc = net_fill(&st->c[0], true);
		return rc < 0 ? rc : 0;
	}
	for (int i = 0; i < st->n; i++) {
		st->pfd[i].fd = st->c[i].fd;
		st->pfd[i].events = (short)(POLLIN | (net_unsent(&st->c[i]) ? POLLOUT : 0));
		st->pfd[i].revents = 0;
	}
	struct timespec ts = { .tv_sec = (time_t)(timeout_ns / 1000000000ULL),
	                       .tv_nsec = (long)(timeout_ns % 1000000000ULL) };
	int n = ppoll(st->pfd, (nfds_t)st->n, &ts, NULL);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; n > 0 && i < st->n; i++) {
		short re = st->pfd[i].revents;
		if (!re)
			continue;
		n--;
		int rc;
		if ((re & POLLOUT) && (rc = net_flush(&st->c[i])) < 0)
			return rc;
		if ((re & (POLLIN | POLLERR | POLLHUP)) && (rc = net_fill(&st->c[i], false)) < 0)
			return rc;
	}
	return 0;
}

/* ---------------- setup ---------------- */

static void net_teardown(net_state *st)
{
	for (int i = 0; st->c && i < st->n; i++) {
		if (st->c[i].fd >= 0)
			close(st->c[i].fd);
		free(st->c[i].in);
		free(st->c[i].sbuf);
		free(st->c[i].ring);
	}
	free(st->c);
	free(st->pfd);
	for (uint32_t i = 0; st->batches && i < st->nbatches; i++)
		bench_batch_free(&st->batches[i]);
	free(st->batches);
	memset(st, 0, sizeof(*st));
}

/* Largest single request the online workload sends. */
static size_t net_online_req_max(const bench_run *r)
{
	size_t m = 0;
	for (int i = 0; i < r->nwl; i++)
		m = SPW_MAX(m, bench_req_size(r->ks, r->wl_op[i], 1));
	return m;
}

/* Keys per round trip of the load, and its send buffer size. */
static void net_load_sizes(const bench_run *r, uint32_t *keys_rt, size_t *bytes)
{
	const bench_keyspace *ks = r->ks;
	uint32_t k = (uint32_t)r->batch;
	if (ks->fields) {
		*bytes = (size_t)k * bench_hash_load_size(ks);
	} else if (r->o->op == BENCH_OP_MSET) {
		uint32_t cmds = (k + NET_LOAD_MSET_KEYS - 1) / NET_LOAD_MSET_KEYS;
		*bytes = (size_t)cmds * bench_req_size(ks, BENCH_OP_MSET, NET_LOAD_MSET_KEYS);
	} else {
		*bytes = (size_t)k * bench_req_size(ks, BENCH_OP_SET, 1);
	}
	*keys_rt = k;
}

static int net_setup(bench_worker *w, net_state *st)
{
	bench_run *r = w->run;
	const bench_keyspace *ks = r->ks;
	struct addrinfo *ai = NULL;
	int rc;

	memset(st, 0, sizeof(*st));
	st->n = r->mode == BENCH_MODE_LOAD ? 1 : r->conns;
	st->c = calloc((size_t)st->n, sizeof(*st->c));
	st->pfd = calloc((size_t)st->n, sizeof(*st->pfd));
	if (!st->c || !st->pfd)
		goto nomem;
	for (int i = 0; i < st->n; i++)
		st->c[i].fd = -1;

	/* Receive buffers hold any single reply (or MGET element) twice over. */
	size_t in_cap = SPW_MAX((size_t)256 << 10, 2 * (size_t)ks->vallen + 4096);
	for (int i = 0; i < st->n; i++) {
		st->c[i].in_cap = in_cap;
		if (!(st->c[i].in = malloc(in_cap)))
			goto nomem;
	}

	if (r->mode == BENCH_MODE_OFFLINE) {
		st->nbatches = bench_offline_batch_count(ks, r->o->op, (uint32_t)r->batch);
		st->batches = calloc(st->nbatches, sizeof(*st->batches));
		if (!st->batches)
			goto nomem;
		for (uint32_t i = 0; i < st->nbatches; i++) {
			rc = bench_batch_build(&st->batches[i], ks, r->o->op, (uint32_t)r->batch, &w->rng, NULL);
			if (rc < 0) {
				bench_worker_fail(w, rc, "cannot build batch %u of %d %s: %s", i, r->batch,
				                  bench_op_name(r->o->op), spw_strerror(rc));
				goto fail;
			}
		}
	} else if (r->mode == BENCH_MODE_ONLINE) {
		uint32_t cap = (uint32_t)r->itp;
		if (r->rate > 0)
			cap = SPW_MAX(cap, (uint32_t)NET_RATE_INFLIGHT);
		size_t req = net_online_req_max(r);
		cap = (uint32_t)SPW_MAX((size_t)1, SPW_MIN((size_t)cap, NET_SBUF_MAX / req));
		uint32_t ring = 1;
		while (ring < cap)
			ring <<= 1;
		for (int i = 0; i < st->n; i++) {
			net_conn *c = &st->c[i];
			c->ring_mask = ring - 1;
			c->scap = (size_t)cap * req;
			c->ring = calloc(ring, sizeof(*c->ring));
			c->sbuf = malloc(c->scap);
			if (!c->ring || !c->sbuf)
				goto nomem;
			c->out = c->sbuf;
			c->cap = cap;
		}
	} else {
		uint32_t keys_rt;
		size_t bytes;
		net_load_sizes(r, &keys_rt, &bytes);
		st->c[0].scap = bytes;
		if (!(st->c[0].sbuf = malloc(bytes)))
			goto nomem;
		st->c[0].out = st->c[0].sbuf;
	}

	if ((rc = net_resolve(w, &ai)) < 0)
		goto fail;
	for (int i = 0; i < st->n; i++)
		if ((rc = net_conn_open(w, ai, &st->c[i])) < 0)
			goto fail;
	freeaddrinfo(ai);
	return 0;
nomem:
	rc = -ENOMEM;
	bench_worker_fail(w, rc, "out of memory while setting up");
fail:
	if (ai)
		freeaddrinfo(ai);
	return rc;
}

/* ---------------- offline ---------------- */

static void net_offline_start(bench_worker *w, net_state *st, net_conn *c)
{
	(void)w;
	c->b = &st->batches[c->bidx];
	c->bidx = c->bidx + 1 == st->nbatches ? 0 : c->bidx + 1;
	c->pending = c->b->nreq;
	c->key_pos = 0;
	c->arr_left = 0;
	c->out = c->b->buf;
	c->out_len = c->b->len;
	c->out_off = 0;
	c->t_sent = spw_mono_ns();
}

/* One top-level reply of the batch is complete. */
static inline void net_offline_done(bench_worker *w, net_conn *c, uint64_t now, uint32_t keys)
{
	uint64_t n = bench_op_multi(c->b->op) ? keys : 1;
	c->pending--;
	w->ops += n;
	bench_hist_record_n(&w->h[w->cur], (int64_t)(now - c->t_sent), n);
}

/* Consume and check the replies that arrived for c's batch. 0 or -EPROTO. */
static int net_offline_replies(bench_worker *w, net_conn *c, uint64_t now)
{
	const bench_batch *b = c->b;
	const bench_keyspace *ks = w->run->ks;
	while (c->pending && c->in_beg < c->in_end) {
		const char *p = c->in + c->in_beg;
		size_t len = c->in_end - c->in_beg, used;
		char type;
		int rc;
		if (b->op == BENCH_OP_MGET && c->arr_left == 0 && p[0] == '*') {
			int64_t cnt;
			rc = bench_array_header(p, len, &used, &cnt);
			if (rc == RESP_INCOMPLETE)
				break;
			if (rc != RESP_OK)
				return -EPROTO;
			c->in_beg += used;
			if (cnt != (int64_t)b->nkeys) {
				char what[64];
				int wl = snprintf(what, sizeof(what), "an array of %lld elements for %u keys", (long long)cnt,
				                  b->nkeys);
				bench_check_note(&w->check, BENCH_REPLY_WRONG, b->op, b->keys[0], what, (size_t)wl);
			}
			if (cnt <= 0)
				net_offline_done(w, c, now, b->nkeys);
			else
				c->arr_left = cnt, c->arr_seen = 0;
			continue;
		}
		rc = resp_reply_skip(p, len, &used, &type);
		if (rc == RESP_INCOMPLETE)
			break;
		if (rc != RESP_OK)
			return -EPROTO;
		c->in_beg += used;
		if (c->arr_left > 0) {
			/* An element of an MGET array (note 2). */
			if (c->arr_seen < b->nkeys)
				bench_reply_check(&w->check, ks, b->op, b->keys[c->arr_seen], p, used);
			c->arr_seen++;
			if (--c->arr_left == 0)
				net_offline_done(w, c, now, b->nkeys);
			continue;
		}
		uint64_t key = b->nkeys ? b->keys[bench_op_multi(b->op) ? 0 : c->key_pos] : 0;
		bench_reply_check(&w->check, ks, b->op, key, p, used);
		c->key_pos++;
		net_offline_done(w, c, now, b->nkeys);
	}
	return 0;
}

/* ---------------- online ---------------- */

/* Queue one request on c (room is guaranteed: at most cap in flight, sbuf holds cap requests). */
static inline void net_push(bench_worker *w, net_conn *c, int op, uint64_t key, uint64_t t_ns)
{
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
	} else if (c->out_off > 0) {
		memmove(c->sbuf, c->sbuf + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	c->out_len += bench_req_encode(w->run->ks, op, &key, 1, c->sbuf + c->out_len, NULL, NULL);
	net_inflight *f = &c->ring[(c->ring_head + c->ring_n) & c->ring_mask];
	f->t_ns = t_ns;
	f->key = key;
	f->op = op;
	c->ring_n++;
	if (!t_ns)
		c->unstamped++;
}

static inline void net_push_next(bench_worker *w, net_conn *c, uint64_t t_ns)
{
	bench_run *r = w->run;
	int op = bench_workload_pick(r, &w->rng);
	uint64_t key = bench_req_pick(r->ks, op, &w->rng);
	net_push(w, c, op, key, t_ns);
}

/* Closed loop: give the requests queued since the last send one start time, then send. */
static int net_stamp_flush(net_conn *c)
{
	if (c->unstamped) {
		uint64_t t = spw_mono_ns();
		for (uint32_t i = c->ring_n - c->unstamped; i < c->ring_n; i++)
			c->ring[(c->ring_head + i) & c->ring_mask].t_ns = t;
		c->unstamped = 0;
	}
	return net_flush(c);
}

static int net_online_replies(bench_worker *w, net_conn *c, uint64_t now)
{
	const bench_keyspace *ks = w->run->ks;
	bench_hist *h = &w->h[w->cur];
	while (c->ring_n && c->in_beg < c->in_end) {
		size_t used;
		char type;
		int rc = resp_reply_skip(c->in + c->in_beg, c->in_end - c->in_beg, &used, &type);
		if (rc == RESP_INCOMPLETE)
			break;
		if (rc != RESP_OK)
			return -EPROTO;
		net_inflight *f = &c->ring[c->ring_head];
		bench_reply_check(&w->check, ks, f->op, f->key, c->in + c->in_beg, used);
		bench_hist_record(h, now > f->t_ns ? (int64_t)(now - f->t_ns) : 0);
		w->ops++;
		c->ring_head = (c->ring_head + 1) & c->ring_mask;
		c->ring_n--;
		c->in_beg += used;
	}
	return 0;
}

/* ---------------- the loops ---------------- */

static int net_fail_io(bench_worker *w, int rc)
{
	const char *why = rc == -EPROTO ? "the server sent bytes that are not RESP" :
	                  rc == -ECONNRESET ? "the server closed the connection" :
	                  rc == -ENOBUFS ? "a reply larger than the receive buffer" : spw_strerror(rc);
	bench_worker_fail(w, rc, "connection to %s:%s: %s", w->run->o->host, w->run->o->port, why);
	return rc;
}

static int net_run(bench_worker *w, net_state *st)
{
	bench_run *r = w->run;
	bool online = r->mode == BENCH_MODE_ONLINE;
	bool paced = online && r->rate > 0;
	uint64_t interval = paced ? (uint64_t)(1e9 * r->threads / r->rate) : 0;
	uint64_t next_due = spw_mono_ns();
	int rr = 0, rc;

	if (interval == 0)
		interval = 1;
	for (int i = 0; i < st->n; i++) {
		net_conn *c = &st->c[i];
		if (!online) {
			c->bidx = (uint32_t)i % st->nbatches;
			net_offline_start(w, st, c);
		} else if (!paced) {
			while (c->ring_n < c->cap)
				net_push_next(w, c, 0);
		}
		if ((rc = online ? net_stamp_flush(c) : net_flush(c)) < 0)
			return net_fail_io(w, rc);
	}

	while (!bench_run_stopped(r)) {
		uint64_t timeout = NET_POLL_NS;
		if (online)
			bench_worker_publish(w);
		if (paced) {
			/* Queue every request that is due, round robin over connections with room (note 5). */
			uint64_t now = spw_mono_ns();
			int full = 0;
			while (next_due <= now && full < st->n) {
				net_conn *c = &st->c[rr];
				rr = rr + 1 == st->n ? 0 : rr + 1;
				if (c->ring_n >= c->cap) {
					full++;
					continue;
				}
				full = 0;
				net_push_next(w, c, next_due);
				next_due += interval;
			}
			for (int i = 0; i < st->n; i++)
				if (net_unsent(&st->c[i]) && (rc = net_flush(&st->c[i])) < 0)
					return net_fail_io(w, rc);
			now = spw_mono_ns();
			timeout = next_due > now ? SPW_MIN(next_due - now, NET_POLL_NS) : (full ? NET_POLL_NS : 0);
		}
		if ((rc = net_wait(st, timeout, !paced)) < 0)
			return net_fail_io(w, rc);
		uint64_t now = spw_mono_ns();
		for (int i = 0; i < st->n; i++) {
			net_conn *c = &st->c[i];
			if (!c->fresh)
				continue;
			c->fresh = false;
			if (!online) {
				if ((rc = net_offline_replies(w, c, now)) < 0)
					return net_fail_io(w, rc);
				if (c->pending == 0) {
					net_offline_start(w, st, c);
					if ((rc = net_flush(c)) < 0)
						return net_fail_io(w, rc);
				}
				continue;
			}
			if ((rc = net_online_replies(w, c, now)) < 0)
				return net_fail_io(w, rc);
			if (!paced) {
				while (c->ring_n < c->cap)
					net_push_next(w, c, 0);
				if ((rc = net_stamp_flush(c)) < 0)
					return net_fail_io(w, rc);
			}
		}
	}
	return 0;
}

/* Load [lo, hi) with SET pipelines, MSET commands of NET_LOAD_MSET_KEYS keys or (a hash key space)
 * one HSET of all fields per key, one round trip of r->batch keys at a time, checking every reply. */
static int net_load(bench_worker *w, net_state *st)
{
	bench_run *r = w->run;
	const bench_keyspace *ks = r->ks;
	net_conn *c = &st->c[0];
	bool hash = ks->fields > 0;
	bool mset = !hash && r->o->op == BENCH_OP_MSET;
	int op = hash ? BENCH_OP_HSET : mset ? BENCH_OP_MSET : BENCH_OP_SET;
	uint32_t keys_rt;
	size_t bytes;
	uint64_t keys[NET_LOAD_MSET_KEYS];
	int rc;

	net_load_sizes(r, &keys_rt, &bytes);
	for (uint64_t next = w->lo; next < w->hi && !bench_run_stopped(r);) {
		uint64_t end = SPW_MIN(w->hi, next + keys_rt);
		uint32_t cmds = 0;
		c->out_len = c->out_off = 0;
		for (uint64_t k = next; k < end;) {
			uint32_t n = mset ? (uint32_t)SPW_MIN((uint64_t)NET_LOAD_MSET_KEYS, end - k) : 1;
			for (uint32_t j = 0; j < n; j++)
				keys[j] = k + j;
			if (hash)
				c->out_len += bench_hash_load_encode(ks, k, c->sbuf + c->out_len);
			else
				c->out_len += bench_req_encode(ks, op, keys, n, c->sbuf + c->out_len, NULL, NULL);
			k += n;
			cmds++;
		}
		if ((rc = net_flush(c)) < 0)
			return net_fail_io(w, rc);
		while (cmds > 0) {
			if (bench_run_stopped(r) && !net_unsent(c))
				break;
			if ((rc = net_wait(st, NET_POLL_NS, true)) < 0)
				return net_fail_io(w, rc);
			while (cmds > 0 && c->in_beg < c->in_end) {
				size_t used;
				char type;
				rc = resp_reply_skip(c->in + c->in_beg, c->in_end - c->in_beg, &used, &type);
				if (rc == RESP_INCOMPLETE)
					break;
				if (rc != RESP_OK)
					return net_fail_io(w, -EPROTO);
				bench_reply_check(&w->check, ks, op, next, c->in + c->in_beg, used);
				c->in_beg += used;
				cmds--;
			}
		}
		w->ops += end - next;
		atomic_store_explicit(&w->loaded, w->ops, memory_order_relaxed);
		next = end;
	}
	return 0;
}

void *bench_net_worker(void *arg)
{
	bench_worker *w = arg;
	net_state st;
	int rc = net_setup(w, &st);
	if (bench_worker_ready(w, rc)) {
		if (w->run->mode == BENCH_MODE_LOAD)
			net_load(w, &st);
		else
			net_run(w, &st);
	}
	w->t_end_ns = spw_mono_ns();
	net_teardown(&st);
	atomic_store(&w->done, true);
	return NULL;
}
