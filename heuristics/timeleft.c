/*
 * timeleft.c: the time-left heuristic (the Mely paper, sections 3.2 and 4.2):
 * steal only a *worthy* color, one whose pending events are expected to take
 * longer to run than the steal costs, and the largest first.
 *  - can_be_stolen: the victim's stealing-queue (mely/stealq.h) is not empty;
 *  - choose_color: the first stealable color-queue of the highest non-empty
 *    interval, checked against the current steal cost (the interval it was
 *    filed in may date from an older estimate).
 * The core set stays libasync-smp's unless "locality" is also chosen.
 * Cost: O(1) per decision; the scan below is bounded by SCAN per interval (a
 * running color-queue, and colors filed under an older cost, are skipped).
 */
#include "mely/cost.h"
#include "mely/steal.h"

enum { SCAN = 8 };

bool mely__timeleft_can_be_stolen(const struct mely__worker *victim)
{
    return victim->stealq.n != 0;
}

/* The best stealable worthy color-queue of victim: the first found, from the
 * highest interval down, or with `best_of_interval`, the one with the largest
 * expected time among the first SCAN of the highest interval that has one. */
struct mely__colorq *mely__stealq_pick(const struct mely__worker *victim, bool best_of_interval)
{
    uint64_t cost = mely__steal_cost_units(victim->rt);

    for (int level = MELY__SQ_LEVELS - 1; level >= 0; level--) {
        struct mely__colorq *best = NULL;
        unsigned seen = 0;
        for (struct mely__colorq *cq = victim->stealq.first[level]; cq && seen < SCAN;
             cq = cq->sq_next, seen++) {
            if (!mely__colorq_stealable(victim, cq) || cq->units <= cost)
                continue;
            if (!best_of_interval)
                return cq;
            if (!best || cq->units > best->units)
                best = cq;
        }
        if (best)
            return best;
    }
    return NULL;
}

static struct mely__colorq *timeleft_choose_color(const struct mely__worker *victim)
{
    return mely__stealq_pick(victim, false);
}

const struct mely__steal_ops mely__steal_timeleft = {
    .name = "timeleft",
    .can_be_stolen = mely__timeleft_can_be_stolen,
    .choose_color = timeleft_choose_color,
    .stealq = true,
};
