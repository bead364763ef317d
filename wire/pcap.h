/*
 * pcap.h — SV_PCAP: a device context's own capture of what its transport puts on and
 * takes off its sockets, as a classic pcap file tshark decodes, with no capture rights
 * (no root, no dumpcap): the frames are synthesized around the real bytes
 * (wire/pcap_writer.h).
 *
 *  - UDP: every datagram sent (as handed to the socket, or to the fault injector of
 *    wire/impair.h, which may then lose or repeat it) and every datagram received.
 *  - TCP: every byte of each connection's stream in each direction, as it goes to and
 *    comes from the socket: the MPA stream (RFC 5044), or under TLS the TLS records
 *    (ciphertext; tshark shows TLS, not iWARP). Sequence numbers count the stream's bytes
 *    per direction after a synthesized SYN, SYN-ACK, ACK, so tshark reassembles FPDUs.
 *
 * One file per context: the path given (sv_device_opts.pcap, SV_PCAP), then path.1,
 * path.2, ... for the next contexts of the process that name the same path. "%p" in the
 * path stands for the process ID, so that processes started with the same environment
 * (a server and its client under svrun) do not write one file. A file stops growing at
 * SV_PCAP_MAX bytes (default SV__PCAP_MAX_DEFAULT), logged once at error level, the
 * default's, so a cut capture is never silent. When no path is set the transport holds a
 * NULL capture and tests that one pointer.
 */
#ifndef SV_WIRE_PCAP_H
#define SV_WIRE_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#define SV__PCAP_MAX_DEFAULT (64ull << 20)

struct sv__pcap;

/* Creates (truncates) the file for a context capturing to path ("%p": the process ID);
 * -errno on failure. */
int sv__pcap_open(const char *path, struct sv__pcap **out);
/* Writes out what is buffered and closes the file. NULL is fine. */
void sv__pcap_close(struct sv__pcap *pc);
/* The context failed to open: removes its file and gives its name back to the next
 * context (a device retried on another port captures to the name it would have had). */
void sv__pcap_abandon(struct sv__pcap *pc);

/* One UDP datagram from src to dst (both IPv4 or both IPv6), its bytes in iov. */
void sv__pcap_udp(struct sv__pcap *pc, const struct sockaddr *src, const struct sockaddr *dst,
		  const struct iovec *iov, size_t iovcnt);

/* The same with IPv4 identification id (a UDP_SEGMENT run's segments carry 0, 1, 2 ...;
 * sv__pcap_udp writes 0, what our socket gives a datagram of its own). */
void sv__pcap_udp_id(struct sv__pcap *pc, const struct sockaddr *src,
		     const struct sockaddr *dst, const struct iovec *iov, size_t iovcnt,
		     uint16_t id);

/* The datagrams msgs[0..n) from src, each to its msg_name. */
void sv__pcap_udp_msgs(struct sv__pcap *pc, const struct sockaddr *src,
		       const struct mmsghdr *msgs, size_t n);

/* n bytes of the stream of connected TCP socket fd, sent (tx) or received, the first n
 * bytes of iov. The connection's addresses are read from fd on its first bytes. */
void sv__pcap_tcp(struct sv__pcap *pc, int fd, bool tx, const struct iovec *iov,
		  size_t iovcnt, size_t n);
/* fd is about to be closed: its stream ends (the next stream on that number is new). */
void sv__pcap_tcp_close(struct sv__pcap *pc, int fd);

#endif
