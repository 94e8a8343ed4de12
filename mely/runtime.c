/* SPDX-License-Identifier: MIT */
/*
 * runtime.c: the life cycle of a runtime: init, run, stop, shutdown.
 *
 * Shutdown steps: mely_stop() raises `stopping` and wakes parked workers; each
 * worker finishes its handler and leaves its loop; mely_run() joins workers
 * 1..n-1, clears `stopping` and returns; mely_shutdown() (never while running)
 * counts and drops the events still queued and frees every slab, the color-queue
 * table and the workers.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "mely/remote/colormap.h"
#include "mely/config.h"
#include "mely/steal/cost.h"
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/core/park.h"
#include "mely/sched/placement.h"
#include "mely/runtime.h"
#include "mely/observe/stats.h"
#include "mely/steal/steal.h"
#include "mely/topology/topology.h"
#include "mely/observe/trace.h"
#include "mely/core/log.h"

static void worker_init(struct mely__worker *w, struct mely__rt *rt, unsigned index, int cpu)
{
    memset(w, 0, sizeof(*w));
    w->wake_fd = -1; /* none yet: rt_free closes only what exists */
    mely__spin_init(&w->lock);
    mely__spin_init(&w->foreign_lock);
    atomic_init(&w->parked, false);
    atomic_init(&w->post_seq, 0);
    mely__coreq_init(&w->coreq);
    atomic_init(&w->nevents, 0);
    atomic_init(&w->wake_seq, 0);
    w->sample_rng = 0x9e3779b97f4a7c15ull * (index + 1); /* any non-zero seed */
    w->rt = rt;
    w->index = index;
    w->cpu = cpu;
    mely__spinpol_init(&w->spinpol, rt->spin_us);
    w->observed = rt->cost.measure;
}

/* Frees whatever part of rt exists: every init step below may fail. */
static void rt_free(struct mely__rt *rt)
{
    /* A trace still on is written, as by mely_trace_stop(). */
    int64_t traced = rt->tracer ? mely__trace_stop(rt) : 0;
    if (traced < 0)
        mely__log(MELY_LOG_ERROR, "the trace could not be written: %s", mely_strerror((int)traced));
    mely__io_free(rt); /* before the wake-up eventfds its bases watch */
    if (rt->workers)
        mely__park_free(rt);
    pthread_mutex_destroy(&rt->trace_mu);
    rt->engine->fini(rt);
    for (unsigned i = 0; rt->workers && i < rt->nworkers; i++)
        free(rt->workers[i].steal_order);
    mely__pools_free(rt);
    mely__depot_destroy(&rt->depot);
    if (rt->topo)
        mely__topo_free(rt->topo);
    free(rt->cq_of);
    free(rt->costtab);
    free(rt->workers);
    free(rt);
}

/* The resolved settings that fit in rt itself: sizes, engine, policy. */
static void rt_configure(struct mely__rt *rt, const struct mely__settings *s)
{
    rt->nworkers = s->workers;
    rt->batch = s->batch;
    rt->spin_us = s->spin_us;
    rt->stall_ms = s->stall_ms;
    rt->engine = s->engine;
    if (s->stealing) {
        rt->steal_ops = s->steal;
        memcpy(rt->steal_name, s->steal_name, sizeof(rt->steal_name));
        rt->steal_ops.name = rt->steal_name;
        rt->steal = &rt->steal_ops;
        rt->cost.track = true;
        rt->cost.penalty = s->steal.penalty;
        rt->cost.measure = s->steal.measure;
    }
    mely__steal_init(rt);
    atomic_init(&rt->nparked, 0);
    rt->oversubscribed = !s->pin || s->workers > s->ncpus;
    atomic_init(&rt->stopping, false);
    atomic_init(&rt->running, false);
    atomic_init(&rt->budget_hit, false);
    mely__depot_budget(&rt->depot, s->event_budget_mb, s->workers);
}

/* The workers and the runtime's tables: MELY_ENOMEM. */
static int rt_alloc(struct mely__rt *rt, const struct mely__settings *s)
{
    rt->workers = aligned_alloc(MELY__CACHELINE, s->workers * sizeof(struct mely__worker));
    if (!rt->workers)
        return MELY_ENOMEM;
    for (unsigned i = 0; i < s->workers; i++)
        worker_init(&rt->workers[i], rt, i, mely__config_cpu(s, i));
    rt->cq_of = calloc(MELY_COLORS + s->workers, sizeof(*rt->cq_of));
    if (rt->cost.measure)
        rt->costtab = calloc(1, sizeof(*rt->costtab));
    if (!rt->cq_of || (rt->cost.measure && !rt->costtab))
        return MELY_ENOMEM;
    for (unsigned i = 0; i < s->workers; i++) {
        rt->workers[i].steal_order = calloc(s->workers, sizeof(unsigned));
        if (!rt->workers[i].steal_order)
            return MELY_ENOMEM;
    }
    return 0;
}

/* The cache map of the workers' CPUs (topology.h): MELY_ENOMEM. */
static int rt_topology(struct mely__rt *rt, const struct mely__settings *s)
{
    int cpus[MELY_MAX_WORKERS];

    for (unsigned i = 0; i < s->workers; i++)
        cpus[i] = rt->workers[i].cpu;
    rt->topo = mely__topo_build(cpus, s->workers, s->topo_source);
    return rt->topo ? 0 : MELY_ENOMEM;
}

/* MELY_TRACE=path: trace from now on (trace.h); an unusable path fails init. */
static int rt_trace_env(struct mely__rt *rt)
{
    const char *path = getenv("MELY_TRACE");
    if (!path || !*path)
        return 0;
    int err = mely__trace_start(rt, path);
    if (err)
        mely__log(MELY_LOG_ERROR, "MELY_TRACE=\"%s\": %s", path, mely_strerror(err));
    return err;
}

/* Everything a runtime holds, in dependency order: 0 or the first error. */
static int rt_build(struct mely__rt *rt, const struct mely__settings *s)
{
    int err;

    rt_configure(rt, s);
    if ((err = rt_alloc(rt, s)) != 0 || (err = rt_topology(rt, s)) != 0 ||
        (err = rt->engine->init(rt)) != 0 || (err = mely__park_init(rt)) != 0 ||
        (err = mely__io_init(rt)) != 0)
        return err;
    mely__colormap_init(rt);
    return rt_trace_env(rt);
}

/* At exit(), for each runtime still live: its trace and its statistics, as
 * mely_shutdown() would write them. Every legacy program ends so (amain()
 * never returns), often from a handler while the other workers still run:
 * both writers allow it. */
static void runtime_at_exit(struct mely__rt *rt)
{
    mely__trace_at_exit(rt);
    mely__stats_at_end(rt);
}

static void at_exit(void)
{
    mely__handle_each_live(runtime_at_exit);
}

static void install_exit_handler(void)
{
    /* Without it, only programs that end with exit() miss their tables and
     * traces: never worth failing an init for. */
    if (atexit(at_exit) != 0)
        mely__log(MELY_LOG_WARN, "no exit handler: MELY_STATS and traces are written at shutdown only");
}

/* glibc's heap trim threshold raised (mely.h, keep_malloc), unless the
 * environment chose one: glibc reads those at start, and mallopt has no
 * getter to tell. */
static void tune_malloc(void)
{
#ifdef __GLIBC__
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (!getenv("MALLOC_TRIM_THRESHOLD_") && !(tunables && strstr(tunables, "trim_threshold")))
        (void)mallopt(M_TRIM_THRESHOLD, (int)MELY_TRIM_THRESHOLD);
#endif
}

int mely_init(mely_t *m, const mely_config_t *cfg)
{
    static pthread_once_t exit_handler = PTHREAD_ONCE_INIT;
    struct mely__settings s;
    int err;

    if (!m)
        return MELY_EINVAL;
    if (mely__handle_live(m))
        return MELY_EBUSY;
    if ((err = mely__config_resolve(cfg, &s)) != 0) {
        m->rt = NULL;
        return err;
    }

    /* Both structs hold cache-line-aligned members, so their sizes are
     * multiples of the alignment, as aligned_alloc() requires. */
    struct mely__rt *rt = aligned_alloc(MELY__CACHELINE, sizeof(*rt));
    if (!rt) {
        m->rt = NULL;
        return MELY_ENOMEM;
    }
    memset(rt, 0, sizeof(*rt));
    pthread_mutex_init(&rt->trace_mu, NULL);
    atomic_init(&rt->range_top, MELY_COLORS);
    mely__depot_init(&rt->depot);
    if ((err = rt_build(rt, &s)) != 0) {
        rt_free(rt);
        m->rt = NULL;
        return err;
    }
    if ((err = mely__handle_publish(m, rt)) != 0) { /* a concurrent init won */
        rt_free(rt);
        return err;
    }
    pthread_once(&exit_handler, install_exit_handler);
    /* A write to a closed socket must return EPIPE to the server, not kill
     * it; a program that wants the signal says so (keep_sigpipe). */
    if (!s.keep_sigpipe)
        signal(SIGPIPE, SIG_IGN);
    if (!s.keep_malloc)
        tune_malloc();
    return 0;
}

int mely_run(mely_t *m)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    /* Not from a handler of this or another runtime; once `running` is
     * set, mely_shutdown() refuses, so the grace period can end here. */
    bool busy = mely__self || atomic_exchange(&rt->running, true);
    mely__handle_leave(self);
    if (busy)
        return MELY_EBUSY;

    int err = 0;
    if (!mely__stopping(rt)) {
        mely__stall_start(rt);
        err = mely__workers_run(rt);
        mely__stall_stop(rt);
    }

    atomic_store(&rt->stopping, false);
    atomic_store(&rt->running, false);
    return err;
}

int mely_on_idle(mely_t *m, mely_fn_t fn, void *arg)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    int err = atomic_load(&rt->running) ? MELY_EBUSY : 0;
    if (!err) {
        rt->idle_fn = fn;
        rt->idle_arg = arg;
    }
    mely__handle_leave(self);
    return err;
}

int mely_stop(mely_t *m)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    mely__request_stop(rt);
    mely__handle_leave(self);
    return 0;
}

/* Events still queued, timers' excepted (mely.h); called when no worker runs. */
static int count_pending(const struct mely__rt *rt)
{
    size_t n = rt->engine->pending(rt) - mely__io_timers_queued(rt);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

/* Claims rt for one shutdown and waits out the foreign calls on it: 0, or
 * MELY_EBUSY (rt is running, or another shutdown has it) with *m unchanged. */
static int retire(mely_t *m, struct mely__rt *rt, const struct mely__worker *self)
{
    int busy = self || atomic_load(&rt->running) || atomic_exchange(&rt->closing, true);
    mely__handle_leave(self); /* claimed (closing): no other shutdown frees rt */
    if (busy)
        return MELY_EBUSY;
    mely__handle_retire(m);
    if (atomic_load(&rt->running)) { /* a mely_run() that entered before */
        mely__handle_restore(m, rt);
        atomic_store(&rt->closing, false);
        return MELY_EBUSY;
    }
    return 0;
}

int mely_shutdown(mely_t *m)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    int err = retire(m, rt, self); /* also ends the call's own entry */
    if (err)
        return err;
    mely__stats_at_end(rt);
    int discarded = count_pending(rt);
    mely__handle_forget(rt);
    rt_free(rt);
    return discarded;
}
