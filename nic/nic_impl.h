/*
 * nic_impl.h — what the nic/ files share: the table of libibverbs/librdmacm functions
 * (nic/loader.c), the per-context state and the wrappers that embed each public object
 * next to the device's.
 */
#ifndef SV_NIC_IMPL_H
#define SV_NIC_IMPL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "core/internal.h"
#include "nic/abi.h"
#include "nic/nic.h"

struct nic_cm;

struct nic_lib {
	void *hv, *hc;			/* dlmopen handles: libibverbs, librdmacm */
	char verbs_path[4096], cm_path[4096];	/* PATH_MAX */

	struct nv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct nv_device **list);
	const char *(*get_device_name)(struct nv_device *dev);
	struct nv_context *(*open_device)(struct nv_device *dev);
	int (*close_device)(struct nv_context *ctx);
	int (*query_device)(struct nv_context *ctx, struct nv_device_attr *attr);
	int (*query_port)(struct nv_context *ctx, uint8_t port, struct nv_port_attr *attr);
	int (*query_gid)(struct nv_context *ctx, uint8_t port, int index, union nv_gid *gid);
	struct nv_pd *(*alloc_pd)(struct nv_context *ctx);
	int (*dealloc_pd)(struct nv_pd *pd);
	struct nv_mr *(*reg_mr)(struct nv_pd *pd, void *addr, size_t len, int access);
	int (*rereg_mr)(struct nv_mr *mr, int flags, struct nv_pd *pd, void *addr, size_t len,
			int access);
	int (*dereg_mr)(struct nv_mr *mr);
	struct nv_comp_channel *(*create_comp_channel)(struct nv_context *ctx);
	int (*destroy_comp_channel)(struct nv_comp_channel *ch);
	struct nv_cq *(*create_cq)(struct nv_context *ctx, int cqe, void *cq_context,
				   struct nv_comp_channel *ch, int comp_vector);
	int (*destroy_cq)(struct nv_cq *cq);
	int (*get_cq_event)(struct nv_comp_channel *ch, struct nv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct nv_cq *cq, unsigned n);
	struct nv_qp *(*create_qp)(struct nv_pd *pd, struct nv_qp_init_attr *ia);
	int (*modify_qp)(struct nv_qp *qp, struct nv_qp_attr *attr, int mask);
	int (*query_qp)(struct nv_qp *qp, struct nv_qp_attr *attr, int mask,
			struct nv_qp_init_attr *ia);
	int (*destroy_qp)(struct nv_qp *qp);
	struct nv_srq *(*create_srq)(struct nv_pd *pd, struct nv_srq_init_attr *ia);
	int (*modify_srq)(struct nv_srq *srq, struct nv_srq_attr *attr, int mask);
	int (*query_srq)(struct nv_srq *srq, struct nv_srq_attr *attr);
	int (*destroy_srq)(struct nv_srq *srq);
	struct nv_ah *(*create_ah)(struct nv_pd *pd, struct nv_ah_attr *attr);
	int (*destroy_ah)(struct nv_ah *ah);
	int (*get_async_event)(struct nv_context *ctx, struct nv_async_event *ev);
	void (*ack_async_event)(struct nv_async_event *ev);

	/* librdmacm; NULL when only libibverbs could be loaded (sv_cm_* is then -ENODEV). */
	struct ncm_event_channel *(*cm_create_channel)(void);
	void (*cm_destroy_channel)(struct ncm_event_channel *ch);
	int (*cm_create_id)(struct ncm_event_channel *ch, struct ncm_id **id, void *context,
			    int ps);
	int (*cm_destroy_id)(struct ncm_id *id);
	int (*cm_bind_addr)(struct ncm_id *id, struct sockaddr *addr);
	int (*cm_resolve_addr)(struct ncm_id *id, struct sockaddr *src, struct sockaddr *dst,
			       int timeout_ms);
	int (*cm_resolve_route)(struct ncm_id *id, int timeout_ms);
	int (*cm_connect)(struct ncm_id *id, struct ncm_conn_param *param);
	int (*cm_listen)(struct ncm_id *id, int backlog);
	int (*cm_accept)(struct ncm_id *id, struct ncm_conn_param *param);
	int (*cm_reject)(struct ncm_id *id, const void *priv, uint8_t len);
	int (*cm_disconnect)(struct ncm_id *id);
	int (*cm_establish)(struct ncm_id *id);
	int (*cm_get_event)(struct ncm_event_channel *ch, struct ncm_event **ev);
	int (*cm_ack_event)(struct ncm_event *ev);
	int (*cm_init_qp_attr)(struct ncm_id *id, struct nv_qp_attr *attr, int *mask);
};

/* Loads the system's libraries once per process (nic/loader.c): the table, or NULL with
 * *err set (-ENODEV: no libibverbs found, or only softverbs' own) and the reason logged. */
const struct nic_lib *sv__nic_lib(int *err);

struct sv__nic {
	const struct nic_lib *lib;
	struct nv_context *dev;
	struct nv_device_attr attr;
	char name[64];
	atomic_uint n_obj;		/* objects of the context still open */

	/* CM (nic/cm.c): one rdma_cm event channel for the context, read by cm_thread,
	 * which turns each event into the sv_cm event of the id it belongs to. */
	pthread_mutex_t cm_lock;
	struct ncm_event_channel *cm_ch;
	pthread_t cm_thread;
	bool cm_started;
	int cm_stop[2];			/* pipe: closing [1] ends cm_thread */
	struct nic_cm *cm_dead;		/* destroyed ids whose rdma_cm id is to go */
};

struct nic_pd {
	struct sv_pd pub;
	struct nv_pd *pd;
	struct sv__nic *nic;
};

struct nic_mr {
	struct sv_mr pub;
	struct nv_mr *mr;
};

struct nic_mw {
	struct sv_mw pub;
	struct nv_mw *mw;
};

struct nic_ah {
	struct sv_ah pub;
	struct nv_ah *ah;
};

struct nic_srq {
	struct sv_srq pub;
	struct nv_srq *srq;
};

struct nic_qp {
	struct sv_qp pub;
	struct nv_qp *qp;
	struct sv_srq *srq;
	int sq_sig_all;
};

static inline struct sv__nic *nic_of(struct sv_context *ctx)
{
	return ctx->nic;
}

/* A positive errno from libibverbs (or errno after a NULL) as our negative one. */
static inline int nic_err(int rc)
{
	return rc > 0 ? -rc : rc < 0 ? rc : -EIO;
}

/* -EOPNOTSUPP, logged with the device's name. */
int sv__nic_unsupported(const struct sv__nic *nic, const char *what);

/* sv_ah_attr <-> the device's (always with a GRH: RoCE and iWARP devices route by GID). */
void sv__nic_ah_to(const struct sv_ah_attr *in, struct nv_ah_attr *out);
void sv__nic_ah_from(const struct nv_ah_attr *in, struct sv_ah_attr *out);

#endif
