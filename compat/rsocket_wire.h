/*
 * rsocket_wire.h — the rsocket protocol's formats and the receive side's message
 * handling, with no verbs objects (so that test/fuzz/fuzz_rsocket.c can drive them with
 * arbitrary peer input): the connection private data, the 32-bit messages, the queue of
 * data messages and the copy out of the receive buffer.
 *
 * The protocol is librdmacm's (rsocket protocol, rdma-core docs/rsocket): stream sockets
 * over RC QPs set up by rdma_cm. Each side exposes a receive buffer and a "target SGL"
 * (RS_SGL_SIZE entries, then the target iomap) the peer may RDMA-write; connection
 * private data (struct rs_conn_data) carries the version, initial credits, the target
 * SGL's and the first half of the receive buffer's address/rkey/length. Data moves by
 * RDMA WRITE with immediate into the peer's published receive buffer, the 32-bit
 * immediate (bits 31:29 the type, 28:0 its value) says what happened; a receiver
 * publishes the other half of its buffer (and grants credits) by RDMA-writing an rs_sge
 * into the sender's target SGL with a Credit Update immediate. On iWARP, which has no
 * immediate data in the RDMAP of RFC 5040, the message travels as a 4-byte Send after
 * the Write instead, as librdmacm does there (its RS_OPT_MSG_SEND).
 */
#ifndef SV_COMPAT_RSOCKET_WIRE_H
#define SV_COMPAT_RSOCKET_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "Message Format". */
#define RS_OP_DATA	0u
#define RS_OP_SGL	4u	/* Credit Update */
#define RS_OP_IOMAP_SGL 6u	/* Iomap Updated */
#define RS_OP_CTRL	7u
#define RS_CTRL_DISCONNECT 0u
#define RS_CTRL_SHUTDOWN   2u
#define RS_MSG(op, data) (((uint32_t)(op) << 29) | ((uint32_t)(data) & 0x1fffffffu))
#define RS_MSG_OP(m)	 ((m) >> 29)
#define RS_MSG_DATA(m)	 ((m) & 0x1fffffffu)
#define RS_MSG_SIZE	 4u

#define RS_CONN_VERSION	   1
#define RS_CONN_FLAG_NET   1u	/* the host is big-endian: SGL writes are in its order */
#define RS_CONN_FLAG_IOMAP 2u	/* a target iomap follows the target SGL */
#define RS_SGL_SIZE	   2
#define RS_MAX_TRANSFER	   65536

struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

/* Connection private data ("Connection Establishment"), fields big-endian. */
struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;
	uint8_t reserved[3];
	uint8_t target_iomap_size;	/* scaled: rs_scale() */
	struct rs_sge target_sgl;
	struct rs_sge data_buf;
};

/* What a peer's conn data says, in host order. */
struct rs_peer {
	struct rs_sge remote_sgl;	/* its target SGL: where our Credit Updates go */
	struct rs_sge remote_iomap;	/* its target iomap (length 0: none) */
	struct rs_sge first;		/* the first half of its receive buffer */
	uint16_t credits;
	bool swap_sgl;			/* its byte order differs from ours */
};

/* 0, or -EPROTO for private data that is not version 1 conn data with a target SGL. */
int rs_conn_decode(const void *priv, size_t len, struct rs_peer *p);
uint8_t rs_scale(uint16_t v);
uint16_t rs_unscale(uint8_t v);
bool rs_host_is_net(void);

/* The receive side: the data messages that arrived, in order, and where their bytes
 * are in rbuf (they follow each other, wrapping at rbuf_size). */
struct rs_rx {
	uint8_t *rbuf;
	uint32_t rbuf_size;
	uint16_t rq_size;		/* credits granted: at most this many messages queue */
	struct rs_rmsg {
		uint32_t op, data;
	} *rmsg;			/* rq_size + 1 entries */
	int head, tail, n;
	uint16_t rseq_no;		/* messages read to the end */
	uint32_t off;			/* where the next byte to read is */
	uint32_t bytes_avail;		/* rbuf bytes free and not published */
	uint32_t unwritten;		/* published and not written yet */
};

enum rs_took {
	RS_TOOK_DATA,
	RS_TOOK_CREDITS,	/* *credits: the peer's new credit limit */
	RS_TOOK_IOMAP,
	RS_TOOK_SHUTDOWN,
	RS_TOOK_DISCONNECT,
	RS_TOOK_IGNORED,	/* a type or control message this version does not use */
	RS_TOOK_BAD,		/* beyond the credits or the buffer space published */
};

enum rs_took rs_rx_take(struct rs_rx *rx, uint32_t msg, uint16_t *credits);
/* Copies up to len bytes of the queued data into buf; peek leaves them queued. */
size_t rs_rx_copy(struct rs_rx *rx, uint8_t *buf, size_t len, bool peek);

#endif /* SV_COMPAT_RSOCKET_WIRE_H */
