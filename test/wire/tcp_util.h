/*
 * tcp_util.h — the iWARP side of the TCP wire tests: a device on the TCP transport with
 * an RC QP, a registered buffer and a non-blocking CM channel, a client and a server of
 * them connected over 127.0.0.1, and bounded waits for their CM events.
 */
#ifndef SV_TEST_WIRE_TCP_UTIL_H
#define SV_TEST_WIRE_TCP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softverbs.h"

struct tcp_end {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;		/* the connection, once there is one */
	uint8_t *buf;
	struct sv_mr *mr;		/* buf, registered with the access asked for */
};

/* Opens e: a 256-entry CQ, an RC QP of 32 WRs and 2 SGEs each way (moved to INIT with
 * every remote right when init, so receives can be posted before the connection exists),
 * buflen bytes of fill registered with access, and a CM channel. */
void tcp_end_open(struct tcp_end *e, size_t buflen, uint8_t fill, unsigned access, bool init);
/* The same on a device with options d (a TLS device, say). */
void tcp_end_open_dev(struct tcp_end *e, const struct sv_device_opts *d, size_t buflen,
		      uint8_t fill, unsigned access, bool init);
/* Drains e's async and CM events, then destroys all of it. */
void tcp_end_close(struct tcp_end *e);
/* Waits for e's next CM event, which must be type; the caller acks it. */
struct sv_cm_event *tcp_cm_wait(struct tcp_end *e, enum sv_cm_event_type type);
/* srv listens on 127.0.0.1:port, cli connects with cp and srv accepts with it; returns once
 * both are ESTABLISHED, with the listener (the caller destroys it). */
struct sv_cm_id *tcp_connect(struct tcp_end *cli, struct tcp_end *srv, uint16_t port,
			     struct sv_conn_param *cp);

#endif
