/* SPDX-License-Identifier: MIT */
/*
 * handle.h: a mely_t against the calls that race its life cycle.
 *
 * Two misuses that used to corrupt memory are caught here (handle.c):
 *  - mely_init() on a handle that is already live: live runtimes are kept
 *    in a registry, so the second init is refused (MELY_EBUSY) instead of
 *    leaking the first runtime and dropping its events uncounted.
 *  - mely_shutdown() while another thread is inside a call on the same
 *    handle (a late foreign poster): the call would use freed memory.
 *
 * The second is a grace period. Every public call that takes a mely_t from a
 * thread that is not one of the runtime's own workers enters by raising one
 * process-wide counter, then reads m->rt; mely_shutdown() clears m->rt first,
 * raises `draining`, and waits until the counter reads zero before it frees
 * anything. All of it is sequentially consistent, so either the caller reads
 * NULL (and returns MELY_ESHUTDOWN), or shutdown sees its count and waits for
 * it to leave. Callers that arrive while a shutdown drains wait for the drain
 * to end rather than count themselves in, so the wait always ends (3 threads
 * calling in a loop starved it under valgrind). A handler of the runtime itself skips the counter: a runtime
 * cannot be shut down while its handlers run (mely_shutdown says MELY_EBUSY),
 * so the hot path, a handler's post, costs one thread-local load more.
 *
 * Who may call: mely__handle_enter/leave from every public entry point;
 * the rest only from runtime.c (init and shutdown).
 */
#ifndef MELY_HANDLE_H
#define MELY_HANDLE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mely/runtime.h"

/* Calls in progress from threads that are not workers of the runtime they
 * call, and shutdowns waiting for them to drain (handle.c). */
extern _Atomic unsigned long mely__foreign_calls;
extern _Atomic unsigned mely__draining;

/* Waits out a drain in progress (handle.c). */
void mely__handle_wait_drain(void);

/* Counts the caller in. While a shutdown drains, newcomers wait for it to
 * end instead: otherwise threads calling without pause would keep the count
 * above zero and starve the shutdown. */
static inline void mely__handle_count_in(void)
{
    for (;;) { /* bounded: once per drain that overlaps the call */
        atomic_fetch_add(&mely__foreign_calls, 1);
        if (!atomic_load(&mely__draining))
            return;
        atomic_fetch_sub(&mely__foreign_calls, 1);
        mely__handle_wait_drain();
    }
}

/* The runtime of *m for the length of one call, or NULL (not initialized,
 * or shut down). *self is the calling thread's worker if it belongs to that
 * runtime (no grace period: what mely__self_in() would say), else NULL. A
 * non-NULL result must be given back with mely__handle_leave(*self). */
static inline struct mely__rt *mely__handle_enter(const mely_t *m, struct mely__worker **self)
{
    *self = NULL;
    if (!m)
        return NULL;
    struct mely__rt *rt = __atomic_load_n(&m->rt, __ATOMIC_RELAXED);
    struct mely__worker *w = mely__self;
    if (rt && w && w->rt == rt) {
        *self = w;
        return rt;
    }
    mely__handle_count_in();
    rt = __atomic_load_n(&m->rt, __ATOMIC_SEQ_CST);
    if (!rt)
        atomic_fetch_sub(&mely__foreign_calls, 1);
    return rt;
}

/* Ends the call mely__handle_enter() began and returned non-NULL for. */
static inline void mely__handle_leave(const struct mely__worker *self)
{
    if (!self)
        atomic_fetch_sub(&mely__foreign_calls, 1);
}

/* Ends the call and passes its result on: `return rt ? mely__handle_done(self,
 * call(rt, ...)) : MELY_ESHUTDOWN;` is the shape of every guarded entry point
 * (the call is evaluated first, inside the grace period). */
static inline int mely__handle_done(const struct mely__worker *self, int ret)
{
    mely__handle_leave(self);
    return ret;
}

/* A handle on rt for the runtime's own calls of its public API (listeners,
 * streams, drains): it bypasses nothing, the calls still take the grace
 * period. */
static inline mely_t mely__handle_of(struct mely__rt *rt)
{
    return (mely_t){ .rt = rt };
}

/* Publishes rt in *m and the registry: 0, or MELY_EBUSY (and nothing done)
 * when *m already holds a live runtime. */
int mely__handle_publish(mely_t *m, struct mely__rt *rt);

/* Whether *m holds a live runtime (read before building a new one). */
bool mely__handle_live(const mely_t *m);

/* Clears *m, then waits until no foreign call can still use its runtime.
 * The caller (a shutdown that claimed the runtime) must have left its own
 * entry first. */
void mely__handle_retire(mely_t *m);

/* Puts rt back in *m (a shutdown that found the runtime running after all). */
void mely__handle_restore(mely_t *m, struct mely__rt *rt);

/* Takes rt out of the registry, just before it is freed. */
void mely__handle_forget(struct mely__rt *rt);

/* Calls fn(rt) for each live runtime, under the registry's lock (fn must not
 * init or shut down a runtime). For MELY_STATS's exit handler (stats.c). */
void mely__handle_each_live(void (*fn)(struct mely__rt *rt));

#endif
