/*
 * test_roce_retx.c — the UDP transport's pure pieces on simulated time: the requester's
 * reliability state (roce_retx.c: window, ACKs, go-back-N NAKs, selective-repeat SACKs,
 * timer, RNR, counters, PSN wrap), the RNR timer table, and the shared packet codec and
 * ICRC as the transport uses them (the published RoCEv2 vector, doc/wire-roce.md 9).
 * Selective repeat's SACK bitmap comes with the first loss, and a first loss that cannot
 * have it (test/alloc_fail.h) is repaired all the same.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "test/alloc_fail.h"
#include "wire/roce.h"
#include "wire/roce_retx.h"

#define MS 1000000ull

/* timeout 8: 4.096 us << 8 = 1.048576 ms */
static void init(struct sv__retx *r, bool sr, uint32_t psn)
{
	sv__retx_init(r, sr, psn, 8, 3, 2, 64);
}

Test(roce_retx, timer_from_timeout_and_retry_exhaustion)
{
	struct sv__retx r;
	uint64_t now = 1000 * MS;

	init(&r, false, 100);
	cr_assert_eq(r.rto_ns, 1048576);
	cr_assert_eq(sv__retx_next_ns(&r), 0, "idle: no timer");
	sv__retx_sent_new(&r, 5, now);
	cr_assert_eq(sv__retx_next_ns(&r), now + 1048576);
	cr_assert_eq(sv__retx_on_timer(&r, now + 1000), 0, "early wake-up does nothing");
	for (int i = 0; i < 3; i++) {
		now = sv__retx_next_ns(&r);
		cr_assert_eq(sv__retx_on_timer(&r, now), 1);
		cr_assert_eq(r.snd, 100, "resend from una");
		r.snd = r.nxt;		/* the transport resent everything */
	}
	cr_assert_eq(sv__retx_on_timer(&r, sv__retx_next_ns(&r)), -ETIMEDOUT);
	cr_assert_eq(r.timeouts, 3);
}

Test(roce_retx, timeout_zero_means_no_timer)
{
	struct sv__retx r;

	sv__retx_init(&r, false, 0, 0, 7, 7, 0);
	sv__retx_sent_new(&r, 3, 5 * MS);
	cr_assert_eq(sv__retx_next_ns(&r), 0);
	cr_assert_eq(sv__retx_on_timer(&r, 1000000 * MS), 0);
}

Test(roce_retx, ack_progress_reloads_counters_and_grows_window)
{
	struct sv__retx r;
	uint64_t now = MS;
	uint32_t room;

	init(&r, false, 0xfffffe);	/* wraps to 0 */
	room = sv__retx_room(&r, now);
	cr_assert_eq(room, SV__CWND_INIT);
	sv__retx_sent_new(&r, 10, now);
	cr_assert_eq(r.nxt, 8);
	cr_assert_eq(sv__retx_on_timer(&r, sv__retx_next_ns(&r)), 1);
	cr_assert_eq(r.retries_left, 2);
	r.snd = r.nxt;
	cr_assert_eq(sv__retx_ack(&r, 2, now), 5, "0xfffffe..2 acknowledged");
	cr_assert_eq(r.una, 3);
	cr_assert_eq(r.retries_left, 3, "progress reloads retry_cnt");
	cr_assert_eq(sv__retx_ack(&r, 1, now), 0, "stale ACK");
	cr_assert_eq(sv__retx_ack(&r, 9, now), 0, "ACK beyond what was sent");
	cr_assert_eq(sv__retx_ack(&r, 7, now), 5);
	cr_assert_eq(sv__retx_next_ns(&r), 0, "nothing outstanding: timer off");
}

Test(roce_retx, go_back_n_nak)
{
	struct sv__retx r;
	uint64_t now = MS;
	uint32_t cw;

	init(&r, false, 1000);
	sv__retx_sent_new(&r, 20, now);
	cw = r.cwnd;
	cr_assert_eq(sv__retx_nak_seq(&r, 1007, now), 0);
	cr_assert_eq(r.una, 1007, "PSNs before the NAK are acknowledged");
	cr_assert_eq(r.snd, 1007, "resend from the NAK's PSN");
	cr_assert_eq(r.cwnd, (cw + 7 > 64 ? 64 : cw + 7) / 2, "one cut per episode");
	cw = r.cwnd;
	r.snd = r.nxt;
	cr_assert_eq(sv__retx_nak_seq(&r, 1008, now), 0);
	cr_assert_eq(r.cwnd, cw, "same episode: no second cut");
	cr_assert_eq(r.retries_left, 2, "progress reloaded 3, the NAK took one");
	cr_assert_eq(sv__retx_nak_seq(&r, 1008, now), 0);
	cr_assert_eq(sv__retx_nak_seq(&r, 1008, now), 0);
	cr_assert_eq(r.retries_left, 0);
	cr_assert_eq(sv__retx_nak_seq(&r, 1008, now), -ETIMEDOUT, "no progress, no retries");
	cr_assert_null(r.sacked, "go-back-N never takes the SACK bitmap");
}

Test(roce_retx, selective_repeat_sack)
{
	struct sv__retx r;
	uint64_t now = MS;
	uint32_t p, got[8], n = 0;

	init(&r, true, 50);
	sv__retx_sent_new(&r, 20, now);
	cr_assert_eq(sv__retx_ack(&r, 51, now), 2);
	cr_assert_null(r.sacked, "no loss yet: no bitmap");
	/* 53 and 56 lost: the responder keeps 54, 55, 57 and NAKs each with ePSN 53. */
	sv__retx_sack(&r, 53, 54, now);
	cr_assert_not_null(r.sacked, "the first loss brings the bitmap");
	sv__retx_sack(&r, 53, 55, now);
	sv__retx_sack(&r, 53, 57, now);
	cr_assert_eq(r.una, 53);
	cr_assert(sv__retx_is_sacked(&r, 54));
	cr_assert(sv__retx_is_sacked(&r, 57));
	cr_assert_not(sv__retx_is_sacked(&r, 56));
	while (sv__retx_pop(&r, &p))
		got[n++] = p;
	cr_assert_eq(n, 2, "only the holes are resent, once each");
	cr_assert_eq(got[0], 53);
	cr_assert_eq(got[1], 56);
	cr_assert_eq(r.retries_left, 3, "SR NAKs do not consume retry_cnt");
	cr_assert_eq(r.cwnd, SV__CWND_INIT + 3, "SR NAKs do not cut the window");
	/* The resend of 53 arrived: the cumulative ACK jumps to 55 (56 still missing). */
	sv__retx_sack(&r, 56, 58, now);
	cr_assert_eq(r.una, 56);
	cr_assert_not(sv__retx_pop(&r, &p), "56 was already resent in this episode");
	/* The timer backstops the lost resend: from una, skipping SACKed PSNs. */
	cr_assert_eq(sv__retx_on_timer(&r, sv__retx_next_ns(&r)), 1);
	cr_assert_eq(r.snd, 56);
	cr_assert(sv__retx_is_sacked(&r, 57));
	cr_assert_eq(r.cwnd, SV__CWND_MIN, "a timeout cuts to the minimum");
	cr_assert_eq(r.alloc_fails, 0);
	sv__retx_fini(&r);
	cr_assert_null(r.sacked);
}

Test(roce_retx, a_first_loss_without_memory_for_the_bitmap_is_resent_by_the_timer)
{
	struct sv__retx r;
	uint64_t now = MS;
	uint32_t p;

	init(&r, true, 50);
	sv__retx_sent_new(&r, 20, now);
	alloc_fail_calls = -1;
	/* 53 lost, 54 and 55 kept by the responder: no bitmap to mark them in. */
	sv__retx_sack(&r, 53, 54, now);
	cr_assert_null(r.sacked);
	cr_assert_eq(r.alloc_fails, 1, "counted");
	sv__retx_sack(&r, 53, 55, now);
	cr_assert_eq(alloc_fail_count, 1, "asked once per loss episode");
	cr_assert_eq(r.una, 53, "the cumulative part is taken");
	cr_assert_not(sv__retx_is_sacked(&r, 54));
	cr_assert_not(sv__retx_pop(&r, &p), "no resend queue");
	cr_assert_eq(sv__retx_room(&r, now), r.cwnd - 17, "54 and 55 still count as in flight");
	/* The timer resends from una, 54 and 55 with it (duplicates the responder drops). */
	cr_assert_eq(sv__retx_on_timer(&r, sv__retx_next_ns(&r)), 1);
	cr_assert_eq(r.snd, 53);
	r.snd = r.nxt;
	now = sv__retx_next_ns(&r) - 1;
	cr_assert_eq(sv__retx_ack(&r, 69, now), 17, "all of it acknowledged");
	/* The next episode asks again, and gets it. */
	alloc_fail_calls = 0;
	sv__retx_sent_new(&r, 10, now);
	sv__retx_sack(&r, 70, 72, now);
	cr_assert_not_null(r.sacked);
	cr_assert(sv__retx_is_sacked(&r, 72));
	cr_assert(sv__retx_pop(&r, &p));
	cr_assert_eq(p, 70);
	cr_assert(sv__retx_pop(&r, &p));
	cr_assert_eq(p, 71);
	cr_assert_eq(r.alloc_fails, 1);
	sv__retx_fini(&r);
}

Test(roce_retx, selective_repeat_resends_a_lost_resend_by_round)
{
	struct sv__retx r;
	uint64_t now = MS;
	uint32_t p, n = 0;

	init(&r, true, 0);
	sv__retx_sent_new(&r, 20, now);
	r.cc.srtt_ns = 20 * MS;		/* the round trip the controller measured */
	/* 0..4 lost; 5 and 6 arrive: one round resends the five. */
	sv__retx_sack(&r, 0, 5, now);
	sv__retx_sack(&r, 0, 6, now);
	while (sv__retx_pop(&r, &p))
		n++;
	cr_assert_eq(n, 5);
	/* The resends of 1..4 arrive (SACKed), the one of 0 is lost. Within the round's
	 * round trip and a quarter nothing is resent again. */
	for (uint32_t k = 1; k <= 4; k++)
		sv__retx_sack(&r, 0, k, now + 20 * MS);
	cr_assert_not(sv__retx_pop(&r, &p));
	/* Later SACKs say the link carries packets and 0 is still missing: a new round
	 * resends it, without the timer, its retries or a window cut. */
	sv__retx_sack(&r, 0, 7, now + 30 * MS);
	cr_assert(sv__retx_pop(&r, &p));
	cr_assert_eq(p, 0);
	cr_assert_not(sv__retx_pop(&r, &p), "only the PSN still missing");
	cr_assert_eq(r.timeouts, 0);
	cr_assert_eq(r.retries_left, 3);
	cr_assert_eq(r.cwnd, SV__CWND_INIT);
	/* Each SACK re-arms the timer: it is for a silent peer. With a 20 ms RTT the
	 * timeout in force is twice that, not the configured 1 ms. */
	cr_assert_eq(sv__retx_next_ns(&r), now + 30 * MS + 40 * MS);
	sv__retx_fini(&r);
}

Test(roce_retx, pacing_waits_arm_the_timer)
{
	struct sv__retx r;
	uint64_t now = 10 * MS;

	init(&r, false, 0);
	/* A 20 ms RTT sample on PSN 0 gives a pacing rate of 2 * 32 / 20 ms. */
	sv__retx_sent_new(&r, 1, now);
	cr_assert_eq(sv__retx_ack(&r, 0, now + 20 * MS), 1);
	now += 20 * MS;
	cr_assert_eq(r.cc.srtt_ns, 20 * MS);
	cr_assert_eq(sv__retx_next_ns(&r), 0, "idle");
	while (sv__retx_pace_ok(&r, now))
		sv__retx_sent_new(&r, 1, now);
	cr_assert_gt(r.pace_ns, now);
	cr_assert_eq(sv__retx_next_ns(&r), r.pace_ns, "the pacing time comes before the RTO");
	cr_assert_eq(sv__retx_on_timer(&r, r.pace_ns), 0);
	cr_assert_eq(r.pace_ns, 0, "the wait is over: the caller's round sends");
	cr_assert(sv__retx_pace_ok(&r, now + MS));
}

Test(roce_retx, rnr_wait_and_exhaustion)
{
	struct sv__retx r;
	uint64_t now = MS;

	init(&r, false, 7);		/* rnr_retry 2 */
	sv__retx_sent_new(&r, 4, now);
	cr_assert_eq(sv__retx_rnr(&r, 9, sv__rnr_code_ns(14), now), 0);
	cr_assert_eq(r.una, 9);
	cr_assert_eq(sv__retx_room(&r, now + 1), 0, "no sending during the RNR wait");
	cr_assert_eq(sv__retx_next_ns(&r), now + 1280000, "code 14 = 1.28 ms");
	cr_assert_eq(sv__retx_on_timer(&r, now + 1280000), 1);
	cr_assert_eq(r.snd, 9);
	cr_assert_gt(sv__retx_room(&r, now + 1280000), 0);
	cr_assert_eq(sv__retx_rnr(&r, 9, 10000, now), 0);
	cr_assert_eq(sv__retx_rnr(&r, 9, 10000, now), -ETIMEDOUT);

	sv__retx_init(&r, false, 0, 8, 3, 7, 0);	/* 7: forever */
	sv__retx_sent_new(&r, 1, now);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(sv__retx_rnr(&r, 0, 10000, now), 0);
}

Test(roce_retx, rnr_table)
{
	cr_assert_eq(sv__rnr_code_ns(0), 655360000ull);
	cr_assert_eq(sv__rnr_code_ns(1), 10000);
	cr_assert_eq(sv__rnr_code_ns(18), 5120000);
	cr_assert_eq(sv__rnr_code_ns(25), 61440000);
	cr_assert_eq(sv__rnr_code_ns(31), 491520000);
}

/* doc/wire-roce.md 9: the datenlord/open-rdma-driver vector through the ICRC the transport
 * uses (crypto/icrc.h), and the pseudo header the transport assumes for its own socket. */
Test(roce_pkt, icrc_vector)
{
	static const uint8_t bth[] = { 0x0a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
				       0x80, 0x00, 0x00, 0x00 };
	static const uint8_t reth[] = { 0x00, 0x00, 0x7f, 0x7e, 0x91, 0x00, 0x00, 0x00,
					0x01, 0x70, 0x9a, 0x33, 0x00, 0x00, 0x00, 0x80 };
	/* The vector's IPv4 and UDP headers with the masked fields (TOS, TTL, checksums)
	 * already all ones; identification 1, no DF. */
	static const uint8_t ip_udp[28] = { 0x45, 0xff, 0x00, 0xbc, 0x00, 0x01, 0x00, 0x00,
					    0xff, 0x11, 0xff, 0xff, 0xc0, 0xa8, 0x00, 0x02,
					    0xc0, 0xa8, 0x00, 0x03, 0x12, 0xb7, 0x12, 0xb7,
					    0x00, 0xa8, 0xff, 0xff };
	const struct sv_icrc_ipv4 v4_vector = { .id = 1, .df = false };
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(4791) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(4791) };
	uint8_t hdr[28], pay[128], pseudo[SV_ICRC_PSEUDO_MAX], ipdf[28];
	struct iovec v[2] = { { hdr, sizeof(hdr) }, { pay, sizeof(pay) } };
	const size_t udp_payload = sizeof(hdr) + sizeof(pay) + SV_ICRC_LEN;

	memcpy(hdr, bth, 12);
	memcpy(hdr + 12, reth, 16);
	memset(pay, 0xff, sizeof(pay));
	inet_pton(AF_INET, "192.168.0.2", &src.sin_addr);
	inet_pton(AF_INET, "192.168.0.3", &dst.sin_addr);
	cr_assert_eq(sv__icrc_iov(ip_udp, sizeof(ip_udp), v, 2), 0x982287c6);
	cr_assert_eq(sv__icrc_pseudo_hdr(pseudo, (struct sockaddr *)&src, (struct sockaddr *)&dst,
					 udp_payload, &v4_vector), SV_ICRC_PSEUDO_V4_LEN);
	cr_assert_arr_eq(pseudo, ip_udp, sizeof(ip_udp));
	cr_assert_eq(sv__icrc_iov(pseudo, SV_ICRC_PSEUDO_V4_LEN, v, 2), 0x982287c6);

	/* What the transport sends (no IPv4 fields given): identification 0 and DF, which an
	 * unconnected IP_PMTUDISC_DO socket puts on the wire; same addresses, ports, lengths. */
	memcpy(ipdf, ip_udp, sizeof(ipdf));
	ipdf[4] = ipdf[5] = 0;
	ipdf[6] = 0x40;
	cr_assert_eq(sv__icrc_pseudo_hdr(pseudo, (struct sockaddr *)&src, (struct sockaddr *)&dst,
					 udp_payload, NULL), SV_ICRC_PSEUDO_V4_LEN);
	cr_assert_arr_eq(pseudo, ipdf, sizeof(ipdf));
	cr_assert_neq(sv__icrc_iov(pseudo, SV_ICRC_PSEUDO_V4_LEN, v, 2), 0x982287c6);
}

/* The receive checks the transport makes with the shared codec (wire/ib_hdr.h) on a whole
 * datagram, ICRC trailer included: decode, P_Key, and no data on an opcode without any
 * except the selective-repeat NAK's PSN. */
Test(roce_pkt, receive_checks)
{
	uint8_t p[64] = { 0 };
	struct sv_ib_pkt k;
	uint32_t trig;

	sv__roce_bth_put(p, SV_IB_OP_WRITE_ONLY, true, 0, 2, true, 0x123456);
	sv__put_be64(p + SV_BTH_LEN, 0x7f7e91000000ull);
	sv__put_be32(p + SV_BTH_LEN + 8, 0x01709a33);
	sv__put_be32(p + SV_BTH_LEN + 12, 8);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_RETH_LEN + 8 + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_RETH_LEN);
	cr_assert(sv__ib_pkey_match(k.bth.pkey, SV_PKEY_DEFAULT), "we send the default P_Key");
	cr_assert(k.bth.se && k.bth.ack_req);
	cr_assert_eq(k.bth.dest_qp, 2);
	cr_assert_eq(k.bth.psn, 0x123456);
	cr_assert_eq(k.reth.va, 0x7f7e91000000ull);
	cr_assert_eq(k.reth.rkey, 0x01709a33);
	cr_assert_eq(k.reth.dma_len, 8);
	cr_assert_eq(k.payload_len, 8);
	cr_assert(k.flags & SV_IB_OPF_WRITE && k.flags & SV_IB_OPF_START && k.flags & SV_IB_OPF_END);
	cr_assert_eq(sv__ib_pkt_payload_check(&k, 0), 0);
	p[2] = p[3] = 0;		/* P_Key 0 is invalid (IBA 10.9.1) */
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_RETH_LEN + 8 + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_RETH_LEN);
	cr_assert_not(sv__ib_pkey_match(k.bth.pkey, SV_PKEY_DEFAULT));

	/* A READ request carries no data. */
	sv__roce_bth_put(p, SV_IB_OP_READ_REQ, false, 0, 5, true, 9);
	for (size_t n = 0; n < SV_BTH_LEN + SV_RETH_LEN + SV_ICRC_LEN; n++)
		cr_assert_eq(sv__ib_pkt_decode(&k, p, n), -EBADMSG, "len %zu", n);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_RETH_LEN + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_RETH_LEN);
	cr_assert_eq(sv__ib_pkt_payload_check(&k, 0), 0);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_RETH_LEN + 4 + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_RETH_LEN);
	cr_assert_eq(sv__ib_pkt_payload_check(&k, 0), -EMSGSIZE, "a READ request has no payload");

	/* The selective-repeat NAK: ACKNOWLEDGE, NAK PSN sequence error, ePSN 9, then the
	 * triggering PSN 12 as 4 bytes of payload. A plain NAK has none. */
	sv__roce_bth_put(p, SV_IB_OP_ACK, false, 0, 5, false, 9);
	p[SV_BTH_LEN] = 0x60;
	sv__put_be24(p + SV_BTH_LEN + 1, 3);
	sv__put_be32(p + SV_BTH_LEN + SV_AETH_LEN, 12);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_AETH_LEN + 4 + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_AETH_LEN);
	cr_assert(sv__ib_sr_nak(&k, &trig));
	cr_assert_eq(trig, 12);
	cr_assert_eq(sv__ib_pkt_payload_check(&k, 0), 0);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + SV_AETH_LEN + SV_ICRC_LEN),
		     SV_BTH_LEN + SV_AETH_LEN);
	cr_assert_not(sv__ib_sr_nak(&k, &trig));

	/* Pad beyond the payload; a pad that completes the word. */
	sv__roce_bth_put(p, SV_IB_OP_SEND_ONLY, false, 3, 5, false, 9);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + 2 + SV_ICRC_LEN), -EBADMSG);
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + 4 + SV_ICRC_LEN), SV_BTH_LEN);
	cr_assert_eq(k.payload_len, 1);
	/* A UC opcode decodes, but is not the RC transport's: the receiver checks. */
	p[0] = SV_IB_UC | SV_IB_OP_SEND_ONLY;
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + 4 + SV_ICRC_LEN), SV_BTH_LEN);
	cr_assert_neq(k.bth.opcode & SV_IB_TRANSPORT_MASK, SV_IB_RC);
	p[0] = 0x15;			/* reserved opcode */
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + 4 + SV_ICRC_LEN), -EPROTO);
	p[0] = SV_IB_OP_SEND_ONLY;
	p[1] |= 0x01;			/* TVer 1 */
	cr_assert_eq(sv__ib_pkt_decode(&k, p, SV_BTH_LEN + 4 + SV_ICRC_LEN), -EPROTO);
}
