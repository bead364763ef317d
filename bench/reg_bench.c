/*
 * reg_bench.c — memory registrations per second (sv_reg_mr + sv_dereg_mr of a 4 KiB
 * buffer), with 1, 64 and 4096 regions live at once, so the cost of key generation and
 * of finding a slot shows as the table fills.
 *
 * Not part of the CMake build; from the top of the tree, after building:
 *   cc -O2 -Iinclude -o reg_bench bench/reg_bench.c build/libsoftverbs.a \
 *      -luv -lcrypto -lz -lpthread && ./reg_bench
 * Prints the best of 20 batches of 20000 register/deregister pairs for each live count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "softverbs.h"

#define BATCHES 20
#define PAIRS 20000

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void)
{
	static char buf[4096];
	static const unsigned live_counts[] = { 1, 64, 4096 };
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_mr **live;

	if (sv_open_device(NULL, &ctx) < 0 || sv_alloc_pd(ctx, &pd) < 0) {
		fprintf(stderr, "cannot open a device\n");
		return 1;
	}
	if (!(live = calloc(4096, sizeof(*live))))
		return 1;
	for (unsigned c = 0; c < sizeof(live_counts) / sizeof(live_counts[0]); c++) {
		unsigned n = live_counts[c];
		double best = 0;

		for (unsigned i = 0; i + 1 < n; i++)	/* n - 1 stay live, one cycles */
			if (sv_reg_mr(pd, buf, sizeof(buf), SV_ACCESS_LOCAL_WRITE, &live[i]) < 0)
				return 1;
		for (int b = 0; b < BATCHES; b++) {
			double t0 = now_s(), rate;

			for (int i = 0; i < PAIRS; i++) {
				struct sv_mr *mr;

				if (sv_reg_mr(pd, buf, sizeof(buf), SV_ACCESS_REMOTE_READ, &mr) < 0 ||
				    sv_dereg_mr(mr) < 0)
					return 1;
			}
			rate = PAIRS / (now_s() - t0);
			if (rate > best)
				best = rate;
		}
		printf("%5u live: %.0f registrations/s (register + deregister pairs)\n", n, best);
		for (unsigned i = 0; i + 1 < n; i++)
			sv_dereg_mr(live[i]);
	}
	sv_dealloc_pd(pd);
	sv_close_device(ctx);
	return 0;
}
