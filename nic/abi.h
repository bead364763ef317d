/*
 * abi.h — our own declarations of the parts of libibverbs' and librdmacm's stable ABI the
 * nic backend uses, so the build never needs rdma-core's headers. The layouts are facts of
 * that ABI (libibverbs 1.1 and librdmacm 1 sonames, unchanged since their structs were
 * frozen); test/unit/test_nic_abi.c checks every size and offset here against the real
 * headers wherever they are installed.
 *
 * Only the data path's entry points are read from the context's ops table, as the
 * libibverbs inline functions (ibv_post_send, ibv_poll_cq, ...) do; everything else is a
 * function looked up by name in the loaded library (nic/loader.c).
 *
 * Many of the enums coincide number for number with softverbs' own (opcodes, send
 * flags, access flags, completion status and flags, QP states and types, event types),
 * because include/softverbs.h follows the verbs numbering; test_nic_abi.c asserts
 * that too, and the fast path relies on it (nic/qp.c, nic/cq.c).
 */
#ifndef SV_NIC_ABI_H
#define SV_NIC_ABI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct nv_context;
struct nv_device;
struct nv_qp;
struct nv_cq;
struct nv_srq;
struct nv_pd;
struct nv_mw;
struct nv_mr;
struct nv_ah;
struct nv_send_wr;
struct nv_recv_wr;
struct nv_wc;
struct nv_mw_bind;

union nv_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix;		/* big endian */
		uint64_t interface_id;
	} global;
};

struct nv_device_attr {
	char fw_ver[64];
	uint64_t node_guid;			/* big endian */
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int max_qp;
	int max_qp_wr;
	unsigned int device_cap_flags;
	int max_sge;
	int max_sge_rd;
	int max_cq;
	int max_cqe;
	int max_mr;
	int max_pd;
	int max_qp_rd_atom;
	int max_ee_rd_atom;
	int max_res_rd_atom;
	int max_qp_init_rd_atom;
	int max_ee_init_rd_atom;
	int atomic_cap;
	int max_ee;
	int max_rdd;
	int max_mw;
	int max_raw_ipv6_qp;
	int max_raw_ethy_qp;
	int max_mcast_grp;
	int max_mcast_qp_attach;
	int max_total_mcast_qp_attach;
	int max_ah;
	int max_fmr;
	int max_map_per_fmr;
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

/* Device capability bits we look at (device_cap_flags). */
#define NV_DEVICE_MEM_WINDOW (1u << 17)
#define NV_DEVICE_MEM_WINDOW_TYPE_2B (1u << 24)
#define NV_DEVICE_SRQ_RESIZE (1u << 13)

struct nv_port_attr {
	int state;
	int max_mtu;
	int active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
};

#define NV_LINK_LAYER_ETHERNET 2

struct nv_context_ops {
	void *compat_query_device;
	void *compat_query_port;
	void *compat_alloc_pd;
	void *compat_dealloc_pd;
	void *compat_reg_mr;
	void *compat_rereg_mr;
	void *compat_dereg_mr;
	struct nv_mw *(*alloc_mw)(struct nv_pd *pd, int type);
	int (*bind_mw)(struct nv_qp *qp, struct nv_mw *mw, struct nv_mw_bind *bind);
	int (*dealloc_mw)(struct nv_mw *mw);
	void *compat_create_cq;
	int (*poll_cq)(struct nv_cq *cq, int num_entries, struct nv_wc *wc);
	int (*req_notify_cq)(struct nv_cq *cq, int solicited_only);
	void *compat_cq_event;
	void *compat_resize_cq;
	void *compat_destroy_cq;
	void *compat_create_srq;
	void *compat_modify_srq;
	void *compat_query_srq;
	void *compat_destroy_srq;
	int (*post_srq_recv)(struct nv_srq *srq, struct nv_recv_wr *wr, struct nv_recv_wr **bad);
	void *compat_create_qp;
	void *compat_query_qp;
	void *compat_modify_qp;
	void *compat_destroy_qp;
	int (*post_send)(struct nv_qp *qp, struct nv_send_wr *wr, struct nv_send_wr **bad);
	int (*post_recv)(struct nv_qp *qp, struct nv_recv_wr *wr, struct nv_recv_wr **bad);
	void *compat_create_ah;
	void *compat_destroy_ah;
	void *compat_attach_mcast;
	void *compat_detach_mcast;
	void *compat_async_event;
};

struct nv_context {
	struct nv_device *device;
	struct nv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void *abi_compat;
};

struct nv_pd {
	struct nv_context *context;
	uint32_t handle;
};

struct nv_mr {
	struct nv_context *context;
	struct nv_pd *pd;
	void *addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

struct nv_mw {
	struct nv_context *context;
	struct nv_pd *pd;
	uint32_t rkey;
	uint32_t handle;
	int type;
};

struct nv_comp_channel {
	struct nv_context *context;
	int fd;
	int refcnt;
};

struct nv_cq {
	struct nv_context *context;
	struct nv_comp_channel *channel;
	void *cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
};

struct nv_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

struct nv_srq_init_attr {
	void *srq_context;
	struct nv_srq_attr attr;
};

struct nv_srq {
	struct nv_context *context;
	void *srq_context;
	struct nv_pd *pd;
	uint32_t handle;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

struct nv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct nv_qp_init_attr {
	void *qp_context;
	struct nv_cq *send_cq;
	struct nv_cq *recv_cq;
	struct nv_srq *srq;
	struct nv_qp_cap cap;
	int qp_type;
	int sq_sig_all;
};

struct nv_qp {
	struct nv_context *context;
	void *qp_context;
	struct nv_pd *pd;
	struct nv_cq *send_cq;
	struct nv_cq *recv_cq;
	struct nv_srq *srq;
	uint32_t handle;
	uint32_t qp_num;
	int state;
	int qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

struct nv_global_route {
	union nv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct nv_ah_attr {
	struct nv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

struct nv_ah {
	struct nv_context *context;
	struct nv_pd *pd;
	uint32_t handle;
};

struct nv_qp_attr {
	int qp_state;
	int cur_qp_state;
	int path_mtu;
	int path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;
	struct nv_qp_cap cap;
	struct nv_ah_attr ah_attr;
	struct nv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

/* The QP attribute mask bits, as libibverbs numbers them (IBV_QP_STATE ...). */
#define NV_QP_STATE (1 << 0)
#define NV_QP_CUR_STATE (1 << 1)
#define NV_QP_EN_SQD_ASYNC_NOTIFY (1 << 2)
#define NV_QP_ACCESS_FLAGS (1 << 3)
#define NV_QP_PKEY_INDEX (1 << 4)
#define NV_QP_PORT (1 << 5)
#define NV_QP_QKEY (1 << 6)
#define NV_QP_AV (1 << 7)
#define NV_QP_PATH_MTU (1 << 8)
#define NV_QP_TIMEOUT (1 << 9)
#define NV_QP_RETRY_CNT (1 << 10)
#define NV_QP_RNR_RETRY (1 << 11)
#define NV_QP_RQ_PSN (1 << 12)
#define NV_QP_MAX_QP_RD_ATOMIC (1 << 13)
#define NV_QP_ALT_PATH (1 << 14)
#define NV_QP_MIN_RNR_TIMER (1 << 15)
#define NV_QP_SQ_PSN (1 << 16)
#define NV_QP_MAX_DEST_RD_ATOMIC (1 << 17)
#define NV_QP_PATH_MIG_STATE (1 << 18)
#define NV_QP_CAP (1 << 19)
#define NV_QP_DEST_QPN (1 << 20)

#define NV_QPS_RESET 0
#define NV_QPS_INIT 1
#define NV_QPS_RTR 2
#define NV_QPS_RTS 3
#define NV_QPS_ERR 6

struct nv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct nv_mw_bind_info {
	struct nv_mr *mr;
	uint64_t addr;
	uint64_t length;
	unsigned int mw_access_flags;
};

struct nv_mw_bind {
	uint64_t wr_id;
	unsigned int send_flags;
	struct nv_mw_bind_info bind_info;
};

struct nv_send_wr {
	uint64_t wr_id;
	struct nv_send_wr *next;
	struct nv_sge *sg_list;
	int num_sge;
	int opcode;
	unsigned int send_flags;
	union {
		uint32_t imm_data;		/* big endian */
		uint32_t invalidate_rkey;
	};
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct nv_ah *ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			struct nv_mw *mw;
			uint32_t rkey;
			struct nv_mw_bind_info bind_info;
		} bind_mw;
		struct {
			void *hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	};
};

struct nv_recv_wr {
	uint64_t wr_id;
	struct nv_recv_wr *next;
	struct nv_sge *sg_list;
	int num_sge;
};

struct nv_wc {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	union {
		uint32_t imm_data;		/* big endian */
		uint32_t invalidated_rkey;
	};
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

struct nv_async_event {
	union {
		struct nv_cq *cq;
		struct nv_qp *qp;
		struct nv_srq *srq;
		void *wq;
		int port_num;
	} element;
	int event_type;
};

/* ---------------------------------------------------------------------------------------
 * librdmacm.
 */
struct ncm_event_channel {
	int fd;
};

/* The head of struct rdma_cm_id: the fields we read, up to the two addresses that open
 * its route (what librdmacm's inline rdma_get_local_addr/rdma_get_peer_addr return). */
struct ncm_id {
	struct nv_context *verbs;
	struct ncm_event_channel *channel;
	void *context;
	struct nv_qp *qp;
	struct sockaddr_storage src_addr;
	struct sockaddr_storage dst_addr;
};

struct ncm_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint32_t qp_num;
};

struct ncm_ud_param {
	const void *private_data;
	uint8_t private_data_len;
	struct nv_ah_attr ah_attr;
	uint32_t qp_num;
	uint32_t qkey;
};

struct ncm_event {
	struct ncm_id *id;
	struct ncm_id *listen_id;
	int event;
	int status;
	union {
		struct ncm_conn_param conn;
		struct ncm_ud_param ud;
	} param;
};

enum ncm_event_type {
	NCM_ADDR_RESOLVED,
	NCM_ADDR_ERROR,
	NCM_ROUTE_RESOLVED,
	NCM_ROUTE_ERROR,
	NCM_CONNECT_REQUEST,
	NCM_CONNECT_RESPONSE,
	NCM_CONNECT_ERROR,
	NCM_UNREACHABLE,
	NCM_REJECTED,
	NCM_ESTABLISHED,
	NCM_DISCONNECTED,
	NCM_DEVICE_REMOVAL,
	NCM_MULTICAST_JOIN,
	NCM_MULTICAST_ERROR,
	NCM_ADDR_CHANGE,
	NCM_TIMEWAIT_EXIT,
};

#define NCM_PS_TCP 0x0106
#define NCM_PS_UDP 0x0111

#endif
