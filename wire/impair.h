/*
 * impair.h — seeded, deterministic fault injection on the UDP transmit path: loss,
 * duplication, reordering, added delay and a bottleneck link, configured by a spec
 * string such as "loss=0.02,dup=0.01,reorder=0.02,delay_ms=10,seed=7" or
 * "rate_mbit=1000,queue_pkts=500,delay_ms=10" (sv_device_opts.impair or the SV_IMPAIR
 * environment variable).
 *
 * The bottleneck (rate_mbit=N): each datagram takes its IP length * 8 / N microseconds
 * on the link, after the datagrams before it (a token bucket of rate N that holds one
 * datagram's worth: no bursts above the rate), behind a drop-tail queue of queue_pkts
 * datagrams (default SV__IMPAIR_QUEUE_DEFAULT) that have not started on the link yet; a
 * datagram that finds the queue full is lost. It leaves the link at the end of its time
 * on it, and arrives delay_ms after that. Random loss takes datagrams before the queue,
 * a duplicate takes the link twice. Release times are exact; the transport's timer
 * releases held datagrams with millisecond resolution, so the link emulated runs at its
 * rate on average and in bursts of at most a millisecond's worth.
 *
 * It sits beside the transport: when no impairment is configured the transport never
 * calls in here (one pointer test per batch). Decisions come from a per-context PRNG in
 * packet order, so a given seed and packet sequence always meets the same faults.
 * Packets that must arrive late (delay, reorder) are copied and held in a heap ordered
 * by release time; the transport's loop sends them when due (sv__impair_flush).
 */
#ifndef SV_WIRE_IMPAIR_H
#define SV_WIRE_IMPAIR_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define SV__IMPAIR_QUEUE_DEFAULT 1000	/* Linux's default txqueuelen */

struct sv__impair_cfg {
	double loss, dup, reorder;	/* probabilities per packet, 0..1 */
	uint32_t delay_ms;		/* added to every packet */
	uint32_t rate_mbit;		/* the bottleneck's rate, 0: none */
	uint32_t queue_pkts;		/* its queue (0 in a spec: the default) */
	uint64_t seed;
};

/* Parses a spec; unknown keys or bad values are -EINVAL. An empty spec is all zero. */
int sv__impair_parse(const char *spec, struct sv__impair_cfg *cfg);
/* True when the config does anything. */
bool sv__impair_active(const struct sv__impair_cfg *cfg);

struct sv__impair_held;

struct sv__impair {
	struct sv__impair_cfg cfg;
	pthread_mutex_t lock;		/* the PRNG and the heap: senders run on any thread */
	uint64_t rng;
	uint64_t seq;
	struct sv__impair_held **heap;
	uint32_t n, cap;
	/* The bottleneck: when the link is free next, and the times at which the datagrams
	 * on it or queued for it leave it, oldest first (a ring of queue_pkts + 1). */
	uint64_t link_free_ns;
	uint64_t *q_done;
	uint32_t q_head, q_n, q_cap;
	/* What it did, for tests and logs: random losses (dropped), and losses to the full
	 * queue (queue_drops). */
	uint64_t dropped, duplicated, reordered, delayed, queue_drops;
	/* Held datagrams the socket refused when released (no QP to blame by then: the
	 * transport logs them), and the errno of the last. */
	uint64_t refused;
	int refused_errno;
};

/* 0, or -ENOMEM (the bottleneck's queue). */
int sv__impair_init(struct sv__impair *im, const struct sv__impair_cfg *cfg);
void sv__impair_fini(struct sv__impair *im);

/*
 * Sends n datagrams through the impairment: some dropped, some sent twice, some held.
 * Returns 0, or the negative errno of the first one the socket refused (the others were
 * still tried; a dropped one is never refused: a lossy link takes it). *next_ns is set to the earliest release time when something is held
 * (0 if nothing is).
 */
int sv__impair_send(struct sv__impair *im, int fd, struct mmsghdr *msgs, unsigned n,
		    uint64_t now_ns, uint64_t *next_ns);
/* Sends the held datagrams that are due. Returns the next release time (0: none). */
uint64_t sv__impair_flush(struct sv__impair *im, int fd, uint64_t now_ns);

#endif
