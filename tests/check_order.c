/*
 * check_order.c: the runtime's run orders and parallelism (doc: DESIGN.md,
 * "Invariants"), checked through the public API only (mely/mely.h):
 *  - events posted at the head run before the color's pending events, the
 *    last head post first, before mely_run() and from a handler of the color;
 *  - color-queues are served from the highest priority down, whether posted
 *    before the run or from a handler, and a color's events keep their order;
 *  - different colors run in parallel.
 * Each order test runs with a same-color batch of 1 and of 10.
 *
 * Handlers never call ck_assert and every wait is bounded (see
 * tests/testutil.h). When a watchdog has to stop a runtime, the test fails
 * saying how far it got.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mely/mely.h"
#include "tests/testutil.h"

/* ---- different colors run in parallel ------------------------------------------- */

static struct {
    mely_t m;
    atomic_bool started[2];
    bool saw[2];
    int worker[2];
    atomic_uint finished;
} par;

/* Each of two handlers announces itself, then waits (at most 2 s) to see the
 * other one running: with two free workers they must overlap. Run one after
 * the other, the first would wait in vain. */
static void par_handler(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    uint64_t deadline = now_ns() + 2000000000u;
    bool saw;

    par.worker[me] = mely_current_worker();
    atomic_store(&par.started[me], true);
    while (!(saw = atomic_load(&par.started[1 - me])) && now_ns() < deadline) {
    }
    par.saw[me] = saw;
    if (atomic_fetch_add(&par.finished, 1) + 1 == 2)
        mely_stop(&par.m);
}

static void run_pair(mely_color_t a, mely_color_t b)
{
    atomic_store(&par.started[0], false);
    atomic_store(&par.started[1], false);
    atomic_store(&par.finished, 0);
    par.saw[0] = par.saw[1] = false;
    ck_assert_int_eq(mely_post(&par.m, a, par_handler, (void *)(uintptr_t)0), 0);
    ck_assert_int_eq(mely_post(&par.m, b, par_handler, (void *)(uintptr_t)1), 0);

    struct watchdog wd;
    watchdog_start(&wd, &par.m, 20);
    int rc = mely_run(&par.m);
    bool fired = watchdog_end(&wd);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(!fired, "colors %u and %u: handlers not done after 20 s", a, b);
    ck_assert_msg(par.saw[0] && par.saw[1],
                  "colors %u and %u (owners %d, %d) did not run in parallel: the handler on "
                  "worker %d saw the other: %d; the one on worker %d: %d",
                  a, b, mely_color_owner(&par.m, a), mely_color_owner(&par.m, b), par.worker[0],
                  par.saw[0], par.worker[1], par.saw[1]);
}

START_TEST(different_colors_run_in_parallel)
{
    reset_notes();
    init_runtime(&par.m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);

    mely_color_t a = 10, b = a + 1;
    int oa = mely_color_owner(&par.m, a);
    ck_assert_int_ge(oa, 0);
    while (b < MELY_COLORS && mely_color_owner(&par.m, b) == oa)
        b++;
    ck_assert_msg(b < MELY_COLORS, "every color is owned by worker %d", oa);
    run_pair(a, b);
    run_pair(MELY_COLOR_PINNED(0), MELY_COLOR_PINNED(1));
    ck_assert_int_eq(mely_shutdown(&par.m), 0);
}
END_TEST

/* ---- head posts and priorities: exact run orders ---------------------------------- */

enum { MAX_ORDER = 32 };

static struct {
    mely_t m;
    atomic_uint n;
    unsigned expected;
    int order[MAX_ORDER]; /* written by handlers that never overlap (see callers) */
    mely_color_t color;   /* for self_poster */
} rec;

static void record(void *arg)
{
    unsigned k = atomic_fetch_add(&rec.n, 1);
    if (k < MAX_ORDER)
        rec.order[k] = (int)(intptr_t)arg;
    if (k + 1 == rec.expected)
        mely_stop(&rec.m);
}

static void post_or_note(mely_color_t color, int prio, int id, unsigned flags)
{
    int err = mely_post_ex(&rec.m, color, prio, NULL, record, (void *)(intptr_t)id, flags);
    if (err)
        note("post of %d to color %u: %s", id, color, mely_strerror(err));
}

/* Runs rec.m until `n` events were recorded and checks their order. */
static void run_expect(const int *want, unsigned n, const char *what)
{
    struct watchdog wd;

    rec.expected = n;
    watchdog_start(&wd, &rec.m, 20);
    int rc = mely_run(&rec.m);
    bool fired = watchdog_end(&wd);
    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "%s: only %u of %u events ran in 20 s", what, atomic_load(&rec.n), n);
    ck_assert_uint_eq(atomic_load(&rec.n), n);

    char got[256] = "", exp[256] = "";
    for (unsigned i = 0; i < n; i++) {
        snprintf(got + strlen(got), sizeof(got) - strlen(got), " %d", rec.order[i]);
        snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), " %d", want[i]);
    }
    ck_assert_msg(memcmp(rec.order, want, n * sizeof(*want)) == 0, "%s: ran%s, expected%s", what,
                  got, exp);
    atomic_store(&rec.n, 0);
}

static const unsigned batches[] = {1, 10};

/* Before mely_run(): T1..T5 at the tail, then H1 and H2 at the head: each head
 * post goes to the very front, so H2, H1, T1..T5. */
START_TEST(head_posts_run_first)
{
    reset_notes();
    init_runtime(&rec.m, 2, 1, batches[_i], MELY_SPIN_US_DEFAULT);
    const mely_color_t c = 77;
    for (int t = 1; t <= 5; t++)
        ck_assert_int_eq(mely_post(&rec.m, c, record, (void *)(intptr_t)t), 0);
    ck_assert_int_eq(mely_post_head(&rec.m, c, record, (void *)(intptr_t)101), 0);
    ck_assert_int_eq(mely_post_ex(&rec.m, c, MELY_PRIO_DEFAULT, NULL, record,
                                  (void *)(intptr_t)102, MELY_POST_HEAD),
                     0);
    const int want[] = {102, 101, 1, 2, 3, 4, 5};
    run_expect(want, 7, "head posts before mely_run()");
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

/* S runs with T1, T2 of its color still pending and posts X at the tail, then
 * Y at the head: Y goes before every pending event of the color, X after all. */
static void self_poster(void *arg)
{
    record(arg);
    post_or_note(rec.color, MELY_PRIO_DEFAULT, 90, 0);
    post_or_note(rec.color, MELY_PRIO_DEFAULT, 91, MELY_POST_HEAD);
}

START_TEST(head_post_from_own_handler_runs_next)
{
    reset_notes();
    init_runtime(&rec.m, 2, 1, batches[_i], MELY_SPIN_US_DEFAULT);
    /* one color on each worker */
    for (rec.color = 300; rec.color < 302; rec.color++) {
        ck_assert_int_eq(mely_post(&rec.m, rec.color, self_poster, (void *)(intptr_t)50), 0);
        ck_assert_int_eq(mely_post(&rec.m, rec.color, record, (void *)(intptr_t)1), 0);
        ck_assert_int_eq(mely_post(&rec.m, rec.color, record, (void *)(intptr_t)2), 0);
        const int want[] = {50, 91, 1, 2, 90};
        run_expect(want, 5, "tail X then head Y posted by a handler of the color");
    }
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

/* With one worker, color-queues are served from the highest priority down,
 * whatever the order of posting. */
START_TEST(priorities_order_color_queues)
{
    reset_notes();
    init_runtime(&rec.m, 1, 1, batches[_i], MELY_SPIN_US_DEFAULT);
    const mely_color_t a = 1, b = 2, c = 3;

    post_or_note(a, 0, 'A', 0);
    post_or_note(b, 5, 'B', 0);
    post_or_note(c, 3, 'C', 0);
    const int want1[] = {'B', 'C', 'A'};
    run_expect(want1, 3, "A at 0, B at 5, C at 3");

    /* A color-queue takes the highest priority among its events, and its
     * events keep their post order. */
    post_or_note(a, 0, 'A', 0);
    post_or_note(b, 5, 'B', 0);
    post_or_note(c, 3, 'C', 0);
    post_or_note(a, MELY_PRIO_MAX, 'a', 0);
    const int want2[] = {'A', 'a', 'B', 'C'};
    run_expect(want2, 4, "A at 0, B at 5, C at 3, then A at 7");
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

static void prio_poster(void *arg)
{
    record(arg);
    post_or_note(1, 0, 'A', 0);
    post_or_note(2, 5, 'B', 0);
    post_or_note(3, 3, 'C', 0);
}

START_TEST(priorities_order_posts_from_a_handler)
{
    reset_notes();
    init_runtime(&rec.m, 1, 1, batches[_i], MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rec.m, 9, prio_poster, (void *)(intptr_t)'S'), 0);
    const int want[] = {'S', 'B', 'C', 'A'};
    run_expect(want, 4, "a handler posts A at 0, B at 5, C at 3");
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------ */

/* new_tcase()'s fixture clears MELY_* overrides from the caller's environment
 * before each test: the tests choose their runtime shapes. */
int main(void)
{
    Suite *s = suite_create("order");

    TCase *tc = new_tcase(s, "parallel", 60);
    tcase_add_test(tc, different_colors_run_in_parallel);

    tc = new_tcase(s, "order", 60);
    tcase_add_loop_test(tc, head_posts_run_first, 0, 2);
    tcase_add_loop_test(tc, head_post_from_own_handler_runs_next, 0, 2);
    tcase_add_loop_test(tc, priorities_order_color_queues, 0, 2);
    tcase_add_loop_test(tc, priorities_order_posts_from_a_handler, 0, 2);
    return mely_test_main(s);
}
