/*
 * loader.c — finds the system's libibverbs.so.1 and librdmacm.so.1 and loads them into a
 * link-map namespace of their own (doc/nic.md "Loading").
 *
 * dlmopen(LM_ID_NEWLM) by absolute path keeps them apart from whatever the process has
 * loaded under the same sonames: under svrun, softverbs' own drop-ins are the process's
 * libibverbs.so.1 and librdmacm.so.1, and a plain dlopen would bind the system's
 * librdmacm to our drop-in libibverbs (or hand us the drop-in itself). librdmacm goes into
 * the same namespace (dlinfo RTLD_DI_LMID), where its libibverbs.so.1 dependency is the
 * one just loaded. A candidate file that is softverbs' drop-in (it depends on
 * libsoftverbs, whose soname its dynamic string table then holds) is refused before it is
 * loaded, so no directory order can make us open ourselves.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nic/nic_impl.h"

#ifndef SV_MULTIARCH
#define SV_MULTIARCH ""
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct nic_lib lib;
static int load_err;

/* True if path is softverbs' drop-in: the soname of libsoftverbs in its bytes. */
static bool is_ours(const char *path)
{
	static const char mark[] = "libsoftverbs.so";
	struct stat st;
	bool ours = false;
	void *m;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20)) {
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			ours = memmem(m, (size_t)st.st_size, mark, sizeof(mark) - 1) != NULL;
			munmap(m, (size_t)st.st_size);
		}
	}
	close(fd);
	return ours;
}

/* The first dir/name that exists and is not ours, resolved to an absolute path. */
static bool find(const char *name, char *out, size_t outlen)
{
	const char *env = getenv("SV_NIC_LIBDIR");
	const char *dirs[5];
	char p[PATH_MAX], real[PATH_MAX];
	size_t n = 0, i;

	if (env && *env) {
		dirs[n++] = env;
	} else {
		if (SV_MULTIARCH[0]) {
			dirs[n++] = "/usr/lib/" SV_MULTIARCH;
			dirs[n++] = "/lib/" SV_MULTIARCH;
		}
		dirs[n++] = "/usr/lib64";
		dirs[n++] = "/usr/lib";
	}
	for (i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/%s", dirs[i], name);
		if (!realpath(p, real))
			continue;
		if (is_ours(real)) {
			sv__log(SV_LOG_INFO, "softverbs nic: skipping %s: it is softverbs' own "
				"drop-in, not rdma-core's", real);
			continue;
		}
		snprintf(out, outlen, "%s", real);
		return true;
	}
	return false;
}

#define SYM(h, field, name)                                                        \
	do {                                                                        \
		if (!(*(void **)&lib.field = dlsym(h, name))) {                      \
			sv__log(SV_LOG_ERROR, "softverbs nic: %s has no %s", path, name); \
			return -ENODEV;                                              \
		}                                                                   \
	} while (0)

static int load_verbs(void)
{
	const char *path = lib.verbs_path;
	void *h = lib.hv;

	SYM(h, get_device_list, "ibv_get_device_list");
	SYM(h, free_device_list, "ibv_free_device_list");
	SYM(h, get_device_name, "ibv_get_device_name");
	SYM(h, open_device, "ibv_open_device");
	SYM(h, close_device, "ibv_close_device");
	SYM(h, query_device, "ibv_query_device");
	SYM(h, query_port, "ibv_query_port");
	SYM(h, query_gid, "ibv_query_gid");
	SYM(h, alloc_pd, "ibv_alloc_pd");
	SYM(h, dealloc_pd, "ibv_dealloc_pd");
	SYM(h, reg_mr, "ibv_reg_mr");
	SYM(h, rereg_mr, "ibv_rereg_mr");
	SYM(h, dereg_mr, "ibv_dereg_mr");
	SYM(h, create_comp_channel, "ibv_create_comp_channel");
	SYM(h, destroy_comp_channel, "ibv_destroy_comp_channel");
	SYM(h, create_cq, "ibv_create_cq");
	SYM(h, destroy_cq, "ibv_destroy_cq");
	SYM(h, get_cq_event, "ibv_get_cq_event");
	SYM(h, ack_cq_events, "ibv_ack_cq_events");
	SYM(h, create_qp, "ibv_create_qp");
	SYM(h, modify_qp, "ibv_modify_qp");
	SYM(h, query_qp, "ibv_query_qp");
	SYM(h, destroy_qp, "ibv_destroy_qp");
	SYM(h, create_srq, "ibv_create_srq");
	SYM(h, modify_srq, "ibv_modify_srq");
	SYM(h, query_srq, "ibv_query_srq");
	SYM(h, destroy_srq, "ibv_destroy_srq");
	SYM(h, create_ah, "ibv_create_ah");
	SYM(h, destroy_ah, "ibv_destroy_ah");
	SYM(h, get_async_event, "ibv_get_async_event");
	SYM(h, ack_async_event, "ibv_ack_async_event");
	return 0;
}

static int load_cm(void)
{
	const char *path = lib.cm_path;
	void *h = lib.hc;

	SYM(h, cm_create_channel, "rdma_create_event_channel");
	SYM(h, cm_destroy_channel, "rdma_destroy_event_channel");
	SYM(h, cm_create_id, "rdma_create_id");
	SYM(h, cm_destroy_id, "rdma_destroy_id");
	SYM(h, cm_bind_addr, "rdma_bind_addr");
	SYM(h, cm_resolve_addr, "rdma_resolve_addr");
	SYM(h, cm_resolve_route, "rdma_resolve_route");
	SYM(h, cm_connect, "rdma_connect");
	SYM(h, cm_listen, "rdma_listen");
	SYM(h, cm_accept, "rdma_accept");
	SYM(h, cm_reject, "rdma_reject");
	SYM(h, cm_disconnect, "rdma_disconnect");
	SYM(h, cm_establish, "rdma_establish");
	SYM(h, cm_get_event, "rdma_get_cm_event");
	SYM(h, cm_ack_event, "rdma_ack_cm_event");
	SYM(h, cm_init_qp_attr, "rdma_init_qp_attr");
	return 0;
}

static void load(void)
{
	Lmid_t lmid;

	if (!find("libibverbs.so.1", lib.verbs_path, sizeof(lib.verbs_path))) {
		sv__log(SV_LOG_ERROR, "softverbs nic: no rdma-core libibverbs.so.1 in %s",
			getenv("SV_NIC_LIBDIR") && *getenv("SV_NIC_LIBDIR") ?
			getenv("SV_NIC_LIBDIR") : "the system's library directories");
		load_err = -ENODEV;
		return;
	}
	if (!(lib.hv = dlmopen(LM_ID_NEWLM, lib.verbs_path, RTLD_NOW | RTLD_LOCAL))) {
		sv__log(SV_LOG_ERROR, "softverbs nic: cannot load %s: %s", lib.verbs_path,
			dlerror());
		load_err = -ENODEV;
		return;
	}
	if ((load_err = load_verbs()) < 0)
		return;
	if (dlinfo(lib.hv, RTLD_DI_LMID, &lmid) != 0 ||
	    !find("librdmacm.so.1", lib.cm_path, sizeof(lib.cm_path)) ||
	    !(lib.hc = dlmopen(lmid, lib.cm_path, RTLD_NOW | RTLD_LOCAL)) || load_cm() < 0) {
		/* The verbs still work; the CM calls say why they cannot. */
		sv__log(SV_LOG_WARN, "softverbs nic: no usable rdma-core librdmacm.so.1: "
			"sv_cm_* unavailable on the nic transport");
		lib.cm_create_channel = NULL;
		return;
	}
	sv__log(SV_LOG_DEBUG, "softverbs nic: loaded %s and %s", lib.verbs_path, lib.cm_path);
}

const struct nic_lib *sv__nic_lib(int *err)
{
	pthread_once(&once, load);
	if (load_err < 0) {
		*err = load_err;
		return NULL;
	}
	return &lib;
}
