/*
 * check_stall.c: stall warnings (MELY_STALL_MS, mely/stall.h). A handler
 * that runs 300 ms yields exactly one warning through the log hook while it
 * runs, naming it (by its descriptor's name, or by its symbol), and the
 * `stalls` counter says 1; a slow timer callback and a slow fd watch
 * callback are named by the program's function (or the descriptor of their
 * mely_to_t), not by the runtime's dispatcher that calls them (io/timer.c's
 * fire, io/watch.c's watch_run: runname.h), on both engines; 10,000
 * handlers of 1 ms yield none; MELY_STALL_MS=0 yields none; at most 10
 * lines a second are said, every stall counted; a malformed MELY_STALL_MS is
 * refused.
 *
 * The program is linked with -export-dynamic so that dladdr() can name its
 * handlers, as it names those of a shared library.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mely/mely.h"
#include "tests/testutil.h"

/* ---- the log hook: what the monitor says ------------------------------------------ */

enum { MAXREC = 16 };
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static char rec_msg[MAXREC][512];
static unsigned nrec; /* messages seen, including those not kept */

static void record(int level, const char *msg, void *arg)
{
    (void)arg;
    if (level != MELY_LOG_WARN || !strstr(msg, "stall"))
        return;
    pthread_mutex_lock(&rec_mu);
    if (nrec < MAXREC)
        snprintf(rec_msg[nrec], sizeof(rec_msg[nrec]), "%s", msg);
    nrec++;
    pthread_mutex_unlock(&rec_mu);
}

static unsigned warnings(void)
{
    pthread_mutex_lock(&rec_mu);
    unsigned n = nrec;
    pthread_mutex_unlock(&rec_mu);
    return n;
}

static void start_recording(void)
{
    pthread_mutex_lock(&rec_mu);
    nrec = 0;
    pthread_mutex_unlock(&rec_mu);
    ck_assert_int_eq(mely_set_log(record, NULL), 0);
}

static uint64_t total_stalls(const mely_t *m, unsigned workers)
{
    uint64_t n = 0;
    for (unsigned w = 0; w < workers; w++)
        n += stats_of(m, w).stalls;
    return n;
}

/* ---- handlers ------------------------------------------------------------------- */

/* Named through dladdr (exported: see the top of this file). */
void stall_test_sleeper(void *arg)
{
    sleep_us((uint64_t)(uintptr_t)arg * 1000);
    mely_stop(&rt);
}

static void sleep_then_stop(void *arg)
{
    stall_test_sleeper(arg);
}

static const mely_handler_t slow_desc = {.name = "slow_300ms_handler"};

/* Sleeps 1 ms, then posts itself again until `ran` reaches stop_at. */
static void short_sleeper(void *arg)
{
    (void)arg;
    sleep_us(1000);
    if (atomic_fetch_add(&ran, 1) + 1 >= stop_at)
        mely_stop(&rt);
    else if (mely_post(&rt, 3, short_sleeper, NULL) != 0)
        note("repost failed");
}

/* A timer's callback, 300 ms (exported: named through dladdr). */
void stall_test_slow_timer(void *arg)
{
    stall_test_sleeper(arg);
}

/* An fd watch's callback: takes the byte that made the pipe readable, then
 * sleeps 300 ms (exported). */
void stall_test_slow_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    char c;
    if (read(fd, &c, 1) != 1)
        note("the watched pipe had no byte");
    stall_test_sleeper(arg);
}

/* ---- the tests ------------------------------------------------------------------ */

/* Runs one 300 ms handler (through descriptor desc, or fn without one). */
static void run_slow(const mely_handler_t *desc, mely_fn_t fn)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    void *arg = (void *)(uintptr_t)300;
    if (desc)
        ck_assert_int_eq(mely_post_ex(&rt, 5, MELY_PRIO_DEFAULT, desc, fn, arg, 0), 0);
    else
        ck_assert_int_eq(mely_post(&rt, 5, fn, arg), 0);
    run_bounded(&rt, 30, "a 300 ms handler");
}

START_TEST(slow_handler_warns_once_by_descriptor_name)
{
    run_slow(&slow_desc, sleep_then_stop);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "slow_300ms_handler") && strstr(rec_msg[0], "color 5"),
                  "the warning is \"%s\"", rec_msg[0]);
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

START_TEST(slow_handler_named_by_its_symbol)
{
    run_slow(NULL, stall_test_sleeper);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "stall_test_sleeper"), "the warning is \"%s\"", rec_msg[0]);
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

/* The engines a dispatcher's callback is named under (NULL: mely). */
static const char *const engines[] = {NULL, "legacy"};

/* Asserts one stall warning, naming `name` and not the library's own code
 * (a dispatcher is a static function of libmely: "libmely.so.0+0x..."). */
static void assert_named(const char *name)
{
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], name) && !strstr(rec_msg[0], "libmely"),
                  "the warning is \"%s\", not about %s", rec_msg[0], name);
}

/* A timer whose callback runs 300 ms: named by the callback, or by the
 * descriptor of its mely_to_t when it has one (_i: engine, then with one). */
START_TEST(slow_timer_named_by_its_callback)
{
    const char *engine = engines[_i % 2];
    bool with_desc = _i >= 2;
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engine);
    start_recording();
    mely_to_t to = MELY_TO(5);
    if (with_desc)
        to.handler = &slow_desc;
    ck_assert_int_eq(mely_timer_after(&rt, 1000000, to, stall_test_slow_timer,
                                      (void *)(uintptr_t)300, NULL),
                     0);
    run_bounded(&rt, 30, "a 300 ms timer callback");
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    assert_named(with_desc ? "slow_300ms_handler" : "stall_test_slow_timer");
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

/* An fd watch whose callback runs 300 ms: named by the callback (_i: engine). */
START_TEST(slow_watch_named_by_its_callback)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    init_runtime_engine(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, engines[_i]);
    start_recording();
    mely_watch_t *wt;
    ck_assert_int_eq(mely_watch(&rt, p[0], MELY_READ | MELY_ONESHOT, MELY_TO(5),
                                stall_test_slow_watch, (void *)(uintptr_t)300, &wt),
                     0);
    run_bounded(&rt, 30, "a 300 ms watch callback");
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_watch_remove(wt), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    close(p[0]);
    close(p[1]);
    assert_no_notes();
    assert_named("stall_test_slow_watch");
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

START_TEST(short_handlers_never_warn)
{
    enum { N = 10000 }; /* the figure: about 11 s */
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    atomic_store(&ran, 0);
    stop_at = N;
    ck_assert_int_eq(mely_post(&rt, 3, short_sleeper, NULL), 0);
    run_bounded(&rt, 60, "10,000 handlers of 1 ms");
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ran), N);
    ck_assert_msg(warnings() == 0, "%u warnings, the first \"%s\"", warnings(), rec_msg[0]);
    ck_assert_uint_eq(stalls, 0);
}
END_TEST

START_TEST(stall_ms_zero_turns_warnings_off)
{
    ck_assert_int_eq(setenv("MELY_STALL_MS", "0", 1), 0);
    run_slow(&slow_desc, sleep_then_stop);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_msg(warnings() == 0, "%u warnings, the first \"%s\"", warnings(), rec_msg[0]);
    ck_assert_uint_eq(stalls, 0);
}
END_TEST

/* A lower threshold catches a shorter handler: the variable is read. */
START_TEST(stall_ms_sets_the_threshold)
{
    ck_assert_int_eq(setenv("MELY_STALL_MS", "20", 1), 0);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    ck_assert_int_eq(mely_post_ex(&rt, 5, MELY_PRIO_DEFAULT, &slow_desc, sleep_then_stop,
                                  (void *)(uintptr_t)80, 0),
                     0);
    run_bounded(&rt, 30, "an 80 ms handler");
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "MELY_STALL_MS=20"), "the warning is \"%s\"", rec_msg[0]);
}
END_TEST

/* Sleeps 20 ms; the last of stop_at stops the runtime. */
static void sleep_20ms(void *arg)
{
    (void)arg;
    sleep_us(20000);
    if (atomic_fetch_add(&ran, 1) + 1 >= stop_at)
        mely_stop(&rt);
}

/* 15 stalls in about 300 ms: each is counted, but 10 lines a second are
 * said at most (the monitor's first second holds the whole run unless the
 * machine stalls the test itself for longer). */
START_TEST(warnings_are_rate_limited)
{
    enum { N = 15 };
    ck_assert_int_eq(setenv("MELY_STALL_MS", "2", 1), 0);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    atomic_store(&ran, 0);
    stop_at = N;
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(mely_post(&rt, 5, sleep_20ms, NULL), 0);
    uint64_t t0 = now_ns();
    run_bounded(&rt, 30, "15 handlers of 20 ms");
    uint64_t wall_ms = (now_ns() - t0) / 1000000u;
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_uint_eq(stalls, N);
    if (wall_ms < 1000)
        ck_assert_uint_eq(warnings(), 10);
    else
        ck_assert_uint_le(warnings(), 10 * (wall_ms / 1000 + 1));
}
END_TEST

static const char *const bad_values[] = {"abc", "-1", "3600001", ""};

START_TEST(malformed_stall_ms_is_refused)
{
    mely_t m = {0};
    ck_assert_int_eq(setenv("MELY_STALL_MS", bad_values[_i], 1), 0);
    begin_capture();
    int err = mely_init(&m, NULL);
    const char *said = end_capture();
    ck_assert_int_eq(err, MELY_EINVAL);
    ck_assert_msg(strstr(said, "MELY_STALL_MS"), "stderr says \"%s\"", said);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stall");

    TCase *tc = new_tcase(s, "stall", 120);
    tcase_add_test(tc, slow_handler_warns_once_by_descriptor_name);
    tcase_add_test(tc, slow_handler_named_by_its_symbol);
    tcase_add_loop_test(tc, slow_timer_named_by_its_callback, 0, 2 * NELEM(engines));
    tcase_add_loop_test(tc, slow_watch_named_by_its_callback, 0, NELEM(engines));
    tcase_add_test(tc, short_handlers_never_warn);
    tcase_add_test(tc, stall_ms_zero_turns_warnings_off);
    tcase_add_test(tc, stall_ms_sets_the_threshold);
    tcase_add_test(tc, warnings_are_rate_limited);
    tcase_add_loop_test(tc, malformed_stall_ms_is_refused, 0, NELEM(bad_values));
    return mely_test_main(s);
}
