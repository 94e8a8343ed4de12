/*
 * dispatch.c: what one event costs in mely, next to Boost.Asio strands.
 *
 * Four workloads, on a runtime of W workers (2 by default), pinned:
 *
 *  (i)   local post+run: one color owned by worker 0. A driver handler posts
 *        1000 events of an empty handler to its own color (tail) and re-posts
 *        itself at the tail, until N events ran (empties + driver runs). Timed
 *        from the driver's first run to its last: the N-1 events in between
 *        -> ns/event.
 *  (ii)  cross-core throughput: a producer on a color of worker 0 posts empty
 *        events round-robin to 64 colors of worker 1, 1000 per producer run,
 *        re-posting itself at the tail. Flow control: the consumers count what
 *        they ran in a counter that only worker 1 writes (its own cache line,
 *        relaxed); the producer posts nothing (only re-posts itself) while more
 *        than 100,000 events are in flight. The N-th consumed event stops the
 *        clock and the runtime -> N / elapsed events/s.
 *  (iii) ping-pong: color A on worker 0, color B on worker 1, A posts to B and
 *        B to A, N/10 round trips -> ns per round trip.
 *  (iv)  idle CPU: nothing posted, process CPU time (getrusage) over 5 s while
 *        mely_run() runs in a thread -> % of one core per worker.
 *
 * (i)-(iii) run R times each (5), on a fresh runtime each time; the median is
 * reported. The same workloads run on Boost.Asio in the peer program
 * dispatch-asio (dispatch_asio.cpp), found next to this executable and run as a
 * child process with the same options; the table quotes mely's advantage over
 * it (> 1: mely is better) next to the targets. Rows also go to a CSV file.
 *
 * Every run is bounded: a watchdog stops a runtime that takes far longer than it
 * should (and gives up on the process if mely_run() then does not return).
 *
 * Public API only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __x86_64__
#include <x86intrin.h>
#endif

#include "mely/mely.h"

/* ---- Parameters (kept equal to dispatch_asio.cpp) -------------------------------- */

enum {
    CHUNK = 1000,             /* events per driver/producer run */
    CONSUMERS = 64,           /* consumer colors in (ii) */
    MAX_IN_FLIGHT = 100000,   /* (ii) flow control */
    PINGPONG_DIVISOR = 10,    /* round trips = N / 10 */
    CACHELINE = 64,
};

#define EVENTS_DEFAULT 10000000ull
#define EVENTS_QUICK 500000ull
#define RUNS_DEFAULT 5u
#define RUNS_QUICK 3u
#define IDLE_SECONDS_DEFAULT 5.0
#define IDLE_SECONDS_QUICK 1.0
#define IDLE_SETTLE_NS 200000000ull /* let workers start and park before measuring */
#define STOP_GRACE_NS 10000000000ull /* mely_run() must return this soon after a stop */
#define CSV_DEFAULT "bench/results/dispatch.csv"

/* Targets. */
#define TARGET_LOCAL_NS 30.0
#define TARGET_CROSS_MEPS 10.0
#define TARGET_RATIO 3.0
#define TARGET_IDLE_PCT 2.0

struct options {
    unsigned workers;
    uint64_t events;
    unsigned runs;
    bool quick;
    double idle_seconds;
    const char *csv;
    bool asio;
};

/* ---- Clocks ---------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* TSC cycles where there is one (constant and invariant on our KVM guests). */
static uint64_t cycles(void)
{
#ifdef __x86_64__
    return __rdtsc();
#else
    return 0;
#endif
}

static struct timespec ts_after(uint64_t ns_from_now)
{
    uint64_t t = now_ns() + ns_from_now;
    return (struct timespec){.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
}

/* Sleeps until the monotonic deadline (restarting after signals: bounded by it). */
static void sleep_until(struct timespec deadline)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
        ;
}

/* ---- Results --------------------------------------------------------------------- */

/* One run of a workload. */
struct sample {
    bool ok;
    double value;  /* in the workload's unit */
    double cycles; /* TSC cycles per event (per round trip for ping-pong) */
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the successful samples; false if there is none. */
static bool median_of(const struct sample *s, unsigned n, double *value, double *cyc)
{
    double v[n ? n : 1], c[n ? n : 1];
    unsigned k = 0;

    for (unsigned i = 0; i < n; i++)
        if (s[i].ok) {
            v[k] = s[i].value;
            c[k] = s[i].cycles;
            k++;
        }
    if (k == 0)
        return false;
    qsort(v, k, sizeof(v[0]), cmp_double);
    qsort(c, k, sizeof(c[0]), cmp_double);
    *value = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    *cyc = k % 2 ? c[k / 2] : (c[k / 2 - 1] + c[k / 2]) / 2;
    return true;
}

/* ---- Running a runtime, bounded -------------------------------------------------- */

/* Stops the runtime if a run takes longer than its limit; if mely_run() has not
 * returned STOP_GRACE_NS after that, the process exits (a hang is a result too). */
struct watchdog {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;  /* under mu */
    bool fired; /* under mu */
    uint64_t limit_ns;
    mely_t *m;
    const char *what;
};

static bool wait_done(struct watchdog *wd, uint64_t ns)
{
    struct timespec deadline = ts_after(ns);
    while (!wd->done)
        if (pthread_cond_timedwait(&wd->cv, &wd->mu, &deadline) == ETIMEDOUT)
            break;
    return wd->done;
}

static void *watchdog_main(void *arg)
{
    struct watchdog *wd = arg;

    pthread_mutex_lock(&wd->mu);
    if (!wait_done(wd, wd->limit_ns)) {
        wd->fired = true;
        fprintf(stderr, "dispatch: %s: no end after %.0f s: calling mely_stop()\n", wd->what,
                (double)wd->limit_ns / 1e9);
        mely_stop(wd->m);
        if (!wait_done(wd, STOP_GRACE_NS)) {
            fprintf(stderr, "dispatch: %s: mely_run() did not return %.0f s after mely_stop(): "
                            "the runtime hangs; giving up\n",
                    wd->what, (double)STOP_GRACE_NS / 1e9);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

static int watchdog_start(struct watchdog *wd, mely_t *m, uint64_t limit_ns, const char *what)
{
    pthread_condattr_t ca;

    memset(wd, 0, sizeof(*wd));
    wd->m = m;
    wd->limit_ns = limit_ns;
    wd->what = what;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wd->cv, &ca);
    pthread_condattr_destroy(&ca);
    int err = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    if (err) {
        pthread_cond_destroy(&wd->cv);
        pthread_mutex_destroy(&wd->mu);
    }
    return -err;
}

/* Returns true if the watchdog had to stop the runtime. */
static bool watchdog_end(struct watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    wd->done = true;
    bool fired = wd->fired;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    return fired;
}

/* A run's time limit: generous; only there so that a stuck run cannot hang. */
static uint64_t limit_for(uint64_t count, uint64_t ns_per_item)
{
    return 30000000000ull + count * ns_per_item;
}

static int rt_open(mely_t *m, unsigned workers)
{
    mely_config_t cfg;

    mely_config_init(&cfg);
    cfg.workers = workers;
    cfg.pin = 1;
    int err = mely_init(m, &cfg);
    if (err)
        fprintf(stderr, "dispatch: mely_init: %s\n", mely_strerror(err));
    else if (mely_workers(m) < 2) {
        fprintf(stderr, "dispatch: the runtime has %u worker(s) (MELY_WORKERS?); need >= 2\n",
                mely_workers(m));
        mely_shutdown(m);
        err = MELY_EINVAL;
    }
    return err;
}

/* mely_run() under a watchdog. Returns 0, a mely error, or 1 if the watchdog fired. */
static int rt_run(mely_t *m, uint64_t limit_ns, const char *what)
{
    struct watchdog wd;
    int err = watchdog_start(&wd, m, limit_ns, what);

    if (err) {
        fprintf(stderr, "dispatch: cannot start a watchdog thread: %s\n", strerror(-err));
        return err;
    }
    err = mely_run(m);
    bool fired = watchdog_end(&wd);
    if (err) {
        fprintf(stderr, "dispatch: %s: mely_run: %s\n", what, mely_strerror(err));
        return err;
    }
    return fired ? 1 : 0;
}

/* Per-runtime counters summed over the workers, for the per-run lines. */
struct totals {
    uint64_t run[2]; /* events run by workers 0 and 1 */
    uint64_t parks, wakeups, contended;
};

static struct totals rt_totals(const mely_t *m)
{
    struct totals t = {{0, 0}, 0, 0, 0};
    mely_stats_t s;

    for (unsigned w = 0; w < mely_workers(m); w++) {
        if (mely_worker_stats(m, w, &s) != 0)
            continue;
        if (w < 2)
            t.run[w] = s.events_run;
        t.parks += s.parks;
        t.wakeups += s.wakeups;
        t.contended += s.lock_contended;
    }
    return t;
}

static void rt_close(mely_t *m, const char *what)
{
    int left = mely_shutdown(m);
    if (left > 0)
        fprintf(stderr, "dispatch: %s: %d event(s) were still queued at shutdown\n", what, left);
    else if (left < 0)
        fprintf(stderr, "dispatch: %s: mely_shutdown: %s\n", what, mely_strerror(left));
}

/* The n first ordinary colors >= 1 that `worker` owns (color 0, the default
 * color, is left alone). Returns how many were found. */
static unsigned colors_of(const mely_t *m, int worker, mely_color_t *out, unsigned n)
{
    unsigned k = 0;
    for (mely_color_t c = 1; c < MELY_COLORS && k < n; c++)
        if (mely_color_owner(m, c) == worker)
            out[k++] = c;
    if (k < n)
        fprintf(stderr, "dispatch: found %u of the %u colors owned by worker %d\n", k, n, worker);
    return k;
}

/* A failed post inside a handler: remember the first error, stop the runtime. */
static void post_failed(mely_t *m, _Atomic int *slot, int err)
{
    int none = 0;
    atomic_compare_exchange_strong(slot, &none, err);
    mely_stop(m);
}

static void empty(void *arg)
{
    (void)arg;
}

/* ---- (i) local post+run ------------------------------------------------------------ */

struct local {
    mely_t *m;
    mely_color_t color;
    uint64_t total;    /* N: empties + driver runs */
    uint64_t ran;      /* events run, as the driver sees it */
    uint64_t runs;     /* driver runs */
    uint64_t t0, t1, c0, c1;
    _Atomic int err;
};

static void local_driver(void *arg)
{
    struct local *l = arg;
    uint64_t t = now_ns(), c = cycles();

    if (l->runs++ == 0) {
        l->t0 = t;
        l->c0 = c;
    }
    l->ran++; /* this run; the empties posted before it have run (same color: FIFO) */
    if (l->ran >= l->total) {
        l->t1 = t;
        l->c1 = c;
        mely_stop(l->m);
        return;
    }
    uint64_t k = l->total - l->ran - 1; /* leave room for the last driver run */
    if (k > CHUNK)
        k = CHUNK;
    for (uint64_t i = 0; i < k; i++) {
        int err = mely_post(l->m, l->color, empty, NULL);
        if (err) {
            post_failed(l->m, &l->err, err);
            return;
        }
    }
    l->ran += k; /* they will have run when the driver runs next */
    int err = mely_post(l->m, l->color, local_driver, l);
    if (err)
        post_failed(l->m, &l->err, err);
}

static struct sample run_local(unsigned workers, uint64_t n, struct totals *tot)
{
    struct sample out = {.ok = false};
    mely_t m = {0};
    struct local l = {.m = &m, .total = n};

    if (rt_open(&m, workers) != 0)
        return out;
    if (colors_of(&m, 0, &l.color, 1) == 1) {
        int err = mely_post(&m, l.color, local_driver, &l);
        if (err)
            fprintf(stderr, "dispatch: local: mely_post: %s\n", mely_strerror(err));
        else if (rt_run(&m, limit_for(n, 5000), "local post+run") == 0 && l.t1 != 0) {
            out.ok = true;
            out.value = (double)(l.t1 - l.t0) / (double)(n - 1);
            out.cycles = (double)(l.c1 - l.c0) / (double)(n - 1);
        }
        if (atomic_load(&l.err))
            fprintf(stderr, "dispatch: local: a post failed: %s\n", mely_strerror(l.err));
    }
    *tot = rt_totals(&m);
    rt_close(&m, "local post+run");
    return out;
}

/* ---- (ii) cross-core throughput ----------------------------------------------------- */

struct cross {
    mely_t *m;
    mely_color_t producer;
    mely_color_t consumers[CONSUMERS];
    uint64_t total;
    _Atomic int err;

    /* the producer's (worker 0) */
    alignas(CACHELINE) uint64_t posted;
    unsigned next;
    bool started;
    uint64_t t0, c0;

    /* the consumers' (worker 1): single writer, read by the producer */
    alignas(CACHELINE) _Atomic uint64_t consumed;
    uint64_t t1, c1;
    char pad[CACHELINE - 2 * sizeof(uint64_t) - sizeof(uint64_t)];
};

static void cross_consume(void *arg)
{
    struct cross *x = arg;
    uint64_t c = atomic_load_explicit(&x->consumed, memory_order_relaxed) + 1;

    atomic_store_explicit(&x->consumed, c, memory_order_relaxed);
    if (c == x->total) {
        x->t1 = now_ns();
        x->c1 = cycles();
        mely_stop(x->m);
    }
}

static void cross_produce(void *arg)
{
    struct cross *x = arg;

    if (!x->started) {
        x->started = true;
        x->t0 = now_ns();
        x->c0 = cycles();
    }
    uint64_t done = atomic_load_explicit(&x->consumed, memory_order_relaxed);
    if (x->posted - done <= MAX_IN_FLIGHT) {
        uint64_t k = x->total - x->posted;
        if (k > CHUNK)
            k = CHUNK;
        for (uint64_t i = 0; i < k; i++) {
            int err = mely_post(x->m, x->consumers[x->next], cross_consume, x);
            if (err) {
                post_failed(x->m, &x->err, err);
                return;
            }
            if (++x->next == CONSUMERS)
                x->next = 0;
        }
        x->posted += k;
    }
    if (x->posted < x->total) {
        int err = mely_post(x->m, x->producer, cross_produce, x);
        if (err)
            post_failed(x->m, &x->err, err);
    }
}

static struct sample run_cross(unsigned workers, uint64_t n, struct totals *tot)
{
    struct sample out = {.ok = false};
    mely_t m = {0};
    struct cross *x = aligned_alloc(CACHELINE, sizeof(struct cross));

    if (!x) {
        fprintf(stderr, "dispatch: out of memory\n");
        return out;
    }
    memset(x, 0, sizeof(*x));
    x->m = &m;
    x->total = n;
    atomic_init(&x->consumed, 0);
    atomic_init(&x->err, 0);
    if (rt_open(&m, workers) != 0) {
        free(x);
        return out;
    }
    if (colors_of(&m, 0, &x->producer, 1) == 1 &&
        colors_of(&m, 1, x->consumers, CONSUMERS) == CONSUMERS) {
        int err = mely_post(&m, x->producer, cross_produce, x);
        if (err)
            fprintf(stderr, "dispatch: cross-core: mely_post: %s\n", mely_strerror(err));
        else if (rt_run(&m, limit_for(n, 5000), "cross-core throughput") == 0 && x->t1 != 0) {
            out.ok = true;
            out.value = (double)n * 1e9 / (double)(x->t1 - x->t0);
            out.cycles = (double)(x->c1 - x->c0) / (double)n;
        }
        if (atomic_load(&x->err))
            fprintf(stderr, "dispatch: cross-core: a post failed: %s\n", mely_strerror(x->err));
    }
    *tot = rt_totals(&m);
    /* The counter has one writer only if every consumer ran on worker 1. */
    if (out.ok && tot->run[1] != n)
        fprintf(stderr, "dispatch: cross-core: worker 1 ran %" PRIu64 " events, not %" PRIu64
                        ": consumer colors moved (stealing?)\n",
                tot->run[1], n);
    rt_close(&m, "cross-core throughput");
    free(x);
    return out;
}

/* ---- (iii) ping-pong ------------------------------------------------------------------ */

struct pingpong {
    mely_t *m;
    mely_color_t a, b;
    uint64_t trips;
    uint64_t count; /* A's handler only */
    uint64_t t0, t1, c0, c1;
    _Atomic int err;
};

static void pp_a(void *arg);

static void pp_b(void *arg)
{
    struct pingpong *p = arg;
    int err = mely_post(p->m, p->a, pp_a, p);
    if (err)
        post_failed(p->m, &p->err, err);
}

static void pp_a(void *arg)
{
    struct pingpong *p = arg;

    if (p->count == 0) {
        p->t0 = now_ns();
        p->c0 = cycles();
    }
    if (p->count == p->trips) {
        p->t1 = now_ns();
        p->c1 = cycles();
        mely_stop(p->m);
        return;
    }
    p->count++;
    int err = mely_post(p->m, p->b, pp_b, p);
    if (err)
        post_failed(p->m, &p->err, err);
}

static struct sample run_pingpong(unsigned workers, uint64_t trips, struct totals *tot)
{
    struct sample out = {.ok = false};
    mely_t m = {0};
    struct pingpong p = {.m = &m, .trips = trips};

    if (rt_open(&m, workers) != 0)
        return out;
    if (colors_of(&m, 0, &p.a, 1) == 1 && colors_of(&m, 1, &p.b, 1) == 1) {
        int err = mely_post(&m, p.a, pp_a, &p);
        if (err)
            fprintf(stderr, "dispatch: ping-pong: mely_post: %s\n", mely_strerror(err));
        else if (rt_run(&m, limit_for(trips, 200000), "ping-pong") == 0 && p.t1 != 0) {
            out.ok = true;
            out.value = (double)(p.t1 - p.t0) / (double)trips;
            out.cycles = (double)(p.c1 - p.c0) / (double)trips;
        }
        if (atomic_load(&p.err))
            fprintf(stderr, "dispatch: ping-pong: a post failed: %s\n", mely_strerror(p.err));
    }
    *tot = rt_totals(&m);
    rt_close(&m, "ping-pong");
    return out;
}

/* ---- (iv) idle CPU ------------------------------------------------------------------- */

struct idle_run {
    mely_t *m;
    int rc;
};

static void *idle_thread(void *arg)
{
    struct idle_run *r = arg;
    r->rc = mely_run(r->m);
    return NULL;
}

static uint64_t rusage_cpu_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* % of one core per worker while idle, or a negative value on failure. */
static double measure_idle(unsigned workers, double seconds, struct totals *tot)
{
    mely_t m = {0};
    struct idle_run r = {.m = &m};
    pthread_t th;
    double pct = -1.0;

    if (rt_open(&m, workers) != 0)
        return pct;
    int err = pthread_create(&th, NULL, idle_thread, &r);
    if (err) {
        fprintf(stderr, "dispatch: idle: pthread_create: %s\n", strerror(err));
        rt_close(&m, "idle");
        return pct;
    }
    sleep_until(ts_after(IDLE_SETTLE_NS));
    uint64_t cpu0 = rusage_cpu_ns(), t0 = now_ns();
    sleep_until(ts_after((uint64_t)(seconds * 1e9)));
    uint64_t cpu1 = rusage_cpu_ns(), t1 = now_ns();

    mely_stop(&m);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np's clock */
    deadline.tv_sec += (time_t)(STOP_GRACE_NS / 1000000000u);
    err = pthread_timedjoin_np(th, NULL, &deadline);
    if (err) {
        fprintf(stderr, "dispatch: idle: mely_run() did not return %.0f s after mely_stop() "
                        "(%s): the runtime hangs; giving up\n",
                (double)STOP_GRACE_NS / 1e9, strerror(err));
        _exit(3);
    }
    if (r.rc != 0)
        fprintf(stderr, "dispatch: idle: mely_run: %s\n", mely_strerror(r.rc));
    else
        pct = (double)(cpu1 - cpu0) * 100.0 / (double)(t1 - t0) / (double)mely_workers(&m);
    *tot = rt_totals(&m);
    rt_close(&m, "idle");
    return pct;
}

/* ---- The machine ------------------------------------------------------------------------ */

struct machine {
    char cpu[128];
    unsigned usable; /* CPUs in our affinity mask */
    long online;
    char kernel[200];
};

static void machine_get(struct machine *mc)
{
    snprintf(mc->cpu, sizeof(mc->cpu), "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) != 0 || !colon)
                continue;
            char *v = colon + 1;
            v += strspn(v, " \t");
            v[strcspn(v, "\n")] = '\0';
            snprintf(mc->cpu, sizeof(mc->cpu), "%s", v);
            break;
        }
        fclose(f);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    mc->usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 0;
    mc->online = sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(mc->kernel, sizeof(mc->kernel), "%s %s %s", u.sysname, u.release, u.machine);
    else
        snprintf(mc->kernel, sizeof(mc->kernel), "unknown");
}

/* ---- The Boost.Asio peer ---------------------------------------------------------------- */

struct asio_results {
    bool have_local, have_cross, have_pp;
    double local_ns, cross_eps, pp_ns;
};

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* dispatch-asio next to this program: in the directory of argv[0] (of
 * /proc/self/exe if argv[0] has no slash), or in its parent when that directory
 * is libtool's .libs (`make bench` runs the real binary from bench/.libs). */
static bool find_peer(const char *argv0, char *path, size_t size)
{
    char self[4096];
    const char *slash = strrchr(argv0, '/');

    if (slash) {
        snprintf(self, sizeof(self), "%s", argv0);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return false;
        self[n] = '\0';
    }
    char *cut = strrchr(self, '/');
    if (!cut)
        return false;
    *cut = '\0';
    snprintf(path, size, "%s/dispatch-asio", self[0] ? self : "/");
    if (executable(path))
        return true;
    const char *base = strrchr(self, '/');
    base = base ? base + 1 : self;
    if (strcmp(base, ".libs") == 0) {
        snprintf(path, size, "%s/../dispatch-asio", self);
        if (executable(path))
            return true;
    }
    return false;
}

static void parse_peer_line(const char *line, struct asio_results *r)
{
    char workload[64];
    double v;

    if (sscanf(line, "asio,%63[^,],%lf", workload, &v) != 2)
        return;
    if (strcmp(workload, "local_ns_per_event") == 0) {
        r->local_ns = v;
        r->have_local = true;
    } else if (strcmp(workload, "crosscore_events_per_s") == 0) {
        r->cross_eps = v;
        r->have_cross = true;
    } else if (strcmp(workload, "pingpong_ns_per_rt") == 0) {
        r->pp_ns = v;
        r->have_pp = true;
    }
}

/* Runs the peer with our options and parses its stdout. False: no figures. */
static bool run_peer(const char *path, const struct options *o, struct asio_results *r)
{
    char workers[24], events[24], runs[24];
    int fd[2];

    snprintf(workers, sizeof(workers), "%u", o->workers);
    snprintf(events, sizeof(events), "%" PRIu64, o->events);
    snprintf(runs, sizeof(runs), "%u", o->runs);
    char *argv[] = {(char *)path, "--workers", workers, "--events", events, "--runs", runs,
                    o->quick ? "--quick" : NULL, NULL};

    memset(r, 0, sizeof(*r));
    if (pipe(fd) != 0) {
        perror("dispatch: pipe");
        return false;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("dispatch: fork");
        close(fd[0]);
        close(fd[1]);
        return false;
    }
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(fd[1]);
        execv(path, argv);
        fprintf(stderr, "dispatch: cannot run %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(fd[1]);

    /* Read everything (the peer bounds its own run time); keep the first 64 KB. */
    char buf[65536];
    size_t len = 0;
    for (;;) {
        char tmp[4096];
        ssize_t n = read(fd[0], tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t take = (size_t)n < sizeof(buf) - 1 - len ? (size_t)n : sizeof(buf) - 1 - len;
        memcpy(buf + len, tmp, take);
        len += take;
    }
    buf[len] = '\0';
    close(fd[0]);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        parse_peer_line(line, r);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "dispatch: %s ended with %s %d\n", path,
                WIFEXITED(status) ? "status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return r->have_local || r->have_cross || r->have_pp;
}

/* ---- The table and the CSV file --------------------------------------------------------- */

struct row {
    const char *workload;
    const char *key; /* CSV name */
    const char *unit;
    bool have_mely, have_asio;
    double mely, asio; /* in the unit shown */
    double advantage;  /* > 1: mely is better; valid if both */
    const char *target;
    const char *status; /* PASS, MISS, n/a */
    char why[160];      /* what missed */
};

/* Sets advantage and status. abs_ok: the absolute target (true if none). */
static void judge(struct row *r, bool lower_is_better, bool has_abs, bool abs_ok, bool has_ratio)
{
    bool ratio_known = has_ratio && r->have_mely && r->have_asio && r->mely > 0 && r->asio > 0;

    if (ratio_known)
        r->advantage = lower_is_better ? r->asio / r->mely : r->mely / r->asio;
    r->why[0] = '\0';
    if (!r->have_mely) {
        r->status = "MISS";
        snprintf(r->why, sizeof(r->why), "no mely figure (see the messages above)");
        return;
    }
    if (!has_abs && !ratio_known) {
        r->status = "n/a";
        return;
    }
    bool ok = true;
    if (has_abs && !abs_ok) {
        ok = false;
        snprintf(r->why, sizeof(r->why), "absolute target missed");
    }
    if (ratio_known && r->advantage < TARGET_RATIO) {
        size_t l = strlen(r->why);
        snprintf(r->why + l, sizeof(r->why) - l, "%sadvantage %.2fx < %.0fx", l ? "; " : "",
                 r->advantage, TARGET_RATIO);
        ok = false;
    }
    r->status = ok ? "PASS" : "MISS";
}

static void fmt_value(char *buf, size_t size, bool have, double v)
{
    if (!have)
        snprintf(buf, size, "-");
    else if (v >= 100)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%.2f", v);
}

static void print_table(const struct row *rows, unsigned n)
{
    printf("\n%-22s %-14s %10s %12s %15s  %-22s %s\n", "workload", "unit", "mely", "asio strand",
           "mely advantage", "target", "status");
    for (unsigned i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        char m[32], a[32], adv[32];
        fmt_value(m, sizeof(m), r->have_mely, r->mely);
        fmt_value(a, sizeof(a), r->have_asio, r->asio);
        if (r->have_mely && r->have_asio)
            snprintf(adv, sizeof(adv), "%.2fx", r->advantage);
        else
            snprintf(adv, sizeof(adv), "-");
        printf("%-22s %-14s %10s %12s %15s  %-22s %s\n", r->workload, r->unit, m, a, adv,
               r->target, r->status);
    }
    for (unsigned i = 0; i < n; i++)
        if (rows[i].why[0])
            printf("  %s: %s\n", rows[i].workload, rows[i].why);
}

static void csv_field(FILE *f, const char *s, bool last)
{
    bool quote = strpbrk(s, ",\"\n") != NULL;
    if (quote) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* mkdir -p for the directories of `path`. */
static int make_parents(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *end = strrchr(dir, '/');
    if (!end)
        return 0;
    *end = '\0';
    for (char *p = dir + 1; p <= end; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return -errno;
        *p = c;
    }
    return 0;
}

static int write_csv(const char *path, const struct machine *mc, const struct options *o,
                     const struct row *rows, unsigned n)
{
    int err = make_parents(path);
    if (err) {
        fprintf(stderr, "dispatch: cannot create the directory of %s: %s\n", path, strerror(-err));
        return err;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "dispatch: cannot write %s: %s\n", path, strerror(errno));
        return -errno;
    }
    char when[32], buf[64];
    time_t t = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));

    fputs("date,cpu_model,usable_cpus,kernel,workers,events,runs,workload,unit,mely,asio,"
          "mely_advantage,target,status\n",
          f);
    for (unsigned i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        csv_field(f, when, false);
        csv_field(f, mc->cpu, false);
        snprintf(buf, sizeof(buf), "%u", mc->usable);
        csv_field(f, buf, false);
        csv_field(f, mc->kernel, false);
        snprintf(buf, sizeof(buf), "%u", o->workers);
        csv_field(f, buf, false);
        snprintf(buf, sizeof(buf), "%" PRIu64, o->events);
        csv_field(f, buf, false);
        snprintf(buf, sizeof(buf), "%u", o->runs);
        csv_field(f, buf, false);
        csv_field(f, r->key, false);
        csv_field(f, r->unit, false);
        snprintf(buf, sizeof(buf), "%.4f", r->mely);
        csv_field(f, r->have_mely ? buf : "", false);
        snprintf(buf, sizeof(buf), "%.4f", r->asio);
        csv_field(f, r->have_asio ? buf : "", false);
        snprintf(buf, sizeof(buf), "%.3f", r->advantage);
        csv_field(f, r->have_mely && r->have_asio ? buf : "", false);
        csv_field(f, r->target, false);
        csv_field(f, r->status, true);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "dispatch: writing %s: %s\n", path, strerror(errno));
        return -EIO;
    }
    return 0;
}

/* ---- Options ------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dispatch [options]\n"
            "  --workers N        workers (and Asio threads), >= 2 (default 2)\n"
            "  --events N         events for local and cross-core; ping-pong does N/10\n"
            "                     round trips (default %llu; --quick: %llu)\n"
            "  --runs R           runs per workload, the median is reported (default %u; --quick: %u)\n"
            "  --idle-seconds S   idle CPU measurement time (default %.0f; --quick: %.0f)\n"
            "  --quick            small counts: the whole run takes a few seconds\n"
            "  --csv PATH         CSV output (default %s, relative to the current directory)\n"
            "  --no-asio          do not run the Boost.Asio peer (dispatch-asio)\n",
            EVENTS_DEFAULT, EVENTS_QUICK, RUNS_DEFAULT, RUNS_QUICK, IDLE_SECONDS_DEFAULT,
            IDLE_SECONDS_QUICK, CSV_DEFAULT);
}

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* 0: go on; 1: exit 0 (--help); 2: usage error. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"workers", required_argument, NULL, 'w'},
        {"events", required_argument, NULL, 'e'},
        {"runs", required_argument, NULL, 'r'},
        {"idle-seconds", required_argument, NULL, 'i'},
        {"quick", no_argument, NULL, 'q'},
        {"csv", required_argument, NULL, 'c'},
        {"no-asio", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    char *end;
    int c;

    *o = (struct options){.workers = 2, .csv = CSV_DEFAULT, .asio = true, .idle_seconds = -1};
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            if (!parse_u64(optarg, 2, MELY_MAX_WORKERS, &v)) {
                fprintf(stderr, "dispatch: --workers: expected 2..%u\n", MELY_MAX_WORKERS);
                return 2;
            }
            o->workers = (unsigned)v;
            break;
        case 'e':
            if (!parse_u64(optarg, 1000, 10000000000ull, &v)) {
                fprintf(stderr, "dispatch: --events: expected 1000..10000000000\n");
                return 2;
            }
            o->events = v;
            break;
        case 'r':
            if (!parse_u64(optarg, 1, 1000, &v)) {
                fprintf(stderr, "dispatch: --runs: expected 1..1000\n");
                return 2;
            }
            o->runs = (unsigned)v;
            break;
        case 'i':
            errno = 0;
            o->idle_seconds = strtod(optarg, &end);
            if (errno || end == optarg || *end != '\0' || !(o->idle_seconds >= 0.1) ||
                o->idle_seconds > 3600) {
                fprintf(stderr, "dispatch: --idle-seconds: expected 0.1..3600\n");
                return 2;
            }
            break;
        case 'q':
            o->quick = true;
            break;
        case 'c':
            if (optarg[0] == '\0') {
                fprintf(stderr, "dispatch: --csv: expected a path\n");
                return 2;
            }
            o->csv = optarg;
            break;
        case 'n':
            o->asio = false;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dispatch: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (o->events == 0)
        o->events = o->quick ? EVENTS_QUICK : EVENTS_DEFAULT;
    if (o->runs == 0)
        o->runs = o->quick ? RUNS_QUICK : RUNS_DEFAULT;
    if (o->idle_seconds < 0)
        o->idle_seconds = o->quick ? IDLE_SECONDS_QUICK : IDLE_SECONDS_DEFAULT;
    return 0;
}

/* ---- Main ------------------------------------------------------------------------------------ */

typedef struct sample (*workload_fn)(unsigned workers, uint64_t count, struct totals *tot);

/* Runs one workload R times, printing each run; the median goes to *value. */
static bool measure(const char *name, const char *unit, workload_fn fn, const struct options *o,
                    uint64_t count, double scale, double *value)
{
    struct sample s[o->runs];
    double cyc;

    for (unsigned r = 0; r < o->runs; r++) {
        struct totals t;
        s[r] = fn(o->workers, count, &t);
        if (s[r].ok)
            printf("  %-22s run %u: %10.2f %-13s %8.1f cycles   [w0 ran %" PRIu64
                   ", w1 ran %" PRIu64 ", parks %" PRIu64 ", wakeups %" PRIu64
                   ", contended locks %" PRIu64 "]\n",
                   name, r + 1, s[r].value * scale, unit, s[r].cycles, t.run[0], t.run[1],
                   t.parks, t.wakeups, t.contended);
        else
            printf("  %-22s run %u: failed\n", name, r + 1);
        fflush(stdout);
    }
    if (!median_of(s, o->runs, value, &cyc))
        return false;
    *value *= scale;
    printf("  %-22s median: %.2f %s (%.1f cycles)\n", name, *value, unit, cyc);
    return true;
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;

    struct machine mc;
    machine_get(&mc);
    uint64_t trips = o.events / PINGPONG_DIVISOR;
    printf("mely dispatch benchmark\n");
    printf("machine: %s; %u usable CPUs (of %ld online); %s\n", mc.cpu, mc.usable, mc.online,
           mc.kernel);
    printf("setup: %u workers, pinned; N = %" PRIu64 " events; %" PRIu64
           " ping-pong round trips; %u runs per workload (median)\n",
           o.workers, o.events, trips, o.runs);
    if (o.workers > mc.usable)
        printf("note: more workers than usable CPUs: workers share CPUs, figures mean little\n");
    static const char *const env[] = {"MELY_WORKERS", "MELY_PIN", "MELY_BATCH", "MELY_SPIN_US"};
    for (unsigned i = 0; i < sizeof(env) / sizeof(env[0]); i++)
        if (getenv(env[i]))
            printf("environment: %s=%s (overrides the benchmark's configuration)\n", env[i],
                   getenv(env[i]));
    fflush(stdout);

    struct row rows[4] = {
        {.workload = "local post+run", .key = "local_ns_per_event", .unit = "ns/event",
         .target = "<=30 ns, >=3x asio"},
        {.workload = "cross-core throughput", .key = "crosscore_mevents_per_s",
         .unit = "Mevents/s", .target = ">=10 M/s, >=3x asio"},
        {.workload = "ping-pong", .key = "pingpong_ns_per_rt", .unit = "ns/round trip",
         .target = ">=3x asio"},
        {.workload = "idle CPU", .key = "idle_pct_core_per_worker", .unit = "% core/worker",
         .target = "<2%"},
    };
    static char idle_name[48];
    snprintf(idle_name, sizeof(idle_name), "idle CPU (%g s)", o.idle_seconds);
    rows[3].workload = idle_name;

    printf("\nmely:\n");
    rows[0].have_mely = measure("local post+run", "ns/event", run_local, &o, o.events, 1.0,
                                &rows[0].mely);
    rows[1].have_mely = measure("cross-core throughput", "Mevents/s", run_cross, &o, o.events,
                                1e-6, &rows[1].mely);
    rows[2].have_mely = measure("ping-pong", "ns/round trip", run_pingpong, &o, trips, 1.0,
                                &rows[2].mely);

    if (o.asio) {
        char peer[4200];
        struct asio_results ar;
        if (!find_peer(argv[0], peer, sizeof(peer))) {
            printf("\nBoost.Asio peer not built (install libboost-dev and re-run make bench): "
                   "ratios skipped\n");
        } else {
            printf("\nBoost.Asio peer: %s\n", peer);
            fflush(stdout);
            if (!run_peer(peer, &o, &ar)) {
                printf("Boost.Asio peer gave no figures: ratios skipped\n");
            } else {
                rows[0].have_asio = ar.have_local;
                rows[0].asio = ar.local_ns;
                rows[1].have_asio = ar.have_cross;
                rows[1].asio = ar.cross_eps * 1e-6;
                rows[2].have_asio = ar.have_pp;
                rows[2].asio = ar.pp_ns;
                printf("  asio medians: local %.2f ns/event, cross-core %.2f Mevents/s, "
                       "ping-pong %.0f ns/round trip\n",
                       ar.local_ns, ar.cross_eps * 1e-6, ar.pp_ns);
            }
        }
    } else {
        printf("\nBoost.Asio peer skipped (--no-asio): ratios skipped\n");
    }

    printf("\nidle: %u workers, nothing posted, %g s\n", o.workers, o.idle_seconds);
    fflush(stdout);
    struct totals it = {{0, 0}, 0, 0, 0};
    double idle = measure_idle(o.workers, o.idle_seconds, &it);
    rows[3].have_mely = idle >= 0;
    rows[3].mely = idle;
    if (rows[3].have_mely)
        printf("  idle CPU: %.3f %% of a core per worker   [parks %" PRIu64 ", wakeups %" PRIu64
               "]\n",
               idle, it.parks, it.wakeups);

    judge(&rows[0], true, true, rows[0].mely <= TARGET_LOCAL_NS, true);
    judge(&rows[1], false, true, rows[1].mely >= TARGET_CROSS_MEPS, true);
    judge(&rows[2], true, false, true, true);
    judge(&rows[3], true, true, rows[3].mely < TARGET_IDLE_PCT, false);
    print_table(rows, 4);

    if (write_csv(o.csv, &mc, &o, rows, 4) == 0)
        printf("\nCSV: %s\n", o.csv);
    bool all = true;
    for (unsigned i = 0; i < 4; i++)
        all &= rows[i].have_mely;
    return all ? 0 : 1;
}
