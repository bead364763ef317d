/*
 * test_tshark_roce.c — wire conformance of the UDP transport as it runs: dumpcap captures
 * the loopback traffic of one session between two UDP devices (the in-band CM handshake
 * on QP1, every RC opcode, UD SEND and SEND_WITH_IMM, the disconnect), and the test
 * requires:
 *  - every datagram of the session decodes as InfiniBand (tshark, told to decode the
 *    session's UDP port as InfiniBand when it is not 4791), with no malformed frame and
 *    no expert info of severity error;
 *  - the opcodes seen cover the RC set we send (SEND first/middle/last/only, with
 *    immediate, WRITE first/middle/last/only with immediate, READ request and responses,
 *    ACK, atomics and their ACK) and UD SEND_ONLY with and without immediate;
 *  - the CM MADs decode as CM with attributes REQ, REP, RTU, DREQ, DREP;
 *  - every datagram's ICRC, recomputed here from the captured IPv4 and UDP headers
 *    (CRC-32 over 8 bytes of ones for the LRH, the IPv4 header with TOS, TTL and checksum
 *    as ones, the UDP header with its checksum as ones, the BTH with byte 4 as ones, the
 *    rest of the packet), equals the four bytes at its end.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <criterion/criterion.h>

#include "softverbs.h"

#define WAIT_MS 8000
#define BUFSZ (1u << 20)
#define QKEY 0x0badcafeu

static uint64_t now_ms(void)
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

/* ---------------------------------------------------------------------------------------
 * The session.
 */

struct end {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp, *ud;
	struct sv_cm_channel *ch;
	struct sv_cm_id *id;
	uint8_t *buf;
	struct sv_mr *mr;
	uint8_t gid[16];
	struct in_addr ip;
};

static struct sv_cm_event *cm_wait(struct end *e, enum sv_cm_event_type type)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(e->ch), .events = POLLIN };
	struct sv_cm_event *ev;

	cr_assert_eq(poll(&p, 1, WAIT_MS), 1, "no CM event %s", sv_cm_event_str(type));
	cr_assert_eq(sv_cm_get_event(e->ch, &ev), 0);
	cr_assert_eq(ev->event, type, "CM event %s, expected %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(type));
	return ev;
}

static void end_open(struct end *e, uint16_t port)
{
	struct sv_device_opts d;
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp_attr qa;

	memset(e, 0, sizeof(*e));
	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_UDP;
	d.bind_addr[0] = '\0';
	d.port = port;
	cr_assert_eq(sv_open_device(&d, &e->ctx), 0);
	cr_assert_eq(sv_query_gid(e->ctx, 1, 0, e->gid), 0);
	memcpy(&e->ip, e->gid + 12, 4);
	cr_assert_eq(sv_alloc_pd(e->ctx, &e->pd), 0);
	cr_assert_eq(sv_create_cq(e->ctx, 256, NULL, NULL, 0, &e->cq), 0);
	ia.send_cq = ia.recv_cq = e->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	ia.qp_type = SV_QPT_RC;
	cr_assert_eq(sv_create_qp(e->pd, &ia, &e->qp), 0);
	/* INIT now, so receives can be posted before the connection exists. */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = SV_QPS_INIT;
	qa.port_num = 1;
	qa.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	cr_assert_eq(sv_modify_qp(e->qp, &qa, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	ia.qp_type = SV_QPT_UD;
	cr_assert_eq(sv_create_qp(e->pd, &ia, &e->ud), 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = SV_QPS_INIT;
	qa.port_num = 1;
	qa.qkey = QKEY;
	cr_assert_eq(sv_modify_qp(e->ud, &qa, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_QKEY), 0);
	qa.qp_state = SV_QPS_RTR;
	cr_assert_eq(sv_modify_qp(e->ud, &qa, SV_QP_STATE), 0);
	qa.qp_state = SV_QPS_RTS;
	qa.sq_psn = 77;
	cr_assert_eq(sv_modify_qp(e->ud, &qa, SV_QP_STATE | SV_QP_SQ_PSN), 0);
	cr_assert_eq(sv_cm_create_channel(&e->ch), 0);
	e->buf = aligned_alloc(4096, BUFSZ);
	cr_assert_not_null(e->buf);
	memset(e->buf, 0, BUFSZ);
	cr_assert_eq(sv_reg_mr(e->pd, e->buf, BUFSZ, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
			       SV_ACCESS_REMOTE_ATOMIC, &e->mr), 0);
}

static void end_close(struct end *e)
{
	if (e->id)
		cr_assert_eq(sv_cm_destroy_id(e->id), 0);
	cr_assert_eq(sv_destroy_qp(e->qp), 0);
	cr_assert_eq(sv_destroy_qp(e->ud), 0);
	cr_assert_eq(sv_cm_destroy_channel(e->ch), 0);
	cr_assert_eq(sv_dereg_mr(e->mr), 0);
	cr_assert_eq(sv_destroy_cq(e->cq), 0);
	cr_assert_eq(sv_dealloc_pd(e->pd), 0);
	cr_assert_eq(sv_close_device(e->ctx), 0);
	free(e->buf);
}

static void post(struct end *e, struct sv_qp *qp, uint64_t id, enum sv_wr_opcode op,
		 uint32_t off, uint32_t len, unsigned flags, struct end *peer, uint64_t roff)
{
	struct sv_sge sge = { (uintptr_t)e->buf + off, len, e->mr->lkey };
	struct sv_send_wr wr, *bad;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.send_flags = SV_SEND_SIGNALED | flags;
	wr.imm_data = htonl(0x1234);
	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.atomic.rkey = peer->mr->rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else if (peer) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	rc = sv_post_send(qp, &wr, &bad);
	cr_assert_eq(rc, 0, "post opcode %d: %s", op, sv_strerror(rc));
}

static void post_recv(struct end *e, struct sv_qp *qp, uint64_t id, uint32_t off)
{
	struct sv_sge sge = { (uintptr_t)e->buf + off, 65536, e->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), 0);
}

static void poll_n(struct end *e, int n)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct sv_wc wc;
	int got = 0;

	while (got < n) {
		int rc = sv_poll_cq(e->cq, 1, &wc);

		cr_assert_geq(rc, 0);
		if (rc) {
			cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s",
				     (unsigned long)wc.wr_id, sv_wc_status_str(wc.status));
			got++;
			continue;
		}
		cr_assert(now_ms() < deadline, "%d of %d completions", got, n);
		usleep(50);
	}
}

static void run_session(uint16_t port)
{
	struct end cli, srv;
	struct sv_cm_event *ev;
	struct sv_conn_param cp = { .private_data = "tshark", .private_data_len = 6,
				    .responder_resources = 4, .initiator_depth = 4 };
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons(18515) };
	struct sv_ah_attr aa = { .port_num = 1, .dport = port };
	struct sv_ah *ah;

	end_open(&srv, port);
	end_open(&cli, port);
	cr_assert_eq(sv_cm_create_id(srv.ch, srv.ctx, NULL, &srv.id), 0);
	addr.sin_addr = srv.ip;
	cr_assert_eq(sv_cm_listen(srv.id, (struct sockaddr *)&addr, 4), 0);
	cr_assert_eq(sv_cm_create_id(cli.ch, cli.ctx, NULL, &cli.id), 0);
	cr_assert_eq(sv_cm_connect(cli.id, cli.qp, (struct sockaddr *)&addr, &cp), 0);
	ev = cm_wait(&srv, SV_CM_EVENT_CONNECT_REQUEST);
	{
		struct sv_cm_id *conn = ev->id;

		sv_cm_ack_event(ev);
		cr_assert_eq(sv_cm_destroy_id(srv.id), 0);	/* the listener goes */
		srv.id = conn;
	}
	for (int i = 0; i < 8; i++)
		post_recv(&srv, srv.qp, 100 + (uint64_t)i, (uint32_t)i * 65536);
	cr_assert_eq(sv_cm_accept(srv.id, srv.qp, &cp), 0);
	sv_cm_ack_event(cm_wait(&cli, SV_CM_EVENT_ESTABLISHED));
	sv_cm_ack_event(cm_wait(&srv, SV_CM_EVENT_ESTABLISHED));

	for (uint32_t i = 0; i < BUFSZ; i++)
		cli.buf[i] = (uint8_t)(i * 7 + 3);
	post(&cli, cli.qp, 1, SV_WR_SEND, 0, 1000, 0, NULL, 0);
	post(&cli, cli.qp, 2, SV_WR_SEND, 0, 5, SV_SEND_SOLICITED, NULL, 0);
	post(&cli, cli.qp, 3, SV_WR_SEND_WITH_IMM, 0, 33, 0, NULL, 0);
	post(&cli, cli.qp, 4, SV_WR_SEND, 0, 20000, 0, NULL, 0);
	post(&cli, cli.qp, 5, SV_WR_SEND_WITH_IMM, 0, 10000, 0, NULL, 0);
	post(&cli, cli.qp, 6, SV_WR_RDMA_WRITE, 0, 3, 0, &srv, 600000);
	post(&cli, cli.qp, 7, SV_WR_RDMA_WRITE, 0, 20000, 0, &srv, 600000);
	post(&cli, cli.qp, 8, SV_WR_RDMA_WRITE_WITH_IMM, 0, 100, 0, &srv, 600000);
	post(&cli, cli.qp, 9, SV_WR_RDMA_WRITE_WITH_IMM, 0, 10000, 0, &srv, 600000);
	post(&cli, cli.qp, 10, SV_WR_RDMA_READ, 800000, 17, 0, &srv, 600000);
	post(&cli, cli.qp, 11, SV_WR_RDMA_READ, 800000, 20000, 0, &srv, 600000);
	post(&cli, cli.qp, 12, SV_WR_ATOMIC_FETCH_AND_ADD, 900000, 8, 0, &srv, 700000);
	post(&cli, cli.qp, 13, SV_WR_ATOMIC_CMP_AND_SWP, 900008, 8, 0, &srv, 700008);
	poll_n(&cli, 13);
	poll_n(&srv, 6);		/* 5 SENDs and the WRITE_WITH_IMMs' receives ... */

	/* UD, both opcodes. */
	memcpy(aa.dgid, srv.gid, 16);
	cr_assert_eq(sv_create_ah(cli.pd, &aa, &ah), 0);
	post_recv(&srv, srv.ud, 200, 0);
	post_recv(&srv, srv.ud, 201, 65536);
	for (int i = 0; i < 2; i++) {
		struct sv_sge sge = { (uintptr_t)cli.buf, 300 + (uint32_t)i, cli.mr->lkey };
		struct sv_send_wr wr = { .wr_id = 300 + (uint64_t)i, .sg_list = &sge,
					 .num_sge = 1, .send_flags = SV_SEND_SIGNALED,
					 .opcode = i ? SV_WR_SEND_WITH_IMM : SV_WR_SEND,
					 .imm_data = htonl(7) }, *bad;

		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = srv.ud->qp_num;
		wr.wr.ud.remote_qkey = QKEY;
		cr_assert_eq(sv_post_send(cli.ud, &wr, &bad), 0);
	}
	poll_n(&cli, 2);
	poll_n(&srv, 3);		/* the last WRITE_WITH_IMM receive and two UD */
	cr_assert_eq(sv_destroy_ah(ah), 0);

	cr_assert_eq(sv_cm_disconnect(cli.id), 0);
	sv_cm_ack_event(cm_wait(&cli, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(cm_wait(&srv, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(cm_wait(&cli, SV_CM_EVENT_TIMEWAIT_EXIT));
	sv_cm_ack_event(cm_wait(&srv, SV_CM_EVENT_TIMEWAIT_EXIT));
	end_close(&cli);
	end_close(&srv);
}

/* ---------------------------------------------------------------------------------------
 * Capture.
 */

static uint16_t free_udp_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void read_text(const char *path, char *text, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(text, 1, cap - 1, f) : 0;

	if (f)
		fclose(f);
	text[n] = 0;
}

/* dumpcap on lo for udp port `port` (classic pcap format), its messages to log. As in
 * test_tshark.c, sentinel datagrams to a port of ours are sent until the file grows, so
 * the capture is running before the session starts. */
static pid_t start_capture(const char *path, const char *log, uint16_t port,
			   uint16_t *sentinel)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	char filter[96], text[1024];
	uint64_t deadline = now_ms() + 15000;
	off_t base = -1;
	int ufd = socket(AF_INET, SOCK_DGRAM, 0);
	pid_t pid;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(ufd >= 0 && bind(ufd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockname(ufd, (struct sockaddr *)&sa, &salen) == 0);
	*sentinel = ntohs(sa.sin_port);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", port, *sentinel);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("dumpcap", "dumpcap", "-q", "-i", "lo", "-P", "-f", filter, "-a",
		       "duration:120", "-w", path, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			read_text(log, text, sizeof(text));
			cr_assert_fail("dumpcap exited (status 0x%x): %s", status, text);
		}
		cr_assert_lt(now_ms(), deadline, "dumpcap did not capture within 15 s");
		if (base < 0) {
			read_text(log, text, sizeof(text));
			if (strstr(text, "Capturing on"))
				base = file_size(path);
		} else if (file_size(path) > base) {
			break;
		} else {
			sendto(ufd, "sentinel", 8, 0, (struct sockaddr *)&sa, sizeof(sa));
		}
		usleep(20 * 1000);
	}
	close(ufd);
	return pid;
}

static void stop_capture(pid_t pid)
{
	uint64_t deadline = now_ms() + 10000;
	int status = 0;

	usleep(300 * 1000);
	cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "dumpcap stopped early");
	kill(pid, SIGINT);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			cr_assert_fail("dumpcap did not stop within 10 s");
		}
		usleep(10000);
	}
}

static char *run_tshark(const char *args)
{
	char cmd[1024];
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	FILE *f;
	int status;

	snprintf(cmd, sizeof(cmd), "timeout 120 tshark --disable-protocol rpcordma "
		 "--disable-protocol smb_direct %s 2>/dev/null", args);
	f = popen(cmd, "r");
	cr_assert_not_null(f, "popen %s", cmd);
	for (;;) {
		size_t n;

		if (len + 4096 > cap)
			out = realloc(out, cap *= 2);
		n = fread(out + len, 1, cap - len - 1, f);
		if (n == 0)
			break;
		len += n;
	}
	out[len] = 0;
	status = pclose(f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tshark failed: %s", cmd);
	return out;
}

/* ---------------------------------------------------------------------------------------
 * ICRC, recomputed from the captured bytes (RoCEv2 annex A17.8.2 masks).
 */

static uint32_t icrc_of(const uint8_t *ip, const uint8_t *udp, size_t udp_len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t iph[20], udph[8], bth[12];
	uLong c;

	memcpy(iph, ip, 20);
	iph[1] = 0xff;			/* TOS */
	iph[8] = 0xff;			/* TTL */
	iph[10] = iph[11] = 0xff;	/* header checksum */
	memcpy(udph, udp, 8);
	udph[6] = udph[7] = 0xff;	/* UDP checksum */
	memcpy(bth, udp + 8, 12);
	bth[4] = 0xff;			/* FECN, BECN, Resv6 */
	c = crc32(0L, ones, 8);
	c = crc32(c, iph, 20);
	c = crc32(c, udph, 8);
	c = crc32(c, bth, 12);
	c = crc32(c, udp + 8 + 12, (uInt)(udp_len - 8 - 12 - 4));
	return (uint32_t)c;
}

/* Walks the pcap (Ethernet link type, as lo has) and checks every datagram of port. */
static unsigned check_icrcs(const char *path, uint16_t port)
{
	FILE *f = fopen(path, "rb");
	uint8_t gh[24], rh[16], pkt[70000];
	unsigned n = 0;

	cr_assert_not_null(f);
	cr_assert_eq(fread(gh, 1, 24, f), 24);
	cr_assert_eq(gh[0] | gh[1] << 8 | gh[2] << 16 | (uint32_t)gh[3] << 24, 0xa1b2c3d4u,
		     "little-endian microsecond pcap");
	cr_assert_eq(gh[20], 1, "Ethernet link type");
	while (fread(rh, 1, 16, f) == 16) {
		uint32_t incl = rh[8] | rh[9] << 8 | rh[10] << 16 | (uint32_t)rh[11] << 24;
		const uint8_t *ip = pkt + 14, *udp;
		size_t ihl, udp_len;
		uint32_t want, got;

		cr_assert_leq(incl, sizeof(pkt));
		cr_assert_eq(fread(pkt, 1, incl, f), incl);
		if (incl < 14 + 20 + 8 || pkt[12] != 0x08 || pkt[13] != 0x00 || ip[9] != 17)
			continue;
		ihl = (size_t)(ip[0] & 0x0f) * 4;
		cr_assert_eq(ihl, 20, "no IP options");
		udp = ip + ihl;
		if (((udp[0] << 8 | udp[1]) != port) && ((udp[2] << 8 | udp[3]) != port))
			continue;
		udp_len = (size_t)(udp[4] << 8 | udp[5]);
		cr_assert_eq(14 + ihl + udp_len, incl, "whole datagram captured");
		cr_assert_geq(udp_len, 8 + 12 + 4);
		want = icrc_of(ip, udp, udp_len);
		got = udp[udp_len - 4] | udp[udp_len - 3] << 8 | udp[udp_len - 2] << 16 |
		      (uint32_t)udp[udp_len - 1] << 24;
		cr_assert_eq(got, want, "datagram %u: ICRC %08x, recomputed %08x", n, got, want);
		n++;
	}
	fclose(f);
	return n;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

Test(wire, tshark_decodes_the_udp_transport, .timeout = 240)
{
	char dir[] = "/tmp/sv-tshark-roce-XXXXXX";
	char path[128], log[128], args[512], decode[64];
	char *out, *line, *save = NULL;
	static const unsigned need_ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
					     0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
					     0x10, 0x11, 0x12, 0x13, 0x14, 0x64, 0x65 };
	static const char *const need_mads[] = { "0x0010", "0x0013", "0x0014", "0x0015",
						 "0x0016" };
	bool seen[256] = { false };
	unsigned frames = 0, icrcs;
	uint16_t port, sentinel;
	pid_t cap;

	if (!have_program("tshark") || !have_program("dumpcap")) {
		cr_skip_test("tshark/dumpcap not installed");
		return;
	}
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.pcap", dir);
	snprintf(log, sizeof(log), "%s/dumpcap.log", dir);
	port = free_udp_port();
	cap = start_capture(path, log, port, &sentinel);
	run_session(port);
	stop_capture(cap);

	icrcs = check_icrcs(path, port);
	cr_assert_gt(icrcs, 40, "only %u datagrams of the session captured", icrcs);
	decode[0] = 0;
	if (port != 4791)
		snprintf(decode, sizeof(decode), "-d udp.port==%u,infiniband", port);

	/* Every datagram of the session is InfiniBand. */
	snprintf(args, sizeof(args), "-r %s %s -Y 'udp.port==%u' -T fields -e frame.number "
		 "-e infiniband.bth.opcode -E separator=';'", path, decode, port);
	out = run_tshark(args);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *op = strchr(line, ';');

		cr_assert(op && op[1], "frame %s does not decode as InfiniBand", line);
		seen[strtoul(op + 1, NULL, 0) & 0xff] = true;
		frames++;
	}
	free(out);
	cr_assert_eq(frames, icrcs, "tshark saw %u frames, the pcap %u", frames, icrcs);
	for (size_t i = 0; i < sizeof(need_ops) / sizeof(need_ops[0]); i++)
		cr_assert(seen[need_ops[i]], "opcode 0x%02x not seen", need_ops[i]);

	/* No malformed frame, no error-level expert info. */
	snprintf(args, sizeof(args), "-r %s %s -Y '_ws.malformed || _ws.expert.severity == "
		 "error' -T fields -e frame.number", path, decode);
	out = run_tshark(args);
	cr_assert_eq(out[0], 0, "malformed or erroneous frames: %s", out);
	free(out);

	/* The CM MADs are CM (management class 7) with the attributes of the handshake. */
	snprintf(args, sizeof(args), "-r %s %s -Y 'infiniband.mad.mgmtclass == 0x07' -T fields "
		 "-e infiniband.mad.attributeid", path, decode);
	out = run_tshark(args);
	for (size_t i = 0; i < sizeof(need_mads) / sizeof(need_mads[0]); i++)
		cr_assert_geq(count(out, need_mads[i]), 1, "CM attribute %s not seen in: %s",
			      need_mads[i], out);
	free(out);
	if (!getenv("SV_KEEP_PCAP")) {
		unlink(path);
		unlink(log);
		rmdir(dir);
	} else {
		cr_log_info("capture kept in %s", path);
	}
}
