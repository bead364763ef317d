/*
 * test_e2e_stress.c — the data path under load: long chains of small messages, both
 * directions at once on one connection (READ responses interleaved with requests, 4 MiB
 * each way, far beyond the socket buffers), and several application threads posting and
 * polling on one QP (the API promises that every call may be made from any thread).
 *
 * Each test stays within a few seconds on two cores.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "e2e_util.h"

#define MiB (1u << 20)

/* Reaps up to max signaled SEND completions within ms: the k-th signaled WR overall is
 * wr_id 10k+9 and must succeed. Returns how many were reaped. */
static int reap_signaled(struct sv_cq *cq, int done, int max, int ms)
{
	struct sv_wc wc[64];
	int n = e2e_poll(cq, wc, max < 64 ? max : 64, ms);

	for (int k = 0; k < n; k++)
		e2e_assert_wc(&wc[k], (uint64_t)(done + k) * 10 + 9, SV_WC_SUCCESS,
			      "signaled SEND, in order");
	return n;
}

/* 2000 SENDs of 1..97 bytes posted as chains of 50, unsignaled but every tenth: all
 * arrive in order with the right lengths and bytes. */
Test(e2e_stress, two_thousand_small_sends_in_chains, .timeout = 60)
{
	enum { N = 2000, CHAIN = 50, SLOT = 128 };
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct e2e_bufs b;
	struct sv_sge sge[CHAIN];
	struct sv_send_wr wr[CHAIN], *bad;
	struct sv_wc wc[CHAIN];
	int got_send = 0, got_recv = 0;

	e2e_pair_opts_init(&o);
	o.max_send_wr = 256;
	o.max_recv_wr = N;
	o.cqe = 4096;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, N * SLOT, E2E_ACCESS_ALL);
	for (int i = 0; i < N; i++)
		e2e_post_recv(p.srv.qp, (uint64_t)i, b.smr, b.sbuf + i * SLOT, SLOT);
	for (int base = 0; base < N; base += CHAIN) {
		for (int k = 0; k < CHAIN; k++) {
			int i = base + k;
			uint32_t len = 1 + (uint32_t)(i % 97);

			e2e_fill(b.cbuf + i * SLOT, len, (unsigned)i, 0);
			sge[k].addr = (uintptr_t)b.cbuf + (uint64_t)i * SLOT;
			sge[k].length = len;
			sge[k].lkey = b.cmr->lkey;
			e2e_wr(&wr[k], (uint64_t)i, SV_WR_SEND, &sge[k], 1,
			       i % 10 == 9 ? SV_SEND_SIGNALED : 0);
			wr[k].next = k + 1 < CHAIN ? &wr[k + 1] : NULL;
		}
		bad = NULL;
		cr_assert_eq(sv_post_send(p.cli.qp, wr, &bad), 0, "chain at %d", base);
		/* Unsignaled WRs hold their send-queue slots until a later signaled one is
		 * reaped (doc/verbs.md 3): keep at most 200 of the 256 outstanding. */
		got_send += reap_signaled(p.cli.send_cq, got_send, N / 10 - got_send, 0);
		while (base + CHAIN - got_send * 10 > 150) {
			/* Waits for the completions that bring it back to 150, not for more:
			 * those may not be due yet (a UDP responder coalesces its ACKs). */
			int need = (base + CHAIN - 150 + 9) / 10 - got_send;
			int n = reap_signaled(p.cli.send_cq, got_send, need, E2E_WAIT_MS);

			cr_assert_gt(n, 0, "no SEND completed (%d outstanding)",
				     base + CHAIN - got_send * 10);
			got_send += n;
		}
	}
	while (got_send < N / 10) {
		int n = reap_signaled(p.cli.send_cq, got_send, N / 10 - got_send, E2E_WAIT_MS);

		cr_assert_gt(n, 0, "%d of %d signaled SENDs completed", got_send, N / 10);
		got_send += n;
	}
	e2e_expect_no_wc(p.cli.send_cq, 20);
	while (got_recv < N) {
		int n = e2e_poll(p.srv.recv_cq, wc, CHAIN, E2E_WAIT_MS);

		cr_assert_gt(n, 0, "%d of %d receives", got_recv, N);
		for (int k = 0; k < n; k++) {
			int i = got_recv + k;

			e2e_assert_wc(&wc[k], (uint64_t)i, SV_WC_SUCCESS, "receive in order");
			cr_assert_eq(wc[k].byte_len, 1 + (uint32_t)(i % 97), "length of SEND %d", i);
			e2e_assert_pat(b.sbuf + i * SLOT, wc[k].byte_len, (unsigned)i, 0,
				       "small SEND data");
		}
		got_recv += n;
	}
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}

/* Both ends WRITE to and READ from each other at the same time on one connection:
 * each side's READ responses share the stream with its own requests. */
struct duplex_side {
	struct e2e_side *me;
	uint8_t *mine;		/* my buffer: [0, 4M) source for the peer's READs,
				 * [4M, 8M) target of the peer's WRITEs, [8M, 12M) my READ sink */
	struct sv_mr *mr;
	uint8_t *peer_buf;
	uint32_t peer_rkey;
	unsigned seed;
	int failures;
};

static void *duplex_run(void *arg)
{
	struct duplex_side *d = arg;
	const uint32_t chunk = 256 * 1024;
	struct sv_wc wc[32];
	int posted = 0, done = 0;

	/* 16 WRITEs then 16 READs of 256 KiB each, interleaved */
	for (int i = 0; i < 16; i++) {
		struct sv_sge ws = { .addr = (uintptr_t)d->mine + (uint64_t)i * chunk,
				     .length = chunk, .lkey = d->mr->lkey };
		struct sv_sge rs = { .addr = (uintptr_t)d->mine + 8 * MiB + (uint64_t)i * chunk,
				     .length = chunk, .lkey = d->mr->lkey };
		struct sv_send_wr w, r, *bad;

		memset(&w, 0, sizeof(w));
		w.wr_id = (uint64_t)(2 * i);
		w.opcode = SV_WR_RDMA_WRITE;
		w.sg_list = &ws;
		w.num_sge = 1;
		w.send_flags = SV_SEND_SIGNALED;
		w.wr.rdma.remote_addr = (uintptr_t)d->peer_buf + 4 * MiB + (uint64_t)i * chunk;
		w.wr.rdma.rkey = d->peer_rkey;
		r = w;
		r.wr_id = (uint64_t)(2 * i + 1);
		r.opcode = SV_WR_RDMA_READ;
		r.sg_list = &rs;
		r.wr.rdma.remote_addr = (uintptr_t)d->peer_buf + (uint64_t)i * chunk;
		w.next = &r;
		if (sv_post_send(d->me->qp, &w, &bad) != 0) {
			d->failures++;
			return NULL;
		}
		posted += 2;
	}
	{
		uint64_t deadline = e2e_now_ms() + 20000;

		while (done < posted && e2e_now_ms() < deadline) {
			int n = sv_poll_cq(d->me->send_cq, 32, wc);

			if (n < 0) {
				d->failures++;
				return NULL;
			}
			for (int k = 0; k < n; k++)
				if (wc[k].status != SV_WC_SUCCESS || wc[k].wr_id != (uint64_t)(done + k))
					d->failures++;
			done += n;
		}
	}
	if (done != posted)
		d->failures++;
	return NULL;
}

Test(e2e_stress, full_duplex_writes_and_reads, .timeout = 60)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct duplex_side a, b;
	pthread_t ta, tb;

	e2e_pair_opts_init(&o);
	o.max_send_wr = 64;
	e2e_pair_open(&p, &o, NULL, NULL);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.me = &p.cli;
	b.me = &p.srv;
	a.mine = e2e_alloc(12 * MiB);
	b.mine = e2e_alloc(12 * MiB);
	a.mr = e2e_reg(&p.cli, a.mine, 12 * MiB, E2E_ACCESS_ALL);
	b.mr = e2e_reg(&p.srv, b.mine, 12 * MiB, E2E_ACCESS_ALL);
	e2e_fill(a.mine, 4 * MiB, 11, 0);
	e2e_fill(b.mine, 4 * MiB, 12, 0);
	a.peer_buf = b.mine;
	a.peer_rkey = b.mr->rkey;
	b.peer_buf = a.mine;
	b.peer_rkey = a.mr->rkey;
	cr_assert_eq(pthread_create(&ta, NULL, duplex_run, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, duplex_run, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_assert_eq(a.failures, 0, "client side: %d failed or missing completions", a.failures);
	cr_assert_eq(b.failures, 0, "server side: %d failed or missing completions", b.failures);
	/* each side READ the other's source and received the other's WRITEs */
	e2e_assert_pat(a.mine + 8 * MiB, 4 * MiB, 12, 0, "client READ of the server");
	e2e_assert_pat(b.mine + 8 * MiB, 4 * MiB, 11, 0, "server READ of the client");
	e2e_assert_pat(a.mine + 4 * MiB, 4 * MiB, 12, 0, "server WRITEs at the client");
	e2e_assert_pat(b.mine + 4 * MiB, 4 * MiB, 11, 0, "client WRITEs at the server");
	cr_assert_eq(sv_dereg_mr(a.mr), 0);
	cr_assert_eq(sv_dereg_mr(b.mr), 0);
	e2e_pair_close(&p);
	free(a.mine);
	free(b.mine);
}

/* Four threads post SENDs on the same QP at once while a fifth polls the CQs: every
 * message arrives once, intact, and each thread's messages keep their order. */
struct poster {
	struct sv_qp *qp;
	struct sv_mr *mr;
	uint8_t *buf;
	int id;
	int failures;
};

#define THREADS 4
#define PER_THREAD 200
#define MSG 64

static void *poster_run(void *arg)
{
	struct poster *t = arg;

	for (int i = 0; i < PER_THREAD; i++) {
		uint8_t *slot = t->buf + (size_t)(t->id * PER_THREAD + i) * MSG;
		struct sv_sge sge = { .addr = (uintptr_t)slot, .length = MSG, .lkey = t->mr->lkey };
		struct sv_send_wr wr, *bad;
		int rc;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)t->id << 32 | (uint64_t)i;
		wr.opcode = SV_WR_SEND;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = SV_SEND_SIGNALED;
		/* the first 4 bytes say who sent it and its sequence number */
		slot[0] = (uint8_t)t->id;
		slot[1] = (uint8_t)(i >> 8);
		slot[2] = (uint8_t)i;
		e2e_fill(slot + 3, MSG - 3, (unsigned)(t->id * PER_THREAD + i), 0);
		while ((rc = sv_post_send(t->qp, &wr, &bad)) == -ENOMEM)
			sched_yield();	/* queue full: the polling thread frees slots */
		if (rc != 0)
			t->failures++;
	}
	return NULL;
}

Test(e2e_stress, concurrent_posters_on_one_qp, .timeout = 60)
{
	struct e2e_pair_opts o;
	struct e2e_pair p;
	struct poster t[THREADS];
	pthread_t tid[THREADS];
	struct e2e_bufs b;
	struct sv_wc wc[64];
	int next_seq[THREADS] = { 0 }, next_sent[THREADS] = { 0 };
	int sends = 0, recvs = 0;
	uint64_t deadline;

	e2e_pair_opts_init(&o);
	o.max_send_wr = 64;
	o.max_recv_wr = THREADS * PER_THREAD;
	o.cqe = 1024;
	e2e_pair_open(&p, &o, NULL, NULL);
	e2e_bufs_open(&p, &b, THREADS * PER_THREAD * MSG, E2E_ACCESS_ALL);
	for (int i = 0; i < THREADS * PER_THREAD; i++)
		e2e_post_recv(p.srv.qp, (uint64_t)i, b.smr, b.sbuf + i * MSG, MSG);
	for (int k = 0; k < THREADS; k++) {
		t[k] = (struct poster){ .qp = p.cli.qp, .mr = b.cmr, .buf = b.cbuf, .id = k };
		cr_assert_eq(pthread_create(&tid[k], NULL, poster_run, &t[k]), 0);
	}
	deadline = e2e_now_ms() + 30000;
	while ((sends < THREADS * PER_THREAD || recvs < THREADS * PER_THREAD) &&
	       e2e_now_ms() < deadline) {
		int n = sv_poll_cq(p.cli.send_cq, 64, wc);

		cr_assert_geq(n, 0);
		for (int k = 0; k < n; k++) {
			int who = (int)(wc[k].wr_id >> 32);

			cr_assert(who < THREADS, "completion wr_id %llx",
				  (unsigned long long)wc[k].wr_id);
			/* one send queue: each thread's WRs complete in its posting order */
			e2e_assert_wc(&wc[k], (uint64_t)who << 32 | (uint64_t)next_sent[who],
				      SV_WC_SUCCESS, "concurrent SEND");
			next_sent[who]++;
		}
		sends += n;
		n = sv_poll_cq(p.srv.recv_cq, 64, wc);
		cr_assert_geq(n, 0);
		for (int k = 0; k < n; k++) {
			const uint8_t *m = b.sbuf + wc[k].wr_id * MSG;
			int who = m[0], seq = m[1] << 8 | m[2];

			e2e_assert_wc(&wc[k], (uint64_t)recvs + (uint64_t)k, SV_WC_SUCCESS,
				      "receive");
			cr_assert_eq(wc[k].byte_len, MSG);
			cr_assert(who < THREADS, "message from thread %d", who);
			cr_assert_eq(seq, next_seq[who], "thread %d: message %d arrived, expected %d",
				     who, seq, next_seq[who]);
			next_seq[who]++;
			e2e_assert_pat(m + 3, MSG - 3, (unsigned)(who * PER_THREAD + seq), 0,
				       "concurrent SEND payload");
		}
		recvs += n;
	}
	for (int k = 0; k < THREADS; k++) {
		pthread_join(tid[k], NULL);
		cr_assert_eq(t[k].failures, 0, "thread %d: %d posts failed", k, t[k].failures);
	}
	cr_assert_eq(sends, THREADS * PER_THREAD, "send completions: %d", sends);
	cr_assert_eq(recvs, THREADS * PER_THREAD, "receives: %d", recvs);
	e2e_bufs_close(&b);
	e2e_pair_close(&p);
}
