/* SPDX-License-Identifier: MIT */
/*
 * legacy.c: libasync-smp's queueing, for side-by-side comparison (the Mely
 * paper, sections 2.1-2.2). Small on purpose, and separate: it shares the
 * color map, the post path up to the enqueue, the outbox, the idle/park code
 * and the steal driver's core set with the Mely engine, and differs where the
 * paper says libasync-smp does:
 *  - each worker has one FIFO list of events, whatever their colors (a color
 *    still lives on one worker: the color map);
 *  - the worker takes its lock for every event it runs, pops the head, runs
 *    it (its color is the worker's `running` color meanwhile);
 *  - a steal (under both locks) checks that the victim holds events of two
 *    colors, scans the list from its head for the first color that is not
 *    running and holds less than half of the victim's events, then scans the
 *    list again to unlink that color's events (stopping once it has them all:
 *    the per-color pending counts tell how many) and appends them to the
 *    thief's list: O(queue length) under the victim's lock, the cost the paper
 *    measured (28,329 cycles per steal on its unbalanced benchmark).
 * There are no priorities (events run in list order) and no batches. Head
 * posts (cpucb) go to the front of the list, so they run before the color's
 * other pending events. The invariants are the Mely engine's: one color never
 * runs on two workers at once (the running color is never stolen, and all its
 * events sit in one list), in post order (the stolen events keep their order
 * and later posts follow them to the thief).
 *
 * Remote posts: a worker stages its posts to other workers' colors, all of
 * them, and its flush queues them under each owner's lock
 * (mely__flush_locked_with); a thread that is not a worker locks the owner.
 * There are no inboxes, so nothing is ever in flight.
 *
 * It plugs in as mely__engine_legacy (engine.h), its state in
 * rt->engine_data (struct state). Who may call: each function here with the
 * lock(s) it names held, except legacy_loop (the worker's own thread),
 * legacy_pending (shutdown), legacy_init and legacy_fini (mely_init and
 * mely_shutdown).
 */
#include <stdalign.h>
#include <stdlib.h>

#include "mely/steal/cost.h"
#include "mely/remote/enqueue.h"
#include "mely/sched/idle.h"
#include "mely/io/poller.h"
#include "mely/core/park.h"
#include "mely/remote/postpath.h"
#include "mely/steal/steal.h"
#include "mely/observe/trace.h"

#define NOT_RUNNING UINT32_MAX

/* A worker's queue: libasync-smp's one FIFO of events, whatever their
 * colors. Under the worker's lock; a line of its own. */
struct legacyq {
    alignas(MELY__CACHELINE) struct mely__event *head, *tail;
    uint32_t ncolors; /* distinct colors with pending events here */
    uint32_t running; /* the color being run, or NOT_RUNNING */
};

struct state {
    uint32_t *pending;     /* per color (MELY_COLORS + nworkers), under its owner's lock */
    struct legacyq q[];    /* per worker */
};

static inline struct legacyq *queue_of(const struct mely__worker *w)
{
    return &((struct state *)w->rt->engine_data)->q[w->index];
}

static inline uint32_t *pending_of(const struct mely__rt *rt)
{
    return ((struct state *)rt->engine_data)->pending;
}

static void list_push(struct legacyq *q, struct mely__event *ev)
{
    if (!q->head) {
        ev->next = NULL;
        q->head = q->tail = ev;
    } else if (ev->head) {
        ev->next = q->head;
        q->head = ev;
    } else {
        ev->next = NULL;
        q->tail->next = ev;
        q->tail = ev;
    }
}

/* The engine's queue: nothing is ever in flight, and nothing to allocate. */
static inline __attribute__((always_inline)) int
legacy_queue(struct mely__worker *w, struct mely__worker *self, struct mely__event *ev,
             unsigned *wake)
{
    (void)self;
    struct mely__rt *rt = w->rt;
    struct legacyq *q = queue_of(w);

    list_push(q, ev);
    if (pending_of(rt)[ev->color]++ == 0 && ++q->ncolors >= 2 && rt->steal)
        *wake |= MELY__WAKE_THIEF;
    mely__add_pending(w, 1);
    if (mely__mark_woken(w))
        *wake |= MELY__WAKE_OWNER;
    return 0;
}

/* Under w->lock: unlinks the head event and books it as running. */
static struct mely__event *pop(struct mely__worker *w, struct legacyq *q)
{
    struct mely__event *ev = q->head;

    q->head = ev->next;
    if (!q->head)
        q->tail = NULL;
    if (--pending_of(w->rt)[ev->color] == 0)
        q->ncolors--;
    mely__add_pending(w, -1);
    q->running = ev->color;
    w->quiet_seq++; /* odd: holding an event (quiet.h) */
    return ev;
}

static void legacy_loop(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;
    struct legacyq *q = queue_of(w);

    mely__spin_lock(&w->lock, &w->ctr); /* `running` is NOT_RUNNING here: init and every
                                           event's end set it so, under the lock */
    while (!mely__stopping(rt)) {
        mely__trace_follow(w);
        if (!q->head) {
            mely__spin_unlock(&w->lock);
            uint64_t idle = mely__cycles();
            mely__idle(w);
            mely__count(&w->ctr.idle_cycles, mely__cycles() - idle);
            mely__spin_lock(&w->lock, &w->ctr);
            continue;
        }
        struct mely__event *ev = pop(w, q);
        mely__spin_unlock(&w->lock);
        mely__current_color = (int)ev->color;
        uint64_t run = mely__stall_batch(&w->stall, (int)ev->color);
        mely__stall_begin(&w->stall, ev, &run);
        if (w->trace)
            (void)mely__trace_run(w->trace, &w->stall, ev, ev->color);
        else
            ev->fn(ev->arg);
        if (w->batch_end) /* an event is the legacy engine's batch and turn */
            mely__turnend_run_batch(w);
        if (w->batch_done)
            mely__turnend_batch_done(w);
        mely__stall_end(&w->stall, run);
        mely__current_color = -1;
        if (mely__outbox_pending(&w->outbox))
            mely__outbox_flush(w);
        mely__evcache_free(rt, &w->evcache, ev);
        mely__count(&w->ctr.events_run, 1);
        mely__poller_tick(w);
        mely__spin_lock(&w->lock, &w->ctr);
        q->running = NOT_RUNNING;
        w->quiet_seq++;
    }
    mely__spin_unlock(&w->lock);
}

/* libasync-smp's choose_color_to_steal: scans from the head. */
static uint32_t choose_color(const struct mely__worker *victim, const struct legacyq *q)
{
    const uint32_t *pending = pending_of(victim->rt);
    uint64_t total = atomic_load_explicit(&victim->nevents, memory_order_relaxed);

    for (struct mely__event *ev = q->head; ev; ev = ev->next) /* bounded: the list */
        if (ev->color != q->running && ev->color < MELY_COLORS &&
            2 * (uint64_t)pending[ev->color] < total)
            return ev->color;
    return NOT_RUNNING;
}

/* construct_event_set: unlinks color's events, in order, into *chain. */
static uint32_t take_color(struct mely__worker *victim, struct legacyq *q, uint32_t color,
                           struct mely__event **chain, struct mely__event **chain_tail,
                           uint64_t *units)
{
    uint32_t want = pending_of(victim->rt)[color], got = 0;
    struct mely__event **link = &q->head, *prev = NULL;

    *chain = *chain_tail = NULL;
    while (*link && got < want) { /* bounded: the list */
        struct mely__event *ev = *link;
        if (ev->color != color) {
            prev = ev;
            link = &ev->next;
            continue;
        }
        *link = ev->next;
        if (q->tail == ev)
            q->tail = prev;
        ev->next = NULL;
        if (*chain_tail)
            (*chain_tail)->next = ev;
        else
            *chain = ev;
        *chain_tail = ev;
        *units += ev->units;
        got++;
    }
    return got;
}

static bool legacy_steal(struct mely__worker *thief, struct mely__worker *victim,
                         const struct mely__steal_ops *ops, unsigned *wake)
{
    (void)ops;
    (void)wake;
    struct legacyq *vq = queue_of(victim), *tq = queue_of(thief);
    if (vq->ncolors < 2)
        return false;
    uint32_t color = choose_color(victim, vq);
    if (color == NOT_RUNNING)
        return false;

    struct mely__event *chain, *chain_tail;
    uint64_t units = 0;
    uint32_t n = take_color(victim, vq, color, &chain, &chain_tail, &units);

    vq->ncolors--;
    mely__add_pending(victim, -(int)n);
    atomic_store_explicit(&thief->rt->owner[color], (uint8_t)thief->index, memory_order_release);
    if (tq->tail)
        tq->tail->next = chain;
    else
        tq->head = chain;
    tq->tail = chain_tail;
    tq->ncolors++;
    mely__add_pending(thief, (int)n);
    mely__steal_took(thief, victim, color, n, units);
    return true;
}

/* Under both locks: the color has no event anywhere (none pending, none
 * running), so only the map moves. */
static int legacy_color_move(struct mely__worker *from, struct mely__worker *to,
                             mely_color_t color, struct mely__worker *self, unsigned *wake)
{
    (void)self;
    (void)wake;
    if (pending_of(from->rt)[color] != 0 || queue_of(from)->running == color)
        return MELY_EBUSY;
    atomic_store_explicit(&from->rt->owner[color], (uint8_t)to->index, memory_order_release);
    return 0;
}

static size_t legacy_pending(const struct mely__rt *rt)
{
    size_t n = 0;
    for (unsigned i = 0; i < rt->nworkers; i++)
        for (struct mely__event *ev = queue_of(&rt->workers[i])->head; ev; ev = ev->next)
            n++;
    return n;
}

static int legacy_post_now(struct mely__rt *rt, struct mely__worker *self,
                           struct mely__event *ev)
{
    return mely__post_now_with(rt, self, ev, legacy_queue);
}

/* libasync-smp's flush: each staged event under its owner's lock. */
static void legacy_flush(struct mely__worker *self, struct mely__event *chain)
{
    mely__flush_locked_with(self, chain, legacy_queue);
}

static bool legacy_post_foreign(struct mely__rt *rt, const struct mely__event *ev)
{
    (void)rt;
    (void)ev;
    return false;
}

/* Nothing is ever in flight: posts are queued when they are made. */
static bool legacy_nothing(const struct mely__worker *w)
{
    (void)w;
    return false;
}

static unsigned legacy_take(struct mely__worker *w, struct mely__worker *self)
{
    (void)w;
    (void)self;
    return 0;
}

static int legacy_init(struct mely__rt *rt)
{
    struct state *st = aligned_alloc(MELY__CACHELINE, sizeof(struct state) +
                                                          rt->nworkers * sizeof(struct legacyq));

    rt->engine_data = st;
    if (!st)
        return MELY_ENOMEM;
    st->pending = calloc(MELY_COLORS + rt->nworkers, sizeof(*st->pending));
    for (unsigned i = 0; i < rt->nworkers; i++)
        st->q[i] = (struct legacyq){.running = NOT_RUNNING};
    return st->pending ? 0 : MELY_ENOMEM;
}

static void legacy_fini(struct mely__rt *rt)
{
    struct state *st = rt->engine_data;

    if (st)
        free(st->pending);
    free(st);
}

const struct mely__engine mely__engine_legacy = {
    .name = "legacy",
    /* every remote post is staged: the flush queues under the owners'
     * locks, which cannot fail */
    .stages_all = true,
    .init = legacy_init,
    .fini = legacy_fini,
    .loop = legacy_loop,
    .post_now = legacy_post_now,
    .flush = legacy_flush,
    .post_foreign = legacy_post_foreign,
    .ready = legacy_nothing,
    .in_flight = legacy_nothing,
    .take = legacy_take,
    .steal_from = legacy_steal,
    .color_move = legacy_color_move,
    .pending = legacy_pending,
};
