/* outbox.c: staging and flushing remote posts (see outbox.h; the inboxes and
 * the move protocol are in deliver.c). */
#include "mely/colormap.h"
#include "mely/enqueue.h"
#include "mely/deliver.h"
#include "mely/park.h"

/* The legacy engine, as libasync-smp: each run of consecutive events for one
 * worker is queued under that worker's lock, where its color lives now. */
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
            wake = 0;
        }
        wake |= mely__enqueue(w, self, NULL, ev);
        ev = next;
    }
    if (w) {
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, self, wake);
    }
}

/* The Mely engine: steps 1-4 of the move protocol (deliver.c). Pushes each
 * run of consecutive events for one owner into that owner's inbox, the owner
 * read once per event, in post order; wakes the owners after step 4, so that
 * a mover never waits for a system call. */
static void flush_inboxes(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__rt *rt = self->rt;
    uint64_t touched[MELY_MAX_WORKERS / 64] = {0};

    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_seq_cst);
    unsigned o = ev ? mely__owner_sc(rt, ev->color) : 0;
    while (ev) { /* bounded: the staged events */
        struct mely__event *last = ev;
        unsigned next_o = o;
        while (last->next) { /* bounded: the staged events */
            next_o = mely__owner_sc(rt, last->next->color);
            if (next_o != o)
                break;
            last = last->next;
        }
        struct mely__event *next = last->next;
        last->next = NULL;
        mely__inbox_push(&rt->workers[o].inbox, ev, last);
        touched[o / 64] |= 1ull << (o % 64);
        ev = next;
        o = next_o;
    }
    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_release);
    touched[self->index / 64] &= ~(1ull << (self->index % 64));
    for (unsigned i = 0; i < MELY_MAX_WORKERS / 64; i++)
        for (uint64_t b = touched[i]; b; b &= b - 1) /* bounded: 64 bits */
            mely__wake_if_parked(&rt->workers[i * 64 + (unsigned)__builtin_ctzll(b)], self);
}

void mely__outbox_flush(struct mely__worker *self)
{
    struct mely__outbox *ob = &self->outbox;
    struct mely__event *chain = ob->head;

    ob->head = ob->tail = NULL;
    ob->n = 0;
    if (self->rt->legacy)
        flush_locked(self, chain);
    else
        flush_inboxes(self, chain);
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
