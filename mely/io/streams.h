/* SPDX-License-Identifier: MIT */
/*
 * io/streams.h: the runtime's side of streams (io/stream.c) and of draining
 * (io/drain.c) (internal).
 */
#ifndef MELY_IO_STREAMS_H
#define MELY_IO_STREAMS_H

#include <stdbool.h>

#include "mely/io/iostate.h"
#include "mely/runtime.h"

/* What the drain asks of every stream (mely_drain's steps, stream.h). */
enum mely__stream_ask {
    MELY__ASK_DRAIN, /* step 2: run the drain callback, or stop reading */
    MELY__ASK_QUIET, /* step 4: close after flushing, unless the program drains */
    MELY__ASK_CUT,   /* step 6: close at once */
};

/* Asks every stream of rt, as an event of its color: 0 or MELY_ENOMEM.
 * Any thread. */
int mely__streams_ask_all(struct mely__rt *rt, enum mely__stream_ask what);

/* At shutdown, no worker running: closes every open stream, runs the
 * closed callbacks not yet run, and frees every stream. Before the watches
 * go. */
void mely__streams_free(struct mely__rt *rt);

/* Whether a drain is in progress, and whether it saw the runtime quiet
 * (step 4). Any thread. */
static inline bool mely__drain_active(struct mely__rt *rt)
{
    return atomic_load(&rt->io->draining);
}

static inline bool mely__drain_quiet(struct mely__rt *rt)
{
    return atomic_load(&rt->io->drain_quiet);
}

/* A stream's closed callback ran (or its open failed), or a stream was
 * freed: stream.c lowers rt->io->streams_open or rt->io->streams_alive, then calls
 * rt->io->drain_watch if a drain set it (drain.c: it stops the runtime once
 * every stream is closed and freed). A hook, not a call: the drain is the
 * layer above the streams. Any thread, no lock held. */
void mely__stream_closed(struct mely__rt *rt);
void mely__stream_gone(struct mely__rt *rt);

#endif
