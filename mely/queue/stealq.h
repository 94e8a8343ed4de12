/* SPDX-License-Identifier: MIT */
/*
 * stealq.h: the stealing-queue (the Mely paper, section 4.2), one per worker:
 * its *worthy* color-queues, those whose expected processing time (the sum
 * of their events' costs, cost.h) exceeds the cost of a steal, so that
 * stealing them gains more than it costs.
 *
 * It is partially ordered, in three time-left intervals, so keeping it up to
 * date costs O(1) per change and a thief finds a big color in O(1): it looks
 * in the highest non-empty interval. With C the cost of a steal:
 *   interval 0: (C, 4C]     worth it, barely: the thief gains at most 3 steals'
 *                           time, and the stolen color's data still has to
 *                           follow it into the thief's cache;
 *   interval 1: (4C, 16C]   clearly worth it;
 *   interval 2: above 16C   the colors that keep a core busy for a long time:
 *                           moving them is what balances the load.
 * Factors of 4 keep each interval's spread small enough that "the first one
 * in the highest interval" is within 4x of the best, without sorting. C is
 * the runtime's own measure (steal.c: a moving average of successful steals),
 * so the bounds follow the machine; a color filed under an older C is
 * re-filed at its next change, and thieves re-check worthiness against the
 * current C.
 *
 * Within an interval the paper leaves color-queues unordered; here they are
 * in filing order, and a thief takes the oldest: the one its owner would
 * reach first. Taking the newest instead (the list's head, as before) left
 * the owner, at the end of an unbalanced round, with the cheap events the
 * thief had walked past and nothing worthy for the thief: the thief idled
 * through that tail (bench/steal unbalanced; doc/stealing.md).
 *
 * Worthy by waiting (mely__wait_pick): a color-queue that is not worthy on
 * its expected time is still worth taking when it has waited longer than a
 * steal costs and its expected time exceeds what the steal holds its owner
 * up (the measured lock hold of a steal, steal.c). The thief looks at the
 * head of the owner's core-queue, where the longest-waiting colors are,
 * only when the stealing-queue has nothing movable. A color's wait is
 * counted from when a look first saw it waiting (colorq.h's `since`: 0
 * until then, reset when it becomes non-empty): a thief's pick, or a post
 * on its owner while a worker sleeps. So it is never more than the real
 * wait, and the post path reads no clock unless someone sleeps.
 * doc/stealing.md says how this follows from, and departs from, the
 * paper's section 3.2.
 *
 * Kept up to date under the owner's lock wherever a color-queue's expected
 * time changes: a post (enqueue.h), a batch taken and ended (worker.c), a
 * steal (steal.c). A running color-queue (its worker's run_cq) may sit in the
 * stealing-queue (posts arrive while it runs); the thief skips it.
 * Only policies that use it ("timeleft", "penalty") keep it, and the
 * color-queues' waiting times (colorq.h's `since`).
 *
 * Who may call: whoever holds the owning worker's lock.
 */
#ifndef MELY_STEALQ_H
#define MELY_STEALQ_H

#include <stdint.h>

#include "mely/queue/colorq.h"
#include "mely/queue/coreq.h"

#define MELY__SQ_LEVELS 3

struct mely__stealq {
    struct mely__colorq *first[MELY__SQ_LEVELS]; /* NULL-terminated, sq_prev/sq_next,
                                                    in filing order */
    struct mely__colorq *last[MELY__SQ_LEVELS];  /* each list's tail */
    uint32_t n;                                  /* color-queues in all intervals */
};

/* The interval for an expected time of `units` against a steal costing
 * `cost` units (>= 1): -1 (not worthy), 0, 1 or 2. */
static inline int mely__stealq_level(uint64_t units, uint64_t cost)
{
    if (units <= cost)
        return -1;
    if (units <= 4 * cost)
        return 0;
    return units <= 16 * cost ? 1 : 2;
}

static inline void mely__stealq_unlink(struct mely__stealq *q, struct mely__colorq *cq)
{
    if (cq->sq_prev)
        cq->sq_prev->sq_next = cq->sq_next;
    else
        q->first[cq->sq_level] = cq->sq_next;
    if (cq->sq_next)
        cq->sq_next->sq_prev = cq->sq_prev;
    else
        q->last[cq->sq_level] = cq->sq_prev;
    cq->sq_prev = cq->sq_next = NULL;
    cq->sq_level = -1;
    q->n--;
}

/* Appends cq to its interval: the list stays in filing order. */
static inline void mely__stealq_link(struct mely__stealq *q, struct mely__colorq *cq, int level)
{
    cq->sq_level = (int8_t)level;
    cq->sq_next = NULL;
    cq->sq_prev = q->last[level];
    if (cq->sq_prev)
        cq->sq_prev->sq_next = cq;
    else
        q->first[level] = cq;
    q->last[level] = cq;
    q->n++;
}

/* Re-files cq after its expected time changed; returns true if it has just
 * become worthy (the caller may then wake an idle thief). O(1). */
static inline bool mely__stealq_update(struct mely__stealq *q, struct mely__colorq *cq,
                                       uint64_t cost)
{
    int level = mely__stealq_level(cq->units, cost);
    int was = cq->sq_level;

    if (level == was)
        return false;
    if (was >= 0)
        mely__stealq_unlink(q, cq);
    if (level >= 0)
        mely__stealq_link(q, cq, level);
    return was < 0 && level >= 0;
}

/* Takes cq out, if it is in (the color moves away or stops being tracked). */
static inline void mely__stealq_remove(struct mely__stealq *q, struct mely__colorq *cq)
{
    if (cq->sq_level >= 0)
        mely__stealq_unlink(q, cq);
}

/* Color-queues a pick looks at per interval (and at the head of the
 * core-queue, for the waiting rule): a running color-queue, and colors filed
 * under an older cost, are skipped, within this bound. */
#define MELY__SQ_SCAN 8u

/* Of two candidates, the one a thief prefers (section 3.3): the lower
 * penalty, the larger expected time among equals; `best` may be NULL. */
static inline bool mely__stealq_better(const struct mely__colorq *cq,
                                       const struct mely__colorq *best)
{
    return !best || cq->pshift < best->pshift ||
           (cq->pshift == best->pshift && cq->units > best->units);
}

/* The color-queue a thief takes from q (`running`: its worker's running one)
 * against a steal of `cost` units: among the first MELY__SQ_SCAN of the
 * highest interval that has a movable worthy one, the first unpenalized one
 * (time-left, section 3.2, where nothing is penalized; the oldest filed),
 * else the lowest penalty, the larger expected time among equals (section
 * 3.3: worthiness on time-left alone, the penalty to choose among worthy
 * colors; a color's penalty is the highest of the events queued since it was
 * last empty, colorq.h's pshift). NULL if none. O(1): looking further, into
 * lower intervals, cost each steal a few hundred cycles of cache misses on
 * the victim's color-queues (bench/steal penalty: steal median ~1,400
 * against ~900 cycles) for colors that count less time anyway. */
static inline struct mely__colorq *mely__stealq_pick(const struct mely__stealq *q,
                                                     const struct mely__colorq *running,
                                                     uint64_t cost)
{
    for (int level = MELY__SQ_LEVELS - 1; level >= 0; level--) {
        struct mely__colorq *best = NULL;
        unsigned seen = 0;
        for (struct mely__colorq *cq = q->first[level]; cq && seen < MELY__SQ_SCAN;
             cq = cq->sq_next, seen++) {
            if (!mely__colorq_movable(cq, running) || cq->units <= cost)
                continue;
            if (cq->pshift == 0)
                return cq;
            if (mely__stealq_better(cq, best))
                best = cq;
        }
        if (best)
            return best;
    }
    return NULL;
}

/* Whether cq, not worthy on its expected time, is worth taking at TSC `now`
 * for having waited: it has been seen waiting for more than `cost_cycles` (a
 * steal) and its expected time exceeds `hold` units (what a steal holds its
 * owner's lock). A color whose events count nothing (unannotated, never
 * measured) never is: hold is at least 1. Not seen yet (since 0): it is now,
 * its wait counted from now. `since` may be a little ahead of `now` when it
 * was read on another core (the TSCs agree to a few cycles): not waited. */
static inline bool mely__colorq_waited(struct mely__colorq *cq, uint64_t now,
                                       uint64_t cost_cycles, uint64_t hold)
{
    if (cq->since == 0) {
        cq->since = now;
        return false;
    }
    return cq->units > hold && now > cq->since && now - cq->since > cost_cycles;
}

/* Worthy by waiting (see the top): among the first MELY__SQ_SCAN color-queues
 * of the core-queue q (the highest priority first, the longest waiting first
 * within it), the first movable unpenalized one that has waited, else the
 * lowest penalty; the movable ones not seen waiting before are from now on.
 * NULL if none. O(1). */
static inline struct mely__colorq *mely__wait_pick(const struct mely__coreq *q,
                                                   const struct mely__colorq *running,
                                                   uint64_t now, uint64_t cost_cycles,
                                                   uint64_t hold)
{
    struct mely__colorq *best = NULL;
    unsigned seen = 0;

    for (struct mely__colorq *cq = q->first; cq && seen < MELY__SQ_SCAN; cq = cq->next, seen++) {
        if (!mely__colorq_movable(cq, running) ||
            !mely__colorq_waited(cq, now, cost_cycles, hold ? hold : 1))
            continue;
        if (cq->pshift == 0)
            return cq;
        if (mely__stealq_better(cq, best))
            best = cq;
    }
    return best;
}

#endif
