/*
 * check_api.c: the behaviour of the public API (mely/mely.h) as its header
 * documents it: configuration and environment overrides, every error code,
 * calls on handles that are not (or no longer) initialized, who may call what,
 * introspection, pinned colors, the color map's initial placement, the batch
 * threshold, statistics, and what an idle runtime costs.
 *
 * Handlers and helper threads never call ck_assert (from worker 0 it would jump
 * out of mely_run(); from another thread it would end the process with the
 * runtime running): they record what they saw, or note() a failure, and the test
 * thread asserts once mely_run() has returned. Every wait is bounded, and a
 * watchdog stops a runtime that does not finish in time.
 *
 * MELY_TEST_SCALE (default 1) multiplies the event counts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "mely/mely.h"

/* ---- helpers: scale, clock, failure notes, watchdog, stderr capture --------- */

static double test_scale(void)
{
    const char *s = getenv("MELY_TEST_SCALE");
    if (!s || !*s)
        return 1.0;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !(v > 0.0) || v > 1000.0) {
        fprintf(stderr, "MELY_TEST_SCALE=\"%s\": expected a number in (0, 1000]; using 1\n", s);
        return 1.0;
    }
    return v;
}

/* n scaled by MELY_TEST_SCALE, clamped to [min, max]. */
static unsigned scaled(unsigned n, unsigned min, unsigned max)
{
    double v = n * test_scale();
    return v < min ? min : v > max ? max : (unsigned)v;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {.tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static bool wait_flag(atomic_bool *flag, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    while (!atomic_load(flag)) {
        if (now_ns() >= deadline)
            return false;
        sleep_us(100);
    }
    return true;
}

static atomic_uint nnotes;
static char first_note[512];
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;

/* Records a failure seen outside the test thread; the first one is kept. */
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    if (atomic_fetch_add(&nnotes, 1) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&note_mu);
    vsnprintf(first_note, sizeof(first_note), fmt, ap);
    pthread_mutex_unlock(&note_mu);
    va_end(ap);
}

/* Call only when no handler or helper thread can still note(). */
static void assert_no_notes(void)
{
    unsigned n = atomic_load(&nnotes);
    pthread_mutex_lock(&note_mu);
    ck_assert_msg(n == 0, "%u failure(s) seen in handlers or helper threads; the first: %s", n,
                  first_note);
    pthread_mutex_unlock(&note_mu);
}

struct watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    atomic_bool fired;
    mely_t *m;
    struct timespec deadline;
};

static void *watchdog_main(void *arg)
{
    struct watchdog *wd = arg;
    int rc = 0;

    pthread_mutex_lock(&wd->mu);
    while (!wd->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&wd->cv, &wd->mu, &wd->deadline);
    bool fire = !wd->done;
    pthread_mutex_unlock(&wd->mu);
    if (fire) {
        atomic_store(&wd->fired, true);
        mely_stop(wd->m);
    }
    return NULL;
}

/* Stops *m after `seconds` unless watchdog_end() comes first. */
static void watchdog_start(struct watchdog *wd, mely_t *m, unsigned seconds)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&wd->mu, NULL);
    wd->done = false;
    atomic_store(&wd->fired, false);
    wd->m = m;
    clock_gettime(CLOCK_MONOTONIC, &wd->deadline);
    wd->deadline.tv_sec += seconds;
    ck_assert_int_eq(pthread_create(&wd->thread, NULL, watchdog_main, wd), 0);
}

/* Returns whether the watchdog had to stop the runtime. */
static bool watchdog_end(struct watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    wd->done = true;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    return atomic_load(&wd->fired);
}

/* mely_run() under a watchdog; fails the test if the watchdog had to stop it. */
static void run_bounded(mely_t *m, unsigned seconds, const char *what)
{
    struct watchdog wd;
    watchdog_start(&wd, m, seconds);
    int rc = mely_run(m);
    bool fired = watchdog_end(&wd);
    ck_assert_msg(rc == 0, "%s: mely_run() returned %d (%s)", what, rc, mely_strerror(rc));
    ck_assert_msg(!fired, "%s: still running after %u s", what, seconds);
}

static FILE *capture;
static int saved_stderr = -1;

/* Sends stderr to a temporary file until end_capture(), which returns what was
 * written (the library reports bad configuration values there). */
static void begin_capture(void)
{
    fflush(stderr);
    capture = tmpfile();
    ck_assert_ptr_nonnull(capture);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
    ck_assert_int_ge(dup2(fileno(capture), STDERR_FILENO), 0);
}

static const char *end_capture(void)
{
    static char text[4096];
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    rewind(capture);
    size_t n = fread(text, 1, sizeof(text) - 1, capture);
    text[n] = '\0';
    fclose(capture);
    return text;
}

static void init_runtime(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = workers;
    cfg.pin = pin;
    cfg.batch = batch;
    cfg.spin_us = spin_us;
    ck_assert_int_eq(mely_init(m, &cfg), 0);
    ck_assert_uint_eq(mely_workers(m), workers);
}

static unsigned allowed_cpus(cpu_set_t *set)
{
    CPU_ZERO(set);
    ck_assert_int_eq(sched_getaffinity(0, sizeof(*set), set), 0);
    return (unsigned)CPU_COUNT(set);
}

/* The k-th CPU of `set`, or -1. */
static int nth_cpu(const cpu_set_t *set, unsigned k)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set) && k-- == 0)
            return cpu;
    return -1;
}

static void clear_env(void)
{
    unsetenv("MELY_WORKERS");
    unsetenv("MELY_PIN");
    unsetenv("MELY_BATCH");
    unsetenv("MELY_SPIN_US");
}

/* Every test starts from a clean environment and no recorded failure. */
static void setup(void)
{
    clear_env();
    atomic_store(&nnotes, 0);
    first_note[0] = '\0';
}

static void nop(void *arg)
{
    (void)arg;
}

/* A runtime shared by the small tests below, and a handler that stops it once
 * `stop_at` events have run. */
static mely_t rt;
static atomic_uint ran;
static unsigned stop_at;
static atomic_bool beacon_ran;

static void count_and_stop(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&ran, 1) + 1 == stop_at)
        mely_stop(&rt);
}

static void beacon(void *arg)
{
    (void)arg;
    atomic_store(&beacon_ran, true);
}

/* ---- configuration ------------------------------------------------------------ */

START_TEST(config_defaults)
{
    mely_config_t cfg;
    memset(&cfg, 0xa5, sizeof(cfg));
    mely_config_init(&cfg);
    ck_assert_uint_eq(cfg.workers, 0);
    ck_assert_int_eq(cfg.pin, 1);
    ck_assert_uint_eq(cfg.batch, 10);
    ck_assert_uint_eq(cfg.spin_us, 50);
    ck_assert_uint_eq(MELY_BATCH_DEFAULT, 10);
    ck_assert_uint_eq(MELY_SPIN_US_DEFAULT, 50);
}
END_TEST

/* workers 0 means the CPUs of the process's affinity mask (not get_nprocs()). */
START_TEST(default_workers_follow_affinity)
{
    cpu_set_t set;
    unsigned ncpu = allowed_cpus(&set);
    mely_t m = {0};

    ck_assert_int_eq(mely_init(&m, NULL), 0);
    ck_assert_uint_eq(mely_workers(&m), ncpu);
    ck_assert_int_eq(mely_shutdown(&m), 0);

    mely_config_t cfg;
    mely_config_init(&cfg);
    ck_assert_int_eq(mely_init(&m, &cfg), 0);
    ck_assert_uint_eq(mely_workers(&m), ncpu);
    ck_assert_int_eq(mely_shutdown(&m), 0);

    /* Narrowed to one CPU (as taskset would), the default must follow. */
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(nth_cpu(&set, 0), &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
    int rc = mely_init(&m, NULL);
    unsigned workers = mely_workers(&m);
    int discarded = rc == 0 ? mely_shutdown(&m) : 0;
    ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(workers, 1);
    ck_assert_int_eq(discarded, 0);
}
END_TEST

static const struct env_case {
    const char *name, *value;
    int rc;
    unsigned workers; /* when rc is 0; the program's configuration asks for 2 */
} env_cases[] = {
    {"MELY_WORKERS", "3", 0, 3},
    {"MELY_WORKERS", "1", 0, 1},
    {"MELY_WORKERS", "256", 0, 256},
    {"MELY_WORKERS", "abc", MELY_EINVAL, 0},
    {"MELY_WORKERS", "0", MELY_EINVAL, 0},
    {"MELY_WORKERS", "257", MELY_EINVAL, 0},
    {"MELY_WORKERS", "1000", MELY_EINVAL, 0},
    {"MELY_WORKERS", "-1", MELY_EINVAL, 0},
    {"MELY_WORKERS", "3x", MELY_EINVAL, 0},
    {"MELY_BATCH", "0", MELY_EINVAL, 0},
    {"MELY_BATCH", "1", 0, 2},
    {"MELY_PIN", "2", MELY_EINVAL, 0},
    {"MELY_PIN", "0", 0, 2},
    {"MELY_PIN", "1", 0, 2},
    {"MELY_SPIN_US", "0", 0, 2},
    {"MELY_SPIN_US", "1000000", 0, 2},
    {"MELY_SPIN_US", "1000001", MELY_EINVAL, 0},
};

START_TEST(environment_overrides)
{
    const struct env_case *ec = &env_cases[_i];
    mely_config_t cfg;
    mely_t m = {0};

    mely_config_init(&cfg);
    cfg.workers = 2;
    ck_assert_int_eq(setenv(ec->name, ec->value, 1), 0);
    begin_capture();
    int rc = mely_init(&m, &cfg);
    const char *err = end_capture();
    unsetenv(ec->name);

    ck_assert_msg(rc == ec->rc, "%s=%s: mely_init returned %d, expected %d", ec->name, ec->value,
                  rc, ec->rc);
    if (rc == 0) {
        ck_assert_uint_eq(mely_workers(&m), ec->workers);
        ck_assert_int_eq(mely_shutdown(&m), 0);
    } else {
        ck_assert_msg(strstr(err, ec->name) != NULL, "%s=%s: stderr does not name it: \"%s\"",
                      ec->name, ec->value, err);
        /* A failed init leaves a handle every call refuses. */
        ck_assert_uint_eq(mely_workers(&m), 0);
        ck_assert_int_eq(mely_post(&m, 1, nop, NULL), MELY_ESHUTDOWN);
        ck_assert_int_eq(mely_shutdown(&m), MELY_ESHUTDOWN);
    }
}
END_TEST

static const struct cfg_case {
    const char *field; /* named on stderr when rejected */
    unsigned workers;
    int pin;
    unsigned batch, spin_us;
    int rc;
} cfg_cases[] = {
    {"workers", MELY_MAX_WORKERS + 1, 1, 10, 50, MELY_EINVAL},
    {"workers", UINT_MAX, 1, 10, 50, MELY_EINVAL},
    {"batch", 2, 1, 0, 50, MELY_EINVAL},
    {"pin", 2, 2, 10, 50, MELY_EINVAL},
    {"pin", 2, -1, 10, 50, MELY_EINVAL},
    {"spin_us", 2, 1, 10, 1000001, MELY_EINVAL},
    {"workers", MELY_MAX_WORKERS, 0, 1, 0, 0},
    {"batch", 1, 1, UINT_MAX, 1000000, 0},
};

START_TEST(bad_configuration_values)
{
    const struct cfg_case *cc = &cfg_cases[_i];
    mely_config_t cfg = {
        .workers = cc->workers, .pin = cc->pin, .batch = cc->batch, .spin_us = cc->spin_us};
    mely_t m = {0};

    begin_capture();
    int rc = mely_init(&m, &cfg);
    const char *err = end_capture();
    ck_assert_msg(rc == cc->rc,
                  "workers %u, pin %d, batch %u, spin_us %u: mely_init returned %d, expected %d",
                  cc->workers, cc->pin, cc->batch, cc->spin_us, rc, cc->rc);
    if (rc == 0) {
        ck_assert_uint_eq(mely_workers(&m), cc->workers);
        ck_assert_int_eq(mely_shutdown(&m), 0);
    } else {
        ck_assert_msg(strstr(err, cc->field) != NULL, "stderr does not name %s: \"%s\"",
                      cc->field, err);
        ck_assert_uint_eq(mely_workers(&m), 0);
        ck_assert_int_eq(mely_shutdown(&m), MELY_ESHUTDOWN);
    }
}
END_TEST

START_TEST(init_without_handle)
{
    ck_assert_int_eq(mely_init(NULL, NULL), MELY_EINVAL);
}
END_TEST

/* ---- errors of mely_post* --------------------------------------------------- */

/* Every rejected post must leave nothing queued: shutdown discards exactly the
 * accepted ones. */
START_TEST(post_errors_queue_nothing)
{
    mely_t m = {0};
    int ok = 0;

    init_runtime(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
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
    init_runtime(&m, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
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
    init_runtime(&m, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
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
    int run_same[2], run_other[2], shutdown_same[2];
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
    if (atomic_fetch_add(&busy.done, 1) + 1 == 2)
        mely_stop(&rt);
}

/* A handler (on worker 0, the caller's thread, and on worker 1) may not run any
 * runtime, nor shut its own down. */
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
    pthread_t t;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 1, beacon, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, foreign_while_running, NULL), 0);
    run_bounded(&rt, 40, "runtime stopped by a foreign thread");
    pthread_join(t, NULL);
    assert_no_notes();
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
 * parked worker. */
START_TEST(stop_from_foreign_thread_wakes_parked_workers)
{
    pthread_t t;
    init_runtime(&rt, 8, 0, MELY_BATCH_DEFAULT, 0);
    ck_assert_int_eq(mely_post(&rt, 5, beacon, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, stop_later, NULL), 0);
    run_bounded(&rt, 20, "stop from a foreign thread");
    pthread_join(t, NULL);
    assert_no_notes();
    ck_assert_int_eq(foreign_stop_rc, 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static struct {
    pthread_t main_thread;
    cpu_set_t aff[4];
    int worker[4];
    bool on_main[4];
} pinrec;

static void record_affinity(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    CPU_ZERO(&pinrec.aff[w]);
    if (pthread_getaffinity_np(pthread_self(), sizeof(pinrec.aff[w]), &pinrec.aff[w]) != 0)
        note("pthread_getaffinity_np failed on worker %u", w);
    pinrec.worker[w] = mely_current_worker();
    pinrec.on_main[w] = pthread_equal(pthread_self(), pinrec.main_thread);
    count_and_stop(NULL);
}

/*
 * pin 1: worker i runs on the i-th allowed CPU only; pin 0 (here from
 * MELY_PIN=0, overriding the program's pin 1): workers keep the process's
 * mask. Either way the caller's thread is worker 0, and its mask is restored
 * when mely_run() returns.
 */
START_TEST(workers_pinned_and_affinity_restored)
{
    bool pinned = _i == 0;
    cpu_set_t allowed;
    unsigned ncpu = allowed_cpus(&allowed);
    unsigned workers = ncpu < 4 ? ncpu : 4;

    if (!pinned)
        ck_assert_int_eq(setenv("MELY_PIN", "0", 1), 0);
    init_runtime(&rt, workers, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    unsetenv("MELY_PIN");
    pinrec.main_thread = pthread_self();
    atomic_store(&ran, 0);
    stop_at = workers;
    for (unsigned w = 0; w < workers; w++)
        ck_assert_int_eq(mely_post(&rt, MELY_COLOR_PINNED(w), record_affinity, (void *)(uintptr_t)w),
                         0);
    run_bounded(&rt, 20, "pinned handlers");
    assert_no_notes();

    for (unsigned w = 0; w < workers; w++) {
        ck_assert_int_eq(pinrec.worker[w], (int)w);
        ck_assert_msg(pinrec.on_main[w] == (w == 0), "worker %u %s the thread that called mely_run",
                      w, pinrec.on_main[w] ? "is" : "is not");
        if (pinned) {
            int cpu = nth_cpu(&allowed, w);
            ck_assert_msg(CPU_COUNT(&pinrec.aff[w]) == 1 && CPU_ISSET(cpu, &pinrec.aff[w]),
                          "worker %u: %d CPUs in its mask, expected CPU %d alone", w,
                          CPU_COUNT(&pinrec.aff[w]), cpu);
        } else {
            ck_assert_msg(CPU_EQUAL(&pinrec.aff[w], &allowed),
                          "worker %u (pin 0): mask of %d CPUs, the process has %u", w,
                          CPU_COUNT(&pinrec.aff[w]), ncpu);
        }
    }
    cpu_set_t after;
    allowed_cpus(&after);
    ck_assert_msg(CPU_EQUAL(&after, &allowed), "mely_run() left its caller on %d CPUs, had %u",
                  CPU_COUNT(&after), ncpu);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* The batch threshold: at most `batch` events of one color run back to back
 * while another color has events waiting (one worker, two colors). */
static struct {
    atomic_uint n;
    mely_color_t order[64];
} seq;

static void record_color(void *arg)
{
    (void)arg;
    unsigned k = atomic_fetch_add(&seq.n, 1);
    if (k < 64)
        seq.order[k] = (mely_color_t)mely_current_color();
    count_and_stop(NULL);
}

static const struct batch_case {
    unsigned cfg_batch;
    const char *env; /* MELY_BATCH, or NULL */
    unsigned batch;  /* in effect */
} batch_cases[] = {
    {1, NULL, 1}, {3, NULL, 3}, {10, NULL, 10}, {10, "1", 1}, {10, "3", 3},
};

START_TEST(batch_threshold_bounds_same_color_runs)
{
    const struct batch_case *bc = &batch_cases[_i];
    enum { PER_COLOR = 25 };
    const mely_color_t a = 1, b = 2;

    if (bc->env)
        ck_assert_int_eq(setenv("MELY_BATCH", bc->env, 1), 0);
    init_runtime(&rt, 1, 1, bc->cfg_batch, MELY_SPIN_US_DEFAULT);
    unsetenv("MELY_BATCH");
    atomic_store(&seq.n, 0);
    atomic_store(&ran, 0);
    stop_at = 2 * PER_COLOR;
    for (int i = 0; i < PER_COLOR; i++)
        ck_assert_int_eq(mely_post(&rt, a, record_color, NULL), 0);
    for (int i = 0; i < PER_COLOR; i++)
        ck_assert_int_eq(mely_post(&rt, b, record_color, NULL), 0);
    run_bounded(&rt, 20, "two colors on one worker");
    ck_assert_uint_eq(atomic_load(&seq.n), 2 * PER_COLOR);

    unsigned left_a = PER_COLOR, left_b = PER_COLOR, streak = 0;
    for (unsigned k = 0; k < 2 * PER_COLOR; k++) {
        mely_color_t c = seq.order[k];
        ck_assert_msg(c == a || c == b, "event %u ran with color %u", k, c);
        streak = k > 0 && seq.order[k - 1] == c ? streak + 1 : 1;
        unsigned other_left = c == a ? left_b : left_a;
        ck_assert_msg(streak <= bc->batch || other_left == 0,
                      "batch %u: %u events of color %u in a row while %u of the other waited",
                      bc->batch, streak, c, other_left);
        if (c == a)
            left_a--;
        else
            left_b--;
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- introspection ---------------------------------------------------------------- */

static const mely_color_t intro_colors[] = {0, 1, 4095, MELY_COLORS - 1, MELY_COLOR_PINNED(0),
                                            MELY_COLOR_PINNED(1)};
enum { NINTRO = sizeof(intro_colors) / sizeof(intro_colors[0]) };

static struct {
    pthread_t main_thread;
    int color[NINTRO], worker[NINTRO];
    bool on_main[NINTRO];
    int foreign_color, foreign_worker;
} intro;

static void record_identity(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    intro.color[i] = mely_current_color();
    intro.worker[i] = mely_current_worker();
    intro.on_main[i] = pthread_equal(pthread_self(), intro.main_thread);
    atomic_fetch_add(&ran, 1);
}

static void *foreign_identity(void *arg)
{
    (void)arg;
    uint64_t deadline = now_ns() + 20000000000ull;
    while (atomic_load(&ran) < NINTRO && now_ns() < deadline)
        sleep_us(100);
    if (atomic_load(&ran) < NINTRO)
        note("only %u of %u handlers ran in 20 s", atomic_load(&ran), NINTRO);
    /* Asked while the runtime runs. */
    intro.foreign_color = mely_current_color();
    intro.foreign_worker = mely_current_worker();
    mely_stop(&rt);
    return NULL;
}

START_TEST(current_color_and_worker)
{
    pthread_t t;

    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    intro.main_thread = pthread_self();
    intro.foreign_color = intro.foreign_worker = 99;
    atomic_store(&ran, 0);
    for (unsigned i = 0; i < NINTRO; i++)
        ck_assert_int_eq(mely_post(&rt, intro_colors[i], record_identity, (void *)(uintptr_t)i), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, foreign_identity, NULL), 0);
    run_bounded(&rt, 40, "identity handlers");
    pthread_join(t, NULL);
    assert_no_notes();

    for (unsigned i = 0; i < NINTRO; i++) {
        mely_color_t c = intro_colors[i];
        ck_assert_msg(intro.color[i] == (int)c, "color %u: mely_current_color() = %d", c,
                      intro.color[i]);
        ck_assert_msg(intro.worker[i] >= 0 && intro.worker[i] < 2,
                      "color %u: mely_current_worker() = %d", c, intro.worker[i]);
        ck_assert_msg(intro.on_main[i] == (intro.worker[i] == 0),
                      "color %u ran on worker %d, %s the thread that called mely_run", c,
                      intro.worker[i], intro.on_main[i] ? "which is" : "which is not");
        if (c >= MELY_COLORS)
            ck_assert_int_eq(intro.worker[i], (int)(c - MELY_COLORS));
    }
    ck_assert_int_eq(intro.foreign_color, -1);
    ck_assert_int_eq(intro.foreign_worker, -1);
    ck_assert_int_eq(mely_current_color(), -1);
    ck_assert_int_eq(mely_current_worker(), -1);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

enum { PIN_WORKERS = 3, PIN_THREADS = 3, PIN_CHILD_EVERY = 8 };

static unsigned pin_per_thread;

/* arg: the worker the event is pinned to, and whether it posts a child to the
 * next worker's pinned color. */
static void pinned_event(void *arg)
{
    uintptr_t a = (uintptr_t)arg;
    unsigned w = (unsigned)(a >> 1);

    if (mely_current_worker() != (int)w || mely_current_color() != (int)MELY_COLOR_PINNED(w))
        note("an event of MELY_COLOR_PINNED(%u) ran on worker %d with color %d", w,
             mely_current_worker(), mely_current_color());
    if (a & 1) {
        unsigned next = (w + 1) % PIN_WORKERS;
        int err = mely_post(&rt, MELY_COLOR_PINNED(next), pinned_event,
                            (void *)(uintptr_t)(next << 1));
        if (err)
            note("post from a handler: %s", mely_strerror(err));
    }
    count_and_stop(NULL);
}

static void *pin_poster(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < pin_per_thread; i++) {
        unsigned w = (t + i) % PIN_WORKERS;
        bool child = i % PIN_CHILD_EVERY == 0;
        int err = mely_post(&rt, MELY_COLOR_PINNED(w), pinned_event,
                            (void *)(uintptr_t)(w << 1 | child));
        if (err) {
            note("post from thread %u: %s", t, mely_strerror(err));
            mely_stop(&rt);
            break;
        }
    }
    return NULL;
}

/* Events of MELY_COLOR_PINNED(w), from foreign threads and from handlers on
 * other workers, all run on worker w (more workers than CPUs, unpinned). */
START_TEST(pinned_colors_run_on_their_worker)
{
    pthread_t t[PIN_THREADS];

    pin_per_thread = scaled(3000, 100, 1000000);
    init_runtime(&rt, PIN_WORKERS, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = PIN_THREADS * (pin_per_thread + (pin_per_thread + PIN_CHILD_EVERY - 1) /
                                                  PIN_CHILD_EVERY);
    for (unsigned i = 0; i < PIN_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, pin_poster, (void *)(uintptr_t)i), 0);
    run_bounded(&rt, 60, "pinned events");
    for (unsigned i = 0; i < PIN_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ran), stop_at);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static const unsigned owner_workers[] = {1, 2, 3, 7};

/* Colors start on worker color % workers (libasync-smp's placement); pinned
 * color w belongs to worker w. */
START_TEST(color_owner_initial_placement)
{
    unsigned n = owner_workers[_i];
    mely_t m = {0};

    init_runtime(&m, n, 0, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (mely_color_t c = 0; c < MELY_COLORS; c++) {
        int o = mely_color_owner(&m, c);
        if (o != (int)(c % n))
            ck_abort_msg("%u workers: color %u owned by %d, expected %u", n, c, o, c % n);
    }
    for (unsigned w = 0; w < n; w++)
        ck_assert_int_eq(mely_color_owner(&m, MELY_COLOR_PINNED(w)), (int)w);
    ck_assert_int_eq(mely_color_owner(&m, MELY_COLOR_PINNED(n)), MELY_ECOLOR);
    ck_assert_int_eq(mely_color_owner(&m, MELY_COLORS + MELY_MAX_WORKERS), MELY_ECOLOR);
    ck_assert_int_eq(mely_color_owner(&m, UINT32_MAX), MELY_ECOLOR);
    ck_assert_int_eq(mely_shutdown(&m), 0);
    ck_assert_int_eq(mely_color_owner(&m, 0), MELY_ESHUTDOWN);
}
END_TEST

/* ---- statistics ---------------------------------------------------------------------- */

START_TEST(stats_start_at_zero_and_check_arguments)
{
    mely_t m = {0};
    mely_stats_t s, zero;

    memset(&zero, 0, sizeof(zero));
    init_runtime(&m, 3, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned w = 0; w < 3; w++) {
        memset(&s, 0xa5, sizeof(s));
        ck_assert_int_eq(mely_worker_stats(&m, w, &s), 0);
        ck_assert_msg(memcmp(&s, &zero, sizeof(s)) == 0, "worker %u: counters not zero after init",
                      w);
    }
    ck_assert_int_eq(mely_worker_stats(&m, 3, &s), MELY_EINVAL);
    ck_assert_int_eq(mely_worker_stats(&m, UINT_MAX, &s), MELY_EINVAL);
    ck_assert_int_eq(mely_worker_stats(&m, 0, NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_shutdown(&m), 0);
}
END_TEST

enum { MAXW = 2 };

static struct {
    unsigned n_handler, n_foreign;
    mely_color_t seed_color;
    /* expected counts, tallied by the poster from mely_color_owner() just
     * before each post to a color that has never had an event (so no steal can
     * move it in between) */
    unsigned local[MAXW], remote[MAXW], foreign[MAXW];
    atomic_bool seeded;
} sc;

static void seeder(void *arg)
{
    (void)arg;
    int self = mely_current_worker();
    if (self < 0 || self >= MAXW) {
        note("seeder on worker %d", self);
        return;
    }
    for (unsigned i = 0; i < sc.n_handler; i++) {
        mely_color_t c = 1000 + i;
        int o = mely_color_owner(&rt, c);
        if (o == self)
            sc.local[self]++;
        else
            sc.remote[self]++;
        int err = mely_post(&rt, c, count_and_stop, NULL);
        if (err)
            note("post from seeder: %s", mely_strerror(err));
    }
    atomic_store(&sc.seeded, true);
    count_and_stop(NULL);
}

static void *foreign_poster(void *arg)
{
    (void)arg;
    if (!wait_flag(&sc.seeded, 20000)) {
        note("the seeder did not run within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    for (unsigned i = 0; i < sc.n_foreign; i++) {
        mely_color_t c = 20000 + i;
        int o = mely_color_owner(&rt, c);
        if (o >= 0 && o < MAXW)
            sc.foreign[o]++;
        int err = mely_post(&rt, c, count_and_stop, NULL);
        if (err)
            note("post from a foreign thread: %s", mely_strerror(err));
    }
    return NULL;
}

/* Each post counts once, where the header says: local or remote for the
 * posting worker, foreign for the owner when the poster is no worker; every
 * handler that ran counts once in events_run. */
START_TEST(stats_count_posts_and_runs)
{
    unsigned workers = _i + 1;
    pthread_t t;

    memset(&sc, 0, sizeof(sc));
    sc.n_handler = scaled(2000, 100, 15000);
    sc.n_foreign = scaled(2000, 100, 40000);
    sc.seed_color = 100;
    init_runtime(&rt, workers, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    atomic_store(&ran, 0);
    stop_at = 1 + sc.n_handler + sc.n_foreign;
    int seed_owner = mely_color_owner(&rt, sc.seed_color);
    ck_assert_int_ge(seed_owner, 0);
    sc.foreign[seed_owner]++;
    ck_assert_int_eq(mely_post(&rt, sc.seed_color, seeder, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, foreign_poster, NULL), 0);
    run_bounded(&rt, 60, "counted events");
    pthread_join(t, NULL);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&ran), stop_at);

    uint64_t events = 0, posts = 0;
    for (unsigned w = 0; w < workers; w++) {
        mely_stats_t s;
        ck_assert_int_eq(mely_worker_stats(&rt, w, &s), 0);
        ck_assert_msg(s.posts_local == sc.local[w] && s.posts_remote == sc.remote[w] &&
                          s.posts_foreign == sc.foreign[w],
                      "worker %u: posts local/remote/foreign %" PRIu64 "/%" PRIu64 "/%" PRIu64
                      ", expected %u/%u/%u",
                      w, s.posts_local, s.posts_remote, s.posts_foreign, sc.local[w], sc.remote[w],
                      sc.foreign[w]);
        events += s.events_run;
        posts += s.posts_local + s.posts_remote + s.posts_foreign;
    }
    ck_assert_uint_eq(events, stop_at);
    ck_assert_uint_eq(posts, stop_at);
    if (workers == 1)
        ck_assert_uint_eq(sc.local[0], sc.n_handler);
    else
        ck_assert_uint_gt(sc.remote[0] + sc.remote[1], 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static struct {
    atomic_bool a, b;
} pk;

static void set_pk_a(void *arg)
{
    (void)arg;
    atomic_store(&pk.a, true);
}

static void set_pk_b(void *arg)
{
    (void)arg;
    atomic_store(&pk.b, true);
}

static void relay_to_worker1(void *arg)
{
    (void)arg;
    int err = mely_post(&rt, MELY_COLOR_PINNED(1), set_pk_b, NULL);
    if (err)
        note("relay: %s", mely_strerror(err));
}

static mely_stats_t stats_of(unsigned w)
{
    mely_stats_t s;
    memset(&s, 0, sizeof(s));
    if (mely_worker_stats(&rt, w, &s) != 0)
        note("mely_worker_stats(%u) failed", w);
    return s;
}

/* Polls worker w's counter at byte offset `off` until it exceeds `than`, for at
 * most 5 s (counters are updated around the event that a test waits for, not
 * necessarily before it). */
static bool counter_exceeds(unsigned w, size_t off, uint64_t than)
{
    uint64_t deadline = now_ns() + 5000000000ull;
    for (;;) {
        mely_stats_t s = stats_of(w);
        uint64_t v;
        memcpy(&v, (const char *)&s + off, sizeof(v));
        if (v > than)
            return true;
        if (now_ns() >= deadline)
            return false;
        sleep_us(200);
    }
}

static void *park_observer(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000)) {
        note("no handler ran within 20 s");
        goto out;
    }
    sleep_us(100000); /* idle, with spin_us 0 */
    for (unsigned w = 0; w < 2; w++)
        if (!counter_exceeds(w, offsetof(mely_stats_t, parks), 0))
            note("worker %u did not park while idle", w);

    mely_stats_t before = stats_of(1);
    if (mely_post(&rt, MELY_COLOR_PINNED(1), set_pk_a, NULL) != 0 || !wait_flag(&pk.a, 5000)) {
        note("a post to parked worker 1 did not run within 5 s");
        goto out;
    }
    if (!counter_exceeds(1, offsetof(mely_stats_t, wakeups), before.wakeups))
        note("worker 1 was woken by a post but its wakeups stayed %" PRIu64, before.wakeups);
    /* Compared with the count from before the post: worker 1 may have parked
     * again already. */
    if (!counter_exceeds(1, offsetof(mely_stats_t, parks), before.parks))
        note("worker 1 went idle again but its parks stayed %" PRIu64, before.parks);

    /* Worker 0, woken by us, wakes parked worker 1 with a post. */
    uint64_t sent = stats_of(0).wakes_sent;
    if (mely_post(&rt, MELY_COLOR_PINNED(0), relay_to_worker1, NULL) != 0 ||
        !wait_flag(&pk.b, 5000)) {
        note("a relayed post to parked worker 1 did not run within 5 s");
        goto out;
    }
    if (!counter_exceeds(0, offsetof(mely_stats_t, wakes_sent), sent))
        note("worker 0 woke worker 1 but its wakes_sent stayed %" PRIu64, sent);
out:
    mely_stop(&rt);
    return NULL;
}

START_TEST(stats_count_parks_and_wakeups)
{
    pthread_t t;
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, 0);
    ck_assert_int_eq(mely_post(&rt, 3, beacon, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, park_observer, NULL), 0);
    run_bounded(&rt, 60, "parks and wake-ups");
    pthread_join(t, NULL);
    assert_no_notes();
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- idle cost ------------------------------------------------------------------------ */

static struct {
    double cpu_s, wall_s;
} idle_m;

static double rusage_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void *idle_meter(void *arg)
{
    (void)arg;
    if (!wait_flag(&beacon_ran, 20000)) {
        note("no handler ran within 20 s");
        mely_stop(&rt);
        return NULL;
    }
    sleep_us(200000); /* let the workers settle */
    double cpu0 = rusage_cpu_s();
    uint64_t t0 = now_ns();
    sleep_us(1000000);
    idle_m.cpu_s = rusage_cpu_s() - cpu0;
    idle_m.wall_s = (now_ns() - t0) / 1e9;
    mely_stop(&rt);
    return NULL;
}

static const struct {
    unsigned workers;
    int pin;
} idle_shapes[] = {{2, 1}, {8, 0}};

/* A runtime with nothing to do must sleep: the whole process (workers,
 * this meter, a sanitizer's threads) may use at most 10% of one core. */
START_TEST(idle_runtime_uses_no_cpu)
{
    pthread_t t;
    init_runtime(&rt, idle_shapes[_i].workers, idle_shapes[_i].pin, MELY_BATCH_DEFAULT,
                 MELY_SPIN_US_DEFAULT);
    ck_assert_int_eq(mely_post(&rt, 1, beacon, NULL), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, idle_meter, NULL), 0);
    run_bounded(&rt, 30, "idle runtime");
    pthread_join(t, NULL);
    assert_no_notes();
    ck_assert_msg(idle_m.wall_s >= 0.99, "the idle period lasted %.3f s", idle_m.wall_s);
    ck_assert_msg(idle_m.cpu_s < 0.10 * idle_m.wall_s,
                  "%u idle workers used %.1f ms of CPU in %.3f s (bound: 10%% of one core)",
                  idle_shapes[_i].workers, idle_m.cpu_s * 1e3, idle_m.wall_s);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- messages ------------------------------------------------------------------------- */

START_TEST(strerror_messages_are_distinct)
{
    const int codes[] = {MELY_EINVAL, MELY_ENOMEM,   MELY_EBUSY, MELY_ESHUTDOWN,
                         MELY_ECOLOR, MELY_EPRIO,    MELY_ENOFN, -EPERM,
                         -ENOENT,     -ETIMEDOUT,    -EIO,       -ECONNREFUSED};
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
    watchdog_start(&wd, &two.m2, 40);
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

/* ---- the suite ------------------------------------------------------------------------- */

#define NELEM(a) (int)(sizeof(a) / sizeof((a)[0]))

static TCase *new_tcase(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");

    TCase *tc = new_tcase(s, "config", 30);
    tcase_add_test(tc, config_defaults);
    tcase_add_test(tc, default_workers_follow_affinity);
    tcase_add_loop_test(tc, environment_overrides, 0, NELEM(env_cases));
    tcase_add_loop_test(tc, bad_configuration_values, 0, NELEM(cfg_cases));
    tcase_add_test(tc, init_without_handle);

    tc = new_tcase(s, "errors", 30);
    tcase_add_test(tc, post_errors_queue_nothing);
    tcase_add_test(tc, zeroed_handle_refuses_calls);
    tcase_add_test(tc, shut_down_handle_refuses_calls);
    tcase_add_test(tc, strerror_messages_are_distinct);

    tc = new_tcase(s, "run", 60);
    tcase_add_test(tc, run_from_handler_is_busy);
    tcase_add_test(tc, run_and_shutdown_while_running_are_busy);
    tcase_add_test(tc, stop_before_run_returns_at_once);
    tcase_add_test(tc, stop_from_foreign_thread_wakes_parked_workers);
    tcase_add_loop_test(tc, workers_pinned_and_affinity_restored, 0, 2);
    tcase_add_loop_test(tc, batch_threshold_bounds_same_color_runs, 0, NELEM(batch_cases));
    tcase_add_test(tc, two_runtimes_post_to_each_other);

    tc = new_tcase(s, "introspection", 60);
    tcase_add_test(tc, current_color_and_worker);
    tcase_add_test(tc, pinned_colors_run_on_their_worker);
    tcase_add_loop_test(tc, color_owner_initial_placement, 0, NELEM(owner_workers));

    tc = new_tcase(s, "stats", 60);
    tcase_add_test(tc, stats_start_at_zero_and_check_arguments);
    tcase_add_loop_test(tc, stats_count_posts_and_runs, 0, MAXW);
    tcase_add_test(tc, stats_count_parks_and_wakeups);

    tc = new_tcase(s, "idle", 60);
    tcase_add_loop_test(tc, idle_runtime_uses_no_cpu, 0, NELEM(idle_shapes));
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(api_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
