/* SPDX-License-Identifier: MIT */
/*
 * colormove.h: moving an idle color to another worker on request
 * (mely_color_move, mely.h), the way placement.c balances color pools
 * (internal; the design is in colormove.c).
 */
#ifndef MELY_COLORMOVE_H
#define MELY_COLORMOVE_H

#include "mely/runtime.h"

/* mely_color_move() without the handle's grace period (the caller holds it):
 * 0, MELY_ECOLOR, MELY_EINVAL, MELY_EBUSY or MELY_ENOMEM as documented there.
 * Any thread. */
int mely__color_move(struct mely__rt *rt, mely_color_t color, unsigned worker);

#endif
