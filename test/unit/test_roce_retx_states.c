/*
 * test_roce_retx_states.c — the UDP requester's loss state (enum sv__retx_state,
 * wire/roce_retx.h) driven by the events that move it, on simulated time: a go-back-N
 * NAK opens an episode, a second NAK inside it does not move it again, the ACK past the
 * episode's end closes it, and the ACK timer restarts an open episode in place. Each move
 * is logged at debug level; sv__retx_move() refuses the moves its table lacks with an
 * error line and leaves the state as it was. The log is read back from stderr (the
 * requester's lines; the controller logs its own phases beside them), at the
 * level each suite sets in SV_LOG before the first line (core/log.c reads it once per
 * process, and Criterion runs each test in a process of its own).
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce_retx.h"

#define MS 1000000ull

static struct sv__retx r;

static void fresh(void)
{
	/* timeout 8 (1.048576 ms), retry_cnt 7, rnr_retry 7, the default window cap */
	sv__retx_init(&r, false, 100, 8, 7, 7, 0);
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

/* The line sv__retx_move() logs for a move of r. */
static const char *line(char *buf, size_t len, const char *from, const char *to, unsigned una,
			unsigned nxt)
{
	snprintf(buf, len, "softverbs udp: requester %p: %s -> %s (una %06x nxt %06x)\n",
		 (void *)&r, from, to, una, nxt);
	return buf;
}

/* What the requester logged, its lines only: the controller (roce_cc.c) logs its own
 * phases on the same events. */
static void assert_requester_log(const char *want)
{
	static const char mine[] = "softverbs udp: requester ";
	char got[1024] = "", l[256];
	FILE *f;

	fflush(stderr);
	f = cr_get_redirected_stderr();
	while (fgets(l, sizeof(l), f))
		if (strncmp(l, mine, sizeof(mine) - 1) == 0)
			strncat(got, l, sizeof(got) - strlen(got) - 1);
	cr_assert_str_eq(got, want);
}

static void done(void)
{
	sv__retx_fini(&r);
}

TestSuite(roce_retx_state, .init = at_debug, .fini = done, .timeout = 10);

Test(roce_retx_state, a_fresh_requester_is_steady)
{
	cr_assert_eq(r.state, SV__RETX_STEADY);
}

Test(roce_retx_state, a_loss_episode_opens_once_and_closes_past_its_end)
{
	char a[160], b[160], want[320];
	uint64_t now = MS;

	sv__retx_sent_new(&r, 10, now);				/* PSNs 100..109 */
	cr_assert_eq(sv__retx_nak_seq(&r, 103, now), 0);	/* 100..102 arrived */
	cr_assert_eq(r.state, SV__RETX_RECOVERY, "a NAK opens an episode");
	cr_assert_eq(sv__retx_nak_seq(&r, 105, now), 0);
	cr_assert_eq(r.state, SV__RETX_RECOVERY, "a second NAK is inside the same episode");
	sv__retx_ack(&r, 108, now);
	cr_assert_eq(r.state, SV__RETX_RECOVERY, "109, sent before the episode, is owed");
	sv__retx_ack(&r, 109, now);
	cr_assert_eq(r.state, SV__RETX_STEADY, "una passed the episode's end");
	snprintf(want, sizeof(want), "%s%s", line(a, sizeof(a), "STEADY", "RECOVERY", 103, 110),
		 line(b, sizeof(b), "RECOVERY", "STEADY", 110, 110));
	assert_requester_log(want);
}

Test(roce_retx_state, the_timer_opens_an_episode_and_restarts_an_open_one)
{
	char a[160], b[160], want[320];
	uint64_t now = MS;

	sv__retx_sent_new(&r, 4, now);				/* PSNs 100..103 */
	now = sv__retx_next_ns(&r);
	cr_assert_eq(sv__retx_on_timer(&r, now), 1, "the first expiry resends");
	cr_assert_eq(r.state, SV__RETX_RECOVERY);
	now = sv__retx_next_ns(&r);
	cr_assert_eq(sv__retx_on_timer(&r, now), 1, "the second one too");
	cr_assert_eq(r.state, SV__RETX_RECOVERY, "a new episode in place of the open one");
	cr_assert_eq(r.recover_psn, 104);
	snprintf(want, sizeof(want), "%s%s", line(a, sizeof(a), "STEADY", "RECOVERY", 100, 104),
		 line(b, sizeof(b), "RECOVERY", "RECOVERY", 100, 104));
	assert_requester_log(want);
}

TestSuite(roce_retx_refused, .init = at_error, .fini = done, .timeout = 10);

Test(roce_retx_refused, moves_the_table_lacks_are_refused_and_logged)
{
	char want[320];

	cr_assert_not(sv__retx_move(&r, SV__RETX_STEADY), "steady has no move to itself");
	cr_assert_not(sv__retx_move(&r, SV__RETX_NSTATES), "no such state");
	cr_assert_eq(r.state, SV__RETX_STEADY, "the state stays");
	cr_assert(sv__retx_move(&r, SV__RETX_RECOVERY), "a legal move, not logged at error");
	snprintf(want, sizeof(want),
		 "softverbs udp: requester %p: no move from STEADY to STEADY\n"
		 "softverbs udp: requester %p: no move from STEADY to ?\n", (void *)&r, (void *)&r);
	assert_requester_log(want);
}
