/* SPDX-License-Identifier: MIT */
/*
 * counters.h: per-worker statistics counters.
 *
 * Each counter but posts_foreign has one writer, the owning worker's thread
 * (mely__count), so an increment is a relaxed load and store, not a locked
 * read-modify-write: on x86 it compiles to a plain add. Readers on other threads
 * load relaxed; C11 atomics keep ThreadSanitizer informed.
 */
#ifndef MELY_COUNTERS_H
#define MELY_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

typedef _Atomic uint64_t mely__counter_t;

struct mely__counters {
    mely__counter_t events_run;
    mely__counter_t posts_local;
    mely__counter_t posts_remote;
    mely__counter_t posts_foreign; /* the owner's, written by threads that are
                                      not workers, several at once (under
                                      foreign_lock, deliver.c, or the owner's
                                      lock, postpath.h): an atomic add */
    mely__counter_t parks;
    mely__counter_t wakeups;
    mely__counter_t wakes_sent;
    mely__counter_t lock_contended;
    mely__counter_t lock_cycles;
    mely__counter_t steal_attempts; /* the thief's */
    mely__counter_t steals;
    mely__counter_t steal_cycles;
    mely__counter_t stolen_events;
    mely__counter_t stolen_cycles; /* expected cycles of the stolen events */
    mely__counter_t polls;         /* the poller's own thread */
    mely__counter_t io_ready;
    mely__counter_t timers_fired;
    mely__counter_t watch_moves;
    mely__counter_t stream_sends;  /* io/stream.c's flush */
    mely__counter_t stream_bytes;
    mely__counter_t spins;         /* idle.c */
    mely__counter_t spins_found;
    mely__counter_t spin_ns;
    mely__counter_t park_ns;
    mely__counter_t steal_fail_cycles; /* the thief's: attempts that took nothing */
    mely__counter_t steal_hold_cycles; /* the thief's: its steals' lock holds */
    mely__counter_t idle_cycles;       /* worker.c's loop: time with nothing to run */
};

/* Single-writer increment: only the counter's one writer may call it. */
static inline void mely__count(mely__counter_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline uint64_t mely__counter_read(const mely__counter_t *c)
{
    return atomic_load_explicit((mely__counter_t *)c, memory_order_relaxed);
}

#endif
