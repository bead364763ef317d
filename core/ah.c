/*
 * ah.c — address handles for UD QPs (doc/verbs.md; IBA 10.2.2.1). An AH is the destination
 * of a UD SEND: the remote device's GID and UDP port. The UDP transport addresses peers of
 * its own family, so the GID must be IPv4-mapped (::ffff:a.b.c.d) on a device bound to
 * IPv4 and a plain IPv6 address on one bound to IPv6, as sv_query_gid returns; the check
 * is made here so that a bad address fails at creation, not at every post. The unspecified
 * GID (::) is no destination: it is what an AH without a GRH comes to, and RoCE has none.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "nic/nic.h"

int sv_create_ah(struct sv_pd *pd, const struct sv_ah_attr *attr, struct sv_ah **out)
{
	static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint8_t own[16];
	bool v4;
	struct sv__ah *ah;

	if (!pd || !attr || !out)
		return -EINVAL;
	if (pd->context->nic)
		return sv__nic_create_ah(pd, attr, out);
	if (pd->context->opts.transport != SV_TRANSPORT_UDP) {
		sv__log(SV_LOG_ERROR, "softverbs: address handles need the UDP transport");
		return -EOPNOTSUPP;
	}
	/* RoCE routes on the GRH alone (the RoCE annexes of IBA vol. 1 replace the LRH by
	 * Ethernet and IP headers), so a destination without a GID, an LID-only handle
	 * (the drop-in passes ibv_ah_attr.is_global = 0 as the unspecified GID), cannot be
	 * reached: the kernel's verbs refuse it with EINVAL on a RoCE port too. */
	if (!memcmp(attr->dgid, (const uint8_t[16]){ 0 }, 16)) {
		sv__log(SV_LOG_ERROR, "softverbs udp: an address handle on RoCE needs a GRH "
			"(a destination GID; is_global = 0 or dgid :: is not routable)");
		return -EINVAL;
	}
	if (sv_query_gid(pd->context, 1, 0, own) < 0)
		return -EINVAL;
	v4 = memcmp(own, v4mapped, sizeof(v4mapped)) == 0;
	if ((memcmp(attr->dgid, v4mapped, sizeof(v4mapped)) == 0) != v4) {
		sv__log(SV_LOG_ERROR, "softverbs udp: AH dgid must be %s, as the device is",
			v4 ? "IPv4-mapped (::ffff:a.b.c.d)" : "an IPv6 address");
		return -EAFNOSUPPORT;
	}
	if (!(ah = calloc(1, sizeof(*ah))))
		return -ENOMEM;
	ah->pub.context = pd->context;
	ah->pub.pd = pd;
	ah->attr = *attr;
	atomic_fetch_add(&container_of(pd, struct sv__pd, pub)->n_ah, 1);
	*out = &ah->pub;
	return 0;
}

int sv_destroy_ah(struct sv_ah *pub)
{
	if (!pub)
		return -EINVAL;
	if (pub->context->nic)
		return sv__nic_destroy_ah(pub);
	atomic_fetch_sub(&container_of(pub->pd, struct sv__pd, pub)->n_ah, 1);
	free(to_ah(pub));
	return 0;
}
