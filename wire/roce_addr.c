/*
 * roce_addr.c — the address helpers of the RoCEv2-framed UDP transport: IPv4 or IPv6
 * socket addresses as the device is bound, and their GIDs (the RoCEv2 form: IPv4-mapped,
 * or the IPv6 address itself; roce.c says how a context picks its address).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "wire/roce.h"

static const uint8_t v4mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

socklen_t sv__roce_addr_len(const union sv__roce_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->v6) : sizeof(a->v4);
}

uint16_t sv__roce_addr_port(const union sv__roce_addr *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->v6.sin6_port : a->v4.sin_port);
}

void sv__roce_addr_set_port(union sv__roce_addr *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->v6.sin6_port = htons(port);
	else
		a->v4.sin_port = htons(port);
}

bool sv__roce_addr_same_ip(const union sv__roce_addr *a, const union sv__roce_addr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET6)
		return IN6_ARE_ADDR_EQUAL(&a->v6.sin6_addr, &b->v6.sin6_addr);
	return a->v4.sin_addr.s_addr == b->v4.sin_addr.s_addr;
}

bool sv__roce_addr_any(const union sv__roce_addr *a)
{
	if (a->sa.sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&a->v6.sin6_addr);
	return a->v4.sin_addr.s_addr == htonl(INADDR_ANY);
}

bool sv__roce_addr_eq(const union sv__roce_addr *a, const union sv__roce_addr *b)
{
	return sv__roce_addr_same_ip(a, b) && sv__roce_addr_port(a) == sv__roce_addr_port(b);
}

void sv__roce_addr_gid(const union sv__roce_addr *a, uint8_t gid[16])
{
	if (a->sa.sa_family == AF_INET6) {
		memcpy(gid, a->v6.sin6_addr.s6_addr, 16);
		return;
	}
	memcpy(gid, v4mapped_prefix, sizeof(v4mapped_prefix));
	memcpy(gid + 12, &a->v4.sin_addr, 4);
}

int sv__roce_addr_from_gid(const struct sv__rctx *rc, const uint8_t gid[16], uint16_t port,
			   union sv__roce_addr *out)
{
	bool mapped = memcmp(gid, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0;

	memset(out, 0, sizeof(*out));
	if (rc->local.sa.sa_family == AF_INET) {
		if (!mapped)
			return -EAFNOSUPPORT;
		out->v4.sin_family = AF_INET;
		memcpy(&out->v4.sin_addr, gid + 12, 4);
	} else {
		if (mapped)
			return -EAFNOSUPPORT;
		out->v6.sin6_family = AF_INET6;
		memcpy(out->v6.sin6_addr.s6_addr, gid, 16);
		/* A link-local peer is on the device's link. */
		if (IN6_IS_ADDR_LINKLOCAL(&out->v6.sin6_addr))
			out->v6.sin6_scope_id = rc->local.v6.sin6_scope_id;
	}
	sv__roce_addr_set_port(out, port ? port : rc->dport_default);
	return 0;
}

const char *sv__roce_addr_str(const union sv__roce_addr *a, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->v6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, cap, "[%s]:%u", ip, sv__roce_addr_port(a));
	} else {
		inet_ntop(AF_INET, &a->v4.sin_addr, ip, sizeof(ip));
		snprintf(buf, cap, "%s:%u", ip, sv__roce_addr_port(a));
	}
	return buf;
}

/* [qp-locked] After a flush, outside any packet loop: a datagram the socket refused for
 * good (sv__roce_tx_refused) is a local QP operation error (IBA Vol 1 chapter 10's completion
 * errors: the QP's own configuration, here a path MTU its link cannot carry, keeps it
 * from sending). The oldest outstanding send WR completes with it and the QP goes to
 * ERR; a QP with no send WR outstanding (the refused datagram was a READ response or an
 * acknowledgement) fails with the local work queue catastrophic error event. */
