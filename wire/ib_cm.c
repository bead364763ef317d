/*
 * ib_cm.c — IB CM MAD codec (IBA vol. 1 13.4.2 MAD header, 12.6 CM messages, 12.11 service
 * ID resolution; offsets as in the kernel's include/rdma/ibta_vol1_c12.h tables 106-113 and
 * 119-120). Offsets below are from the
 * start of the CM message, i.e. after the 24-byte MAD header; "bits 7:3" counts from the
 * least significant bit of the byte.
 */
#include <errno.h>
#include <string.h>

#include "wire/byteorder.h"
#include "wire/ib_cm.h"

/* IBA 13.4.2: BaseVersion | MgmtClass | ClassVersion | R:1 Method:7 | Status:16 |
 * ClassSpecific:16 | TransactionID:64 | AttributeID:16 | Reserved:16 | AttributeModifier:32 */
int sv__mad_hdr_decode(struct sv_mad_hdr *h, const uint8_t *p, size_t len)
{
	if (len < SV_MAD_HDR_LEN)
		return -EBADMSG;
	h->base_version = p[0];
	h->mgmt_class = p[1];
	h->class_version = p[2];
	h->method = p[3];
	h->status = sv__get_be16(p + 4);
	h->class_specific = sv__get_be16(p + 6);
	h->tid = sv__get_be64(p + 8);
	h->attr_id = sv__get_be16(p + 16);
	h->attr_mod = sv__get_be32(p + 20);
	return SV_MAD_HDR_LEN;
}

int sv__mad_hdr_encode(uint8_t *p, size_t cap, const struct sv_mad_hdr *h)
{
	if (cap < SV_MAD_HDR_LEN)
		return -ENOSPC;
	p[0] = h->base_version;
	p[1] = h->mgmt_class;
	p[2] = h->class_version;
	p[3] = h->method;
	sv__put_be16(p + 4, h->status);
	sv__put_be16(p + 6, h->class_specific);
	sv__put_be64(p + 8, h->tid);
	sv__put_be16(p + 16, h->attr_id);
	sv__put_be16(p + 18, 0);
	sv__put_be32(p + 20, h->attr_mod);
	return SV_MAD_HDR_LEN;
}

/* Primary path at 52, alternate at 96 (44 bytes each): LIDs, GIDs, then
 * FlowLabel:20 rsvd:6 PacketRate:6 | TrafficClass | HopLimit | SL:4 SubnetLocal:1 rsvd:3 |
 * LocalACKTimeout:5 rsvd:3. */
static void path_decode(struct sv_cm_path *a, const uint8_t *p)
{
	a->local_lid = sv__get_be16(p);
	a->remote_lid = sv__get_be16(p + 2);
	memcpy(a->local_gid, p + 4, 16);
	memcpy(a->remote_gid, p + 20, 16);
	a->flow_label = sv__get_be32(p + 36) >> 12;
	a->packet_rate = p[39] & 0x3f;
	a->traffic_class = p[40];
	a->hop_limit = p[41];
	a->sl = p[42] >> 4;
	a->subnet_local = p[42] & 0x08;
	a->local_ack_timeout = p[43] >> 3;
}

static void path_encode(uint8_t *p, const struct sv_cm_path *a)
{
	sv__put_be16(p, a->local_lid);
	sv__put_be16(p + 2, a->remote_lid);
	memcpy(p + 4, a->local_gid, 16);
	memcpy(p + 20, a->remote_gid, 16);
	sv__put_be32(p + 36, (a->flow_label & 0xfffff) << 12 | (a->packet_rate & 0x3fu));
	p[40] = a->traffic_class;
	p[41] = a->hop_limit;
	p[42] = (uint8_t)((a->sl & 0xf) << 4 | (a->subnet_local ? 0x08 : 0));
	p[43] = (uint8_t)((a->local_ack_timeout & 0x1f) << 3);
}

/* Table 106. */
static void req_decode(struct sv_cm_req *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->service_id = sv__get_be64(p + 8);
	r->local_ca_guid = sv__get_be64(p + 16);
	r->local_qkey = sv__get_be32(p + 28);
	r->local_qpn = sv__get_be24(p + 32);
	r->responder_resources = p[35];
	r->local_eecn = sv__get_be24(p + 36);
	r->initiator_depth = p[39];
	r->remote_eecn = sv__get_be24(p + 40);
	r->remote_cm_response_timeout = p[43] >> 3;
	r->transport = (p[43] >> 1) & 3;
	r->e2e_flow_control = p[43] & 1;
	r->starting_psn = sv__get_be24(p + 44);
	r->local_cm_response_timeout = p[47] >> 3;
	r->retry_count = p[47] & 7;
	r->pkey = sv__get_be16(p + 48);
	r->path_mtu = p[50] >> 4;
	r->rdc_exists = p[50] & 0x08;
	r->rnr_retry_count = p[50] & 7;
	r->max_cm_retries = p[51] >> 4;
	r->srq = p[51] & 0x08;
	r->ext_transport = p[51] & 7;
	path_decode(&r->primary, p + 52);
	path_decode(&r->alternate, p + 96);
	memcpy(r->private_data, p + 140, SV_CM_REQ_PRIVATE_LEN);
}

static void req_encode(uint8_t *p, const struct sv_cm_req *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be64(p + 8, r->service_id);
	sv__put_be64(p + 16, r->local_ca_guid);
	sv__put_be32(p + 28, r->local_qkey);
	sv__put_be24(p + 32, r->local_qpn);
	p[35] = r->responder_resources;
	sv__put_be24(p + 36, r->local_eecn);
	p[39] = r->initiator_depth;
	sv__put_be24(p + 40, r->remote_eecn);
	p[43] = (uint8_t)((r->remote_cm_response_timeout & 0x1f) << 3 |
			  (r->transport & 3) << 1 | (r->e2e_flow_control ? 1 : 0));
	sv__put_be24(p + 44, r->starting_psn);
	p[47] = (uint8_t)((r->local_cm_response_timeout & 0x1f) << 3 | (r->retry_count & 7));
	sv__put_be16(p + 48, r->pkey);
	p[50] = (uint8_t)((r->path_mtu & 0xf) << 4 | (r->rdc_exists ? 0x08 : 0) |
			  (r->rnr_retry_count & 7));
	p[51] = (uint8_t)((r->max_cm_retries & 0xf) << 4 | (r->srq ? 0x08 : 0) |
			  (r->ext_transport & 7));
	path_encode(p + 52, &r->primary);
	path_encode(p + 96, &r->alternate);
	memcpy(p + 140, r->private_data, SV_CM_REQ_PRIVATE_LEN);
}

/* Table 107: comm IDs | MessageMRAed:2 rsvd:6 | ServiceTimeout:5 rsvd:3 | private data. */
static void mra_decode(struct sv_cm_mra *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->remote_comm_id = sv__get_be32(p + 4);
	r->msg_mraed = p[8] >> 6;
	r->service_timeout = p[9] >> 3;
	memcpy(r->private_data, p + 10, SV_CM_MRA_PRIVATE_LEN);
}

static void mra_encode(uint8_t *p, const struct sv_cm_mra *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be32(p + 4, r->remote_comm_id);
	p[8] = (uint8_t)((r->msg_mraed & 3) << 6);
	p[9] = (uint8_t)((r->service_timeout & 0x1f) << 3);
	memcpy(p + 10, r->private_data, SV_CM_MRA_PRIVATE_LEN);
}

/* Table 108: comm IDs | MessageRejected:2 rsvd:6 | RejectInfoLength:7 rsvd:1 | Reason:16 |
 * ARI (72) | private data (148). */
static void rej_decode(struct sv_cm_rej *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->remote_comm_id = sv__get_be32(p + 4);
	r->msg_rejected = p[8] >> 6;
	r->ari_len = p[9] >> 1;
	r->reason = sv__get_be16(p + 10);
	memcpy(r->ari, p + 12, SV_CM_REJ_ARI_LEN);
	memcpy(r->private_data, p + 84, SV_CM_REJ_PRIVATE_LEN);
}

static void rej_encode(uint8_t *p, const struct sv_cm_rej *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be32(p + 4, r->remote_comm_id);
	p[8] = (uint8_t)((r->msg_rejected & 3) << 6);
	p[9] = (uint8_t)((r->ari_len & 0x7f) << 1);
	sv__put_be16(p + 10, r->reason);
	memcpy(p + 12, r->ari, SV_CM_REJ_ARI_LEN);
	memcpy(p + 84, r->private_data, SV_CM_REJ_PRIVATE_LEN);
}

/* Table 110. */
static void rep_decode(struct sv_cm_rep *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->remote_comm_id = sv__get_be32(p + 4);
	r->local_qkey = sv__get_be32(p + 8);
	r->local_qpn = sv__get_be24(p + 12);
	r->local_eecn = sv__get_be24(p + 16);
	r->starting_psn = sv__get_be24(p + 20);
	r->responder_resources = p[24];
	r->initiator_depth = p[25];
	r->target_ack_delay = p[26] >> 3;
	r->failover_accepted = (p[26] >> 1) & 3;
	r->e2e_flow_control = p[26] & 1;
	r->rnr_retry_count = p[27] >> 5;
	r->srq = p[27] & 0x10;
	r->local_ca_guid = sv__get_be64(p + 28);
	memcpy(r->private_data, p + 36, SV_CM_REP_PRIVATE_LEN);
}

static void rep_encode(uint8_t *p, const struct sv_cm_rep *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be32(p + 4, r->remote_comm_id);
	sv__put_be32(p + 8, r->local_qkey);
	sv__put_be24(p + 12, r->local_qpn);
	sv__put_be24(p + 16, r->local_eecn);
	sv__put_be24(p + 20, r->starting_psn);
	p[24] = r->responder_resources;
	p[25] = r->initiator_depth;
	p[26] = (uint8_t)((r->target_ack_delay & 0x1f) << 3 | (r->failover_accepted & 3) << 1 |
			  (r->e2e_flow_control ? 1 : 0));
	p[27] = (uint8_t)((r->rnr_retry_count & 7) << 5 | (r->srq ? 0x10 : 0));
	sv__put_be64(p + 28, r->local_ca_guid);
	memcpy(p + 36, r->private_data, SV_CM_REP_PRIVATE_LEN);
}

/* Tables 111 and 113: comm IDs | private data (224). */
static void rtu_decode(struct sv_cm_rtu *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->remote_comm_id = sv__get_be32(p + 4);
	memcpy(r->private_data, p + 8, SV_CM_RTU_PRIVATE_LEN);
}

static void rtu_encode(uint8_t *p, const struct sv_cm_rtu *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be32(p + 4, r->remote_comm_id);
	memcpy(p + 8, r->private_data, SV_CM_RTU_PRIVATE_LEN);
}

/* Table 112: comm IDs | RemoteQPN/EECN:24 rsvd:8 | private data (220). */
static void dreq_decode(struct sv_cm_dreq *r, const uint8_t *p)
{
	r->local_comm_id = sv__get_be32(p);
	r->remote_comm_id = sv__get_be32(p + 4);
	r->remote_qpn = sv__get_be24(p + 8);
	memcpy(r->private_data, p + 12, SV_CM_DREQ_PRIVATE_LEN);
}

static void dreq_encode(uint8_t *p, const struct sv_cm_dreq *r)
{
	sv__put_be32(p, r->local_comm_id);
	sv__put_be32(p + 4, r->remote_comm_id);
	sv__put_be24(p + 8, r->remote_qpn);
	memcpy(p + 12, r->private_data, SV_CM_DREQ_PRIVATE_LEN);
}

/* Table 119: RequestID | P_Key:16 rsvd:16 | ServiceID | private data (216). */
static void sidr_req_decode(struct sv_cm_sidr_req *r, const uint8_t *p)
{
	r->request_id = sv__get_be32(p);
	r->pkey = sv__get_be16(p + 4);
	r->service_id = sv__get_be64(p + 8);
	memcpy(r->private_data, p + 16, SV_CM_SIDR_REQ_PRIVATE_LEN);
}

static void sidr_req_encode(uint8_t *p, const struct sv_cm_sidr_req *r)
{
	sv__put_be32(p, r->request_id);
	sv__put_be16(p + 4, r->pkey);
	sv__put_be64(p + 8, r->service_id);
	memcpy(p + 16, r->private_data, SV_CM_SIDR_REQ_PRIVATE_LEN);
}

/* Table 120: RequestID | Status | AdditionalInformationLength | rsvd:16 | QPN:24 rsvd:8 |
 * ServiceID | Q_Key | AdditionalInformation (72) | private data (136). The reserved
 * 16 bits at 6 and 8 bits at 11 carry a vendor ID in the kernel's ECE extension; we
 * neither send nor read one. */
static void sidr_rep_decode(struct sv_cm_sidr_rep *r, const uint8_t *p)
{
	r->request_id = sv__get_be32(p);
	r->status = p[4];
	r->info_len = p[5];
	r->qpn = sv__get_be24(p + 8);
	r->service_id = sv__get_be64(p + 12);
	r->qkey = sv__get_be32(p + 20);
	memcpy(r->info, p + 24, SV_CM_SIDR_REP_INFO_LEN);
	memcpy(r->private_data, p + 96, SV_CM_SIDR_REP_PRIVATE_LEN);
}

static void sidr_rep_encode(uint8_t *p, const struct sv_cm_sidr_rep *r)
{
	sv__put_be32(p, r->request_id);
	p[4] = r->status;
	p[5] = r->info_len;
	sv__put_be24(p + 8, r->qpn);
	sv__put_be64(p + 12, r->service_id);
	sv__put_be32(p + 20, r->qkey);
	memcpy(p + 24, r->info, SV_CM_SIDR_REP_INFO_LEN);
	memcpy(p + 96, r->private_data, SV_CM_SIDR_REP_PRIVATE_LEN);
}

int sv__cm_decode(struct sv_cm_msg *m, const uint8_t *p, size_t len)
{
	const uint8_t *b = p + SV_MAD_HDR_LEN;

	if (len < SV_MAD_LEN)
		return -EBADMSG;
	sv__mad_hdr_decode(&m->mad, p, len);
	if (m->mad.base_version != SV_MAD_BASE_VERSION || m->mad.mgmt_class != SV_MAD_CLASS_CM ||
	    m->mad.class_version != SV_MAD_CM_CLASS_VERSION ||
	    m->mad.method != SV_MAD_METHOD_SEND)
		return -EPROTO;
	switch (m->mad.attr_id) {
	case SV_CM_ATTR_REQ:
		req_decode(&m->req, b);
		break;
	case SV_CM_ATTR_MRA:
		mra_decode(&m->mra, b);
		break;
	case SV_CM_ATTR_REJ:
		rej_decode(&m->rej, b);
		break;
	case SV_CM_ATTR_REP:
		rep_decode(&m->rep, b);
		break;
	case SV_CM_ATTR_RTU:
		rtu_decode(&m->rtu, b);
		break;
	case SV_CM_ATTR_DREQ:
		dreq_decode(&m->dreq, b);
		break;
	case SV_CM_ATTR_DREP:
		rtu_decode(&m->drep, b);
		break;
	case SV_CM_ATTR_SIDR_REQ:
		sidr_req_decode(&m->sidr_req, b);
		break;
	case SV_CM_ATTR_SIDR_REP:
		sidr_rep_decode(&m->sidr_rep, b);
		break;
	default:
		return -EPROTO;
	}
	return SV_MAD_LEN;
}

int sv__cm_encode(uint8_t *p, size_t cap, const struct sv_cm_msg *m)
{
	uint8_t *b = p + SV_MAD_HDR_LEN;

	if (cap < SV_MAD_LEN)
		return -ENOSPC;
	/* Reserved fields between the ones we write stay zero. */
	memset(b, 0, SV_CM_MSG_LEN);
	switch (m->mad.attr_id) {
	case SV_CM_ATTR_REQ:
		req_encode(b, &m->req);
		break;
	case SV_CM_ATTR_MRA:
		mra_encode(b, &m->mra);
		break;
	case SV_CM_ATTR_REJ:
		rej_encode(b, &m->rej);
		break;
	case SV_CM_ATTR_REP:
		rep_encode(b, &m->rep);
		break;
	case SV_CM_ATTR_RTU:
		rtu_encode(b, &m->rtu);
		break;
	case SV_CM_ATTR_DREQ:
		dreq_encode(b, &m->dreq);
		break;
	case SV_CM_ATTR_DREP:
		rtu_encode(b, &m->drep);
		break;
	case SV_CM_ATTR_SIDR_REQ:
		sidr_req_encode(b, &m->sidr_req);
		break;
	case SV_CM_ATTR_SIDR_REP:
		sidr_rep_encode(b, &m->sidr_rep);
		break;
	default:
		return -EPROTO;
	}
	sv__mad_hdr_encode(p, cap, &m->mad);
	return SV_MAD_LEN;
}

void sv__cm_mad_init(struct sv_cm_msg *m, enum sv_cm_attr attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->mad.base_version = SV_MAD_BASE_VERSION;
	m->mad.mgmt_class = SV_MAD_CLASS_CM;
	m->mad.class_version = SV_MAD_CM_CLASS_VERSION;
	m->mad.method = SV_MAD_METHOD_SEND;
	m->mad.tid = tid;
	m->mad.attr_id = attr;
}

const char *sv__cm_attr_name(uint16_t attr_id)
{
	static const char *const names[] = {
		"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP", "SIDR_REQ", "SIDR_REP",
	};

	if (attr_id < SV_CM_ATTR_REQ || attr_id > SV_CM_ATTR_SIDR_REP)
		return "?";
	return names[attr_id - SV_CM_ATTR_REQ];
}

uint8_t sv__cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time)
{
	unsigned round_trip = packet_life_time + 1u;	/* 2 * PLT */
	unsigned hi = round_trip > ca_ack_delay ? round_trip : ca_ack_delay;
	unsigned lo = round_trip > ca_ack_delay ? ca_ack_delay : round_trip;
	unsigned t = hi + (hi - lo <= 1 ? 1 : 0);

	return (uint8_t)(t > 31 ? 31 : t);
}

uint32_t sv__cm_flow_label(uint16_t sport, uint16_t dport)
{
	return ((uint32_t)sport * 31 + dport) & 0xfffff;
}

/* kernel cma.c struct cma_hdr: cma_version | ip_version:4 rsvd:4 | port | src | dst. */
int sv__cm_ip_hdr_decode(struct sv_cm_ip_hdr *h, const uint8_t *p, size_t len)
{
	if (len < SV_CM_IP_HDR_LEN)
		return -EBADMSG;
	h->ip_version = p[1] >> 4;
	h->src_port = sv__get_be16(p + 2);
	memcpy(h->src_addr, p + 4, 16);
	memcpy(h->dst_addr, p + 20, 16);
	if (p[0] != 0 || (h->ip_version != 4 && h->ip_version != 6))
		return -EPROTO;
	return SV_CM_IP_HDR_LEN;
}

int sv__cm_ip_hdr_encode(uint8_t *p, size_t cap, const struct sv_cm_ip_hdr *h)
{
	if (cap < SV_CM_IP_HDR_LEN)
		return -ENOSPC;
	p[0] = 0;
	p[1] = (uint8_t)(h->ip_version << 4);
	sv__put_be16(p + 2, h->src_port);
	memcpy(p + 4, h->src_addr, 16);
	memcpy(p + 20, h->dst_addr, 16);
	return SV_CM_IP_HDR_LEN;
}
