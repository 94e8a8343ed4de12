/*
 * wakeup.c: how long a post takes to wake a parked worker on another core,
 * next to the machine's floor for the same wake-up done by hand.
 *
 *   bench/wakeup [--samples N] [--passes P] [--pause-us U] [--quick] [--csv PATH]
 *
 * One runtime of 2 pinned workers with spin_us = 0 (an idle worker parks at
 * once), stealing off. A post to an ordinary color owned by worker 1, while
 * worker 1 is parked, is timed from the poster's TSC read just before
 * mely_post() to the TSC read that the handler makes first thing on worker 1:
 *
 *   mely, foreign post   the program's main thread, pinned to the first
 *                        allowed CPU (where worker 0 runs, parked), posts;
 *   mely, handler post   the main thread posts a kick to worker 0's pinned
 *                        color; the kick handler (on worker 0) reads the TSC
 *                        and posts to worker 1's color (the post leaves when
 *                        the kick returns: that is part of the latency).
 *
 * The floor: two plain threads pinned to the same two CPUs, the waker reading
 * the TSC just before waking the sleeper, which reads it first thing once
 * awake: (a) FUTEX_WAIT / FUTEX_WAKE on a word, (b) read() / write() on an
 * eventfd, (c) epoll_wait() on an epoll set holding an eventfd (what a parked
 * worker does since the I/O layer), (d) libevent's event_base_loop(EVLOOP_ONCE)
 * on an eventfd event (the same through libevent, the worker's poller).
 *
 * Between two samples the poster sleeps --pause-us (1000 us, +-25% at random),
 * so that the wakee is asleep each time (mely: worker 1's parks and wake-ups
 * are counted and printed). The rows run interleaved: --passes passes (20), each
 * taking samples / passes samples of every row in turn (the order rotates),
 * so that a slow period of the host hits every row a little. Percentiles are
 * over all samples of a row; "pass p50" gives the spread of the passes'
 * medians. Every wait is bounded (a sample whose wakee does not answer within
 * 2 s fails the row; the runtime runs under the harness's watchdog).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

#include "bench/harness.h"
#include "bench/report.h"

#define SAMPLES_DEFAULT 2000u
#define SAMPLES_QUICK 300u
#define PASSES_DEFAULT 20u
#define PASSES_QUICK 3u
#define MAX_PASSES 100u
#define PAUSE_US_DEFAULT 1000u
#define CSV_DEFAULT "bench/results/wakeup.csv"
#define TARGET_US 5.0            /* mely's p50 within this of a floor's p50 */
#define ANSWER_LIMIT_NS 2000000000ull /* a wakee must answer within this */

enum row_id {
    ROW_MELY_FOREIGN,
    ROW_MELY_HANDLER,
    ROW_FUTEX,
    ROW_EVENTFD,
    ROW_EPOLL,
    ROW_LIBEVENT,
    NROWS
};

static const struct {
    const char *name, *key;
} rows_def[NROWS] = {
    [ROW_MELY_FOREIGN] = {"mely, foreign post", "mely_foreign"},
    [ROW_MELY_HANDLER] = {"mely, handler post", "mely_handler"},
    [ROW_FUTEX] = {"floor: futex", "floor_futex"},
    [ROW_EVENTFD] = {"floor: eventfd read", "floor_eventfd"},
    [ROW_EPOLL] = {"floor: epoll_wait on eventfd", "floor_epoll"},
    [ROW_LIBEVENT] = {"floor: libevent loop on eventfd", "floor_libevent"},
};

/* ---- One batch of samples, shared by the waker and the wakee ---------------------------- */

struct batch {
    unsigned n;        /* samples in this batch */
    uint64_t *t0, *t1; /* waker's and wakee's TSC reads, per sample */
    alignas(64) _Atomic unsigned done; /* samples the wakee has answered */
    alignas(64) _Atomic uint32_t word; /* futex: the sample being woken, + 1 */
    int efd, epfd;
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

struct le_ctx {
    struct batch *bt;
    struct event_base *base;
};

static void le_ready(evutil_socket_t fd, short what, void *arg)
{
    uint64_t t = bench_cycles();
    struct le_ctx *c = arg;
    (void)what;
    drain_eventfd((int)fd);
    answered(c->bt, atomic_load_explicit(&c->bt->done, memory_order_relaxed), t);
}

static void *wakee_main(void *arg)
{
    struct batch *bt = arg;

    bench_pin_self(bt->cpu);
    switch (bt->row) {
    case ROW_FUTEX:
        for (unsigned i = 0; i < bt->n; i++) {
            while (atomic_load_explicit(&bt->word, memory_order_acquire) == i)
                syscall(SYS_futex, (uint32_t *)&bt->word, FUTEX_WAIT_PRIVATE, i, NULL, NULL, 0);
            answered(bt, i, bench_cycles());
        }
        break;
    case ROW_EVENTFD:
        for (unsigned i = 0; i < bt->n; i++) {
            uint64_t v;
            ssize_t r;
            while ((r = read(bt->efd, &v, sizeof(v))) < 0 && errno == EINTR)
                ;
            uint64_t t = bench_cycles();
            if (r != sizeof(v)) {
                bt->failed = true;
                return NULL;
            }
            answered(bt, i, t);
        }
        break;
    case ROW_EPOLL:
        for (unsigned i = 0; i < bt->n; i++) {
            struct epoll_event ev;
            int r;
            while ((r = epoll_wait(bt->epfd, &ev, 1, -1)) < 0 && errno == EINTR)
                ;
            uint64_t t = bench_cycles();
            if (r != 1) {
                bt->failed = true;
                return NULL;
            }
            drain_eventfd(bt->efd);
            answered(bt, i, t);
        }
        break;
    case ROW_LIBEVENT: {
        struct le_ctx c = {.bt = bt, .base = event_base_new()};
        struct event *ev = c.base ? event_new(c.base, bt->efd, EV_READ | EV_PERSIST, le_ready, &c)
                                  : NULL;
        if (!ev || event_add(ev, NULL) != 0) {
            bt->failed = true;
        } else {
            /* Bounded: the waker gives up (and the program exits) if a sample
             * is not answered. */
            while (atomic_load_explicit(&bt->done, memory_order_relaxed) < bt->n)
                if (event_base_loop(c.base, EVLOOP_ONCE) < 0) {
                    bt->failed = true;
                    break;
                }
        }
        if (ev)
            event_free(ev);
        if (c.base)
            event_base_free(c.base);
        break;
    }
    default:
        bt->failed = true;
    }
    return NULL;
}

/* ---- mely's side ------------------------------------------------------------------------ */

struct mely_side {
    mely_t m;
    mely_color_t color1; /* an ordinary color owned by worker 1 */
    struct batch *bt;    /* the batch being measured */
    _Atomic unsigned cur; /* the sample being woken */
    _Atomic int post_err;
    uint64_t posts, parks, wakeups; /* worker 1's, over the mely samples */
};

static void on_wake(void *arg)
{
    uint64_t t = bench_cycles();
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

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Sleeps about pause_us (+-25%), then waits (sleeping in 50 us steps) until
 * the wakee has answered `want` samples. False if it does not within
 * ANSWER_LIMIT_NS. */
static bool pause_then_wait(struct batch *bt, unsigned want, unsigned pause_us, uint64_t *rng)
{
    uint64_t ns = (uint64_t)pause_us * 1000u;
    ns = ns * 3 / 4 + xorshift(rng) % (ns / 2 + 1);
    bench_sleep_until(bench_ts_after(ns));
    uint64_t limit = bench_now_ns() + ANSWER_LIMIT_NS;
    while (atomic_load_explicit(&bt->done, memory_order_acquire) < want) {
        if (bench_now_ns() > limit)
            return false;
        bench_sleep_until(bench_ts_after(50000));
    }
    return true;
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
    double *lat_us;   /* every sample of every pass, in us */
    unsigned n;       /* samples so far */
    double pass_p50[MAX_PASSES];
    unsigned passes;
    unsigned negative; /* samples with t1 < t0 (TSCs out of step): dropped */
    bool failed;
    char why[120];
};

struct ctx {
    struct bench b;
    unsigned samples, passes, pause_us;
    const char *csv;
    int cpu[2];
    double tsc_per_us;
    uint64_t rng;
    struct mely_side ms;
    bool mely_ok;
};

/* A finished batch's latencies into res, and its median as one pass p50. */
static void collect(const struct ctx *c, const struct batch *bt, struct row_result *res)
{
    double pass[bt->n];
    unsigned k = 0;

    for (unsigned i = 0; i < bt->n; i++) {
        if (bt->t1[i] < bt->t0[i]) {
            res->negative++;
            continue;
        }
        pass[k] = (double)(bt->t1[i] - bt->t0[i]) / c->tsc_per_us;
        res->lat_us[res->n++] = pass[k++];
    }
    if (res->passes < MAX_PASSES && k > 0)
        res->pass_p50[res->passes++] = bench_median(pass, k);
}

/* One batch of n samples of row r into res. */
static void run_batch(struct ctx *c, enum row_id r, unsigned n, struct row_result *res)
{
    struct batch bt = {.n = n, .efd = -1, .epfd = -1, .cpu = c->cpu[1], .row = r};
    pthread_t wakee;
    bool have_wakee = false, ok = true;
    mely_stats_t s0, s1;

    bt.t0 = calloc(n, sizeof(uint64_t));
    bt.t1 = calloc(n, sizeof(uint64_t));
    if (!bt.t0 || !bt.t1) {
        snprintf(res->why, sizeof(res->why), "out of memory");
        goto fail;
    }
    if (r == ROW_MELY_FOREIGN || r == ROW_MELY_HANDLER) {
        if (!c->mely_ok) {
            snprintf(res->why, sizeof(res->why), "no runtime");
            goto fail;
        }
        c->ms.bt = &bt;
        mely_worker_stats(&c->ms.m, 1, &s0);
    } else {
        if (r != ROW_FUTEX) {
            bt.efd = eventfd(0, EFD_CLOEXEC);
            if (bt.efd < 0) {
                snprintf(res->why, sizeof(res->why), "eventfd: %s", strerror(errno));
                goto fail;
            }
        }
        if (r == ROW_EPOLL) {
            struct epoll_event ev = {.events = EPOLLIN};
            bt.epfd = epoll_create1(EPOLL_CLOEXEC);
            if (bt.epfd < 0 || epoll_ctl(bt.epfd, EPOLL_CTL_ADD, bt.efd, &ev) != 0) {
                snprintf(res->why, sizeof(res->why), "epoll: %s", strerror(errno));
                goto fail;
            }
        }
        int err = pthread_create(&wakee, NULL, wakee_main, &bt);
        if (err) {
            snprintf(res->why, sizeof(res->why), "pthread_create: %s", strerror(err));
            goto fail;
        }
        have_wakee = true;
    }

    for (unsigned i = 0; i < n && ok; i++) {
        ok = pause_then_wait(&bt, i, c->pause_us, &c->rng) && !bt.failed;
        if (ok)
            wake_one(&bt, &c->ms, i);
    }
    ok = ok && pause_then_wait(&bt, n, 0, &c->rng) && !bt.failed;
    if (!ok) {
        snprintf(res->why, sizeof(res->why), "%s",
                 bt.failed ? "the wakee failed" : "a wake-up was not answered within 2 s");
        if (have_wakee) {
            /* A wakee stuck in a blocking call cannot be joined: give up. */
            fprintf(stderr, "wakeup: %s: %s; giving up\n", rows_def[r].name, res->why);
            exit(3);
        }
        goto fail;
    }
    if (r == ROW_MELY_FOREIGN || r == ROW_MELY_HANDLER) {
        int perr = atomic_load(&c->ms.post_err);
        if (perr) {
            snprintf(res->why, sizeof(res->why), "mely_post: %s", mely_strerror(perr));
            goto fail;
        }
        mely_worker_stats(&c->ms.m, 1, &s1);
        c->ms.posts += n;
        c->ms.parks += s1.parks - s0.parks;
        c->ms.wakeups += s1.wakeups - s0.wakeups;
    }

    collect(c, &bt, res);
    goto out;

fail:
    res->failed = true;
out:
    if (have_wakee)
        pthread_join(wakee, NULL);
    if (bt.epfd >= 0)
        close(bt.epfd);
    if (bt.efd >= 0)
        close(bt.efd);
    free(bt.t0);
    free(bt.t1);
}

/* ---- Options ------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wakeup [options]\n"
            "  --samples N    samples per row, all passes together (default %u; --quick: %u)\n"
            "  --passes P     interleaved passes over the rows (default %u; --quick: %u; 1..%u)\n"
            "  --pause-us U   sleep between two samples, +-25%% (default %u; 100..100000)\n"
            "  --quick        %u samples per row in %u passes: a few seconds\n"
            "  --csv PATH     the CSV file (default %s)\n",
            SAMPLES_DEFAULT, SAMPLES_QUICK, PASSES_DEFAULT, PASSES_QUICK, MAX_PASSES,
            PAUSE_US_DEFAULT, SAMPLES_QUICK, PASSES_QUICK, CSV_DEFAULT);
}

static int parse_options(int argc, char **argv, struct ctx *c)
{
    static const struct option longopts[] = {
        {"samples", required_argument, NULL, 's'}, {"passes", required_argument, NULL, 'p'},
        {"pause-us", required_argument, NULL, 'u'}, {"quick", no_argument, NULL, 'q'},
        {"csv", required_argument, NULL, 'c'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    bool quick = false;
    int o;

    c->pause_us = PAUSE_US_DEFAULT;
    c->csv = CSV_DEFAULT;
    while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (o) {
        case 's':
            if (bench_parse_u64(optarg, 10, 1000000, &v) != 0) {
                fprintf(stderr, "wakeup: --samples: expected 10..1000000\n");
                return 2;
            }
            c->samples = (unsigned)v;
            break;
        case 'p':
            if (bench_parse_u64(optarg, 1, MAX_PASSES, &v) != 0) {
                fprintf(stderr, "wakeup: --passes: expected 1..%u\n", MAX_PASSES);
                return 2;
            }
            c->passes = (unsigned)v;
            break;
        case 'u':
            if (bench_parse_u64(optarg, 100, 100000, &v) != 0) {
                fprintf(stderr, "wakeup: --pause-us: expected 100..100000\n");
                return 2;
            }
            c->pause_us = (unsigned)v;
            break;
        case 'q':
            quick = true;
            break;
        case 'c':
            if (optarg[0] == '\0') {
                fprintf(stderr, "wakeup: --csv: expected a path\n");
                return 2;
            }
            c->csv = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (c->samples == 0)
        c->samples = quick ? SAMPLES_QUICK : SAMPLES_DEFAULT;
    if (c->passes == 0)
        c->passes = quick ? PASSES_QUICK : PASSES_DEFAULT;
    if (c->passes > c->samples)
        c->passes = c->samples;
    return 0;
}

/* ---- The table ------------------------------------------------------------------------------ */

enum { COL_ROW, COL_N, COL_P50, COL_P90, COL_P99, COL_MIN, COL_PASS, COL_DFUTEX, COL_DEPOLL,
       COL_STATUS, NCOLS };

static const struct bench_column columns[NCOLS] = {
    [COL_ROW] = {.title = "wake-up"},
    [COL_N] = {.title = "samples", .right = true, .gap = 2},
    [COL_P50] = {.title = "p50 us", .right = true},
    [COL_P90] = {.title = "p90 us", .right = true},
    [COL_P99] = {.title = "p99 us", .right = true},
    [COL_MIN] = {.title = "min us", .right = true},
    [COL_PASS] = {.title = "pass p50 min..max", .right = true},
    [COL_DFUTEX] = {.title = "- futex", .right = true, .gap = 2},
    [COL_DEPOLL] = {.title = "- epoll", .right = true},
    [COL_STATUS] = {.title = "target (both <= 5 us)", .gap = 2},
};

static const char *const csv_titles[NCOLS] = {
    [COL_ROW] = "row",         [COL_N] = "valid_samples",
    [COL_P50] = "p50_us",      [COL_P90] = "p90_us",
    [COL_P99] = "p99_us",      [COL_MIN] = "min_us",
    [COL_PASS] = "pass_p50_min_max_us", [COL_DFUTEX] = "paired_p50_minus_futex_us",
    [COL_DEPOLL] = "paired_p50_minus_epoll_us", [COL_STATUS] = "status",
};

struct figures {
    bool ok;
    double p50, p90, p99, min, pmin, pmax;
};

static struct figures figures_of(struct row_result *r)
{
    struct figures f = {.ok = !r->failed && r->n > 0};
    if (!f.ok)
        return f;
    f.p50 = bench_quantile(r->lat_us, r->n, 0.5);
    f.p90 = bench_quantile(r->lat_us, r->n, 0.9);
    f.p99 = bench_quantile(r->lat_us, r->n, 0.99);
    f.min = r->lat_us[0]; /* sorted by bench_quantile */
    double p[MAX_PASSES];
    memcpy(p, r->pass_p50, sizeof(double) * r->passes);
    f.pmin = bench_quantile(p, r->passes, 0);
    f.pmax = p[r->passes - 1];
    return f;
}

typedef char cell_t[64];

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
    *out = bench_median(d, n);
    return true;
}

/* ---- Main ------------------------------------------------------------------------------------- */

static void print_cpuidle(void)
{
    char drv[64] = "?", poll[32] = "?";
    FILE *f = fopen("/sys/devices/system/cpu/cpuidle/current_driver", "r");
    if (f) {
        if (fscanf(f, "%63s", drv) != 1)
            snprintf(drv, sizeof(drv), "?");
        fclose(f);
    }
    f = fopen("/sys/module/haltpoll/parameters/guest_halt_poll_ns", "r");
    if (f) {
        if (fscanf(f, "%31s", poll) != 1)
            snprintf(poll, sizeof(poll), "?");
        fclose(f);
    }
    printf("cpuidle driver: %s; guest_halt_poll_ns: %s (how long an idle vCPU polls before it "
           "halts)\n",
           drv, poll);
}

int main(int argc, char **argv)
{
    static struct ctx c;
    int rc = parse_options(argc, argv, &c);
    if (rc)
        return rc == 1 ? 0 : rc;

    struct bench_machine mc;
    bench_init(&c.b, "wakeup");
    bench_machine_get(&mc);
    c.rng = 0x9e3779b97f4a7c15ull;
    c.cpu[0] = c.cpu[1] = -1;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
        for (int i = 0, k = 0; i < CPU_SETSIZE && k < 2; i++)
            if (CPU_ISSET(i, &allowed))
                c.cpu[k++] = i;
    if (c.cpu[1] < 0) {
        fprintf(stderr, "wakeup: needs 2 usable CPUs\n");
        return 2;
    }
    c.tsc_per_us = bench_tsc_per_ns() * 1000.0;
    if (c.tsc_per_us <= 0) {
        fprintf(stderr, "wakeup: needs a TSC (x86-64)\n");
        return 2;
    }

    printf("mely wake-up latency: a post to a parked worker on another core, and the floor\n");
    bench_machine_print(stdout, &mc);
    print_cpuidle();
    printf("setup: 2 workers pinned to CPUs %d and %d, spin_us 0, stealing off; poster on CPU "
           "%d, wakee on CPU %d; %u samples per row in %u interleaved passes, %u us (+-25%%) "
           "between samples; TSC %.3f GHz\n",
           c.cpu[0], c.cpu[1], c.cpu[0], c.cpu[1], c.samples, c.passes, c.pause_us,
           c.tsc_per_us / 1000.0);
    bench_print_mely_env(stdout);
    fflush(stdout);

    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = 2;
    cfg.pin = 1;
    cfg.spin_us = 0;
    cfg.steal = "off";
    struct bench_bg bg;
    struct bench_watchdog wd;
    bool have_wd = false;
    c.mely_ok = bench_rt_open_cfg(&c.b, &c.ms.m, &cfg, 2) == 0;
    if (c.mely_ok && bench_colors_of(&c.b, &c.ms.m, 1, &c.ms.color1, 1) != 1) {
        bench_rt_close(&c.b, &c.ms.m, "wake-up");
        c.mely_ok = false;
    }
    if (c.mely_ok) {
        /* The watchdog bounds the whole run: every sample at most 2 s. */
        uint64_t limit = bench_limit_ns((uint64_t)c.samples * NROWS,
                                        (uint64_t)c.pause_us * 2000u);
        have_wd = bench_watchdog_start(&wd, &c.b, &c.ms.m, limit, "wake-up") == 0;
        c.mely_ok = bench_bg_start(&c.b, &bg, &c.ms.m, "wake-up") == 0;
    }
    bench_pin_self(c.cpu[0]); /* after bench_bg_start: worker 0 pins its own thread */

    static struct row_result res[NROWS];
    for (unsigned r = 0; r < NROWS; r++) {
        res[r].lat_us = calloc(c.samples, sizeof(double));
        if (!res[r].lat_us) {
            fprintf(stderr, "wakeup: out of memory\n");
            return 1;
        }
    }
    struct bench_probe p0 = bench_probe_now();
    for (unsigned p = 0; p < c.passes; p++) {
        unsigned n = c.samples / c.passes + (p < c.samples % c.passes ? 1 : 0);
        printf("  pass %u/%u:", p + 1, c.passes);
        for (unsigned k = 0; k < NROWS; k++) {
            enum row_id r = (enum row_id)((p + k) % NROWS);
            if (res[r].failed)
                continue;
            run_batch(&c, r, n, &res[r]);
            if (res[r].failed)
                printf(" [%s: %s]", rows_def[r].key, res[r].why);
            else
                printf(" %s %.1f", rows_def[r].key, res[r].pass_p50[res[r].passes - 1]);
            fflush(stdout);
        }
        printf(" (p50 us)\n");
    }
    struct bench_probe p1 = bench_probe_now();
    char load[64];
    bench_load_note(&c.b, &p0, &p1, load, sizeof(load));

    if (c.mely_ok) {
        bench_bg_stop(&c.b, &bg, "wake-up");
        if (have_wd)
            bench_watchdog_end(&wd);
        bench_rt_close(&c.b, &c.ms.m, "wake-up");
    } else if (have_wd) {
        bench_watchdog_end(&wd);
    }

    struct figures f[NROWS];
    for (unsigned r = 0; r < NROWS; r++)
        f[r] = figures_of(&res[r]);

    cell_t text[NROWS][NCOLS];
    const char *cells[NROWS][NCOLS];
    const char *csv_cells[NROWS][NCOLS];
    bool all_figures = true;
    for (unsigned r = 0; r < NROWS; r++) {
        for (unsigned k = 0; k < NCOLS; k++) {
            snprintf(text[r][k], sizeof(cell_t), "-");
            cells[r][k] = csv_cells[r][k] = text[r][k];
        }
        cells[r][COL_ROW] = rows_def[r].name;
        csv_cells[r][COL_ROW] = rows_def[r].key;
        if (!f[r].ok) {
            snprintf(text[r][COL_STATUS], sizeof(cell_t), "n/a (%s)", res[r].why);
            all_figures = false;
            continue;
        }
        snprintf(text[r][COL_N], sizeof(cell_t), "%u", res[r].n);
        snprintf(text[r][COL_P50], sizeof(cell_t), "%.1f", f[r].p50);
        snprintf(text[r][COL_P90], sizeof(cell_t), "%.1f", f[r].p90);
        snprintf(text[r][COL_P99], sizeof(cell_t), "%.1f", f[r].p99);
        snprintf(text[r][COL_MIN], sizeof(cell_t), "%.1f", f[r].min);
        snprintf(text[r][COL_PASS], sizeof(cell_t), "%.1f..%.1f", f[r].pmin, f[r].pmax);
        double dfutex = 0, depoll = 0;
        bool hf = paired_diff(&res[r], &res[ROW_FUTEX], &dfutex);
        bool he = paired_diff(&res[r], &res[ROW_EPOLL], &depoll);
        if (hf)
            snprintf(text[r][COL_DFUTEX], sizeof(cell_t), "%+.1f", dfutex);
        if (he)
            snprintf(text[r][COL_DEPOLL], sizeof(cell_t), "%+.1f", depoll);
        if (r == ROW_MELY_FOREIGN || r == ROW_MELY_HANDLER) {
            bool have = hf && he;
            bool pass = have && dfutex <= TARGET_US && depoll <= TARGET_US;
            snprintf(text[r][COL_STATUS], sizeof(cell_t), "%s",
                     !have ? "n/a (no floor)" : pass ? "PASS" : "FAIL");
        }
    }
    printf("\n");
    bench_print_table(stdout, columns, NCOLS, &cells[0][0], NROWS);
    for (unsigned r = 0; r < NROWS; r++)
        if (res[r].negative)
            printf("note: %s: %u sample(s) with the wakee's TSC before the waker's dropped "
                   "(TSCs out of step between the CPUs?)\n",
                   rows_def[r].name, res[r].negative);
    if (c.ms.posts)
        printf("worker 1 over the mely samples: %" PRIu64 " posts, %" PRIu64 " parks, %" PRIu64
               " wake-ups%s\n",
               c.ms.posts, c.ms.parks, c.ms.wakeups,
               c.ms.wakeups * 100 < c.ms.posts * 95
                   ? ": fewer wake-ups than posts, worker 1 was not always parked"
                   : " (parked for every post)");
    printf("- futex, - epoll: the median over the passes of (the row's p50 - the floor's p50 in "
           "the same pass), in us\n"
           "target: mely's p50 at most %.0f us above the futex floor's and the epoll floor's "
           "(paired by pass)%s\n",
           TARGET_US, load);
    bench_load_warn(&c.b);

    struct bench_param params[] = {{.name = "samples"}, {.name = "passes"}, {.name = "pause_us"}};
    snprintf(params[0].value, sizeof(params[0].value), "%u", c.samples);
    snprintf(params[1].value, sizeof(params[1].value), "%u", c.passes);
    snprintf(params[2].value, sizeof(params[2].value), "%u", c.pause_us);
    if (bench_write_cells_csv(&c.b, c.csv, &mc, params, 3, csv_titles, NCOLS, &csv_cells[0][0],
                              NROWS) == 0)
        printf("CSV: %s\n", c.csv);
    for (unsigned r = 0; r < NROWS; r++)
        free(res[r].lat_us);
    if (!all_figures)
        printf("some rows have no figures (n/a): exit status 1\n");
    return all_figures ? 0 : 1;
}
