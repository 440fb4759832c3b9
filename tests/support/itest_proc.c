/*
 * itest_proc.c - child processes for the integration tests: servers and external programs.
 *
 * Notes:
 *  1. A server child gets PR_SET_PDEATHSIG(SIGKILL): if the test process dies (a crash, ctest's
 *     timeout) its servers die with it instead of holding ports and CPU on a shared machine.
 *  2. Ports are picked by binding port 0 and closing; the server binds the port a moment later. Any
 *     other process can take it in between, so the start helpers try up to ITEST_START_TRIES ports
 *     when the child exits before answering PING. A child that keeps running but never answers is a
 *     failure, not a retry.
 *  3. "Ready" means a fresh connection gets +PONG to PING, the same check redis-cli users make.
 *  4. A server's temporary folder (its --dir and --logdir, and its stdout+stderr in server.log) is
 *     removed after a clean exit and kept otherwise, so a failure can be investigated.
 */
#include "itest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ITEST_START_TRIES 4
#define ITEST_MAX_ARGV 64

static int status_decode(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}

int itest_port_pick(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	close(fd);
	return ntohs(sa.sin_port);
}

char *itest_prog_find(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
	char buf[PATH_MAX];
	while (*path) {
		const char *end = strchr(path, ':');
		size_t dl = end ? (size_t)(end - path) : strlen(path);
		if (dl > 0 && (size_t)snprintf(buf, sizeof(buf), "%.*s/%s", (int)dl, path, name) < sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return strdup(buf);
		path += dl;
		if (*path == ':')
			path++;
	}
	return NULL;
}

bool itest_prog_present(const char *name, const char *package)
{
	char *path = itest_prog_find(name);
	if (!path) {
		fprintf(stderr, "SKIP: %s is not installed (Debian package %s)\n", name, package);
		return false;
	}
	free(path);
	return true;
}

int itest_spillway_path(char *buf, size_t cap)
{
	const char *bin = getenv("SPW_BIN");
	if (!bin || !*bin) {
		fprintf(stderr, "itest: SPW_BIN is not set (ctest sets it to <build>/bin)\n");
		return -ENOENT;
	}
	if ((size_t)snprintf(buf, cap, "%s/spillway-server", bin) >= cap)
		return -ENAMETOOLONG;
	if (access(buf, X_OK) != 0) {
		fprintf(stderr, "itest: %s is missing or not executable: build the spillway-server target\n", buf);
		return -ENOENT;
	}
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

void itest_tmpdir_remove(const char *dir)
{
	if (dir[0])
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char itest_data_dir[256];

int itest_data_dir_setup(void **state)
{
	(void)state;
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "spw-%s", program_invocation_short_name);
	return itest_tmpdir_make(itest_data_dir, sizeof(itest_data_dir), prefix) < 0 ? -1 : 0;
}

int itest_data_dir_teardown(void **state)
{
	(void)state;
	itest_tmpdir_remove(itest_data_dir);
	itest_data_dir[0] = '\0';
	return 0;
}

int itest_tmpdir_make(char *buf, size_t cap, const char *prefix)
{
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = "/tmp";
	if ((size_t)snprintf(buf, cap, "%s/%s-XXXXXX", tmp, prefix) >= cap) {
		buf[0] = '\0';
		return -ENAMETOOLONG;
	}
	if (!mkdtemp(buf)) {
		int err = -errno;
		buf[0] = '\0';
		return err;
	}
	return 0;
}

/* A fresh temporary folder for a server: its data and its log. */
static int server_dir_make(itest_server *s)
{
	int err = itest_tmpdir_make(s->dir, sizeof(s->dir), "spw-itest");
	if (err)
		return err;
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	return 0;
}

/* fork/exec argv with stdout+stderr appended to s->log and stdin from /dev/null. */
static int server_spawn(itest_server *s, const char *const *argv)
{
	int logfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -errno;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(logfd);
		return err;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		int nullfd = open("/dev/null", O_RDONLY);
		if (nullfd >= 0)
			dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		signal(SIGPIPE, SIG_DFL);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "itest: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(logfd);
	s->pid = pid;
	s->status = -1;
	return 0;
}

/* Wait until the server answers PING on a fresh connection. 0, -ECHILD when it exited (status in
 * s->status), or -ETIMEDOUT. */
static int server_wait_ready(itest_server *s)
{
	long long deadline = itest_now_ms() + ITEST_TIMEOUT_MS;
	while (itest_now_ms() < deadline) {
		int st;
		pid_t r = waitpid(s->pid, &st, WNOHANG);
		if (r == s->pid) {
			s->pid = 0;
			s->status = status_decode(st);
			return -ECHILD;
		}
		itest_conn c;
		if (itest_conn_open(&c, s->port) == 0) {
			const char *rep;
			c.timeout_ms = 2000;
			if (itest_conn_send(&c, "PING\r\n", 6) == 0) {
				ssize_t n = itest_conn_read_reply(&c, &rep, NULL);
				if (n == 7 && memcmp(rep, "+PONG\r\n", 7) == 0) {
					itest_conn_close(&c);
					return 0;
				}
			}
			itest_conn_close(&c);
		}
		itest_sleep_ms(20);
	}
	return -ETIMEDOUT;
}

/* Start argv (with "%PORT%" replaced by a fresh port each try) and wait for PING. s->name and
 * s->dir are set by the caller; the folder is removed here when no server is left running. */
static int server_start(itest_server *s, const char *const *argv_tmpl)
{
	const char *argv[ITEST_MAX_ARGV + 1];
	char portbuf[16];
	int err = -ECHILD;

	for (int attempt = 0; attempt < ITEST_START_TRIES; attempt++) {
		int port = itest_port_pick();
		if (port < 0) {
			err = port;
			goto fail;
		}
		snprintf(portbuf, sizeof(portbuf), "%d", port);
		int argc = 0;
		for (; argv_tmpl[argc] && argc < ITEST_MAX_ARGV; argc++)
			argv[argc] = strcmp(argv_tmpl[argc], "%PORT%") == 0 ? portbuf : argv_tmpl[argc];
		argv[argc] = NULL;
		s->port = port;
		err = server_spawn(s, argv);
		if (err)
			goto fail;
		err = server_wait_ready(s);
		if (err == 0)
			return 0;
		if (err != -ECHILD) {
			fprintf(stderr, "itest: %s on port %d did not answer PING within %d ms\n", s->name, port,
			        ITEST_TIMEOUT_MS);
			itest_server_log_dump(s);
			kill(s->pid, SIGKILL);
			itest_server_wait(s, ITEST_TIMEOUT_MS);
			goto fail;
		}
		/* Exited early: maybe another process took the port first (note 2). Try another one. */
		fprintf(stderr, "itest: %s exited with status %d before answering PING (port %d, try %d)\n",
		        s->name, s->status, port, attempt + 1);
	}
	itest_server_log_dump(s);
fail:
	itest_tmpdir_remove(s->dir);
	s->dir[0] = '\0';
	s->log[0] = '\0';
	return err;
}

/*
 * Start exe as s->name: argv is exe, then fixed (NULL-terminated; "%DIR%" stands for the server's
 * temporary folder, "%PORT%" for its port), then extra (may be NULL).
 */
static int server_exec(itest_server *s, const char *name, const char *exe, const char *const *fixed,
                       const char *const *extra)
{
	const char *argv[ITEST_MAX_ARGV + 1];
	int argc = 0;

	memset(s, 0, sizeof(*s));
	s->status = -1;
	snprintf(s->name, sizeof(s->name), "%s", name);
	int err = server_dir_make(s);
	if (err)
		return err;
	argv[argc++] = exe;
	for (int i = 0; fixed[i] && argc < ITEST_MAX_ARGV; i++)
		argv[argc++] = strcmp(fixed[i], "%DIR%") == 0 ? s->dir : fixed[i];
	for (int i = 0; extra && extra[i] && argc < ITEST_MAX_ARGV; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	return server_start(s, argv);
}

int itest_spillway_start(itest_server *s, const char *const *extra)
{
	static const char *const fixed[] = {
		"--bind", "127.0.0.1", "--port", "%PORT%", "--dir", "%DIR%", "--logdir", "%DIR%", NULL,
	};
	char exe[PATH_MAX];

	memset(s, 0, sizeof(*s));
	int err = itest_spillway_path(exe, sizeof(exe));
	if (err)
		return err;
	return server_exec(s, "spillway-server", exe, fixed, extra);
}

int itest_redis_start(itest_server *s, const char *const *extra)
{
	static const char *const fixed[] = {
		"--port", "%PORT%", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--databases", "1", "--daemonize", "no", "--logfile", "", "--dir", "%DIR%", NULL,
	};

	memset(s, 0, sizeof(*s));
	char *exe = itest_prog_find("redis-server");
	if (!exe)
		return -ENOENT;
	int err = server_exec(s, "redis-server", exe, fixed, extra);
	free(exe);
	return err;
}

bool itest_target_is_redis(void)
{
	const char *t = getenv("SPW_ITEST_TARGET");
	return t && strcmp(t, "redis") == 0;
}

int itest_target_start(itest_server *s, const char *const *spw_extra)
{
	if (itest_target_is_redis())
		return itest_redis_start(s, NULL);
	return itest_spillway_start(s, spw_extra);
}

int itest_server_wait(itest_server *s, int timeout_ms)
{
	if (s->pid == 0)
		return s->status;
	long long deadline = itest_now_ms() + timeout_ms;
	for (;;) {
		int st;
		pid_t r = waitpid(s->pid, &st, WNOHANG);
		if (r == s->pid) {
			s->pid = 0;
			s->status = status_decode(st);
			return s->status;
		}
		if (r < 0 && errno != EINTR)
			return -errno;
		if (itest_now_ms() >= deadline)
			return -ETIMEDOUT;
		itest_sleep_ms(10);
	}
}

int itest_server_stop(itest_server *s)
{
	int rc;
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		rc = itest_server_wait(s, ITEST_TIMEOUT_MS);
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "itest: %s (pid %d) ignored SIGTERM for %d ms: killing it\n", s->name,
			        (int)s->pid, ITEST_TIMEOUT_MS);
			kill(s->pid, SIGKILL);
			itest_server_wait(s, ITEST_TIMEOUT_MS);
			rc = -ETIMEDOUT;
		}
	} else {
		rc = s->status;
	}
	if (rc == 0) {
		itest_tmpdir_remove(s->dir);
		s->dir[0] = '\0';
	} else if (s->dir[0]) {
		fprintf(stderr, "itest: %s exited with status %d; its files are kept in %s\n", s->name, rc,
		        s->dir);
	}
	return rc;
}

void itest_server_log_dump(const itest_server *s)
{
	if (!s->log[0])
		return;
	FILE *fp = fopen(s->log, "r");
	if (!fp)
		return;
	/* Only the last 8 KB: a crash report is at the end. */
	fseek(fp, 0, SEEK_END);
	long size = ftell(fp);
	if (size > 8192)
		fseek(fp, size - 8192, SEEK_SET);
	else
		fseek(fp, 0, SEEK_SET);
	fprintf(stderr, "---- %s log (%s) ----\n", s->name, s->log);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
		fwrite(buf, 1, n, stderr);
	fprintf(stderr, "---- end of %s log ----\n", s->name);
	fclose(fp);
}

/* A program run by itest_prog_run: its pid, the write end of its stdin and the read end of its
 * stdout+stderr (-1 once closed), and what it printed so far. */
typedef struct prog {
	pid_t pid;
	int in, out;
	char *buf;
	size_t len, cap;
} prog;

/* Start argv[0] (searched in $PATH) on two fresh pipes, dying with the test (note 1). 0 or -errno. */
static int prog_spawn(prog *p, const char *const *argv)
{
	int inp[2] = { -1, -1 }, outp[2] = { -1, -1 };
	if (pipe2(inp, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0)
		goto fail;
	pid_t parent = getpid();
	p->pid = fork();
	if (p->pid < 0)
		goto fail;
	if (p->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(inp[0], 0);
		dup2(outp[1], 1);
		dup2(outp[1], 2);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "itest: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(inp[0]);
	close(outp[1]);
	p->in = inp[1];
	p->out = outp[0];
	fcntl(p->in, F_SETFL, O_NONBLOCK);
	return 0;
fail:;
	int err = -errno;
	for (int i = 0; i < 2; i++) {
		if (inp[i] >= 0)
			close(inp[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	return err;
}

/* Read what the program printed into p->buf (room kept for a NUL). 0, or 1 at EOF. */
static int prog_read(prog *p)
{
	if (p->cap - p->len < 65536) {
		size_t ncap = p->cap ? p->cap * 2 : 65536 * 2;
		char *nb = realloc(p->buf, ncap);
		if (!nb)
			return -ENOMEM;
		p->buf = nb;
		p->cap = ncap;
	}
	ssize_t r = read(p->out, p->buf + p->len, p->cap - p->len - 1);
	if (r > 0)
		p->len += (size_t)r;
	else if (r == 0 || (errno != EINTR && errno != EAGAIN))
		return 1;
	return 0;
}

/* Feed in[0..inlen) to the program's stdin and read its output until it closes stdout, or
 * deadline. 0, -ETIMEDOUT or -errno. */
static int prog_pump(prog *p, const char *in, size_t inlen, long long deadline)
{
	size_t off = 0;
	if (inlen == 0) {
		close(p->in);
		p->in = -1;
	}
	for (;;) {
		struct pollfd pfd[2];
		nfds_t n = 0;
		pfd[n++] = (struct pollfd){ p->out, POLLIN, 0 };
		if (p->in >= 0)
			pfd[n++] = (struct pollfd){ p->in, POLLOUT, 0 };
		long long left = deadline - itest_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(pfd, n, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (pfd[0].revents) {
			int rc = prog_read(p);
			if (rc < 0)
				return rc;
			if (rc == 1)
				return 0;
		}
		if (n > 1 && pfd[1].revents) {
			ssize_t w = write(p->in, in + off, inlen - off);
			if (w > 0)
				off += (size_t)w;
			if ((w < 0 && errno != EAGAIN && errno != EINTR) || off == inlen) {
				close(p->in);   /* done, or the program closed its stdin (EPIPE) */
				p->in = -1;
			}
		}
	}
}

/* Wait for the program to exit, until deadline. Its exit status, or -ETIMEDOUT. */
static int prog_reap(prog *p, long long deadline)
{
	for (;;) {
		int st;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			p->pid = -1;
			return status_decode(st);
		}
		if (itest_now_ms() >= deadline)
			return -ETIMEDOUT;
		itest_sleep_ms(5);
	}
}

int itest_prog_run(const char *const *argv, const void *in, size_t inlen, char **out, size_t *outlen,
                   int timeout_ms)
{
	prog p = { .pid = -1, .in = -1, .out = -1 };
	long long deadline = itest_now_ms() + timeout_ms;

	if (out)
		*out = NULL;
	if (outlen)
		*outlen = 0;
	signal(SIGPIPE, SIG_IGN);   /* a child that closes its stdin early gives EPIPE, not a signal */
	int rc = prog_spawn(&p, argv);
	if (rc == 0)
		rc = prog_pump(&p, in, inlen, deadline);
	if (rc == 0)
		rc = prog_reap(&p, deadline);
	if (rc >= 0) {
		if (!p.buf)
			p.buf = calloc(1, 1);
		else
			p.buf[p.len] = '\0';
		if (outlen)
			*outlen = p.len;
		if (out) {
			*out = p.buf;
			p.buf = NULL;
		}
	}
	if (p.pid > 0) {   /* timed out or failed: it must not outlive the test's wait */
		kill(p.pid, SIGKILL);
		waitpid(p.pid, NULL, 0);
	}
	if (p.in >= 0)
		close(p.in);
	if (p.out >= 0)
		close(p.out);
	free(p.buf);
	return rc;
}
