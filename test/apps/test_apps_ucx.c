/*
 * test_apps_ucx.c — UCX on the drop-ins (ucx-utils): ucx_info -d lists sv_udp0 with its
 * rc_verbs and ud_verbs transports, and ucx_perftest's UCP tag_lat, tag_bw and
 * ucp_put_bw pass between a server and a client through svrun on 127.0.0.1 with
 * UCX_TLS=rc_verbs,ud_verbs and no other UCX setting (UCP connects over ud_verbs and
 * moves the data over rc_verbs).
 *
 * Two things UCX needs beyond the verbs calls: a character device at
 * /dev/infiniband/<dev_name> before it opens a device, which svrun provides where the
 * host has none (compat/svrun_dev.c; it says so on stderr), and, on UD, the RoCE v2
 * packet type in wc.sl (compat/verbs_cq.c, roce_pkt_type), without which it drops every
 * datagram. iWARP is no UCX transport: sv_tcp0 appears as a memory domain only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "apps_util.h"

#define ITERS "1000"
#define WAIT_MS 120000

static const char *const progs[] = { "ucx_info", "ucx_perftest", NULL };
static const char *const tls_env[] = { "UCX_TLS=rc_verbs,ud_verbs", NULL };

/* What UCX checks (uct_ib_device_is_accessible: a character device, readable and
 * writable), for both devices, and svrun saying where they come from; with
 * SV_DEVNODES=0 the program runs without them. */
Test(apps_ucx, svrun_gives_dev_nodes, .timeout = 60)
{
	static const char *const off[] = { "SV_DEVNODES=0", NULL };
	const char *argv[] = { "sh", "-c", "for d in sv_tcp0 sv_udp0; do f=/dev/infiniband/$d; "
			       "test -c $f && test -r $f && test -w $f && echo node $d; done",
			       NULL };
	struct apps_proc p;
	char *out;
	int rc;

	if (access("/dev/infiniband/sv_tcp0", F_OK) == 0 ||
	    access("/dev/infiniband/sv_udp0", F_OK) == 0)
		cr_skip_test("this host has /dev/infiniband/sv_* nodes of its own");
	apps_require(progs);
	apps_require_dev_view();
	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_expect_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "node sv_tcp0\n") && strstr(out, "node sv_udp0\n"), "%s", out);
	cr_expect(strstr(out, "svrun: /dev/infiniband/{sv_tcp0,sv_udp0} for the program"), "%s",
		  out);
	free(out);
	apps_start_env(&p, off, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_expect(!strstr(out, "node ") && !strstr(out, "svrun:"), "SV_DEVNODES=0:\n%s", out);
	free(out);
}

Test(apps_ucx, info_lists_sv_udp0, .timeout = 60)
{
	static const char *const want[] = { "# Memory domain: sv_udp0\n",
					    "#      Transport: rc_verbs\n",
					    "#      Transport: ud_verbs\n",
					    "#         Device: sv_udp0:1\n", NULL };
	const char *argv[] = { "--transport", "udp", "ucx_info", "-d", NULL };
	struct apps_proc p;
	char *out;
	int rc;

	apps_require(progs);
	apps_require_dev_view();
	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_expect_eq(rc, 0, "ucx_info exit %d:\n%s", rc, out);
	for (int i = 0; want[i]; i++)
		cr_expect(strstr(out, want[i]), "ucx_info -d lacks \"%s\":\n%s", want[i], out);
	cr_expect_eq(apps_count(out, "#         Device: sv_udp0:1\n"), 2,
		     "sv_udp0:1 is the device of rc_verbs and of ud_verbs:\n%s", out);
	free(out);
}

/* The client's "Final:" row: its iteration count, and the average (usec) after it. */
static void check_final(const char *out, const char *test)
{
	const char *p = strstr(out, "Final:");
	long iters = 0;
	double avg = 0;

	cr_assert(p, "%s: no Final row:\n%s", test, out);
	cr_expect_eq(sscanf(p, "Final: %ld %*f %lf", &iters, &avg), 2, "%s: %s", test, p);
	cr_expect_eq(iters, atol(ITERS), "%s: %ld iterations:\n%s", test, iters, out);
	cr_expect_gt(avg, 0, "%s: no result:\n%s", test, out);
}

static void perftest(const char *test, const char *size)
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", "udp", "ucx_perftest", "-t", test, "-n", ITERS,
			      "-s", size, "-p", port, NULL };
	const char *cli[] = { "--transport", "udp", "ucx_perftest", "-t", test, "-n", ITERS,
			      "-s", size, "-p", port, "127.0.0.1", NULL };
	struct apps_proc s, c;
	int rs, rc;

	apps_require(progs);
	apps_require_dev_view();
	snprintf(port, sizeof(port), "%d", apps_free_port());
	apps_start_env(&s, tls_env, srv);
	cr_assert(apps_wait_listen(&s, atoi(port), 30000), "ucx_perftest server not listening");
	apps_start_env(&c, tls_env, cli);
	rc = apps_wait(&c, WAIT_MS);
	rs = apps_wait(&s, 10000);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect(rs == 0 && rc == 0, "%s: server exit %d, client exit %d\n--- server ---\n%s\n"
		  "--- client ---\n%s", test, rs, rc, so, co);
	check_final(co, test);
	free(so);
	free(co);
}

Test(apps_ucx, perftest_tag_lat, .timeout = 150)
{
	perftest("tag_lat", "8");
}

Test(apps_ucx, perftest_tag_bw, .timeout = 150)
{
	perftest("tag_bw", "65536");
}

Test(apps_ucx, perftest_ucp_put_bw, .timeout = 150)
{
	perftest("ucp_put_bw", "65536");
}
