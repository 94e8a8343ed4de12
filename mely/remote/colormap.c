/* SPDX-License-Identifier: MIT */
/* colormap.c: the color map (see colormap.h), and moving an idle color. */
#include "mely/remote/colormap.h"
#include "mely/remote/enqueue.h"
#include "mely/core/handle.h"
#include "mely/core/park.h"

void mely__colormap_init(struct mely__rt *rt)
{
    for (unsigned c = 0; c < MELY_COLORS; c++)
        atomic_init(&rt->owner[c], (uint8_t)mely__color_home(rt, (mely_color_t)c));
}

/* Like a steal (steal.c), the owner changes under both workers' locks, so
 * posters' lock-and-recheck (mely__lock_owner) sees either owner
 * consistently; the engine moves the color (engine.h: the Mely engine's
 * posts that race with the move follow it through the move protocol,
 * deliver.c). */
int mely__color_move(struct mely__rt *rt, mely_color_t color, unsigned worker)
{
    if (color >= MELY_COLORS)
        return MELY_ECOLOR;
    if (worker >= rt->nworkers)
        return MELY_EINVAL;
    struct mely__worker *self = mely__self_in(rt);
    struct mely__counters *ctr = self ? &self->ctr : NULL;
    struct mely__worker *to = &rt->workers[worker];

    for (;;) { /* again only if a steal moved the color meanwhile */
        unsigned o = mely__owner(rt, color);
        if (o == worker)
            return 0;
        struct mely__worker *from = &rt->workers[o];
        mely__lock_pair(from, to, ctr);
        if (mely__owner(rt, color) != o) {
            mely__unlock_pair(from, to);
            continue;
        }
        unsigned wake = 0;
        int moved = rt->engine->color_move(from, to, color, self, &wake);
        mely__unlock_pair(from, to);
        mely__enqueue_wake(from, self, wake);
        if (moved > 0)
            mely__wake_if_parked(to, self);
        return moved < 0 ? moved : 0;
    }
}

int mely_color_move(mely_t *m, mely_color_t color, unsigned worker)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, mely__color_move(rt, color, worker)) : MELY_ESHUTDOWN;
}
