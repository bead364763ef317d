/*
 * test_iwarp_phase.c — the iWARP QP's connection phase (wire/iwarp.h, enum sv__iw_phase):
 * sv__iw_set_phase() makes the moves of the initiator's and the responder's connection
 * (RFC 5044, RFC 6581), takes a close back to IDLE or DOWN, and refuses every move its
 * table does not have, leaving the phase as it was.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "wire/iwarp.h"

static struct sv_qp qp;
static struct sv__iwqp iq;

static void setup(void)
{
	memset(&qp, 0, sizeof(qp));
	memset(&iq, 0, sizeof(iq));
	qp.qp_num = 0x123456;
	iq.qp = &qp;
}

TestSuite(iwarp_phase, .init = setup, .timeout = 10);

static void walk(const enum sv__iw_phase *path, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		sv__iw_set_phase(&iq, path[i]);
		cr_assert_eq(iq.phase, path[i], "step %u", i);
	}
}

Test(iwarp_phase, a_fresh_qp_is_idle)
{
	cr_assert_eq(iq.phase, SV__IW_IDLE);
	cr_assert_not(sv__iw_live(&iq));
}

Test(iwarp_phase, initiator_goes_open_up_down)
{
	static const enum sv__iw_phase path[] = { SV__IW_OPEN, SV__IW_UP, SV__IW_DOWN };

	walk(path, 3);
	cr_assert_not(sv__iw_live(&iq), "an ended connection is not used");
}

Test(iwarp_phase, responder_waits_for_the_first_fpdu)
{
	static const enum sv__iw_phase path[] = {
		SV__IW_OPEN, SV__IW_RTR_WAIT, SV__IW_RTR_RCVD, SV__IW_UP, SV__IW_DOWN,
	};

	for (unsigned i = 0; i < 4; i++) {
		sv__iw_set_phase(&iq, path[i]);
		cr_assert_eq(iq.phase, path[i], "step %u", i);
		cr_assert(sv__iw_live(&iq), "step %u: the engines may use the socket", i);
	}
	sv__iw_set_phase(&iq, SV__IW_DOWN);
	cr_assert_eq(iq.phase, SV__IW_DOWN);
}

Test(iwarp_phase, a_close_before_established_is_idle_again)
{
	static const enum sv__iw_phase before[] = {
		SV__IW_OPEN, SV__IW_RTR_WAIT, SV__IW_RTR_RCVD, SV__IW_UP,
	};

	for (unsigned k = 0; k < 4; k++) {
		setup();
		walk(before, k + 1);
		sv__iw_set_phase(&iq, SV__IW_IDLE);
		cr_assert_eq(iq.phase, SV__IW_IDLE, "closed from %u", k);
		sv__iw_set_phase(&iq, SV__IW_OPEN);
		cr_assert_eq(iq.phase, SV__IW_OPEN, "and may connect again from %u", k);
	}
}

Test(iwarp_phase, moves_the_table_lacks_are_refused)
{
	static const struct {
		enum sv__iw_phase at, to;
	} bad[] = {
		{ SV__IW_IDLE, SV__IW_UP },	   { SV__IW_IDLE, SV__IW_RTR_WAIT },
		{ SV__IW_IDLE, SV__IW_RTR_RCVD },  { SV__IW_IDLE, SV__IW_DOWN },
		{ SV__IW_OPEN, SV__IW_RTR_RCVD },  { SV__IW_OPEN, SV__IW_DOWN },
		{ SV__IW_RTR_WAIT, SV__IW_UP },	   { SV__IW_RTR_WAIT, SV__IW_OPEN },
		{ SV__IW_RTR_RCVD, SV__IW_RTR_WAIT }, { SV__IW_UP, SV__IW_OPEN },
		{ SV__IW_UP, SV__IW_RTR_WAIT },	   { SV__IW_DOWN, SV__IW_OPEN },
		{ SV__IW_DOWN, SV__IW_UP },	   { SV__IW_DOWN, SV__IW_IDLE },
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		iq.phase = bad[i].at;	/* placed, not moved: the start of each case */
		sv__iw_set_phase(&iq, bad[i].to);
		cr_assert_eq(iq.phase, bad[i].at, "case %u: the phase stays", i);
	}
}

Test(iwarp_phase, a_repeated_close_changes_nothing)
{
	static const enum sv__iw_phase path[] = { SV__IW_OPEN, SV__IW_UP, SV__IW_DOWN };

	walk(path, 3);
	sv__iw_set_phase(&iq, SV__IW_DOWN);
	cr_assert_eq(iq.phase, SV__IW_DOWN);
}
