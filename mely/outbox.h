/*
 * outbox.h: remote posts staged by a worker, flushed in batches.
 *
 * A post to another worker's color must take that worker's lock, and the
 * lock's cache line then moves between the two cores: on the 2-core KVM
 * guests we measure on, that transfer, once per event, caps cross-core posting
 * near 7 M events/s. So a handler's posts to other workers' colors are staged
 * per destination worker and queued there in one lock hold:
 *  - when a destination has MELY__OUTBOX_MAX staged events,
 *  - when the handler that posted returns (before the worker runs anything
 *    else or goes idle), so a staged event waits at most for the rest of the
 *    handler that posted it,
 *  - before the worker makes a post to one of its own colors, so that a color
 *    that moved to this worker keeps its post order.
 * The flush re-resolves each color's owner under the lock (colormap.h), so a
 * color stolen meanwhile gets its events where it now lives, in post order.
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

struct mely__outbox_slot {
    struct mely__event *head, *tail;
    uint32_t n;
};

struct mely__outbox {
    struct mely__outbox_slot *slots; /* one per destination worker */
    uint16_t *dirty;                 /* destinations with staged events */
    uint32_t ndirty;
};

struct mely__worker;

int mely__outbox_init(struct mely__outbox *ob, unsigned nworkers);
void mely__outbox_destroy(struct mely__outbox *ob);
void mely__outbox_stage(struct mely__worker *self, unsigned dest, struct mely__event *ev);
void mely__outbox_flush(struct mely__worker *self);

static inline int mely__outbox_pending(const struct mely__outbox *ob)
{
    return ob->ndirty != 0;
}

#endif
