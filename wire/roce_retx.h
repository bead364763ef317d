/*
 * roce_retx.h — the RC requester's reliability state for the UDP transport: PSN window,
 * acknowledgement processing, go-back-N and selective-repeat retransmission decisions,
 * the local ACK timer, the RNR wait and the congestion window. Pure logic: no I/O, no
 * clock (time is the now_ns parameter), so tests drive it on simulated time. The design
 * essay is at the top of roce_retx.c.
 */
#ifndef SV_WIRE_ROCE_RETX_H
#define SV_WIRE_ROCE_RETX_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/roce_cc.h"

/* The window follows the bandwidth-delay product (roce_cc.c) up to SV__CWND_CAP packets:
 * 125 MiB at a 4096-byte path MTU, a 10 Gbit/s path of 100 ms. PSNs in flight stay far
 * below the 2^23 that serial comparison allows (IBA 9.7.1, doc/wire-roce.md 6). */
#define SV__RETX_WIN 65536		/* PSN span the SACK bitmap covers (> the window cap) */
#define SV__RETX_RTXQ 1024		/* selective retransmissions queued between sends */
#define SV__CWND_MIN SV__CC_MIN		/* packets */
#define SV__CWND_INIT SV__CC_INIT
#define SV__CWND_CAP 32000		/* hard cap: < SV__RETX_WIN / 2 */
#define SV__RETX_SPAN 32000		/* SR: una..nxt at most (the responder keeps 32768) */

/*
 * The requester's loss state. One writer, sv__retx_move() (roce_retx.c), which checks each
 * move against its table, logs it at debug level and refuses one the table lacks (a bug,
 * logged as an error):
 *   STEADY -> RECOVERY      a loss: a NAK, a SACK or the ACK timer opens an episode,
 *                           which cuts the window at most once (doc/congestion.md)
 *   RECOVERY -> STEADY      una passed the highest PSN sent when the episode began
 *   RECOVERY -> RECOVERY    the timer fired inside an episode: a new one starts from una
 * An RNR wait (rnr_until_ns) is a deadline beside this state, not part of it: an RNR NAK
 * may come in either state and leaves the episode as it is (IBA 9.7.5.2.8).
 */
enum sv__retx_state {
	SV__RETX_STEADY,
	SV__RETX_RECOVERY,
	SV__RETX_NSTATES
};

struct sv__retx {
	bool sr;			/* selective repeat (else go-back-N) */
	uint32_t una;			/* oldest unacknowledged PSN */
	uint32_t nxt;			/* first PSN never sent */
	uint32_t snd;			/* next PSN to send in sequence (< nxt: resending) */
	uint64_t rto_ns;		/* local ACK timeout; 0 = no timer (timeout 0) */
	uint64_t deadline_ns;		/* retransmission deadline; 0 = not armed */
	uint64_t rnr_until_ns;		/* RNR wait in progress until then; 0 = none */
	uint8_t retry_cnt, rnr_retry;	/* configured (3 bits each) */
	uint8_t retries_left, rnr_left;
	/* Congestion window, in packets (PSNs) outstanding: the controller's (cc), which
	 * also paces new packets (pace_ns: when pacing admits the next one, 0 = not
	 * waiting for it). */
	uint32_t cwnd, cwnd_max;
	struct sv__cc cc;
	uint64_t pace_ns;
	/* Loss recovery episode: one window cut per episode; selective repeat state. */
	enum sv__retx_state state;
	uint32_t recover_psn;		/* the episode ends when una passes it */
	uint32_t rtx_cursor;		/* SR: PSNs before it were already resent this round */
	uint64_t round_ns;		/* SR: when this round of resends began */
	/* Selective repeat's SACK bitmap (SV__RETX_WIN bits) and resend queue
	 * (SV__RETX_RTXQ PSNs), one allocation made at the first loss (sv__retx_sack()), so
	 * that a QP that never loses a packet never pays for them; sv__retx_fini() frees it.
	 * Until then, or when it could not be allocated (counted in alloc_fails; sack_denied
	 * until the next loss episode asks again), no PSN is SACKed and the timer resends
	 * what the queue would have (from una, as go-back-N does). */
	uint64_t *sacked;
	uint32_t *rtxq;
	bool sack_denied;
	unsigned rtxq_get, rtxq_put;
	uint32_t nsacked;
	/* Counters. */
	uint64_t timeouts, naks, rnr_naks, alloc_fails;
};

/* Moves r to state to (see enum sv__retx_state); false, and r unchanged, for a move the
 * table does not have. */
bool sv__retx_move(struct sv__retx *r, enum sv__retx_state to);

/* timeout: the verbs 5-bit value (4.096 us << timeout; 0 = no timer). cwnd_max 0 = the
 * cap (SV__CWND_CAP). rnr_retry 7 = retry forever. Whatever r held before is forgotten:
 * a state that ran is given back to sv__retx_fini() first. */
void sv__retx_init(struct sv__retx *r, bool sr, uint32_t psn, uint8_t timeout,
		   uint8_t retry_cnt, uint8_t rnr_retry, uint32_t cwnd_max);
/* Frees what the state allocated as it ran (the SACK bitmap, the controller's stamp
 * ring); r may be initialized again. */
void sv__retx_fini(struct sv__retx *r);

/* How many PSNs beyond nxt the window admits now (0 while an RNR wait runs). */
uint32_t sv__retx_room(const struct sv__retx *r, uint64_t now_ns);
/* New PSNs [nxt, nxt+n) went out. Arms the timer if it was idle. */
void sv__retx_sent_new(struct sv__retx *r, uint32_t n, uint64_t now_ns);
/* Anything sent (new or resent) re-arms an idle timer. */
void sv__retx_sent(struct sv__retx *r, uint64_t now_ns);
/* PSN psn was sent again (it takes pacing credit; its RTT stamp is void). */
void sv__retx_resent(struct sv__retx *r, uint32_t psn, uint64_t now_ns);
/* The first response of the READ whose request had PSN psn arrived: its RTT sample. */
void sv__retx_first_resp(struct sv__retx *r, uint32_t psn, uint64_t now_ns);
/* Whether pacing lets a new packet go now; when not, the timer is armed for it. */
bool sv__retx_pace_ok(struct sv__retx *r, uint64_t now_ns);

/* Everything up to and including psn is acknowledged. Returns the number of PSNs newly
 * acknowledged (0 for a stale or out-of-window ACK). Reloads the retry counters on
 * progress and grows the window. */
uint32_t sv__retx_ack(struct sv__retx *r, uint32_t psn, uint64_t now_ns);

/* NAK PSN sequence error naming psn (the responder's expected PSN), go-back-N: PSNs
 * before psn are acknowledged, resend from psn. -ETIMEDOUT when retry_cnt is exhausted
 * (the caller completes with RETRY_EXC_ERR). */
int sv__retx_nak_seq(struct sv__retx *r, uint32_t psn, uint64_t now_ns);

/* Selective repeat NAK: cum is the responder's expected PSN, trig the out-of-order PSN
 * it received and kept. Queues the unacknowledged PSNs in [cum, trig) not yet resent in
 * this episode. */
void sv__retx_sack(struct sv__retx *r, uint32_t cum, uint32_t trig, uint64_t now_ns);

/* RNR NAK naming psn with the responder's delay: PSNs before psn are acknowledged; wait,
 * then resend from psn. -ETIMEDOUT when rnr_retry is exhausted. */
int sv__retx_rnr(struct sv__retx *r, uint32_t psn, uint64_t delay_ns, uint64_t now_ns);

/* Resend from psn (a lost READ response or an implied NAK), without counting a retry. */
void sv__retx_rewind(struct sv__retx *r, uint32_t psn);

/* Timer service: returns 1 if the deadline passed and the window was rewound, 0 if
 * nothing was due, -ETIMEDOUT when retry_cnt is exhausted. Ends an RNR wait whose time
 * came (returns 1 then too: sending may resume), and a pacing wait (which returns 0:
 * the caller's round sends). */
int sv__retx_on_timer(struct sv__retx *r, uint64_t now_ns);

/* The earliest time on_timer has something to do (a deadline, an RNR wait's end, the
 * pacing time); 0 = nothing armed. */
uint64_t sv__retx_next_ns(const struct sv__retx *r);

bool sv__retx_is_sacked(const struct sv__retx *r, uint32_t psn);
/* Next queued selective retransmission; false when none. */
bool sv__retx_pop(struct sv__retx *r, uint32_t *psn);

/* IBA RNR timer code (AETH syndrome low 5 bits) to nanoseconds (doc/wire-roce.md 5). */
uint64_t sv__rnr_code_ns(unsigned code);

#endif
