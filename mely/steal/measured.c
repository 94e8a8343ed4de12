/* SPDX-License-Identifier: MIT */
/*
 * measured.c: measured costs, the Mely paper's stated future work. A handler
 * without a timeleft annotation counts the cost its runs are measured to take
 * (a moving average of TSC cycles per handler descriptor, or per handler
 * function for events posted without a descriptor, mely/steal/cost.h), so the
 * time-left and penalty heuristics work on programs nobody profiled, even
 * programs that post with plain mely_post().
 * Annotations, when given, win. It changes no decision rule by itself: it
 * feeds the others (alone, over base, it only makes stolen_cycles meaningful).
 * Cost: a random draw per run of an unannotated handler, two TSC reads and a
 * store for one run in 8 (mely/steal/cost.h); a table lookup per post.
 */
#include "mely/steal/steal.h"

const struct mely__steal_ops mely__steal_measured = {
    .name = "measured",
    .measure = true,
};
