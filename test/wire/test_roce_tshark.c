/*
 * test_roce_tshark.c — wire conformance of the UDP transport: Wireshark's InfiniBand
 * dissector must read every datagram softverbs sends as RoCEv2, and every ICRC must be
 * the one a RoCEv2 receiver computes over the IP and UDP headers actually on the wire.
 *
 * dumpcap captures the UDP ports of two device contexts on lo while they run one
 * session with every RC opcode: SEND (first/middle/last, only, with immediate), RDMA
 * WRITE (first/middle/last, only with immediate), READ (request, first/middle/last and
 * only responses), both atomics with their ATOMIC_ACKNOWLEDGE, ACKs, RNR NAKs (a SEND
 * before the receive is posted) and a NAK remote access error (a WRITE with a bad
 * R_Key). tshark decodes the capture (decode-as infiniband on both ports) and the test
 * requires: no malformed frame, no expert error, every expected opcode seen, and for
 * every datagram the ICRC recomputed here from tshark's view of the IPv4 header (length,
 * identification, flags) and UDP ports equal to the trailer.
 *
 * Skipped only when tshark/dumpcap are missing. Capturing on lo needs root or
 * dumpcap's capabilities.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
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

#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/roce_pkt.h"

#define BUF (1u << 20)

struct end {
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_cq *cq;
	struct sv_qp *qp;
	uint8_t *buf;
	struct sv_mr *mr;
	uint8_t gid[16];
	uint16_t port;
};

static struct end a, b;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int bound_udp(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t l = sizeof(sa);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		  getsockname(fd, (struct sockaddr *)&sa, &l) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void end_open(struct end *e)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	int fd, rc;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_UDP;
	strcpy(o.bind_addr, "127.0.0.1");
	fd = bound_udp(&o.port);
	close(fd);
	rc = sv_open_device(&o, &e->ctx);
	cr_assert_eq(rc, 0, "%s", sv_strerror(rc));
	e->port = o.port;
	cr_assert_eq(sv_query_gid(e->ctx, 1, 0, e->gid), 0);
	cr_assert_eq(sv_alloc_pd(e->ctx, &e->pd), 0);
	cr_assert_eq(sv_create_cq(e->ctx, 64, NULL, NULL, 0, &e->cq), 0);
	ia.send_cq = ia.recv_cq = e->cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(e->pd, &ia, &e->qp), 0);
	e->buf = calloc(1, BUF);
	cr_assert_eq(sv_reg_mr(e->pd, e->buf, BUF, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			       SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC, &e->mr), 0);
}

static void to_rts(struct end *e, const struct end *p)
{
	struct sv_qp_attr x;

	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_INIT;
	x.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			    SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC;
	x.port_num = 1;
	cr_assert_eq(sv_modify_qp(e->qp, &x, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTR;
	memcpy(x.ah_attr.dgid, p->gid, 16);
	x.ah_attr.dport = p->port;
	x.path_mtu = SV_MTU_4096;
	x.dest_qp_num = p->qp->qp_num;
	x.rq_psn = 100;
	x.max_dest_rd_atomic = 4;
	x.min_rnr_timer = 1;
	cr_assert_eq(sv_modify_qp(e->qp, &x, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU |
				  SV_QP_DEST_QPN | SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC |
				  SV_QP_MIN_RNR_TIMER), 0);
	memset(&x, 0, sizeof(x));
	x.qp_state = SV_QPS_RTS;
	x.sq_psn = 100;
	x.timeout = 14;
	x.retry_cnt = 7;
	x.rnr_retry = 7;
	x.max_rd_atomic = 4;
	cr_assert_eq(sv_modify_qp(e->qp, &x, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT |
				  SV_QP_RETRY_CNT | SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC), 0);
}

static void wait_wc(struct end *e, enum sv_wc_status st)
{
	uint64_t end = now_ms() + 10000;
	struct sv_wc wc;

	for (;;) {
		int n = sv_poll_cq(e->cq, 1, &wc);

		if (n == 1)
			break;
		cr_assert_lt(now_ms(), end, "no completion");
		usleep(100);
	}
	cr_assert_eq(wc.status, st, "%s", sv_wc_status_str(wc.status));
}

static void post(enum sv_wr_opcode op, uint32_t len, uint32_t rkey)
{
	struct sv_sge sge = { (uintptr_t)a.buf, len, a.mr->lkey };
	struct sv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = SV_SEND_SIGNALED, .imm_data = htonl(7) }, *bad;

	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)b.buf + 4096;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 8192;
		wr.wr.rdma.rkey = rkey;
	}
	cr_assert_eq(sv_post_send(a.qp, &wr, &bad), 0);
}

static void post_recv(void)
{
	struct sv_sge sge = { (uintptr_t)b.buf + 65536, 65536, b.mr->lkey };
	struct sv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(b.qp, &wr, &bad), 0);
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* dumpcap on lo for our two ports plus a sentinel port; returns once packets provably
 * reach the file (sentinels sent until it grows). */
static pid_t start_capture(const char *path, const char *log)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint64_t deadline = now_ms() + 15000;
	char filter[128];
	off_t base;
	uint16_t sport;
	int ufd = bound_udp(&sport);
	pid_t pid;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(sport);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u or udp port %u", a.port,
		 b.port, sport);
	base = file_size(path);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("dumpcap", "dumpcap", "-q", "-i", "lo", "-f", filter, "-a", "duration:120",
		       "-w", path, (char *)NULL);
		_exit(127);
	}
	for (;;) {
		int status;

		cr_assert_neq(waitpid(pid, &status, WNOHANG), pid,
			      "dumpcap exited (0x%x): capturing on lo needs root or dumpcap's "
			      "capabilities; see %s", status, log);
		cr_assert_lt(now_ms(), deadline, "dumpcap did not capture within 15 s");
		if (file_size(path) > (base < 0 ? 0 : base) + 200)
			break;
		sendto(ufd, "sentinel", 8, 0, (struct sockaddr *)&sa, sizeof(sa));
		usleep(20 * 1000);
	}
	close(ufd);
	return pid;
}

static void stop_capture(pid_t pid)
{
	int status;

	usleep(300 * 1000);
	kill(pid, SIGINT);
	for (int i = 0; waitpid(pid, &status, WNOHANG) == 0; i++) {
		if (i > 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			cr_assert_fail("dumpcap did not stop");
		}
		usleep(10000);
	}
}

static int hexval(char c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

Test(wire, roce_tshark_decodes_every_datagram, .timeout = 240)
{
	char dir[] = "/tmp/sv-roce-tshark-XXXXXX", path[96], log[96], cmd[512], line[20000];
	bool seen[0x20] = { false };
	static const uint8_t want[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
					0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
					0x14 };
	unsigned frames = 0, rnr = 0, nak_acc = 0;
	FILE *f;
	pid_t pid;

	if (system("command -v tshark >/dev/null && command -v dumpcap >/dev/null") != 0)
		cr_skip_test("tshark/dumpcap not installed (apt-get install tshark)");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0777);
	snprintf(path, sizeof(path), "%s/roce.pcapng", dir);
	snprintf(log, sizeof(log), "%s/dumpcap.log", dir);
	end_open(&a);
	end_open(&b);
	to_rts(&a, &b);
	to_rts(&b, &a);
	pid = start_capture(path, log);

	post(SV_WR_SEND, 10000, 0);		/* no receive yet: RNR NAKs */
	usleep(20000);
	post_recv();
	wait_wc(&a, SV_WC_SUCCESS);
	wait_wc(&b, SV_WC_SUCCESS);
	post_recv();
	post(SV_WR_SEND_WITH_IMM, 10000, 0);
	wait_wc(&a, SV_WC_SUCCESS);
	wait_wc(&b, SV_WC_SUCCESS);
	post_recv();
	post(SV_WR_SEND, 100, 0);
	wait_wc(&a, SV_WC_SUCCESS);
	wait_wc(&b, SV_WC_SUCCESS);
	post_recv();
	post(SV_WR_SEND_WITH_IMM, 0, 0);
	wait_wc(&a, SV_WC_SUCCESS);
	wait_wc(&b, SV_WC_SUCCESS);
	post(SV_WR_RDMA_WRITE, 10000, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	post_recv();
	post(SV_WR_RDMA_WRITE_WITH_IMM, 100, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	wait_wc(&b, SV_WC_SUCCESS);
	post(SV_WR_RDMA_READ, 10000, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	post(SV_WR_RDMA_READ, 8, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	post(SV_WR_ATOMIC_CMP_AND_SWP, 8, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	post(SV_WR_ATOMIC_FETCH_AND_ADD, 8, b.mr->rkey);
	wait_wc(&a, SV_WC_SUCCESS);
	post(SV_WR_RDMA_WRITE, 64, b.mr->rkey ^ 0x77);	/* NAK remote access error */
	wait_wc(&a, SV_WC_REM_ACCESS_ERR);
	stop_capture(pid);

	snprintf(cmd, sizeof(cmd),
		 "timeout 120 tshark -r %s -d udp.port==%u,infiniband -d udp.port==%u,infiniband "
		 "-Y 'udp.port==%u && udp.port==%u' -T fields -E separator=/t -e ip.len "
		 "-e ip.id -e ip.flags -e ip.src -e ip.dst -e udp.srcport -e udp.dstport "
		 "-e infiniband.bth.opcode -e infiniband.aeth.syndrome -e _ws.malformed "
		 "-e _ws.expert.severity -e udp.payload 2>/dev/null", path, a.port, b.port, a.port,
		 b.port);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *fld[12] = { 0 }, *p = line, *hex;
		uint8_t ip[20] = { 0 }, udp[8] = { 0 }, pay[8192];
		struct iovec v;
		size_t n = 0;
		unsigned long op;
		int i;

		line[strcspn(line, "\n")] = 0;
		for (i = 0; i < 12; i++) {
			fld[i] = p;
			p = strchr(p, '\t');
			if (!p)
				break;
			*p++ = 0;
		}
		cr_assert_eq(i, 11, "unexpected tshark line: %s", line);
		cr_assert_str_empty(fld[9], "malformed frame %u", frames + 1);
		/* PI_ERROR is 0x00800000; notes/warnings (e.g. about our payloads) pass. */
		cr_assert(strstr(fld[10], "8388608") == NULL, "expert error in frame %u", frames + 1);
		op = strtoul(fld[7], NULL, 0);
		cr_assert_lt(op, 0x20, "frame %u: opcode '%s' not decoded", frames + 1, fld[7]);
		seen[op] = true;
		if (op == 0x11 && (strtoul(fld[8], NULL, 0) & 0xe0) == 0x20)
			rnr++;
		if (op == 0x11 && strtoul(fld[8], NULL, 0) == 0x62)
			nak_acc++;
		/* The IPv4 header as on the wire (tshark's view), then our ICRC routine. */
		ip[0] = 0x45;
		sv__put_be16(ip + 2, (uint16_t)strtoul(fld[0], NULL, 0));
		sv__put_be16(ip + 4, (uint16_t)strtoul(fld[1], NULL, 0));
		ip[6] = (uint8_t)(strtoul(fld[2], NULL, 0) << 5);
		ip[9] = IPPROTO_UDP;
		inet_pton(AF_INET, fld[3], ip + 12);
		inet_pton(AF_INET, fld[4], ip + 16);
		sv__put_be16(udp, (uint16_t)strtoul(fld[5], NULL, 0));
		sv__put_be16(udp + 2, (uint16_t)strtoul(fld[6], NULL, 0));
		for (hex = fld[11]; hex[0] && hex[1] && n < sizeof(pay); hex += 2)
			pay[n++] = (uint8_t)(hexval(hex[0]) << 4 | hexval(hex[1]));
		cr_assert_geq(n, SV__BTH_LEN + SV__ICRC_LEN);
		sv__put_be16(udp + 4, (uint16_t)(8 + n));
		v.iov_base = pay;
		v.iov_len = n - SV__ICRC_LEN;
		cr_assert_eq(sv__roce_icrc_ip4(ip, udp, &v, 1), sv__get_le32(pay + n - 4),
			     "frame %u (opcode 0x%02lx, IP id %s flags %s): bad ICRC", frames + 1,
			     op, fld[1], fld[2]);
		frames++;
	}
	cr_assert_eq(pclose(f), 0, "tshark failed");
	cr_assert_gt(frames, 20, "only %u frames captured", frames);
	for (size_t i = 0; i < sizeof(want); i++)
		cr_assert(seen[want[i]], "opcode 0x%02x never seen on the wire", want[i]);
	cr_assert_gt(rnr, 0, "no RNR NAK seen");
	cr_assert_eq(nak_acc, 1, "one NAK remote access error expected, saw %u", nak_acc);

	unlink(path);
	unlink(log);
	rmdir(dir);
}
