/*
 * roce_cm_index.h — the lookup structures of the UDP transport's connection manager
 * (roce_cm.c), so that no MAD and no timer tick walks every endpoint:
 *
 *   struct sv__cm_index  a multimap from a 32-bit key (a communication ID) to items,
 *                        open addressing with linear probing, at most half full,
 *                        grown by doubling; removal shifts the entries after it back
 *                        (no tombstones), so a lookup never probes past its cluster.
 *                        The key is mixed with a per-index random seed first: remote
 *                        IDs are chosen by peers, who then cannot aim at one slot.
 *   struct sv__cm_heap   a binary min-heap of items by a 64-bit key (a deadline); each
 *                        item holds its own position (0: not in the heap), so it can be
 *                        moved or removed in O(log n).
 *
 * Neither allocates in add or set once reserve has made room for the entries they will
 * hold, so callers reserve where failing is still possible and never fail later.
 */
#ifndef SV_WIRE_ROCE_CM_INDEX_H
#define SV_WIRE_ROCE_CM_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct sv__cm_index_slot {
	void *item;			/* NULL: empty */
	uint32_t key;
};

struct sv__cm_index {
	struct sv__cm_index_slot *slot;
	size_t cap;			/* 0 or a power of two */
	size_t n;
	uint32_t seed;
};

void sv__cm_index_init(struct sv__cm_index *x, uint32_t seed);
void sv__cm_index_fini(struct sv__cm_index *x);
/* Room for n entries in all: 0 or -ENOMEM. */
int sv__cm_index_reserve(struct sv__cm_index *x, size_t n);
/* Adds item (not NULL) under key, growing when needed: 0 or -ENOMEM. */
int sv__cm_index_add(struct sv__cm_index *x, uint32_t key, void *item);
/* Removes item from under key; nothing when it is not there. */
void sv__cm_index_del(struct sv__cm_index *x, uint32_t key, const void *item);
/* The items under key one by one: *it starts at 0; NULL after the last. The index must
 * not change while one goes through them. */
void *sv__cm_index_next(const struct sv__cm_index *x, uint32_t key, size_t *it);

struct sv__cm_heap_ent {
	uint64_t key;
	void *item;
	size_t *pos;			/* the item's position: index + 1 */
};

struct sv__cm_heap {
	struct sv__cm_heap_ent *e;
	size_t n, cap;
};

void sv__cm_heap_fini(struct sv__cm_heap *h);
int sv__cm_heap_reserve(struct sv__cm_heap *h, size_t n);
/* Puts item (whose position is *pos, 0 when absent) in the heap under key, or moves it
 * there: 0, or -ENOMEM when a new item found no room. */
int sv__cm_heap_set(struct sv__cm_heap *h, size_t *pos, void *item, uint64_t key);
/* Takes the item at *pos out; nothing when *pos is 0. */
void sv__cm_heap_del(struct sv__cm_heap *h, size_t *pos);
/* The item of the least key (and that key), or NULL when the heap is empty. */
void *sv__cm_heap_top(const struct sv__cm_heap *h, uint64_t *key);

#endif
