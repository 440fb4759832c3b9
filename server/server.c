/*
 * server.c - start-up, workers, event loops and connections.
 *
 * Sections: start-up and shutdown (server_main) / workers (threads, event loop, timed work) /
 * connections (accept, read, parse and dispatch, write, close) / reply chunk pool / storage tier
 * (parking and resuming clients, opening the device) / cross-worker requests (CLIENT KILL, CLIENT
 * LIST, shutdown) / CLIENT LIST lines.
 *
 * Design notes:
 *  1. --threads N workers. Each is one thread with its own epoll fd, its own listening socket(s)
 *     bound with SO_REUSEPORT on the same bind:port (the kernel spreads new connections; there is
 *     no accept hand-off), its own eventfd for wake-ups and its own hlog session, opened on the
 *     worker's thread. A connection lives on the worker that accepted it, for life: read, parse,
 *     execute and write all happen there, so a client needs no lock.
 *  2. One pass of a worker's loop:
 *        epoll_wait (timeout -1 unless there is timed work: idle-client timeout, a paused
 *          listener, a shutdown drain; an idle worker sleeps in the kernel, it never polls)
 *        -> read the clocks once; hlog_session_protect + set_now
 *        -> accept / wake-ups / for each readable client: read() into rbuf (until a short read or
 *           READS_PER_PASS reads, for fairness), parse every complete request and dispatch it;
 *           replies accumulate in c->out
 *        -> hlog_session_unprotect (replies are copies: the writes need no epoch)
 *        -> for each client with pending output: ONE writev over its reply chunks; close the
 *           clients marked for closing
 *        -> add the pass's duration to the worker's busy time.
 *     State machine of a client's events: EPOLLIN while it may be read; EPOLLOUT only while a
 *     writev left bytes unsent (client_events_update makes the one epoll_ctl per change).
 *  3. epoll is level-triggered, so a short read (fewer bytes than asked) means the socket is
 *     drained for now and we skip the read that would return EAGAIN; whatever arrives later, or
 *     whatever the per-pass cap left unread, raises the next epoll_wait.
 *  4. The read buffer holds [rpos, rlen) unparsed bytes. Requests are parsed in place: arguments
 *     are slices into rbuf, valid while the command runs. When the parser knows the size of the
 *     request in progress (a big bulk), the buffer grows to hold it whole (resp_parser_hint), so a
 *     512 MB value is read once into its final place. Unparsed bytes are moved to the front only
 *     when the room left behind them is short; an emptied buffer resets to offset 0 for free.
 *     Buffers grown past RBUF_SHRINK_ABOVE go back to the default size once empty.
 *  5. Reply chunks come from a per-worker pool of 16 KiB chunks; larger chunks (one big bulk) are
 *     malloc'd to size and freed after sending. The steady state allocates nothing.
 *  6. Back-pressure: when a client's unsent replies pass output-pause-bytes it is not read (nor
 *     are its already-buffered requests parsed) until they drain below half of that; then its
 *     buffered requests are processed at once (no new data may ever arrive to wake us).
 *  7. Closing: a client is only freed at the end of a pass (pending_flush), never while its events
 *     may still be in the pass's event array. CLIENT_CLOSE_AFTER_REPLY (QUIT, protocol errors,
 *     SHUTDOWN) stops reading and closes once the output is out; CLIENT_CLOSE_ASAP closes without
 *     writing more.
 *  8. Other threads never touch a client's state except its kill_mark: CLIENT KILL walks each
 *     worker's list under that worker's clients_lock (which the owner takes only to link or unlink
 *     a client), sets kill_mark, sets the worker's kill_pending and writes its eventfd; the owner
 *     closes marked clients. CLIENT LIST reads other workers' clients under the same lock, field
 *     by field, without further synchronization: a snapshot for an operator (server_int.h).
 *  9. Shutdown (SIGTERM/SIGINT or SHUTDOWN): the signal handler only sets g_srv.shutdown and
 *     writes every worker's eventfd. Each worker then closes its listeners, stops reading, writes
 *     the replies it owes for up to SHUTDOWN_DRAIN_MS, closes its clients and its hlog session and
 *     exits; the main thread joins them, closes the store and returns 0.
 * 10. Stats are per worker and written only by their worker (no shared counter on the request
 *     path); INFO sums them with relaxed loads. The only shared atomics touched per connection are
 *     g_srv.nclients (maxclients) and g_srv.next_client_id.
 *
 * The storage tier (--storage-tier; tier_open maps Garnet's flags onto device/device.h):
 * 11. Each worker attaches its hlog session on its own thread (hlog_session_attach: the session's
 *     device queue belongs to that thread) and puts hlog_session_fd in its epoll set, so one
 *     epoll_wait sleeps on sockets and device completions together. The fd is edge-triggered and
 *     never read: each signal (eventfd_signal wakes its waiters whatever the count) is one report,
 *     and the pass it wakes polls, which reaps everything the signal announced. Every pass calls
 *     hlog_session_poll once after the sockets were served: that one call submits every read the
 *     pass queued (one system call for all of them), reaps completions and runs the store's ready
 *     callbacks. A worker sleeps (epoll timeout -1) only when nothing is left to submit and no
 *     client is ready to resume; while clients are parked and the session has nothing in flight
 *     (reads refused by the device's throttle, a flush another session must finish) it sleeps at
 *     most TIER_TICK_MS instead, so a wake-up that belongs to another thread cannot be lost; while
 *     they wait on its own reads it sleeps at most TIER_PARKED_SLEEP_MS: the device's fd normally
 *     wakes it long before, and should a signal ever be missed (one stall of this kind was seen
 *     once under ASan with 4 workers, cause not found), a parked client waits 10 ms, not forever.
 *     Completions are reaped only by the worker that queued the reads (its own queue). A poll
 *     that handled completions while clients stay parked is followed by another (a few per pass,
 *     then the next pass does not sleep): the poll refills freed throttle slots from the store's
 *     backlog, and a synchronous device completes those reads without signalling its fd, so
 *     sleeping on it would hang a long backlog (many reads of one op beyond the throttle, note 14).
 * 12. A client's life around a pending read:
 *
 *       running --HLOG_PENDING--> parked --ready callback--> resume list --re-run--> running
 *                (reply_pending)  (io_wait)  (in poll)       (in_resume)  (same      (release)
 *                                    |                                     request)
 *                                    +-- closed --> release (its reads complete unseen), freed
 *
 *     Parking (command_dispatch, client_park): the handler returned without a reply and without
 *     changing the store (multi-key commands prefetch every key first, and keep in c->resume what
 *     they did if a later step still parks). Whatever it wrote to c->out is rolled back and its
 *     stats undone, rpos stays at the start of the request and the parser is reset, so the read
 *     buffer may be compacted or grown meanwhile: the re-run parses the request again from its
 *     bytes. No later request of that client runs and the client is not read (EPOLLIN is dropped
 *     the first time it fires; note 14's look-ahead is the exception), so its replies stay in
 *     request order; every other connection of
 *     the worker goes on. The ready callback only links the client on the resume list (callbacks
 *     run inside the store); after hlog_session_poll returns, worker_resume re-runs each request
 *     (now served from the session's fetch cache), calls hlog_session_release for it and goes on
 *     with the client's pipeline. A re-run may park again (a record evicted meanwhile).
 * 13. The op_ctx the store tags reads with is a client_op that names its client: the client's own
 *     (self_op) or a slot of its look-ahead ring (note 14). A client closed while parked is released
 *     before it is freed: hlog_session_release forgets each of its ops, and their reads still in
 *     flight complete without a ready callback (log/hlog.h), so a later client allocated at the
 *     same address never receives a stale callback. A client on the resume list is unlinked first.
 *     A ready callback for the self_op of a client not parked on it (an op that failed after
 *     queuing reads, or a second callback for an op already re-run) only releases it.
 * 14. Scatter-gather GET (--sg-get, on by default, CONFIG SET at run time). When a GET or an MGET
 *     parks, the complete requests already in the client's read buffer after it are parsed with the
 *     worker's own look-ahead parser (slices point into rbuf and are used at once) and, for each
 *     consecutive GET or MGET, every key is handed to hlog_prefetch: their reads join the parked
 *     one's in this pass's single submission. Each covered request gets its own op, a slot of the
 *     client's look-ahead ring (client_op, in request order from sg_head), so that the store calls
 *     back per request: the parked client resumes as soon as the request it waits on has its
 *     records, runs every following request whose reads are in, and parks again on the first one
 *     still reading (on that request's slot). Replies before the first miss go out at once, a later
 *     one waits only for the misses before it. A slot's records are dropped (hlog_session_release)
 *     when its request has run, so what a client holds is bounded by SG_LOOKAHEAD_KEYS, and a slot
 *     whose reads finish before its client reaches it is simply found complete.
 *     A parked client is still read while its look-ahead can take more (client_sg_open: at most
 *     SG_LOOKAHEAD_KEYS keys, SG_RING requests, SG_READ_MAX unparsed bytes): what arrives only
 *     extends the look-ahead (from rpos + sg_scan), so a client that keeps a window of GETs in
 *     flight keeps the device's queue full instead of draining it batch by batch. The walk stops
 *     at the first other request (sg_stop until the covered ones ran): a later GET must not run
 *     before a write before it, and although a prefetch alone could not show it a stale value
 *     (the store checks the index first, so a newer version written meanwhile wins), reading
 *     early for a request that a write will answer differently is wasted IO. Reads beyond the
 *     device throttle wait in the store's backlog, never on the worker. Replies come out in
 *     request order because the requests still run one by one, as before; only their reads moved
 *     earlier. All of it runs only when a GET parked: the memory-only and all-in-memory paths do
 *     not change.
 *     Across connections nothing is needed: every read queued during a pass, by any client of the
 *     worker, goes out in the one hlog_session_poll at the end of the pass (note 11).
 */
#include "server/server.h"
#include "server/server_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "device/device.h"

server_state g_srv;

#define RBUF_DEFAULT        (16 * 1024)
#define RBUF_MIN_ROOM       1024          /* read only when at least this much room is free */
#define RBUF_SHRINK_ABOVE   (256 * 1024)
#define READS_PER_PASS      4
#define ACCEPTS_PER_PASS    64
#define MAX_EVENTS          256
#define WRITE_IOV           256
#define WRITEVS_PER_FLUSH   4
#define CHUNK_CAP           16384u        /* payload of a pooled chunk: what resp_write.c asks for at least */
#define CHUNK_BYTES         (sizeof(resp_chunk) + CHUNK_CAP)
#define CHUNK_POOL_MAX      1024          /* 16 MiB of idle chunks per worker at most */
#define SCRATCH_KEEP        (4u << 20)
#define SHUTDOWN_DRAIN_MS   2000
#define LISTEN_BACKLOG      511
#define MAX_BIND            ((int)SPW_ARRAY_LEN(((worker *)0)->listen_fds))
#define TIER_TICK_MS        1             /* longest sleep while parked clients wait on others */
#define TIER_PARKED_SLEEP_MS 10           /* longest sleep while parked clients wait on own reads */
#define TIER_POLL_ROUNDS    4             /* poll/resume rounds per pass before yielding to epoll */
#define TIER_QUEUE_DEFAULT  1024          /* per-worker device queue depth when no throttle given */
#define SG_LOOKAHEAD_KEYS   1024          /* keys a client's look-ahead holds prefetched at most (note 14) */
#define SG_RING             1024          /* requests it covers at most (a power of two) */
#define SG_CHUNK            16            /* ring slots allocated together */
#define SG_READ_MAX         (256u << 10)  /* a parked client is read on while less is unparsed */

/* The worker running on this thread (NULL elsewhere). */
static __thread worker *tl_worker;
static _Atomic int start_failed;

static void client_free(worker *w, client *c);
static void client_process_input(worker *w, client *c);
static void client_tier_forget(worker *w, client *c);
static bool client_sg_open(const client *c);

/* ---------------- reply chunk pool ---------------- */

static resp_chunk *chunk_alloc(void *ctx, size_t min_cap)
{
	worker *w = ctx;
	resp_chunk *k;
	if (min_cap <= CHUNK_CAP) {
		k = w->chunk_pool;
		if (k) {
			w->chunk_pool = k->next;
			w->chunk_pool_len--;
		} else {
			k = malloc(CHUNK_BYTES);
			if (!k)
				return NULL;
			w->buf_bytes += CHUNK_BYTES;
		}
		k->cap = CHUNK_CAP;
	} else {
		if (min_cap > UINT32_MAX - 4096)
			return NULL;
		size_t cap = min_cap;   /* exactly: one big bulk, freed once sent */
		k = malloc(sizeof(resp_chunk) + cap);
		if (!k)
			return NULL;
		w->buf_bytes += (int64_t)(sizeof(resp_chunk) + cap);
		k->cap = (uint32_t)cap;
	}
	k->next = NULL;
	k->len = 0;
	k->sent = 0;
	k->pad = 0;
	return k;
}

static void chunk_release_list(worker *w, resp_chunk *k)
{
	while (k) {
		resp_chunk *next = k->next;
		if (k->cap == CHUNK_CAP && w->chunk_pool_len < CHUNK_POOL_MAX) {
			k->next = w->chunk_pool;
			w->chunk_pool = k;
			w->chunk_pool_len++;
		} else {
			w->buf_bytes -= (int64_t)(sizeof(resp_chunk) + k->cap);
			free(k);
		}
		k = next;
	}
}

uint8_t *worker_scratch(worker *w, size_t n)
{
	if (SPW_LIKELY(n <= w->scratch_cap))
		return w->scratch;
	size_t cap = SPW_MAX(n, SPW_MAX(w->scratch_cap * 2, (size_t)4096));
	uint8_t *p = realloc(w->scratch, cap);
	if (!p)
		return NULL;
	w->buf_bytes += (int64_t)(cap - w->scratch_cap);
	w->scratch = p;
	w->scratch_cap = cap;
	return p;
}

/* ---------------- client list and events ---------------- */

static void pending_add(worker *w, client *c)
{
	if (c->in_pending)
		return;
	c->in_pending = true;
	c->pending_next = w->pending;
	w->pending = c;
}

void client_close_async(client *c)
{
	c->flags |= CLIENT_CLOSE_ASAP;
	pending_add(c->w, c);
}

/* Whether c's socket is read now: not paused or closing, and not parked unless its look-ahead can
 * take more requests (note 14). */
static bool client_readable(const client *c)
{
	if (c->flags & (CLIENT_READ_PAUSED | CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP))
		return false;
	return !(c->flags & CLIENT_PARKED) || client_sg_open(c);
}

/* Make epoll's interest match what the client needs now: EPOLLIN unless it is paused or closing,
 * EPOLLOUT while output is waiting for the socket. One epoll_ctl only when that changes. */
static void client_events_update(worker *w, client *c)
{
	uint32_t want = 0;
	if (client_readable(c) && !w->stopping)
		want |= EPOLLIN;
	if (c->out.bytes)
		want |= EPOLLOUT;
	if (want == c->ev)
		return;
	struct epoll_event ev = { .events = want, .data.ptr = c };
	if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->ev = want;
	else
		client_close_async(c);
}

static void addr_format(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%d", ip, ntohs(s6->sin6_port));
	} else if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%d", ip, ntohs(s4->sin_port));
	} else {
		snprintf(buf, cap, "?:0");
	}
}

static void client_create(worker *w, int fd, const struct sockaddr_storage *peer)
{
	client *c = calloc(1, sizeof(*c));
	resp_limits lim;
	int one = 1;

	if (!c)
		goto fail;
	c->rbuf = malloc(RBUF_DEFAULT);
	if (!c->rbuf)
		goto fail;
	c->rcap = RBUF_DEFAULT;
	w->buf_bytes += RBUF_DEFAULT;
	c->fd = fd;
	c->w = w;
	c->self_op.c = c;
	c->id = atomic_fetch_add_explicit(&g_srv.next_client_id, 1, memory_order_relaxed);
	c->proto = 2;
	lim.max_bulk_len = __atomic_load_n(&g_cfg.proto_max_bulk_len, __ATOMIC_RELAXED);
	lim.max_querybuf = __atomic_load_n(&g_cfg.querybuf_limit, __ATOMIC_RELAXED);
	resp_parser_init(&c->parser, &lim);
	resp_out_init(&c->out, chunk_alloc, w);
	c->out.proto = 2;
	c->ctime_ms = c->last_ms = w->now_ms;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int ka = __atomic_load_n(&g_cfg.tcp_keepalive, __ATOMIC_RELAXED);
	if (ka > 0) {
		int intvl = SPW_MAX(ka / 3, 1), cnt = 3;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &ka, sizeof(ka));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	addr_format(peer, c->addr, sizeof(c->addr));
	if (getsockname(fd, (struct sockaddr *)&local, &llen) == 0)
		addr_format(&local, c->laddr, sizeof(c->laddr));

	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		resp_parser_fini(&c->parser);
		goto fail;
	}
	c->ev = EPOLLIN;

	pthread_mutex_lock(&w->clients_lock);
	c->next = w->clients;
	if (w->clients)
		w->clients->prev = c;
	w->clients = c;
	w->nclients++;
	pthread_mutex_unlock(&w->clients_lock);
	w->stats.connections++;
	spw_log(SPW_LOG_VERBOSE, 0, "Accepted %s", c->addr);
	return;
fail:
	spw_log(SPW_LOG_WARNING, errno, "Error registering a client connection");
	if (c) {
		if (c->rbuf) {
			free(c->rbuf);
			w->buf_bytes -= RBUF_DEFAULT;
		}
		free(c);
	}
	close(fd);
	atomic_fetch_sub_explicit(&g_srv.nclients, 1, memory_order_relaxed);
}

static void client_free(worker *w, client *c)
{
	pthread_mutex_lock(&w->clients_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	w->nclients--;
	pthread_mutex_unlock(&w->clients_lock);
	atomic_fetch_sub_explicit(&g_srv.nclients, 1, memory_order_relaxed);

	close(c->fd);   /* also removes it from epoll: the fd is never dup'ed */
	chunk_release_list(w, c->out.head);
	c->out.head = c->out.tail = NULL;
	w->buf_bytes -= (int64_t)c->rcap;
	free(c->rbuf);
	resp_parser_fini(&c->parser);
	if (w->tier)
		client_tier_forget(w, c);   /* always: a failed command may have left reads under self_op */
	if (c->sg_chunks) {
		for (uint32_t i = 0; i < SG_RING / SG_CHUNK; i++)
			free(c->sg_chunks[i]);
		free(c->sg_chunks);
	}
	free(c);
}

/* ---------------- storage tier: parking and resuming (notes 11-13) ---------------- */

/* Ring slot idx (already masked) of c's look-ahead; its chunk exists. */
static inline client_op *client_sg_slot(client *c, uint32_t idx)
{
	return &c->sg_chunks[idx / SG_CHUNK][idx % SG_CHUNK];
}

/* c is being freed (note 13): off the resume list, and the store forgets its op. */
static void client_tier_forget(worker *w, client *c)
{
	if (c->in_resume) {
		client *prev = NULL;
		for (client *p = w->resume_head; p; prev = p, p = p->resume_next) {
			if (p != c)
				continue;
			if (prev)
				prev->resume_next = c->resume_next;
			else
				w->resume_head = c->resume_next;
			if (w->resume_tail == c)
				w->resume_tail = prev;
			break;
		}
		c->in_resume = false;
	}
	if (c->io_wait) {
		c->io_wait = false;
		w->nparked--;
	}
	hlog_session_release(w->sess, &c->self_op);
	c->op_held = false;
	for (; c->sg_count; c->sg_count--, c->sg_head = (c->sg_head + 1) & (SG_RING - 1))
		hlog_session_release(w->sess, client_sg_slot(c, c->sg_head));
	c->sg_keys = 0;
}

void client_reply_rollback(client *c, resp_chunk *tail, uint32_t tail_len, size_t bytes)
{
	resp_chunk *drop;
	if (tail) {
		drop = tail->next;
		tail->next = NULL;
		tail->len = tail_len;
		c->out.tail = tail;
	} else {
		drop = c->out.head;
		c->out.head = c->out.tail = NULL;
	}
	c->out.bytes = bytes;
	chunk_release_list(c->w, drop);
}

/* The command just dispatched under op returned HLOG_PENDING (command_dispatch already undid its
 * traces). */
static void client_park(worker *w, client *c, client_op *op)
{
	resp_parser_reset(&c->parser);   /* the request is parsed again from rpos on resume */
	if (!c->io_wait) {
		c->io_wait = true;
		w->nparked++;
	}
	c->park_op = op;
	if (op == &c->self_op) {
		c->op_held = true;
		w->stats.parked++;
	} else if (!op->counted) {
		op->counted = true;   /* a covered request's wait counts once: the look-ahead's, or now */
		w->stats.parked++;
	}
	w->io_dirty = true;
}

/* The command that parked has now completed: the store may drop what it fetched for it. */
static void client_op_done(worker *w, client *c)
{
	hlog_session_release(w->sess, &c->self_op);
	c->op_held = false;
	memset(&c->resume, 0, sizeof(c->resume));
}

/* The covered request at the ring's head has run: the store drops what was fetched for it. */
static void client_sg_pop(worker *w, client *c)
{
	client_op *op = client_sg_slot(c, c->sg_head);
	hlog_session_release(w->sess, op);
	c->sg_keys -= op->keys;
	c->sg_head = (c->sg_head + 1) & (SG_RING - 1);
	c->sg_count--;
	c->sg_full = false;
}

/* Whether a parked client is read on: its look-ahead can still cover what arrives (note 14). */
static bool client_sg_open(const client *c)
{
	return c->park_sg && !c->sg_stop && !c->sg_full && c->rlen - c->rpos < SG_READ_MAX;
}

/* c is parked on a GET or MGET: prefetch the keys of the GETs and MGETs that follow the covered
 * ones in rbuf (from rpos + sg_scan), each request under its own ring slot (note 14). */
static void client_sg_extend(worker *w, client *c)
{
	if (c->sg_stop)
		return;
	if (!c->sg_chunks && !(c->sg_chunks = calloc(SG_RING / SG_CHUNK, sizeof(*c->sg_chunks)))) {
		c->sg_stop = true;   /* no look-ahead: the requests run one by one as without sg-get */
		return;
	}
	resp_parser *p = &w->sg_parser;
	uint32_t reqs = 0, keys = 0, pending = 0, waiting = 0;
	size_t from = c->rpos + c->sg_scan;
	hlog_key k;
	while (from < c->rlen) {
		if (c->sg_count == SG_RING) {
			c->sg_full = true;
			break;
		}
		size_t consumed = 0;
		resp_request req;
		int prc = resp_request_parse(p, c->rbuf + from, c->rlen - from, &consumed, &req);
		if (prc != RESP_OK) {
			if (prc != RESP_INCOMPLETE)
				c->sg_stop = true;   /* an error the client's own parse will report */
			break;
		}
		const spw_command *cmd = command_lookup(req.argv[0].ptr, req.argv[0].len);
		if (!cmd || !((cmd->fn == cmd_get && req.argc == 2) || (cmd->fn == cmd_mget && req.argc >= 2))) {
			c->sg_stop = true;   /* a write, or anything else: what follows must not be read early */
			break;
		}
		uint32_t nk = (uint32_t)(req.argc - 1);
		if (c->sg_keys + nk > SG_LOOKAHEAD_KEYS && c->sg_keys > 0) {
			c->sg_full = true;   /* more once covered requests ran */
			break;
		}
		uint32_t idx = (c->sg_head + c->sg_count) & (SG_RING - 1);
		client_op **chunk = &c->sg_chunks[idx / SG_CHUNK];
		if (!*chunk && !(*chunk = malloc(SG_CHUNK * sizeof(**chunk)))) {
			c->sg_full = true;   /* no memory for more: what is covered stays covered */
			break;
		}
		client_op *op = client_sg_slot(c, idx);
		op->c = c;
		op->keys = nk;
		hlog_session_set_op(w->sess, op);
		uint32_t pending0 = pending;
		int i;
		for (i = 1; i < req.argc; i++) {
			hlog_key_init(&k, req.argv[i].ptr, req.argv[i].len);
			int rc = hlog_prefetch(w->sess, &k);
			if (rc < 0)
				break;
			if (rc == HLOG_PENDING)
				pending++;
		}
		keys += (uint32_t)(i - 1);
		if (i < req.argc) {
			/* That request gets the error when it runs, anew: forget what it queued. */
			hlog_session_release(w->sess, op);
			c->sg_stop = true;
			break;
		}
		op->counted = pending != pending0;
		waiting += op->counted;
		reqs++;
		c->sg_count++;
		c->sg_keys += nk;
		c->sg_scan += consumed;
		from += consumed;
	}
	resp_parser_reset(p);
	if (!reqs)
		return;
	w->io_dirty = true;
	w->stats.sg_runs++;
	w->stats.sg_gets += keys;
	w->stats.sg_pending += pending;
	/* A request whose read the look-ahead queued waits on the device as surely as one that
	 * parked itself: tier_parked_commands counts it (it will not park when it runs). */
	w->stats.parked += waiting;
}

/* The store's ready callback (inside hlog_session_poll, on this worker's thread): every read of
 * op_ctx is done. Links the client only when it is parked on that op; worker_resume runs it after
 * the poll returns. A slot's reads done before its client reached it are kept for when it runs;
 * the client's own op ready while the client does not wait on it belongs to a command that failed
 * after queuing reads: forgotten at once. */
static void worker_op_ready(void *cb_arg, void *op_ctx)
{
	worker *w = cb_arg;
	client_op *op = op_ctx;
	client *c = op ? op->c : NULL;
	if (!c || c->in_resume)
		return;
	if (!c->io_wait || c->park_op != op) {
		if (op == &c->self_op)
			hlog_session_release(w->sess, op);
		return;
	}
	c->in_resume = true;
	c->resume_next = NULL;
	if (w->resume_tail)
		w->resume_tail->resume_next = c;
	else
		w->resume_head = c;
	w->resume_tail = c;
}

/* Re-run the request of every client on the resume list, then the rest of its pipeline. The list
 * is taken whole: clients that park again wait for the next poll. */
static void worker_resume(worker *w)
{
	client *c = w->resume_head;
	w->resume_head = w->resume_tail = NULL;
	while (c) {
		client *next = c->resume_next;
		c->resume_next = NULL;
		c->in_resume = false;
		c->io_wait = false;   /* worker_op_ready links parked clients only */
		w->nparked--;
		c->flags &= ~CLIENT_PARKED;
		pending_add(w, c);   /* EPOLLIN comes back in pending_flush */
		client_process_input(w, c);
		c = next;
	}
}

/* Whether every read the session submits signals its fd when it completes later: an asynchronous
 * device (io_uring, libaio, localmemory with threads) does, so a poll that readied nobody need not
 * be repeated to find the rest (each repeat is one more system call chasing them). A synchronous
 * device, or one wrapped for fault injection (it may hold completions back), does not. */
static bool worker_dev_signals(const worker *w)
{
	uint32_t caps = g_srv.dev ? g_srv.dev->caps : 0;
	return w->io_fd >= 0 && (caps & DEV_CAP_ASYNC) && !(caps & DEV_CAP_FAULT);
}

/* Submit queued reads, reap, resume the clients that became ready; a few rounds, since resumed
 * requests may queue new reads. Runs with the session protected. */
static void worker_io_pass(worker *w)
{
	for (int round = 0; round < TIER_POLL_ROUNDS; round++) {
		w->io_dirty = false;
		int handled = hlog_session_poll(w->sess);
		if (!w->resume_head) {
			/* Completions that readied nobody freed throttle slots, which the poll refilled from
			 * the store's backlog: a synchronous device (posix) has already done those reads and
			 * never signals its fd, so poll again rather than sleep on it (note 11). */
			if (handled > 0 && w->nparked && !worker_dev_signals(w))
				continue;
			return;
		}
		worker_resume(w);
		if (!w->io_dirty && !w->resume_head)
			return;
	}
	w->io_dirty = true;   /* not submitted yet: the next epoll_wait must not sleep */
}

/* The session's completion fd fired. It is edge-triggered in the epoll set, so its count is not
 * read (one system call per wake-up saved): every signal of the eventfd is a new edge, and the poll
 * this pass runs reaps what the signal announced; a completion after that signals again (note 11). */
static void worker_io_event(worker *w)
{
	w->io_dirty = true;
}

/* ---------------- accept ---------------- */

static void listeners_pause(worker *w, bool pause)
{
	for (int i = 0; i < w->nlisten; i++) {
		struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.ptr = &w->listen_fds[i] };
		epoll_ctl(w->epfd, EPOLL_CTL_MOD, w->listen_fds[i], &ev);
	}
}

static void accept_all(worker *w, int lfd)
{
	static const char maxerr[] = "-ERR max number of clients reached\r\n";
	for (int k = 0; k < ACCEPTS_PER_PASS; k++) {
		struct sockaddr_storage sa;
		socklen_t len = sizeof(sa);
		int fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Level-triggered: the waiting connection would wake us at once, forever. Stop
				 * listening for a second instead of spinning. */
				spw_log(SPW_LOG_WARNING, errno, "Error accepting a client connection");
				listeners_pause(w, true);
				w->accept_paused = true;
				w->next_cron_ms = w->now_ms + 1000;   /* worker_cron re-arms the listeners */
			}
			return;
		}
		uint32_t n = atomic_fetch_add_explicit(&g_srv.nclients, 1, memory_order_relaxed);
		if (n >= (uint32_t)__atomic_load_n(&g_cfg.maxclients, __ATOMIC_RELAXED)) {
			atomic_fetch_sub_explicit(&g_srv.nclients, 1, memory_order_relaxed);
			ssize_t r = write(fd, maxerr, sizeof(maxerr) - 1);
			(void)r;
			close(fd);
			w->stats.rejected++;
			continue;
		}
		client_create(w, fd, &sa);
	}
}

/* ---------------- read, parse, dispatch ---------------- */

/* Make room to read into: move unparsed bytes to the front or grow the buffer, so that the whole
 * request in progress fits when its size is known (note 4). false on ENOMEM. */
static bool rbuf_make_room(worker *w, client *c)
{
	size_t pending = c->rlen - c->rpos;
	size_t hint = resp_parser_hint(&c->parser);
	size_t need = SPW_MAX(hint, pending) + RBUF_MIN_ROOM;   /* room from rpos */

	if (c->rcap - c->rlen >= RBUF_MIN_ROOM && (hint == 0 || c->rcap - c->rpos >= hint))
		return true;
	if (need <= c->rcap) {
		memmove(c->rbuf, c->rbuf + c->rpos, pending);
		c->rpos = 0;
		c->rlen = pending;
		return true;
	}
	/* Grow: exactly what a known big request needs, else double. */
	size_t cap = hint ? SPW_ALIGN_UP(hint + RBUF_MIN_ROOM, 4096) : SPW_MAX(c->rcap * 2, need);
	char *nb = malloc(cap);
	if (!nb)
		return false;
	memcpy(nb, c->rbuf + c->rpos, pending);
	free(c->rbuf);
	w->buf_bytes += (int64_t)cap - (int64_t)c->rcap;
	c->rbuf = nb;
	c->rcap = cap;
	c->rpos = 0;
	c->rlen = pending;
	return true;
}

static void rbuf_shrink(worker *w, client *c)
{
	char *nb = malloc(RBUF_DEFAULT);
	if (!nb)
		return;
	free(c->rbuf);
	w->buf_bytes += (int64_t)RBUF_DEFAULT - (int64_t)c->rcap;
	c->rbuf = nb;
	c->rcap = RBUF_DEFAULT;
}

/* Parse and run every complete request in [rpos, rlen). */
static void client_process_input(worker *w, client *c)
{
	uint64_t pause = __atomic_load_n(&g_cfg.output_pause_bytes, __ATOMIC_RELAXED);
	w->cmd_clock = server_ticks();
	while (c->rpos < c->rlen) {
		if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_READ_PAUSED | CLIENT_PARKED))
			break;
		size_t consumed = 0;
		resp_request req;
		int rc = resp_request_parse(&c->parser, c->rbuf + c->rpos, c->rlen - c->rpos, &consumed, &req);
		if (SPW_LIKELY(rc == RESP_OK)) {
			/* Reads queued by the request carry its op: its ring slot when the look-ahead covered
			 * it, else the client's own (notes 12, 14); a request that parked under its own op
			 * (op_held) keeps it, the ring covers what follows it. */
			client_op *op = NULL;
			if (w->tier) {
				op = c->sg_count && !c->op_held ? client_sg_slot(c, c->sg_head) : &c->self_op;
				hlog_session_set_op(w->sess, op);
			}
			c->argc = req.argc;
			c->argv = req.argv;
			command_dispatch(c);
			c->argc = 0;
			c->argv = NULL;
			if (SPW_UNLIKELY(c->flags & CLIENT_PARKED)) {
				client_park(w, c, op);   /* rpos stays at the request: it runs again (note 12) */
				c->park_sg = (c->cmd->fn == cmd_get || c->cmd->fn == cmd_mget) &&
				             __atomic_load_n(&g_cfg.sg_get, __ATOMIC_RELAXED);
				if (c->park_sg) {
					if (!c->sg_count)
						c->sg_scan = consumed;   /* the look-ahead starts after this request */
					client_sg_extend(w, c);
				}
				break;
			}
			if (SPW_UNLIKELY(c->sg_count | c->op_held | c->sg_scan)) {
				if (op != &c->self_op)
					client_sg_pop(w, c);
				else if (c->op_held)
					client_op_done(w, c);
				if (c->sg_count) {
					c->sg_scan -= consumed;   /* the covered requests follow this one */
				} else {
					c->sg_scan = 0;
					c->sg_stop = c->sg_full = false;
				}
			}
			c->rpos += consumed;
			if (SPW_UNLIKELY(c->out.oom)) {
				spw_log(SPW_LOG_WARNING, ENOMEM, "Closing client id=%llu addr=%s: reply buffer",
				        (unsigned long long)c->id, c->addr);
				client_close_async(c);
				break;
			}
			if (SPW_UNLIKELY(c->out.bytes > pause))
				c->flags |= CLIENT_READ_PAUSED;
			continue;
		}
		c->rpos += consumed;
		if (rc == RESP_INCOMPLETE)
			break;
		if (rc == RESP_EPROTO) {
			const char *msg = resp_parser_error(&c->parser);
			spw_log(SPW_LOG_VERBOSE, 0, "%s from client: id=%llu addr=%s", msg,
			        (unsigned long long)c->id, c->addr);
			reply_errorf(c, "ERR %s", msg);
			c->flags |= CLIENT_CLOSE_AFTER_REPLY;
		} else if (rc == RESP_EQUERYBUF) {
			spw_log(SPW_LOG_WARNING, 0, "Closing client that reached max query buffer length: "
			        "id=%llu addr=%s (%s, qbuf=%zu)", (unsigned long long)c->id, c->addr,
			        resp_parser_error(&c->parser), c->rlen - c->rpos);
			client_close_async(c);
		} else {
			spw_log(SPW_LOG_WARNING, -rc, "Closing client id=%llu addr=%s: parser",
			        (unsigned long long)c->id, c->addr);
			client_close_async(c);
		}
		break;
	}
	if (c->rpos == c->rlen) {
		c->rpos = c->rlen = 0;
		if (c->rcap > RBUF_SHRINK_ABOVE && resp_parser_hint(&c->parser) == 0)
			rbuf_shrink(w, c);
	}
	if (c->out.bytes || (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_READ_PAUSED)))
		pending_add(w, c);
}

static void client_read(worker *w, client *c)
{
	if (!client_readable(c))
		return;
	for (int k = 0; k < READS_PER_PASS; k++) {
		if (!rbuf_make_room(w, c)) {
			spw_log(SPW_LOG_WARNING, ENOMEM, "Closing client id=%llu addr=%s: read buffer",
			        (unsigned long long)c->id, c->addr);
			client_close_async(c);
			return;
		}
		size_t room = c->rcap - c->rlen;
		ssize_t n = read(c->fd, c->rbuf + c->rlen, room);
		if (n > 0) {
			c->rlen += (size_t)n;
			w->stats.net_in += (uint64_t)n;
			w->stats.reads++;
			c->last_ms = w->now_ms;
			if (c->flags & CLIENT_PARKED) {
				/* Parked on a GET: the new requests only extend its look-ahead (note 14). */
				client_sg_extend(w, c);
				if (!client_sg_open(c)) {
					pending_add(w, c);   /* drop EPOLLIN until it resumes */
					return;
				}
			} else {
				client_process_input(w, c);
			}
			if ((size_t)n < room || !client_readable(c))
				return;
			continue;
		}
		if (n == 0 && (c->flags & CLIENT_PARKED)) {
			/* End of input read early by the look-ahead (a client that shut down its writing
			 * side after a pipeline): its requests still run and are answered first; the end
			 * is read again once the client is no longer parked. */
			c->sg_stop = true;
			pending_add(w, c);   /* drop EPOLLIN */
			return;
		}
		if (n == 0) {
			spw_log(SPW_LOG_VERBOSE, 0, "Client closed connection id=%llu addr=%s",
			        (unsigned long long)c->id, c->addr);
			client_close_async(c);
			return;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		spw_log(SPW_LOG_VERBOSE, errno, "Reading from client id=%llu addr=%s",
		        (unsigned long long)c->id, c->addr);
		client_close_async(c);
		return;
	}
}

/* ---------------- write ---------------- */

/* One writev over the reply chunks (a few more only while the socket takes everything and chunks
 * remain beyond the iovec array). Returns false when the client must be closed. */
static bool client_write(worker *w, client *c)
{
	struct iovec iov[WRITE_IOV];
	for (int round = 0; round < WRITEVS_PER_FLUSH && c->out.bytes; round++) {
		int cnt = 0;
		size_t total = 0;
		for (resp_chunk *k = c->out.head; k && cnt < WRITE_IOV; k = k->next) {
			size_t len = k->len - k->sent;
			if (!len)
				continue;
			iov[cnt].iov_base = k->data + k->sent;
			iov[cnt].iov_len = len;
			total += len;
			cnt++;
		}
		if (!cnt)
			break;
		ssize_t n = writev(c->fd, iov, cnt);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return true;
			spw_log(SPW_LOG_VERBOSE, errno, "Error writing to client id=%llu addr=%s",
			        (unsigned long long)c->id, c->addr);
			return false;
		}
		w->stats.net_out += (uint64_t)n;
		w->stats.writes++;
		c->last_ms = w->now_ms;
		chunk_release_list(w, resp_out_consume(&c->out, (size_t)n));
		if ((size_t)n < total)
			return true;   /* the socket is full: EPOLLOUT will tell us */
	}
	return true;
}

/* Write what each pending client owes, close those marked, update epoll interest. Clients whose
 * output drained below half the pause limit resume: their buffered requests run now (note 6). */
static void pending_flush(worker *w)
{
	uint64_t pause = __atomic_load_n(&g_cfg.output_pause_bytes, __ATOMIC_RELAXED);
	while (w->pending) {
		client *c = w->pending;
		w->pending = NULL;
		while (c) {
			client *next = c->pending_next;
			c->pending_next = NULL;
			c->in_pending = false;
			if (!(c->flags & CLIENT_CLOSE_ASAP) && c->out.bytes && !client_write(w, c))
				c->flags |= CLIENT_CLOSE_ASAP;
			if ((c->flags & CLIENT_CLOSE_ASAP) ||
			    ((c->flags & CLIENT_CLOSE_AFTER_REPLY) && !c->out.bytes)) {
				client_free(w, c);
				c = next;
				continue;
			}
			if ((c->flags & CLIENT_READ_PAUSED) && c->out.bytes <= pause / 2) {
				c->flags &= ~CLIENT_READ_PAUSED;
				if (c->rpos < c->rlen) {
					hlog_session_protect(w->sess);
					client_process_input(w, c);   /* may pend c again: the outer loop sees it */
					hlog_session_unprotect(w->sess);
				}
			}
			client_events_update(w, c);
			c = next;
		}
	}
	if (w->scratch_cap > SCRATCH_KEEP) {
		w->buf_bytes -= (int64_t)w->scratch_cap;
		free(w->scratch);
		w->scratch = NULL;
		w->scratch_cap = 0;
	}
}

/* ---------------- wake-ups, timed work, shutdown ---------------- */

static void worker_stop_begin(worker *w)
{
	if (w->stopping)
		return;
	w->stopping = true;
	w->stop_deadline_ms = w->now_ms + SHUTDOWN_DRAIN_MS;
	if (!atomic_exchange(&g_srv.shutdown_logged, 1)) {
		int sig = atomic_load(&g_srv.shutdown_signal);
		if (sig)
			spw_log(SPW_LOG_WARNING, 0, "Received %s scheduling shutdown...",
			        sig == SIGINT ? "SIGINT" : "SIGTERM");
		spw_log(SPW_LOG_NOTICE, 0, "Closing listening sockets and draining replies.");
	}
	for (int i = 0; i < w->nlisten; i++) {
		close(w->listen_fds[i]);
		w->listen_fds[i] = -1;
	}
	w->nlisten = 0;
	for (client *c = w->clients; c; c = c->next) {
		c->flags |= CLIENT_CLOSE_AFTER_REPLY;
		pending_add(w, c);
	}
}

static void worker_wake(worker *w)
{
	uint64_t v;
	ssize_t r = read(w->wake_fd, &v, sizeof(v));
	(void)r;
	if (atomic_exchange(&w->kill_pending, 0)) {
		for (client *c = w->clients; c; c = c->next)
			if (atomic_load_explicit(&c->kill_mark, memory_order_relaxed))
				client_close_async(c);
	}
}

/* Once a second when there is timed work: idle-client timeout, re-arming paused listeners. */
static void worker_cron(worker *w)
{
	int timeout = __atomic_load_n(&g_cfg.timeout, __ATOMIC_RELAXED);
	if (w->accept_paused) {
		w->accept_paused = false;
		listeners_pause(w, false);
	}
	if (timeout > 0) {
		int64_t limit = (int64_t)timeout * 1000;
		for (client *c = w->clients; c; c = c->next) {
			if (!(c->flags & (CLIENT_CLOSE_ASAP | CLIENT_PARKED)) && !c->out.bytes &&
			    w->now_ms - c->last_ms > limit) {
				spw_log(SPW_LOG_VERBOSE, 0, "Closing idle client id=%llu addr=%s",
				        (unsigned long long)c->id, c->addr);
				client_close_async(c);
			}
		}
	}
	w->next_cron_ms = w->now_ms + 1000;
}

static bool worker_has_timed_work(const worker *w)
{
	return __atomic_load_n(&g_cfg.timeout, __ATOMIC_RELAXED) > 0 || w->accept_paused;
}

static int worker_timeout(worker *w)
{
	if (w->tier) {
		if (w->io_dirty || w->resume_head)
			return 0;   /* reads to submit or clients to resume: do not sleep (note 11) */
		if (w->nparked && hlog_session_inflight(w->sess) == 0)
			return TIER_TICK_MS;
		if (w->nparked)
			return TIER_PARKED_SLEEP_MS;   /* the device fd wakes it first; a lost wake-up costs this */
	}
	if (w->stopping)
		return 50;
	if (!worker_has_timed_work(w))
		return -1;
	int64_t left = w->next_cron_ms - spw_time_ms();
	return (int)(left < 0 ? 0 : left > 1000 ? 1000 : left);
}

/* New CONFIG SET values for what each client copied at connect (the parser's limits). */
static void worker_config_refresh(worker *w)
{
	uint32_t v = atomic_load_explicit(&g_cfg_version, memory_order_acquire);
	if (SPW_LIKELY(v == w->cfg_version))
		return;
	w->cfg_version = v;
	uint64_t bulk = __atomic_load_n(&g_cfg.proto_max_bulk_len, __ATOMIC_RELAXED);
	uint64_t qbuf = __atomic_load_n(&g_cfg.querybuf_limit, __ATOMIC_RELAXED);
	for (client *c = w->clients; c; c = c->next) {
		c->parser.limits.max_bulk_len = bulk;
		c->parser.limits.max_querybuf = qbuf;
	}
	if (worker_has_timed_work(w) && w->next_cron_ms > w->now_ms + 1000)
		w->next_cron_ms = w->now_ms + 1000;
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];

	tl_worker = w;
	int rc = hlog_session_open(g_srv.store, &w->sess);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Worker %d: cannot open a store session: %s", w->idx, spw_strerror(rc));
		atomic_store(&start_failed, 1);
		server_request_shutdown();
		return NULL;
	}
	if (g_srv.dev) {
		rc = hlog_session_attach(w->sess, worker_op_ready, w);
		if (rc < 0) {
			spw_log(SPW_LOG_WARNING, 0, "Worker %d: cannot attach to the storage device: %s", w->idx,
			        spw_strerror(rc));
			hlog_session_close(w->sess);
			w->sess = NULL;
			atomic_store(&start_failed, 1);
			server_request_shutdown();
			return NULL;
		}
		w->tier = true;
		w->io_fd = hlog_session_fd(w->sess);
		if (w->io_fd >= 0) {
			/* Edge-triggered: worker_io_event need not read the count (note 11). */
			struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = &w->io_fd };
			if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->io_fd, &ev) < 0) {
				spw_log(SPW_LOG_WARNING, errno, "Worker %d: epoll_ctl on the device fd", w->idx);
				w->io_fd = -1;   /* still correct: worker_timeout then ticks while reads wait */
			}
		}
	}
	w->now_ms = spw_time_ms();
	w->next_cron_ms = w->now_ms + 1000;
	for (;;) {
		int n = epoll_wait(w->epfd, evs, MAX_EVENTS, worker_timeout(w));
		uint64_t t0 = spw_mono_ns();
		if (n < 0) {
			if (errno != EINTR) {
				spw_log(SPW_LOG_WARNING, errno, "Worker %d: epoll_wait", w->idx);
				break;
			}
			n = 0;
		}
		w->now_ms = spw_time_ms();
		hlog_session_protect(w->sess);
		hlog_session_set_now(w->sess, w->now_ms);
		worker_config_refresh(w);
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;
			uint32_t e = evs[i].events;
			if (p == &w->wake_fd) {
				worker_wake(w);
				continue;
			}
			if (p == &w->io_fd) {
				worker_io_event(w);
				continue;
			}
			if ((int *)p >= &w->listen_fds[0] && (int *)p < &w->listen_fds[MAX_BIND]) {
				if (!w->stopping)
					accept_all(w, *(int *)p);
				continue;
			}
			client *c = p;
			if (SPW_UNLIKELY((i & 63) == 63))
				hlog_session_refresh(w->sess);   /* a long pass must not hold back the epoch */
			if (c->flags & CLIENT_CLOSE_ASAP)
				continue;
			if (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				if (!client_readable(c)) {
					if (e & (EPOLLHUP | EPOLLERR))
						client_close_async(c);   /* nobody left to read the replies */
					else if (c->flags & CLIENT_PARKED)
						pending_add(w, c);       /* drop EPOLLIN until it resumes (note 12) */
				} else {
					client_read(w, c);
				}
			}
			if (e & EPOLLOUT)
				pending_add(w, c);
		}
		if (w->tier)
			worker_io_pass(w);
		if (SPW_UNLIKELY(atomic_load_explicit(&g_srv.shutdown, memory_order_relaxed)) && !w->stopping)
			worker_stop_begin(w);
		hlog_session_unprotect(w->sess);
		if (SPW_UNLIKELY(w->now_ms >= w->next_cron_ms) && worker_has_timed_work(w))
			worker_cron(w);
		pending_flush(w);
		w->stats.busy_ns += spw_mono_ns() - t0;
		if (w->stopping && (!w->clients || w->now_ms >= w->stop_deadline_ms))
			break;
	}
	while (w->clients)
		client_free(w, w->clients);
	hlog_session_close(w->sess);   /* on this thread: it closes the device queue (hlog.h) */
	w->sess = NULL;
	return NULL;
}

/* ---------------- cross-worker requests ---------------- */

static void worker_poke(worker *w)
{
	uint64_t one = 1;
	ssize_t r = write(w->wake_fd, &one, sizeof(one));
	(void)r;
}

void server_request_shutdown(void)
{
	/* Async-signal-safe: an atomic store and write()s. */
	atomic_store(&g_srv.shutdown, 1);
	server_wake_all();
}

void server_wake_all(void)
{
	/* Async-signal-safe too (server_request_shutdown): write()s only. */
	for (int i = 0; i < g_srv.nworkers; i++)
		if (g_srv.workers[i].wake_fd >= 0)
			worker_poke(&g_srv.workers[i]);
}

int server_kill_clients(uint64_t id, const char *addr, const char *laddr, bool skipme, client *self)
{
	int killed = 0;
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *ow = &g_srv.workers[i];
		bool poke = false;
		pthread_mutex_lock(&ow->clients_lock);
		for (client *c = ow->clients; c; c = c->next) {
			if (id && c->id != id)
				continue;
			if (addr && strcmp(c->addr, addr))
				continue;
			if (laddr && strcmp(c->laddr, laddr))
				continue;
			if (skipme && c == self)
				continue;
			killed++;
			if (self && ow == self->w) {
				/* Our own clients: no race. The caller gets its reply first, as Redis. */
				if (c == self)
					c->flags |= CLIENT_CLOSE_AFTER_REPLY;
				else
					client_close_async(c);
			} else {
				atomic_store_explicit(&c->kill_mark, true, memory_order_relaxed);
				poke = true;
			}
		}
		pthread_mutex_unlock(&ow->clients_lock);
		if (poke) {
			atomic_store(&ow->kill_pending, 1);
			worker_poke(ow);
		}
	}
	return killed;
}

void server_clients_visit(client_visit_fn fn, void *ctx)
{
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *ow = &g_srv.workers[i];
		pthread_mutex_lock(&ow->clients_lock);
		for (client *c = ow->clients; c; c = c->next)
			fn(ctx, c);
		pthread_mutex_unlock(&ow->clients_lock);
	}
}

/* ---------------- CLIENT LIST lines ---------------- */

size_t client_info_format(const client *c, char *buf, size_t cap)
{
	char name[sizeof(c->name)], flags[8];
	size_t fl = 0, argv_mem = 0;
	int64_t now = tl_worker ? tl_worker->now_ms : spw_time_ms();
	/* Only our own clients' argv is meaningful (the one executing), see note 8. */
	bool own = tl_worker && c->w == tl_worker;
	uint32_t cflags = c->flags, ev = c->ev;
	size_t rlen = c->rlen, rpos = c->rpos, rcap = c->rcap, obytes = c->out.bytes;
	const spw_command *last = c->last_cmd;

	if (own)
		for (int i = 0; i < c->argc; i++)
			argv_mem += c->argv[i].len;
	memcpy(name, c->name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	if (cflags & CLIENT_CLOSE_ASAP)
		flags[fl++] = 'A';
	if (cflags & CLIENT_CLOSE_AFTER_REPLY)
		flags[fl++] = 'c';
	if (cflags & CLIENT_PARKED)
		flags[fl++] = 'b';   /* as Redis's blocked clients: waiting on the device */
	if (!fl)
		flags[fl++] = 'N';
	flags[fl] = '\0';
	if (rpos > rlen)
		rpos = rlen;
	if (rlen > rcap)
		rlen = rcap;
	const char *events = (ev & EPOLLIN) && (ev & EPOLLOUT) ? "rw" : (ev & EPOLLIN) ? "r" : (ev & EPOLLOUT) ? "w" : "";
	int n = snprintf(buf, cap,
	                 "id=%llu addr=%s laddr=%s fd=%d name=%s age=%lld idle=%lld flags=%s db=0 sub=0 "
	                 "psub=0 ssub=0 multi=-1 qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=0 rbs=%zu "
	                 "rbp=%zu obl=%zu oll=0 omem=%zu tot-mem=%zu events=%s cmd=%s user=default "
	                 "redir=-1 resp=%d",
	                 (unsigned long long)c->id, c->addr, c->laddr, c->fd, name,
	                 (long long)((now - c->ctime_ms) / 1000), (long long)((now - c->last_ms) / 1000),
	                 flags, rlen - rpos, rcap - rlen, argv_mem, rcap, rlen, obytes, obytes,
	                 sizeof(client) + rcap + obytes, events, last ? last->name : "NULL", c->proto);
	if (n < 0)
		return 0;
	return (size_t)n < cap ? (size_t)n : cap - 1;
}

uint64_t server_ticks_to_ns(uint64_t ticks)
{
#if defined(__x86_64__) || defined(__i386__)
	/* Calibrate over the whole lifetime (the longer the window, the better the ratio). */
	uint64_t dt = server_ticks() - g_srv.start_ticks, dn = spw_mono_ns() - g_srv.start_mono_ns;
	if (dn < 1000000 || dt == 0)
		return ticks;   /* too early to tell: report ticks as ns */
	return (uint64_t)((double)ticks * (double)dn / (double)dt);
#else
	return ticks;
#endif
}

/* ---------------- start-up ---------------- */

static void on_signal(int sig)
{
	atomic_store(&g_srv.shutdown_signal, sig);
	server_request_shutdown();
}

static void raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)g_cfg.maxclients + 32 + (rlim_t)g_cfg.threads * 8;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rlim_t old = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		spw_log(SPW_LOG_WARNING, 0, "You requested maxclients of %d requiring at least %llu max file "
		        "descriptors; the open files limit is %llu (was %llu). Raise it with ulimit -n.",
		        g_cfg.maxclients, (unsigned long long)want, (unsigned long long)rl.rlim_cur,
		        (unsigned long long)old);
}

typedef struct bind_addr {
	struct sockaddr_storage sa;
	socklen_t len;
	bool optional;         /* "-addr": skip it if the address is not available */
	char text[64];
} bind_addr;

/* Parse --bind into addresses (Redis's forms: "*" all IPv4, "::*" all IPv6, "-" prefix optional). */
static int bind_parse(bind_addr *out, int max, int port)
{
	char copy[sizeof(g_cfg.bind)], *save = NULL;
	int n = 0;
	snprintf(copy, sizeof(copy), "%s", g_cfg.bind);
	for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		bind_addr *b = &out[n];
		if (n == max) {
			fprintf(stderr, "spillway: bad value for --bind '%s': at most %d addresses\n", g_cfg.bind, max);
			return -EINVAL;
		}
		memset(b, 0, sizeof(*b));
		b->optional = tok[0] == '-';
		if (b->optional)
			tok++;
		snprintf(b->text, sizeof(b->text), "%s", tok);
		const char *ip = !strcmp(tok, "*") ? "0.0.0.0" : !strcmp(tok, "::*") ? "::" : tok;
		struct sockaddr_in *s4 = (struct sockaddr_in *)&b->sa;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&b->sa;
		if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
			b->len = sizeof(*s4);
		} else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
			b->len = sizeof(*s6);
		} else {
			fprintf(stderr, "spillway: bad value for --bind '%s': '%s' is not an IP address\n",
			        g_cfg.bind, tok);
			return -EINVAL;
		}
		n++;
	}
	return n;
}

static int listener_open(const bind_addr *b, bool reuseport)
{
	int one = 1;
	int fd = socket(b->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (b->sa.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&b->sa, b->len) < 0)
		goto fail;
	if (reuseport && listen(fd, LISTEN_BACKLOG) < 0)
		goto fail;
	return fd;
fail:;
	int err = -errno;
	close(fd);
	return err;
}

static void addr_set_port(bind_addr *b, int port)
{
	if (b->sa.ss_family == AF_INET)
		((struct sockaddr_in *)&b->sa)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)&b->sa)->sin6_port = htons((uint16_t)port);
}

/*
 * Bind every worker's listeners. SO_REUSEPORT would also let a second server started by the same
 * user on the same port silently share it, so each address is first probed with a plain bind
 * (no SO_REUSEPORT): it fails with EADDRINUSE if anyone holds the port, ourselves included later.
 * Port 0 picks a free port once and uses it for every worker (g_cfg.port is updated).
 */
static int listeners_setup(void)
{
	bind_addr addrs[4];
	int naddr = bind_parse(addrs, MAX_BIND, g_cfg.port);
	if (naddr < 0)
		return naddr;
	for (int a = 0; a < naddr; a++) {
		bind_addr *b = &addrs[a];
		if (g_cfg.port != 0) {
			int probe = listener_open(b, false);
			if (probe < 0) {
				if (b->optional && (probe == -EADDRNOTAVAIL || probe == -EAFNOSUPPORT)) {
					b->len = 0;
					continue;
				}
				spw_log(SPW_LOG_WARNING, -probe, "Warning: Could not create server TCP listening socket %s:%d",
				        b->text, g_cfg.port);
				spw_log(SPW_LOG_WARNING, 0, "Failed listening on port %d (TCP), aborting.", g_cfg.port);
				return probe;
			}
			close(probe);
		}
		for (int i = 0; i < g_srv.nworkers; i++) {
			worker *w = &g_srv.workers[i];
			int fd = listener_open(b, true);
			if (fd < 0) {
				spw_log(SPW_LOG_WARNING, -fd, "Warning: Could not create server TCP listening socket %s:%d",
				        b->text, g_cfg.port);
				spw_log(SPW_LOG_WARNING, 0, "Failed listening on port %d (TCP), aborting.", g_cfg.port);
				return fd;
			}
			if (g_cfg.port == 0) {
				struct sockaddr_storage sa;
				socklen_t len = sizeof(sa);
				getsockname(fd, (struct sockaddr *)&sa, &len);
				g_cfg.port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
				                                           : ((struct sockaddr_in6 *)&sa)->sin6_port);
				for (int k = 0; k < naddr; k++)
					addr_set_port(&addrs[k], g_cfg.port);
			}
			w->listen_fds[w->nlisten] = fd;
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &w->listen_fds[w->nlisten] };
			w->nlisten++;
			if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
				return -errno;
		}
	}
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		if (!w->nlisten) {
			spw_log(SPW_LOG_WARNING, 0, "Failed listening on port %d (TCP): no usable --bind address, aborting.",
			        g_cfg.port);
			return -EADDRNOTAVAIL;
		}
	}
	return 0;
}

static int stats_alloc(worker_stats *s, int slots)
{
	s->cmd_calls = calloc((size_t)slots, sizeof(uint64_t));
	s->cmd_ticks = calloc((size_t)slots, sizeof(uint64_t));
	s->cmd_failed = calloc((size_t)slots, sizeof(uint64_t));
	s->cmd_rejected = calloc((size_t)slots, sizeof(uint64_t));
	return s->cmd_calls && s->cmd_ticks && s->cmd_failed && s->cmd_rejected ? 0 : -ENOMEM;
}

static void stats_free(worker_stats *s)
{
	free(s->cmd_calls);
	free(s->cmd_ticks);
	free(s->cmd_failed);
	free(s->cmd_rejected);
}

static int workers_create(void)
{
	int slots = command_slots();
	g_srv.workers = calloc((size_t)g_cfg.threads, sizeof(worker));
	if (!g_srv.workers)
		return -ENOMEM;
	g_srv.nworkers = g_cfg.threads;
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		w->idx = i;
		w->epfd = -1;
		w->wake_fd = -1;
		w->io_fd = -1;
		for (int k = 0; k < MAX_BIND; k++)
			w->listen_fds[k] = -1;
		pthread_mutex_init(&w->clients_lock, NULL);
		/* Only complete requests the client's parser accepts are looked at: no limits of its own. */
		resp_limits lim = { .max_bulk_len = LLONG_MAX, .max_querybuf = LLONG_MAX };
		resp_parser_init(&w->sg_parser, &lim);
	}
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		if (stats_alloc(&w->stats, slots) < 0 || stats_alloc(&w->stats_base, slots) < 0)
			return -ENOMEM;
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (w->epfd < 0)
			return -errno;
		w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (w->wake_fd < 0)
			return -errno;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &w->wake_fd };
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0)
			return -errno;
		w->cfg_version = atomic_load(&g_cfg_version);
	}
	return 0;
}

static void workers_destroy(void)
{
	for (int i = 0; i < g_srv.nworkers; i++) {
		worker *w = &g_srv.workers[i];
		for (int k = 0; k < MAX_BIND; k++)
			if (w->listen_fds[k] >= 0)
				close(w->listen_fds[k]);
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		resp_chunk *k = w->chunk_pool;
		while (k) {
			resp_chunk *next = k->next;
			free(k);
			k = next;
		}
		free(w->scratch);
		resp_parser_fini(&w->sg_parser);
		stats_free(&w->stats);
		stats_free(&w->stats_base);
		pthread_mutex_destroy(&w->clients_lock);
	}
	free(g_srv.workers);
	g_srv.workers = NULL;
	g_srv.nworkers = 0;
}

/* ---------------- storage tier: the device ---------------- */

/*
 * Open the device of --storage-tier (note 11). Garnet's flags map as follows:
 *   --device-type default/native  -> "native": io_uring when the kernel allows it, else libaio
 *                                    (--device-io-backend picks one); O_DIRECT segment files
 *                 localmemory     -> "localmemory" (--device-completion-threads copy threads)
 *                 posix, randomaccess, filestream -> "posix" (pread/pwrite, no O_DIRECT needed)
 *                 fault:<type>    -> the fault injector around <type> (CONFIG SET device-fault)
 *   --logdir (default: --dir)     -> segment files in <logdir>/Store; the directory must exist
 *   --segment                     -> segment file size
 *   --device-throttle-limit       -> IOs in flight on the device, and each worker's queue depth
 *                                    (default: the device's 4096, with TIER_QUEUE_DEFAULT per worker)
 * Refusals (no io_uring, no O_DIRECT) stop start-up with the device's reason; nothing falls back
 * silently. 0, or -errno after printing a message that names the flag.
 */
static int tier_open(dev **out)
{
	const char *dir = g_cfg.logdir[0] ? g_cfg.logdir : g_cfg.dir;
	const char *flag = g_cfg.logdir[0] ? "--logdir" : "--dir (the default --logdir)";
	const char *base = "native", *io = NULL;
	char type[64], err[512] = "", store[sizeof(g_cfg.logdir) + 8];
	struct stat st;
	dev_config dc;
	dev *d = NULL;

	*out = NULL;
	int serr = stat(dir, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (serr) {
		fprintf(stderr, "spillway: bad value for %s '%s': %s (the storage tier's segment files go to "
		        "<logdir>/Store, in an existing directory)\n", flag, dir, strerror(serr));
		return -serr;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		fprintf(stderr, "spillway: bad value for %s '%s': not writable: %s\n", flag, dir, strerror(errno));
		return -EACCES;
	}
	switch (g_cfg.device_type) {
	case SPW_DEVICE_TYPE_LOCALMEMORY: base = "localmemory"; break;
	case SPW_DEVICE_TYPE_POSIX:
	case SPW_DEVICE_TYPE_RANDOMACCESS:
	case SPW_DEVICE_TYPE_FILESTREAM: base = "posix"; break;
	default: base = "native"; break;
	}
	if (g_cfg.device_io_backend == SPW_DEVICE_IO_URING)
		io = "uring";
	else if (g_cfg.device_io_backend == SPW_DEVICE_IO_LIBAIO)
		io = "libaio";
	snprintf(type, sizeof(type), "%s%s", g_cfg.device_fault ? "fault:" : "", base);

	dev_config_init(&dc);
	dc.type = type;
	dc.io_backend = io;
	snprintf(store, sizeof(store), "%s/Store", dir);   /* the log's segments: <logdir>/Store/hlog.<n> */
	dc.dir = store;
	dc.prefix = "hlog.";
	dc.segment_bytes = g_cfg.segment_bytes;
	if (g_cfg.device_throttle_limit > 0) {
		dc.throttle_limit = (uint32_t)g_cfg.device_throttle_limit;
		dc.queue_depth = (uint32_t)g_cfg.device_throttle_limit;
	} else {
		dc.queue_depth = TIER_QUEUE_DEFAULT;
	}
	dc.completion_threads = g_cfg.device_completion_threads;
	dc.allow_fallback = false;
	int rc = dev_open(&dc, &d, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "spillway: cannot open the storage device (--device-type %s%s%s --logdir %s): "
		        "%s\n", type, io ? " --device-io-backend " : "", io ? io : "", dir,
		        err[0] ? err : spw_strerror(rc));
		return rc;
	}
	if (g_cfg.page_bytes < d->sector_bytes || g_cfg.page_bytes % d->sector_bytes) {
		fprintf(stderr, "spillway: bad value for --page '%llu': smaller than the device's sector of %u "
		        "bytes (%s in %s)\n", (unsigned long long)g_cfg.page_bytes, d->sector_bytes, d->name,
		        dir);
		dev_close(d);
		return -EINVAL;
	}
	spw_log(SPW_LOG_NOTICE, 0, "Storage tier: %s device in %s/Store (sector %u bytes, segment %llu bytes, "
	        "%u IOs in flight at most, queue depth %u per worker)", d->name, dir, d->sector_bytes,
	        (unsigned long long)d->segment_bytes, d->throttle_limit, d->queue_depth);
	*out = d;
	return 0;
}

void server_device_fault_apply(void)
{
	dev_fault_spec spec;
	char why[256];
	if (!g_srv.dev || !(g_srv.dev->caps & DEV_CAP_FAULT))
		return;
	if (dev_fault_spec_parse(g_cfg.device_fault_spec, &spec, why, sizeof(why)) < 0)
		return;   /* checked when it was set */
	int rc = dev_fault_set(g_srv.dev, &spec);
	spw_log(SPW_LOG_NOTICE, rc, "Device fault injector %s: '%s'", rc ? "refused" : "armed",
	        g_cfg.device_fault_spec);
}

static void run_id_init(void)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[20];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		uint64_t x = spw_mono_ns() ^ ((uint64_t)getpid() << 32);
		for (size_t i = 0; i < sizeof(r); i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			r[i] = (uint8_t)(x >> 56);
		}
	}
	for (size_t i = 0; i < sizeof(r); i++) {
		g_srv.run_id[2 * i] = hex[r[i] >> 4];
		g_srv.run_id[2 * i + 1] = hex[r[i] & 15];
	}
	g_srv.run_id[40] = '\0';
}

int server_main(int argc, char **argv)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	int rc = config_load(argc, argv);
	if (rc > 0)
		return 0;   /* --help / --version */
	if (rc < 0)
		return 1;

	spw_log_open(g_cfg.logfile);
	command_table_init();
	memset(&g_srv, 0, sizeof(g_srv));
	pthread_mutex_init(&g_srv.stats_lock, NULL);
	atomic_store(&g_srv.next_client_id, 1);
	g_srv.start_ms = spw_time_ms();
	g_srv.start_mono_ns = spw_mono_ns();
	g_srv.start_ticks = server_ticks();
	g_srv.pid = (int)getpid();
	run_id_init();
	ssize_t n = readlink("/proc/self/exe", g_srv.executable, sizeof(g_srv.executable) - 1);
	if (n < 0)
		snprintf(g_srv.executable, sizeof(g_srv.executable), "%s", argv[0]);
	if (g_cfg.config_file[0] && !realpath(g_cfg.config_file, g_srv.config_file_abs))
		snprintf(g_srv.config_file_abs, sizeof(g_srv.config_file_abs), "%s", g_cfg.config_file);

	spw_log(SPW_LOG_NOTICE, 0, "oO0OoO0OoO0Oo Spillway is starting oO0OoO0OoO0Oo");
	spw_log(SPW_LOG_NOTICE, 0, "Spillway version=%s, redis-compat=%s, bits=%d, pid=%d, just started",
	        SPW_VERSION, SPW_REDIS_VERSION, (int)(sizeof(long) * 8), g_srv.pid);
	spw_log(SPW_LOG_NOTICE, 0, g_cfg.config_file[0] ? "Configuration loaded" :
	        "Warning: no config file specified, using the default config.");
	raise_fd_limit();

	if (g_cfg.storage_tier) {
		if (tier_open(&g_srv.dev) < 0)
			return 1;
		dev_fault_spec spec;
		char why[256];
		if (dev_fault_spec_parse(g_cfg.device_fault_spec, &spec, why, sizeof(why)) == 0 &&
		    spec.kind != DEV_FAULT_NONE && !(g_srv.dev->caps & DEV_CAP_FAULT)) {
			fprintf(stderr, "spillway: bad value for --device-fault '%s': the device is not a fault "
			        "injector (use --device-type fault:<type>)\n", g_cfg.device_fault_spec);
			dev_close(g_srv.dev);
			g_srv.dev = NULL;
			return 1;
		}
		server_device_fault_apply();
	} else if (g_cfg.device_fault_spec[0]) {
		fprintf(stderr, "spillway: --device-fault needs --storage-tier and --device-type fault:<type>\n");
		return 1;
	}
	hlog_config hc = {
		.memory_bytes = g_cfg.memory_bytes,
		.page_bytes = g_cfg.page_bytes,
		.index_bytes = g_cfg.index_bytes,
		.mutable_percent = g_cfg.mutable_percent,
		.max_sessions = g_cfg.threads,
		.dev = g_srv.dev,
		.initial_io_bytes = (uint32_t)SPW_MIN(g_cfg.initial_io_record_size, (uint64_t)UINT32_MAX),
	};
	rc = hlog_open(&g_srv.store, &hc);
	if (rc < 0) {
		fprintf(stderr, "spillway: cannot open the store (--memory %llu --page %llu --index %llu "
		        "--mutable-percent %d%s): %s\n", (unsigned long long)g_cfg.memory_bytes,
		        (unsigned long long)g_cfg.page_bytes, (unsigned long long)g_cfg.index_bytes,
		        g_cfg.mutable_percent, g_srv.dev ? " --storage-tier" : "", spw_strerror(rc));
		dev_close(g_srv.dev);
		g_srv.dev = NULL;
		return 1;
	}
	int exit_code = 1;
	rc = workers_create();
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, -rc, "Cannot create the workers");
		goto out;
	}
	if (listeners_setup() < 0)
		goto out;

	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	spw_log(SPW_LOG_NOTICE, 0, "Server initialized");
	int started = 0;
	for (; started < g_srv.nworkers; started++) {
		rc = pthread_create(&g_srv.workers[started].thread, NULL, worker_main, &g_srv.workers[started]);
		if (rc) {
			spw_log(SPW_LOG_WARNING, rc, "Cannot start worker %d", started);
			atomic_store(&start_failed, 1);
			server_request_shutdown();
			break;
		}
	}
	if (started == g_srv.nworkers) {
		spw_log(SPW_LOG_NOTICE, 0, "Running mode=standalone, port=%d, threads=%d.", g_cfg.port,
		        g_srv.nworkers);
		spw_log(SPW_LOG_NOTICE, 0, "Ready to accept connections");
	}
	for (int i = 0; i < started; i++)
		pthread_join(g_srv.workers[i].thread, NULL);
	exit_code = atomic_load(&start_failed) ? 1 : 0;
	if (!exit_code)
		spw_log(SPW_LOG_NOTICE, 0, "Spillway is now ready to exit, bye bye...");
out:
	/* Signals may still arrive: make them harmless before the workers go away. */
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	workers_destroy();
	hlog_close(g_srv.store);
	g_srv.store = NULL;
	dev_close(g_srv.dev);   /* after the log: it flushes through the device as it closes */
	g_srv.dev = NULL;
	return exit_code;
}
