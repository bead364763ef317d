/*
 * svcases.h — what svcases.c (the two processes and their control channel) and
 * svcases_cases.c (the cases) share. test/interop/README.md describes the program.
 *
 * Both sides run the same case at once: the client names it on the control channel, the
 * server prepares its memory and answers READY with its buffer's address, rkey and
 * length, the client connects through the CM and runs the operations, ends the
 * connection and asks CHECK, and the server checks what arrived in its memory and
 * answers PASS or FAIL with the reason. Only the public sv_* API is used, so the same
 * program runs on every transport sv_open_device() offers.
 */
#ifndef SVCASES_H
#define SVCASES_H

#include "sv_tool.h"

#define SC_BUF_LEN (64u * 1024)		/* each side's registered buffer */
#define SC_SEED 0x5356434153455321ull	/* the data patterns' seed ("SVCASES!") */
#define SC_GRH 40			/* a UD receive's GRH area (IBA 11.4.1.1) */
#define SC_ACCESS_ALL (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		       SV_ACCESS_REMOTE_ATOMIC)
#define SC_STEP_NS (15ull * 1000000000ull)	/* bound of every wait of a case */

/* What a case needs of the devices on both ends (else it is skipped, saying why). */
enum sc_need {
	SC_NEED_ATOMIC = 1 << 0,	/* atomic_cap not NONE on both */
};

enum sc_kind {
	SC_RC,		/* an RC connection through the CM */
	SC_UD,		/* a UD QP resolved through the CM's UDP port space */
	SC_REJECT,	/* a connection request the server rejects */
};

/* One side of a case: the connection and the memory behind it. */
struct sc_conn {
	struct sv_comp_channel *ch;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_cm_id *id;		/* the connection (or the UD resolution) */
	struct sv_cm_id *ud_listen;	/* server, SC_UD: the UDP port-space listener */
	struct sv_ah *ah;		/* client, SC_UD */
	uint32_t ud_qpn, ud_qkey;	/* client, SC_UD: where the SEND goes */
	struct sv_mr *mr;
	uint8_t *buf;
	int connected;
	uint8_t peer_priv[SV_CM_MAX_PRIVATE_DATA];	/* private data the CM delivered */
	size_t peer_priv_len;
};

/* A process: its device, PD, CM channel and (server) listener. */
struct sc_side {
	const char *prog;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cm_channel *cm;
	struct sv_cm_id *listen;
	struct sv_device_attr attr;
	int iwarp;			/* the device is an iWARP one (SV_TRANSPORT_TCP) */
	int verbose;
};

/* The server's buffer as READY announces it. */
struct sc_remote {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct sc_case {
	const char *name;
	const char *what;		/* one line for --list */
	const char *not_iwarp;		/* why it does not exist on iWARP (NULL: it does) */
	unsigned needs;			/* enum sc_need */
	enum sc_kind kind;
	unsigned srv_access;		/* the server MR's access flags; 0: every right */
	unsigned srv_recvs;		/* receives the server posts before it accepts */
	int srv_disconnects;		/* the server, not the client, ends the connection */
	uint8_t rnr_retry;		/* both ends' rnr_retry_count in the CM parameters;
					 * 0: 3 */
	int priv;			/* private data both ways, checked at each end */
	/* Fills the server's buffer before READY (NULL: zeros). */
	void (*srv_fill)(uint8_t *buf);
	/* The client's operations once connected: 0, or -1 with the reason in why. */
	int (*client)(struct sc_side *s, struct sc_conn *c, const struct sc_remote *r,
		      char *why, size_t whylen);
	/* The server's check once the client asked CHECK (the connection has ended):
	 * 0, or -1 with the reason in why. NULL: nothing to check in its memory. */
	int (*srv_check)(struct sc_side *s, struct sc_conn *c, char *why, size_t whylen);
};

extern const struct sc_case sc_cases[];
extern const size_t sc_ncases;

/* NULL when the case applies to this pair of devices, else why it does not. */
const char *sc_skip_reason(const struct sc_case *tc, const struct sc_side *s, int peer_iwarp,
			   int peer_atomic);

/* Posting and polling helpers the cases use (svcases_cases.c). */
int sc_post_send(struct sc_conn *c, struct sv_send_wr *wr, char *why, size_t whylen);
int sc_poll(struct sc_conn *c, struct sv_wc *wc, char *why, size_t whylen);

/* Private data of the CM case: n bytes of pattern tag. */
void sc_priv_fill(uint8_t *p, size_t n, uint64_t tag);

#define SC_PRIV_REQ_LEN 48	/* fits the 56 bytes an IB CM REQ leaves rdma_cm users */
#define SC_PRIV_REP_LEN 64
#define SC_PRIV_REJ_LEN 32
#define SC_TAG_PRIV_REQ 0x701
#define SC_TAG_PRIV_REP 0x702
#define SC_TAG_PRIV_REJ 0x703

#endif /* SVCASES_H */
