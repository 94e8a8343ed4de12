/* SPDX-License-Identifier: MIT */
/*
 * check_order.c: the runtime's run orders and parallelism (doc/runtime.md,
 * "Invariants and where they are tested"), checked through the public API
 * only (include/mely/mely.h):
 *  - events posted at the head run before the color's pending events, the
 *    last head post first, before mely_run() and from a handler of the color;
 *  - color-queues are served from the highest priority down, whether posted
 *    before the run or from a handler, and a color's events keep their order;
 *  - different colors run in parallel;
 *  - head posts keep their place while steals move the colors (every shape).
 * Each order test runs with a same-color batch of 1 and of 10, on both
 * engines, except that the legacy engine has no priorities: the priority
 * tests skip it, saying so, and legacy_runs_in_post_order checks its FIFO.
 * Parallelism is checked in every runtime shape.
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

#include <mely/mely.h>
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
    watchdog_start(&wd, &par.m, 20, __func__);
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

/* In every shape: both engines, with and without stealing, 2 pinned and 8
 * unpinned workers (the two handlers overlap even when time-sliced). */
START_TEST(different_colors_run_in_parallel)
{
    reset_notes();
    init_runtime_shape(&par.m, &shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);

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
    watchdog_start(&wd, &rec.m, 20, __func__);
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

/* The order tests run with a batch of 1 and of 10, on both engines: case i
 * is batches[i % 2] on engines[i / 2]. */
static const unsigned batches[] = {1, 10};
static const char *const engines[] = {"mely", "legacy"};
enum { ORDER_CASES = 4 };

static unsigned case_batch(int i)
{
    return batches[i % 2];
}

static const char *case_engine(int i)
{
    return engines[i / 2];
}

/* The legacy engine is libasync-smp's one FIFO per core: it has no priorities
 * (it accepts and ignores them). A test of priority order says so and returns
 * on it; legacy_runs_in_post_order checks what it does instead. */
static bool skip_on_legacy(int i, const char *test)
{
    if (strcmp(case_engine(i), "legacy") != 0)
        return false;
    fprintf(stderr, "%s (batch %u): skipped on the legacy engine, which has no priorities\n",
            test, case_batch(i));
    return true;
}

static void init_order_runtime(unsigned workers, int i)
{
    init_runtime_engine(&rec.m, workers, 1, case_batch(i), MELY_SPIN_US_DEFAULT, NULL,
                        case_engine(i));
}

/* Before mely_run(): T1..T5 at the tail, then H1 and H2 at the head: each head
 * post goes to the very front, so H2, H1, T1..T5. */
START_TEST(head_posts_run_first)
{
    reset_notes();
    init_order_runtime(2, _i);
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
    init_order_runtime(2, _i);
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
    if (skip_on_legacy(_i, "priorities_order_color_queues"))
        return;
    reset_notes();
    init_order_runtime(1, _i);
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
    if (skip_on_legacy(_i, "priorities_order_posts_from_a_handler"))
        return;
    reset_notes();
    init_order_runtime(1, _i);
    ck_assert_int_eq(mely_post(&rec.m, 9, prio_poster, (void *)(intptr_t)'S'), 0);
    const int want[] = {'S', 'B', 'C', 'A'};
    run_expect(want, 4, "a handler posts A at 0, B at 5, C at 3");
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

/* The legacy engine ignores priorities: with one worker, its one FIFO runs
 * events of different colors in post order, whatever their priorities, both
 * those posted before the run and those a handler posts. */
START_TEST(legacy_runs_in_post_order)
{
    reset_notes();
    init_runtime_engine(&rec.m, 1, 1, batches[_i], MELY_SPIN_US_DEFAULT, NULL, "legacy");
    post_or_note(1, 0, 'A', 0);
    post_or_note(2, 5, 'B', 0);
    post_or_note(3, 3, 'C', 0);
    post_or_note(4, MELY_PRIO_MAX, 'D', 0);
    const int want1[] = {'A', 'B', 'C', 'D'};
    run_expect(want1, 4, "legacy: A at 0, B at 5, C at 3, D at 7");

    ck_assert_int_eq(mely_post(&rec.m, 9, prio_poster, (void *)(intptr_t)'S'), 0);
    const int want2[] = {'S', 'A', 'B', 'C'};
    run_expect(want2, 4, "legacy: a handler posts A at 0, B at 5, C at 3");
    ck_assert_int_eq(mely_shutdown(&rec.m), 0);
}
END_TEST

/* ---- head posts while colors are stolen ------------------------------------------------ */

enum { HS_COLORS = 16, HS_TAIL = 6, HS_EVENTS = HS_TAIL + 3, HS_FIRST = 1000 };

/* Always worthy, so that the time-left policies steal these colors too. */
static const mely_handler_t hs_desc = {.name = "head/steal", .timeleft = 10000000};

static struct {
    mely_t m;
    int order[HS_COLORS][HS_EVENTS]; /* written by handlers of the color only */
    unsigned n[HS_COLORS];           /* idem */
    atomic_uint done;
    unsigned expected;
} hs;

static void hs_record(void *arg)
{
    uintptr_t a = (uintptr_t)arg;
    unsigned c = (unsigned)(a >> 8);
    int id = (int)(a & 0xff);

    if (mely_color_owner(&hs.m, HS_FIRST + c) != mely_current_worker())
        note("color %u runs on worker %d, the map says %d", HS_FIRST + c, mely_current_worker(),
             mely_color_owner(&hs.m, HS_FIRST + c));
    if (hs.n[c] < HS_EVENTS)
        hs.order[c][hs.n[c]] = id;
    hs.n[c]++;
    uint64_t end = now_ns() + 20000; /* 20 us: long enough for thieves to come */
    while (now_ns() < end) {
    }
    if (atomic_fetch_add(&hs.done, 1) + 1 == hs.expected)
        mely_stop(&hs.m);
}

static void hs_post(unsigned c, int id, unsigned flags)
{
    int err = mely_post_ex(&hs.m, HS_FIRST + c, MELY_PRIO_DEFAULT, &hs_desc, hs_record,
                           (void *)((uintptr_t)c << 8 | (uintptr_t)id), flags);
    if (err)
        note("post of %d to color %u: %s", id, HS_FIRST + c, mely_strerror(err));
}

/* S: records itself, then posts X (90) at the tail and Y (91) at the head. */
static void hs_self_poster(void *arg)
{
    unsigned c = (unsigned)((uintptr_t)arg >> 8);
    hs_record(arg);
    hs_post(c, 90, 0);
    hs_post(c, 91, MELY_POST_HEAD);
}

/*
 * In every shape: sixteen colors gathered on worker 0 (mely_color_move), each
 * with S, T1..T6 queued; S posts X at the tail and Y at the head. Whatever
 * steals do with the colors meanwhile (the others are idle), each color runs
 * S, Y, T1..T6, X.
 */
START_TEST(head_posts_hold_under_stealing)
{
    const struct shape *sh = &shapes[_i];

    reset_notes();
    memset(&hs, 0, sizeof(hs));
    init_runtime_shape(&hs.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned c = 0; c < HS_COLORS; c++)
        ck_assert_int_eq(mely_color_move(&hs.m, HS_FIRST + c, 0), 0);
    hs.expected = HS_COLORS * HS_EVENTS;
    for (unsigned c = 0; c < HS_COLORS; c++) {
        int err = mely_post_ex(&hs.m, HS_FIRST + c, MELY_PRIO_DEFAULT, &hs_desc, hs_self_poster,
                               (void *)((uintptr_t)c << 8 | 50), 0);
        ck_assert_int_eq(err, 0);
    }
    for (int t = 1; t <= HS_TAIL; t++)
        for (unsigned c = 0; c < HS_COLORS; c++)
            hs_post(c, t, 0);

    struct watchdog wd;
    watchdog_start(&wd, &hs.m, 20, __func__);
    int rc = mely_run(&hs.m);
    bool fired = watchdog_end(&wd);
    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "%s: %u of %u events ran in 20 s", shape_name(sh),
                  atomic_load(&hs.done), hs.expected);
    const int want[HS_EVENTS] = {50, 91, 1, 2, 3, 4, 5, 6, 90};
    for (unsigned c = 0; c < HS_COLORS; c++) {
        ck_assert_uint_eq(hs.n[c], HS_EVENTS);
        char got[128] = "";
        for (unsigned i = 0; i < HS_EVENTS; i++)
            snprintf(got + strlen(got), sizeof(got) - strlen(got), " %d", hs.order[c][i]);
        ck_assert_msg(memcmp(hs.order[c], want, sizeof(want)) == 0,
                      "%s: color %u ran%s, expected 50 91 1 2 3 4 5 6 90", shape_name(sh),
                      HS_FIRST + c, got);
    }
    ck_assert_int_eq(mely_shutdown(&hs.m), 0);
}
END_TEST

/* ---- a color that moves while a handler's posts to it are staged ------------------------- */

/*
 * A handler's posts to other workers' colors are staged in its worker's outbox
 * and queued when it returns (mely/remote/outbox.h). If the color moves between two
 * of those posts (a steal, or mely_color_move() as here), the two posts were
 * staged for different workers; they must still run in post order. The
 * handler, on worker 0 of 3: posts Z to color MV_OTHER (worker 2), P1 to
 * MV_COLOR (worker 1), moves MV_COLOR to worker 2 (it has nothing queued:
 * P1 is only staged), posts P2 to MV_COLOR. Expected: P1 then P2, on both
 * engines.
 */
enum { MV_SRC = 3000, MV_COLOR = 3001, MV_OTHER = 3002 }; /* workers 0, 1, 2 of 3 */

static struct {
    mely_t m;
    int order[4];
    atomic_uint n;
    int move_rc;
} mv;

static void mv_record(void *arg)
{
    unsigned i = atomic_fetch_add(&mv.n, 1);
    if (i < 4)
        mv.order[i] = (int)(intptr_t)arg;
    if (i + 1 == 3)
        mely_stop(&mv.m);
}

static void mv_poster(void *arg)
{
    (void)arg;
    if (mely_post(&mv.m, MV_OTHER, mv_record, (void *)(intptr_t)'Z') ||
        mely_post(&mv.m, MV_COLOR, mv_record, (void *)(intptr_t)'1'))
        note("a post failed");
    mv.move_rc = mely_color_move(&mv.m, MV_COLOR, 2);
    if (mely_post(&mv.m, MV_COLOR, mv_record, (void *)(intptr_t)'2'))
        note("a post failed");
}

/* Phase 1: the colors' first events (their queues then exist); the second
 * one stops the runtime. */
static void mv_first(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&mv.n, 1) + 1 == 2)
        mely_stop(&mv.m);
}

static const char *const mv_engines[] = {"mely", "legacy"};

START_TEST(staged_posts_keep_order_when_their_color_moves)
{
    reset_notes();
    memset(&mv, 0, sizeof(mv));
    init_runtime_engine(&mv.m, 3, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL,
                        mv_engines[_i]);
    ck_assert_int_eq(mely_color_owner(&mv.m, MV_SRC), 0);
    ck_assert_int_eq(mely_color_owner(&mv.m, MV_COLOR), 1);
    ck_assert_int_eq(mely_color_owner(&mv.m, MV_OTHER), 2);
    /* Only colors whose queue exists are staged: give both a first event,
     * run to the end, and only then the poster (so MV_COLOR is idle). */
    ck_assert_int_eq(mely_post(&mv.m, MV_COLOR, mv_first, NULL), 0);
    ck_assert_int_eq(mely_post(&mv.m, MV_OTHER, mv_first, NULL), 0);
    run_bounded(&mv.m, 20, "first events");
    atomic_store(&mv.n, 0);
    ck_assert_int_eq(mely_post(&mv.m, MELY_COLOR_PINNED(0), mv_poster, NULL), 0);
    run_bounded(&mv.m, 20, "the poster");
    assert_no_notes();
    ck_assert_int_eq(mv.move_rc, 0);
    ck_assert_uint_eq(atomic_load(&mv.n), 3);
    int p1 = -1, p2 = -1;
    for (int i = 0; i < 3; i++) {
        if (mv.order[i] == '1')
            p1 = i;
        if (mv.order[i] == '2')
            p2 = i;
    }
    ck_assert_msg(p1 >= 0 && p2 >= 0 && p1 < p2, "%s: P1 ran at %d, P2 at %d (order %c %c %c)",
                  mv_engines[_i], p1, p2, mv.order[0], mv.order[1], mv.order[2]);
    ck_assert_int_eq(mely_shutdown(&mv.m), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------ */

/* new_tcase()'s fixture clears MELY_* overrides from the caller's environment
 * before each test: the tests choose their runtime shapes. */
int main(void)
{
    Suite *s = suite_create("order");

    TCase *tc = new_tcase(s, "parallel", 60);
    tcase_add_loop_test(tc, different_colors_run_in_parallel, 0, NSHAPES);

    tc = new_tcase(s, "order", 60);
    tcase_add_loop_test(tc, head_posts_run_first, 0, ORDER_CASES);
    tcase_add_loop_test(tc, head_post_from_own_handler_runs_next, 0, ORDER_CASES);
    tcase_add_loop_test(tc, priorities_order_color_queues, 0, ORDER_CASES);
    tcase_add_loop_test(tc, priorities_order_posts_from_a_handler, 0, ORDER_CASES);
    tcase_add_loop_test(tc, legacy_runs_in_post_order, 0, NELEM(batches));
    tcase_add_loop_test(tc, head_posts_hold_under_stealing, 0, NSHAPES);
    tcase_add_loop_test(tc, staged_posts_keep_order_when_their_color_moves, 0, NELEM(mv_engines));
    return mely_test_main(s);
}
