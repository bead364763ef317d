/*
 * roce_kx.h — the key exchange of the UDP mode's authenticated encryption
 * (doc/roce-aead.md, "Key exchange"): a TLS 1.3 handshake over TCP between the two ends,
 * the key-exchange messages (wire/aead_kx.h) inside it, and the packet keys from its
 * exporter (RFC 8446 section 7.5).
 *
 * A device opened with tls listens on TCP at its own address and UDP port number and
 * answers exchanges on a thread of its own; what it agreed waits, bounded in number and
 * time, for the REQ of the QP it was agreed for, and the accepting QP takes it
 * (sv__roce_kx_accept). The connecting side runs its exchange on the application's
 * thread before the REQ goes out (sv__roce_kx_connect). sv_qp_aead_exchange() runs one
 * over a TCP connection the application made.
 */
#ifndef SV_WIRE_ROCE_KX_H
#define SV_WIRE_ROCE_KX_H

#include <stdbool.h>
#include <stdint.h>

#include "wire/roce.h"

/* ctx_init, once the UDP socket is bound: with o->tls, the listener (when the device has
 * a certificate) and the client context. 0, or a negative errno (logged). */
int sv__roce_kx_init(struct sv__rctx *rc, const struct sv_device_opts *o);
/* Stops the listener and frees what init made (rc->kx NULL: nothing). */
void sv__roce_kx_fini(struct sv__rctx *rc);
/* The pre_connect op (core/transport.h): with tls, runs the exchange with the device that
 * serves dst and gives the QP its keys. */
int sv__roce_kx_connect(struct sv_qp *qp, const struct sockaddr *dst);
/* [loop] sv__roce_cm_accept() on a device with tls: gives q the keys agreed with the
 * device at gsi (its UDP socket) for its QP peer_qpn. -ECONNREFUSED if there are none. */
int sv__roce_kx_accept(struct sv__rqp *q, const union sv__roce_addr *gsi, uint32_t peer_qpn);
/* The qp_aead_exchange op. */
int sv__roce_kx_exchange(struct sv_qp *qp, int fd, bool server, uint32_t *peer_qpn);

#endif
