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
 * It plugs in as mely__engine_legacy (engine.h). Who may call: each function
 * here with the lock(s) it names held, except legacy_loop (the worker's own
 * thread) and legacy_pending (shutdown).
 */
#include "mely/cost.h"
#include "mely/enqueue.h"
#include "mely/idle.h"
#include "mely/io/poller.h"
#include "mely/park.h"
#include "mely/steal.h"
#include "mely/trace.h"

#define NOT_RUNNING UINT32_MAX

static void list_push(struct mely__legacyq *q, struct mely__event *ev)
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

static unsigned legacy_enqueue(struct mely__worker *w, struct mely__worker *self,
                               struct mely__colorq *cq, struct mely__event *ev)
{
    (void)self;
    (void)cq;
    struct mely__rt *rt = w->rt;
    unsigned wake = 0;

    list_push(&w->legacy, ev);
    if (rt->legacy_pending[ev->color]++ == 0 && ++w->legacy.ncolors >= 2 && rt->steal)
        wake |= MELY__WAKE_THIEF;
    mely__add_pending(w, 1);
    if (mely__mark_woken(w))
        wake |= MELY__WAKE_OWNER;
    return wake;
}

/* Under w->lock: unlinks the head event and books it as running. */
static struct mely__event *pop(struct mely__worker *w)
{
    struct mely__event *ev = w->legacy.head;

    w->legacy.head = ev->next;
    if (!w->legacy.head)
        w->legacy.tail = NULL;
    if (--w->rt->legacy_pending[ev->color] == 0)
        w->legacy.ncolors--;
    mely__add_pending(w, -1);
    w->legacy.running = ev->color;
    w->quiet_seq++; /* odd: holding an event (quiet.h) */
    return ev;
}

static void legacy_loop(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;

    mely__spin_lock(&w->lock, &w->ctr); /* `running` is NOT_RUNNING here: init and every
                                           event's end set it so, under the lock */
    while (!mely__stopping(rt)) {
        mely__trace_follow(w);
        if (!w->legacy.head) {
            mely__spin_unlock(&w->lock);
            uint64_t idle = mely__cycles();
            mely__idle(w);
            mely__count(&w->ctr.idle_cycles, mely__cycles() - idle);
            mely__spin_lock(&w->lock, &w->ctr);
            continue;
        }
        struct mely__event *ev = pop(w);
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
        mely__poller_tick(w, &w->io, &w->timers, w->turn_end);
        mely__spin_lock(&w->lock, &w->ctr);
        w->legacy.running = NOT_RUNNING;
        w->quiet_seq++;
    }
    mely__spin_unlock(&w->lock);
}

/* libasync-smp's choose_color_to_steal: scans from the head. */
static uint32_t choose_color(const struct mely__worker *victim)
{
    const uint32_t *pending = victim->rt->legacy_pending;
    uint64_t total = atomic_load_explicit(&victim->nevents, memory_order_relaxed);

    for (struct mely__event *ev = victim->legacy.head; ev; ev = ev->next) /* bounded: the list */
        if (ev->color != victim->legacy.running && ev->color < MELY_COLORS &&
            2 * (uint64_t)pending[ev->color] < total)
            return ev->color;
    return NOT_RUNNING;
}

/* construct_event_set: unlinks color's events, in order, into *chain. */
static uint32_t take_color(struct mely__worker *victim, uint32_t color, struct mely__event **chain,
                           struct mely__event **chain_tail, uint64_t *units)
{
    uint32_t want = victim->rt->legacy_pending[color], got = 0;
    struct mely__event **link = &victim->legacy.head, *prev = NULL;

    *chain = *chain_tail = NULL;
    while (*link && got < want) { /* bounded: the list */
        struct mely__event *ev = *link;
        if (ev->color != color) {
            prev = ev;
            link = &ev->next;
            continue;
        }
        *link = ev->next;
        if (victim->legacy.tail == ev)
            victim->legacy.tail = prev;
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
    if (victim->legacy.ncolors < 2)
        return false;
    uint32_t color = choose_color(victim);
    if (color == NOT_RUNNING)
        return false;

    struct mely__event *chain, *chain_tail;
    uint64_t units = 0;
    uint32_t n = take_color(victim, color, &chain, &chain_tail, &units);

    victim->legacy.ncolors--;
    mely__add_pending(victim, -(int)n);
    atomic_store_explicit(&thief->rt->owner[color], (uint8_t)thief->index, memory_order_release);
    if (thief->legacy.tail)
        thief->legacy.tail->next = chain;
    else
        thief->legacy.head = chain;
    thief->legacy.tail = chain_tail;
    thief->legacy.ncolors++;
    mely__add_pending(thief, (int)n);
    mely__steal_took(thief, victim, color, n, units);
    return true;
}

static bool legacy_color_busy(const struct mely__worker *owner, mely_color_t color)
{
    return owner->rt->legacy_pending[color] != 0 || owner->legacy.running == color;
}

static size_t legacy_pending(const struct mely__rt *rt)
{
    size_t n = 0;
    for (unsigned i = 0; i < rt->nworkers; i++)
        for (struct mely__event *ev = rt->workers[i].legacy.head; ev; ev = ev->next)
            n++;
    return n;
}

const struct mely__engine mely__engine_legacy = {
    .name = "legacy",
    .inboxes = false,
    .loop = legacy_loop,
    .steal_from = legacy_steal,
    .enqueue = legacy_enqueue,
    .color_busy = legacy_color_busy,
    .pending = legacy_pending,
};
