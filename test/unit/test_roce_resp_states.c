/*
 * test_roce_resp_states.c — the UDP responder's message state (enum sv__resp_state,
 * wire/roce.h): sv__roce_resp_move() makes the moves of its table, logging each at
 * debug level, stays put without a word, and refuses every other move with an error
 * line, leaving the state as it was; an abort (sv__roce_resp_abort) ends any message.
 * The log is read back from stderr, at the level each suite sets in SV_LOG before the
 * first line (core/log.c reads it once per process, and Criterion runs each test in a
 * process of its own).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce.h"

static struct sv_qp qp;
static struct sv__rqp q;

static void fresh(void)
{
	memset(&qp, 0, sizeof(qp));
	memset(&q, 0, sizeof(q));
	qp.qp_num = 0x123456;
	q.qp = &qp;
	cr_redirect_stderr();
}

static void at_debug(void)
{
	setenv("SV_LOG", "debug", 1);
	fresh();
}

static void at_error(void)
{
	setenv("SV_LOG", "error", 1);
	fresh();
}

TestSuite(roce_resp_state, .init = at_debug, .timeout = 10);

Test(roce_resp_state, a_fresh_responder_is_between_messages)
{
	cr_assert_eq(q.rstate, SV__RESP_IDLE);
}

Test(roce_resp_state, each_legal_move_is_made_and_logged)
{
	static const enum sv__resp_state path[] = {
		SV__RESP_IN_SEND, SV__RESP_IDLE,	/* SEND FIRST ... LAST */
		SV__RESP_IN_WRITE, SV__RESP_IDLE,	/* WRITE FIRST ... LAST */
		SV__RESP_UC_SKIP, SV__RESP_IDLE,	/* UC: a message dropped, then its end */
	};

	for (unsigned i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		cr_assert(sv__roce_resp_move(&q, path[i]), "step %u", i);
		cr_assert_eq(q.rstate, path[i], "step %u", i);
	}
	fflush(stderr);
	cr_assert_stderr_eq_str("softverbs udp: QP 123456 responder: IDLE -> IN_SEND\n"
				"softverbs udp: QP 123456 responder: IN_SEND -> IDLE\n"
				"softverbs udp: QP 123456 responder: IDLE -> IN_WRITE\n"
				"softverbs udp: QP 123456 responder: IN_WRITE -> IDLE\n"
				"softverbs udp: QP 123456 responder: IDLE -> UC_SKIP\n"
				"softverbs udp: QP 123456 responder: UC_SKIP -> IDLE\n");
}

Test(roce_resp_state, staying_is_no_move_and_says_nothing)
{
	cr_assert(sv__roce_resp_move(&q, SV__RESP_IN_SEND));
	for (int i = 0; i < 3; i++)		/* SEND MIDDLEs */
		cr_assert(sv__roce_resp_move(&q, SV__RESP_IN_SEND));
	cr_assert_eq(q.rstate, SV__RESP_IN_SEND);
	cr_assert(sv__roce_resp_move(&q, SV__RESP_IDLE));
	cr_assert(sv__roce_resp_move(&q, SV__RESP_IDLE));
	fflush(stderr);
	cr_assert_stderr_eq_str("softverbs udp: QP 123456 responder: IDLE -> IN_SEND\n"
				"softverbs udp: QP 123456 responder: IN_SEND -> IDLE\n");
}

Test(roce_resp_state, an_abort_ends_the_message_in_progress)
{
	static const enum sv__resp_state from[] = {
		SV__RESP_IN_SEND, SV__RESP_IN_WRITE, SV__RESP_UC_SKIP,
	};

	for (unsigned i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		cr_assert(sv__roce_resp_move(&q, from[i]), "case %u", i);
		sv__roce_resp_abort(&q);
		cr_assert_eq(q.rstate, SV__RESP_IDLE, "case %u: aborted to IDLE", i);
	}
	sv__roce_resp_abort(&q);
	cr_assert_eq(q.rstate, SV__RESP_IDLE, "an abort between messages stays there");
}

TestSuite(roce_resp_refused, .init = at_error, .timeout = 10);

Test(roce_resp_refused, moves_the_table_lacks_are_refused_and_logged)
{
	static const struct {
		enum sv__resp_state at, to;
	} bad[] = {
		{ SV__RESP_IN_SEND, SV__RESP_IN_WRITE },  { SV__RESP_IN_SEND, SV__RESP_UC_SKIP },
		{ SV__RESP_IN_WRITE, SV__RESP_IN_SEND },  { SV__RESP_IN_WRITE, SV__RESP_UC_SKIP },
		{ SV__RESP_UC_SKIP, SV__RESP_IN_SEND },   { SV__RESP_UC_SKIP, SV__RESP_IN_WRITE },
		{ SV__RESP_IDLE, SV__RESP_NSTATES },
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		q.rstate = bad[i].at;	/* placed, not moved: the start of each case */
		cr_assert_not(sv__roce_resp_move(&q, bad[i].to), "case %u", i);
		cr_assert_eq(q.rstate, bad[i].at, "case %u: the state stays", i);
	}
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"softverbs udp: QP 123456 responder: no move from IN_SEND to IN_WRITE\n"
		"softverbs udp: QP 123456 responder: no move from IN_SEND to UC_SKIP\n"
		"softverbs udp: QP 123456 responder: no move from IN_WRITE to IN_SEND\n"
		"softverbs udp: QP 123456 responder: no move from IN_WRITE to UC_SKIP\n"
		"softverbs udp: QP 123456 responder: no move from UC_SKIP to IN_SEND\n"
		"softverbs udp: QP 123456 responder: no move from UC_SKIP to IN_WRITE\n"
		"softverbs udp: QP 123456 responder: no move from IDLE to ?\n");
}

Test(roce_resp_refused, legal_moves_say_nothing_at_error_level)
{
	cr_assert(sv__roce_resp_move(&q, SV__RESP_IN_WRITE));
	cr_assert(sv__roce_resp_move(&q, SV__RESP_IDLE));
	fflush(stderr);
	cr_assert_stderr_eq_str("");
}
