/*
 * roce_retx.c — RC requester reliability for the UDP transport (doc/wire-roce.md 6, 8, 12).
 *
 * Design. The requester tracks three PSNs: una (oldest unacknowledged), nxt (first
 * never sent) and snd (next to put on the wire in sequence; behind nxt while resending).
 * ACKs, READ responses and atomic acknowledgements advance una; every path that resends
 * only moves snd back (go-back-N) or queues single PSNs (selective repeat), and the
 * transport regenerates packets from the work requests, so no packet is ever buffered.
 *
 * Go-back-N is the IBA behaviour (IBA 9.7.5.1.x via rxe/qib): a NAK PSN sequence error
 * acknowledges everything before its PSN and resends from it; a local ACK timeout
 * (4.096 us << timeout) resends from una. Both consume retry_cnt, which any progress
 * reloads; exhausted means RETRY_EXC_ERR. Unlike IBA the timer backs off (x2 per
 * consecutive expiry, up to x64) so that a slow receiver is not buried under resends. An RNR NAK waits the responder's delay and
 * resends from its PSN, consuming rnr_retry (7 = forever).
 *
 * Selective repeat follows IRN (SIGCOMM 2018) with encodings that stay RoCEv2: the
 * responder keeps out-of-order packets and answers each with a NAK 0x60 whose PSN is its
 * cumulative expected PSN and whose 4-byte payload is the PSN that arrived (a one-block
 * SACK). The requester marks that PSN in a bitmap and resends, once per loss episode,
 * each unacknowledged, unSACKed PSN below it; the episode ends when una passes the
 * highest PSN sent when it began. A lost retransmission is left to the timer, which then
 * resends from una skipping SACKed PSNs. SR NAKs do not consume retry_cnt: on a lossy
 * link they are the normal repair signal, not a sign the peer is gone.
 *
 * A lost retransmission: SACKs that keep arriving say the link and the peer are alive
 * (each re-arms the timer), so the hole they leave is resent by a new round of the
 * episode once a round trip and a quarter have passed since the last round began,
 * rather than by the timer, whose cut to the minimum window is for a silent link. This
 * is what kept selective repeat at 0.4 of lossless on a 1 % lossy 20 ms path: with the
 * CM's 67 ms timer (doc/congestion.md, "Why selective repeat fell"), every lost
 * retransmission (1 % of them) became a timeout, a window cut to 4 and a slow start.
 *
 * Congestion window: the controller's (roce_cc.c, doc/congestion.md), on PSNs in flight
 * (selective repeat does not count SACKed ones), up to cwnd_max (SV__CWND_CAP unless
 * the device asks less). It is fed every cumulative ACK (with an RTT sample from the
 * send stamps when no SACKed packet rides on it: an ACK that fills a hole says when
 * the hole was filled, not how long the path is), every SACK (the PSN that just
 * arrived is a clean sample) and every loss. The cut: halve once per loss episode on a
 * go-back-N NAK (go-back-N resends a whole window, so backing off is what keeps it from
 * flooding), and on a timeout in both modes fall to the minimum (a silent link is the
 * congestion signal we trust). Selective-repeat losses cut only when the delay says
 * the queue overflowed: random loss on a long lossy link is not congestion.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/transport.h"
#include "wire/ib_hdr.h"
#include "wire/roce_retx.h"

static const char *const retx_state_name[SV__RETX_NSTATES] = {
	[SV__RETX_STEADY] = "STEADY",
	[SV__RETX_RECOVERY] = "RECOVERY",
};

#define TO(s) (1u << (s))

static const unsigned retx_moves[SV__RETX_NSTATES] = {
	[SV__RETX_STEADY] = TO(SV__RETX_RECOVERY),
	[SV__RETX_RECOVERY] = TO(SV__RETX_STEADY) | TO(SV__RETX_RECOVERY),
};

bool sv__retx_move(struct sv__retx *r, enum sv__retx_state to)
{
	if ((unsigned)to >= SV__RETX_NSTATES || !(retx_moves[r->state] & TO(to))) {
		sv__log(SV_LOG_ERROR, "softverbs udp: requester %p: no move from %s to %s",
			(void *)r, retx_state_name[r->state],
			(unsigned)to < SV__RETX_NSTATES ? retx_state_name[to] : "?");
		return false;
	}
	sv__log(SV_LOG_DEBUG, "softverbs udp: requester %p: %s -> %s (una %06x nxt %06x)",
		(void *)r, retx_state_name[r->state], retx_state_name[to], r->una, r->nxt);
	r->state = to;
	return true;
}

static const uint32_t rnr_us_x100[32] = {
	/* IBA table 45 (doc/wire-roce.md 5), in units of 10 us: code 0 is the longest. */
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576,
	32768, 49152,
};

uint64_t sv__rnr_code_ns(unsigned code)
{
	return (uint64_t)rnr_us_x100[code & 31] * 10000u;
}

static void sack_clear(struct sv__retx *r, uint32_t psn)
{
	uint32_t i = psn & (SV__RETX_WIN - 1);

	if (!r->sacked)
		return;
	if (r->sacked[i / 64] >> (i % 64) & 1)
		r->nsacked--;
	r->sacked[i / 64] &= ~(1ull << (i % 64));
}

static void sack_set(struct sv__retx *r, uint32_t psn)
{
	uint32_t i = psn & (SV__RETX_WIN - 1);

	if (!r->sacked)
		return;
	if (!(r->sacked[i / 64] >> (i % 64) & 1))
		r->nsacked++;
	r->sacked[i / 64] |= 1ull << (i % 64);
}

bool sv__retx_is_sacked(const struct sv__retx *r, uint32_t psn)
{
	uint32_t i = psn & (SV__RETX_WIN - 1);

	return r->sr && r->sacked && (r->sacked[i / 64] >> (i % 64) & 1);
}

/* A SACK: the bitmap and the queue, unless there already or refused in this loss
 * episode (a failing allocator is asked once per episode, at its first SACK). */
static void sack_alloc(struct sv__retx *r)
{
	uint64_t *m;

	if (r->sacked || (r->sack_denied && r->state == SV__RETX_RECOVERY))
		return;
	if (!(m = calloc(SV__RETX_WIN / 64 + SV__RETX_RTXQ / 2, sizeof(*m)))) {
		r->sack_denied = true;
		r->alloc_fails++;
		return;
	}
	r->sacked = m;
	r->rtxq = (uint32_t *)(void *)(m + SV__RETX_WIN / 64);
	r->rtxq_get = r->rtxq_put = 0;
}

void sv__retx_fini(struct sv__retx *r)
{
	free(r->sacked);
	r->sacked = NULL;
	r->rtxq = NULL;
	r->nsacked = 0;
	sv__cc_fini(&r->cc);
}

void sv__retx_init(struct sv__retx *r, bool sr, uint32_t psn, uint8_t timeout,
		   uint8_t retry_cnt, uint8_t rnr_retry, uint32_t cwnd_max)
{
	memset(r, 0, sizeof(*r));
	r->sr = sr;
	r->una = r->nxt = r->snd = psn & SV_PSN_MASK;
	/* 4.096 us * 2^timeout = 4096 ns << timeout; 5 bits, so at most ~2.4 hours. */
	r->rto_ns = timeout ? 4096ull << (timeout & 31) : 0;
	r->retry_cnt = r->retries_left = retry_cnt & 7;
	r->rnr_retry = r->rnr_left = rnr_retry & 7;
	if (cwnd_max == 0 || cwnd_max > SV__CWND_CAP)
		cwnd_max = SV__CWND_CAP;
	if (cwnd_max < SV__CWND_MIN)
		cwnd_max = SV__CWND_MIN;
	r->cwnd_max = cwnd_max;
	sv__cc_init(&r->cc, cwnd_max);
	r->cwnd = sv__cc_cwnd(&r->cc);
}

/* The local ACK timeout in force: the configured one, but never less than twice the
 * smoothed RTT. IBA keeps the timer at what the QP was given; over a long path with a
 * queue (a 20 ms path behind 33 ms of drop-tail queue at 1 Gbit/s) the CM's 67 ms is
 * under a full queue's round trip, and each early expiry resends a window and cuts it
 * to the minimum, so we deviate here as for the backoff (doc/wire-roce.md 8). */
static uint64_t rto(const struct sv__retx *r)
{
	uint64_t two = 2 * r->cc.srtt_ns;

	return r->rto_ns > two ? r->rto_ns : two;
}

static uint32_t inflight(const struct sv__retx *r)
{
	return sv__psn_diff(r->nxt, r->una);
}

uint32_t sv__retx_room(const struct sv__retx *r, uint64_t now_ns)
{
	uint32_t span = inflight(r), f = span;

	if (r->rnr_until_ns && now_ns < r->rnr_until_ns)
		return 0;
	/* Selective repeat: a SACKed packet has left the network, so it no longer counts
	 * against the window, and a hole does not stall the sender for a round trip
	 * (IRN's point). The span from una stays within what the SACK bitmap and the
	 * responder's out-of-order store cover. */
	if (r->sr) {
		f -= r->nsacked;
		if (span >= SV__RETX_SPAN)
			return 0;
		if (r->cwnd - (f < r->cwnd ? f : r->cwnd) > SV__RETX_SPAN - span)
			return SV__RETX_SPAN - span;
	}
	return f >= r->cwnd ? 0 : r->cwnd - f;
}

void sv__retx_sent(struct sv__retx *r, uint64_t now_ns)
{
	if (r->rto_ns && !r->deadline_ns)
		r->deadline_ns = now_ns + rto(r);
}

void sv__retx_resent(struct sv__retx *r, uint32_t psn, uint64_t now_ns)
{
	sv__cc_sent(&r->cc, psn, true, now_ns);
}

void sv__retx_first_resp(struct sv__retx *r, uint32_t psn, uint64_t now_ns)
{
	uint64_t rtt = sv__cc_sample(&r->cc, psn, true, now_ns);

	if (rtt) {
		sv__cc_on_ack(&r->cc, 0, rtt, now_ns);
		r->cwnd = sv__cc_cwnd(&r->cc);
	}
}

bool sv__retx_pace_ok(struct sv__retx *r, uint64_t now_ns)
{
	uint64_t next = 0;

	/* Less in flight than a burst of credit is no burst any queue minds: a flow that
	 * is not window-bound (a ping-pong, a trickle) is not held back, so pacing never
	 * adds to its latency. */
	if (inflight(r) < SV__CC_BURST_MIN || sv__cc_pace_ok(&r->cc, now_ns, &next)) {
		r->pace_ns = 0;
		return true;
	}
	r->pace_ns = next;
	return false;
}

void sv__retx_sent_new(struct sv__retx *r, uint32_t n, uint64_t now_ns)
{
	bool in_seq = r->snd == r->nxt;

	/* One request packet is stamped for RTT samples on the grid; a READ's PSNs are its
	 * responses, which the responder streams: its one request takes one packet of
	 * credit and is stamped whatever its PSN, its first response giving the sample
	 * (which then holds the responses queued before it at the responder: the READ
	 * direction's queue). */
	sv__cc_span(&r->cc, inflight(r) + n);
	sv__cc_sent(&r->cc, r->nxt, n != 1, now_ns);
	if (n != 1)
		sv__cc_stamp(&r->cc, r->nxt, now_ns);
	r->nxt = sv__psn_add(r->nxt, n);
	if (in_seq)
		r->snd = r->nxt;
	sv__retx_sent(r, now_ns);
}

/* A new loss episode, from the steady state or (the timer) in place of the open one. */
static void start_episode(struct sv__retx *r, bool cut_window, uint64_t now_ns)
{
	sv__retx_move(r, SV__RETX_RECOVERY);
	r->recover_psn = r->nxt;
	r->rtx_cursor = r->una;
	r->round_ns = now_ns;
	if (cut_window) {
		sv__cc_on_loss(&r->cc, true, 1, now_ns);
		r->cwnd = sv__cc_cwnd(&r->cc);
	}
}

/* Opens a loss episode; within one already open, nothing changes (one cut per episode). */
static void begin_episode(struct sv__retx *r, bool cut_window, uint64_t now_ns)
{
	if (r->state != SV__RETX_RECOVERY)
		start_episode(r, cut_window, now_ns);
}

uint32_t sv__retx_ack(struct sv__retx *r, uint32_t psn, uint64_t now_ns)
{
	uint32_t next = sv__psn_add(psn, 1);
	uint64_t rtt;
	uint32_t n;

	/* Acknowledges nothing new, or something never sent: ignore. */
	if (sv__psn_cmp(next, r->una) <= 0 || sv__psn_cmp(next, r->nxt) > 0)
		return 0;
	n = sv__psn_diff(next, r->una);
	rtt = r->nsacked ? 0 : sv__cc_sample(&r->cc, psn, true, now_ns);
	while (r->una != next) {
		sack_clear(r, r->una);
		r->una = sv__psn_add(r->una, 1);
	}
	if (sv__psn_cmp(r->snd, r->una) < 0)
		r->snd = r->una;
	if (sv__psn_cmp(r->rtx_cursor, r->una) < 0)
		r->rtx_cursor = r->una;
	/* IBA: the counters reload whenever an ACK makes progress (doc/wire-roce.md 8). */
	r->retries_left = r->retry_cnt;
	r->rnr_left = r->rnr_retry;
	if (r->state == SV__RETX_RECOVERY && sv__psn_cmp(r->una, r->recover_psn) >= 0) {
		sv__retx_move(r, SV__RETX_STEADY);
		r->rtxq_get = r->rtxq_put = 0;
	}
	sv__cc_on_ack(&r->cc, n, rtt, now_ns);
	r->cwnd = sv__cc_cwnd(&r->cc);
	r->deadline_ns = (r->una == r->nxt || !r->rto_ns) ? 0 : now_ns + rto(r);
	return n;
}

int sv__retx_nak_seq(struct sv__retx *r, uint32_t psn, uint64_t now_ns)
{
	r->naks++;
	if (sv__psn_cmp(psn, r->una) > 0)
		sv__retx_ack(r, sv__psn_add(psn, SV_PSN_MASK), now_ns);	/* psn - 1 */
	if (sv__psn_cmp(psn, r->una) < 0 || sv__psn_cmp(psn, r->nxt) >= 0)
		return 0;		/* stale: a later ACK already covered it */
	if (r->retries_left == 0)
		return -ETIMEDOUT;
	r->retries_left--;
	begin_episode(r, true, now_ns);
	r->snd = psn;
	r->deadline_ns = r->rto_ns ? now_ns + rto(r) : 0;
	return 0;
}

static void rtxq_push(struct sv__retx *r, uint32_t psn)
{
	if (!r->rtxq || r->rtxq_put - r->rtxq_get >= SV__RETX_RTXQ)
		return;			/* the timer covers what does not fit */
	r->rtxq[r->rtxq_put++ % SV__RETX_RTXQ] = psn;
}

void sv__retx_sack(struct sv__retx *r, uint32_t cum, uint32_t trig, uint64_t now_ns)
{
	uint64_t srtt = r->cc.srtt_ns;
	unsigned queued = 0;
	uint32_t p;

	r->naks++;
	if (sv__psn_cmp(cum, r->una) > 0)
		sv__retx_ack(r, sv__psn_add(cum, SV_PSN_MASK), now_ns);
	if (sv__psn_cmp(trig, r->una) <= 0 || sv__psn_cmp(trig, r->nxt) >= 0)
		return;
	sack_alloc(r);
	/* trig just arrived: a clean RTT sample when it was stamped (never resent). */
	sv__cc_on_sack(&r->cc, sv__cc_sample(&r->cc, trig, true, now_ns), now_ns);
	sack_set(r, trig);
	begin_episode(r, false, now_ns);
	/* A packet sent after the last round's resends arrived and una is still held: a
	 * resend of that round was lost too. Resend what is missing again, as a new round,
	 * once the round had a round trip (and a quarter, for the queue) to be answered. */
	if (srtt && now_ns - r->round_ns > srtt + srtt / 4) {
		r->rtx_cursor = r->una;
		r->round_ns = now_ns;
	}
	p = sv__psn_cmp(r->rtx_cursor, r->una) > 0 ? r->rtx_cursor : r->una;
	for (; sv__psn_cmp(p, trig) < 0; p = sv__psn_add(p, 1)) {
		if (!sv__retx_is_sacked(r, p)) {
			rtxq_push(r, p);
			queued++;
		}
	}
	/* New holes: a loss, which is congestion only when the delay says so. */
	if (queued)
		sv__cc_on_loss(&r->cc, false, queued, now_ns);
	r->cwnd = sv__cc_cwnd(&r->cc);
	/* The peer is receiving: the timer is for a silent one. */
	if (r->rto_ns)
		r->deadline_ns = now_ns + rto(r);
	if (sv__psn_cmp(sv__psn_add(trig, 1), r->rtx_cursor) > 0)
		r->rtx_cursor = sv__psn_add(trig, 1);
}

bool sv__retx_pop(struct sv__retx *r, uint32_t *psn)
{
	while (r->rtxq && r->rtxq_get != r->rtxq_put) {
		uint32_t p = r->rtxq[r->rtxq_get++ % SV__RETX_RTXQ];

		/* Acknowledged or SACKed since it was queued: nothing to resend. */
		if (sv__psn_cmp(p, r->una) >= 0 && sv__psn_cmp(p, r->nxt) < 0 &&
		    !sv__retx_is_sacked(r, p)) {
			*psn = p;
			return true;
		}
	}
	return false;
}

int sv__retx_rnr(struct sv__retx *r, uint32_t psn, uint64_t delay_ns, uint64_t now_ns)
{
	r->rnr_naks++;
	if (sv__psn_cmp(psn, r->una) > 0)
		sv__retx_ack(r, sv__psn_add(psn, SV_PSN_MASK), now_ns);
	if (sv__psn_cmp(psn, r->una) < 0 || sv__psn_cmp(psn, r->nxt) >= 0)
		return 0;
	if (r->rnr_retry != 7) {	/* 7 = retry forever (doc/wire-roce.md 8) */
		if (r->rnr_left == 0)
			return -ETIMEDOUT;
		r->rnr_left--;
	}
	r->snd = psn;
	r->rtxq_get = r->rtxq_put = 0;
	r->rnr_until_ns = now_ns + (delay_ns ? delay_ns : 1);
	/* The ACK timer restarts once sending resumes. */
	r->deadline_ns = 0;
	return 0;
}

void sv__retx_rewind(struct sv__retx *r, uint32_t psn)
{
	if (sv__psn_cmp(psn, r->una) >= 0 && sv__psn_cmp(psn, r->snd) < 0)
		r->snd = psn;
}

int sv__retx_on_timer(struct sv__retx *r, uint64_t now_ns)
{
	if (r->pace_ns && now_ns >= r->pace_ns)
		r->pace_ns = 0;		/* the caller's round sends what pacing held */
	if (r->rnr_until_ns) {
		if (now_ns < r->rnr_until_ns)
			return 0;
		r->rnr_until_ns = 0;
		return 1;
	}
	if (!r->deadline_ns || now_ns < r->deadline_ns)
		return 0;		/* stale or early wake-up */
	if (r->una == r->nxt) {
		r->deadline_ns = 0;
		return 0;
	}
	if (r->retries_left == 0)
		return -ETIMEDOUT;	/* caller: RETRY_EXC_ERR, QP to ERR */
	r->retries_left--;
	r->timeouts++;
	sv__cc_on_timeout(&r->cc, now_ns);
	r->cwnd = sv__cc_cwnd(&r->cc);
	start_episode(r, false, now_ns);
	r->rtxq_get = r->rtxq_put = 0;
	r->snd = r->una;
	/* Back off while the peer stays silent: doubling per consecutive timeout, at most
	 * 64x, back to the configured value on progress. IBA keeps the timer fixed; a
	 * receiver that is slow rather than gone (a loaded host, a sanitizer build) then
	 * meets a retry storm it cannot drain, so we deviate here. */
	r->deadline_ns = now_ns + (rto(r) << (r->retry_cnt - r->retries_left < 6 ?
						r->retry_cnt - r->retries_left : 6));
	return 1;
}

uint64_t sv__retx_next_ns(const struct sv__retx *r)
{
	uint64_t t = r->rnr_until_ns ? r->rnr_until_ns : r->deadline_ns;

	return r->pace_ns && (!t || r->pace_ns < t) ? r->pace_ns : t;
}
