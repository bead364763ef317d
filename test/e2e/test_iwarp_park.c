/*
 * test_iwarp_park.c — who reads the socket: the progress thread or a polling application.
 *
 * The TCP transport lets an application that spins on sv_poll_cq() read its socket
 * itself, and then the progress thread stops watching it ("parks", iwarp_ep_io.c). An
 * application that waits on memory instead (perftest's ib_write_lat: the last byte of the
 * buffer the peer WRITEs into) calls into the library only to post and to collect its own
 * send completions, so only the progress thread can place the peer's WRITE. These tests
 * run that pattern and check, with the QP counters rather than with timing, that the
 * bytes arrive and that the loop never left them lying in the socket for a poller that
 * was not there. Every wait has a generous deadline: a failure is a hang made visible,
 * never a latency threshold.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "e2e_util.h"

#define ROUNDS 2000
#define MSG 8u

struct bufs {
	uint64_t *cbuf, *sbuf;		/* [0] target of the peer's WRITE, [1] source */
	struct sv_mr *cmr, *smr;
};

/* One side of a ping-pong, as ib_write_lat runs it: wait on memory for message i,
 * answer with a WRITE of i, poll the send CQ for that WRITE's completion only. */
struct spinner {
	struct sv_qp *qp;
	struct sv_cq *send_cq;
	struct sv_mr *mr;
	uint64_t *buf;
	struct sv_mr *peer_mr;
	uint64_t *peer_buf;
	bool first;			/* sends first (the client) */
	const char *fail;		/* what went wrong, or NULL */
	uint64_t fail_round;
};

static bool wait_value(volatile uint64_t *p, uint64_t want, uint64_t deadline_ms)
{
	unsigned spins = 0;

	while (__atomic_load_n(p, __ATOMIC_ACQUIRE) != want) {
		if ((++spins & 1023) == 0 && e2e_now_ms() > deadline_ms)
			return false;
	}
	return true;
}

/* Posts the WRITE of round i and polls until its completion; NULL or what failed. */
static const char *write_round(struct spinner *s, uint64_t i, uint64_t deadline_ms)
{
	struct sv_send_wr wr, *bad;
	struct sv_sge sge = { (uintptr_t)&s->buf[1], MSG, s->mr->lkey };
	struct sv_wc wc;
	int n;

	s->buf[1] = i + 1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = i;
	wr.opcode = SV_WR_RDMA_WRITE;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)&s->peer_buf[0];
	wr.wr.rdma.rkey = s->peer_mr->rkey;
	if (sv_post_send(s->qp, &wr, &bad) != 0)
		return "post_send failed";
	while ((n = sv_poll_cq(s->send_cq, 1, &wc)) == 0) {
		if (e2e_now_ms() > deadline_ms)
			return "no send completion";
	}
	if (n < 0 || wc.status != SV_WC_SUCCESS || wc.wr_id != i)
		return "bad send completion";
	return NULL;
}

static void *spin_rounds(void *arg)
{
	struct spinner *s = arg;
	uint64_t deadline = e2e_now_ms() + 60000;

	for (uint64_t i = 0; i < ROUNDS && !s->fail; i++) {
		s->fail_round = i;
		if (s->first && (s->fail = write_round(s, i, deadline)))
			break;
		if (!wait_value(&s->buf[0], i + 1, deadline))
			s->fail = "the peer's WRITE never showed up in memory";
		else if (!s->first)
			s->fail = write_round(s, i, deadline);
	}
	return NULL;
}

static void open_pair(struct e2e_pair *p, struct bufs *b)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_pair_open(p, &o, NULL, NULL);
	b->cbuf = e2e_alloc(4096);
	b->sbuf = e2e_alloc(4096);
	b->cmr = e2e_reg(&p->cli, b->cbuf, 4096, E2E_ACCESS_ALL);
	b->smr = e2e_reg(&p->srv, b->sbuf, 4096, E2E_ACCESS_ALL);
}

static void close_pair(struct e2e_pair *p, struct bufs *b)
{
	cr_assert_eq(sv_dereg_mr(b->cmr), 0);
	cr_assert_eq(sv_dereg_mr(b->smr), 0);
	free(b->cbuf);
	free(b->sbuf);
	e2e_pair_close(p);
}

static struct sv_qp_stats stats(struct sv_qp *qp)
{
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(qp, &st), 0);
	return st;
}

/*
 * Both sides wait on memory, as ib_write_lat does on both ends: every WRITE must be
 * placed by the progress thread, and since no poll ever reads an FPDU the loop must
 * never park (a parked loop would leave each WRITE in the socket until its timer).
 */
Test(iwarp_park, memory_spinners_get_every_write, .timeout = 120)
{
	struct e2e_pair p;
	struct bufs b;
	struct spinner cli, srv;
	pthread_t t;
	struct sv_qp_stats cs, ss;

	open_pair(&p, &b);
	cli = (struct spinner){ .qp = p.cli.qp, .send_cq = p.cli.send_cq, .mr = b.cmr,
				.buf = b.cbuf, .peer_mr = b.smr, .peer_buf = b.sbuf, .first = true };
	srv = (struct spinner){ .qp = p.srv.qp, .send_cq = p.srv.send_cq, .mr = b.smr,
				.buf = b.sbuf, .peer_mr = b.cmr, .peer_buf = b.cbuf };
	cr_assert_eq(pthread_create(&t, NULL, spin_rounds, &srv), 0);
	spin_rounds(&cli);
	pthread_join(t, NULL);
	cr_assert_null(cli.fail, "client, round %llu: %s", (unsigned long long)cli.fail_round,
		       cli.fail);
	cr_assert_null(srv.fail, "server, round %llu: %s", (unsigned long long)srv.fail_round,
		       srv.fail);
	cr_assert_eq(b.cbuf[0], ROUNDS);
	cr_assert_eq(b.sbuf[0], ROUNDS);

	cs = stats(p.cli.qp);
	ss = stats(p.srv.qp);
	cr_assert_geq(cs.rx_packets, ROUNDS, "client FPDUs received: %llu",
		      (unsigned long long)cs.rx_packets);
	cr_assert_geq(ss.rx_packets, ROUNDS);
	cr_assert_eq(cs.rx_polled, 0, "no poll found a CQ empty, so none read the socket");
	cr_assert_eq(ss.rx_polled, 0);
	cr_assert_eq(cs.rx_parks, 0, "the client's loop parked %llu times",
		     (unsigned long long)cs.rx_parks);
	cr_assert_eq(ss.rx_parks, 0, "the server's loop parked %llu times",
		     (unsigned long long)ss.rx_parks);
	cr_assert_eq(cs.rx_park_stalls + ss.rx_park_stalls, 0);
	close_pair(&p, &b);
}

/* The server of the hand-back test: busy-polls its receive CQ for n SENDs, checks each
 * and reposts its slot for SEND i + 32. */
struct receiver {
	struct sv_qp *qp;
	struct sv_cq *cq;
	struct sv_mr *mr;
	uint64_t *buf;			/* 32 receive slots */
	int n;
	int taken;			/* receive completions handled (and reposted) */
	const char *fail;
};

static void *receive_spinning(void *arg)
{
	struct receiver *r = arg;
	uint64_t deadline = e2e_now_ms() + 60000;
	struct sv_wc wc;

	for (int i = 0; i < r->n && !r->fail; i++) {
		int n;

		/* No pause between empty polls (unlike e2e_poll): a spinning application. */
		while ((n = sv_poll_cq(r->cq, 1, &wc)) == 0 && e2e_now_ms() < deadline)
			;
		if (n != 1 || wc.status != SV_WC_SUCCESS || wc.wr_id != (uint64_t)i)
			r->fail = "no good receive completion";
		else if (r->buf[i % 32] != (uint64_t)i)
			r->fail = "SEND payload differs";
		else if (i + 32 < r->n)
			e2e_post_recv(r->qp, (uint64_t)(i + 32), r->mr, &r->buf[i % 32], MSG);
		__atomic_store_n(&r->taken, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * The hand-back: the server first busy-polls its receive CQ for SENDs (it reads them
 * itself, which parks its loop), then stops calling into the library and waits on memory
 * for a WRITE. The loop has to take the socket back on its own; a loop that stayed
 * parked would never place the WRITE.
 */
Test(iwarp_park, loop_takes_over_when_polling_stops, .timeout = 120)
{
	enum { SENDS = 1024 };
	struct e2e_pair p;
	struct bufs b;
	struct sv_wc wc;
	struct sv_qp_stats ss;
	struct receiver r;
	pthread_t t;

	open_pair(&p, &b);
	r = (struct receiver){ .qp = p.srv.qp, .cq = p.srv.recv_cq, .mr = b.smr,
			       .buf = &b.sbuf[8], .n = SENDS };
	for (int i = 0; i < 32; i++)
		e2e_post_recv(p.srv.qp, (uint64_t)i, b.smr, &b.sbuf[8 + i], MSG);
	cr_assert_eq(pthread_create(&t, NULL, receive_spinning, &r), 0);
	for (int i = 0; i < SENDS && !r.fail; i++) {
		uint64_t until = e2e_now_ms() + 1;

		/* One SEND per millisecond: the server keeps polling an empty CQ in between,
		 * as a latency-bound application does. And never more SENDs than the server
		 * has receives posted: on a loaded machine its thread can be off the CPU for
		 * longer than 32 SENDs take, and iWARP has no RNR retry. */
		while (e2e_now_ms() < until ||
		       (i >= __atomic_load_n(&r.taken, __ATOMIC_ACQUIRE) + 32 && !r.fail &&
			e2e_now_ms() < until + 60000))
			;
		b.cbuf[8 + i % 32] = (uint64_t)i;
		e2e_post_one(p.cli.qp, (uint64_t)i, SV_WR_SEND, b.cmr, &b.cbuf[8 + i % 32], MSG,
			     SV_SEND_SIGNALED, 0, 0, 0);
		e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
		e2e_assert_wc(&wc, (uint64_t)i, SV_WC_SUCCESS, "SEND");
	}
	pthread_join(t, NULL);
	cr_assert_null(r.fail, "server: %s", r.fail);
	ss = stats(p.srv.qp);
	cr_assert_gt(ss.rx_polled, 0, "the polling server read none of the SENDs itself");
	cr_log_info("server: %llu FPDUs read by polling, loop parked %llu times",
		    (unsigned long long)ss.rx_polled, (unsigned long long)ss.rx_parks);

	/* The server now only watches memory. */
	b.cbuf[1] = 0x5eedf00dull;
	e2e_post_one(p.cli.qp, 1000, SV_WR_RDMA_WRITE, b.cmr, &b.cbuf[1], MSG, SV_SEND_SIGNALED,
		     (uintptr_t)&b.sbuf[0], b.smr->rkey, 0);
	cr_assert(wait_value(&b.sbuf[0], 0x5eedf00dull, e2e_now_ms() + 20000),
		  "the WRITE was never placed while the server waited on memory");
	e2e_poll_n(p.cli.send_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 1000, SV_WC_SUCCESS, "WRITE");
	close_pair(&p, &b);
}
