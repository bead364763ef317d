/*
 * fuzz_ib_cm_sm.c — libFuzzer target for the IB CM state machine of the UDP transport
 * (wire/roce_cm.c, IBA 12.6 and 12.9) on a live device, the fuzzer being a remote CM
 * that sends MADs to our QP1 over 127.0.0.1.
 *
 * One UDP device with a listener, a CM channel and the fuzzer's UDP socket per process;
 * the socket sits at a port the device answers CMs at on loopback (its own port plus 1
 * to 31, roce_cm.c peer_cm()). Byte 0 of an input: bit 0, the application accepts a
 * CONNECT_REQUEST (else rejects it); bit 1, it disconnects once ESTABLISHED. Then
 * records [arg][len: 2 bytes LE][len bytes], each one CM MAD (zero-padded to 256 bytes)
 * that the harness wraps in a UD SEND_ONLY to QP1 (BTH, DETH with the GSI Q_Key, the
 * ICRC) and sends. arg bit 0 puts our listener's service ID into a REQ, bit 1 our
 * Local Comm ID (from the last MAD we sent) into the Remote Comm ID of a REP-class
 * message, bit 2 spoils the ICRC. After each MAD the loop thread, which runs the CM,
 * is waited for until the device's socket is empty, and the CM events are answered.
 *
 * Invariants: every datagram we send is a UD SEND_ONLY to QP1 with a good ICRC and a
 * MAD that decodes; CM events come in a legal order (CONNECT_REQUEST, then at most one of
 * ESTABLISHED or an error, DISCONNECTED once, after ESTABLISHED or instead of it for an
 * accepted request the peer disconnects before its RTU); the work per MAD ends (bounded
 * wait); memory is checked by ASan and LSan.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "live_util.h"
#include "softverbs.h"
#include "wire/ib_cm.h"
#include "wire/roce.h"

#define HANG_NS 10000000000ull	/* generous: the loop thread may wait for a core */

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_cm_channel *ch;
static struct sv_cm_id *listener;
static struct sv__rctx *rc;
static int peer = -1;
static struct sockaddr_in dev_addr, peer_addr;
static uint64_t service_id;

static struct {
	bool accept, disconnect;
	struct sv_cm_id *id;
	struct sv_qp *qp;
	bool outcome, established, disconnected;
	uint32_t our_comm_id;
	uint32_t psn;
} C;

static void init_once(void)
{
	struct sv_device_opts o;
	struct sockaddr_storage b;
	struct sockaddr_in l = { .sin_family = AF_INET };
	int rcode = -1;

	for (int tries = 0; tries < 20 && rcode != 0; tries++) {
		int s = socket(AF_INET, SOCK_DGRAM, 0);
		socklen_t al = sizeof(dev_addr);

		dev_addr.sin_family = AF_INET;
		dev_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		dev_addr.sin_port = 0;
		if (s < 0 || bind(s, (struct sockaddr *)&dev_addr, sizeof(dev_addr)) != 0 ||
		    getsockname(s, (struct sockaddr *)&dev_addr, &al) != 0)
			lv_fail("free port: %s", strerror(errno));
		close(s);
		sv_device_opts_init(&o);
		o.transport = SV_TRANSPORT_UDP;
		snprintf(o.bind_addr, sizeof(o.bind_addr), "127.0.0.1");
		o.port = ntohs(dev_addr.sin_port);
		rcode = sv_open_device(&o, &ctx);
	}
	if (rcode != 0 || sv_alloc_pd(ctx, &pd) || sv_create_cq(ctx, 64, NULL, NULL, 0, &cq) ||
	    sv_cm_create_channel(&ch))
		lv_fail("device setup");
	rc = sv__ctx_tctx(ctx);
	fcntl(sv_cm_channel_fd(ch), F_SETFL, fcntl(sv_cm_channel_fd(ch), F_GETFL) | O_NONBLOCK);
	l.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (sv_cm_create_id(ch, ctx, NULL, &listener) ||
	    sv_cm_listen(listener, (struct sockaddr *)&l, 64) || sv_cm_local_addr(listener, &b))
		lv_fail("listen");
	service_id = SV_CM_SID_PS_TCP | ntohs(((struct sockaddr_in *)&b)->sin_port);
	peer = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	peer_addr = dev_addr;
	for (int i = 1; i < SV__ROCE_FALLBACK_ADDRS; i++) {
		peer_addr.sin_port = htons((uint16_t)(ntohs(dev_addr.sin_port) + i));
		if (bind(peer, (struct sockaddr *)&peer_addr, sizeof(peer_addr)) == 0)
			return;
	}
	lv_fail("no port for the fuzzer's CM next to the device's");
}

static struct sv_qp *new_qp(void)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp *qp;

	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	if (sv_create_qp(pd, &ia, &qp))
		lv_fail("create_qp");
	return qp;
}

/* ---------------------------------------------------------------------------------------
 * What we send, the events, waiting.
 */

static void drain_out(void)
{
	uint8_t buf[SV__ROCE_RX_BUF];
	ssize_t n;

	while ((n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct sv_icrc_ipv4 v4;
		struct sv_ib_pkt k;
		struct sv_cm_msg m;

		/* As a receiver checks it: the IPv4 identification and DF, which a socket
		 * does not show (UDP GSO numbers the segments), recovered from the ICRC. */
		if (sv__icrc_verify_rx((struct sockaddr *)&dev_addr,
				       (struct sockaddr *)&peer_addr, buf, (size_t)n, &v4) < 0)
			lv_fail("we sent a MAD datagram with a wrong ICRC");
		if (sv__ib_pkt_decode(&k, buf, (size_t)n) < 0 ||
		    k.bth.opcode != SV__ROCE_OP_UD_SEND_ONLY || k.bth.dest_qp != SV_GSI_QPN ||
		    k.deth.qkey != SV_QP1_QKEY || k.payload_len != SV_MAD_LEN ||
		    sv__cm_decode(&m, k.payload, k.payload_len) != SV_MAD_LEN)
			lv_fail("we sent a datagram that is not a CM MAD to QP1");
		C.our_comm_id = sv__get_be32(k.payload + SV_MAD_HDR_LEN);
	}
}

/* Returns an id to destroy once its event is acknowledged, or NULL. */
static struct sv_cm_id *on_event(const struct sv_cm_event *e)
{
	if (e->event == SV_CM_EVENT_CONNECT_REQUEST) {
		if (e->listen_id != listener)
			lv_fail("CONNECT_REQUEST for another listener");
		if (C.id) {
			/* A second request of the input: refused, the first one stays ours. */
			sv_cm_reject(e->id, NULL, 0);
			return e->id;
		}
		C.id = e->id;
		if (C.accept) {
			struct sv_conn_param p = { .responder_resources = 4,
						   .initiator_depth = 4 };

			C.qp = new_qp();
			C.outcome = sv_cm_accept(C.id, C.qp, &p) != 0;
		} else {
			sv_cm_reject(C.id, "no", 2);
			C.outcome = true;
		}
		return NULL;
	}
	if (!C.id || e->id != C.id)
		lv_fail("event %d for an id we do not know", e->event);
	switch (e->event) {
	case SV_CM_EVENT_ESTABLISHED:
		if (C.outcome)
			lv_fail("ESTABLISHED after an outcome");
		C.outcome = C.established = true;
		if (C.disconnect)
			sv_cm_disconnect(C.id);
		break;
	case SV_CM_EVENT_REJECTED:
	case SV_CM_EVENT_UNREACHABLE:
	case SV_CM_EVENT_CONNECT_ERROR:
		if (C.outcome)
			lv_fail("event %d after the outcome", e->event);
		C.outcome = true;
		break;
	case SV_CM_EVENT_DISCONNECTED:
		/* A DREQ after our REP and before the RTU ends an accepted connection that
		 * never reported ESTABLISHED: rdma_cm's CONNECT state covers both. */
		if (C.disconnected || !(C.established || (C.qp && !C.outcome)))
			lv_fail("DISCONNECTED without a connection");
		C.disconnected = C.outcome = true;
		break;
	case SV_CM_EVENT_TIMEWAIT_EXIT:
		if (!C.disconnected)
			lv_fail("TIMEWAIT_EXIT before DISCONNECTED");
		break;
	default:
		lv_fail("event %d", e->event);
	}
	return NULL;
}

/* The loop thread has taken every datagram sent to the device (it runs the CM under
 * rx_lock, so once the socket is empty with the lock ours, the MADs were handled). */
static void settle(void)
{
	uint64_t start = sv__now_ns();

	for (;;) {
		struct sv_cm_event *e;
		int unread = 0;

		if (sv__now_ns() - start > HANG_NS)
			lv_fail("MADs stay unread for %llu s", (unsigned long long)(HANG_NS / 1000000000));
		pthread_mutex_lock(&rc->rx_lock);
		if (ioctl(rc->fd, FIONREAD, &unread) != 0)
			lv_fail("FIONREAD: %s", strerror(errno));
		pthread_mutex_unlock(&rc->rx_lock);
		while (sv_cm_get_event(ch, &e) == 0) {
			struct sv_cm_id *gone = on_event(e);

			sv_cm_ack_event(e);
			if (gone)
				sv_cm_destroy_id(gone);
		}
		drain_out();
		if (unread == 0)
			return;
		sched_yield();
	}
}

static void send_mad(const uint8_t *d, size_t len, uint8_t arg)
{
	uint8_t p[SV_BTH_LEN + SV_DETH_LEN + SV_MAD_LEN + SV_ICRC_LEN] = { 0 };
	struct sv_icrc_ipv4 v4 = { .id = 0, .df = true };
	uint8_t *mad = p + SV_BTH_LEN + SV_DETH_LEN;
	uint32_t icrc;

	p[0] = SV__ROCE_OP_UD_SEND_ONLY;
	sv__put_be16(p + 2, SV_PKEY_DEFAULT);
	sv__put_be24(p + 5, SV_GSI_QPN);
	sv__put_be24(p + 9, C.psn++ & SV_PSN_MASK);
	sv__put_be32(p + SV_BTH_LEN, SV_QP1_QKEY);
	sv__put_be24(p + SV_BTH_LEN + 5, SV_GSI_QPN);
	memcpy(mad, d, len < SV_MAD_LEN ? len : SV_MAD_LEN);
	if (arg & 1)
		sv__put_be64(mad + SV_MAD_HDR_LEN + 8, service_id);
	if (arg & 2)
		sv__put_be32(mad + SV_MAD_HDR_LEN + 4, C.our_comm_id);
	if (sv__icrc_packet(&icrc, (struct sockaddr *)&peer_addr, (struct sockaddr *)&dev_addr,
			    &v4, p, sizeof(p)) != 0)
		lv_fail("icrc");
	sv__put_le32(p + sizeof(p) - SV_ICRC_LEN, icrc ^ (arg & 4 ? 1u : 0u));
	if (sendto(peer, p, sizeof(p), 0, (struct sockaddr *)&dev_addr, sizeof(dev_addr)) < 0 &&
	    errno != EAGAIN && errno != ENOBUFS)
		lv_fail("sendto: %s", strerror(errno));
	settle();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!ctx)
		init_once();
	if (size < 1)
		return 0;
	memset(&C, 0, sizeof(C));
	C.accept = data[0] & 1;
	C.disconnect = data[0] & 2;
	data++;
	size--;
	while (size >= 3) {
		uint8_t arg = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;

		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		send_mad(data, len, arg);
		data += len;
		size -= len;
	}
	if (C.id)
		sv_cm_destroy_id(C.id);
	if (C.qp)
		sv_destroy_qp(C.qp);
	settle();
	return 0;
}
