/* SPDX-License-Identifier: MIT */
/*
 * steal.c: the steal driver (the Mely paper, Figure 2; the policy interface is
 * in stealops.h) and the composition of policies.
 *
 * Ownership: a color's map entry changes only with both the victim's and the
 * thief's locks held (the engine's steal: mely__color_handoff in deliver.c
 * for the Mely engine, legacy_steal in legacy.c; and the engine's move for
 * mely_color_move(), colormove.c), in the same step that moves its queued
 * events from the victim to the thief.
 * Producers lock the owner they read and re-check it (colormap.h), so they
 * either queue on the victim before the move (and the event moves with the
 * queue) or on the thief after it. A running color-queue is never taken: its
 * worker holds events detached from it.
 *
 * Deadlock: two idle workers may try to steal from each other; both take the
 * two locks in worker-index order (mely__lock_pair).
 *
 * Cost of a steal, measured: the thief reads the TSC around each attempt; a
 * successful one is logged (the median in the statistics comes from the log)
 * and folded into the runtime's moving average, rt->steal_cost, which the
 * time-left heuristic compares colors with (stealq.h): avg += (x - avg) / 16,
 * one figure counting at most 8 times the average, so that one slow outlier
 * (a thief preempted inside) moves the average up by at most 7/16 (1.44x)
 * per steal. It starts at STEAL_COST_INIT, about what a steal costs on the
 * 2-core guests.
 * A stolen color's fd watches follow it later (io/watch.c: an epoll_ctl DEL
 * and ADD at the end of its next run, a DEL if the old poller sees it ready
 * meanwhile); those cycles are part of the steal's cost too, as the paper's
 * runtime, with one poller thread, did not have: the I/O layer charges them
 * (mely__steal_charge), they are summed in rt->move_cycles and folded into
 * the average at the next steal, so a server
 * whose colors carry sockets stops stealing colors worth less than moving
 * their sockets (SWS under bench/e2e/run-web.sh: a stolen ReadRequest is worth
 * ~4,000 cycles, a move 2 system calls), unless the color has waited
 * longer than that (stealq.h's waiting rule). The statistics (steal log,
 * steal_cycles) keep the steal alone; failed attempts are timed too
 * (steal_fail_cycles), so that what looking for work costs is known.
 *
 * The hold of a steal, measured: the thief reads the TSC once it holds both
 * locks and again before it releases them; a successful steal's hold is
 * folded into rt->steal_hold the same way (starting at STEAL_HOLD_INIT). It
 * is what the steal costs the victim, whose queue is locked meanwhile: the
 * waiting rule takes a cheap color only if it is worth more than that.
 *
 * Waking thieves: an idle worker steals, spins, steals again, then parks, and a
 * parked worker wakes only for its own work. So that stealable work that
 * appears later is not left to one busy worker while another sleeps, a post
 * that makes a victim stealable (its second color, or, with the time-left
 * heuristic, a newly worthy color) wakes one parked worker (park.c's
 * mely__wake_thief): a check of rt->nparked per such post, a system call
 * only when someone sleeps. A color that becomes worth taking by waiting
 * has no post of its own: the next color that starts waiting on its worker
 * looks (enqueue.h's mely__wait_began).
 *
 * Cost: a steal moves one color-queue in O(1) (unlink, relink, one map store)
 * whatever the number of events; the policy's choice may scan the victim
 * (base: its colors; time-left: O(1)). The legacy engine scans its queue
 * instead, as libasync-smp does (legacy.c).
 */
#include <stdio.h>
#include <string.h>

#include "mely/remote/colormap.h"
#include "mely/steal/cost.h"
#include "mely/queue/cycles.h"
#include "mely/remote/deliver.h"
#include "mely/remote/enqueue.h"
#include "mely/core/park.h"
#include "mely/steal/steal.h"
#include "mely/observe/trace.h"

enum { STEAL_COST_INIT = 1500, STEAL_HOLD_INIT = 500 };

/* In composition order: a later heuristic's members win. */
static const struct mely__steal_ops *const heuristics[] = {
    &mely__steal_base,     &mely__steal_locality, &mely__steal_timeleft,
    &mely__steal_penalty,  &mely__steal_measured,
};

const char mely__steal_names[] = "off, or base, locality, timeleft, penalty, measured, all "
                                 "joined with '+'";

/* The heuristics named by `word` as a bit per heuristics[] entry; 0 if unknown. */
static unsigned word_mask(const char *word, size_t len)
{
    if (len == 3 && strncmp(word, "all", 3) == 0)
        return word_mask("locality", 8) | word_mask("timeleft", 8) | word_mask("penalty", 7);
    for (unsigned i = 0; i < sizeof(heuristics) / sizeof(heuristics[0]); i++)
        if (strlen(heuristics[i]->name) == len && strncmp(heuristics[i]->name, word, len) == 0)
            return 1u << i;
    return 0;
}

static void overlay(struct mely__steal_ops *ops, const struct mely__steal_ops *h)
{
    if (h->core_set)
        ops->core_set = h->core_set;
    if (h->can_be_stolen)
        ops->can_be_stolen = h->can_be_stolen;
    if (h->choose_color)
        ops->choose_color = h->choose_color;
    ops->stealq |= h->stealq;
    ops->penalty |= h->penalty;
    ops->measure |= h->measure;
}

int mely__steal_compose(const char *spec, struct mely__steal_ops *ops, char *name, size_t size)
{
    unsigned mask = 0;

    *ops = (struct mely__steal_ops){0};
    if (!spec || strcmp(spec, "off") == 0) {
        snprintf(name, size, "off");
        return 0;
    }
    for (const char *w = spec;; w++) { /* bounded: one word per '+' */
        size_t len = strcspn(w, "+");
        unsigned m = word_mask(w, len);
        if (!m)
            return -1;
        mask |= m;
        w += len;
        if (!*w)
            break;
    }
    size_t at = 0;
    name[0] = '\0';
    for (unsigned i = 0; i < sizeof(heuristics) / sizeof(heuristics[0]); i++) {
        if (i != 0 && !(mask & 1u << i))
            continue;
        overlay(ops, heuristics[i]);
        if (mask & 1u << i)
            at += (size_t)snprintf(name + at, at < size ? size - at : 0, "%s%s", at ? "+" : "",
                                   heuristics[i]->name);
    }
    ops->name = name;
    return 1;
}

/* Under both locks: construct_event_set and migrate in one step, O(1) but
 * for the events in flight to the victim that the move protocol drains
 * first (deliver.c). */
static bool migrate(struct mely__worker *thief, struct mely__worker *victim,
                    struct mely__colorq *cq, unsigned *wake)
{
    int n = mely__color_handoff(victim, thief, (mely_color_t)cq->color, thief, wake);

    if (n < 0)
        return false;
    mely__steal_took(thief, victim, cq->color, (uint32_t)n, cq->units);
    return true;
}

bool mely__steal_colorq(struct mely__worker *thief, struct mely__worker *victim,
                        const struct mely__steal_ops *ops, unsigned *wake)
{
    struct mely__colorq *cq = NULL;

    *wake |= mely__deliver(victim, thief);
    if (ops->can_be_stolen(victim))
        cq = ops->choose_color(victim);
    return cq && mely__colorq_stealable(victim, cq) && migrate(thief, victim, cq, wake);
}

/* Tries one victim, with the engine's rules; true if a color moved, and then
 * *hold is how long the victim's lock was held for it. */
static bool try_victim(struct mely__worker *thief, struct mely__worker *victim,
                       const struct mely__steal_ops *ops, uint64_t *hold)
{
    unsigned wake = 0;

    mely__lock_pair(thief, victim, &thief->ctr);
    uint64_t locked = mely__cycles();
    bool moved = thief->rt->engine->steal_from(thief, victim, ops, &wake);
    *hold = mely__cycles() - locked;
    mely__unlock_pair(thief, victim);
    /* Only the victim can need waking (it was parked with events in flight);
     * the thief is awake and about to run what it took. */
    if (wake & MELY__WAKE_OWNER)
        mely__wake(victim, thief);
    return moved;
}

/* An outlier counts at most this many times the average (see the top). */
enum { STEAL_OUTLIER_MAX = 8, STEAL_AVG_STEP = 16 };

/* Folds `x` into the moving average *avg (see the top). */
static void fold(_Atomic uint64_t *avg, uint64_t x)
{
    uint64_t old = atomic_load_explicit(avg, memory_order_relaxed);
    if (x > STEAL_OUTLIER_MAX * old)
        x = STEAL_OUTLIER_MAX * old;
    uint64_t next = old + (uint64_t)((int64_t)(x - old) / STEAL_AVG_STEP);
    atomic_store_explicit(avg, next ? next : 1, memory_order_relaxed);
}

/* A successful steal took `cycles`, `hold` of them holding the victim's lock:
 * log it and update the runtime's estimates. */
static void record_steal(struct mely__worker *thief, uint64_t cycles, uint64_t hold)
{
    struct mely__rt *rt = thief->rt;
    uint64_t n = mely__counter_read(&thief->ctr.steals);

    atomic_store_explicit(&thief->steal_log[n % MELY__STEAL_LOG],
                          cycles > UINT32_MAX ? UINT32_MAX : (uint32_t)cycles, memory_order_relaxed);
    mely__count(&thief->ctr.steals, 1);
    mely__count(&thief->ctr.steal_cycles, cycles);
    mely__count(&thief->ctr.steal_hold_cycles, hold);
    fold(&rt->steal_cost, cycles + atomic_exchange_explicit(&rt->move_cycles, 0,
                                                            memory_order_relaxed));
    fold(&rt->steal_hold, hold);
}

/* The trace record of a steal: what the engine noted (mely__steal_took), and
 * how long the whole attempt took. */
static void trace_steal(struct mely__worker *thief, uint64_t start, uint64_t cycles)
{
    uint64_t work = thief->stolen.work;
    struct mely__trec *r = mely__trace_note(thief->trace, MELY__TR_STEAL, start, cycles,
                                            thief->stolen.color, thief->stolen.victim);
    r->u.steal.events = thief->stolen.events;
    r->u.steal.work = work > UINT32_MAX ? UINT32_MAX : (uint32_t)work;
}

bool mely__steal(struct mely__worker *thief)
{
    struct mely__rt *rt = thief->rt;
    const struct mely__steal_ops *ops = rt->steal;

    if (!ops || rt->nworkers < 2)
        return false;
    uint64_t start = mely__cycles_begin();
    unsigned n = ops->core_set(thief, thief->steal_order);
    bool stolen = false;
    uint64_t hold = 0;

    for (unsigned i = 0; i < n && !stolen; i++) { /* bounded: n < workers */
        struct mely__worker *victim = &rt->workers[thief->steal_order[i]];
        if (atomic_load_explicit(&victim->nevents, memory_order_relaxed) != 0 ||
            rt->engine->ready(victim))
            stolen = try_victim(thief, victim, ops, &hold);
    }
    mely__count(&thief->ctr.steal_attempts, 1);
    uint64_t cycles = mely__cycles_end() - start;
    if (stolen) {
        record_steal(thief, cycles, hold);
        if (thief->trace)
            trace_steal(thief, start, cycles);
    } else {
        mely__count(&thief->ctr.steal_fail_cycles, cycles);
    }
    return stolen;
}

void mely__steal_init(struct mely__rt *rt)
{
    atomic_init(&rt->steal_cost, STEAL_COST_INIT);
    atomic_init(&rt->move_cycles, 0);
    atomic_init(&rt->steal_hold, STEAL_HOLD_INIT);
}

void mely__steal_charge(struct mely__rt *rt, uint64_t cycles)
{
    atomic_fetch_add_explicit(&rt->move_cycles, cycles, memory_order_relaxed);
}
