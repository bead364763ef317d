/*
 * ib_hdr.c — InfiniBand transport header codecs and the opcode table for the RoCEv2 mode
 * (doc/wire-roce.md sections 2-6; IBA vol. 1 9.2-9.3 through rxe's rxe_hdr.h and
 * rxe_opcode.c). Pure byte work: no allocation, no I/O, no ICRC.
 */
#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define F(x) SV_IB_OPF_##x
#define H(x) SV_IB_HDR_##x

/* BTH plus the extended headers in h: a constant expression, for the table below. */
#define HLEN(h) (SV_BTH_LEN + \
	((h) & H(DETH) ? SV_DETH_LEN : 0) + ((h) & H(RETH) ? SV_RETH_LEN : 0) + \
	((h) & H(AETH) ? SV_AETH_LEN : 0) + ((h) & H(ATOMICETH) ? SV_ATOMICETH_LEN : 0) + \
	((h) & H(ATOMICACKETH) ? SV_ATOMICACKETH_LEN : 0) + \
	((h) & H(IMMDT) ? SV_IMMDT_LEN : 0) + ((h) & H(IETH) ? SV_IETH_LEN : 0))

#define ROW(t, tn, op, name, flags, hdrs) \
	[(t) | SV_IB_OP_##op] = { tn " " name, (flags), (hdrs), HLEN(hdrs) }

/* Sends and writes: the operations RC and UC share (doc/wire-roce.md sections 4 and 11). */
#define SEND_WRITE_ROWS(t, tn) \
	ROW(t, tn, SEND_FIRST, "SEND_FIRST", \
	    F(FIRST) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND), 0), \
	ROW(t, tn, SEND_MIDDLE, "SEND_MIDDLE", \
	    F(MIDDLE) | F(PAYLOAD) | F(REQ) | F(SEND), 0), \
	ROW(t, tn, SEND_LAST, "SEND_LAST", \
	    F(LAST) | F(PAYLOAD) | F(REQ) | F(SEND), 0), \
	ROW(t, tn, SEND_LAST_IMM, "SEND_LAST_WITH_IMMEDIATE", \
	    F(LAST) | F(PAYLOAD) | F(REQ) | F(SEND) | F(IMM), H(IMMDT)), \
	ROW(t, tn, SEND_ONLY, "SEND_ONLY", \
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND), 0), \
	ROW(t, tn, SEND_ONLY_IMM, "SEND_ONLY_WITH_IMMEDIATE", \
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND) | F(IMM), H(IMMDT)), \
	ROW(t, tn, WRITE_FIRST, "RDMA_WRITE_FIRST", \
	    F(FIRST) | F(PAYLOAD) | F(REQ) | F(WRITE), H(RETH)), \
	ROW(t, tn, WRITE_MIDDLE, "RDMA_WRITE_MIDDLE", \
	    F(MIDDLE) | F(PAYLOAD) | F(REQ) | F(WRITE), 0), \
	ROW(t, tn, WRITE_LAST, "RDMA_WRITE_LAST", \
	    F(LAST) | F(PAYLOAD) | F(REQ) | F(WRITE), 0), \
	/* Write with immediate consumes a receive WQE at its last packet. */ \
	ROW(t, tn, WRITE_LAST_IMM, "RDMA_WRITE_LAST_WITH_IMMEDIATE", \
	    F(LAST) | F(PAYLOAD) | F(RECV) | F(REQ) | F(WRITE) | F(IMM), H(IMMDT)), \
	ROW(t, tn, WRITE_ONLY, "RDMA_WRITE_ONLY", \
	    F(ONLY) | F(PAYLOAD) | F(REQ) | F(WRITE), H(RETH)), \
	ROW(t, tn, WRITE_ONLY_IMM, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", \
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(WRITE) | F(IMM), H(RETH) | H(IMMDT))

/* Every opcode we speak, indexed by opcode (doc/wire-roce.md section 4). Requests without
 * data (READ, atomics) and acknowledgements are one-packet messages, hence ONLY. */
static const struct sv_ib_opinfo optab[256] = {
	SEND_WRITE_ROWS(SV_IB_RC, "RC"),
	ROW(SV_IB_RC, "RC", READ_REQ, "RDMA_READ_REQUEST",
	    F(ONLY) | F(REQ) | F(READ), H(RETH)),
	ROW(SV_IB_RC, "RC", READ_RESP_FIRST, "RDMA_READ_RESPONSE_FIRST",
	    F(FIRST) | F(PAYLOAD) | F(RESP) | F(READ), H(AETH)),
	/* Middle read responses are the one response without an AETH. */
	ROW(SV_IB_RC, "RC", READ_RESP_MIDDLE, "RDMA_READ_RESPONSE_MIDDLE",
	    F(MIDDLE) | F(PAYLOAD) | F(RESP) | F(READ), 0),
	ROW(SV_IB_RC, "RC", READ_RESP_LAST, "RDMA_READ_RESPONSE_LAST",
	    F(LAST) | F(PAYLOAD) | F(RESP) | F(READ), H(AETH)),
	ROW(SV_IB_RC, "RC", READ_RESP_ONLY, "RDMA_READ_RESPONSE_ONLY",
	    F(ONLY) | F(PAYLOAD) | F(RESP) | F(READ), H(AETH)),
	ROW(SV_IB_RC, "RC", ACK, "ACKNOWLEDGE",
	    F(ONLY) | F(RESP), H(AETH)),
	ROW(SV_IB_RC, "RC", ATOMIC_ACK, "ATOMIC_ACKNOWLEDGE",
	    F(ONLY) | F(RESP) | F(ATOMIC), H(AETH) | H(ATOMICACKETH)),
	ROW(SV_IB_RC, "RC", CMP_SWAP, "COMPARE_SWAP",
	    F(ONLY) | F(REQ) | F(ATOMIC), H(ATOMICETH)),
	ROW(SV_IB_RC, "RC", FETCH_ADD, "FETCH_ADD",
	    F(ONLY) | F(REQ) | F(ATOMIC), H(ATOMICETH)),
	ROW(SV_IB_RC, "RC", SEND_LAST_INV, "SEND_LAST_WITH_INVALIDATE",
	    F(LAST) | F(PAYLOAD) | F(REQ) | F(SEND) | F(INV), H(IETH)),
	ROW(SV_IB_RC, "RC", SEND_ONLY_INV, "SEND_ONLY_WITH_INVALIDATE",
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND) | F(INV), H(IETH)),
	SEND_WRITE_ROWS(SV_IB_UC, "UC"),
	/* UD: single-packet sends, each with a DETH before any ImmDt. */
	ROW(SV_IB_UD, "UD", SEND_ONLY, "SEND_ONLY",
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND), H(DETH)),
	ROW(SV_IB_UD, "UD", SEND_ONLY_IMM, "SEND_ONLY_WITH_IMMEDIATE",
	    F(ONLY) | F(PAYLOAD) | F(RECV) | F(REQ) | F(SEND) | F(IMM), H(DETH) | H(IMMDT)),
};

const struct sv_ib_opinfo *sv__ib_opinfo(uint8_t opcode)
{
	return optab[opcode].name ? &optab[opcode] : NULL;
}

int sv__ib_payload_check(const struct sv_ib_opinfo *oi, size_t payload_len, uint32_t pmtu)
{
	if (!(oi->flags & F(PAYLOAD)))
		return payload_len == 0 ? 0 : -EMSGSIZE;
	if (oi->flags & (F(FIRST) | F(MIDDLE)))
		return payload_len == pmtu ? 0 : -EMSGSIZE;
	if (payload_len > pmtu)
		return -EMSGSIZE;
	if ((oi->flags & F(LAST)) && payload_len == 0)
		return -EMSGSIZE;
	return 0;
}

/* ---- single headers ---- */

/* IBA 9.2: opcode | SE M Pad:2 TVer:4 | P_Key | F B Resv6 | QPN:24 | A Resv7 | PSN:24 */
int sv__bth_decode(struct sv_bth *h, const uint8_t *p, size_t len)
{
	if (len < SV_BTH_LEN)
		return -EBADMSG;
	h->opcode = p[0];
	h->se = p[1] & 0x80;
	h->mig = p[1] & 0x40;
	h->pad = (p[1] >> 4) & 0x3;
	h->tver = p[1] & 0x0f;
	h->pkey = sv__get_be16(p + 2);
	h->fecn = p[4] & 0x80;
	h->becn = p[4] & 0x40;
	h->dest_qp = sv__get_be24(p + 5);
	h->ack_req = p[8] & 0x80;
	h->psn = sv__get_be24(p + 9);
	/* Filled first so the caller can still log what arrived. */
	if (h->tver != SV_BTH_TVER)
		return -EPROTO;
	return SV_BTH_LEN;
}

int sv__bth_encode(uint8_t *p, size_t cap, const struct sv_bth *h)
{
	if (cap < SV_BTH_LEN)
		return -ENOSPC;
	p[0] = h->opcode;
	p[1] = (uint8_t)((h->se ? 0x80 : 0) | (h->mig ? 0x40 : 0) | (h->pad & 3) << 4 |
			 SV_BTH_TVER);
	sv__put_be16(p + 2, h->pkey);
	p[4] = (uint8_t)((h->fecn ? 0x80 : 0) | (h->becn ? 0x40 : 0));
	sv__put_be24(p + 5, h->dest_qp & SV_QPN_MASK);
	p[8] = h->ack_req ? 0x80 : 0;
	sv__put_be24(p + 9, h->psn & SV_PSN_MASK);
	return SV_BTH_LEN;
}

/* IBA 9.3.2: VA:64 | R_Key:32 | DMA Length:32 */
int sv__reth_decode(struct sv_reth *h, const uint8_t *p, size_t len)
{
	if (len < SV_RETH_LEN)
		return -EBADMSG;
	h->va = sv__get_be64(p);
	h->rkey = sv__get_be32(p + 8);
	h->dma_len = sv__get_be32(p + 12);
	return SV_RETH_LEN;
}

int sv__reth_encode(uint8_t *p, size_t cap, const struct sv_reth *h)
{
	if (cap < SV_RETH_LEN)
		return -ENOSPC;
	sv__put_be64(p, h->va);
	sv__put_be32(p + 8, h->rkey);
	sv__put_be32(p + 12, h->dma_len);
	return SV_RETH_LEN;
}

bool sv__aeth_syndrome_reserved(uint8_t syndrome)
{
	/* Bit 7 is reserved; type 2 is reserved; NAK codes above 4 are reserved. */
	if (syndrome & 0x80)
		return true;
	switch (sv__aeth_type(syndrome)) {
	case SV_AETH_RESERVED:
		return true;
	case SV_AETH_NAK:
		return sv__aeth_value(syndrome) > SV_AETH_NAK_INV_RD_REQ;
	default:
		return false;
	}
}

/* IBA 9.3.5: Syndrome:8 | MSN:24 */
int sv__aeth_decode(struct sv_aeth *h, const uint8_t *p, size_t len)
{
	if (len < SV_AETH_LEN)
		return -EBADMSG;
	h->syndrome = p[0];
	h->msn = sv__get_be24(p + 1);
	if (sv__aeth_syndrome_reserved(h->syndrome))
		return -EPROTO;
	return SV_AETH_LEN;
}

int sv__aeth_encode(uint8_t *p, size_t cap, const struct sv_aeth *h)
{
	if (cap < SV_AETH_LEN)
		return -ENOSPC;
	p[0] = h->syndrome;
	sv__put_be24(p + 1, h->msn & SV_PSN_MASK);
	return SV_AETH_LEN;
}

/* IBA 9.3.3: VA:64 | R_Key:32 | Swap (Add) Data:64 | Compare Data:64 */
int sv__atomiceth_decode(struct sv_atomiceth *h, const uint8_t *p, size_t len)
{
	if (len < SV_ATOMICETH_LEN)
		return -EBADMSG;
	h->va = sv__get_be64(p);
	h->rkey = sv__get_be32(p + 8);
	h->swap_add = sv__get_be64(p + 12);
	h->compare = sv__get_be64(p + 20);
	return SV_ATOMICETH_LEN;
}

int sv__atomiceth_encode(uint8_t *p, size_t cap, const struct sv_atomiceth *h)
{
	if (cap < SV_ATOMICETH_LEN)
		return -ENOSPC;
	sv__put_be64(p, h->va);
	sv__put_be32(p + 8, h->rkey);
	sv__put_be64(p + 12, h->swap_add);
	sv__put_be64(p + 20, h->compare);
	return SV_ATOMICETH_LEN;
}

/* IBA 9.3.6: Original Remote Data:64 */
int sv__atomicacketh_decode(uint64_t *orig, const uint8_t *p, size_t len)
{
	if (len < SV_ATOMICACKETH_LEN)
		return -EBADMSG;
	*orig = sv__get_be64(p);
	return SV_ATOMICACKETH_LEN;
}

int sv__atomicacketh_encode(uint8_t *p, size_t cap, uint64_t orig)
{
	if (cap < SV_ATOMICACKETH_LEN)
		return -ENOSPC;
	sv__put_be64(p, orig);
	return SV_ATOMICACKETH_LEN;
}

/* IBA 9.3.7: opaque 32 bits, kept in network order end to end like verbs' imm_data. */
int sv__immdt_decode(uint32_t *imm_be, const uint8_t *p, size_t len)
{
	if (len < SV_IMMDT_LEN)
		return -EBADMSG;
	memcpy(imm_be, p, SV_IMMDT_LEN);
	return SV_IMMDT_LEN;
}

int sv__immdt_encode(uint8_t *p, size_t cap, uint32_t imm_be)
{
	if (cap < SV_IMMDT_LEN)
		return -ENOSPC;
	memcpy(p, &imm_be, SV_IMMDT_LEN);
	return SV_IMMDT_LEN;
}

/* IBA 9.3.8: R_Key:32 */
int sv__ieth_decode(uint32_t *rkey, const uint8_t *p, size_t len)
{
	if (len < SV_IETH_LEN)
		return -EBADMSG;
	*rkey = sv__get_be32(p);
	return SV_IETH_LEN;
}

int sv__ieth_encode(uint8_t *p, size_t cap, uint32_t rkey)
{
	if (cap < SV_IETH_LEN)
		return -ENOSPC;
	sv__put_be32(p, rkey);
	return SV_IETH_LEN;
}

/* IBA 9.3.4: Q_Key:32 | Reserved:8 | Source QP:24 */
int sv__deth_decode(struct sv_deth *h, const uint8_t *p, size_t len)
{
	if (len < SV_DETH_LEN)
		return -EBADMSG;
	h->qkey = sv__get_be32(p);
	h->src_qp = sv__get_be24(p + 5);
	return SV_DETH_LEN;
}

int sv__deth_encode(uint8_t *p, size_t cap, const struct sv_deth *h)
{
	if (cap < SV_DETH_LEN)
		return -ENOSPC;
	sv__put_be32(p, h->qkey);
	p[4] = 0;
	sv__put_be24(p + 5, h->src_qp & SV_QPN_MASK);
	return SV_DETH_LEN;
}

/* ---- whole packets ---- */

int sv__ib_pkt_decode(struct sv_ib_pkt *pkt, const uint8_t *p, size_t len)
{
	const struct sv_ib_opinfo *oi;
	size_t off, rest;
	int rc;

	rc = sv__bth_decode(&pkt->bth, p, len);
	if (rc < 0)
		return rc;
	oi = sv__ib_opinfo(pkt->bth.opcode);
	if (oi == NULL)
		return -EPROTO;
	if (len < (size_t)oi->hdr_len + SV_ICRC_LEN)
		return -EBADMSG;
	pkt->hdrs = oi->hdrs;
	pkt->hdr_len = oi->hdr_len;
	pkt->flags = oi->flags;
	off = SV_BTH_LEN;
	/* The order below is the wire order of every opcode that has several headers
	 * (doc/wire-roce.md section 3): DETH, RETH or AETH first; ImmDt or AtomicAckETH
	 * after. The length check above makes every call succeed except on a bad AETH
	 * syndrome. */
	if (oi->hdrs & H(DETH))
		off += (size_t)sv__deth_decode(&pkt->deth, p + off, len - off);
	if (oi->hdrs & H(RETH))
		off += (size_t)sv__reth_decode(&pkt->reth, p + off, len - off);
	if (oi->hdrs & H(AETH)) {
		rc = sv__aeth_decode(&pkt->aeth, p + off, len - off);
		if (rc < 0)
			return rc;
		off += (size_t)rc;
	}
	if (oi->hdrs & H(ATOMICETH))
		off += (size_t)sv__atomiceth_decode(&pkt->atomic, p + off, len - off);
	if (oi->hdrs & H(ATOMICACKETH))
		off += (size_t)sv__atomicacketh_decode(&pkt->atomic_orig, p + off, len - off);
	if (oi->hdrs & H(IMMDT))
		off += (size_t)sv__immdt_decode(&pkt->imm_be, p + off, len - off);
	if (oi->hdrs & H(IETH))
		off += (size_t)sv__ieth_decode(&pkt->ieth_rkey, p + off, len - off);

	/* Payload and pad fill whole 4-byte words before the ICRC (IBA 9.2, PadCnt). */
	rest = len - off - SV_ICRC_LEN;
	if (pkt->bth.pad > rest)
		return -EBADMSG;
	if (rest & 3)
		return -EPROTO;
	pkt->payload = p + off;
	pkt->payload_len = rest - pkt->bth.pad;
	return (int)off;
}

int sv__ib_pkt_payload_check(const struct sv_ib_pkt *pkt, uint32_t pmtu)
{
	const struct sv_ib_opinfo *oi = sv__ib_opinfo(pkt->bth.opcode);

	if (oi == NULL)
		return -EMSGSIZE;
	if (sv__ib_sr_nak(pkt, NULL))
		return 0;
	if (pmtu == 0 && (oi->flags & F(PAYLOAD)))
		return 0;
	return sv__ib_payload_check(oi, pkt->payload_len, pmtu);
}

bool sv__ib_sr_nak(const struct sv_ib_pkt *pkt, uint32_t *trigger_psn)
{
	if (pkt->bth.opcode != (SV_IB_RC | SV_IB_OP_ACK) ||
	    pkt->aeth.syndrome != sv__aeth_syndrome(SV_AETH_NAK, SV_AETH_NAK_PSN_SEQ) ||
	    pkt->payload_len != SV_IB_SR_NAK_LEN)
		return false;
	if (trigger_psn)
		*trigger_psn = sv__get_be32(pkt->payload) & SV_PSN_MASK;
	return true;
}

bool sv__ib_pkey_match(uint16_t a, uint16_t b)
{
	return (a & 0x7fff) != 0 && (a & 0x7fff) == (b & 0x7fff) && ((a | b) & 0x8000);
}

int sv__ib_hdrs_encode(uint8_t *buf, size_t cap, const struct sv_ib_pkt *pkt)
{
	const struct sv_ib_opinfo *oi = sv__ib_opinfo(pkt->bth.opcode);
	size_t off;

	if (oi == NULL)
		return -EPROTO;
	if (cap < oi->hdr_len)
		return -ENOSPC;
	/* With the room checked once, no encoder below can fail. */
	off = (size_t)sv__bth_encode(buf, cap, &pkt->bth);
	if (oi->hdrs & H(DETH))
		off += (size_t)sv__deth_encode(buf + off, cap - off, &pkt->deth);
	if (oi->hdrs & H(RETH))
		off += (size_t)sv__reth_encode(buf + off, cap - off, &pkt->reth);
	if (oi->hdrs & H(AETH))
		off += (size_t)sv__aeth_encode(buf + off, cap - off, &pkt->aeth);
	if (oi->hdrs & H(ATOMICETH))
		off += (size_t)sv__atomiceth_encode(buf + off, cap - off, &pkt->atomic);
	if (oi->hdrs & H(ATOMICACKETH))
		off += (size_t)sv__atomicacketh_encode(buf + off, cap - off, pkt->atomic_orig);
	if (oi->hdrs & H(IMMDT))
		off += (size_t)sv__immdt_encode(buf + off, cap - off, pkt->imm_be);
	if (oi->hdrs & H(IETH))
		off += (size_t)sv__ieth_encode(buf + off, cap - off, pkt->ieth_rkey);
	return (int)off;
}

/* ---- AETH value tables ---- */

/* RNR timer code -> microseconds (doc/wire-roce.md section 5; rxe rnrnak_usec, qib
 * tables). */
static const uint32_t rnr_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120,
	160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint32_t sv__rnr_timer_us(uint8_t code)
{
	return rnr_us[code & 31];
}

uint8_t sv__rnr_timer_code(uint32_t us)
{
	for (uint8_t c = 1; c < 32; c++)
		if (rnr_us[c] >= us)
			return c;
	return 0;
}

/* Credit code -> receive credits (rdmavt credit_table; doc/wire-roce.md section 5). */
static const uint16_t credits[31] = {
	0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
	384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
};

int sv__aeth_credits(uint8_t code)
{
	code &= 31;
	return code == SV_AETH_CREDIT_INVALID ? -1 : credits[code];
}
