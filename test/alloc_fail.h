/*
 * alloc_fail.h — failing allocations on demand, for the tests of what the UDP transport
 * allocates only once a QP needs it (its data path must go on without the memory).
 * Included by exactly one file of a test binary linked with -Wl,--wrap=calloc
 * (test/CMakeLists.txt): every calloc() of the library's code (softverbs_static) and
 * of the test then comes here: once alloc_fail_skip more have gone through, the next
 * alloc_fail_calls ones return NULL (-1: all of them, until it is set back to 0).
 * Criterion's own allocations are its shared library's, which the option leaves alone.
 */
#ifndef TEST_ALLOC_FAIL_H
#define TEST_ALLOC_FAIL_H

#include <stdatomic.h>
#include <stddef.h>

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

/* Atomic: the library's threads (a device's progress thread) allocate too. */
static atomic_int alloc_fail_calls, alloc_fail_skip;
static atomic_ulong alloc_fail_count;	/* callocs refused so far */

void *__wrap_calloc(size_t n, size_t size)
{
	int c = atomic_load(&alloc_fail_calls);

	if (c && atomic_load(&alloc_fail_skip) > 0) {
		atomic_fetch_sub(&alloc_fail_skip, 1);
	} else if (c) {
		if (c > 0)
			atomic_fetch_sub(&alloc_fail_calls, 1);
		atomic_fetch_add(&alloc_fail_count, 1);
		return NULL;
	}
	return __real_calloc(n, size);
}

#endif
