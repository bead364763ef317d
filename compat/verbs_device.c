/*
 * verbs_device.c — libibverbs drop-in: the two devices, their strings and attributes, the
 * contexts (one softverbs context per device and process, reopened after fork), async
 * events, and the import verbs we cannot serve.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>

#include "compat/verbs_int.h"

/* driver.h (not installed) names the sysfs GID types this way; the ABI is two values. */
enum svc_gid_type_sysfs {
	SVC_GID_TYPE_SYSFS_IB_ROCE_V1,
	SVC_GID_TYPE_SYSFS_ROCE_V2,
};

/* The layouts doc/drop-in-abi.md measured; a different header would break the binaries. */
_Static_assert(sizeof(struct ibv_context) == 328, "struct ibv_context");
_Static_assert(offsetof(struct ibv_context, abi_compat) == 320, "abi_compat offset");
_Static_assert(sizeof(struct verbs_context) == 648, "struct verbs_context");
_Static_assert(sizeof(struct ibv_qp_ex) == 352, "struct ibv_qp_ex");
/* ibv_sge and sv_sge are the same three fields, so SGE lists pass through untouched. */
_Static_assert(sizeof(struct ibv_sge) == sizeof(struct sv_sge), "sge size");
_Static_assert(offsetof(struct ibv_sge, lkey) == offsetof(struct sv_sge, lkey), "sge lkey");
_Static_assert(offsetof(struct ibv_sge, length) == offsetof(struct sv_sge, length), "sge len");
_Static_assert((int)IBV_REREG_MR_CHANGE_TRANSLATION == (int)SV_REREG_TRANSLATION &&
	       (int)IBV_REREG_MR_CHANGE_PD == (int)SV_REREG_PD &&
	       (int)IBV_REREG_MR_CHANGE_ACCESS == (int)SV_REREG_ACCESS,
	       "rereg flags");

#define OLD_PORT_ATTR_LEN 48	/* struct ibv_port_attr before active_speed_ex */

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct svc_device devices[2] = {
	{ .dev = { .node_type = IBV_NODE_RNIC, .transport_type = IBV_TRANSPORT_IWARP,
		   .name = "sv_tcp0", .dev_name = "sv_tcp0",
		   .dev_path = "/sys/class/infiniband_verbs/sv_tcp0",
		   .ibdev_path = "/sys/class/infiniband/sv_tcp0" },
	  .transport = SV_TRANSPORT_TCP },
	{ .dev = { .node_type = IBV_NODE_CA, .transport_type = IBV_TRANSPORT_IB,
		   .name = "sv_udp0", .dev_name = "sv_udp0",
		   .dev_path = "/sys/class/infiniband_verbs/sv_udp0",
		   .ibdev_path = "/sys/class/infiniband/sv_udp0" },
	  .transport = SV_TRANSPORT_UDP },
};

/* Incremented in a child after fork(): contexts looked up before it are the parent's. */
static unsigned fork_gen;

/* Opens the device's shared softverbs context once; later calls return the outcome. */
static int dev_open(struct svc_device *d, struct sv_context **out)
{
	struct sv_device_opts o;
	int rc;

	pthread_mutex_lock(&dev_lock);
	if (!d->tried) {
		sv_device_opts_init(&o);	/* SV_* from the environment (svrun) */
		o.transport = d->transport;
		d->open_rc = sv_open_device(&o, &d->sv);
		d->tried = true;
	}
	rc = d->open_rc;
	*out = d->sv;
	pthread_mutex_unlock(&dev_lock);
	return rc;
}

/*
 * fork(): the child inherits the parent's softverbs contexts without their progress
 * threads, so anything that waits on one would wait forever (pyverbs' rdma_cm tests
 * fork with a context open). The child forgets them: the next use of a device
 * opens a context of its own, and every ibv_context inherited from the parent moves to it
 * on its next use (svc_ctx_sv). The parent's objects stay behind untouched: their sockets
 * and memory are the parent's, and a child closing an inherited context frees only its
 * own copy of the wrapper.
 */
static void fork_child(void)
{
	unsigned i;

	pthread_mutex_init(&dev_lock, NULL);
	for (i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		devices[i].sv = NULL;
		devices[i].tried = false;
		devices[i].open_rc = 0;
	}
	fork_gen++;
}

__attribute__((constructor)) static void svc_verbs_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

/* The softverbs context of this process under an ibv_context (see fork_child). A
 * context whose reopen fails keeps the old one, whose calls then fail or stall as the
 * parent's would; the open's error is what the next open_device reports. */
struct sv_context *svc_ctx_sv(struct svc_context *c)
{
	struct sv_context *sv;

	if (__atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) != fork_gen &&
	    dev_open(c->dev, &sv) == 0) {
		c->sv = sv;
		c->vctx.context.async_fd = sv_async_fd(sv);
		__atomic_store_n(&c->gen, fork_gen, __ATOMIC_RELEASE);
	}
	return c->sv;
}

/* ---------------------------------------------------------------------------------------
 * Devices.
 */

SVC_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list = calloc(3, sizeof(*list));
	const char *t = getenv("SV_TRANSPORT");
	bool udp_first = t && strcmp(t, "udp") == 0;
	int n = 0, i;

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	/* Both transports are built into libsoftverbs; the device of the selected one comes
	 * first, as applications without -d take the first. Listing opens nothing. */
	for (i = 0; i < 2; i++)
		list[n++] = &devices[udp_first ? 1 - i : i].dev;
	if (num_devices)
		*num_devices = n;
	return list;
}

SVC_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SVC_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

SVC_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return device ? (int)(to_dev(device) - devices) : -1;
}

SVC_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct sv_device_attr a;
	struct sv_context *sv;

	if (!device || dev_open(to_dev(device), &sv) < 0 || sv_query_device(sv, &a) < 0)
		return 0;
	return htobe64(a.node_guid);
}

/* ---------------------------------------------------------------------------------------
 * Strings.
 */

SVC_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	static const char *const s[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};

	if ((unsigned)t < sizeof(s) / sizeof(s[0]) && s[t])
		return s[t];
	return "unknown";
}

SVC_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const n[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					 "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };

	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "unknown";
}

SVC_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const n[] = {
		"CQ error", "local work queue catastrophic error",
		"invalid request local work queue error", "local access violation work queue error",
		"communication established", "send queue drained", "path migrated",
		"path migration request error", "local catastrophic error", "port active",
		"port error", "LID change", "P_Key change", "SM change", "SRQ catastrophic error",
		"SRQ limit reached", "last WQE reached", "client reregistration", "GID table change",
		"WQ fatal",
	};

	return (unsigned)e < sizeof(n) / sizeof(n[0]) ? n[e] : "unknown";
}

SVC_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	/* The IB names; sv_wc_status uses the same numbering (doc/verbs.md 3). */
	return sv_wc_status_str((enum sv_wc_status)status);
}

/* ---------------------------------------------------------------------------------------
 * Sysfs and fork: nothing of ours lives in sysfs, and no child inherits a live context.
 */

SVC_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[512];
	ssize_t n;
	int fd;

	if (!dir || !file || !buf || !size)
		return -1;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n <= 0)
		return -1;
	if ((size_t)n == size)
		n--;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}

/* Our memory is never pinned by a kernel, so fork needs no madvise (IBV_FORK_UNNEEDED). */
SVC_EXPORT int ibv_fork_init(void)
{
	return 0;
}

SVC_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* ---------------------------------------------------------------------------------------
 * Attributes.
 */

static void fill_device_attr(struct svc_context *c, struct ibv_device_attr *out)
{
	struct sv_device_attr a;

	memset(out, 0, sizeof(*out));
	if (sv_query_device(svc_ctx_sv(c), &a) < 0)
		return;
	snprintf(out->fw_ver, sizeof(out->fw_ver), "softverbs %s", "0.1");
	out->node_guid = htobe64(a.node_guid);
	out->sys_image_guid = out->node_guid;
	out->max_mr_size = a.max_mr_size;
	out->page_size_cap = a.page_size_cap;
	out->vendor_id = a.vendor_id;
	out->vendor_part_id = a.vendor_part_id;
	out->hw_ver = a.hw_ver;
	out->max_qp = (int)a.max_qp;
	out->max_qp_wr = (int)a.max_qp_wr;
	/* Windows: type 1 and type 2B (core/mw.c); not 2A. */
	out->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
				IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	out->max_sge = (int)a.max_sge;
	out->max_sge_rd = (int)a.max_sge_rd;
	out->max_cq = (int)a.max_cq;
	out->max_cqe = (int)a.max_cqe;
	out->max_mr = (int)a.max_mr;
	out->max_mw = (int)a.max_mw;
	out->max_pd = (int)a.max_pd;
	out->max_qp_rd_atom = (int)a.max_qp_rd_atom;
	out->max_res_rd_atom = (int)(a.max_qp_rd_atom * a.max_qp);
	out->max_qp_init_rd_atom = (int)a.max_qp_init_rd_atom;
	out->local_ca_ack_delay = a.local_ca_ack_delay;
	out->atomic_cap = a.atomic_cap == SV_ATOMIC_GLOB ? IBV_ATOMIC_GLOB :
			  a.atomic_cap == SV_ATOMIC_HCA ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
	out->max_srq = (int)a.max_srq;
	out->max_srq_wr = (int)a.max_srq_wr;
	out->max_srq_sge = (int)a.max_srq_sge;
	out->max_pkeys = 1;
	out->phys_port_cnt = a.phys_port_cnt;
}

static int svc_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (!ctx || !attr)
		return EINVAL;
	fill_device_attr(to_ctx(ctx), attr);
	return 0;
}

SVC_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return svc_query_device(ctx, attr);
}

static int svc_query_device_ex(struct ibv_context *ctx,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ex;

	if (!ctx || !attr || attr_size < sizeof(ex.orig_attr) || (input && input->comp_mask))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	fill_device_attr(to_ctx(ctx), &ex.orig_attr);
	ex.phys_port_cnt_ex = ex.orig_attr.phys_port_cnt;
	memcpy(attr, &ex, attr_size < sizeof(ex) ? attr_size : sizeof(ex));
	return 0;
}

static int svc_query_port_ex(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *out,
			     size_t len)
{
	struct svc_context *c = to_ctx(ctx);
	struct ibv_port_attr pa;
	struct sv_port_attr a;
	int rc;

	if (!out)
		return EINVAL;
	if ((rc = sv_query_port(svc_ctx_sv(c), port, &a)) < 0)
		return svc_errno(rc);
	memset(&pa, 0, sizeof(pa));
	pa.state = (enum ibv_port_state)a.state;
	pa.max_mtu = (enum ibv_mtu)a.max_mtu;
	pa.active_mtu = (enum ibv_mtu)a.active_mtu;
	pa.gid_tbl_len = a.gid_tbl_len;
	pa.port_cap_flags = 0;
	pa.max_msg_sz = a.max_msg_sz;
	pa.pkey_tbl_len = 1;
	pa.lid = a.lid;
	pa.max_vl_num = 1;
	pa.active_width = 2;		/* 4x */
	pa.active_speed = 8;		/* reported as 10 Gbps: a socket has no link speed */
	pa.phys_state = 5;		/* LinkUp */
	pa.link_layer = a.link_layer_ethernet ? IBV_LINK_LAYER_ETHERNET :
			IBV_LINK_LAYER_INFINIBAND;
	memcpy(out, &pa, len < sizeof(pa) ? len : sizeof(pa));
	return 0;
}

/* The exported symbol is the pre-1.14 ABI: the caller's struct is 48 bytes. */
SVC_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			      struct _compat_ibv_port_attr *attr)
{
	return svc_query_port_ex(ctx, port, (struct ibv_port_attr *)attr, OLD_PORT_ATTR_LEN);
}

/* GID 0. On sv_udp0 it is the context's own (the address its UDP socket is bound to,
 * IPv4-mapped or IPv6: a RoCE v2 GID, which peers put in ah_attr.grh.dgid). An iWARP
 * port addresses nothing by GID (peers are IP addresses and TCP ports, RFC 5040 and
 * RFC 5044, reached through rdma_cm), and the kernel's iWARP providers fill GID 0 with
 * the port's Ethernet address in bytes 0-5 and zeros after, so it is formed the same way
 * here: programs that pick a GID for an out-of-band RC connection see an interface ID of
 * zero, which no RoCE or IB GID has, and leave the device to rdma_cm. A socket has no
 * Ethernet address, so the port's is the node GUID's EUI-64 folded to EUI-48 (bytes 0-2
 * and 5-7), locally administered and unicast. */
static int make_gid(struct svc_context *c, unsigned index, union ibv_gid *gid)
{
	struct sv_device_attr a;
	int rc;

	if (index != 0)
		return EINVAL;
	if (c->dev->transport == SV_TRANSPORT_UDP)
		return svc_errno(sv_query_gid(svc_ctx_sv(c), 1, 0, gid->raw));
	if ((rc = sv_query_device(svc_ctx_sv(c), &a)) < 0)
		return svc_errno(rc);
	memset(gid, 0, sizeof(*gid));
	gid->raw[0] = (uint8_t)(((a.node_guid >> 56) | 0x02) & ~0x01);
	gid->raw[1] = (uint8_t)(a.node_guid >> 48);
	gid->raw[2] = (uint8_t)(a.node_guid >> 40);
	gid->raw[3] = (uint8_t)(a.node_guid >> 16);
	gid->raw[4] = (uint8_t)(a.node_guid >> 8);
	gid->raw[5] = (uint8_t)a.node_guid;
	return 0;
}

SVC_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
			     union ibv_gid *gid)
{
	if (!ctx || !gid || port != 1 || index < 0)
		return -1;
	return make_gid(to_ctx(ctx), (unsigned)index, gid) ? -1 : 0;
}

SVC_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				  enum svc_gid_type_sysfs *type)
{
	if (!ctx || !type || port != 1 || index != 0)
		return -1;
	*type = to_ctx(ctx)->dev->transport == SV_TRANSPORT_UDP ? SVC_GID_TYPE_SYSFS_ROCE_V2 :
		SVC_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SVC_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int rc;

	if (!ctx || !entry || flags || port != 1 || entry_size < sizeof(e.gid))
		return EINVAL;
	memset(&e, 0, sizeof(e));
	if ((rc = make_gid(to_ctx(ctx), index, &e.gid)))
		return rc;
	e.gid_index = index;
	e.port_num = port;
	e.gid_type = to_ctx(ctx)->dev->transport == SV_TRANSPORT_UDP ? IBV_GID_TYPE_ROCE_V2 :
		     IBV_GID_TYPE_IB;
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

/* The valid entries of the port's GID table: softverbs devices have one port, one GID. */
SVC_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
					size_t max_entries, uint32_t flags, size_t entry_size)
{
	int rc;

	if (!ctx || !entries || flags || entry_size < sizeof(struct ibv_gid_entry))
		return -EINVAL;
	if (max_entries < 1)
		return -EINVAL;
	if ((rc = _ibv_query_gid_ex(ctx, 1, 0, entries, 0, sizeof(struct ibv_gid_entry))))
		return -rc;
	return 1;
}

SVC_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	if (!ctx || !pkey || port != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);	/* the default full-membership P_Key */
	return 0;
}

SVC_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (!ctx || port != 1 || be16toh(pkey) != 0xffff)
		return -1;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Asynchronous events. The sv event is rebuilt at ack time from the ibv one: its
 * element leads back to our object, whose sv twin is what sv_ack_async_event counts on.
 */

SVC_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct sv_async_event e;
	int rc;

	if (!ctx || !ev)
		return -1;
	if ((rc = sv_get_async_event(svc_ctx_sv(to_ctx(ctx)), &e)) < 0) {
		errno = -rc;
		return -1;
	}
	memset(ev, 0, sizeof(*ev));
	ev->event_type = (enum ibv_event_type)e.event_type;
	switch (e.event_type) {
	case SV_EVENT_CQ_ERR:
		ev->element.cq = &((struct svc_cq *)sv_cq_context(e.element.cq))->cq;
		break;
	case SV_EVENT_QP_FATAL:
	case SV_EVENT_QP_REQ_ERR:
	case SV_EVENT_QP_ACCESS_ERR:
	case SV_EVENT_COMM_EST:
	case SV_EVENT_SQ_DRAINED:
	case SV_EVENT_PATH_MIG:
	case SV_EVENT_PATH_MIG_ERR:
	case SV_EVENT_QP_LAST_WQE_REACHED:
		ev->element.qp = &((struct svc_qp *)e.element.qp->qp_context)->qpx.qp_base;
		svc_sync_qp_state(ev->element.qp);
		break;
	case SV_EVENT_SRQ_ERR:
	case SV_EVENT_SRQ_LIMIT_REACHED:
		ev->element.srq = &((struct svc_srq *)e.element.srq->srq_context)->srq;
		break;
	default:
		ev->element.port_num = e.element.port_num;
		break;
	}
	return 0;
}

SVC_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	struct sv_async_event e;

	if (!ev)
		return;
	memset(&e, 0, sizeof(e));
	e.event_type = (enum sv_event_type)ev->event_type;
	if (ev->event_type == IBV_EVENT_CQ_ERR)
		e.element.cq = ev->element.cq ? to_cq(ev->element.cq)->sv : NULL;
	else if (ev->event_type <= IBV_EVENT_PATH_MIG_ERR ||
		 ev->event_type == IBV_EVENT_QP_LAST_WQE_REACHED)
		e.element.qp = ev->element.qp ? to_qp(ev->element.qp)->sv : NULL;
	else if (ev->event_type == IBV_EVENT_SRQ_ERR ||
		 ev->event_type == IBV_EVENT_SRQ_LIMIT_REACHED)
		e.element.srq = ev->element.srq ?
				container_of(ev->element.srq, struct svc_srq, srq)->sv : NULL;
	else
		e.element.port_num = ev->element.port_num;
	sv_ack_async_event(&e);
}

/* ---------------------------------------------------------------------------------------
 * Contexts.
 */

SVC_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct svc_context *c;
	struct ibv_context *ctx;
	int rc, ctx_cmd_fd;

	if (!device) {
		errno = EINVAL;
		return NULL;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = dev_open(to_dev(device), &c->sv)) < 0) {
		free(c);
		errno = -rc;
		return NULL;
	}
	/* No kernel is behind us, but programs dup, poll and pass cmd_fd (pyverbs' shared-PD
	 * tests dup it for ibv_import_device): a real descriptor of the context's own,
	 * which never becomes readable. */
	if ((ctx_cmd_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
		rc = errno;
		free(c);
		errno = rc;
		return NULL;
	}
	c->gen = fork_gen;
	c->dev = to_dev(device);
	ctx = &c->vctx.context;
	ctx->device = device;
	ctx->ops._compat_query_device = svc_query_device;
	ctx->ops.poll_cq = svc_poll_cq;
	ctx->ops.req_notify_cq = svc_req_notify_cq;
	ctx->ops.post_srq_recv = svc_post_srq_recv;
	ctx->ops.post_send = svc_post_send;
	ctx->ops.post_recv = svc_post_recv;
	ctx->ops.alloc_mw = svc_alloc_mw;
	ctx->ops.bind_mw = svc_bind_mw;
	ctx->ops.dealloc_mw = svc_dealloc_mw;
	ctx->cmd_fd = ctx_cmd_fd;
	ctx->async_fd = sv_async_fd(c->sv);
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = (void *)UINTPTR_MAX;	/* "this is a verbs_context" */
	c->vctx.sz = sizeof(c->vctx);
	c->vctx.query_port = svc_query_port_ex;
	c->vctx.query_device_ex = svc_query_device_ex;
	c->vctx.create_qp_ex = svc_create_qp_ex;
	c->vctx.create_cq_ex = svc_create_cq_ex;
	return ctx;
}

SVC_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	if (!ctx)
		return EINVAL;
	/* The shared softverbs context stays for other contexts and rdma_cm ids. */
	close(ctx->cmd_fd);
	pthread_mutex_destroy(&ctx->mutex);
	free(to_ctx(ctx));
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Importing objects of another process: a kernel context shared through its command fd.
 * Our objects live in the process's memory, so there is nothing to import; the verbs
 * fail as on a kernel without the import ioctls, and no unimport can have an object.
 */

SVC_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t pd_handle)
{
	(void)ctx;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t dm_handle)
{
	(void)ctx;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

SVC_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

SVC_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

SVC_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}
