/*
 * aead.c — sv_qp_aead_spi() and sv_qp_set_aead(): authenticated encryption of a QP's
 * packets, which the UDP transport does (wire/roce_aead.c, doc/security.md
 * "Authenticated encryption on the UDP mode"). Core checks the arguments and the QP's
 * state; the transport installs the keys where its receive and transmit paths look.
 */
#include <errno.h>

#include "core/internal.h"
#include "nic/nic.h"

int sv_qp_aead_spi(struct sv_qp *pub, uint32_t *spi)
{
	struct sv__qp *qp;

	if (!pub || !spi)
		return -EINVAL;
	if (pub->context->nic)
		return -EOPNOTSUPP;	/* the device has its own link security */
	qp = to_qp(pub);
	if (!qp->ops->qp_aead_spi || pub->qp_type != SV_QPT_RC)
		return -EOPNOTSUPP;
	return qp->ops->qp_aead_spi(pub, spi);
}

int sv_qp_set_aead(struct sv_qp *pub, const struct sv_aead_keys *keys)
{
	enum sv_qp_state st;
	struct sv__qp *qp;

	if (!pub || !keys || !keys->tx_spi ||
	    (keys->alg != SV_AEAD_AES_128_GCM && keys->alg != SV_AEAD_AES_256_GCM))
		return -EINVAL;
	if (pub->context->nic)
		return -EOPNOTSUPP;	/* the device has its own link security */
	qp = to_qp(pub);
	if (!qp->ops->qp_set_aead || pub->qp_type != SV_QPT_RC)
		return -EOPNOTSUPP;
	/* Before RTR: from then on the QP receives, and every packet it takes must be
	 * authenticated. */
	sv__qp_lock(pub);
	st = qp->attr.qp_state;
	sv__qp_unlock(pub);
	if (st != SV_QPS_RESET && st != SV_QPS_INIT)
		return -EINVAL;
	return qp->ops->qp_set_aead(pub, keys);
}

int sv_qp_aead_exchange(struct sv_qp *pub, int fd, int server, uint32_t *peer_qpn)
{
	enum sv_qp_state st;
	struct sv__qp *qp;

	if (!pub || fd < 0)
		return -EINVAL;
	if (pub->context->nic)
		return -EOPNOTSUPP;	/* the device has its own link security */
	qp = to_qp(pub);
	if (!qp->ops->qp_aead_exchange || pub->qp_type != SV_QPT_RC)
		return -EOPNOTSUPP;
	sv__qp_lock(pub);
	st = qp->attr.qp_state;
	sv__qp_unlock(pub);
	if (st != SV_QPS_RESET && st != SV_QPS_INIT)
		return -EINVAL;
	return qp->ops->qp_aead_exchange(pub, fd, server != 0, peer_qpn);
}
