/* stats.c: introspection and statistics (any thread). */
#include <inttypes.h>
#include <stdio.h>

#include "mely/colormap.h"
#include "mely/runtime.h"

int mely_current_color(void)
{
    return mely__current_color;
}

int mely_current_worker(void)
{
    return mely__self ? (int)mely__self->index : -1;
}

unsigned mely_workers(const mely_t *m)
{
    return m && m->rt ? m->rt->nworkers : 0;
}

int mely_color_owner(const mely_t *m, mely_color_t color)
{
    const struct mely__rt *rt = m ? m->rt : NULL;

    if (!rt)
        return MELY_ESHUTDOWN;
    if (!mely__color_valid(rt, color))
        return MELY_ECOLOR;
    return (int)mely__owner(rt, color);
}

int mely_worker_stats(const mely_t *m, unsigned worker, mely_stats_t *out)
{
    const struct mely__rt *rt = m ? m->rt : NULL;

    if (!rt)
        return MELY_ESHUTDOWN;
    if (worker >= rt->nworkers || !out)
        return MELY_EINVAL;
    const struct mely__counters *c = &rt->workers[worker].ctr;
    *out = (mely_stats_t){
        .events_run = mely__counter_read(&c->events_run),
        .posts_local = mely__counter_read(&c->posts_local),
        .posts_remote = mely__counter_read(&c->posts_remote),
        .posts_foreign = mely__counter_read(&c->posts_foreign),
        .parks = mely__counter_read(&c->parks),
        .wakeups = mely__counter_read(&c->wakeups),
        .wakes_sent = mely__counter_read(&c->wakes_sent),
        .lock_contended = mely__counter_read(&c->lock_contended),
        .lock_cycles = mely__counter_read(&c->lock_cycles),
        .steal_attempts = mely__counter_read(&c->steal_attempts),
        .steals = mely__counter_read(&c->steals),
        .steal_cycles = mely__counter_read(&c->steal_cycles),
        .stolen_events = mely__counter_read(&c->stolen_events),
    };
    return 0;
}

void mely__stats_print(const mely_t *m, FILE *f)
{
    mely_stats_t t;

    fprintf(f, "mely statistics (%u workers)\n", mely_workers(m));
    fprintf(f, "%6s %12s %12s %12s %12s %8s %8s %10s %12s %10s %8s %14s\n", "worker",
            "events_run", "posts_local", "posts_remote", "posts_foreign", "parks", "wakeups",
            "contended", "lock_cycles", "steal_try", "steals", "stolen_events");
    for (unsigned w = 0; mely_worker_stats(m, w, &t) == 0; w++)
        fprintf(f,
                "%6u %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %8" PRIu64
                " %8" PRIu64 " %10" PRIu64 " %12" PRIu64 " %10" PRIu64 " %8" PRIu64 " %14" PRIu64
                "\n",
                w, t.events_run, t.posts_local, t.posts_remote, t.posts_foreign, t.parks,
                t.wakeups, t.lock_contended, t.lock_cycles, t.steal_attempts, t.steals,
                t.stolen_events);
}
