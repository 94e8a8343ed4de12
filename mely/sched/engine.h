/* SPDX-License-Identifier: MIT */
/*
 * engine.h: the queueing engine, an ops struct chosen at mely_init() (as the
 * steal policies are: stealops.h), so that the two engines share the post
 * path, the idle and wake-up code, the poller and the steal driver, and
 * differ only through these members:
 *  - mely__engine_mely: the Mely paper's color-queues chained into
 *    core-queues (worker.c), remote posts through the owner's inbox
 *    (deliver.c);
 *  - mely__engine_legacy: libasync-smp's one locked FIFO of events per worker
 *    (legacy.c), remote posts queued under the owner's lock; the comparison
 *    baseline.
 * Shared code calls the members and never asks which engine runs. On the
 * hottest path, a post, one member is called: `post_now` for a local post
 * (each engine compiles the locked part of the path, postpath.h, with its
 * own queueing inlined); a remote one reads `stages_all`. Engines are found by
 * name (engine.c).
 */
#ifndef MELY_ENGINE_H
#define MELY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <mely/mely.h>

struct mely__event;
struct mely__rt;
struct mely__worker;
struct mely__steal_ops;

struct mely__engine {
    const char *name;
    /* Colors can be held to the end of a worker's turn (turnend.h): its
     * steals and moves leave a held color-queue alone. */
    bool holds;
    /* The engine keeps color-queues, so the steal policies that read them
     * (a stealing-queue, measured costs) can run on it (config.c). */
    bool colorqs;
    /* Which of a worker's posts to a color another worker owns may wait in
     * its outbox (outbox.h), whose flush must not fail once the post
     * returned 0: all of them (true), or only those to a color whose
     * color-queue exists (false: the flush queues without allocating); the
     * others go by `post_now`. A flag, not a member function: every remote
     * post reads it, and a call cost 8 instructions of a ~90-instruction
     * post (callgrind). */
    bool stages_all;

    /* Engine-private state, built at mely_init() once the workers exist
     * (0 or MELY_ENOMEM), and freed at shutdown; `fini` also runs after an
     * `init` that failed part way, or never ran, and frees what exists. */
    int (*init)(struct mely__rt *rt);
    void (*fini)(struct mely__rt *rt);

    /* The worker's event loop, on its own thread, until a stop. */
    void (*loop)(struct mely__worker *w);

    /* Posts (post.c has the path).
     * `post_now`: queues ev (its fields set; from the cache of `self`, the
     * posting worker, or from the depot if self is NULL) under its owner's
     * lock, behind every post in flight to the owner: mely__post_now_with()
     * (postpath.h) with the engine's queueing. 0, or MELY_ENOMEM (no memory
     * for the color's queue: ev freed).
     * `flush`: queues `chain`, the outbox's staged events in post order,
     * where each color lives now, keeping that order; the owner's thread.
     * `post_foreign`: a thread that is not a worker publishes ev (a copy it
     * keeps) without an event of its own; false if the engine cannot (the
     * caller then takes an event and uses `post_now`). */
    int (*post_now)(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev);
    void (*flush)(struct mely__worker *self, struct mely__event *chain);
    bool (*post_foreign)(struct mely__rt *rt, const struct mely__event *ev);

    /* Posts in flight to w: published by their posters, not yet in w's
     * queues. `ready`: one waits, ready to take (a hint; any thread).
     * `in_flight`: one was published or is being written, read sequentially
     * consistent (the parking worker's last look, park.c; quiet.c).
     * `take`: under w->lock, queues the ready ones; MELY__WAKE_* flags. */
    bool (*ready)(const struct mely__worker *w);
    bool (*in_flight)(const struct mely__worker *w);
    unsigned (*take)(struct mely__worker *w, struct mely__worker *self);

    /* Under both locks: one steal attempt from victim with the policy ops;
     * true if a color moved to thief. */
    bool (*steal_from)(struct mely__worker *thief, struct mely__worker *victim,
                       const struct mely__steal_ops *ops, unsigned *wake);
    /* Under both locks, with `from` the owner of `color` (mely_color_move):
     * makes `to` its owner with every event posted to it. The events moved
     * (>= 0), MELY_EBUSY (the color has events pending or is running:
     * nothing changes) or MELY_ENOMEM (nothing changes). ORs MELY__WAKE_*
     * flags for `from` into *wake. */
    int (*color_move)(struct mely__worker *from, struct mely__worker *to, mely_color_t color,
                      struct mely__worker *self, unsigned *wake);
    /* Events still queued (shutdown: no worker runs). */
    size_t (*pending)(const struct mely__rt *rt);
};

extern const struct mely__engine mely__engine_mely;   /* worker.c */
extern const struct mely__engine mely__engine_legacy; /* legacy.c */

/* engine.c: the engine called `name` ("mely", "legacy"; NULL: the default,
 * "mely"), or NULL. */
const struct mely__engine *mely__engine_find(const char *name);

/* The engines' names, for messages: "mely or legacy". */
extern const char mely__engine_names[];

/* worker.c: starts a thread per worker but the first, runs worker 0 on the
 * calling thread (mely_run()'s; its CPU affinity is restored after), and
 * joins them once they stop. 0, or the negated pthread_create() error (the
 * workers already started are stopped and joined). */
int mely__workers_run(struct mely__rt *rt);

#endif
