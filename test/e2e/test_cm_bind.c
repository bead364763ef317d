/*
 * test_cm_bind.c — sv_cm_bind (rdma_bind_addr) on both transports: a bind to port 0
 * takes a free port at once, which sv_cm_local_addr reports before any listen; a later
 * listen serves that very port (a client connects to it); while the id lives another
 * bind or listen of the port fails with -EADDRINUSE, and a connect to the bound but not
 * yet listening port is refused; destroying the id, or connecting it, gives the port
 * back. On sv_tcp0 the port is a bound TCP socket, on sv_udp0 a service port in the
 * CM's table (include/softverbs.h, sv_cm_bind).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "e2e_util.h"
#include "roce_util.h"
#include "softverbs.h"

#define WAIT_MS 5000
#define MAX_IDS 8

/* One device of a test, whichever transport it is on. */
struct dev {
	struct sv_context *ctx;
	struct sv_cm_channel *ch;
	struct sv_qp *qp;
	struct in_addr ip;		/* the address its listeners are reached at */
};

static struct e2e_side tsrv, tcli;
static struct cmside usrv, ucli;
static struct dev srv, cli;
static bool on_tcp;
static struct sv_cm_id *ids[MAX_IDS];	/* destroyed by teardown, newest first */
static int n_ids;

static void open_tcp(void)
{
	struct e2e_pair_opts o;

	on_tcp = true;
	e2e_pair_opts_init(&o);
	e2e_side_open(&tsrv, 1, &o);
	e2e_side_open(&tcli, 1, &o);
	e2e_side_create_qp(&tsrv, &o, E2E_ACCESS_ALL);
	e2e_side_create_qp(&tcli, &o, E2E_ACCESS_ALL);
	srv = (struct dev){ tsrv.ctx, tsrv.cm_ch, tsrv.qp, { htonl(INADDR_LOOPBACK) } };
	cli = (struct dev){ tcli.ctx, tcli.cm_ch, tcli.qp, { htonl(INADDR_LOOPBACK) } };
}

static void open_udp(void)
{
	uint16_t port = ru_free_port(AF_INET);

	ru_cm_open(&usrv, port, SV_RETX_GBN, NULL, SV_QPT_RC, SV_CM_PS_TCP, 4096,
		   E2E_ACCESS_ALL);
	ru_cm_open(&ucli, port, SV_RETX_GBN, NULL, SV_QPT_RC, SV_CM_PS_TCP, 4096,
		   E2E_ACCESS_ALL);
	srv = (struct dev){ usrv.ctx, usrv.ch, usrv.qp, usrv.ip };
	cli = (struct dev){ ucli.ctx, ucli.ch, ucli.qp, ucli.ip };
}

static void teardown(void)
{
	while (n_ids > 0) {
		struct sv_cm_id *id = ids[--n_ids];

		cr_assert_eq(sv_cm_destroy_id(id), 0);
	}
	e2e_side_close(&tcli);
	e2e_side_close(&tsrv);
	ru_cm_close(&ucli);
	ru_cm_close(&usrv);
	memset(&tsrv, 0, sizeof(tsrv));
	memset(&tcli, 0, sizeof(tcli));
	on_tcp = false;
}

static struct sv_cm_id *keep(struct sv_cm_id *id)
{
	cr_assert_lt(n_ids, MAX_IDS);
	ids[n_ids++] = id;
	return id;
}

static struct sv_cm_id *new_id(struct dev *d)
{
	struct sv_cm_id *id;

	cr_assert_eq(sv_cm_create_id(d->ch, d->ctx, NULL, &id), 0);
	return keep(id);
}

/* Destroys an id of ids[] before teardown would. */
static void drop_id(struct sv_cm_id *id)
{
	for (int i = 0; i < n_ids; i++) {
		if (ids[i] == id) {
			memmove(&ids[i], &ids[i + 1], (size_t)(n_ids - i - 1) * sizeof(ids[0]));
			n_ids--;
			cr_assert_eq(sv_cm_destroy_id(id), 0);
			return;
		}
	}
	cr_assert_fail("id not kept");
}

static struct sockaddr_in at(const struct dev *d, uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr = d->ip,
				     .sin_port = htons(port) };
}

static int bind_to(struct sv_cm_id *id, const struct dev *d, uint16_t port)
{
	struct sockaddr_in sa = at(d, port);

	return sv_cm_bind(id, (struct sockaddr *)&sa);
}

static int listen_on(struct sv_cm_id *id, const struct dev *d, uint16_t port)
{
	struct sockaddr_in sa = at(d, port);

	return sv_cm_listen(id, (struct sockaddr *)&sa, 4);
}

/* The port sv_cm_local_addr reports for id, on d's address. */
static uint16_t local_port(struct sv_cm_id *id, const struct dev *d)
{
	struct sockaddr_storage ss;
	struct sockaddr_in sa;

	cr_assert_eq(sv_cm_local_addr(id, &ss), 0);
	cr_assert_eq(ss.ss_family, AF_INET);
	memcpy(&sa, &ss, sizeof(sa));
	cr_assert_eq(sa.sin_addr.s_addr, d->ip.s_addr);
	return ntohs(sa.sin_port);
}

/* A bind to port 0 that took a port, which it returns. */
static uint16_t bind_any(struct sv_cm_id *id, const struct dev *d)
{
	uint16_t port;

	cr_assert_eq(bind_to(id, d, 0), 0);
	port = local_port(id, d);
	cr_assert_neq(port, 0, "a bind to port 0 picks a port at once");
	return port;
}

/* Client id c connects cli's QP to srv at port; listener l gets the request, accepts
 * with srv's QP, and both sides reach ESTABLISHED with their QPs in RTS. */
static void connect_through(struct sv_cm_id *c, struct sv_cm_id *l, uint16_t port)
{
	struct sockaddr_in dst = at(&srv, port);
	struct sv_cm_event *ev;
	struct sv_cm_id *conn;

	cr_assert_eq(sv_cm_connect(c, cli.qp, (struct sockaddr *)&dst, NULL), 0);
	ev = ru_cm_event(srv.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	cr_assert_eq(ev->listen_id, l, "the request came to the bound listener");
	conn = keep(ev->id);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(conn, srv.qp, NULL), 0);
	ev = ru_cm_event(cli.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->status, 0);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	ev = ru_cm_event(srv.ch, SV_CM_EVENT_ESTABLISHED, WAIT_MS);
	cr_assert_eq(ev->id, conn);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(e2e_qp_state(cli.qp), SV_QPS_RTS);
	cr_assert_eq(e2e_qp_state(srv.qp), SV_QPS_RTS);
}

/* Bind to 0, the port is there at once and taken; listen serves it. */
static void bind_then_listen(void)
{
	struct sv_cm_id *l = new_id(&srv), *other = new_id(&srv);
	uint16_t port = bind_any(l, &srv);

	cr_assert_eq(bind_to(other, &srv, port), -EADDRINUSE, "a second bind of the port");
	cr_assert_eq(listen_on(other, &srv, port), -EADDRINUSE, "a listen on the bound port");
	/* The listen is given port 0: a bound id listens on its own port all the same. */
	cr_assert_eq(listen_on(l, &srv, 0), 0);
	cr_assert_eq(local_port(l, &srv), port, "the listener kept the bound port");
	cr_assert_eq(bind_to(other, &srv, port), -EADDRINUSE, "a bind of the listening port");
	connect_through(new_id(&cli), l, port);
}

/* Destroying a bound id frees its port for the next bind. */
static void destroy_frees(void)
{
	struct sv_cm_id *l = new_id(&srv), *m;
	uint16_t port = bind_any(l, &srv);

	drop_id(l);
	m = new_id(&srv);
	cr_assert_eq(bind_to(m, &srv, port), 0, "the port of a destroyed id is free");
	cr_assert_eq(local_port(m, &srv), port);
	cr_assert_eq(listen_on(m, &srv, port), 0);
	connect_through(new_id(&cli), m, port);
}

/* A bound port nobody listens on refuses a connection, as a closed TCP port (or an IB
 * CM service nobody listens for) does; an id binds once. */
static void bound_is_not_listening(void)
{
	struct sv_cm_id *l = new_id(&srv), *c = new_id(&cli);
	uint16_t port = bind_any(l, &srv);
	struct sockaddr_in dst = at(&srv, port);
	struct sv_cm_event *ev;

	cr_assert_eq(bind_to(l, &srv, 0), -EINVAL, "an id binds once");
	cr_assert_eq(sv_cm_connect(c, cli.qp, (struct sockaddr *)&dst, NULL), 0);
	ev = ru_cm_event(cli.ch, SV_CM_EVENT_UNREACHABLE, WAIT_MS);
	cr_assert_eq(ev->status, -ECONNREFUSED, "status %d", ev->status);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(l, srv.qp, NULL), -EINVAL, "a bound id has no request");
}

/* A bound id that connects gives its port back and connects as an unbound one. */
static void connect_unbinds(void)
{
	struct sv_cm_id *l = new_id(&srv), *c = new_id(&cli), *again = new_id(&cli);
	uint16_t port, cport;

	cr_assert_eq(listen_on(l, &srv, 0), 0);
	port = local_port(l, &srv);
	cport = bind_any(c, &cli);
	connect_through(c, l, port);
	/* On TCP the connection's own socket may have drawn the same port by chance (its
	 * kernel picks it afresh); then that socket holds it. */
	if (on_tcp && local_port(c, &cli) == cport)
		cr_assert_eq(bind_to(again, &cli, cport), -EADDRINUSE);
	else
		cr_assert_eq(bind_to(again, &cli, cport), 0, "the connected id gave it back");
}

#define BOTH(name, fn)                                                                     \
	Test(cm_bind, tcp_##name, .fini = teardown, .timeout = 30) { open_tcp(); fn(); }     \
	Test(cm_bind, udp_##name, .fini = teardown, .timeout = 30) { open_udp(); fn(); }

BOTH(bind_port0_then_listen_serves_that_port, bind_then_listen)
BOTH(destroying_the_id_frees_its_port, destroy_frees)
BOTH(bound_port_refuses_until_it_listens, bound_is_not_listening)
BOTH(connecting_a_bound_id_gives_its_port_back, connect_unbinds)
