/*
 * roce_cm_dir.h — host-local address resolution for the UDP transport's CM on loopback
 * (see roce_cm_dir.c): listeners publish themselves, connecting sides look them up.
 */
#ifndef SV_WIRE_ROCE_CM_DIR_H
#define SV_WIRE_ROCE_CM_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/roce.h"

/* Whether a is a loopback address: 127/8 or ::1. */
bool sv__roce_addr_loopback(const union sv__roce_addr *a);

/*
 * Publishes a listener of rdma_cm port space ps on service port svc, listening on
 * listen_ip (the address the application gave: the device's own, another loopback
 * address or the wildcard) of the device whose UDP socket is dev, among the devices
 * configured with UDP port fabric. Returns a descriptor that keeps the entry alive
 * until sv__roce_cm_dir_withdraw(), or a negative errno: -EOPNOTSUPP where there is no
 * host-local directory (not Linux) or nothing to publish (dev not loopback and the
 * listener on dev's own address, which the IP alone names).
 */
int sv__roce_cm_dir_publish(uint16_t fabric, uint16_t ps, uint16_t svc,
			    const union sv__roce_addr *listen_ip, const union sv__roce_addr *dev);

/* Removes the entry published with fd. */
void sv__roce_cm_dir_withdraw(int fd);

/*
 * The UDP socket of the device whose listener of port space ps serves dst (a loopback
 * IP and the service port), among the devices configured with UDP port fabric: 0 and
 * *dev set, or -ENOENT (nobody published one; the caller then sends where it would
 * without a directory). Only records our own uid published count: each record of
 * another uid that would have been used adds one to *foreign.
 */
int sv__roce_cm_dir_lookup(uint16_t fabric, uint16_t ps, const union sv__roce_addr *dst,
			   union sv__roce_addr *dev, uint64_t *foreign);

#endif
