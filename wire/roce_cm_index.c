/*
 * roce_cm_index.c — the connection manager's communication-ID multimap and deadline
 * heap (roce_cm_index.h describes both).
 */
#include <errno.h>
#include <stdlib.h>

#include "wire/roce_cm_index.h"

#define INDEX_MIN_CAP 16

/* The finalizer of MurmurHash3's 32-bit variant: every key bit reaches every slot bit. */
static size_t home(const struct sv__cm_index *x, uint32_t key)
{
	uint32_t h = key ^ x->seed;

	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h & (x->cap - 1);
}

void sv__cm_index_init(struct sv__cm_index *x, uint32_t seed)
{
	x->slot = NULL;
	x->cap = x->n = 0;
	x->seed = seed;
}

void sv__cm_index_fini(struct sv__cm_index *x)
{
	free(x->slot);
	sv__cm_index_init(x, x->seed);
}

static void put(struct sv__cm_index *x, uint32_t key, void *item)
{
	size_t i = home(x, key);

	while (x->slot[i].item)
		i = (i + 1) & (x->cap - 1);
	x->slot[i].item = item;
	x->slot[i].key = key;
	x->n++;
}

int sv__cm_index_reserve(struct sv__cm_index *x, size_t n)
{
	struct sv__cm_index_slot *old = x->slot;
	size_t cap = x->cap ? x->cap : INDEX_MIN_CAP, old_cap = x->cap;

	while (n > cap / 2)
		cap *= 2;
	if (cap == x->cap)
		return 0;
	if (!(x->slot = calloc(cap, sizeof(*x->slot)))) {
		x->slot = old;
		return -ENOMEM;
	}
	x->cap = cap;
	x->n = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].item)
			put(x, old[i].key, old[i].item);
	free(old);
	return 0;
}

int sv__cm_index_add(struct sv__cm_index *x, uint32_t key, void *item)
{
	int r = sv__cm_index_reserve(x, x->n + 1);

	if (r == 0)
		put(x, key, item);
	return r;
}

void sv__cm_index_del(struct sv__cm_index *x, uint32_t key, const void *item)
{
	size_t mask = x->cap - 1, i, j;

	if (!x->cap)
		return;
	for (i = home(x, key); x->slot[i].item != item; i = (i + 1) & mask)
		if (!x->slot[i].item)
			return;
	/* Backward shift (Knuth, TAOCP vol. 3, 6.4, Algorithm R): an entry after the hole
	 * moves into it unless its home lies cyclically in (hole, entry]. */
	for (j = (i + 1) & mask; x->slot[j].item; j = (j + 1) & mask) {
		size_t k = home(x, x->slot[j].key);

		if (((j - k) & mask) >= ((j - i) & mask)) {
			x->slot[i] = x->slot[j];
			i = j;
		}
	}
	x->slot[i].item = NULL;
	x->n--;
}

void *sv__cm_index_next(const struct sv__cm_index *x, uint32_t key, size_t *it)
{
	size_t mask = x->cap - 1;

	if (!x->cap)
		return NULL;
	for (size_t i = (home(x, key) + *it) & mask; x->slot[i].item; i = (i + 1) & mask) {
		++*it;
		if (x->slot[i].key == key)
			return x->slot[i].item;
	}
	return NULL;
}

void sv__cm_heap_fini(struct sv__cm_heap *h)
{
	free(h->e);
	h->e = NULL;
	h->n = h->cap = 0;
}

int sv__cm_heap_reserve(struct sv__cm_heap *h, size_t n)
{
	size_t cap = h->cap ? h->cap : INDEX_MIN_CAP;
	struct sv__cm_heap_ent *e;

	while (n > cap)
		cap *= 2;
	if (cap == h->cap)
		return 0;
	if (!(e = realloc(h->e, cap * sizeof(*e))))
		return -ENOMEM;
	h->e = e;
	h->cap = cap;
	return 0;
}

static void place(struct sv__cm_heap *h, size_t i, struct sv__cm_heap_ent ent)
{
	h->e[i] = ent;
	*ent.pos = i + 1;
}

/* Moves the entry at i up or down until its parent's key is no larger and its
 * children's no smaller. */
static void settle(struct sv__cm_heap *h, size_t i)
{
	struct sv__cm_heap_ent ent = h->e[i];

	while (i > 0 && h->e[(i - 1) / 2].key > ent.key) {
		place(h, i, h->e[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->e[c + 1].key < h->e[c].key)
			c++;
		if (h->e[c].key >= ent.key)
			break;
		place(h, i, h->e[c]);
		i = c;
	}
	place(h, i, ent);
}

int sv__cm_heap_set(struct sv__cm_heap *h, size_t *pos, void *item, uint64_t key)
{
	if (!*pos) {
		if (sv__cm_heap_reserve(h, h->n + 1) < 0)
			return -ENOMEM;
		h->n++;
		*pos = h->n;
	}
	h->e[*pos - 1] = (struct sv__cm_heap_ent){ .key = key, .item = item, .pos = pos };
	settle(h, *pos - 1);
	return 0;
}

void sv__cm_heap_del(struct sv__cm_heap *h, size_t *pos)
{
	size_t i = *pos;

	if (!i)
		return;
	*pos = 0;
	if (--i != --h->n) {
		h->e[i] = h->e[h->n];
		settle(h, i);
	}
}

void *sv__cm_heap_top(const struct sv__cm_heap *h, uint64_t *key)
{
	if (!h->n)
		return NULL;
	*key = h->e[0].key;
	return h->e[0].item;
}
