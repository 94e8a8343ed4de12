/* SPDX-License-Identifier: MIT */
/*
 * penalty.c: the penalty-aware heuristic (the Mely paper, section 3.3). A
 * handler's penalty annotation says its events drag a large, long-lived data
 * set along, so that moving them to another core costs cache misses. The
 * paper's rule: a color is worth stealing on its time-left alone (time-left's
 * stealing-queue, timeleft.c), and among worthy colors the thief takes the
 * one with the lowest penalty: the highest penalty among the events queued
 * on it since it was last empty, kept by the enqueue as a power of two
 * (mely/queue/colorq.h's pshift). The choice is time-left's own pick
 * (mely/queue/stealq.h, mely__stealq_pick), which takes the first unpenalized
 * color and, when there is none, the lowest penalty: this heuristic only
 * makes the enqueue note the penalties. The post path of other policies
 * pays nothing for it.
 * So a heavily penalized color is still stolen when nothing better is
 * worthy, and an idle core keeps balancing the load.
 *
 * The paper's own implementation (its section 4.2) divided each event's time
 * by its penalty instead, so that a penalized color rarely looked worthy at
 * all: under the paper's penalty benchmark that left the thief idle once the
 * unpenalized events had run (0.72-0.78x this rule there, never ahead on the
 * other tables: doc/stealing.md), and it is gone.
 * Cost: O(1) per decision (bounded scans).
 */
#include "mely/steal/steal.h"

const struct mely__steal_ops mely__steal_penalty = {
    .name = "penalty",
    .can_be_stolen = mely__timeleft_can_be_stolen,
    .choose_color = mely__timeleft_choose_color,
    .stealq = true,
    .penalty = true,
};
