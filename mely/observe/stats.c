/* SPDX-License-Identifier: MIT */
/* stats.c: introspection and statistics (any thread). */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mely/remote/colormap.h"
#include "mely/steal/cost.h"
#include "mely/core/handle.h"
#include "mely/core/log.h"
#include "mely/runtime.h"
#include "mely/observe/stats.h"
#include "mely/topology/topology.h"

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
    struct mely__worker *self;
    const struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? (unsigned)mely__handle_done(self, (int)rt->nworkers) : 0;
}

static int color_owner(const struct mely__rt *rt, mely_color_t color)
{
    if (!mely__color_valid(rt, color))
        return MELY_ECOLOR;
    return (int)mely__owner(rt, color);
}

int mely_color_owner(const mely_t *m, mely_color_t color)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, color_owner(rt, color)) : MELY_ESHUTDOWN;
}

/* The measured average under `key` (cost.h), 0 without one. */
static uint64_t measured(const mely_t *m, const void *key)
{
    struct mely__worker *self;
    const struct mely__rt *rt = mely__handle_enter(m, &self);
    if (!rt)
        return 0;
    uint64_t avg = key && rt->costtab ? mely__cost_avg(rt, key) : 0;
    mely__handle_leave(self);
    return avg;
}

uint64_t mely_handler_measured(const mely_t *m, const mely_handler_t *h)
{
    return measured(m, h);
}

uint64_t mely_fn_measured(const mely_t *m, mely_fn_t fn)
{
    return measured(m, fn ? mely__cost_key(NULL, fn) : NULL);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The median of worker w's logged steal cycles (its last MELY__STEAL_LOG). */
static uint64_t steal_median(const struct mely__worker *w, uint64_t steals)
{
    _Static_assert(MELY__STEAL_LOG <= 4096, "the copy below lives on the stack");
    uint32_t v[MELY__STEAL_LOG];
    unsigned n = steals < MELY__STEAL_LOG ? (unsigned)steals : MELY__STEAL_LOG;

    if (n == 0)
        return 0;
    for (unsigned i = 0; i < n; i++)
        v[i] = atomic_load_explicit((_Atomic uint32_t *)&w->steal_log[i], memory_order_relaxed);
    qsort(v, n, sizeof(v[0]), cmp_u32);
    return n % 2 ? v[n / 2] : ((uint64_t)v[n / 2 - 1] + v[n / 2]) / 2;
}

static int worker_stats(const struct mely__rt *rt, unsigned worker, mely_stats_t *out)
{
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
        .stolen_cycles = mely__counter_read(&c->stolen_cycles),
        .polls = mely__counter_read(&c->polls),
        .io_ready = mely__counter_read(&c->io_ready),
        .timers_fired = mely__counter_read(&c->timers_fired),
        .watch_moves = mely__counter_read(&c->watch_moves),
        .stream_sends = mely__counter_read(&c->stream_sends),
        .stream_bytes = mely__counter_read(&c->stream_bytes),
        .spins = mely__counter_read(&c->spins),
        .spins_found = mely__counter_read(&c->spins_found),
        .spin_ns = mely__counter_read(&c->spin_ns),
        .park_ns = mely__counter_read(&c->park_ns),
        .steal_fail_cycles = mely__counter_read(&c->steal_fail_cycles),
        .steal_hold_cycles = mely__counter_read(&c->steal_hold_cycles),
        .idle_cycles = mely__counter_read(&c->idle_cycles),
        .stalls = atomic_load_explicit(&rt->workers[worker].stalls, memory_order_relaxed),
        .places = atomic_load_explicit(&rt->workers[worker].places, memory_order_relaxed),
        .placed_now = atomic_load_explicit(&rt->workers[worker].placed_now, memory_order_relaxed),
    };
    out->steal_cycles_median = steal_median(&rt->workers[worker], out->steals);
    return 0;
}

int mely_worker_stats(const mely_t *m, unsigned worker, mely_stats_t *out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, worker_stats(rt, worker, out)) : MELY_ESHUTDOWN;
}

/* The columns of MELY_STATS=1, named as mely_stats_t's fields: every field,
 * by construction (the assertion below counts them). */
#define STAT(field) { #field, offsetof(mely_stats_t, field) }
static const struct {
    const char *name;
    size_t off;
} stat_columns[] = {
    STAT(events_run),     STAT(posts_local),   STAT(posts_remote),
    STAT(posts_foreign),  STAT(parks),         STAT(wakeups),
    STAT(wakes_sent),     STAT(lock_contended), STAT(lock_cycles),
    STAT(steal_attempts), STAT(steals),        STAT(steal_cycles),
    STAT(steal_cycles_median), STAT(stolen_events), STAT(stolen_cycles),
    STAT(polls),          STAT(io_ready),      STAT(timers_fired),
    STAT(watch_moves),    STAT(stalls),        STAT(stream_sends),
    STAT(stream_bytes),   STAT(spins),         STAT(spins_found),
    STAT(spin_ns),        STAT(park_ns),       STAT(places),
    STAT(placed_now),
    STAT(steal_fail_cycles), STAT(steal_hold_cycles), STAT(idle_cycles),
};
#undef STAT
_Static_assert(sizeof(stat_columns) / sizeof(stat_columns[0]) * sizeof(uint64_t) ==
                   sizeof(mely_stats_t),
               "MELY_STATS prints every field of mely_stats_t");

void mely__stats_at_end(struct mely__rt *rt)
{
    const char *print = getenv("MELY_STATS");
    if (!print || strcmp(print, "1") != 0 || atomic_exchange(&rt->stats_printed, true))
        return;
    mely__stats_print(rt, stderr);
    if (rt->topo)
        mely__topo_describe(rt->topo, stderr);
    fflush(stderr);
}

void mely__stats_print(const struct mely__rt *rt, FILE *f)
{
    enum { NCOL = sizeof(stat_columns) / sizeof(stat_columns[0]) };
    mely_stats_t t;

    fprintf(f, "mely statistics (%u workers, engine %s, steal %s)\n", rt->nworkers,
            rt->engine->name, rt->steal ? rt->steal->name : "off");
    fprintf(f, "%6s", "worker");
    for (unsigned c = 0; c < NCOL; c++)
        fprintf(f, " %*s", (int)strlen(stat_columns[c].name), stat_columns[c].name);
    fputc('\n', f);
    for (unsigned w = 0; worker_stats(rt, w, &t) == 0; w++) {
        fprintf(f, "%6u", w);
        for (unsigned c = 0; c < NCOL; c++) {
            uint64_t v;
            memcpy(&v, (const char *)&t + stat_columns[c].off, sizeof(v));
            fprintf(f, " %*" PRIu64, (int)strlen(stat_columns[c].name), v);
        }
        fputc('\n', f);
    }
}
