/*
 * capture_util.h — shared machinery of the capture-based wire tests: a dumpcap on lo that
 * is provably capturing before the session starts, a bounded stop, tshark runs, and a
 * reader for the classic pcap files dumpcap -P writes.
 *
 * Every wait here has a deadline; the only process ever signalled is the dumpcap we
 * forked, by its pid.
 */
#ifndef SV_TEST_WIRE_CAPTURE_UTIL_H
#define SV_TEST_WIRE_CAPTURE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct capture {
	pid_t pid;			/* the dumpcap we started */
	int sentinel_fd;		/* UDP socket we hold; its port is in the filter */
	uint16_t sentinel_port;
	char dir[64];			/* private temporary directory */
	char path[128];			/* the capture file, classic pcap */
	char log[128];			/* dumpcap's messages */
};

uint64_t cap_now_ms(void);

/* Why this process cannot capture on lo and dissect (tshark or dumpcap missing, or no
 * right to capture), or NULL when it can; tests skip themselves with the reason. */
const char *cap_unavailable(void);

/* A port of type SOCK_STREAM or SOCK_DGRAM free on 127.0.0.1 right now, below the
 * kernel's ephemeral range (capture_util.c says why). */
uint16_t cap_free_port(int type);

/*
 * Starts dumpcap on lo with capture filter `filter` (plus our sentinel port) writing
 * classic pcap into a fresh temporary directory, and returns only once a sentinel datagram
 * carrying a nonce has been found in the file: dumpcap announces "Capturing on" a moment
 * before packets really reach the file, so the announcement is not trusted.
 */
void cap_start(struct capture *c, const char *filter);

/* Makes sure the session's last packets are in the file (an end sentinel that arrives
 * after them), then stops dumpcap with SIGINT and reaps it. */
void cap_stop(struct capture *c);

/* Removes the capture and its directory, unless SV_KEEP_PCAP is set (then logs where). */
void cap_cleanup(struct capture *c);

/* Runs tshark (bounded by timeout(1)) with the heuristic payload dissectors that would
 * misread our test patterns disabled, plus args; returns its stdout (free it). Fails the
 * test when tshark fails. */
char *cap_tshark(const char *args);

/* tshark, with options opts (decode-as rules, or ""), finds no frame of the capture at
 * path that matches the display filter made from fmt and is malformed or carries an expert
 * error; the test fails listing them otherwise. */
void cap_no_errors(const char *path, const char *opts, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Occurrences of needle in hay. */
size_t cap_count(const char *hay, const char *needle);

/* Calls fn(ip, len, arg) for every IPv4 packet (IPv6 when ipv6) of the dumpcap -P file at
 * path (Ethernet link type, as lo has), Ethernet header stripped. Records are required to
 * be whole (caplen == wire length). */
void pcap_each(const char *path, bool ipv6,
	       void (*fn)(const uint8_t *ip, size_t len, void *arg), void *arg);

#endif
