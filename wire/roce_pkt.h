/*
 * roce_pkt.h — the RoCEv2 packet pieces the UDP transport needs: BTH and the extension
 * headers of the RC opcodes (IBA vol. 1 9.2-9.4, spec/roce.md sections 2-5), the pad
 * rule and the ICRC (section 9: CRC-32 over a masked pseudo IPv4/UDP header, the BTH
 * with byte 4 masked, the rest of the headers, payload and pad).
 *
 * Local to the transport: a byte-helper codec with no allocation and no I/O, decoding
 * into a host-order struct. The shared codec (wire/ib_hdr.h) was not on main when this
 * transport was written; these helpers cover exactly the RC opcode set used here.
 */
#ifndef SV_WIRE_ROCE_PKT_H
#define SV_WIRE_ROCE_PKT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "wire/byteorder.h"

#define SV__ROCE_PORT 4791		/* IANA RoCEv2 UDP destination port */
#define SV__BTH_LEN 12
#define SV__RETH_LEN 16
#define SV__AETH_LEN 4
#define SV__ATOMETH_LEN 28
#define SV__ATOMACK_LEN 8
#define SV__IMM_LEN 4
#define SV__IETH_LEN 4
#define SV__ICRC_LEN 4
#define SV__ROCE_MAX_HDR (SV__BTH_LEN + SV__ATOMETH_LEN)	/* largest RC header stack */
#define SV__PSN_MASK 0xffffffu
#define SV__PKEY_DEFAULT 0xffff

/* RC opcodes (spec/roce.md 4). */
enum {
	SV__OP_SEND_FIRST = 0x00,
	SV__OP_SEND_MIDDLE = 0x01,
	SV__OP_SEND_LAST = 0x02,
	SV__OP_SEND_LAST_IMM = 0x03,
	SV__OP_SEND_ONLY = 0x04,
	SV__OP_SEND_ONLY_IMM = 0x05,
	SV__OP_WRITE_FIRST = 0x06,
	SV__OP_WRITE_MIDDLE = 0x07,
	SV__OP_WRITE_LAST = 0x08,
	SV__OP_WRITE_LAST_IMM = 0x09,
	SV__OP_WRITE_ONLY = 0x0a,
	SV__OP_WRITE_ONLY_IMM = 0x0b,
	SV__OP_READ_REQ = 0x0c,
	SV__OP_READ_RESP_FIRST = 0x0d,
	SV__OP_READ_RESP_MIDDLE = 0x0e,
	SV__OP_READ_RESP_LAST = 0x0f,
	SV__OP_READ_RESP_ONLY = 0x10,
	SV__OP_ACK = 0x11,
	SV__OP_ATOMIC_ACK = 0x12,
	SV__OP_CMP_SWAP = 0x13,
	SV__OP_FETCH_ADD = 0x14,
	SV__OP_SEND_LAST_INV = 0x16,
	SV__OP_SEND_ONLY_INV = 0x17,
};

/* What each RC opcode carries (spec/roce.md 4 table). */
enum {
	SV__OPF_RETH = 1 << 0,
	SV__OPF_IMM = 1 << 1,
	SV__OPF_AETH = 1 << 2,
	SV__OPF_ATOMETH = 1 << 3,
	SV__OPF_ATOMACK = 1 << 4,
	SV__OPF_IETH = 1 << 5,
	SV__OPF_PAYLOAD = 1 << 6,
	SV__OPF_FIRST = 1 << 7,		/* starts a message */
	SV__OPF_LAST = 1 << 8,		/* ends a message */
	SV__OPF_SEND = 1 << 9,
	SV__OPF_WRITE = 1 << 10,
	SV__OPF_VALID = 1 << 11,
};

static const uint16_t sv__roce_opf[0x18] = {
#define P SV__OPF_PAYLOAD
#define V SV__OPF_VALID
	[0x00] = V | P | SV__OPF_SEND | SV__OPF_FIRST,
	[0x01] = V | P | SV__OPF_SEND,
	[0x02] = V | P | SV__OPF_SEND | SV__OPF_LAST,
	[0x03] = V | P | SV__OPF_SEND | SV__OPF_LAST | SV__OPF_IMM,
	[0x04] = V | P | SV__OPF_SEND | SV__OPF_FIRST | SV__OPF_LAST,
	[0x05] = V | P | SV__OPF_SEND | SV__OPF_FIRST | SV__OPF_LAST | SV__OPF_IMM,
	[0x06] = V | P | SV__OPF_WRITE | SV__OPF_FIRST | SV__OPF_RETH,
	[0x07] = V | P | SV__OPF_WRITE,
	[0x08] = V | P | SV__OPF_WRITE | SV__OPF_LAST,
	[0x09] = V | P | SV__OPF_WRITE | SV__OPF_LAST | SV__OPF_IMM,
	[0x0a] = V | P | SV__OPF_WRITE | SV__OPF_FIRST | SV__OPF_LAST | SV__OPF_RETH,
	[0x0b] = V | P | SV__OPF_WRITE | SV__OPF_FIRST | SV__OPF_LAST | SV__OPF_RETH |
		 SV__OPF_IMM,
	[0x0c] = V | SV__OPF_RETH | SV__OPF_FIRST | SV__OPF_LAST,
	[0x0d] = V | P | SV__OPF_AETH | SV__OPF_FIRST,
	[0x0e] = V | P,
	[0x0f] = V | P | SV__OPF_AETH | SV__OPF_LAST,
	[0x10] = V | P | SV__OPF_AETH | SV__OPF_FIRST | SV__OPF_LAST,
	/* ACK: a NAK PSN sequence error of selective repeat carries a 4-byte payload (the
	 * triggering PSN, spec/roce.md 12), so the opcode admits one. */
	[0x11] = V | P | SV__OPF_AETH,
	[0x12] = V | SV__OPF_AETH | SV__OPF_ATOMACK,
	[0x13] = V | SV__OPF_ATOMETH | SV__OPF_FIRST | SV__OPF_LAST,
	[0x14] = V | SV__OPF_ATOMETH | SV__OPF_FIRST | SV__OPF_LAST,
	[0x16] = V | P | SV__OPF_SEND | SV__OPF_LAST | SV__OPF_IETH,
	[0x17] = V | P | SV__OPF_SEND | SV__OPF_FIRST | SV__OPF_LAST | SV__OPF_IETH,
#undef P
#undef V
};

static inline unsigned sv__roce_op_flags(uint8_t op)
{
	return op < sizeof(sv__roce_opf) / sizeof(sv__roce_opf[0]) ? sv__roce_opf[op] : 0;
}

/* Header bytes after the BTH for an opcode's flags, in the order IBA 9.3 gives them:
 * RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH. */
static inline size_t sv__roce_ext_len(unsigned f)
{
	return ((f & SV__OPF_RETH) ? SV__RETH_LEN : 0) +
	       ((f & SV__OPF_ATOMETH) ? SV__ATOMETH_LEN : 0) +
	       ((f & SV__OPF_AETH) ? SV__AETH_LEN : 0) +
	       ((f & SV__OPF_ATOMACK) ? SV__ATOMACK_LEN : 0) +
	       ((f & SV__OPF_IMM) ? SV__IMM_LEN : 0) +
	       ((f & SV__OPF_IETH) ? SV__IETH_LEN : 0);
}

/* A decoded packet, host order. payload points into the datagram. */
struct sv__roce_pkt {
	uint8_t op;
	unsigned flags;
	bool se, ackreq;
	uint8_t pad;
	uint16_t pkey;
	uint32_t dqp, psn;
	uint64_t va;			/* RETH or AtomicETH */
	uint32_t rkey, dmalen;
	uint64_t swap_add, compare;	/* AtomicETH */
	uint8_t syndrome;		/* AETH */
	uint32_t msn;
	uint64_t orig;			/* AtomicAckETH */
	uint32_t imm;			/* ImmDt bytes as on the wire (network order value) */
	uint32_t ieth;
	const uint8_t *payload;
	uint32_t paylen;
};

/* PSNs are 24-bit serial numbers: negative when a precedes b (spec/roce.md 6). */
static inline int32_t sv__psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8);
}

static inline uint32_t sv__psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & SV__PSN_MASK;
}

/* Distance from b forward to a (mod 2^24). */
static inline uint32_t sv__psn_diff(uint32_t a, uint32_t b)
{
	return (a - b) & SV__PSN_MASK;
}

/* BTH (IBA 9.2): opcode | SE M Pad:2 TVer:4 | P_Key | F B Resv6 | DestQP:24 | A Resv7 |
 * PSN:24. */
static inline void sv__roce_bth_put(uint8_t *p, uint8_t op, bool se, unsigned pad,
				    uint32_t dqp, bool ackreq, uint32_t psn)
{
	p[0] = op;
	p[1] = (uint8_t)((se ? 0x80 : 0) | (pad & 3) << 4);
	sv__put_be16(p + 2, SV__PKEY_DEFAULT);
	p[4] = 0;
	sv__put_be24(p + 5, dqp & SV__PSN_MASK);
	p[8] = ackreq ? 0x80 : 0;
	sv__put_be24(p + 9, psn & SV__PSN_MASK);
}

static inline void sv__roce_reth_put(uint8_t *p, uint64_t va, uint32_t rkey, uint32_t len)
{
	sv__put_be64(p, va);
	sv__put_be32(p + 8, rkey);
	sv__put_be32(p + 12, len);
}

static inline void sv__roce_aeth_put(uint8_t *p, uint8_t syndrome, uint32_t msn)
{
	p[0] = syndrome;
	sv__put_be24(p + 1, msn & SV__PSN_MASK);
}

/*
 * Decodes a datagram (BTH .. pad, the ICRC already stripped). -EBADMSG when short or
 * inconsistent, -EPROTO for what is well formed but not ours (TVer, P_Key, opcode
 * outside the RC set).
 */
static inline int sv__roce_decode(struct sv__roce_pkt *k, const uint8_t *p, size_t len)
{
	size_t ext, off;
	unsigned f;

	if (len < SV__BTH_LEN)
		return -EBADMSG;
	if ((p[1] & 0x0f) != 0)		/* TVer: only 0 is defined */
		return -EPROTO;
	k->op = p[0];
	k->flags = f = sv__roce_op_flags(k->op);
	if (!(f & SV__OPF_VALID))
		return -EPROTO;
	k->se = p[1] & 0x80;
	k->pad = (p[1] >> 4) & 3;
	k->pkey = sv__get_be16(p + 2);
	/* P_Key match (IBA 10.9.3): low 15 bits equal; we only use the default key. */
	if ((k->pkey & 0x7fff) != 0x7fff)
		return -EPROTO;
	k->dqp = sv__get_be24(p + 5);
	k->ackreq = p[8] & 0x80;
	k->psn = sv__get_be24(p + 9);
	ext = sv__roce_ext_len(f);
	if (len < SV__BTH_LEN + ext)
		return -EBADMSG;
	off = SV__BTH_LEN;
	if (f & SV__OPF_RETH) {
		k->va = sv__get_be64(p + off);
		k->rkey = sv__get_be32(p + off + 8);
		k->dmalen = sv__get_be32(p + off + 12);
		off += SV__RETH_LEN;
	}
	if (f & SV__OPF_ATOMETH) {
		k->va = sv__get_be64(p + off);
		k->rkey = sv__get_be32(p + off + 8);
		k->swap_add = sv__get_be64(p + off + 12);
		k->compare = sv__get_be64(p + off + 20);
		off += SV__ATOMETH_LEN;
	}
	if (f & SV__OPF_AETH) {
		k->syndrome = p[off];
		k->msn = sv__get_be24(p + off + 1);
		off += SV__AETH_LEN;
	}
	if (f & SV__OPF_ATOMACK) {
		k->orig = sv__get_be64(p + off);
		off += SV__ATOMACK_LEN;
	}
	if (f & SV__OPF_IMM) {
		memcpy(&k->imm, p + off, 4);	/* opaque: kept in network order */
		off += SV__IMM_LEN;
	}
	if (f & SV__OPF_IETH) {
		k->ieth = sv__get_be32(p + off);
		off += SV__IETH_LEN;
	}
	if (!(f & SV__OPF_PAYLOAD) && len != off)
		return -EBADMSG;
	if (len - off < k->pad)
		return -EBADMSG;
	k->payload = p + off;
	k->paylen = (uint32_t)(len - off - k->pad);
	return 0;
}

/*
 * The RoCEv2 ICRC (spec/roce.md 9) of a datagram sent from src to dst whose UDP payload
 * is the bytes in iov (BTH first, the whole BTH in iov[0]) followed by the 4-byte ICRC.
 * The pseudo IPv4 header has what a plain unconnected socket with DF puts on the wire
 * (identification 0, flags DF) and all-ones in the masked fields (TOS, TTL, checksum);
 * the UDP checksum is masked too. Returns the CRC value; it goes on the wire
 * least-significant byte first.
 */
uint32_t sv__roce_icrc(const struct sockaddr_in *src, const struct sockaddr_in *dst,
		       const struct iovec *iov, int niov);
/* The same over given IPv4 and UDP headers as they were on the wire (the masking is
 * done here). */
uint32_t sv__roce_icrc_ip4(const uint8_t ip[20], const uint8_t udp[8],
			   const struct iovec *iov, int niov);

#endif
