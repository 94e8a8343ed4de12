/* SPDX-License-Identifier: MIT */
/* colormap.c: the color map's initial placement (see colormap.h; moving a
 * color on request is colormove.c's). */
#include "mely/remote/colormap.h"

void mely__colormap_init(struct mely__rt *rt)
{
    for (unsigned c = 0; c < MELY_COLORS; c++)
        atomic_init(&rt->owner[c], (uint8_t)mely__color_home(rt, (mely_color_t)c));
}
