/* freelist.c: slow paths of the event and color-queue allocators (see freelist.h). */
#include <stdlib.h>

#include "mely/runtime.h"

enum { CQ_PER_SLAB = 64 };

#ifdef MELY__TEST_HOOKS
_Atomic int mely__test_fail_slabs;

static bool test_fail(void)
{
    int fail = atomic_load_explicit(&mely__test_fail_slabs, memory_order_relaxed);
    return fail > 0 && atomic_compare_exchange_strong(&mely__test_fail_slabs, &fail, fail - 1);
}
#else
static bool test_fail(void) { return false; }
#endif

static struct mely__slab *slab_new(struct mely__depot *d, size_t bytes)
{
    if (test_fail())
        return NULL;

    struct mely__slab *s = malloc(sizeof(*s) + bytes);
    if (!s)
        return NULL;
    mely__spin_lock(&d->lock, NULL);
    s->next = d->slabs;
    d->slabs = s;
    mely__spin_unlock(&d->lock);
    return s;
}

/* A new magazine from a fresh slab, as a chain of MELY__MAG events. */
static struct mely__event *magazine_new(struct mely__depot *d)
{
    struct mely__slab *s = slab_new(d, MELY__MAG * sizeof(struct mely__event));
    if (!s)
        return NULL;
    struct mely__event *ev = (struct mely__event *)s->items;
    for (unsigned i = 0; i + 1 < MELY__MAG; i++)
        ev[i].next = &ev[i + 1];
    ev[MELY__MAG - 1].next = NULL;
    ev[0].next_chain = NULL;
    return ev;
}

static struct mely__event *depot_take_full(struct mely__depot *d)
{
    mely__spin_lock(&d->lock, NULL);
    struct mely__event *mag = d->full;
    if (mag)
        d->full = mag->next_chain;
    mely__spin_unlock(&d->lock);
    return mag;
}

static void depot_put_full(struct mely__depot *d, struct mely__event *mag)
{
    mely__spin_lock(&d->lock, NULL);
    mag->next_chain = d->full;
    d->full = mag;
    mely__spin_unlock(&d->lock);
}

struct mely__event *mely__evcache_refill(struct mely__rt *rt, struct mely__evcache *c)
{
    struct mely__event *mag = c->spare;

    if (mag)
        c->spare = NULL;
    else if (!(mag = depot_take_full(&rt->depot)) && !(mag = magazine_new(&rt->depot)))
        return NULL;
    c->loaded = mag->next;
    c->nloaded = MELY__MAG - 1;
    return mag;
}

void mely__evcache_spill(struct mely__rt *rt, struct mely__evcache *c)
{
    if (c->spare)
        depot_put_full(&rt->depot, c->spare);
    c->spare = c->loaded;
    c->loaded = NULL;
    c->nloaded = 0;
}

struct mely__event *mely__depot_alloc_one(struct mely__rt *rt)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    if (!d->loose && d->full) {
        d->loose = d->full;
        d->full = d->full->next_chain;
    }
    struct mely__event *ev = d->loose;
    if (ev)
        d->loose = ev->next;
    mely__spin_unlock(&d->lock);
    if (ev)
        return ev;

    /* Nothing free: a new slab; keep all but one event for later. */
    struct mely__event *mag = magazine_new(d);
    if (!mag)
        return NULL;
    mely__spin_lock(&d->lock, NULL);
    mag[MELY__MAG - 1].next = d->loose; /* a new magazine is one array, in order */
    d->loose = mag->next;
    mely__spin_unlock(&d->lock);
    return mag;
}

void mely__depot_free_one(struct mely__rt *rt, struct mely__event *ev)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    ev->next = d->loose;
    d->loose = ev;
    mely__spin_unlock(&d->lock);
}

struct mely__colorq *mely__cqslab_refill(struct mely__rt *rt, struct mely__cqslab *s)
{
    struct mely__slab *slab = slab_new(&rt->depot, CQ_PER_SLAB * sizeof(struct mely__colorq));
    if (!slab)
        return NULL;
    s->next = (struct mely__colorq *)slab->items + 1;
    s->left = CQ_PER_SLAB - 1;
    return (struct mely__colorq *)slab->items;
}

void mely__depot_init(struct mely__depot *d)
{
    mely__spin_init(&d->lock);
    d->full = d->loose = NULL;
    d->slabs = NULL;
}

void mely__depot_destroy(struct mely__depot *d)
{
    struct mely__slab *s = d->slabs;
    while (s) {
        struct mely__slab *next = s->next;
        free(s);
        s = next;
    }
    mely__depot_init(d);
}
