/* outbox.c: staging and flushing remote posts (see outbox.h; the inboxes and
 * the move protocol are in deliver.c). */
#include <sched.h>

#include "mely/remote/colormap.h"
#include "mely/queue/cycles.h"
#include "mely/remote/enqueue.h"
#include "mely/remote/deliver.h"
#include "mely/core/park.h"

/* Queues a chain of events in order, each under the lock of its color's
 * owner of the moment (one lock hold per run of events for one worker),
 * after draining that owner's inbox, which may hold earlier posts of the
 * same colors. The legacy engine's flush (libasync-smp's way), and the Mely
 * engine's for what a full inbox did not take. */
static void flush_locked(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__rt *rt = self->rt;
    struct mely__worker *w = NULL;
    unsigned wake = 0;

    while (ev) { /* bounded: the staged events */
        struct mely__event *next = ev->next;
        if (!w || mely__owner(rt, ev->color) != w->index) {
            if (w) {
                mely__spin_unlock(&w->lock);
                mely__enqueue_wake(w, self, wake);
            }
            w = mely__lock_owner(rt, ev->color, &self->ctr);
            wake = rt->engine->inboxes ? mely__deliver_all(w, self) : 0;
        }
        wake |= mely__enqueue(w, self, rt->engine->inboxes ? mely__cq_of(rt, ev->color) : NULL, ev);
        ev = next;
    }
    if (w) {
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, self, wake);
    }
}

/* Copies the run of k events from *ev into o's inbox, as many as fit, and
 * frees them; advances *ev past those. Returns false if some did not fit. */
static bool put_run(struct mely__worker *self, unsigned o, struct mely__event **ev, uint32_t k)
{
    struct mely__inbox *q = self->rt->workers[o].inbox;
    uint32_t pos, n = mely__inbox_reserve(q, k, &pos, &self->head_seen[o]);

    for (uint32_t i = 0; i < n; i++) { /* bounded: the run */
        struct mely__event *next = (*ev)->next;
        mely__inbox_put(q, pos + i, *ev);
        mely__evcache_free(self->rt, &self->evcache, *ev);
        *ev = next;
    }
    return n == k;
}

/* The Mely engine: steps 1-3 of the move protocol (deliver.c). Puts each run
 * of consecutive events for one owner in that owner's inbox, the owner read
 * once per event, in post order, up to the first event that finds its inbox
 * full; wakes the owners after step 3, so that a mover never waits for a
 * system call. Returns the first event left (NULL: all went). */
static struct mely__event *flush_inboxes(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__rt *rt = self->rt;
    uint64_t touched[MELY_MAX_WORKERS / 64] = {0};

    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_seq_cst);
    unsigned o = ev ? mely__owner_sc(rt, ev->color) : 0;
    while (ev) { /* bounded: the staged events */
        struct mely__event *last = ev;
        unsigned next_o = o;
        uint32_t k = 1;
        while (last->next) { /* bounded: the staged events */
            next_o = mely__owner_sc(rt, last->next->color);
            if (next_o != o)
                break;
            last = last->next;
            k++;
        }
        touched[o / 64] |= 1ull << (o % 64);
        if (!put_run(self, o, &ev, k))
            break;
        o = next_o;
    }
    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_release);
    touched[self->index / 64] &= ~(1ull << (self->index % 64));
    for (unsigned i = 0; i < MELY_MAX_WORKERS / 64; i++)
        for (uint64_t b = touched[i]; b; b &= b - 1) /* bounded: 64 bits */
            mely__wake_if_parked(&rt->workers[i * 64 + (unsigned)__builtin_ctzll(b)], self);
    return ev;
}

/* A full inbox: how long a flush waits for its owner to drain, in tries of
 * ~32 pauses (a yield every 8th, for workers sharing a CPU), before it queues
 * the rest itself (about 10-50 us). */
enum { FULL_TRIES = 128 };

static void pause_a_little(unsigned tries)
{
    if (tries % 8 == 7) {
        sched_yield();
        return;
    }
    for (int i = 0; i < 32; i++)
        mely__cpu_relax();
}

void mely__outbox_flush(struct mely__worker *self)
{
    struct mely__outbox *ob = &self->outbox;
    struct mely__event *chain = ob->head;

    ob->head = ob->tail = NULL;
    ob->n = 0;
    if (!self->rt->engine->inboxes) {
        flush_locked(self, chain);
        return;
    }
    /* What a full inbox does not take waits a little for its owner to drain
     * it (the producer then runs at the consumer's pace, and the consumer's
     * lock and queues stay its own), then goes under the owners' locks: a
     * staged event must never stay behind after the flush, or its poster's
     * color, stolen, could post later events from another worker ahead of
     * it; and a stopped or busy owner must not hold the poster up for long. */
    chain = flush_inboxes(self, chain);
    for (unsigned tries = 0; chain && tries < FULL_TRIES && !mely__stopping(self->rt); tries++) {
        pause_a_little(tries);
        chain = flush_inboxes(self, chain);
    }
    flush_locked(self, chain);
}

void mely__outbox_stage(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__outbox *ob = &self->outbox;

    ev->next = NULL;
    if (ob->tail)
        ob->tail->next = ev;
    else
        ob->head = ev;
    ob->tail = ev;
    if (++ob->n >= MELY__OUTBOX_MAX)
        mely__outbox_flush(self);
}
