/*
 * batchend.h: work a worker does once at the end of a batch, still on the
 * batch's color (internal).
 *
 * A batch runs events of one color back to back (worker.c; one event in the
 * legacy engine). Code running in the batch may ask for a piece of work to
 * be done once when the batch ends, before the worker lets the color go
 * (before another worker may steal it, before the worker polls or parks):
 * the stream layer (io/stream.c) uses it to send each stream's output once
 * per batch, with one writev, however many events of the batch wrote to it
 * (libevent sends once per loop turn; Netty's flush consolidation and
 * Seastar's output streams do the same).
 *
 * Since a batch holds one color, every node queued during it belongs to
 * that color, and running the nodes at the batch's end runs them on their
 * color: with no lock, as the events did. The list is the worker's own; a
 * node is queued at most once per batch (its owner keeps a flag).
 *
 * Who may call: the worker's own thread, inside a batch (a handler, or a
 * node's run at the batch's end: nodes queued then run in the same end).
 */
#ifndef MELY_BATCHEND_H
#define MELY_BATCHEND_H

#include <stddef.h>

struct mely__batchend {
    struct mely__batchend *next;
    void (*run)(struct mely__batchend *node);
};

/* Queues node to run at the end of the current batch. */
static inline void mely__batchend_add(struct mely__batchend **list, struct mely__batchend *node)
{
    node->next = *list;
    *list = node;
}

/* Runs the queued nodes, and those they queue, until none is left. A node
 * that queues itself again runs again: its owner must not (stream.c's do
 * not: a settle marks nothing). */
static inline void mely__batchend_run(struct mely__batchend **list)
{
    while (*list) { /* bounded: each node runs once per queuing */
        struct mely__batchend *node = *list;
        *list = node->next;
        node->next = NULL;
        node->run(node);
    }
}

#endif
