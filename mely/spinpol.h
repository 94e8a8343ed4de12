/*
 * spinpol.h: the spin policy: how long an idle worker spins before it parks.
 *
 * A spin pays when work comes while it lasts and nobody else needs the CPU:
 * it then saves a park and a wake-up (15-30 us on a KVM guest). It costs when
 * it ends empty-handed (the CPU burned for nothing), and when it keeps the
 * CPU from a thread that wants it: on a server's small machine that thread is
 * often its client (SWS beside its injector, an RPC server beside its
 * client: with a fixed 50 us spin, one RPC connection made 7 k round trips/s
 * against 65 k without spinning). So each worker keeps:
 *
 *  - a window, the length of its next spin, between 0 and spin_us. It starts
 *    at spin_us (a fresh runtime behaves as before). A spin that ends empty
 *    and is followed by a long park (no work within spin_us) halves it: the
 *    spin would not have caught that work. A park that ends within spin_us
 *    doubles it, from SPINPOL_START_NS when it was 0: a spin would have
 *    caught that work. A spin that finds work leaves it alone. (KVM's
 *    adaptive halt-polling grows and shrinks its poll time by the same rule.)
 *  - contention: the spinner reads the clock between short steps (a yield,
 *    or 32 pauses: under a microsecond each). A step that took longer than
 *    SPINPOL_TAKEN_NS means the CPU was given to another thread (a yield
 *    that ran someone else, or a preemption): somebody wants this CPU, and
 *    spinning takes it from them. The spin ends and the window drops to 0,
 *    to grow back through short parks as above (holding it at 0 for 16
 *    rounds instead made a ping-pong beside other processes' builds park
 *    at 1-2% of its hops instead of 0.03%, for 1.2-1.4x its time).
 *  - credit: spins are paid from a credit that grows by a tenth of every
 *    park's length, capped at two windows, so that spinning stays under a
 *    tenth of the idle time however the window moves. A spin that finds
 *    work is not charged when nobody else wanted the CPU meanwhile (it cost
 *    only the CPU's idle time, and saved a park and a wake-up: an RPC
 *    server on one CPU and its client on the other made 10 k round trips/s
 *    parking at every request, against 15-23 k spinning), nor when it found
 *    work within SPINPOL_CHEAP_NS (a ping-pong between two workers finds its
 *    work within a microsecond or two, and must not park at every hop). It
 *    is charged when it found work only after the CPU had gone to another
 *    thread: SWS beside its injector found work in most of its spins, 10-50
 *    us long, yielding to the injector all along, and served 37-46 k
 *    requests/s so; parking at once it served 76-82 k (the injector ran in
 *    long stretches, and each wake-up found a batch of requests).
 *
 * Prior art: Go's scheduler limits spinning threads to half the busy ones;
 * Tokio lets one searching worker in two look; Seastar polls idle for
 * --idle-poll-time-us. Here the measure is the worker's own recent past.
 *
 * Who may call: the worker's own thread (the state is its own).
 */
#ifndef MELY_SPINPOL_H
#define MELY_SPINPOL_H

#include <stdbool.h>
#include <stdint.h>

/* A window grows from 0 to this, then doubles. */
#define SPINPOL_START_NS 2000u
/* A spin that finds work sooner costs nothing (see above). */
#define SPINPOL_CHEAP_NS 5000u
/* A step between two clock reads longer than this: the CPU went to another
 * thread (an uncontended sched_yield costs 0.4 us on this project's KVM
 * guests; 32 pauses about 0.8 us). */
#define SPINPOL_TAKEN_NS 10000u

struct mely__spinpol {
    uint32_t max_ns;    /* spin_us, in ns */
    uint32_t window_ns; /* the next spin's length */
    int64_t credit_ns;  /* empty spin this worker may still afford */
};

enum mely__spin_end {
    MELY__SPIN_FOUND, /* work came */
    MELY__SPIN_HANDED, /* work came, after the CPU had gone to another thread */
    MELY__SPIN_EMPTY, /* the spin lasted its length */
    MELY__SPIN_TAKEN, /* the CPU went to another thread */
};

static inline void mely__spinpol_init(struct mely__spinpol *p, unsigned spin_us)
{
    uint64_t max = (uint64_t)spin_us * 1000u;
    p->max_ns = max > UINT32_MAX / 4 ? UINT32_MAX / 4 : (uint32_t)max;
    p->window_ns = p->max_ns;
    p->credit_ns = 2 * (int64_t)p->max_ns;
}

/* The length of the spin this idle round may take (0: none). */
static inline uint64_t mely__spinpol_length(struct mely__spinpol *p)
{
    if (p->credit_ns <= 0)
        return 0;
    return p->window_ns < (uint64_t)p->credit_ns ? p->window_ns : (uint64_t)p->credit_ns;
}

/* A spin of spun_ns ended. */
static inline void mely__spinpol_spun(struct mely__spinpol *p, enum mely__spin_end end,
                                      uint64_t spun_ns)
{
    if (end == MELY__SPIN_FOUND || (end == MELY__SPIN_HANDED && spun_ns < SPINPOL_CHEAP_NS))
        return;
    p->credit_ns -= (int64_t)spun_ns;
    if (end == MELY__SPIN_TAKEN)
        p->window_ns = 0;
}

/* A park of slept_ns ended; spun: a spin came before it (an empty one). */
static inline void mely__spinpol_parked(struct mely__spinpol *p, bool spun, uint64_t slept_ns)
{
    int64_t cap = 2 * (int64_t)p->max_ns;
    p->credit_ns += (int64_t)(slept_ns / 10);
    if (p->credit_ns > cap)
        p->credit_ns = cap;
    if (slept_ns < p->max_ns) {
        uint64_t grown = p->window_ns ? 2 * (uint64_t)p->window_ns : SPINPOL_START_NS;
        p->window_ns = grown < p->max_ns ? (uint32_t)grown : p->max_ns;
    } else if (spun) {
        p->window_ns = p->window_ns / 2 < SPINPOL_START_NS ? 0 : p->window_ns / 2;
    }
}

#endif
