/*
 * start.c - start-up and the end of the process: options, the log file, the storage tier's device
 * (tier_open: the server builds the device and hands it to the store), the store, the workers and
 * their listeners, signals, the worker threads; then, once they have stopped (worker.c note 4),
 * everything closed in reverse order.
 *
 * Sections: the tick clock / signals and limits / listeners / workers / the storage tier's device /
 * server_main and its steps.
 *
 * With --maxmemory, memcap_startup_check sizes --memory and --index inside the cap (or stops
 * start-up saying why they do not fit) before anything is opened (memcap.c note 2).
 *
 * Order matters at both ends: the store opens after its device and closes before it (the log
 * flushes through the device as it closes); the listeners are bound before any worker thread runs,
 * so a port in use stops start-up before a connection is accepted; signals are made harmless
 * before the workers go away.
 *
 * Durability (persist.c): the workers start with g_srv.loading set and answer -LOADING while the
 * main thread recovers the store (a failed recovery stops the process with exit code 1: no
 * partial dataset is served); then the saver and the expirer (expire.c) start. At the end the
 * expirer and the saver stop and, unless
 * SHUTDOWN NOSAVE, the final checkpoint runs once the workers have exited, before the store
 * closes. Without --storage-tier, checkpoints write the in-memory log through a "logdev" of
 * their own on <dir>/Store; with one they use the store's device.
 */
#include "server/server.h"
#include "server/server_int.h"
#include "server/import.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
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
#include <unistd.h>

#include "device/device.h"
#include "server/aof.h"

#define LISTEN_BACKLOG      511
#define TIER_QUEUE_DEFAULT  1024          /* per-worker device queue depth when no throttle given */

server_state g_srv;

/* ---------------- the tick clock ---------------- */

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

/* ---------------- signals and limits ---------------- */

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

/* ---------------- listeners ---------------- */

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
	int naddr = bind_parse(addrs, WORKER_MAX_BIND, g_cfg.port);
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

/* ---------------- workers ---------------- */

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
		for (int k = 0; k < WORKER_MAX_BIND; k++)
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
		for (int k = 0; k < WORKER_MAX_BIND; k++)
			if (w->listen_fds[k] >= 0)
				close(w->listen_fds[k]);
		if (w->epfd >= 0)
			close(w->epfd);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		client_chunk_pool_free(w);
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
 * Open the device of --storage-tier (worker.c note 6). Garnet's flags map as follows:
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
	/* The store's device, or without a storage tier the checkpoints' log device. */
	dev *d = g_srv.dev ? g_srv.dev : g_srv.logdev;
	if (!d || !(d->caps & DEV_CAP_FAULT))
		return;
	if (dev_fault_spec_parse(g_cfg.device_fault_spec, &spec, why, sizeof(why)) < 0)
		return;   /* checked when it was set */
	int rc = dev_fault_set(d, &spec);
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

/* ---------------- server_main and its steps ---------------- */

/* The process-wide state that needs no device or store: clocks, ids, paths. */
static void server_state_init(const char *argv0)
{
	memset(&g_srv, 0, sizeof(g_srv));
	pthread_mutex_init(&g_srv.stats_lock, NULL);
	atomic_store(&g_srv.next_client_id, 1);
	g_srv.start_ms = spw_time_ms();
	g_srv.start_mono_ns = spw_mono_ns();
	g_srv.start_ticks = server_ticks();
	g_srv.pid = (int)getpid();
	atomic_store(&g_srv.loading, 1);   /* until persist_recover is done */
	run_id_init();
	ssize_t n = readlink("/proc/self/exe", g_srv.executable, sizeof(g_srv.executable) - 1);
	if (n < 0)
		snprintf(g_srv.executable, sizeof(g_srv.executable), "%s", argv0);
	if (g_cfg.config_file[0] && !realpath(g_cfg.config_file, g_srv.config_file_abs))
		snprintf(g_srv.config_file_abs, sizeof(g_srv.config_file_abs), "%s", g_cfg.config_file);
}

/* Without any checkpoint in --dir, the log's segment files name nothing recovery could load (a
 * crash before the first checkpoint, checkpoints removed by hand, another --dir): they are renamed
 * aside (hlog.<n>.stale, never deleted: they may be someone's data) before the device opens, so
 * that a fresh log starts at its first address in a folder without holes (a device reopening a
 * folder takes its lowest segment as the first one). The AOF, if any, brings the data back. */
static void stale_segments_remove(void)
{
	DIR *d = opendir(g_cfg.dir);
	struct dirent *e;
	unsigned long long id;
	char tail[16];
	if (!d)
		return;
	while ((e = readdir(d)) != NULL)
		if (sscanf(e->d_name, "checkpoint.%llu.%15s", &id, tail) == 2 && !strcmp(tail, "meta"))
			break;
	closedir(d);
	if (e)
		return;   /* a checkpoint: recovery decides */
	char store[sizeof(g_cfg.logdir) + 8];
	snprintf(store, sizeof(store), "%s/Store", g_cfg.storage_tier && g_cfg.logdir[0] ? g_cfg.logdir : g_cfg.dir);
	if (!(d = opendir(store)))
		return;
	int n = 0, dfd = dirfd(d);
	while ((e = readdir(d)) != NULL) {
		char *end;
		if (strncmp(e->d_name, "hlog.", 5) || !isdigit((unsigned char)e->d_name[5]))
			continue;
		strtoull(e->d_name + 5, &end, 10);
		if (*end)
			continue;   /* not a segment (an earlier start's .stale) */
		char to[300];
		snprintf(to, sizeof(to), "%s.stale", e->d_name);
		if (renameat(dfd, e->d_name, dfd, to) == 0)
			n++;
	}
	if (n) {
		fsync(dfd);
		spw_log(SPW_LOG_WARNING, 0, "No checkpoint in %s: %d log segment file(s) in %s renamed to "
		        "hlog.<n>.stale (a fresh log starts; the AOF, if any, is replayed; remove them once "
		        "not needed)", g_cfg.dir, n, store);
	}
	closedir(d);
}

/* With --storage-tier, open the device and arm the fault injector from --device-fault; without,
 * refuse a --device-fault. 0, or -1 after printing why. */
static int server_device_open(void)
{
	if (!g_cfg.storage_tier) {
		/* Without a tier the fault injector wraps the checkpoints' log device (server_logdev_open). */
		if (g_cfg.device_fault_spec[0] && !g_cfg.device_fault) {
			fprintf(stderr, "spillway: --device-fault needs --device-type fault:<type>\n");
			return -1;
		}
		return 0;
	}
	if (tier_open(&g_srv.dev) < 0)
		return -1;
	dev_fault_spec spec;
	char why[256];
	if (dev_fault_spec_parse(g_cfg.device_fault_spec, &spec, why, sizeof(why)) == 0 &&
	    spec.kind != DEV_FAULT_NONE && !(g_srv.dev->caps & DEV_CAP_FAULT)) {
		fprintf(stderr, "spillway: bad value for --device-fault '%s': the device is not a fault "
		        "injector (use --device-type fault:<type>)\n", g_cfg.device_fault_spec);
		dev_close(g_srv.dev);
		g_srv.dev = NULL;
		return -1;
	}
	server_device_fault_apply();
	return 0;
}

/* Open the store on the device (if any). 0, or -1 after printing why (the device is closed). */
static int server_store_open(void)
{
	hlog_config hc = {
		.memory_bytes = g_cfg.memory_bytes,
		.page_bytes = g_cfg.page_bytes,
		.index_bytes = g_cfg.index_bytes,
		.index_max_bytes = memcap_index_max(),
		.index_resize_pct = g_cfg.index_resize_threshold,
		.index_full_fn = compact_index_wanted,
		.mutable_percent = g_cfg.mutable_percent,
		.max_sessions = g_cfg.threads + 4,   /* the workers, the saver, the main thread's recovery,
		                                        the compactor, the expirer */
		.dev = g_srv.dev,
		.initial_io_bytes = (uint32_t)SPW_MIN(g_cfg.initial_io_record_size, (uint64_t)UINT32_MAX),
		.part_live = coll_part_live,   /* a large collection's parts (coll_large.c note 7) */
		.group_span_only = !g_cfg.coll_write_in_place,
	};
	int rc = hlog_open(&g_srv.store, &hc);
	if (rc < 0) {
		fprintf(stderr, "spillway: cannot open the store (--memory %llu --page %llu --index %llu "
		        "--mutable-percent %d%s): %s\n", (unsigned long long)g_cfg.memory_bytes,
		        (unsigned long long)g_cfg.page_bytes, (unsigned long long)g_cfg.index_bytes,
		        g_cfg.mutable_percent, g_srv.dev ? " --storage-tier" : "", spw_strerror(rc));
		dev_close(g_srv.dev);
		g_srv.dev = NULL;
		return -1;
	}
	return 0;
}

/* The device checkpoints write the log to: the store's own with a storage tier, else one opened
 * here on <dir>/Store for checkpoints only (native, falling back to what the file system allows).
 * 0, or -1 after printing why. */
static int server_logdev_open(void)
{
	char store[sizeof(g_cfg.dir) + 8], err[512] = "";
	dev_config dc;

	if (g_srv.dev) {
		g_srv.logdev = g_srv.dev;
		return 0;
	}
	snprintf(store, sizeof(store), "%s/Store", g_cfg.dir);
	if (mkdir(store, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "spillway: cannot create %s for checkpoints (--dir %s): %s\n", store, g_cfg.dir,
		        strerror(errno));
		return -1;
	}
	dev_config_init(&dc);
	dc.type = g_cfg.device_fault ? "fault:native" : "native";
	dc.dir = store;
	dc.prefix = "hlog.";
	dc.segment_bytes = g_cfg.segment_bytes;
	dc.allow_fallback = true;
	int rc = dev_open(&dc, &g_srv.logdev, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "spillway: cannot open the checkpoint device in %s: %s\n", store,
		        err[0] ? err : spw_strerror(rc));
		return -1;
	}
	g_srv.logdev_own = true;
	server_device_fault_apply();
	return 0;
}

/* SIGPIPE ignored, SIGTERM/SIGINT to fn (on_signal, or SIG_IGN once the workers are going). */
static void signals_set(void (*fn)(int), bool pipe)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	if (pipe) {
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
	}
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
}

/* Start every worker thread, recover the store while they answer -LOADING, start the saver, and
 * wait for the workers to stop; then the final checkpoint. The exit code: 0 after a graceful stop,
 * 1 when a worker could not start, recovery failed or the final checkpoint failed. */
static int workers_run(void)
{
	int started = 0;
	for (; started < g_srv.nworkers; started++) {
		int rc = pthread_create(&g_srv.workers[started].thread, NULL, worker_main, &g_srv.workers[started]);
		if (rc) {
			spw_log(SPW_LOG_WARNING, rc, "Cannot start worker %d", started);
			atomic_store(&g_srv.start_failed, 1);
			server_request_shutdown();
			break;
		}
	}
	bool ok = started == g_srv.nworkers;
	if (ok) {
		spw_log(SPW_LOG_NOTICE, 0, "Running mode=standalone, port=%d, threads=%d.", g_cfg.port,
		        g_srv.nworkers);
		if (persist_recover() < 0) {
			ok = false;
			atomic_store(&g_srv.start_failed, 1);
			server_request_shutdown();   /* listeners close: no partial dataset is served */
		} else {
			if (persist_start() < 0)
				spw_log(SPW_LOG_WARNING, 0, "No periodic checkpoints: the saver did not start");
			if (compact_start() < 0)
				spw_log(SPW_LOG_WARNING, 0, "No compaction: the compactor did not start");
			expire_start();
			server_wake_all();   /* workers open their AOF writers now that loading is over */
			spw_log(SPW_LOG_NOTICE, 0, "Ready to accept connections");
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(g_srv.workers[i].thread, NULL);
	int exit_code = atomic_load(&g_srv.start_failed) ? 1 : 0;
	/* Every worker has exited: every acknowledged write is in the store (note at the top). The
	 * compactor and the expirer stop first (a pass ends at its next page), so the final checkpoint
	 * sees a store nobody changes. */
	compact_stop();
	expire_stop();
	if (persist_stop(ok && !atomic_load(&g_srv.shutdown_nosave)) < 0)
		exit_code = 1;
	if (!exit_code)
		spw_log(SPW_LOG_NOTICE, 0, "Spillway is now ready to exit, bye bye...");
	return exit_code;
}

int server_main(int argc, char **argv)
{
	int rc = config_load(argc, argv);
	if (rc > 0)
		return 0;   /* --help / --version */
	if (rc < 0)
		return 1;
	if (g_cfg.import_check_only)
		return import_check_main();   /* a tool: no store, no listener */

	spw_log_open(g_cfg.logfile);
	command_table_init();
	server_state_init(argv[0]);
	spw_log(SPW_LOG_NOTICE, 0, "oO0OoO0OoO0Oo Spillway is starting oO0OoO0OoO0Oo");
	spw_log(SPW_LOG_NOTICE, 0, "Spillway version=%s, redis-compat=%s, bits=%d, pid=%d, just started",
	        SPW_VERSION, SPW_REDIS_VERSION, (int)(sizeof(long) * 8), g_srv.pid);
	spw_log(SPW_LOG_NOTICE, 0, g_cfg.config_file[0] ? "Configuration loaded" :
	        "Warning: no config file specified, using the default config.");
	raise_fd_limit();
	if (memcap_startup_check() < 0)
		return 1;   /* --memory and --index do not fit inside --maxmemory: it said why */

	stale_segments_remove();
	if (server_device_open() < 0 || server_store_open() < 0)
		return 1;
	memcap_startup_record();
	int exit_code = 1;
	if (server_logdev_open() < 0)
		goto out;
	if (g_cfg.aof && (rc = aof_dir_prepare(g_cfg.dir)) < 0) {
		fprintf(stderr, "spillway: cannot prepare %s/%s for the AOF: %s\n", g_cfg.dir, AOF_DIR_NAME,
		        spw_strerror(rc));
		goto out;
	}
	if (g_cfg.aof && (rc = aof_sync_thread_start()) < 0) {
		spw_log(SPW_LOG_WARNING, -rc, "Cannot start the AOF sync thread");
		goto out;
	}
	rc = workers_create();
	if (rc < 0) {
		spw_log(SPW_LOG_WARNING, -rc, "Cannot create the workers");
		goto out;
	}
	if (listeners_setup() < 0)
		goto out;
	signals_set(on_signal, true);
	spw_log(SPW_LOG_NOTICE, 0, "Server initialized");
	exit_code = workers_run();
out:
	/* Signals may still arrive: make them harmless before the workers go away. */
	signals_set(SIG_IGN, false);
	workers_destroy();
	aof_sync_thread_stop();
	hlog_close(g_srv.store);
	g_srv.store = NULL;
	if (g_srv.logdev_own)
		dev_close(g_srv.logdev);
	g_srv.logdev = NULL;
	dev_close(g_srv.dev);   /* after the log: it flushes through the device as it closes */
	g_srv.dev = NULL;
	return exit_code;
}
