/*
 * park.c - clients on the storage tier: parking a client whose command went pending on a device
 * read, the store's ready callback, resuming it, and the look-ahead (scatter-gather GET) that
 * prefetches the keys of the requests after a parked GET or MGET.
 *
 * Sections: the client's ops / parking and releasing / the look-ahead / ready callback, resume
 * and the poll pass. The worker calls worker_io_pass once per loop pass (worker.c note 6); the
 * client code calls client_op_begin, client_park and client_op_end around each dispatch.
 *
 * Design notes:
 *  1. A client's life around a pending read:
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
 *     the first time it fires; note 3's look-ahead is the exception), so its replies stay in
 *     request order; every other connection of the worker goes on. The ready callback only links
 *     the client on the resume list (callbacks run inside the store); after hlog_session_poll
 *     returns, worker_resume re-runs each request (now served from the session's fetch cache),
 *     calls hlog_session_release for it and goes on with the client's pipeline. A re-run may park
 *     again (a record evicted meanwhile).
 *  2. The op_ctx the store tags reads with is a client_op that names its client: the client's own
 *     (self_op) or a slot of its look-ahead ring (note 3). A client closed while parked is released
 *     before it is freed: hlog_session_release forgets each of its ops, and their reads still in
 *     flight complete without a ready callback (log/hlog.h), so a later client allocated at the
 *     same address never receives a stale callback. A client on the resume list is unlinked first.
 *     A ready callback for the self_op of a client not parked on it (an op that failed after
 *     queuing reads, or a second callback for an op already re-run) only releases it.
 *  3. Scatter-gather GET (--sg-get, on by default, CONFIG SET at run time). When a GET or an MGET
 *     parks, the complete requests already in the client's read buffer after it are parsed with the
 *     worker's own look-ahead parser (slices point into rbuf and are used at once) and, for each
 *     consecutive request of a CMD_LOOKAHEAD command (GET, MGET), every key is handed to
 *     hlog_prefetch: their reads join the parked one's in this pass's single submission. Each
 *     covered request gets its own op, a slot of the client's look-ahead ring (client_op, in
 *     request order from sg_head), so that the store calls back per request: the parked client
 *     resumes as soon as the request it waits on has its records, runs every following request
 *     whose reads are in, and parks again on the first one still reading (on that request's slot).
 *     Replies before the first miss go out at once, a later one waits only for the misses before
 *     it. A slot's records are dropped (hlog_session_release) when its request has run, so what a
 *     client holds is bounded by SG_LOOKAHEAD_KEYS, and a slot whose reads finish before its client
 *     reaches it is simply found complete.
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
 *     worker, goes out in the one hlog_session_poll at the end of the pass (worker.c note 6).
 */
#include "server/server_int.h"

#include <stdlib.h>
#include <string.h>

#include "device/device.h"

#define TIER_POLL_ROUNDS    4             /* poll/resume rounds per pass before yielding to epoll */
#define SG_LOOKAHEAD_KEYS   1024          /* keys a client's look-ahead holds prefetched at most (note 3) */
#define SG_RING             1024          /* requests it covers at most (a power of two) */
#define SG_CHUNK            16            /* ring slots allocated together */
#define SG_READ_MAX         (256u << 10)  /* a parked client is read on while less is unparsed */

/* ---------------- the client's ops (note 2) ---------------- */

/* Ring slot idx (already masked) of c's look-ahead; its chunk exists. */
static inline client_op *client_sg_slot(client *c, uint32_t idx)
{
	return &c->sg_chunks[idx / SG_CHUNK][idx % SG_CHUNK];
}

/* The op the request about to run queues its reads under, made the session's (note 2): its ring
 * slot when the look-ahead covered it, else the client's own; a request that parked under its own
 * op (op_held) keeps it, the ring covers what follows it. */
client_op *client_op_begin(worker *w, client *c)
{
	client_op *op = c->sg_count && !c->op_held ? client_sg_slot(c, c->sg_head) : &c->self_op;
	hlog_session_set_op(w->sess, op);
	return op;
}

/* c is being freed (note 2): off the resume list, and the store forgets its op. */
void client_tier_forget(worker *w, client *c)
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

/* c is being freed, after client_tier_forget: its look-ahead ring goes. */
void client_sg_free(client *c)
{
	if (c->sg_chunks) {
		for (uint32_t i = 0; i < SG_RING / SG_CHUNK; i++)
			free(c->sg_chunks[i]);
		free(c->sg_chunks);
	}
}

/* ---------------- parking and releasing (note 1) ---------------- */

/* The command just dispatched under op returned HLOG_PENDING (command_dispatch already undid its
 * traces); its request is consumed bytes long. A GET or MGET parked with sg-get on looks ahead
 * (note 3). */
void client_park(worker *w, client *c, client_op *op, size_t consumed)
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
	c->park_sg = (c->cmd->flags & CMD_LOOKAHEAD) && __atomic_load_n(&g_cfg.sg_get, __ATOMIC_RELAXED);
	if (c->park_sg) {
		if (!c->sg_count)
			c->sg_scan = consumed;   /* the look-ahead starts after this request */
		client_sg_extend(w, c);
	}
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

/* The request of op (consumed bytes) ran without parking, and the client holds ops: release what
 * the store fetched for it and move the look-ahead's bookkeeping past it. */
void client_op_end(worker *w, client *c, client_op *op, size_t consumed)
{
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

/* ---------------- the look-ahead (note 3) ---------------- */

/* Whether a parked client is read on: its look-ahead can still cover what arrives. */
bool client_sg_open(const client *c)
{
	return c->park_sg && !c->sg_stop && !c->sg_full && c->rlen - c->rpos < SG_READ_MAX;
}

/* c is parked on a GET or MGET: prefetch the keys of the CMD_LOOKAHEAD requests that follow the
 * covered ones in rbuf (from rpos + sg_scan), each request under its own ring slot. */
void client_sg_extend(worker *w, client *c)
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
		if (!cmd || !(cmd->flags & CMD_LOOKAHEAD) || !command_arity_ok(cmd, req.argc)) {
			c->sg_stop = true;   /* a write, or anything else: what follows must not be read early */
			break;
		}
		int first = cmd->first_key, last = cmd->last_key < 0 ? req.argc + cmd->last_key : cmd->last_key;
		uint32_t nk = (uint32_t)((last - first) / cmd->step + 1);
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
		uint32_t pending0 = pending, j;
		for (j = 0; j < nk; j++) {
			const resp_slice *a = &req.argv[first + (int)j * cmd->step];
			hlog_key_init(&k, a->ptr, a->len);
			int rc = hlog_prefetch(w->sess, &k);
			if (rc < 0)
				break;
			if (rc == HLOG_PENDING)
				pending++;
		}
		keys += j;
		if (j < nk) {
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

/* ---------------- ready callback, resume and the poll pass ---------------- */

/* The store's ready callback (inside hlog_session_poll, on this worker's thread): every read of
 * op_ctx is done. Links the client only when it is parked on that op; worker_resume runs it after
 * the poll returns. A slot's reads done before its client reached it are kept for when it runs;
 * the client's own op ready while the client does not wait on it belongs to a command that failed
 * after queuing reads: forgotten at once. */
void worker_op_ready(void *cb_arg, void *op_ctx)
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
		client_pending_add(w, c);   /* EPOLLIN comes back in pending_flush */
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
void worker_io_pass(worker *w)
{
	for (int round = 0; round < TIER_POLL_ROUNDS; round++) {
		w->io_dirty = false;
		int handled = hlog_session_poll(w->sess);
		if (!w->resume_head) {
			/* Completions that readied nobody freed throttle slots, which the poll refilled from
			 * the store's backlog: a synchronous device (posix) has already done those reads and
			 * never signals its fd, so poll again rather than sleep on it (worker.c note 6). */
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
