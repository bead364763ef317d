/*
 * errors.c — names and messages: sv_strerror() for the negative errno values every sv_
 * call returns (worded for what they mean in verbs terms, so a user can act on them),
 * and the name tables of completion statuses, QP states, async and CM events.
 */
#include <errno.h>
#include <string.h>

#include "softverbs.h"

const char *sv_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument (bad attribute, mask, state transition or QP state)";
	case ENOMEM:
		return "out of resources (queue full, device limit or memory)";
	case EBUSY:
		return "object in use (destroy its dependents or acknowledge its events first)";
	case EAGAIN:
		return "no event pending (non-blocking channel)";
	case EACCES:
		return "memory access denied (key, protection domain, bounds or access flags)";
	case ENOENT:
		return "no such memory key (never registered, deregistered or stale)";
	case EPERM:
		return "memory key belongs to another protection domain";
	case ERANGE:
		return "access outside the memory region";
	case EOVERFLOW:
		return "overflow (address range wraps, or the CQ overran)";
	case EOPNOTSUPP:
		return "operation not supported by this QP or transport";
	case EPROTONOSUPPORT:
		return "transport not available in this build";
	case ECONNREFUSED:
		return "connection refused (no listener, or the peer rejected it)";
	case ECONNRESET:
		return "connection reset by the peer";
	case ETIMEDOUT:
		return "timed out (peer unreachable or not answering)";
	case EHOSTUNREACH:
		return "peer unreachable";
	case ENOTCONN:
		return "not connected";
	case EISCONN:
		return "already connected, connecting or listening";
	case EADDRINUSE:
		return "address already in use";
	case EADDRNOTAVAIL:
		return "address not available on this host";
	case EPROTO:
		return "protocol error (the peer broke the iWARP/MPA rules or sent a Terminate)";
	case EBADMSG:
		return "malformed message";
	case EMSGSIZE:
		return "message too long";
	default:
		return strerror(err);
	}
}

const char *sv_wc_status_str(enum sv_wc_status status)
{
	static const char *const names[] = {
		[SV_WC_SUCCESS] = "success",
		[SV_WC_LOC_LEN_ERR] = "local length error",
		[SV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[SV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[SV_WC_LOC_PROT_ERR] = "local protection error",
		[SV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[SV_WC_MW_BIND_ERR] = "memory bind operation error",
		[SV_WC_BAD_RESP_ERR] = "bad response error",
		[SV_WC_LOC_ACCESS_ERR] = "local access error",
		[SV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[SV_WC_REM_ACCESS_ERR] = "remote access error",
		[SV_WC_REM_OP_ERR] = "remote operation error",
		[SV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[SV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[SV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[SV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[SV_WC_REM_ABORT_ERR] = "operation aborted",
		[SV_WC_INV_EECN_ERR] = "invalid EE context number",
		[SV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[SV_WC_FATAL_ERR] = "fatal error",
		[SV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[SV_WC_GENERAL_ERR] = "general error",
	};

	if ((unsigned)status < sizeof(names) / sizeof(names[0]) && names[status])
		return names[status];
	return "unknown";
}

const char *sv_qp_state_str(enum sv_qp_state state)
{
	static const char *const names[] = {
		[SV_QPS_RESET] = "RESET", [SV_QPS_INIT] = "INIT", [SV_QPS_RTR] = "RTR",
		[SV_QPS_RTS] = "RTS", [SV_QPS_SQD] = "SQD", [SV_QPS_SQE] = "SQE",
		[SV_QPS_ERR] = "ERR", [SV_QPS_UNKNOWN] = "UNKNOWN",
	};

	if ((unsigned)state < sizeof(names) / sizeof(names[0]))
		return names[state];
	return "UNKNOWN";
}

const char *sv_event_type_str(enum sv_event_type type)
{
	static const char *const names[] = {
		[SV_EVENT_CQ_ERR] = "CQ error",
		[SV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[SV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[SV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[SV_EVENT_COMM_EST] = "communication established",
		[SV_EVENT_SQ_DRAINED] = "send queue drained",
		[SV_EVENT_PATH_MIG] = "path migrated",
		[SV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[SV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[SV_EVENT_PORT_ACTIVE] = "port active",
		[SV_EVENT_PORT_ERR] = "port error",
		[SV_EVENT_LID_CHANGE] = "LID change",
		[SV_EVENT_PKEY_CHANGE] = "P_Key change",
		[SV_EVENT_SM_CHANGE] = "SM change",
		[SV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[SV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[SV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[SV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[SV_EVENT_GID_CHANGE] = "GID table change",
	};

	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}

const char *sv_cm_event_str(enum sv_cm_event_type type)
{
	static const char *const names[] = {
		[SV_CM_EVENT_CONNECT_REQUEST] = "CONNECT_REQUEST",
		[SV_CM_EVENT_CONNECT_RESPONSE] = "CONNECT_RESPONSE",
		[SV_CM_EVENT_CONNECT_ERROR] = "CONNECT_ERROR",
		[SV_CM_EVENT_UNREACHABLE] = "UNREACHABLE",
		[SV_CM_EVENT_REJECTED] = "REJECTED",
		[SV_CM_EVENT_ESTABLISHED] = "ESTABLISHED",
		[SV_CM_EVENT_DISCONNECTED] = "DISCONNECTED",
		[SV_CM_EVENT_DEVICE_REMOVAL] = "DEVICE_REMOVAL",
		[SV_CM_EVENT_TIMEWAIT_EXIT] = "TIMEWAIT_EXIT",
	};

	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "UNKNOWN";
}
