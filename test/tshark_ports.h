/*
 * tshark_ports.h — the ports tshark gives to a dissector of its own, for the capture
 * tests of test/wire and test/apps.
 *
 * tshark hands a TCP or UDP payload to the dissector registered on either of its ports
 * before it tries any heuristic one, and MPA is found only by its heuristic: a session on
 * a port tshark gives to another protocol (24800 is Synergy's, 27017 MongoDB's; about 1 %
 * of the ports the tests draw from are taken) decodes as that protocol, with no MPA in
 * it. So the table of port-registered dissectors (`tshark -G decodes`) is read once per
 * process: the port pickers of capture tests draw no port in it, and their tshark runs
 * disable the owners of ports in the kernel's ephemeral range, where the other end of
 * each connection gets its port. Without tshark the table is empty.
 */
#ifndef SV_TEST_TSHARK_PORTS_H
#define SV_TEST_TSHARK_PORTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

struct tshark_ports {
	bool loaded;
	uint8_t taken[2][65536 / 8];	/* [0] TCP, [1] UDP */
	char disable[2048];		/* "--disable-protocol NAME " for each ephemeral owner */
};

static inline unsigned tshark_ports_ephemeral_low(void)
{
	unsigned lo = 32768, hi;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	return lo;
}

/* Adds name to the disable list once; tls stays, the TLS tests decode with it. A list
 * that would overflow keeps what fits (the port table itself is complete either way). */
static inline void tshark_ports_disable(struct tshark_ports *t, const char *name)
{
	char word[128];
	size_t used = strlen(t->disable), n;

	if (strcmp(name, "tls") == 0)
		return;
	n = (size_t)snprintf(word, sizeof(word), "--disable-protocol %s ", name);
	if (n >= sizeof(word) || strstr(t->disable, word) || used + n >= sizeof(t->disable))
		return;
	memcpy(t->disable + used, word, n + 1);
}

static inline struct tshark_ports *tshark_ports(void)
{
	static struct tshark_ports t;
	unsigned low, port;
	char line[256], table[32], name[96];
	FILE *f;

	if (t.loaded)
		return &t;
	t.loaded = true;
	low = tshark_ports_ephemeral_low();
	f = popen("timeout 60 tshark -G decodes 2>/dev/null", "r");
	if (!f)
		return &t;
	while (fgets(line, sizeof(line), f)) {
		int udp;

		if (sscanf(line, "%31[^\t]\t%u\t%95s", table, &port, name) != 3 || port > 65535)
			continue;
		if (strcmp(table, "tcp.port") == 0)
			udp = 0;
		else if (strcmp(table, "udp.port") == 0)
			udp = 1;
		else
			continue;
		t.taken[udp][port / 8] |= (uint8_t)(1u << (port % 8));
		if (port >= low)
			tshark_ports_disable(&t, name);
	}
	pclose(f);
	return &t;
}

/* Whether tshark decodes port of type (SOCK_STREAM or SOCK_DGRAM) as a protocol of its
 * own, by the port alone. */
static inline bool tshark_port_owned(int type, uint16_t port)
{
	return tshark_ports()->taken[type == SOCK_DGRAM][port / 8] & (1u << (port % 8));
}

/* tshark options that disable the dissectors owning ephemeral ports ("" or a list ending
 * in a space). */
static inline const char *tshark_ports_disable_opts(void)
{
	return tshark_ports()->disable;
}

#endif
