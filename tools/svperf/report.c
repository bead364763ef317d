/*
 * svperf/report.c — svperf's report: percentiles of the latencies and the text or JSON
 * result line.
 */
#include "svperf/svperf.h"

/* ---------------------------------------------------------------------------------------
 * Report
 */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted samples, in microseconds. */
static double pct_us(const uint64_t *v, size_t n, double q)
{
	size_t k;

	if (n == 0)
		return 0;
	k = (size_t)(q * (double)n + 0.999999999);
	if (k < 1)
		k = 1;
	return (double)v[k - 1] / 1e3;
}

static const char *lat_kind(const struct config *c)
{
	if (c->mode == MODE_BW)
		return "post_to_completion_under_load";
	return is_pingpong(c) ? "half_round_trip" : "full_operation";
}

void perf_print_report(struct perf *p, int rc)
{
	const struct config *c = &p->cfg;
	uint64_t unit = is_atomic(c->op) ? 8 : c->size;
	uint64_t bytes = p->total * unit;
	double secs = p->t1 > p->t0 ? (double)(p->t1 - p->t0) / 1e9 : 0;
	double gbps = secs > 0 ? (double)bytes * 8 / secs / 1e9 : 0;
	double mps = secs > 0 ? (double)p->total / secs : 0;
	double sum = 0, p50, p99, mn = 0, mx = 0, avg = 0;
	int verified = rc == 0 && p->ok;
	int crc = p->crc_asked || p->peer_crc;
	double load = 0;
	struct sv_qp_stats st = { 0 };

	/* Retransmissions are the UDP transport's; TCP's own are invisible to us (0). */
	if (p->ep.qp)
		sv_query_qp_stats(p->ep.qp, &st);
	/* Other work on the machine shows in every figure; say how busy it was. */
	if (getloadavg(&load, 1) != 1)
		load = -1;

	if (p->nlat)
		qsort(p->lat, p->nlat, sizeof(*p->lat), cmp_u64);
	for (size_t i = 0; i < p->nlat; i++)
		sum += (double)p->lat[i];
	if (p->nlat) {
		mn = (double)p->lat[0] / 1e3;
		mx = (double)p->lat[p->nlat - 1] / 1e3;
		avg = sum / (double)p->nlat / 1e3;
	}
	p50 = pct_us(p->lat, p->nlat, 0.50);
	p99 = pct_us(p->lat, p->nlat, 0.99);

	if (c->json) {
		printf("{\"tool\":\"svperf\",\"role\":\"%s\",\"transport\":\"%s\",\"op\":\"%s\","
		       "\"mode\":\"%s\",\"size\":%llu,\"iters\":%llu,\"depth\":%u,\"bytes\":%llu,"
		       "\"seconds\":%.6f,\"gbit_per_s\":%.4f,\"msg_per_s\":%.1f,"
		       "\"lat_us_p50\":%.3f,\"lat_us_p99\":%.3f,\"lat_us_min\":%.3f,"
		       "\"lat_us_avg\":%.3f,\"lat_us_max\":%.3f,\"lat_kind\":\"%s\","
		       "\"lat_samples\":%zu,\"verified\":%s,\"crc\":%s,\"loopback\":%s,"
		       "\"seed\":%llu,\"load_avg_1m\":%.2f,\"retransmits\":%llu,"
		       "\"timeouts\":%llu,\"naks_rx\":%llu,\"cwnd\":%llu,\"cwnd_peak\":%llu,"
		       "\"srtt_us\":%.1f,\"base_rtt_us\":%.1f,\"pacing_mbit\":%llu,"
		       "\"cc_delay_cuts\":%llu,\"cc_loss_cuts\":%llu,\"qp\":%u,\"qps\":%u",
		       p->server ? "server" : "client",
		       transport_name(c->transport), op_names[c->op],
		       c->mode == MODE_BW ? "bw" : "lat", (unsigned long long)unit,
		       (unsigned long long)p->total, c->mode == MODE_BW ? p->depth : 1,
		       (unsigned long long)bytes, secs, gbps, mps, p50, p99, mn, avg, mx,
		       lat_kind(c), p->nlat, verified ? "true" : "false",
		       crc ? "true" : "false", c->loopback ? "true" : "false",
		       (unsigned long long)c->seed, load,
		       (unsigned long long)st.retransmits, (unsigned long long)st.timeouts,
		       (unsigned long long)st.naks_rx, (unsigned long long)st.cwnd,
		       (unsigned long long)st.cwnd_peak, (double)st.srtt_ns / 1e3,
		       (double)st.base_rtt_ns / 1e3, (unsigned long long)st.pacing_mbit,
		       (unsigned long long)st.cc_delay_cuts, (unsigned long long)st.cc_loss_cuts,
		       p->qp_index, c->qps);
		if (!verified) {
			const char *why = rc < 0 ? sv_strerror(rc) : p->why;

			printf(",\"error\":\"");
			for (const char *s = why; *s; s++)
				printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
			printf("\"");
		}
		printf("}\n");
		fflush(stdout);
		return;
	}
	printf("svperf %s: %s %s over %s%s, %llu B x %llu, crc %s\n",
	       p->server ? "server" : "client", op_names[c->op],
	       c->mode == MODE_BW ? "bandwidth" : "latency",
	       transport_name(c->transport),
	       c->loopback ? " (loopback)" : "", (unsigned long long)unit,
	       (unsigned long long)p->total, crc ? "on" : "off");
	printf("  %-14s %12s %10s %12s\n", "bytes", "seconds", "Gbit/s", "msg/s");
	printf("  %-14llu %12.6f %10.3f %12.0f\n", (unsigned long long)bytes, secs, gbps, mps);
	if (p->nlat) {
		printf("  latency (%s, us): min %.2f  p50 %.2f  avg %.2f  p99 %.2f  max %.2f"
		       "  (%zu samples)\n",
		       is_pingpong(c) ? "half round trip"
		       : c->mode == MODE_LAT ? "whole operation" : "post to completion, under load",
		       mn, p50, avg, p99, mx, p->nlat);
	}
	if (st.cwnd_peak)
		printf("  udp window: %llu packets now, %llu at most; srtt %.1f us (base %.1f); "
		       "pacing %llu Mbit/s; retransmits %llu, timeouts %llu; cuts: %llu delay, "
		       "%llu loss\n", (unsigned long long)st.cwnd,
		       (unsigned long long)st.cwnd_peak, (double)st.srtt_ns / 1e3,
		       (double)st.base_rtt_ns / 1e3, (unsigned long long)st.pacing_mbit,
		       (unsigned long long)st.retransmits, (unsigned long long)st.timeouts,
		       (unsigned long long)st.cc_delay_cuts, (unsigned long long)st.cc_loss_cuts);
	if (verified)
		printf("  verified: yes (both sides checked the data)\n");
	else
		printf("  verified: NO (%s)\n", rc < 0 ? sv_strerror(rc) : p->why);
	fflush(stdout);
}
