/*
 * crc32c_bench.c — throughput of the CRC paths softverbs can use, in GB/s: CRC-32C
 * (MPA, crypto/crc32c.c) and CRC-32 (the RoCEv2 ICRC, crypto/icrc.c).
 *
 * Not part of the CMake build; from the top of the tree, with Debian's libisal-dev:
 *   cc -O2 -I. -DSV_HAVE_ISAL -o crc32c_bench bench/crc32c_bench.c crypto/crc32c.c \
 *      -lz -lisal && ./crc32c_bench
 * (without -DSV_HAVE_ISAL and -lisal the ISA-L columns are left out). Columns:
 * CRC-32C through the library's entry point (whatever it dispatches to), its SSE4.2
 * three-chain loop, its table walk and ISA-L's crc32_iscsi; CRC-32 through zlib's crc32
 * and ISA-L's crc32_gzip_refl. Each figure is the best of 200 batches of about a
 * millisecond each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <zlib.h>
#ifdef SV_HAVE_ISAL
#include <isa-l/crc.h>
#endif

#include "crypto/crc32c.h"

/* The other CRCs with the register-update signature of sv__crc32c_update. */
static uint32_t zlib_crc32(uint32_t state, const void *buf, size_t len)
{
	return (uint32_t)crc32_z(state, buf, len);
}

#ifdef SV_HAVE_ISAL
static uint32_t isal_iscsi(uint32_t state, const void *buf, size_t len)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, state);
}

static uint32_t isal_gzip(uint32_t state, const void *buf, size_t len)
{
	return crc32_gzip_refl(state, buf, len);
}
#endif

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Best of many short batches rather than one long average: the machines this runs on are
 * shared, and the fastest batch is the one nothing else interrupted.
 */
static double gbps(uint32_t (*fn)(uint32_t, const void *, size_t), const uint8_t *buf,
		   size_t len, uint32_t *sink)
{
	size_t iters = 1, done;
	double t0, t, best = 1e9;

	/* Size one batch to about a millisecond. */
	for (;;) {
		t0 = now_s();
		for (done = 0; done < iters; done++)
			*sink ^= fn(*sink, buf, len);
		t = now_s() - t0;
		if (t > 1e-3)
			break;
		iters *= 2;
	}
	for (int batch = 0; batch < 200; batch++) {
		t0 = now_s();
		for (done = 0; done < iters; done++)
			*sink ^= fn(*sink, buf, len);
		t = now_s() - t0;
		if (t < best)
			best = t;
	}
	return (double)len * (double)iters / best / 1e9;
}

int main(void)
{
	static const size_t sizes[] = { 64, 128, 256, 1024, 1460, 4096, 65536, 1 << 20 };
	uint8_t *buf = malloc(1 << 20);
	uint32_t sink = 0;

	if (buf == NULL)
		return 1;
	for (size_t i = 0; i < (1 << 20); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	printf("sse4.2 path available: %s\n", sv__crc32c_has_hw() ? "yes" : "no");
	printf("%8s | %9s %9s %9s %9s | %9s %9s   (GB/s)\n", "bytes", "c:entry", "c:sse42",
	       "c:table", "c:isal", "zlib", "isal");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		printf("%8zu | %9.2f %9.2f %9.2f", n, gbps(sv__crc32c_update, buf, n, &sink),
		       sv__crc32c_has_hw() ? gbps(sv__crc32c_update_sse42, buf, n, &sink) : 0.0,
		       gbps(sv__crc32c_update_sw, buf, n, &sink));
#ifdef SV_HAVE_ISAL
		printf(" %9.2f | %9.2f %9.2f\n", gbps(isal_iscsi, buf, n, &sink),
		       gbps(zlib_crc32, buf, n, &sink), gbps(isal_gzip, buf, n, &sink));
#else
		printf(" %9s | %9.2f %9s\n", "-", gbps(zlib_crc32, buf, n, &sink), "-");
#endif
	}
	free(buf);
	return sink == 0x12345678u;	/* keeps the work observable */
}
