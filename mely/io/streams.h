/*
 * io/streams.h: the runtime's side of streams and of draining (internal; the
 * design is in io/stream.c).
 */
#ifndef MELY_IO_STREAMS_H
#define MELY_IO_STREAMS_H

#include <stdbool.h>

struct mely__rt;

/* Asks every stream of rt to close, after flushing or at once: 0 or
 * MELY_ENOMEM. Any thread. */
int mely__streams_ask_all(struct mely__rt *rt, bool flush);

/* At shutdown, no worker running: closes every open stream, runs the
 * closed callbacks not yet run, and frees every stream. Before the watches
 * go. */
void mely__streams_free(struct mely__rt *rt);

/* Whether a drain is in progress. Any thread. */
bool mely__drain_active(struct mely__rt *rt);

/* A stream's closed callback ran (or its open failed), or a stream was
 * freed: the drain stops the runtime once every stream is closed and
 * freed (after its timeout: closed). Any thread, no lock held. */
void mely__drain_stream_closed(struct mely__rt *rt);
void mely__drain_stream_gone(struct mely__rt *rt);

#endif
