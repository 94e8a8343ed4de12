/* SPDX-License-Identifier: MIT */
/*
 * runtime.h: the runtime object and its workers (internal).
 *
 * Terms (the Mely paper, section 4.1):
 *  - worker: one thread per core, pinned, running the event loop (worker.c).
 *  - color-queue: FIFO of one color's pending events (colorq.h).
 *  - core-queue: a worker's color-queues by priority (coreq.h).
 *  - color map: 64 KB, one byte per color: the worker that owns it (colormap.c).
 *
 * Per-worker data is split by who touches it, on separate cache lines:
 *  - `shared`: fields other threads touch, only under `lock` (the core-queue,
 *    the stealing-queue, the color-queue allocator, the reserve of events a
 *    move's drain may use), plus `nevents`, which other threads may read
 *    without the lock as a hint, and the inbox's address, set at init;
 *  - `wake`: the parked flag, the wake-up count and the eventfd that wakers
 *    write (park.c);
 *  - `foreign_lock`, alone (deliver.c);
 *  - `own`: fields only the owning thread writes (its event cache, the
 *    running batch, its outbox, the turn's end), some of which
 *    others read: the flush count `post_seq` (a mover, deliver.c) and the
 *    counters (anyone, relaxed); and the trace rings, which tracing's start
 *    and stop also write (trace.h). The color of the running handler is a
 *    thread-local, mely__current_color (self.c);
 *  - the stall word (stall.h), which the worker writes and the stall monitor
 *    reads, and the monitor's own count, on a line each.
 *
 * The I/O layer's state is its own (io/iostate.h), allocated by it apart
 * from these structs: each worker's poller, timers and stream staging
 * (w->io), and the runtime's tables of watches, listeners and streams and
 * the drain's state (rt->io). This header names those structs only: the
 * scheduler reaches the I/O layer through io/poller.h's calls, which take
 * the worker.
 *
 * Lock order: a worker's lock, then a worker's foreign_lock (a mover's step
 * b, deliver.c), or the event depot's lock. Only the steal driver and
 * mely_color_move() (colormove.c) hold two worker locks, taken in
 * worker-index order (mely__lock_pair, colormap.h).
 */
#ifndef MELY_RUNTIME_H
#define MELY_RUNTIME_H

#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mely/queue/colorq.h"
#include "mely/queue/coreq.h"
#include "mely/queue/counters.h"
#include "mely/sched/engine.h"
#include "mely/queue/freelist.h"
#include <mely/mely.h>
#include "mely/remote/inbox.h"
#include "mely/remote/outbox.h"
#include "mely/queue/spinlock.h"
#include "mely/sched/spinpol.h"
#include "mely/observe/stall.h"
#include "mely/steal/stealops.h"
#include "mely/queue/stealq.h"
#include "mely/sched/turnend.h"

#define MELY__CACHELINE 64

struct mely__rt;
struct mely__topo;
struct mely__costtab;
struct mely__trace;
struct mely__tracer;
struct mely__io_rt;
struct mely__io_worker;

/* The successful steals whose cycles a worker keeps for the median. */
#define MELY__STEAL_LOG 1024u

struct mely__worker {
    /* shared: under `lock`. The fields a post touches come first, so that the
     * lock, the pending count an idle worker watches, and the head of the
     * core-queue travel between cores in one cache line. */
    alignas(MELY__CACHELINE) mely__spinlock_t lock;
    _Atomic uint32_t nevents;     /* pending events: written under lock, read anywhere */
    struct mely__cqslab cqslab;   /* color-queues for colors this worker owns */
    struct mely__coreq coreq;
    struct mely__stealq stealq;   /* worthy color-queues (timeleft, penalty) */
    struct mely__inbox *inbox;    /* remote posts to this worker (inbox.h;
                                     deliver.c); NULL: the legacy engine */
    struct mely__event *reserve;  /* events only a move's drain uses (deliver.c) */
    uint32_t nreserve;

    /* wake: `parked` is set by the worker under `lock` and cleared by
     * whoever wakes it, with one exchange (park.c); wake_seq counts wake-ups.
     * Read by every flush that publishes to this worker, written rarely. */
    alignas(MELY__CACHELINE) atomic_bool parked; /* sleeping, or about to */
    _Atomic uint32_t wake_seq;
    int wake_fd;                  /* eventfd: the waker that cleared `parked`
                                     writes it; the worker's poller reads it */

    /* held by a thread that is not a worker while it posts here, and by a
     * color's mover: the foreign half of the move protocol (deliver.c) */
    alignas(MELY__CACHELINE) mely__spinlock_t foreign_lock;

    /* own: only the worker's thread */
    alignas(MELY__CACHELINE) struct mely__evcache evcache;
    struct mely__colorq *run_cq;  /* the color-queue whose batch is running */
    struct mely__colorq run;      /* the events detached from run_cq (only their
                                     event fields are used) */
    struct mely__outbox outbox;   /* staged posts to other workers (outbox.h) */
    _Atomic uint32_t post_seq;    /* odd while a flush publishes (deliver.c) */
    uint32_t *head_seen;          /* per owner: its inbox's head, as last read */
    struct mely__io_worker *io;   /* its poller, timers and stream staging
                                     (io/iostate.h): only the I/O layer reads it */
    unsigned *steal_order;        /* the steal driver's core set (nworkers - 1) */
    struct mely__rt *rt;
    unsigned index;
    int cpu;                      /* CPU to pin to, or -1 */
    pthread_t thread;
    uint64_t sample_rng;          /* which runs measured costs time (cost.h) */
    struct mely__spinpol spinpol; /* how long its next idle spin lasts (spinpol.h) */
    struct mely__counters ctr;    /* single writer (see counters.h) */
    struct mely__trace *trace;    /* this worker's ring, NULL when not tracing;
                                     changed only by mely__trace_follow (trace.h) */
    bool observed;                /* trace || rt->cost.measure: its runs are
                                     timed (one test per batch when off) */
    _Atomic(struct mely__trace *) trace_want; /* the ring to follow: written
                                     by tracing's start and stop, read per loop turn */
    _Atomic(struct mely__trace *) trace_ack; /* the ring followed last (trace.h) */
    struct {                      /* the last steal's color, for its trace record */
        uint32_t color, events;
        uint64_t work;            /* its cycles, as annotated or measured */
        unsigned victim;
    } stolen;
    _Atomic uint32_t steal_log[MELY__STEAL_LOG]; /* cycles of the last steals,
                                     a ring; single writer, read by stats */
    /* the turn's end (turnend.h) and the quiet count (quiet.h): own */
    struct mely__turnend *batch_end; /* work queued in this batch, and held to */
    struct mely__turnend *turn_end;  /* the end of the turn (turnend.h) */
    struct mely__turnend *batch_done; /* the end of the batch, holding nothing */
    uint32_t quiet_seq;           /* batches taken and ended, written under
                                     `lock`: odd while the worker holds one
                                     (quiet.h). Not on the shared lines: it
                                     changes every batch, and posters read
                                     those (a ping-pong paid 30-60 ns a hop) */
    uint64_t turn_seq;            /* turns ended: held tags name the turn */

    /* the stall watch (stall.h): written by the worker around each handler
     * (and its CPU clock once per mely_run()), read by the monitor thread;
     * a line of its own, so that the monitor's
     * reads never take a line the worker writes for anything else */
    alignas(MELY__CACHELINE) struct mely__stall_word stall;

    /* the monitor's own: only the monitor writes them */
    alignas(MELY__CACHELINE) _Atomic uint64_t stalls; /* stalls seen (stats) */

    /* placement (placement.h): colors of pools placed on this worker, added
     * to by whichever thread places or releases (once per connection, never
     * per event), and the average of what its polls queued, written by the
     * worker once per poll; read by placers as the worker's load */
    alignas(MELY__CACHELINE) _Atomic uint32_t placed_now;
    _Atomic uint32_t wave_avg;    /* events queued after a poll, x16, averaged */
    _Atomic uint64_t places;
};

struct mely__rt {
    /* read-mostly configuration */
    unsigned nworkers;
    unsigned batch;
    unsigned spin_us;
    const struct mely__steal_ops *steal; /* NULL: no stealing; else &steal_ops */
    struct mely__steal_ops steal_ops;    /* the policy, composed (steal.c) */
    char steal_name[MELY__STEAL_NAME_MAX]; /* steal_ops.name points here */
    struct {
        bool track;   /* events carry expected costs: stealing is on (cost.h) */
        bool penalty; /* color-queues keep their events' penalty (pshift) */
        bool measure; /* unannotated handlers' costs measured */
    } cost;
    struct mely__costtab *costtab; /* measured costs, with cost.measure */
    struct mely__io_rt *io;       /* the I/O layer's tables (io/iostate.h):
                                     watches, listeners, streams, the drain */
    mely_fn_t idle_fn;            /* mely_on_idle(), set while not running */
    void *idle_arg;
    _Atomic uint32_t range_top;   /* colors >= this are reserved (colorrange.c) */
    const struct mely__engine *engine; /* the queueing engine (engine.h) */
    atomic_bool budget_hit;       /* events handed out passed the budget:
                                     remote and foreign posts refuse
                                     (freelist.h). On this read-mostly line,
                                     in what was padding: a remote post reads
                                     it with `engine`, written only when it flips */
    struct mely__topo *topo;      /* the cache map (topology.h) */
    bool oversubscribed;          /* more workers than allowed CPUs, or no pinning */
    struct mely__tracer *tracer;  /* the trace being recorded, or NULL (trace.c) */
    pthread_mutex_t trace_mu;     /* one start, stop or exit write at a time */

    struct mely__worker *workers; /* nworkers, cache-line aligned */

    /* Color -> owning worker (the paper's 64 KB static array), from a line's
     * start. Pinned colors (>= MELY_COLORS) are not in it: their owner is
     * fixed. */
    alignas(MELY__CACHELINE) _Atomic uint8_t owner[MELY_COLORS];

    /* Color -> its color-queue or NULL. Set once, under the owning worker's
     * lock, and never cleared before shutdown, so a non-NULL value read without
     * the lock stays valid; the queue's content needs the owner's lock. */
    struct mely__colorq *_Atomic *cq_of; /* MELY_COLORS + nworkers entries */

    struct mely__depot depot;
    void *engine_data;            /* the engine's own state (engine.h: init) */

    /* Stealing, written by thieves and parking workers, read by posters when
     * a color becomes stealable: on a line of their own. */
    alignas(MELY__CACHELINE) _Atomic uint64_t steal_cost; /* cycles, moving average */
    _Atomic uint64_t move_cycles; /* fd watch moves since the last steal
                                     (mely__steal_charge) */
    _Atomic uint64_t steal_hold;  /* cycles a steal holds its victim's lock,
                                     moving average (steal.c) */
    _Atomic uint32_t nparked;     /* workers parked now */

    alignas(MELY__CACHELINE) atomic_bool stopping; /* a stop was requested */
    atomic_bool running;                          /* inside mely_run() */
    atomic_bool closing;                          /* inside mely_shutdown() */
    struct mely__rt *live_next;                   /* the registry (handle.c) */
    atomic_bool stats_printed;    /* MELY_STATS's table is out (stats.c) */

    /* the stall monitor (stall.c): one thread per mely_run() */
    unsigned stall_ms;            /* MELY_STALL_MS; 0: no monitor */
    struct mely__stall_monitor *stall_mon; /* while mely_run() runs, or NULL */

    /* quiet (quiet.h), at the end: the fields above keep their lines */
    _Atomic(void (*)(struct mely__rt *)) quiet_fn; /* run when next quiet (quiet.h) */
    _Atomic(struct mely_color_pool *) pools; /* every pool, a list freed at
                                     shutdown (placement.c) */
};

/* The claim at the top of struct mely__worker: what a post touches under the
 * lock (the lock, the pending count, the head and counts of the core-queue)
 * is one cache line; and the wake-up fields start the next one. */
_Static_assert(offsetof(struct mely__worker, lock) == 0 &&
                   offsetof(struct mely__worker, nevents) < MELY__CACHELINE &&
                   offsetof(struct mely__worker, coreq) + offsetof(struct mely__coreq, ncolors) +
                           sizeof(uint32_t) <=
                       MELY__CACHELINE,
               "a post's worker fields share one cache line");
_Static_assert(offsetof(struct mely__worker, parked) % MELY__CACHELINE == 0, "wake line");

/* aligned_alloc() needs sizes that are multiples of the alignment. */
_Static_assert(sizeof(struct mely__worker) % MELY__CACHELINE == 0, "worker size");
_Static_assert(sizeof(struct mely__rt) % MELY__CACHELINE == 0, "runtime size");

/* The worker the calling thread is, or NULL; set for the duration of mely_run()
 * (self.c). */
extern _Thread_local struct mely__worker *mely__self __attribute__((tls_model("initial-exec")));

/* The color of the handler running on this thread, or -1. */
extern _Thread_local int mely__current_color __attribute__((tls_model("initial-exec")));

/* The calling thread's worker if it belongs to rt, else NULL. */
static inline struct mely__worker *mely__self_in(const struct mely__rt *rt)
{
    struct mely__worker *w = mely__self;
    return w && w->rt == rt ? w : NULL;
}

static inline bool mely__stopping(const struct mely__rt *rt)
{
    return atomic_load_explicit((atomic_bool *)&rt->stopping, memory_order_relaxed);
}

static inline struct mely__colorq *mely__cq_of(const struct mely__rt *rt, mely_color_t color)
{
    return atomic_load_explicit(&rt->cq_of[color], memory_order_acquire);
}

#endif
