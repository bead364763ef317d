/*
 * aead_kx.c — the key-exchange message (wire/aead_kx.h, doc/security.md).
 */
#include <errno.h>
#include <string.h>

#include "softverbs.h"
#include "wire/aead_kx.h"
#include "wire/byteorder.h"

static const uint8_t magic[4] = { 'S', 'V', 'K', 'X' };

int sv__aead_kx_encode(uint8_t *p, size_t cap, const struct sv_aead_kx *m)
{
	if (cap < SV_AEAD_KX_LEN)
		return -ENOSPC;
	memcpy(p, magic, sizeof(magic));
	p[4] = m->version;
	p[5] = m->alg;
	p[6] = p[7] = 0;
	sv__put_be32(p + 8, m->qpn);
	sv__put_be32(p + 12, m->spi);
	return SV_AEAD_KX_LEN;
}

int sv__aead_kx_decode(struct sv_aead_kx *m, const uint8_t *p, size_t len)
{
	if (len < SV_AEAD_KX_LEN)
		return -EBADMSG;
	m->version = p[4];
	m->alg = p[5];
	m->qpn = sv__get_be32(p + 8);
	m->spi = sv__get_be32(p + 12);
	if (memcmp(p, magic, sizeof(magic)) != 0 || m->version != SV_AEAD_KX_VERSION ||
	    (m->alg != SV_AEAD_AES_128_GCM && m->alg != SV_AEAD_AES_256_GCM) || p[6] || p[7] ||
	    m->qpn > 0xffffffu || !m->spi)
		return -EPROTO;
	return SV_AEAD_KX_LEN;
}
