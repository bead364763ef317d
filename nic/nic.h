/*
 * nic.h — the device backend core forwards to when a context runs on a real rdma-core
 * device (SV_TRANSPORT_NIC, doc/nic.md). Unlike core/transport.h, whose transports
 * have their data path run by core, here every object is the device's: core's entry
 * points see ctx->nic (or cq->nic) set and call the matching sv__nic_* function, which
 * wraps the system's libibverbs/librdmacm loaded at run time (nic/loader.c).
 *
 * Errors are negative errnos; what the device cannot do is -EOPNOTSUPP with a log line
 * naming the device.
 */
#ifndef SV_NIC_NIC_H
#define SV_NIC_NIC_H

#include <stdio.h>

#include "softverbs.h"

struct sv__nic;

/* nic/device.c */
int sv__nic_open(const struct sv_device_opts *opts, struct sv__nic **out);
void sv__nic_close(struct sv__nic *nic);
int sv__nic_busy(const struct sv__nic *nic);
int sv__nic_query_device(struct sv__nic *nic, struct sv_device_attr *attr);
int sv__nic_query_port(struct sv__nic *nic, uint8_t port, struct sv_port_attr *attr);
int sv__nic_query_gid(struct sv__nic *nic, uint8_t port, int index, uint8_t gid[16]);

/* nic/async.c */
int sv__nic_async_fd(const struct sv__nic *nic);
/* Takes an event and acknowledges it to the device at once (doc/nic.md). */
int sv__nic_get_async_event(struct sv__nic *nic, struct sv_async_event *ev);

/* nic/mr.c */
int sv__nic_alloc_pd(struct sv_context *ctx, struct sv__nic *nic, struct sv_pd **pd);
int sv__nic_dealloc_pd(struct sv_pd *pd);
int sv__nic_reg_mr(struct sv_pd *pd, void *addr, size_t len, unsigned access,
		   struct sv_mr **mr);
int sv__nic_rereg_mr(struct sv_mr *mr, unsigned flags, struct sv_pd *pd, void *addr,
		     size_t len, unsigned access, struct sv_mr **out);
int sv__nic_dereg_mr(struct sv_mr *mr);
int sv__nic_alloc_mw(struct sv_pd *pd, enum sv_mw_type type, struct sv_mw **mw);
int sv__nic_dealloc_mw(struct sv_mw *mw);
int sv__nic_bind_mw(struct sv_qp *qp, struct sv_mw *mw, const struct sv_mw_bind *bind);
int sv__nic_create_ah(struct sv_pd *pd, const struct sv_ah_attr *attr, struct sv_ah **ah);
int sv__nic_destroy_ah(struct sv_ah *ah);

/* nic/cq.c. The CQ and channel objects are core's (struct sv_cq, sv_comp_channel),
 * carrying the device's in their nic field. */
int sv__nic_create_comp_channel(struct sv_context *ctx, struct sv__nic *nic,
				struct sv_comp_channel **ch);
int sv__nic_destroy_comp_channel(struct sv_comp_channel *ch);
int sv__nic_comp_channel_fd(const struct sv_comp_channel *ch);
int sv__nic_get_cq_event(struct sv_comp_channel *ch, struct sv_cq **cq, void **cq_context);
void sv__nic_ack_cq_events(struct sv_cq *cq, unsigned n);
int sv__nic_create_cq(struct sv_context *ctx, struct sv__nic *nic, int cqe, void *cq_context,
		      struct sv_comp_channel *ch, int comp_vector, struct sv_cq **cq);
int sv__nic_destroy_cq(struct sv_cq *cq);
int sv__nic_cq_size(const struct sv_cq *cq);
int sv__nic_poll_cq(struct sv_cq *cq, int n, struct sv_wc *wc);
int sv__nic_req_notify_cq(struct sv_cq *cq, int solicited_only);

/* nic/qp.c */
int sv__nic_create_qp(struct sv_pd *pd, struct sv_qp_init_attr *ia, struct sv_qp **qp);
int sv__nic_destroy_qp(struct sv_qp *qp);
int sv__nic_modify_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int mask);
int sv__nic_query_qp(struct sv_qp *qp, struct sv_qp_attr *attr, int mask,
		     struct sv_qp_init_attr *ia);
int sv__nic_post_send(struct sv_qp *qp, struct sv_send_wr *wr, struct sv_send_wr **bad);
int sv__nic_post_recv(struct sv_qp *qp, struct sv_recv_wr *wr, struct sv_recv_wr **bad);

/* nic/srq.c */
int sv__nic_create_srq(struct sv_pd *pd, struct sv_srq_init_attr *ia, struct sv_srq **srq);
int sv__nic_modify_srq(struct sv_srq *srq, struct sv_srq_attr *attr, int mask);
int sv__nic_query_srq(struct sv_srq *srq, struct sv_srq_attr *attr);
int sv__nic_destroy_srq(struct sv_srq *srq);
int sv__nic_post_srq_recv(struct sv_srq *srq, struct sv_recv_wr *wr, struct sv_recv_wr **bad);

/* nic/cm.c. The CM ids and channels are core's; an id of a nic context carries the
 * rdma_cm id (sv__cm_nic_get/set, core/cm.c). */
int sv__nic_cm_create_id(struct sv_cm_id *id, int ps);
/* [cm_lock] The id is being destroyed: flush its QP, stop its events; its rdma_cm id
 * goes in sv__nic_cm_reap(), called without cm_lock. */
void sv__nic_cm_detach(struct sv_cm_id *id);
void sv__nic_cm_reap(struct sv__nic *nic);
int sv__nic_cm_listen(struct sv_cm_id *id, const struct sockaddr *addr, int backlog);
int sv__nic_cm_bind(struct sv_cm_id *id, const struct sockaddr *addr);
int sv__nic_cm_connect(struct sv_cm_id *id, struct sv_qp *qp, const struct sockaddr *dst,
		       const struct sv_conn_param *param);
int sv__nic_cm_accept(struct sv_cm_id *id, struct sv_qp *qp, const struct sv_conn_param *param);
int sv__nic_cm_reject(struct sv_cm_id *id, const void *priv, uint8_t len);
int sv__nic_cm_disconnect(struct sv_cm_id *id);
int sv__nic_cm_local_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr);
int sv__nic_cm_peer_addr(const struct sv_cm_id *id, struct sockaddr_storage *addr);
/* Serializes event delivery with sv_cm_migrate_id on a nic context. */
void sv__nic_cm_lock(struct sv__nic *nic, int lock);


/* core/cm.c, for nic/cm.c: the nic state of a CM id; an event for it (DISCONNECTED is
 * followed by TIMEWAIT_EXIT); and a CONNECT_REQUEST on a listener, which makes the new
 * id holding nic before the application can see it (NULL over the backlog or out of
 * memory). */
struct sv__conn_param;
void *sv__cm_nic(const struct sv_cm_id *id);
void sv__cm_set_nic(struct sv_cm_id *id, void *nic);
void sv__cm_nic_report(struct sv_cm_id *id, enum sv_cm_event_type type, int status,
		       const struct sv__conn_param *param);
struct sv_cm_id *sv__cm_nic_incoming(struct sv_cm_id *listen, const struct sv__conn_param *p,
				     void *nic);

#endif
