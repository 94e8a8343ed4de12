/* colormap.c: the color map (see colormap.h). */
#include "mely/colormap.h"

void mely__colormap_init(struct mely__rt *rt)
{
    for (unsigned c = 0; c < MELY_COLORS; c++)
        atomic_init(&rt->owner[c], (uint8_t)(c % rt->nworkers));
}

struct mely__worker *mely__lock_owner(struct mely__rt *rt, mely_color_t color,
                                      struct mely__counters *ctr)
{
    for (;;) {
        unsigned o = mely__owner(rt, color);
        struct mely__worker *w = &rt->workers[o];

        mely__spin_lock(&w->lock, ctr);
        if (mely__owner(rt, color) == o)
            return w;
        mely__spin_unlock(&w->lock);
    }
}
