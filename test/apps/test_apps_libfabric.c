/*
 * test_apps_libfabric.c — libfabric's verbs provider on the drop-ins (libfabric-bin):
 * fi_info lists each device, and fi_pingpong runs over FI_EP_MSG (verbs alone) and
 * FI_EP_RDM (verbs;ofi_rxm), a server and a client through svrun on 127.0.0.1, with
 * fi_pingpong's data checks (-c) on.
 *
 * The verbs provider offers FI_EP_MSG on a device only when an up, non-loopback
 * interface has an address that rdma_bind_addr maps to the device (netns_util.h), so
 * every test runs in a network namespace of its own with such an interface; that also
 * gives fi_pingpong's fixed control port (47592) to each test alone. fi_pingpong's
 * server takes "localhost" as its source, the client its peer's name from the control
 * connection, and the connection's own address from rdma_resolve_addr's source
 * (compat/rdmacm_id.c, default_src): each exits 0 only when every size it sent came back,
 * and prints a row per size. And on sv_udp0 bound to an interface's address (SV_BIND_ADDR,
 * server and client on two addresses of the namespace's interface): the server's
 * "localhost" source is a loopback listener on that device, as the kernel's rdma_cm binds
 * a loopback address to a local device, and the client's connection to 127.0.0.1 reaches
 * it (wire/roce_cm_dir.c); before, the listen was refused and fi_pingpong failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "netns_util.h"

#define CTRL_PORT 47592		/* fi_pingpong's default control port */
#define WAIT_MS 60000

static const char *const progs[] = { "fi_info", "fi_pingpong", NULL };

/* The sizes fi_pingpong -S all sends with -I 100: its rows, "<size>  100  =100 ...". */
static const char *const rows[] = { "64 ", "256 ", "1k ", "4k ", "64k ", "1m ", NULL };

static void info_lists(const char *transport, const char *const want[])
{
	const char *argv[] = { "--transport", transport, "fi_info", "-p", "verbs", NULL };
	struct apps_proc p;
	char *out;
	int rc;

	apps_require(progs);
	netns_private();
	apps_start(&p, argv);
	rc = apps_wait(&p, WAIT_MS);
	out = apps_output(&p);
	cr_expect_eq(rc, 0, "fi_info exit %d:\n%s", rc, out);
	for (int i = 0; want[i]; i++)
		cr_expect(strstr(out, want[i]), "fi_info -p verbs on %s lacks \"%s\":\n%s",
			  transport, want[i], out);
	free(out);
}

/* Whether out has the row of size `size` with all 100 iterations acknowledged. */
static bool has_row(const char *out, const char *size)
{
	for (const char *p = strstr(out, size); p; p = strstr(p + 1, size)) {
		int sent, ack;

		if ((p == out || p[-1] == '\n') &&
		    sscanf(p + strlen(size), "%d =%d", &sent, &ack) == 2)
			return sent == 100 && ack == 100;
	}
	return false;
}

static void pingpong(const char *transport, const char *prov, const char *ep)
{
	const char *srv[] = { "--transport", transport, "fi_pingpong", "-p", prov, "-e", ep,
			      "-I", "100", "-c", NULL };
	const char *cli[] = { "--transport", transport, "fi_pingpong", "-p", prov, "-e", ep,
			      "-I", "100", "-c", "127.0.0.1", NULL };
	char *so, *co;

	apps_require(progs);
	netns_private();
	apps_pair(srv, cli, CTRL_PORT, WAIT_MS, &so, &co);
	for (int i = 0; rows[i]; i++) {
		cr_expect(has_row(so, rows[i]), "server: no row for %s:\n%s", rows[i], so);
		cr_expect(has_row(co, rows[i]), "client: no row for %s:\n%s", rows[i], co);
	}
	free(so);
	free(co);
}

Test(apps_libfabric, fi_info_tcp, .timeout = 90)
{
	static const char *const want[] = { "provider: verbs\n", "domain: sv_tcp0\n",
					    "type: FI_EP_MSG\n", "protocol: FI_PROTO_IWARP\n",
					    "provider: verbs;ofi_rxm\n", "type: FI_EP_RDM\n",
					    NULL };

	info_lists("tcp", want);
}

Test(apps_libfabric, fi_info_udp, .timeout = 90)
{
	static const char *const want[] = { "provider: verbs\n", "domain: sv_udp0\n",
					    "type: FI_EP_MSG\n",
					    "protocol: FI_PROTO_RDMA_CM_IB_RC\n",
					    "domain: sv_udp0-dgram\n", "type: FI_EP_DGRAM\n",
					    "provider: verbs;ofi_rxm\n", "type: FI_EP_RDM\n",
					    NULL };

	info_lists("udp", want);
}

Test(apps_libfabric, pingpong_msg_tcp, .timeout = 150)
{
	pingpong("tcp", "verbs", "msg");
}

Test(apps_libfabric, pingpong_msg_udp, .timeout = 150)
{
	pingpong("udp", "verbs", "msg");
}

Test(apps_libfabric, pingpong_rxm_tcp, .timeout = 150)
{
	pingpong("tcp", "verbs;ofi_rxm", "rdm");
}

Test(apps_libfabric, pingpong_rxm_udp, .timeout = 150)
{
	pingpong("udp", "verbs;ofi_rxm", "rdm");
}

/* TEST-NET-1 (RFC 5737) addresses on the namespace's interface, one per device. */
#define IF_ADDR_SERVER "192.0.2.1"
#define IF_ADDR_CLIENT "192.0.2.2"

static void pingpong_on_interface_address(const char *prov, const char *ep)
{
	static const char *const senv[] = { "SV_BIND_ADDR=" IF_ADDR_SERVER, NULL };
	static const char *const cenv[] = { "SV_BIND_ADDR=" IF_ADDR_CLIENT, NULL };
	const char *srv[] = { "--transport", "udp", "fi_pingpong", "-p", prov, "-e", ep,
			      "-I", "100", "-c", NULL };
	const char *cli[] = { "--transport", "udp", "fi_pingpong", "-p", prov, "-e", ep,
			      "-I", "100", "-c", "127.0.0.1", NULL };
	struct apps_proc s, c;
	char *so, *co;
	int rs, rc;

	apps_require(progs);
	netns_private();
	cr_assert_eq(system("ip addr add " IF_ADDR_SERVER "/24 dev sv0 && "
			    "ip addr add " IF_ADDR_CLIENT "/24 dev sv0"), 0,
		     "cannot add the interface's addresses");
	apps_start_env(&s, senv, srv);
	cr_assert(apps_wait_listen(&s, CTRL_PORT, WAIT_MS), "the server never listened");
	apps_start_env(&c, cenv, cli);
	rc = apps_wait(&c, WAIT_MS);
	rs = apps_wait(&s, WAIT_MS);
	co = apps_output(&c);
	so = apps_output(&s);
	cr_expect(rc == 0 && rs == 0, "client exit %d, server exit %d\n--- client ---\n%s\n"
		  "--- server ---\n%s", rc, rs, co, so);
	cr_expect(!strstr(so, "cannot listen on 127.0.0.1"), "%s", so);
	for (int i = 0; rows[i]; i++) {
		cr_expect(has_row(so, rows[i]), "server: no row for %s:\n%s", rows[i], so);
		cr_expect(has_row(co, rows[i]), "client: no row for %s:\n%s", rows[i], co);
	}
	free(so);
	free(co);
}

Test(apps_libfabric, pingpong_msg_udp_on_an_interface_address, .timeout = 150)
{
	pingpong_on_interface_address("verbs", "msg");
}

Test(apps_libfabric, pingpong_rxm_udp_on_an_interface_address, .timeout = 150)
{
	pingpong_on_interface_address("verbs;ofi_rxm", "rdm");
}
