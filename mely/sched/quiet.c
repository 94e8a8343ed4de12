/* SPDX-License-Identifier: MIT */
/*
 * quiet.c: seeing a runtime quiet (the argument: quiet.h).
 *
 * Who may call: mely__quiet_arm and _disarm from any thread;
 * mely__quiet_poll from an idle worker's own thread, without its lock.
 */
#include "mely/remote/outbox.h"
#include "mely/core/park.h"
#include "mely/sched/quiet.h"
#include "mely/runtime.h"

void mely__quiet_arm(struct mely__rt *rt, mely__quiet_fn fn)
{
    atomic_store(&rt->quiet_fn, fn);
    mely__wake_all(rt);
}

void mely__quiet_disarm(struct mely__rt *rt)
{
    atomic_store(&rt->quiet_fn, NULL);
}

/* One look at every worker, each under its lock: false if one has work
 * queued or held; else each one's count in seen[]. */
static bool look(struct mely__rt *rt, struct mely__worker *self, uint32_t *seen)
{
    for (unsigned i = 0; i < rt->nworkers; i++) { /* bounded: the workers */
        struct mely__worker *w = &rt->workers[i];
        mely__spin_lock(&w->lock, &self->ctr);
        bool idle = !(w->quiet_seq & 1u) &&
                    atomic_load_explicit(&w->nevents, memory_order_relaxed) == 0 &&
                    !rt->engine->in_flight(w);
        seen[i] = w->quiet_seq;
        mely__spin_unlock(&w->lock);
        if (!idle)
            return false;
    }
    return true;
}

static bool quiet(struct mely__rt *rt, struct mely__worker *self)
{
    uint32_t first[MELY_MAX_WORKERS], second[MELY_MAX_WORKERS];
    if (!look(rt, self, first) || !look(rt, self, second))
        return false;
    for (unsigned i = 0; i < rt->nworkers; i++)
        if (first[i] != second[i])
            return false;
    return true;
}

bool mely__quiet_poll(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;
    if (!atomic_load_explicit(&rt->quiet_fn, memory_order_relaxed) || !quiet(rt, w))
        return false;
    mely__quiet_fn fn = atomic_exchange(&rt->quiet_fn, NULL);
    if (!fn)
        return false; /* another worker saw it first */
    fn(rt);
    if (mely__outbox_pending(&w->outbox))
        mely__outbox_flush(w);
    return true;
}
