/* SPDX-License-Identifier: MIT */
/*
 * wakeup.c: how long a post takes to wake a parked worker on another core,
 * and how late a timer fires on a parked worker, each next to the machine's
 * floor for the same wake-up done by hand.
 *
 * One runtime of 2 pinned workers, spin_us 0 (an idle worker parks at once),
 * stealing off. A post to a color of worker 1, while worker 1 is parked, is
 * timed from the poster's TSC read just before mely_post() to the handler's
 * first TSC read on worker 1; the poster is the main thread on worker 0's CPU
 * ("foreign post") or a handler on worker 0 ("handler post": the post leaves
 * when it returns). The floors: two plain threads on the same two CPUs, the
 * waker reading the TSC just before waking the sleeper (futex, eventfd read,
 * epoll_wait on an eventfd, a libevent loop on an eventfd), which reads it
 * first thing once awake. Between two samples the poster sleeps --pause-us
 * (+-25%) so that the wakee is asleep.
 *
 * The timer rows: the main thread sets a timer (mely_timer_at) on a color of
 * parked worker 1, its absolute deadline --ahead-us (+-25%) from now; the
 * sample is the lateness, the handler's first clock read minus the deadline.
 * Setting it wakes worker 1 (its deadline moved earlier: io/timer.c), which
 * re-arms its poller's timerfd and parks again long before the deadline, so
 * the deadline finds it asleep in epoll_wait (the counts under the table say
 * whether it did). Both ends are CLOCK_MONOTONIC ns (mely_now_ns), not the
 * TSC: the deadline is a point of that clock, the kernel's timers expire on
 * it, and a TSC reading would need a conversion whose offset error is of the
 * size being measured. Two floors, a plain thread pinned to worker 1's CPU
 * sleeping to the same kind of deadline: clock_nanosleep(CLOCK_MONOTONIC,
 * TIMER_ABSTIME), and epoll_wait on a timerfd set with TFD_TIMER_ABSTIME,
 * which is how a parked worker waits for its next deadline (io/poller.c), so
 * the honest floor for the runtime. clock_nanosleep is the plain thread's
 * usual way but not a lower bound: the kernel adds the thread's timer slack
 * (50 us by default, printed) to its expiry, and not to a timerfd's.
 *
 * The rows run interleaved in --passes passes. Every wait is bounded (2 s per
 * sample past its deadline; the runtime's watchdog).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "bench/harness.h"

#define MAX_PASSES 100u
#define TARGET_US 5.0                 /* mely's p50 within this of a floor's p50 */
#define ANSWER_LIMIT_US 2000000u      /* a wakee must answer within this (past a deadline) */

enum row_id {
    ROW_MELY_FOREIGN,
    ROW_MELY_HANDLER,
    ROW_FUTEX,
    ROW_EVENTFD,
    ROW_EPOLL,
    ROW_LIBEVENT,
    ROW_MELY_TIMER,
    ROW_NANOSLEEP,
    ROW_TIMERFD,
    NROWS
};

/* What a row measures: a wake-up (TSC, waker to wakee) or a timer's lateness
 * (CLOCK_MONOTONIC, deadline to wakee); whether mely or a plain thread does it. */
enum row_kind { KIND_WAKE, KIND_TIMER, NKINDS };

static const struct {
    const char *name, *key;
    enum row_kind kind;
    bool mely;
} rows_def[NROWS] = {
    [ROW_MELY_FOREIGN] = {"mely, foreign post", "mely_foreign", KIND_WAKE, true},
    [ROW_MELY_HANDLER] = {"mely, handler post", "mely_handler", KIND_WAKE, true},
    [ROW_FUTEX] = {"floor: futex", "floor_futex", KIND_WAKE, false},
    [ROW_EVENTFD] = {"floor: eventfd read", "floor_eventfd", KIND_WAKE, false},
    [ROW_EPOLL] = {"floor: epoll_wait on eventfd", "floor_epoll", KIND_WAKE, false},
    [ROW_LIBEVENT] = {"floor: libevent loop on eventfd", "floor_libevent", KIND_WAKE, false},
    [ROW_MELY_TIMER] = {"mely, timer (parked worker)", "mely_timer", KIND_TIMER, true},
    [ROW_NANOSLEEP] = {"floor: clock_nanosleep", "floor_nanosleep", KIND_TIMER, false},
    [ROW_TIMERFD] = {"floor: epoll_wait on timerfd", "floor_timerfd", KIND_TIMER, false},
};

/* ---- One batch of samples, shared by the waker and the wakee ---------------------------- */

struct batch {
    unsigned n;        /* samples in this batch */
    uint64_t *t0, *t1; /* waker's and wakee's TSC reads, per sample; timer rows:
                        * the deadline and the wakee's clock read, in ns */
    uint64_t *ahead_ns; /* timer rows: how far ahead each deadline is set */
    alignas(64) _Atomic unsigned done; /* samples the wakee has answered */
    alignas(64) _Atomic uint32_t word; /* futex: the sample being woken, + 1 */
    int efd, epfd;     /* an eventfd, or the timerfd floor's timerfd; an epoll */
    int cpu;           /* the wakee's CPU */
    enum row_id row;
    bool failed;       /* the wakee could not run */
};

/* The wakee has answered sample i (its TSC read is in t1[i]). */
static void answered(struct batch *bt, unsigned i, uint64_t t)
{
    bt->t1[i] = t;
    atomic_store_explicit(&bt->done, i + 1, memory_order_release);
}

static void drain_eventfd(int efd)
{
    uint64_t v;
    while (read(efd, &v, sizeof(v)) < 0 && errno == EINTR)
        ;
}

static void le_ready(evutil_socket_t fd, short what, void *arg)
{
    uint64_t t = bench_cycles();
    struct batch *bt = arg;
    (void)what;
    drain_eventfd((int)fd);
    answered(bt, atomic_load_explicit(&bt->done, memory_order_relaxed), t);
}

/* The libevent floor's wakee: a loop with a persistent event on the eventfd.
 * Bounded: the waker gives up (and the program exits) if a sample is not
 * answered. */
static void le_wakee(struct batch *bt)
{
    struct event_base *base = event_base_new();
    struct event *ev = base ? event_new(base, bt->efd, EV_READ | EV_PERSIST, le_ready, bt) : NULL;

    bt->failed = !ev || event_add(ev, NULL) != 0;
    while (!bt->failed && atomic_load_explicit(&bt->done, memory_order_relaxed) < bt->n)
        bt->failed = event_base_loop(base, EVLOOP_ONCE) < 0;
    if (ev)
        event_free(ev);
    if (base)
        event_base_free(base);
}

/* The timer floors' sample i: sets its deadline ahead_ns[i] from now (into
 * t0[i]) and sleeps to it, the row's way; returns the clock read first thing
 * once awake, 0 if the sleep failed. Bounded: the deadline, and for epoll
 * ANSWER_LIMIT_US past it. */
static uint64_t sleep_one(struct batch *bt, unsigned i)
{
    uint64_t at = mely_now_ns() + bt->ahead_ns[i], t, v;
    struct timespec ts = {.tv_sec = (time_t)(at / 1000000000u),
                          .tv_nsec = (long)(at % 1000000000u)};
    struct epoll_event ev;
    int r;

    bt->t0[i] = at;
    if (bt->row == ROW_NANOSLEEP) {
        /* An absolute deadline: a retry after a signal sleeps to the same
         * time. Bounded: each retry ends at the deadline at the latest. */
        while ((r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) == EINTR)
            ;
        t = mely_now_ns();
        return r == 0 ? t : 0;
    }
    /* ROW_TIMERFD: as a parked worker's poller sleeps (io/poller.c). */
    struct itimerspec its = {.it_value = ts};
    if (timerfd_settime(bt->efd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
        return 0;
    int limit_ms = (int)(bt->ahead_ns[i] / 1000000u + ANSWER_LIMIT_US / 1000u);
    while ((r = epoll_wait(bt->epfd, &ev, 1, limit_ms)) < 0 && errno == EINTR)
        ;
    t = mely_now_ns();
    while (read(bt->efd, &v, sizeof(v)) < 0 && errno == EINTR) /* bounded: EINTR only */
        ;
    return r == 1 ? t : 0;
}

/* Blocks until the waker's sample i, the row's way; returns the TSC read
 * first thing once awake, 0 if the wait failed. The timer floors sleep to a
 * deadline instead, and return the clock's ns (sleep_one). */
static uint64_t wait_one(struct batch *bt, unsigned i)
{
    struct epoll_event ev;
    uint64_t v, t;
    ssize_t r;

    switch (bt->row) {
    case ROW_NANOSLEEP:
    case ROW_TIMERFD:
        return sleep_one(bt, i);
    case ROW_FUTEX:
        while (atomic_load_explicit(&bt->word, memory_order_acquire) == i)
            syscall(SYS_futex, (uint32_t *)&bt->word, FUTEX_WAIT_PRIVATE, i, NULL, NULL, 0);
        return bench_cycles();
    case ROW_EVENTFD:
        while ((r = read(bt->efd, &v, sizeof(v))) < 0 && errno == EINTR)
            ;
        t = bench_cycles();
        return r == sizeof(v) ? t : 0;
    default: /* ROW_EPOLL */
        while ((r = epoll_wait(bt->epfd, &ev, 1, -1)) < 0 && errno == EINTR)
            ;
        t = bench_cycles();
        drain_eventfd(bt->efd);
        return r == 1 ? t : 0;
    }
}

static void *wakee_main(void *arg)
{
    struct batch *bt = arg;

    pin_self(bt->cpu);
    if (bt->row == ROW_LIBEVENT) {
        le_wakee(bt);
        return NULL;
    }
    for (unsigned i = 0; i < bt->n && !bt->failed; i++) {
        uint64_t t = wait_one(bt, i);
        if (t)
            answered(bt, i, t);
        bt->failed = t == 0;
    }
    return NULL;
}

/* ---- mely's side ------------------------------------------------------------------------ */

/* Worker 1's counters over one kind of mely sample: was it parked for each? */
struct w1_counts {
    uint64_t samples, parks, wakeups, timers; /* timers: fired */
};

struct mely_side {
    mely_t m;
    mely_color_t color1; /* an ordinary color owned by worker 1 (also its timers' home) */
    struct batch *bt;    /* the batch being measured */
    _Atomic unsigned cur; /* the sample being woken */
    int post_err;
    struct w1_counts w1[NKINDS];
};

static void on_wake(void *arg)
{
    uint64_t t = bench_cycles();
    struct mely_side *s = arg;
    answered(s->bt, atomic_load_explicit(&s->cur, memory_order_relaxed), t);
}

/* A timer's handler: the deadline's clock, read first. */
static void on_timer(void *arg)
{
    uint64_t t = mely_now_ns();
    struct mely_side *s = arg;
    answered(s->bt, atomic_load_explicit(&s->cur, memory_order_relaxed), t);
}

/* On worker 0: the post to worker 1 leaves when this handler returns. */
static void on_kick(void *arg)
{
    struct mely_side *s = arg;
    unsigned i = atomic_load_explicit(&s->cur, memory_order_relaxed);
    s->bt->t0[i] = bench_cycles();
    int err = mely_post(&s->m, s->color1, on_wake, s);
    if (err)
        bench_post_failed(&s->m, &s->post_err, err);
}

/* ---- The waker ---------------------------------------------------------------------------- */

/* Waits (sleeping in 50 us steps) until the wakee has answered `want`
 * samples. False if it does not within limit_us. */
static bool wait_answered(struct batch *bt, unsigned want, uint64_t limit_us)
{
    uint64_t limit = now_ns() + limit_us * 1000u;
    while (atomic_load_explicit(&bt->done, memory_order_acquire) < want) {
        if (now_ns() > limit)
            return false;
        sleep_us(50);
    }
    return true;
}

/* Sleeps about pause_us (+-25%), then waits until the wakee has answered
 * `want` samples. False if it does not within ANSWER_LIMIT_US. */
static bool pause_then_wait(struct batch *bt, unsigned want, unsigned pause_us, uint64_t *rng)
{
    sleep_us(pause_us * 3 / 4 + xorshift64(rng) % (pause_us / 2 + 1));
    return wait_answered(bt, want, ANSWER_LIMIT_US);
}

static void wake_one(struct batch *bt, struct mely_side *ms, unsigned i)
{
    static const uint64_t one = 1;

    switch (bt->row) {
    case ROW_MELY_FOREIGN: {
        atomic_store_explicit(&ms->cur, i, memory_order_relaxed);
        bt->t0[i] = bench_cycles();
        int err = mely_post(&ms->m, ms->color1, on_wake, ms);
        if (err)
            bench_post_failed(&ms->m, &ms->post_err, err);
        break;
    }
    case ROW_MELY_HANDLER: {
        atomic_store_explicit(&ms->cur, i, memory_order_relaxed);
        int err = mely_post(&ms->m, MELY_COLOR_PINNED(0), on_kick, ms);
        if (err)
            bench_post_failed(&ms->m, &ms->post_err, err);
        break;
    }
    case ROW_FUTEX:
        bt->t0[i] = bench_cycles();
        atomic_store_explicit(&bt->word, i + 1, memory_order_release);
        syscall(SYS_futex, (uint32_t *)&bt->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        break;
    default: /* eventfd, epoll, libevent */
        bt->t0[i] = bench_cycles();
        if (write(bt->efd, &one, sizeof(one)) != sizeof(one))
            bt->failed = true;
        break;
    }
}

/* ---- A row's samples ------------------------------------------------------------------------ */

struct row_result {
    double *lat_us; /* every sample of every pass, in us */
    unsigned n;     /* samples so far */
    double pass_p50[MAX_PASSES];
    unsigned passes;
    unsigned negative; /* wake-ups with t1 < t0 (TSCs out of step): dropped */
    unsigned early;    /* timers with t1 < t0 (fired before the deadline): kept */
    bool failed;
    char why[120];
};

static struct {
    struct bench b;
    unsigned samples, passes, pause_us, ahead_us;
    bool quick;
    const char *csv;
    int cpu[2];
    double tsc_per_us;
    uint64_t rng;
    struct mely_side ms;
    bool mely_ok;
    struct row_result res[NROWS];
} c = {.b = {.name = "wakeup"}, .rng = 0x9e3779b97f4a7c15ull};

static const struct bench_opt options[] = {
    {.name = "samples", .kind = OPT_UINT, .var = &c.samples, .lo = 10, .hi = 1000000,
     .dflt = 2000, .quick = 300, .param = true, .help = "samples per row, all passes together"},
    {.name = "passes", .kind = OPT_UINT, .var = &c.passes, .lo = 1, .hi = MAX_PASSES, .dflt = 20,
     .quick = 3, .param = true, .help = "interleaved passes over the rows"},
    {.name = "pause-us", .kind = OPT_UINT, .var = &c.pause_us, .lo = 100, .hi = 100000,
     .dflt = 1000, .param = true, .help = "sleep between two samples, +-25%"},
    {.name = "ahead-us", .kind = OPT_UINT, .var = &c.ahead_us, .lo = 100, .hi = 100000,
     .dflt = 2000, .param = true, .help = "a timer row's deadline from now, +-25%"},
    {.name = "quick", .kind = OPT_QUICK, .var = &c.quick, .help = "a few seconds"},
    {.name = "csv", .kind = OPT_STR, .var = &c.csv, .sdflt = "bench/results/wakeup.csv",
     .help = "the CSV file"},
    {.name = NULL},
};

/* A finished batch's latencies into res, and its median as one pass p50. A
 * wake-up's t1 < t0 can only be TSCs out of step between the CPUs: dropped.
 * A timer's is a timer that fired early, which none may: kept, negative. */
static void collect(const struct batch *bt, struct row_result *res)
{
    double pass[bt->n];
    unsigned k = 0;

    for (unsigned i = 0; i < bt->n; i++) {
        if (rows_def[bt->row].kind == KIND_TIMER) {
            res->early += bt->t1[i] < bt->t0[i];
            pass[k] = (double)(int64_t)(bt->t1[i] - bt->t0[i]) / 1000.0;
        } else if (bt->t1[i] < bt->t0[i]) {
            res->negative++;
            continue;
        } else {
            pass[k] = (double)(bt->t1[i] - bt->t0[i]) / c.tsc_per_us;
        }
        res->lat_us[res->n++] = pass[k++];
    }
    if (res->passes < MAX_PASSES && k > 0)
        res->pass_p50[res->passes++] = median(pass, k);
}

/* A floor's descriptors and wakee thread; false (why set) on failure. */
static bool start_wakee(struct batch *bt, pthread_t *wakee, char *why, size_t size)
{
    struct epoll_event ev = {.events = EPOLLIN};
    const char *what = NULL;

    switch (bt->row) {
    case ROW_FUTEX:
    case ROW_NANOSLEEP:
        break; /* no descriptor */
    case ROW_TIMERFD:
        /* Non-blocking, as the poller's: the read after epoll_wait drains it
         * and never waits. */
        bt->efd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        what = "timerfd_create";
        break;
    default: /* eventfd, epoll, libevent */
        bt->efd = eventfd(0, EFD_CLOEXEC);
        what = "eventfd";
        break;
    }
    if (what && bt->efd < 0) {
        snprintf(why, size, "%s: %s", what, strerror(errno));
        return false;
    }
    if ((bt->row == ROW_EPOLL || bt->row == ROW_TIMERFD) &&
        ((bt->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
         epoll_ctl(bt->epfd, EPOLL_CTL_ADD, bt->efd, &ev) != 0)) {
        snprintf(why, size, "epoll: %s", strerror(errno));
        return false;
    }
    int err = pthread_create(wakee, NULL, wakee_main, bt);
    if (err)
        snprintf(why, size, "pthread_create: %s", strerror(err));
    return err == 0;
}

/* Wakes the wakee n times, pausing between; false (why set) on failure. */
static bool wake_all(struct batch *bt, unsigned n, bool have_wakee, char *why, size_t size)
{
    bool ok = true;

    for (unsigned i = 0; i < n && ok; i++) {
        ok = pause_then_wait(bt, i, c.pause_us, &c.rng) && !bt->failed;
        if (ok)
            wake_one(bt, &c.ms, i);
    }
    if (ok && pause_then_wait(bt, n, 0, &c.rng) && !bt->failed)
        return true;
    snprintf(why, size, "%s",
             bt->failed ? "the wakee failed" : "a wake-up was not answered within 2 s");
    if (have_wakee) {
        /* A wakee stuck in a blocking call cannot be joined: give up. */
        fprintf(stderr, "wakeup: %s: %s; giving up\n", rows_def[bt->row].name, why);
        exit(3);
    }
    return false;
}

/* mely's timer for sample i has not fired within ANSWER_LIMIT_US of its
 * deadline: cancelled, the row fails (why set). If the cancel comes too late
 * (the handler has started), the handler still writes into the batch: wait
 * for it, or give up on the program, since the batch cannot be freed under
 * it. */
static void timer_missed(struct batch *bt, unsigned i, mely_timer_t id, char *why, size_t size)
{
    if (mely_timer_cancel(&c.ms.m, id) == 0) {
        snprintf(why, size, "a timer did not fire within 2 s of its deadline");
        return;
    }
    if (wait_answered(bt, i + 1, ANSWER_LIMIT_US)) {
        snprintf(why, size, "a timer fired more than 2 s after its deadline");
        return;
    }
    fprintf(stderr, "wakeup: %s: a timer's handler started and did not finish in 2 s; giving "
            "up\n", rows_def[bt->row].name);
    exit(3);
}

/* The timer rows' n samples. mely's: the next timer is set once the last one
 * fired (so worker 1 is parked at each deadline); a floor's wakee sets its
 * own deadlines one after the other. Each sample is awaited at most its
 * deadline plus ANSWER_LIMIT_US; false (why set) on failure. */
static bool time_all(struct batch *bt, unsigned n, bool have_wakee, char *why, size_t size)
{
    for (unsigned i = 0; i < n; i++) {
        mely_timer_t id = 0;
        if (bt->row == ROW_MELY_TIMER) {
            atomic_store_explicit(&c.ms.cur, i, memory_order_relaxed);
            bt->t0[i] = mely_now_ns() + bt->ahead_ns[i];
            int err = mely_timer_at(&c.ms.m, bt->t0[i], MELY_TO(c.ms.color1), on_timer, &c.ms,
                                    &id);
            if (err) {
                snprintf(why, size, "mely_timer_at: %s", mely_strerror(err));
                return false;
            }
        }
        if (wait_answered(bt, i + 1, bt->ahead_ns[i] / 1000u + ANSWER_LIMIT_US))
            continue;
        if (bt->failed) {
            snprintf(why, size, "the wakee failed");
            return false; /* its loop has ended: it can be joined */
        }
        if (!have_wakee) {
            timer_missed(bt, i, id, why, size);
            return false;
        }
        /* A wakee stuck in a sleep cannot be joined: give up. */
        fprintf(stderr, "wakeup: %s: a deadline was not met within 2 s; giving up\n",
                rows_def[bt->row].name);
        exit(3);
    }
    return true;
}

/* Worker 1's counters since s0 into the mely samples' counts of `kind`. */
static void count_w1(const mely_stats_t *s0, enum row_kind kind, unsigned n)
{
    mely_stats_t s1;
    struct w1_counts *w = &c.ms.w1[kind];

    mely_worker_stats(&c.ms.m, 1, &s1);
    w->samples += n;
    w->parks += s1.parks - s0->parks;
    w->wakeups += s1.wakeups - s0->wakeups;
    w->timers += s1.timers_fired - s0->timers_fired;
}

/* One batch of n samples of row r into res. */
static void run_batch(enum row_id r, unsigned n, struct row_result *res)
{
    struct batch bt = {.n = n, .efd = -1, .epfd = -1, .cpu = c.cpu[1], .row = r};
    bool is_mely = rows_def[r].mely, have_wakee = false;
    enum row_kind kind = rows_def[r].kind;
    pthread_t wakee;
    mely_stats_t s0;

    bt.t0 = calloc(n, sizeof(uint64_t));
    bt.t1 = calloc(n, sizeof(uint64_t));
    if (kind == KIND_TIMER && (bt.ahead_ns = calloc(n, sizeof(uint64_t)))) {
        uint64_t ahead = c.ahead_us * 1000ull; /* +-25%, as the pauses */
        for (unsigned i = 0; i < n; i++)
            bt.ahead_ns[i] = ahead * 3 / 4 + xorshift64(&c.rng) % (ahead / 2 + 1);
    }
    if (!bt.t0 || !bt.t1 || (kind == KIND_TIMER && !bt.ahead_ns))
        snprintf(res->why, sizeof(res->why), "out of memory");
    else if (is_mely && !c.mely_ok)
        snprintf(res->why, sizeof(res->why), "no runtime");
    else if (is_mely)
        mely_worker_stats(&c.ms.m, 1, &s0), c.ms.bt = &bt;
    else
        have_wakee = start_wakee(&bt, &wakee, res->why, sizeof(res->why));
    res->failed = res->why[0] != '\0';
    if (!res->failed && !(kind == KIND_TIMER
                              ? time_all(&bt, n, have_wakee, res->why, sizeof(res->why))
                              : wake_all(&bt, n, have_wakee, res->why, sizeof(res->why))))
        res->failed = true;
    if (!res->failed && is_mely && bench_post_error(&c.ms.post_err)) {
        snprintf(res->why, sizeof(res->why), "mely_post: %s", mely_strerror(c.ms.post_err));
        res->failed = true;
    }
    if (!res->failed && is_mely)
        count_w1(&s0, kind, n);
    if (!res->failed)
        collect(&bt, res);
    if (have_wakee)
        pthread_join(wakee, NULL);
    if (bt.epfd >= 0)
        close(bt.epfd);
    if (bt.efd >= 0)
        close(bt.efd);
    free(bt.t0);
    free(bt.t1);
    free(bt.ahead_ns);
}

/* The passes: samples / passes samples of every row in turn, the order
 * rotating. */
static void run_passes(void)
{
    for (unsigned p = 0; p < c.passes; p++) {
        unsigned n = c.samples / c.passes + (p < c.samples % c.passes ? 1 : 0);
        printf("  pass %u/%u:", p + 1, c.passes);
        for (unsigned k = 0; k < NROWS; k++) {
            enum row_id r = (enum row_id)((p + k) % NROWS);
            struct row_result *res = &c.res[r];
            if (res->failed)
                continue;
            run_batch(r, n, res);
            if (res->failed)
                printf(" [%s: %s]", rows_def[r].key, res->why);
            else
                printf(" %s %.1f", rows_def[r].key, res->pass_p50[res->passes - 1]);
            fflush(stdout);
        }
        printf(" (p50 us)\n");
    }
}

/* ---- The table ------------------------------------------------------------------------------ */

enum { COL_ROW, COL_KEY, COL_N, COL_P50, COL_P90, COL_P99, COL_MIN, COL_PASS, COL_DFUTEX,
       COL_DEPOLL, COL_DSLEEP, COL_DTIMERFD, COL_STATUS, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_ROW] = {.title = "wake-up"},
    [COL_KEY] = {.key = "row"},
    [COL_N] = {.title = "samples", .key = "valid_samples", .right = true, .gap = 2},
    [COL_P50] = {.title = "p50 us", .key = "p50_us", .right = true},
    [COL_P90] = {.title = "p90 us", .key = "p90_us", .right = true},
    [COL_P99] = {.title = "p99 us", .key = "p99_us", .right = true},
    [COL_MIN] = {.title = "min us", .key = "min_us", .right = true},
    [COL_PASS] = {.title = "pass p50 min..max", .key = "pass_p50_min_max_us", .right = true},
    [COL_DFUTEX] = {.title = "- futex", .key = "paired_p50_minus_futex_us", .right = true,
                    .gap = 2},
    [COL_DEPOLL] = {.title = "- epoll", .key = "paired_p50_minus_epoll_us", .right = true},
    [COL_DSLEEP] = {.title = "- nanosleep", .key = "paired_p50_minus_nanosleep_us",
                    .right = true, .gap = 2},
    [COL_DTIMERFD] = {.title = "- timerfd", .key = "paired_p50_minus_timerfd_us", .right = true},
    [COL_STATUS] = {.title = "target (both <= 5 us)", .key = "status", .gap = 2},
};

/* The median over the passes of (row's pass p50 - floor's pass p50): the two
 * were measured within a few hundred ms of each other in every pass, so a
 * slow period of the host cancels out. False if they share no pass. */
static bool paired_diff(const struct row_result *row, const struct row_result *floor_,
                        double *out)
{
    double d[MAX_PASSES];
    unsigned n = row->passes < floor_->passes ? row->passes : floor_->passes;
    if (row->failed || floor_->failed || n == 0)
        return false;
    for (unsigned p = 0; p < n; p++)
        d[p] = row->pass_p50[p] - floor_->pass_p50[p];
    *out = median(d, n);
    return true;
}

/* Row r's cells; false if it has no figures. A wake-up row is paired with
 * the futex and epoll floors, a timer row with the clock_nanosleep and
 * timerfd floors (a lateness and a wake-up latency are not comparable). */
static bool row_cells(struct bench_table *t, enum row_id r)
{
    struct row_result *res = &c.res[r];
    double dfutex = 0, depoll = 0, p[MAX_PASSES];
    bool timer = rows_def[r].kind == KIND_TIMER;

    for (unsigned k = COL_N; k < NCOLS; k++)
        bench_cell(t, r, k, "-");
    bench_cell(t, r, COL_ROW, "%s", rows_def[r].name);
    bench_cell(t, r, COL_KEY, "%s", rows_def[r].key);
    if (res->failed || res->n == 0) {
        bench_cell(t, r, COL_STATUS, "n/a (%s)", res->why);
        return false;
    }
    bench_cell(t, r, COL_N, "%u", res->n);
    bench_cell(t, r, COL_P50, "%.1f", quantile(res->lat_us, res->n, 0.5));
    bench_cell(t, r, COL_P90, "%.1f", quantile(res->lat_us, res->n, 0.9));
    bench_cell(t, r, COL_P99, "%.1f", quantile(res->lat_us, res->n, 0.99));
    bench_cell(t, r, COL_MIN, "%.1f", res->lat_us[0]); /* sorted by quantile() */
    memcpy(p, res->pass_p50, sizeof(double) * res->passes);
    double pmin = quantile(p, res->passes, 0); /* sorts p */
    bench_cell(t, r, COL_PASS, "%.1f..%.1f", pmin, p[res->passes - 1]);
    /* dfutex, depoll: for a timer row, its pairs with the nanosleep and
     * timerfd floors. */
    bool hf = paired_diff(res, &c.res[timer ? ROW_NANOSLEEP : ROW_FUTEX], &dfutex);
    bool he = paired_diff(res, &c.res[timer ? ROW_TIMERFD : ROW_EPOLL], &depoll);
    if (hf)
        bench_cell(t, r, timer ? COL_DSLEEP : COL_DFUTEX, "%+.1f", dfutex);
    if (he)
        bench_cell(t, r, timer ? COL_DTIMERFD : COL_DEPOLL, "%+.1f", depoll);
    if (r == ROW_MELY_TIMER)
        bench_cell(t, r, COL_STATUS, "n/a (no target)");
    else if (r == ROW_MELY_FOREIGN || r == ROW_MELY_HANDLER)
        bench_cell(t, r, COL_STATUS, "%s",
                   !(hf && he)                                    ? "n/a (no floor)"
                   : dfutex <= TARGET_US && depoll <= TARGET_US ? "PASS"
                                                                  : "FAIL");
    return true;
}

/* The table, the notes under it, the CSV file. True if every row has figures. */
static bool report(const struct bench_machine *mc, const char *load)
{
    struct bench_table t;
    struct bench_param params[4];
    bool all = true;

    bench_table_init(&t, columns, NCOLS, NROWS);
    for (unsigned r = 0; r < NROWS; r++)
        all &= row_cells(&t, (enum row_id)r);
    printf("\n");
    bench_table_print(stdout, &t);
    for (unsigned r = 0; r < NROWS; r++)
        if (c.res[r].negative)
            printf("note: %s: %u sample(s) with the wakee's TSC before the waker's dropped "
                   "(TSCs out of step between the CPUs?)\n",
                   rows_def[r].name, c.res[r].negative);
    for (unsigned r = 0; r < NROWS; r++)
        if (c.res[r].early)
            printf("note: %s: %u sample(s) woke before their deadline (kept, negative): a timer "
                   "must never fire early\n",
                   rows_def[r].name, c.res[r].early);
    const struct w1_counts *wk = &c.ms.w1[KIND_WAKE], *tm = &c.ms.w1[KIND_TIMER];
    if (wk->samples)
        printf("worker 1 over the mely post samples: %" PRIu64 " posts, %" PRIu64 " parks, %" PRIu64
               " wake-ups%s\n",
               wk->samples, wk->parks, wk->wakeups,
               wk->wakeups * 100 < wk->samples * 95
                   ? ": fewer wake-ups than posts, worker 1 was not always parked"
                   : " (parked for every post)");
    /* Worker 1 has nothing else to do, so one park per timer means it was
     * asleep at every deadline; two when setting the timer woke it (its
     * deadline moved earlier) and it parked again. Its wake-ups do not tell:
     * a park that the timerfd ends counts as one too (the expiry posts to
     * the worker's own color while it is still marked parked). */
    if (tm->samples)
        printf("worker 1 over the timer samples: %" PRIu64 " timers, %" PRIu64 " fired, %" PRIu64
               " parks%s\n",
               tm->samples, tm->timers, tm->parks,
               tm->parks * 100 < tm->samples * 95
                   ? ": fewer parks than timers, worker 1 was not always parked at a deadline"
                   : " (parked at every deadline; setting a timer wakes it, and it parks again)");
    printf("- futex, - epoll (wake-up rows), - nanosleep, - timerfd (timer rows): the median over "
           "the passes of (the row's p50 - the floor's p50 in the same pass), in us\n"
           "target: mely's post p50 at most %.0f us above the futex floor's and the epoll floor's "
           "(paired by pass); none for timers%s\n",
           TARGET_US, load);
    bench_load_warn(&c.b);
    bench_table_csv(&c.b, c.csv, mc, params, bench_opt_params(options, params, 4), &t);
    bench_table_free(&t);
    return all;
}

/* ---- Main ------------------------------------------------------------------------------------- */

static void print_setup(void)
{
    char drv[64] = "?", poll[32] = "?";
    FILE *f = fopen("/sys/devices/system/cpu/cpuidle/current_driver", "r");
    if (f && fscanf(f, "%63s", drv) != 1)
        snprintf(drv, sizeof(drv), "?");
    if (f)
        fclose(f);
    f = fopen("/sys/module/haltpoll/parameters/guest_halt_poll_ns", "r");
    if (f && fscanf(f, "%31s", poll) != 1)
        snprintf(poll, sizeof(poll), "?");
    if (f)
        fclose(f);
    printf("cpuidle driver: %s; guest_halt_poll_ns: %s (how long an idle vCPU polls before it "
           "halts)\n",
           drv, poll);
    printf("setup: 2 workers pinned to CPUs %d and %d, spin_us 0, stealing off; poster on CPU "
           "%d, wakee on CPU %d; %u samples per row in %u interleaved passes, %u us (+-25%%) "
           "between samples; TSC %.3f GHz\n",
           c.cpu[0], c.cpu[1], c.cpu[0], c.cpu[1], c.samples, c.passes, c.pause_us,
           c.tsc_per_us / 1000.0);
    /* The floor threads inherit this thread's timer slack. */
    printf("timers: deadlines %u us (+-25%%) ahead, set by the main thread (mely_timer_at) or by "
           "the sleeper itself (floors); lateness in CLOCK_MONOTONIC ns; timer slack %d ns "
           "(added to clock_nanosleep's expiry, not to a timerfd's)\n",
           c.ahead_us, prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
    bench_print_mely_env(stdout);
    fflush(stdout);
}

/* The runtime of the mely rows, running in the background under a
 * watchdog that bounds the whole run (every sample at most 2 s). */
static void mely_start(struct bench_bg *bg, struct watchdog *wd)
{
    mely_config_t cfg;

    mely_config_init(&cfg);
    cfg.workers = 2;
    cfg.pin = 1;
    cfg.spin_us = 0;
    cfg.steal = "off";
    c.mely_ok = bench_rt_open_cfg(&c.b, &c.ms.m, &cfg, 2) == 0;
    if (c.mely_ok && bench_colors_of(&c.b, &c.ms.m, 1, &c.ms.color1, 1) != 1) {
        bench_rt_close(&c.b, &c.ms.m, "wake-up");
        c.mely_ok = false;
    }
    if (c.mely_ok) {
        unsigned longest = c.pause_us > c.ahead_us ? c.pause_us : c.ahead_us;
        watchdog_start(wd, &c.ms.m, bench_limit_s(c.samples * NROWS, longest * 2000ull),
                       "wakeup: wake-up");
        c.mely_ok = bench_bg_start(&c.b, bg, &c.ms.m, "wake-up") == 0;
        if (!c.mely_ok) {
            watchdog_end(wd);
            bench_rt_close(&c.b, &c.ms.m, "wake-up");
        }
    }
}

int main(int argc, char **argv)
{
    struct bench_machine mc;
    struct bench_bg bg;
    struct watchdog wd;
    char load[64];

    int rc = bench_options("wakeup [options]", options, 0, 0, argc, argv);
    if (rc <= 0)
        return rc ? 2 : 0;
    c.passes = c.passes > c.samples ? c.samples : c.passes;
    if (first_cpus(c.cpu, 2) < 2 || (c.tsc_per_us = bench_tsc_per_ns() * 1000.0) <= 0) {
        fprintf(stderr, "wakeup: needs 2 usable CPUs and a TSC (x86-64)\n");
        return 2;
    }
    for (unsigned r = 0; r < NROWS; r++)
        if (!(c.res[r].lat_us = calloc(c.samples, sizeof(double)))) {
            fprintf(stderr, "wakeup: out of memory\n");
            return 1;
        }
    printf("mely wake-up latency: a post to a parked worker on another core, a timer's "
           "lateness on a parked worker, and their floors\n");
    bench_machine_get(&mc, stdout);
    print_setup();
    mely_start(&bg, &wd);
    pin_self(c.cpu[0]); /* after bench_bg_start: worker 0 pins its own thread */
    struct bench_probe p0 = bench_probe_now();
    run_passes();
    struct bench_probe p1 = bench_probe_now();
    bench_load_note(&c.b, &p0, &p1, load, sizeof(load));
    if (c.mely_ok) {
        bench_bg_stop(&c.b, &bg, "wake-up");
        watchdog_end(&wd);
        bench_rt_close(&c.b, &c.ms.m, "wake-up");
    }
    bool all = report(&mc, load);
    for (unsigned r = 0; r < NROWS; r++)
        free(c.res[r].lat_us);
    if (!all)
        printf("some rows have no figures (n/a): exit status 1\n");
    return all ? 0 : 1;
}
