/*
 * fuzz_rsocket.c — libFuzzer target for what an rsocket peer sends besides stream bytes
 * (compat/rsocket_wire.c): the connection private data (rs_conn_decode) and the 32-bit
 * messages a receiver takes (rs_rx_take), interleaved with the application's reads
 * (rs_rx_copy, with and without MSG_PEEK) and the receiver's publishing of the other
 * half of its buffer, as compat/rsocket_io.c does them.
 *
 * Input: 40 bytes of conn data, a byte choosing the receive queue size and one the buffer
 * size, then 5-byte records (an action byte and a 32-bit value). The harness plays the
 * sending peer's RDMA WRITEs: every data message it accepts, the harness writes that many
 * bytes of a running counter at the place they land, so every read is checked for the
 * stream's bytes in order. Invariants: the queue never holds more messages than the
 * credits granted; free + published-unwritten + queued bytes is always the buffer size;
 * a peek changes nothing and returns what the next read does; a decoded conn data
 * round-trips to the fields it came from.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>

#include "compat/rsocket_wire.h"

#define CHECK(c)                                                                           \
	do {                                                                               \
		if (!(c))                                                                  \
			abort();                                                           \
	} while (0)

static void check_conn(const uint8_t *data)
{
	struct rs_conn_data c;
	struct rs_peer p;
	int rc = rs_conn_decode(data, sizeof(c), &p);

	memcpy(&c, data, sizeof(c));
	CHECK(rs_conn_decode(data, sizeof(c) - 1, &p) == -EPROTO);
	if (c.version != RS_CONN_VERSION || !c.target_sgl.length) {
		CHECK(rc == -EPROTO);
		return;
	}
	CHECK(rc == 0);
	CHECK(p.remote_sgl.addr == be64toh(c.target_sgl.addr));
	CHECK(p.remote_sgl.length == be32toh(c.target_sgl.length));
	CHECK(p.first.length == be32toh(c.data_buf.length));
	CHECK(p.credits == be16toh(c.credits));
	if (c.flags & RS_CONN_FLAG_IOMAP) {
		CHECK(p.remote_iomap.key == p.remote_sgl.key);
		CHECK(rs_scale(p.remote_iomap.length) == c.target_iomap_size ||
		      (c.target_iomap_size & 0x80));
	} else {
		CHECK(p.remote_iomap.length == 0);
	}
}

static uint32_t queued(const struct rs_rx *rx)
{
	uint32_t q = 0;

	for (int i = 0, h = rx->head; i < rx->n; i++, h = (h + 1) % (rx->rq_size + 1))
		q += rx->rmsg[h].data;
	return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rs_rx rx = { 0 }, before;
	uint8_t *peeked, *got;
	uint32_t wr_off = 0;
	uint8_t next_out = 0, next_in = 0;

	if (size < sizeof(struct rs_conn_data) + 2)
		return 0;
	check_conn(data);
	data += sizeof(struct rs_conn_data);
	size -= sizeof(struct rs_conn_data);
	rx.rq_size = (uint16_t)(1 + data[0] % 64);
	rx.rbuf_size = 4096u * (1u + data[1] % 8);
	data += 2;
	size -= 2;
	rx.rbuf = calloc(1, rx.rbuf_size);
	rx.rmsg = calloc((size_t)rx.rq_size + 1, sizeof(*rx.rmsg));
	peeked = malloc(70000);
	got = malloc(70000);
	CHECK(rx.rbuf && rx.rmsg && peeked && got);
	/* The first half went out in the conn data (rsocket_io.c rs_conn_init). */
	rx.bytes_avail = rx.unwritten = rx.rbuf_size / 2;

	for (; size >= 5; data += 5, size -= 5) {
		uint32_t v = (uint32_t)data[1] | (uint32_t)data[2] << 8 |
			     (uint32_t)data[3] << 16 | (uint32_t)data[4] << 24;
		uint32_t q = queued(&rx), msg;
		uint16_t credits;
		enum rs_took t;
		size_t n, len;

		switch (data[0] % 4) {
		case 0:		/* any message */
		case 3:		/* a data message of a plausible length */
			msg = data[0] % 4 ? RS_MSG(RS_OP_DATA, v % (rx.rbuf_size / 2 + 1)) : v;
			before = rx;
			t = rs_rx_take(&rx, msg, &credits);
			if (t != RS_TOOK_DATA) {
				CHECK(rx.n == before.n && rx.unwritten == before.unwritten);
				if (t == RS_TOOK_CREDITS)
					CHECK(credits == (uint16_t)RS_MSG_DATA(msg));
				break;
			}
			CHECK(RS_MSG_OP(msg) == RS_OP_DATA && RS_MSG_DATA(msg) > 0);
			/* The peer's Write: the message's bytes where they land. */
			for (uint32_t i = 0; i < RS_MSG_DATA(msg); i++) {
				rx.rbuf[wr_off] = next_in++;
				wr_off = (wr_off + 1) % rx.rbuf_size;
			}
			break;
		case 1:		/* a read, or a peek then the same read */
			len = v % 70000;
			if (data[0] & 4) {
				before = rx;
				n = rs_rx_copy(&rx, peeked, len, true);
				CHECK(!memcmp(&before, &rx, sizeof(rx)));
				CHECK(rs_rx_copy(&rx, got, len, false) == n);
				CHECK(!memcmp(peeked, got, n));
			} else {
				n = rs_rx_copy(&rx, got, len, false);
			}
			CHECK(n <= len && n <= q && (n == len || n == q));
			CHECK(queued(&rx) == q - n);
			for (size_t i = 0; i < n; i++)
				CHECK(got[i] == next_out++);
			break;
		case 2:		/* a Credit Update publishing a half (send_credits) */
			if (rx.bytes_avail >= rx.rbuf_size / 2) {
				rx.bytes_avail -= rx.rbuf_size / 2;
				rx.unwritten += rx.rbuf_size / 2;
			}
			break;
		}
		CHECK(rx.n >= 0 && rx.n <= rx.rq_size);
		CHECK(rx.bytes_avail + rx.unwritten + queued(&rx) == rx.rbuf_size);
	}
	free(rx.rbuf);
	free(rx.rmsg);
	free(peeked);
	free(got);
	return 0;
}
