/* SPDX-License-Identifier: MIT */
/*
 * placement.h: color pools (placement.c), as the runtime's life cycle sees
 * them, and the backlog sample the poller takes for them.
 */
#ifndef MELY_PLACEMENT_H
#define MELY_PLACEMENT_H

#include "mely/runtime.h"

/* Frees every pool of rt (mely_shutdown, once nothing else runs). */
void mely__pools_free(struct mely__rt *rt);

/* The weight of a new sample in the wave average: a quarter, so the average
 * forgets a burst within some ten polls (a few hundred microseconds busy). */
#define MELY__WAVE_SHIFT 2

/* After each poll, by the worker: `queued` events wait now (what the poll
 * brought and what was there). Placers read the average as the worker's
 * backlog: sampled at the same moment of every worker's turn, it compares
 * workers fairly, where a reading at any moment would not (the accepting
 * worker, which has just polled, would always look the busier). A load and
 * a store per poll, on a line that placers read. */
static inline void mely__placement_sample(struct mely__worker *w, uint32_t queued)
{
    uint32_t avg = atomic_load_explicit(&w->wave_avg, memory_order_relaxed);
    int64_t d = ((int64_t)queued << 4) - (int64_t)avg;
    atomic_store_explicit(&w->wave_avg, (uint32_t)((int64_t)avg + d / (1 << MELY__WAVE_SHIFT)),
                          memory_order_relaxed);
}

#endif
