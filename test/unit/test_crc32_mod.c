/*
 * test_crc32_mod.c — arithmetic modulo the CRC-32 polynomial (crypto/crc32_mod.h) against
 * zlib's crc32() and crc32_combine(): appending zero bytes multiplies a register by
 * x^(8n), the inverse power undoes it, and the CRC of two equal-length messages differs
 * by the zero-register CRC of their difference.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <zlib.h>

#include "crypto/crc32_mod.h"

/* A fixed xorshift sequence: the same values every run. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 16);
}

Test(crc32_mod, identities)
{
	cr_assert_eq(sv__crc32_x8n(0), SV_CRC32_ONE);
	cr_assert_eq(sv__crc32_x8n_inv(0), SV_CRC32_ONE);
	/* x^8 is x shifted eight degrees: bit 31 - 8. */
	cr_assert_eq(sv__crc32_x8n(1), 1u << 23);
	/* x^32 = P's rest, zlib's table entry for 0x80 (crc32 of one byte 0x80 from a
	 * zero register: (0x80) * x^8 = x^0 * x^32). */
	cr_assert_eq(sv__crc32_x8n(4), 0xedb88320u);
	for (int i = 0; i < 200; i++) {
		uint32_t a = rnd(), b = rnd(), c = rnd();

		cr_assert_eq(sv__crc32_mulmod(a, SV_CRC32_ONE), a);
		cr_assert_eq(sv__crc32_mulmod(a, b), sv__crc32_mulmod(b, a));
		cr_assert_eq(sv__crc32_mulmod(a, b ^ c),
			     sv__crc32_mulmod(a, b) ^ sv__crc32_mulmod(a, c));
	}
	for (uint64_t n = 0; n < 70000; n += 1 + n / 3)
		cr_assert_eq(sv__crc32_mulmod(sv__crc32_x8n(n), sv__crc32_x8n_inv(n)),
			     SV_CRC32_ONE, "n %llu", (unsigned long long)n);
}

/* crc32_combine(c1, c2, n) is c1 moved past n bytes, xor c2. */
Test(crc32_mod, shift_is_zlib_combine)
{
	for (int i = 0; i < 100; i++) {
		uint32_t c1 = rnd(), c2 = rnd();
		z_off_t n = (z_off_t)(rnd() % 10000);

		cr_assert_eq(sv__crc32_mulmod(c1, sv__crc32_x8n((uint64_t)n)) ^ c2,
			     (uint32_t)crc32_combine(c1, c2, n), "n %ld", (long)n);
	}
}

/* Equal-length messages m and m' = m xor d: crc(m) xor crc(m') is the register that d
 * leaves from zero, which is each 4-byte word of d times x^(8 * bytes from it to the end),
 * and the inverse power reads the word back. */
Test(crc32_mod, affine_difference)
{
	uint8_t m[1500], m2[1500];

	for (size_t i = 0; i < sizeof(m); i++)
		m[i] = (uint8_t)rnd();
	for (size_t off = 0; off + 4 <= sizeof(m); off += 97) {
		uint32_t w = rnd(), diff, back;

		memcpy(m2, m, sizeof(m));
		for (int k = 0; k < 4; k++)
			m2[off + k] ^= (uint8_t)(w >> (8 * k));
		diff = (uint32_t)(crc32(0, m, sizeof(m)) ^ crc32(0, m2, sizeof(m2)));
		cr_assert_eq(diff, sv__crc32_mulmod(w, sv__crc32_x8n(sizeof(m) - off)));
		back = sv__crc32_mulmod(diff, sv__crc32_x8n_inv(sizeof(m) - off));
		cr_assert_eq(back, w, "off %zu", off);
	}
}
