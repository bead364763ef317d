/*
 * stats.c — the queries a transport answers on its own: the port's GID and per-QP
 * counters (doc/architecture.md "Configuration and observability"). Both go through
 * optional ops of core/transport.h; a transport without them answers -EOPNOTSUPP.
 */
#include <errno.h>

#include "core/internal.h"
#include "nic/nic.h"

int sv_query_gid(struct sv_context *ctx, uint8_t port_num, int index, uint8_t gid[16])
{
	if (ctx && ctx->nic && gid && index >= 0)
		return sv__nic_query_gid(ctx->nic, port_num, index, gid);
	if (!ctx || !gid || port_num != 1 || index < 0)
		return -EINVAL;
	if (!ctx->ops->query_gid)
		return -EOPNOTSUPP;
	return ctx->ops->query_gid(ctx, index, gid);
}

int sv_query_qp_stats(struct sv_qp *pub, struct sv_qp_stats *stats)
{
	struct sv__qp *qp;
	int rc;

	if (!pub || !stats)
		return -EINVAL;
	if (pub->context->nic)
		return -EOPNOTSUPP;	/* the device's own counters are sysfs' */
	qp = to_qp(pub);
	if (!qp->ops->qp_stats)
		return -EOPNOTSUPP;
	sv__qp_lock(pub);
	rc = qp->ops->qp_stats(pub, stats);
	sv__qp_unlock(pub);
	return rc;
}
