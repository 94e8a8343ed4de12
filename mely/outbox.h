/*
 * outbox.h: remote posts staged by a worker, flushed in batches.
 *
 * A post to another worker's color must take that worker's lock, and the
 * lock's cache line then moves between the two cores: on the 2-core KVM
 * guests we measure on, that transfer, once per event, caps cross-core posting
 * near 7 M events/s. So a handler's posts to other workers' colors are staged
 * and queued in one lock hold per run of consecutive posts to one worker:
 *  - when MELY__OUTBOX_MAX events are staged,
 *  - when the handler that posted returns (before the worker runs anything
 *    else or goes idle), so a staged event waits at most for the rest of the
 *    handler that posted it,
 *  - before the worker makes a post to one of its own colors, so that a color
 *    that moved to this worker keeps its post order.
 * The staged events form one FIFO, in post order, whatever their destination.
 * The flush re-resolves each color's owner under the lock (colormap.h) and
 * queues the events in that order, so a color's events keep their order even
 * when the color moved between two of its posts (a steal, mely_color_move()):
 * per-destination lists, flushed one after the other, would have queued the
 * later post first (check_order tests it).
 * Only colors whose color-queue already exists are staged: a flush must not
 * fail for memory after mely_post_ex() returned 0.
 *
 * Who may call: the owning worker's thread only.
 */
#ifndef MELY_OUTBOX_H
#define MELY_OUTBOX_H

#include <stdint.h>

#include "mely/event.h"

#define MELY__OUTBOX_MAX 32u

struct mely__outbox {
    struct mely__event *head, *tail; /* staged events, in post order */
    uint32_t n;
};

struct mely__worker;

/* Stages ev (its fields set) for its color's owner; flushes at MELY__OUTBOX_MAX. */
void mely__outbox_stage(struct mely__worker *self, struct mely__event *ev);

/* Queues every staged event where its color lives now, in post order. */
void mely__outbox_flush(struct mely__worker *self);

static inline int mely__outbox_pending(const struct mely__outbox *ob)
{
    return ob->n != 0;
}

#endif
