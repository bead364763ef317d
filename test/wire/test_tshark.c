/*
 * test_tshark.c — wire conformance: Wireshark's own iWARP dissectors must accept every
 * byte softverbs sends.
 *
 * dumpcap captures the loopback port of one session that uses every opcode (SEND, SEND
 * with SE, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM, RDMA READ small and large, both
 * atomics, Send with Invalidate and Send with SE and Invalidate of two type 2 memory
 * windows) and ends with a refused READ (a Terminate) and a disconnect. tshark then
 * decodes the capture and the test requires:
 *  - every TCP segment with payload decodes as MPA (iwarp_mpa), or is part of a PDU
 *    tshark reassembled into one;
 *  - the MPA Request and Reply are there, with the CRC flag;
 *  - every FPDU's CRC checks good (tshark's "Good CRC32"), none bad;
 *  - no malformed frame, no expert info of severity error;
 *  - the RDMAP opcodes seen cover Write, Read Request/Response, Send, Send with SE,
 *    Send with (SE and) Invalidate, Terminate, Atomic Request/Response;
 *  - the Invalidate STag tshark reads from each Send with Invalidate is the window's key.
 * The two heuristic sub-dissectors of DDP payloads (RPC-over-RDMA, SMB Direct) are
 * disabled: they would try to parse our test patterns as their own protocols.
 *
 * Skipped only when tshark/dumpcap are not installed. Capturing on lo needs root or
 * dumpcap's capabilities (CI runs as root).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "../tshark_ports.h"
#include "tcp_util.h"
#include "softverbs.h"

#define WAIT_MS 8000
#define MiB (1u << 20)
#define TSHARK_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ | \
		       SV_ACCESS_REMOTE_ATOMIC | SV_ACCESS_MW_BIND)

/* Posts a signaled WR on e from e->buf + off; peer (if any) names the remote buffer. */
static void post_key(struct tcp_end *e, uint64_t wr_id, enum sv_wr_opcode op, uint32_t off,
		     uint32_t len, unsigned flags, struct tcp_end *peer, uint64_t roff,
		     uint32_t rkey_xor)
{
	struct sv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = len,
			      .lkey = e->mr->lkey };
	struct sv_send_wr wr, *bad;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.send_flags = SV_SEND_SIGNALED | flags;
	wr.imm_data = htonl(0x1234);
	if (op == SV_WR_ATOMIC_CMP_AND_SWP || op == SV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.atomic.rkey = peer->mr->rkey ^ rkey_xor;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else if (peer) {
		wr.wr.rdma.remote_addr = (uintptr_t)peer->buf + roff;
		wr.wr.rdma.rkey = peer->mr->rkey ^ rkey_xor;
	}
	rc = sv_post_send(e->qp, &wr, &bad);
	cr_assert_eq(rc, 0, "sv_post_send(opcode %d): %s", op, sv_strerror(rc));
}

static void post(struct tcp_end *e, uint64_t wr_id, enum sv_wr_opcode op, uint32_t off,
		 uint32_t len, unsigned flags, struct tcp_end *peer, uint64_t roff)
{
	post_key(e, wr_id, op, off, len, flags, peer, roff, 0);
}

static void post_recv(struct tcp_end *e, uint64_t wr_id, uint32_t off)
{
	struct sv_sge sge = { .addr = (uintptr_t)e->buf + off, .length = 65536,
			      .lkey = e->mr->lkey };
	struct sv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	cr_assert_eq(sv_post_recv(e->qp, &wr, &bad), 0);
}

/* Polls n completions of cq; returns the status of the last. */
static enum sv_wc_status poll_n(struct tcp_end *e, int n)
{
	uint64_t deadline = cap_now_ms() + WAIT_MS;
	struct sv_wc wc;
	int got = 0;

	wc.status = SV_WC_GENERAL_ERR;
	while (got < n) {
		int rc = sv_poll_cq(e->cq, 1, &wc);

		cr_assert_geq(rc, 0);
		got += rc;
		cr_assert(rc > 0 || cap_now_ms() < deadline, "%d of %d completions", got, n);
		if (rc == 0)
			usleep(50);
	}
	return wc.status;
}

/* A type 2 window over [off, off+len) of e's buffer, bound on e's QP with key8. */
static struct sv_mw *bind_window(struct tcp_end *e, uint32_t off, uint32_t len, uint8_t key8)
{
	struct sv_send_wr wr, *bad;
	struct sv_mw *mw;

	cr_assert_eq(sv_alloc_mw(e->pd, SV_MW_TYPE_2, &mw), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 50 + key8;
	wr.opcode = SV_WR_BIND_MW;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.bind_mw.mw = mw;
	wr.wr.bind_mw.rkey = key8;
	wr.wr.bind_mw.bind_info.mr = e->mr;
	wr.wr.bind_mw.bind_info.addr = (uintptr_t)e->buf + off;
	wr.wr.bind_mw.bind_info.length = len;
	wr.wr.bind_mw.bind_info.mw_access_flags = SV_ACCESS_REMOTE_READ;
	cr_assert_eq(sv_post_send(e->qp, &wr, &bad), 0);
	return mw;
}

/* Connects client to a listener on 127.0.0.1:port, then runs every opcode. inv gets the
 * keys the two Sends with Invalidate name. */
static void run_session(uint16_t port, uint32_t inv[2])
{
	struct sv_mw *mw[2];
	struct sv_send_wr wr, *bad;
	struct sv_sge sge;
	struct tcp_end cli, srv;
	struct sv_cm_id *lid;
	struct sv_conn_param cp;

	tcp_end_open(&cli, 2 * MiB, 0, TSHARK_ACCESS, true);
	tcp_end_open(&srv, 2 * MiB, 0, TSHARK_ACCESS, true);
	for (int i = 0; i < 8; i++)
		post_recv(&srv, 100 + (uint64_t)i, (uint32_t)i * 65536);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "tshark";
	cp.private_data_len = 6;
	cp.responder_resources = 4;
	cp.initiator_depth = 4;
	lid = tcp_connect(&cli, &srv, port, &cp);

	for (uint32_t i = 0; i < 2 * MiB; i++)
		cli.buf[i] = (uint8_t)(i * 7 + 3);
	post(&cli, 1, SV_WR_SEND, 0, 1000, 0, NULL, 0);
	post(&cli, 2, SV_WR_SEND, 0, 5, SV_SEND_SOLICITED, NULL, 0);
	post(&cli, 3, SV_WR_SEND_WITH_IMM, 0, 33, 0, NULL, 0);
	post(&cli, 4, SV_WR_RDMA_WRITE, 0, 3, 0, &srv, MiB);
	post(&cli, 5, SV_WR_RDMA_WRITE, 0, 200000, 0, &srv, MiB);
	post(&cli, 6, SV_WR_RDMA_WRITE_WITH_IMM, 0, 4096, 0, &srv, MiB);
	post(&cli, 7, SV_WR_RDMA_READ, 8, 17, 0, &srv, MiB);
	post(&cli, 8, SV_WR_RDMA_READ, MiB, 300000, 0, &srv, MiB);
	post(&cli, 9, SV_WR_ATOMIC_FETCH_AND_ADD, 64, 8, 0, &srv, 2 * MiB - 64);
	post(&cli, 10, SV_WR_ATOMIC_CMP_AND_SWP, 72, 8, 0, &srv, 2 * MiB - 56);
	post(&cli, 11, SV_WR_SEND, 0, 60000, SV_SEND_FENCE, NULL, 0);
	cr_assert_eq(poll_n(&cli, 11), SV_WC_SUCCESS, "session WRs");
	cr_assert_eq(poll_n(&srv, 5), SV_WC_SUCCESS, "session receives");

	/* Memory windows on the server, invalidated by the client's Sends. */
	mw[0] = bind_window(&srv, 3 * 65536, 4096, 0xa1);
	mw[1] = bind_window(&srv, 4 * 65536, 4096, 0xa2);
	cr_assert_eq(poll_n(&srv, 2), SV_WC_SUCCESS, "binds");
	for (int i = 0; i < 2; i++) {
		inv[i] = mw[i]->rkey;
		sge = (struct sv_sge){ .addr = (uintptr_t)cli.buf, .length = 100 + i,
				       .lkey = cli.mr->lkey };
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 20 + (uint64_t)i;
		wr.opcode = SV_WR_SEND_WITH_INV;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = SV_SEND_SIGNALED | (i ? SV_SEND_SOLICITED : 0);
		wr.invalidate_rkey = inv[i];
		cr_assert_eq(sv_post_send(cli.qp, &wr, &bad), 0);
	}
	cr_assert_eq(poll_n(&cli, 2), SV_WC_SUCCESS, "Sends with Invalidate");
	cr_assert_eq(poll_n(&srv, 2), SV_WC_SUCCESS, "their receives");
	for (int i = 0; i < 2; i++)
		cr_assert_eq(sv_dealloc_mw(mw[i]), 0);
	/* a READ with a key that does not exist: the server answers with a Terminate */
	post_key(&cli, 12, SV_WR_RDMA_READ, 0, 64, 0, &srv, 0, 0x55);
	cr_assert_eq(poll_n(&cli, 1), SV_WC_REM_ACCESS_ERR, "READ with a bad key");

	tcp_end_close(&cli);
	cr_assert_eq(sv_cm_destroy_id(lid), 0);
	tcp_end_close(&srv);
}

/* ---------------------------------------------------------------------------------------
 * Capture and decode.
 */

Test(wire, tshark_decodes_every_frame, .timeout = 240)
{
	struct capture cap;
	char args[512], flt[64], filter[64];
	char *out, *line, *save = NULL;
	uint16_t port;
	unsigned long stream;
	bool seen[16] = { false };
	static const unsigned need[] = { 0x0, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0xa, 0xb };
	uint32_t inv[2];
	size_t fpdus, good, bad;
	const char *path = cap.path;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	port = cap_free_port(SOCK_STREAM);
	snprintf(filter, sizeof(filter), "tcp port %u", port);
	cap_start(&cap, filter);
	run_session(port, inv);
	cap_stop(&cap);

	/* 0. the session's connection: the one SYN to the listener's port */
	snprintf(args, sizeof(args),
		 "-r %s -Y 'tcp.flags.syn == 1 && tcp.flags.ack == 0 && tcp.dstport == %u' "
		 "-T fields -e tcp.stream",
		 path, port);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "\n"), 1, "expected one connection to port %u, got:\n%s", port,
		     out);
	stream = strtoul(out, NULL, 10);
	free(out);
	snprintf(flt, sizeof(flt), "tcp.stream == %lu", stream);

	/* 1. no malformed frames and no expert errors */
	cap_no_errors(path, "", "%s", flt);

	/* 2. every TCP payload is MPA (or a piece of an MPA PDU reassembled elsewhere); two
	 * passes (-2), because a segment in the middle of a PDU only learns where it was
	 * reassembled (tcp.reassembled_in) in the second pass */
	snprintf(args, sizeof(args),
		 "-2 -r %s -Y '%s && tcp.len > 0 && !iwarp_mpa && !tcp.reassembled_in' -T fields "
		 "-e frame.number -e tcp.len",
		 path, flt);
	out = cap_tshark(args);
	cr_assert_str_empty(out, "TCP payload not decoded as MPA (frame, length):\n%s", out);
	free(out);

	/* 3. the MPA exchange, with CRC */
	snprintf(args, sizeof(args),
		 "-r %s -Y '%s && (iwarp_mpa.key.req || iwarp_mpa.key.rep)' -T fields "
		 "-e iwarp_mpa.crc_flag -e iwarp_mpa.rej_flag",
		 path, flt);
	out = cap_tshark(args);
	cr_assert_eq(cap_count(out, "\n"), 2, "expected one MPA Request and one Reply:\n%s", out);
	cr_assert_eq(cap_count(out, "1\t0\n"), 2, "CRC flag / reject flag:\n%s", out);
	free(out);

	/* 4. CRC of every FPDU */
	snprintf(args, sizeof(args), "-r %s -Y '%s' -V", path, flt);
	out = cap_tshark(args);
	fpdus = cap_count(out, "ULPDU length:");
	good = cap_count(out, "(Good CRC32)");
	bad = cap_count(out, "(Bad CRC32");
	cr_assert_gt(fpdus, 20, "only %zu FPDUs decoded", fpdus);
	cr_assert_eq(bad, 0, "%zu FPDUs with a bad CRC", bad);
	cr_assert_eq(good, fpdus, "%zu FPDUs, %zu with a good CRC", fpdus, good);
	free(out);

	/* 5. the opcodes */
	snprintf(args, sizeof(args), "-r %s -Y '%s && iwarp_rdma' -T fields -e iwarp_rdma.opcode",
		 path, flt);
	out = cap_tshark(args);
	for (line = strtok_r(out, "\n,", &save); line; line = strtok_r(NULL, "\n,", &save)) {
		unsigned long op = strtoul(line, NULL, 0);

		cr_assert_lt(op, 16, "opcode field %s", line);
		seen[op] = true;
	}
	free(out);
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		cr_assert(seen[need[i]], "RDMAP opcode 0x%x never seen in the capture", need[i]);
	cr_assert(seen[0x8] || seen[0x9], "no RFC 7306 Immediate Data message for the *_WITH_IMM WRs");

	/* 6. RFC 5040 Send with Invalidate (0x4) and with SE (0x6): the STag is the key */
	snprintf(args, sizeof(args),
		 "-r %s -Y '%s && (iwarp_rdma.opcode == 4 || iwarp_rdma.opcode == 6)' -T fields "
		 "-e iwarp_rdma.opcode -e iwarp_rdma.inval_stag",
		 path, flt);
	out = cap_tshark(args);
	{
		char want[64];

		cr_assert_eq(cap_count(out, "\n"), 2, "two Sends with Invalidate:\n%s", out);
		snprintf(want, sizeof(want), "0x04\t%u\n", inv[0]);
		cr_assert_eq(cap_count(out, want), 1, "want %s in:\n%s", want, out);
		snprintf(want, sizeof(want), "0x06\t%u\n", inv[1]);
		cr_assert_eq(cap_count(out, want), 1, "want %s in:\n%s", want, out);
	}
	free(out);

	cap_cleanup(&cap);
}

/* The port pickers lean on the table of ports tshark gives away (test/tshark_ports.h): an
 * empty one, from a tshark whose output no longer parses, would let a session land on
 * such a port again and decode with no MPA. */
Test(wire, tshark_port_table_is_read)
{
	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	cr_assert(tshark_port_owned(SOCK_STREAM, 24800), "24800 is Synergy's in tshark");
	cr_assert(tshark_port_owned(SOCK_DGRAM, 4791), "4791 is RoCEv2's in tshark");
	cr_assert_not(tshark_port_owned(SOCK_STREAM, 24801), "24801 is nobody's");
	for (int i = 0; i < 100; i++)
		cr_assert_not(tshark_port_owned(SOCK_STREAM, cap_free_port(SOCK_STREAM)));
}
