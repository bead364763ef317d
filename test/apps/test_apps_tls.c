/*
 * test_apps_tls.c — an unmodified rdma-core program over TLS on sv_tcp0 (doc/security.md
 * "TLS"): rping server and client through svrun with SV_TLS=1 and a certificate both
 * trust, made here with the openssl command; and the same client expecting another
 * name, which both ends must refuse and say why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "apps_util.h"

static const char *const progs[] = { "rping", "openssl", NULL };

static char dir[64];
static char env_cert[160], env_key[160], env_ca[160];

/* A self-signed P-256 certificate for localhost, and its key, in a private directory. */
static void make_pair(void)
{
	char cmd[1024];
	int rc;

	apps_require(progs);
	snprintf(dir, sizeof(dir), "/tmp/sv-apps-tls-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
		 "-days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost,"
		 "IP:127.0.0.1 -keyout %s/key.pem -out %s/cert.pem >/dev/null 2>&1",
		 dir, dir);
	rc = system(cmd);
	cr_assert(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "openssl req failed");
	snprintf(env_cert, sizeof(env_cert), "SV_TLS_CERT=%s/cert.pem", dir);
	snprintf(env_key, sizeof(env_key), "SV_TLS_KEY=%s/key.pem", dir);
	snprintf(env_ca, sizeof(env_ca), "SV_TLS_CA=%s/cert.pem", dir);
}

static void remove_pair(void)
{
	char p[128];

	if (!dir[0])
		return;
	snprintf(p, sizeof(p), "%s/cert.pem", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/key.pem", dir);
	unlink(p);
	rmdir(dir);
}

/* rping -V checks every buffer and exits non-zero on a mismatch. */
Test(apps_tls, rping_validate_over_tls, .init = make_pair, .fini = remove_pair,
     .timeout = 120)
{
	const char *env[] = { "SV_TLS=1", env_cert, env_key, env_ca, "SV_TLS_PEER=localhost",
			      "SV_LOG=info", NULL };
	char port[16];
	int p = apps_free_port();
	const char *srv[] = { "rping", "-s", "-a", "127.0.0.1", "-p", port, "-V", "-C", "300",
			      "-S", "65000", NULL };
	const char *cli[] = { "rping", "-c", "-a", "127.0.0.1", "-p", port, "-V", "-C", "300",
			      "-S", "65000", NULL };
	struct apps_proc s, c;
	int rs, rc;
	char *so, *co;

	snprintf(port, sizeof(port), "%d", p);
	apps_start_env(&s, env, srv);
	if (!apps_wait_listen(&s, p, 10000)) {
		apps_kill(&s);
		cr_assert_fail("the rping server never listened:\n%s", apps_output(&s));
	}
	apps_start_env(&c, env, cli);
	rc = apps_wait(&c, 90000);
	rs = apps_wait(&s, 20000);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_assert(rs == 0 && rc == 0, "server exit %d, client exit %d\n--- server ---\n%s\n"
		  "--- client ---\n%s", rs, rc, so, co);
	cr_expect(!strstr(so, "data mismatch") && !strstr(co, "data mismatch"), "%s%s", so, co);
	/* Both ends ran TLS: each probed for kernel TLS on its first connection. */
	cr_expect(strstr(so, "kernel TLS") || strstr(so, "kernel offers TLS"), "%s", so);
	cr_expect(strstr(co, "kernel TLS") || strstr(co, "kernel offers TLS"), "%s", co);
	free(so);
	free(co);
}

Test(apps_tls, rping_client_expecting_another_name_is_refused, .init = make_pair,
     .fini = remove_pair, .timeout = 120)
{
	const char *senv[] = { "SV_TLS=1", env_cert, env_key, env_ca, NULL };
	const char *cenv[] = { "SV_TLS=1", env_ca, "SV_TLS_PEER=db.example.org", NULL };
	char port[16];
	int p = apps_free_port();
	const char *srv[] = { "rping", "-s", "-a", "127.0.0.1", "-p", port, "-C", "1", NULL };
	const char *cli[] = { "rping", "-c", "-a", "127.0.0.1", "-p", port, "-C", "1", NULL };
	struct apps_proc s, c;
	int rc;
	char *so, *co;

	snprintf(port, sizeof(port), "%d", p);
	apps_start_env(&s, senv, srv);
	if (!apps_wait_listen(&s, p, 10000)) {
		apps_kill(&s);
		cr_assert_fail("the rping server never listened:\n%s", apps_output(&s));
	}
	apps_start_env(&c, cenv, cli);
	rc = apps_wait(&c, 60000);
	/* The server waits for a client that will never come: stop it. */
	apps_kill(&s);
	so = apps_output(&s);
	co = apps_output(&c);
	cr_expect(rc != 0 && rc != -1, "the client must fail, not pass or hang (%d):\n%s", rc,
		  co);
	cr_expect(strstr(co, "certificate verify failed: hostname mismatch"), "%s", co);
	cr_expect(strstr(so, "TLS handshake with 127.0.0.1:") &&
		  strstr(so, "failed: sslv3 alert bad certificate"), "%s", so);
	free(so);
	free(co);
}
