/*
 * test_apps_qperf.c — qperf with -cm1 (its RC tests connected by rdma_cm) on the
 * drop-ins: a qperf server and a client, both through svrun, on 127.0.0.1. The server
 * binds its rdma_cm id to port 0 and sends the port rdma_get_src_port gives to the
 * client before it listens, so the port must be taken at bind time (sv_cm_bind, issue
 * 12). Each test must print its result, a number above 0.
 *
 * On sv_udp0 every RC test runs: rc_bw, rc_lat, rc_rdma_write_bw, rc_rdma_write_lat,
 * rc_rdma_read_bw, rc_rdma_read_lat and the two atomics, rc_compare_swap_mr and
 * rc_fetch_add_mr. qperf's ud_bw and ud_lat are not here: qperf ignores -cm1 for UD
 * (its rd_params sets use_cm 0 for every transport but RC) and addresses its peer with
 * an address handle of a LID alone, no GRH, which a RoCE port cannot route (a RoCEv2
 * packet carries the GRH's addresses as its IP header, IBA Vol 1 Annex A17), so
 * ibv_create_ah refuses it here as the kernel's verbs layer does for any RoCE port
 * (qperf ud_bw on rxe: "failed to create address handle: Invalid argument").
 *
 * On sv_tcp0 (iWARP has no atomics and no UD) the four RC tests whose sender waits
 * for its peer or consumes no receive: rc_lat, rc_rdma_write_lat, rc_rdma_read_bw and
 * rc_rdma_read_lat. qperf's rc_bw (and rc_rdma_write_bw, a Write with Immediate
 * consumes a receive too) keeps 1024 sends in flight and its server posts receives
 * again only after polling their completions, which on InfiniBand RNR NAKs pace (IBA
 * Vol 1 section 9.7.5.2.8), but iWARP has no such flow control: an untagged message
 * finding no receive is a fatal error (RFC 5041 section 7.2, "Invalid MSN - no buffer
 * available"), so there qperf's bandwidth tests fail whenever the client gets ahead
 * ("Remote invalid request"), as they would on an iWARP NIC.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"

#define RUN_S "2"		/* qperf -t: seconds per test */
#define WAIT_MS 90000		/* the client's bound for all its tests */

static const char *const progs[] = { "qperf", NULL };

/* The number test printed as its result ("<test>:\n    <what>  =  <n> <unit>"), or -1. */
static double result_of(const char *out, const char *test)
{
	char head[64];
	const char *p, *eq;
	double v;

	snprintf(head, sizeof(head), "%s:\n", test);
	for (p = strstr(out, head); p && p != out && p[-1] != '\n'; p = strstr(p + 1, head))
		;
	if (!p)
		return -1;
	p += strlen(head);
	if (!(eq = strchr(p, '=')) || memchr(p, '\n', (size_t)(eq - p)))
		return -1;
	return sscanf(eq + 1, "%lf", &v) == 1 ? v : -1;
}

static void run(const char *transport, const char *const tests[])
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", transport, "qperf", "-lp", port, NULL };
	const char *cli[24] = { "--transport", transport, "qperf", "-lp", port, "-cm1", "-t",
				RUN_S, "127.0.0.1" };
	struct apps_proc s, c;
	int n = 9, rc;

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", apps_free_port());
	for (int i = 0; tests[i]; i++)
		cli[n++] = tests[i];
	cli[n] = NULL;
	apps_start(&s, srv);
	cr_assert(apps_wait_listen(&s, atoi(port), 20000), "qperf server not listening");
	apps_start(&c, cli);
	rc = apps_wait(&c, WAIT_MS);
	apps_kill(&s);		/* a qperf server serves until it is stopped */
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect_eq(rc, 0, "client exit %d\nclient:\n%s\nserver:\n%s", rc, co, so);
	for (int i = 0; tests[i]; i++)
		cr_expect_gt(result_of(co, tests[i]), 0, "%s printed no result:\n%s\nserver:\n%s",
			     tests[i], co, so);
	free(so);
	free(co);
}

Test(apps_qperf, cm_rc_tests_on_udp, .timeout = 150)
{
	static const char *const tests[] = { "rc_bw", "rc_lat", "rc_rdma_write_bw",
					     "rc_rdma_write_lat", "rc_rdma_read_bw",
					     "rc_rdma_read_lat", "rc_compare_swap_mr",
					     "rc_fetch_add_mr", NULL };

	run("udp", tests);
}

Test(apps_qperf, cm_rc_paced_tests_on_tcp, .timeout = 150)
{
	static const char *const tests[] = { "rc_lat", "rc_rdma_write_lat", "rc_rdma_read_bw",
					     "rc_rdma_read_lat", NULL };

	run("tcp", tests);
}
