/* SPDX-License-Identifier: MIT */
/*
 * check_lifecycle.c: a runtime's life cycle through the public API
 * (include/mely/mely.h): what mely_post*() refuse (every error code, nothing queued),
 * calls on handles that are not (or no longer) initialized, who may call
 * mely_run() and mely_shutdown() (MELY_EBUSY), a stop before the run, a stop
 * from a foreign thread, two runtimes posting to each other, and
 * mely_strerror(). The post and shutdown tests run on both engines.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded (see
 * tests/testutil.h). MELY_TEST_SCALE (default 1) multiplies the event counts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- errors of mely_post* --------------------------------------------------- */

/* The tests that loop over engines: mely's, then libasync-smp's (legacy). */
static const char *const engines[] = {NULL, "legacy"};

/* Every rejected post must leave nothing queued: shutdown discards exactly the
 * accepted ones (on either engine). */
START_TEST(post_errors_queue_nothing)
{
    const char *engine = engines[_i];
    mely_t m = {0};
    int ok = 0;

    init_runtime_engine(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engine);
#define ACCEPTED(call)                   \
    do {                                 \
        ck_assert_int_eq((call), 0);     \
        ok++;                            \
    } while (0)
    ACCEPTED(mely_post(&m, 0, nop, NULL));
    ACCEPTED(mely_post(&m, MELY_COLORS - 1, nop, NULL));
    ACCEPTED(mely_post(&m, MELY_COLOR_PINNED(0), nop, NULL));
    ACCEPTED(mely_post(&m, MELY_COLOR_PINNED(1), nop, NULL));
    ACCEPTED(mely_post_head(&m, 7, nop, NULL));
    ACCEPTED(mely_post_ex(&m, 7, MELY_PRIO_MAX, NULL, nop, NULL, MELY_POST_HEAD));
    ACCEPTED(mely_post_ex(&m, 8, 0, NULL, nop, NULL, 0));
#undef ACCEPTED

    const mely_color_t bad_colors[] = {70000, MELY_COLOR_PINNED(2), MELY_COLORS + MELY_MAX_WORKERS,
                                       UINT32_MAX};
    for (unsigned i = 0; i < sizeof(bad_colors) / sizeof(bad_colors[0]); i++) {
        ck_assert_int_eq(mely_post(&m, bad_colors[i], nop, NULL), MELY_ECOLOR);
        ck_assert_int_eq(mely_post_head(&m, bad_colors[i], nop, NULL), MELY_ECOLOR);
        ck_assert_int_eq(mely_post_ex(&m, bad_colors[i], 0, NULL, nop, NULL, 0), MELY_ECOLOR);
    }
    const int bad_prios[] = {-1, MELY_PRIO_MAX + 1, INT_MIN, INT_MAX};
    for (unsigned i = 0; i < sizeof(bad_prios) / sizeof(bad_prios[0]); i++)
        ck_assert_int_eq(mely_post_ex(&m, 3, bad_prios[i], NULL, nop, NULL, 0), MELY_EPRIO);
    ck_assert_int_eq(mely_post(&m, 3, NULL, NULL), MELY_ENOFN);
    ck_assert_int_eq(mely_post_head(&m, 3, NULL, NULL), MELY_ENOFN);
    ck_assert_int_eq(mely_post_ex(&m, 3, 0, NULL, NULL, NULL, 0), MELY_ENOFN);
    const unsigned bad_flags[] = {0x80, 2, 0x80 | MELY_POST_HEAD, ~0u};
    for (unsigned i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
        ck_assert_int_eq(mely_post_ex(&m, 3, 0, NULL, nop, NULL, bad_flags[i]), MELY_EINVAL);

    ck_assert_int_eq(mely_shutdown(&m), ok);

    /* With one worker, pinned color 1 does not exist. */
    init_runtime_engine(&m, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engine);
    ck_assert_int_eq(mely_post(&m, MELY_COLOR_PINNED(1), nop, NULL), MELY_ECOLOR);
    ck_assert_int_eq(mely_post(&m, MELY_COLOR_PINNED(0), nop, NULL), 0);
    ck_assert_int_eq(mely_shutdown(&m), 1);
}
END_TEST

/* ---- handles that are not initialized ---------------------------------------- */

static void assert_refuses_everything(mely_t *m)
{
    mely_stats_t s;
    ck_assert_int_eq(mely_post(m, 1, nop, NULL), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_post_head(m, 1, nop, NULL), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_post_ex(m, 1, 0, NULL, nop, NULL, 0), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_run(m), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_stop(m), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_worker_stats(m, 0, &s), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_color_owner(m, 1), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_color_move(m, 1, 0), MELY_ESHUTDOWN);
    const mely_handler_t h = {.name = "h"};
    ck_assert_uint_eq(mely_handler_measured(m, &h), 0);
    ck_assert_uint_eq(mely_workers(m), 0);
    ck_assert_int_eq(mely_shutdown(m), MELY_ESHUTDOWN);
}

START_TEST(zeroed_handle_refuses_calls)
{
    mely_t m;
    memset(&m, 0, sizeof(m));
    assert_refuses_everything(&m);
}
END_TEST

START_TEST(shut_down_handle_refuses_calls)
{
    mely_t m = {0};
    init_runtime_engine(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, "base", engines[_i]);
    ck_assert_int_eq(mely_post(&m, 1, nop, NULL), 0);
    ck_assert_int_eq(mely_post(&m, 2, nop, NULL), 0);
    ck_assert_int_eq(mely_shutdown(&m), 2);
    assert_refuses_everything(&m); /* includes a second mely_shutdown() */

    /* ... until it is initialized again. */
    init_runtime(&m, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&m, 1, nop, NULL), 0);
    ck_assert_int_eq(mely_shutdown(&m), 1);
    ck_assert_int_eq(mely_shutdown(&m), MELY_ESHUTDOWN);
}
END_TEST

/* ---- run and stop ---------------------------------------------------------------- */

static struct {
    mely_t other; /* initialized, never running while the handlers below run */
    int run_same[2], run_other[2], shutdown_same[2], init_same[2];
    atomic_uint done, other_ran;
} busy;

static void stop_other(void *arg)
{
    (void)arg;
    atomic_fetch_add(&busy.other_ran, 1);
    mely_stop(&busy.other);
}

static void try_run_inside(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    busy.run_same[w] = mely_run(&rt);
    busy.run_other[w] = mely_run(&busy.other);
    busy.shutdown_same[w] = mely_shutdown(&rt);
    busy.init_same[w] = mely_init(&rt, NULL);
    if (atomic_fetch_add(&busy.done, 1) + 1 == 2)
        mely_stop(&rt);
}

/* A handler (on worker 0, the caller's thread, and on worker 1) may not run any
 * runtime, nor shut its own down, nor initialize its handle again. */
START_TEST(run_from_handler_is_busy)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    init_runtime(&busy.other, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned w = 0; w < 2; w++)
        ck_assert_int_eq(mely_post(&rt, MELY_COLOR_PINNED(w), try_run_inside, (void *)(uintptr_t)w),
                         0);
    run_bounded(&rt, 20, "handlers calling mely_run");
    for (unsigned w = 0; w < 2; w++) {
        ck_assert_msg(busy.run_same[w] == MELY_EBUSY, "worker %u: mely_run(own runtime) = %d", w,
                      busy.run_same[w]);
        ck_assert_msg(busy.run_other[w] == MELY_EBUSY, "worker %u: mely_run(other runtime) = %d",
                      w, busy.run_other[w]);
        ck_assert_msg(busy.shutdown_same[w] == MELY_EBUSY, "worker %u: mely_shutdown = %d", w,
                      busy.shutdown_same[w]);
        ck_assert_msg(busy.init_same[w] == MELY_EBUSY, "worker %u: mely_init = %d", w,
                      busy.init_same[w]);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);

    /* The refused run left the other runtime intact. */
    ck_assert_int_eq(mely_post(&busy.other, 5, stop_other, NULL), 0);
    run_bounded(&busy.other, 20, "the other runtime");
    ck_assert_uint_eq(atomic_load(&busy.other_ran), 1);
    ck_assert_int_eq(mely_shutdown(&busy.other), 0);
}
END_TEST

static struct {
    int run_rc, shutdown_rc, stop_rc;
    bool posted_ran;
    atomic_bool flag;
} fg;

static void set_fg_flag(void *arg)
{
    (void)arg;
    atomic_store(&fg.flag, true);
}

static void *foreign_while_running(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000)) {
        note("no handler ran within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    fg.run_rc = mely_run(&rt);
    fg.shutdown_rc = mely_shutdown(&rt);
    /* The refused calls must not have disturbed the running runtime. */
    if (mely_post(&rt, 3, set_fg_flag, NULL) == 0)
        fg.posted_ran = wait_flag(&fg.flag, 10000);
    fg.stop_rc = mely_stop(&rt);
    return NULL;
}

START_TEST(run_and_shutdown_while_running_are_busy)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 1, beacon, NULL), 0);
    run_with_helper(&rt, foreign_while_running, NULL, 40, "runtime stopped by a foreign thread");
    ck_assert_int_eq(fg.run_rc, MELY_EBUSY);
    ck_assert_int_eq(fg.shutdown_rc, MELY_EBUSY);
    ck_assert_msg(fg.posted_ran, "a post after the refused calls did not run");
    ck_assert_int_eq(fg.stop_rc, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* A stop requested before mely_run() makes it return at once, running nothing;
 * the request is used up: the next run runs the queued events. */
START_TEST(stop_before_run_returns_at_once)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = 3;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(mely_post(&rt, (mely_color_t)i, count_and_stop, NULL), 0);
    ck_assert_int_eq(mely_stop(&rt), 0);
    uint64_t t0 = now_ns();
    run_bounded(&rt, 20, "run after stop");
    double secs = (now_ns() - t0) / 1e9;
    ck_assert_msg(secs < 1.0, "mely_run() took %.3f s to honour an earlier stop", secs);
    ck_assert_uint_eq(atomic_load(&ran), 0);

    run_bounded(&rt, 20, "second run");
    ck_assert_uint_eq(atomic_load(&ran), 3);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static int foreign_stop_rc = 1;

static void *stop_later(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000))
        note("no handler ran within 20 s");
    sleep_us(20000); /* every worker is parked by now (spin_us 0) */
    foreign_stop_rc = mely_stop(&rt);
    return NULL;
}

/* mely_stop() from a thread the runtime does not know must wake and end every
 * parked worker (on either engine, with stealing: parked thieves too). */
START_TEST(stop_from_foreign_thread_wakes_parked_workers)
{
    init_runtime_engine(&rt, 8, 0, MELY_BATCH_DEFAULT, 0, "base", engines[_i]);
    ck_assert_int_eq(mely_post(&rt, 5, beacon, NULL), 0);
    run_with_helper(&rt, stop_later, NULL, 20, "stop from a foreign thread");
    ck_assert_int_eq(foreign_stop_rc, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- messages ------------------------------------------------------------------------- */

START_TEST(strerror_messages_are_distinct)
{
    const int codes[] = {MELY_EINVAL, MELY_ENOMEM,   MELY_EBUSY, MELY_ESHUTDOWN,
                         MELY_ECOLOR, MELY_EPRIO,    MELY_ENOFN, MELY_EAGAIN,
                         -EPERM,      -ENOENT,       -ETIMEDOUT, -EIO,
                         -ECONNREFUSED};
    enum { N = sizeof(codes) / sizeof(codes[0]) };
    const char *msg[N];

    for (unsigned i = 0; i < N; i++) {
        msg[i] = mely_strerror(codes[i]);
        ck_assert_msg(msg[i] != NULL && msg[i][0] != '\0', "mely_strerror(%d) is empty", codes[i]);
        for (unsigned k = 0; k < i; k++)
            ck_assert_msg(strcmp(msg[i], msg[k]) != 0, "mely_strerror(%d) == mely_strerror(%d): %s",
                          codes[i], codes[k], msg[i]);
    }
    const int odd[] = {0, 1, -99999, INT_MIN, INT_MAX, -4096};
    for (unsigned i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        const char *s = mely_strerror(odd[i]);
        ck_assert_msg(s != NULL && s[0] != '\0', "mely_strerror(%d) is empty", odd[i]);
    }
}
END_TEST

/* ---- two runtimes ------------------------------------------------------------------- */

static struct {
    mely_t m2;
    pthread_t m2_thread, main_thread;
    unsigned bounces;
    atomic_uint n1, n2;
    int m2_rc;
} two;

static void in_m2(void *arg);

/* Handlers of one runtime post to the other: for each, the other's workers
 * are just foreign threads. */
static void in_m1(void *arg)
{
    (void)arg;
    if (!pthread_equal(pthread_self(), two.main_thread))
        note("a handler of runtime 1 (one worker) ran off the thread that runs it");
    if (atomic_fetch_add(&two.n1, 1) + 1 == two.bounces) {
        mely_stop(&two.m2);
        mely_stop(&rt);
        return;
    }
    int err = mely_post(&two.m2, 6, in_m2, NULL);
    if (err)
        note("runtime 1 to runtime 2: %s", mely_strerror(err));
}

static void in_m2(void *arg)
{
    (void)arg;
    if (!pthread_equal(pthread_self(), two.m2_thread))
        note("a handler of runtime 2 ran off the thread that runs it");
    atomic_fetch_add(&two.n2, 1);
    int err = mely_post(&rt, 5, in_m1, NULL);
    if (err)
        note("runtime 2 to runtime 1: %s", mely_strerror(err));
}

static void *run_m2(void *arg)
{
    (void)arg;
    struct watchdog wd;
    watchdog_start(&wd, &two.m2, 40, __func__);
    two.m2_rc = mely_run(&two.m2);
    if (watchdog_end(&wd))
        note("runtime 2 still running after 40 s");
    return NULL;
}

START_TEST(two_runtimes_post_to_each_other)
{
    two.bounces = scaled(1000, 50, 1000000);
    two.main_thread = pthread_self();
    init_runtime(&rt, 1, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    init_runtime(&two.m2, 1, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 5, in_m1, NULL), 0);
    ck_assert_int_eq(pthread_create(&two.m2_thread, NULL, run_m2, NULL), 0);
    run_bounded(&rt, 40, "runtime 1");
    pthread_join(two.m2_thread, NULL);
    assert_no_notes();
    ck_assert_int_eq(two.m2_rc, 0);
    ck_assert_uint_eq(atomic_load(&two.n1), two.bounces);
    ck_assert_uint_eq(atomic_load(&two.n2), two.bounces - 1);
    ck_assert_int_eq(mely_shutdown(&two.m2), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- misuse of the life cycle ----------------------------------------------------------- */

/* A second mely_init() of a live handle is refused and changes nothing: the
 * queued events are still there (shutdown counts them) and nothing leaks
 * (the sanitizer and valgrind runs check that). A handle holding a pointer
 * the library never gave out is not followed: init just overwrites it. */
START_TEST(init_of_live_handle_is_refused)
{
    mely_t m = {0};
    init_runtime_engine(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engines[_i]);
    ck_assert_int_eq(mely_post(&m, 1, nop, NULL), 0);
    ck_assert_int_eq(mely_post(&m, 2, nop, NULL), 0);
    ck_assert_int_eq(mely_init(&m, NULL), MELY_EBUSY);
    ck_assert_uint_eq(mely_workers(&m), 2);
    ck_assert_int_eq(mely_post(&m, 3, nop, NULL), 0);
    ck_assert_int_eq(mely_shutdown(&m), 3);

    mely_t garbage;
    memset(&garbage, 0xa5, sizeof(garbage));
    ck_assert_int_eq(mely_init(&garbage, NULL), 0);
    ck_assert_int_eq(mely_shutdown(&garbage), 0);
}
END_TEST

/* Timers are not events: at shutdown, one that came due while the runtime
 * stopped and one cancelled after it came due are dropped uncounted, and
 * their functions never run; a plain post is counted. One worker, so that
 * the order below is the worker's order. */
static struct {
    mely_timer_t due, cancelled;
    int cancel_rc;
    atomic_uint fired;
} tq;

static void tq_fire(void *arg)
{
    (void)arg;
    atomic_fetch_add(&tq.fired, 1);
}

static void tq_stop(void *arg)
{
    (void)arg;
    tq.cancel_rc = mely_timer_cancel(&rt, tq.cancelled);
    if (mely_post(&rt, 4, nop, NULL) != 0)
        note("post from the stopping handler failed");
    uint64_t t0 = now_ns();
    while (now_ns() - t0 < 3000000) /* the first timer comes due meanwhile */
        ;
    mely_stop(&rt);
}

static void tq_start(void *arg)
{
    (void)arg;
    if (mely_timer_after(&rt, 0, MELY_TO(2), tq_fire, NULL, &tq.cancelled) != 0 ||
        mely_timer_after(&rt, 1000000, MELY_TO(2), tq_fire, NULL, &tq.due) != 0 ||
        mely_post(&rt, 3, tq_stop, NULL) != 0)
        note("timer or post failed");
}

START_TEST(shutdown_does_not_count_timers)
{
    init_runtime(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 1, tq_start, NULL), 0);
    run_bounded(&rt, 20, "timers then stop");
    assert_no_notes();
    ck_assert_int_eq(tq.cancel_rc, 0);
    ck_assert_uint_eq(atomic_load(&tq.fired), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 1); /* the post of color 4 */
}
END_TEST

/* mely_shutdown() racing threads that post (and make other calls) on the
 * same handle: every call either works or returns MELY_ESHUTDOWN, never a
 * crash, and nothing is lost: accepted posts = events run + discarded. Rounds
 * alternate a runtime that ran (stopped by a foreign thread) and one that
 * never did. */
enum { RACERS = 3, RACE_COLORS = 64, RACE_POSTS = 20000 };

static struct {
    mely_t m;
    atomic_uint ran;
    atomic_bool go;
    unsigned long ok[RACERS];
} race;

static void race_count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&race.ran, 1);
}

static void *race_poster(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    mely_timer_t id = 0;

    while (!atomic_load(&race.go))
        ;
    uint64_t deadline = now_ns() + 60000000000ull; /* bounded in time: valgrind is slow */
    for (unsigned long i = 0; now_ns() < deadline; i++) {
        /* Past RACE_POSTS, a call that queues nothing keeps racing the
         * guard: under valgrind's scheduling the shutdown may wait long,
         * and events piling up meanwhile cost memory and time. */
        if (race.ok[me] >= RACE_POSTS) {
            int rc = mely_timer_cancel(&race.m, 0);
            if (rc == MELY_ESHUTDOWN)
                return NULL;
            if (rc != MELY_ENOENT) {
                note("racer %u: mely_timer_cancel(0) returned %d", me, rc);
                return NULL;
            }
            continue;
        }
        int rc = mely_post(&race.m, (mely_color_t)(i % RACE_COLORS), race_count, NULL);
        if (rc == MELY_ESHUTDOWN)
            return NULL;
        if (rc != 0) {
            note("racer %u: mely_post returned %d", me, rc);
            return NULL;
        }
        race.ok[me]++;
        if (i % 64 == me) { /* the other entry points take the same guard */
            int t = mely_timer_after(&race.m, 3600ull * 1000000000ull, MELY_TO(1), nop, NULL, &id);
            int c = t == 0 ? mely_timer_cancel(&race.m, id) : t;
            if ((t != 0 && t != MELY_ESHUTDOWN) || (c != 0 && c != MELY_ESHUTDOWN)) {
                note("racer %u: timer calls returned %d, %d", me, t, c);
                return NULL;
            }
            (void)mely_workers(&race.m);
        }
    }
    note("racer %u: no MELY_ESHUTDOWN within 60 s", me);
    return NULL;
}

static void *race_stopper(void *arg)
{
    (void)arg;
    sleep_us(2000);
    mely_stop(&race.m);
    return NULL;
}

START_TEST(shutdown_races_foreign_calls)
{
    unsigned rounds = scaled(20, 4, 200);
    for (unsigned r = 0; r < rounds; r++) {
        pthread_t th[RACERS], stopper;
        memset(race.ok, 0, sizeof(race.ok));
        atomic_store(&race.ran, 0);
        atomic_store(&race.go, false);
        init_runtime_engine(&race.m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL,
                            engines[_i]);
        for (unsigned k = 0; k < RACERS; k++)
            ck_assert_int_eq(pthread_create(&th[k], NULL, race_poster, (void *)(uintptr_t)k), 0);
        atomic_store(&race.go, true);
        if (r % 2 == 0) {
            ck_assert_int_eq(pthread_create(&stopper, NULL, race_stopper, NULL), 0);
            run_bounded(&race.m, 20, "a runtime with racing posters");
            pthread_join(stopper, NULL);
        } else {
            sleep_us(1000);
        }
        int discarded = mely_shutdown(&race.m);
        for (unsigned k = 0; k < RACERS; k++)
            pthread_join(th[k], NULL);
        assert_no_notes();
        ck_assert_int_ge(discarded, 0);
        unsigned long ok = 0;
        for (unsigned k = 0; k < RACERS; k++)
            ok += race.ok[k];
        ck_assert_msg(ok == atomic_load(&race.ran) + (unsigned long)discarded,
                      "round %u: %lu posts accepted, %u ran, %d discarded", r, ok,
                      atomic_load(&race.ran), discarded);
        ck_assert_int_eq(mely_post(&race.m, 1, nop, NULL), MELY_ESHUTDOWN);
    }
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("lifecycle");

    TCase *tc = new_tcase(s, "errors", 30);
    tcase_add_loop_test(tc, post_errors_queue_nothing, 0, NELEM(engines));
    tcase_add_test(tc, zeroed_handle_refuses_calls);
    tcase_add_loop_test(tc, shut_down_handle_refuses_calls, 0, NELEM(engines));
    tcase_add_test(tc, strerror_messages_are_distinct);

    tc = new_tcase(s, "run", 60);
    tcase_add_test(tc, run_from_handler_is_busy);
    tcase_add_test(tc, run_and_shutdown_while_running_are_busy);
    tcase_add_test(tc, stop_before_run_returns_at_once);
    tcase_add_loop_test(tc, stop_from_foreign_thread_wakes_parked_workers, 0, NELEM(engines));
    tcase_add_test(tc, two_runtimes_post_to_each_other);

    tc = new_tcase(s, "misuse", 120);
    tcase_add_loop_test(tc, init_of_live_handle_is_refused, 0, NELEM(engines));
    tcase_add_test(tc, shutdown_does_not_count_timers);
    tcase_add_loop_test(tc, shutdown_races_foreign_calls, 0, NELEM(engines));
    return mely_test_main(s);
}
