/*
 * rsocket_int.h — what the rsocket files of the librdmacm drop-in share: the rsocket
 * object and its state machine, and the functions one file defines for another.
 * Nothing here is exported.
 *
 * The protocol and its formats: compat/rsocket_wire.h.
 *
 * Every rsocket's number is a real file descriptor (an eventfd it owns), so it never
 * collides with a socket's, and librspreload.so can keep both in one table.
 */
#ifndef SV_COMPAT_RSOCKET_INT_H
#define SV_COMPAT_RSOCKET_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>

#include "compat/rsocket_wire.h"

#define RS_QP_CTRL_SIZE 4	/* send queue entries kept for control messages */

/* One state machine per rsocket; rs_set_state() checks and logs every move. */
enum rs_state {
	RS_IDLE,
	RS_BOUND,
	RS_LISTENING,
	RS_ADDR_QUERY,		/* rdma_resolve_addr issued */
	RS_ROUTE_QUERY,		/* rdma_resolve_route issued */
	RS_CONNECTING,		/* rdma_connect issued, waiting for ESTABLISHED */
	RS_ACCEPTING,		/* rdma_accept issued, waiting for ESTABLISHED */
	RS_CONNECTED,
	RS_DISCONNECTED,	/* the peer or we ended the connection */
	RS_ERROR,		/* connecting failed, or the QP failed */
	RS_N_STATES
};

/* An riomap()ed local buffer, published to the peer at one target iomap index. */
struct rs_map {
	struct rs_map *next;
	void *buf;
	size_t len;
	off_t offset;
	struct ibv_mr *mr;
	int index;
};

struct rsk {
	int fd;				/* the number the application holds */
	pthread_mutex_t lock;
	enum rs_state state;
	int domain;
	bool nonblock;
	bool rd_shut, wr_shut;		/* rshutdown() here */
	bool peer_wr_shut;		/* the peer sent SHUTDOWN: EOF after its data */
	int err;			/* SO_ERROR */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	/* Options, fixed once the QP exists. */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size;
	uint32_t sq_inline;
	uint16_t iomap_size;
	bool nodelay, reuseaddr, keepalive;
	int keepidle;
	struct linger linger;
	/* Verbs objects of a connection. */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	bool cq_armed;
	bool msg_send;			/* iWARP: messages as Sends, see above */
	uint8_t *rbuf;			/* rbuf_size bytes, then rq slots of RS_MSG_SIZE */
	struct ibv_mr *rmr;
	uint8_t *sbuf;			/* sbuf_size bytes, then the control area */
	struct ibv_mr *smr;
	uint8_t *target;		/* target SGL, then target iomap */
	struct ibv_mr *tmr;
	struct rs_sge *target_sgl;
	struct rs_iomap *target_iomap;
	/* Sending. */
	struct rs_sge remote_sgl, remote_iomap;
	int remote_sge;
	int target_sge;
	bool swap_sgl;			/* the peer's byte order differs from ours */
	uint16_t sseq_no, sseq_comp;
	int sqe_avail, ctrl_avail;
	uint32_t sbuf_bytes_avail, sbuf_off;
	unsigned ctrl_slot;
	/* Receiving. */
	struct rs_rx rx;
	uint16_t rseq_comp;
	uint32_t rbuf_free_off;
	/* Iomaps. */
	struct rs_map *maps;		/* riomap()ed here, published or waiting */
	int next_map_index;
	/* Listening. */
	int backlog;
};

/* rsocket_conn.c */
struct rsk *rs_get(int fd);			/* locked, or NULL with EBADF/ENOTSOCK */
void rs_put(struct rsk *rs);
void rs_set_state(struct rsk *rs, enum rs_state to);
int rs_cm_progress(struct rsk *rs, bool wait);	/* the CM events of rs's channel */

/* rsocket_io.c */
int rs_conn_init(struct rsk *rs);		/* QP, CQ and buffers for rs->id */
void rs_conn_fini(struct rsk *rs);
void rs_format_conn_data(struct rsk *rs, struct rs_conn_data *c);
int rs_save_conn_data(struct rsk *rs, const void *priv, size_t len);
int rs_conn_start(struct rsk *rs);		/* first receives posted, credits sent */
int rs_poll_cq(struct rsk *rs);			/* completions taken, credits given */
int rs_wait(struct rsk *rs);			/* one wait on the CQ and CM fds */
void rs_take_cq_event(struct rsk *rs);
bool rs_readable(struct rsk *rs);
bool rs_writable(struct rsk *rs);
int rs_send_ctrl(struct rsk *rs, uint32_t ctrl);
void rs_drain_sends(struct rsk *rs);

#endif /* SV_COMPAT_RSOCKET_INT_H */
