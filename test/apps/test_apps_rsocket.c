/*
 * test_apps_rsocket.c — rsockets (compat/rsocket_*.c) shown with programs we did not
 * write, through svrun on sv_tcp0 (iWARP: messages as Sends) and sv_udp0 (RoCE v2:
 * RDMA WRITE with immediate): rstream and riostream with their own data verification
 * (-T v: every transfer compared with the pattern, a mismatch is a non-zero exit), rcopy
 * copying a file whose bytes are compared here, and a socket program pair under
 * rdma-core's librspreload.so (socat serving, OpenBSD nc sending) whose file is compared
 * too, with SV_LOG=debug showing both ends' rsockets reached CONNECTED (the preload
 * library falls back to kernel sockets silently when rsocket() fails). udpong (datagram
 * rsockets, not built) must fail at once with EPROTONOSUPPORT's message.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <criterion/criterion.h>

#include "apps_util.h"

#define PRELOAD "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"

static const char *const progs[] = { "rstream", "riostream", "rcopy", "udpong", NULL };

/* Builds "[--transport udp] argv..." for svrun, with "<port>" in any word replaced by
 * port; the words made are kept in store. */
static void fill(const char *out[], char store[][128], bool udp, const char *const in[],
		 const char *port)
{
	int n = 0;

	if (udp) {
		out[n++] = "--transport";
		out[n++] = "udp";
	}
	for (; *in; in++, n++) {
		const char *at = strstr(*in, "<port>");

		if (!at) {
			out[n] = *in;
			continue;
		}
		snprintf(store[n], 128, "%.*s%s%s", (int)(at - *in), *in, port, at + 6);
		out[n] = store[n];
	}
	out[n] = NULL;
}

/* Server then client on 127.0.0.1 and a free port; both must exit 0. */
static void pair(bool udp, const char *const srv[], const char *const cli[], char **so,
		 char **co)
{
	const char *s[32], *c[32];
	char port[16], ss[32][128], cs[32][128];
	int p;

	apps_require(progs);
	p = apps_free_port();
	snprintf(port, sizeof(port), "%d", p);
	fill(s, ss, udp, srv, port);
	fill(c, cs, udp, cli, port);
	if (udp)
		apps_pair_cm(s, c, p, NULL, 120000, so, co, NULL);
	else
		apps_pair(s, c, p, 120000, so, co);
}

/* A server started and waited for until it listens, then the client run to its end; a
 * server that serves until stopped (rcopy) is stopped then (*srv_rc -1), one that ends
 * by itself (socat) must within 20 s. */
static void serve(bool udp, const char *const srv[], const char *const cli[],
		  const char *const env[], bool stops, int *srv_rc, char **so, char **co)
{
	const char *s[32], *c[32];
	struct apps_proc sp, cp;
	char port[16], ss[32][128], cs[32][128];
	int p, rc;

	p = apps_free_port();
	snprintf(port, sizeof(port), "%d", p);
	fill(s, ss, udp, srv, port);
	fill(c, cs, udp, cli, port);
	apps_start_env(&sp, env, s);
	if (!(udp ? apps_wait_cm_listen(&sp, p, NULL, NULL, 20000) :
		    apps_wait_listen(&sp, p, 20000))) {
		apps_kill(&sp);
		*so = apps_output(&sp);
		cr_assert_fail("%s not listening:\n%s", srv[0], *so);
	}
	apps_start_env(&cp, env, c);
	rc = apps_wait(&cp, 120000);
	*co = apps_output(&cp);
	if (!stops)
		apps_kill(&sp);
	*srv_rc = stops ? apps_wait(&sp, 20000) : -1;
	*so = apps_output(&sp);
	cr_expect_eq(rc, 0, "client exit %d\n%s", rc, *co);
}

#define TCP_AND_UDP(name)                                                                  \
	static void name(bool udp);                                                        \
	Test(apps_rsocket, name, .timeout = 300) { name(false); }                          \
	Test(apps_rsocket, udp_##name, .timeout = 300) { name(true); }                     \
	static void name(bool udp)

/* Each run prints one result line ("custom <size> <count> ..."); -T v makes rstream
 * check every transfer, exiting non-zero on a mismatch. */
static void rstream_run(bool udp, const char *mode, const char *size, const char *count,
			const char *shown)
{
	const char *srv[] = { "rstream", "-p", "<port>", "-T", "v", "-T", mode, "-S", size,
			      "-C", count, NULL };
	const char *cli[] = { "rstream", "-s", "127.0.0.1", "-p", "<port>", "-T", "v", "-T",
			      mode, "-S", size, "-C", count, NULL };
	char *so, *co, line[64];

	pair(udp, srv, cli, &so, &co);
	snprintf(line, sizeof(line), "custom    %s", shown);
	cr_expect(strstr(so, line), "%s", so);
	cr_expect(strstr(co, line), "%s", co);
	free(so);
	free(co);
}

/* Non-blocking calls (rstream's default: EAGAIN and retry), sizes that are not a
 * multiple of anything. */
TCP_AND_UDP(rstream_nonblocking)
{
	rstream_run(udp, "n", "1", "500", "1 ");
	rstream_run(udp, "n", "4097", "200", "4k ");
}

/* Blocking calls with MSG_WAITALL; 1000000 bytes is more than the 1 MiB receive buffer's
 * published half (SO_RCVBUF 512 KiB, doubled), so every transfer waits for Credit
 * Updates. */
TCP_AND_UDP(rstream_blocking)
{
	rstream_run(udp, "b", "65537", "100", "64k ");
	rstream_run(udp, "b", "1000000", "10", "976k ");
}

/* rpoll before every call (-T a), for POLLIN and POLLOUT. */
TCP_AND_UDP(rstream_async)
{
	rstream_run(udp, "a", "3000", "300", "2.9k ");
	rstream_run(udp, "a", "300000", "20", "292k ");
}

/* riostream: riomap publishes the receive buffer, riowrite places the bytes there by
 * RDMA WRITE, and the receiver polls the buffer's last byte with no call at all. */
TCP_AND_UDP(riostream)
{
	const char *srv[] = { "riostream", "-p", "<port>", "-T", "v", "-S", "100000", "-C",
			      "10", NULL };
	const char *cli[] = { "riostream", "-s", "127.0.0.1", "-p", "<port>", "-T", "v", "-S",
			      "100000", "-C", "10", NULL };
	char *so, *co;

	pair(udp, srv, cli, &so, &co);
	cr_expect(strstr(so, "custom    97k"), "%s", so);
	cr_expect(strstr(co, "custom    97k"), "%s", co);
	free(so);
	free(co);
}

/* A file of random bytes, len long, at path. */
static void random_file(const char *path, size_t len)
{
	FILE *in = fopen("/dev/urandom", "rb"), *out = fopen(path, "wb");
	char buf[65536];

	cr_assert(in && out, "cannot make %s", path);
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);

		cr_assert_eq(fread(buf, 1, n, in), n);
		cr_assert_eq(fwrite(buf, 1, n, out), n);
		done += n;
	}
	fclose(in);
	fclose(out);
}

static bool same_bytes(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = fa && fb;

	while (same) {
		int ca = getc(fa), cb = getc(fb);

		same = ca == cb;
		if (ca == EOF || cb == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

static void temp_paths(char *src, char *dst, size_t len)
{
	snprintf(src, len, "/tmp/sv_rsocket_src.%d", getpid());
	snprintf(dst, len, "/tmp/sv_rsocket_dst.%d", getpid());
	unlink(dst);
	random_file(src, 3000000);
}

/* rcopy: the file is sent with rsend and written by the server; what it wrote must be
 * the file's bytes. The server serves until stopped. */
TCP_AND_UDP(rcopy)
{
	char src[64], dst[64], target[96], *so, *co;
	const char *srv[] = { "rcopy", "-p", "<port>", NULL };
	const char *cli[] = { "rcopy", src, target, "-p", "<port>", NULL };
	int rc;

	apps_require(progs);
	temp_paths(src, dst, sizeof(src));
	snprintf(target, sizeof(target), "127.0.0.1:%s", dst);
	serve(udp, srv, cli, NULL, false, &rc, &so, &co);
	cr_expect(strstr(co, "3000000 bytes"), "%s", co);
	cr_expect(same_bytes(src, dst), "%s differs from %s\n%s\n%s", dst, src, co, so);
	unlink(src);
	unlink(dst);
	free(so);
	free(co);
}

/* An unmodified socket program pair under librspreload.so: socat accepts and writes what
 * arrives to a file, nc sends the file and shuts its side down (-N), so socat sees the
 * end and exits. (nc's own listener takes accept4(), which librspreload.so does not
 * interpose; socat's takes accept().) */
TCP_AND_UDP(preload_socat_nc)
{
	char src[64], dst[64], out[96], cmd[256], *so, *co;
	const char *srv[] = { "env", "LD_PRELOAD=" PRELOAD, "socat", "-u",
			      "TCP4-LISTEN:<port>,reuseaddr", out, NULL };
	/* The port is the shell's $1 (cmd is longer than fill() keeps). */
	const char *cli[] = { "sh", "-c", cmd, "nc", "<port>", NULL };
	const char *const env[] = { "SV_LOG=debug", NULL };
	const char *need[] = { "socat", "nc", NULL };
	struct stat st;
	int rc;

	apps_require(need);
	if (stat(PRELOAD, &st))
		cr_skip_test("%s is not installed (package librdmacm1)", PRELOAD);
	temp_paths(src, dst, sizeof(src));
	snprintf(out, sizeof(out), "OPEN:%s,creat,trunc", dst);
	snprintf(cmd, sizeof(cmd), "exec env LD_PRELOAD=%s nc -N 127.0.0.1 \"$1\" < %s",
		 PRELOAD, src);
	serve(udp, srv, cli, env, true, &rc, &so, &co);
	cr_expect_eq(rc, 0, "socat exit %d\n%s", rc, so);
	cr_expect(same_bytes(src, dst), "%s differs from %s\n%s\n%s", dst, src, co, so);
	cr_expect(strstr(so, "-> LISTENING") && strstr(so, "ACCEPTING -> CONNECTED"),
		  "the server's socket was no rsocket:\n%s", so);
	cr_expect(strstr(co, "CONNECTING -> CONNECTED"), "the client's socket was no "
		  "rsocket:\n%s", co);
	unlink(src);
	unlink(dst);
	free(so);
	free(co);
}

/* Datagram rsockets are not built: udpong must say so at once, not hang or ENOSYS. */
Test(apps_rsocket, udpong_refused, .timeout = 60)
{
	const char *argv[] = { "--transport", "udp", "udpong", NULL };
	struct apps_proc p;
	char *out;
	int rc;

	apps_require(progs);
	apps_start(&p, argv);
	rc = apps_wait(&p, 30000);
	out = apps_output(&p);
	cr_expect_neq(rc, 0, "%s", out);
	cr_expect_neq(rc, -1, "udpong hung\n%s", out);
	cr_expect(strstr(out, "rsocket failed: Protocol not supported"), "%s", out);
	free(out);
}
