/*
 * test_ib_pcap.c — wire conformance of the RoCEv2 codecs without a network: every opcode of
 * the table (wire/ib_hdr.h) and every CM MAD (wire/ib_cm.h) is encoded by our code, wrapped
 * in an IPv4/UDP 4791 header with its ICRC (crypto/icrc.h) and written to a pcap file, which
 * tshark then decodes. The test requires, frame by frame:
 *  - the frame decodes as InfiniBand with the opcode, destination QP and PSN we sent;
 *  - no malformed frame and no expert info of severity error;
 *  - the CM MADs decode as CM with the field values we encoded (QPN, PSN, MTU, retry
 *    counts, responder resources, GIDs, comm IDs, reject reason, DREQ remote QPN).
 * The heuristic payload sub-dissectors (RPC-over-RDMA, SMB Direct, NVMe-oF, ...) are
 * disabled: they would parse our test patterns as their own protocols.
 * The pcap is kept when SV_KEEP_PCAP is set (its path is printed), for a look in Wireshark.
 * Skipped only when tshark is not installed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "crypto/icrc.h"
#include "wire/byteorder.h"
#include "wire/ib_cm.h"
#include "wire/ib_hdr.h"

#define MAX_FRAMES 64
#define NMADS 7			/* the CM MADs, the last frames */
#define PMTU 256
#define SRC_IP "10.0.0.1"
#define DST_IP "10.0.0.2"
#define SPORT 0xc123

struct frame {
	uint8_t bytes[20 + 8 + SV_IB_MAX_HDRS_LEN + SV_MAD_LEN + 4];
	size_t len;
	uint8_t opcode;
};

static struct frame frames[MAX_FRAMES];
static unsigned nframes;

static bool have_tshark(void)
{
	return system("command -v tshark >/dev/null 2>&1") == 0;
}

/* RFC 791 header checksum, so that no analyser flags the frame for it. */
static uint16_t ip_csum(const uint8_t *h)
{
	uint32_t s = 0;

	for (int i = 0; i < 20; i += 2)
		s += sv__get_be16(h + i);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Wraps one IB packet (BTH .. pad) in IPv4 + UDP and appends its ICRC. */
static void add_frame(const uint8_t *ib, size_t ib_len)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(SPORT) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(SV_ROCE_UDP_PORT) };
	struct frame *f = &frames[nframes++];
	uint8_t *ip = f->bytes, *udp = ip + 20, *pkt = udp + 8;
	size_t udp_len = 8 + ib_len + SV_ICRC_LEN;
	uint32_t icrc;

	cr_assert_leq(nframes, MAX_FRAMES);
	inet_pton(AF_INET, SRC_IP, &src.sin_addr);
	inet_pton(AF_INET, DST_IP, &dst.sin_addr);
	/* What Linux sends from an unconnected DF socket: id 0, DF, TTL 64. */
	memset(ip, 0, 20);
	ip[0] = 0x45;
	sv__put_be16(ip + 2, (uint16_t)(20 + udp_len));
	ip[6] = 0x40;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &src.sin_addr, 4);
	memcpy(ip + 16, &dst.sin_addr, 4);
	sv__put_be16(ip + 10, ip_csum(ip));
	sv__put_be16(udp, SPORT);
	sv__put_be16(udp + 2, SV_ROCE_UDP_PORT);
	sv__put_be16(udp + 4, (uint16_t)udp_len);
	sv__put_be16(udp + 6, 0);	/* no UDP checksum (IPv4 allows it; RoCE NICs do it) */
	memcpy(pkt, ib, ib_len);
	cr_assert_eq(sv__icrc_packet(&icrc, (struct sockaddr *)&src, (struct sockaddr *)&dst,
				     NULL, pkt, ib_len + SV_ICRC_LEN), 0);
	sv__put_le32(pkt + ib_len, icrc);
	f->len = 20 + udp_len;
	f->opcode = ib[0];
}

/* One packet of opcode with headers filled with recognisable values. */
static void add_opcode(uint8_t opcode, uint32_t psn)
{
	const struct sv_ib_opinfo *oi = sv__ib_opinfo(opcode);
	struct sv_ib_pkt pkt = { 0 };
	uint8_t buf[SV_IB_MAX_HDRS_LEN + PMTU + 3];
	size_t plen = 0;
	int n;

	if (oi->flags & SV_IB_OPF_PAYLOAD)
		plen = (oi->flags & (SV_IB_OPF_FIRST | SV_IB_OPF_MIDDLE)) ? PMTU :
		       (oi->flags & SV_IB_OPF_LAST) ? 101 : 7;
	pkt.bth.opcode = opcode;
	pkt.bth.se = oi->flags & SV_IB_OPF_END;
	pkt.bth.pad = sv__ib_pad(plen);
	pkt.bth.pkey = SV_PKEY_DEFAULT;
	pkt.bth.dest_qp = 0x000012;
	pkt.bth.ack_req = oi->flags & SV_IB_OPF_END;
	pkt.bth.psn = psn;
	pkt.deth = (struct sv_deth){ .qkey = 0x11111111, .src_qp = 0x000034 };
	pkt.reth = (struct sv_reth){ .va = 0x00007f0012340000ull, .rkey = 0xabcd0102,
				     .dma_len = (uint32_t)plen };
	pkt.aeth = (struct sv_aeth){ .syndrome = SV_AETH_CREDIT_INVALID, .msn = 5 };
	pkt.atomic = (struct sv_atomiceth){ .va = 0x1000, .rkey = 0x0201, .swap_add = 9,
					    .compare = 3 };
	pkt.atomic_orig = 0x42;
	pkt.imm_be = htonl(0x11223344);
	pkt.ieth_rkey = 0x0badcafe;
	n = sv__ib_hdrs_encode(buf, sizeof(buf), &pkt);
	cr_assert_eq(n, oi->hdr_len, "%s", oi->name);
	/* A counting pattern, not zeros, so a dissector reading payload as headers shows. */
	for (size_t i = 0; i < plen; i++)
		buf[n + i] = (uint8_t)(0x30 + i % 64);
	memset(buf + n + plen, 0, pkt.bth.pad);
	add_frame(buf, (size_t)n + plen + pkt.bth.pad);
}

static const uint8_t gid_a[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
static const uint8_t gid_b[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 };

/* A CM MAD as RoCEv2 carries it: UD SEND_ONLY to QP1 from QP1, Q_Key 0x80010000. */
static void add_mad(const struct sv_cm_msg *m, uint32_t psn)
{
	struct sv_ib_pkt pkt = { 0 };
	uint8_t buf[SV_BTH_LEN + SV_DETH_LEN + SV_MAD_LEN];
	int n;

	pkt.bth.opcode = SV_IB_UD | SV_IB_OP_SEND_ONLY;
	pkt.bth.pkey = SV_PKEY_DEFAULT;
	pkt.bth.dest_qp = SV_GSI_QPN;
	pkt.bth.psn = psn;
	pkt.deth = (struct sv_deth){ .qkey = SV_QP1_QKEY, .src_qp = SV_GSI_QPN };
	n = sv__ib_hdrs_encode(buf, sizeof(buf), &pkt);
	cr_assert_eq(n, SV_BTH_LEN + SV_DETH_LEN);
	cr_assert_eq(sv__cm_encode(buf + n, sizeof(buf) - (size_t)n, m), SV_MAD_LEN);
	add_frame(buf, sizeof(buf));
}

static void add_cm_mads(uint32_t psn)
{
	struct sv_cm_msg m;
	struct sv_cm_ip_hdr ip = { .ip_version = 4, .src_port = 0x4321 };

	sv__cm_mad_init(&m, SV_CM_ATTR_REQ, 0x0102030405060708ull);
	m.req.local_comm_id = 0xc0de0001;
	m.req.service_id = sv__cm_service_id(18515);
	m.req.local_ca_guid = 0x0002c90300a1b2c3ull;
	m.req.local_qpn = 0x000012;
	m.req.responder_resources = 4;
	m.req.initiator_depth = 2;
	m.req.remote_cm_response_timeout = 20;
	m.req.transport = SV_CM_TRANSPORT_RC;
	m.req.starting_psn = 0xabcdef;
	m.req.local_cm_response_timeout = 20;
	m.req.retry_count = 6;
	m.req.pkey = SV_PKEY_DEFAULT;
	m.req.path_mtu = 3;
	m.req.rnr_retry_count = 7;
	m.req.max_cm_retries = 15;
	m.req.primary.local_lid = 0xffff;
	m.req.primary.remote_lid = 0xffff;
	memcpy(m.req.primary.local_gid, gid_a, 16);
	memcpy(m.req.primary.remote_gid, gid_b, 16);
	m.req.primary.hop_limit = 64;
	m.req.primary.packet_rate = 3;
	m.req.primary.local_ack_timeout = 14;
	memcpy(ip.src_addr + 12, gid_a + 12, 4);
	memcpy(ip.dst_addr + 12, gid_b + 12, 4);
	cr_assert_eq(sv__cm_ip_hdr_encode(m.req.private_data, sizeof(m.req.private_data), &ip),
		     SV_CM_IP_HDR_LEN);
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_MRA, 0x0102030405060708ull);
	m.mra.local_comm_id = 0xc0de0002;
	m.mra.remote_comm_id = 0xc0de0001;
	m.mra.msg_mraed = SV_CM_MSG_REQ;
	m.mra.service_timeout = 17;
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_REP, 0x0102030405060708ull);
	m.rep.local_comm_id = 0xc0de0002;
	m.rep.remote_comm_id = 0xc0de0001;
	m.rep.local_qpn = 0x000034;
	m.rep.starting_psn = 0x123456;
	m.rep.responder_resources = 2;
	m.rep.initiator_depth = 4;
	m.rep.target_ack_delay = 15;
	m.rep.rnr_retry_count = 5;
	m.rep.local_ca_guid = 0x0002c90300d4e5f6ull;
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_RTU, 0x0102030405060708ull);
	m.rtu.local_comm_id = 0xc0de0001;
	m.rtu.remote_comm_id = 0xc0de0002;
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_REJ, 0x1112131415161718ull);
	m.rej.local_comm_id = 0xc0de0003;
	m.rej.remote_comm_id = 0xc0de0004;
	m.rej.msg_rejected = SV_CM_MSG_REQ;
	m.rej.reason = SV_CM_REJ_CONSUMER_DEFINED;
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_DREQ, 0x2122232425262728ull);
	m.dreq.local_comm_id = 0xc0de0001;
	m.dreq.remote_comm_id = 0xc0de0002;
	m.dreq.remote_qpn = 0x000034;
	add_mad(&m, psn++);

	sv__cm_mad_init(&m, SV_CM_ATTR_DREP, 0x2122232425262728ull);
	m.drep.local_comm_id = 0xc0de0002;
	m.drep.remote_comm_id = 0xc0de0001;
	add_mad(&m, psn++);
}

/* Classic pcap, LINKTYPE_IPV4 (228): each record is one IPv4 datagram. */
static void write_pcap(const char *path)
{
	uint8_t gh[24] = { 0 }, rh[16];
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f, "%s", path);
	sv__put_le32(gh, 0xa1b2c3d4);
	gh[4] = 2;
	gh[6] = 4;
	sv__put_le32(gh + 16, 65535);
	sv__put_le32(gh + 20, 228);
	cr_assert_eq(fwrite(gh, 1, sizeof(gh), f), sizeof(gh));
	for (unsigned i = 0; i < nframes; i++) {
		sv__put_le32(rh, 1700000000u + i);
		sv__put_le32(rh + 4, 0);
		sv__put_le32(rh + 8, (uint32_t)frames[i].len);
		sv__put_le32(rh + 12, (uint32_t)frames[i].len);
		cr_assert_eq(fwrite(rh, 1, sizeof(rh), f), sizeof(rh));
		cr_assert_eq(fwrite(frames[i].bytes, 1, frames[i].len, f), frames[i].len);
	}
	cr_assert_eq(fclose(f), 0);
}

/* Runs tshark on path with the given arguments and returns its whole stdout. */
static char *tshark(const char *path, const char *args)
{
	char cmd[4096];
	static char out[1 << 18];
	size_t n;
	FILE *p;

	/* The heuristic payload dissectors would read our test patterns as their protocols. */
	snprintf(cmd, sizeof(cmd), "timeout 60 tshark -n -r '%s' --disable-protocol rpcordma "
		 "--disable-protocol smb_direct --disable-protocol smc "
		 "--disable-protocol nvme-rdma --disable-protocol lnet --disable-protocol iser "
		 "--disable-protocol infiniband_sdp "
		 "--disable-protocol fcoib --disable-protocol eoib %s 2>/dev/null", path, args);
	p = popen(cmd, "r");
	cr_assert_not_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	cr_assert_eq(pclose(p), 0, "tshark failed: %s", cmd);
	return out;
}

static char dir[] = "/tmp/sv-ib-pcap.XXXXXX";
static char pcap[sizeof(dir) + 16];

static void build_capture(void)
{
	uint32_t psn = 0;

	if (!have_tshark())
		cr_skip_test("tshark not installed (apt-get install tshark)");
	nframes = 0;
	for (unsigned op = 0; op < 256; op++)
		if (sv__ib_opinfo((uint8_t)op) != NULL)
			add_opcode((uint8_t)op, psn++);
	add_cm_mads(psn);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(pcap, sizeof(pcap), "%s/ib.pcap", dir);
	write_pcap(pcap);
}

static void drop_capture(void)
{
	if (pcap[0] == '\0')
		return;
	if (getenv("SV_KEEP_PCAP") != NULL) {
		fprintf(stderr, "pcap kept: %s\n", pcap);
		return;
	}
	unlink(pcap);
	rmdir(dir);
}

TestSuite(wire_ib_pcap, .init = build_capture, .fini = drop_capture, .timeout = 120);

Test(wire_ib_pcap, every_opcode_decodes_as_infiniband)
{
	const char *out = tshark(pcap, "-T fields -E separator=, -E occurrence=f "
				 "-e frame.number -e infiniband.bth.opcode "
				 "-e infiniband.bth.destqp "
				 "-e infiniband.bth.psn -e _ws.malformed -e _ws.expert.severity "
				 "-e infiniband.invariant.crc");
	unsigned seen = 0;

	for (const char *line = out; *line != '\0'; seen++) {
		unsigned num, opcode, qp, psn;
		char rest[256] = "";
		const struct frame *f;
		int k = sscanf(line, "%u,%u,%x,%u,%255[^\n]", &num, &opcode, &qp, &psn, rest);

		cr_assert_geq(k, 4, "unparsed tshark line: %.80s", line);
		cr_assert(num >= 1 && num <= nframes);
		f = &frames[num - 1];
		cr_assert_eq(opcode, f->opcode, "frame %u: tshark opcode %u, sent %u (%s)", num,
			     opcode, f->opcode, sv__ib_opinfo(f->opcode)->name);
		cr_assert_eq(psn, num - 1, "frame %u psn %u", num, psn);
		cr_assert_eq(qp, num > nframes - NMADS ? (unsigned)SV_GSI_QPN : 0x12u, "frame %u",
			     num);
		/* rest: malformed (empty), expert severity (empty unless flagged), ICRC. The
		 * ICRC is the last field: everything before it must be empty. */
		cr_assert(rest[0] == ',' && rest[1] == ',', "frame %u (%s) flagged: %s", num,
			  sv__ib_opinfo(f->opcode)->name, rest);
		line = strchr(line, '\n');
		cr_assert_not_null(line);
		line++;
	}
	cr_assert_eq(seen, nframes, "tshark showed %u of %u frames", seen, nframes);
}

/* What tshark must show for each CM MAD built by add_cm_mads(). */
static const struct {
	uint16_t attr;
	const char *field;
	const char *want;
} cm_expect[] = {
	{ 0x0010, "infiniband.mad.mgmtclass", "0x07" },
	{ 0x0010, "infiniband.mad.method", "0x03" },
	{ 0x0010, "infiniband.mad.transactionid", "0x0102030405060708" },
	{ 0x0010, "infiniband.cm.req.localqpn", "0x000012" },
	{ 0x0010, "infiniband.cm.req.startpsn", "0xabcdef" },
	{ 0x0010, "infiniband.cm.req.responderres", "0x04" },
	{ 0x0010, "infiniband.cm.req.initdepth", "0x02" },
	{ 0x0010, "infiniband.cm.req.retrcount", "0x06" },
	{ 0x0010, "infiniband.cm.req.rnrretrcount", "0x07" },
	{ 0x0010, "infiniband.cm.req.pppmtu", "0x03" },
	{ 0x0010, "infiniband.cm.req.maxcmretr", "0x0f" },
	{ 0x0010, "infiniband.cm.req.transpsvctype", "0x00" },
	{ 0x0010, "infiniband.cm.req.prim_localacktout", "0x0e" },
	{ 0x0010, "infiniband.cm.req.prim_hoplim", "0x40" },
	{ 0x0010, "infiniband.cm.req.prim_localgid_ipv4", "10.0.0.1" },
	{ 0x0010, "infiniband.cm.req.prim_remotegid_ipv4", "10.0.0.2" },
	{ 0x0010, "infiniband.cm.req.serviceid.dport", "0x4853" },
	{ 0x0010, "infiniband.cm.req.ip_cm.sport", "0x4321" },
	{ 0x0010, "infiniband.cm.req.ip_cm.sip4", "10.0.0.1" },
	{ 0x0010, "infiniband.cm.req.ip_cm.dip4", "10.0.0.2" },
	{ 0x0011, "infiniband.mad.mgmtclass", "0x07" },
	{ 0x0011, "infiniband.mad.transactionid", "0x0102030405060708" },
	{ 0x0013, "infiniband.cm.rep.remotecommid", "0xc0de0001" },
	{ 0x0013, "infiniband.cm.rep.localqpn", "0x000034" },
	{ 0x0013, "infiniband.cm.rep.startpsn", "0x123456" },
	{ 0x0013, "infiniband.cm.rep.respres", "0x02" },
	{ 0x0013, "infiniband.cm.rep.initdepth", "0x04" },
	{ 0x0013, "infiniband.cm.rep.tgtackdelay", "0x0f" },
	{ 0x0013, "infiniband.cm.rep.rnrretrcount", "0x05" },
	{ 0x0013, "infiniband.cm.rep.localcaguid", "0x0002c90300d4e5f6" },
	{ 0x0014, "infiniband.cm.rtu.localcommid", "0xc0de0001" },
	{ 0x0014, "infiniband.cm.rtu.remotecommid", "0xc0de0002" },
	{ 0x0012, "infiniband.cm.rej.localcommid", "0xc0de0003" },
	{ 0x0012, "infiniband.cm.rej.reason", "0x001c" },
	{ 0x0012, "infiniband.cm.rej.msgrej", "0x00" },
	{ 0x0012, "infiniband.mad.transactionid", "0x1112131415161718" },
	{ 0x0015, "infiniband.cm.req.remoteqpneecn", "0x000034" },
	{ 0x0015, "infiniband.cm.dreq.localcommid", "0xc0de0001" },
	{ 0x0015, "infiniband.cm.dreq.remotecommid", "0xc0de0002" },
	{ 0x0016, "infiniband.cm.drsp.localcommid", "0xc0de0002" },
	{ 0x0016, "infiniband.cm.drsp.remotecommid", "0xc0de0001" },
};
#define N_EXPECT (sizeof(cm_expect) / sizeof(cm_expect[0]))

/* Column of one tab-separated line, copied into out. */
static void column(const char *line, size_t col, char *out, size_t cap)
{
	size_t n;

	for (; col > 0 && line != NULL; col--) {
		line = strpbrk(line, "\t\n");
		if (line != NULL && *line == '\t')
			line++;
		else
			line = NULL;
	}
	cr_assert_not_null(line, "tshark line has too few columns");
	n = strcspn(line, "\t\n");
	cr_assert_lt(n, cap);
	memcpy(out, line, n);
	out[n] = '\0';
}

/* Column of field among the first n of cm_expect, counting each field once: tshark fills
 * only one column per distinct field. Column 0 is the attribute ID. */
static size_t field_column(size_t n, const char *field)
{
	size_t col = 0;

	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (j < i && strcmp(cm_expect[j].field, cm_expect[i].field) != 0)
			j++;
		if (j < i)
			continue;		/* seen before */
		col++;
		if (strcmp(cm_expect[i].field, field) == 0)
			return col;
	}
	return 0;
}

/* One tshark run over the MAD frames, one column per distinct field of cm_expect; each
 * expectation is looked up in the line of its attribute. */
Test(wire_ib_pcap, cm_mads_decode_with_our_values)
{
	char args[8192] = "-Y infiniband.mad -T fields -E separator=/t -E occurrence=f "
			  "-e infiniband.mad.attributeid";
	unsigned lines = 0;
	const char *out;

	for (size_t i = 0; i < N_EXPECT; i++) {
		size_t l = strlen(args);

		if (field_column(i, cm_expect[i].field) == 0)
			snprintf(args + l, sizeof(args) - l, " -e %s", cm_expect[i].field);
	}
	out = tshark(pcap, args);
	for (const char *line = out; *line != '\0'; line = strchr(line, '\n') + 1) {
		char attr_s[16], got[128];
		unsigned long attr;

		cr_assert_not_null(strchr(line, '\n'));
		column(line, 0, attr_s, sizeof(attr_s));
		attr = strtoul(attr_s, NULL, 16);
		lines++;
		for (size_t i = 0; i < N_EXPECT; i++) {
			if (cm_expect[i].attr != attr)
				continue;
			column(line, field_column(N_EXPECT, cm_expect[i].field), got, sizeof(got));
			cr_assert_str_eq(got, cm_expect[i].want, "%s (%s): %s is '%s', want '%s'",
					 attr_s, sv__cm_attr_name((uint16_t)attr), cm_expect[i].field,
					 got, cm_expect[i].want);
		}
	}
	cr_assert_eq(lines, NMADS, "tshark decoded %u MADs, we sent %u", lines, NMADS);
}
