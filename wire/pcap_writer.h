/*
 * pcap_writer.h — the bytes of a classic pcap file (the libpcap format: a 24-byte file
 * header, then per frame a 16-byte record header and the frame) for the frames SV_PCAP
 * records (wire/pcap.h): the transport's own UDP datagrams and TCP payloads wrapped in
 * Ethernet II, IPv4 (RFC 791) or IPv6 (RFC 8200), and UDP (RFC 768) or TCP (RFC 9293)
 * headers we synthesize with the real addresses and ports and correct checksums.
 *
 * Pure: no I/O, no clock; everything goes into the caller's buffer.
 */
#ifndef SV_WIRE_PCAP_WRITER_H
#define SV_WIRE_PCAP_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define SV__PCAP_FILE_HDR 24
#define SV__PCAP_SNAPLEN 65535u
/* record header + Ethernet + IPv6 (the larger) + TCP (the larger, no options) */
#define SV__PCAP_HDR_MAX (16 + 14 + 40 + 20)
/* The largest payload one frame carries: IPv4's total length is 16 bits and the frame
 * must fit the snap length; a longer TCP payload is split over several segments. */
#define SV__PCAP_PAYLOAD_MAX (SV__PCAP_SNAPLEN - SV__PCAP_HDR_MAX + 16)

enum {
	SV__PCAP_FIN = 0x01,
	SV__PCAP_SYN = 0x02,
	SV__PCAP_PSH = 0x08,
	SV__PCAP_ACK = 0x10,
};

/* One frame to describe. src and dst are both AF_INET or both AF_INET6. */
struct sv__pcap_pkt {
	const struct sockaddr *src, *dst;
	int proto;			/* IPPROTO_UDP or IPPROTO_TCP */
	uint32_t seq, ack;		/* TCP only */
	uint8_t flags;			/* TCP only: SV__PCAP_* */
	uint16_t ip_id;			/* IPv4 identification (DF is always set) */
	uint64_t ts_ns;			/* the record's time stamp, ns since the epoch */
};

/* The file header: microsecond time stamps, snap length SV__PCAP_SNAPLEN, Ethernet. */
void sv__pcap_file_header(uint8_t out[SV__PCAP_FILE_HDR]);

/*
 * Writes the record header and the Ethernet, IP and UDP/TCP headers of a frame carrying
 * payload (len bytes, which follow the returned bytes in the file) into out, checksums
 * computed over the payload. Returns the bytes written, or 0 when the frame cannot be
 * described (families differ or are neither IPv4 nor IPv6, an unknown proto, or len over
 * SV__PCAP_PAYLOAD_MAX).
 */
size_t sv__pcap_frame_header(uint8_t out[SV__PCAP_HDR_MAX], const struct sv__pcap_pkt *p,
			     const uint8_t *payload, size_t len);

#endif
