/*
 * test_roce_capture.c — wire conformance of the UDP transport, judged by code that did not
 * produce the packets: dumpcap captures a loopback session between two UDP-transport device
 * contexts (path MTU 256, so messages span FIRST/MIDDLE/LAST packets) that uses every RC
 * opcode the verbs API can produce, and then, for every datagram of the session:
 *  - the shared codec (wire/ib_hdr.h) decodes it, P_Key is the default, the destination
 *    QP is the receiver's, and its payload obeys the opcode's PMTU rule;
 *  - the shared ICRC code (crypto/icrc.h) recomputed over the captured IPv4 and UDP
 *    headers (their real identification and DF bit) matches the trailer, and the IPv4
 *    identification is 0 with DF set, which is what lets a sender know its ICRC
 *    (shared/spec/roce.md section 9);
 *  - tshark, told that the two ports carry InfiniBand (RoCEv2), decodes the same opcodes
 *    in the same order with no malformed frame and no expert error.
 * The opcodes seen must cover SEND FIRST/MIDDLE/LAST/ONLY (with immediate too), RDMA WRITE
 * FIRST/MIDDLE/LAST/ONLY (with immediate too), READ request and all four responses, both
 * atomics, ATOMIC_ACKNOWLEDGE and ACKNOWLEDGE.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crypto/icrc.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

#define BUF_LEN 65536
#define PMTU_BYTES 256
#define MAX_PKTS 4096

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool have_program(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/* A UDP port free right now on 127.0.0.1 (bind port 0 and read it back). */
static uint16_t free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t l = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	uint16_t port;

	cr_assert(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* ---------------------------------------------------------------------------------------
 * Two UDP-transport endpoints on loopback, connected out of band.
 */

struct side {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	struct sv_mr *mr;
	uint8_t *buf;
	uint8_t gid[16];
	uint16_t port;
	uint32_t psn;
};

static void side_open(struct side *s, uint32_t psn)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	int rc = -1;

	memset(s, 0, sizeof(*s));
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_UDP;
	strcpy(o.bind_addr, "127.0.0.1");
	for (int i = 0; i < 5 && rc < 0; i++) {
		o.port = free_port();
		rc = sv_open_device(&o, &s->ctx);
	}
	cr_assert_eq(rc, 0, "open: %s", sv_strerror(rc));
	s->port = o.port;
	s->psn = psn;
	cr_assert_eq(sv_query_gid(s->ctx, 1, 0, s->gid), 0);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, 64, NULL, NULL, 0, &s->cq), 0);
	ia.send_cq = ia.recv_cq = s->cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
	s->buf = aligned_alloc(4096, BUF_LEN);
	cr_assert_not_null(s->buf);
	for (size_t i = 0; i < BUF_LEN; i++)
		s->buf[i] = (uint8_t)(i * 31 + psn);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, BUF_LEN, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
			       SV_ACCESS_REMOTE_ATOMIC, &s->mr), 0);
}

static void to_rts(struct side *s, const struct side *peer)
{
	struct sv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	a.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			    SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	a.port_num = 1;
	cr_assert_eq(sv_modify_qp(s->qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTR;
	memcpy(a.ah_attr.dgid, peer->gid, 16);
	a.ah_attr.dport = peer->port;
	a.ah_attr.port_num = 1;
	a.path_mtu = SV_MTU_256;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	cr_assert_eq(sv_modify_qp(s->qp, &a, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC |
				  SV_QP_MIN_RNR_TIMER), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTS;
	a.sq_psn = s->psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	cr_assert_eq(sv_modify_qp(s->qp, &a, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT |
				  SV_QP_RETRY_CNT | SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC), 0);
}

static void side_close(struct side *s)
{
	cr_assert_eq(sv_destroy_qp(s->qp), 0);
	cr_assert_eq(sv_dereg_mr(s->mr), 0);
	cr_assert_eq(sv_destroy_cq(s->cq), 0);
	cr_assert_eq(sv_dealloc_pd(s->pd), 0);
	cr_assert_eq(sv_close_device(s->ctx), 0);
	free(s->buf);
}

static void wait_wcs(struct side *s, unsigned n)
{
	long end = now_ms() + 10000;
	struct sv_wc wc;

	while (n > 0) {
		int r = sv_poll_cq(s->cq, 1, &wc);

		cr_assert_geq(r, 0);
		if (r == 1) {
			cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %lu: %s",
				     (unsigned long)wc.wr_id, sv_wc_status_str(wc.status));
			n--;
			continue;
		}
		cr_assert_lt(now_ms(), end, "%u completions missing", n);
		usleep(100);
	}
}

/* Posts one signaled WR from a to b: len bytes at offset off of both buffers. */
static void post(struct side *a, const struct side *b, enum sv_wr_opcode op, uint32_t off,
		 uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)a->buf + off, len, a->mr->lkey };
	struct sv_send_wr wr = { 0 }, *bad;

	wr.wr_id = off;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.imm_data = htonl(0x1000 + off);
	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)b->buf + off;
		wr.wr.atomic.rkey = b->mr->rkey;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.swap = 7;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)b->buf + off;
		wr.wr.rdma.rkey = b->mr->rkey;
	}
	cr_assert_eq(sv_post_send(a->qp, &wr, &bad), 0);
}

/* The session: every message kind, single- and multi-packet at PMTU 256. */
static void run_session(struct side *a, struct side *b)
{
	static const struct {
		enum sv_wr_opcode op;
		uint32_t len;
		bool recv;		/* consumes a receive at b */
	} ops[] = {
		{ SV_WR_SEND, 1000, true },			/* FIRST, MIDDLE, LAST */
		{ SV_WR_SEND, 10, true },			/* ONLY */
		{ SV_WR_SEND_WITH_IMM, 10, true },		/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_SEND_WITH_IMM, 600, true },		/* LAST_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE, 1000, false },		/* FIRST, MIDDLE, LAST */
		{ SV_WR_RDMA_WRITE, 100, false },		/* ONLY */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 100, true },	/* ONLY_WITH_IMMEDIATE */
		{ SV_WR_RDMA_WRITE_WITH_IMM, 600, true },	/* LAST_WITH_IMMEDIATE */
		{ SV_WR_RDMA_READ, 1000, false },		/* responses FIRST .. LAST */
		{ SV_WR_RDMA_READ, 100, false },		/* response ONLY */
		{ SV_WR_ATOMIC_CMP_AND_SWP, 8, false },
		{ SV_WR_ATOMIC_FETCH_AND_ADD, 8, false },
	};
	unsigned nrecv = 0;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if (!ops[i].recv)
			continue;
		struct sv_sge sge = { (uintptr_t)b->buf + 32768 + nrecv * 2048, 2048,
				      b->mr->lkey };
		struct sv_recv_wr wr = { .wr_id = nrecv, .sg_list = &sge, .num_sge = 1 }, *bad;

		cr_assert_eq(sv_post_recv(b->qp, &wr, &bad), 0);
		nrecv++;
	}
	/* One at a time, so that each message's packets are easy to tell apart. */
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		post(a, b, ops[i].op, (uint32_t)i * 2048, ops[i].len);
		wait_wcs(a, 1);
		if (ops[i].recv)
			wait_wcs(b, 1);
	}
}

/* ---------------------------------------------------------------------------------------
 * Capture.
 */

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void read_log(const char *log, char *text, size_t cap)
{
	FILE *f = fopen(log, "r");
	size_t n = f ? fread(text, 1, cap - 1, f) : 0;

	if (f)
		fclose(f);
	text[n] = 0;
}

/* Starts dumpcap on lo for the two ports (classic pcap, -P) and returns once a sentinel
 * datagram to a third port we hold has reached the file. */
static pid_t start_capture(const char *path, const char *log, uint16_t pa, uint16_t pb)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t salen = sizeof(sa);
	long deadline = now_ms() + 15000;
	char filter[128], text[4096];
	off_t base = -1;
	int ufd;
	pid_t pid;

	ufd = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(ufd >= 0 && bind(ufd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockname(ufd, (struct sockaddr *)&sa, &salen) == 0);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u or udp port %u", pa, pb,
		 ntohs(sa.sin_port));
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("dumpcap", "dumpcap", "-q", "-P", "-i", "lo", "-f", filter, "-a",
		       "duration:120", "-w", path, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			read_log(log, text, sizeof(text));
			cr_assert_fail("dumpcap exited (status 0x%x): %s -- capturing on lo needs "
				       "root or dumpcap's capabilities", status, text);
		}
		cr_assert_lt(now_ms(), deadline, "dumpcap did not capture within 15 s");
		if (base < 0) {
			read_log(log, text, sizeof(text));
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
	long deadline = now_ms() + 10000;
	int status = 0;

	usleep(300 * 1000);	/* let the last datagrams reach the ring */
	cr_assert_eq(waitpid(pid, &status, WNOHANG), 0,
		     "dumpcap stopped before the session ended (status 0x%x)", status);
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

/* ---------------------------------------------------------------------------------------
 * Our own reading of the capture.
 */

struct seen {
	unsigned n;			/* session datagrams */
	uint8_t opcode[MAX_PKTS];	/* in capture order */
	unsigned count[256];
};

/* Checks one IPv4 datagram (ip[0..len)) of the session; a and b give ports and QPNs. */
static void check_datagram(const uint8_t *ip, size_t len, const struct side *a,
			   const struct side *b, struct seen *s)
{
	struct sockaddr_in src = { .sin_family = AF_INET }, dst = { .sin_family = AF_INET };
	const struct sv_ib_opinfo *oi;
	struct sv_icrc_ipv4 v4;
	struct sv_ib_pkt pkt;
	const uint8_t *udp, *ib;
	size_t ihl, ib_len;
	uint16_t sport, dport;
	const struct side *to;
	int rc;

	cr_assert_geq(len, 20);
	cr_assert_eq(ip[0] >> 4, 4);
	cr_assert_eq(ip[9], 17);
	ihl = (size_t)(ip[0] & 0xf) * 4;
	cr_assert_geq(len, ihl + 8);
	udp = ip + ihl;
	sport = sv__get_be16(udp);
	dport = sv__get_be16(udp + 2);
	if (!((sport == a->port && dport == b->port) || (sport == b->port && dport == a->port)))
		return;				/* the sentinel */
	to = dport == a->port ? a : b;
	cr_assert_eq(sv__get_be16(ip + 2), len, "IPv4 total length");
	cr_assert_eq(sv__get_be16(udp + 4), len - ihl, "UDP length");
	ib = udp + 8;
	ib_len = len - ihl - 8;

	cr_assert_lt(s->n, MAX_PKTS);
	rc = sv__ib_pkt_decode(&pkt, ib, ib_len);
	cr_assert_geq(rc, 0, "datagram %u (%zu bytes, opcode 0x%02x): decode %d", s->n, ib_len,
		      ib_len ? ib[0] : 0, rc);
	oi = sv__ib_opinfo(pkt.bth.opcode);
	cr_assert_eq(pkt.bth.pkey, SV_PKEY_DEFAULT, "datagram %u", s->n);
	cr_assert_eq(pkt.bth.dest_qp, to->qp->qp_num, "datagram %u (%s)", s->n, oi->name);
	cr_assert_eq(sv__ib_payload_check(oi, pkt.payload_len, PMTU_BYTES), 0,
		     "datagram %u: %s with %zu payload bytes at PMTU %u", s->n, oi->name,
		     pkt.payload_len, PMTU_BYTES);
	for (unsigned i = 0; i < pkt.bth.pad; i++)
		cr_assert_eq(pkt.payload[pkt.payload_len + i], 0, "pad byte not zero");

	/* The ICRC over the headers as they really were on the wire... */
	memcpy(&src.sin_addr, ip + 12, 4);
	memcpy(&dst.sin_addr, ip + 16, 4);
	src.sin_port = htons(sport);
	dst.sin_port = htons(dport);
	v4.id = sv__get_be16(ip + 4);
	v4.df = ip[6] & 0x40;
	cr_assert_eq(sv__icrc_verify((struct sockaddr *)&src, (struct sockaddr *)&dst, &v4, ib,
				     ib_len), 0, "datagram %u (%s): ICRC mismatch", s->n,
		     oi->name);
	/* ...and those are the values a sender can know in advance. */
	cr_assert_eq(v4.id, 0, "datagram %u: IPv4 identification %u", s->n, v4.id);
	cr_assert(v4.df, "datagram %u: DF not set", s->n);

	s->opcode[s->n++] = pkt.bth.opcode;
	s->count[pkt.bth.opcode]++;
}

/* Classic pcap (either timestamp precision), link type Ethernet: what dumpcap -P writes
 * for lo. */
static void read_capture(const char *path, const struct side *a, const struct side *b,
			 struct seen *s)
{
	FILE *f = fopen(path, "rb");
	uint8_t gh[24], rh[16];
	static uint8_t rec[70000];
	uint32_t magic;

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fread(gh, 1, sizeof(gh), f), sizeof(gh));
	magic = sv__get_le32(gh);
	cr_assert(magic == 0xa1b2c3d4 || magic == 0xa1b23c4d, "pcap magic 0x%08x", magic);
	cr_assert_eq(sv__get_le32(gh + 20), 1, "link type %u, want Ethernet",
		     sv__get_le32(gh + 20));
	while (fread(rh, 1, sizeof(rh), f) == sizeof(rh)) {
		uint32_t caplen = sv__get_le32(rh + 8), wirelen = sv__get_le32(rh + 12);

		cr_assert_leq(caplen, sizeof(rec));
		cr_assert_eq(caplen, wirelen, "truncated capture record");
		cr_assert_eq(fread(rec, 1, caplen, f), caplen);
		cr_assert_geq(caplen, 14);
		if (sv__get_be16(rec + 12) != 0x0800)
			continue;
		check_datagram(rec + 14, caplen - 14, a, b, s);
	}
	fclose(f);
}

/* ---------------------------------------------------------------------------------------
 * tshark's reading.
 */

static char *run_tshark(const char *args)
{
	char cmd[1024];
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	FILE *f;
	int status;

	/* The heuristic payload dissectors would read our test patterns as their protocols. */
	snprintf(cmd, sizeof(cmd),
		 "timeout 120 tshark -n --disable-protocol rpcordma --disable-protocol smb_direct "
		 "--disable-protocol smc --disable-protocol nvme-rdma --disable-protocol lnet "
		 "--disable-protocol iser --disable-protocol infiniband_sdp "
		 "--disable-protocol fcoib --disable-protocol eoib %s 2>/dev/null", args);
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
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tshark failed (%d): %s",
		  status, cmd);
	return out;
}

Test(wire_roce, capture_decodes_and_icrc_checks, .timeout = 180)
{
	static const uint8_t need[] = {
		0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
		0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14,
	};
	char dir[] = "/tmp/sv-roce-cap-XXXXXX";
	char path[128], log[128], args[512];
	struct side a, b;
	static struct seen s;
	unsigned k = 0;
	char *out, *line, *save = NULL;
	pid_t cap;

	if (!have_program("tshark") || !have_program("dumpcap"))
		cr_skip_test("tshark/dumpcap not installed (apt-get install tshark)");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0755);	/* dumpcap may drop privileges to write the file */
	snprintf(path, sizeof(path), "%s/session.pcap", dir);
	snprintf(log, sizeof(log), "%s/dumpcap.log", dir);

	side_open(&a, 0xfffff0);	/* PSNs wrap during the session */
	side_open(&b, 0x000100);
	to_rts(&a, &b);
	to_rts(&b, &a);
	cap = start_capture(path, log, a.port, b.port);
	run_session(&a, &b);
	stop_capture(cap);

	read_capture(path, &a, &b, &s);
	cr_assert_gt(s.n, 20, "only %u session datagrams captured", s.n);
	for (size_t i = 0; i < sizeof(need); i++)
		cr_assert_gt(s.count[need[i]], 0, "%s never seen in the capture",
			     sv__ib_opinfo(need[i])->name);

	/* tshark: no malformed frame, no expert error among the session's datagrams. */
	snprintf(args, sizeof(args),
		 "-r %s -d udp.port==%u,infiniband -d udp.port==%u,infiniband "
		 "-Y '(udp.port == %u || udp.port == %u) && "
		 "(_ws.malformed || _ws.expert.severity >= \"Error\")' "
		 "-T fields -e frame.number -e _ws.expert.message",
		 path, a.port, b.port, a.port, b.port);
	out = run_tshark(args);
	cr_assert_str_empty(out, "frames with errors (frame, message):\n%s", out);
	free(out);

	/* tshark: the same opcodes, in the same order. */
	snprintf(args, sizeof(args),
		 "-r %s -d udp.port==%u,infiniband -d udp.port==%u,infiniband "
		 "-Y 'udp.port == %u || udp.port == %u' -T fields -e infiniband.bth.opcode",
		 path, a.port, b.port, a.port, b.port);
	out = run_tshark(args);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), k++) {
		cr_assert_lt(k, s.n, "tshark shows more datagrams than we read");
		cr_assert_eq(strtoul(line, NULL, 0), s.opcode[k],
			     "datagram %u: tshark opcode '%s', ours 0x%02x", k, line, s.opcode[k]);
	}
	cr_assert_eq(k, s.n, "tshark decoded %u datagrams as InfiniBand, we read %u", k, s.n);
	free(out);

	side_close(&a);
	side_close(&b);
	unlink(path);
	unlink(log);
	rmdir(dir);
}
