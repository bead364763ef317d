/*
 * verbs_mr.c — libibverbs drop-in: protection domains, memory regions and memory windows.
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
	if ((rc = sv_alloc_pd(svc_ctx_sv(to_ctx(ctx)), &pd->sv)) < 0) {
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
int svc_access_from_ibv(int access, unsigned *out)
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
	if ((rc = svc_access_from_ibv((int)access, &a))) {
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
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (rc = svc_access_from_ibv(access, &a))) {
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

struct sv_mr *svc_mr_sv(struct ibv_mr *mr)
{
	return mr ? container_of(mr, struct svc_mr, mr)->sv : NULL;
}

struct sv_mw *svc_mw_sv(struct ibv_mw *mw)
{
	return mw ? container_of(mw, struct svc_mw, mw)->sv : NULL;
}

struct ibv_mw *svc_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
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

int svc_dealloc_mw(struct ibv_mw *ibmw)
{
	int rc;

	if ((rc = sv_dealloc_mw(svc_mw_sv(ibmw))) < 0)
		return svc_errno(rc);
	free(container_of(ibmw, struct svc_mw, mw));
	return 0;
}

/* ibv_bind_mw() (type 1): the new key is the window's key from now on (ibv_bind_mw(3)). */
int svc_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct sv_mw_bind b = {
		.wr_id = bind->wr_id,
		.send_flags = bind->send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED),
		.bind_info = {
			.mr = svc_mr_sv(bind->bind_info.mr),
			.addr = bind->bind_info.addr,
			.length = bind->bind_info.length,
			.mw_access_flags = bind->bind_info.mw_access_flags,
		},
	};
	int rc;

	if ((rc = sv_bind_mw(to_qp(qp)->sv, svc_mw_sv(mw), &b)) < 0)
		return svc_errno(rc);
	mw->rkey = svc_mw_sv(mw)->rkey;
	return 0;
}
