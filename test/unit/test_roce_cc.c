/*
 * test_roce_cc.c — the UDP requester's congestion controller (wire/roce_cc.c,
 * doc/congestion.md) on simulated time: the pacing rate and its credit, the window's
 * growth to the bandwidth-delay product of an emulated bottleneck, two flows sharing
 * one, random loss that leaves the window alone, and the cuts of a congestion episode
 * (a delay rise, loss at a full queue).
 *
 * The bottleneck is the one SV_IMPAIR emulates (wire/impair.h): a link of a given packet
 * rate behind a drop-tail queue, then a fixed one-way delay; ACKs come back after the
 * same delay. Random loss takes packets before the queue. The sender learns of a loss
 * a round trip after it, as a selective-repeat SACK would tell it.
 *
 * Also the ring of send stamps, which grows with the span in flight (and stays as it is
 * when the memory for a larger one cannot be had: test/alloc_fail.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "test/alloc_fail.h"
#include "wire/roce_cc.h"

#define MS 1000000ull
#define STEP_NS 50000ull		/* the simulation's clock tick */
#define MAXF 2
#define RING (1u << 16)

struct ev {				/* an ACK (or a loss notice) due at t */
	uint64_t t;
	uint32_t psn;
	uint8_t flow;
	bool lost;
};

struct sim {
	/* The path: link rate (packets per second), queue, one-way delay, random loss. */
	double pps;
	uint32_t queue_cap;
	uint64_t owd_ns;
	double loss;
	uint64_t rng;
	/* The link's queue of (flow, psn) and the link's fractional credit. */
	struct ev q[RING];
	uint32_t q_head, q_n;
	double link_credit;
	/* ACKs and loss notices on their way back, in time order (constant delay). */
	struct ev back[RING];
	uint32_t b_head, b_n;
	/* Flows. */
	int nflows;
	struct sv__cc cc[MAXF];
	uint64_t start_ns[MAXF];
	uint32_t nxt[MAXF], inflight[MAXF];
	uint64_t delivered[MAXF];	/* packets through the link, counted from count_ns */
	uint64_t count_ns;
	uint64_t queue_drops, random_drops;
	uint32_t queue_peak;
};

static double uniform(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

static struct sim *sim_new(double mbit, uint32_t queue, uint64_t owd_ns, double loss, int nflows)
{
	struct sim *s = calloc(1, sizeof(*s));

	cr_assert(s);
	s->pps = mbit * 1e6 / 8 / 4096;	/* 4096-byte packets */
	s->queue_cap = queue;
	s->owd_ns = owd_ns;
	s->loss = loss;
	s->rng = 7;
	s->nflows = nflows;
	for (int f = 0; f < nflows; f++)
		sv__cc_init(&s->cc[f], 32000);
	return s;
}

static void sim_free(struct sim *s)
{
	for (int f = 0; f < s->nflows; f++)
		sv__cc_fini(&s->cc[f]);
	free(s);
}

static void back_push(struct sim *s, struct ev e)
{
	cr_assert_lt(s->b_n, RING);
	s->back[(s->b_head + s->b_n++) % RING] = e;
}

/* One tick: the senders send what window and pacing allow, the link serves its rate, the
 * ACKs and loss notices that are due reach their senders. */
static void sim_step(struct sim *s, uint64_t now)
{
	for (int f = 0; f < s->nflows; f++) {
		struct sv__cc *c = &s->cc[f];

		if (now < s->start_ns[f])
			continue;
		while (s->inflight[f] < sv__cc_cwnd(c) && sv__cc_pace_ok(c, now, NULL)) {
			struct ev e = { .psn = s->nxt[f]++, .flow = (uint8_t)f };

			sv__cc_span(c, s->inflight[f] + 1);
			sv__cc_sent(c, e.psn, false, now);
			s->inflight[f]++;
			if (uniform(&s->rng) < s->loss) {
				s->random_drops++;
				e.lost = true;
				e.t = now + 2 * s->owd_ns;
				back_push(s, e);
			} else if (s->q_n >= s->queue_cap) {
				s->queue_drops++;
				e.lost = true;
				e.t = now + 2 * s->owd_ns;
				back_push(s, e);
			} else {
				s->q[(s->q_head + s->q_n++) % RING] = e;
				if (s->q_n > s->queue_peak)
					s->queue_peak = s->q_n;
			}
		}
	}
	s->link_credit += s->pps * (double)STEP_NS / 1e9;
	while (s->link_credit >= 1.0 && s->q_n) {
		struct ev e = s->q[s->q_head];

		s->q_head = (s->q_head + 1) % RING;
		s->q_n--;
		s->link_credit -= 1.0;
		if (now >= s->count_ns)
			s->delivered[e.flow]++;
		e.t = now + 2 * s->owd_ns;
		back_push(s, e);
	}
	if (!s->q_n && s->link_credit > 1.0)
		s->link_credit = 1.0;	/* an idle link saves nothing up */
	while (s->b_n && s->back[s->b_head].t <= now) {
		struct ev e = s->back[s->b_head];
		struct sv__cc *c = &s->cc[e.flow];

		s->b_head = (s->b_head + 1) % RING;
		s->b_n--;
		s->inflight[e.flow]--;
		if (e.lost)
			sv__cc_on_loss(c, false, 1, now);
		else
			sv__cc_on_ack(c, 1, sv__cc_sample(c, e.psn, true, now), now);
	}
}

static void sim_run(struct sim *s, uint64_t from, uint64_t to)
{
	for (uint64_t t = from; t < to; t += STEP_NS)
		sim_step(s, t);
}

/* The link's share flow f had between count_ns and end_ns. */
static double share(const struct sim *s, int f, uint64_t end_ns)
{
	return (double)s->delivered[f] / (s->pps * (double)(end_ns - s->count_ns) / 1e9);
}

Test(roce_cc, pacing_rate_and_credit)
{
	struct sv__cc c;
	uint64_t now = 100 * MS, next = 0;
	unsigned burst = 0;

	sv__cc_init(&c, 32000);
	cr_assert_eq(sv__cc_cwnd(&c), SV__CC_INIT);
	cr_assert(sv__cc_pace_ok(&c, now, NULL), "no RTT yet: not pacing");
	cr_assert_eq(sv__cc_rate_pps(&c), 0);
	sv__cc_sent(&c, 0, false, now);
	cr_assert_eq(sv__cc_sample(&c, 0, true, now + 20 * MS), 20 * MS);
	cr_assert_eq(sv__cc_sample(&c, 0, true, now + 21 * MS), 0, "a stamp gives one sample");
	now += 20 * MS;
	sv__cc_on_ack(&c, 0, 20 * MS, now);
	cr_assert_eq(c.srtt_ns, 20 * MS);
	/* STARTUP paces at twice window / RTT: 2 * 32 / 20 ms = 3200 packets/s. */
	cr_assert_float_eq(sv__cc_rate_pps(&c), 3200.0, 1e-6);
	/* The credit holds 2 ms of the rate, at least 16 packets: 16 go at once. */
	c.credit = 16;
	c.credit_ns = now;
	while (sv__cc_pace_ok(&c, now, &next)) {
		sv__cc_sent(&c, 1 + burst, false, now);
		burst++;
	}
	cr_assert_eq(burst, 16);
	/* The next one when a packet's worth of credit has come: 1 / 3200 s. */
	cr_assert_geq(next, now + 312000);
	cr_assert_leq(next, now + 313000);
	cr_assert_not(sv__cc_pace_ok(&c, next - 2000, NULL));
	cr_assert(sv__cc_pace_ok(&c, next, NULL));
	/* A resent PSN on the stamp grid loses its stamp (Karn's rule). */
	sv__cc_sent(&c, 32, false, now);
	sv__cc_sent(&c, 32, true, now + MS);
	cr_assert_eq(sv__cc_sample(&c, 32, true, now + 30 * MS), 0);
	sv__cc_fini(&c);
}

Test(roce_cc, grows_to_the_bdp_of_a_bottleneck)
{
	/* 1 Gbit/s, 10 ms each way: 610 packets in flight fill it; its queue holds 1000. */
	struct sim *s = sim_new(1000, 1000, 10 * MS, 0, 1);
	double bdp = s->pps * 0.020;

	s->count_ns = 2000 * MS;
	sim_run(s, 0, 6000 * MS);
	cr_assert_geq(share(s, 0, 6000 * MS), 0.95, "the link is %.3f busy",
		      share(s, 0, 6000 * MS));
	cr_assert_geq(s->cc[0].cwnd_peak, (uint32_t)bdp, "the window passed the BDP (%u)",
		      s->cc[0].cwnd_peak);
	cr_assert_gt(s->cc[0].cwnd_peak, 256, "no fixed 256-packet cap");
	cr_assert_eq(s->queue_drops, 0, "delay held the queue below overflow (peak %u)",
		     s->queue_peak);
	/* The queue the controller keeps: at most its target's worth (half the base RTT). */
	cr_assert_leq(s->cc[0].srtt_ns, 20 * MS + 10 * MS + 3 * MS, "srtt %llu",
		      (unsigned long long)s->cc[0].srtt_ns);
	cr_assert_eq(s->cc[0].phase, SV__CC_AVOID);
	cr_assert_geq(s->cc[0].nstamps * SV__CC_STAMP_EVERY, s->cc[0].cwnd_peak,
		      "the stamps cover the window (%u slots)", s->cc[0].nstamps);
	sim_free(s);
}

Test(roce_cc, grows_to_tens_of_thousands_of_packets_on_a_long_fat_path)
{
	/* 10 Gbit/s, 50 ms each way: a BDP of 30518 packets. */
	struct sim *s = sim_new(10000, 20000, 50 * MS, 0, 1);

	s->count_ns = 4000 * MS;
	sim_run(s, 0, 8000 * MS);
	cr_assert_geq(s->cc[0].cwnd_peak, 30000, "peak %u", s->cc[0].cwnd_peak);
	cr_assert_eq(s->cc[0].nstamps, SV__CC_STAMPS, "the whole ring");
	cr_assert_eq(s->cc[0].alloc_fails, 0);
	cr_assert_geq(share(s, 0, 8000 * MS), 0.9, "share %.3f", share(s, 0, 8000 * MS));
	sim_free(s);
}

Test(roce_cc, two_flows_that_start_together_share_a_bottleneck)
{
	/* 100 ms apart, as two QPs of one process connect. */
	struct sim *s = sim_new(1000, 1000, 10 * MS, 0, 2);
	double a, b;

	s->start_ns[1] = 100 * MS;
	s->count_ns = 2000 * MS;
	sim_run(s, 0, 5000 * MS);
	a = share(s, 0, 5000 * MS);
	b = share(s, 1, 5000 * MS);
	cr_assert_geq(a + b, 0.95, "together %.3f of the link", a + b);
	cr_assert_leq(a > b ? a / b : b / a, 1.2, "shares %.3f and %.3f", a, b);
	sim_free(s);
}

Test(roce_cc, two_flows_share_a_bottleneck)
{
	/* The second flow starts 1 s after the first has filled the link. */
	struct sim *s = sim_new(1000, 1000, 10 * MS, 0, 2);
	double a, b;

	s->start_ns[1] = 1000 * MS;
	s->count_ns = 6000 * MS;
	sim_run(s, 0, 10000 * MS);
	a = share(s, 0, 10000 * MS);
	b = share(s, 1, 10000 * MS);
	cr_assert_geq(a + b, 0.95, "together %.3f of the link", a + b);
	cr_assert_leq(a > b ? a / b : b / a, 1.2, "shares %.3f and %.3f", a, b);
	sim_free(s);
}

Test(roce_cc, random_loss_does_not_collapse_the_window)
{
	/* 1 % of packets lost at random before the queue: not congestion. */
	struct sim *s = sim_new(1000, 1000, 10 * MS, 0.01, 1);

	s->count_ns = 2000 * MS;
	sim_run(s, 0, 6000 * MS);
	cr_assert_gt(s->random_drops, 500);
	cr_assert_eq(s->cc[0].loss_cuts, 0, "no cut for random loss");
	cr_assert_geq(sv__cc_cwnd(&s->cc[0]), (uint32_t)(s->pps * 0.020));
	/* Goodput: what passed the link, which the losses never reached, at 0.8 or more of
	 * its rate. */
	cr_assert_geq(share(s, 0, 6000 * MS), 0.9, "share %.3f", share(s, 0, 6000 * MS));
	sim_free(s);
}

Test(roce_cc, a_congestion_episode_cuts_the_window)
{
	struct sv__cc c;
	uint64_t now = 0;
	uint32_t w;

	sv__cc_init(&c, 32000);
	/* A base of 20 ms, then the window grows on clean RTTs. */
	for (int i = 0; i < 50; i++, now += MS)
		sv__cc_on_ack(&c, 8, 20 * MS, now);
	cr_assert_eq(c.base_ns, 20 * MS);
	cr_assert_eq(sv__cc_target_ns(&c), 30 * MS, "the base plus half of it");
	w = sv__cc_cwnd(&c);
	cr_assert_gt(w, SV__CC_INIT);
	cr_assert_not(sv__cc_on_loss(&c, false, 1, now), "SR loss at the base delay: no cut");
	cr_assert_eq(sv__cc_cwnd(&c), w);
	/* The queue grows: RTT 40 ms, above the 30 ms target. The signal is the least
	 * sample of half a round trip, so it follows within a round trip. */
	for (int i = 0; i < 100 && !c.delay_cuts; i++, now += MS)
		sv__cc_on_ack(&c, 1, 40 * MS, now);
	cr_assert_eq(c.rtt_ns, 40 * MS);
	cr_assert_eq(c.delay_cuts, 1);
	cr_assert_lt(sv__cc_cwnd(&c), w, "a delay above the target cuts");
	cr_assert_eq(c.phase, SV__CC_AVOID);
	/* The proportional decrease, 1 - 1.6 * (40 - 30) / 40 (from the window plus what
	 * STARTUP's last ACK added), at most once per round trip. */
	cr_assert_float_eq(c.cwnd, (w + 3.0) * 0.6, 4.0, "%f from %u", c.cwnd, w);
	for (int i = 0; i < 20; i++, now += MS)
		sv__cc_on_ack(&c, 1, 40 * MS, now);
	cr_assert_eq(c.delay_cuts, 1, "one cut per round trip");
	/* Loss with the queue past one and a half allowances (35 ms) is congestion. */
	now += 30 * MS;
	for (int i = 0; i < 20; i++, now += MS)
		sv__cc_on_ack(&c, 0, 45 * MS, now);
	cr_assert(sv__cc_congested(&c));
	w = sv__cc_cwnd(&c);
	now += 60 * MS;
	cr_assert(sv__cc_on_loss(&c, false, 1, now));
	cr_assert_eq(sv__cc_cwnd(&c), w / 2, "%u -> %u", w, sv__cc_cwnd(&c));
	cr_assert_not(sv__cc_on_loss(&c, false, 1, now + MS), "one cut per round trip");
	/* Go-back-N halves on any loss; a timeout falls to the minimum. */
	w = sv__cc_cwnd(&c);
	cr_assert(sv__cc_on_loss(&c, true, 1, now + 100 * MS));
	cr_assert_eq(sv__cc_cwnd(&c), w / 2 < SV__CC_MIN ? SV__CC_MIN : w / 2);
	sv__cc_on_timeout(&c, now + 200 * MS);
	cr_assert_eq(sv__cc_cwnd(&c), SV__CC_MIN);
	cr_assert_eq(c.timeouts, 1);
	sv__cc_fini(&c);
}

Test(roce_cc, a_full_drop_tail_queue_is_congestion)
{
	/* A shallow queue (50 packets, 1.6 ms at 1 Gbit/s) overflows before the delay
	 * passes the target: the losses there must cut, and the link stays busy. */
	struct sim *s = sim_new(1000, 50, 10 * MS, 0, 1);

	s->count_ns = 2000 * MS;
	sim_run(s, 0, 6000 * MS);
	cr_assert_gt(s->queue_drops, 0);
	cr_assert_gt(s->cc[0].loss_cuts, 0, "losses at the full queue cut");
	cr_assert_lt(sv__cc_cwnd(&s->cc[0]), 2000, "the window stays near the BDP (%u)",
		     sv__cc_cwnd(&s->cc[0]));
	/* A sawtooth at the queue's edge loses some of each tooth: under a tenth. */
	cr_assert_lt(s->queue_drops, s->delivered[0] / 10, "drops %llu",
		     (unsigned long long)s->queue_drops);
	cr_assert_geq(share(s, 0, 6000 * MS), 0.7, "share %.3f", share(s, 0, 6000 * MS));
	sim_free(s);
}

Test(roce_cc, the_stamp_ring_grows_with_the_span_in_flight)
{
	uint64_t now = 100 * MS;
	struct sv__cc c;

	sv__cc_init(&c, 32000);
	/* 256 PSNs in flight: the ring held in the controller, nothing allocated. */
	for (uint32_t p = 16; p < 256; p += 16)
		sv__cc_sent(&c, p, false, now);
	sv__cc_span(&c, 256);
	sv__cc_sent(&c, 0, false, now);
	cr_assert_eq(c.nstamps, SV__CC_STAMPS_MIN);
	cr_assert_null(c.stamp_mem);
	/* The span widens past the ring's 256 PSNs (selective repeat sending beyond
	 * SACKed packets): the next stamp moves the ring to one that covers it (2033
	 * PSNs: 128 slots), the stamps already there with it. */
	sv__cc_span(&c, 2033);
	sv__cc_sent(&c, 272, false, now + 2 * MS);	/* slot 1 of 16, slot 17 of 128 */
	cr_assert_eq(c.nstamps, 128);
	cr_assert_not_null(c.stamp_mem);
	cr_assert_eq(sv__cc_sample(&c, 16, true, now + 3 * MS), 3 * MS, "moved with the ring");
	cr_assert_eq(sv__cc_sample(&c, 240, true, now + 3 * MS), 3 * MS);
	cr_assert_eq(sv__cc_sample(&c, 272, true, now + 3 * MS), MS);
	cr_assert_eq(sv__cc_sample(&c, 272, true, now + 3 * MS), 0, "a sample is taken once");
	/* Up to the cap: selective repeat's 32000 PSNs in 2048 slots, and no further. */
	sv__cc_span(&c, 40000);
	sv__cc_sent(&c, 4096, false, now + 4 * MS);
	cr_assert_eq(c.nstamps, SV__CC_STAMPS);
	sv__cc_sent(&c, 4096 + 32768, false, now + 5 * MS);	/* the same slot */
	cr_assert_eq(sv__cc_sample(&c, 4096, true, now + 6 * MS), 0, "overwritten");
	cr_assert_eq(sv__cc_sample(&c, 4096 + 32768, true, now + 6 * MS), MS);
	cr_assert_eq(c.alloc_fails, 0);
	sv__cc_fini(&c);
	cr_assert_null(c.stamp_mem);
}

Test(roce_cc, a_stamp_ring_that_cannot_be_allocated_leaves_the_small_one)
{
	uint64_t now = 100 * MS;
	struct sv__cc c;

	sv__cc_init(&c, 32000);
	sv__cc_sent(&c, 16, false, now);
	sv__cc_span(&c, 2033);
	alloc_fail_calls = -1;
	sv__cc_sent(&c, 272, false, now + 2 * MS);
	cr_assert_eq(c.alloc_fails, 1, "counted");
	cr_assert_eq(alloc_fail_count, 1);
	cr_assert_eq(c.nstamps, SV__CC_STAMPS_MIN, "the small ring still in use");
	cr_assert_eq(sv__cc_sample(&c, 16, true, now + 3 * MS), 0, "272 took its slot");
	cr_assert_eq(sv__cc_sample(&c, 272, true, now + 3 * MS), MS, "samples go on");
	/* Not asked for again at every stamp: only once the span outgrows that size. */
	for (uint32_t p = 288; p < 1024; p += 16)
		sv__cc_sent(&c, p, false, now + 3 * MS);
	cr_assert_eq(alloc_fail_count, 1);
	alloc_fail_calls = 0;
	sv__cc_span(&c, 6034);
	sv__cc_sent(&c, 1024, false, now + 5 * MS);
	cr_assert_eq(c.nstamps, 512, "a span of 6034 gets its ring");
	cr_assert_eq(c.alloc_fails, 1);
	cr_assert_eq(sv__cc_sample(&c, 1008, true, now + 6 * MS), 3 * MS, "moved with it");
	sv__cc_fini(&c);
}
