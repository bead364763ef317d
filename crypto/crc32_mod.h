/*
 * crc32_mod.h — arithmetic modulo the CRC-32 polynomial (IEEE 802.3, the one of zlib's
 * crc32() and of the RoCEv2 ICRC), for reasoning about a CRC rather than computing one.
 *
 * A 32-bit value here is a polynomial of degree < 32 in the reflected form CRC-32 uses:
 * bit 31 is the coefficient of x^0, bit 0 that of x^31 (so 0x80000000 is 1 and
 * 0x40000000 is x). In this form the register of a table-driven CRC-32 holds exactly
 * such a residue: feeding it byte b turns register r into (r xor b) * x^8 mod P, and n
 * zero bytes multiply it by x^(8n). Hence, for two messages of equal length that differ
 * by d, their CRCs differ by the CRC of d from a zero register (the preset and the final
 * complement cancel): CRC-32 is affine over GF(2). doc/interop-icrc.md uses that.
 */
#ifndef SV_CRYPTO_CRC32_MOD_H
#define SV_CRYPTO_CRC32_MOD_H

#include <stddef.h>
#include <stdint.h>

#define SV_CRC32_ONE 0x80000000u	/* the polynomial 1 */
#define SV_CRC32_X 0x40000000u		/* the polynomial x */

/* a * b mod P. */
uint32_t sv__crc32_mulmod(uint32_t a, uint32_t b);

/* x^(8n) mod P: what n zero bytes after a register multiply it by. */
uint32_t sv__crc32_x8n(uint64_t n);

/* x^(-8n) mod P, the inverse of sv__crc32_x8n(n) (x is invertible: P has a constant
 * term): it moves a register difference back by n bytes. */
uint32_t sv__crc32_x8n_inv(uint64_t n);

#endif
