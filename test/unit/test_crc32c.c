/*
 * test_crc32c.c — CRC-32C check values (RFC 3720 appendix B.4 / doc/wire-iwarp.md
 * section 2.4) and agreement of the entry point (ISA-L from 256 bytes when built with it),
 * the SSE4.2 and the table paths on every length and alignment.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/crc32c.h"

Test(crc32c, check_value_123456789)
{
	cr_assert_eq(sv__crc32c("123456789", 9), 0xE3069283u);
	cr_assert_eq(~sv__crc32c_update_sw(SV_CRC32C_INIT, "123456789", 9), 0xE3069283u);
}

Test(crc32c, thirty_two_zero_bytes)
{
	static const uint8_t zeros[32];

	cr_assert_eq(sv__crc32c(zeros, sizeof(zeros)), 0x8A9136AAu);
}

/* RFC 3720 appendix B.4: 32 bytes of 0xff, and 32 ascending bytes. */
Test(crc32c, rfc3720_vectors)
{
	uint8_t buf[32];

	memset(buf, 0xff, sizeof(buf));
	cr_assert_eq(sv__crc32c(buf, sizeof(buf)), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	cr_assert_eq(sv__crc32c(buf, sizeof(buf)), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	cr_assert_eq(sv__crc32c(buf, sizeof(buf)), 0x113FDB5Cu);
}

Test(crc32c, empty_input_leaves_state)
{
	cr_assert_eq(sv__crc32c_update(0x12345678u, "", 0), 0x12345678u);
	cr_assert_eq(sv__crc32c("", 0), 0u);
}

/* Splitting a buffer anywhere must not change the result (incremental use by the
 * transport across iovecs). */
Test(crc32c, incremental_equals_one_shot)
{
	uint8_t buf[1000];
	uint32_t whole;

	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	whole = sv__crc32c(buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 37) {
		uint32_t s = sv__crc32c_update(SV_CRC32C_INIT, buf, cut);

		s = sv__crc32c_update(s, buf + cut, sizeof(buf) - cut);
		cr_assert_eq(~s, whole, "cut at %zu", cut);
	}
}

Test(crc32c, hw_and_sw_agree_all_lengths_and_alignments)
{
	uint8_t buf[300 + 8];

	srand(1);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t start = 0; start < 8; start++) {
		for (size_t len = 0; len <= 300; len++) {
			uint32_t hw = sv__crc32c_update(SV_CRC32C_INIT, buf + start, len);
			uint32_t sw = sv__crc32c_update_sw(SV_CRC32C_INIT, buf + start, len);
			uint32_t sse = sv__crc32c_update_sse42(SV_CRC32C_INIT, buf + start, len);

			cr_assert_eq(hw, sw, "start %zu len %zu", start, len);
			cr_assert_eq(sse, sw, "start %zu len %zu", start, len);
		}
	}
}

/* Sizes around the three-chain block boundaries (3 x 64, 3 x 256, 3 x 1024 and 3 x 8192
 * bytes), where partial CRCs are combined, and mixes of several levels. */
Test(crc32c, hw_and_sw_agree_on_large_buffers)
{
	static const size_t lens[] = { 191, 192, 193, 383, 384, 767, 768, 769, 1460, 1535,
				       1536, 2311, 3071, 3072, 3073, 24575, 24576, 24577,
				       24576 + 3072 + 768 + 192 + 13, 49152 + 768 + 13, 100000 };
	size_t max = 100000 + 8;
	uint8_t *buf = malloc(max);

	cr_assert_not_null(buf);
	srand(3);
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)rand();
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (size_t start = 0; start < 8; start += 3) {
			uint32_t hw = sv__crc32c_update(0x5a5a5a5au, buf + start, lens[i]);
			uint32_t sw = sv__crc32c_update_sw(0x5a5a5a5au, buf + start, lens[i]);
			uint32_t sse = sv__crc32c_update_sse42(0x5a5a5a5au, buf + start, lens[i]);

			cr_assert_eq(hw, sw, "start %zu len %zu", start, lens[i]);
			cr_assert_eq(sse, sw, "start %zu len %zu", start, lens[i]);
		}
	}
	free(buf);
}

Test(crc32c, reports_path)
{
	/* Every x86-64 CPU this project targets has SSE4.2; other CPUs use the tables. */
#if defined(__x86_64__)
	cr_assert_eq(sv__crc32c_has_hw(), __builtin_cpu_supports("sse4.2") != 0);
#else
	cr_assert(!sv__crc32c_has_hw());
#endif
}
