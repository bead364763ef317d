/*
 * test_apps_perftest.c — the eight perftest programs on the drop-ins, server and client on
 * loopback, each "with and without -R where a real device of that kind supports it":
 *  - sv_udp0 (RoCE v2) supports both: without -R the QPs are connected out of band
 *    (GID 0 via -x 0, QPN/PSN over perftest's TCP socket), with -R through rdma_cm (the
 *    UDP transport's IB CM). The -R client names 127.0.0.1 whichever loopback address
 *    the server's device got (the CM finds the listener host-locally).
 *  - sv_tcp0 (iWARP) connects QPs only through the CM: with -R every program runs;
 *    without -R perftest 4.5 does not switch to rdma_cm by itself for iWARP (it keys
 *    rdma_cm on -R only), so, as on a real iWARP device, its modify_qp to RTR is refused
 *    and both sides exit non-zero at once with our explanation, never hanging.
 * Also -a (every size 2 B .. 8 MiB) for a latency and two bandwidth programs per
 * transport, and --run_infinitely runs bounded by the test on both transports.
 * perftest exits non-zero on any failed completion; the result table must show every
 * message size asked for with a non-zero figure. Iteration counts are small (-n) so the
 * file stays within a few minutes on a loaded 2-core machine.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "ldd_util.h"

static const char *const progs[] = {
	"ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw",
	"ib_send_lat", "ib_atomic_bw", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat",
	"raw_ethernet_burst_lat", "raw_ethernet_fs_rate", NULL
};

/* Counts result rows: lines with the message size, the iterations and two figures, one
 * of them non-zero. */
static int result_rows(const char *out, unsigned long *first, unsigned long *last)
{
	const char *line = out;
	int n = 0;

	while (line && *line) {
		unsigned long bytes, iters;
		double fig1, fig2;

		/* BW rows: peak, average (peak reads 0.00 in --run_infinitely rows);
		 * latency rows: t_min, t_max. */
		if (sscanf(line, " %lu %lu %lf %lf", &bytes, &iters, &fig1, &fig2) == 4 &&
		    (fig1 > 0 || fig2 > 0)) {
			if (!n)
				*first = bytes;
			*last = bytes;
			n++;
		}
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return n;
}

enum mode {
	TCP_CM,		/* sv_tcp0 with -R */
	UDP_OOB,	/* sv_udp0 without -R: QPs connected out of band */
	UDP_CM,		/* sv_udp0 with -R */
};

static void run_on(enum mode m, const char *prog, const char *const extra[], int want_rows,
		   unsigned long want_first, unsigned long want_last)
{
	char port[16], addr[32], *so, *co;
	const char *srv[40] = { "--transport", m == TCP_CM ? "tcp" : "udp", prog, "-p", port,
				"-d" };
	const char *cli[40] = { "--transport", m == TCP_CM ? "tcp" : "udp", prog, "-p", port,
				"-d" };
	unsigned long first = 0, last = 0;
	int p = apps_free_port(), i, n = 6;

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	snprintf(addr, sizeof(addr), "127.0.0.1");
	if (m == UDP_OOB) {
		srv[n] = cli[n] = "sv_udp0";
		n++;
		srv[n] = cli[n] = "-x";		/* GID index: the RoCE v2 one */
		n++;
		srv[n] = cli[n] = "0";
		n++;
	} else {
		srv[n] = cli[n] = m == TCP_CM ? "sv_tcp0" : "sv_udp0";
		n++;
		srv[n] = cli[n] = "-R";
		n++;
	}
	for (i = 0; extra[i]; i++, n++)
		srv[n] = cli[n] = extra[i];
	if (m == UDP_CM) {
		/* The server must be listening before the client starts (perftest 4.5
		 * crashes in its retry path on a refusal): apps_pair_cm waits until its
		 * CM listener is published. */
		cli[n] = addr;
		apps_pair_cm(srv, cli, p, NULL, 150000, &so, &co, NULL);
	} else {
		cli[n] = addr;
		apps_pair(srv, cli, p, 150000, &so, &co);
	}
	cr_expect_eq(result_rows(co, &first, &last), want_rows, "%s", co);
	cr_expect_eq(first, want_first, "%s", co);
	cr_expect_eq(last, want_last, "%s", co);
	cr_expect(strstr(co, m == TCP_CM ? "Transport type : IW" : "Transport type : IB"), "%s",
		  co);
	cr_expect(strstr(co, m == UDP_OOB ? "rdma_cm QPs\t : OFF" : "rdma_cm QPs\t : ON"), "%s",
		  co);
	free(so);
	free(co);
}

static void run_test(const char *prog, const char *const extra[], int want_rows,
		     unsigned long want_first, unsigned long want_last)
{
	run_on(TCP_CM, prog, extra, want_rows, want_first, want_last);
}

static void run_udp(const char *prog, const char *const extra[], int want_rows,
		    unsigned long want_first, unsigned long want_last)
{
	run_on(UDP_OOB, prog, extra, want_rows, want_first, want_last);
}

static void run_udp_cm(const char *prog, const char *const extra[], int want_rows,
		       unsigned long want_first, unsigned long want_last)
{
	run_on(UDP_CM, prog, extra, want_rows, want_first, want_last);
}

Test(apps_perftest, every_symbol_resolves, .timeout = 120)
{
	apps_require(progs);
	apps_ldd_check(progs);
}

/* -a: every size from 2 B to 8 MiB (23 rows). */
Test(apps_perftest, ib_write_bw_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "20", NULL };

	run_test("ib_write_bw", extra, 23, 2, 8388608);
}

Test(apps_perftest, ib_read_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "500", NULL };

	run_test("ib_read_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, ib_send_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "500", NULL };

	run_test("ib_send_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, ib_atomic_bw, .timeout = 200)
{
	const char *extra[] = { "-n", "500", NULL };

	run_test("ib_atomic_bw", extra, 1, 8, 8);
}

Test(apps_perftest, ib_write_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "500", NULL };

	run_test("ib_write_lat", extra, 1, 2, 2);
}

Test(apps_perftest, ib_read_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "500", NULL };

	run_test("ib_read_lat", extra, 1, 2, 2);
}

Test(apps_perftest, ib_send_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "500", NULL };

	run_test("ib_send_lat", extra, 1, 2, 2);
}

Test(apps_perftest, ib_atomic_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "500", NULL };

	run_test("ib_atomic_lat", extra, 1, 8, 8);
}

Test(apps_perftest, udp_ib_write_bw_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "20", NULL };

	run_udp("ib_write_bw", extra, 23, 2, 8388608);
}

Test(apps_perftest, udp_ib_read_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "200", NULL };

	run_udp("ib_read_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, udp_ib_send_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "200", NULL };

	run_udp("ib_send_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, udp_ib_atomic_bw, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp("ib_atomic_bw", extra, 1, 8, 8);
}

Test(apps_perftest, udp_ib_write_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp("ib_write_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_ib_read_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp("ib_read_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_ib_send_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp("ib_send_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_ib_atomic_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp("ib_atomic_lat", extra, 1, 8, 8);
}

/* -R on sv_udp0: rdma_cm over the UDP transport's IB CM (REQ/REP/RTU), which a RoCE
 * device supports as well as out-of-band setup. */
Test(apps_perftest, udp_cm_ib_write_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "200", NULL };

	run_udp_cm("ib_write_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, udp_cm_ib_read_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "200", NULL };

	run_udp_cm("ib_read_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, udp_cm_ib_send_bw, .timeout = 200)
{
	const char *extra[] = { "-s", "65536", "-n", "200", NULL };

	run_udp_cm("ib_send_bw", extra, 1, 65536, 65536);
}

Test(apps_perftest, udp_cm_ib_atomic_bw, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp_cm("ib_atomic_bw", extra, 1, 8, 8);
}

Test(apps_perftest, udp_cm_ib_write_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp_cm("ib_write_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_cm_ib_read_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp_cm("ib_read_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_cm_ib_send_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp_cm("ib_send_lat", extra, 1, 2, 2);
}

Test(apps_perftest, udp_cm_ib_atomic_lat, .timeout = 200)
{
	const char *extra[] = { "-n", "200", NULL };

	run_udp_cm("ib_atomic_lat", extra, 1, 8, 8);
}

/* -a on a latency program and a second bandwidth program per transport (2 B .. 8 MiB,
 * 23 sizes; a latency row per size as well). */
Test(apps_perftest, ib_read_lat_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "10", NULL };

	run_test("ib_read_lat", extra, 23, 2, 8388608);
}

Test(apps_perftest, ib_send_bw_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "20", NULL };

	run_test("ib_send_bw", extra, 23, 2, 8388608);
}

Test(apps_perftest, udp_ib_send_lat_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "10", NULL };

	run_udp("ib_send_lat", extra, 23, 2, 8388608);
}

Test(apps_perftest, udp_ib_read_bw_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "20", NULL };

	run_udp("ib_read_bw", extra, 23, 2, 8388608);
}

Test(apps_perftest, udp_cm_ib_write_lat_all_sizes, .timeout = 200)
{
	const char *extra[] = { "-a", "-n", "10", NULL };

	run_udp_cm("ib_write_lat", extra, 23, 2, 8388608);
}

/* Without -R on sv_tcp0: perftest exchanges QPNs over its socket and moves the QPs to
 * RTR itself, which an iWARP QP cannot do (its connection comes from the CM). Every
 * program must fail at once on both sides, saying why, rather than wait forever. */
Test(apps_perftest, tcp_without_cm_fails_cleanly, .timeout = 200)
{
	static const char *const eight[] = {
		"ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw",
		"ib_send_lat", "ib_atomic_bw", "ib_atomic_lat", NULL
	};

	apps_require(progs);
	for (int k = 0; eight[k]; k++) {
		char port[16], *so, *co;
		const char *srv[] = { "--transport", "tcp", eight[k], "-d", "sv_tcp0", "-p", port,
				      "-n", "10", NULL };
		const char *cli[] = { "--transport", "tcp", eight[k], "-d", "sv_tcp0", "-p", port,
				      "-n", "10", "127.0.0.1", NULL };
		struct apps_proc s, c;
		int p = apps_free_port(), rs, rc;

		snprintf(port, sizeof(port), "%d", p);
		apps_start(&s, srv);
		cr_assert(apps_wait_listen(&s, p, 10000), "%s: the server never listened",
			  eight[k]);
		apps_start(&c, cli);
		rc = apps_wait(&c, 30000);
		rs = apps_wait(&s, 30000);
		co = apps_output(&c);
		so = apps_output(&s);
		cr_expect(rc > 0 && rs > 0, "%s: client exit %d, server exit %d (-1: hung until "
			  "killed)\n--- client ---\n%s\n--- server ---\n%s", eight[k], rc, rs, co,
			  so);
		cr_expect(strstr(co, "connected by the connection manager"), "%s: %s", eight[k],
			  co);
		free(so);
		free(co);
	}
}

/* --run_infinitely: a result row every second (-D 1) until killed. After six seconds
 * both sides must still be running and the client must have reported throughput; then
 * both are killed (the end of such a run). stdbuf makes the rows reach the file. */
static void run_infinitely(enum mode m)
{
	char port[16], *co, *so;
	const char *tr = m == TCP_CM ? "tcp" : "udp";
	const char *dev = m == TCP_CM ? "sv_tcp0" : "sv_udp0";
	/* Out of band: GID index 0; otherwise -R (the last entry ends the list early). */
	const char *how = m == UDP_OOB ? "-x" : "-R", *how2 = m == UDP_OOB ? "0" : NULL;
	const char *srv[] = { "--transport", tr, "stdbuf", "-oL", "ib_write_bw", "-d", dev,
			      "-p", port, "--run_infinitely", "-D", "1", how, how2, NULL };
	const char *cli[] = { "--transport", tr, "stdbuf", "-oL", "ib_write_bw", "-d", dev,
			      "-p", port, "--run_infinitely", "-D", "1", "127.0.0.1", how, how2,
			      NULL };
	const char *const need[] = { "stdbuf", NULL };
	struct timespec six = { 6, 0 };
	struct apps_proc s, c;
	unsigned long first = 0, last = 0;
	bool s_up, c_up;
	int p = apps_free_port();

	apps_require(progs);
	apps_require(need);
	snprintf(port, sizeof(port), "%d", p);
	apps_start(&s, srv);
	cr_assert(apps_wait_listen(&s, p, 10000), "the server never listened");
	apps_start(&c, cli);
	nanosleep(&six, NULL);
	c_up = apps_running(&c);
	s_up = apps_running(&s);
	apps_kill(&c);
	apps_kill(&s);
	co = apps_output(&c);
	so = apps_output(&s);
	cr_expect(c_up && s_up, "client %s, server %s\n--- client ---\n%s\n--- server ---\n%s",
		  c_up ? "running" : "exited", s_up ? "running" : "exited", co, so);
	cr_expect_geq(result_rows(co, &first, &last), 1, "%s", co);
	cr_expect_eq(last, 65536, "%s", co);
	cr_expect(!strstr(co, "Bad wc status") && !strstr(co, "Failed"), "%s", co);
	free(co);
	free(so);
}

Test(apps_perftest, ib_write_bw_run_infinitely, .timeout = 120)
{
	run_infinitely(TCP_CM);
}

/* Out of band on sv_udp0: perftest's TCP socket is the port to wait for. */
Test(apps_perftest, udp_ib_write_bw_run_infinitely, .timeout = 120)
{
	run_infinitely(UDP_OOB);
}
