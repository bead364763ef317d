/*
 * test_apps_pcap.c — SV_PCAP under unmodified programs: rping -V through svrun on
 * sv_tcp0 and on sv_udp0 with SV_PCAP=<dir>/rping-%p.pcap, so the server and the client
 * each write their own files (one per device context they open). tshark then reads every
 * file: nothing malformed and no expert error anywhere; on TCP every payload of the
 * connection decodes as MPA (or is part of a PDU reassembled elsewhere) and the RDMAP
 * Sends are there; on UDP every frame to or from port 4791 decodes as InfiniBand (RoCEv2,
 * the port tshark knows, no decode-as) with the CM's MADs among them; and rping's
 * payload ("rdma-ping-") is in the server's and the client's captures. No capture rights
 * are needed (the capture is the library's own).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "apps_util.h"
#include "../tshark_ports.h"

#define WAIT_MS 60000

static const char *const progs[] = { "rping", "tshark", NULL };

/* Runs tshark with the ULP heuristics that misread application bytes off (see
 * test/wire/capture_util.c) and returns its output (free it). */
static char *tshark(const char *args)
{
	char cmd[4096];
	size_t cap = 1 << 16, len = 0, n;
	char *out = malloc(cap);
	FILE *f;

	cr_assert_not_null(out);
	n = (size_t)snprintf(cmd, sizeof(cmd), "timeout 120 tshark -n --disable-protocol rpcordma "
		 "--disable-protocol smb_direct --disable-heuristic rpcrdma_infiniband "
		 "--disable-heuristic smb_direct_infiniband --disable-heuristic eth_over_ib "
		 "--disable-heuristic sdp_infiniband --disable-heuristic iser_infiniband "
		 "--disable-heuristic lnet_ib --disable-heuristic smcr_infiniband %s%s 2>/dev/null",
		 tshark_ports_disable_opts(), args);
	cr_assert_lt(n, sizeof(cmd), "the tshark command does not fit");
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 == cap) {
			out = realloc(out, cap *= 2);
			cr_assert_not_null(out);
		}
	}
	out[len] = 0;
	cr_assert_eq(pclose(f), 0, "tshark failed: %s", cmd);
	return out;
}

static bool has_bytes(const char *path, const char *needle)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 20, len = 0, n;
	char *b = malloc(cap);
	bool yes;

	cr_assert(f && b, "%s", path);
	while ((n = fread(b + len, 1, cap - len, f)) > 0)
		if ((len += n) == cap) {
			b = realloc(b, cap *= 2);
			cr_assert_not_null(b);
		}
	fclose(f);
	yes = memmem(b, len, needle, strlen(needle)) != NULL;
	free(b);
	return yes;
}

/* Every file of dir: decodes cleanly; returns how many hold rping's payload and adds
 * the frames of the session's protocol (MPA / InfiniBand) to *frames. */
static int check_dir(const char *dir, bool udp, int *frames)
{
	char path[512], args[1024], *out;
	struct dirent *d;
	DIR *dd = opendir(dir);
	int with_payload = 0, files = 0;

	cr_assert_not_null(dd);
	while ((d = readdir(dd))) {
		if (d->d_name[0] == '.')
			continue;
		files++;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		snprintf(args, sizeof(args), "-r %s -Y '_ws.malformed || _ws.expert.severity >= "
			 "\"Error\"' -T fields -e frame.number -e _ws.expert.message", path);
		out = tshark(args);
		cr_assert_str_empty(out, "%s: frames with errors:\n%s", path, out);
		free(out);
		if (udp)
			snprintf(args, sizeof(args), "-r %s -Y 'udp.port == 4791 && !infiniband.bth'"
				 " -T fields -e frame.number", path);
		else
			snprintf(args, sizeof(args), "-2 -r %s -Y 'tcp.len > 0 && !iwarp_mpa && "
				 "!tcp.reassembled_in' -T fields -e frame.number", path);
		out = tshark(args);
		cr_assert_str_empty(out, "%s: frames not decoded as %s:\n%s", path,
				    udp ? "InfiniBand" : "MPA", out);
		free(out);
		snprintf(args, sizeof(args), "-r %s -Y '%s' -T fields -e frame.number", path,
			 udp ? "infiniband.mad" : "iwarp_rdma.opcode == 3");
		out = tshark(args);
		*frames += apps_count(out, "\n");
		free(out);
		with_payload += has_bytes(path, "rdma-ping-");
		if (!getenv("SV_KEEP_PCAP"))
			unlink(path);
	}
	closedir(dd);
	cr_assert_geq(files, 2, "%d capture files in %s", files, dir);
	if (!getenv("SV_KEEP_PCAP"))
		rmdir(dir);
	else
		cr_log_info("captures kept in %s", dir);
	return with_payload;
}

static void rping_pcap(bool udp)
{
	char dir[64], pat[96], port[16], *so, *co;
	const char *srv[16], *cli[16];
	struct apps_proc hold;
	int p, n = 0, frames = 0;

	apps_require(progs);
	snprintf(dir, sizeof(dir), "/tmp/sv-apps-pcap-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(pat, sizeof(pat), "%s/rping-%%p.pcap", dir);
	/* A port tshark gives to another protocol would hide the MPA (test/tshark_ports.h);
	 * the picks walk away from each other, so a few draws find one it leaves alone. */
	p = apps_free_port();
	for (int i = 0; i < 64 && tshark_port_owned(SOCK_STREAM, (uint16_t)p); i++)
		p = apps_free_port();
	cr_assert(!tshark_port_owned(SOCK_STREAM, (uint16_t)p), "64 ports all tshark's");
	snprintf(port, sizeof(port), "%d", p);
	if (udp)
		apps_hold_loopback(&hold);	/* before SV_PCAP: it captures nothing */
	for (int c = 0; c < 2; c++) {
		const char **v = c ? cli : srv;

		n = 0;
		if (udp) {
			v[n++] = "--transport";
			v[n++] = "udp";
		}
		v[n++] = "rping";
		v[n++] = c ? "-c" : "-s";
		v[n++] = "-a";
		v[n++] = "127.0.0.1";
		v[n++] = "-p";
		v[n++] = port;
		v[n++] = "-V";
		v[n++] = "-C";
		v[n++] = "50";
		v[n] = NULL;
	}
	cr_assert_eq(setenv("SV_PCAP", pat, 1), 0);
	if (udp)
		apps_pair_cm(srv, cli, p, NULL, WAIT_MS, &so, &co, NULL);
	else
		apps_pair(srv, cli, p, WAIT_MS, &so, &co);
	unsetenv("SV_PCAP");
	if (udp) {
		apps_kill(&hold);
		free(apps_output(&hold));
	}
	free(so);
	free(co);
	cr_assert_geq(check_dir(dir, udp, &frames), 2,
		      "rping's payload is in the server's and the client's captures");
	cr_assert_gt(frames, 0, "%s frames in the captures", udp ? "CM MAD" : "RDMAP Send");
}

Test(apps_pcap, rping_on_sv_tcp0, .timeout = 180)
{
	rping_pcap(false);
}

Test(apps_pcap, rping_on_sv_udp0, .timeout = 180)
{
	rping_pcap(true);
}
