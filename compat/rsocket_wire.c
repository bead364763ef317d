/*
 * rsocket_wire.c — the rsocket protocol's decoding and the receive side's queue
 * (rsocket_wire.h; rsocket protocol, rdma-core docs/rsocket). Everything a peer sends
 * that is not bytes of the stream passes through here.
 */
#include <errno.h>
#include <string.h>
#include <endian.h>

#include "compat/rsocket_wire.h"

/* The iomap size in conn data is an 8-bit scaled value, as librdmacm encodes it: below
 * 128 the value itself, else 0x80 | (value >> 8). */
uint8_t rs_scale(uint16_t v)
{
	return v < 128 ? (uint8_t)v : (uint8_t)(0x80 | (v >> 8));
}

uint16_t rs_unscale(uint8_t v)
{
	return v & 0x80 ? (uint16_t)((v & 0x7f) << 8) : v;
}

bool rs_host_is_net(void)
{
	return htobe32(1) == 1;
}

int rs_conn_decode(const void *priv, size_t len, struct rs_peer *p)
{
	struct rs_conn_data c;

	if (!priv || len < sizeof(c))
		return -EPROTO;
	memcpy(&c, priv, sizeof(c));
	if (c.version != RS_CONN_VERSION)
		return -EPROTO;
	memset(p, 0, sizeof(*p));
	p->remote_sgl.addr = be64toh(c.target_sgl.addr);
	p->remote_sgl.length = be32toh(c.target_sgl.length);
	p->remote_sgl.key = be32toh(c.target_sgl.key);
	if (!p->remote_sgl.length)
		return -EPROTO;
	p->swap_sgl = !(c.flags & RS_CONN_FLAG_NET) != !rs_host_is_net();
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		/* The iomap follows the SGL in the peer's target memory. */
		p->remote_iomap.addr = p->remote_sgl.addr +
				       sizeof(struct rs_sge) * (uint64_t)p->remote_sgl.length;
		p->remote_iomap.length = rs_unscale(c.target_iomap_size);
		p->remote_iomap.key = p->remote_sgl.key;
	}
	p->first.addr = be64toh(c.data_buf.addr);
	p->first.length = be32toh(c.data_buf.length);
	p->first.key = be32toh(c.data_buf.key);
	p->credits = be16toh(c.credits);
	return 0;
}

enum rs_took rs_rx_take(struct rs_rx *rx, uint32_t msg, uint16_t *credits)
{
	switch (RS_MSG_OP(msg)) {
	case RS_OP_SGL:
		*credits = (uint16_t)RS_MSG_DATA(msg);
		return RS_TOOK_CREDITS;
	case RS_OP_IOMAP_SGL:
		return RS_TOOK_IOMAP;	/* the entry is in our target iomap already */
	case RS_OP_CTRL:
		if (RS_MSG_DATA(msg) == RS_CTRL_DISCONNECT)
			return RS_TOOK_DISCONNECT;
		if (RS_MSG_DATA(msg) == RS_CTRL_SHUTDOWN)
			return RS_TOOK_SHUTDOWN;
		return RS_TOOK_IGNORED;	/* KEEPALIVE, and any later one */
	case RS_OP_DATA:
		/* A message's bytes are in space we published; more messages than the
		 * credits granted have no place in the queue. */
		if (RS_MSG_DATA(msg) > rx->unwritten || rx->n >= rx->rq_size)
			return RS_TOOK_BAD;
		if (!RS_MSG_DATA(msg))
			return RS_TOOK_IGNORED;
		rx->unwritten -= RS_MSG_DATA(msg);
		rx->rmsg[rx->tail].op = RS_MSG_OP(msg);
		rx->rmsg[rx->tail].data = RS_MSG_DATA(msg);
		rx->tail = (rx->tail + 1) % (rx->rq_size + 1);
		rx->n++;
		return RS_TOOK_DATA;
	default:
		return RS_TOOK_IGNORED;
	}
}

size_t rs_rx_copy(struct rs_rx *rx, uint8_t *buf, size_t len, bool peek)
{
	int head = rx->head, n = rx->n;
	uint32_t off = rx->off, left = n ? rx->rmsg[head].data : 0;
	size_t done = 0;

	while (done < len && n > 0) {
		uint32_t take = (uint32_t)(len - done < left ? len - done : left);

		for (uint32_t t = take; t;) {
			uint32_t run = rx->rbuf_size - off < t ? rx->rbuf_size - off : t;

			memcpy(buf + done, rx->rbuf + off, run);
			done += run;
			off = (off + run) % rx->rbuf_size;
			t -= run;
		}
		if (take < left) {
			left -= take;
			break;
		}
		head = (head + 1) % (rx->rq_size + 1);
		n--;
		left = n ? rx->rmsg[head].data : 0;
		if (!peek)
			rx->rseq_no++;
	}
	if (!peek) {
		if (n)
			rx->rmsg[head].data = left;
		rx->head = head;
		rx->n = n;
		rx->off = off;
		rx->bytes_avail += (uint32_t)done;
	}
	return done;
}
