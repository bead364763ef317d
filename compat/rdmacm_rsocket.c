/*
 * rdmacm_rsocket.c — librdmacm drop-in: the rsockets calls, each failing with ENOSYS.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"

/* ---------------------------------------------------------------------------------------
 * rsockets: not provided. The rdmacm-utils socket tools (rstream, riostream, rcopy,
 * udpong) link these; each call fails with ENOSYS, as a build without rsockets would.
 */

SVC_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain; (void)type; (void)protocol;
	return fail(ENOSYS);
}

SVC_EXPORT int rbind(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rlisten(int s, int backlog)
{
	(void)s; (void)backlog;
	return fail(ENOSYS);
}

SVC_EXPORT int raccept(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rconnect(int s, const struct sockaddr *addr, socklen_t len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rshutdown(int s, int how)
{
	(void)s; (void)how;
	return fail(ENOSYS);
}

SVC_EXPORT int rclose(int s)
{
	(void)s;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecv(int s, void *buf, size_t len, int flags)
{
	(void)s; (void)buf; (void)len; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecvfrom(int s, void *buf, size_t len, int flags, struct sockaddr *src,
			     socklen_t *alen)
{
	(void)s; (void)buf; (void)len; (void)flags; (void)src; (void)alen;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rrecvmsg(int s, struct msghdr *msg, int flags)
{
	(void)s; (void)msg; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	(void)s; (void)buf; (void)len; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
			   const struct sockaddr *dst, socklen_t alen)
{
	(void)s; (void)buf; (void)len; (void)flags; (void)dst; (void)alen;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	(void)s; (void)msg; (void)flags;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rread(int s, void *buf, size_t count)
{
	(void)s; (void)buf; (void)count;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rreadv(int s, const struct iovec *iov, int iovcnt)
{
	(void)s; (void)iov; (void)iovcnt;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	(void)s; (void)buf; (void)count;
	return fail(ENOSYS);
}

SVC_EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	(void)s; (void)iov; (void)iovcnt;
	return fail(ENOSYS);
}

SVC_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	(void)fds; (void)nfds; (void)timeout;
	return fail(ENOSYS);
}

SVC_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *timeout)
{
	(void)nfds; (void)r; (void)w; (void)x; (void)timeout;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetpeername(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetsockname(int s, struct sockaddr *addr, socklen_t *len)
{
	(void)s; (void)addr; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT int rsetsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)s; (void)level; (void)optname; (void)optval; (void)optlen;
	return fail(ENOSYS);
}

SVC_EXPORT int rgetsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)s; (void)level; (void)optname; (void)optval; (void)optlen;
	return fail(ENOSYS);
}

SVC_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s; (void)cmd;
	return fail(ENOSYS);
}

SVC_EXPORT off_t riomap(int s, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)s; (void)buf; (void)len; (void)prot; (void)flags; (void)offset;
	return fail(ENOSYS);
}

SVC_EXPORT int riounmap(int s, void *buf, size_t len)
{
	(void)s; (void)buf; (void)len;
	return fail(ENOSYS);
}

SVC_EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	(void)s; (void)buf; (void)count; (void)offset; (void)flags;
	errno = ENOSYS;
	return 0;
}
