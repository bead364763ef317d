/*
 * roce_ud.c — UD QPs on the UDP transport, and the one-datagram sender they share with
 * the connection manager.
 *
 * A UD message is one packet (IBA 9.7.7): SEND_ONLY (0x64) or SEND_ONLY_WITH_IMMEDIATE
 * (0x65), BTH then DETH (Q_Key, source QP; IBA 9.3.4) then ImmDt. There is no ACK: the
 * send completes when the datagram is handed to the socket, and a datagram the socket
 * does not take for a passing reason (full, no route) is lost like any other (counted
 * in ud_tx_drops); one it can never take (EMSGSIZE) completes the WR in error. The BTH PSN counts up
 * per QP from the sq_psn of RTR->RTS; the receiver does not check it (IBA 9.7.7.1.1).
 *
 * The receiver checks the Q_Key against its own (IBA 10.2.5: mismatch, silent drop,
 * counted in qkey_drops), takes the next receive WQE (none: silent drop, counted) and
 * writes 40 bytes of GRH before the payload (IBA 11.4.1.1; the receive buffer must have
 * room for both, else nothing is placed and the WQE completes with LOC_LEN_ERR while the
 * QP stays in RTS: a datagram anyone can send must not end the QP's service,
 * doc/security.md "Datagrams"). On RoCEv2 over IPv4 the
 * "GRH" is the IPv4 header in the last 20 bytes of the 40 with the first 20 zero, as the
 * mlx5 and rxe drivers deliver it; over IPv6 it is the 40-byte IPv6 header, which has
 * the GRH's layout. The kernel does not give us the header it received, so we rebuild it
 * from what it must have been (grh_of()).
 *
 * Fault injection (SV_IMPAIR) applies here as on the RC path: UD datagrams and CM MADs
 * are lost, duplicated, reordered and delayed alike, which is what exercises the CM's
 * retransmissions.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "wire/roce.h"

int sv__roce_dgram_send(struct sv__rctx *rc, const union sv__roce_addr *dst, uint8_t *hdr,
			size_t hlen, const struct iovec *pay, int npay, uint32_t paylen)
{
	struct iovec v[SV__MAX_SGE + 3];
	unsigned pad = (-paylen) & 3;
	uint8_t trl[8] = { 0 };
	struct msghdr m;
	ssize_t r;
	int n = 0;

	if (npay > SV__MAX_SGE)
		return -EINVAL;
	hdr[1] = (uint8_t)((hdr[1] & ~0x30) | pad << 4);
	v[n].iov_base = hdr;
	v[n++].iov_len = hlen;
	for (int j = 0; j < npay; j++)
		v[n++] = pay[j];
	if (pad) {
		v[n].iov_base = trl;
		v[n++].iov_len = pad;
	}
	sv__put_le32(trl + pad, sv__roce_tx_icrc(rc, &dst->sa, 0, v, n));
	if (pad) {
		v[n - 1].iov_len = pad + SV_ICRC_LEN;
	} else {
		v[n].iov_base = trl;
		v[n++].iov_len = SV_ICRC_LEN;
	}
	memset(&m, 0, sizeof(m));
	m.msg_name = (void *)dst;
	m.msg_namelen = sv__roce_addr_len(dst);
	m.msg_iov = v;
	m.msg_iovlen = (size_t)n;
	if (rc->imp) {
		struct mmsghdr mm = { .msg_hdr = m };
		uint64_t next = 0;

		int e;

		/* Held packets are copied, so the stack buffers may go; the loop's timer
		 * releases them (woken as the RC path wakes it). */
		if (rc->pcap)	/* handed to the fault injector, which may lose it */
			sv__pcap_udp(rc->pcap, &rc->local.sa, &dst->sa, v, (size_t)n);
		e = sv__impair_send(rc->imp, rc->fd, &mm, 1, sv__now_ns(), &next);
		if (next)
			uv_async_send(&rc->imp_wake);
		return e;
	}
	do {
		r = sendmsg(rc->fd, &m, MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (rc->pcap)
		sv__pcap_udp(rc->pcap, &rc->local.sa, &dst->sa, v, (size_t)n);
	return 0;
}

int sv__roce_ud_modify(struct sv__rqp *q, const struct sv_qp_attr *attr, int mask)
{
	const struct sv_qp_attr *cur = sv__qp_attr(q->qp);
	enum sv_qp_state next = (mask & SV_QP_STATE) ? attr->qp_state : cur->qp_state;

	if (next == SV_QPS_RTR && cur->qp_state == SV_QPS_INIT) {
		q->mtu = 128u << cur->path_mtu;
		q->err = false;
		q->live = true;
	} else if (next == SV_QPS_RTS && cur->qp_state == SV_QPS_RTR) {
		q->ud_psn = attr->sq_psn & SV_PSN_MASK;
	}
	return 0;
}

/* [qp-locked] One WR as one datagram. */
static enum sv_wc_status send_one(struct sv__rqp *q, struct sv__send_wqe *w)
{
	const struct sv_qp_attr *a = sv__qp_attr(q->qp);
	uint8_t hdr[SV_BTH_LEN + SV_DETH_LEN + SV_IMMDT_LEN];
	bool imm = w->opcode == SV_WR_SEND_WITH_IMM;
	union sv__roce_addr dst;
	struct iovec iov[SV__MAX_SGE];
	size_t hlen = SV_BTH_LEN + SV_DETH_LEN;
	struct sv_deth deth;
	uint32_t qkey;
	int n, e;

	if ((n = sv__sq_map(q->qp, w, false, iov)) < 0)
		return SV_WC_LOC_PROT_ERR;
	/* The AH's GID has the device's family (sv_create_ah checked it). */
	if (sv__roce_addr_from_gid(q->rc, w->ah_attr.dgid, w->ah_attr.dport, &dst) < 0)
		return SV_WC_LOC_QP_OP_ERR;
	/* IBA 10.2.5: a WR Q_Key with the high bit set means "use the QP's Q_Key". */
	qkey = (w->remote_qkey & 0x80000000u) ? a->qkey : w->remote_qkey;
	sv__roce_bth_put(hdr, imm ? SV__ROCE_OP_UD_SEND_ONLY_IMM : SV__ROCE_OP_UD_SEND_ONLY,
			 w->flags & SV_SEND_SOLICITED, 0, w->remote_qpn, false, q->ud_psn);
	q->ud_psn = sv__psn_add(q->ud_psn, 1);
	deth.qkey = qkey;
	deth.src_qp = q->qp->qp_num;
	(void)sv__deth_encode(hdr + SV_BTH_LEN, SV_DETH_LEN, &deth);
	if (imm)
		hlen += (size_t)sv__immdt_encode(hdr + hlen, SV_IMMDT_LEN, w->imm_data);
	if ((e = sv__roce_dgram_send(q->rc, &dst, hdr, hlen, iov, n, w->length)) < 0) {
		if (sv__roce_tx_lossy(-e)) {
			q->ud_tx_drops++;
			return SV_WC_SUCCESS;
		}
		/* A datagram that can never go. A UD message is one packet, so one too big
		 * for the route is longer than the port can send: Local Length Error
		 * (IBA Vol 1 chapter 10's completion errors); anything else is the QP's own. */
		sv__roce_tx_refused(q, &dst, -e, hlen + w->length + SV_ICRC_LEN, 1);
		q->tx_errno = 0;
		return e == -EMSGSIZE ? SV_WC_LOC_LEN_ERR : SV_WC_LOC_QP_OP_ERR;
	} else {
		q->st.tx_packets++;
		q->st.tx_bytes += hlen + w->length + ((-w->length) & 3) + SV_ICRC_LEN;
	}
	return SV_WC_SUCCESS;
}

void sv__roce_ud_send(struct sv__rqp *q)
{
	struct sv__send_wqe *w;

	while (!q->err && (w = sv__sq_peek(q->qp))) {
		sv__sq_take(q->qp);
		sv__sq_done(q->qp, w, send_one(q, w), 0, 0);
	}
}

/* The IP header a RoCEv2 HCA puts in the 40-byte GRH area of a UD receive buffer: over
 * IPv4 the header in the last 20 bytes, over IPv6 the IPv6 header, which is a GRH's
 * layout (IBA 8.3; rxe and mlx5 deliver the received IP header so). The kernel does not
 * hand us the header it received, so it is rebuilt as our sockets send it: DF and ID 0
 * (IPv4), traffic class and flow label 0 (IPv6), and a hop limit / TTL of 64. Another
 * sender's IPv4 identification, which the ICRC check found, is not carried here: on an
 * unfragmented datagram it means nothing to the receiver (RFC 6864), and readers of the
 * GRH (rdma-core's ibv_init_ah_from_wc) take the version and addresses from it. */
static void grh_of(uint8_t grh[SV__ROCE_GRH_LEN], const union sv__roce_addr *src,
		   const union sv__roce_addr *dst, size_t udp_payload)
{
	uint8_t *ip = grh + 20;
	uint32_t sum = 0;

	memset(grh, 0, SV__ROCE_GRH_LEN);
	if (src->sa.sa_family == AF_INET6) {
		grh[0] = 0x60;			/* version 6, traffic class 0, flow label 0 */
		sv__put_be16(grh + 4, (uint16_t)(8 + udp_payload));
		grh[6] = IPPROTO_UDP;
		grh[7] = 64;
		memcpy(grh + 8, src->v6.sin6_addr.s6_addr, 16);
		memcpy(grh + 24, dst->v6.sin6_addr.s6_addr, 16);
		return;
	}
	ip[0] = 0x45;
	sv__put_be16(ip + 2, (uint16_t)(20 + 8 + udp_payload));
	sv__put_be16(ip + 6, 0x4000);	/* DF, as the socket sends (IP_PMTUDISC_DO) */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &src->v4.sin_addr, 4);
	memcpy(ip + 16, &dst->v4.sin_addr, 4);
	for (int i = 0; i < 20; i += 2)
		sum += sv__get_be16(ip + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	sv__put_be16(ip + 10, (uint16_t)~sum);
}

void sv__roce_ud_rx(struct sv__rqp *q, const union sv__roce_addr *src,
		    const union sv__roce_addr *dst, const uint8_t *p, size_t len)
{
	uint8_t grh[SV__ROCE_GRH_LEN];
	struct iovec iov[SV__MAX_SGE];
	struct sv__recv_wqe *wqe;
	struct sv_ib_pkt k;
	bool imm;
	int n;

	/* The dispatcher routes UD opcodes here; the decoder knows only SEND_ONLY(_IMM). */
	if (sv__ib_pkt_decode(&k, p, len) < 0 || !sv__ib_pkey_match(k.bth.pkey, SV_PKEY_DEFAULT))
		return;
	imm = k.flags & SV_IB_OPF_IMM;
	sv__qp_lock(q->qp);
	if (q->qp->qp_type != SV_QPT_UD || q->err || !q->live)
		goto out;
	if (k.deth.qkey != sv__qp_attr(q->qp)->qkey) {
		q->qkey_drops++;
		goto out;
	}
	if (sv__rq_take(q->qp, &wqe) < 0) {
		q->ud_no_recv_drops++;
		goto out;
	}
	q->st.rx_packets++;
	q->st.rx_bytes += len;
	sv__rq_set_src_qp(q->qp, wqe, k.deth.src_qp);
	/* Too long for the buffer: nothing is placed, the receive fails with LOC_LEN_ERR
	 * and the QP stays in RTS for the next datagram (core's sv__rq_done() keeps a UD
	 * QP out of ERR for this status alone; doc/security.md, "Datagrams"). */
	if ((uint64_t)wqe->length < SV__ROCE_GRH_LEN + (uint64_t)k.payload_len) {
		sv__rq_done(q->qp, wqe, SV_WC_LOC_LEN_ERR, SV_WC_RECV, 0, 0, 0, false);
		goto out;
	}
	if ((n = sv__rq_map(q->qp, wqe, iov)) < 0) {
		sv__rq_done(q->qp, wqe, SV_WC_LOC_PROT_ERR, SV_WC_RECV, 0, 0, 0, false);
		goto out;
	}
	grh_of(grh, src, dst, len);
	sv__roce_iov_copy_in(iov, n, 0, grh, SV__ROCE_GRH_LEN);
	sv__roce_iov_copy_in(iov, n, SV__ROCE_GRH_LEN, k.payload, (uint32_t)k.payload_len);
	sv__rq_done(q->qp, wqe, SV_WC_SUCCESS, SV_WC_RECV,
		    SV__ROCE_GRH_LEN + (uint32_t)k.payload_len, imm ? k.imm_be : 0,
		    SV_WC_GRH | (imm ? SV_WC_WITH_IMM : 0), k.bth.se);
out:
	sv__qp_unlock(q->qp);
}
