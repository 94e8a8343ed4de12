/* SPDX-License-Identifier: MIT */
/*
 * stall.c: the stall monitor (stall.h). One thread per mely_run(): it wakes
 * every MELY_STALL_MS/4 (1..50 ms; a period), reads each worker's stall
 * word, and warns once about a handler that has used more than
 * MELY_STALL_MS of CPU time.
 *
 * The worker reads no clock (stall.h); the monitor times a run from its own
 * ticks, with two clocks:
 *  - wall time, from the first tick that sees the run's number (no system
 *    call: mely__now_ns is the vDSO's);
 *  - CPU time, the worker thread's CPU clock, read by the monitor (a system
 *    call for another thread's clock). A run that most ticks see is new and
 *    ends before the next: it costs no read. The second tick that sees a run
 *    (it has lasted at least a period) reads the clock once, the baseline;
 *    the CPU time since then cannot exceed the wall time since then, so the
 *    next read waits until that wall time reaches MELY_STALL_MS, and from
 *    then on each tick reads it until the warning or the run's end.
 * Both underestimate: the wall time by the part of the run before the first
 * tick, the CPU time by what the thread used before the baseline (up to two
 * periods). So a warning is never early, and never about a handler that
 * used less CPU than MELY_STALL_MS. A handler that computes without a pause
 * is warned about between one and two periods after it has used
 * MELY_STALL_MS: 125-150 ms into it at the default 100 ms. Reading the
 * baseline at the first tick would make that 100-125 ms, for a system call
 * per worker per tick on a busy server; reading it only once the wall time
 * passes MELY_STALL_MS would make it 200-225 ms.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mely/queue/cycles.h"
#include "mely/core/log.h"
#include "mely/runtime.h"
#include "mely/observe/symtab.h"

/* Lines per second at most; stalls beyond are counted, and the next line
 * says how many went unsaid. */
#define STALL_LINES_PER_S 10

/* What the monitor remembers of one worker. */
struct watch {
    uint64_t word;                /* the word of the run seen last, or 0 */
    uint64_t seen_ns;             /* the tick that first saw the run */
    uint64_t base_ns;             /* the tick that read the baseline; 0: none yet */
    uint64_t base_cpu_ns;         /* the worker's CPU clock then */
    bool no_cpu;                  /* the clock cannot be read: wall time judges */
    bool warned;                  /* that run was warned about */
};

struct mely__stall_monitor {
    struct mely__rt *rt;
    struct watch *watch;          /* per worker */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* signalled by mely__stall_stop() */
    bool stop;                    /* under mu */
    uint64_t window_ns;           /* start of the current rate-limit second */
    unsigned lines;               /* lines said in that second */
    unsigned unsaid;              /* stalls not said since the last line */
};

const char *mely__handler_name(const mely_handler_t *desc, const void *fn, char *buf, size_t len)
{
    if (desc && desc->name)
        return desc->name;
    if (desc) {
        snprintf(buf, len, "descriptor %p", (const void *)desc);
        return buf;
    }
    Dl_info info;
    struct link_map *lm = NULL;
    /* A function pointer to void *: dladdr's interface, POSIX allows it. */
    if (!dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP)) {
        snprintf(buf, len, "%p", fn);
        return buf;
    }
    if (info.dli_sname && info.dli_saddr == fn)
        return info.dli_sname;
    /* Not exported (a static function, or a program's own without
     * -rdynamic): its object's .symtab (symtab.c says why there). */
    const char *name = lm ? mely__symtab_name(lm, fn) : NULL;
    if (name)
        return name;
    /* A stripped object: its name and the offset, which addr2line turns
     * into a name where debugging information is kept apart. */
    const char *base = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
    snprintf(buf, len, "%s+%#lx", base ? base + 1 : info.dli_fname ? info.dli_fname : "?",
             (unsigned long)((uintptr_t)fn - (uintptr_t)info.dli_fbase));
    return buf;
}

/* The name of the handler a stall word holds (stall.h). */
static const char *word_name(uint64_t h, char *buf, size_t len)
{
    const void *a = (const void *)(uintptr_t)(h & MELY__STALL_ADDR);
    if (!(h & MELY__STALL_DESC))
        return mely__handler_name(NULL, a, buf, len);
    if (!a)
        return "(a handler above the 47-bit address space)";
    return mely__handler_name(a, NULL, buf, len);
}

/* Whether a line may be said now (STALL_LINES_PER_S). */
static bool may_say(struct mely__stall_monitor *mon, uint64_t ns)
{
    if (ns - mon->window_ns >= 1000000000u) {
        mon->window_ns = ns;
        mon->lines = 0;
    }
    return mon->lines < STALL_LINES_PER_S;
}

/* Says that w's run h stalls, with its CPU time (cpu_ms; UINT64_MAX: not
 * known) and its wall time, both in ms so far. */
static void warn(struct mely__stall_monitor *mon, const struct mely__worker *w, uint64_t h,
                 int color, uint64_t cpu_ms, uint64_t wall_ms, uint64_t ns)
{
    char buf[256], unsaid[64] = "", times[96];

    if (!may_say(mon, ns)) {
        mon->unsaid++;
        return;
    }
    mon->lines++;
    if (mon->unsaid)
        snprintf(unsaid, sizeof(unsaid), "; %u earlier stalls unsaid (rate limit)", mon->unsaid);
    if (cpu_ms == UINT64_MAX)
        snprintf(times, sizeof(times),
                 "%" PRIu64 " ms of wall time so far (its CPU time cannot be read)", wall_ms);
    else
        snprintf(times, sizeof(times),
                 "%" PRIu64 " ms of CPU so far, %" PRIu64 " ms of wall time", cpu_ms, wall_ms);
    mely__log(MELY_LOG_WARN,
              "stall: worker %u, color %d: handler %s has run for %s (MELY_STALL_MS=%u)%s",
              w->index, color, word_name(h, buf, sizeof(buf)), times, mon->rt->stall_ms,
              unsaid);
    mon->unsaid = 0;
}

/* Whether word a and word b are one run: b runs, with a's run number (a
 * renamed run changes its handler, never its number: stall.h). */
static bool same_run(uint64_t a, uint64_t b)
{
    return (a & MELY__STALL_RUNNING) && (b & MELY__STALL_RUNNING) &&
           !((a ^ b) & ~MELY__STALL_RUNNING);
}

/* Worker w's thread CPU time in *ns: false if it cannot be read (no
 * clock published, or the thread is gone). One system call. */
static bool cpu_now(struct mely__worker *w, uint64_t *ns)
{
    struct timespec ts;
    if (!atomic_load_explicit(&w->stall.cpu_ok, memory_order_acquire) ||
        clock_gettime(w->stall.cpu_clock, &ts) != 0)
        return false;
    *ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return true;
}

/* The CPU time of wa's run so far, in ms, as far as the monitor knows it
 * (the top of this file): UINT64_MAX when it cannot be read (wall time
 * judges then), 0 while nothing can be said yet. */
static uint64_t run_cpu_ms(struct mely__worker *w, struct watch *wa, uint64_t ns,
                           unsigned stall_ms)
{
    uint64_t cpu;
    if (wa->no_cpu)
        return UINT64_MAX;
    if (!wa->base_ns) { /* the second look at the run: the baseline */
        if (!cpu_now(w, &cpu)) {
            wa->no_cpu = true;
            return UINT64_MAX;
        }
        wa->base_ns = ns;
        wa->base_cpu_ns = cpu;
        return 0;
    }
    if ((ns - wa->base_ns) / 1000000u < stall_ms)
        return 0; /* not enough wall time since the baseline for enough CPU */
    if (!cpu_now(w, &cpu)) {
        wa->no_cpu = true;
        return UINT64_MAX;
    }
    return cpu > wa->base_cpu_ns ? (cpu - wa->base_cpu_ns) / 1000000u : 0;
}

/* Checks worker w, whose memory is wa, once, at time ns. */
static void check_worker(struct mely__stall_monitor *mon, struct mely__worker *w,
                         struct watch *wa, uint64_t ns)
{
    uint64_t word = atomic_load_explicit(&w->stall.word, memory_order_acquire);
    if (!(word & MELY__STALL_RUNNING))
        return; /* no handler runs */
    if (!same_run(wa->word, word)) {
        *wa = (struct watch){.word = word, .seen_ns = ns};
        return;
    }
    wa->word = word; /* perhaps renamed */
    if (wa->warned)
        return; /* this run was said */
    unsigned stall_ms = mon->rt->stall_ms;
    uint64_t cpu_ms = run_cpu_ms(w, wa, ns, stall_ms);
    /* Read after the CPU clock, so that the wall time is never the shorter. */
    uint64_t now = mely__now_ns();
    uint64_t wall_ms = (now - wa->seen_ns) / 1000000u;
    if (cpu_ms == UINT64_MAX ? wall_ms < stall_ms : cpu_ms < stall_ms)
        return;
    int color = atomic_load_explicit(&w->stall.color, memory_order_relaxed);
    /* The same run still: the color is its batch's, the CPU time its own.
     * Its name as of now. */
    word = atomic_load_explicit(&w->stall.word, memory_order_relaxed);
    if (!same_run(wa->word, word))
        return;
    wa->warned = true;
    atomic_fetch_add_explicit(&w->stalls, 1, memory_order_relaxed);
    warn(mon, w, word & MELY__STALL_RUNNING, color, cpu_ms, wall_ms, now);
}

void mely__stall_thread(struct mely__stall_word *s, bool running)
{
    if (!running) {
        atomic_store_explicit(&s->cpu_ok, false, memory_order_relaxed);
        return;
    }
    /* Fails only where thread CPU clocks are not supported. */
    if (pthread_getcpuclockid(pthread_self(), &s->cpu_clock) == 0)
        atomic_store_explicit(&s->cpu_ok, true, memory_order_release);
}

/* The monitor's period: a quarter of the threshold, 1..50 ms. */
static uint64_t period_ns(const struct mely__rt *rt)
{
    uint64_t ms = rt->stall_ms / 4;
    ms = ms < 1 ? 1 : ms > 50 ? 50 : ms;
    return ms * 1000000u;
}

static void *monitor_main(void *arg)
{
    struct mely__stall_monitor *mon = arg;
    struct mely__rt *rt = mon->rt;
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    pthread_mutex_lock(&mon->mu);
    while (!mon->stop) {
        uint64_t t = (uint64_t)until.tv_nsec + period_ns(rt);
        until.tv_sec += (time_t)(t / 1000000000u);
        until.tv_nsec = (long)(t % 1000000000u);
        if (pthread_cond_timedwait(&mon->cv, &mon->mu, &until) != ETIMEDOUT)
            continue; /* stop, or a spurious wake-up: the loop tells */
        pthread_mutex_unlock(&mon->mu);
        uint64_t ns = mely__now_ns();
        for (unsigned i = 0; i < rt->nworkers; i++)
            check_worker(mon, &rt->workers[i], &mon->watch[i], ns);
        pthread_mutex_lock(&mon->mu);
    }
    pthread_mutex_unlock(&mon->mu);
    return NULL;
}

static int monitor_init(struct mely__stall_monitor *mon, struct mely__rt *rt)
{
    pthread_condattr_t ca;
    int err;

    *mon = (struct mely__stall_monitor){.rt = rt, .window_ns = mely__now_ns()};
    mon->watch = calloc(rt->nworkers, sizeof(*mon->watch));
    if (!mon->watch)
        return ENOMEM;
    if ((err = pthread_condattr_init(&ca)) != 0)
        return err;
    err = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!err)
        err = pthread_cond_init(&mon->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (err)
        return err;
    pthread_mutex_init(&mon->mu, NULL);
    err = pthread_create(&mon->thread, NULL, monitor_main, mon);
    if (err) {
        pthread_cond_destroy(&mon->cv);
        pthread_mutex_destroy(&mon->mu);
    }
    return err;
}

void mely__stall_start(struct mely__rt *rt)
{
    rt->stall_mon = NULL;
    if (rt->stall_ms == 0)
        return;
    struct mely__stall_monitor *mon = malloc(sizeof(*mon));
    int err = mon ? monitor_init(mon, rt) : ENOMEM;
    if (err) {
        mely__log(MELY_LOG_WARN, "stall monitor not started (error %d): no stall warnings", err);
        if (mon)
            free(mon->watch);
        free(mon);
        return;
    }
    rt->stall_mon = mon;
}

void mely__stall_stop(struct mely__rt *rt)
{
    struct mely__stall_monitor *mon = rt->stall_mon;

    if (!mon)
        return;
    pthread_mutex_lock(&mon->mu);
    mon->stop = true;
    pthread_cond_signal(&mon->cv);
    pthread_mutex_unlock(&mon->mu);
    pthread_join(mon->thread, NULL);
    pthread_cond_destroy(&mon->cv);
    pthread_mutex_destroy(&mon->mu);
    free(mon->watch);
    free(mon);
    rt->stall_mon = NULL;
}
