/*
 * svrun_dev.c — svrun's helper that gives a program /dev/infiniband/<device> nodes
 * without root: svrun_dev DEVICE... -- CMD [ARGS...]
 *
 * Why. Some frameworks look for an RDMA device's node before they open it through
 * libibverbs: UCX lists a device only when /dev/infiniband/<dev_name> is a character
 * device it may read and write (stat, S_ISCHR, access R_OK|W_OK). The drop-ins need no
 * node at all (they open nothing there), but a host without an RDMA driver has no
 * /dev/infiniband, and making one in the host's /dev would need root and stay behind.
 *
 * How. In a mount namespace of its own (and, for a user other than root, a user
 * namespace in which the user is root, user_namespaces(7)), a tmpfs goes over /dev and
 * every entry of the real /dev comes back into it: directories and files as bind mounts
 * (directories recursively, so /dev/pts and /dev/shm keep their mounts), symbolic links
 * as copies. /dev/infiniband/<device> for each DEVICE is then a bind mount of /dev/null:
 * a character device every user may read and write, and nothing is read from or written
 * to it. For a user other than root the program then runs in a further user namespace
 * that maps the user back to its own uid and gid, so it sees the credentials it was
 * started with. Nothing outside the namespaces changes, and they end with the program.
 *
 * The same namespace also gets each device's sysfs entry where the host has none:
 * /sys/class/infiniband/<device>/device/net/<ifname>, a symbolic link to the network
 * interface the devices' address is on (/sys/class/net/<ifname>), as the kernel's sysfs
 * shows an RDMA device's netdev (rxe's and siw's too). rdma-core's own tests look up the
 * device's IP address that way (tests/base.py: the net directory, then `ip addr show`)
 * and skip every rdma_cm test without it. A tmpfs goes over /sys/class and its entries
 * come back as over /dev. The interface is the one holding SV_BIND_ADDR (getifaddrs), or
 * lo when it is unset or a loopback address, which is where the devices then bind
 * (wire/roce.c, open_socket); an address on no interface gets no net entry.
 *
 * When a step fails (user namespaces disabled, no tmpfs), it says why on stderr and
 * runs the program without the nodes: a program that needs none still works.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A user namespace in which `inner` is this process's user (and group): only a
 * one-line mapping of the caller's own ids, which needs no privilege. */
static int user_ns(uid_t inner_uid, gid_t inner_gid)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];

	if (unshare(CLONE_NEWUSER) < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inner_uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0)
		return -1;
	if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)inner_gid, (unsigned)gid);
	return write_file("/proc/self/gid_map", map);
}

/* Brings entry `name` of an old directory (open as dfd) back into directory `dir` of
 * the new /dev. */
static int restore(int dfd, const char *name, const char *dir)
{
	char src[64 + NAME_MAX], dst[32 + NAME_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlinkat(dfd, name, target, sizeof(target) - 1)) < 0)
			return -1;
		target[n] = '\0';
		return symlink(target, dst);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, st.st_mode & 07777) < 0)
			return -1;
	} else {
		if ((fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
			return -1;
		close(fd);
	}
	/* The old entry by way of the descriptor: its path now names the new /dev. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", dfd, name);
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

static int fail(const char *what)
{
	fprintf(stderr, "svrun: no /dev/infiniband nodes or sysfs entries for the program "
		"(%s: %s); running it without them\n", what, strerror(errno));
	return -1;
}

/* Every entry of the old directory dfd back into dir, but `skip` and the names in
 * skip_also (n of them). */
static void restore_all(int dfd, const char *dir, const char *skip, char **skip_also, int n)
{
	struct dirent *e;
	DIR *d;

	if (!(d = fdopendir(dup(dfd))))
		return;
	while ((e = readdir(d))) {
		bool drop = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			    (skip && !strcmp(e->d_name, skip));

		for (int i = 0; i < n && !drop; i++)
			drop = !strcmp(e->d_name, skip_also[i]);
		if (!drop && restore(dfd, e->d_name, dir) < 0)
			fprintf(stderr, "svrun: %s/%s not brought back: %s\n", dir, e->d_name,
				strerror(errno));
	}
	closedir(d);
}

/* The new /dev with the nodes; -1 (said on stderr) if any step fails. An existing
 * /dev/infiniband (a host with RDMA devices but not these) is remade with its entries
 * and the nodes. In the mount namespace of namespaces(). */
static int make_dev(char **devs, int ndev)
{
	int dfd, ibfd, fd;

	if ((dfd = open("/dev", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail("/dev");
	ibfd = openat(dfd, "infiniband", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mount("svrun", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m") < 0)
		return fail("tmpfs on /dev");
	restore_all(dfd, "/dev", "infiniband", NULL, 0);
	close(dfd);
	if (mkdir("/dev/infiniband", 0755) < 0)
		return fail("/dev/infiniband");
	if (ibfd >= 0) {
		restore_all(ibfd, "/dev/infiniband", NULL, devs, ndev);
		close(ibfd);
	}
	for (int i = 0; i < ndev; i++) {
		char path[8 + 12 + NAME_MAX];

		snprintf(path, sizeof(path), "/dev/infiniband/%s", devs[i]);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
			return fail(path);
		close(fd);
		if (mount("/dev/null", path, NULL, MS_BIND, NULL) < 0)
			return fail(path);
	}
	return 0;
}

/* The interface SV_BIND_ADDR is on, into ifname (IF_NAMESIZE): lo for none or a
 * loopback address (the devices' default, wire/roce.c), the interface a link-local
 * "addr%if" names, else the one getifaddrs lists with the address. false if none has
 * it. */
static bool bind_ifname(char *ifname)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM };
	const char *b = getenv("SV_BIND_ADDR");
	struct ifaddrs *ifs, *i;
	struct addrinfo *ai;
	bool found = false;

	if (!b || !*b || !strcmp(b, "0.0.0.0") || !strcmp(b, "::")) {
		snprintf(ifname, IF_NAMESIZE, "lo");
		return true;
	}
	if (getaddrinfo(b, NULL, &hints, &ai) != 0)
		return false;
	if (ai->ai_family == AF_INET &&
	    (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) == 127) {
		snprintf(ifname, IF_NAMESIZE, "lo");
		found = true;
	} else if (ai->ai_family == AF_INET6 &&
		   (IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr) ||
		    ((struct sockaddr_in6 *)ai->ai_addr)->sin6_scope_id)) {
		unsigned scope = ((struct sockaddr_in6 *)ai->ai_addr)->sin6_scope_id;

		found = scope ? if_indextoname(scope, ifname) != NULL : true;
		if (!scope)
			snprintf(ifname, IF_NAMESIZE, "lo");
	} else if (getifaddrs(&ifs) == 0) {
		for (i = ifs; i && !found; i = i->ifa_next) {
			size_t len = ai->ai_family == AF_INET ? sizeof(struct in_addr) :
								 sizeof(struct in6_addr);
			const void *want = ai->ai_family == AF_INET ?
				(const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr :
				(const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
			const void *have;

			if (!i->ifa_addr || i->ifa_addr->sa_family != ai->ai_family)
				continue;
			have = ai->ai_family == AF_INET ?
				(const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr :
				(const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
			if (!memcmp(want, have, len)) {
				snprintf(ifname, IF_NAMESIZE, "%s", i->ifa_name);
				found = true;
			}
		}
		freeifaddrs(ifs);
	}
	freeaddrinfo(ai);
	return found;
}

/* /sys/class/infiniband/<dev>/device/net/<ifname> for each device the host's sysfs
 * lacks (see the top of this file); -1 (said on stderr) if a step fails. */
static int make_sys(char **devs, int ndev)
{
	char ifname[IF_NAMESIZE], path[64 + 2 * NAME_MAX], target[32 + IF_NAMESIZE];
	int cfd, ibfd;
	bool net = bind_ifname(ifname);

	if ((cfd = open("/sys/class", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return fail("/sys/class");
	ibfd = openat(cfd, "infiniband", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mount("svrun", "/sys/class", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=755,size=1m") < 0)
		return fail("tmpfs on /sys/class");
	restore_all(cfd, "/sys/class", "infiniband", NULL, 0);
	close(cfd);
	if (mkdir("/sys/class/infiniband", 0755) < 0)
		return fail("/sys/class/infiniband");
	if (ibfd >= 0) {
		restore_all(ibfd, "/sys/class/infiniband", NULL, devs, ndev);
		close(ibfd);
	}
	snprintf(target, sizeof(target), "/sys/class/net/%s", ifname);
	for (int i = 0; i < ndev; i++) {
		static const char *const parts[] = { "", "/device", "/device/net" };

		for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
			snprintf(path, sizeof(path), "/sys/class/infiniband/%s%s", devs[i],
				 parts[k]);
			if (mkdir(path, 0755) < 0)
				return fail(path);
		}
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/net/%s", devs[i],
			 ifname);
		if (net && symlink(target, path) < 0)
			return fail(path);
	}
	return 0;
}

/* The private mount namespace (in a user namespace first when not root). */
static int namespaces(void)
{
	if (getuid() != 0 && user_ns(0, 0) < 0)
		return fail("user namespace");
	if (unshare(CLONE_NEWNS) < 0)
		return fail("mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("private mounts");
	return 0;
}

/* Says on stderr what the program gets: where, for which devices, and how. */
static void say(const char *where, char **devs, int ndev, const char *how, bool userns)
{
	fprintf(stderr, "svrun: %s{", where);
	for (int i = 0; i < ndev; i++)
		fprintf(stderr, "%s%s", i ? "," : "", devs[i]);
	fprintf(stderr, "} for the program: %s in a private mount namespace%s\n", how,
		userns ? " (and user namespace)" : "");
}

/* The devices of devs (n of them) whose entry under dir is missing, moved to the front;
 * returns how many. */
static int missing(char **devs, int n, const char *dir)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		char path[64 + NAME_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, devs[i]);
		if (access(path, F_OK) != 0) {
			char *t = devs[k];

			devs[k++] = devs[i];
			devs[i] = t;
		}
	}
	return k;
}

int main(int argc, char **argv)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	int i, ndev, nsys;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (strchr(argv[i], '/') || !strcmp(argv[i], "..") || !strcmp(argv[i], ".")) {
			fprintf(stderr, "svrun_dev: bad device name '%s'\n", argv[i]);
			return 2;
		}
	if (i >= argc - 1) {
		fprintf(stderr, "usage: svrun_dev DEVICE... -- CMD [ARGS...]\n");
		return 2;
	}
	ndev = i - 1;
	{
		char *sys[ndev > 0 ? ndev : 1];
		int nnode;

		memcpy(sys, argv + 1, (size_t)ndev * sizeof(*sys));
		nnode = missing(argv + 1, ndev, "/dev/infiniband");
		nsys = missing(sys, ndev, "/sys/class/infiniband");
		if ((nnode || nsys) && namespaces() == 0) {
			if (nnode && make_dev(argv + 1, nnode) == 0)
				say("/dev/infiniband/", argv + 1, nnode,
				    "bind mounts of /dev/null", uid != 0);
			if (nsys && make_sys(sys, nsys) == 0)
				say("/sys/class/infiniband/", sys, nsys,
				    "device/net entries on a tmpfs over /sys/class", uid != 0);
			if (uid != 0 && user_ns(uid, gid) < 0)
				fail("user namespace for the program's own uid");
		}
	}
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "svrun: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
