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
 * When a step fails (user namespaces disabled, no tmpfs), it says why on stderr and
 * runs the program without the nodes: a program that needs none still works.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

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
	fprintf(stderr, "svrun: no /dev/infiniband nodes for the program (%s: %s); running "
		"it without them\n", what, strerror(errno));
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
 * and the nodes. */
static int make_dev(char **devs, int ndev)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	int dfd, ibfd, fd;

	if (uid != 0 && user_ns(0, 0) < 0)
		return fail("user namespace");
	if (unshare(CLONE_NEWNS) < 0)
		return fail("mount namespace");
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("private mounts");
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
	if (uid != 0 && user_ns(uid, gid) < 0)
		return fail("user namespace for the program's own uid");
	fprintf(stderr, "svrun: /dev/infiniband/{");
	for (int i = 0; i < ndev; i++)
		fprintf(stderr, "%s%s", i ? "," : "", devs[i]);
	fprintf(stderr, "} for the program: bind mounts of /dev/null in a private mount "
		"namespace%s\n", uid != 0 ? " (and user namespace)" : "");
	return 0;
}

int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (strchr(argv[i], '/') || !strcmp(argv[i], "..") || !strcmp(argv[i], ".")) {
			fprintf(stderr, "svrun_dev: bad device name '%s'\n", argv[i]);
			return 2;
		}
	if (i >= argc - 1) {
		fprintf(stderr, "usage: svrun_dev DEVICE... -- CMD [ARGS...]\n");
		return 2;
	}
	make_dev(argv + 1, i - 1);
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "svrun: %s: %s\n", argv[i + 1], strerror(errno));
	return 127;
}
