/*
 * apps_util.c — process handling for the application tests (apps_util.h).
 */
#include "apps_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* SVRUN (set by ctest) names the build tree's svrun; otherwise the one on PATH. */
static const char *svrun_path(void)
{
	const char *p = getenv("SVRUN");

	return p && *p ? p : "svrun";
}

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[512];

	if (!path)
		path = "/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
		if (access(buf, X_OK) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

void apps_require(const char *const progs[])
{
	int i;

	for (i = 0; progs[i]; i++) {
		if (!in_path(progs[i]))
			cr_skip_test("%s is not installed (packages ibverbs-utils, rdmacm-utils, "
				     "perftest): application test skipped", progs[i]);
	}
	if (strchr(svrun_path(), '/') ? access(svrun_path(), X_OK) != 0 : !in_path("svrun"))
		cr_skip_test("svrun not found at %s (compat drop-ins not built)", svrun_path());
}

int apps_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind: %s", strerror(errno));
	cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

void apps_start(struct apps_proc *p, const char *const argv[])
{
	apps_start_env(p, NULL, argv);
}

void apps_start_env(struct apps_proc *p, const char *const env[], const char *const argv[])
{
	static int seq;
	const char *args[64];
	int i, fd;

	memset(p, 0, sizeof(*p));
	snprintf(p->log, sizeof(p->log), "/tmp/sv_apps_%d_%d_%s.out", (int)getpid(), seq,
		 argv[0]);
	snprintf(p->err, sizeof(p->err), "/tmp/sv_apps_%d_%d_%s.err", (int)getpid(), seq++,
		 argv[0]);
	args[0] = svrun_path();
	for (i = 0; argv[i] && i < 62; i++)
		args[i + 1] = argv[i];
	args[i + 1] = NULL;
	p->pid = fork();
	cr_assert(p->pid >= 0, "fork: %s", strerror(errno));
	if (p->pid == 0) {
		setpgid(0, 0);
		/* Separate files: a line on stderr must not split one on stdout. */
		fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			close(fd);
		}
		fd = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0) {
			dup2(fd, 0);
			close(fd);
		}
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execvp(args[0], (char *const *)args);
		_exit(127);
	}
	setpgid(p->pid, p->pid);	/* both sides set it: no race with the exec */
}

static bool reap(struct apps_proc *p, bool block)
{
	int st;
	pid_t r;

	if (p->done)
		return true;
	r = waitpid(p->pid, &st, block ? 0 : WNOHANG);
	if (r != p->pid)
		return false;
	p->done = true;
	p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return true;
}

static bool listening(int port)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/net/tcp", "r");
	unsigned lport, state;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* "  sl  local_address rem_address   st ..." : local is ADDR:PORT in hex */
		if (sscanf(line, " %*d: %*x:%x %*x:%*x %x", &lport, &state) == 2)
			found = (int)lport == port && state == 0x0a;	/* TCP_LISTEN */
	}
	fclose(f);
	return found;
}

bool apps_wait_listen(struct apps_proc *p, int port, int timeout_ms)
{
	long end = now_ms() + timeout_ms;

	while (now_ms() < end) {
		if (listening(port))
			return true;
		if (reap(p, false))
			return false;
		nap_ms(20);
	}
	return false;
}

bool apps_running(struct apps_proc *p)
{
	return !reap(p, false);
}

void apps_kill(struct apps_proc *p)
{
	if (p->pid <= 0 || p->done)
		return;
	kill(-p->pid, SIGKILL);
	reap(p, true);
	p->status = -1;
}

int apps_wait(struct apps_proc *p, int timeout_ms)
{
	long end = now_ms() + timeout_ms;

	while (!reap(p, false)) {
		if (now_ms() >= end) {
			apps_kill(p);
			return -1;
		}
		nap_ms(10);
	}
	return p->status;
}

/* Appends the file's contents to *buf (of *len bytes) and removes the file. */
static void slurp(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "r");
	long n;

	cr_assert(f, "cannot read %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	*buf = realloc(*buf, *len + (size_t)n + 1);
	cr_assert(*buf);
	n = (long)fread(*buf + *len, 1, (size_t)n, f);
	*len += (size_t)n;
	(*buf)[*len] = '\0';
	fclose(f);
	unlink(path);
}

char *apps_output(const struct apps_proc *p)
{
	char *buf = NULL;
	size_t len = 0;

	slurp(p->log, &buf, &len);
	slurp(p->err, &buf, &len);
	return buf;
}

void apps_pair(const char *const server[], const char *const client[], int port,
	       int timeout_ms, char **server_out, char **client_out)
{
	apps_pair_env(NULL, server, client, port, timeout_ms, server_out, client_out);
}

/* Whether a UDP socket is bound to addr:port (from /proc/net/udp; addr in network order). */
static bool udp_bound(uint32_t addr, int port)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/net/udp", "r");
	unsigned laddr, lport;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* /proc prints the address as the host-order dump of the network-order word */
		if (sscanf(line, " %*d: %x:%x", &laddr, &lport) == 2)
			found = laddr == addr && (int)lport == port;
	}
	fclose(f);
	return found;
}

const char *apps_free_roce_addr(void)
{
	static char buf[32];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(4791) };
	int n, fd;

	/* Tests run in parallel processes: each starts its search at its own place, so two
	 * of them rarely find the same free address before either server binds it. */
	int start = (int)(getpid() % 150);

	for (int i = 0; i < 150; i++) {
		n = 100 + (start + i) % 150;
		snprintf(buf, sizeof(buf), "127.0.0.%d", n);
		inet_pton(AF_INET, buf, &a.sin_addr);
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		cr_assert(fd >= 0);
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			close(fd);
			return buf;
		}
		close(fd);
	}
	cr_assert_fail("no free 127.0.0.x:4791 for a RoCE device");
	return NULL;
}

bool apps_wait_roce(struct apps_proc *p, const char *addr, int timeout_ms)
{
	long end = now_ms() + timeout_ms;
	struct in_addr in;

	inet_pton(AF_INET, addr, &in);
	while (now_ms() < end) {
		if (udp_bound(in.s_addr, 4791)) {
			nap_ms(300);	/* the device is open; its listener follows at once */
			return true;
		}
		if (reap(p, false))
			return false;
		nap_ms(20);
	}
	return false;
}

void apps_pair_env(const char *roce_addr, const char *const server[],
		   const char *const client[], int port, int timeout_ms, char **server_out,
		   char **client_out)
{
	struct apps_proc s, c;
	long start = now_ms();
	int rs, rc;
	char *so, *co, bind_env[64];
	const char *env[] = { bind_env, NULL };

	snprintf(bind_env, sizeof(bind_env), "SV_BIND_ADDR=%s", roce_addr ? roce_addr : "");
	apps_start_env(&s, roce_addr ? env : NULL, server);
	if (roce_addr) {
		if (!apps_wait_roce(&s, roce_addr, 10000)) {
			apps_kill(&s);
			so = apps_output(&s);
			cr_assert_fail("%s never opened its RoCE device at %s:\n%s", server[0],
				       roce_addr, so);
		}
	} else if (port) {
		if (!apps_wait_listen(&s, port, 10000)) {
			apps_kill(&s);
			so = apps_output(&s);
			cr_assert_fail("%s never listened on port %d:\n%s", server[0], port, so);
		}
	} else {
		nap_ms(500);
	}
	apps_start(&c, client);
	rc = apps_wait(&c, timeout_ms);
	rs = apps_wait(&s, (int)(timeout_ms - (now_ms() - start) > 5000 ?
				timeout_ms - (now_ms() - start) : 5000));
	apps_kill(&c);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_assert(rs == 0 && rc == 0,
		  "%s: server exit %d, client exit %d (-1 = killed at the deadline)\n"
		  "--- server ---\n%s\n--- client ---\n%s", server[0], rs, rc, so, co);
	*server_out = so;
	*client_out = co;
}

int apps_count(const char *h, const char *needle)
{
	int n = 0;

	while ((h = strstr(h, needle))) {
		n++;
		h += strlen(needle);
	}
	return n;
}
