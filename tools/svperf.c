
/*
 * svperf — a perftest-style bandwidth and latency benchmark for softverbs.
 *
 *   svperf [--transport tcp|udp|nic [--device NAME]] [--op OP] [--size BYTES] [--iters N | --duration S]
 *          [--mode bw|lat] [--port N] [--json] [--loopback] [--tls ...] [HOST]
 *   svperf --list-devices
 *
 * Without HOST it serves one client on --port and exits; with HOST it is the client;
 * with --loopback both ends run in this process (the server side on a second thread with
 * its own device context) over real sockets on 127.0.0.1. The client decides the test:
 * its op, mode, size, iteration count and data seed travel to the server in the CM
 * private data, and the server answers with its buffer's address, rkey and length.
 *
 * bw mode keeps a window of --depth data WRs outstanding, signaling one in every `sig`
 * (perftest's scheme); lat mode is a ping-pong for WRITE and SEND (each side answers the
 * other's message: latency is half the round trip, as perftest and sockperf report it),
 * and one operation at a time for READ and atomics (latency is the full operation time,
 * as ib_read_lat reports it).
 *
 * Every run checks the data that arrived. Sources are filled with seeded patterns (see
 * sv_tool.h) so the receiving side can check any slice on its own: the WRITE/SEND target
 * at the end (and each SEND's sequence number and tail on arrival), the READ sink at the
 * end, each ping-pong message on arrival, every atomic's returned value and the final
 * counter. The server reports its verdict in a RESULT message; the client reports
 * verified only if both sides' checks passed.
 *
 * Control messages (CREDIT, DONE, RESULT) are SEND_WITH_IMM with bit 31 of the immediate
 * set and an 8-byte big-endian value. iWARP has no receiver-not-ready retry (a SEND that
 * finds no receive posted is fatal to the connection), so SEND-type bw runs are flow
 * controlled: the server grants credits for the receives it has posted and tops them up
 * with CREDIT messages as it reposts.
 *
 * Exit status: 0 verified, 1 verification failed, 2 usage error or something the library
 * does not support, 3 any other failure (including timeouts).
 */

#include "svperf/svperf.h"

volatile sig_atomic_t g_stop;	/* the loopback peer failed: give up */

/* ---------------------------------------------------------------------------------------
 * Main
 */

/* A run that failed before it measured anything: with --json, still one object. */
static int fail_early(const struct config *c, int rc)
{
	struct perf p;

	memset(&p, 0, sizeof(p));
	p.cfg = *c;
	if (c->json)
		perf_print_report(&p, rc);
	return perf_setup_status(rc);
}

struct server_thread {
	struct perf side;
	struct loopback_server thr;
};

static int loopback_serve(void *side)
{
	return perf_run_server(side);
}

/* One socket transport's device, as its attributes say. */
static void list_socket_device(enum sv_transport t)
{
	struct sv_device_opts o;
	struct sv_device_attr a;
	struct sv_port_attr pa;
	struct sv_context *ctx;

	sv_device_opts_init(&o);
	o.transport = t;
	if (sv_open_device(&o, &ctx) < 0 || sv_query_device(ctx, &a) < 0 ||
	    sv_query_port(ctx, 1, &pa) < 0) {
		printf("hca_id:\tsv_%s0\n\t(cannot open)\n", transport_name(t));
		return;
	}
	printf("hca_id:\t%s\n\ttransport:\t\t\t%s (softverbs)\n\tnode_guid:\t\t\t%016llx\n"
	       "\tmax_qp:\t\t\t\t%u\n\tmax_qp_wr:\t\t\t%u\n\tmax_sge:\t\t\t%u\n"
	       "\tmax_cq:\t\t\t\t%u\n\tmax_cqe:\t\t\t%u\n\tmax_mr:\t\t\t\t%u\n"
	       "\tmax_mw:\t\t\t\t%u\n\tmax_srq:\t\t\t%u\n\tmax_qp_rd_atom:\t\t\t%u\n"
	       "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (%d)\n"
	       "\t\t\tactive_mtu:\t\t%d (%d)\n\t\t\tlink_layer:\t\tEthernet\n",
	       a.name, transport_name(t), (unsigned long long)a.node_guid, a.max_qp, a.max_qp_wr,
	       a.max_sge, a.max_cq, a.max_cqe, a.max_mr, a.max_mw, a.max_srq, a.max_qp_rd_atom,
	       pa.state, 128 << pa.active_mtu, pa.active_mtu);
	sv_close_device(ctx);
}

/* --list-devices: sv_tcp0, sv_udp0, then every rdma-core device (ibv_devinfo-style). */
int perf_list_devices(void)
{
	int n;

	list_socket_device(SV_TRANSPORT_TCP);
	list_socket_device(SV_TRANSPORT_UDP);
	fflush(stdout);
	n = sv_nic_list_devices(stdout);
	if (n < 0)
		printf("(nic: no rdma-core device can be opened: %s)\n", sv_strerror(n));
	else if (n == 0)
		printf("(nic: rdma-core lists no device)\n");
	return 0;
}

/* --qps: one side per QP, each on a thread of its own, all on one device. */
struct qp_side {
	struct perf p;
	const struct config *c;
	struct sv_context *ctx;
	unsigned i;
	int rc;
	pthread_t tid;
};

static void *qp_side_main(void *arg)
{
	struct qp_side *q = arg;
	const struct config *c = q->c;
	uint16_t port = (uint16_t)(c->port + q->i);
	char host[INET6_ADDRSTRLEN] = "";
	int server = !c->host;

	q->rc = perf_side_init_on(&q->p, c, server, PROG, q->ctx);
	q->p.qp_index = q->i;
	if (q->rc < 0)
		return NULL;
	if (server) {
		if ((q->rc = ep_listen(&q->p.ep, c->bind, port, &port, host)) < 0)
			return NULL;
		q->rc = perf_run_server(&q->p);
	} else {
		q->rc = perf_run_client(&q->p, c->host, port);
	}
	return NULL;
}

/* Runs c->qps sides at once (servers without a host, clients with one) and prints one
 * report per QP, in QP order. */
static int run_qps(const struct config *c)
{
	struct qp_side *q = calloc(c->qps, sizeof(*q));
	struct sv_context *ctx = NULL;
	int rc, status = 0;
	unsigned n = 0;

	if (!q)
		return 3;
	if ((rc = perf_open_device(c, PROG, &ctx)) < 0) {
		free(q);
		return fail_early(c, rc);
	}
	for (; n < c->qps; n++) {
		q[n].c = c;
		q[n].ctx = ctx;
		q[n].i = n;
		if ((rc = pthread_create(&q[n].tid, NULL, qp_side_main, &q[n])) != 0) {
			fprintf(stderr, "%s: pthread_create: %s\n", PROG, strerror(rc));
			status = 3;
			break;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(q[i].tid, NULL);
		perf_print_report(&q[i].p, q[i].rc);
		if (q[i].rc < 0)
			status = 3;
		else if (!q[i].p.ok && !status)
			status = 1;
		perf_side_free(&q[i].p);
	}
	sv_close_device(ctx);
	free(q);
	return status;
}

int main(int argc, char **argv)
{
	struct config c;
	struct perf cli;
	struct server_thread *srv = NULL;
	char host[INET6_ADDRSTRLEN] = "";
	uint16_t port;
	int rc, status;

	if (perf_parse_args(argc, argv, &c) < 0)
		return 2;
	arm_run_timeout(c.timeout_s + 10);
	if (c.qps > 1)
		return run_qps(&c);

	if (!c.host && !c.loopback) {
		struct perf s;

		if ((rc = perf_side_init(&s, &c, 1, PROG)) < 0 ||
		    (rc = ep_listen(&s.ep, c.bind, c.port, &port, host)) < 0) {
			perf_side_free(&s);
			return fail_early(&c, rc);
		}
		if (!c.json)
			fprintf(stderr, "%s: listening on %s port %u (connect to %s)\n", PROG, c.bind,
				port, host);
		rc = perf_run_server(&s);
		perf_print_report(&s, rc);
		status = rc < 0 ? 3 : s.ok ? 0 : 1;
		perf_side_free(&s);
		return status;
	}

	port = c.port;
	if (c.loopback) {
		srv = calloc(1, sizeof(*srv));
		if (!srv)
			return 3;
		if ((rc = perf_side_init(&srv->side, &c, 1, PROG "[server]")) < 0 ||
		    (rc = ep_listen(&srv->side.ep, loopback_listen_addr(c.transport), c.port, &port,
				     host)) < 0) {
			perf_side_free(&srv->side);
			free(srv);
			return fail_early(&c, rc);
		}
		srv->side.quiet = 1;
		if (loopback_server_start(&srv->thr, PROG, loopback_serve, &srv->side, &g_stop) < 0)
			return 3;
	}
	if ((rc = perf_side_init(&cli, &c, 0, PROG)) < 0) {
		if (srv) {
			fail_early(&c, rc);
			fflush(stdout);
			_exit(perf_setup_status(rc));	/* the server thread still waits */
		}
		perf_side_free(&cli);
		return fail_early(&c, rc);
	}
	rc = perf_run_client(&cli, c.loopback ? host : c.host, port);
	if (rc < 0 && srv) {
		/* The server thread may be blocked on this run: report and leave without
		 * tearing down what it still uses. */
		perf_print_report(&cli, rc);
		fflush(stdout);
		_exit(3);
	}
	if (srv) {
		if (loopback_server_join(&srv->thr) < 0) {
			rc = srv->thr.rc;
			fprintf(stderr, "%s: the server side failed: %s\n", PROG, sv_strerror(rc));
		} else if (!srv->side.ok) {
			perf_fail_check(&cli, "server side: %s", srv->side.why);
		}
	}
	perf_print_report(&cli, rc);
	status = rc < 0 ? 3 : cli.ok ? 0 : 1;
	perf_side_free(&cli);
	if (srv) {
		perf_side_free(&srv->side);
		free(srv);
	}
	return status;
}
