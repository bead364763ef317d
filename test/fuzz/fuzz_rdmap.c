/*
 * fuzz_rdmap.c — libFuzzer target for sv__rdmap_decode(). A message that decodes must
 * re-encode to the same length, and that encoding must decode to the same fields; the
 * stream-parser hint sv__rdmap_hdr_len() must agree with what the decoder consumed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/rdmap.h"

static void same_ddp(const struct sv_ddp_hdr *a, const struct sv_ddp_hdr *b)
{
	if (a->tagged != b->tagged || a->last != b->last || a->dv != b->dv ||
	    a->ulp_ctrl != b->ulp_ctrl || a->stag != b->stag || a->to != b->to ||
	    a->ulp_word != b->ulp_word || a->qn != b->qn || a->msn != b->msn || a->mo != b->mo)
		abort();
}

static void same_msg(const struct sv_rdmap_msg *a, const struct sv_rdmap_msg *b)
{
	same_ddp(&a->ddp, &b->ddp);
	if (a->rv != b->rv || a->opcode != b->opcode || a->hdr_len != b->hdr_len)
		abort();
	switch (a->opcode) {
	case SV_RDMAP_READ_REQ: {
		const struct sv_rdmap_read_req *x = &a->u.read_req, *y = &b->u.read_req;

		if (x->sink_stag != y->sink_stag || x->sink_to != y->sink_to ||
		    x->size != y->size || x->src_stag != y->src_stag || x->src_to != y->src_to)
			abort();
		break;
	}
	case SV_RDMAP_TERMINATE: {
		const struct sv_rdmap_term *x = &a->u.term, *y = &b->u.term;

		if (x->layer != y->layer || x->etype != y->etype || x->ecode != y->ecode ||
		    x->has_len != y->has_len || x->has_ddp_hdr != y->has_ddp_hdr ||
		    x->has_rdmap_hdr != y->has_rdmap_hdr || x->ddp_seg_len != y->ddp_seg_len ||
		    x->ddp_hdr_len != y->ddp_hdr_len ||
		    memcmp(x->ddp_hdr, y->ddp_hdr, sizeof(x->ddp_hdr)) != 0 ||
		    memcmp(x->rdmap_hdr, y->rdmap_hdr, sizeof(x->rdmap_hdr)) != 0)
			abort();
		break;
	}
	case SV_RDMAP_IMM:
	case SV_RDMAP_IMM_SE:
		if (memcmp(a->u.imm, b->u.imm, sizeof(a->u.imm)) != 0)
			abort();
		break;
	case SV_RDMAP_ATOMIC_REQ: {
		const struct sv_rdmap_atomic_req *x = &a->u.atomic_req, *y = &b->u.atomic_req;

		if (x->aop != y->aop || x->req_id != y->req_id || x->stag != y->stag ||
		    x->to != y->to || x->add_swap != y->add_swap ||
		    x->add_swap_mask != y->add_swap_mask || x->compare != y->compare ||
		    x->compare_mask != y->compare_mask)
			abort();
		break;
	}
	case SV_RDMAP_ATOMIC_RESP:
		if (a->u.atomic_resp.req_id != b->u.atomic_resp.req_id ||
		    a->u.atomic_resp.orig != b->u.atomic_resp.orig)
			abort();
		break;
	default:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[256];
	struct sv_rdmap_msg m, again;
	size_t hint;
	int rc = sv__rdmap_decode(&m, data, size);
	int n;

	if (rc == -EBADMSG || rc == -EPROTO)
		return 0;
	if (rc <= 0 || (size_t)rc > size || (size_t)rc != m.hdr_len)
		abort();
	/* The parser hint is exact, except that a Terminate's optional parts come on top. */
	hint = sv__rdmap_hdr_len(data[0], data[1]);
	if (m.opcode == SV_RDMAP_TERMINATE ? hint > (size_t)rc : hint != (size_t)rc)
		abort();
	n = sv__rdmap_encode(out, sizeof(out), &m);
	if (n != rc)
		abort();
	if (sv__rdmap_decode(&again, out, (size_t)n) != n)
		abort();
	/* The encoder writes versions 1 and clears reserved bits, so the control byte is
	 * the one thing that may legitimately differ. */
	m.ddp.ulp_ctrl = again.ddp.ulp_ctrl;
	same_msg(&m, &again);
	if (sv__rdmap_encode(out, (size_t)n - 1, &m) != -ENOSPC)
		abort();
	return 0;
}
