/* SPDX-License-Identifier: MIT */
/*
 * check_log.c: the log hook (mely_set_log in include/mely/mely.h): the runtime's own
 * messages (a refused MELY_* value, a cache map that falls back) and
 * libevent's log reach the hook with their levels and nothing reaches
 * stderr; NULL restores the default printer ("mely: ..." on stderr for
 * warnings and errors only); a hook cannot replace itself; and once
 * mely_set_log() returns, the previous hook is never running.
 *
 * libevent's messages are raised through libevent itself (an event_base of
 * this test's own, which shares the process's libevent with the runtime): a
 * watch on a regular file makes epoll refuse it, and libevent warns
 * "Epoll ADD(...) on fd N failed"; its debug logging gives debug messages.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- a hook that records ---------------------------------------------------------- */

#define MAX_RECORDS 64

struct records {
    pthread_mutex_t mu;
    int n;
    int level[MAX_RECORDS];
    char msg[MAX_RECORDS][512];
};

static struct records rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void record(int level, const char *msg, void *arg)
{
    struct records *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->n < MAX_RECORDS) {
        r->level[r->n] = level;
        snprintf(r->msg[r->n], sizeof(r->msg[0]), "%s", msg);
    }
    r->n++;
    pthread_mutex_unlock(&r->mu);
}

static void reset_records(void)
{
    pthread_mutex_lock(&rec.mu);
    rec.n = 0;
    pthread_mutex_unlock(&rec.mu);
}

/* The index of the first record at `level` whose message starts with
 * `prefix`, or -1. */
static int find_record(int level, const char *prefix)
{
    int found = -1;
    pthread_mutex_lock(&rec.mu);
    for (int i = 0; i < rec.n && i < MAX_RECORDS && found < 0; i++)
        if (rec.level[i] == level && strncmp(rec.msg[i], prefix, strlen(prefix)) == 0)
            found = i;
    pthread_mutex_unlock(&rec.mu);
    return found;
}

static int records(void)
{
    pthread_mutex_lock(&rec.mu);
    int n = rec.n;
    pthread_mutex_unlock(&rec.mu);
    return n;
}

/* ---- raising messages ------------------------------------------------------------ */

static void never(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Makes libevent warn: a read event on a regular file, which epoll refuses
 * (libevent's "Epoll ADD(1) on fd N failed ... Operation not permitted"). */
static void libevent_warns(void)
{
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    struct event *ev = event_new(base, fd, EV_READ | EV_PERSIST, never, NULL);
    ck_assert_ptr_nonnull(ev);
    ck_assert_int_eq(event_add(ev, NULL), -1);
    event_free(ev);
    event_base_free(base);
    close(fd);
}

/* libevent routes its log to mely from the first mely_init() on. */
static void route_libevent(void)
{
    mely_t m = {0};
    init_runtime(&m, 1, 0, MELY_BATCH_DEFAULT, 0);
    ck_assert_int_ge(mely_shutdown(&m), 0);
}

/* mely_init() refused for MELY_WORKERS=abc; returns what reached stderr. */
static const char *refused_init(void)
{
    mely_t m = {0};
    ck_assert_int_eq(setenv("MELY_WORKERS", "abc", 1), 0);
    begin_capture();
    int rc = mely_init(&m, NULL);
    const char *err = end_capture();
    unsetenv("MELY_WORKERS");
    ck_assert_int_eq(rc, MELY_EINVAL);
    return err;
}

static void teardown(void)
{
    mely_set_log(NULL, NULL);
    event_enable_debug_logging(EVENT_DBG_NONE);
}

/* ---- the tests --------------------------------------------------------------------- */

START_TEST(config_error_reaches_hook)
{
    reset_records();
    ck_assert_int_eq(mely_set_log(record, &rec), 0);
    const char *err = refused_init();
    ck_assert_msg(err[0] == '\0', "stderr has \"%s\" while a hook is set", err);
    ck_assert_msg(find_record(MELY_LOG_ERROR, "MELY_WORKERS=\"abc\"") >= 0,
                  "no MELY_LOG_ERROR naming MELY_WORKERS (%d records, first \"%s\")", records(),
                  rec.msg[0]);
}
END_TEST

START_TEST(cache_map_warning_reaches_hook)
{
    mely_t m = {0};
    reset_records();
    ck_assert_int_eq(mely_set_log(record, &rec), 0);
    /* No sysfs and no hwloc either: the flat map, a warning (a map hwloc
     * builds is only an info line). */
    ck_assert_int_eq(setenv("MELY_SYSFS_ROOT", "/nonexistent/mely", 1), 0);
    ck_assert_int_eq(setenv("HWLOC_FSROOT", "/nonexistent/mely", 1), 0);
    begin_capture();
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
    int rc = mely_init(&m, &cfg);
    const char *err = end_capture();
    unsetenv("MELY_SYSFS_ROOT");
    unsetenv("HWLOC_FSROOT");
    ck_assert_int_eq(rc, 0);
    ck_assert_int_ge(mely_shutdown(&m), 0);
    ck_assert_msg(err[0] == '\0', "stderr has \"%s\" while a hook is set", err);
    ck_assert_msg(find_record(MELY_LOG_WARN, "cache map: ") >= 0,
                  "no MELY_LOG_WARN about the cache map (%d records)", records());
}
END_TEST

START_TEST(libevent_warning_reaches_hook)
{
    route_libevent();
    reset_records();
    ck_assert_int_eq(mely_set_log(record, &rec), 0);
    begin_capture();
    libevent_warns();
    const char *err = end_capture();
    ck_assert_msg(err[0] == '\0', "stderr has \"%s\" while a hook is set", err);
    ck_assert_msg(find_record(MELY_LOG_WARN, "libevent: Epoll ADD") >= 0,
                  "no MELY_LOG_WARN \"libevent: Epoll ADD...\" (%d records, first \"%s\")",
                  records(), rec.msg[0]);
}
END_TEST

/* libevent's debug messages arrive as MELY_LOG_DEBUG; the default printer
 * drops them and prints the warning. */
START_TEST(libevent_debug_level)
{
    route_libevent();
    reset_records();
    ck_assert_int_eq(mely_set_log(record, &rec), 0);
    event_enable_debug_logging(EVENT_DBG_ALL);
    libevent_warns();
    ck_assert_msg(find_record(MELY_LOG_DEBUG, "libevent: event_add") >= 0,
                  "no MELY_LOG_DEBUG \"libevent: event_add...\" (%d records)", records());

    ck_assert_int_eq(mely_set_log(NULL, NULL), 0);
    begin_capture();
    libevent_warns();
    const char *err = end_capture();
    event_enable_debug_logging(EVENT_DBG_NONE);
    ck_assert_msg(strstr(err, "mely: libevent: Epoll ADD") != NULL,
                  "the default printer did not print the warning: \"%s\"", err);
    ck_assert_msg(strstr(err, "event_add") == NULL,
                  "the default printer printed a debug message: \"%s\"", err);
}
END_TEST

START_TEST(null_restores_default)
{
    reset_records();
    ck_assert_int_eq(mely_set_log(record, &rec), 0);
    ck_assert_int_eq(mely_set_log(NULL, NULL), 0);
    const char *err = refused_init();
    ck_assert_msg(strncmp(err, "mely: MELY_WORKERS=\"abc\"", 24) == 0,
                  "the default printer wrote \"%s\"", err);
    route_libevent();
    begin_capture();
    libevent_warns();
    err = end_capture();
    ck_assert_msg(strncmp(err, "mely: libevent: Epoll ADD", 25) == 0,
                  "the default printer wrote \"%s\"", err);
    ck_assert_int_eq(records(), 0);
}
END_TEST

/* A hook that tries to replace itself: refused, and it stays. */
static atomic_int set_rc = 1;

static void replacer(int level, const char *msg, void *arg)
{
    (void)level;
    (void)msg;
    atomic_store(&set_rc, mely_set_log(NULL, NULL));
    record(level, msg, arg);
}

START_TEST(set_from_hook_refused)
{
    reset_records();
    ck_assert_int_eq(mely_set_log(replacer, &rec), 0);
    refused_init();
    ck_assert_int_eq(atomic_load(&set_rc), MELY_EBUSY);
    refused_init();
    ck_assert_int_eq(records(), 2);
}
END_TEST

/* ---- no call of an old hook after mely_set_log() returns ------------------------------ */

struct gen {
    atomic_bool retired; /* set once mely_set_log() replaced this hook */
};

static atomic_uint late_calls, hook_calls;
static atomic_bool stop_raising;

/* Sleeps inside the call, so that a replacement that did not wait for calls
 * in progress would retire the hook under it. */
static void slow_hook(int level, const char *msg, void *arg)
{
    (void)level;
    (void)msg;
    struct gen *g = arg;
    atomic_fetch_add(&hook_calls, 1);
    if (atomic_load(&g->retired))
        atomic_fetch_add(&late_calls, 1);
    usleep(200);
    if (atomic_load(&g->retired))
        atomic_fetch_add(&late_calls, 1);
}

static void *raise_warnings(void *arg)
{
    (void)arg;
    struct event_base *base = event_base_new();
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    struct event *ev = base && fd >= 0 ? event_new(base, fd, EV_READ, never, NULL) : NULL;
    if (!ev)
        note("raise_warnings: no event_base or event");
    while (ev && !atomic_load(&stop_raising))
        event_add(ev, NULL); /* fails, and warns */
    if (ev)
        event_free(ev);
    if (base)
        event_base_free(base);
    if (fd >= 0)
        close(fd);
    return NULL;
}

START_TEST(replaced_hook_never_runs_after)
{
    enum { NGEN = 200, NTHREADS = 2 };
    static struct gen gens[NGEN];
    pthread_t th[NTHREADS];

    route_libevent();
    ck_assert_int_eq(mely_set_log(slow_hook, &gens[0]), 0);
    for (int i = 0; i < NTHREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, raise_warnings, NULL), 0);
    for (int g = 1; g < NGEN; g++) {
        usleep(500);
        ck_assert_int_eq(mely_set_log(slow_hook, &gens[g]), 0);
        atomic_store(&gens[g - 1].retired, true);
    }
    begin_capture(); /* the default printer's lines until the threads stop */
    int rc = mely_set_log(NULL, NULL);
    atomic_store(&gens[NGEN - 1].retired, true);
    atomic_store(&stop_raising, true);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    end_capture();
    ck_assert_int_eq(rc, 0);
    assert_no_notes();
    ck_assert_uint_gt(atomic_load(&hook_calls), NGEN);
    ck_assert_msg(atomic_load(&late_calls) == 0,
                  "a replaced hook was running or called %u times after mely_set_log returned",
                  atomic_load(&late_calls));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = new_tcase(s, "hook", 30);
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, config_error_reaches_hook);
    tcase_add_test(tc, cache_map_warning_reaches_hook);
    tcase_add_test(tc, libevent_warning_reaches_hook);
    tcase_add_test(tc, libevent_debug_level);
    tcase_add_test(tc, null_restores_default);
    tcase_add_test(tc, set_from_hook_refused);
    tcase_add_test(tc, replaced_hook_never_runs_after);
    return mely_test_main(s);
}
