/*
 * roce_util.c — see roce_util.h.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "../port_pick.h"
#include "roce_util.h"

long ru_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint32_t ru_crc(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32(0, p, (uInt)n);
}

/* Whether port is free on the loopback address of family for a socket of type. */
static bool loopback_port_free(int family, int type, uint16_t port)
{
	struct sockaddr_storage ss = { .ss_family = (sa_family_t)family };
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	socklen_t l = family == AF_INET6 ? sizeof(*a6) : sizeof(*a4);
	int fd = socket(family, type, 0);
	bool ok;

	cr_assert(fd >= 0);
	if (family == AF_INET6) {
		a6->sin6_addr = in6addr_loopback;
		a6->sin6_port = htons(port);
	} else {
		a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a4->sin_port = htons(port);
	}
	ok = bind(fd, (struct sockaddr *)&ss, l) == 0;
	close(fd);
	return ok;
}

/* A device's UDP port is also its key exchange's TCP port (wire/roce_kx.c), so both must
 * be free, and below the ephemeral range (test/port_pick.h): a concurrent test's key
 * exchange client could take an ephemeral pick from port 0. */
uint16_t ru_free_port(int family)
{
	static unsigned seq;
	int eph_lo, eph_hi;
	unsigned start = port_pick_start(seq++, &eph_lo, &eph_hi);

	for (unsigned i = 0; i < PORT_PICK_SPAN; i++) {
		int port = port_pick_candidate(start, i, eph_lo, eph_hi);

		if (port && loopback_port_free(family, SOCK_DGRAM, (uint16_t)port) &&
		    loopback_port_free(family, SOCK_STREAM, (uint16_t)port))
			return (uint16_t)port;
	}
	cr_assert_fail("no port free for UDP and TCP in %d..%d", PORT_PICK_LO, PORT_PICK_HI);
	return 0;
}

bool ru_have_ipv6_loopback(void)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);
	bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

void ru_open(struct rside *s, int retx, const char *impair, size_t buflen, uint32_t depth)
{
	ru_open_at(s, "127.0.0.1", retx, impair, buflen, depth);
}

static bool tls_on;
static char tls_ca[256];

void ru_set_tls(bool on)
{
	tls_on = on;
}

void ru_set_tls_ca(const char *path)
{
	snprintf(tls_ca, sizeof(tls_ca), "%s", path ? path : "");
}

uint16_t ru_open_device(struct sv_context **ctx, const char *bind_addr, uint16_t port,
			int retx, const char *impair)
{
	struct sv_device_opts o;
	char err[256];
	int rc = -1;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_UDP;
	if (tls_on) {
		cr_assert_eq(sv_tls_throwaway(&o, err, sizeof(err)), 0, "%s", err);
		if (tls_ca[0])
			snprintf(o.tls_ca, sizeof(o.tls_ca), "%s", tls_ca);
	}
	snprintf(o.bind_addr, sizeof(o.bind_addr), "%s", bind_addr);
	if (retx >= 0)
		o.retx = retx;
	if (impair)
		snprintf(o.impair, sizeof(o.impair), "%s", impair);
	/* Retry with another port if a concurrent test took ours in between. */
	for (int i = 0; i < 5 && rc < 0; i++) {
		o.port = port ? port : ru_free_port(strchr(bind_addr, ':') ? AF_INET6 : AF_INET);
		rc = sv_open_device(&o, ctx);
		if (port)
			break;
	}
	cr_assert_eq(rc, 0, "open [%s]:%u: %s", bind_addr, o.port, sv_strerror(rc));
	return o.port;
}

void ru_open_at(struct rside *s, const char *bind_addr, int retx, const char *impair,
		size_t buflen, uint32_t depth)
{
	ru_open_port(s, bind_addr, 0, retx, impair, buflen, depth);
}

struct sv_qp *ru_rc_qp(struct sv_pd *pd, struct sv_cq *cq, uint32_t depth)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp *qp;

	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = SV_QPT_RC;
	ia.cap.max_send_wr = depth;
	ia.cap.max_recv_wr = depth;
	ia.cap.max_send_sge = 16;
	ia.cap.max_recv_sge = 16;
	ia.cap.max_inline_data = 64;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	return qp;
}

void ru_open_port(struct rside *s, const char *bind_addr, uint16_t port, int retx,
		  const char *impair, size_t buflen, uint32_t depth)
{
	memset(s, 0, sizeof(*s));
	s->port = ru_open_device(&s->ctx, bind_addr, port, retx, impair);
	cr_assert_eq(sv_query_gid(s->ctx, 1, 0, s->gid), 0);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, (int)(2 * depth), NULL, NULL, 0, &s->cq), 0);
	s->qp = ru_rc_qp(s->pd, s->cq, depth);
	s->len = buflen;
	s->buf = aligned_alloc(4096, (buflen + 4095) & ~(size_t)4095);
	cr_assert(s->buf);
	memset(s->buf, 0, buflen);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, buflen, SV_ACCESS_LOCAL_WRITE |
			       SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ |
			       SV_ACCESS_REMOTE_ATOMIC, &s->mr), 0);
	s->psn = (uint32_t)rand() & 0xffffff;
}

void ru_qp_to_rts(struct sv_qp *qp, unsigned access, const struct rpeer *peer,
		  uint32_t sq_psn, const struct rlink *l)
{
	struct sv_qp_attr a;
	int rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	a.qp_access_flags = access;
	a.port_num = 1;
	cr_assert_eq(sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTR;
	memcpy(a.ah_attr.dgid, peer->gid, 16);
	a.ah_attr.dport = peer->port;
	a.ah_attr.port_num = 1;
	a.path_mtu = l->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = l->rd_atomic;
	a.min_rnr_timer = l->min_rnr_timer;
	rc = sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_AV | SV_QP_PATH_MTU | SV_QP_DEST_QPN |
			  SV_QP_RQ_PSN | SV_QP_MAX_DEST_RD_ATOMIC | SV_QP_MIN_RNR_TIMER);
	cr_assert_eq(rc, 0, "RTR: %s", sv_strerror(rc));
	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = l->timeout;
	a.retry_cnt = l->retry_cnt;
	a.rnr_retry = l->rnr_retry;
	a.max_rd_atomic = l->rd_atomic;
	rc = sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_SQ_PSN | SV_QP_TIMEOUT |
			  SV_QP_RETRY_CNT | SV_QP_RNR_RETRY | SV_QP_MAX_QP_RD_ATOMIC);
	cr_assert_eq(rc, 0, "RTS: %s", sv_strerror(rc));
}

static bool tls_devices(void)
{
	const char *e = getenv("SV_TLS");

	return tls_on || (e && strtoul(e, NULL, 0) != 0);
}

void ru_to_rts(struct rside *s, struct rside *peer, const struct rlink *l)
{
	struct rpeer p = { peer->gid, peer->port, peer->qp->qp_num, peer->psn };

	if (tls_devices() && s->keyed != s->qp)
		ru_aead(s, peer, SV_AEAD_AES_128_GCM);

	ru_qp_to_rts(s->qp, SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE |
		     SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC, &p, s->psn, l);
}

void ru_aead(struct rside *a, struct rside *b, enum sv_aead_alg alg)
{
	struct sv_aead_keys ka;

	ru_aead_keys(a, b, alg, &ka);
}

void ru_aead_keys(struct rside *a, struct rside *b, enum sv_aead_alg alg,
		  struct sv_aead_keys *out)
{
	struct sv_aead_keys ka = { .alg = alg }, kb = { .alg = alg };

	cr_assert_eq(getrandom(ka.tx_key, sizeof(ka.tx_key), 0), (ssize_t)sizeof(ka.tx_key));
	cr_assert_eq(getrandom(ka.rx_key, sizeof(ka.rx_key), 0), (ssize_t)sizeof(ka.rx_key));
	cr_assert_eq(getrandom(ka.tx_salt, sizeof(ka.tx_salt), 0), (ssize_t)sizeof(ka.tx_salt));
	cr_assert_eq(getrandom(ka.rx_salt, sizeof(ka.rx_salt), 0), (ssize_t)sizeof(ka.rx_salt));
	memcpy(kb.rx_key, ka.tx_key, sizeof(kb.rx_key));
	memcpy(kb.tx_key, ka.rx_key, sizeof(kb.tx_key));
	memcpy(kb.rx_salt, ka.tx_salt, sizeof(kb.rx_salt));
	memcpy(kb.tx_salt, ka.rx_salt, sizeof(kb.tx_salt));
	cr_assert_eq(sv_qp_aead_spi(b->qp, &ka.tx_spi), 0);
	cr_assert_eq(sv_qp_aead_spi(a->qp, &kb.tx_spi), 0);
	cr_assert_neq(ka.tx_spi, 0);
	cr_assert_eq(sv_qp_set_aead(a->qp, &ka), 0);
	cr_assert_eq(sv_qp_set_aead(b->qp, &kb), 0);
	a->keyed = a->qp;
	b->keyed = b->qp;
	*out = ka;
}

void ru_connect(struct rside *a, struct rside *b, const struct rlink *l)
{
	ru_to_rts(a, b, l);
	ru_to_rts(b, a, l);
}

void ru_wait(struct rside *s, struct sv_wc *wc, long timeout_ms)
{
	long end = ru_now_ms() + timeout_ms;

	for (;;) {
		int n = sv_poll_cq(s->cq, 1, wc);

		cr_assert(n >= 0);
		if (n == 1)
			return;
		cr_assert(ru_now_ms() < end, "no completion within %ld ms", timeout_ms);
		usleep(50);
	}
}

void ru_quiet(struct rside *s, long ms)
{
	long end = ru_now_ms() + ms;
	struct sv_wc wc;

	while (ru_now_ms() < end) {
		cr_assert_eq(sv_poll_cq(s->cq, 1, &wc), 0, "unexpected completion wr_id %lu %s",
			     (unsigned long)wc.wr_id, sv_wc_status_str(wc.status));
		usleep(200);
	}
}

void ru_close_dev(struct sv_context *ctx, struct sv_pd *pd, struct sv_cq *cq,
		  struct sv_qp *qp, struct sv_mr *mr, uint8_t *buf)
{
	if (qp)
		cr_assert_eq(sv_destroy_qp(qp), 0);
	if (mr)
		cr_assert_eq(sv_dereg_mr(mr), 0);
	cr_assert_eq(sv_destroy_cq(cq), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
	free(buf);
}

void ru_close(struct rside *s)
{
	if (!s->ctx)
		return;
	ru_close_dev(s->ctx, s->pd, s->cq, s->qp, s->mr, s->buf);
	memset(s, 0, sizeof(*s));
}

struct sv_qp *ru_ud_qp(struct sv_pd *pd, struct sv_cq *cq, uint32_t qkey, uint32_t psn)
{
	struct sv_qp_init_attr ia = { 0 };
	struct sv_qp_attr at;
	struct sv_qp *qp;

	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = SV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
	memset(&at, 0, sizeof(at));
	at.qp_state = SV_QPS_INIT;
	at.port_num = 1;
	at.qkey = qkey;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				  SV_QP_QKEY), 0);
	at.qp_state = SV_QPS_RTR;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE), 0);
	at.qp_state = SV_QPS_RTS;
	at.sq_psn = psn;
	cr_assert_eq(sv_modify_qp(qp, &at, SV_QP_STATE | SV_QP_SQ_PSN), 0);
	return qp;
}

void ru_cm_open(struct cmside *s, uint16_t port, int retx, const char *impair,
		enum sv_qp_type qpt, enum sv_cm_port_space ps, size_t buflen, unsigned access)
{
	struct sv_qp_init_attr ia = { 0 };

	memset(s, 0, sizeof(*s));
	ru_open_device(&s->ctx, "", port, retx, impair);	/* "": 127.0.0.1, .2, ... */
	cr_assert_eq(sv_query_gid(s->ctx, 1, 0, s->gid), 0);
	memcpy(&s->ip, s->gid + 12, 4);
	cr_assert_eq(sv_alloc_pd(s->ctx, &s->pd), 0);
	cr_assert_eq(sv_create_cq(s->ctx, 64, NULL, NULL, 0, &s->cq), 0);
	if (qpt == SV_QPT_UD) {
		s->qp = ru_ud_qp(s->pd, s->cq, SV_CM_UDP_QKEY, 0);
	} else {
		ia.send_cq = ia.recv_cq = s->cq;
		ia.qp_type = qpt;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 2;
		cr_assert_eq(sv_create_qp(s->pd, &ia, &s->qp), 0);
	}
	s->buf = aligned_alloc(4096, (buflen + 4095) & ~(size_t)4095);
	cr_assert(s->buf);
	memset(s->buf, 0, buflen);
	cr_assert_eq(sv_reg_mr(s->pd, s->buf, buflen, access, &s->mr), 0);
	cr_assert_eq(sv_cm_create_channel(&s->ch), 0);
	cr_assert_eq(sv_cm_create_id_ps(s->ch, s->ctx, s, ps, &s->id), 0);
}

void ru_cm_close(struct cmside *s)
{
	if (!s->ctx)
		return;
	if (s->conn)
		cr_assert_eq(sv_cm_destroy_id(s->conn), 0);
	cr_assert_eq(sv_cm_destroy_id(s->id), 0);
	cr_assert_eq(sv_cm_destroy_channel(s->ch), 0);
	ru_close_dev(s->ctx, s->pd, s->cq, s->qp, s->mr, s->buf);
	memset(s, 0, sizeof(*s));
}

struct sv_cm_event *ru_cm_event(struct sv_cm_channel *ch, enum sv_cm_event_type want, int ms)
{
	struct pollfd p = { .fd = sv_cm_channel_fd(ch), .events = POLLIN };
	struct sv_cm_event *ev;

	cr_assert_eq(poll(&p, 1, ms), 1, "no CM event (wanted %s) within %d ms",
		     sv_cm_event_str(want), ms);
	cr_assert_eq(sv_cm_get_event(ch, &ev), 0);
	cr_assert_eq(ev->event, want, "got %s, wanted %s", sv_cm_event_str(ev->event),
		     sv_cm_event_str(want));
	return ev;
}

void ru_cm_expect(struct sv_cm_channel *ch, enum sv_cm_event_type want, int status, int ms)
{
	struct sv_cm_event *ev = ru_cm_event(ch, want, ms);

	cr_assert_eq(ev->status, status, "%s with status %d, wanted %d", sv_cm_event_str(want),
		     ev->status, status);
	cr_assert_eq(sv_cm_ack_event(ev), 0);
}

static void *spin_poll(void *arg)
{
	struct ru_spinner *s = arg;
	struct sv_wc wc;

	while (!atomic_load(&s->stop)) {
		int n = sv_poll_cq(s->cq, 1, &wc);

		if (n != 0) {
			s->err = n < 0 ? n : 1;
			break;
		}
		atomic_fetch_add(&s->polls, 1);
	}
	atomic_store(&s->ended, true);
	return NULL;
}

void ru_spinner_start(struct ru_spinner *s, struct sv_cq *cq)
{
	long end = ru_now_ms() + RU_SPIN_START_MS;

	s->cq = cq;
	s->err = 0;
	atomic_init(&s->stop, false);
	atomic_init(&s->ended, false);
	atomic_init(&s->polls, 0);
	cr_assert_eq(pthread_create(&s->t, NULL, spin_poll, s), 0);
	/* The traffic starts only once the spinner spins: on a loaded machine a new thread
	 * may wait for a CPU longer than the whole exchange takes. */
	while (atomic_load(&s->polls) == 0 && !atomic_load(&s->ended)) {
		cr_assert_lt(ru_now_ms(), end, "the polling thread never polled");
		usleep(1000);
	}
}

void ru_spinner_stop(struct ru_spinner *s)
{
	atomic_store(&s->stop, true);
	pthread_join(s->t, NULL);
	cr_assert_eq(s->err, 0, "the spinner's CQ returned %d", s->err);
	cr_assert_gt(atomic_load(&s->polls), 0);
}
