/*
 * netns_util.h — a network namespace of the test's own, with a non-loopback interface.
 *
 * Some frameworks take their RDMA addresses only from non-loopback interfaces:
 * libfabric's verbs provider lists an interface's addresses for FI_EP_MSG only when the
 * interface is up and not IFF_LOOPBACK, and only the addresses rdma_bind_addr maps to an
 * RDMA device (cm_id->verbs). A namespace that has only lo (as `unshare -n` gives) has
 * none, so these tests make one that has.
 */
#ifndef NETNS_UTIL_H
#define NETNS_UTIL_H

/* The address netns_private() puts on its interface: a loopback address, so that both
 * devices reach it (sv_tcp0 binds any local address, sv_udp0 on a loopback address
 * any other loopback address through the host-local directory, wire/roce_cm_dir.c),
 * on an interface that is not the loopback one. */
#define NETNS_IF_ADDR "127.0.1.1"

/* Moves the calling test process, and every program it starts from now on, into a new
 * network namespace with lo up and a TAP interface "sv0" up with NETNS_IF_ADDR/32.
 * Skips the test, saying why, when not root, or when the namespace or the interface
 * cannot be made (no /dev/net/tun). Nothing in it reaches another host: a TAP interface that no
 * process has open carries nothing, and traffic to its address stays on the host. */
void netns_private(void);

#endif
