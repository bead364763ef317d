/*
 * scale.c — many connected RC QPs between two processes, every one moving verified data
 * (issue 15, "Scale" and "Soak"; run by bench/scale.sh and bench/soak.sh).
 *
 * Per connection: the server accepts with {address, rkey, slot} of a 64-byte slot of its
 * registered buffer in the private data; the client RDMA WRITEs a pattern of a random seed
 * there and then SENDs the seed, the server checks the slot (RC ordering puts the WRITE's
 * bytes in place before the SEND completes, IBA vol. 1 9.5) and SENDs back a pattern of
 * the seed, which the client checks. Every WR is signaled and accounted: each must
 * complete exactly once, with success or a flush (doc/verbs.md 1), before its QP is
 * destroyed; a second completion, or one for a WR not posted, is a violation.
 *
 *   sv_scale --qps N [--transport tcp|udp]        fork a server, connect N QPs to it
 *   sv_scale --serve [--transport T] [--idle-ms M] serve until SIGTERM (prints "port P")
 *   sv_scale --connect PORT --qps K --seconds S     connect K, exchange, disconnect, repeat
 * Common: --timeout S (default 600) bounds the process with alarm(2).
 *
 * Figures (key=value lines): conn_per_s (N / the time from the first connect to the last
 * ESTABLISHED), rss_per_qp_B ((RSS after N connected QPs - RSS before) / N, buffers and
 * CQ allocated and touched before), rss_per_mr_B (the same over N registrations of one
 * page each), fds and threads of each process (/proc/self), and the phases' times.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
#define SV_SCALE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SV_SCALE_ASAN 1
#endif
#endif
#ifdef SV_SCALE_ASAN
/* The sanitizers' allocator interface; declared here because gcc ships no header for it
 * (clang's is sanitizer/allocator_interface.h). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "softverbs.h"

#define SLOT 64			/* bytes written and echoed per connection */
#define WINDOW 256		/* connects in flight at once (below the backlog, 1024) */
#define MAGIC 0x5343414cu	/* "SCAL", in the accept's private data */
/* QPs per CQ. sv_poll_cq on an empty CQ drives the receive progress of every QP feeding
 * it (include/softverbs.h), so one CQ for 10000 QPs would make each empty poll a pass
 * over all of them: CQs of 64, polled when their completion channel event says so. */
#define CQ_QPS 64

enum kind { K_RECV, K_WRITE, K_SEND, K_KINDS };
enum cstate { C_FREE, C_CONNECTING, C_UP, C_DONE };

struct conn {
	struct sv_cm_id *id;
	struct sv_qp *qp;
	uint32_t gen;		/* bumped when the slot is reused: stale wr_ids are caught */
	enum cstate st;
	uint8_t posted;		/* bit per enum kind: posted, not yet completed */
	bool disc;		/* DISCONNECTED (or never connected): destroy once drained */
	bool disc_asked;	/* we called sv_cm_disconnect */
	bool verified;
	uint32_t seed;
	uint64_t up_ms;		/* server: accepted at; client: ESTABLISHED at */
};

struct accept_pd {		/* the server's accept private data */
	uint32_t magic, slot, rkey, pad;
	uint64_t addr;
};

struct side {
	bool server;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_comp_channel *cch;
	struct sv_cq **cqs;	/* slot i's QP uses cqs[i / CQ_QPS] */
	uint32_t ncq;
	struct sv_cm_channel *cm;
	struct sv_cm_id *listen;
	uint32_t cap;		/* slots */
	struct conn *c;
	uint8_t *wbuf, *rbuf;	/* server: WRITE target, echo source; client: source, echo sink */
	uint32_t *msg;		/* one seed per slot: SEND source (client) or sink (server) */
	struct sv_mr *wmr, *rmr, *mmr;
	uint32_t live, free_hint;
	/* counters */
	uint64_t established, verified, done, failed, wc_ok, wc_flush, wc_other, violations;
	uint64_t posted_total, completed_total;
};

static volatile sig_atomic_t stop_flag, idle_asked;

static void on_term(int sig)
{
	(void)sig;
	stop_flag = 1;
}

/* SIGUSR1 to a server: print its "idle" line (RSS, open descriptors) the next time it has
 * no connection left (bench/soak.sh compares two of them). */
static void on_usr1(int sig)
{
	(void)sig;
	idle_asked = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "sv_scale[%d]: %s: %s\n", (int)getpid(), what, sv_strerror(rc));
	exit(1);
}

static long status_kb(const char *key)
{
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* Bytes the allocator has handed out (in use, small chunks and mmapped ones); under
 * AddressSanitizer, whose allocator glibc's mallinfo2() does not see, its own count. */
static long heap_bytes(void)
{
#ifdef SV_SCALE_ASAN
	return (long)__sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 m = mallinfo2();

	return (long)(m.uordblks + m.hblkhd);
#endif
}

/* Whether the RSS holds freed memory by design: AddressSanitizer keeps freed blocks
 * resident in its quarantine (up to 256 MiB by default) to catch uses after free. */
#ifdef SV_SCALE_ASAN
#define RSS_HOLDS_FREED 1
#else
#define RSS_HOLDS_FREED 0
#endif

static long count_fds(void)
{
	long n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;		/* the directory's own fd */
}

static uint8_t pat(uint32_t seed, unsigned i)
{
	uint32_t x = seed * 2654435761u + i * 40503u;

	return (uint8_t)(x ^ (x >> 13) ^ (x >> 24));
}

static void fill(uint8_t *p, uint32_t seed)
{
	for (unsigned i = 0; i < SLOT; i++)
		p[i] = pat(seed, i);
}

static bool check(const uint8_t *p, uint32_t seed)
{
	for (unsigned i = 0; i < SLOT; i++)
		if (p[i] != pat(seed, i))
			return false;
	return true;
}

static uint64_t wrid(struct side *s, uint32_t slot, enum kind k)
{
	return (uint64_t)k << 56 | (uint64_t)s->c[slot].gen << 24 | slot;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p)
		die("calloc", -ENOMEM);
	return p;
}

static void side_open(struct side *s, enum sv_transport t, uint32_t cap, uint32_t mrs)
{
	struct sv_device_opts o;
	int rc, fl;

	sv_device_opts_init(&o);
	o.transport = t;
	o.max_qp = cap;
	o.max_mr = mrs + 16;
	s->ncq = (cap + CQ_QPS - 1) / CQ_QPS;
	o.max_cq = s->ncq;
	if ((rc = sv_open_device(&o, &s->ctx)) < 0)
		die("sv_open_device", rc);
	if ((rc = sv_alloc_pd(s->ctx, &s->pd)) < 0)
		die("sv_alloc_pd", rc);
	if ((rc = sv_create_comp_channel(s->ctx, &s->cch)) < 0)
		die("sv_create_comp_channel", rc);
	s->cqs = xcalloc(s->ncq, sizeof(*s->cqs));
	for (uint32_t i = 0; i < s->ncq; i++) {
		/* 3 WRs per QP at most: 4 entries each leave room. */
		if ((rc = sv_create_cq(s->ctx, 4 * CQ_QPS, NULL, s->cch, 0, &s->cqs[i])) < 0)
			die("sv_create_cq", rc);
		if ((rc = sv_req_notify_cq(s->cqs[i], 0)) < 0)
			die("sv_req_notify_cq", rc);
	}
	if ((rc = sv_cm_create_channel(&s->cm)) < 0)
		die("sv_cm_create_channel", rc);
	fl = fcntl(sv_cm_channel_fd(s->cm), F_GETFL);
	fcntl(sv_cm_channel_fd(s->cm), F_SETFL, fl | O_NONBLOCK);
	fl = fcntl(sv_comp_channel_fd(s->cch), F_GETFL);
	fcntl(sv_comp_channel_fd(s->cch), F_SETFL, fl | O_NONBLOCK);
	s->cap = cap;
	s->c = xcalloc(cap, sizeof(*s->c));
	s->wbuf = xcalloc(cap, SLOT);
	s->rbuf = xcalloc(cap, SLOT);
	s->msg = xcalloc(cap, sizeof(*s->msg));
	if ((rc = sv_reg_mr(s->pd, s->wbuf, (size_t)cap * SLOT,
			    SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE, &s->wmr)) < 0 ||
	    (rc = sv_reg_mr(s->pd, s->rbuf, (size_t)cap * SLOT, SV_ACCESS_LOCAL_WRITE,
			    &s->rmr)) < 0 ||
	    (rc = sv_reg_mr(s->pd, s->msg, (size_t)cap * sizeof(*s->msg), SV_ACCESS_LOCAL_WRITE,
			    &s->mmr)) < 0)
		die("sv_reg_mr", rc);
}

static void side_close(struct side *s)
{
	if (s->listen)
		sv_cm_destroy_id(s->listen);
	sv_cm_destroy_channel(s->cm);
	sv_dereg_mr(s->wmr);
	sv_dereg_mr(s->rmr);
	sv_dereg_mr(s->mmr);
	for (uint32_t i = 0; i < s->ncq; i++)
		sv_destroy_cq(s->cqs[i]);
	free(s->cqs);
	sv_destroy_comp_channel(s->cch);
	sv_dealloc_pd(s->pd);
	sv_close_device(s->ctx);
	free(s->c);
	free(s->wbuf);
	free(s->rbuf);
	free(s->msg);
}

static int slot_take(struct side *s)
{
	for (uint32_t n = 0; n < s->cap; n++) {
		uint32_t i = (s->free_hint + n) % s->cap;

		if (s->c[i].st == C_FREE) {
			s->free_hint = i + 1;
			return (int)i;
		}
	}
	return -1;
}

/* A QP in INIT, so receives can be posted before the connection exists. */
static int qp_make(struct side *s, uint32_t slot, struct sv_qp **qp)
{
	struct sv_cq *cq = s->cqs[slot / CQ_QPS];
	struct sv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = SV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct sv_qp_attr a = { .qp_state = SV_QPS_INIT, .port_num = 1,
				.qp_access_flags = SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE };
	int rc;

	if ((rc = sv_create_qp(s->pd, &ia, qp)) < 0)
		return rc;
	if ((rc = sv_modify_qp(*qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
			       SV_QP_ACCESS_FLAGS)) < 0) {
		sv_destroy_qp(*qp);
		*qp = NULL;
	}
	return rc;
}

static int post_recv(struct side *s, uint32_t i)
{
	struct sv_sge sge;
	struct sv_recv_wr wr = { .wr_id = wrid(s, i, K_RECV), .sg_list = &sge, .num_sge = 1 };
	struct sv_recv_wr *bad;
	int rc;

	if (s->server)
		sge = (struct sv_sge){ (uintptr_t)&s->msg[i], sizeof(s->msg[i]), s->mmr->lkey };
	else
		sge = (struct sv_sge){ (uintptr_t)(s->rbuf + (size_t)i * SLOT), SLOT,
				       s->rmr->lkey };
	if ((rc = sv_post_recv(s->c[i].qp, &wr, &bad)) == 0) {
		s->c[i].posted |= 1u << K_RECV;
		s->posted_total++;
	}
	return rc;
}

static int post_send(struct side *s, uint32_t i, enum kind k, struct sv_sge *sge,
		     uint64_t raddr, uint32_t rkey)
{
	struct sv_send_wr wr = { .wr_id = wrid(s, i, k), .sg_list = sge, .num_sge = 1,
				 .opcode = k == K_WRITE ? SV_WR_RDMA_WRITE : SV_WR_SEND,
				 .send_flags = SV_SEND_SIGNALED };
	struct sv_send_wr *bad;
	int rc;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if ((rc = sv_post_send(s->c[i].qp, &wr, &bad)) == 0) {
		s->c[i].posted |= 1u << k;
		s->posted_total++;
	}
	return rc;
}

static void conn_disconnect(struct side *s, uint32_t i)
{
	struct conn *c = &s->c[i];

	if (c->disc_asked || c->disc)
		return;
	c->disc_asked = true;
	if (sv_cm_disconnect(c->id) < 0)
		c->disc = true;	/* never up, or already down: nothing will report it */
}

/* Destroys a connection whose WRs all completed and whose CM said it is down. */
static void conn_reap(struct side *s, uint32_t i)
{
	struct conn *c = &s->c[i];
	int rc;

	if (c->st == C_FREE || !c->disc || c->posted)
		return;
	if (c->id && (rc = sv_cm_destroy_id(c->id)) < 0)
		die("sv_cm_destroy_id", rc);
	if (c->qp && (rc = sv_destroy_qp(c->qp)) < 0)
		die("sv_destroy_qp", rc);
	if (c->st == C_DONE)
		s->done++;
	*c = (struct conn){ .gen = (c->gen + 1) & 0xffffffu };
	s->live--;
}

static void on_wc(struct side *s, const struct sv_wc *wc)
{
	uint32_t i = (uint32_t)(wc->wr_id & 0xffffff);
	uint32_t gen = (uint32_t)(wc->wr_id >> 24) & 0xffffffu;
	enum kind k = (enum kind)(wc->wr_id >> 56);
	struct conn *c;

	s->completed_total++;
	if (i >= s->cap || k >= K_KINDS || s->c[i].gen != gen ||
	    !(s->c[i].posted & (1u << k))) {
		s->violations++;
		fprintf(stderr, "sv_scale[%d]: completion of a WR not outstanding (slot %u kind %d)\n",
			(int)getpid(), i, (int)k);
		return;
	}
	c = &s->c[i];
	c->posted &= (uint8_t)~(1u << k);
	if (wc->status == SV_WC_WR_FLUSH_ERR) {
		s->wc_flush++;
	} else if (wc->status != SV_WC_SUCCESS) {
		s->wc_other++;
		conn_disconnect(s, i);
	} else {
		s->wc_ok++;
		if (s->server && k == K_RECV) {
			struct sv_sge sge = { (uintptr_t)(s->rbuf + (size_t)i * SLOT), SLOT,
					      s->rmr->lkey };

			c->seed = s->msg[i];
			if (!check(s->wbuf + (size_t)i * SLOT, c->seed)) {
				s->failed++;
				fprintf(stderr, "sv_scale[%d]: slot %u: WRITE data wrong\n",
					(int)getpid(), i);
				conn_disconnect(s, i);
			} else {
				s->verified++;
				fill(s->rbuf + (size_t)i * SLOT, c->seed ^ 0xa5a5a5a5u);
				if (post_send(s, i, K_SEND, &sge, 0, 0) < 0)
					conn_disconnect(s, i);
			}
		} else if (!s->server && k == K_RECV) {
			if (check(s->rbuf + (size_t)i * SLOT, c->seed ^ 0xa5a5a5a5u)) {
				s->verified++;
				c->verified = true;
			} else {
				s->failed++;
				fprintf(stderr, "sv_scale[%d]: slot %u: echo data wrong\n",
					(int)getpid(), i);
			}
		}
		if (!s->server && c->verified && !c->posted)
			c->st = C_DONE;
		if (s->server && k == K_SEND)
			c->st = C_DONE;
	}
	conn_reap(s, i);
}

static int drain_cq(struct side *s, struct sv_cq *cq)
{
	struct sv_wc wc[64];
	int n, total = 0;

	while ((n = sv_poll_cq(cq, 64, wc)) > 0) {
		for (int j = 0; j < n; j++)
			on_wc(s, &wc[j]);
		total += n;
	}
	if (n < 0)
		die("sv_poll_cq", n);
	return total;
}

/* Client: the connection is up; WRITE the pattern, then SEND its seed. */
static void client_up(struct side *s, uint32_t i, const struct sv_cm_event *ev)
{
	struct conn *c = &s->c[i];
	struct accept_pd a;
	struct sv_sge wsge = { (uintptr_t)(s->wbuf + (size_t)i * SLOT), SLOT, s->wmr->lkey };
	struct sv_sge msge = { (uintptr_t)&s->msg[i], sizeof(s->msg[i]), s->mmr->lkey };

	if (ev->param.private_data_len < sizeof(a)) {
		s->failed++;
		conn_disconnect(s, i);
		return;
	}
	memcpy(&a, ev->param.private_data, sizeof(a));
	if (a.magic != MAGIC) {
		s->failed++;
		conn_disconnect(s, i);
		return;
	}
	if (getrandom(&c->seed, sizeof(c->seed), 0) != sizeof(c->seed))
		c->seed = (uint32_t)now_ms() * 2654435761u + i;
	fill(s->wbuf + (size_t)i * SLOT, c->seed);
	s->msg[i] = c->seed;
	if (post_send(s, i, K_WRITE, &wsge, a.addr, a.rkey) < 0 ||
	    post_send(s, i, K_SEND, &msge, 0, 0) < 0)
		conn_disconnect(s, i);
}

static void server_request(struct side *s, struct sv_cm_event *ev)
{
	struct sv_cm_id *id = ev->id;
	struct accept_pd a = { .magic = MAGIC };
	struct sv_conn_param p = { .private_data = &a, .private_data_len = sizeof(a),
				   .retry_count = 7, .rnr_retry_count = 7 };
	int i = stop_flag ? -1 : slot_take(s);
	struct conn *c;
	int rc;

	if (i < 0 || (rc = qp_make(s, (uint32_t)i, &s->c[i].qp)) < 0) {
		sv_cm_reject(id, NULL, 0);
		sv_cm_ack_event(ev);
		sv_cm_destroy_id(id);
		s->failed++;
		return;
	}
	c = &s->c[i];
	c->id = id;
	c->st = C_CONNECTING;
	c->up_ms = now_ms();	/* a peer killed before its RTU is closed by --idle-ms too */
	id->user_context = c;
	s->live++;
	a.slot = (uint32_t)i;
	a.addr = (uintptr_t)(s->wbuf + (size_t)i * SLOT);
	a.rkey = s->wmr->rkey;
	memset(s->wbuf + (size_t)i * SLOT, 0, SLOT);
	sv_cm_ack_event(ev);
	if (post_recv(s, (uint32_t)i) < 0 || (rc = sv_cm_accept(id, c->qp, &p)) < 0) {
		s->failed++;
		sv_cm_destroy_id(id);
		c->id = NULL;
		sv_modify_qp(c->qp, &(struct sv_qp_attr){ .qp_state = SV_QPS_ERR }, SV_QP_STATE);
		c->disc = true;	/* the flushed receive completes, then conn_reap */
	}
}

static void drain_cm(struct side *s)
{
	struct sv_cm_event *ev;
	int rc;

	while ((rc = sv_cm_get_event(s->cm, &ev)) == 0) {
		struct conn *c = ev->id ? ev->id->user_context : NULL;
		uint32_t i = c ? (uint32_t)(c - s->c) : 0;

		if (ev->event == SV_CM_EVENT_CONNECT_REQUEST) {
			server_request(s, ev);
			continue;
		}
		if (!c) {
			sv_cm_ack_event(ev);
			continue;
		}
		switch (ev->event) {
		case SV_CM_EVENT_ESTABLISHED:
			c->st = C_UP;
			if (!s->server)
				c->up_ms = now_ms();
			s->established++;
			if (!s->server)
				client_up(s, i, ev);
			break;
		case SV_CM_EVENT_DISCONNECTED:
			if (!s->server && !c->verified && c->st != C_DONE) {
				s->failed++;
				fprintf(stderr, "sv_scale[%d]: slot %u: disconnected before its data "
					"was verified\n", (int)getpid(), i);
			}
			c->disc = true;
			break;
		case SV_CM_EVENT_TIMEWAIT_EXIT:
			break;
		default:	/* REJECTED, UNREACHABLE, CONNECT_ERROR */
			if (c->st == C_CONNECTING) {
				s->failed++;
				fprintf(stderr, "sv_scale[%d]: slot %u: %s (%s)\n", (int)getpid(), i,
					sv_cm_event_str(ev->event), sv_strerror(ev->status));
				sv_modify_qp(c->qp, &(struct sv_qp_attr){ .qp_state = SV_QPS_ERR },
					     SV_QP_STATE);
			}
			c->disc = true;
			break;
		}
		sv_cm_ack_event(ev);
		conn_reap(s, i);
	}
	if (rc != -EAGAIN)
		die("sv_cm_get_event", rc);
}

/* One round of waiting: CM events, CQ events, both channels, at most ms. */
static void pump(struct side *s, int ms)
{
	struct pollfd pf[2] = { { .fd = sv_cm_channel_fd(s->cm), .events = POLLIN },
				{ .fd = sv_comp_channel_fd(s->cch), .events = POLLIN } };
	struct sv_cq *cq;
	void *ctx;

	poll(pf, 2, ms);
	while (sv_get_cq_event(s->cch, &cq, &ctx) == 0) {
		sv_ack_cq_events(cq, 1);
		drain_cq(s, cq);
		sv_req_notify_cq(cq, 0);
		drain_cq(s, cq);	/* what arrived before the arming */
	}
	drain_cm(s);
}

static int client_connect(struct side *s, const struct sockaddr_in *dst)
{
	struct sv_conn_param p = { .retry_count = 7, .rnr_retry_count = 7 };
	int i = slot_take(s), rc;
	struct conn *c;

	if (i < 0)
		return -ENOSPC;
	c = &s->c[i];
	if ((rc = qp_make(s, (uint32_t)i, &c->qp)) < 0)
		return rc;
	if ((rc = sv_cm_create_id(s->cm, s->ctx, c, &c->id)) < 0) {
		sv_destroy_qp(c->qp);
		c->qp = NULL;
		return rc;
	}
	c->st = C_CONNECTING;
	s->live++;
	if ((rc = post_recv(s, (uint32_t)i)) < 0 ||
	    (rc = sv_cm_connect(c->id, c->qp, (const struct sockaddr *)dst, &p)) < 0) {
		sv_modify_qp(c->qp, &(struct sv_qp_attr){ .qp_state = SV_QPS_ERR }, SV_QP_STATE);
		c->disc = true;
		return rc;
	}
	return 0;
}

static void report(const char *who, struct side *s)
{
	printf("%s_fds=%ld\n%s_threads=%ld\n%s_rss_kB=%ld\n", who, count_fds(), who,
	       status_kb("Threads"), who, status_kb("VmRSS"));
	printf("%s_established=%llu\n%s_verified=%llu\n%s_failed=%llu\n"
	       "%s_wc_success=%llu\n%s_wc_flush=%llu\n%s_wc_other=%llu\n%s_violations=%llu\n"
	       "%s_posted=%llu\n%s_completed=%llu\n",
	       who, (unsigned long long)s->established, who, (unsigned long long)s->verified,
	       who, (unsigned long long)s->failed, who, (unsigned long long)s->wc_ok,
	       who, (unsigned long long)s->wc_flush, who, (unsigned long long)s->wc_other,
	       who, (unsigned long long)s->violations, who, (unsigned long long)s->posted_total,
	       who, (unsigned long long)s->completed_total);
	fflush(stdout);
}

/* Disconnects every live connection and waits (bounded) until all are reaped. */
static void close_all(struct side *s, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	for (uint32_t i = 0; i < s->cap; i++)
		if (s->c[i].st != C_FREE)
			conn_disconnect(s, i);
	while (s->live && now_ms() < end) {
		pump(s, 10);
		for (uint32_t i = 0; i < s->cap; i++)
			conn_reap(s, i);
	}
}

struct args {
	enum sv_transport t;
	uint32_t qps;
	int port;		/* --connect */
	bool serve;
	int seconds;		/* --connect: repeat rounds this long */
	int idle_ms;		/* --serve: close connections idle this long */
	int timeout;
	uint32_t mrs;		/* MRs registered for rss_per_mr_B; 0: qps */
};

static int serve(const struct args *a, int port_fd)
{
	struct side s = { .server = true };
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage ss;
	uint64_t next_idle_check = 0, next_sample = 0;
	long peak_fds = 0, peak_threads = 0;
	int rc;

	side_open(&s, a->t, a->qps, a->qps);
	if ((rc = sv_cm_create_id(s.cm, s.ctx, NULL, &s.listen)) < 0 ||
	    (rc = sv_cm_listen(s.listen, (struct sockaddr *)&sin, 1024)) < 0 ||
	    (rc = sv_cm_local_addr(s.listen, &ss)) < 0)
		die("listen", rc);
	dprintf(port_fd, "port %u\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	if (port_fd != 1)
		close(port_fd);
	while (!stop_flag) {
		pump(&s, 20);
		if (a->idle_ms && now_ms() >= next_idle_check) {
			uint64_t t = now_ms();

			for (uint32_t i = 0; i < s.cap; i++)
				if (s.c[i].st != C_FREE && s.c[i].up_ms &&
				    t - s.c[i].up_ms > (uint64_t)a->idle_ms)
					conn_disconnect(&s, i);
			next_idle_check = t + 200;
		}
		if (now_ms() >= next_sample) {
			long f = count_fds(), t = status_kb("Threads");

			peak_fds = f > peak_fds ? f : peak_fds;
			peak_threads = t > peak_threads ? t : peak_threads;
			next_sample = now_ms() + 1000;
		}
		if (idle_asked == 1 && s.live) {
			/* Said once per request while connections remain: which ones. */
			unsigned st[4] = { 0 }, asked = 0, disc = 0, posted = 0;

			for (uint32_t i = 0; i < s.cap; i++) {
				st[s.c[i].st]++;
				asked += s.c[i].disc_asked;
				disc += s.c[i].disc;
				posted += s.c[i].posted != 0;
			}
			fprintf(stderr, "sv_scale[%d]: waiting for %u connections: %u connecting, "
				"%u up, %u done; %u asked to disconnect, %u disconnected, %u with "
				"WRs outstanding\n", (int)getpid(), s.live, st[C_CONNECTING], st[C_UP],
				st[C_DONE], asked, disc, posted);
			idle_asked = 2;
		}
		if (s.live == 0 && idle_asked) {
			idle_asked = 0;
			/* RSS of what is live: the allocator gives its free pages back first,
			 * or the reading is the high-water mark of the busiest moment. */
			malloc_trim(0);
			printf("idle rss_kB=%ld heap_B=%ld fds=%ld done=%llu rss_holds_freed=%d\n",
			       status_kb("VmRSS"), heap_bytes(), count_fds(),
			       (unsigned long long)s.done, RSS_HOLDS_FREED);
			fflush(stdout);
		}
	}
	close_all(&s, 10000);
	printf("server_live_at_exit=%u\nserver_peak_fds=%ld\nserver_peak_threads=%ld\n", s.live,
	       peak_fds, peak_threads);
	report("server", &s);
	rc = s.violations || s.live ? 1 : 0;
	side_close(&s);
	return rc;
}

/* Connects n QPs (WINDOW at a time), then waits until every one is verified or failed. */
static int client_round(struct side *s, const struct sockaddr_in *dst, uint32_t n,
			double *conn_s, double *data_s)
{
	uint64_t t0 = now_ms(), t1, t2;
	uint32_t started = 0;
	uint64_t base_est = s->established, base_ver = s->verified, base_fail = s->failed;

	while (s->established - base_est + s->failed - base_fail < n) {
		while (started < n && started - (s->established - base_est) -
					      (s->failed - base_fail) < WINDOW) {
			int rc = client_connect(s, dst);

			if (rc < 0) {
				fprintf(stderr, "sv_scale[%d]: connect %u: %s\n", (int)getpid(),
					started, sv_strerror(rc));
				s->failed++;
			}
			started++;
		}
		pump(s, 5);
		if (stop_flag)
			return -EINTR;
	}
	t1 = now_ms();
	while (s->verified - base_ver + s->failed - base_fail < n && !stop_flag)
		pump(s, 5);
	t2 = now_ms();
	*conn_s = (double)(t1 - t0) / 1000.0;
	*data_s = (double)(t2 - t1) / 1000.0;
	return s->failed == base_fail ? 0 : -EIO;
}

static int client(const struct args *a, int port)
{
	struct side s = { .server = false };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	long rss0, rss1, rss2, rss3, heap0, heap1;
	double cs, ds;
	uint64_t t;
	int rc;

	side_open(&s, a->t, a->qps, a->mrs > a->qps ? a->mrs : a->qps);
	/* Touch the buffers first, so the deltas below are the QPs' own. */
	memset(s.wbuf, 0, (size_t)s.cap * SLOT);
	memset(s.rbuf, 0, (size_t)s.cap * SLOT);
	if (a->seconds) {
		uint64_t end = now_ms() + (uint64_t)a->seconds * 1000;
		unsigned rounds = 0;

		rc = 0;
		while (now_ms() < end && !stop_flag && rc == 0) {
			rc = client_round(&s, &dst, a->qps, &cs, &ds);
			close_all(&s, 10000);
			if (s.live)
				rc = -ETIMEDOUT;
			rounds++;
		}
		printf("client_rounds=%u\n", rounds);
		report("client", &s);
		rc = rc || s.violations || s.live ? 1 : 0;
		side_close(&s);
		return rc;
	}
	{
		/* MRs: one page each, the pages touched before the first RSS reading. */
		size_t pg = (size_t)sysconf(_SC_PAGESIZE);
		uint32_t nmr = a->mrs ? a->mrs : a->qps;
		uint8_t *b = aligned_alloc(pg, (size_t)nmr * pg);
		struct sv_mr **m = xcalloc(nmr, sizeof(*m));
		uint32_t got = 0;

		if (!b)
			die("aligned_alloc", -ENOMEM);
		memset(b, 1, (size_t)nmr * pg);
		rss2 = status_kb("VmRSS");
		heap0 = heap_bytes();
		for (; got < nmr; got++)
			if ((rc = sv_reg_mr(s.pd, b + (size_t)got * pg, pg, SV_ACCESS_LOCAL_WRITE |
					    SV_ACCESS_REMOTE_WRITE, &m[got])) < 0) {
				fprintf(stderr, "sv_scale: sv_reg_mr %u: %s\n", got, sv_strerror(rc));
				break;
			}
		rss3 = status_kb("VmRSS");
		heap1 = heap_bytes();
		printf("mrs=%u\nrss_per_mr_B=%.0f\nheap_per_mr_B=%.0f\n", got,
		       got ? (double)(rss3 - rss2) * 1024.0 / got : 0,
		       got ? (double)(heap1 - heap0) / got : 0);
		for (uint32_t i = 0; i < got; i++)
			sv_dereg_mr(m[i]);
		free(m);
		free(b);
	}
	rss0 = status_kb("VmRSS");
	heap0 = heap_bytes();
	rc = client_round(&s, &dst, a->qps, &cs, &ds);
	rss1 = status_kb("VmRSS");
	heap1 = heap_bytes();
	printf("transport=%s\nqps=%u\n", a->t == SV_TRANSPORT_UDP ? "udp" : "tcp", a->qps);
	printf("connect_s=%.3f\nconn_per_s=%.0f\ndata_s=%.3f\n", cs, a->qps / cs, ds);
	printf("rss_before_kB=%ld\nrss_connected_kB=%ld\nrss_per_qp_B=%.0f\nheap_per_qp_B=%.0f\n",
	       rss0, rss1, (double)(rss1 - rss0) * 1024.0 / a->qps,
	       (double)(heap1 - heap0) / a->qps);
	report("client", &s);
	t = now_ms();
	close_all(&s, 60000);
	printf("teardown_s=%.3f\nclient_live_after_teardown=%u\n", (double)(now_ms() - t) / 1000.0,
	       s.live);
	{
		/* Created in INIT, not connected: what core and the transport allocate. After
		 * the teardown, so pages the connections touched may serve again: RSS is a
		 * lower bound here, the allocator's figure is not. */
		struct sv_qp **q = xcalloc(a->qps, sizeof(*q));

		rss0 = status_kb("VmRSS");
		heap0 = heap_bytes();
		for (uint32_t i = 0; i < a->qps; i++)
			if ((rc = qp_make(&s, i, &q[i])) < 0)
				die("sv_create_qp", rc);
		rss1 = status_kb("VmRSS");
		heap1 = heap_bytes();
		printf("rss_per_qp_created_B=%.0f\nheap_per_qp_created_B=%.0f\n",
		       (double)(rss1 - rss0) * 1024.0 / a->qps, (double)(heap1 - heap0) / a->qps);
		for (uint32_t i = 0; i < a->qps; i++)
			if ((rc = sv_destroy_qp(q[i])) < 0)
				die("sv_destroy_qp", rc);
		free(q);
	}
	rc = s.failed || s.violations || s.live || s.verified != a->qps ? 1 : 0;
	side_close(&s);
	fflush(stdout);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: sv_scale [--qps N] [--mrs M] [--transport tcp|udp] [--timeout S]\n"
			"       sv_scale --serve [--qps CAP] [--idle-ms M] ...\n"
			"       sv_scale --connect PORT [--qps K] [--seconds S] ...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct args a = { .t = SV_TRANSPORT_TCP, .qps = 1000, .timeout = 600 };
	int pfd[2], status = 0, rc, port = 0;
	char line[64];
	pid_t srv;
	FILE *f;

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--serve")) {
			a.serve = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(o, "--qps"))
			a.qps = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(o, "--transport") && (!strcmp(v, "tcp") || !strcmp(v, "udp")))
			a.t = !strcmp(v, "udp") ? SV_TRANSPORT_UDP : SV_TRANSPORT_TCP;
		else if (!strcmp(o, "--timeout"))
			a.timeout = atoi(v);
		else if (!strcmp(o, "--connect"))
			a.port = atoi(v);
		else if (!strcmp(o, "--seconds"))
			a.seconds = atoi(v);
		else if (!strcmp(o, "--mrs"))
			a.mrs = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(o, "--idle-ms"))
			a.idle_ms = atoi(v);
		else
			usage();
	}
	if (a.qps == 0 || a.qps > (1u << 20))
		usage();
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	signal(SIGUSR1, on_usr1);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)a.timeout);
	if (a.serve)
		return serve(&a, 1);
	if (a.port)
		return client(&a, a.port);
	if (pipe(pfd) < 0 || (srv = fork()) < 0)
		return 1;
	if (srv == 0) {
		close(pfd[0]);
		if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0)	/* the child's figures on stderr */
			_exit(1);
		_exit(serve(&a, pfd[1]));
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || sscanf(line, "port %d", &port) != 1) {
		fprintf(stderr, "sv_scale: the server did not start\n");
		waitpid(srv, NULL, 0);
		return 1;
	}
	fclose(f);
	rc = client(&a, port);
	kill(srv, SIGTERM);
	if (waitpid(srv, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		rc = 1;
	return rc;
}
