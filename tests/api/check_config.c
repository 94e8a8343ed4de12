/* SPDX-License-Identifier: MIT */
/*
 * check_config.c: configuring a runtime (mely_config_t and mely_init() in
 * include/mely/mely.h): the defaults, the default worker count following the CPU
 * affinity mask, the MELY_* environment overrides, rejected values (each named
 * on stderr; of several, the first in a fixed order), the steal policies and
 * engines accepted (alone, combined, from the environment), and what pin,
 * batch and engine do once the runtime runs:
 * where workers run, that mely_run() restores its caller's CPU mask, the
 * same-color batch threshold, and which engine serves the events.
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
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- helpers: the environment, CPUs ---------------------------------------------- */

/* mely_init(m, cfg) with up to two MELY_* variables set (env[k][0] names
 * one, env[k][1] its value: NULL leaves it unset; a NULL name ends the list)
 * and stderr captured into *err; the variables are unset again after. */
static int init_with_env(mely_t *m, const mely_config_t *cfg, const char *const (*env)[2],
                         const char **err)
{
    for (int k = 0; k < 2 && env[k][0]; k++)
        if (env[k][1])
            ck_assert_int_eq(setenv(env[k][0], env[k][1], 1), 0);
    begin_capture();
    int rc = mely_init(m, cfg);
    *err = end_capture();
    for (int k = 0; k < 2 && env[k][0]; k++)
        unsetenv(env[k][0]);
    return rc;
}

/* Where the table-driven tests start: the defaults, with 2 workers. */
static mely_config_t two_workers(void)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
    return cfg;
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
    ck_assert_ptr_null(cfg.steal);
    ck_assert_ptr_null(cfg.engine);
    ck_assert_uint_eq(MELY_BATCH_DEFAULT, 10);
    ck_assert_uint_eq(MELY_SPIN_US_DEFAULT, 50);
    ck_assert_uint_eq(cfg.event_budget_mb, MELY_EVENT_BUDGET_MB_DEFAULT);
    ck_assert_uint_eq(MELY_EVENT_BUDGET_MB_DEFAULT, 1024);
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
    {"MELY_TOPOLOGY", "sysfs", 0, 2},
    {"MELY_TOPOLOGY", "hwloc", 0, 2},
    {"MELY_TOPOLOGY", "numa", MELY_EINVAL, 0},
    {"MELY_TOPOLOGY", "", MELY_EINVAL, 0},
    {"MELY_EVENT_BUDGET_MB", "2", 0, 2}, /* the least for 2 workers */
    {"MELY_EVENT_BUDGET_MB", "4194304", 0, 2}, /* MELY_EVENT_BUDGET_MB_MAX */
    {"MELY_EVENT_BUDGET_MB", "1", MELY_EINVAL, 0},
    {"MELY_EVENT_BUDGET_MB", "0", MELY_EINVAL, 0},
    {"MELY_EVENT_BUDGET_MB", "4194305", MELY_EINVAL, 0},
    {"MELY_EVENT_BUDGET_MB", "1G", MELY_EINVAL, 0},
};

START_TEST(environment_overrides)
{
    const struct env_case *ec = &env_cases[_i];
    mely_config_t cfg = two_workers();
    const char *const env[2][2] = {{ec->name, ec->value}};
    const char *err;
    mely_t m = {0};

    int rc = init_with_env(&m, &cfg, env, &err);

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

/* ---- steal policies and engines ------------------------------------------------ */

static const struct policy_case {
    const char *steal, *engine;
    int rc;
    const char *named; /* for a refusal: what stderr must name (NULL: anything) */
} policy_cases[] = {
    /* every word alone, on the mely engine */
    {NULL, NULL, 0, NULL},
    {"off", NULL, 0, NULL},
    {"base", NULL, 0, NULL},
    {"locality", NULL, 0, NULL},
    {"timeleft", NULL, 0, NULL},
    {"penalty", NULL, 0, NULL},
    {"measured", NULL, 0, NULL},
    {"all", NULL, 0, NULL},
    /* combinations, in any order */
    {"base+locality", NULL, 0, NULL},
    {"locality+timeleft", NULL, 0, NULL},
    {"timeleft+locality", NULL, 0, NULL},
    {"timeleft+penalty", NULL, 0, NULL},
    {"timeleft+measured", NULL, 0, NULL},
    {"penalty+measured", NULL, 0, NULL},
    {"all+measured", NULL, 0, NULL},
    {"measured+all", NULL, 0, NULL},
    {"base+locality+timeleft+penalty+measured", NULL, 0, NULL},
    /* the engine by name */
    {NULL, "mely", 0, NULL},
    {"all+measured", "mely", 0, NULL},
    {NULL, "legacy", 0, NULL},
    {"off", "legacy", 0, NULL},
    {"base", "legacy", 0, NULL},
    {"locality", "legacy", 0, NULL},
    {"base+locality", "legacy", 0, NULL},
    {"locality+base", "legacy", 0, NULL},
    /* unknown words, alone or among known ones; malformed joins */
    {"greedy", NULL, MELY_EINVAL, "greedy"},
    {"base+greedy", NULL, MELY_EINVAL, "greedy"},
    {"greedy+base", NULL, MELY_EINVAL, "greedy"},
    {"timeleft+nope+penalty", NULL, MELY_EINVAL, "nope"},
    {"", NULL, MELY_EINVAL, NULL},
    {"+", NULL, MELY_EINVAL, NULL},
    {"base+", NULL, MELY_EINVAL, "base+"},
    {"+base", NULL, MELY_EINVAL, "+base"},
    {"base++locality", NULL, MELY_EINVAL, "base++locality"},
    {"base locality", NULL, MELY_EINVAL, "base locality"},
    {"base,locality", NULL, MELY_EINVAL, "base,locality"},
    {"basee", NULL, MELY_EINVAL, "basee"},
    {"bas", NULL, MELY_EINVAL, "bas"},
    /* "off" is a policy of its own, not a word to join */
    {"off+base", NULL, MELY_EINVAL, "off+base"},
    /* unknown engines */
    {NULL, "fifo", MELY_EINVAL, "fifo"},
    {NULL, "", MELY_EINVAL, NULL},
    {"base", "legacy2", MELY_EINVAL, "legacy2"},
    /* the legacy engine runs base and locality only */
    {"timeleft", "legacy", MELY_EINVAL, "timeleft"},
    {"penalty", "legacy", MELY_EINVAL, "penalty"},
    {"measured", "legacy", MELY_EINVAL, "measured"},
    {"all", "legacy", MELY_EINVAL, "all"},
    {"base+timeleft", "legacy", MELY_EINVAL, "timeleft"},
    {"locality+measured", "legacy", MELY_EINVAL, "measured"},
    {"greedy", "legacy", MELY_EINVAL, "greedy"},
};

/* Which policies and engines mely_init() accepts (mely.h, "Work-stealing
 * policies"); a refusal leaves a handle every call refuses and names the
 * offending value on stderr. */
START_TEST(steal_policies_and_engines)
{
    const struct policy_case *pc = &policy_cases[_i];
    mely_config_t cfg = two_workers();
    mely_t m = {0};

    cfg.steal = pc->steal;
    cfg.engine = pc->engine;
    begin_capture();
    int rc = mely_init(&m, &cfg);
    const char *err = end_capture();
    ck_assert_msg(rc == pc->rc, "steal \"%s\", engine \"%s\": mely_init returned %d, expected %d",
                  pc->steal ? pc->steal : "(NULL)", pc->engine ? pc->engine : "(NULL)", rc, pc->rc);
    if (rc == 0) {
        ck_assert_uint_eq(mely_workers(&m), 2);
        ck_assert_int_eq(mely_shutdown(&m), 0);
    } else {
        ck_assert_msg(err[0] != '\0', "steal \"%s\", engine \"%s\": refused without a word on stderr",
                      pc->steal ? pc->steal : "(NULL)", pc->engine ? pc->engine : "(NULL)");
        if (pc->named)
            ck_assert_msg(strstr(err, pc->named) != NULL,
                          "steal \"%s\", engine \"%s\": stderr does not name \"%s\": \"%s\"",
                          pc->steal ? pc->steal : "(NULL)", pc->engine ? pc->engine : "(NULL)",
                          pc->named, err);
        ck_assert_uint_eq(mely_workers(&m), 0);
        ck_assert_int_eq(mely_post(&m, 1, nop, NULL), MELY_ESHUTDOWN);
        ck_assert_int_eq(mely_color_move(&m, 1, 0), MELY_ESHUTDOWN);
        ck_assert_int_eq(mely_shutdown(&m), MELY_ESHUTDOWN);
    }
}
END_TEST

/* MELY_STEAL and MELY_ENGINE win over the program's configuration: seen
 * through which combinations mely_init() accepts (the legacy engine refuses
 * the time-left policies). NULL: variable unset. */
static const struct steal_env_case {
    const char *env_steal, *env_engine; /* the environment */
    const char *steal, *engine;         /* the program's configuration */
    int rc;
    const char *named; /* for a refusal: what stderr must name */
} steal_env_cases[] = {
    {"base", NULL, NULL, NULL, 0, NULL},
    {"all+measured", NULL, "base", NULL, 0, NULL},
    {"off", NULL, "greedy", NULL, 0, NULL},           /* the bad value is never used */
    {"nope", NULL, "base", NULL, MELY_EINVAL, "nope"}, /* the environment's is */
    {"", NULL, "base", NULL, MELY_EINVAL, "MELY_STEAL"},
    {NULL, "legacy", "timeleft", NULL, MELY_EINVAL, "timeleft"},
    {NULL, "legacy", "base", NULL, 0, NULL},
    {NULL, "mely", "timeleft", "legacy", 0, NULL},
    {NULL, "mely", NULL, "fifo", 0, NULL},
    {NULL, "fifo", NULL, "legacy", MELY_EINVAL, "fifo"},
    {"base", NULL, "timeleft", "legacy", 0, NULL},
    {"timeleft", NULL, "base", "legacy", MELY_EINVAL, "timeleft"},
    {"base", "legacy", "timeleft", "mely", 0, NULL},
    {"penalty", "mely", "base", "legacy", 0, NULL},
    {"penalty", "legacy", "base", "mely", MELY_EINVAL, "penalty"},
};

START_TEST(steal_and_engine_environment_overrides)
{
    const struct steal_env_case *ec = &steal_env_cases[_i];
    mely_config_t cfg = two_workers();
    mely_t m = {0};

    cfg.steal = ec->steal;
    cfg.engine = ec->engine;
    const char *const env[2][2] = {{"MELY_STEAL", ec->env_steal}, {"MELY_ENGINE", ec->env_engine}};
    const char *err;
    int rc = init_with_env(&m, &cfg, env, &err);

    ck_assert_msg(rc == ec->rc,
                  "MELY_STEAL=%s MELY_ENGINE=%s over steal %s, engine %s: mely_init returned %d, "
                  "expected %d",
                  ec->env_steal ? ec->env_steal : "(unset)",
                  ec->env_engine ? ec->env_engine : "(unset)", ec->steal ? ec->steal : "NULL",
                  ec->engine ? ec->engine : "NULL", rc, ec->rc);
    if (rc == 0) {
        ck_assert_int_eq(mely_shutdown(&m), 0);
    } else {
        ck_assert_msg(strstr(err, ec->named) != NULL, "stderr does not name \"%s\": \"%s\"",
                      ec->named, err);
        ck_assert_uint_eq(mely_workers(&m), 0);
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
    {"batch", 1, 1, MELY_BATCH_MAX, 1000000, 0},
    {"batch", 1, 1, MELY_BATCH_MAX + 1, 50, MELY_EINVAL},
    {"batch", 1, 1, UINT_MAX, 50, MELY_EINVAL}, /* one color would keep its worker */
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

/* Several bad values at once: mely_init() names the first in a fixed order
 * (pin, the numeric MELY_* overrides, keep_sigpipe, MELY_KEEP_SIGPIPE,
 * engine, steal policy, MELY_TOPOLOGY, then the program's own numbers) and
 * stops there, so the later one is not named. */
static const struct first_case {
    int pin, keep_sigpipe; /* the program's switches (1 and 0 are valid) */
    unsigned batch;        /* the program's batch (0 is not valid) */
    const char *env[2][2]; /* up to two MELY_* variables and their values */
    const char *named, *not_named;
} first_cases[] = {
    {2, 0, 10, {{"MELY_WORKERS", "abc"}}, "pin=2", "MELY_WORKERS"},
    {-1, 2, 10, {{NULL}}, "pin=-1", "keep_sigpipe"},
    {1, 2, 10, {{NULL}}, "keep_sigpipe=2", NULL},
    {1, -1, 10, {{NULL}}, "keep_sigpipe=-1", NULL},
    {1, 2, 10, {{"MELY_SPIN_US", "x"}}, "MELY_SPIN_US", "keep_sigpipe"},
    {1, 2, 10, {{"MELY_KEEP_SIGPIPE", "1"}}, "keep_sigpipe=2", NULL},
    {1, 0, 10, {{"MELY_KEEP_SIGPIPE", "2"}, {"MELY_ENGINE", "fifo"}}, "MELY_KEEP_SIGPIPE", "fifo"},
    {1, 0, 10, {{"MELY_ENGINE", "fifo"}, {"MELY_STEAL", "greedy"}}, "fifo", "greedy"},
    {1, 0, 10, {{"MELY_STEAL", "greedy"}, {"MELY_TOPOLOGY", "numa"}}, "greedy", "MELY_TOPOLOGY"},
    {1, 0, 0, {{"MELY_TOPOLOGY", "numa"}}, "MELY_TOPOLOGY", "batch"},
    {1, 0, 0, {{"MELY_BATCH", "5"}}, NULL, NULL}, /* the environment mends batch 0 */
    {1, 0, 10, {{"MELY_BATCH", "4294967295"}}, "1..1024", NULL}, /* the range is named */
    {1, 0, 10, {{"MELY_BATCH", "1025"}}, "MELY_BATCH", NULL},
};

START_TEST(first_bad_value_named)
{
    const struct first_case *fc = &first_cases[_i];
    mely_config_t cfg = two_workers();
    const char *err;
    mely_t m = {0};

    cfg.pin = fc->pin;
    cfg.keep_sigpipe = fc->keep_sigpipe;
    cfg.batch = fc->batch;
    int rc = init_with_env(&m, &cfg, fc->env, &err);

    if (!fc->named) {
        ck_assert_msg(rc == 0, "case %d: mely_init returned %d: \"%s\"", _i, rc, err);
        ck_assert_int_eq(mely_shutdown(&m), 0);
        return;
    }
    ck_assert_msg(rc == MELY_EINVAL, "case %d: mely_init returned %d", _i, rc);
    ck_assert_msg(strstr(err, fc->named) != NULL, "case %d: stderr does not name %s: \"%s\"", _i,
                  fc->named, err);
    ck_assert_msg(!fc->not_named || strstr(err, fc->not_named) == NULL,
                  "case %d: stderr names %s too: \"%s\"", _i, fc->not_named, err);
    ck_assert_int_eq(mely_shutdown(&m), MELY_ESHUTDOWN);
}
END_TEST

/* event_budget_mb: 0 is the default; below 1 MiB per worker, or above
 * MELY_EVENT_BUDGET_MB_MAX, is refused and named; the environment wins. */
START_TEST(event_budget_checked)
{
    static const struct {
        unsigned workers, mb;
        const char *env; /* MELY_EVENT_BUDGET_MB, or NULL */
        int rc;
        const char *named;
    } cases[] = {
        {2, 0, NULL, 0, NULL},
        {2, 2, NULL, 0, NULL},
        {3, 2, NULL, MELY_EINVAL, "event_budget_mb=2: expected at least 3"},
        {2, MELY_EVENT_BUDGET_MB_MAX + 1, NULL, MELY_EINVAL, "event_budget_mb"},
        {2, 1, "64", 0, NULL},
        {4, 64, "3", MELY_EINVAL, "MELY_EVENT_BUDGET_MB=3: expected at least 4"},
    };
    for (unsigned i = 0; i < NELEM(cases); i++) {
        mely_config_t cfg;
        mely_config_init(&cfg);
        cfg.workers = cases[i].workers;
        cfg.event_budget_mb = cases[i].mb;
        const char *const env[2][2] = {{"MELY_EVENT_BUDGET_MB", cases[i].env}};
        const char *err;
        mely_t m = {0};
        int rc = init_with_env(&m, &cfg, env, &err);
        ck_assert_msg(rc == cases[i].rc, "case %u: mely_init returned %d: \"%s\"", i, rc, err);
        if (rc == 0) {
            ck_assert_int_eq(mely_shutdown(&m), 0);
            continue;
        }
        ck_assert_msg(strstr(err, cases[i].named) != NULL, "case %u: stderr does not name %s: \"%s\"",
                      i, cases[i].named, err);
    }
}
END_TEST

/* keep_malloc: a bad value, from the program or MELY_KEEP_MALLOC, is named. */
START_TEST(keep_malloc_checked)
{
    static const char *const none[2][2] = {{NULL}};
    static const char *const bad_env[2][2] = {{"MELY_KEEP_MALLOC", "2"}};
    mely_config_t cfg = two_workers();
    const char *err;
    mely_t m = {0};

    cfg.keep_malloc = 2;
    ck_assert_int_eq(init_with_env(&m, &cfg, none, &err), MELY_EINVAL);
    ck_assert_msg(strstr(err, "keep_malloc=2") != NULL, "stderr: \"%s\"", err);
    cfg.keep_malloc = 0;
    ck_assert_int_eq(init_with_env(&m, &cfg, bad_env, &err), MELY_EINVAL);
    ck_assert_msg(strstr(err, "MELY_KEEP_MALLOC") != NULL, "stderr: \"%s\"", err);
}
END_TEST

/* The freed top of the heap after mely_init: 4 MiB of 32 KiB blocks (under
 * glibc's mmap threshold) freed at once stay mapped for reuse (mallinfo2's
 * keepcost), unless keep_malloc (flag) left glibc's 128 KiB threshold, which
 * trims them. A child each: mallopt is the process's. */
static void heap_kept_child(void *arg, bool keep)
{
    (void)arg;
    enum { N = 128, SIZE = 32 << 10 };
    mely_config_t cfg = two_workers();
    cfg.keep_malloc = keep;
    mely_t m = {0};
    if (mely_init(&m, &cfg) != 0)
        exit(2);
    void *p[N];
    for (int i = 0; i < N; i++)
        if (!(p[i] = malloc(SIZE)))
            exit(3);
    for (int i = N - 1; i >= 0; i--)
        free(p[i]);
    size_t kept = mallinfo2().keepcost;
    mely_shutdown(&m);
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    /* The sanitizers bring their own allocator (mallinfo2 reads glibc's,
     * unused): here only that both settings start a runtime is checked. */
    (void)kept;
    exit(0);
#else
    exit(keep ? (kept < (1u << 20) ? 0 : 4) : (kept >= (2u << 20) ? 0 : 5));
#endif
}

START_TEST(heap_kept_for_reuse)
{
    unsetenv("MALLOC_TRIM_THRESHOLD_");
    unsetenv("GLIBC_TUNABLES");
    run_child(heap_kept_child, NULL, _i == 1);
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

/* Which engine runs, seen from outside: on one worker, mely serves the
 * highest priority first, the legacy engine (one FIFO) runs in post order.
 * MELY_ENGINE wins over the configuration both ways. */
static const struct engine_case {
    const char *cfg_engine, *env; /* MELY_ENGINE, or NULL */
    bool legacy;                  /* in effect */
} engine_cases[] = {
    {NULL, NULL, false},      {"mely", NULL, false},    {"legacy", NULL, true},
    {NULL, "legacy", true},   {"mely", "legacy", true}, {"legacy", "mely", false},
};

START_TEST(engine_in_effect)
{
    const struct engine_case *ec = &engine_cases[_i];

    if (ec->env)
        ck_assert_int_eq(setenv("MELY_ENGINE", ec->env, 1), 0);
    init_runtime_engine(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL, ec->cfg_engine);
    unsetenv("MELY_ENGINE");
    atomic_store(&seq.n, 0);
    atomic_store(&ran, 0);
    stop_at = 3;
    ck_assert_int_eq(mely_post_ex(&rt, 1, 0, NULL, record_color, NULL, 0), 0);
    ck_assert_int_eq(mely_post_ex(&rt, 2, MELY_PRIO_MAX, NULL, record_color, NULL, 0), 0);
    ck_assert_int_eq(mely_post_ex(&rt, 3, 3, NULL, record_color, NULL, 0), 0);
    run_bounded(&rt, 20, "three colors on one worker");
    ck_assert_uint_eq(atomic_load(&seq.n), 3);
    const mely_color_t fifo[] = {1, 2, 3}, prio[] = {2, 3, 1};
    const mely_color_t *want = ec->legacy ? fifo : prio;
    ck_assert_msg(memcmp(seq.order, want, sizeof(fifo)) == 0,
                  "engine %s, MELY_ENGINE %s: ran colors %u %u %u, expected %u %u %u (%s)",
                  ec->cfg_engine ? ec->cfg_engine : "NULL", ec->env ? ec->env : "unset",
                  seq.order[0], seq.order[1], seq.order[2], want[0], want[1], want[2],
                  ec->legacy ? "the legacy engine's FIFO" : "mely's priorities");
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
    tcase_add_loop_test(tc, first_bad_value_named, 0, NELEM(first_cases));
    tcase_add_test(tc, init_without_handle);
    tcase_add_test(tc, keep_malloc_checked);
    tcase_add_test(tc, event_budget_checked);
    tcase_add_loop_test(tc, heap_kept_for_reuse, 0, 2);
    tcase_add_loop_test(tc, steal_policies_and_engines, 0, NELEM(policy_cases));
    tcase_add_loop_test(tc, steal_and_engine_environment_overrides, 0, NELEM(steal_env_cases));

    tc = new_tcase(s, "effect", 60);
    tcase_add_loop_test(tc, workers_pinned_and_affinity_restored, 0, 2);
    tcase_add_loop_test(tc, batch_threshold_bounds_same_color_runs, 0, NELEM(batch_cases));
    tcase_add_loop_test(tc, engine_in_effect, 0, NELEM(engine_cases));
    return mely_test_main(s);
}
