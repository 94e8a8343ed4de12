/* SPDX-License-Identifier: MIT */
/*
 * colorrange.h: reserving a block of colors (colorrange.c), for the public
 * ranges and for placement pools (placement.c).
 */
#ifndef MELY_COLORRANGE_H
#define MELY_COLORRANGE_H

#include "mely/runtime.h"

/* mely_color_range() without the handle's grace period (the caller holds
 * it): 0 and *out, MELY_EINVAL, or -ENOSPC. */
int mely__color_reserve(struct mely__rt *rt, uint32_t n, mely_color_range_t *out);

#endif
