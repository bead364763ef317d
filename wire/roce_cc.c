/*
 * roce_cc.c — the UDP RC requester's congestion controller (roce_cc.h; the design and
 * its sources: doc/congestion.md).
 *
 * The window follows Swift (SIGCOMM 2020, section 3): while the RTT stays below a target
 * it grows additively, by ai packets per round trip (cwnd += ai * acked / cwnd); above
 * the target it shrinks at most once per round trip, in proportion to how far above it
 * is (cwnd *= max(1 - beta * (rtt - target) / rtt, 1 - max_mdf)). Delay is the signal
 * because it rises before a drop-tail queue overflows, and because random loss does not
 * move it: a lossy link (the 1 % of issue 13) keeps its window, a queue that grows
 * loses it. Departures from Swift, each for the long paths this transport is meant for:
 *  - the target is the base RTT (the smallest seen) plus a queueing allowance of half
 *    of it, at least SV__CC_QMIN_NS, instead of a fabric's fixed microseconds: the
 *    hosts' own delay (scheduling, the emulated link's millisecond timer) is part of
 *    every sample, and must not pass for a queue;
 *  - ai grows with the RTT (3 packets, plus 3 per millisecond of smoothed RTT) so that a
 *    20 ms path regains a cut window in the wall time a short one does, and beta is 1.6
 *    (Swift: 0.8): deeper cuts and faster growth make more AIMD cycles, and each cycle
 *    brings flows' shares closer (on test_roce_cc's bottleneck, two flows 100 ms apart
 *    shared 0.60 / 0.38 after 5 s with Swift's values, 0.51 / 0.49 with these);
 *  - the delay signal is the least RTT sample of each half round trip, not the latest:
 *    a host's scheduling delay (this transport runs on busy hosts) hits single samples,
 *    a queue every sample;
 *  - a slow start (STARTUP, +1 per acknowledged packet) until the RTT first exceeds
 *    the base by half the allowance: a delay exit as in HyStart (Ha and Rhee, "Taming
 *    the elephants", 2011), since additive increase alone would take seconds to fill
 *    a 1 Gbit/s x 20 ms path;
 *  - every packet is paced at gain * cwnd / srtt (2 in STARTUP, 1.2 after: the ratios
 *    Linux documents for TCP pacing, tcp_pacing_ss_ratio and tcp_pacing_ca_ratio), so
 *    a window leaves as a rate and not as a burst into the bottleneck's queue.
 * Loss: selective repeat repairs single losses without a decrease unless the RTT says
 * the queue is beyond one and a half allowances, or the round trip lost more than 5 %
 * of its packets (a queue too shallow for the delay to show): then the loss is the
 * queue's, halve;
 * go-back-N halves on each loss episode as before (it resends the whole window, so
 * backing off is what keeps it from flooding); a timeout falls to the minimum and
 * starts again.
 * Fairness: flows that share a bottleneck see the same RTT, so they decrease by the same
 * fraction at the same time and increase by the same amount (AIMD's convergence,
 * Chiu and Jain 1989), provided they agree on the base: PROBE (BBR's ProbeRTT, Cardwell
 * et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016) drains the queue
 * every SV__CC_PROBE_EVERY_NS a flow has not seen its base, so a flow that started
 * behind a standing queue learns the real one; test_roce_cc's
 * two_flows_share_a_bottleneck checks it.
 */
#include <stdlib.h>
#include <string.h>

#include "core/transport.h"
#include "wire/ib_hdr.h"
#include "wire/roce_cc.h"

#define SV__CC_QMIN_NS 2000000ull	/* queueing allowed above the base RTT, at least */
#define SV__CC_BETA 1.6
#define SV__CC_MAX_MDF 0.5
#define SV__CC_AI 3.0		/* packets per round trip, per millisecond of it */
#define SV__CC_BURST_NS 2000000.0	/* credit holds this much of the rate */

const char *const sv__cc_phase_name[SV__CC_N_PHASES] = {
	[SV__CC_STARTUP] = "STARTUP",
	[SV__CC_AVOID] = "AVOID",
	[SV__CC_PROBE] = "PROBE",
};

#define TO(p) (1u << (p))

/* The moves each phase may make: STARTUP ends on the first delay rise, congestion loss
 * or ssthresh; AVOID probes for the base and comes back; a timeout starts it again. */
static const unsigned phase_moves[SV__CC_N_PHASES] = {
	[SV__CC_STARTUP] = TO(SV__CC_AVOID),
	[SV__CC_AVOID] = TO(SV__CC_STARTUP) | TO(SV__CC_PROBE),
	[SV__CC_PROBE] = TO(SV__CC_AVOID) | TO(SV__CC_STARTUP),
};

static void set_phase(struct sv__cc *c, enum sv__cc_phase to)
{
	if (to == c->phase)
		return;
	if (!(phase_moves[c->phase] & TO(to))) {
		sv__log(SV_LOG_ERROR, "udp cc: no move from %s to %s", sv__cc_phase_name[c->phase],
			sv__cc_phase_name[to]);
		return;
	}
	sv__log(SV_LOG_DEBUG, "udp cc: %s -> %s (cwnd %.1f, rtt %llu us, base %llu us)",
		sv__cc_phase_name[c->phase], sv__cc_phase_name[to], c->cwnd,
		(unsigned long long)(c->rtt_ns / 1000), (unsigned long long)(c->base_ns / 1000));
	c->phase = to;
}

void sv__cc_init(struct sv__cc *c, uint32_t cwnd_max)
{
	memset(c, 0, sizeof(*c));
	c->cwnd_max = cwnd_max < SV__CC_MIN ? SV__CC_MIN : cwnd_max;
	c->cwnd = c->cwnd_max < SV__CC_INIT ? c->cwnd_max : SV__CC_INIT;
	c->ssthresh = c->cwnd_max;
	c->phase = SV__CC_STARTUP;
	c->cwnd_peak = sv__cc_cwnd(c);
	c->nstamps = SV__CC_STAMPS_MIN;
}

void sv__cc_fini(struct sv__cc *c)
{
	free(c->stamp_mem);
	c->stamp_mem = NULL;
	c->nstamps = SV__CC_STAMPS_MIN;
	c->stamp_ok0 = 0;
}

uint32_t sv__cc_cwnd(const struct sv__cc *c)
{
	uint32_t w = c->phase == SV__CC_PROBE ? SV__CC_MIN : (uint32_t)c->cwnd;

	return w < SV__CC_MIN ? SV__CC_MIN : w > c->cwnd_max ? c->cwnd_max : w;
}

static uint64_t allowance_ns(const struct sv__cc *c)
{
	uint64_t q = c->base_ns / 2;

	return q < SV__CC_QMIN_NS ? SV__CC_QMIN_NS : q;
}

uint64_t sv__cc_target_ns(const struct sv__cc *c)
{
	return c->base_ns + allowance_ns(c);
}

bool sv__cc_congested(const struct sv__cc *c)
{
	uint32_t all = c->rnd_delivered + c->rnd_lost;

	/* Against the larger of this round's packets and the last round's: early in a
	 * round a few losses are not yet a fraction. */
	if (all < c->rnd_prev)
		all = c->rnd_prev;
	if (all >= 20 && (double)c->rnd_lost > SV__CC_LOSS_CONGESTED * all)
		return true;
	return c->rtt_ns && c->rtt_ns > sv__cc_target_ns(c) + allowance_ns(c) / 2;
}

/* The tally of a round trip (a smoothed RTT long) starts again when it is over. */
static void tally(struct sv__cc *c, uint32_t delivered, uint32_t lost, uint64_t now_ns)
{
	if (now_ns - c->rnd_at_ns >= (c->srtt_ns ? c->srtt_ns : 1000000)) {
		c->rnd_prev = c->rnd_delivered + c->rnd_lost;
		c->rnd_delivered = c->rnd_lost = 0;
		c->rnd_at_ns = now_ns;
	}
	c->rnd_delivered += delivered;
	c->rnd_lost += lost;
}

double sv__cc_rate_pps(const struct sv__cc *c)
{
	double gain = c->phase == SV__CC_STARTUP ? 2.0 : 1.2;

	if (!c->srtt_ns)
		return 0;
	return gain * c->cwnd * 1e9 / (double)c->srtt_ns;
}

static double burst(double rate)
{
	double b = rate * SV__CC_BURST_NS / 1e9;

	return b < SV__CC_BURST_MIN ? (double)SV__CC_BURST_MIN : b;
}

/* The credit at now: what was left at credit_ns plus the rate since, up to a burst. */
static double credit_at(const struct sv__cc *c, uint64_t now_ns, double rate)
{
	double cr = c->credit, b = burst(rate);

	if (now_ns > c->credit_ns)
		cr += (double)(now_ns - c->credit_ns) * rate / 1e9;
	return cr > b ? b : cr;
}

bool sv__cc_pace_ok(const struct sv__cc *c, uint64_t now_ns, uint64_t *next_ns)
{
	double rate = sv__cc_rate_pps(c), cr;

	if (rate <= 0)
		return true;
	cr = credit_at(c, now_ns, rate);
	if (cr >= 1.0)
		return true;
	if (next_ns)
		*next_ns = now_ns + (uint64_t)((1.0 - cr) * 1e9 / rate) + 1;
	return false;
}

/* The stamp ring in use: nstamps slots of PSN, time and ok bit. A ring of n slots (32
 * or more) is one allocation: n times, n PSNs, then the ok bits (ok_words(n)). */
struct stamps {
	uint32_t *psn;
	uint64_t *ns, *ok;
	uint32_t n;
};

static struct stamps stamps_of(struct sv__cc *c)
{
	uint64_t *m = c->stamp_mem;

	if (!m)
		return (struct stamps){ c->stamp_psn0, c->stamp_ns0, &c->stamp_ok0,
					SV__CC_STAMPS_MIN };
	return (struct stamps){ (uint32_t *)(void *)(m + c->nstamps), m,
				m + c->nstamps + c->nstamps / 2, c->nstamps };
}

static size_t ok_words(uint32_t n)
{
	return (n + 63) / 64;
}

static unsigned stamp_slot(const struct stamps *t, uint32_t psn)
{
	return (psn / SV__CC_STAMP_EVERY) & (t->n - 1);
}

/* The ring covers the largest span of PSNs in flight (una..nxt, sv__cc_span()): a stamp
 * must last until the ACK or SACK of its PSN, and every PSN sent before that ACK comes
 * lies in the span then. With selective repeat the span is not the window: the window
 * counts no SACKed packet, and while a hole waits for its resend the sender goes on a
 * window beyond the SACKed ones (up to SV__RETX_SPAN, 32000 PSNs), so a ring sized to
 * the window loses the samples that keep the delay signal current (bench/wan.sh's 1 %
 * loss case then ran into timeouts that a fixed ring spared it). When the span outgrew
 * the ring, the stamps move to a ring twice as large (or more), each to its slot there.
 * Stamps in two slots of a ring of n have psn / SV__CC_STAMP_EVERY different modulo n,
 * so modulo any multiple of n too: no two meet in the larger ring. */
static void stamps_fit(struct sv__cc *c)
{
	uint32_t want = c->nstamps;
	struct stamps o, t;
	uint64_t *m;

	while (want < SV__CC_STAMPS && (uint64_t)want * SV__CC_STAMP_EVERY < c->span_peak)
		want <<= 1;
	if (want == c->nstamps || want <= c->stamps_failed)
		return;
	if (!(m = calloc((size_t)want + want / 2 + ok_words(want), sizeof(*m)))) {
		c->stamps_failed = want;
		c->alloc_fails++;
		return;
	}
	o = stamps_of(c);
	t = (struct stamps){ (uint32_t *)(void *)(m + want), m, m + want + want / 2, want };
	for (uint32_t i = 0; i < o.n; i++) {
		unsigned j;

		if (!(o.ok[i / 64] >> (i % 64) & 1))
			continue;
		j = stamp_slot(&t, o.psn[i]);
		t.psn[j] = o.psn[i];
		t.ns[j] = o.ns[i];
		t.ok[j / 64] |= 1ull << (j % 64);
	}
	free(c->stamp_mem);
	c->stamp_mem = m;
	c->nstamps = want;
}

void sv__cc_span(struct sv__cc *c, uint32_t span)
{
	if (span > c->span_peak)
		c->span_peak = span;
}

void sv__cc_sent(struct sv__cc *c, uint32_t psn, bool resent, uint64_t now_ns)
{
	double rate = sv__cc_rate_pps(c);
	struct stamps t;
	unsigned i;

	if (rate > 0) {
		/* Credit may go below zero (resends, and sends of a flow with little in
		 * flight, are not held back): later sends wait, for a burst's worth at most. */
		double cr = credit_at(c, now_ns, rate) - 1.0, b = burst(rate);

		c->credit = cr < -b ? -b : cr;
		c->credit_ns = now_ns;
	}
	if (psn % SV__CC_STAMP_EVERY)
		return;
	if (resent) {
		t = stamps_of(c);
		i = stamp_slot(&t, psn);
		if (t.psn[i] == psn)
			t.ok[i / 64] &= ~(1ull << (i % 64));
		return;
	}
	sv__cc_stamp(c, psn, now_ns);
}

void sv__cc_stamp(struct sv__cc *c, uint32_t psn, uint64_t now_ns)
{
	struct stamps t;
	unsigned i;

	stamps_fit(c);
	t = stamps_of(c);
	i = stamp_slot(&t, psn);
	t.psn[i] = psn;
	t.ns[i] = now_ns;
	t.ok[i / 64] |= 1ull << (i % 64);
}

uint64_t sv__cc_sample(struct sv__cc *c, uint32_t psn, bool exact, uint64_t now_ns)
{
	uint32_t g = exact ? psn : psn - psn % SV__CC_STAMP_EVERY;
	struct stamps t = stamps_of(c);
	unsigned i = stamp_slot(&t, g);

	if (!(t.ok[i / 64] >> (i % 64) & 1) || t.psn[i] != g || now_ns <= t.ns[i])
		return 0;
	t.ok[i / 64] &= ~(1ull << (i % 64));
	return now_ns - t.ns[i];
}

static void take_rtt(struct sv__cc *c, uint64_t rtt, uint64_t now_ns)
{
	c->samples++;
	c->last_ns = rtt;
	c->srtt_ns = c->srtt_ns ? (7 * c->srtt_ns + rtt) / 8 : rtt;
	if (!c->ival_min_ns || rtt < c->ival_min_ns)
		c->ival_min_ns = rtt;
	if (!c->rtt_ns || now_ns - c->ival_at_ns >= c->srtt_ns / 2) {
		c->rtt_ns = c->ival_min_ns;
		c->ival_min_ns = 0;
		c->ival_at_ns = now_ns;
	}
	if (!c->base_ns || rtt < c->base_ns)
		c->base_ns = rtt;
	if (rtt <= c->base_ns + allowance_ns(c) / 4)
		c->base_seen_ns = now_ns;
	if (c->phase == SV__CC_PROBE && (!c->probe_min_ns || rtt < c->probe_min_ns))
		c->probe_min_ns = rtt;
}

/* PROBE: two round trips at the minimum window (one drains the queue, the other brings
 * the samples of what was sent into the empty queue), then the window comes back and
 * the least sample of the probe is the base. */
static void probe(struct sv__cc *c, uint64_t now_ns)
{
	if (c->phase == SV__CC_AVOID && c->base_seen_ns &&
	    now_ns - c->base_seen_ns >= SV__CC_PROBE_EVERY_NS) {
		c->probe_cwnd = c->cwnd;
		c->probe_ns = now_ns;
		c->probe_min_ns = 0;
		set_phase(c, SV__CC_PROBE);
	} else if (c->phase == SV__CC_PROBE && now_ns - c->probe_ns >= 2 * c->srtt_ns) {
		uint64_t m = c->probe_min_ns;

		if (m && m <= c->base_ns) {
			c->base_ns = m;
			c->probe_prev_ns = 0;
		} else if (m && c->probe_prev_ns) {
			c->base_ns = m < c->probe_prev_ns ? m : c->probe_prev_ns;
			c->probe_prev_ns = 0;
		} else {
			c->probe_prev_ns = m;
		}
		c->base_seen_ns = now_ns;
		c->cwnd = c->probe_cwnd;
		/* The probe's few deliveries against the losses of the window before it
		 * are no loss fraction: the tally starts again at the window's size. */
		c->rnd_delivered = c->rnd_lost = 0;
		c->rnd_prev = (uint32_t)c->cwnd;
		c->rnd_at_ns = now_ns;
		c->rtt_ns = c->last_ns;
		set_phase(c, SV__CC_AVOID);
	}
}

static bool can_cut(const struct sv__cc *c, uint64_t now_ns)
{
	return !c->cut_ns || now_ns - c->cut_ns >= (c->srtt_ns ? c->srtt_ns : 1);
}

static void clamp(struct sv__cc *c)
{
	if (c->cwnd < SV__CC_MIN)
		c->cwnd = SV__CC_MIN;
	if (c->cwnd > c->cwnd_max)
		c->cwnd = c->cwnd_max;
	if (sv__cc_cwnd(c) > c->cwnd_peak)
		c->cwnd_peak = sv__cc_cwnd(c);
}

/* n delivered packets that grow the window (0 for a SACK: the cumulative ACK grows it). */
static void delivered(struct sv__cc *c, uint32_t n, uint64_t rtt_ns, uint64_t now_ns)
{
	if (rtt_ns)
		take_rtt(c, rtt_ns, now_ns);
	probe(c, now_ns);
	if (c->phase == SV__CC_PROBE)
		return;
	if (c->rtt_ns && c->rtt_ns > sv__cc_target_ns(c)) {
		/* Above the target: Swift's multiplicative decrease, once per RTT. */
		if (can_cut(c, now_ns)) {
			double f = 1.0 - SV__CC_BETA * (double)(c->rtt_ns - sv__cc_target_ns(c)) /
				   (double)c->rtt_ns;

			c->cwnd *= f < 1.0 - SV__CC_MAX_MDF ? 1.0 - SV__CC_MAX_MDF : f;
			c->cut_ns = now_ns;
			c->delay_cuts++;
			set_phase(c, SV__CC_AVOID);
		}
	} else if (c->phase == SV__CC_STARTUP && !c->srtt_ns && c->cwnd >= SV__CC_BLIND_MAX) {
		/* No RTT sample yet (nothing stamped was answered): no delay to stop the
		 * doubling, so it stops at the window softverbs had before it measured. */
	} else if (c->phase == SV__CC_STARTUP) {
		/* Doubling per round trip; it ends when the latest sample (not the
		 * filtered signal, whose half round trip of lag the doubling would fill
		 * the queue in) shows a queue of half the allowance. */
		c->cwnd += n;
		if (c->cwnd >= c->ssthresh ||
		    (c->last_ns && c->last_ns > c->base_ns + allowance_ns(c) / 2))
			set_phase(c, SV__CC_AVOID);
	} else {
		double ai = SV__CC_AI * (1.0 + (double)c->srtt_ns / 1e6);

		c->cwnd += ai * n / c->cwnd;
	}
	clamp(c);
}

void sv__cc_on_ack(struct sv__cc *c, uint32_t n, uint64_t rtt_ns, uint64_t now_ns)
{
	tally(c, n, 0, now_ns);
	delivered(c, n, rtt_ns, now_ns);
}

void sv__cc_on_sack(struct sv__cc *c, uint64_t rtt_ns, uint64_t now_ns)
{
	tally(c, 1, 0, now_ns);
	delivered(c, 0, rtt_ns, now_ns);
}

bool sv__cc_on_loss(struct sv__cc *c, bool go_back_n, uint32_t n, uint64_t now_ns)
{
	tally(c, 0, n, now_ns);
	if (c->phase == SV__CC_PROBE)
		return false;		/* the window is at its minimum already */
	if (!go_back_n && !sv__cc_congested(c))
		return false;		/* random loss: selective repeat repairs it */
	if (!can_cut(c, now_ns))
		return false;
	c->cwnd *= 1.0 - SV__CC_MAX_MDF;
	c->cut_ns = now_ns;
	c->loss_cuts++;
	set_phase(c, SV__CC_AVOID);
	clamp(c);
	return true;
}

void sv__cc_on_timeout(struct sv__cc *c, uint64_t now_ns)
{
	uint32_t half = sv__cc_cwnd(c) / 2;

	c->timeouts++;
	c->ssthresh = half < SV__CC_MIN ? SV__CC_MIN : half;
	c->cwnd = SV__CC_MIN;
	c->cut_ns = now_ns;
	c->credit = 0;
	c->credit_ns = now_ns;
	if (c->ssthresh > SV__CC_MIN)
		set_phase(c, SV__CC_STARTUP);
	else if (c->phase == SV__CC_PROBE)
		set_phase(c, SV__CC_AVOID);
	clamp(c);
}
