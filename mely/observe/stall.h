/* SPDX-License-Identifier: MIT */
/*
 * stall.h: stall warnings. A handler that computes for longer than
 * MELY_STALL_MS holds up every other color of its worker; a monitor thread
 * (stall.c), one per mely_run(), notices it while it still runs and says so
 * through the log hook (log.h), once per run, at most a few lines a second.
 *
 * What counts is the CPU time the worker's thread spent in the run, not the
 * wall time: on a loaded machine a worker that the kernel descheduled in a
 * handler of 25-100 us of CPU was reported as a handler that "has run for"
 * 57-960 ms (issue 26). The price: a handler that blocks (sleeps, waits for
 * a lock, a condition, a synchronous read) holds its worker up as much, and
 * is not warned about either, since its thread uses no CPU meanwhile. The
 * warning says both times. The monitor reads the worker thread's CPU clock
 * (pthread_getcpuclockid, which the worker publishes when it starts:
 * mely__stall_thread), a system call, only for a run that lasts: stall.c
 * says when.
 *
 * The worker's whole share is one store per handler and one per batch, to
 * a cache line only it writes, which the monitor reads every MELY_STALL_MS/4
 * (bounded): a word that names the running handler and numbers its run
 * (mely__stall_begin), and, once the batch is over, the number alone
 * (mely__stall_end). No clock is read on the worker: the monitor times a
 * run from its own ticks, so it underestimates both times and a warning is
 * never early; for a handler that computes without a pause, it comes
 * between one and two periods after MELY_STALL_MS of CPU (stall.c). (A TSC
 * read around each handler cost local post+run 45%: 14.5 to 21.1 ns an
 * event; three stores, a sequence number before and after each handler and
 * the handler apart, cost 0.5 ns, 3%.)
 *
 * The word: (run number << 48) | (MELY__STALL_DESC if the handler is a
 * descriptor) | the descriptor's or function's address. User-space code and
 * data lie below 2^47 on x86-64 (and arm64 with 48-bit addresses); a handler
 * above that is stored as MELY__STALL_DESC alone and named as unknown. The
 * run number has 16 bits: a warning needs the same run number at every tick
 * for MELY_STALL_MS, at least four ticks, so a flood of handlers that wraps
 * the number exactly between every two ticks is the only false warning,
 * and it does not happen by chance. Nothing else changes when no handler
 * is slow.
 *
 * Renaming a run (mely__stall_rename; runname.h has the callers' side). The
 * runtime's own dispatchers (an fd watch's watch_run, a timer's fire) run
 * the program's callback inside their handler; named by the event, every
 * such run would be the dispatcher's. The dispatcher stores the word again
 * just before the callback, with the same run number and the callback's
 * address: the monitor tells runs apart by their number alone, so a renamed
 * run is the same run, timed from the tick that first saw it and warned
 * about once, under the name the word holds when the warning is said. A
 * run renamed several times keeps the last name. The trace record of a run
 * takes its name from the word too (trace.h), after the handler returns.
 * The cost: a load of this line (the worker's own, in its cache) and a
 * store, per rename.
 */
#ifndef MELY_STALL_H
#define MELY_STALL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "mely/queue/event.h"

#define MELY__STALL_MS_DEFAULT 100
#define MELY__STALL_MS_MAX 3600000 /* an hour */

struct mely__stall_word {
    _Atomic uint64_t word; /* the run (above), or its number alone when none */
    _Atomic int color;     /* the color being run (set per batch) */
    /* The worker thread's CPU clock, valid while cpu_ok: written by the
     * worker before it sets cpu_ok (release), read by the monitor after it
     * sees cpu_ok (acquire); once per mely_run(), not per handler. */
    clockid_t cpu_clock;
    _Atomic bool cpu_ok;
};

#define MELY__STALL_RUN_SHIFT 48
#define MELY__STALL_DESC (1ull << 47)          /* the handler is a descriptor */
#define MELY__STALL_ADDR (MELY__STALL_DESC - 1) /* its address */
#define MELY__STALL_RUNNING ((1ull << MELY__STALL_RUN_SHIFT) - 1) /* 0: none runs */

struct mely__rt;
struct mely__stall_monitor;

/* The worker's thread, before a batch (or a handler) of `color`; returns
 * the run number to pass to the batch's mely__stall_begin and _end (the
 * worker keeps it in a register). */
static inline uint64_t mely__stall_batch(struct mely__stall_word *s, int color)
{
    atomic_store_explicit(&s->color, color, memory_order_relaxed);
    return atomic_load_explicit(&s->word, memory_order_relaxed) & ~MELY__STALL_RUNNING;
}

/* The handler part of a word (above): desc if not NULL, else fn. */
static inline uint64_t mely__stall_handler(const mely_handler_t *desc, const void *fn)
{
    uintptr_t a = desc ? (uintptr_t)desc : (uintptr_t)fn;
    return (a & ~MELY__STALL_ADDR) ? MELY__STALL_DESC
                                   : (uint64_t)a | (desc ? MELY__STALL_DESC : 0);
}

/* The worker's thread, before ev's handler: a new run. */
static inline void mely__stall_begin(struct mely__stall_word *s, const struct mely__event *ev,
                                     uint64_t *run)
{
    uint64_t h = mely__stall_handler(ev->desc, (const void *)ev->fn);
    *run += 1ull << MELY__STALL_RUN_SHIFT;
    /* Release (a plain store on x86): a monitor that sees this word also
     * sees the batch's color. */
    atomic_store_explicit(&s->word, *run | h, memory_order_release);
}

/* The worker's thread: the running handler is desc's (if not NULL), else
 * fn's, from now on (the renaming above). The run number stays: it is
 * reread from the word, which only this thread writes. Outside a handler
 * (no run in the word) it does nothing: no run is made up. */
static inline void mely__stall_rename(struct mely__stall_word *s, const mely_handler_t *desc,
                                      const void *fn)
{
    uint64_t word = atomic_load_explicit(&s->word, memory_order_relaxed);
    if (!(word & MELY__STALL_RUNNING))
        return;
    /* Release, as mely__stall_begin's. */
    atomic_store_explicit(&s->word, (word & ~MELY__STALL_RUNNING) | mely__stall_handler(desc, fn),
                          memory_order_release);
}

/* The worker's thread, after a handler of its own: the descriptor (*desc)
 * or function the run was last named by, or NULL if the word cannot say
 * (a handler above the 47-bit address space). */
static inline const void *mely__stall_named(const struct mely__stall_word *s, bool *desc)
{
    uint64_t h = atomic_load_explicit((_Atomic uint64_t *)&s->word, memory_order_relaxed);
    *desc = h & MELY__STALL_DESC;
    return (const void *)(uintptr_t)(h & MELY__STALL_ADDR);
}

/* The worker's thread, after the batch's last handler: none runs. */
static inline void mely__stall_end(struct mely__stall_word *s, uint64_t run)
{
    atomic_store_explicit(&s->word, run, memory_order_release);
}

/* The worker's thread, as it starts its loop (running true) and as it
 * leaves it (false): publishes (withdraws) its CPU clock for the monitor.
 * Without one (pthread_getcpuclockid failed) the monitor judges by wall
 * time, and says so. */
void mely__stall_thread(struct mely__stall_word *s, bool running);

/* A handler's name for people: its descriptor's name, else "descriptor
 * ADDR"; else fn's symbol (dladdr: exported functions, and a program's own
 * when linked with -rdynamic), else its symbol in its object's .symtab
 * (static functions: symtab.h), else "OBJECT+OFFSET" (a stripped object:
 * addr2line names it where debugging information is kept), else its address. Returns desc->name, a symbol's
 * name or buf. Any thread (stall warnings, trace files). */
const char *mely__handler_name(const mely_handler_t *desc, const void *fn, char *buf, size_t len);

/* Starts rt's monitor if rt->stall_ms is not 0 (mely_run(), before the
 * workers). A monitor that cannot start is reported and skipped: stall
 * warnings are never worth refusing to run. */
void mely__stall_start(struct mely__rt *rt);

/* Stops and joins rt's monitor, if any (mely_run(), after the workers). */
void mely__stall_stop(struct mely__rt *rt);

#endif /* MELY_STALL_H */
