/*
 * compat.h — the private seam between the two drop-ins.
 *
 * librdmacm hands out verbs contexts and QPs made by our libibverbs (perftest -R and rping
 * use cm_id->verbs for everything), and must reach the softverbs objects underneath to
 * drive the connection manager. libibverbs exports these under its own private version
 * node (SVCOMPAT_PRIVATE in symbols.tsv); nothing else may call them.
 */
#ifndef SV_COMPAT_H
#define SV_COMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <infiniband/verbs.h>

#include "softverbs.h"

#define SVC_EXPORT __attribute__((visibility("default")))

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* The softverbs device context under an ibv_context of ours (NULL for a foreign one). */
struct sv_context *svc_sv_context(struct ibv_context *ctx);
/* The softverbs QP under an ibv_qp of ours. */
struct sv_qp *svc_sv_qp(struct ibv_qp *qp);
/* Whether a receive was ever posted on the QP (a refused connect may then not be
 * retried: the retry resets the QP, which would drop the receives). */
bool svc_qp_recv_posted(struct ibv_qp *qp);
/* Our QP of context ctx with number qp_num (made by ibv_create_qp*), or NULL. */
struct ibv_qp *svc_qp_by_num(struct ibv_context *ctx, uint32_t qp_num);
/* Copies the softverbs QP state into ibv_qp.state, which applications read directly. */
void svc_sync_qp_state(struct ibv_qp *qp);

/* libibverbs convention at this boundary: positive errno. */
static inline int svc_errno(int rc)
{
	return rc < 0 ? -rc : rc;
}

#endif /* SV_COMPAT_H */
