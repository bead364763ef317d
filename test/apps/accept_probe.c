/*
 * accept_probe.c — a librdmacm program for test_apps_rdmacm.c: in one process, a
 * listener on 127.0.0.1 and a client that connects to it asking responder resources 3
 * and initiator depth 5. It prints the CONNECT_REQUEST's depths, accepts with no
 * parameters (librdmacm then uses the request's), and once both sides are ESTABLISHED
 * prints both QPs' depths. Every wait is bounded (10 s); exit 0 when all went through.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, 10000) != 1) {
		fprintf(stderr, "no CM event within 10 s\n");
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		return NULL;
	}
	return ev;
}

/* Waits for want on ch; acks it. */
static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev = next_event(ch);
	int ok;

	if (!ev)
		return -1;
	ok = ev->event == want;
	if (!ok)
		fprintf(stderr, "got %s, wanted %s\n", rdma_event_str(ev->event),
			rdma_event_str(want));
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = { .qp_type = IBV_QPT_RC, .sq_sig_all = 1,
				      .cap = { .max_send_wr = 4, .max_recv_wr = 4,
					       .max_send_sge = 1, .max_recv_sge = 1 } };

	if (rdma_create_qp(id, NULL, &a)) {
		perror("rdma_create_qp");
		return -1;
	}
	return 0;
}

static void print_depths(const char *who, struct rdma_cm_id *id)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(id->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia))
		perror("ibv_query_qp");
	else
		printf("%s max_rd_atomic %u max_dest_rd_atomic %u\n", who, a.max_rd_atomic,
		       a.max_dest_rd_atomic);
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct rdma_conn_param cp = { .responder_resources = 3, .initiator_depth = 5 };
	struct rdma_event_channel *lch, *cch;
	struct rdma_cm_id *l, *c, *s = NULL;
	struct rdma_cm_event *ev;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (!(lch = rdma_create_event_channel()) || !(cch = rdma_create_event_channel()) ||
	    rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(cch, &c, NULL, RDMA_PS_TCP)) {
		perror("setup");
		return 1;
	}
	if (rdma_bind_addr(l, (struct sockaddr *)&a) || rdma_listen(l, 1)) {
		perror("listen");
		return 1;
	}
	a.sin_port = rdma_get_src_port(l);
	if (rdma_resolve_addr(c, NULL, (struct sockaddr *)&a, 2000) ||
	    expect(cch, RDMA_CM_EVENT_ADDR_RESOLVED) || rdma_resolve_route(c, 2000) ||
	    expect(cch, RDMA_CM_EVENT_ROUTE_RESOLVED) || make_qp(c) || rdma_connect(c, &cp)) {
		perror("connect");
		return 1;
	}
	if (!(ev = next_event(lch)) || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		fprintf(stderr, "no CONNECT_REQUEST\n");
		return 1;
	}
	s = ev->id;
	printf("request responder_resources %u initiator_depth %u\n",
	       ev->param.conn.responder_resources, ev->param.conn.initiator_depth);
	rdma_ack_cm_event(ev);
	if (make_qp(s) || rdma_accept(s, NULL)) {
		perror("accept");
		return 1;
	}
	if (expect(cch, RDMA_CM_EVENT_ESTABLISHED) || expect(lch, RDMA_CM_EVENT_ESTABLISHED))
		return 1;
	print_depths("client", c);
	print_depths("server", s);
	rdma_disconnect(c);
	if (expect(cch, RDMA_CM_EVENT_DISCONNECTED) || expect(lch, RDMA_CM_EVENT_DISCONNECTED))
		return 1;
	rdma_destroy_qp(s);
	rdma_destroy_qp(c);
	rdma_destroy_id(s);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(lch);
	return 0;
}
