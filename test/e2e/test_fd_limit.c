/*
 * test_fd_limit.c — RLIMIT_NOFILE (issue 15, "Scale"): the first device context raises
 * the soft limit to the hard one (core/context.c raise_nofile()), and a process out of
 * descriptors gets -EMFILE from the call that needed one, never a crash: sv_cm_connect
 * on the TCP transport (one socket per connection), sv_cm_listen, the channels'
 * eventfds, and sv_open_device on both transports. Each Criterion test runs in a process of its own, so the limits one
 * sets end with it.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "e2e_util.h"
#include "softverbs.h"

#define MAX_CONN 16

/* The highest descriptor open, from /proc/self/fd (without the listing's own). */
static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int hi = -1;

	cr_assert_not_null(d, "opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d) && atoi(e->d_name) > hi)
			hi = atoi(e->d_name);
	closedir(d);
	return hi;
}

/* Leaves exactly `spare` descriptors free, soft and hard limit alike (no raise can
 * help): the gaps below the highest one are filled with duplicates first, since the
 * kernel hands out the lowest free number (open(2)). */
static void limit_fds(unsigned spare)
{
	struct rlimit r;
	int hi = highest_fd(), fd;

	while ((fd = dup(0)) >= 0 && fd < hi)
		;
	cr_assert_geq(fd, 0);
	close(fd);
	r.rlim_cur = r.rlim_max = (rlim_t)hi + 1 + spare;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &r), 0, "setrlimit: %s", strerror(errno));
}

/* A plain TCP listener nobody accepts on: connects complete in the kernel's backlog and
 * take no descriptor of ours beyond their own socket. */
static int plain_listener(struct sockaddr_in *a)
{
	socklen_t l = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
	cr_assert_eq(listen(fd, 64), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)a, &l), 0);
	return fd;
}

Test(fd_limit, first_context_raises_the_soft_limit_to_the_hard_one)
{
	struct rlimit r;
	struct sv_context *ctx;
	struct sv_device_opts o;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
	if (r.rlim_max < 64)
		cr_skip_test("hard RLIMIT_NOFILE %llu is too low to lower the soft one",
			     (unsigned long long)r.rlim_max);
	r.rlim_cur = (rlim_t)highest_fd() + 32 < r.rlim_max ? (rlim_t)highest_fd() + 32 :
		     r.rlim_max - 1;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &r), 0);
	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
	cr_assert_eq(r.rlim_cur, r.rlim_max, "soft limit %llu, hard %llu",
		     (unsigned long long)r.rlim_cur, (unsigned long long)r.rlim_max);
	cr_assert_eq(sv_close_device(ctx), 0);
}

Test(fd_limit, tcp_connect_out_of_descriptors_is_emfile)
{
	struct e2e_pair_opts po;
	struct e2e_side s;
	struct sockaddr_in dst;
	struct sv_cm_id *ids[MAX_CONN];
	struct sv_qp *qps[MAX_CONN];
	unsigned ok = 0;
	int lfd, rc = 0;

	e2e_pair_opts_init(&po);
	e2e_side_open(&s, 1, &po);
	lfd = plain_listener(&dst);
	limit_fds(3);
	for (ok = 0; ok < MAX_CONN; ok++) {
		s.qp = NULL;
		e2e_side_create_qp(&s, &po, E2E_ACCESS_ALL);
		qps[ok] = s.qp;
		cr_assert_eq(sv_cm_create_id(s.cm_ch, s.ctx, NULL, &ids[ok]), 0);
		rc = sv_cm_connect(ids[ok], qps[ok], (struct sockaddr *)&dst, NULL);
		if (rc < 0)
			break;
	}
	cr_assert_eq(rc, -EMFILE, "connect %u: %s, want EMFILE", ok, sv_strerror(rc));
	cr_assert_eq(ok, 3, "%u connects before EMFILE, one socket each of the 3 left", ok);
	/* The refused id and QP are intact: both go away cleanly, as do the others. */
	for (unsigned i = 0; i <= ok; i++) {
		cr_assert_eq(sv_cm_destroy_id(ids[i]), 0);
		cr_assert_eq(sv_destroy_qp(qps[i]), 0);
	}
	s.qp = NULL;
	e2e_side_close(&s);
	close(lfd);
}

Test(fd_limit, listen_channels_and_open_out_of_descriptors_are_emfile)
{
	struct e2e_pair_opts po;
	struct e2e_side s;
	struct sv_cm_id *id;
	struct sv_context *ctx;
	struct sv_device_opts o;
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc;

	e2e_pair_opts_init(&po);
	e2e_side_open(&s, 1, &po);
	cr_assert_eq(sv_cm_create_id(s.cm_ch, s.ctx, NULL, &id), 0);
	limit_fds(0);
	rc = sv_cm_listen(id, (struct sockaddr *)&a, 8);
	cr_assert_eq(rc, -EMFILE, "listen: %s, want EMFILE", sv_strerror(rc));
	{
		struct sv_cm_channel *ch = NULL;
		struct sv_comp_channel *cc = NULL;

		rc = sv_cm_create_channel(&ch);
		cr_assert_eq(rc, -EMFILE, "CM channel: %s, want EMFILE", sv_strerror(rc));
		rc = sv_create_comp_channel(s.ctx, &cc);
		cr_assert_eq(rc, -EMFILE, "completion channel: %s, want EMFILE", sv_strerror(rc));
	}
	for (int t = 0; t < 2; t++) {
		sv_device_opts_init(&o);
		o.transport = t ? SV_TRANSPORT_UDP : SV_TRANSPORT_TCP;
		ctx = NULL;
		rc = sv_open_device(&o, &ctx);
		cr_assert_eq(rc, -EMFILE, "open (%s): %s, want EMFILE", t ? "udp" : "tcp",
			     sv_strerror(rc));
		cr_assert_null(ctx);
	}
	cr_assert_eq(sv_cm_destroy_id(id), 0);
	e2e_side_close(&s);
}
