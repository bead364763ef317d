/*
 * roce_port.c — the port's active MTU, from the interface the device's address is on.
 *
 * A RoCE port's active MTU is the largest IB MTU (256, 512, 1024, 2048 or 4096 bytes)
 * whose packets fit in its Ethernet link's MTU, as the kernel's rxe derives it from its
 * netdev: 1500 -> 1024, 9000 -> 4096, loopback's 65536 -> 4096. A packet of one full
 * path MTU of payload carries, besides the payload, the IP header (20 bytes IPv4, 40
 * IPv6), UDP (8), BTH (12), at most RETH (16) and ImmDt (4) (RDMA WRITE Only with
 * Immediate; IBA Vol 1 chapter 9) and the ICRC (4). rxe sets 80 bytes aside for all
 * headers whatever the family; IPv6's worst case is 84, so we set aside the larger of
 * the two, and only a link MTU within 4 bytes of a boundary tells the two rules apart.
 *
 * The device's socket is bound to one address, so its interface is the one that has that
 * address (getifaddrs). The loopback fallbacks 127.0.0.2 ... are not interface addresses
 * but live in lo's 127.0.0.0/8, so a loopback address not found exactly takes the
 * loopback interface's MTU. An address on no interface (it left between bind and this
 * look-up) gets 1024, which fits every Ethernet link of the usual 1500 bytes and above;
 * the device says so in its log. (There is no wildcard case: an unset, "0.0.0.0" or "::"
 * bind address means loopback, roce.c.) The MTU is read when the device opens; rxe
 * follows later changes of its netdev's MTU, we do not, but a datagram a changed link
 * no longer carries is still refused by the socket and fails its QP, never lost quietly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "wire/roce.h"

/* Headers around one path MTU of payload (see the top of this file). */
#define RXE_HDR_ALLOWANCE 80
#define UDP_HDR_LEN 8
#define WORST_HDRS (UDP_HDR_LEN + SV_BTH_LEN + SV_RETH_LEN + SV_IMMDT_LEN + SV_ICRC_LEN)

enum sv_mtu sv__roce_ib_mtu(uint32_t link_mtu, int family)
{
	uint32_t ip = family == AF_INET6 ? 40 : 20;
	uint32_t hdrs = ip + WORST_HDRS > RXE_HDR_ALLOWANCE ? ip + WORST_HDRS :
			RXE_HDR_ALLOWANCE;
	unsigned m;

	if (link_mtu < hdrs + 256)
		return SV_MTU_256;	/* the smallest IB MTU, as rxe falls back to */
	m = sv__ib_mtu_from_bytes(link_mtu - hdrs);
	return (enum sv_mtu)m;
}

static bool same_addr(const struct sockaddr *ifa, const union sv__roce_addr *a)
{
	if (ifa->sa_family != a->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET)
		return ((const struct sockaddr_in *)ifa)->sin_addr.s_addr ==
		       a->v4.sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)ifa)->sin6_addr, &a->v6.sin6_addr, 16);
}

static bool is_loopback(const union sv__roce_addr *a)
{
	if (a->sa.sa_family == AF_INET)
		return (ntohl(a->v4.sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&a->v6.sin6_addr);
}

static int ifname_mtu(const char *name, uint32_t *mtu)
{
	struct ifreq ifr;
	int fd, r = 0;

	if ((fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFMTU, &ifr) < 0)
		r = -errno;
	else
		*mtu = ifr.ifr_mtu > 0 ? (uint32_t)ifr.ifr_mtu : 0;
	close(fd);
	return r;
}

int sv__roce_link_mtu(const union sv__roce_addr *a, char *ifname, size_t cap,
		      uint32_t *mtu)
{
	struct ifaddrs *list, *hit = NULL, *lo = NULL;
	int r;

	if (getifaddrs(&list) < 0)
		return -errno;
	for (struct ifaddrs *i = list; i && !hit; i = i->ifa_next) {
		if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
			continue;
		if (same_addr(i->ifa_addr, a))
			hit = i;
		else if (!lo && (i->ifa_flags & IFF_LOOPBACK))
			lo = i;
	}
	if (!hit && is_loopback(a))
		hit = lo;
	if (!hit) {
		freeifaddrs(list);
		return -ENOENT;
	}
	snprintf(ifname, cap, "%s", hit->ifa_name);
	freeifaddrs(list);
	r = ifname_mtu(ifname, mtu);
	return r < 0 ? r : 0;
}

void sv__roce_port_init(struct sv__rctx *rc)
{
	char name[IF_NAMESIZE + 8], str[INET6_ADDRSTRLEN + 8];
	uint32_t link = 0;
	int r = sv__roce_link_mtu(&rc->local, name, sizeof(name), &link);

	if (r < 0) {
		rc->active_mtu = SV_MTU_1024;
		sv__log(SV_LOG_WARN, "softverbs udp: no interface has %s (%s): active MTU 1024, "
			"which fits any Ethernet link of 1500 bytes or more",
			sv__roce_addr_str(&rc->local, str, sizeof(str)), strerror(-r));
		return;
	}
	rc->link_mtu = link;
	rc->active_mtu = sv__roce_ib_mtu(link, rc->local.sa.sa_family);
	sv__log(SV_LOG_INFO, "softverbs udp: %s is on %s, MTU %u: active MTU %u", sv__roce_addr_str(
		&rc->local, str, sizeof(str)), name, link, sv__ib_mtu_bytes(rc->active_mtu));
}
