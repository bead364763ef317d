/*
 * rdmacm_int.h — what the files of the librdmacm.so.1 drop-in share: the event, channel
 * and id objects and the functions one file defines for another. Nothing here is exported.
 *
 * The drop-in as a whole: rdma_cm on the sv_cm_* connection manager.
 *

 * Every id lives on the one shared verbs context of the first device our libibverbs
 * lists (perftest -R and rping use cm_id->verbs for all their verbs calls, so it must be
 * a context of ours). Address and route resolution need no network lookup on an IP
 * transport: ADDR_RESOLVED and ROUTE_RESOLVED are synthesized into the channel.
 *
 * Event channels: the fd handed out is an epoll fd watching two sources, the softverbs
 * CM channel (made non-blocking: we wait on the epoll fd) and a local eventfd for the
 * events we synthesize, so an application that polls the fd sees both.
 *
 * Synchronous ids (created with a NULL channel, as rdma_create_ep does) get a private
 * channel, and the calls that start something wait for its outcome there; events for
 * other ids met while waiting are kept, in order, for rdma_get_cm_event.
 *
 * UD port spaces (RDMA_PS_UDP, RDMA_PS_IPOIB, as udaddy uses): the id is a softverbs UD
 * port-space id, rdma_create_qp takes the UD QP to RTS with rdma_cm's Q_Key at once (as
 * librdmacm does), rdma_connect resolves the service to the remote QP, and ESTABLISHED
 * carries param.ud (ah_attr, qp_num, qkey). The TCP transport has no UD QPs (neither
 * has an iWARP device): rdma_create_id fails there with EOPNOTSUPP.
 *
 * Errors follow librdmacm: -1 with errno set.
 */
#ifndef SV_COMPAT_RDMACM_INT_H
#define SV_COMPAT_RDMACM_INT_H

#include <pthread.h>
#include <rdma/rdma_cma.h>

#include "compat/compat.h"

struct svc_event {
	struct rdma_cm_event ev;
	struct sv_cm_event *sv;		/* NULL for the events we synthesize */
	struct svc_event *next;
};

struct svc_channel {
	struct rdma_event_channel ch;	/* ch.fd: the epoll fd */
	struct sv_cm_channel *sv;
	int local_fd;			/* eventfd, readable while local events wait */
	pthread_mutex_t lock;
	struct svc_event *head, *tail;	/* synthesized or set-aside events */
	int waiters;			/* threads blocked in next_event() */
	bool reader;			/* rdma_get_cm_event() has been called ... */
	pthread_t reader_thread;	/* ... last by this thread */
};

struct svc_id {
	struct rdma_cm_id id;
	struct sv_cm_id *sv;
	struct svc_channel *ch;
	bool sync;			/* owns ch; calls wait for their outcome */
	bool own_cqs;
	bool ack_timeout_set;		/* RDMA_OPTION_ID_ACK_TIMEOUT, for the QP's RTS */
	uint8_t ack_timeout;
	bool has_qp_attr;		/* passive ep: QP made for each request */
	struct ibv_qp_init_attr qp_attr;
	/* The event cm_id->event shows: rdma_get_request's, acked when settled, or a
	 * synchronous UD rdma_connect's ESTABLISHED (its param.ud), acked at destroy. */
	struct svc_event *request;
	long retry_until_ms;		/* a refused connect is retried until then */
	struct sv_conn_param conn;	/* rdma_connect's parameters, for the retry */
	uint8_t conn_priv[SV_CM_MAX_PRIVATE_DATA];
	struct ibv_sa_path_rec path;	/* route.path_rec once a RoCE route is resolved */
	/* A request id: its CONNECT_REQUEST's depths, which rdma_accept takes where the
	 * application leaves them to it (no parameters, or the RDMA_MAX_* values). */
	uint8_t req_resp_res, req_init_depth;
	/* An application-owned QP (rping -q): cm_id->qp stays NULL, as in librdmacm, and
	 * the QP conn_param.qp_num names at rdma_connect (app_active) or rdma_accept is
	 * the one the CM connects. */
	struct ibv_qp *app_qp;
	bool app_active;
};

static inline struct svc_id *to_id(struct rdma_cm_id *id)
{
	return container_of(id, struct svc_id, id);
}

static inline bool ps_is_ud(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB;
}

/* The QP the id's connection drives: its own, or the application's. */
static inline struct ibv_qp *id_qp(struct svc_id *id)
{
	return id->id.qp ? id->id.qp : id->app_qp;
}

static inline struct svc_channel *to_ch(struct rdma_event_channel *ch)
{
	return container_of(ch, struct svc_channel, ch);
}

static inline int fail(int err)
{
	errno = err < 0 ? -err : err;
	return -1;
}

/* rdmacm_events.c: the local event queue of a channel, and waiting on it. */
void svc_local_push(struct svc_channel *ch, struct svc_event *e);
void svc_set_addr(void *dst, const struct sockaddr *src);
void svc_synthesize(struct svc_id *id, enum rdma_cm_event_type type);
long svc_now_ms(void);
void svc_event_free(struct svc_event *e);
int svc_wait_for(struct svc_id *id, enum rdma_cm_event_type want, struct svc_event **out);
int svc_wait_and_ack(struct svc_id *id, enum rdma_cm_event_type want);

/* rdmacm_id.c: the shared verbs context, and an address's port. */
struct ibv_context *svc_get_verbs(void);
/* rdmacm_id.c: binds an id to the device: cm_id->verbs, and the device's PD. */
void svc_id_set_device(struct rdma_cm_id *cm_id);
__be16 svc_addr_port(const struct sockaddr *sa);

#endif /* SV_COMPAT_RDMACM_INT_H */
