/* SPDX-License-Identifier: MIT */
/*
 * steal_unbalanced.c: the paper's "unbalanced" microbenchmark (Tables 3-4).
 *
 * Fork/join rounds (steal_rounds.c): the driver, on worker 0's pinned color,
 * posts 50,000 events of 50,000 distinct colors, all living on worker 0; 98% of
 * them busy-wait 100 TSC cycles, 2% a uniform 10,000-50,000. A new round
 * starts when all are done. Only work stealing can put the other workers to
 * use; how much it costs (locks, cycles per steal) decides whether it pays.
 *
 * Annotations: the short handler says timeleft 100, the long one 30,000 (the
 * mean of its events), no penalty. The time-left rule should take the long
 * events only: a short one costs less to run than to steal. The rows "no
 * annotations" post with plain mely_post(), no descriptor, as a program
 * nobody profiled would: short and long events have handler functions of
 * their own, so that a "measured" policy learns each function's cost.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

enum {
    EVENTS = 50000,     /* per round, one color each */
    LONG_ONE_IN = 50,   /* 2% of the events are long */
};

#define SHORT_CYCLES 100u
#define LONG_MIN_CYCLES 10000u
#define LONG_MAX_CYCLES 50000u
#define LONG_MEAN_CYCLES ((LONG_MIN_CYCLES + LONG_MAX_CYCLES) / 2)

struct unbalanced;

/* One event's argument: rewritten by the driver each round. */
struct unb_event {
    struct unbalanced *u;
    uint32_t cycles;
};

struct unbalanced {
    struct steal_rounds r;
    mely_handler_t h_short, h_long;
    bool annotated; /* else: plain mely_post(), no descriptor */
    uint64_t rng; /* the driver's */
    struct unb_event ev[EVENTS];
    mely_color_t colors[EVENTS];
};

void steal_unbalanced_describe(const struct steal_ctx *ctx, FILE *f)
{
    fprintf(f,
            "unbalanced (the paper's Tables 3-4): rounds of %d events of distinct colors posted on "
            "worker 0 by a driver on its pinned color; %d%% busy-wait %u cycles, %d%% %u-%u "
            "(uniform); annotations: short timeleft %u, long %u; %.3g s per row; colors "
            "stolen in a round are moved back to worker 0 before the next (time left out)\n",
            EVENTS, 100 - 100 / LONG_ONE_IN, SHORT_CYCLES, 100 / LONG_ONE_IN, LONG_MIN_CYCLES,
            LONG_MAX_CYCLES, SHORT_CYCLES, LONG_MEAN_CYCLES, ctx->seconds);
}

static void unb_event(void *arg)
{
    uint64_t start = bench_cycles();
    struct unb_event *e = arg;

    bench_spin_cycles(start, e->cycles);
    steal_round_event_done(&e->u->r);
}

/* The same for events posted without a descriptor: one function per kind. */
static void unb_short(void *arg)
{
    unb_event(arg);
}

static void unb_long(void *arg)
{
    unb_event(arg);
}

static int unb_post(struct unbalanced *u, unsigned i, bool is_long)
{
    if (!u->annotated)
        return mely_post(u->r.m, u->colors[i], is_long ? unb_long : unb_short, &u->ev[i]);
    return mely_post_ex(u->r.m, u->colors[i], MELY_PRIO_DEFAULT, is_long ? &u->h_long : &u->h_short,
                        unb_event, &u->ev[i], 0);
}

static void unb_driver(void *arg)
{
    struct unbalanced *u = arg;

    if (!steal_round_begin(&u->r))
        return;
    for (unsigned i = 0; i < EVENTS; i++) {
        uint64_t x = xorshift64(&u->rng);
        bool is_long = x % LONG_ONE_IN == 0;
        u->ev[i].cycles = is_long ? LONG_MIN_CYCLES + (uint32_t)((x >> 16) % (LONG_MAX_CYCLES -
                                                                  LONG_MIN_CYCLES + 1))
                                  : SHORT_CYCLES;
        int err = unb_post(u, i, is_long);
        if (err) {
            steal_round_fail(&u->r, err);
            return;
        }
    }
}

void steal_unbalanced_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                          struct steal_figures *out)
{
    struct unbalanced *u = steal_alloc(sizeof(*u));
    mely_t m = {0};

    if (!u) {
        out->err = MELY_ENOMEM;
        return;
    }
    u->h_short = steal_handler(cfg, "unbalanced short", SHORT_CYCLES, 0);
    u->h_long = steal_handler(cfg, "unbalanced long", LONG_MEAN_CYCLES, 0);
    u->annotated = cfg->annotated;
    u->rng = ctx->seed | 1;
    for (unsigned i = 0; i < EVENTS; i++) {
        u->colors[i] = (mely_color_t)(i + 1); /* 0 is the shared default color */
        u->ev[i].u = u;
    }
    u->r = (struct steal_rounds){.driver = unb_driver, .arg = u, .colors = u->colors,
                                 .ncolors = EVENTS, .per_round = EVENTS};
    out->err = steal_open(ctx, cfg, &m);
    if (!out->err) {
        steal_rounds_run(ctx, &m, &u->r, "unbalanced", out);
        if (cfg->steal && strstr(cfg->steal, "measured") && out->ok)
            snprintf(out->note, sizeof(out->note),
                     "measured costs: short %" PRIu64 ", long %" PRIu64 " cycles",
                     mely_fn_measured(&m, unb_short), mely_fn_measured(&m, unb_long));
        bench_rt_close(&ctx->b, &m, "unbalanced");
    }
    free(u);
}
