/*
 * device.c — opening an rdma-core device for a nic context (SV_DEVICE, or the first one
 * libibverbs lists), its attribute, port and GID queries in softverbs' shapes, and the
 * ibv_devinfo-style listing of svperf --list-devices.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nic/nic_impl.h"

int sv__nic_unsupported(const struct sv__nic *nic, const char *what)
{
	sv__log(SV_LOG_ERROR, "softverbs nic: device %s does not support %s", nic->name, what);
	return -EOPNOTSUPP;
}

/* The device named name (NULL or "": the first), opened. */
static struct nv_context *open_named(const struct nic_lib *l, const char *name, char *got,
				     size_t gotlen)
{
	struct nv_device **list;
	struct nv_context *c = NULL;
	int n = 0, i;

	if (!(list = l->get_device_list(&n)))
		return NULL;
	for (i = 0; i < n && !c; i++) {
		const char *dn = l->get_device_name(list[i]);

		if (name && *name && strcmp(dn, name))
			continue;
		snprintf(got, gotlen, "%s", dn);
		c = l->open_device(list[i]);
		if (!c)
			sv__log(SV_LOG_ERROR, "softverbs nic: cannot open device %s", dn);
		if (!name || !*name)
			break;
	}
	l->free_device_list(list);
	if (!c && n == 0)
		sv__log(SV_LOG_ERROR, "softverbs nic: rdma-core lists no device");
	else if (!c && name && *name && i == n)
		sv__log(SV_LOG_ERROR, "softverbs nic: rdma-core lists no device %s", name);
	return c;
}

int sv__nic_open(const struct sv_device_opts *opts, struct sv__nic **out)
{
	const struct nic_lib *l;
	struct sv__nic *nic;
	int rc = 0;

	if (!(l = sv__nic_lib(&rc)))
		return rc;
	if (!(nic = calloc(1, sizeof(*nic))))
		return -ENOMEM;
	nic->lib = l;
	nic->cm_stop[0] = nic->cm_stop[1] = -1;
	if (!(nic->dev = open_named(l, opts->device, nic->name, sizeof(nic->name)))) {
		free(nic);
		return -ENODEV;
	}
	if ((rc = l->query_device(nic->dev, &nic->attr)) != 0) {
		l->close_device(nic->dev);
		free(nic);
		return nic_err(rc);
	}
	pthread_mutex_init(&nic->cm_lock, NULL);
	sv__log(SV_LOG_INFO, "softverbs nic: opened %s (%s)", nic->name, l->verbs_path);
	*out = nic;
	return 0;
}

int sv__nic_busy(const struct sv__nic *nic)
{
	return atomic_load(&nic->n_obj) ? -EBUSY : 0;
}

void sv__nic_close(struct sv__nic *nic)
{
	if (nic->cm_started) {
		close(nic->cm_stop[1]);
		pthread_join(nic->cm_thread, NULL);
		close(nic->cm_stop[0]);
	}
	if (nic->cm_ch)
		nic->lib->cm_destroy_channel(nic->cm_ch);
	nic->lib->close_device(nic->dev);
	pthread_mutex_destroy(&nic->cm_lock);
	free(nic);
}

static uint32_t clamp(int v)
{
	return v < 0 ? 0 : (uint32_t)v;
}

int sv__nic_query_device(struct sv__nic *nic, struct sv_device_attr *attr)
{
	const struct nv_device_attr *a = &nic->attr;
	struct nv_port_attr pa;

	memset(attr, 0, sizeof(*attr));
	snprintf(attr->name, sizeof(attr->name), "%.31s", nic->name);
	attr->node_guid = a->node_guid;
	attr->max_mr_size = a->max_mr_size;
	attr->page_size_cap = a->page_size_cap;
	attr->vendor_id = a->vendor_id;
	attr->vendor_part_id = a->vendor_part_id;
	attr->hw_ver = a->hw_ver;
	attr->max_qp = clamp(a->max_qp);
	attr->max_qp_wr = clamp(a->max_qp_wr);
	attr->max_sge = clamp(a->max_sge);
	attr->max_sge_rd = clamp(a->max_sge_rd);
	attr->max_cq = clamp(a->max_cq);
	attr->max_cqe = clamp(a->max_cqe);
	attr->max_mr = clamp(a->max_mr);
	attr->max_pd = clamp(a->max_pd);
	attr->max_qp_rd_atom = clamp(a->max_qp_rd_atom);
	attr->max_qp_init_rd_atom = clamp(a->max_qp_init_rd_atom);
	attr->atomic_cap = (enum sv_atomic_cap)a->atomic_cap;
	attr->transport = SV_TRANSPORT_NIC;
	attr->phys_port_cnt = a->phys_port_cnt;
	attr->max_srq = clamp(a->max_srq);
	attr->max_srq_wr = clamp(a->max_srq_wr);
	attr->max_srq_sge = clamp(a->max_srq_sge);
	attr->max_mw = clamp(a->max_mw);
	attr->local_ca_ack_delay = a->local_ca_ack_delay;
	/* Neither is a device attribute in verbs: the inline limit is what a QP is granted
	 * (nic/qp.c), the message size the port's. */
	attr->max_inline_data = 0;
	memset(&pa, 0, sizeof(pa));
	if (nic->lib->query_port(nic->dev, 1, &pa) == 0)
		attr->max_msg_size = pa.max_msg_sz;
	return 0;
}

int sv__nic_query_port(struct sv__nic *nic, uint8_t port, struct sv_port_attr *attr)
{
	struct nv_port_attr pa;
	int rc;

	/* The compat entry point fills the fields up to link_layer; the rest stays 0. */
	memset(&pa, 0, sizeof(pa));
	if ((rc = nic->lib->query_port(nic->dev, port, &pa)) != 0)
		return nic_err(rc);
	memset(attr, 0, sizeof(*attr));
	attr->state = (enum sv_port_state)pa.state;
	attr->max_mtu = (enum sv_mtu)pa.max_mtu;
	attr->active_mtu = (enum sv_mtu)pa.active_mtu;
	attr->max_msg_sz = pa.max_msg_sz;
	attr->gid_tbl_len = pa.gid_tbl_len;
	attr->lid = pa.lid;
	attr->link_layer_ethernet = pa.link_layer == NV_LINK_LAYER_ETHERNET;
	return 0;
}

int sv__nic_query_gid(struct sv__nic *nic, uint8_t port, int index, uint8_t gid[16])
{
	union nv_gid g;
	int rc;

	if ((rc = nic->lib->query_gid(nic->dev, port, index, &g)) != 0)
		return nic_err(rc);
	memcpy(gid, g.raw, 16);
	return 0;
}

static const char *port_state_str(int s)
{
	static const char *const names[] = { "NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					     "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };

	return s >= 0 && s < 6 ? names[s] : "unknown";
}

static int mtu_bytes(int m)
{
	return m >= 1 && m <= 5 ? 128 << m : 0;
}

/* One device, as ibv_devinfo prints the essentials. */
static void print_dev(const struct nic_lib *l, struct nv_device *d, FILE *out)
{
	struct nv_context *c = l->open_device(d);
	struct nv_device_attr a;
	struct nv_port_attr pa;
	union nv_gid g;
	char txt[INET6_ADDRSTRLEN];
	uint64_t guid;
	int p, i;

	fprintf(out, "hca_id:\t%s\n", l->get_device_name(d));
	if (!c || l->query_device(c, &a) != 0) {
		fprintf(out, "\t(cannot open or query)\n");
		if (c)
			l->close_device(c);
		return;
	}
	guid = __builtin_bswap64(a.node_guid);
	fprintf(out, "\ttransport:\t\t\tnic (rdma-core, %s)\n", l->verbs_path);
	fprintf(out, "\tfw_ver:\t\t\t\t%s\n", a.fw_ver[0] ? a.fw_ver : "0.0.0");
	fprintf(out, "\tnode_guid:\t\t\t%04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48) & 0xffff,
		(unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		(unsigned)guid & 0xffff);
	fprintf(out, "\tvendor_id:\t\t\t0x%04x\n\tvendor_part_id:\t\t\t%u\n\thw_ver:\t\t\t\t0x%X\n",
		a.vendor_id, a.vendor_part_id, a.hw_ver);
	fprintf(out, "\tmax_qp:\t\t\t\t%d\n\tmax_qp_wr:\t\t\t%d\n\tmax_sge:\t\t\t%d\n"
		"\tmax_cq:\t\t\t\t%d\n\tmax_cqe:\t\t\t%d\n\tmax_mr:\t\t\t\t%d\n"
		"\tmax_mw:\t\t\t\t%d\n\tmax_srq:\t\t\t%d\n\tmax_qp_rd_atom:\t\t\t%d\n"
		"\tatomic_cap:\t\t\t%s\n\tphys_port_cnt:\t\t\t%u\n",
		a.max_qp, a.max_qp_wr, a.max_sge, a.max_cq, a.max_cqe, a.max_mr, a.max_mw,
		a.max_srq, a.max_qp_rd_atom,
		a.atomic_cap == 0 ? "ATOMIC_NONE (0)" : a.atomic_cap == 1 ? "ATOMIC_HCA (1)" :
		"ATOMIC_GLOB (2)", a.phys_port_cnt);
	for (p = 1; p <= a.phys_port_cnt; p++) {
		memset(&pa, 0, sizeof(pa));
		if (l->query_port(c, (uint8_t)p, &pa) != 0)
			continue;
		fprintf(out, "\t\tport:\t%d\n\t\t\tstate:\t\t\t%s (%d)\n"
			"\t\t\tmax_mtu:\t\t%d (%d)\n\t\t\tactive_mtu:\t\t%d (%d)\n"
			"\t\t\tlink_layer:\t\t%s\n", p, port_state_str(pa.state), pa.state,
			mtu_bytes(pa.max_mtu), pa.max_mtu, mtu_bytes(pa.active_mtu),
			pa.active_mtu, pa.link_layer == NV_LINK_LAYER_ETHERNET ? "Ethernet" :
			"InfiniBand");
		for (i = 0; i < pa.gid_tbl_len && i < 16; i++) {
			if (l->query_gid(c, (uint8_t)p, i, &g) != 0)
				break;
			if (!memcmp(g.raw, (uint8_t[16]){ 0 }, 16))
				continue;
			inet_ntop(AF_INET6, g.raw, txt, sizeof(txt));
			fprintf(out, "\t\t\tGID[%2d]:\t\t%s\n", i, txt);
		}
	}
	l->close_device(c);
}

int sv_nic_list_devices(FILE *out)
{
	const struct nic_lib *l;
	struct nv_device **list;
	int rc = 0, n = 0, i;

	if (!(l = sv__nic_lib(&rc)))
		return rc;
	if (!(list = l->get_device_list(&n)))
		return -ENODEV;
	for (i = 0; i < n; i++)
		print_dev(l, list[i], out);
	l->free_device_list(list);
	return n;
}
