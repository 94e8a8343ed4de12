/*
 * inbox.h: a worker's inbox of remote posts (queue layer: no scheduler
 * knowledge; deliver.c fills and drains it).
 *
 * A multi-producer, single-consumer list: posters push whole chains with one
 * compare-and-swap on `head` (a LIFO of chains); the consumer takes the whole
 * list with one exchange and reverses it, so it comes out in push order.
 * Every push is one atomic step on one word, so the pushes of all posters
 * have one total order that respects causality: a post that happens before
 * another (through a handler, a lock, a steal of the poster's color) comes
 * out first. Per-(poster, owner) rings, tried first, lose that (deliver.c).
 *
 * Who may call: push, any thread; take, only whoever holds the owning
 * worker's lock; ready, anyone (a hint, or, sequentially consistent, the
 * parking owner's last look: park.c).
 */
#ifndef MELY_INBOX_H
#define MELY_INBOX_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "mely/event.h"

struct mely__inbox {
    alignas(64) struct mely__event *_Atomic head; /* newest chain first */
};

/* Pushes the chain first..last (linked by next, in post order), so that it
 * comes out after everything pushed before. Sequentially consistent: the
 * poster reads the owner's `parked` flag next (park.c). */
static inline void mely__inbox_push(struct mely__inbox *q, struct mely__event *first,
                                    struct mely__event *last)
{
    /* The list is newest first: reverse the chain as it goes in. */
    struct mely__event *newest = last, *oldest = first;
    if (first != last) {
        struct mely__event *prev = NULL, *ev = first;
        while (ev) { /* bounded: the chain */
            struct mely__event *next = ev->next;
            ev->next = prev;
            prev = ev;
            ev = next;
        }
        newest = prev;
        oldest = first;
    }
    struct mely__event *old = atomic_load_explicit(&q->head, memory_order_relaxed);
    do { /* retried only when another poster pushed in between */
        oldest->next = old;
    } while (!atomic_compare_exchange_weak_explicit(&q->head, &old, newest, memory_order_seq_cst,
                                                    memory_order_relaxed));
}

static inline bool mely__inbox_ready(const struct mely__inbox *q)
{
    return atomic_load_explicit((struct mely__event *_Atomic *)&q->head, memory_order_seq_cst) !=
           NULL;
}

/* Takes everything, oldest first, as a chain linked by next; NULL if empty. */
static inline struct mely__event *mely__inbox_take(struct mely__inbox *q)
{
    if (!atomic_load_explicit(&q->head, memory_order_relaxed))
        return NULL;
    struct mely__event *ev = atomic_exchange_explicit(&q->head, NULL, memory_order_acquire);
    struct mely__event *prev = NULL;
    while (ev) { /* bounded: what was taken */
        struct mely__event *next = ev->next;
        ev->next = prev;
        prev = ev;
        ev = next;
    }
    return prev;
}

#endif
