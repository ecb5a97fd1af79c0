/*
 * Memory a pass keeps for the next: its large working arrays (a record for
 * every waiting job, every node's free view and lists, the victims in cost
 * order) come from blocks that stay with the caller's sched_keep, so that a
 * pass after the first writes to pages it has written before. A fresh page
 * costs the kernel a fault and a zeroing; on a virtual machine a fault may
 * cost 10 us, and a pass at a million waiting jobs asks for some 20,000
 * pages.
 *
 * Blocks are filed by size class (four classes per power of two, so a new
 * block is at most a quarter larger than asked for) on a free list per
 * class; a request takes a block of its class or of one up to twice as
 * large, or allocates one of its class. Requests under
 * KEEP_MIN_BYTES go to malloc, which reuses small blocks well itself. Under
 * AddressSanitizer every request goes to malloc, so that a block used after
 * its free is still caught.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define KEEP_MIN_BYTES (64u << 10)
#define KEEP_STEPS 4 /* size classes per power of two */
#define KEEP_CLASSES (64 * KEEP_STEPS)

#if defined(__SANITIZE_ADDRESS__)
#define KEEP_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_POOL 0
#endif
#endif
#ifndef KEEP_POOL
#define KEEP_POOL 1
#endif

/* A block no pass took for this many passes goes back to the C library:
 * what the keep holds follows the queue down as well as up. */
#define KEEP_IDLE_PASSES 16

/* Before every block: its class (-1: from malloc as asked, freed so), the
 * keep's pass count when it was last taken, and on the free list, the next
 * block. 16 bytes keep the block's alignment. */
struct keep_head {
	int cls;
	uint32_t taken;
	struct keep_head *next;
};

struct sched_keep {
	struct keep_head *free[KEEP_CLASSES];
	size_t held;	 /* the bytes of every block, in use or free */
	uint32_t passes; /* passes ended (sched__keep_pass_end) */
};

struct sched_keep *sched_keep_new(void)
{
	return xcalloc(1, sizeof(struct sched_keep));
}

void sched_keep_free(struct sched_keep *k)
{
	if (!k)
		return;
	for (int c = 0; c < KEEP_CLASSES; c++)
		for (struct keep_head *h = k->free[c], *next; h; h = next) {
			next = h->next;
			free(h);
		}
	free(k);
}

size_t sched_keep_bytes(const struct sched_keep *k)
{
	return k ? k->held : 0;
}

/* The size blocks of class c hold. */
static size_t class_size(int c)
{
	size_t base = (size_t)1 << (c / KEEP_STEPS);
	return base + (size_t)(c % KEEP_STEPS) * (base / KEEP_STEPS);
}

void sched__keep_pass_end(struct sched_keep *k)
{
	k->passes++;
	for (int c = 0; c < KEEP_CLASSES; c++)
		for (struct keep_head **at = &k->free[c]; *at;) {
			struct keep_head *h = *at;
			if (k->passes - h->taken <= KEEP_IDLE_PASSES) {
				at = &h->next;
				continue;
			}
			*at = h->next;
			k->held -= class_size(c);
			free(h);
		}
}

/* The least class whose blocks hold `bytes`. */
static int keep_class(size_t bytes)
{
	int e = 63 - __builtin_clzll((unsigned long long)bytes); /* 2^e <= bytes */
	size_t step = ((size_t)1 << e) / KEEP_STEPS;
	size_t k = (bytes - ((size_t)1 << e) + step - 1) / step; /* 0 .. KEEP_STEPS */
	return e * KEEP_STEPS + (int)k; /* k == KEEP_STEPS is the next power's 0 */
}

void *sched__keep_alloc(struct sched_keep *k, size_t bytes)
{
	if (bytes == 0)
		bytes = 1;
	if (!KEEP_POOL || !k || bytes < KEEP_MIN_BYTES) {
		struct keep_head *h = xmalloc(sizeof(*h) + bytes);
		h->cls = -1;
		return h + 1;
	}
	int c = keep_class(bytes);
	/* a block of its class, or of one up to twice as large (a smaller
	 * pass takes the blocks a larger one left) */
	struct keep_head *h = NULL;
	for (int x = c; x <= c + KEEP_STEPS && x < KEEP_CLASSES && !h; x++) {
		h = k->free[x];
		if (h)
			k->free[x] = h->next;
	}
	if (!h) {
		h = xmalloc(sizeof(*h) + class_size(c));
		h->cls = c;
		k->held += class_size(c);
	}
	h->taken = k->passes;
	return h + 1;
}

void *sched__keep_zalloc(struct sched_keep *k, size_t n, size_t size)
{
	size_t bytes = n * size; /* callers' counts are ints: no overflow */
	void *p = sched__keep_alloc(k, bytes);
	memset(p, 0, bytes);
	return p;
}

void sched__keep_grow(struct sched_keep *k, void *pp, size_t *alloc, size_t need, size_t size)
{
	void **p = pp;
	if (need <= *alloc)
		return;
	size_t n = MAX(need, *alloc ? *alloc * 2 : 16);
	void *q = sched__keep_alloc(k, n * size);
	if (*p)
		memcpy(q, *p, *alloc * size);
	sched__keep_release(k, *p);
	*p = q;
	*alloc = n;
}

void sched__keep_release(struct sched_keep *k, void *p)
{
	if (!p)
		return;
	struct keep_head *h = (struct keep_head *)p - 1;
	if (h->cls < 0 || !k) {
		free(h);
		return;
	}
	h->next = k->free[h->cls];
	k->free[h->cls] = h;
}
