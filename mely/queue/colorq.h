/* SPDX-License-Identifier: MIT */
/*
 * colorq.h: the color-queue, a FIFO of one color's pending events.
 *
 * Each color has at most one color-queue, on the worker that owns the color.
 * Tail posts append (libasync-smp's cpucb_tail), head posts prepend (cpucb).
 * The queue counts its events per priority so that its own priority, the highest
 * among its events, is exact after every pop (8 levels: O(1)).
 * A color-queue is created the first time its color receives an event and lives
 * until shutdown (at most MELY_COLORS + workers of them), so the post path never
 * frees or re-creates one.
 *
 * Who may call: whoever holds the lock of the worker that owns the color.
 */
#ifndef MELY_COLORQ_H
#define MELY_COLORQ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "mely/queue/event.h"

struct mely__colorq {
    struct mely__colorq *prev, *next; /* core-queue links (coreq.h) */
    struct mely__event *head, *tail;
    uint32_t count;   /* pending events */
    uint32_t color;
    uint8_t prio;     /* highest priority among pending events */
    bool queued;      /* linked in its worker's core-queue (running: see
                         mely__worker.run_cq) */
    int8_t sq_level;  /* its stealing-queue interval, -1: none (stealq.h) */
    uint8_t pshift;   /* the highest penalty of the events queued since it was
                         last empty, as log2 (cost.h; penalty policies only) */
    uint16_t held;    /* work held to the end of its worker's turn: not
                         movable meanwhile (turnend.h) */
    uint64_t units;   /* the sum of its events' expected costs (event.h) */
    uint64_t since;   /* TSC when it was first seen waiting since it last
                         became non-empty (0: not yet), its detached batch
                         counting as queued (stealing-queue policies only:
                         stealq.h's waiting rule; moved along by move_all
                         and prepend) */
    struct mely__colorq *sq_prev, *sq_next; /* stealing-queue links */
    uint32_t prio_count[MELY_PRIO_LEVELS];
};

static inline void mely__colorq_init(struct mely__colorq *cq, uint32_t color)
{
    *cq = (struct mely__colorq){.color = color, .sq_level = -1};
}

static inline bool mely__colorq_empty(const struct mely__colorq *cq)
{
    return cq->count == 0;
}

/* Queues ev (its prio set) at the tail, or at the head when `head` is true.
 * The caller compares cq->prio before and after to move cq in its core-queue. */
static inline void mely__colorq_push(struct mely__colorq *cq, struct mely__event *ev, bool head)
{
    if (cq->count == 0) {
        ev->next = NULL;
        cq->head = cq->tail = ev;
        cq->prio = ev->prio;
    } else {
        if (head) {
            ev->next = cq->head;
            cq->head = ev;
        } else {
            ev->next = NULL;
            cq->tail->next = ev;
            cq->tail = ev;
        }
        if (ev->prio > cq->prio)
            cq->prio = ev->prio;
    }
    cq->count++;
    cq->units += ev->units;
    cq->prio_count[ev->prio]++;
}

/* Removes and returns the head event; the queue must not be empty. When it
 * empties, it keeps its priority (and its core-queue place) until its worker
 * unlinks it; otherwise cq->prio drops to the highest level still present. */
static inline struct mely__event *mely__colorq_pop(struct mely__colorq *cq)
{
    struct mely__event *ev = cq->head;
    unsigned p = ev->prio;

    cq->head = ev->next;
    cq->units -= ev->units;
    if (--cq->count == 0)
        cq->tail = NULL;
    if (--cq->prio_count[p] == 0 && p == cq->prio && cq->count != 0) {
        while (cq->prio_count[p] == 0) /* bounded: some level below holds an event */
            p--;
        cq->prio = (uint8_t)p;
    }
    return ev;
}

/* Moves every event of src into the empty dst, in O(1). src keeps its priority
 * (and so its core-queue place). A worker detaches a color's events this way
 * to run them outside its lock (worker.c). */
static inline void mely__colorq_move_all(struct mely__colorq *dst, struct mely__colorq *src)
{
    dst->head = src->head;
    dst->tail = src->tail;
    dst->count = src->count;
    dst->units = src->units;
    dst->since = src->since;
    dst->prio = src->prio;
    memcpy(dst->prio_count, src->prio_count, sizeof(dst->prio_count));
    src->head = src->tail = NULL;
    src->count = 0;
    src->units = 0;
    memset(src->prio_count, 0, sizeof(src->prio_count));
}

/* Puts every event of `front` before cq's own, in order, and empties front;
 * cq has been non-empty since front was. O(MELY_PRIO_LEVELS). */
static inline void mely__colorq_prepend(struct mely__colorq *cq, struct mely__colorq *front)
{
    if (front->count == 0)
        return;
    front->tail->next = cq->head;
    if (cq->count == 0) {
        cq->tail = front->tail;
        cq->prio = front->prio;
    } else if (front->prio > cq->prio) {
        cq->prio = front->prio;
    }
    cq->head = front->head;
    cq->count += front->count;
    cq->units += front->units;
    cq->since = front->since;
    for (int p = 0; p < MELY_PRIO_LEVELS; p++)
        cq->prio_count[p] += front->prio_count[p];
    front->head = front->tail = NULL;
    front->count = 0;
    front->units = 0;
    memset(front->prio_count, 0, sizeof(front->prio_count));
}

/* A penalty-aware enqueue: cq now holds an event of penalty 2^pshift. The
 * worker resets cq->pshift when cq empties (worker.c). */
static inline void mely__colorq_note_pshift(struct mely__colorq *cq, uint8_t pshift)
{
    if (pshift > cq->pshift)
        cq->pshift = pshift;
}

/* Whether cq may move to another worker: linked in a core-queue, with
 * events, not the batch running on its worker (`running`), not pinned. */
static inline bool mely__colorq_movable(const struct mely__colorq *cq,
                                        const struct mely__colorq *running)
{
    return cq->queued && cq != running && cq->count != 0 && cq->color < MELY_COLORS &&
           cq->held == 0;
}

#endif
