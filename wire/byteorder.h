/*
 * byteorder.h — explicit big-endian (network order) loads and stores on byte pointers.
 *
 * Wire headers are decoded field by field through these helpers instead of casting
 * buffers to structs: no bitfield layout questions, no misaligned loads.
 */
#ifndef SV_WIRE_BYTEORDER_H
#define SV_WIRE_BYTEORDER_H

#include <stdint.h>

static inline uint16_t sv__get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t sv__get_be24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t sv__get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t sv__get_be64(const uint8_t *p)
{
	return (uint64_t)sv__get_be32(p) << 32 | sv__get_be32(p + 4);
}

static inline uint32_t sv__get_le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static inline void sv__put_be16(uint8_t *p, uint16_t v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static inline void sv__put_be24(uint8_t *p, uint32_t v)
{
	p[0] = v >> 16;
	p[1] = v >> 8;
	p[2] = v;
}

static inline void sv__put_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static inline void sv__put_be64(uint8_t *p, uint64_t v)
{
	sv__put_be32(p, v >> 32);
	sv__put_be32(p + 4, (uint32_t)v);
}

static inline void sv__put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v;
	p[1] = v >> 8;
	p[2] = v >> 16;
	p[3] = v >> 24;
}

#endif
