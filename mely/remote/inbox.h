/* SPDX-License-Identifier: MIT */
/*
 * inbox.h: a worker's inbox of remote posts (queue layer: no scheduler
 * knowledge; deliver.c fills and drains it).
 *
 * A bounded multi-producer, single-consumer ring of posts, each a copy of
 * the event's queued fields in a cache line of its own. A poster reserves a
 * run of slots with one compare-and-swap of `tail`, copies the events in and
 * marks each slot ready (its `seq` becomes its position + 1, a release
 * store); the consumer copies ready slots, in position order, into events of
 * its own and hands the slots back with one store of `head` per drain. So a
 * post crosses cores as one cache line, and events never do: each side
 * allocates and frees its own (an earlier version passed event pointers: the
 * event's line crossed too, a second miss per post). Reservations have one total
 * order, which respects causality: a post that happens before another
 * (through a handler, a lock, a steal of the poster's color) gets an earlier
 * slot, and the consumer never reads past a reserved slot that is not yet
 * ready. (Per-(poster, owner) rings lose that: deliver.c.) The consumer never
 * writes a slot: slot lines move one way, and can be read in parallel (a
 * linked list was tried: the consumer's walk was one serialized cache miss
 * per event).
 *
 * Who may call: reserve and put, any thread (the ring is full: reserve
 * returns fewer slots than asked, maybe none); take, only whoever holds the
 * owning worker's lock; ready, anyone (a hint, or, sequentially consistent,
 * the parking owner's last look: park.c). Positions are free-running 32-bit
 * counters; MELY__INBOX_CAP is a power of two.
 */
#ifndef MELY_INBOX_H
#define MELY_INBOX_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mely/queue/event.h"

#define MELY__INBOX_CAP 512u

struct mely__inbox_slot {
    alignas(64) _Atomic uint32_t seq; /* position + 1 once `ev` is written */
    struct mely__event ev;            /* a copy (its `next` unused) */
};
/* The claim above: a post crosses cores as one cache line (64 bytes on the
 * x86-64 and ARMv8 machines the runtime targets). */
_Static_assert(sizeof(struct mely__inbox_slot) == 64, "an inbox slot is one cache line");

struct mely__inbox {
    alignas(64) _Atomic uint32_t tail; /* next position to reserve (posters) */
    alignas(64) _Atomic uint32_t head; /* next position to read (the consumer) */
    alignas(64) struct mely__inbox_slot slot[MELY__INBOX_CAP];
};

/* Free slots if `head` is at least head_seen (an older reading may even be
 * a lap behind: then it says none). */
static inline uint32_t inbox_room(uint32_t tail, uint32_t head_seen)
{
    uint32_t used = tail - head_seen;
    return used >= MELY__INBOX_CAP ? 0 : MELY__INBOX_CAP - used;
}

/* Reserves up to `want` consecutive slots; returns how many (0: full) and
 * their first position in *pos. *head_seen is the caller's last reading of
 * `head` (any older value is safe: it only under-counts the room), refreshed
 * when the ring looks full. Sequentially consistent: the move protocol and
 * the parking owner's last look order themselves against it (deliver.c). */
static inline uint32_t mely__inbox_reserve(struct mely__inbox *q, uint32_t want, uint32_t *pos,
                                           uint32_t *head_seen)
{
    uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);

    for (;;) { /* retried only when another poster reserved in between */
        uint32_t room = inbox_room(t, *head_seen);
        if (room < want) {
            *head_seen = atomic_load_explicit(&q->head, memory_order_acquire);
            room = inbox_room(t, *head_seen);
        }
        uint32_t n = room < want ? room : want;
        if (n == 0)
            return 0;
        if (atomic_compare_exchange_weak_explicit(&q->tail, &t, t + n, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
            *pos = t;
            return n;
        }
    }
}

/* Copies ev into the reserved slot at `pos` and marks it ready; ev is the
 * caller's again. */
static inline void mely__inbox_put(struct mely__inbox *q, uint32_t pos,
                                   const struct mely__event *ev)
{
    struct mely__inbox_slot *s = &q->slot[pos & (MELY__INBOX_CAP - 1)];
    s->ev = *ev;
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

/* Whether a post was reserved and not yet taken (it may still be being
 * written: the owner must not sleep on it). Reads the posters' line: for
 * the parking owner's last look, not for polling. */
static inline bool mely__inbox_reserved(const struct mely__inbox *q)
{
    struct mely__inbox *m = (struct mely__inbox *)q;
    return atomic_load_explicit(&m->tail, memory_order_seq_cst) !=
           atomic_load_explicit(&m->head, memory_order_relaxed);
}

/* Consumer: the post at position pos if it is ready (a copy to read, valid
 * until `head` passes it), else NULL. */
static inline const struct mely__event *mely__inbox_peek(struct mely__inbox *q, uint32_t pos)
{
    struct mely__inbox_slot *s = &q->slot[pos & (MELY__INBOX_CAP - 1)];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
        return NULL;
    return &s->ev;
}

/* Whether the next post to take is ready: reads only the slot it will be
 * in, so that an idle owner polling it leaves `tail` in the posters' caches
 * (polling `tail` made every reservation a cache miss). Anyone (a hint). */
static inline bool mely__inbox_ready(const struct mely__inbox *q)
{
    struct mely__inbox *m = (struct mely__inbox *)q;
    return mely__inbox_peek(m, atomic_load_explicit(&m->head, memory_order_relaxed)) != NULL;
}

#endif
