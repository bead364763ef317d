/*
 * test_gso_wire.c — the UDP transport's UDP_SEGMENT runs (wire/roce_tx.c) as a wire
 * carries them. On lo a run crosses whole (one frame of up to 64 KiB), so the test moves
 * into a network namespace of its own whose lo has tx-udp-segmentation turned off: the
 * kernel then cuts each run in software before the capture sees it, as it does in front
 * of a NIC or a tap without the offload (the path to a qemu guest's rxe). A 16 KiB WRITE
 * and a 16 KiB READ at path MTU 256 make runs of up to 64 datagrams, and the capture
 * must show:
 *  - every datagram a whole IB packet: decoded, PMTU rule, pad, and its ICRC, recomputed
 *    over the captured IPv4 header (its real identification and DF), matching, twice
 *    (dgram_util.c);
 *  - runs: datagrams with IPv4 identification k > 0, each right after the datagram with
 *    k - 1 from the same sender (a run's segments carry 0, 1, 2, ...), and DF on all;
 *  - the data: what the WRITE and the READ moved arrived intact.
 * Skipped when tshark/dumpcap are missing or the process may not make a network
 * namespace (root).
 */
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "capture_util.h"
#include "dgram_util.h"
#include "pair_util.h"
#include "softverbs.h"
#include "wire/byteorder.h"

#define ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ)
#define PMTU_BYTES 256
#define MSG_LEN 16384

/* Brings lo up and turns its feature called name off (ETHTOOL_SFEATURES by the index of
 * the name in the ETH_SS_FEATURES strings). */
static void lo_up_feature_off(const char *name)
{
	struct ifreq ifr;
	struct {
		struct ethtool_sset_info hdr;
		uint32_t len;
	} si = { .hdr = { .cmd = ETHTOOL_GSSET_INFO, .sset_mask = 1ull << ETH_SS_FEATURES } };
	struct ethtool_gstrings *gs;
	struct ethtool_sfeatures *sf;
	uint32_t n, idx = UINT32_MAX, blocks;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	cr_assert_geq(fd, 0);
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	cr_assert_eq(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	cr_assert_eq(ioctl(fd, SIOCSIFFLAGS, &ifr), 0, "lo up: %s", strerror(errno));
	ifr.ifr_data = (void *)&si;
	cr_assert_eq(ioctl(fd, SIOCETHTOOL, &ifr), 0, "ETHTOOL_GSSET_INFO: %s", strerror(errno));
	n = si.len;
	gs = calloc(1, sizeof(*gs) + (size_t)n * ETH_GSTRING_LEN);
	cr_assert_not_null(gs);
	gs->cmd = ETHTOOL_GSTRINGS;
	gs->string_set = ETH_SS_FEATURES;
	gs->len = n;
	ifr.ifr_data = (void *)gs;
	cr_assert_eq(ioctl(fd, SIOCETHTOOL, &ifr), 0, "ETHTOOL_GSTRINGS: %s", strerror(errno));
	for (uint32_t i = 0; i < n; i++)
		if (!strncmp((const char *)gs->data + (size_t)i * ETH_GSTRING_LEN, name,
			     ETH_GSTRING_LEN))
			idx = i;
	free(gs);
	cr_assert_neq(idx, UINT32_MAX, "lo has no feature %s", name);
	blocks = (n + 31) / 32;
	sf = calloc(1, sizeof(*sf) + blocks * sizeof(sf->features[0]));
	cr_assert_not_null(sf);
	sf->cmd = ETHTOOL_SFEATURES;
	sf->size = blocks;
	sf->features[idx / 32].valid = 1u << (idx % 32);
	sf->features[idx / 32].requested = 0;
	ifr.ifr_data = (void *)sf;
	/* Positive: the request was changed to what the device allows, which is fine as
	 * long as the feature went off (the capture shows it). */
	cr_assert_geq(ioctl(fd, SIOCETHTOOL, &ifr), 0, "ETHTOOL_SFEATURES: %s", strerror(errno));
	free(sf);
	close(fd);
}

struct seen {
	uint16_t p1, p2;
	unsigned n, in_runs;		/* session datagrams; those with an id > 0 */
	uint16_t last_id[2];		/* the last identification from p1, from p2 */
};

static void check_datagram(const uint8_t *ip, size_t len, void *arg)
{
	struct seen *s = arg;
	struct sv_ib_pkt pkt;
	struct sv_cm_msg cm;
	uint16_t sport, dport, id;
	unsigned from;

	cr_assert_geq(len, 28);
	sport = sv__get_be16(ip + 20);
	dport = sv__get_be16(ip + 22);
	if ((sport != s->p1 && sport != s->p2) || (dport != s->p1 && dport != s->p2))
		return;				/* the sentinel */
	dgram_check(ip, len, PMTU_BYTES, s->n, &pkt, &cm);
	cr_assert(ip[6] & 0x40, "datagram %u: DF not set", s->n);
	id = sv__get_be16(ip + 4);
	from = sport == s->p2;
	if (id > 0) {
		cr_assert_eq(s->last_id[from], id - 1, "datagram %u: identification %u after "
			     "%u from the same sender", s->n, id, s->last_id[from]);
		s->in_runs++;
	}
	s->last_id[from] = id;
	s->n++;
}

Test(wire_gso, runs_cut_into_whole_packets_with_their_icrc, .timeout = 180)
{
	struct seen seen = { 0 };
	struct capture cap;
	char filter[64];
	struct side a, b;

	if (cap_unavailable())
		cr_skip_test("%s", cap_unavailable());
	if (unshare(CLONE_NEWNET) < 0)
		cr_skip_test("a network namespace of its own needs root: %s", strerror(errno));
	lo_up_feature_off("tx-udp-segmentation");
	unsetenv("SV_UDP_GSO");		/* capture_util.c turns it off for the others */

	side_open(&a, "127.0.0.1", 0, 0x10, ACCESS);
	side_open(&b, "127.0.0.1", 0, 0x20, ACCESS);
	side_to_rts(&a, &b, ACCESS);
	side_to_rts(&b, &a, ACCESS);
	snprintf(filter, sizeof(filter), "udp port %u or udp port %u", a.port, b.port);
	cap_start(&cap, filter);
	side_post(&a, &b, SV_WR_RDMA_WRITE, 0, MSG_LEN);
	wait_cq(a.cq, 1);
	side_post(&a, &b, SV_WR_RDMA_READ, MSG_LEN, MSG_LEN);
	wait_cq(a.cq, 1);
	cap_stop(&cap);

	/* The WRITE put a's bytes in b, the READ b's in a. */
	cr_assert_eq(memcmp(a.buf, b.buf, 2 * MSG_LEN), 0, "the data did not arrive intact");
	seen.p1 = a.port;
	seen.p2 = b.port;
	pcap_each(cap.path, false, check_datagram, &seen);
	/* Each message is 64 packets at PMTU 256, and more than one run of them. */
	cr_assert_geq(seen.n, 2 * MSG_LEN / PMTU_BYTES, "only %u session datagrams", seen.n);
	cr_assert_gt(seen.in_runs, MSG_LEN / PMTU_BYTES, "only %u of %u datagrams in runs",
		     seen.in_runs, seen.n);
	side_close(&a);
	side_close(&b);
	cap_cleanup(&cap);
}
