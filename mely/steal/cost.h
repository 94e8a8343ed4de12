/* SPDX-License-Identifier: MIT */
/*
 * cost.h: expected processing costs, for the time-left and penalty heuristics
 * (the Mely paper, sections 3.2, 3.3 and 4.2).
 *
 * Every event carries its expected cost (event.h: `units`), fixed when it is
 * posted, and every color-queue the sum over its events (colorq.h), so the
 * sum stays exact whatever happens to the annotations meanwhile: the same
 * figure is added at the post and subtracted at the run.
 *
 * An event's cost is its handler's timeleft annotation; with a "measured"
 * policy, a handler without one counts its measured cost (below), and so
 * does an event posted without a descriptor (mely_post); never divided by a
 * penalty (penalties only order worthy colors: colorq.h's pshift); 0 when
 * stealing is off
 * (nothing is computed then: the post path of a runtime without stealing
 * pays a test and two additions for it), and 0 without a descriptor unless
 * costs are measured.
 *
 * Units: MELY__COST_UNIT (32) cycles, in 16 bits: an event counts up to about
 * 2.1 M cycles, far beyond the cost of a steal (a few thousand cycles), which
 * is all the heuristics compare it with; 100-cycle events count 3 units.
 *
 * Measured costs: with a "measured" policy, a worker reads the TSC around
 * one in MELY__COST_SAMPLE runs of a handler without a timeleft annotation
 * (picked at random) and folds the figure into a moving average,
 * avg += (x - avg) / 8, so the last ~8 samples dominate; one run counts at
 * most 8x the average (a run preempted by the kernel says nothing about the
 * handler), so an outlier moves it up by at most 7/8 (1.875x). The averages live in the
 * runtime, in a table keyed by the descriptor's address, or by the handler
 * function's for an event posted without a descriptor (open addressing,
 * MELY__COSTTAB slots, at most MELY__COSTTAB_PROBES probes; a key that finds
 * no slot is simply not measured), not in the descriptor: users declare
 * descriptors const. Events of one function without descriptors share one
 * average, whatever their arguments: a function whose cost depends on its
 * argument gets its mean (give it descriptors to tell its uses apart).
 * Workers update an average without a lock: two racing updates lose one
 * sample, which an average can afford; the accesses are atomic, so readers
 * never see a torn value. A slot is claimed once, by compare-and-swap, and
 * never freed before shutdown.
 *
 * Who may call: any thread (post paths and workers).
 */
#ifndef MELY_COST_H
#define MELY_COST_H

#include <stdint.h>

#include "mely/runtime.h"

#define MELY__COST_SHIFT 5
#define MELY__COST_UNIT (1u << MELY__COST_SHIFT)
#define MELY__COST_UNITS_MAX 0xffffu

static inline uint64_t mely__units_to_cycles(uint64_t units)
{
    return units << MELY__COST_SHIFT;
}

#define MELY__COSTTAB 4096u
#define MELY__COSTTAB_PROBES 16u

/* A key is a handler descriptor's address, or, for an event posted without
 * a descriptor, its handler function's: one table serves both, and the two
 * never collide (an object and a function have distinct addresses). */
struct mely__costtab {
    const void *_Atomic key[MELY__COSTTAB];
    _Atomic uint64_t avg[MELY__COSTTAB];
};

/* What an event's cost is measured and looked up under. */
static inline const void *mely__cost_key(const mely_handler_t *h, mely_fn_t fn)
{
    return h ? (const void *)h : (const void *)(uintptr_t)fn;
}

/* key's slot, claimed if `claim` and key has none yet; NULL if none. */
static inline _Atomic uint64_t *mely__costtab_slot(struct mely__costtab *t, const void *key,
                                                   bool claim)
{
    uintptr_t k = (uintptr_t)key;
    unsigned i = (unsigned)((k >> 4) ^ (k >> 16)) & (MELY__COSTTAB - 1);

    for (unsigned p = 0; p < MELY__COSTTAB_PROBES; p++, i = (i + 1) & (MELY__COSTTAB - 1)) {
        const void *cur = atomic_load_explicit(&t->key[i], memory_order_acquire);
        if (cur == key)
            return &t->avg[i];
        if (cur == NULL) {
            if (!claim)
                return NULL;
            if (atomic_compare_exchange_strong_explicit(&t->key[i], &cur, key,
                                                        memory_order_acq_rel,
                                                        memory_order_acquire) ||
                cur == key)
                return &t->avg[i];
        }
    }
    return NULL;
}

/* key's measured average in cycles, 0 if none yet. */
static inline uint64_t mely__cost_avg(const struct mely__rt *rt, const void *key)
{
    _Atomic uint64_t *a = mely__costtab_slot(rt->costtab, key, false);
    return a ? atomic_load_explicit(a, memory_order_relaxed) : 0;
}

/* One of steal.c's moving averages (cycles), in units, >= 1. */
static inline uint64_t mely__avg_units(const _Atomic uint64_t *avg)
{
    uint64_t c = atomic_load_explicit((_Atomic uint64_t *)avg, memory_order_relaxed);
    return c >> MELY__COST_SHIFT ? c >> MELY__COST_SHIFT : 1;
}

/* The runtime's estimate of one steal's cost (steal.c), in units, >= 1. */
static inline uint64_t mely__steal_cost_units(const struct mely__rt *rt)
{
    return mely__avg_units(&rt->steal_cost);
}

/* The same in cycles: what a color must have waited to be worth taking
 * for its waiting (stealq.h). */
static inline uint64_t mely__steal_cost_cycles(const struct mely__rt *rt)
{
    return atomic_load_explicit((_Atomic uint64_t *)&rt->steal_cost, memory_order_relaxed);
}

/* How long a steal holds its victim's lock (steal.c's moving average), in
 * units, >= 1: what a color stolen for its waiting must be worth. */
static inline uint64_t mely__steal_hold_units(const struct mely__rt *rt)
{
    return mely__avg_units(&rt->steal_hold);
}

/* The expected cost of one event of fn with descriptor h (may be NULL) under
 * rt's policy, in units. */
static inline uint16_t mely__cost_units(const struct mely__rt *rt, const mely_handler_t *h,
                                        mely_fn_t fn)
{
    if (!rt->cost.track)
        return 0;
    uint64_t c = h ? h->timeleft : 0;
    if (c == 0 && rt->cost.measure)
        c = mely__cost_avg(rt, mely__cost_key(h, fn));
    c = (c + MELY__COST_UNIT / 2) >> MELY__COST_SHIFT;
    return c > MELY__COST_UNITS_MAX ? MELY__COST_UNITS_MAX : (uint16_t)c;
}

/* The penalty of h as the smallest s with 2^s >= penalty (0: no penalty, or
 * no descriptor): what a color-queue keeps of its events' penalties (colorq.h's
 * pshift). A power of two is all the precision a choice among worthy colors
 * needs. */
static inline uint8_t mely__cost_pshift(const mely_handler_t *h)
{
    if (!h || h->penalty <= 1)
        return 0;
    return (uint8_t)(64u - (unsigned)__builtin_clzll((uint64_t)h->penalty - 1));
}

/* One run in MELY__COST_SAMPLE of a measured handler is timed, chosen at
 * random (a fixed stride would alias with handlers that alternate), so that
 * the TSC reads and the shared average's store stay off most runs. */
#define MELY__COST_SAMPLE 8u

/* Whether this run of an event with descriptor h (may be NULL) is to be
 * timed (a "measured" policy, no timeleft annotation, and the worker's
 * sample says so). `rng` is the running worker's state. */
static inline bool mely__cost_measures(const struct mely__rt *rt, const mely_handler_t *h,
                                       uint64_t *rng)
{
    if (!rt->cost.measure || (h && h->timeleft != 0))
        return false;
    uint64_t x = *rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return (x & (MELY__COST_SAMPLE - 1)) == 0;
}

/* Folds one run that took `cycles` into key's moving average. */
static inline void mely__cost_record(struct mely__rt *rt, const void *key, uint64_t cycles)
{
    _Atomic uint64_t *avg = mely__costtab_slot(rt->costtab, key, true);
    if (!avg)
        return;
    uint64_t old = atomic_load_explicit(avg, memory_order_relaxed);
    if (old != 0 && cycles > 8 * old) /* a run preempted, or one odd input */
        cycles = 8 * old;
    uint64_t next = old == 0 ? cycles : old + (uint64_t)((int64_t)(cycles - old) >> 3);
    atomic_store_explicit(avg, next ? next : 1, memory_order_relaxed);
}

#endif
