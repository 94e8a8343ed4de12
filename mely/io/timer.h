/* SPDX-License-Identifier: MIT */
/*
 * io/timer.h: every worker's pending timers (internal; the design is in
 * io/timer.c).
 */
#ifndef MELY_IO_TIMER_H
#define MELY_IO_TIMER_H

#include <stdatomic.h>
#include <stdint.h>

#include <mely/mely.h>
#include "mely/queue/spinlock.h"

struct mely__rt;
struct mely__worker;
struct mely__tslot;

/* "No timer pending" as a deadline. */
#define MELY__NEVER UINT64_MAX

struct mely__timers {
    mely__spinlock_t lock;          /* guards everything below but `next` */
    struct mely__tslot *slots;      /* grown by doubling; indices are stable */
    uint32_t nslots, free_head;     /* free slots chained through tslot.heap_pos */
    uint32_t *heap;                 /* slot indices, a min-heap on (deadline, seq) */
    uint32_t nheap;
    uint64_t seq;                   /* insertion order, for equal deadlines */
    _Atomic uint64_t next;          /* the earliest deadline (MELY__NEVER: none);
                                       read without the lock by the worker's loop */
};

void mely__timers_init(struct mely__timers *t);
void mely__timers_free(struct mely__timers *t);

/* The earliest pending deadline (MELY__NEVER: none). Any thread. Sequentially
 * consistent: the park protocol (timer.c) orders it against `parked`. */
static inline uint64_t mely__timers_next(struct mely__timers *t)
{
    return atomic_load(&t->next);
}

/* The timers whose event is queued (due, or cancelled after they were due),
 * for mely_shutdown()'s count. Only while no worker runs. */
size_t mely__timers_queued(const struct mely__timers *t);

/* Posts the events of w's timers that are due at `now`, at most a bounded
 * number per call; returns how many. Only w's own thread. */
unsigned mely__timers_expire(struct mely__worker *w, uint64_t now);

#endif
