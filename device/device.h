/*
 * device.h - the storage device under the hybrid log: one small interface, several backends.
 *
 * Shape (SQLite's VFS): a device is a `dev` base struct whose first member points at a const table
 * of functions (`dev_ops`); every backend embeds `dev` (and `dev_queue`) as its first member and
 * extends it. Callers use the inline wrappers below (dev_read, dev_submit, dev_reap ...), never the
 * table.
 *
 * Layout on disk: a logical byte space [0, 2^48) cut into segments of cfg.segment_bytes (a power of
 * two); segment n is the file <cfg.dir>/<cfg.prefix><n>, created on the first write that reaches it
 * (on the writing thread, once per segment) or earlier by dev_segment_prepare, and opened O_DIRECT.
 * Disk is reserved with fallocate(KEEP_SIZE) ahead of the writes, a first step (cfg.prealloc_step)
 * when the file is made, then doubled as the writes near its end (by a thread of the device's), so
 * writes land in preallocated space while a small store costs about a step per file, not a
 * segment. The file's size is the written end, so a read past it returns a short count, also after
 * close and reopen. The folder and the prefix are the caller's: the hybrid log's segments are
 * <logdir>/Store/hlog.<n> because the server says so (tier_open in server/start.c), and another
 * user of the layer (an append-only file, checkpoints) names its own. Files in the folder without
 * the prefix are left alone.
 *
 * Threads and ownership:
 *  - A `dev` is shared by all threads. dev_open/dev_close run once, on any thread, with no queue open
 *    at dev_close. dev_segment_remove/dev_truncate_until/dev_sync may run on any thread, but the
 *    caller promises that no IO to a removed segment is queued or in flight (the log uses its epoch).
 *  - A `dev_queue` belongs to one thread, the one that called dev_queue_open (an io_uring ring or an
 *    aio context for the native backends). Only that thread may call the dev_queue functions, and
 *    every completion callback of a request queued there runs on that thread, inside dev_reap.
 *  - A `dev_req` is owned by the caller, who keeps it, its iovec array and its buffers valid and
 *    untouched from dev_read/dev_write/dev_flush until its callback has run. No allocation happens
 *    per request: the request carries the device's bookkeeping in its private part.
 *
 * Request life: dev_read/dev_write/dev_flush queue it (nothing reaches the kernel yet), dev_submit
 * hands everything queued to the kernel in one system call (one io_uring_submit / one io_submit),
 * dev_reap(max) runs up to max callbacks without ever blocking, and dev_wait blocks a dedicated IO
 * thread until completions arrive. A worker's event loop instead sleeps on dev_queue_fd.
 *
 * Errors: functions return 0 or a count, or -errno; a callback receives the byte count or -errno.
 * -EAGAIN from dev_read/dev_write/dev_flush means "try again": the throttle
 * (cfg.throttle_limit IOs in flight on the device) or the queue's depth is reached; the caller keeps
 * the request, reaps, and queues it again. Nothing here blocks forever or aborts on bad input.
 */
#ifndef SPW_DEVICE_H
#define SPW_DEVICE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include "common/spw.h"

typedef struct dev dev;
typedef struct dev_queue dev_queue;
typedef struct dev_req dev_req;
typedef struct dev_ops dev_ops;

#define DEV_MAX_BYTES (1ULL << 48)          /* the logical byte space */
#define DEV_SEGMENT_DEFAULT (1ULL << 30)    /* --segment default: 1 GiB */
#define DEV_SEGMENT_MIN (1ULL << 16)        /* 64 KiB: keeps the segment table bounded */
#define DEV_THROTTLE_DEFAULT 4096           /* --device-throttle-limit default, as Garnet */
#define DEV_QUEUE_DEPTH_DEFAULT 256         /* per-queue ring entries / aio events */
#define DEV_IOV_MAX 32                      /* iovecs in one request */
#define DEV_PIECES_MAX 16                   /* segments one request may span */
#define DEV_REQ_MAX_BYTES (1ULL << 30)      /* bytes in one request */
#define DEV_PREFIX_MAX 200                  /* bytes of dev_config.prefix: leaves room for <n> in NAME_MAX */
#define DEV_PREALLOC_STEP_DEFAULT (64ULL << 20)  /* bytes of a new segment file reserved at first */

/* Capability bits (dev->caps): the log asks instead of assuming. */
enum {
	DEV_CAP_DIRECT = 1u << 0,      /* O_DIRECT: bypasses the page cache */
	DEV_CAP_PERSISTENT = 1u << 1,  /* data survives dev_close and a later dev_open of the same dir */
	DEV_CAP_ASYNC = 1u << 2,       /* IO completes after dev_submit returns (kernel or threads) */
	DEV_CAP_FLUSH = 1u << 3,       /* dev_flush/dev_sync make writes durable (else no-ops) */
	DEV_CAP_FAULT = 1u << 4,       /* the fault-injecting wrapper: dev_fault_set works */
};

/* Request kinds (dev_req private op field). */
enum { DEV_OP_READ = 0, DEV_OP_WRITE = 1, DEV_OP_FLUSH = 2 };

/*
 * Completion callback: res is the number of bytes transferred (short only at the written end of a
 * read, or on a short write), or -errno. Runs on the queue's thread inside dev_reap (or dev_queue_close);
 * it may queue new requests and call dev_submit, but not dev_reap or dev_queue_close.
 */
typedef void (*dev_done_fn)(dev_req *req, int64_t res);

struct dev_req {
	/* Filled by the caller. */
	uint64_t offset;                 /* logical byte offset: a multiple of dev->sector_bytes */
	const struct iovec *iov;         /* 1..DEV_IOV_MAX buffers; base % mem_align, len % sector */
	int iovcnt;                      /* 0 for dev_flush */
	dev_done_fn done;
	void *ctx;                       /* for the caller; the device never touches it */
	/* Private to the device while the request is queued or in flight. */
	struct {
		dev_req *next;               /* done list / localmemory hand-off */
		dev_queue *q;                /* owning queue */
		uint64_t len;                /* total bytes */
		uint64_t short_at;           /* bytes before the first short piece */
		int64_t res;                 /* result once finished (localmemory threads) */
		int err;                     /* first piece error */
		uint16_t pending;            /* pieces not yet complete */
		uint8_t op;                  /* DEV_OP_* */
	} p;
};

/* Options; dev_config_init fills the defaults (dir and prefix have none: they are the caller's).
 * Flag names are the server's command line. */
typedef struct dev_config {
	const char *type;          /* --device-type: "native" (default), "localmemory", "posix", or a
	                              backend name "uring" / "libaio"; a "fault:" prefix wraps any of them */
	const char *io_backend;    /* --device-io-backend for native: "uring", "libaio", or NULL = uring
	                              when the kernel allows it, else libaio (said in the log) */
	const char *dir;           /* folder of the segment files (file backends; created if missing,
	                              its parent must exist); the server passes <logdir>/Store */
	const char *prefix;        /* segment n is <dir>/<prefix><n> (file backends; "" allowed, at most
	                              DEV_PREFIX_MAX bytes); the server passes "hlog." */
	uint64_t segment_bytes;    /* --segment: power of two >= DEV_SEGMENT_MIN */
	uint32_t throttle_limit;   /* --device-throttle-limit: IOs in flight on the device */
	uint32_t queue_depth;      /* IOs (segment pieces) one dev_queue holds queued + in flight */
	int completion_threads;    /* --device-completion-threads (localmemory): 0 = submitter copies */
	uint32_t sector_bytes;     /* localmemory sector; for files, a minimum over what statx says */
	uint64_t prealloc_step;    /* file backends: bytes of a new segment file reserved (fallocate
	                              KEEP_SIZE) when it is made, the reservation doubling from there ahead
	                              of the writes; 0 = DEV_PREALLOC_STEP_DEFAULT, rounded up to a power
	                              of two >= 64 KiB; >= segment_bytes reserves the whole segment at once */
	bool allow_fallback;       /* uring -> libaio -> posix when the kernel or file system refuses */
} dev_config;

struct dev {
	const dev_ops *ops;
	const char *name;          /* backend: "uring", "libaio", "localmemory", "posix", "fault" */
	uint32_t caps;             /* DEV_CAP_* */
	uint32_t sector_bytes;     /* offset and length granularity (statx STATX_DIOALIGN, 512 fallback) */
	uint32_t mem_align;        /* buffer address alignment */
	uint32_t throttle_limit;
	uint32_t queue_depth;
	unsigned segment_shift;    /* log2(segment_bytes) */
	uint64_t segment_bytes;
	struct dev_segtab *segs;   /* private: the segment table (device.c) */
	/* Written by every thread; padded off the read-mostly fields above (no aligned attribute, so
	 * a backend struct from plain malloc is still correctly aligned). */
	char pad0_[SPW_CACHELINE];
	_Atomic uint32_t inflight; /* requests accepted and not yet called back (the throttle) */
	char pad1_[SPW_CACHELINE - sizeof(uint32_t)];
};

struct dev_queue {
	const dev_ops *ops;
	dev *dev;
	uint32_t depth;            /* pieces this queue may hold */
	uint32_t pieces;           /* pieces queued or in flight in the kernel */
	uint32_t reqs;             /* requests accepted, callback not yet run */
	uint32_t unsubmitted;      /* pieces queued since the last dev_submit */
	uint32_t ndone;            /* requests on the done list */
	uint64_t completed;        /* callbacks run so far */
	dev_req *done_head;        /* finished requests whose callback has not run */
	dev_req *done_tail;
	struct dev_piece *piece_free;   /* pool for requests that span segments */
	struct dev_piece *piece_mem;
	int efd;                   /* eventfd behind dev_queue_fd, -1 until asked for */
};

struct dev_ops {
	void (*close)(dev *d);
	int (*queue_open)(dev *d, dev_queue **out);
	void (*queue_close)(dev_queue *q);
	int (*enqueue)(dev_queue *q, dev_req *r, int op);
	int (*submit)(dev_queue *q);
	int (*reap)(dev_queue *q, int max);
	int (*wait)(dev_queue *q, int min, int64_t timeout_ns);
	int (*queue_fd)(dev_queue *q);
	int (*segment_remove)(dev *d, uint64_t seg);
	int (*sync)(dev *d);
};

void dev_config_init(dev_config *cfg /* out */);

/*
 * Open a device. On failure returns -errno, *out is NULL, and err (if not NULL) says what was refused
 * and why, e.g. "io_uring refused by the kernel (io_uring_setup: Operation not permitted;
 * kernel.io_uring_disabled=2)". -ENOSYS / -EPERM: the backend is missing or refused; -EOPNOTSUPP:
 * the file system refuses O_DIRECT; -ENOENT: unknown backend name (also when not built);
 * -EINVAL: a bad option (a file backend without cfg.dir or cfg.prefix, among others). A file
 * backend reopening a folder takes the lowest <prefix><n> there as the first segment: the ones
 * below were removed by dev_truncate_until before.
 */
int dev_open(const dev_config *cfg, dev **out /* out */, char *err, size_t errlen);
void dev_close(dev *d);

/* Backend names the registry knows (NULL past the end), and whether this build has one. */
const char *dev_backend_name(int i);
bool dev_backend_built(const char *name);

/* Open the calling thread's queue; see "Threads and ownership". */
static inline int dev_queue_open(dev *d, dev_queue **out /* out */)
{
	return d->ops->queue_open(d, out);
}

/* Waits for the queue's in-flight IO (running their callbacks) and frees it. */
static inline void dev_queue_close(dev_queue *q)
{
	if (q)
		q->ops->queue_close(q);
}

/* Queue a read of sum(iov) bytes at req->offset. 0, -EAGAIN (throttled), -EINVAL (misaligned). */
static inline int dev_read(dev_queue *q, dev_req *r)
{
	return q->ops->enqueue(q, r, DEV_OP_READ);
}

/* Queue a write; the segment file is created when absent. Same returns as dev_read. */
static inline int dev_write(dev_queue *q, dev_req *r)
{
	return q->ops->enqueue(q, r, DEV_OP_WRITE);
}

/* Queue an fdatasync of the segment holding req->offset (iovcnt 0); completes with 0 or -errno. */
static inline int dev_flush(dev_queue *q, dev_req *r)
{
	return q->ops->enqueue(q, r, DEV_OP_FLUSH);
}

/* Hand every queued request to the kernel in one system call. Returns pieces submitted or -errno
 * (-EAGAIN: the kernel is short of resources; the requests stay queued for the next call). */
static inline int dev_submit(dev_queue *q)
{
	return q->ops->submit(q);
}

/* Run up to max completion callbacks on the calling thread; never blocks. Returns how many ran. */
static inline int dev_reap(dev_queue *q, int max)
{
	return q->ops->reap(q, max);
}

/* Submit what is queued (in the same system call as the wait where the backend can: io_uring),
 * then block until at least min completions (capped at what is in flight) can be reaped, or
 * timeout_ns passes (< 0: no limit). For dedicated IO threads; event loops use dev_queue_fd and
 * never block here. 0, -ETIME, -EINTR, or a submission error. */
static inline int dev_wait(dev_queue *q, int min, int64_t timeout_ns)
{
	return q->ops->wait(q, min, timeout_ns);
}

/*
 * A nonblocking eventfd that becomes readable when completions arrive after dev_submit returned (the
 * ring's registered eventfd, the aio eventfd, the localmemory threads' eventfd). Protocol: reap until
 * dev_reap returns 0 before sleeping; when it polls readable, read its 8 bytes, then reap. Created on
 * first call (so a queue that never sleeps on it pays nothing); owned by the queue. fd or -errno.
 */
static inline int dev_queue_fd(dev_queue *q)
{
	return q->ops->queue_fd(q);
}

/* Requests accepted on this queue whose callback has not run yet. */
static inline uint32_t dev_queue_pending(const dev_queue *q)
{
	return q->reqs;
}

/* Delete segment seg (its file, or its memory); later IO there fails with -ENOENT. */
static inline int dev_segment_remove(dev *d, uint64_t seg)
{
	return d->ops->segment_remove(d, seg);
}

/* Remove every segment that lies wholly below offset (compaction / truncation of BeginAddress);
 * IO there fails with -ENOENT from then on, also after a reopen (the files <prefix><n> with n below
 * are unlinked, those this process never opened included, and the directory is fsynced). 0,
 * -EINVAL, or the -errno of that fsync. */
int dev_truncate_until(dev *d, uint64_t offset);

/* The name of segment seg for messages: "<dir>/<prefix><n>" for file backends, "segment <n>"
 * otherwise. */
void dev_segment_name(const dev *d, uint64_t seg, char *buf, size_t len);

/* Create segment seg now (its file: open, fallocate of the first step, directory fsync), from a
 * background thread, so that the first write there does not pay for it on a worker. 0 or -errno
 * (-ENOENT: removed). */
int dev_segment_prepare(dev *d, uint64_t seg);

/*
 * What the device's segments take: for file backends the blocks allocated to every <prefix><n> in
 * the folder (st_blocks * 512, what du shows: written data and the preallocated step ahead of the
 * writes, files this process never opened included); for localmemory the memory its segments hold
 * (resident pages); the fault wrapper answers for its inner device (its power-cut buffer is not
 * counted). Any thread, at any time; a file removed meanwhile is simply not counted. The
 * reservations claimed before the call are made first, so it may wait for the preallocation thread
 * (a fallocate waits for the file's IO in flight: milliseconds, and only while a segment's
 * reservation is being extended, a few times per segment). 0 with *bytes, or -errno (-EINVAL, or
 * the folder cannot be read).
 */
int dev_disk_usage(dev *d, uint64_t *bytes /* out */);

/* fdatasync every open segment (synchronous; for checkpoints and shutdown). 0 or -errno. */
static inline int dev_sync(dev *d)
{
	return d->ops->sync(d);
}

static inline uint64_t dev_segment_of(const dev *d, uint64_t offset)
{
	return offset >> d->segment_shift;
}

/* Fault injection (the "fault:" wrapper). Counting starts at 1 with the first IO of a matching kind
 * queued after dev_fault_set; the nth fails (once, or that one and every later one when sticky).
 * DEV_FAULT_POWERCUT is not a counted fault but a mode; see "Power cut" below. */
enum {
	DEV_FAULT_NONE = 0,
	DEV_FAULT_ERROR,        /* complete with err (-EIO, -ENOSPC ...) without touching the device */
	DEV_FAULT_SHORT_READ,   /* the read happens; the result is cut to half, rounded down to a sector */
	DEV_FAULT_TORN_WRITE,   /* only the first tear_sectors sectors are written; result says so */
	DEV_FAULT_POWERCUT,     /* writes stay in the wrapper's memory until a sync (below) */
};
typedef struct dev_fault_spec {
	int kind;               /* DEV_FAULT_* */
	uint64_t nth;           /* 1 = the next matching IO (POWERCUT ignores it) */
	int err;                /* for DEV_FAULT_ERROR: a negative errno */
	bool sticky;            /* fail every matching IO from the nth on */
	uint32_t ops;           /* bit mask of 1 << DEV_OP_*; 0 = reads and writes (POWERCUT ignores it) */
	uint32_t tear_sectors;  /* DEV_FAULT_TORN_WRITE: sectors that reach the device (0 = half) */
	bool cut_now;           /* DEV_FAULT_POWERCUT: forget the unsynced writes now, then go on buffering */
} dev_fault_spec;
/*
 * Power cut ("forget every write not yet synced"), for crash tests only. Armed (kind
 * DEV_FAULT_POWERCUT), a write does not reach the inner device: the wrapper copies its bytes into a
 * buffer of extents (a later write over an earlier one wins) and completes it at once. A read goes
 * to the inner device and the buffered bytes that overlap it are laid over the result before the
 * callback runs (a buffered write past the inner file's end lengthens the read, holes read as
 * zeros, as a file would). dev_sync writes every buffered extent to the inner device, then syncs
 * it, then drops them; a dev_flush request does the same for its own segment only, on the queue's
 * thread inside dev_flush. So a process killed with SIGKILL loses exactly the writes since their
 * segment's last flush or sync: the inner device and its page cache never saw them. cut_now
 * ("powercut-now") forgets the buffer on the spot, as the power going, and stays armed.
 * Arming another kind (or NONE) writes the buffer to the inner device without a sync (the power
 * stays on) and disarms; if that write fails, dev_fault_set returns its -errno and stays armed.
 * dev_close writes the buffer out the same way. dev_segment_remove drops what is buffered there.
 * Memory: the buffer holds every unsynced byte (a test device: sync, or the process grows).
 * While a sync runs every IO of the device waits for it (one lock): correctness over speed.
 */
/* Arm (or with kind NONE, disarm) the wrapper. -ENOTSUP when d is not a fault device; -errno of
 * the write-out when leaving POWERCUT fails. */
int dev_fault_set(dev *d, const dev_fault_spec *spec);
/* IOs the wrapper has failed, shortened or torn since it was opened (POWERCUT counts none). */
uint64_t dev_fault_hits(dev *d);
/* The power-cut mode's counters: a copy taken under its lock. */
typedef struct dev_fault_powercut_stats {
	uint64_t buffered_bytes;    /* unsynced bytes held now (bytes written twice count once) */
	uint64_t buffered_extents;  /* the extents holding them */
	uint64_t accepted_bytes;    /* bytes of writes taken into the buffer since the device opened */
	uint64_t synced_bytes;      /* buffered bytes written to the inner device (sync, flush, disarm,
	                               close) */
	uint64_t dropped_bytes;     /* unsynced bytes forgotten by a cut (dev_segment_remove not counted) */
	uint64_t cuts;              /* cut_now events */
	uint64_t syncs;             /* dev_sync calls and flush requests that wrote the buffer out */
} dev_fault_powercut_stats;
/* 0 with *out, or -ENOTSUP when d is not a fault device. */
int dev_fault_powercut_stats_get(dev *d, dev_fault_powercut_stats *out /* out */);
/*
 * Parse the text form of a spec: the one grammar of --device-fault, CONFIG SET device-fault and the
 * tests. Words separated by spaces, commas or tabs, without case; a later word overrides an earlier:
 *   kind:   error (the default), eio / enospc (error with that errno), short-read or short,
 *           torn-write or torn, powercut (the power-cut mode), powercut-now (powercut with
 *           cut_now: the power goes now), none or off (disarm)
 *   which:  read or reads (the default), write or writes, any (reads and writes),
 *           ops=read|write|flush (any joined with '|'; a flush is a dev_flush request or a
 *           dev_sync call, which an error fails without syncing anything)
 *   when:   N or nth=N (the Nth matching IO; default 1), once (the default) or sticky
 *   detail: err=EIO|ENOSPC|EROFS|EAGAIN|<errno number> (default EIO), tear=<sectors> (torn writes)
 * e.g. "read 1", "write 3 sticky enospc", "error nth=3 err=ENOSPC ops=write|flush", "torn-write
 * ops=write tear=2", "powercut", "powercut-now". No word at all ("") disarms. A short read fires on
 * reads and a torn write on writes only, so "torn" needs "write"; powercut takes no which or when
 * (they parse, and are ignored). 0, or -EINVAL with why (if not NULL) naming the word it refused;
 * *out is untouched then.
 */
int dev_fault_spec_parse(const char *text, dev_fault_spec *out /* out */, char *why, size_t whylen);

#endif
