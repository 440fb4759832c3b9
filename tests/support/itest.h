/*
 * itest.h - what the integration tests share: a small RESP client, server processes, external
 * programs.
 *
 * The client speaks raw bytes: requests go out as given (or encoded from argv as a RESP array) and
 * replies come back as the exact bytes the server wrote, one complete reply at a time, delimited by
 * proto's resp_reply_skip(). Tests compare those bytes; nothing is decoded behind their back.
 *
 * Servers run as child processes on loopback ports picked at run time (bind port 0, read it, close).
 * Another process may grab such a port before the server binds it, so the start helpers retry with a
 * fresh port when the child exits before it answers PING. Each server gets its own temporary folder
 * for data and for its stdout+stderr, which itest_server_log_dump() prints when a test fails.
 *
 * Every wait has a deadline (ITEST_TIMEOUT_MS, generous for sanitizer builds on a loaded machine), so
 * a hung server fails the test instead of hanging ctest. Functions return 0 or a count on success and
 * -errno on failure, like the rest of Spillway, except the checks and fixtures at the end
 * (itest_check.c), which fail the running cmocka test themselves so that a test reads as a list of
 * expectations.
 */
#ifndef SPW_ITEST_H
#define SPW_ITEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define ITEST_TIMEOUT_MS 30000

/* ITEST_ASAN is defined under AddressSanitizer (GCC's __SANITIZE_ADDRESS__, clang's __has_feature):
 * the suites that load many keys load fewer there, to stay near a minute on a loaded machine. */
#if defined(__SANITIZE_ADDRESS__)
#define ITEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ITEST_ASAN 1
#endif
#endif

/* A growable byte buffer for building pipelines and expected replies (aborts when memory is out:
 * a test cannot go on without it). Zero-initialise; free(b.p) when done. */
typedef struct itest_buf {
	char *p;
	size_t len, cap;
} itest_buf;

/* ---------------- client ---------------- */

typedef struct itest_conn {
	int fd;
	char *buf;         /* received bytes; [pos, len) not yet handed out as replies */
	size_t pos, len, cap;
	int timeout_ms;    /* per wait for more bytes */
} itest_conn;

/* Connect to 127.0.0.1:port (blocking socket, TCP_NODELAY). 0 or -errno. */
int itest_conn_open(itest_conn *c, int port);
void itest_conn_close(itest_conn *c);
/* Send all n bytes (MSG_NOSIGNAL: a closed peer is -EPIPE, not a signal). 0 or -errno. */
int itest_conn_send(itest_conn *c, const void *p, size_t n);
/* Encode argv as a RESP array of bulk strings and send it. lens NULL means strlen of each. */
int itest_conn_send_argv(itest_conn *c, int argc, const char *const *argv, const size_t *lens);
/* Same from a NULL-terminated list of C strings. */
int itest_conn_send_cmd(itest_conn *c, const char *arg0, ...) __attribute__((sentinel));
/*
 * Read exactly one complete reply. *reply points into c's buffer and stays valid until the next call
 * on c; *type (may be NULL) gets its first byte. Returns the reply's length, -ETIMEDOUT, -ECONNRESET
 * when the peer closed before a whole reply arrived, or -EPROTO when the bytes are not RESP.
 */
ssize_t itest_conn_read_reply(itest_conn *c, const char **reply, char *type);
/* Send a command and return a malloc'd, NUL-terminated copy of its reply (NULL on any failure). */
char *itest_conn_call(itest_conn *c, const char *arg0, ...) __attribute__((sentinel));
char *itest_conn_call_argv(itest_conn *c, int argc, const char *const *argv, const size_t *lens);
/* The same from a va_list of C strings ending with NULL (for wrappers such as itest_call). */
char *itest_conn_call_va(itest_conn *c, const char *arg0, va_list ap);
/*
 * Read the replies to a pipeline and compare each, in order, with the next of the expected replies
 * want[0..wlen) (back to back, delimited by the RESP grammar like the replies themselves). got
 * (may be NULL) gets every reply appended. Returns the count of replies, all matched, or -1 with
 * err (errlen bytes, may be 0) saying which reply differed, both escaped, or why none came.
 */
int itest_replies_check(itest_conn *c, const void *want, size_t wlen, itest_buf *got, char *err,
                        size_t errlen);
/*
 * Read until the peer closes: *out (malloc'd, NUL-terminated) gets every byte still unread, *len its
 * length. 0 when the peer closed (EOF or reset), -ETIMEDOUT when it kept the connection open (*out
 * then holds what arrived), other -errno on failure.
 */
int itest_conn_read_to_eof(itest_conn *c, char **out, size_t *len);
/*
 * Wait for the peer to close. 0: closed with no further bytes; 1: bytes arrived instead (they stay
 * buffered); -ETIMEDOUT.
 */
int itest_conn_wait_closed(itest_conn *c);

/* ---------------- servers ---------------- */

typedef struct itest_server {
	pid_t pid;             /* 0 when not running */
	int port;
	int status;            /* exit status once reaped: 0..255, or 128 + signal */
	char name[32];         /* "spillway-server" or "redis-server", for messages */
	char dir[256];         /* temporary folder: data and log */
	char log[300];         /* the child's stdout and stderr */
} itest_server;

/*
 * Start spillway-server from $SPW_BIN on a free port with --bind 127.0.0.1 --port P --dir D
 * --logdir D and the extra flags (NULL-terminated list, may be NULL), and wait until it answers PING.
 * Fails (never skips) when $SPW_BIN or the binary is missing, saying so on stderr.
 */
int itest_spillway_start(itest_server *s, const char *const *extra);
/* Start redis-server (--save '' --appendonly no --databases 1 plus extra) the same way. -ENOENT when
 * redis-server is not installed. */
int itest_redis_start(itest_server *s, const char *const *extra);
/*
 * The server under test: spillway-server, unless SPW_ITEST_TARGET=redis in the environment, which
 * runs the same test against redis-server to check the test's own expectations (spw_extra is then
 * ignored). true when the target is redis-server.
 */
int itest_target_start(itest_server *s, const char *const *spw_extra);
bool itest_target_is_redis(void);
/* SIGTERM, then wait for the exit. Returns the exit status (0..255, 128 + signal), or -ETIMEDOUT after
 * a SIGKILL. Removes the temporary folder when the exit status is 0; keeps it (and says where)
 * otherwise. Safe to call on a server that already exited (reaped by itest_server_wait). */
int itest_server_stop(itest_server *s);
/* Wait up to timeout_ms for the server to exit by itself (after SHUTDOWN). Exit status or -ETIMEDOUT. */
int itest_server_wait(itest_server *s, int timeout_ms);
/* Print the server's log to stderr (on failures). */
void itest_server_log_dump(const itest_server *s);

/* The path of spillway-server ($SPW_BIN/spillway-server) in buf; -ENOENT (after a message on stderr)
 * when SPW_BIN is unset or the file is not executable. */
int itest_spillway_path(char *buf, size_t cap);
/* A loopback port that was free a moment ago (bind port 0, read it, close). Port or -errno. */
int itest_port_pick(void);

/* ---------------- external programs ---------------- */

/* Find an executable in $PATH (or a path with a '/'). malloc'd path, or NULL when absent. */
char *itest_prog_find(const char *name);
/* true when name is in $PATH; otherwise say "SKIP: name is not installed (Debian package
 * package)" on stderr, for a test program that then exits 77. */
bool itest_prog_present(const char *name, const char *package);
/*
 * Run argv[0] (searched in $PATH) with in[0..inlen) as its stdin (then closed), capturing stdout and
 * stderr together into a malloc'd NUL-terminated *out (may be NULL to discard). The child is killed
 * after timeout_ms. Returns its exit status (0..255, 128 + signal), -ETIMEDOUT, or -errno.
 */
int itest_prog_run(const char *const *argv, const void *in, size_t inlen, char **out, size_t *outlen,
                   int timeout_ms);

/* ---------------- helpers ---------------- */

/* A fresh folder under $TMPDIR (or /tmp) named prefix-XXXXXX, its path in buf. 0 or -errno. */
int itest_tmpdir_make(char *buf, size_t cap, const char *prefix);
/* Remove a folder and everything in it (no-op for ""). */
void itest_tmpdir_remove(const char *dir);

/* Escape bytes for a message: \r \n \t \\ \" and \xHH; at most max input bytes, then "...(N more)".
 * malloc'd. */
char *itest_escape(const void *p, size_t n, size_t max);
/* Append bytes, or printf-formatted text (at most 255 bytes), to an itest_buf (top of this file). */
void itest_buf_add(itest_buf *b, const void *p, size_t n);
void itest_buf_fmt(itest_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A RESP bulk string: $n CRLF bytes CRLF. */
void itest_buf_bulk(itest_buf *b, const void *p, size_t n);
/* Sleep ms milliseconds. */
void itest_sleep_ms(int ms);
/* Monotonic milliseconds. */
long long itest_now_ms(void);

/* ---------------- checks: these fail the running cmocka test ---------------- */

/* Each check is a macro over an itest_*_at function that takes the caller's file and line, so that a
 * failure names the test's line, not this library's. */

/* Compare bytes; on a mismatch print both, escaped, under what, and fail the test. */
#define itest_bytes_expect(what, got, glen, want, wlen) \
	itest_bytes_expect_at(__FILE__, __LINE__, what, got, glen, want, wlen)
/* Send a command (NULL-terminated arguments) and return its reply, malloc'd and NUL-terminated;
 * fail the test when no whole reply comes. The caller frees it. */
#define itest_call(c, ...) itest_call_at(__FILE__, __LINE__, c, __VA_ARGS__)
/* Send a command and fail the test unless its reply is exactly want. */
#define itest_expect(c, want, ...) itest_expect_at(__FILE__, __LINE__, c, want, __VA_ARGS__)
/* The same with want the bulk string of value: $len CRLF value CRLF. */
#define itest_expect_bulk(c, value, ...) itest_expect_bulk_at(__FILE__, __LINE__, c, value, __VA_ARGS__)
/* The integer after "name:" at the start of a line of INFO section, or -1 when INFO has no such
 * field. Fails the test when INFO gets no reply. */
#define itest_info_field(c, section, name) itest_info_field_at(__FILE__, __LINE__, c, section, name)
/* A counter of INFO stats; fails the test when INFO has no such field (a renamed counter must not
 * turn a check into a comparison with -1). */
#define itest_info_stat(c, name) itest_info_stat_at(__FILE__, __LINE__, c, name)
/* itest_replies_check, failing the test with its message; srv (may be NULL) is the server whose log
 * is printed then. */
#define itest_replies_expect(c, srv, want, wlen, got) \
	itest_replies_expect_at(__FILE__, __LINE__, c, srv, want, wlen, got)
/*
 * The proof that a path ran: INFO stats counter name must have grown by at least at_least since
 * before (read with itest_info_stat); otherwise fail, naming the counter, both values and what was
 * expected to make it grow. Returns the counter's value now.
 */
#define itest_stat_grew(c, name, before, at_least, what) \
	itest_stat_grew_at(__FILE__, __LINE__, c, name, before, at_least, what)

void itest_bytes_expect_at(const char *file, int line, const char *what, const void *got, size_t glen,
                           const void *want, size_t wlen);
char *itest_call_at(const char *file, int line, itest_conn *c, const char *arg0, ...)
	__attribute__((sentinel));
void itest_expect_at(const char *file, int line, itest_conn *c, const char *want, const char *arg0, ...)
	__attribute__((sentinel));
void itest_expect_bulk_at(const char *file, int line, itest_conn *c, const char *value,
                          const char *arg0, ...) __attribute__((sentinel));
void itest_replies_expect_at(const char *file, int line, itest_conn *c, const itest_server *srv,
                             const void *want, size_t wlen, itest_buf *got);
long long itest_info_field_at(const char *file, int line, itest_conn *c, const char *section,
                              const char *name);
long long itest_info_stat_at(const char *file, int line, itest_conn *c, const char *name);
/* The integer after "name:" at the start of a line of an INFO reply already read, or -1 (several
 * fields of one INFO, when they must come from the same moment). */
long long itest_info_value(const char *reply, const char *name);
long long itest_stat_grew_at(const char *file, int line, itest_conn *c, const char *name,
                             long long before, long long at_least, const char *what);

/* ---------------- a data folder kept across a test's server restarts ---------------- */

/* The folder (itest_tmpdir_make, named after the test program), made by the setup and removed by
 * the teardown of each test that uses the pair. */
extern char itest_data_dir[256];
int itest_data_dir_setup(void **state);
int itest_data_dir_teardown(void **state);

/* ---------------- fixtures: one server for a cmocka group ---------------- */

typedef enum itest_kind {
	ITEST_SPILLWAY,   /* spillway-server with the flags */
	ITEST_TARGET,     /* the server under test (itest_target_start: flags for spillway-server) */
	ITEST_REDIS,      /* redis-server with the flags (redis-server's own) */
} itest_kind;

/*
 * A group setup's server: start it; on failure say so on stderr as "who: cannot start ..." and
 * return -1, a cmocka setup's failure.
 */
int itest_fixture_start(itest_server *s, itest_kind kind, const char *const *flags, const char *who);
/* Start spillway-server on the data folder dir (--dir and --logdir after the helper's own, so that
 * a restart finds the files the last process left) with the NULL-terminated flags base, then
 * extra (either may be NULL); fails the running test when it does not start. */
void itest_spillway_start_on(itest_server *s, const char *dir, const char *const *base,
                             const char *const *extra);
/*
 * A group teardown's server: stop it. 0 when it exits with status 0, or was never started or is
 * stopped already; otherwise print its exit status and its log and return -1.
 */
int itest_fixture_stop(itest_server *s, const char *who);

/* A reply that is a flat array of bulk strings (HKEYS, ZRANGE ...), parsed into copies: parse from p
 * (returns the position after it), or call a command and parse its reply (fails the test when the
 * reply is not an array); find v from index from by step (-1 when absent); free the copies. */
#define ITEST_STRS_MAX 1024
typedef struct itest_strs {
	int n;
	char *v[ITEST_STRS_MAX];
	size_t len[ITEST_STRS_MAX];
} itest_strs;
const char *itest_strs_parse(const char *p, itest_strs *out);
void itest_strs_call(itest_conn *c, itest_strs *out, const char *arg0, ...) __attribute__((sentinel));
int itest_strs_find(const itest_strs *s, const char *v, int from, int step);
void itest_strs_free(itest_strs *s);

#endif
