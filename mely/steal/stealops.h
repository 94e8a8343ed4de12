/* SPDX-License-Identifier: MIT */
/*
 * stealops.h: the work-stealing policy interface (the Mely paper, Figure 2).
 *
 * An idle worker (the thief) runs the steal driver (steal.c) before it parks:
 *   (1) core_set:      the candidate victims, in the order to try them;
 *   (2) can_be_stolen: does this victim qualify at all?
 *   (3) choose_color:  which of its color-queues to take;
 *   (4, 5) construct_event_set and migrate: the driver moves the whole
 *       color-queue and the color's map entry to the thief, under both locks.
 * Each heuristic (mely/steal/, one file each) is a const ops struct that sets
 * the members it changes, with designated initializers; the driver composes
 * the heuristics a policy names over libasync-smp's base (mely/steal/base.c):
 * a member a heuristic leaves NULL (or false) keeps the value below it.
 *
 * Who may call: the driver only, on the thief's thread. core_set runs without
 * locks (it may read workers' pending counts as hints); can_be_stolen and
 * choose_color run with both the victim's and the thief's locks held, and
 * choose_color must return a color-queue of the victim that is linked, not
 * running, and not of a pinned color (the driver checks this too).
 */
#ifndef MELY_STEALOPS_H
#define MELY_STEALOPS_H

#include <stdbool.h>

struct mely__worker;
struct mely__colorq;

/* A composed policy's canonical name ("locality+timeleft"), with its NUL. */
#define MELY__STEAL_NAME_MAX 64

struct mely__steal_ops {
    const char *name;
    /* Fills order[] (room for nworkers - 1 entries) with victims, never the
     * thief itself; returns how many. */
    unsigned (*core_set)(const struct mely__worker *thief, unsigned *order);
    bool (*can_be_stolen)(const struct mely__worker *victim);
    struct mely__colorq *(*choose_color)(const struct mely__worker *victim);
    bool stealq;  /* the policy reads the stealing-queue: workers keep it (stealq.h) */
    bool penalty; /* color-queues keep their events' penalty (colorq.h's
                     pshift): the choice among worthy colors prefers low ones */
    bool measure; /* handlers without timeleft count their measured cost (cost.h) */
};

#endif
