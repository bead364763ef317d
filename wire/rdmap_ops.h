/*
 * rdmap_ops.h — one row per RDMAP opcode (RFC 5040 section 4, RFC 7306 sections 5-6; the
 * table of doc/wire-iwarp.md section 4.2): its header, its buffer model and queue, and
 * what it asks of the side that receives it. The codec (rdmap.c) sizes and checks headers
 * from it and the receive engine (iwarp_rx.c) dispatches on it, so a property of an
 * opcode is written once, here, not as a case list wherever it matters.
 */
#ifndef SV_WIRE_RDMAP_OPS_H
#define SV_WIRE_RDMAP_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/rdmap.h"

struct sv_rdmap_op {
	const char *name;		/* NULL: a reserved opcode (no row) */
	uint8_t rdmap_len;		/* RDMAP header bytes after the DDP header; for a
					 * Terminate the control word only (its minimum) */
	bool tagged;			/* tagged buffer model; all others are untagged */
	uint8_t qn;			/* untagged: the DDP queue (enum sv_ddp_qn,
					 * doc/wire-iwarp.md 3.4) */
	uint8_t access;			/* enum sv_access_flags the responder's MR must
					 * grant the data it names; 0: no MR is named */
	bool rd_req;			/* a Read or Atomic Request: an ORD slot at the
					 * requester and an IRD slot at the responder until
					 * its response (doc/wire-iwarp.md 4.3, 4.7) */
	bool recv;			/* placed in a posted receive (Send family and
					 * Immediate Data, QN 0) */
	bool se;			/* Solicited Event */
	bool inv;			/* invalidates the STag in RsvdULP (RFC 5040 4.1) */
	bool imm;			/* carries Immediate Data (RFC 7306 section 6) */
};

/* Indexed by the 4-bit RDMAP opcode; reserved opcodes have a zeroed row. */
extern const struct sv_rdmap_op sv__rdmap_ops[SV_RDMAP_OPCODE_MASK + 1];

/* The row of an opcode (only its low 4 bits are looked at), or NULL if it is reserved. */
static inline const struct sv_rdmap_op *sv__rdmap_op(uint8_t opcode)
{
	const struct sv_rdmap_op *o = &sv__rdmap_ops[opcode & SV_RDMAP_OPCODE_MASK];

	return o->name ? o : NULL;
}

#endif
