/*
 * capture_util.c — see capture_util.h. Linked into every test of test/wire.
 */
#include "capture_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../tshark_ports.h"

#define START_MS 20000
#define END_SENTINEL_MS 3000
#define STOP_MS 10000

/*
 * The captures on lo are to show datagrams as a wire carries them. A UDP_SEGMENT run
 * (wire/roce_tx.c) crosses lo whole, one frame of up to 64 KiB that a wire would carry
 * as its datagrams, so these tests have the transport send datagram by datagram
 * (SV_UDP_GSO=0), unless told otherwise; test_gso_wire.c captures the runs themselves,
 * cut as a device without the offload cuts them.
 */
__attribute__((constructor)) static void cap_no_gso(void)
{
	setenv("SV_UDP_GSO", "0", 0);
}

uint64_t cap_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool have_program(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

const char *cap_unavailable(void)
{
	static int can = -1;

	if (!have_program("tshark") || !have_program("dumpcap"))
		return "tshark/dumpcap not installed (apt-get install tshark)";
	/* Listing lo's link-layer types opens the device, which needs the right to capture
	 * (root, or dumpcap's capabilities): the probe fails exactly where a capture would. */
	if (can < 0)
		can = system("dumpcap -L -i lo >/dev/null 2>&1") == 0;
	return can ? NULL : "capturing on lo needs root (or dumpcap's capabilities: "
			    "dpkg-reconfigure wireshark-common)";
}

/* Whether port of type is free on 127.0.0.1 (bound and let go at once). */
static bool port_free(int type, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, type, 0);
	bool ok;

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/*
 * The capture's filter names the port before anything listens on it, so the port must
 * stay free until the test binds it. One from the kernel's ephemeral range does not: the
 * other tests running beside this one take ports from it for their connections and
 * listeners, and once took the very port between this check and the listen (ip(7),
 * ip_local_port_range). So the port is drawn below that range, where the kernel hands out
 * none by itself; the suite's other port pickers all take ephemeral ones.
 */
uint16_t cap_free_port(int type)
{
	static bool seeded;
	unsigned lo = tshark_ports_ephemeral_low();

	cr_assert_gt(lo, 11024u, "ip_local_port_range starts at %u: no room below it", lo);
	if (!seeded) {
		srand((unsigned)getpid() ^ (unsigned)time(NULL));
		seeded = true;
	}
	for (int i = 0; i < 1000; i++) {
		uint16_t port = (uint16_t)(10000 + (unsigned)rand() % (lo - 10000));

		if (!tshark_port_owned(type, port) && port_free(type, port))
			return port;
	}
	cr_assert_fail("no free port below %u", lo);
	return 0;
}

static void read_text(const char *path, char *text, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(text, 1, cap - 1, f) : 0;

	if (f)
		fclose(f);
	text[n] = 0;
}

/* Whether the bytes of nonce occur anywhere in the file (the file is small: a session). */
static bool file_has(const char *path, const char *nonce)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 16, len = 0, n;
	char *buf;
	bool found;

	if (!f)
		return false;
	buf = malloc(cap);
	cr_assert_not_null(buf);
	while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			buf = realloc(buf, cap *= 2);
			cr_assert_not_null(buf);
		}
	}
	fclose(f);
	found = memmem(buf, len, nonce, strlen(nonce)) != NULL;
	free(buf);
	return found;
}

static void send_sentinel(const struct capture *c, const char *nonce)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(c->sentinel_port) };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sendto(c->sentinel_fd, nonce, strlen(nonce), 0, (struct sockaddr *)&sa, sizeof(sa));
}

static void nonce_of(const struct capture *c, const char *what, char *out, size_t cap)
{
	snprintf(out, cap, "sv-capture-%s-%d-%u-%llu", what, (int)getpid(), c->sentinel_port,
		 (unsigned long long)cap_now_ms());
}

void cap_start(struct capture *c, const char *filter)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	uint64_t deadline = cap_now_ms() + START_MS;
	char full[512], nonce[96], text[1024];

	memset(c, 0, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "/tmp/sv-capture-XXXXXX");
	cr_assert_not_null(mkdtemp(c->dir));
	chmod(c->dir, 0777);	/* dumpcap may drop privileges before writing the file */
	snprintf(c->path, sizeof(c->path), "%s/session.pcap", c->dir);
	snprintf(c->log, sizeof(c->log), "%s/dumpcap.log", c->dir);

	/* The sentinel port stays bound by us, so no one else's traffic matches it. */
	c->sentinel_fd = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(c->sentinel_fd >= 0 &&
		  bind(c->sentinel_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockname(c->sentinel_fd, (struct sockaddr *)&sa, &salen) == 0);
	c->sentinel_port = ntohs(sa.sin_port);
	snprintf(full, sizeof(full), "(%s) or udp port %u", filter, c->sentinel_port);

	c->pid = fork();
	cr_assert_geq(c->pid, 0);
	if (c->pid == 0) {
		/* Messages to a file, not a pipe: dumpcap writes statistics when stopped and a
		 * closed pipe would kill it with SIGPIPE before the capture is complete. */
		int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("dumpcap", "dumpcap", "-q", "-P", "-i", "lo", "-f", full, "-a",
		       "duration:200", "-w", c->path, (char *)NULL);
		_exit(127);
	}
	nonce_of(c, "start", nonce, sizeof(nonce));
	for (;;) {
		int status;

		if (waitpid(c->pid, &status, WNOHANG) == c->pid) {
			c->pid = 0;
			read_text(c->log, text, sizeof(text));
			cr_assert_fail("dumpcap exited (status 0x%x): %s -- capturing on lo needs "
				       "root or dumpcap's capabilities (dpkg-reconfigure "
				       "wireshark-common)", status, text);
		}
		if (file_has(c->path, nonce))
			break;
		if (cap_now_ms() > deadline) {
			read_text(c->log, text, sizeof(text));
			cap_stop(c);
			cr_assert_fail("dumpcap did not capture our sentinel within %d ms: %s",
				       START_MS, text);
		}
		send_sentinel(c, nonce);
		usleep(20 * 1000);
	}
}

void cap_stop(struct capture *c)
{
	uint64_t deadline = cap_now_ms() + END_SENTINEL_MS;
	char nonce[96];
	int status = 0;
	bool exited_early;

	if (c->pid <= 0)
		return;
	/* Loopback delivers in order through one ring: once a datagram sent after the session
	 * is in the file, so is the session. dumpcap may buffer its writes, so this wait is
	 * bounded and not an assertion; stopping flushes the buffer either way. */
	nonce_of(c, "end", nonce, sizeof(nonce));
	do {
		send_sentinel(c, nonce);
		usleep(20 * 1000);
	} while (!file_has(c->path, nonce) && cap_now_ms() < deadline);
	close(c->sentinel_fd);
	c->sentinel_fd = -1;

	exited_early = waitpid(c->pid, &status, WNOHANG) == c->pid;
	if (!exited_early) {
		kill(c->pid, SIGINT);
		deadline = cap_now_ms() + STOP_MS;
		while (waitpid(c->pid, &status, WNOHANG) == 0) {
			if (cap_now_ms() > deadline) {
				kill(c->pid, SIGKILL);
				waitpid(c->pid, &status, 0);
				c->pid = 0;
				cr_assert_fail("dumpcap did not stop within %d ms", STOP_MS);
			}
			usleep(10 * 1000);
		}
	}
	c->pid = 0;
	cr_assert(!exited_early, "dumpcap stopped before the session ended (status 0x%x)",
		  status);
}

void cap_cleanup(struct capture *c)
{
	if (getenv("SV_KEEP_PCAP")) {
		cr_log_info("capture kept in %s", c->path);
		return;
	}
	unlink(c->path);
	unlink(c->log);
	rmdir(c->dir);
}

/* The payloads are the tests' bytes, not an upper-layer protocol: the RDMA ULP
 * dissectors are off, and their heuristics too (tshark 4.0's names), which run on
 * InfiniBand payloads even with the protocol disabled and have called application bytes
 * malformed (test/interop/run.sh: a 2-byte SEND taken for RPC-over-RDMA, then for an
 * Ethernet frame). */
#define TSHARK_NO_ULP                                                                     \
	"--disable-protocol rpcordma --disable-protocol smb_direct --disable-protocol smc "  \
	"--disable-protocol nvme-rdma --disable-protocol lnet --disable-protocol iser "      \
	"--disable-protocol infiniband_sdp --disable-protocol fcoib --disable-protocol eoib " \
	"--disable-heuristic eth_over_ib --disable-heuristic sdp_infiniband "                \
	"--disable-heuristic iser_infiniband --disable-heuristic lnet_ib "                    \
	"--disable-heuristic rpcrdma_infiniband --disable-heuristic smb_direct_infiniband "   \
	"--disable-heuristic smcr_infiniband"

#define CAP_TSHARK_CMD "timeout 120 tshark -n " TSHARK_NO_ULP " %s%s 2>/dev/null"

char *cap_tshark(const char *args)
{
	size_t cap = 1 << 16, len = 0, need;
	char *cmd, *out = malloc(cap);
	FILE *f;
	int status;

	const char *owners = tshark_ports_disable_opts();

	cr_assert_not_null(out);
	need = (size_t)snprintf(NULL, 0, CAP_TSHARK_CMD, owners, args) + 1;
	cmd = malloc(need);
	cr_assert_not_null(cmd);
	snprintf(cmd, need, CAP_TSHARK_CMD, owners, args);
	f = popen(cmd, "r");
	cr_assert_not_null(f, "popen %s", cmd);
	for (;;) {
		size_t n;

		if (len + 4096 > cap) {
			out = realloc(out, cap *= 2);
			cr_assert_not_null(out);
		}
		n = fread(out + len, 1, cap - len - 1, f);
		if (n == 0)
			break;
		len += n;
	}
	out[len] = 0;
	status = pclose(f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tshark failed (%d): %s",
		  status, cmd);
	free(cmd);
	return out;
}

void cap_no_errors(const char *path, const char *opts, const char *fmt, ...)
{
	char flt[256], args[1024], *out;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(flt, sizeof(flt), fmt, ap);
	va_end(ap);
	snprintf(args, sizeof(args), "-r %s %s -Y '(%s) && (_ws.malformed || "
		 "_ws.expert.severity >= \"Error\")' -T fields -e frame.number -e _ws.malformed "
		 "-e _ws.expert.message", path, opts, flt);
	out = cap_tshark(args);
	cr_assert_str_empty(out, "frames with errors (frame, malformed, message) among %s:\n%s",
			    flt, out);
	free(out);
}

size_t cap_count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads a dumpcap -P file frame by frame. */
struct pcap_reader {
	FILE *f;
	uint8_t rec[70000];
};

static void pcap_open(struct pcap_reader *r, const char *path)
{
	uint8_t gh[24];
	uint32_t magic;

	r->f = fopen(path, "rb");
	cr_assert_not_null(r->f, "%s", path);
	cr_assert_eq(fread(gh, 1, sizeof(gh), r->f), sizeof(gh), "pcap header of %s", path);
	magic = le32(gh);
	/* microsecond or nanosecond timestamps, written on this (little-endian) host */
	cr_assert(magic == 0xa1b2c3d4 || magic == 0xa1b23c4d, "pcap magic 0x%08x", magic);
	cr_assert_eq(le32(gh + 20), 1, "link type %u, want Ethernet", le32(gh + 20));
}

/* The next frame whose Ethernet type is ethertype, Ethernet header stripped. */
static bool next_of_type(struct pcap_reader *r, uint16_t ethertype, const uint8_t **ip,
			 size_t *len)
{
	uint8_t rh[16];

	while (fread(rh, 1, sizeof(rh), r->f) == sizeof(rh)) {
		uint32_t caplen = le32(rh + 8), wirelen = le32(rh + 12);

		cr_assert_leq(caplen, sizeof(r->rec));
		cr_assert_eq(caplen, wirelen, "truncated capture record");
		cr_assert_eq(fread(r->rec, 1, caplen, r->f), caplen);
		if (caplen < 14 || r->rec[12] != ethertype >> 8 || r->rec[13] != (ethertype & 0xff))
			continue;
		*ip = r->rec + 14;
		*len = caplen - 14;
		return true;
	}
	return false;
}

void pcap_each(const char *path, bool ipv6,
	       void (*fn)(const uint8_t *ip, size_t len, void *arg), void *arg)
{
	struct pcap_reader *r = malloc(sizeof(*r));
	const uint8_t *ip;
	size_t len;

	cr_assert_not_null(r);
	pcap_open(r, path);
	while (next_of_type(r, ipv6 ? 0x86dd : 0x0800, &ip, &len))
		fn(ip, len, arg);
	fclose(r->f);
	free(r);
}
