/* SPDX-License-Identifier: MIT */
/*
 * steal_penalty.c: the paper's "penalty" microbenchmark (Table 5).
 *
 * Fork/join rounds (steal_rounds.c). Worker 0 starts each round with ARRAYS
 * events A of distinct colors. A fills its color's array (one core's L2 in
 * size; allocated by the first A of the color, reused by the next rounds), as
 * a fresh data set is first written by the core that creates it, and posts B
 * to its own color. B reads and writes its own SLICE_BYTES of the array and
 * posts the next B, until the array is walked: a chain of B events that keeps
 * using the data A left in its core's cache.
 *
 * Stealing an A moves work before it has touched any data; stealing a B moves
 * a chain away from its data. B's descriptor has penalty 1000, so the penalty
 * heuristic sees B as nearly free and takes the A events instead.
 *
 * Annotations (cycles per KB of the array or slice, measured once on the
 * development machine, an AMD EPYC KVM guest with a 1 MB L2: `bench/steal
 * penalty --quick`, mean of the handlers' own rdtsc timings, printed under
 * the table as "A ... B ... cycles", over the rows without stealing):
 * A_CYCLES_PER_KB for A's fill, B_CYCLES_PER_KB for B's walk.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

enum {
    ARRAYS = 32,          /* A events (colors, arrays) per round */
    SLICE_BYTES = 16384,  /* what one B walks */
    KIND_A = 0,
    KIND_B = 1,
};

#define B_PENALTY 1000u
#define A_CYCLES_PER_KB 105u
#define B_CYCLES_PER_KB 130u

struct penalty;

/* One color's array and where its chain stands; touched by one color only,
 * on a cache line of its own. */
struct pen_array {
    alignas(STEAL_CACHELINE) struct penalty *p;
    uint64_t *data;
    size_t next; /* the next B's slice */
    mely_color_t color;
    uint64_t round; /* A's, to vary what it writes */
};

struct penalty {
    struct steal_rounds r;
    mely_handler_t h_a, h_b;
    struct steal_costs costs;
    size_t bytes, slices;
    mely_color_t colors[ARRAYS];
    struct pen_array arr[ARRAYS];
};

/* The array's size: one core's L2, whole slices. */
static size_t array_bytes(const struct steal_ctx *ctx)
{
    size_t n = ctx->l2_bytes / SLICE_BYTES;
    return (n ? n : 1) * SLICE_BYTES;
}

void steal_penalty_describe(const struct steal_ctx *ctx, FILE *f)
{
    size_t kb = array_bytes(ctx) / 1024;
    fprintf(f,
            "penalty (the paper's Table 5): rounds of %d A events of distinct colors on worker "
            "0; A fills its color's %zu KB array (L2) and starts a chain of %zu B events of its "
            "color, each walking %d KB of it; B penalty %u; annotations: A timeleft %zu, B %zu "
            "cycles; %.3g s per row\n",
            ARRAYS, kb, array_bytes(ctx) / SLICE_BYTES, SLICE_BYTES / 1024, B_PENALTY,
            kb * A_CYCLES_PER_KB, (size_t)(SLICE_BYTES / 1024) * B_CYCLES_PER_KB, ctx->seconds);
}

static void pen_b(void *arg)
{
    uint64_t start = bench_cycles();
    struct pen_array *a = arg;
    struct penalty *p = a->p;
    uint64_t *s = a->data + a->next * (SLICE_BYTES / sizeof(uint64_t));

    for (size_t i = 0; i < SLICE_BYTES / sizeof(uint64_t); i++)
        s[i] += i;
    a->next++;
    int err = 0;
    if (a->next < p->slices)
        err = mely_post_ex(p->r.m, a->color, MELY_PRIO_DEFAULT, &p->h_b, pen_b, a, 0);
    steal_costs_add(&p->costs, KIND_B, bench_cycles() - start);
    steal_round_event_end(&p->r, err);
}

static void pen_a(void *arg)
{
    uint64_t start = bench_cycles();
    struct pen_array *a = arg;
    struct penalty *p = a->p;

    if (!a->data && !(a->data = steal_alloc(p->bytes))) {
        steal_round_fail(&p->r, MELY_ENOMEM);
        return;
    }
    uint64_t v = ++a->round;
    for (size_t i = 0; i < p->bytes / sizeof(uint64_t); i++)
        a->data[i] = v + i;
    a->next = 0;
    int err = mely_post_ex(p->r.m, a->color, MELY_PRIO_DEFAULT, &p->h_b, pen_b, a, 0);
    steal_costs_add(&p->costs, KIND_A, bench_cycles() - start);
    steal_round_event_end(&p->r, err);
}

static void pen_driver(void *arg)
{
    struct penalty *p = arg;

    if (!steal_round_begin(&p->r))
        return;
    for (unsigned i = 0; i < ARRAYS; i++) {
        int err = mely_post_ex(p->r.m, p->colors[i], MELY_PRIO_DEFAULT, &p->h_a, pen_a,
                               &p->arr[i], 0);
        if (err) {
            steal_round_fail(&p->r, err);
            return;
        }
    }
}

static void pen_free(struct penalty *p)
{
    for (unsigned i = 0; i < ARRAYS; i++)
        free(p->arr[i].data);
    steal_costs_free(&p->costs);
    free(p);
}

void steal_penalty_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                       struct steal_figures *out)
{
    struct penalty *p = steal_alloc(sizeof(*p));
    mely_t m = {0};

    if (!p || steal_costs_init(&p->costs, ctx->workers) != 0) {
        out->err = MELY_ENOMEM;
        if (p)
            pen_free(p);
        return;
    }
    p->bytes = array_bytes(ctx);
    p->slices = p->bytes / SLICE_BYTES;
    p->h_a = steal_handler(cfg, "penalty A", (p->bytes / 1024) * A_CYCLES_PER_KB, 0);
    p->h_b = steal_handler(cfg, "penalty B", (SLICE_BYTES / 1024) * B_CYCLES_PER_KB, B_PENALTY);
    for (unsigned i = 0; i < ARRAYS; i++) {
        p->colors[i] = (mely_color_t)(i + 1);
        p->arr[i] = (struct pen_array){.p = p, .color = p->colors[i]};
    }
    p->r = (struct steal_rounds){.driver = pen_driver, .arg = p, .colors = p->colors,
                                 .ncolors = ARRAYS, .per_round = ARRAYS * (1 + p->slices)};
    out->err = steal_open(ctx, cfg, &m);
    if (!out->err) {
        steal_rounds_run(ctx, &m, &p->r, "penalty", out);
        int n = snprintf(out->note, sizeof(out->note), "A %.0f, B %.0f cycles",
                         steal_costs_mean(&p->costs, KIND_A), steal_costs_mean(&p->costs, KIND_B));
        if (cfg->steal && strstr(cfg->steal, "measured") && out->ok && n > 0)
            snprintf(out->note + n, sizeof(out->note) - (size_t)n,
                     "; measured by mely: A %" PRIu64 ", B %" PRIu64,
                     mely_handler_measured(&m, &p->h_a), mely_handler_measured(&m, &p->h_b));
        bench_rt_close(&ctx->b, &m, "penalty");
    }
    pen_free(p);
}
