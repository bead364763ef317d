/*
 * roce_cm_dir.c — host-local address resolution for the UDP transport's CM on loopback:
 * which device serves a loopback IP and rdma_cm service port.
 *
 * Why. The CM sends a REQ (or SIDR_REQ) to the device an IP names: its UDP socket at
 * IP:<configured port> (roce_cm.c). Across hosts every device has its interface address
 * and that is exact. On one host, devices take loopback addresses in the order they
 * open (127.0.0.1, then .2, ... in roce.c), so the address an application gives
 * ("rping -s -a 127.0.0.1" and "rping -c -a 127.0.0.1") names the server's device only
 * if the server opened first; otherwise the REQ reaches the client's own device, or a
 * third process's, and is refused. On a real fabric rdma_resolve_addr finds the peer's
 * GID through routing and ARP; loopback needs the same step, host-locally.
 *
 * The same holds for a device bound to an interface's address whose listener is on a
 * loopback address or the wildcard: the kernel's rdma_cm takes a loopback destination
 * to a device of the host, and so does the directory.
 *
 * How. A listener on a device bound to a loopback address (or as above) publishes
 * itself by binding an abstract AF_UNIX socket (Linux, unix(7)) named
 *     softverbs/<uid>/roce-cm/<fabric>/<ps>/<service port>/<listen IP>/<device IP>/<UDP port>
 * where fabric is the configured UDP port (the CM's peers must configure the same one,
 * so it delimits who can talk to whom: tests running at once on different ports never
 * see each other's listeners), ps the rdma_cm port space, the listen IP what the
 * application listened on (the device's own, another loopback address, or the wildcard)
 * and the last two where the device's socket is. An abstract name vanishes with the
 * last descriptor, so a process that dies leaves nothing stale, and the uid in the name
 * keeps users apart. Nothing is ever sent to that socket; it only holds the name.
 *
 * Trust. Any local user can bind any abstract name, our uid's included, and so point
 * our REQs at a socket of its own. A record counts only when the kernel says its socket
 * belongs to our uid: sock_diag(7) reports the owner of an AF_UNIX socket by inode
 * (UNIX_DIAG_UID, Linux 5.3), the uid the kernel recorded when the socket was made,
 * which the publisher cannot choose. (SO_PEERCRED would tell the same, but only over a
 * connection the publisher accepts; this asks the kernel without one.) A record of
 * another uid is ignored, counted (sv_cm_stats.dir_foreign) and logged. Where the
 * kernel cannot say (no sock_diag for AF_UNIX), no record is trusted and the CM sends
 * where the IP names, as without a directory; that is said once in the log.
 *
 * The connecting side, for a loopback destination, reads the bound abstract names from
 * /proc/net/unix and takes, among the listeners of its fabric, port space and service
 * port, the best match for the destination IP:
 *   4  the device at exactly IP:<fabric port>, where the REQ would go without us;
 *   3  a device bound to IP (an IPv6 ::1 device that fell back to another port);
 *   2  a listener on IP given explicitly, on another loopback device;
 *   1  a wildcard listener on any loopback device (a wildcard socket on Linux accepts
 *      connections to every local address).
 * A listener bound to its device's own address (the application named it) is found for
 * that address only, as a socket bound to one 127/8 address is on Linux. Ties (two
 * devices listening on the same service port, which a real host would refuse) go to the
 * lexically smallest name, so every client decides alike. The first rank keeps
 * whatever worked without the directory working the same way.
 *
 * Elsewhere (no abstract sockets or no /proc), publishing reports -EOPNOTSUPP and a
 * lookup finds nothing: the CM sends where the IP names, as before.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire/roce_cm_dir.h"

#ifdef __linux__
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#endif

#define DIR_ROOT "softverbs"
#define DIR_KIND "roce-cm"
#define PROC_UNIX "/proc/net/unix"

bool sv__roce_addr_loopback(const union sv__roce_addr *a)
{
	if (a->sa.sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&a->v6.sin6_addr);
	return a->sa.sa_family == AF_INET && (ntohl(a->v4.sin_addr.s_addr) >> 24) == 127;
}

static const void *ip_of(const union sv__roce_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? (const void *)&a->v6.sin6_addr :
	       (const void *)&a->v4.sin_addr;
}

/* "softverbs/<uid>/roce-cm/<fabric>/<ps>/<svc>/": what every entry of one service
 * starts with. */
static int service_prefix(char *buf, size_t cap, uint16_t fabric, uint16_t ps, uint16_t svc)
{
	int n = snprintf(buf, cap, DIR_ROOT "/%u/" DIR_KIND "/%u/%u/%u/", (unsigned)getuid(),
			 fabric, ps, svc);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

#ifdef __linux__

int sv__roce_cm_dir_publish(uint16_t fabric, uint16_t ps, uint16_t svc,
			    const union sv__roce_addr *listen_ip, const union sv__roce_addr *dev)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	char lip[INET6_ADDRSTRLEN], dip[INET6_ADDRSTRLEN];
	size_t cap = sizeof(un.sun_path) - 1;		/* sun_path[0] is the abstract NUL */
	int n, m, fd;

	if (!(sv__roce_addr_loopback(dev) || sv__roce_addr_loopback(listen_ip) ||
	      sv__roce_addr_any(listen_ip)) || listen_ip->sa.sa_family != dev->sa.sa_family)
		return -EOPNOTSUPP;
	if (!inet_ntop(dev->sa.sa_family, ip_of(listen_ip), lip, sizeof(lip)) ||
	    !inet_ntop(dev->sa.sa_family, ip_of(dev), dip, sizeof(dip)))
		return -EINVAL;
	if ((n = service_prefix(un.sun_path + 1, cap, fabric, ps, svc)) < 0)
		return n;
	m = snprintf(un.sun_path + 1 + n, cap - (size_t)n, "%s/%s/%u", lip, dip,
		     sv__roce_addr_port(dev));
	if (m < 0 || (size_t)m >= cap - (size_t)n)
		return -ENAMETOOLONG;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	/* The name's length is exact: abstract names are not NUL-terminated. */
	if (bind(fd, (struct sockaddr *)&un, (socklen_t)(offsetof(struct sockaddr_un,
							sun_path) + 1 + (size_t)(n + m))) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

void sv__roce_cm_dir_withdraw(int fd)
{
	if (fd >= 0)
		close(fd);
}

/*
 * The uid owning the AF_UNIX socket whose inode is ino, as the kernel recorded it when
 * the socket was made (sock_diag(7), UNIX_DIAG_UID): 0 and *uid, or a negative errno
 * (-ENOENT: the socket is gone; others: the kernel cannot say).
 */
static int socket_owner(unsigned ino, uid_t *uid)
{
	struct {
		struct nlmsghdr nh;
		struct unix_diag_req req;
	} q = {
		.nh = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
			.nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = ino },
		/* No cookie: the socket is named by its inode alone (~0, ~0). */
		.req = { .sdiag_family = AF_UNIX, .udiag_states = ~0u, .udiag_ino = ino,
			 .udiag_show = UDIAG_SHOW_UID, .udiag_cookie = { ~0u, ~0u } },
	};
	union {
		struct nlmsghdr nh;
		uint8_t b[1024];
	} a;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	const struct nlmsghdr *nh = &a.nh;
	ssize_t n;
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG), r = -EPROTO;

	if (fd < 0)
		return -errno;
	if (sendto(fd, &q, sizeof(q), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0 ||
	    (n = recv(fd, &a, sizeof(a), 0)) < 0) {
		r = -errno;
		goto out;
	}
	for (; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
		const struct unix_diag_msg *d = NLMSG_DATA(nh);
		const struct nlattr *at;
		size_t left;

		if (nh->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *e = NLMSG_DATA(nh);

			r = e->error < 0 ? e->error : -EPROTO;
			goto out;
		}
		if (nh->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(*d)) || d->udiag_ino != ino)
			continue;
		left = nh->nlmsg_len - NLMSG_LENGTH(sizeof(*d));
		at = (const struct nlattr *)(d + 1);
		while (left >= NLA_HDRLEN && at->nla_len >= NLA_HDRLEN && at->nla_len <= left) {
			size_t step = NLA_ALIGN(at->nla_len);

			if (at->nla_type == UNIX_DIAG_UID &&
			    at->nla_len >= NLA_HDRLEN + sizeof(uint32_t)) {
				uint32_t v;

				memcpy(&v, (const uint8_t *)at + NLA_HDRLEN, sizeof(v));
				*uid = (uid_t)v;
				r = 0;
				goto out;
			}
			if (step >= left)
				break;
			left -= step;
			at = (const struct nlattr *)((const uint8_t *)at + step);
		}
		r = -EOPNOTSUPP;	/* a kernel before UNIX_DIAG_UID */
		goto out;
	}
out:
	close(fd);
	return r;
}

/* Whether the record on socket ino may be used: published by our own uid. */
static bool record_ours(unsigned ino, const char *name, uint64_t *foreign)
{
	static atomic_bool said;
	uid_t uid = (uid_t)-1;
	int r = socket_owner(ino, &uid);

	if (r == -ENOENT)
		return false;		/* withdrawn since /proc listed it */
	if (r < 0) {
		if (!atomic_exchange(&said, true))
			sv__log(SV_LOG_WARN, "softverbs udp: the kernel does not say who published "
				"host-local CM records (sock_diag: %s); none is used", strerror(-r));
		return false;
	}
	if (uid == getuid())
		return true;
	(*foreign)++;
	sv__log(SV_LOG_WARN, "softverbs udp: host-local CM record %s is uid %u's, not ours (%u): "
		"ignored", name, (unsigned)uid, (unsigned)getuid());
	return false;
}

/* How well the entry rest ("<listen IP>/<device IP>/<UDP port>") serves dst; 0: not
 * at all. *dev gets the entry's device socket. */
static int rank(char *rest, const union sv__roce_addr *dst, uint16_t fabric,
		union sv__roce_addr *dev)
{
	union sv__roce_addr lip;
	char *dip = strchr(rest, '/'), *port, *end;
	unsigned long p;
	int fam = dst->sa.sa_family;

	if (!dip || !(port = strchr(dip + 1, '/')))
		return 0;
	*dip++ = '\0';
	*port++ = '\0';
	p = strtoul(port, &end, 10);
	if (*end || !p || p > 65535)
		return 0;
	memset(&lip, 0, sizeof(lip));
	memset(dev, 0, sizeof(*dev));
	lip.sa.sa_family = dev->sa.sa_family = (sa_family_t)fam;
	if (inet_pton(fam, rest, (void *)ip_of(&lip)) != 1 ||
	    inet_pton(fam, dip, (void *)ip_of(dev)) != 1)
		return 0;
	sv__roce_addr_set_port(dev, (uint16_t)p);
	if (sv__roce_addr_same_ip(dev, dst))
		return p == fabric ? 4 : 3;
	if (sv__roce_addr_same_ip(&lip, dst))
		return 2;
	return sv__roce_addr_any(&lip) ? 1 : 0;
}

int sv__roce_cm_dir_lookup(uint16_t fabric, uint16_t ps, const union sv__roce_addr *dst,
			   union sv__roce_addr *dev, uint64_t *foreign)
{
	char prefix[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	char line[512], path[sizeof(line)], name[sizeof(line)], best[sizeof(line)] = "";
	union sv__roce_addr cand;
	int n, best_rank = 0, r;
	unsigned ino;
	FILE *f;

	if (!sv__roce_addr_loopback(dst))
		return -ENOENT;
	/* /proc shows an abstract name with '@' for its leading NUL. */
	prefix[0] = '@';
	if ((n = service_prefix(prefix + 1, sizeof(prefix) - 1, fabric, ps,
				sv__roce_addr_port(dst))) < 0)
		return n;
	n++;
	if (!(f = fopen(PROC_UNIX, "re")))
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		/* Num RefCount Protocol Flags Type St Inode Path */
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %u %511s", &ino, path) != 2 ||
		    strncmp(path, prefix, (size_t)n) != 0)
			continue;
		memcpy(name, path, sizeof(name));	/* rank() cuts path up */
		r = rank(path + n, dst, fabric, &cand);
		if ((r > best_rank || (r && r == best_rank && strcmp(name, best) < 0)) &&
		    record_ours(ino, name, foreign)) {
			best_rank = r;
			memcpy(best, name, sizeof(best));
			*dev = cand;
		}
	}
	fclose(f);
	return best_rank ? 0 : -ENOENT;
}

#else

int sv__roce_cm_dir_publish(uint16_t fabric, uint16_t ps, uint16_t svc,
			    const union sv__roce_addr *listen_ip, const union sv__roce_addr *dev)
{
	(void)fabric;
	(void)ps;
	(void)svc;
	(void)listen_ip;
	(void)dev;
	return -EOPNOTSUPP;
}

void sv__roce_cm_dir_withdraw(int fd)
{
	(void)fd;
}

int sv__roce_cm_dir_lookup(uint16_t fabric, uint16_t ps, const union sv__roce_addr *dst,
			   union sv__roce_addr *dev, uint64_t *foreign)
{
	(void)fabric;
	(void)ps;
	(void)dst;
	(void)dev;
	(void)foreign;
	return -ENOENT;
}

#endif
