/*
 * test_roce_cm_index.c — the UDP connection manager's communication-ID multimap and
 * deadline heap (wire/roce_cm_index.c): many entries, colliding keys, growth, removal
 * in any order, checked against a plain array.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "wire/roce_cm_index.h"

#define N 20000

static uint32_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

static unsigned count(const struct sv__cm_index *x, uint32_t key, const void *item)
{
	size_t it = 0;
	unsigned n = 0;
	void *p;

	while ((p = sv__cm_index_next(x, key, &it)))
		n += p == item;
	return n;
}

Test(roce_cm_index, many_keys_grow_and_go)
{
	static uint32_t key[N];
	static char item[N];
	struct sv__cm_index x;
	uint64_t s = 1;

	sv__cm_index_init(&x, 0x1234567u);
	cr_assert_null(sv__cm_index_next(&x, 5, &(size_t){ 0 }));
	for (int i = 0; i < N; i++) {
		key[i] = rnd(&s);
		cr_assert_eq(sv__cm_index_add(&x, key[i], &item[i]), 0);
	}
	cr_expect_eq(x.n, N);
	cr_expect_geq(x.cap, 2 * N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(count(&x, key[i], &item[i]), 1, "entry %d", i);
	/* every other one out, then the rest, each time all that stay are found */
	for (int i = 0; i < N; i += 2)
		sv__cm_index_del(&x, key[i], &item[i]);
	sv__cm_index_del(&x, key[0], &item[0]);		/* absent: nothing */
	for (int i = 0; i < N; i++)
		cr_assert_eq(count(&x, key[i], &item[i]), (unsigned)(i & 1), "entry %d", i);
	for (int i = N - 1; i > 0; i -= 2)
		sv__cm_index_del(&x, key[i], &item[i]);
	cr_expect_eq(x.n, 0);
	for (size_t i = 0; i < x.cap; i++)
		cr_assert_null(x.slot[i].item);
	sv__cm_index_fini(&x);
}

/* One key for many items (remote IDs repeat across peers), and keys that share a home
 * slot: every item of a key is returned once, whatever was removed around it. */
Test(roce_cm_index, duplicates_and_collisions)
{
	static char item[3000];
	struct sv__cm_index x;

	sv__cm_index_init(&x, 0);
	cr_assert_eq(sv__cm_index_reserve(&x, 100), 0);
	cr_expect_eq(x.cap, 256);
	for (int i = 0; i < 3000; i++)
		cr_assert_eq(sv__cm_index_add(&x, (uint32_t)(i % 3), &item[i]), 0);
	for (int i = 0; i < 3000; i += 3)
		sv__cm_index_del(&x, 0, &item[i]);
	for (int k = 0; k < 3; k++) {
		size_t it = 0;
		unsigned n = 0;
		char *p;

		while ((p = sv__cm_index_next(&x, (uint32_t)k, &it))) {
			cr_assert_eq((p - item) % 3, k);
			n++;
		}
		cr_expect_eq(n, k ? 1000u : 0u);
	}
	for (int i = 0; i < 3000; i++)
		cr_assert_eq(count(&x, (uint32_t)(i % 3), &item[i]), i % 3 ? 1u : 0u);
	sv__cm_index_fini(&x);
}

struct timed {
	uint64_t key;
	size_t pos;
};

Test(roce_cm_index, heap_orders_moves_and_removes)
{
	static struct timed t[N];
	struct sv__cm_heap h = { 0 };
	uint64_t s = 7, last = 0, k;
	struct timed *p;
	size_t n = 0;

	for (int i = 0; i < N; i++) {
		t[i].key = rnd(&s) % 1000 + 1;		/* many equal keys */
		cr_assert_eq(sv__cm_heap_set(&h, &t[i].pos, &t[i], t[i].key), 0);
	}
	/* move a third, remove a third */
	for (int i = 0; i < N; i += 3) {
		t[i].key = rnd(&s) % 5000 + 1;
		cr_assert_eq(sv__cm_heap_set(&h, &t[i].pos, &t[i], t[i].key), 0);
	}
	for (int i = 1; i < N; i += 3)
		sv__cm_heap_del(&h, &t[i].pos);
	sv__cm_heap_del(&h, &t[1].pos);			/* absent: nothing */
	cr_expect_eq(h.n, N - (N + 1) / 3);
	while ((p = sv__cm_heap_top(&h, &k))) {
		cr_assert_eq(k, p->key);
		cr_assert_geq(k, last);
		cr_assert_eq(p->pos, 1);
		last = k;
		sv__cm_heap_del(&h, &p->pos);
		cr_assert_eq(p->pos, 0);
		n++;
	}
	cr_expect_eq(n, N - (N + 1) / 3);
	for (int i = 0; i < N; i++)
		cr_assert_eq(t[i].pos, 0);
	sv__cm_heap_fini(&h);
}
