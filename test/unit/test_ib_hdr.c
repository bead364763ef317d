/*
 * test_ib_hdr.c — InfiniBand transport headers (wire/ib_hdr.h) against byte vectors spelled
 * out by hand from doc/wire-roce.md sections 2-6: every header alone, the opcode table
 * row by row against an independent copy of section 4, whole packets, every truncation,
 * bad values, AETH syndromes and their tables, PSN arithmetic, path MTUs.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/ib_hdr.h"

/* ---- single headers ---- */

/* RC SEND_ONLY, SE, pad 2, P_Key ffff, FECN, QPN 0x123456, AckReq, PSN 0xfedcba. */
static const uint8_t v_bth[] = {
	0x04, 0xa0, 0xff, 0xff, 0x80, 0x12, 0x34, 0x56, 0x80, 0xfe, 0xdc, 0xba,
};
/* VA 0x00007f7e91000000, R_Key 0x01709a33, DMA length 128 (the doc/wire-roce.md section 9
 * RETH). */
static const uint8_t v_reth[] = {
	0x00, 0x00, 0x7f, 0x7e, 0x91, 0x00, 0x00, 0x00, 0x01, 0x70, 0x9a, 0x33,
	0x00, 0x00, 0x00, 0x80,
};
/* RNR NAK, timer code 14 (1.28 ms), MSN 0x000102. */
static const uint8_t v_aeth[] = { 0x2e, 0x00, 0x01, 0x02 };
/* VA 0x1000, R_Key 0x0201, swap 0x1111111111111111, compare 0x2222222222222222. */
static const uint8_t v_atomiceth[] = {
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, 0x01,
	0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
	0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
};
static const uint8_t v_atomicacketh[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08 };
static const uint8_t v_immdt[] = { 0xde, 0xad, 0xbe, 0xef };
static const uint8_t v_ieth[] = { 0x0b, 0xad, 0xca, 0xfe };
/* Q_Key 0x80010000, reserved, source QP 1. */
static const uint8_t v_deth[] = { 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01 };

Test(wire_ib_hdr, bth_vector)
{
	struct sv_bth h;
	uint8_t out[SV_BTH_LEN];

	cr_assert_eq(sv__bth_decode(&h, v_bth, sizeof(v_bth)), SV_BTH_LEN);
	cr_assert_eq(h.opcode, 0x04);
	cr_assert(h.se && !h.mig);
	cr_assert_eq(h.pad, 2);
	cr_assert_eq(h.tver, 0);
	cr_assert_eq(h.pkey, 0xffff);
	cr_assert(h.fecn && !h.becn);
	cr_assert_eq(h.dest_qp, 0x123456);
	cr_assert(h.ack_req);
	cr_assert_eq(h.psn, 0xfedcba);
	cr_assert_eq(sv__bth_encode(out, sizeof(out), &h), SV_BTH_LEN);
	cr_assert_arr_eq(out, v_bth, SV_BTH_LEN);
	cr_assert_eq(sv__bth_encode(out, SV_BTH_LEN - 1, &h), -ENOSPC);
	for (size_t n = 0; n < sizeof(v_bth); n++)
		cr_assert_eq(sv__bth_decode(&h, v_bth, n), -EBADMSG, "len %zu", n);
}

Test(wire_ib_hdr, bth_bad_tver_and_reserved_bits)
{
	uint8_t b[SV_BTH_LEN], out[SV_BTH_LEN];
	struct sv_bth h;

	for (int tver = 1; tver < 16; tver++) {
		memcpy(b, v_bth, sizeof(b));
		b[1] = (uint8_t)((b[1] & 0xf0) | tver);
		cr_assert_eq(sv__bth_decode(&h, b, sizeof(b)), -EPROTO, "tver %d", tver);
		cr_assert_eq(h.tver, tver);	/* still filled in, for the log */
	}
	/* Reserved bits (Resv6 in byte 4, Resv7 in byte 8) are ignored and sent as zero;
	 * out-of-range QPN/PSN/pad are masked on encode. */
	memcpy(b, v_bth, sizeof(b));
	b[4] |= 0x3f;
	b[8] |= 0x7f;
	cr_assert_eq(sv__bth_decode(&h, b, sizeof(b)), SV_BTH_LEN);
	cr_assert_eq(h.psn, 0xfedcba);
	cr_assert_eq(sv__bth_encode(out, sizeof(out), &h), SV_BTH_LEN);
	cr_assert_arr_eq(out, v_bth, SV_BTH_LEN);
	h.dest_qp |= 0xff000000;
	h.psn |= 0x7f000000;
	h.pad = 0xfe;
	cr_assert_eq(sv__bth_encode(out, sizeof(out), &h), SV_BTH_LEN);
	cr_assert_eq(sv__get_be24(out + 5), 0x123456);
	cr_assert_eq(sv__get_be24(out + 9), 0xfedcba);
	cr_assert_eq(out[1], 0xa0);
}

/* Each extended header: decode, values, re-encode, every truncation, short output. */
#define CHECK_HDR(vec, len, dec, enc)							\
	do {										\
		uint8_t o_[64];								\
		cr_assert_eq(dec, (int)(len));						\
		cr_assert_eq(enc(o_, sizeof(o_)), (int)(len));				\
		cr_assert_arr_eq(o_, vec, len);						\
		cr_assert_eq(enc(o_, (len) - 1), -ENOSPC);				\
	} while (0)

Test(wire_ib_hdr, ext_header_vectors)
{
	struct sv_reth reth;
	struct sv_aeth aeth;
	struct sv_atomiceth at;
	struct sv_deth deth;
	uint64_t orig;
	uint32_t imm, rkey;

#define RETH_ENC(o, c) sv__reth_encode(o, c, &reth)
	CHECK_HDR(v_reth, SV_RETH_LEN, sv__reth_decode(&reth, v_reth, sizeof(v_reth)), RETH_ENC);
	cr_assert_eq(reth.va, 0x00007f7e91000000ull);
	cr_assert_eq(reth.rkey, 0x01709a33);
	cr_assert_eq(reth.dma_len, 128);

#define AETH_ENC(o, c) sv__aeth_encode(o, c, &aeth)
	CHECK_HDR(v_aeth, SV_AETH_LEN, sv__aeth_decode(&aeth, v_aeth, sizeof(v_aeth)), AETH_ENC);
	cr_assert_eq(aeth.syndrome, 0x2e);
	cr_assert_eq(aeth.msn, 0x102);
	cr_assert_eq(sv__aeth_type(aeth.syndrome), SV_AETH_RNR_NAK);
	cr_assert_eq(sv__rnr_timer_us(sv__aeth_value(aeth.syndrome)), 1280);

#define AT_ENC(o, c) sv__atomiceth_encode(o, c, &at)
	CHECK_HDR(v_atomiceth, SV_ATOMICETH_LEN,
		  sv__atomiceth_decode(&at, v_atomiceth, sizeof(v_atomiceth)), AT_ENC);
	cr_assert_eq(at.va, 0x1000);
	cr_assert_eq(at.rkey, 0x0201);
	cr_assert_eq(at.swap_add, 0x1111111111111111ull);
	cr_assert_eq(at.compare, 0x2222222222222222ull);

#define ACK_ENC(o, c) sv__atomicacketh_encode(o, c, orig)
	CHECK_HDR(v_atomicacketh, SV_ATOMICACKETH_LEN,
		  sv__atomicacketh_decode(&orig, v_atomicacketh, sizeof(v_atomicacketh)), ACK_ENC);
	cr_assert_eq(orig, 0x0102030405060708ull);

	/* ImmDt stays in network order: its first wire byte is the first byte in memory. */
#define IMM_ENC(o, c) sv__immdt_encode(o, c, imm)
	CHECK_HDR(v_immdt, SV_IMMDT_LEN, sv__immdt_decode(&imm, v_immdt, sizeof(v_immdt)), IMM_ENC);
	cr_assert_eq(((const uint8_t *)&imm)[0], 0xde);
	cr_assert_eq(((const uint8_t *)&imm)[3], 0xef);

#define IETH_ENC(o, c) sv__ieth_encode(o, c, rkey)
	CHECK_HDR(v_ieth, SV_IETH_LEN, sv__ieth_decode(&rkey, v_ieth, sizeof(v_ieth)), IETH_ENC);
	cr_assert_eq(rkey, 0x0badcafe);

#define DETH_ENC(o, c) sv__deth_encode(o, c, &deth)
	CHECK_HDR(v_deth, SV_DETH_LEN, sv__deth_decode(&deth, v_deth, sizeof(v_deth)), DETH_ENC);
	cr_assert_eq(deth.qkey, SV_QP1_QKEY);
	cr_assert_eq(deth.src_qp, 1);
}

Test(wire_ib_hdr, ext_headers_reject_every_truncation)
{
	struct sv_reth reth;
	struct sv_aeth aeth;
	struct sv_atomiceth at;
	struct sv_deth deth;
	uint64_t orig;
	uint32_t v;

	for (size_t n = 0; n < SV_RETH_LEN; n++)
		cr_assert_eq(sv__reth_decode(&reth, v_reth, n), -EBADMSG);
	for (size_t n = 0; n < SV_AETH_LEN; n++)
		cr_assert_eq(sv__aeth_decode(&aeth, v_aeth, n), -EBADMSG);
	for (size_t n = 0; n < SV_ATOMICETH_LEN; n++)
		cr_assert_eq(sv__atomiceth_decode(&at, v_atomiceth, n), -EBADMSG);
	for (size_t n = 0; n < SV_ATOMICACKETH_LEN; n++)
		cr_assert_eq(sv__atomicacketh_decode(&orig, v_atomicacketh, n), -EBADMSG);
	for (size_t n = 0; n < SV_IMMDT_LEN; n++) {
		cr_assert_eq(sv__immdt_decode(&v, v_immdt, n), -EBADMSG);
		cr_assert_eq(sv__ieth_decode(&v, v_ieth, n), -EBADMSG);
	}
	for (size_t n = 0; n < SV_DETH_LEN; n++)
		cr_assert_eq(sv__deth_decode(&deth, v_deth, n), -EBADMSG);
}

Test(wire_ib_hdr, deth_reserved_byte_ignored)
{
	static const uint8_t b[] = { 0x11, 0x22, 0x33, 0x44, 0xff, 0x00, 0x00, 0x07 };
	struct sv_deth d;
	uint8_t o[SV_DETH_LEN];

	cr_assert_eq(sv__deth_decode(&d, b, sizeof(b)), SV_DETH_LEN);
	cr_assert_eq(d.src_qp, 7);
	cr_assert_eq(sv__deth_encode(o, sizeof(o), &d), SV_DETH_LEN);
	cr_assert_eq(o[4], 0);
}

/* ---- AETH syndromes ---- */

Test(wire_ib_hdr, aeth_syndromes)
{
	struct sv_aeth a;
	uint8_t b[SV_AETH_LEN] = { 0 };

	for (int s = 0; s < 256; s++) {
		/* doc/wire-roce.md section 5: ACK 0x00-0x1F, RNR 0x20-0x3F, NAK 0x60-0x64
		 * valid. */
		bool valid = s < 0x40 || (s >= 0x60 && s <= 0x64);

		b[0] = (uint8_t)s;
		cr_assert_eq(sv__aeth_syndrome_reserved((uint8_t)s), !valid, "0x%02x", s);
		cr_assert_eq(sv__aeth_decode(&a, b, sizeof(b)), valid ? SV_AETH_LEN : -EPROTO,
			     "0x%02x", s);
	}
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_ACK, SV_AETH_CREDIT_INVALID), 0x1f);
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_RNR_NAK, 0), 0x20);
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_NAK, SV_AETH_NAK_PSN_SEQ), 0x60);
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_NAK, SV_AETH_NAK_INV_REQ), 0x61);
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_NAK, SV_AETH_NAK_REM_ACCESS), 0x62);
	cr_assert_eq(sv__aeth_syndrome(SV_AETH_NAK, SV_AETH_NAK_REM_OP), 0x63);
	cr_assert_eq(sv__aeth_type(0x63), SV_AETH_NAK);
	cr_assert_eq(sv__aeth_value(0x63), 3);
	cr_assert_eq(sv__aeth_type(0x1f), SV_AETH_ACK);
	cr_assert_eq(sv__aeth_type(0x3f), SV_AETH_RNR_NAK);
}

Test(wire_ib_hdr, rnr_timer_table)
{
	/* doc/wire-roce.md section 5, in milliseconds x 100. */
	static const uint32_t ms100[32] = {
		65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
		256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288,
		16384, 24576, 32768, 49152,
	};

	for (uint8_t c = 0; c < 32; c++) {
		cr_assert_eq(sv__rnr_timer_us(c), ms100[c] * 10, "code %u", c);
		cr_assert_eq(sv__rnr_timer_code(ms100[c] * 10), c, "code %u", c);
	}
	/* Between two delays: the next longer one. */
	cr_assert_eq(sv__rnr_timer_code(0), 1);
	cr_assert_eq(sv__rnr_timer_code(11), 2);
	cr_assert_eq(sv__rnr_timer_code(1000), 14);
	cr_assert_eq(sv__rnr_timer_code(491521), 0);
	cr_assert_eq(sv__rnr_timer_code(10000000), 0);
}

Test(wire_ib_hdr, credit_table)
{
	static const int want[32] = {
		0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256,
		384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576,
		32768, -1,
	};

	for (uint8_t c = 0; c < 32; c++)
		cr_assert_eq(sv__aeth_credits(c), want[c], "code %u", c);
}

/* ---- PSNs, pad, MTU ---- */

Test(wire_ib_hdr, psn_arithmetic)
{
	cr_assert_eq(sv__psn_add(0xffffff, 1), 0);
	cr_assert_eq(sv__psn_add(0xfffffe, 5), 3);
	cr_assert_eq(sv__psn_add(5, 0), 5);
	cr_assert_lt(sv__psn_cmp(0xfffffe, 2), 0);	/* across the wrap: before */
	cr_assert_gt(sv__psn_cmp(2, 0xfffffe), 0);
	cr_assert_eq(sv__psn_cmp(0x123456, 0x123456), 0);
	cr_assert_lt(sv__psn_cmp(0, 0x7fffff), 0);
	cr_assert_gt(sv__psn_cmp(0x7fffff, 0), 0);
	cr_assert_eq(sv__psn_diff(2, 0xfffffe), 4);
	cr_assert_eq(sv__psn_diff(0x10, 0x08), 8);
	/* Only the low 24 bits matter. */
	cr_assert_eq(sv__psn_cmp(0xff000001, 1), 0);
}

Test(wire_ib_hdr, pad_and_mtu)
{
	cr_assert_eq(sv__ib_pad(0), 0);
	cr_assert_eq(sv__ib_pad(1), 3);
	cr_assert_eq(sv__ib_pad(2), 2);
	cr_assert_eq(sv__ib_pad(3), 1);
	cr_assert_eq(sv__ib_pad(4096), 0);
	cr_assert_eq(sv__ib_mtu_bytes(0), 0);
	cr_assert_eq(sv__ib_mtu_bytes(1), 256);
	cr_assert_eq(sv__ib_mtu_bytes(3), 1024);
	cr_assert_eq(sv__ib_mtu_bytes(5), 4096);
	cr_assert_eq(sv__ib_mtu_bytes(6), 0);
	cr_assert_eq(sv__ib_mtu_from_bytes(255), 0);
	cr_assert_eq(sv__ib_mtu_from_bytes(256), 1);
	cr_assert_eq(sv__ib_mtu_from_bytes(1500), 3);
	cr_assert_eq(sv__ib_mtu_from_bytes(4096), 5);
	cr_assert_eq(sv__ib_mtu_from_bytes(65536), 5);
}

/* ---- the opcode table ---- */

/* doc/wire-roce.md section 4, copied independently of wire/ib_hdr.c: opcode, extension
 * header bytes after BTH, payload class (F first/middle, L last, O only, - none),
 * receive. */
static const struct {
	uint8_t opcode;
	uint8_t ext_len;
	char payload;
	bool recv;
} spec[] = {
	{ 0x00, 0, 'F', true }, { 0x01, 0, 'F', false }, { 0x02, 0, 'L', false },
	{ 0x03, 4, 'L', false }, { 0x04, 0, 'O', true }, { 0x05, 4, 'O', true },
	{ 0x06, 16, 'F', false }, { 0x07, 0, 'F', false }, { 0x08, 0, 'L', false },
	{ 0x09, 4, 'L', true }, { 0x0a, 16, 'O', false }, { 0x0b, 20, 'O', true },
	{ 0x0c, 16, '-', false }, { 0x0d, 4, 'F', false }, { 0x0e, 0, 'F', false },
	{ 0x0f, 4, 'L', false }, { 0x10, 4, 'O', false }, { 0x11, 4, '-', false },
	{ 0x12, 12, '-', false }, { 0x13, 28, '-', false }, { 0x14, 28, '-', false },
	{ 0x16, 4, 'L', false }, { 0x17, 4, 'O', true },
	/* UC: 0x20 + the send and write operations. */
	{ 0x20, 0, 'F', true }, { 0x21, 0, 'F', false }, { 0x22, 0, 'L', false },
	{ 0x23, 4, 'L', false }, { 0x24, 0, 'O', true }, { 0x25, 4, 'O', true },
	{ 0x26, 16, 'F', false }, { 0x27, 0, 'F', false }, { 0x28, 0, 'L', false },
	{ 0x29, 4, 'L', true }, { 0x2a, 16, 'O', false }, { 0x2b, 20, 'O', true },
	/* UD: DETH, then ImmDt. */
	{ 0x64, 8, 'O', true }, { 0x65, 12, 'O', true },
};

Test(wire_ib_hdr, opcode_table_matches_spec)
{
	unsigned known = 0;

	for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
		const struct sv_ib_opinfo *oi = sv__ib_opinfo(spec[i].opcode);
		uint32_t pmtu = 1024;

		cr_assert_not_null(oi, "opcode 0x%02x", spec[i].opcode);
		cr_assert_eq(oi->hdr_len, SV_BTH_LEN + spec[i].ext_len, "%s", oi->name);
		cr_assert_eq(!!(oi->flags & SV_IB_OPF_RECV), spec[i].recv, "%s", oi->name);
		switch (spec[i].payload) {
		case 'F':
			cr_assert_eq(sv__ib_payload_check(oi, pmtu, pmtu), 0, "%s", oi->name);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu - 1, pmtu), -EMSGSIZE);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu + 1, pmtu), -EMSGSIZE);
			cr_assert_eq(sv__ib_payload_check(oi, 0, pmtu), -EMSGSIZE);
			break;
		case 'L':
			cr_assert_eq(sv__ib_payload_check(oi, 1, pmtu), 0, "%s", oi->name);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu, pmtu), 0);
			cr_assert_eq(sv__ib_payload_check(oi, 0, pmtu), -EMSGSIZE);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu + 1, pmtu), -EMSGSIZE);
			break;
		case 'O':
			cr_assert_eq(sv__ib_payload_check(oi, 0, pmtu), 0, "%s", oi->name);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu, pmtu), 0);
			cr_assert_eq(sv__ib_payload_check(oi, pmtu + 1, pmtu), -EMSGSIZE);
			break;
		default:
			cr_assert_eq(sv__ib_payload_check(oi, 0, pmtu), 0, "%s", oi->name);
			cr_assert_eq(sv__ib_payload_check(oi, 4, pmtu), -EMSGSIZE);
			break;
		}
	}
	for (unsigned op = 0; op < 256; op++)
		known += sv__ib_opinfo((uint8_t)op) != NULL;
	cr_assert_eq(known, sizeof(spec) / sizeof(spec[0]), "unexpected opcodes in the table");
	/* Not spoken: reserved 0x15, FLUSH/ATOMIC_WRITE, UC reads, RD, UD SEND_FIRST, CNP. */
	cr_assert_null(sv__ib_opinfo(0x15));
	cr_assert_null(sv__ib_opinfo(0x1c));
	cr_assert_null(sv__ib_opinfo(0x2c));
	cr_assert_null(sv__ib_opinfo(0x44));
	cr_assert_null(sv__ib_opinfo(0x60));
	cr_assert_null(sv__ib_opinfo(SV_IB_OPCODE_CNP));
	cr_assert_str_eq(sv__ib_opinfo(0x0b)->name, "RC RDMA_WRITE_ONLY_WITH_IMMEDIATE");
	cr_assert_str_eq(sv__ib_opinfo(0x65)->name, "UD SEND_ONLY_WITH_IMMEDIATE");
}

/* ---- whole packets ---- */

/* RC SEND_ONLY_WITH_IMMEDIATE, QPN 0x11, AckReq, PSN 0x000100, imm 0x01020304,
 * payload "abcde" (5 bytes), pad 3, ICRC (not checked by the decoder). */
static const uint8_t p_send_imm[] = {
	0x05, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x01, 0x00,
	0x01, 0x02, 0x03, 0x04,
	'a', 'b', 'c', 'd', 'e', 0x00, 0x00, 0x00,
	0xaa, 0xbb, 0xcc, 0xdd,
};
/* RC RDMA_WRITE_ONLY_WITH_IMMEDIATE, 4 bytes to VA 0x2000 R_Key 0x77, imm 0xcafef00d. */
static const uint8_t p_write_imm[] = {
	0x0b, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, 0x80, 0x00, 0x00, 0x07,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x77,
	0x00, 0x00, 0x00, 0x04,
	0xca, 0xfe, 0xf0, 0x0d,
	0x01, 0x02, 0x03, 0x04,
	0x11, 0x22, 0x33, 0x44,
};
/* RC ATOMIC_ACKNOWLEDGE: ACK (credits invalid), MSN 9, original value 0x42, PSN 0x10. */
static const uint8_t p_atomic_ack[] = {
	0x12, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00, 0x10,
	0x1f, 0x00, 0x00, 0x09,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42,
	0x01, 0x02, 0x03, 0x04,
};
/* UD SEND_ONLY_WITH_IMMEDIATE to QP 0x44, Q_Key 0x1234, from QP 0x55, imm 0x0a0b0c0d,
 * empty payload. */
static const uint8_t p_ud_imm[] = {
	0x65, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x44, 0x00, 0x00, 0x00, 0x01,
	0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00, 0x55,
	0x0a, 0x0b, 0x0c, 0x0d,
	0x01, 0x02, 0x03, 0x04,
};
/* RC SEND_ONLY_WITH_INVALIDATE of R_Key 0x00abcdef, 8 bytes. */
static const uint8_t p_send_inv[] = {
	0x17, 0x80, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x02,
	0x00, 0xab, 0xcd, 0xef,
	1, 2, 3, 4, 5, 6, 7, 8,
	0x01, 0x02, 0x03, 0x04,
};
/* RC COMPARE_SWAP at VA 0x1000 R_Key 0x0201 swap 0x11.. compare 0x22.. */
static const uint8_t p_cmp_swap[] = {
	0x13, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x03,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x02, 0x01,
	0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
	0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
	0x01, 0x02, 0x03, 0x04,
};
/* RC RDMA_READ_RESPONSE_MIDDLE (no AETH), 256 bytes of 0x5a. Built in the test. */

static void check_reencode(const uint8_t *p, size_t len, const struct sv_ib_pkt *pkt)
{
	uint8_t out[SV_IB_MAX_HDRS_LEN];

	cr_assert_eq(sv__ib_hdrs_encode(out, sizeof(out), pkt), pkt->hdr_len);
	cr_assert_arr_eq(out, p, pkt->hdr_len);
	cr_assert_eq(sv__ib_hdrs_encode(out, pkt->hdr_len - 1u, pkt), -ENOSPC);
	/* Every truncation fails: headers, payload+pad or ICRC cut short. */
	for (size_t n = 0; n < len; n++) {
		struct sv_ib_pkt t;
		int rc = sv__ib_pkt_decode(&t, p, n);

		/* A cut in the 4-byte words of payload can leave a shorter, valid packet
		 * only when pad 0 and a whole word went; our vectors would then lose part
		 * of their payload, which the decoder cannot see, so check the length. */
		if (rc >= 0)
			cr_assert_lt(t.payload_len, pkt->payload_len, "len %zu", n);
		else
			cr_assert(rc == -EBADMSG || rc == -EPROTO, "len %zu: %d", n, rc);
	}
}

Test(wire_ib_hdr, packet_send_imm)
{
	struct sv_ib_pkt pkt;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_imm, sizeof(p_send_imm)), 16);
	cr_assert_eq(pkt.hdrs, SV_IB_HDR_IMMDT);
	cr_assert_eq(pkt.bth.pad, 3);
	cr_assert_eq(pkt.bth.dest_qp, 0x11);
	cr_assert_eq(pkt.bth.psn, 0x100);
	cr_assert_eq(sv__get_be32((const uint8_t *)&pkt.imm_be), 0x01020304);
	cr_assert_eq(pkt.payload_len, 5);
	cr_assert_eq(pkt.payload, p_send_imm + 16);
	cr_assert_arr_eq(pkt.payload, "abcde", 5);
	check_reencode(p_send_imm, sizeof(p_send_imm), &pkt);
}

Test(wire_ib_hdr, packet_write_imm)
{
	struct sv_ib_pkt pkt;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_write_imm, sizeof(p_write_imm)), 32);
	cr_assert_eq(pkt.hdrs, SV_IB_HDR_RETH | SV_IB_HDR_IMMDT);
	cr_assert_eq(pkt.reth.va, 0x2000);
	cr_assert_eq(pkt.reth.rkey, 0x77);
	cr_assert_eq(pkt.reth.dma_len, 4);
	cr_assert_eq(sv__get_be32((const uint8_t *)&pkt.imm_be), 0xcafef00d);
	cr_assert_eq(pkt.payload_len, 4);
	cr_assert_eq(pkt.payload[0], 0x01);
	check_reencode(p_write_imm, sizeof(p_write_imm), &pkt);
}

Test(wire_ib_hdr, packet_atomic_ack)
{
	struct sv_ib_pkt pkt;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_atomic_ack, sizeof(p_atomic_ack)), 24);
	cr_assert_eq(pkt.hdrs, SV_IB_HDR_AETH | SV_IB_HDR_ATOMICACKETH);
	cr_assert_eq(pkt.aeth.syndrome, 0x1f);
	cr_assert_eq(pkt.aeth.msn, 9);
	cr_assert_eq(pkt.atomic_orig, 0x42);
	cr_assert_eq(pkt.payload_len, 0);
	check_reencode(p_atomic_ack, sizeof(p_atomic_ack), &pkt);
}

Test(wire_ib_hdr, packet_ud_imm)
{
	struct sv_ib_pkt pkt;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_ud_imm, sizeof(p_ud_imm)), 24);
	cr_assert_eq(pkt.hdrs, SV_IB_HDR_DETH | SV_IB_HDR_IMMDT);
	cr_assert_eq(pkt.deth.qkey, 0x1234);
	cr_assert_eq(pkt.deth.src_qp, 0x55);
	cr_assert_eq(sv__get_be32((const uint8_t *)&pkt.imm_be), 0x0a0b0c0d);
	cr_assert_eq(pkt.payload_len, 0);
	check_reencode(p_ud_imm, sizeof(p_ud_imm), &pkt);
}

Test(wire_ib_hdr, packet_send_inv_and_cmp_swap)
{
	struct sv_ib_pkt pkt;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_inv, sizeof(p_send_inv)), 16);
	cr_assert_eq(pkt.ieth_rkey, 0x00abcdef);
	cr_assert(pkt.bth.se);
	cr_assert_eq(pkt.payload_len, 8);
	check_reencode(p_send_inv, sizeof(p_send_inv), &pkt);

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_cmp_swap, sizeof(p_cmp_swap)), 40);
	cr_assert_eq(pkt.atomic.va, 0x1000);
	cr_assert_eq(pkt.atomic.rkey, 0x0201);
	cr_assert_eq(pkt.atomic.swap_add, 0x1111111111111111ull);
	cr_assert_eq(pkt.atomic.compare, 0x2222222222222222ull);
	check_reencode(p_cmp_swap, sizeof(p_cmp_swap), &pkt);
}

Test(wire_ib_hdr, packet_read_resp_middle_has_no_aeth)
{
	uint8_t p[SV_BTH_LEN + 256 + SV_ICRC_LEN] = { 0x0e, 0x00, 0xff, 0xff, 0, 0, 0, 0x11,
						       0, 0, 0, 0x05 };
	struct sv_ib_pkt pkt;

	memset(p + SV_BTH_LEN, 0x5a, 256);
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), SV_BTH_LEN);
	cr_assert_eq(pkt.hdrs, 0);
	cr_assert_eq(pkt.payload_len, 256);
	cr_assert_eq(sv__ib_payload_check(sv__ib_opinfo(0x0e), pkt.payload_len, 256), 0);
	cr_assert_eq(sv__ib_payload_check(sv__ib_opinfo(0x0e), pkt.payload_len, 512), -EMSGSIZE);
}

/* Every opcode: a packet laid out from the spec copy decodes with the right header length,
 * and re-encodes to the same header bytes. */
Test(wire_ib_hdr, every_opcode_roundtrip)
{
	for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
		uint8_t p[SV_IB_MAX_HDRS_LEN + 8 + SV_ICRC_LEN], out[SV_IB_MAX_HDRS_LEN];
		size_t hl = SV_BTH_LEN + spec[i].ext_len;
		struct sv_ib_pkt pkt;

		/* Headers of a recognisable pattern; AETH (when first after BTH) must carry a
		 * valid syndrome, and byte 1 holds pad 2 / TVer 0. */
		for (size_t k = 0; k < sizeof(p); k++)
			p[k] = (uint8_t)(k * 7 + 1);
		p[0] = spec[i].opcode;
		p[1] = 0x20;
		p[4] = 0;
		p[8] &= 0x80;
		if (sv__ib_opinfo(spec[i].opcode)->hdrs & SV_IB_HDR_AETH)
			p[SV_BTH_LEN] = 0x1f;
		if (sv__ib_opinfo(spec[i].opcode)->hdrs & SV_IB_HDR_DETH)
			p[SV_BTH_LEN + 4] = 0;
		cr_assert_eq(sv__ib_pkt_decode(&pkt, p, hl + 8 + SV_ICRC_LEN), (int)hl,
			     "opcode 0x%02x", spec[i].opcode);
		cr_assert_eq(pkt.payload_len, 6);
		cr_assert_eq(pkt.payload, p + hl);
		cr_assert_eq(sv__ib_hdrs_encode(out, sizeof(out), &pkt), (int)hl);
		cr_assert_arr_eq(out, p, hl, "opcode 0x%02x", spec[i].opcode);
		/* Short by one byte anywhere before the ICRC's end: the words no longer add up
		 * or the headers/ICRC do not fit. */
		for (size_t n = 0; n < hl + SV_ICRC_LEN; n++)
			cr_assert_eq(sv__ib_pkt_decode(&pkt, p, n), -EBADMSG, "0x%02x len %zu",
				     spec[i].opcode, n);
	}
}

Test(wire_ib_hdr, packet_bad_values)
{
	uint8_t p[sizeof(p_send_imm)];
	struct sv_ib_pkt pkt;

	/* Unknown opcodes. */
	static const uint8_t bad_ops[] = { 0x15, 0x18, 0x1c, 0x1f, 0x2c, 0x30, 0x40, 0x60,
					   0x66, 0x81, 0xff };
	for (size_t i = 0; i < sizeof(bad_ops); i++) {
		memcpy(p, p_send_imm, sizeof(p));
		p[0] = bad_ops[i];
		cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), -EPROTO, "0x%02x", bad_ops[i]);
	}
	/* TVer 1. */
	memcpy(p, p_send_imm, sizeof(p));
	p[1] |= 1;
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), -EPROTO);
	/* Payload + pad not a whole number of words. */
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_imm, sizeof(p_send_imm) - 1), -EPROTO);
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_imm, sizeof(p_send_imm) + 1), -EPROTO);
	/* Pad larger than what follows the headers: ACK with pad 3. */
	memcpy(p, p_atomic_ack, sizeof(p_atomic_ack));
	p[1] = 0x30;
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p_atomic_ack)), -EBADMSG);
	/* Reserved AETH syndrome. */
	memcpy(p, p_atomic_ack, sizeof(p_atomic_ack));
	p[SV_BTH_LEN] = 0x40;
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p_atomic_ack)), -EPROTO);
	/* Encoding an unknown opcode. */
	memset(&pkt, 0, sizeof(pkt));
	pkt.bth.opcode = 0x15;
	cr_assert_eq(sv__ib_hdrs_encode(p, sizeof(p), &pkt), -EPROTO);
}

/* ---- what a receiver checks after decoding ---- */

/* Selective repeat's NAK (doc/wire-roce.md section 12): RC ACKNOWLEDGE, P_Key ffff, QPN
 * 0x11, PSN 7 (the responder's expected PSN), AETH NAK PSN sequence error with MSN 3, then
 * the PSN that arrived out of order, 0x00000a, as 4 bytes of payload; ICRC. */
static const uint8_t p_sr_nak[] = {
	0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00, 0x07,
	0x60, 0x00, 0x00, 0x03,
	0x00, 0x00, 0x00, 0x0a,
	0x01, 0x02, 0x03, 0x04,
};

Test(wire_ib_hdr, packet_sr_nak)
{
	struct sv_ib_pkt pkt;
	uint8_t p[sizeof(p_sr_nak)];
	uint32_t trig = 0;

	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_sr_nak, sizeof(p_sr_nak)), 16);
	cr_assert_eq(pkt.flags, SV_IB_OPF_ONLY | SV_IB_OPF_RESP);
	cr_assert_eq(pkt.bth.psn, 7);
	cr_assert_eq(pkt.aeth.syndrome, 0x60);
	cr_assert_eq(pkt.payload_len, SV_IB_SR_NAK_LEN);
	cr_assert(sv__ib_sr_nak(&pkt, &trig));
	cr_assert_eq(trig, 0x0a);
	cr_assert(sv__ib_sr_nak(&pkt, NULL));
	/* Allowed whatever the MTU, though an ACK carries no data otherwise. */
	cr_assert_eq(sv__ib_payload_check(sv__ib_opinfo(0x11), 4, 256), -EMSGSIZE);
	for (uint32_t pmtu = 0; pmtu <= 4096; pmtu = pmtu ? pmtu * 2 : 256)
		cr_assert_eq(sv__ib_pkt_payload_check(&pkt, pmtu), 0, "pmtu %u", pmtu);
	check_reencode(p_sr_nak, sizeof(p_sr_nak), &pkt);

	/* The triggering PSN is 24 bits; the high byte is not part of it. */
	memcpy(p, p_sr_nak, sizeof(p));
	p[16] = 0xff;
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), 16);
	cr_assert(sv__ib_sr_nak(&pkt, &trig));
	cr_assert_eq(trig, 0x0a);
	/* Another NAK code, an ACK, an RNR NAK: not an SR NAK, and then no payload. */
	static const uint8_t others[] = { 0x61, 0x1f, 0x2e };
	for (size_t i = 0; i < sizeof(others); i++) {
		memcpy(p, p_sr_nak, sizeof(p));
		p[SV_BTH_LEN] = others[i];
		cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), 16);
		cr_assert_not(sv__ib_sr_nak(&pkt, &trig), "syndrome 0x%02x", others[i]);
		cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), -EMSGSIZE);
	}
	/* Other payload lengths: 0 is a plain NAK, 8 nothing we know. */
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_sr_nak, sizeof(p_sr_nak) - 4), 16);
	cr_assert_not(sv__ib_sr_nak(&pkt, &trig));
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), 0);
	memcpy(p, p_sr_nak, sizeof(p));
	cr_assert_not(sv__ib_sr_nak(&(struct sv_ib_pkt){ .bth.opcode = 0x11,
							   .aeth.syndrome = 0x60,
							   .payload = p, .payload_len = 8 }, &trig));
	/* The same bytes on a UC or UD opcode are no NAK. */
	p[0] = 0x31;
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), -EPROTO);
}

/* sv__ib_pkt_payload_check: pmtu 0 judges only opcodes without data; a real PMTU applies
 * sv__ib_payload_check to every opcode. */
Test(wire_ib_hdr, packet_payload_check)
{
	struct sv_ib_pkt pkt;
	uint8_t p[sizeof(p_cmp_swap) + 4];

	/* A COMPARE_SWAP carries no data: 4 stray bytes fail at any PMTU, 0 too. */
	memcpy(p, p_cmp_swap, sizeof(p_cmp_swap) - 4);
	memset(p + sizeof(p_cmp_swap) - 4, 0, 8);
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p, sizeof(p)), 40);
	cr_assert_eq(pkt.payload_len, 4);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), -EMSGSIZE);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 4096), -EMSGSIZE);
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_cmp_swap, sizeof(p_cmp_swap)), 40);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), 0);
	/* SEND_ONLY_WITH_INVALIDATE of 8 bytes: not judged without a PMTU; fits 256. */
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_inv, sizeof(p_send_inv)), 16);
	cr_assert_eq(pkt.flags, SV_IB_OPF_ONLY | SV_IB_OPF_PAYLOAD | SV_IB_OPF_RECV |
		     SV_IB_OPF_REQ | SV_IB_OPF_SEND | SV_IB_OPF_INV);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), 0);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 256), 0);
	/* A SEND_LAST_WITH_IMMEDIATE of 5 bytes on a 256-byte path: fine; a FIRST of 5 is
	 * not (exactly one PMTU), though pmtu 0 lets it through to the responder. */
	cr_assert_eq(sv__ib_pkt_decode(&pkt, p_send_imm, sizeof(p_send_imm)), 16);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 256), 0);
	pkt.bth.opcode = SV_IB_OP_SEND_FIRST;
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 256), -EMSGSIZE);
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), 0);
	pkt.bth.opcode = 0x15;
	cr_assert_eq(sv__ib_pkt_payload_check(&pkt, 0), -EMSGSIZE, "unknown opcode");
}

/* IBA 10.9.3 through doc/wire-roce.md section 2. */
Test(wire_ib_hdr, pkey_match)
{
	static const struct {
		uint16_t a, b;
		bool match;
	} v[] = {
		{ 0xffff, 0xffff, true },	/* the default key, full members */
		{ 0x7fff, 0xffff, true },	/* limited meets full */
		{ 0xffff, 0x7fff, true },
		{ 0x7fff, 0x7fff, false },	/* two limited members never talk */
		{ 0x8001, 0x8001, true },
		{ 0x8001, 0x0001, true },
		{ 0x8001, 0x8002, false },	/* different partitions */
		{ 0x8000, 0x8000, false },	/* low bits 0: the invalid P_Key */
		{ 0x0000, 0xffff, false },
		{ 0xffff, 0x0000, false },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		cr_assert_eq(sv__ib_pkey_match(v[i].a, v[i].b), v[i].match, "0x%04x 0x%04x",
			     v[i].a, v[i].b);
}
