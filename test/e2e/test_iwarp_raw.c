/*
 * test_iwarp_raw.c — the iWARP transport against a hand-driven peer on a plain socket.
 *
 * The peer speaks the wire format byte by byte (through the codecs), so these tests pin
 * what our responder does with inputs our own initiator never produces: an MPA rev 1
 * Request as Linux siw's clients send it, a Read-only RTR offer, a CRC error, a Write to
 * an unknown STag and a broken frame. Each checks the bytes we answer with, the CM and
 * async events, and that nothing crashes or hangs.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crypto/crc32c.h"
#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"

#define TIMEOUT_MS 10000

static struct sv_context *ctx;
static struct sv_pd *pd;
static struct sv_cq *cq;
static struct sv_qp *qp;
static struct sv_cm_channel *ch;
static struct sv_cm_id *listener, *conn;
static uint8_t *buf;
static struct sv_mr *mr;
static int peer = -1;
static uint16_t port;

static void setup(void)
{
	struct sv_device_opts o;
	struct sv_qp_init_attr ia = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_storage bound;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	o.crc = 1;
	o.markers = 0;
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_create_cq(ctx, 64, NULL, NULL, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	buf = aligned_alloc(4096, 65536);
	memset(buf, 0, 65536);
	/* The last 4 KiB of the allocation stay outside the MR: a guard for bounds tests. */
	cr_assert_eq(sv_reg_mr(pd, buf, 65536 - 4096, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
			       SV_ACCESS_REMOTE_READ, &mr), 0);
	cr_assert_eq(sv_cm_create_channel(&ch), 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &listener), 0);
	cr_assert_eq(sv_cm_listen(listener, (struct sockaddr *)&a, 4), 0);
	cr_assert_eq(sv_cm_local_addr(listener, &bound), 0);
	port = ((struct sockaddr_in *)&bound)->sin_port;
}

static void teardown(void)
{
	if (peer >= 0)
		close(peer);
	peer = -1;
	sv_destroy_qp(qp);
	if (conn)
		sv_cm_destroy_id(conn);
	conn = NULL;
	sv_cm_destroy_id(listener);
	sv_dereg_mr(mr);
	sv_destroy_cq(cq);
	sv_dealloc_pd(pd);
	sv_cm_destroy_channel(ch);
	cr_assert_eq(sv_close_device(ctx), 0);
	free(buf);
}

static struct sv_cm_event *wait_event(enum sv_cm_event_type want)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev = NULL;

	cr_assert_eq(poll(&p, 1, TIMEOUT_MS), 1, "no CM event (wanted %s)", sv_cm_event_str(want));
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, want, "got %s, wanted %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(want));
	return ev;
}

static struct sv_wc poll_one(void)
{
	struct timespec t0, t;
	struct sv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = sv_poll_cq(cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		cr_assert_lt(t.tv_sec - t0.tv_sec, TIMEOUT_MS / 1000, "no completion");
	}
	cr_assert_eq(n, 1);
	return wc;
}

static void peer_connect(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port };
	struct timeval tv = { .tv_sec = TIMEOUT_MS / 1000 };
	int one = 1;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	peer = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(peer, 0);
	setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	cr_assert_eq(connect(peer, (struct sockaddr *)&a, sizeof(a)), 0);
}

static void peer_send(const void *p, size_t n)
{
	cr_assert_eq(send(peer, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void peer_recv(void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(peer, (uint8_t *)p + got, n - got, 0);

		cr_assert_gt(r, 0, "peer recv: %zd (%s)", r, strerror(errno));
		got += (size_t)r;
	}
}

/* Builds one FPDU into f (256 bytes): headers of m, payload, PAD, CRC (bad_crc flips
 * it); returns its length. */
static size_t fpdu_build(uint8_t *f, struct sv_rdmap_msg *m, const void *payload, size_t len,
			 bool crc, bool bad_crc)
{
	int hl = sv__rdmap_encode(f + 2, 256 - 2, m);
	size_t ul, pad, n;
	uint32_t c;

	cr_assert_gt(hl, 0);
	cr_assert_leq((size_t)hl + len, 256 - 10);
	ul = (size_t)hl + len;
	sv__put_be16(f, (uint16_t)ul);
	if (len)
		memcpy(f + 2 + hl, payload, len);
	pad = sv__mpa_pad(ul);
	memset(f + 2 + ul, 0, pad);
	n = 2 + ul + pad;
	c = crc ? sv__crc32c(f, n) : 0;
	if (bad_crc)
		c ^= 1;
	sv__put_le32(f + n, c);
	return n + 4;
}

/* One FPDU from the peer. */
static void peer_fpdu(struct sv_rdmap_msg *m, const void *payload, size_t len, bool crc,
		      bool bad_crc)
{
	uint8_t f[256];

	peer_send(f, fpdu_build(f, m, payload, len, crc, bad_crc));
}

/* Reads one FPDU sent to the peer; checks its CRC (zero when crc is false); returns the
 * payload length. */
static size_t peer_read_fpdu_crc(struct sv_rdmap_msg *m, uint8_t *ulpdu, size_t cap, bool crc)
{
	uint8_t hdr[2], trl[8];
	size_t ul, pad;
	uint32_t c;
	int hl;

	peer_recv(hdr, 2);
	ul = sv__get_be16(hdr);
	cr_assert_leq(ul, cap);
	peer_recv(ulpdu, ul);
	pad = sv__mpa_pad(ul);
	peer_recv(trl, pad + 4);
	c = sv__crc32c_update(SV_CRC32C_INIT, hdr, 2);
	c = sv__crc32c_update(c, ulpdu, ul);
	c = ~sv__crc32c_update(c, trl, pad);
	cr_assert_eq(sv__get_le32(trl + pad), crc ? c : 0, "bad CRC field from our stack");
	hl = sv__rdmap_decode(m, ulpdu, ul);
	cr_assert_gt(hl, 0);
	return ul - (size_t)hl;
}

static size_t peer_read_fpdu(struct sv_rdmap_msg *m, uint8_t *ulpdu, size_t cap)
{
	return peer_read_fpdu_crc(m, ulpdu, cap, true);
}

static void untagged(struct sv_rdmap_msg *m, uint8_t op, uint32_t qn, uint32_t msn)
{
	memset(m, 0, sizeof(*m));
	m->opcode = op;
	m->ddp.last = true;
	m->ddp.qn = qn;
	m->ddp.msn = msn;
}

/* MPA Request from the peer; returns our Reply decoded (priv points into rep). */
static void peer_handshake(const struct sv_mpa_rr *req, struct sv_mpa_rr *rep, uint8_t *rbuf)
{
	uint8_t f[SV_MPA_RR_HDR_LEN + SV_MPA_MAX_PD_LEN];
	int n = sv__mpa_rr_encode(f, sizeof(f), req);
	struct sv_cm_event *ev;
	struct sv_recv_wr *bad;
	struct sv_sge sge = { (uintptr_t)buf, 4096, mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 };
	size_t pd;

	cr_assert_gt(n, 0);
	peer_connect();
	peer_send(f, (size_t)n);
	ev = wait_event(SV_CM_EVENT_CONNECT_REQUEST);
	cr_assert_eq(ev->param.private_data_len, req->priv_len);
	conn = ev->id;
	sv_cm_ack_event(ev);
	cr_assert_eq(sv_cm_accept(conn, qp, NULL), 0);
	cr_assert_eq(sv_post_recv(qp, &rwr, &bad), 0);
	peer_recv(rbuf, SV_MPA_RR_HDR_LEN);
	pd = sv__get_be16(rbuf + 18);
	peer_recv(rbuf + SV_MPA_RR_HDR_LEN, pd);
	cr_assert_eq(sv__mpa_rr_decode(rep, rbuf, SV_MPA_RR_HDR_LEN + pd, true),
		     (int)(SV_MPA_RR_HDR_LEN + pd));
}

Test(iwarp_raw, rev1_initiator_like_siw, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_mpa_rr req = { .rev = SV_MPA_REV1, .priv = (const uint8_t *)"rping",
				 .priv_len = 5 };
	struct sv_mpa_rr rep;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m;
	struct sv_send_wr wr, *bad;
	struct sv_sge sge;
	struct sv_wc wc;

	peer_handshake(&req, &rep, rbuf);
	cr_assert(rep.reply);
	cr_assert_eq(rep.rev, SV_MPA_REV1);
	cr_assert_not(rep.enhanced);
	cr_assert(rep.crc, "we ask for CRC, so both directions use it");
	cr_assert_not(rep.reject);

	/* Rev 1 has no RTR: the initiator's first FPDU (a Send) establishes. */
	untagged(&m, SV_RDMAP_SEND, 0, 1);
	peer_fpdu(&m, "hello", 5, true, false);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_ESTABLISHED));
	wc = poll_one();
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 77);
	cr_assert_eq(wc.byte_len, 5);
	cr_assert_arr_eq(buf, "hello", 5);

	/* Our Send back: untagged, QN 0, MSN 1, L set, good CRC. */
	memcpy(buf + 8192, "world!", 6);
	sge = (struct sv_sge){ (uintptr_t)(buf + 8192), 6, mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_SEND };
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
	cr_assert_eq(peer_read_fpdu(&m, ulpdu, sizeof(ulpdu)), 6);
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
	cr_assert_eq(m.ddp.qn, 0);
	cr_assert_eq(m.ddp.msn, 1);
	cr_assert_eq(m.ddp.mo, 0);
	cr_assert(m.ddp.last);
	cr_assert_arr_eq(ulpdu + m.hdr_len, "world!", 6);
	cr_assert_eq(poll_one().status, SV_WC_SUCCESS);
}

/* siw's default MPA choices (its module parameters: MPA revision 2, CRC neither required
 * nor refused, no peer-to-peer mode, markers never requested; it rejects a Request and
 * tears down on a Reply that asks for markers): our defaults match them, so neither side
 * ever meets the other's refusal. Our device options ask for CRC and not for markers;
 * against a siw-style Request (rev 2 with the RFC 6581 block, C clear) our Reply is rev 2,
 * sets C, so CRC is used both ways (RFC 5044: either side asking is enough), and leaves M
 * clear; the initiator's first FPDU (no RTR without P2P) establishes. */
Test(iwarp_raw, rev2_initiator_with_siw_defaults, .init = setup, .fini = teardown,
     .timeout = 30)
{
	struct sv_device_opts o;
	struct sv_mpa_rr req = { .rev = SV_MPA_REV2, .enhanced = true, .ird = 1, .ord = 1,
				 .priv = (const uint8_t *)"rping", .priv_len = 5 };
	struct sv_mpa_rr rep;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m;
	struct sv_send_wr wr, *bad;
	struct sv_sge sge;
	struct sv_wc wc;

	sv_device_opts_init(&o);
	cr_assert_eq(o.crc, 1, "CRC asked for by default");
	cr_assert_eq(o.markers, 0, "markers never asked for by default");
	peer_handshake(&req, &rep, rbuf);
	cr_assert(rep.reply);
	cr_assert_eq(rep.rev, SV_MPA_REV2);
	cr_assert(rep.enhanced);
	cr_assert(rep.crc, "CRC negotiated: we ask, siw accepts");
	cr_assert_not(rep.markers, "siw would tear down on M");
	cr_assert_not(rep.reject);
	cr_assert_not(rep.p2p);
	cr_assert_eq(rep.rtr, 0);
	cr_assert_eq(rep.ird, 1, "the initiator's ORD");
	cr_assert_eq(rep.ord, 1, "the initiator's IRD");

	untagged(&m, SV_RDMAP_SEND, 0, 1);
	peer_fpdu(&m, "hello", 5, true, false);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_ESTABLISHED));
	wc = poll_one();
	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_arr_eq(buf, "hello", 5);
	memcpy(buf + 8192, "world!", 6);
	sge = (struct sv_sge){ (uintptr_t)(buf + 8192), 6, mr->lkey };
	wr = (struct sv_send_wr){ .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				  .opcode = SV_WR_SEND };
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
	cr_assert_eq(peer_read_fpdu(&m, ulpdu, sizeof(ulpdu)), 6, "a good CRC on our FPDU");
	cr_assert_eq(m.opcode, SV_RDMAP_SEND);
	cr_assert_arr_eq(ulpdu + m.hdr_len, "world!", 6);
	cr_assert_eq(poll_one().status, SV_WC_SUCCESS);
}

Test(iwarp_raw, read_rtr_gets_zero_length_response, .init = setup, .fini = teardown,
     .timeout = 30)
{
	struct sv_mpa_rr req = { .rev = SV_MPA_REV2, .enhanced = true, .crc = true, .p2p = true,
				 .rtr = SV_MPA_RTR_READ, .ird = 2, .ord = 2 };
	struct sv_mpa_rr rep;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m;

	peer_handshake(&req, &rep, rbuf);
	cr_assert(rep.enhanced);
	cr_assert(rep.p2p);
	cr_assert_eq(rep.rtr, SV_MPA_RTR_READ, "the only RTR type offered");
	cr_assert_eq(rep.ird, 2);
	cr_assert_leq(rep.ord, 2);

	/* The RTR: a zero-length Read Request, STags never checked. */
	untagged(&m, SV_RDMAP_READ_REQ, 1, 1);
	m.u.read_req.sink_stag = 0x1234;
	m.u.read_req.sink_to = 0x1000;
	m.u.read_req.src_stag = 0xdead;
	peer_fpdu(&m, NULL, 0, true, false);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_ESTABLISHED));
	cr_assert_eq(peer_read_fpdu(&m, ulpdu, sizeof(ulpdu)), 0);
	cr_assert_eq(m.opcode, SV_RDMAP_READ_RESP);
	cr_assert(m.ddp.tagged);
	cr_assert(m.ddp.last);
	cr_assert_eq(m.ddp.stag, 0x1234);
	cr_assert_eq(m.ddp.to, 0x1000);
}

/* Handshake (rev 2, Write RTR) then the RTR, so the QP is in RTS. */
static void established_v2(void)
{
	struct sv_mpa_rr req = { .rev = SV_MPA_REV2, .enhanced = true, .crc = true, .p2p = true,
				 .rtr = SV_MPA_RTR_WRITE | SV_MPA_RTR_READ, .ird = 4, .ord = 4 };
	struct sv_mpa_rr rep;
	uint8_t rbuf[600];
	struct sv_rdmap_msg m = { .opcode = SV_RDMAP_WRITE };

	peer_handshake(&req, &rep, rbuf);
	cr_assert_eq(rep.rtr, SV_MPA_RTR_WRITE);
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = 1;
	peer_fpdu(&m, NULL, 0, true, false);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_ESTABLISHED));
}

/* Reads our Terminate and the async event; checks both name the same triple. */
static void expect_terminate(uint8_t layer, uint8_t etype, uint8_t ecode,
			     enum sv_event_type event, struct sv_rdmap_msg *m)
{
	uint8_t ulpdu[256];
	struct sv_async_event ae;

	peer_read_fpdu(m, ulpdu, sizeof(ulpdu));
	cr_assert_eq(m->opcode, SV_RDMAP_TERMINATE);
	cr_assert_eq(m->ddp.qn, 2);
	cr_assert_eq(m->u.term.layer, layer);
	cr_assert_eq(m->u.term.etype, etype);
	cr_assert_eq(m->u.term.ecode, ecode);
	cr_assert_eq(sv_get_async_event(ctx, &ae), 0);
	cr_assert_eq(ae.event_type, event, "%s", sv_event_type_str(ae.event_type));
	cr_assert_eq(ae.term_layer, layer);
	cr_assert_eq(ae.term_etype, etype);
	cr_assert_eq(ae.term_ecode, ecode);
	cr_assert_eq(ae.term_remote, 0);
	sv_ack_async_event(&ae);
	/* The receive flushes, and the stream ends. */
	cr_assert_eq(poll_one().status, SV_WC_WR_FLUSH_ERR);
	char c;
	cr_assert_eq(recv(peer, &c, 1, 0), 0, "we close after a Terminate");
	close(peer);			/* our FIN: the connection is down */
	peer = -1;
}

Test(iwarp_raw, crc_error_is_llp_terminate, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_rdmap_msg m;

	established_v2();
	untagged(&m, SV_RDMAP_SEND, 0, 1);
	peer_fpdu(&m, "xyz", 3, true, true);
	expect_terminate(SV_TERM_LAYER_LLP, 0, SV_TERM_LLP_CRC, SV_EVENT_QP_FATAL, &m);
	cr_assert_not(m.u.term.has_ddp_hdr);
	struct sv_qp_stats st;

	cr_assert_eq(sv_query_qp_stats(qp, &st), 0);
	cr_assert_eq(st.icrc_errors, 1);
	cr_assert_eq(st.terminates_tx, 1);
	cr_assert_eq(buf[0], 'x', "placed before the CRC check, like siw; the QP failed");
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_raw, write_to_unknown_stag, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_rdmap_msg m = { .opcode = SV_RDMAP_WRITE };

	established_v2();
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = mr->rkey + 0x100;	/* the next slot: empty, one MR lives here */
	m.ddp.to = (uintptr_t)buf;
	peer_fpdu(&m, "data", 4, true, false);
	expect_terminate(SV_TERM_LAYER_DDP, SV_TERM_DDP_TAGGED, SV_TERM_DDP_T_INV_STAG,
			 SV_EVENT_QP_ACCESS_ERR, &m);
	/* M and D: the segment's payload length and the offending tagged header. */
	cr_assert(m.u.term.has_len);
	cr_assert(m.u.term.has_ddp_hdr);
	cr_assert_eq(m.u.term.ddp_seg_len, 4);
	cr_assert_eq(m.u.term.ddp_hdr_len, SV_DDP_TAGGED_HDR_LEN);
	cr_assert_eq(sv__get_be32(m.u.term.ddp_hdr + 2), mr->rkey + 0x100);
	cr_assert_eq(buf[0], 0, "nothing was placed");
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_raw, wrong_msn_and_garbage, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_rdmap_msg m;

	established_v2();
	/* MSN 5 where 1 is due: RFC 5041 untagged "MSN out of range". */
	untagged(&m, SV_RDMAP_SEND, 0, 5);
	peer_fpdu(&m, "abc", 3, true, false);
	expect_terminate(SV_TERM_LAYER_DDP, SV_TERM_DDP_UNTAGGED, SV_TERM_DDP_U_MSN_RANGE,
			 SV_EVENT_QP_REQ_ERR, &m);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_raw, garbage_after_rtr, .init = setup, .fini = teardown, .timeout = 30)
{
	static const uint8_t junk[64] = { 0x00, 0x01, 0x13, 0x37 };
	struct sv_async_event ae;

	established_v2();
	/* ULPDU_Length 1 cannot hold a DDP header: the stream is unparseable. */
	peer_send(junk, sizeof(junk));
	cr_assert_eq(sv_get_async_event(ctx, &ae), 0);
	cr_assert_eq(ae.event_type, SV_EVENT_QP_FATAL);
	cr_assert_eq(ae.term_layer, SV_TERM_LAYER_LLP);
	sv_ack_async_event(&ae);
	cr_assert_eq(poll_one().status, SV_WC_WR_FLUSH_ERR);
	close(peer);
	peer = -1;
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_raw, peer_reset_fails_outstanding_read, .init = setup, .fini = teardown,
     .timeout = 30)
{
	struct sv_sge sge = { (uintptr_t)(buf + 8192), 64, mr->lkey };
	struct sv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_RDMA_READ }, *bad;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	uint8_t ulpdu[256];
	struct sv_rdmap_msg m;
	struct sv_async_event ae;
	struct sv_wc wc;

	established_v2();
	wr.wr.rdma.rkey = 0x4242;
	wr.wr.rdma.remote_addr = 0x10000;
	cr_assert_eq(sv_post_send(qp, &wr, &bad), 0);
	peer_read_fpdu(&m, ulpdu, sizeof(ulpdu));
	cr_assert_eq(m.opcode, SV_RDMAP_READ_REQ);
	cr_assert_eq(m.u.read_req.size, 64);
	cr_assert_eq(m.u.read_req.src_stag, 0x4242);
	/* The peer dies with the Read unanswered: RST. */
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(peer);
	peer = -1;
	wc = poll_one();
	cr_assert_eq(wc.wr_id, 9);
	cr_assert_eq(wc.status, SV_WC_FATAL_ERR, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.vendor_err, (uint32_t)SV_TERM_LAYER_LLP << 16 | SV_TERM_LLP_CONN_LOST);
	cr_assert_eq(poll_one().status, SV_WC_WR_FLUSH_ERR);	/* the receive */
	cr_assert_eq(sv_get_async_event(ctx, &ae), 0);
	cr_assert_eq(ae.event_type, SV_EVENT_QP_FATAL);
	cr_assert_eq(ae.term_ecode, SV_TERM_LLP_CONN_LOST);
	sv_ack_async_event(&ae);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

/*
 * The peer streams WRITEs and resets the connection while many of them still wait in our
 * socket. The reset shows as POLLERR, on which libuv stops the poll handle; the loop
 * must watch the socket again after that callback, or the bytes behind its first pass,
 * and the reset behind them, are never read and DISCONNECTED never comes. Whether the
 * reset overtakes our reads is up to the scheduler, so the test runs the race ROUNDS
 * times, each on a fresh connection.
 */
Test(iwarp_raw, peer_reset_behind_queued_writes, .init = setup, .fini = teardown,
     .timeout = 120)
{
	enum { PAYLOAD = 200, COUNT = 16384, ROUNDS = 40 };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct sv_rdmap_msg m = { .opcode = SV_RDMAP_WRITE };
	uint8_t payload[PAYLOAD], f[256], *stream;
	struct sv_qp_init_attr ia = { 0 };
	size_t n = 0, len;

	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
	ia.qp_type = SV_QPT_RC;
	ia.sq_sig_all = 1;
	memset(payload, 0xab, sizeof(payload));
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = mr->rkey;
	m.ddp.to = (uintptr_t)buf;
	len = fpdu_build(f, &m, payload, sizeof(payload), true, false);
	stream = malloc(len * COUNT);
	cr_assert_not_null(stream);
	for (int i = 0; i < COUNT; i++, n += len)
		memcpy(stream + n, f, len);
	for (int r = 0; r < ROUNDS; r++) {
		struct sv_async_event ae;

		buf[0] = 0;
		established_v2();
		peer_send(stream, n);
		setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(peer);
		peer = -1;
		sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
		cr_assert_eq(buf[0], 0xab, "round %d: the WRITEs before the reset were placed", r);
		cr_assert_eq(poll_one().status, SV_WC_WR_FLUSH_ERR);	/* the receive */
		/* The connection loss, if it was one; sv_get_async_event() blocks. */
		while (poll(&(struct pollfd){ .fd = sv_async_fd(ctx), .events = POLLIN }, 1, 0) == 1 &&
		       sv_get_async_event(ctx, &ae) == 0)
			sv_ack_async_event(&ae);
		cr_assert_eq(sv_cm_destroy_id(conn), 0);
		conn = NULL;
		cr_assert_eq(sv_destroy_qp(qp), 0);
		cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	}
	free(stream);
}

Test(iwarp_raw, bad_opcode_then_nothing, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_rdmap_msg m;
	uint8_t f[32] = { 0 };
	uint32_t c;

	established_v2();
	/* ULPDU of 18 bytes: untagged DDP header with RDMAP opcode 0xc (reserved). */
	sv__put_be16(f, 18);
	f[2] = SV_DDP_FLAG_L | SV_DDP_VERSION;
	f[3] = 0x40 | 0x0c;
	sv__put_be32(f + 12, 1);
	c = sv__crc32c(f, 20);
	sv__put_le32(f + 20, c);
	peer_send(f, 24);
	expect_terminate(SV_TERM_LAYER_RDMAP, SV_TERM_RDMAP_REMOTE_OP, SV_TERM_RDMAP_UNEXP_OPCODE,
			 SV_EVENT_QP_REQ_ERR, &m);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_DISCONNECTED));
}

Test(iwarp_raw, malformed_request_is_dropped, .init = setup, .fini = teardown, .timeout = 30)
{
	static const uint8_t bad[20] = "MPA ID Bad Frame";
	char c;

	peer_connect();
	peer_send(bad, sizeof(bad));
	cr_assert_eq(recv(peer, &c, 1, 0), 0, "the listener closes a malformed Request");
	close(peer);
	peer = -1;
	/* The listener still works. */
	struct sv_mpa_rr req = { .rev = SV_MPA_REV1 };
	struct sv_mpa_rr rep;
	uint8_t rbuf[600];

	peer_handshake(&req, &rep, rbuf);
	cr_assert_not(rep.reject);
}

/*
 * Seeded random FPDUs with valid framing and CRC but arbitrary headers (often aimed at
 * our registered buffer, just inside and outside its bounds). Whatever the input, the
 * responder must answer with a Terminate or a close, never crash (the suite also runs
 * under ASan), and never write outside the registered region.
 */
Test(iwarp_raw, random_frames_fail_cleanly, .init = setup, .fini = teardown, .timeout = 120)
{
	uint8_t *guard = buf + 65536 - 4096;	/* just past the MR: nothing may land here */

	srand(7);
	for (int round = 0; round < 12; round++) {
		struct sv_qp_init_attr ia = { 0 };
		struct sv_cm_event *ev;
		struct pollfd pf;
		int n;

		if (round > 0) {
			ia.send_cq = ia.recv_cq = cq;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
			ia.qp_type = SV_QPT_RC;
			cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
		}
		memset(guard, 0xa5, 4096);
		established_v2();
		n = 1 + rand() % 8;
		for (int i = 0; i < n; i++) {
			uint8_t f[128];
			size_t ul = 14 + (size_t)(rand() % 80), pad;
			uint32_t c;

			for (size_t k = 0; k < ul; k++)
				f[2 + k] = (uint8_t)rand();
			f[2] = (uint8_t)((f[2] & 0xc0) | SV_DDP_VERSION);
			f[3] = (uint8_t)(0x40 | (f[3] & 0x0f));
			if (rand() & 1) {
				/* Aim at the buffer: our STag, a TO near its end. */
				sv__put_be32(f + 4, mr->rkey);
				sv__put_be64(f + 8, (uintptr_t)guard - 64 + (uint64_t)(rand() % 128));
			}
			sv__put_be16(f, (uint16_t)ul);
			pad = sv__mpa_pad(ul);
			memset(f + 2 + ul, 0, pad);
			c = sv__crc32c(f, 2 + ul + pad);
			sv__put_le32(f + 2 + ul + pad, c);
			send(peer, f, 2 + ul + pad + 4, MSG_NOSIGNAL);
		}
		close(peer);
		peer = -1;
		/* Either a Terminate (async event) or the peer's FIN; then DISCONNECTED. */
		pf = (struct pollfd){ .fd = sv_cm_channel_fd(ch), .events = POLLIN };
		cr_assert_eq(poll(&pf, 1, TIMEOUT_MS), 1, "round %d: no CM event", round);
		cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
		cr_assert_eq(ev->event, SV_CM_EVENT_DISCONNECTED, "round %d: %s", round,
			     sv_cm_event_str(ev->event));
		sv_cm_ack_event(ev);
		for (;;) {
			struct sv_async_event ae;
			int fl = fcntl(sv_async_fd(ctx), F_GETFL);

			fcntl(sv_async_fd(ctx), F_SETFL, fl | O_NONBLOCK);
			if (sv_get_async_event(ctx, &ae) < 0)
				break;
			sv_ack_async_event(&ae);
		}
		for (struct sv_wc wc; sv_poll_cq(cq, 1, &wc) > 0;)
			cr_assert_neq(wc.status, SV_WC_SUCCESS, "round %d: a random Send landed", round);
		for (int k = 0; k < 4096; k++)
			cr_assert_eq(guard[k], 0xa5, "round %d: byte %d past the MR written", round, k);
		cr_assert_eq(sv_destroy_qp(qp), 0);
		qp = NULL;
		sv_cm_destroy_id(conn);
		conn = NULL;
	}
	/* teardown() destroys the QP: give it a fresh one. */
	struct sv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = SV_QPT_RC };

	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
}

/* ---------------------------------------------------------------------------------------
 * Our initiator against a hand-driven responder.
 */

/* Listens on a free port; connects our QP to it with IRD/ORD 2 and private data
 * "hi"; returns the accepted peer socket after checking our MPA Request. */
static void initiator_to_raw(struct sv_mpa_rr *req, uint8_t *rbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct timeval tv = { .tv_sec = TIMEOUT_MS / 1000 };
	struct sv_conn_param cp = { .private_data = "hi", .private_data_len = 2,
				    .responder_resources = 2, .initiator_depth = 2 };
	int l = socket(AF_INET, SOCK_STREAM, 0);
	size_t pd;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(l, 1), 0);
	getsockname(l, (struct sockaddr *)&a, &al);
	cr_assert_eq(sv_cm_create_id(ch, ctx, NULL, &conn), 0);
	cr_assert_eq(sv_cm_connect(conn, qp, (struct sockaddr *)&a, &cp), 0);
	peer = accept(l, NULL, NULL);
	close(l);
	cr_assert_geq(peer, 0);
	setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	peer_recv(rbuf, SV_MPA_RR_HDR_LEN);
	pd = sv__get_be16(rbuf + 18);
	peer_recv(rbuf + SV_MPA_RR_HDR_LEN, pd);
	cr_assert_eq(sv__mpa_rr_decode(req, rbuf, SV_MPA_RR_HDR_LEN + pd, false),
		     (int)(SV_MPA_RR_HDR_LEN + pd));
	/* RFC 6581 request: rev 2, P2P, RTR Write and Read offered (never Send). */
	cr_assert_eq(req->rev, SV_MPA_REV2);
	cr_assert(req->enhanced);
	cr_assert(req->p2p);
	cr_assert_eq(req->rtr, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ);
	cr_assert_eq(req->ird, 2);
	cr_assert_eq(req->ord, 2);
	cr_assert(req->crc);
	cr_assert_not(req->markers);
	cr_assert_eq(req->priv_len, 2);
	cr_assert_arr_eq(req->priv, "hi", 2);
}

static void raw_reply(bool reject, unsigned rtr, uint16_t ird, uint16_t ord, const char *priv)
{
	struct sv_mpa_rr rep = { .reply = true, .reject = reject, .crc = true, .enhanced = true,
				 .rev = SV_MPA_REV2, .p2p = true, .rtr = rtr, .ird = ird,
				 .ord = ord, .priv = (const uint8_t *)priv,
				 .priv_len = (uint16_t)strlen(priv) };
	uint8_t f[128];
	int n = sv__mpa_rr_encode(f, sizeof(f), &rep);

	cr_assert_gt(n, 0);
	peer_send(f, (size_t)n);
}

Test(iwarp_raw, initiator_read_rtr, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_mpa_rr req;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m = { .opcode = SV_RDMAP_READ_RESP };
	struct sv_cm_event *ev;
	struct sv_sge sge = { (uintptr_t)buf, 16, mr->lkey };
	struct sv_recv_wr rwr = { .wr_id = 3, .sg_list = &sge, .num_sge = 1 }, *rbad;

	initiator_to_raw(&req, rbuf);
	cr_assert_eq(sv_post_recv(qp, &rwr, &rbad), 0);
	raw_reply(false, SV_MPA_RTR_READ, 2, 1, "ok");
	ev = wait_event(SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(ev->param.private_data_len, 2);
	cr_assert_arr_eq(ev->param.private_data, "ok", 2);
	sv_cm_ack_event(ev);
	/* Our first FPDU is the chosen RTR: a zero-length Read Request on QN 1, MSN 1. */
	cr_assert_eq(peer_read_fpdu(&m, ulpdu, sizeof(ulpdu)), 0);
	cr_assert_eq(m.opcode, SV_RDMAP_READ_REQ);
	cr_assert_eq(m.ddp.qn, 1);
	cr_assert_eq(m.ddp.msn, 1);
	cr_assert_eq(m.u.read_req.size, 0);
	/* Its zero-length response completes nothing; a Send after it lands. */
	uint32_t sink = m.u.read_req.sink_stag;
	uint64_t to = m.u.read_req.sink_to;

	memset(&m, 0, sizeof(m));
	m.opcode = SV_RDMAP_READ_RESP;
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = sink;
	m.ddp.to = to;
	peer_fpdu(&m, NULL, 0, true, false);
	untagged(&m, SV_RDMAP_SEND, 0, 1);
	peer_fpdu(&m, "after", 5, true, false);
	struct sv_wc wc = poll_one();

	cr_assert_eq(wc.status, SV_WC_SUCCESS, "%s", sv_wc_status_str(wc.status));
	cr_assert_eq(wc.wr_id, 3);
	cr_assert_arr_eq(buf, "after", 5);
}

Test(iwarp_raw, initiator_insufficient_ird, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_mpa_rr req;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m;

	initiator_to_raw(&req, rbuf);
	raw_reply(false, SV_MPA_RTR_WRITE, 2, 8, "");	/* ORD 8 > our IRD 2 */
	peer_read_fpdu(&m, ulpdu, sizeof(ulpdu));
	cr_assert_eq(m.opcode, SV_RDMAP_TERMINATE);
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_LLP);
	cr_assert_eq(m.u.term.ecode, SV_TERM_LLP_INSUFF_IRD);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_CONNECT_ERROR));
	/* A connection that never came up: no async event, the QP still in INIT. */
	struct sv_qp_attr qa;
	struct sv_qp_init_attr qia;
	struct sv_async_event ae;

	fcntl(sv_async_fd(ctx), F_SETFL, fcntl(sv_async_fd(ctx), F_GETFL) | O_NONBLOCK);
	cr_assert_eq(sv_get_async_event(ctx, &ae), -EAGAIN);
	cr_assert_eq(sv_query_qp(qp, &qa, SV_QP_STATE, &qia), 0);
	cr_assert_eq(qa.qp_state, SV_QPS_INIT);
}

Test(iwarp_raw, initiator_no_matching_rtr, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_mpa_rr req;
	uint8_t rbuf[600], ulpdu[256];
	struct sv_rdmap_msg m;

	initiator_to_raw(&req, rbuf);
	raw_reply(false, SV_MPA_RTR_SEND, 2, 2, "");	/* not offered */
	peer_read_fpdu(&m, ulpdu, sizeof(ulpdu));
	cr_assert_eq(m.opcode, SV_RDMAP_TERMINATE);
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_LLP);
	cr_assert_eq(m.u.term.ecode, SV_TERM_LLP_NO_RTR);
	sv_cm_ack_event(wait_event(SV_CM_EVENT_CONNECT_ERROR));
}

Test(iwarp_raw, initiator_rejected, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sv_mpa_rr req;
	uint8_t rbuf[600];
	struct sv_cm_event *ev;

	initiator_to_raw(&req, rbuf);
	raw_reply(true, 0, 0, 0, "busy");
	ev = wait_event(SV_CM_EVENT_REJECTED);
	cr_assert_eq(ev->param.private_data_len, 4);
	cr_assert_arr_eq(ev->param.private_data, "busy", 4);
	sv_cm_ack_event(ev);
}

/*
 * Bytes Linux siw sent in shared/captures/siw-rping-mpa-v1.pcap: its MPA rev 1 Reply
 * (frame 6: no CRC, no markers, no private data) and its RDMA Read Request (frame 10:
 * QN 1, MSN 1, sink STag 0x40cc4300 TO 0x563616bbc670, 64 bytes from STag 0xffffe080 TO
 * 0x7fffffffe080, CRC field zero). Our initiator takes the Reply, then serves the Read
 * with its source patched to our buffer, then answers the original with a Terminate.
 */
static const uint8_t siw_reply[20] = {
	0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61,
	0x6d, 0x65, 0x00, 0x01, 0x00, 0x00,
};
static const uint8_t siw_read_req[52] = {
	0x00, 0x2e, 0x41, 0x41, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
	0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40, 0xcc, 0x43, 0x00, 0x00, 0x00, 0x56, 0x36,
	0x16, 0xbb, 0xc6, 0x70, 0x00, 0x00, 0x00, 0x40, 0xff, 0xff, 0xe0, 0x80, 0x00, 0x00,
	0x7f, 0xff, 0xff, 0xff, 0xe0, 0x80, 0x00, 0x00, 0x00, 0x00,
};

Test(iwarp_raw, siw_reply_and_read_request, .init = setup, .fini = teardown, .timeout = 30)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct timeval tv = { .tv_sec = TIMEOUT_MS / 1000 };
	struct sv_device_opts o;
	struct sv_context *c2;
	struct sv_pd *pd2;
	struct sv_cq *cq2;
	struct sv_qp *qp2;
	struct sv_mr *mr2;
	struct sv_cm_id *id2;
	struct sv_qp_init_attr ia = { 0 };
	uint8_t req[600], ulpdu[256], f[52];
	uint8_t *src = aligned_alloc(64, 4096);
	struct sv_rdmap_msg m;
	struct sv_mpa_rr rr;
	struct pollfd pf;
	struct sv_cm_event *ev;
	size_t pd;
	int l;

	/* An initiator device without CRC, as the capture's client had. */
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	o.crc = 0;
	cr_assert_eq(sv_open_device(&o, &c2), 0);
	cr_assert_eq(sv_alloc_pd(c2, &pd2), 0);
	cr_assert_eq(sv_create_cq(c2, 16, NULL, NULL, 0, &cq2), 0);
	ia.send_cq = ia.recv_cq = cq2;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	cr_assert_eq(sv_create_qp(pd2, &ia, &qp2), 0);
	for (int i = 0; i < 64; i++)
		src[i] = (uint8_t)(0xc0 + i);
	cr_assert_eq(sv_reg_mr(pd2, src, 4096, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_READ, &mr2),
		     0);

	l = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	cr_assert_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(l, 1), 0);
	getsockname(l, (struct sockaddr *)&a, &al);
	cr_assert_eq(sv_cm_create_id(ch, c2, NULL, &id2), 0);
	cr_assert_eq(sv_cm_connect(id2, qp2, (struct sockaddr *)&a, NULL), 0);
	peer = accept(l, NULL, NULL);
	close(l);
	setsockopt(peer, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	peer_recv(req, SV_MPA_RR_HDR_LEN);
	pd = sv__get_be16(req + 18);
	peer_recv(req + SV_MPA_RR_HDR_LEN, pd);
	cr_assert_gt(sv__mpa_rr_decode(&rr, req, SV_MPA_RR_HDR_LEN + pd, false), 0);
	cr_assert_not(rr.crc);
	peer_send(siw_reply, sizeof(siw_reply));
	ev = wait_event(SV_CM_EVENT_ESTABLISHED);
	cr_assert_eq(ev->id, id2);
	sv_cm_ack_event(ev);

	/* siw's Read Request, its source pointed at our registered bytes. */
	memcpy(f, siw_read_req, sizeof(f));
	sv__put_be32(f + 36, mr2->rkey);
	sv__put_be64(f + 40, (uintptr_t)src);
	peer_send(f, sizeof(f));
	cr_assert_eq(peer_read_fpdu_crc(&m, ulpdu, sizeof(ulpdu), false), 64);
	cr_assert_eq(m.opcode, SV_RDMAP_READ_RESP);
	cr_assert(m.ddp.last);
	cr_assert_eq(m.ddp.stag, 0x40cc4300);
	cr_assert_eq(m.ddp.to, 0x563616bbc670ull);
	cr_assert_arr_eq(ulpdu + m.hdr_len, src, 64);

	/* The same frame as siw sent it (MSN 2 now): its STag is not ours. */
	memcpy(f, siw_read_req, sizeof(f));
	f[15] = 2;
	peer_send(f, sizeof(f));
	peer_read_fpdu_crc(&m, ulpdu, sizeof(ulpdu), false);
	cr_assert_eq(m.opcode, SV_RDMAP_TERMINATE);
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_RDMAP);
	cr_assert_eq(m.u.term.etype, SV_TERM_RDMAP_REMOTE_PROT);
	cr_assert(m.u.term.has_ddp_hdr);
	cr_assert(m.u.term.has_rdmap_hdr, "a Read Request's header travels back (R)");
	cr_assert_arr_eq(m.u.term.rdmap_hdr, siw_read_req + 20, SV_RDMAP_READ_REQ_LEN);
	close(peer);
	peer = -1;
	pf = (struct pollfd){ .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	cr_assert_eq(poll(&pf, 1, TIMEOUT_MS), 1);
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, SV_CM_EVENT_DISCONNECTED);
	sv_cm_ack_event(ev);
	for (;;) {
		struct sv_async_event ae;

		fcntl(sv_async_fd(c2), F_SETFL, fcntl(sv_async_fd(c2), F_GETFL) | O_NONBLOCK);
		if (sv_get_async_event(c2, &ae) < 0)
			break;
		sv_ack_async_event(&ae);
	}
	cr_assert_eq(sv_destroy_qp(qp2), 0);
	sv_cm_destroy_id(id2);
	sv_dereg_mr(mr2);
	sv_destroy_cq(cq2);
	sv_dealloc_pd(pd2);
	cr_assert_eq(sv_close_device(c2), 0);
	free(src);
}

Test(iwarp_raw, reads_beyond_ird_terminate, .init = setup, .fini = teardown, .timeout = 30)
{
	uint8_t frames[5 * 64];
	size_t len = 0;
	struct sv_rdmap_msg m;

	established_v2();		/* our IRD is the peer's ORD: 4 */
	/* Five Read Requests in one segment: the fifth exceeds IRD before any answer. */
	for (uint32_t i = 0; i < 5; i++) {
		uint8_t *f = frames + len;
		int hl;

		untagged(&m, SV_RDMAP_READ_REQ, 1, 1 + i);
		m.u.read_req.sink_stag = 0x77;
		m.u.read_req.size = 16;
		m.u.read_req.src_stag = mr->rkey;
		m.u.read_req.src_to = (uintptr_t)buf;
		hl = sv__rdmap_encode(f + 2, 60, &m);
		cr_assert_eq(hl, SV_DDP_UNTAGGED_HDR_LEN + SV_RDMAP_READ_REQ_LEN);
		sv__put_be16(f, (uint16_t)hl);
		sv__put_le32(f + 2 + hl, sv__crc32c(f, 2 + (size_t)hl));	/* 48: no PAD */
		len += 2 + (size_t)hl + 4;
	}
	peer_send(frames, len);
	/* Responses to the first four may precede the Terminate; skip them. */
	for (int i = 0; i < 5; i++) {
		uint8_t ulpdu[256];

		peer_read_fpdu(&m, ulpdu, sizeof(ulpdu));
		if (m.opcode == SV_RDMAP_TERMINATE)
			break;
		cr_assert_eq(m.opcode, SV_RDMAP_READ_RESP);
	}
	cr_assert_eq(m.opcode, SV_RDMAP_TERMINATE);
	cr_assert_eq(m.u.term.layer, SV_TERM_LAYER_DDP);
	cr_assert_eq(m.u.term.etype, SV_TERM_DDP_UNTAGGED);
	cr_assert_eq(m.u.term.ecode, SV_TERM_DDP_U_MSN_RANGE);
	cr_assert(m.u.term.has_ddp_hdr);
	cr_assert_eq(sv__get_be32(m.u.term.ddp_hdr + 10), 5, "the fifth request is named");
}
