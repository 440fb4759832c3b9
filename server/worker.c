/*
 * worker.c - the worker threads: the event loop, accepting connections, wake-ups, timed work
 * (idle-client timeout, paused listeners, the shutdown drain) and the requests other threads make
 * of a worker (CLIENT KILL, CLIENT LIST, shutdown, wake-ups after CONFIG SET).
 *
 * Sections: per-worker scratch / accept / wake-ups, timed work, shutdown / the event loop /
 * cross-worker requests. A client's own state machine (read, parse, dispatch, write, close) is in
 * client.c; parking clients on the storage tier and the look-ahead are in park.c; start-up, which
 * creates the workers, is in start.c.
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
 *  3. Other threads never touch a client's state except its kill_mark: CLIENT KILL walks each
 *     worker's list under that worker's clients_lock (which the owner takes only to link or unlink
 *     a client), sets kill_mark, sets the worker's kill_pending and writes its eventfd; the owner
 *     closes marked clients. CLIENT LIST reads other workers' clients under the same lock, field
 *     by field, without further synchronization: a snapshot for an operator (server_int.h).
 *  4. Shutdown (SIGTERM/SIGINT or SHUTDOWN): the signal handler only sets g_srv.shutdown and
 *     writes every worker's eventfd. Each worker then closes its listeners, stops reading, writes
 *     the replies it owes for up to SHUTDOWN_DRAIN_MS, closes its clients and its hlog session and
 *     exits; the main thread joins them, closes the store and returns 0 (start.c).
 *  5. Stats are per worker and written only by their worker (no shared counter on the request
 *     path); INFO sums them with relaxed loads. The only shared atomics touched per connection are
 *     g_srv.nclients (maxclients) and g_srv.next_client_id. The memory gauges (buf_bytes: read
 *     buffers, reply chunks and the scratch; aof_buf_bytes) are kept the same way, changed where
 *     a buffer is allocated, grown or freed, never per request; each pass ends with the memory
 *     cap's look at them (memcap.c note 3).
 *
 * The storage tier (--storage-tier; start.c's tier_open maps Garnet's flags onto device/device.h):
 *  6. Each worker attaches its hlog session on its own thread (hlog_session_attach: the session's
 *     device queue belongs to that thread) and puts hlog_session_fd in its epoll set, so one
 *     epoll_wait sleeps on sockets and device completions together. The fd is edge-triggered and
 *     never read: each signal (eventfd_signal wakes its waiters whatever the count) is one report,
 *     and the pass it wakes polls, which reaps everything the signal announced. Every pass calls
 *     hlog_session_poll once after the sockets were served: that one call submits every read the
 *     pass queued (one system call for all of them), reaps completions and runs the store's ready
 *     callbacks. A worker sleeps (epoll timeout -1) only when nothing is left to submit and no
 *     client is ready to resume; while clients are parked and the session has nothing in flight
 *     (reads refused by the device's throttle, a flush another session must finish) it sleeps at
 *     most TIER_TICK_MS instead, so a wake-up that belongs to another thread cannot be lost.
 *     "Nothing left to submit" is the session's word (hlog_session_unsubmitted), not only
 *     io_dirty: a command that does not park can queue device work too, above all a SET whose
 *     page turn claims page writes (log/alloc.c note 7), and one re-run by worker_resume after the
 *     pass's last poll (or run from pending_flush) leaves them queued. Asleep on them, the worker
 *     would never submit them, no completion would ever signal, and every client of every worker
 *     that waits for a frame behind those pages would stall with it (pinned by
 *     tests/integration/test_tier_quiet.c). It ticks instead of sleeping while its session holds
 *     work no signal of its own will announce (hlog_session_tick: a backlog under a throttle that
 *     other workers' requests hold, parked clients or not, also pinned there; requests the kernel
 *     was short of resources to take), and while clients are parked with its device fd not in its
 *     epoll set (io_fd < 0).
 *     Completions are reaped only by the worker that queued the reads (its own queue). A poll
 *     that handled completions while clients stay parked is followed by another (a few per pass,
 *     then the next pass does not sleep): the poll refills freed throttle slots from the store's
 *     backlog, and a synchronous device completes those reads without signalling its fd, so
 *     sleeping on it would hang a long backlog (many reads of one op beyond the throttle, park.c
 *     note 3). The poll and the resumes are park.c's worker_io_pass.
 *
 * Durability (persist.c, aof.h):
 *  7. With --aof, each worker has its own AOF writer, opened on its thread once loading is over
 *     and set as its session's redo hook: every change the worker's commands make appends a record
 *     to the writer's buffer. worker_aof_flush writes the pass's records with one write (and with
 *     --aof-fsync always one sync: group commit) at the start of client_pending_flush, the one place
 *     replies leave, and again before the replies of commands that a drained client ran there, so
 *     under always no reply of a write leaves before its record is durable. A write or sync error
 *     under always exits the process (as Redis: the reply may already be in a buffer and the change
 *     cannot be undone); under everysec/no it is logged, shown in INFO and retried next pass (the
 *     records stay buffered). At a pass's start (worker_aof_refresh) the worker follows CONFIG SET
 *     appendonly/appendfsync and rotates to the generation the saver moved g_srv.aof_gen to.
 *  8. SAVE parks its client (CLIENT_SAVE_WAIT) until the saver's checkpoint ends; the saver sets
 *     save_pending and writes the eventfd, and worker_wake answers the waiters (persist.c note 4).
 *     SHUTDOWN (without NOSAVE) waits the same way (CLIENT_SHUTDOWN_SAVE): a checkpoint that
 *     succeeds starts the shutdown, one that fails answers Redis's "Errors trying to SHUTDOWN" and
 *     the server goes on, so a full disk does not turn a SHUTDOWN into lost writes.
 */
#include "server/server_int.h"
#include "server/conn.h"
#include "server/aof.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define ACCEPTS_PER_PASS    64
#define MAX_EVENTS          256
#define SCRATCH_KEEP        (4u << 20)
#define SHUTDOWN_DRAIN_MS   2000
#define TIER_TICK_MS        1             /* longest sleep while parked clients wait on others */

/* The worker running on this thread (NULL elsewhere). */
static __thread worker *tl_worker;

worker *worker_self(void) { return tl_worker; }

/* ---------------- per-worker scratch ---------------- */

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

/* Give back a scratch buffer that one large command grew (called once per pass). */
void worker_scratch_trim(worker *w)
{
	if (w->scratch_cap > SCRATCH_KEEP) {
		w->buf_bytes -= (int64_t)w->scratch_cap;
		free(w->scratch);
		w->scratch = NULL;
		w->scratch_cap = 0;
	}
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
		conn cn;
		conn_tcp_init(&cn, fd);
		uint32_t n = atomic_fetch_add_explicit(&g_srv.nclients, 1, memory_order_relaxed);
		if (n >= (uint32_t)__atomic_load_n(&g_cfg.maxclients, __ATOMIC_RELAXED)) {
			atomic_fetch_sub_explicit(&g_srv.nclients, 1, memory_order_relaxed);
			struct iovec iov = { .iov_base = (void *)maxerr, .iov_len = sizeof(maxerr) - 1 };
			ssize_t r = conn_writev(&cn, &iov, 1);
			(void)r;
			conn_close(&cn);
			w->stats.rejected++;
			continue;
		}
		client_create(w, &cn, &sa);
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
		client_pending_add(w, c);
	}
}

/* Answer one SAVE/COMPACT/SHUTDOWN waiter whose checkpoint or pass is done; false when it must
 * not read on (the server shuts down). */
static bool save_answer_one(worker *w, client *c, int rc, const char *why)
{
	if (c->flags & CLIENT_COMPACT_WAIT) {
		c->flags &= ~CLIENT_COMPACT_WAIT;
		if (rc == 0) {
			reply_ok(c);
		} else {
			char msg[200];
			snprintf(msg, sizeof(msg), "ERR compaction failed: %s", why[0] ? why : spw_strerror(rc));
			reply_error(c, msg);
		}
		return true;
	}
	if (c->flags & CLIENT_SHUTDOWN_SAVE) {
		c->flags &= ~CLIENT_SHUTDOWN_SAVE;
		if (rc == 0) {
			server_request_shutdown();   /* as Redis: no reply */
			c->flags |= CLIENT_CLOSE_AFTER_REPLY;
			client_pending_add(w, c);
			return false;
		}
		spw_log(SPW_LOG_WARNING, 0, "Errors trying to shut down the server: the checkpoint "
		        "failed; the server goes on (check the logs)");
		reply_error(c, "ERR Errors trying to SHUTDOWN. Check logs.");
	} else if (rc == 0) {
		reply_ok(c);
	} else {
		reply_error(c, "ERR");   /* Redis 7.0's failed SAVE: shared.err */
	}
	return true;
}

/* Answer the SAVE waiters whose checkpoint is done, and run what they sent after it (note 8). */
static void worker_save_answer(worker *w)
{
	for (client *c = w->clients; c; c = c->next) {
		int rc;
		char why[160] = "";
		if (!(c->flags & CLIENT_SAVE_WAIT))
			continue;
		if ((c->flags & CLIENT_COMPACT_WAIT) ? !compact_done(c->save_ticket, &rc, why, sizeof(why))
		                                     : !persist_save_done(c->save_ticket, &rc))
			continue;
		c->flags &= ~CLIENT_SAVE_WAIT;
		resp_chunk *mark = c->out.tail;
		uint32_t mark_len = mark ? mark->len : 0;
		size_t mark_bytes = c->out.bytes;
		bool go_on = save_answer_one(w, c, rc, why);
		if (c->flags & CLIENT_REPLY_MUTE_WAIT) {   /* sent under CLIENT REPLY OFF|SKIP */
			c->flags &= ~CLIENT_REPLY_MUTE_WAIT;
			client_reply_rollback(c, mark, mark_len, mark_bytes);
		}
		if (go_on)
			client_process_input(w, c);   /* its later requests; pends it for writing */
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
	if (atomic_exchange(&w->save_pending, 0))
		worker_save_answer(w);
}

/* ---------------- the AOF (note 7) ---------------- */

static void worker_aof_close(worker *w)
{
	if (!w->aof)
		return;
	hlog_session_set_redo(w->sess, NULL, NULL);
	aof_writer_close(w->aof);   /* flushes and syncs what is left */
	w->aof = NULL;
	atomic_fetch_sub(&g_srv.aof_writers, 1);
}

/* An AOF write, sync, open or rotate error (note 7): fatal under always, else logged once per
 * error and shown in INFO. */
static void worker_aof_error(worker *w, int rc, const char *what)
{
	if (__atomic_load_n(&g_cfg.aof_fsync, __ATOMIC_RELAXED) == AOF_FSYNC_ALWAYS) {
		spw_log(SPW_LOG_WARNING, -rc, "Can't recover from AOF write error when the AOF fsync policy is "
		        "'always'. Exiting...");
		exit(1);
	}
	if (rc != w->aof_err)
		spw_log(SPW_LOG_WARNING, 0, "Error writing to the AOF file (%s, worker %d): %s", what, w->idx,
		        spw_strerror(rc));
	w->aof_err = rc;
	atomic_store(&g_srv.aof_write_err, rc);
}

/* At a pass's start: open, close, rotate or re-mode the writer as --aof, the saver's generation
 * and --aof-fsync say. Nothing while loading: the replay's own changes are not logged, and no
 * write command runs then. */
static void worker_aof_refresh(worker *w)
{
	/* One reading of the loading flag per pass, for dispatch too (commands.c): a write command that
	 * runs in this pass runs only if the writer was opened at its start. */
	w->loading = atomic_load_explicit(&g_srv.loading, memory_order_acquire) != 0;
	bool want = __atomic_load_n(&g_cfg.aof, __ATOMIC_RELAXED) && !w->loading;
	if (SPW_LIKELY(!want && !w->aof))
		return;
	if (!want) {
		worker_aof_close(w);
		return;
	}
	uint64_t gen = atomic_load_explicit(&g_srv.aof_gen, memory_order_relaxed);
	int mode = __atomic_load_n(&g_cfg.aof_fsync, __ATOMIC_RELAXED);
	if (!w->aof) {
		int rc = aof_writer_open(&w->aof, g_cfg.dir, w->idx, gen, mode);
		if (rc < 0) {
			w->aof = NULL;
			worker_aof_error(w, rc, "open");
			return;
		}
		w->aof_gen = gen;
		w->aof_fsync = mode;
		hlog_session_set_redo(w->sess, aof_redo, w->aof);
		atomic_fetch_add(&g_srv.aof_writers, 1);
		return;
	}
	if (gen != w->aof_gen) {
		int rc = aof_writer_rotate(w->aof, gen);
		if (rc < 0)
			worker_aof_error(w, rc, "rotate");   /* tried again next pass */
		else
			w->aof_gen = gen;
	}
	if (mode != w->aof_fsync) {
		aof_writer_set_fsync(w->aof, mode);
		w->aof_fsync = mode;
	}
}

void worker_aof_flush(worker *w)
{
	if (SPW_LIKELY(!w->aof) || !aof_writer_dirty(w->aof))
		return;
	int rc = aof_writer_flush(w->aof);
	if (rc == 0)
		rc = aof_writer_error(w->aof);   /* a record it could not buffer (out of memory) is lost */
	if (rc < 0) {
		worker_aof_error(w, rc, "write");
		return;
	}
	if (SPW_UNLIKELY(w->aof_err)) {
		spw_log(SPW_LOG_WARNING, 0, "AOF write error looks solved, Redis can write again.");
		w->aof_err = 0;
		atomic_store(&g_srv.aof_write_err, 0);
	}
}

/* Once a second when there is timed work: idle-client timeout, re-arming paused listeners, idle
 * clients' read buffers. */
static void worker_cron(worker *w)
{
	int timeout = __atomic_load_n(&g_cfg.timeout, __ATOMIC_RELAXED);
	if (w->accept_paused) {
		w->accept_paused = false;
		listeners_pause(w, false);
	}
	if (w->rbuf_clients)   /* idle clients' read buffers shrink (client.c note 2) */
		for (client *c = w->clients; c; c = c->next)
			client_rbuf_idle_shrink(w, c);
	if (timeout > 0) {
		int64_t limit = (int64_t)timeout * 1000;
		for (client *c = w->clients; c; c = c->next) {
			if (!(c->flags & (CLIENT_CLOSE_ASAP | CLIENT_PARKED | CLIENT_SAVE_WAIT)) && !c->out.bytes &&
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
	return __atomic_load_n(&g_cfg.timeout, __ATOMIC_RELAXED) > 0 || w->accept_paused || w->rbuf_clients ||
	       __atomic_load_n(&g_cfg.maxmemory, __ATOMIC_RELAXED) != 0;
}

static int worker_timeout(worker *w)
{
	if (w->tier) {
		if (w->io_dirty || w->resume_head || hlog_session_unsubmitted(w->sess))
			return 0;   /* IO to submit or reap, or clients to resume: do not sleep (note 6) */
		if ((w->nparked && (w->io_fd < 0 || hlog_session_inflight(w->sess) == 0)) ||
		    hlog_session_tick(w->sess))
			return TIER_TICK_MS;   /* nothing of its own will wake it: look again soon */
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
	memcap_worker_refresh(w);
	if (worker_has_timed_work(w) && w->next_cron_ms > w->now_ms + 1000)
		w->next_cron_ms = w->now_ms + 1000;
}

/* The session's completion fd fired. It is edge-triggered in the epoll set, so its count is not
 * read (one system call per wake-up saved): every signal of the eventfd is a new edge, and the poll
 * this pass runs reaps what the signal announced; a completion after that signals again (note 6). */
static void worker_io_event(worker *w)
{
	w->io_dirty = true;
}

/* Open the worker's store session on its own thread, and with a storage tier attach it and put
 * its completion fd in the epoll set (note 6). 0, or -1 after logging why and asking every worker
 * to stop (start-up failed). */
static int worker_session_open(worker *w)
{
	int rc = hlog_session_open(g_srv.store, &w->sess);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Worker %d: cannot open a store session: %s", w->idx, spw_strerror(rc));
		goto fail;
	}
	if (!g_srv.dev)
		return 0;
	rc = hlog_session_attach(w->sess, worker_op_ready, w);
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, 0, "Worker %d: cannot attach to the storage device: %s", w->idx,
		        spw_strerror(rc));
		hlog_session_close(w->sess);
		w->sess = NULL;
		goto fail;
	}
	w->tier = true;
	w->io_fd = hlog_session_fd(w->sess);
	if (w->io_fd >= 0) {
		/* Edge-triggered: worker_io_event need not read the count (note 6). */
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.ptr = &w->io_fd };
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->io_fd, &ev) < 0) {
			spw_log(SPW_LOG_WARNING, errno, "Worker %d: epoll_ctl on the device fd", w->idx);
			w->io_fd = -1;   /* still correct: worker_timeout then ticks while reads wait */
		}
	}
	return 0;
fail:
	atomic_store(&g_srv.start_failed, 1);
	server_request_shutdown();
	return -1;
}

/* One client's events of this pass. */
static void worker_client_event(worker *w, client *c, uint32_t e)
{
	if (c->flags & CLIENT_CLOSE_ASAP)
		return;
	if (e & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		if (!client_readable(c)) {
			if (e & (EPOLLHUP | EPOLLERR))
				client_close_async(c);   /* nobody left to read the replies */
			else if (c->flags & CLIENT_PARKED)
				client_pending_add(w, c);   /* drop EPOLLIN until it resumes (park.c note 1) */
		} else {
			client_read(w, c);
		}
	}
	if (e & EPOLLOUT)
		client_pending_add(w, c);
}

/* Serve the events epoll_wait returned: wake-ups, device completions, listeners, clients. */
static void worker_events(worker *w, const struct epoll_event *evs, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = evs[i].data.ptr;
		if (p == &w->wake_fd) {
			worker_wake(w);
			continue;
		}
		if (p == &w->io_fd) {
			worker_io_event(w);
			continue;
		}
		if ((int *)p >= &w->listen_fds[0] && (int *)p < &w->listen_fds[WORKER_MAX_BIND]) {
			if (!w->stopping)
				accept_all(w, *(int *)p);
			continue;
		}
		if (SPW_UNLIKELY((i & 63) == 63))
			hlog_session_refresh(w->sess);   /* a long pass must not hold back the epoch */
		worker_client_event(w, p, evs[i].events);
	}
}

/* A worker thread: the loop of note 2 until shutdown, then its clients and session closed. */
void *worker_main(void *arg)
{
	worker *w = arg;
	struct epoll_event evs[MAX_EVENTS];

	tl_worker = w;
	if (worker_session_open(w) < 0)
		return NULL;
	w->now_ms = spw_time_ms();
	w->next_cron_ms = w->now_ms + 1000;
	memcap_worker_refresh(w);
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
		worker_aof_refresh(w);
		worker_events(w, evs, n);
		if (w->tier)
			worker_io_pass(w);
		if (SPW_UNLIKELY(atomic_load_explicit(&g_srv.shutdown, memory_order_relaxed)) && !w->stopping)
			worker_stop_begin(w);
		hlog_session_unprotect(w->sess);
		if (SPW_UNLIKELY(w->now_ms >= w->next_cron_ms) && worker_has_timed_work(w))
			worker_cron(w);
		client_pending_flush(w);
		worker_scratch_trim(w);
		if (SPW_UNLIKELY(w->aof != NULL))
			__atomic_store_n(&w->aof_buf_bytes, aof_writer_buffer_bytes(w->aof), __ATOMIC_RELAXED);
		else if (SPW_UNLIKELY(w->aof_buf_bytes))
			__atomic_store_n(&w->aof_buf_bytes, 0, __ATOMIC_RELAXED);
		memcap_worker_check(w);   /* the -OOM gate's memory bit (memcap.c note 3) */
		w->stats.busy_ns += spw_mono_ns() - t0;
		if (w->stopping && (!w->clients || w->now_ms >= w->stop_deadline_ms))
			break;
	}
	while (w->clients)
		client_free(w, w->clients);
	worker_aof_close(w);   /* before the session: its redo hook points at the writer */
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

void server_wake_saves(void)
{
	for (int i = 0; i < g_srv.nworkers; i++) {
		atomic_store(&g_srv.workers[i].save_pending, 1);
		if (g_srv.workers[i].wake_fd >= 0)
			worker_poke(&g_srv.workers[i]);
	}
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
