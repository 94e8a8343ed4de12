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
 * R runs each (5), interleaved (native 1, compat 1, native 2, ...) so that a
 * change in the machine's load hits both alike; the medians, and the median
 * of the R per-pair ratios, are compared with the target: compat <= 2x
 * native. Table on stdout, rows to a CSV file (default
 * bench/results/compat_post.csv, relative to the current directory).
 * The compat runtime is the compat library's own (amain() never returns): a
 * native run happens on a thread of its own that a compat handler starts and
 * joins (the compat worker waits meanwhile), and the program ends with exit()
 * after the last compat run.
 *
 * Usage: bench/compat_post [--events N] [--runs R] [--csv PATH]
 */
#include "async.h"

#include <mely/mely.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <x86intrin.h>

namespace {

long g_events = 2000000;
int g_runs = 5;
std::string g_csv = "bench/results/compat_post.csv";

const int kBurst = 1000;
const int kColor = 1;

double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- native ------------------------------------------------------------------------ */

mely_t g_native;
long g_ran;
double g_t0, g_t1;

void native_empty(void *) { g_ran++; }

void native_driver(void *)
{
    if (g_ran == 0)
        g_t0 = now_ns();
    g_ran++;
    if (g_ran >= g_events) {
        g_t1 = now_ns();
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
        g_t0 = now_ns();
    g_ran++;
    if (g_ran >= g_events) {
        g_t1 = now_ns();
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

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void report()
{
    double n = median(g_native_ns), c = median(g_compat_ns);
    std::vector<double> ratios;
    for (std::size_t i = 0; i < g_native_ns.size() && i < g_compat_ns.size(); i++)
        ratios.push_back(g_compat_ns[i] / g_native_ns[i]);
    double ratio = median(ratios);
    printf("compat_post: %ld events per run, %d runs, 1 worker, medians\n\n", g_events, g_runs);
    printf("%-34s %10s\n", "workload", "ns/event");
    printf("%-34s %10.1f\n", "native post+run (empty handler)", n);
    printf("%-34s %10.1f\n", "compat cwrap(f,a,b,c)+cpucb_tail", c);
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
    fprintf(f, "workload,ns_per_event_median,runs,events_per_run,target,met\n");
    fprintf(f, "native_post_run,%.2f,%d,%ld,,\n", n, g_runs, g_events);
    fprintf(f, "compat_cwrap2_cpucb_tail,%.2f,%d,%ld,<=2x native,%s\n", c, g_runs, g_events,
            ratio <= 2.0 ? "yes" : "no");
    fprintf(f, "ratio_median_of_pairs,%.3f,,,<=2,%s\n", ratio, ratio <= 2.0 ? "yes" : "no");
    fclose(f);
    printf("\nCSV: %s\n", g_csv.c_str());
}

} // namespace

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--events") && i + 1 < argc)
            g_events = atol(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            g_runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            g_csv = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--events N] [--runs R] [--csv PATH]\n", argv[0]);
            return 2;
        }
    }
    if (g_events < 2 * kBurst || g_runs < 1) {
        fprintf(stderr, "compat_post: --events >= %d, --runs >= 1\n", 2 * kBurst);
        return 2;
    }
    setenv("MELY_WORKERS", "1", 1); /* the compat runtime reads the environment */
    cpucb_tail(cwrap(pair, 0, kColor));
    amain();
}
