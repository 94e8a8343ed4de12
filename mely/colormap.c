/* colormap.c: the color map (see colormap.h). */
#include "mely/colormap.h"

void mely__colormap_init(struct mely__rt *rt)
{
    for (unsigned c = 0; c < MELY_COLORS; c++)
        atomic_init(&rt->owner[c], (uint8_t)(c % rt->nworkers));
}
