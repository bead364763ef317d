/*
 * test_roce_cm_exit.c — a process that exits with a connection still up tells its peer:
 * the library sends a DREQ for each established connection from its exit destructor, as
 * the kernel's rdma_cm does when a process's rdma_cm file closes (wire/roce_cm.c,
 * "Process exit"). Without it the peer's side stays connected for ever, since nothing
 * else tells an RC responder that its requester is gone (seen against the kernel's rxe:
 * perftest's ib_atomic_lat -R server exits without destroying its ids, and rxe's client
 * waited out its CM retries).
 *
 * The exiting peer is this binary run again with SV_TEST_EXIT_PEER set: a constructor
 * connects and calls exit() before Criterion starts, so the process ends as an
 * application's does, destructors and all.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "roce_fake_util.h"
#include "roce_util.h"

#define WAIT_MS 8000

extern char **environ;

/* The peer: "IP SERVICE_PORT UDP_PORT". Exit 0 once ESTABLISHED, without disconnecting;
 * 2 + a step number when a step fails (no Criterion here). */
static int exiting_peer(const char *spec)
{
	struct sockaddr_in dst = { .sin_family = AF_INET };
	struct sv_conn_param p = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	struct rf_dev d;
	char ip[64];
	unsigned svc, udp;

	if (sscanf(spec, "%63s %u %u", ip, &svc, &udp) != 3 ||
	    inet_pton(AF_INET, ip, &dst.sin_addr) != 1)
		return 2;
	dst.sin_port = htons((uint16_t)svc);
	if (rf_dev_open(&d, (uint16_t)udp, -1))
		return 3;
	if (sv_cm_connect(d.id, d.qp, (struct sockaddr *)&dst, &p) < 0)
		return 4;
	if (sv_cm_get_event(d.ch, &ev) < 0 || ev->event != SV_CM_EVENT_ESTABLISHED)
		return 5;
	sv_cm_ack_event(ev);
	return 0;
}

__attribute__((constructor)) static void maybe_be_the_peer(void)
{
	const char *spec = getenv("SV_TEST_EXIT_PEER");

	if (spec)
		exit(exiting_peer(spec));
}

static struct cmside b;
static uint16_t udp_port;

static void setup(void)
{
	udp_port = ru_free_port(AF_INET);
	ru_cm_open(&b, udp_port, -1, NULL, SV_QPT_RC, SV_CM_PS_TCP, 4096,
		   SV_ACCESS_LOCAL_WRITE);
}

static void teardown(void)
{
	ru_cm_close(&b);
}

TestSuite(roce_cm_exit, .init = setup, .fini = teardown);

Test(roce_cm_exit, a_peer_that_exits_connected_sends_dreq)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr = b.ip };
	struct sockaddr_storage ss;
	struct sv_conn_param ap = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_cm_event *ev;
	struct sv_qp_attr at;
	char spec[96], env[128], self[4096];
	char *argv[] = { self, NULL };
	char *envp[] = { env, NULL };
	ssize_t n;
	pid_t pid;
	int st;

	cr_assert_eq(sv_cm_listen(b.id, (struct sockaddr *)&sa, 4), 0);
	cr_assert_eq(sv_cm_local_addr(b.id, &ss), 0);
	memcpy(&sa, &ss, sizeof(sa));
	/* The peer opens on b's UDP port at the next free 127.0.0.x, as two processes
	 * on one host do without configuration. */
	snprintf(spec, sizeof(spec), "%s %u %u", inet_ntoa(b.ip), ntohs(sa.sin_port),
		 udp_port);
	snprintf(env, sizeof(env), "SV_TEST_EXIT_PEER=%s", spec);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	cr_assert_gt(n, 0);
	self[n] = '\0';
	cr_assert_eq(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);

	ev = ru_cm_event(b.ch, SV_CM_EVENT_CONNECT_REQUEST, WAIT_MS);
	b.conn = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	cr_assert_eq(sv_cm_accept(b.conn, b.qp, &ap), 0);
	ru_cm_expect(b.ch, SV_CM_EVENT_ESTABLISHED, 0, WAIT_MS);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the peer exited with %d", st);
	/* The peer is gone; its DREQ is what ends our side. */
	ru_cm_expect(b.ch, SV_CM_EVENT_DISCONNECTED, 0, WAIT_MS);
	cr_assert_eq(sv_query_qp(b.qp, &at, 0, NULL), 0);
	cr_assert_eq(at.qp_state, SV_QPS_ERR);
}
