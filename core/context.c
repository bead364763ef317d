/*
 * context.c — device contexts: options (defaults, then SV_* environment overrides),
 * open/close with the progress thread and the transport's per-context state, and the
 * device and port queries.
 *
 * The limits reported by sv_query_device() are the ones the code enforces (QP caps at
 * create, SGE counts and inline sizes at post, key table size), so an application that
 * sizes itself from them never meets a surprise -EINVAL.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/internal.h"
#include "nic/nic.h"
#include "wire/pcap.h"

static void env_str(const char *name, char *dst, size_t len)
{
	const char *v = getenv(name);

	if (v && *v)
		snprintf(dst, len, "%s", v);
}

static bool env_ulong(const char *name, unsigned long *out)
{
	const char *v = getenv(name);
	char *end;

	if (!v || !*v)
		return false;
	errno = 0;
	*out = strtoul(v, &end, 0);
	if (errno || *end) {
		sv__log(SV_LOG_WARN, "softverbs: ignoring %s=%s (not a number)", name, v);
		return false;
	}
	return true;
}

/* The UDP transport's variables: SV_IMPAIR (checked when the device opens), SV_RETX. */
static void env_udp(struct sv_device_opts *opts)
{
	const char *r = getenv("SV_RETX");

	env_str("SV_IMPAIR", opts->impair, sizeof(opts->impair));
	if (r && !strcasecmp(r, "sr"))
		opts->retx = SV_RETX_SR;
	else if (r && *r && strcasecmp(r, "gbn"))
		sv__log(SV_LOG_WARN, "softverbs: unknown SV_RETX=%s, using gbn", r);
}

/* TLS, both transports (doc/security.md "TLS"). MPA CRC is off under TLS unless SV_CRC
 * asks for it: the record AEAD already protects every byte the CRC would cover. */
static void env_tls(struct sv_device_opts *opts)
{
	const char *crc = getenv("SV_CRC");
	unsigned long v;

	if (env_ulong("SV_TLS", &v))
		opts->tls = v != 0;
	if (env_ulong("SV_TLS_MUTUAL", &v))
		opts->tls_mutual = v != 0;
	env_str("SV_TLS_CERT", opts->tls_cert, sizeof(opts->tls_cert));
	env_str("SV_TLS_KEY", opts->tls_key, sizeof(opts->tls_key));
	env_str("SV_TLS_CA", opts->tls_ca, sizeof(opts->tls_ca));
	env_str("SV_TLS_PEER", opts->tls_peer, sizeof(opts->tls_peer));
	env_str("SV_PCAP", opts->pcap, sizeof(opts->pcap));
	if (opts->tls && (!crc || !*crc))
		opts->crc = 0;
}

void sv_device_opts_init(struct sv_device_opts *opts)
{
	const char *t = getenv("SV_TRANSPORT");
	unsigned long v;

	memset(opts, 0, sizeof(*opts));
	opts->transport = SV_TRANSPORT_TCP;
	snprintf(opts->bind_addr, sizeof(opts->bind_addr), "0.0.0.0");
	opts->crc = 1;

	if (t && !strcasecmp(t, "udp"))
		opts->transport = SV_TRANSPORT_UDP;
	else if (t && !strcasecmp(t, "nic"))
		opts->transport = SV_TRANSPORT_NIC;
	else if (t && *t && strcasecmp(t, "tcp"))
		sv__log(SV_LOG_WARN, "softverbs: unknown SV_TRANSPORT=%s, using tcp", t);
	env_str("SV_BIND_ADDR", opts->bind_addr, sizeof(opts->bind_addr));
	env_str("SV_DEVICE", opts->device, sizeof(opts->device));
	if (env_ulong("SV_PORT", &v) && v <= 65535)
		opts->port = (uint16_t)v;
	if (env_ulong("SV_CRC", &v))
		opts->crc = v != 0;
	if (env_ulong("SV_MARKERS", &v))
		opts->markers = v != 0;
	if (env_ulong("SV_MULPDU", &v) && v > 0 && v <= 65535)
		opts->mulpdu = (uint32_t)v;
	env_udp(opts);
	env_tls(opts);
}

/* A zero limit means the default; a limit above the hard cap is cut to it. */
static uint32_t limit(uint32_t asked, uint32_t def, uint32_t cap)
{
	if (asked == 0)
		return def;
	return asked < cap ? asked : cap;
}

static void normalize(struct sv_device_opts *o)
{
	o->max_qp = limit(o->max_qp, SV__MAX_QP, SV__MAX_QP);
	o->max_qp_wr = limit(o->max_qp_wr, SV__MAX_QP_WR, SV__MAX_QP_WR);
	o->max_sge = limit(o->max_sge, SV__MAX_SGE, SV__MAX_SGE);
	o->max_cq = limit(o->max_cq, SV__MAX_CQ, SV__MAX_CQ);
	o->max_cqe = limit(o->max_cqe, SV__MAX_CQE, SV__MAX_CQE);
	o->max_mr = limit(o->max_mr, SV__DEF_MAX_MR, SV__MAX_MR);
	if (o->max_mr_size == 0 || o->max_mr_size > SV__MAX_MR_SIZE)
		o->max_mr_size = SV__MAX_MR_SIZE;
	o->max_inline_data = limit(o->max_inline_data, SV__MAX_INLINE, SV__MAX_INLINE);
	o->max_qp_rd_atom = limit(o->max_qp_rd_atom, SV__MAX_RD_ATOM, SV__MAX_RD_ATOM);
	o->max_qp_init_rd_atom = limit(o->max_qp_init_rd_atom, SV__MAX_RD_ATOM,
				       SV__MAX_RD_ATOM);
	o->max_msg_size = limit(o->max_msg_size, SV__MAX_MSG_SIZE, SV__MAX_MSG_SIZE);
	/* 0: the TCP transport picks it per connection (doc/wire-iwarp.md 2.6). */
	if (o->mulpdu > 65535)
		o->mulpdu = 0;
	o->bind_addr[sizeof(o->bind_addr) - 1] = '\0';
	o->impair[sizeof(o->impair) - 1] = '\0';
	o->pcap[sizeof(o->pcap) - 1] = '\0';
}

/* FNV-1a over the bind address, the pid and the context's address: distinct per process
 * and per context, stable for the context's life. */
static uint64_t make_guid(const struct sv_context *ctx)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint64_t mix[2] = { (uint64_t)getpid(), (uint64_t)(uintptr_t)ctx };
	const unsigned char *p;
	size_t i;

	for (p = (const unsigned char *)ctx->opts.bind_addr; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	for (i = 0; i < sizeof(mix); i++)
		h = (h ^ ((const unsigned char *)mix)[i]) * 0x100000001b3ull;
	return h;
}

static int ctx_init_on_loop(void *arg)
{
	struct sv_context *ctx = arg;

	return ctx->ops->ctx_init ? ctx->ops->ctx_init(ctx, &ctx->tctx) : 0;
}

static int ctx_fini_on_loop(void *arg)
{
	struct sv_context *ctx = arg;

	if (ctx->ops->ctx_fini)
		ctx->ops->ctx_fini(ctx, ctx->tctx);
	return 0;
}

/* Every TCP connection is a socket, and a context holds a few descriptors more (the
 * loop's epoll and eventfds, the UDP socket, the channels' eventfds): 10000 connections
 * need more than the usual soft limit of 1024. So the first context raises the soft
 * RLIMIT_NOFILE to the hard limit, which any process may do (getrlimit(2)). Running out
 * later fails the call that needed the descriptor with -EMFILE and says so in the log
 * (wire/iwarp_cm.c sv__iw_sock_new(); the listener backs off, wire/iwarp_listen.c
 * listener_back_off()). */
static void raise_nofile(void)
{
	struct rlimit r;
	unsigned long long was;

	if (getrlimit(RLIMIT_NOFILE, &r) < 0 || r.rlim_cur >= r.rlim_max)
		return;
	was = (unsigned long long)r.rlim_cur;
	r.rlim_cur = r.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &r) == 0)
		sv__log(SV_LOG_DEBUG, "softverbs: RLIMIT_NOFILE soft limit raised from %llu to "
			"the hard limit %llu", was, (unsigned long long)r.rlim_max);
}

int sv__open_device_with_ops(const struct sv_device_opts *opts,
			     const struct sv__transport_ops *ops, struct sv_context **out)
{
	static pthread_once_t nofile_once = PTHREAD_ONCE_INIT;
	struct sv_context *ctx;
	int rc;

	if (!out || !ops)
		return -EINVAL;
	pthread_once(&nofile_once, raise_nofile);
	if (!(ctx = calloc(1, sizeof(*ctx))))
		return -ENOMEM;
	if (opts)
		ctx->opts = *opts;
	else
		sv_device_opts_init(&ctx->opts);
	normalize(&ctx->opts);
	ctx->ops = ops;
	ctx->node_guid = make_guid(ctx);
	ctx->next_pd_handle = 1;
	ctx->next_mr_handle = 1;
	pthread_mutex_init(&ctx->obj_lock, NULL);
	pthread_mutex_init(&ctx->qp_list_lock, NULL);

	/* Before the transport starts, which keeps the capture for its sockets' I/O. */
	if (ctx->opts.pcap[0] && (rc = sv__pcap_open(ctx->opts.pcap, &ctx->pcap)) < 0)
		goto err_free;
	if ((rc = sv__mr_table_init(ctx)) < 0)
		goto err_pcap;
	if ((rc = sv__async_init(ctx)) < 0)
		goto err_mr;
	if ((rc = sv__engine_start(ctx)) < 0)
		goto err_async;
	if ((rc = sv__ctx_run_sync(ctx, ctx_init_on_loop, ctx)) < 0)
		goto err_engine;
	*out = ctx;
	return 0;
err_engine:
	sv__engine_stop(ctx);
err_async:
	sv__async_fini(ctx);
err_mr:
	sv__mr_table_fini(ctx);
err_pcap:
	sv__pcap_abandon(ctx->pcap);
err_free:
	pthread_mutex_destroy(&ctx->qp_list_lock);
	pthread_mutex_destroy(&ctx->obj_lock);
	free(ctx);
	if (rc == -EMFILE || rc == -ENFILE)	/* raise_nofile() above */
		sv__log(SV_LOG_ERROR, "softverbs: cannot open a device: %s (RLIMIT_NOFILE)",
			sv_strerror(rc));
	return rc;
}

/* A context on an rdma-core device: the options and the device, nothing of core's own
 * machinery (nic/nic.h). */
int sv__open_nic(const struct sv_device_opts *opts, struct sv_context **out)
{
	struct sv_context *ctx;
	int rc;

	if (!(ctx = calloc(1, sizeof(*ctx))))
		return -ENOMEM;
	ctx->opts = *opts;
	ctx->opts.device[sizeof(ctx->opts.device) - 1] = '\0';
	pthread_mutex_init(&ctx->obj_lock, NULL);
	if ((rc = sv__nic_open(&ctx->opts, &ctx->nic)) < 0) {
		pthread_mutex_destroy(&ctx->obj_lock);
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

static int close_nic(struct sv_context *ctx)
{
	bool busy;

	pthread_mutex_lock(&ctx->obj_lock);
	busy = ctx->n_cm_id || sv__nic_busy(ctx->nic);
	pthread_mutex_unlock(&ctx->obj_lock);
	if (busy)
		return -EBUSY;
	sv__nic_close(ctx->nic);
	pthread_mutex_destroy(&ctx->obj_lock);
	free(ctx);
	return 0;
}

int sv_close_device(struct sv_context *ctx)
{
	bool busy;

	if (!ctx)
		return -EINVAL;
	if (ctx->nic)
		return close_nic(ctx);
	pthread_mutex_lock(&ctx->obj_lock);
	busy = ctx->n_pd || ctx->n_cq || ctx->n_qp || ctx->n_mr || ctx->n_comp_channel ||
	       ctx->n_cm_id;
	pthread_mutex_unlock(&ctx->obj_lock);
	if (busy)
		return -EBUSY;
	sv__ctx_run_sync(ctx, ctx_fini_on_loop, ctx);
	sv__engine_stop(ctx);
	sv__async_fini(ctx);
	sv__mr_table_fini(ctx);
	sv__pcap_close(ctx->pcap);
	pthread_mutex_destroy(&ctx->qp_list_lock);
	pthread_mutex_destroy(&ctx->obj_lock);
	free(ctx);
	return 0;
}

struct sv__pcap *sv__ctx_pcap(struct sv_context *ctx)
{
	return ctx->pcap;
}

const struct sv_device_opts *sv__ctx_opts(struct sv_context *ctx)
{
	return &ctx->opts;
}

uint64_t sv__ctx_node_guid(const struct sv_context *ctx)
{
	return ctx->node_guid;
}

void *sv__ctx_tctx(struct sv_context *ctx)
{
	return ctx->tctx;
}

enum sv_mtu sv__ctx_active_mtu(struct sv_context *ctx)
{
	return ctx->ops->active_mtu ? ctx->ops->active_mtu(ctx) : SV_MTU_4096;
}

int sv_query_device(struct sv_context *ctx, struct sv_device_attr *attr)
{
	const struct sv_device_opts *o;

	if (!ctx || !attr)
		return -EINVAL;
	if (ctx->nic)
		return sv__nic_query_device(ctx->nic, attr);
	o = &ctx->opts;
	memset(attr, 0, sizeof(*attr));
	snprintf(attr->name, sizeof(attr->name), "sv_%s0",
		 o->transport == SV_TRANSPORT_UDP ? "udp" : "tcp");
	attr->node_guid = ctx->node_guid;
	attr->max_mr_size = o->max_mr_size;
	attr->page_size_cap = ~0xfffull;	/* any multiple of 4 KiB; we do not pin pages */
	/* An IEEE OUI (IBTA Vol 1, the NodeInfo attribute's VendorID). We own none: 0xffffff
	 * is no assignable OUI, so no program takes us for a vendor's hardware (test suites
	 * and perftest branch on Mellanox's and Amazon's), and it is what the kernel's
	 * software RoCE device reports, so what treats software devices alike treats us so
	 * too. Zero reads as "no vendor" to the tools that print it. */
	attr->vendor_id = 0xffffff;
	attr->vendor_part_id = 0;
	attr->hw_ver = 1;
	attr->max_qp = o->max_qp;
	attr->max_qp_wr = o->max_qp_wr;
	attr->max_sge = o->max_sge;
	attr->max_sge_rd = 1;		/* an RDMA Read has one sink STag (RFC 5040 4.4) */
	attr->max_cq = o->max_cq;
	attr->max_cqe = o->max_cqe;
	attr->max_mr = o->max_mr;
	attr->max_mw = o->max_mr;	/* windows take slots of the same key table */
	attr->max_pd = SV__MAX_PD;
	attr->max_qp_rd_atom = o->max_qp_rd_atom;
	attr->max_qp_init_rd_atom = o->max_qp_init_rd_atom;
	attr->max_inline_data = o->max_inline_data;
	attr->max_msg_size = o->max_msg_size;
	attr->atomic_cap = SV_ATOMIC_HCA;	/* atomics run on the loop, not against CPUs */
	attr->transport = o->transport;
	attr->phys_port_cnt = 1;
	attr->max_srq = SV__MAX_SRQ;
	attr->max_srq_wr = o->max_qp_wr;
	attr->max_srq_sge = o->max_sge;
	attr->local_ca_ack_delay = SV__CA_ACK_DELAY;
	return 0;
}

int sv_query_port(struct sv_context *ctx, uint8_t port_num, struct sv_port_attr *attr)
{
	if (!ctx || !attr)
		return -EINVAL;
	if (ctx->nic)
		return sv__nic_query_port(ctx->nic, port_num, attr);
	if (port_num != 1)
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = SV_PORT_ACTIVE;
	attr->max_mtu = SV_MTU_4096;
	attr->active_mtu = sv__ctx_active_mtu(ctx);
	attr->max_msg_sz = ctx->opts.max_msg_size;
	attr->gid_tbl_len = 1;
	attr->lid = 0;			/* Ethernet link layer: no LIDs */
	attr->link_layer_ethernet = 1;
	return 0;
}
