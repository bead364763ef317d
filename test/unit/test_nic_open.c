/*
 * test_nic_open.c — opening the nic transport where it cannot work fails with -ENODEV
 * and leaves nothing behind (no crash, no context): no rdma-core library in the
 * directory named by SV_NIC_LIBDIR, only softverbs' own drop-in there (refused before it
 * is loaded), a device name rdma-core does not list, and a host without any device.
 * Each test runs in its own process (Criterion forks), so the once-per-process loader
 * sees each test's SV_NIC_LIBDIR.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softverbs.h"

static int open_nic(const char *device, struct sv_context **ctx)
{
	struct sv_device_opts o;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_NIC;
	snprintf(o.device, sizeof(o.device), "%s", device);
	*ctx = NULL;
	return sv_open_device(&o, ctx);
}

Test(nic_open, env_selects_the_transport_and_device)
{
	struct sv_device_opts o;

	setenv("SV_TRANSPORT", "nic", 1);
	setenv("SV_DEVICE", "rxe7", 1);
	sv_device_opts_init(&o);
	cr_assert_eq(o.transport, SV_TRANSPORT_NIC);
	cr_assert_str_eq(o.device, "rxe7");
}

Test(nic_open, no_library_is_enodev)
{
	char dir[] = "/tmp/sv_nic_empty.XXXXXX";
	struct sv_context *ctx;

	cr_assert_not_null(mkdtemp(dir));
	setenv("SV_NIC_LIBDIR", dir, 1);
	cr_assert_eq(open_nic("", &ctx), -ENODEV);
	cr_assert_null(ctx);
	rmdir(dir);
}

Test(nic_open, our_own_dropin_is_refused)
{
	const char *tools = getenv("SV_TOOLS_DIR");
	char dir[4096], lib[4200];
	struct sv_context *ctx;

	if (!tools)
		cr_skip_test("SV_TOOLS_DIR is not set (run under ctest)");
	snprintf(dir, sizeof(dir), "%s/compat/lib", tools);
	snprintf(lib, sizeof(lib), "%s/libibverbs.so.1", dir);
	if (access(lib, R_OK) != 0)
		cr_skip_test("no drop-in libibverbs in %s (built without rdma-core headers)", dir);
	setenv("SV_NIC_LIBDIR", dir, 1);
	cr_assert_eq(open_nic("", &ctx), -ENODEV);
	cr_assert_null(ctx);
}

/* The system's libibverbs, if installed, lists no such device. */
Test(nic_open, unknown_device_is_enodev)
{
	struct sv_context *ctx;

	unsetenv("SV_NIC_LIBDIR");
	cr_assert_eq(open_nic("no_such_device_9", &ctx), -ENODEV);
	cr_assert_null(ctx);
}

static bool host_has_devices(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	if (!d)
		return false;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			any = true;
	closedir(d);
	return any;
}

Test(nic_open, no_device_is_enodev)
{
	struct sv_context *ctx;

	if (host_has_devices())
		cr_skip_test("this host has RDMA devices (/sys/class/infiniband)");
	unsetenv("SV_NIC_LIBDIR");
	cr_assert_eq(open_nic("", &ctx), -ENODEV);
	cr_assert_null(ctx);
}
