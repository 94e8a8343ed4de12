/* SPDX-License-Identifier: MIT */
/*
 * check_steal.c: work stealing through the public API (include/mely/mely.h), in the
 * scene of the paper's microbenchmarks (tests/api/stealload.h): all the work
 * starts on worker 0 and the other workers are idle, so they run the steal
 * driver. For every policy (and libasync-smp's, on the legacy engine):
 *  - steals happen, and the invariants hold meanwhile: every event runs once,
 *    one color never on two workers at once, each color in post order, a
 *    running color never moves (its handler finds itself on the worker the
 *    map names), pinned colors never leave their worker; also with seven
 *    thieves on one victim, and nothing is stolen with one worker or with
 *    stealing off;
 *  - the steal statistics are consistent: steals <= attempts, a median once
 *    there were steals (0 before), stolen_cycles the sum of the stolen events'
 *    expected cycles (0 for unannotated handlers; rounded to 32 cycles and
 *    capped at 2,097,120 per event, as mely.h says);
 *  - work that becomes stealable wakes a parked thief; so does a cheap
 *    color that has waited behind a busy owner longer than a steal costs
 *    (the time-left policies' waiting rule), and a color whose events count
 *    nothing is never taken for its waiting;
 *  - MELY_STEAL wins over the configuration.
 * What each heuristic takes and leaves (time-left, penalty, measured costs)
 * is checked in check_heuristics.c. Outcomes never depend on timing: "never
 * stolen" holds whatever the timing, and "stolen" only needs one steal among
 * dozens of chances.
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

#include <mely/mely.h>
#include "tests/api/stealload.h"
#include "tests/testutil.h"

/* ---- every policy: steals happen, invariants hold ---------------------------------------- */


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
    for (unsigned c = 0; c < ld.ncolors; c++)
        ck_assert_int_eq(mely_color_owner(&rt, ld.color[c]), 0);
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
        ck_assert_int_eq(atomic_load(&ld.cs[0].worker_mask), 1);
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

/* ---- waking a parked thief ---------------------------------------------------------- */

enum { THIEF_WAIT_MS = 5000, THIEF_COLORS = 4 };

static struct {
    atomic_bool blocker_running, stolen_ran;
    atomic_uint ran;
    unsigned expected;
    int blocker_worker;
    bool saw_steal;
    unsigned wait_ms;          /* how long the blocker waits for a steal */
    mely_handler_t *desc;      /* the late poster's events */
    unsigned gap_us;           /* between its posts */
} wt;

/* Keeps worker 0 busy until an event runs elsewhere (at most wt.wait_ms). */
static void blocker(void *arg)
{
    (void)arg;
    wt.blocker_worker = mely_current_worker();
    atomic_store(&wt.blocker_running, true);
    wt.saw_steal = wait_flag(&wt.stolen_ran, wt.wait_ms);
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
    /* Worker 1, with nothing to do and spin_us 0, parks: at once on an idle
     * machine, later on a loaded one (CI runs two test programs at a time). */
    mely_stats_t st;
    uint64_t end = now_ns() + 5000000000u;
    while ((mely_worker_stats(&rt, 1, &st) != 0 || st.parks == 0) && now_ns() < end)
        sleep_us(1000);
    if (st.parks == 0)
        note("worker 1 did not park in 5 s (spin_us 0)");
    sleep_us(10000); /* and is asleep in its poller, not just counted */
    unsigned k = 0;
    for (mely_color_t c = 1; k < THIEF_COLORS; c++) {
        if (mely_color_owner(&rt, c) != 0)
            continue;
        if (k++ != 0 && wt.gap_us != 0)
            sleep_us(wt.gap_us);
        int err = mely_post_ex(&rt, c, MELY_PRIO_DEFAULT, wt.desc, stealable, NULL, 0);
        if (err) {
            note("post: %s", mely_strerror(err));
            mely_stop(&rt);
            break;
        }
    }
    return NULL;
}

/* Runs the scene: worker 0 in the blocker (its pinned color), worker 1
 * parked, then the late poster's THIEF_COLORS events of `desc`, `gap_us`
 * apart, on colors of worker 0. */
static void run_blocked_owner(const struct policy *p, mely_handler_t *desc, unsigned gap_us,
                              unsigned wait_ms)
{
    memset(&wt, 0, sizeof(wt));
    wt.desc = desc;
    wt.gap_us = gap_us;
    wt.wait_ms = wait_ms;
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, 0, p->steal, p->engine);
    wt.expected = 1 + THIEF_COLORS;
    /* Pinned: worker 1, idle from the start, must not take the blocker itself. */
    ck_assert_int_eq(mely_post(&rt, MELY_COLOR_PINNED(0), blocker, NULL), 0);
    run_with_helper(&rt, late_poster, NULL, 60, policy_name(p));
    ck_assert_uint_eq(atomic_load(&wt.ran), wt.expected);
    ck_assert_int_eq(wt.blocker_worker, 0);
    assert_no_notes();
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

    run_blocked_owner(p, &d_always, 0, THIEF_WAIT_MS);
    ck_assert_msg(wt.saw_steal,
                  "%s: worker 1 stayed parked for %u ms while worker 0 held stealable events",
                  what, THIEF_WAIT_MS);
    mely_stats_t st = stats_of(&rt, 1);
    ck_assert_uint_gt(st.steals, 0);
    ck_assert_uint_gt(st.wakeups, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- the waiting rule (time-left policies) ------------------------------------------- */

static const struct policy waiting_policies[] = {
    {"timeleft", NULL}, {"penalty", NULL}, {"all", NULL}, {"locality+timeleft", NULL},
    {"all+measured", NULL},
};

/* Cheap: 1,000 cycles, below any steal's cost (the runtime starts its
 * estimate at 1,500 cycles and no steal happened before), so never worthy
 * on its time-left; above what a steal holds the owner's lock (500 at the
 * start). */
static mely_handler_t d_cheap_wait = {.name = "cheap, waiting", .timeleft = 1000};
static mely_handler_t d_nothing = {.name = "counts nothing", .timeleft = 1};

/*
 * A cheap color whose queue waits behind a busy owner is stolen (stealq.h's
 * waiting rule): worker 0 is held in a handler until an event runs
 * elsewhere, worker 1 has parked, and a foreign thread posts a cheap event
 * to each of four colors of worker 0, 2 ms apart: when the second color
 * starts waiting, the first has waited 2 ms, far longer than a steal. No
 * timing decides the outcome: the owner stays blocked until the steal (or 5
 * s), and only the waiting rule can move a cheap color (time-left alone
 * never wakes the thief for one).
 */
START_TEST(cheap_color_that_waited_is_stolen)
{
    const struct policy *p = &waiting_policies[_i];
    const char *what = policy_name(p);

    run_blocked_owner(p, &d_cheap_wait, 2000, THIEF_WAIT_MS);
    ck_assert_msg(wt.saw_steal,
                  "%s: cheap colors waited %u ms behind a blocked owner, never stolen", what,
                  THIEF_WAIT_MS);
    mely_stats_t st = stats_of(&rt, 1);
    ck_assert_uint_gt(st.steals, 0);
    ck_assert_msg(sums_to(st.stolen_cycles, st.stolen_events, d_cheap_wait.timeleft),
                  "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64, what, st.stolen_events,
                  st.stolen_cycles);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/*
 * Waiting alone is not enough: colors whose events count nothing (time-left
 * 1 cycle, 0 once rounded) wait as long behind the blocked owner (200 ms
 * here) and are never stolen, whatever the timing.
 */
START_TEST(color_worth_nothing_stays_however_long_it_waits)
{
    const struct policy *p = &waiting_policies[_i];
    const char *what = policy_name(p);

    run_blocked_owner(p, &d_nothing, 2000, 200);
    ck_assert_msg(!wt.saw_steal, "%s: a color worth nothing ran on worker 1", what);
    mely_stats_t st = stats_of(&rt, 1);
    ck_assert_msg(st.steals == 0, "%s: %" PRIu64 " steals", what, st.steals);
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
    tcase_add_loop_test(tc, no_stealing_when_off, 0, 3);
    tcase_add_loop_test(tc, a_lone_running_color_stays, 0, NELEM(stealing_policies));
    tcase_add_loop_test(tc, many_thieves_one_victim, 0, NELEM(crowd_policies));
    tcase_add_loop_test(tc, one_worker_has_no_victim, 0, NELEM(stealing_policies));

    tc = new_tcase(su, "wake", 60);
    tcase_add_loop_test(tc, stealable_work_wakes_a_parked_thief, 0, NELEM(waking_policies));
    tcase_add_loop_test(tc, cheap_color_that_waited_is_stolen, 0, NELEM(waiting_policies));
    tcase_add_loop_test(tc, color_worth_nothing_stays_however_long_it_waits, 0,
                        NELEM(waiting_policies));

    tc = new_tcase(su, "config", 60);
    tcase_add_loop_test(tc, mely_steal_overrides_the_configuration, 0, 2);
    tcase_add_test(tc, unknown_policy_is_refused);
    return mely_test_main(su);
}
