/* SPDX-License-Identifier: MIT */
/*
 * colormap.h: which worker owns a color, and the protocol to lock it.
 *
 * The map holds one byte per color (64 KB). Initial placement hashes the color
 * onto the workers as libasync-smp does: color % workers (so color 1, the SWS
 * Accept color, starts on the second worker). Pinned colors MELY_COLORS + w
 * belong to worker w forever.
 *
 * Ownership protocol: a producer reads the owner, takes that
 * worker's lock, re-reads the owner; if it changed (a steal moved the color in
 * between), it unlocks and retries. A thief changes an owner only while holding
 * both its lock and the victim's, so the owner read under a lock is stable until
 * that lock is released. Moving a color on request: colormove.h.
 */
#ifndef MELY_COLORMAP_H
#define MELY_COLORMAP_H

#include "mely/runtime.h"

void mely__colormap_init(struct mely__rt *rt);

/* A valid color's home: the worker the map starts it on, fixed for the
 * color's life whatever steals do (io/timer.c keeps its timers there). */
static inline unsigned mely__color_home(const struct mely__rt *rt, mely_color_t color)
{
    return color >= MELY_COLORS ? color - MELY_COLORS : color % rt->nworkers;
}

static inline bool mely__color_valid(const struct mely__rt *rt, mely_color_t color)
{
    return color < MELY_COLORS || color - MELY_COLORS < rt->nworkers;
}

/* The priority and color of an I/O, timer or signal target: 0, MELY_EPRIO
 * or MELY_ECOLOR (the checks mely_post_ex() makes on its arguments). */
static inline int mely__to_check(const struct mely__rt *rt, const mely_to_t *to)
{
    if (to->prio < 0 || to->prio > MELY_PRIO_MAX)
        return MELY_EPRIO;
    return mely__color_valid(rt, to->color) ? 0 : MELY_ECOLOR;
}

/* The current owner of a valid color (a hint unless its lock is held). */
static inline unsigned mely__owner(const struct mely__rt *rt, mely_color_t color)
{
    if (color >= MELY_COLORS)
        return color - MELY_COLORS;
    return atomic_load_explicit((_Atomic uint8_t *)&rt->owner[color], memory_order_acquire);
}

/* The owner, read sequentially consistent: the flush's side of the move
 * protocol (deliver.c). */
static inline unsigned mely__owner_sc(const struct mely__rt *rt, mely_color_t color)
{
    if (color >= MELY_COLORS)
        return color - MELY_COLORS;
    return atomic_load_explicit((_Atomic uint8_t *)&rt->owner[color], memory_order_seq_cst);
}

/* Locks and returns the worker that owns `color`, charging lock waits to `ctr`
 * (may be NULL). The retry loop runs again only if a steal moved the color
 * between the read and the lock, so it ends as soon as steals pause. Inline:
 * every post goes through it. */
static inline struct mely__worker *mely__lock_owner(struct mely__rt *rt, mely_color_t color,
                                                    struct mely__counters *ctr)
{
    for (;;) {
        unsigned o = mely__owner(rt, color);
        struct mely__worker *w = &rt->workers[o];

        mely__spin_lock(&w->lock, ctr);
        if (__builtin_expect(mely__owner(rt, color) == o, 1))
            return w;
        mely__spin_unlock(&w->lock);
    }
}

/* Locks two different workers in index order (the one order every holder of
 * two worker locks uses: steals and mely_color_move(), colormove.c). */
static inline void mely__lock_pair(struct mely__worker *a, struct mely__worker *b,
                                   struct mely__counters *ctr)
{
    if (a->index > b->index) {
        struct mely__worker *t = a;
        a = b;
        b = t;
    }
    mely__spin_lock(&a->lock, ctr);
    mely__spin_lock(&b->lock, ctr);
}

static inline void mely__unlock_pair(struct mely__worker *a, struct mely__worker *b)
{
    mely__spin_unlock(&a->lock);
    mely__spin_unlock(&b->lock);
}

#endif
