/* SPDX-License-Identifier: MIT */
/*
 * testutil.c: the helpers the Check test programs share (see testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tests/testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- scale ---------------------------------------------------------------- */

/* Sanitizer builds run 5-30x slower: there the event counts default to a
 * quarter (the sanitizers find races and bad accesses from the
 * happens-before graph and each access, not from volume), so that CI's ASan
 * and TSan runs of the stress tests stay within seconds per program. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DEFAULT_SCALE 0.25
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define DEFAULT_SCALE 0.25
#endif
#endif
#ifndef DEFAULT_SCALE
#define DEFAULT_SCALE 1.0
#endif

double test_scale(void)
{
    const char *s = getenv("MELY_TEST_SCALE");
    if (!s || !*s)
        return DEFAULT_SCALE;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !(v > 0.0) || v > 1000.0) {
        fprintf(stderr, "MELY_TEST_SCALE=\"%s\": expected a number in (0, 1000]; using %g\n", s,
                DEFAULT_SCALE);
        return DEFAULT_SCALE;
    }
    return v;
}

unsigned scaled(unsigned n, unsigned min, unsigned max)
{
    double v = n * test_scale();
    return v < min ? min : v > max ? max : (unsigned)v;
}

/* ---- clock and bounded waits ------------------------------------------------ */

bool wait_count(atomic_uint *v, unsigned n, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    while (atomic_load(v) < n) {
        if (now_ns() >= deadline)
            return false;
        sleep_us(100);
    }
    return true;
}

bool wait_flag(atomic_bool *flag, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    while (!atomic_load(flag)) {
        if (now_ns() >= deadline)
            return false;
        sleep_us(100);
    }
    return true;
}

unsigned open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    unsigned n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- stderr capture ------------------------------------------------------------- */

static FILE *capture;
static int saved_stderr = -1;

void begin_capture(void)
{
    fflush(stderr);
    capture = tmpfile();
    ck_assert_ptr_nonnull(capture);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
    ck_assert_int_ge(dup2(fileno(capture), STDERR_FILENO), 0);
}

const char *end_capture(void)
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

/* ---- the workers' counters ------------------------------------------------------ */

mely_stats_t stats_of(const mely_t *m, unsigned w)
{
    mely_stats_t s;
    memset(&s, 0, sizeof(s));
    int err = mely_worker_stats(m, w, &s);
    if (err)
        note("mely_worker_stats(%u): %s", w, mely_strerror(err));
    return s;
}

bool wait_stat(const mely_t *m, unsigned w, size_t off, uint64_t above, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        mely_stats_t s = stats_of(m, w);
        uint64_t v;
        memcpy(&v, (const char *)&s + off, sizeof(v));
        if (v > above)
            return true;
        if (now_ns() >= deadline)
            return false;
        sleep_us(100);
    }
}

void check_owner(const mely_t *m, mely_color_t color)
{
    int owner = mely_color_owner(m, color);
    if (owner != mely_current_worker())
        note("color %u runs on worker %d while the map says worker %d", (unsigned)color,
             mely_current_worker(), owner);
}

/* ---- failure notes ------------------------------------------------------------ */

static atomic_uint nnotes;
static char first_note[512]; /* under note_mu */
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;

void note(const char *fmt, ...)
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

void reset_notes(void)
{
    atomic_store(&nnotes, 0);
    pthread_mutex_lock(&note_mu);
    first_note[0] = '\0';
    pthread_mutex_unlock(&note_mu);
}

void assert_no_notes(void)
{
    unsigned n = atomic_load(&nnotes);
    pthread_mutex_lock(&note_mu);
    ck_assert_msg(n == 0, "%u failure(s) seen in handlers or helper threads; the first: %s", n,
                  first_note);
    pthread_mutex_unlock(&note_mu);
}

/* ---- bounded runs ------------------------------------------------------------------ */

void run_bounded(mely_t *m, unsigned seconds, const char *what)
{
    struct watchdog wd;
    watchdog_start(&wd, m, seconds, what);
    int rc = mely_run(m);
    bool fired = watchdog_end(&wd);
    ck_assert_msg(rc == 0, "%s: mely_run() returned %d (%s)", what, rc, mely_strerror(rc));
    ck_assert_msg(!fired, "%s: still running after %u s", what, seconds);
}

void run_child(void (*child)(void *arg, bool flag), void *arg, bool flag)
{
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        child(arg, flag);
        _exit(99); /* the child should have exited */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child ended with status %#x",
                  status);
}

void run_with_helper(mely_t *m, void *(*helper)(void *), void *arg, unsigned seconds,
                     const char *what)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, helper, arg), 0);
    run_bounded(m, seconds, what);
    pthread_join(t, NULL);
    assert_no_notes();
}

/* ---- runtime setup ---------------------------------------------------------------- */

void init_runtime_engine(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us,
                         const char *steal, const char *engine)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = workers;
    cfg.pin = pin;
    cfg.batch = batch;
    cfg.spin_us = spin_us;
    cfg.steal = steal;
    cfg.engine = engine;
    int rc = mely_init(m, &cfg);
    ck_assert_msg(rc == 0, "mely_init(%u workers, pin %d, steal %s, engine %s): %d (%s)", workers,
                  pin, steal ? steal : "NULL", engine ? engine : "NULL", rc, mely_strerror(rc));
    ck_assert_uint_eq(mely_workers(m), workers);
}

void init_runtime_steal(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us,
                        const char *steal)
{
    init_runtime_engine(m, workers, pin, batch, spin_us, steal, NULL);
}

void init_runtime(mely_t *m, unsigned workers, int pin, unsigned batch, unsigned spin_us)
{
    init_runtime_steal(m, workers, pin, batch, spin_us, NULL);
}

void clear_mely_env(void)
{
    unsetenv("MELY_WORKERS");
    unsetenv("MELY_PIN");
    unsetenv("MELY_BATCH");
    unsetenv("MELY_SPIN_US");
    unsetenv("MELY_STEAL");
    unsetenv("MELY_ENGINE");
    unsetenv("MELY_KEEP_SIGPIPE");
    unsetenv("MELY_TRACE");
    unsetenv("MELY_TRACE_RECORDS");
    unsetenv("MELY_STALL_MS");
    unsetenv("MELY_EVENT_BUDGET_MB");
}

/*
 * Why these eleven. The invariants can break in three places: the queueing
 * engine (mely's color-queues or libasync-smp's FIFO), the steal driver's
 * moves (any policy that steals), and each policy's own bookkeeping (the
 * time-left sums kept on every post and run, the measured costs, the cache
 * map). So:
 *  - 2 pinned workers (one per core: real parallelism, few preemptions) run
 *    every policy word at least once: off, base, locality and timeleft
 *    (locality+timeleft), penalty and measured (penalty+measured), all; and
 *    the legacy engine without and with stealing (off, base). Words are
 *    combined where they touch different steps (locality: the core set;
 *    timeleft/penalty: victim and color; measured: the costs), so one shape
 *    exercises two of them.
 *  - 8 unpinned workers (4x oversubscribed: holders of locks and running
 *    handlers get preempted, many thieves at once) run each engine without
 *    stealing (mely off) and with it: base's rules on mely, the heaviest
 *    bookkeeping on mely (all+measured: every word's code at once), and
 *    legacy with both of its words (base+locality).
 * Every word alone at both sizes would be 2 x (7 + 3) = 20 shapes (and every
 * combination far more) for little more: the size matters to the driver and
 * the locks, which base and all+measured already stress at 8 workers. The stress handlers use annotated descriptors (time-left 1,
 * 10,000,000, and a high penalty) so that the time-left policies do steal.
 */
const struct shape shapes[NSHAPES] = {
    {.workers = 2, .pin = 1},
    {.workers = 8, .pin = 0},
    {.workers = 2, .pin = 1, .steal = "base"},
    {.workers = 8, .pin = 0, .steal = "base"},
    {.workers = 2, .pin = 1, .steal = "locality+timeleft"},
    {.workers = 2, .pin = 1, .steal = "penalty+measured"},
    {.workers = 2, .pin = 1, .steal = "all"},
    {.workers = 8, .pin = 0, .steal = "all+measured"},
    {.workers = 2, .pin = 1, .engine = "legacy"},
    {.workers = 2, .pin = 1, .steal = "base", .engine = "legacy"},
    {.workers = 8, .pin = 0, .steal = "base+locality", .engine = "legacy"},
};

void init_runtime_shape(mely_t *m, const struct shape *sh, unsigned batch, unsigned spin_us)
{
    init_runtime_engine(m, sh->workers, sh->pin, batch, spin_us, sh->steal, sh->engine);
}

bool shape_is_legacy(const struct shape *sh)
{
    return sh->engine && strcmp(sh->engine, "legacy") == 0;
}

const char *shape_name(const struct shape *sh)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), "%u %s, %s, steal %s", sh->workers, sh->pin ? "pinned" : "unpinned",
             sh->engine ? sh->engine : "mely", sh->steal ? sh->steal : "off");
    return buf;
}

/* ---- a runtime and handlers for the small API tests ------------------------------------- */

mely_t rt;
atomic_uint ran;
unsigned stop_at;
atomic_bool beacon_ran;

void count_and_stop(void *arg)
{
    (void)arg;
    if (atomic_fetch_add(&ran, 1) + 1 == stop_at)
        mely_stop(&rt);
}

void beacon(void *arg)
{
    (void)arg;
    atomic_store(&beacon_ran, true);
}

void nop(void *arg)
{
    (void)arg;
}

/* ---- suites ------------------------------------------------------------------------- */

void test_setup(void)
{
    clear_mely_env();
    reset_notes();
    atomic_store(&beacon_ran, false);
}

TCase *new_tcase(Suite *s, const char *name, int timeout)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, test_setup, NULL);
    tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    return tc;
}

int mely_test_main(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
