/* SPDX-License-Identifier: MIT */
/*
 * steal.c: the Mely paper's work-stealing microbenchmarks (section 5.2), every
 * configuration side by side in one run.
 *
 *   bench/steal unbalanced|penalty|cache|stealcost|all [options]
 *
 * unbalanced (Tables 3-4), penalty (Table 5) and cache (Table 6) run every
 * configuration of steal_configs[] on a fresh runtime, in --passes
 * interleaved passes of fork/join rounds (steal_rounds.c), and print one
 * table each (bench/README.md explains the columns); stealcost
 * (steal_cost.c) has a table of its own. Every table also goes to
 * <csv-dir>/steal-<workload>.csv. A configuration the runtime refuses prints
 * "n/a (<why>)" and makes the exit status 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

#define L2_FALLBACK (512u * 1024u)

/* One row: its fields named once here, the rows below one line each. */
#define ROW(n, k, e, s, a) {.name = n, .key = k, .engine = e, .steal = s, .annotated = a}

const struct steal_config steal_configs[STEAL_NCONFIGS] = {
    [STEAL_LEGACY] = ROW("libasync-smp", "libasync", "legacy", "off", true),
    [STEAL_LEGACY_WS] = ROW("libasync-smp - WS", "libasync_ws", "legacy", "base", true),
    [STEAL_MELY] = ROW("mely", "mely", "mely", "off", true),
    [STEAL_MELY_BASE] = ROW("mely - base WS", "mely_base", "mely", "base", true),
    [STEAL_MELY_TIMELEFT] = ROW("mely - time-left WS", "mely_timeleft", "mely", "timeleft", true),
    [STEAL_MELY_PENALTY] = ROW("mely - penalty WS", "mely_penalty", "mely", "penalty", true),
    [STEAL_MELY_LOCALITY] = ROW("mely - locality WS", "mely_locality", "mely", "locality", true),
    [STEAL_MELY_ALL] = ROW("mely - all heuristics", "mely_all", "mely", "all", true),
    [STEAL_MELY_ALL_BARE] = ROW("mely - all, no annotations", "mely_all_bare", "mely", "all", false),
    [STEAL_MELY_ALL_MEASURED] = ROW("mely - all + measured, no annotations", "mely_all_measured",
                                    "mely", "all+measured", false),
};

/* A round workload. */
struct workload {
    const char *name;
    void (*describe)(const struct steal_ctx *ctx, FILE *f);
    steal_row_fn row;
};

enum { FLOOR_TRIPS = 20000 }; /* a few ms */

static const struct workload workloads[] = {
    {.name = "unbalanced", .describe = steal_unbalanced_describe, .row = steal_unbalanced_row},
    {.name = "penalty", .describe = steal_penalty_describe, .row = steal_penalty_row},
    {.name = "cache", .describe = steal_cache_describe, .row = steal_cache_row},
};
enum { NWORKLOADS = sizeof(workloads) / sizeof(workloads[0]) };

/* ---- The table of a round workload ------------------------------------------------------- */

enum {
    COL_CONFIG, COL_KEY, COL_KEVENTS, COL_RATIO, COL_LOCKS, COL_MEDIAN, COL_MEAN, COL_STOLEN,
    COL_STEALS, COL_ROUNDS, COL_REHOME, COL_NOTE, COL_LABEL, COL_ENGINE, COL_STEAL,
    COL_ANNOTATED, NCOLS
};

/* The CSV file has the table's columns plus the configuration's parts. */
static const struct bench_column columns[NCOLS] = {
    [COL_CONFIG] = {.title = "configuration"},
    [COL_KEY] = {.key = "configuration"},
    [COL_KEVENTS] = {.title = "KEvents/s", .key = "kevents_per_s", .right = true, .gap = 2},
    [COL_RATIO] = {.title = "vs mely", .key = "ratio_to_mely", .right = true},
    [COL_LOCKS] = {.title = "locks %", .key = "lock_pct", .right = true},
    [COL_MEDIAN] = {.title = "steal cyc median", .key = "steal_cycles_median", .right = true},
    [COL_MEAN] = {.title = "mean", .key = "steal_cycles_mean", .right = true},
    [COL_STOLEN] = {.title = "stolen cyc/steal", .key = "stolen_cycles_per_steal", .right = true},
    [COL_STEALS] = {.title = "steals", .key = "steals", .right = true},
    [COL_ROUNDS] = {.title = "rounds", .key = "rounds", .right = true},
    [COL_REHOME] = {.title = "re-home ms", .key = "rehome_ms", .right = true},
    [COL_NOTE] = {.title = "note", .key = "note", .gap = 2},
    [COL_LABEL] = {.key = "label"},
    [COL_ENGINE] = {.key = "engine"},
    [COL_STEAL] = {.key = "steal"},
    [COL_ANNOTATED] = {.key = "annotated"},
};

static double kevents(const void *p)
{
    const struct steal_figures *f = p;
    return !f->ok ? -1 : f->seconds > 0 ? (double)f->events / f->seconds / 1e3 : 0.0;
}

/* Row r's cells: the configuration, then its figures ("-" where none). */
static void row_cells(struct bench_table *t, unsigned r, const struct steal_figures *f,
                      const struct steal_figures *ref)
{
    const struct steal_config *cfg = &steal_configs[r];
    const mely_stats_t *s = &f->tot.sum;

    bench_cell(t, r, COL_CONFIG, "%s", cfg->name);
    bench_cell(t, r, COL_KEY, "%s", cfg->key);
    bench_cell(t, r, COL_LABEL, "%s", cfg->name);
    bench_cell(t, r, COL_ENGINE, "%s", cfg->engine);
    bench_cell(t, r, COL_STEAL, "%s", cfg->steal);
    bench_cell(t, r, COL_ANNOTATED, "%s", cfg->annotated ? "yes" : "no");
    for (unsigned c = COL_KEVENTS; c < COL_NOTE; c++)
        bench_cell(t, r, c, "-");
    if (!f->ok) {
        bench_cell(t, r, COL_KEVENTS, "n/a");
        bench_cell(t, r, COL_NOTE, "n/a (%s)", mely_strerror(f->err));
        return;
    }
    bench_cell(t, r, COL_KEVENTS, "%.0f", kevents(f));
    if (kevents(ref) > 0)
        bench_cell(t, r, COL_RATIO, "%.2f", kevents(f) / kevents(ref));
    if (f->elapsed_cycles > 0)
        bench_cell(t, r, COL_LOCKS, "%.2f",
                   100.0 * (double)s->lock_cycles / ((double)f->elapsed_cycles * f->workers));
    if (s->steals > 0) {
        if (f->tot.steal_median > 0)
            bench_cell(t, r, COL_MEDIAN, "%" PRIu64, f->tot.steal_median);
        bench_cell(t, r, COL_MEAN, "%.0f", (double)s->steal_cycles / (double)s->steals);
        bench_cell(t, r, COL_STOLEN, "%.0f", (double)s->stolen_cycles / (double)s->steals);
    }
    bench_cell(t, r, COL_STEALS, "%" PRIu64, s->steals);
    bench_cell(t, r, COL_ROUNDS, "%u", f->rounds);
    bench_cell(t, r, COL_REHOME, "%.1f", f->rehome_seconds * 1e3);
    bench_cell(t, r, COL_NOTE, "%s", f->note);
}

static void print_and_save(const struct steal_ctx *ctx, const struct bench_machine *mc,
                           const char *workload, const struct steal_figures *f)
{
    struct bench_table t;
    char path[4096];

    bench_table_init(&t, columns, NCOLS, STEAL_NCONFIGS);
    for (unsigned r = 0; r < STEAL_NCONFIGS; r++)
        row_cells(&t, r, &f[r], &f[STEAL_MELY]);
    printf("\n");
    bench_table_print(stdout, &t);
    snprintf(path, sizeof(path), "%s/steal-%s.csv", ctx->csv_dir, workload);
    bench_table_csv(&ctx->b, path, mc, ctx->params, ctx->nparams, &t);
    bench_table_free(&t);
}

/* The machine's cross-core floor now (harness.h), in ns per round trip, or -1:
 * steals move cache lines between the cores, and on the KVM guests that cost
 * moves several-fold from one period to the next, so each table says what it
 * was when the table was measured. */
static double floor_ns(void)
{
    struct bench_sample s = bench_floor_pingpong(FLOOR_TRIPS);
    return s.ok ? s.value : -1;
}

/* Runs every configuration of w, `passes` times, interleaved (pass 1 of every
 * row, then pass 2, ...), each pass seconds / passes long: a period in which
 * the host slows the guest then hits every row a little rather than one row
 * a lot. The table shows each row's median pass. True if every pass of every
 * row has figures. */
static bool run_workload(struct steal_ctx *ctx, const struct bench_machine *mc,
                         const struct workload *w)
{
    static struct steal_figures f[STEAL_NCONFIGS][STEAL_MAX_PASSES];
    struct steal_figures shown[STEAL_NCONFIGS];
    struct steal_ctx pass_ctx = *ctx;
    char load[64];
    bool all = true;

    memset(f, 0, sizeof(f));
    pass_ctx.seconds = ctx->seconds / ctx->passes;
    printf("\n");
    w->describe(ctx, stdout);
    double floor_before = floor_ns();
    for (unsigned p = 0; p < ctx->passes; p++) {
        for (unsigned r = 0; r < STEAL_NCONFIGS; r++) {
            printf("  %-40s pass %u/%u ...", steal_configs[r].name, p + 1, ctx->passes);
            fflush(stdout);
            struct bench_probe p0 = bench_probe_now();
            w->row(&pass_ctx, &steal_configs[r], &f[r][p]);
            struct bench_probe p1 = bench_probe_now();
            bench_load_note(&ctx->b, &p0, &p1, load, sizeof(load));
            if (f[r][p].ok)
                printf(" %.0f KEvents/s%s\n", kevents(&f[r][p]), load);
            else
                printf(" n/a (%s)\n", mely_strerror(f[r][p].err));
            fflush(stdout);
            all &= f[r][p].ok;
        }
    }
    printf("  cross-core floor (two plain threads passing a cache line): %.0f ns per round trip "
           "before the rows, %.0f after\n",
           floor_before, floor_ns());
    for (unsigned r = 0; r < STEAL_NCONFIGS; r++)
        {
        int m = bench_median_pass(f[r], sizeof(f[r][0]), ctx->passes, kevents);
        shown[r] = f[r][m < 0 ? 0 : m];
    }
    if (ctx->passes > 1)
        printf("  each row: the median of its %u passes\n", ctx->passes);
    print_and_save(ctx, mc, w->name, shown);
    return all;
}

/* ---- Options and main --------------------------------------------------------------------- */

static struct steal_ctx ctx = {.b = {.name = "steal"}};

static const struct bench_opt options[] = {
    {.name = "workers", .kind = OPT_UINT, .var = &ctx.workers, .lo = 2, .hi = MELY_MAX_WORKERS,
     .dflt = 2, .param = true, .help = "workers (stealcost always uses 2)"},
    {.name = "seconds", .kind = OPT_DOUBLE, .var = &ctx.seconds, .lo = 0.05, .hi = 600, .dflt = 6,
     .quick = 1, .param = true,
     .help = "measured time per row of unbalanced, penalty and cache, all passes together"},
    {.name = "seed", .kind = OPT_U64, .var = &ctx.seed, .lo = 1, .hi = 18446744073709551615.0,
     .dflt = 12345, .param = true, .help = "seed of the workloads' pseudo-random numbers"},
    {.name = "passes", .kind = OPT_UINT, .var = &ctx.passes, .lo = 1, .hi = STEAL_MAX_PASSES,
     .dflt = 3, .quick = 1, .param = true,
     .help = "interleaved passes over the rows, the median shown"},
    {.name = "quick", .kind = OPT_QUICK, .var = &ctx.quick,
     .help = "short rows: all four workloads in about a minute"},
    {.name = "csv-dir", .kind = OPT_STR, .var = &ctx.csv_dir, .sdflt = "bench/results",
     .help = "where steal-<workload>.csv goes"},
    {.name = NULL},
};

/* The environment would override every row's engine or policy: refuse. */
static bool env_ok(void)
{
    static const char *const env[] = {"MELY_STEAL", "MELY_ENGINE"};
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++)
        if (getenv(env[i])) {
            fprintf(stderr, "steal: %s is set: every row would run with it; unset it\n", env[i]);
            return false;
        }
    return true;
}

static void print_header(const struct bench_machine *mc)
{
    printf("setup: %u workers, pinned; L2 %zu KB%s; seed %" PRIu64 "\n", ctx.workers,
           ctx.l2_bytes / 1024, bench_cache_bytes(2) ? "" : " (not in sysfs: assumed)",
           ctx.seed);
    if (ctx.workers > mc->usable)
        printf("note: more workers than usable CPUs: workers share CPUs, figures mean little\n");
    bench_print_mely_env(stdout);
}

int main(int argc, char **argv)
{
    static const char usage[] = "steal unbalanced|penalty|cache|stealcost|all [options]";
    struct bench_machine mc;
    bool all = true, known = false;

    int i = bench_options(usage, options, 1, 1, argc, argv);
    if (i <= 0)
        return i ? 2 : 0;
    const char *which = argv[i];
    bool every = strcmp(which, "all") == 0, cost = every || strcmp(which, "stealcost") == 0;
    for (unsigned w = 0; w < NWORKLOADS; w++)
        known |= strcmp(which, workloads[w].name) == 0;
    if (!known && !every && !cost) {
        fprintf(stderr, "steal: unknown workload '%s'\nusage: %s\n", which, usage);
        return 2;
    }
    if (!env_ok())
        return 2;
    ctx.nparams = bench_opt_params(options, ctx.params, 4);
    printf("mely work-stealing microbenchmarks (the Mely paper, section 5.2)\n");
    bench_machine_get(&mc, stdout);
    ctx.l2_bytes = bench_cache_bytes(2) ? bench_cache_bytes(2) : L2_FALLBACK;
    print_header(&mc);
    for (unsigned w = 0; w < NWORKLOADS; w++)
        if (every || strcmp(which, workloads[w].name) == 0)
            all &= run_workload(&ctx, &mc, &workloads[w]);
    if (cost) {
        double before = floor_ns();
        all &= steal_cost_run(&ctx, &mc);
        printf("  cross-core floor (two plain threads passing a cache line): %.0f ns per round "
               "trip before the points, %.0f after\n",
               before, floor_ns());
    }
    bench_load_warn(&ctx.b);
    if (!all)
        printf("\nsome rows have no figures (n/a): exit status 1\n");
    return all ? 0 : 1;
}
