/*
 * rdmacm_unsupported.c — librdmacm drop-in: the calls the sv_ API has no counterpart for.
 * Multicast needs UD multicast groups, which neither transport has: ENOSYS, the call is
 * not implemented. Enhanced Connection Establishment (ECE) negotiates vendor options in
 * the CM's REQ and REP, and no softverbs device has any: EOPNOTSUPP.
 */
#include <errno.h>
#include <rdma/rdma_cma.h>

#include "compat/rdmacm_int.h"

/* Every call answers the same whatever it is given. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

SVC_EXPORT int rdma_join_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr,
				   void *context)
{
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *cm_id,
				      struct rdma_cm_join_mc_attr_ex *mc_join_attr, void *context)
{
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	return fail(ENOSYS);
}

SVC_EXPORT int rdma_set_local_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	return fail(EOPNOTSUPP);
}

SVC_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	return fail(EOPNOTSUPP);
}
