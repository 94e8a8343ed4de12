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
#include <math.h>
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

/*
 * A row's figures are of two kinds. Throughput: each pass of a row is paired
 * with the same pass of the reference row (mely, stealing off), run next to
 * it, and the table shows the median of those paired ratios with their
 * spread (min-max over the passes), so that a verdict that holds in only some
 * passes shows it. Cost and gain of the steals: the counters of all passes
 * added up, so that a verdict can be explained:
 *   cost: steals and failed attempts per round, the share of the workers'
 *         time spent in steal attempts (successful and failed), the median
 *         cycles of a successful steal, the mean time it held the victim's
 *         lock (what it cost the victim), the expected work it took;
 *   gain: the share of the events the thieves ran (every color starts on
 *         worker 0, so every event run elsewhere is one of a stolen color),
 *         and the workers' idle time (share of their time, and how many
 *         points less than the reference row).
 */
enum {
    COL_CONFIG, COL_KEY, COL_KEVENTS, COL_RATIO, COL_SPREAD, COL_STEALS, COL_FAILED,
    COL_STEAL_PCT, COL_MEDIAN, COL_HOLD, COL_STOLEN, COL_THIEF, COL_IDLE, COL_IDLE_CUT, COL_LOCKS,
    COL_ROUNDS, COL_NOTE, COL_RATIO_MIN, COL_RATIO_MAX, COL_MEAN, COL_REHOME, COL_PASSES,
    COL_LABEL, COL_ENGINE, COL_STEAL, COL_ANNOTATED, NCOLS
};

/* The CSV file has the table's columns plus the configuration's parts. */
static const struct bench_column columns[NCOLS] = {
    [COL_CONFIG] = {.title = "configuration"},
    [COL_KEY] = {.key = "configuration"},
    [COL_KEVENTS] = {.title = "KEvents/s", .key = "kevents_per_s", .right = true, .gap = 2},
    [COL_RATIO] = {.title = "vs mely", .key = "ratio_to_mely", .right = true},
    [COL_SPREAD] = {.title = "min-max", .right = true},
    [COL_STEALS] = {.title = "steals/rd", .key = "steals_per_round", .right = true, .gap = 2},
    [COL_FAILED] = {.title = "failed/rd", .key = "failed_per_round", .right = true},
    [COL_STEAL_PCT] = {.title = "steal %", .key = "steal_time_pct", .right = true},
    [COL_MEDIAN] = {.title = "cyc/steal", .key = "steal_cycles_median", .right = true},
    [COL_HOLD] = {.title = "hold", .key = "steal_hold_cycles_mean", .right = true},
    [COL_STOLEN] = {.title = "work/steal", .key = "stolen_cycles_per_steal", .right = true},
    [COL_THIEF] = {.title = "thief ev %", .key = "thief_events_pct", .right = true, .gap = 2},
    [COL_IDLE] = {.title = "idle %", .key = "idle_pct", .right = true},
    [COL_IDLE_CUT] = {.title = "idle cut", .key = "idle_cut_pts", .right = true},
    [COL_LOCKS] = {.title = "locks %", .key = "lock_pct", .right = true, .gap = 2},
    [COL_ROUNDS] = {.title = "rounds", .key = "rounds", .right = true},
    [COL_NOTE] = {.title = "note", .key = "note", .gap = 2},
    [COL_RATIO_MIN] = {.key = "ratio_min"},
    [COL_RATIO_MAX] = {.key = "ratio_max"},
    [COL_MEAN] = {.key = "steal_cycles_mean"},
    [COL_REHOME] = {.key = "rehome_ms"},
    [COL_PASSES] = {.key = "passes"},
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

/* A row over its passes: the median pass, the paired ratios to the
 * reference row and the counters of all passes added up. */
struct row_sum {
    bool ok;                  /* every pass has figures */
    struct steal_figures med; /* the median pass (KEvents/s) */
    double ratio, rmin, rmax; /* paired ratios: median, min, max; < 0: none */
    unsigned npaired;
    double ratios[STEAL_MAX_PASSES]; /* per pass, < 0 where none */
    mely_stats_t sum;         /* all passes */
    uint64_t rounds, thief_events, elapsed; /* elapsed: cycles x workers */
    double rehome_s;
};

static void summarize(const struct steal_figures *f, const struct steal_figures *ref,
                      unsigned passes, struct row_sum *out)
{
    double sorted[STEAL_MAX_PASSES];

    memset(out, 0, sizeof(*out));
    out->ok = true;
    out->ratio = out->rmin = out->rmax = -1;
    for (unsigned p = 0; p < passes; p++) {
        out->ratios[p] = -1;
        if (!f[p].ok) {
            out->ok = false;
            continue;
        }
        if (kevents(&ref[p]) > 0)
            sorted[out->npaired++] = out->ratios[p] = kevents(&f[p]) / kevents(&ref[p]);
        const mely_stats_t *s = &f[p].tot.sum;
        stats_add(&out->sum, s);
        out->rounds += f[p].rounds;
        out->thief_events += s->events_run - f[p].tot.run[0];
        out->elapsed += f[p].elapsed_cycles * f[p].workers;
        out->rehome_s += f[p].rehome_seconds;
    }
    int m = bench_median_pass(f, sizeof(f[0]), passes, kevents);
    out->med = f[m < 0 ? 0 : m];
    if (out->npaired > 0) {
        out->ratio = median(sorted, out->npaired); /* sorts */
        out->rmin = sorted[0];
        out->rmax = sorted[out->npaired - 1];
    }
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Row r's cells: the configuration, then its figures ("-" where none). */
static void row_cells(struct bench_table *t, unsigned r, const struct row_sum *x,
                      const struct row_sum *ref, unsigned passes)
{
    const struct steal_config *cfg = &steal_configs[r];
    const mely_stats_t *s = &x->sum;
    const struct steal_figures *f = &x->med;

    bench_cell(t, r, COL_CONFIG, "%s", cfg->name);
    bench_cell(t, r, COL_KEY, "%s", cfg->key);
    bench_cell(t, r, COL_LABEL, "%s", cfg->name);
    bench_cell(t, r, COL_ENGINE, "%s", cfg->engine);
    bench_cell(t, r, COL_STEAL, "%s", cfg->steal);
    bench_cell(t, r, COL_ANNOTATED, "%s", cfg->annotated ? "yes" : "no");
    bench_cell(t, r, COL_PASSES, "%u", passes);
    for (unsigned c = COL_KEVENTS; c < COL_NOTE; c++)
        bench_cell(t, r, c, "-");
    if (!x->ok) {
        bench_cell(t, r, COL_KEVENTS, "n/a");
        bench_cell(t, r, COL_NOTE, "n/a (%s)", mely_strerror(f->err));
        return;
    }
    bench_cell(t, r, COL_KEVENTS, "%.0f", kevents(f));
    if (x->ratio >= 0) {
        bench_cell(t, r, COL_RATIO, "%.2f", x->ratio);
        bench_cell(t, r, COL_SPREAD, "%.2f-%.2f", x->rmin, x->rmax);
        bench_cell(t, r, COL_RATIO_MIN, "%.3f", x->rmin);
        bench_cell(t, r, COL_RATIO_MAX, "%.3f", x->rmax);
    }
    double rounds = x->rounds ? (double)x->rounds : 1.0;
    bench_cell(t, r, COL_STEALS, "%.1f", (double)s->steals / rounds);
    bench_cell(t, r, COL_FAILED, "%.1f", (double)(s->steal_attempts - s->steals) / rounds);
    bench_cell(t, r, COL_STEAL_PCT, "%.2f", pct(s->steal_cycles + s->steal_fail_cycles, x->elapsed));
    if (s->steals > 0) {
        if (f->tot.steal_median > 0)
            bench_cell(t, r, COL_MEDIAN, "%" PRIu64, f->tot.steal_median);
        bench_cell(t, r, COL_MEAN, "%.0f", (double)s->steal_cycles / (double)s->steals);
        bench_cell(t, r, COL_HOLD, "%.0f", (double)s->steal_hold_cycles / (double)s->steals);
        bench_cell(t, r, COL_STOLEN, "%.0f", (double)s->stolen_cycles / (double)s->steals);
    }
    bench_cell(t, r, COL_THIEF, "%.1f", pct(x->thief_events, s->events_run));
    double idle = pct(s->idle_cycles, x->elapsed);
    bench_cell(t, r, COL_IDLE, "%.1f", idle);
    if (ref->ok && ref->elapsed) {
        double cut = pct(ref->sum.idle_cycles, ref->elapsed) - idle;
        bench_cell(t, r, COL_IDLE_CUT, "%.1f", fabs(cut) < 0.05 ? 0.0 : cut); /* no "-0.0" */
    }
    bench_cell(t, r, COL_LOCKS, "%.2f", pct(s->lock_cycles, x->elapsed));
    bench_cell(t, r, COL_ROUNDS, "%" PRIu64, x->rounds);
    bench_cell(t, r, COL_REHOME, "%.1f", x->rehome_s * 1e3);
    bench_cell(t, r, COL_NOTE, "%s", f->note);
}

static void print_and_save(const struct steal_ctx *ctx, const struct bench_machine *mc,
                           const char *workload, const struct row_sum *x)
{
    struct bench_table t;
    char path[4096];

    bench_table_init(&t, columns, NCOLS, STEAL_NCONFIGS);
    for (unsigned r = 0; r < STEAL_NCONFIGS; r++)
        row_cells(&t, r, &x[r], &x[STEAL_MELY], ctx->passes);
    printf("\n");
    bench_table_print(stdout, &t);
    snprintf(path, sizeof(path), "%s/steal-%s.csv", ctx->csv_dir, workload);
    bench_table_csv(&ctx->b, path, mc, ctx->params, ctx->nparams, &t);
    bench_table_free(&t);
}

/* ---- The targets (issue 29) ---------------------------------------------------------------- */

/* The single heuristics, each alone over mely's engine. */
static const unsigned singles[] = {STEAL_MELY_BASE, STEAL_MELY_TIMELEFT, STEAL_MELY_PENALTY,
                                   STEAL_MELY_LOCALITY};
enum { NSINGLES = sizeof(singles) / sizeof(singles[0]) };

/* One target: row `a` against `factor` times row `b` (b < 0: the single
 * heuristic with the best median ratio; b == STEAL_MELY: the reference
 * itself). Judged on the median of the paired per-pass ratios a/b, and
 * counted per pass. (Not against the best single of each pass: with four
 * rows that differ by noise alone, the best of each pass is the luckiest,
 * and "all" would fall short of it by about the noise every time.) */
static void target(const char *what, const struct row_sum *x, unsigned passes, unsigned a, int b,
                   double factor)
{
    double v[STEAL_MAX_PASSES];
    unsigned n = 0, held = 0;

    if (b < 0) {
        b = (int)singles[0];
        for (unsigned i = 1; i < NSINGLES; i++)
            if (x[singles[i]].ratio > x[b].ratio)
                b = (int)singles[i];
    }
    for (unsigned p = 0; p < passes; p++) {
        double ra = x[a].ratios[p], rb = x[b].ratios[p];
        if (ra < 0 || rb <= 0)
            continue;
        v[n] = ra / rb;
        held += v[n] >= factor;
        n++;
    }
    if (n == 0) {
        printf("  %-56s %6s  not judged (no figures)\n", what, "-");
        return;
    }
    double med = median(v, n); /* sorts */
    printf("  %-56s %6.2f  %-6s (%.2f-%.2f; held in %u of %u passes; against %s)\n", what, med,
           med >= factor ? "met" : "MISSED", v[0], v[n - 1], held, n, steal_configs[b].name);
}

static void print_targets(const char *workload, const struct row_sum *x, unsigned passes)
{
    printf("targets (issue 29): the median of the paired per-pass ratios (min-max), and in how "
           "many passes each held\n");
    if (strcmp(workload, "unbalanced") == 0)
        target("all heuristics >= 1.8x mely (no stealing)", x, passes, STEAL_MELY_ALL,
               STEAL_MELY, 1.8);
    if (strcmp(workload, "penalty") == 0)
        target("penalty >= base", x, passes, STEAL_MELY_PENALTY, STEAL_MELY_BASE, 1.0);
    target("all heuristics >= 0.95x the best single heuristic", x, passes, STEAL_MELY_ALL, -1,
           0.95);
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

/* The 1-minute load average (/proc/loadavg), or -1: other helpers' builds
 * share this machine, and every figure is read next to it. */
static double loadavg(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* Runs every configuration of w, `passes` times, interleaved (pass 1 of every
 * row, then pass 2, ...), each pass seconds / passes long: a period in which
 * the host slows the guest then hits every row a little rather than one row
 * a lot, and each pass of a row has a pass of the reference next to it. True
 * if every pass of every row has figures. */
static bool run_workload(struct steal_ctx *ctx, const struct bench_machine *mc,
                         const struct workload *w)
{
    static struct steal_figures f[STEAL_NCONFIGS][STEAL_MAX_PASSES];
    struct row_sum x[STEAL_NCONFIGS];
    struct steal_ctx pass_ctx = *ctx;
    char load[64];
    bool all = true;

    memset(f, 0, sizeof(f));
    pass_ctx.seconds = ctx->seconds / ctx->passes;
    printf("\n");
    w->describe(ctx, stdout);
    double floor_before = floor_ns(), load_before = loadavg();
    for (unsigned p = 0; p < ctx->passes; p++) {
        printf("  pass %u/%u, load average %.2f\n", p + 1, ctx->passes, loadavg());
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
           "before the rows, %.0f after; load average %.2f before, %.2f after\n",
           floor_before, floor_ns(), load_before, loadavg());
    for (unsigned r = 0; r < STEAL_NCONFIGS; r++)
        summarize(f[r], f[STEAL_MELY], ctx->passes, &x[r]);
    printf("  KEvents/s: the median pass; vs mely: the median of the %u paired pass ratios "
           "(min-max); the rest: all passes\n",
           ctx->passes);
    print_and_save(ctx, mc, w->name, x);
    print_targets(w->name, x, ctx->passes);
    return all;
}

/* ---- Options and main --------------------------------------------------------------------- */

static struct steal_ctx ctx = {.b = {.name = "steal"}};

static const struct bench_opt options[] = {
    {.name = "workers", .kind = OPT_UINT, .var = &ctx.workers, .lo = 2, .hi = MELY_MAX_WORKERS,
     .dflt = 2, .param = true, .help = "workers (stealcost always uses 2)"},
    {.name = "seconds", .kind = OPT_DOUBLE, .var = &ctx.seconds, .lo = 0.05, .hi = 600, .dflt = 10,
     .quick = 1, .param = true,
     .help = "measured time per row of unbalanced, penalty and cache, all passes together"},
    {.name = "seed", .kind = OPT_U64, .var = &ctx.seed, .lo = 1, .hi = 18446744073709551615.0,
     .dflt = 12345, .param = true, .help = "seed of the workloads' pseudo-random numbers"},
    {.name = "passes", .kind = OPT_UINT, .var = &ctx.passes, .lo = 1, .hi = STEAL_MAX_PASSES,
     .dflt = 5, .quick = 1, .param = true,
     .help = "interleaved passes over the rows, the median shown with its spread"},
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
