/*
 * ib_cm.h — InfiniBand Communication Management MADs (IBA vol. 1 chapter 12, tables
 * 106-113; chapter 13.4 for the MAD header) as RoCEv2 carries them: a 256-byte MAD in the
 * payload of a UD SEND_ONLY to QP1 (DETH Q_Key 0x80010000, source QP 1).
 *
 * Layout: the 24-byte MAD common header, then 232 bytes of CM message at the byte and
 * bit offsets of the IBA tables (tables 106-113 for connections, 119-120 for service ID
 * resolution, IBA 12.11; as the Linux kernel's include/rdma/ibta_vol1_c12.h and
 * Wireshark's packet-infiniband.c lay them out), so that analysers decode our MADs as CM.
 * Private data is fixed-size per message, as on InfiniBand; the first 36 bytes of a REQ's
 * private data may carry the RDMA CM IP header (sv__cm_ip_hdr_*), as librdmacm does.
 *
 * Decoders return SV_MAD_LEN or -EBADMSG (short) / -EPROTO (not a CM Send MAD of base
 * version 1, class version 2, or an attribute we do not know); encoders return SV_MAD_LEN
 * or -ENOSPC, and write reserved bits as zero.
 */
#ifndef SV_WIRE_IB_CM_H
#define SV_WIRE_IB_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_MAD_LEN 256
#define SV_MAD_HDR_LEN 24
#define SV_CM_MSG_LEN (SV_MAD_LEN - SV_MAD_HDR_LEN)	/* 232 */

#define SV_MAD_BASE_VERSION 1
#define SV_MAD_CLASS_CM 0x07
#define SV_MAD_CM_CLASS_VERSION 2
#define SV_MAD_METHOD_SEND 0x03

#define SV_GSI_QPN 1			/* QP1: the general services interface */

/* CM attribute IDs (IBA table 104). */
enum sv_cm_attr {
	SV_CM_ATTR_REQ = 0x0010,
	SV_CM_ATTR_MRA = 0x0011,
	SV_CM_ATTR_REJ = 0x0012,
	SV_CM_ATTR_REP = 0x0013,
	SV_CM_ATTR_RTU = 0x0014,
	SV_CM_ATTR_DREQ = 0x0015,
	SV_CM_ATTR_DREP = 0x0016,
	SV_CM_ATTR_SIDR_REQ = 0x0017,
	SV_CM_ATTR_SIDR_REP = 0x0018,
};

/* Private data sizes, fixed per message (IBA tables 106-113). */
#define SV_CM_REQ_PRIVATE_LEN 92
#define SV_CM_MRA_PRIVATE_LEN 222
#define SV_CM_REJ_PRIVATE_LEN 148
#define SV_CM_REP_PRIVATE_LEN 196
#define SV_CM_RTU_PRIVATE_LEN 224
#define SV_CM_DREQ_PRIVATE_LEN 220
#define SV_CM_DREP_PRIVATE_LEN 224
#define SV_CM_REJ_ARI_LEN 72
#define SV_CM_SIDR_REQ_PRIVATE_LEN 216
#define SV_CM_SIDR_REP_PRIVATE_LEN 136
#define SV_CM_SIDR_REP_INFO_LEN 72

/* REQ transport service type (2 bits). */
enum sv_cm_transport {
	SV_CM_TRANSPORT_RC = 0,
	SV_CM_TRANSPORT_UC = 1,
	SV_CM_TRANSPORT_RD = 2,
};

/* REJ "message rejected" and MRA "message MRAed" (2 bits). */
enum sv_cm_msg_ref {
	SV_CM_MSG_REQ = 0,
	SV_CM_MSG_REP = 1,
	SV_CM_MSG_OTHER = 2,		/* REJ: "no message" / MRA: LAP */
};

/* REJ reasons we send or act on (IBA table 109, kernel ib_cm_rej_reason). */
enum sv_cm_rej_reason {
	SV_CM_REJ_NO_QP = 1,
	SV_CM_REJ_NO_RESOURCES = 3,
	SV_CM_REJ_TIMEOUT = 4,
	SV_CM_REJ_UNSUPPORTED = 5,
	SV_CM_REJ_INVALID_COMM_ID = 6,
	SV_CM_REJ_INVALID_SERVICE_ID = 8,
	SV_CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	SV_CM_REJ_STALE_CONN = 10,
	SV_CM_REJ_INVALID_MTU = 26,
	SV_CM_REJ_CONSUMER_DEFINED = 28,
};

/* SIDR_REP status (IBA table 121, kernel ib_cm_sidr_status). */
enum sv_cm_sidr_status {
	SV_CM_SIDR_SUCCESS = 0,
	SV_CM_SIDR_UNSUPPORTED = 1,	/* no service at that service ID */
	SV_CM_SIDR_REJECT = 2,		/* the consumer refused */
	SV_CM_SIDR_NO_QP = 3,
	SV_CM_SIDR_REDIRECT = 4,
	SV_CM_SIDR_UNSUPPORTED_VERSION = 5,
};

/*
 * What our REQs and REPs announce, as the Linux kernel's rdma_cm does on RoCE (facts of its
 * cma.c): CM response timeouts 20 (4.096 us * 2^20 = 4.3 s), Max CM Retries 15 (resends
 * after the first), and a path PacketLifeTime of 18 (1.07 s; RoCE has no subnet manager
 * to ask, so rdma_cm assumes one) from which the Local ACK Timeout follows
 * (sv__cm_ack_timeout). A path that never leaves the host (a loopback device) is known
 * to be short: 13 (33.5 ms, so a 67 ms ACK timeout) there.
 */
#define SV_CM_RESPONSE_TIMEOUT 20
#define SV_CM_MAX_RETRIES 15
#define SV_CM_PACKET_LIFE_TIME 18
#define SV_CM_PACKET_LIFE_TIME_HOST 13

/*
 * IBA 12.7.34: Local ACK Timeout = 2 * PacketLifeTime + the local CA's ACK delay. Both
 * terms are 4.096 us * 2^x exponents, and the sum of two powers of two is bounded by the
 * larger doubled: the larger exponent, plus one when the two are within one of each
 * other (the rounding the kernel's ib_cm applies; a term two or more below is absorbed).
 * With packet_life_time 18 (2 * PLT: exponent 19) and rxe's ACK delay 15, or ours, that
 * is 19, the kernel's REQ value; the result is capped at 31, the 5 bits.
 */
uint8_t sv__cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time);

/*
 * The primary path's Flow Label in a REQ on RoCEv2, as the kernel's rdma_cm fills it for
 * an IPv4 peer or an IPv6 socket without a flow label of its own: the rdma_cm source and
 * destination (service) ports hashed as sport * 31 + dport, 20 bits.
 */
uint32_t sv__cm_flow_label(uint16_t sport, uint16_t dport);

/* MAD common header (IBA 13.4.2), host order. */
struct sv_mad_hdr {
	uint8_t base_version;
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t method;			/* bit 7 = response bit, kept as is */
	uint16_t status;
	uint16_t class_specific;
	uint64_t tid;			/* transaction ID, opaque to the receiver */
	uint16_t attr_id;
	uint32_t attr_mod;
};

/* One path of a REQ (primary or alternate). On RoCE the GIDs are the IP addresses as
 * IPv6 or IPv4-mapped IPv6, and the LIDs are 0xFFFF (permissive, no subnet manager). */
struct sv_cm_path {
	uint16_t local_lid;
	uint16_t remote_lid;
	uint8_t local_gid[16];
	uint8_t remote_gid[16];
	uint32_t flow_label;		/* 20 bits */
	uint8_t packet_rate;		/* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl;			/* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout;	/* 5 bits: 4.096 us * 2^t */
};

/* REQ (IBA table 106). */
struct sv_cm_req {
	uint32_t local_comm_id;
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn;		/* 24 bits */
	uint8_t responder_resources;	/* our max_dest_rd_atomic offered to the peer */
	uint32_t local_eecn;		/* 24 bits, RD only */
	uint8_t initiator_depth;	/* our max_rd_atomic */
	uint32_t remote_eecn;		/* 24 bits, RD only */
	uint8_t remote_cm_response_timeout;	/* 5 bits */
	uint8_t transport;		/* enum sv_cm_transport, 2 bits */
	bool e2e_flow_control;
	uint32_t starting_psn;		/* 24 bits: the PSN the REQ's sender expects to
					 * receive first (its rq_psn), so the passive
					 * QP's first send PSN; see roce_cm.c */
	uint8_t local_cm_response_timeout;	/* 5 bits */
	uint8_t retry_count;		/* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu;		/* 4 bits, enum sv_mtu (1 = 256 ... 5 = 4096) */
	bool rdc_exists;
	uint8_t rnr_retry_count;	/* 3 bits, 7 = infinite */
	uint8_t max_cm_retries;		/* 4 bits */
	bool srq;
	uint8_t ext_transport;		/* 3 bits, 0 */
	struct sv_cm_path primary;
	struct sv_cm_path alternate;	/* all zero when there is none */
	uint8_t private_data[SV_CM_REQ_PRIVATE_LEN];
};

/* MRA (IBA table 107). */
struct sv_cm_mra {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t msg_mraed;		/* enum sv_cm_msg_ref */
	uint8_t service_timeout;	/* 5 bits */
	uint8_t private_data[SV_CM_MRA_PRIVATE_LEN];
};

/* REJ (IBA table 108). */
struct sv_cm_rej {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t msg_rejected;		/* enum sv_cm_msg_ref */
	uint8_t ari_len;		/* 7 bits: valid bytes of ari */
	uint16_t reason;		/* enum sv_cm_rej_reason */
	uint8_t ari[SV_CM_REJ_ARI_LEN];
	uint8_t private_data[SV_CM_REJ_PRIVATE_LEN];
};

/* REP (IBA table 110). */
struct sv_cm_rep {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;		/* 24 bits */
	uint32_t local_eecn;		/* 24 bits */
	uint32_t starting_psn;		/* 24 bits: the REP sender's rq_psn, the active
					 * QP's first send PSN */
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t target_ack_delay;	/* 5 bits: the passive CA's ACK delay */
	uint8_t failover_accepted;	/* 2 bits */
	bool e2e_flow_control;
	uint8_t rnr_retry_count;	/* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t private_data[SV_CM_REP_PRIVATE_LEN];
};

/* RTU (table 111) and DREP (table 113) share one layout. */
struct sv_cm_rtu {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint8_t private_data[SV_CM_RTU_PRIVATE_LEN];
};

/* DREQ (IBA table 112). */
struct sv_cm_dreq {
	uint32_t local_comm_id;
	uint32_t remote_comm_id;
	uint32_t remote_qpn;		/* 24 bits: the receiver's QP to disconnect */
	uint8_t private_data[SV_CM_DREQ_PRIVATE_LEN];
};

/* SIDR_REQ (IBA table 119): which UD QP serves service_id? */
struct sv_cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint64_t service_id;
	uint8_t private_data[SV_CM_SIDR_REQ_PRIVATE_LEN];
};

/* SIDR_REP (IBA table 120): the answer, echoing request_id and service_id. */
struct sv_cm_sidr_rep {
	uint32_t request_id;
	uint8_t status;			/* enum sv_cm_sidr_status */
	uint8_t info_len;		/* valid bytes of info */
	uint32_t qpn;			/* 24 bits */
	uint64_t service_id;
	uint32_t qkey;
	uint8_t info[SV_CM_SIDR_REP_INFO_LEN];
	uint8_t private_data[SV_CM_SIDR_REP_PRIVATE_LEN];
};

/* One CM MAD. mad.attr_id selects the union member. */
struct sv_cm_msg {
	struct sv_mad_hdr mad;
	union {
		struct sv_cm_req req;
		struct sv_cm_mra mra;
		struct sv_cm_rej rej;
		struct sv_cm_rep rep;
		struct sv_cm_rtu rtu;
		struct sv_cm_dreq dreq;
		struct sv_cm_rtu drep;
		struct sv_cm_sidr_req sidr_req;
		struct sv_cm_sidr_rep sidr_rep;
	};
};

int sv__mad_hdr_decode(struct sv_mad_hdr *h, const uint8_t *p, size_t len);
int sv__mad_hdr_encode(uint8_t *p, size_t cap, const struct sv_mad_hdr *h);

/*
 * Decodes one CM MAD p[0..len) (len >= 256; bytes past 256 are ignored, so a UD payload
 * can be passed whole). Returns SV_MAD_LEN, -EBADMSG when short, -EPROTO when the header
 * is not base version 1 / class CM / class version 2 / method Send or the attribute is not
 * one of REQ MRA REJ REP RTU DREQ DREP SIDR_REQ SIDR_REP (m->mad is filled in either case,
 * for logging).
 */
int sv__cm_decode(struct sv_cm_msg *m, const uint8_t *p, size_t len);

/*
 * Encodes m as a 256-byte MAD; mad.base_version/mgmt_class/class_version/method are
 * written as given (sv__cm_mad_init sets the standard values). Returns SV_MAD_LEN,
 * -ENOSPC, or -EPROTO for an unknown attribute.
 */
int sv__cm_encode(uint8_t *p, size_t cap, const struct sv_cm_msg *m);

/* Zeroes m and sets the MAD header for a CM Send of attribute attr with transaction tid. */
void sv__cm_mad_init(struct sv_cm_msg *m, enum sv_cm_attr attr, uint64_t tid);

/* "REQ", "REP", ..., "SIDR_REP" or "?" (logs and tests). */
const char *sv__cm_attr_name(uint16_t attr_id);

/* ---- RDMA CM IP addressing (librdmacm / kernel cma.c conventions) ---- */

/* Service ID of an RDMA CM port-space listener (kernel cma_get_service_id()): the
 * 16-bit port space above the 16-bit port, e.g. 0x0000000001060000 | port for TCP. */
#define SV_CMA_PS_TCP 0x0106		/* RDMA_PS_TCP: RC connections (REQ) */
#define SV_CMA_PS_UDP 0x0111		/* RDMA_PS_UDP: UD service resolution (SIDR) */
#define SV_CMA_PS_IPOIB 0x0002		/* RDMA_PS_IPOIB: UD as well */
#define SV_CM_SID_PS_TCP 0x0000000001060000ull
static inline uint64_t sv__cm_service_id(uint16_t port)
{
	return SV_CM_SID_PS_TCP | port;
}

static inline uint64_t sv__cm_service_id_ps(uint16_t ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

/*
 * The RDMA CM IP header at the start of a REQ's private data (36 bytes): CMA version 0,
 * IP version in the high nibble of byte 1 (4 or 6), source port, then source and
 * destination addresses as 16 bytes each (IPv4 in the last 4 bytes, rest zero). The
 * application's private data follows, at most 92 - 36 = 56 bytes in a REQ and
 * 216 - 36 = 180 bytes in a SIDR_REQ.
 */
#define SV_CM_IP_HDR_LEN 36
#define SV_CM_IP_PRIVATE_MAX (SV_CM_REQ_PRIVATE_LEN - SV_CM_IP_HDR_LEN)
#define SV_CM_SIDR_IP_PRIVATE_MAX (SV_CM_SIDR_REQ_PRIVATE_LEN - SV_CM_IP_HDR_LEN)

struct sv_cm_ip_hdr {
	uint8_t ip_version;		/* 4 or 6 */
	uint16_t src_port;
	uint8_t src_addr[16];		/* IPv6, or IPv4 in bytes 12..15 */
	uint8_t dst_addr[16];
};

/* Returns SV_CM_IP_HDR_LEN, -EBADMSG when short, -EPROTO for a CMA version other than 0
 * or an IP version other than 4/6. */
int sv__cm_ip_hdr_decode(struct sv_cm_ip_hdr *h, const uint8_t *p, size_t len);
int sv__cm_ip_hdr_encode(uint8_t *p, size_t cap, const struct sv_cm_ip_hdr *h);

#endif
