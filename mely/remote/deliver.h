/* SPDX-License-Identifier: MIT */
/*
 * deliver.h: the owner's side of remote posts, and the move protocol (the
 * essay is at the top of deliver.c).
 *
 * Every worker has one inbox (inbox.h). Other workers publish their staged
 * posts into it (their flush, deliver.c), and so do threads that are not
 * workers (post.c); the worker drains it into its color-queues under its own lock,
 * at batch boundaries, before a local post, before it parks, and a thief
 * drains a victim's. The Mely engine's (engine.h; worker.c binds its
 * ops): the legacy engine queues under the owner's lock, as libasync-smp
 * does (legacy.c), and has no inboxes.
 */
#ifndef MELY_DELIVER_H
#define MELY_DELIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "mely/runtime.h"

/* A post waits in w's inbox, ready to take (a hint). */
static inline bool mely__deliver_ready(const struct mely__worker *w)
{
    return mely__inbox_ready(w->inbox);
}

unsigned mely__deliver_slow(struct mely__worker *w, struct mely__worker *self, bool whole);

/* Under w->lock: queues the ready posts of w's inbox on their colors'
 * queues, in reservation order, up to the first one still being written.
 * Returns MELY__WAKE_* flags (enqueue.h) for after unlocking. `self` is the
 * calling worker, or NULL. Inline: every batch look; an empty inbox costs
 * two loads of the owner's own lines. */
static inline unsigned mely__deliver(struct mely__worker *w, struct mely__worker *self)
{
    if (__builtin_expect(!mely__inbox_ready(w->inbox), 1) &&
        __builtin_expect(self != w || w->nreserve == MELY__INBOX_CAP, 1))
        return 0;
    return mely__deliver_slow(w, self, false);
}

/* mely__deliver(), but every post reserved before the call, waiting for any
 * still being written: for whoever queues an event directly on w next (a
 * local post, an overflow, a foreign fallback), so that it comes after them
 * all. (A drain that stopped at a slot still being written left later,
 * written posts behind it, and a direct post overtook them: check_deliver's
 * moves_race_flushes caught it.) */
static inline unsigned mely__deliver_all(struct mely__worker *w, struct mely__worker *self)
{
    if (__builtin_expect(!mely__inbox_reserved(w->inbox), 1) &&
        __builtin_expect(self != w || w->nreserve == MELY__INBOX_CAP, 1))
        return 0;
    return mely__deliver_slow(w, self, true);
}

/* The Mely engine's post_now (engine.h): a color's queue is created on its
 * first event, which goes now; only colors whose queue exists are staged
 * (the engine's `stages_all` is false). */
int mely__deliver_post_now(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev);

/* The Mely engine's flush (engine.h): steps 1-3 of the move protocol for
 * the staged chain, then, after a short wait for full inboxes to drain,
 * what they did not take under the owners' locks. The poster's thread. */
void mely__deliver_flush(struct mely__worker *self, struct mely__event *chain);

/* The Mely engine's post_foreign: a post from a thread that is not a worker
 * (post.c). Puts ev (its fields set) in its owner's inbox, under the
 * owner's foreign_lock (the move protocol), and wakes the owner if it is
 * parked. False, with nothing done, if the color has no color-queue yet or
 * the inbox is full (the caller queues ev under the owner's lock, after
 * draining the inbox, so that order holds). */
bool mely__deliver_foreign(struct mely__rt *rt, const struct mely__event *ev);

/* Under both locks: makes `to` the owner of `color` (owned by `from`), with
 * every event already posted to it: those in flight to `from` are drained
 * into its color-queue first, and a non-empty color-queue moves to `to`.
 * Returns the events moved, or -1 without changing anything when `from`'s
 * reserve of events is not full (out of memory: deliver.c), and ORs
 * MELY__WAKE_* flags for `from` into *wake. The caller checked that the
 * color is not running. Any thread. */
int mely__color_handoff(struct mely__worker *from, struct mely__worker *to, mely_color_t color,
                        struct mely__worker *self, unsigned *wake);

/* The Mely engine's color_move (engine.h): the events in flight to `from`
 * drained, then, unless the color is busy, mely__color_handoff(). */
int mely__deliver_move(struct mely__worker *from, struct mely__worker *to, mely_color_t color,
                       struct mely__worker *self, unsigned *wake);

/* The Mely engine's init: every worker's inbox (in rt->engine_data) and
 * reserve; MELY_ENOMEM. fini frees what exists. */
int mely__deliver_init(struct mely__rt *rt);
void mely__deliver_fini(struct mely__rt *rt);

/* The Mely engine's pending (engine.h): events still in color-queues and
 * inboxes (shutdown: no worker runs). */
size_t mely__deliver_pending(const struct mely__rt *rt);

#endif
