/* SPDX-License-Identifier: MIT */
/*
 * stealload.h: the scene of the stealing tests (check_steal, check_heuristics),
 * after the paper's microbenchmarks: groups of colors, each group with its
 * handler descriptor, all posted to worker 0 before the run (plus events of
 * worker 0's pinned color), so that idle workers must steal. run_load() runs
 * such a load to its end and checks what every stealing test relies on:
 *  - every event ran once, each color in post order, never two handlers of a
 *    color at once, and a running color never moved (each handler finds the
 *    color map naming its own worker, at its start and at its end);
 *  - pinned events all ran on worker 0;
 *  - the steal counters are consistent (steals <= attempts; a median, a sum
 *    of cycles and at least one event per steal once there were steals; all
 *    zero before), the workers ran all the events, and colors that ran away
 *    from worker 0 are exactly what steals explain;
 * and returns what was stolen (the run's counter increments, and per group
 * how many colors ran on another worker), for the test to judge.
 *
 * Handlers note() failures (tests/testutil.h); the functions that may fail the
 * test are for the test thread only. The runtime is testutil's `rt`.
 */
#ifndef MELY_TESTS_STEALLOAD_H
#define MELY_TESTS_STEALLOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <mely/mely.h>
#include "tests/testutil.h"

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_TSC 1 /* handlers of d_measured time themselves with the TSC */
#else
#define HAVE_TSC 0
#endif

/* ---- handler descriptors ------------------------------------------------------------ */

enum { ALWAYS_CYCLES = 10000000, PENALTY_CYCLES = 100000, HIGH_PENALTY = 100000 };

extern mely_handler_t d_always;      /* time-left 10,000,000: always worthy */
extern mely_handler_t d_never;       /* time-left 1: never worthy */
extern mely_handler_t d_unannotated; /* no time-left: 0, or measured under "measured" */
extern mely_handler_t d_cheap;       /* 100,000 with penalty 100,000: 1 under "penalty" */
extern mely_handler_t d_dear0;       /* 100,000 with penalty 0: counts fully */
extern mely_handler_t d_dear1;       /* 100,000 with penalty 1: counts fully */
extern mely_handler_t d_measured;    /* unannotated; its handlers time themselves,
                                        as do those posted without a descriptor */
extern mely_handler_t d_annotated;   /* time-left 5,000 */

/* What one event of `cycles` expected cycles adds to stolen_cycles (mely.h):
 * rounded to 32 cycles (within 16 of it, see sums_to()) and capped at
 * 2,097,120. */
#define COUNTED_CAP 2097120u
uint64_t counted(uint64_t cycles);

/* Whether `got` is n events of `cycles` each, up to the rounding. */
bool sums_to(uint64_t got, uint64_t n, uint64_t cycles);

/* ---- the load ---------------------------------------------------------------------- */

enum { NCOLORS = 64, MAX_PER_COLOR = 200, MAX_GROUPS = 4, SPIN_NS = 10000, MAXW = 8 };

struct group {
    unsigned ncolors, per_color;
    mely_handler_t *desc; /* NULL: posted with a NULL descriptor */
    uint64_t spin_ns;     /* how long each handler runs; 0: SPIN_NS */
};

struct color_state {
    atomic_int inside;   /* handlers of this color running now */
    unsigned next;       /* the sequence number expected next (one color at a time) */
    atomic_int worker_mask; /* the workers it ran on */
    unsigned group, n;   /* its group, its events */
};

struct steal_load {
    mely_color_t color[NCOLORS];
    struct color_state cs[NCOLORS];
    unsigned seq[NCOLORS][MAX_PER_COLOR];
    struct group groups[MAX_GROUPS];
    unsigned ngroups, ncolors;
    atomic_uint done;
    unsigned total;
    atomic_uint pinned_ran, pinned_elsewhere;
    /* TSC cycles a handler of d_measured took, seen from inside */
    atomic_uint_fast64_t tsc_min, tsc_max;
    atomic_uint tsc_runs;
};

extern struct steal_load ld;

/* Busy-waits `ns` nanoseconds (by the clock). Any thread. */
void spin_ns(uint64_t ns);

/* Forgets the previous load. */
void reset_load(void);

/* Adds `ncolors` colors of `per_color` events each (scaled, at most `max`)
 * with descriptor `desc`; add_group: at most MAX_PER_COLOR. */
void add_group_max(unsigned ncolors, unsigned per_color, unsigned max, mely_handler_t *desc);
void add_group(unsigned ncolors, unsigned per_color, mely_handler_t *desc);

/* Posts the groups' events to colors that worker 0 owns, from color `first`
 * on (the events interleaved across colors, so that every color has events
 * pending from the start), plus `npinned` always-worthy events of worker 0's
 * pinned color, which no policy may take. */
void post_load(mely_color_t first, unsigned npinned);

/* ---- running and checking ------------------------------------------------------------- */

/* What one run_load() did: counters are the run's increments (a runtime may
 * run several loads). */
struct outcome {
    mely_stats_t sum;            /* all workers' steal counters added up */
    uint64_t events_run[MAXW];
    uint64_t run_elsewhere;      /* events run by workers other than 0 */
    unsigned stolen[MAX_GROUPS]; /* colors of each group that ran elsewhere */
};

/* Runs the posted load on `rt` to its end, checks it (above) and returns what
 * was stolen; `what` names the run in failure messages. */
struct outcome run_load(const char *what, unsigned npinned);

/* `rt` with two pinned workers, this policy and engine (NULL: defaults). */
void init_two(const char *steal, const char *engine);

/* ---- policies ------------------------------------------------------------------------ */

struct policy {
    const char *steal, *engine;
};

/* "legacy engine, base+locality": for failure messages. Returns a static
 * buffer (the test thread's only). */
const char *policy_name(const struct policy *p);

/* The handler of every colored event of the load: the function a "measured"
 * policy measures events posted without a descriptor under. */
void colored(void *arg);

#endif /* MELY_TESTS_STEALLOAD_H */
