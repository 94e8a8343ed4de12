/* outbox.c: staging and flushing remote posts (see outbox.h). */
#include <stdlib.h>

#include "mely/colormap.h"
#include "mely/enqueue.h"
#include "mely/park.h"

int mely__outbox_init(struct mely__outbox *ob, unsigned nworkers)
{
    ob->slots = calloc(nworkers, sizeof(*ob->slots));
    ob->dirty = calloc(nworkers, sizeof(*ob->dirty));
    ob->ndirty = 0;
    return ob->slots && ob->dirty ? 0 : MELY_ENOMEM;
}

void mely__outbox_destroy(struct mely__outbox *ob)
{
    free(ob->slots);
    free(ob->dirty);
    ob->slots = NULL;
    ob->dirty = NULL;
}

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

    for (uint32_t i = 0; i < ob->ndirty; i++) {
        struct mely__outbox_slot *s = &ob->slots[ob->dirty[i]];
        struct mely__event *chain = s->head;
        s->head = s->tail = NULL;
        s->n = 0;
        flush_chain(self, chain);
    }
    ob->ndirty = 0;
}

void mely__outbox_stage(struct mely__worker *self, unsigned dest, struct mely__event *ev)
{
    struct mely__outbox *ob = &self->outbox;
    struct mely__outbox_slot *s = &ob->slots[dest];

    ev->next = NULL;
    if (s->n == 0) {
        s->head = ev;
        ob->dirty[ob->ndirty++] = (uint16_t)dest;
    } else {
        s->tail->next = ev;
    }
    s->tail = ev;
    if (++s->n >= MELY__OUTBOX_MAX)
        mely__outbox_flush(self);
}
