/*
 * placement.h: color pools (placement.c), as the runtime's life cycle sees
 * them.
 */
#ifndef MELY_PLACEMENT_H
#define MELY_PLACEMENT_H

#include "mely/runtime.h"

/* Frees every pool of rt (mely_shutdown, once nothing else runs). */
void mely__pools_free(struct mely__rt *rt);

#endif
