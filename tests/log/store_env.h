/*
 * store_env.h - the environment of the log tests that run over a device (tier_suite.h, sg_suite.h):
 * a fresh directory under /tmp, a device of the suite's --device-type in it, a store over that
 * device, and a session wired to a ready callback. The device's configuration is written here
 * once, for every suite. Include after cmocka.h.
 */
#ifndef SPW_TEST_STORE_ENV_H
#define SPW_TEST_STORE_ENV_H

#include <ftw.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "log_test.h"

typedef struct store_env {
	char dir[64];
	dev *d;
	hlog *l;
} store_env;

static inline int store_env_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* A device of type in dir: 1 MiB segments, another backend where the kernel refuses this one
 * (uring), throttle 0 = the device's default. dev_open's result, and its message in err. */
static inline int store_env_dev_open(const char *type, const char *dir, uint32_t throttle, dev **d, char *err,
                              size_t errlen)
{
	dev_config dc;
	dev_config_init(&dc);
	dc.type = type;
	dc.dir = dir;
	dc.prefix = "hlog.";
	dc.segment_bytes = 1u << 20;
	dc.allow_fallback = true;
	if (throttle)
		dc.throttle_limit = throttle;
	return dev_open(&dc, d, err, errlen);
}

/* Open a device in a fresh directory made from tmpl ("/tmp/name.XXXXXX") and a store of c over it
 * (c->dev is set here, and small first reads, so that longer values need a second one). */
static inline void store_env_open(store_env *e, const char *type, const char *tmpl, uint32_t throttle, hlog_config *c)
{
	char err[256] = "";
	memset(e, 0, sizeof(*e));
	snprintf(e->dir, sizeof(e->dir), "%s", tmpl);
	assert_non_null(mkdtemp(e->dir));
	int rc = store_env_dev_open(type, e->dir, throttle, &e->d, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "dev_open(%s): %s: %s\n", type, spw_strerror(rc), err);
	assert_int_equal(rc, 0);
	c->dev = e->d;
	c->initial_io_bytes = 128;
	assert_int_equal(hlog_open(&e->l, c), 0);
}

/* Close what store_env_open opened, also when a failed assertion stopped it halfway. */
static inline void store_env_close(store_env *e)
{
	hlog_close(e->l);
	if (e->d)
		dev_close(e->d);
	if (e->dir[0])
		nftw(e->dir, store_env_rm, 16, FTW_DEPTH | FTW_PHYS);
	memset(e, 0, sizeof(*e));
}

/* Whether type opens on this machine (uring may have fallen back), said on stderr: the suite's
 * main exits 77 (SKIP) when not. */
static inline bool store_env_backend_available(const char *suite, const char *type, const char *tmpl)
{
	char dir[64], err[256] = "";
	dev *d;
	snprintf(dir, sizeof(dir), "%s", tmpl);
	if (!mkdtemp(dir))
		return false;
	int rc = store_env_dev_open(type, dir, 0, &d, err, sizeof(err));
	if (rc == 0) {
		fprintf(stderr, "%s: --device-type %s opened as %s (sector %u bytes)\n", suite, type, d->name,
		        d->sector_bytes);
		dev_close(d);
	} else {
		fprintf(stderr, "%s: --device-type %s refused: %s: %s\n", suite, type, spw_strerror(rc), err);
	}
	nftw(dir, store_env_rm, 16, FTW_DEPTH | FTW_PHYS);
	return rc == 0;
}

/* A session of l attached to ready(cb_arg, op_ctx), its clock at now_ms; its fd in *fd. */
static inline hlog_session *store_session_open(hlog *l, hlog_ready_fn ready, void *cb_arg, int64_t now_ms, int *fd)
{
	hlog_session *s;
	assert_int_equal(hlog_session_open(l, &s), 0);
	assert_int_equal(hlog_session_attach(s, ready, cb_arg), 0);
	*fd = hlog_session_fd(s);
	assert_true(*fd >= 0);
	hlog_session_set_now(s, now_ms);
	return s;
}

/* Sleep as a worker does, on the session's fd for at most ms, and take its signal. poll's result. */
static inline int store_fd_wait(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int n = poll(&pfd, 1, ms);
	if (n > 0) {
		uint64_t v;
		ssize_t r = read(fd, &v, sizeof(v));
		(void)r;
	}
	return n;
}

/* One wait of an operation that answered HLOG_PENDING: poll the session, sleep on its fd while a
 * read is in flight, poll again (the read's completion runs the ready callback). */
static inline void store_pending_step(hlog_session *s, int fd)
{
	hlog_session_poll(s);
	if (hlog_session_inflight(s))
		store_fd_wait(fd, 5);
	hlog_session_poll(s);
}

#endif
