/*
 * verbs.c — libibverbs.so.1 drop-in: the rdma-core 44 verbs ABI on the sv_ API.
 *
 * Each ibv object embeds the rdma-core struct first and keeps the softverbs object next
 * to it. The inline fast paths of <infiniband/verbs.h> (post_send, post_recv, poll_cq,
 * req_notify_cq, post_srq_recv) jump through ctx->ops without a NULL check, and the
 * extended helpers find struct verbs_context just before the ibv_context when abi_compat
 * is UINTPTR_MAX (doc/drop-in-abi.md), so a context is allocated as a verbs_context.
 *
 * All ibv_contexts of one device in a process share one softverbs context (opened on
 * first use and kept for the life of the process): rdma_cm ids, ibv_open_device() and
 * ibv_get_device_guid() then agree on one device with one GUID and one progress thread.
 *
 * Errors: the sv_ API returns negative errno; libibverbs returns positive errno from
 * int-valued verbs and sets errno for pointer-valued ones. The conversion happens here.
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

#include "compat/compat.h"

/* The macros that wrap exported names in the header would rename our definitions. */
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_get_device_list

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
#define POLL_CHUNK 32

struct svc_device {
	struct ibv_device dev;
	enum sv_transport transport;
	struct sv_context *sv;		/* shared, opened on first use */
	int open_rc;			/* the first open's result once tried (0 = ok) */
	bool tried;
};

struct svc_context {
	struct verbs_context vctx;	/* ends with the ibv_context we hand out */
	struct svc_device *dev;
	struct sv_context *sv;		/* of this process: see ctx_sv() */
	unsigned gen;			/* fork_gen when sv was looked up */
};

struct svc_pd {
	struct ibv_pd pd;
	struct sv_pd *sv;
};

struct svc_mr {
	struct ibv_mr mr;
	struct sv_mr *sv;
};

struct svc_mw {
	struct ibv_mw mw;
	struct sv_mw *sv;
};

struct svc_srq {
	struct ibv_srq srq;
	struct sv_srq *sv;
};

struct svc_ah {
	struct ibv_ah ah;
	struct sv_ah *sv;
};

struct svc_channel {
	struct ibv_comp_channel ch;
	struct sv_comp_channel *sv;
};

struct svc_cq {
	struct ibv_cq cq;
	struct sv_cq *sv;
	uint8_t grh_sl;			/* wc.sl of a receive with a GRH: roce_pkt_type() */
};

/* One ibv_wr_* chain under construction (wr_start .. wr_complete). */
struct svc_pending {
	struct sv_send_wr wr;
	struct sv_sge sge[4];
	uint8_t *inl;			/* inline payload copied at wr_set_inline_data* */
};

struct svc_qp {
	struct ibv_qp_ex qpx;		/* qp_base first: ibv_qp_to_qp_ex() is a cast back */
	struct sv_qp *sv;
	struct svc_pending *pend;
	unsigned n_pend, cap_pend;
	int wr_err;			/* first error of the chain, reported by wr_complete */
	bool recv_posted;		/* a receive was ever posted (svc_qp_recv_posted) */
	struct svc_qp *reg_next;	/* in qp_reg */
};

/* Every live QP of ours, for svc_qp_by_num: librdmacm connects a QP the application
 * made itself when conn_param.qp_num names it (rping -q). */
static pthread_mutex_t qp_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct svc_qp *qp_reg;

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

static struct svc_device *to_dev(struct ibv_device *d)
{
	return container_of(d, struct svc_device, dev);
}

static struct svc_context *to_ctx(struct ibv_context *c)
{
	return container_of(c, struct svc_context, vctx.context);
}

static struct svc_pd *to_pd(struct ibv_pd *p)
{
	return container_of(p, struct svc_pd, pd);
}

static struct svc_cq *to_cq(struct ibv_cq *c)
{
	return container_of(c, struct svc_cq, cq);
}

static struct svc_qp *to_qp(struct ibv_qp *q)
{
	return container_of(q, struct svc_qp, qpx.qp_base);
}

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
 * on its next use (ctx_sv). The parent's objects stay behind untouched: their sockets
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
static struct sv_context *ctx_sv(struct svc_context *c)
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
	if (sv_query_device(ctx_sv(c), &a) < 0)
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
	if ((rc = sv_query_port(ctx_sv(c), port, &a)) < 0)
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
		return svc_errno(sv_query_gid(ctx_sv(c), 1, 0, gid->raw));
	if ((rc = sv_query_device(ctx_sv(c), &a)) < 0)
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
 * Completion queues: the fast path translates sv_wc to ibv_wc in chunks on the stack.
 */

/*
 * What a receive completion with a GRH carries in wc.sl on RoCE v2: the packet's type, as
 * mlx5 reports it for UD (RoCE Annex A17.4.5.1 wants the CQE to say whether the frame was
 * IPv4 or IPv6; mlx5's CQE has it where IB has the SL): bit 3 set for a UDP-encapsulated
 * frame, bits 2-0 the L3 header, 1 for IPv6 and 2 for IPv4. UCX's UD transport reads it
 * to know where the destination address sits in the 40-byte GRH slot (the IPv4 header
 * fills its last 20 bytes, ibv_init_ah_from_wc) and drops datagrams whose address it
 * does not find. A device carries one family, its GID 0's. iWARP has no UD: 0.
 */
static uint8_t roce_pkt_type(struct ibv_context *ctx)
{
	union ibv_gid gid;

	if (to_ctx(ctx)->dev->transport != SV_TRANSPORT_UDP || ibv_query_gid(ctx, 1, 0, &gid))
		return 0;
	return IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)gid.raw) ? 0x8 | 0x2 : 0x8 | 0x1;
}

static int svc_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	struct sv_wc w[POLL_CHUNK];
	int done = 0;

	while (done < num) {
		int want = num - done < POLL_CHUNK ? num - done : POLL_CHUNK;
		int n = sv_poll_cq(to_cq(cq)->sv, want, w), i;

		if (n < 0)
			return done ? done : n;
		for (i = 0; i < n; i++) {
			struct ibv_wc *o = &wc[done + i];

			o->wr_id = w[i].wr_id;
			o->status = (enum ibv_wc_status)w[i].status;
			o->opcode = (enum ibv_wc_opcode)w[i].opcode;
			o->vendor_err = w[i].vendor_err;
			o->byte_len = w[i].byte_len;
			o->imm_data = w[i].imm_data;
			o->qp_num = w[i].qp_num;
			o->src_qp = w[i].src_qp;
			o->wc_flags = w[i].wc_flags;
			o->pkey_index = 0;
			o->slid = 0;
			o->sl = o->wc_flags & IBV_WC_GRH ? to_cq(cq)->grh_sl : 0;
			o->dlid_path_bits = 0;
		}
		done += n;
		if (n < want)
			break;
	}
	/* sv_udp0's receive path runs only on the context's progress thread: an empty
	 * poll gives up the CPU, so two spinning processes on few cores cannot starve
	 * both progress threads for a whole scheduler slice. */
	if (!done && to_ctx(cq->context)->dev->transport == SV_TRANSPORT_UDP)
		sched_yield();
	return done;
}

static int svc_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return svc_errno(sv_req_notify_cq(to_cq(cq)->sv, solicited_only));
}

SVC_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct svc_channel *ch;
	int rc;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (!(ch = calloc(1, sizeof(*ch)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = sv_create_comp_channel(ctx_sv(to_ctx(ctx)), &ch->sv)) < 0) {
		free(ch);
		errno = -rc;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = sv_comp_channel_fd(ch->sv);
	ch->ch.refcnt = 0;
	return &ch->ch;
}

SVC_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct svc_channel *ch;
	int rc;

	if (!channel)
		return EINVAL;
	ch = container_of(channel, struct svc_channel, ch);
	if ((rc = sv_destroy_comp_channel(ch->sv)) < 0)
		return svc_errno(rc);
	free(ch);
	return 0;
}

SVC_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	struct svc_cq *cq;
	int rc;

	/* One progress thread per context is its one completion vector (num_comp_vectors). */
	if (!ctx || cqe < 1 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	if (!(cq = calloc(1, sizeof(*cq)))) {
		errno = ENOMEM;
		return NULL;
	}
	/* Our CQ object is the sv CQ's context, so a CQ event leads back to it. */
	rc = sv_create_cq(ctx_sv(to_ctx(ctx)), cqe, cq,
			  channel ? container_of(channel, struct svc_channel, ch)->sv : NULL,
			  comp_vector, &cq->sv);
	if (rc < 0) {
		free(cq);
		errno = -rc;
		return NULL;
	}
	cq->cq.context = ctx;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = sv_cq_size(cq->sv);
	cq->grh_sl = roce_pkt_type(ctx);
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	if (channel)
		channel->refcnt++;
	return &cq->cq;
}

SVC_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	(void)cq;
	(void)cqe;
	return EOPNOTSUPP;	/* the sv_ API has no resize; the CQ keeps its size */
}

SVC_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct svc_cq *cq;
	int rc;

	if (!ibcq)
		return EINVAL;
	cq = to_cq(ibcq);
	if ((rc = sv_destroy_cq(cq->sv)) < 0)
		return svc_errno(rc);
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	pthread_cond_destroy(&ibcq->cond);
	pthread_mutex_destroy(&ibcq->mutex);
	free(cq);
	return 0;
}

SVC_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				void **cq_context)
{
	struct sv_cq *scq;
	void *mine;
	int rc;

	if (!channel || !cq)
		return -1;
	rc = sv_get_cq_event(container_of(channel, struct svc_channel, ch)->sv, &scq, &mine);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	*cq = &((struct svc_cq *)mine)->cq;
	if (cq_context)
		*cq_context = (*cq)->cq_context;
	return 0;
}

SVC_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (cq)
		sv_ack_cq_events(to_cq(cq)->sv, nevents);
}

/* ---------------------------------------------------------------------------------------
 * Protection domains and memory regions.
 */

SVC_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct svc_pd *pd;
	int rc;

	if (!ctx) {
		errno = EINVAL;
		return NULL;
	}
	if (!(pd = calloc(1, sizeof(*pd)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = sv_alloc_pd(ctx_sv(to_ctx(ctx)), &pd->sv)) < 0) {
		free(pd);
		errno = -rc;
		return NULL;
	}
	pd->pd.context = ctx;
	pd->pd.handle = pd->sv->handle;
	return &pd->pd;
}

SVC_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	int rc;

	if (!pd)
		return EINVAL;
	if ((rc = sv_dealloc_pd(to_pd(pd)->sv)) < 0)
		return svc_errno(rc);
	free(to_pd(pd));
	return 0;
}

/* Required bits map one to one; IBV_ACCESS_OPTIONAL_RANGE bits may be ignored by
 * definition (RELAXED_ORDERING is one: we place in order anyway). */
static int access_from_ibv(int access, unsigned *out)
{
	const int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND;
	int required = access & ~IBV_ACCESS_OPTIONAL_RANGE;

	if (required & ~(known | IBV_ACCESS_HUGETLB))
		return EOPNOTSUPP;	/* ZERO_BASED via iova, ON_DEMAND, ... */
	*out = (unsigned)(required & known);
	return 0;
}

SVC_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	struct svc_mr *mr;
	unsigned a;
	int rc;

	if (!pd || iova != (uintptr_t)addr) {
		errno = pd ? EOPNOTSUPP : EINVAL;	/* our keys address virtual memory */
		return NULL;
	}
	if ((rc = access_from_ibv((int)access, &a))) {
		errno = rc;
		return NULL;
	}
	if (!(mr = calloc(1, sizeof(*mr)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = sv_reg_mr(to_pd(pd)->sv, addr, length, a, &mr->sv)) < 0) {
		free(mr);
		errno = -rc;
		return NULL;
	}
	mr->mr.context = pd->context;
	mr->mr.pd = pd;
	mr->mr.addr = addr;
	mr->mr.length = length;
	mr->mr.handle = mr->sv->handle;
	mr->mr.lkey = mr->sv->lkey;
	mr->mr.rkey = mr->sv->rkey;
	return &mr->mr;
}

SVC_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

SVC_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

SVC_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct svc_mr *mr;
	int rc;

	if (!ibmr)
		return EINVAL;
	mr = container_of(ibmr, struct svc_mr, mr);
	if ((rc = sv_dereg_mr(mr->sv)) < 0)
		return svc_errno(rc);
	free(mr);
	return 0;
}

/*
 * ibv_rereg_mr(3) on sv_rereg_mr(): the IBV_REREG_MR_CHANGE_* bits are SV_REREG_*, and
 * the keys stay, as on hardware that reregisters in place. Every failure leaves the old
 * MR valid, which is what IBV_REREG_MR_ERR_INPUT promises; errno says why.
 */
SVC_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	struct svc_mr *mr;
	struct sv_mr *fresh;
	unsigned a = 0;
	int rc;

	if (!ibmr || !flags || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_PD) && !pd) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !length)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (rc = access_from_ibv(access, &a))) {
		errno = rc;
		return IBV_REREG_MR_ERR_INPUT;
	}
	mr = container_of(ibmr, struct svc_mr, mr);
	if ((rc = sv_rereg_mr(mr->sv, (unsigned)flags,
			      (flags & IBV_REREG_MR_CHANGE_PD) ? to_pd(pd)->sv : NULL, addr,
			      length, a, &fresh)) < 0) {
		errno = -rc;
		return IBV_REREG_MR_ERR_INPUT;
	}
	mr->sv = fresh;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		ibmr->pd = pd;
		ibmr->context = pd->context;
	}
	ibmr->addr = fresh->addr;
	ibmr->length = fresh->length;
	return 0;
}

/* dma-buf memory is device memory exported by a kernel driver; we reach only the
 * process's own virtual memory. */
SVC_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Memory windows: the context ops behind the inline ibv_alloc_mw, ibv_bind_mw and
 * ibv_dealloc_mw. Access flags share their values with the sv_ ones.
 */

static struct sv_mr *mr_sv(struct ibv_mr *mr)
{
	return mr ? container_of(mr, struct svc_mr, mr)->sv : NULL;
}

static struct sv_mw *mw_sv(struct ibv_mw *mw)
{
	return mw ? container_of(mw, struct svc_mw, mw)->sv : NULL;
}

static struct ibv_mw *svc_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct svc_mw *mw;
	int rc;

	if (!(mw = calloc(1, sizeof(*mw)))) {
		errno = ENOMEM;
		return NULL;
	}
	if ((rc = sv_alloc_mw(to_pd(pd)->sv, (enum sv_mw_type)type, &mw->sv)) < 0) {
		free(mw);
		errno = svc_errno(rc);
		return NULL;
	}
	mw->mw.context = pd->context;
	mw->mw.pd = pd;
	mw->mw.rkey = mw->sv->rkey;
	mw->mw.handle = mw->sv->handle;
	mw->mw.type = type;
	return &mw->mw;
}

static int svc_dealloc_mw(struct ibv_mw *ibmw)
{
	int rc;

	if ((rc = sv_dealloc_mw(mw_sv(ibmw))) < 0)
		return svc_errno(rc);
	free(container_of(ibmw, struct svc_mw, mw));
	return 0;
}

/* ibv_bind_mw() (type 1): the new key is the window's key from now on (ibv_bind_mw(3)). */
static int svc_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct sv_mw_bind b = {
		.wr_id = bind->wr_id,
		.send_flags = bind->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED),
		.bind_info = {
			.mr = mr_sv(bind->bind_info.mr),
			.addr = bind->bind_info.addr,
			.length = bind->bind_info.length,
			.mw_access_flags = bind->bind_info.mw_access_flags,
		},
	};
	int rc;

	if ((rc = sv_bind_mw(to_qp(qp)->sv, mw_sv(mw), &b)) < 0)
		return svc_errno(rc);
	mw->rkey = mw_sv(mw)->rkey;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Posting: one sv WR per ibv WR, so *bad_wr names exactly the refused one.
 */

static int send_wr_from_ibv(const struct ibv_send_wr *in, bool ud, struct sv_send_wr *out)
{
	if ((unsigned)in->opcode > IBV_WR_SEND_WITH_INV)
		return EINVAL;		/* TSO, driver opcodes, ATOMIC_WRITE: not ours */
	memset(out, 0, sizeof(*out));
	out->wr_id = in->wr_id;
	out->sg_list = (struct sv_sge *)in->sg_list;
	out->num_sge = in->num_sge;
	out->opcode = (enum sv_wr_opcode)in->opcode;	/* same numbering for the ten */
	out->send_flags = in->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
					    IBV_SEND_SOLICITED | IBV_SEND_INLINE);
	out->imm_data = in->imm_data;	/* or invalidate_rkey: the same union */
	if (in->opcode == IBV_WR_BIND_MW) {
		const struct ibv_mw_bind_info *bi = &in->bind_mw.bind_info;

		out->wr.bind_mw.mw = mw_sv(in->bind_mw.mw);
		out->wr.bind_mw.rkey = in->bind_mw.rkey;
		out->wr.bind_mw.bind_info.mr = mr_sv(bi->mr);
		out->wr.bind_mw.bind_info.addr = bi->addr;
		out->wr.bind_mw.bind_info.length = bi->length;
		out->wr.bind_mw.bind_info.mw_access_flags = bi->mw_access_flags;
	} else if (ud) {
		out->wr.ud.ah = in->wr.ud.ah ? container_of(in->wr.ud.ah, struct svc_ah, ah)->sv :
			       NULL;
		out->wr.ud.remote_qpn = in->wr.ud.remote_qpn;
		out->wr.ud.remote_qkey = in->wr.ud.remote_qkey;
	} else if (in->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		   in->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		out->wr.atomic.remote_addr = in->wr.atomic.remote_addr;
		out->wr.atomic.compare_add = in->wr.atomic.compare_add;
		out->wr.atomic.swap = in->wr.atomic.swap;
		out->wr.atomic.rkey = in->wr.atomic.rkey;
	} else {
		out->wr.rdma.remote_addr = in->wr.rdma.remote_addr;
		out->wr.rdma.rkey = in->wr.rdma.rkey;
	}
	return 0;
}

static int svc_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *sq = to_qp(qp)->sv;
	bool ud = qp->qp_type == IBV_QPT_UD;

	for (; wr; wr = wr->next) {
		struct sv_send_wr s, *sbad;
		int rc = send_wr_from_ibv(wr, ud, &s);

		if (!rc)
			rc = svc_errno(sv_post_send(sq, &s, &sbad));
		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
		if (wr->opcode == IBV_WR_BIND_MW)
			wr->bind_mw.mw->rkey = s.wr.bind_mw.mw->rkey;	/* the posted key */
	}
	return 0;
}

static int svc_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *sq = to_qp(qp)->sv;

	if (wr && !to_qp(qp)->recv_posted)
		__atomic_store_n(&to_qp(qp)->recv_posted, true, __ATOMIC_RELAXED);
	for (; wr; wr = wr->next) {
		struct sv_recv_wr r = { .wr_id = wr->wr_id, .sg_list = (struct sv_sge *)wr->sg_list,
					.num_sge = wr->num_sge };
		struct sv_recv_wr *rbad;
		int rc = svc_errno(sv_post_recv(sq, &r, &rbad));

		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

static int svc_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad)
{
	struct sv_srq *ss = container_of(srq, struct svc_srq, srq)->sv;

	for (; wr; wr = wr->next) {
		struct sv_recv_wr r = { .wr_id = wr->wr_id, .sg_list = (struct sv_sge *)wr->sg_list,
					.num_sge = wr->num_sge };
		struct sv_recv_wr *rbad;
		int rc = svc_errno(sv_post_srq_recv(ss, &r, &rbad));

		if (rc) {
			if (bad)
				*bad = wr;
			return rc;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * The ibv_wr_* post API: WRs are collected between wr_start and wr_complete and posted
 * as one chain, so an error anywhere posts nothing (what wr_abort promises too).
 */

static struct svc_pending *pend_new(struct ibv_qp_ex *qpx, enum sv_wr_opcode op)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	struct svc_pending *p;

	if (q->n_pend == q->cap_pend) {
		unsigned cap = q->cap_pend ? q->cap_pend * 2 : 16;
		struct svc_pending *np = realloc(q->pend, cap * sizeof(*np));

		if (!np) {
			q->wr_err = ENOMEM;
			return NULL;
		}
		q->pend = np;
		q->cap_pend = cap;
	}
	p = &q->pend[q->n_pend++];
	memset(p, 0, sizeof(*p));
	p->wr.wr_id = qpx->wr_id;
	p->wr.opcode = op;
	p->wr.send_flags = qpx->wr_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED |
					    IBV_SEND_SOLICITED | IBV_SEND_INLINE);
	return p;
}

static struct svc_pending *pend_last(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	if (!q->n_pend) {
		q->wr_err = EINVAL;
		return NULL;
	}
	return &q->pend[q->n_pend - 1];
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	q->n_pend = 0;
	q->wr_err = 0;
}

static void pend_clear(struct svc_qp *q)
{
	unsigned i;

	for (i = 0; i < q->n_pend; i++)
		free(q->pend[i].inl);
	q->n_pend = 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	struct sv_send_wr *bad;
	unsigned i;
	int rc = q->wr_err;

	for (i = 0; !rc && i < q->n_pend; i++) {
		struct svc_pending *p = &q->pend[i];

		p->wr.sg_list = p->sge;
		p->wr.next = NULL;
		rc = svc_errno(sv_post_send(q->sv, &p->wr, &bad));
	}
	pend_clear(q);
	return rc;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	pend_clear(container_of(qpx, struct svc_qp, qpx));
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_WRITE);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			      __be32 imm)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_WRITE_WITH_IMM);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
		p->wr.imm_data = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_RDMA_READ);

	if (p) {
		p->wr.wr.rdma.rkey = rkey;
		p->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	pend_new(qpx, SV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_SEND_WITH_IMM);

	if (p)
		p->wr.imm_data = imm;
}

static void wr_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
		       uint64_t swap)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_ATOMIC_CMP_AND_SWP);

	if (p) {
		p->wr.wr.atomic.rkey = rkey;
		p->wr.wr.atomic.remote_addr = addr;
		p->wr.wr.atomic.compare_add = cmp;
		p->wr.wr.atomic.swap = swap;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_ATOMIC_FETCH_AND_ADD);

	if (p) {
		p->wr.wr.atomic.rkey = rkey;
		p->wr.wr.atomic.remote_addr = addr;
		p->wr.wr.atomic.compare_add = add;
	}
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_SEND_WITH_INV);

	if (p)
		p->wr.invalidate_rkey = invalidate_rkey;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_LOCAL_INV);

	if (p)
		p->wr.invalidate_rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bi)
{
	struct svc_pending *p = pend_new(qpx, SV_WR_BIND_MW);

	if (p) {
		p->wr.wr.bind_mw.mw = mw_sv(mw);
		p->wr.wr.bind_mw.rkey = rkey;
		p->wr.wr.bind_mw.bind_info.mr = mr_sv(bi->mr);
		p->wr.wr.bind_mw.bind_info.addr = bi->addr;
		p->wr.wr.bind_mw.bind_info.length = bi->length;
		p->wr.wr.bind_mw.bind_info.mw_access_flags = bi->mw_access_flags;
	}
}

/* The destination of the last WR on a UD QP (ibv_wr_set_ud_addr(3)). */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct svc_pending *p = pend_last(qpx);

	if (!p)
		return;
	if (!ah) {
		container_of(qpx, struct svc_qp, qpx)->wr_err = EINVAL;
		return;
	}
	p->wr.wr.ud.ah = container_of(ah, struct svc_ah, ah)->sv;
	p->wr.wr.ud.remote_qpn = remote_qpn;
	p->wr.wr.ud.remote_qkey = remote_qkey;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t len)
{
	struct svc_pending *p = pend_last(qpx);

	if (p) {
		p->sge[0] = (struct sv_sge){ .addr = addr, .length = len, .lkey = lkey };
		p->wr.num_sge = 1;
	}
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sg)
{
	struct svc_pending *p = pend_last(qpx);
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);

	if (!p)
		return;
	if (n > sizeof(p->sge) / sizeof(p->sge[0])) {
		q->wr_err = EINVAL;
		return;
	}
	memcpy(p->sge, sg, n * sizeof(*sg));
	p->wr.num_sge = (int)n;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n,
				    const struct ibv_data_buf *bufs)
{
	struct svc_pending *p = pend_last(qpx);
	struct svc_qp *q = container_of(qpx, struct svc_qp, qpx);
	size_t total = 0, i, off = 0;

	if (!p)
		return;
	for (i = 0; i < n; i++)
		total += bufs[i].length;
	free(p->inl);
	if (!(p->inl = malloc(total ? total : 1))) {
		q->wr_err = ENOMEM;
		return;
	}
	for (i = 0; i < n; i++) {
		memcpy(p->inl + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	/* INLINE: the payload is copied at post time, so the lkey is not looked at. */
	p->sge[0] = (struct sv_sge){ .addr = (uintptr_t)p->inl, .length = (uint32_t)total };
	p->wr.num_sge = 1;
	p->wr.send_flags |= SV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t len)
{
	struct ibv_data_buf b = { .addr = addr, .length = len };

	wr_set_inline_data_list(qpx, 1, &b);
}

static void qpx_init(struct svc_qp *q)
{
	struct ibv_qp_ex *x = &q->qpx;

	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_atomic_cmp_swp = wr_cmp_swp;
	x->wr_atomic_fetch_add = wr_fetch_add;
	x->wr_send_inv = wr_send_inv;
	x->wr_local_inv = wr_local_inv;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
}

/* ---------------------------------------------------------------------------------------
 * Queue pairs.
 */

/*
 * An iWARP QP is born in the idle state, which verbs report as INIT: the stream it runs
 * on (RFC 5040, RFC 5044) is bound by the connection manager, not by attributes, so it
 * takes receives at once and leaves INIT only through rdma_cm. Its remote access rights
 * are none until rdma_cm (or an INIT to INIT modify) sets them.
 */
static int iwarp_qp_idle(struct sv_qp *qp)
{
	struct sv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = SV_QPS_INIT;
	a.port_num = 1;
	return svc_errno(sv_modify_qp(qp, &a, SV_QP_STATE | SV_QP_PKEY_INDEX | SV_QP_PORT |
				      SV_QP_ACCESS_FLAGS));
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
				uint64_t send_ops)
{
	struct sv_qp_init_attr a;
	struct svc_qp *q;
	int rc;

	if (!pd || !ia || !ia->send_cq || !ia->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UC &&
	    ia->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;	/* no XRC or raw QPs in the sv_ API */
		return NULL;
	}
	if (!(q = calloc(1, sizeof(*q)))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = q;
	a.send_cq = to_cq(ia->send_cq)->sv;
	a.recv_cq = to_cq(ia->recv_cq)->sv;
	a.cap.max_send_wr = ia->cap.max_send_wr;
	a.cap.max_recv_wr = ia->cap.max_recv_wr;
	a.cap.max_send_sge = ia->cap.max_send_sge;
	a.cap.max_recv_sge = ia->cap.max_recv_sge;
	a.cap.max_inline_data = ia->cap.max_inline_data;
	a.qp_type = ia->qp_type == IBV_QPT_UD ? SV_QPT_UD :
		    ia->qp_type == IBV_QPT_UC ? SV_QPT_UC : SV_QPT_RC;
	a.sq_sig_all = ia->sq_sig_all;
	a.srq = ia->srq ? container_of(ia->srq, struct svc_srq, srq)->sv : NULL;
	if ((rc = sv_create_qp(to_pd(pd)->sv, &a, &q->sv)) < 0) {
		free(q);
		errno = -rc;
		return NULL;
	}
	ia->cap.max_send_wr = a.cap.max_send_wr;
	ia->cap.max_recv_wr = a.cap.max_recv_wr;
	ia->cap.max_send_sge = a.cap.max_send_sge;
	ia->cap.max_recv_sge = a.cap.max_recv_sge;
	ia->cap.max_inline_data = a.cap.max_inline_data;

	q->qpx.qp_base.context = pd->context;
	q->qpx.qp_base.qp_context = ia->qp_context;
	q->qpx.qp_base.pd = pd;
	q->qpx.qp_base.send_cq = ia->send_cq;
	q->qpx.qp_base.recv_cq = ia->recv_cq;
	q->qpx.qp_base.srq = ia->srq;
	q->qpx.qp_base.handle = q->sv->qp_num;
	q->qpx.qp_base.qp_num = q->sv->qp_num;
	q->qpx.qp_base.state = IBV_QPS_RESET;
	q->qpx.qp_base.qp_type = ia->qp_type;
	pthread_mutex_init(&q->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&q->qpx.qp_base.cond, NULL);
	if (send_ops)
		qpx_init(q);
	if (to_ctx(pd->context)->dev->transport == SV_TRANSPORT_TCP && ia->qp_type == IBV_QPT_RC &&
	    (rc = iwarp_qp_idle(q->sv))) {
		ibv_destroy_qp(&q->qpx.qp_base);
		errno = rc;
		return NULL;
	}
	pthread_mutex_lock(&qp_reg_lock);
	q->reg_next = qp_reg;
	qp_reg = q;
	pthread_mutex_unlock(&qp_reg_lock);
	return &q->qpx.qp_base;
}

SVC_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return create_qp(pd, ia, 0);
}

static struct ibv_qp *svc_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ia)
{
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV |
			     IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
	/* A UD QP sends datagrams only: no RDMA, atomic or window operation over UD (IBTA
	 * Vol 1 chapter 9, the operations each transport service supports). */
	const uint64_t ud_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	/* UC: SEND and RDMA WRITE, each with immediate or not (the same table). */
	const uint64_t uc_ops = ud_ops | IBV_QP_EX_WITH_RDMA_WRITE |
				IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	/* No creation flag is ours (scatter FCS, CVLAN stripping, self-loopback blocking,
	 * ...: Ethernet-NIC features), so the mask may carry CREATE_FLAGS only with none. */
	if (!ctx || !ia || !(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || (ia->comp_mask & ~known) ||
	    ((ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (ia->send_ops_flags & ~(ia->qp_type == IBV_QPT_UD ? ud_ops :
				     ia->qp_type == IBV_QPT_UC ? uc_ops : ops))) ||
	    ((ia->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ia->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_context = ia->qp_context;
	a.send_cq = ia->send_cq;
	a.recv_cq = ia->recv_cq;
	a.srq = ia->srq;
	a.cap = ia->cap;
	a.qp_type = ia->qp_type;
	a.sq_sig_all = ia->sq_sig_all;
	qp = create_qp(ia->pd, &a, (ia->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ?
			ia->send_ops_flags : 0);
	if (qp)
		ia->cap = a.cap;
	return qp;
}

SVC_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	return qp ? &to_qp(qp)->qpx : NULL;
}

static void ah_to_sv(const struct ibv_ah_attr *in, struct sv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->dgid, in->grh.dgid.raw, 16);
	out->sgid_index = in->grh.sgid_index;
	out->hop_limit = in->grh.hop_limit;
	out->traffic_class = in->grh.traffic_class;
	out->flow_label = in->grh.flow_label;
	out->port_num = in->port_num;
}

static void ah_from_sv(const struct sv_ah_attr *in, struct ibv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->grh.dgid.raw, in->dgid, 16);
	out->grh.sgid_index = in->sgid_index;
	out->grh.hop_limit = in->hop_limit;
	out->grh.traffic_class = in->traffic_class;
	out->grh.flow_label = in->flow_label;
	out->is_global = 1;
	out->port_num = in->port_num;
}

static void cap_to_sv(const struct ibv_qp_cap *in, struct sv_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

static void cap_from_sv(const struct sv_qp_cap *in, struct ibv_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

/* The attribute mask bits, states, MTUs and access bits share the IB numbering. */
SVC_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *in, int mask)
{
	struct sv_qp_attr a;
	unsigned access = 0;
	int rc;

	if (!qp || !in)
		return EINVAL;
	if (mask & IBV_QP_ACCESS_FLAGS) {
		if ((rc = access_from_ibv((int)in->qp_access_flags, &access)))
			return rc;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = (enum sv_qp_state)in->qp_state;
	a.cur_qp_state = (enum sv_qp_state)in->cur_qp_state;
	a.path_mtu = (enum sv_mtu)in->path_mtu;
	a.qkey = in->qkey;
	a.rq_psn = in->rq_psn;
	a.sq_psn = in->sq_psn;
	a.dest_qp_num = in->dest_qp_num;
	a.qp_access_flags = access;
	cap_to_sv(&in->cap, &a.cap);
	ah_to_sv(&in->ah_attr, &a.ah_attr);
	a.pkey_index = in->pkey_index;
	a.en_sqd_async_notify = in->en_sqd_async_notify;
	a.max_rd_atomic = in->max_rd_atomic;
	a.max_dest_rd_atomic = in->max_dest_rd_atomic;
	a.min_rnr_timer = in->min_rnr_timer;
	a.port_num = in->port_num;
	a.timeout = in->timeout;
	a.retry_cnt = in->retry_cnt;
	a.rnr_retry = in->rnr_retry;
	if ((rc = sv_modify_qp(to_qp(qp)->sv, &a, mask)) < 0)
		return svc_errno(rc);
	svc_sync_qp_state(qp);
	return 0;
}

SVC_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *out, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct sv_qp_init_attr ia;
	struct sv_qp_attr a;
	int rc;

	if (!qp || !out)
		return EINVAL;
	if ((rc = sv_query_qp(to_qp(qp)->sv, &a, mask, &ia)) < 0)
		return svc_errno(rc);
	memset(out, 0, sizeof(*out));
	out->qp_state = (enum ibv_qp_state)a.qp_state;
	out->cur_qp_state = (enum ibv_qp_state)a.cur_qp_state;
	out->path_mtu = (enum ibv_mtu)a.path_mtu;
	out->qkey = a.qkey;
	out->rq_psn = a.rq_psn;
	out->sq_psn = a.sq_psn;
	out->dest_qp_num = a.dest_qp_num;
	out->qp_access_flags = a.qp_access_flags;
	cap_from_sv(&a.cap, &out->cap);
	ah_from_sv(&a.ah_attr, &out->ah_attr);
	out->pkey_index = a.pkey_index;
	out->en_sqd_async_notify = a.en_sqd_async_notify;
	out->sq_draining = a.sq_draining;
	out->max_rd_atomic = a.max_rd_atomic;
	out->max_dest_rd_atomic = a.max_dest_rd_atomic;
	out->min_rnr_timer = a.min_rnr_timer;
	out->port_num = a.port_num;
	out->timeout = a.timeout;
	out->retry_cnt = a.retry_cnt;
	out->rnr_retry = a.rnr_retry;
	qp->state = out->qp_state;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		cap_from_sv(&ia.cap, &init->cap);
		init->qp_type = qp->qp_type;
		init->sq_sig_all = ia.sq_sig_all;
	}
	return 0;
}

SVC_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct svc_qp *q;
	int rc;

	if (!qp)
		return EINVAL;
	q = to_qp(qp);
	/* libibverbs blocks until the QP's async events are acknowledged; softverbs says
	 * EBUSY meanwhile (another thread is expected to ack). */
	while ((rc = sv_destroy_qp(q->sv)) == -EBUSY) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	if (rc < 0)
		return svc_errno(rc);
	pthread_mutex_lock(&qp_reg_lock);
	for (struct svc_qp **pp = &qp_reg; *pp; pp = &(*pp)->reg_next)
		if (*pp == q) {
			*pp = q->reg_next;
			break;
		}
	pthread_mutex_unlock(&qp_reg_lock);
	pend_clear(q);
	free(q->pend);
	pthread_cond_destroy(&qp->cond);
	pthread_mutex_destroy(&qp->mutex);
	free(q);
	return 0;
}

/* ECE (enhanced connection establishment) negotiates vendor options no softverbs
 * transport has, so the verb fails as on a provider without it. */
SVC_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	return EOPNOTSUPP;
}

SVC_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!qp || !ece)
		return EINVAL;
	return EOPNOTSUPP;
}

/* Whether the data of an operation is written to memory in order, so a poller may watch
 * its last byte. softverbs makes no such promise (placement is memcpy by whichever
 * thread receives): 0, the answer of a provider that does not guarantee it. */
SVC_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
					  uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}

/* ---------------------------------------------------------------------------------------
 * Shared receive queues, then address handles (UD on sv_udp0), then what the sv_ API
 * does not have: multicast, which fails the way a provider without it does.
 */

SVC_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct sv_srq_init_attr a;
	struct svc_srq *srq;
	int rc;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!(srq = calloc(1, sizeof(*srq)))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.srq_context = srq;		/* async events lead back to our object */
	a.attr.max_wr = attr->attr.max_wr;
	a.attr.max_sge = attr->attr.max_sge;
	if ((rc = sv_create_srq(to_pd(pd)->sv, &a, &srq->sv)) < 0) {
		free(srq);
		errno = -rc;
		return NULL;
	}
	attr->attr.max_wr = a.attr.max_wr;
	attr->attr.max_sge = a.attr.max_sge;
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	return &srq->srq;
}

SVC_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq_attr a;
	int rc;

	if (!srq || !attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	a.max_wr = attr->max_wr;
	a.max_sge = attr->max_sge;
	a.srq_limit = attr->srq_limit;
	/* IBV_SRQ_MAX_WR and IBV_SRQ_LIMIT are SV_SRQ_MAX_WR and SV_SRQ_LIMIT */
	if ((rc = sv_modify_srq(container_of(srq, struct svc_srq, srq)->sv, &a, mask)) < 0)
		return svc_errno(rc);
	attr->max_wr = a.max_wr;
	return 0;
}

SVC_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct sv_srq_attr a;
	int rc;

	if (!srq || !attr)
		return EINVAL;
	if ((rc = sv_query_srq(container_of(srq, struct svc_srq, srq)->sv, &a)) < 0)
		return svc_errno(rc);
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

SVC_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct svc_srq *srq;
	int rc;

	if (!ibsrq)
		return EINVAL;
	srq = container_of(ibsrq, struct svc_srq, srq);
	if ((rc = sv_destroy_srq(srq->sv)) < 0)
		return svc_errno(rc);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	free(srq);
	return 0;
}

SVC_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sv_ah_attr a;
	struct svc_ah *ah;
	int rc;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!(ah = calloc(1, sizeof(*ah)))) {
		errno = ENOMEM;
		return NULL;
	}
	ah_to_sv(attr, &a);
	if ((rc = sv_create_ah(to_pd(pd)->sv, &a, &ah->sv)) < 0) {
		free(ah);
		errno = -rc;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	return &ah->ah;
}

/* RoCE v2: over IPv4 the 40-byte GRH slot holds the IPv4 header in its last 20 bytes,
 * so the sender's address sits at offset 20 + 12; over IPv6 it holds the IPv6 header,
 * whose source address (the sender's GID) is at offset 8 (softverbs.h, sv_ah). */
SVC_EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	const uint8_t *g = (const uint8_t *)grh;

	if (!ctx || !wc || !grh || !ah || !(wc->wc_flags & IBV_WC_GRH))
		return EINVAL;
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = port;
	ah->grh.hop_limit = 64;
	if (g[0] >> 4 == 6) {
		memcpy(ah->grh.dgid.raw, g + 8, 16);
		return 0;
	}
	ah->grh.dgid.raw[10] = 0xff;
	ah->grh.dgid.raw[11] = 0xff;
	memcpy(&ah->grh.dgid.raw[12], g + 20 + 12, 4);
	return 0;
}

SVC_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr a;
	int rc;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if ((rc = ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))) {
		errno = rc;
		return NULL;
	}
	return ibv_create_ah(pd, &a);
}

SVC_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct svc_ah *ah;
	int rc;

	if (!ibah)
		return EINVAL;
	ah = container_of(ibah, struct svc_ah, ah);
	if ((rc = sv_destroy_ah(ah->sv)) < 0)
		return svc_errno(rc);
	free(ah);
	return 0;
}

SVC_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
}

SVC_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp;
	(void)gid;
	(void)lid;
	return EOPNOTSUPP;
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
	if ((rc = sv_get_async_event(ctx_sv(to_ctx(ctx)), &e)) < 0) {
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

/* ---------------------------------------------------------------------------------------
 * The private seam for librdmacm (compat.h).
 */

SVC_EXPORT struct sv_context *svc_sv_context(struct ibv_context *ctx)
{
	if (!ctx || ctx->abi_compat != (void *)UINTPTR_MAX ||
	    ctx->ops.post_send != svc_post_send)
		return NULL;
	return ctx_sv(to_ctx(ctx));
}

SVC_EXPORT struct sv_qp *svc_sv_qp(struct ibv_qp *qp)
{
	return qp ? to_qp(qp)->sv : NULL;
}

SVC_EXPORT void svc_sync_qp_state(struct ibv_qp *qp)
{
	qp->state = (enum ibv_qp_state)to_qp(qp)->sv->state;
}

SVC_EXPORT struct ibv_qp *svc_qp_by_num(struct ibv_context *ctx, uint32_t qp_num)
{
	struct ibv_qp *found = NULL;

	pthread_mutex_lock(&qp_reg_lock);
	for (struct svc_qp *q = qp_reg; q && !found; q = q->reg_next)
		if (q->qpx.qp_base.context == ctx && q->qpx.qp_base.qp_num == qp_num)
			found = &q->qpx.qp_base;
	pthread_mutex_unlock(&qp_reg_lock);
	return found;
}

SVC_EXPORT bool svc_qp_recv_posted(struct ibv_qp *qp)
{
	return __atomic_load_n(&to_qp(qp)->recv_posted, __ATOMIC_RELAXED);
}
