/*
 * ddp.h — DDP segment header codec (RFC 5041), tagged and untagged buffer models.
 *
 * One DDP segment is the ULPDU of one MPA FPDU. Byte 1 of the DDP header belongs to the
 * upper layer (RDMAP's control byte); this codec hands it through as rsvd_ulp0 and leaves
 * its meaning to rdmap.h. See doc/wire-iwarp.md section 3.
 */
#ifndef SV_WIRE_DDP_H
#define SV_WIRE_DDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_DDP_TAGGED_HDR_LEN 14
#define SV_DDP_UNTAGGED_HDR_LEN 18
#define SV_DDP_VERSION 1

#define SV_DDP_FLAG_T 0x80
#define SV_DDP_FLAG_L 0x40
#define SV_DDP_DV_MASK 0x03

/* Untagged queue numbers (RFC 5040 section 5, RFC 7306). */
enum sv_ddp_qn {
	SV_DDP_QN_SEND = 0,		/* Send*, Immediate Data */
	SV_DDP_QN_READ_REQ = 1,		/* RDMA Read Request, Atomic Request */
	SV_DDP_QN_TERMINATE = 2,
	SV_DDP_QN_ATOMIC_RESP = 3,
};

struct sv_ddp_hdr {
	bool tagged;
	bool last;
	uint8_t dv;			/* DDP version from the wire */
	uint8_t ulp_ctrl;		/* byte 1: the RDMAP control byte */
	/* tagged */
	uint32_t stag;
	uint64_t to;
	/* untagged */
	uint32_t ulp_word;		/* bytes 2-5: RsvdULP (invalidate STag) */
	uint32_t qn;
	uint32_t msn;
	uint32_t mo;
};

/* Header length implied by the first byte of a DDP segment (14 or 18). */
static inline size_t sv__ddp_hdr_len(uint8_t ctrl)
{
	return (ctrl & SV_DDP_FLAG_T) ? SV_DDP_TAGGED_HDR_LEN : SV_DDP_UNTAGGED_HDR_LEN;
}

/*
 * Decodes a DDP header from the start of a ULPDU. Returns its length (14/18), -EBADMSG
 * when len is shorter than the header, -EPROTO for a DDP version other than 1 (the caller
 * answers with Terminate DDP "invalid DDP version").
 */
int sv__ddp_decode(struct sv_ddp_hdr *h, const uint8_t *p, size_t len);

/* Encodes h (dv is written as 1). Returns 14/18 or -ENOSPC. */
int sv__ddp_encode(uint8_t *p, size_t cap, const struct sv_ddp_hdr *h);

#endif
