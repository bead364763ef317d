/*
 * test_siw_capture.c — decode frames the Linux kernel's siw really sent.
 *
 * Provenance: /work/shared/captures/siw-rping-mpa-v1.pcap, which is uiwarp.pcap from the
 * public SoftUiWarp repository (kazikame/SoftUiWarp): a userspace iWARP client talking to
 * the Linux kernel's siw driver running the rping server. The bytes below are the TCP
 * payloads of frame 6 (siw's MPA Reply) and frame 10 (siw's RDMA Read Request FPDU), as
 * printed by `tshark -r siw-rping-mpa-v1.pcap -x`. MPA revision 1 without CRC was
 * negotiated, so the FPDU's CRC field is zero.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "wire/byteorder.h"
#include "wire/mpa.h"
#include "wire/rdmap.h"

/* Frame 6: MPA Reply, no flags, revision 1, no private data. */
static const uint8_t siw_reply[] = {
	0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x70, 0x20, 0x46, 0x72, 0x61,
	0x6d, 0x65, 0x00, 0x01, 0x00, 0x00,
};

/* Frame 10: one FPDU carrying an RDMA Read Request. */
static const uint8_t siw_read_req_fpdu[] = {
	0x00, 0x2e,				/* ULPDU_Length 46 */
	0x41, 0x41, 0x00, 0x00, 0x00, 0x00,	/* DDP L DV1 | RDMAP Read Request */
	0x00, 0x00, 0x00, 0x01,			/* QN 1 */
	0x00, 0x00, 0x00, 0x01,			/* MSN 1 */
	0x00, 0x00, 0x00, 0x00,			/* MO 0 */
	0x40, 0xcc, 0x43, 0x00,			/* sink STag */
	0x00, 0x00, 0x56, 0x36, 0x16, 0xbb, 0xc6, 0x70,	/* sink TO */
	0x00, 0x00, 0x00, 0x40,			/* 64 bytes */
	0xff, 0xff, 0xe0, 0x80,			/* source STag */
	0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xe0, 0x80,	/* source TO */
	0x00, 0x00, 0x00, 0x00,			/* CRC field, unused (no CRC negotiated) */
};

Test(siw_capture, mpa_reply)
{
	struct sv_mpa_rr rr;
	uint8_t out[SV_MPA_RR_HDR_LEN];

	cr_assert_eq(sv__mpa_rr_decode(&rr, siw_reply, sizeof(siw_reply), true), 20);
	cr_assert(rr.reply);
	cr_assert(!rr.markers);
	cr_assert(!rr.crc);
	cr_assert(!rr.reject);
	cr_assert(!rr.enhanced);
	cr_assert_eq(rr.rev, 1);
	cr_assert_eq(rr.pd_len, 0);
	cr_assert_eq(sv__mpa_rr_decode(&rr, siw_reply, sizeof(siw_reply), false), -EPROTO);
	/* Our encoder produces the same bytes siw sent. */
	cr_assert_eq(sv__mpa_rr_decode(&rr, siw_reply, sizeof(siw_reply), true), 20);
	cr_assert_eq(sv__mpa_rr_encode(out, sizeof(out), &rr), 20);
	cr_assert_arr_eq(out, siw_reply, sizeof(siw_reply));
}

Test(siw_capture, read_request_fpdu)
{
	const uint8_t *f = siw_read_req_fpdu;
	uint16_t ulpdu = sv__get_be16(f);
	struct sv_rdmap_msg m;
	uint8_t out[SV_RDMAP_MAX_HDR_LEN];

	cr_assert_eq(ulpdu, 46);
	cr_assert_eq(sv__mpa_fpdu_len(ulpdu), sizeof(siw_read_req_fpdu));
	cr_assert_eq(sv__rdmap_hdr_len(f[2], f[3]), 46);
	cr_assert_eq(sv__rdmap_decode(&m, f + 2, ulpdu), 46);
	cr_assert_eq(m.opcode, SV_RDMAP_READ_REQ);
	cr_assert_eq(m.rv, 1);
	cr_assert(!m.ddp.tagged);
	cr_assert(m.ddp.last);
	cr_assert_eq(m.ddp.dv, 1);
	cr_assert_eq(m.ddp.ulp_word, 0);
	cr_assert_eq(m.ddp.qn, SV_DDP_QN_READ_REQ);
	cr_assert_eq(m.ddp.msn, 1);
	cr_assert_eq(m.ddp.mo, 0);
	cr_assert_eq(m.u.read_req.sink_stag, 0x40cc4300u);
	cr_assert_eq(m.u.read_req.sink_to, 0x0000563616bbc670ull);
	cr_assert_eq(m.u.read_req.size, 64);
	cr_assert_eq(m.u.read_req.src_stag, 0xffffe080u);
	cr_assert_eq(m.u.read_req.src_to, 0x00007fffffffe080ull);
	cr_assert_eq(sv__get_le32(f + 2 + ulpdu + sv__mpa_pad(ulpdu)), 0);
	cr_assert_eq(sv__rdmap_encode(out, sizeof(out), &m), 46);
	cr_assert_arr_eq(out, f + 2, 46);
}
