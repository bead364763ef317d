#!/usr/bin/env python3
"""RoCEv2 packets of an interop capture, checked independently of softverbs' code.

pcapcheck.py [--corrupt] FILE.pcap HOST_IP4 HOST_IP6

Reads a classic pcap (Ethernet) and, for every UDP datagram to port 4791, recomputes the
ICRC per IBTA Vol 1 Annex A17 (RoCEv2): zlib's CRC-32 over eight 0xFF bytes standing for
the LRH, the IP header as captured with its variant fields set to ones (IPv4: TOS, TTL,
header checksum; IPv6: traffic class, flow label, hop limit), the UDP header with its
checksum set to ones, the BTH with byte 4 (FECN, BECN, reserved) set to ones, and the
rest of the packet up to the ICRC, which is carried least significant byte first. The
IPv4 identification is covered, with the value each packet carries.

Prints one line of key=value counts, per direction (h2g: sent by HOST_IP4/HOST_IP6, g2h:
the others): pkts, icrc_bad, nak_seq (NAKs "PSN sequence error"), nak_other (other NAK
and RNR NAK syndromes), retx (packets repeating a PSN already seen in their stream:
retransmissions), then icmp_unreach (ICMP/ICMPv6 destination unreachable, both ways),
and first_bad (frame number of the first ICRC failure, 0 if none).

--corrupt: the harness's self-check; flips one payload bit of every RoCE packet before
checking, so every ICRC must fail.
"""
import socket
import struct
import sys
import zlib

ROCE_PORT = 4791
BTH_LEN = 12
# RC opcodes carrying an AETH right after the BTH (IBTA Vol 1 section 9.2, table 35):
# RDMA READ response first/last/only, ACK, ATOMIC ACK.
AETH_OPCODES = {0x0D, 0x0F, 0x10, 0x11, 0x12}


def packets(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return
    magic = struct.unpack("<I", data[:4])[0]
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
        endian = ">"
    else:
        raise SystemExit("pcapcheck: %s is not a classic pcap file" % path)
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype != 1:
        raise SystemExit("pcapcheck: link type %d, want Ethernet (1)" % linktype)
    off, n = 24, 0
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        n += 1
        yield n, data[off + 16:off + 16 + incl]
        off += 16 + incl


def icrc(pseudo, ib):
    crc = zlib.crc32(b"\xff" * 8)
    crc = zlib.crc32(pseudo, crc)
    crc = zlib.crc32(ib[:4] + b"\xff" + ib[5:-4], crc)
    return crc & 0xFFFFFFFF


def parse(frame):
    """(family, src, dst, ip-pseudo-header, udp header, udp payload) or an ICMP mark."""
    if len(frame) < 14:
        return None
    etype = struct.unpack("!H", frame[12:14])[0]
    p = frame[14:]
    if etype == 0x8100 and len(frame) >= 18:
        etype = struct.unpack("!H", frame[16:18])[0]
        p = frame[18:]
    if etype == 0x0800 and len(p) >= 20:
        ihl = (p[0] & 0x0F) * 4
        if ihl != 20 or len(p) < ihl:
            return None
        total = struct.unpack("!H", p[2:4])[0]
        p = p[:total]
        src, dst, proto = socket.inet_ntop(socket.AF_INET, p[12:16]), \
            socket.inet_ntop(socket.AF_INET, p[16:20]), p[9]
        if proto == 1 and len(p) > 20 and p[20] == 3:
            return ("icmp", src, dst)
        masked = p[:1] + b"\xff" + p[2:8] + b"\xff" + p[9:10] + b"\xff\xff" + p[12:20]
        l4 = p[20:]
    elif etype == 0x86DD and len(p) >= 40:
        plen = struct.unpack("!H", p[4:6])[0]
        p = p[:40 + plen]
        src, dst, proto = socket.inet_ntop(socket.AF_INET6, p[8:24]), \
            socket.inet_ntop(socket.AF_INET6, p[24:40]), p[6]
        if proto == 58 and len(p) > 40 and p[40] == 1:
            return ("icmp", src, dst)
        masked = bytes([(p[0] & 0xF0) | 0x0F]) + b"\xff\xff\xff" + p[4:7] + b"\xff" + p[8:40]
        l4 = p[40:]
    else:
        return None
    if proto != 17 or len(l4) < 8:
        return None
    return ("udp", src, dst, masked, l4[:8], l4[8:])


def main():
    args = sys.argv[1:]
    corrupt = False
    if args and args[0] == "--corrupt":
        corrupt = True
        args = args[1:]
    if len(args) != 3:
        sys.stderr.write("usage: pcapcheck.py [--corrupt] FILE.pcap HOST_IP4 HOST_IP6\n")
        return 2
    path, host4, host6 = args
    hosts = {host4, socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, host6))}
    c = {}
    for d in ("h2g", "g2h"):
        for k in ("pkts", "icrc_bad", "nak_seq", "nak_other", "retx"):
            c["%s_%s" % (k, d)] = 0
    c["icmp_unreach"] = 0
    c["first_bad"] = 0
    seen = {}
    for num, frame in packets(path):
        r = parse(frame)
        if r is None:
            continue
        if r[0] == "icmp":
            c["icmp_unreach"] += 1
            continue
        _, src, dst, masked, udp, ib = r
        if struct.unpack("!H", udp[2:4])[0] != ROCE_PORT or len(ib) < BTH_LEN + 4:
            continue
        d = "h2g" if src in hosts else "g2h"
        c["pkts_" + d] += 1
        if corrupt:
            ib = ib[:BTH_LEN] + bytes([ib[BTH_LEN] ^ 0x01]) + ib[BTH_LEN + 1:] \
                if len(ib) > BTH_LEN + 4 else bytes([ib[0] ^ 0x01]) + ib[1:]
        pseudo = masked + udp[:6] + b"\xff\xff"
        want = struct.unpack("<I", ib[-4:])[0]
        if icrc(pseudo, ib) != want:
            c["icrc_bad_" + d] += 1
            if not c["first_bad"]:
                c["first_bad"] = num
        opcode = ib[0]
        dqpn = struct.unpack("!I", b"\x00" + ib[5:8])[0]
        psn = struct.unpack("!I", b"\x00" + ib[9:12])[0]
        if opcode < 0x20:  # RC
            if opcode in AETH_OPCODES and len(ib) >= BTH_LEN + 4 + 4:
                syn = ib[BTH_LEN]
                if syn >> 5 == 3:
                    c[("nak_seq_" if syn & 0x1F == 0 else "nak_other_") + d] += 1
                elif syn >> 5 == 1:
                    c["nak_other_" + d] += 1
            if opcode != 0x11 and opcode != 0x12:
                key = (src, dst, dqpn, opcode in AETH_OPCODES or opcode == 0x0E)
                s = seen.setdefault(key, set())
                if psn in s:
                    c["retx_" + d] += 1
                s.add(psn)
    print(" ".join("%s=%d" % kv for kv in c.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
