/* SPDX-License-Identifier: MIT */
/*
 * check_signal.c: signal watches and SIGPIPE, through the public API
 * (include/mely/mely.h):
 *  - mely_signal(): each delivery (raise, kill, pthread_kill, from foreign
 *    threads and into a worker) runs the handler as an ordinary event of its
 *    color, on a worker, never inside the signal handler (it waits for the
 *    color's running event), with ready MELY_SIGNAL and fd the signal number;
 *    deliveries while one is queued merge; several watches of one signal each
 *    run; removal stops delivery and restores the previous disposition;
 *  - bad arguments; a signal that arrives before mely_run() is delivered;
 *  - the synchronous faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
 *    SIGSYS) are refused, and a fault in a handler still ends the process;
 *  - SIGPIPE is ignored after mely_init() (a write to a closed peer returns
 *    EPIPE), unless keep_sigpipe / MELY_KEEP_SIGPIPE=1.
 * Check runs each test in its own process, so dispositions do not leak from
 * one test to the next; each test still sets the ones it relies on.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

#define SIG_COLOR ((mely_color_t)21)

static const struct shape sig_shapes[] = {
    {.workers = 2, .pin = 1},
    {.workers = 2, .pin = 1, .steal = "all"},
    {.workers = 8, .pin = 0, .steal = "base"},
};

static void set_disposition(int signo, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(signo, &sa, NULL), 0);
}

static void (*disposition(int signo))(int)
{
    struct sigaction sa;
    ck_assert_int_eq(sigaction(signo, NULL, &sa), 0);
    return sa.sa_handler;
}

/* ---- deliveries ---------------------------------------------------------------------- */

static struct {
    pthread_t main_thread;       /* worker 0 while mely_run() runs */
    atomic_uint runs;
    atomic_bool blocker_running, blocker_done, order_checked;
    atomic_bool check_order;     /* the next run must come after the blocker */
} dl;

static int dl_arg;

static void dl_handler(int fd, unsigned ready, void *arg)
{
    int w = mely_current_worker();
    if (fd != SIGUSR1 || ready != MELY_SIGNAL || arg != &dl_arg)
        note("signal handler called with fd %d, ready 0x%x, arg %p", fd, ready, arg);
    if (mely_current_color() != (int)SIG_COLOR)
        note("signal handler ran as color %d, not %u", mely_current_color(), SIG_COLOR);
    if (w < 0)
        note("signal handler ran on a thread that is no worker");
    else if (mely_color_owner(&rt, SIG_COLOR) != w)
        note("signal handler on worker %d, its color lives on %d", w,
             mely_color_owner(&rt, SIG_COLOR));
    if (atomic_load(&dl.check_order)) {
        if (!atomic_load(&dl.blocker_done))
            note("the signal's handler ran while its color's event was running");
        atomic_store(&dl.order_checked, true);
    }
    atomic_fetch_add(&dl.runs, 1);
}

/* An event of the signal's color that runs while the signal arrives. */
static void dl_blocker(void *arg)
{
    (void)arg;
    atomic_store(&dl.blocker_running, true);
    sleep_us(30000);
    atomic_store(&dl.blocker_done, true);
}

/* Delivers once by `how` and waits for exactly one more run. */
static bool deliver(const char *how, unsigned expect)
{
    int err = 0;
    if (strcmp(how, "raise") == 0)
        err = raise(SIGUSR1);
    else if (strcmp(how, "kill") == 0)
        err = kill(getpid(), SIGUSR1);
    else if (strcmp(how, "pthread_kill to itself") == 0)
        err = pthread_kill(pthread_self(), SIGUSR1);
    else
        err = pthread_kill(dl.main_thread, SIGUSR1);
    if (err != 0) {
        note("%s: %s", how, strerror(errno));
        return false;
    }
    if (!wait_count(&dl.runs, expect, 5000)) {
        note("%s: the handler did not run within 5 s", how);
        return false;
    }
    sleep_us(20000);
    if (atomic_load(&dl.runs) != expect) {
        note("%s: %u runs for %u deliveries", how, atomic_load(&dl.runs), expect);
        return false;
    }
    return true;
}

static void *dl_driver(void *arg)
{
    (void)arg;
    static const char *const hows[] = {"raise", "kill", "pthread_kill to itself",
                                       "pthread_kill to worker 0"};
    unsigned n = 0;
    for (int i = 0; i < NELEM(hows); i++)
        if (!deliver(hows[i], ++n))
            goto out;

    /* While an event of its color runs, the signal's event waits for it. */
    atomic_store(&dl.check_order, true);
    if (mely_post(&rt, SIG_COLOR, dl_blocker, NULL) != 0 ||
        !wait_flag(&dl.blocker_running, 5000)) {
        note("the blocker did not run");
        goto out;
    }
    if (!deliver("raise", ++n))
        goto out;
    atomic_store(&dl.check_order, false);

    /* Ten at once: merged, never more runs than deliveries. */
    for (int i = 0; i < 10; i++)
        raise(SIGUSR1);
    if (!wait_count(&dl.runs, n + 1, 5000))
        note("ten deliveries: no run");
    sleep_us(50000);
    unsigned extra = atomic_load(&dl.runs) - n;
    if (extra < 1 || extra > 10)
        note("ten deliveries gave %u runs", extra);
out:
    mely_stop(&rt);
    return NULL;
}

/*
 * SIGUSR1 raised from a foreign thread, sent by kill(), by pthread_kill() to
 * that thread and to worker 0: each delivery runs the handler once, as an
 * event of its color on the worker that owns it, with fd SIGUSR1, ready
 * MELY_SIGNAL and its argument; a delivery while the color's event runs
 * waits for it; ten deliveries at once give 1 to 10 runs.
 */
START_TEST(signal_runs_as_a_colored_event)
{
    mely_watch_t *w;
    memset(&dl, 0, sizeof(dl));
    dl.main_thread = pthread_self();
    set_disposition(SIGUSR1, SIG_DFL);
    init_runtime_shape(&rt, &sig_shapes[_i], MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(SIG_COLOR), dl_handler, &dl_arg, &w), 0);
    run_with_helper(&rt, dl_driver, NULL, 60, shape_name(&sig_shapes[_i]));
    ck_assert(atomic_load(&dl.order_checked));
    ck_assert_int_eq(mely_watch_remove(w), 0);
    ck_assert_ptr_eq(disposition(SIGUSR1), SIG_DFL);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- several watches, removal, dispositions ---------------------------------------------- */

enum { NSW = 3 };

static struct {
    atomic_uint runs[NSW];
    atomic_uint total;
} sw;

static volatile sig_atomic_t own_caught;

static void own_handler(int signo)
{
    (void)signo;
    own_caught++;
}

static void sw_handler(int fd, unsigned ready, void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    (void)fd;
    (void)ready;
    atomic_fetch_add(&sw.runs[i], 1);
    atomic_fetch_add(&sw.total, 1);
}

static mely_watch_t *sw_w[NSW];

static void *sw_driver(void *arg)
{
    (void)arg;
    /* All three run for one delivery. */
    raise(SIGUSR2);
    if (!wait_count(&sw.total, NSW, 5000))
        note("one delivery, three watches: %u runs", atomic_load(&sw.total));
    sleep_us(20000);
    /* Watch 0 removed: the two others run, it does not. */
    int err = mely_watch_remove(sw_w[0]);
    if (err)
        note("mely_watch_remove: %s", mely_strerror(err));
    raise(SIGUSR2);
    if (!wait_count(&sw.total, NSW + 2, 5000))
        note("after one removal: %u runs", atomic_load(&sw.total));
    sleep_us(20000);
    if (own_caught)
        note("the previous handler ran while mely watched the signal");
    /* The last two removed: the previous handler is back and gets the signal. */
    mely_watch_remove(sw_w[1]);
    mely_watch_remove(sw_w[2]);
    raise(SIGUSR2);
    sleep_us(50000);
    mely_stop(&rt);
    return NULL;
}

/*
 * Three watches of SIGUSR2 (over a handler of the test's own): one delivery
 * runs each once; a removed watch no longer runs while the others do; once
 * the last is removed, the test's handler is the disposition again and gets
 * the next delivery. SIG_DFL and SIG_IGN come back the same way.
 */
START_TEST(several_watches_and_removal)
{
    memset(&sw, 0, sizeof(sw));
    own_caught = 0;
    set_disposition(SIGUSR2, own_handler);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    const mely_color_t colors[NSW] = {5, 6, MELY_COLOR_PINNED(1)};
    for (unsigned i = 0; i < NSW; i++)
        ck_assert_int_eq(mely_signal(&rt, SIGUSR2, MELY_TO(colors[i]), sw_handler,
                                     (void *)(uintptr_t)i, &sw_w[i]),
                         0);
    ck_assert_ptr_ne(disposition(SIGUSR2), own_handler);
    run_with_helper(&rt, sw_driver, NULL, 60, "three watches of SIGUSR2");
    ck_assert_uint_eq(atomic_load(&sw.runs[0]), 1);
    ck_assert_uint_eq(atomic_load(&sw.runs[1]), 2);
    ck_assert_uint_eq(atomic_load(&sw.runs[2]), 2);
    ck_assert_ptr_eq(disposition(SIGUSR2), own_handler);
    ck_assert_int_eq(own_caught, 1);

    /* SIG_IGN and SIG_DFL are restored too. */
    void (*const before[])(int) = {SIG_IGN, SIG_DFL};
    for (int i = 0; i < NELEM(before); i++) {
        mely_watch_t *w;
        set_disposition(SIGUSR1, before[i]);
        ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(1), sw_handler, NULL, &w), 0);
        ck_assert_ptr_ne(disposition(SIGUSR1), before[i]);
        ck_assert_int_eq(mely_watch_remove(w), 0);
        ck_assert_ptr_eq(disposition(SIGUSR1), before[i]);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- before mely_run() --------------------------------------------------------------------- */

static atomic_uint early_runs;

static void early_handler(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
    atomic_fetch_add(&early_runs, 1);
    mely_stop(&rt);
}

/* A signal raised after mely_signal() but before mely_run() runs its handler
 * once the runtime runs. */
START_TEST(signal_before_run_is_delivered)
{
    mely_watch_t *w;
    atomic_store(&early_runs, 0);
    set_disposition(SIGUSR1, SIG_DFL);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(3), early_handler, NULL, &w), 0);
    ck_assert_int_eq(raise(SIGUSR1), 0);
    run_bounded(&rt, 30, "a signal raised before mely_run()");
    ck_assert_uint_eq(atomic_load(&early_runs), 1);
    ck_assert_int_eq(mely_watch_remove(w), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------ */

static void nop_sig(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    (void)arg;
}

/*
 * Signals that cannot be caught or do not exist (SIGKILL, SIGSTOP, 0, -1,
 * NSIG, 1000), NULL fn or out: MELY_EINVAL; bad colors and priorities:
 * MELY_ECOLOR, MELY_EPRIO; an uninitialized runtime: MELY_ESHUTDOWN. None
 * changes a disposition.
 */
START_TEST(signal_errors)
{
    mely_t none = {0};
    mely_watch_t *w = NULL;
    set_disposition(SIGUSR1, SIG_DFL);
    ck_assert_int_eq(mely_signal(&none, SIGUSR1, MELY_TO(1), nop_sig, NULL, &w), MELY_ESHUTDOWN);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    static const int bad[] = {SIGKILL, SIGSTOP, 0, -1, NSIG, 1000};
    for (int i = 0; i < NELEM(bad); i++)
        ck_assert_msg(mely_signal(&rt, bad[i], MELY_TO(1), nop_sig, NULL, &w) == MELY_EINVAL,
                      "signal %d accepted", bad[i]);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(1), NULL, NULL, &w), MELY_EINVAL);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(1), nop_sig, NULL, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(MELY_COLOR_PINNED(2)), nop_sig, NULL, &w),
                     MELY_ECOLOR);
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, MELY_TO(UINT32_MAX), nop_sig, NULL, &w),
                     MELY_ECOLOR);
    mely_to_t bad_prio = {1, MELY_PRIO_MAX + 1, NULL};
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, bad_prio, nop_sig, NULL, &w), MELY_EPRIO);
    bad_prio.prio = -1;
    ck_assert_int_eq(mely_signal(&rt, SIGUSR1, bad_prio, nop_sig, NULL, &w), MELY_EPRIO);
    ck_assert_ptr_eq(disposition(SIGUSR1), SIG_DFL);
    ck_assert_ptr_eq(w, NULL);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- synchronous faults ------------------------------------------------------------------ */

static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};

/*
 * The signals the kernel raises at a thread's own instruction are refused
 * (MELY_EINVAL), each in its own test, and the disposition stays SIG_DFL: a
 * watch returns from the signal handler, and the faulting instruction runs
 * again (mely/io/watch.c, signal_watchable).
 */
START_TEST(fault_signals_are_refused)
{
    int signo = faults[_i];
    mely_watch_t *w = NULL;
    set_disposition(signo, SIG_DFL);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int err = mely_signal(&rt, signo, MELY_TO(1), nop_sig, NULL, &w);
    ck_assert_msg(err == MELY_EINVAL, "mely_signal(%s): %d (%s), not MELY_EINVAL",
                  strsignal(signo), err, mely_strerror(err));
    ck_assert_ptr_eq(w, NULL);
    ck_assert_ptr_eq(disposition(signo), SIG_DFL);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* The child's failures, apart from what a sanitizer's own exit codes say. */
enum { CHILD_INIT_FAILED = 90, CHILD_POST_FAILED, CHILD_RAN_ON };

static void crash(void *arg)
{
    (void)arg;
    volatile int *volatile p = NULL; /* volatile twice: the store is made */
    *p = 1;
}

/*
 * A program that asks for SIGSEGV (the refusal ignored, as a program that
 * never checked) and then faults in a handler ends, killed by SIGSEGV, and
 * does not loop. Before the refusal the watch's signal handler returned to
 * the faulting store, again and again: a child that still runs after 20 s is
 * that loop. A sanitizer build reports the fault and exits (1..89) instead.
 */
START_TEST(a_fault_in_a_handler_still_crashes)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* No core file left behind by the test. */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        set_disposition(SIGSEGV, SIG_DFL);
        mely_config_t cfg;
        mely_config_init(&cfg);
        cfg.workers = 2;
        if (mely_init(&rt, &cfg) != 0)
            _exit(CHILD_INIT_FAILED);
        mely_watch_t *w;
        (void)mely_signal(&rt, SIGSEGV, MELY_TO(1), nop_sig, NULL, &w);
        if (mely_post(&rt, 2, crash, NULL) != 0)
            _exit(CHILD_POST_FAILED);
        mely_run(&rt);
        _exit(CHILD_RAN_ON);
    }
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 2000 && got == 0; i++) { /* 20 s at most */
        got = waitpid(pid, &status, WNOHANG);
        if (got == 0)
            sleep_us(10000);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ck_abort_msg("the child still ran 20 s after its fault: the fault loops");
    }
    ck_assert_int_eq(got, pid);
    bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
    bool reported = WIFEXITED(status) && WEXITSTATUS(status) > 0 && WEXITSTATUS(status) < 90;
    ck_assert_msg(killed || reported, "the child ended with status %#x", status);
}
END_TEST

/* ---- SIGPIPE ------------------------------------------------------------------------------- */

/*
 * After mely_init() with the defaults, SIGPIPE is ignored: a write to a
 * socket whose peer is closed returns EPIPE and the process goes on.
 * (keep_sigpipe and MELY_KEEP_SIGPIPE: the next test.)
 */
START_TEST(sigpipe_ignored_by_default)
{
    set_disposition(SIGPIPE, SIG_DFL);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_ptr_eq(disposition(SIGPIPE), SIG_IGN);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    errno = 0;
    ck_assert_int_eq(write(sv[0], "x", 1), -1);
    ck_assert_int_eq(errno, EPIPE);
    close(sv[0]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* keep_sigpipe from the configuration and MELY_KEEP_SIGPIPE from the
 * environment (which wins); SIG_DFL before mely_init(). */
static const struct {
    int cfg;
    const char *env; /* NULL: unset */
    bool kept;
} keep_cases[] = {
    {1, NULL, true}, {0, "1", true}, {1, "0", false}, {0, "0", false}, {0, NULL, false},
};

/*
 * keep_sigpipe = 1, or MELY_KEEP_SIGPIPE=1, leaves SIGPIPE's disposition as
 * it was (checked with sigaction, no SIGPIPE is sent); MELY_KEEP_SIGPIPE=0
 * wins over keep_sigpipe = 1; MELY_KEEP_SIGPIPE=2 is refused.
 */
START_TEST(keep_sigpipe_leaves_it_alone)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    ck_assert_int_eq(cfg.keep_sigpipe, 0);
    cfg.workers = 2;
    cfg.keep_sigpipe = keep_cases[_i].cfg;
    if (keep_cases[_i].env)
        setenv("MELY_KEEP_SIGPIPE", keep_cases[_i].env, 1);
    set_disposition(SIGPIPE, SIG_DFL);
    ck_assert_int_eq(mely_init(&rt, &cfg), 0);
    ck_assert_msg(disposition(SIGPIPE) == (keep_cases[_i].kept ? SIG_DFL : SIG_IGN),
                  "keep_sigpipe %d, MELY_KEEP_SIGPIPE %s: SIGPIPE %s", keep_cases[_i].cfg,
                  keep_cases[_i].env ? keep_cases[_i].env : "unset",
                  keep_cases[_i].kept ? "not left alone" : "not ignored");
    ck_assert_int_eq(mely_shutdown(&rt), 0);

    setenv("MELY_KEEP_SIGPIPE", "2", 1);
    set_disposition(SIGPIPE, SIG_DFL);
    ck_assert_int_eq(mely_init(&rt, &cfg), MELY_EINVAL);
    ck_assert_ptr_eq(disposition(SIGPIPE), SIG_DFL);
    unsetenv("MELY_KEEP_SIGPIPE");
}
END_TEST

/* ---- the suite ----------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("signal");

    TCase *tc = new_tcase(s, "signals", 60);
    tcase_add_loop_test(tc, signal_runs_as_a_colored_event, 0, NELEM(sig_shapes));
    tcase_add_test(tc, several_watches_and_removal);
    tcase_add_test(tc, signal_before_run_is_delivered);
    tcase_add_test(tc, signal_errors);
    tcase_add_loop_test(tc, fault_signals_are_refused, 0, NELEM(faults));
    tcase_add_test(tc, a_fault_in_a_handler_still_crashes);

    tc = new_tcase(s, "sigpipe", 30);
    tcase_add_test(tc, sigpipe_ignored_by_default);
    tcase_add_loop_test(tc, keep_sigpipe_leaves_it_alone, 0, NELEM(keep_cases));
    return mely_test_main(s);
}
