/* SPDX-License-Identifier: MIT */
/*
 * harness.c: what mely's benchmark programs share (see harness.h); the
 * machine, its floors, peer programs and the results table are in report.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/harness.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef __x86_64__
#include <x86intrin.h>
#endif

/* ---- Options ------------------------------------------------------------------------- */

/* A number as the help and the CSV show it. */
static void opt_show(const struct bench_opt *o, double v, char *buf, size_t size)
{
    if (v == -1 && o->none)
        snprintf(buf, size, "%s", o->none);
    else
        snprintf(buf, size, o->kind == OPT_DOUBLE ? "%g" : "%.0f", v);
}

static bool opt_is_number(const struct bench_opt *o)
{
    return o->kind >= OPT_UINT && o->kind <= OPT_DOUBLE;
}

static void opt_help(FILE *f, const char *usage, const struct bench_opt *opts)
{
    fprintf(f, "usage: %s\n", usage);
    for (const struct bench_opt *o = opts; o->name; o++) {
        char head[48], note[160] = "", lo[24], hi[24], d[24], q[40] = "";
        snprintf(head, sizeof(head), "--%s%s", o->name,
                 opt_is_number(o) ? " N" : o->kind >= OPT_STR ? " ARG" : "");
        if (opt_is_number(o)) {
            opt_show(o, o->lo, lo, sizeof(lo));
            opt_show(o, o->hi, hi, sizeof(hi));
            opt_show(o, o->dflt, d, sizeof(d));
            if (o->quick != 0) {
                snprintf(q, sizeof(q), "; --quick: ");
                opt_show(o, o->quick, q + strlen(q), sizeof(q) - strlen(q));
            }
            snprintf(note, sizeof(note), " (default %s%s; %s..%s)", d, q, lo, hi);
        } else if (o->sdflt) {
            snprintf(note, sizeof(note), " (default %s)", o->sdflt);
        }
        fprintf(f, "  %-20s %s%s\n", head, o->help, note);
    }
}

static void opt_store(const struct bench_opt *o, double v)
{
    if (o->kind == OPT_UINT)
        *(unsigned *)o->var = (unsigned)v;
    else if (o->kind == OPT_U64)
        *(uint64_t *)o->var = (uint64_t)v;
    else if (o->kind == OPT_INT)
        *(int *)o->var = (int)v;
    else if (o->kind == OPT_DOUBLE)
        *(double *)o->var = v;
}

/* Sets o from arg; false if arg is not a value of o. */
static bool opt_set(const struct bench_opt *o, const char *arg)
{
    char *end;
    double v;

    switch (o->kind) {
    case OPT_FLAG:
    case OPT_QUICK:
        *(bool *)o->var = true;
        return true;
    case OPT_STR:
        *(const char **)o->var = arg;
        return arg[0] != '\0';
    case OPT_CALL:
        return o->call(arg, o->var);
    default:
        break;
    }
    errno = 0;
    if (o->kind == OPT_U64 && arg[0] != '-') { /* exact, beyond a double's 53 bits */
        unsigned long long u = strtoull(arg, &end, 10);
        if (end == arg || *end || errno || (double)u < o->lo || (double)u > o->hi)
            return false;
        *(uint64_t *)o->var = u;
        return true;
    }
    v = strtod(arg, &end);
    if (end == arg || *end || errno || isnan(v) || v < o->lo || v > o->hi ||
        (o->kind != OPT_DOUBLE && v != floor(v)))
        return false;
    opt_store(o, v);
    return true;
}

int bench_options(const char *usage, const struct bench_opt *opts, int min_args, int max_args,
                  int argc, char **argv)
{
    enum { MAX = 64 };
    struct option lo[MAX + 2];
    bool given[MAX] = {false}, quick = false;
    unsigned n = 0;
    int c;

    for (; opts[n].name && n < MAX; n++) {
        lo[n] = (struct option){opts[n].name, opts[n].kind >= OPT_UINT, NULL, 256 + (int)n};
        if (opts[n].kind == OPT_STR)
            *(const char **)opts[n].var = opts[n].sdflt;
        else if (opts[n].kind == OPT_FLAG || opts[n].kind == OPT_QUICK)
            *(bool *)opts[n].var = false;
        else
            opt_store(&opts[n], opts[n].dflt); /* OPT_CALL: the program's own default */
    }
    lo[n] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n + 1] = (struct option){NULL, 0, NULL, 0};
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (c == 'h') {
            opt_help(stdout, usage, opts);
            return 0;
        }
        if (c < 256) {
            fprintf(stderr, "usage: %s (--help: the options)\n", usage);
            return -1;
        }
        const struct bench_opt *o = &opts[c - 256];
        if (!opt_set(o, optarg)) {
            char lo_[24], hi_[24];
            opt_show(o, o->lo, lo_, sizeof(lo_));
            opt_show(o, o->hi, hi_, sizeof(hi_));
            if (opt_is_number(o))
                fprintf(stderr, "%.*s: --%s: expected %s..%s\n", (int)strcspn(usage, " "), usage,
                        o->name, lo_, hi_);
            else
                fprintf(stderr, "%.*s: --%s: bad value '%s'\n", (int)strcspn(usage, " "), usage,
                        o->name, optarg);
            return -1;
        }
        given[c - 256] = true;
        quick |= o->kind == OPT_QUICK;
    }
    for (unsigned i = 0; i < n && quick; i++)
        if (!given[i] && opt_is_number(&opts[i]) && opts[i].quick != 0)
            opt_store(&opts[i], opts[i].quick);
    if (argc - optind < min_args || argc - optind > max_args) {
        fprintf(stderr, "usage: %s (--help: the options)\n", usage);
        return -1;
    }
    return optind;
}

unsigned bench_opt_params(const struct bench_opt *opts, struct bench_param *p, unsigned max)
{
    unsigned k = 0;

    for (const struct bench_opt *o = opts; o->name && k < max; o++) {
        if (!o->param)
            continue;
        char *v = p[k].value;
        size_t size = sizeof(p[k].value);
        snprintf(p[k].name, sizeof(p[k].name), "%s", o->name);
        for (char *s = p[k].name; *s; s++)
            *s = *s == '-' ? '_' : *s;
        if (o->kind == OPT_UINT)
            snprintf(v, size, "%u", *(unsigned *)o->var);
        else if (o->kind == OPT_U64)
            snprintf(v, size, "%" PRIu64, *(uint64_t *)o->var);
        else if (o->kind == OPT_INT)
            opt_show(o, *(int *)o->var, v, size);
        else if (o->kind == OPT_DOUBLE)
            opt_show(o, *(double *)o->var, v, size);
        else if (o->kind == OPT_STR)
            snprintf(v, size, "%s", *(const char **)o->var);
        k++;
    }
    return k;
}

/* ---- The TSC ------------------------------------------------------------------------- */

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
    return (uint64_t)median(d, N);
}

double bench_tsc_per_ns(void)
{
    static double cached; /* 0: not calibrated yet (one thread calls this) */

    if (cached > 0 || bench_cycles() == 0)
        return cached;
    uint64_t t0 = now_ns(), c0 = bench_cycles();
    sleep_us(50000);
    uint64_t t1 = now_ns(), c1 = bench_cycles();
    cached = t1 > t0 ? (double)(c1 - c0) / (double)(t1 - t0) : 0.0;
    return cached;
}

void bench_spin_cycles(uint64_t start, uint64_t cycles)
{
    /* No pause instruction: it takes up to ~140 cycles on some cores, more than
     * the shortest handlers we imitate. Bounded: the TSC always advances. */
    for (uint64_t now = bench_cycles(); now != 0 && now - start < cycles; now = bench_cycles())
        ;
}

/* ---- Load ------------------------------------------------------------------------------ */

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
    p.self_s = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN); /* peers */
    p.t_ns = now_ns();
    return p;
}

const char *bench_load_note(struct bench *b, const struct bench_probe *p0,
                            const struct bench_probe *p1, char *buf, size_t size)
{
    long hz = sysconf(_SC_CLK_TCK), ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double wall = (double)(p1->t_ns - p0->t_ns) / 1e9 * (double)(ncpu > 0 ? ncpu : 1);

    buf[0] = '\0';
    if (!p0->ok || !p1->ok || hz <= 0 || p1->t_ns - p0->t_ns < 500000000u)
        return buf;
    double busy = (double)(p1->busy_ticks - p0->busy_ticks) / (double)hz;
    double self = p1->self_s - p0->self_s;
    double others = busy > self ? (busy - self) * 100.0 / wall : 0.0;
    double steal = (double)(p1->steal_ticks - p0->steal_ticks) / (double)hz * 100.0 / wall;
    b->worst_others = others > b->worst_others ? others : b->worst_others;
    b->worst_steal = steal > b->worst_steal ? steal : b->worst_steal;
    snprintf(buf, size, ", others %.0f%%, steal %.0f%%", others, steal);
    return buf;
}

void bench_load_warn(const struct bench *b)
{
    if (b->worst_others > 10.0 || b->worst_steal > 5.0)
        printf("note: other processes used up to %.0f%% of the CPUs (steal up to %.0f%%) during "
               "some runs: the figures are disturbed; re-run on a quiet machine\n",
               b->worst_others, b->worst_steal);
}

/* ---- Samples and passes ------------------------------------------------------------------ */

void bench_mark(struct bench_span *s, bool end)
{
    *(end ? &s->t1 : &s->t0) = now_ns();
    *(end ? &s->c1 : &s->c0) = bench_cycles();
}

struct bench_sample bench_span_sample(const struct bench_span *s, uint64_t n, bool rate)
{
    double ns = (double)(s->t1 - s->t0), items = (double)n;

    if (s->t1 == 0 || n == 0)
        return (struct bench_sample){.ok = false};
    return (struct bench_sample){.ok = true,
                                 .value = rate ? items * 1e9 / ns : ns / items,
                                 .cycles = (double)(s->c1 - s->c0) / items};
}

bool bench_sample_medians(const struct bench_sample *s, unsigned n, double *value,
                          double *cycles)
{
    double v[n ? n : 1], c[n ? n : 1];
    unsigned k = 0;

    for (unsigned i = 0; i < n; i++)
        if (s[i].ok) {
            v[k] = s[i].value;
            c[k++] = s[i].cycles;
        }
    if (k == 0)
        return false;
    *value = median(v, k);
    *cycles = median(c, k);
    return true;
}

int bench_median_pass(const void *items, size_t size, unsigned n, double (*key)(const void *))
{
    unsigned idx[n ? n : 1], k = 0;

    for (unsigned p = 0; p < n; p++)
        if (key((const char *)items + p * size) >= 0)
            idx[k++] = p;
    if (k == 0)
        return -1;
    for (unsigned i = 1; i < k; i++) /* insertion sort: a handful of passes */
        for (unsigned j = i; j > 0 && key((const char *)items + idx[j - 1] * size) >
                                          key((const char *)items + idx[j] * size);
             j--) {
            unsigned t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return (int)idx[(k - 1) / 2];
}

/* ---- A runtime for one run ----------------------------------------------------------------- */

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

void bench_post_failed(mely_t *m, int *slot, int err)
{
    int none = 0;
    __atomic_compare_exchange_n(slot, &none, err, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    mely_stop(m);
}

int bench_post_error(int *slot)
{
    return __atomic_load_n(slot, __ATOMIC_RELAXED);
}

void bench_print_mely_env(FILE *f)
{
    static const char *const env[] = {"MELY_WORKERS", "MELY_PIN",   "MELY_BATCH",
                                      "MELY_SPIN_US", "MELY_STEAL", "MELY_ENGINE",
                                      "MELY_EVENT_BUDGET_MB"};
    for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++)
        if (getenv(env[i]))
            fprintf(f, "environment: %s=%s (overrides the benchmark's configuration)\n", env[i],
                    getenv(env[i]));
}

struct bench_totals bench_rt_totals(const mely_t *m)
{
    struct bench_totals t;
    uint64_t most = 0;
    mely_stats_t s;

    memset(&t, 0, sizeof(t));
    stats_sum(m, &t.sum);
    for (unsigned w = 0; w < mely_workers(m); w++) {
        if (mely_worker_stats(m, w, &s) != 0)
            continue;
        if (w < 2)
            t.run[w] = s.events_run;
        if (s.steals > most) {
            most = s.steals;
            t.steal_median = s.steal_cycles_median;
        }
    }
    return t;
}

double bench_limit_s(uint64_t count, uint64_t ns_per_item)
{
    return 30.0 + (double)count * (double)ns_per_item / 1e9;
}

int bench_mely_run(const struct bench *b, mely_t *m, double seconds, const char *what)
{
    struct watchdog wd;
    char name[160];

    snprintf(name, sizeof(name), "%s: %s", b->name, what);
    watchdog_start(&wd, m, seconds, name);
    int err = mely_run(m);
    bool fired = watchdog_end(&wd);
    if (err)
        fprintf(stderr, "%s: mely_run: %s\n", name, mely_strerror(err));
    return err ? err : fired ? 1 : 0;
}

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
    deadline.tv_sec += WATCHDOG_GRACE_S;
    int err = pthread_timedjoin_np(bg->thread, NULL, &deadline);
    if (err) {
        fprintf(stderr, "%s: %s: mely_run() did not return %d s after mely_stop() (%s): the "
                        "runtime hangs; giving up\n",
                b->name, what, WATCHDOG_GRACE_S, strerror(err));
        _exit(3);
    }
    if (bg->rc != 0)
        fprintf(stderr, "%s: %s: mely_run: %s\n", b->name, what, mely_strerror(bg->rc));
    return bg->rc;
}

bool bench_measure(struct bench *b, const char *name, const char *unit, bench_workload_fn fn,
                   void *arg, unsigned runs, uint64_t count, double scale, bool with_counters,
                   double *value)
{
    struct bench_sample s[runs ? runs : 1];
    struct bench_probe first = bench_probe_now();
    char load[64], counters[160] = "";
    double cyc;

    for (unsigned r = 0; r < runs; r++) {
        struct bench_totals t;
        memset(&t, 0, sizeof(t));
        struct bench_probe p0 = bench_probe_now();
        s[r] = fn(b, arg, count, &t);
        struct bench_probe p1 = bench_probe_now();
        bench_load_note(b, &p0, &p1, load, sizeof(load));
        if (with_counters)
            snprintf(counters, sizeof(counters),
                     "  [w0 ran %" PRIu64 ", w1 ran %" PRIu64 ", parks %" PRIu64
                     ", contended locks %" PRIu64 "%s]",
                     t.run[0], t.run[1], t.sum.parks, t.sum.lock_contended, load);
        if (s[r].ok)
            printf("  %-22s run %u: %9.2f %-13s %7.1f cycles%s\n", name, r + 1,
                   s[r].value * scale, unit, s[r].cycles, counters);
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
