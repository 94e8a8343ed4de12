/* SPDX-License-Identifier: MIT */
/*
 * base.c: libasync-smp's work-stealing policy (the Mely paper, section 2.2),
 * the baseline every heuristic is compared with.
 *  - core set: the worker with the most pending events first, then the
 *    following worker numbers, wrapping;
 *  - a victim qualifies if it holds events of at least two colors (one of them
 *    may be running, and a running color cannot be stolen);
 *  - the color taken is the first, in core-queue order, that is not running
 *    and holds less than half of the victim's pending events; all its events
 *    move. Such a color may not exist.
 * Cost: core_set reads every worker's pending count, O(workers); choose_color
 * scans the victim's core-queue, O(its colors), as libasync-smp does.
 */
#include "mely/steal/steal.h"

static unsigned base_core_set(const struct mely__worker *thief, unsigned *order)
{
    const struct mely__rt *rt = thief->rt;
    unsigned most = thief->index;
    uint32_t best = 0;

    for (unsigned i = 0; i < rt->nworkers; i++) {
        uint32_t n = atomic_load_explicit(&rt->workers[i].nevents, memory_order_relaxed);
        if (i != thief->index && n > best) {
            best = n;
            most = i;
        }
    }
    unsigned k = 0;
    for (unsigned i = 0; i < rt->nworkers; i++) {
        unsigned v = (most + i) % rt->nworkers;
        if (v != thief->index)
            order[k++] = v;
    }
    return k;
}

bool mely__base_can_be_stolen(const struct mely__worker *victim)
{
    return victim->coreq.ncolors >= 2;
}

struct mely__colorq *mely__base_choose_color(const struct mely__worker *victim)
{
    uint32_t pending = atomic_load_explicit(&victim->nevents, memory_order_relaxed);

    for (struct mely__colorq *cq = victim->coreq.first; cq; cq = cq->next) /* bounded: ncolors */
        if (mely__colorq_stealable(victim, cq) && 2 * (uint64_t)cq->count < pending)
            return cq;
    return NULL;
}

const struct mely__steal_ops mely__steal_base = {
    .name = "base",
    .core_set = base_core_set,
    .can_be_stolen = mely__base_can_be_stolen,
    .choose_color = mely__base_choose_color,
};
