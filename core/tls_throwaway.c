/*
 * tls_throwaway.c — sv_tls_throwaway(): one self-signed pair per process for ends that
 * both run on this host (include/softverbs.h), kept in a private directory that goes
 * away when the process exits.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "crypto/tls_conf.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char dir[160];		/* "" until the pair exists */

static void remove_pair(void)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/cert.pem", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/key.pem", dir);
	unlink(path);
	rmdir(dir);
}

/* mkdtemp makes the directory mode 0700, so only this user reaches the key. */
static int make_pair(char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	char d[sizeof(dir)];
	int rc;

	if (!tmp || !*tmp || strlen(tmp) > sizeof(d) - sizeof("/sv-tls-XXXXXX"))
		tmp = "/tmp";
	snprintf(d, sizeof(d), "%s/sv-tls-XXXXXX", tmp);
	if (!mkdtemp(d)) {
		rc = -errno;
		snprintf(err, errlen, "mkdtemp %s: %s", d, strerror(errno));
		return rc;
	}
	rc = sv__tls_write_selfsigned(d, err, errlen);
	snprintf(dir, sizeof(dir), "%s", d);
	if (rc < 0) {
		remove_pair();
		dir[0] = '\0';
		return rc;
	}
	atexit(remove_pair);
	sv__log(SV_LOG_INFO, "softverbs: throwaway TLS certificate in %s", dir);
	return 0;
}

int sv_tls_throwaway(struct sv_device_opts *opts, char *err, size_t errlen)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	if (!dir[0])
		rc = make_pair(err, errlen);
	if (rc == 0) {
		opts->tls = 1;
		snprintf(opts->tls_cert, sizeof(opts->tls_cert), "%s/cert.pem", dir);
		snprintf(opts->tls_key, sizeof(opts->tls_key), "%s/key.pem", dir);
		snprintf(opts->tls_ca, sizeof(opts->tls_ca), "%s/cert.pem", dir);
		snprintf(opts->tls_peer, sizeof(opts->tls_peer), "localhost");
	}
	pthread_mutex_unlock(&lock);
	return rc;
}
