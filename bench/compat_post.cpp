/*
 * compat_post.cpp: what a compat post costs next to a native one.
 *
 * One worker (pinned). Both workloads have the shape of bench/dispatch's
 * "local post+run": a driver handler posts 1000 events to its own color
 * (tail) and re-posts itself at the tail, until N events ran; timed from the
 * driver's first run to its last -> ns per event.
 *
 *   native  mely_post_ex(color, empty handler, NULL arg): the cost of a native
 *           post + run of an empty handler;
 *   compat  cpucb_tail(cwrap(empty2, a, b, color)): a callback with two bound
 *           arguments is allocated, posted, run and freed (libasync-smp style).
 *
 * Cross-core (`--cross`, which the default run starts as a child process
 * after the one-worker rows, because the compat runtime's size is fixed when
 * it starts): all usable CPUs as workers (or --workers N), a producer on
 * color 0 posts round-robin to colors 1..63, which spread over the workers
 * (color % workers, so most posts cross cores), 1000 per producer run, with
 * at most 100,000 events in flight, until N ran; timed from the producer's
 * first run to the N-th consumed event -> ns per event:
 *   native  mely_post_ex(color, consumer, NULL arg);
 *   compat  cpucb_tail(cwrap(consume2, a, b, color)).
 *
 * R runs each (5), interleaved (native 1, compat 1, native 2, ...) so that a
 * change in the machine's load hits both alike; the medians, and the median
 * of the R per-pair ratios, are compared with the target: compat <= 2x
 * native. Table on stdout, rows to a CSV file (default
 * bench/results/compat_post.csv, relative to the current directory; the
 * cross-core rows go to the same name with "-cross" before ".csv").
 * The compat runtime is the compat library's own (amain() never returns): a
 * native run happens on a thread of its own that a compat handler starts and
 * joins (the compat worker waits meanwhile), and the program ends with exit()
 * after the last compat run.
 *
 * Usage: bench/compat_post [--events N] [--runs R] [--csv PATH] [--workers N]
 *        [--cross | --no-cross]      (--help: the options)
 */
#include "async.h"

#include <mely/mely.h>

#include "bench/harness.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <atomic>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <x86intrin.h>

namespace {

long g_events;
int g_runs;
const char *g_csv_opt;
std::string g_csv;
bool g_cross;    /* this process runs the cross-core rows */
bool g_no_cross; /* do not start them after the one-worker rows */
int g_workers;   /* cross-core: -1 = all usable CPUs */
char **g_argv;

const bench_opt options[] = {
    bench_opt_of("events", OPT_U64, &g_events, "events per run", 2000, 1e12, 2000000),
    bench_opt_of("runs", OPT_INT, &g_runs, "runs of each, interleaved", 1, 1000, 5),
    bench_opt_of("csv", OPT_STR, &g_csv_opt, "the CSV file (cross-core: -cross before .csv)", 0,
                 0, 0, 0, "bench/results/compat_post.csv"),
    bench_opt_of("workers", OPT_INT, &g_workers, "cross-core workers", 1, MELY_MAX_WORKERS, -1, 0,
                 nullptr, "all usable CPUs"),
    bench_opt_of("cross", OPT_FLAG, &g_cross, "run the cross-core rows (in this process)"),
    bench_opt_of("no-cross", OPT_FLAG, &g_no_cross, "do not run the cross-core rows after the others"),
    bench_opt{},
};

const int kBurst = 1000;
const int kColor = 1;

double now() { return (double)now_ns(); }

/* ---- native ------------------------------------------------------------------------ */

mely_t g_native;
long g_ran;
double g_t0, g_t1;

void native_empty(void *) { g_ran++; }

void native_driver(void *)
{
    if (g_ran == 0)
        g_t0 = now();
    g_ran++;
    if (g_ran >= g_events) {
        g_t1 = now();
        mely_stop(&g_native);
        return;
    }
    for (int i = 0; i < kBurst; i++)
        mely_post_ex(&g_native, kColor, 0, NULL, native_empty, NULL, 0);
    mely_post_ex(&g_native, kColor, 0, NULL, native_driver, NULL, 0);
}

double native_run()
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 1;
    if (mely_init(&g_native, &cfg) != 0) {
        fprintf(stderr, "compat_post: mely_init failed\n");
        exit(1);
    }
    g_ran = 0;
    mely_post(&g_native, kColor, native_driver, NULL);
    mely_run(&g_native);
    mely_shutdown(&g_native);
    return (g_t1 - g_t0) / (double)(g_ran - 1);
}

/* ---- compat ------------------------------------------------------------------------- */

std::vector<double> g_native_ns, g_compat_ns;
long g_sink;

void compat_empty(int a, long b) { g_ran++; g_sink += a + b; }

void report();
void compat_driver(int run);

/* Run r: a native run (on its own thread, joined), then compat run r. */
void pair(int run)
{
    double ns = 0;
    std::thread t([&ns] { ns = native_run(); });
    t.join();
    g_native_ns.push_back(ns);
    g_ran = 0;
    cpucb_tail(cwrap(compat_driver, run, kColor));
}

void compat_driver(int run)
{
    if (g_ran == 0)
        g_t0 = now();
    g_ran++;
    if (g_ran >= g_events) {
        g_t1 = now();
        g_compat_ns.push_back((g_t1 - g_t0) / (double)(g_ran - 1));
        if (run + 1 < g_runs) {
            cpucb_tail(cwrap(pair, run + 1, kColor));
        } else {
            report();
            exit(0);
        }
        return;
    }
    for (int i = 0; i < kBurst; i++)
        cpucb_tail(cwrap(compat_empty, i, (long)run, kColor));
    cpucb_tail(cwrap(compat_driver, run, kColor));
}

/* ---- cross-core: producer -> 63 colors ------------------------------------------ */

const int kConsumers = 63;
const long kMaxInFlight = 100000;

/* Per consumer color, written only by its handlers (one at a time), read by
 * the producer: a line each. */
struct alignas(64) consumed_count {
    std::atomic<long> n{0};
};
consumed_count g_consumed[kConsumers + 1];
long g_posted;  /* the producer's */
int g_next;     /* the producer's */

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
        g_t0 = now();
    long done = consumed_total();
    if (done >= g_events) {
        g_t1 = now();
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
        mely_post_ex(&g_native, color, 0, NULL, native_consume, (void *)(intptr_t)color, 0);
    });
    if (done)
        mely_stop(&g_native);
    else
        mely_post_ex(&g_native, 0, 0, NULL, native_producer, NULL, 0);
}

double native_cross_run()
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = g_workers > 0 ? (unsigned)g_workers : 0;
    if (mely_init(&g_native, &cfg) != 0) {
        fprintf(stderr, "compat_post: mely_init failed\n");
        exit(1);
    }
    cross_reset();
    mely_post(&g_native, 0, native_producer, NULL);
    mely_run(&g_native);
    mely_shutdown(&g_native);
    return (g_t1 - g_t0) / (double)g_events;
}

void compat_consume(int color, long run) { count_consumed(color); g_sink += run; }
void compat_producer(int run);

void cross_pair(int run)
{
    double ns = 0;
    std::thread t([&ns] { ns = native_cross_run(); });
    t.join();
    g_native_ns.push_back(ns);
    cross_reset();
    cpucb_tail(cwrap(compat_producer, run, 0));
}

void compat_producer(int run)
{
    bool done = produce([run](int color) {
        cpucb_tail(cwrap(compat_consume, color, (long)run, color));
    });
    if (!done) {
        cpucb_tail(cwrap(compat_producer, run, 0));
        return;
    }
    g_compat_ns.push_back((g_t1 - g_t0) / (double)g_events);
    if (run + 1 < g_runs) {
        cpucb_tail(cwrap(cross_pair, run + 1, 0));
    } else {
        report();
        exit(0);
    }
}

/* The cross-core rows, in a child process (see the top); its exit status. */
int run_cross_child()
{
    std::string csv = g_csv;
    std::size_t dot = csv.rfind(".csv");
    csv = dot != std::string::npos ? csv.substr(0, dot) + "-cross.csv" : csv + "-cross";
    std::string events = std::to_string(g_events), runs = std::to_string(g_runs),
                workers = std::to_string(g_workers);
    char *argv[] = {g_argv[0], (char *)"--cross", (char *)"--events", (char *)events.c_str(),
                    (char *)"--runs", (char *)runs.c_str(), (char *)"--csv", (char *)csv.c_str(),
                    g_workers > 0 ? (char *)"--workers" : NULL, (char *)workers.c_str(), NULL};
    printf("\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "compat_post: the cross-core child failed\n");
        return 1;
    }
    return WEXITSTATUS(status);
}

double median_of(std::vector<double> v) { return median(v.data(), v.size()); }

int run_cross_child();

void report()
{
    const char *what = g_cross ? "cross-core: producer -> 63 colors on all workers" : "1 worker";
    const char *nname = g_cross ? "native post to 63 colors + run" : "native post+run (empty handler)";
    const char *cname = g_cross ? "compat cwrap(f,a,b,c)+cpucb_tail, 63" : "compat cwrap(f,a,b,c)+cpucb_tail";
    double n = median_of(g_native_ns), c = median_of(g_compat_ns);
    std::vector<double> ratios;
    for (std::size_t i = 0; i < g_native_ns.size() && i < g_compat_ns.size(); i++)
        ratios.push_back(g_compat_ns[i] / g_native_ns[i]);
    double ratio = median_of(ratios);
    printf("compat_post: %ld events per run, %d runs, %s, medians\n\n", g_events, g_runs, what);
    printf("%-38s %10s\n", "workload", "ns/event");
    printf("%-38s %10.1f\n", nname, n);
    printf("%-38s %10.1f\n", cname, c);
    printf("\nratio compat/native (median of the %zu pairs): %.2f (target <= 2.00: %s)\n",
           ratios.size(), ratio,
           ratio <= 2.0 ? "met" : "NOT met");
    printf("runs native:");
    for (double x : g_native_ns)
        printf(" %.1f", x);
    printf("\nruns compat:");
    for (double x : g_compat_ns)
        printf(" %.1f", x);
    printf("\nratios:     ");
    for (double x : ratios)
        printf(" %.2f", x);
    printf("\n");
    std::string dir = g_csv.substr(0, g_csv.rfind('/'));
    if (g_csv.find('/') != std::string::npos)
        mkdir(dir.c_str(), 0777);
    FILE *f = fopen(g_csv.c_str(), "w");
    if (!f) {
        fprintf(stderr, "compat_post: %s: %s\n", g_csv.c_str(), strerror(errno));
        return;
    }
    const char *sfx = g_cross ? "_cross63" : "";
    fprintf(f, "workload,ns_per_event_median,runs,events_per_run,target,met\n");
    fprintf(f, "native_post_run%s,%.2f,%d,%ld,,\n", sfx, n, g_runs, g_events);
    fprintf(f, "compat_cwrap2_cpucb_tail%s,%.2f,%d,%ld,<=2x native,%s\n", sfx, c, g_runs,
            g_events, ratio <= 2.0 ? "yes" : "no");
    fprintf(f, "ratio_median_of_pairs,%.3f,,,<=2,%s\n", ratio, ratio <= 2.0 ? "yes" : "no");
    fclose(f);
    printf("\nCSV: %s\n", g_csv.c_str());
    fflush(stdout);
    if (!g_cross && !g_no_cross)
        exit(run_cross_child());
}

} // namespace

int main(int argc, char **argv)
{
    int rc = bench_options("compat_post [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    g_argv = argv;
    g_csv = g_csv_opt;
    if (g_cross) {
        /* The compat runtime reads the environment: all usable CPUs, or N. */
        if (g_workers > 0)
            setenv("MELY_WORKERS", std::to_string(g_workers).c_str(), 1);
        else
            unsetenv("MELY_WORKERS");
        cpucb_tail(cwrap(cross_pair, 0, 0));
    } else {
        setenv("MELY_WORKERS", "1", 1);
        cpucb_tail(cwrap(pair, 0, kColor));
    }
    amain();
}
