/*
 * ldd_util.c — the load check of the application tests: every symbol a binary imports
 * must resolve against the drop-ins at load time (the packaged binaries are linked with
 * BIND_NOW, so one miss is a failed start).
 */
#include "ldd_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"

void apps_ldd_check(const char *const progs[])
{
	char path[512], *out;
	const char *argv[4] = { "ldd", "-r", path, NULL };
	struct apps_proc p;
	int i, rc;

	for (i = 0; progs[i]; i++) {
		snprintf(path, sizeof(path), "/usr/bin/%s", progs[i]);
		apps_start(&p, argv);
		rc = apps_wait(&p, 30000);
		out = apps_output(&p);
		cr_expect(rc == 0, "ldd -r %s: exit %d\n%s", progs[i], rc, out);
		cr_expect(!strstr(out, "undefined symbol"), "%s:\n%s", progs[i], out);
		cr_expect(!strstr(out, "version information"), "%s:\n%s", progs[i], out);
		cr_expect(!strstr(out, "not found"), "%s:\n%s", progs[i], out);
		/* rdma-core's own libraries must not be the ones loaded. */
		cr_expect(!strstr(out, "/usr/lib/x86_64-linux-gnu/libibverbs") &&
			  !strstr(out, "/usr/lib/x86_64-linux-gnu/librdmacm"),
			  "%s loads rdma-core's libraries:\n%s", progs[i], out);
		free(out);
	}
}
