/*
 * roce_fake_util.c — the hand-driven UDP peer of roce_fake_util.h.
 */
#include "roce_fake_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/icrc.h"
#include "wire/byteorder.h"

int rf_dev_open(struct rf_dev *d, uint16_t port, int retx)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_device_opts o;

	memset(d, 0, sizeof(*d));
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_UDP;
	o.port = port;
	if (retx >= 0)
		o.retx = retx;
	if (sv_open_device(&o, &d->ctx) < 0)
		return 1;
	if (sv_query_gid(d->ctx, 1, 0, d->gid) < 0 || sv_alloc_pd(d->ctx, &d->pd) < 0 ||
	    sv_create_cq(d->ctx, 16, NULL, NULL, 0, &d->cq) < 0)
		return 2;
	ia.send_cq = ia.recv_cq = d->cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (sv_create_qp(d->pd, &ia, &d->qp) < 0 || sv_cm_create_channel(&d->ch) < 0 ||
	    sv_cm_create_id(d->ch, d->ctx, NULL, &d->id) < 0)
		return 3;
	return 0;
}

uint16_t rf_free_port(void)
{
	struct sockaddr_in a;
	int fd = rf_socket(0, &a);

	close(fd);
	return ntohs(a.sin_port);
}

int rf_socket(uint16_t port, struct sockaddr_in *a)
{
	static const int pmtu = IP_PMTUDISC_DO;
	socklen_t l = sizeof(*a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert(fd >= 0);
	cr_assert_eq(setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)), 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(RF_IP);
	a->sin_port = htons(port);
	cr_assert_eq(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)a, &l), 0);
	return fd;
}

void rf_send(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to, uint8_t *pkt,
	     size_t len)
{
	uint32_t icrc;

	cr_assert_eq(sv__icrc_packet(&icrc, (const struct sockaddr *)fake,
				     (const struct sockaddr *)to, NULL, pkt, len), 0);
	sv__put_le32(pkt + len - 4, icrc);
	cr_assert_eq(sendto(fd, pkt, len, 0, (const struct sockaddr *)to, sizeof(*to)),
		     (ssize_t)len);
}

void rf_mad(int fd, const struct sockaddr_in *fake, const struct sockaddr_in *to,
	    const struct sv_cm_msg *m)
{
	uint8_t pkt[12 + 8 + SV_MAD_LEN + 4] = { 0 };

	pkt[0] = 0x64;			/* UD SEND Only */
	sv__put_be16(pkt + 2, 0xffff);
	sv__put_be24(pkt + 5, 1);
	sv__put_be32(pkt + 12, 0x80010000u);
	sv__put_be24(pkt + 17, 1);
	cr_assert_eq(sv__cm_encode(pkt + 20, SV_MAD_LEN, m), SV_MAD_LEN);
	rf_send(fd, fake, to, pkt, sizeof(pkt));
}

ssize_t rf_recv(int fd, int ent, uint8_t *pkt, size_t cap)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint8_t junk[64];

	cr_assert_eq(poll(&pf, 1, RF_WAIT_MS), 1, "nothing at the RoCE port");
	if (ent >= 0)
		cr_assert_lt(recv(ent, junk, sizeof(junk), MSG_DONTWAIT), 0,
			     "a datagram went to the MAD's source port");
	return recv(fd, pkt, cap, 0);
}

void rf_expect_mad(int fd, int ent, uint16_t attr, struct sv_cm_msg *m)
{
	uint8_t pkt[512];

	for (int i = 0; i < 8; i++) {
		cr_assert_eq(rf_recv(fd, ent, pkt, sizeof(pkt)), 12 + 8 + SV_MAD_LEN + 4);
		cr_assert_eq(sv__cm_decode(m, pkt + 20, SV_MAD_LEN), SV_MAD_LEN);
		if (m->mad.attr_id == attr)
			return;
	}
	cr_assert_fail("no %s at the RoCE port", sv__cm_attr_name(attr));
}
