/*
 * dispatch.c: what one event costs in mely, next to Boost.Asio strands.
 *
 * Four workloads, on a runtime of W workers (2 by default), pinned:
 *
 *  (i)   local post+run: one color owned by worker 0. A driver handler posts
 *        1000 events of an empty handler to its own color (tail) and re-posts
 *        itself at the tail, until N events ran (empties + driver runs). Timed
 *        from the driver's first run to its last: the N-1 events in between
 *        -> ns/event.
 *  (ii)  cross-core throughput: a producer on a color of worker 0 posts empty
 *        events round-robin to 64 colors of worker 1, 1000 per producer run,
 *        re-posting itself at the tail. Flow control: the consumers count what
 *        they ran in a counter that only worker 1 writes (its own cache line,
 *        relaxed); the producer posts nothing (only re-posts itself) while more
 *        than 100,000 events are in flight. The N-th consumed event stops the
 *        clock and the runtime -> N / elapsed events/s.
 *  (iii) ping-pong: color A on worker 0, color B on worker 1, A posts to B and
 *        B to A, N/10 round trips -> ns per round trip.
 *  (iv)  idle CPU: nothing posted, process CPU time (getrusage) over 5 s while
 *        mely_run() runs in a thread -> % of one core per worker.
 *
 * (i)-(iii) run R times each (5), on a fresh runtime each time; the median is
 * reported. The same workloads run on Boost.Asio in the peer program
 * dispatch-asio (dispatch_asio.cpp), found next to this executable and run as a
 * child process with the same options; the table quotes mely's advantage over
 * it (> 1: mely is better) next to the targets. Rows also go to a CSV file.
 *
 * Every run is bounded: a watchdog stops a runtime that takes far longer than it
 * should (and gives up on the process if mely_run() then does not return).
 * The machines are small shared KVM guests: each run also reports how busy the
 * CPUs were with other processes and with the hypervisor (/proc/stat), and the
 * table is followed by a warning when some run was disturbed. Clocks, load
 * probe, watchdog, runtime helpers, runs and peer come from harness.h; rows,
 * table and CSV from report.h.
 *
 * Public API only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/harness.h"
#include "bench/report.h"
#include "mely/mely.h"

/* ---- Parameters (kept equal to dispatch_asio.cpp) -------------------------------- */

enum {
    CHUNK = 1000,             /* events per driver/producer run */
    CONSUMERS = 64,           /* consumer colors in (ii) */
    MAX_IN_FLIGHT = 100000,   /* (ii) flow control */
    PINGPONG_DIVISOR = 10,    /* round trips = N / 10 */
    CACHELINE = 64,
};

#define EVENTS_DEFAULT 10000000ull
#define EVENTS_QUICK 500000ull
#define RUNS_DEFAULT 5u
#define RUNS_QUICK 3u
#define IDLE_SECONDS_DEFAULT 5.0
#define IDLE_SECONDS_QUICK 1.0
#define IDLE_SETTLE_NS 200000000ull /* let workers start and park before measuring */
#define CSV_DEFAULT "bench/results/dispatch.csv"
#define PEER "dispatch-asio"

/* Targets. */
#define TARGET_LOCAL_NS 30.0
#define TARGET_CROSS_MEPS 10.0
#define TARGET_RATIO 3.0
#define TARGET_IDLE_PCT 2.0

struct options {
    unsigned workers;
    uint64_t events;
    unsigned runs;
    bool quick;
    double idle_seconds;
    const char *csv;
    bool asio;
};

/* ---- Handlers -------------------------------------------------------------------- */

static void empty(void *arg)
{
    (void)arg;
}

/* ---- (i) local post+run ---------------------------------------------------------- */

struct local {
    mely_t *m;
    mely_color_t color;
    uint64_t total;    /* N: empties + driver runs */
    uint64_t ran;      /* events run, as the driver sees it */
    uint64_t runs;     /* driver runs */
    uint64_t t0, t1, c0, c1;
    _Atomic int err;
};

static void local_driver(void *arg)
{
    struct local *l = arg;
    uint64_t t = bench_now_ns(), c = bench_cycles();

    if (l->runs++ == 0) {
        l->t0 = t;
        l->c0 = c;
    }
    l->ran++; /* this run; the empties posted before it have run (same color: FIFO) */
    if (l->ran >= l->total) {
        l->t1 = t;
        l->c1 = c;
        mely_stop(l->m);
        return;
    }
    uint64_t k = l->total - l->ran - 1; /* leave room for the last driver run */
    if (k > CHUNK)
        k = CHUNK;
    for (uint64_t i = 0; i < k; i++) {
        int err = mely_post(l->m, l->color, empty, NULL);
        if (err) {
            bench_post_failed(l->m, &l->err, err);
            return;
        }
    }
    l->ran += k; /* they will have run when the driver runs next */
    int err = mely_post(l->m, l->color, local_driver, l);
    if (err)
        bench_post_failed(l->m, &l->err, err);
}

static struct bench_sample run_local(const struct bench *b, unsigned workers, uint64_t n,
                                     struct bench_totals *tot)
{
    struct bench_sample out = {.ok = false};
    mely_t m = {0};
    struct local l = {.m = &m, .total = n};

    if (bench_rt_open(b, &m, workers, 2) != 0)
        return out;
    if (bench_colors_of(b, &m, 0, &l.color, 1) == 1) {
        int err = mely_post(&m, l.color, local_driver, &l);
        if (err)
            fprintf(stderr, "dispatch: local: mely_post: %s\n", mely_strerror(err));
        else if (bench_mely_run(b, &m, bench_limit_ns(n, 5000), "local post+run") == 0 &&
                 l.t1 != 0) {
            out.ok = true;
            out.value = (double)(l.t1 - l.t0) / (double)(n - 1);
            out.cycles = (double)(l.c1 - l.c0) / (double)(n - 1);
        }
        if (atomic_load(&l.err))
            fprintf(stderr, "dispatch: local: a post failed: %s\n", mely_strerror(l.err));
    }
    *tot = bench_rt_totals(&m);
    bench_rt_close(b, &m, "local post+run");
    return out;
}

/* ---- (ii) cross-core throughput -------------------------------------------------- */

struct cross {
    mely_t *m;
    mely_color_t producer;
    mely_color_t consumers[CONSUMERS];
    uint64_t total;
    _Atomic int err;

    /* the producer's (worker 0) */
    alignas(CACHELINE) uint64_t posted;
    unsigned next;
    bool started;
    uint64_t t0, c0;

    /* the consumers' (worker 1): single writer, read by the producer */
    alignas(CACHELINE) _Atomic uint64_t consumed;
    uint64_t t1, c1;
};

static void cross_consume(void *arg)
{
    struct cross *x = arg;
    uint64_t c = atomic_load_explicit(&x->consumed, memory_order_relaxed) + 1;

    atomic_store_explicit(&x->consumed, c, memory_order_relaxed);
    if (c == x->total) {
        x->t1 = bench_now_ns();
        x->c1 = bench_cycles();
        mely_stop(x->m);
    }
}

static void cross_produce(void *arg)
{
    struct cross *x = arg;

    if (!x->started) {
        x->started = true;
        x->t0 = bench_now_ns();
        x->c0 = bench_cycles();
    }
    uint64_t done = atomic_load_explicit(&x->consumed, memory_order_relaxed);
    if (x->posted - done <= MAX_IN_FLIGHT) {
        uint64_t k = x->total - x->posted;
        if (k > CHUNK)
            k = CHUNK;
        for (uint64_t i = 0; i < k; i++) {
            int err = mely_post(x->m, x->consumers[x->next], cross_consume, x);
            if (err) {
                bench_post_failed(x->m, &x->err, err);
                return;
            }
            if (++x->next == CONSUMERS)
                x->next = 0;
        }
        x->posted += k;
    }
    if (x->posted < x->total) {
        int err = mely_post(x->m, x->producer, cross_produce, x);
        if (err)
            bench_post_failed(x->m, &x->err, err);
    }
}

static struct bench_sample run_cross(const struct bench *b, unsigned workers, uint64_t n,
                                     struct bench_totals *tot)
{
    struct bench_sample out = {.ok = false};
    mely_t m = {0};
    struct cross *x = aligned_alloc(CACHELINE, sizeof(struct cross));

    if (!x) {
        fprintf(stderr, "dispatch: out of memory\n");
        return out;
    }
    memset(x, 0, sizeof(*x));
    x->m = &m;
    x->total = n;
    atomic_init(&x->consumed, 0);
    atomic_init(&x->err, 0);
    if (bench_rt_open(b, &m, workers, 2) != 0) {
        free(x);
        return out;
    }
    if (bench_colors_of(b, &m, 0, &x->producer, 1) == 1 &&
        bench_colors_of(b, &m, 1, x->consumers, CONSUMERS) == CONSUMERS) {
        int err = mely_post(&m, x->producer, cross_produce, x);
        if (err)
            fprintf(stderr, "dispatch: cross-core: mely_post: %s\n", mely_strerror(err));
        else if (bench_mely_run(b, &m, bench_limit_ns(n, 5000), "cross-core throughput") == 0 &&
                 x->t1 != 0) {
            out.ok = true;
            out.value = (double)n * 1e9 / (double)(x->t1 - x->t0);
            out.cycles = (double)(x->c1 - x->c0) / (double)n;
        }
        if (atomic_load(&x->err))
            fprintf(stderr, "dispatch: cross-core: a post failed: %s\n", mely_strerror(x->err));
    }
    *tot = bench_rt_totals(&m);
    /* The counter has one writer only if every consumer ran on worker 1. */
    if (out.ok && tot->run[1] != n)
        fprintf(stderr, "dispatch: cross-core: worker 1 ran %" PRIu64 " events, not %" PRIu64
                        ": consumer colors moved (stealing?)\n",
                tot->run[1], n);
    bench_rt_close(b, &m, "cross-core throughput");
    free(x);
    return out;
}

/* ---- (iii) ping-pong ------------------------------------------------------------- */

struct pingpong {
    mely_t *m;
    mely_color_t a, b;
    uint64_t trips;
    uint64_t count; /* A's handler only */
    uint64_t t0, t1, c0, c1;
    _Atomic int err;
};

static void pp_a(void *arg);

static void pp_b(void *arg)
{
    struct pingpong *p = arg;
    int err = mely_post(p->m, p->a, pp_a, p);
    if (err)
        bench_post_failed(p->m, &p->err, err);
}

static void pp_a(void *arg)
{
    struct pingpong *p = arg;

    if (p->count == 0) {
        p->t0 = bench_now_ns();
        p->c0 = bench_cycles();
    }
    if (p->count == p->trips) {
        p->t1 = bench_now_ns();
        p->c1 = bench_cycles();
        mely_stop(p->m);
        return;
    }
    p->count++;
    int err = mely_post(p->m, p->b, pp_b, p);
    if (err)
        bench_post_failed(p->m, &p->err, err);
}

static struct bench_sample run_pingpong(const struct bench *b, unsigned workers, uint64_t trips,
                                        struct bench_totals *tot)
{
    struct bench_sample out = {.ok = false};
    mely_t m = {0};
    struct pingpong p = {.m = &m, .trips = trips};

    if (bench_rt_open(b, &m, workers, 2) != 0)
        return out;
    if (bench_colors_of(b, &m, 0, &p.a, 1) == 1 && bench_colors_of(b, &m, 1, &p.b, 1) == 1) {
        int err = mely_post(&m, p.a, pp_a, &p);
        if (err)
            fprintf(stderr, "dispatch: ping-pong: mely_post: %s\n", mely_strerror(err));
        else if (bench_mely_run(b, &m, bench_limit_ns(trips, 200000), "ping-pong") == 0 &&
                 p.t1 != 0) {
            out.ok = true;
            out.value = (double)(p.t1 - p.t0) / (double)trips;
            out.cycles = (double)(p.c1 - p.c0) / (double)trips;
        }
        if (atomic_load(&p.err))
            fprintf(stderr, "dispatch: ping-pong: a post failed: %s\n", mely_strerror(p.err));
    }
    *tot = bench_rt_totals(&m);
    bench_rt_close(b, &m, "ping-pong");
    return out;
}

/* ---- (iv) idle CPU --------------------------------------------------------------- */

/* % of one core per worker while idle, or a negative value on failure. */
static double measure_idle(const struct bench *b, unsigned workers, double seconds,
                           struct bench_totals *tot)
{
    mely_t m = {0};
    struct bench_bg bg;
    double pct = -1.0;

    if (bench_rt_open(b, &m, workers, 2) != 0)
        return pct;
    if (bench_bg_start(b, &bg, &m, "idle") != 0) {
        bench_rt_close(b, &m, "idle");
        return pct;
    }
    bench_sleep_until(bench_ts_after(IDLE_SETTLE_NS));
    uint64_t cpu0 = bench_cpu_ns(RUSAGE_SELF), t0 = bench_now_ns();
    bench_sleep_until(bench_ts_after((uint64_t)(seconds * 1e9)));
    uint64_t cpu1 = bench_cpu_ns(RUSAGE_SELF), t1 = bench_now_ns();
    if (bench_bg_stop(b, &bg, "idle") == 0)
        pct = (double)(cpu1 - cpu0) * 100.0 / (double)(t1 - t0) / (double)mely_workers(&m);
    *tot = bench_rt_totals(&m);
    bench_rt_close(b, &m, "idle");
    return pct;
}

/* The machine's cross-core floor, measured right before mely's ping-pong: it
 * moves between periods on these guests, so the ratio to it is what compares. */
static bool measure_floor(unsigned runs, uint64_t trips, double *value)
{
    struct bench_sample s[runs ? runs : 1];
    double cyc;

    for (unsigned r = 0; r < runs; r++) {
        s[r] = bench_floor_pingpong(trips);
        if (s[r].ok)
            printf("  %-22s run %u: %9.2f ns/round trip %7.1f cycles\n", "ping-pong floor", r + 1,
                   s[r].value, s[r].cycles);
    }
    if (!bench_sample_medians(s, runs, value, &cyc))
        return false;
    printf("  %-22s median: %.2f ns/round trip (%.1f cycles)\n", "ping-pong floor", *value, cyc);
    return true;
}

/* The machine's floor for the cross-core post path, measured right after
 * mely's cross-core runs: a plain SPSC ring of 40-byte records between the
 * same two CPUs. */
static bool measure_spsc(unsigned runs, uint64_t records, double *value)
{
    struct bench_sample s[runs ? runs : 1];
    double cyc;

    for (unsigned r = 0; r < runs; r++) {
        s[r] = bench_floor_spsc(records);
        if (s[r].ok)
            printf("  %-22s run %u: %9.2f Mrecords/s  %7.1f cycles\n", "SPSC ring floor", r + 1,
                   s[r].value, s[r].cycles);
    }
    if (!bench_sample_medians(s, runs, value, &cyc))
        return false;
    printf("  %-22s median: %.2f Mrecords/s (%.1f cycles)\n", "SPSC ring floor", *value, cyc);
    return true;
}

/* ---- The results ----------------------------------------------------------------- */

enum {
    ROW_LOCAL,
    ROW_CROSS,
    ROW_SPSC,
    ROW_PINGPONG,
    ROW_FLOOR,
    ROW_IDLE,
    ROW_CROSS_LOCAL, /* the ratios of this run's medians, with the targets */
    ROW_CROSS_SPSC,
    ROW_PP_FLOOR,
    NROWS
};

/* The cross-core targets, as ratios within one run. */
#define TARGET_CROSS_VS_LOCAL 0.5
#define TARGET_CROSS_VS_SPSC 0.2
#define TARGET_PP_VS_FLOOR 1.5

/* The table's rows; mely's figures and the peer's are filled in later. */
static void rows_init(struct bench_row rows[NROWS], const char *idle_name)
{
    const struct bench_row init[NROWS] = {
        [ROW_LOCAL] = {.workload = "local post+run", .key = "local_ns_per_event",
                       .unit = "ns/event", .peer_key = "local_ns_per_event",
                       .lower_is_better = true, .ratio_target = TARGET_RATIO,
                       .target = "<=30 ns, >=3x asio"},
        [ROW_CROSS] = {.workload = "cross-core throughput", .key = "crosscore_mevents_per_s",
                       .unit = "Mevents/s", .peer_key = "crosscore_events_per_s",
                       .peer_scale = 1e-6, .ratio_target = TARGET_RATIO,
                       .target = ">=10 M/s, >=3x asio"},
        [ROW_PINGPONG] = {.workload = "ping-pong", .key = "pingpong_ns_per_rt",
                          .unit = "ns/round trip", .peer_key = "pingpong_ns_per_rt",
                          .lower_is_better = true, .ratio_target = TARGET_RATIO,
                          .target = ">=3x asio"},
        [ROW_FLOOR] = {.workload = "ping-pong floor (2 threads)", .key = "pingpong_floor_ns_per_rt",
                       .unit = "ns/round trip", .lower_is_better = true, .target = ""},
        [ROW_IDLE] = {.workload = idle_name, .key = "idle_pct_core_per_worker",
                      .unit = "% core/worker", .lower_is_better = true, .target = "<2%"},
        [ROW_SPSC] = {.workload = "cross-core floor (SPSC ring)", .key = "spsc_floor_mrecords_per_s",
                      .unit = "Mrecords/s", .target = ""},
        [ROW_CROSS_LOCAL] = {.workload = "cross-core / local rate", .key = "cross_vs_local",
                             .unit = "x", .target = ">=0.5"},
        [ROW_CROSS_SPSC] = {.workload = "cross-core / SPSC floor", .key = "cross_vs_spsc_floor",
                            .unit = "x", .target = ">=0.2"},
        [ROW_PP_FLOOR] = {.workload = "ping-pong / its floor", .key = "pingpong_vs_floor",
                          .unit = "x", .lower_is_better = true, .target = "<=1.5"},
    };
    memcpy(rows, init, sizeof(init));
}

/* r = num / den of this run's medians (den_is_ns: den is ns per event, turned
 * into M events/s first), judged against `target`: at least it, or at most
 * it for a row whose lower figures are better. */
static void set_ratio(struct bench_row *r, const struct bench_row *num, const struct bench_row *den,
                      bool den_is_ns, double target)
{
    double d = den_is_ns && den->mely > 0 ? 1e3 / den->mely : den->mely;

    r->have_mely = num->have_mely && den->have_mely && d > 0;
    r->mely = r->have_mely ? num->mely / d : 0;
    bench_judge(r, true, r->lower_is_better ? r->mely <= target : r->mely >= target);
}

/* ---- The Boost.Asio peer --------------------------------------------------------- */

static void peer_line(const char *line, void *rows)
{
    bench_peer_line(line, "asio", rows, NROWS);
}

/* Runs the peer with our options; its figures go to the rows. */
static void run_asio(struct bench *b, const char *argv0, const struct options *o,
                     struct bench_row *rows)
{
    char peer[4200], real[PATH_MAX], load[64];
    char workers[24], events[24], runs[24];

    if (bench_find_peer(argv0, PEER, peer, sizeof(peer)) != 0) {
        printf("\nBoost.Asio peer not built (install libboost-dev and re-run make bench): "
               "ratios skipped\n");
        return;
    }
    printf("\nBoost.Asio peer: %s\n", realpath(peer, real) ? real : peer);
    fflush(stdout);
    snprintf(workers, sizeof(workers), "%u", o->workers);
    snprintf(events, sizeof(events), "%" PRIu64, o->events);
    snprintf(runs, sizeof(runs), "%u", o->runs);
    char *argv[] = {peer, "--workers", workers, "--events", events, "--runs", runs,
                    o->quick ? "--quick" : NULL, NULL};
    struct bench_probe p0 = bench_probe_now();
    bench_run_peer(b, peer, argv, peer_line, rows);
    struct bench_probe p1 = bench_probe_now();
    if (bench_load_note(b, &p0, &p1, load, sizeof(load))[0])
        printf("  while the peer ran: %s\n", load + 2);
    bool got = false;
    for (unsigned i = 0; i < NROWS; i++)
        got |= rows[i].have_peer;
    if (!got) {
        printf("Boost.Asio peer gave no figures: ratios skipped\n");
        return;
    }
    printf("  asio medians: local %.2f ns/event, cross-core %.2f Mevents/s, "
           "ping-pong %.0f ns/round trip\n",
           rows[ROW_LOCAL].peer, rows[ROW_CROSS].peer, rows[ROW_PINGPONG].peer);
}

/* ---- Options --------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dispatch [options]\n"
            "  --workers N        workers (and Asio threads), >= 2 (default 2)\n"
            "  --events N         events for local and cross-core; ping-pong does N/10\n"
            "                     round trips (default %llu; --quick: %llu)\n"
            "  --runs R           runs per workload, the median is reported (default %u; --quick: %u)\n"
            "  --idle-seconds S   idle CPU measurement time (default %.0f; --quick: %.0f)\n"
            "  --quick            small counts: the whole run takes a few seconds\n"
            "  --csv PATH         CSV output (default %s, relative to the current directory)\n"
            "  --no-asio          do not run the Boost.Asio peer (dispatch-asio)\n",
            EVENTS_DEFAULT, EVENTS_QUICK, RUNS_DEFAULT, RUNS_QUICK, IDLE_SECONDS_DEFAULT,
            IDLE_SECONDS_QUICK, CSV_DEFAULT);
}

/* optarg as a number of --name in lo..hi; false (reported) if it is not. */
static bool opt_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *v)
{
    if (bench_parse_u64(optarg, lo, hi, v) == 0)
        return true;
    fprintf(stderr, "dispatch: --%s: expected %" PRIu64 "..%" PRIu64 "\n", name, lo, hi);
    return false;
}

/* 0: go on; 1: exit 0 (--help); 2: usage error. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"workers", required_argument, NULL, 'w'},
        {"events", required_argument, NULL, 'e'},
        {"runs", required_argument, NULL, 'r'},
        {"idle-seconds", required_argument, NULL, 'i'},
        {"quick", no_argument, NULL, 'q'},
        {"csv", required_argument, NULL, 'c'},
        {"no-asio", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    *o = (struct options){.workers = 2, .csv = CSV_DEFAULT, .asio = true, .idle_seconds = -1};
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            if (!opt_u64("workers", 2, MELY_MAX_WORKERS, &v))
                return 2;
            o->workers = (unsigned)v;
            break;
        case 'e':
            if (!opt_u64("events", 1000, 10000000000ull, &v))
                return 2;
            o->events = v;
            break;
        case 'r':
            if (!opt_u64("runs", 1, 1000, &v))
                return 2;
            o->runs = (unsigned)v;
            break;
        case 'i':
            if (bench_parse_double(optarg, 0.1, 3600, &o->idle_seconds) != 0) {
                fprintf(stderr, "dispatch: --idle-seconds: expected 0.1..3600\n");
                return 2;
            }
            break;
        case 'q':
            o->quick = true;
            break;
        case 'c':
            if (optarg[0] == '\0') {
                fprintf(stderr, "dispatch: --csv: expected a path\n");
                return 2;
            }
            o->csv = optarg;
            break;
        case 'n':
            o->asio = false;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dispatch: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o->events == 0)
        o->events = o->quick ? EVENTS_QUICK : EVENTS_DEFAULT;
    if (o->runs == 0)
        o->runs = o->quick ? RUNS_QUICK : RUNS_DEFAULT;
    if (o->idle_seconds < 0)
        o->idle_seconds = o->quick ? IDLE_SECONDS_QUICK : IDLE_SECONDS_DEFAULT;
    return 0;
}

/* ---- Main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;

    struct bench b;
    struct bench_machine mc;
    bench_init(&b, "dispatch");
    bench_machine_get(&mc);
    uint64_t trips = o.events / PINGPONG_DIVISOR;
    printf("mely dispatch benchmark\n");
    bench_machine_print(stdout, &mc);
    printf("setup: %u workers, pinned; N = %" PRIu64 " events; %" PRIu64
           " ping-pong round trips; %u runs per workload (median)\n",
           o.workers, o.events, trips, o.runs);
    if (o.workers > mc.usable)
        printf("note: more workers than usable CPUs: workers share CPUs, figures mean little\n");
    bench_print_mely_env(stdout);
    fflush(stdout);

    char idle_name[48];
    snprintf(idle_name, sizeof(idle_name), "idle CPU (%g s)", o.idle_seconds);
    struct bench_row rows[NROWS];
    rows_init(rows, idle_name);

    printf("\nmely:\n");
    rows[ROW_LOCAL].have_mely =
        bench_measure(&b, "local post+run", "ns/event", run_local, o.workers, o.runs, o.events,
                      1.0, &rows[ROW_LOCAL].mely);
    rows[ROW_CROSS].have_mely =
        bench_measure(&b, "cross-core throughput", "Mevents/s", run_cross, o.workers, o.runs,
                      o.events, 1e-6, &rows[ROW_CROSS].mely);
    rows[ROW_SPSC].have_mely = measure_spsc(o.runs, 4 * o.events, &rows[ROW_SPSC].mely);
    rows[ROW_FLOOR].have_mely = measure_floor(o.runs, trips, &rows[ROW_FLOOR].mely);
    rows[ROW_PINGPONG].have_mely =
        bench_measure(&b, "ping-pong", "ns/round trip", run_pingpong, o.workers, o.runs, trips,
                      1.0, &rows[ROW_PINGPONG].mely);
    if (rows[ROW_FLOOR].have_mely && rows[ROW_PINGPONG].have_mely)
        printf("  ping-pong / floor: %.2fx (the floor is two plain threads passing a cache line)\n",
               rows[ROW_PINGPONG].mely / rows[ROW_FLOOR].mely);

    if (o.asio)
        run_asio(&b, argv[0], &o, rows);
    else
        printf("\nBoost.Asio peer skipped (--no-asio): ratios skipped\n");

    printf("\nidle: %u workers, nothing posted, %g s\n", o.workers, o.idle_seconds);
    fflush(stdout);
    struct bench_totals it = {.parks = 0};
    double idle = measure_idle(&b, o.workers, o.idle_seconds, &it);
    rows[ROW_IDLE].have_mely = idle >= 0;
    rows[ROW_IDLE].mely = idle;
    if (rows[ROW_IDLE].have_mely)
        printf("  idle CPU: %.3f %% of a core per worker   [parks %" PRIu64 ", wakeups %" PRIu64
               "]\n",
               idle, it.parks, it.wakeups);

    bench_judge(&rows[ROW_LOCAL], true, rows[ROW_LOCAL].mely <= TARGET_LOCAL_NS);
    bench_judge(&rows[ROW_CROSS], true, rows[ROW_CROSS].mely >= TARGET_CROSS_MEPS);
    bench_judge(&rows[ROW_PINGPONG], false, true);
    bench_judge(&rows[ROW_FLOOR], false, true);
    bench_judge(&rows[ROW_IDLE], true, rows[ROW_IDLE].mely < TARGET_IDLE_PCT);
    bench_judge(&rows[ROW_SPSC], false, true);
    set_ratio(&rows[ROW_CROSS_LOCAL], &rows[ROW_CROSS], &rows[ROW_LOCAL], true,
              TARGET_CROSS_VS_LOCAL);
    set_ratio(&rows[ROW_CROSS_SPSC], &rows[ROW_CROSS], &rows[ROW_SPSC], false,
              TARGET_CROSS_VS_SPSC);
    set_ratio(&rows[ROW_PP_FLOOR], &rows[ROW_PINGPONG], &rows[ROW_FLOOR], false,
              TARGET_PP_VS_FLOOR);
    printf("\n");
    bench_print_rows(stdout, "asio strand", rows, NROWS);
    bench_load_warn(&b);

    struct bench_param params[] = {{.name = "workers"}, {.name = "events"}, {.name = "runs"}};
    snprintf(params[0].value, sizeof(params[0].value), "%u", o.workers);
    snprintf(params[1].value, sizeof(params[1].value), "%" PRIu64, o.events);
    snprintf(params[2].value, sizeof(params[2].value), "%u", o.runs);
    if (bench_write_csv(&b, o.csv, &mc, params, 3, "asio", rows, NROWS) == 0)
        printf("\nCSV: %s\n", o.csv);
    bool all = true;
    for (unsigned i = 0; i < NROWS; i++)
        all &= rows[i].have_mely;
    return all ? 0 : 1;
}
