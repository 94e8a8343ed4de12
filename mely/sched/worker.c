/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the per-core event loop (the paper's section 4.1).
 *
 * A worker takes the first color-queue of its core-queue (the highest priority,
 * oldest at that level) and runs a batch of its events back to back: up to
 * `batch` of them (the paper's threshold, 10 by default, so that no color
 * starves the others). The legacy engine has a loop of its own (legacy.c).
 *
 * To run a batch the worker detaches all the color's pending events in O(1)
 * under its lock (into w->run), runs up to `batch` of them without the lock,
 * then, under the lock again, puts the rest back in front of whatever was
 * posted meanwhile: O(1) lock holds whatever the queue length, and the event
 * lines are walked outside the lock, so remote producers are not held up. To
 * other threads the detached events are simply already dequeued. The one poster
 * that could tell is a handler of the batch posting at the head of its own
 * color: the enqueue (enqueue.h) puts that event at the head of w->run, so it
 * runs next, as cpucb promises. A stop request ends the batch after the running handler.
 *
 * While its batch runs, the color-queue is the worker's run_cq (a steal must
 * never take it) and stays linked; afterwards an empty one is unlinked and a non-empty
 * one moves behind the other color-queues of its priority level (so a color
 * whose producer keeps it non-empty still yields). Priorities are enforced
 * between batches, and so are I/O and timers (io/poller.c). With nothing to
 * run the worker goes idle (idle.c).
 *
 * Who may call: each function here runs on the worker's own thread, except
 * mely__workers_run(), which mely_run() calls on the thread that becomes worker 0.
 */
#include <pthread.h>
#include <sched.h>

#include "mely/remote/colormap.h"
#include "mely/steal/cost.h"
#include "mely/queue/cycles.h"
#include "mely/remote/deliver.h"
#include "mely/remote/enqueue.h"
#include "mely/sched/idle.h"
#include "mely/io/poller.h"
#include "mely/core/park.h"
#include "mely/runtime.h"
#include "mely/observe/stall.h"
#include "mely/steal/steal.h"
#include "mely/observe/trace.h"

/* Under w->lock: detaches cq's events into w->run. */
static void take_batch(struct mely__worker *w, struct mely__colorq *cq)
{
    mely__colorq_move_all(&w->run, cq);
    w->run_cq = cq;
    w->quiet_seq++; /* odd: holding a batch (quiet.h) */
    mely__add_pending(w, -(int)w->run.count);
    mely__stealq_refile(w, cq);
}

/* Under w->lock: the batch is over; puts back what is left and requeues cq. */
static void end_batch(struct mely__worker *w, struct mely__colorq *cq)
{
    unsigned old_prio = cq->prio;

    mely__add_pending(w, (int)w->run.count);
    mely__colorq_prepend(cq, &w->run);
    w->run_cq = NULL;
    w->quiet_seq++;
    if (w->batch_end)
        mely__turnend_hold(w, cq); /* work for the end of the turn */
    mely__stealq_refile(w, cq);
    if (mely__colorq_empty(cq)) {
        mely__coreq_remove(&w->coreq, cq);
        cq->pshift = 0; /* its penalty: of the events queued from now on */
    } else {
        if (cq->prio != old_prio)
            mely__coreq_reprioritize(&w->coreq, cq, old_prio);
        mely__coreq_rotate(&w->coreq, cq);
    }
}

/* Runs ev's handler when its run is traced or its cost may be measured:
 * out of the plain loop, which then pays one branch per handler for both. */
static void run_observed(struct mely__worker *w, struct mely__trace *trace,
                         const struct mely__event *ev, uint32_t color)
{
    struct mely__rt *rt = w->rt;
    bool measure = rt->cost.measure && mely__cost_measures(rt, ev->desc, &w->sample_rng);

    if (trace) {
        uint64_t took = mely__trace_run(trace, &w->stall, ev, color);
        if (measure)
            mely__cost_record(rt, mely__cost_key(ev->desc, ev->fn), took);
    } else if (measure) {
        /* Unfenced: the fences would cost more than most handlers (~80
         * cycles here); a few cycles of skew do not matter to an average
         * compared with the cost of a steal. */
        uint64_t start = mely__cycles();
        ev->fn(ev->arg);
        mely__cost_record(rt, mely__cost_key(ev->desc, ev->fn), mely__cycles() - start);
    } else {
        ev->fn(ev->arg);
    }
}

/* Runs up to `batch` detached events of cq, without the lock. Posts a handler
 * staged for other workers leave before the next handler starts. */
static void run_detached(struct mely__worker *w, struct mely__colorq *cq)
{
    struct mely__rt *rt = w->rt;
    const bool observed = w->observed;
    unsigned ran = 0;

    mely__current_color = (int)cq->color;
    uint64_t run = mely__stall_batch(&w->stall, (int)cq->color);
    while (ran < rt->batch && !mely__colorq_empty(&w->run) && !mely__stopping(rt)) {
        struct mely__event *ev = mely__colorq_pop(&w->run);
        /* The next handler's argument was most often written on another
         * core (a legacy callback object, a request): start fetching it
         * while this one runs. */
        if (w->run.head)
            __builtin_prefetch(w->run.head->arg);
        mely__stall_begin(&w->stall, ev, &run);
        if (observed)
            run_observed(w, w->trace, ev, cq->color);
        else
            ev->fn(ev->arg);
        if (mely__outbox_pending(&w->outbox))
            mely__outbox_flush(w);
        mely__evcache_free(rt, &w->evcache, ev);
        ran++;
    }
    if (w->batch_end) /* the color has nothing more queued: at once (turnend.h) */
        mely__turnend_batch_over(w, cq);
    if (w->batch_done) { /* before the color may go elsewhere: turnend.h */
        mely__turnend_batch_done(w);
        if (mely__outbox_pending(&w->outbox))
            mely__outbox_flush(w);
    }
    mely__stall_end(&w->stall, run);
    mely__current_color = -1;
    mely__count(&w->ctr.events_run, ran);
}

/* One lock hold per batch: ending a batch, draining the inbox (deliver.c)
 * and taking the next batch share it. */
static void loop(struct mely__worker *w)
{
    struct mely__colorq *cq = NULL;

    mely__spin_lock(&w->lock, &w->ctr);
    while (!mely__stopping(w->rt)) {
        if (cq)
            end_batch(w, cq);
        unsigned wake = mely__deliver(w, w);
        cq = mely__coreq_first(&w->coreq);
        if (cq)
            take_batch(w, cq);
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, w, wake);
        mely__trace_follow(w);
        if (cq) {
            run_detached(w, cq);
            mely__poller_tick(w);
        } else {
            uint64_t idle = mely__cycles();
            mely__idle(w);
            mely__count(&w->ctr.idle_cycles, mely__cycles() - idle);
        }
        mely__spin_lock(&w->lock, &w->ctr);
    }
    if (cq)
        end_batch(w, cq);
    mely__spin_unlock(&w->lock);
    mely__turnend_run(w); /* a stop ends the turn too */
}

static bool ready(const struct mely__worker *w)
{
    return mely__deliver_ready(w);
}

static bool in_flight(const struct mely__worker *w)
{
    return mely__inbox_reserved(w->inbox);
}

static unsigned take(struct mely__worker *w, struct mely__worker *self)
{
    return mely__deliver(w, self);
}

const struct mely__engine mely__engine_mely = {
    .name = "mely",
    .holds = true,
    .colorqs = true,
    .init = mely__deliver_init,
    .fini = mely__deliver_fini,
    .loop = loop,
    .post_now = mely__deliver_post_now,
    .flush = mely__deliver_flush,
    .post_foreign = mely__deliver_foreign,
    .ready = ready,
    .in_flight = in_flight,
    .take = take,
    .steal_from = mely__steal_colorq,
    .color_move = mely__deliver_move,
    .pending = mely__deliver_pending,
};

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
    mely__stall_thread(&w->stall, true); /* the stall monitor's CPU clock */
    w->rt->engine->loop(w);
    mely__stall_thread(&w->stall, false);
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
