/*
 * harness.h: what mely's benchmark programs share to measure.
 *
 * Clocks, the load probe that says how disturbed a run was, medians of
 * samples, a watchdog that bounds a runtime's run, a runtime for one run
 * (open, colors of a worker, counters, close), mely_run() in the background,
 * a workload run R times with its median, the machine description, option
 * numbers, and a peer program (e.g. the Boost.Asio version of a benchmark)
 * run next to this one. The results (rows, judging, table, CSV) are in
 * report.h.
 *
 * The clocks, load, medians, machine, option numbers and peer sections are
 * mely-agnostic; the watchdog, runtime, background and runs sections use
 * mely's public API only.
 *
 * State lives in a `struct bench` that the program owns (its name for
 * messages, the worst load seen), not in hidden globals. Messages go to
 * stderr as "<name>: ...". The clocks, bench_cpu_ns() and bench_post_failed()
 * may be called from any thread (handlers time themselves with them and
 * report their failed posts); the rest from one thread at a time, normally
 * the program's main thread.
 */
#ifndef MELY_BENCH_HARNESS_H
#define MELY_BENCH_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "mely/mely.h"

/* A benchmark program's harness state. */
struct bench {
    const char *name;    /* prefix of messages: "dispatch" */
    double worst_others; /* worst load seen by bench_load_note(), % of all CPUs */
    double worst_steal;
};

/* Sets the program's name, clears the worst load. */
void bench_init(struct bench *b, const char *name);

/* ---- Clocks ---------------------------------------------------------------------- */

/* CLOCK_MONOTONIC in ns. */
uint64_t bench_now_ns(void);

/* Pins the calling thread to `cpu` (nothing if cpu < 0). */
void bench_pin_self(int cpu);

/* TSC cycles (rdtsc) on x86-64, constant and invariant on our KVM guests; 0
 * elsewhere. */
uint64_t bench_cycles(void);

/* The TSC's resolution in practice: the median of 1000 differences between
 * two successive bench_cycles() reads (rdtsc's own latency: 26 cycles on the
 * AMD EPYC guests; intervals that short are counted in such steps); 0 without
 * a TSC. Cost: ~1000 rdtsc and a sort. */
uint64_t bench_tsc_step(void);

/* The CLOCK_MONOTONIC time `ns` from now, for bench_sleep_until() and timed
 * waits on a condition variable set to CLOCK_MONOTONIC. */
struct timespec bench_ts_after(uint64_t ns);

/* Busy-waits until `cycles` TSC cycles have passed since `start` (a
 * bench_cycles() value): a handler of a known cost. Returns at once where
 * there is no TSC. Any thread. */
void bench_spin_cycles(uint64_t start, uint64_t cycles);

/* TSC cycles per nanosecond, calibrated once against CLOCK_MONOTONIC over
 * ~50 ms (the first call sleeps that long; later calls return the cached
 * figure); 0 without a TSC. */
double bench_tsc_per_ns(void);

/* Sleeps until the monotonic deadline (restarts after signals). */
void bench_sleep_until(struct timespec deadline);

/* CPU time (user + system) of this process (RUSAGE_SELF) or of its reaped
 * children (RUSAGE_CHILDREN), in ns; 0 if getrusage() fails. */
uint64_t bench_cpu_ns(int who);

/* ---- Load: what else ran while we measured --------------------------------------- */

/* A snapshot of /proc/stat (all CPUs) and of our own CPU time. */
struct bench_probe {
    uint64_t busy_ticks, steal_ticks; /* all CPUs, USER_HZ ticks */
    uint64_t self_ns;                 /* this process's and its reaped children's CPU time */
    uint64_t t_ns;
    bool ok; /* false: /proc/stat unreadable, the probe judges nothing */
};

/* Shorter intervals are not judged: /proc/stat counts in ticks of 10 ms. */
#define BENCH_PROBE_MIN_NS 500000000ull

/* Under the table, bench_load_warn() speaks when some interval exceeded these. */
#define BENCH_NOISY_OTHERS_PCT 10.0
#define BENCH_NOISY_STEAL_PCT 5.0

/* Takes a snapshot. Cost: one read of /proc/stat, two getrusage(). */
struct bench_probe bench_probe_now(void);

/* Between two snapshots at least BENCH_PROBE_MIN_NS apart: *others = % of all
 * online CPUs used by other processes (busy time minus ours and our
 * children's), *steal = % stolen by the hypervisor; b's worst figures are
 * updated. Cost: two sysconf().
 * @return false (nothing set) if a snapshot is not ok or the interval is too
 *         short. */
bool bench_load(struct bench *b, const struct bench_probe *p0, const struct bench_probe *p1,
                double *others, double *steal);

/* ", others X%, steal Y%" between two snapshots into buf (via bench_load()), or
 * "" if they judge nothing. Returns buf. */
const char *bench_load_note(struct bench *b, const struct bench_probe *p0,
                            const struct bench_probe *p1, char *buf, size_t size);

/* Prints a note on stdout if the worst load seen exceeded BENCH_NOISY_*. */
void bench_load_warn(const struct bench *b);

/* ---- Medians of samples ---------------------------------------------------------- */

/* One run of a workload. */
struct bench_sample {
    bool ok;       /* false: the run failed, its figures mean nothing */
    double value;  /* in the workload's unit */
    double cycles; /* TSC cycles per item */
};

/* Sorts v[0..n-1] and returns its median (the mean of the two middle values
 * if n is even); 0 if n == 0. O(n log n). */
double bench_median(double *v, size_t n);

/* Sorts v[0..n-1] and returns its q-quantile (0 <= q <= 1; nearest rank: the
 * value at index ceil(q * n) - 1, the smallest for q = 0); 0 if n == 0.
 * O(n log n). */
double bench_quantile(double *v, size_t n, double q);

/* The medians of value and of cycles over the samples that are ok.
 * @return false (nothing set) if none is. */
bool bench_sample_medians(const struct bench_sample *s, unsigned n, double *value,
                          double *cycles);

/* ---- Watchdog: a bounded mely_run() ---------------------------------------------- */

/* How long mely_run() may take to return after the watchdog's mely_stop(). */
#define BENCH_STOP_GRACE_NS 10000000000ull

/* A generous time limit for a run of `count` items that should each take far
 * less than ns_per_item: 30 s + count * ns_per_item. Only there so that a
 * stuck run cannot hang. */
uint64_t bench_limit_ns(uint64_t count, uint64_t ns_per_item);

/* Calls mely_stop() if a run takes longer than its limit; if mely_run() has
 * not returned BENCH_STOP_GRACE_NS after that, the process exits with status 3
 * (a hang is a result too). Fields are private to harness.c. */
struct bench_watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;  /* under mu */
    bool fired; /* under mu */
    uint64_t limit_ns;
    mely_t *m;
    const char *name, *what; /* for messages */
};

/* Starts watching m for limit_ns, on a thread of its own; `what` names the run
 * in messages. wd must stay in place until bench_watchdog_end().
 * @return 0, or a negative errno from pthread_create() (nothing started). */
int bench_watchdog_start(struct bench_watchdog *wd, const struct bench *b, mely_t *m,
                         uint64_t limit_ns, const char *what);

/* Ends the watch (call it once mely_run() returned) and joins its thread.
 * @return true if the watchdog had to stop the runtime. */
bool bench_watchdog_end(struct bench_watchdog *wd);

/* mely_run(m) under a watchdog of limit_ns; messages name the run `what`.
 * @return 0; 1 if the watchdog stopped it; a negative errno if no watchdog
 *         could start (mely_run() not called); mely_run()'s error. Each
 *         failure is reported on stderr. */
int bench_mely_run(const struct bench *b, mely_t *m, uint64_t limit_ns, const char *what);

/* ---- A runtime for one run ------------------------------------------------------- */

/* mely_init() with `workers` workers, pinned (the MELY_* environment variables
 * still override the configuration).
 * @return 0; mely_init()'s error; MELY_EINVAL if the runtime has fewer than
 *         min_workers workers (it is shut down). Each failure is reported. */
int bench_rt_open(const struct bench *b, mely_t *m, unsigned workers, unsigned min_workers);

/* bench_rt_open() with a whole configuration (engine, steal policy, ...). */
int bench_rt_open_cfg(const struct bench *b, mely_t *m, const mely_config_t *cfg,
                      unsigned min_workers);

/* mely_shutdown(); reports events still queued and errors, naming the run
 * `what`. */
void bench_rt_close(const struct bench *b, mely_t *m, const char *what);

/* The n first ordinary colors >= 1 that `worker` owns, into out (color 0, the
 * default color, is left alone). Cost: up to MELY_COLORS mely_color_owner().
 * @return how many were found (fewer than n is reported). */
unsigned bench_colors_of(const struct bench *b, const mely_t *m, int worker, mely_color_t *out,
                         unsigned n);

/* For a handler whose mely_post() failed with err: keeps the first error in
 * *slot (compare-and-swap from 0) and calls mely_stop(m). Any thread. */
void bench_post_failed(mely_t *m, _Atomic int *slot, int err);

/* Prints "environment: NAME=value (overrides the benchmark's configuration)"
 * for each of MELY_WORKERS, MELY_PIN, MELY_BATCH, MELY_SPIN_US, MELY_STEAL and
 * MELY_ENGINE that is set (mely_init() reads them), so that a table says what
 * it measured. */
void bench_print_mely_env(FILE *f);

/* The workers' counters (mely_worker_stats), summed, for the per-run lines. */
struct bench_totals {
    uint64_t run[2]; /* events run by workers 0 and 1 */
    uint64_t parks, wakeups, contended;
    uint64_t lock_cycles;
    uint64_t steals, steal_cycles, stolen_events, stolen_cycles;
    /* A median cannot be summed: the steal_cycles_median of the worker that
     * made the most steals (the thief, in a benchmark with one), 0 if none. */
    uint64_t steal_median;
};

/* Sums the counters of m's workers (those whose stats cannot be read count 0).
 * Cost: one mely_worker_stats() per worker. */
struct bench_totals bench_rt_totals(const mely_t *m);

/* ---- mely_run() in the background ------------------------------------------------ */

/* mely_run() on a thread of its own, while the caller measures. Fields are
 * private to harness.c. */
struct bench_bg {
    pthread_t thread;
    mely_t *m;
    int rc; /* mely_run()'s, read after the join */
};

/* Starts mely_run(m) on a new thread; `what` names the run in messages.
 * @return 0, or a negative errno from pthread_create() (reported). */
int bench_bg_start(const struct bench *b, struct bench_bg *bg, mely_t *m, const char *what);

/* mely_stop(), then joins the thread; if mely_run() has not returned
 * BENCH_STOP_GRACE_NS later, the process exits with status 3 (a hang).
 * @return mely_run()'s result (an error is reported). */
int bench_bg_stop(const struct bench *b, struct bench_bg *bg, const char *what);

/* ---- Runs: a workload R times, the median ---------------------------------------- */

/* One run of a workload of `count` items on a fresh runtime of `workers`
 * workers; fills *tot with the runtime's counters. */
typedef struct bench_sample (*bench_workload_fn)(const struct bench *b, unsigned workers,
                                                 uint64_t count, struct bench_totals *tot);

/* Runs fn `runs` times, printing on stdout each run (value * scale in `unit`,
 * TSC cycles, the counters, the load) and the median, labelled `name`.
 * @return true (*value = the median * scale) if some run succeeded. */
bool bench_measure(struct bench *b, const char *name, const char *unit, bench_workload_fn fn,
                   unsigned workers, unsigned runs, uint64_t count, double scale, double *value);

/* ---- The machine's floor ---------------------------------------------------------- */

/* Two plain threads pinned to the first two allowed CPUs (where workers 0 and 1
 * run) pass a counter back and forth through two cache lines, `trips` times:
 * the least a cross-core round trip can cost on this machine right now. On the
 * KVM guests we use it moves 4x from one period to another (the host places
 * the vCPUs), so cross-core figures are quoted next to it.
 * @return a sample in ns per round trip (ok false if a thread failed to start). */
struct bench_sample bench_floor_pingpong(uint64_t trips);

/* The same two pinned threads stream `records` 40-byte records through a
 * plain bounded single-producer/single-consumer ring (1024 slots; the
 * producer publishes its tail once per batch of up to 32, the consumer
 * hands slots back once per drain): the most a cross-core post path can
 * carry on this machine right now.
 * @return a sample in M records/s, with cycles per record (ok false if a
 * thread failed to start). */
struct bench_sample bench_floor_spsc(uint64_t records);

/* ---- The machine ----------------------------------------------------------------- */

struct bench_machine {
    char cpu[128];   /* "model name" of /proc/cpuinfo, or "unknown" */
    unsigned usable; /* CPUs in our affinity mask (sched_getaffinity), 0 if unknown */
    long online;     /* online CPUs, -1 if unknown */
    char kernel[200]; /* "sysname release machine" (uname), or "unknown" */
};

/* The size in bytes of CPU 0's level-`level` data or unified cache (sysfs,
 * /sys/devices/system/cpu/cpu0/cache), or 0 if unknown. */
size_t bench_cache_bytes(unsigned level);

/* Describes this machine. Never fails: unknown parts say so. */
void bench_machine_get(struct bench_machine *mc);

/* Prints "machine: <cpu>; <usable> usable CPUs (of <online> online); <kernel>\n". */
void bench_machine_print(FILE *f, const struct bench_machine *mc);

/* ---- Option numbers -------------------------------------------------------------- */

/* A whole decimal number in lo..hi (no sign, no trailing characters).
 * @return 0 (*out set), -EINVAL (not a number), -ERANGE (out of range). */
int bench_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* A floating-point number in lo..hi (strtod syntax, no trailing characters).
 * @return 0 (*out set), -EINVAL (not a number, or NaN), -ERANGE (out of range). */
int bench_parse_double(const char *s, double lo, double hi, double *out);

/* ---- A peer program -------------------------------------------------------------- */

/* Finds the executable `peer` next to this program: in the directory of argv0
 * (of /proc/self/exe if argv0 has no slash), or in its parent when that
 * directory is libtool's .libs (`make` runs the real binary from bench/.libs).
 * @return 0 (path set), -ENOENT (not there, or its path does not fit). */
int bench_find_peer(const char *argv0, const char *peer, char *path, size_t size);

/* Called once per line of the peer's stdout, without its '\n'. */
typedef void (*bench_line_fn)(const char *line, void *arg);

/* Runs path with argv (argv[0] included, NULL-terminated), its stdout into a
 * pipe, stderr inherited, and waits for it; then passes each stdout line (of
 * the first 64 KB) to on_line. The peer must bound its own run time.
 * @return 0 if it exited with status 0; 1 if it ended otherwise (the lines it
 *         wrote are still passed on; the status is reported on stderr); a
 *         negative errno if it could not be started (pipe, fork; reported). */
int bench_run_peer(const struct bench *b, const char *path, char *const argv[],
                   bench_line_fn on_line, void *arg);

#endif /* MELY_BENCH_HARNESS_H */
