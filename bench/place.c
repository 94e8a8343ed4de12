/* SPDX-License-Identifier: MIT */
/*
 * place.c: what placing a connection by load costs (mely_color_place, then
 * mely_color_release: doc/runtime.md, "Placement by load").
 *
 * On 2 pinned workers, a handler of worker 1 places a color of a pool of
 * 1,024 and releases it, --pairs times, as an accept and a close would:
 *  - idle: worker 0 has nothing to do;
 *  - busy: a thread that is no worker posts to worker 0's colors without
 *    pause, so that the lines a placement reads (worker 0's inbox and its
 *    placement line) are written meanwhile;
 * and the floor: the same number of pairs of what a placement cannot do
 * without, a compare-and-swap on a list head and an atomic add, on one
 * thread's own variables. ns per pair, medians of --runs runs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

static struct {
    uint64_t pairs;
    unsigned runs;
    const char *csv;
    bool quick;
} o;

static const struct bench_opt options[] = {
    {.name = "pairs", .kind = OPT_U64, .var = &o.pairs, .lo = 1000, .hi = 1e9, .dflt = 2e6,
     .quick = 2e5, .param = true, .help = "place+release pairs per run"},
    {.name = "runs", .kind = OPT_UINT, .var = &o.runs, .lo = 1, .hi = 50, .dflt = 5, .quick = 3,
     .param = true, .help = "runs per row (the median is shown)"},
    {.name = "quick", .kind = OPT_QUICK, .var = &o.quick, .help = "a short run"},
    {.name = "csv", .kind = OPT_STR, .var = &o.csv, .sdflt = "bench/results/place.csv",
     .help = "CSV output"},
    {.name = NULL},
};

enum { ACCEPT = 1, OTHER = 2 }; /* colors of workers 1 and 0 */

struct run {
    mely_t m;
    mely_color_pool_t *pool;
    uint64_t pairs;
    int err;
    struct bench_span span;
    atomic_bool done;
};

static void nop(void *arg)
{
    (void)arg;
}

static void place_pairs(void *arg)
{
    struct run *r = arg;
    bench_mark(&r->span, false);
    for (uint64_t i = 0; i < r->pairs; i++) {
        mely_color_t c;
        int err = mely_color_place(&r->m, r->pool, &c);
        if (!err)
            err = mely_color_release(&r->m, r->pool, c);
        if (err) {
            r->err = err;
            break;
        }
    }
    bench_mark(&r->span, true);
    atomic_store(&r->done, true);
    mely_stop(&r->m);
}

static void *poster(void *arg)
{
    struct run *r = arg;
    while (!atomic_load(&r->done)) /* bounded: the handler ends */
        for (mely_color_t c = 0; c < 8; c++)
            if (mely_post(&r->m, OTHER + 2 * c, nop, NULL) != 0)
                sleep_us(10); /* the budget: let worker 0 catch up */
    return NULL;
}

static struct bench_sample run_place(const struct bench *b, void *arg, uint64_t count,
                                     struct bench_totals *tot)
{
    bool busy = arg != NULL;
    struct bench_sample bad = {.ok = false};
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.pairs = count;
    if (bench_rt_open(b, &r.m, 2, 2) != 0)
        return bad;
    int err = mely_color_pool(&r.m, 1024, &r.pool);
    if (!err)
        err = mely_post(&r.m, ACCEPT, place_pairs, &r);
    if (err) {
        fprintf(stderr, "place: setup: %s\n", mely_strerror(err));
        bench_rt_close(b, &r.m, "place");
        return bad;
    }
    pthread_t t;
    bool started = busy && pthread_create(&t, NULL, poster, &r) == 0;
    int rc = bench_mely_run(b, &r.m, bench_limit_s(count, 10000), busy ? "busy" : "idle");
    atomic_store(&r.done, true);
    if (started)
        pthread_join(t, NULL);
    *tot = bench_rt_totals(&r.m);
    /* The poster's events left queued are discarded: they only kept worker
     * 0 busy (bench_rt_close would report them). */
    int left = mely_shutdown(&r.m);
    if (left < 0)
        fprintf(stderr, "place: mely_shutdown: %s\n", mely_strerror(left));
    if (rc || r.err) {
        if (r.err)
            fprintf(stderr, "place: %s\n", mely_strerror(r.err));
        return bad;
    }
    return bench_span_sample(&r.span, count, false);
}

/* The floor: a compare-and-swap on a head and an atomic add, twice (a pop
 * and a push), on this thread's own lines. */
static struct bench_sample run_floor(const struct bench *b, void *arg, uint64_t count,
                                     struct bench_totals *tot)
{
    (void)b, (void)arg, (void)tot;
    static _Atomic uint64_t head;
    static _Atomic uint32_t placed;
    struct bench_span s;
    bench_mark(&s, false);
    for (uint64_t i = 0; i < count; i++) {
        for (int k = 0; k < 2; k++) {
            uint64_t h = atomic_load_explicit(&head, memory_order_acquire);
            while (!atomic_compare_exchange_weak_explicit(&head, &h, h + 1, memory_order_acq_rel,
                                                          memory_order_acquire))
                ;
            atomic_fetch_add_explicit(&placed, 1, memory_order_relaxed);
        }
    }
    bench_mark(&s, true);
    return bench_span_sample(&s, count, false);
}

enum { C_ROW, C_NS, C_CYC, C_FLOOR, NCOLS };
static const struct bench_column columns[NCOLS] = {
    [C_ROW] = {.title = "workload", .key = "workload"},
    [C_NS] = {.title = "ns/pair", .key = "ns_per_pair", .right = true},
    [C_CYC] = {.title = "cycles/pair", .key = "cycles_per_pair", .right = true},
    [C_FLOOR] = {.title = "x floor", .key = "ratio_to_floor", .right = true},
};

int main(int argc, char **argv)
{
    struct bench b = {.name = "place"};
    struct bench_machine mc;
    int rc = bench_options("place [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    printf("mely placement benchmark: mely_color_place + mely_color_release pairs\n");
    bench_machine_get(&mc, stdout);
    bench_print_mely_env(stdout);
    printf("%" PRIu64 " pairs per run, %u runs per row, 2 pinned workers, a pool of 1,024\n",
           o.pairs, o.runs);

    static const char *const names[] = {"floor (CAS + add, x2)", "place+release, idle",
                                        "place+release, busy"};
    double v[3] = {0};
    bool ok[3];
    ok[0] = bench_measure(&b, names[0], "ns/pair", run_floor, NULL, o.runs, o.pairs, 1, false,
                          &v[0]);
    ok[1] = bench_measure(&b, names[1], "ns/pair", run_place, NULL, o.runs, o.pairs, 1, false,
                          &v[1]);
    ok[2] = bench_measure(&b, names[2], "ns/pair", run_place, &b, o.runs, o.pairs, 1, false,
                          &v[2]);

    struct bench_table t;
    struct bench_param params[4];
    double tsc = bench_tsc_per_ns();
    bench_table_init(&t, columns, NCOLS, 3);
    for (unsigned i = 0; i < 3; i++) {
        bench_cell(&t, i, C_ROW, "%s", names[i]);
        if (!ok[i]) {
            bench_cell(&t, i, C_NS, "failed");
            continue;
        }
        bench_cell(&t, i, C_NS, "%.1f", v[i]);
        if (tsc > 0)
            bench_cell(&t, i, C_CYC, "%.0f", v[i] * tsc);
        if (ok[0] && v[0] > 0)
            bench_cell(&t, i, C_FLOOR, "%.2f", v[i] / v[0]);
    }
    printf("\n");
    bench_table_print(stdout, &t);
    printf("\n");
    bench_load_warn(&b);
    bench_table_csv(&b, o.csv, &mc, params, bench_opt_params(options, params, 4), &t);
    bench_table_free(&t);
    return ok[0] && ok[1] && ok[2] ? 0 : 1;
}
