/*
 * transports.c — sv_open_device(): maps enum sv_transport to a transport's ops table.
 *
 * Kept apart from the rest of core on purpose: it is the only object that references the
 * transports' tables, so unit tests of core logic (which bring their own test transport
 * and call sv__open_device_with_ops()) do not pull the wire code in from the archive.
 */
#include <errno.h>

#include "core/internal.h"

static const struct sv__transport_ops *lookup(enum sv_transport t)
{
	switch (t) {
	case SV_TRANSPORT_TCP:
		return &sv__iwarp_tcp_ops;
	case SV_TRANSPORT_UDP:
		return &sv__roce_udp_ops;
	default:
		return NULL;
	}
}

int sv_open_device(const struct sv_device_opts *opts, struct sv_context **ctx)
{
	struct sv_device_opts o;
	const struct sv__transport_ops *ops;

	if (!opts) {
		sv_device_opts_init(&o);
		opts = &o;
	}
	if (opts->transport == SV_TRANSPORT_NIC)
		return ctx ? sv__open_nic(opts, ctx) : -EINVAL;
	if (!(ops = lookup(opts->transport)))
		return -EPROTONOSUPPORT;
	return sv__open_device_with_ops(opts, ops, ctx);
}
