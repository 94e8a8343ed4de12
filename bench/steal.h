/* SPDX-License-Identifier: MIT */
/*
 * steal.h: what the parts of bench/steal share.
 *
 * bench/steal runs the Mely paper's work-stealing microbenchmarks (section
 * 5.2), each over every configuration of steal_configs[] (engine, stealing
 * policy, annotated handlers or not), as the rows of one table:
 *   steal.c             the configurations, options, tables, CSV, main();
 *   steal_rounds.c      fork/join rounds driven from worker 0's pinned color,
 *                       re-homing colors between rounds, per-worker handler
 *                       costs (this header's second half);
 *   steal_unbalanced.c  Tables 3-4: 98% short, 2% long events on one worker;
 *   steal_penalty.c     Table 5: chains of events walking a cache-sized array;
 *   steal_cache.c       Table 6: a merge sort split over three colors;
 *   steal_cost.c        cycles per steal against the victim's queue length.
 *
 * Threads: the main thread runs one row at a time; handlers run on the
 * workers. Public API of mely only.
 */
#ifndef MELY_BENCH_STEAL_H
#define MELY_BENCH_STEAL_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bench/harness.h"
#include <mely/mely.h>

#define STEAL_CACHELINE 64

/* ---- Configurations: the rows of every table -------------------------------------- */

struct steal_config {
    const char *name;   /* in the table: "mely - base WS" */
    const char *key;    /* in the CSV file and plots: "mely_base" */
    const char *engine; /* mely_config_t.engine */
    const char *steal;  /* mely_config_t.steal */
    bool annotated;     /* false: no timeleft annotations (unbalanced: plain
                           mely_post, no descriptor at all) */
};

enum {
    STEAL_LEGACY,
    STEAL_LEGACY_WS,
    STEAL_MELY, /* the reference of the ratio column */
    STEAL_MELY_BASE,
    STEAL_MELY_TIMELEFT,
    STEAL_MELY_PENALTY,
    STEAL_MELY_LOCALITY,
    STEAL_MELY_ALL,
    STEAL_MELY_ALL_BARE,
    STEAL_MELY_ALL_MEASURED,
    STEAL_NCONFIGS
};

extern const struct steal_config steal_configs[STEAL_NCONFIGS];

enum { STEAL_MAX_PASSES = 9 };

/* The run's settings, shared by the workloads. */
struct steal_ctx {
    struct bench b;
    unsigned workers;    /* >= 2 */
    double seconds;      /* measured time per row of a round workload, all passes */
    unsigned passes;     /* interleaved passes over the rows (steal.c) */
    bool quick;
    size_t l2_bytes;     /* one core's L2 (sysfs), or the fallback */
    uint64_t seed;       /* of the workloads' pseudo-random numbers */
    const char *csv_dir; /* steal-<workload>.csv goes there */
    struct bench_param params[4]; /* the options, for the CSV files */
    unsigned nparams;
};

/* Opens the runtime of a row: ctx's workers, pinned, cfg's engine and policy.
 * @return 0 or bench_rt_open_cfg()'s error (reported). */
int steal_open(const struct steal_ctx *ctx, const struct steal_config *cfg, mely_t *m);

/* Handler descriptors of a row: `timeleft` if cfg is annotated, else 0. */
mely_handler_t steal_handler(const struct steal_config *cfg, const char *name, uint64_t timeleft,
                             uint32_t penalty);

/* ---- What a row of a round workload measured ---------------------------------------- */

struct steal_figures {
    int err;                 /* 0, or why there are no figures (a mely error) */
    bool ok;                 /* figures valid */
    uint64_t events;         /* events of the complete rounds */
    unsigned rounds;         /* complete rounds */
    double seconds;          /* measured: first round's start to last round's end,
                                re-homing excluded */
    double rehome_seconds;   /* the re-homing left out */
    uint64_t elapsed_cycles; /* the whole mely_run(), for the % of time in locks */
    unsigned workers;
    struct bench_totals tot; /* the workers' counters at the end */
    char note[240];          /* what the workload adds (handler costs, checks) */
};

/* A round workload: runs configuration cfg once, fills *out. */
typedef void (*steal_row_fn)(const struct steal_ctx *ctx, const struct steal_config *cfg,
                             struct steal_figures *out);

/* The round workloads and the steal-cost one (its own table). */
void steal_unbalanced_describe(const struct steal_ctx *ctx, FILE *f);
void steal_unbalanced_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                          struct steal_figures *out);
void steal_penalty_describe(const struct steal_ctx *ctx, FILE *f);
void steal_penalty_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                       struct steal_figures *out);
void steal_cache_describe(const struct steal_ctx *ctx, FILE *f);
void steal_cache_row(const struct steal_ctx *ctx, const struct steal_config *cfg,
                     struct steal_figures *out);

/* Runs the steal-cost workload, prints its table, writes its CSV.
 * @return true if every point has figures. */
bool steal_cost_run(struct steal_ctx *ctx, const struct bench_machine *mc);

/* ---- Fork/join rounds (steal_rounds.c) ---------------------------------------------- */

/*
 * A round: the workload's driver handler runs on worker 0's pinned color,
 * calls steal_round_begin(), posts the round's events (all on worker 0's
 * colors). Idle workers need no prompting: the runtime wakes a parked worker
 * when work becomes stealable (mely/steal/steal.c). Every event of the round calls
 * steal_round_event_done() once when it is finished; the last one posts the
 * driver again. The driver stops the runtime once the measured time reached
 * the limit, so a run ends on a round boundary.
 *
 * Before each round the driver moves back to worker 0 the colors that steals
 * left elsewhere (mely_color_move), so that every round starts as unbalanced
 * as the first; that time is measured and left out.
 */
struct steal_rounds {
    mely_t *m;
    mely_fn_t driver; /* the workload's, with arg */
    void *arg;
    const mely_color_t *colors; /* re-homed to worker 0 before each round */
    unsigned ncolors;
    uint64_t per_round; /* events each round */
    uint64_t limit_ns;  /* no round starts after this much measured time */

    /* the driver's (worker 0), read by the main thread after mely_run() */
    bool started;
    unsigned rounds; /* complete */
    uint64_t t0_ns, t1_ns, rehome_ns;

    alignas(STEAL_CACHELINE) _Atomic uint64_t left; /* events of the round not done */
    int err; /* the first failure of a handler (bench_post_failed) */
};

/* Zeroed memory aligned to a cache line (for structures holding a steal_rounds
 * or per-worker slots); NULL if out of memory. Free with free(). */
void *steal_alloc(size_t size);

/* Moves every color of colors[] that does not live on worker 0 there. A color
 * still finishing its last event elsewhere (MELY_EBUSY) is retried for up to
 * a second. *moved (may be NULL) counts the moves.
 * @return 0 or mely_color_move()'s error. Threads: any. */
int steal_rehome(mely_t *m, const mely_color_t *colors, unsigned n, unsigned *moved);

/* In the driver: ends the previous round; false (the runtime is being
 * stopped) if the time is up or re-homing failed; else re-homes and arms the
 * round's event count. */
bool steal_round_begin(struct steal_rounds *r);

/* In each event of a round, once, when it is finished. */
void steal_round_event_done(struct steal_rounds *r);

/* steal_round_event_done(), or steal_round_fail(r, err) if err is not 0: how
 * an event that may have failed ends. */
void steal_round_event_end(struct steal_rounds *r, int err);

/* For a handler's failure: keeps the first error and stops the runtime. */
void steal_round_fail(struct steal_rounds *r, int err);

/* Runs the rounds on m (opened with steal_open(), r filled by the workload):
 * places the colors, posts the driver, runs under the watchdog, fills *out's
 * time, events and counters. The caller closes m. */
void steal_rounds_run(const struct steal_ctx *ctx, mely_t *m, struct steal_rounds *r,
                      const char *what, struct steal_figures *out);

/* ---- Handler costs, measured by the handlers themselves ------------------------------ */

enum { STEAL_KINDS = 4 };

struct steal_cost_slot {
    alignas(STEAL_CACHELINE) uint64_t cycles[STEAL_KINDS];
    uint64_t count[STEAL_KINDS];
};

/* One slot per worker, each written by its worker only. */
struct steal_costs {
    struct steal_cost_slot *slot;
    unsigned workers;
};

/* @return 0 or -ENOMEM. */
int steal_costs_init(struct steal_costs *c, unsigned workers);
void steal_costs_free(struct steal_costs *c);

/* In a handler: its kind took `cycles`. */
void steal_costs_add(struct steal_costs *c, unsigned kind, uint64_t cycles);

/* After the run: the mean cycles of a kind over all workers (0 if none ran). */
double steal_costs_mean(const struct steal_costs *c, unsigned kind);

#endif /* MELY_BENCH_STEAL_H */
