/*
 * efa.c — libefa.so.1 stand-in. perftest, pyverbs and libfabric link the EFA direct-verbs
 * library and call it only for EFA devices (SRD); ours are not EFA devices, so every
 * entry point rdma-core 44's libefa.so.1 exports (objdump -T; EFA_1.0 to EFA_1.2 in
 * symbols.tsv) answers "not supported" as that library does for a device of another
 * driver: NULL with errno EOPNOTSUPP, or EOPNOTSUPP.
 */
#include <errno.h>
#include <infiniband/efadv.h>

#define SVC_EXPORT __attribute__((visibility("default")))

/* Every entry point answers the same whatever it is given. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

SVC_EXPORT struct ibv_qp *efadv_create_driver_qp(struct ibv_pd *ibvpd,
						 struct ibv_qp_init_attr *attr,
						 uint32_t driver_qp_type)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
				  uint32_t inlen)
{
	return EOPNOTSUPP;
}

SVC_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					     struct ibv_qp_init_attr_ex *attr_ex,
					     struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT int efadv_query_ah(struct ibv_ah *ibvah, struct efadv_ah_attr *attr,
			      uint32_t inlen)
{
	return EOPNOTSUPP;
}

SVC_EXPORT struct ibv_cq_ex *efadv_create_cq(struct ibv_context *ibvctx,
					     struct ibv_cq_init_attr_ex *attr_ex,
					     struct efadv_cq_init_attr *efa_attr, uint32_t inlen)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT struct efadv_cq *efadv_cq_from_ibv_cq_ex(struct ibv_cq_ex *ibvcqx)
{
	errno = EOPNOTSUPP;
	return NULL;
}
