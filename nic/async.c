/*
 * async.c — the device's asynchronous events as softverbs' ones. The event types are
 * numbered alike; the element is mapped back through the context pointer each device
 * object carries (our QP, CQ or SRQ), and mapped forward again to acknowledge.
 */
#include <string.h>

#include "nic/nic_impl.h"

_Static_assert(SV_EVENT_GID_CHANGE == 18 && SV_EVENT_QP_LAST_WQE_REACHED == 16,
	       "event types are the verbs' numbers");

int sv__nic_async_fd(const struct sv__nic *nic)
{
	return nic->dev->async_fd;
}

static bool is_cq_event(int t)
{
	return t == SV_EVENT_CQ_ERR;
}

static bool is_srq_event(int t)
{
	return t == SV_EVENT_SRQ_ERR || t == SV_EVENT_SRQ_LIMIT_REACHED;
}

static bool is_port_event(int t)
{
	return t == SV_EVENT_DEVICE_FATAL || (t >= SV_EVENT_PORT_ACTIVE && t <= SV_EVENT_SM_CHANGE) ||
	       t == SV_EVENT_CLIENT_REREGISTER || t == SV_EVENT_GID_CHANGE;
}

int sv__nic_get_async_event(struct sv__nic *nic, struct sv_async_event *ev)
{
	struct nv_async_event d;
	int t;

	if (nic->lib->get_async_event(nic->dev, &d) != 0)
		return errno == EAGAIN || errno == EINTR ? -errno : nic_err(errno);
	memset(ev, 0, sizeof(*ev));
	t = d.event_type;
	ev->event_type = (enum sv_event_type)t;
	if (is_cq_event(t))
		ev->element.cq = d.element.cq->cq_context;
	else if (is_srq_event(t))
		ev->element.srq = &((struct nic_srq *)d.element.srq->srq_context)->pub;
	else if (is_port_event(t))
		ev->element.port_num = d.element.port_num;
	else
		ev->element.qp = &((struct nic_qp *)d.element.qp->qp_context)->pub;
	/* libibverbs needs the acknowledgement to name the device's object. */
	nic->lib->ack_async_event(&d);
	return 0;
}
