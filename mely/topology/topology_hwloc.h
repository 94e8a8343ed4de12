/* SPDX-License-Identifier: MIT */
/*
 * topology_hwloc.h: the cache map's distances from hwloc (MELY_TOPOLOGY=hwloc),
 * with libhwloc opened at run time (topology_hwloc.c says why).
 */
#ifndef MELY_TOPOLOGY_HWLOC_H
#define MELY_TOPOLOGY_HWLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ranks of topology.c's distance matrix, from the nearest. */
enum {
    MELY__RANK_L2 = 0,  /* a shared data or unified cache of level 1 or 2 */
    MELY__RANK_L3 = 1,  /* a shared data or unified cache of level 3 or more */
    MELY__RANK_PKG = 2, /* the same package only */
    MELY__RANK_FAR = 3, /* nothing in common, or a worker not pinned */
};

/* Fills dist (n x n, row a column b) with the ranks of workers pinned to
 * cpu[0..n-1] (-1: not pinned) as hwloc sees the machine (HWLOC_FSROOT
 * honoured). Returns true, or false with a one-line reason in why (hwloc
 * cannot be loaded, has another API, fails, or knows no PU for a CPU).
 * Threads: any thread; the first call opens libhwloc, once per process. */
bool mely__hwloc_ranks(const int *cpu, unsigned n, uint8_t *dist, char *why, size_t whylen);

#endif /* MELY_TOPOLOGY_HWLOC_H */
