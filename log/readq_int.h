/*
 * readq_int.h - readq.c's IO objects, buffer pool and queue, private to log/. See readq.c's notes.
 */
#ifndef SPW_LOG_READQ_INT_H
#define SPW_LOG_READQ_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "device/device.h"
#include "log/hlog_int.h"

#define READQ_WAIT_NS 10000000LL   /* one wait on the device queue where a thread must block */

/* A read part's bytes are in: res bytes (<= len) or -errno. Set by the part's owner (pending.c);
 * readq.c calls it once per part, after the part's followers got their copy. */
typedef void (*readq_part_fn)(hlog_session *s, readq_io *io, int64_t res);

struct readq_io {
	dev_req req;                 /* first member: the completion finds its io from the request */
	struct iovec iov;
	readq_io *next;              /* free list, backlog */
	hlog_session *s;
	pend_fetch *f;               /* a read's fetch; NULL for a page write */
	readq_part_fn part_done;     /* a read part's owner's completion */
	uint64_t page;               /* a page write's page */
	uint64_t len;                /* bytes asked */
	uint64_t rel;                /* a read part's offset from f->base */
	bool write;
	bool accepted;               /* the device took it (hlog_session io_accepted / io_completed) */
	/* Scatter-gather (readq.c note 1). A record read is a part (f set); a merged read has no fetch
	 * and lists its parts in members. */
	bool hashed;                 /* a part on rd_hash (queued or in flight, may take followers) */
	readq_io *hnext;             /* rd_hash chain */
	readq_io *followers;         /* parts sharing this part's bytes, linked by fnext */
	readq_io *fnext;
	readq_io *members;           /* a merged read: its parts in offset order, linked by mnext */
	readq_io *mnext;
	uint8_t *gbuf;               /* a merged read's own buffer, gcap bytes (not vectored) */
	uint64_t gcap;               /* bytes of gbuf, or of the pooled buffer iovs lives in */
	struct iovec *iovs;          /* a vectored merged read: niov buffers (members' and gap) */
	int niov;
};

/* IO objects from the session's free list (zeroed, io->s set); NULL when memory is short. */
readq_io *readq_io_get(hlog_session *s);
void readq_io_put(hlog_session *s, readq_io *io);
/* Hand io to the device (io->req.done set by the caller); behind a backlog or refused with -EAGAIN
 * it waits in the backlog; another refusal completes it at once through io->req.done. */
void readq_io_queue(hlog_session *s, readq_io *io);
/* A completion of io the device had accepted (its callback calls it first): counted once. */
void readq_io_completed(hlog_session *s, readq_io *io);
/* Pooled aligned buffers (readq.c). */
uint8_t *readq_buf_get(hlog_session *s, uint64_t want, uint64_t *cap /* out */);
void readq_buf_put(hlog_session *s, uint8_t *b, uint64_t cap);
/* A read part (io->part_done, f, len, rel, req.offset and iov set): shared, staged or issued. */
void readq_stage(hlog_session *s, readq_io *io);
/* Hand what the session staged and queued to the kernel. */
void readq_submit(hlog_session *s);
/* Submit, reap, submit what the callbacks queued, a bounded number of rounds. Completions reaped. */
int readq_pump(hlog_session *s);
/* Open the session's device queue (and the read-sharing table). 0 or -errno. */
int readq_attach(hlog_session *s);
/* Close the session's device queue: staged reads and the backlog go out first, in-flight requests
 * complete (their callbacks run). */
void readq_queue_close(hlog_session *s);
/* Free the IO objects, the buffer pool and the staging space (after every fetch buffer came back). */
void readq_session_free(hlog_session *s);

#endif
