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
		double fig1, fig2, fig3 = 0;
		int got = sscanf(line, " %lu %lu %lf %lf %lf", &bytes, &iters, &fig1, &fig2,
				 &fig3);

		/* BW rows: peak, average, message rate (peak reads 0.00 in --run_infinitely
		 * rows, and both BW figures in a row slow enough to round to 0.00 MB/s, as a
		 * 4-byte row with one retransmission does; its message rate still shows);
		 * latency rows: t_min, t_max, t_typical. */
		if (got >= 4 && (fig1 > 0 || fig2 > 0 || fig3 > 0)) {
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
	TCP_OOB,	/* sv_tcp0 without -R, which an iWARP device refuses */
	UDP_OOB,	/* sv_udp0 without -R: QPs connected out of band */
	UDP_CM,		/* sv_udp0 with -R */
};

/* A server's and a client's command line for svrun, on a free perftest port. */
struct cmd {
	char words[128];		/* the program and its options, split in place */
	char port[16];			/* perftest's TCP port (-p) */
	int p;				/* the same, as a number */
	const char *srv[40], *cli[40];	/* NULL-terminated */
};

/* Builds both command lines: svrun's transport for mode m, then `line` (the program and
 * its options, separated by spaces), the port, the device and how the QPs connect; the
 * client's ends with the server's address. */
static void perf_cmd(struct cmd *c, enum mode m, const char *line, const char *addr)
{
	static const char *const how[][4] = {
		[TCP_CM] = { "sv_tcp0", "-R" },
		[TCP_OOB] = { "sv_tcp0" },
		[UDP_OOB] = { "sv_udp0", "-x", "0" },	/* GID index: the RoCE v2 one */
		[UDP_CM] = { "sv_udp0", "-R" },
	};
	char *word, *save;
	int i, n = 0;

	c->p = apps_free_port();
	snprintf(c->port, sizeof(c->port), "%d", c->p);
	snprintf(c->words, sizeof(c->words), "%s", line);
	c->srv[n++] = "--transport";
	c->srv[n++] = m == TCP_CM || m == TCP_OOB ? "tcp" : "udp";
	for (word = strtok_r(c->words, " ", &save); word; word = strtok_r(NULL, " ", &save))
		c->srv[n++] = word;
	c->srv[n++] = "-p";
	c->srv[n++] = c->port;
	c->srv[n++] = "-d";
	for (i = 0; how[m][i]; i++)
		c->srv[n++] = how[m][i];
	memcpy(c->cli, c->srv, (size_t)n * sizeof(*c->srv));
	c->srv[n] = NULL;
	c->cli[n] = addr;
	c->cli[n + 1] = NULL;
}

/*
 * perftest's own check of its cycle counter: before it reports, it times 200 busy waits
 * of 100 us to 2 ms against gettimeofday and fails the run when the fit is poor, which
 * one preemption during a wait makes it on a loaded machine (perftest src/get_clock.c,
 * sample_get_cpu_mhz; no option turns the check off, -F only silences a cpufreq
 * warning). It judges the host's clock, not a byte that moved, so a run failing with it
 * runs once more; a second failure fails the test.
 */
#define CLOCK_FAIL "Correlation coefficient r^2"

static void run_on(enum mode m, int want_rows, unsigned long want_first,
		   unsigned long want_last, const char *line)
{
	char addr[32] = "127.0.0.1", *so, *co;
	unsigned long first = 0, last = 0;
	struct cmd c;

	apps_require(progs);
	/* With -R on sv_udp0 the server must be listening before the client starts
	 * (perftest 4.5 crashes in its retry path on a refusal): the pair waits until its
	 * CM listener is published. One rerun, on a new port, only for CLOCK_FAIL. */
	for (int run = 0;; run++) {
		perf_cmd(&c, m, line, addr);
		if (apps_pair_or_rerun(c.srv, c.cli, c.p, m == UDP_CM, 150000,
				       run == 0 ? CLOCK_FAIL : NULL, &so, &co))
			break;
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

/* One run per test: name, how the QPs connect, the result rows the client must print and
 * the first and last message size in them, then the program and its options. */
#define PERFTEST(name, m, rows, first, last, line)                                         \
	Test(apps_perftest, name, .timeout = 200) { run_on(m, rows, first, last, line); }

Test(apps_perftest, every_symbol_resolves, .timeout = 120)
{
	apps_require(progs);
	apps_ldd_check(progs);
}

/* sv_tcp0 with -R; -a: every size from 2 B to 8 MiB (23 rows). */
PERFTEST(ib_write_bw_all_sizes, TCP_CM, 23, 2, 8388608, "ib_write_bw -a -n 20")
PERFTEST(ib_read_bw, TCP_CM, 1, 65536, 65536, "ib_read_bw -s 65536 -n 500")
PERFTEST(ib_send_bw, TCP_CM, 1, 65536, 65536, "ib_send_bw -s 65536 -n 500")
PERFTEST(ib_atomic_bw, TCP_CM, 1, 8, 8, "ib_atomic_bw -n 500")
PERFTEST(ib_write_lat, TCP_CM, 1, 2, 2, "ib_write_lat -n 500")
PERFTEST(ib_read_lat, TCP_CM, 1, 2, 2, "ib_read_lat -n 500")
PERFTEST(ib_send_lat, TCP_CM, 1, 2, 2, "ib_send_lat -n 500")
PERFTEST(ib_atomic_lat, TCP_CM, 1, 8, 8, "ib_atomic_lat -n 500")

/* sv_udp0 without -R: QPs connected out of band. */
PERFTEST(udp_ib_write_bw_all_sizes, UDP_OOB, 23, 2, 8388608, "ib_write_bw -a -n 20")
PERFTEST(udp_ib_read_bw, UDP_OOB, 1, 65536, 65536, "ib_read_bw -s 65536 -n 200")
PERFTEST(udp_ib_send_bw, UDP_OOB, 1, 65536, 65536, "ib_send_bw -s 65536 -n 200")
PERFTEST(udp_ib_atomic_bw, UDP_OOB, 1, 8, 8, "ib_atomic_bw -n 200")
PERFTEST(udp_ib_write_lat, UDP_OOB, 1, 2, 2, "ib_write_lat -n 200")
PERFTEST(udp_ib_read_lat, UDP_OOB, 1, 2, 2, "ib_read_lat -n 200")
PERFTEST(udp_ib_send_lat, UDP_OOB, 1, 2, 2, "ib_send_lat -n 200")
PERFTEST(udp_ib_atomic_lat, UDP_OOB, 1, 8, 8, "ib_atomic_lat -n 200")

/* -R on sv_udp0: rdma_cm over the UDP transport's IB CM (REQ/REP/RTU), which a RoCE
 * device supports as well as out-of-band setup. */
PERFTEST(udp_cm_ib_write_bw, UDP_CM, 1, 65536, 65536, "ib_write_bw -s 65536 -n 200")
PERFTEST(udp_cm_ib_read_bw, UDP_CM, 1, 65536, 65536, "ib_read_bw -s 65536 -n 200")
PERFTEST(udp_cm_ib_send_bw, UDP_CM, 1, 65536, 65536, "ib_send_bw -s 65536 -n 200")
PERFTEST(udp_cm_ib_atomic_bw, UDP_CM, 1, 8, 8, "ib_atomic_bw -n 200")
PERFTEST(udp_cm_ib_write_lat, UDP_CM, 1, 2, 2, "ib_write_lat -n 200")
PERFTEST(udp_cm_ib_read_lat, UDP_CM, 1, 2, 2, "ib_read_lat -n 200")
PERFTEST(udp_cm_ib_send_lat, UDP_CM, 1, 2, 2, "ib_send_lat -n 200")
PERFTEST(udp_cm_ib_atomic_lat, UDP_CM, 1, 8, 8, "ib_atomic_lat -n 200")

/* -a on a latency program and a second bandwidth program per transport (2 B .. 8 MiB,
 * 23 sizes; a latency row per size as well). */
PERFTEST(ib_read_lat_all_sizes, TCP_CM, 23, 2, 8388608, "ib_read_lat -a -n 10")
PERFTEST(ib_send_bw_all_sizes, TCP_CM, 23, 2, 8388608, "ib_send_bw -a -n 20")
PERFTEST(udp_ib_send_lat_all_sizes, UDP_OOB, 23, 2, 8388608, "ib_send_lat -a -n 10")
PERFTEST(udp_ib_read_bw_all_sizes, UDP_OOB, 23, 2, 8388608, "ib_read_bw -a -n 20")
PERFTEST(udp_cm_ib_write_lat_all_sizes, UDP_CM, 23, 2, 8388608, "ib_write_lat -a -n 10")

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
		char line[64], *so, *co;
		struct apps_proc s, c;
		struct cmd cmd;
		int rs, rc;

		snprintf(line, sizeof(line), "%s -n 10", eight[k]);
		perf_cmd(&cmd, TCP_OOB, line, "127.0.0.1");
		apps_start(&s, cmd.srv);
		cr_assert(apps_wait_listen(&s, cmd.p, 10000), "%s: the server never listened",
			  eight[k]);
		apps_start(&c, cmd.cli);
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

/* Waits until the program's stdout so far holds at least n result rows, or it exits, or
 * the deadline passes; returns the rows it holds. */
static int wait_rows(struct apps_proc *p, int n, int timeout_ms)
{
	struct timespec tick = { 0, 100 * 1000 * 1000 };
	unsigned long first, last;
	int got = 0;

	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		FILE *f = fopen(p->log, "r");
		char buf[16384];
		size_t len = 0;

		if (f) {
			len = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
		}
		buf[len] = '\0';
		got = result_rows(buf, &first, &last);
		if (got >= n || !apps_running(p))
			break;
		nanosleep(&tick, NULL);
	}
	return got;
}

/* --run_infinitely: a result row every second (-D 1) until killed. Once the client has
 * reported two rows (it runs on past its first interval) both sides must still be
 * running; then both are killed (the end of such a run). stdbuf makes the rows reach the
 * file. */
static void run_infinitely(enum mode m)
{
	const char *const need[] = { "stdbuf", NULL };
	struct apps_proc s, c;
	unsigned long first = 0, last = 0;
	bool s_up, c_up;
	struct cmd cmd;
	char *co, *so;
	int rows;

	apps_require(progs);
	apps_require(need);
	perf_cmd(&cmd, m, "stdbuf -oL ib_write_bw --run_infinitely -D 1", "127.0.0.1");
	apps_start(&s, cmd.srv);
	cr_assert(apps_wait_listen(&s, cmd.p, 10000), "the server never listened");
	apps_start(&c, cmd.cli);
	rows = wait_rows(&c, 2, 60000);
	c_up = apps_running(&c);
	s_up = apps_running(&s);
	apps_kill(&c);
	apps_kill(&s);
	co = apps_output(&c);
	so = apps_output(&s);
	cr_expect(c_up && s_up, "client %s, server %s\n--- client ---\n%s\n--- server ---\n%s",
		  c_up ? "running" : "exited", s_up ? "running" : "exited", co, so);
	cr_expect_geq(rows, 2, "%s", co);
	cr_expect_geq(result_rows(co, &first, &last), 2, "%s", co);
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
