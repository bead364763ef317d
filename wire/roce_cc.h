/*
 * roce_cc.h — the UDP RC requester's congestion controller: a delay-based window after
 * Swift (Kumar et al., "Swift: Delay is Simple and Effective for Congestion Control in
 * the Datacenter", SIGCOMM 2020), with a delay-exit slow start and a pacing rate of
 * window / smoothed RTT. Pure logic on the caller's clock (now_ns), as roce_retx.c is;
 * roce_retx.c owns one and feeds it acknowledgements, RTT samples and losses. Design:
 * doc/congestion.md.
 */
#ifndef SV_WIRE_ROCE_CC_H
#define SV_WIRE_ROCE_CC_H

#include <stdbool.h>
#include <stdint.h>

#define SV__CC_MIN 4			/* packets: the smallest window */
#define SV__CC_INIT 32			/* packets: the first window */
/* Send stamps: every SV__CC_STAMP_EVERY-th PSN keeps its send time, in a ring of slots
 * indexed by psn / SV__CC_STAMP_EVERY. The ring grows with the largest span of PSNs in
 * flight (sv__cc_span()), a power of two of slots covering it: SV__CC_STAMPS_MIN slots
 * (256 PSNs) held in the controller itself, which is all a QP that never has more in
 * flight pays for, up to SV__CC_STAMPS (32768 PSNs, beyond selective repeat's span of
 * 32000) allocated as the span widens. */
#define SV__CC_STAMP_EVERY 16
#define SV__CC_STAMPS_MIN 16
#define SV__CC_STAMPS 2048
#define SV__CC_BURST_MIN 16		/* packets of pacing credit, at least */
#define SV__CC_BLIND_MAX 256		/* packets: STARTUP's end while no RTT was sampled */
#define SV__CC_LOSS_CONGESTED 0.05	/* a round trip's loss fraction that is congestion */
#define SV__CC_PROBE_EVERY_NS 2000000000ull	/* PROBE when the base is this old */

/* The controller's state machine: STARTUP doubles the window per round trip until the
 * delay first rises (or a congestion loss, or the old ssthresh after a timeout); AVOID
 * is Swift's additive increase and delay-proportional decrease; PROBE holds the window
 * at the minimum for two round trips when the base RTT has not been seen for
 * SV__CC_PROBE_EVERY_NS, so the queue drains and every flow on the path sees the true
 * base (BBR's ProbeRTT: without it a flow that came to a standing queue takes that
 * queue for its base and crowds out the others). */
enum sv__cc_phase {
	SV__CC_STARTUP,
	SV__CC_AVOID,
	SV__CC_PROBE,
	SV__CC_N_PHASES,
};

struct sv__cc {
	enum sv__cc_phase phase;
	double cwnd;			/* packets, fractional (Swift's window) */
	uint32_t cwnd_max;		/* packets */
	uint32_t ssthresh;		/* STARTUP ends here (after a timeout: half the old) */
	/* Delay: the smallest RTT seen (the path's propagation delay; the least sample of
	 * PROBE lowers it, and two PROBEs in a row whose least samples were above it raise
	 * it to the lower of them, so a longer route is followed without taking another
	 * flow's queue during one probe for the base) and when a sample was
	 * last near it; PROBE's start, least sample and the window it gives back; the
	 * smoothed RTT. 0 = no sample yet. */
	uint64_t base_ns, base_seen_ns;
	uint64_t probe_ns, probe_min_ns, probe_prev_ns;
	double probe_cwnd;
	uint64_t srtt_ns, rtt_ns;
	/* The delay signal (rtt_ns): the least sample of the last interval of half a
	 * smoothed RTT, so that a host's scheduling spike (one late sample) is not taken
	 * for a queue (which holds every sample of an interval up). */
	uint64_t ival_min_ns, ival_at_ns;
	uint64_t last_ns;		/* the latest sample (STARTUP's exit) */
	uint64_t cut_ns;		/* last decrease: at most one per RTT */
	/* This round trip's tally: packets delivered (ACKed or SACKed) and lost. */
	uint32_t rnd_delivered, rnd_lost, rnd_prev;	/* prev: the last round's total */
	uint64_t rnd_at_ns;
	/* Pacing: a token bucket of credit packets at the time credit_ns. */
	double credit;
	uint64_t credit_ns;
	/* Send stamps (see SV__CC_STAMPS): PSN and time, valid when its ok bit is set, in
	 * nstamps slots: the first SV__CC_STAMPS_MIN here, a larger ring in stamp_mem
	 * (NULL until the window outgrows these; sv__cc_fini() frees it). A ring that could
	 * not be allocated leaves the smaller one in use (a stamp overwritten before its
	 * ACK came gives no sample, nothing worse), counted in alloc_fails, and is not
	 * asked for again until the window outgrows it too (stamps_failed: its slots). */
	uint32_t nstamps, stamps_failed;
	uint32_t span_peak;		/* the largest span in flight (sv__cc_span()) */
	uint32_t stamp_psn0[SV__CC_STAMPS_MIN];
	uint64_t stamp_ns0[SV__CC_STAMPS_MIN];
	uint64_t stamp_ok0;
	void *stamp_mem;
	/* Counters: RTT samples taken, decreases on delay, on congestion loss, timeouts;
	 * stamp rings that could not be allocated. */
	uint64_t samples, delay_cuts, loss_cuts, timeouts, alloc_fails;
	uint32_t cwnd_peak;
};

extern const char *const sv__cc_phase_name[SV__CC_N_PHASES];

/* cwnd_max: packets, at least SV__CC_MIN. Whatever c held before is forgotten: a
 * controller that ran is given back to sv__cc_fini() first. */
void sv__cc_init(struct sv__cc *c, uint32_t cwnd_max);
/* Frees the stamp ring the window made grow (c may be initialized again). */
void sv__cc_fini(struct sv__cc *c);
/* The window in whole packets (at least SV__CC_MIN; the minimum during PROBE). */
uint32_t sv__cc_cwnd(const struct sv__cc *c);
/* The target RTT: the base plus the queueing the controller allows. */
uint64_t sv__cc_target_ns(const struct sv__cc *c);
/* Pacing rate in packets per second (0: not pacing yet, no RTT sample). */
double sv__cc_rate_pps(const struct sv__cc *c);
/* Whether pacing admits one more packet now; when not, *next_ns (if not NULL) is when. */
bool sv__cc_pace_ok(const struct sv__cc *c, uint64_t now_ns, uint64_t *next_ns);
/* PSNs una..nxt in flight are span, nxt counting the packets about to be stamped: the
 * stamp ring grows to cover the largest span (before the next stamp). */
void sv__cc_span(struct sv__cc *c, uint32_t span);
/* A packet went out at now_ns (new or resent): it takes one packet of credit. A new
 * request packet of PSN psn is stamped when it falls on the stamp grid; a resent one is
 * unstamped (Karn's rule: its ACK cannot tell which send it answers). */
void sv__cc_sent(struct sv__cc *c, uint32_t psn, bool resent, uint64_t now_ns);
/* Stamps psn whether or not it is on the grid (a READ request, whose first response
 * gives the sample: sv__cc_sample(psn, true)). */
void sv__cc_stamp(struct sv__cc *c, uint32_t psn, uint64_t now_ns);
/* The RTT sample a response for psn gives (the stamp of psn's grid point at or before
 * it, when exact is false; of psn itself when true), consumed; 0 when none. The
 * requester asks only exact samples: a grid point before psn may have been sent long
 * before it by a sender that had nothing to send between (app-limited). */
uint64_t sv__cc_sample(struct sv__cc *c, uint32_t psn, bool exact, uint64_t now_ns);
/* n packets newly acknowledged, with an RTT sample (0: none). */
void sv__cc_on_ack(struct sv__cc *c, uint32_t n, uint64_t rtt_ns, uint64_t now_ns);
/* One packet selectively acknowledged (it arrived beyond a hole), with its RTT sample
 * (0: none): it counts as delivered, the window grows when the cumulative ACK comes. */
void sv__cc_on_sack(struct sv__cc *c, uint64_t rtt_ns, uint64_t now_ns);
/* Whether the path is congested: the delay signal is above the target by half the
 * allowance again (the delay decrease alone did not hold the queue down), or this
 * round trip lost more than SV__CC_LOSS_CONGESTED of its packets (a queue too shallow
 * for the delay to rise: random loss of that rate is taken for congestion). */
bool sv__cc_congested(const struct sv__cc *c);
/* A loss signal, n packets: a go-back-N NAK (always a decrease, halving, at most one per
 * RTT), or a selective-repeat loss, which decreases only when sv__cc_congested().
 * Returns whether the window was cut. */
bool sv__cc_on_loss(struct sv__cc *c, bool go_back_n, uint32_t n, uint64_t now_ns);
/* A retransmission timeout: the window falls to SV__CC_MIN and STARTUP runs again up to
 * half the old window. */
void sv__cc_on_timeout(struct sv__cc *c, uint64_t now_ns);

#endif
