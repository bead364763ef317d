/*
 * test_apps_perftest.c — perftest over rdma_cm (-R) on sv_tcp0, server and client on
 * 127.0.0.1. perftest exits non-zero on any failed completion; the result table must
 * show every message size asked for with a non-zero figure.
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

/* udp: sv_udp0 without -R (QPs connected out of band, as on a RoCE port); otherwise
 * sv_tcp0 with -R (an iWARP QP is connected by the CM). */
static void run_on(bool udp, const char *prog, const char *const extra[], int want_rows,
		   unsigned long want_first, unsigned long want_last)
{
	char port[16], *so, *co;
	const char *srv[32] = { prog, "-p", port, "-d" };
	const char *cli[32] = { prog, "-p", port, "-d" };
	unsigned long first = 0, last = 0;
	int p = apps_free_port(), i, n = 4;

	apps_require(progs);
	snprintf(port, sizeof(port), "%d", p);
	if (udp) {
		srv[n] = cli[n] = "sv_udp0";
		n++;
		srv[n] = cli[n] = "-x";		/* GID index: the RoCE v2 one */
		n++;
		srv[n] = cli[n] = "0";
		n++;
	} else {
		srv[n] = cli[n] = "sv_tcp0";
		n++;
		srv[n] = cli[n] = "-R";
		n++;
	}
	for (i = 0; extra[i]; i++, n++)
		srv[n] = cli[n] = extra[i];
	cli[n] = "127.0.0.1";
	apps_pair(srv, cli, p, 150000, &so, &co);
	cr_expect_eq(result_rows(co, &first, &last), want_rows, "%s", co);
	cr_expect_eq(first, want_first, "%s", co);
	cr_expect_eq(last, want_last, "%s", co);
	cr_expect(strstr(co, udp ? "Transport type : IB" : "Transport type : IW"), "%s", co);
	free(so);
	free(co);
}

static void run_test(const char *prog, const char *const extra[], int want_rows,
		     unsigned long want_first, unsigned long want_last)
{
	run_on(false, prog, extra, want_rows, want_first, want_last);
}

static void run_udp(const char *prog, const char *const extra[], int want_rows,
		    unsigned long want_first, unsigned long want_last)
{
	run_on(true, prog, extra, want_rows, want_first, want_last);
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

/* --run_infinitely: a result row every second (-D 1) until killed. After six seconds
 * both sides must still be running and the client must have reported throughput; then
 * both are killed (the end of such a run). stdbuf makes the rows reach the file. */
Test(apps_perftest, ib_write_bw_run_infinitely, .timeout = 120)
{
	char port[16], *co, *so;
	const char *srv[] = { "stdbuf", "-oL", "ib_write_bw", "-R", "-d", "sv_tcp0", "-p", port,
			      "--run_infinitely", "-D", "1", NULL };
	const char *cli[] = { "stdbuf", "-oL", "ib_write_bw", "-R", "-d", "sv_tcp0", "-p", port,
			      "--run_infinitely", "-D", "1", "127.0.0.1", NULL };
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
