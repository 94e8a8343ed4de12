/* SPDX-License-Identifier: MIT */
/*
 * io/drain.c: mely_drain, the graceful stop (its steps: include/mely/stream.h).
 *
 * A drain pauses every listener, asks every stream to hear of it (each
 * runs its drain callback or stops reading: io/stream.c), and arms a wait
 * for the runtime's next quiet moment (mely/sched/quiet.h): no event queued or
 * running on any worker, so the work that was in flight between colors
 * when the drain began has run and written its replies. Then it asks every
 * stream that does not drain itself to close after flushing. It counts
 * down meanwhile: rt->io->streams_open (raised by every stream's registration,
 * lowered when its closed callback has run) and rt->io->streams_alive
 * (lowered when it is freed, that is when the events that carried it to
 * other colors have run and dropped their references). When both reach
 * zero the runtime stops, so a shutdown that follows discards no event of a
 * stream, and no memory such an event carried. A timeout is a timer on
 * worker 0's pinned color that asks the streams left to close at once,
 * after which closed is enough (a reference the program keeps would hold
 * the drain forever). Streams opened while the drain is on go through the
 * same steps as they start (io/stream.c's stream_start).
 *
 * Who may call: mely_drain from any thread; check (rt->io->drain_watch) from
 * io/stream.c, on any thread.
 */
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/io/listen.h"
#include "mely/io/streams.h"
#include "mely/core/park.h"
#include "mely/sched/quiet.h"
#include "mely/runtime.h"
#include <mely/stream.h>

/* Ends the drain: its timer goes, and the runtime stops. */
static void finish(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->io->stream_mu);
    bool was = atomic_exchange(&rt->io->draining, false);
    mely_timer_t t = atomic_exchange(&rt->io->drain_timer, 0);
    atomic_store(&rt->io->drain_watch, NULL);
    pthread_mutex_unlock(&rt->io->stream_mu);
    if (!was)
        return; /* another thread finished it */
    mely__quiet_disarm(rt);
    mely_t m = mely__handle_of(rt);
    if (t)
        mely_timer_cancel(&m, t);
    mely__request_stop(rt);
}

/* Done when every stream is closed and no event holds one any more (the
 * events that carry a stream to other colors run, instead of being
 * discarded with their memory by the shutdown that follows); after the
 * timeout, when every stream is closed. */
static void check(struct mely__rt *rt)
{
    if (mely__drain_active(rt) && atomic_load(&rt->io->streams_open) == 0 &&
        (atomic_load(&rt->io->streams_alive) == 0 || atomic_load(&rt->io->drain_cut)))
        finish(rt);
}

/* Step 4: nothing queued or running anywhere (an idle worker's thread). */
static void on_quiet(struct mely__rt *rt)
{
    if (!mely__drain_active(rt))
        return;
    atomic_store(&rt->io->drain_quiet, true);
    if (mely__streams_ask_all(rt, MELY__ASK_QUIET) != 0) /* out of memory: cut short */
        mely__streams_ask_all(rt, MELY__ASK_CUT);
}

/* The drain's timeout: what is left closes without flushing. */
static void cut(void *arg)
{
    struct mely__rt *rt = arg;
    pthread_mutex_lock(&rt->io->stream_mu);
    bool on = atomic_exchange(&rt->io->drain_timer, 0) != 0;
    if (on)
        atomic_store(&rt->io->drain_cut, true);
    pthread_mutex_unlock(&rt->io->stream_mu);
    if (on) {
        mely__quiet_disarm(rt);
        mely__streams_ask_all(rt, MELY__ASK_CUT);
        check(rt);
    }
}

/* Marks the drain begun and sets its timer, both under stream_mu so that a
 * drain finishing at once (finish) finds the timer to cancel. */
static int begin(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = 0;
    mely_t m = mely__handle_of(rt);
    mely_timer_t t = 0;
    pthread_mutex_lock(&rt->io->stream_mu);
    if (atomic_load(&rt->io->draining))
        err = MELY_EBUSY;
    else if (timeout_ns)
        err = mely_timer_after(&m, timeout_ns, MELY_TO(MELY_COLOR_PINNED(0)), cut, rt, &t);
    if (!err) {
        atomic_store(&rt->io->drain_timer, t);
        atomic_store(&rt->io->drain_cut, false);
        atomic_store(&rt->io->drain_quiet, false);
        atomic_store(&rt->io->drain_watch, check);
        atomic_store(&rt->io->draining, true);
    }
    pthread_mutex_unlock(&rt->io->stream_mu);
    return err;
}

static int drain_in(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = begin(rt, timeout_ns);
    if (err)
        return err;
    mely__listeners_pause(rt);
    if (mely__streams_ask_all(rt, MELY__ASK_DRAIN) != 0) { /* out of memory: cut short */
        mely__streams_ask_all(rt, MELY__ASK_CUT);
    } else {
        /* Armed after the asks: their events are queued work too, so the
         * quiet moment comes after every stream heard of the drain. */
        mely__quiet_arm(rt, on_quiet);
    }
    check(rt); /* nothing to wait for? */
    return 0;
}

int mely_drain(mely_t *m, uint64_t timeout_ns)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, drain_in(rt, timeout_ns)) : MELY_ESHUTDOWN;
}
