/* SPDX-License-Identifier: MIT */
/*
 * idle.c: what a worker with nothing to run does, in order: it reads its
 * poller, tries to steal, spins as long as the spin policy allows
 * (spinpol.h) watching for posts, reads its
 * poller and tries to steal again (work may have piled up elsewhere while it
 * spun), runs the idle hook (mely_on_idle), begins giving free event
 * memory back when a burst has left much of it unused (trim.c: a step of a
 * pass in progress takes the place of the spin, the steal, the hook and the
 * park), ends its turn (turnend.h: the
 * streams written by other colors, the hook's writes among them, send now,
 * so a worker that is idle for a moment between two waves of work, a broker
 * fed by another worker, sends once for both: 2 workers, 0.17-0.19 to
 * 0.15-0.16 us of CPU per delivery), looks whether the runtime is quiet when
 * a drain waits for that (quiet.h), and only then parks with nothing left of
 * its turn (park.c has the park/wake protocol, steps 1-4; this file is step
 * 1 and the calls of steps 2 and 4).
 *
 * Who may call: the worker's own thread, without its lock.
 */
#include <sched.h>

#include "mely/queue/cycles.h"
#include "mely/remote/enqueue.h"
#include "mely/sched/idle.h"
#include "mely/io/poller.h"
#include "mely/remote/outbox.h"
#include "mely/core/park.h"
#include "mely/sched/quiet.h"
#include "mely/steal/steal.h"
#include "mely/observe/trace.h"

/* Pauses between two reads of the clock while spinning (a yielding spin
 * reads it after every yield: spin()). */
enum { SPIN_CLOCK_EVERY = 32 };

/* A spinning worker with watches polls them this often (a non-blocking
 * epoll_wait costs well under a microsecond): readiness that arrives while
 * it spins waits at most this long, not the whole spin. */
#define SPIN_POLL_NS 10000u

static bool has_work(struct mely__worker *w)
{
    return atomic_load_explicit(&w->nevents, memory_order_relaxed) != 0 ||
           w->rt->engine->ready(w) || mely__stopping(w->rt);
}

/* Step 1: spins for `len` ns at most, and says how it ended. With more
 * workers than CPUs the spinner yields at every turn, so that a worker with
 * work gets the CPU; so does a worker with watches: a server shares its
 * cores with other processes (its clients, on a small machine), and a spin
 * that keeps the CPU from them costs more than it saves (bench/e2e/echo, 10
 * and 100 connections: 0.74x and 0.87x libevent spinning with pause, 1.05x
 * and 1.01x with sched_yield). How long it may last is the spin policy's
 * (spinpol.h), which also learns from each step's length whether another
 * thread wanted the CPU. *away: the length of a step in which a busy thread
 * had the CPU (it ends the spin), which the spin did not use.
 *
 * The spin overshoots `len` by SPIN_CLOCK_EVERY pauses (about a
 * microsecond) or by one yield at most, and a due timer ends it: has_work()
 * does not see timers, whose events only the poll after the spin posts. A
 * yield on a loaded CPU gives the CPU away for the rest of a time slice,
 * milliseconds, so a yielding spin reads the clock after every yield (a
 * clock read costs a fraction of the system call). Read every 32 yields, as
 * it is every 32 pauses, the clock let a 50 us spin last 0.3 s beside two
 * CPU hogs, with a 5 ms timer due all along: check_stream's
 * read_high_watermark_pauses, whose 64 drains each wait for such a timer,
 * outlasted its client's 10 s (check_stream's
 * timer_on_time_while_yields_are_slow makes every yield slow). */
static enum mely__spin_end spin(struct mely__worker *w, uint64_t start, uint64_t len,
                                uint64_t *away)
{
    uint64_t deadline = start + len, before = start;
    bool yield = w->rt->oversubscribed || mely__poller_watched(w);
    int clock_every = yield ? 1 : SPIN_CLOCK_EVERY;
    for (;;) {
        for (int i = 0; i < clock_every; i++) {
            if (has_work(w))
                return MELY__SPIN_FOUND;
            if (yield)
                sched_yield();
            else
                mely__cpu_relax();
        }
        uint64_t now = mely__now_ns();
        if (now - before > SPINPOL_TAKEN_NS) { /* a busy thread had the CPU */
            *away = now - before;
            if (!has_work(w) && mely__poller_watched(w))
                mely__poller_poll(w);
            return has_work(w) ? MELY__SPIN_HANDED : MELY__SPIN_TAKEN;
        }
        if (now >= deadline || mely__poller_timer_due(w, now))
            /* a due timer: the poll that follows posts it */
            return has_work(w) ? MELY__SPIN_FOUND : MELY__SPIN_EMPTY;
        if (now - mely__poller_last_ns(w) >= SPIN_POLL_NS && mely__poller_watched(w)) {
            mely__poller_poll(w);
            if (has_work(w))
                return MELY__SPIN_FOUND;
            now = mely__now_ns();
        }
        before = now;
    }
}

/* Steps 2 and 4 (park.c). The sleep ends at wake_by at the latest (a trim
 * window's end; UINT64_MAX: none). Its length teaches the spin policy
 * whether a longer spin would have caught the work. */
static void park(struct mely__worker *w, uint64_t wake_by)
{
    mely__spin_lock(&w->lock, &w->ctr);
    unsigned wake = w->rt->engine->take(w, w);
    if (atomic_load_explicit(&w->nevents, memory_order_relaxed) != 0 || mely__stopping(w->rt)) {
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, w, wake);
        mely__spinpol_parked(&w->spinpol, 0);
        return;
    }
    uint32_t seen = atomic_load_explicit(&w->wake_seq, memory_order_relaxed);
    bool sleep = mely__park_set(w);
    mely__spin_unlock(&w->lock);
    mely__enqueue_wake(w, w, wake);
    if (!sleep) {
        mely__spinpol_parked(&w->spinpol, 0);
        return;
    }

    mely__count(&w->ctr.parks, 1);
    uint64_t start = w->trace ? mely__cycles() : 0;
    uint64_t t0 = mely__now_ns();
    mely__poller_block(w, wake_by);
    uint64_t slept = mely__now_ns() - t0;
    mely__count(&w->ctr.park_ns, slept);
    mely__spinpol_parked(&w->spinpol, slept);
    mely__park_clear(w);
    bool woken = atomic_load_explicit(&w->wake_seq, memory_order_relaxed) != seen;
    if (woken)
        mely__count(&w->ctr.wakeups, 1);
    if (w->trace)
        mely__trace_note(w->trace, MELY__TR_PARK, start, mely__cycles() - start, 0, woken);
}

/* The spin the policy allows (spinpol.h), counted, and recorded when
 * tracing: the time a worker waits for work without sleeping, which a trace
 * would otherwise not tell from loop overhead. Returns true if work came. */
static bool policy_spin(struct mely__worker *w)
{
    uint64_t len = mely__spinpol_length(&w->spinpol);
    if (len == 0)
        return has_work(w);
    uint64_t c0 = w->trace ? mely__cycles() : 0;
    uint64_t t0 = mely__now_ns(), away = 0;
    enum mely__spin_end end = spin(w, t0, len, &away);
    uint64_t spun = mely__now_ns() - t0 - away; /* the time it had the CPU */
    mely__spinpol_spun(&w->spinpol, end, spun);
    mely__count(&w->ctr.spins, 1);
    mely__count(&w->ctr.spin_ns, spun);
    bool found = end == MELY__SPIN_FOUND || end == MELY__SPIN_HANDED;
    if (found)
        mely__count(&w->ctr.spins_found, 1);
    if (w->trace)
        mely__trace_note(w->trace, MELY__TR_SPIN, c0, mely__cycles() - c0, 0, found);
    return found;
}

static bool poll_now(struct mely__worker *w)
{
    mely__poller_poll(w);
    return has_work(w);
}

/* The idle hook (mely_on_idle); returns true if it posted work here. Its
 * posts to other workers leave before this one sleeps. */
static bool idle_hook(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;
    if (!rt->idle_fn)
        return false;
    rt->idle_fn(rt->idle_arg);
    if (mely__outbox_pending(&w->outbox))
        mely__outbox_flush(w);
    return has_work(w);
}

/* The end of an idle round that does not sleep: what the turn wrote leaves
 * (before any sleep, and between steps of a trim pass), and a waiting
 * drain looks for quiet. */
static void end_round(struct mely__worker *w)
{
    if (w->turn_end || w->batch_done) /* what the turn wrote leaves before sleeping */
        mely__poller_end_turn(w);
    (void)mely__quiet_poll(w);
}

/* A pass giving free event memory back is in progress (trim.c): a step of
 * it takes the place of the spin, the steal, the hook and the park; the
 * worker comes back here between steps, after a look at its queues. */
static __attribute__((noinline)) void idle_trimming(struct mely__worker *w)
{
    if (mely__trim_step(&w->rt->depot))
        end_round(w);
}

/* About to park: begins a trim window, or a pass when one is due
 * (trim.c). Returns 0 if a pass began (its first step done: the worker
 * comes back rather than park), else when the worker must wake to judge
 * the window it began (UINT64_MAX: no need). */
static uint64_t trim_idle(struct mely__worker *w)
{
    struct mely__depot *d = &w->rt->depot;
    /* The common case, a depot with little free, reads no clock. */
    if (atomic_load_explicit(&d->nfree, memory_order_relaxed) <= d->keep)
        return UINT64_MAX;
    return mely__trim_idle(d, w->index, mely__now_ns());
}

void mely__idle(struct mely__worker *w)
{
    if (poll_now(w) || mely__steal(w))
        return;
    if (__builtin_expect(mely__trim_passing(&w->rt->depot.trim), 0)) {
        idle_trimming(w);
        return;
    }
    if (policy_spin(w) || poll_now(w) || mely__steal(w) || idle_hook(w))
        return;
    uint64_t wake_by = trim_idle(w);
    if (__builtin_expect(wake_by == 0, 0)) { /* a pass began */
        end_round(w);
        return;
    }
    if (w->turn_end || w->batch_done) { /* what the turn wrote leaves before sleeping */
        mely__poller_end_turn(w);
        if (has_work(w))
            return;
    }
    if (mely__quiet_poll(w))
        return;
    park(w, wake_by);
}
