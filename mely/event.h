/*
 * event.h: an event is a handler function, its argument (the continuation), the
 * handler's descriptor and a priority. Its color is that of the color-queue it
 * sits in. Events come from per-worker free lists (freelist.h), never from
 * malloc per event.
 */
#ifndef MELY_EVENT_H
#define MELY_EVENT_H

#include <stdint.h>

#include "mely/mely.h"

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
        };
        struct { /* while free: the first event of a chain links the next chain */
            struct mely__event *next_chain;
        };
    };
};

#endif
