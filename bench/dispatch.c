/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c: what one event costs in mely, next to Boost.Asio strands.
 *
 * Four workloads on a runtime of W pinned workers (bench/README.md says how
 * each is timed): (i) local post+run on one color, (ii) cross-core throughput
 * from a producer on worker 0 to 64 colors of worker 1, (iii) ping-pong
 * between two colors on two workers, (iv) idle CPU. (i)-(iii) run R times on
 * a fresh runtime each, the median is reported, next to the machine's floors
 * (two plain threads: a ping-pong, an SPSC ring) and to the same workloads on
 * Boost.Asio in the peer program dispatch-asio (dispatch_asio.cpp), run as a
 * child with the same options. Every run is bounded by a watchdog.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"

/* ---- Parameters (kept equal to dispatch_asio.cpp) -------------------------------- */

enum {
    CHUNK = 1000,           /* events per driver/producer run */
    CONSUMERS = 64,         /* consumer colors in (ii) */
    MAX_IN_FLIGHT = 100000, /* (ii) flow control */
    PINGPONG_DIVISOR = 10,  /* round trips = N / 10 */
};

#define IDLE_SETTLE_US 200000 /* let workers start and park before measuring */
#define PEER "dispatch-asio"

static struct {
    unsigned workers, runs;
    uint64_t events;
    double idle_seconds;
    bool quick, no_asio;
    const char *csv;
} o;

static const struct bench_opt options[] = {
    {.name = "workers", .kind = OPT_UINT, .var = &o.workers, .lo = 2, .hi = MELY_MAX_WORKERS,
     .dflt = 2, .param = true, .help = "workers (and Asio threads)"},
    {.name = "events", .kind = OPT_U64, .var = &o.events, .lo = 1000, .hi = 1e10, .dflt = 1e7,
     .quick = 5e5, .param = true,
     .help = "events for local and cross-core; ping-pong does N/10 round trips"},
    {.name = "runs", .kind = OPT_UINT, .var = &o.runs, .lo = 1, .hi = 1000, .dflt = 5, .quick = 3,
     .param = true, .help = "runs per workload, the median is reported"},
    {.name = "idle-seconds", .kind = OPT_DOUBLE, .var = &o.idle_seconds, .lo = 0.1, .hi = 3600,
     .dflt = 5, .quick = 1, .help = "idle CPU measurement time"},
    {.name = "quick", .kind = OPT_QUICK, .var = &o.quick,
     .help = "small counts: the whole run takes a few seconds"},
    {.name = "csv", .kind = OPT_STR, .var = &o.csv, .sdflt = "bench/results/dispatch.csv",
     .help = "CSV output"},
    {.name = "no-asio", .kind = OPT_FLAG, .var = &o.no_asio,
     .help = "do not run the Boost.Asio peer (" PEER ")"},
    {.name = NULL},
};

static void empty(void *arg)
{
    (void)arg;
}

/* ---- (i) local post+run ---------------------------------------------------------- */

struct local {
    mely_t *m;
    mely_color_t color;
    uint64_t total; /* N: empties + driver runs */
    uint64_t ran;   /* events run, as the driver sees it */
    uint64_t runs;  /* driver runs */
    struct bench_span span;
    int err;
};

static void local_driver(void *arg)
{
    struct local *l = arg;

    bench_mark(&l->span, l->runs++ != 0); /* the end too, until the last run */
    l->ran++; /* this run; the empties posted before it have run (same color: FIFO) */
    if (l->ran >= l->total) {
        mely_stop(l->m);
        return;
    }
    uint64_t k = l->total - l->ran - 1; /* leave room for the last driver run */
    k = k > CHUNK ? CHUNK : k;
    int err = 0;
    for (uint64_t i = 0; i < k && !err; i++)
        err = mely_post(l->m, l->color, empty, NULL);
    l->ran += k; /* they will have run when the driver runs next */
    if (!err)
        err = mely_post(l->m, l->color, local_driver, l);
    if (err)
        bench_post_failed(l->m, &l->err, err);
}

/* A workload's run on a fresh runtime of o.workers workers: colors[0] is a
 * color of worker 0, colors[1..n1] colors of worker 1, `first` is posted to
 * colors[0]; *tot gets the counters. True if the run ended normally. */
static bool run_workload(const struct bench *b, const char *what, mely_t *m, mely_color_t *colors,
                         unsigned n1, mely_fn_t first, void *arg, double limit_s, int *err,
                         struct bench_totals *tot)
{
    bool ran = false;

    if (bench_rt_open(b, m, o.workers, 2) != 0)
        return false;
    if (bench_colors_of(b, m, 0, colors, 1) == 1 &&
        (n1 == 0 || bench_colors_of(b, m, 1, colors + 1, n1) == n1)) {
        int e = mely_post(m, colors[0], first, arg);
        if (e)
            fprintf(stderr, "dispatch: %s: mely_post: %s\n", what, mely_strerror(e));
        else
            ran = bench_mely_run(b, m, limit_s, what) == 0;
        if (bench_post_error(err))
            fprintf(stderr, "dispatch: %s: a post failed: %s\n", what, mely_strerror(*err));
    }
    *tot = bench_rt_totals(m);
    bench_rt_close(b, m, what);
    return ran;
}

static struct bench_sample run_local(const struct bench *b, void *arg, uint64_t n,
                                     struct bench_totals *tot)
{
    mely_t m;
    struct local l = {.m = &m, .total = n};
    (void)arg;

    if (!run_workload(b, "local post+run", &m, &l.color, 0, local_driver, &l,
                      bench_limit_s(n, 5000), &l.err, tot) || l.ran < n)
        return (struct bench_sample){.ok = false};
    return bench_span_sample(&l.span, n - 1, false); /* the events between the first and last run */
}

/* ---- (ii) cross-core throughput -------------------------------------------------- */

struct cross {
    mely_t *m;
    mely_color_t colors[1 + CONSUMERS]; /* the producer's, then the consumers' */
    uint64_t total;
    int err;

    /* the producer's (worker 0); span.t1 and .c1 the consumers' */
    alignas(64) uint64_t posted;
    unsigned next;
    bool started;
    struct bench_span span;

    /* the consumers' (worker 1): single writer, read by the producer */
    alignas(64) _Atomic uint64_t consumed;
};

static void cross_consume(void *arg)
{
    struct cross *x = arg;
    uint64_t c = atomic_load_explicit(&x->consumed, memory_order_relaxed) + 1;

    atomic_store_explicit(&x->consumed, c, memory_order_relaxed);
    if (c == x->total) {
        bench_mark(&x->span, true);
        mely_stop(x->m);
    }
}

static void cross_produce(void *arg)
{
    struct cross *x = arg;
    int err = 0;

    if (!x->started) {
        x->started = true;
        bench_mark(&x->span, false);
    }
    uint64_t done = atomic_load_explicit(&x->consumed, memory_order_relaxed);
    if (x->posted - done <= MAX_IN_FLIGHT) {
        uint64_t k = x->total - x->posted > CHUNK ? CHUNK : x->total - x->posted;
        for (uint64_t i = 0; i < k && !err; i++) {
            err = mely_post(x->m, x->colors[1 + x->next], cross_consume, x);
            x->next = (x->next + 1) % CONSUMERS;
        }
        x->posted += k;
    }
    if (!err && x->posted < x->total)
        err = mely_post(x->m, x->colors[0], cross_produce, x);
    if (err)
        bench_post_failed(x->m, &x->err, err);
}

static struct bench_sample run_cross(const struct bench *b, void *arg, uint64_t n,
                                     struct bench_totals *tot)
{
    struct bench_sample out = {.ok = false};
    mely_t m;
    struct cross *x = aligned_alloc(64, sizeof(struct cross));
    (void)arg;

    if (!x) {
        fprintf(stderr, "dispatch: out of memory\n");
        return out;
    }
    memset(x, 0, sizeof(*x));
    x->m = &m;
    x->total = n;
    if (run_workload(b, "cross-core throughput", &m, x->colors, CONSUMERS, cross_produce, x,
                     bench_limit_s(n, 5000), &x->err, tot) &&
        (out = bench_span_sample(&x->span, n, true)).ok) {
        /* The counter has one writer only if every consumer ran on worker 1. */
        if (tot->run[1] != n)
            fprintf(stderr, "dispatch: cross-core: worker 1 ran %" PRIu64 " events, not %" PRIu64
                            ": consumer colors moved (stealing?)\n",
                    tot->run[1], n);
    }
    free(x);
    return out;
}

/* ---- (iii) ping-pong ------------------------------------------------------------- */

struct pingpong {
    mely_t *m;
    mely_color_t ab[2]; /* A on worker 0, B on worker 1 */
    uint64_t trips;
    uint64_t count; /* A's handler only */
    struct bench_span span;
    int err;
};

static void pp_a(void *arg);

static void pp_b(void *arg)
{
    struct pingpong *p = arg;
    int err = mely_post(p->m, p->ab[0], pp_a, p);
    if (err)
        bench_post_failed(p->m, &p->err, err);
}

static void pp_a(void *arg)
{
    struct pingpong *p = arg;

    if (p->count == 0 || p->count == p->trips)
        bench_mark(&p->span, p->count != 0);
    if (p->count == p->trips) {
        mely_stop(p->m);
        return;
    }
    p->count++;
    int err = mely_post(p->m, p->ab[1], pp_b, p);
    if (err)
        bench_post_failed(p->m, &p->err, err);
}

static struct bench_sample run_pingpong(const struct bench *b, void *arg, uint64_t trips,
                                        struct bench_totals *tot)
{
    mely_t m;
    struct pingpong p = {.m = &m, .trips = trips};
    (void)arg;

    if (!run_workload(b, "ping-pong", &m, p.ab, 1, pp_a, &p, bench_limit_s(trips, 200000),
                      &p.err, tot))
        return (struct bench_sample){.ok = false};
    return bench_span_sample(&p.span, trips, false);
}

/* ---- (iv) idle CPU, and the machine's floors -------------------------------------- */

/* % of one core per worker while idle, or a negative value on failure. */
static double measure_idle(const struct bench *b, struct bench_totals *tot)
{
    mely_t m;
    struct bench_bg bg;
    double pct = -1.0;

    if (bench_rt_open(b, &m, o.workers, 2) != 0)
        return pct;
    if (bench_bg_start(b, &bg, &m, "idle") == 0) {
        struct cpu_window w = idle_window(IDLE_SETTLE_US, (uint64_t)(o.idle_seconds * 1e6));
        if (bench_bg_stop(b, &bg, "idle") == 0)
            pct = w.cpu_s * 100.0 / w.wall_s / (double)mely_workers(&m);
        *tot = bench_rt_totals(&m);
    }
    bench_rt_close(b, &m, "idle");
    return pct;
}

/* The floors, as workloads of bench_measure(): they move between periods on
 * these guests, so the ratio to the floor of the same run is what compares. */
static struct bench_sample floor_pingpong(const struct bench *b, void *arg, uint64_t n,
                                          struct bench_totals *tot)
{
    (void)b, (void)arg, (void)tot;
    return bench_floor_pingpong(n);
}

static struct bench_sample floor_spsc(const struct bench *b, void *arg, uint64_t n,
                                      struct bench_totals *tot)
{
    (void)b, (void)arg, (void)tot;
    return bench_floor_spsc(n);
}

/* ---- The results ----------------------------------------------------------------- */

/* One row: mely's figure, the peer's, mely's advantage, the targets. */
struct row {
    const char *workload, *key, *unit;
    const char *peer_key; /* the peer's name for its figure; NULL: none */
    double peer_scale;    /* from the peer's unit to the unit shown; 0 means 1 */
    bool lower_is_better; /* times: yes; throughputs: no */
    double abs;           /* at most (lower_is_better) or at least this; 0: no such target */
    double ratio_target;  /* mely's advantage must be at least this; 0: none */
    const char *target;   /* shown as is; "" for none */
    bool strict;          /* the absolute target excludes its bound */
    int num, den;         /* a ratio of two rows' figures (den: ns per event if den_ns) */
    bool den_ns;
    bool have_mely, have_peer;
    double mely, peer, advantage;
    const char *status; /* PASS, MISS, n/a */
    char why[160];      /* what missed */
};

enum { ROW_LOCAL, ROW_CROSS, ROW_SPSC, ROW_PINGPONG, ROW_FLOOR, ROW_IDLE,
       ROW_CROSS_LOCAL, ROW_CROSS_SPSC, ROW_PP_FLOOR, NROWS };

static struct row rows[NROWS] = {
    [ROW_LOCAL] = {"local post+run", "local_ns_per_event", "ns/event", "local_ns_per_event",
                   .lower_is_better = true, .abs = 30, .ratio_target = 3,
                   .target = "<=30 ns, >=3x asio"},
    [ROW_CROSS] = {"cross-core throughput", "crosscore_mevents_per_s", "Mevents/s",
                   "crosscore_events_per_s", 1e-6, .abs = 10, .ratio_target = 3,
                   .target = ">=10 M/s, >=3x asio"},
    [ROW_SPSC] = {"cross-core floor (SPSC ring)", "spsc_floor_mrecords_per_s", "Mrecords/s",
                  .target = ""},
    [ROW_PINGPONG] = {"ping-pong", "pingpong_ns_per_rt", "ns/round trip", "pingpong_ns_per_rt",
                      .lower_is_better = true, .ratio_target = 3, .target = ">=3x asio"},
    [ROW_FLOOR] = {"ping-pong floor (2 threads)", "pingpong_floor_ns_per_rt", "ns/round trip",
                   .lower_is_better = true, .target = ""},
    [ROW_IDLE] = {"idle CPU", "idle_pct_core_per_worker", "% core/worker",
                  .lower_is_better = true, .abs = 2, .strict = true, .target = "<2%"},
    /* the ratios of this run's medians, with the cross-core issue's targets */
    [ROW_CROSS_LOCAL] = {"cross-core / local rate", "cross_vs_local", "x", .abs = 0.5,
                         .target = ">=0.5", .num = ROW_CROSS, .den = ROW_LOCAL, .den_ns = true},
    [ROW_CROSS_SPSC] = {"cross-core / SPSC floor", "cross_vs_spsc_floor", "x", .abs = 0.2,
                        .target = ">=0.2", .num = ROW_CROSS, .den = ROW_SPSC},
    [ROW_PP_FLOOR] = {"ping-pong / its floor", "pingpong_vs_floor", "x", .lower_is_better = true,
                      .abs = 1.5, .target = "<=1.5", .num = ROW_PINGPONG, .den = ROW_FLOOR},
};

/* Sets r's figure if it is a ratio of two rows, its advantage (with both
 * figures) and its status: MISS without a mely figure; n/a with neither an
 * absolute target nor a ratio to the peer; else PASS if every target is
 * met, MISS otherwise, with the reasons in why. */
static void judge(struct row *r)
{
    if (r->num) {
        const struct row *n = &rows[r->num], *d = &rows[r->den];
        double dv = r->den_ns && d->mely > 0 ? 1e3 / d->mely : d->mely; /* as M events/s */
        r->have_mely = n->have_mely && d->have_mely && dv > 0;
        r->mely = r->have_mely ? n->mely / dv : 0;
    }
    bool known = r->have_mely && r->have_peer && r->mely > 0 && r->peer > 0;
    bool ratio_known = known && r->ratio_target > 0;
    bool abs_ok = !r->lower_is_better ? r->mely >= r->abs
                  : r->strict         ? r->mely < r->abs
                                      : r->mely <= r->abs;

    if (known)
        r->advantage = r->lower_is_better ? r->peer / r->mely : r->mely / r->peer;
    r->status = "MISS";
    if (!r->have_mely) {
        snprintf(r->why, sizeof(r->why), "no mely figure (see the messages above)");
        return;
    }
    if (r->abs == 0 && !ratio_known) {
        r->status = "n/a";
        return;
    }
    if (r->abs != 0 && !abs_ok)
        snprintf(r->why, sizeof(r->why), "absolute target missed");
    if (ratio_known && r->advantage < r->ratio_target) {
        size_t l = strlen(r->why);
        snprintf(r->why + l, sizeof(r->why) - l, "%sadvantage %.2fx < %.0fx", l ? "; " : "",
                 r->advantage, r->ratio_target);
    }
    r->status = r->why[0] ? "MISS" : "PASS";
}

/* A figure as the table shows it: "-" if missing, no decimals from 100 up. */
static void figure(struct bench_table *t, unsigned row, unsigned col, bool have, double v)
{
    if (!have)
        bench_cell(t, row, col, "-");
    else
        bench_cell(t, row, col, v >= 100 ? "%.0f" : "%.2f", v);
}

enum { C_NAME, C_KEY, C_UNIT, C_MELY, C_MELY_CSV, C_PEER, C_PEER_CSV, C_ADV, C_ADV_CSV, C_TARGET,
       C_TARGET_CSV, C_STATUS, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [C_NAME] = {.title = "workload", .width = 22},
    [C_KEY] = {.key = "workload"},
    [C_UNIT] = {.title = "unit", .key = "unit", .width = 14},
    [C_MELY] = {.title = "mely", .width = 10, .right = true},
    [C_MELY_CSV] = {.key = "mely"},
    [C_PEER] = {.title = "asio strand", .width = 12, .right = true},
    [C_PEER_CSV] = {.key = "asio"},
    [C_ADV] = {.title = "mely advantage", .width = 15, .right = true},
    [C_ADV_CSV] = {.key = "mely_advantage"},
    [C_TARGET] = {.title = "target", .width = 22, .gap = 2},
    [C_TARGET_CSV] = {.key = "target"},
    [C_STATUS] = {.title = "status", .key = "status"},
};

/* Prints the rows as a table, the misses under it, and writes the CSV file. */
static void report(const struct bench *b, const struct bench_machine *mc)
{
    struct bench_table t;
    struct bench_param params[4];

    bench_table_init(&t, columns, NCOLS, NROWS);
    for (unsigned i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        bool both = r->have_mely && r->have_peer;
        bench_cell(&t, i, C_NAME, "%s", r->workload);
        bench_cell(&t, i, C_KEY, "%s", r->key);
        bench_cell(&t, i, C_UNIT, "%s", r->unit);
        figure(&t, i, C_MELY, r->have_mely, r->mely);
        figure(&t, i, C_PEER, r->have_peer, r->peer);
        figure(&t, i, C_ADV, both, r->advantage);
        if (both)
            bench_cell(&t, i, C_ADV, "%.2fx", r->advantage);
        bench_cell(&t, i, C_TARGET, "%s", r->target[0] ? r->target : "-");
        bench_cell(&t, i, C_TARGET_CSV, "%s", r->target);
        bench_cell(&t, i, C_STATUS, "%s", r->status);
        if (r->have_mely)
            bench_cell(&t, i, C_MELY_CSV, "%.4f", r->mely);
        if (r->have_peer)
            bench_cell(&t, i, C_PEER_CSV, "%.4f", r->peer);
        if (both)
            bench_cell(&t, i, C_ADV_CSV, "%.3f", r->advantage);
    }
    bench_table_print(stdout, &t);
    for (unsigned i = 0; i < NROWS; i++)
        if (rows[i].why[0])
            printf("  %s: %s\n", rows[i].workload, rows[i].why);
    bench_load_warn(b);
    printf("\n");
    bench_table_csv(b, o.csv, mc, params, bench_opt_params(options, params, 4), &t);
    bench_table_free(&t);
}

/* ---- The Boost.Asio peer --------------------------------------------------------- */

/* A line "asio,<peer_key>,<value>" of the peer's stdout: that row's figure. */
static void peer_line(const char *line, void *arg)
{
    char who[64], key[64];
    double v;
    (void)arg;

    if (sscanf(line, "%63[^,],%63[^,],%lf", who, key, &v) != 3 || strcmp(who, "asio") != 0)
        return;
    for (unsigned i = 0; i < NROWS; i++)
        if (rows[i].peer_key && strcmp(key, rows[i].peer_key) == 0) {
            rows[i].peer = v * (rows[i].peer_scale != 0 ? rows[i].peer_scale : 1.0);
            rows[i].have_peer = true;
        }
}

/* Runs the peer with our options; its figures go to the rows. */
static void run_asio(struct bench *b)
{
    char peer[4200], real[PATH_MAX], load[64], workers[24], events[24], runs[24];

    if (bench_find_peer(PEER, peer, sizeof(peer)) != 0) {
        printf("\nBoost.Asio peer not built (install libboost-dev and re-run make bench): "
               "ratios skipped\n");
        return;
    }
    printf("\nBoost.Asio peer: %s\n", realpath(peer, real) ? real : peer);
    snprintf(workers, sizeof(workers), "%u", o.workers);
    snprintf(events, sizeof(events), "%" PRIu64, o.events);
    snprintf(runs, sizeof(runs), "%u", o.runs);
    char *argv[] = {peer, "--workers", workers, "--events", events, "--runs", runs,
                    o.quick ? "--quick" : NULL, NULL};
    struct bench_probe p0 = bench_probe_now();
    bench_run_peer(b, peer, argv, peer_line, NULL);
    struct bench_probe p1 = bench_probe_now();
    if (bench_load_note(b, &p0, &p1, load, sizeof(load))[0])
        printf("  while the peer ran: %s\n", load + 2);
    if (!rows[ROW_LOCAL].have_peer && !rows[ROW_CROSS].have_peer && !rows[ROW_PINGPONG].have_peer)
        printf("Boost.Asio peer gave no figures: ratios skipped\n");
    else
        printf("  asio medians: local %.2f ns/event, cross-core %.2f Mevents/s, "
               "ping-pong %.0f ns/round trip\n",
               rows[ROW_LOCAL].peer, rows[ROW_CROSS].peer, rows[ROW_PINGPONG].peer);
}

/* ---- Main ------------------------------------------------------------------------ */

static void measure_mely(struct bench *b)
{
    struct row *r = rows;
    uint64_t trips = o.events / PINGPONG_DIVISOR;

    printf("\nmely:\n");
    r[ROW_LOCAL].have_mely = bench_measure(b, "local post+run", "ns/event", run_local, NULL,
                                           o.runs, o.events, 1.0, true, &r[ROW_LOCAL].mely);
    r[ROW_CROSS].have_mely = bench_measure(b, "cross-core throughput", "Mevents/s", run_cross,
                                           NULL, o.runs, o.events, 1e-6, true, &r[ROW_CROSS].mely);
    r[ROW_SPSC].have_mely = bench_measure(b, "SPSC ring floor", "Mrecords/s", floor_spsc, NULL,
                                          o.runs, 4 * o.events, 1.0, false, &r[ROW_SPSC].mely);
    r[ROW_FLOOR].have_mely = bench_measure(b, "ping-pong floor", "ns/round trip", floor_pingpong,
                                           NULL, o.runs, trips, 1.0, false, &r[ROW_FLOOR].mely);
    r[ROW_PINGPONG].have_mely = bench_measure(b, "ping-pong", "ns/round trip", run_pingpong, NULL,
                                              o.runs, trips, 1.0, true, &r[ROW_PINGPONG].mely);
    if (r[ROW_FLOOR].have_mely && r[ROW_PINGPONG].have_mely)
        printf("  ping-pong / floor: %.2fx (the floor is two plain threads passing a cache line)\n",
               r[ROW_PINGPONG].mely / r[ROW_FLOOR].mely);
}

static void measure_idle_row(struct bench *b)
{
    struct bench_totals it;
    static char name[48];

    memset(&it, 0, sizeof(it));
    snprintf(name, sizeof(name), "idle CPU (%g s)", o.idle_seconds);
    rows[ROW_IDLE].workload = name;
    printf("\nidle: %u workers, nothing posted, %g s\n", o.workers, o.idle_seconds);
    fflush(stdout);
    double idle = measure_idle(b, &it);
    rows[ROW_IDLE].have_mely = idle >= 0;
    rows[ROW_IDLE].mely = idle;
    if (idle >= 0)
        printf("  idle CPU: %.3f %% of a core per worker   [parks %" PRIu64 ", wakeups %" PRIu64
               "]\n",
               idle, it.sum.parks, it.sum.wakeups);
}

int main(int argc, char **argv)
{
    struct bench b = {.name = "dispatch"};
    struct bench_machine mc;

    int rc = bench_options("dispatch [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    printf("mely dispatch benchmark\n");
    bench_machine_get(&mc, stdout);
    printf("setup: %u workers, pinned; N = %" PRIu64 " events; %" PRIu64
           " ping-pong round trips; %u runs per workload (median)\n",
           o.workers, o.events, o.events / PINGPONG_DIVISOR, o.runs);
    if (o.workers > mc.usable)
        printf("note: more workers than usable CPUs: workers share CPUs, figures mean little\n");
    bench_print_mely_env(stdout);
    measure_mely(&b);
    if (o.no_asio)
        printf("\nBoost.Asio peer skipped (--no-asio): ratios skipped\n");
    else
        run_asio(&b);
    measure_idle_row(&b);
    for (unsigned i = 0; i < NROWS; i++)
        judge(&rows[i]); /* the ratio rows last: after the rows they divide */
    printf("\n");
    report(&b, &mc);
    for (unsigned i = 0; i < NROWS; i++)
        if (!rows[i].have_mely)
            return 1;
    return 0;
}
