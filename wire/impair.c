/*
 * impair.c — the fault-injection layer of the UDP transport (see impair.h).
 *
 * The PRNG is splitmix64 (Steele et al., 2014): tiny, seedable, and good enough for
 * choosing which packets to hurt. Each packet draws the same number of values whatever
 * happens to it, so one fault does not shift the decisions for the packets after it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wire/impair.h"

/* A reordered packet is held this long beyond the configured delay, so that the packets
 * sent after it overtake it on loopback. */
#define REORDER_HOLD_NS 300000ull

struct sv__impair_held {
	uint64_t release_ns;
	uint64_t seq;			/* ties keep send order */
	struct sockaddr_storage dst;
	socklen_t dst_len;
	size_t len;
	uint8_t data[];
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A uniform double in [0, 1). */
static double uniform(uint64_t *s)
{
	return (double)(splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
}

static int parse_prob(const char *v, double *out)
{
	char *end;
	double d = strtod(v, &end);

	if (end == v || *end || d < 0 || d > 1)
		return -EINVAL;
	*out = d;
	return 0;
}

int sv__impair_parse(const char *spec, struct sv__impair_cfg *cfg)
{
	char buf[256], *save = NULL, *tok;

	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = 1;
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *end;
		unsigned long long u;
		int rc = 0;

		if (!eq)
			return -EINVAL;
		*eq++ = '\0';
		if (!strcasecmp(tok, "loss")) {
			rc = parse_prob(eq, &cfg->loss);
		} else if (!strcasecmp(tok, "dup")) {
			rc = parse_prob(eq, &cfg->dup);
		} else if (!strcasecmp(tok, "reorder")) {
			rc = parse_prob(eq, &cfg->reorder);
		} else if (!strcasecmp(tok, "delay_ms") || !strcasecmp(tok, "seed") ||
			   !strcasecmp(tok, "rate_mbit") || !strcasecmp(tok, "queue_pkts")) {
			u = strtoull(eq, &end, 0);
			if (end == eq || *end)
				return -EINVAL;
			if (!strcasecmp(tok, "delay_ms")) {
				if (u > 60000)
					return -EINVAL;
				cfg->delay_ms = (uint32_t)u;
			} else if (!strcasecmp(tok, "rate_mbit")) {
				if (u < 1 || u > 1000000)	/* 1 Mbit/s .. 1 Tbit/s */
					return -EINVAL;
				cfg->rate_mbit = (uint32_t)u;
			} else if (!strcasecmp(tok, "queue_pkts")) {
				if (u < 1 || u > 1000000)
					return -EINVAL;
				cfg->queue_pkts = (uint32_t)u;
			} else {
				cfg->seed = u;
			}
		} else {
			return -EINVAL;
		}
		if (rc < 0)
			return rc;
	}
	if (cfg->queue_pkts && !cfg->rate_mbit)
		return -EINVAL;		/* a queue needs the link it is in front of */
	if (cfg->rate_mbit && !cfg->queue_pkts)
		cfg->queue_pkts = SV__IMPAIR_QUEUE_DEFAULT;
	return 0;
}

bool sv__impair_active(const struct sv__impair_cfg *cfg)
{
	return cfg->loss > 0 || cfg->dup > 0 || cfg->reorder > 0 || cfg->delay_ms > 0 ||
	       cfg->rate_mbit > 0;
}

int sv__impair_init(struct sv__impair *im, const struct sv__impair_cfg *cfg)
{
	memset(im, 0, sizeof(*im));
	im->cfg = *cfg;
	im->rng = cfg->seed;
	if (cfg->rate_mbit) {
		im->q_cap = cfg->queue_pkts + 1;	/* the queue and the link */
		if (!(im->q_done = calloc(im->q_cap, sizeof(*im->q_done))))
			return -ENOMEM;
	}
	pthread_mutex_init(&im->lock, NULL);
	return 0;
}

void sv__impair_fini(struct sv__impair *im)
{
	for (uint32_t i = 0; i < im->n; i++)
		free(im->heap[i]);
	free(im->heap);
	free(im->q_done);
	pthread_mutex_destroy(&im->lock);
}

static bool before(const struct sv__impair_held *a, const struct sv__impair_held *b)
{
	return a->release_ns < b->release_ns ||
	       (a->release_ns == b->release_ns && a->seq < b->seq);
}

static void heap_up(struct sv__impair *im, uint32_t i)
{
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		struct sv__impair_held *t;

		if (!before(im->heap[i], im->heap[p]))
			break;
		t = im->heap[i];
		im->heap[i] = im->heap[p];
		im->heap[p] = t;
		i = p;
	}
}

static void heap_down(struct sv__impair *im, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		struct sv__impair_held *t;

		if (l < im->n && before(im->heap[l], im->heap[m]))
			m = l;
		if (r < im->n && before(im->heap[r], im->heap[m]))
			m = r;
		if (m == i)
			return;
		t = im->heap[i];
		im->heap[i] = im->heap[m];
		im->heap[m] = t;
		i = m;
	}
}

static size_t msg_bytes(const struct msghdr *m)
{
	size_t len = 0;

	for (size_t i = 0; i < m->msg_iovlen; i++)
		len += m->msg_iov[i].iov_len;
	return len;
}

/* Copies the datagram out of its iovecs (which point into registered memory the
 * application may reuse once the WR completes) and queues it. Held packets are an
 * impairment tool, so the copy is fine here. */
static void hold(struct sv__impair *im, const struct msghdr *m, uint64_t release_ns)
{
	struct sv__impair_held *h;
	size_t len = msg_bytes(m), off = 0;

	if (im->n == im->cap) {
		uint32_t cap = im->cap ? 2 * im->cap : 256;
		void *p = realloc(im->heap, cap * sizeof(*im->heap));

		if (!p)
			return;		/* no memory: the packet is lost, as on a full queue */
		im->heap = p;
		im->cap = cap;
	}
	if (!(h = malloc(sizeof(*h) + len)))
		return;
	for (size_t i = 0; i < m->msg_iovlen; i++) {
		memcpy(h->data + off, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
		off += m->msg_iov[i].iov_len;
	}
	h->len = len;
	h->release_ns = release_ns;
	h->seq = im->seq++;
	memcpy(&h->dst, m->msg_name, m->msg_namelen);
	h->dst_len = m->msg_namelen;
	im->heap[im->n++] = h;
	heap_up(im, im->n - 1);
}

/*
 * [lock] The bottleneck takes a datagram of len bytes (UDP payload) at now_ns unless its
 * queue is full: *done_ns is when it leaves the link. The datagrams that left by now
 * are off the ring first; what is left on it is the one on the link and those queued.
 */
static bool link_take(struct sv__impair *im, uint64_t now_ns, size_t len, uint64_t *done_ns)
{
	/* IPv4 and UDP headers count: the link carries IP packets. Bits over Mbit/s is
	 * microseconds. */
	uint64_t tx_ns = ((uint64_t)len + 28) * 8 * 1000 / im->cfg.rate_mbit;
	uint64_t start;

	while (im->q_n && im->q_done[im->q_head] <= now_ns) {
		im->q_head = (im->q_head + 1) % im->q_cap;
		im->q_n--;
	}
	if (im->q_n == im->q_cap) {
		im->queue_drops++;
		return false;
	}
	start = im->link_free_ns > now_ns ? im->link_free_ns : now_ns;
	im->link_free_ns = start + (tx_ns ? tx_ns : 1);
	im->q_done[(im->q_head + im->q_n) % im->q_cap] = im->link_free_ns;
	im->q_n++;
	*done_ns = im->link_free_ns;
	return true;
}

int sv__impair_send(struct sv__impair *im, int fd, struct mmsghdr *msgs, unsigned n,
		    uint64_t now_ns, uint64_t *next_ns)
{
	uint64_t delay_ns;
	int err = 0;

	pthread_mutex_lock(&im->lock);
	delay_ns = (uint64_t)im->cfg.delay_ms * 1000000u;
	for (unsigned i = 0; i < n; i++) {
		const struct msghdr *m = &msgs[i].msg_hdr;
		double r_loss = uniform(&im->rng);
		double r_dup = uniform(&im->rng);
		double r_reo = uniform(&im->rng);
		unsigned copies = r_dup < im->cfg.dup ? 2 : 1;

		if (r_loss < im->cfg.loss) {
			im->dropped++;
			continue;
		}
		if (copies == 2)
			im->duplicated++;
		for (unsigned c = 0; c < copies; c++) {
			uint64_t extra = (c == 0 && r_reo < im->cfg.reorder) ? REORDER_HOLD_NS : 0;
			uint64_t at = now_ns;	/* when it leaves the bottleneck */

			if (im->cfg.rate_mbit && !link_take(im, now_ns, msg_bytes(m), &at))
				continue;
			if (extra)
				im->reordered++;
			if (at > now_ns || delay_ns || extra) {
				if (delay_ns)
					im->delayed++;
				hold(im, m, at + delay_ns + extra);
			} else if (sendmsg(fd, m, MSG_DONTWAIT) < 0 && !err) {
				err = -errno;	/* the caller judges it, as without impairment */
			}
		}
	}
	*next_ns = im->n ? im->heap[0]->release_ns : 0;
	pthread_mutex_unlock(&im->lock);
	return err;
}

uint64_t sv__impair_flush(struct sv__impair *im, int fd, uint64_t now_ns)
{
	uint64_t next;

	pthread_mutex_lock(&im->lock);
	while (im->n && im->heap[0]->release_ns <= now_ns) {
		struct sv__impair_held *h = im->heap[0];

		im->heap[0] = im->heap[--im->n];
		heap_down(im, 0);
		if (sendto(fd, h->data, h->len, MSG_DONTWAIT, (struct sockaddr *)&h->dst,
			   h->dst_len) < 0) {
			im->refused++;
			im->refused_errno = errno;
		}
		free(h);
	}
	next = im->n ? im->heap[0]->release_ns : 0;
	pthread_mutex_unlock(&im->lock);
	return next;
}
