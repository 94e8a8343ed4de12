/* SPDX-License-Identifier: MIT */
/*
 * colorrange.c: color ranges (mely.h), blocks of colors reserved from the
 * top of the color space down, so that they never meet the low colors a
 * program uses for fixed roles.
 *
 * Who may call: any thread.
 */
#include "mely/core/handle.h"
#include "mely/sched/colorrange.h"
#include "mely/runtime.h"

int mely__color_reserve(struct mely__rt *rt, uint32_t n, mely_color_range_t *out)
{
    if (n == 0 || !out)
        return MELY_EINVAL;
    uint32_t top = atomic_load(&rt->range_top);
    do { /* bounded: retried only when another reservation won */
        if (top - MELY_COLOR_RANGE_FLOOR < n)
            return -ENOSPC;
    } while (!atomic_compare_exchange_weak(&rt->range_top, &top, top - n));
    *out = (mely_color_range_t){ .base = top - n, .n = n };
    return 0;
}

int mely_color_range(mely_t *m, uint32_t n, mely_color_range_t *out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, mely__color_reserve(rt, n, out)) : MELY_ESHUTDOWN;
}

mely_color_t mely_color_hash(const mely_color_range_t *r, const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, 64-bit */
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return mely_color_pick(r, h);
}
