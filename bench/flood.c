/* SPDX-License-Identifier: MIT */
/*
 * flood.c: what a post flood does to memory (issue 26), and what comes back.
 *
 * Two workloads on a runtime of 2 pinned workers, stealing off:
 *  - flood: a color's handler is held (it waits) while a poster posts to
 *    it for --seconds as fast as it can, going on after refusals, as a
 *    hostile client would: a thread that is not a worker (--from foreign),
 *    or a handler on the other worker (--from worker). The runtime has
 *    an event budget of --budget-mb. Then the handler is released, every
 *    accepted event runs, and the workers go idle.
 *  - burst: with the default budget, --burst events are posted to a held
 *    color from a foreign thread, then released and run.
 * For each: posts accepted and refused, the process's resident memory
 * (/proc/self/statm) before, at its peak (sampled every 2 ms) and once the
 * workers are idle (300 ms after it first fell within 2x of before, or at
 * 5 s), and how long after the last event it first fell within 2x
 * ("never": not in 5 s).
 *
 * Built against a runtime without an event budget (before issue 26: no
 * MELY_EVENT_BUDGET_MB_DEFAULT), the flood row runs without one, capped at
 * --max-events, so that one program measures both.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/harness.h"

#ifdef MELY_EVENT_BUDGET_MB_DEFAULT
#define HAVE_BUDGET 1
#else
#define HAVE_BUDGET 0
#define MELY_EAGAIN (-EAGAIN) /* never returned there */
#endif

static struct {
    unsigned budget_mb;
    double seconds;
    uint64_t burst, max_events;
    const char *from, *csv;
    bool quick;
} o;

static const struct bench_opt options[] = {
    {.name = "budget-mb", .kind = OPT_UINT, .var = &o.budget_mb, .lo = 2, .hi = 1u << 20,
     .dflt = 64, .param = true, .help = "the flood's event budget, MiB"},
    {.name = "seconds", .kind = OPT_DOUBLE, .var = &o.seconds, .lo = 0.1, .hi = 600, .dflt = 4,
     .quick = 1, .param = true, .help = "how long the flood posts"},
    {.name = "max-events", .kind = OPT_U64, .var = &o.max_events, .lo = 1000, .hi = 1e9,
     .dflt = 2e7, .param = true, .help = "the flood stops after this many accepted posts"},
    {.name = "burst", .kind = OPT_U64, .var = &o.burst, .lo = 1000, .hi = 1e8, .dflt = 5e6,
     .quick = 1e6, .param = true, .help = "events of the burst"},
    {.name = "from", .kind = OPT_STR, .var = &o.from, .sdflt = "foreign", .param = true,
     .help = "the flood's poster: foreign (a thread) or worker (a handler)"},
    {.name = "quick", .kind = OPT_QUICK, .var = &o.quick, .help = "a short run"},
    {.name = "csv", .kind = OPT_STR, .var = &o.csv, .sdflt = "bench/results/flood.csv",
     .help = "CSV output"},
    {.name = NULL},
};

enum { HELD = 1, POSTER = 2 }; /* colors of workers 1 and 0 */

/* One workload's run. */
struct run {
    mely_t m;
    atomic_bool held, release, flooded;
    atomic_uint_fast64_t ran;
    uint64_t accepted, refused, other; /* posts; other: errors but MELY_EAGAIN */
    int other_err;
    double post_s;                     /* how long the posting took */
    bool timed;                        /* post for o.seconds (else o.burst posts) */
    /* RSS, bytes; back_ms: from the last event run to the `after` sample */
    uint64_t before, peak, after;
    double back_ms;                    /* -1: not within 2x in 5 s */
    atomic_bool sampling;
    atomic_uint_fast64_t peak_seen;
};

static void *sampler(void *arg)
{
    struct run *r = arg;
    while (atomic_load(&r->sampling)) { /* bounded: the driver clears it */
        uint64_t v = rss_bytes();
        if (v > atomic_load(&r->peak_seen))
            atomic_store(&r->peak_seen, v);
        sleep_us(2000);
    }
    return NULL;
}

static void hold(void *arg)
{
    struct run *r = arg;
    atomic_store(&r->held, true);
    uint64_t deadline = now_ns() + 300000000000ull;
    while (!atomic_load(&r->release) && now_ns() < deadline) /* bounded: 300 s */
        sleep_us(100);
}

static void count(void *arg)
{
    struct run *r = arg;
    atomic_fetch_add_explicit(&r->ran, 1, memory_order_relaxed);
}

/* Posts to the held color: for o.seconds (going on after refusals) or
 * until o.burst are accepted; stops at o.max_events accepted either way. */
static void post_all(struct run *r)
{
    uint64_t t0 = now_ns(), end = t0 + (uint64_t)(o.seconds * 1e9);
    uint64_t want = r->timed ? o.max_events : o.burst;

    for (uint64_t i = 0; r->accepted < want; i++) { /* bounded: the clock or the count */
        int err = mely_post(&r->m, HELD, count, r);
        if (err == 0)
            r->accepted++;
        else if (err == MELY_EAGAIN)
            r->refused++;
        else if (r->other++ == 0)
            r->other_err = err;
        if (r->timed && (i & 1023) == 0 && now_ns() >= end)
            break;
        if (!r->timed && err != 0)
            break;
    }
    r->post_s = (now_ns() - t0) / 1e9;
}

static void flood_handler(void *arg)
{
    struct run *r = arg;
    post_all(r);
    atomic_store(&r->flooded, true);
}

/* The run's own thread: waits for the held handler, posts (or lets the
 * handler on worker 0 post), releases, waits for every event and for the
 * memory to come back, stops the runtime. */
static void *driver(void *arg)
{
    struct run *r = arg;
    pthread_t smp;

    /* What the runtime keeps anyway is resident before the measure. */
    for (int i = 0; i < 4096; i++)
        mely_post(&r->m, HELD, count, r);
    for (int i = 0; i < 10000 && atomic_load(&r->ran) < 4096; i++)
        sleep_us(1000);
    sleep_us(100000);
    atomic_store(&r->ran, 0);
    r->before = rss_bytes();
    atomic_store(&r->peak_seen, r->before);
    atomic_store(&r->sampling, true);
    if (pthread_create(&smp, NULL, sampler, r) != 0)
        atomic_store(&r->sampling, false);

    mely_post(&r->m, HELD, hold, r);
    for (int i = 0; i < 10000 && !atomic_load(&r->held); i++)
        sleep_us(1000);
    if (strcmp(o.from, "worker") == 0 && r->timed) {
        mely_post(&r->m, POSTER, flood_handler, r);
        for (int i = 0; i < 600000 && !atomic_load(&r->flooded); i++)
            sleep_us(1000);
    } else {
        post_all(r);
    }
    atomic_store(&r->release, true);
    for (int i = 0; i < 600000 && atomic_load(&r->ran) < r->accepted; i++)
        sleep_us(1000);
    /* back_ms: when the RSS is first within 2x of before; `after`: the RSS
     * 300 ms later (or at 5 s), once the pass has ended. */
    uint64_t done = now_ns(), deadline = done + 5000000000ull, settle = 0;
    r->back_ms = -1;
    do {
        sleep_us(2000);
        r->after = rss_bytes();
        uint64_t t = now_ns();
        if (r->back_ms < 0 && r->after <= 2 * r->before) {
            r->back_ms = (t - done) / 1e6;
            settle = t + 300000000ull;
        }
        if (settle && t >= settle)
            break;
    } while (now_ns() < deadline);
    if (atomic_exchange(&r->sampling, false))
        pthread_join(smp, NULL);
    r->peak = atomic_load(&r->peak_seen);
    mely_stop(&r->m);
    return NULL;
}

static bool run_one(struct bench *b, struct run *r, unsigned budget_mb, const char *what)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
#if HAVE_BUDGET
    cfg.event_budget_mb = budget_mb;
#else
    (void)budget_mb;
#endif
    if (bench_rt_open_cfg(b, &r->m, &cfg, 2) != 0)
        return false;
    pthread_t t;
    bool ok = pthread_create(&t, NULL, driver, r) == 0;
    if (ok) {
        ok = bench_mely_run(b, &r->m, o.seconds + 600, what) == 0;
        pthread_join(t, NULL);
    }
    bench_rt_close(b, &r->m, what);
    return ok && atomic_load(&r->ran) == r->accepted;
}

enum { C_ROW, C_BUDGET, C_ACCEPTED, C_REFUSED, C_RATE, C_BEFORE, C_PEAK, C_AFTER, C_RATIO, C_BACK,
       NCOLS };

static const struct bench_column columns[NCOLS] = {
    [C_ROW] = {.title = "workload", .key = "workload", .width = 16},
    [C_BUDGET] = {.title = "budget", .key = "budget_mb", .width = 8, .right = true},
    [C_ACCEPTED] = {.title = "accepted", .key = "accepted", .width = 10, .right = true},
    [C_REFUSED] = {.title = "refused", .key = "refused", .width = 10, .right = true},
    [C_RATE] = {.title = "Mposts/s", .key = "mposts_per_s", .width = 9, .right = true},
    [C_BEFORE] = {.title = "RSS before MB", .key = "rss_before_mb", .width = 13, .right = true},
    [C_PEAK] = {.title = "peak MB", .key = "rss_peak_mb", .width = 8, .right = true},
    [C_AFTER] = {.title = "after MB", .key = "rss_after_mb", .width = 8, .right = true},
    [C_RATIO] = {.title = "after/before", .key = "after_over_before", .width = 12, .right = true},
    [C_BACK] = {.title = "within 2x after ms", .key = "back_ms", .width = 10, .right = true},
};

static void row(struct bench_table *t, unsigned i, const char *name, const char *budget,
                const struct run *r, bool ok)
{
    bench_cell(t, i, C_ROW, "%s", name);
    bench_cell(t, i, C_BUDGET, "%s", budget);
    if (!ok) {
        bench_cell(t, i, C_ACCEPTED, "failed");
        return;
    }
    bench_cell(t, i, C_ACCEPTED, "%" PRIu64, r->accepted);
    bench_cell(t, i, C_REFUSED, "%" PRIu64, r->refused);
    bench_cell(t, i, C_RATE, "%.2f", (r->accepted + r->refused) / r->post_s / 1e6);
    bench_cell(t, i, C_BEFORE, "%.1f", r->before / 1e6);
    bench_cell(t, i, C_PEAK, "%.1f", r->peak / 1e6);
    bench_cell(t, i, C_AFTER, "%.1f", r->after / 1e6);
    bench_cell(t, i, C_RATIO, "%.2f", (double)r->after / (double)r->before);
    if (r->back_ms >= 0)
        bench_cell(t, i, C_BACK, "%.0f", r->back_ms);
    else
        bench_cell(t, i, C_BACK, "never");
}

int main(int argc, char **argv)
{
    struct bench b = {.name = "flood"};
    struct bench_machine mc;
    static struct run flood, burst;
    char budget[32];

    int rc = bench_options("flood [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    if (strcmp(o.from, "foreign") != 0 && strcmp(o.from, "worker") != 0) {
        fprintf(stderr, "flood: --from: expected foreign or worker\n");
        return 2;
    }
    printf("mely flood benchmark\n");
    bench_machine_get(&mc, stdout);
    bench_print_mely_env(stdout);
    setenv("MELY_STALL_MS", "0", 1); /* the held handler stalls on purpose */
    if (HAVE_BUDGET)
        snprintf(budget, sizeof(budget), "%u", o.budget_mb);
    else
        snprintf(budget, sizeof(budget), "none");
    printf("flood: from %s, %g s, budget %s MiB, at most %" PRIu64 " events accepted; "
           "burst: %" PRIu64 " events, default budget\n",
           o.from, o.seconds, budget, o.max_events, o.burst);

    flood.timed = true;
    bool flood_ok = run_one(&b, &flood, o.budget_mb, "flood");
    if (flood.other)
        printf("flood: %" PRIu64 " posts failed otherwise, the first with %s\n", flood.other,
               mely_strerror(flood.other_err));
    bool burst_ok = run_one(&b, &burst, 0, "burst");
    if (burst.other || burst.refused)
        printf("burst: a post failed: %s\n", mely_strerror(burst.other_err));

    struct bench_table t;
    struct bench_param params[8];
    bench_table_init(&t, columns, NCOLS, 2);
    row(&t, 0, "flood", budget, &flood, flood_ok);
    row(&t, 1, "burst", HAVE_BUDGET ? "default" : "none", &burst, burst_ok);
    printf("\n");
    bench_table_print(stdout, &t);
    printf("\n");
    bench_table_csv(&b, o.csv, &mc, params, bench_opt_params(options, params, 8), &t);
    bench_table_free(&t);
    return flood_ok && burst_ok ? 0 : 1;
}
