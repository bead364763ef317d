/*
 * test_ib_cm.c — IB CM MADs (wire/ib_cm.h) against MADs laid out by hand at the byte and bit
 * offsets of IBA vol. 1 tables 106-113 and 119-120 (as the kernel's
 * include/rdma/ibta_vol1_c12.h lists them): every message decodes to the values placed, re-encodes to the same bytes, fails on
 * every truncation, and bad MAD headers or attributes are -EPROTO.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "softverbs.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"

static uint8_t mad[SV_MAD_LEN];
static uint8_t *const cm = mad + SV_MAD_HDR_LEN;	/* CM message: table offsets */

static const uint8_t gid_l[16] = { [10] = 0xff, [11] = 0xff, 192, 168, 1, 10 };
static const uint8_t gid_r[16] = { 0xfe, 0x80, [14] = 0x12, [15] = 0x34 };

/* IBA 13.4.2 header: base version 1, class 0x07, class version 2, method Send, status 0,
 * class specific 0, TID 0x0102030405060708, attribute attr, attribute modifier 0. */
static void lay_header(uint16_t attr)
{
	memset(mad, 0, sizeof(mad));
	mad[0] = 0x01;
	mad[1] = 0x07;
	mad[2] = 0x02;
	mad[3] = 0x03;
	for (int i = 0; i < 8; i++)
		mad[8 + i] = (uint8_t)(i + 1);
	mad[16] = (uint8_t)(attr >> 8);
	mad[17] = (uint8_t)attr;
}

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i);
}

/* Decodes mad, checks the header, re-encodes and compares, checks truncations. */
static void roundtrip(struct sv_cm_msg *m, uint16_t attr)
{
	uint8_t out[SV_MAD_LEN + 8];
	struct sv_cm_msg t;

	cr_assert_eq(sv__cm_decode(m, mad, sizeof(mad)), SV_MAD_LEN);
	cr_assert_eq(m->mad.base_version, 1);
	cr_assert_eq(m->mad.mgmt_class, SV_MAD_CLASS_CM);
	cr_assert_eq(m->mad.class_version, 2);
	cr_assert_eq(m->mad.method, SV_MAD_METHOD_SEND);
	cr_assert_eq(m->mad.tid, 0x0102030405060708ull);
	cr_assert_eq(m->mad.attr_id, attr);
	memset(out, 0xee, sizeof(out));
	cr_assert_eq(sv__cm_encode(out, sizeof(out), m), SV_MAD_LEN);
	cr_assert_arr_eq(out, mad, SV_MAD_LEN, "%s", sv__cm_attr_name(attr));
	cr_assert_eq(out[SV_MAD_LEN], 0xee);		/* nothing past the MAD */
	cr_assert_eq(sv__cm_encode(out, SV_MAD_LEN - 1, m), -ENOSPC);
	for (size_t n = 0; n < SV_MAD_LEN; n++)
		cr_assert_eq(sv__cm_decode(&t, mad, n), -EBADMSG, "len %zu", n);
}

Test(wire_ib_cm, req)
{
	struct sv_cm_msg m;
	const struct sv_cm_req *r = &m.req;

	lay_header(0x0010);
	sv__put_be32(cm + 0, 0xc0de0001);		/* local comm ID */
	sv__put_be64(cm + 8, 0x0000000001064853ull);	/* service ID: RDMA CM TCP port 18515 */
	sv__put_be64(cm + 16, 0x0002c90300a1b2c3ull);	/* local CA GUID */
	sv__put_be32(cm + 28, 0x00000000);		/* local Q_Key */
	cm[32] = 0x00, cm[33] = 0x00, cm[34] = 0x12;	/* local QPN */
	cm[35] = 4;					/* responder resources */
	cm[39] = 2;					/* initiator depth */
	cm[43] = 20 << 3 | 1 << 1 | 1;			/* remote CM timeout, UC, EEFC */
	cm[44] = 0xab, cm[45] = 0xcd, cm[46] = 0xef;	/* starting PSN */
	cm[47] = 21 << 3 | 6;				/* local CM timeout, retry count */
	cm[48] = 0xff, cm[49] = 0xff;			/* P_Key */
	cm[50] = 3 << 4 | 7;				/* MTU 1024, RNR retry 7 */
	cm[51] = 15 << 4 | 0x08;			/* max CM retries, SRQ */
	cm[52] = 0xff, cm[53] = 0xff, cm[54] = 0xff, cm[55] = 0xff;	/* LIDs */
	memcpy(cm + 56, gid_l, 16);
	memcpy(cm + 72, gid_r, 16);
	cm[88] = 0x12, cm[89] = 0x34, cm[90] = 0x50;	/* flow label 0x12345 */
	cm[91] = 0x03;					/* packet rate */
	cm[92] = 0x10;					/* traffic class */
	cm[93] = 64;					/* hop limit */
	cm[94] = 5 << 4 | 0x08;				/* SL 5, subnet local */
	cm[95] = 14 << 3;				/* local ACK timeout */
	cm[96] = 0x00, cm[97] = 0x07;			/* alternate local LID */
	cm[139] = 9 << 3;				/* alternate ACK timeout */
	pattern(cm + 140, SV_CM_REQ_PRIVATE_LEN, 0x40);
	roundtrip(&m, SV_CM_ATTR_REQ);

	cr_assert_eq(r->local_comm_id, 0xc0de0001);
	cr_assert_eq(r->service_id, sv__cm_service_id(18515));
	cr_assert_eq(r->local_ca_guid, 0x0002c90300a1b2c3ull);
	cr_assert_eq(r->local_qpn, 0x12);
	cr_assert_eq(r->responder_resources, 4);
	cr_assert_eq(r->initiator_depth, 2);
	cr_assert_eq(r->remote_cm_response_timeout, 20);
	cr_assert_eq(r->transport, SV_CM_TRANSPORT_UC);
	cr_assert(r->e2e_flow_control);
	cr_assert_eq(r->starting_psn, 0xabcdef);
	cr_assert_eq(r->local_cm_response_timeout, 21);
	cr_assert_eq(r->retry_count, 6);
	cr_assert_eq(r->pkey, 0xffff);
	cr_assert_eq(r->path_mtu, 3);
	cr_assert(!r->rdc_exists);
	cr_assert_eq(r->rnr_retry_count, 7);
	cr_assert_eq(r->max_cm_retries, 15);
	cr_assert(r->srq);
	cr_assert_eq(r->ext_transport, 0);
	cr_assert_eq(r->primary.local_lid, 0xffff);
	cr_assert_eq(r->primary.remote_lid, 0xffff);
	cr_assert_arr_eq(r->primary.local_gid, gid_l, 16);
	cr_assert_arr_eq(r->primary.remote_gid, gid_r, 16);
	cr_assert_eq(r->primary.flow_label, 0x12345);
	cr_assert_eq(r->primary.packet_rate, 3);
	cr_assert_eq(r->primary.traffic_class, 0x10);
	cr_assert_eq(r->primary.hop_limit, 64);
	cr_assert_eq(r->primary.sl, 5);
	cr_assert(r->primary.subnet_local);
	cr_assert_eq(r->primary.local_ack_timeout, 14);
	cr_assert_eq(r->alternate.local_lid, 7);
	cr_assert_eq(r->alternate.local_ack_timeout, 9);
	cr_assert_eq(r->private_data[0], 0x40);
	cr_assert_eq(r->private_data[91], (uint8_t)(0x40 + 91));
}

Test(wire_ib_cm, req_reserved_bits_ignored_and_sent_as_zero)
{
	struct sv_cm_msg m;
	uint8_t out[SV_MAD_LEN];

	lay_header(0x0010);
	sv__put_be32(cm + 0, 0x11);
	cm[34] = 0x22;
	/* Reserved: bytes 4-7, 24-27, MAD bytes 18-19, flow-label/rate gap, SL byte low bits. */
	memset(cm + 4, 0xaa, 4);
	memset(cm + 24, 0xbb, 4);
	mad[18] = 0xcc;
	cm[90] = 0x0f;
	cm[91] = 0xc0;
	cm[94] = 0x07;
	cm[95] = 0x07;
	cr_assert_eq(sv__cm_decode(&m, mad, sizeof(mad)), SV_MAD_LEN);
	cr_assert_eq(m.req.local_comm_id, 0x11);
	cr_assert_eq(m.req.local_qpn, 0x22);
	cr_assert_eq(m.req.primary.flow_label, 0);
	cr_assert_eq(m.req.primary.packet_rate, 0);
	cr_assert_eq(m.req.primary.sl, 0);
	cr_assert_eq(m.req.primary.local_ack_timeout, 0);
	cr_assert_eq(sv__cm_encode(out, sizeof(out), &m), SV_MAD_LEN);
	for (int i = 4; i < 8; i++)
		cr_assert_eq(out[SV_MAD_HDR_LEN + i], 0);
	for (int i = 24; i < 28; i++)
		cr_assert_eq(out[SV_MAD_HDR_LEN + i], 0);
	cr_assert_eq(out[18], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 90], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 91], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 94], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 95], 0);
}

Test(wire_ib_cm, rep)
{
	struct sv_cm_msg m;
	const struct sv_cm_rep *r = &m.rep;

	lay_header(0x0013);
	sv__put_be32(cm + 0, 0xc0de0002);		/* local comm ID */
	sv__put_be32(cm + 4, 0xc0de0001);		/* remote comm ID */
	sv__put_be32(cm + 8, 0x12345678);		/* local Q_Key */
	cm[12] = 0x00, cm[13] = 0x00, cm[14] = 0x34;	/* local QPN */
	cm[18] = 0x09;					/* local EECN */
	cm[20] = 0x12, cm[21] = 0x34, cm[22] = 0x56;	/* starting PSN */
	cm[24] = 2;					/* responder resources */
	cm[25] = 4;					/* initiator depth */
	cm[26] = 15 << 3 | 1 << 1 | 1;			/* target ACK delay, failover, EEFC */
	cm[27] = 5 << 5 | 0x10;				/* RNR retry 5, SRQ */
	sv__put_be64(cm + 28, 0x0002c90300d4e5f6ull);	/* local CA GUID */
	pattern(cm + 36, SV_CM_REP_PRIVATE_LEN, 0x80);
	roundtrip(&m, SV_CM_ATTR_REP);

	cr_assert_eq(r->local_comm_id, 0xc0de0002);
	cr_assert_eq(r->remote_comm_id, 0xc0de0001);
	cr_assert_eq(r->local_qkey, 0x12345678);
	cr_assert_eq(r->local_qpn, 0x34);
	cr_assert_eq(r->local_eecn, 9);
	cr_assert_eq(r->starting_psn, 0x123456);
	cr_assert_eq(r->responder_resources, 2);
	cr_assert_eq(r->initiator_depth, 4);
	cr_assert_eq(r->target_ack_delay, 15);
	cr_assert_eq(r->failover_accepted, 1);
	cr_assert(r->e2e_flow_control);
	cr_assert_eq(r->rnr_retry_count, 5);
	cr_assert(r->srq);
	cr_assert_eq(r->local_ca_guid, 0x0002c90300d4e5f6ull);
	cr_assert_eq(r->private_data[195], (uint8_t)(0x80 + 195));
}

Test(wire_ib_cm, rej)
{
	struct sv_cm_msg m;
	const struct sv_cm_rej *r = &m.rej;

	lay_header(0x0012);
	sv__put_be32(cm + 0, 0xc0de0003);
	sv__put_be32(cm + 4, 0xc0de0004);
	cm[8] = 1 << 6;					/* message rejected: REP */
	cm[9] = 5 << 1;					/* reject info length 5 */
	cm[10] = 0x00, cm[11] = 28;			/* reason: consumer defined */
	pattern(cm + 12, SV_CM_REJ_ARI_LEN, 0x01);
	pattern(cm + 84, SV_CM_REJ_PRIVATE_LEN, 0x90);
	roundtrip(&m, SV_CM_ATTR_REJ);

	cr_assert_eq(r->local_comm_id, 0xc0de0003);
	cr_assert_eq(r->remote_comm_id, 0xc0de0004);
	cr_assert_eq(r->msg_rejected, SV_CM_MSG_REP);
	cr_assert_eq(r->ari_len, 5);
	cr_assert_eq(r->reason, SV_CM_REJ_CONSUMER_DEFINED);
	cr_assert_eq(r->ari[71], 72);
	cr_assert_eq(r->private_data[0], 0x90);
	cr_assert_eq(r->private_data[147], (uint8_t)(0x90 + 147));
}

Test(wire_ib_cm, mra)
{
	struct sv_cm_msg m;

	lay_header(0x0011);
	sv__put_be32(cm + 0, 0x01);
	sv__put_be32(cm + 4, 0x02);
	cm[8] = 2 << 6;					/* message MRAed: other (LAP) */
	cm[9] = 17 << 3;				/* service timeout */
	pattern(cm + 10, SV_CM_MRA_PRIVATE_LEN, 0x03);
	roundtrip(&m, SV_CM_ATTR_MRA);
	cr_assert_eq(m.mra.local_comm_id, 1);
	cr_assert_eq(m.mra.remote_comm_id, 2);
	cr_assert_eq(m.mra.msg_mraed, SV_CM_MSG_OTHER);
	cr_assert_eq(m.mra.service_timeout, 17);
	cr_assert_eq(m.mra.private_data[221], (uint8_t)(0x03 + 221));
}

Test(wire_ib_cm, rtu_dreq_drep)
{
	struct sv_cm_msg m;

	lay_header(0x0014);
	sv__put_be32(cm + 0, 0xa);
	sv__put_be32(cm + 4, 0xb);
	pattern(cm + 8, SV_CM_RTU_PRIVATE_LEN, 0x10);
	roundtrip(&m, SV_CM_ATTR_RTU);
	cr_assert_eq(m.rtu.local_comm_id, 0xa);
	cr_assert_eq(m.rtu.remote_comm_id, 0xb);
	cr_assert_eq(m.rtu.private_data[223], (uint8_t)(0x10 + 223));

	lay_header(0x0015);
	sv__put_be32(cm + 0, 0xc);
	sv__put_be32(cm + 4, 0xd);
	cm[8] = 0x00, cm[9] = 0x00, cm[10] = 0x34;	/* remote QPN */
	pattern(cm + 12, SV_CM_DREQ_PRIVATE_LEN, 0x20);
	roundtrip(&m, SV_CM_ATTR_DREQ);
	cr_assert_eq(m.dreq.local_comm_id, 0xc);
	cr_assert_eq(m.dreq.remote_comm_id, 0xd);
	cr_assert_eq(m.dreq.remote_qpn, 0x34);
	cr_assert_eq(m.dreq.private_data[219], (uint8_t)(0x20 + 219));

	lay_header(0x0016);
	sv__put_be32(cm + 0, 0xe);
	sv__put_be32(cm + 4, 0xf);
	pattern(cm + 8, SV_CM_DREP_PRIVATE_LEN, 0x30);
	roundtrip(&m, SV_CM_ATTR_DREP);
	cr_assert_eq(m.drep.local_comm_id, 0xe);
	cr_assert_eq(m.drep.remote_comm_id, 0xf);
	cr_assert_eq(m.drep.private_data[0], 0x30);
}

/* SIDR_REQ (table 119) as librdmacm sends it for RDMA_PS_UDP port 7174: the rdma_cm IP
 * header first in the private data. */
Test(wire_ib_cm, sidr_req)
{
	struct sv_cm_msg m;
	const struct sv_cm_sidr_req *r = &m.sidr_req;

	lay_header(0x0017);
	sv__put_be32(cm + 0, 0x5eed0001);		/* request ID */
	cm[4] = 0xff, cm[5] = 0xff;			/* P_Key */
	sv__put_be64(cm + 8, 0x0000000001111c06ull);	/* service ID: RDMA CM UDP port 7174 */
	pattern(cm + 16, SV_CM_SIDR_REQ_PRIVATE_LEN, 0x11);
	cm[16] = 0x00, cm[17] = 0x40;			/* CMA version 0, IPv4 */
	roundtrip(&m, SV_CM_ATTR_SIDR_REQ);

	cr_assert_eq(r->request_id, 0x5eed0001);
	cr_assert_eq(r->pkey, 0xffff);
	cr_assert_eq(r->service_id, sv__cm_service_id_ps(SV_CMA_PS_UDP, 7174));
	cr_assert_eq(r->private_data[1], 0x40);
	cr_assert_eq(r->private_data[215], (uint8_t)(0x11 + 215));
	cr_assert_eq(SV_CM_SIDR_IP_PRIVATE_MAX, 180);
}

/* SIDR_REP (table 120): success with QPN and Q_Key, and a refusal with status only. */
Test(wire_ib_cm, sidr_rep)
{
	struct sv_cm_msg m;
	const struct sv_cm_sidr_rep *r = &m.sidr_rep;

	lay_header(0x0018);
	sv__put_be32(cm + 0, 0x5eed0001);		/* request ID, echoed */
	cm[4] = 0;					/* status: success */
	cm[5] = 3;					/* additional information length */
	cm[8] = 0x00, cm[9] = 0x01, cm[10] = 0x23;	/* QPN 0x123 */
	sv__put_be64(cm + 12, 0x0000000001111c06ull);	/* service ID, echoed */
	sv__put_be32(cm + 20, 0x01234567);		/* Q_Key: RDMA_UDP_QKEY */
	pattern(cm + 24, SV_CM_SIDR_REP_INFO_LEN, 0x21);
	pattern(cm + 96, SV_CM_SIDR_REP_PRIVATE_LEN, 0x31);
	roundtrip(&m, SV_CM_ATTR_SIDR_REP);

	cr_assert_eq(r->request_id, 0x5eed0001);
	cr_assert_eq(r->status, SV_CM_SIDR_SUCCESS);
	cr_assert_eq(r->info_len, 3);
	cr_assert_eq(r->qpn, 0x123);
	cr_assert_eq(r->service_id, sv__cm_service_id_ps(SV_CMA_PS_UDP, 7174));
	cr_assert_eq(r->qkey, 0x01234567);
	cr_assert_eq(r->info[71], (uint8_t)(0x21 + 71));
	cr_assert_eq(r->private_data[0], 0x31);
	cr_assert_eq(r->private_data[135], (uint8_t)(0x31 + 135));

	lay_header(0x0018);
	sv__put_be32(cm + 0, 7);
	cm[4] = 2;					/* status: rejected */
	roundtrip(&m, SV_CM_ATTR_SIDR_REP);
	cr_assert_eq(r->status, SV_CM_SIDR_REJECT);
	cr_assert_eq(r->qpn, 0);
}

/* The reserved bytes of a SIDR_REP (vendor ID in ECE-aware kernels) and the top byte of
 * the QPN word are read as nothing and written as zero. */
Test(wire_ib_cm, sidr_rep_reserved_bits)
{
	struct sv_cm_msg m;
	uint8_t out[SV_MAD_LEN];

	lay_header(0x0017);
	cm[6] = 0xdd, cm[7] = 0xee;			/* SIDR_REQ reserved after P_Key */
	cr_assert_eq(sv__cm_decode(&m, mad, sizeof(mad)), SV_MAD_LEN);
	cr_assert_eq(sv__cm_encode(out, sizeof(out), &m), SV_MAD_LEN);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 6], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 7], 0);

	lay_header(0x0018);
	cm[6] = 0xaa, cm[7] = 0xbb, cm[11] = 0xcc;
	cm[8] = 0x12, cm[9] = 0x34, cm[10] = 0x56;
	cr_assert_eq(sv__cm_decode(&m, mad, sizeof(mad)), SV_MAD_LEN);
	cr_assert_eq(m.sidr_rep.qpn, 0x123456);
	cr_assert_eq(sv__cm_encode(out, sizeof(out), &m), SV_MAD_LEN);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 6], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 7], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 11], 0);
	cr_assert_eq(out[SV_MAD_HDR_LEN + 8], 0x12);
}

Test(wire_ib_cm, bad_headers_and_attributes)
{
	static const struct {
		int byte;
		uint8_t value;
	} bad[] = {
		{ 0, 0x02 },		/* base version */
		{ 1, 0x04 },		/* class: not CM (performance) */
		{ 1, 0x81 },		/* class: directed-route SMP */
		{ 2, 0x01 },		/* class version */
		{ 3, 0x01 },		/* method Get */
		{ 3, 0x83 },		/* response bit set */
		{ 17, 0x19 },		/* attribute LAP */
		{ 17, 0x1a },		/* attribute APR */
		{ 17, 0x01 },		/* attribute ClassPortInfo */
		{ 16, 0x01 },		/* attribute 0x0110 */
	};
	struct sv_cm_msg m;
	uint8_t out[SV_MAD_LEN];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		lay_header(0x0014);
		mad[bad[i].byte] = bad[i].value;
		cr_assert_eq(sv__cm_decode(&m, mad, sizeof(mad)), -EPROTO, "case %zu", i);
	}
	/* Longer input (a UD payload with room to spare) decodes the first 256 bytes. */
	lay_header(0x0014);
	{
		uint8_t big[SV_MAD_LEN + 40];

		memcpy(big, mad, SV_MAD_LEN);
		memset(big + SV_MAD_LEN, 0x77, 40);
		cr_assert_eq(sv__cm_decode(&m, big, sizeof(big)), SV_MAD_LEN);
	}
	sv__cm_mad_init(&m, SV_CM_ATTR_RTU, 1);
	m.mad.attr_id = 0x0019;
	cr_assert_eq(sv__cm_encode(out, sizeof(out), &m), -EPROTO);
}

Test(wire_ib_cm, mad_init_and_names)
{
	struct sv_cm_msg m;
	uint8_t out[SV_MAD_LEN];

	sv__cm_mad_init(&m, SV_CM_ATTR_DREQ, 0xfedcba9876543210ull);
	m.dreq.remote_qpn = 0x123456;
	cr_assert_eq(sv__cm_encode(out, sizeof(out), &m), SV_MAD_LEN);
	cr_assert_eq(out[0], 1);
	cr_assert_eq(out[1], 0x07);
	cr_assert_eq(out[2], 2);
	cr_assert_eq(out[3], 0x03);
	cr_assert_eq(sv__get_be64(out + 8), 0xfedcba9876543210ull);
	cr_assert_eq(sv__get_be16(out + 16), 0x0015);
	cr_assert_eq(sv__get_be24(out + SV_MAD_HDR_LEN + 8), 0x123456);
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_REQ), "REQ");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_MRA), "MRA");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_REJ), "REJ");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_REP), "REP");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_RTU), "RTU");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_DREQ), "DREQ");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_DREP), "DREP");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_SIDR_REQ), "SIDR_REQ");
	cr_assert_str_eq(sv__cm_attr_name(SV_CM_ATTR_SIDR_REP), "SIDR_REP");
	cr_assert_str_eq(sv__cm_attr_name(0x0019), "?");
	cr_assert_str_eq(sv__cm_attr_name(0x000f), "?");
}

/* RDMA CM IP header (kernel cma.c struct cma_hdr): version 0, IPv4 in the last 4 bytes
 * of each 16-byte address. */
Test(wire_ib_cm, cm_ip_header)
{
	static const uint8_t v[SV_CM_IP_HDR_LEN] = {
		0x00, 0x40, 0x43, 0x21,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
	};
	struct sv_cm_ip_hdr h;
	uint8_t out[SV_CM_IP_HDR_LEN], b[SV_CM_IP_HDR_LEN];

	cr_assert_eq(sv__cm_ip_hdr_decode(&h, v, sizeof(v)), SV_CM_IP_HDR_LEN);
	cr_assert_eq(h.ip_version, 4);
	cr_assert_eq(h.src_port, 0x4321);
	cr_assert_eq(h.src_addr[15], 1);
	cr_assert_eq(h.dst_addr[15], 2);
	cr_assert_eq(sv__cm_ip_hdr_encode(out, sizeof(out), &h), SV_CM_IP_HDR_LEN);
	cr_assert_arr_eq(out, v, sizeof(v));
	cr_assert_eq(sv__cm_ip_hdr_encode(out, sizeof(out) - 1, &h), -ENOSPC);
	for (size_t n = 0; n < sizeof(v); n++)
		cr_assert_eq(sv__cm_ip_hdr_decode(&h, v, n), -EBADMSG);
	memcpy(b, v, sizeof(b));
	b[0] = 1;				/* CMA version */
	cr_assert_eq(sv__cm_ip_hdr_decode(&h, b, sizeof(b)), -EPROTO);
	b[0] = 0;
	b[1] = 0x50;				/* IP version 5 */
	cr_assert_eq(sv__cm_ip_hdr_decode(&h, b, sizeof(b)), -EPROTO);
	b[1] = 0x60;
	cr_assert_eq(sv__cm_ip_hdr_decode(&h, b, sizeof(b)), SV_CM_IP_HDR_LEN);
	cr_assert_eq(h.ip_version, 6);
	cr_assert_eq(SV_CM_IP_PRIVATE_MAX, 56);
}

/* ---------------------------------------------------------------------------------------
 * MADs of the Linux kernel's ib_cm (Debian 12, kernel 6.1, rdma_rxe on a guest's eth0 with
 * MAC 52:54:00:53:76:02, node GUID 5054:00ff:fe53:7602, local CA ACK delay 15), captured
 * with tshark on the tap between the guest (198.18.0.2 / fd53:7600::2) and softverbs on the
 * host (198.18.0.1 / fd53:7600::1), rping on both ends (service port 7174): each is the
 * UDP payload, BTH + DETH + MAD + ICRC. rxe's QP1 sent every one from UDP source port
 * 55410, an entropy port, to 4791.
 */

/* The kernel's REQ from "rping -c -a 198.18.0.1" in the guest. */
static const char rxe_req4[] =
	"6400ffff00000001800000008001000000000001010702030000000000000002ceaaf07600100000"
	"0000000076f0aace000000000000000001061c06505400fffe537602000000000000000000001101"
	"00000001000000a0524f6aa7ffff37f0ffffffff00000000000000000000ffffc612000200000000"
	"000000000000ffffc6120001791ab000004000980000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000040c1bb000000000000000000000000"
	"c6120002000000000000000000000000c61200010000000000000000000000000000000000000000"
	"000000000000000000000000000000000000000000000000000000000000000000000000515296b6";

/* The kernel's REP to softverbs' REQ (local comm ID 0x19de9bb2, starting PSN 0x09de19)
 * from "rping -s -a 198.18.0.2" in the guest. */
static const char rxe_rep4[] =
	"6400ffff00000001800000048001000000000001010702030000000019de9bb2d550a5da00130000"
	"0000000074f0aace19de9bb20000000000001200000000005d9d1900010178e0505400fffe537602"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000043afc922";

/* The kernel's REQ from "rping -c -a fd53:7600::1" in the guest. */
static const char rxe_req6[] =
	"6400ffff00000001800000168001000000000001010702030000000000000002ceaaf05200100000"
	"0000000052f0aace000000000000000001061c06505400fffe537602000000000000000000001501"
	"00000001000000a0dfc343a7ffff37f0fffffffffd537600000000000000000000000002fd537600"
	"000000000000000000000001c1e3a000004000980000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000060e74cfd5376000000000000000000"
	"00000002fd5376000000000000000000000000010000000000000000000000000000000000000000"
	"0000000000000000000000000000000000000000000000000000000000000000000000004898f287";

/* The kernel's REP to softverbs' IPv6 REQ (local comm ID 0xdc0a48b1). */
static const char rxe_rep6[] =
	"6400ffff000000018000000d80010000000000010107020300000000dc0a48b137109e4700130000"
	"0000000062f0aacedc0a48b100000000000013000000000012b33200010178e0505400fffe537602"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"00000000000000000000000000000000000000000000000000000000000000000000000000000000"
	"000000000000000000000000000000000000000000000000000000000000000000000000e1cb8d94";

#define GSI_PKT_LEN (12 + 8 + SV_MAD_LEN + 4)

/* The captured packet: a UD SEND_ONLY from QP1 to QP1 with the GSI Q_Key, whose MAD
 * decodes, and re-encodes to the same bytes (the kernel writes reserved bits as zero). */
static void rxe_mad(const char *hex, struct sv_cm_msg *m)
{
	uint8_t pkt[GSI_PKT_LEN], out[SV_MAD_LEN];

	cr_assert_eq(strlen(hex), 2 * sizeof(pkt));
	for (size_t i = 0; i < sizeof(pkt); i++) {
		unsigned v;

		cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
		pkt[i] = (uint8_t)v;
	}
	cr_assert_eq(pkt[0], 0x64, "UD SEND_ONLY");
	cr_assert_eq(sv__get_be16(pkt + 2), 0xffff);
	cr_assert_eq(sv__get_be24(pkt + 5), SV_GSI_QPN);
	cr_assert_eq(sv__get_be32(pkt + 12), 0x80010000u);
	cr_assert_eq(sv__get_be24(pkt + 17), SV_GSI_QPN);
	cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
	cr_assert_eq(sv__cm_encode(out, sizeof(out), m), SV_MAD_LEN);
	cr_assert_arr_eq(out, pkt + 20, SV_MAD_LEN);
}

/* The fields of the kernel's REQ that are its choices, not the connection's: what ours
 * must match (roce_cm.c fills them from these constants and helpers). */
static void rxe_req_choices(const struct sv_cm_req *r, const struct sv_cm_ip_hdr *ip)
{
	/* The node GUID, an EUI-64 from the MAC, in its byte order on the wire. */
	cr_assert_eq(r->local_ca_guid, 0x505400fffe537602ull);
	cr_assert_eq(r->local_qkey, 0);
	cr_assert_eq(r->remote_cm_response_timeout, 20);
	cr_assert_eq(r->local_cm_response_timeout, 20);
	cr_assert_eq(r->remote_cm_response_timeout, SV_CM_RESPONSE_TIMEOUT);
	cr_assert_eq(r->max_cm_retries, 15);
	cr_assert_eq(r->max_cm_retries, SV_CM_MAX_RETRIES);
	cr_assert_eq(r->transport, SV_CM_TRANSPORT_RC);
	cr_assert_not(r->e2e_flow_control);
	cr_assert_eq(r->pkey, 0xffff);
	cr_assert_eq(r->path_mtu, SV_MTU_1024, "the kernel's MTU for a 1500-byte link");
	cr_assert_not(r->rdc_exists);
	cr_assert_not(r->srq);
	cr_assert_eq(r->primary.local_lid, 0xffff);
	cr_assert_eq(r->primary.remote_lid, 0xffff);
	cr_assert_eq(r->primary.packet_rate, 0);
	cr_assert_eq(r->primary.traffic_class, 0);
	cr_assert_eq(r->primary.hop_limit, 64);
	cr_assert_eq(r->primary.sl, 0);
	cr_assert_not(r->primary.subnet_local, "routed: hop limit 64");
	/* IBA 12.7.34 from rdma_cm's PacketLifeTime 18 and rxe's ACK delay 15; ours (12)
	 * gives the same. */
	cr_assert_eq(r->primary.local_ack_timeout, 19);
	cr_assert_eq(sv__cm_ack_timeout(15, SV_CM_PACKET_LIFE_TIME), 19);
	cr_assert_eq(sv__cm_ack_timeout(12, SV_CM_PACKET_LIFE_TIME), 19);
	cr_assert_eq(r->primary.flow_label, sv__cm_flow_label(ip->src_port, 7174));
	cr_assert_eq(r->alternate.local_lid, 0);
	cr_assert_eq(r->alternate.local_ack_timeout, 0);
	cr_assert_eq(r->service_id, sv__cm_service_id(7174));
}

Test(wire_ib_cm, rxe_req_ipv4)
{
	static const uint8_t gid_g[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 2 };
	static const uint8_t gid_h[16] = { [10] = 0xff, [11] = 0xff, 198, 18, 0, 1 };
	struct sv_cm_msg m;
	struct sv_cm_ip_hdr ip;

	rxe_mad(rxe_req4, &m);
	cr_assert_eq(m.mad.attr_id, SV_CM_ATTR_REQ);
	cr_assert_eq(m.mad.tid, 0x00000002ceaaf076ull);
	cr_assert_eq(m.req.local_comm_id, 0x76f0aace);
	cr_assert_eq(m.req.local_qpn, 0x11);
	cr_assert_eq(m.req.responder_resources, 1, "rping's conn param");
	cr_assert_eq(m.req.initiator_depth, 1);
	cr_assert_eq(m.req.starting_psn, 0x524f6a);
	cr_assert_eq(m.req.retry_count, 7);
	cr_assert_eq(m.req.rnr_retry_count, 7);
	cr_assert_arr_eq(m.req.primary.local_gid, gid_g, 16);
	cr_assert_arr_eq(m.req.primary.remote_gid, gid_h, 16);
	cr_assert_eq(sv__cm_ip_hdr_decode(&ip, m.req.private_data, SV_CM_REQ_PRIVATE_LEN),
		     SV_CM_IP_HDR_LEN);
	cr_assert_eq(ip.ip_version, 4);
	cr_assert_eq(ip.src_port, 0xc1bb);
	cr_assert_arr_eq(ip.src_addr + 12, gid_g + 12, 4);
	cr_assert_arr_eq(ip.dst_addr + 12, gid_h + 12, 4);
	cr_assert_eq(m.req.primary.flow_label, 0x791ab);
	rxe_req_choices(&m.req, &ip);
}

Test(wire_ib_cm, rxe_req_ipv6)
{
	static const uint8_t gid_g[16] = { 0xfd, 0x53, 0x76, 0x00, [15] = 2 };
	static const uint8_t gid_h[16] = { 0xfd, 0x53, 0x76, 0x00, [15] = 1 };
	struct sv_cm_msg m;
	struct sv_cm_ip_hdr ip;

	rxe_mad(rxe_req6, &m);
	cr_assert_eq(m.mad.attr_id, SV_CM_ATTR_REQ);
	cr_assert_eq(m.req.local_comm_id, 0x52f0aace);
	cr_assert_eq(m.req.local_qpn, 0x15);
	cr_assert_eq(m.req.starting_psn, 0xdfc343);
	cr_assert_arr_eq(m.req.primary.local_gid, gid_g, 16);
	cr_assert_arr_eq(m.req.primary.remote_gid, gid_h, 16);
	cr_assert_eq(sv__cm_ip_hdr_decode(&ip, m.req.private_data, SV_CM_REQ_PRIVATE_LEN),
		     SV_CM_IP_HDR_LEN);
	cr_assert_eq(ip.ip_version, 6);
	cr_assert_eq(ip.src_port, 0xe74c);
	cr_assert_arr_eq(ip.src_addr, gid_g, 16);
	cr_assert_arr_eq(ip.dst_addr, gid_h, 16);
	/* No flow label on the socket: the same port hash as for IPv4. */
	cr_assert_eq(m.req.primary.flow_label, 0xc1e3a);
	rxe_req_choices(&m.req, &ip);
}

/* The kernel's REPs: its QPN and receive PSN, rping's depths, rxe's ACK delay 15 as the
 * target ACK delay (from which an active side's ACK timeout follows), its node GUID. */
static void rxe_rep_check(const char *hex, uint32_t our_id, uint32_t id, uint32_t qpn,
			  uint32_t psn)
{
	struct sv_cm_msg m;

	rxe_mad(hex, &m);
	cr_assert_eq(m.mad.attr_id, SV_CM_ATTR_REP);
	cr_assert_eq(m.rep.remote_comm_id, our_id);
	cr_assert_eq(m.rep.local_comm_id, id);
	cr_assert_eq(m.rep.local_qkey, 0);
	cr_assert_eq(m.rep.local_qpn, qpn);
	cr_assert_eq(m.rep.local_eecn, 0);
	cr_assert_eq(m.rep.starting_psn, psn);
	cr_assert_eq(m.rep.responder_resources, 1);
	cr_assert_eq(m.rep.initiator_depth, 1);
	cr_assert_eq(m.rep.target_ack_delay, 15);
	cr_assert_eq(m.rep.failover_accepted, 0);
	cr_assert_not(m.rep.e2e_flow_control);
	cr_assert_eq(m.rep.rnr_retry_count, 7);
	cr_assert_not(m.rep.srq);
	cr_assert_eq(m.rep.local_ca_guid, 0x505400fffe537602ull);
	cr_assert_eq(sv__cm_ack_timeout(m.rep.target_ack_delay, SV_CM_PACKET_LIFE_TIME), 19);
}

Test(wire_ib_cm, rxe_rep)
{
	rxe_rep_check(rxe_rep4, 0x19de9bb2, 0x74f0aace, 0x12, 0x5d9d19);
	rxe_rep_check(rxe_rep6, 0xdc0a48b1, 0x62f0aace, 0x13, 0x12b332);
}

/* IBA 12.7.34 sums as exponents: the larger, plus one within one of each other. */
Test(wire_ib_cm, ack_timeout_and_flow_label)
{
	cr_assert_eq(sv__cm_ack_timeout(0, 18), 19);
	cr_assert_eq(sv__cm_ack_timeout(19, 18), 20);
	cr_assert_eq(sv__cm_ack_timeout(20, 18), 21);
	cr_assert_eq(sv__cm_ack_timeout(21, 18), 21);
	cr_assert_eq(sv__cm_ack_timeout(15, 13), 16);
	cr_assert_eq(sv__cm_ack_timeout(12, 13), 14);
	cr_assert_eq(sv__cm_ack_timeout(31, 31), 31);
	cr_assert_eq(sv__cm_flow_label(0, 0), 0);
	cr_assert_eq(sv__cm_flow_label(0xffff, 0xffff), (0xffffu * 32) & 0xfffff);
}
