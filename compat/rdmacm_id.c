/*
 * rdmacm_id.c — librdmacm drop-in: ids on the shared verbs context, binding, listening, and
 * address and route resolution.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "compat/rdmacm_int.h"

static pthread_mutex_t verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *shared_verbs;

/* The verbs context every id uses: the first device, opened once per process. */
struct ibv_context *svc_get_verbs(void)
{
	struct ibv_device **list;
	int n;

	pthread_mutex_lock(&verbs_lock);
	if (!shared_verbs && (list = ibv_get_device_list(&n))) {
		if (n > 0)
			shared_verbs = ibv_open_device(list[0]);
		ibv_free_device_list(list);
	}
	pthread_mutex_unlock(&verbs_lock);
	if (!shared_verbs)
		errno = ENODEV;
	return shared_verbs;
}

/* An id that gets its device gets the device's PD too, as librdmacm gives every id on a
 * device one PD it allocates for that device on first use and keeps (rdma_cm ids expose
 * it as cm_id->pd; rdma_create_qp with no PD, rdma_reg_msgs, and rdma-core's own tests,
 * whose AHs and external QPs use the id's PD before any QP exists, rely on it). */
void svc_id_set_device(struct rdma_cm_id *cm_id)
{
	static struct ibv_pd *shared_pd;

	cm_id->verbs = svc_get_verbs();
	if (!cm_id->verbs || cm_id->pd)
		return;
	pthread_mutex_lock(&verbs_lock);
	if (!shared_pd)
		shared_pd = ibv_alloc_pd(cm_id->verbs);
	pthread_mutex_unlock(&verbs_lock);
	cm_id->pd = shared_pd;
}

/* ---------------------------------------------------------------------------------------
 * Ids.
 */

SVC_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
			      void *context, enum rdma_port_space ps)
{
	struct ibv_context *verbs;
	struct svc_id *id;
	int rc;

	if (!out)
		return fail(EINVAL);
	if (!(verbs = svc_get_verbs()))
		return -1;
	if (!(id = calloc(1, sizeof(*id))))
		return fail(ENOMEM);
	if (!channel) {
		if (!(channel = rdma_create_event_channel()))
			goto err_free;
		id->sync = true;
	}
	id->ch = to_ch(channel);
	if ((rc = sv_cm_create_id_ps(id->ch->sv, svc_sv_context(verbs), id,
				     ps == RDMA_PS_UDP ? SV_CM_PS_UDP :
				     ps == RDMA_PS_IPOIB ? SV_CM_PS_IPOIB : SV_CM_PS_TCP,
				     &id->sv)) < 0) {
		errno = -rc;
		goto err_channel;
	}
	id->id.channel = channel;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = ps_is_ud(ps) ? IBV_QPT_UD : IBV_QPT_RC;
	*out = &id->id;
	return 0;
err_channel:
	if (id->sync)
		rdma_destroy_event_channel(channel);
err_free:
	free(id);
	return -1;
}

/* Events of the id that we hold (taken from softverbs but not handed out) go first:
 * softverbs refuses to destroy an id with unacknowledged events. A listener's held
 * CONNECT_REQUESTs take their never-seen new ids with them. */
static void drop_held_events(struct svc_id *id)
{
	struct svc_channel *ch = id->ch;
	struct svc_event **pp, *e, *prev = NULL;

	pthread_mutex_lock(&ch->lock);
	for (pp = &ch->head; (e = *pp);) {
		if (e->ev.listen_id == &id->id) {
			struct svc_id *child = to_id(e->ev.id);

			*pp = e->next;
			svc_event_free(e);
			sv_cm_destroy_id(child->sv);
			free(child);
			continue;
		}
		if (e->ev.id == &id->id) {
			*pp = e->next;
			svc_event_free(e);
			continue;
		}
		prev = e;
		pp = &e->next;
	}
	ch->tail = prev;
	pthread_mutex_unlock(&ch->lock);
}

SVC_EXPORT int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
	struct svc_id *id;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	drop_held_events(id);
	if (id->request) {
		svc_event_free(id->request);
		id->request = NULL;
	}
	if ((rc = sv_cm_destroy_id(id->sv)) < 0)
		return fail(rc);
	if (id->sync)
		rdma_destroy_event_channel(cm_id->channel);
	free(id);
	return 0;
}

/* The port is taken here, as the kernel's rdma_bind_addr reserves it in its port space:
 * rdma_get_src_port gives it at once (qperf -cm1 sends it to its peer before listening). */
SVC_EXPORT int rdma_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	int rc;

	if (!cm_id || !addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return fail(EINVAL);
	if ((rc = sv_cm_bind(to_id(cm_id)->sv, addr)) < 0)
		return fail(rc);
	svc_set_addr(&cm_id->route.addr.src_addr, addr);
	if (sv_cm_local_addr(to_id(cm_id)->sv, &ss) == 0)
		svc_set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	svc_id_set_device(cm_id);
	cm_id->port_num = 1;
	return 0;
}

SVC_EXPORT int rdma_listen(struct rdma_cm_id *cm_id, int backlog)
{
	struct svc_id *id;
	struct sockaddr_storage ss;
	int rc;

	if (!cm_id)
		return fail(EINVAL);
	id = to_id(cm_id);
	if (cm_id->route.addr.src_addr.sa_family == 0) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		svc_set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&any);
	}
	if ((rc = sv_cm_listen(id->sv, &cm_id->route.addr.src_addr, backlog)) < 0)
		return fail(rc);
	if (sv_cm_local_addr(id->sv, &ss) == 0)
		svc_set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	svc_id_set_device(cm_id);
	return 0;
}

/*
 * The source address of a route resolved without one, as the kernel's rdma_cm fills it
 * in (port 0 until the connection takes one): on RoCE the device's own address, GID 0,
 * where the CM sends from; on iWARP the address routing picks towards dst, which a UDP
 * socket connected to dst reports (nothing is sent). libfabric's verbs provider takes
 * it as the endpoint's own address; left empty, the endpoint had none.
 */
static void default_src(struct rdma_cm_id *cm_id, const struct sockaddr *dst)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	union ibv_gid gid;
	int fd;

	if (cm_id->verbs->device->transport_type != IBV_TRANSPORT_IWARP) {
		if (ibv_query_gid(cm_id->verbs, 1, 0, &gid))
			return;
		if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)gid.raw)) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			in->sin_family = AF_INET;
			memcpy(&in->sin_addr, gid.raw + 12, 4);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			in6->sin6_family = AF_INET6;
			memcpy(&in6->sin6_addr, gid.raw, 16);
		}
		svc_set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
		return;
	}
	if ((fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	if (connect(fd, dst, dst->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		    sizeof(struct sockaddr_in)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = 0;
		else
			((struct sockaddr_in *)&ss)->sin_port = 0;
		svc_set_addr(&cm_id->route.addr.src_addr, (struct sockaddr *)&ss);
	}
	close(fd);
}

SVC_EXPORT int rdma_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src,
				 struct sockaddr *dst, int timeout_ms)
{
	struct svc_id *id;

	(void)timeout_ms;
	if (!cm_id || !dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return fail(EINVAL);
	id = to_id(cm_id);
	if (src)
		svc_set_addr(&cm_id->route.addr.src_addr, src);
	svc_set_addr(&cm_id->route.addr.dst_addr, dst);
	svc_id_set_device(cm_id);
	cm_id->port_num = 1;
	if (cm_id->verbs && cm_id->route.addr.src_addr.sa_family == 0)
		default_src(cm_id, dst);
	/* IP addressing all the way: the address is resolved as soon as it is known. */
	if (!id->sync)
		svc_synthesize(id, RDMA_CM_EVENT_ADDR_RESOLVED);
	return 0;
}

/* A.b.c.d as ::ffff:a.b.c.d, an IPv6 address as itself: the RoCEv2 GID of an address. */
static void ip_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else if (sa->sa_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(gid->raw + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	}
}

__be16 svc_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

/*
 * The path record the kernel's rdma_cm makes up for a RoCE route, which has no subnet
 * administrator to ask (doc/interop-cm.md, "Routes"): GIDs from the addresses, P_Key
 * 0xffff, the link's MTU, hop limit 64, traffic class and SL 0 (the TOS option has no
 * effect here), PacketLifeTime 18, every selector "exactly", the current rate, and the
 * RoCEv2 flow label from the rdma_cm ports. librdmacm copies it into route.path_rec.
 */
static void roce_path(struct rdma_cm_id *cm_id, struct ibv_sa_path_rec *p)
{
	const struct sockaddr *src = &cm_id->route.addr.src_addr;
	const struct sockaddr *dst = &cm_id->route.addr.dst_addr;
	struct ibv_port_attr pa;
	uint32_t hash = (uint32_t)ntohs(svc_addr_port(src)) * 31 + ntohs(svc_addr_port(dst));

	memset(p, 0, sizeof(*p));
	ip_to_gid(dst, &p->dgid);
	/* Without a bound source the CM sends from the device's address: its GID 0. */
	if (src->sa_family)
		ip_to_gid(src, &p->sgid);
	else if (cm_id->verbs)
		ibv_query_gid(cm_id->verbs, 1, 0, &p->sgid);
	p->flow_label = htonl(hash & 0xfffff);
	p->hop_limit = 64;
	p->reversible = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;		/* the PathRecord's "exactly" (IBA Vol 1 chapter 15) */
	p->mtu = IBV_MTU_1024;
	if (cm_id->verbs && ibv_query_port(cm_id->verbs, cm_id->port_num ? cm_id->port_num : 1,
					   &pa) == 0)
		p->mtu = (uint8_t)pa.active_mtu;
	p->rate_selector = 2;
	p->rate = 0;			/* the port's current rate */
	p->packet_life_time_selector = 2;
	p->packet_life_time = 18;
}

SVC_EXPORT int rdma_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
	struct svc_id *id;

	(void)timeout_ms;
	if (!cm_id || cm_id->route.addr.dst_addr.sa_family == 0)
		return fail(EINVAL);
	id = to_id(cm_id);
	/* As librdmacm on the kernel: a RoCE route has one path record, an iWARP route
	 * none (iw_cm resolves nothing beyond the address; doc/interop-cm.md, "Routes"). */
	if (cm_id->verbs && cm_id->verbs->device->transport_type == IBV_TRANSPORT_IWARP) {
		cm_id->route.num_paths = 0;
		cm_id->route.path_rec = NULL;
	} else {
		roce_path(cm_id, &id->path);
		cm_id->route.path_rec = &id->path;
		cm_id->route.num_paths = 1;
	}
	if (!id->sync)
		svc_synthesize(id, RDMA_CM_EVENT_ROUTE_RESOLVED);
	return 0;
}
