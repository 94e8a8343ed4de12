/* SPDX-License-Identifier: MIT */
/*
 * steal.h: the steal driver and the policies it composes (the interface is in
 * stealops.h; the driver's protocol in steal.c).
 */
#ifndef MELY_STEAL_H
#define MELY_STEAL_H

#include <stdbool.h>
#include <stddef.h>

#include "mely/steal/cost.h"
#include "mely/queue/cycles.h"
#include "mely/runtime.h"
#include "mely/steal/stealops.h"

/* The heuristics (mely/steal/), composed by name. */
extern const struct mely__steal_ops mely__steal_base;     /* libasync-smp's */
extern const struct mely__steal_ops mely__steal_locality; /* cache distance first */
extern const struct mely__steal_ops mely__steal_timeleft; /* worthy colors only */
extern const struct mely__steal_ops mely__steal_penalty;  /* worthy, lowest penalty first */
extern const struct mely__steal_ops mely__steal_measured; /* measured costs */

/* libasync-smp's victim and color rules (base.c). */
bool mely__base_can_be_stolen(const struct mely__worker *victim);
struct mely__colorq *mely__base_choose_color(const struct mely__worker *victim);

/* The time-left rules (timeleft.c), shared with the penalty heuristic. */
bool mely__timeleft_can_be_stolen(const struct mely__worker *victim);
struct mely__colorq *mely__timeleft_choose_color(const struct mely__worker *victim);

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

/* Charges `cycles` spent moving a stolen color's fd watches (io/watch.c) to
 * the cost of steals: folded into the estimate at the next steal. Any thread. */
void mely__steal_charge(struct mely__rt *rt, uint64_t cycles);

/* Under victim's lock: whether its cq may be moved at all: linked, with events,
 * not running (not the victim's run_cq), not pinned. */
static inline bool mely__colorq_stealable(const struct mely__worker *victim,
                                          const struct mely__colorq *cq)
{
    return mely__colorq_movable(cq, victim->run_cq);
}

/* Under victim's lock: the stealing-queue's pick (stealq.h) against the
 * runtime's current steal cost. */
static inline struct mely__colorq *mely__stealq_pick_worthy(const struct mely__worker *victim)
{
    return mely__stealq_pick(&victim->stealq, victim->run_cq, mely__steal_cost_units(victim->rt));
}

/* Under victim's lock: a color worth taking for its waiting (stealq.h's
 * mely__wait_pick) now, against the runtime's current estimates. */
static inline struct mely__colorq *mely__wait_pick_worthy(const struct mely__worker *victim)
{
    const struct mely__rt *rt = victim->rt;
    return mely__wait_pick(&victim->coreq, victim->run_cq, mely__cycles(),
                           mely__steal_cost_cycles(rt), mely__steal_hold_units(rt));
}

/* Under w->lock: cq's expected time changed (a batch taken or ended, a steal);
 * re-files it in w's stealing-queue when the policy keeps one (stealq.h).
 * The post path does the same inline, specialized (enqueue.h). */
static inline void mely__stealq_refile(struct mely__worker *w, struct mely__colorq *cq)
{
    if (w->rt->steal_ops.stealq)
        (void)mely__stealq_update(&w->stealq, cq, mely__steal_cost_units(w->rt));
}

/* The engine's steal_from, on success: counts what moved (stolen_events,
 * stolen_cycles) and notes it for the steal's trace record (steal.c writes
 * it once the attempt's time is known). The thief's thread. */
static inline void mely__steal_took(struct mely__worker *thief, const struct mely__worker *victim,
                                    uint32_t color, uint32_t events, uint64_t units)
{
    uint64_t work = mely__units_to_cycles(units);
    mely__count(&thief->ctr.stolen_events, events);
    mely__count(&thief->ctr.stolen_cycles, work);
    thief->stolen.color = color;
    thief->stolen.events = events;
    thief->stolen.work = work;
    thief->stolen.victim = victim->index;
}

#endif
