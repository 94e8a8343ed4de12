/*
 * steal.h: the steal driver and the policies it composes (the interface is in
 * stealops.h; the driver's protocol in steal.c).
 */
#ifndef MELY_STEAL_H
#define MELY_STEAL_H

#include <stdbool.h>
#include <stddef.h>

#include "mely/runtime.h"
#include "mely/stealops.h"

/* The heuristics (heuristics/), composed by name. */
extern const struct mely__steal_ops mely__steal_base;     /* libasync-smp's */
extern const struct mely__steal_ops mely__steal_locality; /* cache distance first */
extern const struct mely__steal_ops mely__steal_timeleft; /* worthy colors only */
extern const struct mely__steal_ops mely__steal_penalty;  /* worthy, penalty-weighted */
extern const struct mely__steal_ops mely__steal_measured; /* measured costs */

/* libasync-smp's victim and color rules (base.c). */
bool mely__base_can_be_stolen(const struct mely__worker *victim);
struct mely__colorq *mely__base_choose_color(const struct mely__worker *victim);

/* The time-left rules (timeleft.c), shared with the penalty heuristic. */
bool mely__timeleft_can_be_stolen(const struct mely__worker *victim);
struct mely__colorq *mely__stealq_pick(const struct mely__worker *victim, bool best_of_interval);

/* Composes the policy `spec` (mely.h: "off", or words joined with '+'; NULL
 * means "off") into *ops and its canonical name into name[size]. Returns 1 if
 * it steals, 0 for "off", -1 for an unknown or misplaced word. */
int mely__steal_compose(const char *spec, struct mely__steal_ops *ops, char *name, size_t size);

/* The words accepted by mely__steal_compose(), for messages. */
extern const char mely__steal_names[];

/* Sets the steal-cost estimate to its initial value (mely_init). */
void mely__steal_init(struct mely__rt *rt);

/* The Mely engine's steal_from (engine.h): under both locks, drains the
 * victim's inbox (posts it has not had the time to take are stealable too),
 * lets the policy choose a color and moves it with the move protocol
 * (deliver.c). */
bool mely__steal_colorq(struct mely__worker *thief, struct mely__worker *victim,
                        const struct mely__steal_ops *ops, unsigned *wake);

/* Runs the driver once for the idle worker `thief`; true if it took a color. */
bool mely__steal(struct mely__worker *thief);

/* After a post made victim's work stealable (enqueue.h): wakes one parked
 * worker other than victim, if any, so that it comes to steal. Call without
 * any worker lock. `self` (may be NULL) pays for the wake-up. */
void mely__wake_thief(struct mely__rt *rt, struct mely__worker *victim, struct mely__worker *self);

/* Under victim's lock: whether its cq may be moved at all: linked, with events,
 * not running (not the victim's run_cq), not pinned. */
static inline bool mely__colorq_stealable(const struct mely__worker *victim,
                                          const struct mely__colorq *cq)
{
    return cq->queued && cq != victim->run_cq && cq->count != 0 && cq->color < MELY_COLORS;
}

#endif
