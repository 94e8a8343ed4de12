/*
 * check_steal.c: work stealing through the public API. All the work starts on
 * worker 0 and worker 1 is idle, so it must steal; meanwhile the invariants
 * still hold: every event runs once, one color never on two workers at once,
 * each color in post order, pinned colors never leave their worker, and the
 * color map follows the stolen colors.
 */
#include <stdlib.h>

#include <string.h>

#include "tests/testutil.h"

enum { NCOLORS = 64, PER_COLOR = 200, SPIN_NS = 20000 };

struct color_state {
    atomic_int inside;   /* handlers of this color running now */
    unsigned next;       /* the sequence number expected next (one color at a time) */
    atomic_int worker_mask;
};

static struct {
    mely_color_t color[NCOLORS];
    struct color_state cs[NCOLORS];
    unsigned seq[NCOLORS][PER_COLOR];
    atomic_uint done;
    unsigned total;
    atomic_uint pinned_ran, pinned_elsewhere;
} s;

static void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end) /* bounded by the clock */
        ;
}

static void colored(void *arg)
{
    unsigned *seq = arg;
    unsigned c = (unsigned)(seq - &s.seq[0][0]) / PER_COLOR;
    struct color_state *cs = &s.cs[c];

    if (atomic_fetch_add(&cs->inside, 1) != 0)
        note("color %u: two handlers at once", s.color[c]);
    if (*seq != cs->next)
        note("color %u: event %u ran when %u was due", s.color[c], *seq, cs->next);
    cs->next = *seq + 1;
    atomic_fetch_or(&cs->worker_mask, 1 << mely_current_worker());
    spin_ns(SPIN_NS);
    atomic_fetch_sub(&cs->inside, 1);
    if (atomic_fetch_add(&s.done, 1) + 1 == s.total)
        mely_stop(&rt);
}

static void pinned(void *arg)
{
    (void)arg;
    atomic_fetch_add(&s.pinned_ran, 1);
    if (mely_current_worker() != 0)
        atomic_fetch_add(&s.pinned_elsewhere, 1);
    spin_ns(SPIN_NS);
    if (atomic_fetch_add(&s.done, 1) + 1 == s.total)
        mely_stop(&rt);
}

/* Posts PER_COLOR events to each of NCOLORS colors of worker 0, interleaved,
 * plus `npinned` events of worker 0's pinned color. */
static void post_all(unsigned npinned)
{
    unsigned k = 0;
    for (mely_color_t c = 0; k < NCOLORS; c++)
        if (mely_color_owner(&rt, c) == 0)
            s.color[k++] = c;
    for (unsigned i = 0; i < PER_COLOR; i++) {
        for (unsigned c = 0; c < NCOLORS; c++) {
            s.seq[c][i] = i;
            ck_assert_int_eq(mely_post(&rt, s.color[c], colored, &s.seq[c][i]), 0);
        }
        if (i < npinned)
            ck_assert_int_eq(mely_post(&rt, MELY_COLOR_PINNED(0), pinned, NULL), 0);
    }
    s.total = NCOLORS * PER_COLOR + npinned;
}

static mely_stats_t stats_of(unsigned w)
{
    mely_stats_t st;
    ck_assert_int_eq(mely_worker_stats(&rt, w, &st), 0);
    return st;
}

static const char *const policies[] = {"base", "locality"};

START_TEST(idle_worker_steals_and_invariants_hold)
{
    memset(&s, 0, sizeof(s));
    init_runtime_steal(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, policies[_i]);
    post_all(PER_COLOR);
    run_bounded(&rt, 60, "stealing run");
    assert_no_notes();

    ck_assert_uint_eq(atomic_load(&s.done), s.total);
    for (unsigned c = 0; c < NCOLORS; c++)
        ck_assert_uint_eq(s.cs[c].next, PER_COLOR);
    ck_assert_uint_eq(atomic_load(&s.pinned_ran), PER_COLOR);
    ck_assert_uint_eq(atomic_load(&s.pinned_elsewhere), 0);

    mely_stats_t w1 = stats_of(1);
    ck_assert_uint_gt(w1.steals, 0);
    ck_assert_uint_ge(w1.steal_attempts, w1.steals);
    ck_assert_uint_gt(w1.stolen_events, 0);
    ck_assert_uint_gt(w1.steal_cycles, 0);
    ck_assert_uint_gt(w1.events_run, 0);
    ck_assert_uint_eq(stats_of(0).events_run + w1.events_run, s.total);

    /* The map followed the moves: some colors now belong to worker 1, and
     * those ran there. */
    unsigned moved = 0;
    for (unsigned c = 0; c < NCOLORS; c++) {
        if (mely_color_owner(&rt, s.color[c]) == 1) {
            moved++;
            ck_assert(atomic_load(&s.cs[c].worker_mask) & 2);
        }
    }
    ck_assert_uint_gt(moved, 0);
    ck_assert_int_eq(mely_color_owner(&rt, MELY_COLOR_PINNED(0)), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

START_TEST(no_stealing_when_off)
{
    memset(&s, 0, sizeof(s));
    init_runtime_steal(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL);
    post_all(0);
    run_bounded(&rt, 60, "run without stealing");
    assert_no_notes();
    ck_assert_uint_eq(stats_of(1).steals, 0);
    ck_assert_uint_eq(stats_of(1).events_run, 0);
    for (unsigned c = 0; c < NCOLORS; c++)
        ck_assert_int_eq(mely_color_owner(&rt, s.color[c]), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* A single busy color cannot be stolen from under its running handler: with
 * one color, base never finds a victim (it needs two colors). */
START_TEST(a_lone_running_color_stays)
{
    memset(&s, 0, sizeof(s));
    init_runtime_steal(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, "base");
    s.color[0] = 0;
    for (unsigned i = 0; i < PER_COLOR; i++) {
        s.seq[0][i] = i;
        ck_assert_int_eq(mely_post(&rt, 0, colored, &s.seq[0][i]), 0);
    }
    s.total = PER_COLOR;
    run_bounded(&rt, 60, "one color");
    assert_no_notes();
    ck_assert_uint_eq(s.cs[0].next, PER_COLOR);
    ck_assert_uint_eq(stats_of(1).steals, 0);
    ck_assert_int_eq(atomic_load(&s.cs[0].worker_mask), 1);
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
    tcase_add_loop_test(tc, idle_worker_steals_and_invariants_hold, 0, NELEM(policies));
    tcase_add_test(tc, no_stealing_when_off);
    tcase_add_test(tc, a_lone_running_color_stays);
    tcase_add_test(tc, unknown_policy_is_refused);
    return mely_test_main(su);
}
