/*
 * test_core_mr.c — memory registration and the key checks of doc/verbs.md section 6:
 * every error of sv__mr_acquire() in its documented order, stale keys after reuse of a
 * slot, local (lkey) mapping, and deregistration waiting for in-flight remote access.
 */
#include <fcntl.h>
#include <pthread.h>
#include <time.h>

#include "test_core_double.h"

static struct dbl_env env;
static uint8_t buf[4096];

static void setup(void)
{
	dbl_open(&env, 64, 4);
	dbl_to_rts(env.qp);
}

static void teardown(void)
{
	dbl_close(&env);
}

TestSuite(core_mr, .init = setup, .fini = teardown, .timeout = 20);

#define ALL_REMOTE (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | \
		    SV_ACCESS_REMOTE_READ | SV_ACCESS_REMOTE_ATOMIC)

Test(core_mr, registration_rules)
{
	struct sv_mr *mr;

	cr_assert_eq(sv_reg_mr(env.pd, buf, sizeof(buf), SV_ACCESS_REMOTE_WRITE, &mr), -EINVAL);
	cr_assert_eq(sv_reg_mr(env.pd, buf, sizeof(buf), SV_ACCESS_REMOTE_ATOMIC, &mr), -EINVAL);
	cr_assert_eq(sv_reg_mr(env.pd, buf, sizeof(buf), 1u << 12, &mr), -EINVAL);
	cr_assert_eq(sv_reg_mr(env.pd, buf, sizeof(buf), SV_ACCESS_REMOTE_READ, &mr), 0);
	cr_assert_eq(mr->lkey, mr->rkey);
	cr_assert_neq(mr->lkey >> 8, 0);
	cr_assert_eq(mr->addr, buf);
	cr_assert_eq(mr->length, sizeof(buf));
	cr_assert_eq(sv_dealloc_pd(env.pd), -EBUSY);
	cr_assert_eq(sv_dereg_mr(mr), 0);
}

Test(core_mr, acquire_errors_in_order)
{
	struct sv_pd *pd2;
	struct sv_mr *mr, *ro, *other;
	struct sv__mr *ref;
	void *p;
	struct sv_qp_attr a = { .qp_access_flags = SV_ACCESS_REMOTE_WRITE };
	uint64_t va = (uintptr_t)buf;

	cr_assert_eq(sv_reg_mr(env.pd, buf, sizeof(buf), ALL_REMOTE, &mr), 0);
	cr_assert_eq(sv_reg_mr(env.pd, buf, 64, SV_ACCESS_REMOTE_READ, &ro), 0);
	cr_assert_eq(sv_alloc_pd(env.ctx, &pd2), 0);
	cr_assert_eq(sv_reg_mr(pd2, buf, sizeof(buf), ALL_REMOTE, &other), 0);

	/* Success, with the host pointer of va. */
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va + 100, 10, SV_ACCESS_REMOTE_WRITE,
				    &ref, &p), 0);
	cr_assert_eq(p, buf + 100);
	sv__mr_release(ref);
	/* Whole region, and a zero length at the very end, are inside. */
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va, sizeof(buf), SV_ACCESS_REMOTE_READ,
				    &ref, &p), 0);
	sv__mr_release(ref);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va + sizeof(buf), 0,
				    SV_ACCESS_REMOTE_READ, &ref, &p), 0);
	sv__mr_release(ref);

	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey ^ 0x01, va, 8, SV_ACCESS_REMOTE_READ,
				    &ref, &p), -ENOENT);	/* wrong 8-bit key */
	cr_assert_eq(sv__mr_acquire(env.qp, 0x00ffff00, va, 8, SV_ACCESS_REMOTE_READ, &ref, &p),
		     -ENOENT);				/* index never used */
	cr_assert_eq(sv__mr_acquire(env.qp, 0x000000ab, va, 8, SV_ACCESS_REMOTE_READ, &ref, &p),
		     -ENOENT);				/* index 0 */
	cr_assert_eq(sv__mr_acquire(env.qp, other->rkey, va, 8, SV_ACCESS_REMOTE_READ,
				    &ref, &p), -EPERM);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, UINT64_MAX - 3, 8, SV_ACCESS_REMOTE_READ,
				    &ref, &p), -EOVERFLOW);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va + 4090, 8, SV_ACCESS_REMOTE_READ,
				    &ref, &p), -ERANGE);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va - 1, 8, SV_ACCESS_REMOTE_READ,
				    &ref, &p), -ERANGE);
	cr_assert_eq(sv__mr_acquire(env.qp, ro->rkey, va, 8, SV_ACCESS_REMOTE_WRITE, &ref, &p),
		     -EACCES);
	cr_assert_eq(sv__mr_acquire(env.qp, ro->rkey, va, 8, SV_ACCESS_REMOTE_ATOMIC, &ref, &p),
		     -EACCES);
	/* The QP's own access flags come first: with only REMOTE_WRITE enabled, a READ is
	 * refused even with a bad key. */
	cr_assert_eq(sv_modify_qp(env.qp, &a, SV_QP_ACCESS_FLAGS), 0);
	cr_assert_eq(sv__mr_acquire(env.qp, 0x00ffff00, va, 8, SV_ACCESS_REMOTE_READ, &ref, &p),
		     -EOPNOTSUPP);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va, 8, SV_ACCESS_REMOTE_ATOMIC, &ref, &p),
		     -EOPNOTSUPP);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, va, 8, SV_ACCESS_REMOTE_WRITE, &ref, &p),
		     0);
	sv__mr_release(ref);

	cr_assert_eq(sv_dereg_mr(other), 0);
	cr_assert_eq(sv_dealloc_pd(pd2), 0);
	cr_assert_eq(sv_dereg_mr(ro), 0);
	cr_assert_eq(sv_dereg_mr(mr), 0);
}

Test(core_mr, zero_based_uses_offsets)
{
	struct sv_mr *mr;
	struct sv__mr *ref;
	void *p;

	cr_assert_eq(sv_reg_mr(env.pd, buf + 16, 256, ALL_REMOTE | SV_ACCESS_ZERO_BASED, &mr), 0);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, 0, 256, SV_ACCESS_REMOTE_READ, &ref, &p), 0);
	cr_assert_eq(p, buf + 16);
	sv__mr_release(ref);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, 200, 56, SV_ACCESS_REMOTE_READ, &ref, &p), 0);
	cr_assert_eq(p, buf + 216);
	sv__mr_release(ref);
	cr_assert_eq(sv__mr_acquire(env.qp, mr->rkey, 200, 57, SV_ACCESS_REMOTE_READ, &ref, &p),
		     -ERANGE);
	cr_assert_eq(sv_dereg_mr(mr), 0);
}

Test(core_mr, stale_key_after_reuse_of_the_slot)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_mr *a, *b = NULL;
	uint32_t old;
	int tries;

	/* max_mr 4: a table of 256 slots, so a new registration lands in the freed slot
	 * within a few hundred tries (probability 1/255 each; 100000 tries miss with
	 * probability below e^-390). */
	sv_device_opts_init(&o);
	o.max_mr = 4;
	cr_assert_eq(sv__open_device_with_ops(&o, &dbl_ops, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_reg_mr(pd, buf, 64, ALL_REMOTE, &a), 0);
	old = a->rkey;
	cr_assert_eq(sv_dereg_mr(a), 0);
	for (tries = 0; tries < 100000; tries++) {
		cr_assert_eq(sv_reg_mr(pd, buf, 64, ALL_REMOTE, &b), 0);
		cr_assert_neq(b->rkey, old, "a stale key never names a new region");
		if (sv__key_index(ctx, b->rkey) == sv__key_index(ctx, old))
			break;
		cr_assert_eq(sv_dereg_mr(b), 0);
	}
	cr_assert_lt(tries, 100000, "the freed slot is used again");
	pthread_rwlock_rdlock(&ctx->mr_lock);
	cr_assert_null(sv__mr_lookup(ctx, old), "the old key names nothing");
	cr_assert_not_null(sv__mr_lookup(ctx, b->rkey));
	pthread_rwlock_unlock(&ctx->mr_lock);
	cr_assert_eq(sv_dereg_mr(b), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

Test(core_mr, sge_map_checks_every_lkey)
{
	struct sv_mr *rw, *ro;
	struct sv_pd *pd2;
	struct sv_mr *other;
	struct iovec iov[4];
	struct sv_sge sge[3];
	struct sv__pins pins;

	cr_assert_eq(sv_reg_mr(env.pd, buf, 1024, SV_ACCESS_LOCAL_WRITE, &rw), 0);
	cr_assert_eq(sv_reg_mr(env.pd, buf + 1024, 1024, 0, &ro), 0);
	cr_assert_eq(sv_alloc_pd(env.ctx, &pd2), 0);
	cr_assert_eq(sv_reg_mr(pd2, buf, 1024, SV_ACCESS_LOCAL_WRITE, &other), 0);

	sge[0] = (struct sv_sge){ (uintptr_t)buf + 10, 20, rw->lkey };
	sge[1] = (struct sv_sge){ 0, 0, 0xdeadbeef };	/* zero length: skipped unchecked */
	sge[2] = (struct sv_sge){ (uintptr_t)buf + 1024, 1024, ro->lkey };
	cr_assert_eq(sv__sge_map(env.qp, sge, 3, false, iov, &pins), 2);
	cr_assert_eq(iov[0].iov_base, buf + 10);
	cr_assert_eq(iov[0].iov_len, 20);
	cr_assert_eq(iov[1].iov_base, buf + 1024);
	cr_assert_eq(iov[1].iov_len, 1024);
	/* One reference per region, released together. */
	cr_assert_eq(pins.n, 2);
	cr_assert_eq(atomic_load(&container_of(rw, struct sv__mr, pub)->inflight), 1);
	sv__pins_release(&pins);
	cr_assert_eq(pins.n, 0);
	cr_assert_eq(atomic_load(&container_of(rw, struct sv__mr, pub)->inflight), 0);
	cr_assert_eq(atomic_load(&container_of(ro, struct sv__mr, pub)->inflight), 0);
	/* Two SGEs in one region: one reference. */
	sge[1] = (struct sv_sge){ (uintptr_t)buf + 100, 20, rw->lkey };
	cr_assert_eq(sv__sge_map(env.qp, sge, 2, true, iov, &pins), 2);
	cr_assert_eq(pins.n, 1);
	sv__pins_release(&pins);
	sge[1] = (struct sv_sge){ 0, 0, 0xdeadbeef };
	/* Writing needs LOCAL_WRITE on every region; a failed map keeps no reference. */
	cr_assert_eq(sv__sge_map(env.qp, sge, 3, true, iov, &pins), -EACCES);
	cr_assert_eq(pins.n, 0);
	cr_assert_eq(atomic_load(&container_of(rw, struct sv__mr, pub)->inflight), 0);
	cr_assert_eq(sv__sge_map(env.qp, sge, 2, true, iov, &pins), 1);
	sv__pins_release(&pins);
	/* Bounds, PD and key. */
	sge[0].length = 1015;
	cr_assert_eq(sv__sge_map(env.qp, sge, 1, false, iov, &pins), -EACCES);
	sge[0] = (struct sv_sge){ (uintptr_t)buf, 8, other->lkey };
	cr_assert_eq(sv__sge_map(env.qp, sge, 1, false, iov, &pins), -EACCES);
	sge[0].lkey = rw->lkey + 1;
	cr_assert_eq(sv__sge_map(env.qp, sge, 1, false, iov, &pins), -EACCES);

	cr_assert_eq(sv_dereg_mr(other), 0);
	cr_assert_eq(sv_dealloc_pd(pd2), 0);
	cr_assert_eq(sv_dereg_mr(ro), 0);
	cr_assert_eq(sv_dereg_mr(rw), 0);
}

Test(core_mr, table_full_is_enomem)
{
	struct sv_device_opts o;
	struct sv_context *ctx;
	struct sv_pd *pd;
	struct sv_mr *m[3];

	sv_device_opts_init(&o);
	o.max_mr = 2;
	cr_assert_eq(sv__open_device_with_ops(&o, &dbl_ops, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
	cr_assert_eq(sv_reg_mr(pd, buf, 8, 0, &m[0]), 0);
	cr_assert_eq(sv_reg_mr(pd, buf, 8, 0, &m[1]), 0);
	cr_assert_eq(sv_reg_mr(pd, buf, 8, 0, &m[2]), -ENOMEM);
	cr_assert_eq(sv_close_device(ctx), -EBUSY);
	cr_assert_eq(sv_dereg_mr(m[0]), 0);
	cr_assert_eq(sv_reg_mr(pd, buf, 8, 0, &m[2]), 0);
	cr_assert_eq(sv_dereg_mr(m[1]), 0);
	cr_assert_eq(sv_dereg_mr(m[2]), 0);
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

struct dereg_arg {
	struct sv_mr *mr;
	atomic_int done;
	_Atomic pid_t tid;		/* the dereg thread's id, once it runs */
};

static void *dereg_thread(void *p)
{
	struct dereg_arg *a = p;

	a->tid = tb_self();
	cr_assert_eq(sv_dereg_mr(a->mr), 0);
	a->done = 1;
	return NULL;
}

Test(core_mr, dereg_waits_for_inflight_access)
{
	struct dereg_arg a = { 0 };
	struct sv__mr *ref;
	pthread_t t;
	void *p;
	uint32_t key;

	cr_assert_eq(sv_reg_mr(env.pd, buf, 64, ALL_REMOTE, &a.mr), 0);
	key = a.mr->rkey;
	cr_assert_eq(sv__mr_acquire(env.qp, key, (uintptr_t)buf, 8, SV_ACCESS_REMOTE_WRITE,
				    &ref, &p), 0);
	cr_assert_eq(pthread_create(&t, NULL, dereg_thread, &a), 0);
	/* The key is refused as soon as dereg started, but dereg has not returned. */
	for (int i = 0; i < 1000; i++) {
		struct sv__mr *r2;
		void *p2;

		if (sv__mr_acquire(env.qp, key, (uintptr_t)buf, 8, SV_ACCESS_REMOTE_WRITE,
				   &r2, &p2) == -ENOENT)
			break;
		sv__mr_release(r2);
		usleep(1000);
	}
	/* Asleep on the context's dereg_cond (core/mr.c, wait_inflight) is where the wait
	 * for the reference in flight is; a dereg that did not wait would have returned. */
	cr_assert(tb_wait_blocked(&a.tid, tb_in_cond_wait, &env.ctx->dereg_cond, 5000),
		  "dereg never waited for the reference in flight");
	cr_assert_eq(a.done, 0, "dereg returned while a remote access was in flight");
	memset(p, 0x5a, 8);			/* the access may still complete */
	sv__mr_release(ref);
	pthread_join(t, NULL);
	cr_assert_eq(a.done, 1);
}

/* Posts one receive of len bytes at p (lkey of mr) on qp and plays the transport: takes
 * it and maps it (which pins mr). */
static struct sv__recv_wqe *take_mapped_recv(struct sv_qp *qp, struct sv_mr *mr, void *p,
					     uint32_t len)
{
	struct sv_sge sge = { (uintptr_t)p, len, mr->lkey };
	struct sv_recv_wr wr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct sv__recv_wqe *w;
	struct iovec iov[2];

	cr_assert_eq(sv_post_recv(qp, &wr, &bad), 0);
	sv__qp_lock(qp);
	cr_assert_eq(sv__rq_take(qp, &w), 0);
	cr_assert_eq(sv__rq_map(qp, w, iov), 1);
	cr_assert_eq(iov[0].iov_base, p);
	sv__qp_unlock(qp);
	return w;
}

struct dereg_seen {
	struct sv_mr *mr;
	atomic_int completed;		/* set by the test just before it completes the WQE */
	atomic_int saw_completed;	/* what the dereg thread saw when its call returned */
};

static void *dereg_watch(void *p)
{
	struct dereg_seen *a = p;

	cr_assert_eq(sv_dereg_mr(a->mr), 0);
	a->saw_completed = a->completed;
	return NULL;
}

/* A receive being filled pins its region: deregistration waits for its completion (or,
 * on a machine slow enough to pass SV_DEREG_BOUND_MS first, fails the QP; either way it
 * never returns while the receive may still be written). */
Test(core_mr, dereg_waits_for_a_mapped_receive)
{
	struct dereg_seen a = { 0 };
	struct sv__recv_wqe *w;
	pthread_t t;
	struct sv__mr *r;
	void *p;

	cr_assert_eq(sv_reg_mr(env.pd, buf, 64, ALL_REMOTE, &a.mr), 0);
	w = take_mapped_recv(env.qp, a.mr, buf, 64);
	cr_assert_eq(atomic_load(&container_of(a.mr, struct sv__mr, pub)->inflight), 1);
	cr_assert_eq(pthread_create(&t, NULL, dereg_watch, &a), 0);
	/* Once its key is refused the deregistration is waiting. */
	while (sv__mr_acquire(env.qp, a.mr->rkey, (uintptr_t)buf, 8, SV_ACCESS_REMOTE_WRITE,
			      &r, &p) == 0) {
		sv__mr_release(r);
		usleep(1000);
	}
	a.completed = 1;
	sv__qp_lock(env.qp);
	sv__rq_done(env.qp, w, SV_WC_SUCCESS, SV_WC_RECV, 64, 0, 0, false);
	sv__qp_unlock(env.qp);
	pthread_join(t, NULL);
	cr_assert(a.saw_completed || env.qp->state == SV_QPS_ERR,
		  "dereg returned while the receive could still be written");
}

/* Nothing completes the pinned receive (a stalled peer): deregistration returns after its
 * bound, the pinning QP is in ERR, the WQE that used the region failed with LOC_PROT_ERR
 * (and no async event: the completion says it), and a QP that pins another region of
 * the PD is left alone. */
Test(core_mr, dereg_bound_fails_only_the_pinning_qp)
{
	struct sv_mr *mr, *other;
	struct sv_qp *qp2;
	struct sv__recv_wqe *w2;
	struct sv_async_event ae;
	struct sv_wc wc;
	int errs;

	cr_assert_eq(sv_reg_mr(env.pd, buf, 64, SV_ACCESS_LOCAL_WRITE, &mr), 0);
	cr_assert_eq(sv_reg_mr(env.pd, buf + 64, 64, SV_ACCESS_LOCAL_WRITE, &other), 0);
	qp2 = dbl_qp(&env, 4);
	dbl_to_rts(qp2);
	(void)take_mapped_recv(env.qp, mr, buf, 64);
	w2 = take_mapped_recv(qp2, other, buf + 64, 64);
	errs = dbl_qp_error_calls;

	cr_assert_eq(sv_dereg_mr(mr), 0);
	cr_assert_eq(env.qp->state, SV_QPS_ERR);
	cr_assert_eq(dbl_qp_error_calls, errs + 1, "qp_error tells the transport to stop");
	cr_assert_eq(sv_poll_cq(env.cq, 1, &wc), 1);
	cr_assert_eq(wc.wr_id, 77);
	cr_assert_eq(wc.qp_num, env.qp->qp_num);
	cr_assert_eq(wc.status, SV_WC_LOC_PROT_ERR);
	{
		int fd = sv_async_fd(env.ctx);

		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		cr_assert_eq(sv_get_async_event(env.ctx, &ae), -EAGAIN, "an async event");
	}

	cr_assert_eq(qp2->state, SV_QPS_RTS, "a QP that did not pin the region was failed");
	cr_assert_eq(atomic_load(&container_of(other, struct sv__mr, pub)->inflight), 1);
	sv__qp_lock(qp2);
	sv__rq_done(qp2, w2, SV_WC_SUCCESS, SV_WC_RECV, 64, 0, 0, false);
	sv__qp_unlock(qp2);
	cr_assert_eq(atomic_load(&container_of(other, struct sv__mr, pub)->inflight), 0);
	cr_assert_eq(sv_poll_cq(env.cq, 1, &wc), 1);
	cr_assert_eq(wc.status, SV_WC_SUCCESS);
	cr_assert_eq(sv_destroy_qp(qp2), 0);
	cr_assert_eq(sv_dereg_mr(other), 0);
}

/* A pinned send source is released by its completion, and a flush releases the pins of
 * WQEs that never completed. */
Test(core_mr, completion_and_flush_release_pins)
{
	struct sv_mr *mr;
	struct sv_sge sge = { (uintptr_t)buf, 32, 0 };
	struct sv_send_wr wr = { .wr_id = 5, .sg_list = &sge, .num_sge = 1,
				 .opcode = SV_WR_SEND, .send_flags = SV_SEND_SIGNALED }, *bad;
	struct sv__send_wqe *w;
	struct sv__mr *m;
	struct iovec iov[2];

	cr_assert_eq(sv_reg_mr(env.pd, buf, 64, SV_ACCESS_LOCAL_WRITE, &mr), 0);
	m = container_of(mr, struct sv__mr, pub);
	sge.lkey = mr->lkey;
	cr_assert_eq(sv_post_send(env.qp, &wr, &bad), 0);
	cr_assert_eq(sv_post_send(env.qp, &wr, &bad), 0);
	sv__qp_lock(env.qp);
	cr_assert_not_null(w = sv__sq_peek(env.qp));
	cr_assert_eq(sv__sq_map(env.qp, w, false, iov), 1);
	sv__sq_take(env.qp);
	cr_assert_eq(atomic_load(&m->inflight), 1);
	sv__sq_done(env.qp, w, SV_WC_SUCCESS, 0, 0);
	cr_assert_eq(atomic_load(&m->inflight), 0, "completion keeps the pin");
	cr_assert_not_null(w = sv__sq_peek(env.qp));
	cr_assert_eq(sv__sq_map(env.qp, w, false, iov), 1);
	sv__sq_take(env.qp);
	cr_assert_eq(atomic_load(&m->inflight), 1);
	sv__qp_enter_err(to_qp(env.qp));
	sv__qp_unlock(env.qp);
	cr_assert_eq(atomic_load(&m->inflight), 0, "the flush keeps the pin");
	cr_assert_eq(sv_dereg_mr(mr), 0);
}
