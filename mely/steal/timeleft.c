/* SPDX-License-Identifier: MIT */
/*
 * timeleft.c: the time-left heuristic (the Mely paper, sections 3.2 and 4.2):
 * steal only a *worthy* color, one whose pending events are expected to take
 * longer to run than the steal costs, and the largest first.
 *  - can_be_stolen: the victim's stealing-queue (mely/queue/stealq.h) is not empty;
 *  - choose_color: the first stealable color-queue of the highest non-empty
 *    interval, checked against the current steal cost (the interval it was
 *    filed in may date from an older estimate); where the penalty heuristic
 *    noted penalties, the lowest penalty of that interval (penalty.c).
 * The core set stays libasync-smp's unless "locality" is also chosen.
 * Cost: O(1) per decision; the pick (stealq.h) looks at most at
 * MELY__SQ_SCAN color-queues per interval.
 */
#include "mely/steal/steal.h"

bool mely__timeleft_can_be_stolen(const struct mely__worker *victim)
{
    return victim->stealq.n != 0;
}

struct mely__colorq *mely__timeleft_choose_color(const struct mely__worker *victim)
{
    return mely__stealq_pick_worthy(victim);
}

const struct mely__steal_ops mely__steal_timeleft = {
    .name = "timeleft",
    .can_be_stolen = mely__timeleft_can_be_stolen,
    .choose_color = mely__timeleft_choose_color,
    .stealq = true,
};
