/*
 * rsocket_poll.c — librdmacm drop-in, rsockets: rpoll and rselect over arrays that mix
 * rsockets and ordinary fds (librspreload.so hands poll(2) and select(2) arrays to rpoll
 * as they are).
 *
 * An rsocket's readiness is computed from its state (rsocket_io.c rs_readable /
 * rs_writable, after taking what its CQ and CM channel hold); when none is ready, one
 * poll(2) waits on the ordinary fds together with each rsocket's completion channel
 * (its CQ armed first) and CM channel fds.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/select.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"
#include "compat/rsocket_int.h"

/* The events of one rsocket, its CQ armed when arm is set and none is ready. Listeners
 * are readable while a request waits on their channel. */
static short rs_revents(struct rsk *rs, short events, bool arm)
{
	short r = 0;

	if (rs->state == RS_LISTENING) {
		struct pollfd p = { .fd = rs->ch->fd, .events = POLLIN };

		return (events & POLLIN) && poll(&p, 1, 0) == 1 ? POLLIN : 0;
	}
	rs_cm_progress(rs, false);
	rs_poll_cq(rs);
	switch (rs->state) {
	case RS_IDLE:
	case RS_BOUND:
		return POLLOUT & events ? POLLOUT | POLLHUP : POLLHUP;
	case RS_ADDR_QUERY:
	case RS_ROUTE_QUERY:
	case RS_CONNECTING:
		return 0;
	case RS_ERROR:
		return (short)((POLLIN | POLLOUT) & events) | POLLERR | POLLHUP;
	default:
		break;
	}
	if ((events & POLLIN) && rs_readable(rs))
		r |= POLLIN;
	if ((events & POLLOUT) && rs_writable(rs))
		r |= POLLOUT;
	/* Hung up once what the peer sent before its DISCONNECT has been read: rstream
	 * and riostream take POLLHUP as the end, not as data to read. */
	if (rs->state == RS_DISCONNECTED && !rs->rx.n)
		r |= POLLHUP;
	else if (rs->peer_wr_shut)
		r |= POLLRDHUP & events;
	if (!r && arm && rs->cq && !rs->cq_armed) {
		if (!ibv_req_notify_cq(rs->cq, 0))
			rs->cq_armed = true;
		return rs_revents(rs, events, false);
	}
	return r;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

SVC_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	long deadline = timeout > 0 ? now_ms() + timeout : 0;
	struct pollfd *w;
	int *cqi, *cmi;
	int ready;

	if (nfds && !fds)
		return fail(EFAULT);
	w = calloc(nfds * 2 + 1, sizeof(*w));
	cqi = calloc(nfds + 1, sizeof(*cqi));
	cmi = calloc(nfds + 1, sizeof(*cmi));
	if (!w || !cqi || !cmi) {
		free(w);
		free(cqi);
		free(cmi);
		return fail(ENOMEM);
	}
	for (;;) {
		nfds_t n = 0;
		int rc, wait;

		ready = 0;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsk *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

			fds[i].revents = 0;
			cqi[i] = cmi[i] = -1;
			if (!rs) {
				/* An ordinary fd (or a negative one, which poll(2) skips);
				 * cqi holds its place in w. */
				w[n] = fds[i];
				cqi[i] = (int)n++;
				continue;
			}
			fds[i].revents = rs_revents(rs, fds[i].events, true);
			if (fds[i].revents)
				ready++;
			if (rs->cc && rs->state != RS_LISTENING) {
				w[n] = (struct pollfd){ .fd = rs->cc->fd, .events = POLLIN };
				cqi[i] = (int)n++;
			}
			w[n] = (struct pollfd){ .fd = rs->ch->fd, .events = POLLIN };
			cmi[i] = (int)n++;
			rs_put(rs);
		}
		wait = ready ? 0 : timeout < 0 ? -1 : timeout == 0 ? 0 :
		       (int)(deadline - now_ms() > 0 ? deadline - now_ms() : 0);
		rc = poll(w, n, wait);
		if (rc < 0) {
			ready = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsk *rs = cmi[i] >= 0 ? rs_get(fds[i].fd) : NULL;

			if (!rs) {
				/* Ordinary: what poll(2) said (and closed rsockets: nothing). */
				fds[i].revents = cmi[i] >= 0 ? POLLNVAL : w[cqi[i]].revents;
				if (fds[i].revents)
					ready++;
				continue;
			}
			/* The CM events are taken by rs_revents. */
			if (cqi[i] >= 0 && (w[cqi[i]].revents & POLLIN))
				rs_take_cq_event(rs);
			if (!fds[i].revents) {
				fds[i].revents = rs_revents(rs, fds[i].events, false);
				if (fds[i].revents)
					ready++;
			}
			rs_put(rs);
		}
		if (ready || wait == 0 || (timeout > 0 && now_ms() >= deadline))
			break;
	}
	free(w);
	free(cqi);
	free(cmi);
	return ready;
}

SVC_EXPORT int rselect(int nfds, fd_set *r, fd_set *wr, fd_set *x, struct timeval *timeout)
{
	struct pollfd *fds;
	int n = 0, rc, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return fail(EINVAL);
	if (!(fds = calloc((size_t)nfds + 1, sizeof(*fds))))
		return fail(ENOMEM);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (wr && FD_ISSET(fd, wr))
			ev |= POLLOUT;
		if (x && FD_ISSET(fd, x))
			ev |= POLLPRI;
		if (ev)
			fds[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
	rc = rpoll(fds, (nfds_t)n, to);
	if (rc >= 0) {
		rc = 0;
		if (r)
			FD_ZERO(r);
		if (wr)
			FD_ZERO(wr);
		if (x)
			FD_ZERO(x);
		for (int i = 0; i < n; i++) {
			bool any = false;

			if (r && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    (fds[i].events & POLLIN)) {
				FD_SET(fds[i].fd, r);
				any = true;
			}
			if (wr && (fds[i].revents & (POLLOUT | POLLERR)) &&
			    (fds[i].events & POLLOUT)) {
				FD_SET(fds[i].fd, wr);
				any = true;
			}
			if (x && (fds[i].revents & POLLPRI)) {
				FD_SET(fds[i].fd, x);
				any = true;
			}
			rc += any;
		}
	}
	free(fds);
	return rc;
}
