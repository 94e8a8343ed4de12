/* SPDX-License-Identifier: MIT */
/*
 * turnend.h: work done once at the end of a worker's turn, on its color
 * (internal; turnend.c).
 *
 * A worker's turn is the run of batches between two polls of its poller
 * (when busy: until the work its last poll brought has run, at least
 * MELY_POLL_US and at most 1 ms: io/poller.c), or until it goes idle. Code running in a batch may ask for a piece of work to
 * be done once at the end of the turn, still on the batch's color, with the
 * color's exclusivity: the stream layer (io/stream.c) sends each stream's
 * output there, with one writev, however many events of however many
 * batches of the turn wrote to it. libevent sends a connection's output
 * once per loop turn the same way; Netty's flush consolidation and
 * Seastar's output streams batch alike. (Sent at each batch's end instead,
 * a publish/subscribe broker made 10x the writev calls of a libevent one:
 * 17 deliveries per call against 181.)
 *
 * Exclusivity. A node is queued during a batch of its color (the batch's
 * list, `batch_end`). When the batch ends, under the worker's lock, the
 * nodes move to the turn's list (`turn_end`) and the color-queue is held
 * (`held` counts them): a held color-queue is never stolen nor moved
 * (colorq.h's mely__colorq_movable, deliver.c's colorq_busy), so until the
 * turn ends no other worker runs the color; this worker may run more of its
 * batches meanwhile, one after the other, which is no concurrency. At the
 * turn's end the worker runs every node with the current color set to the
 * node's, then releases the holds under its lock. The legacy engine has no
 * holds: it runs the batch's list at the end of each event (its batch).
 *
 * Who may call: the worker's own thread; mely__turnend_add inside a batch
 * (or a node's run at the turn's end, which queues on the same color).
 */
#ifndef MELY_TURNEND_H
#define MELY_TURNEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mely__worker;
struct mely__colorq;

struct mely__turnend {
    struct mely__turnend *next;
    void (*run)(struct mely__turnend *node);
    uint32_t color; /* the color it runs on: set by mely__turnend_add */
};

/* Queues node for the end of the turn (its owner keeps a flag, so that a
 * node is queued once). */
void mely__turnend_add(struct mely__worker *w, struct mely__turnend *node);

/* Queues node to run at the end of the current batch, before the worker
 * lets the batch's color go (or at the end of the node that queued it, at a
 * turn's end; or when the turn ends, queued outside both), and before any
 * post of the worker leaves (post.c), holding nothing: what must be done
 * before the batch's color may run on another worker, or before what it
 * posts may run. The stream layer sends there what the batch wrote to
 * streams of other workers (io/stream.c): a stolen color's writes would
 * otherwise pass those it left behind, and the handler of a post that
 * follows a write could write to the stream first. Any time on the
 * worker's thread. */
void mely__turnend_at_batch_end(struct mely__worker *w, struct mely__turnend *node);

/* Runs the nodes queued by mely__turnend_at_batch_end (worker.c and
 * legacy.c at the end of each batch, still on its color). */
void mely__turnend_batch_done(struct mely__worker *w);

/* At the end of a batch of cq, still on its color (worker.c): when nothing
 * more of the color is queued, the batch's nodes run now rather than at the
 * turn's end, since no later event of the color will add to their work
 * this turn (a stream that answered a request sends the answer at once, as
 * a server without streams would; one written to by a queue of events
 * waits for the queue). Takes w's lock to look at the queue. */
void mely__turnend_batch_over(struct mely__worker *w, struct mely__colorq *cq);

/* Under w->lock, at the end of a batch of cq: moves the batch's nodes to
 * the turn's list and holds cq for them. */
void mely__turnend_hold(struct mely__worker *w, struct mely__colorq *cq);

/* The turn is over (before a poll, before going idle, when the worker
 * stops): runs every node on its color, then releases the holds. Without
 * w->lock. */
void mely__turnend_run(struct mely__worker *w);

/* The legacy engine, at the end of each event, still on its color: runs
 * the batch's nodes at once. */
void mely__turnend_run_batch(struct mely__worker *w);

/*
 * From a batch (or the turn's end) of another color on worker w: whether w
 * owns `color` and *refuse is 0, both read under w's lock. Then the color is
 * held to the end of the turn, with node queued for it (unless *queued,
 * its owner's flag that says the node is already queued: set here), and the
 * caller may act on the color's state as if it ran on it until then: no
 * other worker can run the color before the turn's end, and this one runs
 * its batches one after the other. The stream layer writes so to a stream
 * whose color lives on the writer's worker, without a hop (io/stream.c).
 * *tag (its owner's) gets this worker's and turn's tag: while it still
 * reads so (mely__turnend_held), the color is held here and a new claim
 * needs no lock. Only the holder writes it, and a tag names a turn that has
 * not ended only while its holds last, so a match cannot be stale.
 * Engines without holds: false.
 */
bool mely__turnend_claim(struct mely__worker *w, uint32_t color, bool *queued,
                         struct mely__turnend *node, const _Atomic unsigned *refuse,
                         _Atomic uint64_t *tag);

/* The tag a successful claim stores: this worker, this turn. */
static inline uint64_t mely__turnend_tag(unsigned index, uint64_t turn_seq)
{
    return (uint64_t)(index + 1) << 48 | (turn_seq & ((1ull << 48) - 1));
}

/* Whether *tag says that the worker (index, turn_seq) holds its owner's
 * color in this turn: then it may act on it without claiming again. */
static inline bool mely__turnend_held(const _Atomic uint64_t *tag, unsigned index,
                                      uint64_t turn_seq)
{
    return atomic_load_explicit((_Atomic uint64_t *)tag, memory_order_relaxed) ==
           mely__turnend_tag(index, turn_seq);
}

#endif
