/* SPDX-License-Identifier: MIT */
/*
 * placement.c: color pools, and placing their colors by load (mely.h,
 * "Placement by load"; doc/runtime.md).
 *
 * A pool is a block of reserved colors, each free or placed. Its free colors
 * sit in one list per worker: the list of the worker that owns them. So
 * placing a color on a worker is popping that worker's list, and the color
 * is already where it should run: no move, no lock. A released color goes
 * onto the list of its owner at that moment (a steal may have moved it
 * while it was placed; an idle color is not stolen, so it stays there).
 *
 * The lists are stacks of indices (Treiber stacks) with a tag in the head
 * against ABA: a pop that read a head, then lost the CPU while the top was
 * popped and pushed again, fails its compare-and-swap on the changed tag.
 * The tag has 32 bits; a pop would have to sleep through 2^32 operations
 * on one list to be fooled.
 *
 * A worker's load is read without a lock from words others write:
 * placed_now and wave_avg (its placement line: added to by placers and
 * releasers, and by the worker after each poll) and its inbox's tail and
 * head. All are hints: the answer may be stale by the time the color is
 * used, which costs balance, never correctness.
 *
 * Who may call: any thread (not a signal handler: a move takes locks).
 */
#include <stdlib.h>
#include <string.h>

#include "mely/core/handle.h"
#include "mely/queue/cycles.h"
#include "mely/remote/colormap.h"
#include "mely/remote/colormove.h"
#include "mely/sched/colorrange.h"
#include "mely/sched/placement.h"

enum { FREE = 0, PLACED = 1 };

/* Up to this many workers, a placement looks at every one (a few cache
 * lines); beyond, at two drawn at random (the power of two choices). */
#define PLACE_SCAN_MAX 4u

/* A worker's free list and this pool's count of colors placed there. */
struct pool_list {
    alignas(MELY__CACHELINE) _Atomic uint64_t head; /* tag << 32 | (index + 1); 0: empty */
    _Atomic uint32_t nfree;  /* colors on the list (a hint for borrowing) */
    _Atomic uint32_t placed; /* colors of the pool placed on this worker now */
};

struct mely_color_pool {
    struct mely__rt *rt;
    struct mely_color_pool *next; /* rt->pools */
    mely_color_t base;
    uint32_t n;
    _Atomic uint32_t *link; /* per color: the next index + 1 on its list */
    _Atomic uint8_t *state; /* per color: FREE or PLACED */
    _Atomic uint8_t *where; /* per color: the worker its load is counted on */
    struct pool_list lists[]; /* one per worker */
};

static void list_push(struct mely_color_pool *p, struct pool_list *l, uint32_t idx)
{
    uint64_t h = atomic_load_explicit(&l->head, memory_order_relaxed);
    uint64_t nh;
    do { /* retried only when another thread changed the list meanwhile */
        atomic_store_explicit(&p->link[idx], (uint32_t)h, memory_order_relaxed);
        nh = ((h >> 32) + 1) << 32 | (idx + 1);
    } while (!atomic_compare_exchange_weak_explicit(&l->head, &h, nh, memory_order_release,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&l->nfree, 1, memory_order_relaxed);
}

/* The index popped, or -1 if the list is empty. */
static int64_t list_pop(struct mely_color_pool *p, struct pool_list *l)
{
    uint64_t h = atomic_load_explicit(&l->head, memory_order_acquire);
    for (;;) {
        uint32_t top = (uint32_t)h;
        if (top == 0)
            return -1;
        /* Stale if top was popped meanwhile; then the tag moved and the
         * exchange below fails. */
        uint32_t nx = atomic_load_explicit(&p->link[top - 1], memory_order_relaxed);
        uint64_t nh = ((h >> 32) + 1) << 32 | nx;
        if (atomic_compare_exchange_weak_explicit(&l->head, &h, nh, memory_order_acquire,
                                                  memory_order_acquire)) {
            atomic_fetch_sub_explicit(&l->nfree, 1, memory_order_relaxed);
            return (int64_t)top - 1;
        }
    }
}

/* A worker's load, in sixteenths of an event: colors placed on it (by every
 * pool), the backlog its polls find (averaged, placement.h), and posts
 * waiting in its inbox (a worker inside a long handler drains none, nor
 * polls: they are its backlog then). The events queued at this moment are
 * left out: read at accept time they made the accepting worker, which has
 * just polled, look the busier, and it got a third of the connections
 * (doc/runtime.md, "Placement by load"). */
static uint64_t load_of(const struct mely__worker *w)
{
    uint64_t l = (uint64_t)atomic_load_explicit((_Atomic uint32_t *)&w->placed_now,
                                                memory_order_relaxed) << 4;
    l += atomic_load_explicit((_Atomic uint32_t *)&w->wave_avg, memory_order_relaxed);
    if (w->inbox) { /* the Mely engine. head first: tail only grows past it */
        uint32_t head = atomic_load_explicit(&w->inbox->head, memory_order_acquire);
        l += (uint64_t)(atomic_load_explicit(&w->inbox->tail, memory_order_acquire) - head) << 4;
    }
    return l;
}

/* A per-thread xorshift64* generator: which workers a placement looks at. */
static uint64_t draw(void)
{
    static _Thread_local uint64_t s;
    if (s == 0)
        s = ((uint64_t)(uintptr_t)&s ^ mely__cycles()) | 1;
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
}

/* The worker to place on: the less loaded of two drawn at random, or the
 * least loaded of all with few workers; ties go to the first looked at,
 * itself drawn at random, so that equal workers share new colors. */
static unsigned choose(const struct mely__rt *rt)
{
    unsigned n = rt->nworkers;
    if (n == 1)
        return 0;
    uint64_t r = draw();
    unsigned a = (unsigned)(r % n);
    if (n <= PLACE_SCAN_MAX) {
        unsigned best = a;
        uint64_t least = load_of(&rt->workers[a]);
        for (unsigned i = 1; i < n; i++) {
            unsigned w = (a + i) % n;
            uint64_t l = load_of(&rt->workers[w]);
            if (l < least) {
                least = l;
                best = w;
            }
        }
        return best;
    }
    unsigned b = (unsigned)((r >> 32) % (n - 1));
    if (b >= a)
        b++;
    return load_of(&rt->workers[b]) < load_of(&rt->workers[a]) ? b : a;
}

/* A free color for worker w when w owns none: one of the worker with the
 * most free colors, moved to w. A move refused (the color is finishing its
 * last handler, or events were posted to it after its release) leaves it
 * where it is, and it is handed out there: placement is a hint. -1: the
 * pool has no free color. */
static int64_t borrow(struct mely_color_pool *p, unsigned w)
{
    struct mely__rt *rt = p->rt;
    for (int round = 0; round < 2; round++) { /* again if the richest emptied meanwhile */
        unsigned rich = w;
        uint32_t most = 0;
        for (unsigned v = 0; v < rt->nworkers; v++) {
            uint32_t f = atomic_load_explicit(&p->lists[v].nfree, memory_order_relaxed);
            if (v != w && f > most) {
                most = f;
                rich = v;
            }
        }
        if (rich == w)
            break;
        int64_t idx = list_pop(p, &p->lists[rich]);
        if (idx >= 0) {
            (void)mely__color_move(rt, p->base + (mely_color_t)idx, w);
            return idx;
        }
    }
    /* nfree lags the lists: walk them all once before saying "none". */
    for (unsigned v = 0; v < rt->nworkers; v++) {
        int64_t idx = list_pop(p, &p->lists[v]);
        if (idx >= 0) {
            if (v != w)
                (void)mely__color_move(rt, p->base + (mely_color_t)idx, w);
            return idx;
        }
    }
    return -1;
}

static int place(struct mely__rt *rt, mely_color_pool_t *p, mely_color_t *out)
{
    if (!p || !out || p->rt != rt)
        return MELY_EINVAL;
    unsigned w = choose(rt);
    int64_t idx = list_pop(p, &p->lists[w]);
    if (idx < 0 && (idx = borrow(p, w)) < 0)
        return -ENOSPC;
    mely_color_t color = p->base + (mely_color_t)idx;
    unsigned at = mely__owner(rt, color); /* w, unless a move was refused */
    atomic_store_explicit(&p->where[idx], (uint8_t)at, memory_order_relaxed);
    atomic_store_explicit(&p->state[idx], PLACED, memory_order_release);
    atomic_fetch_add_explicit(&p->lists[at].placed, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rt->workers[at].placed_now, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rt->workers[at].places, 1, memory_order_relaxed);
    *out = color;
    return 0;
}

static int release(struct mely__rt *rt, mely_color_pool_t *p, mely_color_t color)
{
    if (!p || p->rt != rt || color < p->base || color - p->base >= p->n)
        return MELY_EINVAL;
    uint32_t idx = color - p->base;
    uint8_t placed = PLACED;
    if (!atomic_compare_exchange_strong_explicit(&p->state[idx], &placed, FREE,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return MELY_EINVAL; /* not placed: released twice, or never placed */
    unsigned at = atomic_load_explicit(&p->where[idx], memory_order_relaxed);
    atomic_fetch_sub_explicit(&p->lists[at].placed, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&rt->workers[at].placed_now, 1, memory_order_relaxed);
    list_push(p, &p->lists[mely__owner(rt, color)], idx);
    return 0;
}

static int pool_new(struct mely__rt *rt, uint32_t n, mely_color_pool_t **out)
{
    if (n == 0 || !out)
        return MELY_EINVAL;
    size_t size = sizeof(struct mely_color_pool) + rt->nworkers * sizeof(struct pool_list);
    size = (size + MELY__CACHELINE - 1) / MELY__CACHELINE * MELY__CACHELINE;
    struct mely_color_pool *p = aligned_alloc(MELY__CACHELINE, size);
    if (!p)
        return MELY_ENOMEM;
    memset(p, 0, size);
    p->link = calloc(n, sizeof(*p->link));
    p->state = calloc(n, sizeof(*p->state));
    p->where = calloc(n, sizeof(*p->where));
    mely_color_range_t r;
    int err = !p->link || !p->state || !p->where ? MELY_ENOMEM : mely__color_reserve(rt, n, &r);
    if (err) {
        free(p->link);
        free(p->state);
        free(p->where);
        free(p);
        return err;
    }
    p->rt = rt;
    p->base = r.base;
    p->n = n;
    /* Backwards, so that each list hands out its lowest colors first. */
    for (uint32_t i = n; i-- > 0;)
        list_push(p, &p->lists[mely__owner(rt, p->base + i)], i);
    struct mely_color_pool *head = atomic_load(&rt->pools);
    do
        p->next = head;
    while (!atomic_compare_exchange_weak(&rt->pools, &head, p));
    *out = p;
    return 0;
}

static int pool_placed(const struct mely__rt *rt, const mely_color_pool_t *p, unsigned worker)
{
    if (!p || p->rt != rt || worker >= rt->nworkers)
        return MELY_EINVAL;
    return (int)atomic_load_explicit((_Atomic uint32_t *)&p->lists[worker].placed,
                                     memory_order_relaxed);
}

void mely__pools_free(struct mely__rt *rt)
{
    struct mely_color_pool *p = atomic_load(&rt->pools);
    atomic_store(&rt->pools, NULL);
    while (p) {
        struct mely_color_pool *next = p->next;
        free(p->link);
        free(p->state);
        free(p->where);
        free(p);
        p = next;
    }
}

int mely_color_pool(mely_t *m, uint32_t n, mely_color_pool_t **out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, pool_new(rt, n, out)) : MELY_ESHUTDOWN;
}

int mely_color_place(mely_t *m, mely_color_pool_t *p, mely_color_t *out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, place(rt, p, out)) : MELY_ESHUTDOWN;
}

int mely_color_release(mely_t *m, mely_color_pool_t *p, mely_color_t color)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, release(rt, p, color)) : MELY_ESHUTDOWN;
}

int mely_color_pool_placed(const mely_t *m, const mely_color_pool_t *p, unsigned worker)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, pool_placed(rt, p, worker)) : MELY_ESHUTDOWN;
}
