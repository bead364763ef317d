/*
 * icrc.h — the RoCEv2 invariant CRC (shared/spec/roce.md section 9).
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
 * from recvmsg's source address and IP_PKTINFO destination.
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

#endif
