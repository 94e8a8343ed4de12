/* SPDX-License-Identifier: MIT */
/*
 * outbox.h: remote posts staged by a worker, flushed in batches.
 *
 * A handler's posts to other workers' colors are staged (those the engine
 * accepts: engine.h, `stages_all`) and flushed together by the engine, so that
 * the lines that cross cores are shared by a batch (the Mely engine: each
 * run of consecutive posts to one worker with one reservation in that
 * worker's inbox, deliver.c; the legacy engine: one hold of its lock):
 *  - when MELY__OUTBOX_MAX events are staged,
 *  - when the handler that posted returns (before the worker runs anything
 *    else or goes idle), so a staged event waits at most for the rest of the
 *    handler that posted it,
 *  - before the worker makes a post to one of its own colors, so that a color
 *    that moved to this worker keeps its post order.
 * The staged events form one FIFO, in post order, whatever their destination.
 * The flush resolves each color's owner as it publishes (deliver.c's move
 * protocol) and publishes the events in that order, so a color's events keep
 * their order even when the color moved between two of its posts (a steal,
 * mely_color_move()):
 * per-destination lists, flushed one after the other, would have queued the
 * later post first (check_order tests it).
 * A flush always empties the outbox, and never fails: the engine stages
 * only colors whose queueing cannot fail for memory.
 *
 * Who may call: the owning worker's thread only.
 */
#ifndef MELY_OUTBOX_H
#define MELY_OUTBOX_H

#include <stdint.h>

#include "mely/queue/event.h"

#define MELY__OUTBOX_MAX 32u

struct mely__outbox {
    struct mely__event *head, *tail; /* staged events, in post order */
    uint32_t n;
};

struct mely__worker;

/* Stages ev (its fields set) for its color's owner; flushes at MELY__OUTBOX_MAX. */
void mely__outbox_stage(struct mely__worker *self, struct mely__event *ev);

/* Queues every staged event where its color lives now, in post order (the
 * engine's `flush`, engine.h). */
void mely__outbox_flush(struct mely__worker *self);

static inline int mely__outbox_pending(const struct mely__outbox *ob)
{
    return ob->n != 0;
}

#endif
