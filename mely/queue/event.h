/* SPDX-License-Identifier: MIT */
/*
 * event.h: an event is a handler function, its argument (the continuation), the
 * handler's descriptor and a priority. Its color is that of the color-queue it
 * sits in. Events come from per-worker free lists (freelist.h), never from
 * malloc per event.
 */
#ifndef MELY_EVENT_H
#define MELY_EVENT_H

#include <stdint.h>

#include <mely/mely.h>

struct mely__event {
    struct mely__event *next; /* in a color-queue, or in a free chain */
    union {
        struct { /* while queued */
            mely_fn_t fn;
            void *arg;
            const mely_handler_t *desc;
            uint32_t color; /* needed while staged in an outbox (outbox.h) */
            uint8_t prio;
            uint8_t head;   /* a head post (MELY_POST_HEAD) */
            uint16_t units; /* expected cost for stealing, in MELY__COST_UNIT
                               cycles (cost.h); 0 when not tracked */
        };
        struct { /* while free: the first event of a chain links the next chain */
            struct mely__event *next_chain;
        };
    };
};

/* The queued fields fit the 40 bytes the event had before the cost was added:
 * the cost rides in what was padding. */
_Static_assert(sizeof(struct mely__event) == 40, "event size");

#endif
