/*
 * client.c - a client connection's own state machine: created on accept, read, its requests
 * parsed and dispatched, its replies pooled and written, closed and freed. All of it runs on the
 * client's worker (worker.c note 1); its socket calls go through conn.h.
 *
 * Sections: reply chunk pool / client list and events / create and free / read, parse, dispatch /
 * output limits / write / CLIENT LIST lines. Parking a client on the storage tier and its
 * look-ahead are park.c's.
 *
 * Design notes:
 *  1. epoll is level-triggered, so a short read (fewer bytes than asked) means the socket is
 *     drained for now and we skip the read that would return EAGAIN; whatever arrives later, or
 *     whatever the per-pass cap left unread, raises the next epoll_wait.
 *  2. The read buffer holds [rpos, rlen) unparsed bytes. Requests are parsed in place: arguments
 *     are slices into rbuf, valid while the command runs. When the parser knows the size of the
 *     request in progress (a big bulk), the buffer grows to hold it whole (resp_parser_hint), so a
 *     512 MB value is read once into its final place. Unparsed bytes are moved to the front only
 *     when the room left behind them is short; an emptied buffer resets to offset 0 for free.
 *     Buffers grown past RBUF_SHRINK_ABOVE go back to the default size once empty. A client gets
 *     its buffer at its first read, not at connect, and one idle for RBUF_IDLE_MS that wastes
 *     more than RBUF_IDLE_WASTE keeps only its unparsed bytes, none for an empty buffer
 *     (worker_cron, client_rbuf_idle_shrink: Redis's clientsCronResizeQueryBuffer), so that many
 *     idle connections cost little more than their client structs. CLIENT LIST then shows
 *     qbuf-free=0 as Redis does.
 *  3. Reply chunks come from a per-worker pool of 16 KiB chunks; larger chunks (one big bulk) are
 *     malloc'd to size and freed after sending. The steady state allocates nothing. The pool keeps
 *     at most CHUNK_POOL_MAX idle chunks, fewer under --maxmemory (client_chunk_pool_limit).
 *  4. Back-pressure: when a client's unsent replies pass output-pause-bytes it is not read (nor
 *     are its already-buffered requests parsed) until they drain below half of that; then its
 *     buffered requests are processed at once (no new data may ever arrive to wake us).
 *  5. Closing: a client is only freed at the end of a pass (client_pending_flush), never while its events
 *     may still be in the pass's event array. CLIENT_CLOSE_AFTER_REPLY (QUIT, protocol errors,
 *     SHUTDOWN) stops reading and closes once the output is out; CLIENT_CLOSE_ASAP closes without
 *     writing more.
 *  6. Output limits (Redis's client-output-buffer-limit, memcap.c note 4): after each command, a
 *     client whose unsent replies reach the worker's obl_min (the smaller of the normal class's
 *     hard and soft limits; UINT64_MAX without either) or whose soft clock runs is checked; one past
 *     hard, or past soft for longer than soft_seconds, is closed at once without its replies. The
 *     check is one compare per command; back-pressure (note 4) still pauses a client at
 *     output-pause-bytes whatever the limits, so a client that never reads holds at most about that.
 */
#include "server/server_int.h"
#include "server/conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>

#define RBUF_DEFAULT        (16 * 1024)
#define RBUF_MIN_ROOM       1024          /* read only when at least this much room is free */
#define RBUF_SHRINK_ABOVE   (256 * 1024)
#define RBUF_IDLE_WASTE     (4 * 1024)    /* Redis's "wasting at least a few kbytes" */
#define READS_PER_PASS      4
#define WRITE_IOV           256
#define WRITEVS_PER_FLUSH   4
#define CHUNK_CAP           16384u        /* payload of a pooled chunk: what resp_write.c asks for at least */
#define CHUNK_BYTES         (sizeof(resp_chunk) + CHUNK_CAP)
#define CHUNK_POOL_MAX      1024          /* 16 MiB of idle chunks per worker at most */

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
		if (k->cap == CHUNK_CAP && w->chunk_pool_len < w->chunk_pool_max) {
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

/* The pool's size: CHUNK_POOL_MAX, or under --maxmemory 1/32 of the cap shared by the workers
 * (at least 4 chunks each), the idle chunks past it freed now (note 3). */
void client_chunk_pool_limit(worker *w)
{
	uint64_t cap = __atomic_load_n(&g_cfg.maxmemory, __ATOMIC_RELAXED);
	uint64_t max = CHUNK_POOL_MAX;
	if (cap)
		max = SPW_MAX(SPW_MIN(cap / 32 / (uint64_t)SPW_MAX(g_srv.nworkers, 1) / CHUNK_BYTES, max), 4);
	w->chunk_pool_max = (uint32_t)max;
	while (w->chunk_pool_len > w->chunk_pool_max) {
		resp_chunk *k = w->chunk_pool;
		w->chunk_pool = k->next;
		w->chunk_pool_len--;
		w->buf_bytes -= (int64_t)CHUNK_BYTES;
		free(k);
	}
}

/* The worker is going away: free its idle chunks. */
void client_chunk_pool_free(worker *w)
{
	resp_chunk *k = w->chunk_pool;
	while (k) {
		resp_chunk *next = k->next;
		free(k);
		k = next;
	}
	w->chunk_pool = NULL;
	w->chunk_pool_len = 0;
}

/* ---------------- the pending list and events ---------------- */

void client_pending_add(worker *w, client *c)
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
	client_pending_add(c->w, c);
}

/* Whether c's socket is read now: not paused or closing, and not parked unless its look-ahead can
 * take more requests (park.c note 3). */
bool client_readable(const client *c)
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
	if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->conn.fd, &ev) == 0)
		c->ev = want;
	else
		client_close_async(c);
}

/* A client for the connection cn the worker just accepted from peer (g_srv.nclients already
 * counts it). On failure the connection is closed and uncounted. */
void client_create(worker *w, conn *cn, const struct sockaddr_storage *peer)
{
	client *c = calloc(1, sizeof(*c));
	resp_limits lim;

	if (!c)
		goto fail;
	c->conn = *cn;   /* no read buffer until the first read (note 2) */
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

	conn_setup(&c->conn, __atomic_load_n(&g_cfg.tcp_keepalive, __ATOMIC_RELAXED));
	conn_tcp_addr_format(peer, c->addr, sizeof(c->addr));
	conn_local_addr(&c->conn, c->laddr, sizeof(c->laddr));

	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->conn.fd, &ev) < 0) {
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
	free(c);
	conn_close(cn);
	atomic_fetch_sub_explicit(&g_srv.nclients, 1, memory_order_relaxed);
}

void client_free(worker *w, client *c)
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

	conn_close(&c->conn);   /* also removes it from epoll: the fd is never dup'ed */
	chunk_release_list(w, c->out.head);
	c->out.head = c->out.tail = NULL;
	w->buf_bytes -= (int64_t)c->rcap;
	if (c->rcap)
		w->rbuf_clients--;
	free(c->rbuf);
	resp_parser_fini(&c->parser);
	if (w->tier)
		client_tier_forget(w, c);   /* always: a failed command may have left reads under self_op */
	client_sg_free(c);
	free(c);
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

/* ---------------- read, parse, dispatch ---------------- */

/* Make room to read into: move unparsed bytes to the front or grow the buffer, so that the whole
 * request in progress fits when its size is known (note 2). false on ENOMEM. */
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
	/* Grow: exactly what a known big request needs, else double (the first: the default). */
	size_t cap = hint ? SPW_ALIGN_UP(hint + RBUF_MIN_ROOM, 4096)
	                  : SPW_MAX(SPW_MAX(c->rcap * 2, need), (size_t)RBUF_DEFAULT);
	char *nb = malloc(cap);
	if (!nb)
		return false;
	if (pending)
		memcpy(nb, c->rbuf + c->rpos, pending);
	free(c->rbuf);
	if (!c->rcap)
		w->rbuf_clients++;
	w->buf_bytes += (int64_t)cap - (int64_t)c->rcap;
	c->rbuf = nb;
	c->rcap = cap;
	c->rpos = 0;
	c->rlen = pending;
	return true;
}

/* Note 2: the idle shrink. The look-ahead's ops hold slices of the bytes after rpos and a parked
 * or waiting request's argv points into the buffer, so those clients keep theirs. */
void client_rbuf_idle_shrink(worker *w, client *c)
{
	size_t pending = c->rlen - c->rpos;
	if (!c->rcap || c->rcap - pending <= RBUF_IDLE_WASTE || w->now_ms - c->last_ms <= RBUF_IDLE_MS ||
	    (c->flags & (CLIENT_PARKED | CLIENT_SAVE_WAIT)) || c->io_wait || c->op_held || c->sg_count ||
	    c->sg_scan)
		return;
	char *nb = NULL;
	if (pending) {   /* a request in progress keeps its bytes; the next read grows it again */
		nb = malloc(pending);
		if (!nb)
			return;
		memcpy(nb, c->rbuf + c->rpos, pending);
	}
	free(c->rbuf);
	w->buf_bytes -= (int64_t)c->rcap - (int64_t)pending;
	if (!pending)
		w->rbuf_clients--;
	c->rbuf = nb;
	c->rcap = c->rlen = pending;
	c->rpos = 0;
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
void client_process_input(worker *w, client *c)
{
	uint64_t pause = __atomic_load_n(&g_cfg.output_pause_bytes, __ATOMIC_RELAXED);
	w->cmd_clock = server_ticks();
	while (c->rpos < c->rlen) {
		if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_READ_PAUSED | CLIENT_PARKED |
		                CLIENT_SAVE_WAIT))
			break;
		size_t consumed = 0;
		resp_request req;
		int rc = resp_request_parse(&c->parser, c->rbuf + c->rpos, c->rlen - c->rpos, &consumed, &req);
		if (SPW_LIKELY(rc == RESP_OK)) {
			/* Reads queued by the request carry its op (park.c notes 1, 3). */
			client_op *op = w->tier ? client_op_begin(w, c) : NULL;
			c->argc = req.argc;
			c->argv = req.argv;
			command_dispatch(c);
			c->argc = 0;
			c->argv = NULL;
			if (SPW_UNLIKELY(c->flags & CLIENT_PARKED)) {
				/* rpos stays at the request: it runs again (park.c note 1) */
				client_park(w, c, op, consumed);
				break;
			}
			if (SPW_UNLIKELY(c->sg_count | c->op_held | c->sg_scan))
				client_op_end(w, c, op, consumed);
			c->rpos += consumed;
			if (SPW_UNLIKELY(c->out.oom)) {
				spw_log(SPW_LOG_WARNING, ENOMEM, "Closing client id=%llu addr=%s: reply buffer",
				        (unsigned long long)c->id, c->addr);
				client_close_async(c);
				break;
			}
			if (SPW_UNLIKELY(c->out.bytes >= w->obl_min || c->obl_soft_since) && client_obl_check(w, c))
				break;
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
			resp_chunk *mark = c->out.tail;
			uint32_t mark_len = mark ? mark->len : 0;
			size_t mark_bytes = c->out.bytes;
			reply_errorf(c, "ERR %s", msg);   /* counted even when muted, as Redis */
			if (c->flags & (CLIENT_REPLY_OFF | CLIENT_REPLY_SKIP))   /* cmd_client.c note 3 */
				client_reply_rollback(c, mark, mark_len, mark_bytes);
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
		client_pending_add(w, c);
}

void client_read(worker *w, client *c)
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
		ssize_t n = conn_read(&c->conn, c->rbuf + c->rlen, room);
		if (n > 0) {
			c->rlen += (size_t)n;
			w->stats.net_in += (uint64_t)n;
			w->stats.reads++;
			c->last_ms = w->now_ms;
			if (c->flags & CLIENT_PARKED) {
				/* Parked on a GET: the new requests only extend its look-ahead (park.c note 3). */
				client_sg_extend(w, c);
				if (!client_sg_open(c)) {
					client_pending_add(w, c);   /* drop EPOLLIN until it resumes */
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
			client_pending_add(w, c);   /* drop EPOLLIN */
			return;
		}
		if (n == 0) {
			spw_log(SPW_LOG_VERBOSE, 0, "Client closed connection id=%llu addr=%s",
			        (unsigned long long)c->id, c->addr);
			client_close_async(c);
			return;
		}
		if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR)
			return;
		spw_log(SPW_LOG_VERBOSE, (int)-n, "Reading from client id=%llu addr=%s",
		        (unsigned long long)c->id, c->addr);
		client_close_async(c);
		return;
	}
}

/* ---------------- output limits (note 6) ---------------- */

bool client_obl_check(worker *w, client *c)
{
	const client_obl *l = &g_cfg.obl[SPW_OBL_NORMAL];
	uint64_t hard = __atomic_load_n(&l->hard, __ATOMIC_RELAXED);
	uint64_t soft = __atomic_load_n(&l->soft, __ATOMIC_RELAXED);
	uint64_t secs = __atomic_load_n(&l->soft_seconds, __ATOMIC_RELAXED);
	uint64_t used = c->out.bytes;
	bool over = hard && used >= hard;
	if (soft && used >= soft) {
		/* As Redis: the first time only starts the clock; past soft_seconds it is reached. */
		if (!c->obl_soft_since)
			c->obl_soft_since = w->now_ms ? w->now_ms : 1;
		else if ((uint64_t)(w->now_ms - c->obl_soft_since) > secs * 1000)
			over = true;
	} else {
		c->obl_soft_since = 0;
	}
	if (!over)
		return false;
	char info[1024];
	client_info_format(c, info, sizeof(info));
	spw_log(SPW_LOG_WARNING, 0, "Client %s scheduled to be closed ASAP for overcoming of output "
	        "buffer limits.", info);
	w->stats.obl_closed++;
	client_close_async(c);
	return true;
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
		ssize_t n = conn_writev(&c->conn, iov, cnt);
		if (n < 0) {
			if (n == -EAGAIN || n == -EWOULDBLOCK || n == -EINTR)
				return true;
			spw_log(SPW_LOG_VERBOSE, (int)-n, "Error writing to client id=%llu addr=%s",
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
 * output drained below half the pause limit resume: their buffered requests run now (note 4).
 * The AOF records of the commands behind the replies are written (and with always synced) first,
 * before every round of writes (worker.c note 7): the drained clients' commands run in one round
 * and their replies leave in the next. */
void client_pending_flush(worker *w)
{
	uint64_t pause = __atomic_load_n(&g_cfg.output_pause_bytes, __ATOMIC_RELAXED);
	worker_aof_flush(w);
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
		worker_aof_flush(w);   /* the drained clients' commands, before their replies */
	}
}

/* ---------------- CLIENT LIST lines ---------------- */

size_t client_info_format(const client *c, char *buf, size_t cap)
{
	char name[sizeof(c->name)], flags[8];
	size_t fl = 0, argv_mem = 0;
	worker *self = worker_self();
	int64_t now = self ? self->now_ms : spw_time_ms();
	/* Only our own clients' argv is meaningful (the one executing), see worker.c note 3. */
	bool own = self && c->w == self;
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
	                 (unsigned long long)c->id, c->addr, c->laddr, c->conn.fd, name,
	                 (long long)((now - c->ctime_ms) / 1000), (long long)((now - c->last_ms) / 1000),
	                 flags, rlen - rpos, rcap - rlen, argv_mem, rcap, rlen, obytes, obytes,
	                 sizeof(client) + rcap + obytes, events, last ? last->name : "NULL", c->proto);
	if (n < 0)
		return 0;
	return (size_t)n < cap ? (size_t)n : cap - 1;
}
