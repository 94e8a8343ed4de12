/* SPDX-License-Identifier: MIT */
/*
 * io/iostate.c: the I/O layer's state, made and freed (io/iostate.h): the
 * runtime's tables (rt->io) and one struct per worker (w->io), each on
 * lines of its own. runtime.c calls these from mely_init and mely_shutdown
 * and knows nothing of what they hold.
 */
#include <stdlib.h>
#include <string.h>

#include "mely/io/iostate.h"
#include "mely/io/listen.h"
#include "mely/io/poller.h"
#include "mely/io/streams.h"
#include "mely/io/watch.h"
#include "mely/runtime.h"

int mely__io_init(struct mely__rt *rt)
{
    struct mely__io_rt *io = aligned_alloc(MELY__CACHELINE, sizeof(*io));
    if (!io)
        return MELY_ENOMEM;
    memset(io, 0, sizeof(*io));
    pthread_mutex_init(&io->listen_mu, NULL);
    pthread_mutex_init(&io->stream_mu, NULL);
    rt->io = io;
    io->workers = aligned_alloc(MELY__CACHELINE, rt->nworkers * sizeof(*io->workers));
    if (!io->workers)
        return MELY_ENOMEM;
    memset(io->workers, 0, rt->nworkers * sizeof(*io->workers));
    for (unsigned i = 0; i < rt->nworkers; i++) {
        io->workers[i].poller.timer_fd = -1; /* none yet: _free closes only what exists */
        rt->workers[i].io = &io->workers[i];
    }
    int err = mely__pollers_init(rt);
    return err ? err : mely__watchtab_init(rt);
}

void mely__io_free(struct mely__rt *rt)
{
    struct mely__io_rt *io = rt->io;
    if (!io)
        return;
    if (io->workers) {
        /* Streams and listeners hold watches, watches hold libevent events
         * of the bases. */
        mely__streams_free(rt);
        mely__listeners_free(rt);
        mely__watchtab_free(rt);
        mely__pollers_free(rt);
        for (unsigned i = 0; i < rt->nworkers; i++)
            rt->workers[i].io = NULL;
        free(io->workers);
    }
    pthread_mutex_destroy(&io->listen_mu);
    pthread_mutex_destroy(&io->stream_mu);
    free(io);
    rt->io = NULL;
}

size_t mely__io_timers_queued(const struct mely__rt *rt)
{
    size_t n = 0;
    for (unsigned i = 0; i < rt->nworkers; i++)
        n += mely__timers_queued(&rt->io->workers[i].timers);
    return n;
}
