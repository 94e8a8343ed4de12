/* SPDX-License-Identifier: MIT */
/*
 * harness.h: what mely's benchmark programs share, on top of common/measure.h
 * (clock, CPU time, pinning, medians, watchdog), which they share with tests/.
 *
 * Options from a declarative table, the TSC, the load probe that says how
 * disturbed a run was, samples and median passes, a runtime for one run,
 * mely_run() bounded or in the background, the machine and its floors, a
 * peer program, and the results: an aligned table, also written as CSV.
 *
 * State lives in a `struct bench` that the program owns. Messages go to
 * stderr as "<name>: ...". The TSC functions and bench_post_failed() may be
 * called from any thread (handlers time themselves and report failed posts);
 * the rest from one thread at a time, normally the program's main thread.
 * Public API of mely only.
 */
#ifndef MELY_BENCH_HARNESS_H
#define MELY_BENCH_HARNESS_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/measure.h"
#include <mely/mely.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A benchmark program's harness state. */
struct bench {
    const char *name;    /* prefix of messages: "dispatch" */
    double worst_others; /* worst load seen by bench_load_note(), % of all CPUs */
    double worst_steal;
};

/* ---- Options: a declarative table ---------------------------------------------------- */

enum bench_opt_kind {
    OPT_FLAG,   /* bool: set */
    OPT_QUICK,  /* bool: set, and the other options take their .quick defaults */
    OPT_UINT,   /* unsigned, whole number in lo..hi */
    OPT_U64,    /* uint64_t, whole number in lo..hi */
    OPT_INT,    /* int, whole number in lo..hi (-1, the default, may mean `none`) */
    OPT_DOUBLE, /* double in lo..hi */
    OPT_STR,    /* const char *, not empty */
    OPT_CALL,   /* call(arg, var) parses it; false: rejected */
};

/* One --name option. A table of them ends with an entry whose name is NULL. */
struct bench_opt {
    const char *name;
    enum bench_opt_kind kind;
    void *var;
    const char *help;        /* one line: what it is */
    double lo, hi;           /* a number's range */
    double dflt, quick;      /* a number's default, and with --quick (0: the default) */
    const char *sdflt;       /* OPT_STR's and OPT_CALL's default (shown; OPT_STR: set) */
    bool (*call)(const char *arg, void *var);
    const char *none;        /* OPT_INT: what -1 means, in the help and the CSV */
    bool param;              /* a parameter of the run, repeated in the CSV (bench_opt_params) */
};

#ifdef __cplusplus
} /* extern "C" */
/* A table entry in C++, where designated initializers must name every field. */
inline bench_opt bench_opt_of(const char *name, bench_opt_kind kind, void *var, const char *help,
                              double lo = 0, double hi = 0, double dflt = 0, double quick = 0,
                              const char *sdflt = nullptr, const char *none = nullptr)
{
    bench_opt o{};
    o.name = name, o.kind = kind, o.var = var, o.help = help, o.lo = lo, o.hi = hi;
    o.dflt = dflt, o.quick = quick, o.sdflt = sdflt, o.none = none;
    return o;
}
extern "C" {
#endif

/* Parses argv: sets every variable to its default (a number's .quick one
 * when an OPT_QUICK option is given), then the options given; between
 * min_args and max_args operands must follow. --help prints `usage` and
 * one line per option, with its range and defaults.
 * @return the index of the first operand (argc if none); 0: --help was
 *         printed (exit 0); -1: a usage error was printed (exit 2). */
int bench_options(const char *usage, const struct bench_opt *opts, int min_args, int max_args,
                  int argc, char **argv);

/* A run's parameter, repeated on every line of its CSV file. */
struct bench_param {
    char name[24];
    char value[32];
};

/* The options marked .param, in table order, as CSV parameters (name: the
 * option's, '-' as '_'). Returns how many (at most max). */
unsigned bench_opt_params(const struct bench_opt *opts, struct bench_param *p, unsigned max);

/* ---- The TSC ------------------------------------------------------------------------- */

/* TSC cycles (rdtsc) on x86-64, constant and invariant on our KVM guests; 0
 * elsewhere. */
uint64_t bench_cycles(void);

/* The median of 1000 differences between two successive bench_cycles() reads:
 * the TSC's resolution in practice (26 cycles on the AMD EPYC guests); 0
 * without a TSC. */
uint64_t bench_tsc_step(void);

/* TSC cycles per ns, calibrated once over ~50 ms (the first call sleeps that
 * long); 0 without a TSC. */
double bench_tsc_per_ns(void);

/* Busy-waits until `cycles` TSC cycles have passed since `start` (a
 * bench_cycles() value): a handler of a known cost. At once without a TSC. */
void bench_spin_cycles(uint64_t start, uint64_t cycles);

/* ---- Load: what else ran while we measured -------------------------------------------- */

/* A snapshot of /proc/stat (all CPUs) and of our own CPU time. */
struct bench_probe {
    uint64_t busy_ticks, steal_ticks; /* all CPUs, USER_HZ ticks */
    double self_s;                    /* this process's and its reaped children's CPU time */
    uint64_t t_ns;
    bool ok; /* false: /proc/stat unreadable, the probe judges nothing */
};

/* Takes a snapshot: one read of /proc/stat, two getrusage(). */
struct bench_probe bench_probe_now(void);

/* ", others X%, steal Y%" into buf: the % of all CPUs that other processes
 * used between two snapshots (busy time minus ours) and that the hypervisor
 * stole; "" if a snapshot is not ok or they are less than 0.5 s apart (the
 * ticks are 10 ms). b's worst figures are updated. Returns buf. */
const char *bench_load_note(struct bench *b, const struct bench_probe *p0,
                            const struct bench_probe *p1, char *buf, size_t size);

/* Prints a note on stdout if some interval had others > 10% or steal > 5%. */
void bench_load_warn(const struct bench *b);

/* ---- Samples and passes ---------------------------------------------------------------- */

/* One run of a workload. */
struct bench_sample {
    bool ok;       /* false: the run failed, its figures mean nothing */
    double value;  /* in the workload's unit */
    double cycles; /* TSC cycles per item */
};

/* A timed stretch: the clock and the TSC at its start and at its end. */
struct bench_span {
    uint64_t t0, t1, c0, c1;
};

/* Marks the start (end false) or the end of s. Any thread. */
void bench_mark(struct bench_span *s, bool end);

/* n items over s: ns per item (rate false) or items per second (rate true),
 * and TSC cycles per item; not ok if s has not ended or n is 0. */
struct bench_sample bench_span_sample(const struct bench_span *s, uint64_t n, bool rate);

/* The medians of value and of cycles over the samples that are ok.
 * @return false (nothing set) if none is. */
bool bench_sample_medians(const struct bench_sample *s, unsigned n, double *value,
                          double *cycles);

/* Of n passes (items of `size` bytes from `items`), the one whose key is the
 * median among those that ran (key() < 0: did not run; the lower middle one
 * for an even count); -1 if none ran. */
int bench_median_pass(const void *items, size_t size, unsigned n, double (*key)(const void *));

/* ---- A runtime for one run ------------------------------------------------------------- */

/* mely_init() with `workers` workers, pinned (the MELY_* environment variables
 * still override the configuration).
 * @return 0; mely_init()'s error; MELY_EINVAL if the runtime has fewer than
 *         min_workers workers (it is shut down). Each failure is reported. */
int bench_rt_open(const struct bench *b, mely_t *m, unsigned workers, unsigned min_workers);

/* bench_rt_open() with a whole configuration (engine, steal policy, ...). */
int bench_rt_open_cfg(const struct bench *b, mely_t *m, const mely_config_t *cfg,
                      unsigned min_workers);

/* mely_shutdown(); reports events still queued and errors, naming the run. */
void bench_rt_close(const struct bench *b, mely_t *m, const char *what);

/* The n first ordinary colors >= 1 that `worker` owns, into out (up to
 * MELY_COLORS mely_color_owner()). @return how many (fewer is reported). */
unsigned bench_colors_of(const struct bench *b, const mely_t *m, int worker, mely_color_t *out,
                         unsigned n);

/* For a handler whose mely_post() failed with err: keeps the first error in
 * *slot and calls mely_stop(m). Any thread. */
void bench_post_failed(mely_t *m, int *slot, int err);

/* The first error bench_post_failed() kept in *slot, 0 if none. */
int bench_post_error(int *slot);

/* Prints "environment: NAME=value (overrides ...)" for each MELY_* variable
 * that mely_init() reads and that is set, so that a table says what it
 * measured. */
void bench_print_mely_env(FILE *f);

/* The workers' counters, summed (stats_sum), for the per-run lines. */
struct bench_totals {
    mely_stats_t sum;
    uint64_t run[2];      /* events run by workers 0 and 1 */
    uint64_t steal_median; /* the steal_cycles_median of the worker that stole most */
};
struct bench_totals bench_rt_totals(const mely_t *m);

/* A generous time limit for `count` items that should each take far less than
 * ns_per_item, in seconds: 30 + count * ns_per_item / 1e9. */
double bench_limit_s(uint64_t count, uint64_t ns_per_item);

/* mely_run(m) under a watchdog of `seconds`; messages name the run `what`.
 * @return 0; 1 if the watchdog stopped it; mely_run()'s error (reported). */
int bench_mely_run(const struct bench *b, mely_t *m, double seconds, const char *what);

/* mely_run() on a thread of its own, while the caller measures. */
struct bench_bg {
    pthread_t thread;
    mely_t *m;
    int rc; /* mely_run()'s, read after the join */
};

/* Starts mely_run(m) on a new thread. @return 0, or -errno (reported). */
int bench_bg_start(const struct bench *b, struct bench_bg *bg, mely_t *m, const char *what);

/* mely_stop(), then joins the thread; exits with status 3 if mely_run() has
 * not returned WATCHDOG_GRACE_S later. @return mely_run()'s result. */
int bench_bg_stop(const struct bench *b, struct bench_bg *bg, const char *what);

/* Runs fn `runs` times, printing on stdout each run (value * scale in `unit`,
 * TSC cycles, with_counters: the workers' counters, the load) and the median,
 * labelled `name`. fn gets `arg` and fills *tot (it may leave it zeroed).
 * @return true (*value = the median * scale) if some run succeeded. */
typedef struct bench_sample (*bench_workload_fn)(const struct bench *b, void *arg,
                                                 uint64_t count, struct bench_totals *tot);
bool bench_measure(struct bench *b, const char *name, const char *unit, bench_workload_fn fn,
                   void *arg, unsigned runs, uint64_t count, double scale, bool with_counters,
                   double *value);

/* ---- The machine and its floors ---------------------------------------------------------- */

struct bench_machine {
    char cpu[128];    /* "model name" of /proc/cpuinfo, or "unknown" */
    unsigned usable;  /* CPUs in our affinity mask, 0 if unknown */
    long online;      /* online CPUs, -1 if unknown */
    char kernel[200]; /* "sysname release machine" (uname), or "unknown" */
};

/* Describes this machine (never fails: unknown parts say so) and prints
 * "machine: <cpu>; <usable> usable CPUs (of <online> online); <kernel>" on f
 * (f NULL: nothing printed). */
void bench_machine_get(struct bench_machine *mc, FILE *f);

/* The size in bytes of CPU 0's level-`level` data or unified cache (sysfs),
 * or 0 if unknown. */
size_t bench_cache_bytes(unsigned level);

/* Two plain threads pinned to the first two allowed CPUs (where workers 0 and
 * 1 run) pass a counter back and forth through two cache lines, `trips`
 * times: the least a cross-core round trip costs on this machine right now
 * (on the KVM guests it moves 4x between periods). A sample in ns per round
 * trip (ok false if a thread failed to start). */
struct bench_sample bench_floor_pingpong(uint64_t trips);

/* The same two threads stream `records` 40-byte records through a plain
 * bounded SPSC ring (1024 slots; the producer publishes its tail once per
 * batch of up to 32, the consumer hands slots back once per drain): the most
 * a cross-core post path can carry here now. A sample in M records/s. */
struct bench_sample bench_floor_spsc(uint64_t records);

/* ---- A peer program -------------------------------------------------------------------- */

/* Finds the executable `peer` next to this program: in the directory of argv0
 * (of /proc/self/exe if argv0 has no slash), or in its parent when that is
 * libtool's .libs. @return 0 (path set), -ENOENT. */
int bench_find_peer(const char *peer, char *path, size_t size);

/* Starts path with argv (NULL-terminated, argv[0] included), its stdout into
 * a pipe (*out), stderr inherited, its CPU affinity `cpus` (NULL: ours).
 * @return its pid, or -errno (reported). */
pid_t bench_spawn(const struct bench *b, const char *path, char *const argv[],
                  const cpu_set_t *cpus, int *out);

/* Waits for pid, at most limit_s seconds (0: no limit) before it kills it;
 * returns 0 if it exited with status 0, else 1, and says how it ended in why
 * ("status 2", "signal 9", "killed"; "" for status 0). */
int bench_wait(pid_t pid, double limit_s, char *why, size_t size);

/* Runs a peer (bench_spawn), passes each line of its stdout to on_line (while
 * it runs), and waits for it. The peer bounds its own run time. @return 0 if it exited with status 0; 1 otherwise (reported;
 * its lines are still passed on); -errno if it could not start. */
int bench_run_peer(const struct bench *b, const char *path, char *const argv[],
                   void (*on_line)(const char *line, void *arg), void *arg);

/* ---- Results: an aligned table, and its CSV file ----------------------------------------- */

struct bench_column {
    const char *title; /* shown; NULL: a column of the CSV file only */
    const char *key;   /* its CSV title; NULL: shown only */
    unsigned width;    /* minimum; the column grows to its widest cell or title */
    bool right;        /* right-aligned (numbers) */
    unsigned gap;      /* spaces before the column (not the first): 0 means 1 */
};

enum { BENCH_CELL = 280 };

/* A table of nrows x ncols cells, "" until set. */
struct bench_table {
    const struct bench_column *cols;
    unsigned ncols, nrows;
    char (*cell)[BENCH_CELL];
};

/* Allocates the cells (exits with status 1 if out of memory). */
void bench_table_init(struct bench_table *t, const struct bench_column *cols, unsigned ncols,
                      unsigned nrows);
void bench_table_free(struct bench_table *t);

/* printf into cell (row, col); returns the cell. */
__attribute__((format(printf, 4, 5))) char *bench_cell(struct bench_table *t, unsigned row,
                                                       unsigned col, const char *fmt, ...);

/* Prints the shown columns: a header line, then one line per row (the last
 * column is not padded). */
void bench_table_print(FILE *f, const struct bench_table *t);

/* Writes the CSV columns to path (its directories are created, the file
 * replaced): a header date, cpu_model, usable_cpus, kernel, the params'
 * names, the column keys; then per row the date (UTC), the machine, the param
 * values and the cells ("" is an empty field). Prints "CSV: path" on stdout.
 * @return 0, or -errno (reported). */
int bench_table_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                    const struct bench_param *params, unsigned nparams,
                    const struct bench_table *t);

#ifdef __cplusplus
}
#endif

#endif /* MELY_BENCH_HARNESS_H */
