/*
 * test_apps_rdmacm.c — the packaged rdmacm-utils programs on the drop-ins (sv_tcp0 and
 * sv_udp0): server and client on 127.0.0.1, both must exit 0, and what they verify is
 * checked in their output. udaddy (UD QPs, the rdma_cm UDP port space) runs on sv_udp0
 * only: an iWARP device has no UD QPs, and on sv_tcp0 it must fail at once, saying so.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* In a command line for pair(): where the server listens. */
#define ADDR "<addr>"
#define PORT "<port>"

static void fill(const char *out[], bool udp, const char *const in[], const char *addr,
		 const char *port)
{
	int n = 0;

	if (udp) {
		out[n++] = "--transport";
		out[n++] = "udp";
	}
	for (; *in; in++)
		out[n++] = !strcmp(*in, ADDR) ? addr : !strcmp(*in, PORT) ? port : *in;
	out[n] = NULL;
}

static bool has(const char *const v[], const char *word)
{
	for (; *v; v++)
		if (!strcmp(*v, word))
			return true;
	return false;
}

/* Runs the server command line srv, then cli, through svrun on sv_tcp0 or (udp) sv_udp0;
 * both must exit 0 within timeout_ms. In both, ADDR and PORT stand for where the server
 * listens: 127.0.0.1 and a free port, on either transport with no configuration. On
 * sv_udp0 127.0.0.1 is held by another softverbs process meanwhile, so the server's
 * device is some other 127.0.0.x, and the client's CM must find the listener
 * host-locally (wire/roce_cm_dir.c). A program whose service port is fixed (udaddy's
 * 7174, no PORT) listens on ADDR, a loopback address no other listener on that port has
 * (so that tests running at once do not meet), which is not its device's either. The
 * outputs are returned (the caller frees them). */
static void pair(bool udp, const char *const srv[], const char *const cli[], int timeout_ms,
		 char **so, char **co)
{
	char addr[32] = "127.0.0.1", port[16] = "7174";
	const char *s[32], *c[32];
	bool fixed = !has(cli, PORT);
	struct apps_cm_listener l;
	struct apps_proc h;
	int p = 7174;

	apps_require(progs);
	if (fixed) {
		snprintf(addr, sizeof(addr), "%s", apps_free_cm_addr(p));
	} else {
		p = apps_free_port();
		snprintf(port, sizeof(port), "%d", p);
	}
	fill(s, udp, srv, addr, port);
	fill(c, udp, cli, addr, port);
	if (!udp) {
		apps_pair(s, c, p, timeout_ms, so, co);
		return;
	}
	apps_hold_loopback(&h);
	apps_pair_cm(s, c, p, fixed ? addr : NULL, timeout_ms, so, co, &l);
	apps_kill(&h);
	free(apps_output(&h));
	cr_expect_str_neq(l.dev_ip, "127.0.0.1", "the server's device is not the address the "
			  "client names");
}

/* A test on sv_tcp0 and one on sv_udp0 (named udp_<name>), through rdma_cm over iWARP's
 * MPA and over the UDP transport's IB CM. */
#define TCP_AND_UDP(name)                                                                  \
	static void name(bool udp);                                                        \
	Test(apps_rdmacm, name, .timeout = 240) { name(false); }                           \
	Test(apps_rdmacm, udp_##name, .timeout = 240) { name(true); }                      \
	static void name(bool udp)

/* rping -v prints every ping it receives: the server must have seen all of them, in
 * order, with the rotating pattern rping checks. */
TCP_AND_UDP(rping_1000_verbose)
{
	const char *srv[] = { "rping", "-s", "-a", ADDR, "-p", PORT, "-v", "-C", "1000", NULL };
	const char *cli[] = { "rping", "-c", "-a", ADDR, "-p", PORT, "-v", "-C", "1000", NULL };
	char *so, *co;

	pair(udp, srv, cli, 90000, &so, &co);
	cr_expect_eq(apps_count(so, "server ping data: rdma-ping-"), 1000, "%s", so);
	cr_expect_eq(apps_count(co, "ping data: rdma-ping-"), 1000, "%s", co);
	cr_expect(strstr(so, "rdma-ping-999: "), "%s", so);
	cr_expect(strstr(so, "server DISCONNECT EVENT"), "%s", so);
	free(so);
	free(co);
}

/* rping -V compares every buffer with what was sent and exits non-zero on a mismatch
 * (apps_pair asserts exit 0 on both sides). */
TCP_AND_UDP(rping_validate)
{
	const char *count = udp ? "300" : "500";
	const char *srv[] = { "rping", "-s", "-a", ADDR, "-p", PORT, "-V", "-C", count, "-S",
			      "4096", NULL };
	const char *cli[] = { "rping", "-c", "-a", ADDR, "-p", PORT, "-V", "-C", count, "-S",
			      "4096", NULL };
	char *so, *co;

	pair(udp, srv, cli, 90000, &so, &co);
	cr_expect(!strstr(co, "data mismatch"), "%s", co);
	cr_expect(!strstr(so, "data mismatch"), "%s", so);
	free(so);
	free(co);
}

/* rping -q makes its QP itself (ibv_create_qp), names it in conn_param.qp_num, moves it
 * with rdma_init_qp_attr's attributes, and on IB/RoCE waits for CONNECT_RESPONSE and
 * answers with rdma_establish; iWARP's CM reports ESTABLISHED (compat/rdmacm_conn.c,
 * app_qp). -V checks every buffer, -d prints the events. */
TCP_AND_UDP(rping_own_qp)
{
	const char *srv[] = { "rping", "-s", "-q", "-a", ADDR, "-p", PORT, "-V", "-C", "200",
			      NULL };
	const char *cli[] = { "rping", "-c", "-q", "-d", "-a", ADDR, "-p", PORT, "-V", "-C",
			      "200", NULL };
	char *so, *co;

	pair(udp, srv, cli, 90000, &so, &co);
	cr_expect(!strstr(co, "data mismatch") && !strstr(so, "data mismatch"), "%s\n%s", co,
		  so);
	cr_expect(strstr(co, udp ? "CONNECT_RESPONSE\n" : "ESTABLISHED\n"), "%s", co);
	cr_expect(!strstr(co, udp ? "ESTABLISHED\n" : "CONNECT_RESPONSE\n"), "%s", co);
	cr_expect(strstr(so, "server DISCONNECT EVENT"), "%s", so);
	free(so);
	free(co);
}

/* cmtime -c 1000: a thousand connections at once, each with its QP and two CQs on both
 * sides (the device's max_cq must hold 2000). cmtime exits 0 whatever failed; a failure
 * is a "failure ..." (perror), "failing ..." or "... error: N" line. Its server serves
 * until it is stopped. */
TCP_AND_UDP(cmtime_1000)
{
	char port[16], *so, *co;
	const char *srv_in[] = { "cmtime", "-b", "127.0.0.1", "-p", port, "-c", "1000", NULL };
	const char *cli_in[] = { "cmtime", "-s", "127.0.0.1", "-p", port, "-c", "1000", NULL };
	const char *srv[16], *cli[16];
	struct apps_proc s, c;
	int rc;

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", apps_free_port());
	fill(srv, udp, srv_in, "", "");
	fill(cli, udp, cli_in, "", "");
	apps_start(&s, srv);
	cr_assert(udp ? apps_wait_cm_listen(&s, atoi(port), NULL, NULL, 20000) :
			apps_wait_listen(&s, atoi(port), 20000), "cmtime server not listening");
	apps_start(&c, cli);
	rc = apps_wait(&c, 100000);
	apps_kill(&s);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect_eq(rc, 0, "client exit %d\n%s", rc, co);
	cr_expect(strstr(co, "\nconnect      :") && strstr(co, "\ndisconnect   :"), "%s", co);
	for (const char *const *w = (const char *const[]){ "failure", "failing", "error", NULL };
	     *w; w++) {
		cr_expect(!strstr(co, *w), "client: %s\n%s", *w, co);
		cr_expect(!strstr(so, *w), "server: %s\n%s", *w, so);
	}
	free(so);
	free(co);
}

TCP_AND_UDP(ucmatose)
{
	const char *srv[] = { "ucmatose", "-p", PORT, "-c", "2", "-C", "20", NULL };
	const char *cli[] = { "ucmatose", "-s", ADDR, "-p", PORT, "-c", "2", "-C", "20", NULL };
	char *so, *co;

	pair(udp, srv, cli, 90000, &so, &co);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

/*
 * SV_TLS=1 on sv_udp0 (doc/roce-aead.md, "Key exchange"): every RC QP the rdmacm drop-in
 * connects runs the key exchange and AES-GCM, and a device with TLS lets no RC QP reach
 * RTR without keys, so programs that verify their data and exit 0 ran encrypted. The
 * pair is a fresh self-signed certificate (openssl(1)) that both ends trust, with the
 * name they expect; SV_LOG=info shows each device's key exchange listener.
 */
static void tls_env(char dir[32])
{
	char cmd[512], path[64];

	snprintf(dir, 32, "/tmp/sv-apps-tls-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "openssl req -x509 -newkey ec -pkeyopt "
		 "ec_paramgen_curve:P-256 -nodes -keyout %s/key.pem -out %s/cert.pem -days 1 "
		 "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 "
		 ">/dev/null 2>&1", dir, dir);
	cr_assert_eq(system(cmd), 0, "openssl req failed");
	snprintf(path, sizeof(path), "%s/cert.pem", dir);
	setenv("SV_TLS_CERT", path, 1);
	setenv("SV_TLS_CA", path, 1);
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	setenv("SV_TLS_KEY", path, 1);
	setenv("SV_TLS_PEER", "localhost", 1);
	setenv("SV_TLS", "1", 1);
	setenv("SV_LOG", "info", 1);
}

static void tls_env_end(const char *dir)
{
	char path[64];

	unsetenv("SV_TLS");
	unsetenv("SV_LOG");
	snprintf(path, sizeof(path), "%s/cert.pem", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	unlink(path);
	rmdir(dir);
}

Test(apps_rdmacm, udp_tls_rping_validate, .timeout = 240)
{
	const char *srv[] = { "rping", "-s", "-a", ADDR, "-p", PORT, "-V", "-C", "300", "-S",
			      "4096", NULL };
	const char *cli[] = { "rping", "-c", "-a", ADDR, "-p", PORT, "-V", "-C", "300", "-S",
			      "4096", NULL };
	char dir[32], *so, *co;

	tls_env(dir);
	pair(true, srv, cli, 90000, &so, &co);
	tls_env_end(dir);
	cr_expect(!strstr(co, "data mismatch"), "%s", co);
	cr_expect(!strstr(so, "data mismatch"), "%s", so);
	cr_expect(strstr(so, "key exchange (TLS 1.3) listens on TCP"), "%s", so);
	cr_expect(!strstr(co, "failed"), "%s", co);
	free(so);
	free(co);
}

Test(apps_rdmacm, udp_tls_ucmatose, .timeout = 240)
{
	const char *srv[] = { "ucmatose", "-p", PORT, "-c", "2", "-C", "20", NULL };
	const char *cli[] = { "ucmatose", "-s", ADDR, "-p", PORT, "-c", "2", "-C", "20", NULL };
	char dir[32], *so, *co;

	tls_env(dir);
	pair(true, srv, cli, 90000, &so, &co);
	tls_env_end(dir);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

/* The synchronous rdma_create_ep / rdma_get_request style, with inline sends. */
TCP_AND_UDP(rdma_server_client)
{
	const char *srv[] = { "rdma_server", "-p", PORT, NULL };
	const char *cli[] = { "rdma_client", "-s", ADDR, "-p", PORT, NULL };
	char *so, *co;

	pair(udp, srv, cli, 60000, &so, &co);
	cr_expect(strstr(so, "rdma_server: end 0"), "%s", so);
	cr_expect(strstr(co, "rdma_client: end 0"), "%s", co);
	free(so);
	free(co);
}

/* udaddy: the client resolves the server's UD QP through the rdma_cm UDP port space
 * (SIDR), sends -C messages to it, and the server answers each connection's messages
 * with as many of its own, addressed from the first receive's GRH. Both count their
 * completions before "data transfers complete"; four connections at once. */
Test(apps_rdmacm, udp_udaddy, .timeout = 240)
{
	const char *srv[] = { "udaddy", "-b", ADDR, "-c", "4", "-C", "50", "-S", "1024", NULL };
	const char *cli[] = { "udaddy", "-s", ADDR, "-c", "4", "-C", "50", "-S", "1024", NULL };
	char *so, *co;

	pair(true, srv, cli, 60000, &so, &co);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(co, "data transfers complete"), "%s", co);
	cr_expect(strstr(so, "return status 0"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}

/* The IPoIB port space (-P ipoib) is a UD port space as well. */
Test(apps_rdmacm, udp_udaddy_ipoib_port_space, .timeout = 240)
{
	const char *srv[] = { "udaddy", "-P", "ipoib", "-b", ADDR, NULL };
	const char *cli[] = { "udaddy", "-P", "ipoib", "-s", ADDR, NULL };
	char *so, *co;

	pair(true, srv, cli, 60000, &so, &co);
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

/* Runs one of our librdmacm programs (built by the test suite: test/apps/route_probe.c,
 * accept_probe.c) through svrun on sv_tcp0 or (udp) sv_udp0, with arg if not NULL; it
 * must exit 0 within 30 s. Returns its output (the caller frees it). */
static char *probe(bool udp, const char *prog, const char *arg)
{
	const char *dir = getenv("SV_PROBE_DIR");
	const char *argv[] = { "--transport", udp ? "udp" : "tcp", prog, arg, NULL };
	char path[4096];
	struct apps_proc p;
	int rc;

	apps_require(progs);
	if (!dir || !*dir)
		cr_skip_test("SV_PROBE_DIR not set (run through ctest)");
	/* svrun finds the program on PATH, and apps_start names its logs after argv[0]. */
	snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH"));
	cr_assert_eq(setenv("PATH", path, 1), 0);
	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	cr_assert_eq(rc, 0, "%s exited %d: %s", prog, rc, apps_output(&p));
	return apps_output(&p);
}

static unsigned field(const char *out, const char *name)
{
	const char *at = strstr(out, name);
	unsigned v = 0;

	cr_assert_not_null(at, "no %s in: %s", name, out);
	cr_assert_eq(sscanf(at + strlen(name), " %i", (int *)&v), 1, "%s", out);
	return v;
}

/* On RoCE librdmacm gives one path record, made up as the kernel's rdma_cm makes it
 * (doc/interop-cm.md, "Routes"); programs read path_rec->mtu from it. */
Test(apps_rdmacm, udp_route_has_a_path_record, .timeout = 60)
{
	char *out = probe(true, "route_probe", "127.0.0.1");

	cr_expect_eq(field(out, "num_paths"), 1, "%s", out);
	cr_expect(strstr(out, "path_rec set"), "%s", out);
	cr_expect(strstr(out, "dgid ::ffff:127.0.0.1\n"), "%s", out);
	cr_expect(strstr(out, "sgid ::ffff:127."), "%s", out);
	cr_expect_eq(field(out, "mtu"), field(out, "active_mtu"), "%s", out);
	cr_expect_geq(field(out, "mtu"), 1, "%s", out);
	cr_expect_eq(field(out, "pkey"), 0xffff, "%s", out);
	cr_expect_eq(field(out, "hop_limit"), 64, "%s", out);
	cr_expect_eq(field(out, "traffic_class"), 0, "%s", out);
	cr_expect_eq(field(out, "packet_life_time"), 18, "%s", out);
	cr_expect_eq(field(out, "reversible"), 1, "%s", out);
	free(out);
}

/* On iWARP the kernel's ucma reports no path (num_paths 0, path_rec NULL); so do we. */
Test(apps_rdmacm, tcp_route_has_no_path_record, .timeout = 60)
{
	char *out = probe(false, "route_probe", "127.0.0.1");

	cr_expect_eq(field(out, "num_paths"), 0, "%s", out);
	cr_expect(strstr(out, "path_rec NULL"), "%s", out);
	free(out);
}

/* A client asks responder resources 3 and initiator depth 5. The CONNECT_REQUEST gives
 * them from the server's side, as librdmacm on the kernel does (doc/interop-cm.md,
 * "Depths in CM events"), and rdma_accept without parameters takes the request's
 * values: the server serves the client's 5 READs and issues at most 3. */
TCP_AND_UDP(accept_takes_the_requests_depths)
{
	char *out = probe(udp, "accept_probe", NULL);

	cr_expect(strstr(out, "request responder_resources 5 initiator_depth 3\n"), "%s", out);
	cr_expect(strstr(out, "client max_rd_atomic 5 max_dest_rd_atomic 3\n"), "%s", out);
	cr_expect(strstr(out, "server max_rd_atomic 3 max_dest_rd_atomic 5\n"), "%s", out);
	free(out);
}

/* librdmacm behaviours frameworks rely on, one line each in cm_probe's output:
 * getaddrinfo from hints alone, rdma_migrate_id of a listener, cm_id->pd (the device's
 * once bound, the QP's once it has one), RDMA_OPTION_ID_ACK_TIMEOUT, disconnect
 * after the peer's, EINTR out of rdma_get_cm_event and ibv_get_cq_event
 * (test/apps/cm_probe.c). */
static void cm_behaviours(bool udp)
{
	static const char *const checks[] = {
		"getaddrinfo_hints", "migrate_id", "bind_sets_device_pd", "resolve_sets_device_pd",
		"create_qp_sets_pd", "ack_timeout_size", "ack_timeout_option",
		"request_on_new_channel",
		"disconnect_after_peer", "old_channel_quiet", "get_cm_event_eintr",
		"get_cq_event_eintr",
	};
	char *out = probe(udp, "cm_probe", NULL);

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		char line[64];

		snprintf(line, sizeof(line), "%s ok\n", checks[i]);
		cr_expect(strstr(out, line), "%s: %s", checks[i], out);
	}
	free(out);
}

Test(apps_rdmacm, tcp_cm_behaviours, .timeout = 60)
{
	cm_behaviours(false);
}

Test(apps_rdmacm, udp_cm_behaviours, .timeout = 60)
{
	cm_behaviours(true);
}
