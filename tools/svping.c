/*
 * svping — an rping-like connectivity and data check for softverbs.
 *
 *   svping -s [-a ADDR] [-p PORT] ...        serve one client
 *   svping -c HOST [-p PORT] [-C COUNT] [-S SIZE] [-v] ...
 *   svping --loopback [-C COUNT] [-S SIZE] [-v]   both ends in this process
 *
 * Each round follows rping's pattern, so every round uses SEND, READ and WRITE:
 *  1. the client fills its source buffer with this round's pattern and SENDs the
 *     buffer's address, rkey and length;
 *  2. the server READs the source into its own buffer, checks it, and SENDs "go ahead";
 *  3. the client SENDs the address of its (cleared) sink buffer;
 *  4. the server WRITEs its buffer into the sink and SENDs "go ahead";
 *  5. the client checks that the sink holds exactly what its source held.
 * The round-trip time of a round runs from step 1 to the last "go ahead". At the end the
 * client SENDs DONE with its count and the server answers with how many rounds it saw
 * intact. Exit status 0 only if every round verified on both sides.
 *
 * Completions are awaited on the completion channel (as rping does) unless --busy asks for
 * busy polling; every wait has a deadline.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>

#include "sv_tool.h"

#define PROG "svping"
#define BUF_ACCESS (SV_ACCESS_LOCAL_WRITE | SV_ACCESS_REMOTE_WRITE | SV_ACCESS_REMOTE_READ)
#define DEFAULT_PORT 7174		/* rping's */
#define DEFAULT_COUNT 10
#define DEFAULT_SIZE 64
#define DEFAULT_TIMEOUT_S 60
#define NMSG 4				/* send slots and posted receives per side */
#define MSG_LEN 32

/* Message: 0 type, 4 round, 8 addr, 16 rkey, 20 len, 24 value (all big-endian). */
enum msg_type { MSG_SOURCE = 1, MSG_SINK = 2, MSG_GO = 3, MSG_DONE = 4, MSG_SUMMARY = 5 };

struct msg {
	uint32_t type;
	uint32_t round;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
	uint64_t value;
};

#define WR_SEND 1
#define WR_READ 2
#define WR_WRITE 3
#define WR_RECV 4
#define WRID(kind, idx) ((uint64_t)(kind) << 56 | (idx))

struct config {
	int server;
	int loopback;
	const char *host;
	const char *bind;
	uint16_t port;
	int port_given;
	uint64_t count;
	uint64_t size;
	enum sv_transport transport;
	const char *device;		/* nic: the rdma-core device, NULL = the first */
	int crc;
	int verbose;
	int busy;
	unsigned timeout_s;
	uint64_t seed;
	struct tool_tls tls;
};

struct ping {
	struct config cfg;
	const char *prog;
	struct tool_ep ep;
	uint64_t deadline;
	uint8_t *a, *b;			/* client: source, sink; server: a = its buffer */
	struct sv_mr *a_mr, *b_mr;
	uint8_t *msgs;			/* NMSG send slots, then NMSG receive slots */
	struct sv_mr *msg_mr;
	uint64_t sends;
	uint64_t good;			/* rounds verified on this side */
	uint64_t rounds;
};

static volatile sig_atomic_t g_stop;

static void usage(FILE *f)
{
	fprintf(f,
"usage: svping -s [-a ADDR] [-p PORT] [options]\n"
"       svping -c HOST [-p PORT] [-C COUNT] [-S SIZE] [-v] [options]\n"
"       svping --loopback [-C COUNT] [-S SIZE] [-v] [options]\n"
"  -C COUNT          rounds (default %d)\n"
"  -S SIZE           buffer size in bytes (default %d; K/M suffixes)\n"
"  -p PORT           port (default %d; loopback: any free port)\n"
"  -a ADDR           server listen address (default 0.0.0.0)\n"
"  -v                print every round\n"
"  --transport tcp|udp|nic, --device NAME (nic), --crc on|off, --busy (busy-poll),\n"
"  --timeout SEC, --seed N\n"
TOOL_TLS_USAGE,
		DEFAULT_COUNT, DEFAULT_SIZE, DEFAULT_PORT);
}

static int post_recv(struct ping *p, uint32_t j)
{
	struct sv_sge sge = {
		.addr = (uintptr_t)(p->msgs + (NMSG + j) * MSG_LEN),
		.length = MSG_LEN,
		.lkey = p->msg_mr->lkey,
	};
	struct sv_recv_wr wr = { .wr_id = WRID(WR_RECV, j), .sg_list = &sge, .num_sge = 1 };
	struct sv_recv_wr *bad;
	int rc = sv_post_recv(p->ep.qp, &wr, &bad);

	if (rc < 0)
		return report(p->prog, "sv_post_recv", rc);
	return 0;
}

static int setup(struct ping *p)
{
	size_t size = (size_t)p->cfg.size;
	int rc;

	if ((rc = ep_create_qp(&p->ep, NMSG + 4, NMSG)) < 0)
		return rc;
	p->a = alloc_buf(size);
	p->b = alloc_buf(size);
	p->msgs = alloc_buf(2 * NMSG * MSG_LEN);
	if (!p->a || !p->b || !p->msgs) {
		fprintf(stderr, "%s: out of memory\n", p->prog);
		return -ENOMEM;
	}
	if ((rc = ep_reg(&p->ep, p->a, size, BUF_ACCESS, &p->a_mr)) < 0 ||
	    (rc = ep_reg(&p->ep, p->b, size, BUF_ACCESS, &p->b_mr)) < 0 ||
	    (rc = ep_reg(&p->ep, p->msgs, 2 * NMSG * MSG_LEN, BUF_ACCESS, &p->msg_mr)) < 0)
		return rc;
	for (uint32_t j = 0; j < NMSG; j++)
		if ((rc = post_recv(p, j)) < 0)
			return rc;
	return 0;
}

static void teardown(struct ping *p)
{
	struct sv_mr **mrs[] = { &p->a_mr, &p->b_mr, &p->msg_mr };
	uint8_t **mem[] = { &p->a, &p->b, &p->msgs };

	ep_teardown(&p->ep, mrs, sizeof(mrs) / sizeof(mrs[0]), mem, sizeof(mem) / sizeof(mem[0]));
}

static int send_msg(struct ping *p, const struct msg *m)
{
	uint8_t *slot = p->msgs + (p->sends % NMSG) * MSG_LEN;
	struct sv_sge sge = { .addr = (uintptr_t)slot, .length = MSG_LEN,
			      .lkey = p->msg_mr->lkey };
	struct sv_send_wr wr, *bad;
	int rc;

	put_be32(slot, m->type);
	put_be32(slot + 4, m->round);
	put_be64(slot + 8, m->addr);
	put_be32(slot + 16, m->rkey);
	put_be32(slot + 20, m->len);
	put_be64(slot + 24, m->value);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(WR_SEND, p->sends);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = SV_WR_SEND;
	wr.send_flags = SV_SEND_SIGNALED;
	if ((rc = sv_post_send(p->ep.qp, &wr, &bad)) < 0)
		return report(p->prog, "sv_post_send (SEND)", rc);
	p->sends++;
	return 0;
}

/* Posts a READ or WRITE of the whole buffer a to/from the peer's buffer (addr, rkey). */
static int post_rdma(struct ping *p, int kind, uint64_t addr, uint32_t rkey)
{
	struct sv_sge sge = { .addr = (uintptr_t)p->a, .length = (uint32_t)p->cfg.size,
			      .lkey = p->a_mr->lkey };
	struct sv_send_wr wr, *bad;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(kind, 0);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = kind == WR_READ ? SV_WR_RDMA_READ : SV_WR_RDMA_WRITE;
	wr.send_flags = SV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if ((rc = sv_post_send(p->ep.qp, &wr, &bad)) < 0)
		return report(p->prog, kind == WR_READ ? "sv_post_send (READ)"
						       : "sv_post_send (WRITE)", rc);
	return 0;
}

/*
 * Waits for the next completion of kind `want` (WR_RECV: a message, decoded into *m and
 * its receive reposted; WR_READ: the READ). SEND and WRITE completions met on the way only
 * need to be successful.
 */
static int wait_for(struct ping *p, int want, struct msg *m)
{
	for (;;) {
		struct sv_wc wc;
		int kind, n;

		uint64_t slice = now_ns() + 100000000ull;

		if (g_stop)
			return -ECANCELED;
		/* Short slices, so a failure of the loopback peer is noticed quickly. */
		n = cq_wait(p->ep.cq, p->ep.comp_ch, &wc, 1, p->cfg.busy ? UINT64_MAX / 2 : 20000,
			    slice < p->deadline ? slice : p->deadline);
		if (n == -ETIMEDOUT && now_ns() < p->deadline)
			continue;
		if (n == -ETIMEDOUT) {
			fprintf(stderr, "%s: timed out waiting for the peer\n", p->prog);
			return n;
		}
		if (n < 0)
			return report(p->prog, "waiting for a completion", n);
		kind = (int)(wc.wr_id >> 56);
		if (wc.status != SV_WC_SUCCESS) {
			fprintf(stderr, "%s: %s failed: %s (vendor_err 0x%x)\n", p->prog,
				kind == WR_RECV ? "receive" : kind == WR_READ ? "READ"
				: kind == WR_WRITE ? "WRITE" : "SEND",
				sv_wc_status_str(wc.status), wc.vendor_err);
			return -EIO;
		}
		if (kind == WR_SEND || (kind == WR_WRITE && want != WR_WRITE))
			continue;
		if (kind != want) {
			fprintf(stderr, "%s: unexpected completion (kind %d while waiting for %d)\n",
				p->prog, kind, want);
			return -EPROTO;
		}
		if (kind == WR_RECV) {
			uint32_t j = (uint32_t)(wc.wr_id & 0xffffff);
			const uint8_t *s = p->msgs + (NMSG + j) * MSG_LEN;

			if (wc.byte_len != MSG_LEN) {
				fprintf(stderr, "%s: message of %u bytes\n", p->prog, wc.byte_len);
				return -EPROTO;
			}
			m->type = get_be32(s);
			m->round = get_be32(s + 4);
			m->addr = get_be64(s + 8);
			m->rkey = get_be32(s + 16);
			m->len = get_be32(s + 20);
			m->value = get_be64(s + 24);
			return post_recv(p, j);
		}
		return 0;
	}
}

/* ---------------------------------------------------------------------------------------
 * Server
 */

static int serve(struct ping *p)
{
	size_t size = (size_t)p->cfg.size;
	struct msg m, out;
	int rc;

	for (;;) {
		if ((rc = wait_for(p, WR_RECV, &m)) < 0)
			return rc;
		if (m.type == MSG_DONE) {
			memset(&out, 0, sizeof(out));
			out.type = MSG_SUMMARY;
			out.value = p->good;
			if (m.value != p->rounds) {
				fprintf(stderr, "%s: client counted %llu rounds, server %llu\n",
					p->prog, (unsigned long long)m.value,
					(unsigned long long)p->rounds);
				out.value = 0;
			}
			return send_msg(p, &out);
		}
		if (m.type != MSG_SOURCE || m.len != size || m.round != p->rounds) {
			fprintf(stderr, "%s: round %llu: expected the source buffer, got message "
				"type %u round %u length %u\n", p->prog,
				(unsigned long long)p->rounds, m.type, m.round, m.len);
			return -EPROTO;
		}
		/* rping's order: READ the client's source, then tell it to go ahead. */
		memset(p->a, 0, size);
		if ((rc = post_rdma(p, WR_READ, m.addr, m.rkey)) < 0 ||
		    (rc = wait_for(p, WR_READ, NULL)) < 0)
			return rc;
		if (pattern_check(p->a, size, p->cfg.seed, m.round, 0) < 0)
			p->good++;
		else
			fprintf(stderr, "%s: round %u: READ data differs from the client's\n",
				p->prog, m.round);
		memset(&out, 0, sizeof(out));
		out.type = MSG_GO;
		out.round = m.round;
		if ((rc = send_msg(p, &out)) < 0)
			return rc;
		if ((rc = wait_for(p, WR_RECV, &m)) < 0)
			return rc;
		if (m.type != MSG_SINK || m.len != size || m.round != p->rounds) {
			fprintf(stderr, "%s: round %llu: expected the sink buffer, got type %u\n",
				p->prog, (unsigned long long)p->rounds, m.type);
			return -EPROTO;
		}
		/* The WRITE and the SEND after it travel in order: the "go ahead" arrives only
		 * once the data is in place. */
		if ((rc = post_rdma(p, WR_WRITE, m.addr, m.rkey)) < 0)
			return rc;
		out.type = MSG_GO;
		out.round = m.round;
		if ((rc = send_msg(p, &out)) < 0)
			return rc;
		p->rounds++;
	}
}

static int run_server(struct ping *p)
{
	uint8_t req[SV_CM_MAX_PRIVATE_DATA], mine[16];
	size_t req_len = 0;
	int rc;

	if ((rc = ep_wait_request(&p->ep, p->deadline, req, &req_len)) < 0)
		return rc;
	if (req_len < 16 || get_be32(req) != 0x5356504eu) {
		fprintf(stderr, "%s: the connection request is not from svping\n", p->prog);
		sv_cm_reject(p->ep.id, NULL, 0);
		return -EPROTO;
	}
	p->cfg.size = get_be32(req + 4);
	p->cfg.seed = get_be64(req + 8);
	if (p->cfg.size == 0 || (rc = setup(p)) < 0) {
		sv_cm_reject(p->ep.id, NULL, 0);
		return rc < 0 ? rc : -EPROTO;
	}
	memcpy(mine, req, 16);
	if ((rc = ep_accept(&p->ep, mine, sizeof(mine), p->deadline)) < 0)
		return rc;
	if ((rc = serve(p)) < 0)
		return rc;
	/* Let the summary reach the client before it hangs up. */
	while (p->sends && p->ep.connected) {
		struct sv_wc wc;
		int n = cq_wait(p->ep.cq, p->ep.comp_ch, &wc, 1, 0, p->deadline);

		if (n < 0 || wc.status != SV_WC_SUCCESS || wc.wr_id == WRID(WR_SEND, p->sends - 1))
			break;
	}
	return ep_disconnect(&p->ep, 0, now_ns() + 5000000000ull);
}

/* ---------------------------------------------------------------------------------------
 * Client
 */

struct rtt {
	uint64_t min, max, sum, n;
};

static int run_client(struct ping *p, const char *host, uint16_t port, struct rtt *r)
{
	size_t size = (size_t)p->cfg.size;
	uint8_t mine[16], theirs[SV_CM_MAX_PRIVATE_DATA];
	size_t theirs_len = 0;
	struct msg m, out;
	int rc;

	if ((rc = setup(p)) < 0)
		return rc;
	put_be32(mine, 0x5356504eu);		/* "SVPN" */
	put_be32(mine + 4, (uint32_t)size);
	put_be64(mine + 8, p->cfg.seed);
	if ((rc = ep_connect(&p->ep, host, port, mine, sizeof(mine), p->deadline, theirs,
			     &theirs_len)) < 0)
		return rc;
	r->min = UINT64_MAX;
	for (uint64_t i = 0; i < p->cfg.count; i++) {
		uint32_t round = (uint32_t)i;
		uint64_t t0, dt;
		long bad;

		pattern_fill(p->a, size, p->cfg.seed, round, 0);
		memset(p->b, 0, size);
		t0 = now_ns();
		memset(&out, 0, sizeof(out));
		out.type = MSG_SOURCE;
		out.round = round;
		out.addr = (uintptr_t)p->a;
		out.rkey = p->a_mr->rkey;
		out.len = (uint32_t)size;
		if ((rc = send_msg(p, &out)) < 0 || (rc = wait_for(p, WR_RECV, &m)) < 0)
			return rc;
		if (m.type != MSG_GO || m.round != round) {
			fprintf(stderr, "%s: round %u: unexpected message type %u\n", p->prog,
				round, m.type);
			return -EPROTO;
		}
		out.type = MSG_SINK;
		out.addr = (uintptr_t)p->b;
		out.rkey = p->b_mr->rkey;
		if ((rc = send_msg(p, &out)) < 0 || (rc = wait_for(p, WR_RECV, &m)) < 0)
			return rc;
		if (m.type != MSG_GO || m.round != round) {
			fprintf(stderr, "%s: round %u: unexpected message type %u\n", p->prog,
				round, m.type);
			return -EPROTO;
		}
		dt = now_ns() - t0;
		bad = memcmp(p->a, p->b, size) ? pattern_check(p->b, size, p->cfg.seed, round, 0)
					       : -1;
		if (bad < 0)
			p->good++;
		else
			fprintf(stderr, "%s: round %u: data came back different at byte %ld\n",
				p->prog, round, bad);
		p->rounds++;
		r->n++;
		r->sum += dt;
		r->min = dt < r->min ? dt : r->min;
		r->max = dt > r->max ? dt : r->max;
		if (p->cfg.verbose)
			printf("svping: round %u: %zu bytes %s, rtt %.1f us\n", round, size,
			       bad < 0 ? "verified" : "CORRUPT", (double)dt / 1e3);
	}
	memset(&out, 0, sizeof(out));
	out.type = MSG_DONE;
	out.value = p->rounds;
	if ((rc = send_msg(p, &out)) < 0 || (rc = wait_for(p, WR_RECV, &m)) < 0)
		return rc;
	if (m.type != MSG_SUMMARY) {
		fprintf(stderr, "%s: expected the server's summary, got type %u\n", p->prog,
			m.type);
		return -EPROTO;
	}
	if (m.value != p->rounds) {
		fprintf(stderr, "%s: the server verified %llu of %llu rounds\n", p->prog,
			(unsigned long long)m.value, (unsigned long long)p->rounds);
		p->good = p->good < m.value ? p->good : m.value;
	}
	return ep_disconnect(&p->ep, 1, now_ns() + 5000000000ull);
}

/* ---------------------------------------------------------------------------------------
 * Main
 */

struct server_thread {
	struct ping side;
	struct loopback_server thr;
};

static int loopback_serve(void *side)
{
	return run_server(side);
}

static int side_init(struct ping *p, const struct config *c, const char *prog)
{
	struct sv_device_opts o;
	int rc;

	memset(p, 0, sizeof(*p));
	p->cfg = *c;
	p->prog = prog;
	p->deadline = now_ns() + (uint64_t)c->timeout_s * 1000000000ull;
	sv_device_opts_init(&o);
	o.transport = c->transport;
	if (c->device)
		snprintf(o.device, sizeof(o.device), "%s", c->device);
	if (c->crc >= 0)
		o.crc = c->crc;
	if ((rc = tool_tls_apply(&c->tls, c->loopback, c->crc >= 0, &o, prog)) < 0)
		return rc;
	return ep_open(&p->ep, prog, &o);
}

static int parse_args(int argc, char **argv, struct config *c)
{
	enum { O_TRANSPORT = 256, O_LOOPBACK, O_CRC, O_BUSY, O_TIMEOUT, O_SEED, O_DEVICE, O_HELP };
	static const struct option longopts[] = {
		{ "transport", required_argument, NULL, O_TRANSPORT },
		{ "loopback", no_argument, NULL, O_LOOPBACK },
		{ "crc", required_argument, NULL, O_CRC },
		{ "busy", no_argument, NULL, O_BUSY },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "seed", required_argument, NULL, O_SEED },
		{ "device", required_argument, NULL, O_DEVICE },
		TOOL_TLS_LONGOPTS,
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int opt;

	memset(c, 0, sizeof(*c));
	c->port = DEFAULT_PORT;
	c->count = DEFAULT_COUNT;
	c->size = DEFAULT_SIZE;
	c->transport = SV_TRANSPORT_TCP;
	c->crc = -1;
	c->timeout_s = DEFAULT_TIMEOUT_S;
	c->seed = now_ns() ^ ((uint64_t)getpid() << 32);
	c->bind = "0.0.0.0";
	while ((opt = getopt_long(argc, argv, "sc:a:p:C:S:vh", longopts, NULL)) != -1) {
		if (tool_tls_opt(&c->tls, opt, optarg))
			continue;
		switch (opt) {
		case 's':
			c->server = 1;
			break;
		case 'c':
			c->host = optarg;
			break;
		case 'a':
			c->bind = optarg;
			break;
		case 'p':
			if (parse_u64(optarg, &v) < 0 || v > 65535)
				goto bad;
			c->port = (uint16_t)v;
			c->port_given = 1;
			break;
		case 'C':
			if (parse_u64(optarg, &c->count) < 0 || c->count == 0 ||
			    c->count > UINT32_MAX)
				goto bad;
			break;
		case 'S':
			if (parse_size(optarg, &c->size) < 0 || c->size == 0 || c->size > (1u << 30))
				goto bad;
			break;
		case 'v':
			c->verbose = 1;
			break;
		case O_TRANSPORT:
			if (parse_transport(optarg, &c->transport) < 0)
				goto bad;
			break;
		case O_LOOPBACK:
			c->loopback = 1;
			break;
		case O_DEVICE:
			c->device = optarg;
			break;
		case O_CRC:
			if (parse_on_off(optarg, &c->crc) < 0)
				goto bad;
			break;
		case O_BUSY:
			c->busy = 1;
			break;
		case O_TIMEOUT:
			if (parse_timeout(optarg, &c->timeout_s) < 0)
				goto bad;
			break;
		case O_SEED:
			if (parse_u64(optarg, &c->seed) < 0)
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
	if (optind < argc || c->server + !!c->host + c->loopback != 1) {
		usage(stderr);
		return -EINVAL;
	}
	if (c->loopback && !c->port_given)
		c->port = 0;
	return 0;
bad:
	fprintf(stderr, "%s: bad value '%s'\n", PROG, optarg);
	usage(stderr);
	return -EINVAL;
}

int main(int argc, char **argv)
{
	struct config c;
	struct ping cli;
	struct server_thread *srv = NULL;
	struct rtt r = { 0 };
	char host[INET6_ADDRSTRLEN] = "";
	uint16_t port;
	int rc, ok;

	if (parse_args(argc, argv, &c) < 0)
		return 2;
	arm_run_timeout(c.timeout_s + 10);

	if (c.server) {
		struct ping s;

		if ((rc = side_init(&s, &c, PROG)) < 0 ||
		    (rc = ep_listen(&s.ep, c.bind, c.port, &port, host)) < 0)
			return rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP ? 2 : 3;
		fprintf(stderr, "%s: listening on %s port %u (connect to %s)\n", PROG, c.bind,
			port, host);
		rc = run_server(&s);
		ok = rc == 0 && s.good == s.rounds;
		printf("svping server: %llu rounds served, %llu verified%s\n",
		       (unsigned long long)s.rounds, (unsigned long long)s.good,
		       rc < 0 ? " (ended by an error)" : "");
		teardown(&s);
		return ok ? 0 : rc < 0 ? 3 : 1;
	}

	port = c.port;
	if (c.loopback) {
		srv = calloc(1, sizeof(*srv));
		if (!srv)
			return 3;
		if ((rc = side_init(&srv->side, &c, PROG "[server]")) < 0 ||
		    (rc = ep_listen(&srv->side.ep, loopback_listen_addr(c.transport), c.port, &port,
				     host)) < 0)
			return rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP ? 2 : 3;
		if (loopback_server_start(&srv->thr, PROG, loopback_serve, &srv->side, &g_stop) < 0)
			return 3;
	}
	if ((rc = side_init(&cli, &c, PROG)) < 0)
		return rc == -EPROTONOSUPPORT || rc == -EOPNOTSUPP ? 2 : 3;
	rc = run_client(&cli, c.loopback ? host : c.host, port, &r);
	if (rc < 0 && srv) {
		/* The server thread may be blocked on this run: report and leave. */
		fprintf(stderr, "%s: failed after %llu rounds: %s\n", PROG,
			(unsigned long long)cli.rounds, sv_strerror(rc));
		fflush(stdout);
		_exit(3);
	}
	if (srv && loopback_server_join(&srv->thr) < 0)
		rc = srv->thr.rc;
	ok = rc == 0 && cli.good == c.count && cli.rounds == c.count;
	printf("svping: %llu rounds of %llu bytes (SEND + READ + WRITE each), %llu verified%s\n",
	       (unsigned long long)cli.rounds, (unsigned long long)c.size,
	       (unsigned long long)cli.good, ok ? "" : " -- FAILED");
	if (r.n)
		printf("svping: rtt min %.1f us, avg %.1f us, max %.1f us\n", (double)r.min / 1e3,
		       (double)r.sum / (double)r.n / 1e3, (double)r.max / 1e3);
	if (rc < 0)
		fprintf(stderr, "%s: %s\n", PROG, sv_strerror(rc));
	teardown(&cli);
	if (srv) {
		teardown(&srv->side);
		free(srv);
	}
	return ok ? 0 : rc < 0 ? 3 : 1;
}
