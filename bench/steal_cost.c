/* SPDX-License-Identifier: MIT */
/*
 * steal_cost.c: cycles per steal against the number of events the victim
 * holds (the paper's section 2.3: libasync-smp scans its queue to build the
 * stolen set, Mely moves a color-queue in O(1)).
 *
 * One point = one configuration and one queue length N, on a fresh runtime
 * of 2 workers. Worker 0 (the victim) runs a blocker handler on its pinned
 * color at the highest priority while N empty events, posted round robin over
 * K = max(3, N/10) colors that live on worker 0, wait in its queue; worker 1
 * is idle and steals (a color at a time), runs what it took, steals again.
 * Round robin spreads each color's events over the whole of libasync-smp's
 * FIFO. K is at least 3, not 2: with two colors of N/2 events each, the base
 * rule (a color holding less than half the victim's events) never finds one.
 *
 * The blocker keeps the queue near N while the thief steals: each time the
 * thief has taken another max(1, N/10) events (its stolen_events counter), it
 * moves the colors the thief emptied back to worker 0 (mely_color_move) and
 * tops every color at home up to its share of N, round robin (posts to its own
 * worker's colors are queued at once). So the victim holds between ~90% and
 * 100% of N at every steal (N = 10: 7 to 10). The queue is first filled by the
 * main thread before mely_run(), so that the first steal already sees N. The
 * point ends after STEALS steals or POINT_NS (2 s), whichever comes first. The
 * handler is "empty" but for one relaxed atomic decrement: its color's count of
 * queued events, which the refill needs.
 *
 * Figures: the thief's steal_cycles_median (its last 1024 successful
 * attempts: all of them here) and mean (steal_cycles / steals).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bench/steal.h"

enum {
    NPOINTS = 3,
    NROWS = 3,
    STEALS = 200,
    MIN_COLORS = 3,
};

#define POINT_NS 2000000000ull
#define POLL_CYCLES 20000u /* the blocker's pause between two looks at the thief */
#define WORTHY_TIMELEFT 1000000u /* every color worthy under the time-left rule */
#define TARGET_MEDIAN 1000.0
#define TARGET_FLAT 0.20

static const unsigned points[NPOINTS] = {10, 1000, 100000};
static const unsigned rows[NROWS] = {STEAL_LEGACY_WS, STEAL_MELY_BASE, STEAL_MELY_ALL};

/* One point's state. */
struct cost_point {
    mely_t *m;
    unsigned n, ncolors;
    mely_color_t *colors;
    _Atomic uint32_t *queued; /* per color: events posted and not run yet */
    mely_handler_t h_empty;
    int err; /* the blocker's failure */
};

struct cost_figures {
    int err;
    bool ok;
    uint64_t steals, median, cycles, stolen_events;
};

/* The event: one relaxed decrement (the blocker refills from these counts). */
static void empty(void *arg)
{
    atomic_fetch_sub_explicit((_Atomic uint32_t *)arg, 1, memory_order_relaxed);
}

static mely_stats_t thief_stats(mely_t *m)
{
    mely_stats_t s = {.steals = 0};
    (void)mely_worker_stats(m, 1, &s);
    return s;
}

/* Colors the thief emptied go home; every color at home is topped up to its
 * share of N, round robin. From the main thread before the run, then from the
 * blocker. O(N) owner look-ups.
 * @return how many colors are still away (the thief has not run them yet:
 *         refill again later), or a negative error. */
static int refill(struct cost_point *p)
{
    unsigned share = p->n / p->ncolors, extra = p->n % p->ncolors;
    int away = 0;

    for (unsigned k = 0; k < p->ncolors; k++) {
        if (mely_color_owner(p->m, p->colors[k]) == 0)
            continue;
        int err = atomic_load_explicit(&p->queued[k], memory_order_relaxed) == 0
                      ? mely_color_move(p->m, p->colors[k], 0)
                      : MELY_EBUSY;
        if (err == MELY_EBUSY) /* the thief is still running it */
            away++;
        else if (err)
            return err;
    }
    for (unsigned pass = 0; pass <= share; pass++) /* bounded: share + 1 passes */
        for (unsigned k = 0; k < p->ncolors; k++) {
            unsigned want = share + (k < extra);
            uint32_t q = atomic_load_explicit(&p->queued[k], memory_order_relaxed);
            if (q != pass || pass >= want || mely_color_owner(p->m, p->colors[k]) != 0)
                continue;
            /* Counted first: the event may run on a thief at once. */
            atomic_fetch_add_explicit(&p->queued[k], 1, memory_order_relaxed);
            int err = mely_post_ex(p->m, p->colors[k], MELY_PRIO_DEFAULT, &p->h_empty, empty,
                                   &p->queued[k], 0);
            if (err)
                return err;
        }
    return away;
}

/* On worker 0, first in its queue: keeps the victim busy and its queue full
 * until the thief made STEALS steals (or POINT_NS), then stops the runtime. */
static void blocker(void *arg)
{
    struct cost_point *p = arg;
    uint64_t t0 = now_ns(), every = p->n / 10 ? p->n / 10 : 1;
    mely_stats_t s = thief_stats(p->m);
    uint64_t refilled_at = s.stolen_events;
    int away = 0;

    while (s.steals < STEALS && now_ns() - t0 < POINT_NS) { /* bounded by POINT_NS */
        if (away > 0 || s.stolen_events - refilled_at >= every) {
            refilled_at = s.stolen_events;
            away = refill(p);
            if (away < 0) {
                bench_post_failed(p->m, &p->err, away);
                return;
            }
        }
        bench_spin_cycles(bench_cycles(), POLL_CYCLES);
        s = thief_stats(p->m);
    }
    mely_stop(p->m);
}

/* Fills the queue, runs the point, takes the thief's figures. */
static void cost_run(const struct steal_ctx *ctx, struct cost_point *p, struct cost_figures *f)
{
    /* At the head and the highest priority: the legacy engine has no
     * priorities, and worker 0 must not run the queue it holds for the thief. */
    f->err = mely_post_ex(p->m, MELY_COLOR_PINNED(0), MELY_PRIO_MAX, NULL, blocker, p,
                          MELY_POST_HEAD);
    if (!f->err && (f->err = refill(p)) > 0)
        f->err = 0; /* nothing is away before the run */
    if (!f->err) {
        int rc = bench_mely_run(&ctx->b, p->m, bench_limit_s(0, 0) + POINT_NS / 1e9, "stealcost");
        f->err = bench_post_error(&p->err) ? p->err : rc > 0 ? -ETIMEDOUT : rc;
    }
    mely_stats_t s = thief_stats(p->m);
    if (!f->err && s.steals > 0) {
        f->ok = true;
        f->steals = s.steals;
        f->median = s.steal_cycles_median;
        f->cycles = s.steal_cycles;
        f->stolen_events = s.stolen_events;
    }
}

static void cost_point(struct steal_ctx *ctx, const struct steal_config *cfg, unsigned n,
                       struct cost_figures *f)
{
    struct steal_ctx two = *ctx;
    struct cost_point p = {.n = n, .ncolors = n / 10 > MIN_COLORS ? n / 10 : MIN_COLORS};
    mely_t m = {0};

    two.workers = 2; /* one victim, one thief */
    p.m = &m;
    p.h_empty = steal_handler(cfg, "stealcost empty", WORTHY_TIMELEFT, 0);
    p.colors = calloc(p.ncolors, sizeof(*p.colors));
    p.queued = calloc(p.ncolors, sizeof(*p.queued));
    if (!p.colors || !p.queued)
        f->err = MELY_ENOMEM;
    else if (!(f->err = steal_open(&two, cfg, &m))) {
        if (bench_colors_of(&ctx->b, &m, 0, p.colors, p.ncolors) != p.ncolors)
            f->err = MELY_ECOLOR;
        else
            cost_run(ctx, &p, f);
        if (f->err)
            fprintf(stderr, "%s: stealcost %s, N = %u: %s\n", ctx->b.name, cfg->name, n,
                    mely_strerror(f->err));
        mely_shutdown(&m); /* events still queued are expected: not reported */
    }
    free(p.colors);
    free(p.queued);
}

/* ---- The table ------------------------------------------------------------------------ */

enum { COL_CONFIG, COL_KEY, COL_N, COL_MEDIAN, COL_MEAN, COL_STOLEN, COL_STEALS, COL_NOTE, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_CONFIG] = {.title = "configuration"},
    [COL_KEY] = {.key = "configuration"},
    [COL_N] = {.title = "pending", .key = "pending", .right = true},
    [COL_MEDIAN] = {.title = "cycles/steal median", .key = "steal_cycles_median", .right = true},
    [COL_MEAN] = {.title = "mean", .key = "steal_cycles_mean", .right = true},
    [COL_STOLEN] = {.title = "events/steal", .key = "events_per_steal", .right = true},
    [COL_STEALS] = {.title = "steals", .key = "steals", .right = true},
    [COL_NOTE] = {.title = "note", .key = "note", .gap = 2},
};

static void row_cells(struct bench_table *t, unsigned row, const struct cost_figures *f,
                      unsigned n, const struct steal_config *cfg)
{
    bench_cell(t, row, COL_CONFIG, "%s", cfg->name);
    bench_cell(t, row, COL_KEY, "%s", cfg->key);
    bench_cell(t, row, COL_N, "%u", n);
    if (!f->ok) {
        for (unsigned c = COL_MEDIAN; c <= COL_STEALS; c++)
            bench_cell(t, row, c, "-");
        bench_cell(t, row, COL_NOTE, "n/a (%s)", f->err ? mely_strerror(f->err) : "no steal");
        return;
    }
    bench_cell(t, row, COL_MEDIAN, "%" PRIu64, f->median);
    bench_cell(t, row, COL_MEAN, "%.0f", (double)f->cycles / (double)f->steals);
    bench_cell(t, row, COL_STOLEN, "%.1f", (double)f->stolen_events / (double)f->steals);
    bench_cell(t, row, COL_STEALS, "%" PRIu64, f->steals);
}

/* The targets: mely's median <= 1000 and flat (N = 100,000 within 20% of
 * N = 10); libasync-smp's grows with N. */
static void print_verdicts(const struct cost_figures f[NROWS][NPOINTS])
{
    uint64_t step = bench_tsc_step();

    for (unsigned r = 0; r < NROWS; r++) {
        const struct steal_config *cfg = &steal_configs[rows[r]];
        const struct cost_figures *lo = &f[r][0], *hi = &f[r][NPOINTS - 1];
        if (!lo->ok || !hi->ok) {
            printf("  %s: no verdict (a point has no figures)\n", cfg->name);
            continue;
        }
        double growth = (double)hi->median / (double)(lo->median ? lo->median : 1);
        if (rows[r] == STEAL_LEGACY_WS) {
            printf("  %s: median x%.2f from N = %u to %u (expected: grows with N): %s\n",
                   cfg->name, growth, points[0], points[NPOINTS - 1],
                   growth > 1 + TARGET_FLAT ? "PASS" : "MISS");
            continue;
        }
        bool low = true;
        for (unsigned i = 0; i < NPOINTS; i++)
            low &= f[r][i].ok && (double)f[r][i].median <= TARGET_MEDIAN;
        bool flat = growth <= 1 + TARGET_FLAT && growth >= 1 - TARGET_FLAT;
        uint64_t diff = hi->median > lo->median ? hi->median - lo->median
                                                : lo->median - hi->median;
        printf("  %s: median x%.2f from N = %u to %u (target within %.0f%%), every median <= "
               "%.0f: %s%s\n",
               cfg->name, growth, points[0], points[NPOINTS - 1], TARGET_FLAT * 100,
               TARGET_MEDIAN, low && flat ? "PASS" : "MISS",
               !flat && step && diff <= 2 * step ? " (but within two TSC resolution steps)"
                                                 : "");
    }
}

bool steal_cost_run(struct steal_ctx *ctx, const struct bench_machine *mc)
{
    struct cost_figures f[NROWS][NPOINTS];
    struct bench_table t;
    char path[4096];
    struct bench_param params[] = {{.name = "workers", .value = "2"}};
    bool all = true;

    memset(f, 0, sizeof(f));
    bench_table_init(&t, columns, NCOLS, NROWS * NPOINTS);
    printf("\nstealcost: cycles per steal while worker 0 holds N pending events (round robin "
           "over max(%d, N/10) colors, empty handlers) and idle worker 1 steals; up to %d steals "
           "or %.0f s per point; the victim refills to keep >= ~90%% of N queued\n",
           MIN_COLORS, STEALS, (double)POINT_NS / 1e9);
    for (unsigned r = 0; r < NROWS; r++)
        for (unsigned i = 0; i < NPOINTS; i++) {
            const struct steal_config *cfg = &steal_configs[rows[r]];
            printf("  %-24s N = %-6u ...", cfg->name, points[i]);
            fflush(stdout);
            cost_point(ctx, cfg, points[i], &f[r][i]);
            if (f[r][i].ok)
                printf(" %" PRIu64 " steals\n", f[r][i].steals);
            else
                printf(" failed\n");
            row_cells(&t, r * NPOINTS + i, &f[r][i], points[i], cfg);
            all &= f[r][i].ok;
        }
    printf("\n");
    bench_table_print(stdout, &t);
    printf("  (two successive TSC reads are %" PRIu64 " cycles apart here: the resolution of "
           "these figures)\n",
           bench_tsc_step());
    print_verdicts((const struct cost_figures(*)[NPOINTS])f);
    snprintf(path, sizeof(path), "%s/steal-stealcost.csv", ctx->csv_dir);
    bench_table_csv(&ctx->b, path, mc, params, 1, &t);
    bench_table_free(&t);
    return all;
}
