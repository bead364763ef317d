/*
 * aead.c — sv_qp_aead_spi() and sv_qp_set_aead(): authenticated encryption of a QP's
 * packets, which the UDP transport does (wire/roce_aead.c, doc/security.md
 * "Authenticated encryption on the UDP mode"). Core checks the arguments and the QP's
 * state; the transport installs the keys where its receive and transmit paths look.
 */
#include <errno.h>

#include "core/internal.h"
#include "nic/nic.h"

/* The transport ops of an RC QP of a software device, the ones that may do AEAD; NULL
 * otherwise: a device has its own link security. */
static const struct sv__transport_ops *aead_ops(struct sv_qp *pub)
{
	if (pub->context->nic || pub->qp_type != SV_QPT_RC)
		return NULL;
	return to_qp(pub)->ops;
}

/* Keys go in before RTR: from then on the QP receives, and every packet it takes must be
 * authenticated. */
static bool aead_keys_in_time(struct sv__qp *qp)
{
	enum sv_qp_state st;

	sv__qp_lock(&qp->pub);
	st = qp->attr.qp_state;
	sv__qp_unlock(&qp->pub);
	return st == SV_QPS_RESET || st == SV_QPS_INIT;
}

int sv_qp_aead_spi(struct sv_qp *pub, uint32_t *spi)
{
	const struct sv__transport_ops *ops;

	if (!pub || !spi)
		return -EINVAL;
	if (!(ops = aead_ops(pub)) || !ops->qp_aead_spi)
		return -EOPNOTSUPP;
	return ops->qp_aead_spi(pub, spi);
}

int sv_qp_set_aead(struct sv_qp *pub, const struct sv_aead_keys *keys)
{
	const struct sv__transport_ops *ops;

	if (!pub || !keys || !keys->tx_spi ||
	    (keys->alg != SV_AEAD_AES_128_GCM && keys->alg != SV_AEAD_AES_256_GCM))
		return -EINVAL;
	if (!(ops = aead_ops(pub)) || !ops->qp_set_aead)
		return -EOPNOTSUPP;
	if (!aead_keys_in_time(to_qp(pub)))
		return -EINVAL;
	return ops->qp_set_aead(pub, keys);
}

int sv_qp_aead_exchange(struct sv_qp *pub, int fd, int server, uint32_t *peer_qpn)
{
	const struct sv__transport_ops *ops;

	if (!pub || fd < 0)
		return -EINVAL;
	if (!(ops = aead_ops(pub)) || !ops->qp_aead_exchange)
		return -EOPNOTSUPP;
	if (!aead_keys_in_time(to_qp(pub)))
		return -EINVAL;
	return ops->qp_aead_exchange(pub, fd, server != 0, peer_qpn);
}
