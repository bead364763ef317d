/*
 * errors_util.c — the Terminate triples and the QP error event the error-path suites
 * expect (errors_util.h).
 */
#include <criterion/criterion.h>

#include "errors_util.h"

const struct triple T_RDMAP_INV_STAG = { SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_PROT,
					 SV_TERM_RDMAP_INV_STAG };
const struct triple T_DDP_T_INV_STAG = { SV_TERM_LAYER_DDP, SV_TERM_DDP_TAGGED,
					 SV_TERM_DDP_T_INV_STAG };
const struct triple T_DDP_T_VERSION = { SV_TERM_LAYER_DDP, SV_TERM_DDP_TAGGED,
					SV_TERM_DDP_T_INV_VERSION };
const struct triple T_DDP_NO_BUF = { SV_TERM_LAYER_DDP, SV_TERM_DDP_UNTAGGED,
				     SV_TERM_DDP_U_NO_BUFFER };
const struct triple T_DDP_TOO_LONG = { SV_TERM_LAYER_DDP, SV_TERM_DDP_UNTAGGED,
				       SV_TERM_DDP_U_TOO_LONG };
const struct triple T_DDP_U_VERSION = { SV_TERM_LAYER_DDP, SV_TERM_DDP_UNTAGGED,
					SV_TERM_DDP_U_INV_VERSION };
const struct triple T_RDMAP_OPCODE = { SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_OP,
				       SV_TERM_RDMAP_UNEXP_OPCODE };
const struct triple T_RDMAP_VERSION = { SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_OP,
					SV_TERM_RDMAP_INV_VERSION };
const struct triple T_LLP_CRC = { SV_TERM_LAYER_LLP, 0, SV_TERM_LLP_CRC };

void expect_qp_error_event(struct e2e_side *s, unsigned type_mask,
			   const struct triple *t, bool remote, const char *what)
{
	uint64_t deadline = e2e_now_ms() + E2E_WAIT_MS;
	struct sv_async_event ev;

	for (;;) {
		uint64_t now = e2e_now_ms();

		cr_assert(now < deadline && e2e_async_next(s->ctx, &ev, (int)(deadline - now)),
			  "%s: no QP error event", what);
		if (EV(ev.event_type) & QP_ERR_EVENTS)
			break;
		sv_ack_async_event(&ev);
	}
	cr_assert_eq(ev.element.qp, s->qp, "%s: event for another QP", what);
	cr_assert(EV(ev.event_type) & type_mask, "%s: async event %s not expected", what,
		  sv_event_type_str(ev.event_type));
	if (t) {
		cr_assert(ev.term_layer == t->layer && ev.term_etype == t->etype &&
				  ev.term_ecode == t->ecode,
			  "%s: Terminate %u/%u/0x%02x (%s), expected %u/%u/0x%02x (%s)", what,
			  ev.term_layer, ev.term_etype, ev.term_ecode,
			  sv__rdmap_term_str(ev.term_layer, ev.term_etype, ev.term_ecode),
			  t->layer, t->etype, t->ecode,
			  sv__rdmap_term_str(t->layer, t->etype, t->ecode));
		cr_assert_eq(ev.term_remote, remote, "%s: term_remote %u", what, ev.term_remote);
	}
	sv_ack_async_event(&ev);
}
