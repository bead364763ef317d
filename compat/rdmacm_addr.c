/*
 * rdmacm_addr.c — librdmacm drop-in: rdma_getaddrinfo and the synchronous endpoint calls
 * (rdma_create_ep, rdma_get_request).
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
 * rdma_getaddrinfo and the synchronous endpoint calls.
 */

static struct sockaddr *dup_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

/* No node and no service: the result is the hints' own addresses and types, as
 * librdmacm gives it (an application that already holds its addresses passes them this
 * way to rdma_create_ep). */
static int addrinfo_from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r = calloc(1, sizeof(*r));

	if (!r)
		return fail(ENOMEM);
	r->ai_flags = hints->ai_flags;
	r->ai_family = hints->ai_family;
	r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space = hints->ai_port_space;
	if ((hints->ai_dst_len &&
	     !(r->ai_dst_addr = dup_addr(hints->ai_dst_addr, hints->ai_dst_len))) ||
	    (hints->ai_src_len &&
	     !(r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len)))) {
		rdma_freeaddrinfo(r);
		return fail(ENOMEM);
	}
	r->ai_dst_len = r->ai_dst_addr ? hints->ai_dst_len : 0;
	r->ai_src_len = r->ai_src_addr ? hints->ai_src_len : 0;
	*res = r;
	return 0;
}

SVC_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo h = { .ai_socktype = SOCK_STREAM }, *ai;
	struct rdma_addrinfo *r;
	bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
	int rc;

	if (!res || (!node && !service && !hints))
		return fail(EINVAL);
	if (!node && !service)
		return addrinfo_from_hints(hints, res);
	h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_INET;
	h.ai_flags = passive ? AI_PASSIVE : 0;
	if (hints && (hints->ai_flags & RAI_NUMERICHOST))
		h.ai_flags |= AI_NUMERICHOST;
	rc = getaddrinfo(node, service, &h, &ai);
	/* No family asked: IPv4 first (a name such as localhost then means the IPv4
	 * device's family), IPv6 when the node has no IPv4 form (an IPv6 literal, as
	 * "ucmatose -f ipv6 -s fd53:7600::2" passes; librdmacm takes any family). */
	if (rc != 0 && rc != EAI_SYSTEM && !(hints && hints->ai_family)) {
		h.ai_family = AF_INET6;
		rc = getaddrinfo(node, service, &h, &ai);
	}
	if (rc != 0)
		return fail(rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
	if (!(r = calloc(1, sizeof(*r)))) {
		freeaddrinfo(ai);
		return fail(ENOMEM);
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type :
			r->ai_port_space == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	if (passive) {
		r->ai_src_len = ai->ai_addrlen;
		r->ai_src_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
	} else {
		r->ai_dst_len = ai->ai_addrlen;
		r->ai_dst_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		if (node)
			r->ai_dst_canonname = strdup(node);
	}
	freeaddrinfo(ai);
	if (!r->ai_src_addr && !r->ai_dst_addr) {
		free(r->ai_dst_canonname);
		free(r);
		return fail(ENOMEM);
	}
	/* A source address in the hints is kept when the lookup gave none (librdmacm). */
	if (!r->ai_src_addr && hints && hints->ai_src_len) {
		if (!(r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len))) {
			rdma_freeaddrinfo(r);
			return fail(ENOMEM);
		}
		r->ai_src_len = hints->ai_src_len;
	}
	*res = r;
	return 0;
}

SVC_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *next;

	for (; res; res = next) {
		next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
	}
}

SVC_EXPORT int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res,
			      struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct svc_id *id;
	int err;

	if (!out || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	id = to_id(cm_id);
	cm_id->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	cm_id->pd = pd;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cm_id, res->ai_src_addr))
			goto err_id;
		/* The QP of each connection is made by rdma_get_request() from these. */
		if (qp_init_attr) {
			id->qp_attr = *qp_init_attr;
			id->qp_attr.qp_type = cm_id->qp_type;
			id->has_qp_attr = true;
		}
	} else {
		if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cm_id, 2000))
			goto err_id;
		if (qp_init_attr) {
			qp_init_attr->qp_type = cm_id->qp_type;
			if (rdma_create_qp(cm_id, pd, qp_init_attr))
				goto err_id;
		}
	}
	*out = cm_id;
	return 0;
err_id:
	err = errno;
	rdma_destroy_id(cm_id);
	errno = err;
	return -1;
}

SVC_EXPORT void rdma_destroy_ep(struct rdma_cm_id *cm_id)
{
	if (!cm_id)
		return;
	rdma_destroy_qp(cm_id);
	rdma_destroy_id(cm_id);
}

SVC_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct svc_id *l, *c;
	struct svc_event *e;
	struct ibv_qp_init_attr a;
	int rc;

	if (!listen || !out)
		return fail(EINVAL);
	l = to_id(listen);
	if (!l->sync)
		return fail(EINVAL);	/* only ids made without a channel, as librdmacm */
	if ((rc = svc_wait_for(l, RDMA_CM_EVENT_CONNECT_REQUEST, &e)) < 0)
		return fail(rc);
	c = to_id(e->ev.id);
	c->request = e;		/* acknowledged when the request is settled */
	c->id.event = &e->ev;
	c->id.pd = listen->pd;
	if (l->has_qp_attr) {
		a = l->qp_attr;
		if (rdma_create_qp(&c->id, listen->pd, &a)) {
			int err = errno;

			rdma_reject(&c->id, NULL, 0);
			rdma_destroy_id(&c->id);
			return fail(err);
		}
	}
	*out = &c->id;
	return 0;
}
