/* SPDX-License-Identifier: MIT */
/*
 * report.c: the machine, its floors, peer programs, and the results table
 * with its CSV file (see harness.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- The machine ---------------------------------------------------------------------- */

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

void bench_machine_get(struct bench_machine *mc, FILE *out)
{
    char line[512];
    cpu_set_t set;
    struct utsname u;

    snprintf(mc->cpu, sizeof(mc->cpu), "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof(line), f)) {
        char *v = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !v)
            continue;
        v += 1 + strspn(v + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(mc->cpu, sizeof(mc->cpu), "%s", v);
        break;
    }
    if (f)
        fclose(f);
    CPU_ZERO(&set);
    mc->usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 0;
    mc->online = sysconf(_SC_NPROCESSORS_ONLN);
    if (uname(&u) == 0)
        snprintf(mc->kernel, sizeof(mc->kernel), "%s %s %s", u.sysname, u.release, u.machine);
    else
        snprintf(mc->kernel, sizeof(mc->kernel), "unknown");
    if (out)
        fprintf(out, "machine: %s; %u usable CPUs (of %ld online); %s\n", mc->cpu, mc->usable,
                mc->online, mc->kernel);
}

/* ---- The machine's floors -------------------------------------------------------------- */

/* Two threads on the first two allowed CPUs: the caller (restored afterwards)
 * runs `mine`, a new thread `theirs`, on the same argument. */
static bool on_two_cpus(void *(*theirs)(void *), void (*mine)(void *), void *arg, int *cpu)
{
    cpu_set_t saved;
    pthread_t t;

    first_cpus(cpu, 2);
    bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    if (pthread_create(&t, NULL, theirs, arg) != 0)
        return false;
    pin_self(cpu[0]);
    mine(arg);
    pthread_join(t, NULL);
    if (restore)
        (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    return true;
}

struct pingpong {
    alignas(64) _Atomic uint64_t ping;
    alignas(64) _Atomic uint64_t pong;
    uint64_t trips;
    struct bench_span span;
    int cpu[2];
};

static void *ponger(void *arg)
{
    struct pingpong *f = arg;

    pin_self(f->cpu[1]);
    for (uint64_t i = 1; i <= f->trips; i++) {
        while (atomic_load_explicit(&f->ping, memory_order_acquire) != i) /* bounded by the pinger */
            ;
        atomic_store_explicit(&f->pong, i, memory_order_release);
    }
    return NULL;
}

static void pinger(void *arg)
{
    struct pingpong *f = arg;

    bench_mark(&f->span, false);
    for (uint64_t i = 1; i <= f->trips; i++) {
        atomic_store_explicit(&f->ping, i, memory_order_release);
        while (atomic_load_explicit(&f->pong, memory_order_acquire) != i) /* bounded by the ponger */
            ;
    }
    bench_mark(&f->span, true);
}

struct bench_sample bench_floor_pingpong(uint64_t trips)
{
    static struct pingpong f;

    f = (struct pingpong){.trips = trips};
    if (!on_two_cpus(ponger, pinger, &f, f.cpu))
        return (struct bench_sample){.ok = false};
    return bench_span_sample(&f.span, trips, false);
}

/* The SPSC floor's ring: indices on lines of their own, a record of 40 bytes
 * per slot (the size of an event). */
enum { SPSC_SLOTS = 1024, SPSC_BATCH = 32 };

struct spsc {
    alignas(64) _Atomic uint64_t tail; /* the producer's */
    alignas(64) _Atomic uint64_t head; /* the consumer's */
    alignas(64) uint64_t slot[SPSC_SLOTS][5];
    uint64_t records, sum;
    struct bench_span span;
    int cpu[2];
};

static void *spsc_consumer(void *arg)
{
    struct spsc *q = arg;
    uint64_t h = 0, sum = 0;

    pin_self(q->cpu[1]);
    while (h < q->records) { /* bounded: the producer sends exactly q->records */
        uint64_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
        for (; h < t; h++) /* bounded: what was published */
            sum += q->slot[h % SPSC_SLOTS][h % 5];
        atomic_store_explicit(&q->head, h, memory_order_release);
    }
    q->sum = sum; /* so that its reads are not dropped */
    return NULL;
}

static void spsc_producer(void *arg)
{
    struct spsc *q = arg;
    uint64_t tail = 0, head = 0;

    bench_mark(&q->span, false);
    while (tail < q->records) { /* bounded: `records` records */
        uint64_t n = q->records - tail < SPSC_BATCH ? q->records - tail : SPSC_BATCH;
        while (tail + n - head > SPSC_SLOTS) /* bounded by the consumer */
            head = atomic_load_explicit(&q->head, memory_order_acquire);
        for (uint64_t i = 0; i < n; i++)
            for (int k = 0; k < 5; k++)
                q->slot[(tail + i) % SPSC_SLOTS][k] = tail + i + (uint64_t)k;
        tail += n;
        atomic_store_explicit(&q->tail, tail, memory_order_release);
    }
}

struct bench_sample bench_floor_spsc(uint64_t records)
{
    struct bench_sample out = {.ok = false};
    struct spsc *q = aligned_alloc(64, sizeof(*q));

    if (!q)
        return out;
    memset(q, 0, sizeof(*q));
    q->records = records;
    if (on_two_cpus(spsc_consumer, spsc_producer, q, q->cpu)) {
        bench_mark(&q->span, true); /* the consumer is done: joined */
        out = bench_span_sample(&q->span, records, true);
        out.ok &= q->sum != 0;
        out.value /= 1e6; /* M records/s */
    }
    free(q);
    return out;
}

/* ---- A peer program ------------------------------------------------------------------------ */

int bench_find_peer(const char *peer, char *path, size_t size)
{
    char dir[4096];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);

    if (n <= 0)
        return -ENOENT;
    dir[n] = '\0';
    *strrchr(dir, '/') = '\0'; /* an absolute path has one */
    size_t l = strlen(dir);
    bool libs = l >= 6 && strcmp(dir + l - 6, "/.libs") == 0; /* libtool's real binary */
    snprintf(path, size, "%s%s/%s", dir, libs ? "/.." : "", peer);
    return access(path, X_OK) == 0 ? 0 : -ENOENT;
}

pid_t bench_spawn(const struct bench *b, const char *path, char *const argv[],
                  const cpu_set_t *cpus, int *out)
{
    int fd[2];

    if (pipe2(fd, O_CLOEXEC) != 0) {
        fprintf(stderr, "%s: pipe: %s\n", b->name, strerror(errno));
        return -errno;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (cpus)
            (void)sched_setaffinity(0, sizeof(*cpus), cpus);
        if (dup2(fd[1], STDOUT_FILENO) < 0)
            _exit(127);
        execv(path, argv);
        fprintf(stderr, "%s: cannot run %s: %s\n", b->name, path, strerror(errno));
        _exit(127);
    }
    int err = errno;
    close(fd[1]);
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", b->name, strerror(err));
        close(fd[0]);
        return -err;
    }
    *out = fd[0];
    return pid;
}

int bench_wait(pid_t pid, double limit_s, char *why, size_t size)
{
    uint64_t limit = now_ns() + (uint64_t)(limit_s * 1e9);
    int status = 0;
    pid_t got;

    while ((got = waitpid(pid, &status, limit_s > 0 ? WNOHANG : 0)) == 0 ||
           (got < 0 && errno == EINTR)) {
        if (got == 0 && now_ns() >= limit) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            snprintf(why, size, "killed");
            return 1;
        }
        if (got == 0)
            sleep_us(10000);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        why[0] = '\0';
        return 0;
    }
    snprintf(why, size, "%s %d", WIFEXITED(status) ? "status" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 1;
}

int bench_run_peer(const struct bench *b, const char *path, char *const argv[],
                   void (*on_line)(const char *line, void *arg), void *arg)
{
    char why[64], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int fd;
    pid_t pid = bench_spawn(b, path, argv, NULL, &fd);
    FILE *f = pid < 0 ? NULL : fdopen(fd, "r");

    if (!f)
        return pid < 0 ? pid : -errno;
    while ((len = getline(&line, &cap, f)) > 0) { /* bounded: the peer ends */
        line[strcspn(line, "\n")] = '\0';
        on_line(line, arg);
    }
    free(line);
    fclose(f);
    int rc = bench_wait(pid, 0, why, sizeof(why));
    if (rc)
        fprintf(stderr, "%s: %s ended with %s\n", b->name, path, why);
    return rc;
}

/* ---- The table ----------------------------------------------------------------------------- */

void bench_table_init(struct bench_table *t, const struct bench_column *cols, unsigned ncols,
                      unsigned nrows)
{
    *t = (struct bench_table){.cols = cols, .ncols = ncols, .nrows = nrows};
    t->cell = calloc((size_t)ncols * (nrows ? nrows : 1), BENCH_CELL);
    if (!t->cell) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
}

void bench_table_free(struct bench_table *t)
{
    free(t->cell);
    t->cell = NULL;
}

char *bench_cell(struct bench_table *t, unsigned row, unsigned col, const char *fmt, ...)
{
    char *c = t->cell[row * t->ncols + col];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, BENCH_CELL, fmt, ap);
    va_end(ap);
    return c;
}

/* One line of the shown columns: the titles (row < 0) or a row's cells. */
static void print_line(FILE *f, const struct bench_table *t, const unsigned *width, int row)
{
    unsigned last = 0;
    for (unsigned c = 0; c < t->ncols; c++)
        if (t->cols[c].title)
            last = c;
    for (unsigned c = 0, first = 1; c < t->ncols; c++) {
        const struct bench_column *col = &t->cols[c];
        if (!col->title)
            continue;
        const char *s = row < 0 ? col->title : t->cell[(unsigned)row * t->ncols + c];
        if (!first)
            fprintf(f, "%*s", (int)(col->gap ? col->gap : 1), "");
        first = 0;
        if (c == last && !col->right)
            fputs(s, f);
        else
            fprintf(f, col->right ? "%*s" : "%-*s", (int)width[c], s);
    }
    fputc('\n', f);
}

void bench_table_print(FILE *f, const struct bench_table *t)
{
    unsigned width[t->ncols ? t->ncols : 1];

    for (unsigned c = 0; c < t->ncols; c++) {
        width[c] = t->cols[c].width;
        if (t->cols[c].title && strlen(t->cols[c].title) > width[c])
            width[c] = (unsigned)strlen(t->cols[c].title);
        for (unsigned r = 0; r < t->nrows; r++)
            if (strlen(t->cell[r * t->ncols + c]) > width[c])
                width[c] = (unsigned)strlen(t->cell[r * t->ncols + c]);
    }
    print_line(f, t, width, -1);
    for (unsigned r = 0; r < t->nrows; r++)
        print_line(f, t, width, (int)r);
}

/* ---- CSV --------------------------------------------------------------------------------- */

/* mkdir -p for the directories of `path` (not its last component). */
static int make_parents(const char *path)
{
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
        return -ENAMETOOLONG;
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

/* One field, quoted if it holds ',', '"' or a newline, then ',' or '\n'. */
static void csv_field(FILE *f, const char *s, bool last)
{
    if (strpbrk(s, ",\"\n")) {
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

/* The prefix every line starts with, then the CSV columns (row < 0: titles). */
static void csv_line(FILE *f, const char *const *prefix, const struct bench_param *params,
                     unsigned nparams, const struct bench_table *t, int row)
{
    unsigned last = 0;
    for (unsigned c = 0; c < t->ncols; c++)
        if (t->cols[c].key)
            last = c;
    for (unsigned i = 0; i < 4; i++)
        csv_field(f, prefix[i], false);
    for (unsigned i = 0; i < nparams; i++)
        csv_field(f, row < 0 ? params[i].name : params[i].value, false);
    for (unsigned c = 0; c < t->ncols; c++)
        if (t->cols[c].key)
            csv_field(f, row < 0 ? t->cols[c].key : t->cell[(unsigned)row * t->ncols + c],
                      c == last);
}

int bench_table_csv(const struct bench *b, const char *path, const struct bench_machine *mc,
                    const struct bench_param *params, unsigned nparams,
                    const struct bench_table *t)
{
    static const char *const titles[4] = {"date", "cpu_model", "usable_cpus", "kernel"};
    char when[32], usable[16];
    time_t now = time(NULL);
    struct tm tm;
    int err = make_parents(path);
    FILE *f = err ? NULL : fopen(path, "w");

    if (!f) {
        err = err ? err : -errno;
        fprintf(stderr, "%s: cannot write %s: %s\n", b->name, path, strerror(-err));
        return err;
    }
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    snprintf(usable, sizeof(usable), "%u", mc->usable);
    const char *const values[4] = {when, mc->cpu, usable, mc->kernel};
    csv_line(f, titles, params, nparams, t, -1);
    for (unsigned r = 0; r < t->nrows; r++)
        csv_line(f, values, params, nparams, t, (int)r);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        fprintf(stderr, "%s: writing %s: %s\n", b->name, path, strerror(failed ? EIO : errno));
        return -EIO;
    }
    printf("CSV: %s\n", path);
    return 0;
}
