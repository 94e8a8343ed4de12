/* SPDX-License-Identifier: MIT */
/*
 * check_budget.c: the event budget and memory after a burst, through the
 * public API (include/mely/mely.h; the budget's design is in mely/queue/freelist.h).
 *
 *  - floods: a color's handler is held (it waits for the test to release
 *    it) while posts to it pile up, from a thread that is not a worker,
 *    from a handler on the other worker, and from a handler on the same
 *    worker to a color of its own (which cannot run before the handler
 *    returns). With a 2 MiB budget each flood must end with MELY_EAGAIN
 *    (not MELY_ENOMEM, no crash) at about the budget's worth of events, a
 *    second post is refused too, and once the handler is released every
 *    accepted event runs exactly once, in post order; then posts work
 *    again. Both engines; the first two also with stealing.
 *  - burst: with the default budget, a held color receives 5 M events
 *    (MELY_TEST_SCALE scales it); once they have run and the workers are
 *    idle, the process's resident memory (/proc/self/statm) falls back to
 *    at most twice what it was before the burst (under ThreadSanitizer,
 *    whose shadow of the memory stays, by the events' own memory).
 *
 *  - exit with events queued: a legacy program ends with exit(), often with
 *    events still queued whose arguments hold the only pointers to heap
 *    memory. Under AddressSanitizer, LeakSanitizer must not call that memory
 *    leaked (the events live in mapped slabs, which it does not scan unless
 *    told): the child that does so must exit 0.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded (see
 * tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testutil.h"

static const char *const engines[] = {NULL, "legacy"};

/* The floods' shapes: 2 pinned workers, both engines, without and with
 * stealing (idle workers try to take colors meanwhile; the held one never
 * moves); 8 unpinned workers on the 2 CPUs, where posters are preempted in
 * the middle of flushes. */
static const struct {
    unsigned workers;
    int pin;
    const char *engine, *steal;
} shapes_[] = {
    {2, 1, NULL, NULL},           {2, 1, "legacy", NULL}, {2, 1, NULL, "all+measured"},
    {2, 1, "legacy", "base"},     {8, 0, NULL, NULL},     {8, 0, NULL, "all+measured"},
};

/* Colors (the initial map is color % workers): the held one is worker 1's,
 * the flooding handler's worker 0's (2 workers) or 2's (8), and
 * POSTER + workers is the flooding handler's worker's too. The budget is
 * the least the workers take: 1 MiB each. */
enum {
    HELD = 1,
    POSTER = 2,
    EVENTS_PER_MB = 25600, /* 16 slabs of 1,600 events (freelist.h) */
};

/* A flood is refused within this many events per worker of the budget's
 * worth: the reserves and caches counted in it (512 + 192 per worker), the
 * posts on their way when it is reached (512 + 32 per worker), slack. */
#define SLACK_PER_WORKER 1500u

enum flood { FROM_FOREIGN, FROM_WORKER, FROM_SAME_WORKER };
static const char *const flood_names[] = {"a foreign thread", "a handler of the other worker",
                                          "a handler of the same worker"};

static struct {
    mely_t m;
    enum flood how;
    unsigned workers, budget, flood_max; /* flood_max: not refused by then fails */
    atomic_bool held, release;
    uint32_t next;          /* the target color's: the next sequence number due */
    atomic_uint ran;
    unsigned accepted;      /* set before the release */
    int err, again;         /* the flood's error, and a second post's */
    uint64_t rss_before, rss_peak, rss_after; /* bytes (the burst) */
} st;

static void reset(enum flood how)
{
    memset(&st, 0, sizeof(st));
    st.how = how;
}

/* Holds its worker until the test releases it. */
static void hold(void *arg)
{
    (void)arg;
    atomic_store(&st.held, true);
    if (!wait_flag(&st.release, 60000))
        note("the held handler was never released");
}

/* The flooded color's events: arg is the sequence number, from 1. */
static void seq(void *arg)
{
    uint32_t n = (uint32_t)(uintptr_t)arg;
    if (n != st.next + 1)
        note("event #%u ran after #%u", n, st.next);
    st.next = n;
    atomic_fetch_add(&st.ran, 1);
}

/* Posts to `color` until refused (or flood_max): the accepted count and the
 * error go to st; then a second post, which must be refused too. */
static void flood(mely_color_t color)
{
    unsigned n = 0;
    int err = 0;

    while (n < st.flood_max &&
           (err = mely_post(&st.m, color, seq, (void *)(uintptr_t)(n + 1))) == 0)
        n++;
    st.accepted = n;
    st.err = err;
    st.again = mely_post(&st.m, color, seq, (void *)(uintptr_t)(n + 1));
}

/* The flooding handler (on worker 0): to the held color, or to a color of
 * its own worker; releases the held color before it returns. */
static void flood_from_handler(void *arg)
{
    (void)arg;
    if (st.how == FROM_WORKER && !wait_flag(&st.held, 10000))
        note("the held handler never started");
    flood(st.how == FROM_WORKER ? HELD : POSTER + st.workers);
    atomic_store(&st.release, true);
}

/* The test's thread that is no worker: starts the flood, releases, waits
 * for every accepted event, checks that posting works again, stops. */
static void *driver(void *arg)
{
    (void)arg;
    if (st.how == FROM_FOREIGN) {
        if (!wait_flag(&st.held, 10000))
            note("the held handler never started");
        flood(HELD);
        atomic_store(&st.release, true);
    } else {
        if (!wait_flag(&st.release, 30000))
            note("the flooding handler never finished");
    }
    if (!wait_count(&st.ran, st.accepted, 60000))
        note("%u of %u accepted events ran", atomic_load(&st.ran), st.accepted);
    /* The events have run: posts are accepted again. */
    mely_color_t c = st.how == FROM_SAME_WORKER ? POSTER + st.workers : HELD;
    int err = mely_post(&st.m, c, seq, (void *)(uintptr_t)(st.accepted + 1));
    if (err)
        note("a post after the flood ran: %s", mely_strerror(err));
    else if (!wait_count(&st.ran, st.accepted + 1, 10000))
        note("the post after the flood did not run");
    mely_stop(&st.m);
    return NULL;
}

static void init_budget(mely_t *m, unsigned workers, int pin, const char *engine,
                        const char *steal, unsigned mb)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = workers;
    cfg.pin = pin;
    cfg.engine = engine;
    cfg.steal = steal;
    cfg.event_budget_mb = mb;
    int rc = mely_init(m, &cfg);
    ck_assert_msg(rc == 0, "mely_init: %s", mely_strerror(rc));
}

static void run_flood(enum flood how, unsigned workers, int pin, const char *engine,
                      const char *steal)
{
    reset(how);
    st.workers = workers;
    st.budget = workers * EVENTS_PER_MB;
    st.flood_max = 4 * st.budget;
    setenv("MELY_STALL_MS", "0", 1); /* the held handler stalls on purpose */
    init_budget(&st.m, workers, pin, engine, steal, workers);
    if (how != FROM_SAME_WORKER)
        ck_assert_int_eq(mely_post(&st.m, HELD, hold, NULL), 0);
    if (how != FROM_FOREIGN)
        ck_assert_int_eq(mely_post(&st.m, POSTER, flood_from_handler, NULL), 0);
    run_with_helper(&st.m, driver, NULL, 120, flood_names[how]);
    int discarded = mely_shutdown(&st.m);

    unsigned budget = st.budget, slack = SLACK_PER_WORKER * workers;
    printf("flood from %s (%u workers, %s engine, steal %s): %u events accepted of a "
           "%u-event budget, then %s\n",
           flood_names[how], workers, engine ? engine : "mely", steal ? steal : "off",
           st.accepted, budget, mely_strerror(st.err));
    ck_assert_msg(st.err == MELY_EAGAIN, "flood from %s: %u accepted, then %d (%s), not MELY_EAGAIN",
                  flood_names[how], st.accepted, st.err, mely_strerror(st.err));
    ck_assert_msg(st.again == MELY_EAGAIN, "the post after the refusal: %d (%s)", st.again,
                  mely_strerror(st.again));
    ck_assert_msg(st.accepted + slack >= budget && st.accepted <= budget + slack,
                  "%u events accepted of a %u-event budget", st.accepted, budget);
    ck_assert_uint_eq(atomic_load(&st.ran), st.accepted + 1);
    ck_assert_int_eq(discarded, 0);
}

START_TEST(flood_from_foreign_thread)
{
    run_flood(FROM_FOREIGN, shapes_[_i].workers, shapes_[_i].pin, shapes_[_i].engine,
              shapes_[_i].steal);
}
END_TEST

START_TEST(flood_from_other_worker)
{
    run_flood(FROM_WORKER, shapes_[_i].workers, shapes_[_i].pin, shapes_[_i].engine,
              shapes_[_i].steal);
}
END_TEST

/* Without stealing only: a thief would take the flooded color and run its
 * events while the flood goes on, which then never reaches the budget. */
START_TEST(flood_from_same_worker)
{
    run_flood(FROM_SAME_WORKER, 2, 1, engines[_i], NULL);
}
END_TEST

/* ---- memory after a burst ------------------------------------------------------------ */

#if defined(__SANITIZE_THREAD__)
#define TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TSAN_BUILD 1
#endif
#endif
#ifndef TSAN_BUILD
#define TSAN_BUILD 0
#endif

static unsigned burst_events;

static void *burst_driver(void *arg)
{
    (void)arg;
    /* A small run first, so that what the runtime keeps in any case (its
     * reserves, caches, inbox lines, the workers' stacks) is resident
     * before the measure. */
    for (unsigned i = 0; i < 4096; i++)
        if (mely_post(&st.m, HELD, seq, (void *)(uintptr_t)(i + 1)) != 0)
            note("warm-up post %u failed", i);
    if (!wait_count(&st.ran, 4096, 10000))
        note("the warm-up did not run");
    sleep_us(100000);
    st.rss_before = rss_bytes();

    st.next = 0;
    atomic_store(&st.ran, 0);
    if (mely_post(&st.m, HELD, hold, NULL) != 0 || !wait_flag(&st.held, 10000))
        note("the held handler never started");
    for (unsigned i = 0; i < burst_events; i++) {
        int err = mely_post(&st.m, HELD, seq, (void *)(uintptr_t)(i + 1));
        if (err) {
            note("burst post %u: %s", i, mely_strerror(err));
            break;
        }
    }
    st.rss_peak = rss_bytes();
    atomic_store(&st.release, true);
    if (!wait_count(&st.ran, burst_events, 120000))
        note("%u of %u burst events ran", atomic_load(&st.ran), burst_events);

    /* The workers go idle and give the memory back: a few ms at most. */
    uint64_t deadline = now_ns() + 5000000000ull;
    do {
        sleep_us(10000);
        st.rss_after = rss_bytes();
    } while (st.rss_after > 2 * st.rss_before && now_ns() < deadline);
    mely_stop(&st.m);
    return NULL;
}

START_TEST(memory_returns_after_burst)
{
    reset(FROM_FOREIGN);
    burst_events = scaled(5000000, 200000, SCALED_MAX);
    setenv("MELY_STALL_MS", "0", 1); /* the held handler is meant to stall */
    init_budget(&st.m, 2, 1, engines[_i], NULL, 0);
    run_with_helper(&st.m, burst_driver, NULL, 300, "burst");
    ck_assert_int_eq(mely_shutdown(&st.m), 0);

    printf("burst of %u events (%s engine): RSS %.1f MB before, %.1f MB at the peak, "
           "%.1f MB after\n",
           burst_events, engines[_i] ? engines[_i] : "mely", st.rss_before / 1e6,
           st.rss_peak / 1e6, st.rss_after / 1e6);
    /* The burst was real: its events' memory (40 bytes each) was resident. */
    ck_assert_msg(st.rss_peak >= st.rss_before + (uint64_t)burst_events * 40 * 9 / 10,
                  "RSS grew from %" PRIu64 " to %" PRIu64 " bytes only", st.rss_before,
                  st.rss_peak);
#if TSAN_BUILD
    /* ThreadSanitizer keeps its shadow of the burst's memory (about 4x) when
     * the pages go: what must come back is the events' own memory. */
    ck_assert_msg(st.rss_peak - st.rss_after >= (uint64_t)burst_events * 40 * 9 / 10,
                  "RSS %" PRIu64 " bytes after the burst, %" PRIu64 " at the peak",
                  st.rss_after, st.rss_peak);
#else
    ck_assert_msg(st.rss_after <= 2 * st.rss_before,
                  "RSS %" PRIu64 " bytes after the burst, %" PRIu64 " before (%.2fx)",
                  st.rss_after, st.rss_before, (double)st.rss_after / (double)st.rss_before);
#endif
}
END_TEST

static void never_runs(void *arg)
{
    free(arg);
}

/* More than an inbox holds, so that most events sit in slabs. */
enum { QUEUED_AT_EXIT = 20000 };

START_TEST(exit_with_events_queued)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        init_budget(&st.m, 2, 0, engines[_i], NULL, 0);
        for (int i = 0; i < QUEUED_AT_EXIT; i++) {
            int rc = mely_post(&st.m, i % 64, never_runs, malloc(64));
            if (rc != 0) {
                fprintf(stderr, "post %d: %s\n", i, mely_strerror(rc));
                _exit(3);
            }
        }
        exit(0); /* LeakSanitizer runs here in the AddressSanitizer build */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "a program that exits with %d events queued ended with status 0x%x "
                  "(LeakSanitizer's report above, if any)",
                  QUEUED_AT_EXIT, status);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("budget");
    TCase *tc = new_tcase(s, "floods", 300);
    tcase_add_loop_test(tc, flood_from_foreign_thread, 0, NELEM(shapes_));
    tcase_add_loop_test(tc, flood_from_other_worker, 0, NELEM(shapes_));
    tcase_add_loop_test(tc, flood_from_same_worker, 0, NELEM(engines));

    tc = new_tcase(s, "burst", 600);
    tcase_add_loop_test(tc, memory_returns_after_burst, 0, NELEM(engines));

    tc = new_tcase(s, "exit", 60);
    tcase_add_loop_test(tc, exit_with_events_queued, 0, NELEM(engines));
    return mely_test_main(s);
}
