/* SPDX-License-Identifier: MIT */
/*
 * coreq.h: the core-queue, one per worker: a doubly linked list of that
 * worker's non-empty color-queues (plus the one it is running), ordered by
 * priority, highest first; FIFO within a priority.
 *
 * To keep insertion O(1), the list remembers the last color-queue of each
 * priority level and a bitmap of non-empty levels: a color-queue of priority p
 * goes right after the last one of the nearest level >= p. The struct is small
 * (no sentinel) so that, with default priorities, all a post touches of it
 * shares the owner's lock cache line (runtime.h).
 *
 * Who may call: whoever holds the owning worker's lock.
 */
#ifndef MELY_COREQ_H
#define MELY_COREQ_H

#include <stddef.h>
#include <stdint.h>

#include "mely/queue/colorq.h"

struct mely__coreq {
    struct mely__colorq *first; /* NULL-terminated list, linked by prev/next */
    uint32_t levels;  /* bit p set: last[p] != NULL */
    uint32_t ncolors; /* color-queues linked */
    struct mely__colorq *last[MELY_PRIO_LEVELS];
};

static inline void mely__coreq_init(struct mely__coreq *q)
{
    q->first = NULL;
    q->levels = 0;
    q->ncolors = 0;
    for (int p = 0; p < MELY_PRIO_LEVELS; p++)
        q->last[p] = NULL;
}

static inline struct mely__colorq *mely__coreq_first(const struct mely__coreq *q)
{
    return q->first;
}

/* Links cq at the end of its priority level (cq->prio). */
static inline void mely__coreq_insert(struct mely__coreq *q, struct mely__colorq *cq)
{
    unsigned p = cq->prio;
    uint32_t higher_or_same = q->levels & (~0u << p);
    struct mely__colorq *after = higher_or_same ? q->last[__builtin_ctz(higher_or_same)] : NULL;

    cq->prev = after;
    cq->next = after ? after->next : q->first;
    if (cq->next)
        cq->next->prev = cq;
    if (after)
        after->next = cq;
    else
        q->first = cq;
    q->last[p] = cq;
    q->levels |= 1u << p;
    cq->queued = true;
    q->ncolors++;
}

/* Unlinks cq, which sits at level `p` (its priority when it was linked). */
static inline void mely__coreq_unlink_at(struct mely__coreq *q, struct mely__colorq *cq, unsigned p)
{
    if (q->last[p] == cq) {
        if (cq->prev && cq->prev->prio == p) {
            q->last[p] = cq->prev;
        } else {
            q->last[p] = NULL;
            q->levels &= ~(1u << p);
        }
    }
    if (cq->prev)
        cq->prev->next = cq->next;
    else
        q->first = cq->next;
    if (cq->next)
        cq->next->prev = cq->prev;
    cq->prev = cq->next = NULL;
    cq->queued = false;
    q->ncolors--;
}

static inline void mely__coreq_remove(struct mely__coreq *q, struct mely__colorq *cq)
{
    mely__coreq_unlink_at(q, cq, cq->prio);
}

/* cq's priority changed from old_prio to cq->prio: move it to its new level. */
static inline void mely__coreq_reprioritize(struct mely__coreq *q, struct mely__colorq *cq,
                                            unsigned old_prio)
{
    mely__coreq_unlink_at(q, cq, old_prio);
    mely__coreq_insert(q, cq);
}

/* Moves cq behind the other color-queues of its level (after a full batch). */
static inline void mely__coreq_rotate(struct mely__coreq *q, struct mely__colorq *cq)
{
    if (q->last[cq->prio] != cq) {
        mely__coreq_remove(q, cq);
        mely__coreq_insert(q, cq);
    }
}

#endif
