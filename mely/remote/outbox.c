/* SPDX-License-Identifier: MIT */
/* outbox.c: staging remote posts (see outbox.h); the flush is the engine's
 * (engine.h), the locked part of it shared (postpath.h). */
#include "mely/remote/outbox.h"
#include "mely/runtime.h"

void mely__outbox_flush(struct mely__worker *self)
{
    struct mely__outbox *ob = &self->outbox;
    struct mely__event *chain = ob->head;

    ob->head = ob->tail = NULL;
    ob->n = 0;
    self->rt->engine->flush(self, chain);
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
