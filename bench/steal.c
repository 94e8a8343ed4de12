/*
 * steal.c: the Mely paper's work-stealing microbenchmarks (section 5.2), every
 * configuration side by side in one run.
 *
 *   bench/steal unbalanced|penalty|cache|stealcost|all [options]
 *
 * Each of unbalanced (Tables 3-4), penalty (Table 5) and cache (Table 6) runs
 * every configuration of steal_configs[] on a fresh runtime (2 pinned
 * workers by default), in --passes interleaved passes (the table shows each
 * row's median pass) of --seconds / passes of measured time, in fork/join rounds
 * (steal_rounds.c), and prints one table: KEvents/s, its ratio to the "mely"
 * row (mely's engine, no stealing), the % of time in runtime locks (the
 * workers' lock_cycles over elapsed TSC cycles times workers), cycles per
 * steal (the thief's median, and the mean over all steals), expected cycles
 * of work per steal (stolen_cycles / steals), steals, rounds, and the
 * re-homing time left out. stealcost (steal_cost.c) has a table of its own.
 * Every table also goes to <csv-dir>/steal-<workload>.csv.
 *
 * A configuration the runtime does not know (mely_init() fails) prints
 * "n/a (<why>)" and makes the exit status 1. Every run is bounded by the
 * harness's watchdog.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/harness.h"
#include "bench/report.h"
#include "bench/steal.h"

#define SECONDS_DEFAULT 6.0
#define PASSES_DEFAULT 3
#define MAX_PASSES 9
#define SECONDS_QUICK 1.0
#define L2_FALLBACK (512u * 1024u)
#define CSV_DIR_DEFAULT "bench/results"
#define SEED_DEFAULT 12345u

const struct steal_config steal_configs[STEAL_NCONFIGS] = {
    [STEAL_LEGACY] = {.name = "libasync-smp", .key = "libasync",
                      .engine = "legacy", .steal = "off", .annotated = true},
    [STEAL_LEGACY_WS] = {.name = "libasync-smp - WS", .key = "libasync_ws",
                         .engine = "legacy", .steal = "base", .annotated = true},
    [STEAL_MELY] = {.name = "mely", .key = "mely",
                    .engine = "mely", .steal = "off", .annotated = true},
    [STEAL_MELY_BASE] = {.name = "mely - base WS", .key = "mely_base",
                         .engine = "mely", .steal = "base", .annotated = true},
    [STEAL_MELY_TIMELEFT] = {.name = "mely - time-left WS", .key = "mely_timeleft",
                             .engine = "mely", .steal = "timeleft", .annotated = true},
    [STEAL_MELY_PENALTY] = {.name = "mely - penalty WS", .key = "mely_penalty",
                            .engine = "mely", .steal = "penalty", .annotated = true},
    [STEAL_MELY_LOCALITY] = {.name = "mely - locality WS", .key = "mely_locality",
                             .engine = "mely", .steal = "locality", .annotated = true},
    [STEAL_MELY_ALL] = {.name = "mely - all heuristics", .key = "mely_all",
                        .engine = "mely", .steal = "all", .annotated = true},
    [STEAL_MELY_ALL_BARE] = {.name = "mely - all, no annotations", .key = "mely_all_bare",
                             .engine = "mely", .steal = "all", .annotated = false},
    [STEAL_MELY_ALL_MEASURED] = {.name = "mely - all + measured, no annotations",
                                 .key = "mely_all_measured", .engine = "mely",
                                 .steal = "all+measured", .annotated = false},
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
    COL_CONFIG,
    COL_KEVENTS,
    COL_RATIO,
    COL_LOCKS,
    COL_MEDIAN,
    COL_MEAN,
    COL_STOLEN,
    COL_STEALS,
    COL_ROUNDS,
    COL_REHOME,
    COL_NOTE,
    NCOLS
};

static const struct bench_column columns[NCOLS] = {
    [COL_CONFIG] = {.title = "configuration"},
    [COL_KEVENTS] = {.title = "KEvents/s", .right = true, .gap = 2},
    [COL_RATIO] = {.title = "vs mely", .right = true},
    [COL_LOCKS] = {.title = "locks %", .right = true},
    [COL_MEDIAN] = {.title = "steal cyc median", .right = true},
    [COL_MEAN] = {.title = "mean", .right = true},
    [COL_STOLEN] = {.title = "stolen cyc/steal", .right = true},
    [COL_STEALS] = {.title = "steals", .right = true},
    [COL_ROUNDS] = {.title = "rounds", .right = true},
    [COL_REHOME] = {.title = "re-home ms", .right = true},
    [COL_NOTE] = {.title = "note", .gap = 2},
};

/* The CSV file has the table's columns plus the configuration's parts. */
enum { CSV_LABEL = NCOLS, CSV_ENGINE, CSV_STEAL, CSV_ANNOTATED, CSV_NCOLS };

static const char *const csv_titles[CSV_NCOLS] = {
    [COL_CONFIG] = "configuration",
    [COL_KEVENTS] = "kevents_per_s",
    [COL_RATIO] = "ratio_to_mely",
    [COL_LOCKS] = "lock_pct",
    [COL_MEDIAN] = "steal_cycles_median",
    [COL_MEAN] = "steal_cycles_mean",
    [COL_STOLEN] = "stolen_cycles_per_steal",
    [COL_STEALS] = "steals",
    [COL_ROUNDS] = "rounds",
    [COL_REHOME] = "rehome_ms",
    [COL_NOTE] = "note",
    [CSV_LABEL] = "label",
    [CSV_ENGINE] = "engine",
    [CSV_STEAL] = "steal",
    [CSV_ANNOTATED] = "annotated",
};

typedef char cell_t[280];

static double kevents(const struct steal_figures *f)
{
    return f->seconds > 0 ? (double)f->events / f->seconds / 1e3 : 0.0;
}

/* The figures' cells; "-" where there is no figure. */
static void figure_cells(const struct steal_figures *f, const struct steal_figures *ref,
                         cell_t *t)
{
    const struct bench_totals *s = &f->tot;

    for (unsigned c = COL_KEVENTS; c < COL_NOTE; c++)
        snprintf(t[c], sizeof(cell_t), "-");
    if (!f->ok) {
        snprintf(t[COL_KEVENTS], sizeof(cell_t), "n/a");
        snprintf(t[COL_NOTE], sizeof(cell_t), "n/a (%s)", mely_strerror(f->err));
        return;
    }
    snprintf(t[COL_KEVENTS], sizeof(cell_t), "%.0f", kevents(f));
    if (ref->ok && kevents(ref) > 0)
        snprintf(t[COL_RATIO], sizeof(cell_t), "%.2f", kevents(f) / kevents(ref));
    if (f->elapsed_cycles > 0)
        snprintf(t[COL_LOCKS], sizeof(cell_t), "%.2f",
                 100.0 * (double)s->lock_cycles / ((double)f->elapsed_cycles * f->workers));
    if (s->steals > 0) {
        if (s->steal_median > 0)
            snprintf(t[COL_MEDIAN], sizeof(cell_t), "%" PRIu64, s->steal_median);
        snprintf(t[COL_MEAN], sizeof(cell_t), "%.0f",
                 (double)s->steal_cycles / (double)s->steals);
        snprintf(t[COL_STOLEN], sizeof(cell_t), "%.0f",
                 (double)s->stolen_cycles / (double)s->steals);
    }
    snprintf(t[COL_STEALS], sizeof(cell_t), "%" PRIu64, s->steals);
    snprintf(t[COL_ROUNDS], sizeof(cell_t), "%u", f->rounds);
    snprintf(t[COL_REHOME], sizeof(cell_t), "%.1f", f->rehome_seconds * 1e3);
    snprintf(t[COL_NOTE], sizeof(cell_t), "%s", f->note);
}

static void print_and_save(const struct steal_ctx *ctx, const struct bench_machine *mc,
                           const char *workload, const struct steal_figures *f)
{
    cell_t text[STEAL_NCONFIGS][NCOLS];
    const char *shown[STEAL_NCONFIGS][NCOLS];
    const char *cells[STEAL_NCONFIGS][CSV_NCOLS];

    for (unsigned r = 0; r < STEAL_NCONFIGS; r++) {
        const struct steal_config *cfg = &steal_configs[r];
        figure_cells(&f[r], &f[STEAL_MELY], text[r]);
        for (unsigned c = 0; c < NCOLS; c++)
            shown[r][c] = cells[r][c] = text[r][c];
        shown[r][COL_CONFIG] = cfg->name;
        cells[r][COL_CONFIG] = cfg->key;
        cells[r][CSV_LABEL] = cfg->name;
        cells[r][CSV_ENGINE] = cfg->engine;
        cells[r][CSV_STEAL] = cfg->steal;
        cells[r][CSV_ANNOTATED] = cfg->annotated ? "yes" : "no";
    }
    printf("\n");
    bench_print_table(stdout, columns, NCOLS, &shown[0][0], STEAL_NCONFIGS);

    char path[4096];
    struct bench_param params[] = {
        {.name = "workers"}, {.name = "seconds"}, {.name = "seed"}, {.name = "passes"}};
    snprintf(params[0].value, sizeof(params[0].value), "%u", ctx->workers);
    snprintf(params[1].value, sizeof(params[1].value), "%g", ctx->seconds);
    snprintf(params[2].value, sizeof(params[2].value), "%" PRIu64, ctx->seed);
    snprintf(params[3].value, sizeof(params[3].value), "%u", ctx->passes);
    snprintf(path, sizeof(path), "%s/steal-%s.csv", ctx->csv_dir, workload);
    if (bench_write_cells_csv(&ctx->b, path, mc, params, 4, csv_titles, CSV_NCOLS, &cells[0][0],
                              STEAL_NCONFIGS) == 0)
        printf("CSV: %s\n", path);
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

/* Of a row's passes, the one with the median KEvents/s among those with
 * figures (the lower middle one for an even count); the first pass if none. */
static unsigned median_pass(const struct steal_figures *f, unsigned passes)
{
    unsigned idx[MAX_PASSES], n = 0;

    for (unsigned p = 0; p < passes; p++)
        if (f[p].ok)
            idx[n++] = p;
    if (n == 0)
        return 0;
    for (unsigned i = 1; i < n; i++) /* insertion sort: n <= MAX_PASSES */
        for (unsigned j = i; j > 0 && kevents(&f[idx[j - 1]]) > kevents(&f[idx[j]]); j--) {
            unsigned t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return idx[(n - 1) / 2];
}

/* Runs every configuration of w, `passes` times, interleaved (pass 1 of every
 * row, then pass 2, ...), each pass seconds / passes long: a period in which
 * the host slows the guest then hits every row a little rather than one row
 * a lot. The table shows each row's median pass. True if every pass of every
 * row has figures. */
static bool run_workload(struct steal_ctx *ctx, const struct bench_machine *mc,
                         const struct workload *w)
{
    static struct steal_figures f[STEAL_NCONFIGS][MAX_PASSES];
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
        shown[r] = f[r][median_pass(f[r], ctx->passes)];
    if (ctx->passes > 1)
        printf("  each row: the median of its %u passes\n", ctx->passes);
    print_and_save(ctx, mc, w->name, shown);
    return all;
}

/* ---- Options ---------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: steal unbalanced|penalty|cache|stealcost|all [options]\n"
            "  --seconds S    measured time per row of unbalanced, penalty and cache, all\n"
            "                 passes together (default %.0f; --quick: %.0f)\n"
            "  --passes P     interleaved passes over the rows, the median shown (default %d;\n"
            "                 --quick: 1; 1..%d)\n"
            "  --quick        short rows: all four workloads in about a minute\n"
            "  --workers N    workers, >= 2 (default 2; stealcost always uses 2)\n"
            "  --seed N       seed of the workloads' pseudo-random numbers (default %u)\n"
            "  --csv-dir DIR  where steal-<workload>.csv goes (default %s, relative to the\n"
            "                 current directory)\n",
            SECONDS_DEFAULT, SECONDS_QUICK, PASSES_DEFAULT, MAX_PASSES, SEED_DEFAULT,
            CSV_DIR_DEFAULT);
}

/* 0: go on; 1: exit 0 (--help); 2: usage error. *which: the workload's name. */
static int parse_options(int argc, char **argv, struct steal_ctx *ctx, const char **which)
{
    static const struct option longopts[] = {
        {"seconds", required_argument, NULL, 's'}, {"quick", no_argument, NULL, 'q'},
        {"workers", required_argument, NULL, 'w'}, {"seed", required_argument, NULL, 'r'},
        {"csv-dir", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
        {"passes", required_argument, NULL, 'p'}, {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    ctx->workers = 2;
    ctx->seconds = -1;
    ctx->passes = 0;
    ctx->seed = SEED_DEFAULT;
    ctx->csv_dir = CSV_DIR_DEFAULT;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (bench_parse_double(optarg, 0.05, 600, &ctx->seconds) != 0) {
                fprintf(stderr, "steal: --seconds: expected 0.05..600\n");
                return 2;
            }
            break;
        case 'q':
            ctx->quick = true;
            break;
        case 'p':
            if (bench_parse_u64(optarg, 1, MAX_PASSES, &v) != 0) {
                fprintf(stderr, "steal: --passes: expected 1..%d\n", MAX_PASSES);
                return 2;
            }
            ctx->passes = (unsigned)v;
            break;
        case 'w':
            if (bench_parse_u64(optarg, 2, MELY_MAX_WORKERS, &v) != 0) {
                fprintf(stderr, "steal: --workers: expected 2..%u\n", MELY_MAX_WORKERS);
                return 2;
            }
            ctx->workers = (unsigned)v;
            break;
        case 'r':
            if (bench_parse_u64(optarg, 1, UINT64_MAX, &ctx->seed) != 0) {
                fprintf(stderr, "steal: --seed: expected a positive number\n");
                return 2;
            }
            break;
        case 'c':
            if (optarg[0] == '\0') {
                fprintf(stderr, "steal: --csv-dir: expected a directory\n");
                return 2;
            }
            ctx->csv_dir = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "steal: expected one workload\n");
        usage(stderr);
        return 2;
    }
    *which = argv[optind];
    if (ctx->seconds < 0)
        ctx->seconds = ctx->quick ? SECONDS_QUICK : SECONDS_DEFAULT;
    if (ctx->passes == 0)
        ctx->passes = ctx->quick ? 1 : PASSES_DEFAULT;
    return 0;
}

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

/* ---- Main --------------------------------------------------------------------------------- */

static void print_header(const struct steal_ctx *ctx, const struct bench_machine *mc)
{
    printf("mely work-stealing microbenchmarks (the Mely paper, section 5.2)\n");
    bench_machine_print(stdout, mc);
    printf("setup: %u workers, pinned; L2 %zu KB%s; seed %" PRIu64 "\n", ctx->workers,
           ctx->l2_bytes / 1024, bench_cache_bytes(2) ? "" : " (not in sysfs: assumed)",
           ctx->seed);
    if (ctx->workers > mc->usable)
        printf("note: more workers than usable CPUs: workers share CPUs, figures mean little\n");
    bench_print_mely_env(stdout);
}

int main(int argc, char **argv)
{
    struct steal_ctx ctx = {.workers = 2};
    const char *which = NULL;
    int rc = parse_options(argc, argv, &ctx, &which);
    if (rc)
        return rc == 1 ? 0 : rc;
    bool known = strcmp(which, "all") == 0 || strcmp(which, "stealcost") == 0;
    for (unsigned i = 0; i < NWORKLOADS; i++)
        known |= strcmp(which, workloads[i].name) == 0;
    if (!known) {
        fprintf(stderr, "steal: unknown workload '%s'\n", which);
        usage(stderr);
        return 2;
    }
    if (!env_ok())
        return 2;

    struct bench_machine mc;
    bench_init(&ctx.b, "steal");
    bench_machine_get(&mc);
    ctx.l2_bytes = bench_cache_bytes(2) ? bench_cache_bytes(2) : L2_FALLBACK;
    print_header(&ctx, &mc);
    fflush(stdout);

    bool all = true, every = strcmp(which, "all") == 0;
    for (unsigned i = 0; i < NWORKLOADS; i++)
        if (every || strcmp(which, workloads[i].name) == 0)
            all &= run_workload(&ctx, &mc, &workloads[i]);
    if (every || strcmp(which, "stealcost") == 0) {
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
