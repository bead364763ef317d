/*
 * apps_util.c — process handling for the application tests (apps_util.h).
 */
#include "apps_util.h"
#include "../port_pick.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
				     "perftest, qperf, libfabric-bin, ucx-utils): application "
				     "test skipped", progs[i]);
	}
	if (strchr(svrun_path(), '/') ? access(svrun_path(), X_OK) != 0 : !in_path("svrun"))
		cr_skip_test("svrun not found at %s (compat drop-ins not built)", svrun_path());
}

/* Whether TCP port `port` can be bound on the wildcard address right now. */
static bool tcp_port_free(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* Claims port for this process's life among the processes of this network namespace:
 * an abstract unix socket named by it, which only one process can bind and the kernel
 * releases when the process ends (unix(7), "Abstract sockets"). */
static bool claim_port(int port)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int n;

	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "softverbs-test-port/%d", port);
	if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path)
							+ 1 + (size_t)n)) == 0)
		return true;		/* kept open: the claim lasts until exit */
	close(fd);
	return false;
}

/* Below the ephemeral range (test/port_pick.h), and claimed, so no concurrent test
 * picks it too. */
int apps_free_port(void)
{
	static unsigned seq;
	int eph_lo, eph_hi;
	unsigned start = port_pick_start(seq++, &eph_lo, &eph_hi);

	for (unsigned i = 0; i < PORT_PICK_SPAN; i++) {
		int port = port_pick_candidate(start, i, eph_lo, eph_hi);

		if (port && tcp_port_free(port) && claim_port(port))
			return port;
	}
	cr_assert_fail("no TCP port free in %d..%d", PORT_PICK_LO, PORT_PICK_HI);
	return -1;
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

static bool listening_in(const char *table, int port)
{
	char line[512];
	bool found = false;
	FILE *f = fopen(table, "r");
	unsigned lport, state;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* "  sl  local_address rem_address   st ..." : local is ADDR:PORT in hex */
		if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &lport,
			   &state) == 2)
			found = (int)lport == port && state == 0x0a;	/* TCP_LISTEN */
	}
	fclose(f);
	return found;
}

/* A listener on the IPv6 wildcard serves 127.0.0.1 too (qperf's does). */
static bool listening(int port)
{
	return listening_in("/proc/net/tcp", port) || listening_in("/proc/net/tcp6", port);
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

/* With the server s started at `start` and ready, starts the client, waits for both and
 * asserts both exit 0; the outputs go to the caller. Unless rerun_on is NULL, a failed
 * pair with rerun_on in an output returns false instead (the outputs freed). */
static bool pair_finish(struct apps_proc *s, const char *const server[],
			const char *const client[], long start, int timeout_ms, char **server_out,
			char **client_out, const char *rerun_on)
{
	struct apps_proc c;
	int rs, rc;
	char *so, *co;

	apps_start(&c, client);
	rc = apps_wait(&c, timeout_ms);
	co = apps_output(&c);
	/* A client that failed so is run again: its server, left waiting for it, goes. */
	if (rc != 0 && rerun_on && strstr(co, rerun_on))
		apps_kill(s);
	rs = apps_wait(s, (int)(timeout_ms - (now_ms() - start) > 5000 ?
				timeout_ms - (now_ms() - start) : 5000));
	apps_kill(&c);
	so = apps_output(s);
	if ((rs != 0 || rc != 0) && rerun_on && (strstr(so, rerun_on) || strstr(co, rerun_on))) {
		/* On stderr, not cr_log_warn(): a warning makes the suite's exit status 1. */
		fprintf(stderr, "server exit %d, client exit %d on \"%s\": running again\n",
			rs, rc, rerun_on);
		free(so);
		free(co);
		return false;
	}
	cr_assert(rs == 0 && rc == 0,
		  "%s: server exit %d, client exit %d (-1 = killed at the deadline)\n"
		  "--- server ---\n%s\n--- client ---\n%s", server[0], rs, rc, so, co);
	*server_out = so;
	*client_out = co;
	return true;
}

void apps_pair(const char *const server[], const char *const client[], int port,
	       int timeout_ms, char **server_out, char **client_out)
{
	struct apps_proc s;
	long start = now_ms();
	char *so;

	apps_start(&s, server);
	if (!apps_wait_listen(&s, port, 10000)) {
		apps_kill(&s);
		so = apps_output(&s);
		cr_assert_fail("%s never listened on port %d:\n%s", server[0], port, so);
	}
	pair_finish(&s, server, client, start, timeout_ms, server_out, client_out, NULL);
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

/* The published listener on service port `port` (listening on listen_ip unless NULL):
 * the entries wire/roce_cm_dir.c binds, abstract names that /proc/net/unix shows as
 * "@softverbs/<uid>/roce-cm/<fabric>/<ps>/<port>/<listen IP>/<device IP>/<UDP port>". */
static bool cm_published(int port, const char *listen_ip, struct apps_cm_listener *out)
{
	char line[512], path[512], prefix[64], lip[64], dip[64];
	unsigned fabric, ps, svc;
	int n, udp;
	bool found = false;
	FILE *f = fopen("/proc/net/unix", "r");

	if (!f)
		return false;
	snprintf(prefix, sizeof(prefix), "@softverbs/%u/roce-cm/", (unsigned)getuid());
	n = (int)strlen(prefix);
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %511s", path) != 1 ||
		    strncmp(path, prefix, (size_t)n) != 0)
			continue;
		if (sscanf(path + n, "%u/%u/%u/%63[^/]/%63[^/]/%d", &fabric, &ps, &svc, lip, dip,
			   &udp) != 6 || (int)svc != port || (listen_ip && strcmp(lip, listen_ip)))
			continue;
		found = true;
		if (out) {
			snprintf(out->listen_ip, sizeof(out->listen_ip), "%s", lip);
			snprintf(out->dev_ip, sizeof(out->dev_ip), "%s", dip);
			out->udp_port = udp;
		}
	}
	fclose(f);
	return found;
}

bool apps_wait_cm_listen(struct apps_proc *p, int port, const char *listen_ip,
			 struct apps_cm_listener *out, int timeout_ms)
{
	long end = now_ms() + timeout_ms;

	while (now_ms() < end) {
		if (cm_published(port, listen_ip, out))
			return true;
		if (reap(p, false))
			return false;
		nap_ms(20);
	}
	return false;
}

const char *apps_free_cm_addr(int port)
{
	static char buf[32];
	int start = (int)(getpid() % 150);

	/* Tests run in parallel processes: each starts its search at its own place. */
	for (int i = 0; i < 150; i++) {
		snprintf(buf, sizeof(buf), "127.0.0.%d", 100 + (start + i) % 150);
		if (!cm_published(port, buf, NULL) && !udp_bound(inet_addr(buf), 4791))
			return buf;
	}
	cr_assert_fail("no loopback address free for a listener on service port %d", port);
	return NULL;
}

void apps_hold_loopback(struct apps_proc *h)
{
	char port[16];
	/* Bounded by itself too, in case the test dies before it kills it. */
	const char *argv[] = { "--transport", "udp", "timeout", "300", "rping", "-s", "-a",
			       "127.0.0.1", "-p", port, NULL };
	long end = now_ms() + APPS_HOLD_WAIT_MS;
	struct apps_cm_listener l;
	char *out;

	/* Only a holder whose own device is at 127.0.0.1:4791 holds it for as long as the
	 * test needs: another test's process there may end at any moment and free it for
	 * the next device. While one has it, wait for it to go and try again. */
	for (;;) {
		snprintf(port, sizeof(port), "%d", apps_free_port());
		apps_start(h, argv);
		if (!apps_wait_cm_listen(h, atoi(port), NULL, &l, 30000)) {
			apps_kill(h);
			out = apps_output(h);
			cr_assert_fail("the holder never listened:\n%s", out);
		}
		if (!strcmp(l.dev_ip, "127.0.0.1"))
			return;
		apps_kill(h);
		free(apps_output(h));
		while (udp_bound(inet_addr("127.0.0.1"), 4791)) {
			cr_assert(now_ms() < end, "127.0.0.1:4791 stayed another process's for "
				  "%d ms", APPS_HOLD_WAIT_MS);
			nap_ms(50);
		}
	}
}

void apps_pair_cm(const char *const server[], const char *const client[], int port,
		  const char *listen_ip, int timeout_ms, char **server_out, char **client_out,
		  struct apps_cm_listener *l)
{
	struct apps_proc s;
	long start = now_ms();
	char *so;

	apps_start(&s, server);
	if (!apps_wait_cm_listen(&s, port, listen_ip, l, 10000)) {
		apps_kill(&s);
		so = apps_output(&s);
		cr_assert_fail("%s never published a CM listener on port %d:\n%s", server[0],
			       port, so);
	}
	pair_finish(&s, server, client, start, timeout_ms, server_out, client_out, NULL);
}

bool apps_pair_or_rerun(const char *const server[], const char *const client[], int port,
			bool cm, int timeout_ms, const char *rerun_on, char **server_out,
			char **client_out)
{
	struct apps_proc s;
	long start = now_ms();
	char *so;

	apps_start(&s, server);
	if (!(cm ? apps_wait_cm_listen(&s, port, NULL, NULL, 10000) :
		   apps_wait_listen(&s, port, 10000))) {
		apps_kill(&s);
		so = apps_output(&s);
		cr_assert_fail("%s never listened on port %d:\n%s", server[0], port, so);
	}
	return pair_finish(&s, server, client, start, timeout_ms, server_out, client_out,
			   rerun_on);
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

void *apps_dropin_verbs(void)
{
	const char *svrun = getenv("SVRUN");
	char dir[512], path[600];
	void *h;

	if (!svrun)
		cr_skip_test("SVRUN not set (run through ctest)");
	snprintf(dir, sizeof(dir), "%s", svrun);
	snprintf(path, sizeof(path), "%s/compat/lib/libibverbs.so.1", dirname(dir));
	if (access(path, R_OK) != 0)
		cr_skip_test("no drop-in at %s", path);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen %s: %s", path, dlerror());
	return h;
}

void *apps_dropin_sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	cr_assert_not_null(p, "%s not exported by the drop-in", name);
	return p;
}
