/*
 * test_roce_cm_dreq.c — a DREQ outlives its id (wire/roce_cm.c, at the top and "Process
 * exit"). The peer is the hand-driven one of roce_fake_util.h: it answers the device's
 * REQ, leaves the first DREQ unanswered as if it had been lost, and answers a later one.
 * - An application that disconnects and at once destroys its id and QP, as rping does,
 *   still has its DREQ repeated until the DREP comes, and nothing follows the DREP.
 * - A process that exits right after that repeats the DREQ from its exit destructor and
 *   ends once the DREP came; when none comes it still ends, at the destructor's bound.
 * Seen against the kernel's rxe before: the interop run's loss_rping case lost softverbs'
 * one DREQ and rxe's rping server waited for ever.
 *
 * The exiting process is this binary run again with SV_TEST_DREQ_PEER set: a constructor
 * does its part and calls exit() before Criterion starts, so the process ends as an
 * application's does, destructors and all.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "roce_fake_util.h"
#include "roce_util.h"
#include "softverbs.h"

#define SERVICE 7778
#define FAKE_ID 0x77

extern char **environ;

/* Opens d on UDP port port (the fake peer's too) and connects it to the fake peer. 0, or
 * the step that failed (the exiting process has no Criterion). */
static int dev_connect(struct rf_dev *d, uint16_t port)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(SERVICE),
				   .sin_addr.s_addr = htonl(RF_IP) };
	int r = rf_dev_open(d, port, -1);

	if (r)
		return r;
	return sv_cm_connect(d->id, d->qp, (struct sockaddr *)&dst, NULL) < 0 ? 4 : 0;
}

/* Waits for ESTABLISHED, then disconnects and destroys the id and the QP at once. */
static int dev_established_then_gone(struct rf_dev *d)
{
	struct sv_cm_event *ev;

	if (sv_cm_get_event(d->ch, &ev) < 0)
		return 5;
	if (ev->event != SV_CM_EVENT_ESTABLISHED)
		return 6;
	sv_cm_ack_event(ev);
	if (sv_cm_disconnect(d->id) < 0 || sv_cm_destroy_id(d->id) < 0 ||
	    sv_destroy_qp(d->qp) < 0)
		return 7;
	return 0;
}

/* The exiting process: "PORT", exit 0 once its id and QP are gone, 2 + step on failure. */
__attribute__((constructor)) static void maybe_be_the_peer(void)
{
	const char *spec = getenv("SV_TEST_DREQ_PEER");
	struct rf_dev d = { 0 };
	unsigned port;
	int r;

	if (!spec)
		return;
	if (sscanf(spec, "%u", &port) != 1)
		exit(2);
	r = dev_connect(&d, (uint16_t)port);
	if (!r)
		r = dev_established_then_gone(&d);
	exit(r ? 2 + r : 0);
}

/* The fake peer takes the device's REQ and answers with a REP; *dev is where the device
 * is. Returns the device's communication ID. */
static uint32_t fake_accept(int fd, const struct sockaddr_in *fake, struct sockaddr_in *dev,
			    struct sv_cm_msg *m)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint8_t pkt[512];
	socklen_t l = sizeof(*dev);
	uint32_t dev_id;

	cr_assert_eq(poll(&pf, 1, RF_WAIT_MS), 1, "no REQ");
	cr_assert_eq(recvfrom(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)dev, &l),
		     12 + 8 + SV_MAD_LEN + 4);
	cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
	cr_assert_eq(m->mad.attr_id, SV_CM_ATTR_REQ);
	dev_id = m->req.local_comm_id;
	sv__cm_mad_init(m, SV_CM_ATTR_REP, m->mad.tid);
	m->rep.local_comm_id = FAKE_ID;
	m->rep.remote_comm_id = dev_id;
	m->rep.local_qpn = 0x99;
	m->rep.starting_psn = 0x1000;
	m->rep.responder_resources = 1;
	m->rep.initiator_depth = 1;
	m->rep.target_ack_delay = 15;
	m->rep.rnr_retry_count = 7;
	rf_mad(fd, fake, dev, m);
	return dev_id;
}

/* The next DREQ, which must be the device's for this connection; returns its TID. */
static uint64_t fake_dreq(int fd, uint32_t dev_id, struct sv_cm_msg *m)
{
	rf_expect_mad(fd, -1, SV_CM_ATTR_DREQ, m);
	cr_assert_eq(m->dreq.local_comm_id, dev_id);
	cr_assert_eq(m->dreq.remote_comm_id, FAKE_ID);
	cr_assert_eq(m->dreq.remote_qpn, 0x99);
	return m->mad.tid;
}

static void fake_drep(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *dev,
		      uint32_t dev_id, uint64_t tid)
{
	struct sv_cm_msg m;

	sv__cm_mad_init(&m, SV_CM_ATTR_DREP, tid);
	m.drep.local_comm_id = FAKE_ID;
	m.drep.remote_comm_id = dev_id;
	rf_mad(fd, fake, dev, &m);
}

TestSuite(roce_cm_dreq, .timeout = 60);

Test(roce_cm_dreq, repeated_after_the_id_and_its_qp_are_gone)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in fake, dev;
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	struct pollfd pf;
	struct rf_dev d = { 0 };
	uint32_t dev_id;
	uint64_t tid;
	int fd = rf_socket(port, &fake);

	cr_assert(m);
	cr_assert_eq(dev_connect(&d, port), 0);
	dev_id = fake_accept(fd, &fake, &dev, m);
	cr_assert_eq(dev_established_then_gone(&d), 0);
	tid = fake_dreq(fd, dev_id, m);		/* "lost" */
	cr_assert_eq(fake_dreq(fd, dev_id, m), tid, "the same DREQ again");
	fake_drep(fd, &fake, &dev, dev_id, tid);
	/* Answered: no more repeats (three retry intervals of wire/roce_cm.h). */
	pf = (struct pollfd){ .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&pf, 1, 800), 0, "a MAD after the DREP");
	cr_assert_eq(sv_cm_destroy_channel(d.ch), 0);
	cr_assert_eq(sv_destroy_cq(d.cq), 0);
	cr_assert_eq(sv_dealloc_pd(d.pd), 0);
	cr_assert_eq(sv_close_device(d.ctx), 0);
	close(fd);
	free(m);
}

/* Starts the exiting process on UDP port port. */
static pid_t spawn_peer(uint16_t port)
{
	char env[64], self[4096];
	char *argv[] = { self, NULL };
	char *envp[] = { env, NULL };
	ssize_t n;
	pid_t pid;

	snprintf(env, sizeof(env), "SV_TEST_DREQ_PEER=%u", port);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	cr_assert_eq(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);
	return pid;
}

Test(roce_cm_dreq, repeated_at_exit_until_the_drep)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in fake, dev;
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	uint32_t dev_id;
	uint64_t tid;
	int fd = rf_socket(port, &fake), st;
	pid_t pid;

	cr_assert(m);
	pid = spawn_peer(port);
	dev_id = fake_accept(fd, &fake, &dev, m);
	tid = fake_dreq(fd, dev_id, m);		/* "lost" */
	/* The process destroyed its id and exits now: this one comes from its destructor. */
	cr_assert_eq(fake_dreq(fd, dev_id, m), tid, "the same DREQ again");
	fake_drep(fd, &fake, &dev, dev_id, tid);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the process ended with %d", st);
	close(fd);
	free(m);
}

Test(roce_cm_dreq, a_silent_peer_does_not_hold_the_exit)
{
	uint16_t port = rf_free_port();
	struct sockaddr_in fake, dev;
	struct sv_cm_msg *m = calloc(1, sizeof(*m));
	uint8_t pkt[512];
	unsigned dreqs = 0;
	uint32_t dev_id;
	int fd = rf_socket(port, &fake), st = 0;
	pid_t pid, done = 0;

	cr_assert(m);
	pid = spawn_peer(port);
	dev_id = fake_accept(fd, &fake, &dev, m);
	/* Nothing is answered: the process must end by itself (the test's timeout is the
	 * bound here, not a figure), having repeated its DREQ at exit. */
	while (!done) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };

		if (poll(&pf, 1, 50) == 1) {
			cr_assert_eq(recv(fd, pkt, sizeof(pkt), 0), 12 + 8 + SV_MAD_LEN + 4);
			cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
			if (m->mad.attr_id == SV_CM_ATTR_DREQ && m->dreq.local_comm_id == dev_id)
				dreqs++;
		}
		done = waitpid(pid, &st, WNOHANG);
		cr_assert_geq(done, 0);
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the process ended with %d", st);
	cr_assert_geq(dreqs, 2, "the DREQ and its repeat at exit (%u seen)", dreqs);
	close(fd);
	free(m);
}
