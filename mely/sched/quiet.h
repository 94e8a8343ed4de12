/* SPDX-License-Identifier: MIT */
/*
 * quiet.h: quiescence, a moment when no event is queued or running anywhere
 * in a runtime (internal; quiet.c). The graceful drain (io/drain.c) waits
 * for one before it closes streams, so that work in flight between colors
 * (a command out on a key's color, a message on its way to subscribers)
 * runs, and writes what it writes, before the connections close.
 *
 * How it is seen. Each worker counts, under its lock, every time it takes
 * events to run and every time it is done with them (`quiet_seq`: odd while
 * it holds a batch; worker.c, legacy.c). A worker about to park, while a
 * wait is armed, looks at every worker twice, each under that worker's lock:
 * nothing queued (`nevents`), nothing reserved in its inbox, no batch held.
 * If both looks agree on every worker's count, no worker took or finished a
 * batch in between, so at the moment between the two looks nothing was
 * queued, held or running (events move between workers only under their
 * locks, and a handler's posts leave its outbox before its batch ends).
 * Events that I/O readiness or a timer has yet to post are not "queued":
 * they are new work, as a new request is.
 *
 * Who sees it: the last worker to go idle. A worker that looked while
 * another was busy parks; the busy one looks when it goes idle in turn.
 * Arming wakes every parked worker so that one of them looks.
 */
#ifndef MELY_QUIET_H
#define MELY_QUIET_H

#include <stdbool.h>

struct mely__rt;
struct mely__worker;

typedef void (*mely__quiet_fn)(struct mely__rt *rt);

/* Runs fn once, on the thread of the worker that sees the runtime quiet
 * (outside any batch: it may post, and its posts leave at once). One wait
 * at a time: a second arm replaces the first. Any thread. */
void mely__quiet_arm(struct mely__rt *rt, mely__quiet_fn fn);

/* Forgets the armed wait, if any. Any thread. */
void mely__quiet_disarm(struct mely__rt *rt);

/* An idle worker, before it parks: runs the armed function if the runtime
 * is quiet. Returns true if it ran (it may have queued work). The worker's
 * own thread, without its lock. */
bool mely__quiet_poll(struct mely__worker *w);

#endif
