/*
 * test_tls_wire.c — what a TLS session on the TCP transport shows on the wire
 * (doc/security.md "TLS"). dumpcap captures two sessions on lo, each moving the same
 * ASCII probe pattern by RDMA WRITE, SEND and READ: one in plaintext, one under SV_TLS
 * with the throwaway pair. The test requires that
 *  - in the plaintext session the probe appears in the captured bytes and tshark decodes
 *    MPA FPDUs (so the search and the decode can see what they look for);
 *  - in the TLS session tshark sees a TLS 1.3 handshake (a ClientHello offering 0x0304,
 *    a ServerHello choosing it) and application_data records, decodes not one MPA,
 *    DDP or RDMAP frame, and every TCP payload is part of a TLS record;
 *  - the probe appears nowhere in the TLS session's bytes, nor do the first bytes of the
 *    MPA Request key ("MPA ID Req Frame", RFC 5044 section 7.1).
 *
 * Skipped only when tshark/dumpcap are not installed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "tcp_util.h"
#include "softverbs.h"

#define WAIT_MS 8000
#define LEN (64 * 1024)
#define ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ)

static const char probe[] = "softverbs-tls-plaintext-probe-01";	/* 32 bytes */

static void fill_probe(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)probe[i % (sizeof(probe) - 1)];
}

static void poll_ok(struct tcp_end *e, int n)
{
	uint64_t deadline = cap_now_ms() + WAIT_MS;
	struct sv_wc wc;
	int got = 0;

	while (got < n) {
		int rc = sv_poll_cq(e->cq, 1, &wc);

		cr_assert_geq(rc, 0);
		if (rc == 1)
			cr_assert_eq(wc.status, SV_WC_SUCCESS, "wr %llu: %s",
				     (unsigned long long)wc.wr_id, sv_wc_status_str(wc.status));
		got += rc;
		cr_assert(rc > 0 || cap_now_ms() < deadline, "%d of %d completions", got, n);
		if (rc == 0)
			usleep(50);
	}
}

static void post(struct tcp_end *e, uint64_t id, enum sv_wr_opcode op, uint32_t off,
		 uint32_t len, const struct tcp_end *peer, uint32_t roff)
{
	struct sv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len,
			      .lkey = e->mr->lkey };
	struct sv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = SV_SEND_SIGNALED;
	if (peer) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.rdma.rkey = peer->mr->rkey;
	}
	cr_assert_eq(sv_post_send(e->qp, &wr, &bad), 0);
}

/* WRITE, SEND and READ of the probe between two devices with options d, over port. The
 * client's buffer [0, LEN) and the server's [LEN, 2 LEN) hold the probe; each lands in
 * the other's zeroed half and is checked there. */
static void session(const struct sv_device_opts *d, uint16_t port)
{
	struct tcp_end cli, srv;
	struct sv_conn_param cp = { .responder_resources = 4, .initiator_depth = 4 };
	struct sv_recv_wr rwr, *rbad;
	struct sv_sge rsge;
	struct sv_cm_id *lid;

	tcp_end_open_dev(&cli, d, 2 * LEN, 0, ACCESS, true);
	tcp_end_open_dev(&srv, d, 2 * LEN, 0, ACCESS, true);
	fill_probe(cli.buf, LEN);
	fill_probe(srv.buf + LEN, LEN);
	rsge = (struct sv_sge){ .addr = (uintptr_t)srv.buf + LEN / 2, .length = 4096,
				.lkey = srv.mr->lkey };
	rwr = (struct sv_recv_wr){ .wr_id = 9, .sg_list = &rsge, .num_sge = 1 };
	cr_assert_eq(sv_post_recv(srv.qp, &rwr, &rbad), 0);
	lid = tcp_connect(&cli, &srv, port, &cp);

	post(&cli, 1, SV_WR_RDMA_WRITE, 0, LEN / 2, &srv, 0);
	post(&cli, 2, SV_WR_SEND, 0, 4096, NULL, 0);
	post(&cli, 3, SV_WR_RDMA_READ, LEN, LEN, &srv, LEN);
	poll_ok(&cli, 3);
	poll_ok(&srv, 1);
	cr_assert_eq(memcmp(srv.buf, cli.buf, LEN / 2), 0, "the WRITE's bytes");
	cr_assert_eq(memcmp(srv.buf + LEN / 2, cli.buf, 4096), 0, "the SEND's bytes");
	cr_assert_eq(memcmp(cli.buf + LEN, srv.buf + LEN, LEN), 0, "the READ's bytes");

	cr_assert_eq(sv_cm_disconnect(cli.id), 0);
	sv_cm_ack_event(tcp_cm_wait(&cli, SV_CM_EVENT_DISCONNECTED));
	sv_cm_ack_event(tcp_cm_wait(&srv, SV_CM_EVENT_DISCONNECTED));
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	tcp_end_close(&cli);
	tcp_end_close(&srv);
}

/* The captured bytes of the whole file (headers included: a search over all of it
 * finds the probe wherever a segment carried it). */
static size_t file_count(const char *path, const char *needle, size_t nlen)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 20, len = 0, n, hits = 0;
	uint8_t *buf = malloc(cap);

	cr_assert_not_null(f);
	cr_assert_not_null(buf);
	while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			buf = realloc(buf, cap *= 2);
			cr_assert_not_null(buf);
		}
	}
	fclose(f);
	for (size_t i = 0; i + nlen <= len; i++)
		hits += memcmp(buf + i, needle, nlen) == 0;
	free(buf);
	return hits;
}

static void capture_session(struct capture *cap, const struct sv_device_opts *d,
			    uint16_t *port)
{
	char filter[64];

	*port = cap_free_port(SOCK_STREAM);
	snprintf(filter, sizeof(filter), "tcp port %u", *port);
	cap_start(cap, filter);
	session(d, *port);
	cap_stop(cap);
}

Test(wire, tls_session_shows_tls_records_and_no_plaintext, .timeout = 240)
{
	struct sv_device_opts d;
	struct capture plain, tls;
	char args[512], err[256] = "";
	char *out;
	uint16_t pport, tport;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	sv_device_opts_init(&d);
	d.transport = SV_TRANSPORT_TCP;
	d.crc = 1;
	d.tls = 0;
	capture_session(&plain, &d, &pport);
	cr_assert_eq(sv_tls_throwaway(&d, err, sizeof(err)), 0, "%s", err);
	d.crc = 0;
	capture_session(&tls, &d, &tport);

	/* The control: plaintext shows the probe and MPA. */
	cr_assert_gt(file_count(plain.path, probe, sizeof(probe) - 1), 0,
		     "the probe is not in the plaintext capture: the search sees nothing");
	snprintf(args, sizeof(args), "-r %s -Y 'iwarp_mpa' -T fields -e frame.number",
		 plain.path);
	out = cap_tshark(args);
	cr_assert_gt(cap_count(out, "\n"), 3, "tshark decodes no MPA in plaintext:\n%s", out);
	free(out);

	/* TLS 1.3: a ClientHello offering it and a ServerHello choosing it. */
	snprintf(args, sizeof(args),
		 "-r %s -d tcp.port==%u,tls -Y 'tls.handshake.type == 1 && "
		 "tls.handshake.extensions.supported_version == 0x0304' -T fields -e frame.number",
		 tls.path, tport);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "\n"), 1, "one ClientHello offering TLS 1.3:\n%s", out);
	free(out);
	snprintf(args, sizeof(args),
		 "-r %s -d tcp.port==%u,tls -Y 'tls.handshake.type == 2 && "
		 "tls.handshake.extensions.supported_version == 0x0304' -T fields -e frame.number",
		 tls.path, tport);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "\n"), 1, "one ServerHello choosing TLS 1.3:\n%s", out);
	free(out);
	/* The data: application_data records (RFC 8446 section 5.2: the outer type of every
	 * protected record, tshark's opaque_type), at least what the session moved. Each
	 * frame's fields list its records' lengths, whatever their type: the filter keeps
	 * frames with protected records only, and the handshake's plaintext records are a
	 * few hundred bytes. */
	snprintf(args, sizeof(args),
		 "-r %s -d tcp.port==%u,tls -Y 'tls.record.opaque_type == 23 && "
		 "!tls.record.content_type' -T fields -e tls.record.length",
		 tls.path, tport);
	out = cap_tshark(args);
	{
		size_t total = 0;
		char *save = NULL;

		for (char *l = strtok_r(out, "\n,", &save); l; l = strtok_r(NULL, "\n,", &save))
			total += strtoul(l, NULL, 10);
		cr_assert_gt(total, (size_t)LEN + LEN / 2, "application_data bytes %zu", total);
	}
	free(out);
	/* No iWARP frame, and no TCP payload outside a TLS record. */
	snprintf(args, sizeof(args),
		 "-r %s -d tcp.port==%u,tls -Y 'iwarp_mpa || iwarp_ddp || iwarp_rdma' "
		 "-T fields -e frame.number",
		 tls.path, tport);
	out = cap_tshark(args);
	cr_assert_str_empty(out, "iWARP frames in the TLS session:\n%s", out);
	free(out);
	snprintf(args, sizeof(args),
		 "-2 -r %s -d tcp.port==%u,tls -Y 'tcp.len > 0 && !tls && !tcp.reassembled_in' "
		 "-T fields -e frame.number -e tcp.len",
		 tls.path, tport);
	out = cap_tshark(args);
	cr_assert_str_empty(out, "TCP payload outside TLS records:\n%s", out);
	free(out);
	snprintf(args, sizeof(args), "-d tcp.port==%u,tls", tport);
	cap_no_errors(tls.path, args, "tcp.port == %u", tport);

	/* Nothing of the plaintext. */
	cr_assert_eq(file_count(tls.path, probe, sizeof(probe) - 1), 0,
		     "the probe is in the TLS capture");
	cr_assert_eq(file_count(tls.path, "MPA ID Req", 10), 0,
		     "the MPA Request key is in the TLS capture");

	cap_cleanup(&plain);
	cap_cleanup(&tls);
}
