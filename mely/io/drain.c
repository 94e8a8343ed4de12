/*
 * io/drain.c: mely_drain(), a graceful stop.
 *
 * A drain pauses every listener, asks every stream to close after flushing
 * (io/stream.c rings each one's bell), and counts closed callbacks down:
 * rt->streams_open is raised by every stream's registration and lowered
 * when its closed callback has run. The one that brings it to zero while a
 * drain is on stops the runtime. A timeout is a timer on worker 0's pinned
 * color that asks the streams left to close at once. Streams opened while
 * the drain is on are asked to close as they start (stream_start).
 *
 * Who may call: mely_drain from any thread; the rest from io/stream.c.
 */
#include <pthread.h>

#include "mely/handle.h"
#include "mely/io/listen.h"
#include "mely/io/streams.h"
#include "mely/runtime.h"
#include "mely/stream.h"

bool mely__drain_active(struct mely__rt *rt)
{
    return atomic_load(&rt->draining);
}

/* Ends the drain: its timer goes, and the runtime stops. */
static void finish(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->stream_mu);
    bool was = atomic_exchange(&rt->draining, false);
    mely_timer_t t = atomic_exchange(&rt->drain_timer, 0);
    pthread_mutex_unlock(&rt->stream_mu);
    if (!was)
        return; /* another thread finished it */
    mely_t m = { .rt = rt };
    if (t)
        mely_timer_cancel(&m, t);
    mely_stop(&m);
}

void mely__drain_stream_closed(struct mely__rt *rt)
{
    if (atomic_fetch_sub(&rt->streams_open, 1) == 1 && mely__drain_active(rt))
        finish(rt);
}

/* The drain's timeout: what is left closes without flushing. */
static void cut(void *arg)
{
    struct mely__rt *rt = arg;
    pthread_mutex_lock(&rt->stream_mu);
    bool on = atomic_exchange(&rt->drain_timer, 0) != 0;
    pthread_mutex_unlock(&rt->stream_mu);
    if (on)
        mely__streams_ask_all(rt, false);
}

/* Marks the drain begun and sets its timer, both under stream_mu so that a
 * drain finishing at once (finish) finds the timer to cancel. */
static int begin(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = 0;
    mely_t m = { .rt = rt };
    mely_timer_t t = 0;
    pthread_mutex_lock(&rt->stream_mu);
    if (atomic_load(&rt->draining))
        err = MELY_EBUSY;
    else if (timeout_ns)
        err = mely_timer_after(&m, timeout_ns, MELY_TO(MELY_COLOR_PINNED(0)), cut, rt, &t);
    if (!err) {
        atomic_store(&rt->drain_timer, t);
        atomic_store(&rt->draining, true);
    }
    pthread_mutex_unlock(&rt->stream_mu);
    return err;
}

static int drain_in(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = begin(rt, timeout_ns);
    if (err)
        return err;
    mely__listeners_pause(rt);
    if (mely__streams_ask_all(rt, true) != 0) /* out of memory: cut short */
        mely__streams_ask_all(rt, false);
    if (atomic_load(&rt->streams_open) == 0) /* nothing to wait for */
        finish(rt);
    return 0;
}

int mely_drain(mely_t *m, uint64_t timeout_ns)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, drain_in(rt, timeout_ns)) : MELY_ESHUTDOWN;
}
