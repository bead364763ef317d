/*
 * netns_util.c — a network namespace of the test's own (netns_util.h).
 */
#include "netns_util.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

void netns_private(void)
{
	int r;

	/* As root only: a test process has threads, and unshare(2) refuses a user
	 * namespace (the unprivileged way) to a threaded process. */
	if (geteuid() != 0)
		cr_skip_test("needs root for a network namespace of its own (CLONE_NEWNET): "
			     "run as root");
	if (unshare(CLONE_NEWNET) < 0)
		cr_skip_test("unshare(CLONE_NEWNET): %s: run as root where namespaces are "
			     "allowed", strerror(errno));
	r = system("ip link set lo up && ip tuntap add dev sv0 mode tap && "
		   "ip addr add " NETNS_IF_ADDR "/32 dev sv0 && ip link set sv0 up");
	if (r != 0)
		cr_skip_test("cannot set up a TAP interface in the test's network namespace "
			     "(`ip tuntap add`: status %d; needs /dev/net/tun and iproute2)", r);
}
