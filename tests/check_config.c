/*
 * check_config.c: configuring a runtime (mely_config_t and mely_init() in
 * mely/mely.h): the defaults, the default worker count following the CPU
 * affinity mask, the MELY_* environment overrides, rejected values (each named
 * on stderr), and what pin and batch do once the runtime runs: where workers
 * run, that mely_run() restores its caller's CPU mask, and the same-color
 * batch threshold.
 *
 * Handlers never call ck_assert, and every wait is bounded (see
 * tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mely/mely.h"
#include "tests/testutil.h"

/* ---- helpers: stderr capture, CPUs ---------------------------------------------- */

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

/* ---- pinning, and the batch threshold -------------------------------------------------- */

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

/* ---- the suite ------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("config");

    TCase *tc = new_tcase(s, "config", 30);
    tcase_add_test(tc, config_defaults);
    tcase_add_test(tc, default_workers_follow_affinity);
    tcase_add_loop_test(tc, environment_overrides, 0, NELEM(env_cases));
    tcase_add_loop_test(tc, bad_configuration_values, 0, NELEM(cfg_cases));
    tcase_add_test(tc, init_without_handle);

    tc = new_tcase(s, "effect", 60);
    tcase_add_loop_test(tc, workers_pinned_and_affinity_restored, 0, 2);
    tcase_add_loop_test(tc, batch_threshold_bounds_same_color_runs, 0, NELEM(batch_cases));
    return mely_test_main(s);
}
