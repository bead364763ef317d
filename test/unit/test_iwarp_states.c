/*
 * test_iwarp_states.c — the iWARP QP's state machines (wire/iwarp.h): the connection
 * phase (enum sv__iw_phase), whose sv__iw_set_phase() makes the moves of the initiator's
 * and the responder's connection (RFC 5044, RFC 6581) and takes a close back to IDLE or
 * DOWN; the end of our direction (enum sv__iw_shut) and the Terminate (enum
 * sv__iw_term). Each transition function refuses every move its table does not have,
 * leaving the state as it was.
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

TestSuite(iwarp_shut, .init = setup, .timeout = 10);

Test(iwarp_shut, asked_then_sent_and_asking_again_changes_nothing)
{
	cr_assert_eq(iq.shut, SV__IW_SHUT_NONE);
	sv__iw_shut_ask(&iq);
	cr_assert_eq(iq.shut, SV__IW_SHUT_ASKED);
	sv__iw_shut_ask(&iq);
	cr_assert_eq(iq.shut, SV__IW_SHUT_ASKED);
	sv__iw_set_shut(&iq, SV__IW_SHUT_SENT);
	cr_assert_eq(iq.shut, SV__IW_SHUT_SENT);
	sv__iw_shut_ask(&iq);
	cr_assert_eq(iq.shut, SV__IW_SHUT_SENT, "a FIN sent is not unsent");
}

Test(iwarp_shut, moves_the_table_lacks_are_refused)
{
	sv__iw_set_shut(&iq, SV__IW_SHUT_SENT);
	cr_assert_eq(iq.shut, SV__IW_SHUT_NONE, "no FIN that was not asked for");
	iq.shut = SV__IW_SHUT_SENT;	/* placed, not moved */
	sv__iw_set_shut(&iq, SV__IW_SHUT_ASKED);
	cr_assert_eq(iq.shut, SV__IW_SHUT_SENT);
	sv__iw_set_shut(&iq, SV__IW_SHUT_NONE);
	cr_assert_eq(iq.shut, SV__IW_SHUT_SENT);
}

TestSuite(iwarp_term, .init = setup, .timeout = 10);

Test(iwarp_term, queued_batched_and_queued_again)
{
	sv__iw_set_term(&iq, SV__IW_TERM_QUEUED);
	cr_assert_eq(iq.term, SV__IW_TERM_QUEUED);
	sv__iw_set_term(&iq, SV__IW_TERM_BATCHED);
	cr_assert_eq(iq.term, SV__IW_TERM_BATCHED);
	sv__iw_set_term(&iq, SV__IW_TERM_QUEUED);
	cr_assert_eq(iq.term, SV__IW_TERM_QUEUED, "a later Terminate replaces it");
	sv__iw_set_term(&iq, SV__IW_TERM_NONE);
	cr_assert_eq(iq.term, SV__IW_TERM_NONE, "an abort mid-FPDU drops it");
}

Test(iwarp_term, nothing_is_batched_that_was_not_queued)
{
	sv__iw_set_term(&iq, SV__IW_TERM_BATCHED);
	cr_assert_eq(iq.term, SV__IW_TERM_NONE);
}

/* doc/wire-iwarp.md 2.6: the payload per FPDU a connection sends. */
Test(iwarp_mulpdu, an_asked_size_is_kept_within_bounds)
{
	cr_assert_eq(sv__iw_pick_mulpdu(1000, 65483, false), 1000);
	cr_assert_eq(sv__iw_pick_mulpdu(10, 65483, false), 64);
	cr_assert_eq(sv__iw_pick_mulpdu(100000, 1460, false), SV__IW_MAX_MULPDU);
	cr_assert_eq(SV__IW_MAX_MULPDU, 65465);		/* 65535 - an Atomic Request's 70 */
}

Test(iwarp_mulpdu, picked_from_the_mss)
{
	/* Loopback's MSS: RFC 5044's MULPDU less the untagged header. */
	cr_assert_eq(sv__iw_pick_mulpdu(0, 65483, false), 65474 - 18);
	cr_assert_eq(sv__iw_pick_mulpdu(0, 65483, true), 65474 - 4 * 128 - 18);
	cr_assert_eq(sv__iw_pick_mulpdu(0, 40000, false), 40000 - 6 - 18);
	/* Past what the 16-bit ULPDU_Length holds: cut to it. */
	cr_assert_eq(sv__iw_pick_mulpdu(0, 70000, false), SV__IW_MAX_MULPDU);
	/* Ethernet's MSS, or none known (getsockopt failed): the 16 KiB floor. */
	cr_assert_eq(sv__iw_pick_mulpdu(0, 1448, false), SV__IW_MIN_MULPDU);
	cr_assert_eq(sv__iw_pick_mulpdu(0, 0, false), SV__IW_MIN_MULPDU);
	cr_assert_eq(SV__IW_MIN_MULPDU, 16384);
}
