/*
 * engine.h: the queueing engine, an ops struct chosen at mely_init() (as the
 * steal policies are: stealops.h), so that the two engines share the post
 * path, the idle and wake-up code, the poller and the steal driver, and
 * differ only here:
 *  - mely__engine_mely: the Mely paper's color-queues chained into
 *    core-queues (worker.c), remote posts through the owner's inbox
 *    (deliver.c);
 *  - mely__engine_legacy: libasync-smp's one locked FIFO of events per worker
 *    (legacy.c), remote posts queued under the owner's lock; the comparison
 *    baseline.
 * The enqueue itself stays a direct, inlined call (enqueue.h): it is on
 * every post's path.
 */
#ifndef MELY_ENGINE_H
#define MELY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <mely/mely.h>

struct mely__colorq;
struct mely__event;
struct mely__rt;
struct mely__worker;
struct mely__steal_ops;

struct mely__engine {
    const char *name;
    /* Remote posts travel through the owner's inbox (else: its lock). */
    bool inboxes;
    /* Colors can be held to the end of a worker's turn (turnend.h): its
     * steals and moves leave a held color-queue alone. */
    bool holds;
    /* The worker's event loop, on its own thread, until a stop. */
    void (*loop)(struct mely__worker *w);
    /* Under both locks: one steal attempt from victim with the policy ops;
     * true if a color moved to thief. */
    bool (*steal_from)(struct mely__worker *thief, struct mely__worker *victim,
                       const struct mely__steal_ops *ops, unsigned *wake);
    /* Under w->lock, for rt->enqueue_special runtimes (enqueue.h): queues ev
     * (cq: its color-queue, NULL for the legacy engine); MELY__WAKE_* flags. */
    unsigned (*enqueue)(struct mely__worker *w, struct mely__worker *self,
                        struct mely__colorq *cq, struct mely__event *ev);
    /* Under owner's lock: whether `color` has pending events or is running. */
    bool (*color_busy)(const struct mely__worker *owner, mely_color_t color);
    /* Events still queued (shutdown: no worker runs). */
    size_t (*pending)(const struct mely__rt *rt);
};

extern const struct mely__engine mely__engine_mely;   /* worker.c */
extern const struct mely__engine mely__engine_legacy; /* legacy.c */

/* worker.c: starts a thread per worker but the first, runs worker 0 on the
 * calling thread (mely_run()'s; its CPU affinity is restored after), and
 * joins them once they stop. 0, or the negated pthread_create() error (the
 * workers already started are stopped and joined). */
int mely__workers_run(struct mely__rt *rt);

#endif
