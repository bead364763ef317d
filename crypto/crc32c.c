/*
 * crc32c.c — CRC-32C (Castagnoli), the MPA FPDU digest (RFC 5044 section 6, the iSCSI
 * CRC of RFC 3385).
 *
 * Two implementations of the same register update (no preset, no final complement; the
 * callers in crc32c.h do those):
 *  - a portable slicing-by-8 table walk, eight input bytes per step;
 *  - the SSE4.2 crc32 instruction on x86-64. The instruction has a latency of three
 *    cycles but issues one per cycle, so one dependency chain uses a third of the unit.
 *    Large buffers are therefore cut into three equal blocks whose CRCs run as three
 *    independent chains in the same loop; the partial CRCs are then joined by the
 *    linearity of the CRC: crc(A||B) = crc(A) * x^(8|B|) mod P  xor  crc0(B), where
 *    crc0 starts from a zero register. Multiplying by x^(8n) mod P is a linear map on 32
 *    bits, precomputed once per block size as four 256-entry tables (one per byte).
 * The choice between them is made once, at load time, from the CPU's feature bits.
 *
 * With ISA-L (SV_HAVE_ISAL), its crc32_iscsi takes buffers from ISAL_MIN bytes up: it
 * folds with carry-less multiplication and runs at 1.4 to 3.5 times the three-chain loop
 * from 256 bytes on, while at 128 bytes and below its setup costs more than the loop
 * (bench/crc32c_bench.c on the machine this was tuned on, GB/s: 128 B 5.6 against 7.8,
 * 256 B 15.9 against 10.9, 4 KiB 72 against 21).
 */
#include "crypto/crc32c.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>
#ifdef SV_HAVE_ISAL
#include <isa-l/crc.h>

#define ISAL_MIN 256
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_SSE42_PATH 1
#endif

#define POLY 0x82f63b78u		/* 0x1EDC6F41 bit-reversed */

/*
 * Block sizes of the three-chain loop, largest first: big buffers run mostly at the first
 * level, and the smaller levels keep three chains busy on the tail and on FPDU-sized
 * buffers. Joining costs two table shifts, small against even 3 x 64 bytes.
 */
#define NLEVELS 4
static const size_t level_block[NLEVELS] = { 8192, 1024, 256, 64 };
#define ZERO_CHUNK 64			/* divides every level_block */

static uint32_t sw_table[8][256];	/* sw_table[k][b]: b followed by k zero bytes */
static uint32_t level_shift[NLEVELS][4][256];	/* multiply by x^(8 * level_block) mod P */
static bool use_hw;

uint32_t sv__crc32c_update_sw(uint32_t state, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	/* Eight bytes per step: the first four are folded into the register, the other
	 * four are looked up directly; each table accounts for the zero bytes behind it. */
	while (len >= 8) {
		state ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24;
		state = sw_table[7][state & 0xff] ^ sw_table[6][(state >> 8) & 0xff] ^
			sw_table[5][(state >> 16) & 0xff] ^ sw_table[4][state >> 24] ^
			sw_table[3][p[4]] ^ sw_table[2][p[5]] ^ sw_table[1][p[6]] ^
			sw_table[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		state = sw_table[0][(state ^ *p++) & 0xff] ^ (state >> 8);
	return state;
}

/* Applies a precomputed x^n multiplication to a register value. */
static uint32_t shift(const uint32_t t[4][256], uint32_t crc)
{
	return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^
	       t[3][crc >> 24];
}

/*
 * Builds the tables of "multiply by x^(8n) mod P". Feeding n zero bytes through the
 * register does exactly that multiplication, so the image of each of the 32 basis bits is
 * computed with the table walk, and every byte value's image is the XOR of its bits'.
 */
static void build_shift(uint32_t t[4][256], size_t n)
{
	static const uint8_t zeros[ZERO_CHUNK];
	uint32_t basis[32];

	for (int i = 0; i < 32; i++) {
		uint32_t c = 1u << i;

		for (size_t done = 0; done < n; done += sizeof(zeros))
			c = sv__crc32c_update_sw(c, zeros, sizeof(zeros));
		basis[i] = c;
	}
	for (int k = 0; k < 4; k++) {
		for (int b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int j = 0; j < 8; j++)
				if (b & (1 << j))
					v ^= basis[8 * k + j];
			t[k][b] = v;
		}
	}
}

#ifdef HAVE_SSE42_PATH
static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));	/* the crc32 instruction takes bytes little-endian */
	return v;
}

/* Three chains over three consecutive blocks of blk bytes each, joined into one. */
__attribute__((target("sse4.2")))
static uint32_t hw_three(uint32_t crc, const uint8_t *p, size_t blk, const uint32_t t[4][256])
{
	uint64_t c0 = crc, c1 = 0, c2 = 0;
	const uint8_t *end = p + blk;

	do {
		c0 = _mm_crc32_u64(c0, load64(p));
		c1 = _mm_crc32_u64(c1, load64(p + blk));
		c2 = _mm_crc32_u64(c2, load64(p + 2 * blk));
		p += 8;
	} while (p < end);
	/* crc(A||B||C) = (crc(A) * x^|B| ^ crc0(B)) * x^|C| ^ crc0(C), with |B| = |C|. */
	crc = shift(t, (uint32_t)c0) ^ (uint32_t)c1;
	return shift(t, crc) ^ (uint32_t)c2;
}

__attribute__((target("sse4.2")))
static uint32_t update_hw(uint32_t state, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t c;

	/* Byte steps up to an 8-byte boundary so the wide loads below are aligned. */
	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		state = _mm_crc32_u8(state, *p++);
		len--;
	}
	for (int l = 0; l < NLEVELS; l++) {
		size_t blk = level_block[l];

		while (len >= 3 * blk) {
			state = hw_three(state, p, blk, (const uint32_t (*)[256])level_shift[l]);
			p += 3 * blk;
			len -= 3 * blk;
		}
	}
	c = state;
	while (len >= 8) {
		c = _mm_crc32_u64(c, load64(p));
		p += 8;
		len -= 8;
	}
	state = (uint32_t)c;
	while (len--)
		state = _mm_crc32_u8(state, *p++);
	return state;
}
#endif

/*
 * Runs before main() (and before any caller can reach sv__crc32c_update), so the tables
 * are written once, single-threaded, and only read afterwards.
 */
__attribute__((constructor))
static void crc32c_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		sw_table[0][n] = c;
	}
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = sw_table[0][n];

		for (int k = 1; k < 8; k++) {
			c = sw_table[0][c & 0xff] ^ (c >> 8);
			sw_table[k][n] = c;
		}
	}
	for (int l = 0; l < NLEVELS; l++)
		build_shift(level_shift[l], level_block[l]);
#ifdef HAVE_SSE42_PATH
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

bool sv__crc32c_has_hw(void)
{
	return use_hw;
}

uint32_t sv__crc32c_update_sse42(uint32_t state, const void *buf, size_t len)
{
#ifdef HAVE_SSE42_PATH
	if (use_hw)
		return update_hw(state, buf, len);
#endif
	return sv__crc32c_update_sw(state, buf, len);
}

uint32_t sv__crc32c_update(uint32_t state, const void *buf, size_t len)
{
#ifdef SV_HAVE_ISAL
	if (len >= ISAL_MIN) {
		const unsigned char *p = buf;

		/* The same register update as ours: no preset, no final complement. Its
		 * length is an int. */
		while (len > 0) {
			int n = len > INT_MAX ? INT_MAX : (int)len;

			state = crc32_iscsi((unsigned char *)p, n, state);
			p += n;
			len -= (size_t)n;
		}
		return state;
	}
#endif
	return sv__crc32c_update_sse42(state, buf, len);
}
