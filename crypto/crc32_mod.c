/*
 * crc32_mod.c — multiplication and powers of x modulo the CRC-32 polynomial
 * (crypto/crc32_mod.h has the representation).
 */
#include "crypto/crc32_mod.h"

/* P without its x^32 term, reflected: x^32 = this (mod P). */
#define POLY 0xedb88320u

/*
 * x^-1 mod P. P = x^32 + q(x) + 1 with x dividing q, so 1 = x * (x^31 + q(x)/x) mod P:
 * the inverse is q(x)/x (P's terms x^1..x^31 each moved down one degree, which in the
 * reflected form is a shift left once the x^0 bit is cleared) plus x^31 (bit 0).
 */
#define X_INV ((((POLY & ~SV_CRC32_ONE) << 1) & 0xffffffffu) | 1u)

uint32_t sv__crc32_mulmod(uint32_t a, uint32_t b)
{
	uint32_t p = 0;

	/* For each coefficient of a from x^0 up, add b when it is set; b runs through
	 * b, b*x, b*x^2, ...: one degree up is one bit right, and x^31 * x is P's rest. */
	for (uint32_t m = SV_CRC32_ONE; m; m >>= 1) {
		if (a & m)
			p ^= b;
		b = (b & 1) ? (b >> 1) ^ POLY : b >> 1;
	}
	return p;
}

/* base^e mod P by squaring. */
static uint32_t powmod(uint32_t base, uint64_t e)
{
	uint32_t r = SV_CRC32_ONE;

	while (e) {
		if (e & 1)
			r = sv__crc32_mulmod(r, base);
		base = sv__crc32_mulmod(base, base);
		e >>= 1;
	}
	return r;
}

uint32_t sv__crc32_x8n(uint64_t n)
{
	return powmod(SV_CRC32_X >> 7, n);	/* x^8 */
}

uint32_t sv__crc32_x8n_inv(uint64_t n)
{
	uint32_t xinv8 = powmod(X_INV, 8);

	return powmod(xinv8, n);
}
