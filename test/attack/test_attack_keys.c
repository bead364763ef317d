/*
 * test_attack_keys.c — issue 10 finding 3: a peer that has seen many rkeys or QPNs must
 * not be able to predict the next one (doc/security.md, "Keys and identifiers").
 *
 * The attacks, each run against the library:
 *  - the review's attack: recover the seed of the old xorshift32 8-bit key generator
 *    from five rkeys (its output bits are linear in the seed over GF(2), so 40 equations
 *    give the 32-bit seed) and predict the next 200 keys. It is checked first against a
 *    model of the old generator, where it must predict all 200 (so the attack is real),
 *    then against the library, where it must predict none;
 *  - any linear generator: for every bit of a key, try to find one affine GF(2)
 *    function of the previous five keys (160 bits) that gives that bit for every key
 *    of a long run. xorshift, LFSRs and counters with a known step all have one; 32
 *    random bits do not (with 8000 equations in 161 unknowns, a consistent system has
 *    probability 2^-7800);
 *  - bit balance (each bit set in half the keys, within 6 standard deviations) and a
 *    chi-square over each of the three upper bytes (256 bins, p < 1e-10 to fail).
 * The same for type 1 window keys (their 24 upper bits) and for QP numbers (24 bits),
 * which must also never be 0, 1 or sequential.
 *
 * A false failure of these statistical checks has probability below 1e-7 per run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "softverbs.h"

#define NKEYS 8192		/* 4096 live at once, then 4096 registered and freed in turn */
#define NQP 512			/* 256 live at once, then 256 created and destroyed in turn */
#define NMW 2048

static uint8_t buf[4096];

/* ---------------------------------------------------------------------------------------
 * GF(2) linear algebra over at most 192 unknowns.
 */

#define GF_WORDS 3

struct gf_row {
	uint64_t w[GF_WORDS];
	unsigned rhs;
};

static void gf_set(struct gf_row *r, unsigned col)
{
	r->w[col / 64] |= 1ull << (col % 64);
}

static bool gf_get(const struct gf_row *r, unsigned col)
{
	return r->w[col / 64] >> (col % 64) & 1;
}

static void gf_xor(struct gf_row *r, const struct gf_row *s)
{
	for (int i = 0; i < GF_WORDS; i++)
		r->w[i] ^= s->w[i];
	r->rhs ^= s->rhs;
}

/* Incremental elimination: pivot[c] is the row whose lowest column is c. */
struct gf_sys {
	struct gf_row pivot[GF_WORDS * 64];
	bool have[GF_WORDS * 64];
	unsigned ncols;
};

/* Adds one equation; false when it contradicts the ones before. */
static bool gf_add(struct gf_sys *s, struct gf_row r)
{
	for (unsigned c = 0; c < s->ncols; c++) {
		if (!gf_get(&r, c))
			continue;
		if (!s->have[c]) {
			s->pivot[c] = r;
			s->have[c] = true;
			return true;
		}
		gf_xor(&r, &s->pivot[c]);
	}
	return r.rhs == 0;	/* 0 = 0 is fine, 0 = 1 is a contradiction */
}

/*
 * Whether bit `bit` of every seq[i], i >= w, is one affine function of the w * width bits
 * of seq[i-w .. i-1]: the unknowns are the function's coefficients and constant.
 */
static bool affine_predictable(const uint32_t *seq, int n, unsigned width, unsigned w,
			       unsigned bit)
{
	static struct gf_sys s;

	memset(&s, 0, sizeof(s));
	s.ncols = w * width + 1;
	cr_assert_leq(s.ncols, GF_WORDS * 64);
	for (int i = (int)w; i < n; i++) {
		struct gf_row r = { .rhs = seq[i] >> bit & 1 };

		for (unsigned k = 0; k < w; k++)
			for (unsigned b = 0; b < width; b++)
				if (seq[i - 1 - (int)k] >> b & 1)
					gf_set(&r, k * width + b);
		gf_set(&r, w * width);	/* the constant */
		if (!gf_add(&s, r))
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------------------------------
 * The old generator and the review's attack on it.
 */

static uint32_t xorshift32(uint32_t x)
{
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

/* The keys the library handed out before issue 10: index << 8 | the top byte of the
 * next xorshift32 state, indexes counting up from 1 for fresh slots. */
static void old_keys(uint32_t seed, uint32_t *keys, int n)
{
	uint32_t x = seed;

	for (int i = 0; i < n; i++) {
		x = xorshift32(x);
		keys[i] = (uint32_t)(i + 1) << 8 | x >> 24;
	}
}

/* xorshift32 on symbolic state: m[i] is the set of seed bits bit i of the state is the
 * XOR of. */
static void sym_step(uint32_t m[32])
{
	for (int i = 31; i >= 13; i--)
		m[i] ^= m[i - 13];
	for (int i = 0; i <= 14; i++)
		m[i] ^= m[i + 17];
	for (int i = 31; i >= 5; i--)
		m[i] ^= m[i - 5];
}

/*
 * The attack: from the low bytes of keys[0..4] solve the 40 linear equations for the
 * seed, then predict keys[5 .. 5+npred-1] (the next index, the next top byte). Returns
 * how many predictions were right; 0 when the equations have no solution.
 */
static int seed_recovery_attack(const uint32_t *keys, int npred)
{
	static struct gf_sys s;
	uint32_t m[32], seed = 0, pred[256];
	int right = 0;

	memset(&s, 0, sizeof(s));
	s.ncols = 32;
	for (int i = 0; i < 32; i++)
		m[i] = 1u << i;
	for (int k = 0; k < 5; k++) {
		sym_step(m);
		for (int j = 0; j < 8; j++) {
			struct gf_row r = { .w = { m[24 + j] }, .rhs = keys[k] >> j & 1 };

			if (!gf_add(&s, r))
				return 0;
		}
	}
	/* Back substitution, free unknowns 0: pivot rows have their lowest column first,
	 * so solve from the highest column down. */
	for (int c = 31; c >= 0; c--) {
		if (!s.have[c])
			continue;
		unsigned v = s.pivot[c].rhs;

		for (int d = c + 1; d < 32; d++)
			if (gf_get(&s.pivot[c], (unsigned)d))
				v ^= seed >> d & 1;
		seed |= (uint32_t)v << c;
	}
	cr_assert_leq(5 + npred, 256);
	old_keys(seed, pred, 5 + npred);
	for (int i = 0; i < npred; i++) {
		uint32_t guess = ((keys[4 + i] >> 8) + 1) << 8 | (pred[5 + i] & 0xff);

		right += guess == keys[5 + i];
	}
	return right;
}

/* ---------------------------------------------------------------------------------------
 * Statistics.
 */

/* Each of bits [lo, hi) is set in n/2 of the values, within 6 standard deviations. */
static void assert_bits_balanced(const uint32_t *v, int n, unsigned lo, unsigned hi,
				 const char *what)
{
	double sd = sqrt(n) / 2;

	for (unsigned b = lo; b < hi; b++) {
		int ones = 0;

		for (int i = 0; i < n; i++)
			ones += v[i] >> b & 1;
		cr_assert_lt(fabs(ones - n / 2.0), 6 * sd, "%s: bit %u set in %d of %d", what, b,
			     ones, n);
	}
}

/* Chi-square of the byte at bit `shift` over 256 bins, df 255: mean 255, sd 22.6; 436 is
 * 8 sd out (upper tail below 1e-10 by the Wilson-Hilferty approximation). */
static void assert_byte_uniform(const uint32_t *v, int n, unsigned shift, const char *what)
{
	int bins[256] = { 0 };
	double e = n / 256.0, chi2 = 0;

	for (int i = 0; i < n; i++)
		bins[v[i] >> shift & 0xff]++;
	for (int i = 0; i < 256; i++)
		chi2 += (bins[i] - e) * (bins[i] - e) / e;
	cr_assert_lt(chi2, 436, "%s: chi-square %.1f of the byte at bit %u", what, chi2, shift);
}

/* ---------------------------------------------------------------------------------------
 * The tests.
 */

static struct sv_context *ctx;
static struct sv_pd *pd;

static void setup(void)
{
	struct sv_device_opts o;

	sv_device_opts_init(&o);
	o.transport = SV_TRANSPORT_TCP;
	cr_assert_eq(sv_open_device(&o, &ctx), 0);
	cr_assert_eq(sv_alloc_pd(ctx, &pd), 0);
}

static void teardown(void)
{
	cr_assert_eq(sv_dealloc_pd(pd), 0);
	cr_assert_eq(sv_close_device(ctx), 0);
}

TestSuite(attack_keys, .init = setup, .fini = teardown, .timeout = 60);

/* NKEYS rkeys in the order a peer would see them: 4096 regions registered and kept, then
 * 4096 registered and deregistered one after the other (reusing freed slots). */
static void collect_rkeys(uint32_t *keys)
{
	static struct sv_mr *live[NKEYS / 2];

	for (int i = 0; i < NKEYS / 2; i++) {
		cr_assert_eq(sv_reg_mr(pd, buf, sizeof(buf), SV_ACCESS_LOCAL_WRITE |
				       SV_ACCESS_REMOTE_WRITE, &live[i]), 0);
		keys[i] = live[i]->rkey;
		cr_assert_eq(live[i]->lkey, live[i]->rkey);
	}
	for (int i = NKEYS / 2; i < NKEYS; i++) {
		struct sv_mr *mr;

		cr_assert_eq(sv_reg_mr(pd, buf, sizeof(buf), SV_ACCESS_LOCAL_WRITE |
				       SV_ACCESS_REMOTE_WRITE, &mr), 0);
		keys[i] = mr->rkey;
		cr_assert_eq(sv_dereg_mr(mr), 0);
	}
	for (int i = 0; i < NKEYS / 2; i++)
		cr_assert_eq(sv_dereg_mr(live[i]), 0);
}

Test(attack_keys, the_xorshift_seed_recovery_attack_works_on_the_old_generator)
{
	uint32_t keys[205], seed;

	/* The self-check: on the keys the library used to hand out the attack predicts
	 * every key after the fifth (200 of 200, as the review found), for any seed. */
	for (int trial = 0; trial < 20; trial++) {
		cr_assert_eq(getrandom(&seed, sizeof(seed), 0), (ssize_t)sizeof(seed));
		old_keys(seed | 1, keys, 205);
		cr_assert_eq(seed_recovery_attack(keys, 200), 200, "seed %#x", seed | 1);
	}
	/* And the generic test finds the old key bytes linear in the previous five. */
	{
		static uint32_t seq[NKEYS];

		old_keys(seed | 1, seq, NKEYS);
		for (unsigned b = 0; b < 8; b++)
			cr_assert(affine_predictable(seq, NKEYS, 32, 5, b),
				  "bit %u of the old keys", b);
	}
}

Test(attack_keys, the_seed_recovery_attack_predicts_no_rkey)
{
	static uint32_t keys[NKEYS];
	int right = 0;

	collect_rkeys(keys);
	/* Every window of five keys the peer saw, then the 200 after it. */
	for (int at = 0; at + 205 <= NKEYS; at += 205)
		right += seed_recovery_attack(keys + at, 200);
	cr_assert_eq(right, 0, "%d rkeys predicted", right);
}

Test(attack_keys, no_rkey_bit_is_a_linear_function_of_the_previous_five_keys)
{
	static uint32_t keys[NKEYS];

	collect_rkeys(keys);
	for (unsigned b = 0; b < 32; b++)
		cr_assert_not(affine_predictable(keys, NKEYS, 32, 5, b),
			      "bit %u of an rkey is linear in the five before it", b);
}

Test(attack_keys, rkey_bits_are_balanced_and_the_upper_bytes_uniform)
{
	static uint32_t keys[NKEYS];

	collect_rkeys(keys);
	assert_bits_balanced(keys, NKEYS, 0, 32, "rkeys");
	for (unsigned shift = 8; shift < 32; shift += 8)
		assert_byte_uniform(keys, NKEYS, shift, "rkeys");
	/* The slot indexes do not count up: fewer than 1 in 100 keys is its predecessor's
	 * index + 1 (each is, by chance, with probability about 2^-18). */
	{
		int seq = 0;

		for (int i = 1; i < NKEYS; i++)
			seq += ((keys[i] >> 8) & 0x3ffff) == (((keys[i - 1] >> 8) + 1) & 0x3ffff);
		cr_assert_lt(seq, NKEYS / 100, "%d keys follow their predecessor's index", seq);
	}
}

Test(attack_keys, window_keys_carry_24_unpredictable_bits)
{
	static struct sv_mw *mw[NMW];
	static uint32_t keys[NMW];

	for (int i = 0; i < NMW; i++) {
		cr_assert_eq(sv_alloc_mw(pd, SV_MW_TYPE_1, &mw[i]), 0);
		keys[i] = mw[i]->rkey;
	}
	for (int i = 0; i < NMW; i++)
		cr_assert_eq(sv_dealloc_mw(mw[i]), 0);
	/* The low 8 bits are the consumer's after a bind; the upper 24 are the library's. */
	assert_bits_balanced(keys, NMW, 8, 32, "window keys");
	for (unsigned b = 8; b < 32; b++)
		cr_assert_not(affine_predictable(keys, NMW, 32, 5, b),
			      "bit %u of a window key is linear in the five before it", b);
}

Test(attack_keys, qp_numbers_are_random_24_bit_never_0_1_or_sequential)
{
	static struct sv_qp *live[NQP / 2];
	static uint32_t qpn[NQP];
	struct sv_cq *cq;
	struct sv_qp_init_attr ia = { 0 };
	int seq = 0;

	cr_assert_eq(sv_create_cq(ctx, 16, NULL, NULL, 0, &cq), 0);
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = SV_QPT_RC;
	for (int i = 0; i < NQP; i++) {
		struct sv_qp *qp;

		cr_assert_eq(sv_create_qp(pd, &ia, &qp), 0);
		qpn[i] = qp->qp_num;
		cr_assert_geq(qpn[i], 2, "QPN %u", qpn[i]);
		cr_assert_leq(qpn[i], 0xffffff, "QPN %u", qpn[i]);
		for (int j = 0; j < i && j < NQP / 2; j++)
			cr_assert_neq(qpn[i], qpn[j], "QPN %u given twice while live", qpn[i]);
		if (i < NQP / 2)
			live[i] = qp;
		else
			cr_assert_eq(sv_destroy_qp(qp), 0);
	}
	for (int i = 0; i < NQP / 2; i++)
		cr_assert_eq(sv_destroy_qp(live[i]), 0);
	cr_assert_eq(sv_destroy_cq(cq), 0);

	/* Each pair is sequential by chance with probability 2^-24. */
	for (int i = 1; i < NQP; i++)
		seq += qpn[i] == qpn[i - 1] + 1;
	cr_assert_leq(seq, 1, "%d QPNs follow their predecessor", seq);
	assert_bits_balanced(qpn, NQP, 0, 24, "QPNs");
	for (unsigned b = 0; b < 24; b++)
		cr_assert_not(affine_predictable(qpn, NQP, 24, 5, b),
			      "bit %u of a QPN is linear in the five before it", b);
}
