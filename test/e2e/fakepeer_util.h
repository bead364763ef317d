/*
 * fakepeer_util.h — a hand-driven iWARP peer on a raw TCP socket.
 *
 * The tests use it to show softverbs bytes it would never produce itself (wrong CRCs,
 * bad versions, unknown opcodes, impossible lengths) and to read back exactly what
 * softverbs sends (MPA Reply flags, Terminate triples, CRCs). Frames are built with the
 * project's own codecs (wire/mpa.h, wire/rdmap.h, crypto/crc32c.h); the framing around
 * them (length, PAD, CRC trailer) is spelled out here so a codec bug cannot hide a
 * transport bug. No markers: the fake peer never asks for them.
 *
 * Every socket operation has a deadline; helpers assert (Criterion) on failure.
 */
#ifndef SV_TEST_FAKEPEER_UTIL_H
#define SV_TEST_FAKEPEER_UTIL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/mpa.h"
#include "wire/rdmap.h"

/* One side of a raw MPA connection. */
struct fp_conn {
	int fd;
	bool crc;		/* CRC in use on this connection (after the MPA exchange) */
	uint32_t send_msn;	/* next MSN on QN 0 */
	uint32_t rreq_msn;	/* next MSN on QN 1 */
	uint8_t rx[70000];	/* bytes read but not consumed */
	size_t rx_len;
};

/* TCP connect to addr (blocking, bounded by SO_SNDTIMEO). */
void fp_connect(struct fp_conn *c, const struct sockaddr_in *addr);
/* A listening socket on 127.0.0.1 with a free port written to *addr. */
int fp_listen(struct sockaddr_in *addr);
/* Accepts one connection within timeout_ms into c. */
void fp_accept(struct fp_conn *c, int lfd, int timeout_ms);
void fp_close(struct fp_conn *c);

void fp_send_all(struct fp_conn *c, const void *buf, size_t len);

/* Sends an MPA Request: rev 2 with the RFC 6581 block (p2p, offering rtr_offer) when
 * enhanced, else rev 1; C flag = crc. */
void fp_send_request(struct fp_conn *c, bool crc, bool enhanced, unsigned rtr_offer,
		     uint16_t ird, uint16_t ord, const void *priv, uint16_t priv_len);
/* Sends an MPA Reply (the fake peer as responder). */
void fp_send_reply(struct fp_conn *c, bool crc, bool enhanced, bool reject, unsigned rtr,
		   uint16_t ird, uint16_t ord, const void *priv, uint16_t priv_len);
/* Reads one MPA Request/Reply within timeout_ms; rr points into c->rx until the next read
 * (the frame is consumed). */
void fp_recv_rr(struct fp_conn *c, struct sv_mpa_rr *rr, bool expect_reply, int timeout_ms);

/* Builds the FPDU for ulpdu into out (cap bytes); corrupt flips one CRC bit. Returns its
 * length. With crc false the CRC field is zero. */
size_t fp_fpdu(uint8_t *out, size_t cap, const uint8_t *ulpdu, size_t len, bool crc,
	       bool corrupt);
/* Frames and sends one ULPDU. */
void fp_send_ulpdu(struct fp_conn *c, const uint8_t *ulpdu, size_t len, bool corrupt);

/* Encodes the headers of m into buf, appends payload, returns the ULPDU length. */
size_t fp_ulpdu(uint8_t *buf, size_t cap, const struct sv_rdmap_msg *m, const void *payload,
		size_t payload_len);
/* An untagged Send (opcode SV_RDMAP_SEND) with the next QN 0 MSN. */
size_t fp_send_msg(struct fp_conn *c, uint8_t *buf, size_t cap, const void *payload,
		   size_t len);
/* Sends the RFC 6581 RTR the responder chose (zero-length Write or Read; a Send RTR is
 * a zero-length Send). */
void fp_send_rtr(struct fp_conn *c, unsigned chosen);

/*
 * Reads one FPDU within timeout_ms. Returns the ULPDU length (ulpdu gets it), -1 on EOF or
 * reset, -2 at the deadline. *crc_ok tells whether the CRC trailer matched (always true
 * when CRC is off and the field is zero).
 */
int fp_recv_fpdu(struct fp_conn *c, uint8_t *ulpdu, size_t cap, bool *crc_ok,
		 int timeout_ms);
/* Reads FPDUs until a Terminate arrives (others skipped); false on EOF or deadline. The
 * Terminate's FPDU must carry a good CRC. */
bool fp_wait_terminate(struct fp_conn *c, struct sv_rdmap_term *t, int timeout_ms);
/* True when the peer closes the connection (EOF or reset) within timeout_ms; bytes that
 * arrive meanwhile are discarded. */
bool fp_wait_eof(struct fp_conn *c, int timeout_ms);

#endif
