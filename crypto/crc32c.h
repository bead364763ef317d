/*
 * crc32c.h — CRC-32C (Castagnoli), the MPA FPDU CRC (RFC 5044 section 6).
 *
 * Reflected polynomial 0x82F63B78, register preset to all ones, final complement.
 * Incremental use: state = SV_CRC32C_INIT; state = sv__crc32c_update(state, ...)...;
 * crc = ~state. The MPA trailer stores crc least-significant byte first.
 * Uses ISA-L's crc32_iscsi when built with it (all but short buffers), else the SSE4.2
 * crc32 instruction when the CPU has it (checked once at run time).
 */
#ifndef SV_CRYPTO_CRC32C_H
#define SV_CRYPTO_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SV_CRC32C_INIT 0xffffffffu

uint32_t sv__crc32c_update(uint32_t state, const void *buf, size_t len);

/* The hand-written paths, whatever the entry point dispatches to (tests and
 * bench/crc32c_bench.c compare them): the SSE4.2 loop (the table walk on CPUs without
 * SSE4.2) and the portable table walk. */
uint32_t sv__crc32c_update_sse42(uint32_t state, const void *buf, size_t len);
/* The portable table path, whatever the CPU has (tests compare it with the fast path). */
uint32_t sv__crc32c_update_sw(uint32_t state, const void *buf, size_t len);

/* True when sv__crc32c_update uses the SSE4.2 crc32 instruction. */
bool sv__crc32c_has_hw(void);

/* One-shot: the final CRC value of buf ("123456789" -> 0xE3069283). */
static inline uint32_t sv__crc32c(const void *buf, size_t len)
{
	return ~sv__crc32c_update(SV_CRC32C_INIT, buf, len);
}

#endif
