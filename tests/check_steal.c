/*
 * check_steal.c: work stealing through the public API (mely/mely.h), in the
 * scene of the paper's microbenchmarks: all the work starts on worker 0 and
 * worker 1 is idle, so worker 1 runs the steal driver. For every policy (and
 * libasync-smp's, on the legacy engine):
 *  - steals happen when they should, and the invariants hold meanwhile: every
 *    event runs once, one color never on two workers at once, each color in
 *    post order, a running color never moves (its handler finds itself on the
 *    worker the map names), pinned colors never leave their worker;
 *  - the steal statistics are consistent: steals <= attempts, a median once
 *    there were steals (0 before), stolen_cycles the sum of the stolen events'
 *    expected cycles (0 for unannotated handlers; rounded to 32 cycles and
 *    capped at 2,097,120 per event, as mely.h says);
 *  - time-left: colors of never-worthy handlers (time-left 1 cycle) are never
 *    stolen, always-worthy ones (10,000,000 cycles) are; unannotated handlers
 *    count nothing, so the time-left policies leave them alone;
 *  - penalty: a color whose penalty makes it cheap is never stolen under
 *    "penalty", though "timeleft" (which ignores penalties) takes it;
 *  - measured: mely_handler_measured() is 0 until a "measured" policy ran the
 *    handler, then near its real cost; colors of measured handlers become
 *    worthy, unannotated NULL-descriptor ones never do;
 *  - MELY_STEAL wins over the configuration.
 * Outcomes never depend on timing: "never stolen" holds whatever the timing,
 * and "stolen" only needs one steal among dozens of chances.
 *
 * Handlers never call ck_assert, every wait is bounded, and MELY_TEST_SCALE
 * scales the event counts (see tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#include "mely/mely.h"
#include "tests/testutil.h"

/* ---- handler descriptors ------------------------------------------------------------ */

enum { ALWAYS_CYCLES = 10000000, PENALTY_CYCLES = 100000, HIGH_PENALTY = 100000 };

/* What one event of `cycles` expected cycles adds to stolen_cycles (mely.h):
 * rounded to 32 cycles (within 16 of it, checked with slack()) and capped at
 * 2,097,120. */
#define COUNTED_CAP 2097120u

static uint64_t counted(uint64_t cycles)
{
    return cycles < COUNTED_CAP ? cycles : COUNTED_CAP;
}

/* Whether `got` is n events of `cycles` each, up to the rounding. */
static bool sums_to(uint64_t got, uint64_t n, uint64_t cycles)
{
    uint64_t want = n * counted(cycles), slack = n * 16;
    return got + slack >= want && got <= want + slack;
}

/* The runtime never writes to descriptors (mely.h): they may be const. These
 * are not, so that the tables below can point to them without casts. */
static mely_handler_t d_always = {.name = "always worthy", .timeleft = ALWAYS_CYCLES};
static mely_handler_t d_never = {.name = "never worthy", .timeleft = 1};
static mely_handler_t d_unannotated = {.name = "unannotated"};
static mely_handler_t d_cheap = {
    .name = "high penalty", .timeleft = PENALTY_CYCLES, .penalty = HIGH_PENALTY};
static mely_handler_t d_dear0 = {.name = "penalty 0", .timeleft = PENALTY_CYCLES, .penalty = 0};
static mely_handler_t d_dear1 = {.name = "penalty 1", .timeleft = PENALTY_CYCLES, .penalty = 1};
static mely_handler_t d_measured = {.name = "measured"};
static mely_handler_t d_annotated = {.name = "annotated", .timeleft = 5000};

/* ---- the load: colors of worker 0 in groups, each with its descriptor -------------- */

enum { NCOLORS = 64, MAX_PER_COLOR = 200, MAX_GROUPS = 4, SPIN_NS = 10000 };

struct group {
    unsigned ncolors, per_color;
    mely_handler_t *desc; /* NULL: posted with a NULL descriptor */
    uint64_t spin_ns;     /* 0: SPIN_NS */
};

struct color_state {
    atomic_int inside;   /* handlers of this color running now */
    unsigned next;       /* the sequence number expected next (one color at a time) */
    atomic_int worker_mask;
    unsigned group, n;
};

static struct {
    mely_color_t color[NCOLORS];
    struct color_state cs[NCOLORS];
    unsigned seq[NCOLORS][MAX_PER_COLOR];
    struct group groups[MAX_GROUPS];
    unsigned ngroups, ncolors;
    atomic_uint done;
    unsigned total;
    atomic_uint pinned_ran, pinned_elsewhere;
    /* TSC cycles a handler of the measured descriptor took, seen from inside */
    atomic_uint_fast64_t tsc_min, tsc_max;
    atomic_uint tsc_runs;
} s;

static void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) /* bounded by the clock */
        ;
}

static uint64_t tsc(void)
{
#ifdef HAVE_TSC
    return __rdtsc();
#else
    return 0;
#endif
}

static void tsc_record(uint64_t cycles)
{
    uint_fast64_t cur = atomic_load(&s.tsc_min);
    while (cycles < cur && !atomic_compare_exchange_weak(&s.tsc_min, &cur, cycles)) {
    }
    cur = atomic_load(&s.tsc_max);
    while (cycles > cur && !atomic_compare_exchange_weak(&s.tsc_max, &cur, cycles)) {
    }
    atomic_fetch_add(&s.tsc_runs, 1);
}

static void finish(void)
{
    if (atomic_fetch_add(&s.done, 1) + 1 == s.total)
        mely_stop(&rt);
}

/* A running color never moves: while its handler runs, the map names the
 * worker running it. */
static void check_owner(mely_color_t color)
{
    int owner = mely_color_owner(&rt, color);
    if (owner != mely_current_worker())
        note("color %u runs on worker %d while the map says worker %d", color,
             mely_current_worker(), owner);
}

static void colored(void *arg)
{
    unsigned *seq = arg;
    unsigned c = (unsigned)(seq - &s.seq[0][0]) / MAX_PER_COLOR;
    struct color_state *cs = &s.cs[c];
    const struct group *g = &s.groups[cs->group];
    uint64_t t0 = tsc();

    if (atomic_fetch_add(&cs->inside, 1) != 0)
        note("color %u: two handlers at once", s.color[c]);
    check_owner(s.color[c]);
    if (*seq != cs->next)
        note("color %u: event %u ran when %u was due", s.color[c], *seq, cs->next);
    cs->next = *seq + 1;
    atomic_fetch_or(&cs->worker_mask, 1 << mely_current_worker());
    spin_ns(g->spin_ns ? g->spin_ns : SPIN_NS);
    check_owner(s.color[c]);
    atomic_fetch_sub(&cs->inside, 1);
    if (g->desc == &d_measured)
        tsc_record(tsc() - t0);
    finish();
}

static void pinned(void *arg)
{
    (void)arg;
    atomic_fetch_add(&s.pinned_ran, 1);
    if (mely_current_worker() != 0)
        atomic_fetch_add(&s.pinned_elsewhere, 1);
    spin_ns(SPIN_NS);
    finish();
}

static void reset_load(void)
{
    memset(&s, 0, sizeof(s));
    atomic_store(&s.tsc_min, UINT64_MAX);
}

/* Adds `ncolors` colors of `per_color` events each (scaled, at most `max`)
 * with descriptor `desc`. */
static void add_group_max(unsigned ncolors, unsigned per_color, unsigned max,
                          mely_handler_t *desc)
{
    ck_assert_uint_lt(s.ngroups, MAX_GROUPS);
    ck_assert_uint_le(s.ncolors + ncolors, NCOLORS);
    ck_assert_uint_le(max, MAX_PER_COLOR);
    per_color = scaled(per_color, per_color < 20 ? per_color : 20, max);
    s.groups[s.ngroups] = (struct group){.ncolors = ncolors, .per_color = per_color, .desc = desc};
    for (unsigned i = 0; i < ncolors; i++) {
        s.cs[s.ncolors].group = s.ngroups;
        s.cs[s.ncolors++].n = per_color;
    }
    s.ngroups++;
}

static void add_group(unsigned ncolors, unsigned per_color, mely_handler_t *desc)
{
    add_group_max(ncolors, per_color, MAX_PER_COLOR, desc);
}

/*
 * Posts the groups' events to colors that worker 0 owns (group after group in
 * color order, the events interleaved across colors, so that every color has
 * events pending from the start), plus `npinned` always-worthy events of worker
 * 0's pinned color, which no policy may take. Colors from `first` on.
 */
static void post_load(mely_color_t first, unsigned npinned)
{
    unsigned k = 0, most = 0;
    for (mely_color_t c = first; k < s.ncolors; c++)
        if (mely_color_owner(&rt, c) == 0)
            s.color[k++] = c;
    for (unsigned c = 0; c < s.ncolors; c++)
        most = s.cs[c].n > most ? s.cs[c].n : most;
    s.total = 0;
    for (unsigned i = 0; i < most || i < npinned; i++) {
        for (unsigned c = 0; c < s.ncolors; c++) {
            if (i >= s.cs[c].n)
                continue;
            s.seq[c][i] = i;
            ck_assert_int_eq(mely_post_ex(&rt, s.color[c], MELY_PRIO_DEFAULT,
                                          s.groups[s.cs[c].group].desc, colored, &s.seq[c][i], 0),
                             0);
            s.total++;
        }
        if (i < npinned) {
            ck_assert_int_eq(mely_post_ex(&rt, MELY_COLOR_PINNED(0), MELY_PRIO_DEFAULT, &d_always,
                                          pinned, NULL, 0),
                             0);
            s.total++;
        }
    }
    atomic_store(&s.done, 0);
}

/* ---- running and checking ------------------------------------------------------------- */

/* What one run_load() did: counters are the run's increments (a runtime may
 * run several loads). */
enum { MAXW = 8 };

struct outcome {
    mely_stats_t sum;            /* all workers' steal counters added up */
    uint64_t events_run[MAXW];
    uint64_t run_elsewhere;      /* events run by workers other than 0 */
    unsigned stolen[MAX_GROUPS]; /* colors of each group that ran elsewhere */
};

static mely_stats_t stats_of(unsigned w)
{
    mely_stats_t st;
    ck_assert_int_eq(mely_worker_stats(&rt, w, &st), 0);
    return st;
}

/*
 * Runs the posted load to its end and checks the invariants and the steal
 * counters' consistency; returns what was stolen. `what` names the run in
 * failure messages.
 */
static struct outcome run_load(const char *what, unsigned npinned)
{
    struct outcome o;
    mely_stats_t before[MAXW];
    unsigned nw = mely_workers(&rt);
    memset(&o, 0, sizeof(o));
    ck_assert_uint_le(nw, MAXW);
    for (unsigned w = 0; w < nw; w++)
        before[w] = stats_of(w);

    run_bounded(&rt, 60, what);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&s.done), s.total);
    for (unsigned c = 0; c < s.ncolors; c++)
        ck_assert_msg(s.cs[c].next == s.cs[c].n, "%s: color %u ran %u of its %u events", what,
                      s.color[c], s.cs[c].next, s.cs[c].n);
    ck_assert_uint_eq(atomic_load(&s.pinned_ran), npinned);
    ck_assert_msg(atomic_load(&s.pinned_elsewhere) == 0,
                  "%s: %u events of worker 0's pinned color ran on another worker", what,
                  atomic_load(&s.pinned_elsewhere));
    ck_assert_int_eq(mely_color_owner(&rt, MELY_COLOR_PINNED(0)), 0);

    uint64_t events = 0;
    for (unsigned w = 0; w < nw; w++) {
        mely_stats_t st = stats_of(w);
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
        o.events_run[w] = st.events_run - before[w].events_run;
        events += o.events_run[w];
        if (w != 0)
            o.run_elsewhere += o.events_run[w];
    }
    ck_assert_uint_eq(events, s.total);

    /* Colors that ran on other workers were stolen (the load's colors all
     * start on worker 0); the map followed every move, so a color another
     * worker owns now ran there. */
    bool any_elsewhere = false;
    for (unsigned c = 0; c < s.ncolors; c++) {
        int mask = atomic_load(&s.cs[c].worker_mask);
        int owner = mely_color_owner(&rt, s.color[c]);
        if (mask & ~1) {
            o.stolen[s.cs[c].group]++;
            any_elsewhere = true;
        }
        ck_assert_msg(owner >= 0 && (mask & (1 << owner)),
                      "%s: color %u owned by worker %d but never ran there", what, s.color[c],
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

static void init_two(const char *steal, const char *engine)
{
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, steal, engine);
}

/* ---- every policy: steals happen, invariants hold ---------------------------------------- */

struct policy {
    const char *steal, *engine;
};

static const struct policy stealing_policies[] = {
    {"base", NULL},
    {"locality", NULL},
    {"base+locality", NULL},
    {"timeleft", NULL},
    {"penalty", NULL},
    {"measured", NULL},
    {"all", NULL},
    {"locality+timeleft", NULL},
    {"timeleft+penalty", NULL},
    {"timeleft+measured", NULL},
    {"all+measured", NULL},
    {"base", "legacy"},
    {"locality", "legacy"},
    {"base+locality", "legacy"},
};

static const char *policy_name(const struct policy *p)
{
    static char buf[96];
    snprintf(buf, sizeof(buf), "%s%s", p->engine ? "legacy engine, " : "", p->steal);
    return buf;
}

/*
 * Always-worthy colors (and pinned events with the same annotation): every
 * policy steals, the invariants hold, and the stolen events' expected cycles
 * add up exactly (each counts its full annotation: its penalty is 0).
 */
START_TEST(idle_worker_steals_and_invariants_hold)
{
    const struct policy *p = &stealing_policies[_i];
    const char *what = policy_name(p);

    reset_load();
    init_two(p->steal, p->engine);
    add_group(NCOLORS, 100, &d_always);
    post_load(0, 100);
    struct outcome o = run_load(what, 100);
    ck_assert_msg(o.sum.steals > 0, "%s: worker 1 stole nothing (%" PRIu64 " attempts)", what,
                  o.sum.steal_attempts);
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, ALWAYS_CYCLES),
                  "%s: %" PRIu64 " events of %u cycles (counted %" PRIu64 ") stolen, "
                  "stolen_cycles %" PRIu64,
                  what, o.sum.stolen_events, ALWAYS_CYCLES, counted(ALWAYS_CYCLES),
                  o.sum.stolen_cycles);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/*
 * stolen_cycles is the sum of the stolen events' expected cycles (mely.h):
 * here their time-left annotations, each rounded to 32 cycles and capped at
 * 2,097,120 (so an event whose handler takes 4 ms, 10,000,000 cycles, counts
 * 2,097,120).
 */
static mely_handler_t d_sized[] = {
    {.name = "3,000 cycles", .timeleft = 3000},
    {.name = "100,000 cycles", .timeleft = 100000},
    {.name = "1,000,000 cycles", .timeleft = 1000000},
    {.name = "10,000,000 cycles", .timeleft = ALWAYS_CYCLES},
};

START_TEST(stolen_cycles_add_up_the_annotations)
{
    mely_handler_t *d = &d_sized[_i];

    reset_load();
    init_two("base", NULL);
    add_group(NCOLORS, 50, d);
    post_load(0, 0);
    struct outcome o = run_load(d->name, 0);
    ck_assert_msg(o.sum.steals > 0, "%s: nothing stolen", d->name);
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, d->timeleft),
                  "events of %s: %" PRIu64 " stolen, stolen_cycles %" PRIu64 " (%" PRIu64
                  " per event), expected %" PRIu64 " per event",
                  d->name, o.sum.stolen_events, o.sum.stolen_cycles,
                  o.sum.stolen_cycles / o.sum.stolen_events, counted(d->timeleft));
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* What becomes of unannotated colors (half posted with a NULL descriptor,
 * half with a descriptor of time-left 0) under each policy. */
enum unannotated_expect {
    STOLEN,     /* base's rules: stolen, counting 0 cycles */
    NEVER,      /* time-left rules: they count 0, never worthy */
    NULL_NEVER, /* time-left rules with measured costs: the NULL-descriptor
                   colors count 0; the others may be measured (see below) */
};

static const struct unannotated_case {
    struct policy p;
    enum unannotated_expect expect;
} unannotated_cases[] = {
    {{"base", NULL}, STOLEN},
    {{"locality", NULL}, STOLEN},
    {{"measured", NULL}, STOLEN},
    {{"base", "legacy"}, STOLEN},
    {{"base+locality", "legacy"}, STOLEN},
    {{"timeleft", NULL}, NEVER},
    {{"penalty", NULL}, NEVER},
    {{"all", NULL}, NEVER},
    {{"locality+timeleft", NULL}, NEVER},
    {{"timeleft+measured", NULL}, NULL_NEVER},
    {{"all+measured", NULL}, NULL_NEVER},
};

START_TEST(unannotated_handlers_count_nothing)
{
    const struct unannotated_case *uc = &unannotated_cases[_i];
    const char *what = policy_name(&uc->p);

    reset_load();
    init_two(uc->p.steal, uc->p.engine);
    add_group(NCOLORS / 2, 100, NULL);
    add_group(NCOLORS / 2, 100, &d_unannotated);
    post_load(0, 0);
    struct outcome o = run_load(what, 0);
    switch (uc->expect) {
    case STOLEN:
        ck_assert_msg(o.sum.steals > 0, "%s: nothing stolen", what);
        /* measured costs count only under "measured", and only for the
         * descriptor: the NULL one counts 0 */
        if (!strstr(uc->p.steal, "measured"))
            ck_assert_msg(o.sum.stolen_cycles == 0,
                          "%s: unannotated events stolen, but stolen_cycles %" PRIu64, what,
                          o.sum.stolen_cycles);
        break;
    case NEVER:
        ck_assert_msg(o.sum.steals == 0,
                      "%s: %" PRIu64 " steals of colors whose handlers count 0 cycles", what,
                      o.sum.steals);
        break;
    case NULL_NEVER:
        ck_assert_msg(o.stolen[0] == 0,
                      "%s: %u colors of NULL-descriptor events stolen (they count 0 cycles)", what,
                      o.stolen[0]);
        break;
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* With stealing off, on either engine, nothing moves. */
START_TEST(no_stealing_when_off)
{
    static const char *const engines[] = {NULL, "legacy"};

    reset_load();
    init_two(_i == 2 ? "off" : NULL, engines[_i % 2]);
    add_group(NCOLORS, 50, &d_always);
    post_load(0, 20);
    struct outcome o = run_load("stealing off", 20);
    ck_assert_uint_eq(o.sum.steals, 0);
    ck_assert_uint_eq(o.events_run[1], 0);
    for (unsigned c = 0; c < s.ncolors; c++)
        ck_assert_int_eq(mely_color_owner(&rt, s.color[c]), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/*
 * A single busy color on worker 0: its handler finds the map naming its own
 * worker in every run (checked in colored()), whatever the policy. Under
 * base's rules (base, locality, the legacy engine) it is never stolen at all:
 * a victim needs events of two colors.
 */
START_TEST(a_lone_running_color_stays)
{
    const struct policy *p = &stealing_policies[_i];
    const char *what = policy_name(p);

    reset_load();
    init_two(p->steal, p->engine);
    add_group(1, 200, &d_always);
    post_load(0, 0);
    struct outcome o = run_load(what, 0);
    bool base_rules = p->engine || strcmp(p->steal, "base") == 0 ||
                      strcmp(p->steal, "locality") == 0 || strcmp(p->steal, "base+locality") == 0 ||
                      strcmp(p->steal, "measured") == 0;
    if (base_rules) {
        ck_assert_msg(o.sum.steals == 0, "%s: a lone color stolen %" PRIu64 " times", what,
                      o.sum.steals);
        ck_assert_int_eq(atomic_load(&s.cs[0].worker_mask), 1);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- many thieves, one victim; no victim at all ----------------------------------------- */

static const struct policy crowd_policies[] = {
    {"base", NULL}, {"timeleft", NULL}, {"all+measured", NULL},
    {"base", "legacy"}, {"base+locality", "legacy"},
};

/*
 * Eight unpinned workers (on two CPUs), all the work on worker 0: seven
 * thieves compete for one victim's lock and colors (and steal from each other
 * once they have some). Every invariant holds and the colors spread.
 */
START_TEST(many_thieves_one_victim)
{
    const struct policy *p = &crowd_policies[_i];
    const char *what = policy_name(p);

    reset_load();
    init_runtime_engine(&rt, MAXW, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, p->steal,
                        p->engine);
    add_group(NCOLORS, 60, &d_always);
    post_load(0, 60);
    struct outcome o = run_load(what, 60);
    ck_assert_msg(o.sum.steals > 0, "%s: seven idle workers stole nothing", what);
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, ALWAYS_CYCLES),
                  "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64, what,
                  o.sum.stolen_events, o.sum.stolen_cycles);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* One worker has no victim: every policy runs everything, steals nothing. */
START_TEST(one_worker_has_no_victim)
{
    const struct policy *p = &stealing_policies[_i];
    const char *what = policy_name(p);

    reset_load();
    init_runtime_engine(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, p->steal, p->engine);
    add_group(8, 20, &d_always);
    post_load(0, 20);
    struct outcome o = run_load(what, 20);
    ck_assert_uint_eq(o.sum.steals, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- time-left: only worthy colors ------------------------------------------------------ */

static const char *const timeleft_policies[] = {
    "timeleft", "locality+timeleft", "penalty", "timeleft+penalty", "all", "timeleft+measured",
    "all+measured",
};

/*
 * Never-worthy colors (time-left 1 cycle, so at most 50 cycles per color,
 * far below the cost of any steal) among always-worthy ones: the former
 * never leave worker 0, some of the latter do, and only their cycles count.
 */
START_TEST(timeleft_steals_only_worthy_colors)
{
    const char *policy = timeleft_policies[_i];

    reset_load();
    init_two(policy, NULL);
    add_group(NCOLORS / 2, 100, &d_always);
    add_group_max(NCOLORS / 2, 50, 50, &d_never); /* at most 50 cycles, whatever the scale */
    post_load(0, 50);
    struct outcome o = run_load(policy, 50);
    ck_assert_msg(o.stolen[1] == 0, "%s: %u never-worthy colors stolen", policy, o.stolen[1]);
    ck_assert_msg(o.stolen[0] > 0, "%s: no always-worthy color stolen (%" PRIu64 " attempts)",
                  policy, o.sum.steal_attempts);
    /* Only always-worthy events were stolen. */
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, ALWAYS_CYCLES),
                  "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64 ", expected %" PRIu64
                  " each",
                  policy, o.sum.stolen_events, o.sum.stolen_cycles, counted(ALWAYS_CYCLES));
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- penalty -------------------------------------------------------------------------- */

static const char *const penalty_policies[] = {
    "penalty", "timeleft+penalty", "penalty+measured", "all", "all+measured",
};

/*
 * Time-left 100,000 cycles with penalty 100,000 counts 1 cycle per event
 * (never worthy) under "penalty"; the same time-left with penalty 0 or 1
 * counts fully: those colors are stolen, the penalized ones never.
 */
START_TEST(penalty_keeps_penalized_colors)
{
    const char *policy = penalty_policies[_i];

    reset_load();
    init_two(policy, NULL);
    add_group_max(NCOLORS / 2, 50, 50, &d_cheap); /* at most 50 cycles, whatever the scale */
    add_group(NCOLORS / 4, 50, &d_dear0);
    add_group(NCOLORS / 4, 50, &d_dear1);
    post_load(0, 20);
    struct outcome o = run_load(policy, 20);
    ck_assert_msg(o.stolen[0] == 0, "%s: %u colors of penalty %u stolen", policy, o.stolen[0],
                  HIGH_PENALTY);
    ck_assert_msg(o.stolen[1] + o.stolen[2] > 0,
                  "%s: no color of penalty 0 or 1 stolen (%" PRIu64 " attempts)", policy,
                  o.sum.steal_attempts);
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, PENALTY_CYCLES),
                  "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64 ", expected %u each",
                  policy, o.sum.stolen_events, o.sum.stolen_cycles, PENALTY_CYCLES);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* Only penalized colors: "penalty" never steals them; "timeleft", which does
 * not divide by the penalty, does, and counts their full time-left. */
static const struct {
    const char *steal;
    bool stolen;
} penalized_only_cases[] = {
    {"timeleft", true},  {"locality+timeleft", true}, {"timeleft+measured", true},
    {"penalty", false},  {"all", false},
};

START_TEST(penalty_matters_only_under_penalty)
{
    const char *policy = penalized_only_cases[_i].steal;
    bool stolen = penalized_only_cases[_i].stolen;

    reset_load();
    init_two(policy, NULL);
    add_group_max(NCOLORS, 50, 50, &d_cheap);
    post_load(0, 0);
    struct outcome o = run_load(policy, 0);
    if (stolen) {
        ck_assert_msg(o.sum.steals > 0, "%s: penalized colors (worthy here) not stolen", policy);
        ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, PENALTY_CYCLES),
                      "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64
                      ", expected %u each (no penalty division)",
                      policy, o.sum.stolen_events, o.sum.stolen_cycles, PENALTY_CYCLES);
    } else {
        ck_assert_msg(o.sum.steals == 0, "%s: %" PRIu64 " steals of penalized colors", policy,
                      o.sum.steals);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- measured costs ---------------------------------------------------------------------- */

enum { MEASURED_SPIN_NS = 50000, WARMUP_RUNS = 200 };

/* Runs WARMUP_RUNS events of the measured descriptor (spinning 50 us each) on
 * one color of worker 0, to the end. */
static void warm_up(const char *what)
{
    reset_load();
    /* the average needs its runs, whatever the scale */
    add_group_max(1, WARMUP_RUNS, WARMUP_RUNS, &d_measured);
    s.groups[0].spin_ns = MEASURED_SPIN_NS;
    s.cs[0].n = WARMUP_RUNS;
    post_load(0, 0);
    run_load(what, 0);
}

/* 0 on a handle that is not initialized, and before any run. */
START_TEST(measured_is_zero_before_any_run)
{
    mely_t none = {0};
    mely_handler_t h = {.name = "fresh"};
    ck_assert_uint_eq(mely_handler_measured(&none, &h), 0);
    init_two("all+measured", NULL);
    ck_assert_uint_eq(mely_handler_measured(&rt, &h), 0);
    ck_assert_uint_eq(mely_handler_measured(&rt, &d_measured), 0);
    ck_assert_uint_eq(mely_handler_measured(&rt, &d_annotated), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    ck_assert_uint_eq(mely_handler_measured(&rt, &d_measured), 0);
}
END_TEST

/*
 * Under a "measured" policy, an unannotated descriptor's cost is measured: a
 * moving average of its runs, so between half the cheapest and twice the
 * dearest run seen from inside the handler (the runtime's view adds only a
 * little around the handler). Then, with the cost known, the colors of that
 * handler are worthy and get stolen, while NULL-descriptor colors (which
 * count 0) never are.
 */
START_TEST(measured_costs_make_colors_worthy)
{
    static const char *const policies[] = {"timeleft+measured", "all+measured"};
    const char *policy = policies[_i];

    init_two(policy, NULL);
    warm_up(policy);
    uint64_t m = mely_handler_measured(&rt, &d_measured);
    ck_assert_msg(m > 0, "%s: %u runs, measured cost still 0", policy, WARMUP_RUNS);
#ifdef HAVE_TSC
    uint64_t lo = atomic_load(&s.tsc_min), hi = atomic_load(&s.tsc_max);
    ck_assert_uint_eq(atomic_load(&s.tsc_runs), WARMUP_RUNS);
    ck_assert_msg(m >= lo / 2 && m <= 2 * hi,
                  "%s: measured %" PRIu64 " cycles; the runs took %" PRIu64 "..%" PRIu64
                  " cycles seen from inside",
                  policy, m, lo, hi);
#else
    fprintf(stderr, "measured_costs_make_colors_worthy: no TSC here, the bounds are not checked\n");
#endif

    reset_load();
    add_group(NCOLORS / 2, 20, &d_measured);
    add_group(NCOLORS / 2, 20, NULL);
    s.groups[0].spin_ns = s.groups[1].spin_ns = MEASURED_SPIN_NS;
    post_load(0, 0);
    struct outcome o = run_load(policy, 0);
    ck_assert_msg(o.stolen[1] == 0, "%s: %u colors of NULL-descriptor events stolen", policy,
                  o.stolen[1]);
    ck_assert_msg(o.stolen[0] > 0,
                  "%s: no color of a handler measured at %" PRIu64 " cycles stolen (%" PRIu64
                  " attempts)",
                  policy, m, o.sum.steal_attempts);
    ck_assert_msg(o.sum.stolen_cycles > 0, "%s: measured events stolen, stolen_cycles 0", policy);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* Without "measured" in the policy nothing is measured (and under "timeleft"
 * the unannotated handler's colors stay unworthy); with it, annotated
 * descriptors are not measured either. */
static const char *const unmeasured_policies[] = {NULL, "base", "timeleft", "all", "legacy:base"};

START_TEST(measured_only_under_measured_policies)
{
    const char *policy = unmeasured_policies[_i];
    const char *engine = NULL;
    if (policy && strncmp(policy, "legacy:", 7) == 0) {
        engine = "legacy";
        policy += 7;
    }
    const char *what = policy ? policy : "off";

    init_two(policy, engine);
    warm_up(what);
    ck_assert_msg(mely_handler_measured(&rt, &d_measured) == 0,
                  "%s%s: measured %" PRIu64 " cycles without a \"measured\" policy",
                  engine ? "legacy engine, " : "", what, mely_handler_measured(&rt, &d_measured));
    if (policy && strcmp(policy, "timeleft") == 0) {
        reset_load();
        add_group(NCOLORS, 20, &d_measured);
        post_load(0, 0);
        struct outcome o = run_load(what, 0);
        ck_assert_msg(o.sum.steals == 0, "timeleft: %" PRIu64 " steals of unannotated colors",
                      o.sum.steals);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);

    /* An annotated descriptor is never measured, even under "measured". */
    init_two("all+measured", NULL);
    reset_load();
    add_group(4, 50, &d_annotated);
    post_load(0, 0);
    run_load("all+measured, annotated", 0);
    ck_assert_uint_eq(mely_handler_measured(&rt, &d_annotated), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* Descriptors may be const (mely.h): a "measured" policy measures a const
 * unannotated descriptor (in read-only memory) like any other. */
static const mely_handler_t d_const = {.name = "const, unannotated"};

static void const_leaf(void *arg)
{
    (void)arg;
    spin_ns(SPIN_NS);
    count_and_stop(NULL);
}

START_TEST(const_descriptor_under_measured)
{
    init_two("timeleft+measured", NULL);
    atomic_store(&ran, 0);
    stop_at = 200;
    for (unsigned i = 0; i < stop_at; i++)
        ck_assert_int_eq(
            mely_post_ex(&rt, i % 8, MELY_PRIO_DEFAULT, &d_const, const_leaf, NULL, 0), 0);
    run_bounded(&rt, 30, "events of a const descriptor");
    ck_assert_uint_eq(atomic_load(&ran), stop_at);
    ck_assert_uint_gt(mely_handler_measured(&rt, &d_const), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- waking a parked thief ---------------------------------------------------------- */

enum { THIEF_WAIT_MS = 5000, THIEF_COLORS = 4 };

static struct {
    atomic_bool blocker_running, stolen_ran;
    atomic_uint ran;
    unsigned expected;
    int blocker_worker;
    bool saw_steal;
} wt;

/* Keeps worker 0 busy until an event runs elsewhere (at most THIEF_WAIT_MS). */
static void blocker(void *arg)
{
    (void)arg;
    wt.blocker_worker = mely_current_worker();
    atomic_store(&wt.blocker_running, true);
    wt.saw_steal = wait_flag(&wt.stolen_ran, THIEF_WAIT_MS);
    if (atomic_fetch_add(&wt.ran, 1) + 1 == wt.expected)
        mely_stop(&rt);
}

static void stealable(void *arg)
{
    (void)arg;
    if (mely_current_worker() != 0)
        atomic_store(&wt.stolen_ran, true);
    if (atomic_fetch_add(&wt.ran, 1) + 1 == wt.expected)
        mely_stop(&rt);
}

static void *late_poster(void *arg)
{
    (void)arg;
    if (!wait_flag(&wt.blocker_running, 20000)) {
        note("the blocker did not start within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    sleep_us(50000); /* worker 1, with nothing to do and spin_us 0, parks */
    mely_stats_t st;
    if (mely_worker_stats(&rt, 1, &st) != 0 || st.parks == 0)
        note("worker 1 did not park in 50 ms (spin_us 0)");
    unsigned k = 0;
    for (mely_color_t c = 1; k < THIEF_COLORS; c++) {
        if (mely_color_owner(&rt, c) != 0)
            continue;
        k++;
        int err = mely_post_ex(&rt, c, MELY_PRIO_DEFAULT, &d_always, stealable, NULL, 0);
        if (err) {
            note("post: %s", mely_strerror(err));
            mely_stop(&rt);
            break;
        }
    }
    return NULL;
}

static const struct policy waking_policies[] = {
    {"base", NULL},         {"locality", NULL}, {"timeleft", NULL}, {"penalty", NULL},
    {"all+measured", NULL}, {"base", "legacy"},
};

/*
 * Work that becomes stealable after the thief parked must not wait for the
 * busy worker (doc/stealing.md, "Waking thieves"): worker 0 runs a handler
 * (of its pinned color) that waits for another event to run elsewhere;
 * worker 1 has parked; then a foreign thread posts always-worthy events of
 * four more colors to worker 0.
 * Worker 1 must wake, steal one and run it while the handler still waits.
 */
START_TEST(stealable_work_wakes_a_parked_thief)
{
    const struct policy *p = &waking_policies[_i];
    const char *what = policy_name(p);

    memset(&wt, 0, sizeof(wt));
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, 0, p->steal, p->engine);
    wt.expected = 1 + THIEF_COLORS;
    /* Pinned: worker 1, idle from the start, must not take the blocker itself. */
    ck_assert_int_eq(mely_post(&rt, MELY_COLOR_PINNED(0), blocker, NULL), 0);
    run_with_helper(&rt, late_poster, NULL, 60, what);
    ck_assert_uint_eq(atomic_load(&wt.ran), wt.expected);
    ck_assert_int_eq(wt.blocker_worker, 0);
    ck_assert_msg(wt.saw_steal,
                  "%s: worker 1 stayed parked for %u ms while worker 0 held stealable events",
                  what, THIEF_WAIT_MS);
    mely_stats_t st = stats_of(1);
    ck_assert_uint_gt(st.steals, 0);
    ck_assert_uint_gt(st.wakeups, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- the environment -------------------------------------------------------------------- */

/* MELY_STEAL wins over mely_config_t.steal, both ways. */
START_TEST(mely_steal_overrides_the_configuration)
{
    bool on = _i == 0;

    ck_assert_int_eq(setenv("MELY_STEAL", on ? "base" : "off", 1), 0);
    reset_load();
    init_two(on ? NULL : "base", NULL);
    unsetenv("MELY_STEAL");
    add_group(NCOLORS, 50, &d_always);
    post_load(0, 0);
    struct outcome o = run_load(on ? "MELY_STEAL=base over off" : "MELY_STEAL=off over base", 0);
    if (on)
        ck_assert_msg(o.sum.steals > 0, "MELY_STEAL=base (configuration: off): no steal");
    else
        ck_assert_msg(o.sum.steals == 0, "MELY_STEAL=off (configuration: base): %" PRIu64 " steals",
                      o.sum.steals);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

START_TEST(unknown_policy_is_refused)
{
    mely_config_t cfg;
    mely_t m = {0};
    mely_config_init(&cfg);
    cfg.steal = "greedy";
    ck_assert_int_eq(mely_init(&m, &cfg), MELY_EINVAL);
    ck_assert_int_eq(mely_workers(&m), 0);
    setenv("MELY_STEAL", "nope", 1);
    cfg.steal = NULL;
    ck_assert_int_eq(mely_init(&m, &cfg), MELY_EINVAL);
    setenv("MELY_STEAL", "base", 1);
    ck_assert_int_eq(mely_init(&m, &cfg), 0);
    unsetenv("MELY_STEAL");
    ck_assert_int_eq(mely_shutdown(&m), 0);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("steal");
    TCase *tc = new_tcase(su, "steal", 120);
    tcase_add_loop_test(tc, idle_worker_steals_and_invariants_hold, 0, NELEM(stealing_policies));
    tcase_add_loop_test(tc, stolen_cycles_add_up_the_annotations, 0, NELEM(d_sized));
    tcase_add_loop_test(tc, unannotated_handlers_count_nothing, 0, NELEM(unannotated_cases));
    tcase_add_loop_test(tc, no_stealing_when_off, 0, 3);
    tcase_add_loop_test(tc, a_lone_running_color_stays, 0, NELEM(stealing_policies));
    tcase_add_loop_test(tc, many_thieves_one_victim, 0, NELEM(crowd_policies));
    tcase_add_loop_test(tc, one_worker_has_no_victim, 0, NELEM(stealing_policies));

    tc = new_tcase(su, "heuristics", 120);
    tcase_add_loop_test(tc, timeleft_steals_only_worthy_colors, 0, NELEM(timeleft_policies));
    tcase_add_loop_test(tc, penalty_keeps_penalized_colors, 0, NELEM(penalty_policies));
    tcase_add_loop_test(tc, penalty_matters_only_under_penalty, 0, NELEM(penalized_only_cases));
    tcase_add_test(tc, measured_is_zero_before_any_run);
    tcase_add_loop_test(tc, measured_costs_make_colors_worthy, 0, 2);
    tcase_add_loop_test(tc, measured_only_under_measured_policies, 0, NELEM(unmeasured_policies));
    tcase_add_test(tc, const_descriptor_under_measured);

    tc = new_tcase(su, "wake", 60);
    tcase_add_loop_test(tc, stealable_work_wakes_a_parked_thief, 0, NELEM(waking_policies));

    tc = new_tcase(su, "config", 60);
    tcase_add_loop_test(tc, mely_steal_overrides_the_configuration, 0, 2);
    tcase_add_test(tc, unknown_policy_is_refused);
    return mely_test_main(su);
}
