/*
 * random.c — the one source of identifiers a peer must not predict: memory keys
 * (core/mr.c), QP numbers (core/qp_create.c) and the CM's identifiers and starting PSNs
 * (doc/security.md, "Keys and identifiers").
 *
 * They come from the kernel's CSPRNG through getrandom(2), never from a generator seeded
 * once: any such seed (time, pid, an address, even 32 random bits) can be recovered from
 * a handful of outputs, after which every later identifier is known. Without
 * GRND_NONBLOCK getrandom waits only until the kernel's pool is first initialised, early
 * in boot, and then never fails for requests of at most 256 bytes except when a signal
 * interrupts it.
 */
#include <errno.h>
#include <sys/random.h>

#include "core/transport.h"

int sv__random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
