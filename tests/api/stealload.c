/* SPDX-License-Identifier: MIT */
/*
 * stealload.c: the load of the stealing tests (see stealload.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tests/api/stealload.h"

#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#if HAVE_TSC
#include <x86intrin.h>
#endif

/* ---- handler descriptors ------------------------------------------------------------ */

uint64_t counted(uint64_t cycles)
{
    return cycles < COUNTED_CAP ? cycles : COUNTED_CAP;
}

/* Whether `got` is n events of `cycles` each, up to the rounding. */
bool sums_to(uint64_t got, uint64_t n, uint64_t cycles)
{
    uint64_t want = n * counted(cycles), slack = n * 16;
    return got + slack >= want && got <= want + slack;
}

/* The runtime never writes to descriptors (mely.h): they may be const. These
 * are not, so that the tables below can point to them without casts. */
mely_handler_t d_always = {.name = "always worthy", .timeleft = ALWAYS_CYCLES};
mely_handler_t d_never = {.name = "never worthy", .timeleft = 1};
mely_handler_t d_unannotated = {.name = "unannotated"};
mely_handler_t d_cheap = {
    .name = "high penalty", .timeleft = PENALTY_CYCLES, .penalty = HIGH_PENALTY};
mely_handler_t d_dear0 = {.name = "penalty 0", .timeleft = PENALTY_CYCLES, .penalty = 0};
mely_handler_t d_dear1 = {.name = "penalty 1", .timeleft = PENALTY_CYCLES, .penalty = 1};
mely_handler_t d_measured = {.name = "measured"};
mely_handler_t d_annotated = {.name = "annotated", .timeleft = 5000};

/* ---- the load ---------------------------------------------------------------------- */

struct steal_load ld;

void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) /* bounded by the clock */
        ;
}

static uint64_t tsc(void)
{
#if HAVE_TSC
    return __rdtsc();
#else
    return 0;
#endif
}

static void tsc_record(uint64_t cycles)
{
    uint_fast64_t cur = atomic_load(&ld.tsc_min);
    while (cycles < cur && !atomic_compare_exchange_weak(&ld.tsc_min, &cur, cycles)) {
    }
    cur = atomic_load(&ld.tsc_max);
    while (cycles > cur && !atomic_compare_exchange_weak(&ld.tsc_max, &cur, cycles)) {
    }
    atomic_fetch_add(&ld.tsc_runs, 1);
}

/* What must end before run_load() stops the runtime: the load, and the gate
 * (below) when there is one. */
static atomic_int parts_left;

static void part_done(void)
{
    if (atomic_fetch_sub(&parts_left, 1) == 1)
        mely_stop(&rt);
}

static void finish(void)
{
    if (atomic_fetch_add(&ld.done, 1) + 1 == ld.total)
        part_done();
}

void colored(void *arg)
{
    unsigned *seq = arg;
    unsigned c = (unsigned)(seq - &ld.seq[0][0]) / MAX_PER_COLOR;
    struct color_state *cs = &ld.cs[c];
    const struct group *g = &ld.groups[cs->group];
    uint64_t t0 = tsc();

    if (atomic_fetch_add(&cs->inside, 1) != 0)
        note("color %u: two handlers at once", ld.color[c]);
    check_owner(&rt, ld.color[c]);
    if (*seq != cs->next)
        note("color %u: event %u ran when %u was due", ld.color[c], *seq, cs->next);
    cs->next = *seq + 1;
    atomic_fetch_or(&cs->worker_mask, 1 << mely_current_worker());
    spin_ns(g->spin_ns ? g->spin_ns : SPIN_NS);
    check_owner(&rt, ld.color[c]);
    atomic_fetch_sub(&cs->inside, 1);
    if (g->desc == &d_measured || !g->desc)
        tsc_record(tsc() - t0);
    finish();
}

static void pinned(void *arg)
{
    (void)arg;
    atomic_fetch_add(&ld.pinned_ran, 1);
    if (mely_current_worker() != 0)
        atomic_fetch_add(&ld.pinned_elsewhere, 1);
    spin_ns(SPIN_NS);
    finish();
}

void reset_load(void)
{
    memset(&ld, 0, sizeof(ld));
    atomic_store(&ld.tsc_min, UINT64_MAX);
}

/* Adds `ncolors` colors of `per_color` events each (scaled, at most `max`)
 * with descriptor `desc`. */
void add_group_max(unsigned ncolors, unsigned per_color, unsigned max,
                          mely_handler_t *desc)
{
    ck_assert_uint_lt(ld.ngroups, MAX_GROUPS);
    ck_assert_uint_le(ld.ncolors + ncolors, NCOLORS);
    ck_assert_uint_le(max, MAX_PER_COLOR);
    per_color = scaled(per_color, per_color < 20 ? per_color : 20, max);
    ld.groups[ld.ngroups] = (struct group){.ncolors = ncolors, .per_color = per_color, .desc = desc};
    for (unsigned i = 0; i < ncolors; i++) {
        ld.cs[ld.ncolors].group = ld.ngroups;
        ld.cs[ld.ncolors++].n = per_color;
    }
    ld.ngroups++;
}

void add_group(unsigned ncolors, unsigned per_color, mely_handler_t *desc)
{
    add_group_max(ncolors, per_color, MAX_PER_COLOR, desc);
}

/*
 * Posts the groups' events to colors that worker 0 owns (group after group in
 * color order, the events interleaved across colors, so that every color has
 * events pending from the start), plus `npinned` always-worthy events of worker
 * 0's pinned color, which no policy may take. Colors from `first` on.
 */
void post_load(mely_color_t first, unsigned npinned)
{
    unsigned k = 0, most = 0;
    for (mely_color_t c = first; k < ld.ncolors; c++)
        if (mely_color_owner(&rt, c) == 0)
            ld.color[k++] = c;
    for (unsigned c = 0; c < ld.ncolors; c++)
        most = ld.cs[c].n > most ? ld.cs[c].n : most;
    ld.total = 0;
    for (unsigned i = 0; i < most || i < npinned; i++) {
        for (unsigned c = 0; c < ld.ncolors; c++) {
            if (i >= ld.cs[c].n)
                continue;
            ld.seq[c][i] = i;
            ck_assert_int_eq(mely_post_ex(&rt, ld.color[c], MELY_PRIO_DEFAULT,
                                          ld.groups[ld.cs[c].group].desc, colored, &ld.seq[c][i], 0),
                             0);
            ld.total++;
        }
        if (i < npinned) {
            ck_assert_int_eq(mely_post_ex(&rt, MELY_COLOR_PINNED(0), MELY_PRIO_DEFAULT, &d_always,
                                          pinned, NULL, 0),
                             0);
            ld.total++;
        }
    }
    atomic_store(&ld.done, 0);
}

/* ---- running and checking ------------------------------------------------------------- */

/*
 * Runs the posted load to its end and checks the invariants and the steal
 * counters' consistency; returns what was stolen. `what` names the run in
 * failure messages.
 */
/* Steal attempts of each worker before the run (for the gate). */
static uint64_t attempts_before[MAXW];

/*
 * The first event worker 0 runs: it waits (at most 10 s) until every other
 * worker has gone idle and tried to steal once. The load is posted before
 * mely_run(), and on a loaded 2-core machine (make -j2 check, CI) a thief's
 * thread may otherwise start only after worker 0 has run the whole load, and
 * the test would see no steal for reasons that have nothing to do with
 * stealing. The reverse happens too (worker 0's thread late, the thieves
 * run everything): the runtime stops once both the gate and the load ended.
 */
static void gate(void *arg)
{
    (void)arg;
    unsigned nw = mely_workers(&rt);
    uint64_t end = now_ns() + 10000000000u;
    for (unsigned w = 1; w < nw; w++) {
        mely_stats_t st;
        while (mely_worker_stats(&rt, w, &st) == 0 && st.steal_attempts == attempts_before[w] &&
               now_ns() < end) /* bounded by the clock */
            sched_yield();
    }
    part_done();
}

struct outcome run_load(const char *what, unsigned npinned)
{
    struct outcome o;
    mely_stats_t before[MAXW];
    unsigned nw = mely_workers(&rt);
    memset(&o, 0, sizeof(o));
    ck_assert_uint_le(nw, MAXW);
    for (unsigned w = 0; w < nw; w++) {
        before[w] = stats_of(&rt, w);
        attempts_before[w] = before[w].steal_attempts;
    }
    bool gated = nw > 1;
    atomic_store(&parts_left, gated ? 2 : 1);
    if (gated)
        ck_assert_int_eq(mely_post_ex(&rt, MELY_COLOR_PINNED(0), MELY_PRIO_MAX, NULL, gate, NULL,
                                      MELY_POST_HEAD),
                         0);

    run_bounded(&rt, 60, what);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ld.done), ld.total);
    for (unsigned c = 0; c < ld.ncolors; c++)
        ck_assert_msg(ld.cs[c].next == ld.cs[c].n, "%s: color %u ran %u of its %u events", what,
                      ld.color[c], ld.cs[c].next, ld.cs[c].n);
    ck_assert_uint_eq(atomic_load(&ld.pinned_ran), npinned);
    ck_assert_msg(atomic_load(&ld.pinned_elsewhere) == 0,
                  "%s: %u events of worker 0's pinned color ran on another worker", what,
                  atomic_load(&ld.pinned_elsewhere));
    ck_assert_int_eq(mely_color_owner(&rt, MELY_COLOR_PINNED(0)), 0);

    uint64_t events = 0;
    for (unsigned w = 0; w < nw; w++) {
        mely_stats_t st = stats_of(&rt, w);
        ck_assert_msg(st.steals <= st.steal_attempts,
                      "%s: worker %u: %" PRIu64 " steals in %" PRIu64 " attempts", what, w,
                      st.steals, st.steal_attempts);
        if (st.steals > 0) {
            ck_assert_msg(st.steal_cycles_median > 0,
                          "%s: worker %u: %" PRIu64 " steals, median 0 cycles", what, w, st.steals);
            ck_assert_msg(st.steal_cycles >= st.steal_cycles_median,
                          "%s: worker %u: median %" PRIu64 " above the sum %" PRIu64, what, w,
                          st.steal_cycles_median, st.steal_cycles);
            ck_assert_msg(st.stolen_events >= st.steals,
                          "%s: worker %u: %" PRIu64 " steals took %" PRIu64 " events", what, w,
                          st.steals, st.stolen_events);
        } else {
            ck_assert_msg(st.steal_cycles == 0 && st.steal_cycles_median == 0 &&
                              st.stolen_events == 0 && st.stolen_cycles == 0,
                          "%s: worker %u: no steal, but steal_cycles %" PRIu64 ", median %" PRIu64
                          ", stolen_events %" PRIu64 ", stolen_cycles %" PRIu64,
                          what, w, st.steal_cycles, st.steal_cycles_median, st.stolen_events,
                          st.stolen_cycles);
        }
        o.sum.steal_attempts += st.steal_attempts - before[w].steal_attempts;
        o.sum.steals += st.steals - before[w].steals;
        o.sum.steal_cycles += st.steal_cycles - before[w].steal_cycles;
        o.sum.stolen_events += st.stolen_events - before[w].stolen_events;
        o.sum.stolen_cycles += st.stolen_cycles - before[w].stolen_cycles;
        o.events_run[w] = st.events_run - before[w].events_run - (gated && w == 0);
        events += o.events_run[w];
        if (w != 0)
            o.run_elsewhere += o.events_run[w];
    }
    assert_no_notes(); /* stats_of() */
    ck_assert_uint_eq(events, ld.total);

    /* Colors that ran on other workers were stolen (the load's colors all
     * start on worker 0); the map followed every move, so a color another
     * worker owns now ran there. */
    bool any_elsewhere = false;
    for (unsigned c = 0; c < ld.ncolors; c++) {
        int mask = atomic_load(&ld.cs[c].worker_mask);
        int owner = mely_color_owner(&rt, ld.color[c]);
        if (mask & ~1) {
            o.stolen[ld.cs[c].group]++;
            any_elsewhere = true;
        }
        ck_assert_msg(owner >= 0 && (mask & (1 << owner)),
                      "%s: color %u owned by worker %d but never ran there", what, ld.color[c],
                      owner);
    }
    if (o.sum.steals == 0)
        ck_assert_msg(!any_elsewhere && o.run_elsewhere == 0,
                      "%s: no steal counted, but other workers ran %" PRIu64 " events", what,
                      o.run_elsewhere);
    else
        ck_assert_msg(any_elsewhere, "%s: %" PRIu64 " steals counted, no color ran elsewhere",
                      what, o.sum.steals);
    return o;
}

void init_two(const char *steal, const char *engine)
{
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, steal, engine);
}

/* ---- policies ------------------------------------------------------------------------ */

const char *policy_name(const struct policy *p)
{
    static char buf[96];
    snprintf(buf, sizeof(buf), "%s%s", p->engine ? "legacy engine, " : "", p->steal);
    return buf;
}
