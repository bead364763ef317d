/*
 * svperf/args.c — svperf's command line: the usage text and the parsing of the options into
 * a test configuration.
 */
#include <getopt.h>

#include "svperf/svperf.h"

#define DEFAULT_PORT 18515
#define DEFAULT_DEPTH 64
#define DEFAULT_TIMEOUT_S 120

static void usage(FILE *f)
{
	fprintf(f,
"usage: svperf [options] [HOST]\n"
"  no HOST: serve one client on --port, then exit; HOST: run the test against it\n"
"  --loopback            both ends in this process over 127.0.0.1\n"
"  --transport tcp|udp|nic  wire mode (default tcp); nic: an rdma-core device\n"
"  --device NAME         nic: the device (default: the first rdma-core lists)\n"
"  --list-devices        print every device softverbs can open, then exit\n"
"  --op OP               write, write-imm, read, send, send-imm, atomic-faa, atomic-cas\n"
"  --mode bw|lat         bandwidth (window of WRs) or latency (ping-pong / one at a time)\n"
"  -s, --size BYTES      message size, K/M/G suffixes (default 64K bw, 8 lat;\n"
"                        atomics always move 8)\n"
"  -n, --iters N         number of operations (default 5000 bw, 1000 lat)\n"
"  -D, --duration SEC    run for SEC seconds instead of a count\n"
"  -p, --port N          listen/connect port (default %d; loopback: any free)\n"
"  -d, --depth N         bw window of outstanding WRs (default %d)\n"
"  --crc on|off          ask for MPA CRC32c (used if either side asks)\n"
"  --mulpdu BYTES        largest DDP segment payload to send\n"
"  --impair SPEC         udp: seeded faults on transmit, e.g.\n"
"                        loss=0.01,dup=0,reorder=0,delay_ms=10,seed=7, or a\n"
"                        bottleneck link: rate_mbit=1000,queue_pkts=1000\n"
"  --retx gbn|sr         udp: go-back-N or selective repeat (both ends)\n"
"  --seed N              data pattern seed (default: from the clock)\n"
"  --bind ADDR           server listen address (default 0.0.0.0)\n"
"  --timeout SEC         give up after SEC seconds (default %d)\n"
"  --wait cq|memory      WRITE lat: wait for the answer polling the CQ (default), or\n"
"                        spinning on the target's last byte, as ib_write_lat does\n"
"  --server-spin         the server polls its CQ while it serves, instead of\n"
"                        sleeping on its completion channel (as perftest's do)\n"
"  --qps N               N QPs at once on one device (both ends give it), on ports\n"
"                        PORT..PORT+N-1: over --impair they share one bottleneck;\n"
"                        one report per QP\n"
"  --json                print one JSON object on stdout\n"
TOOL_TLS_USAGE
"The server adopts the client's op, mode, size and count.\n",
		DEFAULT_PORT, DEFAULT_DEPTH, DEFAULT_TIMEOUT_S);
}

int perf_parse_args(int argc, char **argv, struct config *c)
{
	enum { O_TRANSPORT = 256, O_OP, O_MODE, O_JSON, O_LOOPBACK, O_CRC, O_MULPDU, O_SEED,
	       O_IMPAIR, O_RETX, O_BIND, O_TIMEOUT, O_WAIT, O_SERVER_SPIN, O_DEVICE,
	       O_LIST_DEVICES, O_QPS, O_HELP };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "op", required_argument, NULL, O_OP },
		{ "mode", required_argument, NULL, O_MODE },
		{ "size", required_argument, NULL, 's' },
		{ "iters", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'D' },
		{ "port", required_argument, NULL, 'p' },
		{ "depth", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, O_JSON },
		{ "loopback", no_argument, NULL, O_LOOPBACK },
		{ "crc", required_argument, NULL, O_CRC },
		{ "mulpdu", required_argument, NULL, O_MULPDU },
		{ "impair", required_argument, NULL, O_IMPAIR },
		{ "retx", required_argument, NULL, O_RETX },
		{ "seed", required_argument, NULL, O_SEED },
		{ "bind", required_argument, NULL, O_BIND },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "wait", required_argument, NULL, O_WAIT },
		{ "server-spin", no_argument, NULL, O_SERVER_SPIN },
		{ "device", required_argument, NULL, O_DEVICE },
		{ "list-devices", no_argument, NULL, O_LIST_DEVICES },
		{ "qps", required_argument, NULL, O_QPS },
		TOOL_TLS_LONGOPTS,
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int size_given = 0, port_given = 0, opt;
	uint64_t v;
	char *end;

	memset(c, 0, sizeof(*c));
	c->transport = SV_TRANSPORT_TCP;
	c->op = OP_WRITE;
	c->mode = MODE_BW;
	c->size = 65536;
	c->port = DEFAULT_PORT;
	c->crc = -1;
	c->retx = -1;
	c->depth = DEFAULT_DEPTH;
	c->qps = 1;
	c->timeout_s = DEFAULT_TIMEOUT_S;
	c->seed = now_ns() ^ ((uint64_t)getpid() << 32);
	c->bind = "0.0.0.0";

	while ((opt = getopt_long(argc, argv, "s:n:D:p:d:h", longopts, NULL)) != -1) {
		if (tool_tls_opt(&c->tls, opt, optarg))
			continue;
		switch (opt) {
		case O_TRANSPORT:
			if (parse_transport(optarg, &c->transport) < 0)
				goto bad;
			break;
		case O_OP: {
			int k;

			for (k = 0; k < OP_COUNT && strcmp(optarg, op_names[k]); k++)
				;
			if (k == OP_COUNT && !strcmp(optarg, "faa"))
				k = OP_FAA;
			if (k == OP_COUNT && !strcmp(optarg, "cas"))
				k = OP_CAS;
			if (k == OP_COUNT)
				goto bad;
			c->op = (enum op)k;
			break;
		}
		case O_SERVER_SPIN:
			c->server_spin = 1;
			break;
		case O_QPS:
			if (parse_u64(optarg, &v) < 0 || v == 0 || v > 64)
				goto bad;
			c->qps = (unsigned)v;
			break;
		case O_WAIT:
			if (!strcmp(optarg, "cq"))
				c->wait_mem = 0;
			else if (!strcmp(optarg, "memory"))
				c->wait_mem = 1;
			else
				goto bad;
			break;
		case O_MODE:
			if (!strcmp(optarg, "bw"))
				c->mode = MODE_BW;
			else if (!strcmp(optarg, "lat"))
				c->mode = MODE_LAT;
			else
				goto bad;
			break;
		case 's':
			if (parse_size(optarg, &c->size) < 0 || c->size == 0 || c->size > (1u << 30))
				goto bad;
			size_given = 1;
			break;
		case 'n':
			if (parse_u64(optarg, &c->iters) < 0 || c->iters == 0)
				goto bad;
			break;
		case 'D':
			c->duration = strtod(optarg, &end);
			if (*end || !(c->duration > 0) || c->duration > 86400)
				goto bad;
			break;
		case 'p':
			if (parse_u64(optarg, &v) < 0 || v > 65535)
				goto bad;
			c->port = (uint16_t)v;
			port_given = 1;
			break;
		case 'd':
			if (parse_u64(optarg, &v) < 0 || v == 0 || v > 4096)
				goto bad;
			c->depth = (uint32_t)v;
			break;
		case O_JSON:
			c->json = 1;
			break;
		case O_LOOPBACK:
			c->loopback = 1;
			break;
		case O_CRC:
			if (parse_on_off(optarg, &c->crc) < 0)
				goto bad;
			break;
		case O_MULPDU:
			if (parse_size(optarg, &v) < 0 || v == 0 || v > UINT32_MAX)
				goto bad;
			c->mulpdu = (uint32_t)v;
			break;
		case O_IMPAIR:
			c->impair = optarg;
			break;
		case O_RETX:
			if (!strcmp(optarg, "gbn"))
				c->retx = SV_RETX_GBN;
			else if (!strcmp(optarg, "sr"))
				c->retx = SV_RETX_SR;
			else
				goto bad;
			break;
		case O_SEED:
			if (parse_u64(optarg, &c->seed) < 0)
				goto bad;
			break;
		case O_BIND:
			c->bind = optarg;
			break;
		case O_DEVICE:
			c->device = optarg;
			break;
		case O_LIST_DEVICES:
			exit(perf_list_devices());
		case O_TIMEOUT:
			if (parse_timeout(optarg, &c->timeout_s) < 0)
				goto bad;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc)
		c->host = argv[optind++];
	if (optind < argc || (c->host && c->loopback)) {
		usage(stderr);
		return -EINVAL;
	}
	if (c->loopback && !port_given)
		c->port = 0;		/* nothing else needs to find it: any free port */
	if (c->iters && c->duration > 0) {
		fprintf(stderr, "%s: give --iters or --duration, not both\n", PROG);
		return -EINVAL;
	}
	if (!c->iters && !(c->duration > 0))
		c->iters = c->mode == MODE_BW ? 5000 : 1000;
	if (!size_given && c->mode == MODE_LAT)
		c->size = 8;		/* perftest's latency tests default to tiny messages too */
	if (is_atomic(c->op)) {
		if (size_given && c->size != 8)
			fprintf(stderr, "%s: atomics move 8 bytes; --size ignored\n", PROG);
		c->size = 8;
	}
	if (c->wait_mem && (c->op != OP_WRITE || c->mode != MODE_LAT)) {
		fprintf(stderr, "%s: --wait memory is for --op write --mode lat\n", PROG);
		return -EINVAL;
	}
	if (c->qps > 1 && c->loopback) {
		fprintf(stderr, "%s: --qps is for a server and a client process\n", PROG);
		return -EINVAL;
	}
	if (c->duration > 0 && c->duration + 30 > c->timeout_s)
		c->timeout_s = (unsigned)(c->duration + 30);
	return 0;
bad:
	fprintf(stderr, "%s: bad value '%s'\n", PROG, optarg);
	usage(stderr);
	return -EINVAL;
}
