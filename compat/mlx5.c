/*
 * mlx5.c — libmlx5.so.1 stand-in. perftest, pyverbs, libfabric and UCX link the mlx5
 * direct-verbs library and call it only for mlx5 devices; ours are not mlx5 devices, so
 * every entry point rdma-core 44's libmlx5.so.1 exports (objdump -T, listed with their
 * version nodes in symbols.tsv) answers "not supported" as that library does for a
 * device of another driver: pointer-valued ones return NULL with errno EOPNOTSUPP,
 * int-valued ones return EOPNOTSUPP, mlx5dv_devx_get_event() (a read: ssize_t) -1 with
 * errno EOPNOTSUPP, mlx5dv_is_supported() says false, and the void-valued ones
 * (destructors of objects that can never have been made) do nothing.
 *
 * The definitions ignore their arguments, so they are declared without parameters and
 * <infiniband/mlx5dv.h> is not included: under the x86-64 and AArch64 calling conventions
 * the caller owns its arguments and only the return register is read, and each name is
 * placed below by the type its declaration in mlx5dv.h returns.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SVC_EXPORT __attribute__((visibility("default")))

#define PTR(name)                                                                        \
	SVC_EXPORT void *name(void);                                                     \
	void *name(void)                                                                 \
	{                                                                                \
		errno = EOPNOTSUPP;                                                      \
		return NULL;                                                             \
	}
#define INT(name)                                                                        \
	SVC_EXPORT int name(void);                                                       \
	int name(void)                                                                   \
	{                                                                                \
		errno = EOPNOTSUPP;                                                      \
		return EOPNOTSUPP;                                                       \
	}
#define VOID(name)                                                                       \
	SVC_EXPORT void name(void);                                                      \
	void name(void)                                                                  \
	{                                                                                \
	}

SVC_EXPORT bool mlx5dv_is_supported(void);
bool mlx5dv_is_supported(void)
{
	return false;
}

/* Reads events of a DEVX channel, which no call here can have made. */
SVC_EXPORT ssize_t mlx5dv_devx_get_event(void);
ssize_t mlx5dv_devx_get_event(void)
{
	errno = EOPNOTSUPP;
	return -1;
}

/* Pointer-valued: NULL, errno EOPNOTSUPP. */
PTR(mlx5dv_alloc_dm)
PTR(mlx5dv_alloc_var)
PTR(mlx5dv_create_cq)
PTR(mlx5dv_create_flow)
PTR(mlx5dv_create_flow_action_esp)
PTR(mlx5dv_create_flow_action_modify_header)
PTR(mlx5dv_create_flow_action_packet_reformat)
PTR(mlx5dv_create_flow_matcher)
PTR(mlx5dv_create_mkey)
PTR(mlx5dv_create_qp)
PTR(mlx5dv_create_steering_anchor)
PTR(mlx5dv_create_wq)
PTR(mlx5dv_crypto_login_create)
PTR(mlx5dv_dek_create)
PTR(mlx5dv_devx_alloc_msi_vector)
PTR(mlx5dv_devx_alloc_uar)
PTR(mlx5dv_devx_create_cmd_comp)
PTR(mlx5dv_devx_create_eq)
PTR(mlx5dv_devx_create_event_channel)
PTR(mlx5dv_devx_obj_create)
PTR(mlx5dv_devx_umem_reg)
PTR(mlx5dv_devx_umem_reg_ex)
PTR(mlx5dv_dm_map_op_addr)
PTR(mlx5dv_dr_action_create_aso)
PTR(mlx5dv_dr_action_create_default_miss)
PTR(mlx5dv_dr_action_create_dest_array)
PTR(mlx5dv_dr_action_create_dest_devx_tir)
PTR(mlx5dv_dr_action_create_dest_ib_port)
PTR(mlx5dv_dr_action_create_dest_ibv_qp)
PTR(mlx5dv_dr_action_create_dest_root_table)
PTR(mlx5dv_dr_action_create_dest_table)
PTR(mlx5dv_dr_action_create_dest_vport)
PTR(mlx5dv_dr_action_create_drop)
PTR(mlx5dv_dr_action_create_flow_counter)
PTR(mlx5dv_dr_action_create_flow_meter)
PTR(mlx5dv_dr_action_create_flow_sampler)
PTR(mlx5dv_dr_action_create_modify_header)
PTR(mlx5dv_dr_action_create_packet_reformat)
PTR(mlx5dv_dr_action_create_pop_vlan)
PTR(mlx5dv_dr_action_create_push_vlan)
PTR(mlx5dv_dr_action_create_tag)
PTR(mlx5dv_dr_domain_create)
PTR(mlx5dv_dr_matcher_create)
PTR(mlx5dv_dr_rule_create)
PTR(mlx5dv_dr_table_create)
PTR(mlx5dv_get_vfio_device_list)
PTR(mlx5dv_open_device)
PTR(mlx5dv_pp_alloc)
PTR(mlx5dv_qp_ex_from_ibv_qp_ex)
PTR(mlx5dv_sched_leaf_create)
PTR(mlx5dv_sched_node_create)

/* Int-valued: EOPNOTSUPP. */
INT(mlx5dv_crypto_login)
INT(mlx5dv_crypto_login_destroy)
INT(mlx5dv_crypto_login_query)
INT(mlx5dv_crypto_login_query_state)
INT(mlx5dv_crypto_logout)
INT(mlx5dv_dci_stream_id_reset)
INT(mlx5dv_dek_destroy)
INT(mlx5dv_dek_query)
INT(mlx5dv_destroy_flow_matcher)
INT(mlx5dv_destroy_mkey)
INT(mlx5dv_destroy_steering_anchor)
INT(mlx5dv_devx_cq_modify)
INT(mlx5dv_devx_cq_query)
INT(mlx5dv_devx_destroy_eq)
INT(mlx5dv_devx_free_msi_vector)
INT(mlx5dv_devx_general_cmd)
INT(mlx5dv_devx_get_async_cmd_comp)
INT(mlx5dv_devx_ind_tbl_modify)
INT(mlx5dv_devx_ind_tbl_query)
INT(mlx5dv_devx_obj_destroy)
INT(mlx5dv_devx_obj_modify)
INT(mlx5dv_devx_obj_query)
INT(mlx5dv_devx_obj_query_async)
INT(mlx5dv_devx_qp_modify)
INT(mlx5dv_devx_qp_query)
INT(mlx5dv_devx_query_eqn)
INT(mlx5dv_devx_srq_modify)
INT(mlx5dv_devx_srq_query)
INT(mlx5dv_devx_subscribe_devx_event)
INT(mlx5dv_devx_subscribe_devx_event_fd)
INT(mlx5dv_devx_umem_dereg)
INT(mlx5dv_devx_wq_modify)
INT(mlx5dv_devx_wq_query)
INT(mlx5dv_dr_action_destroy)
INT(mlx5dv_dr_action_modify_aso)
INT(mlx5dv_dr_action_modify_flow_meter)
INT(mlx5dv_dr_aso_other_domain_link)
INT(mlx5dv_dr_aso_other_domain_unlink)
INT(mlx5dv_dr_domain_destroy)
INT(mlx5dv_dr_domain_sync)
INT(mlx5dv_dr_matcher_destroy)
INT(mlx5dv_dr_matcher_set_layout)
INT(mlx5dv_dr_rule_destroy)
INT(mlx5dv_dr_table_destroy)
INT(mlx5dv_dump_dr_domain)
INT(mlx5dv_dump_dr_matcher)
INT(mlx5dv_dump_dr_rule)
INT(mlx5dv_dump_dr_table)
INT(mlx5dv_get_clock_info)
INT(mlx5dv_init_obj)
INT(mlx5dv_map_ah_to_qp)
INT(_mlx5dv_mkey_check)
INT(mlx5dv_modify_qp_lag_port)
INT(mlx5dv_modify_qp_sched_elem)
INT(mlx5dv_modify_qp_udp_sport)
INT(mlx5dv_qp_cancel_posted_send_wrs)
INT(mlx5dv_query_device)
INT(_mlx5dv_query_port)
INT(mlx5dv_query_qp_lag_port)
INT(mlx5dv_reserved_qpn_alloc)
INT(mlx5dv_reserved_qpn_dealloc)
INT(mlx5dv_sched_leaf_destroy)
INT(mlx5dv_sched_leaf_modify)
INT(mlx5dv_sched_node_destroy)
INT(mlx5dv_sched_node_modify)
INT(mlx5dv_set_context_attr)
INT(mlx5dv_vfio_get_events_fd)
INT(mlx5dv_vfio_process_events)

/* Destructors and setters of objects no call above can have made. */
VOID(mlx5dv_devx_destroy_cmd_comp)
VOID(mlx5dv_devx_destroy_event_channel)
VOID(mlx5dv_devx_free_uar)
VOID(mlx5dv_dr_domain_allow_duplicate_rules)
VOID(mlx5dv_dr_domain_set_reclaim_device_memory)
VOID(mlx5dv_free_var)
VOID(mlx5dv_pp_free)
