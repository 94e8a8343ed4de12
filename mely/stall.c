/*
 * stall.c: the stall monitor (stall.h). One thread per mely_run(): it wakes
 * every MELY_STALL_MS/4 (1..50 ms), reads each worker's stall word, and warns
 * once about a handler that has run longer than MELY_STALL_MS.
 *
 * The worker reads no clock (stall.h): the monitor dates a run by the first
 * tick that sees its sequence number, so it only ever underestimates how
 * long a handler has run, and a warning is never early.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mely/cycles.h"
#include "mely/log.h"
#include "mely/runtime.h"

/* Lines per second at most; stalls beyond are counted, and the next line
 * says how many went unsaid. */
#define STALL_LINES_PER_S 10

/* What the monitor remembers of one worker. */
struct watch {
    uint64_t word;                /* the word of the run seen last, or 0 */
    uint64_t seen_ns;             /* the tick that first saw the run */
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
    /* A function pointer to void *: dladdr's interface, POSIX allows it. */
    if (!dladdr(fn, &info)) {
        snprintf(buf, len, "%p", fn);
        return buf;
    }
    if (info.dli_sname && info.dli_saddr == fn)
        return info.dli_sname;
    /* A static function has no symbol: its object and offset, which
     * addr2line turns into a name. */
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

static void warn(struct mely__stall_monitor *mon, const struct mely__worker *w, uint64_t h,
                 int color, uint64_t ms, uint64_t ns)
{
    char buf[256], unsaid[64] = "";

    if (!may_say(mon, ns)) {
        mon->unsaid++;
        return;
    }
    mon->lines++;
    if (mon->unsaid)
        snprintf(unsaid, sizeof(unsaid), "; %u earlier stalls unsaid (rate limit)", mon->unsaid);
    mely__log(MELY_LOG_WARN,
              "stall: worker %u, color %d: handler %s has run for %" PRIu64
              " ms so far (MELY_STALL_MS=%u)%s",
              w->index, color, word_name(h, buf, sizeof(buf)), ms, mon->rt->stall_ms,
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
    uint64_t ms = (ns - wa->seen_ns) / 1000000u;
    if (ms < mon->rt->stall_ms)
        return;
    int color = atomic_load_explicit(&w->stall.color, memory_order_relaxed);
    /* The same run still: the color is its batch's. Its name as of now. */
    word = atomic_load_explicit(&w->stall.word, memory_order_relaxed);
    if (!same_run(wa->word, word))
        return;
    wa->warned = true;
    atomic_fetch_add_explicit(&w->stalls, 1, memory_order_relaxed);
    warn(mon, w, word & MELY__STALL_RUNNING, color, ms, ns);
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
