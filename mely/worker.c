/*
 * worker.c: the per-core event loop (the paper's section 4.1).
 *
 * A worker takes the first color-queue of its core-queue (the highest priority,
 * oldest at that level) and runs its events back to back, one per lock hold,
 * until one of these ends the batch: `batch` events ran (the paper's threshold,
 * 10 by default, so no color starves the others), the color-queue is empty,
 * another color-queue now comes first (a higher priority arrived), or a stop
 * was requested. While it runs, the color-queue is marked running (a steal must
 * never take it) and stays linked; afterwards an empty one is unlinked and a
 * full batch moves it behind its priority level's other color-queues.
 * With nothing to run the worker goes idle (park.c).
 *
 * Who may call: each function here runs on the worker's own thread, except
 * mely__workers_run(), which mely_run() calls on the thread that becomes worker 0.
 */
#include <pthread.h>
#include <sched.h>

#include "mely/runtime.h"

_Thread_local struct mely__worker *mely__self __attribute__((tls_model("initial-exec")));
_Thread_local int mely__current_color __attribute__((tls_model("initial-exec"))) = -1;

static void set_pending(struct mely__worker *w, int delta)
{
    atomic_store_explicit(&w->nevents,
                          atomic_load_explicit(&w->nevents, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* Pops cq's head event under w->lock and keeps cq's core-queue place right. */
static struct mely__event *take(struct mely__worker *w, struct mely__colorq *cq)
{
    unsigned old_prio = cq->prio;
    struct mely__event *ev = mely__colorq_pop(cq);

    if (cq->prio != old_prio)
        mely__coreq_reprioritize(&w->coreq, cq, old_prio);
    set_pending(w, -1);
    return ev;
}

/* Runs one batch of cq. Called with w->lock held; returns with it released. */
static void run_batch(struct mely__worker *w, struct mely__colorq *cq)
{
    struct mely__rt *rt = w->rt;
    unsigned n = 0;

    cq->running = true;
    for (;;) {
        struct mely__event *ev = take(w, cq);
        mely__spin_unlock(&w->lock);

        mely__current_color = (int)cq->color;
        ev->fn(ev->arg);
        mely__current_color = -1;
        mely__evcache_free(rt, &w->evcache, ev);
        mely__count(&w->ctr.events_run, 1);
        n++;

        mely__spin_lock(&w->lock, &w->ctr);
        if (n >= rt->batch || mely__colorq_empty(cq) || mely__coreq_first(&w->coreq) != cq ||
            mely__stopping(rt))
            break;
    }
    cq->running = false;
    if (mely__colorq_empty(cq))
        mely__coreq_remove(&w->coreq, cq);
    else if (n >= rt->batch)
        mely__coreq_rotate(&w->coreq, cq);
    mely__spin_unlock(&w->lock);
}

static void loop(struct mely__worker *w)
{
    while (!mely__stopping(w->rt)) {
        mely__spin_lock(&w->lock, &w->ctr);
        struct mely__colorq *cq = mely__coreq_first(&w->coreq);
        if (cq) {
            run_batch(w, cq);
        } else {
            mely__spin_unlock(&w->lock);
            mely__idle(w);
        }
    }
}

static void pin(struct mely__worker *w)
{
    if (w->cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    /* A refusal (e.g. a CPU taken offline since init) leaves the thread unpinned:
     * slower, still correct. */
    (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *worker_main(void *arg)
{
    struct mely__worker *w = arg;

    pin(w);
    mely__self = w;
    loop(w);
    mely__self = NULL;
    return NULL;
}

int mely__workers_run(struct mely__rt *rt)
{
    struct mely__worker *w0 = &rt->workers[0];
    unsigned started = 1;
    int err = 0;

    for (; started < rt->nworkers; started++) {
        struct mely__worker *w = &rt->workers[started];
        err = pthread_create(&w->thread, NULL, worker_main, w);
        if (err)
            break;
    }

    cpu_set_t saved;
    bool restore = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    if (err) {
        atomic_store(&rt->stopping, true);
        mely__wake_all(rt);
    } else {
        worker_main(w0);
    }
    for (unsigned i = 1; i < started; i++)
        pthread_join(rt->workers[i].thread, NULL);
    if (restore && w0->cpu >= 0)
        (void)pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    return -err;
}
