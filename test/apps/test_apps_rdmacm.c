/*
 * test_apps_rdmacm.c — the packaged rdmacm-utils programs on the drop-ins (sv_tcp0 and
 * sv_udp0): server and client on 127.0.0.1, both must exit 0, and what they verify is
 * checked in their output. udaddy (UD QPs, the rdma_cm UDP port space) runs on sv_udp0
 * only: an iWARP device has no UD QPs, and on sv_tcp0 it must fail at once, saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "ldd_util.h"

static const char *const progs[] = {
	"rping", "ucmatose", "rdma_server", "rdma_client", "udaddy", "mckey", "cmtime",
	"rdma_xserver", "rdma_xclient", "rstream", "riostream", "rcopy", "udpong", NULL
};

Test(apps_rdmacm, every_symbol_resolves, .timeout = 120)
{
	apps_require(progs);
	apps_ldd_check(progs);
}

/* rping -v prints every ping it receives: the server must have seen all of them, in
 * order, with the rotating pattern rping checks. */
Test(apps_rdmacm, rping_1000_verbose, .timeout = 120)
{
	char port[16], *so, *co, last[64];
	const char *srv[] = { "rping", "-s", "-a", "127.0.0.1", "-p", port, "-v", "-C", "1000",
			      NULL };
	const char *cli[] = { "rping", "-c", "-a", "127.0.0.1", "-p", port, "-v", "-C", "1000",
			      NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	apps_pair(srv, cli, p, 90000, &so, &co);
	cr_expect_eq(apps_count(so, "server ping data: rdma-ping-"), 1000, "%s", so);
	cr_expect_eq(apps_count(co, "ping data: rdma-ping-"), 1000, "%s", co);
	snprintf(last, sizeof(last), "rdma-ping-999: ");
	cr_expect(strstr(so, last), "%s", so);
	cr_expect(strstr(so, "server DISCONNECT EVENT"), "%s", so);
	free(so);
	free(co);
}

/* rping -V compares every buffer with what was sent and exits non-zero on a mismatch
 * (apps_pair asserts exit 0 on both sides). */
Test(apps_rdmacm, rping_validate, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "rping", "-s", "-a", "127.0.0.1", "-p", port, "-V", "-C", "500",
			      "-S", "4096", NULL };
	const char *cli[] = { "rping", "-c", "-a", "127.0.0.1", "-p", port, "-V", "-C", "500",
			      "-S", "4096", NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	apps_pair(srv, cli, p, 90000, &so, &co);
	cr_expect(!strstr(co, "data mismatch"), "%s", co);
	cr_expect(!strstr(so, "data mismatch"), "%s", so);
	free(so);
	free(co);
}

Test(apps_rdmacm, ucmatose, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "ucmatose", "-p", port, "-c", "2", "-C", "20", NULL };
	const char *cli[] = { "ucmatose", "-s", "127.0.0.1", "-p", port, "-c", "2", "-C", "20",
			      NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	apps_pair(srv, cli, p, 90000, &so, &co);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

/* The synchronous rdma_create_ep / rdma_get_request style, with inline sends. */
Test(apps_rdmacm, rdma_server_client, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "rdma_server", "-p", port, NULL };
	const char *cli[] = { "rdma_client", "-s", "127.0.0.1", "-p", port, NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	apps_pair(srv, cli, p, 60000, &so, &co);
	cr_expect(strstr(so, "rdma_server: end 0"), "%s", so);
	cr_expect(strstr(co, "rdma_client: end 0"), "%s", co);
	free(so);
	free(co);
}

/* The same programs on sv_udp0 (svrun --transport udp), through the UDP transport's IB
 * CM, with no configuration: the client names 127.0.0.1 as on sv_tcp0, while that
 * address is held by another softverbs process, so the server's device is some other
 * 127.0.0.x; the client's CM finds the listener host-locally (wire/roce_cm_dir.c). */
static void udp_pair(const char *const srv[], const char *const cli[], int port,
		     const char *listen_ip, int timeout_ms, char **so, char **co)
{
	struct apps_proc h;
	struct apps_cm_listener l;

	apps_hold_loopback(&h);
	apps_pair_cm(srv, cli, port, listen_ip, timeout_ms, so, co, &l);
	apps_kill(&h);
	free(apps_output(&h));
	cr_expect_str_neq(l.dev_ip, "127.0.0.1", "the server's device is not the address the "
			  "client names");
}

Test(apps_rdmacm, udp_rping_1000_verbose, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", "udp", "rping", "-s", "-a", "127.0.0.1", "-p", port,
			      "-v", "-C", "1000", NULL };
	const char *cli[] = { "--transport", "udp", "rping", "-c", "-a", "127.0.0.1", "-p", port,
			      "-v", "-C", "1000", NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	udp_pair(srv, cli, p, "127.0.0.1", 90000, &so, &co);
	cr_expect_eq(apps_count(so, "server ping data: rdma-ping-"), 1000, "%s", so);
	cr_expect_eq(apps_count(co, "ping data: rdma-ping-"), 1000, "%s", co);
	free(so);
	free(co);
}

Test(apps_rdmacm, udp_rping_validate, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", "udp", "rping", "-s", "-a", "127.0.0.1", "-p", port,
			      "-V", "-C", "300", "-S", "4096", NULL };
	const char *cli[] = { "--transport", "udp", "rping", "-c", "-a", "127.0.0.1", "-p", port,
			      "-V", "-C", "300", "-S", "4096", NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	udp_pair(srv, cli, p, "127.0.0.1", 90000, &so, &co);
	cr_expect(!strstr(co, "data mismatch"), "%s", co);
	cr_expect(!strstr(so, "data mismatch"), "%s", so);
	free(so);
	free(co);
}

/* ucmatose's server listens on the wildcard. */
Test(apps_rdmacm, udp_ucmatose, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", "udp", "ucmatose", "-p", port, "-c", "2", "-C", "20",
			      NULL };
	const char *cli[] = { "--transport", "udp", "ucmatose", "-s", "127.0.0.1", "-p", port,
			      "-c", "2", "-C", "20", NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	udp_pair(srv, cli, p, "0.0.0.0", 90000, &so, &co);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

Test(apps_rdmacm, udp_rdma_server_client, .timeout = 120)
{
	char port[16], *so, *co;
	const char *srv[] = { "--transport", "udp", "rdma_server", "-p", port, NULL };
	const char *cli[] = { "--transport", "udp", "rdma_client", "-s", "127.0.0.1", "-p", port,
			      NULL };
	int p = apps_free_port();

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	udp_pair(srv, cli, p, NULL, 60000, &so, &co);
	cr_expect(strstr(so, "rdma_server: end 0"), "%s", so);
	cr_expect(strstr(co, "rdma_client: end 0"), "%s", co);
	free(so);
	free(co);
}

/* udaddy: the client resolves the server's UD QP through the rdma_cm UDP port space
 * (SIDR), sends -C messages to it, and the server answers each connection's messages
 * with as many of its own, addressed from the first receive's GRH. Both count their
 * completions before "data transfers complete"; four connections at once. udaddy's
 * service port is always 7174, so that tests running at once do not meet, the server
 * listens on a loopback address of its own choosing (-b), which is not its device's. */
Test(apps_rdmacm, udp_udaddy, .timeout = 120)
{
	char a[32], *so, *co;
	const char *srv[] = { "--transport", "udp", "udaddy", "-b", a, "-c", "4", "-C", "50", "-S",
			      "1024", NULL };
	const char *cli[] = { "--transport", "udp", "udaddy", "-s", a, "-c", "4", "-C", "50",
			      "-S", "1024", NULL };

	apps_require(progs);
	snprintf(a, sizeof(a), "%s", apps_free_cm_addr(7174));
	udp_pair(srv, cli, 7174, a, 60000, &so, &co);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(co, "data transfers complete"), "%s", co);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

/* The IPoIB port space (-P ipoib) is a UD port space as well. */
Test(apps_rdmacm, udp_udaddy_ipoib_port_space, .timeout = 120)
{
	char a[32], *so, *co;
	const char *srv[] = { "--transport", "udp", "udaddy", "-P", "ipoib", "-b", a, NULL };
	const char *cli[] = { "--transport", "udp", "udaddy", "-P", "ipoib", "-s", a, NULL };

	apps_require(progs);
	snprintf(a, sizeof(a), "%s", apps_free_cm_addr(7174));
	udp_pair(srv, cli, 7174, a, 60000, &so, &co);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(co, "data transfers complete"), "%s", co);
	free(so);
	free(co);
}

/* sv_tcp0 is an iWARP device, which has no UD QPs: udaddy's rdma_create_id in the UDP
 * port space fails (EOPNOTSUPP) with our explanation, and both sides exit non-zero at
 * once instead of waiting for a peer. */
Test(apps_rdmacm, tcp_udaddy_fails_cleanly, .timeout = 60)
{
	const char *srv[] = { "--transport", "tcp", "udaddy", NULL };
	const char *cli[] = { "--transport", "tcp", "udaddy", "-s", "127.0.0.1", NULL };
	struct apps_proc s, c;
	int rs, rc;
	char *so, *co;

	apps_require(progs);
	apps_start(&s, srv);
	apps_start(&c, cli);
	rs = apps_wait(&s, 20000);
	rc = apps_wait(&c, 20000);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect(rs > 0, "server exit %d (-1: hung until killed)\n%s", rs, so);
	cr_expect(rc > 0, "client exit %d (-1: hung until killed)\n%s", rc, co);
	cr_expect(strstr(so, "no UD QPs") && strstr(so, "Operation not supported"), "%s", so);
	cr_expect(strstr(co, "no UD QPs"), "%s", co);
	free(so);
	free(co);
}
