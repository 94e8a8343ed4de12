/* SPDX-License-Identifier: MIT */
/*
 * stats.h: the MELY_STATS=1 tables (stats.c), printed at shutdown or, for
 * programs that end in exit() (every legacy one: amain() never returns), by
 * the exit handler mely_init() installs (runtime.c).
 */
#ifndef MELY_STATS_H
#define MELY_STATS_H

#include <stdio.h>

struct mely__rt;

/* One line per worker, for MELY_STATS=1 at shutdown. */
void mely__stats_print(const struct mely__rt *rt, FILE *f);

/* With MELY_STATS=1, prints rt's table on stderr unless it was already (at
 * shutdown, or by the exit handler: runtime.c). Any thread, also while
 * workers run (the counters are read as any thread reads them). */
void mely__stats_at_end(struct mely__rt *rt);

#endif
