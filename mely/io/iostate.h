/* SPDX-License-Identifier: MIT */
/*
 * io/iostate.h: the I/O layer's state (internal): the runtime's tables of
 * watches, listeners, streams and the drain (struct mely__io_rt, rt->io),
 * and each worker's poller, timers and stream staging (struct
 * mely__io_worker, w->io). The runtime object (mely/runtime.h) holds only
 * the two pointers; io/iostate.c allocates and frees what they point to,
 * from mely_init and mely_shutdown (runtime.c). Only the I/O layer's files
 * include this header; the scheduler reaches the I/O layer through the
 * calls of io/poller.h.
 *
 * Per-worker state is split by who touches it, as the worker's own
 * (runtime.h): the timers, whose lock any thread that sets or cancels a
 * timer homed on the worker takes, on a line of their own; the rest on the
 * next lines, which only the worker's thread writes, but for the poller's
 * `nwatches` (any thread that arms or disarms a watch on its base). Every
 * worker's struct is cache-line aligned, one array of them: no two
 * workers' I/O state share a line.
 */
#ifndef MELY_IO_IOSTATE_H
#define MELY_IO_IOSTATE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mely/mely.h>
#include "mely/io/timer.h"
#include "mely/runtime.h"

struct event;
struct event_base;
struct mely__stage;
struct mely__watchtab;
struct mely_listener;
struct mely_stream;

/* A worker's poller: its libevent base and what decides when to poll it
 * (io/poller.c). */
struct mely__poller {
    struct event_base *base;
    struct event *wake_ev;     /* persistent read event on the worker's
                                  wake-up eventfd (park.c writes it) */
    int timer_fd;              /* timerfd at the next timer deadline: ends a
                                  blocking poll (timer_ev reads it) */
    struct event *timer_ev;
    uint64_t timer_armed;      /* own thread: the deadline timer_fd is set to */
    uint64_t last_poll_ns;     /* own thread: when the base was last polled */
    uint64_t poll_target;      /* own thread: events_run once the events queued
                                  at the last poll have run (io/poller.c) */
    _Atomic uint32_t nwatches; /* armed watches on the base (io/watch.c): a busy
                                  worker polls only if there are some */
};

struct mely__io_worker {
    /* timers homed on this worker (io/timer.c), under their own lock */
    alignas(MELY__CACHELINE) struct mely__timers timers;

    /* own: only the worker's thread writes them (nwatches excepted) */
    alignas(MELY__CACHELINE) struct mely__poller poller; /* io/poller.c */
    struct mely__stage *stage;    /* this worker's writes to streams of other
                                     workers, sent at its turn's end (io/stream.c) */
    uint64_t turn_ns;             /* when the worker's turn began (io/poller.c) */
    unsigned poll_generation;     /* of the last poll's work (io/poller.c) */
};

/* The runtime's I/O tables: read-mostly but for the stream counts and the
 * drain's flags, written once per connection or per drain, never per
 * event, and apart from the runtime object's lines, which every post reads. */
struct mely__io_rt {
    alignas(MELY__CACHELINE) struct mely__io_worker *workers; /* nworkers, one per worker
                                     (worker i's is also rt->workers[i].io) */
    struct mely__watchtab *watches; /* fd and signal watches (io/watch.c) */
    pthread_mutex_t listen_mu;    /* guards `listeners` (io/listen.c) */
    struct mely_listener *listeners; /* not yet closed, for shutdown */
    pthread_mutex_t stream_mu;    /* guards `streams`, `streams_dead` (io/stream.c) */
    struct mely_stream *streams;  /* every stream not yet freed */
    bool streams_dead;            /* shutdown frees them: nothing else may */
    _Atomic uint32_t streams_open; /* streams whose closed callback has not run */
    _Atomic uint32_t streams_alive; /* streams not yet freed */
    /* the drain (io/drain.c) */
    atomic_bool draining;         /* mely_drain() in progress */
    atomic_bool drain_cut;        /* its timeout fired */
    atomic_bool drain_quiet;      /* it saw the runtime quiet */
    _Atomic mely_timer_t drain_timer; /* its timeout, or 0 */
    _Atomic(void (*)(struct mely__rt *)) drain_watch; /* io/streams.h */
};

/* aligned_alloc() needs sizes that are multiples of the alignment. */
_Static_assert(sizeof(struct mely__io_worker) % MELY__CACHELINE == 0, "I/O worker size");
_Static_assert(sizeof(struct mely__io_rt) % MELY__CACHELINE == 0, "I/O runtime size");

/* Creates the I/O layer's state of rt, its pollers (each base watches its
 * worker's wake-up eventfd: after mely__park_init()) and its watch table:
 * 0, MELY_ENOMEM or a negative errno. On failure, mely__io_free frees what
 * was made. Only from mely_init. */
int mely__io_init(struct mely__rt *rt);

/* At shutdown (no worker running), or after a failed init: closes the
 * streams and listeners left, frees the watches, the pollers and timers,
 * and the state itself. Before mely__park_free (the bases watch the
 * wake-up eventfds). Does nothing if mely__io_init made nothing. */
void mely__io_free(struct mely__rt *rt);

/* The timers whose event is queued (due, or cancelled after they were
 * due), on every worker, for mely_shutdown()'s count. Only while no worker
 * runs. */
size_t mely__io_timers_queued(const struct mely__rt *rt);

/* Worker i's I/O state, from any thread (rt->io is read-mostly; the
 * worker's own pointer, w->io, sits on a line its thread writes). */
static inline struct mely__io_worker *mely__io_of(const struct mely__rt *rt, unsigned i)
{
    return &rt->io->workers[i];
}

#endif
