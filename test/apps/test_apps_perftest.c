/*
 * test_apps_perftest.c — perftest over rdma_cm (-R) on sv_tcp0, server and client on
 * 127.0.0.1. perftest exits non-zero on any failed completion; the result table must
 * show every message size asked for with a non-zero figure.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "ldd_util.h"

static const char *const progs[] = {
	"ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw",
	"ib_send_lat", "ib_atomic_bw", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat",
	"raw_ethernet_burst_lat", "raw_ethernet_fs_rate", NULL
};

/* Counts result rows: lines that start with the message size and then the iterations. */
static int result_rows(const char *out, unsigned long *first, unsigned long *last)
{
	const char *line = out;
	int n = 0;

	while (line && *line) {
		unsigned long bytes, iters;
		double fig;

		if (sscanf(line, " %lu %lu %lf", &bytes, &iters, &fig) == 3 && fig > 0) {
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
