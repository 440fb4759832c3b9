/*
 * conn.h - a client's connection as a small table of functions, so that another transport (TLS)
 * can sit beside plain TCP without the client code changing (Redis's ConnectionType, SQLite's
 * sqlite3_io_methods). Private to server/.
 *
 * A connection is a conn: its ops and the socket the worker's epoll set watches. The client code
 * calls the one-line wrappers below (conn_read, conn_writev, ...), never the table. Every call is
 * non-blocking and returns at once; the wrappers cost one indirect call per system call.
 * conn_tcp.c is the one implementation today (conn_tcp_init).
 */
#ifndef SPW_SERVER_CONN_H
#define SPW_SERVER_CONN_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct conn conn;

typedef struct conn_ops {
	const char *name;             /* "tcp" */
	/* Read up to len bytes: the count (> 0), 0 at the end of input, or -errno (-EAGAIN when
	 * nothing is there now). */
	ssize_t (*read)(conn *cn, void *buf, size_t len);
	/* Write the iovecs as far as the socket takes them: the bytes written, or -errno. */
	ssize_t (*writev)(conn *cn, const struct iovec *iov, int iovcnt);
	/* Close the connection (also removes its socket from epoll: the fd is never dup'ed). */
	void (*close)(conn *cn);
	/* Options of a newly accepted connection: no Nagle delay; keepalive seconds (0 = off). */
	void (*setup)(conn *cn, int keepalive);
	/* Our end's address as "ip:port" into buf; buf is left as is when it cannot be told. */
	void (*local_addr)(const conn *cn, char *buf, size_t cap);
} conn_ops;

struct conn {
	const conn_ops *ops;
	int fd;                       /* the socket in the worker's epoll set */
};

static inline ssize_t conn_read(conn *cn, void *buf, size_t len) { return cn->ops->read(cn, buf, len); }
static inline ssize_t conn_writev(conn *cn, const struct iovec *iov, int iovcnt)
{
	return cn->ops->writev(cn, iov, iovcnt);
}
static inline void conn_close(conn *cn) { cn->ops->close(cn); }
static inline void conn_setup(conn *cn, int keepalive) { cn->ops->setup(cn, keepalive); }
static inline void conn_local_addr(const conn *cn, char *buf, size_t cap) { cn->ops->local_addr(cn, buf, cap); }

/* Plain TCP (conn_tcp.c): cn becomes the connection of the accepted, non-blocking socket fd. */
void conn_tcp_init(conn *cn, int fd);
/* Format a socket address as Redis does ("ip:port", "[ip6]:port"). */
void conn_tcp_addr_format(const struct sockaddr_storage *sa, char *buf, size_t cap);

#endif
