/* SPDX-License-Identifier: MIT */
/*
 * compat_post.cpp: what a legacy post costs, next to a native one and to
 * Boost.Asio's, in three shapes, run after run in one process.
 *
 * Shapes (N events a run):
 *   bulk     one worker: a driver posts 1000 events to its own color (tail) and
 *            re-posts itself, until N ran; from the driver's first run to its
 *            last -> ns per event (bench/dispatch's "local post+run");
 *   chained  one worker: every event posts the next one to its own color, N in
 *            all; from the first to the last -> ns per event;
 *   cross63  all usable CPUs as workers (or --workers): a producer on color 0
 *            posts round-robin to colors 1..63, which spread over the workers
 *            (color % workers, so most posts cross cores), 1000 per producer
 *            run, at most 100,000 in flight, re-posting itself until it sees N
 *            consumed -> ns per event.
 * Systems:
 *   native   mely_post_ex(color, fn, NULL arg) of an empty handler (the
 *            consumer counts in a line of its color's own);
 *   compat   cpucb_tail(cwrap(f, a, b, color)): a callback with two bound
 *            arguments is allocated, posted, run and freed (libasync-smp
 *            style);
 *   asio     Boost.Asio, as bench/dispatch-asio: one io_context run by as many
 *            threads as workers (pinned alike), a strand per color,
 *            asio::post per event (compat_post_asio.cpp; left out when
 *            configure did not find Boost, or with --no-asio).
 *
 * A pass runs every shape of the process once on each system (native, asio,
 * compat), so that a change in the machine's load hits all alike; a warm-up
 * pass comes first and is not counted. Each pass prints its figures (one
 * worker: wall/CPU, the CPU time of the thread that ran every event), the
 * process's RSS after it, what the pass's compat runs added to it, compat's
 * callback memory (mely_compat_cb_bytes), and how busy the CPUs were with
 * other processes. Then the table: the medians, the medians of the per-pass
 * ratios compat/native (target <= 2) and asio/compat (target >= 2, chained
 * and cross63), and run to run (with >= 8 passes): the median of the last
 * quarter of the passes over that of the first quarter, for compat and for
 * the compat/native ratio (target: the ratio's within +5%: no slow-down);
 * the RSS after the first and the last pass, what the compat runs of the
 * counted passes added (target: at most 5% of the first), and the callback
 * memory after the first and the last (target: no growth). One-worker
 * targets are judged on CPU time (a loaded machine stretches wall time, not
 * CPU time), cross-core ones on wall time.
 *
 * The compat runtime is the compat library's own and its size is fixed when
 * it starts, so the cross63 rows run in a child process (the program again,
 * with --cross) after the one-worker rows. amain() never returns: native and
 * asio runs happen on a thread of their own that a compat callback starts and
 * joins (the compat worker waits meanwhile, pinned where they run), and the
 * program ends with exit() after the last compat run.
 *
 * Usage: bench/compat_post [--events N] [--runs R] [--csv PATH] [--workers N]
 *        [--cross | --no-cross] [--no-asio]      (--help: the options)
 */
#include "async.h"

#include <mely/mely.h>

#include "bench/compat_post_asio.h"
#include "bench/harness.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

long g_events;
int g_runs;
const char *g_csv_opt;
bool g_cross;    /* this process runs the cross-core rows */
bool g_no_cross; /* do not start them after the one-worker rows */
bool g_no_asio;
int g_workers; /* cross-core: -1 = all usable CPUs */
char **g_argv;

const bench_opt options[] = {
    bench_opt_of("events", OPT_U64, &g_events, "events per run", 2000, 1e12, 2000000),
    bench_opt_of("runs", OPT_INT, &g_runs, "passes (after a warm-up pass)", 1, 1000, 5),
    bench_opt_of("csv", OPT_STR, &g_csv_opt, "the CSV file (cross-core: -cross before .csv)", 0,
                 0, 0, 0, "bench/results/compat_post.csv"),
    bench_opt_of("workers", OPT_INT, &g_workers, "cross-core workers", 1, MELY_MAX_WORKERS, -1, 0,
                 nullptr, "all usable CPUs"),
    bench_opt_of("cross", OPT_FLAG, &g_cross, "run the cross-core rows (in this process)"),
    bench_opt_of("no-cross", OPT_FLAG, &g_no_cross, "do not run the cross-core rows after the others"),
    bench_opt_of("no-asio", OPT_FLAG, &g_no_asio, "leave out the Boost.Asio rows"),
    bench_opt{},
};

const int kBurst = 1000;
const int kColor = 1;
const int kConsumers = 63;
const long kMaxInFlight = 100000;

enum shape { BULK, CHAINED, CROSS, NSHAPES };
enum sys { NATIVE, NATIVE_RT, COMPAT, ASIO, NSYS };
const char *const kShapeName[NSHAPES] = {"bulk", "chained", "cross63"};
const char *const kSysName[NSYS] = {"native", "native-rt", "compat", "asio"};

struct bench g_bench = {"compat_post", 0, 0};
bool g_asio;              /* the asio rows run */
int g_first, g_last;      /* the shapes of this process */
std::vector<double> g_wall[NSHAPES][NSYS], g_cpu[NSHAPES][NSYS]; /* counted passes */
std::vector<double> g_rss_mb;            /* after each counted pass */
std::vector<double> g_cb_mb;             /* compat's callback memory, after each */
double g_rss_before;                     /* before the current compat run, MB */
double g_compat_growth, g_pass_growth;   /* RSS the compat runs added: counted passes, this pass */
bench_probe g_probe;                     /* at the start of the current pass */
bench_machine g_machine;
cpu_set_t g_mask; /* the process's CPUs, as main() found them (workers are pinned) */

/* A run's figures: wall-clock ns per event and, for the one-worker shapes,
 * the CPU time of the thread that ran every event, per event. */
struct fig {
    double wall, cpu;
};

fig g_pass[NSHAPES][NSYS]; /* the current pass */

double thread_cpu_ns()
{
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ---- native -------------------------------------------------------------------------- */

mely_t g_native;
mely_t *g_nrt; /* where the native handlers post: &g_native, or compat's runtime */
int g_npass, g_nshape; /* the pass and shape of a native run on compat's runtime */
long g_ran;
double g_t0, g_t1, g_c0, g_c1; /* wall and thread CPU, ns */

void mark_start()
{
    g_t0 = (double)now_ns();
    g_c0 = thread_cpu_ns();
}

void mark_end()
{
    g_t1 = (double)now_ns();
    g_c1 = thread_cpu_ns();
}

/* The run's figures over n events (the one-worker shapes: n - 1 gaps). */
fig figures(double n)
{
    return fig{(g_t1 - g_t0) / n, (g_c1 - g_c0) / n};
}

/* Per consumer color, written only by its handlers (one at a time), read by
 * the producer: a line each. */
struct alignas(64) consumed_count {
    std::atomic<long> n{0};
};
consumed_count g_consumed[kConsumers + 1];
long g_posted; /* the producer's */
int g_next;    /* the producer's */

void native_rt_done();

/* A native run ended: a fresh runtime stops; on compat's runtime, the pass
 * goes on. */
void native_end()
{
    if (g_nrt == &g_native)
        mely_stop(&g_native);
    else
        native_rt_done();
}

void native_empty(void *) { g_ran++; }

void native_driver(void *)
{
    if (g_ran == 0)
        mark_start();
    g_ran++;
    if (g_ran >= g_events) {
        mark_end();
        native_end();
        return;
    }
    for (int i = 0; i < kBurst; i++)
        mely_post_ex(g_nrt, kColor, 0, NULL, native_empty, NULL, 0);
    mely_post_ex(g_nrt, kColor, 0, NULL, native_driver, NULL, 0);
}

void native_chain(void *)
{
    if (g_ran == 0)
        mark_start();
    if (++g_ran >= g_events) {
        mark_end();
        native_end();
        return;
    }
    mely_post_ex(g_nrt, kColor, 0, NULL, native_chain, NULL, 0);
}

long consumed_total()
{
    long sum = 0;
    for (int c = 1; c <= kConsumers; c++)
        sum += g_consumed[c].n.load(std::memory_order_relaxed);
    return sum;
}

void count_consumed(int color)
{
    std::atomic<long> &n = g_consumed[color].n;
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void cross_reset()
{
    for (auto &c : g_consumed)
        c.n.store(0, std::memory_order_relaxed);
    g_posted = 0;
    g_next = 0;
    g_ran = 0;
}

/* One producer run: up to kBurst posts (post(color)) unless too many are in
 * flight; true once all N ran (the clock stopped). */
template <typename Post> bool produce(Post post)
{
    if (g_ran++ == 0)
        mark_start();
    long done = consumed_total();
    if (done >= g_events) {
        mark_end();
        return true;
    }
    for (int i = 0; i < kBurst && g_posted < g_events && g_posted - done < kMaxInFlight; i++) {
        post(1 + g_next);
        g_next = (g_next + 1) % kConsumers;
        g_posted++;
    }
    return false;
}

void native_consume(void *arg) { count_consumed((int)(intptr_t)arg); }

void native_producer(void *)
{
    bool done = produce([](int color) {
        mely_post_ex(g_nrt, color, 0, NULL, native_consume, (void *)(intptr_t)color, 0);
    });
    if (done)
        native_end();
    else
        mely_post_ex(g_nrt, 0, 0, NULL, native_producer, NULL, 0);
}

mely_fn_t native_handler(int s)
{
    return s == BULK ? native_driver : s == CHAINED ? native_chain : native_producer;
}

double per_event_divisor(int s)
{
    return s == CROSS ? (double)g_events : (double)(g_ran - 1);
}

/* One native run of shape s on a fresh runtime. */
fig native_run(int s)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = s != CROSS ? 1 : g_workers > 0 ? (unsigned)g_workers : 0;
    if (mely_init(&g_native, &cfg) != 0) {
        fprintf(stderr, "compat_post: mely_init failed\n");
        exit(1);
    }
    g_nrt = &g_native;
    cross_reset();
    mely_post(&g_native, s == CROSS ? 0 : kColor, native_handler(s), NULL);
    mely_run(&g_native);
    mely_shutdown(&g_native);
    return figures(per_event_divisor(s));
}

fig asio_run(int s)
{
    fig f{-1, -1};
    switch (s) {
    case BULK:
        f.wall = asio_bulk(g_events, kBurst, &f.cpu);
        break;
    case CHAINED:
        f.wall = asio_chained(g_events, &f.cpu);
        break;
    default:
        f.wall = asio_cross(g_events, (unsigned)async_get_nthreads(), kConsumers, kBurst,
                            kMaxInFlight);
    }
    return f;
}

/* ---- compat ---------------------------------------------------------------------------- */

long g_sink;

void step(int pass, int s);
void report();

int step_color() { return g_cross ? 0 : kColor; }

/* Compat run of shape s in pass `pass` ended: record it, go on. */
void compat_done(int pass, int s, fig f)
{
    g_pass[s][COMPAT] = f;
    g_pass_growth += (double)rss_bytes() / 1048576.0 - g_rss_before;
    if (s < g_last) {
        cpucb_tail(cwrap(step, pass, s + 1, step_color()));
        return;
    }
    double rss = (double)rss_bytes() / 1048576.0;
    bench_probe p1 = bench_probe_now();
    char load[64];
    bench_load_note(&g_bench, &g_probe, &p1, load, sizeof(load));
    if (pass == 0)
        printf("warm-up:");
    else
        printf("pass %2d:", pass);
    for (int k = g_first; k <= g_last; k++) {
        const fig *f = g_pass[k];
        if (k == CROSS) {
            printf(" %s native %.1f rt %.1f compat %.1f (%.2fx)", kShapeName[k], f[NATIVE].wall,
                   f[NATIVE_RT].wall, f[COMPAT].wall, f[COMPAT].wall / f[NATIVE].wall);
            if (g_asio)
                printf(" asio %.1f", f[ASIO].wall);
        } else {
            printf(" %s native %.1f/%.1f rt %.1f/%.1f compat %.1f/%.1f (%.2fx)", kShapeName[k],
                   f[NATIVE].wall, f[NATIVE].cpu, f[NATIVE_RT].wall, f[NATIVE_RT].cpu,
                   f[COMPAT].wall, f[COMPAT].cpu, f[COMPAT].cpu / f[NATIVE].cpu);
            if (g_asio)
                printf(" asio %.1f/%.1f", f[ASIO].wall, f[ASIO].cpu);
        }
        printf(" |");
        if (pass > 0)
            for (int y = 0; y < NSYS; y++)
                if (y != ASIO || g_asio) {
                    g_wall[k][y].push_back(f[y].wall);
                    g_cpu[k][y].push_back(f[y].cpu);
                }
    }
    double cb = (double)mely_compat_cb_bytes() / 1048576.0;
    printf(" RSS %.1f MB (%+.1f in compat runs; callbacks %.1f)%s\n", rss, g_pass_growth, cb,
           load);
    fflush(stdout);
    if (pass > 0) {
        g_rss_mb.push_back(rss);
        g_cb_mb.push_back(cb);
        g_compat_growth += g_pass_growth;
    }
    g_pass_growth = 0;
    if (pass < g_runs)
        cpucb_tail(cwrap(step, pass + 1, g_first, step_color()));
    else
        report();
}

void compat_empty(int a, long b)
{
    g_ran++;
    g_sink += a + b;
}

void compat_driver(int pass, long unused)
{
    if (g_ran == 0)
        mark_start();
    g_ran++;
    if (g_ran >= g_events) {
        mark_end();
        compat_done(pass, BULK, figures((double)(g_ran - 1)));
        return;
    }
    for (int i = 0; i < kBurst; i++)
        cpucb_tail(cwrap(compat_empty, i, (long)pass, kColor));
    cpucb_tail(cwrap(compat_driver, pass, unused, kColor));
}

void compat_chain(int pass, long k)
{
    if (g_ran == 0)
        mark_start();
    if (++g_ran >= g_events) {
        mark_end();
        compat_done(pass, CHAINED, figures((double)(g_ran - 1)));
        return;
    }
    cpucb_tail(cwrap(compat_chain, pass, k + 1, kColor));
}

void compat_consume(int color, long pass)
{
    count_consumed(color);
    g_sink += pass;
}

void compat_producer(int pass, long unused)
{
    bool done = produce([pass](int color) {
        cpucb_tail(cwrap(compat_consume, color, (long)pass, color));
    });
    if (!done)
        cpucb_tail(cwrap(compat_producer, pass, unused, 0));
    else
        compat_done(pass, CROSS, figures((double)g_events));
}

/* Shape s of pass `pass`: its native run and its asio run (each on a thread
 * of its own, joined), then its native run on compat's runtime (the
 * handlers of the native run, posted with mely_post_ex to
 * mely_compat_runtime(): the native API on the runtime that compat has run
 * all along, as a server would), then its compat run, which calls
 * compat_done(). */
void step(int pass, int s)
{
    if (s == g_first)
        g_probe = bench_probe_now();
    /* A thread started here inherits the worker's affinity: give it the
     * process's, so that the runtime and the io_context see every CPU. */
    std::thread([s] {
        sched_setaffinity(0, sizeof(g_mask), &g_mask);
        g_pass[s][NATIVE] = native_run(s);
    }).join();
    if (g_asio)
        std::thread([s] {
            sched_setaffinity(0, sizeof(g_mask), &g_mask);
            g_pass[s][ASIO] = asio_run(s);
        }).join();
    g_nrt = mely_compat_runtime();
    g_npass = pass;
    g_nshape = s;
    cross_reset();
    mely_post_ex(g_nrt, s == CROSS ? 0 : kColor, 0, NULL, native_handler(s), NULL, 0);
}

/* The native run on compat's runtime ended (in its last handler): the
 * compat run of the same shape. */
void native_rt_done()
{
    int pass = g_npass, s = g_nshape;
    g_pass[s][NATIVE_RT] = figures(per_event_divisor(s));
    cross_reset();
    g_rss_before = (double)rss_bytes() / 1048576.0;
    switch (s) {
    case BULK:
        cpucb_tail(cwrap(compat_driver, pass, 0L, kColor));
        break;
    case CHAINED:
        cpucb_tail(cwrap(compat_chain, pass, 0L, kColor));
        break;
    default:
        cpucb_tail(cwrap(compat_producer, pass, 0L, 0));
    }
}

/* ---- the report ------------------------------------------------------------------------ */

double median_of(std::vector<double> v) { return v.empty() ? NAN : median(v.data(), v.size()); }

std::vector<double> ratios(const std::vector<double> &num, const std::vector<double> &den)
{
    std::vector<double> r;
    for (std::size_t i = 0; i < num.size() && i < den.size(); i++)
        r.push_back(num[i] / den[i]);
    return r;
}

/* The median of the last quarter of v over that of its first quarter; NAN
 * with fewer than 8 values. */
double drift(const std::vector<double> &v)
{
    if (v.size() < 8)
        return NAN;
    std::size_t q = v.size() / 4;
    return median_of(std::vector<double>(v.end() - (long)q, v.end())) /
           median_of(std::vector<double>(v.begin(), v.begin() + (long)q));
}

enum {
    C_SHAPE, C_NATIVE, C_RT, C_COMPAT, C_ASIO, C_RATIO, C_RTRATIO, C_VS_ASIO, C_CNATIVE, C_CRT,
    C_CCOMPAT, C_CASIO, C_CRATIO, C_CRTRATIO, C_CVS_ASIO, C_DRIFT, C_RDRIFT, C_SPREAD, C_RSS0,
    C_RSS1, C_GROWTH, C_CB0, C_CB1, C_STATUS, NCOLS
};
const bench_column kColumns[NCOLS] = {
    {"workload", "workload", 8, false, 0},
    {"native", "native_ns", 0, true, 2},
    {"rt", "native_on_compat_runtime_ns", 0, true, 1},
    {"compat", "compat_ns", 0, true, 1},
    {"asio", "asio_ns", 0, true, 1},
    {"c/n", "compat_over_native", 0, true, 1},
    {"c/rt", "compat_over_native_rt", 0, true, 1},
    {"a/c", "asio_over_compat", 0, true, 1},
    {"| cpu: native", "native_cpu_ns", 0, true, 2},
    {"rt", "native_on_compat_runtime_cpu_ns", 0, true, 1},
    {"compat", "compat_cpu_ns", 0, true, 1},
    {"asio", "asio_cpu_ns", 0, true, 1},
    {"c/n", "cpu_compat_over_native", 0, true, 1},
    {"c/rt", "cpu_compat_over_native_rt", 0, true, 1},
    {"a/c", "cpu_asio_over_compat", 0, true, 1},
    {"| drift: compat", "compat_drift_pct", 0, true, 2},
    {"c/n", "ratio_drift_pct", 0, true, 1},
    {"compat max/min", "compat_max_over_min", 0, true, 2},
    {"| RSS MB: first", "rss_mb_first", 0, true, 2},
    {"last", "rss_mb_last", 0, true, 1},
    {"compat +", "rss_mb_added_by_compat_runs", 0, true, 1},
    {"callbacks", "callback_mb_first", 0, true, 1},
    {"last", "callback_mb_last", 0, true, 1},
    {"status", "status", 0, false, 2},
};

int run_cross_child();

std::string fmt2(double x)
{
    char b[32];
    snprintf(b, sizeof(b), "%.2f", x);
    return b;
}

void report()
{
    bench_machine &mc = g_machine;
    printf("\nmachine: %s; %u usable CPUs (of %ld online); %s\n", mc.cpu, mc.usable, mc.online,
           mc.kernel);
    printf("compat_post: %ld events per run, %d passes after a warm-up, %s%s\n\n", g_events,
           g_runs,
           g_cross ? "cross-core (producer -> 63 colors on all workers)" : "1 worker",
           g_asio ? "" : "; no asio rows (--no-asio, or built without Boost.Asio)");
    bench_table t;
    bench_table_init(&t, kColumns, NCOLS, (unsigned)(g_last - g_first + 1));
    std::string why;
    bool rows_ok = true;
    double rss0 = g_rss_mb.empty() ? NAN : g_rss_mb.front();
    double rss1 = g_rss_mb.empty() ? NAN : g_rss_mb.back();
    double cb0 = g_cb_mb.empty() ? NAN : g_cb_mb.front();
    double cb1 = g_cb_mb.empty() ? NAN : g_cb_mb.back();
    for (int s = g_first; s <= g_last; s++) {
        unsigned row = (unsigned)(s - g_first);
        const char *name = kShapeName[s];
        const std::vector<double> &n = g_wall[s][NATIVE], &c = g_wall[s][COMPAT],
                                  &a = g_wall[s][ASIO], &rt = g_wall[s][NATIVE_RT];
        const std::vector<double> &cn = g_cpu[s][NATIVE], &cc = g_cpu[s][COMPAT],
                                  &ca = g_cpu[s][ASIO], &crt = g_cpu[s][NATIVE_RT];
        bool cpu = s != CROSS; /* judged on CPU time: one thread ran every event */
        double ratio = median_of(ratios(c, n)), vs_asio = median_of(ratios(a, c));
        double cratio = median_of(ratios(cc, cn)), cvs_asio = median_of(ratios(ca, cc));
        const std::vector<double> &jc = cpu ? cc : c, &jn = cpu ? cn : n;
        double jratio = cpu ? cratio : ratio, jvs_asio = cpu ? cvs_asio : vs_asio;
        double cdrift = drift(jc), rdrift = drift(ratios(jc, jn));
        bool ok = true;
        bench_cell(&t, row, C_SHAPE, "%s", name);
        bench_cell(&t, row, C_NATIVE, "%.1f", median_of(n));
        bench_cell(&t, row, C_COMPAT, "%.1f", median_of(c));
        bench_cell(&t, row, C_RATIO, "%.2f", ratio);
        bench_cell(&t, row, C_RT, "%.1f", median_of(rt));
        bench_cell(&t, row, C_RTRATIO, "%.2f", median_of(ratios(c, rt)));
        if (cpu) {
            bench_cell(&t, row, C_CNATIVE, "%.1f", median_of(cn));
            bench_cell(&t, row, C_CCOMPAT, "%.1f", median_of(cc));
            bench_cell(&t, row, C_CRATIO, "%.2f", cratio);
            bench_cell(&t, row, C_CRT, "%.1f", median_of(crt));
            bench_cell(&t, row, C_CRTRATIO, "%.2f", median_of(ratios(cc, crt)));
        }
        if (!(jratio <= 2.0)) {
            ok = false;
            why += std::string("  ") + name + ": compat/native " + fmt2(jratio) + " > 2\n";
        }
        if (g_asio) {
            bench_cell(&t, row, C_ASIO, "%.1f", median_of(a));
            bench_cell(&t, row, C_VS_ASIO, "%.2f", vs_asio);
            if (cpu) {
                bench_cell(&t, row, C_CASIO, "%.1f", median_of(ca));
                bench_cell(&t, row, C_CVS_ASIO, "%.2f", cvs_asio);
            }
            if (s != BULK && !(jvs_asio >= 2.0)) {
                ok = false;
                why += std::string("  ") + name + ": asio/compat " + fmt2(jvs_asio) + " < 2\n";
            }
        }
        if (!std::isnan(cdrift)) {
            bench_cell(&t, row, C_DRIFT, "%+.1f%%", (cdrift - 1) * 100);
            bench_cell(&t, row, C_RDRIFT, "%+.1f%%", (rdrift - 1) * 100);
            if (!(rdrift <= 1.05)) {
                ok = false;
                why += std::string("  ") + name +
                       ": compat/native slowed down from the first passes to the last by more "
                       "than 5%\n";
            }
        }
        bench_cell(&t, row, C_SPREAD, "%.2f",
                   *std::max_element(jc.begin(), jc.end()) / *std::min_element(jc.begin(), jc.end()));
        bench_cell(&t, row, C_RSS0, "%.1f", rss0);
        bench_cell(&t, row, C_RSS1, "%.1f", rss1);
        bench_cell(&t, row, C_GROWTH, "%+.1f", g_compat_growth);
        bench_cell(&t, row, C_CB0, "%.1f", cb0);
        bench_cell(&t, row, C_CB1, "%.1f", cb1);
        if (!(g_compat_growth <= rss0 * 0.05) || !(cb1 <= cb0)) {
            ok = false;
            if (s == g_last)
                why += "  the compat runs added more than 5% to the RSS, or compat's callback "
                       "memory grew, after the first pass\n";
        }
        bench_cell(&t, row, C_STATUS, "%s", ok ? "PASS" : "MISS");
        rows_ok &= !std::isnan(jratio);
    }
    bench_table_print(stdout, &t);
    printf("\nns per event, medians of the passes: wall clock, and (one worker) the CPU time of "
           "the thread that ran\nevery event; native: a fresh runtime per run; rt: the native "
           "API on compat's runtime, which has run\nevery pass; c/n = compat/native, c/rt = "
           "compat/rt and a/c = asio/compat: medians of the per-pass\nratios. Targets, on CPU time with one worker (a loaded "
           "machine stretches wall time, not CPU time) and on\nwall time cross-core: c/n <= 2; "
           "a/c >= 2 in chained and cross63; drift (>= 8 passes: the median of\nthe last "
           "quarter of the passes over the first quarter's, for compat and for c/n): c/n's "
           "<= +5%%;\nmax/min: compat's spread over the passes; RSS (the process's, Asio's heap "
           "included) after the\nfirst and the last pass, and what the compat runs of the "
           "counted passes added to it (target: at\nmost 5%% of the first), and compat's "
           "callback memory after the first and the last (target: no growth).\n");
    if (!why.empty())
        printf("missed:\n%s", why.c_str());
    bench_load_warn(&g_bench);
    std::string csv = g_csv_opt;
    if (g_cross) {
        std::size_t dot = csv.rfind(".csv");
        csv = dot != std::string::npos ? csv.substr(0, dot) + "-cross.csv" : csv + "-cross";
    }
    bench_param params[8];
    unsigned np = 0;
    snprintf(params[np].name, sizeof(params[np].name), "events");
    snprintf(params[np++].value, sizeof(params[0].value), "%ld", g_events);
    snprintf(params[np].name, sizeof(params[np].name), "passes");
    snprintf(params[np++].value, sizeof(params[0].value), "%d", g_runs);
    snprintf(params[np].name, sizeof(params[np].name), "workers");
    snprintf(params[np++].value, sizeof(params[0].value), "%d", async_get_nthreads());
    bench_table_csv(&g_bench, csv.c_str(), &mc, params, np, &t);
    bench_table_free(&t);
    fflush(stdout);
    int rc = rows_ok ? 0 : 1;
    if (!g_cross && !g_no_cross) {
        int child = run_cross_child();
        rc = rc ? rc : child;
    }
    exit(rc);
}

/* The cross-core rows, in a child process (see the top); its exit status. */
int run_cross_child()
{
    std::string events = std::to_string(g_events), runs = std::to_string(g_runs),
                workers = std::to_string(g_workers);
    std::vector<char *> argv = {g_argv[0], (char *)"--cross", (char *)"--events",
                                (char *)events.c_str(), (char *)"--runs", (char *)runs.c_str(),
                                (char *)"--csv", (char *)g_csv_opt};
    if (g_no_asio)
        argv.push_back((char *)"--no-asio");
    if (g_workers > 0) {
        argv.push_back((char *)"--workers");
        argv.push_back((char *)workers.c_str());
    }
    argv.push_back(nullptr);
    printf("\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* Forked on a worker: the process's CPUs again, not the worker's. */
        sched_setaffinity(0, sizeof(g_mask), &g_mask);
        execv("/proc/self/exe", argv.data());
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "compat_post: the cross-core child failed\n");
        return 1;
    }
    return WEXITSTATUS(status);
}

} // namespace

int main(int argc, char **argv)
{
    int rc = bench_options("compat_post [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    g_argv = argv;
    if (sched_getaffinity(0, sizeof(g_mask), &g_mask) != 0) {
        perror("compat_post: sched_getaffinity");
        return 1;
    }
    bench_machine_get(&g_machine, nullptr);
    g_asio = asio_available() && !g_no_asio;
    if (g_cross) {
        /* The compat runtime reads the environment: all usable CPUs, or N. */
        if (g_workers > 0)
            setenv("MELY_WORKERS", std::to_string(g_workers).c_str(), 1);
        else
            unsetenv("MELY_WORKERS");
        g_first = g_last = CROSS;
    } else {
        setenv("MELY_WORKERS", "1", 1);
        g_first = BULK;
        g_last = CHAINED;
    }
    printf("compat_post: %s, %ld events per run, a warm-up pass and %d passes\n",
           g_cross ? "cross-core (producer -> 63 colors)" : "1 worker", g_events, g_runs);
    fflush(stdout);
    cpucb_tail(cwrap(step, 0, g_first, step_color()));
    amain();
}
