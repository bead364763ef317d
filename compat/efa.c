/*
 * efa.c — libefa.so.1 stand-in. perftest links the EFA direct-verbs library and calls
 * it only for EFA devices (SRD); ours are not EFA devices, so both entry points answer
 * "not supported".
 */
#include <errno.h>
#include <infiniband/efadv.h>

#define SVC_EXPORT __attribute__((visibility("default")))

SVC_EXPORT int efadv_query_device(struct ibv_context *ibvctx, struct efadv_device_attr *attr,
				  uint32_t inlen)
{
	(void)ibvctx;
	(void)attr;
	(void)inlen;
	return EOPNOTSUPP;
}

SVC_EXPORT struct ibv_qp *efadv_create_qp_ex(struct ibv_context *ibvctx,
					     struct ibv_qp_init_attr_ex *attr_ex,
					     struct efadv_qp_init_attr *efa_attr, uint32_t inlen)
{
	(void)ibvctx;
	(void)attr_ex;
	(void)efa_attr;
	(void)inlen;
	errno = EOPNOTSUPP;
	return NULL;
}
