/* SPDX-License-Identifier: MIT */
/*
 * steal_cache.c: the paper's "cache efficient" microbenchmark (Table 6).
 *
 * Fork/join rounds (steal_rounds.c). Worker 0 (of 2: half the workers) starts
 * each round with ARRAYS events A. Each array has three colors: a (A and the
 * two C events), b0 and b1 (one B each), all living on worker 0 at the start
 * of a round.
 *   A  fills its array (ARRAY_KB, allocated once, reused) with pseudo-random
 *      numbers, keeps their sum, and posts B on b0 and B on b1;
 *   B  sorts its half of the array (qsort) and posts C on a;
 *   C  the two C of an array serialize on color a; the second merges the two
 *      halves and checks the result: sorted, and the same sum as A wrote.
 * A failed check fails the row: a benchmark that checks its result.
 *
 * The two halves are sorted in parallel only if a B is stolen; the locality
 * heuristic tries to steal where the array's cache lines are close.
 *
 * Annotations (measured once like penalty's: `bench/steal cache --quick`, the
 * handlers' own rdtsc timings, printed under the table): A_CYCLES, B_CYCLES,
 * C_CYCLES (the mean of a first C, which only counts, and a second, which
 * merges).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

enum {
    ARRAYS = 100,
    ARRAY_KB = 16,
    ELEMS = ARRAY_KB * 1024 / 4, /* uint32_t */
    HALF = ELEMS / 2,
    KIND_A = 0,
    KIND_B = 1,
    KIND_C = 2,
};

#define A_CYCLES 16000u
#define B_CYCLES 300000u
#define C_CYCLES 23000u

/* The sort check failed (reported as the row's error). */
#define CHECK_FAILED (-EILSEQ)

struct cache_wl;
struct cache_array;

/* A B event's argument: which half of which array. */
struct cache_half {
    struct cache_array *arr;
    unsigned half;
};

/* One array and its colors; touched by one color at a time. */
struct cache_array {
    alignas(STEAL_CACHELINE) struct cache_wl *c;
    uint32_t *data, *merged;
    uint64_t sum;    /* what A wrote */
    uint64_t seed;
    unsigned synced; /* C events of this round so far (color a only) */
    mely_color_t a, b[2];
    struct cache_half halves[2];
};

struct cache_wl {
    struct steal_rounds r;
    mely_handler_t h_a, h_b, h_c;
    struct steal_costs costs;
    mely_color_t colors[3 * ARRAYS];
    struct cache_array arr[ARRAYS];
};

void steal_cache_describe(const struct steal_ctx *ctx, FILE *f)
{
    fprintf(f,
            "cache (the paper's Table 6): rounds of %d A events on worker 0; A fills a %d KB "
            "array and posts two B of different colors, each sorting one half; each B posts a "
            "C on A's color; the second C merges and checks the result; annotations: A %u, B "
            "%u, C %u cycles; %.3g s per row\n",
            ARRAYS, ARRAY_KB, A_CYCLES, B_CYCLES, C_CYCLES, ctx->seconds);
}

/* Merges the sorted halves into arr->merged; true if the result is sorted and
 * holds what A wrote. O(ELEMS). */
static bool merge_and_check(struct cache_array *arr)
{
    const uint32_t *x = arr->data, *y = arr->data + HALF;
    size_t i = 0, j = 0, k = 0;
    uint64_t sum = 0;
    bool sorted = true;

    while (k < ELEMS) { /* bounded: k grows each turn */
        uint32_t v = (j == HALF || (i < HALF && x[i] <= y[j])) ? x[i++] : y[j++];
        sorted &= k == 0 || arr->merged[k - 1] <= v;
        arr->merged[k++] = v;
        sum += v;
    }
    return sorted && sum == arr->sum;
}

static void cache_c(void *arg)
{
    uint64_t start = bench_cycles();
    struct cache_array *arr = arg;
    struct cache_wl *c = arr->c;
    bool ok = true;

    if (++arr->synced == 2) {
        arr->synced = 0;
        ok = merge_and_check(arr);
    }
    steal_costs_add(&c->costs, KIND_C, bench_cycles() - start);
    steal_round_event_end(&c->r, ok ? 0 : CHECK_FAILED);
}

static void cache_b(void *arg)
{
    uint64_t start = bench_cycles();
    struct cache_half *h = arg;
    struct cache_array *arr = h->arr;
    struct cache_wl *c = arr->c;

    qsort(arr->data + h->half * HALF, HALF, sizeof(uint32_t), cmp_u32);
    int err = mely_post_ex(c->r.m, arr->a, MELY_PRIO_DEFAULT, &c->h_c, cache_c, arr, 0);
    steal_costs_add(&c->costs, KIND_B, bench_cycles() - start);
    steal_round_event_end(&c->r, err);
}

static void cache_a(void *arg)
{
    uint64_t start = bench_cycles();
    struct cache_array *arr = arg;
    struct cache_wl *c = arr->c;
    uint64_t s = arr->seed, sum = 0;

    for (size_t i = 0; i < ELEMS; i++) {
        arr->data[i] = (uint32_t)(xorshift64(&s) >> 32);
        sum += arr->data[i];
    }
    arr->seed = s;
    arr->sum = sum;
    int err = 0;
    for (unsigned h = 0; h < 2 && !err; h++)
        err = mely_post_ex(c->r.m, arr->b[h], MELY_PRIO_DEFAULT, &c->h_b, cache_b,
                           &arr->halves[h], 0);
    steal_costs_add(&c->costs, KIND_A, bench_cycles() - start);
    steal_round_event_end(&c->r, err);
}

static void cache_driver(void *arg)
{
    struct cache_wl *c = arg;

    if (!steal_round_begin(&c->r))
        return;
    for (unsigned i = 0; i < ARRAYS; i++) {
        int err = mely_post_ex(c->r.m, c->arr[i].a, MELY_PRIO_DEFAULT, &c->h_a, cache_a,
                               &c->arr[i], 0);
        if (err) {
            steal_round_fail(&c->r, err);
            return;
        }
    }
}

static void cache_free(struct cache_wl *c)
{
    for (unsigned i = 0; i < ARRAYS; i++) {
        free(c->arr[i].data);
        free(c->arr[i].merged);
    }
    steal_costs_free(&c->costs);
    free(c);
}

/* Arrays, colors and handlers of a row; false if out of memory. */
static bool cache_setup(struct cache_wl *c, const struct steal_ctx *ctx,
                        const struct steal_config *cfg)
{
    if (steal_costs_init(&c->costs, ctx->workers) != 0)
        return false;
    c->h_a = steal_handler(cfg, "cache A", A_CYCLES, 0);
    c->h_b = steal_handler(cfg, "cache B", B_CYCLES, 0);
    c->h_c = steal_handler(cfg, "cache C", C_CYCLES, 0);
    for (unsigned i = 0; i < ARRAYS; i++) {
        struct cache_array *arr = &c->arr[i];
        arr->c = c;
        arr->seed = (ctx->seed | 1) + i;
        arr->a = c->colors[3 * i] = (mely_color_t)(3 * i + 1);
        arr->b[0] = c->colors[3 * i + 1] = (mely_color_t)(3 * i + 2);
        arr->b[1] = c->colors[3 * i + 2] = (mely_color_t)(3 * i + 3);
        arr->halves[0] = (struct cache_half){.arr = arr, .half = 0};
        arr->halves[1] = (struct cache_half){.arr = arr, .half = 1};
        arr->data = steal_alloc(ELEMS * sizeof(uint32_t));
        arr->merged = steal_alloc(ELEMS * sizeof(uint32_t));
        if (!arr->data || !arr->merged)
            return false;
    }
    c->r = (struct steal_rounds){.driver = cache_driver, .arg = c, .colors = c->colors,
                                 .ncolors = 3 * ARRAYS, .per_round = 5 * ARRAYS};
    return true;
}

void steal_cache_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                     struct steal_figures *out)
{
    struct cache_wl *c = steal_alloc(sizeof(*c));
    mely_t m = {0};

    if (!c || !cache_setup(c, ctx, cfg)) {
        out->err = MELY_ENOMEM;
        if (c)
            cache_free(c);
        return;
    }
    out->err = steal_open(ctx, cfg, &m);
    if (!out->err) {
        steal_rounds_run(ctx, &m, &c->r, "cache", out);
        int n = snprintf(out->note, sizeof(out->note), "A %.0f, B %.0f, C %.0f cycles%s",
                         steal_costs_mean(&c->costs, KIND_A), steal_costs_mean(&c->costs, KIND_B),
                         steal_costs_mean(&c->costs, KIND_C),
                         out->ok ? "; every merge checked: sorted, same sum" : "");
        if (out->err == CHECK_FAILED)
            snprintf(out->note, sizeof(out->note), "a merged array was wrong (not sorted, or "
                                                   "not what A wrote)");
        else if (cfg->steal && strstr(cfg->steal, "measured") && out->ok && n > 0)
            snprintf(out->note + n, sizeof(out->note) - (size_t)n,
                     "; measured by mely: A %" PRIu64 ", B %" PRIu64 ", C %" PRIu64,
                     mely_handler_measured(&m, &c->h_a), mely_handler_measured(&m, &c->h_b),
                     mely_handler_measured(&m, &c->h_c));
        bench_rt_close(&ctx->b, &m, "cache");
    }
    cache_free(c);
}
