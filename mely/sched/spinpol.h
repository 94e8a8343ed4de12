/* SPDX-License-Identifier: MIT */
/*
 * spinpol.h: the spin policy: how long an idle worker spins before it parks.
 *
 * A spin pays when work comes while it lasts and nobody else needs the CPU:
 * it then saves a park and a wake-up (15-30 us on a KVM guest). It costs when
 * it ends empty-handed with no work for a long while (the CPU burned for
 * nothing), and when it keeps the CPU from a thread that wants it: on a
 * server's small machine that thread is often its client (SWS beside its
 * injector served 37-46 k requests/s with a fixed 50 us spin, 76-82 k
 * parking at once). So each worker keeps:
 *
 *  - a window, the length of its next spin, between 0 and spin_us. It starts
 *    at spin_us (a fresh runtime behaves as before). A park that ends within
 *    spin_us doubles it, from SPINPOL_START_NS when it was 0: a longer spin
 *    would have caught that work. A park's length includes its wake-up, so
 *    "within spin_us" allows SPINPOL_WAKE_NS more. A spin that ends empty
 *    and is followed by a long park halves it: the spin could not have
 *    caught that work. A spin that finds work leaves it alone. (KVM's
 *    adaptive halt-polling grows and shrinks its poll time by this rule.)
 *  - contention: the spinner reads the clock between short steps (a yield,
 *    or 32 pauses: under a microsecond each). A step longer than
 *    SPINPOL_TAKEN_NS, a scheduler's time slice, means the CPU went to a
 *    thread that used all of its slice: one busy with its own work (a
 *    build, a CPU hog), not a peer that feeds this worker and soon waits
 *    for it. Spinning then takes the CPU from that thread, and each yield
 *    gives it a whole slice while work waits here: the spin ends and the
 *    window drops to 0, to grow back through short parks. Shorter steps
 *    are the yields a spinner is for: the CPU handed to the peer (SWS's
 *    injector, an RPC client on the same CPU) and back, with no wake-up.
 *  - credit, which pays for spins that cost: those that ended empty before
 *    a long park, those whose CPU was taken, and those that found work only
 *    after such a step (the work came while a busy thread had the CPU).
 *    The credit grows by a tenth of every park's length, capped at two
 *    windows, so that such spinning stays within a tenth of the time
 *    parked. Free: a spin that found work otherwise (it cost only idle time
 *    or handed the CPU to its peer, and saved a park and a wake-up: a
 *    ping-pong between two workers finds its work within a microsecond or
 *    two, and must not park at every hop; an RPC server with its client on
 *    the other CPU made 10 k round trips/s parking at every request, 15-23
 *    k spinning; SWS beside its injector on a quiet machine served 145 k
 *    requests/s spinning, 95-99 k parking at once), and an empty spin
 *    followed by a short park (the window was short of the work, not the
 *    work absent). Charged for these too, a ping-pong beside other
 *    processes' builds fell into parking on both sides at every hop: each
 *    spin, shorter than the other side's wake-up, ended empty and drained
 *    the credit. Beside two other processes' builds, where each yield gave
 *    a build a slice, a fixed 50 us spin made SWS serve 23-37 k requests/s,
 *    and parking 76-82 k.
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
/* What a wake-up may add to a park's length: 15-30 us on an idle KVM guest,
 * more beside load. */
#define SPINPOL_WAKE_NS 50000u
/* A step between two clock reads longer than this: the CPU went to a thread
 * that used a whole time slice (Linux's EEVDF gives 0.75 ms by default; an
 * uncontended sched_yield costs 0.4 us on this project's KVM guests, 32
 * pauses about 0.8 us, a yield to a peer that soon blocks tens of us). */
#define SPINPOL_TAKEN_NS 500000u

struct mely__spinpol {
    uint32_t max_ns;    /* spin_us, in ns */
    uint32_t window_ns; /* the next spin's length */
    int64_t credit_ns;  /* costly spinning this worker may still afford */
    uint64_t empty_ns;  /* the last spin, if it ended empty: charged if a
                           long park follows it */
};

enum mely__spin_end {
    MELY__SPIN_FOUND,  /* work came */
    MELY__SPIN_HANDED, /* work came, after a step in which a busy thread
                          had the CPU (SPINPOL_TAKEN_NS) */
    MELY__SPIN_EMPTY,  /* the spin lasted its length */
    MELY__SPIN_TAKEN,  /* the CPU went to another thread, and no work came */
};

static inline void mely__spinpol_init(struct mely__spinpol *p, unsigned spin_us)
{
    uint64_t max = (uint64_t)spin_us * 1000u;
    p->max_ns = max > UINT32_MAX / 4 ? UINT32_MAX / 4 : (uint32_t)max;
    p->window_ns = p->max_ns;
    p->credit_ns = 2 * (int64_t)p->max_ns;
    p->empty_ns = 0;
}

/* The length of the spin this idle round may take (0: none). */
static inline uint64_t mely__spinpol_length(struct mely__spinpol *p)
{
    p->empty_ns = 0; /* work came after the last spin, with no park: free */
    if (p->credit_ns <= 0)
        return 0;
    return p->window_ns < (uint64_t)p->credit_ns ? p->window_ns : (uint64_t)p->credit_ns;
}

/* A spin of spun_ns ended. */
static inline void mely__spinpol_spun(struct mely__spinpol *p, enum mely__spin_end end,
                                      uint64_t spun_ns)
{
    switch (end) {
    case MELY__SPIN_FOUND:
        return;
    case MELY__SPIN_HANDED:
        p->credit_ns -= (int64_t)spun_ns;
        p->window_ns = 0;
        return;
    case MELY__SPIN_EMPTY:
        p->empty_ns = spun_ns; /* the park that follows decides */
        return;
    case MELY__SPIN_TAKEN:
        p->credit_ns -= (int64_t)spun_ns;
        p->window_ns = 0;
        return;
    }
}

/* A park of slept_ns ended (0: the worker found work as it parked). */
static inline void mely__spinpol_parked(struct mely__spinpol *p, uint64_t slept_ns)
{
    int64_t cap = 2 * (int64_t)p->max_ns;
    bool soon = slept_ns < (uint64_t)p->max_ns + SPINPOL_WAKE_NS;
    if (p->max_ns && soon) {
        uint64_t grown = p->window_ns ? 2 * (uint64_t)p->window_ns : SPINPOL_START_NS;
        p->window_ns = grown < p->max_ns ? (uint32_t)grown : p->max_ns;
    } else if (!soon && p->empty_ns) {
        p->credit_ns -= (int64_t)p->empty_ns;
        p->window_ns = p->window_ns / 2 < SPINPOL_START_NS ? 0 : p->window_ns / 2;
    }
    p->empty_ns = 0;
    p->credit_ns += (int64_t)(slept_ns / 10);
    if (p->credit_ns > cap)
        p->credit_ns = cap;
}

#endif
