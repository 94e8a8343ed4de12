/* SPDX-License-Identifier: MIT */
/*
 * check_stall.c: stall warnings (MELY_STALL_MS, mely/observe/stall.h). A handler
 * that computes for 300 ms of CPU yields exactly one warning through the log
 * hook while it runs, naming it (by its descriptor's name, or by its
 * symbol) and giving its CPU and wall times, and the `stalls` counter says
 * 1; a slow timer callback and a slow fd watch callback are named by the
 * program's function (or the descriptor of their mely_to_t), not by the
 * runtime's dispatcher that calls them (io/timer.c's fire, io/watch.c's
 * watch_run: runname.h), on both engines; handlers that last 300-400 ms
 * without using the CPU (asleep, waiting on a condition, or runnable but
 * descheduled by threads that take their CPU) yield none, while a handler
 * computing after them in the same run does; 2,000 handlers of 1 ms of CPU
 * yield none; MELY_STALL_MS=0 yields none; at most 10 lines a second are
 * said, every stall counted; a malformed MELY_STALL_MS is refused. A static
 * handler that stalls is named by its name (slow_handler, from the
 * program's .symtab) in the warning, in a trace of it and in mely-trace's
 * tables.
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
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mely/mely.h>
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

/* The calling thread's CPU time, in ns. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Computes until this thread has used `ms` more of CPU time (what a stall
 * is: the monitor reads the thread's CPU clock). Bounded by 60 s of wall
 * time, should the machine starve the thread. */
static void burn_cpu_ms(uint64_t ms)
{
    uint64_t start = thread_cpu_ns(), give_up = now_ns() + 60000000000u;
    while (thread_cpu_ns() - start < ms * 1000000u) /* bounded: give_up */
        if (now_ns() > give_up) {
            note("%llu ms of CPU not had in 60 s", (unsigned long long)ms);
            return;
        }
}

/* Computes for arg ms of CPU, then stops the runtime. Named through dladdr
 * (exported: see the top of this file). */
void stall_test_burner(void *arg)
{
    burn_cpu_ms((uint64_t)(uintptr_t)arg);
    mely_stop(&rt);
}

static void burn_then_stop(void *arg)
{
    stall_test_burner(arg);
}

static const mely_handler_t slow_desc = {.name = "slow_300ms_handler"};

/* Computes for 1 ms, then posts itself again until `ran` reaches stop_at. */
static void short_burner(void *arg)
{
    (void)arg;
    burn_cpu_ms(1);
    if (atomic_fetch_add(&ran, 1) + 1 >= stop_at)
        mely_stop(&rt);
    else if (mely_post(&rt, 3, short_burner, NULL) != 0)
        note("repost failed");
}

/* A timer's callback, 300 ms of CPU (exported: named through dladdr). */
void stall_test_slow_timer(void *arg)
{
    stall_test_burner(arg);
}

/* An fd watch's callback: takes the byte that made the pipe readable, then
 * computes for 300 ms of CPU (exported). */
void stall_test_slow_watch(int fd, unsigned ready, void *arg)
{
    (void)ready;
    char c;
    if (read(fd, &c, 1) != 1)
        note("the watched pipe had no byte");
    stall_test_burner(arg);
}

/* Handlers that last without using the CPU (exported: a warning about them
 * would name them). */

/* Sleeps 300 ms. */
void stall_test_asleep(void *arg)
{
    (void)arg;
    sleep_us(300000);
}

/* Waits 300 ms for a condition that nobody signals. */
void stall_test_waiting(void *arg)
{
    (void)arg;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (until.tv_nsec + 300000000) / 1000000000;
    until.tv_nsec = (until.tv_nsec + 300000000) % 1000000000;
    pthread_mutex_lock(&mu);
    int err = 0;
    while (err == 0) /* bounded: ETIMEDOUT at `until` */
        err = pthread_cond_timedwait(&cv, &mu, &until);
    pthread_mutex_unlock(&mu);
}

enum { HOGS = 15, DESCHEDULED_MS = 400 };
static atomic_bool hogs_stop;
static atomic_ullong descheduled_cpu_ns; /* what stall_test_descheduled used */

/* Takes the CPU it is pinned to until hogs_stop (bounded: 10 s). */
static void *hog(void *arg)
{
    (void)arg;
    uint64_t give_up = now_ns() + 10000000000u;
    while (!atomic_load(&hogs_stop) && now_ns() < give_up)
        ;
    return NULL;
}

/* Runnable for 400 ms of wall time, but descheduled most of it: HOGS threads
 * pinned to its (pinned) worker's CPU take their fair shares, about 15/16.
 * The case, a loaded machine, made certain. */
void stall_test_descheduled(void *arg)
{
    (void)arg;
    pthread_t t[HOGS];
    unsigned started = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
    atomic_store(&hogs_stop, false);
    while (started < HOGS && pthread_create(&t[started], &attr, hog, NULL) == 0)
        started++;
    pthread_attr_destroy(&attr);
    if (started < HOGS)
        note("%u hogs started of %d", started, HOGS);
    uint64_t cpu0 = thread_cpu_ns(), t0 = now_ns();
    while (now_ns() - t0 < DESCHEDULED_MS * 1000000ull) /* bounded: the wall clock */
        ;
    atomic_store(&descheduled_cpu_ns, thread_cpu_ns() - cpu0);
    atomic_store(&hogs_stop, true);
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}

/* ---- the tests ------------------------------------------------------------------ */

/* Runs one handler of 300 ms of CPU (through descriptor desc, or fn without one). */
static void run_slow(const mely_handler_t *desc, mely_fn_t fn)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    void *arg = (void *)(uintptr_t)300;
    if (desc)
        ck_assert_int_eq(mely_post_ex(&rt, 5, MELY_PRIO_DEFAULT, desc, fn, arg, 0), 0);
    else
        ck_assert_int_eq(mely_post(&rt, 5, fn, arg), 0);
    run_bounded(&rt, 30, "a handler of 300 ms of CPU");
}

START_TEST(slow_handler_warns_once_by_descriptor_name)
{
    run_slow(&slow_desc, burn_then_stop);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "slow_300ms_handler") && strstr(rec_msg[0], "color 5"),
                  "the warning is \"%s\"", rec_msg[0]);
    /* "has run for C ms of CPU so far, W ms of wall time", C >= 100, C <= W. */
    unsigned long long cpu = 0, wall = 0;
    const char *times = strstr(rec_msg[0], "has run for ");
    ck_assert_msg(times && sscanf(times, "has run for %llu ms of CPU so far, %llu ms of wall time",
                                  &cpu, &wall) == 2,
                  "the warning is \"%s\"", rec_msg[0]);
    ck_assert_msg(cpu >= 100 && cpu <= wall, "the warning is \"%s\"", rec_msg[0]);
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

START_TEST(slow_handler_named_by_its_symbol)
{
    run_slow(NULL, stall_test_burner);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "stall_test_burner"), "the warning is \"%s\"", rec_msg[0]);
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

/* A static function: not in the dynamic symbol table (-export-dynamic
 * exports only external functions), so dladdr() cannot name it; its object's
 * .symtab does (mely/observe/symtab.c). */
static void slow_handler(void *arg)
{
    stall_test_burner(arg);
}

/* The output of `mely-trace ARGS` (its tables, or --runs), in out. */
static void read_tool(const char *args, char *out, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "python3 '%s' %s", MELY_TRACE_TOOL, args);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen(%s)", cmd);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    ck_assert_msg(pclose(p) == 0, "%s failed (python3 missing?); it said:\n%s", cmd, out);
}

/* A static handler that stalls, traced: the warning names it slow_handler,
 * and so do the trace (mely-trace --runs) and mely-trace's handler table,
 * not "check_stall+0x...". */
START_TEST(static_handler_named_in_warning_and_trace)
{
    char path[128], args[256];
    static char out[1 << 16];
    snprintf(path, sizeof(path), "/tmp/check_stall.%d.static.json", (int)getpid());
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    ck_assert_int_eq(mely_trace_start(&rt, path), 0);
    ck_assert_int_eq(mely_post(&rt, 5, slow_handler, (void *)(uintptr_t)300), 0);
    run_bounded(&rt, 30, "a static handler of 300 ms of CPU");
    ck_assert_int_ge(mely_trace_stop(&rt), 0);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "handler slow_handler ") && !strstr(rec_msg[0], "+0x"),
                  "the warning is \"%s\"", rec_msg[0]);
    ck_assert_uint_eq(stalls, 1);

    snprintf(args, sizeof(args), "--runs '%s'", path);
    read_tool(args, out, sizeof(out));
    ck_assert_msg(strstr(out, "\nR 5 ") && strstr(out, " slow_handler\n"),
                  "mely-trace --runs says:\n%s", out);
    snprintf(args, sizeof(args), "'%s'", path);
    read_tool(args, out, sizeof(out));
    unlink(path);
    ck_assert_msg(strstr(out, "\n  slow_handler ") && !strstr(out, "+0x"),
                  "mely-trace says:\n%s", out);
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

/* A timer whose callback computes for 300 ms: named by the callback, or by the
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
    run_bounded(&rt, 30, "a timer callback of 300 ms of CPU");
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    assert_named(with_desc ? "slow_300ms_handler" : "stall_test_slow_timer");
    ck_assert_uint_eq(stalls, 1);
}
END_TEST

/* An fd watch whose callback computes for 300 ms: named by the callback (_i: engine). */
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
    run_bounded(&rt, 30, "a watch callback of 300 ms of CPU");
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

/* Back-to-back runs of 1 ms of CPU, 2 s of CPU in all (500 ms in sanitizer
 * builds), each well under MELY_STALL_MS: a monitor that took them for one
 * run would see its CPU time pass 100 ms. */
START_TEST(short_handlers_never_warn)
{
    unsigned n = scaled(2000, 500, 2000);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    atomic_store(&ran, 0);
    stop_at = n;
    ck_assert_int_eq(mely_post(&rt, 3, short_burner, NULL), 0);
    run_bounded(&rt, 60, "handlers of 1 ms of CPU");
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ran), n);
    ck_assert_msg(warnings() == 0, "%u warnings, the first \"%s\"", warnings(), rec_msg[0]);
    ck_assert_uint_eq(stalls, 0);
}
END_TEST

START_TEST(stall_ms_zero_turns_warnings_off)
{
    ck_assert_int_eq(setenv("MELY_STALL_MS", "0", 1), 0);
    run_slow(&slow_desc, burn_then_stop);
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
    ck_assert_int_eq(mely_post_ex(&rt, 5, MELY_PRIO_DEFAULT, &slow_desc, burn_then_stop,
                                  (void *)(uintptr_t)80, 0),
                     0);
    run_bounded(&rt, 30, "a handler of 80 ms of CPU");
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    ck_assert_uint_eq(warnings(), 1);
    ck_assert_msg(strstr(rec_msg[0], "MELY_STALL_MS=20"), "the warning is \"%s\"", rec_msg[0]);
}
END_TEST

/* Computes for 50 ms; the last of stop_at stops the runtime. (At 20 ms a
 * loaded machine kept the monitor thread off the CPU for the whole of one
 * run, which then went unseen: 14 stalls counted of 15.) */
static void burn_50ms(void *arg)
{
    (void)arg;
    burn_cpu_ms(50);
    if (atomic_fetch_add(&ran, 1) + 1 >= stop_at)
        mely_stop(&rt);
}

/* 15 stalls in about 750 ms: each is counted, but 10 lines a second are
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
        ck_assert_int_eq(mely_post(&rt, 5, burn_50ms, NULL), 0);
    uint64_t t0 = now_ns();
    run_bounded(&rt, 30, "15 handlers of 50 ms of CPU");
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

/* Handlers that last without computing (_i), then, on the same color, one
 * that computes: the second alone is a stall. */
static const struct {
    mely_fn_t fn;
    const char *what;
} idle_runs[] = {
    {stall_test_asleep, "asleep 300 ms"},
    {stall_test_waiting, "waiting 300 ms on a condition"},
    {stall_test_descheduled, "descheduled 400 ms by 15 threads on its CPU"},
};

START_TEST(only_cpu_time_makes_a_stall)
{
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    start_recording();
    atomic_store(&descheduled_cpu_ns, 0);
    ck_assert_int_eq(mely_post(&rt, 5, idle_runs[_i].fn, NULL), 0);
    ck_assert_int_eq(mely_post(&rt, 5, stall_test_burner, (void *)(uintptr_t)300), 0);
    run_bounded(&rt, 30, idle_runs[_i].what);
    uint64_t stalls = total_stalls(&rt, 2);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    mely_set_log(NULL, NULL);
    assert_no_notes();
    char used[64] = "";
    if (idle_runs[_i].fn == stall_test_descheduled) {
        unsigned long long ms = atomic_load(&descheduled_cpu_ns) / 1000000u;
        printf("descheduled: %llu ms of CPU in %d ms\n", ms, DESCHEDULED_MS);
        snprintf(used, sizeof(used), " (the descheduled handler used %llu ms of CPU)", ms);
    }
    ck_assert_msg(warnings() == 1 && strstr(rec_msg[0], "stall_test_burner"),
                  "%s, then 300 ms of CPU: %u warnings, the first \"%s\"%s", idle_runs[_i].what,
                  warnings(), rec_msg[0], used);
    ck_assert_uint_eq(stalls, 1);
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
    tcase_add_test(tc, static_handler_named_in_warning_and_trace);
    tcase_add_loop_test(tc, slow_timer_named_by_its_callback, 0, 2 * NELEM(engines));
    tcase_add_loop_test(tc, slow_watch_named_by_its_callback, 0, NELEM(engines));
    tcase_add_test(tc, short_handlers_never_warn);
    tcase_add_loop_test(tc, only_cpu_time_makes_a_stall, 0, NELEM(idle_runs));
    tcase_add_test(tc, stall_ms_zero_turns_warnings_off);
    tcase_add_test(tc, stall_ms_sets_the_threshold);
    tcase_add_test(tc, warnings_are_rate_limited);
    tcase_add_loop_test(tc, malformed_stall_ms_is_refused, 0, NELEM(bad_values));
    return mely_test_main(s);
}
