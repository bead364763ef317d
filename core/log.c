/*
 * log.c — diagnostics to stderr, filtered by SV_LOG (error|warn|info|debug, or 0..3).
 *
 * The level is read once: logging sits on error paths called from the loop thread with
 * locks held, so it must not allocate or re-parse the environment each time.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/transport.h"

static int level = SV_LOG_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = getenv("SV_LOG");
	int i;

	if (!v || !*v)
		return;
	for (i = 0; i < 4; i++) {
		if (!strcasecmp(v, names[i])) {
			level = i;
			return;
		}
	}
	if (v[0] >= '0' && v[0] <= '3' && v[1] == '\0')
		level = v[0] - '0';
}

void sv__log(int lvl, const char *fmt, ...)
{
	va_list ap;

	pthread_once(&once, read_env);
	if (lvl > level)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
