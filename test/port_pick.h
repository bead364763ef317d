/*
 * port_pick.h — where the test helpers of test/e2e and test/apps look for a free port:
 * below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
 * default), so no connect() or bind() to port 0 of any process takes the port between
 * the pick and the program's own bind, starting at a point of their own per process and
 * call so that concurrent tests look in different places.
 */
#ifndef SV_TEST_PORT_PICK_H
#define SV_TEST_PORT_PICK_H

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define PORT_PICK_LO 20000
#define PORT_PICK_HI 32767
#define PORT_PICK_SPAN (PORT_PICK_HI - PORT_PICK_LO + 1)

/* The i-th candidate (0 <= i < PORT_PICK_SPAN) of a search that starts at start, or 0
 * when it falls in the ephemeral range (eph_lo..eph_hi). */
static inline int port_pick_candidate(unsigned start, unsigned i, int eph_lo, int eph_hi)
{
	int port = PORT_PICK_LO + (int)((start + i) % PORT_PICK_SPAN);

	return port >= eph_lo && port <= eph_hi ? 0 : port;
}

/* A search's start for this process's seq-th pick, and the ephemeral range (0..0 when
 * /proc does not tell). */
static inline unsigned port_pick_start(unsigned seq, int *eph_lo, int *eph_hi)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	*eph_lo = 32768;
	*eph_hi = 60999;
	if (f) {
		if (fscanf(f, "%d %d", eph_lo, eph_hi) != 2)
			*eph_lo = *eph_hi = 0;
		fclose(f);
	}
	return ((unsigned)getpid() * 7919u + seq * 97u) % PORT_PICK_SPAN;
}

#endif
