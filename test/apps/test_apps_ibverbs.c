/*
 * test_apps_ibverbs.c — the packaged ibverbs-utils programs on the libibverbs drop-in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "ldd_util.h"

static const char *const progs[] = {
	"ibv_devices", "ibv_devinfo", "ibv_rc_pingpong", "ibv_srq_pingpong",
	"ibv_ud_pingpong", "ibv_uc_pingpong", "ibv_xsrq_pingpong", "ibv_asyncwatch", NULL
};

static char *run(const char *const argv[])
{
	struct apps_proc p;
	char *out;
	int rc;

	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_assert(rc == 0, "%s exited %d:\n%s", argv[0], rc, out);
	return out;
}

Test(apps_ibverbs, every_symbol_resolves, .timeout = 120)
{
	apps_require(progs);
	apps_ldd_check(progs);
}

/* Runs argv, which must exit 0, and expects each of want (NULL-terminated) in what it
 * prints. */
static void prints(const char *const argv[], const char *const want[])
{
	char *out;

	apps_require(progs);
	out = run(argv);
	for (int i = 0; want[i]; i++)
		cr_expect(strstr(out, want[i]), "no \"%s\" in:\n%s", want[i], out);
	free(out);
}

/* Runs prog's server and client on sv_udp0 (GID index 0) with -n iters, -c (both sides
 * check every received buffer) and the options in extra (NULL-terminated, at most 4, or
 * NULL); returns their outputs (the caller frees them). */
static void pingpong_with(const char *prog, const char *iters, const char *const extra[],
			  char **so, char **co)
{
	char port[16];
	const char *srv[16] = { prog, "-d", "sv_udp0", "-g", "0", "-p", port, "-n", iters, "-c" };
	const char *cli[16] = { prog, "-d", "sv_udp0", "-g", "0", "-p", port, "-n", iters, "-c" };
	int p = apps_free_port(), n = 10;

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	for (int i = 0; extra && extra[i]; i++, n++) {
		cr_assert_lt(i, 4);
		srv[n] = cli[n] = extra[i];
	}
	cli[n] = "127.0.0.1";
	apps_pair(srv, cli, p, 60000, so, co);
}

/* The same with one option mode unless NULL. */
static void pingpong(const char *prog, const char *iters, const char *mode, char **so,
		     char **co)
{
	const char *extra[] = { mode, NULL };

	pingpong_with(prog, iters, extra, so, co);
}

Test(apps_ibverbs, ibv_devices_lists_sv_tcp0, .timeout = 60)
{
	const char *argv[] = { "ibv_devices", NULL };
	const char *want[] = { "sv_tcp0", NULL };

	prints(argv, want);
}

/* GID 0 of an iWARP port is an Ethernet address with a zero interface ID
 * (compat/verbs_device.c, make_gid), which ibv_devinfo leaves out as it does for the
 * kernel's iWARP devices. */
Test(apps_ibverbs, ibv_devinfo_describes_the_iwarp_port, .timeout = 60)
{
	const char *argv[] = { "ibv_devinfo", "-v", "-d", "sv_tcp0", NULL };
	const char *want[] = { "hca_id:\tsv_tcp0", "transport:\t\t\tiWARP (1)",
			       "state:\t\t\tPORT_ACTIVE (4)", "link_layer:\t\tEthernet",
			       "active_mtu:\t\t4096 (5)",
			       "gid_tbl_len:\t\t1", NULL };

	prints(argv, want);
}

Test(apps_ibverbs, ibv_devinfo_describes_the_roce_port, .timeout = 60)
{
	const char *argv[] = { "ibv_devinfo", "-v", "-d", "sv_udp0", NULL };
	const char *want[] = { "hca_id:\tsv_udp0", "transport:\t\t\tInfiniBand (0)",
			       "link_layer:\t\tEthernet", "GID[  0]:\t\t::ffff:127.0.0.",
			       ", RoCE v2", NULL };

	prints(argv, want);
}

/* UD on sv_udp0: address handles from the exchanged GIDs, Q_Key 0x11111111, a GRH before
 * every payload. */
Test(apps_ibverbs, ibv_ud_pingpong, .timeout = 90)
{
	char *so, *co;

	pingpong("ibv_ud_pingpong", "500", NULL, &so, &co);
	/* 500 iterations of 1024 bytes (the default size) each way */
	cr_expect(strstr(so, "1024000 bytes in"), "%s", so);
	cr_expect(strstr(co, "1024000 bytes in"), "%s", co);
	cr_expect(strstr(co, "GID ::ffff:127.0.0."), "%s", co);
	free(so);
	free(co);
}

/* UC on sv_udp0 (ibv_uc_pingpong connects its UC QPs out of band, path MTU 1024): 100
 * round trips of size bytes each way, every buffer checked, at one packet a message and
 * at several. */
static void uc_pingpong(const char *size, const char *total)
{
	const char *extra[] = { "-s", size, NULL };
	char *so, *co;

	pingpong_with("ibv_uc_pingpong", "100", extra, &so, &co);
	cr_expect(strstr(so, total), "%s", so);
	cr_expect(strstr(co, total), "%s", co);
	cr_expect(strstr(co, "GID ::ffff:127.0.0."), "%s", co);
	free(so);
	free(co);
}

Test(apps_ibverbs, ibv_uc_pingpong_below_the_mtu, .timeout = 90)
{
	uc_pingpong("512", "102400 bytes in");
}

Test(apps_ibverbs, ibv_uc_pingpong_above_the_mtu, .timeout = 90)
{
	uc_pingpong("8192", "1638400 bytes in");
}

/* svrun --transport udp: the UDP device comes first, so programs without -d take it. */
Test(apps_ibverbs, svrun_transport_orders_the_devices, .timeout = 60)
{
	const char *tcp[] = { "ibv_devices", NULL };
	const char *udp[] = { "--transport", "udp", "ibv_devices", NULL };
	char *out;

	apps_require(progs);
	out = run(tcp);
	cr_expect(strstr(out, "sv_tcp0") && strstr(out, "sv_udp0") &&
		  strstr(out, "sv_tcp0") < strstr(out, "sv_udp0"), "%s", out);
	free(out);
	out = run(udp);
	cr_expect(strstr(out, "sv_tcp0") && strstr(out, "sv_udp0") &&
		  strstr(out, "sv_udp0") < strstr(out, "sv_tcp0"), "%s", out);
	free(out);
}

Test(apps_ibverbs, svrun_refuses_an_unknown_transport, .timeout = 60)
{
	const char *argv[] = { "--transport", "ib", "ibv_devices", NULL };
	struct apps_proc p;
	char *out;
	int rc;

	apps_require(progs);
	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_expect_eq(rc, 2, "%s", out);
	cr_expect(strstr(out, "unknown transport 'ib'"), "%s", out);
	free(out);
}

/* 16 RC QPs on one SRQ per side, completions told apart by wc.qp_num. */
Test(apps_ibverbs, ibv_srq_pingpong, .timeout = 90)
{
	char *so, *co;

	pingpong("ibv_srq_pingpong", "200", NULL, &so, &co);
	/* 200 iterations of 4096 bytes each way */
	cr_expect(strstr(so, "1638400 bytes in"), "%s", so);
	cr_expect(strstr(co, "1638400 bytes in"), "%s", co);
	cr_expect_eq(apps_count(co, "remote address:"), 16, "%s", co);
	free(so);
	free(co);
}

/* 500 round trips of 4 KiB each way. Two processes, two contexts, no configuration:
 * each binds its own loopback address, they swap LID:QPN:PSN:GID over the program's TCP
 * socket and connect their RC QPs out of band. */
static void rc_pingpong(const char *mode)
{
	char *so, *co;

	pingpong("ibv_rc_pingpong", "500", mode, &so, &co);
	cr_expect(strstr(so, "4096000 bytes in"), "%s", so);
	cr_expect(strstr(co, "4096000 bytes in"), "%s", co);
	cr_expect(strstr(so, "GID ::ffff:127.0.0."), "%s", so);
	free(so);
	free(co);
}

Test(apps_ibverbs, ibv_rc_pingpong_poll, .timeout = 90)
{
	rc_pingpong(NULL);
}

Test(apps_ibverbs, ibv_rc_pingpong_new_post_api, .timeout = 90)
{
	rc_pingpong("-N");
}

Test(apps_ibverbs, ibv_rc_pingpong_events, .timeout = 90)
{
	rc_pingpong("-e");
}
