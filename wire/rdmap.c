/*
 * rdmap.c — RDMAP message headers (RFC 5040 section 4) and the RFC 7306 extensions:
 * Read Request, Terminate, Atomic Request/Response and Immediate Data, on top of the DDP
 * header codec in ddp.c. Also the text of every Terminate error triple (RFC 5040 section
 * 7.2, RFC 5041 section 7.2, RFC 5044 section 8 and RFC 6581 section 9).
 *
 * The decoder judges only what the bytes themselves say (versions, opcode, the buffer
 * model an opcode requires, lengths: the per-opcode table of rdmap_ops.c); queue numbers,
 * MSNs and keys are checked by the engine that owns the stream state.
 */
#include "wire/rdmap.h"

#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/rdmap_ops.h"

/* RFC 5040 section 4.8 Terminate Control word: Layer | EType | ECode | M D R | reserved. */
#define TERM_SEG_LEN_LEN 2

size_t sv__rdmap_hdr_len(uint8_t ddp_ctrl, uint8_t rdmap_ctrl)
{
	const struct sv_rdmap_op *o = sv__rdmap_op(rdmap_ctrl);

	if (!o)
		return 0;
	return sv__ddp_hdr_len(ddp_ctrl) + o->rdmap_len;
}

/*
 * Terminate (RFC 5040 section 4.8). After the control word come, when D is set, the
 * 16-bit DDP Segment Length and a copy of the terminated DDP header, then, when R is set,
 * the 28-byte terminated RDMAP header. M only says whether the length field holds a
 * value, so the field is present exactly when D is: this is how Linux siw lays it out
 * (its copied header begins with the length, in the place of the MPA length field) and
 * how Wireshark parses it. The copied header's own T bit gives its size (14 or 18).
 * Returns the bytes used after the DDP header, or -EBADMSG.
 */
static int term_decode(struct sv_rdmap_term *t, const uint8_t *p, size_t len)
{
	uint32_t w = sv__get_be32(p);	/* the caller checked the control word is there */
	size_t off = SV_RDMAP_TERM_CTRL_LEN;

	t->layer = w >> 28;
	t->etype = (w >> 24) & 0xf;
	t->ecode = (w >> 16) & 0xff;
	t->has_len = w & SV_TERM_FLAG_M;
	t->has_ddp_hdr = w & SV_TERM_FLAG_D;
	t->has_rdmap_hdr = w & SV_TERM_FLAG_R;
	t->ddp_seg_len = 0;
	t->ddp_hdr_len = 0;
	memset(t->ddp_hdr, 0, sizeof(t->ddp_hdr));
	memset(t->rdmap_hdr, 0, sizeof(t->rdmap_hdr));

	if (t->has_ddp_hdr) {
		size_t hl;

		if (len < off + TERM_SEG_LEN_LEN + 1)
			return -EBADMSG;
		t->ddp_seg_len = sv__get_be16(p + off);
		off += TERM_SEG_LEN_LEN;
		hl = sv__ddp_hdr_len(p[off]);
		if (len < off + hl)
			return -EBADMSG;
		memcpy(t->ddp_hdr, p + off, hl);
		t->ddp_hdr_len = (uint8_t)hl;
		off += hl;
	}
	if (t->has_rdmap_hdr) {
		if (len < off + SV_RDMAP_READ_REQ_LEN)
			return -EBADMSG;
		memcpy(t->rdmap_hdr, p + off, SV_RDMAP_READ_REQ_LEN);
		off += SV_RDMAP_READ_REQ_LEN;
	}
	return (int)off;
}

static int term_encode(uint8_t *p, size_t cap, const struct sv_rdmap_term *t)
{
	size_t need = SV_RDMAP_TERM_CTRL_LEN;
	uint32_t w;

	if (t->layer > 0xf || t->etype > 0xf)
		return -EINVAL;
	if (t->has_ddp_hdr) {
		/* The decoder sizes the copy by its T bit, so the two must agree. */
		if (t->ddp_hdr_len != sv__ddp_hdr_len(t->ddp_hdr[0]))
			return -EINVAL;
		need += TERM_SEG_LEN_LEN + t->ddp_hdr_len;
	}
	if (t->has_rdmap_hdr)
		need += SV_RDMAP_READ_REQ_LEN;
	if (cap < need)
		return -ENOSPC;

	w = (uint32_t)t->layer << 28 | (uint32_t)t->etype << 24 | (uint32_t)t->ecode << 16;
	if (t->has_len)
		w |= SV_TERM_FLAG_M;
	if (t->has_ddp_hdr)
		w |= SV_TERM_FLAG_D;
	if (t->has_rdmap_hdr)
		w |= SV_TERM_FLAG_R;
	sv__put_be32(p, w);
	p += SV_RDMAP_TERM_CTRL_LEN;
	if (t->has_ddp_hdr) {
		sv__put_be16(p, t->ddp_seg_len);
		memcpy(p + TERM_SEG_LEN_LEN, t->ddp_hdr, t->ddp_hdr_len);
		p += TERM_SEG_LEN_LEN + t->ddp_hdr_len;
	}
	if (t->has_rdmap_hdr)
		memcpy(p, t->rdmap_hdr, SV_RDMAP_READ_REQ_LEN);
	return (int)need;
}

int sv__rdmap_decode(struct sv_rdmap_msg *m, const uint8_t *p, size_t len)
{
	const struct sv_rdmap_op *o;
	size_t ddp_len;
	const uint8_t *h;
	int rc;

	memset(m, 0, sizeof(*m));
	if (len < 2)
		return -EBADMSG;
	m->rv = p[1] >> SV_RDMAP_RV_SHIFT;
	m->opcode = p[1] & SV_RDMAP_OPCODE_MASK;
	rc = sv__ddp_decode(&m->ddp, p, len);
	if (rc < 0)
		return rc;
	ddp_len = (size_t)rc;
	/* RFC 5040 section 4.3: RV must be 1; the 0x30 bits are reserved and ignored. */
	if (m->rv != SV_RDMAP_VERSION)
		return -EPROTO;
	o = sv__rdmap_op(m->opcode);
	if (!o || o->tagged != m->ddp.tagged)
		return -EPROTO;
	if (len < ddp_len + o->rdmap_len)
		return -EBADMSG;

	h = p + ddp_len;
	switch (m->opcode) {
	case SV_RDMAP_READ_REQ:
		/* RFC 5040 section 4.4: sink STag/TO, size, source STag/TO. */
		m->u.read_req.sink_stag = sv__get_be32(h);
		m->u.read_req.sink_to = sv__get_be64(h + 4);
		m->u.read_req.size = sv__get_be32(h + 12);
		m->u.read_req.src_stag = sv__get_be32(h + 16);
		m->u.read_req.src_to = sv__get_be64(h + 20);
		break;
	case SV_RDMAP_TERMINATE:
		rc = term_decode(&m->u.term, h, len - ddp_len);
		if (rc < 0)
			return rc;
		m->hdr_len = ddp_len + (size_t)rc;
		return (int)m->hdr_len;
	case SV_RDMAP_IMM:
	case SV_RDMAP_IMM_SE:
		memcpy(m->u.imm, h, SV_RDMAP_IMM_LEN);
		break;
	case SV_RDMAP_ATOMIC_REQ:
		/* RFC 7306 section 5.1: the AOpCode is the low nibble of the first word, whose
		 * other 28 bits are reserved. */
		m->u.atomic_req.aop = h[3] & 0x0f;
		m->u.atomic_req.req_id = sv__get_be32(h + 4);
		m->u.atomic_req.stag = sv__get_be32(h + 8);
		m->u.atomic_req.to = sv__get_be64(h + 12);
		m->u.atomic_req.add_swap = sv__get_be64(h + 20);
		m->u.atomic_req.add_swap_mask = sv__get_be64(h + 28);
		m->u.atomic_req.compare = sv__get_be64(h + 36);
		m->u.atomic_req.compare_mask = sv__get_be64(h + 44);
		break;
	case SV_RDMAP_ATOMIC_RESP:
		/* RFC 7306 section 5.2: the request's identifier, then the prior value. */
		m->u.atomic_resp.req_id = sv__get_be32(h);
		m->u.atomic_resp.orig = sv__get_be64(h + 4);
		break;
	default:
		break;
	}
	m->hdr_len = ddp_len + o->rdmap_len;
	return (int)m->hdr_len;
}

int sv__rdmap_encode(uint8_t *p, size_t cap, const struct sv_rdmap_msg *m)
{
	const struct sv_rdmap_op *o = m->opcode > SV_RDMAP_OPCODE_MASK ? NULL :
				      sv__rdmap_op(m->opcode);
	struct sv_ddp_hdr ddp = m->ddp;
	size_t ddp_len, need;
	uint8_t *h;
	int rc;

	if (!o || o->tagged != ddp.tagged)
		return -EINVAL;
	if (m->opcode == SV_RDMAP_ATOMIC_REQ && m->u.atomic_req.aop > 0x0f)
		return -EINVAL;
	ddp_len = ddp.tagged ? SV_DDP_TAGGED_HDR_LEN : SV_DDP_UNTAGGED_HDR_LEN;
	need = ddp_len + o->rdmap_len;
	if (cap < need)
		return -ENOSPC;

	ddp.ulp_ctrl = SV_RDMAP_VERSION << SV_RDMAP_RV_SHIFT | m->opcode;
	sv__ddp_encode(p, cap, &ddp);		/* cannot fail: cap covers it */
	h = p + ddp_len;
	switch (m->opcode) {
	case SV_RDMAP_READ_REQ:
		sv__put_be32(h, m->u.read_req.sink_stag);
		sv__put_be64(h + 4, m->u.read_req.sink_to);
		sv__put_be32(h + 12, m->u.read_req.size);
		sv__put_be32(h + 16, m->u.read_req.src_stag);
		sv__put_be64(h + 20, m->u.read_req.src_to);
		break;
	case SV_RDMAP_TERMINATE:
		rc = term_encode(h, cap - ddp_len, &m->u.term);
		if (rc < 0)
			return rc;
		return (int)(ddp_len + (size_t)rc);
	case SV_RDMAP_IMM:
	case SV_RDMAP_IMM_SE:
		memcpy(h, m->u.imm, SV_RDMAP_IMM_LEN);
		break;
	case SV_RDMAP_ATOMIC_REQ:
		sv__put_be32(h, m->u.atomic_req.aop);
		sv__put_be32(h + 4, m->u.atomic_req.req_id);
		sv__put_be32(h + 8, m->u.atomic_req.stag);
		sv__put_be64(h + 12, m->u.atomic_req.to);
		sv__put_be64(h + 20, m->u.atomic_req.add_swap);
		sv__put_be64(h + 28, m->u.atomic_req.add_swap_mask);
		sv__put_be64(h + 36, m->u.atomic_req.compare);
		sv__put_be64(h + 44, m->u.atomic_req.compare_mask);
		break;
	case SV_RDMAP_ATOMIC_RESP:
		sv__put_be32(h, m->u.atomic_resp.req_id);
		sv__put_be64(h + 4, m->u.atomic_resp.orig);
		break;
	default:
		break;
	}
	return (int)need;
}

/* Readable names for the Terminate triples of doc/wire-iwarp.md section 4.6. */
static const struct {
	uint8_t layer, etype;
	int16_t ecode;			/* -1: any code of this layer/type */
	const char *text;
} term_text[] = {
	{ 0, 0, -1, "RDMAP local catastrophic error" },
	{ 0, 1, 0x00, "RDMAP remote protection: invalid STag" },
	{ 0, 1, 0x01, "RDMAP remote protection: base or bounds violation" },
	{ 0, 1, 0x02, "RDMAP remote protection: access rights violation" },
	{ 0, 1, 0x03, "RDMAP remote protection: STag not associated with RDMAP stream" },
	{ 0, 1, 0x04, "RDMAP remote protection: TO wrap" },
	{ 0, 1, 0x09, "RDMAP remote protection: STag cannot be invalidated" },
	{ 0, 1, 0xff, "RDMAP remote protection: unspecified error" },
	{ 0, 2, 0x05, "RDMAP remote operation: invalid RDMAP version" },
	{ 0, 2, 0x06, "RDMAP remote operation: unexpected opcode" },
	{ 0, 2, 0x07, "RDMAP remote operation: catastrophic error, local to this stream" },
	{ 0, 2, 0x08, "RDMAP remote operation: catastrophic error, global" },
	{ 0, 2, 0x09, "RDMAP remote operation: STag cannot be invalidated" },
	{ 0, 2, 0xff, "RDMAP remote operation: unspecified error" },
	{ 1, 0, 0x00, "DDP local catastrophic error" },
	{ 1, 1, 0x00, "DDP tagged buffer: invalid STag" },
	{ 1, 1, 0x01, "DDP tagged buffer: base or bounds violation" },
	{ 1, 1, 0x02, "DDP tagged buffer: STag not associated with DDP stream" },
	{ 1, 1, 0x03, "DDP tagged buffer: TO wrap" },
	{ 1, 1, 0x04, "DDP tagged buffer: invalid DDP version" },
	{ 1, 2, 0x01, "DDP untagged buffer: invalid QN" },
	{ 1, 2, 0x02, "DDP untagged buffer: invalid MSN, no buffer available" },
	{ 1, 2, 0x03, "DDP untagged buffer: invalid MSN, MSN out of range" },
	{ 1, 2, 0x04, "DDP untagged buffer: invalid MO" },
	{ 1, 2, 0x05, "DDP untagged buffer: message too long for the buffer" },
	{ 1, 2, 0x06, "DDP untagged buffer: invalid DDP version" },
	{ 2, 0, 0x01, "LLP: TCP connection closed, reset or lost" },
	{ 2, 0, 0x02, "LLP: MPA CRC error" },
	{ 2, 0, 0x03, "LLP: MPA marker and ULPDU length mismatch" },
	{ 2, 0, 0x04, "LLP: invalid MPA request or reply frame" },
	{ 2, 0, 0x05, "LLP: local catastrophic error" },
	{ 2, 0, 0x06, "LLP: insufficient IRD" },
	{ 2, 0, 0x07, "LLP: no matching RTR option" },
};

const char *sv__rdmap_term_str(uint8_t layer, uint8_t etype, uint8_t ecode)
{
	for (size_t i = 0; i < sizeof(term_text) / sizeof(term_text[0]); i++) {
		if (term_text[i].layer != layer || term_text[i].etype != etype)
			continue;
		if (term_text[i].ecode < 0 || term_text[i].ecode == ecode)
			return term_text[i].text;
	}
	return "unknown Terminate error";
}
