/*
 * thread_block.h — waiting for another thread of this process to be asleep in a given
 * system call, so a test acts once the thread has reached its blocking point rather than
 * after a sleep that hopes it has. The kernel tells it in /proc/self/task/<tid>/syscall
 * (proc(5)): the number and arguments of the call the thread is blocked in, "-1 ..."
 * while it is preempted in user space, "running" while it runs.
 */
#ifndef SV_TEST_THREAD_BLOCK_H
#define SV_TEST_THREAD_BLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* The calling thread's id, for another thread to watch. */
static inline pid_t tb_self(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Whether thread tid of this process is blocked in a system call: then its number and
 * first argument. False while it runs, or when it has exited. */
static inline bool tb_syscall(pid_t tid, long *nr, unsigned long *arg0)
{
	char path[64];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	if (!(f = fopen(path, "r")))
		return false;
	n = fscanf(f, "%ld %lx", nr, arg0);
	fclose(f);
	return n == 2 && *nr >= 0;
}

/* A test of what the thread is blocked in: nr, arg0, and the caller's c. */
typedef bool tb_pred(long nr, unsigned long arg0, const void *c);

/* poll(2) (glibc may issue it as ppoll). */
static inline bool tb_in_poll(long nr, unsigned long arg0, const void *c)
{
	(void)arg0;
	(void)c;
#ifdef SYS_poll
	if (nr == SYS_poll)
		return true;
#endif
	return nr == SYS_ppoll;
}

/* epoll_wait(2) or a variant of it: where a libuv loop sleeps when it has nothing to do. */
static inline bool tb_in_epoll(long nr, unsigned long arg0, const void *c)
{
	(void)arg0;
	(void)c;
#ifdef SYS_epoll_wait
	if (nr == SYS_epoll_wait)
		return true;
#endif
#ifdef SYS_epoll_pwait2
	if (nr == SYS_epoll_pwait2)
		return true;
#endif
	return nr == SYS_epoll_pwait;
}

/* futex(2) on a word inside the pthread_cond_t at c: pthread_cond_wait() and
 * pthread_cond_timedwait() sleep on one of its words. */
static inline bool tb_in_cond_wait(long nr, unsigned long arg0, const void *c)
{
	uintptr_t lo = (uintptr_t)c;

	return nr == SYS_futex && arg0 >= lo && arg0 < lo + sizeof(pthread_cond_t);
}

/* Waits up to ms, checking every millisecond, until thread *tid is blocked in what p
 * accepts; *tid is 0 until the thread has stored its id (tb_self()). Returns whether
 * it was. */
static inline bool tb_wait_blocked(const _Atomic pid_t *tid, tb_pred *p, const void *c,
				   unsigned ms)
{
	const struct timespec tick = { 0, 1000000 };
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long nr;
		unsigned long arg0;

		if (*tid && tb_syscall(*tid, &nr, &arg0) && p(nr, arg0, c))
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
			return false;
		nanosleep(&tick, NULL);
	}
}

#endif
