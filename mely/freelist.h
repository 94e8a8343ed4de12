/*
 * freelist.h: where events and color-queues come from. No malloc per event.
 *
 * Events are allocated by the posting thread and freed by the worker that ran
 * them, often another one, so per-worker lists drift. Each worker keeps a small
 * cache of free events in magazines of MELY__MAG events (a loaded one it pops
 * from and pushes to, and one spare full one); full magazines beyond that go
 * to the runtime's depot, and an empty worker takes one back from it. Only
 * when the depot is empty is a new slab of MELY__MAG events malloc'ed. Moving a
 * magazine is O(1): it is a chain whose first event links the next chain.
 * Threads that are not workers take events one at a time from the depot's
 * loose chain, under the depot lock.
 *
 * Color-queues are carved from per-worker slabs, once per color (they live
 * until shutdown: see colorq.h). Every slab is recorded in the depot and freed
 * by mely__depot_destroy().
 */
#ifndef MELY_FREELIST_H
#define MELY_FREELIST_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "mely/colorq.h"
#include "mely/event.h"
#include "mely/spinlock.h"

#define MELY__MAG 64u

struct mely__rt;

/* A worker's free events. Owner only. */
struct mely__evcache {
    struct mely__event *loaded;
    uint32_t nloaded;           /* 0 .. MELY__MAG */
    struct mely__event *spare;  /* a full magazine, or NULL */
};

/* A worker's color-queue slab. Under the worker's lock. */
struct mely__cqslab {
    struct mely__colorq *next;
    uint32_t left;
};

struct mely__slab {
    struct mely__slab *next;
    alignas(16) unsigned char items[];
};

struct mely__depot {
    mely__spinlock_t lock;
    struct mely__event *full;  /* full magazines, linked by next_chain */
    struct mely__event *loose; /* single events for threads that are no worker */
    struct mely__slab *slabs;  /* every slab, for shutdown */
};

/* Slow paths (freelist.c). */
struct mely__event *mely__evcache_refill(struct mely__rt *rt, struct mely__evcache *c);
void mely__evcache_spill(struct mely__rt *rt, struct mely__evcache *c);
struct mely__event *mely__depot_alloc_one(struct mely__rt *rt);
void mely__depot_free_one(struct mely__rt *rt, struct mely__event *ev);
struct mely__colorq *mely__cqslab_refill(struct mely__rt *rt, struct mely__cqslab *s);
void mely__depot_init(struct mely__depot *d);
void mely__depot_destroy(struct mely__depot *d);

#ifdef MELY__TEST_HOOKS
/* Test hook, only in test builds of freelist.c (tests/check_freelist): while
 * > 0, slab allocations fail (each failure decrements it). */
extern _Atomic int mely__test_fail_slabs;
#endif

/* An event for a worker posting: O(1), NULL only when out of memory. Owner only. */
static inline struct mely__event *mely__evcache_alloc(struct mely__rt *rt, struct mely__evcache *c)
{
    struct mely__event *ev = c->loaded;

    if (__builtin_expect(c->nloaded == 0, 0))
        return mely__evcache_refill(rt, c);
    c->loaded = ev->next;
    c->nloaded--;
    return ev;
}

/* Gives a run (or unused) event back to its worker's cache. Owner only. */
static inline void mely__evcache_free(struct mely__rt *rt, struct mely__evcache *c,
                                      struct mely__event *ev)
{
    if (__builtin_expect(c->nloaded == MELY__MAG, 0))
        mely__evcache_spill(rt, c);
    ev->next = c->loaded;
    c->loaded = ev;
    c->nloaded++;
}

/* A color-queue for a worker's color. Under the worker's lock. */
static inline struct mely__colorq *mely__cq_alloc(struct mely__rt *rt, struct mely__cqslab *s)
{
    if (s->left == 0)
        return mely__cqslab_refill(rt, s);
    s->left--;
    return s->next++;
}

#endif
