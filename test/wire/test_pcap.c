/*
 * test_pcap.c — SV_PCAP (wire/pcap.h): a device's own capture, with no capture rights
 * (no root, no dumpcap; this test runs as any user), must be a file tshark decodes:
 *  - UDP: a session of every RC message kind (pair_util.h) between two devices with
 *    SV_PCAP set; each device's file (path, path.1) has its own datagrams in both
 *    directions, every frame is a UDP datagram between the session's ports that decodes
 *    as InfiniBand (RoCEv2) with a BTH opcode, none malformed or with an expert error,
 *    and the bytes of a SEND and of a READ response are in both files; over IPv4 and
 *    over IPv6;
 *  - TCP: a connection with a SEND and a multi-FPDU RDMA WRITE; each end's file starts
 *    the connection with SYN, SYN-ACK, ACK, every TCP payload decodes as MPA (or is part
 *    of a PDU tshark reassembled), the MPA Request and Reply are there, the RDMAP opcodes
 *    include Send and Write, nothing is malformed, and the payload pattern is in the file;
 *  - TLS: under TLS 1.3 the TCP file holds TLS records, the pattern is not in it;
 *  - SV_PCAP_MAX: a small bound stops the file at or below it, still a readable capture.
 * The heuristic ULP dissectors are off (capture_util.h). Files are removed unless
 * SV_KEEP_PCAP is set. Skipped only when tshark is not installed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "pair_util.h"
#include "tcp_util.h"
#include "softverbs.h"

#define ALL_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		    SV_ACCESS_REMOTE_ATOMIC)
#define TCP_BUF (256u << 10)
#define WRITE_LEN (100u << 10)	/* many FPDUs, several TCP frames */
#define SEND_LEN 3000u
#define WAIT_MS 10000

struct pdir {
	char dir[64];
	char path[128];		/* the first context's file; the second's is path.1 */
	char path1[140];
};

static void need_tshark(void)
{
	if (system("command -v tshark >/dev/null 2>&1") != 0)
		cr_skip_test("tshark not installed (apt-get install tshark)");
}

static void pdir_make(struct pdir *p, const char *name)
{
	snprintf(p->dir, sizeof(p->dir), "/tmp/sv-pcap-XXXXXX");
	cr_assert_not_null(mkdtemp(p->dir));
	snprintf(p->path, sizeof(p->path), "%s/%s.pcap", p->dir, name);
	snprintf(p->path1, sizeof(p->path1), "%s.1", p->path);
	cr_assert_eq(setenv("SV_PCAP", p->path, 1), 0);
}

static void pdir_done(struct pdir *p)
{
	unsetenv("SV_PCAP");
	if (getenv("SV_KEEP_PCAP")) {
		cr_log_info("captures kept in %s", p->dir);
		return;
	}
	unlink(p->path);
	unlink(p->path1);
	rmdir(p->dir);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;

	cr_assert_not_null(f, "%s was not written", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	b = malloc((size_t)n + 1);
	cr_assert_not_null(b);
	cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static bool file_contains(const char *path, const void *needle, size_t n)
{
	size_t len;
	uint8_t *b = slurp(path, &len);
	bool yes = memmem(b, len, needle, n) != NULL;

	free(b);
	return yes;
}

static size_t lines_of(const char *args)
{
	char *out = cap_tshark(args);
	size_t n = cap_count(out, "\n");

	free(out);
	return n;
}

/* ---------------------------------------------------------------------------------------
 * UDP
 */

/* One device's file: its session datagrams both ways, all InfiniBand, none malformed. */
static void udp_file_decodes(const char *path, const struct side *a, const struct side *b)
{
	char dec[128], flt[128], args[512];
	size_t all, ib;

	snprintf(dec, sizeof(dec), "-d udp.port==%u,infiniband -d udp.port==%u,infiniband",
		 a->port, b->port);
	snprintf(flt, sizeof(flt), "udp.port == %u && udp.port == %u", a->port, b->port);
	cap_no_errors(path, dec, "%s", flt);

	/* every frame of the file: the device sent or received nothing else */
	snprintf(args, sizeof(args), "-r %s %s -T fields -e frame.number", path, dec);
	all = lines_of(args);
	snprintf(args, sizeof(args), "-r %s %s -Y '(%s) && infiniband.bth.opcode' -T fields "
		 "-e frame.number", path, dec, flt);
	ib = lines_of(args);
	cr_assert_gt(all, 20, "%s: %zu frames", path, all);
	cr_assert_eq(ib, all, "%s: %zu of %zu frames are the session's UDP datagrams with a "
		     "BTH opcode", path, ib, all);
	for (int dir = 0; dir < 2; dir++) {
		snprintf(args, sizeof(args), "-r %s %s -Y '(%s) && udp.srcport == %u && "
			 "infiniband.bth' -T fields -e frame.number", path, dec, flt,
			 dir ? b->port : a->port);
		cr_assert_gt(lines_of(args), 0, "%s: datagrams from port %u", path,
			     dir ? b->port : a->port);
	}
}

/* The session between two devices bound to addr; both files decode and carry the bytes
 * of a SEND (a to b) and of a READ response (b to a). */
static void udp_session(const char *addr)
{
	struct side a, b;
	struct pdir p;
	uint8_t sent[200], read_back[200];

	need_tshark();
	pdir_make(&p, "udp");
	side_open(&a, addr, 0, 0x000100, ALL_ACCESS);
	side_open(&b, addr, 0, 0x000200, ALL_ACCESS);
	/* the first SEND's first packet (offset 0 of a) and the first READ's first response
	 * (offset 8 * 2048 of b), before the session overwrites anything */
	memcpy(sent, a.buf, sizeof(sent));
	memcpy(read_back, b.buf + 8 * 2048, sizeof(read_back));
	side_to_rts(&a, &b, ALL_ACCESS);
	side_to_rts(&b, &a, ALL_ACCESS);
	run_rc_session(&a, &b);
	side_close(&a);
	side_close(&b);

	udp_file_decodes(p.path, &a, &b);
	udp_file_decodes(p.path1, &a, &b);
	cr_assert(file_contains(p.path, sent, sizeof(sent)), "the SEND's bytes in a's file");
	cr_assert(file_contains(p.path1, sent, sizeof(sent)), "the SEND's bytes in b's file");
	cr_assert(file_contains(p.path, read_back, sizeof(read_back)), "READ response, a");
	cr_assert(file_contains(p.path1, read_back, sizeof(read_back)), "READ response, b");
	pdir_done(&p);
}

Test(wire_pcap, udp_session_decodes_as_infiniband, .timeout = 180)
{
	udp_session("127.0.0.1");
}

Test(wire_pcap, udp_session_over_ipv6_decodes_as_infiniband, .timeout = 180)
{
	udp_session("::1");
}

Test(wire_pcap, bounded_by_sv_pcap_max, .timeout = 180)
{
	struct side a, b;
	struct pdir p;
	struct stat st;
	char args[256];

	need_tshark();
	pdir_make(&p, "max");
	cr_assert_eq(setenv("SV_PCAP_MAX", "4000", 1), 0);
	side_open(&a, "127.0.0.1", 0, 0x000100, ALL_ACCESS);
	side_open(&b, "127.0.0.1", 0, 0x000200, ALL_ACCESS);
	unsetenv("SV_PCAP_MAX");
	side_to_rts(&a, &b, ALL_ACCESS);
	side_to_rts(&b, &a, ALL_ACCESS);
	run_rc_session(&a, &b);	/* some 100 KB of datagrams each way */
	side_close(&a);
	side_close(&b);

	for (int i = 0; i < 2; i++) {
		const char *path = i ? p.path1 : p.path;

		cr_assert_eq(stat(path, &st), 0);
		cr_assert_leq(st.st_size, 4000, "%s: %lld bytes", path, (long long)st.st_size);
		cr_assert_gt(st.st_size, 3000, "%s: filled to near the bound, %lld bytes", path,
			     (long long)st.st_size);
		/* whole records only: tshark reads it to the end without complaint */
		snprintf(args, sizeof(args), "-r %s -T fields -e frame.number", path);
		cr_assert_gt(lines_of(args), 3, "%s: frames before the bound", path);
	}
	pdir_done(&p);
}

/* ---------------------------------------------------------------------------------------
 * TCP
 */

static void post(struct tcp_end *e, enum sv_wr_opcode op, uint32_t off, uint32_t len,
		 const struct tcp_end *peer, uint32_t roff)
{
	struct sv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len,
			      .lkey = e->mr->lkey };
	struct sv_send_wr wr = { .wr_id = op, .opcode = op, .sg_list = &sge, .num_sge = 1,
				 .send_flags = SV_SEND_SIGNALED }, *bad;

	if (op == SV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	cr_assert_eq(sv_post_send(e->qp, &wr, &bad), 0);
}

static void wait_ok(struct tcp_end *e, int n)
{
	uint64_t deadline = cap_now_ms() + WAIT_MS;
	struct sv_wc wc;

	while (n > 0) {
		int rc = sv_poll_cq(e->cq, 1, &wc);

		cr_assert_geq(rc, 0);
		if (rc) {
			cr_assert_eq(wc.status, SV_WC_SUCCESS, "completion %s",
				     sv_wc_status_str(wc.status));
			n--;
		} else {
			cr_assert_lt(cap_now_ms(), deadline, "%d completions missing", n);
			usleep(100);
		}
	}
}

/* A pattern no other bytes of the session look like. */
static void pattern(uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i += 16)
		snprintf((char *)b + i, len - i < 17 ? len - i : 17, "sv-pcap-%07zu", i / 16);
}

/* cli connects to srv on port, writes WRITE_LEN bytes and sends SEND_LEN bytes of the
 * pattern, and disconnects. */
static void tcp_session(const struct sv_device_opts *d, uint16_t port)
{
	struct tcp_end cli, srv;
	struct sv_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct sv_sge rsge;
	struct sv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *bad;
	struct sv_cm_id *lid;

	tcp_end_open_dev(&cli, d, TCP_BUF, 0, ALL_ACCESS, true);
	tcp_end_open_dev(&srv, d, TCP_BUF, 0, ALL_ACCESS, true);
	pattern(cli.buf, TCP_BUF);
	rsge = (struct sv_sge){ .addr = (uintptr_t)srv.buf, .length = SEND_LEN,
				.lkey = srv.mr->lkey };
	cr_assert_eq(sv_post_recv(srv.qp, &rwr, &bad), 0);
	lid = tcp_connect(&cli, &srv, port, &cp);
	/* the Write first: the Send's arrival then says the Write was placed (RFC 5040
	 * section 5.5, ordering) */
	post(&cli, SV_WR_RDMA_WRITE, 4096, WRITE_LEN, &srv, 4096);
	post(&cli, SV_WR_SEND, 0, SEND_LEN, NULL, 0);
	wait_ok(&cli, 2);
	wait_ok(&srv, 1);
	cr_assert_eq(memcmp(srv.buf, cli.buf, SEND_LEN), 0, "the SEND arrived");
	cr_assert_eq(memcmp(srv.buf + 4096, cli.buf + 4096, WRITE_LEN), 0, "the WRITE arrived");
	cr_assert_eq(sv_cm_disconnect(cli.id), 0);
	sv_cm_ack_event(tcp_cm_wait(&cli, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(tcp_cm_wait(&srv, SV_CM_EVENT_DISCONNECTED));
	tcp_end_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	tcp_end_close(&srv);
}

static void tcp_file_decodes(const char *path, uint16_t port)
{
	char flt[64], args[512], *out, pat[17];
	uint8_t buf[32];
	bool seen_send = false, seen_write = false;

	snprintf(flt, sizeof(flt), "tcp.port == %u", port);
	/* the handshake we synthesize: one SYN to the listener, one SYN-ACK from it */
	snprintf(args, sizeof(args), "-r %s -Y '%s && tcp.flags.syn == 1' -T fields "
		 "-e tcp.flags.ack -e tcp.dstport", path, flt);
	out = cap_tshark(args);
	snprintf(pat, sizeof(pat), "0\t%u\n", port);
	cr_assert_eq(cap_count(out, pat), 1, "%s: one SYN to port %u:\n%s", path, port, out);
	cr_assert_eq(cap_count(out, "\n"), 2, "%s: a SYN and a SYN-ACK:\n%s", path, out);
	free(out);

	cap_no_errors(path, "", "%s", flt);
	snprintf(args, sizeof(args), "-2 -r %s -Y '%s && tcp.len > 0 && !iwarp_mpa && "
		 "!tcp.reassembled_in' -T fields -e frame.number -e tcp.len", path, flt);
	out = cap_tshark(args);
	cr_assert_str_empty(out, "%s: TCP payload not decoded as MPA (frame, length):\n%s",
			    path, out);
	free(out);
	snprintf(args, sizeof(args), "-r %s -Y '%s && (iwarp_mpa.key.req || iwarp_mpa.key.rep)'"
		 " -T fields -e iwarp_mpa.rej_flag", path, flt);
	cr_assert_eq(lines_of(args), 2, "%s: one MPA Request and one Reply", path);
	snprintf(args, sizeof(args), "-r %s -Y '%s && iwarp_rdma' -T fields -e iwarp_rdma.opcode",
		 path, flt);
	out = cap_tshark(args);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		/* RDMAP opcodes (RFC 5040 section 4.5): 0 Write, 3 Send; one field per FPDU */
		for (char *tok = line; tok; tok = strchr(tok, ',') ? strchr(tok, ',') + 1 : NULL) {
			unsigned long op = strtoul(tok, NULL, 0);

			seen_write |= op == 0;
			seen_send |= op == 3;
		}
	}
	free(out);
	cr_assert(seen_send && seen_write, "%s: RDMAP Send %d, Write %d", path, seen_send,
		  seen_write);
	pattern(buf, sizeof(buf));
	cr_assert(file_contains(path, buf, 16), "%s: the payload pattern", path);
}

Test(wire_pcap, tcp_session_decodes_as_iwarp, .timeout = 180)
{
	struct sv_device_opts d;
	struct pdir p;
	uint16_t port;

	need_tshark();
	pdir_make(&p, "tcp");
	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	d.crc = 1;
	port = cap_free_port(SOCK_STREAM);
	tcp_session(&d, port);
	tcp_file_decodes(p.path, port);
	tcp_file_decodes(p.path1, port);
	pdir_done(&p);
}

Test(wire_pcap, tls_records_not_plaintext, .timeout = 180)
{
	struct sv_device_opts d;
	struct pdir p;
	char err[256], args[512], flt[64];
	uint8_t buf[32];
	uint16_t port;

	need_tshark();
	pdir_make(&p, "tls");
	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	cr_assert_eq(sv_tls_throwaway(&d, err, sizeof(err)), 0, "%s", err);
	port = cap_free_port(SOCK_STREAM);
	tcp_session(&d, port);
	pattern(buf, sizeof(buf));
	snprintf(flt, sizeof(flt), "tcp.port == %u", port);
	for (int i = 0; i < 2; i++) {
		const char *path = i ? p.path1 : p.path;

		cap_no_errors(path, "", "%s", flt);
		snprintf(args, sizeof(args), "-r %s -Y '%s && tls.handshake.type == 1' -T fields "
			 "-e frame.number", path, flt);
		cr_assert_eq(lines_of(args), 1, "%s: one ClientHello", path);
		snprintf(args, sizeof(args), "-r %s -Y '%s && tls.record.opaque_type == 23' "
			 "-T fields -e frame.number", path, flt);
		cr_assert_gt(lines_of(args), 10, "%s: application data records", path);
		cr_assert(!file_contains(path, buf, 16), "%s: plaintext in a TLS capture", path);
	}
	pdir_done(&p);
}
