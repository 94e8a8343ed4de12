/* SPDX-License-Identifier: MIT */
/*
 * check_wakeup.c: no lost wake-ups (doc/runtime.md, "Invariants and where
 * they are tested"), checked
 * through the public API only (include/mely/mely.h): workers park as soon as they are
 * idle, and every post to a parked worker, from a foreign thread or from a
 * handler on another worker, wakes it, whether the post comes long after the
 * worker parked or races with it on its way to sleep.
 *
 * Handlers and helper threads never call ck_assert, every wait is bounded, and
 * MELY_TEST_SCALE multiplies the number of rounds (see tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- no lost wake-ups ---------------------------------------------------------- */

enum { WAKE_ROUND_MS = 5000, WAKE_WATCHDOG_S = 20 };

static struct {
    mely_t m;
    unsigned workers;
    mely_color_t own[8]; /* an ordinary color each worker owns at init */
    atomic_uint ran;
    unsigned rounds, expected;
    struct watchdog wd;
} wk;

/* Always worthy under the time-left policies, so that steals race with posts
 * and parking there too. */
static const mely_handler_t wake_desc = {.name = "wake", .timeleft = 10000000};

static int wake_post(mely_color_t color, mely_fn_t fn, void *arg)
{
    return mely_post_ex(&wk.m, color, MELY_PRIO_DEFAULT, &wake_desc, fn, arg, 0);
}

static void wake_leaf(void *arg)
{
    (void)arg;
    atomic_fetch_add(&wk.ran, 1);
}

/* A handler's post to another worker's color must wake that worker too. */
static void wake_relay(void *arg)
{
    unsigned to = (unsigned)(uintptr_t)arg;
    int err = wake_post(wk.own[to], wake_leaf, NULL);
    if (err)
        note("relay post: %s", mely_strerror(err));
    atomic_fetch_add(&wk.ran, 1);
}

/* The pause before round r: long enough for every worker to park first, none
 * at all (the post races with a worker on its way to sleep), or in between. */
static unsigned pause_us(unsigned r)
{
    if (r == 0)
        return 50000;
    switch (r % 4) {
    case 2:
        return 0;
    case 3:
        return (r * 37u) % 300u;
    default:
        return 1000;
    }
}

static void *wake_poster(void *arg)
{
    (void)arg;
    unsigned expected = 0;

    for (unsigned r = 0; r < wk.rounds && !watchdog_fired(&wk.wd); r++) {
        sleep_us(pause_us(r));
        for (unsigned w = 0; w < wk.workers; w++) {
            mely_color_t c = r % 2 ? wk.own[w] : MELY_COLOR_PINNED(w);
            int err = wake_post(c, wake_leaf, NULL);
            if (err)
                note("round %u: post to color %u: %s", r, c, mely_strerror(err));
        }
        unsigned from = r % wk.workers, to = (r + 1) % wk.workers;
        int err = wake_post(wk.own[from], wake_relay, (void *)(uintptr_t)to);
        if (err)
            note("round %u: relay post: %s", r, mely_strerror(err));
        expected += wk.workers + 2;

        uint64_t deadline = now_ns() + WAKE_ROUND_MS * 1000000ull;
        while (atomic_load(&wk.ran) < expected && now_ns() < deadline)
            sleep_us(20);
        unsigned ran = atomic_load(&wk.ran);
        if (ran != expected) {
            note("round %u (pause %u us): %u of %u events ran after %u ms: a wake-up was lost",
                 r, pause_us(r), ran, expected, WAKE_ROUND_MS);
            break;
        }
    }
    wk.expected = expected;
    mely_stop(&wk.m);
    return NULL;
}

/*
 * Workers park as soon as they are idle (spin_us 0). Round after round, a
 * foreign thread waits, then posts to a color of every worker and to a relay
 * handler that posts to the next worker; every event must run.
 */
START_TEST(posts_wake_parked_workers)
{
    const struct shape *sh = &shapes[_i];

    reset_notes();
    memset(&wk, 0, sizeof(wk));
    wk.workers = sh->workers;
    wk.rounds = scaled(200, 20, SCALED_MAX);
    init_runtime_shape(&wk.m, sh, MELY_BATCH_DEFAULT, 0);
    for (unsigned w = 0; w < wk.workers; w++) {
        mely_color_t c = 500;
        while (c < MELY_COLORS && mely_color_owner(&wk.m, c) != (int)w)
            c++;
        ck_assert_msg(c < MELY_COLORS, "no color owned by worker %u", w);
        wk.own[w] = c;
    }

    pthread_t poster;
    watchdog_start(&wk.wd, &wk.m, WAKE_WATCHDOG_S, __func__);
    ck_assert_int_eq(pthread_create(&poster, NULL, wake_poster, NULL), 0);
    int rc = mely_run(&wk.m);
    bool fired = watchdog_end(&wk.wd);
    pthread_join(poster, NULL);

    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_msg(!fired, "%s: %u rounds not done within %u s (%u events ran)", shape_name(sh),
                  wk.rounds, WAKE_WATCHDOG_S, atomic_load(&wk.ran));
    ck_assert_uint_eq(wk.expected, wk.rounds * (wk.workers + 2));
    ck_assert_uint_eq(atomic_load(&wk.ran), wk.expected);
    /* Otherwise the test proved nothing about waking. */
    for (unsigned w = 0; w < wk.workers; w++) {
        mely_stats_t s;
        ck_assert_int_eq(mely_worker_stats(&wk.m, w, &s), 0);
        ck_assert_msg(s.parks >= 1, "worker %u never parked (spin_us 0, 50 ms idle)", w);
    }
    ck_assert_int_eq(mely_shutdown(&wk.m), 0);
}
END_TEST

/* ---- the idle hook ---------------------------------------------------------------- */

/* Each worker calls the hook before it sleeps, outside any handler; the first
 * call posts an event to another worker's color, which must run (the hook's
 * posts leave before the worker sleeps); the last event stops the run. */
static struct {
    mely_t m;
    atomic_uint calls, in_handler, ran, started;
    atomic_int bad_worker;
    atomic_bool busy_refused;
} ih;

static void ih_event(void *arg)
{
    (void)arg;
    if (mely_on_idle(&ih.m, NULL, NULL) == MELY_EBUSY)
        atomic_store(&ih.busy_refused, true);
    if (atomic_fetch_add(&ih.ran, 1) + 1 == 2)
        mely_stop(&ih.m);
}

static void ih_hook(void *arg)
{
    if (arg != &ih)
        atomic_store(&ih.bad_worker, -2);
    if (mely_current_color() != -1)
        atomic_fetch_add(&ih.in_handler, 1);
    int w = mely_current_worker();
    if (w < 0 || w >= 2)
        atomic_store(&ih.bad_worker, w);
    atomic_fetch_add(&ih.calls, 1);
    /* The first hook call on each worker posts to a color of the other worker. */
    if (w >= 0 && w < 2 && !(atomic_fetch_or(&ih.started, 1u << w) & (1u << w))) {
        for (mely_color_t c = 1; c < 100; c++)
            if (mely_color_owner(&ih.m, c) != w) {
                if (mely_post(&ih.m, c, ih_event, NULL) != 0)
                    note("the idle hook could not post");
                break;
            }
    }
}

START_TEST(idle_hook_runs_before_sleeping)
{
    memset(&ih, 0, sizeof(ih));
    init_runtime(&ih.m, 2, 1, MELY_BATCH_DEFAULT, 0);
    ck_assert_int_eq(mely_on_idle(&ih.m, ih_hook, &ih), 0);
    run_bounded(&ih.m, 20, "idle hook");
    ck_assert_uint_eq(atomic_load(&ih.ran), 2);
    ck_assert_uint_ge(atomic_load(&ih.calls), 2);
    ck_assert_uint_eq(atomic_load(&ih.in_handler), 0);
    ck_assert_int_eq(atomic_load(&ih.bad_worker), 0);
    ck_assert_msg(atomic_load(&ih.busy_refused), "mely_on_idle() accepted a change while running");
    /* Removed: a run with nothing to do calls nothing. */
    ck_assert_int_eq(mely_on_idle(&ih.m, NULL, NULL), 0);
    unsigned before = atomic_load(&ih.calls);
    ck_assert_int_eq(mely_post(&ih.m, 1, ih_event, NULL), 0);
    ck_assert_int_eq(mely_post(&ih.m, 2, ih_event, NULL), 0);
    atomic_store(&ih.ran, 0);
    run_bounded(&ih.m, 20, "idle hook removed");
    ck_assert_uint_eq(atomic_load(&ih.calls), before);
    ck_assert_int_eq(mely_shutdown(&ih.m), 0);
    mely_t none = {0};
    ck_assert_int_eq(mely_on_idle(&none, ih_hook, NULL), MELY_ESHUTDOWN);
}
END_TEST

/* ---- the spin policy (mely/sched/spinpol.h) ---------------------------------------------- */

/* Posts that come 200 us apart: a spin of spin_us (50 us) before each park
 * would find nothing, and would be a third of the idle time. The policy must
 * keep spinning within a tenth of the time parked (plus its starting credit
 * and one step's overshoot), whatever the machine's load: the bound is
 * structural, not a timing. */
enum { SP_POSTS = 1000, SP_GAP_US = 200, SP_SPIN_US = 50 };

static struct {
    mely_t m;
    atomic_uint ran;
} sp;

static void sp_event(void *arg)
{
    (void)arg;
    atomic_fetch_add(&sp.ran, 1);
}

static void *sp_poster(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < SP_POSTS; i++) {
        sleep_us(SP_GAP_US);
        int err = mely_post(&sp.m, 1, sp_event, NULL);
        if (err)
            note("post %u: %s", i, mely_strerror(err));
    }
    uint64_t deadline = now_ns() + 20000000000ull;
    while (atomic_load(&sp.ran) < SP_POSTS && now_ns() < deadline)
        sleep_us(100);
    mely_stop(&sp.m);
    return NULL;
}

START_TEST(idle_spin_within_a_tenth_of_idle_time)
{
    memset(&sp, 0, sizeof(sp));
    init_runtime(&sp.m, 1, 1, MELY_BATCH_DEFAULT, SP_SPIN_US);
    run_with_helper(&sp.m, sp_poster, NULL, 60, "sparse posts");
    ck_assert_uint_eq(atomic_load(&sp.ran), SP_POSTS);
    mely_stats_t st;
    ck_assert_int_eq(mely_worker_stats(&sp.m, 0, &st), 0);
    /* starting credit 2 spins, one overshoot of up to 10 ms (a preemption) */
    uint64_t bound = st.park_ns / 10 + 2 * SP_SPIN_US * 1000u + 10000000u;
    printf("sparse posts: %" PRIu64 " spins (%" PRIu64 " found), %.2f ms spinning, %.2f ms "
           "parked (%.1f%%), bound %.2f ms\n",
           st.spins, st.spins_found, st.spin_ns / 1e6, st.park_ns / 1e6,
           100.0 * (double)st.spin_ns / (double)(st.spin_ns + st.park_ns + 1), bound / 1e6);
    ck_assert_uint_gt(st.park_ns, 0);
    ck_assert_msg(st.spin_ns <= bound, "spun %" PRIu64 " ns, parked %" PRIu64 " ns", st.spin_ns,
                  st.park_ns);
    ck_assert_int_eq(mely_shutdown(&sp.m), 0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------ */

/* new_tcase()'s fixture clears MELY_* overrides from the caller's environment
 * before each test: the tests choose their runtime shapes. */
int main(void)
{
    Suite *s = suite_create("wakeup");

    TCase *tc = new_tcase(s, "wakeup", 120);
    tcase_add_loop_test(tc, posts_wake_parked_workers, 0, NSHAPES);
    tcase_add_test(tc, idle_hook_runs_before_sleeping);
    tcase_add_test(tc, idle_spin_within_a_tenth_of_idle_time);
    return mely_test_main(s);
}
