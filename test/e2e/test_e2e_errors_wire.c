/*
 * test_e2e_errors_wire.c — a softverbs server facing a raw-socket iWARP client that
 * misbehaves: the Terminate bytes it sends back (RFC 5040 section 7, RFC 5041 section 7),
 * the QP state and async event on its side, and that it still serves a new connection
 * afterwards. test_e2e_errors.c has the error paths between two softverbs devices.
 */
#include <string.h>
#include <sys/socket.h>

#include <criterion/criterion.h>

#include "e2e_util.h"
#include "errors_util.h"
#include "fakepeer_util.h"

static void expect_term(const struct sv_rdmap_term *got, struct triple t, const char *what)
{
	cr_assert(got->layer == t.layer && got->etype == t.etype && got->ecode == t.ecode,
		  "%s: Terminate %u/%u/0x%02x (%s), expected %u/%u/0x%02x (%s)", what,
		  got->layer, got->etype, got->ecode,
		  sv__rdmap_term_str(got->layer, got->etype, got->ecode), t.layer, t.etype,
		  t.ecode, sv__rdmap_term_str(t.layer, t.etype, t.ecode));
}

/* ---------------------------------------------------------------------------------------
 * A softverbs server facing a raw-socket client.
 */

struct fake_client {
	struct e2e_side srv;
	struct sv_cm_id *lid;
	struct sockaddr_in addr;
	struct fp_conn c;
	uint8_t *rbuf;
	struct sv_mr *rmr;
};

/* The fake client connects with CRC and offers Write and Read RTRs; the server accepts,
 * and is ESTABLISHED once the RTR arrived. */
static void fake_client_connect(struct fake_client *f)
{
	struct sv_cm_event *ev;
	struct sv_conn_param sp;
	struct sv_mpa_rr rr;

	fp_connect(&f->c, &f->addr);
	fp_send_request(&f->c, true, true, SV_MPA_RTR_WRITE | SV_MPA_RTR_READ, 4, 4, NULL, 0);
	ev = e2e_cm_wait(f->srv.cm_ch, SV_CM_EVENT_CONNECT_REQUEST, E2E_WAIT_MS);
	f->srv.id = ev->id;
	cr_assert_eq(sv_cm_ack_event(ev), 0);
	memset(&sp, 0, sizeof(sp));
	sp.responder_resources = 4;
	sp.initiator_depth = 4;
	cr_assert_eq(sv_cm_accept(f->srv.id, f->srv.qp, &sp), 0);
	fp_recv_rr(&f->c, &rr, true, E2E_WAIT_MS);
	cr_assert_not(rr.reject, "server rejected the fake client");
	cr_assert(rr.crc, "the Reply must keep the CRC the request asked for");
	cr_assert(rr.enhanced && rr.p2p, "Reply to an RFC 6581 request is not enhanced");
	fp_send_rtr(&f->c, rr.rtr);
	ev = e2e_cm_wait(f->srv.cm_ch, SV_CM_EVENT_ESTABLISHED, E2E_WAIT_MS);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

/* Server with two 1 KiB receives (wr_ids 10, 11) in a 64 KiB buffer with every right,
 * connected to a fake client. */
static void fake_client_open(struct fake_client *f)
{
	struct e2e_pair_opts o;

	e2e_pair_opts_init(&o);
	e2e_side_open(&f->srv, 1, &o);
	e2e_side_create_qp(&f->srv, &o, E2E_ACCESS_ALL);
	f->rbuf = e2e_alloc(65536);
	f->rmr = e2e_reg(&f->srv, f->rbuf, 65536, E2E_ACCESS_ALL);
	e2e_post_recv(f->srv.qp, 10, f->rmr, f->rbuf, 1024);
	e2e_post_recv(f->srv.qp, 11, f->rmr, f->rbuf + 1024, 1024);
	f->lid = e2e_listen(&f->srv, &f->addr);
	fake_client_connect(f);
}

/*
 * The server survived: its old connection is torn down cleanly, and the same device and
 * listener accept a fresh fake client whose Send arrives intact.
 */
static void fake_client_server_still_serves(struct fake_client *f)
{
	struct e2e_pair_opts o;
	struct sv_async_event aev;
	uint8_t ulpdu[128];
	struct sv_wc wc;
	size_t n;

	fp_close(&f->c);
	cr_assert_eq(sv_cm_destroy_id(f->srv.id), 0);
	f->srv.id = NULL;
	while (e2e_poll(f->srv.recv_cq, &wc, 1, 50) == 1)
		;
	while (e2e_async_next(f->srv.ctx, &aev, 0))
		sv_ack_async_event(&aev);
	cr_assert_eq(sv_destroy_qp(f->srv.qp), 0);
	f->srv.qp = NULL;

	e2e_pair_opts_init(&o);
	e2e_side_create_qp(&f->srv, &o, E2E_ACCESS_ALL);
	memset(f->rbuf, 0, 2048);
	e2e_post_recv(f->srv.qp, 20, f->rmr, f->rbuf, 1024);
	e2e_post_recv(f->srv.qp, 21, f->rmr, f->rbuf + 1024, 1024);
	fake_client_connect(f);
	n = fp_send_msg(&f->c, ulpdu, sizeof(ulpdu), "alive", 5);
	fp_send_ulpdu(&f->c, ulpdu, n, false);
	e2e_poll_n(f->srv.recv_cq, &wc, 1, E2E_WAIT_MS);
	e2e_assert_wc(&wc, 20, SV_WC_SUCCESS, "Send on the second connection");
	cr_assert_eq(wc.byte_len, 5);
	cr_assert_arr_eq(f->rbuf, "alive", 5);
}

static void fake_client_close(struct fake_client *f)
{
	fp_close(&f->c);
	cr_assert_eq(sv_dereg_mr(f->rmr), 0);
	if (f->srv.id) {
		cr_assert_eq(sv_cm_destroy_id(f->srv.id), 0);
		f->srv.id = NULL;
	}
	cr_assert_eq(sv_cm_destroy_id(f->lid), 0);
	e2e_side_close(&f->srv);
	free(f->rbuf);
}

/* After the fake client's bad frame: a Terminate with triple t arrives (good CRC), the
 * connection closes, the server QP is in ERR with the async event, its receives are
 * done (none succeeded), and the server still serves a new connection. */
static void expect_server_terminates(struct fake_client *f, const struct triple *t,
				     unsigned type_mask, const char *what)
{
	struct sv_rdmap_term term;
	struct sv_wc wc[2];

	cr_assert(fp_wait_terminate(&f->c, &term, E2E_WAIT_MS), "%s: no Terminate", what);
	if (t)
		expect_term(&term, *t, what);
	cr_assert(fp_wait_eof(&f->c, E2E_WAIT_MS), "%s: connection not closed", what);
	expect_qp_error_event(&f->srv, type_mask, t, false, what);
	e2e_wait_qp_state(f->srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_poll_n(f->srv.recv_cq, wc, 2, E2E_WAIT_MS);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(wc[i].wr_id, 10 + (uint64_t)i);
		cr_assert_neq(wc[i].status, SV_WC_SUCCESS, "%s: receive %d succeeded", what, i);
	}
	cr_assert_eq(wc[1].status, SV_WC_WR_FLUSH_ERR, "%s: second receive", what);
	fake_client_server_still_serves(f);
}

/* Connects f and sends a Send of payload whose ULPDU byte at is changed to
 * (byte & ~mask) | v (mask 0: unchanged), with a corrupted CRC when bad_crc; the server
 * must answer as expect_server_terminates() says, with triple t. */
static void bad_send(struct fake_client *f, const char *payload, size_t at, uint8_t mask,
		     uint8_t v, bool bad_crc, const struct triple *t, const char *what)
{
	uint8_t ulpdu[128];
	size_t n;

	fake_client_open(f);
	n = fp_send_msg(&f->c, ulpdu, sizeof(ulpdu), payload, strlen(payload));
	ulpdu[at] = (uint8_t)((ulpdu[at] & ~mask) | v);
	fp_send_ulpdu(&f->c, ulpdu, n, bad_crc);
	expect_server_terminates(f, t, QP_ERR_EVENTS, what);
}

Test(e2e_errors, wire_bad_crc, .timeout = 40)
{
	struct fake_client f;

	bad_send(&f, "corrupted", 0, 0, 0, true, &T_LLP_CRC, "bad CRC");
	cr_assert_neq(memcmp(f.rbuf, "corrupted", 9), 0, "a frame with a bad CRC was placed");
	fake_client_close(&f);
}

/* A Send with one header field wrong, which the server must refuse with Terminate t. */
#define WIRE_BAD_SEND(name, payload, at, mask, v, t, what)                                 \
	Test(e2e_errors, name, .timeout = 40)                                              \
	{                                                                                  \
		struct fake_client f;                                                      \
                                                                                           \
		bad_send(&f, payload, at, mask, v, false, &t, what);                       \
		fake_client_close(&f);                                                     \
	}

WIRE_BAD_SEND(wire_bad_ddp_version_untagged, "v2", 0, SV_DDP_DV_MASK, 2, T_DDP_U_VERSION,
	      "bad DDP version")
WIRE_BAD_SEND(wire_unknown_opcode, "op12", 1, 0xff,
	      (SV_RDMAP_VERSION << SV_RDMAP_RV_SHIFT) | 0x0c, T_RDMAP_OPCODE, "unknown opcode")
WIRE_BAD_SEND(wire_bad_rdmap_version, "rv2", 1, 0xff, (2 << SV_RDMAP_RV_SHIFT) | SV_RDMAP_SEND,
	      T_RDMAP_VERSION, "bad RDMAP version")

Test(e2e_errors, wire_bad_ddp_version_tagged, .timeout = 40)
{
	struct fake_client f;
	struct sv_rdmap_msg m;
	uint8_t ulpdu[128];
	size_t n;

	fake_client_open(&f);
	memset(&m, 0, sizeof(m));
	m.ddp.tagged = true;
	m.ddp.last = true;
	m.ddp.stag = f.rmr->rkey;
	m.ddp.to = (uintptr_t)f.rbuf + 4096;
	m.opcode = SV_RDMAP_WRITE;
	n = fp_ulpdu(ulpdu, sizeof(ulpdu), &m, "tagged", 6);
	ulpdu[0] = (uint8_t)((ulpdu[0] & ~SV_DDP_DV_MASK) | 0);
	fp_send_ulpdu(&f.c, ulpdu, n, false);
	expect_server_terminates(&f, &T_DDP_T_VERSION, QP_ERR_EVENTS, "bad tagged DDP version");
	cr_assert_neq(memcmp(f.rbuf + 4096, "tagged", 6), 0, "bad-version Write was placed");
	fake_client_close(&f);
}

/* Bytes that are no FPDU at all: a small length field, then noise; the CRC cannot match. */
Test(e2e_errors, wire_garbage_after_mpa, .timeout = 40)
{
	struct fake_client f;
	uint8_t junk[64];

	fake_client_open(&f);
	e2e_fill(junk, sizeof(junk), 1234, 0);
	junk[0] = 0;
	junk[1] = 26;	/* a 32-byte "FPDU" whose trailer is noise */
	fp_send_all(&f.c, junk, sizeof(junk));
	expect_server_terminates(&f, &T_LLP_CRC, QP_ERR_EVENTS, "garbage");
	fake_client_close(&f);
}

/* A ULPDU too short to hold the DDP header it announces. */
Test(e2e_errors, wire_ulpdu_shorter_than_header, .timeout = 40)
{
	struct fake_client f;
	const uint8_t short_ulpdu[6] = { SV_DDP_FLAG_L | SV_DDP_VERSION,
				  (SV_RDMAP_VERSION << SV_RDMAP_RV_SHIFT) | SV_RDMAP_SEND, 0, 0,
				  0, 0 };

	fake_client_open(&f);
	fp_send_ulpdu(&f.c, short_ulpdu, sizeof(short_ulpdu), false);
	expect_server_terminates(&f, NULL, QP_ERR_EVENTS, "short ULPDU");
	fake_client_close(&f);
}

/* ULPDU_Length 0xffff, then only a header's worth of bytes and a half-close: the server
 * must not wait forever nor place anything; the connection and the QP end. */
Test(e2e_errors, wire_huge_ulpdu_length_then_eof, .timeout = 40)
{
	struct fake_client f;
	uint8_t ulpdu[128];
	struct sv_wc wc[2];
	size_t n;

	fake_client_open(&f);
	n = fp_send_msg(&f.c, ulpdu, sizeof(ulpdu), "huge", 4);
	ulpdu[n] = 0;
	{
		uint8_t hdr[2] = { 0xff, 0xff };

		fp_send_all(&f.c, hdr, 2);
		fp_send_all(&f.c, ulpdu, n);
	}
	shutdown(f.c.fd, SHUT_WR);
	cr_assert(fp_wait_eof(&f.c, E2E_WAIT_MS), "server kept the half-closed connection");
	expect_qp_error_event(&f.srv, QP_ERR_EVENTS, NULL, false, "truncated FPDU");
	e2e_wait_qp_state(f.srv.qp, SV_QPS_ERR, E2E_WAIT_MS);
	e2e_poll_n(f.srv.recv_cq, wc, 2, E2E_WAIT_MS);
	cr_assert_neq(wc[0].status, SV_WC_SUCCESS, "a truncated FPDU completed a receive");
	cr_assert_eq(wc[1].status, SV_WC_WR_FLUSH_ERR);
	fake_client_server_still_serves(&f);
	fake_client_close(&f);
}

/* A Send longer than the receive, from the raw peer: the Terminate on the wire is DDP
 * untagged "message too long" with the offending DDP header copied (D bit). */
Test(e2e_errors, wire_send_too_long_terminate_bytes, .timeout = 40)
{
	struct fake_client f;
	static uint8_t ulpdu[4096];
	static uint8_t payload[2000];
	struct sv_rdmap_term term;
	size_t n;

	fake_client_open(&f);
	e2e_fill(payload, sizeof(payload), 9, 0);
	n = fp_send_msg(&f.c, ulpdu, sizeof(ulpdu), payload, sizeof(payload));
	fp_send_ulpdu(&f.c, ulpdu, n, false);
	cr_assert(fp_wait_terminate(&f.c, &term, E2E_WAIT_MS), "no Terminate");
	expect_term(&term, T_DDP_TOO_LONG, "Send too long");
	cr_assert(term.has_ddp_hdr, "DDP error Terminate without the DDP header (D bit)");
	cr_assert_eq(term.ddp_hdr_len, SV_DDP_UNTAGGED_HDR_LEN);
	cr_assert_arr_eq(term.ddp_hdr + 2, ulpdu + 2, SV_DDP_UNTAGGED_HDR_LEN - 2,
			 "copied DDP header differs from the offending one");
	cr_assert(fp_wait_eof(&f.c, E2E_WAIT_MS), "connection not closed after Terminate");
	fake_client_close(&f);
}
