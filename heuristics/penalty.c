/*
 * penalty.c: the penalty-aware heuristic (the Mely paper, sections 3.3 and
 * 4.2). A handler's penalty annotation makes its events less attractive to
 * thieves: each counts event_time / penalty in its color-queue's expected time
 * (mely/cost.h), so colors whose events drag a large, long-lived data set
 * along (high penalty) rarely look worthy, and the best worthy color is taken:
 * the largest expected time among the first few of the highest interval of
 * the stealing-queue (time-left's structure, timeleft.c).
 * Cost: O(1) per decision (a bounded scan).
 */
#include "mely/steal.h"

static struct mely__colorq *penalty_choose_color(const struct mely__worker *victim)
{
    return mely__stealq_pick_worthy(victim, true);
}

const struct mely__steal_ops mely__steal_penalty = {
    .name = "penalty",
    .can_be_stolen = mely__timeleft_can_be_stolen,
    .choose_color = penalty_choose_color,
    .stealq = true,
    .penalty = true,
};
