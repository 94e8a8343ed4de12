/* SPDX-License-Identifier: MIT */
/*
 * locality.c: the locality-aware heuristic (the Mely paper, section 3.1): the
 * thief tries victims in order of cache distance, those sharing its L2 first,
 * then those sharing its L3 or package, then the rest (the cache map,
 * mely/topology/topology.h). Whether a victim qualifies and which color is taken are
 * libasync-smp's rules (base.c), so that this heuristic's effect is measured
 * alone. Cost: core_set copies the precomputed order, O(workers).
 */
#include <string.h>

#include "mely/steal/steal.h"
#include "mely/topology/topology.h"

static unsigned locality_core_set(const struct mely__worker *thief, unsigned *order)
{
    const struct mely__rt *rt = thief->rt;
    unsigned n = rt->nworkers - 1;

    memcpy(order, mely__topo_order(rt->topo, thief->index), n * sizeof(*order));
    return n;
}

const struct mely__steal_ops mely__steal_locality = {
    .name = "locality",
    .core_set = locality_core_set,
    .can_be_stolen = mely__base_can_be_stolen,
    .choose_color = mely__base_choose_color,
};
