/*
 * mpa.h — MPA codec (RFC 5044, with the RFC 6581 enhanced connection setup).
 *
 * Pure functions over bytes: no allocation, no I/O. The request/reply decoder works on a
 * byte stream and returns -EAGAIN while more bytes could still complete the frame.
 * FPDU framing (length, pad, CRC trailer) and marker arithmetic are helpers here too; the
 * transport does the I/O around them. See doc/wire-iwarp.md section 2.
 */
#ifndef SV_WIRE_MPA_H
#define SV_WIRE_MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_MPA_KEY_LEN 16
#define SV_MPA_RR_HDR_LEN 20		/* key + flags + rev + PD_Length */
#define SV_MPA_MAX_PD_LEN 512		/* PD_Length limit we accept and send */
#define SV_MPA_V2_BLOCK_LEN 4		/* RFC 6581 IRD/ORD block at the front of PD */
#define SV_MPA_REV1 1
#define SV_MPA_REV2 2

/* Byte 16 flags. */
#define SV_MPA_FLAG_M 0x80		/* sender wants markers in the FPDUs it receives */
#define SV_MPA_FLAG_C 0x40		/* CRC wanted */
#define SV_MPA_FLAG_R 0x20		/* reject (reply only) */
#define SV_MPA_FLAG_E 0x10		/* enhanced (RFC 6581) setup */

/* RFC 6581 block bits (in the 16-bit IRD and ORD words). */
#define SV_MPA_V2_P2P 0x8000		/* IRD word: peer-to-peer, RTR will be sent */
#define SV_MPA_V2_RTR_SEND 0x4000	/* IRD word: zero-length Send RTR */
#define SV_MPA_V2_RTR_WRITE 0x8000	/* ORD word: zero-length RDMA Write RTR */
#define SV_MPA_V2_RTR_READ 0x4000	/* ORD word: zero-length RDMA Read RTR */
#define SV_MPA_V2_IRD_ORD_MASK 0x3fff

#define SV_MPA_MARKER_PERIOD 512
#define SV_MPA_MARKER_LEN 4
#define SV_MPA_CRC_LEN 4
#define SV_MPA_LEN_FIELD 2
#define SV_MPA_MAX_ULPDU 0xffff

enum sv_mpa_rtr {
	SV_MPA_RTR_NONE = 0,
	SV_MPA_RTR_SEND = 1 << 0,
	SV_MPA_RTR_WRITE = 1 << 1,
	SV_MPA_RTR_READ = 1 << 2,
};

/* A decoded MPA Request or Reply. Pointers point into the decoded buffer. */
struct sv_mpa_rr {
	bool reply;			/* key was "MPA ID Rep Frame" */
	bool markers;			/* M */
	bool crc;			/* C */
	bool reject;			/* R */
	bool enhanced;			/* E (and rev 2 and a 4-byte block present) */
	uint8_t rev;
	uint16_t pd_len;		/* PD_Length as on the wire (block included) */
	/* RFC 6581 block, valid when enhanced */
	bool p2p;
	unsigned rtr;			/* enum sv_mpa_rtr bits offered (req) / chosen (rep) */
	uint16_t ird;
	uint16_t ord;
	/* The application's private data: PD after the RFC 6581 block, if any */
	const uint8_t *priv;
	uint16_t priv_len;
};

/*
 * Decodes a Request (expect_reply false) or Reply frame from the start of a stream.
 * Returns the frame length (20 + PD_Length) on success, -EAGAIN when len is too short
 * to hold the whole frame yet, -EPROTO for a wrong key, an unknown revision, PD_Length
 * over SV_MPA_MAX_PD_LEN, or an enhanced flag without room for its block.
 */
int sv__mpa_rr_decode(struct sv_mpa_rr *rr, const uint8_t *p, size_t len, bool expect_reply);

/*
 * Encodes a frame from rr's flags, rev and (when rr->enhanced) its RFC 6581 fields,
 * followed by priv_len bytes of private data from rr->priv. Returns the frame length, or
 * -ENOSPC when cap is too small, -EINVAL when the private data is too long.
 */
int sv__mpa_rr_encode(uint8_t *buf, size_t cap, const struct sv_mpa_rr *rr);

/* PAD after the ULPDU so that length field + ULPDU + PAD is a multiple of 4. */
static inline unsigned sv__mpa_pad(size_t ulpdu_len)
{
	return (unsigned)((4 - ((ulpdu_len + 2) & 3)) & 3);
}

/*
 * RFC 5044 section 7.1 (doc/wire-iwarp.md 2.6): the largest ULPDU whose FPDU fits one
 * TCP segment of emss bytes, MULPDU = EMSS - (6 + 4 * ceil(EMSS / 512) + EMSS mod 4):
 * 6 for the length field and the CRC, EMSS mod 4 for the PAD, and the marker term
 * (a marker every 512 stream bytes) only when markers go into this direction. Returns 0
 * when emss leaves no room for a ULPDU.
 */
static inline uint32_t sv__mpa_mulpdu(uint32_t emss, bool markers)
{
	uint32_t over = 6 + emss % 4;

	if (markers)
		over += 4 * ((emss + SV_MPA_MARKER_PERIOD - 1) / SV_MPA_MARKER_PERIOD);
	return emss > over ? emss - over : 0;
}

/* Bytes of an FPDU without markers: length field, ULPDU, PAD and CRC. */
static inline size_t sv__mpa_fpdu_len(size_t ulpdu_len)
{
	return SV_MPA_LEN_FIELD + ulpdu_len + sv__mpa_pad(ulpdu_len) + SV_MPA_CRC_LEN;
}

/*
 * Markers: positions are stream offsets counted from the first byte after the MPA
 * Request/Reply, a marker at every multiple of 512 (so the first FPDU starts with one).
 * Given the stream offset of the next byte to send or receive and the number of payload
 * (marker-free) bytes wanted, returns how many of those bytes come before the next
 * marker position (0 when a marker is due right now).
 */
static inline size_t sv__mpa_bytes_to_marker(uint64_t stream_off, size_t want)
{
	size_t room = SV_MPA_MARKER_PERIOD - (size_t)(stream_off % SV_MPA_MARKER_PERIOD);

	if (stream_off % SV_MPA_MARKER_PERIOD == 0)
		return 0;
	return want < room ? want : room;
}

/* Marker encode/decode: 16 reserved zero bits, then FPDUPTR (bytes back to the start of
 * the FPDU's ULPDU_Length field, earlier markers included). */
void sv__mpa_marker_encode(uint8_t out[SV_MPA_MARKER_LEN], uint16_t fpdu_ptr);
/* Returns FPDUPTR, or -EPROTO if the reserved half is not zero. */
int sv__mpa_marker_decode(const uint8_t in[SV_MPA_MARKER_LEN]);

#endif
