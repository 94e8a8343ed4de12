/* SPDX-License-Identifier: MIT */
/*
 * stealq.h: the stealing-queue (the Mely paper, section 4.2), one per worker:
 * its *worthy* color-queues, those whose expected processing time (the sum
 * of their events' costs, cost.h) exceeds the cost of a steal, so that
 * stealing them gains more than it costs.
 *
 * It is partially ordered, in three time-left intervals; within an interval
 * the color-queues are not ordered, so keeping it up to date costs O(1) per
 * change and a thief finds a big color in O(1): it looks in the highest
 * non-empty interval. With C the cost of a steal:
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
 * Kept up to date under the owner's lock wherever a color-queue's expected
 * time changes: a post (enqueue.h), a batch taken and ended (worker.c), a
 * steal (steal.c). A running color-queue (its worker's run_cq) may sit in the
 * stealing-queue (posts arrive while it runs); the thief skips it.
 * Only policies that use it ("timeleft", "penalty") keep it.
 *
 * Who may call: whoever holds the owning worker's lock.
 */
#ifndef MELY_STEALQ_H
#define MELY_STEALQ_H

#include <stdint.h>

#include "mely/queue/colorq.h"

#define MELY__SQ_LEVELS 3

struct mely__stealq {
    struct mely__colorq *first[MELY__SQ_LEVELS]; /* NULL-terminated, sq_prev/sq_next */
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
    cq->sq_prev = cq->sq_next = NULL;
    cq->sq_level = -1;
    q->n--;
}

static inline void mely__stealq_link(struct mely__stealq *q, struct mely__colorq *cq, int level)
{
    cq->sq_level = (int8_t)level;
    cq->sq_prev = NULL;
    cq->sq_next = q->first[level];
    if (cq->sq_next)
        cq->sq_next->sq_prev = cq;
    q->first[level] = cq;
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

/* Color-queues a pick looks at per interval: a running color-queue, and
 * colors filed under an older cost, are skipped, within this bound. */
#define MELY__SQ_SCAN 8u

/* The color-queue a thief takes from q (`running`: its worker's running one)
 * against a steal of `cost` units: among the first MELY__SQ_SCAN of the
 * highest interval that has a movable worthy one, the first unpenalized one
 * (time-left, section 3.2, where nothing is penalized), else the lowest
 * penalty, the larger expected time among equals (section 3.3: worthiness on
 * time-left alone, the penalty to choose among worthy colors; a color's
 * penalty is the highest of the events queued since it was last empty,
 * colorq.h's pshift). NULL if none. O(1): looking further, into lower
 * intervals, cost each steal a few hundred cycles of cache misses on the
 * victim's color-queues (bench/steal penalty: steal median ~1,400 against
 * ~900 cycles) for colors that count less time anyway. */
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
            if (!best || cq->pshift < best->pshift ||
                (cq->pshift == best->pshift && cq->units > best->units))
                best = cq;
        }
        if (best)
            return best;
    }
    return NULL;
}

#endif
