/* SPDX-License-Identifier: MIT */
/*
 * colormove.c: moving an idle color to a worker named by the program
 * (mely_color_move) or by placement (placement.c).
 *
 * Like a steal (steal.c), the owner changes under both workers' locks, taken
 * in index order (mely__lock_pair, colormap.h), so posters' lock-and-recheck
 * (mely__lock_owner) sees either owner consistently. The engine moves the
 * color and refuses a busy one (engine.h's color_move: the Mely engine's
 * posts that race with the move follow it through the move protocol,
 * deliver.c).
 */
#include "mely/remote/colormap.h"
#include "mely/remote/colormove.h"
#include "mely/remote/enqueue.h"
#include "mely/core/handle.h"
#include "mely/core/park.h"

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
