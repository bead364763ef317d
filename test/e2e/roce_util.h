/*
 * roce_util.h — two UDP-transport endpoints on loopback for the test_roce_* suites:
 * each side its own device context bound to 127.0.0.1 on a free port, connected out of
 * band the way ibv_rc_pingpong does it (GID, QPN and PSN exchanged in memory, then
 * modify_qp INIT -> RTR -> RTS).
 */
#ifndef TEST_ROCE_UTIL_H
#define TEST_ROCE_UTIL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "softverbs.h"

struct rside {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	uint8_t *buf;
	size_t len;
	struct sv_mr *mr;
	uint8_t gid[16];
	uint16_t port;
	uint32_t psn;
	struct sv_qp *keyed;		/* the QP ru_aead() gave keys (a copy of a side may
				 * carry another QP) */
};

struct rlink {
	enum sv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t rd_atomic;		/* both ORD and IRD */
};

/* Whether the devices opened from now on have TLS (authenticated encryption with the
 * key exchange, doc/security.md), with sv_tls_throwaway()'s pair: every one trusts every
 * other. Off by default. */
void ru_set_tls(bool on);
/* With TLS on, the CA file devices verify their peers with instead of the throwaway
 * pair's (NULL: the throwaway's again). */
void ru_set_tls_ca(const char *path);
/* Opens a UDP-transport device on bind_addr ("": the transport's 127.0.0.x fallback) and
 * port (0: one free there now, retried if a concurrent test takes it first) with retx
 * (enum sv_retx_mode, or -1 for the default) and impair (a spec or NULL); returns the
 * port. */
uint16_t ru_open_device(struct sv_context **ctx, const char *bind_addr, uint16_t port,
			int retx, const char *impair);
/* An RC QP on pd with both queues on cq: depth WRs each, 16 SGEs, 64 bytes inline. */
struct sv_qp *ru_rc_qp(struct sv_pd *pd, struct sv_cq *cq, uint32_t depth);
/* Opens a side on 127.0.0.1: retx is enum sv_retx_mode, impair a spec or NULL. */
void ru_open(struct rside *s, int retx, const char *impair, size_t buflen, uint32_t depth);
/* The same on bind_addr ("::1" for IPv6), on a port free there. */
void ru_open_at(struct rside *s, const char *bind_addr, int retx, const char *impair,
		size_t buflen, uint32_t depth);
/* The same on port (0: a free one). */
void ru_open_port(struct rside *s, const char *bind_addr, uint16_t port, int retx,
		  const char *impair, size_t buflen, uint32_t depth);
/* A port free right now for UDP and TCP on the loopback address (127.0.0.1 or ::1) of
 * family, below the kernel's ephemeral range. */
uint16_t ru_free_port(int family);
/* Whether a UDP socket can bind ::1 (IPv6 loopback configured). */
bool ru_have_ipv6_loopback(void);
/* Where a QP connected out of band sends: the peer's GID, UDP port, QPN and first PSN. */
struct rpeer {
	const uint8_t *gid;
	uint16_t port;
	uint32_t qpn, psn;
};

/* Moves qp (in RESET) to INIT granting access, to RTR towards peer and to RTS starting at
 * sq_psn, with the parameters of link l. */
void ru_qp_to_rts(struct sv_qp *qp, unsigned access, const struct rpeer *peer,
		  uint32_t sq_psn, const struct rlink *l);
/* Moves s (in RESET) to RTS towards peer, granting every remote right. On devices with
 * TLS (ru_set_tls(), or SV_TLS=1 in the environment, as the e2e *_tls runs set it) it
 * first gives both QPs keys (ru_aead, AES-128-GCM) unless s has them: such a device
 * lets no RC QP reach RTR without. */
void ru_to_rts(struct rside *s, struct rside *peer, const struct rlink *l);
/* Turns on authenticated encryption (sv_qp_set_aead()) on the QPs of a and b, still in
 * RESET or INIT, with fresh random keys of alg: a's tx keys are b's rx keys. */
void ru_aead(struct rside *a, struct rside *b, enum sv_aead_alg alg);
/* The same, and a's keys (b's are the mirror image) into *ka. */
void ru_aead_keys(struct rside *a, struct rside *b, enum sv_aead_alg alg,
		  struct sv_aead_keys *ka);
/* Connects a and b both ways with the link parameters. */
void ru_connect(struct rside *a, struct rside *b, const struct rlink *l);
/* Next completion on s's CQ within timeout_ms (asserts one arrives). */
void ru_wait(struct rside *s, struct sv_wc *wc, long timeout_ms);
/* No completion arrives on s's CQ for ms. */
void ru_quiet(struct rside *s, long ms);
void ru_close(struct rside *s);

/* A thread that busy-polls cq, as an application spinning on its CQ does (each poll reads
 * the device's socket as that QP's poller), expecting no completion on it; err is the
 * first poll result that was not 0, polls counts the empty ones. */
struct ru_spinner {
	pthread_t t;
	struct sv_cq *cq;
	atomic_bool stop;
	atomic_bool ended;		/* the thread returned */
	atomic_uint polls;
	int err;
};

#define RU_SPIN_START_MS 60000
/* Starts it and returns once it has polled (or stopped on a completion or error). */
void ru_spinner_start(struct ru_spinner *s, struct sv_cq *cq);
/* Stops and joins it; asserts it saw nothing and polled at least once. */
void ru_spinner_stop(struct ru_spinner *s);
/* Destroys qp and deregisters mr (each unless NULL), then the CQ, the PD and the device,
 * and frees buf: the end of any side of the UDP-transport tests. */
void ru_close_dev(struct sv_context *ctx, struct sv_pd *pd, struct sv_cq *cq,
		  struct sv_qp *qp, struct sv_mr *mr, uint8_t *buf);
long ru_now_ms(void);
/* A UD QP on pd and cq, moved straight to RTS with qkey and sq_psn psn (4 SGEs, 64 bytes
 * inline). */
struct sv_qp *ru_ud_qp(struct sv_pd *pd, struct sv_cq *cq, uint32_t qkey, uint32_t psn);

/*
 * A device of the in-band CM tests. The CM finds a peer's QP1 at IP:<its own configured
 * port>, so both devices of a test open on the same port, each on its own 127.0.0.x (the
 * transport's fallback when no address is given).
 */
struct cmside {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr;		/* buflen bytes at buf */
	uint8_t *buf;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;		/* listener (passive) or connection (active) */
	struct sv_cm_id *conn;		/* passive: the id of the request */
	uint8_t gid[16];
	struct in_addr ip;		/* the address in the GID */
};

/* Opens s on port with retx (enum sv_retx_mode, or -1 for the default) and impair (a spec
 * or NULL): a 64-entry CQ; for qpt SV_QPT_RC an RC QP of 16 WRs, for SV_QPT_UD a UD QP in
 * RTS with SV_CM_UDP_QKEY (what rdma_cm does with one of its UDP port space); buflen
 * zeroed bytes registered with access; a CM channel and an id in port space ps. */
void ru_cm_open(struct cmside *s, uint16_t port, int retx, const char *impair,
		enum sv_qp_type qpt, enum sv_cm_port_space ps, size_t buflen, unsigned access);
/* Destroys what ru_cm_open made, and s->conn if set; nothing if s is not open. */
void ru_cm_close(struct cmside *s);
/* The next CM event on ch within ms, which must be of type want. The caller acks it. */
struct sv_cm_event *ru_cm_event(struct sv_cm_channel *ch, enum sv_cm_event_type want, int ms);
/* The same for an event that must carry status, which is acked here. */
void ru_cm_expect(struct sv_cm_channel *ch, enum sv_cm_event_type want, int status, int ms);
uint32_t ru_crc(const uint8_t *p, size_t n);

#endif
