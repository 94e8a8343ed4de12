/*
 * steal.h: the work-stealing policy interface (the paper's Figure 2).
 *
 * An idle worker (the thief) runs the steal driver (steal.c) before it parks:
 *   (1) construct_core_set: the candidate victims, in the order to try them;
 *   (2) can_be_stolen:      does this victim qualify at all?
 *   (3) choose_color:       which of its color-queues to take;
 *   (4, 5) construct_event_set and migrate: the driver moves the whole
 *       color-queue and the color's map entry to the thief, under both locks.
 * A policy supplies (1)-(3) as a const ops struct, one per file in heuristics/,
 * chosen at run time by name (mely_config_t.steal, MELY_STEAL).
 *
 * Who may call: the driver only, on the thief's thread. core_set runs without
 * locks (it may read workers' pending counts as hints); can_be_stolen and
 * choose_color run with both the victim's and the thief's locks held, and
 * choose_color must return a color-queue of the victim that is linked, not
 * running, and not of a pinned color (the driver checks this too).
 */
#ifndef MELY_STEAL_H
#define MELY_STEAL_H

#include <stdbool.h>

#include "mely/runtime.h"

struct mely__steal_ops {
    const char *name;
    /* Fills order[] (room for nworkers - 1 entries) with victims, never the
     * thief itself; returns how many. */
    unsigned (*core_set)(const struct mely__worker *thief, unsigned *order);
    bool (*can_be_stolen)(const struct mely__worker *victim);
    struct mely__colorq *(*choose_color)(const struct mely__worker *victim);
};

/* The policies (heuristics/). */
extern const struct mely__steal_ops mely__steal_base;     /* libasync-smp's */
extern const struct mely__steal_ops mely__steal_locality; /* cache distance first */

/* libasync-smp's victim and color rules (base.c), shared by policies that
 * change only the core set. */
bool mely__base_can_be_stolen(const struct mely__worker *victim);
struct mely__colorq *mely__base_choose_color(const struct mely__worker *victim);

/* The policy called `name` (NULL or "off": none) into *ops; false if unknown. */
bool mely__steal_lookup(const char *name, const struct mely__steal_ops **ops);

/* The names accepted by mely__steal_lookup(), for messages. */
extern const char mely__steal_names[];

/* Runs the driver once for the idle worker `thief`; true if it took a color. */
bool mely__steal(struct mely__worker *thief);

/* Under victim's lock: whether its cq may be moved at all: linked, with events,
 * not running (not the victim's run_cq), not pinned. */
static inline bool mely__colorq_stealable(const struct mely__worker *victim,
                                          const struct mely__colorq *cq)
{
    return cq->queued && cq != victim->run_cq && cq->count != 0 && cq->color < MELY_COLORS;
}

#endif
