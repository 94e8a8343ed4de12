/* SPDX-License-Identifier: MIT */
/*
 * measure.h: what the benchmarks (bench/) and the tests (tests/) share: a
 * monotonic clock and sleeps, CPU time, descriptors, CPUs and pinning,
 * pseudo-random numbers, medians, the workers' counters summed, and a
 * watchdog that bounds mely_run().
 *
 * Public API of mely only; C and C++ (bench/'s C++ peers include it).
 * Threads: any, but a watchdog is started and ended by one thread.
 */
#ifndef MELY_COMMON_MEASURE_H
#define MELY_COMMON_MEASURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <mely/mely.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in ns. */
uint64_t now_ns(void);

/* Sleeps `us` microseconds, resuming after signals. */
void sleep_us(uint64_t us);

/* User + system CPU time of getrusage(who) (RUSAGE_SELF, RUSAGE_CHILDREN or
 * RUSAGE_THREAD) in seconds; 0 if it fails. */
double cpu_s(int who);

/* User + system CPU time of process pid (its every thread), in seconds, from
 * /proc/<pid>/stat (utime and stime: clock ticks, 10 ms here); -1 if it
 * cannot be read. A server's cost as its clients' benchmark sees it. */
double proc_cpu_s(pid_t pid);

/* What this process used while idle: sleeps settle_us (the workers start and
 * park), then window_us, and returns the CPU time (RUSAGE_SELF) and the wall
 * time of that window. */
struct cpu_window {
    double cpu_s, wall_s;
};
struct cpu_window idle_window(uint64_t settle_us, uint64_t window_us);

/* An idle window judged against the machine's own figure, in the same run:
 * sleeps settle_us, then for window_us a thread of its own spins while this
 * one sleeps, and returns what the spinner got (what a worker that spun
 * would get now, on this machine under its present load) beside what each
 * other thread of the process used (each thread's CPU-time clock, found
 * through /proc/self/task),
 * the calling thread left out. A busy machine gives the spinner less, and
 * an idle worker needs no more than on a quiet one: "the busiest other
 * thread used under a quarter of the spinner's time" tells a spinning
 * worker from a sleeping one under any load. Where /proc cannot be opened
 * (no descriptor left), the process's total stands for the busiest. */
struct idle_check {
    double spinner_s;     /* the spinner's CPU time in the window */
    double others_s;      /* every other thread's together */
    double busiest_s;     /* the busiest other thread's */
    double wall_s;
};
struct idle_check idle_against_spinner(uint64_t settle_us, uint64_t window_us);

/* This process's resident set, in bytes (/proc/self/statm); 0 if it cannot
 * be read. */
uint64_t rss_bytes(void);

/* Raises the soft RLIMIT_NOFILE to at least `want` (the hard limit too, where
 * that is allowed: root), else to the hard limit; never lowers it. Returns
 * the soft limit in force afterwards. */
unsigned raise_fd_limit(unsigned want);

/* Sets O_NONBLOCK on fd; returns 0 or -errno. */
int set_nonblocking(int fd);

/* The first n CPUs of this thread's affinity mask into cpu[0..n-1], -1 where
 * there are fewer. Returns how many were found. */
unsigned first_cpus(int *cpu, unsigned n);

/* Pins the calling thread to `cpu` (nothing if cpu < 0). */
void pin_self(int cpu);

/* xorshift64: the next pseudo-random number of state *s (never 0 from a
 * state that is not 0). */
uint64_t xorshift64(uint64_t *s);

/* qsort() comparators. */
int cmp_u32(const void *a, const void *b);
int cmp_double(const void *a, const void *b);

/* Sorts v[0..n-1] and returns its median (the mean of the two middle values
 * if n is even); 0 if n == 0. */
double median(double *v, size_t n);

/* Sorts v[0..n-1] and returns its q-quantile (0 <= q <= 1; nearest rank: the
 * value at index ceil(q * n) - 1, the smallest for q = 0); 0 if n == 0. */
double quantile(double *v, size_t n, double q);

/* The counters of m's workers, summed into *sum (steal_cycles_median too,
 * which means nothing summed). Returns 0, or the first error of
 * mely_worker_stats() (that worker counts 0). */
int stats_sum(const mely_t *m, mely_stats_t *sum);

/* Adds every counter of *s to *sum (steal_cycles_median too). */
void stats_add(mely_stats_t *sum, const mely_stats_t *s);

/* ---- Watchdog: a bounded mely_run() -------------------------------------------- */

/* How long mely_run() may take to return after the watchdog's mely_stop(). */
#define WATCHDOG_GRACE_S 10

/* A thread that calls mely_stop() if the run takes longer than its limit;
 * if mely_run() has not returned WATCHDOG_GRACE_S later, the process exits
 * with status 3 (a hang is a result too). Fields are private to measure.c. */
struct watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done, fired; /* under mu; fired is also read by watchdog_fired() */
    double seconds;
    mely_t *m;
    const char *what; /* names the run in messages */
};

/* Starts watching m for `seconds`; `what` names the run in messages. wd must
 * stay in place until watchdog_end(). A thread that cannot start ends the
 * process (status 3). */
void watchdog_start(struct watchdog *wd, mely_t *m, double seconds, const char *what);

/* Whether the watchdog has stopped the runtime (any thread). */
bool watchdog_fired(struct watchdog *wd);

/* Ends the watch (call it once mely_run() returned) and joins its thread.
 * Returns whether the watchdog had to stop the runtime. */
bool watchdog_end(struct watchdog *wd);

#ifdef __cplusplus
}
#endif

#endif /* MELY_COMMON_MEASURE_H */
