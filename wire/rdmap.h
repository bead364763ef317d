/*
 * rdmap.h — RDMAP codec (RFC 5040) with the RFC 7306 extensions (atomics, immediate data).
 *
 * sv__rdmap_decode() takes a whole ULPDU header area (DDP header + RDMAP header) and
 * returns a struct describing the message; encoders write the same headers. Error code
 * tables for Terminate live here too. See doc/wire-iwarp.md section 4.
 */
#ifndef SV_WIRE_RDMAP_H
#define SV_WIRE_RDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/ddp.h"

#define SV_RDMAP_VERSION 1
#define SV_RDMAP_RV_SHIFT 6
#define SV_RDMAP_OPCODE_MASK 0x0f

enum sv_rdmap_opcode {
	SV_RDMAP_WRITE = 0x0,
	SV_RDMAP_READ_REQ = 0x1,
	SV_RDMAP_READ_RESP = 0x2,
	SV_RDMAP_SEND = 0x3,
	SV_RDMAP_SEND_INV = 0x4,
	SV_RDMAP_SEND_SE = 0x5,
	SV_RDMAP_SEND_SE_INV = 0x6,
	SV_RDMAP_TERMINATE = 0x7,
	SV_RDMAP_IMM = 0x8,		/* RFC 7306 Immediate Data */
	SV_RDMAP_IMM_SE = 0x9,		/* RFC 7306 Immediate Data with SE */
	SV_RDMAP_ATOMIC_REQ = 0xa,	/* RFC 7306 */
	SV_RDMAP_ATOMIC_RESP = 0xb,	/* RFC 7306 */
};

#define SV_RDMAP_READ_REQ_LEN 28
#define SV_RDMAP_ATOMIC_REQ_LEN 52
#define SV_RDMAP_ATOMIC_RESP_LEN 12
#define SV_RDMAP_IMM_LEN 8
#define SV_RDMAP_TERM_CTRL_LEN 4
/* Largest DDP + RDMAP header of any message (untagged + atomic request). */
#define SV_RDMAP_MAX_HDR_LEN (SV_DDP_UNTAGGED_HDR_LEN + SV_RDMAP_ATOMIC_REQ_LEN)

/* RFC 7306 atomic operation codes (AOpCode, low nibble of the first word). */
enum sv_rdmap_aop {
	SV_RDMAP_AOP_FETCH_ADD = 0x0,
	SV_RDMAP_AOP_CMP_SWAP = 0x2,
};

struct sv_rdmap_read_req {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t src_stag;
	uint64_t src_to;
};

struct sv_rdmap_atomic_req {
	uint8_t aop;			/* enum sv_rdmap_aop */
	uint32_t req_id;
	uint32_t stag;
	uint64_t to;
	uint64_t add_swap;		/* Add Data or Swap Data */
	uint64_t add_swap_mask;
	uint64_t compare;
	uint64_t compare_mask;
};

struct sv_rdmap_atomic_resp {
	uint32_t req_id;
	uint64_t orig;			/* value before the operation */
};

/* Terminate layers, error types and codes (RFC 5040 section 7, RFC 5041, RFC 6581). */
enum sv_term_layer {
	SV_TERM_LAYER_RDMAP = 0,
	SV_TERM_LAYER_DDP = 1,
	SV_TERM_LAYER_LLP = 2,
};

enum sv_term_rdmap_etype {
	SV_TERM_RDMAP_CATASTROPHIC = 0,
	SV_TERM_RDMAP_REMOTE_PROT = 1,
	SV_TERM_RDMAP_REMOTE_OP = 2,
};

enum sv_term_rdmap_ecode {
	SV_TERM_RDMAP_INV_STAG = 0x00,
	SV_TERM_RDMAP_BASE_BOUNDS = 0x01,
	SV_TERM_RDMAP_ACCESS = 0x02,
	SV_TERM_RDMAP_STAG_NOT_ASSOC = 0x03,
	SV_TERM_RDMAP_TO_WRAP = 0x04,
	SV_TERM_RDMAP_INV_VERSION = 0x05,
	SV_TERM_RDMAP_UNEXP_OPCODE = 0x06,
	SV_TERM_RDMAP_CATASTROPHIC_STREAM = 0x07,
	SV_TERM_RDMAP_CATASTROPHIC_GLOBAL = 0x08,
	SV_TERM_RDMAP_CANT_INVALIDATE = 0x09,
	SV_TERM_RDMAP_UNSPECIFIED = 0xff,
};

enum sv_term_ddp_etype {
	SV_TERM_DDP_CATASTROPHIC = 0,
	SV_TERM_DDP_TAGGED = 1,
	SV_TERM_DDP_UNTAGGED = 2,
};

enum sv_term_ddp_ecode {
	/* tagged buffer errors */
	SV_TERM_DDP_T_INV_STAG = 0x00,
	SV_TERM_DDP_T_BASE_BOUNDS = 0x01,
	SV_TERM_DDP_T_STAG_NOT_ASSOC = 0x02,
	SV_TERM_DDP_T_TO_WRAP = 0x03,
	SV_TERM_DDP_T_INV_VERSION = 0x04,
	/* untagged buffer errors */
	SV_TERM_DDP_U_INV_QN = 0x01,
	SV_TERM_DDP_U_NO_BUFFER = 0x02,
	SV_TERM_DDP_U_MSN_RANGE = 0x03,
	SV_TERM_DDP_U_INV_MO = 0x04,
	SV_TERM_DDP_U_TOO_LONG = 0x05,
	SV_TERM_DDP_U_INV_VERSION = 0x06,
};

enum sv_term_llp_ecode {
	SV_TERM_LLP_CONN_LOST = 0x01,
	SV_TERM_LLP_CRC = 0x02,
	SV_TERM_LLP_MARKER = 0x03,
	SV_TERM_LLP_BAD_RR = 0x04,
	SV_TERM_LLP_CATASTROPHIC = 0x05,
	SV_TERM_LLP_INSUFF_IRD = 0x06,
	SV_TERM_LLP_NO_RTR = 0x07,
};

#define SV_TERM_FLAG_M 0x8000		/* DDP Segment Length valid */
#define SV_TERM_FLAG_D 0x4000		/* terminated DDP header included */
#define SV_TERM_FLAG_R 0x2000		/* terminated RDMAP header included */

/*
 * Terminate layout after the 4-byte control word (siw's, and what Wireshark parses):
 * when D is set, the 16-bit DDP Segment Length and then the copied DDP header, sized by
 * its own T bit (14 or 18 bytes); when R is set, the 28-byte copied RDMAP header. M only
 * marks the length as valid: with M and no D there is no length field on the wire.
 * Wireshark (4.0 and later) sizes the copied DDP header from EType instead: 14 bytes when
 * EType is 1, else 18, whatever the layer. So a tagged header copied under an EType other
 * than 1 (e.g. RDMAP remote operation on a Write) shows as "Malformed" in tshark, and an
 * untagged one under EType 1 is shown misaligned; send D only where the two agree if a
 * clean capture matters.
 */

struct sv_rdmap_term {
	uint8_t layer;
	uint8_t etype;
	uint8_t ecode;
	bool has_len;			/* M */
	bool has_ddp_hdr;		/* D */
	bool has_rdmap_hdr;		/* R */
	uint16_t ddp_seg_len;
	uint8_t ddp_hdr[SV_DDP_UNTAGGED_HDR_LEN];	/* copy of the offending DDP header */
	uint8_t ddp_hdr_len;				/* 14 or 18 when has_ddp_hdr */
	uint8_t rdmap_hdr[SV_RDMAP_READ_REQ_LEN];	/* copy of the offending RDMAP header */
};

/* A decoded message header: the DDP header plus the RDMAP header its opcode implies. */
struct sv_rdmap_msg {
	struct sv_ddp_hdr ddp;
	uint8_t rv;			/* RDMAP version from the wire */
	uint8_t opcode;			/* enum sv_rdmap_opcode */
	size_t hdr_len;			/* DDP + RDMAP header bytes; payload follows */
	union {
		struct sv_rdmap_read_req read_req;
		struct sv_rdmap_atomic_req atomic_req;
		struct sv_rdmap_atomic_resp atomic_resp;
		struct sv_rdmap_term term;
		uint8_t imm[SV_RDMAP_IMM_LEN];
	} u;
};

/*
 * Bytes of header (DDP + RDMAP) implied by the first two bytes of a DDP segment, so a
 * stream parser knows how much to read before it can decode. Returns 0 if the opcode is
 * not defined. A Terminate's length is its minimum (control word only); its optional
 * parts are payload from the stream's point of view.
 */
size_t sv__rdmap_hdr_len(uint8_t ddp_ctrl, uint8_t rdmap_ctrl);

/*
 * Decodes the headers of one DDP segment (the ULPDU, without MPA framing). Checks only
 * what the bytes say: DDP version (-EPROTO, m->ddp filled), RDMAP version and opcode
 * (-EPROTO with m->rv/m->opcode filled so the caller can send the right Terminate),
 * that the opcode's T bit matches (tagged: Write, Read Response; all others untagged,
 * -EPROTO), and length (-EBADMSG when len cannot hold the headers). For a Terminate the
 * optional length and copied headers are decoded when present. Queue numbers, MSNs and
 * keys are the caller's to judge. Returns m->hdr_len on success; for a Terminate that
 * includes the optional parts present.
 */
int sv__rdmap_decode(struct sv_rdmap_msg *m, const uint8_t *p, size_t len);

/*
 * Encodes m->ddp (with m->opcode in the RDMAP control byte, version 1) and the RDMAP
 * header of m->opcode from m->u. Returns the header length or -ENOSPC / -EINVAL.
 * For a Terminate the optional parts are written as m->u.term's flags say.
 */
int sv__rdmap_encode(uint8_t *p, size_t cap, const struct sv_rdmap_msg *m);

/* Text for a Terminate triple, e.g. "RDMAP remote protection: invalid STag". */
const char *sv__rdmap_term_str(uint8_t layer, uint8_t etype, uint8_t ecode);

#endif
