/*
 * ib_hdr.h — InfiniBand transport headers as RoCEv2 carries them in UDP (port 4791):
 * BTH and the extended headers RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, IETH, DETH,
 * the RC/UC/UD opcode table, AETH syndromes, 24-bit PSN arithmetic and path MTUs.
 * See doc/wire-roce.md sections 2-6 (IBA vol. 1 chapter 9, as rxe implements it).
 *
 * Every decoder fills a host-order struct from a byte pointer and returns the header
 * length, -EBADMSG when the input is too short, or -EPROTO for a value the IBA forbids.
 * Every encoder returns the header length or -ENOSPC. Reserved bits are sent as zero and
 * ignored on receive. Nothing here verifies the ICRC (crypto/icrc.h does), so the codecs
 * can be fuzzed alone.
 */
#ifndef SV_WIRE_IB_HDR_H
#define SV_WIRE_IB_HDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_ROCE_UDP_PORT 4791		/* IANA "roce", RoCEv2 destination port */

#define SV_BTH_LEN 12
#define SV_RETH_LEN 16
#define SV_AETH_LEN 4
#define SV_ATOMICETH_LEN 28
#define SV_ATOMICACKETH_LEN 8
#define SV_IMMDT_LEN 4
#define SV_IETH_LEN 4
#define SV_DETH_LEN 8
#define SV_ICRC_LEN 4
/* Longest BTH + extended header stack of any opcode (BTH + AtomicETH). */
#define SV_IB_MAX_HDRS_LEN (SV_BTH_LEN + SV_ATOMICETH_LEN)

#define SV_BTH_TVER 0			/* the only transport header version */
#define SV_PKEY_DEFAULT 0xffff
#define SV_PSN_MASK 0xffffffu
#define SV_QPN_MASK 0xffffffu
#define SV_QP1_QKEY 0x80010000u		/* well-known Q_Key of the GSI QP (IBA 13.5.3) */
#define SV_IB_MAX_MSG_LEN 0x80000000u	/* 2^31: DMA lengths above are invalid requests */

/* Transport in opcode bits 7:5 (doc/wire-roce.md section 2). */
enum sv_ib_transport {
	SV_IB_RC = 0x00,
	SV_IB_UC = 0x20,
	SV_IB_RD = 0x40,
	SV_IB_UD = 0x60,
	SV_IB_CNP = 0x80,
};
#define SV_IB_TRANSPORT_MASK 0xe0
#define SV_IB_OP_MASK 0x1f

/* Operation in opcode bits 4:0 (doc/wire-roce.md section 4); opcode = transport | op. */
enum sv_ib_op {
	SV_IB_OP_SEND_FIRST = 0x00,
	SV_IB_OP_SEND_MIDDLE = 0x01,
	SV_IB_OP_SEND_LAST = 0x02,
	SV_IB_OP_SEND_LAST_IMM = 0x03,
	SV_IB_OP_SEND_ONLY = 0x04,
	SV_IB_OP_SEND_ONLY_IMM = 0x05,
	SV_IB_OP_WRITE_FIRST = 0x06,
	SV_IB_OP_WRITE_MIDDLE = 0x07,
	SV_IB_OP_WRITE_LAST = 0x08,
	SV_IB_OP_WRITE_LAST_IMM = 0x09,
	SV_IB_OP_WRITE_ONLY = 0x0a,
	SV_IB_OP_WRITE_ONLY_IMM = 0x0b,
	SV_IB_OP_READ_REQ = 0x0c,
	SV_IB_OP_READ_RESP_FIRST = 0x0d,
	SV_IB_OP_READ_RESP_MIDDLE = 0x0e,
	SV_IB_OP_READ_RESP_LAST = 0x0f,
	SV_IB_OP_READ_RESP_ONLY = 0x10,
	SV_IB_OP_ACK = 0x11,
	SV_IB_OP_ATOMIC_ACK = 0x12,
	SV_IB_OP_CMP_SWAP = 0x13,
	SV_IB_OP_FETCH_ADD = 0x14,
	SV_IB_OP_SEND_LAST_INV = 0x16,
	SV_IB_OP_SEND_ONLY_INV = 0x17,
};
#define SV_IB_OPCODE_CNP 0x81		/* RoCEv2 congestion notification packet */

/* Extended headers following BTH, in wire order (RETH before ImmDt, AETH before
 * AtomicAckETH; DETH first on UD). */
#define SV_IB_HDR_DETH 0x01
#define SV_IB_HDR_RETH 0x02
#define SV_IB_HDR_AETH 0x04
#define SV_IB_HDR_ATOMICETH 0x08
#define SV_IB_HDR_ATOMICACKETH 0x10
#define SV_IB_HDR_IMMDT 0x20
#define SV_IB_HDR_IETH 0x40

/* Opcode properties (struct sv_ib_opinfo.flags). */
/* Position in a message. With SV_IB_OPF_PAYLOAD, FIRST and MIDDLE carry exactly PMTU bytes,
 * LAST 1..PMTU, ONLY 0..PMTU; READ requests, atomics and acknowledgements are one-packet
 * messages without data (ONLY, no PAYLOAD). */
#define SV_IB_OPF_FIRST 0x0001
#define SV_IB_OPF_MIDDLE 0x0002
#define SV_IB_OPF_LAST 0x0004
#define SV_IB_OPF_ONLY 0x0008
#define SV_IB_OPF_PAYLOAD 0x0010	/* carries data (otherwise payload must be empty) */
#define SV_IB_OPF_RECV 0x0020		/* consumes a receive WQE at the responder */
#define SV_IB_OPF_REQ 0x0040		/* requester -> responder */
#define SV_IB_OPF_RESP 0x0080		/* responder -> requester (responses, ACK/NAK) */
#define SV_IB_OPF_SEND 0x0100
#define SV_IB_OPF_WRITE 0x0200
#define SV_IB_OPF_READ 0x0400
#define SV_IB_OPF_ATOMIC 0x0800
#define SV_IB_OPF_IMM 0x1000		/* completes with immediate data */
#define SV_IB_OPF_INV 0x2000		/* invalidates the IETH R_Key */
#define SV_IB_OPF_START (SV_IB_OPF_FIRST | SV_IB_OPF_ONLY)	/* begins a message */
#define SV_IB_OPF_END (SV_IB_OPF_LAST | SV_IB_OPF_ONLY)		/* ends a message */

struct sv_ib_opinfo {
	const char *name;		/* e.g. "RC SEND_ONLY", for logs and tests */
	uint16_t flags;			/* SV_IB_OPF_* */
	uint8_t hdrs;			/* SV_IB_HDR_* following BTH */
	uint8_t hdr_len;		/* BTH + those headers, bytes */
};

/*
 * The table row for opcode, or NULL when we do not speak it: RC 0x00-0x14, 0x16, 0x17;
 * UC 0x20-0x2b (SEND and WRITE only); UD 0x64, 0x65. RD, CNP and the newer FLUSH /
 * ATOMIC_WRITE opcodes are NULL.
 */
const struct sv_ib_opinfo *sv__ib_opinfo(uint8_t opcode);

/*
 * Payload length rule of one opcode for path MTU pmtu bytes (doc/wire-roce.md section 4):
 * FIRST and MIDDLE carry exactly pmtu, LAST 1..pmtu, ONLY 0..pmtu, the others nothing.
 * Returns 0 or -EMSGSIZE.
 */
int sv__ib_payload_check(const struct sv_ib_opinfo *oi, size_t payload_len, uint32_t pmtu);

/* BTH, IBA 9.2. */
struct sv_bth {
	uint8_t opcode;
	bool se;			/* solicited event */
	bool mig;			/* MigReq, ignored on receive */
	uint8_t pad;			/* 0..3 zero bytes between payload and ICRC */
	uint8_t tver;			/* 0 */
	uint16_t pkey;
	bool fecn, becn;		/* IB congestion bits; RoCEv2 sends 0 */
	uint32_t dest_qp;		/* 24 bits */
	bool ack_req;
	uint32_t psn;			/* 24 bits */
};

/* RETH, IBA 9.3.2: start of an RDMA WRITE or READ. */
struct sv_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;		/* whole message length */
};

/* AETH, IBA 9.3.5: syndrome (see helpers below) and MSN. */
struct sv_aeth {
	uint8_t syndrome;
	uint32_t msn;			/* 24 bits */
};

/* AtomicETH, IBA 9.3.3. CMP_SWAP: swap_add = swap, compare = compare.
 * FETCH_ADD: swap_add = value to add, compare unused (sent as zero). */
struct sv_atomiceth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};

/* DETH, IBA 9.3.4 (UD only). */
struct sv_deth {
	uint32_t qkey;
	uint32_t src_qp;		/* 24 bits */
};

int sv__bth_decode(struct sv_bth *h, const uint8_t *p, size_t len);
/* Writes TVer 0 and zero reserved bits; masks dest_qp/psn to 24 bits, pad to 2. */
int sv__bth_encode(uint8_t *p, size_t cap, const struct sv_bth *h);

int sv__reth_decode(struct sv_reth *h, const uint8_t *p, size_t len);
int sv__reth_encode(uint8_t *p, size_t cap, const struct sv_reth *h);
/* -EPROTO for a reserved syndrome (0x40-0x5F, 0x65-0x7F, or bit 7 set). */
int sv__aeth_decode(struct sv_aeth *h, const uint8_t *p, size_t len);
int sv__aeth_encode(uint8_t *p, size_t cap, const struct sv_aeth *h);
int sv__atomiceth_decode(struct sv_atomiceth *h, const uint8_t *p, size_t len);
int sv__atomiceth_encode(uint8_t *p, size_t cap, const struct sv_atomiceth *h);
int sv__atomicacketh_decode(uint64_t *orig, const uint8_t *p, size_t len);
int sv__atomicacketh_encode(uint8_t *p, size_t cap, uint64_t orig);
/* ImmDt: *imm_be receives the four wire bytes as they are, i.e. the network-order value
 * that verbs' imm_data carries; the encoder writes them back unchanged. */
int sv__immdt_decode(uint32_t *imm_be, const uint8_t *p, size_t len);
int sv__immdt_encode(uint8_t *p, size_t cap, uint32_t imm_be);
/* IETH: the R_Key to invalidate, host order. */
int sv__ieth_decode(uint32_t *rkey, const uint8_t *p, size_t len);
int sv__ieth_encode(uint8_t *p, size_t cap, uint32_t rkey);
int sv__deth_decode(struct sv_deth *h, const uint8_t *p, size_t len);
int sv__deth_encode(uint8_t *p, size_t cap, const struct sv_deth *h);

/*
 * One RoCEv2 packet: the UDP payload from BTH to ICRC. Only the headers named in hdrs are
 * meaningful. payload points into the decoded buffer and excludes pad and ICRC.
 */
struct sv_ib_pkt {
	struct sv_bth bth;
	uint8_t hdrs;			/* SV_IB_HDR_* present, from the opcode table */
	uint8_t hdr_len;		/* BTH + extended headers, bytes */
	uint16_t flags;			/* SV_IB_OPF_* of the opcode, from the table */
	struct sv_deth deth;
	struct sv_reth reth;
	struct sv_aeth aeth;
	struct sv_atomiceth atomic;
	uint64_t atomic_orig;		/* AtomicAckETH */
	uint32_t imm_be;		/* ImmDt, network order as on the wire */
	uint32_t ieth_rkey;		/* IETH, host order */
	const uint8_t *payload;
	size_t payload_len;
};

/*
 * Decodes the whole header stack of one packet p[0..len) (BTH through ICRC, ICRC not
 * checked). Checks: TVer 0 (-EPROTO), a known opcode (-EPROTO), every header of that
 * opcode present and room for pad and the 4-byte ICRC (-EBADMSG), payload + pad a
 * multiple of 4 (-EPROTO), AETH syndrome not reserved (-EPROTO). Does not apply the PMTU
 * rule (the QP knows its PMTU: sv__ib_payload_check). Returns hdr_len.
 */
int sv__ib_pkt_decode(struct sv_ib_pkt *pkt, const uint8_t *p, size_t len);

/*
 * The payload rule of a decoded packet on a path MTU of pmtu bytes: sv__ib_payload_check()
 * for its opcode, with one exception, the selective-repeat NAK (sv__ib_sr_nak()), an
 * ACKNOWLEDGE that carries SV_IB_SR_NAK_LEN bytes. With pmtu 0 only opcodes without data
 * are checked (they must carry none): what a receiver can tell before it knows the
 * QP, whose responder then judges the data-carrying ones itself (a length violation
 * there earns a NAK, not a silent drop). Returns 0 or -EMSGSIZE.
 */
int sv__ib_pkt_payload_check(const struct sv_ib_pkt *pkt, uint32_t pmtu);

/*
 * Selective repeat's NAK (doc/wire-roce.md section 12, a softverbs extension that stays
 * valid RoCEv2): an RC ACKNOWLEDGE with syndrome NAK PSN sequence error whose PSN is the
 * responder's expected PSN, followed by a 4-byte payload holding, big-endian in its low 24
 * bits, the PSN that arrived out of order. True for such a packet, with that PSN in
 * *trigger_psn; false for any other packet (a plain NAK has no payload).
 */
#define SV_IB_SR_NAK_LEN 4
bool sv__ib_sr_nak(const struct sv_ib_pkt *pkt, uint32_t *trigger_psn);

/*
 * P_Key match (IBA 10.9.3, doc/wire-roce.md section 2): the low 15 bits equal and not zero,
 * and at least one of the two a full member (bit 15). A receiver drops a packet whose BTH
 * P_Key does not match its QP's.
 */
bool sv__ib_pkey_match(uint16_t a, uint16_t b);

/*
 * Writes BTH and the extended headers of pkt->bth.opcode (the fields named by the opcode
 * table; pkt->hdrs is ignored and the table decides). The caller appends payload, pkt->bth.pad
 * zero bytes and the ICRC. Returns the header length, -EPROTO for an unknown opcode,
 * -ENOSPC when cap is too small.
 */
int sv__ib_hdrs_encode(uint8_t *buf, size_t cap, const struct sv_ib_pkt *pkt);

/* Pad bytes after a payload of len bytes: payload + pad is a multiple of 4. */
static inline uint8_t sv__ib_pad(size_t len)
{
	return (uint8_t)(-len & 3);
}

/* ---- PSNs: 24-bit serial numbers (doc/wire-roce.md section 6) ---- */

/* Negative when a precedes b, zero when equal, positive when a follows b. Meaningful
 * while the distance is below 2^23. */
static inline int32_t sv__psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8);
}

static inline uint32_t sv__psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SV_PSN_MASK;
}

/* Forward distance from a to b, mod 2^24. */
static inline uint32_t sv__psn_diff(uint32_t b, uint32_t a)
{
	return (b - a) & SV_PSN_MASK;
}

/* ---- AETH syndromes (doc/wire-roce.md section 5) ---- */

enum sv_aeth_type {
	SV_AETH_ACK = 0,		/* 0x00-0x1F: value = credit code */
	SV_AETH_RNR_NAK = 1,		/* 0x20-0x3F: value = RNR timer code */
	SV_AETH_RESERVED = 2,		/* 0x40-0x5F */
	SV_AETH_NAK = 3,		/* 0x60-0x7F: value = NAK code */
};

enum sv_aeth_nak {
	SV_AETH_NAK_PSN_SEQ = 0,	/* PSN sequence error */
	SV_AETH_NAK_INV_REQ = 1,	/* invalid request */
	SV_AETH_NAK_REM_ACCESS = 2,	/* remote access error */
	SV_AETH_NAK_REM_OP = 3,		/* remote operational error */
	SV_AETH_NAK_INV_RD_REQ = 4,	/* invalid RD request */
};

#define SV_AETH_CREDIT_INVALID 0x1f	/* "no credit information": what we always send */

static inline enum sv_aeth_type sv__aeth_type(uint8_t syndrome)
{
	return (enum sv_aeth_type)((syndrome >> 5) & 3);
}

static inline uint8_t sv__aeth_value(uint8_t syndrome)
{
	return syndrome & 0x1f;
}

static inline uint8_t sv__aeth_syndrome(enum sv_aeth_type type, uint8_t value)
{
	return (uint8_t)((type & 3) << 5 | (value & 0x1f));
}

/* True for syndromes the IBA leaves reserved (-EPROTO in sv__aeth_decode). */
bool sv__aeth_syndrome_reserved(uint8_t syndrome);

/* RNR timer code (0..31) -> delay in microseconds; code 0 is the longest, 655360 us. */
uint32_t sv__rnr_timer_us(uint8_t code);

/* The code of the shortest RNR delay that is at least us: 1..31, or 0 (655.36 ms) when
 * us exceeds 491520. Used to advertise min_rnr_timer given in microseconds. */
uint8_t sv__rnr_timer_code(uint32_t us);

/* AETH credit code (0..30) -> receive credits; -1 for 31 (no credit information). */
int sv__aeth_credits(uint8_t code);

/* ---- Path MTU: enum sv_mtu (softverbs.h, 1 = 256 ... 5 = 4096) <-> bytes ---- */

/* Enum -> bytes; 0 for an invalid enum. */
static inline uint32_t sv__ib_mtu_bytes(unsigned mtu)
{
	return (mtu >= 1 && mtu <= 5) ? 128u << mtu : 0;
}

/* Largest enum whose size is <= bytes; 0 when bytes < 256. */
static inline unsigned sv__ib_mtu_from_bytes(uint32_t bytes)
{
	unsigned mtu = 0;

	while (mtu < 5 && (128u << (mtu + 1)) <= bytes)
		mtu++;
	return mtu;
}

#endif
