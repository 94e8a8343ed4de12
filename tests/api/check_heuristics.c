/* SPDX-License-Identifier: MIT */
/*
 * check_heuristics.c: what each stealing heuristic takes and leaves, through
 * the public API (include/mely/mely.h), in the scene of tests/api/stealload.h (all the
 * work on worker 0, worker 1 idle), with the invariants checked on every run:
 *  - unannotated handlers count nothing: base's rules steal their colors,
 *    the time-left policies never do (NULL descriptors not even with
 *    "measured");
 *  - time-left: colors of never-worthy handlers (time-left 1 cycle) are never
 *    stolen, always-worthy ones (10,000,000 cycles) are;
 *  - penalty: colors are worthy on time-left alone and stolen in full, also
 *    heavily penalized ones when nothing else is worthy; an unpenalized
 *    worthy color is taken before a penalized one;
 *  - measured: mely_handler_measured() is 0 until a "measured" policy ran the
 *    handler, then near its real cost (also for a const descriptor); colors
 *    of measured handlers become worthy; nothing is measured otherwise;
 *    events posted without a descriptor are measured by handler function
 *    (mely_fn_measured), and once their function is known, their colors are
 *    worthy too.
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

#include <mely/mely.h>
#include "tests/api/stealload.h"
#include "tests/testutil.h"

/* ---- unannotated handlers -------------------------------------------------------------- */

/* What becomes of unannotated colors (half posted with a NULL descriptor,
 * half with a descriptor of time-left 0) under each policy. */
enum unannotated_expect {
    STOLEN,     /* base's rules: stolen, counting 0 cycles */
    NEVER,      /* time-left rules: they count 0, never worthy */
    NULL_NEVER, /* time-left rules with measured costs: the NULL-descriptor
                   colors count 0 (their function was not measured yet when
                   they were posted); the others may be measured (see below) */
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
 * The section 3.3 rule: worthiness on time-left alone, the penalty only to
 * choose among worthy colors (which color wins is check_stealq's unit test;
 * here, timing decides how many of each kind go). Colors of time-left
 * 100,000 cycles with penalty 100,000, 0 or 1 are all worthy: unpenalized
 * ones are stolen, and every stolen event counts its full time-left, never
 * time-left / penalty.
 */
/* Half the colors of d_cheap (group 0), a quarter each of d_dear0 and
 * d_dear1, all of time-left 100,000, run under `policy`: unpenalized colors
 * are stolen, and every stolen event counts its full time-left. */
static struct outcome run_mixed_penalties(const char *policy)
{
    reset_load();
    init_two(policy, NULL);
    add_group_max(NCOLORS / 2, 50, 50, &d_cheap); /* at most 50 events, whatever the scale */
    add_group(NCOLORS / 4, 50, &d_dear0);
    add_group(NCOLORS / 4, 50, &d_dear1);
    post_load(0, 20);
    struct outcome o = run_load(policy, 20);
    ck_assert_msg(o.stolen[1] + o.stolen[2] > 0,
                  "%s: no color of penalty 0 or 1 stolen (%" PRIu64 " attempts)", policy,
                  o.sum.steal_attempts);
    ck_assert_msg(sums_to(o.sum.stolen_cycles, o.sum.stolen_events, PENALTY_CYCLES),
                  "%s: %" PRIu64 " events stolen, stolen_cycles %" PRIu64 ", expected %u each",
                  policy, o.sum.stolen_events, o.sum.stolen_cycles, PENALTY_CYCLES);
    return o;
}

START_TEST(penalty_steals_on_time_left)
{
    run_mixed_penalties(penalty_policies[_i]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* Only penalized colors, worthy on time-left: every time-left policy steals
 * them, counting their full time-left ("penalty" too: nothing better is
 * worthy). */
static const struct {
    const char *steal;
    bool stolen;
} penalized_only_cases[] = {
    {"timeleft", true}, {"locality+timeleft", true}, {"timeleft+measured", true},
    {"penalty", true},  {"all", true},
};

START_TEST(penalized_colors_alone)
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

/*
 * The section 3.3 choice, deterministic: before the run, worker 0 holds two
 * worthy colors of the same expected time, one of penalty 100,000 (A) and one
 * unpenalized (B), and a blocker color that keeps worker 0 busy until an
 * event has run on worker 1. Only stolen colors run there, the first one
 * stolen first: that is B, under every penalty policy.
 */
enum { COLOR_A = 2, COLOR_B = 4, COLOR_BLOCKER = 6, CHOICE_EVENTS = 20 };
static atomic_int first_on_1; /* the color of the first event run on worker 1 */

static void choice_event(void *arg)
{
    int expected = 0;
    if (mely_current_worker() == 1)
        atomic_compare_exchange_strong(&first_on_1, &expected, (int)(intptr_t)arg);
    spin_ns(100000);
}

static void blocker(void *arg)
{
    (void)arg;
    uint64_t deadline = now_ns() + 10000000000ull;
    while (atomic_load(&first_on_1) == 0 && now_ns() < deadline)
        ;
    mely_stop(&rt);
}

START_TEST(penalty_takes_the_unpenalized_color_first)
{
    const char *policy = penalty_policies[_i];

    init_two(policy, NULL);
    atomic_store(&first_on_1, 0);
    ck_assert_int_eq(mely_color_owner(&rt, COLOR_BLOCKER), 0);
    ck_assert_int_eq(mely_post(&rt, COLOR_BLOCKER, blocker, NULL), 0);
    for (int i = 0; i < CHOICE_EVENTS; i++) {
        /* A last: first in its interval, where time-left would take it */
        ck_assert_int_eq(mely_post_ex(&rt, COLOR_B, MELY_PRIO_DEFAULT, &d_dear0, choice_event,
                                      (void *)(intptr_t)COLOR_B, 0), 0);
        ck_assert_int_eq(mely_post_ex(&rt, COLOR_A, MELY_PRIO_DEFAULT, &d_cheap, choice_event,
                                      (void *)(intptr_t)COLOR_A, 0), 0);
    }
    run_bounded(&rt, 30, policy);
    ck_assert_msg(atomic_load(&first_on_1) == COLOR_B,
                  "%s: the first color stolen is %d, not the unpenalized %d", policy,
                  atomic_load(&first_on_1), COLOR_B);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- measured costs ---------------------------------------------------------------------- */

enum { MEASURED_SPIN_NS = 50000, WARMUP_RUNS = 200 };

/* Runs WARMUP_RUNS events of descriptor `desc` (NULL: none; spinning 50 us
 * each) on one color of worker 0, to the end. */
static void warm_up_desc(const char *what, mely_handler_t *desc)
{
    reset_load();
    /* the average needs its runs, whatever the scale */
    add_group_max(1, WARMUP_RUNS, WARMUP_RUNS, desc);
    ld.groups[0].spin_ns = MEASURED_SPIN_NS;
    ld.cs[0].n = WARMUP_RUNS;
    post_load(0, 0);
    run_load(what, 0);
}

static void warm_up(const char *what)
{
    warm_up_desc(what, &d_measured);
}

/* Whether `m` cycles lies between half the cheapest and twice the dearest run
 * the handlers saw from inside (the runtime's view adds a little around them). */
static void check_measured_bounds(const char *what, uint64_t m)
{
#if HAVE_TSC
    uint64_t lo = atomic_load(&ld.tsc_min), hi = atomic_load(&ld.tsc_max);
    ck_assert_uint_eq(atomic_load(&ld.tsc_runs), WARMUP_RUNS);
    ck_assert_msg(m >= lo / 2 && m <= 2 * hi,
                  "%s: measured %" PRIu64 " cycles; the runs took %" PRIu64 "..%" PRIu64
                  " cycles seen from inside",
                  what, m, lo, hi);
#else
    (void)what;
    (void)m;
    fprintf(stderr, "no TSC here: measured costs are not checked against the runs\n");
#endif
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
 * handler are worthy and get stolen, while NULL-descriptor colors never are:
 * they count their function's cost, and it was never measured before they
 * were posted (descriptors and functions are measured apart).
 */
static const char *const measured_policies[] = {"timeleft+measured", "all+measured"};

/* The colors of group g, whose handler was measured at m cycles, were stolen
 * and counted their measured cost. */
static void check_measured_stolen(const char *policy, const struct outcome *o, unsigned g,
                                  uint64_t m)
{
    ck_assert_msg(o->stolen[g] > 0,
                  "%s: no color of a handler measured at %" PRIu64 " cycles stolen (%" PRIu64
                  " attempts)",
                  policy, m, o->sum.steal_attempts);
    ck_assert_msg(o->sum.stolen_cycles > 0, "%s: measured events stolen, stolen_cycles 0", policy);
}

START_TEST(measured_costs_make_colors_worthy)
{
    const char *policy = measured_policies[_i];

    init_two(policy, NULL);
    warm_up(policy);
    uint64_t m = mely_handler_measured(&rt, &d_measured);
    ck_assert_msg(m > 0, "%s: %u runs, measured cost still 0", policy, WARMUP_RUNS);
    check_measured_bounds(policy, m);
    ck_assert_msg(mely_fn_measured(&rt, colored) == 0,
                  "%s: the function measured though every run had a descriptor", policy);

    reset_load();
    add_group(NCOLORS / 2, 20, &d_measured);
    add_group(NCOLORS / 2, 20, NULL);
    ld.groups[0].spin_ns = ld.groups[1].spin_ns = MEASURED_SPIN_NS;
    post_load(0, 0);
    struct outcome o = run_load(policy, 0);
    ck_assert_msg(o.stolen[1] == 0, "%s: %u colors of NULL-descriptor events stolen", policy,
                  o.stolen[1]);
    check_measured_stolen(policy, &o, 0, m);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/*
 * Events posted without a descriptor (mely_post_ex with NULL, as mely_post)
 * are measured by handler function under a "measured" policy: after a
 * warm-up, mely_fn_measured() is near the cost of the runs, the descriptor
 * table is untouched, and colors of NULL-descriptor events posted then count
 * that cost, are worthy and get stolen.
 */
START_TEST(plain_posts_are_measured_by_function)
{
    const char *policy = measured_policies[_i];
    mely_t none = {0};

    ck_assert_uint_eq(mely_fn_measured(&none, colored), 0);
    init_two(policy, NULL);
    ck_assert_uint_eq(mely_fn_measured(&rt, colored), 0);
    ck_assert_uint_eq(mely_fn_measured(&rt, NULL), 0);
    warm_up_desc(policy, NULL);
    uint64_t m = mely_fn_measured(&rt, colored);
    ck_assert_msg(m > 0, "%s: %u plain runs, measured cost still 0", policy, WARMUP_RUNS);
    check_measured_bounds(policy, m);
    ck_assert_uint_eq(mely_handler_measured(&rt, &d_measured), 0);

    reset_load();
    add_group(NCOLORS, 20, NULL);
    ld.groups[0].spin_ns = MEASURED_SPIN_NS;
    post_load(0, 0);
    struct outcome o = run_load(policy, 0);
    check_measured_stolen(policy, &o, 0, m);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    ck_assert_uint_eq(mely_fn_measured(&rt, colored), 0);
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
    warm_up_desc(what, NULL);
    ck_assert_msg(mely_fn_measured(&rt, colored) == 0,
                  "%s%s: a function measured at %" PRIu64 " cycles without a \"measured\" policy",
                  engine ? "legacy engine, " : "", what, mely_fn_measured(&rt, colored));
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

int main(void)
{
    Suite *su = suite_create("heuristics");
    TCase *tc = new_tcase(su, "timeleft", 120);
    tcase_add_loop_test(tc, unannotated_handlers_count_nothing, 0, NELEM(unannotated_cases));
    tcase_add_loop_test(tc, timeleft_steals_only_worthy_colors, 0, NELEM(timeleft_policies));

    tc = new_tcase(su, "penalty", 120);
    tcase_add_loop_test(tc, penalty_steals_on_time_left, 0, NELEM(penalty_policies));
    tcase_add_loop_test(tc, penalty_takes_the_unpenalized_color_first, 0,
                        NELEM(penalty_policies));
    tcase_add_loop_test(tc, penalized_colors_alone, 0, NELEM(penalized_only_cases));

    tc = new_tcase(su, "measured", 120);
    tcase_add_test(tc, measured_is_zero_before_any_run);
    tcase_add_loop_test(tc, measured_costs_make_colors_worthy, 0, NELEM(measured_policies));
    tcase_add_loop_test(tc, plain_posts_are_measured_by_function, 0, NELEM(measured_policies));
    tcase_add_loop_test(tc, measured_only_under_measured_policies, 0, NELEM(unmeasured_policies));
    tcase_add_test(tc, const_descriptor_under_measured);
    return mely_test_main(su);
}
