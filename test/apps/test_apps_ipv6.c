/*
 * test_apps_ipv6.c — unmodified rdma-core programs on sv_udp0 bound to IPv6 (svrun
 * --transport udp, SV_BIND_ADDR=::1): ibv_devinfo lists the GID as ::1, a RoCE v2 GID,
 * and rping runs between two processes on ::1 through the UDP transport's CM. Both
 * processes are given the same SV_PORT, as softverbs.h says: the server's device opens
 * first here and owns the port, the client's falls back to a later one and still finds
 * the server's CM at the configured port. And the other way round: a third process
 * owns the configured port, so the server's device falls back too, and the client's CM
 * finds the listener on its later port host-locally (wire/roce_cm_dir.c). Skipped when
 * the programs are not installed or ::1 cannot be bound.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apps_util.h"

static const char *const progs[] = { "ibv_devinfo", "rping", NULL };

/* Binds [::1]:port (port 0: any); returns the fd and the port, or -1 when in use. */
static int bind6(uint16_t *port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT,
				  .sin6_port = htons(*port) };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin6_port);
	return fd;
}

/* A UDP port free on ::1 a moment ago; skips the test when ::1 cannot be bound. */
static uint16_t free_port6(void)
{
	uint16_t port = 0;
	int fd = bind6(&port);

	if (fd < 0)
		cr_skip_test("IPv6 loopback (::1) unavailable: IPv6 application test skipped");
	close(fd);
	return port;
}

Test(apps_ipv6, devinfo_gid_is_ipv6, .timeout = 60)
{
	char env_port[32], *out;
	const char *env[] = { "SV_BIND_ADDR=::1", env_port, NULL };
	const char *argv[] = { "--transport", "udp", "ibv_devinfo", "-v", "-d", "sv_udp0", NULL };
	struct apps_proc p;

	apps_require(progs);
	snprintf(env_port, sizeof(env_port), "SV_PORT=%u", free_port6());
	apps_start_env(&p, env, argv);
	cr_assert_eq(apps_wait(&p, 30000), 0, "ibv_devinfo failed");
	out = apps_output(&p);
	cr_expect(strstr(out, "GID[  0]:\t\t::1, RoCE v2") != NULL, "%s", out);
	free(out);
}

Test(apps_ipv6, rping_two_processes_on_one_address, .timeout = 120)
{
	char env_port[32], *so, *co;
	const char *env[] = { "SV_BIND_ADDR=::1", env_port, NULL };
	const char *srv[] = { "--transport", "udp", "rping", "-s", "-a", "::1", "-p", "7176",
			      "-V", "-v", "-C", "300", NULL };
	const char *cli[] = { "--transport", "udp", "rping", "-c", "-a", "::1", "-p", "7176",
			      "-V", "-v", "-C", "300", NULL };
	struct apps_proc s, c;
	uint16_t port;
	int fd = -1;

	apps_require(progs);
	port = free_port6();
	snprintf(env_port, sizeof(env_port), "SV_PORT=%u", port);
	apps_start_env(&s, env, srv);
	/* The server's device is open once [::1]:port is taken. */
	for (int i = 0; i < 3000 && apps_running(&s); i++) {
		uint16_t p = port;

		if ((fd = bind6(&p)) < 0)
			break;
		close(fd);
		usleep(10000);
	}
	cr_assert(fd < 0, "the server did not open its device on [::1]:%u", port);
	apps_start_env(&c, env, cli);
	cr_expect_eq(apps_wait(&c, 90000), 0, "rping client failed");
	cr_expect_eq(apps_wait(&s, 30000), 0, "rping server failed");
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect_eq(apps_count(so, "server ping data: rdma-ping-"), 300, "%s", so);
	cr_expect_eq(apps_count(co, "ping data: rdma-ping-"), 300, "%s", co);
	free(so);
	free(co);
}

/* [::1]:port is held by another rping server (on another service port, never served):
 * the server's device opens on port + 1 and the client's on port + 2, and the client's
 * REQ for [::1]:<service> must still reach the server, not the holder at the configured
 * port. */
Test(apps_ipv6, rping_with_the_configured_port_held, .timeout = 120)
{
	char env_port[32], hport[16], sport[16], *so, *co;
	const char *env[] = { "SV_BIND_ADDR=::1", env_port, NULL };
	const char *hold[] = { "--transport", "udp", "timeout", "300", "rping", "-s", "-a", "::1",
			       "-p", hport, NULL };
	const char *srv[] = { "--transport", "udp", "rping", "-s", "-a", "::1", "-p", sport,
			      "-V", "-v", "-C", "100", NULL };
	const char *cli[] = { "--transport", "udp", "rping", "-c", "-a", "::1", "-p", sport,
			      "-V", "-v", "-C", "100", NULL };
	struct apps_cm_listener l;
	struct apps_proc h, s, c;
	uint16_t port;
	int rs, rc;

	apps_require(progs);
	port = free_port6();
	snprintf(env_port, sizeof(env_port), "SV_PORT=%u", port);
	snprintf(hport, sizeof(hport), "%d", apps_free_port());
	snprintf(sport, sizeof(sport), "%d", apps_free_port());
	apps_start_env(&h, env, hold);
	cr_assert(apps_wait_cm_listen(&h, atoi(hport), NULL, &l, 10000), "no holder");
	cr_assert_eq(l.udp_port, port, "the holder has the configured port");
	apps_start_env(&s, env, srv);
	cr_assert(apps_wait_cm_listen(&s, atoi(sport), "::1", &l, 10000),
		  "the server never listened");
	cr_assert_neq(l.udp_port, port);
	apps_start_env(&c, env, cli);
	rc = apps_wait(&c, 90000);
	rs = apps_wait(&s, 30000);
	apps_kill(&h);
	free(apps_output(&h));
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect_eq(rc, 0, "rping client failed:\n%s", co);
	cr_expect_eq(rs, 0, "rping server failed:\n%s", so);
	cr_expect_eq(apps_count(so, "server ping data: rdma-ping-"), 100, "%s", so);
	cr_expect_eq(apps_count(co, "ping data: rdma-ping-"), 100, "%s", co);
	free(so);
	free(co);
}

/* ucmatose -f ipv6 asks rdma_getaddrinfo for a numeric host without naming a family, as
 * librdmacm allows: the drop-in must resolve the IPv6 literal (it tried IPv4 only and
 * failed with "Bad value for ai_flags"), on the server's -b as on the client's -s. */
Test(apps_ipv6, ucmatose_numeric_ipv6, .timeout = 120)
{
	static const char *const need[] = { "ucmatose", NULL };
	char env_port[32], sport[16], *so, *co;
	const char *env[] = { "SV_BIND_ADDR=::1", env_port, NULL };
	const char *srv[] = { "--transport", "udp", "ucmatose", "-f", "ipv6", "-b", "::1", "-p",
			      sport, "-C", "10", NULL };
	const char *cli[] = { "--transport", "udp", "ucmatose", "-f", "ipv6", "-s", "::1", "-p",
			      sport, "-C", "10", NULL };
	struct apps_cm_listener l;
	struct apps_proc s, c;
	int rs, rc;

	apps_require(need);
	snprintf(env_port, sizeof(env_port), "SV_PORT=%u", free_port6());
	snprintf(sport, sizeof(sport), "%d", apps_free_port());
	apps_start_env(&s, env, srv);
	cr_assert(apps_wait_cm_listen(&s, atoi(sport), "::1", &l, 10000),
		  "the server never listened");
	apps_start_env(&c, env, cli);
	rc = apps_wait(&c, 90000);
	rs = apps_wait(&s, 30000);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect_eq(rc, 0, "ucmatose client failed:\n%s", co);
	cr_expect_eq(rs, 0, "ucmatose server failed:\n%s", so);
	cr_expect(strstr(so, "data transfers complete"), "%s", so);
	cr_expect(strstr(co, "return status 0"), "%s", co);
	free(so);
	free(co);
}
