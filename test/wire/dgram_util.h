/*
 * dgram_util.h — what every captured RoCEv2 datagram of a wire test must satisfy, judged
 * by code that did not produce it: the shared codec (wire/ib_hdr.h, wire/ib_cm.h), the
 * shared ICRC code (crypto/icrc.h), and a second ICRC computed here with zlib alone.
 */
#ifndef SV_TEST_WIRE_DGRAM_UTIL_H
#define SV_TEST_WIRE_DGRAM_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/ib_cm.h"
#include "wire/ib_hdr.h"

/*
 * Checks the captured IP packet ip[0..len): IPv4 without options or IPv6 without extension
 * headers, UDP right after, lengths consistent; the UDP payload decodes into *pkt (whose
 * pointers go stale with the capture buffer), P_Key is the default, the payload obeys its
 * opcode's rule at path MTU pmtu, pad bytes are zero; the shared ICRC code over the
 * addresses and ports captured (and for IPv4 the real identification and DF bit) matches
 * the trailer, and so does the ICRC recomputed with zlib from the annex A17.8 masks. A
 * datagram to QP1 must be a UD SEND_ONLY from QP1 with the GSI Q_Key carrying a CM MAD,
 * which is decoded into *cm; returns whether it was one. k numbers the datagram in
 * failure messages.
 */
bool dgram_check(const uint8_t *ip, size_t len, uint32_t pmtu, unsigned k,
		 struct sv_ib_pkt *pkt, struct sv_cm_msg *cm);

#endif
