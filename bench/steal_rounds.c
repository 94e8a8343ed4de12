/* SPDX-License-Identifier: MIT */
/*
 * steal_rounds.c: fork/join rounds, re-homing and handler costs for
 * bench/steal (see steal.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

/* How long steal_rehome() waits for a color that is still finishing. */
#define REHOME_WAIT_NS 1000000000ull

int steal_open(const struct steal_ctx *ctx, const struct steal_config *cfg, mely_t *m)
{
    mely_config_t mc;

    mely_config_init(&mc);
    mc.workers = ctx->workers;
    mc.pin = 1;
    mc.engine = cfg->engine;
    mc.steal = cfg->steal;
    return bench_rt_open_cfg(&ctx->b, m, &mc, 2);
}

mely_handler_t steal_handler(const struct steal_config *cfg, const char *name, uint64_t timeleft,
                             uint32_t penalty)
{
    return (mely_handler_t){
        .name = name, .timeleft = cfg->annotated ? timeleft : 0, .penalty = penalty};
}

void *steal_alloc(size_t size)
{
    size_t rounded = (size + STEAL_CACHELINE - 1) / STEAL_CACHELINE * STEAL_CACHELINE;
    void *p = aligned_alloc(STEAL_CACHELINE, rounded ? rounded : STEAL_CACHELINE);
    if (p)
        memset(p, 0, rounded);
    return p;
}

/* ---- Re-homing ---------------------------------------------------------------------- */

int steal_rehome(mely_t *m, const mely_color_t *colors, unsigned n, unsigned *moved)
{
    uint64_t deadline = 0;
    unsigned k = 0;

    for (unsigned i = 0; i < n; i++) {
        if (mely_color_owner(m, colors[i]) == 0)
            continue;
        int err;
        /* A round's last events may still be returning on another worker when
         * the driver runs: their colors are busy for a few microseconds. */
        while ((err = mely_color_move(m, colors[i], 0)) == MELY_EBUSY) {
            uint64_t now = now_ns();
            if (deadline == 0)
                deadline = now + REHOME_WAIT_NS;
            else if (now > deadline)
                break;
        }
        if (err)
            return err;
        k++;
    }
    if (moved)
        *moved = k;
    return 0;
}

/* ---- Rounds ------------------------------------------------------------------------- */

void steal_round_fail(struct steal_rounds *r, int err)
{
    bench_post_failed(r->m, &r->err, err);
}

bool steal_round_begin(struct steal_rounds *r)
{
    uint64_t now = now_ns();

    if (!r->started) {
        r->started = true;
        r->t0_ns = now;
    } else {
        r->rounds++;
    }
    if (now - r->t0_ns - r->rehome_ns >= r->limit_ns) {
        r->t1_ns = now;
        mely_stop(r->m);
        return false;
    }
    int err = steal_rehome(r->m, r->colors, r->ncolors, NULL);
    r->rehome_ns += now_ns() - now;
    if (err) {
        steal_round_fail(r, err);
        return false;
    }
    /* Before the first post: the first event may finish at once on a thief. */
    atomic_store_explicit(&r->left, r->per_round, memory_order_relaxed);
    return true;
}


void steal_round_event_end(struct steal_rounds *r, int err)
{
    if (err)
        steal_round_fail(r, err);
    else
        steal_round_event_done(r);
}

void steal_round_event_done(struct steal_rounds *r)
{
    /* acq_rel: the driver that the last event posts sees every event's work. */
    if (atomic_fetch_sub_explicit(&r->left, 1, memory_order_acq_rel) != 1)
        return;
    int err = mely_post(r->m, MELY_COLOR_PINNED(0), r->driver, r->arg);
    if (err)
        steal_round_fail(r, err);
}

void steal_rounds_run(const struct steal_ctx *ctx, mely_t *m, struct steal_rounds *r,
                      const char *what, struct steal_figures *out)
{
    r->m = m;
    r->limit_ns = (uint64_t)(ctx->seconds * 1e9);
    out->workers = mely_workers(m);
    out->err = steal_rehome(m, r->colors, r->ncolors, NULL);
    if (!out->err)
        out->err = mely_post(m, MELY_COLOR_PINNED(0), r->driver, r->arg);
    if (out->err) {
        fprintf(stderr, "%s: %s: %s\n", ctx->b.name, what, mely_strerror(out->err));
        return;
    }
    uint64_t c0 = bench_cycles();
    /* A round takes well under a second; the limit only catches a hang. */
    int rc = bench_mely_run(&ctx->b, m, bench_limit_s(0, 0) + (double)r->limit_ns * 2 / 1e9, what);
    out->elapsed_cycles = bench_cycles() - c0;
    out->tot = bench_rt_totals(m);
    out->err = bench_post_error(&r->err);
    if (out->err)
        fprintf(stderr, "%s: %s: a handler failed: %s\n", ctx->b.name, what,
                mely_strerror(out->err));
    else if (rc != 0)
        out->err = rc < 0 ? rc : -ETIMEDOUT;
    else if (r->t1_ns == 0 || r->rounds == 0)
        out->err = -ETIMEDOUT; /* no complete round: nothing to report */
    if (out->err)
        return;
    out->ok = true;
    out->rounds = r->rounds;
    out->events = (uint64_t)r->rounds * r->per_round;
    out->seconds = (double)(r->t1_ns - r->t0_ns - r->rehome_ns) / 1e9;
    out->rehome_seconds = (double)r->rehome_ns / 1e9;
}

/* ---- Handler costs ------------------------------------------------------------------- */

int steal_costs_init(struct steal_costs *c, unsigned workers)
{
    c->workers = workers;
    c->slot = steal_alloc(sizeof(struct steal_cost_slot) * (workers ? workers : 1));
    return c->slot ? 0 : -ENOMEM;
}

void steal_costs_free(struct steal_costs *c)
{
    free(c->slot);
    c->slot = NULL;
}

void steal_costs_add(struct steal_costs *c, unsigned kind, uint64_t cycles)
{
    int w = mely_current_worker();
    if (w < 0 || (unsigned)w >= c->workers || kind >= STEAL_KINDS)
        return;
    c->slot[w].cycles[kind] += cycles; /* one writer per slot: its worker */
    c->slot[w].count[kind]++;
}

double steal_costs_mean(const struct steal_costs *c, unsigned kind)
{
    uint64_t sum = 0, n = 0;
    for (unsigned w = 0; w < c->workers && kind < STEAL_KINDS; w++) {
        sum += c->slot[w].cycles[kind];
        n += c->slot[w].count[kind];
    }
    return n ? (double)sum / (double)n : 0.0;
}
