/* SPDX-License-Identifier: MIT */
/* freelist.c: slow paths of the event and color-queue allocators, the event
 * budget, and the depot's side of the trim (see freelist.h, trim.c). */
#include <errno.h>
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

/* ---- the budget: under the depot lock ------------------------------------------ */

static void set_hit(struct mely__rt *rt, bool hit)
{
    /* Written only when it flips: posters read its line on every remote post. */
    if (atomic_load_explicit(&rt->budget_hit, memory_order_relaxed) != hit)
        atomic_store_explicit(&rt->budget_hit, hit, memory_order_relaxed);
}

/* n events leave the depot: false (errno EAGAIN) if that passes the budget
 * and they are not owed. Raises the flag whenever `out` passes it. */
static bool take_out(struct mely__rt *rt, struct mely__depot *d, size_t n, bool owed)
{
    if (d->out + n > d->limit) {
        set_hit(rt, true);
        if (!owed) {
            errno = EAGAIN;
            return false;
        }
    }
    d->out += n;
    return true;
}

/* n events come back to the depot. */
static void give_back(struct mely__rt *rt, struct mely__depot *d, size_t n)
{
    d->out -= n;
    if (d->out <= d->relax)
        set_hit(rt, false);
}

/* After any change of the free lists: the count others read, and the
 * least since trim.c last asked (one compare per take). */
static void note_free(struct mely__depot *d)
{
    size_t nfree = d->nfull * MELY__MAG + d->nloose;
    atomic_store_explicit(&d->nfree, nfree, memory_order_relaxed);
    if (nfree < d->trim.min_free)
        d->trim.min_free = nfree;
}

/* ---- magazines ----------------------------------------------------------------------- */

/* Under d->lock: pushes a chain of magazines (first .. last, linked by
 * next_chain) on the full list. */
static void push_full(struct mely__depot *d, struct mely__event *first, struct mely__event *last,
                      size_t n)
{
    last->next_chain = d->full;
    d->full = first;
    d->nfull += n;
    note_free(d);
}

static struct mely__event *pop_full(struct mely__depot *d)
{
    struct mely__event *mag = d->full;
    if (mag) {
        d->full = mag->next_chain;
        d->nfull--;
        note_free(d);
    }
    return mag;
}

/* A new event slab cut into MELY__SLAB_MAGS magazines: returns the first
 * (for the caller, who counted it out), the others go on the depot's full
 * list. NULL (errno ENOMEM) if no slab can be had. Without the depot lock. */
static struct mely__event *slab_to_depot(struct mely__depot *d)
{
    struct mely__slab_head *h = test_fail() ? NULL : mely__slab_get(&d->ev_slabs);
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    struct mely__event *ev = mely__slab_items(h);
    for (size_t m = 0; m < MELY__SLAB_MAGS; m++) {
        struct mely__event *mag = ev + m * MELY__MAG;
        for (unsigned i = 0; i + 1 < MELY__MAG; i++)
            mag[i].next = &mag[i + 1];
        mag[MELY__MAG - 1].next = NULL;
        mag[0].next_chain = m + 1 < MELY__SLAB_MAGS ? mag + MELY__MAG : NULL;
    }
    mely__spin_lock(&d->lock, NULL);
    push_full(d, ev + MELY__MAG, ev + (MELY__SLAB_MAGS - 1) * MELY__MAG, MELY__SLAB_MAGS - 1);
    mely__spin_unlock(&d->lock);
    ev[0].next_chain = NULL;
    return ev;
}

/* A full magazine out of the depot, counted; NULL with errno set. Taken
 * from a new slab when the depot has none. */
static struct mely__event *depot_take_full(struct mely__rt *rt, bool owed)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    if (!take_out(rt, d, MELY__MAG, owed)) {
        mely__spin_unlock(&d->lock);
        return NULL;
    }
    struct mely__event *mag = pop_full(d);
    mely__spin_unlock(&d->lock);
    if (mag || (mag = slab_to_depot(d)))
        return mag;
    mely__spin_lock(&d->lock, NULL);
    give_back(rt, d, MELY__MAG);
    mely__spin_unlock(&d->lock);
    errno = ENOMEM;
    return NULL;
}

static void depot_put_full(struct mely__rt *rt, struct mely__event *mag)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    push_full(d, mag, mag, 1);
    give_back(rt, d, MELY__MAG);
    mely__spin_unlock(&d->lock);
}

struct mely__event *mely__evcache_refill(struct mely__rt *rt, struct mely__evcache *c, bool owed)
{
    struct mely__event *mag = c->spare;

    if (mag)
        c->spare = NULL;
    else if (!(mag = depot_take_full(rt, owed)))
        return NULL;
    c->loaded = mag->next;
    c->nloaded = MELY__MAG - 1;
    return mag;
}

void mely__evcache_spill(struct mely__rt *rt, struct mely__evcache *c)
{
    if (c->spare)
        depot_put_full(rt, c->spare);
    c->spare = c->loaded;
    c->loaded = NULL;
    c->nloaded = 0;
}

struct mely__event *mely__depot_alloc_one(struct mely__rt *rt, bool owed)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    if (!take_out(rt, d, 1, owed)) {
        mely__spin_unlock(&d->lock);
        return NULL;
    }
    if (!d->loose && d->full) {
        d->loose = pop_full(d);
        d->nloose += MELY__MAG;
    }
    struct mely__event *ev = d->loose;
    if (ev) {
        d->loose = ev->next;
        d->nloose--;
        note_free(d);
    }
    mely__spin_unlock(&d->lock);
    if (ev)
        return ev;

    /* Nothing free: a new slab; this magazine's other events go loose. */
    struct mely__event *mag = slab_to_depot(d);
    mely__spin_lock(&d->lock, NULL);
    if (mag) {
        mag[MELY__MAG - 1].next = d->loose; /* a new magazine is one array, in order */
        d->loose = mag->next;
        d->nloose += MELY__MAG - 1;
        note_free(d);
    } else {
        give_back(rt, d, 1);
    }
    mely__spin_unlock(&d->lock);
    if (!mag)
        errno = ENOMEM;
    return mag;
}

void mely__depot_free_one(struct mely__rt *rt, struct mely__event *ev)
{
    struct mely__depot *d = &rt->depot;

    mely__spin_lock(&d->lock, NULL);
    ev->next = d->loose;
    d->loose = ev;
    d->nloose++;
    note_free(d);
    give_back(rt, d, 1);
    mely__spin_unlock(&d->lock);
}

/* ---- color-queue slabs (malloc'ed: bounded by the colors) ------------------------ */

struct mely__colorq *mely__cqslab_refill(struct mely__rt *rt, struct mely__cqslab *s)
{
    struct mely__depot *d = &rt->depot;

    if (test_fail())
        return NULL;
    struct mely__slab *slab = malloc(sizeof(*slab) + CQ_PER_SLAB * sizeof(struct mely__colorq));
    if (!slab)
        return NULL;
    mely__spin_lock(&d->lock, NULL);
    slab->next = d->slabs;
    d->slabs = slab;
    mely__spin_unlock(&d->lock);
    s->next = (struct mely__colorq *)slab->items + 1;
    s->left = CQ_PER_SLAB - 1;
    return (struct mely__colorq *)slab->items;
}

/* ---- life cycle -------------------------------------------------------------------- */

void mely__depot_init(struct mely__depot *d)
{
    mely__spin_init(&d->lock);
    d->full = d->loose = NULL;
    d->slabs = NULL;
    d->nfull = d->nloose = 0;
    atomic_init(&d->nfree, 0);
    d->out = 0;
    d->limit = d->relax = SIZE_MAX;
    d->keep = 0;
    mely__slabs_init(&d->ev_slabs);
    mely__trim_init(&d->trim);
}

void mely__depot_budget(struct mely__depot *d, unsigned mb, unsigned workers)
{
    size_t slabs = (size_t)mb * ((1u << 20) / MELY__SLAB_BYTES);
    d->limit = slabs * MELY__SLAB_EVENTS;
    d->relax = d->limit - d->limit / 8;
    /* A slab per worker stays for the next burst (64 KiB each), at most
     * 1 MiB (trim.c). */
    d->keep = (size_t)(workers < 16 ? workers : 16) * MELY__SLAB_EVENTS;
}

void mely__depot_destroy(struct mely__depot *d)
{
    struct mely__slab *s = d->slabs;
    while (s) {
        struct mely__slab *next = s->next;
        free(s);
        s = next;
    }
    mely__trim_destroy(&d->trim);
    mely__slabs_free(&d->ev_slabs);
    mely__depot_init(d);
}

/* ---- for the trim (trim.c) --------------------------------------------------------------- */

size_t mely__depot_detach(struct mely__depot *d, size_t keep_mags, struct mely__event **mags,
                          struct mely__event **loose)
{
    mely__spin_lock(&d->lock, NULL);
    struct mely__event *last_kept = NULL, *m = d->full;
    size_t kept = 0;
    while (m && kept < keep_mags) { /* bounded: keep_mags */
        last_kept = m;
        m = m->next_chain;
        kept++;
    }
    *mags = m;
    if (last_kept)
        last_kept->next_chain = NULL;
    else
        d->full = NULL;
    size_t n = (d->nfull - kept) * MELY__MAG + d->nloose;
    d->nfull = kept;
    *loose = d->loose;
    d->loose = NULL;
    d->nloose = 0;
    note_free(d);
    mely__spin_unlock(&d->lock);
    return n;
}

void mely__depot_return(struct mely__depot *d, struct mely__event *first, struct mely__event *last,
                        size_t nmags, struct mely__event *lfirst, struct mely__event *llast,
                        size_t nloose)
{
    if (!first && !lfirst)
        return;
    mely__spin_lock(&d->lock, NULL);
    if (first) {
        last->next_chain = d->full;
        d->full = first;
        d->nfull += nmags;
    }
    if (lfirst) {
        llast->next = d->loose;
        d->loose = lfirst;
        d->nloose += nloose;
    }
    note_free(d);
    mely__spin_unlock(&d->lock);
}

size_t mely__depot_min_free(struct mely__depot *d, size_t *nfree)
{
    mely__spin_lock(&d->lock, NULL);
    size_t least = d->trim.min_free;
    *nfree = d->nfull * MELY__MAG + d->nloose;
    d->trim.min_free = *nfree;
    mely__spin_unlock(&d->lock);
    return least;
}
