/* SPDX-License-Identifier: MIT */
/*
 * trim.c: free event memory goes back to the kernel after a burst.
 *
 * Events live in 64 KiB slabs (slab.h); a slab can go back only when all
 * its 1,600 events are free, and free events sit in the depot's magazines
 * in no order (freelist.h). So a pass takes the depot's free events, counts
 * them per slab (an event's slab is its address masked; the count is kept
 * in the slab's head line, which nothing else writes while in use), gives
 * back the slabs counted whole (madvise MADV_DONTNEED, slab.c), and returns
 * the other events to the depot, rebuilt into magazines.
 *
 * When. Giving memory back that the next burst takes again costs a pass
 * and a page fault per 4 KB: a server whose bursts come every few hundred
 * milliseconds must keep its memory. So only memory that stayed unused for
 * a whole window (MELY__TRIM_WINDOW_NS) goes: the depot records the least number
 * of free events it held since the window began (one compare per depot
 * take, under the lock it holds), and at the window's end a pass may give
 * back that many events' worth of whole slabs, beyond a small cache (the
 * depot's `keep`: a slab per worker, at most 16) left in the depot for the
 * next posts. Windows are begun and judged by workers about to park: the first
 * to find the depot holding more than the cache begins one and asks to be
 * woken at its end (idle.c passes that deadline to its blocking poll), so
 * that an idle runtime gives its memory back without any other activity.
 * A pass that found everything in use, or slabs pinned by a few events,
 * begins no new window until the depot holds a slab more than it left: an
 * idle runtime is never woken for nothing.
 *
 * How long. A pass costs about 5-9 ns per free event (two walks of the
 * chains, each a dependent load per event, and the madvise calls): 40 ms for
 * 5 M events. It runs in steps of TRIM_STEP_EVENTS events (or
 * TRIM_STEP_SLABS slabs given back), each ended by the idle worker going
 * back to its queues and poller, so that a post waits for one step, not for
 * the pass. Meanwhile the events it took are out of the depot: posts use the
 * cache it left, then fresh slabs (given back ones first).
 *
 * Who may call: see trim.h. The pass's state is touched only by the thread
 * holding `busy` (one step at a time, any idle worker); acquire and release
 * on it order the steps.
 */
#include <stdlib.h>

#include "mely/queue/freelist.h"
#include "mely/queue/trim.h"

enum {
    TRIM_STEP_EVENTS = 16384, /* about 0.1 ms */
    TRIM_STEP_SLABS = 64,     /* 4 MiB: one madvise when adjacent */
};

enum { PHASE_NONE = 0 /* as mely__trim_init sets it */, PHASE_COUNT, PHASE_FILTER, PHASE_RELEASE };

/* A slab's fate in the pass that counted it whole (its head's `fate`). */
enum { FATE_UNDECIDED = 0, FATE_KEEP, FATE_RELEASE };

static bool try_hold(struct mely__trim *t)
{
    return !atomic_exchange_explicit(&t->busy, true, memory_order_acquire);
}

static void let_go(struct mely__trim *t)
{
    atomic_store_explicit(&t->busy, false, memory_order_release);
}

/* Slabs' worth of events the depot keeps free (freelist.c: one per
 * worker, at most 16). */
static size_t keep_slabs(const struct mely__depot *d)
{
    return d->keep / MELY__SLAB_EVENTS;
}

/* ---- walking the events taken --------------------------------------------------------- */

static void cursor_start(struct mely__trim *t)
{
    t->cur = (struct mely__trim_cursor){.mags = t->set_mags, .loose = t->set_loose, .ev = NULL};
}

/* The next event of the walk, or NULL at its end. Reads an event's links
 * before handing it out, so the visit may relink it. */
static struct mely__event *cursor_next(struct mely__trim_cursor *c)
{
    if (!c->ev) {
        if (c->mags) {
            c->ev = c->mags;
            c->mags = c->mags->next_chain;
        } else if (c->loose) {
            c->ev = c->loose;
            c->loose = NULL;
        } else {
            return NULL;
        }
    }
    struct mely__event *ev = c->ev;
    c->ev = ev->next;
    return ev;
}

static void refill_push(struct mely__trim_refill *r, struct mely__event *ev)
{
    ev->next = r->mag;
    r->mag = ev;
    if (++r->nmag < MELY__MAG)
        return;
    ev->next_chain = r->full;
    r->full = ev;
    if (!r->full_last)
        r->full_last = ev;
    r->nfull++;
    r->mag = NULL;
    r->nmag = 0;
}

/* ---- the pass ----------------------------------------------------------------------------- */

/* Takes the depot's free events beyond the cache; false if it holds no more. */
static bool pass_begin(struct mely__depot *d, size_t may_release)
{
    struct mely__trim *t = &d->trim;
    size_t keep_mags = keep_slabs(d) * MELY__SLAB_MAGS;

    t->nset = mely__depot_detach(d, keep_mags, &t->set_mags, &t->set_loose);
    if (t->nset == 0)
        return false;
    if (++t->gen == 0) /* 0 means never counted */
        t->gen = 1;
    t->may_release = may_release;
    t->nrel = t->released = t->whole_kept = 0;
    t->r = (struct mely__trim_refill){0};
    t->phase = PHASE_COUNT;
    cursor_start(t);
    atomic_store_explicit(&t->passing, true, memory_order_relaxed);
    return true;
}

static void count_step(struct mely__trim *t)
{
    for (unsigned i = 0; i < TRIM_STEP_EVENTS; i++) {
        struct mely__event *ev = cursor_next(&t->cur);
        if (!ev) {
            /* At most nset / events-per-slab slabs can be whole. */
            size_t most = t->nset / MELY__SLAB_EVENTS;
            if (most > t->may_release)
                most = t->may_release;
            t->rel = most ? malloc(most * sizeof(*t->rel)) : NULL;
            if (!t->rel)
                t->may_release = 0; /* nothing goes back this time */
            t->phase = PHASE_FILTER;
            cursor_start(t);
            return;
        }
        struct mely__slab_head *h = mely__slab_of(ev);
        if (h->gen != t->gen) {
            h->gen = t->gen;
            h->nfree = 0;
            h->fate = FATE_UNDECIDED;
        }
        h->nfree++;
    }
}

static void filter_step(struct mely__depot *d)
{
    struct mely__trim *t = &d->trim;
    bool end = false;

    for (unsigned i = 0; i < TRIM_STEP_EVENTS; i++) {
        struct mely__event *ev = cursor_next(&t->cur);
        if (!ev) {
            end = true;
            break;
        }
        struct mely__slab_head *h = mely__slab_of(ev);
        if (h->fate == FATE_UNDECIDED && h->nfree == MELY__SLAB_EVENTS) {
            h->fate = t->nrel < t->may_release ? FATE_RELEASE : FATE_KEEP;
            if (h->fate == FATE_RELEASE)
                t->rel[t->nrel++] = h;
            else
                t->whole_kept++;
        }
        if (h->fate != FATE_RELEASE)
            refill_push(&t->r, ev);
    }
    /* The magazines rebuilt so far go back now: posts may use them. */
    struct mely__trim_refill *r = &t->r;
    struct mely__event *lfirst = NULL, *llast = NULL;
    size_t nloose = 0;
    if (end && r->mag) {
        lfirst = llast = r->mag;
        while (llast->next) /* bounded: fewer than MELY__MAG */
            llast = llast->next;
        nloose = r->nmag;
    }
    mely__depot_return(d, r->full, r->full_last, r->nfull, lfirst, llast, nloose);
    r->full = r->full_last = NULL;
    r->nfull = 0;
    if (end) {
        r->mag = NULL;
        r->nmag = 0;
        t->phase = PHASE_RELEASE;
    }
}

static int cmp_addr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

static void release_step(struct mely__depot *d)
{
    struct mely__trim *t = &d->trim;

    if (t->released == 0 && t->nrel > 1) /* sorted once: adjacent slabs share a call */
        qsort(t->rel, t->nrel, sizeof(*t->rel), cmp_addr);
    size_t n = t->nrel - t->released;
    if (n > TRIM_STEP_SLABS)
        n = TRIM_STEP_SLABS;
    if (n) {
        mely__slabs_release(&d->ev_slabs, t->rel + t->released, n);
        t->released += n;
    }
    if (t->released < t->nrel)
        return;
    free(t->rel);
    t->rel = NULL;
    /* What no later pass can give back unless more comes free: the events
     * this pass took from slabs partly in use, and the cache it left in
     * the depot. Not counted: whole slabs it kept only because the window
     * allowed no more, and what was freed into the depot while it ran, so
     * that a window for those begins as soon as a worker is idle again. */
    size_t partial = t->nset - (t->nrel + t->whole_kept) * MELY__SLAB_EVENTS;
    t->left = partial + keep_slabs(d) * MELY__SLAB_EVENTS;
    t->phase = PHASE_NONE;
    atomic_store_explicit(&t->passing, false, memory_order_relaxed);
}

/* One step of the pass in progress; under `busy`. */
static void step(struct mely__depot *d)
{
    switch (d->trim.phase) {
    case PHASE_COUNT:
        count_step(&d->trim);
        break;
    case PHASE_FILTER:
        filter_step(d);
        break;
    case PHASE_RELEASE:
        release_step(d);
        break;
    default:
        break;
    }
}

bool mely__trim_step(struct mely__depot *d)
{
    struct mely__trim *t = &d->trim;
    if (!try_hold(t))
        return false;
    bool stepped = t->phase != PHASE_NONE;
    if (stepped)
        step(d);
    let_go(t);
    return stepped;
}

/* Begins a window for `worker`; returns its end. */
static uint64_t window_begin(struct mely__depot *d, unsigned worker, uint64_t now)
{
    size_t nfree;
    (void)mely__depot_min_free(d, &nfree);
    d->trim.win_start = now ? now : 1;
    d->trim.win_worker = worker;
    return now + MELY__TRIM_WINDOW_NS;
}

uint64_t mely__trim_idle(struct mely__depot *d, unsigned worker, uint64_t now)
{
    struct mely__trim *t = &d->trim;
    size_t cache = keep_slabs(d) * MELY__SLAB_EVENTS + MELY__SLAB_EVENTS;
    uint64_t wake = UINT64_MAX;

    if (!try_hold(t))
        return wake;
    size_t nfree = atomic_load_explicit(&d->nfree, memory_order_relaxed);
    if (t->phase != PHASE_NONE) {
        step(d);
        wake = 0;
    } else if (nfree <= cache || nfree < t->left + MELY__SLAB_EVENTS) {
        t->win_start = 0; /* nothing worth a window */
    } else if (!t->win_start) {
        wake = window_begin(d, worker, now);
    } else if (now - t->win_start < MELY__TRIM_WINDOW_NS) {
        if (worker == t->win_worker)
            wake = t->win_start + MELY__TRIM_WINDOW_NS;
    } else {
        size_t unused = mely__depot_min_free(d, &nfree);
        if (unused <= cache) {
            wake = window_begin(d, worker, now); /* all was in use: look again */
        } else {
            t->win_start = 0;
            size_t may = (unused - keep_slabs(d) * MELY__SLAB_EVENTS) / MELY__SLAB_EVENTS;
            if (pass_begin(d, may)) {
                step(d);
                wake = 0;
            }
        }
    }
    let_go(t);
    return wake;
}

size_t mely__trim_all(struct mely__depot *d)
{
    struct mely__trim *t = &d->trim;

    while (!try_hold(t)) /* bounded: only a test's thread calls it, workers stopped */
        ;
    size_t released = 0;
    while (t->phase != PHASE_NONE) /* bounded: a pass begun by a worker */
        step(d);
    if (pass_begin(d, SIZE_MAX)) {
        while (t->phase != PHASE_NONE) /* bounded: the pass's steps */
            step(d);
        released = t->released;
    }
    t->win_start = 0;
    let_go(t);
    return released;
}
