/*
 * conn_tcp.c - plain TCP connections (conn.h): the system calls themselves, errno turned into
 * -errno.
 */
#include "server/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <unistd.h>

static ssize_t tcp_read(conn *cn, void *buf, size_t len)
{
	ssize_t n = read(cn->fd, buf, len);
	return n < 0 ? -errno : n;
}

static ssize_t tcp_writev(conn *cn, const struct iovec *iov, int iovcnt)
{
	ssize_t n = writev(cn->fd, iov, iovcnt);
	return n < 0 ? -errno : n;
}

static void tcp_close(conn *cn)
{
	close(cn->fd);
	cn->fd = -1;
}

static void tcp_setup(conn *cn, int keepalive)
{
	int one = 1, fd = cn->fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (keepalive > 0) {
		int intvl = keepalive / 3 > 1 ? keepalive / 3 : 1, cnt = 3;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &keepalive, sizeof(keepalive));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
}

void conn_tcp_addr_format(const struct sockaddr_storage *sa, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%d", ip, ntohs(s6->sin6_port));
	} else if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%d", ip, ntohs(s4->sin_port));
	} else {
		snprintf(buf, cap, "?:0");
	}
}

static void tcp_local_addr(const conn *cn, char *buf, size_t cap)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	if (getsockname(cn->fd, (struct sockaddr *)&local, &llen) == 0)
		conn_tcp_addr_format(&local, buf, cap);
}

static const conn_ops tcp_ops = {
	.name = "tcp",
	.read = tcp_read,
	.writev = tcp_writev,
	.close = tcp_close,
	.setup = tcp_setup,
	.local_addr = tcp_local_addr,
};

void conn_tcp_init(conn *cn, int fd)
{
	cn->ops = &tcp_ops;
	cn->fd = fd;
}
