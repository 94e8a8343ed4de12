/* outbox.c: staging and flushing remote posts (see outbox.h). */
#include "mely/colormap.h"
#include "mely/enqueue.h"
#include "mely/park.h"

static void unlock_and_wake(struct mely__worker *w, struct mely__worker *self, unsigned wake)
{
    mely__spin_unlock(&w->lock);
    mely__enqueue_wake(w, self, wake);
}

/* Queues a chain of staged events, in order, each where its color lives now. */
static void flush_chain(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__rt *rt = self->rt;
    struct mely__worker *w = NULL;
    unsigned wake = 0;

    while (ev) { /* bounded: at most MELY__OUTBOX_MAX events */
        struct mely__event *next = ev->next;
        if (!w || mely__owner(rt, ev->color) != w->index) {
            if (w)
                unlock_and_wake(w, self, wake);
            w = mely__lock_owner(rt, ev->color, &self->ctr);
            wake = 0;
        }
        wake |= mely__enqueue(w, self, mely__cq_of(rt, ev->color), ev);
        ev = next;
    }
    if (w)
        unlock_and_wake(w, self, wake);
}

void mely__outbox_flush(struct mely__worker *self)
{
    struct mely__outbox *ob = &self->outbox;
    struct mely__event *chain = ob->head;

    ob->head = ob->tail = NULL;
    ob->n = 0;
    flush_chain(self, chain);
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
