/* SPDX-License-Identifier: MIT */
/*
 * trim.h: giving free event memory back to the kernel after a burst
 * (trim.c has the policy and the pass; freelist.h the depot it trims).
 *
 * Who may call: idle workers (mely__trim_idle, mely__trim_step), without any
 * lock; mely__trim_all, any thread while no worker runs (tests).
 */
#ifndef MELY_TRIM_H
#define MELY_TRIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "mely/queue/event.h"
#include "mely/queue/slab.h"

struct mely__depot;

/* Free memory goes back once it stayed unused this long (trim.c). */
#define MELY__TRIM_WINDOW_NS 100000000ull /* 100 ms */

/* Survivors of a pass, rebuilt into full magazines (trim.c). */
struct mely__trim_refill {
    struct mely__event *full, *full_last, *mag;
    size_t nfull;
    unsigned nmag;
};

/* Where a walk of the pass's events stands: the magazines left, the loose
 * chain (walked last, as one more chain), the next event of the chain in
 * hand. */
struct mely__trim_cursor {
    struct mely__event *mags, *loose, *ev;
};

/* The trim's state, in the depot. `busy` is held by whoever looks at or
 * steps it; min_free is the depot's (under its lock). */
struct mely__trim {
    atomic_bool busy;
    _Atomic bool passing;      /* a pass is in progress (a hint for idle.c) */
    size_t min_free;           /* least free events in the depot since the
                                  window began: under the depot lock */
    uint64_t win_start;        /* when the window began; 0: none */
    unsigned win_worker;       /* the worker that began it (woken at its end) */
    size_t left;               /* free events the last pass left */

    /* The pass in progress. */
    int phase;
    uint32_t gen;              /* passes so far: the slab heads' scratch */
    struct mely__event *set_mags, *set_loose; /* the detached events */
    struct mely__trim_cursor cur;
    size_t nset, may_release;  /* events taken; slabs the window allows */
    size_t nrel, released;     /* slabs to release, released */
    size_t whole_kept;         /* whole slabs kept: the window allowed no more */
    struct mely__slab_head **rel; /* slabs to release (malloc'ed, nset / events per slab) */
    struct mely__trim_refill r;
};

/* Inline, for the depot's init and destroy (freelist.c), so that the two
 * files call each other one way only (trim.c calls the depot). */
static inline void mely__trim_init(struct mely__trim *t)
{
    atomic_init(&t->busy, false);
    atomic_init(&t->passing, false);
    t->min_free = 0;
    t->win_start = 0;
    t->win_worker = 0;
    t->left = 0;
    t->phase = 0; /* none (trim.c) */
    t->gen = 0;
    t->set_mags = t->set_loose = NULL;
    t->cur = (struct mely__trim_cursor){0};
    t->nset = t->may_release = t->nrel = t->released = t->whole_kept = 0;
    t->rel = NULL;
    t->r = (struct mely__trim_refill){0};
}

/* Frees what a pass in progress holds (shutdown: its slabs go with the
 * regions). */
static inline void mely__trim_destroy(struct mely__trim *t)
{
    free(t->rel);
    mely__trim_init(t);
}

/* A pass is in progress: an idle worker should step it before it spins.
 * A hint (any thread). */
static inline bool mely__trim_passing(struct mely__trim *t)
{
    return atomic_load_explicit(&t->passing, memory_order_relaxed);
}

/* One bounded step of the pass in progress (about MELY__TRIM_STEP events,
 * or a few madvise calls): false when there is none or another thread is
 * stepping it. */
bool mely__trim_step(struct mely__depot *d);

/* Worker `worker` is about to park: begins a window, or a pass when one is
 * due (then does its first step and returns 0: the worker should not
 * park). Otherwise returns when the worker should wake up to look again
 * (the end of the window it began), or UINT64_MAX. */
uint64_t mely__trim_idle(struct mely__depot *d, unsigned worker, uint64_t now_ns);

/* A whole pass now, whatever the window: returns the slabs given back. */
size_t mely__trim_all(struct mely__depot *d);

#endif
