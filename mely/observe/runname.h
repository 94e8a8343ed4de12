/* SPDX-License-Identifier: MIT */
/*
 * runname.h: a run named by the program's callback, not by the runtime's
 * dispatcher that calls it.
 *
 * Stall warnings and traces name a handler's run by its event: its
 * descriptor or its function. The runtime's own dispatchers are such
 * functions: an fd or signal watch's readiness runs watch_run (io/watch.c),
 * a timer fire (io/timer.c), a listener's accept loop and a stream's
 * callbacks run inside watch_run, timers and events of their own. A
 * dispatcher calls mely__name_run() just before it calls the program's
 * function; from then until the handler returns the run is that function's
 * (or descriptor's), to the stall monitor and to the run's trace record:
 *
 *     mely__name_run(wt->to.handler, (const void *)wt->fn);
 *     wt->fn(wt->fd, ready, wt->arg);
 *
 * A descriptor the program gave (mely_to_t's handler) names the run as it
 * named the event: pass it, and the function is the name only without one.
 *
 * What the dispatcher does after the callback (re-arming a watch, say)
 * counts to the callback's run. A run named several times (a dispatcher
 * that calls several callbacks in one handler) keeps the last name. Call it
 * only where the runtime's own handler runs the callback: inside a handler
 * of the program (a callback the runtime runs synchronously from an API
 * call), it would take the program's handler's name away.
 *
 * The mechanism is the stall word's (stall.h, "Renaming a run"); the trace
 * reads the name from it after the handler (trace.h, mely__trace_run). Cost:
 * a thread-local load, a load of the worker's own stall line, a branch and
 * one store, whether or not the monitor runs or a trace records.
 *
 * Who may call: any thread. Outside a handler (a thread that is not a
 * worker, as a shutdown running closed callbacks; a worker's poll or idle
 * callback) it does nothing.
 */
#ifndef MELY_RUNNAME_H
#define MELY_RUNNAME_H

#include "mely/runtime.h"
#include "mely/observe/stall.h"

/* The running handler is desc's (if not NULL), else fn's, until it returns. */
static inline void mely__name_run(const mely_handler_t *desc, const void *fn)
{
    struct mely__worker *w = mely__self;
    if (w)
        mely__stall_rename(&w->stall, desc, fn);
}

#endif /* MELY_RUNNAME_H */
