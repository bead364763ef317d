/*
 * apps_util.h — running the packaged rdma-core programs on the drop-ins, via svrun.
 *
 * Every process is started in its own process group with stdout and stderr in a file,
 * waited for with a deadline, and killed (the whole group) when the deadline passes or
 * the test ends, so a hung program can neither hang the suite nor outlive it.
 */
#ifndef APPS_UTIL_H
#define APPS_UTIL_H

#include <stdbool.h>
#include <sys/types.h>

struct apps_proc {
	pid_t pid;
	char log[256];		/* where its stdout went */
	char err[256];		/* and its stderr */
	int status;		/* exit code once reaped; -1: killed at the deadline */
	bool done;
};

/* Skips the current test (with the reason) unless every named program is installed. */
void apps_require(const char *const progs[]);

/* Skips the current test (with svrun's reason) where svrun cannot give programs their
 * /dev/infiniband nodes and sysfs entries: it makes them in a private user and mount
 * namespace (compat/svrun_dev.c), which the kernel refuses inside a chroot, or with
 * unprivileged user namespaces turned off, as some containers have them. UCX opens the
 * nodes; pyverbs' rdma_cm tests read the sysfs entries. */
void apps_require_dev_view(void);

/* A TCP port free on every address now, outside the kernel's ephemeral range and claimed
 * by this process until it exits, so neither another process's connection nor another
 * test's pick can take it before the program under test binds it. */
int apps_free_port(void);

/* Starts `svrun argv...` (argv NULL-terminated); fails the test if it cannot fork. */
void apps_start(struct apps_proc *p, const char *const argv[]);

/* The same with extra "KEY=VALUE" environment entries (env NULL-terminated, or NULL). */
void apps_start_env(struct apps_proc *p, const char *const env[], const char *const argv[]);

/* Waits until the process listens on TCP port `port` (/proc/net/tcp or tcp6) or exits;
 * false at the deadline. */
bool apps_wait_listen(struct apps_proc *p, int port, int timeout_ms);

/* Waits for exit until the deadline, then kills the process group; returns the exit code
 * or -1 when it had to be killed. */
int apps_wait(struct apps_proc *p, int timeout_ms);

/* Whether the process has not exited yet (reaps it if it has). */
bool apps_running(struct apps_proc *p);

/* Kills the process group if still running (for cleanup). */
void apps_kill(struct apps_proc *p);

/* The process's stdout then its stderr, NUL-terminated (caller frees); removes the
 * files. */
char *apps_output(const struct apps_proc *p);

/* Runs a server and then a client, both through svrun, and waits for both; asserts that
 * both exit 0 within timeout_ms, printing their output if not. port is where the server
 * must be listening before the client starts. The outputs are returned (caller frees). */
void apps_pair(const char *const server[], const char *const client[], int port,
	       int timeout_ms, char **server_out, char **client_out);

/* A listener of a softverbs UDP device's CM, as published host-locally
 * (wire/roce_cm_dir.c): what it listens on and the device it is on. */
struct apps_cm_listener {
	char listen_ip[64];	/* "0.0.0.0" / "::" for the wildcard */
	char dev_ip[64];
	int udp_port;
};

/* Waits until a CM listener on service port `port` (any port space; on listen_ip unless
 * NULL) is published, or the process exits; false at the deadline. *out (if not NULL)
 * gets the listener. */
bool apps_wait_cm_listen(struct apps_proc *p, int port, const char *listen_ip,
			 struct apps_cm_listener *out, int timeout_ms);

/* A loopback address (127.0.0.100 and up) nobody's CM listener on service port `port`
 * listens on and no device has, for a server to listen on (for programs with a fixed
 * service port, as udaddy's 7174). */
const char *apps_free_cm_addr(int port);

/* Starts a process that keeps a UDP device open at 127.0.0.1:4791 (an rping server on a
 * free port, never served) and waits until it listens, so the devices opened next get
 * other loopback addresses until it is killed; while another process has that address
 * it waits up to APPS_HOLD_WAIT_MS for it to go. The caller apps_kill()s it and frees
 * apps_output(). */
#define APPS_HOLD_WAIT_MS 90000
void apps_hold_loopback(struct apps_proc *h);

/* apps_pair for the UDP transport's CM: the client starts once the server's CM listener
 * on service port `port` (on listen_ip unless NULL) is published; *l (if not NULL) gets
 * it, the device the server opened. */
void apps_pair_cm(const char *const server[], const char *const client[], int port,
		  const char *listen_ip, int timeout_ms, char **server_out, char **client_out,
		  struct apps_cm_listener *l);

/* apps_pair (cm false) or apps_pair_cm (cm true, any listen address), except that when
 * the pair fails with rerun_on in either output it returns false (nothing to free) for
 * the caller to run it again; true with the outputs otherwise. */
bool apps_pair_or_rerun(const char *const server[], const char *const client[], int port,
			bool cm, int timeout_ms, const char *rerun_on, char **server_out,
			char **client_out);

/* The build's drop-in libibverbs.so.1 (next to $SVRUN), opened in this process with
 * dlopen; skips the test, saying why, when SVRUN is unset or the drop-in is not built. */
void *apps_dropin_verbs(void);
/* A symbol of a library apps_dropin_verbs() opened; asserts it is exported. */
void *apps_dropin_sym(void *lib, const char *name);

/* Counts occurrences of needle in haystack. */
int apps_count(const char *haystack, const char *needle);

#endif
