/*
 * icrc.h — the RoCEv2 invariant CRC (doc/wire-roce.md section 9).
 *
 * Standard CRC-32 (zlib's crc32(), not CRC-32C) over: eight 0xFF bytes standing in for
 * the IB LRH, the IP header and UDP header with their variant fields (IPv4 TOS, TTL,
 * checksum; IPv6 traffic class, flow label, hop limit; UDP checksum) set to all ones,
 * the BTH with byte 4 (FECN, BECN, reserved) set to all ones, then the rest of the IB
 * packet through the pad. The 32-bit result goes on the wire least-significant byte
 * first (sv__put_le32).
 *
 * Over a plain UDP socket the sender knows every covered IP field: addresses, lengths,
 * protocol 17, ports, and the IPv4 identification, which Linux sets to 0 on an
 * unconnected socket with IP_PMTUDISC_DO (DF set). A receiver rebuilds the same header
 * from recvmsg's source address and IP_PKTINFO destination; all but the IPv4
 * identification and flags, which a socket does not show and other senders set as they
 * like (Linux's rxe: a counter, DF). Those the receiver recovers from the ICRC itself
 * (sv__icrc_verify_rx; the price in strength is in doc/interop-icrc.md).
 */
#ifndef SV_CRYPTO_ICRC_H
#define SV_CRYPTO_ICRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define SV_ICRC_PSEUDO_V4_LEN 28	/* IPv4 header (no options) + UDP header */
#define SV_ICRC_PSEUDO_V6_LEN 48	/* IPv6 header + UDP header */
#define SV_ICRC_PSEUDO_MAX SV_ICRC_PSEUDO_V6_LEN

/* IPv4 fields a plain socket does not show. Ours: id 0, DF set (see above). */
struct sv_icrc_ipv4 {
	uint16_t id;
	bool df;
};

/*
 * Lays out the masked IP + UDP header of a datagram from src to dst (sockaddr_in or
 * sockaddr_in6 with ports; IPv4-mapped IPv6 addresses on both ends mean the packet
 * travels as IPv4) whose UDP payload (BTH through ICRC) is udp_payload_len bytes.
 * v4 may be NULL for id 0 with DF set. Returns 28 or 48, -EAFNOSUPPORT for other
 * families or mixed v4/v6 ends, -EMSGSIZE when the lengths overflow their fields.
 */
int sv__icrc_pseudo_hdr(uint8_t out[SV_ICRC_PSEUDO_MAX], const struct sockaddr *src,
			const struct sockaddr *dst, size_t udp_payload_len,
			const struct sv_icrc_ipv4 *v4);

/*
 * ICRC of an IB packet given as iov (BTH through pad, excluding the ICRC; the BTH may be
 * split across iovecs) after the pseudo header from sv__icrc_pseudo_hdr(). The BTH's
 * byte 4 is masked here, so iov holds the packet exactly as sent or received.
 */
uint32_t sv__icrc_iov(const uint8_t *pseudo, size_t pseudo_len, const struct iovec *iov,
		      size_t iovcnt);

/*
 * Convenience for one contiguous packet p[0..len) that ends with its 4-byte ICRC
 * trailer: computes the ICRC over p[0..len-4) for the datagram src -> dst and stores it
 * in *icrc. Returns 0, or an error of sv__icrc_pseudo_hdr, or -EBADMSG when len is
 * shorter than BTH + ICRC.
 */
int sv__icrc_packet(uint32_t *icrc, const struct sockaddr *src, const struct sockaddr *dst,
		    const struct sv_icrc_ipv4 *v4, const uint8_t *p, size_t len);

/*
 * Receiver check of the same contiguous packet: 0 when its trailer (little-endian)
 * matches, -EBADMSG when it does not or the packet is too short, other errors as above.
 */
int sv__icrc_verify(const struct sockaddr *src, const struct sockaddr *dst,
		    const struct sv_icrc_ipv4 *v4, const uint8_t *p, size_t len);

/*
 * The IPv4 identification and DF of a datagram, found from its ICRC (doc/interop-icrc.md).
 * syndrome is the received ICRC xor the one computed for id 0 with DF set, len the UDP
 * payload length (BTH through ICRC). A difference confined to the 32 bits of IPv4 header
 * bytes 4..7 (identification, flags, fragment offset) changes the CRC by that difference
 * times a power of x, which is invertible, so exactly one such difference explains any
 * syndrome: accepted when it lies in the identification and the DF bit only. Returns 0
 * with *ip the fields for which the ICRC holds, -EBADMSG when no id and DF do.
 */
int sv__icrc_ipv4_solve(uint32_t syndrome, size_t len, struct sv_icrc_ipv4 *ip);

/*
 * Receiver check of the contiguous packet p[0..len) when the IPv4 identification and DF
 * are not known: 0 when the trailer matches for id 0 with DF (softverbs' own packets, and
 * the only computation they cost), 1 when it matches for the id and DF found in *ip,
 * -EBADMSG when no IPv4 header of this datagram explains it, other errors as
 * sv__icrc_pseudo_hdr. IPv6 has neither field: 0 or -EBADMSG. *ip is set on 0 and 1.
 */
int sv__icrc_verify_rx(const struct sockaddr *src, const struct sockaddr *dst,
		       const uint8_t *p, size_t len, struct sv_icrc_ipv4 *ip);

#endif
