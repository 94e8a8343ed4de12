/*
 * coreq.h: the core-queue, one per worker: a doubly linked list of that
 * worker's non-empty color-queues (plus the one it is running), ordered by
 * priority, highest first; FIFO within a priority.
 *
 * To keep insertion O(1), the list remembers the last color-queue of each
 * priority level and a bitmap of non-empty levels: a color-queue of priority p
 * goes right after the last one of the nearest level >= p.
 *
 * Who may call: whoever holds the owning worker's lock.
 */
#ifndef MELY_COREQ_H
#define MELY_COREQ_H

#include <stddef.h>
#include <stdint.h>

#include "mely/colorq.h"

struct mely__coreq {
    struct mely__colorq head; /* sentinel: head.next is the first color-queue */
    struct mely__colorq *last[MELY_PRIO_LEVELS];
    uint32_t levels; /* bit p set: last[p] != NULL */
    uint32_t ncolors; /* color-queues linked */
};

static inline void mely__coreq_init(struct mely__coreq *q)
{
    q->head.next = q->head.prev = &q->head;
    for (int p = 0; p < MELY_PRIO_LEVELS; p++)
        q->last[p] = NULL;
    q->levels = 0;
    q->ncolors = 0;
}

static inline struct mely__colorq *mely__coreq_first(const struct mely__coreq *q)
{
    return q->head.next == &q->head ? NULL : q->head.next;
}

/* Links cq at the end of its priority level (cq->prio). */
static inline void mely__coreq_insert(struct mely__coreq *q, struct mely__colorq *cq)
{
    unsigned p = cq->prio;
    uint32_t higher_or_same = q->levels & (~0u << p);
    struct mely__colorq *after =
        higher_or_same ? q->last[__builtin_ctz(higher_or_same)] : &q->head;

    cq->prev = after;
    cq->next = after->next;
    after->next->prev = cq;
    after->next = cq;
    q->last[p] = cq;
    q->levels |= 1u << p;
    cq->queued = true;
    q->ncolors++;
}

/* Unlinks cq, which sits at level `p` (its priority when it was linked). */
static inline void mely__coreq_unlink_at(struct mely__coreq *q, struct mely__colorq *cq, unsigned p)
{
    if (q->last[p] == cq) {
        struct mely__colorq *prev = cq->prev;
        if (prev != &q->head && prev->prio == p) {
            q->last[p] = prev;
        } else {
            q->last[p] = NULL;
            q->levels &= ~(1u << p);
        }
    }
    cq->prev->next = cq->next;
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
