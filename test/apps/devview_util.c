/*
 * devview_util.c — whether svrun can give programs their /dev/infiniband nodes and sysfs
 * entries here (apps_util.h, apps_require_dev_view), asked of svrun itself once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "apps_util.h"

void apps_require_dev_view(void)
{
	static const char *const argv[] = { "true", NULL };
	static const char missing[] = "svrun: no /dev/infiniband nodes or sysfs entries";
	static int known;		/* 0: not asked yet, 1: there, 2: missing */
	static char why[256];
	struct apps_proc p;

	if (!known) {
		char *out;
		const char *line;

		apps_start(&p, argv);
		apps_wait(&p, 30000);
		out = apps_output(&p);
		line = strstr(out, missing);
		known = line ? 2 : 1;
		if (line)
			snprintf(why, sizeof(why), "%.*s", (int)strcspn(line, "\n"), line);
		free(out);
	}
	if (known == 2)
		cr_skip_test("%s", why);
}
