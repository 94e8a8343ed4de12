/*
 * harness.c: what mely's benchmark programs share (see harness.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/harness.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __x86_64__
#include <x86intrin.h>
#endif

void bench_init(struct bench *b, const char *name)
{
    *b = (struct bench){.name = name};
}

/* ---- Clocks ---------------------------------------------------------------------- */

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cycles(void)
{
#ifdef __x86_64__
    return __rdtsc();
#else
    return 0;
#endif
}

uint64_t bench_tsc_step(void)
{
    enum { N = 1000 };
    double d[N];
    uint64_t prev = bench_cycles();
    for (int i = 0; i < N; i++) {
        uint64_t now = bench_cycles();
        d[i] = (double)(now - prev);
        prev = now;
    }
    return (uint64_t)bench_median(d, N);
}

struct timespec bench_ts_after(uint64_t ns)
{
    uint64_t t = bench_now_ns() + ns;
    return (struct timespec){.tv_sec = (time_t)(t / 1000000000u),
                             .tv_nsec = (long)(t % 1000000000u)};
}

void bench_spin_cycles(uint64_t start, uint64_t cycles)
{
    /* No pause instruction: it takes up to ~140 cycles on some cores, more than
     * the shortest handlers we imitate. Bounded: the TSC always advances. */
    for (uint64_t now = bench_cycles(); now != 0 && now - start < cycles; now = bench_cycles())
        ;
}

double bench_tsc_per_ns(void)
{
    static _Atomic double cached; /* 0: not calibrated yet */
    double v = atomic_load_explicit(&cached, memory_order_relaxed);

    if (v > 0 || bench_cycles() == 0)
        return v;
    uint64_t t0 = bench_now_ns(), c0 = bench_cycles();
    bench_sleep_until(bench_ts_after(50000000u));
    uint64_t t1 = bench_now_ns(), c1 = bench_cycles();
    v = t1 > t0 ? (double)(c1 - c0) / (double)(t1 - t0) : 0.0;
    atomic_store_explicit(&cached, v, memory_order_relaxed);
    return v;
}

void bench_sleep_until(struct timespec deadline)
{
    /* Restarting after a signal is bounded by the deadline. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
        ;
}

uint64_t bench_cpu_ns(int who)
{
    struct rusage ru;
    if (getrusage(who, &ru) != 0)
        return 0;
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* ---- Load ------------------------------------------------------------------------ */

struct bench_probe bench_probe_now(void)
{
    struct bench_probe p = {.ok = false};
    unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal;
    FILE *f = fopen("/proc/stat", "r");

    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
                   &iowait, &irq, &softirq, &steal) == 8) {
            p.busy_ticks = user + nice + sys + irq + softirq;
            p.steal_ticks = steal;
            p.ok = true;
        }
        fclose(f);
    }
    p.self_ns = bench_cpu_ns(RUSAGE_SELF) + bench_cpu_ns(RUSAGE_CHILDREN); /* peers */
    p.t_ns = bench_now_ns();
    return p;
}

bool bench_load(struct bench *b, const struct bench_probe *p0, const struct bench_probe *p1,
                double *others, double *steal)
{
    long hz = sysconf(_SC_CLK_TCK);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double wall = (double)(p1->t_ns - p0->t_ns) * (double)(ncpu > 0 ? ncpu : 1);

    if (!p0->ok || !p1->ok || hz <= 0 || p1->t_ns - p0->t_ns < BENCH_PROBE_MIN_NS)
        return false;
    double tick_ns = 1e9 / (double)hz;
    double busy = (double)(p1->busy_ticks - p0->busy_ticks) * tick_ns;
    double self = (double)(p1->self_ns - p0->self_ns);
    *others = busy > self ? (busy - self) * 100.0 / wall : 0.0;
    *steal = (double)(p1->steal_ticks - p0->steal_ticks) * tick_ns * 100.0 / wall;
    if (*others > b->worst_others)
        b->worst_others = *others;
    if (*steal > b->worst_steal)
        b->worst_steal = *steal;
    return true;
}

const char *bench_load_note(struct bench *b, const struct bench_probe *p0,
                            const struct bench_probe *p1, char *buf, size_t size)
{
    double others, steal;

    buf[0] = '\0';
    if (bench_load(b, p0, p1, &others, &steal))
        snprintf(buf, size, ", others %.0f%%, steal %.0f%%", others, steal);
    return buf;
}

void bench_load_warn(const struct bench *b)
{
    if (b->worst_others > BENCH_NOISY_OTHERS_PCT || b->worst_steal > BENCH_NOISY_STEAL_PCT)
        printf("note: other processes used up to %.0f%% of the CPUs (steal up to %.0f%%) during "
               "some runs: the figures are disturbed; re-run on a quiet machine\n",
               b->worst_others, b->worst_steal);
}

/* ---- Medians of samples ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double bench_quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof(v[0]), cmp_double);
    double x = q * (double)n;
    size_t rank = x <= 0 ? 0 : (size_t)x; /* ceil(x), without libm */
    if ((double)rank < x)
        rank++;
    size_t i = rank == 0 ? 0 : rank - 1;
    return v[i < n ? i : n - 1];
}

bool bench_sample_medians(const struct bench_sample *s, unsigned n, double *value,
                          double *cycles)
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
    *value = bench_median(v, k);
    *cycles = bench_median(c, k);
    return true;
}

/* ---- Watchdog -------------------------------------------------------------------- */

uint64_t bench_limit_ns(uint64_t count, uint64_t ns_per_item)
{
    return 30000000000ull + count * ns_per_item;
}

/* Waits up to ns for done; wd->mu held. */
static bool wait_done(struct bench_watchdog *wd, uint64_t ns)
{
    struct timespec deadline = bench_ts_after(ns);
    while (!wd->done)
        if (pthread_cond_timedwait(&wd->cv, &wd->mu, &deadline) == ETIMEDOUT)
            break;
    return wd->done;
}

static void *watchdog_main(void *arg)
{
    struct bench_watchdog *wd = arg;

    pthread_mutex_lock(&wd->mu);
    if (!wait_done(wd, wd->limit_ns)) {
        wd->fired = true;
        fprintf(stderr, "%s: %s: no end after %.3g s: calling mely_stop()\n", wd->name, wd->what,
                (double)wd->limit_ns / 1e9);
        mely_stop(wd->m);
        if (!wait_done(wd, BENCH_STOP_GRACE_NS)) {
            fprintf(stderr, "%s: %s: mely_run() did not return %.0f s after mely_stop(): "
                            "the runtime hangs; giving up\n",
                    wd->name, wd->what, (double)BENCH_STOP_GRACE_NS / 1e9);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

int bench_watchdog_start(struct bench_watchdog *wd, const struct bench *b, mely_t *m,
                         uint64_t limit_ns, const char *what)
{
    pthread_condattr_t ca;

    memset(wd, 0, sizeof(*wd));
    wd->m = m;
    wd->limit_ns = limit_ns;
    wd->name = b->name;
    wd->what = what;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* bench_ts_after()'s clock */
    pthread_cond_init(&wd->cv, &ca);
    pthread_condattr_destroy(&ca);
    int err = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    if (err) {
        pthread_cond_destroy(&wd->cv);
        pthread_mutex_destroy(&wd->mu);
    }
    return -err;
}

bool bench_watchdog_end(struct bench_watchdog *wd)
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

int bench_mely_run(const struct bench *b, mely_t *m, uint64_t limit_ns, const char *what)
{
    struct bench_watchdog wd;
    int err = bench_watchdog_start(&wd, b, m, limit_ns, what);

    if (err) {
        fprintf(stderr, "%s: cannot start a watchdog thread: %s\n", b->name, strerror(-err));
        return err;
    }
    err = mely_run(m);
    bool fired = bench_watchdog_end(&wd);
    if (err) {
        fprintf(stderr, "%s: %s: mely_run: %s\n", b->name, what, mely_strerror(err));
        return err;
    }
    return fired ? 1 : 0;
}

/* ---- A runtime for one run ------------------------------------------------------- */

int bench_rt_open(const struct bench *b, mely_t *m, unsigned workers, unsigned min_workers)
{
    mely_config_t cfg;

    mely_config_init(&cfg);
    cfg.workers = workers;
    cfg.pin = 1;
    return bench_rt_open_cfg(b, m, &cfg, min_workers);
}

int bench_rt_open_cfg(const struct bench *b, mely_t *m, const mely_config_t *cfg,
                      unsigned min_workers)
{
    int err = mely_init(m, cfg);
    if (err)
        fprintf(stderr, "%s: mely_init: %s\n", b->name, mely_strerror(err));
    else if (mely_workers(m) < min_workers) {
        fprintf(stderr, "%s: the runtime has %u worker(s) (MELY_WORKERS?); need >= %u\n",
                b->name, mely_workers(m), min_workers);
        mely_shutdown(m);
        err = MELY_EINVAL;
    }
    return err;
}

void bench_rt_close(const struct bench *b, mely_t *m, const char *what)
{
    int left = mely_shutdown(m);
    if (left > 0)
        fprintf(stderr, "%s: %s: %d event(s) were still queued at shutdown\n", b->name, what,
                left);
    else if (left < 0)
        fprintf(stderr, "%s: %s: mely_shutdown: %s\n", b->name, what, mely_strerror(left));
}

unsigned bench_colors_of(const struct bench *b, const mely_t *m, int worker, mely_color_t *out,
                         unsigned n)
{
    unsigned k = 0;
    for (mely_color_t c = 1; c < MELY_COLORS && k < n; c++)
        if (mely_color_owner(m, c) == worker)
            out[k++] = c;
    if (k < n)
        fprintf(stderr, "%s: found %u of the %u colors owned by worker %d\n", b->name, k, n,
                worker);
    return k;
}

void bench_print_mely_env(FILE *f)
{
    static const char *const env[] = {"MELY_WORKERS", "MELY_PIN",   "MELY_BATCH",
                                      "MELY_SPIN_US", "MELY_STEAL", "MELY_ENGINE"};

    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++)
        if (getenv(env[i]))
            fprintf(f, "environment: %s=%s (overrides the benchmark's configuration)\n", env[i],
                    getenv(env[i]));
}

void bench_post_failed(mely_t *m, _Atomic int *slot, int err)
{
    int none = 0;
    atomic_compare_exchange_strong(slot, &none, err);
    mely_stop(m);
}

struct bench_totals bench_rt_totals(const mely_t *m)
{
    struct bench_totals t = {.parks = 0};
    uint64_t most = 0;
    mely_stats_t s;

    for (unsigned w = 0; w < mely_workers(m); w++) {
        if (mely_worker_stats(m, w, &s) != 0)
            continue;
        if (w < 2)
            t.run[w] = s.events_run;
        t.parks += s.parks;
        t.wakeups += s.wakeups;
        t.contended += s.lock_contended;
        t.lock_cycles += s.lock_cycles;
        t.steals += s.steals;
        t.steal_cycles += s.steal_cycles;
        t.stolen_events += s.stolen_events;
        t.stolen_cycles += s.stolen_cycles;
        if (s.steals > most) {
            most = s.steals;
            t.steal_median = s.steal_cycles_median;
        }
    }
    return t;
}

/* ---- mely_run() in the background ------------------------------------------------ */

static void *bg_main(void *arg)
{
    struct bench_bg *bg = arg;
    bg->rc = mely_run(bg->m);
    return NULL;
}

int bench_bg_start(const struct bench *b, struct bench_bg *bg, mely_t *m, const char *what)
{
    *bg = (struct bench_bg){.m = m};
    int err = pthread_create(&bg->thread, NULL, bg_main, bg);
    if (err)
        fprintf(stderr, "%s: %s: pthread_create: %s\n", b->name, what, strerror(err));
    return -err;
}

int bench_bg_stop(const struct bench *b, struct bench_bg *bg, const char *what)
{
    struct timespec deadline;

    mely_stop(bg->m);
    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np's clock */
    deadline.tv_sec += (time_t)(BENCH_STOP_GRACE_NS / 1000000000u);
    int err = pthread_timedjoin_np(bg->thread, NULL, &deadline);
    if (err) {
        fprintf(stderr, "%s: %s: mely_run() did not return %.0f s after mely_stop() "
                        "(%s): the runtime hangs; giving up\n",
                b->name, what, (double)BENCH_STOP_GRACE_NS / 1e9, strerror(err));
        _exit(3);
    }
    if (bg->rc != 0)
        fprintf(stderr, "%s: %s: mely_run: %s\n", b->name, what, mely_strerror(bg->rc));
    return bg->rc;
}

/* ---- Runs ------------------------------------------------------------------------ */

bool bench_measure(struct bench *b, const char *name, const char *unit, bench_workload_fn fn,
                   unsigned workers, unsigned runs, uint64_t count, double scale, double *value)
{
    struct bench_sample s[runs ? runs : 1];
    struct bench_probe first = bench_probe_now();
    char load[64];
    double cyc;

    for (unsigned r = 0; r < runs; r++) {
        struct bench_totals t;
        struct bench_probe p0 = bench_probe_now();
        s[r] = fn(b, workers, count, &t);
        struct bench_probe p1 = bench_probe_now();
        bench_load_note(b, &p0, &p1, load, sizeof(load));
        if (s[r].ok)
            printf("  %-22s run %u: %9.2f %-13s %7.1f cycles  [w0 ran %" PRIu64 ", w1 ran %" PRIu64
                   ", parks %" PRIu64 ", contended locks %" PRIu64 "%s]\n",
                   name, r + 1, s[r].value * scale, unit, s[r].cycles, t.run[0], t.run[1],
                   t.parks, t.contended, load);
        else
            printf("  %-22s run %u: failed%s\n", name, r + 1, load);
        fflush(stdout);
    }
    struct bench_probe last = bench_probe_now();
    bench_load_note(b, &first, &last, load, sizeof(load));
    if (!bench_sample_medians(s, runs, value, &cyc))
        return false;
    *value *= scale;
    printf("  %-22s median: %.2f %s (%.1f cycles)%s%s%s\n", name, *value, unit, cyc,
           load[0] ? "   [all runs" : "", load, load[0] ? "]" : "");
    return true;
}

/* The SPSC floor's ring: indices on lines of their own, a record of 40 bytes
 * per slot (the size of an event). */
enum { SPSC_SLOTS = 1024, SPSC_BATCH = 32 };

struct spsc_record {
    uint64_t w[5];
};

struct spsc {
    alignas(64) _Atomic uint64_t tail; /* the producer's */
    alignas(64) _Atomic uint64_t head; /* the consumer's */
    alignas(64) struct spsc_record slot[SPSC_SLOTS];
    uint64_t records;
    uint64_t sum; /* the consumer's, so that its reads are not dropped */
    int cpu[2];
};

static void *spsc_consumer(void *arg)
{
    struct spsc *q = arg;
    uint64_t h = 0, sum = 0;

    bench_pin_self(q->cpu[1]);
    while (h < q->records) { /* bounded: the producer sends exactly q->records */
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
        for (; h < t; h++) /* bounded: what was published */
            sum += q->slot[h % SPSC_SLOTS].w[h % 5];
        atomic_store_explicit(&q->head, h, memory_order_release);
    }
    q->sum = sum;
    return NULL;
}

struct bench_sample bench_floor_spsc(uint64_t records)
{
    struct bench_sample out = {.ok = false};
    cpu_set_t allowed, saved;
    pthread_t t;
    struct spsc *q = aligned_alloc(64, sizeof(*q));

    if (!q)
        return out;
    memset(q, 0, sizeof(*q));
    q->records = records;
    q->cpu[0] = q->cpu[1] = -1;
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed))
                q->cpu[k++] = c;
    bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    if (pthread_create(&t, NULL, spsc_consumer, q) != 0) {
        free(q);
        return out;
    }
    bench_pin_self(q->cpu[0]);
    uint64_t t0 = bench_now_ns(), c0 = bench_cycles(), tail = 0, head = 0;
    while (tail < records) { /* bounded: `records` records */
        uint64_t n = records - tail < SPSC_BATCH ? records - tail : SPSC_BATCH;
        while (tail + n - head > SPSC_SLOTS) /* bounded by the consumer */
            head = atomic_load_explicit(&q->head, memory_order_acquire);
        for (uint64_t i = 0; i < n; i++) {
            struct spsc_record *r = &q->slot[(tail + i) % SPSC_SLOTS];
            for (int k = 0; k < 5; k++)
                r->w[k] = tail + i + (uint64_t)k;
        }
        tail += n;
        atomic_store_explicit(&q->tail, tail, memory_order_release);
    }
    pthread_join(t, NULL);
    uint64_t t1 = bench_now_ns(), c1 = bench_cycles();
    if (restore)
        (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    out.ok = records > 0 && q->sum != 0;
    out.value = records && t1 > t0 ? (double)records * 1e3 / (double)(t1 - t0) : 0;
    out.cycles = records ? (double)(c1 - c0) / (double)records : 0;
    free(q);
    return out;
}

/* ---- The machine ----------------------------------------------------------------- */

size_t bench_cache_bytes(unsigned level)
{
    for (unsigned i = 0; i < 16; i++) { /* bounded: a CPU has a handful of caches */
        char path[96], type[32] = "";
        unsigned lv = 0, kb = 0;
        char unit = 'K';
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%u/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        bool ok = fscanf(f, "%u", &lv) == 1;
        fclose(f);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%u/type", i);
        if (ok && (f = fopen(path, "r"))) {
            ok = fscanf(f, "%31s", type) == 1;
            fclose(f);
        }
        if (!ok || lv != level || strcmp(type, "Instruction") == 0)
            continue;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%u/size", i);
        if (!(f = fopen(path, "r")))
            continue;
        int got = fscanf(f, "%u%c", &kb, &unit); /* "1024K", "32M" */
        fclose(f);
        if (got >= 1 && kb > 0)
            return (size_t)kb * (got == 2 && unit == 'M' ? 1024u * 1024u : 1024u);
    }
    return 0;
}

void bench_machine_get(struct bench_machine *mc)
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

void bench_machine_print(FILE *f, const struct bench_machine *mc)
{
    fprintf(f, "machine: %s; %u usable CPUs (of %ld online); %s\n", mc->cpu, mc->usable,
            mc->online, mc->kernel);
}

/* ---- Option numbers -------------------------------------------------------------- */

int bench_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;

    if (*s == '-') /* strtoull() would negate it */
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0')
        return -EINVAL;
    if (errno || v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

int bench_parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;

    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(v))
        return -EINVAL;
    if (errno || v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

/* ---- A peer program -------------------------------------------------------------- */

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int bench_find_peer(const char *argv0, const char *peer, char *path, size_t size)
{
    char dir[4096];

    if (strchr(argv0, '/')) {
        snprintf(dir, sizeof(dir), "%s", argv0);
    } else {
        ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
        if (n <= 0)
            return -ENOENT;
        dir[n] = '\0';
    }
    char *cut = strrchr(dir, '/');
    if (!cut)
        return -ENOENT;
    *cut = '\0';
    /* A truncated path names no executable. */
    snprintf(path, size, "%s/%s", dir[0] ? dir : "/", peer);
    if (executable(path))
        return 0;
    const char *base = strrchr(dir, '/');
    if (strcmp(base ? base + 1 : dir, ".libs") == 0) {
        snprintf(path, size, "%s/../%s", dir, peer);
        if (executable(path))
            return 0;
    }
    return -ENOENT;
}

/* Reads fd to its end, keeping the first size-1 bytes, NUL-terminated. */
static void read_all(int fd, char *buf, size_t size)
{
    size_t len = 0;
    for (;;) {
        char tmp[4096];
        ssize_t n = read(fd, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t take = (size_t)n < size - 1 - len ? (size_t)n : size - 1 - len;
        memcpy(buf + len, tmp, take);
        len += take;
    }
    buf[len] = '\0';
}

int bench_run_peer(const struct bench *b, const char *path, char *const argv[],
                   bench_line_fn on_line, void *arg)
{
    int fd[2];

    if (pipe(fd) != 0) {
        int err = -errno;
        fprintf(stderr, "%s: pipe: %s\n", b->name, strerror(-err));
        return err;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int err = -errno;
        fprintf(stderr, "%s: fork: %s\n", b->name, strerror(-err));
        close(fd[0]);
        close(fd[1]);
        return err;
    }
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDOUT_FILENO) < 0)
            _exit(127);
        close(fd[1]);
        execv(path, argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", b->name, path, strerror(errno));
        _exit(127);
    }
    close(fd[1]);

    char buf[65536];
    read_all(fd[0], buf, sizeof(buf));
    close(fd[0]);

    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        on_line(line, arg);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    fprintf(stderr, "%s: %s ended with %s %d\n", b->name, path,
            WIFEXITED(status) ? "status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 1;
}

/* ---- The machine's floor ------------------------------------------------------------ */

struct floor {
    alignas(64) _Atomic uint64_t ping;
    alignas(64) _Atomic uint64_t pong;
    uint64_t trips;
    int cpu[2];
};

void bench_pin_self(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *floor_ponger(void *arg)
{
    struct floor *f = arg;

    bench_pin_self(f->cpu[1]);
    for (uint64_t i = 1; i <= f->trips; i++) {
        while (atomic_load_explicit(&f->ping, memory_order_acquire) != i) /* bounded by the pinger */
            ;
        atomic_store_explicit(&f->pong, i, memory_order_release);
    }
    return NULL;
}

struct bench_sample bench_floor_pingpong(uint64_t trips)
{
    static struct floor f;
    struct bench_sample out = {.ok = false};
    cpu_set_t allowed, saved;
    pthread_t t;

    f = (struct floor){.trips = trips, .cpu = {-1, -1}};
    if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed))
                f.cpu[k++] = c;
    bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    if (pthread_create(&t, NULL, floor_ponger, &f) != 0)
        return out;
    bench_pin_self(f.cpu[0]);
    uint64_t t0 = bench_now_ns(), c0 = bench_cycles();
    for (uint64_t i = 1; i <= trips; i++) {
        atomic_store_explicit(&f.ping, i, memory_order_release);
        while (atomic_load_explicit(&f.pong, memory_order_acquire) != i) /* bounded by the ponger */
            ;
    }
    uint64_t t1 = bench_now_ns(), c1 = bench_cycles();
    pthread_join(t, NULL);
    if (restore)
        (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    out.ok = trips > 0;
    out.value = trips ? (double)(t1 - t0) / (double)trips : 0;
    out.cycles = trips ? (double)(c1 - c0) / (double)trips : 0;
    return out;
}
