/*
 * rdmacm_qp.c — librdmacm drop-in: the QPs, CQs and SRQs rdma_cm makes for an id.
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
 * QPs.
 */

static void destroy_cqs(struct rdma_cm_id *cm_id)
{
	if (cm_id->send_cq)
		ibv_destroy_cq(cm_id->send_cq);
	if (cm_id->recv_cq && cm_id->recv_cq != cm_id->send_cq)
		ibv_destroy_cq(cm_id->recv_cq);
	if (cm_id->send_cq_channel)
		ibv_destroy_comp_channel(cm_id->send_cq_channel);
	if (cm_id->recv_cq_channel && cm_id->recv_cq_channel != cm_id->send_cq_channel)
		ibv_destroy_comp_channel(cm_id->recv_cq_channel);
	cm_id->send_cq = cm_id->recv_cq = NULL;
	cm_id->send_cq_channel = cm_id->recv_cq_channel = NULL;
}

/* rdma_create_ep style: CQs with their own channels and the id as cq_context, which the
 * inline rdma_get_send_comp()/rdma_get_recv_comp() check. */
static int create_cqs(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *a)
{
	int sw = a->cap.max_send_wr ? (int)a->cap.max_send_wr : 1;
	int rw = a->cap.max_recv_wr ? (int)a->cap.max_recv_wr : 1;

	if (!(cm_id->send_cq_channel = ibv_create_comp_channel(cm_id->verbs)) ||
	    !(cm_id->recv_cq_channel = ibv_create_comp_channel(cm_id->verbs)) ||
	    !(cm_id->send_cq = ibv_create_cq(cm_id->verbs, sw, cm_id, cm_id->send_cq_channel, 0)) ||
	    !(cm_id->recv_cq = ibv_create_cq(cm_id->verbs, rw, cm_id, cm_id->recv_cq_channel, 0))) {
		int err = errno;

		destroy_cqs(cm_id);
		return -err;
	}
	a->send_cq = cm_id->send_cq;
	a->recv_cq = cm_id->recv_cq;
	return 0;
}

/* librdmacm moves a new connected QP to INIT, so receives can be posted before
 * connecting. */
static int rc_qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	return ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     IBV_QP_ACCESS_FLAGS);
}

/* A UD QP needs no peer: librdmacm takes it to RTS at once, through the attributes
 * rdma_init_qp_attr gives (the port space's Q_Key in INIT). */
static int ud_qp_to_rts(struct rdma_cm_id *cm_id, struct ibv_qp *qp)
{
	static const enum ibv_qp_state steps[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };
	struct ibv_qp_attr qa;
	int mask, rc;

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = steps[i];
		if (rdma_init_qp_attr(cm_id, &qa, &mask))
			return errno;
		if ((rc = ibv_modify_qp(qp, &qa, mask)))
			return rc;
	}
	return 0;
}

SVC_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
	struct svc_id *id;
	struct ibv_qp *qp;
	int rc;

	if (!cm_id || !attr || !cm_id->verbs)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		if (!cm_id->pd)
			return fail(ENOMEM);	/* the device's PD could not be allocated */
		attr->pd = cm_id->pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (attr->pd->context != cm_id->verbs)
		return fail(EINVAL);
	if (!attr->send_cq && !attr->recv_cq) {
		if ((rc = create_cqs(cm_id, attr)) < 0)
			return fail(rc);
		id->own_cqs = true;
	}
	if (!(qp = ibv_create_qp_ex(cm_id->verbs, attr)))
		goto err_cqs;
	if ((rc = attr->qp_type == IBV_QPT_UD ? ud_qp_to_rts(cm_id, qp) : rc_qp_to_init(qp))) {
		ibv_destroy_qp(qp);
		errno = rc;
		goto err_cqs;
	}
	cm_id->qp = qp;
	cm_id->qp_type = attr->qp_type;
	cm_id->pd = attr->pd;		/* librdmacm: the id's PD is its QP's */
	return 0;
err_cqs:
	if (id->own_cqs) {
		rc = errno;
		destroy_cqs(cm_id);
		id->own_cqs = false;
		errno = rc;
	}
	return -1;
}

SVC_EXPORT int rdma_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex a;
	int rc;

	if (!cm_id || !qp_init_attr)
		return fail(EINVAL);
	memset(&a, 0, sizeof(a));
	memcpy(&a, qp_init_attr, sizeof(*qp_init_attr));
	a.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	a.pd = pd;
	if ((rc = rdma_create_qp_ex(cm_id, &a)) == 0)
		qp_init_attr->cap = a.cap;
	return rc;
}

SVC_EXPORT void rdma_destroy_qp(struct rdma_cm_id *cm_id)
{
	struct svc_id *id;

	if (!cm_id || !cm_id->qp)
		return;
	id = to_id(cm_id);
	ibv_destroy_qp(cm_id->qp);
	cm_id->qp = NULL;
	if (id->own_cqs) {
		destroy_cqs(cm_id);
		id->own_cqs = false;
	}
}

SVC_EXPORT int rdma_create_srq(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	(void)cm_id;
	(void)pd;
	(void)attr;
	return fail(EOPNOTSUPP);	/* no SRQ in the sv_ API */
}

SVC_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	(void)cm_id;
	(void)attr;
	return fail(EOPNOTSUPP);
}

SVC_EXPORT void rdma_destroy_srq(struct rdma_cm_id *cm_id)
{
	(void)cm_id;
}
