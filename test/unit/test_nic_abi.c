/*
 * test_nic_abi.c — nic/abi.h, our own declarations of libibverbs' and librdmacm's ABI,
 * against the real headers: the size of each struct and the offset of each field the
 * nic backend reads or writes, and the enum values it passes through unchanged (the
 * sv_* numbers that coincide with the verbs ones). Compiled against rdma-core's headers
 * only where they were installed when the tree was configured (SV_RDMA_CORE_HEADERS,
 * test/CMakeLists.txt); elsewhere the test skips and says so.
 */
#include <criterion/criterion.h>

#include "nic/abi.h"
#include "softverbs.h"

#ifdef SV_RDMA_CORE_HEADERS
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct layout {
	const char *what;
	size_t ours, theirs;
};

#define SZ(o, t) { "sizeof " #t, sizeof(struct o), sizeof(struct t) }
#define OFF(o, t, f) { #t "." #f, offsetof(struct o, f), offsetof(struct t, f) }
#define VAL(a, b) { #a, (size_t)(a), (size_t)(b) }

static const struct layout layouts[] = {
	SZ(nv_device_attr, ibv_device_attr),
	OFF(nv_device_attr, ibv_device_attr, node_guid),
	OFF(nv_device_attr, ibv_device_attr, device_cap_flags),
	OFF(nv_device_attr, ibv_device_attr, atomic_cap),
	OFF(nv_device_attr, ibv_device_attr, max_mw),
	OFF(nv_device_attr, ibv_device_attr, max_srq_sge),
	OFF(nv_device_attr, ibv_device_attr, local_ca_ack_delay),
	OFF(nv_device_attr, ibv_device_attr, phys_port_cnt),
	SZ(nv_port_attr, ibv_port_attr),
	OFF(nv_port_attr, ibv_port_attr, max_msg_sz),
	OFF(nv_port_attr, ibv_port_attr, lid),
	OFF(nv_port_attr, ibv_port_attr, link_layer),
	SZ(nv_context_ops, ibv_context_ops),
	OFF(nv_context_ops, ibv_context_ops, alloc_mw),
	OFF(nv_context_ops, ibv_context_ops, bind_mw),
	OFF(nv_context_ops, ibv_context_ops, dealloc_mw),
	OFF(nv_context_ops, ibv_context_ops, poll_cq),
	OFF(nv_context_ops, ibv_context_ops, req_notify_cq),
	OFF(nv_context_ops, ibv_context_ops, post_srq_recv),
	OFF(nv_context_ops, ibv_context_ops, post_send),
	OFF(nv_context_ops, ibv_context_ops, post_recv),
	SZ(nv_context, ibv_context),
	OFF(nv_context, ibv_context, ops),
	OFF(nv_context, ibv_context, async_fd),
	SZ(nv_pd, ibv_pd),
	OFF(nv_pd, ibv_pd, handle),
	SZ(nv_mr, ibv_mr),
	OFF(nv_mr, ibv_mr, lkey),
	OFF(nv_mr, ibv_mr, rkey),
	SZ(nv_mw, ibv_mw),
	OFF(nv_mw, ibv_mw, rkey),
	OFF(nv_mw, ibv_mw, type),
	SZ(nv_comp_channel, ibv_comp_channel),
	OFF(nv_comp_channel, ibv_comp_channel, fd),
	SZ(nv_cq, ibv_cq),
	OFF(nv_cq, ibv_cq, cq_context),
	OFF(nv_cq, ibv_cq, cqe),
	SZ(nv_srq, ibv_srq),
	OFF(nv_srq, ibv_srq, srq_context),
	SZ(nv_srq_init_attr, ibv_srq_init_attr),
	OFF(nv_srq_init_attr, ibv_srq_init_attr, attr),
	SZ(nv_srq_attr, ibv_srq_attr),
	SZ(nv_qp, ibv_qp),
	OFF(nv_qp, ibv_qp, qp_context),
	OFF(nv_qp, ibv_qp, qp_num),
	OFF(nv_qp, ibv_qp, state),
	SZ(nv_qp_cap, ibv_qp_cap),
	SZ(nv_qp_init_attr, ibv_qp_init_attr),
	OFF(nv_qp_init_attr, ibv_qp_init_attr, srq),
	OFF(nv_qp_init_attr, ibv_qp_init_attr, cap),
	OFF(nv_qp_init_attr, ibv_qp_init_attr, qp_type),
	OFF(nv_qp_init_attr, ibv_qp_init_attr, sq_sig_all),
	SZ(nv_global_route, ibv_global_route),
	OFF(nv_global_route, ibv_global_route, flow_label),
	OFF(nv_global_route, ibv_global_route, traffic_class),
	SZ(nv_ah_attr, ibv_ah_attr),
	OFF(nv_ah_attr, ibv_ah_attr, is_global),
	OFF(nv_ah_attr, ibv_ah_attr, port_num),
	SZ(nv_ah, ibv_ah),
	SZ(nv_qp_attr, ibv_qp_attr),
	OFF(nv_qp_attr, ibv_qp_attr, qkey),
	OFF(nv_qp_attr, ibv_qp_attr, qp_access_flags),
	OFF(nv_qp_attr, ibv_qp_attr, cap),
	OFF(nv_qp_attr, ibv_qp_attr, ah_attr),
	OFF(nv_qp_attr, ibv_qp_attr, pkey_index),
	OFF(nv_qp_attr, ibv_qp_attr, max_rd_atomic),
	OFF(nv_qp_attr, ibv_qp_attr, max_dest_rd_atomic),
	OFF(nv_qp_attr, ibv_qp_attr, rnr_retry),
	OFF(nv_qp_attr, ibv_qp_attr, rate_limit),
	SZ(nv_sge, ibv_sge),
	SZ(nv_mw_bind_info, ibv_mw_bind_info),
	SZ(nv_mw_bind, ibv_mw_bind),
	OFF(nv_mw_bind, ibv_mw_bind, bind_info),
	SZ(nv_send_wr, ibv_send_wr),
	OFF(nv_send_wr, ibv_send_wr, opcode),
	OFF(nv_send_wr, ibv_send_wr, send_flags),
	OFF(nv_send_wr, ibv_send_wr, imm_data),
	OFF(nv_send_wr, ibv_send_wr, wr.rdma.rkey),
	OFF(nv_send_wr, ibv_send_wr, wr.atomic.swap),
	OFF(nv_send_wr, ibv_send_wr, wr.atomic.rkey),
	OFF(nv_send_wr, ibv_send_wr, wr.ud.ah),
	OFF(nv_send_wr, ibv_send_wr, wr.ud.remote_qkey),
	OFF(nv_send_wr, ibv_send_wr, bind_mw.mw),
	OFF(nv_send_wr, ibv_send_wr, bind_mw.rkey),
	OFF(nv_send_wr, ibv_send_wr, bind_mw.bind_info),
	SZ(nv_recv_wr, ibv_recv_wr),
	SZ(nv_wc, ibv_wc),
	OFF(nv_wc, ibv_wc, status),
	OFF(nv_wc, ibv_wc, vendor_err),
	OFF(nv_wc, ibv_wc, imm_data),
	OFF(nv_wc, ibv_wc, qp_num),
	OFF(nv_wc, ibv_wc, src_qp),
	OFF(nv_wc, ibv_wc, wc_flags),
	SZ(nv_async_event, ibv_async_event),
	OFF(nv_async_event, ibv_async_event, event_type),
	OFF(ncm_id, rdma_cm_id, verbs),
	OFF(ncm_id, rdma_cm_id, channel),
	OFF(ncm_id, rdma_cm_id, context),
	OFF(ncm_id, rdma_cm_id, qp),
	{ "rdma_cm_id.route.addr.src_addr", offsetof(struct ncm_id, src_addr),
	  offsetof(struct rdma_cm_id, route.addr.src_addr) },
	{ "rdma_cm_id.route.addr.dst_addr", offsetof(struct ncm_id, dst_addr),
	  offsetof(struct rdma_cm_id, route.addr.dst_addr) },
	OFF(ncm_event_channel, rdma_event_channel, fd),
	SZ(ncm_conn_param, rdma_conn_param),
	OFF(ncm_conn_param, rdma_conn_param, responder_resources),
	OFF(ncm_conn_param, rdma_conn_param, rnr_retry_count),
	OFF(ncm_conn_param, rdma_conn_param, srq),
	OFF(ncm_conn_param, rdma_conn_param, qp_num),
	SZ(ncm_ud_param, rdma_ud_param),
	OFF(ncm_ud_param, rdma_ud_param, ah_attr),
	OFF(ncm_ud_param, rdma_ud_param, qkey),
	SZ(ncm_event, rdma_cm_event),
	OFF(ncm_event, rdma_cm_event, event),
	OFF(ncm_event, rdma_cm_event, status),
	OFF(ncm_event, rdma_cm_event, param),
};

static const struct layout values[] = {
	VAL(NV_QP_STATE, IBV_QP_STATE), VAL(NV_QP_ACCESS_FLAGS, IBV_QP_ACCESS_FLAGS),
	VAL(NV_QP_DEST_QPN, IBV_QP_DEST_QPN), VAL(NV_QP_MAX_DEST_RD_ATOMIC,
						   IBV_QP_MAX_DEST_RD_ATOMIC),
	VAL(NV_QPS_INIT, IBV_QPS_INIT), VAL(NV_QPS_RTR, IBV_QPS_RTR),
	VAL(NV_QPS_RTS, IBV_QPS_RTS), VAL(NV_QPS_ERR, IBV_QPS_ERR),
	VAL(NV_DEVICE_MEM_WINDOW, IBV_DEVICE_MEM_WINDOW),
	VAL(NV_DEVICE_MEM_WINDOW_TYPE_2B, IBV_DEVICE_MEM_WINDOW_TYPE_2B),
	VAL(NV_DEVICE_SRQ_RESIZE, IBV_DEVICE_SRQ_RESIZE),
	VAL(NV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_ETHERNET),
	VAL(NCM_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_REQUEST),
	VAL(NCM_CONNECT_RESPONSE, RDMA_CM_EVENT_CONNECT_RESPONSE),
	VAL(NCM_DISCONNECTED, RDMA_CM_EVENT_DISCONNECTED),
	VAL(NCM_TIMEWAIT_EXIT, RDMA_CM_EVENT_TIMEWAIT_EXIT),
	VAL(NCM_PS_TCP, RDMA_PS_TCP), VAL(NCM_PS_UDP, RDMA_PS_UDP),
	VAL(SV_CM_PS_IPOIB, RDMA_PS_IPOIB),
	/* softverbs' numbers that pass to the device untranslated. */
	VAL(SV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM),
	VAL(SV_WR_SEND, IBV_WR_SEND), VAL(SV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM),
	VAL(SV_WR_RDMA_READ, IBV_WR_RDMA_READ),
	VAL(SV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP),
	VAL(SV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD),
	VAL(SV_WR_LOCAL_INV, IBV_WR_LOCAL_INV), VAL(SV_WR_BIND_MW, IBV_WR_BIND_MW),
	VAL(SV_WR_SEND_WITH_INV, IBV_WR_SEND_WITH_INV),
	VAL(SV_SEND_FENCE, IBV_SEND_FENCE), VAL(SV_SEND_SIGNALED, IBV_SEND_SIGNALED),
	VAL(SV_SEND_SOLICITED, IBV_SEND_SOLICITED), VAL(SV_SEND_INLINE, IBV_SEND_INLINE),
	VAL(SV_WC_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR),
	VAL(SV_WC_RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR),
	VAL(SV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR), VAL(SV_WC_GENERAL_ERR, IBV_WC_GENERAL_ERR),
	VAL(SV_WC_MW_BIND_ERR, IBV_WC_MW_BIND_ERR),
	VAL(SV_WC_REM_INV_REQ_ERR, IBV_WC_REM_INV_REQ_ERR),
	VAL(SV_WC_RDMA_READ, IBV_WC_RDMA_READ), VAL(SV_WC_COMP_SWAP, IBV_WC_COMP_SWAP),
	VAL(SV_WC_FETCH_ADD, IBV_WC_FETCH_ADD), VAL(SV_WC_BIND_MW, IBV_WC_BIND_MW),
	VAL(SV_WC_LOCAL_INV, IBV_WC_LOCAL_INV), VAL(SV_WC_RECV, IBV_WC_RECV),
	VAL(SV_WC_RECV_RDMA_WITH_IMM, IBV_WC_RECV_RDMA_WITH_IMM),
	VAL(SV_WC_WITH_IMM, IBV_WC_WITH_IMM), VAL(SV_WC_WITH_INV, IBV_WC_WITH_INV),
	VAL(SV_WC_GRH, IBV_WC_GRH),
	VAL(SV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_ATOMIC),
	VAL(SV_ACCESS_MW_BIND, IBV_ACCESS_MW_BIND), VAL(SV_ACCESS_ZERO_BASED, IBV_ACCESS_ZERO_BASED),
	VAL(SV_ACCESS_RELAXED_ORDERING, IBV_ACCESS_RELAXED_ORDERING),
	VAL(SV_REREG_ACCESS, IBV_REREG_MR_CHANGE_ACCESS), VAL(SV_REREG_PD, IBV_REREG_MR_CHANGE_PD),
	VAL(SV_QPT_RC, IBV_QPT_RC), VAL(SV_QPT_UC, IBV_QPT_UC), VAL(SV_QPT_UD, IBV_QPT_UD),
	VAL(SV_QPS_SQE, IBV_QPS_SQE), VAL(SV_QP_CAP, IBV_QP_CAP), VAL(SV_QP_AV, IBV_QP_AV),
	VAL(SV_QP_SQ_PSN, IBV_QP_SQ_PSN), VAL(SV_MTU_1024, IBV_MTU_1024),
	VAL(SV_SRQ_LIMIT, IBV_SRQ_LIMIT), VAL(SV_SRQ_MAX_WR, IBV_SRQ_MAX_WR),
	VAL(SV_MW_TYPE_2, IBV_MW_TYPE_2), VAL(SV_PORT_ACTIVE, IBV_PORT_ACTIVE),
	VAL(SV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_QP_LAST_WQE_REACHED),
	VAL(SV_EVENT_SRQ_LIMIT_REACHED, IBV_EVENT_SRQ_LIMIT_REACHED),
	VAL(SV_EVENT_GID_CHANGE, IBV_EVENT_GID_CHANGE),
	VAL(SV_ATOMIC_HCA, IBV_ATOMIC_HCA),
};

static void check(const struct layout *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		cr_expect_eq(t[i].ours, t[i].theirs, "%s: ours %zu, rdma-core's %zu", t[i].what,
			     t[i].ours, t[i].theirs);
}

Test(nic_abi, layouts_match_rdma_core)
{
	check(layouts, sizeof(layouts) / sizeof(layouts[0]));
}

Test(nic_abi, numbers_match_rdma_core)
{
	check(values, sizeof(values) / sizeof(values[0]));
}

#else

Test(nic_abi, layouts_match_rdma_core)
{
	cr_skip_test("rdma-core's headers (infiniband/verbs.h, rdma/rdma_cma.h) are not "
		     "installed: nothing to compare nic/abi.h with");
}

#endif
