/* SPDX-License-Identifier: MIT */
/*
 * measure.c: what bench/ and tests/ share (see measure.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "common/measure.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sleep_us(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000u), .tv_nsec = (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

double cpu_s(int who)
{
    struct rusage ru;
    if (getrusage(who, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name (in parentheses, may hold spaces): state is
     * field 3, utime 14, stime 15. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long ut, st;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)(ut + st) / (double)hz : -1;
}

struct cpu_window idle_window(uint64_t settle_us, uint64_t window_us)
{
    sleep_us(settle_us);
    double cpu0 = cpu_s(RUSAGE_SELF);
    uint64_t t0 = now_ns();
    sleep_us(window_us);
    return (struct cpu_window){.cpu_s = cpu_s(RUSAGE_SELF) - cpu0,
                               .wall_s = (double)(now_ns() - t0) / 1e9};
}

enum { MAX_TASKS = 512 };

struct task_cpu {
    pid_t tid;
    double cpu_s;
};

/* The CPU-time clock of thread tid of this process: what glibc's
 * pthread_getcpuclockid() builds from a pthread_t, from the kernel's thread
 * id (Linux's encoding: ~tid << 3, per-thread, scheduler time), so that
 * threads the caller did not create can be read, to the nanosecond. */
static clockid_t tid_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 4u | 2u);
}

/* The CPU time of each thread of this process; how many were read. */
static unsigned task_cpus(struct task_cpu *t, unsigned max)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    unsigned n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) { /* bounded: the threads */
        pid_t tid = (pid_t)atoi(e->d_name);
        struct timespec ts;
        if (tid <= 0 || clock_gettime(tid_clock(tid), &ts) != 0)
            continue; /* not a thread, or it ended */
        t[n++] = (struct task_cpu){tid, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9};
    }
    closedir(d);
    return n;
}

static atomic_bool spin_stop;
static pthread_t spin_thread;

static void *spinner(void *arg)
{
    double *got = arg;
    double t0 = cpu_s(RUSAGE_THREAD);
    while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) { /* bounded: the window */
    }
    *got = cpu_s(RUSAGE_THREAD) - t0;
    return NULL;
}

struct idle_check idle_against_spinner(uint64_t settle_us, uint64_t window_us)
{
    static struct task_cpu before[MAX_TASKS], after[MAX_TASKS];
    struct idle_check r = {0};
    pid_t self = (pid_t)syscall(SYS_gettid);
    sleep_us(settle_us);
    atomic_store(&spin_stop, false);
    double got = 0;
    unsigned nb = task_cpus(before, MAX_TASKS);
    double proc0 = cpu_s(RUSAGE_SELF);
    uint64_t t0 = now_ns();
    bool spun = pthread_create(&spin_thread, NULL, spinner, &got) == 0;
    sleep_us(window_us);
    atomic_store(&spin_stop, true);
    if (spun)
        pthread_join(spin_thread, NULL);
    r.wall_s = (double)(now_ns() - t0) / 1e9;
    unsigned na = task_cpus(after, MAX_TASKS);
    r.spinner_s = got;
    if (!nb || !na) { /* no descriptor for /proc (a test at its limit): the
                         process's total, all charged to one thread */
        r.others_s = r.busiest_s = cpu_s(RUSAGE_SELF) - proc0 - got;
        return r;
    }
    for (unsigned i = 0; i < na; i++) { /* bounded: the threads */
        if (after[i].tid == self)
            continue;
        double was = 0;
        for (unsigned j = 0; j < nb; j++) /* bounded: the threads */
            if (before[j].tid == after[i].tid)
                was = before[j].cpu_s;
        double used = after[i].cpu_s - was;
        r.others_s += used;
        if (used > r.busiest_s)
            r.busiest_s = used;
    }
    return r;
}

uint64_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

unsigned raise_fd_limit(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    if (rl.rlim_cur < want) {
        struct rlimit up = rl;
        up.rlim_cur = want;
        if (up.rlim_max != RLIM_INFINITY && up.rlim_max < want)
            up.rlim_max = want; /* only root may; otherwise settle for the hard limit */
        if (setrlimit(RLIMIT_NOFILE, &up) != 0) {
            up.rlim_cur = rl.rlim_max;
            up.rlim_max = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &up);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur > UINT32_MAX ? UINT32_MAX : (unsigned)rl.rlim_cur;
}

int set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

unsigned first_cpus(int *cpu, unsigned n)
{
    cpu_set_t set;
    unsigned k = 0;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && k < n; c++)
            if (CPU_ISSET(c, &set))
                cpu[k++] = c;
    for (unsigned i = k; i < n; i++)
        cpu[i] = -1;
    return k;
}

void pin_self(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double quantile(double *v, size_t n, double q)
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

void stats_add(mely_stats_t *sum, const mely_stats_t *s)
{
    /* Every field of mely_stats_t is a uint64_t counter (mely.h). */
    enum { N = sizeof(mely_stats_t) / sizeof(uint64_t) };
    _Static_assert(sizeof(mely_stats_t) % sizeof(uint64_t) == 0, "counters are uint64_t");
    uint64_t total[N], one[N];

    memcpy(total, sum, sizeof(total));
    memcpy(one, s, sizeof(one));
    for (unsigned i = 0; i < N; i++)
        total[i] += one[i];
    memcpy(sum, total, sizeof(total));
}

int stats_sum(const mely_t *m, mely_stats_t *sum)
{
    int first = 0;

    memset(sum, 0, sizeof(*sum));
    for (unsigned w = 0; w < mely_workers(m); w++) {
        mely_stats_t s;
        int err = mely_worker_stats(m, w, &s);
        if (err) {
            first = first ? first : err;
            continue;
        }
        stats_add(sum, &s);
    }
    return first;
}

/* ---- Watchdog ------------------------------------------------------------------ */

/* Waits up to `seconds` for done; wd->mu held. */
static bool wait_done(struct watchdog *wd, double seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + (uint64_t)(seconds * 1e9);
    deadline.tv_sec += (time_t)(ns / 1000000000u);
    deadline.tv_nsec = (long)(ns % 1000000000u);
    while (!wd->done)
        if (pthread_cond_timedwait(&wd->cv, &wd->mu, &deadline) == ETIMEDOUT)
            break;
    return wd->done;
}

static void *watchdog_main(void *arg)
{
    struct watchdog *wd = arg;

    pthread_mutex_lock(&wd->mu);
    if (!wait_done(wd, wd->seconds)) {
        __atomic_store_n(&wd->fired, true, __ATOMIC_RELEASE);
        fprintf(stderr, "%s: no end after %.3g s: calling mely_stop()\n", wd->what, wd->seconds);
        mely_stop(wd->m);
        if (!wait_done(wd, WATCHDOG_GRACE_S)) {
            fprintf(stderr, "%s: mely_run() did not return %d s after mely_stop(): the runtime "
                            "hangs; giving up\n",
                    wd->what, WATCHDOG_GRACE_S);
            _exit(3);
        }
    }
    pthread_mutex_unlock(&wd->mu);
    return NULL;
}

void watchdog_start(struct watchdog *wd, mely_t *m, double seconds, const char *what)
{
    pthread_condattr_t ca;

    memset(wd, 0, sizeof(*wd));
    wd->m = m;
    wd->seconds = seconds;
    wd->what = what;
    pthread_mutex_init(&wd->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* wait_done()'s clock */
    pthread_cond_init(&wd->cv, &ca);
    pthread_condattr_destroy(&ca);
    int err = pthread_create(&wd->thread, NULL, watchdog_main, wd);
    if (err) {
        fprintf(stderr, "%s: cannot start a watchdog thread: %s\n", what, strerror(err));
        exit(3);
    }
}

bool watchdog_fired(struct watchdog *wd)
{
    return __atomic_load_n(&wd->fired, __ATOMIC_ACQUIRE);
}

bool watchdog_end(struct watchdog *wd)
{
    pthread_mutex_lock(&wd->mu);
    wd->done = true;
    pthread_cond_signal(&wd->cv);
    pthread_mutex_unlock(&wd->mu);
    pthread_join(wd->thread, NULL);
    pthread_cond_destroy(&wd->cv);
    pthread_mutex_destroy(&wd->mu);
    return watchdog_fired(wd);
}
