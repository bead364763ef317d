/*
 * rdmap_ops.c — the per-opcode table of rdmap_ops.h, row for row doc/wire-iwarp.md 4.2.
 * Header lengths: RFC 5040 section 4.4 (Read Request) and 4.8 (Terminate control word),
 * RFC 7306 sections 5.1-5.2 (Atomic Request and Response) and 6 (Immediate Data). Queue
 * numbers as in doc/wire-iwarp.md 3.4. MR access: the Write's target, the Read Request's
 * source and the Atomic Request's target are the responder's memory, named by STag.
 */
#include "wire/rdmap_ops.h"

#include "softverbs.h"

const struct sv_rdmap_op sv__rdmap_ops[SV_RDMAP_OPCODE_MASK + 1] = {
	[SV_RDMAP_WRITE] = {
		.name = "RDMA Write", .tagged = true, .access = SV_ACCESS_REMOTE_WRITE,
	},
	[SV_RDMAP_READ_REQ] = {
		.name = "RDMA Read Request", .rdmap_len = SV_RDMAP_READ_REQ_LEN,
		.qn = SV_DDP_QN_READ_REQ, .access = SV_ACCESS_REMOTE_READ, .rd_req = true,
	},
	/* Lands in the requester's own sink, matched against its ORD queue: no MR. */
	[SV_RDMAP_READ_RESP] = { .name = "RDMA Read Response", .tagged = true },
	[SV_RDMAP_SEND] = { .name = "Send", .qn = SV_DDP_QN_SEND, .recv = true },
	[SV_RDMAP_SEND_INV] = {
		.name = "Send with Invalidate", .qn = SV_DDP_QN_SEND, .recv = true, .inv = true,
	},
	[SV_RDMAP_SEND_SE] = {
		.name = "Send with Solicited Event", .qn = SV_DDP_QN_SEND, .recv = true,
		.se = true,
	},
	[SV_RDMAP_SEND_SE_INV] = {
		.name = "Send with Solicited Event and Invalidate", .qn = SV_DDP_QN_SEND,
		.recv = true, .se = true, .inv = true,
	},
	[SV_RDMAP_TERMINATE] = {
		.name = "Terminate", .rdmap_len = SV_RDMAP_TERM_CTRL_LEN,
		.qn = SV_DDP_QN_TERMINATE,
	},
	[SV_RDMAP_IMM] = {
		.name = "Immediate Data", .rdmap_len = SV_RDMAP_IMM_LEN, .qn = SV_DDP_QN_SEND,
		.recv = true, .imm = true,
	},
	[SV_RDMAP_IMM_SE] = {
		.name = "Immediate Data with Solicited Event", .rdmap_len = SV_RDMAP_IMM_LEN,
		.qn = SV_DDP_QN_SEND, .recv = true, .se = true, .imm = true,
	},
	[SV_RDMAP_ATOMIC_REQ] = {
		.name = "Atomic Request", .rdmap_len = SV_RDMAP_ATOMIC_REQ_LEN,
		.qn = SV_DDP_QN_READ_REQ, .access = SV_ACCESS_REMOTE_ATOMIC, .rd_req = true,
	},
	[SV_RDMAP_ATOMIC_RESP] = {
		.name = "Atomic Response", .rdmap_len = SV_RDMAP_ATOMIC_RESP_LEN,
		.qn = SV_DDP_QN_ATOMIC_RESP,
	},
};
